/* RLE / bit-packing hybrid, DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT (Parquet Encodings.md). */
#include "parquet/encoding.h"
#include "util/alloc.h"

#include <string.h>

uint64_t pq_read_bits(const uint8_t *src, size_t src_len, uint64_t bitpos, int bit_width) {
    if (bit_width == 0) return 0;
    size_t byte = (size_t)(bitpos >> 3);
    int shift = (int)(bitpos & 7);
    uint64_t v;
    if (byte + 8 <= src_len) {
        memcpy(&v, src + byte, 8);
        v >>= shift;
        if (shift + bit_width > 64) v |= (uint64_t)src[byte + 8] << (64 - shift);
    } else {
        /* near the end of the buffer: byte by byte, never past src_len */
        v = 0;
        int got = 0;
        for (size_t b = byte; b < src_len && got < shift + bit_width; b++, got += 8) {
            if (got == 0) v = (uint64_t)src[b] >> shift;
            else if (got - shift < 64) v |= (uint64_t)src[b] << (got - shift);
        }
    }
    return bit_width == 64 ? v : v & ((UINT64_C(1) << bit_width) - 1);
}

static bool read_uvarint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return false;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

void pq_rle_init(pq_rle_decoder *d, const uint8_t *data, size_t size, int bit_width) {
    memset(d, 0, sizeof *d);
    d->p = data;
    d->end = data + size;
    d->bit_width = bit_width;
    d->value_bytes = (bit_width + 7) / 8;
    if (bit_width < 0 || bit_width > 32) d->error = "bit width over 32";
}

/* Starts the next run; false at the end of the data or on a malformed header. */
static bool next_run(pq_rle_decoder *d) {
    uint64_t header;
    if (!read_uvarint(&d->p, d->end, &header)) {
        d->error = "RLE data ends before all values were read";
        return false;
    }
    if (header & 1) {
        uint64_t groups = header >> 1;
        if (groups == 0 || groups > (UINT64_C(1) << 40)) {
            d->error = "bad bit-packed run length";
            return false;
        }
        uint64_t bytes = groups * (uint64_t)d->bit_width;
        size_t avail = (size_t)(d->end - d->p);
        d->packed = d->p;
        d->packed_len = bytes < avail ? (size_t)bytes : avail; /* a short last run is checked per value */
        d->packed_pos = 0;
        d->packed_left = groups * 8;
        d->p += d->packed_len;
    } else {
        uint64_t count = header >> 1;
        if (count == 0) {
            d->error = "RLE run of length 0";
            return false;
        }
        if ((size_t)(d->end - d->p) < (size_t)d->value_bytes) {
            d->error = "RLE run value runs past the end";
            return false;
        }
        uint32_t v = 0;
        for (int i = 0; i < d->value_bytes; i++) v |= (uint32_t)d->p[i] << (8 * i);
        d->p += d->value_bytes;
        if (d->bit_width < 32 && (v >> d->bit_width) != 0) {
            d->error = "RLE run value wider than the bit width";
            return false;
        }
        d->rle_value = v;
        d->rle_left = count;
    }
    return true;
}

/* Checks that the next k values of the current bit-packed run are present in the input. */
static bool packed_available(pq_rle_decoder *d, uint64_t k) {
    uint64_t end_bit = d->packed_pos + k * (uint64_t)d->bit_width;
    if ((end_bit + 7) / 8 > d->packed_len) {
        d->error = "bit-packed run is truncated";
        return false;
    }
    return true;
}

bool pq_rle_decode_u32(pq_rle_decoder *d, uint32_t *out, size_t n) {
    if (d->error) return false;
    size_t i = 0;
    while (i < n) {
        if (d->rle_left) {
            size_t k = d->rle_left < n - i ? (size_t)d->rle_left : n - i;
            for (size_t j = 0; j < k; j++) out[i + j] = d->rle_value;
            d->rle_left -= k;
            i += k;
        } else if (d->packed_left) {
            size_t k = d->packed_left < n - i ? (size_t)d->packed_left : n - i;
            if (!packed_available(d, k)) return false;
            int bw = d->bit_width;
            for (size_t j = 0; j < k; j++, d->packed_pos += (uint64_t)bw)
                out[i + j] = (uint32_t)pq_read_bits(d->packed, d->packed_len, d->packed_pos, bw);
            d->packed_left -= k;
            i += k;
        } else if (!next_run(d)) {
            return false;
        }
    }
    return true;
}

