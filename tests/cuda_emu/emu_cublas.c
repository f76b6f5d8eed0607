/* The emulated device's cuBLAS: column-major (strided, batched) GEMM by the book, fp32 or bf16
 * storage with fp32 sums, every operand checked against its allocation (see emu_driver.c). */
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int emu_valid_range(const void *p, size_t bytes);
int emu_capturing(void);
void emu_record(void (*run)(void *arg), void *arg);

/* A GEMM kept for a graph launch (stream capture), scalars by value. */
typedef struct gemm_call {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    float alpha, beta;
    const void *A, *B;
    void *C;
    cudaDataType_t at, bt, ct;
    cublasComputeType_t compute;
    cublasGemmAlgo_t algo;
} gemm_call;
static void replay_gemm(void *arg);

struct cublasContext { int unused; };

cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = calloc(1, sizeof **h); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { free(h); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { (void)h; (void)s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGetVersion(cublasHandle_t h, int *v) { (void)h; *v = 130000; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value) {
    *value = type == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes) { (void)h; (void)ws; (void)bytes; return CUBLAS_STATUS_SUCCESS; }

static float get(const void *p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_16BF) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return ((const float *)p)[i];
}

static void put(void *p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_16BF) {
        uint32_t u;
        memcpy(&u, &v, 4);
        ((uint16_t *)p)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else {
        ((float *)p)[i] = v;
    }
}

/* Bytes a column-major operand of `rows` x `cols` with leading dimension ld spans. */
static size_t span(long long rows, long long cols, long long ld, size_t elem) {
    return rows < 1 || cols < 1 ? 0 : ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * elem;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType_t at, int lda, long long sa,
                                          const void *B, cudaDataType_t bt, int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType_t ct, int ldc, long long sc, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo) {
    (void)h; (void)algo;
    if (m < 1 || n < 1 || k < 1 || batch < 1 || at != bt || at != ct || (at != CUDA_R_32F && at != CUDA_R_16BF) ||
        (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) || ldc < m ||
        lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (emu_capturing()) {
        gemm_call *g = malloc(sizeof *g);
        *g = (gemm_call){ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, *(const float *)alpha, *(const float *)beta,
                         A, B, C, at, bt, ct, compute, algo};
        emu_record(replay_gemm, g);
        return CUBLAS_STATUS_SUCCESS;
    }
    size_t e = at == CUDA_R_16BF ? 2 : 4;
    float a = *(const float *)alpha, b = *(const float *)beta;
    for (int q = 0; q < batch; q++) {
        const char *Aq = (const char *)A + (size_t)(q * sa) * e, *Bq = (const char *)B + (size_t)(q * sb) * e;
        char *Cq = (char *)C + (size_t)(q * sc) * e;
        if (!emu_valid_range(Aq, ta == CUBLAS_OP_N ? span(m, k, lda, e) : span(k, m, lda, e)) ||
            !emu_valid_range(Bq, tb == CUBLAS_OP_N ? span(k, n, ldb, e) : span(n, k, ldb, e)) ||
            !emu_valid_range(Cq, span(m, n, ldc, e))) {
            fprintf(stderr, "emulated cuBLAS: batch %d: an operand lies outside its allocation\n", q);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        /* op(A) as m rows of k and op(B) as n rows of k, fp32, so each product is a plain dot */
        float *af = malloc((size_t)m * k * sizeof *af), *bf = malloc((size_t)n * k * sizeof *bf);
        for (int i = 0; i < m; i++)
            for (int l = 0; l < k; l++)
                af[(size_t)i * k + l] = get(Aq, at, ta == CUBLAS_OP_N ? (size_t)l * lda + i : (size_t)i * lda + l);
        for (int j = 0; j < n; j++)
            for (int l = 0; l < k; l++)
                bf[(size_t)j * k + l] = get(Bq, bt, tb == CUBLAS_OP_N ? (size_t)j * ldb + l : (size_t)l * ldb + j);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float acc = 0;
                for (int l = 0; l < k; l++) acc += af[(size_t)i * k + l] * bf[(size_t)j * k + l];
                size_t at_c = (size_t)j * ldc + i;
                put(Cq, ct, at_c, a * acc + (b != 0 ? b * get(Cq, ct, at_c) : 0.0f));
            }
        free(af);
        free(bf);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B, cudaDataType_t bt,
                            int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1,
                                      compute, algo);
}

static void replay_gemm(void *arg) {
    gemm_call *g = arg;
    cublasGemmStridedBatchedEx(NULL, g->ta, g->tb, g->m, g->n, g->k, &g->alpha, g->A, g->at, g->lda, g->sa, g->B, g->bt,
                               g->ldb, g->sb, &g->beta, g->C, g->ct, g->ldc, g->sc, g->batch, g->compute, g->algo);
}
