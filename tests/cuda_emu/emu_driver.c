/* An emulated CUDA driver for tests on machines without a GPU: the part of libcuda that ftl's CUDA
 * backend calls, on host memory, synchronous. Device memory is poisoned with NaN bytes when
 * allocated, so a plan reading memory nothing wrote shows NaN in its output; copies are checked
 * against the allocations. Loaded in place of libcuda.so.1 through FTL_CUDA_DRIVER_LIBRARY (and
 * FTL_CUDNN_LIBRARY / FTL_CUBLAS_LIBRARY / FTL_NVML_LIBRARY: the same file holds all four, see
 * emu_cudnn.c, emu_cublas.c and emu_nvml.c). Kernels run from their own source (emu_kernels.cpp).
 * Stream capture records the work and graph launches replay it (see below). */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int emu_kernel_launch(const char *name, void **params);
int emu_kernel_known(const char *name);
size_t emu_kernel_args_size(const char *name);
/* Stream capture (for emu_cudnn.c and emu_cublas.c too): while a stream is captured, work is recorded,
 * not run; a graph launch runs the recording in order. */
int emu_capturing(void);
void emu_record(void (*run)(void *arg), void *arg);
/* Whether [p, p+bytes) lies inside one live allocation (for the other emulated libraries). */
int emu_valid_range(const void *p, size_t bytes);

struct CUctx_st { int device; };
struct CUmod_st { int loaded; };
struct CUfunc_st { char name[64]; };
struct CUstream_st { int id; };
struct CUevent_st { int id; };

enum { MAX_DEVICES = 16 };
static struct CUctx_st contexts[MAX_DEVICES]; /* each device's primary context */
static int launches;

typedef struct allocation { char *p; size_t bytes; } allocation;
static allocation *allocs;
static int n_allocs, cap_allocs;
static size_t in_use;

size_t emu_memory_in_use(void);
size_t emu_memory_in_use(void) { return in_use; }
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void track(void *p, size_t bytes) {
    pthread_mutex_lock(&lock);
    if (n_allocs == cap_allocs) {
        cap_allocs = cap_allocs ? 2 * cap_allocs : 256;
        allocs = realloc(allocs, (size_t)cap_allocs * sizeof *allocs);
    }
    allocs[n_allocs++] = (allocation){p, bytes};
    in_use += bytes;
    pthread_mutex_unlock(&lock);
}

static int untrack(void *p) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_allocs; i++)
        if (allocs[i].p == p) {
            in_use -= allocs[i].bytes;
            allocs[i] = allocs[--n_allocs];
            pthread_mutex_unlock(&lock);
            return 1;
        }
    pthread_mutex_unlock(&lock);
    return 0;
}

int emu_valid_range(const void *p, size_t bytes) {
    const char *c = p;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_allocs; i++)
        if (c >= allocs[i].p && c + bytes <= allocs[i].p + allocs[i].bytes) {
            pthread_mutex_unlock(&lock);
            return 1;
        }
    pthread_mutex_unlock(&lock);
    return 0;
}

