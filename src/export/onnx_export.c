/* `ftl export MODEL.ftl OUT.onnx`: preprocessing + the backbone's own nodes + the head, as one
 * ONNX model (see include/ftl/export.h). */
#include "ftl/export.h"
#include "ftl/train.h"
#include "export/backbone_graph.h"
#include "export/onnx_write.h"
#include "export/opset_convert.h"
#include "export/preprocess_graph.h"
#include "export/qdq_export.h"
#include "nn/onnx/backbone_files.h"
#include "nn/onnx/load.h"
#include "pipeline/classifier_backbone.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/io_check.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_OPSET = 13 };

ftl_status ftl_export_input_parse(const char *text, ftl_export_input *out) {
    if (strcmp(text, "uint8-nhwc") == 0) *out = FTL_EXPORT_INPUT_UINT8_NHWC;
    else if (strcmp(text, "float-nchw") == 0) *out = FTL_EXPORT_INPUT_FLOAT_NCHW;
    else return ftl_fail(FTL_E_INVALID_ARG, "--input '%s': expected uint8-nhwc or float-nchw", text);
    return FTL_OK;
}

void ftl_export_options_init(ftl_export_options *o) {
    memset(o, 0, sizeof *o);
    o->opset = DEFAULT_OPSET;
}

/* What the backbone gives, checked by ftl's own loader: the file ftl trained on (sha256), the
 * feature tensor's rank and size, the input geometry. */
typedef struct backbone_facts {
    char sha256[65];
    int feature_rank;
    int64_t feature_dim;
    int height, width;
    bool channels_last;
} backbone_facts;

static ftl_status check_backbone(const char *path, const classifier_recipe *r, const ftl_classifier *clf,
                                 const char *model_path, backbone_facts *f) {
    nn_graph *g;
    FTL_TRY(nn_load_checked(path, &g, f->sha256));
    ftl_status st = FTL_OK;
    int feature = -1;
    if (strcmp(f->sha256, r->backbone_sha256) != 0)
        st = classifier_backbone_mismatch(path, f->sha256, model_path, r->backbone_sha256);
    if (st == FTL_OK) st = nn_select_features(g, r->feature_tensor, &feature);
    if (st == FTL_OK) {
        const nn_shape *fs = &g->tensors[feature].shape, *in = &g->tensors[g->inputs[0]].shape;
        f->feature_rank = fs->rank;
        f->feature_dim = 1;
        for (int i = 1; i < fs->rank; i++) f->feature_dim *= fs->d[i];
        if (f->feature_dim != clf->head.dim)
            st = ftl_fail(FTL_E_FORMAT, "%s: the head takes %lld features, the backbone's '%s' gives %lld", model_path,
                          (long long)clf->head.dim, r->feature_tensor, (long long)f->feature_dim);
        else if (in->rank != 4)
            st = ftl_fail(FTL_E_UNSUPPORTED, "%s: the input has rank %d; an image backbone takes rank 4", path, in->rank);
        else {
            /* the layout rule ftl's loader uses: NHWC when the last axis is the 3 channels */
            f->channels_last = in->d[3] == 3 && in->d[1] != 3;
            f->height = (int)(f->channels_last ? in->d[1] : in->d[2]);
            f->width = (int)(f->channels_last ? in->d[2] : in->d[3]);
            int channels = (int)(f->channels_last ? in->d[3] : in->d[1]);
            if (channels != 3)
                st = ftl_fail(FTL_E_UNSUPPORTED, "%s: the input has %d channels; the export feeds RGB", path, channels);
        }
    }
    nn_graph_free(g);
    return st;
}

