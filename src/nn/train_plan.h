/* The training plan for fine-tuning: the unfrozen part of a backbone (nn/trainable.h) run forward
 * from its boundary tensors to the feature tensor keeping every activation, then backward, giving
 * the gradient of every trained parameter (and of the boundary tensors). Separate from the
 * inference plan: no fused post-ops, no buffer reuse, plain fp32 layouts; backward on oneDNN
 * where it has a primitive (Conv data and weights, BatchNormalization with fixed statistics,
 * eltwise activations, pooling, inner products), element-wise loops for Add/Mul with broadcast,
 * Concat and the view ops.
 *
 * Parameters live in one contiguous fp32 block (and their gradients in another of the same
 * layout), each tensor in its ONNX layout at the offset nn_train_plan_param_offset gives: an
 * optimiser updates the block in place and the next forward uses the new values. */
#ifndef FTL_NN_TRAIN_PLAN_H
#define FTL_NN_TRAIN_PLAN_H

#include "nn/ir/graph.h"
#include <stdio.h>
#include "nn/ir/trainable.h"

typedef struct nn_train_plan nn_train_plan;

/* Compiles the plan for batches of `batch` images. g must be pruned to its feature tensor (its
 * first output) with shapes inferred for `batch`; tr selects the unfrozen part. Both must outlive
 * the plan. An op the plan cannot differentiate is an error naming the node. params/grads: the
 * caller's blocks of tr->param_count floats (a part of a trainer's one block; the graph's values
 * are copied into params), or NULL for blocks of the plan's own. bf16: the convolutions (forward, backward
 * data and weights) read bf16 copies of their inputs and weights, made by the reorders each step from
 * the fp32 buffers and master weights, and write fp32 (where oneDNN has such kernels; else fp32). */
ftl_status nn_train_plan_create(const nn_graph *g, const nn_trainable *tr, int batch, bool bf16, float *params,
                                float *grads, nn_train_plan **out);
void nn_train_plan_free(nn_train_plan *p);

/* boundary[k]: batch images of tr->boundary[k] (plain layout); features: batch x feature floats. */
ftl_status nn_train_plan_forward(nn_train_plan *p, const float *const *boundary, float *features);
/* After a forward: d(loss)/d(features) in, parameter gradients (nn_train_plan_grads) out, and when
 * boundary_grads is not NULL, d(loss)/d(boundary[k]) into boundary_grads[k]. */
ftl_status nn_train_plan_backward(nn_train_plan *p, const float *dfeatures, float *const *boundary_grads);

float *nn_train_plan_params(nn_train_plan *p);
const float *nn_train_plan_grads(const nn_train_plan *p);
int64_t nn_train_plan_param_count(const nn_train_plan *p);
/* Offset in the parameter block of tr->params[k]. */
int64_t nn_train_plan_param_offset(const nn_train_plan *p, int k);
/* Convolutions the plan runs in bf16. */
int nn_train_plan_bf16_convs(const nn_train_plan *p);
/* Profiling: on, each step is timed (waiting for its primitive) from now on; print: the time per
 * forward + backward by node and work, heaviest first, and its split into convolutions, other
 * primitives, layout reorders and host loops. */
void nn_train_plan_set_profiling(nn_train_plan *p, bool on);
void nn_train_plan_print_profile(const nn_train_plan *p, FILE *out);

#endif
