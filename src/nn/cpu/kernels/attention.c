/* Fused attention kernel (see attention.h). Per work item (leading index l, block of query rows):
 * K^T and V of l packed into contiguous fp32 panels (once per l on a thread), the block's Q rows
 * packed (or read in place when their rows are contiguous fp32), S = scale Q K^T by a 6-row register
 * tile, bias added and each row's softmax taken in place, then out = S V by the same tile and divided
 * by the row's sum. Built with -fopenmp. */
#include "nn/cpu/kernels/attention.h"
#include "nn/cpu/kernels/target_region.h"
#include "nn/cpu/kernels/attention_kernels.h"
#include "util/alloc.h"

#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { MR = NN_ATTN_MR, ROW_BLOCK = 48, LANES = 16, MAX_NV = 4 };

static bool has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

static const nn_attn_kernels *kernels_avx512(void);

/* AVX-512 where the CPU has it, else AVX2; FTL_NN_ATTENTION_ISA=avx2 takes the AVX2 kernels on an
 * AVX-512 CPU (A/B, and the tests run both). */
static const nn_attn_kernels *select_kernels(void) {
    const char *e = getenv("FTL_NN_ATTENTION_ISA");
    if (has_avx512() && !(e && strcmp(e, "avx2") == 0)) return kernels_avx512();
    return nn_attn_kernels_avx2();
}

bool nn_attention_available(void) { return select_kernels() != NULL; }

const char *nn_attention_isa(void) {
    const nn_attn_kernels *k = select_kernels();
    return k ? k->isa : "none";
}

static float element(const nn_attn_operand *o, int64_t off) {
    return o->bf16 ? nn_attn_bf16_to_f32(((const uint16_t *)o->data)[off]) : ((const float *)o->data)[off];
}

static int64_t lead_offset(const nn_attention *a, const nn_attn_operand *o, int64_t l) {
    int64_t off = 0;
    for (int i = a->n_lead - 1; i >= 0; i--) {
        off += (l % a->lead[i]) * o->lead_stride[i];
        l /= a->lead[i];
    }
    return off;
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

FTL_TARGET_BEGIN("avx512f,avx512bw,avx512vl")

/* e^x for x <= 0 (scores minus their row maximum): 2^n e^r with |r| <= ln2 / 2 and e^r as
 * 1 + r + r^2 p(r), p of degree 5 (Cephes' expf coefficients; about 1 ulp); 0 below the cutoff. */
static inline __m512 exp_nonpositive(__m512 x) {
    __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(NN_ATTN_EXP_CUTOFF), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(kept, p, n);
}

static inline __mmask16 tail_mask(int64_t remaining) {
    return remaining >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1u);
}

/* s[i][...] = acc[i][...] x scale: the end both Q K^T tiles share. */
#define QK_SCALED_STORE(M, NV)                                                                                 \
    __m512 sc = _mm512_set1_ps(scale);                                                                         \
    _Pragma("GCC unroll 7") for (int i = 0; i < M; i++)                                                        \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                                   \
            _mm512_storeu_ps(s + i * sp + LANES * v, _mm512_mul_ps(acc[i][v], sc));

/* s[M rows][NV x 16] = scale x q[M rows][depth] k[depth][NV x 16]: q by row pointers, k rows ks apart
 * (its last vector loaded under `last`), s rows sp apart. Written out per M and NV so the accumulators
 * stay in registers (M x NV <= 24, leaving room for the K vectors and the broadcast). */
#define QK_TILE(M, NV)                                                                                         \
    static void qk_tile_##M##_##NV(const float *const *q, int64_t depth, const float *k, int64_t ks,            \
                                   __mmask16 last, float *s, int64_t sp, float scale) {                        \
        __m512 acc[M][NV];                                                                                     \
        _Pragma("GCC unroll 7") for (int i = 0; i < M; i++)                                                    \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();              \
        for (int64_t d = 0; d < depth; d++) {                                                                  \
            __m512 kv[NV];                                                                                     \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) kv[v] =                                       \
                _mm512_maskz_loadu_ps(v == NV - 1 ? last : (__mmask16)0xFFFF, k + d * ks + LANES * v);         \
            _Pragma("GCC unroll 7") for (int i = 0; i < M; i++) {                                              \
                __m512 qi = _mm512_set1_ps(q[i][d]);                                                           \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(qi, kv[v], acc[i][v]); \
            }                                                                                                  \
        }                                                                                                      \
        QK_SCALED_STORE(M, NV)                                                                                 \
    }
QK_TILE(6, 1)
QK_TILE(6, 2)
QK_TILE(6, 3)
QK_TILE(6, 4)
QK_TILE(7, 1)
QK_TILE(7, 2)
QK_TILE(7, 3)

/* o[i][...] = acc[i][...] x inv[i]: the end both P V tiles share. */
#define PV_SCALED_STORE(M, NV)                                                                                 \
    _Pragma("GCC unroll 7") for (int i = 0; i < M; i++) {                                                      \
        __m512 r = _mm512_set1_ps(inv[i]);                                                                     \
        _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++)                                                   \
            _mm512_storeu_ps(o + i * op + LANES * c, _mm512_mul_ps(acc[i][c], r));                             \
    }

/* o[M][NV x 16] = (s[M][keys] v[keys][NV x 16]) x inv[row]: v rows vs apart (last vector under
 * `last`), o rows op apart. */
