/* Codecs over the Debian libraries. Each call is self-contained (no shared state), so pages can
 * be decompressed from several threads at once. */
#include "parquet/codec.h"

#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

bool pq_codec_supported(int codec) {
    return codec == FTL_PARQUET_CODEC_NONE || codec == FTL_PARQUET_CODEC_SNAPPY || codec == FTL_PARQUET_CODEC_GZIP ||
           codec == FTL_PARQUET_CODEC_ZSTD;
}

uint64_t pq_codec_max_expansion(int codec, uint64_t c) {
    switch (codec) {
    case FTL_PARQUET_CODEC_NONE: return c;
    case FTL_PARQUET_CODEC_SNAPPY: return c * 32 + 64;      /* a 2-byte copy emits at most 64 bytes */
    case FTL_PARQUET_CODEC_GZIP: return c * 1040 + 1024;    /* deflate's limit is ~1032:1 */
    case FTL_PARQUET_CODEC_ZSTD: return c * 65536 + 65536;  /* RLE blocks: 3-4 bytes per 128 KiB block */
    }
    return c;
}

static bool gunzip(const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size, const char **err) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 32) != Z_OK) { /* 15 + 32: gzip or zlib header, detected */
        *err = "zlib initialisation failed";
        return false;
    }
    zs.next_in = (Bytef *)src;
    zs.avail_in = (uInt)src_size;
    zs.next_out = dst;
    zs.avail_out = (uInt)dst_size;
    bool ok = false;
    for (;;) {
        int rc = inflate(&zs, Z_FINISH);
        if (rc == Z_STREAM_END) {
            /* several gzip members may follow each other */
            if (zs.avail_in > 0 && zs.avail_out > 0 && inflateReset(&zs) == Z_OK) continue;
            ok = zs.avail_out == 0;
            *err = ok ? NULL : "gzip data is shorter than the page size";
            break;
        }
        if (rc == Z_BUF_ERROR && zs.avail_out == 0) {
            *err = "gzip data is longer than the page size";
            break;
        }
        *err = rc == Z_DATA_ERROR ? "corrupt gzip data" : "truncated gzip data";
        break;
    }
    inflateEnd(&zs);
    return ok;
}

bool pq_decompress(int codec, const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size, const char **err) {
    *err = NULL;
    switch (codec) {
    case FTL_PARQUET_CODEC_NONE:
        if (src_size != dst_size) {
            *err = "uncompressed page sizes differ";
            return false;
        }
        if (dst != src && src_size) memcpy(dst, src, src_size);
        return true;
    case FTL_PARQUET_CODEC_SNAPPY: {
        size_t n;
        if (snappy_uncompressed_length((const char *)src, src_size, &n) != SNAPPY_OK) {
            *err = "corrupt snappy data";
            return false;
        }
        if (n != dst_size) {
            *err = "snappy data size differs from the page header's";
            return false;
        }
        size_t out = dst_size;
        if (snappy_uncompress((const char *)src, src_size, (char *)dst, &out) != SNAPPY_OK || out != dst_size) {
            *err = "corrupt snappy data";
            return false;
        }
        return true;
    }
    case FTL_PARQUET_CODEC_GZIP:
        if (src_size > UINT32_MAX || dst_size > UINT32_MAX) {
            *err = "gzip page over 4 GiB";
            return false;
        }
        return gunzip(src, src_size, dst, dst_size, err);
    case FTL_PARQUET_CODEC_ZSTD: {
        unsigned long long fs = ZSTD_getFrameContentSize(src, src_size);
        if (fs == ZSTD_CONTENTSIZE_ERROR) {
            *err = "corrupt zstd data";
            return false;
        }
        /* only the first frame's size is known here; a page may hold several frames */
        if (fs != ZSTD_CONTENTSIZE_UNKNOWN && fs > dst_size) {
            *err = "zstd data size differs from the page header's";
            return false;
        }
        size_t n = ZSTD_decompress(dst, dst_size, src, src_size);
        if (ZSTD_isError(n)) {
            *err = "corrupt zstd data";
            return false;
        }
        if (n != dst_size) {
            *err = "zstd data size differs from the page header's";
            return false;
        }
        return true;
    }
    }
    *err = "unsupported codec";
    return false;
}

size_t pq_compress_bound(int codec, size_t n) {
    switch (codec) {
    case FTL_PARQUET_CODEC_SNAPPY: return snappy_max_compressed_length(n);
    case FTL_PARQUET_CODEC_GZIP: return compressBound((uLong)n) + 32; /* + gzip header/trailer */
    case FTL_PARQUET_CODEC_ZSTD: return ZSTD_compressBound(n);
    }
    return n;
}

size_t pq_compress(int codec, int level, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, const char **err) {
    *err = NULL;
    switch (codec) {
    case FTL_PARQUET_CODEC_NONE:
        if (cap < n) break;
        if (n) memcpy(dst, src, n);
        return n;
    case FTL_PARQUET_CODEC_SNAPPY: {
        size_t out = cap;
        if (snappy_compress((const char *)src, n, (char *)dst, &out) == SNAPPY_OK) return out;
        break;
    }
    case FTL_PARQUET_CODEC_GZIP: {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        /* 15 + 16: a gzip header, as the Parquet spec asks for GZIP */
        if (deflateInit2(&zs, level ? level : 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) break;
        zs.next_in = (Bytef *)src;
        zs.avail_in = (uInt)n;
        zs.next_out = dst;
        zs.avail_out = (uInt)cap;
        int rc = deflate(&zs, Z_FINISH);
        size_t out = zs.total_out;
        deflateEnd(&zs);
        if (rc == Z_STREAM_END) return out;
        break;
    }
    case FTL_PARQUET_CODEC_ZSTD: {
        size_t out = ZSTD_compress(dst, cap, src, n, level ? level : 3);
        if (!ZSTD_isError(out)) return out;
        break;
    }
    default: *err = "unsupported codec"; return 0;
    }
    *err = "compression failed";
    return 0;
}
