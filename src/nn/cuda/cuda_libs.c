/* Run-time loading of the NVIDIA libraries (see cuda_libs.h). */
#include "nn/cuda/cuda_libs.h"
#include "util/error.h"
#include "util/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_DRIVER = 13000 }; /* CUDA 13.0 */

static cuda_libs libs;
static pthread_once_t load_once = PTHREAD_ONCE_INIT, nccl_once = PTHREAD_ONCE_INIT, nvml_once = PTHREAD_ONCE_INIT;
static ftl_status load_status, nccl_status;
static char load_error[1024], nccl_error[1024];
static bool nvml_ok;

#define STR_(x) #x
#define STR(x) STR_(x)

static const char *library(const char *env, const char *fallback) {
    const char *e = getenv(env);
    return e && *e ? e : fallback;
}

/* dlsym of every name in a list; the first missing one is reported. */
static bool resolve(void *lib, const char *const *names, void **slots, int n, const char **missing) {
    for (int i = 0; i < n; i++) {
        slots[i] = dlsym(lib, names[i]);
        if (!slots[i]) {
            *missing = names[i];
            return false;
        }
    }
    return true;
}

#define NAME_OF(name) STR(name),
#define SLOT_OF(name) (void **)&libs.name,

static ftl_status failed(ftl_status code, const char *fmt, const char *a, const char *b) {
    snprintf(load_error, sizeof load_error, fmt, a, b);
    return code;
}

/* dlopen of one library and dlsym of its table; "" on success, else what went wrong (load_error). */
static ftl_status load_table(const char *env, const char *fallback, void **lib, const char *const *names, void ***slots,
                             int n, const char *missing_fmt, const char *wrong_fmt) {
    const char *path = library(env, fallback), *missing = NULL;
    *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*lib) return failed(FTL_E_UNSUPPORTED, missing_fmt, path, dlerror());
    void *got[64];
    if (n > 64 || !resolve(*lib, names, got, n, &missing)) return failed(FTL_E_UNSUPPORTED, wrong_fmt, path, missing);
    for (int i = 0; i < n; i++) *slots[i] = got[i];
    return FTL_OK;
}

#define LOAD_TABLE(LIST, env, fallback, lib, missing_fmt, wrong_fmt)                                                    \
    do {                                                                                                            \
        static const char *const names[] = {LIST(NAME_OF)};                                                         \
        void **slots[] = {LIST(SLOT_OF)};                                                                           \
        FTL_TRY(load_table(env, fallback, &libs.lib, names, slots, (int)(sizeof names / sizeof names[0]), missing_fmt, \
                           wrong_fmt));                                                                             \
    } while (0)

static ftl_status load_libraries(void) {
    LOAD_TABLE(CUDA_DRIVER_FUNCS, "FTL_CUDA_DRIVER_LIBRARY", "libcuda.so.1", driver_lib,
               "no NVIDIA driver: %s could not be loaded (%s)", "the NVIDIA driver %s is too old for this build: it has no %s");
    LOAD_TABLE(CUDA_CUDNN_FUNCS, "FTL_CUDNN_LIBRARY", "libcudnn.so.9", cudnn_lib,
               "no cuDNN 9: %s could not be loaded (%s); install cuDNN 9 for CUDA 13 or add its lib folder to LD_LIBRARY_PATH",
               "%s is not the cuDNN 9 this build needs: it has no %s");
    LOAD_TABLE(CUDA_CUBLAS_FUNCS, "FTL_CUBLAS_LIBRARY", "libcublas.so.13", cublas_lib,
               "no cuBLAS: %s could not be loaded (%s); install cuBLAS for CUDA 13 or add its lib folder to LD_LIBRARY_PATH",
               "%s is not the cuBLAS this build needs: it has no %s");
    return FTL_OK;
}

