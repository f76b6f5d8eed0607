/* CPU emitter for convolutions: oneDNN picks their blocked layouts (format `any`), so activations stay
 * blocked from conv to conv; Winograd where it pays, int8 with per-channel scales, and the 1x1 -> 3x3
 * depthwise pairs oneDNN runs as one primitive (the depthwise conv a post-op of the 1x1). The plan-wide
 * choices among these (struct cpu_conv_choices, emit_conv.h) are made and kept here. */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "nn/ir/quantize.h"
#include "nn/ir/separable.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Channels in blocks of the vector width: nChw16c with AVX-512, nChw8c with AVX2. */
dnnl_format_tag_t cpu_blocked_tag(void) { return __builtin_cpu_supports("avx512f") ? dnnl_aBcd16b : dnnl_aBcd8b; }

dnnl_format_tag_t cpu_conv_layout(const nn_plan *p) {
    const char *e = getenv("FTL_NN_LAYOUT");
    if (e && strcmp(e, "any") == 0) return dnnl_format_tag_any;
    if (e && strcmp(e, "nhwc") == 0) return dnnl_acdb;
    if (e && strcmp(e, "blocked") == 0) return cpu_blocked_tag();
    /* bf16: blocked, but not for calibration's observer, which takes each value once: a blocked layout
     * would hand it the channels' padding too (fp32's plans for it are never blocked either) */
    if (p->precision == NN_PREC_BF16) return p->observer ? dnnl_acdb : dnnl_aBcd16b;
    return p->conv_choice->blocked_layout ? cpu_blocked_tag() : dnnl_acdb;
}

/* Winograd pays when there are enough channels and enough pixels per run (bench/backbone/convbench.c,
 * jit_wino_4x3 vs direct brgconv). Below 64 channels the transforms cost more than they save
 * (Xception's 32->64 conv at 147x147: 407 vs 508 GFLOP/s). Its transformed weights are 4x the direct
 * ones (6x6 tiles): when they outweigh the run's activations by more than 12x, they are re-read for
 * too few pixels (ResNet-50 at 1 image: layer3's 14x14 convs 56% of peak instead of 94%, layer4's
 * 7x7 44%; alone, 512 channels at 7x7: 527 vs 602 GFLOP/s at 8 images, 757 vs 567 at 16). */
bool cpu_conv_winograd_eligible(const nn_plan *p, const nn_node *n, const nn_shape *x, const nn_shape *y) {
    const nn_params *c = &n->p;
    const int min_ch = 64;
    if (!(p->conv_choice->winograd && p->precision == NN_PREC_F32 && c->group == 1 && c->kernel[0] == 3 && c->kernel[1] == 3 &&
          c->stride[0] == 1 && c->stride[1] == 1 && c->dilation[0] == 1 && c->dilation[1] == 1 && x->d[1] % 16 == 0 &&
          y->d[1] % 16 == 0 && x->d[1] >= min_ch && y->d[1] >= min_ch))
        return false;
    double ic = (double)x->d[1], oc = (double)y->d[1], pixels = (double)y->d[0] * (double)y->d[2] * (double)y->d[3];
    double weights = 36.0 * ic * oc, activations = pixels * (ic + oc);
    return weights <= 12.0 * activations;
}

/* The Winograd implementation with 4x4 output tiles when oneDNN offers it (it lists the 2x3 one
 * first; 4x3 measured 5-10% faster on ResNet's 56x56 and 28x28 layers), else its first. */
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

/* Whether the int8 convolution n writes its output requantized (u8/s8 at the output's scale). */
static bool writes_int8(const nn_plan *p, const nn_node *n) {
    int y = n->out[0];
    return p->int8->written[y] && p->int8->scale[y] > 0 && !has_sum_post(n);
}

static void int8_conv_consts_make(const nn_plan *p, const nn_graph *g, const nn_node *n, int64_t m, int8_conv_consts *q) {
    const nn_tensor *w = &g->tensors[n->in[1]];
    int64_t per = nn_shape_count(&w->shape) / m;
    float sx = p->int8->scale[n->in[0]];
    bool requant = writes_int8(p, n), act = has_act_post(n);
    float sy = requant ? p->int8->scale[n->out[0]] : 1.0f;
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
    return p->precision == NN_PREC_F32 && !p->int8 && !p->observer && cpu_switch_on("FTL_NN_DEPTHWISE_FUSION") &&
           __builtin_cpu_supports("avx2"); /* AVX-512 CPUs have it too */
}