static CUresult bad_range(const char *what, const void *p, size_t bytes) {
    fprintf(stderr, "emulated GPU: %s of %zu bytes at %p is outside every allocation\n", what, bytes, p);
    return CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* FTL_EMU_DEVICES=0: a driver that sees no GPU; FTL_EMU_SM=NN: a GPU of compute capability N.N. */
static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

CUresult cuInit(unsigned int flags) {
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    return env_int("FTL_EMU_DEVICES", 1) > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : r == CUDA_ERROR_ILLEGAL_ADDRESS ? "illegal address" : "error";
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int *n) { *n = env_int("FTL_EMU_DEVICES", 1); return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal >= env_int("FTL_EMU_DEVICES", 1) || ordinal >= MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    (void)d;
    snprintf(name, (size_t)len, "ftl emulated GPU");
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    (void)d;
    int sm = env_int("FTL_EMU_SM", 90);
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? sm / 10 : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? sm % 10
       : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 4 : 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d) { (void)d; *bytes = (size_t)8 << 30; return CUDA_SUCCESS; }
CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d) { snprintf(id, (size_t)len, "0000:%02x:00.0", d); return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    if (d < 0 || d >= MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    contexts[d].device = d;
    *c = &contexts[d];
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static int current_device = -1;
int emu_current_device(void); /* for emu_nccl.c: which GPU a rank's communicator is on */
int emu_current_device(void) { return current_device; }
CUresult cuCtxSetCurrent(CUcontext c) {
    if (!(c >= contexts && c < contexts + MAX_DEVICES)) return CUDA_ERROR_INVALID_CONTEXT;
    current_device = c->device;
    return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }

CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    uint32_t magic;
    memcpy(&magic, image, 4);
    if (magic != 0xBA55ED50u) { /* a fatbin starts with its magic: the embedding must have worked */
        fprintf(stderr, "emulated GPU: the module image is not a fatbin (magic %08x)\n", magic);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    *m = calloc(1, sizeof **m);
    return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    static struct CUfunc_st handles[16]; /* one per kernel name, for the process */
    if (!m || !emu_kernel_known(name)) return CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < 16 && handles[i].name[0] && strcmp(handles[i].name, name) != 0) i++;
    if (i < 16 && !handles[i].name[0]) snprintf(handles[i].name, sizeof handles[i].name, "%s", name);
    pthread_mutex_unlock(&lock);
    if (i == 16) return CUDA_ERROR_OUT_OF_MEMORY;
    *f = &handles[i];
    return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) { free(m); return CUDA_SUCCESS; }

/* Stream capture: the work issued while a stream is captured is recorded (kernels with a copy of
 * their arguments, cuDNN and cuBLAS calls likewise) and a graph launch runs it in order.
 * FTL_EMU_NO_GRAPHS=1 makes a driver that refuses to capture; FTL_EMU_TRACE=1 prints the number of
 * graph launches at exit. */
typedef struct emu_op { void (*run)(void *); void *arg; } emu_op;
struct CUgraph_st { emu_op *ops; int n, cap, refs; };
static struct CUgraph_st *recording;
static CUstream captured;
static int graph_launches;

int emu_capturing(void) { return captured != NULL; }

void emu_record(void (*run)(void *arg), void *arg) {
    if (recording->n == recording->cap) {
        recording->cap = recording->cap ? 2 * recording->cap : 64;
        recording->ops = realloc(recording->ops, (size_t)recording->cap * sizeof *recording->ops);
    }
    recording->ops[recording->n++] = (emu_op){run, arg};
}

typedef struct kernel_call { char name[64]; void *args; } kernel_call;
static void replay_kernel(void *p) {
    kernel_call *k = p;
    void *params[] = {k->args};
    emu_kernel_launch(k->name, params);
}

static void report_launches(void) { fprintf(stderr, "emulated GPU: %d graph launches\n", graph_launches); }

CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
    (void)mode;
    const char *no = getenv("FTL_EMU_NO_GRAPHS");
    if (no && strcmp(no, "1") == 0) return CUDA_ERROR_NOT_SUPPORTED;
    if (captured) return CUDA_ERROR_ILLEGAL_STATE;
    captured = s;
    recording = calloc(1, sizeof *recording);
    recording->refs = 1;
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
    if (s != captured) return CUDA_ERROR_ILLEGAL_STATE;
    captured = NULL;
    *g = recording;
    recording = NULL;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiate(CUgraphExec *e, CUgraph g, unsigned long long flags) {
    if (!g || flags) return CUDA_ERROR_INVALID_VALUE;
    g->refs++;
    *e = (CUgraphExec)g;
    return CUDA_SUCCESS;
}
static void release(struct CUgraph_st *g) {
    if (--g->refs > 0) return;
    for (int i = 0; i < g->n; i++) {
        if (g->ops[i].run == replay_kernel) free(((kernel_call *)g->ops[i].arg)->args);
        free(g->ops[i].arg);
    }
    free(g->ops);
    free(g);
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
    (void)s;
    struct CUgraph_st *g = (struct CUgraph_st *)e;
    if (!g || captured) return CUDA_ERROR_INVALID_VALUE;
    if (graph_launches++ == 0 && getenv("FTL_EMU_TRACE")) atexit(report_launches);
    for (int i = 0; i < g->n; i++) g->ops[i].run(g->ops[i].arg);
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec e) { release((struct CUgraph_st *)e); return CUDA_SUCCESS; }
CUresult cuGraphDestroy(CUgraph g) { release(g); return CUDA_SUCCESS; }
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void **params, void **extra) {
    (void)s;
    if (!f || !params || extra || gx < 1 || gy != 1 || gz != 1 || bx < 32 || bx > 1024 || bx % 32 || by != 1 || bz != 1 ||
        shared)
        return CUDA_ERROR_INVALID_VALUE;
    launches++;
    if (captured) { /* a copy of the argument struct, run at each graph launch */
        kernel_call *k = calloc(1, sizeof *k);
        snprintf(k->name, sizeof k->name, "%s", f->name);
        size_t size = emu_kernel_args_size(f->name);
        k->args = malloc(size);
        memcpy(k->args, params[0], size);
        emu_record(replay_kernel, k);
        return CUDA_SUCCESS;
    }
    return emu_kernel_launch(f->name, params) == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes) {
    const char *limit = getenv("FTL_EMU_GPU_MEMORY"); /* tests of running out of memory */
    if (limit && in_use + bytes > (size_t)atoll(limit)) return CUDA_ERROR_OUT_OF_MEMORY;
    void *m = malloc(bytes ? bytes : 1);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    if (bytes <= ((size_t)64 << 20)) memset(m, 0xff, bytes); /* NaN in fp32 and bf16 (not the big scratch areas) */
    track(m, bytes);
    *p = (CUdeviceptr)m;
    return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr p) {
    if (!untrack((void *)p)) return CUDA_ERROR_INVALID_VALUE;
    free((void *)p);
    return CUDA_SUCCESS;
}
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned int flags) {
    (void)flags;
    *p = malloc(bytes ? bytes : 1);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p) { free(p); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    if (!emu_valid_range((void *)dst, n)) return bad_range("copy to the device", (void *)dst, n);
    memcpy((void *)dst, src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    if (!emu_valid_range((void *)src, n)) return bad_range("copy from the device", (void *)src, n);
    memcpy(dst, (void *)src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) { (void)s; return cuMemcpyHtoD(dst, src, n); }
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) { (void)s; return cuMemcpyDtoH(dst, src, n); }
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    (void)s;
    if (!emu_valid_range((void *)dst, n)) return bad_range("memset", (void *)dst, n);
    memset((void *)dst, v, n);
    return CUDA_SUCCESS;
}
CUresult cuMemGetInfo(size_t *free_b, size_t *total) {
    const char *limit = getenv("FTL_EMU_GPU_MEMORY");
    *total = limit ? (size_t)atoll(limit) : (size_t)8 << 30;
    *free_b = *total > in_use ? *total - in_use : 0;
    return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream *s, unsigned int flags) { (void)flags; *s = calloc(1, sizeof **s); return CUDA_SUCCESS; }
CUresult cuStreamDestroy(CUstream s) { free(s); return CUDA_SUCCESS; }
static int stuck;
CUresult cuStreamSynchronize(CUstream s) {
    (void)s;
    if (!stuck) return CUDA_SUCCESS;
    fprintf(stderr, "emulated GPU: cuStreamSynchronize on a stream that never finishes (a real one would wait forever)\n");
    return CUDA_ERROR_LAUNCH_TIMEOUT;
}
/* The emulated device runs work as it is issued, so a stream is always done, except after an
 * allreduce of a stuck emulated NCCL (FTL_EMU_NCCL_STUCK=1), until that communicator is aborted. */
void emu_set_stream_stuck(int on);
void emu_set_stream_stuck(int on) { stuck = on; }
CUresult cuStreamQuery(CUstream s) { (void)s; return stuck ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS; }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) { (void)s; (void)e; (void)flags; return CUDA_SUCCESS; }
CUresult cuEventCreate(CUevent *e, unsigned int flags) { (void)flags; *e = calloc(1, sizeof **e); return CUDA_SUCCESS; }
CUresult cuEventDestroy(CUevent e) { free(e); return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0; return CUDA_SUCCESS; }
