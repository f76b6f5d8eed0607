/* The convolution emitter's (emit_conv.c) choices for a plan: the algorithm (Winograd or direct), the
 * activation layout convolutions ask for, and the 1x1 -> 3x3 depthwise pairs run as one primitive;
 * what the other emitters (emit_pool.c), compile and the plan's description ask of them. */
#ifndef FTL_NN_CPU_EMIT_CONV_H
#define FTL_NN_CPU_EMIT_CONV_H

#include "nn/cpu/cpu_plan.h"

/* Its own struct: the choices are the conv emitter's, made once per plan by cpu_conv_choose, so the
 * plan (which holds it by pointer) need not know them. */
struct cpu_conv_choices {
    bool winograd;            /* eligible fp32 convs try Winograd kernels first */
    int n_winograd;           /* convolution nodes that got them */
    int depthwise_pairs;      /* fp32 1x1 -> 3x3 depthwise pairs run fused (cpu_depthwise_pairs) */
    bool blocked_layout;      /* fp32 convs run blocked (nChw16c / nChw8c), the layout oneDNN's fused kernel is right in:
                                 for every plan of a backbone that has such pairs (nn_graph.pointwise_depthwise),
                                 cut halves included, so they give the whole backbone's bits; on AVX2 CPUs for
                                 convolutional backbones too (nn_graph.blocked_images) */
};

/* Makes p's choices for graph g (winograd: nn_compile_opts.winograd), once p's precision, int8 tables
 * and observer are set. */
void cpu_conv_choose(nn_plan *p, const nn_graph *g, bool winograd);
/* Activation layout convolutions ask for: channels-last for fp32, nChw16c for bf16 and for fp32 models
 * with fused depthwise pairs (measured, see docs/nn.md); FTL_NN_LAYOUT=nhwc|blocked|any overrides it for A/B benchmarks (any: oneDNN's
 * own pick). Returns dnnl_format_tag_any for any. */
dnnl_format_tag_t cpu_conv_layout(const nn_plan *p);
dnnl_format_tag_t cpu_blocked_tag(void);
/* Whether a conv should first try oneDNN's Winograd kernels (fp32 3x3 stride 1, >= 64 channels in
 * 16s, transformed weights amortised over the run's pixels; see emit_conv.c). */
bool cpu_conv_winograd_eligible(const nn_plan *p, const nn_node *n, const nn_shape *x, const nn_shape *y);
/* The number of 1x1 -> 3x3 depthwise convolution pairs the fp32 plan fuses (0: none, or
 * FTL_NN_DEPTHWISE_FUSION=0, or another precision). */
int cpu_depthwise_pairs(const nn_plan *p, const nn_graph *g);
/* Whether this plan fuses depthwise pairs at all (fp32, AVX-512, not calibrating, not turned off). */
bool cpu_depthwise_fusion_on(const nn_plan *p);

#endif
