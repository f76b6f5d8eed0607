/* Opset conversion of the backbone's nodes (see opset_convert.h). The boundaries below are the
 * opset versions at which an op's inputs or attributes changed (ONNX's Changelog.md). */
#include "export/opset_convert.h"
#include "util/alloc.h"
#include "util/error.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

int64_t opset_ir_version(int64_t opset) {
    if (opset <= 11) return 6;
    if (opset <= 14) return 7;
    if (opset <= 18) return 8;
    return 9;
}

/* Ops whose signature did not change in opsets 7-18 for float inference (types were added). */
static const char *const unchanged_ops[] = {
    "Conv", "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Add", "Sub", "Mul", "Div", "MaxPool",
    "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Flatten", "Concat", "Gemm", "MatMul", "Identity",
    "Transpose", "Cast", "Floor", "Gather", "Sqrt", "Pow", "Exp", "Log", "Neg", "Abs", "Erf", "Shape",
    "Reciprocal", "Max", "Min", "Sum", "Mean", "PRelu", "Elu", "Selu", "Softplus", "Softsign",
};

static bool crosses(int64_t from, int64_t to, int64_t boundary) { return (from < boundary) != (to < boundary); }

static const char *node_label(const Onnx__NodeProto *n) { return n->name && *n->name ? n->name : n->op_type; }

/* Integer values of a 1-D or scalar integer initializer. */
static ftl_status const_ints(const Onnx__TensorProto *t, int64_t *out, int max, int *count) {
    int dt = t->has_data_type ? t->data_type : 0;
    size_t es = dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ? 4 : 0;
    if (!es) return ftl_fail(FTL_E_UNSUPPORTED, "'%s' is not an int32/int64 tensor", t->name);
    size_t n = t->has_raw_data ? t->raw_data.len / es : es == 8 ? t->n_int64_data : t->n_int32_data;
    if (t->has_raw_data && t->raw_data.len % es) return ftl_fail(FTL_E_FORMAT, "'%s': raw_data is not whole values", t->name);
    if (n > (size_t)max) return ftl_fail(FTL_E_UNSUPPORTED, "'%s' has %zu values", t->name, n);
    for (size_t i = 0; i < n; i++) {
        if (t->has_raw_data) {
            if (es == 8) memcpy(&out[i], t->raw_data.data + 8 * i, 8);
            else {
                int32_t v;
                memcpy(&v, t->raw_data.data + 4 * i, 4);
                out[i] = v;
            }
        } else {
            out[i] = es == 8 ? t->int64_data[i] : t->int32_data[i];
        }
    }
    *count = (int)n;
    return FTL_OK;
}

static void set_inputs(onnx_builder *b, Onnx__NodeProto *n, const char *const *in, int count) {
    n->input = ob_alloc(b, (size_t)(count + 1) * sizeof *n->input);
    for (int i = 0; i < count; i++) n->input[i] = ob_strdup(b, in[i]);
    n->n_input = (size_t)count;
}

static const char *add_ints_init(onnx_builder *b, backbone_graph *g, const char *stem, const int64_t *v, int count) {
    int64_t dims[1] = {count};
    const char *name = ob_const_i64(b, stem, dims, 1, v);
    backbone_graph_add_init(g, b->inits[--b->n_inits]); /* the backbone's list, not the builder's */
    return name;
}

static const char *add_float_init(onnx_builder *b, backbone_graph *g, const char *stem, float v) {
    const char *name = ob_scalar_f32(b, stem, v);
    backbone_graph_add_init(g, b->inits[--b->n_inits]);
    return name;
}

/* The constant behind input k of n, or an error naming the node. */
static ftl_status constant_input(const backbone_graph *g, const Onnx__NodeProto *n, size_t k, Onnx__TensorProto **t) {
    *t = k < n->n_input && n->input[k] && *n->input[k] ? backbone_graph_init(g, n->input[k]) : NULL;
    if (!*t)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): input %zu is computed, so it cannot become an attribute "
                        "of an older opset", node_label(n), n->op_type, k + 1);
    return FTL_OK;
}

/* Squeeze/Unsqueeze (13) and ReduceMean & co. (18): `axes` attribute <-> second input. */
static ftl_status axes_attr_input(onnx_builder *b, backbone_graph *g, Onnx__NodeProto *n, bool to_input) {
    if (to_input) {
        Onnx__AttributeProto *a = ob_attr_take(n, "axes");
        if (!a) return FTL_OK;
        const char *in[2] = {n->input[0], add_ints_init(b, g, "axes", a->ints, (int)a->n_ints)};
        set_inputs(b, n, in, 2);
        return FTL_OK;
    }
    if (n->n_input < 2 || !n->input[1] || !*n->input[1]) return FTL_OK;
    const Onnx__AttributeProto *noop = ob_attr_find(n, "noop_with_empty_axes");
    if (noop && noop->i) ob_attr_take(n, "noop_with_empty_axes");
    Onnx__TensorProto *t;
    FTL_TRY(constant_input(g, n, 1, &t));
    int64_t axes[64];
    int count;
    FTL_TRY(const_ints(t, axes, 64, &count));
    if (count == 0 && noop && noop->i)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): empty axes with noop_with_empty_axes has no older form",
                        node_label(n), n->op_type);
    n->n_input = 1;
    if (count) ob_attr_ints(b, n, "axes", axes, count);
    return FTL_OK;
}

