/* int8 quantization policy and weight quantization (see quantize.h). */
#include "nn/ir/quantize.h"
#include "util/alloc.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool conv_shape_ok(const nn_graph *g, const nn_node *n) {
    if (n->dead || n->op != NN_OP_CONV || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    if (nn_is_const(g, n->in[0]) || !nn_is_const(g, n->in[1]) || !g->tensors[n->in[1]].data) return false;
    return g->tensors[n->in[0]].shape.rank == 4 && g->tensors[n->in[1]].shape.rank == 4;
}

/* The image stem: a convolution of the 3 (or 1) channels of pixels. */
static bool is_stem(const nn_graph *g, const nn_node *n) {
    return conv_shape_ok(g, n) && g->tensors[n->in[0]].shape.d[1] < 4;
}

bool nn_int8_conv_eligible(const nn_graph *g, const nn_node *n) {
    if (!conv_shape_ok(g, n) || is_stem(g, n)) return false;
    /* Nor a depthwise convolution right after the stem: each of its outputs reads one channel of the
     * stem's, whose channels span very different ranges under one scale (MobileNetV2's: mean feature
     * cosine to fp32 0.991 with it in int8, 0.995 without), and it is one of the cheapest. A full
     * convolution there mixes the channels and is among the most expensive (Xception's 3x3 32 -> 64 at
     * 147x147: 11% of its int8 time in fp32), so it runs in int8. */
    bool depthwise = n->p.group > 1 && n->p.group == g->tensors[n->in[0]].shape.d[1];
    for (int i = 0; depthwise && i < g->n_nodes; i++)
        if (g->nodes[i].n_out > 0 && g->nodes[i].out[0] == n->in[0] && is_stem(g, &g->nodes[i])) return false;
    return true;
}

bool nn_int8_linear_eligible(const nn_graph *g, const nn_node *n) {
    if (n->dead || (n->op != NN_OP_GEMM && n->op != NN_OP_MATMUL) || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0)
        return false;
    if (n->op == NN_OP_GEMM && n->p.trans_a) return false;
    const nn_tensor *w = &g->tensors[n->in[1]];
    return !nn_is_const(g, n->in[0]) && nn_is_const(g, n->in[1]) && w->data && w->dtype == NN_F32 && w->shape.rank == 2;
}

bool nn_int8_eligible(const nn_graph *g, const nn_node *n) {
    return nn_int8_conv_eligible(g, n) || nn_int8_linear_eligible(g, n);
}

int nn_int8_watched(const nn_graph *g, bool *watch) {
    memset(watch, 0, (size_t)g->n_tensors * sizeof *watch);
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (nn_int8_eligible(g, &g->nodes[i]) && !watch[g->nodes[i].in[0]]) {
            watch[g->nodes[i].in[0]] = true;
            count++;
        }
    return count;
}

/* Whether t is read, and only as the data input of convolutions that is_int8 accepts (no other input,
 * sum post-op or graph output). */
static bool read_only_as_conv_data(const nn_graph *g, int t, bool (*is_int8)(const nn_graph *, const nn_node *)) {
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_post; k++)
            if (n->post[k].kind == NN_POST_SUM && n->post[k].sum_tensor == t) return false;
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] != t) continue;
            if (k != 0 || !is_int8(g, n)) return false;
            any = true;
        }
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] == t) return false;
    return any;
}

/* Whether every reader of t reads it as the data input of an int8 convolution or matrix product. */
static bool read_only_by_int8_convs(const nn_graph *g, int t, const float *scale) {
    return scale[t] > 0 && read_only_as_conv_data(g, t, nn_int8_eligible);
}