int cpu_depthwise_pairs(const nn_plan *p, const nn_graph *g) {
    if (!cpu_depthwise_fusion_on(p)) return 0;
    int pairs = 0;
    for (int i = 0; i < g->n_nodes; i++) pairs += depthwise_reader(g, &g->nodes[i]) >= 0;
    return pairs;
}

void cpu_conv_choose(nn_plan *p, const nn_graph *g, bool winograd) {
    cpu_conv_choices *c = p->conv_choice = ftl_xcalloc(1, sizeof *p->conv_choice);
    c->winograd = winograd;
    c->depthwise_pairs = g->pointwise_depthwise ? cpu_depthwise_pairs(p, g) : 0;
    c->blocked_layout = (g->pointwise_depthwise && cpu_depthwise_fusion_on(p)) ||
                        (g->blocked_images && p->precision == NN_PREC_F32 && !p->int8 && !p->observer);
}

/* The depthwise reader of n when the plan fuses it here (same micro-batch, not taken yet). */
static int depthwise_follower(const nn_plan *p, const nn_graph *g, const nn_node *n) {
    if (!p->conv_choice->depthwise_pairs || !p->conv_choice->blocked_layout || cpu_conv_layout(p) != cpu_blocked_tag()) return -1;
    int d = depthwise_reader(g, n);
    if (d < 0 || cpu_attention_role(p, d) != -1 || (p->node_mb && p->node_mb[d] != p->node_mb[p->cur_node])) return -1;
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
    int dst_v = cpu_new_output(p, dw->out[0], &dst_md);
    int keys[6] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS,
                   DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS};
    int vals[6] = {src_v, wei_v, dst_v, bias_v, dww_v, dwb_v};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, 6, 2, label));
    p->steps[p->n_steps - 1].also_node = dw_node;
    cpu_attention_mark_absorbed(p, dw_node);
    *done = true;
    return FTL_OK;
}

/* The value a convolution writes output tensor `out` to, of layout dst_md, with node `node`'s residual
 * sum (summand tensor sum_t, -1: none): the summand's own buffer when nothing after `node` reads it and
 * the source src_v is elsewhere, else a copy of it; a fresh output without a sum. */
static ftl_status conv_destination(nn_plan *p, int node, int out, int sum_t, const dnnl_memory_desc_t *dst_md, int src_v,
                                   const char *label, int *dst_v) {
    if (sum_t < 0) {
        *dst_v = cpu_new_output(p, out, dst_md);
        return FTL_OK;
    }
    int sv, here = p->cur_node;
    FTL_TRY(cpu_ensure(p, sum_t, dst_md, &sv));
    p->cur_node = node; /* a fused step doing a later node's work: its summand is free as of that node */
    bool overwrite = cpu_can_overwrite(p, sv) && p->vals[sv].buf != p->vals[src_v].buf;
    p->cur_node = here;
    if (!overwrite) {
        *dst_v = cpu_new_output(p, out, dst_md);
        return cpu_emit_reorder(p, sv, *dst_v, label);
    }
    *dst_v = cpu_new_value(p, dst_md, p->vals[sv].buf);
    cpu_bind(p, out, *dst_v);
    return FTL_OK;
}

/* A post-op as ftl's separable kernel applies it (ReLU and Clip activations, sums); false for others. */
static bool separable_post(const nn_postop *po, float scale, cpu_separable_post *out) {
    if (po->kind == NN_POST_SUM) {
        *out = (cpu_separable_post){.sum = true};
        return true;
    }
    if (po->act.kind == NN_ACT_RELU && po->act.alpha == 0.0f) *out = (cpu_separable_post){.lo = 0.0f, .hi = INFINITY, .scale = scale};
    else if (po->act.kind == NN_ACT_CLIP) *out = (cpu_separable_post){.lo = po->act.alpha, .hi = po->act.beta, .scale = scale};
    else return false;
    return true;
}

static bool separable_posts_ok(const nn_node *n, bool sums) {
    cpu_separable_post unused;
    if (n->n_post > CPU_SEPARABLE_MAX_POSTS) return false;
    for (int k = 0; k < n->n_post; k++)
        if (!separable_post(&n->post[k], 1.0f, &unused) || (unused.sum && !sums)) return false;
    return true;
}

