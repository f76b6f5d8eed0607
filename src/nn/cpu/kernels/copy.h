/* ftl's strided copies and conversions (copy.c): plans and runs on raw buffers described by oneDNN
 * memory descriptors; no plan of the backend needed, so they can be tested and timed alone. */
#ifndef FTL_NN_CPU_KERNELS_COPY_H
#define FTL_NN_CPU_KERNELS_COPY_H

#include <dnnl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cpu_copy_plan cpu_copy_plan;

/* A copy src -> dst as contiguous runs (false, nothing made, when the layouts are
 * not both plain strided of one type, or the runs would be too short to beat oneDNN's reorder). */
bool cpu_copy_plan_make(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, cpu_copy_plan **plan);
void cpu_copy_run(const cpu_copy_plan *plan, const void *src, void *dst, int threads);
/* A copy of n_runs runs of `run` elements of elem bytes from byte offsets src_offset[i] of the source
 * to one after another in the destination, whose elements have dst_elem bytes: elem, or 2 from 4 (f32
 * rounded to bf16). */
cpu_copy_plan *cpu_copy_plan_gather(const int64_t *src_offset, int64_t n_runs, size_t run, size_t elem, size_t dst_elem);
/* A gather's copy with f32 addend (laid out as the destination) added: dst = gathered src + addend. */
void cpu_copy_run_add(const cpu_copy_plan *plan, const void *src, const float *addend, void *dst, int threads);
/* Whether src and dst are one layout of f32 and u8/s8 (either way), so cpu_convert_run converts them
 * element by element. */
bool cpu_convert_same_layout(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst);
/* n elements: f32 -> u8/s8 as saturate(round_half_even(x * scale) + zero), or u8/s8 -> f32 as
 * (x - zero) * scale. */
void cpu_convert_run(const void *src, dnnl_data_type_t src_type, void *dst, dnnl_data_type_t dst_type, size_t n,
                     float scale, int zero, int threads);
/* n bf16 values to f32: exact, a bf16 being an f32's top half. On threads in util/line_shares.h's
 * shares, the ones calibration's statistics then scan. */
void cpu_widen_bf16(const uint16_t *src, float *dst, size_t n, int threads);
/* n floats through a quantized model's FakeQuantize (nn_fake_quantize) on the OpenMP team. */
void cpu_fake_quant_run(const float *src, float *dst, size_t n, float scale, int zero, int lo, int hi, int threads);

#endif
