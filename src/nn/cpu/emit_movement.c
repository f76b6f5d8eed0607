/* oneDNN CPU backend: one emitter per op. Convolutions let oneDNN choose blocked layouts
 * (format `any`); other ops work on whatever layout their input already has, so activations stay
 * blocked from conv to conv. Layout-sensitive ops (reshapes, Gemm, Pad, Transpose) reorder to
 * plain row-major first. */
#include "nn/cpu/cpu_plan.h"
#include "nn/ir/quantize.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

static void label_of(const nn_node *n, char *buf, size_t size) { snprintf(buf, size, "%s (%s)", n->name, n->op_type); }

static void dims_of(const nn_shape *s, dnnl_dims_t d) {
    for (int i = 0; i < s->rank; i++) d[i] = s->d[i];
}

static void any_md(dnnl_memory_desc_t *md, const nn_shape *s, dnnl_data_type_t dt) {
    dnnl_dims_t d;
    dims_of(s, d);
    dnnl_memory_desc_init_by_tag(md, s->rank, d, dt, dnnl_format_tag_any);
}

static const nn_shape *shape_of(const nn_graph *g, int t) { return &g->tensors[t].shape; }

/* A fresh value for the node's output in layout md, in a new buffer. */
static int new_output(nn_plan *p, int t, const dnnl_memory_desc_t *md) {
    int b = cpu_new_buf(p, 0, p->last_node[t]);
    int v = cpu_new_value(p, md, b);
    cpu_bind(p, t, v);
    return v;
}

/* Output value in md that reuses src's buffer when nothing later reads src, else a new buffer. */
static int inplace_output(nn_plan *p, int t, int src, const dnnl_memory_desc_t *md) {
    if (!cpu_can_overwrite(p, src) || dnnl_memory_desc_get_size(md) > p->bufs[p->vals[src].buf].size) return new_output(p, t, md);
    int v = cpu_new_value(p, md, p->vals[src].buf);
    cpu_bind(p, t, v);
    return v;
}

/* A layout of plain strides (any order, offset), no blocks. */
static bool strided_md(const dnnl_memory_desc_t *md) {
    return md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 0;
}

/* The same dims and strides in row-major order with no offset. */
static bool row_major_md(const dnnl_memory_desc_t *md) {
    if (!strided_md(md) || md->offset0 != 0) return false;
    int64_t stride = 1;
    for (int i = md->ndims - 1; i >= 0; i--) {
        if (md->dims[i] != 1 && md->format_desc.blocking.strides[i] != stride) return false;
        stride *= md->dims[i];
    }
    return true;
}

static ftl_status fail_node(const nn_node *n, const char *what) {
    return ftl_fail_context(FTL_E_UNSUPPORTED, "node '%s' (%s): %s", n->name, n->op_type, what);
}

/* The Winograd implementation with 4x4 output tiles when oneDNN offers it (it lists the 2x3 one
 * first; 4x3 measured 5-10% faster on ResNet's 56x56 and 28x28 layers), else its first. */
/* The primitive descriptor of an op descriptor, with the post-ops of `fused` (NULL: none) and an
 * optional leading negation; failures name the node. */
static ftl_status node_pd(nn_plan *p, const nn_node *n, const void *desc, const nn_node *fused, bool negate,
                          const char *what, dnnl_primitive_desc_t *pd) {
    dnnl_primitive_attr_t attr;
    FTL_TRY(cpu_make_attr(fused, &attr, negate));
    dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, attr, p->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return ftl_fail_context(cpu_check(s, what), "node '%s' (%s)", n->name, n->op_type);
    return FTL_OK;
}

static dnnl_status_t winograd_desc(nn_plan *p, const dnnl_convolution_desc_t *cd, dnnl_primitive_attr_t attr,
                                   dnnl_primitive_desc_t *pd) {
    dnnl_primitive_desc_iterator_t it;
    dnnl_status_t s = dnnl_primitive_desc_iterator_create(&it, cd, attr, p->engine, NULL);
    if (s != dnnl_success) return s;
    *pd = NULL;
    do {
        dnnl_primitive_desc_t cand = dnnl_primitive_desc_iterator_fetch(it);
        const char *impl = NULL;
        dnnl_primitive_desc_query(cand, dnnl_query_impl_info_str, 0, &impl);
        bool tiles4 = impl && strstr(impl, "wino_4x3");
        if (!*pd || tiles4) {
            if (*pd) dnnl_primitive_desc_destroy(*pd);
            *pd = cand;
        } else {
            dnnl_primitive_desc_destroy(cand);
        }
        if (tiles4) break;
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return *pd ? dnnl_success : dnnl_unimplemented;
}

static dnnl_data_type_t int8_type(const nn_plan *p, int t) { return p->int8_unsigned[t] ? dnnl_u8 : dnnl_s8; }

/* The node's weights and bias as an int8 convolution takes them (see nn_quantize_conv_weights). */
typedef struct int8_conv_consts {
    int8_t *weights;
    float *bias, *scales;   /* bias over (input scale x weight scale); the output scales */
    float act_scale;        /* the last activation's result times this (requantization) */
} int8_conv_consts;

static void int8_conv_consts_free(int8_conv_consts *q) {
    free(q->weights);
    free(q->bias);
    free(q->scales);
}

static bool has_sum_post(const nn_node *n) {
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_SUM) return true;
    return false;
}

static bool has_act_post(const nn_node *n) {
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_ACT) return true;
    return false;
}

/* Whether the int8 convolution n writes its output requantized (u8/s8 at the output's scale). */
static bool writes_int8(const nn_plan *p, const nn_node *n) {
    int y = n->out[0];
    return p->int8_written[y] && p->int8_scale[y] > 0 && !has_sum_post(n);
}

static void int8_conv_consts_make(const nn_plan *p, const nn_graph *g, const nn_node *n, int64_t m, int8_conv_consts *q) {
    const nn_tensor *w = &g->tensors[n->in[1]];
    int64_t per = nn_shape_count(&w->shape) / m;
    float sx = p->int8_scale[n->in[0]];
    bool requant = writes_int8(p, n), act = has_act_post(n);
    float sy = requant ? p->int8_scale[n->out[0]] : 1.0f;
    q->weights = ftl_xmalloc((size_t)(m * per));
    q->bias = ftl_xmalloc((size_t)m * sizeof *q->bias);
    q->scales = ftl_xmalloc((size_t)m * sizeof *q->scales);
    const float *bias = n->n_in > 2 && n->in[2] >= 0 ? g->tensors[n->in[2]].data : NULL;
    if (w->weight_scale) nn_quantize_conv_weights_with(w->data, m, per, sx, w->weight_scale, bias, q->weights, q->scales, q->bias);
    else nn_quantize_conv_weights(w->data, m, per, sx, bias, q->weights, q->scales, q->bias);
    /* requantized: without an activation the output scales divide by the output's scale; with one,
     * the activation's result is scaled (it must see real values) */
    for (int64_t o = 0; requant && !act && o < m; o++) q->scales[o] /= sy;
    q->act_scale = requant && act ? 1.0f / sy : 1.0f;
}

static ftl_status emit_conv_as(nn_plan *p, nn_graph *g, const nn_node *n, bool q, bool *no_int8_kernel);

/* The node index of the 3x3 depthwise convolution (stride 1 or 2, padding 1 all round, activations
 * only) that alone reads the output of 1x1 convolution n; -1 when there is none. */
static int depthwise_reader(const nn_graph *g, const nn_node *n) {
    const nn_params *pp = &n->p;
    if (n->op != NN_OP_CONV || n->dead || pp->group != 1 || pp->kernel[0] != 1 || pp->kernel[1] != 1 ||
        pp->stride[0] != 1 || pp->stride[1] != 1 || pp->pad_begin[0] || pp->pad_begin[1] || pp->pad_end[0] ||
        pp->pad_end[1] || has_sum_post(n) || nn_is_const(g, n->in[0]))
        return -1;
    int t = n->out[0], slot, found = nn_graph_sole_reader(g, t, &slot);
    if (found < 0 || slot != 0) return -1;
    const nn_node *d = &g->nodes[found];
    const nn_params *dp = &d->p;
    int64_t c = shape_of(g, t)->d[1];
    if (c < nn_cpu_depthwise_min_expansion() * shape_of(g, n->in[0])->d[1]) return -1; /* the graph's flag agrees */
    if (d->op != NN_OP_CONV || dp->group != c || shape_of(g, d->out[0])->d[1] != c || dp->kernel[0] != 3 ||
        dp->kernel[1] != 3 || dp->stride[0] != dp->stride[1] || (dp->stride[0] != 1 && dp->stride[0] != 2) ||
        dp->dilation[0] != 1 || dp->dilation[1] != 1 || has_sum_post(d))
        return -1;
    for (int i = 0; i < 2; i++)
        if (dp->pad_begin[i] != 1 || dp->pad_end[i] != 1) return -1;
    return found;
}

int nn_cpu_depthwise_min_expansion(void) { return __builtin_cpu_supports("avx512f") ? 1 : 4; }

