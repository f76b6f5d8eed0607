/* Which GPU: probing a visible device for the CUDA backend (nn/cuda_backend.h). */
#include "nn/cuda/cuda_libs.h"
#include "nn/cuda_backend.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

/* The oldest compute capability with code in this build (the Makefile's CUDA_ARCHS start there). */
enum { MIN_SM = 75 };

bool nn_cuda_built(void) { return true; }

#ifndef FTL_CUDA_ARCHS
#define FTL_CUDA_ARCHS "75"
#endif
const char *nn_cuda_archs(void) { return FTL_CUDA_ARCHS; }

ftl_status nn_cuda_probe(int ordinal, ftl_device *d) {
    const cuda_libs *L;
    FTL_TRY(cuda_libs_get(&L));
    int index = ordinal % L->device_count; /* one rank per GPU: local rank k takes GPU k (mod the GPUs) */
    CUdevice dev;
    FTL_TRY(cuda_check(L->cuDeviceGet(&dev, index), "cuDeviceGet"));
    memset(d, 0, sizeof *d);
    d->kind = FTL_DEVICE_CUDA;
    d->ordinal = index;
    if (L->cuDeviceGetName(d->name, (int)sizeof d->name, dev) != CUDA_SUCCESS) snprintf(d->name, sizeof d->name, "GPU");
    int major = 0, minor = 0;
    L->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    L->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    d->sm = major * 10 + minor;
    size_t bytes = 0;
    L->cuDeviceTotalMem(&bytes, dev);
    d->memory_bytes = (long long)bytes;
    snprintf(d->versions, sizeof d->versions, "%s", L->versions);
    if (d->sm < MIN_SM)
        return ftl_fail(FTL_E_UNSUPPORTED,
                        "--device cuda: GPU %d (%s) has compute capability %d.%d; this build has code for sm_%d (Turing) "
                        "and newer",
                        index, d->name, major, minor, MIN_SM);
    snprintf(d->description, sizeof d->description, "cuda:%d %s (sm_%d, %.1f GiB; %s)", index, d->name, d->sm,
             (double)bytes / 1073741824.0, d->versions);
    return FTL_OK;
}
