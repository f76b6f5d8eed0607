/* ONNX ModelProto -> graph IR. Resolves names to tensor indices, loads initializers (inline
 * or external), turns Constant nodes into constants, and checks the opset and the input. */
#include "nn/onnx/onnx_import.h"
#include "nn/onnx/onnx_tensor.h"
#include "nn/ir/ops.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/sha256.h"

#include <stdlib.h>
#include <string.h>

enum { OPSET_MIN = 7, OPSET_MAX = 18, OPSET_TESTED_MIN = 11, OPSET_TESTED_MAX = 17 };

static ftl_status read_opset(const Onnx__ModelProto *m, nn_graph *g) {
    g->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version) g->opset = o->version;
    }
    if (g->opset < 0) return ftl_fail(FTL_E_FORMAT, "the model imports no default-domain (ai.onnx) opset");
    if (g->opset < OPSET_MIN || g->opset > OPSET_MAX)
        return ftl_fail(FTL_E_UNSUPPORTED, "opset %lld is not supported (ftl reads opsets %d-%d)", (long long)g->opset,
                        OPSET_TESTED_MIN, OPSET_TESTED_MAX);
    if (g->opset < OPSET_TESTED_MIN || g->opset > OPSET_TESTED_MAX)
        ftl_log_warn("opset %lld is outside the tested range %d-%d", (long long)g->opset, OPSET_TESTED_MIN,
                     OPSET_TESTED_MAX);
    return FTL_OK;
}

static ftl_status copy_attr(nn_graph *g, nn_node *n, const Onnx__AttributeProto *a, nn_attr *out, nn_extdata *x) {
    *out = (nn_attr){.name = ftl_strdup(a->name ? a->name : ""), .tensor = -1};
    if (a->ref_attr_name && *a->ref_attr_name)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): attribute '%s' refers to a function attribute", n->name,
                        n->op_type, out->name);
    int type = a->has_type ? a->type : 0;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: out->type = NN_ATTR_INT; out->i = a->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: out->type = NN_ATTR_FLOAT; out->f = a->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        out->type = NN_ATTR_STRING;
        out->s = ftl_xmalloc(a->s.len + 1);
        if (a->s.len) memcpy(out->s, a->s.data, a->s.len);
        out->s[a->s.len] = 0;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        out->type = NN_ATTR_INTS;
        if (a->n_ints > 64)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): attribute '%s' has %zu values", n->name, n->op_type,
                            out->name, a->n_ints);
        out->n = (int)a->n_ints;
        out->ints = ftl_xmalloc((a->n_ints + 1) * sizeof *out->ints);
        if (a->n_ints) memcpy(out->ints, a->ints, a->n_ints * sizeof *out->ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        out->type = NN_ATTR_FLOATS;
        if (a->n_floats > 4096)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): attribute '%s' has %zu values", n->name, n->op_type,
                            out->name, a->n_floats);
        out->n = (int)a->n_floats;
        out->floats = ftl_xmalloc((a->n_floats + 1) * sizeof *out->floats);
        if (a->n_floats) memcpy(out->floats, a->floats, a->n_floats * sizeof *out->floats);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!a->t) return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): tensor attribute '%s' is empty", n->name, n->op_type, out->name);
        out->type = NN_ATTR_TENSOR;
        char *tname = ftl_format("%s/%s", n->name, out->name);
        int t = nn_graph_new_tensor(g, tname);
        free(tname);
        out->tensor = t;
        ftl_status st = nn_tensor_from_proto(a->t, &g->tensors[t], x);
        if (st != FTL_OK) return ftl_fail_context(st, "node '%s' (%s): attribute '%s'", n->name, n->op_type, out->name);
        break;
    }
    default: out->type = NN_ATTR_OTHER; break; /* graphs, sparse tensors: rejected by the op's check */
    }
    return FTL_OK;
}

/* Constant node -> constant output tensor; the node is then dropped. */
static ftl_status fold_constant_node(nn_graph *g, nn_node *n) {
    if (n->n_out != 1 || n->n_attr != 1)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (Constant): needs exactly one output and one value attribute", n->name);
    if (n->out[0] < 0) return ftl_fail(FTL_E_FORMAT, "node '%s' (Constant): its output has no name", n->name);
    const nn_attr *a = &n->attr[0];
    nn_tensor *out = &g->tensors[n->out[0]];
    nn_shape scalar = {.rank = 0}, vec = {.rank = 1, .d = {a->n}};
    if (strcmp(a->name, "value") == 0 && a->type == NN_ATTR_TENSOR) {
        nn_tensor *src = &g->tensors[a->tensor];
        nn_tensor_set_data(out, src->dtype, src->data, &src->shape);
        out->onnx_type = src->onnx_type;
        src->data = NULL;
    } else if (strcmp(a->name, "value_float") == 0 && a->type == NN_ATTR_FLOAT) {
        float *v = ftl_xmalloc(sizeof *v);
        *v = a->f;
        nn_tensor_set_data(out, NN_F32, v, &scalar);
    } else if (strcmp(a->name, "value_int") == 0 && a->type == NN_ATTR_INT) {
        int64_t *v = ftl_xmalloc(sizeof *v);
        *v = a->i;
        nn_tensor_set_data(out, NN_I64, v, &scalar);
    } else if (strcmp(a->name, "value_floats") == 0 && a->type == NN_ATTR_FLOATS) {
        float *v = ftl_xmalloc(((size_t)a->n + 1) * sizeof *v);
        memcpy(v, a->floats, (size_t)a->n * sizeof *v);
        nn_tensor_set_data(out, NN_F32, v, &vec);
    } else if (strcmp(a->name, "value_ints") == 0 && a->type == NN_ATTR_INTS) {
        int64_t *v = ftl_xmalloc(((size_t)a->n + 1) * sizeof *v);
        memcpy(v, a->ints, (size_t)a->n * sizeof *v);
        nn_tensor_set_data(out, NN_I64, v, &vec);
    } else {
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Constant): unsupported attribute '%s'", n->name, a->name);
    }
    out->producer = -1;
    n->dead = true;
    return FTL_OK;
}