static ftl_status clip_to_inputs(onnx_builder *b, backbone_graph *g, Onnx__NodeProto *n) {
    Onnx__AttributeProto *lo = ob_attr_take(n, "min"), *hi = ob_attr_take(n, "max");
    const char *in[3] = {n->input[0], add_float_init(b, g, "clip_min", lo ? lo->f : -FLT_MAX),
                         add_float_init(b, g, "clip_max", hi ? hi->f : FLT_MAX)};
    set_inputs(b, n, in, 3);
    return FTL_OK;
}

static ftl_status pad_to_inputs(onnx_builder *b, backbone_graph *g, Onnx__NodeProto *n) {
    Onnx__AttributeProto *pads = ob_attr_take(n, "pads"), *value = ob_attr_take(n, "value");
    if (!pads) return ftl_fail(FTL_E_FORMAT, "node '%s' (Pad): no pads", node_label(n));
    const char *in[3] = {n->input[0], add_ints_init(b, g, "pads", pads->ints, (int)pads->n_ints),
                         add_float_init(b, g, "pad_value", value ? value->f : 0.0f)};
    set_inputs(b, n, in, 3);
    return FTL_OK;
}

/* HardSwish(x) = x * HardSigmoid(x; alpha 1/6, beta 1/2): the same formula from two ops every opset
 * has. n becomes the Mul; the HardSigmoid node, returned, goes before it. */
static Onnx__NodeProto *hardswish_expand(onnx_builder *b, Onnx__NodeProto *n) {
    const char *gate = ob_fresh_name(b, "hardswish_gate");
    Onnx__NodeProto *hs = ob_alloc(b, sizeof *hs);
    onnx__node_proto__init(hs);
    hs->op_type = ob_strdup(b, "HardSigmoid");
    hs->name = ob_strdup(b, gate);
    set_inputs(b, hs, (const char *[]){n->input[0]}, 1);
    hs->n_output = 1;
    hs->output = ob_alloc(b, 2 * sizeof *hs->output);
    hs->output[0] = (char *)gate;
    ob_attr_float(b, hs, "alpha", 1.0f / 6.0f);
    ob_attr_float(b, hs, "beta", 0.5f);
    n->op_type = ob_strdup(b, "Mul");
    set_inputs(b, n, (const char *[]){n->input[0], gate}, 2);
    n->n_attribute = 0;
    return hs;
}

/* Constant's value_float/value_ints/... (12) -> value (tensor). */
static ftl_status constant_to_tensor(onnx_builder *b, Onnx__NodeProto *n) {
    if (n->n_attribute != 1) return FTL_OK;
    Onnx__AttributeProto *a = n->attribute[0];
    if (!a->name || strcmp(a->name, "value") == 0) return FTL_OK;
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->has_data_type = 1;
    if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0) {
        bool one = a->name[11] == 0;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->n_float_data = one ? 1 : a->n_floats;
        t->float_data = one ? &a->f : a->floats;
        if (!one) {
            t->n_dims = 1;
            t->dims = ob_alloc(b, sizeof *t->dims);
            t->dims[0] = (int64_t)a->n_floats;
        }
    } else if (strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0) {
        bool one = a->name[9] == 0;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        t->n_int64_data = one ? 1 : a->n_ints;
        t->int64_data = one ? &a->i : a->ints;
        if (!one) {
            t->n_dims = 1;
            t->dims = ob_alloc(b, sizeof *t->dims);
            t->dims[0] = (int64_t)a->n_ints;
        }
    } else {
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Constant): attribute '%s' has no opset-11 form", node_label(n), a->name);
    }
    Onnx__AttributeProto *v = ob_alloc(b, sizeof *v);
    onnx__attribute_proto__init(v);
    v->name = ob_strdup(b, "value");
    v->has_type = 1;
    v->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    v->t = t;
    n->attribute[0] = v;
    return FTL_OK;
}

static ftl_status drop_default_attr(Onnx__NodeProto *n, const char *attr, int64_t allowed, int64_t from, int64_t to) {
    const Onnx__AttributeProto *a = ob_attr_find(n, attr);
    if (!a) return FTL_OK;
    if (a->i != allowed)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): %s=%lld has no form in opset %lld (the model is opset %lld)",
                        node_label(n), n->op_type, attr, (long long)a->i, (long long)to, (long long)from);
    ob_attr_take(n, attr);
    return FTL_OK;
}

static bool is_reduce(const char *op) {
    static const char *const r[] = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (strcmp(op, r[i]) == 0) return true;
    return false;
}

