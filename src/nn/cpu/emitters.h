/* The CPU backend's emitters, one file per op family (emit_conv.c, emit_eltwise.c, emit_pool.c,
 * emit_movement.c, emit_norm.c, emit_matmul.c): each appends the steps of one node to the plan through
 * the plan builder (cpu_plan.h). emit_node.c finds a node's emitter by its op. */
#ifndef FTL_NN_CPU_EMITTERS_H
#define FTL_NN_CPU_EMITTERS_H

#include "nn/cpu/cpu_plan.h"

/* Emits the steps of node n (its inputs bound to values of the current micro-batch). */
typedef ftl_status (*cpu_emitter)(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_conv.c */
ftl_status cpu_emit_conv(nn_plan *p, nn_graph *g, const nn_node *n);
/* The number of 1x1 -> 3x3 depthwise convolution pairs the fp32 plan fuses (0: none, or
 * FTL_NN_DEPTHWISE_FUSION=0, or another precision). */
int cpu_depthwise_pairs(const nn_plan *p, const nn_graph *g);
/* Whether this plan fuses depthwise pairs at all (fp32, AVX-512, not calibrating, not turned off). */
bool cpu_depthwise_fusion_on(const nn_plan *p);

/* emit_eltwise.c */
ftl_status cpu_emit_activation(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_fake_quant_node(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_binary(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_pool.c */
ftl_status cpu_emit_pool(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_movement.c */
ftl_status cpu_emit_view(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_transpose(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_concat(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_pad(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_slice(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_gather_one(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_split(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_norm.c */
ftl_status cpu_emit_layernorm(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_softmax(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_reduce_mean(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_matmul.c */
ftl_status cpu_emit_batched_matmul(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_einsum(nn_plan *p, nn_graph *g, const nn_node *n);
ftl_status cpu_emit_inner_product(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_node.c: emits the steps of one node through its op's emitter. */
ftl_status cpu_emit_node(nn_plan *p, nn_graph *g, int node);

#endif
