/* Layer normalization kernel (see layernorm.h): blocks of four rows, each thread a contiguous run of
 * them, AVX-512 where the CPU has it, else plain C (which the compiler vectorizes as it can). Both paths sum in the same order
 * (16 partial sums, lane i taking columns i, i + 16, ..., then added pairwise), so a CPU's result
 * does not depend on which path ran. Built with -fopenmp. */
#include "nn/cpu/kernels/layernorm.h"
#include "nn/cpu/kernels/target_region.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = 16 };

static float from_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t to_bf16(float f) { /* round to nearest even; NaN stays NaN */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float load_at(const nn_layernorm *l, int64_t i) {
    return l->x_bf16 ? from_bf16(((const uint16_t *)l->x)[i]) : ((const float *)l->x)[i];
}

/* The 16 partial sums added as the AVX-512 path's reduction does: halves, then quarters, ... */
static float reduce16(float *p) {
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) p[i] += p[i + w];
    return p[0];
}

static void row_plain(const nn_layernorm *l, int64_t r) {
    int64_t c = l->channels, base = r * c;
    float part[LANES] = {0};
    for (int64_t j = 0; j < c; j++) part[j % LANES] += load_at(l, base + j);
    float mean = reduce16(part) / (float)c;
    memset(part, 0, sizeof part);
    for (int64_t j = 0; j < c; j++) {
        float d = load_at(l, base + j) - mean;
        part[j % LANES] += d * d;
    }
    float inv = 1.0f / sqrtf(reduce16(part) / (float)c + l->epsilon);
    for (int64_t j = 0; j < c; j++) {
        float y = (load_at(l, base + j) - mean) * inv * l->gamma[j] + l->beta[j];
        if (l->y_bf16) ((uint16_t *)l->y)[base + j] = to_bf16(y);
        else ((float *)l->y)[base + j] = y;
    }
}

FTL_TARGET_BEGIN("avx512f,avx512bw,avx512vl")

