/* The fused attention's fp32 kernels for CPUs with AVX2 and FMA but no AVX-512 (Zen 2/3, most
 * laptops): attention.c's tiles with 8 lanes and at most two vectors per row, so a 6-row tile's 12
 * accumulators, two K (or V) vectors and the broadcast fit the 16 ymm registers. bf16 operands are
 * widened when packed (these CPUs have no bf16 plans; the tests still hand them over). */
#include "nn/cpu/kernels/attention_kernels.h"
#include "nn/cpu/kernels/target_region.h"

#include <immintrin.h>
#include <string.h>

enum { MR = NN_ATTN_MR, LANES = 8, MAX_NV = 2 };

FTL_TARGET_BEGIN("avx2,fma")

/* Lanes below `remaining` (all 8 from 8 on), as the mask maskload/maskstore take. */
static inline __m256i tail_mask(int64_t remaining) {
    int r = remaining >= LANES ? LANES : (int)remaining;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline float reduce_max(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}

static inline float reduce_add(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}

/* e^x for x <= 0, as attention.c's: 2^n e^r, e^r = 1 + r + r^2 p(r) (Cephes' expf coefficients); 2^n
 * built in the exponent bits (n >= -126 after the clamp, so always a normal number); 0 below the cutoff. */
static inline __m256 exp_nonpositive(__m256 x) {
    __m256 kept = _mm256_cmp_ps(x, _mm256_set1_ps(NN_ATTN_EXP_CUTOFF), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), kept);
}

/* s[MR rows][NV x 8] = scale x q[MR rows][depth] k[depth][NV x 8] (k's last vector under `last` when
 * MASKED; the unmasked variants read whole vectors: packed panels, or no tail) */
#define QK_TILE(NV, MASKED, NAME)                                                                              \
    static void NAME(const float *const *q, int64_t depth, const float *k, int64_t ks, __m256i last,    \
                             float *s, int64_t sp, float scale) {                                              \
        __m256 acc[MR][NV];                                                                                    \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++)                                                   \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();              \
        for (int64_t d = 0; d < depth; d++) {                                                                  \
            __m256 kv[NV];                                                                                     \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) kv[v] =                                       \
                MASKED && v == NV - 1 ? _mm256_maskload_ps(k + d * ks + LANES * v, last)                       \
                            : _mm256_loadu_ps(k + d * ks + LANES * v);                                         \
            _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                             \
                __m256 qi = _mm256_broadcast_ss(q[i] + d);                                                     \
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(qi, kv[v], acc[i][v]); \
            }                                                                                                  \
        }                                                                                                      \
        __m256 sc = _mm256_set1_ps(scale);                                                                     \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++)                                                   \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)                                               \
                _mm256_storeu_ps(s + i * sp + LANES * v, _mm256_mul_ps(acc[i][v], sc));                        \
    }
QK_TILE(1, true, qk_tile_1)
QK_TILE(2, true, qk_tile_2)
QK_TILE(1, false, qk_tile_1_whole)
QK_TILE(2, false, qk_tile_2_whole)

/* o[MR][NV x 8] = (s[MR][keys] v[keys][NV x 8]) x inv[row] (v's last vector under `last` when MASKED) */
#define PV_TILE(NV, MASKED, NAME)                                                                              \
    static void NAME(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs,             \
                             __m256i last, const float *inv, float *o, int64_t op) {                           \
        __m256 acc[MR][NV];                                                                                    \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++)                                                   \
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) acc[i][c] = _mm256_setzero_ps();              \
        for (int64_t j = 0; j < keys; j++) {                                                                   \
            __m256 vv[NV];                                                                                     \
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) vv[c] =                                       \
                MASKED && c == NV - 1 ? _mm256_maskload_ps(v + j * vs + LANES * c, last)                       \
                            : _mm256_loadu_ps(v + j * vs + LANES * c);                                         \
            _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                             \
                __m256 si = _mm256_broadcast_ss(s + i * sp + j);                                               \
                _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) acc[i][c] = _mm256_fmadd_ps(si, vv[c], acc[i][c]); \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                                 \
            __m256 r = _mm256_set1_ps(inv[i]);                                                                 \
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++)                                               \
                _mm256_storeu_ps(o + i * op + LANES * c, _mm256_mul_ps(acc[i][c], r));                         \
        }                                                                                                      \
    }
PV_TILE(1, true, pv_tile_1)
PV_TILE(2, true, pv_tile_2)
PV_TILE(1, false, pv_tile_1_whole)
PV_TILE(2, false, pv_tile_2_whole)

/* Chunks of 16 columns (the last one of 8 when 8 or fewer are left); masked loads only for a last
 * vector that is partly past the end of an unpadded operand (`padded`: a packed panel, its rows readable to
 * a multiple of 16 columns; what the padding adds lands in the scores' padding, which nothing reads). */
static void qk_row_tile(const float *const *q, int64_t depth, const float *k, int64_t ks, int64_t keys, bool padded,
                        float *s, int64_t sp, float scale) {    for (int64_t j = 0; j < keys; j += MAX_NV * LANES) {
        int64_t left = keys - j;
        if (left > LANES) {
            if (padded || left >= 2 * LANES) qk_tile_2_whole(q, depth, k + j, ks, tail_mask(8), s + j, sp, scale);
            else qk_tile_2(q, depth, k + j, ks, tail_mask(left - LANES), s + j, sp, scale);
        } else {
            if (padded || left == LANES) qk_tile_1_whole(q, depth, k + j, ks, tail_mask(8), s + j, sp, scale);
            else qk_tile_1(q, depth, k + j, ks, tail_mask(left), s + j, sp, scale);
        }
    }
}

