/* Blocked SGEMM with run-time selected microkernels (see gemm.h). */
#include "train/gemm.h"
#include "train/pool.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define FTL_GEMM_X86 1
#endif

enum { KC = 256, MAX_MR = 8 };

/* kc steps of C[mr x nr] (+)= Apanel[kc x MR] * B[kc x nr]; A is packed k-major (MR values per k,
 * zero beyond mr). load_c: accumulate into C instead of overwriting it. */
typedef void (*microkernel_fn)(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc,
                               int mr, int nr, bool load_c);

typedef struct kernel_info {
    ftl_gemm_isa isa;
    int mr, nr;
    microkernel_fn fn;
} kernel_info;

/* ---- portable kernel: plain C, 4 x 16 ---- */

static void kernel_portable(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int mr,
                            int nr, bool load_c) {
    float acc[4][16], tail[16] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++) acc[i][j] = (load_c && i < mr && j < nr) ? c[(size_t)i * ldc + (size_t)j] : 0.0f;
    for (size_t k = 0; k < kc; k++) {
        const float *bk = b + k * ldb;
        if (nr < 16) { /* constant-width inner loops vectorise; pad the last columns instead */
            memcpy(tail, bk, (size_t)nr * sizeof *bk);
            bk = tail;
        }
        for (int i = 0; i < 4; i++) {
            float ai = a[k * 4 + (size_t)i];
            for (int j = 0; j < 16; j++) acc[i][j] += ai * bk[j];
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[(size_t)i * ldc + (size_t)j] = acc[i][j];
}

#ifdef FTL_GEMM_X86

/* ---- AVX2 + FMA kernel: 6 rows x 16 columns (two ymm per row, 12 accumulators) ---- */

__attribute__((target("avx2,fma"))) static inline __m256i avx2_mask(int remaining) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), lanes);
}

__attribute__((target("avx2,fma"))) static void kernel_avx2(size_t kc, const float *a, const float *b, size_t ldb,
                                                            float *c, size_t ldc, int mr, int nr, bool load_c) {
    __m256i m0 = avx2_mask(nr), m1 = avx2_mask(nr - 8);
    __m256 acc[6][2];
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        if (load_c && i < mr) {
            acc[i][0] = _mm256_maskload_ps(c + (size_t)i * ldc, m0);
            acc[i][1] = _mm256_maskload_ps(c + (size_t)i * ldc + 8, m1);
        } else {
            acc[i][0] = _mm256_setzero_ps();
            acc[i][1] = _mm256_setzero_ps();
        }
    }
    if (nr > 8) {
        for (size_t k = 0; k < kc; k++) {
            const float *bk = b + k * ldb;
            __m256 b0 = _mm256_maskload_ps(bk, m0), b1 = _mm256_maskload_ps(bk + 8, m1);
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++) {
                __m256 ai = _mm256_broadcast_ss(a + k * 6 + (size_t)i);
                acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
            }
        }
    } else {
        for (size_t k = 0; k < kc; k++) {
            __m256 b0 = _mm256_maskload_ps(b + k * ldb, m0);
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++)
                acc[i][0] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + k * 6 + (size_t)i), b0, acc[i][0]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) { /* constant bound keeps acc[][] in registers */
        if (i >= mr) break;
        _mm256_maskstore_ps(c + (size_t)i * ldc, m0, acc[i][0]);
        if (nr > 8) _mm256_maskstore_ps(c + (size_t)i * ldc + 8, m1, acc[i][1]);
    }
}

/* ---- AVX-512 kernel: 8 rows x 48 columns (three zmm per row, 24 accumulators) ---- */

__attribute__((target("avx512f"))) static inline __mmask16 avx512_mask(int remaining) {
    if (remaining <= 0) return 0;
    return remaining >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1u);
}

