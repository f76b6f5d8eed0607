/* The NVIDIA libraries, loaded at run time (dlopen) so that a CUDA build of ftl starts on any
 * machine: the driver (libcuda), cuDNN, cuBLAS, and on demand NCCL and NVML. The function
 * pointers carry the headers' own prototypes (__typeof__), so every call is type-checked; names
 * the headers map to versioned symbols (cuMemAlloc -> cuMemAlloc_v2) are looked up by those.
 *
 * cuda_libs_get() loads once per process and names what is missing: no driver, the toolkit's stub
 * driver, a driver too old for CUDA 13, no GPU, a GPU older than this build's sm_75, no cuDNN 9 or
 * cuBLAS. Tests point the loader at other files with FTL_CUDA_DRIVER_LIBRARY, FTL_CUDNN_LIBRARY
 * and FTL_CUBLAS_LIBRARY. */
#ifndef FTL_NN_CUDA_LIBS_H
#define FTL_NN_CUDA_LIBS_H

#include "ftl/base.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdbool.h>

#define CUDA_DRIVER_FUNCS(X)                                                                                         \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)        \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain)                   \
    X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleGetFunction)   \
    X(cuModuleUnload) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost)                \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8Async) X(cuMemGetInfo)     \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)  \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWaitEvent) X(cuStreamBeginCapture) X(cuStreamEndCapture)      \
    X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

#define CUDA_CUDNN_FUNCS(X)                                                                                          \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                       \
    X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnDestroyTensorDescriptor)                     \
    X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor)                     \
    X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount)          \
    X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolution2dForwardOutputDim)    \
    X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnConvolutionForward) X(cudnnConvolutionBiasActivationForward)  \
    X(cudnnCreateActivationDescriptor) X(cudnnSetActivationDescriptor) X(cudnnDestroyActivationDescriptor)

#define CUDA_CUBLAS_FUNCS(X)                                                                                         \
    X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasGetVersion) X(cublasGemmEx)                          \
    X(cublasGemmStridedBatchedEx) X(cublasSetWorkspace) X(cublasGetProperty)

#define CUDA_NCCL_FUNCS(X)                                                                                           \
    X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy)                \
    X(ncclCommAbort) X(ncclCommGetAsyncError) X(ncclAllReduce) X(ncclBroadcast) X(ncclGroupStart) X(ncclGroupEnd)

/* NVML has no header in the toolkit: the few calls used, with their documented ABI. */
typedef struct cuda_nvml_device_st *cuda_nvml_device;
typedef struct cuda_nvml_utilization { unsigned int gpu, memory; } cuda_nvml_utilization;
typedef struct cuda_nvml_memory { unsigned long long total, free, used; } cuda_nvml_memory;

typedef struct cuda_libs {
    void *driver_lib, *cudnn_lib, *cublas_lib, *nccl_lib, *nvml_lib;
#define CUDA_LIBS_DECLARE(name) __typeof__(&name) name;
    CUDA_DRIVER_FUNCS(CUDA_LIBS_DECLARE)
    CUDA_CUDNN_FUNCS(CUDA_LIBS_DECLARE)
    CUDA_CUBLAS_FUNCS(CUDA_LIBS_DECLARE)
    CUDA_NCCL_FUNCS(CUDA_LIBS_DECLARE)
#undef CUDA_LIBS_DECLARE
    int (*nvmlInit_v2)(void);
    int (*nvmlDeviceGetHandleByPciBusId_v2)(const char *bus_id, cuda_nvml_device *device);
    int (*nvmlDeviceGetUtilizationRates)(cuda_nvml_device device, cuda_nvml_utilization *utilization);
    int (*nvmlDeviceGetMemoryInfo)(cuda_nvml_device device, cuda_nvml_memory *memory);
    int device_count;            /* visible CUDA devices (CUDA_VISIBLE_DEVICES applies) */
    int driver_version;          /* e.g. 13000 */
    char versions[160];          /* "CUDA driver 13.0, cuDNN 9.19.0, cuBLAS 13.0.2" */
} cuda_libs;

/* Loads and checks the driver, cuDNN and cuBLAS and initialises CUDA (once; later calls return the
 * same table or the same error). */
ftl_status cuda_libs_get(const cuda_libs **libs);
/* NCCL (libnccl.so.2) and NVML (libnvidia-ml.so.1), loaded on first use. NVML is optional: false
 * (with a debug log) when it cannot be loaded. */
ftl_status cuda_libs_nccl(const cuda_libs **libs);
bool cuda_libs_nvml(const cuda_libs **libs);

/* "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a driver result. */
const char *cuda_result_text(CUresult r);
/* Driver / cuDNN / cuBLAS / NCCL result to an ftl error naming `what`. */
ftl_status cuda_check(CUresult r, const char *what);
ftl_status cuda_check_cudnn(cudnnStatus_t s, const char *what);
ftl_status cuda_check_cublas(cublasStatus_t s, const char *what);
ftl_status cuda_check_nccl(ncclResult_t r, const char *what);

#endif