static ftl_status read_input_shape(const Onnx__ValueInfoProto *vi, nn_tensor *t) {
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return ftl_fail(FTL_E_UNSUPPORTED, "graph input '%s' is not a tensor", t->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt->has_elem_type || tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return ftl_fail(FTL_E_UNSUPPORTED, "graph input '%s' has element type %d; ftl feeds float32 (type 1)", t->name,
                        tt->has_elem_type ? tt->elem_type : 0);
    if (!tt->shape) return ftl_fail(FTL_E_UNSUPPORTED, "graph input '%s' has no shape", t->name);
    if (tt->shape->n_dim < 1 || tt->shape->n_dim > NN_MAX_RANK)
        return ftl_fail(FTL_E_UNSUPPORTED, "graph input '%s' has rank %zu", t->name, tt->shape->n_dim);
    t->shape.rank = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        bool fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0;
        if (i == 0) {
            t->shape.d[0] = fixed ? d->dim_value : 0; /* 0: dynamic batch */
        } else if (!fixed) {
            return ftl_fail(FTL_E_UNSUPPORTED, "graph input '%s': dimension %zu is dynamic; ftl needs a fixed image "
                            "geometry (only the batch may vary)", t->name, i);
        } else if (d->dim_value > (1 << 20)) {
            return ftl_fail(FTL_E_UNSUPPORTED, "graph input '%s': dimension %zu is %lld", t->name, i,
                            (long long)d->dim_value);
        } else {
            t->shape.d[i] = d->dim_value;
        }
    }
    return FTL_OK;
}

static ftl_status build_graph(const Onnx__ModelProto *m, const char *path, nn_graph *g, nn_extdata *x) {
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) return ftl_fail(FTL_E_FORMAT, "the model has no graph");
    g->ir_version = m->has_ir_version ? m->ir_version : 0;
    g->producer = ftl_format("%s %s", m->producer_name ? m->producer_name : "", m->producer_version ? m->producer_version : "");
    FTL_TRY(read_opset(m, g));
    (void)path;

    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name) return ftl_fail(FTL_E_FORMAT, "initializer %zu has no name", i);
        int t;
        FTL_TRY(nn_graph_add_tensor(g, tp->name, &t));
        ftl_status st = nn_tensor_from_proto(tp, &g->tensors[t], x);
        if (st != FTL_OK) return st;
    }
    int n_inputs = 0;
    g->inputs = ftl_xcalloc(gp->n_input + 1, sizeof *g->inputs);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name) return ftl_fail(FTL_E_FORMAT, "graph input %zu has no name", i);
        if (nn_graph_find(g, vi->name) >= 0) continue; /* an initializer listed as input (IR < 4 style) */
        int t;
        FTL_TRY(nn_graph_add_tensor(g, vi->name, &t));
        g->tensors[t].is_input = true;
        FTL_TRY(read_input_shape(vi, &g->tensors[t]));
        if (g->tensors[t].shape.d[0] > 0) g->fixed_batch = g->tensors[t].shape.d[0];
        g->inputs[n_inputs++] = t;
    }
    g->n_inputs = n_inputs;

    /* nodes: outputs first, so inputs can refer to any node (order is checked later) */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        int ni = nn_graph_add_node(g);
        nn_node *n = &g->nodes[ni];
        n->op_type = ftl_strdup(np->op_type ? np->op_type : "");
        n->name = np->name && *np->name ? ftl_strdup(np->name) : ftl_format("%s#%zu", n->op_type, i);
        if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx") != 0)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s': unsupported op '%s' from domain '%s'", n->name, n->op_type,
                            np->domain);
        if (strcmp(n->op_type, "DynamicQuantizeLinear") == 0)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s': DynamicQuantizeLinear computes its scale from each batch, so a "
                            "row's features would depend on the rows batched with it; ftl runs static quantization only "
                            "(QuantizeLinear/DequantizeLinear with constant scales, QLinearConv, QLinearMatMul), or run the "
                            "float model with --precision int8", n->name);
        if (!nn_op_from_name(n->op_type, &n->op))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s': unsupported op '%s'", n->name, n->op_type);
        n->n_out = (int)np->n_output;
        n->out = ftl_xcalloc(np->n_output + 1, sizeof *n->out);
        for (size_t k = 0; k < np->n_output; k++) {
            n->out[k] = -1;
            if (!np->output[k] || !*np->output[k]) continue;
            int t;
            ftl_status st = nn_graph_add_tensor(g, np->output[k], &t);
            if (st != FTL_OK) return ftl_fail_context(st, "node '%s' (%s)", n->name, n->op_type);
            g->tensors[t].producer = ni;
            n->out[k] = t;
        }
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        nn_node *n = &g->nodes[i];
        n->n_in = (int)np->n_input;
        n->in = ftl_xcalloc(np->n_input + 1, sizeof *n->in);
        for (size_t k = 0; k < np->n_input; k++) {
            n->in[k] = -1;
            if (!np->input[k] || !*np->input[k]) continue;
            int t = nn_graph_find(g, np->input[k]);
            if (t < 0)
                return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): input '%s' is not produced by any node, initializer or "
                                "graph input (missing initializer?)", n->name, n->op_type, np->input[k]);
            n->in[k] = t;
        }
        n->n_attr = (int)np->n_attribute;
        n->attr = ftl_xcalloc(np->n_attribute + 1, sizeof *n->attr);
        for (size_t k = 0; k < np->n_attribute; k++)
            FTL_TRY(copy_attr(g, n, np->attribute[k], &n->attr[k], x));
        if (n->op == NN_OP_CONSTANT) FTL_TRY(fold_constant_node(g, n));
    }
    g->n_outputs = (int)gp->n_output;
    g->outputs = ftl_xcalloc(gp->n_output + 1, sizeof *g->outputs);
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        int t = nn_graph_find(g, name);
        if (t < 0) return ftl_fail(FTL_E_FORMAT, "graph output '%s' is not produced by any node", name ? name : "");
        g->outputs[i] = t;
    }
    if (g->n_outputs == 0) return ftl_fail(FTL_E_FORMAT, "the graph has no outputs");
    return FTL_OK;
}

