/* Operator table and attribute parsing. Each op lists the attributes it understands; any other
 * attribute, or a value ftl does not implement, is an error naming node, op and attribute. */
#include "nn/ir/ops.h"
#include "util/error.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

typedef struct op_info {
    const char *name;
    nn_op op;
    int min_in, max_in, min_out, max_out;
    const char *attrs[8];
} op_info;

static const op_info op_table[] = {
    {"Conv", NN_OP_CONV, 2, 3, 1, 1, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}},
    {"BatchNormalization", NN_OP_BATCHNORM, 5, 5, 1, 5, {"epsilon", "momentum", "training_mode", "spatial"}},
    {"Relu", NN_OP_RELU, 1, 1, 1, 1, {0}},
    {"Clip", NN_OP_CLIP, 1, 3, 1, 1, {"min", "max"}},
    {"LeakyRelu", NN_OP_LEAKYRELU, 1, 1, 1, 1, {"alpha"}},
    {"Sigmoid", NN_OP_SIGMOID, 1, 1, 1, 1, {0}},
    {"HardSigmoid", NN_OP_HARDSIGMOID, 1, 1, 1, 1, {"alpha", "beta"}},
    {"HardSwish", NN_OP_HARDSWISH, 1, 1, 1, 1, {0}},
    {"Tanh", NN_OP_TANH, 1, 1, 1, 1, {0}},
    {"Add", NN_OP_ADD, 2, 2, 1, 1, {0}},
    {"Sub", NN_OP_SUB, 2, 2, 1, 1, {0}},
    {"Mul", NN_OP_MUL, 2, 2, 1, 1, {0}},
    {"Div", NN_OP_DIV, 2, 2, 1, 1, {0}},
    {"MaxPool", NN_OP_MAXPOOL, 1, 1, 1, 2, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}},
    {"AveragePool", NN_OP_AVGPOOL, 1, 1, 1, 1, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides", "dilations"}},
    {"GlobalAveragePool", NN_OP_GLOBALAVGPOOL, 1, 1, 1, 1, {0}},
    {"GlobalMaxPool", NN_OP_GLOBALMAXPOOL, 1, 1, 1, 1, {0}},
    {"ReduceMean", NN_OP_REDUCEMEAN, 1, 2, 1, 1, {"axes", "keepdims", "noop_with_empty_axes"}},
    {"Flatten", NN_OP_FLATTEN, 1, 1, 1, 1, {"axis"}},
    {"Reshape", NN_OP_RESHAPE, 2, 2, 1, 1, {"allowzero"}},
    {"Squeeze", NN_OP_SQUEEZE, 1, 2, 1, 1, {"axes"}},
    {"Unsqueeze", NN_OP_UNSQUEEZE, 1, 2, 1, 1, {"axes"}},
    {"Concat", NN_OP_CONCAT, 1, 4096, 1, 1, {"axis"}},
    {"Gemm", NN_OP_GEMM, 2, 3, 1, 1, {"alpha", "beta", "transA", "transB"}},
    {"MatMul", NN_OP_MATMUL, 2, 2, 1, 1, {0}},
    {"Pad", NN_OP_PAD, 1, 4, 1, 1, {"mode", "pads", "value"}},
    {"Identity", NN_OP_IDENTITY, 1, 1, 1, 1, {0}},
    {"Dropout", NN_OP_DROPOUT, 1, 3, 1, 2, {"ratio", "seed"}},
    {"Transpose", NN_OP_TRANSPOSE, 1, 1, 1, 1, {"perm"}},
    {"Constant", NN_OP_CONSTANT, 0, 0, 1, 1, {"value", "value_float", "value_floats", "value_int", "value_ints"}},
    {"Shape", NN_OP_SHAPE, 1, 1, 1, 1, {"start", "end"}},
    {"Gather", NN_OP_GATHER, 2, 2, 1, 1, {"axis"}},
    {"Cast", NN_OP_CAST, 1, 1, 1, 1, {"to", "saturate"}},
    {"Slice", NN_OP_SLICE, 3, 5, 1, 1, {0}},
    {"Equal", NN_OP_EQUAL, 2, 2, 1, 1, {0}},
    {"Where", NN_OP_WHERE, 3, 3, 1, 1, {0}},
    {"ConstantOfShape", NN_OP_CONSTANTOFSHAPE, 1, 1, 1, 1, {"value"}},
    {"Expand", NN_OP_EXPAND, 2, 2, 1, 1, {0}},
    {"Range", NN_OP_RANGE, 3, 3, 1, 1, {0}},
    {"Mod", NN_OP_MOD, 2, 2, 1, 1, {"fmod"}},
    {"Not", NN_OP_NOT, 1, 1, 1, 1, {0}},
    {"ScatterND", NN_OP_SCATTERND, 3, 3, 1, 1, {"reduction"}},
    {"Pow", NN_OP_POW, 2, 2, 1, 1, {0}},
    {"Sqrt", NN_OP_SQRT, 1, 1, 1, 1, {0}},
    {"Erf", NN_OP_ERF, 1, 1, 1, 1, {0}},
    {"Softmax", NN_OP_SOFTMAX, 1, 1, 1, 1, {"axis"}},
    {"Gelu", NN_OP_GELU, 1, 1, 1, 1, {"approximate"}},
    {"LayerNormalization", NN_OP_LAYERNORM, 2, 3, 1, 3, {"axis", "epsilon", "stash_type"}},
    {"Einsum", NN_OP_EINSUM, 2, 2, 1, 1, {"equation"}},
    {"Split", NN_OP_SPLIT, 1, 2, 1, NN_MAX_SPLIT, {"axis", "split", "num_outputs"}},
    {"QuantizeLinear", NN_OP_QUANTIZELINEAR, 2, 3, 1, 1, {"axis"}},
    {"DequantizeLinear", NN_OP_DEQUANTIZELINEAR, 2, 3, 1, 1, {"axis"}},
    {"QLinearConv", NN_OP_QLINEARCONV, 8, 9, 1, 1, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}},
    {"QLinearMatMul", NN_OP_QLINEARMATMUL, 8, 8, 1, 1, {0}},
    {"ConvInteger", NN_OP_CONVINTEGER, 2, 4, 1, 1, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}},
    {"MatMulInteger", NN_OP_MATMULINTEGER, 2, 4, 1, 1, {0}},
    {"FakeQuantize", NN_OP_FAKEQUANT, 1, 1, 1, 1, {0}}, /* ftl's own: never matched from a file */
};
enum { OP_TABLE_SIZE = sizeof op_table / sizeof op_table[0] };