#define PV_TILE(M, NV)                                                                                         \
    static void pv_tile_##M##_##NV(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs,       \
                                   __mmask16 last, const float *inv, float *o, int64_t op) {                   \
        __m512 acc[M][NV];                                                                                     \
        _Pragma("GCC unroll 7") for (int i = 0; i < M; i++)                                                    \
            _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++) acc[i][c] = _mm512_setzero_ps();              \
        for (int64_t j = 0; j < keys; j++) {                                                                   \
            __m512 vv[NV];                                                                                     \
            _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++) vv[c] =                                       \
                _mm512_maskz_loadu_ps(c == NV - 1 ? last : (__mmask16)0xFFFF, v + j * vs + LANES * c);         \
            _Pragma("GCC unroll 7") for (int i = 0; i < M; i++) {                                              \
                __m512 si = _mm512_set1_ps(s[i * sp + j]);                                                     \
                _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++) acc[i][c] = _mm512_fmadd_ps(si, vv[c], acc[i][c]); \
            }                                                                                                  \
        }                                                                                                      \
        PV_SCALED_STORE(M, NV)                                                                                 \
    }
PV_TILE(6, 1)
PV_TILE(6, 2)
PV_TILE(6, 3)
PV_TILE(6, 4)
PV_TILE(7, 1)
PV_TILE(7, 2)
PV_TILE(7, 3)

/* Key columns past the last multiple of 16 that the softmax takes 16 rows at a time rather than as a
 * vector of which 1 or 2 lanes are used (Swin's 49 = 3 x 16 + 1); 0 where the vector is used enough.
 * (Q K^T keeps its masked vector: a dot product per row for the column measured slower.) */
static int64_t tail_columns(int64_t keys) {
    int64_t r = keys % LANES;
    return keys > LANES && r <= 2 ? r : 0;
}

/* The tiles over all columns: chunks of MAX_NV vectors, the last one narrower and masked. */
static void qk_row_tile(const float *const *q, int64_t depth, const float *k, int64_t ks, int64_t keys,
                        bool k_padded, float *s, int64_t sp, float scale) {
    (void)k_padded; /* AVX-512's masked loads cost as much as plain ones */
    for (int64_t j = 0; j < keys; j += MAX_NV * LANES) {
        int64_t left = keys - j, nv = (left + LANES - 1) / LANES;
        __mmask16 last = tail_mask(left - (nv > MAX_NV ? MAX_NV - 1 : nv - 1) * LANES);
        const float *kj = k + j;
        float *sj = s + j;
        switch (nv) {
        case 1: qk_tile_6_1(q, depth, kj, ks, last, sj, sp, scale); break;
        case 2: qk_tile_6_2(q, depth, kj, ks, last, sj, sp, scale); break;
        case 3: qk_tile_6_3(q, depth, kj, ks, last, sj, sp, scale); break;
        default: qk_tile_6_4(q, depth, kj, ks, last, sj, sp, scale); break;
        }
    }
}

/* The 7-row tiles (a block of 49 rows, Swin's windows, runs as 7 of them instead of 9 of 6 with 5 rows
 * of padding): chunks of 3 vectors, as 7 x 4 accumulators would spill. The same sums in the same order
 * as the 6-row tiles, so the scores' bits do not depend on the tile height. (Swin's 49th key column
 * as a dot product per row instead of a vector with one lane used was 2% faster on the shape alone, but
 * sums in another order: not worth a feature-cache version.) */
static void qk_row_tile7(const float *const *q, int64_t depth, const float *k, int64_t ks, int64_t keys,
                         bool k_padded, float *s, int64_t sp, float scale) {
    (void)k_padded;
    for (int64_t j = 0; j < keys; j += 3 * LANES) {
        int64_t left = keys - j, nv = (left + LANES - 1) / LANES;
        __mmask16 last = tail_mask(left - (nv > 3 ? 2 : nv - 1) * LANES);
        switch (nv) {
        case 1: qk_tile_7_1(q, depth, k + j, ks, last, s + j, sp, scale); break;
        case 2: qk_tile_7_2(q, depth, k + j, ks, last, s + j, sp, scale); break;
        default: qk_tile_7_3(q, depth, k + j, ks, last, s + j, sp, scale); break;
        }
    }
}