bool pq_rle_decode_u8(pq_rle_decoder *d, uint8_t *out, size_t n) {
    if (d->error) return false;
    if (d->bit_width > 8) {
        d->error = "bit width over 8 for byte values";
        return false;
    }
    size_t i = 0;
    while (i < n) {
        if (d->rle_left) {
            size_t k = d->rle_left < n - i ? (size_t)d->rle_left : n - i;
            memset(out + i, (int)d->rle_value, k);
            d->rle_left -= k;
            i += k;
        } else if (d->packed_left) {
            size_t k = d->packed_left < n - i ? (size_t)d->packed_left : n - i;
            if (!packed_available(d, k)) return false;
            int bw = d->bit_width;
            if (bw == 1 && (d->packed_pos & 7) == 0) {
                /* the common case (levels, booleans): whole bytes of 8 flags */
                const uint8_t *src = d->packed + (d->packed_pos >> 3);
                size_t j = 0;
                for (; j + 8 <= k; j += 8, src++)
                    for (int b = 0; b < 8; b++) out[i + j + (size_t)b] = (uint8_t)((*src >> b) & 1);
                for (int b = 0; j < k; j++, b++) out[i + j] = (uint8_t)((*src >> b) & 1);
                d->packed_pos += k;
            } else {
                for (size_t j = 0; j < k; j++, d->packed_pos += (uint64_t)bw)
                    out[i + j] = (uint8_t)pq_read_bits(d->packed, d->packed_len, d->packed_pos, bw);
            }
            d->packed_left -= k;
            i += k;
        } else if (!next_run(d)) {
            return false;
        }
    }
    return true;
}

/* ---- encoder ---- */

static void append(uint8_t **buf, size_t *len, size_t *cap, const void *data, size_t n) {
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n) c *= 2;
        *buf = ftl_xrealloc(*buf, c);
        *cap = c;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
}

static void append_uvarint(uint8_t **buf, size_t *len, size_t *cap, uint64_t v) {
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    append(buf, len, cap, tmp, (size_t)n);
}

/* Emits values[start .. start + groups*8) (zero-padded past n) as one bit-packed run. */
static void flush_packed(const uint8_t *values, size_t n, size_t start, size_t groups, int bw, uint8_t **buf, size_t *len, size_t *cap) {
    if (!groups) return;
    append_uvarint(buf, len, cap, (uint64_t)groups << 1 | 1);
    uint8_t packed[8];
    for (size_t g = 0; g < groups; g++) {
        memset(packed, 0, sizeof packed);
        uint32_t bit = 0;
        for (size_t j = 0; j < 8; j++) {
            size_t idx = start + g * 8 + j;
            uint32_t v = idx < n ? values[idx] : 0;
            for (int b = 0; b < bw; b++, bit++)
                if (v >> b & 1) packed[bit >> 3] |= (uint8_t)(1u << (bit & 7));
        }
        append(buf, len, cap, packed, (size_t)bw);
    }
}

size_t pq_rle_encode_u8(const uint8_t *values, size_t n, int bw, uint8_t **buf, size_t *len, size_t *cap) {
    size_t before = *len;
    size_t i = 0, lit_start = 0, lit_groups = 0;
    while (i < n) {
        size_t r = 1;
        while (i + r < n && values[i + r] == values[i]) r++;
        if (r >= 8) {
            flush_packed(values, n, lit_start, lit_groups, bw, buf, len, cap);
            lit_groups = 0;
            append_uvarint(buf, len, cap, (uint64_t)r << 1);
            if (bw > 0) append(buf, len, cap, &values[i], 1);
            i += r;
            continue;
        }
        if (lit_groups == 0) lit_start = i;
        lit_groups++;
        i += 8;
    }
    flush_packed(values, n, lit_start, lit_groups, bw, buf, len, cap);
    return *len - before;
}

