/* The CPU backend's emitters, one file per op family (emit_conv.c, emit_eltwise.c, emit_pool.c,
 * emit_movement.c, emit_norm.c, emit_matmul.c): each appends the steps of one node to the plan through
 * the plan builder (cpu_plan.h). emit_node.c finds a node's emitter by its op. */
#ifndef FTL_NN_CPU_EMITTERS_H
#define FTL_NN_CPU_EMITTERS_H

#include "nn/cpu/cpu_plan.h"
#include "nn/cpu/emit_conv.h"

/* Emits the steps of node n (its inputs bound to values of the current micro-batch). */
typedef ftl_status (*cpu_emitter)(nn_plan *p, nn_graph *g, const nn_node *n);

/* emit_conv.c (its plan-wide choices: emit_conv.h) */
ftl_status cpu_emit_conv(nn_plan *p, nn_graph *g, const nn_node *n);

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
