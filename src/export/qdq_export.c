/* QDQ around the int8 convolutions of an exported backbone (see qdq_export.h). */
#include "export/qdq_export.h"
#include "nn/ir/quantize.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* The float values of an initializer (raw little-endian or float_data), or NULL. */
static const float *init_floats(const Onnx__TensorProto *t, int64_t count) {
    if (!t || !t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return NULL;
    if (t->has_raw_data && t->raw_data.len == (size_t)count * sizeof(float)) return (const float *)t->raw_data.data;
    if (!t->has_raw_data && t->n_float_data == (size_t)count) return t->float_data;
    return NULL;
}

/* Q -> DQ of `x` with one scale and a zero point of 0 (u8 or s8); returns the DQ output. The nodes
 * go to `out` (the backbone's order), not the builder's list. */
static const char *qdq_pair(onnx_builder *b, const char *x, float scale, bool is_unsigned, Onnx__NodeProto **out,
                            size_t *n_out) {
    const char *s = ob_scalar_f32(b, "int8_scale", scale);
    uint8_t zero = 0;
    const char *z = ob_const(b, is_unsigned ? "int8_zero_u8" : "int8_zero_s8",
                             is_unsigned ? ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 : ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
                             NULL, 0, &zero, 1);
    const char *q = ob_fresh_name(b, "quantized"), *dq = ob_fresh_name(b, "dequantized");
    size_t mark = b->n_nodes;
    out[(*n_out)++] = ob_node(b, "QuantizeLinear", (const char *[]){x, s, z}, 3, &q, 1);
    out[(*n_out)++] = ob_node(b, "DequantizeLinear", (const char *[]){q, s, z}, 3, &dq, 1);
    b->n_nodes = mark; /* placed in the backbone's list by the caller */
    return dq;
}

/* Weights w (a float initializer of rank >= 2) as int8 per output channel along `axis` (0: rows
 * [outs, ...], as convolutions and Gemm with transB hold them; 1: columns [k, outs], as MatMul does) by
 * ftl's rule (nn_quantize_conv_weights: symmetric, max|w| / 127, an all-zero channel at scale 1), behind
 * a DequantizeLinear along that axis; returns its output. */
static ftl_status weights_dq(onnx_builder *b, const Onnx__NodeProto *node, const Onnx__TensorProto *w, int axis,
                             const char *model_path, Onnx__NodeProto **out, size_t *n_out, const char **name) {
    int64_t count = 1;
    for (size_t d = 0; d < w->n_dims; d++) count *= w->dims[d];
    const float *v = w->n_dims >= 2 && w->dims[0] > 0 && w->dims[1] > 0 ? init_floats(w, count) : NULL;
    if (!v || (axis == 1 && w->n_dims != 2))
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: int8 export: the weights '%s' of node '%s' are not a float initializer",
                        model_path, w->name, node->name ? node->name : "?");
    int64_t m = w->dims[axis], per = count / m;
    float *rows = ftl_xmalloc((size_t)count * sizeof *rows); /* [m, per]: each output channel's weights */
    for (int64_t o = 0; o < m; o++)
        for (int64_t i = 0; i < per; i++) rows[o * per + i] = axis == 0 ? v[o * per + i] : v[i * m + o];
    int8_t *q = ftl_xmalloc((size_t)count), *qt = ftl_xmalloc((size_t)count);
    float *scales = ftl_xmalloc((size_t)m * sizeof *scales), *unused_bias = ftl_xmalloc((size_t)m * sizeof *unused_bias);
    nn_quantize_conv_weights(rows, m, per, 1.0f, NULL, q, scales, unused_bias); /* input scale 1: scales = weight scales */
    for (int64_t o = 0; o < m; o++) /* back to the initializer's layout */
        for (int64_t i = 0; i < per; i++) qt[axis == 0 ? o * per + i : i * m + o] = q[o * per + i];
    const char *qn = ob_const(b, "int8_weights", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, w->dims, (int)w->n_dims, qt,
                              (size_t)count);
    const char *sn = ob_const_f32(b, "int8_weight_scales", &m, 1, scales);
    int8_t *zeros = ftl_xcalloc((size_t)m, 1);
    const char *zn = ob_const(b, "int8_weight_zero", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &m, 1, zeros, (size_t)m);
    free(zeros);
    free(rows);
    free(q);
    free(qt);
    free(scales);
    free(unused_bias);
    const char *dq = ob_fresh_name(b, "dequantized_weights");
    size_t mark = b->n_nodes;
    Onnx__NodeProto *n = ob_node(b, "DequantizeLinear", (const char *[]){qn, sn, zn}, 3, &dq, 1);
    ob_attr_int(b, n, "axis", axis);
    b->n_nodes = mark;
    out[(*n_out)++] = n;
    *name = dq;
    return FTL_OK;
}

