/* The head's training steps on a GPU (ftl_head_engine, include/ftl/train.h): the two GEMMs on
 * cuBLAS (fp32, no TF32), dropout, softmax cross-entropy, the bias gradient and the optimizer as
 * ftl's kernels (head_kernels.cu). Parameters, gradients and optimizer state live on the device
 * between steps; a step copies its rows in and reads two numbers per row back (the loss and
 * whether the argmax is right), which the host adds in row order as the CPU head does. With
 * ranks, the gradients are summed by NCCL on the device, its unique id broadcast over the
 * collectives; each allreduce is watched against the stall timeout, so a rank that is gone makes
 * the others fail, not hang. */
#include "nn/cuda_backend.h"
#include "nn/cuda/cuda_libs.h"
#include "nn/cuda/head_kernel_args.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const unsigned char ftl_cuda_head_fatbin[];

typedef struct cuda_head {
    ftl_head_engine engine;
    const cuda_libs *L;
    CUcontext ctx;
    CUdevice dev;
    bool ctx_retained;
    CUstream stream;
    CUmodule module;
    CUfunction f_dropout, f_ce, f_bias_grad, f_optimizer;
    cublasHandle_t blas;
    int sm_count;
    int64_t dim, classes;
    size_t param_count;
    int slots;
    CUdeviceptr params, grads, state;
    size_t capacity; /* rows the batch buffers hold */
    CUdeviceptr x, x_dropped, logits, dlogits, labels, positions, loss, correct;
    double *loss_host;
    int32_t *correct_host;
    ncclComm_t comm;
    int world;
    bool aborted;     /* the stall watch aborted NCCL: the stream may never finish, so no waiting on it */
} cuda_head;

static ftl_status set_current(cuda_head *h) { return cuda_check(h->L->cuCtxSetCurrent(h->ctx), "cuCtxSetCurrent"); }

static ftl_status alloc(cuda_head *h, CUdeviceptr *p, size_t bytes, const char *what) {
    CUresult r = h->L->cuMemAlloc(p, bytes ? bytes : 16);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t free_b = 0, total_b = 0;
        h->L->cuMemGetInfo(&free_b, &total_b);
        return ftl_fail(FTL_E_NOMEM, "GPU out of memory for the head's %s (%.1f MiB; %.1f MiB free of %.1f): lower --batch "
                        "or --eval-batch",
                        what, (double)bytes / 1048576.0, (double)free_b / 1048576.0, (double)total_b / 1048576.0);
    }
    return cuda_check(r, what);
}

static void free_ptr(cuda_head *h, CUdeviceptr *p) {
    if (*p) h->L->cuMemFree(*p);
    *p = 0;
}

static void free_batch_buffers(cuda_head *h) {
    CUdeviceptr *ps[] = {&h->x, &h->x_dropped, &h->logits, &h->dlogits, &h->labels, &h->positions, &h->loss, &h->correct};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free_ptr(h, ps[i]);
    free(h->loss_host);
    free(h->correct_host);
    h->loss_host = NULL;
    h->correct_host = NULL;
    h->capacity = 0;
}

/* Batch buffers for n rows (grown, never shrunk). */
static ftl_status ensure_rows(cuda_head *h, size_t n) {
    if (n <= h->capacity) return FTL_OK;
    if ((double)n * (double)h->dim > 2.0e9 || n > (size_t)1 << 24)
        return ftl_fail(FTL_E_INVALID_ARG, "batches of %zu rows of %lld features are too large for the GPU head", n,
                        (long long)h->dim);
    FTL_TRY(cuda_check(h->L->cuStreamSynchronize(h->stream), "waiting for the head's last step"));
    free_batch_buffers(h);
    size_t D = (size_t)h->dim, C = (size_t)h->classes;
    FTL_TRY(alloc(h, &h->x, n * D * sizeof(float), "input rows"));
    FTL_TRY(alloc(h, &h->x_dropped, n * D * sizeof(float), "dropout rows"));
    FTL_TRY(alloc(h, &h->logits, n * C * sizeof(float), "logits"));
    FTL_TRY(alloc(h, &h->dlogits, n * C * sizeof(float), "logit gradients"));
    FTL_TRY(alloc(h, &h->labels, n * sizeof(int32_t), "labels"));
    FTL_TRY(alloc(h, &h->positions, n * sizeof(uint32_t), "row positions"));
    FTL_TRY(alloc(h, &h->loss, n * sizeof(double), "losses"));
    FTL_TRY(alloc(h, &h->correct, n * sizeof(int32_t), "hits"));
    h->loss_host = malloc(n * sizeof(double));
    h->correct_host = malloc(n * sizeof(int32_t));
    if (!h->loss_host || !h->correct_host) return ftl_fail(FTL_E_NOMEM, "out of memory");
    h->capacity = n;
    return FTL_OK;
}