static void pv_row_tile(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs, int64_t vdepth,
                        const float *inv, float *o, int64_t op) {
    for (int64_t c = 0; c < vdepth; c += MAX_NV * LANES) {
        int64_t left = vdepth - c, nv = (left + LANES - 1) / LANES;
        __mmask16 last = tail_mask(left - (nv > MAX_NV ? MAX_NV - 1 : nv - 1) * LANES);
        switch (nv) {
        case 1: pv_tile_6_1(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        case 2: pv_tile_6_2(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        case 3: pv_tile_6_3(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        default: pv_tile_6_4(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        }
    }
}

static void pv_row_tile7(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs, int64_t vdepth,
                         const float *inv, float *o, int64_t op) {
    for (int64_t c = 0; c < vdepth; c += 3 * LANES) {
        int64_t left = vdepth - c, nv = (left + LANES - 1) / LANES;
        __mmask16 last = tail_mask(left - (nv > 3 ? 2 : nv - 1) * LANES);
        switch (nv) {
        case 1: pv_tile_7_1(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        case 2: pv_tile_7_2(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        default: pv_tile_7_3(s, sp, keys, v + c, vs, last, inv, o + c, op); break;
        }
    }
}

/* 16 (or fewer, under m) bf16 values widened to f32: the 16 bits become the top half. */
static inline __m512 load_bf16(__mmask16 m, const uint16_t *src) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* 16 (or fewer) f32 rounded to nearest even bf16, as f32_to_bf16 does. */
static inline void store_bf16(uint16_t *dst, __mmask16 m, __m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    _mm256_mask_storeu_epi16(dst, m, _mm512_cvtepi32_epi16(u));
}

/* The same by AVX512-BF16's conversion, for the bf16 dot-product path only (its CPUs have it): the same
 * bits but for denormals, which it flushes, and the softmax's terms are 0 or above e^-44, never
 * denormal. Zen 4 runs store_bf16's narrowing store (vpmovdw to memory) at a fraction of this rate. As
 * an instruction: the intrinsic needs the ISA enabled in every function it inlines into. */
static inline void store_bf16_native(uint16_t *dst, __mmask16 m, __m512 x) {
    __m256i h;
    __asm__("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(x));
    if (m == (__mmask16)0xFFFF) _mm256_storeu_si256((__m256i *)dst, h);
    else _mm256_mask_storeu_epi16(dst, m, h);
}

/* Rows of scores: + bias, then e^(x - row max) in place and inv[row] = 1 / the row's sum. Row by
 * row in passes, so the rows' reductions overlap instead of waiting on each other; the tail columns
 * (tail_columns) of 16 rows at a time by gathers. With p2, the terms go there as bf16 (rows of sp2,
 * zeros past the keys: the bf16 P V's operand), summed in fp32 before rounding, instead of over s. */
static inline void softmax_rows_to(float *s, int64_t sp, int64_t rows, int64_t keys, const float *bias, float *mx,
                                   float *inv, uint16_t *p2, int64_t sp2) {
    int64_t tail = rows * sp <= INT32_MAX ? tail_columns(keys) : 0, body = keys - tail; /* gathers' offsets */
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * sp;
        const float *b = bias ? bias + i * keys : NULL;
        __m512 vmax = _mm512_set1_ps(-__builtin_inff());
        for (int64_t j = 0; j < body; j += LANES) {
            __mmask16 m = tail_mask(body - j);
            __m512 x = _mm512_maskz_loadu_ps(m, row + j);
            if (b) {
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, b + j));
                _mm512_mask_storeu_ps(row + j, m, x);
            }
            vmax = _mm512_mask_max_ps(vmax, m, vmax, x);
        }
        float top = _mm512_reduce_max_ps(vmax);
        for (int64_t j = body; j < keys; j++) {
            if (b) row[j] += b[j];
            top = row[j] > top ? row[j] : top;
        }
        mx[i] = top;
    }
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * sp;
        __m512 m0 = _mm512_set1_ps(mx[i]), vsum = _mm512_setzero_ps();
        for (int64_t j = 0; j < body; j += LANES) {
            __mmask16 m = tail_mask(body - j);
            __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), m0));
            if (p2) store_bf16_native(p2 + i * sp2 + j, m, e);
            else _mm512_mask_storeu_ps(row + j, m, e);
            vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
        }
        inv[i] = _mm512_reduce_add_ps(vsum);
    }
    if (tail) {
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)sp));
        for (int64_t i = 0; i < rows; i += LANES) {
            __mmask16 m = tail_mask(rows - i);
            __m512 sum = _mm512_maskz_loadu_ps(m, inv + i), top = _mm512_maskz_loadu_ps(m, mx + i);
            for (int64_t j = body; j < keys; j++) {
                float *col = s + i * sp + j;
                __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_mask_i32gather_ps(top, m, idx, col, 4), top));
                _mm512_mask_i32scatter_ps(col, m, idx, e, 4);
                sum = _mm512_add_ps(sum, e);
            }
            _mm512_mask_storeu_ps(inv + i, m, sum);
        }
    }
    for (int64_t i = 0; i < rows && p2; i++) /* the tail columns, and zeros up to the even width */
        for (int64_t j = body; j < sp2; j++) p2[i * sp2 + j] = j < keys ? nn_attn_f32_to_bf16(s[i * sp + j]) : 0;
    for (int64_t i = 0; i < rows; i++) inv[i] = 1.0f / inv[i];
}

static void softmax_rows(float *s, int64_t sp, int64_t rows, int64_t keys, const float *bias, float *mx, float *inv) {
    softmax_rows_to(s, sp, rows, keys, bias, mx, inv, NULL, 0);
}

/* The 16 x 16 floats in x[0..15] (rows) transposed in place: pairs, then quads, then 128-bit lanes,
 * each stage rewriting the vectors it read so that 16 stay live (no spills). */
