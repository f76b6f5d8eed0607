/* AVX2 and AVX-512 resampling kernels (chosen at run time; the library itself needs only
 * x86-64 baseline). Same int32 fixed-point arithmetic as the scalar kernels, so the results are
 * identical; the speed comes from the memory layout:
 *  - vertical pass: the lanes run along a row (all bytes of an output row are independent);
 *  - horizontal pass: 16 rows are transposed at once into a column-major strip (16 bytes = one
 *    image column of 16 rows), so the lanes run across rows and every tap is one contiguous
 *    load; the 16 x out_width results are transposed back with the same byte-transpose network. */
#include "image/image_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512bw")))

enum { STRIP = 16 };
static const int32_t round_half = 1 << (FTL_RESAMPLE_PRECISION_BITS - 1);

/* ---- 16 x 16 byte transposes (per 128-bit lane, so a ymm does two blocks side by side) ---- */

/* r[j] holds 16 (or 2 x 16) bytes of input row j; afterwards r[i] holds column i. */
TARGET_AVX2 __attribute__((always_inline)) static inline void transpose_regs(__m256i r[16]) {
    __m256i a[16], b[16];
    for (int p = 0; p < 8; p++) {
        a[2 * p] = _mm256_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
        a[2 * p + 1] = _mm256_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
    }
    /* a[2p + h]: rows 2p..2p+1 as byte pairs, columns 8h..8h+7. */
    for (int q = 0; q < 4; q++)
        for (int h = 0; h < 2; h++) {
            b[4 * q + 2 * h] = _mm256_unpacklo_epi16(a[4 * q + h], a[4 * q + 2 + h]);
            b[4 * q + 2 * h + 1] = _mm256_unpackhi_epi16(a[4 * q + h], a[4 * q + 2 + h]);
        }
    /* b[4q + 2h + g]: rows 4q..4q+3, columns 8h + 4g .. +3. */
    for (int m = 0; m < 2; m++)
        for (int hg = 0; hg < 4; hg++) {
            a[8 * m + 2 * hg] = _mm256_unpacklo_epi32(b[8 * m + hg], b[8 * m + 4 + hg]);
            a[8 * m + 2 * hg + 1] = _mm256_unpackhi_epi32(b[8 * m + hg], b[8 * m + 4 + hg]);
        }
    /* a[8m + 2(2h + g) + e]: rows 8m..8m+7, columns 8h + 4g + 2e .. +1. */
    for (int c2 = 0; c2 < 8; c2++) {
        r[2 * c2] = _mm256_unpacklo_epi64(a[c2], a[8 + c2]);
        r[2 * c2 + 1] = _mm256_unpackhi_epi64(a[c2], a[8 + c2]);
    }
}

/* Rows -> column-major strip: strip[c * 16 + j] = rows[j][c] for c < ncols. */
TARGET_AVX2 static void rows_to_strip(const uint8_t *const rows[STRIP], int ncols, uint8_t *strip) {
    int c = 0;
    __m256i r[16];
    for (; c + 32 <= ncols; c += 32) {
        for (int j = 0; j < 16; j++) r[j] = _mm256_loadu_si256((const __m256i *)(rows[j] + c));
        transpose_regs(r);
        for (int i = 0; i < 16; i++) {
            _mm_storeu_si128((__m128i *)(strip + (size_t)(c + i) * 16), _mm256_castsi256_si128(r[i]));
            _mm_storeu_si128((__m128i *)(strip + (size_t)(c + 16 + i) * 16), _mm256_extracti128_si256(r[i], 1));
        }
    }
    for (; c + 16 <= ncols; c += 16) {
        for (int j = 0; j < 16; j++)
            r[j] = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(rows[j] + c)));
        transpose_regs(r);
        for (int i = 0; i < 16; i++)
            _mm_storeu_si128((__m128i *)(strip + (size_t)(c + i) * 16), _mm256_castsi256_si128(r[i]));
    }
    for (; c < ncols; c++)
        for (int j = 0; j < 16; j++) strip[(size_t)c * 16 + j] = rows[j][c];
}

/* Column-major strip -> rows: dst[i * stride + c] = strip[c * 16 + i] for 16 rows. */
TARGET_AVX2 static void strip_to_rows(const uint8_t *strip, int ncols, uint8_t *dst, size_t stride) {
    int c = 0;
    __m256i r[16];
    for (; c + 32 <= ncols; c += 32) {
        for (int j = 0; j < 16; j++)
            r[j] = _mm256_loadu2_m128i((const __m128i *)(strip + (size_t)(c + 16 + j) * 16),
                                       (const __m128i *)(strip + (size_t)(c + j) * 16));
        transpose_regs(r);
        for (int i = 0; i < 16; i++) _mm256_storeu_si256((__m256i *)(dst + i * stride + c), r[i]);
    }
    for (; c + 16 <= ncols; c += 16) {
        for (int j = 0; j < 16; j++)
            r[j] = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(strip + (size_t)(c + j) * 16)));
        transpose_regs(r);
        for (int i = 0; i < 16; i++)
            _mm_storeu_si128((__m128i *)(dst + i * stride + c), _mm256_castsi256_si128(r[i]));
    }
    for (; c < ncols; c++)
        for (int i = 0; i < 16; i++) dst[i * stride + c] = strip[(size_t)c * 16 + i];
}

