/* Value decoders for one data page: fixed-width and byte-array values in every encoding ftl
 * reads, scattered to their rows around nulls, into buffers freed here. All sizes are checked
 * against the page. */
#include "parquet/column_decode.h"
#include "parquet/encoding.h"

#include <stdlib.h>
#include <string.h>

bool pq_slot_reserve(ftl_parquet_column_values *v, int slot, size_t bytes, bool keep) {
    if (bytes == 0) bytes = 1;
    if (bytes <= v->priv_cap_[slot]) return true;
    if ((uint64_t)bytes > PQ_MAX_DECODED_BYTES) return false;
    size_t cap = v->priv_cap_[slot] + v->priv_cap_[slot] / 2;
    if (cap < bytes || (uint64_t)cap > PQ_MAX_DECODED_BYTES) cap = bytes;
    void *p;
    if (keep) {
        p = realloc(v->priv_[slot], cap);
    } else {
        free(v->priv_[slot]);
        v->priv_[slot] = NULL;
        v->priv_cap_[slot] = 0;
        p = malloc(cap);
    }
    if (!p) return false;
    v->priv_[slot] = p;
    v->priv_cap_[slot] = cap;
    return true;
}

static ftl_status fail(pq_decoder *d, ftl_status code, const char *err) {
    d->err = err;
    return code;
}

static ftl_status no_memory(pq_decoder *d) {
    return fail(d, FTL_E_NOMEM, "out of memory (or the page decodes to more than 16 GiB)");
}

static uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Copies the page's packed non-null values (w bytes each) to their rows; null rows get zeros. */
static void scatter(uint8_t *dst, const uint8_t *valid, int64_t rows, const uint8_t *src, int w) {
    if (!valid) {
        if (rows) memcpy(dst, src, (size_t)rows * (size_t)w);
        return;
    }
    for (int64_t r = 0; r < rows; r++, dst += w) {
        if (valid[r]) {
            memcpy(dst, src, (size_t)w);
            src += w;
        } else {
            memset(dst, 0, (size_t)w);
        }
    }
}

ftl_status pq_load_dictionary(pq_decoder *d, const uint8_t *p, size_t n, int64_t count) {
    ftl_parquet_column_values *v = d->out;
    if (count < 0) return fail(d, FTL_E_FORMAT, "negative dictionary size");
    if (d->type == FTL_PARQUET_BYTE_ARRAY) {
        if ((uint64_t)count > n / 4) return fail(d, FTL_E_FORMAT, "dictionary page is shorter than its value count");
        if (!pq_slot_reserve(v, SLOT_DICT_INDEX, (size_t)count * 8, false)) return no_memory(d);
        uint64_t *entries = pq_slot(v, SLOT_DICT_INDEX);
        size_t pos = 0;
        for (int64_t i = 0; i < count; i++) {
            if (n - pos < 4) return fail(d, FTL_E_FORMAT, "dictionary page is truncated");
            uint32_t len = load_u32(p + pos);
            pos += 4;
            if (len > n - pos) return fail(d, FTL_E_FORMAT, "dictionary value runs past the page");
            entries[i] = (uint64_t)pos << 32 | len; /* pages are < 2 GiB: both fit in 32 bits */
            pos += len;
        }
        d->dict_entries = entries;
        d->dict_data = p;
    } else if (d->type == FTL_PARQUET_BOOLEAN) {
        if ((uint64_t)count > (uint64_t)n * 8) return fail(d, FTL_E_FORMAT, "dictionary page is shorter than its value count");
        if (!pq_slot_reserve(v, SLOT_DICT_INDEX, (size_t)count, false)) return no_memory(d);
        uint8_t *b = pq_slot(v, SLOT_DICT_INDEX);
        for (int64_t i = 0; i < count; i++) b[i] = (uint8_t)(p[i >> 3] >> (i & 7) & 1);
        d->dict_fixed = b;
    } else {
        if ((uint64_t)count > n / (uint64_t)d->width) return fail(d, FTL_E_FORMAT, "dictionary page is shorter than its value count");
        d->dict_fixed = p;
    }
    d->has_dict = true;
    d->dict_count = count;
    return FTL_OK;
}

