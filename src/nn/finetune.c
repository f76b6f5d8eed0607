/* The public face of fine-tuning (ftl/nn.h: ftl_finetune_*): loads a backbone, selects its unfrozen
 * part (nn/trainable.c) and compiles the training plan (nn/cpu/cpu_train_plan.c). */
#include "ftl/nn.h"
#include "nn/onnx/load.h"
#include "nn/ir/shape.h"
#include "nn/ir/topo.h"
#include "nn/train_plan.h"
#include "nn/ir/trainable.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

struct ftl_finetune {
    nn_graph *g;
    nn_trainable tr;
    nn_train_plan *plan;
    ftl_finetune_info info;
    int batch;
    bool bf16;
    bool profiling;    /* kept across ftl_finetune_bind's new plan */
    float **in;        /* [n_boundary] batch images of each boundary tensor, for the row calls */
    float *features;   /* batch x feature_dim */
    float *dfeatures;
};

void ftl_finetune_free(ftl_finetune *f) {
    if (!f) return;
    nn_train_plan_free(f->plan);
    for (int k = 0; f->in && k < f->tr.n_boundary; k++) free(f->in[k]);
    free(f->in);
    free(f->features);
    free(f->dfeatures);
    if (f->tr.node) nn_trainable_free(&f->tr);
    if (f->g) nn_graph_free(f->g);
    free(f);
}

ftl_status ftl_finetune_open(const char *path, const ftl_model_options *options, const ftl_fine_tune_cut *cut, int batch,
                             ftl_finetune **out) {
    *out = NULL;
    if (batch < 1) return ftl_fail(FTL_E_INVALID_ARG, "fine-tuning batch %d: must be >= 1", batch);
    ftl_finetune *f = ftl_xcalloc(1, sizeof *f);
    int feature = -1;
    nn_cut_spec spec = {cut->last_convs, cut->from_tensor};
    ftl_status st = nn_load_checked(path, &f->g, NULL);
    if (st == FTL_OK && options) st = nn_graph_override(f->g, path, options->overrides, options->n_overrides);
    if (st == FTL_OK) st = nn_select_features(f->g, options ? options->features_from : NULL, &feature);
    if (st == FTL_OK) st = nn_graph_prune(f->g, feature);
    if (st == FTL_OK) st = nn_infer_shapes(f->g, batch);
    if (st == FTL_OK) st = nn_trainable_select(f->g, &spec, &f->tr);
    f->bf16 = options && options->precision == FTL_NN_BF16;
    if (st == FTL_OK && f->bf16 && !ftl_nn_cpu_bf16_available())
        st = ftl_fail(FTL_E_UNSUPPORTED, "--precision bf16: this CPU has no bf16 kernels in oneDNN (bf16 needs AVX-512): "
                      "use --precision fp32, or auto");
    if (st == FTL_OK) st = nn_train_plan_create(f->g, &f->tr, batch, f->bf16, NULL, NULL, &f->plan);
    if (st != FTL_OK) {
        ftl_finetune_free(f);
        return ftl_fail_context(st, "%s", path);
    }
    const nn_shape *fs = &f->g->tensors[f->g->outputs[0]].shape;
    f->info = (ftl_finetune_info){.unfrozen_nodes = f->tr.n_nodes, .n_params = f->tr.n_params,
                                  .param_count = f->tr.param_count, .n_boundary = f->tr.n_boundary,
                                  .boundary_floats = f->tr.boundary_floats, .feature_dim = nn_shape_count(fs) / batch,
                                  .bf16_convs = nn_train_plan_bf16_convs(f->plan)};
    f->batch = batch;
    f->in = ftl_xcalloc((size_t)f->tr.n_boundary, sizeof *f->in);
    for (int k = 0; k < f->tr.n_boundary; k++) {
        long long per = 0;
        ftl_finetune_boundary_name(f, k, &per);
        f->in[k] = ftl_xcalloc((size_t)(batch * per) + 1, sizeof(float));
    }
    f->features = ftl_xcalloc((size_t)(batch * f->info.feature_dim) + 1, sizeof(float));
    f->dfeatures = ftl_xcalloc((size_t)(batch * f->info.feature_dim) + 1, sizeof(float));
    *out = f;
    return FTL_OK;
}

const ftl_finetune_info *ftl_finetune_get_info(const ftl_finetune *f) { return &f->info; }