static const op_info *info_of(nn_op op) {
    for (int i = 0; i < OP_TABLE_SIZE; i++)
        if (op_table[i].op == op) return &op_table[i];
    return NULL;
}

bool nn_op_from_name(const char *op_type, nn_op *op) {
    for (int i = 0; i < OP_TABLE_SIZE; i++)
        if (op_table[i].op != NN_OP_FAKEQUANT && strcmp(op_table[i].name, op_type) == 0) {
            *op = op_table[i].op;
            return true;
        }
    return false;
}

bool nn_op_is_reshape_like(nn_op op) {
    return op == NN_OP_FLATTEN || op == NN_OP_RESHAPE || op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE ||
           op == NN_OP_IDENTITY || op == NN_OP_DROPOUT;
}

bool nn_op_is_activation(nn_op op) {
    return op == NN_OP_RELU || op == NN_OP_CLIP || op == NN_OP_LEAKYRELU || op == NN_OP_SIGMOID ||
           op == NN_OP_HARDSIGMOID || op == NN_OP_HARDSWISH || op == NN_OP_TANH || op == NN_OP_SQRT ||
           op == NN_OP_POW || op == NN_OP_GELU || op == NN_OP_SILU;
}

/* ---- attribute getters: type-checked, error names node/op/attribute ---- */

static ftl_status bad_attr(const nn_node *n, const char *attr, const char *why) {
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): attribute '%s': %s", n->name, n->op_type, attr, why);
}

static ftl_status get_int(const nn_node *n, const char *name, int64_t def, int64_t *v) {
    const nn_attr *a = nn_node_attr(n, name);
    *v = def;
    if (!a) return FTL_OK;
    if (a->type != NN_ATTR_INT) return bad_attr(n, name, "expected an integer");
    *v = a->i;
    return FTL_OK;
}

static ftl_status get_float(const nn_node *n, const char *name, float def, float *v) {
    const nn_attr *a = nn_node_attr(n, name);
    *v = def;
    if (!a) return FTL_OK;
    if (a->type != NN_ATTR_FLOAT) return bad_attr(n, name, "expected a float");
    *v = a->f;
    return FTL_OK;
}

/* ints attribute of exactly `want` values (want < 0: any count up to max). */
static ftl_status get_ints(const nn_node *n, const char *name, int want, int max, int64_t *v, int *count) {
    const nn_attr *a = nn_node_attr(n, name);
    *count = -1;
    if (!a) return FTL_OK;
    if (a->type != NN_ATTR_INTS) return bad_attr(n, name, "expected a list of integers");
    if ((want >= 0 && a->n != want) || a->n > max) {
        char why[96];
        if (want >= 0) snprintf(why, sizeof why, "has %d values, expected %d (only 2-D images are supported)", a->n, want);
        else snprintf(why, sizeof why, "has %d values, at most %d are supported", a->n, max);
        return bad_attr(n, name, why);
    }
    for (int i = 0; i < a->n; i++) v[i] = a->ints[i];
    *count = a->n;
    return FTL_OK;
}