/* The 1x1 convolution that ftl's separable kernel (kernels/separable_int8.c) runs together with int8
 * depthwise convolution n, or -1: a separable pair by its structure (nn/ir/separable.h; stride 2 only with
 * FTL_NN_SEPARABLE_STRIDE2=1, and never into a 1x1 that widens), n of u8 or s8 into a requantized tensor,
 * ReLU / Clip post-ops on both (the 1x1 also sums), both int8, at one micro-batch, in the channels-last
 * layout. */
static int separable_reader(const nn_plan *p, const nn_graph *g, const nn_node *n) {
    if (!p->int8 || p->observer || cpu_int8_has_zero(p->int8) || !cpu_node_int8(p, n) || cpu_conv_layout(p) != dnnl_acdb ||
        !separable_posts_ok(n, false) || !cpu_separable_int8_wanted())
        return -1;
    int m = nn_separable_pointwise(g, (int)(n - g->nodes), cpu_separable_stride2_wanted());
    if (m < 0) return -1;
    dnnl_data_type_t in_type = int8_type(p, n->in[0]);
    if ((in_type != dnnl_u8 && in_type != dnnl_s8) || !writes_int8(p, n)) return -1;
    const nn_node *r = &g->nodes[m];
    if (!separable_posts_ok(r, !writes_int8(p, r)) || cpu_attention_role(p, m) != -1 || !cpu_node_int8(p, r) ||
        (p->node_mb && p->node_mb[m] != p->node_mb[p->cur_node]))
        return -1;
    /* at stride 2 the round trip saved is a quarter of the input's size: opt-in (kernels/separable_int8.h),
     * and never where the 1x1 widens (MobileNetV1's 64 -> 128, 128 -> 256: oneDNN's pair 4-8% faster) */
    if (n->p.stride[0] == 2 && shape_of(g, r->out[0])->d[1] > shape_of(g, n->in[0])->d[1]) return -1;
    return m;
}

/* The MaxPool that the step of a separable pair ending in 1x1 m takes in (kernels/separable_int8.h), or
 * -1: the run's pool by its structure (nn/ir/separable.h), m's output f32 without a residual sum, at the
 * same micro-batch. */
static int separable_pool_reader(const nn_plan *p, const nn_graph *g, int m, bool f32_out, int sum_t) {
    if (!f32_out || sum_t >= 0 || !cpu_separable_pool_wanted()) return -1;
    int q = nn_separable_pool(g, m);
    if (q < 0 || cpu_attention_role(p, q) != -1 || (p->node_mb && p->node_mb[q] != p->node_mb[m])) return -1;
    return q;
}

/* Depthwise n and 1x1 m as one ftl:separable_int8 step (m absorbed; *done false, nothing emitted, when
 * the kernel refuses the shape). The same scales, biases and post-ops the two oneDNN primitives would
 * get, so the same bits. */