static inline void transpose_16x16(__m512 x[LANES]) {
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
        __m512 lo = _mm512_unpacklo_ps(x[2 * k], x[2 * k + 1]), hi = _mm512_unpackhi_ps(x[2 * k], x[2 * k + 1]);
        x[2 * k] = lo;
        x[2 * k + 1] = hi;
    }
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) { /* x[4k + m], lane L: rows 4k..4k+3 of column 4L + m */
        __m512d a = _mm512_castps_pd(x[4 * k]), b = _mm512_castps_pd(x[4 * k + 1]);
        __m512d c = _mm512_castps_pd(x[4 * k + 2]), d = _mm512_castps_pd(x[4 * k + 3]);
        x[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        x[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        x[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        x[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) { /* column 4L + m: lane L of x[m], x[4+m], x[8+m], x[12+m] */
        __m512 lo01 = _mm512_shuffle_f32x4(x[m], x[4 + m], 0x44), lo23 = _mm512_shuffle_f32x4(x[m], x[4 + m], 0xEE);
        __m512 hi01 = _mm512_shuffle_f32x4(x[8 + m], x[12 + m], 0x44), hi23 = _mm512_shuffle_f32x4(x[8 + m], x[12 + m], 0xEE);
        x[m] = _mm512_shuffle_f32x4(lo01, hi01, 0x88);
        x[4 + m] = _mm512_shuffle_f32x4(lo01, hi01, 0xDD);
        x[8 + m] = _mm512_shuffle_f32x4(lo23, hi23, 0x88);
        x[12 + m] = _mm512_shuffle_f32x4(lo23, hi23, 0xDD);
    }
}

/* A transposed f32 view (K^T over K's rows: rows contiguous in the source's columns) packed by 16 x 16
 * register transposes: 16 source rows of 16 contiguous floats in, 16 rows of the panel out. Columns
 * past `cols` up to the next multiple of 16 are written as zeros (dst_stride covers them). */
static void pack_transposed_f32(const float *src, int64_t src_stride, int64_t rows, int64_t cols, float *dst,
                                int64_t dst_stride) {
    for (int64_t c0 = 0; c0 < cols; c0 += LANES)
        for (int64_t r0 = 0; r0 < rows; r0 += LANES) {
            __mmask16 m = tail_mask(rows - r0);
            __m512 x[LANES]; /* unrolled so that x stays in registers (rolled loops spilled it: 5x slower) */
            _Pragma("GCC unroll 16") for (int i = 0; i < LANES; i++)
                x[i] = c0 + i < cols ? _mm512_maskz_loadu_ps(m, src + (c0 + i) * src_stride + r0) : _mm512_setzero_ps();
            transpose_16x16(x);
            int64_t n = rows - r0 < LANES ? rows - r0 : LANES;
            _Pragma("GCC unroll 16") for (int j = 0; j < LANES; j++)
                if (j < n) _mm512_storeu_ps(dst + (r0 + j) * dst_stride + c0, x[j]);
        }
}

/* dst[r * dst_stride + c] = operand rows x cols at base (the tiles never read the padding columns):
 * rows copied (or widened from bf16) when contiguous; a transposed bf16 operand (K^T over K's rows)
 * by its contiguous source columns, scattered; a transposed f32 one by register transposes (gathers
 * took 22% of Swin's attention); other f32 strides 16 columns at a time by a gather. */
static void pack(const nn_attn_operand *o, int64_t base, int64_t rows, int64_t cols, float *dst, int64_t dst_stride) {
    if (!o->bf16 && o->col_stride == 1) {
        const float *src = (const float *)o->data + base;
        for (int64_t r = 0; r < rows; r++) memcpy(dst + r * dst_stride, src + r * o->row_stride, (size_t)cols * sizeof *dst);
    } else if (o->bf16 && o->col_stride == 1) {
        const uint16_t *src = (const uint16_t *)o->data + base;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c += LANES) {
                __mmask16 m = tail_mask(cols - c);
                _mm512_mask_storeu_ps(dst + r * dst_stride + c, m, load_bf16(m, src + r * o->row_stride + c));
            }
    } else if (o->bf16 && o->row_stride == 1 && rows * dst_stride <= INT32_MAX) {
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)dst_stride));
        for (int64_t c = 0; c < cols; c++)
            for (int64_t r = 0; r < rows; r += LANES) {
                __mmask16 m = tail_mask(rows - r);
                int64_t at = base + c * o->col_stride + r;
                __m512 x = o->bf16 ? load_bf16(m, (const uint16_t *)o->data + at)
                                   : _mm512_maskz_loadu_ps(m, (const float *)o->data + at);
                _mm512_mask_i32scatter_ps(dst + r * dst_stride + c, m, idx, x, 4);
            }
    } else if (!o->bf16 && o->row_stride == 1 && dst_stride % LANES == 0) {
        pack_transposed_f32((const float *)o->data + base, o->col_stride, rows, cols, dst, dst_stride);
    } else if (!o->bf16 && o->col_stride <= INT32_MAX / LANES) {
        const float *src = (const float *)o->data + base;
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)o->col_stride));
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c += LANES) {
                __mmask16 m = tail_mask(cols - c);
                __m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src + r * o->row_stride + c * o->col_stride, 4);
                _mm512_mask_storeu_ps(dst + r * dst_stride + c, m, x);
            }
    } else {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) dst[r * dst_stride + c] = element(o, base + r * o->row_stride + c * o->col_stride);
    }
}

/* Rows of the tile buffer to a bf16 output with unit column stride. */
static void write_bf16_rows(uint16_t *out, int64_t row_stride, const float *obuf, int64_t op, int64_t n, int64_t cols) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < cols; c += LANES) {
            __mmask16 m = tail_mask(cols - c);
            store_bf16(out + i * row_stride + c, m, _mm512_maskz_loadu_ps(m, obuf + i * op + c));
        }
}