ftl_status nn_onnx_import(const char *path, nn_graph **graph, char *sha256_hex) {
    *graph = NULL;
    if (!ftl_path_exists(path)) return ftl_fail(FTL_E_NOT_FOUND, "%s: no such file", path);
    if (ftl_is_directory(path)) return ftl_fail(FTL_E_INVALID_ARG, "%s: is a folder, not an ONNX model", path);
    uint8_t *bytes;
    size_t size;
    FTL_TRY(ftl_read_file(path, &bytes, &size));
    ftl_sha256 hash;
    ftl_sha256_init(&hash);
    ftl_sha256_update(&hash, bytes, size);
    Onnx__ModelProto *m = size ? onnx__model_proto__unpack(NULL, size, bytes) : NULL;
    free(bytes);
    if (!m)
        return ftl_fail(FTL_E_FORMAT, "%s: not an ONNX model (%s)", path,
                        size ? "protobuf decoding failed: truncated or corrupt file" : "empty file");
    nn_graph *g = nn_graph_new();
    nn_extdata x = {.model_dir = ftl_path_folder(path), .hash = &hash};
    ftl_status st = build_graph(m, path, g, &x);
    onnx__model_proto__free_unpacked(m, NULL);
    nn_extdata_free(&x);
    free(x.model_dir);
    if (st != FTL_OK) {
        nn_graph_free(g);
        return ftl_fail_context(st, "%s", path);
    }
    if (sha256_hex) {
        uint8_t digest[32];
        ftl_sha256_final(&hash, digest);
        ftl_sha256_hex(digest, sha256_hex);
    }
    *graph = g;
    return FTL_OK;
}

ftl_status nn_onnx_external_files(const char *path, ftl_string_list *files) {
    uint8_t *bytes;
    size_t size;
    FTL_TRY(ftl_read_file(path, &bytes, &size));
    Onnx__ModelProto *m = size ? onnx__model_proto__unpack(NULL, size, bytes) : NULL;
    free(bytes);
    if (!m) return ftl_fail(FTL_E_FORMAT, "%s: not an ONNX model (protobuf decoding failed)", path);
    char *dir = ftl_path_folder(path);
    const Onnx__GraphProto *g = m->graph;
    for (size_t i = 0; g && i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        for (size_t k = 0; t && k < t->n_external_data; k++) {
            const Onnx__StringStringEntryProto *e = t->external_data[k];
            if (!e || !e->key || !e->value || strcmp(e->key, "location") != 0) continue;
            char *file = ftl_format("%s/%s", dir, e->value);
            bool seen = false;
            for (int64_t j = 0; j < files->count && !seen; j++) seen = strcmp(files->items[j], file) == 0;
            if (seen) free(file);
            else ftl_string_list_push(files, file);
        }
    }
    free(dir);
    onnx__model_proto__free_unpacked(m, NULL);
    return FTL_OK;
}
