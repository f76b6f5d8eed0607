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

/* ftl_model_load of the fp32 model whose plans hand observe_fn the values of every tensor an int8
 * convolution would read (nn_int8_watched), after each run: calibration. */
ftl_status nn_model_load_watching(const char *path, const ftl_model_options *o, nn_observe_fn observe_fn, void *ctx,
                                  ftl_model **model);

#endif