/* A parameter input that is not a constant yet: it may be computed from shapes (a fold), so the
 * node is parsed again at shape time; a second miss is the error. */
static _Thread_local bool parse_is_final; /* set while nn_node_reparse_params runs */

static ftl_status defer(nn_node *n, const nn_graph *g, int k, const char *what) {
    if (parse_is_final)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): input %d ('%s', the %s) must be a constant, or computed "
                        "from constants and shapes only", n->name, n->op_type, k, g->tensors[n->in[k]].name, what);
    n->p.deferred = 1;
    return FTL_OK;
}

/* A constant input holding a list of int64 (pads, axes). */
static ftl_status const_ints(const nn_graph *g, nn_node *n, int k, const char *what, int max, int64_t *v, int *count) {
    *count = -1;
    if (k >= n->n_in || n->in[k] < 0) return FTL_OK;
    const nn_tensor *t = &g->tensors[n->in[k]];
    if (!t->data) return defer(n, g, k, what);
    if (t->dtype != NN_I64 || t->shape.rank > 1 || t->count > max)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): input '%s' (the %s) must be a 1-D integer tensor of at most %d "
                        "values", n->name, n->op_type, t->name, what, max);
    for (int64_t i = 0; i < t->count; i++) v[i] = ((const int64_t *)t->data)[i];
    *count = (int)t->count;
    return FTL_OK;
}

/* A constant scalar float input (Clip min/max, Pad value). */
static ftl_status const_scalar(const nn_graph *g, nn_node *n, int k, const char *what, float *v) {
    if (k >= n->n_in || n->in[k] < 0) return FTL_OK;
    const nn_tensor *t = &g->tensors[n->in[k]];
    if (!t->data) return defer(n, g, k, what);
    if (t->count != 1)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): input '%s' (the %s) must be a scalar, it has %lld values",
                        n->name, n->op_type, t->name, what, (long long)t->count);
    *v = t->dtype == NN_F32 ? ((const float *)t->data)[0] : (float)((const int64_t *)t->data)[0];
    return FTL_OK;
}

/* Einsum in the batched-matmul form (MaxViT's attention: "BGHID,BGHJD->BGHIJ"): every letter of
 * the output is a batch letter (in both inputs) or the one free letter of A or of B, exactly one
 * letter is contracted, and the batch axis (the first letter of all three terms) stays first. */
static ftl_status parse_einsum(nn_node *n) {
    nn_params *p = &n->p;
    const nn_attr *eq = nn_node_attr(n, "equation");
    if (!eq || eq->type != NN_ATTR_STRING) return bad_attr(n, "equation", "is required (a string)");
    char terms[3][NN_MAX_RANK + 1];
    int len[3] = {0, 0, 0}, term = 0;
    for (const char *c = eq->s; *c; c++) {
        if (*c == ' ') continue;
        if (*c == ',' && term == 0) term = 1;
        else if (c[0] == '-' && c[1] == '>' && term == 1) term = 2, c++;
        else if (((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) && len[term] < NN_MAX_RANK) terms[term][len[term]++] = *c;
        else return bad_attr(n, "equation", "only 'A,B->C' with letters and at most 8 axes per term is supported (no '...')");
    }
    if (term != 2) return bad_attr(n, "equation", "needs two inputs and an explicit '->' output");
    for (int t = 0; t < 3; t++) {
        terms[t][len[t]] = 0;
        for (int i = 0; i < len[t]; i++)
            if (strchr(terms[t] + i + 1, terms[t][i])) return bad_attr(n, "equation", "a letter repeated within a term (a diagonal)");
    }
    const char *a = terms[0], *b = terms[1], *o = terms[2];
    int r = len[2];
    char k = 0;
    for (int i = 0; i < len[0]; i++)
        if (strchr(b, a[i]) && !strchr(o, a[i])) {
            if (k) return bad_attr(n, "equation", "contracts more than one letter");
            k = a[i];
        }
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < len[t]; i++)
            if (!strchr(terms[1 - t], terms[t][i]) && !strchr(o, terms[t][i]))
                return bad_attr(n, "equation", "sums an axis of one input away");
    if (!k || r < 3 || len[0] != r || len[1] != r || a[0] != o[0] || b[0] != o[0])
        return bad_attr(n, "equation", "only batched matrix products that keep the batch axis first are supported");
    char ci = o[r - 2], cj = o[r - 1];
    if (!strchr(a, ci) || strchr(b, ci) || !strchr(b, cj) || strchr(a, cj))
        return bad_attr(n, "equation", "the output must end in A's free letter, then B's");
    for (int i = 0; i < r - 2; i++)
        if (!strchr(a, o[i]) || !strchr(b, o[i])) return bad_attr(n, "equation", "a leading output letter missing from an input");
    /* canonical positions: batch letters in the output's order, then (i, k) for A and (k, j) for B */
    for (int i = 0; i < r; i++) {
        char ca = a[i], cb = b[i];
        p->ein_a[i] = (int8_t)(ca == ci ? r - 2 : ca == k ? r - 1 : strchr(o, ca) - o);
        p->ein_b[i] = (int8_t)(cb == k ? r - 2 : cb == cj ? r - 1 : strchr(o, cb) - o);
    }
    p->ein_rank = r;
    return FTL_OK;
}