static inline __mmask16 tail_mask(int64_t left) {
    return left >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m512 load16(const nn_layernorm *l, bool xb, int64_t at, __mmask16 m) {
    bool full = m == (__mmask16)0xFFFF;
    if (!xb) return full ? _mm512_loadu_ps((const float *)l->x + at) : _mm512_maskz_loadu_ps(m, (const float *)l->x + at);
    const uint16_t *src = (const uint16_t *)l->x + at;
    __m512i w = _mm512_cvtepu16_epi32(full ? _mm256_loadu_si256((const __m256i *)src) : _mm256_maskz_loadu_epi16(m, src));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* yb: as bf16, rounded to nearest even; native: by AVX512-BF16's conversion (which also reads denormals
 * as zero), else by integer arithmetic */
ALWAYS_INLINE void store16(const nn_layernorm *l, bool yb, bool native, int64_t at, __mmask16 m, __m512 y) {
    bool full = m == (__mmask16)0xFFFF; /* a masked store to a line not in cache is slow on AMD's Zen 4 */
    if (!yb) {
        if (full) _mm512_storeu_ps((float *)l->y + at, y);
        else _mm512_mask_storeu_ps((float *)l->y + at, m, y);
        return;
    }
    uint16_t *dst = (uint16_t *)l->y + at;
    if (native) { /* as an instruction: the intrinsic needs the ISA enabled in every function it inlines into */
        __m256i h;
        __asm__("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(y));
        if (full) _mm256_storeu_si256((__m256i *)dst, h);
        else _mm256_mask_storeu_epi16(dst, m, h);
        return;
    }
    __m512i u = _mm512_castps_si512(y);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    if (full) _mm256_storeu_si256((__m256i *)dst, _mm512_cvtepi32_epi16(r));
    else _mm256_mask_storeu_epi16(dst, m, _mm512_cvtepi32_epi16(r));
}

/* reduce16's order on a vector, in registers: lanes i and i + 8, then i and i + 4, ... */
static inline float reduce_vec(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* R rows side by side: each row's sums in the same order as alone, the rows' chains independent, so
 * their latencies (the sums, the reductions, the square root) overlap. R and the types are constants
 * in each instance below, so the accumulators stay in registers. */
enum { ROWS_AT_ONCE = 4 };

ALWAYS_INLINE void rows_avx512(const nn_layernorm *l, int64_t r0, const int R, const bool xb, const bool yb,
                              const bool native) {
    int64_t c = l->channels;
    __m512 sum[ROWS_AT_ONCE], mean[ROWS_AT_ONCE], inv[ROWS_AT_ONCE];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) sum[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < c; j += LANES) {
        __mmask16 m = tail_mask(c - j);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) sum[r] = _mm512_add_ps(sum[r], load16(l, xb, (r0 + r) * c + j, m));
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
        mean[r] = _mm512_set1_ps(reduce_vec(sum[r]) / (float)c);
        sum[r] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < c; j += LANES) {
        __mmask16 m = tail_mask(c - j);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            __m512 d = _mm512_maskz_sub_ps(m, load16(l, xb, (r0 + r) * c + j, m), mean[r]);
            sum[r] = _mm512_add_ps(sum[r], _mm512_mul_ps(d, d));
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        inv[r] = _mm512_set1_ps(1.0f / sqrtf(reduce_vec(sum[r]) / (float)c + l->epsilon));
    for (int64_t j = 0; j < c; j += LANES) {
        __mmask16 m = tail_mask(c - j);
        __m512 gamma = _mm512_maskz_loadu_ps(m, l->gamma + j), beta = _mm512_maskz_loadu_ps(m, l->beta + j);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            __m512 d = _mm512_mul_ps(_mm512_sub_ps(load16(l, xb, (r0 + r) * c + j, m), mean[r]), inv[r]);
            /* d x gamma + beta as a multiply and an add, as the plain path rounds it */
            store16(l, yb, native, (r0 + r) * c + j, m, _mm512_add_ps(_mm512_mul_ps(d, gamma), beta));
        }
    }
}

/* rows [r0, r0 + n), n <= ROWS_AT_ONCE, of one input/output type pair */
#define BLOCK_AVX512(NAME, XB, YB, NATIVE)                                                                     \
    static void NAME(const nn_layernorm *l, int64_t r0, int n) {                                               \
        if (n == ROWS_AT_ONCE) rows_avx512(l, r0, ROWS_AT_ONCE, XB, YB, NATIVE);                               \
        else                                                                                                   \
            for (int r = 0; r < n; r++) rows_avx512(l, r0 + r, 1, XB, YB, NATIVE);                             \
    }
BLOCK_AVX512(block_f32_f32, false, false, false)
BLOCK_AVX512(block_f32_bf16, false, true, false)
BLOCK_AVX512(block_bf16_f32, true, false, false)
BLOCK_AVX512(block_bf16_bf16, true, true, false)
BLOCK_AVX512(block_f32_bf16_native, false, true, true)
BLOCK_AVX512(block_bf16_bf16_native, true, true, true)

typedef void (*block_fn)(const nn_layernorm *l, int64_t r0, int n);

static block_fn block_avx512(const nn_layernorm *l) {
    bool native = __builtin_cpu_supports("avx512bf16");
    if (!l->y_bf16) return l->x_bf16 ? block_bf16_f32 : block_f32_f32;
    if (native) return l->x_bf16 ? block_bf16_bf16_native : block_f32_bf16_native;
    return l->x_bf16 ? block_bf16_bf16 : block_f32_bf16;
}

FTL_TARGET_END

/* AVX-512 where the CPU has it; FTL_NN_LAYERNORM_ISA=plain takes the plain path (tests compare them). */
static bool use_avx512(void) {
    const char *e = getenv("FTL_NN_LAYERNORM_ISA");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && !(e && strcmp(e, "plain") == 0);
}

const char *nn_layernorm_isa(void) { return use_avx512() ? "avx512" : "plain"; }

void nn_layernorm_run(const nn_layernorm *l, int threads) {
    block_fn block = use_avx512() ? block_avx512(l) : NULL;
    int64_t rows = l->rows, blocks = (rows + ROWS_AT_ONCE - 1) / ROWS_AT_ONCE;
    /* each thread one contiguous run of rows, which the hardware prefetchers stream (blocks dealt in
     * turn took 1.3-1.5x as long in Swin-T's bf16 plan on a Zen 4) */
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t r0 = b * ROWS_AT_ONCE;
        int n = rows - r0 < ROWS_AT_ONCE ? (int)(rows - r0) : ROWS_AT_ONCE;
        if (block) block(l, r0, n);
        else
            for (int r = 0; r < n; r++) row_plain(l, r0 + r);
    }
}
