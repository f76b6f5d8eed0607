/* Graph structure passes: execution order with cycle detection, pruning to the feature tensor,
 * dead-node removal, use counts. */
#ifndef FTL_NN_TOPO_H
#define FTL_NN_TOPO_H

#include "nn/ir/graph.h"

/* Drops dead nodes and recomputes producers. */
void nn_graph_compact(nn_graph *g);
/* Recomputes tensor producers from the live nodes (after nodes moved). */
void nn_graph_update_producers(nn_graph *g);
/* Reorders nodes topologically (stable: keeps file order where valid); a cycle or a tensor
 * used before any node can produce it is an error naming a node on it. */
ftl_status nn_graph_sort(nn_graph *g);
/* Keeps only the nodes needed for tensor `feature`; makes it the only graph output. */
ftl_status nn_graph_prune(nn_graph *g, int feature);
/* uses[t] = number of live node inputs reading t, +1 when t is a graph output. Caller frees. */
int *nn_graph_use_counts(const nn_graph *g);
/* last[t] = the last node reading tensor t (inputs and summed post-ops); graph outputs INT_MAX
 * (read after the run); 0 for tensors nothing reads. last has n_tensors entries, zeroed. */
void nn_graph_last_readers(const nn_graph *g, int *last);

#endif
