/* Shape inference over the sorted graph for a concrete batch size. */
#ifndef FTL_NN_SHAPE_H
#define FTL_NN_SHAPE_H

#include "nn/ir/graph.h"

/* Sets every activation's shape for `batch` rows (the input's first dimension), resolving
 * auto_pad into explicit pads and kernel_shape from the weights. Errors name the node and the
 * mismatching input. */
ftl_status nn_infer_shapes(nn_graph *g, int64_t batch);

#endif