/* Two int64 attribute values narrowed to int after a range check (a cast first would let
 * 2^32 + 3 pass as 3). */
static ftl_status get_pair(nn_node *n, const char *name, int dflt, int *out) {
    int64_t v[2];
    int c;
    FTL_TRY(get_ints(n, name, 2, 2, v, &c));
    for (int i = 0; i < 2; i++) {
        if (c >= 0 && (v[i] < 0 || v[i] > 65536)) return bad_attr(n, name, "must be between 1 and 65536");
        out[i] = c < 0 ? dflt : (int)v[i];
    }
    return FTL_OK;
}

static ftl_status parse_spatial(nn_node *n, bool need_kernel) {
    nn_params *p = &n->p;
    int64_t v[8];
    int c;
    FTL_TRY(get_pair(n, "kernel_shape", 0, p->kernel));
    if (need_kernel && !nn_node_attr(n, "kernel_shape")) return bad_attr(n, "kernel_shape", "is required");
    FTL_TRY(get_pair(n, "strides", 1, p->stride));
    FTL_TRY(get_pair(n, "dilations", 1, p->dilation));
    FTL_TRY(get_ints(n, "pads", 4, 4, v, &c));
    for (int i = 0; i < 2; i++) {
        p->pad_begin[i] = c < 0 ? 0 : (int)v[i];
        p->pad_end[i] = c < 0 ? 0 : (int)v[i + 2];
        if (c >= 0 && (v[i] < 0 || v[i + 2] < 0 || v[i] > 65536 || v[i + 2] > 65536)) return bad_attr(n, "pads", "negative or huge padding");
    }
    for (int i = 0; i < 2; i++) {
        if (p->stride[i] < 1 || p->stride[i] > 65536) return bad_attr(n, "strides", "must be >= 1");
        if (p->dilation[i] < 1 || p->dilation[i] > 65536) return bad_attr(n, "dilations", "must be >= 1");
        if (need_kernel && (p->kernel[i] < 1 || p->kernel[i] > 65536)) return bad_attr(n, "kernel_shape", "must be >= 1");
    }
    const nn_attr *ap = nn_node_attr(n, "auto_pad");
    p->auto_pad[0] = 0;
    if (ap) {
        if (ap->type != NN_ATTR_STRING) return bad_attr(n, "auto_pad", "expected a string");
        if (strcmp(ap->s, "NOTSET") != 0 && strcmp(ap->s, "SAME_UPPER") != 0 && strcmp(ap->s, "SAME_LOWER") != 0 &&
            strcmp(ap->s, "VALID") != 0)
            return bad_attr(n, "auto_pad", "must be NOTSET, SAME_UPPER, SAME_LOWER or VALID");
        if (strcmp(ap->s, "NOTSET") != 0) snprintf(p->auto_pad, sizeof p->auto_pad, "%s", ap->s);
    }
    return FTL_OK;
}

static ftl_status check_arity_and_attrs(const nn_graph *g, const nn_node *n) {
    const op_info *info = info_of(n->op);
    if (n->n_in < info->min_in || n->n_in > info->max_in)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): has %d inputs, expected %d to %d", n->name, n->op_type, n->n_in,
                        info->min_in, info->max_in);
    if (n->n_out < info->min_out || n->n_out > info->max_out)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): has %d outputs, expected %d to %d", n->name, n->op_type,
                        n->n_out, info->min_out, info->max_out);
    for (int k = 0; k < info->min_in; k++)
        if (n->in[k] < 0)
            return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): required input %d is empty", n->name, n->op_type, k);
    if (n->out[0] < 0) return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): its output has no name", n->name, n->op_type);
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0 && n->op != NN_OP_DROPOUT && n->op != NN_OP_LAYERNORM && n->op != NN_OP_SPLIT) /* training outputs */
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): output %d ('%s') is not supported (inference "
                            "graphs use only the first output)", n->name, n->op_type, k, g->tensors[n->out[k]].name);
    for (int a = 0; a < n->n_attr; a++) {
        bool known = false;
        for (int k = 0; k < 8 && info->attrs[k]; k++)
            if (strcmp(info->attrs[k], n->attr[a].name) == 0) known = true;
        if (!known)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): unsupported attribute '%s'", n->name, n->op_type,
                            n->attr[a].name);
    }
    return FTL_OK;
}