/* The axis of a node's output channels in its weights (input 1), or -1 when ftl runs it in float:
 * Conv (0), Gemm (0 with transB, else 1; not with transA), MatMul by a rank-2 initializer (1). */
static int weight_axis(const backbone_graph *bg, const Onnx__NodeProto *n) {
    if (!n->op_type || n->n_input < 2) return -1;
    const Onnx__TensorProto *w = backbone_graph_init(bg, n->input[1]);
    if (strcmp(n->op_type, "Conv") == 0) return 0;
    if (strcmp(n->op_type, "MatMul") == 0) return w && w->n_dims == 2 ? 1 : -1;
    if (strcmp(n->op_type, "Gemm") != 0) return -1;
    const Onnx__AttributeProto *ta = ob_attr_find(n, "transA"), *tb = ob_attr_find(n, "transB");
    if (ta && ta->i) return -1;
    return tb && tb->i ? 0 : 1;
}

ftl_status qdq_export_insert(onnx_builder *b, backbone_graph *bg, const ftl_nn_int8_scales *scales,
                             const char *model_path, int *convs) {
    *convs = 0;
    ob_table table = {0}, done = {0}; /* tensor -> index in scales; tensor -> index of its DQ name */
    for (int i = 0; i < scales->count; i++) ob_table_put(&table, scales->names[i], i);
    const char **dq_names = ob_alloc(b, ((size_t)scales->count + 1) * sizeof *dq_names);
    /* at most three new nodes per node (Q, DQ, the weights' DQ) */
    Onnx__NodeProto **nodes = ftl_xmalloc((4 * bg->n_nodes + 1) * sizeof *nodes);
    size_t n = 0;
    ftl_status st = FTL_OK;
    for (size_t i = 0; i < bg->n_nodes && st == FTL_OK; i++) {
        Onnx__NodeProto *node = bg->nodes[i];
        int axis = weight_axis(bg, node), k = axis >= 0 ? ob_table_get(&table, node->input[0]) : -1;
        if (k >= 0) {
            const Onnx__TensorProto *w = backbone_graph_init(bg, node->input[1]);
            const char *wdq = NULL;
            st = w ? weights_dq(b, node, w, axis, model_path, nodes, &n, &wdq)
                   : ftl_fail(FTL_E_UNSUPPORTED, "%s: int8 export: the weights '%s' of node '%s' are not an initializer",
                              model_path, node->input[1], node->name ? node->name : "?");
            if (st != FTL_OK) break;
            if (ob_table_get(&done, node->input[0]) < 0) { /* one pair per tensor, before its first int8 reader */
                dq_names[k] = qdq_pair(b, node->input[0], scales->scale[k], scales->is_unsigned[k], nodes, &n);
                ob_table_put(&done, node->input[0], k);
            }
            node->input[0] = (char *)dq_names[k];
            node->input[1] = (char *)wdq;
            ++*convs;
        }
        nodes[n++] = node;
    }
    ob_table_free(&table);
    ob_table_free(&done);
    if (st != FTL_OK) {
        free(nodes);
        return st;
    }
    free(bg->nodes);
    bg->nodes = nodes;
    bg->n_nodes = n;
    return FTL_OK;
}