/* NV = zmm vectors per row; written out three times so the accumulators stay in registers. */
#define AVX512_KERNEL(NV)                                                                                   \
    __attribute__((target("avx512f"))) static void kernel_avx512_##NV(                                      \
        size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int mr, int nr,        \
        bool load_c) {                                                                                      \
        __mmask16 mk[3] = {avx512_mask(nr), avx512_mask(nr - 16), avx512_mask(nr - 32)};                   \
        __m512 acc[8][NV];                                                                                  \
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                               \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) acc[i][v] =                                 \
                (load_c && i < mr) ? _mm512_maskz_loadu_ps(mk[v], c + (size_t)i * ldc + 16 * v)              \
                                   : _mm512_setzero_ps();                                                   \
        }                                                                                                   \
        for (size_t k = 0; k < kc; k++) {                                                                   \
            const float *bk = b + k * ldb;                                                                  \
            __m512 bv[NV];                                                                                  \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) bv[v] = _mm512_maskz_loadu_ps(mk[v], bk + 16 * v); \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                           \
                __m512 ai = _mm512_set1_ps(a[k * 8 + (size_t)i]);                                            \
                _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) acc[i][v] =                             \
                    _mm512_fmadd_ps(ai, bv[v], acc[i][v]);                                                  \
            }                                                                                               \
        }                                                                                                   \
        /* Constant trip counts only: a variable bound would force acc[][] out of registers. */          \
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                               \
            if (i >= mr) break;                                                                             \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                            \
                _mm512_mask_storeu_ps(c + (size_t)i * ldc + 16 * v, mk[v], acc[i][v]);                       \
        }                                                                                                   \
    }

AVX512_KERNEL(1)
AVX512_KERNEL(2)
AVX512_KERNEL(3)

static void kernel_avx512(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int mr, int nr,
                          bool load_c) {
    if (nr > 32) kernel_avx512_3(kc, a, b, ldb, c, ldc, mr, nr, load_c);
    else if (nr > 16) kernel_avx512_2(kc, a, b, ldb, c, ldc, mr, nr, load_c);
    else kernel_avx512_1(kc, a, b, ldb, c, ldc, mr, nr, load_c);
}
#endif

static const kernel_info kernels[] = {
    {FTL_GEMM_PORTABLE, 4, 16, kernel_portable},
#ifdef FTL_GEMM_X86
    {FTL_GEMM_AVX2, 6, 16, kernel_avx2},
    {FTL_GEMM_AVX512, 8, 48, kernel_avx512},
#endif
};

bool ftl_gemm_supported(ftl_gemm_isa isa) {
    switch (isa) {
    case FTL_GEMM_AUTO:
    case FTL_GEMM_PORTABLE: return true;
#ifdef FTL_GEMM_X86
    case FTL_GEMM_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case FTL_GEMM_AVX512: return __builtin_cpu_supports("avx512f");
#else
    default: return false;
#endif
    }
    return false;
}

const char *ftl_gemm_isa_name(ftl_gemm_isa isa) {
    switch (isa) {
    case FTL_GEMM_AUTO: return "auto";
    case FTL_GEMM_PORTABLE: return "portable";
    case FTL_GEMM_AVX2: return "avx2";
    case FTL_GEMM_AVX512: return "avx512";
    }
    return "?";
}

static atomic_int active_isa; /* 0 until first use */

static ftl_gemm_isa best_supported(void) {
    if (ftl_gemm_supported(FTL_GEMM_AVX512)) return FTL_GEMM_AVX512;
    if (ftl_gemm_supported(FTL_GEMM_AVX2)) return FTL_GEMM_AVX2;
    return FTL_GEMM_PORTABLE;
}

ftl_gemm_isa ftl_gemm_select(ftl_gemm_isa isa) {
    if (isa == FTL_GEMM_AUTO || !ftl_gemm_supported(isa)) isa = best_supported();
    atomic_store(&active_isa, (int)isa);
    return isa;
}

ftl_gemm_isa ftl_gemm_active(void) {
    int isa = atomic_load(&active_isa);
    if (isa == 0) {
        const char *env = getenv("FTL_GEMM_ISA");
        ftl_gemm_isa want = FTL_GEMM_AUTO;
        if (env && strcmp(env, "portable") == 0) want = FTL_GEMM_PORTABLE;
        else if (env && strcmp(env, "avx2") == 0) want = FTL_GEMM_AVX2;
        else if (env && strcmp(env, "avx512") == 0) want = FTL_GEMM_AVX512;
        return ftl_gemm_select(want);
    }
    return (ftl_gemm_isa)isa;
}

static const kernel_info *active_kernel(void) {
    ftl_gemm_isa isa = ftl_gemm_active();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i].isa == isa) return &kernels[i];
    return &kernels[0];
}