static ftl_status parse_params(nn_graph *g, nn_node *n);

ftl_status nn_node_parse_params(nn_graph *g, nn_node *n) { return parse_params(g, n); }

ftl_status nn_node_reparse_params(nn_graph *g, nn_node *n) {
    parse_is_final = true;
    ftl_status st = parse_params(g, n);
    parse_is_final = false;
    return st;
}

/* ---- per-op parameters: one parser per op, found through the tables below (an op without one
 * has no parameters); a parser that reads constant inputs or the opset takes the graph ---- */

static ftl_status parse_conv(nn_node *n) {
    int64_t iv;
    FTL_TRY(parse_spatial(n, false));
    FTL_TRY(get_int(n, "group", 1, &iv));
    if (iv < 1 || iv > (1 << 20)) return bad_attr(n, "group", "must be >= 1");
    n->p.group = (int)iv;
    return FTL_OK;
}

static ftl_status parse_pool(nn_node *n) {
    nn_params *p = &n->p;
    int64_t iv;
    FTL_TRY(parse_spatial(n, true));
    FTL_TRY(get_int(n, "ceil_mode", 0, &iv));
    p->ceil_mode = iv != 0;
    FTL_TRY(get_int(n, "count_include_pad", 0, &iv));
    p->count_include_pad = iv != 0;
    FTL_TRY(get_int(n, "storage_order", 0, &iv));
    if (iv != 0) return bad_attr(n, "storage_order", "only 0 (row major) is supported");
    if (n->op == NN_OP_AVGPOOL && (p->dilation[0] != 1 || p->dilation[1] != 1))
        return bad_attr(n, "dilations", "dilated average pooling is not supported");
    return FTL_OK;
}

static ftl_status parse_batchnorm(nn_node *n) {
    nn_params *p = &n->p;
    int64_t iv;
    FTL_TRY(get_float(n, "epsilon", 1e-5f, &p->epsilon));
    FTL_TRY(get_int(n, "training_mode", 0, &iv));
    if (iv) return bad_attr(n, "training_mode", "only inference (0) is supported");
    FTL_TRY(get_int(n, "spatial", 1, &iv));
    if (iv != 1) return bad_attr(n, "spatial", "only spatial=1 is supported");
    if (p->epsilon < 0) return bad_attr(n, "epsilon", "must be >= 0");
    return FTL_OK;
}

/* Activations without attributes: the op names the function. */
static ftl_status parse_relu(nn_node *n) { n->p.act = (nn_act){NN_ACT_RELU, 0, 0}; return FTL_OK; }
static ftl_status parse_sigmoid(nn_node *n) { n->p.act = (nn_act){NN_ACT_SIGMOID, 0, 0}; return FTL_OK; }
static ftl_status parse_hardswish(nn_node *n) { n->p.act = (nn_act){NN_ACT_HARDSWISH, 0, 0}; return FTL_OK; }
static ftl_status parse_tanh(nn_node *n) { n->p.act = (nn_act){NN_ACT_TANH, 0, 0}; return FTL_OK; }
static ftl_status parse_sqrt(nn_node *n) { n->p.act = (nn_act){NN_ACT_SQRT, 0, 0}; return FTL_OK; }

static ftl_status parse_gelu(nn_node *n) {
    const nn_attr *a = nn_node_attr(n, "approximate");
    if (a && (a->type != NN_ATTR_STRING || (strcmp(a->s, "none") != 0 && strcmp(a->s, "tanh") != 0)))
        return bad_attr(n, "approximate", "expected 'none' (the erf form) or 'tanh'");
    n->p.act = (nn_act){a && strcmp(a->s, "tanh") == 0 ? NN_ACT_GELU_TANH : NN_ACT_GELU_ERF, 0, 0};
    return FTL_OK;
}

/* an activation when the exponent is a constant scalar */
static ftl_status parse_pow(const nn_graph *g, nn_node *n) {
    n->p.act = (nn_act){NN_ACT_POW, 1.0f, 0};
    return const_scalar(g, n, 1, "exponent", &n->p.act.alpha);
}