FTL_TARGET_END

static const nn_attn_kernels *kernels_avx512(void) {
    static const nn_attn_kernels k = {"avx512", qk_row_tile, pv_row_tile, softmax_rows, pack, write_bf16_rows,
                                      qk_row_tile7, pv_row_tile7};
    return &k;
}

/* An operand read in place (f32, unit column stride) or packed into buf (row stride `packed`). */
static bool in_place(const nn_attn_operand *o) { return !o->bf16 && o->col_stride == 1; }

typedef struct workspace {
    float *kpack, *vpack, *qpack, *s, *obuf, *inv, *mx, *zero;
    int64_t kp, vp, sp;
    /* the bf16 dot-product path: K^T and V as pairs (of depth, of keys) in 32-bit words, Q rows and
     * the probabilities as bf16 with an even number of columns */
    uint32_t *k2, *v2;
    uint16_t *q2, *p2, *zero2;
    int64_t dp, sp2;
} workspace;

/* Writes rows [r0, r0 + n) of the tile buffer to the output (its strides and type). */
static void write_rows(const nn_attn_kernels *K, const nn_attention *a, int64_t base, int64_t r0, int64_t n,
                       const float *obuf, int64_t op) {
    const nn_attn_operand *o = &a->out;
    if (o->bf16 && o->col_stride == 1) {
        K->write_bf16_rows((uint16_t *)o->data + base + r0 * o->row_stride, o->row_stride, obuf, op, n, a->vdepth);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t at = base + (r0 + i) * o->row_stride;
        const float *src = obuf + i * op;
        if (!o->bf16 && o->col_stride == 1) {
            memcpy((float *)o->data + at, src, (size_t)a->vdepth * sizeof *src);
        } else if (!o->bf16) {
            for (int64_t c = 0; c < a->vdepth; c++) ((float *)o->data)[at + c * o->col_stride] = src[c];
        } else {
            for (int64_t c = 0; c < a->vdepth; c++) ((uint16_t *)o->data)[at + c * o->col_stride] = nn_attn_f32_to_bf16(src[c]);
        }
    }
}

/* The tile height for a block of n rows: 7 where the table has 7-row tiles and 7 divides n but 6 does
 * not (Swin's 49: 7 tiles, not 9 with 5 rows of padding), else MR. */
static int tile_rows(const nn_attn_kernels *K, int64_t n) {
    return K->qk_row_tile7 && n % 7 == 0 && n % MR != 0 ? 7 : MR;
}

/* bf16 operands on a CPU with AVX512-BF16: each dot-product instruction takes a pair of depths
 * (Q K^T) or of keys (P V) in 16 lanes, twice the fp32 FMA rate; the probabilities are rounded to
 * bf16 before P V, as PyTorch's bf16 attention does. Accumulation stays fp32. */
static bool bf16_dot_products(const nn_attention *a) {
    static int native = -1;
    if (native < 0) native = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
    const char *e = getenv("FTL_NN_ATTENTION_BF16_DOT"); /* 0: widen to fp32 instead (A/B, tests) */
    return native && a->q.bf16 && a->kt.bf16 && a->v.bf16 && !(e && strcmp(e, "0") == 0);
}

FTL_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512bf16")

static inline uint32_t pair_at(const uint16_t *row, int64_t i) {
    uint32_t w;
    memcpy(&w, row + 2 * i, sizeof w);
    return w;
}

/* s[M][NV x 16] = scale x q[M rows of `pairs` depth pairs] k2[pairs][NV x 16 keys] (M x NV <= 24) */
#define QK2_TILE(M, NV)                                                                                        \
    static void qk2_tile_##M##_##NV(const uint16_t *const *q, int64_t pairs, const uint32_t *k, int64_t ks,     \
                                    float *s, int64_t sp, float scale) {                                       \
        __m512 acc[M][NV];                                                                                     \
        _Pragma("GCC unroll 7") for (int i = 0; i < M; i++)                                                    \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();              \
        for (int64_t d = 0; d < pairs; d++) {                                                                  \
            __m512bh kv[NV];                                                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) kv[v] =                                       \
                (__m512bh)_mm512_loadu_si512(k + d * ks + LANES * v);                                          \
            _Pragma("GCC unroll 7") for (int i = 0; i < M; i++) {                                              \
                __m512bh qi = (__m512bh)_mm512_set1_epi32((int)pair_at(q[i], d));                              \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], qi, kv[v]); \
            }                                                                                                  \
        }                                                                                                      \
        QK_SCALED_STORE(M, NV)                                                                                 \
    }
QK2_TILE(6, 1)
QK2_TILE(6, 2)
QK2_TILE(6, 3)
QK2_TILE(6, 4)
QK2_TILE(7, 1)
QK2_TILE(7, 2)
QK2_TILE(7, 3)