/* ---- Horizontal pass driver: transpose in, convolve columns, transpose out ---------------- */

typedef void (*columns_fn)(const uint8_t *in_strip, const ftl_resample_axis *ax, uint8_t *out_strip);

static inline size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static inline void hpass_strips(const uint8_t *in, size_t in_stride, int rows, uint8_t *out,
                                size_t out_stride, const ftl_resample_axis *ax, uint8_t *strip,
                                columns_fn columns) {
    const int ncols = (ax->last - ax->first) * 3, ocols = ax->out_size * 3;
    /* strip scratch: input strip, output strip, bounce rows for a partial last strip */
    uint8_t *tin = strip;
    uint8_t *tout = tin + align64((size_t)ncols * 16 + 64);
    uint8_t *bounce = tout + align64((size_t)ocols * 16 + 64);
    for (int r0 = 0; r0 < rows; r0 += STRIP) {
        int nr = rows - r0 < STRIP ? rows - r0 : STRIP;
        const uint8_t *rp[STRIP];
        for (int j = 0; j < STRIP; j++)
            rp[j] = in + (size_t)(r0 + (j < nr ? j : nr - 1)) * in_stride + (size_t)ax->first * 3;
        rows_to_strip(rp, ncols, tin);
        columns(tin, ax, tout);
        if (nr == STRIP) {
            strip_to_rows(tout, ocols, out + (size_t)r0 * out_stride, out_stride);
        } else {
            strip_to_rows(tout, ocols, bounce, (size_t)ocols);
            for (int j = 0; j < nr; j++)
                memcpy(out + (size_t)(r0 + j) * out_stride, bounce + (size_t)j * ocols, (size_t)ocols);
        }
    }
}

/* ---- AVX2 --------------------------------------------------------------------------------- */

/* 16 int32 sums (two ymm) -> 16 clipped bytes, as Pillow's clip8. */
TARGET_AVX2 static inline __m128i pack16_avx2(__m256i lo, __m256i hi) {
    lo = _mm256_srai_epi32(lo, FTL_RESAMPLE_PRECISION_BITS);
    hi = _mm256_srai_epi32(hi, FTL_RESAMPLE_PRECISION_BITS);
    __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

TARGET_AVX2 static void columns_avx2(const uint8_t *tin, const ftl_resample_axis *ax, uint8_t *tout) {
    const __m256i init = _mm256_set1_epi32(round_half);
    for (int xx = 0; xx < ax->out_size; xx++) {
        const int32_t *k = ax->coeffs + (size_t)xx * ax->ksize;
        const uint8_t *p = tin + (size_t)(ax->start[xx] - ax->first) * 48;
        __m256i a0 = init, a1 = init, a2 = init, a3 = init, a4 = init, a5 = init;
        for (int t = 0; t < ax->count[xx]; t++, p += 48) {
            __m256i kv = _mm256_set1_epi32(k[t]);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 0))), kv));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8))), kv));
            a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 16))), kv));
            a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 24))), kv));
            a4 = _mm256_add_epi32(a4, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32))), kv));
            a5 = _mm256_add_epi32(a5, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 40))), kv));
        }
        uint8_t *o = tout + (size_t)xx * 48;
        _mm_storeu_si128((__m128i *)(o + 0), pack16_avx2(a0, a1));
        _mm_storeu_si128((__m128i *)(o + 16), pack16_avx2(a2, a3));
        _mm_storeu_si128((__m128i *)(o + 32), pack16_avx2(a4, a5));
    }
}

TARGET_AVX2 static void hpass_avx2(const uint8_t *in, size_t in_stride, int rows, uint8_t *out,
                                   size_t out_stride, const ftl_resample_axis *ax, uint8_t *strip) {
    hpass_strips(in, in_stride, rows, out, out_stride, ax, strip, columns_avx2);
}

/* 32 output bytes of one row starting at x. */
TARGET_AVX2 static inline void vchunk_avx2(const uint8_t *base, size_t stride, const int32_t *k,
                                           int n, int x, uint8_t *o) {
    const __m256i init = _mm256_set1_epi32(round_half);
    __m256i a0 = init, a1 = init, a2 = init, a3 = init;
    const uint8_t *p = base + x;
    for (int t = 0; t < n; t++, p += stride) {
        __m256i kv = _mm256_set1_epi32(k[t]);
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 0))), kv));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8))), kv));
        a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 16))), kv));
        a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 24))), kv));
    }
    _mm_storeu_si128((__m128i *)(o + x), pack16_avx2(a0, a1));
    _mm_storeu_si128((__m128i *)(o + x + 16), pack16_avx2(a2, a3));
}

