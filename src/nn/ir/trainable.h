/* Which part of a backbone fine-tuning unfreezes: the nodes after a cut (the last N Conv nodes in
 * execution order and everything on a path from them to the feature tensor, or every node that
 * depends on a named tensor), the parameters they train, and the boundary - the frozen
 * activations that cross the cut, which the boundary cache stores per image. Works on the
 * pruned graph before optimisation, so BatchNormalization nodes are still visible. */
#ifndef FTL_NN_TRAINABLE_H
#define FTL_NN_TRAINABLE_H

#include "nn/ir/graph.h"

typedef struct nn_cut_spec {
    int last_convs;            /* > 0: the last N Conv nodes */
    const char *from_tensor;   /* else: every node that depends on this tensor */
} nn_cut_spec;

typedef enum nn_param_role {
    NN_PARAM_WEIGHT,           /* Conv W, Gemm/MatMul B, other float initializers of > 1 value */
    NN_PARAM_BIAS,             /* Conv B, Gemm C */
    NN_PARAM_BN_SCALE,         /* trained; the BN's mean and variance stay fixed (inference mode) */
    NN_PARAM_BN_SHIFT
} nn_param_role;

typedef struct nn_trainable_param {
    int tensor;
    int node;                  /* the (first) trainable node reading it */
    nn_param_role role;
} nn_trainable_param;

typedef struct nn_trainable {
    bool *node;                /* [g->n_nodes]: unfrozen */
    int n_nodes, n_convs;
    nn_trainable_param *params;
    int n_params;
    long long param_count;     /* float values trained */
    int *boundary;             /* frozen activations read by unfrozen nodes, in execution order */
    int n_boundary;
    long long boundary_floats; /* per image */
} nn_trainable;

/* Selects the unfrozen part of `g` (pruned to its feature tensor, shapes for batch 1). Errors name
 * what is wrong: N larger than the Conv count, an unknown or constant tensor, an initializer
 * shared between a frozen and an unfrozen node. */
ftl_status nn_trainable_select(const nn_graph *g, const nn_cut_spec *spec, nn_trainable *out);
void nn_trainable_free(nn_trainable *t);
/* The tensor the frozen bottom of the cut gives per image, for a model that computes the boundary
 * cache: the boundary tensor itself, or with several, a new Concat (axis 1) of each flattened to
 * [N, floats], in boundary order (the rows ftl_finetune_forward_rows takes). g as for select;
 * prune it to *feature afterwards. */
ftl_status nn_bottom_output(nn_graph *g, const nn_cut_spec *spec, int *feature);
/* Makes `g` the frozen top of the cut: its only input is the boundary row of an image (the bottom
 * model's features: the boundary tensor, or several split back from one [N, floats] row) and it
 * computes `feature` from it; everything below the cut is pruned. g as for select. */
ftl_status nn_top_input(nn_graph *g, const nn_cut_spec *spec, int feature);
const char *nn_param_role_name(nn_param_role role);

#endif