static ftl_status init_driver(void) {
    CUresult r = libs.cuInit(0);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    char text[64];
    if (r == CUDA_ERROR_STUB_LIBRARY)
        return failed(FTL_E_UNSUPPORTED, "no NVIDIA driver: %s is the CUDA toolkit's stub library, not a driver%s",
                      library("FTL_CUDA_DRIVER_LIBRARY", "libcuda.so.1"), "");
    if (r == CUDA_ERROR_NO_DEVICE)
        return failed(FTL_E_UNSUPPORTED, "no GPU: the NVIDIA driver sees no CUDA device (CUDA_VISIBLE_DEVICES=%s)%s",
                      visible ? visible : "unset", "");
    if (r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || r == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
        return failed(FTL_E_UNSUPPORTED, "the NVIDIA driver is too old for CUDA 13 (%s)%s", cuda_result_text(r), "");
    if (r != CUDA_SUCCESS) return failed(FTL_E_UNSUPPORTED, "CUDA could not start: cuInit: %s%s", cuda_result_text(r), "");
    int v = 0;
    libs.cuDriverGetVersion(&v);
    libs.driver_version = v;
    if (v < MIN_DRIVER) {
        snprintf(text, sizeof text, "%d.%d", v / 1000, v % 1000 / 10);
        return failed(FTL_E_UNSUPPORTED, "the NVIDIA driver supports CUDA %s; this build needs CUDA 13.0 or newer%s", text, "");
    }
    r = libs.cuDeviceGetCount(&libs.device_count);
    if (r != CUDA_SUCCESS || libs.device_count < 1)
        return failed(FTL_E_UNSUPPORTED, "no GPU: the NVIDIA driver sees no CUDA device (CUDA_VISIBLE_DEVICES=%s)%s",
                      visible ? visible : "unset", "");
    size_t cudnn = libs.cudnnGetVersion();
    if (cudnn / 10000 != 9) {
        snprintf(text, sizeof text, "%zu", cudnn);
        return failed(FTL_E_UNSUPPORTED, "cuDNN version %s was loaded; this build needs cuDNN 9%s", text, "");
    }
    /* cuBLAS's version without a handle: a handle would make a context on GPU 0 in every process */
    int major = 0, minor = 0, patch = 0;
    libs.cublasGetProperty(MAJOR_VERSION, &major);
    libs.cublasGetProperty(MINOR_VERSION, &minor);
    libs.cublasGetProperty(PATCH_LEVEL, &patch);
    snprintf(libs.versions, sizeof libs.versions, "CUDA driver %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %d.%d.%d", v / 1000,
             v % 1000 / 10, cudnn / 10000, cudnn / 100 % 100, cudnn % 100, major, minor, patch);
    return FTL_OK;
}

static void load_once_fn(void) {
    load_status = load_libraries();
    if (load_status == FTL_OK) load_status = init_driver();
}

ftl_status cuda_libs_get(const cuda_libs **out) {
    pthread_once(&load_once, load_once_fn);
    *out = load_status == FTL_OK ? &libs : NULL;
    if (load_status != FTL_OK) return ftl_fail(load_status, "--device cuda: %s", load_error);
    return FTL_OK;
}

static ftl_status load_nccl(void) {
    LOAD_TABLE(CUDA_NCCL_FUNCS, "FTL_NCCL_LIBRARY", "libnccl.so.2", nccl_lib, "no NCCL: %s could not be loaded (%s)",
               "%s is not the NCCL 2 this build needs: it has no %s");
    return FTL_OK;
}

static void nccl_once_fn(void) {
    nccl_status = load_nccl();
    if (nccl_status != FTL_OK) snprintf(nccl_error, sizeof nccl_error, "%s", load_error);
}

ftl_status cuda_libs_nccl(const cuda_libs **out) {
    FTL_TRY(cuda_libs_get(out));
    pthread_once(&nccl_once, nccl_once_fn);
    if (nccl_status != FTL_OK) {
        *out = NULL;
        return ftl_fail(nccl_status, "%s", nccl_error);
    }
    return FTL_OK;
}

static void nvml_once_fn(void) {
    libs.nvml_lib = dlopen(library("FTL_NVML_LIBRARY", "libnvidia-ml.so.1"), RTLD_NOW | RTLD_LOCAL);
    if (!libs.nvml_lib) {
        ftl_log_debug("cuda: NVML not loaded (%s): no GPU utilization figures", dlerror());
        return;
    }
    *(void **)&libs.nvmlInit_v2 = dlsym(libs.nvml_lib, "nvmlInit_v2");
    *(void **)&libs.nvmlDeviceGetHandleByPciBusId_v2 = dlsym(libs.nvml_lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&libs.nvmlDeviceGetUtilizationRates = dlsym(libs.nvml_lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&libs.nvmlDeviceGetMemoryInfo = dlsym(libs.nvml_lib, "nvmlDeviceGetMemoryInfo");
    nvml_ok = libs.nvmlInit_v2 && libs.nvmlDeviceGetHandleByPciBusId_v2 && libs.nvmlDeviceGetUtilizationRates &&
              libs.nvmlDeviceGetMemoryInfo && libs.nvmlInit_v2() == 0;
    if (!nvml_ok) ftl_log_debug("cuda: NVML did not start: no GPU utilization figures");
}

bool cuda_libs_nvml(const cuda_libs **out) {
    if (cuda_libs_get(out) != FTL_OK) return false;
    pthread_once(&nvml_once, nvml_once_fn);
    return nvml_ok;
}

const char *cuda_result_text(CUresult r) {
    static _Thread_local char text[160];
    const char *s = NULL;
    if (libs.cuGetErrorString) libs.cuGetErrorString(r, &s);
    snprintf(text, sizeof text, "CUDA error %d%s%s", (int)r, s ? ": " : "", s ? s : "");
    return text;
}

ftl_status cuda_check(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS) return FTL_OK;
    return ftl_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FTL_E_NOMEM : FTL_E_INTERNAL, "%s: %s", what, cuda_result_text(r));
}

ftl_status cuda_check_cudnn(cudnnStatus_t s, const char *what) {
    if (s == CUDNN_STATUS_SUCCESS) return FTL_OK;
    /* cuDNN 9 sub-codes its refusals (NOT_SUPPORTED_LAYOUT, _DATA_TYPE, ...): the category says it */
    return ftl_fail(CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED ? FTL_E_UNSUPPORTED : FTL_E_INTERNAL,
                    "%s: cuDNN: %s (status %d)", what,
                    libs.cudnnGetErrorString ? libs.cudnnGetErrorString(s) : "error", (int)s);
}

ftl_status cuda_check_cublas(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return FTL_OK;
    return ftl_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? FTL_E_NOMEM : FTL_E_INTERNAL, "%s: cuBLAS status %d", what, (int)s);
}

ftl_status cuda_check_nccl(ncclResult_t r, const char *what) {
    if (r == ncclSuccess) return FTL_OK;
    return ftl_fail(FTL_E_INTERNAL, "%s: NCCL: %s", what, libs.ncclGetErrorString ? libs.ncclGetErrorString(r) : "error");
}