static Onnx__StringStringEntryProto *meta(onnx_builder *b, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = ob_alloc(b, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = ob_strdup(b, key);
    e->value = ob_strdup(b, value ? value : "");
    return e;
}

/* The batch dimension of the backbone's input: -1 when dynamic, else its fixed size. */
static int64_t input_batch(const Onnx__ValueInfoProto *vi) {
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type || !tp->tensor_type->shape ||
        tp->tensor_type->shape->n_dim < 1)
        return -1;
    const Onnx__TensorShapeProto__Dimension *d = tp->tensor_type->shape->dim[0];
    return d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0 ? d->dim_value : -1;
}

/* Initializers no node reads any more (attributes again after an opset conversion). */
static void drop_unused_inits(const onnx_builder *b, backbone_graph *bg) {
    ob_table used = {0};
    for (int pass = 0; pass < 2; pass++) {
        Onnx__NodeProto *const *nodes = pass ? bg->nodes : b->nodes;
        size_t n = pass ? bg->n_nodes : b->n_nodes;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < nodes[i]->n_input; k++)
                if (nodes[i]->input[k] && *nodes[i]->input[k]) ob_table_put(&used, nodes[i]->input[k], 1);
    }
    size_t kept = 0;
    for (size_t i = 0; i < bg->n_inits; i++)
        if (ob_table_get(&used, bg->inits[i]->name) >= 0) bg->inits[kept++] = bg->inits[i];
    bg->n_inits = kept; /* init_index is not used after this */
    ob_table_free(&used);
}

typedef struct export_job {
    const ftl_export_options *o;
    ftl_classifier clf;
    classifier_recipe recipe;
    char *backbone_path;
    backbone_facts facts;
    onnx_builder b;
    backbone_graph bg;
    ftl_nn_int8_scales *int8_scales; /* an int8-trained model's calibration: exported as QDQ */
} export_job;

/* A fine-tuned model's tensors replace the backbone's initializers of the same names (before any
 * opset conversion), so the export computes what ftl eval does. The identity recorded with them is
 * checked first: never the frozen weights, or damaged ones, under a head trained for the tuned. */
static ftl_status put_tuned_tensors(export_job *j, backbone_graph *bg) {
    const ftl_classifier *clf = &j->clf;
    if (clf->n_tuned == 0) return FTL_OK;
    char identity[65];
    ftl_model_identity_of(j->facts.sha256, clf->tuned, clf->n_tuned, identity);
    const char *saved = ftl_classifier_metadata(clf, FTL_MODEL_META_BACKBONE_IDENTITY);
    if (!saved || strcmp(saved, identity) != 0)
        return ftl_fail(FTL_E_FORMAT, "%s: its fine-tuned backbone tensors give identity %.16s..., the file records %.16s... "
                        "(a damaged or edited model)", j->o->model_path, identity, saved ? saved : "none");
    for (int k = 0; k < clf->n_tuned; k++) {
        const ftl_tensor_override *ov = &clf->tuned[k];
        size_t at = bg->n_inits;
        for (size_t i = 0; i < bg->n_inits; i++)
            if (bg->inits[i]->name && strcmp(bg->inits[i]->name, ov->name) == 0) at = i;
        if (at == bg->n_inits)
            return ftl_fail(FTL_E_FORMAT, "%s: fine-tuned tensor '%s' is no initializer that computes the features of %s",
                            j->o->model_path, ov->name, j->backbone_path);
        const Onnx__TensorProto *src = bg->inits[at];
        int64_t count = 1;
        for (size_t d = 0; d < src->n_dims; d++) count *= src->dims[d];
        if (src->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || count != ov->count)
            return ftl_fail(FTL_E_FORMAT, "%s: fine-tuned tensor '%s' has %lld floats; the backbone's initializer is not a "
                            "float tensor of that size", j->o->model_path, ov->name, (long long)ov->count);
        Onnx__TensorProto *t = ob_alloc(&j->b, sizeof *t);
        *t = *src;
        t->n_float_data = 0;
        t->float_data = NULL;
        t->has_raw_data = 1;
        t->raw_data.data = (uint8_t *)ov->data; /* little-endian floats, owned by clf until the file is written */
        t->raw_data.len = (size_t)ov->count * sizeof(float);
        bg->inits[at] = t;
    }
    return FTL_OK;
}

