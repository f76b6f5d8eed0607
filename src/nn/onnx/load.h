/* The model-loading pipeline shared by ftl_model_load and ftl_model_describe:
 * import -> parse attributes -> sort (cycle check) -> shapes at batch 1 (validation, constant
 * folding) -> choose the feature tensor -> prune -> optimise. */
#ifndef FTL_NN_LOAD_H
#define FTL_NN_LOAD_H

#include "nn/ir/graph.h"
#include "nn/ir/optimize.h"

/* Import, parse and validate; shapes are inferred for batch 1. sha256_hex may be NULL. */
ftl_status nn_load_checked(const char *path, nn_graph **g, char *sha256_hex);
/* The same, refusing a file whose sha256 is not expected_sha256 (when not NULL) right after the import;
 * expected_of names the file that records it. */
ftl_status nn_load_checked_expecting(const char *path, nn_graph **g, char *sha256_hex, const char *expected_sha256,
                                     const char *expected_of);
/* Replaces n initializers (fine-tuned tensors): each must name a float initializer of the same size. */
ftl_status nn_graph_override(nn_graph *g, const char *path, const ftl_tensor_override *ov, int n);
/* The tensor to extract: `name` (NULL/"": the first graph output). */
ftl_status nn_select_features(const nn_graph *g, const char *name, int *tensor);
/* Multiply-adds of node i at the graph's current shapes (Conv, Gemm, MatMul, Einsum; 0 otherwise). */
long long nn_node_macs(const nn_graph *g, int i);
/* Float weights of live nodes and multiply-adds per image (shapes must be for batch 1). */
void nn_graph_cost(const nn_graph *g, long long *params, long long *macs);
/* Prune to `feature`, re-infer shapes, optimise. */
ftl_status nn_prepare_for_run(nn_graph *g, int feature, nn_optimize_stats *stats);

#endif