/* o[M][NV x 16] = (p[M rows of `pairs` key pairs] v2[pairs][NV x 16]) x inv[row] */
#define PV2_TILE(M, NV)                                                                                        \
    static void pv2_tile_##M##_##NV(const uint16_t *p, int64_t pp, int64_t pairs, const uint32_t *v, int64_t vs, \
                                    const float *inv, float *o, int64_t op) {                                  \
        __m512 acc[M][NV];                                                                                     \
        _Pragma("GCC unroll 7") for (int i = 0; i < M; i++)                                                    \
            _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++) acc[i][c] = _mm512_setzero_ps();              \
        for (int64_t j = 0; j < pairs; j++) {                                                                  \
            __m512bh vv[NV];                                                                                   \
            _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++) vv[c] =                                       \
                (__m512bh)_mm512_loadu_si512(v + j * vs + LANES * c);                                          \
            _Pragma("GCC unroll 7") for (int i = 0; i < M; i++) {                                              \
                __m512bh pi = (__m512bh)_mm512_set1_epi32((int)pair_at(p + i * pp, j));                        \
                _Pragma("GCC unroll 4") for (int c = 0; c < NV; c++) acc[i][c] = _mm512_dpbf16_ps(acc[i][c], pi, vv[c]); \
            }                                                                                                  \
        }                                                                                                      \
        PV_SCALED_STORE(M, NV)                                                                                 \
    }
PV2_TILE(6, 1)
PV2_TILE(6, 2)
PV2_TILE(6, 3)
PV2_TILE(6, 4)
PV2_TILE(7, 1)
PV2_TILE(7, 2)
PV2_TILE(7, 3)

/* The tiles of a block of rows of height mr (6, or 7: Swin's 49 rows as 7 tiles, not 9 with 5 rows of
 * padding) over all key (QK) or value (PV) columns: chunks of 4 vectors for 6 rows, of 3 for 7 (7 x 4
 * accumulators would spill). Each score and output sums its pairs in the same order whatever the tile,
 * so the bits do not depend on the height. */
static void qk2_row_tile(int mr, const uint16_t *const *q, int64_t pairs, const uint32_t *k, int64_t kp, float *s,
                         int64_t sp, float scale) {
    int max_nv = mr == 7 ? 3 : MAX_NV;
    for (int64_t j = 0; j < kp; j += max_nv * LANES) {
        int64_t nv = (kp - j) / LANES;
        nv = nv > max_nv ? max_nv : nv;
        switch (mr * 8 + (int)nv) {
        case 6 * 8 + 1: qk2_tile_6_1(q, pairs, k + j, kp, s + j, sp, scale); break;
        case 6 * 8 + 2: qk2_tile_6_2(q, pairs, k + j, kp, s + j, sp, scale); break;
        case 6 * 8 + 3: qk2_tile_6_3(q, pairs, k + j, kp, s + j, sp, scale); break;
        case 6 * 8 + 4: qk2_tile_6_4(q, pairs, k + j, kp, s + j, sp, scale); break;
        case 7 * 8 + 1: qk2_tile_7_1(q, pairs, k + j, kp, s + j, sp, scale); break;
        case 7 * 8 + 2: qk2_tile_7_2(q, pairs, k + j, kp, s + j, sp, scale); break;
        default: qk2_tile_7_3(q, pairs, k + j, kp, s + j, sp, scale); break;
        }
    }
}

static void pv2_row_tile(int mr, const uint16_t *p, int64_t pp, int64_t pairs, const uint32_t *v, int64_t vp,
                         const float *inv, float *o) {
    int max_nv = mr == 7 ? 3 : MAX_NV;
    for (int64_t c = 0; c < vp; c += max_nv * LANES) {
        int64_t nv = (vp - c) / LANES;
        nv = nv > max_nv ? max_nv : nv;
        switch (mr * 8 + (int)nv) {
        case 6 * 8 + 1: pv2_tile_6_1(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        case 6 * 8 + 2: pv2_tile_6_2(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        case 6 * 8 + 3: pv2_tile_6_3(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        case 6 * 8 + 4: pv2_tile_6_4(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        case 7 * 8 + 1: pv2_tile_7_1(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        case 7 * 8 + 2: pv2_tile_7_2(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        default: pv2_tile_7_3(p, pp, pairs, v + c, vp, inv, o + c, vp); break;
        }
    }
}

/* Pairs (x(r, c), x(r + 1, c)) of a bf16 operand's rows r, r + 1 as 32-bit words: dst[(r / 2) * ds + c],
 * rows x cols padded with zeros to even rows and ds (a multiple of 16) columns. */
static void pack_pairs(const nn_attn_operand *o, int64_t base, int64_t rows, int64_t cols, uint32_t *dst, int64_t ds) {
    const uint16_t *x = (const uint16_t *)o->data + base;
    int64_t pairs = (rows + 1) / 2;
    if (o->col_stride == 1) { /* rows contiguous: widen two rows and interleave them */
        for (int64_t r2 = 0; r2 < pairs; r2++) {
            const uint16_t *lo = x + 2 * r2 * o->row_stride, *hi = lo + o->row_stride;
            bool has_hi = 2 * r2 + 1 < rows;
            for (int64_t c = 0; c < ds; c += LANES) {
                __mmask16 m = c < cols ? tail_mask(cols - c) : 0;
                __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo + c));
                if (has_hi) w = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi + c)), 16));
                _mm512_storeu_si512(dst + r2 * ds + c, w);
            }
        }
    } else if (o->row_stride == 1 && rows % 2 == 0 && o->col_stride % 2 == 0 && base % 2 == 0 && ds % LANES == 0) {
        /* columns contiguous (K^T over K's rows): a column's pairs are its 32-bit words, so the pairs panel
         * is the transpose of K's rows read as words, by the f32 register transposes (gathers, below, took
         * 12% of Swin's bf16 attention on a Zen 4); bits are moved, not converted */
        pack_transposed_f32((const float *)(const void *)x, o->col_stride / 2, pairs, cols, (float *)(void *)dst, ds);
    } else if (o->row_stride == 1 && rows % 2 == 0 && o->col_stride <= INT32_MAX / (2 * LANES)) {
        /* columns contiguous (K^T over K's rows): each pair is one 32-bit word of a column, gathered */
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)(2 * o->col_stride)));
        for (int64_t r2 = 0; r2 < pairs; r2++)
            for (int64_t c = 0; c < ds; c += LANES) {
                __mmask16 m = c < cols ? tail_mask(cols - c) : 0;
                __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, x + 2 * r2 + c * o->col_stride, 1);
                _mm512_storeu_si512(dst + r2 * ds + c, w);
            }
    } else {
        for (int64_t r2 = 0; r2 < pairs; r2++)
            for (int64_t c = 0; c < ds; c++) {
                uint32_t w = 0;
                if (c < cols) {
                    w = x[2 * r2 * o->row_stride + c * o->col_stride];
                    if (2 * r2 + 1 < rows) w |= (uint32_t)x[(2 * r2 + 1) * o->row_stride + c * o->col_stride] << 16;
                }
                dst[r2 * ds + c] = w;
            }
    }
}