/* Dictionary indices of the page's non-null values into SLOT_SCRATCH_A, range-checked. */
static ftl_status decode_indices(pq_decoder *d, const uint8_t *p, size_t n, uint32_t **out) {
    size_t k = (size_t)d->nonnull;
    if (!pq_slot_reserve(d->out, SLOT_SCRATCH_A, k * 4, false)) return no_memory(d);
    uint32_t *idx = pq_slot(d->out, SLOT_SCRATCH_A);
    *out = idx;
    if (k == 0) return FTL_OK; /* an all-null page needs no dictionary */
    if (!d->has_dict) return fail(d, FTL_E_FORMAT, "dictionary-encoded page without a dictionary page");
    if (n < 1) return fail(d, FTL_E_FORMAT, "dictionary-encoded page without a bit width");
    if (p[0] > 32) return fail(d, FTL_E_FORMAT, "dictionary index bit width over 32");
    pq_rle_decoder rle;
    pq_rle_init(&rle, p + 1, n - 1, p[0]);
    if (!pq_rle_decode_u32(&rle, idx, k)) return fail(d, FTL_E_FORMAT, rle.error);
    for (size_t i = 0; i < k; i++)
        if ((int64_t)idx[i] >= d->dict_count) return fail(d, FTL_E_FORMAT, "dictionary index out of range");
    return FTL_OK;
}

static ftl_status decode_booleans(pq_decoder *d, int encoding, const uint8_t *p, size_t n, uint8_t *dst) {
    size_t k = (size_t)d->nonnull;
    uint8_t *tmp = dst;
    if (d->valid) {
        if (!pq_slot_reserve(d->out, SLOT_SCRATCH_A, k, false)) return no_memory(d);
        tmp = pq_slot(d->out, SLOT_SCRATCH_A);
    }
    if (encoding == FTL_PARQUET_ENC_PLAIN) {
        if ((k + 7) / 8 > n) return fail(d, FTL_E_FORMAT, "page holds fewer booleans than its value count");
        for (size_t i = 0; i < k; i++) tmp[i] = (uint8_t)(p[i >> 3] >> (i & 7) & 1);
    } else { /* RLE, with a 4-byte length prefix */
        if (k == 0) return FTL_OK;
        if (n < 4 || load_u32(p) > n - 4) return fail(d, FTL_E_FORMAT, "RLE boolean data length runs past the page");
        pq_rle_decoder rle;
        pq_rle_init(&rle, p + 4, load_u32(p), 1);
        if (!pq_rle_decode_u8(&rle, tmp, k)) return fail(d, FTL_E_FORMAT, rle.error);
    }
    if (d->valid) scatter(dst, d->valid, d->page_rows, tmp, 1);
    return FTL_OK;
}

/* Appends the page's k non-null byte-array values to SLOT_DATA (at out->data_size) and writes
 * each one's end offset to ends[0..k). Sizes are computed and checked before copying. */
