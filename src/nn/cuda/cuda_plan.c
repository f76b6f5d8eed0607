/* The CUDA backend's driver: device and libraries, compile (each node through its emitter in
 * cuda_ops.c), run, dataset-bytes slots (see cuda_plan.h and cuda_u8_input.h; the builder is
 * cuda_builder.c). */
#include "nn/cuda/cuda_plan.h"
#include "nn/cuda/cuda_graph_capture.h"
#include "nn/cuda/cuda_u8_input.h"
#include "nn/cuda_backend.h"
#include "nn/ir/shape.h"
#include "nn/ir/topo.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernels' fatbin, embedded by the build (fatbin.S). */
extern const unsigned char ftl_cuda_fatbin[];

static void free_slots(nn_plan *p);

/* ---- compile / run ---- */

static void plan_free(nn_plan *p) {
    if (!p) return;
    const cuda_libs *L = p->L;
    if (L && p->ctx) {
        L->cuCtxSetCurrent(p->ctx);
        if (p->stream) L->cuStreamSynchronize(p->stream);
        cu_drop_steps(p, 0);
        for (int i = 0; i < p->n_bufs; i++) L->cuMemFree(p->bufs[i].ptr);
        for (int i = 0; i < p->n_consts; i++) L->cuMemFree(p->consts[i]);
        if (p->search_ws) L->cuMemFree(p->search_ws);
        if (p->capture && p->capture->graph) L->cuGraphExecDestroy(p->capture->graph);
        if (p->blas_workspace) L->cuMemFree(p->blas_workspace);
        if (p->workspace) L->cuMemFree(p->workspace);
        if (p->input_host) L->cuMemFreeHost(p->input_host);
        if (p->output_host) L->cuMemFreeHost(p->output_host);
        free_slots(p);
        if (p->dnn) L->cudnnDestroy(p->dnn);
        if (p->blas) L->cublasDestroy(p->blas);
        if (p->module) L->cuModuleUnload(p->module);
        if (p->stream) L->cuStreamDestroy(p->stream);
        CUdevice dev;
        if (L->cuDeviceGet(&dev, p->device) == CUDA_SUCCESS) L->cuDevicePrimaryCtxRelease(dev);
    }
    free(p->bufs);
    free(p->views);
    free(p->steps);
    free(p->alts);
    free(p->consts);
    free(p->tval);
    free(p->last_node);
    free(p->capture);
    free(p->u8_input);
    free(p);
}