bool nn_cpu_blocked_images(const nn_graph *g) {
    if (!__builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx512f") || !cpu_switch_on("FTL_NN_BLOCKED_IMAGES"))
        return false;
    bool convs = false;
    for (int i = 0; i < g->n_nodes && !convs; i++) convs = !g->nodes[i].dead && g->nodes[i].op == NN_OP_CONV;
    return convs && !nn_graph_reads_channels_last(g);
}

/* fp32 only: oneDNN 2.6 fuses in fp32 (int8 and bf16 plans keep their own kernels), in the blocked
 * layout of the vector width (nChw16c with AVX-512, nChw8c with AVX2: MobileNetV2 +7% over the same
 * layout unfused on a Zen 3, +12% over channels-last; with AVX2 only expanding pairs, see
 * nn_cpu_depthwise_min_expansion). */
bool cpu_depthwise_fusion_on(const nn_plan *p) {
    return p->precision == NN_PREC_F32 && !p->int8_scale && !p->observe_fn && cpu_switch_on("FTL_NN_DEPTHWISE_FUSION") &&
           __builtin_cpu_supports("avx2"); /* AVX-512 CPUs have it too */
}

int cpu_depthwise_pairs(const nn_plan *p, const nn_graph *g) {
    if (!cpu_depthwise_fusion_on(p)) return 0;
    int pairs = 0;
    for (int i = 0; i < g->n_nodes; i++) pairs += depthwise_reader(g, &g->nodes[i]) >= 0;
    return pairs;
}

/* The depthwise reader of n when the plan fuses it here (same micro-batch, not taken yet). */
static int depthwise_follower(const nn_plan *p, const nn_graph *g, const nn_node *n) {
    if (!p->depthwise_pairs || !p->blocked_layout || cpu_conv_layout(p) != cpu_blocked_tag()) return -1;
    int d = depthwise_reader(g, n);
    if (d < 0 || p->node_fused[d] != -1 || (p->node_mb && p->node_mb[d] != p->node_mb[p->cur_node])) return -1;
    return d;
}

/* 1x1 convolution n with the depthwise convolution dw fused as oneDNN's post-op: the expanded
 * tensor between them (MobileNetV2's 6x expansion) is consumed tile by tile from cache instead of
 * written out. In nChw16c (nChw8c on AVX2): oneDNN 2.6's fused kernel (jit_1x1 + jit_uni_dw) accepts
 * channels-last too but writes NaNs there. *done is false, nothing emitted, when oneDNN has no fused kernel for the
 * pair (its "ref_fused" runs them one after the other through a scratch buffer: no gain). */
static ftl_status emit_conv_depthwise(nn_plan *p, nn_graph *g, const nn_node *n, int dw_node, bool *done) {
    *done = false;
    const nn_node *dw = &g->nodes[dw_node];
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ms = shape_of(g, n->out[0]);
    int64_t m = ms->d[1], c = xs->d[1];
    dnnl_dims_t sd, md_dims, wd = {m, c, 1, 1}, dwd = {m, 1, 1, 3, 3}, bd = {m};
    dims_of(xs, sd);
    dims_of(ms, md_dims);
    dnnl_memory_desc_t src, wei_any, wei_plain, bias_md, mid, dw_plain;
    dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, cpu_blocked_tag());
    dnnl_memory_desc_init_by_tag(&wei_any, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei_plain, 4, wd, dnnl_f32, dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&dw_plain, 5, dwd, dnnl_f32, dnnl_abcde);
    dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&mid, 4, md_dims, dnnl_f32, cpu_blocked_tag());
    dnnl_dims_t one = {1, 1}, zero = {0, 0};
    dnnl_convolution_desc_t cd;
    CPU_TRY(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei_any,
                                               &bias_md, &mid, one, zero, zero), label);
    dnnl_primitive_attr_t attr;
    FTL_TRY(cpu_make_attr_dw(n, dw, (int)dw->p.stride[0], &attr));
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &cd, attr, p->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return FTL_OK;
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    const dnnl_memory_desc_t *dst_q = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const nn_shape *ys = shape_of(g, dw->out[0]);
    if (!impl || strncmp(impl, "ref", 3) == 0 || !dst_q || dst_q->dims[2] != ys->d[2] || dst_q->dims[3] != ys->d[3]) {
        dnnl_primitive_desc_destroy(pd);
        return FTL_OK;
    }
    dnnl_memory_desc_t wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), dst_md = *dst_q;
    dnnl_memory_desc_t dww_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    float *zeros = ftl_xcalloc((size_t)m, sizeof *zeros);
    const float *bias = n->n_in > 2 && n->in[2] >= 0 ? g->tensors[n->in[2]].data : zeros;
    const float *dw_bias = dw->n_in > 2 && dw->in[2] >= 0 ? g->tensors[dw->in[2]].data : zeros;
    int src_v, wei_v, bias_v, dww_v, dwb_v;
    ftl_status st = cpu_ensure(p, n->in[0], &src, &src_v);
    if (st == FTL_OK) st = cpu_const_value(p, g->tensors[n->in[1]].data, &wei_plain, &wei_md, &wei_v);
    if (st == FTL_OK) st = cpu_const_value(p, bias, &bias_md, &bias_md, &bias_v);
    if (st == FTL_OK) st = cpu_const_value(p, g->tensors[dw->in[1]].data, &dw_plain, &dww_md, &dww_v);
    if (st == FTL_OK) st = cpu_const_value(p, dw_bias, &bias_md, &bias_md, &dwb_v);
    free(zeros);
    if (st != FTL_OK) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    int dst_v = new_output(p, dw->out[0], &dst_md);
    int keys[6] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS,
                   DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS};
    int vals[6] = {src_v, wei_v, dst_v, bias_v, dww_v, dwb_v};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, 6, 2, label));
    p->steps[p->n_steps - 1].also_node = dw_node;
    p->node_fused[dw_node] = -2;
    *done = true;
    return FTL_OK;
}

/* A convolution whose input has an int8 form runs in int8 when oneDNN has a fast kernel for it,
 * else in fp32 like the rest. */
static ftl_status emit_conv(nn_plan *p, nn_graph *g, const nn_node *n) {
    if (cpu_node_int8(p, n) && (!p->int8_zero || nn_qdq_int8_node(g, n))) { /* a quantized model: its own weights */
        bool none = false;
        ftl_status st = emit_conv_as(p, g, n, true, &none);
        if (st != FTL_OK || !none) return st;
        ftl_log_debug("nn: node '%s' (%s): no fast int8 kernel for its shape; it runs in fp32", n->name, n->op_type);
    }
    int dw = depthwise_follower(p, g, n);
    if (dw >= 0) {
        bool done = false;
        FTL_TRY(emit_conv_depthwise(p, g, n, dw, &done));
        if (done) return FTL_OK;
    }
    return emit_conv_as(p, g, n, false, NULL);
}

/* q: in int8 (nothing is emitted and *no_int8_kernel is set when oneDNN has only its reference
 * kernel or none for it). */
static ftl_status emit_conv_as(nn_plan *p, nn_graph *g, const nn_node *n, bool q, bool *no_int8_kernel) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    const nn_tensor *w = &g->tensors[n->in[1]];
    const nn_params *pp = &n->p;
    dnnl_data_type_t dt = q ? int8_type(p, n->in[0]) : cpu_compute_type(p);
    dnnl_data_type_t ydt = !q ? dt : writes_int8(p, n) ? int8_type(p, n->out[0]) : dnnl_f32;
    int64_t m = ys->d[1], c = xs->d[1], gr = pp->group;
    dnnl_memory_desc_t src_any, wei_any, dst_any, bias_md, wei_plain;
    any_md(&src_any, xs, dt);
    any_md(&dst_any, ys, ydt);
    dnnl_dims_t wd;
    int wrank;
    if (gr > 1) {
        wrank = 5;
        dnnl_dims_t d = {gr, m / gr, c / gr, pp->kernel[0], pp->kernel[1]};
        memcpy(wd, d, sizeof d);
    } else {
        wrank = 4;
        dnnl_dims_t d = {m, c, pp->kernel[0], pp->kernel[1]};
        memcpy(wd, d, sizeof d);
    }
    dnnl_data_type_t wdt = q ? dnnl_s8 : dt;
    dnnl_memory_desc_init_by_tag(&wei_any, wrank, wd, wdt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei_plain, wrank, wd, q ? dnnl_s8 : dnnl_f32, wrank == 5 ? dnnl_abcde : dnnl_abcd);
    dnnl_dims_t bd = {m};
    dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    bool has_bias = q || (n->n_in > 2 && n->in[2] >= 0); /* int8: the bias carries no rounding, so always one */
    int8_conv_consts qc = {0};
    if (q) int8_conv_consts_make(p, g, n, m, &qc);
    dnnl_dims_t strides = {pp->stride[0], pp->stride[1]}, dil = {pp->dilation[0] - 1, pp->dilation[1] - 1};
    dnnl_dims_t pl = {pp->pad_begin[0], pp->pad_begin[1]}, pr = {pp->pad_end[0], pp->pad_end[1]};
    /* oneDNN wants the right padding that makes its output size formula exact */
    for (int i = 0; i < 2; i++) {
        int64_t span = (int64_t)pp->dilation[i] * (pp->kernel[i] - 1) + 1;
        pr[i] = (ys->d[2 + i] - 1) * pp->stride[i] + span - xs->d[2 + i] - pl[i];
    }
    dnnl_primitive_attr_t attr;
    int zsrc = q && p->int8_zero ? p->int8_zero[n->in[0]] : 0;
    int zdst = q && p->int8_zero && writes_int8(p, n) ? p->int8_zero[n->out[0]] : 0;
    ftl_status ast = q ? cpu_make_attr_int8(n, &attr, qc.scales, m, qc.act_scale, zsrc, zdst)
                       : cpu_make_attr(n, &attr, false);
    if (ast != FTL_OK) {
        int8_conv_consts_free(&qc);
        return ast;
    }
    /* A fixed activation layout for every conv (cpu_conv_layout: channels-last brgconv for fp32,
     * nChw16c for bf16, measured per layer in bench/backbone), so no reorders between layers;
     * when that form only has a reference kernel, let oneDNN choose. Winograd convs come first
     * when eligible: their blocked layout costs a reorder each side (1.5% of ResNet-50's time)
     * for a 1.7-2.2x faster conv. */
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_unimplemented;
    dnnl_format_tag_t layout = cpu_conv_layout(p);
    bool wino = cpu_conv_winograd_eligible(p, n, xs, ys), used_winograd = false;
    for (int attempt = wino ? -1 : 0; attempt < 2 && !pd; attempt++) {
        dnnl_memory_desc_t src = src_any, dst = dst_any;
        dnnl_alg_kind_t alg = attempt < 0 ? dnnl_convolution_winograd : dnnl_convolution_direct;
        if (attempt < 0) {
            dnnl_dims_t sd, dd;
            dims_of(xs, sd);
            dims_of(ys, dd);
            dnnl_memory_desc_init_by_tag(&src, 4, sd, dt, dnnl_aBcd16b);
            dnnl_memory_desc_init_by_tag(&dst, 4, dd, dt, dnnl_aBcd16b);
        } else if (attempt == 0) {
            if (layout == dnnl_format_tag_any) continue;
            dnnl_dims_t sd, dd;
            dims_of(xs, sd);
            dims_of(ys, dd);
            /* a 3-channel stem keeps the blocked conv's own input pick (ncsp); channels-last is fine */
            if (xs->d[1] >= 8 || layout == dnnl_acdb) dnnl_memory_desc_init_by_tag(&src, 4, sd, dt, layout);
            dnnl_memory_desc_init_by_tag(&dst, 4, dd, ydt, layout);
        }
        dnnl_convolution_desc_t cd;
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, alg, &src, &wei_any,
                                                       has_bias ? &bias_md : NULL, &dst, strides, dil, pl, pr);
        if (s == dnnl_success && attempt < 0) s = winograd_desc(p, &cd, attr, &pd);
        else if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &cd, attr, p->engine, NULL);
        if (s != dnnl_success) {
            pd = NULL;
            continue;
        }
        const char *impl = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if ((attempt <= 0 || q) && impl && strncmp(impl, "ref", 3) == 0) {
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
        used_winograd = pd && attempt < 0;
    }
    dnnl_primitive_attr_destroy(attr);
    if (!pd && q) {
        int8_conv_consts_free(&qc);
        *no_int8_kernel = true;
        return FTL_OK;
    }
    if (!pd) return ftl_fail_context(cpu_check(s, "convolution"), "node '%s' (%s)", n->name, n->op_type);
    if (used_winograd) p->n_winograd++;
    dnnl_memory_desc_t src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    dnnl_memory_desc_t wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);

    int src_v, wei_v, bias_v = -1, dst_v;
    ftl_status st = cpu_ensure(p, n->in[0], &src_md, &src_v);
    if (st == FTL_OK) st = cpu_const_value(p, q ? (const void *)qc.weights : w->data, &wei_plain, &wei_md, &wei_v);
    if (st == FTL_OK && has_bias)
        st = cpu_const_value(p, q ? qc.bias : g->tensors[n->in[2]].data, &bias_md, &bias_md, &bias_v);
    int8_conv_consts_free(&qc);
    int sum_t = -1;
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_SUM) sum_t = n->post[k].sum_tensor;
    if (st == FTL_OK && sum_t >= 0) {
        /* dst += summand: the conv writes over the summand's buffer, or over a copy of it when
         * the summand is still needed later */
        int sv;
        st = cpu_ensure(p, sum_t, &dst_md, &sv);
        if (st == FTL_OK && (!cpu_can_overwrite(p, sv) || p->vals[sv].buf == p->vals[src_v].buf)) {
            int copy = new_output(p, n->out[0], &dst_md);
            st = cpu_emit_reorder(p, sv, copy, label);
            dst_v = copy;
        } else if (st == FTL_OK) {
            dst_v = cpu_new_value(p, &dst_md, p->vals[sv].buf);
            cpu_bind(p, n->out[0], dst_v);
        }
    } else if (st == FTL_OK) {
        dst_v = new_output(p, n->out[0], &dst_md);
    }
    if (st != FTL_OK) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int vals[4] = {src_v, wei_v, dst_v, bias_v};
    return cpu_emit_prim(p, pd, keys, vals, has_bias ? 4 : 3, 2, label);
}