static ftl_status append_byte_values(pq_decoder *d, int encoding, const uint8_t *p, size_t n, int64_t *ends) {
    ftl_parquet_column_values *v = d->out;
    size_t k = (size_t)d->nonnull;
    uint64_t total = 0;
    if (encoding == FTL_PARQUET_ENC_PLAIN) {
        size_t pos = 0;
        for (size_t i = 0; i < k; i++) {
            if (n - pos < 4) return fail(d, FTL_E_FORMAT, "page holds fewer values than its value count");
            uint32_t len = load_u32(p + pos);
            pos += 4;
            if (len > n - pos) return fail(d, FTL_E_FORMAT, "byte array value runs past the page");
            pos += len;
            total += len;
        }
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)((uint64_t)v->data_size + total), true)) return no_memory(d);
        uint8_t *data = pq_slot(v, SLOT_DATA);
        int64_t at = v->data_size;
        pos = 0;
        for (size_t i = 0; i < k; i++) {
            uint32_t len = load_u32(p + pos);
            memcpy(data + at, p + pos + 4, len);
            pos += 4 + (size_t)len;
            at += len;
            ends[i] = at;
        }
        v->data_size = at;
        return FTL_OK;
    }
    if (encoding == FTL_PARQUET_ENC_PLAIN_DICTIONARY || encoding == FTL_PARQUET_ENC_RLE_DICTIONARY) {
        uint32_t *idx;
        ftl_status st = decode_indices(d, p, n, &idx);
        if (st != FTL_OK) return st;
        for (size_t i = 0; i < k; i++) total += (uint32_t)d->dict_entries[idx[i]];
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)((uint64_t)v->data_size + total), true)) return no_memory(d);
        uint8_t *data = pq_slot(v, SLOT_DATA);
        int64_t at = v->data_size;
        for (size_t i = 0; i < k; i++) {
            uint64_t e = d->dict_entries[idx[i]];
            uint32_t len = (uint32_t)e;
            memcpy(data + at, d->dict_data + (e >> 32), len);
            at += len;
            ends[i] = at;
        }
        v->data_size = at;
        return FTL_OK;
    }
    if (encoding == FTL_PARQUET_ENC_DELTA_LENGTH_BYTE_ARRAY) {
        if (!pq_slot_reserve(v, SLOT_SCRATCH_A, k * 8, false)) return no_memory(d);
        int64_t *lens = pq_slot(v, SLOT_SCRATCH_A);
        size_t used = 0;
        if (k == 0) return FTL_OK;
        if (!pq_delta_decode(p, n, lens, k, &used, &d->err)) return FTL_E_FORMAT;
        for (size_t i = 0; i < k; i++) {
            if (lens[i] < 0 || (uint64_t)lens[i] > n) return fail(d, FTL_E_FORMAT, "bad DELTA_LENGTH_BYTE_ARRAY length");
            total += (uint64_t)lens[i];
        }
        if (total > n - used) return fail(d, FTL_E_FORMAT, "DELTA_LENGTH_BYTE_ARRAY values run past the page");
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)((uint64_t)v->data_size + total), true)) return no_memory(d);
        uint8_t *data = pq_slot(v, SLOT_DATA);
        memcpy(data + v->data_size, p + used, (size_t)total);
        int64_t at = v->data_size;
        for (size_t i = 0; i < k; i++) {
            at += lens[i];
            ends[i] = at;
        }
        v->data_size = at;
        return FTL_OK;
    }
    if (encoding == FTL_PARQUET_ENC_DELTA_BYTE_ARRAY) {
        if (!pq_slot_reserve(v, SLOT_SCRATCH_A, k * 8, false) || !pq_slot_reserve(v, SLOT_SCRATCH_C, k * 8, false))
            return no_memory(d);
        int64_t *prefix = pq_slot(v, SLOT_SCRATCH_A), *suffix = pq_slot(v, SLOT_SCRATCH_C);
        if (k == 0) return FTL_OK;
        size_t u1 = 0, u2 = 0;
        if (!pq_delta_decode(p, n, prefix, k, &u1, &d->err)) return FTL_E_FORMAT;
        if (!pq_delta_decode(p + u1, n - u1, suffix, k, &u2, &d->err)) return FTL_E_FORMAT;
        size_t avail = n - u1 - u2;
        uint64_t suffix_total = 0;
        int64_t prev_len = 0;
        for (size_t i = 0; i < k; i++) {
            if (suffix[i] < 0 || (uint64_t)suffix[i] > avail) return fail(d, FTL_E_FORMAT, "bad DELTA_BYTE_ARRAY suffix length");
            if (prefix[i] < 0 || prefix[i] > prev_len) return fail(d, FTL_E_FORMAT, "DELTA_BYTE_ARRAY prefix longer than the previous value");
            suffix_total += (uint64_t)suffix[i];
            prev_len = prefix[i] + suffix[i];
            total += (uint64_t)prev_len;
        }
        if (suffix_total > avail) return fail(d, FTL_E_FORMAT, "DELTA_BYTE_ARRAY values run past the page");
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)((uint64_t)v->data_size + total), true)) return no_memory(d);
        uint8_t *data = pq_slot(v, SLOT_DATA);
        const uint8_t *src = p + u1 + u2;
        int64_t at = v->data_size, prev_start = at;
        for (size_t i = 0; i < k; i++) {
            memmove(data + at, data + prev_start, (size_t)prefix[i]);
            memcpy(data + at + prefix[i], src, (size_t)suffix[i]);
            src += suffix[i];
            prev_start = at;
            at += prefix[i] + suffix[i];
            ends[i] = at;
        }
        v->data_size = at;
        return FTL_OK;
    }
    return fail(d, FTL_E_UNSUPPORTED, "encoding not supported for byte arrays");
}

ftl_status pq_decode_bytes(pq_decoder *d, int encoding, const uint8_t *p, size_t n) {
    ftl_parquet_column_values *v = d->out;
    int64_t *offsets = pq_slot(v, SLOT_VALUES);
    if (!d->valid) return append_byte_values(d, encoding, p, n, offsets + d->row_base + 1);
    if (!pq_slot_reserve(v, SLOT_SCRATCH_B, (size_t)d->nonnull * 8, false)) return no_memory(d);
    int64_t *ends = pq_slot(v, SLOT_SCRATCH_B);
    ftl_status st = append_byte_values(d, encoding, p, n, ends);
    if (st != FTL_OK) return st;
    offsets = pq_slot(v, SLOT_VALUES);
    int64_t off = offsets[d->row_base];
    for (int64_t r = 0, j = 0; r < d->page_rows; r++) {
        if (d->valid[r]) off = ends[j++];
        offsets[d->row_base + r + 1] = off;
    }
    return FTL_OK;
}