static ftl_status launch(cuda_head *h, CUfunction f, void *args, int64_t threads, const char *what) {
    int64_t blocks = (threads + 255) / 256, cap = (int64_t)(h->sm_count > 0 ? h->sm_count : 80) * 32;
    unsigned grid = (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
    void *params[] = {args};
    return cuda_check(h->L->cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, h->stream, params, NULL), what);
}

/* Row-major C[rows x cols] = A[rows x k] B[k x cols] in cuBLAS's column-major terms. */
static ftl_status gemm(cuda_head *h, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, CUdeviceptr a,
                       int lda, CUdeviceptr b, int ldb, CUdeviceptr c, int ldc, const char *what) {
    const float one = 1.0f, zero = 0.0f;
    return cuda_check_cublas(h->L->cublasGemmEx(h->blas, op_a, op_b, m, n, k, &one, (const void *)a, CUDA_R_32F, lda,
                                                (const void *)b, CUDA_R_32F, ldb, &zero, (void *)c, CUDA_R_32F, ldc,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             what);
}

/* Rows and labels in; logits = x W, then cross-entropy (and dz when training); per-row results out. */
static ftl_status forward(cuda_head *h, const float *x, const int32_t *labels, size_t n, const ftl_row_draws *draws,
                          float dropout, float label_smoothing, float grad_scale, bool train, ftl_metric_counts *counts) {
    const cuda_libs *L = h->L;
    size_t D = (size_t)h->dim, C = (size_t)h->classes;
    FTL_TRY(ftl_head_check_labels(h->classes, labels, n));
    FTL_TRY(set_current(h));
    FTL_TRY(ensure_rows(h, n));
    FTL_TRY(cuda_check(L->cuMemcpyHtoDAsync(h->x, x, n * D * sizeof(float), h->stream), "copying the head's rows to the GPU"));
    FTL_TRY(cuda_check(L->cuMemcpyHtoDAsync(h->labels, labels, n * sizeof(int32_t), h->stream), "copying labels"));
    CUdeviceptr xin = h->x;
    if (train && dropout > 0.0f) {
        ka_dropout_args a = {.rows = (int64_t)n, .dim = (int64_t)D, .seed = draws->seed, .step = draws->step,
                             .position_base = draws->position_base,
                             .threshold = (uint32_t)lround((1.0 - (double)dropout) * 65536.0),
                             .scale = (float)(1.0 / (1.0 - (double)dropout)), .in = h->x, .out = h->x_dropped};
        if (draws->positions) {
            FTL_TRY(cuda_check(L->cuMemcpyHtoDAsync(h->positions, draws->positions, n * sizeof(uint32_t), h->stream),
                               "copying row positions"));
            a.positions = h->positions;
        }
        FTL_TRY(launch(h, h->f_dropout, &a, (int64_t)n, "the head's dropout kernel"));
        xin = h->x_dropped;
    }
    FTL_TRY(gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)C, (int)n, (int)D, h->params, (int)C, xin, (int)D, h->logits, (int)C,
                 "the head's forward GEMM"));
    ka_ce_args ce = {.rows = (int64_t)n, .classes = (int64_t)C, .logits = h->logits, .bias = h->params + D * C * sizeof(float),
                     .labels = h->labels, .dz = train ? h->dlogits : 0, .loss = h->loss, .correct = h->correct,
                     .grad_scale = grad_scale, .label_smoothing = train ? label_smoothing : 0.0f};
    FTL_TRY(launch(h, h->f_ce, &ce, (int64_t)n * 32, "the head's softmax cross-entropy kernel"));
    if (train) {
        /* dW = x^T dZ, db = column sums of dZ */
        FTL_TRY(gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)C, (int)D, (int)n, h->dlogits, (int)C, xin, (int)D, h->grads, (int)C,
                     "the head's weight-gradient GEMM"));
        ka_bias_grad_args bg = {.rows = (int64_t)n, .classes = (int64_t)C, .dz = h->dlogits,
                                .out = h->grads + D * C * sizeof(float)};
        FTL_TRY(launch(h, h->f_bias_grad, &bg, (int64_t)C, "the head's bias-gradient kernel"));
    }
    FTL_TRY(cuda_check(L->cuMemcpyDtoHAsync(h->loss_host, h->loss, n * sizeof(double), h->stream), "reading the losses"));
    FTL_TRY(cuda_check(L->cuMemcpyDtoHAsync(h->correct_host, h->correct, n * sizeof(int32_t), h->stream), "reading the hits"));
    FTL_TRY(cuda_check(L->cuStreamSynchronize(h->stream), train ? "the head's training step" : "the head's evaluation"));
    for (size_t i = 0; i < n; i++) { /* the CPU head's order */
        counts->loss_sum += h->loss_host[i];
        counts->correct += h->correct_host[i] != 0;
        counts->count += 1;
    }
    return FTL_OK;
}