/* Flip TTA's input: x [N,...] and x mirrored along `axis` (the image's columns) as one batch [2N,...]. */
static const char *mirrored_pair(onnx_builder *b, const char *x, int axis, int64_t width) {
    int64_t *reversed = ftl_xmalloc((size_t)width * sizeof *reversed);
    for (int64_t i = 0; i < width; i++) reversed[i] = width - 1 - i;
    const char *columns = ob_const_i64(b, "tta_reversed_columns", (const int64_t[]){width}, 1, reversed);
    free(reversed);
    const char *mirrored = ob_fresh_name(b, "images_mirrored");
    Onnx__NodeProto *g = ob_node(b, "Gather", (const char *[]){x, columns}, 2, &mirrored, 1);
    ob_attr_int(b, g, "axis", axis);
    const char *pair = ob_fresh_name(b, "images_and_mirrored");
    Onnx__NodeProto *c = ob_node(b, "Concat", (const char *[]){x, mirrored}, 2, &pair, 1);
    ob_attr_int(b, c, "axis", 0);
    return pair;
}

/* Flip TTA's output: probabilities [2N, C] (the images', then their mirrors') -> their mean [N, C]
 * as `output`, or its log under --logits. */
static void mean_of_pair(onnx_builder *b, const char *probs, int64_t classes, bool logits, const char *output) {
    const char *shape = ob_const_i64(b, "tta_pair_shape", (const int64_t[]){3}, 1, (const int64_t[]){2, -1, classes});
    const char *pair = ob_fresh_name(b, "tta_probabilities_pair");
    ob_node(b, "Reshape", (const char *[]){probs, shape}, 2, &pair, 1);
    const char *halves[2];
    for (int64_t k = 0; k < 2; k++) {
        const char *index = ob_const_i64(b, "tta_half", NULL, 0, &k);
        halves[k] = ob_fresh_name(b, k ? "tta_probabilities_mirrored" : "tta_probabilities_images");
        Onnx__NodeProto *g = ob_node(b, "Gather", (const char *[]){pair, index}, 2, &halves[k], 1);
        ob_attr_int(b, g, "axis", 0);
    }
    const char *sum = ob_fresh_name(b, "tta_probabilities_sum");
    ob_node(b, "Add", halves, 2, &sum, 1);
    const char *half = ob_const_f32(b, "tta_one_half", NULL, 0, (const float[]){0.5f});
    const char *mean = logits ? ob_fresh_name(b, "tta_probabilities_mean") : output;
    ob_node(b, "Mul", (const char *[]){sum, half}, 2, &mean, 1);
    if (logits) ob_node(b, "Log", &mean, 1, &output, 1);
}