static ftl_status convert_node(onnx_builder *b, backbone_graph *g, Onnx__NodeProto *n, int64_t s, int64_t t,
                               bool *changed, Onnx__NodeProto **before) {
    const char *op = n->op_type ? n->op_type : "";
    *changed = false;
    *before = NULL;
    if (strcmp(op, "Clip") == 0) {
        if (!crosses(s, t, 11)) return FTL_OK;
        *changed = true;
        return clip_to_inputs(b, g, n); /* targets are >= 11 */
    }
    if (strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0 || strcmp(op, "ReduceSum") == 0) {
        if (!crosses(s, t, 13)) return FTL_OK;
        *changed = true;
        return axes_attr_input(b, g, n, t >= 13);
    }
    if (is_reduce(op)) {
        if (!crosses(s, t, 18)) return FTL_OK;
        *changed = true;
        return axes_attr_input(b, g, n, t >= 18);
    }
    if (strcmp(op, "Pad") == 0) {
        if (crosses(s, t, 11)) {
            *changed = true;
            FTL_TRY(pad_to_inputs(b, g, n));
        }
        if (crosses(s, t, 18) && t < 18 && n->n_input > 3 && n->input[3] && *n->input[3])
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Pad): its axes input needs opset 18 (--opset 18)", node_label(n));
        return FTL_OK;
    }
    if (strcmp(op, "Dropout") == 0) {
        if (!crosses(s, t, 12)) return FTL_OK;
        if (n->n_output > 1 && n->output[1] && *n->output[1])
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Dropout): its mask output is used", node_label(n));
        *changed = true; /* inference: the identity in every opset */
        n->op_type = ob_strdup(b, "Identity");
        n->n_input = 1;
        n->n_output = 1;
        n->n_attribute = 0;
        return FTL_OK;
    }
    if (strcmp(op, "BatchNormalization") == 0) {
        const size_t before_attrs = n->n_attribute;
        if (crosses(s, t, 9) && t >= 9) FTL_TRY(drop_default_attr(n, "spatial", 1, s, t));
        if (crosses(s, t, 14) && t < 14) FTL_TRY(drop_default_attr(n, "training_mode", 0, s, t));
        *changed = n->n_attribute != before_attrs;
        return FTL_OK;
    }
    if (strcmp(op, "Reshape") == 0) {
        if (!(crosses(s, t, 14) && t < 14)) return FTL_OK;
        const size_t before_attrs = n->n_attribute;
        FTL_TRY(drop_default_attr(n, "allowzero", 0, s, t));
        *changed = n->n_attribute != before_attrs;
        return FTL_OK;
    }
    if (strcmp(op, "HardSwish") == 0) {
        if (t >= 14) return FTL_OK;
        *changed = true;
        *before = hardswish_expand(b, n);
        return FTL_OK;
    }
    if (strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0 || strcmp(op, "Hardmax") == 0) {
        if (!crosses(s, t, 13)) return FTL_OK;
        const Onnx__AttributeProto *axis = ob_attr_find(n, "axis");
        if (!axis || axis->i != -1)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its meaning changed in opset 13 unless axis = -1; export "
                            "with --opset %lld", node_label(n), op, (long long)s);
        return FTL_OK;
    }
    if (strcmp(op, "Constant") == 0) {
        if (t >= 12) return FTL_OK;
        *changed = true;
        return constant_to_tensor(b, n);
    }
    for (size_t i = 0; i < sizeof unchanged_ops / sizeof unchanged_ops[0]; i++)
        if (strcmp(op, unchanged_ops[i]) == 0) return FTL_OK;
    if (s == t) return FTL_OK;
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): ftl does not know how %s changed between opsets %lld and %lld; "
                    "export with --opset %lld (the backbone's)", node_label(n), op, op, (long long)s, (long long)t,
                    (long long)s);
}

ftl_status opset_convert(onnx_builder *b, backbone_graph *g, int64_t target, int *rewritten) {
    *rewritten = 0;
    if (target < EXPORT_OPSET_MIN || target > EXPORT_OPSET_MAX)
        return ftl_fail(FTL_E_INVALID_ARG, "--opset %lld: ftl exports opsets %d-%d", (long long)target, EXPORT_OPSET_MIN,
                        EXPORT_OPSET_MAX);
    Onnx__NodeProto **out = ftl_xcalloc(2 * g->n_nodes + 1, sizeof *out);
    size_t n_out = 0;
    ftl_status st = FTL_OK;
    for (size_t i = 0; i < g->n_nodes && st == FTL_OK; i++) {
        bool changed;
        Onnx__NodeProto *before;
        st = convert_node(b, g, g->nodes[i], g->opset, target, &changed, &before);
        if (before) out[n_out++] = before;
        out[n_out++] = g->nodes[i];
        *rewritten += changed;
    }
    if (st != FTL_OK) {
        free(out);
        return st;
    }
    free(g->nodes);
    g->nodes = out;
    g->n_nodes = n_out;
    return FTL_OK;
}