static void run_item_bf16(const nn_attention *a, workspace *w, int64_t l, int64_t r0, int64_t nrows) {
    int mr = tile_rows(kernels_avx512(), nrows); /* the bf16 tiles come in the AVX-512 table's heights */
    int64_t padded = round_up(nrows, mr), qbase = lead_offset(a, &a->q, l) + r0 * a->q.row_stride;
    bool q_in_place = a->q.col_stride == 1 && a->depth % 2 == 0;
    if (!q_in_place) { /* Q rows as bf16 with an even number of columns */
        const uint16_t *x = (const uint16_t *)a->q.data + qbase;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t d = 0; d < w->dp; d++)
                w->q2[r * w->dp + d] = d < a->depth ? x[r * a->q.row_stride + d * a->q.col_stride] : 0;
    }
    int64_t pairs = w->dp / 2;
    for (int64_t i = 0; i < padded; i += mr) {
        const uint16_t *rows[NN_ATTN_MR_MAX];
        for (int r = 0; r < mr; r++)
            rows[r] = i + r >= nrows ? w->zero2
                      : q_in_place   ? (const uint16_t *)a->q.data + qbase + (i + r) * a->q.row_stride
                                     : w->q2 + (i + r) * w->dp;
        qk2_row_tile(mr, rows, pairs, w->k2, w->kp, w->s + i * w->sp, w->sp, a->scale);
    }
    const float *bias = a->bias ? a->bias + ((l % a->bias_period) * a->rows + r0) * a->keys : NULL;
    /* the probabilities written as bf16 by the softmax itself (summed in fp32 before rounding, as before) */
    softmax_rows_to(w->s, w->sp, nrows, a->keys, bias, w->mx, w->inv, w->p2, w->sp2);
    for (int64_t i = nrows; i < padded; i++) w->inv[i] = 0.0f;
    int64_t out_base = lead_offset(a, &a->out, l), kpairs = w->sp2 / 2;
    for (int64_t i = 0; i < padded; i += mr) {
        pv2_row_tile(mr, w->p2 + i * w->sp2, w->sp2, kpairs, w->v2, w->vp, w->inv + i, w->obuf);
        write_rows(kernels_avx512(), a, out_base, r0 + i, nrows - i < mr ? nrows - i : mr, w->obuf, w->vp);
    }
}

FTL_TARGET_END

static void run_item(const nn_attn_kernels *K, const nn_attention *a, workspace *w, int64_t l, int64_t r0, int64_t nrows, const float *k,
                     int64_t ks, const float *v, int64_t vs) {
    int mr = tile_rows(K, nrows);
    int64_t padded = round_up(nrows, mr);
    const float *q;
    int64_t qs;
    if (in_place(&a->q)) {
        q = (const float *)a->q.data + lead_offset(a, &a->q, l) + r0 * a->q.row_stride;
        qs = a->q.row_stride;
    } else {
        K->pack(&a->q, lead_offset(a, &a->q, l) + r0 * a->q.row_stride, nrows, a->depth, w->qpack, a->depth);
        q = w->qpack;
        qs = a->depth;
    }
    for (int64_t i = 0; i < padded; i += mr) {
        const float *rows[NN_ATTN_MR_MAX];
        for (int r = 0; r < mr; r++) rows[r] = i + r < nrows ? q + (i + r) * qs : w->zero;
        (mr == 7 ? K->qk_row_tile7 : K->qk_row_tile)(rows, a->depth, k, ks, a->keys, k == w->kpack, w->s + i * w->sp,
                                                     w->sp, a->scale);
    }
    const float *bias = a->bias ? a->bias + ((l % a->bias_period) * a->rows + r0) * a->keys : NULL;
    K->softmax_rows(w->s, w->sp, nrows, a->keys, bias, w->mx, w->inv);
    for (int64_t i = nrows; i < padded; i++) w->inv[i] = 0.0f;
    int64_t out_base = lead_offset(a, &a->out, l);
    for (int64_t i = 0; i < padded; i += mr) {
        (mr == 7 ? K->pv_row_tile7 : K->pv_row_tile)(w->s + i * w->sp, w->sp, a->keys, v, vs, a->vdepth, w->inv + i,
                                                     w->obuf, w->vp);
        write_rows(K, a, out_base, r0 + i, nrows - i < mr ? nrows - i : mr, w->obuf, w->vp);
    }
}

