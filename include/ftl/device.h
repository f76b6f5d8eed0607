/* ftl public API: where the backbone runs. The CPU (oneDNN) always; NVIDIA GPUs (cuDNN, cuBLAS)
 * when this ftl was built with CUDA (`make` finds nvcc; `make CUDA=0` leaves it out) and the machine
 * has a driver, a GPU and the libraries, which are loaded at run time:
 *
 *     ftl_device d;
 *     FTL_TRY(ftl_device_select(FTL_DEVICE_AUTO, -1, &d));   // a visible GPU, else the CPU
 *     printf("%s\n", d.description);
 */
#ifndef FTL_DEVICE_H
#define FTL_DEVICE_H

#include "ftl/base.h"
#include "ftl/dist.h"
#include "ftl/train.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ftl_device_kind {
    FTL_DEVICE_AUTO = 0, /* a GPU when one is usable, else the CPU */
    FTL_DEVICE_CPU,
    FTL_DEVICE_CUDA,
} ftl_device_kind;

/* "cpu" / "cuda" / "auto". */
ftl_status ftl_device_parse(const char *text, ftl_device_kind *kind);
const char *ftl_device_kind_name(ftl_device_kind kind);
/* Whether this build has the CUDA backend. */
bool ftl_device_cuda_built(void);

/* What this build can run on and what it finds here, for `ftl --version`. */
typedef struct ftl_backends {
    char cpu[320];           /* "oneDNN 2.6.3 (avx2 on this CPU: AMD EPYC)" */
    bool cuda_built;
    char cuda_archs[128];    /* "sm_75, sm_80, sm_86, sm_89, sm_90 and PTX for newer GPUs" */
    bool cuda_found;         /* a usable GPU with its libraries was found at run time */
    char cuda_runtime[640];  /* the GPU and library versions found, or why none is usable */
} ftl_backends;
void ftl_backends_describe(ftl_backends *backends);

typedef struct ftl_device {
    ftl_device_kind kind;       /* FTL_DEVICE_CPU or FTL_DEVICE_CUDA once selected */
    int ordinal;                /* CUDA: the device among the visible ones (CUDA_VISIBLE_DEVICES applies) */
    char name[128];             /* "NVIDIA H200"; the CPU's model name */
    int sm;                     /* CUDA compute capability x 10 (90 for sm_90) */
    long long memory_bytes;     /* CUDA: device memory */
    char versions[160];         /* CUDA: "CUDA driver 13.0, cuDNN 9.19.0, cuBLAS 13.1.0" */
    char description[384];      /* one line for logs, feature files, models and checkpoints */
    char fallback[512];         /* auto chose the CPU: why no GPU ("" otherwise) */
} ftl_device;

/* Resolves a request. cpu: the CPU. cuda: GPU `index` (-1: the launcher's local rank, as
 * hvd.local_rank(), modulo the visible GPUs), or an error naming what is missing (no driver, no GPU,
 * no cuDNN, a GPU older than the build supports, a build without CUDA). auto: that GPU when cuda
 * would succeed, else the CPU with the reason in `fallback`. */
ftl_status ftl_device_select(ftl_device_kind want, int index, ftl_device *device);

/* GPU utilization and memory while a job runs (NVML, sampled every 100 ms by a background thread):
 * the article's GPU-utilization graph, per epoch. NULL when the device is not a GPU or NVML cannot
 * be loaded (the driver's libnvidia-ml.so.1). */
typedef struct ftl_device_monitor ftl_device_monitor;
ftl_device_monitor *ftl_device_monitor_start(const ftl_device *device);
/* Averages since the last take (or the start): GPU busy % and the most device memory in use (bytes,
 * every process on the GPU); the latest sample when none was taken since (a take within 100 ms).
 * False before the first sample. */
bool ftl_device_monitor_take(ftl_device_monitor *monitor, double *util_percent, double *memory_bytes);
void ftl_device_monitor_stop(ftl_device_monitor *monitor);

/* The head's training steps on a GPU device (ftl/train.h ftl_head_engine, for
 * ftl_fit_config.head_engine): cuBLAS GEMMs (fp32) and ftl's kernels for dropout, softmax
 * cross-entropy, the bias gradient and the optimizers, the same math as the CPU head. A head of
 * dim x classes, batches of up to max_rows rows to start with (larger ones grow the buffers),
 * optimizer_slots state vectors (ftl_optimizer.slot_count). With several ranks (collectives
 * active, one GPU each; or a one-rank table that has a broadcast: an allreduce of one) the
 * gradients are summed on the devices by NCCL, its unique id broadcast over the collectives;
 * without NCCL, over the collectives through host memory (a warning says so). collectives NULL:
 * one process, no NCCL. Out of GPU memory is an error naming what did not fit. */
ftl_status ftl_device_head_engine_create(const ftl_device *device, int64_t dim, int64_t classes, size_t max_rows,
                                         int optimizer_slots, const ftl_collectives *collectives, ftl_head_engine **engine);
void ftl_head_engine_free(ftl_head_engine *engine);

#ifdef __cplusplus
}
#endif
#endif