ftl_status nn_int8_tensor_arrays(const nn_graph *g, char *const *names, const float *scales, const bool *is_unsigned,
                                 int count, bool allow_missing, float *scale, bool *unsigned_out, bool *written) {
    size_t n = (size_t)g->n_tensors;
    memset(scale, 0, n * sizeof *scale);
    memset(unsigned_out, 0, n * sizeof *unsigned_out);
    memset(written, 0, n * sizeof *written);
    for (int k = 0; k < count; k++) {
        int t = nn_graph_find(g, names[k]);
        if (t < 0 && allow_missing) continue;
        if (t < 0)
            return ftl_fail(FTL_E_FORMAT, "int8 scales: tensor '%s' is not in this model's graph (scales calibrated for "
                            "another model or cut)", names[k]);
        if (!(scales[k] > 0) || !isfinite(scales[k]))
            return ftl_fail(FTL_E_FORMAT, "int8 scales: tensor '%s' has scale %g; a scale must be positive and finite",
                            names[k], (double)scales[k]);
        scale[t] = scales[k];
        unsigned_out[t] = is_unsigned[k];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *c = &g->nodes[i];
        if (!nn_int8_conv_eligible(g, c) || !(scale[c->in[0]] > 0)) continue;
        bool sum = false;
        for (int k = 0; k < c->n_post; k++) sum |= c->post[k].kind == NN_POST_SUM;
        int y = c->out[0];
        if (!sum && y >= 0 && scale[y] > 0 && read_only_by_int8_convs(g, y, scale)) written[y] = true;
    }
    /* a ReLU whose u8 output only int8 nodes read is that output's conversion: u8 saturates at 0 */
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *r = &g->nodes[i];
        if (r->dead || r->op != NN_OP_RELU || r->p.act.kind != NN_ACT_RELU || r->n_post || r->n_in < 1) continue;
        int y = r->out[0];
        if (y >= 0 && unsigned_out[y] && read_only_by_int8_convs(g, y, scale)) written[y] = true;
    }
    return FTL_OK;
}