TARGET_AVX2 static void vpass_avx2(const uint8_t *in, size_t in_stride, uint8_t *out,
                                   size_t out_stride, int bytes, const ftl_resample_axis *ax) {
    if (bytes < 32) {
        ftl_vpass_scalar(in, in_stride, out, out_stride, bytes, ax);
        return;
    }
    for (int yy = 0; yy < ax->out_size; yy++) {
        const int32_t *k = ax->coeffs + (size_t)yy * ax->ksize;
        const uint8_t *base = in + (size_t)(ax->start[yy] - ax->first) * in_stride;
        uint8_t *o = out + (size_t)yy * out_stride;
        int x = 0;
        for (; x + 32 <= bytes; x += 32) vchunk_avx2(base, in_stride, k, ax->count[yy], x, o);
        /* The tail recomputes an overlapping last chunk: same inputs, same bytes. */
        if (x < bytes) vchunk_avx2(base, in_stride, k, ax->count[yy], bytes - 32, o);
    }
}

const ftl_resample_kernels ftl_resample_kernels_avx2 = {"avx2", hpass_avx2, vpass_avx2, STRIP};

/* ---- AVX-512 ------------------------------------------------------------------------------ */

TARGET_AVX512 static inline __m128i pack16_avx512(__m512i a) {
    a = _mm512_srai_epi32(a, FTL_RESAMPLE_PRECISION_BITS);
    return _mm512_cvtusepi32_epi8(_mm512_max_epi32(a, _mm512_setzero_si512()));
}

#define LOAD16_U8_TO_I32(ptr) _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ptr)))

TARGET_AVX512 static void columns_avx512(const uint8_t *tin, const ftl_resample_axis *ax, uint8_t *tout) {
    const __m512i init = _mm512_set1_epi32(round_half);
    for (int xx = 0; xx < ax->out_size; xx++) {
        const int32_t *k = ax->coeffs + (size_t)xx * ax->ksize;
        const uint8_t *p = tin + (size_t)(ax->start[xx] - ax->first) * 48;
        __m512i a0 = init, a1 = init, a2 = init;
        for (int t = 0; t < ax->count[xx]; t++, p += 48) {
            __m512i kv = _mm512_set1_epi32(k[t]);
            a0 = _mm512_add_epi32(a0, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 0), kv));
            a1 = _mm512_add_epi32(a1, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 16), kv));
            a2 = _mm512_add_epi32(a2, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 32), kv));
        }
        uint8_t *o = tout + (size_t)xx * 48;
        _mm_storeu_si128((__m128i *)(o + 0), pack16_avx512(a0));
        _mm_storeu_si128((__m128i *)(o + 16), pack16_avx512(a1));
        _mm_storeu_si128((__m128i *)(o + 32), pack16_avx512(a2));
    }
}

TARGET_AVX512 static void hpass_avx512(const uint8_t *in, size_t in_stride, int rows, uint8_t *out,
                                       size_t out_stride, const ftl_resample_axis *ax, uint8_t *strip) {
    hpass_strips(in, in_stride, rows, out, out_stride, ax, strip, columns_avx512);
}

/* 64 output bytes of one row starting at x. */
TARGET_AVX512 static inline void vchunk_avx512(const uint8_t *base, size_t stride, const int32_t *k,
                                               int n, int x, uint8_t *o) {
    const __m512i init = _mm512_set1_epi32(round_half);
    __m512i a0 = init, a1 = init, a2 = init, a3 = init;
    const uint8_t *p = base + x;
    for (int t = 0; t < n; t++, p += stride) {
        __m512i kv = _mm512_set1_epi32(k[t]);
        a0 = _mm512_add_epi32(a0, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 0), kv));
        a1 = _mm512_add_epi32(a1, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 16), kv));
        a2 = _mm512_add_epi32(a2, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 32), kv));
        a3 = _mm512_add_epi32(a3, _mm512_mullo_epi32(LOAD16_U8_TO_I32(p + 48), kv));
    }
    _mm_storeu_si128((__m128i *)(o + x), pack16_avx512(a0));
    _mm_storeu_si128((__m128i *)(o + x + 16), pack16_avx512(a1));
    _mm_storeu_si128((__m128i *)(o + x + 32), pack16_avx512(a2));
    _mm_storeu_si128((__m128i *)(o + x + 48), pack16_avx512(a3));
}

TARGET_AVX512 static void vpass_avx512(const uint8_t *in, size_t in_stride, uint8_t *out,
                                       size_t out_stride, int bytes, const ftl_resample_axis *ax) {
    if (bytes < 64) {
        vpass_avx2(in, in_stride, out, out_stride, bytes, ax);
        return;
    }
    for (int yy = 0; yy < ax->out_size; yy++) {
        const int32_t *k = ax->coeffs + (size_t)yy * ax->ksize;
        const uint8_t *base = in + (size_t)(ax->start[yy] - ax->first) * in_stride;
        uint8_t *o = out + (size_t)yy * out_stride;
        int x = 0;
        for (; x + 64 <= bytes; x += 64) vchunk_avx512(base, in_stride, k, ax->count[yy], x, o);
        if (x < bytes) vchunk_avx512(base, in_stride, k, ax->count[yy], bytes - 64, o);
    }
}

const ftl_resample_kernels ftl_resample_kernels_avx512 = {"avx512", hpass_avx512, vpass_avx512, STRIP};

#endif