static ftl_status head_train_batch(void *ctx, const float *x, const int32_t *labels, size_t n, const ftl_row_draws *draws,
                                   float dropout, float label_smoothing, float grad_scale, ftl_metric_counts *counts) {
    cuda_head *h = ctx;
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return ftl_fail(FTL_E_INVALID_ARG, "dropout %g is outside [0, 1)", (double)dropout);
    if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f))
        return ftl_fail(FTL_E_INVALID_ARG, "label smoothing %g is outside [0, 1)", (double)label_smoothing);
    if (!(grad_scale > 0.0f) || !isfinite(grad_scale))
        return ftl_fail(FTL_E_INVALID_ARG, "gradient scale %g must be positive", (double)grad_scale);
    if (n == 0) { /* none of the global batch's rows are here: this rank adds nothing */
        FTL_TRY(set_current(h));
        return cuda_check(h->L->cuMemsetD8Async(h->grads, 0, h->param_count * sizeof(float), h->stream), "zeroing gradients");
    }
    if (dropout > 0.0f && !draws) return ftl_fail(FTL_E_INVALID_ARG, "dropout needs the rows' random draws");
    return forward(h, x, labels, n, draws, dropout, label_smoothing, grad_scale, true, counts);
}

static ftl_status head_evaluate_batch(void *ctx, const float *x, const int32_t *labels, size_t n, ftl_metric_counts *counts) {
    if (n == 0) return FTL_OK;
    return forward(ctx, x, labels, n, NULL, 0.0f, 0.0f, 0.0f, false, counts);
}

static ftl_status check_slots(const cuda_head *h, int slots) {
    if (slots != h->slots)
        return ftl_fail(FTL_E_INTERNAL, "the GPU head keeps %d optimizer slots, the trainer %d", h->slots, slots);
    return FTL_OK;
}

static ftl_status head_load(void *ctx, const float *params, const float *opt_state, int slots) {
    cuda_head *h = ctx;
    FTL_TRY(check_slots(h, slots));
    FTL_TRY(set_current(h));
    size_t bytes = h->param_count * sizeof(float);
    /* on the head's stream (a plain cuMemcpyHtoD is ordered on the legacy stream only) */
    FTL_TRY(cuda_check(h->L->cuMemcpyHtoDAsync(h->params, params, bytes, h->stream), "copying the head's weights to the GPU"));
    if (slots)
        FTL_TRY(cuda_check(h->L->cuMemcpyHtoDAsync(h->state, opt_state, bytes * (size_t)slots, h->stream),
                           "copying the optimizer's state"));
    return cuda_check(h->L->cuStreamSynchronize(h->stream), "copying the head's weights to the GPU");
}

