/* What the profiler needs of a loaded model beyond the public info: its optimised graph, the
 * backend and the compiled plan of a full batch. */
#ifndef FTL_NN_MODEL_PARTS_H
#define FTL_NN_MODEL_PARTS_H

#include "ftl/nn.h"
#include "nn/backend.h"

typedef struct nn_model_parts {
    nn_graph *graph;
    const nn_backend *backend;
    nn_plan *plan;
    int plan_batch;           /* rows per run of plan */
    int64_t input_per_image;  /* floats */
} nn_model_parts;

void nn_model_get_parts(ftl_model *model, nn_model_parts *parts);

#endif