static ftl_status parse_layernorm(nn_node *n) {
    nn_params *p = &n->p;
    int64_t iv;
    FTL_TRY(get_int(n, "axis", -1, &iv));
    if (iv < -NN_MAX_RANK || iv >= NN_MAX_RANK) return bad_attr(n, "axis", "out of range");
    p->axis = (int)iv;
    FTL_TRY(get_float(n, "epsilon", 1e-5f, &p->epsilon));
    if (!(p->epsilon >= 0)) return bad_attr(n, "epsilon", "must be >= 0");
    return FTL_OK;
}

static ftl_status parse_split(const nn_graph *g, nn_node *n) {
    nn_params *p = &n->p;
    int64_t iv;
    FTL_TRY(get_int(n, "axis", 0, &iv));
    if (iv < -NN_MAX_RANK || iv >= NN_MAX_RANK) return bad_attr(n, "axis", "out of range");
    p->axis = (int)iv;
    int c;
    FTL_TRY(get_ints(n, "split", -1, NN_MAX_SPLIT, p->split, &c));
    if (c < 0) FTL_TRY(const_ints(g, n, 1, "split", NN_MAX_SPLIT, p->split, &c));
    if (p->deferred) return FTL_OK;
    if (c >= 0 && c != n->n_out)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (Split): %d split sizes for %d outputs", n->name, c, n->n_out);
    for (int k = 0; k < c; k++)
        if (p->split[k] < 0) return bad_attr(n, "split", "a negative size");
    p->n_split = c; /* -1: equal parts (num_outputs, when given, must be the number of outputs) */
    FTL_TRY(get_int(n, "num_outputs", n->n_out, &iv));
    if (iv != n->n_out) return bad_attr(n, "num_outputs", "differs from the number of outputs");
    return FTL_OK;
}

static ftl_status parse_softmax(const nn_graph *g, nn_node *n) {
    int64_t iv;
    FTL_TRY(get_int(n, "axis", g->opset >= 13 ? -1 : 1, &iv));
    if (g->opset < 13 && iv != -1)
        return bad_attr(n, "axis", "before opset 13 only axis -1 has the meaning of opset 13 (softmax over one axis)");
    if (iv < -NN_MAX_RANK || iv >= NN_MAX_RANK) return bad_attr(n, "axis", "out of range");
    n->p.axis = (int)iv;
    return FTL_OK;
}

static ftl_status parse_leakyrelu(nn_node *n) {
    n->p.act.kind = NN_ACT_LEAKYRELU;
    return get_float(n, "alpha", 0.01f, &n->p.act.alpha);
}

static ftl_status parse_hardsigmoid(nn_node *n) {
    n->p.act.kind = NN_ACT_HARDSIGMOID;
    FTL_TRY(get_float(n, "alpha", 0.2f, &n->p.act.alpha));
    return get_float(n, "beta", 0.5f, &n->p.act.beta);
}

static ftl_status parse_clip(const nn_graph *g, nn_node *n) {
    nn_params *p = &n->p;
    p->act = (nn_act){NN_ACT_CLIP, -FLT_MAX, FLT_MAX};
    FTL_TRY(get_float(n, "min", -FLT_MAX, &p->act.alpha));
    FTL_TRY(get_float(n, "max", FLT_MAX, &p->act.beta));
    FTL_TRY(const_scalar(g, n, 1, "min", &p->act.alpha));
    return const_scalar(g, n, 2, "max", &p->act.beta);
}

static ftl_status parse_reducemean(const nn_graph *g, nn_node *n) {
    nn_params *p = &n->p;
    int64_t iv;
    int c;
    FTL_TRY(get_ints(n, "axes", -1, NN_MAX_RANK, p->axes, &c));
    if (c < 0) FTL_TRY(const_ints(g, n, 1, "axes", NN_MAX_RANK, p->axes, &c));
    if (p->deferred) return FTL_OK;
    p->n_axes = c;
    FTL_TRY(get_int(n, "keepdims", 1, &iv));
    p->keepdims = iv != 0;
    FTL_TRY(get_int(n, "noop_with_empty_axes", 0, &iv));
    if (iv && c <= 0) return bad_attr(n, "noop_with_empty_axes", "a no-op ReduceMean is not supported");
    return FTL_OK;
}

static ftl_status parse_flatten(nn_node *n) {
    int64_t iv;
    FTL_TRY(get_int(n, "axis", 1, &iv));
    if (iv < -NN_MAX_RANK || iv > NN_MAX_RANK) return bad_attr(n, "axis", "is out of range"); /* before narrowing */
    n->p.axis = (int)iv;
    return FTL_OK;
}