static ftl_status build_and_write(export_job *j, ftl_export_result *res) {
    const ftl_export_options *o = j->o;
    onnx_builder *b = &j->b;
    const char *output = o->logits ? "logits" : "probabilities";
    const char *reserved[] = {"images", "probabilities", "logits"};
    FTL_TRY(backbone_graph_read(b, j->backbone_path, j->recipe.feature_tensor, reserved, 3, &j->bg));
    backbone_graph *bg = &j->bg;
    res->backbone_opset = (int)bg->opset;
    res->backbone_nodes = (int)bg->n_nodes;
    FTL_TRY(put_tuned_tensors(j, bg));
    res->tuned_tensors = j->clf.n_tuned;
    FTL_TRY(opset_convert(b, bg, o->opset, &res->nodes_rewritten));
    if (j->int8_scales) FTL_TRY(qdq_export_insert(b, bg, j->int8_scales, o->model_path, &res->int8_convs));
    int64_t batch = input_batch(bg->input);
    bool tta = res->tta_flip;
    if (tta && batch > 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s scores with flip TTA, which the export runs as one batch of the images and "
                        "their mirror images (2N), but %s takes a fixed batch of %lld: re-export the backbone with a "
                        "dynamic batch axis, or export with --tta none (plain probabilities)", o->model_path,
                        j->backbone_path, (long long)batch);
    if (batch > 0)
        ftl_log_warn("%s takes a fixed batch of %lld images, so the export does too (re-export the backbone with a "
                     "dynamic batch axis to feed any number)", j->backbone_path, (long long)batch);

    /* preprocessing nodes go first, the backbone's next, the head's last */
    const backbone_facts *f = &j->facts;
    Onnx__ValueInfoProto *images;
    if (o->input == FTL_EXPORT_INPUT_UINT8_NHWC) {
        preprocess_graph_spec spec = {.image_size = j->recipe.input_size, .height = f->height, .width = f->width,
                                      .channels_last = f->channels_last, .preprocess = &j->recipe.preprocess};
        const char *in = tta ? mirrored_pair(b, "images", 2, spec.image_size) : "images"; /* NHWC: columns are axis 2 */
        FTL_TRY(preprocess_graph_build(b, &spec, in, bg->input_name, &res->resized));
        int64_t dims[4] = {batch, spec.image_size, spec.image_size, 3};
        images = ob_value_info(b, "images", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, dims, 4, "N");
    } else {
        const char *in = tta ? mirrored_pair(b, "images", 3, f->width) : "images"; /* NCHW: columns are axis 3 */
        if (f->channels_last) {
            Onnx__NodeProto *t = ob_node(b, "Transpose", &in, 1, (const char *const *)&bg->input_name, 1);
            ob_attr_ints(b, t, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
        } else {
            backbone_graph_rename(b, bg, bg->input_name, in);
        }
        int64_t dims[4] = {batch, 3, f->height, f->width};
        images = ob_value_info(b, "images", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, 4, "N");
    }
    size_t n_pre = b->n_nodes;

    const ftl_head *h = &j->clf.head;
    const char *feat = bg->feature_name;
    if (f->feature_rank != 2) {
        const char *flat = ob_fresh_name(b, "features_flat");
        Onnx__NodeProto *fl = ob_node(b, "Flatten", &feat, 1, &flat, 1);
        ob_attr_int(b, fl, "axis", 1);
        feat = flat;
    }
    const char *kernel = ob_const_f32(b, "head_kernel", (const int64_t[]){h->dim, h->classes}, 2, h->kernel);
    const char *bias = ob_const_f32(b, "head_bias", (const int64_t[]){h->classes}, 1, h->bias);
    const char *logits = o->logits && !tta ? "logits" : ob_fresh_name(b, "logits");
    ob_node(b, "Gemm", (const char *[]){feat, kernel, bias}, 3, &logits, 1);
    if (!o->logits || tta) {
        const char *probs = tta ? ob_fresh_name(b, "probabilities_pair") : output;
        Onnx__NodeProto *sm = ob_node(b, "Softmax", &logits, 1, &probs, 1);
        ob_attr_int(b, sm, "axis", 1);
        if (tta) mean_of_pair(b, probs, h->classes, o->logits, output);
    }

    drop_unused_inits(b, bg);
    Onnx__GraphProto *g = ob_alloc(b, sizeof *g);
    onnx__graph_proto__init(g);
    g->name = ob_strdup(b, "ftl_classifier");
    g->n_node = b->n_nodes + bg->n_nodes;
    g->node = ob_alloc(b, (g->n_node + 1) * sizeof *g->node);
    memcpy(g->node, b->nodes, n_pre * sizeof *g->node);
    if (bg->n_nodes) memcpy(g->node + n_pre, bg->nodes, bg->n_nodes * sizeof *g->node);
    memcpy(g->node + n_pre + bg->n_nodes, b->nodes + n_pre, (b->n_nodes - n_pre) * sizeof *g->node);
    g->n_initializer = bg->n_inits + b->n_inits;
    g->initializer = ob_alloc(b, (g->n_initializer + 1) * sizeof *g->initializer);
    if (bg->n_inits) memcpy(g->initializer, bg->inits, bg->n_inits * sizeof *g->initializer);
    memcpy(g->initializer + bg->n_inits, b->inits, b->n_inits * sizeof *g->initializer);
    g->n_input = 1;
    g->input = ob_alloc(b, sizeof *g->input);
    g->input[0] = images;
    g->n_output = 1;
    g->output = ob_alloc(b, sizeof *g->output);
    g->output[0] = ob_value_info(b, output, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, (const int64_t[]){batch, h->classes},
                                 2, "N");
    g->doc_string = ob_strdup(b, o->input == FTL_EXPORT_INPUT_UINT8_NHWC
                                     ? "images: uint8 [N,S,S,3] RGB as ftl prep stores a photo (thumbnail to SxS, white "
                                       "padding); output: class probabilities"
                                     : "images: float [N,3,H,W], preprocessed as ftl.input_scaling says; output: class "
                                       "probabilities");

    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = opset_ir_version(o->opset);
    Onnx__OperatorSetIdProto opset;
    onnx__operator_set_id_proto__init(&opset);
    opset.domain = ob_strdup(b, "");
    opset.has_version = 1;
    opset.version = o->opset;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = ob_strdup(b, "ftl");
    m.producer_version = ob_strdup(b, FTL_VERSION);
    m.has_model_version = 1;
    m.model_version = 1;
    m.doc_string = ob_strdup(b, "an ftl transfer-learning classifier: preprocessing, the backbone's own nodes, the head");
    m.graph = g;
    const char *offset = ftl_classifier_metadata(&j->clf, "ftl.label_offset");
    char size_text[16];
    snprintf(size_text, sizeof size_text, "%d", j->recipe.input_size);
    Onnx__StringStringEntryProto *props[] = {
        meta(b, "ftl.classes", ftl_classifier_metadata(&j->clf, FTL_MODEL_META_CLASSES)),
        meta(b, "ftl.input", o->input == FTL_EXPORT_INPUT_UINT8_NHWC ? "uint8-nhwc" : "float-nchw"),
        meta(b, "ftl.input_size", size_text),
        meta(b, "ftl.input_scaling", j->recipe.scaling_json),
        meta(b, "ftl.output", output),
        meta(b, "ftl.tta", tta ? "flip" : "none"),
        meta(b, "ftl.backbone", ftl_path_file_name(j->backbone_path)),
        meta(b, "ftl.backbone_sha256", j->recipe.backbone_sha256),
        meta(b, "ftl.feature_tensor", j->recipe.feature_tensor),
        meta(b, "ftl.label_offset", offset ? offset : "0"),
        meta(b, "ftl.model", ftl_path_file_name(o->model_path)),
        meta(b, "ftl.version", FTL_VERSION),
    };
    m.n_metadata_props = sizeof props / sizeof props[0];
    m.metadata_props = props;

    onnx_write_result wr;
    FTL_TRY(onnx_model_write(b, &m, o->output_path, o->overwrite, o->max_model_bytes, &wr));
    res->opset = o->opset;
    res->ir_version = m.ir_version;
    res->nodes_total = (int)g->n_node;
    res->classes = (int)h->classes;
    res->image_size = j->recipe.input_size;
    res->height = f->height;
    res->width = f->width;
    res->model_bytes = wr.model_bytes;
    res->data_bytes = wr.data_bytes;
    res->external_tensors = wr.external_tensors;
    if (wr.data_path) snprintf(res->data_path, sizeof res->data_path, "%s", wr.data_path);
    free(wr.data_path);
    return FTL_OK;
}

/* Before any work: OUT (and the external data file it may need) is neither MODEL.ftl nor the backbone
 * or its data files. */
static ftl_status export_check_paths(const ftl_export_options *o, const char *backbone_path) {
    ftl_io_check *c = ftl_io_check_new("export");
    char *data_path = ftl_format("%s.data", o->output_path);
    ftl_io_check_output(c, "OUT", o->output_path);
    ftl_io_check_output(c, "OUT's external data", data_path);
    ftl_io_check_input(c, "MODEL", o->model_path);
    nn_io_check_backbone(c, "--backbone", backbone_path);
    ftl_status st = ftl_io_check_run(c);
    ftl_io_check_free(c);
    free(data_path);
    return st;
}

ftl_status ftl_export_onnx(const ftl_export_options *o, ftl_export_result *res) {
    memset(res, 0, sizeof *res);
    if (!o->model_path || !o->output_path) return ftl_fail(FTL_E_INVALID_ARG, "export needs MODEL.ftl and OUT.onnx");
    if (o->opset < EXPORT_OPSET_MIN || o->opset > EXPORT_OPSET_MAX)
        return ftl_fail(FTL_E_INVALID_ARG, "--opset %d: ftl exports opsets %d-%d", o->opset, EXPORT_OPSET_MIN,
                        EXPORT_OPSET_MAX);
    if (o->input != FTL_EXPORT_INPUT_UINT8_NHWC && o->input != FTL_EXPORT_INPUT_FLOAT_NCHW)
        return ftl_fail(FTL_E_INVALID_ARG, "unknown export input %d", (int)o->input);
    if (ftl_is_directory(o->output_path))
        return ftl_fail(FTL_E_INVALID_ARG, "%s is a folder; give the .onnx file to write", o->output_path);
    if (ftl_path_exists(o->output_path) && !o->overwrite) /* before the work: fail fast */
        return ftl_fail(FTL_E_EXISTS, "%s already exists (use --overwrite to replace it)", o->output_path);
    export_job j = {.o = o};
    FTL_TRY(ftl_classifier_load(o->model_path, &j.clf));
    ftl_status st = classifier_recipe_read(&j.clf, o->model_path, &j.recipe);
    if (st == FTL_OK) st = classifier_backbone_locate(&j.recipe, o->model_path, o->backbone_path, &j.backbone_path);
    if (st == FTL_OK) st = export_check_paths(o, j.backbone_path);
    if (st == FTL_OK) st = check_backbone(j.backbone_path, &j.recipe, &j.clf, o->model_path, &j.facts);
    if (st == FTL_OK && j.recipe.precision == FTL_NN_INT8) { /* QDQ with the scales it trained with */
        if (o->opset < QDQ_EXPORT_OPSET_MIN)
            st = ftl_fail(FTL_E_INVALID_ARG, "--opset %d: %s is an int8 model, exported as QuantizeLinear/DequantizeLinear "
                          "with per-channel weight scales, which needs opset %d or later", o->opset, o->model_path,
                          QDQ_EXPORT_OPSET_MIN);
        else st = ftl_nn_int8_scales_from_json(j.recipe.int8_scales_json, o->model_path, &j.int8_scales);
    } else if (st == FTL_OK && j.recipe.precision != FTL_NN_FP32) {
        ftl_log_warn("%s was trained on %s features; the export computes the backbone in float32, so its "
                     "probabilities differ slightly from ftl's", o->model_path, ftl_nn_precision_name(j.recipe.precision));
    }
    const char *recorded = ftl_classifier_metadata(&j.clf, FTL_MODEL_META_TTA);
    res->tta_flip = o->tta == FTL_TTA_FLIP || (o->tta == FTL_TTA_AS_TRAINED && recorded && strcmp(recorded, "flip") == 0);
    ob_init(&j.b);
    if (st == FTL_OK) st = build_and_write(&j, res);
    backbone_graph_free(&j.bg);
    ftl_nn_int8_scales_free(j.int8_scales);
    ob_free(&j.b);
    free(j.backbone_path);
    ftl_classifier_free(&j.clf);
    return st;
}
