/* The CUDA backend of a build without CUDA (make CUDA=0, or no nvcc at build time). */
#include "nn/cuda_backend.h"
#include "util/error.h"

bool nn_cuda_built(void) { return false; }

const char *nn_cuda_archs(void) { return NULL; }

ftl_status nn_cuda_probe(int ordinal, ftl_device *device) {
    (void)ordinal;
    (void)device;
    return ftl_fail(FTL_E_UNSUPPORTED, "--device cuda: this ftl was built without CUDA (nvcc was not found at build "
                                       "time, or make CUDA=0); rebuild with the CUDA toolkit to use a GPU");
}

const nn_backend *nn_backend_cuda(void) { return NULL; }

ftl_status nn_cuda_head_engine_create(const ftl_device *device, int64_t dim, int64_t classes, size_t max_rows,
                                      int optimizer_slots, const ftl_collectives *collectives, ftl_head_engine **out) {
    (void)device, (void)dim, (void)classes, (void)max_rows, (void)optimizer_slots, (void)collectives;
    *out = NULL;
    return nn_cuda_probe(0, NULL);
}

ftl_device_monitor *ftl_device_monitor_start(const ftl_device *device) {
    (void)device;
    return NULL;
}

bool ftl_device_monitor_take(ftl_device_monitor *monitor, double *util_percent, double *memory_bytes) {
    (void)monitor;
    (void)util_percent;
    (void)memory_bytes;
    return false;
}

void ftl_device_monitor_stop(ftl_device_monitor *monitor) { (void)monitor; }