static ftl_status parse_concat(nn_node *n) {
    int64_t iv;
    if (!nn_node_attr(n, "axis")) return bad_attr(n, "axis", "is required");
    FTL_TRY(get_int(n, "axis", 0, &iv));
    if (iv < -NN_MAX_RANK || iv > NN_MAX_RANK) return bad_attr(n, "axis", "is out of range");
    n->p.axis = (int)iv;
    return FTL_OK;
}

static ftl_status parse_reshape(const nn_graph *g, nn_node *n) {
    int64_t iv;
    FTL_TRY(get_int(n, "allowzero", 0, &iv));
    n->p.allowzero = iv != 0;
    if (!nn_is_const(g, n->in[1])) return defer(n, g, 1, "shape");
    if (g->tensors[n->in[1]].dtype != NN_I64 || g->tensors[n->in[1]].count > NN_MAX_RANK)
        return ftl_fail(FTL_E_FORMAT, "node '%s' (Reshape): the shape input must be int64 with at most %d values",
                        n->name, NN_MAX_RANK);
    return FTL_OK;
}

static ftl_status parse_squeeze(const nn_graph *g, nn_node *n) {
    nn_params *p = &n->p;
    int c;
    FTL_TRY(get_ints(n, "axes", -1, NN_MAX_RANK, p->axes, &c));
    if (c < 0) FTL_TRY(const_ints(g, n, 1, "axes", NN_MAX_RANK, p->axes, &c));
    if (p->deferred) return FTL_OK;
    if (c < 0 && n->op == NN_OP_UNSQUEEZE) return bad_attr(n, "axes", "is required");
    p->n_axes = c;
    return FTL_OK;
}

static ftl_status parse_transpose(nn_node *n) {
    int c;
    FTL_TRY(get_ints(n, "perm", -1, NN_MAX_RANK, n->p.axes, &c));
    n->p.n_axes = c;
    return FTL_OK;
}

static ftl_status parse_gemm(nn_node *n) {
    nn_params *p = &n->p;
    int64_t iv;
    FTL_TRY(get_float(n, "alpha", 1.0f, &p->alpha));
    FTL_TRY(get_float(n, "beta", 1.0f, &p->beta));
    FTL_TRY(get_int(n, "transA", 0, &iv));
    p->trans_a = iv != 0;
    FTL_TRY(get_int(n, "transB", 0, &iv));
    p->trans_b = iv != 0;
    return FTL_OK;
}

static ftl_status parse_pad(const nn_graph *g, nn_node *n) {
    nn_params *p = &n->p;
    const nn_attr *mode = nn_node_attr(n, "mode");
    if (mode && (mode->type != NN_ATTR_STRING || strcmp(mode->s, "constant") != 0))
        return bad_attr(n, "mode", "only 'constant' padding is supported");
    int c;
    FTL_TRY(get_ints(n, "pads", -1, 2 * NN_MAX_RANK, p->pads, &c));
    if (c < 0) FTL_TRY(const_ints(g, n, 1, "pads", 2 * NN_MAX_RANK, p->pads, &c));
    if (p->deferred) return FTL_OK;
    if (c < 0) return ftl_fail(FTL_E_FORMAT, "node '%s' (Pad): no pads given", n->name);
    p->n_pads = c;
    for (int i = 0; i < c; i++)
        if (p->pads[i] < -(1 << 20) || p->pads[i] > (1 << 20)) return bad_attr(n, "pads", "a pad beyond +-2^20");
    FTL_TRY(get_float(n, "value", 0.0f, &p->pad_value));
    FTL_TRY(const_scalar(g, n, 2, "constant value", &p->pad_value));
    if (n->n_in > 3 && n->in[3] >= 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Pad): the 'axes' input is not supported", n->name);
    return FTL_OK;
}

static ftl_status parse_shape(nn_node *n) {
    FTL_TRY(get_int(n, "start", 0, &n->p.start));
    return get_int(n, "end", INT64_MAX, &n->p.end);
}

static ftl_status parse_gather(nn_node *n) {
    int64_t iv;
    FTL_TRY(get_int(n, "axis", 0, &iv));
    if (iv < -NN_MAX_RANK || iv >= NN_MAX_RANK) return bad_attr(n, "axis", "out of range");
    n->p.axis = (int)iv;
    return FTL_OK;
}

static ftl_status parse_cast(nn_node *n) {
    int64_t iv;
    if (!nn_node_attr(n, "to")) return bad_attr(n, "to", "is required");
    FTL_TRY(get_int(n, "to", 0, &iv));
    if (iv < 1 || iv > 16) return bad_attr(n, "to", "not a numeric ONNX data type");
    n->p.cast_to = (int)iv;
    return FTL_OK;
}

static ftl_status parse_scatternd(nn_node *n) {
    const nn_attr *r = nn_node_attr(n, "reduction");
    if (r && (r->type != NN_ATTR_STRING || strcmp(r->s, "none") != 0))
        return bad_attr(n, "reduction", "only 'none' is supported");
    return FTL_OK;
}

