/* Backend-independent graph rewrites: drop Identity/Dropout, fold zero Pad and
 * BatchNormalization into Conv, turn a lone BatchNormalization into a 1x1 depthwise Conv, fuse
 * activations and residual Adds into their producer as post-ops. */
#ifndef FTL_NN_OPTIMIZE_H
#define FTL_NN_OPTIMIZE_H

#include "nn/ir/graph.h"

typedef struct nn_optimize_stats {
    int identities, pads_folded, bn_folded, bn_to_conv, acts_fused, sums_fused;
} nn_optimize_stats;

/* Needs a sorted graph with shapes; the graph output is never fused away. */
ftl_status nn_optimize(nn_graph *g, nn_optimize_stats *stats);

#endif
