/* Shape inference over the sorted graph for a concrete batch size. */
#ifndef FTL_NN_SHAPE_H
#define FTL_NN_SHAPE_H

#include "nn/ir/graph.h"

/* Sets every activation's shape for `batch` rows (the input's first dimension), resolving
 * auto_pad into explicit pads and kernel_shape from the weights. Errors name the node and the
 * mismatching input. */
ftl_status nn_infer_shapes(nn_graph *g, int64_t batch);
/* The output shape of one node from its inputs' (shapes known; parameters parsed). */
ftl_status nn_infer_node_shape(nn_graph *g, nn_node *n, nn_shape *y);
/* Output size of a pooling/conv window along one axis (ONNX rules incl. ceil_mode). */
int64_t nn_window_out(int64_t in, int k, int stride, int dilation, int pad_begin, int pad_end, bool ceil_mode);

#endif
