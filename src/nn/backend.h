/* The boundary between the graph and the hardware. A backend compiles an optimised graph for a
 * fixed batch size and precision into a plan (primitives created once, memory planned once),
 * then runs the plan any number of times. The oneDNN CPU backend (cpu/cpu_backend.c) and the CUDA
 * backend (cuda/cuda_plan.c: cuDNN, cuBLAS, ftl's kernels) implement the same table. */
#ifndef FTL_NN_BACKEND_H
#define FTL_NN_BACKEND_H

#include "nn/ir/graph.h"
#include <stdint.h>
#include <stdio.h>

/* TF32: fp32 tensors, tensor-core products with 10-bit mantissas (GPU only). INT8: convolutions
 * whose input tensor has a calibrated scale run on u8/s8 data (CPU only; the rest stays fp32). */
typedef enum nn_precision { NN_PREC_F32 = 0, NN_PREC_BF16, NN_PREC_TF32, NN_PREC_INT8 } nn_precision;

/* Called by a plan after it computed a watched tensor (calibration): `count` floats of it, in the
 * plan's layout for it (the values of a micro-batch chunk, padding zeros included). */
typedef void (*nn_observe_fn)(void *ctx, int tensor, const float *values, size_t count);

typedef struct nn_compile_opts {
    int batch;                /* rows per run */
    nn_precision precision;
    int threads;              /* >= 1 */
    bool winograd;            /* fp32 3x3 stride-1 convs may use Winograd kernels (ftl_nn_conv_algorithm) */
    /* Per graph node: images its primitives process at once (a divisor of batch; chunks of the
     * batch run through consecutive nodes of equal size together). NULL: batch for every node. */
    const int *node_batch;
    int device;               /* CUDA: the visible GPU to run on */
    bool deterministic;       /* CUDA: only algorithms that give the same bits every run */
    /* NN_PREC_INT8, per graph tensor (see nn/quantize.h): the scale of its int8 form (real = scale x
     * q; 0: none), whether that form is u8 (else s8), and whether its producing convolution writes
     * it requantized (its every reader is an int8 convolution). */
    const float *int8_scale;
    const bool *int8_unsigned, *int8_written;
    /* a quantized model's zero points of those int8 forms (real = scale x (q - zero); NULL: all 0) */
    const int *int8_zero;
    /* CPU: per graph tensor, whether observe is called with its values after each run (NULL: none). */
    const bool *observe;
    nn_observe_fn observe_fn;
    void *observe_ctx;
} nn_compile_opts;

typedef struct nn_plan nn_plan;

/* One executed step of a plan, for the profiler. */
typedef struct nn_step_info {
    int node;                 /* graph node it computes (or converts an input for); >= n_nodes: the plan's own */
    int also_node;            /* another node whose work it does (a fused attention's first MatMul); -1 none */
    const char *kind;         /* what the profile calls it; NULL: the node's op type */
    const char *label, *impl; /* impl: the library's implementation name, "ftl" for the backend's own loops */
    bool reorder, fill;
    bool compute;             /* a convolution, matmul or inner product (what the ceiling times alone) */
    bool bf16;                /* its source tensor is bf16 */
    bool int8;                /* its source tensor is u8 or s8 */
    int executions;           /* per run (micro-batch chunks) */
} nn_step_info;

typedef struct nn_backend {
    const char *name;
    /* Re-infers the graph's shapes for opts->batch (the graph must be sorted and optimised) and
     * builds a plan; the graph is not kept (weights are copied into the plan's own layout). */
    ftl_status (*compile)(nn_graph *g, const nn_compile_opts *opts, nn_plan **plan);
    /* Host buffer the caller fills before run(): batch rows of the graph input, float32, in
     * the input's own (plain, row-major) layout. */
    float *(*input)(nn_plan *plan);
    /* Runs the plan; writes batch x feature_dim floats (row-major) to output. */
    ftl_status (*run)(nn_plan *plan, float *output);
    /* One line per executed primitive (implementation, layouts): for --verbose and tuning. */
    void (*describe)(const nn_plan *plan, FILE *out);
    /* Convolutions run with Winograd kernels (0 when the backend has none). */
    int (*winograd_convs)(const nn_plan *plan);
    void (*free)(nn_plan *plan);
    /* Optional (NULL where a backend has no profiler): the plan's steps, a run that adds each step's
     * seconds to step_seconds[step], and one step's work run alone on its own buffers with the
     * layouts the library prefers for it (best seconds per execution; *timed false when the step
     * is not a compute step or cannot be rebuilt alone). */
    int (*step_count)(const nn_plan *plan);
    void (*step_info)(const nn_plan *plan, int step, nn_step_info *info);
    ftl_status (*run_timed)(nn_plan *plan, float *output, double *step_seconds);
    ftl_status (*time_alone)(nn_plan *plan, int step, double min_seconds, double *seconds, bool *timed);
    /* Optional (NULL on the CPU): a pinned host buffer for batch images of dataset bytes (uint8,
     * H x W x 3 at the input's size, back to back), and a run from it: the bytes go to the device
     * and are scaled through table[channel][byte] and laid out there. input_u8 may return NULL
     * (no such buffer could be made): then input() and run() are used. */
    uint8_t *(*input_u8)(nn_plan *plan);
    ftl_status (*run_u8)(nn_plan *plan, const float table[3][256], float *output);
    /* Optional: run_u8 in two halves, so the next batch is copied while this one computes. submit_u8
     * starts the batch in input_u8's buffer (which then hands out the other one); collect_u8 waits for
     * the oldest started batch and writes its features. At most two are started and not collected;
     * input_u8 returns NULL while both are. */
    ftl_status (*submit_u8)(nn_plan *plan, const float table[3][256]);
    ftl_status (*collect_u8)(nn_plan *plan, float *output);
} nn_backend;

const nn_backend *nn_backend_cpu(void);
/* Whether the CPU can run bf16 convolutions natively (AVX512-BF16 or AMX); when false the bf16
 * path still works but is emulated by oneDNN and slower than fp32. */
bool nn_cpu_has_bf16(void);
/* oneDNN's name for the instruction set it uses here, e.g. "avx512_core_bf16". */
const char *nn_cpu_isa_name(void);
/* The least channel expansion (1x1 conv output / input channels) at which the CPU plan fuses the
 * 1x1 -> 3x3 depthwise pair and runs blocked: 1 with AVX-512; 4 with AVX2, where MobileNetV2's 6x
 * pairs gain 12% and MobileNetV1's 1-2x ones lose 8% (Zen 3, batch 16). */
int nn_cpu_depthwise_min_expansion(void);

/* Whether the CPU plans of graph g run its images channel-blocked (nChw8c) rather than channels-last:
 * on AVX2 CPUs without AVX-512, for backbones that do not read channels as a last axis
 * (nn_graph_reads_channels_last). oneDNN 2.6's AVX2 convolutions are faster blocked: on a Zen 3 at
 * batch 16 ResNet-50 +9%, ResNeXt-50 +14%, DenseNet-121 +12%, VGG-11 +11%, Xception +7%, MobileNetV1
 * level; ConvNeXt-T -7% (reorders around its permutes). */
bool nn_cpu_blocked_images(const nn_graph *g);

#endif