static ftl_status eltwise_step(nn_plan *p, const nn_node *n, int src, int dst, dnnl_alg_kind_t alg, float alpha,
                               float beta) {
    char label[96];
    label_of(n, label, sizeof label);
    dnnl_eltwise_desc_t ed;
    CPU_TRY(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &p->vals[src].md, alpha, beta), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &ed, NULL, false, "eltwise", &pd));
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {src, dst};
    return cpu_emit_prim(p, pd, keys, vals, 2, 1, label);
}

static ftl_status emit_activation(nn_plan *p, nn_graph *g, const nn_node *n) {
    (void)g;
    const nn_act *a = &n->p.act;
    int src = p->tval[n->in[0]];
    int y = n->out[0];
    if (a->kind == NN_ACT_RELU && p->int8_written && p->int8_written[y] && p->int8_scale[y] > 0 &&
        p->vals[src].md.data_type == dnnl_f32) {
        /* only int8 nodes read it as u8, whose saturation at 0 is the ReLU: one conversion, no ReLU pass */
        dnnl_memory_desc_t md = p->vals[src].md;
        md.data_type = dnnl_u8;
        char label[96];
        label_of(n, label, sizeof label);
        int dst = new_output(p, y, &md);
        return cpu_emit_quantize(p, src, dst, p->int8_scale[y], p->int8_zero ? p->int8_zero[y] : 0, label);
    }
    int dst = inplace_output(p, n->out[0], src, &p->vals[src].md);
    switch (a->kind) {
    case NN_ACT_RELU: return eltwise_step(p, n, src, dst, dnnl_eltwise_relu, 0, 0);
    case NN_ACT_LEAKYRELU: return eltwise_step(p, n, src, dst, dnnl_eltwise_relu, a->alpha, 0);
    case NN_ACT_CLIP: return eltwise_step(p, n, src, dst, dnnl_eltwise_clip_v2, a->alpha, a->beta);
    case NN_ACT_SIGMOID: return eltwise_step(p, n, src, dst, dnnl_eltwise_logistic, 0, 0);
    case NN_ACT_HARDSWISH: return eltwise_step(p, n, src, dst, dnnl_eltwise_hardswish, 0, 0);
    case NN_ACT_TANH: return eltwise_step(p, n, src, dst, dnnl_eltwise_tanh, 0, 0);
    case NN_ACT_SQRT: return eltwise_step(p, n, src, dst, dnnl_eltwise_sqrt, 0, 0);
    case NN_ACT_POW: return eltwise_step(p, n, src, dst, dnnl_eltwise_pow, 1.0f, a->alpha);
    case NN_ACT_GELU_ERF: return eltwise_step(p, n, src, dst, dnnl_eltwise_gelu_erf, 0, 0);
    case NN_ACT_GELU_TANH: return eltwise_step(p, n, src, dst, dnnl_eltwise_gelu_tanh, 0, 0);
    case NN_ACT_SILU: return eltwise_step(p, n, src, dst, dnnl_eltwise_swish, 1.0f, 0);
    case NN_ACT_HARDSIGMOID: /* clip(alpha*x + beta, 0, 1): two passes, the second in place */
        FTL_TRY(eltwise_step(p, n, src, dst, dnnl_eltwise_linear, a->alpha, a->beta));
        return eltwise_step(p, n, dst, dst, dnnl_eltwise_clip_v2, 0.0f, 1.0f);
    }
    return ftl_fail(FTL_E_INTERNAL, "activation");
}

/* A quantized model's FakeQuantize: ftl's element-wise loop on the f32 value in its current layout. */
static ftl_status emit_fake_quant(nn_plan *p, nn_graph *g, const nn_node *n) {
    (void)g;
    int src = p->tval[n->in[0]];
    dnnl_memory_desc_t md = p->vals[src].md;
    if (md.data_type != dnnl_f32) { /* bf16 plans: quantize the f32 value */
        md.data_type = dnnl_f32;
        FTL_TRY(cpu_ensure(p, n->in[0], &md, &src));
    }
    int dst = inplace_output(p, n->out[0], src, &md);
    char label[96];
    label_of(n, label, sizeof label);
    cpu_emit_fake_quant(p, src, dst, n->p.q_scale, n->p.q_zero, n->p.q_lo, n->p.q_hi, label);
    return FTL_OK;
}

static dnnl_alg_kind_t binary_alg(nn_op op) {
    switch (op) {
    case NN_OP_SUB: return dnnl_binary_sub;
    case NN_OP_MUL: return dnnl_binary_mul;
    case NN_OP_DIV: return dnnl_binary_div;
    default: return dnnl_binary_add;
    }
}

/* Shape of tensor t padded on the left with 1s to `rank`. */
static nn_shape expand_rank(const nn_shape *s, int rank) {
    nn_shape r = {.rank = rank};
    int off = rank - s->rank;
    for (int i = 0; i < rank; i++) r.d[i] = i < off ? 1 : s->d[i - off];
    return r;
}

static bool same_dims(const nn_shape *a, const nn_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

static bool pd_is_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl && strncmp(impl, "ref", 3) == 0;
}

/* `data` of shape `from` broadcast (numpy rules, same rank) to shape `to`; the caller frees. */
static float *expand_const(const float *data, const nn_shape *from, const nn_shape *to) {
    int64_t total = nn_shape_count(to);
    float *out = ftl_xmalloc((size_t)total * sizeof *out);
    int64_t idx[NN_MAX_RANK] = {0};
    for (int64_t i = 0; i < total; i++) {
        int64_t src = 0;
        for (int a = 0; a < to->rank; a++) src = src * from->d[a] + (from->d[a] == 1 ? 0 : idx[a]);
        out[i] = data[src];
        for (int a = to->rank - 1; a >= 0 && ++idx[a] == to->d[a]; a--) idx[a] = 0;
    }
    return out;
}

/* The conv layout family of a 4-D value, by its blocking (strides unchecked): acdb when unblocked
 * (channels-last; its readers check the strides), nChw8c / nChw16c; undef otherwise. */
static dnnl_format_tag_t image_tag(const dnnl_memory_desc_t *md) {
    if (md->format_kind != dnnl_blocked) return dnnl_format_tag_undef;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (b->inner_nblks == 0) return dnnl_acdb;
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && b->inner_blks[0] == 8) return dnnl_aBcd8b;
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && b->inner_blks[0] == 16) return dnnl_aBcd16b;
    return dnnl_format_tag_undef;
}

/* A per-channel operand (squeeze-and-excitation's [N,C,1,1] gate) onto a channel-blocked image: oneDNN's
 * jit binary wants it blocked the same way, plain it runs the reference kernel (30x slower). True, with
 * *md1 that blocked layout, when oneDNN has a jit kernel for it. */
static bool blocked_gate(nn_plan *p, const nn_node *n, const dnnl_memory_desc_t *md0, const nn_shape *bs,
                         const nn_shape *ys, bool negate, dnnl_memory_desc_t *md1) {
    dnnl_format_tag_t tag = ys->rank == 4 ? image_tag(md0) : dnnl_format_tag_undef;
    if (tag != dnnl_aBcd8b && tag != dnnl_aBcd16b) return false;
    dnnl_dims_t bd;
    dims_of(bs, bd);
    dnnl_binary_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(md1, 4, bd, md0->data_type, tag) != dnnl_success ||
        dnnl_binary_desc_init(&desc, binary_alg(n->op), md0, md1, md0) != dnnl_success ||
        node_pd(p, n, &desc, n, negate, "binary", &pd) != FTL_OK)
        return false;
    bool fast = !pd_is_reference(pd);
    dnnl_primitive_desc_destroy(pd);
    return fast;
}