static ftl_status head_store(void *ctx, float *params, float *opt_state, int slots) {
    cuda_head *h = ctx;
    FTL_TRY(check_slots(h, slots));
    if (h->aborted) return ftl_fail(FTL_E_IO, "the GPU head's work was abandoned when NCCL was aborted");
    FTL_TRY(set_current(h));
    size_t bytes = h->param_count * sizeof(float);
    FTL_TRY(cuda_check(h->L->cuMemcpyDtoHAsync(params, h->params, bytes, h->stream), "copying the head's weights from the GPU"));
    if (slots)
        FTL_TRY(cuda_check(h->L->cuMemcpyDtoHAsync(opt_state, h->state, bytes * (size_t)slots, h->stream),
                           "copying the optimizer's state"));
    return cuda_check(h->L->cuStreamSynchronize(h->stream), "copying the head's weights from the GPU");
}

static ftl_status head_grads_to_host(void *ctx, float *grads) {
    cuda_head *h = ctx;
    FTL_TRY(set_current(h));
    FTL_TRY(cuda_check(h->L->cuMemcpyDtoHAsync(grads, h->grads, h->param_count * sizeof(float), h->stream),
                       "copying gradients from the GPU"));
    return cuda_check(h->L->cuStreamSynchronize(h->stream), "copying gradients from the GPU");
}

static ftl_status head_grads_from_host(void *ctx, const float *grads) {
    cuda_head *h = ctx;
    FTL_TRY(set_current(h));
    FTL_TRY(cuda_check(h->L->cuMemcpyHtoDAsync(h->grads, grads, h->param_count * sizeof(float), h->stream),
                       "copying gradients to the GPU"));
    return cuda_check(h->L->cuStreamSynchronize(h->stream), "copying gradients to the GPU");
}

static ftl_status head_optimizer_step(void *ctx, const ftl_optimizer_update *u) {
    cuda_head *h = ctx;
    FTL_TRY(set_current(h));
    ka_optimizer_args a = {
        .count = (int64_t)h->param_count, .params = h->params, .grads = h->grads, .m = h->state,
        .v = h->slots > 1 ? h->state + h->param_count * sizeof(float) : 0,
        .kind = u->kind == FTL_OPTIMIZER_NADAM ? KA_OPT_NADAM : u->kind == FTL_OPTIMIZER_ADAM ? KA_OPT_ADAM : KA_OPT_SGD,
        .nesterov = u->nesterov, .has_momentum = u->has_momentum, .wd = u->wd, .b1 = u->b1, .omb1 = u->omb1, .b2 = u->b2,
        .omb2 = u->omb2, .inv_bc2_sqrt = u->inv_bc2_sqrt, .eps = u->eps, .c_grad = u->c_grad, .c_m = u->c_m,
        .momentum = u->momentum, .neg_lr = u->neg_lr};
    if ((a.kind != KA_OPT_SGD && h->slots < 2) || (a.kind == KA_OPT_SGD && u->has_momentum && h->slots < 1))
        return ftl_fail(FTL_E_INTERNAL, "the GPU head was made for %d optimizer slots", h->slots);
    return launch(h, h->f_optimizer, &a, (int64_t)h->param_count, "the optimizer kernel");
}

/* In-place sum over the ranks with NCCL, watched: past the stall timeout the communicator is
 * aborted and the step fails, naming it, so no rank waits forever for one that is gone. */
static ftl_status head_allreduce(void *ctx) {
    cuda_head *h = ctx;
    const cuda_libs *L = h->L;
    if (!h->comm) return ftl_fail(FTL_E_INTERNAL, "the NCCL communicator was aborted by an earlier failure");
    FTL_TRY(set_current(h));
    FTL_TRY(cuda_check_nccl(L->ncclAllReduce((const void *)h->grads, (void *)h->grads, h->param_count, ncclFloat, ncclSum,
                                             h->comm, (cudaStream_t)h->stream),
                            "the NCCL gradient allreduce"));
    double start = ftl_now(), timeout = ftl_dist_stall_timeout_s();
    for (unsigned spin = 0;; spin++) {
        CUresult r = L->cuStreamQuery(h->stream);
        if (r == CUDA_SUCCESS) return FTL_OK;
        if (r != CUDA_ERROR_NOT_READY) return cuda_check(r, "the NCCL gradient allreduce");
        ncclResult_t async = ncclSuccess;
        L->ncclCommGetAsyncError(h->comm, &async);
        bool stalled = timeout > 0 && ftl_now() - start > timeout;
        if (async != ncclSuccess || stalled) {
            L->ncclCommAbort(h->comm);
            h->comm = NULL;
            h->aborted = true;
            if (!stalled) return cuda_check_nccl(async, "the NCCL gradient allreduce (aborted)");
            return ftl_fail(FTL_E_IO, "the NCCL gradient allreduce over %d ranks did not finish within the stall "
                            "timeout (%g s): another rank stopped or its GPU is stuck; see the other ranks' messages",
                            h->world, timeout);
        }
        if (spin > 1000) usleep(50); /* the first thousand polls spin: a step's allreduce takes microseconds */
    }
}

