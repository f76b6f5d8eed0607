/* The structure of a depthwise-separable run in the graph IR: a 3x3 depthwise convolution, the 1x1 that
 * alone reads its output, and a 3x3 stride-2 MaxPool that alone reads the 1x1's. The CPU's micro-batch
 * planner keeps such a run at one micro-batch (nn/model.c) and its int8 emitter fuses it into one step
 * (nn/cpu/emit_conv.c); both ask here, so they agree on what a pair is, and each adds its own conditions
 * (types, layouts, post-ops, micro-batches). */
#ifndef FTL_NN_IR_SEPARABLE_H
#define FTL_NN_IR_SEPARABLE_H

#include "nn/ir/graph.h"

#include <stdbool.h>

/* The 1x1 convolution forming a separable pair with node n, or -1. n: a live 3x3 depthwise Conv (group =
 * its input's channels = its output's, no dilation, a computed 4-D input, constant weights and bias),
 * stride 1 padded by 1 on every side, or, with allow_stride2, stride 2 padded by 0 or 1 on each side. The
 * 1x1: the live node that alone reads n's output, through its first input, with only dead nodes between;
 * a Conv of group 1, kernel 1x1, stride 1, no padding, constant weights and bias. */
int nn_separable_pointwise(const nn_graph *g, int n, bool allow_stride2);

/* The MaxPool ending the separable run whose 1x1 is node m, or -1: the live node that alone reads m's
 * output through its first input, only dead nodes between; 3x3, stride 2, no dilation, no post-ops, no
 * indices output, a 4-D output. */
int nn_separable_pool(const nn_graph *g, int m);

#endif