static ftl_status emit_binary(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *ys = shape_of(g, n->out[0]);
    int a = n->in[0], b = n->in[1];
    nn_shape as = expand_rank(shape_of(g, a), ys->rank), bs = expand_rank(shape_of(g, b), ys->rank);
    bool negate = false;
    /* oneDNN broadcasts only the second source: put the full-shape operand first */
    if (!same_dims(&as, ys) || nn_is_const(g, a)) {
        if (!same_dims(&bs, ys) || nn_is_const(g, b))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): broadcasting both operands (%s and %s) is not supported",
                            n->name, n->op_type, g->tensors[a].name, g->tensors[b].name);
        if (n->op == NN_OP_DIV)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Div): dividing a broadcast or constant tensor by a full "
                            "tensor is not supported", n->name);
        int t = a;
        a = b;
        b = t;
        nn_shape ts = as;
        as = bs;
        bs = ts;
        negate = n->op == NN_OP_SUB; /* b - a = -(a - b) */
    }
    int src0 = p->tval[a], src1;
    dnnl_memory_desc_t md0 = p->vals[src0].md, md1;
    if (nn_is_const(g, b)) {
        dnnl_memory_desc_t plain;
        cpu_plain_md(&plain, &bs, dnnl_f32);
        FTL_TRY(cpu_const_value(p, g->tensors[b].data, &plain, &plain, &src1));
    } else if (same_dims(&bs, ys)) {
        FTL_TRY(cpu_ensure(p, b, &md0, &src1));
    } else if (shape_of(g, b)->rank == ys->rank && blocked_gate(p, n, &md0, &bs, ys, negate, &md1)) {
        FTL_TRY(cpu_ensure(p, b, &md1, &src1));
    } else {
        int v = p->tval[b];
        cpu_plain_md(&md1, &bs, p->vals[v].md.data_type);
        if (shape_of(g, b)->rank != ys->rank) {
            dnnl_memory_desc_t plain_b;
            cpu_plain_md(&plain_b, shape_of(g, b), p->vals[v].md.data_type);
            FTL_TRY(cpu_ensure(p, b, &plain_b, &v));
            src1 = cpu_new_value(p, &md1, p->vals[v].buf); /* same bytes, rank padded with 1s */
        } else {
            FTL_TRY(cpu_ensure(p, b, &md1, &src1));
        }
    }
    md1 = p->vals[src1].md;
    dnnl_memory_desc_t dst_md = md0;
    dnnl_binary_desc_t bdsc;
    CPU_TRY(dnnl_binary_desc_init(&bdsc, binary_alg(n->op), &md0, &md1, &dst_md), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &bdsc, n, negate, "binary", &pd));
    if (nn_is_const(g, b) && pd_is_reference(pd)) {
        /* a broadcast oneDNN has no fast kernel for (Swin's attention mask, [1,W,1,T,T] onto
         * [N,W,H,T,T]): the constant expanded to the whole image, broadcast over the batch only */
        nn_shape full = *ys;
        full.d[0] = bs.d[0];
        if (nn_shape_count(&full) <= ((int64_t)1 << 24)) {
            float *wide = expand_const(g->tensors[b].data, &bs, &full);
            dnnl_memory_desc_t plain;
            cpu_plain_md(&plain, &full, dnnl_f32);
            ftl_status st = cpu_const_value(p, wide, &plain, &plain, &src1);
            free(wide);
            dnnl_primitive_desc_t fast = NULL;
            if (st == FTL_OK) CPU_TRY(dnnl_binary_desc_init(&bdsc, binary_alg(n->op), &md0, &plain, &dst_md), label);
            if (st == FTL_OK) st = node_pd(p, n, &bdsc, n, negate, "binary", &fast);
            if (st != FTL_OK) {
                dnnl_primitive_desc_destroy(pd);
                return st;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = fast;
        }
    }
    int dst = inplace_output(p, n->out[0], src0, &dst_md);
    int keys[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, vals[3] = {src0, src1, dst};
    return cpu_emit_prim(p, pd, keys, vals, 3, 2, label);
}

/* ONNX Runtime divides an average window by its size clipped to [-pad_begin, size + pad_end): a
 * ceil_mode overhang past the padding is not counted, while oneDNN's include-padding average divides
 * by the whole kernel. Multiply each output position by kernel area / ONNX divisor, in place. */
static ftl_status avgpool_overhang_fix(nn_plan *p, const nn_node *n, const nn_shape *xs, const nn_shape *ys, int dst,
                                       const char *label) {
    const nn_params *pp = &n->p;
    int64_t oh = ys->d[2], ow = ys->d[3];
    float *f = ftl_xmalloc((size_t)(oh * ow) * sizeof *f);
    for (int64_t y = 0; y < oh; y++)
        for (int64_t x = 0; x < ow; x++) {
            int64_t h0 = y * pp->stride[0] - pp->pad_begin[0], w0 = x * pp->stride[1] - pp->pad_begin[1];
            int64_t h1 = h0 + pp->kernel[0], w1 = w0 + pp->kernel[1];
            if (h1 > xs->d[2] + pp->pad_end[0]) h1 = xs->d[2] + pp->pad_end[0];
            if (w1 > xs->d[3] + pp->pad_end[1]) w1 = xs->d[3] + pp->pad_end[1];
            f[y * ow + x] = (float)((double)pp->kernel[0] * pp->kernel[1] / (double)((h1 - h0) * (w1 - w0)));
        }
    nn_shape fs = {.rank = 4, .d = {1, 1, oh, ow}};
    dnnl_memory_desc_t fmd;
    cpu_plain_md(&fmd, &fs, dnnl_f32);
    int fv;
    ftl_status st = cpu_const_value(p, f, &fmd, &fmd, &fv);
    free(f);
    FTL_TRY(st);
    dnnl_binary_desc_t bd;
    CPU_TRY(dnnl_binary_desc_init(&bd, dnnl_binary_mul, &p->vals[dst].md, &fmd, &p->vals[dst].md), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &bd, NULL, false, "binary", &pd));
    int keys[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, vals[3] = {dst, fv, dst};
    return cpu_emit_prim(p, pd, keys, vals, 3, 2, label);
}

/* MaxPool as ftl's loop (kernels/max_pool.c) when src is f32 in a layout it reads; the output in src's
 * layout. *emitted false, nothing done, otherwise. */
static ftl_status emit_ftl_max_pool(nn_plan *p, const nn_node *n, const nn_shape *ys, int src, bool *emitted,
                                    const char *label) {
    *emitted = false;
    const dnnl_memory_desc_t *smd = &p->vals[src].md;
    if (smd->data_type != dnnl_f32 || ys->rank != 4) return FTL_OK;
    dnnl_format_tag_t tag = image_tag(smd);
    if (tag == dnnl_format_tag_undef) return FTL_OK;
    dnnl_dims_t dd;
    dims_of(ys, dd);
    dd[0] = smd->dims[0]; /* the value's micro-batch */
    dnnl_memory_desc_t dst_md;
    CPU_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, dnnl_f32, tag), label);
    const nn_params *pp = &n->p;
    int64_t kernel[2] = {pp->kernel[0], pp->kernel[1]}, stride[2] = {pp->stride[0], pp->stride[1]};
    int64_t dilation[2] = {pp->dilation[0], pp->dilation[1]}, pad[2] = {pp->pad_begin[0], pp->pad_begin[1]};
    cpu_pool_plan *plan = NULL;
    if (!cpu_pool_plan_make(smd, &dst_md, kernel, stride, dilation, pad, &plan)) return FTL_OK;
    int dst = new_output(p, n->out[0], &dst_md);
    cpu_host_step(p, CPU_STEP_MAXPOOL, src, dst, "ftl:max_pool", label)->pool = plan;
    *emitted = true;
    return FTL_OK;
}

static ftl_status emit_pool(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int src = p->tval[n->in[0]];
    bool windowed = n->op == NN_OP_MAXPOOL || n->op == NN_OP_AVGPOOL;
    if (windowed && xs->rank == 4 && xs->d[1] > 1 && row_major_md(&p->vals[src].md) && cpu_conv_layout(p) != dnnl_abcd) {
        /* a pool after a convolution that wrote plain NCHW (AlexNet's 3-channel 11x11 conv runs as a
         * GEMM): oneDNN pools plain images with a scalar loop, 30x slower than a reorder and its jit */
        dnnl_memory_desc_t conv_md;
        dnnl_dims_t xd;
        dims_of(xs, xd);
        CPU_TRY(dnnl_memory_desc_init_by_tag(&conv_md, 4, xd, p->vals[src].md.data_type, cpu_conv_layout(p)), label);
        FTL_TRY(cpu_ensure(p, n->in[0], &conv_md, &src));
    }
    dnnl_memory_desc_t src_md = p->vals[src].md, dst_any;
    any_md(&dst_any, ys, src_md.data_type);
    dnnl_dims_t k, st, dil = {0, 0}, pl = {0, 0}, pr = {0, 0};
    dnnl_alg_kind_t alg;
    bool overhang = false; /* ceil_mode window past the explicit padding, with count_include_pad */
    if (n->op == NN_OP_GLOBALAVGPOOL || n->op == NN_OP_GLOBALMAXPOOL || n->op == NN_OP_REDUCEMEAN) {
        k[0] = xs->d[2];
        k[1] = xs->d[3];
        st[0] = st[1] = 1;
        alg = n->op == NN_OP_GLOBALMAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    } else {
        const nn_params *pp = &n->p;
        for (int i = 0; i < 2; i++) {
            k[i] = pp->kernel[i];
            st[i] = pp->stride[i];
            dil[i] = pp->dilation[i] - 1;
            pl[i] = pp->pad_begin[i];
            int64_t span = (int64_t)pp->dilation[i] * (pp->kernel[i] - 1) + 1;
            pr[i] = (ys->d[2 + i] - 1) * pp->stride[i] + span - xs->d[2 + i] - pl[i]; /* incl. ceil_mode overhang */
        }
        if (n->op == NN_OP_MAXPOOL) alg = dnnl_pooling_max;
        else if (!pp->count_include_pad) alg = dnnl_pooling_avg_exclude_padding;
        else {
            alg = dnnl_pooling_avg_include_padding;
            for (int i = 0; i < 2; i++)
                if (pr[i] > pp->pad_end[i]) overhang = true;
        }
    }
    if (n->op == NN_OP_MAXPOOL && cpu_pool_ftl_wanted()) {
        bool emitted = false;
        FTL_TRY(emit_ftl_max_pool(p, n, ys, src, &emitted, label));
        if (emitted) return FTL_OK;
    }
    nn_shape ys4 = *ys;
    if (n->op == NN_OP_REDUCEMEAN && ys->rank != 4) ys4 = (nn_shape){.rank = 4, .d = {xs->d[0], xs->d[1], 1, 1}};
    any_md(&dst_any, &ys4, src_md.data_type);
    dnnl_pooling_v2_desc_t pdsc;
    CPU_TRY(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &src_md, &dst_any, st, k, dil, pl, pr), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &pdsc, NULL, false, "pooling", &pd));
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int dst;
    if (ys4.rank == ys->rank) {
        dst = new_output(p, n->out[0], &dst_md);
    } else { /* ReduceMean without keepdims: pool to [N,C,1,1], then view as [N,C] */
        int b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
        dst = cpu_new_value(p, &dst_md, b);
    }
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {src, dst};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, 2, 1, label));
    if (overhang) FTL_TRY(avgpool_overhang_fix(p, n, xs, ys, dst, label));
    if (ys4.rank != ys->rank) {
        dnnl_memory_desc_t plain4, plain;
        cpu_plain_md(&plain4, &ys4, dst_md.data_type);
        int pv = dst;
        if (!dnnl_memory_desc_equal(&plain4, &dst_md)) {
            pv = cpu_new_value(p, &plain4, cpu_new_buf(p, 0, p->last_node[n->out[0]]));
            FTL_TRY(cpu_emit_reorder(p, dst, pv, label));
        }
        cpu_plain_md(&plain, ys, dst_md.data_type);
        cpu_bind(p, n->out[0], cpu_new_value(p, &plain, p->vals[pv].buf));
    }
    return FTL_OK;
}

/* Reshape-like ops: the same bytes in plain row-major order, viewed with the new dims. An input that
 * is not plain yet (a permuted view: Swin's window partition) is copied, as bf16 where only bf16
 * readers take the output (no second copy to convert it). */
static ftl_status emit_view(nn_plan *p, nn_graph *g, const nn_node *n) {
    int v = p->tval[n->in[0]];
    dnnl_memory_desc_t plain;
    cpu_plain_md(&plain, shape_of(g, n->in[0]), p->vals[v].md.data_type);
    if (!dnnl_memory_desc_equal(&p->vals[v].md, &plain))
        cpu_plain_md(&plain, shape_of(g, n->in[0]), cpu_copy_type(p, g, p->vals[v].md.data_type, n->out[0]));
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    cpu_plain_md(&plain, shape_of(g, n->out[0]), p->vals[v].md.data_type);
    cpu_bind(p, n->out[0], cpu_new_value(p, &plain, p->vals[v].buf));
    return FTL_OK;
}

/* Whether every use of tensor t in a bf16 plan reads it as bf16 anyway: linear layers with constant
 * weights (they convert their input) and fused attentions' operands, through view-like nodes. Such a
 * product is written as bf16 directly: half the bytes, and no f32 -> bf16 reorder before each use. */
static bool read_as_bf16_only(const nn_plan *p, const nn_graph *g, int t, int depth) {
    if (depth > 6) return false;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == t) return false;
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *r = &g->nodes[i];
        if (r->dead) continue;
        bool reads = false;
        for (int k = 0; k < r->n_post; k++)
            if (r->post[k].kind == NN_POST_SUM && r->post[k].sum_tensor == t) return false;
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] == t) {
                if (k != 0 && !(p->node_fused && p->node_fused[i] != -1)) return false;
                reads = true;
            }
        if (!reads) continue;
        readers++;
        if (p->node_fused && p->node_fused[i] != -1) continue; /* Q (maybe scaled), K^T or V of a fused attention */
        switch (r->op) {
        case NN_OP_GEMM: case NN_OP_MATMUL:
            if (r->n_in < 2 || !nn_is_const(g, r->in[1]) || cpu_node_int8(p, r)) return false;
            break;
        case NN_OP_RESHAPE: case NN_OP_FLATTEN: case NN_OP_SQUEEZE: case NN_OP_UNSQUEEZE: case NN_OP_IDENTITY:
        case NN_OP_TRANSPOSE: case NN_OP_SLICE: case NN_OP_GATHER: case NN_OP_SPLIT:
            if (r->n_post > 0) return false;
            for (int k = 0; k < r->n_out; k++)
                if (r->out[k] >= 0 && !read_as_bf16_only(p, g, r->out[k], depth + 1)) return false;
            break;
        default: return false;
        }
    }
    return readers > 0;
}

