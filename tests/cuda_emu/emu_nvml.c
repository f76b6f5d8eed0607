/* The emulated device's NVML: a GPU that reports FTL_EMU_GPU_UTIL percent busy (default 42) and the
 * device memory the emulated driver has handed out, so tests can check where the figures go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t emu_memory_in_use(void);

typedef struct nvml_utilization { unsigned int gpu, memory; } nvml_utilization;
typedef struct nvml_memory { unsigned long long total, free, used; } nvml_memory;
static int devices[16];

int nvmlInit_v2(void) { return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **device) {
    unsigned n = 0;
    char tail[8] = "";
    if (sscanf(bus, "0000:%2x:00.%1s", &n, tail) != 2 || strcmp(tail, "0") != 0 || n >= 16)
        return 13; /* NVML_ERROR_NOT_FOUND: a foreign bus id */
    *device = &devices[n];
    return 0;
}
int nvmlDeviceGetUtilizationRates(void *device, nvml_utilization *u) {
    if (!device) return 2;
    const char *v = getenv("FTL_EMU_GPU_UTIL");
    u->gpu = v && *v ? (unsigned)atoi(v) : 42;
    u->memory = 0;
    return 0;
}
int nvmlDeviceGetMemoryInfo(void *device, nvml_memory *m) {
    if (!device) return 2;
    m->total = 8ull << 30;
    m->used = emu_memory_in_use();
    m->free = m->total - m->used;
    return 0;
}