void nn_quantize_conv_weights(const float *w, int64_t m, int64_t per, float input_scale, const float *bias,
                              int8_t *q, float *out_scales, float *q_bias) {
    for (int64_t o = 0; o < m; o++) {
        const float *row = w + o * per;
        float mx = 0;
        for (int64_t i = 0; i < per; i++) mx = fmaxf(mx, fabsf(row[i]));
        float ws = mx > 0 ? mx / 127.0f : 1.0f;
        for (int64_t i = 0; i < per; i++) {
            float v = nearbyintf(row[i] / ws);
            q[o * per + i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        out_scales[o] = input_scale * ws;
        q_bias[o] = bias ? bias[o] / out_scales[o] : 0.0f;
    }
}

void nn_quantize_conv_weights_with(const float *w, int64_t m, int64_t per, float input_scale, const float *weight_scale,
                                   const float *bias, int8_t *q, float *out_scales, float *q_bias) {
    for (int64_t o = 0; o < m; o++) {
        const float *row = w + o * per;
        float ws = weight_scale[o];
        for (int64_t i = 0; i < per; i++) {
            float v = nearbyintf(row[i] / ws);
            q[o * per + i] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
        }
        out_scales[o] = input_scale * ws;
        q_bias[o] = bias ? bias[o] / out_scales[o] : 0.0f;
    }
}

float nn_int8_scale_of(double threshold, bool is_unsigned) {
    if (!(threshold > 0)) return 1.0f; /* an all-zero tensor: any scale gives zeros */
    return (float)(threshold / (is_unsigned ? 255.0 : 127.0));
}

int nn_int8_linear_out_axis(const nn_graph *g, const nn_node *n) {
    if (!nn_int8_linear_eligible(g, n)) return -2;
    return n->op == NN_OP_GEMM && n->p.trans_b ? 0 : 1;
}

/* A convolution or matrix product with the model's own integer weights (scales along its output
 * channels, or one for all), which runs int8 on them. */
bool nn_qdq_int8_node(const nn_graph *g, const nn_node *n) {
    if (n->dead || n->n_in < 2 || n->in[1] < 0) return false;
    const nn_tensor *w = &g->tensors[n->in[1]];
    if (!w->weight_scale || !w->data) return false;
    if (n->op == NN_OP_CONV) return w->shape.rank == 4 && w->weight_scale_axis <= 0;
    int axis = nn_int8_linear_out_axis(g, n);
    return axis >= 0 && (n->op != NN_OP_GEMM || n->p.alpha == 1.0f) &&
           (w->weight_scale_axis == -1 || w->weight_scale_axis == axis);
}

static bool read_only_by_model_int8_convs(const nn_graph *g, int t) { return read_only_as_conv_data(g, t, nn_qdq_int8_node); }

int nn_qdq_fold_fake_quant(nn_graph *g) {
    int folded = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *f = &g->nodes[i];
        if (f->dead || f->op != NN_OP_FAKEQUANT) continue;
        int t = f->out[0], x = f->in[0], int8_convs = 0;
        bool float_conv = false;
        for (int j = 0; j < g->n_nodes; j++) {
            const nn_node *n = &g->nodes[j];
            bool product = n->op == NN_OP_GEMM || n->op == NN_OP_MATMUL;
            if (n->dead || (n->op != NN_OP_CONV && !product) || n->n_in < 1 || n->in[0] != t) continue;
            if (nn_qdq_int8_node(g, n)) int8_convs++;
            else if (n->op == NN_OP_CONV || nn_int8_linear_eligible(g, n)) float_conv = true;
        }
        if (!int8_convs || float_conv) continue; /* a float convolution must see the float value */
        nn_tensor *tx = &g->tensors[x], *tt = &g->tensors[t];
        bool is_unsigned = f->p.q_lo == 0, x_read_by_float_node = false;
        for (int j = 0; j < g->n_nodes; j++) { /* such a node must keep reading x's float value */
            const nn_node *r = &g->nodes[j];
            if (j != i && !r->dead && r->n_in > 0 && r->in[0] == x && !nn_qdq_int8_node(g, r) &&
                (r->op == NN_OP_CONV || nn_int8_linear_eligible(g, r)))
                x_read_by_float_node = true;
        }
        if (!read_only_by_model_int8_convs(g, t) || tx->int8_scale > 0 || nn_is_const(g, x) || x_read_by_float_node) {
            /* other ops read the value too, or x has another int8 form: the step stays, and the convolutions
             * read its output's integers (exactly the values it holds) */
            tt->int8_scale = f->p.q_scale;
            tt->int8_zero = f->p.q_zero;
            tt->int8_unsigned = is_unsigned;
            continue;
        }
        /* the convolutions' own conversion to int8 rounds and saturates as the FakeQuantize would, so it
         * goes: they read x, converted once (or written as int8 by x's producer) */
        for (int j = 0; j < g->n_nodes; j++)
            if (!g->nodes[j].dead && g->nodes[j].in[0] == t) g->nodes[j].in[0] = x; /* every reader is such a node */
        f->dead = true;
        tx->int8_scale = f->p.q_scale;
        tx->int8_zero = f->p.q_zero;
        tx->int8_unsigned = is_unsigned;
        folded++;
    }
    return folded;
}

void nn_qdq_plan_int8(const nn_graph *g, float *scale, bool *is_unsigned, bool *written, int *zero) {
    for (int t = 0; t < g->n_tensors; t++) {
        if (!(g->tensors[t].int8_scale > 0)) continue;
        scale[t] = g->tensors[t].int8_scale;
        is_unsigned[t] = g->tensors[t].int8_unsigned;
        zero[t] = g->tensors[t].int8_zero;
    }
    /* an int8 convolution whose output only such convolutions read writes it requantized */
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *c = &g->nodes[i];
        if (!nn_qdq_int8_node(g, c) || !(scale[c->in[0]] > 0)) continue;
        bool sum = false;
        for (int k = 0; k < c->n_post; k++) sum |= c->post[k].kind == NN_POST_SUM;
        int y = c->out[0];
        if (!sum && y >= 0 && scale[y] > 0 && read_only_by_model_int8_convs(g, y)) written[y] = true;
    }
}