dnnl_data_type_t cpu_copy_type(const nn_plan *p, const nn_graph *g, dnnl_data_type_t dt, int t) {
    return dt == dnnl_f32 && p->precision == NN_PREC_BF16 && !p->int8_scale && cpu_switch_on("FTL_NN_BF16_PRODUCTS") &&
                   read_as_bf16_only(p, g, t, 0)
               ? dnnl_bf16
               : dt;
}

static ftl_status emit_transpose(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    int v = p->tval[n->in[0]];
    int rank = shape_of(g, n->in[0])->rank;
    int perm[NN_MAX_RANK];
    for (int i = 0; i < rank; i++) perm[n->p.axes[i]] = i; /* dnnl: input axis perm[i] -> output axis i */
    dnnl_memory_desc_t view, plain;
    CPU_TRY(dnnl_memory_desc_permute_axes(&view, &p->vals[v].md, perm), label);
    int vv = cpu_new_value(p, &view, p->vals[v].buf);
    /* A permutation that keeps the images outermost is a view of the same bytes: the consumers ask
     * for the layout they need (ConvNeXt's NCHW <-> NHWC around its layer norms then costs nothing
     * when the convolution already wrote channels-last). */
    bool dense = p->vals[v].buf >= 0 && view.format_kind == dnnl_blocked &&
                 dnnl_memory_desc_get_size(&view) == dnnl_memory_desc_get_size(&p->vals[v].md);
    /* Any other permutation is a view when it is already row-major (an attention wrote it so) or only
     * a fused attention reads it, within one micro-batch chunk. */
    bool other = p->vals[v].buf >= 0 && strided_md(&view) && cpu_one_chunk_until_read(p, n->out[0]) &&
                 (row_major_md(&view) || cpu_attention_reads_only(p, g, n->out[0], 0));
    if ((n->p.axes[0] == 0 && dense) || other) {
        cpu_bind(p, n->out[0], vv);
        return FTL_OK;
    }
    cpu_plain_md(&plain, shape_of(g, n->out[0]), cpu_copy_type(p, g, p->vals[v].md.data_type, n->out[0]));
    int out = new_output(p, n->out[0], &plain);
    return cpu_emit_reorder(p, vv, out, label);
}

/* One concat primitive of vals[0..nin) along axis into a new value (the node's output when
 * out_tensor >= 0, else an intermediate of the given dims). */
static ftl_status concat_step(nn_plan *p, const nn_node *n, const char *label, int axis, int *vals, dnnl_memory_desc_t *mds,
                              int nin, const dnnl_memory_desc_t *dst_any, int out_tensor, int *out_value) {
    dnnl_primitive_attr_t attr;
    FTL_TRY(cpu_make_attr(NULL, &attr, false));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_concat_primitive_desc_create(&pd, dst_any, nin, axis, mds, attr, p->engine);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return ftl_fail_context(cpu_check(s, "concat"), "node '%s' (%s)", n->name, n->op_type);
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int keys[CPU_MAX_ARGS], args[CPU_MAX_ARGS];
    for (int k = 0; k < nin; k++) keys[k] = DNNL_ARG_MULTIPLE_SRC + k, args[k] = vals[k];
    keys[nin] = DNNL_ARG_DST;
    args[nin] = out_tensor >= 0 ? new_output(p, out_tensor, &dst_md) : cpu_new_value(p, &dst_md, cpu_new_buf(p, 0, p->cur_node));
    *out_value = args[nin];
    return cpu_emit_prim(p, pd, keys, args, nin + 1, nin, label);
}

/* A concat's result: the layout oneDNN picks for images (it follows the convolutions' blocks), plain
 * for other ranks (left to itself it may pick a transposed layout that the next ops run slowly on,
 * e.g. the reference binary add of a ViT's position embedding) */
static void concat_dst_md(dnnl_memory_desc_t *md, const nn_shape *s, dnnl_data_type_t dt) {
    if (s->rank == 4) any_md(md, s, dt);
    else cpu_plain_md(md, s, dt);
}

/* Concat of any number of inputs (DenseNet's grow with depth): oneDNN takes up to
 * CPU_MAX_ARGS - 1 per primitive, so longer lists are concatenated in a chain of partial results. */
/* Whether a Concat that copies from strided views (concat_by_copies) alone reads t, in this chunk:
 * Swin's rolls (two slices of a tensor joined the other way round) and patch merging (four strided
 * slices side by side) then copy each element once instead of twice. */
static bool copied_by_concat(const nn_plan *p, const nn_graph *g, int t) {
    int slot, r = nn_graph_sole_reader(g, t, &slot);
    if (r < 0 || g->nodes[r].op != NN_OP_CONCAT || g->nodes[r].n_post > 0 || !cpu_switch_on("FTL_NN_CONCAT_COPIES"))
        return false;
    if (p->node_fused && p->node_fused[r] != -1) return false;
    if (p->node_mb && p->node_mb[r] != p->node_mb[p->cur_node]) return false;
    return cpu_one_chunk_until_read(p, t);
}

/* Whether every input of a 4-D concat is a dense channels-last image (the convolutions' layout
 * without AVX-512 blocking): the result then stays channels-last instead of going plain and back. */
static bool channels_last_inputs(const nn_plan *p, const nn_node *n) {
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const dnnl_memory_desc_t *md = &p->vals[p->tval[n->in[k]]].md;
        dnnl_memory_desc_t nhwc;
        if (md->ndims != 4 || dnnl_memory_desc_init_by_tag(&nhwc, 4, md->dims, md->data_type, dnnl_acdb) != dnnl_success ||
            !dnnl_memory_desc_equal(md, &nhwc))
            return false;
    }
    return true;
}

/* A concat as one copy per input into its place in a plain output: when every input is a plain
 * strided value (ftl's strided copies), or when one is a view a Slice left for it (copied_by_concat;
 * the other inputs then go through oneDNN's reorder). *done false, nothing emitted, otherwise (a
 * constant input, or channel-blocked inputs that oneDNN's concat keeps blocked). */
static ftl_status concat_by_copies(nn_plan *p, nn_graph *g, const nn_node *n, const char *label, bool *done) {
    *done = false;
    const nn_shape *ys = shape_of(g, n->out[0]);
    dnnl_data_type_t dt = dnnl_data_type_undef;
    bool all_strided = true, a_view = false;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        if (nn_is_const(g, n->in[k]) || !cpu_switch_on("FTL_NN_CONCAT_COPIES")) return FTL_OK;
        const dnnl_memory_desc_t *md = &p->vals[p->tval[n->in[k]]].md;
        if (md->ndims != ys->rank || (dt != dnnl_data_type_undef && md->data_type != dt)) return FTL_OK;
        dt = md->data_type;
        all_strided = all_strided && strided_md(md);
        a_view = a_view || (strided_md(md) && (md->offset0 != 0 || dnnl_memory_desc_get_size(md) !=
                                                                    (size_t)nn_shape_count(shape_of(g, n->in[k])) * dnnl_data_type_size(dt)));
    }
    if (dt == dnnl_data_type_undef || !(all_strided || a_view)) return FTL_OK;
    dnnl_memory_desc_t plain_out;
    cpu_plain_md(&plain_out, ys, dt);
    if (all_strided && ys->rank == 4 && channels_last_inputs(p, n)) { /* SqueezeNet's fire modules, GoogLeNet's */
        dnnl_dims_t dd;
        dims_of(ys, dd);
        CPU_TRY(dnnl_memory_desc_init_by_tag(&plain_out, 4, dd, dt, dnnl_acdb), label);
    }
    int out = new_output(p, n->out[0], &plain_out);
    dnnl_dims_t offsets = {0};
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        int v = p->tval[n->in[k]];
        dnnl_memory_desc_t place;
        CPU_TRY(dnnl_memory_desc_init_submemory(&place, &plain_out, p->vals[v].md.dims, offsets), label);
        FTL_TRY(cpu_emit_reorder(p, v, cpu_new_value(p, &place, p->vals[out].buf), label));
        offsets[n->p.axis] += p->vals[v].md.dims[n->p.axis];
    }
    *done = true;
    return FTL_OK;
}

static ftl_status emit_concat(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    bool done;
    FTL_TRY(concat_by_copies(p, g, n, label, &done));
    if (done) return FTL_OK;
    int nin = 0;
    int *vals = ftl_xmalloc((size_t)(n->n_in + 1) * sizeof *vals);
    dnnl_memory_desc_t *mds = ftl_xmalloc((size_t)(n->n_in + 1) * sizeof *mds);
    dnnl_data_type_t dt = dnnl_data_type_undef;
    ftl_status st = FTL_OK;
    for (int k = 0; k < n->n_in && st == FTL_OK; k++) {
        if (n->in[k] < 0) continue;
        int v;
        if (nn_is_const(g, n->in[k])) { /* a ViT's class token, expanded to the batch */
            const nn_tensor *c = &g->tensors[n->in[k]];
            if (c->dtype != NN_F32) {
                st = ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Concat): integer input '%s' next to activations", n->name,
                              c->name);
                break;
            }
            dnnl_memory_desc_t plain;
            cpu_plain_md(&plain, &c->shape, dnnl_f32);
            st = cpu_const_value(p, c->data, &plain, &plain, &v);
            if (st != FTL_OK) break;
        } else {
            v = p->tval[n->in[k]];
        }
        if (dt == dnnl_data_type_undef) dt = p->vals[v].md.data_type;
        if (p->vals[v].md.data_type != dt) {
            dnnl_memory_desc_t md;
            cpu_plain_md(&md, shape_of(g, n->in[k]), dt);
            if (nn_is_const(g, n->in[k])) st = cpu_const_value(p, g->tensors[n->in[k]].data, &p->vals[v].md, &md, &v);
            else st = cpu_ensure(p, n->in[k], &md, &v);
        }
        vals[nin] = v;
        mds[nin++] = p->vals[v].md;
    }
    const int most = CPU_MAX_ARGS - 1;
    const nn_shape *ys = shape_of(g, n->out[0]);
    while (st == FTL_OK && nin > most) { /* the first `most` inputs become one partial result */
        dnnl_memory_desc_t part_any;
        nn_shape part_shape = *ys;
        part_shape.d[n->p.axis] = 0;
        for (int k = 0; k < most; k++) part_shape.d[n->p.axis] += mds[k].dims[n->p.axis];
        concat_dst_md(&part_any, &part_shape, dt);
        int part;
        st = concat_step(p, n, label, (int)n->p.axis, vals, mds, most, &part_any, -1, &part);
        if (st != FTL_OK) break;
        vals[0] = part;
        mds[0] = p->vals[part].md;
        memmove(vals + 1, vals + most, (size_t)(nin - most) * sizeof *vals);
        memmove(mds + 1, mds + most, (size_t)(nin - most) * sizeof *mds);
        nin -= most - 1;
    }
    if (st == FTL_OK) {
        dnnl_memory_desc_t dst_any;
        concat_dst_md(&dst_any, ys, dt);
        int out;
        st = concat_step(p, n, label, (int)n->p.axis, vals, mds, nin, &dst_any, n->out[0], &out);
    }
    free(vals);
    free(mds);
    return st;
}

