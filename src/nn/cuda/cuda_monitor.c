/* GPU utilization sampling with NVML (ftl/device.h ftl_device_monitor). */
#include "ftl/device.h"
#include "nn/cuda/cuda_libs.h"
#include "util/alloc.h"
#include "util/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct ftl_device_monitor {
    const cuda_libs *L;
    cuda_nvml_device dev;
    pthread_t thread;
    pthread_mutex_t lock;
    bool stop;
    double util_sum, mem_max;
    long samples;
    double last_util, last_mem; /* the latest sample: what an epoch shorter than the period gets */
    bool have_last;
};

static bool sample(ftl_device_monitor *m) {
    cuda_nvml_utilization u;
    cuda_nvml_memory mem;
    bool got = m->L->nvmlDeviceGetUtilizationRates(m->dev, &u) == 0 && m->L->nvmlDeviceGetMemoryInfo(m->dev, &mem) == 0;
    pthread_mutex_lock(&m->lock);
    bool stop = m->stop;
    if (got) {
        m->util_sum += u.gpu;
        if ((double)mem.used > m->mem_max) m->mem_max = (double)mem.used;
        m->samples++;
        m->last_util = u.gpu;
        m->last_mem = (double)mem.used;
        m->have_last = true;
    }
    pthread_mutex_unlock(&m->lock);
    return !stop;
}

static void *sample_loop(void *arg) {
    ftl_device_monitor *m = arg;
    const struct timespec period = {0, 100 * 1000 * 1000};
    while (sample(m)) nanosleep(&period, NULL);
    return NULL;
}

ftl_device_monitor *ftl_device_monitor_start(const ftl_device *d) {
    const cuda_libs *L;
    if (!d || d->kind != FTL_DEVICE_CUDA || !cuda_libs_nvml(&L)) return NULL;
    CUdevice dev;
    char bus[64];
    cuda_nvml_device h;
    if (L->cuDeviceGet(&dev, d->ordinal) != CUDA_SUCCESS || L->cuDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != CUDA_SUCCESS ||
        L->nvmlDeviceGetHandleByPciBusId_v2(bus, &h) != 0) {
        ftl_log_debug("cuda: NVML has no device for GPU %d: no utilization figures", d->ordinal);
        return NULL;
    }
    ftl_device_monitor *m = ftl_xcalloc(1, sizeof *m);
    m->L = L;
    m->dev = h;
    pthread_mutex_init(&m->lock, NULL);
    sample(m); /* one now: a job shorter than the period still gets a figure */
    if (pthread_create(&m->thread, NULL, sample_loop, m) != 0) {
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
    }
    return m;
}

bool ftl_device_monitor_take(ftl_device_monitor *m, double *util, double *mem) {
    if (!m) return false;
    pthread_mutex_lock(&m->lock);
    bool got = m->samples > 0 || m->have_last;
    if (m->samples > 0) {
        *util = m->util_sum / (double)m->samples;
        *mem = m->mem_max;
    } else if (got) {
        *util = m->last_util;
        *mem = m->last_mem;
    }
    m->util_sum = m->mem_max = 0;
    m->samples = 0;
    pthread_mutex_unlock(&m->lock);
    return got;
}

void ftl_device_monitor_stop(ftl_device_monitor *m) {
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