static void pv_row_tile(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs, int64_t vdepth,
                        const float *inv, float *o, int64_t op) {
    for (int64_t c = 0; c < vdepth; c += MAX_NV * LANES) {
        int64_t left = vdepth - c;
        if (left >= 2 * LANES) pv_tile_2_whole(s, sp, keys, v + c, vs, tail_mask(8), inv, o + c, op);
        else if (left > LANES) pv_tile_2(s, sp, keys, v + c, vs, tail_mask(left - LANES), inv, o + c, op);
        else if (left == LANES) pv_tile_1_whole(s, sp, keys, v + c, vs, tail_mask(8), inv, o + c, op);
        else pv_tile_1(s, sp, keys, v + c, vs, tail_mask(left), inv, o + c, op);
    }
}

/* Row by row in three passes (max, exponentials and sum, reciprocal), as attention.c's. The score
 * rows are padded to sp (a multiple of 16), so they are read and written as whole vectors, the lanes
 * past `keys` kept out of the max and zeroed: AMD's masked stores cost 10x a plain one. */
static void softmax_rows(float *s, int64_t sp, int64_t rows, int64_t keys, const float *bias, float *mx, float *inv) {
    const __m256 minus_inf = _mm256_set1_ps(-__builtin_inff());
    const int64_t full = keys / LANES * LANES;
    const __m256i tail = tail_mask(keys - full);
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * sp;
        const float *b = bias ? bias + i * keys : NULL;
        __m256 vmax = minus_inf;
        int64_t j = 0;
        for (; j < full; j += LANES) {
            __m256 x = _mm256_loadu_ps(row + j);
            if (b) {
                x = _mm256_add_ps(x, _mm256_loadu_ps(b + j));
                _mm256_storeu_ps(row + j, x);
            }
            vmax = _mm256_max_ps(vmax, x);
        }
        if (j < keys) {
            __m256 x = _mm256_loadu_ps(row + j);
            if (b) {
                x = _mm256_add_ps(x, _mm256_maskload_ps(b + j, tail));
                _mm256_storeu_ps(row + j, x);
            }
            vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(minus_inf, x, _mm256_castsi256_ps(tail)));
        }
        mx[i] = reduce_max(vmax);
    }
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * sp;
        __m256 m0 = _mm256_set1_ps(mx[i]), vsum = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j < full; j += LANES) {
            __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(row + j), m0));
            _mm256_storeu_ps(row + j, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        if (j < keys) {
            __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(row + j), m0));
            e = _mm256_and_ps(e, _mm256_castsi256_ps(tail)); /* padding lanes: 0, never NaN */
            _mm256_storeu_ps(row + j, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        inv[i] = reduce_add(vsum);
    }
    for (int64_t i = 0; i < rows; i++) inv[i] = 1.0f / inv[i];
}

/* dst[r][c] = src[c * cs + r] for an 8 x 8 block: eight source columns (contiguous) in, eight
 * destination rows out, transposed in registers. */
static inline void transpose8(const float *src, int64_t cs, float *dst, int64_t ds) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + cs), r2 = _mm256_loadu_ps(src + 2 * cs),
           r3 = _mm256_loadu_ps(src + 3 * cs), r4 = _mm256_loadu_ps(src + 4 * cs), r5 = _mm256_loadu_ps(src + 5 * cs),
           r6 = _mm256_loadu_ps(src + 6 * cs), r7 = _mm256_loadu_ps(src + 7 * cs);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* Contiguous fp32 rows copied; a transposed fp32 operand (K^T over K's rows: unit row stride) read
 * along its contiguous source rows and written as columns; anything else element by element. */
static void pack(const nn_attn_operand *o, int64_t base, int64_t rows, int64_t cols, float *dst, int64_t dst_stride) {
    if (!o->bf16 && o->col_stride == 1) {
        const float *src = (const float *)o->data + base;
        for (int64_t r = 0; r < rows; r++) memcpy(dst + r * dst_stride, src + r * o->row_stride, (size_t)cols * sizeof *dst);
    } else if (!o->bf16 && o->row_stride == 1) { /* 8 x 8 blocks transposed in registers, the edges one by one */
        const float *src = (const float *)o->data + base;
        int64_t r8 = rows / LANES * LANES, c8 = cols / LANES * LANES;
        for (int64_t c = 0; c < c8; c += LANES)
            for (int64_t r = 0; r < r8; r += LANES) transpose8(src + c * o->col_stride + r, o->col_stride, dst + r * dst_stride + c, dst_stride);
        for (int64_t c = 0; c < cols; c++) {
            const float *col = src + c * o->col_stride;
            for (int64_t r = c < c8 ? r8 : 0; r < rows; r++) dst[r * dst_stride + c] = col[r];
        }
    } else if (!o->bf16) {
        const float *src = (const float *)o->data + base;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) dst[r * dst_stride + c] = src[r * o->row_stride + c * o->col_stride];
    } else {
        const uint16_t *src = (const uint16_t *)o->data + base;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                dst[r * dst_stride + c] = nn_attn_bf16_to_f32(src[r * o->row_stride + c * o->col_stride]);
    }
}

static void write_bf16_rows(uint16_t *out, int64_t row_stride, const float *obuf, int64_t op, int64_t n, int64_t cols) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < cols; c++) out[i * row_stride + c] = nn_attn_f32_to_bf16(obuf[i * op + c]);
}

FTL_TARGET_END

const nn_attn_kernels *nn_attn_kernels_avx2(void) {
    static const nn_attn_kernels k = {"avx2", qk_row_tile, pv_row_tile, softmax_rows, pack, write_bf16_rows, NULL, NULL};
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &k : NULL;
}
