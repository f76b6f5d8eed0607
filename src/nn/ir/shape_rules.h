/* Per-op shape rules, shared by the shape pass (shape.h) and the load-time evaluator (fold.h). */
#ifndef FTL_NN_SHAPE_RULES_H
#define FTL_NN_SHAPE_RULES_H

#include "nn/ir/graph.h"

/* The output shape of one node from its inputs' (shapes known; parameters parsed). */
ftl_status nn_infer_node_shape(nn_graph *g, nn_node *n, nn_shape *y);
/* Output size of a pooling/conv window along one axis (ONNX rules incl. ceil_mode). */
int64_t nn_window_out(int64_t in, int k, int stride, int dilation, int pad_begin, int pad_end, bool ceil_mode);
/* Ops that only exist as shape arithmetic in ftl (an error when their input is an activation). */
bool nn_op_is_value_only(nn_op op);
/* Slice's constant inputs resolved for an input of `rank` dims: begin, end, step per axis
 * (ONNX clamping rules; axes not named keep their whole range). */
ftl_status nn_slice_bounds(const nn_graph *g, const nn_node *n, const nn_shape *x, int64_t *begin, int64_t *end,
                           int64_t *step);

#endif