ftl_status pq_decode_fixed(pq_decoder *d, int encoding, const uint8_t *p, size_t n) {
    ftl_parquet_column_values *v = d->out;
    int w = d->width;
    size_t k = (size_t)d->nonnull;
    uint8_t *dst = (uint8_t *)pq_slot(v, SLOT_VALUES) + (size_t)d->row_base * (size_t)w;
    if (d->type == FTL_PARQUET_BOOLEAN &&
        (encoding == FTL_PARQUET_ENC_PLAIN || encoding == FTL_PARQUET_ENC_RLE))
        return decode_booleans(d, encoding, p, n, dst);
    switch (encoding) {
    case FTL_PARQUET_ENC_PLAIN:
        if (k > n / (size_t)w) return fail(d, FTL_E_FORMAT, "page holds fewer values than its value count");
        scatter(dst, d->valid, d->page_rows, p, w);
        return FTL_OK;
    case FTL_PARQUET_ENC_PLAIN_DICTIONARY:
    case FTL_PARQUET_ENC_RLE_DICTIONARY: {
        uint32_t *idx;
        ftl_status st = decode_indices(d, p, n, &idx);
        if (st != FTL_OK) return st;
        for (int64_t r = 0, j = 0; r < d->page_rows; r++, dst += w) {
            if (d->valid && !d->valid[r]) memset(dst, 0, (size_t)w);
            else memcpy(dst, d->dict_fixed + (size_t)idx[j++] * (size_t)w, (size_t)w);
        }
        return FTL_OK;
    }
    case FTL_PARQUET_ENC_DELTA_BINARY_PACKED: {
        if (d->type != FTL_PARQUET_INT32 && d->type != FTL_PARQUET_INT64) break;
        if (!pq_slot_reserve(v, SLOT_SCRATCH_A, k * 8, false)) return no_memory(d);
        int64_t *vals = pq_slot(v, SLOT_SCRATCH_A);
        size_t used;
        if (k > 0 && !pq_delta_decode(p, n, vals, k, &used, &d->err)) return FTL_E_FORMAT;
        if (d->type == FTL_PARQUET_INT32) { /* narrow in place: value i moves from 8i to 4i */
            uint8_t *bytes = (uint8_t *)vals;
            for (size_t i = 0; i < k; i++) {
                int64_t x;
                memcpy(&x, bytes + i * 8, 8);
                int32_t y = (int32_t)(uint32_t)(uint64_t)x;
                memcpy(bytes + i * 4, &y, 4);
            }
        }
        scatter(dst, d->valid, d->page_rows, (const uint8_t *)vals, w);
        return FTL_OK;
    }
    case FTL_PARQUET_ENC_BYTE_STREAM_SPLIT: {
        if (d->type == FTL_PARQUET_BOOLEAN) break;
        if (!pq_slot_reserve(v, SLOT_SCRATCH_A, k * (size_t)w, false)) return no_memory(d);
        uint8_t *tmp = pq_slot(v, SLOT_SCRATCH_A);
        if (!pq_byte_stream_split_decode(p, n, k, w, tmp, &d->err)) return FTL_E_FORMAT;
        scatter(dst, d->valid, d->page_rows, tmp, w);
        return FTL_OK;
    }
    case FTL_PARQUET_ENC_DELTA_BYTE_ARRAY: {
        if (d->type != FTL_PARQUET_FIXED_LEN_BYTE_ARRAY) break;
        /* decode as byte arrays into the (otherwise unused) data slot, then check the lengths */
        if (!pq_slot_reserve(v, SLOT_SCRATCH_B, k * 8, false)) return no_memory(d);
        int64_t *ends = pq_slot(v, SLOT_SCRATCH_B);
        v->data_size = 0;
        ftl_status st = append_byte_values(d, encoding, p, n, ends);
        v->data_size = 0;
        if (st != FTL_OK) return st;
        for (size_t i = 0; i < k; i++)
            if (ends[i] != (int64_t)(i + 1) * w) return fail(d, FTL_E_FORMAT, "value length differs from the column's fixed length");
        dst = (uint8_t *)pq_slot(v, SLOT_VALUES) + (size_t)d->row_base * (size_t)w;
        scatter(dst, d->valid, d->page_rows, pq_slot(v, SLOT_DATA), w);
        return FTL_OK;
    }
    default: break;
    }
    return fail(d, FTL_E_UNSUPPORTED, "encoding not supported for this physical type");
}

void ftl_parquet_column_values_free(ftl_parquet_column_values *v) {
    if (!v) return;
    for (int i = 0; i < (int)(sizeof v->priv_ / sizeof v->priv_[0]); i++) free(v->priv_[i]);
    memset(v, 0, sizeof *v);
}