static ftl_status emit_separable_int8(nn_plan *p, nn_graph *g, const nn_node *n, int m, bool *done) {
    const nn_node *r = &g->nodes[m];
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, r->out[0]);
    int64_t c = xs->d[1], o = ys->d[1];
    int8_conv_consts qd = {0}, qp = {0};
    int8_conv_consts_make(p, g, n, c, &qd);
    int8_conv_consts_make(p, g, r, o, &qp);
    cpu_separable_output out = !writes_int8(p, r)                   ? CPU_SEPARABLE_F32
                               : int8_type(p, r->out[0]) == dnnl_u8 ? CPU_SEPARABLE_U8
                                                                    : CPU_SEPARABLE_S8;
    dnnl_data_type_t in_type = int8_type(p, n->in[0]);
    cpu_separable_int8_desc d = {.channels = (int)c, .outputs = (int)o, .height = (int)xs->d[2], .width = (int)xs->d[3],
                                 .src_signed = in_type == dnnl_s8, .stride2 = n->p.stride[0] == 2,
                                 .dw_pad_top = n->p.pad_begin[0], .dw_pad_left = n->p.pad_begin[1],
                                 .out_height = (int)ys->d[2], .out_width = (int)ys->d[3],
                                 .dw_weights = qd.weights, .dw_scales = qd.scales, .dw_bias = qd.bias,
                                 .dw_n_post = n->n_post, .mid_unsigned = int8_type(p, n->out[0]) == dnnl_u8,
                                 .pw_weights = qp.weights, .pw_scales = qp.scales, .pw_bias = qp.bias,
                                 .n_post = r->n_post, .output = out};
    /* the last activation carries the requantization (int8_conv_consts), as in cpu_make_attr_int8; the
     * depthwise has activations only */
    for (int k = 0; k < n->n_post; k++)
        separable_post(&n->post[k], k == n->n_post - 1 ? qd.act_scale : 1.0f, &d.dw_post[k]);
    int last = -1, sum_t = -1;
    for (int k = 0; k < r->n_post; k++)
        if (r->post[k].kind == NN_POST_ACT) last = k;
    for (int k = 0; k < r->n_post; k++) {
        separable_post(&r->post[k], k == last ? qp.act_scale : 1.0f, &d.post[k]);
        if (r->post[k].kind == NN_POST_SUM) sum_t = r->post[k].sum_tensor;
    }
    int q = separable_pool_reader(p, g, m, out == CPU_SEPARABLE_F32, sum_t);
    cpu_separable_int8 *kernel = NULL;
    if (q >= 0) { /* the kernel may refuse the pool (a window off the image): it then stays a step of its own */
        const nn_node *pool = &g->nodes[q];
        const nn_shape *ps = shape_of(g, pool->out[0]);
        cpu_separable_int8_desc dp = d;
        dp.pool_height = (int)ps->d[2];
        dp.pool_width = (int)ps->d[3];
        dp.pool_pad_top = (int)pool->p.pad_begin[0];
        dp.pool_pad_left = (int)pool->p.pad_begin[1];
        kernel = cpu_separable_int8_make(&dp);
        if (kernel) ys = ps;
        else q = -1;
    }
    if (!kernel) kernel = cpu_separable_int8_make(&d);
    int8_conv_consts_free(&qd);
    int8_conv_consts_free(&qp);
    *done = kernel != NULL;
    if (!kernel) { /* a shape separable_reader let through: the two convolutions run apart */
        ftl_log_debug("nn: node '%s': the separable kernel refused the pair; oneDNN runs it", n->name);
        return FTL_OK;
    }
    dnnl_dims_t sd, dd;
    dims_of(xs, sd);
    dims_of(ys, dd);
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_memory_desc_init_by_tag(&src_md, 4, sd, in_type, dnnl_acdb);
    dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, out == CPU_SEPARABLE_F32 ? dnnl_f32 : int8_type(p, r->out[0]), dnnl_acdb);
    int src_v, dst_v = -1;
    ftl_status st = cpu_ensure(p, n->in[0], &src_md, &src_v);
    if (st == FTL_OK && sum_t >= 0) st = cpu_rebatch(p, sum_t); /* compile rebatches m's summand, but m is skipped */
    if (st == FTL_OK) st = conv_destination(p, m, q >= 0 ? g->nodes[q].out[0] : r->out[0], sum_t, &dst_md, src_v, label, &dst_v);
    if (st != FTL_OK) {
        cpu_separable_int8_free(kernel);
        return st;
    }
    cpu_step *step = cpu_host_step(p, CPU_STEP_SEPARABLE, src_v, dst_v, q >= 0 ? "ftl:separable_int8+max_pool" : "ftl:separable_int8", label);
    step->separable = kernel;
    step->also_node = m;
    cpu_attention_mark_absorbed(p, m);
    if (q >= 0) cpu_attention_mark_absorbed(p, q);
    return FTL_OK;
}

/* A convolution whose input has an int8 form runs in int8 when oneDNN has a fast kernel for it,
 * else in fp32 like the rest. */
ftl_status cpu_emit_conv(nn_plan *p, nn_graph *g, const nn_node *n) {
    int pointwise = separable_reader(p, g, n);
    if (pointwise >= 0) {
        bool done = false;
        FTL_TRY(emit_separable_int8(p, g, n, pointwise, &done));
        if (done) return FTL_OK;
    }
    if (cpu_node_int8(p, n) && (!cpu_int8_has_zero(p->int8) || nn_qdq_int8_node(g, n))) { /* a quantized model: its own weights */
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
    int zsrc = q ? cpu_int8_zero(p->int8, n->in[0]) : 0;
    int zdst = q && cpu_int8_has_zero(p->int8) && writes_int8(p, n) ? p->int8->zero[n->out[0]] : 0;
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
    if (used_winograd) p->conv_choice->n_winograd++;
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
    if (st == FTL_OK) st = conv_destination(p, (int)(n - g->nodes), n->out[0], sum_t, &dst_md, src_v, label, &dst_v);
    if (st != FTL_OK) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int vals[4] = {src_v, wei_v, dst_v, bias_v};
    return cpu_emit_prim(p, pd, keys, vals, has_bias ? 4 : 3, 2, label);
}