const char *ftl_finetune_boundary_name(const ftl_finetune *f, int k, long long *floats_per_image) {
    if (k < 0 || k >= f->tr.n_boundary) return NULL;
    const nn_tensor *t = &f->g->tensors[f->tr.boundary[k]];
    if (floats_per_image) *floats_per_image = nn_shape_count(&t->shape) / nn_graph_shape_batch(f->g);
    return t->name;
}

const char *ftl_finetune_param_name(const ftl_finetune *f, int k, long long *count, long long *offset) {
    if (k < 0 || k >= f->tr.n_params) return NULL;
    const nn_tensor *t = &f->g->tensors[f->tr.params[k].tensor];
    if (count) *count = t->count;
    if (offset) *offset = nn_train_plan_param_offset(f->plan, k);
    return t->name;
}

ftl_status ftl_finetune_forward(ftl_finetune *f, const float *const *boundary, float *features) {
    return nn_train_plan_forward(f->plan, boundary, features);
}

ftl_status ftl_finetune_backward(ftl_finetune *f, const float *dfeatures) {
    return nn_train_plan_backward(f->plan, dfeatures, NULL);
}

float *ftl_finetune_params(ftl_finetune *f) { return nn_train_plan_params(f->plan); }
const float *ftl_finetune_grads(const ftl_finetune *f) { return nn_train_plan_grads(f->plan); }

ftl_status ftl_finetune_bind(ftl_finetune *f, float *params, float *grads) {
    nn_train_plan *p = NULL;
    FTL_TRY(nn_train_plan_create(f->g, &f->tr, f->batch, f->bf16, params, grads, &p));
    memcpy(params, nn_train_plan_params(f->plan), (size_t)f->info.param_count * sizeof(float));
    nn_train_plan_free(f->plan);
    f->plan = p;
    if (f->profiling) nn_train_plan_set_profiling(p, true);
    return FTL_OK;
}

int ftl_finetune_batch(const ftl_finetune *f) { return f->batch; }

void ftl_finetune_set_profiling(ftl_finetune *f, bool on) {
    f->profiling = on;
    nn_train_plan_set_profiling(f->plan, on);
}

void ftl_finetune_print_profile(const ftl_finetune *f, FILE *out) { nn_train_plan_print_profile(f->plan, out); }

/* Rows hold an image's boundary tensors back to back; the plan takes each tensor's batch apart.
 * Rows past n are zeros: with fixed BatchNormalization statistics they change no real row. */
ftl_status ftl_finetune_forward_rows(ftl_finetune *f, const float *rows, int n, float *features) {
    if (n < 1 || n > f->batch) return ftl_fail(FTL_E_INVALID_ARG, "%d rows for a fine-tuning batch of %d", n, f->batch);
    size_t row = (size_t)f->info.boundary_floats, at = 0;
    float *out = n == f->batch ? features : f->features; /* a full batch needs no staging copies */
    if (n == f->batch && f->tr.n_boundary == 1) {
        FTL_TRY(nn_train_plan_forward(f->plan, &rows, out));
        return FTL_OK;
    }
    for (int k = 0; k < f->tr.n_boundary; k++) {
        long long per = 0;
        ftl_finetune_boundary_name(f, k, &per);
        for (int i = 0; i < n; i++) memcpy(f->in[k] + (size_t)i * per, rows + i * row + at, (size_t)per * sizeof(float));
        memset(f->in[k] + (size_t)n * per, 0, (size_t)(f->batch - n) * per * sizeof(float));
        at += (size_t)per;
    }
    FTL_TRY(nn_train_plan_forward(f->plan, (const float *const *)f->in, out));
    if (out != features) memcpy(features, f->features, (size_t)n * (size_t)f->info.feature_dim * sizeof(float));
    return FTL_OK;
}

ftl_status ftl_finetune_backward_rows(ftl_finetune *f, const float *dfeatures, int n) {
    if (n < 1 || n > f->batch) return ftl_fail(FTL_E_INVALID_ARG, "%d rows for a fine-tuning batch of %d", n, f->batch);
    if (n == f->batch) return nn_train_plan_backward(f->plan, dfeatures, NULL);
    size_t used = (size_t)n * (size_t)f->info.feature_dim;
    memcpy(f->dfeatures, dfeatures, used * sizeof(float));
    memset(f->dfeatures + used, 0, ((size_t)f->batch * (size_t)f->info.feature_dim - used) * sizeof(float));
    return nn_train_plan_backward(f->plan, f->dfeatures, NULL);
}