bool pq_bitpacked_msb_decode(const uint8_t *data, size_t size, int bw, uint8_t *out, size_t n) {
    if (bw < 0 || bw > 8 || (n * (size_t)bw + 7) / 8 > size) return false;
    size_t bit = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int b = 0; b < bw; b++, bit++) v = v << 1 | (data[bit >> 3] >> (7 - (bit & 7)) & 1);
        out[i] = (uint8_t)v;
    }
    return true;
}

/* ---- DELTA_BINARY_PACKED ---- */

typedef struct delta_header {
    uint64_t block_size, miniblocks, total;
    int64_t first;
} delta_header;

static bool read_delta_header(const uint8_t **p, const uint8_t *end, delta_header *h, const char **err) {
    uint64_t zz;
    if (!read_uvarint(p, end, &h->block_size) || !read_uvarint(p, end, &h->miniblocks) ||
        !read_uvarint(p, end, &h->total) || !read_uvarint(p, end, &zz)) {
        *err = "DELTA_BINARY_PACKED header is truncated";
        return false;
    }
    h->first = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
    if (h->block_size == 0 || h->miniblocks == 0 || h->block_size > (1u << 20) || h->block_size % h->miniblocks != 0 ||
        (h->block_size / h->miniblocks) % 8 != 0) {
        *err = "DELTA_BINARY_PACKED header has a bad block layout";
        return false;
    }
    return true;
}

bool pq_delta_decode(const uint8_t *data, size_t size, int64_t *out, size_t count, size_t *used, const char **err) {
    const uint8_t *p = data, *end = data + size;
    delta_header h;
    if (!read_delta_header(&p, end, &h, err)) return false;
    if (h.total != count) {
        *err = "DELTA_BINARY_PACKED value count differs from the page's";
        return false;
    }
    size_t per_mb = (size_t)(h.block_size / h.miniblocks);
    uint64_t last = (uint64_t)h.first;
    if (count > 0) out[0] = h.first;
    size_t k = count > 0 ? 1 : 0;
    while (k < count) {
        uint64_t zz;
        if (!read_uvarint(&p, end, &zz)) {
            *err = "DELTA_BINARY_PACKED block header is truncated";
            return false;
        }
        uint64_t min_delta = (zz >> 1) ^ (uint64_t)-(int64_t)(zz & 1);
        if ((uint64_t)(end - p) < h.miniblocks) {
            *err = "DELTA_BINARY_PACKED bit widths are truncated";
            return false;
        }
        const uint8_t *widths = p;
        p += h.miniblocks;
        for (uint64_t m = 0; m < h.miniblocks && k < count; m++) {
            int bw = widths[m];
            if (bw > 64) {
                *err = "DELTA_BINARY_PACKED bit width over 64";
                return false;
            }
            size_t n = count - k < per_mb ? count - k : per_mb;
            size_t full = per_mb * (size_t)bw / 8;
            size_t need = (n * (size_t)bw + 7) / 8;
            size_t avail = (size_t)(end - p);
            if (need > avail) {
                *err = "DELTA_BINARY_PACKED miniblock is truncated";
                return false;
            }
            size_t len = full < avail ? full : avail; /* the last miniblock may be cut short */
            for (size_t j = 0; j < n; j++) {
                last += min_delta + pq_read_bits(p, len, (uint64_t)j * (uint64_t)bw, bw);
                out[k++] = (int64_t)last;
            }
            p += len;
        }
    }
    *used = (size_t)(p - data);
    return true;
}

bool pq_byte_stream_split_decode(const uint8_t *data, size_t size, size_t count, int width, uint8_t *out, const char **err) {
    if (width <= 0 || count > size / (size_t)width || count * (size_t)width != size) {
        *err = "BYTE_STREAM_SPLIT data size does not match the value count";
        return false;
    }
    for (int s = 0; s < width; s++) {
        const uint8_t *stream = data + (size_t)s * count;
        for (size_t i = 0; i < count; i++) out[i * (size_t)width + (size_t)s] = stream[i];
    }
    return true;
}