static ftl_status emit_pad(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int v = p->tval[n->in[0]];
    bool none = true;
    for (int i = 0; i < 2 * xs->rank; i++) none = none && n->p.pads[i] == 0;
    if (none) { /* no padding at all (Swin's pad to a multiple of the window when it is one) */
        cpu_bind(p, n->out[0], v);
        return FTL_OK;
    }
    dnnl_data_type_t dt = p->vals[v].md.data_type;
    dnnl_memory_desc_t plain_in, plain_out, src_view, dst_view;
    cpu_plain_md(&plain_in, xs, dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain_in, &v));
    cpu_plain_md(&plain_out, ys, dt);
    int out = new_output(p, n->out[0], &plain_out);
    /* fill the whole output, then copy the kept part of the input into its place */
    int r = xs->rank;
    dnnl_dims_t dims, src_off, dst_off;
    for (int i = 0; i < r; i++) {
        int64_t b = n->p.pads[i], e = n->p.pads[i + r];
        src_off[i] = b < 0 ? -b : 0;
        dst_off[i] = b > 0 ? b : 0;
        dims[i] = xs->d[i] - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
    }
    CPU_TRY(dnnl_memory_desc_init_submemory(&src_view, &plain_in, dims, src_off), label);
    CPU_TRY(dnnl_memory_desc_init_submemory(&dst_view, &plain_out, dims, dst_off), label);
    int sv = cpu_new_value(p, &src_view, p->vals[v].buf), dv = cpu_new_value(p, &dst_view, p->vals[out].buf);
    FTL_TRY(cpu_emit_fill(p, out, n->p.pad_value, label));
    return cpu_emit_reorder(p, sv, dv, label);
}

/* Slice of an activation: a strided view of the plain input, copied out. */
static ftl_status emit_slice(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int v = p->tval[n->in[0]];
    bool whole = same_dims(xs, ys);
    for (int i = 0; i < xs->rank; i++) whole = whole && n->p.slice_begin[i] == 0 && n->p.slice_step[i] == 1;
    if (whole) { /* everything, in order (Swin's crop back from a padding of zero) */
        cpu_bind(p, n->out[0], v);
        return FTL_OK;
    }
    dnnl_data_type_t dt = p->vals[v].md.data_type;
    const dnnl_memory_desc_t *im = &p->vals[v].md;
    bool forward = true;
    for (int i = 0; i < xs->rank; i++) forward = forward && n->p.slice_step[i] > 0;
    if (forward && strided_md(im) && im->ndims == xs->rank && p->vals[v].buf >= 0 &&
        (cpu_attention_reads_only(p, g, n->out[0], 0) || copied_by_concat(p, g, n->out[0]))) {
        /* the attention reads the strides, or the concat copies from them: no copy here */
        dnnl_dims_t dims, strides;
        dnnl_dim_t first = im->offset0;
        for (int i = 0; i < xs->rank; i++) {
            dims[i] = ys->d[i];
            strides[i] = im->format_desc.blocking.strides[i] * n->p.slice_step[i];
            first += n->p.slice_begin[i] * im->format_desc.blocking.strides[i];
        }
        dnnl_memory_desc_t sv;
        CPU_TRY(dnnl_memory_desc_init_by_strides(&sv, xs->rank, dims, dt, strides), label);
        sv.offset0 = first;
        cpu_bind(p, n->out[0], cpu_new_value(p, &sv, p->vals[v].buf));
        return FTL_OK;
    }
    dnnl_memory_desc_t plain_in, plain_out, view;
    cpu_plain_md(&plain_in, xs, dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain_in, &v));
    /* a strided view: the input's strides times the steps, starting at the first element taken */
    dnnl_dims_t dims, strides;
    int64_t in_stride = 1, first = 0;
    for (int i = xs->rank - 1; i >= 0; i--) {
        dims[i] = ys->d[i];
        strides[i] = in_stride * n->p.slice_step[i];
        first += n->p.slice_begin[i] * in_stride;
        in_stride *= xs->d[i];
    }
    CPU_TRY(dnnl_memory_desc_init_by_strides(&view, xs->rank, dims, dt, strides), label);
    view.offset0 = first;
    int sv = cpu_new_value(p, &view, p->vals[v].buf);
    cpu_plain_md(&plain_out, ys, dt);
    int out = new_output(p, n->out[0], &plain_out);
    return cpu_emit_reorder(p, sv, out, label);
}

/* Gather of one index along a non-batch axis: the slice at that position, viewed without the axis. */
static ftl_status emit_gather_one(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int v = p->tval[n->in[0]];
    dnnl_data_type_t dt = p->vals[v].md.data_type;
    const dnnl_memory_desc_t *im = &p->vals[v].md;
    if (xs->rank >= 2 && strided_md(im) && im->ndims == xs->rank && p->vals[v].buf >= 0 &&
        cpu_attention_reads_only(p, g, n->out[0], 0)) {
        /* Swin's q, k, v out of one QKV tensor: views the attention reads in place */
        dnnl_dims_t dims, strides;
        int r = 0;
        for (int i = 0; i < xs->rank; i++)
            if (i != n->p.axis) dims[r] = im->dims[i], strides[r++] = im->format_desc.blocking.strides[i];
        dnnl_memory_desc_t gv;
        CPU_TRY(dnnl_memory_desc_init_by_strides(&gv, r, dims, dt, strides), label);
        gv.offset0 = im->offset0 + n->p.slice_begin[n->p.axis] * im->format_desc.blocking.strides[n->p.axis];
        if (r == ys->rank) {
            cpu_bind(p, n->out[0], cpu_new_value(p, &gv, p->vals[v].buf));
            return FTL_OK;
        }
    }
    dnnl_memory_desc_t plain_in, plain_out, view, slice_md;
    cpu_plain_md(&plain_in, xs, dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain_in, &v));
    nn_shape sliced = *xs;
    sliced.d[n->p.axis] = 1;
    dnnl_dims_t dims, off;
    for (int i = 0; i < xs->rank; i++) dims[i] = sliced.d[i], off[i] = n->p.slice_begin[i];
    CPU_TRY(dnnl_memory_desc_init_submemory(&view, &plain_in, dims, off), label);
    int sv = cpu_new_value(p, &view, p->vals[v].buf);
    cpu_plain_md(&slice_md, &sliced, dt);
    int tmp = cpu_new_value(p, &slice_md, cpu_new_buf(p, 0, p->cur_node));
    FTL_TRY(cpu_emit_reorder(p, sv, tmp, label));
    cpu_plain_md(&plain_out, ys, dt);
    cpu_bind(p, n->out[0], cpu_new_value(p, &plain_out, p->vals[tmp].buf));
    return FTL_OK;
}

/* LayerNormalization over the last axis: oneDNN's layer normalization with scale and shift; in bf16
 * plans ftl's kernel (nn/layernorm.h), which reads and writes fp32 and bf16 as the neighbours need
 * where oneDNN 2.6's takes one type for both (a conversion per layer norm). FTL_NN_BF16_LAYERNORM=0
 * keeps oneDNN's. */
static ftl_status emit_layernorm(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int v = p->tval[n->in[0]];
    dnnl_memory_desc_t plain;
    cpu_plain_md(&plain, xs, p->vals[v].md.data_type);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    int64_t c = xs->d[xs->rank - 1];
    const float *scale = g->tensors[n->in[1]].data, *shift = NULL;
    if (n->n_in > 2 && n->in[2] >= 0) shift = g->tensors[n->in[2]].data;
    if (p->precision == NN_PREC_BF16 && !p->int8_scale && c > 0 && cpu_switch_on("FTL_NN_BF16_LAYERNORM")) {
        /* the input as it is (a bf16 conv's output, the fp32 residual stream), the output in bf16 where
         * only bf16 products read it, else fp32 (a residual stream) */
        dnnl_memory_desc_t out_md;
        cpu_plain_md(&out_md, xs, cpu_copy_type(p, g, dnnl_f32, n->out[0]));
        int out = new_output(p, n->out[0], &out_md);
        cpu_step *st = cpu_host_step(p, CPU_STEP_LAYERNORM, v, out, "ftl:layer_norm", label);
        st->ln_params = ftl_xcalloc(2 * (size_t)c, sizeof *st->ln_params);
        memcpy(st->ln_params, scale, (size_t)c * sizeof *scale);
        if (shift) memcpy(st->ln_params + c, shift, (size_t)c * sizeof *shift);
        st->ln_epsilon = n->p.epsilon;
        return FTL_OK;
    }
    float *zeros = NULL;
    if (!shift) shift = zeros = ftl_xcalloc((size_t)c, sizeof *zeros);
    dnnl_memory_desc_t vec;
    dnnl_dims_t vd = {c};
    dnnl_memory_desc_init_by_tag(&vec, 1, vd, dnnl_f32, dnnl_a);
    int sv, hv;
    ftl_status st = cpu_const_value(p, scale, &vec, &vec, &sv);
    if (st == FTL_OK) st = cpu_const_value(p, shift, &vec, &vec, &hv);
    free(zeros);
    FTL_TRY(st);
    dnnl_layer_normalization_desc_t ld;
    CPU_TRY(dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &plain, NULL, n->p.epsilon,
                                                       dnnl_use_scale | dnnl_use_shift), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &ld, NULL, false, "layer normalization", &pd));
    int out = new_output(p, n->out[0], &plain);
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST}, vals[4] = {v, sv, hv, out};
    return cpu_emit_prim(p, pd, keys, vals, 4, 3, label);
}

/* Softmax over one axis (oneDNN's accurate softmax: max subtracted, sums in fp32). */
static ftl_status emit_softmax(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    int v = p->tval[n->in[0]];
    dnnl_memory_desc_t plain;
    cpu_plain_md(&plain, shape_of(g, n->in[0]), p->vals[v].md.data_type);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    dnnl_softmax_v2_desc_t sd;
    CPU_TRY(dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, dnnl_softmax_accurate, &plain, &plain,
                                              n->p.axis), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &sd, NULL, false, "softmax", &pd));
    int out = new_output(p, n->out[0], &plain);
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {v, out};
    return cpu_emit_prim(p, pd, keys, vals, 2, 1, label);
}

/* ReduceMean over exactly H and W of a 4-D tensor: a global average pool. */
static bool reduce_is_spatial(const nn_graph *g, const nn_node *n) {
    const nn_shape *xs = shape_of(g, n->in[0]);
    if (xs->rank != 4 || n->p.n_axes != 2) return false;
    bool red[4] = {0};
    for (int i = 0; i < 2; i++) {
        int64_t a = n->p.axes[i] < 0 ? n->p.axes[i] + 4 : n->p.axes[i];
        if (a < 0 || a > 3) return false;
        red[a] = true;
    }
    return red[2] && red[3];
}

/* A mean over any non-batch axes (a layer norm's statistics): oneDNN's reduction on plain layouts. */
static ftl_status emit_reduce_mean(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int v = p->tval[n->in[0]];
    dnnl_data_type_t dt = p->vals[v].md.data_type;
    dnnl_memory_desc_t plain, kept, out_md;
    cpu_plain_md(&plain, xs, dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    nn_shape ks = *xs; /* the output with the reduced axes kept as 1s */
    bool red[NN_MAX_RANK] = {0};
    for (int i = 0; i < n->p.n_axes; i++) red[n->p.axes[i] < 0 ? n->p.axes[i] + xs->rank : n->p.axes[i]] = true;
    for (int i = 0; i < xs->rank; i++)
        if (red[i] || n->p.n_axes <= 0) ks.d[i] = 1;
    cpu_plain_md(&kept, &ks, dt);
    dnnl_reduction_desc_t rd;
    CPU_TRY(dnnl_reduction_desc_init(&rd, dnnl_reduction_mean, &plain, &kept, 0.0f, 0.0f), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &rd, n, false, "reduction", &pd));
    int tmp = cpu_new_value(p, &kept, cpu_new_buf(p, 0, p->cur_node));
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {v, tmp};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, 2, 1, label));
    cpu_plain_md(&out_md, shape_of(g, n->out[0]), dt);
    cpu_bind(p, n->out[0], cpu_new_value(p, &out_md, p->vals[tmp].buf));
    return FTL_OK;
}