/* Copies A[i0 .. i0+mr) x [k0 .. k0+kc) into panel[k * MR + i], zero-filling rows mr .. MR. */
static void pack_a(const ftl_gemm_args *g, size_t i0, size_t k0, size_t kc, int mr, int MR, float *panel) {
    const float *a = g->A + i0 * g->a_row_stride + k0 * g->a_col_stride;
    if (mr < MR) memset(panel, 0, kc * (size_t)MR * sizeof *panel);
    if (g->a_row_stride == 1) {
        for (size_t k = 0; k < kc; k++) memcpy(panel + k * (size_t)MR, a + k * g->a_col_stride, (size_t)mr * sizeof *a);
    } else {
        for (int i = 0; i < mr; i++) {
            const float *row = a + (size_t)i * g->a_row_stride;
            for (size_t k = 0; k < kc; k++) panel[k * (size_t)MR + (size_t)i] = row[k * g->a_col_stride];
        }
    }
}

/* The rows [m0, m1) x columns [n0, n1) of C. */
static void gemm_block(const ftl_gemm_args *g, const kernel_info *kern, size_t m0, size_t m1, size_t n0, size_t n1) {
    _Alignas(64) float panel[KC * MAX_MR];
    const int MR = kern->mr, NR = kern->nr;
    if (g->K == 0) {
        if (!g->accumulate)
            for (size_t i = m0; i < m1; i++) memset(g->C + i * g->ldc + n0, 0, (n1 - n0) * sizeof(float));
        return;
    }
    for (size_t k0 = 0; k0 < g->K; k0 += KC) {
        size_t kc = g->K - k0 < KC ? g->K - k0 : KC;
        bool load_c = g->accumulate || k0 > 0;
        for (size_t i0 = m0; i0 < m1; i0 += (size_t)MR) {
            int mr = m1 - i0 < (size_t)MR ? (int)(m1 - i0) : MR;
            pack_a(g, i0, k0, kc, mr, MR, panel);
            for (size_t j0 = n0; j0 < n1; j0 += (size_t)NR) {
                int nr = n1 - j0 < (size_t)NR ? (int)(n1 - j0) : NR;
                kern->fn(kc, panel, g->B + k0 * g->ldb + j0, g->ldb, g->C + i0 * g->ldc + j0, g->ldc, mr, nr, load_c);
            }
        }
    }
}

typedef struct gemm_task {
    const ftl_gemm_args *g;
    const kernel_info *kern;
    bool split_rows;
} gemm_task;

/* Splits rows in whole MR-row panels, or columns in whole NR-column panels, evenly over the parts. */
static void split_range(size_t total, size_t unit, int part, int parts, size_t *begin, size_t *end) {
    size_t units = (total + unit - 1) / unit;
    size_t lo = units * (size_t)part / (size_t)parts, hi = units * (size_t)(part + 1) / (size_t)parts;
    *begin = lo * unit < total ? lo * unit : total;
    *end = hi * unit < total ? hi * unit : total;
}

static void gemm_part(void *ctx, int part, int parts) {
    const gemm_task *t = ctx;
    size_t b, e;
    if (t->split_rows) {
        split_range(t->g->M, (size_t)t->kern->mr, part, parts, &b, &e);
        if (b < e) gemm_block(t->g, t->kern, b, e, 0, t->g->N);
    } else {
        split_range(t->g->N, (size_t)t->kern->nr, part, parts, &b, &e);
        if (b < e) gemm_block(t->g, t->kern, 0, t->g->M, b, e);
    }
}

void ftl_gemm(const ftl_gemm_args *g) {
    if (g->M == 0 || g->N == 0) return;
    const kernel_info *kern = active_kernel();
    /* Below ~0.5 MFLOP per part, handing work to another thread costs more than it saves. */
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    int parts = ftl_pool_parts_for(flops, 0.5e6);
    gemm_task task = {g, kern, false};
    size_t row_panels = (g->M + (size_t)kern->mr - 1) / (size_t)kern->mr;
    size_t col_panels = (g->N + (size_t)kern->nr - 1) / (size_t)kern->nr;
    /* Rows when there are enough panels (each part packs only its own A); columns otherwise. */
    task.split_rows = row_panels >= (size_t)parts * 2 || row_panels >= col_panels;
    size_t units = task.split_rows ? row_panels : col_panels;
    if ((size_t)parts > units) parts = (int)units;
    ftl_pool_run_adaptive(g->site, parts, gemm_part, &task, flops);
}