static ftl_status open_device(nn_plan *p, int ordinal) {
    const cuda_libs *L = p->L;
    if (ordinal < 0 || ordinal >= L->device_count)
        return ftl_fail(FTL_E_INVALID_ARG, "GPU %d: only %d visible", ordinal, L->device_count);
    CUdevice dev;
    FTL_TRY(cuda_check(L->cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
    /* the primary context: cuDNN and cuBLAS (runtime API inside) use the same one */
    FTL_TRY(cuda_check(L->cuDevicePrimaryCtxRetain(&p->ctx, dev), "cuDevicePrimaryCtxRetain"));
    p->device = ordinal;
    FTL_TRY(cuda_check(L->cuCtxSetCurrent(p->ctx), "cuCtxSetCurrent"));
    L->cuDeviceGetAttribute(&p->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    FTL_TRY(cuda_check(L->cuStreamCreate(&p->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    FTL_TRY(cuda_check(L->cuModuleLoadData(&p->module, ftl_cuda_fatbin), "loading ftl's kernels for this GPU"));
    struct { CUfunction *fn; const char *name; } fns[] = {
        {&p->f_ew, "ftl_ew"}, {&p->f_reduce, "ftl_reduce"}, {&p->f_pool, "ftl_pool"}, {&p->f_softmax, "ftl_softmax"},
        {&p->f_layernorm, "ftl_layernorm"}, {&p->f_preprocess, "ftl_preprocess"}, {&p->f_fill, "ftl_fill"}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        FTL_TRY(cuda_check(L->cuModuleGetFunction(fns[i].fn, p->module, fns[i].name), fns[i].name));
    FTL_TRY(cuda_check_cudnn(L->cudnnCreate(&p->dnn), "cudnnCreate"));
    FTL_TRY(cuda_check_cudnn(L->cudnnSetStream(p->dnn, (cudaStream_t)p->stream), "cudnnSetStream"));
    FTL_TRY(cuda_check_cublas(L->cublasCreate(&p->blas), "cublasCreate"));
    FTL_TRY(cuda_check_cublas(L->cublasSetStream(p->blas, (cudaStream_t)p->stream), "cublasSetStream"));
    /* cuBLAS's workspace given, not allocated by it mid-run: what stream capture needs */
    const size_t blas_ws = (size_t)32 << 20;
    if (L->cuMemAlloc(&p->blas_workspace, blas_ws) == CUDA_SUCCESS)
        FTL_TRY(cuda_check_cublas(L->cublasSetWorkspace(p->blas, (void *)p->blas_workspace, blas_ws), "cublasSetWorkspace"));
    else p->blas_workspace = 0;
    return FTL_OK;
}

static ftl_status compile_nodes(nn_plan *p, nn_graph *g) {
    nn_graph_last_readers(g, p->last_node);

    int in = g->inputs[0];
    const nn_shape *is = &g->tensors[in].shape;
    p->input_tensor = in;
    p->input_floats = (size_t)nn_shape_count(is);
    int iv;
    p->cur_node = -1;
    FTL_TRY(cu_alloc_view(p, in, is, CU_LAYOUT_PLAIN, KA_F32, &iv));
    cu_bind(p, in, iv);
    p->input_dev = p->views[iv].ptr;
    if (is->rank == 4) {
        p->in_nhwc = is->d[3] == 3 && is->d[1] != 3;
        p->in_h = (int)(p->in_nhwc ? is->d[1] : is->d[2]);
        p->in_w = (int)(p->in_nhwc ? is->d[2] : is->d[3]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        p->cur_node = i;
        ftl_status st = cu_emit_node(p, g, i);
        if (st != FTL_OK) return ftl_fail_context(st, "node '%s' (%s)", g->nodes[i].name, g->nodes[i].op_type);
        for (int b = 0; b < p->n_bufs; b++) /* buffers whose last reader has run are free for later nodes */
            if (p->bufs[b].busy && p->bufs[b].last <= i) p->bufs[b].busy = false;
    }
    p->cur_node = g->n_nodes;
    FTL_TRY(cu_ensure(p, g->outputs[0], CU_LAYOUT_PLAIN, KA_F32, &p->output_view));
    p->out_count = nn_shape_count(&g->tensors[g->outputs[0]].shape);
    return FTL_OK;
}

static ftl_status cuda_compile(nn_graph *g, const nn_compile_opts *o, nn_plan **out) {
    *out = NULL;
    const cuda_libs *L;
    FTL_TRY(cuda_libs_get(&L));
    FTL_TRY(nn_infer_shapes(g, o->batch));
    nn_plan *p = ftl_xcalloc(1, sizeof *p);
    p->L = L;
    p->precision = o->precision;
    p->act_dtype = o->precision == NN_PREC_BF16 ? KA_BF16 : KA_F32;
    p->deterministic = o->deterministic;
    p->batch = o->batch;
    p->tval = ftl_xmalloc(((size_t)g->n_tensors + 1) * sizeof *p->tval);
    p->last_node = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *p->last_node);
    for (int t = 0; t < g->n_tensors; t++) p->tval[t] = -1;
    ftl_status st = open_device(p, o->device);
    if (st == FTL_OK && o->precision == NN_PREC_BF16) { /* cuDNN's and cuBLAS's bf16 need Ampere or newer */
        CUdevice dev;
        int major = 0;
        if (L->cuDeviceGet(&dev, o->device) == CUDA_SUCCESS)
            L->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        if (major < 8)
            st = ftl_fail(FTL_E_UNSUPPORTED, "--precision bf16 on the GPU needs compute capability 8.0 (Ampere) or newer; "
                                             "this GPU has %d.x: use fp32 (or tf32 from 8.0)", major);
    }
    if (st == FTL_OK) {
        size_t free_b = 0, total = 0;
        L->cuMemGetInfo(&free_b, &total);
        /* scratch for timing algorithms: an eighth of the free memory (at most 1 GiB), less if that fails */
        p->search_ws_bytes = free_b / 8 < ((size_t)1 << 30) ? free_b / 8 : (size_t)1 << 30;
        while (p->search_ws_bytes >= ((size_t)1 << 20) && L->cuMemAlloc(&p->search_ws, p->search_ws_bytes) != CUDA_SUCCESS)
            p->search_ws_bytes /= 4;
        if (!p->search_ws) p->search_ws_bytes = 0;
    }
    if (st == FTL_OK) st = compile_nodes(p, g);
    if (st == FTL_OK) { /* weights went up on the default stream; the plan's stream does not wait for it */
        st = cuda_check(L->cuCtxSynchronize(), "copying the weights to the GPU");
        L->cuMemFree(p->search_ws);
        p->search_ws = 0;
        if (p->workspace_bytes) st = cu_device_alloc(p, p->workspace_bytes, &p->workspace);
    }
    if (st == FTL_OK)
        st = cuda_check(L->cuMemHostAlloc((void **)&p->input_host, p->input_floats * sizeof(float), 0), "pinned input");
    if (st == FTL_OK)
        st = cuda_check(L->cuMemHostAlloc((void **)&p->output_host, (size_t)p->out_count * sizeof(float), 0),
                        "pinned output");
    if (st != FTL_OK) {
        plan_free(p);
        return st;
    }
    ftl_log_debug("cuda: plan for batch %d: %d steps, %d convolutions (%d with fused bias/ReLU), %.1f MiB activations, "
                  "%.1f MiB weights, %.1f MiB workspace",
                  p->batch, p->n_steps, p->convs, p->fused_convs, (double)p->peak_bytes / 1048576.0,
                  (double)p->const_bytes / 1048576.0, (double)p->workspace_bytes / 1048576.0);
    *out = p;
    return FTL_OK;
}

static float *cuda_input(nn_plan *p) { return p->input_host; }

static ftl_status run_steps(nn_plan *p) {
    const cuda_libs *L = p->L;
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < p->n_steps; i++) {
        cu_step *s = &p->steps[i];
        ftl_status st = FTL_OK;
        if (s->kind == CU_STEP_KERNEL) {
            void *params[] = {&s->args};
            st = cuda_check(L->cuLaunchKernel(s->fn, s->grid, 1, 1, s->block, 1, 1, 0, p->stream, params, NULL), s->label);
        } else if (s->kind == CU_STEP_CONV && s->ad) {
            st = cuda_check_cudnn(L->cudnnConvolutionBiasActivationForward(
                                      p->dnn, &one, s->xd, (void *)s->x, s->wd, (void *)s->w, s->cd, s->algo,
                                      (void *)p->workspace, s->workspace, &s->alpha2, s->yd, (void *)s->z, s->bd,
                                      (void *)s->bias, s->ad, s->yd, (void *)s->y),
                                  s->label);
        } else if (s->kind == CU_STEP_CONV) {
            st = cuda_check_cudnn(L->cudnnConvolutionForward(p->dnn, &one, s->xd, (void *)s->x, s->wd, (void *)s->w, s->cd,
                                                             s->algo, (void *)p->workspace, s->workspace, &zero, s->yd,
                                                             (void *)s->y),
                                  s->label);
        } else {
            st = cuda_check_cublas(L->cublasGemmStridedBatchedEx(p->blas, s->op_a, s->op_b, s->m, s->n, s->k, &s->alpha,
                                                                (void *)s->a, s->type, s->lda, s->stride_a, (void *)s->b,
                                                                s->type, s->ldb, s->stride_b, &zero, (void *)s->c, s->type,
                                                                s->ldc, s->stride_c, s->batch, s->compute,
                                                                CUBLAS_GEMM_DEFAULT),
                                   s->label);
        }
        if (st != FTL_OK) return st;
    }
    return FTL_OK;
}

/* The plan's steps: replayed from a CUDA Graph when FTL_CUDA_GRAPHS=1 and the capture worked (one
 * launch instead of one per step: what pays when steps are short), else launched one by one.
 * Opt-in until measured on a GPU (bench/gpu). */
static ftl_status launch_steps(nn_plan *p) {
    const cuda_libs *L = p->L;
    cu_graph_capture *c = p->capture;
    if (c && c->graph) return cuda_check(L->cuGraphLaunch(c->graph, p->stream), "replaying the plan's CUDA Graph");
    const char *want = getenv("FTL_CUDA_GRAPHS");
    if (!want || strcmp(want, "1") != 0 || (c && c->state == 2)) return run_steps(p);
    if (!c) c = p->capture = ftl_xcalloc(1, sizeof *c); /* state 0: no run yet */
    if (c->state == 0) { /* the first run is plain: first-use work (module loading, cuBLAS's kernel
                            choice) must not happen inside a capture */
        c->state = 1;
        return run_steps(p);
    }
    c->state = 2; /* the second run is captured, then replayed (running the steps twice would not do:
                     buffers are reused, so a run consumes its input) */
    {
        FTL_TRY(cuda_check(L->cuStreamSynchronize(p->stream), "running the backbone on the GPU"));
        CUgraph g = NULL;
        if (L->cuStreamBeginCapture(p->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS) {
            ftl_status st = run_steps(p);
            CUresult r = L->cuStreamEndCapture(p->stream, &g);
            if (st == FTL_OK && r == CUDA_SUCCESS && g && L->cuGraphInstantiate(&c->graph, g, 0) == CUDA_SUCCESS) {
                L->cuGraphDestroy(g);
                ftl_log_debug("cuda: plan of %d steps captured in a CUDA Graph", p->n_steps);
                return cuda_check(L->cuGraphLaunch(c->graph, p->stream), "replaying the plan's CUDA Graph");
            }
            if (g) L->cuGraphDestroy(g);
            c->graph = NULL;
        }
        ftl_clear_error(); /* nothing captured ran: the steps run below */
        ftl_log_debug("cuda: the plan could not be captured in a CUDA Graph; launching its steps one by one");
    }
    return run_steps(p);
}

static ftl_status finish(nn_plan *p, float *output) {
    const cuda_libs *L = p->L;
    size_t bytes = (size_t)p->out_count * sizeof(float);
    FTL_TRY(cuda_check(L->cuMemcpyDtoHAsync(p->output_host, p->views[p->output_view].ptr, bytes, p->stream),
                       "copying features from the GPU"));
    FTL_TRY(cuda_check(L->cuStreamSynchronize(p->stream), "running the backbone on the GPU"));
    memcpy(output, p->output_host, bytes);
    return FTL_OK;
}

static ftl_status cuda_run(nn_plan *p, float *output) {
    const cuda_libs *L = p->L;
    FTL_TRY(cuda_check(L->cuCtxSetCurrent(p->ctx), "cuCtxSetCurrent"));
    FTL_TRY(cuda_check(L->cuMemcpyHtoDAsync(p->input_dev, p->input_host, p->input_floats * sizeof(float), p->stream),
                       "copying the batch to the GPU"));
    FTL_TRY(launch_steps(p));
    return finish(p, output);
}

/* The two input slots, made on first use (false when the device has no room: then run() is used). */
static bool make_slots(nn_plan *p) {
    if (p->u8_input || p->in_h <= 0) return p->u8_input && p->u8_input->made;
    cu_u8_input *u = p->u8_input = ftl_xcalloc(1, sizeof *u);
    const cuda_libs *L = p->L;
    L->cuCtxSetCurrent(p->ctx);
    size_t bytes = p->input_floats, out = (size_t)p->out_count * sizeof(float); /* one byte per input float */
    bool ok = L->cuStreamCreate(&u->copy_stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
              L->cuMemAlloc(&u->table_dev, 3 * 256 * sizeof(float)) == CUDA_SUCCESS;
    for (int k = 0; k < 2 && ok; k++) {
        cu_slot *sl = &u->slots[k];
        ok = L->cuMemHostAlloc((void **)&sl->u8_host, bytes, 0) == CUDA_SUCCESS && L->cuMemAlloc(&sl->u8_dev, bytes) == CUDA_SUCCESS &&
             L->cuMemHostAlloc((void **)&sl->out_host, out, 0) == CUDA_SUCCESS &&
             L->cuEventCreate(&sl->copied, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
             L->cuEventCreate(&sl->done, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
    }
    if (!ok) ftl_log_debug("cuda: no room for the input slots; batches go through the float input");
    u->made = ok;
    return ok;
}

/* Releases what make_slots made (all of it, or what it got before failing); the struct itself is
 * freed with the plan's host memory. */
static void free_slots(nn_plan *p) {
    const cuda_libs *L = p->L;
    cu_u8_input *u = p->u8_input;
    if (!u) return;
    for (int k = 0; k < 2; k++) {
        cu_slot *sl = &u->slots[k];
        if (sl->u8_host) L->cuMemFreeHost(sl->u8_host);
        if (sl->out_host) L->cuMemFreeHost(sl->out_host);
        if (sl->u8_dev) L->cuMemFree(sl->u8_dev);
        if (sl->copied) L->cuEventDestroy(sl->copied);
        if (sl->done) L->cuEventDestroy(sl->done);
    }
    if (u->table_dev) L->cuMemFree(u->table_dev);
    if (u->copy_stream) L->cuStreamDestroy(u->copy_stream);
}

static uint8_t *cuda_input_u8(nn_plan *p) {
    if (!make_slots(p)) return NULL;
    cu_u8_input *u = p->u8_input;
    if (u->slots[u->next_slot].busy) return NULL;
    return u->slots[u->next_slot].u8_host;
}

/* Starts the batch in the current slot: its copy on the copy stream, then (on the compute stream,
 * after that copy and after the previous batch) the scaling, the plan and the features' copy back. */
static ftl_status cuda_submit_u8(nn_plan *p, const float table[3][256]) {
    const cuda_libs *L = p->L;
    cu_u8_input *u = p->u8_input;
    if (!u || !u->made || u->slots[u->next_slot].busy)
        return ftl_fail(FTL_E_INTERNAL, "submit_u8 without a free input slot");
    int k = u->next_slot;
    cu_slot *sl = &u->slots[k];
    FTL_TRY(cuda_check(L->cuCtxSetCurrent(p->ctx), "cuCtxSetCurrent"));
    FTL_TRY(cuda_check(L->cuMemcpyHtoDAsync(sl->u8_dev, sl->u8_host, p->input_floats, u->copy_stream),
                       "copying the batch to the GPU"));
    FTL_TRY(cuda_check(L->cuEventRecord(sl->copied, u->copy_stream), "cuEventRecord"));
    FTL_TRY(cuda_check(L->cuStreamWaitEvent(p->stream, sl->copied, 0), "cuStreamWaitEvent"));
    if (!u->table_set || memcmp(u->table_host, table, sizeof u->table_host) != 0) {
        /* in stream order: batches already queued read the table before this copy replaces it */
        memcpy(u->table_host, table, sizeof u->table_host);
        FTL_TRY(cuda_check(L->cuMemcpyHtoDAsync(u->table_dev, u->table_host, sizeof u->table_host, p->stream), "input table"));
        u->table_set = true;
    }
    ka_preprocess_args a = {.total = (int64_t)p->input_floats, .h = p->in_h, .w = p->in_w, .nhwc = p->in_nhwc,
                            .out_dtype = KA_F32, .in = sl->u8_dev, .table = u->table_dev, .out = p->input_dev};
    unsigned grid, block;
    cu_launch_dims(p, a.total, 256, &grid, &block);
    void *params[] = {&a};
    FTL_TRY(cuda_check(L->cuLaunchKernel(p->f_preprocess, grid, 1, 1, block, 1, 1, 0, p->stream, params, NULL),
                       "scaling the input on the GPU"));
    FTL_TRY(launch_steps(p));
    FTL_TRY(cuda_check(L->cuMemcpyDtoHAsync(sl->out_host, p->views[p->output_view].ptr, (size_t)p->out_count * sizeof(float),
                                            p->stream),
                       "copying features from the GPU"));
    FTL_TRY(cuda_check(L->cuEventRecord(sl->done, p->stream), "cuEventRecord"));
    sl->busy = true;
    u->pending[u->n_pending++] = k;
    u->next_slot = 1 - k;
    return FTL_OK;
}

/* Waits for the oldest submitted batch and hands out its features. */
static ftl_status cuda_collect_u8(nn_plan *p, float *output) {
    const cuda_libs *L = p->L;
    cu_u8_input *u = p->u8_input;
    if (!u || u->n_pending == 0) return ftl_fail(FTL_E_INTERNAL, "collect_u8 with no batch submitted");
    int k = u->pending[0];
    u->pending[0] = u->pending[1];
    u->n_pending--;
    cu_slot *sl = &u->slots[k];
    sl->busy = false;
    FTL_TRY(cuda_check(L->cuEventSynchronize(sl->done), "running the backbone on the GPU"));
    memcpy(output, sl->out_host, (size_t)p->out_count * sizeof(float));
    return FTL_OK;
}

static ftl_status cuda_run_u8(nn_plan *p, const float table[3][256], float *output) {
    if (p->u8_input && p->u8_input->n_pending) return ftl_fail(FTL_E_INTERNAL, "run_u8 while batches are in flight");
    FTL_TRY(cuda_submit_u8(p, table));
    return cuda_collect_u8(p, output);
}

static void cuda_describe(const nn_plan *p, FILE *out) {
    for (int i = 0; i < p->n_steps; i++) fprintf(out, "  %-48s %s\n", p->steps[i].label, p->steps[i].impl);
    fprintf(out, "  device memory: %.1f MiB activations, %.1f MiB weights, %.1f MiB workspace\n",
            (double)p->peak_bytes / 1048576.0, (double)p->const_bytes / 1048576.0, (double)p->workspace_bytes / 1048576.0);
}

static int no_winograd(const nn_plan *p) {
    (void)p;
    return 0;
}

const nn_backend *nn_backend_cuda(void) {
    static const nn_backend be = {.name = "cuda", .compile = cuda_compile, .input = cuda_input, .run = cuda_run,
                                  .describe = cuda_describe, .winograd_convs = no_winograd, .free = plan_free,
                                  .input_u8 = cuda_input_u8, .run_u8 = cuda_run_u8, .submit_u8 = cuda_submit_u8,
                                  .collect_u8 = cuda_collect_u8};
    return &be;
}