/* MatMul of two activations (attention): oneDNN matmul, leading dimensions broadcast. */
/* A oneDNN matmul of A (layout ma over buffer abuf) by B (mb over bbuf) into the node's output (md):
 * the views let a broadcast batch or a permutation cost no copy. */
static ftl_status emit_matmul_of_views(nn_plan *p, const nn_node *n, const char *label, const dnnl_memory_desc_t *ma,
                                       int abuf, const dnnl_memory_desc_t *mb, int bbuf, const dnnl_memory_desc_t *md) {
    int a = cpu_new_value(p, ma, abuf), b = cpu_new_value(p, mb, bbuf);
    dnnl_matmul_desc_t mm;
    CPU_TRY(dnnl_matmul_desc_init(&mm, ma, mb, NULL, md), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(node_pd(p, n, &mm, n, false, "matmul", &pd));
    int out = new_output(p, n->out[0], md);
    int keys[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, vals[3] = {a, b, out};
    return cpu_emit_prim(p, pd, keys, vals, 3, 2, label);
}

static ftl_status emit_batched_matmul(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *ys = shape_of(g, n->out[0]);
    int va = p->tval[n->in[0]], vb = p->tval[n->in[1]];
    dnnl_data_type_t dt = p->vals[va].md.data_type;
    nn_shape as = expand_rank(shape_of(g, n->in[0]), ys->rank), bs = expand_rank(shape_of(g, n->in[1]), ys->rank);
    dnnl_memory_desc_t pa, pb, ma, mb, md;
    cpu_plain_md(&pa, shape_of(g, n->in[0]), dt);
    cpu_plain_md(&pb, shape_of(g, n->in[1]), dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &pa, &va));
    FTL_TRY(cpu_ensure(p, n->in[1], &pb, &vb));
    cpu_plain_md(&ma, &as, dt);
    cpu_plain_md(&mb, &bs, dt);
    cpu_plain_md(&md, ys, dt);
    return emit_matmul_of_views(p, n, label, &ma, p->vals[va].buf, &mb, p->vals[vb].buf, &md);
}

/* Einsum in its batched-matmul form: A and B enter oneDNN's matmul as permuted (strided) views of
 * their plain layouts, so a K^T costs no copy. */
static ftl_status emit_einsum(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    int va = p->tval[n->in[0]], vb = p->tval[n->in[1]], perm_a[NN_MAX_RANK], perm_b[NN_MAX_RANK];
    dnnl_data_type_t dt = p->vals[va].md.data_type;
    dnnl_memory_desc_t pa, pb, ma, mb, md;
    cpu_plain_md(&pa, shape_of(g, n->in[0]), dt);
    cpu_plain_md(&pb, shape_of(g, n->in[1]), dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &pa, &va));
    FTL_TRY(cpu_ensure(p, n->in[1], &pb, &vb));
    for (int t = 0; t < n->p.ein_rank; t++) perm_a[t] = n->p.ein_a[t], perm_b[t] = n->p.ein_b[t];
    CPU_TRY(dnnl_memory_desc_permute_axes(&ma, &pa, perm_a), label);
    CPU_TRY(dnnl_memory_desc_permute_axes(&mb, &pb, perm_b), label);
    cpu_plain_md(&md, shape_of(g, n->out[0]), dt);
    return emit_matmul_of_views(p, n, label, &ma, p->vals[va].buf, &mb, p->vals[vb].buf, &md);
}

/* Split: each part a view of the plain input at its offset along the axis, copied out. */
static ftl_status emit_split(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int v = p->tval[n->in[0]];
    dnnl_data_type_t dt = p->vals[v].md.data_type;
    dnnl_memory_desc_t plain_in;
    cpu_plain_md(&plain_in, xs, dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain_in, &v));
    int64_t at = 0;
    for (int k = 0; k < n->n_out; k++) {
        int64_t size = n->p.split[k];
        if (n->out[k] >= 0) {
            const nn_shape *ys = shape_of(g, n->out[k]);
            dnnl_dims_t dims, off;
            for (int i = 0; i < xs->rank; i++) dims[i] = ys->d[i], off[i] = i == n->p.axis ? at : 0;
            dnnl_memory_desc_t view, plain_out;
            CPU_TRY(dnnl_memory_desc_init_submemory(&view, &plain_in, dims, off), label);
            int sv = cpu_new_value(p, &view, p->vals[v].buf);
            cpu_plain_md(&plain_out, ys, dt);
            FTL_TRY(cpu_emit_reorder(p, sv, new_output(p, n->out[k], &plain_out), label));
        }
        at += size;
    }
    return FTL_OK;
}

/* The node that alone reads t (not a graph output, not a summand), at the current micro-batch; -1 else. */
static int sole_reader(const nn_plan *p, const nn_graph *g, int t) {
    int found = nn_graph_sole_reader(g, t, NULL);
    if (found < 0 || p->node_fused[found] != -1) return -1;
    if (p->node_mb && p->node_mb[found] != p->node_mb[p->cur_node]) return -1;
    return found;
}

/* ConvNeXt's block tail after its second linear layer: y = x + scale * transpose(product), the
 * product [N,H,W,C] permuted to [N,C,H,W], scaled per channel (layer scale) and added to the block's
 * input x. Found, it runs as the product's post-ops (x scale, + x), its three nodes emit nothing. */
typedef struct layer_tail {
    int transpose, mul, add;  /* nodes */
    int residual;             /* tensor x */
    const float *scale;       /* C values */
} layer_tail;

static bool find_layer_tail(const nn_plan *p, const nn_graph *g, const nn_node *n, layer_tail *t) {
    const nn_shape *ys = shape_of(g, n->out[0]);
    if (ys->rank != 4 || has_sum_post(n)) return false;
    int64_t c = ys->d[3];
    t->transpose = sole_reader(p, g, n->out[0]);
    if (t->transpose < 0) return false;
    const nn_node *tr = &g->nodes[t->transpose];
    if (tr->op != NN_OP_TRANSPOSE || tr->p.axes[0] != 0 || tr->p.axes[1] != 3 || tr->p.axes[2] != 1 || tr->p.axes[3] != 2)
        return false;
    t->mul = sole_reader(p, g, tr->out[0]);
    if (t->mul < 0) return false;
    const nn_node *mul = &g->nodes[t->mul];
    if (mul->op != NN_OP_MUL || mul->n_post > 0 || mul->n_in != 2) return false;
    int sc = mul->in[0] == tr->out[0] ? mul->in[1] : mul->in[0];
    const nn_tensor *st = &g->tensors[sc];
    if (!nn_is_const(g, sc) || st->dtype != NN_F32 || st->count != c) return false;
    nn_shape e = expand_rank(&st->shape, 4); /* [1, C, 1, 1] */
    if (e.d[0] != 1 || e.d[1] != c || e.d[2] != 1 || e.d[3] != 1) return false;
    t->add = sole_reader(p, g, mul->out[0]);
    if (t->add < 0) return false;
    const nn_node *add = &g->nodes[t->add];
    if (add->op != NN_OP_ADD || add->n_post > 0 || add->n_in != 2) return false;
    t->residual = add->in[0] == mul->out[0] ? add->in[1] : add->in[0];
    if (nn_is_const(g, t->residual) || !same_dims(shape_of(g, t->residual), shape_of(g, tr->out[0])) ||
        p->tval[t->residual] < 0)
        return false;
    t->scale = st->data;
    return true;
}

/* Whether the product may write over x's buffer: x has no reader left but the tail's Add, and no node
 * before that Add reads the buffer. */
static bool residual_overwritable(const nn_plan *p, const nn_graph *g, const layer_tail *t, int xv) {
    int b = p->vals[xv].buf;
    if (b < 0 || p->vals[xv].md.offset0 != 0 || p->bufs[b].last_node > t->add) return false;
    for (int i = p->cur_node + 1; i <= t->add; i++) {
        const nn_node *r = &g->nodes[i];
        if (i == t->add) continue;
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] >= 0 && p->tval[r->in[k]] >= 0 && p->vals[p->tval[r->in[k]]].buf == b) return false;
    }
    return true;
}

/* The product's step with its tail (find_layer_tail): the destination starts as x (in the channels-last
 * layout whose bytes are the product's [N*H*W, C] rows), the post-ops scale and add it. */
static ftl_status emit_product_with_tail(nn_plan *p, nn_graph *g, dnnl_primitive_desc_t pd,
                                         const layer_tail *t, int src_v, int wei_v, int bias_v,
                                         const dnnl_memory_desc_t *scale_md, int scale_index, const char *label) {
    const nn_shape *xs4 = shape_of(g, t->residual);
    dnnl_dims_t d4;
    dims_of(xs4, d4);
    dnnl_memory_desc_t x_cl, dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_desc_init_by_tag(&x_cl, 4, d4, dnnl_f32, dnnl_acdb);
    int xv, scale_v, b;
    FTL_TRY(cpu_rebatch(p, t->residual));
    ftl_status st = cpu_ensure(p, t->residual, &x_cl, &xv);
    if (st == FTL_OK) st = cpu_const_value(p, t->scale, scale_md, scale_md, &scale_v);
    if (st == FTL_OK && residual_overwritable(p, g, t, xv) && p->vals[xv].buf != p->vals[src_v].buf) {
        b = p->vals[xv].buf;
    } else if (st == FTL_OK) { /* x is still read: the product starts from a copy of it */
        b = cpu_new_buf(p, 0, p->last_node[g->nodes[t->add].out[0]]);
        st = cpu_emit_reorder(p, xv, cpu_new_value(p, &x_cl, b), label);
    }
    if (st != FTL_OK) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    int dst_v = cpu_new_value(p, &dst_md, b);
    int keys[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_ATTR_MULTIPLE_POST_OP(scale_index) | DNNL_ARG_SRC_1,
                   DNNL_ARG_BIAS};
    int vals[5] = {src_v, wei_v, dst_v, scale_v, bias_v};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, bias_v >= 0 ? 5 : 4, 2, label));
    cpu_bind(p, g->nodes[t->add].out[0], cpu_new_value(p, &x_cl, b));
    p->node_fused[t->transpose] = p->node_fused[t->mul] = p->node_fused[t->add] = -2;
    return FTL_OK;
}