void nn_attention_run(const nn_attention *a, int threads) {
    int64_t L = 1;
    for (int i = 0; i < a->n_lead; i++) L *= a->lead[i];
    /* up to two blocks' worth of rows run as one (Swin's 49 would leave a block of 1) */
    int64_t block = a->rows <= 2 * ROW_BLOCK ? a->rows : ROW_BLOCK;
    int64_t blocks = (a->rows + block - 1) / block, items = L * blocks;
    if (items == 0) return;
    int team = threads < 1 ? 1 : items < threads ? (int)items : threads;
    const nn_attn_kernels *K = select_kernels();
    bool dot2 = K == kernels_avx512() && bf16_dot_products(a); /* the bf16 tiles are AVX-512's */
    if (!K) return; /* callers check nn_attention_available() */
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        workspace w = {.kp = round_up(a->keys, LANES), .vp = round_up(a->vdepth, LANES)};
        w.sp = w.kp;
        int64_t padded_block = round_up(block, NN_ATTN_MR_MAX) + MR; /* rows padded to a multiple of 6 or 7 */
        w.dp = round_up(a->depth, 2);
        w.sp2 = round_up(a->keys, 2);
        if (dot2) {
            w.k2 = ftl_xmalloc((size_t)(w.dp / 2 * w.kp) * sizeof *w.k2);
            w.v2 = ftl_xmalloc((size_t)(w.sp2 / 2 * w.vp) * sizeof *w.v2);
            w.q2 = ftl_xmalloc((size_t)(padded_block * w.dp) * sizeof *w.q2);
            w.p2 = ftl_xcalloc((size_t)(padded_block * w.sp2), sizeof *w.p2);
            w.zero2 = ftl_xcalloc((size_t)w.dp, sizeof *w.zero2);
        }
        /* zeroed: the AVX2 tiles read the padding columns (into the scores' padding) */
        w.kpack = dot2 || in_place(&a->kt) ? NULL : ftl_xcalloc((size_t)(a->depth * w.kp), sizeof(float));
        w.vpack = dot2 || in_place(&a->v) ? NULL : ftl_xmalloc((size_t)(a->keys * w.vp) * sizeof(float));
        w.qpack = dot2 || in_place(&a->q) ? NULL : ftl_xmalloc((size_t)(padded_block * a->depth) * sizeof(float));
        w.s = ftl_xmalloc((size_t)(padded_block * w.sp) * sizeof(float));
        w.obuf = ftl_xmalloc((size_t)(NN_ATTN_MR_MAX * w.vp) * sizeof(float));
        w.inv = ftl_xmalloc((size_t)padded_block * sizeof(float));
        w.mx = ftl_xmalloc((size_t)padded_block * sizeof(float));
        w.zero = ftl_xcalloc((size_t)a->depth, sizeof(float));
        int64_t begin = items * t / nt, end = items * (t + 1) / nt, packed = -1;
        const float *k = NULL, *v = NULL;
        int64_t ks = 0, vs = 0;
        for (int64_t it = begin; it < end; it++) {
            int64_t l = it / blocks, r0 = (it % blocks) * block;
            if (dot2) {
                if (l != packed) {
                    pack_pairs(&a->kt, lead_offset(a, &a->kt, l), a->depth, a->keys, w.k2, w.kp);
                    pack_pairs(&a->v, lead_offset(a, &a->v, l), a->keys, a->vdepth, w.v2, w.vp);
                    packed = l;
                }
                run_item_bf16(a, &w, l, r0, a->rows - r0 < block ? a->rows - r0 : block);
                continue;
            }
            if (l != packed) { /* this thread's items run in order, so each l is packed once */
                if (w.kpack) {
                    K->pack(&a->kt, lead_offset(a, &a->kt, l), a->depth, a->keys, w.kpack, w.kp);
                    k = w.kpack, ks = w.kp;
                } else {
                    k = (const float *)a->kt.data + lead_offset(a, &a->kt, l), ks = a->kt.row_stride;
                }
                if (w.vpack) {
                    K->pack(&a->v, lead_offset(a, &a->v, l), a->keys, a->vdepth, w.vpack, w.vp);
                    v = w.vpack, vs = w.vp;
                } else {
                    v = (const float *)a->v.data + lead_offset(a, &a->v, l), vs = a->v.row_stride;
                }
                packed = l;
            }
            run_item(K, a, &w, l, r0, a->rows - r0 < block ? a->rows - r0 : block, k, ks, v, vs);
        }
        free(w.kpack);
        free(w.vpack);
        free(w.qpack);
        free(w.s);
        free(w.obuf);
        free(w.inv);
        free(w.mx);
        free(w.zero);
        free(w.k2);
        free(w.v2);
        free(w.q2);
        free(w.p2);
        free(w.zero2);
    }
}