static void head_destroy(void *ctx) {
    cuda_head *h = ctx;
    if (!h) return;
    const cuda_libs *L = h->L;
    if (h->ctx) L->cuCtxSetCurrent(h->ctx);
    if (h->stream && !h->aborted) L->cuStreamSynchronize(h->stream);
    if (h->comm) L->ncclCommDestroy(h->comm);
    free_batch_buffers(h);
    free_ptr(h, &h->params);
    free_ptr(h, &h->grads);
    free_ptr(h, &h->state);
    if (h->blas) L->cublasDestroy(h->blas);
    if (h->module) L->cuModuleUnload(h->module);
    if (h->stream) L->cuStreamDestroy(h->stream);
    if (h->ctx_retained) L->cuDevicePrimaryCtxRelease(h->dev);
    free(h);
}

/* NCCL between the ranks, or a NULL allreduce (the trainer's collectives through host memory)
 * when some rank cannot use it (no NCCL there, or more ranks on its host than GPUs: NCCL refuses
 * two ranks on one GPU). Every rank takes the same path, so they agree first. */
static ftl_status open_nccl(cuda_head *h, const ftl_collectives *col, const char **how) {
    const cuda_libs *L = NULL;
    char why[640] = "";
    if (cuda_libs_nccl(&L) != FTL_OK) {
        snprintf(why, sizeof why, "%s", ftl_last_error());
        ftl_clear_error();
    } else if (col->local_size > L->device_count) {
        snprintf(why, sizeof why, "%d ranks on this host share %d GPU%s, and NCCL needs a GPU of its own for each rank "
                 "(start at most %d per host to use it)",
                 col->local_size, L->device_count, L->device_count == 1 ? "" : "s", L->device_count);
    }
    int64_t unable = why[0] != '\0';
    if (ftl_dist_active(col)) FTL_TRY(ftl_dist_allreduce_i64(col, &unable, 1));
    if (unable) {
        if (why[0]) ftl_log_warn("%s; the gradients are summed over MPI through host memory instead", why);
        else if (col->rank == 0)
            ftl_log_warn("%lld rank%s cannot use NCCL (their warnings say why); the gradients are summed over MPI through "
                         "host memory instead", (long long)unable, unable == 1 ? "" : "s");
        *how = "MPI through host memory (no NCCL)";
        return FTL_OK;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (col->rank == 0) FTL_TRY(cuda_check_nccl(L->ncclGetUniqueId(&id), "ncclGetUniqueId"));
    FTL_TRY(ftl_dist_broadcast(col, &id, sizeof id, 0));
    ncclComm_t comm = NULL;
    FTL_TRY(cuda_check_nccl(L->ncclCommInitRank(&comm, col->world_size, id, col->rank), "ncclCommInitRank"));
    h->comm = comm;
    h->engine.allreduce = head_allreduce;
    int version = 0;
    L->ncclGetVersion(&version);
    static char text[64];
    snprintf(text, sizeof text, "NCCL %d.%d.%d", version / 10000, version / 100 % 100, version % 100);
    *how = text;
    return FTL_OK;
}

static ftl_status create(cuda_head *h, const ftl_device *device, size_t max_rows, const ftl_collectives *col) {
    const cuda_libs *L = h->L;
    FTL_TRY(cuda_check(L->cuDeviceGet(&h->dev, device->ordinal), "cuDeviceGet"));
    FTL_TRY(cuda_check(L->cuDevicePrimaryCtxRetain(&h->ctx, h->dev), "cuDevicePrimaryCtxRetain"));
    h->ctx_retained = true;
    FTL_TRY(set_current(h));
    L->cuDeviceGetAttribute(&h->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, h->dev);
    FTL_TRY(cuda_check(L->cuStreamCreate(&h->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    FTL_TRY(cuda_check(L->cuModuleLoadData(&h->module, ftl_cuda_head_fatbin), "loading the head's kernels for this GPU"));
    struct { CUfunction *fn; const char *name; } fns[] = {{&h->f_dropout, "ftl_head_dropout"}, {&h->f_ce, "ftl_head_softmax_ce"},
                                                           {&h->f_bias_grad, "ftl_head_bias_grad"},
                                                           {&h->f_optimizer, "ftl_head_optimizer"}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        FTL_TRY(cuda_check(L->cuModuleGetFunction(fns[i].fn, h->module, fns[i].name), fns[i].name));
    FTL_TRY(cuda_check_cublas(L->cublasCreate(&h->blas), "cublasCreate"));
    FTL_TRY(cuda_check_cublas(L->cublasSetStream(h->blas, (cudaStream_t)h->stream), "cublasSetStream"));
    size_t bytes = h->param_count * sizeof(float);
    FTL_TRY(alloc(h, &h->params, bytes, "weights"));
    FTL_TRY(alloc(h, &h->grads, bytes, "gradients"));
    if (h->slots) FTL_TRY(alloc(h, &h->state, bytes * (size_t)h->slots, "optimizer state"));
    FTL_TRY(cuda_check(L->cuMemsetD8Async(h->grads, 0, bytes, h->stream), "zeroing gradients"));
    FTL_TRY(ensure_rows(h, max_rows ? max_rows : 1));
    const char *how = "one rank";
    /* NCCL with ranks, and with one rank under a launcher (a collectives table that can
     * broadcast): the path a multi-GPU job takes, checked where there is one GPU */
    if (col && (ftl_dist_active(col) || col->broadcast)) FTL_TRY(open_nccl(h, col, &how));
    snprintf(h->engine.description, sizeof h->engine.description, "cuda:%d %.120s: cuBLAS GEMMs and ftl's kernels; %s",
             device->ordinal, device->name, how);
    return FTL_OK;
}

ftl_status nn_cuda_head_engine_create(const ftl_device *device, int64_t dim, int64_t classes, size_t max_rows,
                                      int optimizer_slots, const ftl_collectives *col, ftl_head_engine **out) {
    *out = NULL;
    if (dim < 1 || classes < 1 || (double)dim * (double)classes > 4.0e9 || optimizer_slots < 0 || optimizer_slots > 2)
        return ftl_fail(FTL_E_INVALID_ARG, "a GPU head of %lld features x %lld classes (%d optimizer slots) is not valid",
                        (long long)dim, (long long)classes, optimizer_slots);
    if ((double)max_rows * (double)dim > 2.0e9 || max_rows > (size_t)1 << 24)
        return ftl_fail(FTL_E_INVALID_ARG, "batches of %zu rows of %lld features are too large for the GPU head", max_rows,
                        (long long)dim);
    cuda_head *h = calloc(1, sizeof *h);
    if (!h) return ftl_fail(FTL_E_NOMEM, "out of memory");
    ftl_status st = cuda_libs_get(&h->L);
    if (st != FTL_OK) {
        free(h);
        return st;
    }
    h->dim = dim;
    h->classes = classes;
    h->param_count = (size_t)dim * (size_t)classes + (size_t)classes;
    h->slots = optimizer_slots;
    h->world = col ? col->world_size : 1;
    h->engine = (ftl_head_engine){.ctx = h, .dim = dim, .classes = classes, .load = head_load, .store = head_store, .train_batch = head_train_batch,
                                  .grads_to_host = head_grads_to_host, .grads_from_host = head_grads_from_host,
                                  .optimizer_step = head_optimizer_step, .evaluate_batch = head_evaluate_batch,
                                  .destroy = head_destroy};
    st = create(h, device, max_rows, col);
    if (st != FTL_OK) {
        head_destroy(h);
        return st;
    }
    *out = &h->engine;
    return FTL_OK;
}