/* Gemm and MatMul with constant B: an inner product over the last axis. */
static ftl_status emit_inner_product(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    const nn_tensor *bt = &g->tensors[n->in[1]];
    bool gemm = n->op == NN_OP_GEMM;
    int64_t k = xs->d[xs->rank - 1], outs = ys->d[ys->rank - 1], rows = nn_shape_count(xs) / k;
    bool trans_b = gemm && n->p.trans_b;
    float alpha = gemm ? n->p.alpha : 1.0f, beta = gemm ? n->p.beta : 1.0f;
    const float *B = bt->data;
    float *wt = ftl_xmalloc((size_t)(outs * k) * sizeof *wt); /* [outs, k] */
    for (int64_t o = 0; o < outs; o++)
        for (int64_t i = 0; i < k; i++) wt[o * k + i] = alpha * (trans_b ? B[o * k + i] : B[i * outs + o]);
    float *bias = NULL;
    if (n->n_in > 2 && n->in[2] >= 0) { /* Gemm's C, or the bias the optimiser moved into a MatMul */
        const nn_tensor *ct = &g->tensors[n->in[2]];
        bias = ftl_xmalloc((size_t)outs * sizeof *bias);
        for (int64_t o = 0; o < outs; o++) bias[o] = beta * ((const float *)ct->data)[ct->count == 1 ? 0 : o];
    }
    /* int8: u8/s8 rows times s8 weights per output column, quantized as convolutions' are (a quantized
     * model's: its own integers and scales, when it gives them so), the bias over the output scales */
    const int waxis = nn_int8_linear_out_axis(g, n);
    bool model_weights = bt->weight_scale && (bt->weight_scale_axis == -1 || bt->weight_scale_axis == waxis) &&
                         alpha == 1.0f;
    bool q = cpu_node_int8(p, n) && (!p->int8_zero || model_weights);
    int8_t *qw = NULL;
    float *qscales = NULL;
    if (q) {
        qw = ftl_xmalloc((size_t)(outs * k));
        qscales = ftl_xmalloc((size_t)outs * sizeof *qscales);
        float *qbias = ftl_xmalloc((size_t)outs * sizeof *qbias), sx = p->int8_scale[n->in[0]];
        if (p->int8_zero) {
            float *ws = ftl_xmalloc((size_t)outs * sizeof *ws);
            for (int64_t o = 0; o < outs; o++) ws[o] = bt->weight_scale[bt->weight_scale_axis < 0 ? 0 : o];
            nn_quantize_conv_weights_with(wt, outs, k, sx, ws, bias, qw, qscales, qbias);
            free(ws);
        } else {
            nn_quantize_conv_weights(wt, outs, k, sx, bias, qw, qscales, qbias);
        }
        free(bias);
        bias = qbias;
    }
    /* many rows (a transformer's tokens): oneDNN's matmul, faster there than its inner product
     * (~1.2-1.4x at 394 x 768 x 3072 on AVX-512, bench/transformers); few rows (a CNN head): inner product.
     * A quantized model's source zero point needs the matmul. */
    int zsrc = q && p->int8_zero ? p->int8_zero[n->in[0]] : 0;
    bool use_matmul = rows >= 64 || zsrc != 0;
    dnnl_data_type_t dt = q ? int8_type(p, n->in[0]) : cpu_compute_type(p), wdt = q ? dnnl_s8 : dt;
    dnnl_data_type_t wplain = q ? dnnl_s8 : dnnl_f32;
    dnnl_memory_desc_t src_md, wei_any, wei_plain, bias_md, dst_any;
    dnnl_dims_t sd = {rows, k}, wd = {outs, k}, wd_kn = {k, outs}, bd = {outs}, bd2 = {1, outs}, dd = {rows, outs};
    dnnl_memory_desc_init_by_tag(&src_md, 2, sd, dt, dnnl_ab);
    if (use_matmul) { /* weights [k, outs] over the same [outs, k] array */
        dnnl_memory_desc_init_by_tag(&wei_any, 2, wd_kn, wdt, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&wei_plain, 2, wd_kn, wplain, dnnl_ba);
        dnnl_memory_desc_init_by_tag(&bias_md, 2, bd2, dnnl_f32, dnnl_ab);
    } else {
        dnnl_memory_desc_init_by_tag(&wei_any, 2, wd, wdt, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&wei_plain, 2, wd, wplain, dnnl_ab);
        dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    }
    bool bf16_out = dt == dnnl_bf16 && !has_sum_post(n) && cpu_switch_on("FTL_NN_BF16_PRODUCTS") &&
                    read_as_bf16_only(p, g, n->out[0], 0);
    dnnl_memory_desc_init_by_tag(&dst_any, 2, dd, bf16_out ? dnnl_bf16 : dnnl_f32, dnnl_ab);
    dnnl_inner_product_desc_t ipd;
    dnnl_matmul_desc_t mmd;
    dnnl_status_t s = use_matmul ? dnnl_matmul_desc_init(&mmd, &src_md, &wei_any, bias ? &bias_md : NULL, &dst_any)
                                 : dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_inference, &src_md, &wei_any,
                                                                        bias ? &bias_md : NULL, &dst_any);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    layer_tail tail = {0};
    bool has_tail = !q && use_matmul && dt == dnnl_f32 && find_layer_tail(p, g, n, &tail);
    dnnl_memory_desc_t scale_md;
    dnnl_dims_t scale_dims = {1, outs};
    dnnl_memory_desc_init_by_tag(&scale_md, 2, scale_dims, dnnl_f32, dnnl_ab);
    int scale_index = -1;
    ftl_status st = cpu_check(s, label);
    if (st == FTL_OK)
        st = q          ? cpu_make_attr_int8(n, &attr, qscales, outs, 1.0f, zsrc, 0)
             : has_tail ? cpu_make_attr_scaled_sum(n, &scale_md, &attr, &scale_index)
                        : cpu_make_attr(n, &attr, false);
    if (st == FTL_OK) {
        s = dnnl_primitive_desc_create(&pd, use_matmul ? (const void *)&mmd : (const void *)&ipd, attr, p->engine, NULL);
        dnnl_primitive_attr_destroy(attr);
        if (s != dnnl_success)
            st = ftl_fail_context(cpu_check(s, use_matmul ? "matmul" : "inner product"), "node '%s' (%s)", n->name, n->op_type);
    }
    /* Without AVX-512, oneDNN 2.6's matmul has no fast kernel for the tail's per-channel scale and sum
     * post-ops (measured: ConvNeXt-T's MatMuls 1,000x slower on an AVX2 EPYC, in its reference kernel):
     * then the product runs with the node's own post-ops and the tail as the nodes it is. */
    if (st == FTL_OK && has_tail && pd_is_reference(pd)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        has_tail = false;
        st = cpu_make_attr(n, &attr, false);
        if (st == FTL_OK) {
            s = dnnl_primitive_desc_create(&pd, &mmd, attr, p->engine, NULL);
            dnnl_primitive_attr_destroy(attr);
            if (s != dnnl_success) st = ftl_fail_context(cpu_check(s, "matmul"), "node '%s' (%s)", n->name, n->op_type);
        }
    }
    int src_v = -1, wei_v = -1, bias_v = -1, dst_v;
    if (st == FTL_OK) {
        /* the input as a plain [rows, k] matrix of the compute type */
        int v = p->tval[n->in[0]];
        dnnl_memory_desc_t plain;
        cpu_plain_md(&plain, xs, dt);
        st = cpu_ensure(p, n->in[0], &plain, &v);
        if (st == FTL_OK) src_v = cpu_new_value(p, &src_md, p->vals[v].buf);
    }
    if (st == FTL_OK) {
        dnnl_memory_desc_t wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        st = cpu_const_value(p, q ? (const void *)qw : wt, &wei_plain, &wei_md, &wei_v);
    }
    if (st == FTL_OK && bias) st = cpu_const_value(p, bias, &bias_md, &bias_md, &bias_v);
    free(wt);
    free(bias);
    free(qw);
    free(qscales);
    if (st != FTL_OK) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        return st;
    }
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), plain_y;
    cpu_plain_md(&plain_y, ys, bf16_out ? dnnl_bf16 : dnnl_f32);
    if (has_tail) return emit_product_with_tail(p, g, pd, &tail, src_v, wei_v, bias_v, &scale_md, scale_index, label);
    int sum_t = -1;
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_SUM) sum_t = n->post[k].sum_tensor;
    int b = -1;
    if (sum_t >= 0) {
        /* dst += summand (a residual Add): the matmul writes over the summand's buffer, or over a
         * copy of it when the summand is still needed later */
        int sv;
        st = cpu_ensure(p, sum_t, &plain_y, &sv);
        if (st == FTL_OK && (!cpu_can_overwrite(p, sv) || p->vals[sv].buf == p->vals[src_v].buf)) {
            b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
            st = cpu_emit_reorder(p, sv, cpu_new_value(p, &plain_y, b), label);
        } else if (st == FTL_OK) {
            b = p->vals[sv].buf;
        }
        if (st != FTL_OK) {
            dnnl_primitive_desc_destroy(pd);
            return st;
        }
    } else {
        b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
    }
    dst_v = cpu_new_value(p, &dst_md, b);
    cpu_bind(p, n->out[0], cpu_new_value(p, &plain_y, b));
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int vals[4] = {src_v, wei_v, dst_v, bias_v};
    return cpu_emit_prim(p, pd, keys, vals, bias_v >= 0 ? 4 : 3, 2, label);
}

ftl_status cpu_emit_node(nn_plan *p, nn_graph *g, int node) {
    const nn_node *n = &g->nodes[node];
    switch (n->op) {
    case NN_OP_CONV: return emit_conv(p, g, n);
    case NN_OP_FAKEQUANT: return emit_fake_quant(p, g, n);
    case NN_OP_RELU: case NN_OP_CLIP: case NN_OP_LEAKYRELU: case NN_OP_SIGMOID: case NN_OP_HARDSIGMOID:
    case NN_OP_HARDSWISH: case NN_OP_TANH:
        return emit_activation(p, g, n);
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV: return emit_binary(p, g, n);
    case NN_OP_REDUCEMEAN:
        if (!reduce_is_spatial(g, n)) return emit_reduce_mean(p, g, n);
        return emit_pool(p, g, n);
    case NN_OP_MAXPOOL: case NN_OP_AVGPOOL: case NN_OP_GLOBALAVGPOOL: case NN_OP_GLOBALMAXPOOL:
        return emit_pool(p, g, n);
    case NN_OP_FLATTEN: case NN_OP_RESHAPE: case NN_OP_SQUEEZE: case NN_OP_UNSQUEEZE: case NN_OP_IDENTITY:
    case NN_OP_DROPOUT:
        return emit_view(p, g, n);
    case NN_OP_TRANSPOSE: return emit_transpose(p, g, n);
    case NN_OP_EINSUM: return emit_einsum(p, g, n);
    case NN_OP_SPLIT: return emit_split(p, g, n);
    case NN_OP_CONCAT: return emit_concat(p, g, n);
    case NN_OP_PAD: return emit_pad(p, g, n);
    case NN_OP_SLICE: return emit_slice(p, g, n);
    case NN_OP_GATHER: return emit_gather_one(p, g, n);
    case NN_OP_SOFTMAX: return emit_softmax(p, g, n);
    case NN_OP_LAYERNORM: return emit_layernorm(p, g, n);
    case NN_OP_SQRT: case NN_OP_POW: case NN_OP_GELU: case NN_OP_SILU: return emit_activation(p, g, n);
    case NN_OP_ERF:
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Erf): supported only inside GELU (0.5 x (1 + erf(x / sqrt 2)))",
                        n->name);
    case NN_OP_GEMM: case NN_OP_MATMUL:
        if (n->op == NN_OP_MATMUL && !nn_is_const(g, n->in[1])) return emit_batched_matmul(p, g, n);
        return emit_inner_product(p, g, n);
    case NN_OP_BATCHNORM:
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (BatchNormalization): only 4-D inputs are supported", n->name);
    default: return fail_node(n, "not supported by the CPU backend");
    }
}
