/* ftl's max pool loop (max_pool.c) on raw buffers in the conv layouts; no plan of the backend needed. */
#ifndef FTL_NN_CPU_KERNELS_MAX_POOL_H
#define FTL_NN_CPU_KERNELS_MAX_POOL_H

#include <dnnl.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cpu_pool_plan cpu_pool_plan;

/* Whether MaxPool runs as ftl's loop on this CPU; its plan for f32 src -> dst in one of the
 * conv layouts (channels-last, nChw8c, nChw16c; false, nothing made, otherwise); the loop. */
bool cpu_pool_ftl_wanted(void);
bool cpu_pool_plan_make(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, const int64_t kernel[2],
                        const int64_t stride[2], const int64_t dilation[2], const int64_t pad_begin[2],
                        cpu_pool_plan **plan);
void cpu_pool_plan_free(cpu_pool_plan *plan);
void cpu_pool_run(const cpu_pool_plan *plan, const float *src, float *dst, int threads);

#endif