static ftl_status parse_mod(nn_node *n) {
    int64_t iv;
    FTL_TRY(get_int(n, "fmod", 0, &iv));
    n->p.fmod = iv != 0;
    return FTL_OK;
}

static ftl_status parse_constantofshape(const nn_graph *g, nn_node *n) {
    const nn_attr *v = nn_node_attr(n, "value");
    if (v && (v->type != NN_ATTR_TENSOR || g->tensors[v->tensor].count != 1))
        return bad_attr(n, "value", "expected a one-element tensor");
    return FTL_OK;
}

static ftl_status parse_dropout(const nn_graph *g, nn_node *n) {
    if (n->n_in > 2 && n->in[2] >= 0) {
        /* training mode with a constant ratio of 0 (torch's F.dropout(p=0.0) in Swin) is the identity too */
        const nn_tensor *t = &g->tensors[n->in[2]], *r = n->in[1] >= 0 ? &g->tensors[n->in[1]] : NULL;
        bool ratio_zero = r && r->data && r->count == 1 &&
                          (r->dtype == NN_I64 ? ((int64_t *)r->data)[0] == 0 : ((float *)r->data)[0] == 0.0f);
        if (!ratio_zero &&
            (!t->data || t->count != 1 || (t->dtype == NN_I64 ? ((int64_t *)t->data)[0] != 0 : ((float *)t->data)[0] != 0)))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Dropout): training_mode must be a constant false (or the "
                            "ratio a constant 0)", n->name);
    }
    return FTL_OK;
}

/* The parsers by op: from the attributes alone, or also from the graph (constant inputs, opset). */
static ftl_status (*const parse_from_attrs[NN_OP_COUNT])(nn_node *n) = {
    [NN_OP_CONV] = parse_conv, [NN_OP_MAXPOOL] = parse_pool, [NN_OP_AVGPOOL] = parse_pool,
    [NN_OP_BATCHNORM] = parse_batchnorm, [NN_OP_RELU] = parse_relu, [NN_OP_SIGMOID] = parse_sigmoid,
    [NN_OP_HARDSWISH] = parse_hardswish, [NN_OP_TANH] = parse_tanh, [NN_OP_SQRT] = parse_sqrt, [NN_OP_GELU] = parse_gelu,
    [NN_OP_LAYERNORM] = parse_layernorm, [NN_OP_EINSUM] = parse_einsum, [NN_OP_LEAKYRELU] = parse_leakyrelu,
    [NN_OP_HARDSIGMOID] = parse_hardsigmoid, [NN_OP_FLATTEN] = parse_flatten, [NN_OP_CONCAT] = parse_concat,
    [NN_OP_TRANSPOSE] = parse_transpose, [NN_OP_GEMM] = parse_gemm, [NN_OP_SHAPE] = parse_shape,
    [NN_OP_GATHER] = parse_gather, [NN_OP_CAST] = parse_cast, [NN_OP_SCATTERND] = parse_scatternd,
    [NN_OP_MOD] = parse_mod,
};
static ftl_status (*const parse_from_graph[NN_OP_COUNT])(const nn_graph *g, nn_node *n) = {
    [NN_OP_POW] = parse_pow, [NN_OP_SPLIT] = parse_split, [NN_OP_SOFTMAX] = parse_softmax,
    [NN_OP_CLIP] = parse_clip, [NN_OP_REDUCEMEAN] = parse_reducemean, [NN_OP_RESHAPE] = parse_reshape,
    [NN_OP_SQUEEZE] = parse_squeeze, [NN_OP_UNSQUEEZE] = parse_squeeze, [NN_OP_PAD] = parse_pad,
    [NN_OP_CONSTANTOFSHAPE] = parse_constantofshape, [NN_OP_DROPOUT] = parse_dropout,
};

static ftl_status parse_params(nn_graph *g, nn_node *n) {
    FTL_TRY(check_arity_and_attrs(g, n));
    nn_params *p = &n->p;
    nn_params kept = *p; /* FakeQuantize's parameters come from the quantized ops it replaced (qdq.c) */
    memset(p, 0, sizeof *p);
    p->n_axes = -1;
    if (n->op == NN_OP_FAKEQUANT) {
        p->q_scale = kept.q_scale;
        p->q_zero = kept.q_zero;
        p->q_lo = kept.q_lo;
        p->q_hi = kept.q_hi;
    }
    if (parse_from_attrs[n->op]) return parse_from_attrs[n->op](n);
    if (parse_from_graph[n->op]) return parse_from_graph[n->op](g, n);
    return FTL_OK;
}
