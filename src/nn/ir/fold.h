/* Evaluating nodes at load time: shape arithmetic (Shape, Gather, Concat, Cast, Unsqueeze, ...)
 * and subgraphs of constants, for the batch the shapes are inferred for. The exporters write such
 * arithmetic for a dynamic batch axis; with the batch fixed at compile time it costs nothing at
 * run time and needs no run-time kernels. */
#ifndef FTL_NN_FOLD_H
#define FTL_NN_FOLD_H

#include "nn/ir/graph.h"

/* Whether n can be evaluated now: an op the evaluator knows, every input a constant (Shape only
 * needs its input's shape). */
bool nn_fold_possible(const nn_graph *g, const nn_node *n);
/* Evaluates n into its output tensor (data, shape; marked computed). An output whose value
 * changed keeps the old buffer alive in g->retired (plans compiled for another batch may hold it). */
ftl_status nn_fold_eval(nn_graph *g, nn_node *n);

#endif
