/* oneDNN CPU backend: plan construction helpers, memory planning, execution.
 * Threads: Debian's libdnnl 2.6 is built with the OpenMP runtime (DNNL_CPU_RUNTIME_OMP, GNU
 * libgomp), so the thread count is omp_set_num_threads() on the calling thread; it is set before
 * primitives are created (oneDNN sizes its work split then) and before each run. */
#include "nn/cpu/cpu_plan.h"
#include "nn/cpu/emitters.h"
#include "nn/cpu/kernels/layernorm.h"
#include "nn/ir/topo.h"
#include "nn/ir/shape.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/timing.h"

#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ARENA_ALIGN = 4096, BUF_ALIGN = 256 };

ftl_status cpu_check(dnnl_status_t s, const char *what) {
    if (s == dnnl_success) return FTL_OK;
    const char *why = s == dnnl_unimplemented ? "no oneDNN implementation for this configuration"
                      : s == dnnl_out_of_memory ? "out of memory"
                      : s == dnnl_invalid_arguments ? "invalid arguments"
                                                    : "oneDNN error";
    return ftl_fail(s == dnnl_out_of_memory ? FTL_E_NOMEM : FTL_E_UNSUPPORTED, "%s: %s (dnnl status %d)", what, why, (int)s);
}

bool cpu_switch_on(const char *name) {
    const char *e = getenv(name);
    return !(e && strcmp(e, "0") == 0);
}

dnnl_data_type_t cpu_compute_type(const nn_plan *p) { return p->precision == NN_PREC_BF16 ? dnnl_bf16 : dnnl_f32; }

/* Channels in blocks of the vector width: nChw16c with AVX-512, nChw8c with AVX2. */
dnnl_format_tag_t cpu_blocked_tag(void) { return __builtin_cpu_supports("avx512f") ? dnnl_aBcd16b : dnnl_aBcd8b; }

dnnl_format_tag_t cpu_conv_layout(const nn_plan *p) {
    const char *e = getenv("FTL_NN_LAYOUT");
    if (e && strcmp(e, "any") == 0) return dnnl_format_tag_any;
    if (e && strcmp(e, "nhwc") == 0) return dnnl_acdb;
    if (e && strcmp(e, "blocked") == 0) return cpu_blocked_tag();
    if (p->precision == NN_PREC_BF16) return dnnl_aBcd16b;
    return p->blocked_layout ? cpu_blocked_tag() : dnnl_acdb;
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
    if (!(p->winograd && p->precision == NN_PREC_F32 && c->group == 1 && c->kernel[0] == 3 && c->kernel[1] == 3 &&
          c->stride[0] == 1 && c->stride[1] == 1 && c->dilation[0] == 1 && c->dilation[1] == 1 && x->d[1] % 16 == 0 &&
          y->d[1] % 16 == 0 && x->d[1] >= min_ch && y->d[1] >= min_ch))
        return false;
    double ic = (double)x->d[1], oc = (double)y->d[1], pixels = (double)y->d[0] * (double)y->d[2] * (double)y->d[3];
    double weights = 36.0 * ic * oc, activations = pixels * (ic + oc);
    return weights <= 12.0 * activations;
}

int cpu_new_value(nn_plan *p, const dnnl_memory_desc_t *md_in, int buf) {
    const dnnl_memory_desc_t copy = *md_in, *md = &copy; /* md_in may point into p->vals, which may move */
    if (p->n_vals == p->cap_vals) {
        p->cap_vals = p->cap_vals ? 2 * p->cap_vals : 256;
        p->vals = ftl_xrealloc(p->vals, (size_t)p->cap_vals * sizeof *p->vals);
    }
    int v = p->n_vals++;
    p->vals[v] = (cpu_value){.md = *md, .buf = buf, .mb = p->cur_mb};
    if (buf >= 0) {
        size_t sz = dnnl_memory_desc_get_size(md);
        if (sz > p->bufs[buf].size) p->bufs[buf].size = sz;
    }
    return v;
}

int cpu_new_buf(nn_plan *p, size_t size, int last_node) {
    if (p->n_bufs == p->cap_bufs) {
        p->cap_bufs = p->cap_bufs ? 2 * p->cap_bufs : 256;
        p->bufs = ftl_xrealloc(p->bufs, (size_t)p->cap_bufs * sizeof *p->bufs);
    }
    int b = p->n_bufs++;
    p->bufs[b] = (cpu_buf){.size = size, .first_step = INT_MAX, .last_step = -1, .last_node = last_node};
    return b;
}

void cpu_plain_md(dnnl_memory_desc_t *md, const nn_shape *s, dnnl_data_type_t dt) {
    dnnl_dims_t dims, strides;
    int64_t stride = 1;
    int rank = s->rank > 0 ? s->rank : 1;
    for (int i = rank - 1; i >= 0; i--) {
        dims[i] = s->rank > 0 ? s->d[i] : 1;
        strides[i] = stride;
        stride *= dims[i];
    }
    dnnl_memory_desc_init_by_strides(md, rank, dims, dt, strides);
}

void cpu_bind(nn_plan *p, int t, int v) {
    p->tval[t] = v;
    int b = p->vals[v].buf;
    if (b >= 0 && p->last_node[t] > p->bufs[b].last_node) p->bufs[b].last_node = p->last_node[t];
}

/* Bytes between consecutive images of a value of mb images whose first dimension is outermost
 * (mb images, or mb x k rows of a flattened view); 0 when the images are not contiguous. */
static size_t image_bytes(const dnnl_memory_desc_t *md, int mb) {
    if (md->format_kind != dnnl_blocked || md->ndims < 1 || mb < 1 || md->dims[0] % mb != 0 ||
        md->padded_dims[0] != md->dims[0])
        return 0;
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    for (int k = 0; k < bd->inner_nblks; k++)
        if (bd->inner_idxs[k] == 0) return 0;
    /* one image: the stride of an axis of extent 1 means nothing (a partial batch's one-image chunks of
     * ViT's [tokens, batch, channels] views: [1, 197, 768] with stride 768 on its batch axis) */
    if (md->dims[0] == 1) return mb == 1 ? dnnl_memory_desc_get_size(md) : 0;
    for (int i = 1; i < md->ndims; i++)
        if (bd->strides[i] > bd->strides[0]) return 0;
    return (size_t)bd->strides[0] * dnnl_data_type_size(md->data_type) * (size_t)(md->dims[0] / mb);
}

ftl_status cpu_rebatch(nn_plan *p, int t) {
    int v = p->tval[t];
    if (v < 0 || p->vals[v].mb == p->cur_mb) return FTL_OK;
    dnnl_memory_desc_t md = p->vals[v].md;
    int mb = p->vals[v].mb;
    if (p->vals[v].buf < 0 || md.dims[0] % mb != 0 || md.offset0 != 0 || !image_bytes(&md, mb))
        return ftl_fail(FTL_E_UNSUPPORTED, "tensor %d: its layout does not keep images contiguous, so it cannot be "
                        "split into micro-batches", t);
    md.dims[0] = md.padded_dims[0] = md.dims[0] / mb * p->cur_mb; /* images x rows per image */
    cpu_bind(p, t, cpu_new_value(p, &md, p->vals[v].buf));
    return FTL_OK;
}

bool cpu_one_chunk_until_read(const nn_plan *p, int t) {
    int last = p->last_node[t];
    if (last == INT_MAX) return false;
    if (!p->node_mb) return true;
    for (int i = p->cur_node; i <= last; i++)
        if (p->node_mb[i] != p->node_mb[p->cur_node]) return false;
    return true;
}

bool cpu_can_overwrite(const nn_plan *p, int v) {
    int b = p->vals[v].buf;
    return b >= 0 && p->bufs[b].last_node <= p->cur_node;
}

cpu_step *cpu_new_step(nn_plan *p, const char *label) {
    if (p->n_steps == p->cap_steps) {
        p->cap_steps = p->cap_steps ? 2 * p->cap_steps : 256;
        p->steps = ftl_xrealloc(p->steps, (size_t)p->cap_steps * sizeof *p->steps);
    }
    cpu_step *s = &p->steps[p->n_steps++];
    memset(s, 0, sizeof *s);
    s->writes = -1;
    s->also_node = -1;
    s->mb = p->cur_mb;
    s->node = p->cur_node;
    snprintf(s->label, sizeof s->label, "%s", label);
    return s;
}

void cpu_touch(nn_plan *p, int v, int step) {
    int b = p->vals[v].buf;
    if (b < 0) return;
    if (step < p->bufs[b].first_step) p->bufs[b].first_step = step;
    if (step > p->bufs[b].last_step) p->bufs[b].last_step = step;
}

ftl_status cpu_emit_prim(nn_plan *p, dnnl_primitive_desc_t pd, const int *keys, const int *vals, int nargs,
                         int writes, const char *label) {
    dnnl_primitive_t prim;
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
    char impl_copy[64];
    snprintf(impl_copy, sizeof impl_copy, "%s", impl ? impl : "?");
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) return cpu_check(s, label);
    cpu_step *st = cpu_new_step(p, label);
    st->kind = CPU_STEP_PRIM;
    st->prim = prim;
    st->nargs = nargs;
    st->writes = writes;
    memcpy(st->impl, impl_copy, sizeof st->impl);
    for (int i = 0; i < nargs; i++) {
        st->arg_key[i] = keys[i];
        st->arg_val[i] = vals[i];
        cpu_touch(p, vals[i], p->n_steps - 1);
    }
    if (scratch) {
        st->scratch = true;
        if (scratch > p->scratch_size) p->scratch_size = scratch;
    }
    if (strncmp(impl_copy, "ref", 3) == 0) ftl_log_debug("nn: %s runs oneDNN's reference (slow) kernel", label);
    return FTL_OK;
}

ftl_status cpu_emit_fill(nn_plan *p, int v, float value, const char *label) {
    cpu_step *st = cpu_new_step(p, label);
    st->kind = CPU_STEP_FILL;
    st->nargs = 1;
    st->arg_val[0] = v;
    st->writes = 0;
    st->fill_value = value;
    cpu_touch(p, v, p->n_steps - 1);
    return FTL_OK;
}

bool cpu_node_int8(const nn_plan *p, const nn_node *n) {
    return p->int8_scale && n->n_in > 0 && n->in[0] >= 0 && p->int8_scale[n->in[0]] > 0;
}

static bool is_int8_type(dnnl_data_type_t t) { return t == dnnl_u8 || t == dnnl_s8; }

cpu_step *cpu_host_step(nn_plan *p, cpu_step_kind kind, int src, int dst, const char *impl, const char *label) {
    cpu_step *st = cpu_new_step(p, label);
    st->kind = kind;
    st->nargs = 2;
    st->arg_key[0] = DNNL_ARG_FROM;
    st->arg_key[1] = DNNL_ARG_TO;
    st->arg_val[0] = src;
    st->arg_val[1] = dst;
    st->writes = 1;
    snprintf(st->impl, sizeof st->impl, "%s", impl);
    cpu_touch(p, src, p->n_steps - 1);
    cpu_touch(p, dst, p->n_steps - 1);
    return st;
}

/* A conversion src -> dst that ftl runs itself (kind COPY or CONVERT). */
static cpu_step *host_conversion_step(nn_plan *p, cpu_step_kind kind, int src, int dst, const char *impl, const char *label) {
    p->n_reorders++;
    return cpu_host_step(p, kind, src, dst, impl, label);
}

/* A reorder src -> dst whose values are multiplied by `scale` (1: a plain conversion); zero: the
 * int8 side's zero point. */
static ftl_status emit_reorder_scaled(nn_plan *p, int src, int dst, float scale, int zero, const char *label) {
    if (cpu_convert_same_layout(&p->vals[src].md, &p->vals[dst].md)) { /* oneDNN's scaled reorder is ~5x slower */
        cpu_step *st = host_conversion_step(p, CPU_STEP_CONVERT, src, dst, "ftl:int8_convert", label);
        st->convert_scale = scale;
        st->convert_zero = zero;
        return FTL_OK;
    }
    cpu_copy_plan *copy = NULL;
    if (scale == 1.0f && !getenv("FTL_NN_ONEDNN_COPIES") && cpu_copy_plan_make(&p->vals[src].md, &p->vals[dst].md, &copy)) {
        host_conversion_step(p, CPU_STEP_COPY, src, dst, "ftl:strided_copy", label)->copy = copy;
        return FTL_OK;
    }
    dnnl_primitive_desc_t pd;
    dnnl_primitive_attr_t attr;
    CPU_TRY(dnnl_primitive_attr_create(&attr), label);
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (scale != 1.0f) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale);
    if (zero != 0) {
        int32_t z = zero;
        dnnl_primitive_attr_set_zero_points(attr, is_int8_type(p->vals[src].md.data_type) ? DNNL_ARG_FROM : DNNL_ARG_TO, 1,
                                            0, &z);
    }
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, &p->vals[src].md, p->engine, &p->vals[dst].md, p->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    CPU_TRY(s, label);
    int keys[2] = {DNNL_ARG_FROM, DNNL_ARG_TO}, vals[2] = {src, dst};
    p->n_reorders++;
    return cpu_emit_prim(p, pd, keys, vals, 2, 1, label);
}

ftl_status cpu_emit_reorder(nn_plan *p, int src, int dst, const char *label) { return emit_reorder_scaled(p, src, dst, 1.0f, 0, label); }

ftl_status cpu_emit_quantize(nn_plan *p, int src, int dst, float scale, int zero, const char *label) {
    return emit_reorder_scaled(p, src, dst, 1.0f / scale, zero, label);
}

ftl_status cpu_ensure(nn_plan *p, int t, const dnnl_memory_desc_t *md, int *val) {
    int v = p->tval[t];
    if (v < 0) return ftl_fail(FTL_E_INTERNAL, "tensor %d has no value", t);
    if (dnnl_memory_desc_equal(&p->vals[v].md, md)) {
        *val = v;
        return FTL_OK;
    }
    for (int i = 0; i < p->n_conv; i++)
        if (p->conv[i].tensor == t && dnnl_memory_desc_equal(&p->vals[p->conv[i].value].md, md)) {
            *val = p->conv[i].value;
            return FTL_OK;
        }
    int b = cpu_new_buf(p, 0, p->last_node[t]);
    int nv = cpu_new_value(p, md, b);
    char label[96];
    snprintf(label, sizeof label, "reorder of tensor %d for node %d", t, p->cur_node);
    /* real = scale x q: quantizing divides by the tensor's scale, dequantizing multiplies */
    bool from_int = is_int8_type(p->vals[v].md.data_type), to_int = is_int8_type(md->data_type);
    float scale = 1.0f;
    int zero = 0;
    if (from_int != to_int) {
        float ts = p->int8_scale ? p->int8_scale[t] : 0;
        if (!(ts > 0)) return ftl_fail(FTL_E_INTERNAL, "tensor %d: an int8 conversion without a scale", t);
        scale = from_int ? ts : 1.0f / ts;
        zero = p->int8_zero ? p->int8_zero[t] : 0;
    }
    FTL_TRY(emit_reorder_scaled(p, v, nv, scale, zero, label));
    p->steps[p->n_steps - 1].reorder = true; /* a conversion the plan adds, not the node's own work */
    if (p->n_conv == p->cap_conv) {
        p->cap_conv = p->cap_conv ? 2 * p->cap_conv : 64;
        p->conv = ftl_xrealloc(p->conv, (size_t)p->cap_conv * sizeof *p->conv);
    }
    p->conv[p->n_conv++] = (cpu_conv_cache){t, nv};
    *val = nv;
    return FTL_OK;
}

ftl_status cpu_const_value(nn_plan *p, const void *data, const dnnl_memory_desc_t *md_plain,
                           const dnnl_memory_desc_t *md, int *val) {
    dnnl_memory_t src, dst;
    CPU_TRY(dnnl_memory_create(&src, md_plain, p->engine, (void *)data), "constant");
    dnnl_status_t s = dnnl_memory_create(&dst, md, p->engine, DNNL_MEMORY_ALLOCATE);
    if (s != dnnl_success) {
        dnnl_memory_destroy(src);
        return cpu_check(s, "constant");
    }
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim = NULL;
    s = dnnl_reorder_primitive_desc_create(&pd, md_plain, p->engine, md, p->engine, NULL);
    if (s == dnnl_success) {
        s = dnnl_primitive_create(&prim, pd);
        dnnl_primitive_desc_destroy(pd);
    }
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
        s = dnnl_primitive_execute(prim, p->stream, 2, args);
        if (s == dnnl_success) s = dnnl_stream_wait(p->stream);
    }
    if (prim) dnnl_primitive_destroy(prim);
    dnnl_memory_destroy(src);
    if (s != dnnl_success) {
        dnnl_memory_destroy(dst);
        return cpu_check(s, "reordering weights");
    }
    int v = cpu_new_value(p, md, CPU_BUF_CONST);
    p->vals[v].mem = dst;
    *val = v;
    return FTL_OK;
}

/* `scale` multiplies the activation's result (oneDNN's eltwise post-op scale). */
static void append_act(dnnl_post_ops_t po, const nn_act *a, float scale) {
    switch (a->kind) {
    case NN_ACT_RELU: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_relu, 0.0f, 0.0f); break;
    case NN_ACT_LEAKYRELU: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_relu, a->alpha, 0.0f); break;
    case NN_ACT_CLIP: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_clip_v2, a->alpha, a->beta); break;
    case NN_ACT_SIGMOID: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_logistic, 0.0f, 0.0f); break;
    case NN_ACT_HARDSWISH: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_hardswish, 0.0f, 0.0f); break;
    case NN_ACT_TANH: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_tanh, 0.0f, 0.0f); break;
    case NN_ACT_SQRT: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_sqrt, 0.0f, 0.0f); break;
    case NN_ACT_POW: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_pow, 1.0f, a->alpha); break;
    case NN_ACT_GELU_ERF: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_gelu_erf, 0.0f, 0.0f); break;
    case NN_ACT_GELU_TANH: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f); break;
    case NN_ACT_SILU: dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_swish, 1.0f, 0.0f); break;
    case NN_ACT_HARDSIGMOID:
        dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, a->alpha, a->beta);
        dnnl_post_ops_append_eltwise(po, scale, dnnl_eltwise_clip_v2, 0.0f, 1.0f);
        break;
    }
}

ftl_status cpu_make_attr(const nn_node *n, dnnl_primitive_attr_t *attr, bool negate_first) {
    CPU_TRY(dnnl_primitive_attr_create(attr), "attributes");
    dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if ((!n || n->n_post == 0) && !negate_first) return FTL_OK;
    dnnl_post_ops_t po;
    CPU_TRY(dnnl_post_ops_create(&po), "post-ops");
    if (negate_first) dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, -1.0f, 0.0f);
    for (int k = 0; n && k < n->n_post; k++) {
        if (n->post[k].kind == NN_POST_ACT) append_act(po, &n->post[k].act, 1.0f);
        else dnnl_post_ops_append_sum(po, 1.0f);
    }
    dnnl_status_t s = dnnl_primitive_attr_set_post_ops(*attr, po);
    dnnl_post_ops_destroy(po);
    return cpu_check(s, "post-ops");
}

ftl_status cpu_make_attr_scaled_sum(const nn_node *n, const dnnl_memory_desc_t *scale_md, dnnl_primitive_attr_t *attr,
                                    int *binary_index) {
    CPU_TRY(dnnl_primitive_attr_create(attr), "attributes");
    dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    dnnl_post_ops_t po;
    CPU_TRY(dnnl_post_ops_create(&po), "post-ops");
    for (int k = 0; k < n->n_post; k++) append_act(po, &n->post[k].act, 1.0f);
    *binary_index = dnnl_post_ops_len(po);
    dnnl_status_t s = dnnl_post_ops_append_binary(po, dnnl_binary_mul, scale_md);
    if (s == dnnl_success) s = dnnl_post_ops_append_sum(po, 1.0f);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
    dnnl_post_ops_destroy(po);
    return cpu_check(s, "scale and sum post-ops");
}

ftl_status cpu_make_attr_dw(const nn_node *n, const nn_node *dw, int stride, dnnl_primitive_attr_t *attr) {
    CPU_TRY(dnnl_primitive_attr_create(attr), "attributes");
    dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    dnnl_post_ops_t po;
    CPU_TRY(dnnl_post_ops_create(&po), "post-ops");
    for (int k = 0; k < n->n_post; k++) append_act(po, &n->post[k].act, 1.0f);
    dnnl_status_t s = dnnl_post_ops_append_dw(po, dnnl_f32, dnnl_f32, dnnl_f32, 3, stride, 1, 0, 0, NULL);
    for (int k = 0; k < dw->n_post; k++) append_act(po, &dw->post[k].act, 1.0f);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
    dnnl_post_ops_destroy(po);
    return cpu_check(s, "depthwise post-op");
}

ftl_status cpu_make_attr_int8(const nn_node *n, dnnl_primitive_attr_t *attr, const float *scales, int64_t count,
                              float act_scale, int src_zero, int dst_zero) {
    CPU_TRY(dnnl_primitive_attr_create(attr), "attributes");
    dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    CPU_TRY(dnnl_primitive_attr_set_output_scales(*attr, count, count > 1 ? 1 << 1 : 0, scales), "int8 output scales");
    /* a quantized model's zero points: oneDNN subtracts the source's (padding stays a real 0) and adds the output's */
    int32_t zs = src_zero, zd = dst_zero;
    if (zs) CPU_TRY(dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_SRC, 1, 0, &zs), "int8 source zero point");
    if (zd) CPU_TRY(dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_DST, 1, 0, &zd), "int8 output zero point");
    if (n->n_post == 0) return FTL_OK;
    int last_act = -1;
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_ACT) last_act = k;
    dnnl_post_ops_t po;
    CPU_TRY(dnnl_post_ops_create(&po), "post-ops");
    for (int k = 0; k < n->n_post; k++) {
        if (n->post[k].kind == NN_POST_ACT) append_act(po, &n->post[k].act, k == last_act ? act_scale : 1.0f);
        else dnnl_post_ops_append_sum(po, 1.0f);
    }
    dnnl_status_t s = dnnl_primitive_attr_set_post_ops(*attr, po);
    dnnl_post_ops_destroy(po);
    return cpu_check(s, "post-ops");
}

/* ---- memory planning: greedy by size, offsets never overlap for overlapping lifetimes ---- */

static int by_size_desc(const void *a, const void *b, void *ctx) {
    const cpu_buf *bufs = ctx;
    size_t x = bufs[*(const int *)a].size, y = bufs[*(const int *)b].size;
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static void plan_offsets(nn_plan *p) {
    int n = p->n_bufs;
    int *order = ftl_xmalloc(((size_t)n + 1) * sizeof *order), *placed = ftl_xmalloc(((size_t)n + 1) * sizeof *placed);
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, by_size_desc, p->bufs);
    int n_placed = 0;
    size_t total = 0;
    for (int oi = 0; oi < n; oi++) {
        cpu_buf *b = &p->bufs[order[oi]];
        if (b->last_step < 0 && b->first_step == INT_MAX) continue; /* never used */
        size_t size = (b->size + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN, offset = 0;
        /* lowest offset clear of every placed, time-overlapping buffer (placed sorted by offset) */
        for (int k = 0; k < n_placed; k++) {
            const cpu_buf *o = &p->bufs[placed[k]];
            bool overlap_time = !(o->last_step < b->first_step || b->last_step < o->first_step);
            if (!overlap_time) continue;
            size_t osize = (o->size + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
            if (offset + size <= o->offset || o->offset + osize <= offset) continue;
            offset = o->offset + osize;
            k = -1; /* restart: moving up may collide with an earlier one */
        }
        b->offset = offset;
        if (offset + size > total) total = offset + size;
        int pos = n_placed++;
        placed[pos] = order[oi];
    }
    p->arena_size = total;
    free(order);
    free(placed);
}

/* Segments (runs of steps with the same micro-batch) decide which buffers hold the whole batch:
 * those used by more than one segment. Run breadth-first (each segment on all images, then the
 * next), such a buffer stays reserved from the start of the first segment using it to the end of
 * the last one, since every chunk runs the whole segment. Run depth-first (cpu_run), a full
 * buffer is in use from the first step to the last: segments take turns chunk by chunk. Buffers
 * used by one segment only need to survive one pass of it over a chunk either way. */
static ftl_status plan_segments(nn_plan *p) {
    int n = p->n_steps;
    int *seg = ftl_xmalloc(((size_t)n + 1) * sizeof *seg), *seg_first = ftl_xmalloc(((size_t)n + 2) * sizeof *seg_first),
        *seg_last = ftl_xmalloc(((size_t)n + 1) * sizeof *seg_last);
    int n_seg = 0;
    bool chunked = false;
    for (int i = 0; i < n; i++) {
        if (i == 0 || p->steps[i].mb != p->steps[i - 1].mb) seg_first[n_seg++] = i;
        seg[i] = n_seg - 1;
        seg_last[n_seg - 1] = i;
        if (p->steps[i].mb < p->batch) chunked = true;
    }
    seg_first[n_seg] = n;
    p->n_segs = n_seg;
    p->seg_first = seg_first;
    const char *sched = getenv("FTL_NN_SCHEDULE");
    p->depth_first = n_seg > 1 && !(sched && strcmp(sched, "breadth") == 0);
    if (!chunked) { /* every step sees the whole batch: nothing to address by chunk */
        for (int b = 0; b < p->n_bufs; b++) p->bufs[b].full = false;
        free(seg);
        free(seg_last);
        return FTL_OK;
    }
    int nb = p->n_bufs;
    int *lo = ftl_xmalloc(((size_t)nb + 1) * sizeof *lo), *hi = ftl_xmalloc(((size_t)nb + 1) * sizeof *hi);
    for (int b = 0; b < nb; b++) {
        lo[b] = INT_MAX;
        hi[b] = -1;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p->steps[i].nargs; k++) {
            int b = p->vals[p->steps[i].arg_val[k]].buf;
            if (b < 0) continue;
            if (seg[i] < lo[b]) lo[b] = seg[i];
            if (seg[i] > hi[b]) hi[b] = seg[i];
        }
    ftl_status st = FTL_OK;
    for (int b = 0; b < nb && st == FTL_OK; b++) {
        cpu_buf *x = &p->bufs[b];
        if (hi[b] < 0 || (!x->full && lo[b] == hi[b])) continue;
        x->full = true;
        if (p->depth_first) {
            if (x->first_step >= 0) x->first_step = 0;
            x->last_step = n - 1;
        } else {
            if (x->first_step >= 0) x->first_step = seg_first[lo[b]];
            x->last_step = seg_last[hi[b]];
        }
    }
    /* a full buffer is addressed by image: every value in it must have the same batch stride */
    for (int v = 0; v < p->n_vals && st == FTL_OK; v++) {
        int b = p->vals[v].buf;
        if (b < 0 || !p->bufs[b].full) continue;
        size_t stride = image_bytes(&p->vals[v].md, p->vals[v].mb);
        if (p->bufs[b].image_bytes == 0) p->bufs[b].image_bytes = stride;
        if (stride == 0 || stride != p->bufs[b].image_bytes)
            st = ftl_fail(FTL_E_UNSUPPORTED, "a tensor shared between micro-batch sizes has no per-image layout");
    }
    for (int b = 0; b < nb; b++)
        if (p->bufs[b].full) p->bufs[b].size = p->bufs[b].image_bytes * (size_t)p->batch;
    free(seg);
    free(seg_last);
    free(lo);
    free(hi);
    return st;
}

static ftl_status finalize(nn_plan *p) {
    FTL_TRY(plan_segments(p));
    plan_offsets(p);
    /* Refused up front rather than failing (or swapping) mid-run: 80% of the RAM, or
     * FTL_NN_MAX_ACTIVATION_BYTES (shared machines; the fuzz targets set 1 GiB). */
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    double need = (double)p->arena_size + (double)p->scratch_size, limit = 0.8 * phys;
    const char *cap = getenv("FTL_NN_MAX_ACTIVATION_BYTES");
    if (cap && atof(cap) > 0) limit = atof(cap);
    if (limit > 0 && need > limit)
        return ftl_fail(FTL_E_NOMEM, "a forward pass of %d image(s) needs %.2f GiB of activation memory, more than the "
                        "%.2f GiB allowed (%s): lower the batch size", p->batch, need / 1073741824.0,
                        limit / 1073741824.0, cap && atof(cap) > 0 ? "FTL_NN_MAX_ACTIVATION_BYTES" : "80% of this machine's RAM");
    if (p->arena_size) {
        size_t sz = (p->arena_size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        p->arena = aligned_alloc(ARENA_ALIGN, sz);
        if (!p->arena) return ftl_fail(FTL_E_NOMEM, "cannot allocate %zu MiB of activation memory", sz >> 20);
        memset(p->arena, 0, sz); /* fault the pages in now, not during the first run */
    }
    if (p->scratch_size) {
        size_t sz = (p->scratch_size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        p->scratch = aligned_alloc(ARENA_ALIGN, sz);
        if (!p->scratch) return ftl_fail(FTL_E_NOMEM, "cannot allocate the oneDNN scratchpad");
        memset(p->scratch, 0, sz);
        dnnl_memory_desc_t md;
        dnnl_dims_t d = {(dnnl_dim_t)p->scratch_size};
        dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_u8, dnnl_a);
        CPU_TRY(dnnl_memory_create(&p->scratch_mem, &md, p->engine, p->scratch), "scratchpad");
    }
    for (int v = 0; v < p->n_vals; v++) {
        cpu_value *x = &p->vals[v];
        if (x->buf == CPU_BUF_CONST) continue;
        void *h = x->buf >= 0 ? (char *)p->arena + p->bufs[x->buf].offset : NULL;
        CPU_TRY(dnnl_memory_create(&x->mem, &x->md, p->engine, h ? h : DNNL_MEMORY_NONE), "memory");
    }
    for (int i = 0; i < p->n_steps; i++) {
        cpu_step *s = &p->steps[i];
        s->exec = ftl_xcalloc((size_t)s->nargs + 1, sizeof *s->exec);
        for (int k = 0; k < s->nargs; k++) s->exec[k] = (dnnl_exec_arg_t){s->arg_key[k], p->vals[s->arg_val[k]].mem};
        if (s->scratch) s->exec[s->nargs] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch_mem};
        for (int k = 0; k < s->nargs; k++) {
            int b = p->vals[s->arg_val[k]].buf;
            if (b == CPU_BUF_EXTERNAL || (b >= 0 && p->bufs[b].full && s->mb < p->batch)) s->chunked_arg[s->n_chunked++] = k;
        }
    }
    return FTL_OK;
}

static void plan_free(nn_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].prim) dnnl_primitive_destroy(p->steps[i].prim);
        free(p->steps[i].exec);
        free(p->steps[i].copy);
        free(p->steps[i].ln_params);
        cpu_pool_plan_free(p->steps[i].pool);
    }
    for (int v = 0; v < p->n_vals; v++)
        if (p->vals[v].mem) dnnl_memory_destroy(p->vals[v].mem);
    if (p->scratch_mem) dnnl_memory_destroy(p->scratch_mem);
    if (p->stream) dnnl_stream_destroy(p->stream);
    if (p->engine) dnnl_engine_destroy(p->engine);
    free(p->vals);
    free(p->bufs);
    free(p->steps);
    free(p->tval);
    free(p->last_node);
    free(p->conv);
    free(p->node_mb);
    free(p->seg_first);
    free(p->arena);
    free(p->scratch);
    free(p->int8_scale);
    free(p->int8_unsigned);
    free(p->int8_written);
    free(p->int8_zero);
    cpu_attention_free(p);
    cpu_gather_free(p);
    free(p);
}

static ftl_status compile_nodes(nn_plan *p, nn_graph *g, const bool *observe) {
    nn_graph_last_readers(g, p->last_node);
    FTL_TRY(cpu_attention_find(p, g, observe));
    FTL_TRY(cpu_gather_find(p, g, observe));

    int in = g->inputs[0], shapes_for = p->batch;
    p->cur_mb = p->node_mb && g->n_nodes > 0 ? p->node_mb[0] : p->batch;
    if (p->cur_mb != shapes_for) FTL_TRY(nn_infer_shapes(g, shapes_for = p->cur_mb));
    dnnl_memory_desc_t md;
    cpu_plain_md(&md, &g->tensors[in].shape, dnnl_f32);
    int b = cpu_new_buf(p, 0, p->last_node[in]);
    p->bufs[b].first_step = -1;
    p->bufs[b].full = true; /* the caller writes all batch images before the run */
    p->input_val = cpu_new_value(p, &md, b);
    cpu_bind(p, in, p->input_val);

    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        p->cur_node = i;
        p->cur_mb = p->node_mb ? p->node_mb[i] : p->batch;
        if (p->cur_mb != shapes_for) FTL_TRY(nn_infer_shapes(g, shapes_for = p->cur_mb));
        if (p->node_fused[i] == -2) continue; /* part of an attention emitted at its second MatMul */
        if (p->node_gather[i] == -2) continue; /* data movement copied at once at its chain's end */
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !nn_is_const(g, n->in[k])) FTL_TRY(cpu_rebatch(p, n->in[k]));
        for (int k = 0; k < n->n_post; k++)
            if (n->post[k].kind == NN_POST_SUM) FTL_TRY(cpu_rebatch(p, n->post[k].sum_tensor));
        FTL_TRY(p->node_fused[i] >= 0   ? cpu_attention_emit(p, g, i)
                : p->node_gather[i] >= 0 ? cpu_gather_emit(p, g, i)
                                         : cpu_emit_node(p, g, i));
        for (int k = 0; observe && k < n->n_out; k++) {
            int t = n->out[k];
            if (t < 0 || !observe[t] || p->tval[t] < 0) continue;
            if (p->vals[p->tval[t]].md.data_type != dnnl_f32)
                return ftl_fail(FTL_E_INTERNAL, "node '%s': a watched tensor that is not float", n->name);
            cpu_step *st = cpu_new_step(p, "observe");
            st->kind = CPU_STEP_OBSERVE;
            st->nargs = 1;
            st->arg_val[0] = p->tval[t];
            st->tensor = t;
            snprintf(st->impl, sizeof st->impl, "ftl:observe");
            cpu_touch(p, p->tval[t], p->n_steps - 1);
        }
    }
    p->cur_node = g->n_nodes;
    int out = g->outputs[0];
    FTL_TRY(cpu_rebatch(p, out));
    cpu_plain_md(&md, &g->tensors[out].shape, dnnl_f32);
    p->output_val = cpu_new_value(p, &md, CPU_BUF_EXTERNAL);
    p->out_count = nn_shape_count(&g->tensors[out].shape);
    FTL_TRY(cpu_emit_reorder(p, p->tval[out], p->output_val, "features to caller"));
    p->steps[p->n_steps - 1].reorder = true;
    return FTL_OK;
}

static ftl_status cpu_compile(nn_graph *g, const nn_compile_opts *o, nn_plan **out) {
    *out = NULL;
    if (o->precision == NN_PREC_INT8 && (!o->int8_scale || !o->int8_unsigned || !o->int8_written))
        return ftl_fail(FTL_E_INTERNAL, "an int8 plan without its scales");
    omp_set_num_threads(o->threads);
    FTL_TRY(nn_infer_shapes(g, o->batch));
    nn_plan *p = ftl_xcalloc(1, sizeof *p);
    p->precision = o->precision;
    p->winograd = o->winograd;
    p->batch = o->batch;
    p->threads = o->threads;
    if (o->node_batch) {
        p->node_mb = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *p->node_mb);
        for (int i = 0; i < g->n_nodes; i++) {
            int mb = o->node_batch[i];
            p->node_mb[i] = mb >= 1 && mb <= o->batch && o->batch % mb == 0 ? mb : o->batch;
        }
    }
    if (o->int8_scale && o->int8_unsigned && o->int8_written) { /* int8, or a quantized model at any precision */
        size_t n = (size_t)g->n_tensors + 1;
        p->int8_scale = ftl_xcalloc(n, sizeof *p->int8_scale);
        p->int8_unsigned = ftl_xcalloc(n, sizeof *p->int8_unsigned);
        p->int8_written = ftl_xcalloc(n, sizeof *p->int8_written);
        memcpy(p->int8_scale, o->int8_scale, (n - 1) * sizeof *p->int8_scale);
        memcpy(p->int8_unsigned, o->int8_unsigned, (n - 1) * sizeof *p->int8_unsigned);
        memcpy(p->int8_written, o->int8_written, (n - 1) * sizeof *p->int8_written);
        if (o->int8_zero) {
            p->int8_zero = ftl_xcalloc(n, sizeof *p->int8_zero);
            memcpy(p->int8_zero, o->int8_zero, (n - 1) * sizeof *p->int8_zero);
        }
    }
    p->observe_fn = o->observe_fn;
    p->observe_ctx = o->observe_ctx;
    p->depthwise_pairs = g->pointwise_depthwise ? cpu_depthwise_pairs(p, g) : 0;
    p->blocked_layout = (g->pointwise_depthwise && cpu_depthwise_fusion_on(p)) ||
                        (g->blocked_images && p->precision == NN_PREC_F32 && !p->int8_scale && !p->observe_fn);
    p->tval = ftl_xmalloc(((size_t)g->n_tensors + 1) * sizeof *p->tval);
    p->last_node = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *p->last_node);
    for (int t = 0; t < g->n_tensors; t++) p->tval[t] = -1;
    ftl_status st = cpu_check(dnnl_engine_create(&p->engine, dnnl_cpu, 0), "oneDNN CPU engine");
    if (st == FTL_OK) st = cpu_check(dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags), "oneDNN stream");
    if (st == FTL_OK) st = compile_nodes(p, g, o->observe_fn ? o->observe : NULL);
    if (st == FTL_OK) st = finalize(p);
    if (st != FTL_OK) {
        plan_free(p);
        return st;
    }
    *out = p;
    return FTL_OK;
}

static float *cpu_input(nn_plan *p) { return (float *)((char *)p->arena + p->bufs[p->vals[p->input_val].buf].offset); }

static void fill(const cpu_value *v, float value) {
    void *h = NULL;
    dnnl_memory_get_data_handle(v->mem, &h);
    const dnnl_memory_desc_t *md = &v->md;
    size_t bytes = dnnl_memory_desc_get_size(md);
    if (md->data_type == dnnl_bf16) {
        uint32_t u;
        memcpy(&u, &value, 4);
        uint16_t b = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        uint16_t *q = h;
        for (size_t i = 0; i < bytes / 2; i++) q[i] = b;
    } else {
        float *f = h;
        for (size_t i = 0; i < bytes / 4; i++) f[i] = value;
    }
}

static void run_copy(nn_plan *p, const cpu_step *s) {
    void *from = NULL, *to = NULL, *addend = NULL;
    dnnl_memory_get_data_handle(p->vals[s->arg_val[0]].mem, &from);
    dnnl_memory_get_data_handle(p->vals[s->arg_val[1]].mem, &to);
    if (s->nargs == 3) { /* a gather with the residual added (cpu_movement_fusion.c) */
        dnnl_memory_get_data_handle(p->vals[s->arg_val[2]].mem, &addend);
        cpu_copy_run_add(s->copy, from, addend, to, p->threads);
        return;
    }
    cpu_copy_run(s->copy, from, to, p->threads);
}

static void run_max_pool(nn_plan *p, const cpu_step *s) {
    void *from = NULL, *to = NULL;
    dnnl_memory_get_data_handle(p->vals[s->arg_val[0]].mem, &from);
    dnnl_memory_get_data_handle(p->vals[s->arg_val[1]].mem, &to);
    cpu_pool_run(s->pool, from, to, p->threads);
}

static void run_convert(nn_plan *p, const cpu_step *s) {
    const cpu_value *from = &p->vals[s->arg_val[0]], *to = &p->vals[s->arg_val[1]];
    void *a = NULL, *b = NULL;
    dnnl_memory_get_data_handle(from->mem, &a);
    dnnl_memory_get_data_handle(to->mem, &b);
    size_t n = dnnl_memory_desc_get_size(&to->md) / dnnl_data_type_size(to->md.data_type);
    cpu_convert_run(a, from->md.data_type, b, to->md.data_type, n, s->convert_scale, s->convert_zero, p->threads);
}

static void run_fake_quant(nn_plan *p, const cpu_step *s) {
    void *a = NULL, *b = NULL;
    dnnl_memory_get_data_handle(p->vals[s->arg_val[0]].mem, &a);
    dnnl_memory_get_data_handle(p->vals[s->arg_val[1]].mem, &b);
    size_t n = dnnl_memory_desc_get_size(&p->vals[s->arg_val[1]].md) / sizeof(float);
    cpu_fake_quant_run(a, b, n, s->fq_scale, s->fq_zero, s->fq_lo, s->fq_hi, p->threads);
}

void cpu_emit_fake_quant(nn_plan *p, int src, int dst, float scale, int zero, int lo, int hi, const char *label) {
    cpu_step *st = host_conversion_step(p, CPU_STEP_FAKEQUANT, src, dst, "ftl:fake_quantize", label);
    p->n_reorders--; /* the node's own work, not a conversion the plan adds */
    st->fq_scale = scale;
    st->fq_zero = zero;
    st->fq_lo = lo;
    st->fq_hi = hi;
}

static void run_layernorm(nn_plan *p, const cpu_step *s) {
    const cpu_value *x = &p->vals[s->arg_val[0]], *y = &p->vals[s->arg_val[1]];
    void *a = NULL, *b = NULL;
    dnnl_memory_get_data_handle(x->mem, &a);
    dnnl_memory_get_data_handle(y->mem, &b);
    int64_t c = y->md.dims[y->md.ndims - 1];
    size_t n = dnnl_memory_desc_get_size(&y->md) / dnnl_data_type_size(y->md.data_type);
    nn_layernorm l = {.x = a, .x_bf16 = x->md.data_type == dnnl_bf16, .y = b, .y_bf16 = y->md.data_type == dnnl_bf16,
                      .rows = (int64_t)n / c, .channels = c, .gamma = s->ln_params, .beta = s->ln_params + c,
                      .epsilon = s->ln_epsilon};
    nn_layernorm_run(&l, p->threads);
}

static void observe(nn_plan *p, const cpu_step *s) {
    const cpu_value *v = &p->vals[s->arg_val[0]];
    void *h = NULL;
    dnnl_memory_get_data_handle(v->mem, &h);
    p->observe_fn(p->observe_ctx, s->tensor, h, dnnl_memory_desc_get_size(&v->md) / sizeof(float));
}

/* Points the step's full-buffer arguments at images [chunk * mb, (chunk + 1) * mb). */
static ftl_status point_at_chunk(nn_plan *p, cpu_step *s, int chunk, float *output) {
    for (int j = 0; j < s->n_chunked; j++) {
        int k = s->chunked_arg[j];
        cpu_value *v = &p->vals[s->arg_val[k]];
        char *base = v->buf == CPU_BUF_EXTERNAL ? (char *)output : (char *)p->arena + p->bufs[v->buf].offset;
        size_t stride = v->buf == CPU_BUF_EXTERNAL ? dnnl_memory_desc_get_size(&v->md) / (size_t)v->mb
                                                   : p->bufs[v->buf].image_bytes;
        CPU_TRY(dnnl_memory_set_data_handle(v->mem, base + (size_t)chunk * (size_t)s->mb * stride), s->label);
    }
    return FTL_OK;
}

/* step_seconds (NULL: untimed) gets each step's time added; the CPU stream runs a primitive to
 * completion inside execute, so the clock around it measures that step alone. */
static ftl_status run_chunk(nn_plan *p, int seg, int chunk, float *output, double *step_seconds) {
    for (int i = p->seg_first[seg]; i < p->seg_first[seg + 1]; i++) {
        cpu_step *s = &p->steps[i];
        FTL_TRY(point_at_chunk(p, s, chunk, output));
        double t0 = step_seconds ? ftl_now() : 0;
        if (s->kind == CPU_STEP_FILL) fill(&p->vals[s->arg_val[0]], s->fill_value);
        else if (s->kind == CPU_STEP_COPY) run_copy(p, s);
        else if (s->kind == CPU_STEP_OBSERVE) observe(p, s);
        else if (s->kind == CPU_STEP_CONVERT) run_convert(p, s);
        else if (s->kind == CPU_STEP_FAKEQUANT) run_fake_quant(p, s);
        else if (s->kind == CPU_STEP_ATTENTION) cpu_attention_run(p, s);
        else if (s->kind == CPU_STEP_MAXPOOL) run_max_pool(p, s);
        else if (s->kind == CPU_STEP_LAYERNORM) run_layernorm(p, s);
        else CPU_TRY(dnnl_primitive_execute(s->prim, p->stream, s->nargs + (s->scratch ? 1 : 0), s->exec), s->label);
        if (step_seconds) step_seconds[i] += ftl_now() - t0;
    }
    return FTL_OK;
}

/* Depth-first: a segment runs its next chunk as soon as the segments before it have produced the
 * chunk's images, so a tensor crossing from a segment of 2-image chunks to one of 8 is read back
 * while it is still in cache, not after the whole batch went through the first segment. Each image
 * still goes through the steps in order, and images only meet in buffers private to one pass. */
static ftl_status run_plan(nn_plan *p, float *output, double *step_seconds) {
    omp_set_num_threads(p->threads);
    if (!p->depth_first) {
        for (int seg = 0; seg < p->n_segs; seg++)
            for (int chunk = 0; chunk < p->batch / p->steps[p->seg_first[seg]].mb; chunk++)
                FTL_TRY(run_chunk(p, seg, chunk, output, step_seconds));
        return cpu_check(dnnl_stream_wait(p->stream), "oneDNN stream");
    }
    int done[64] = {0}; /* images through each segment */
    int n = p->n_segs;
    if (n > 64) return ftl_fail(FTL_E_INTERNAL, "plan has %d segments", n);
    while (done[n - 1] < p->batch) {
        /* the earliest segment whose next chunk has all its input: scan from the last one down */
        int s = n - 1;
        while (s > 0 && done[s - 1] < done[s] + p->steps[p->seg_first[s]].mb) s--;
        int mb = p->steps[p->seg_first[s]].mb;
        FTL_TRY(run_chunk(p, s, done[s] / mb, output, step_seconds));
        done[s] += mb;
    }
    return cpu_check(dnnl_stream_wait(p->stream), "oneDNN stream");
}

static ftl_status cpu_run(nn_plan *p, float *output) { return run_plan(p, output, NULL); }
static ftl_status cpu_run_timed(nn_plan *p, float *output, double *step_seconds) { return run_plan(p, output, step_seconds); }

static int cpu_step_count(const nn_plan *p) { return p->n_steps; }

bool cpu_is_compute_step(const cpu_step *s, dnnl_primitive_kind_t *kind_out) {
    if (s->kind != CPU_STEP_PRIM || s->reorder) return false;
    const_dnnl_primitive_desc_t pd;
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    if (dnnl_primitive_get_primitive_desc(s->prim, &pd) != dnnl_success ||
        dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind) != dnnl_success)
        return false;
    if (kind_out) *kind_out = kind;
    return kind == dnnl_convolution || kind == dnnl_matmul || kind == dnnl_inner_product || kind == dnnl_deconvolution;
}

static void cpu_step_info(const nn_plan *p, int i, nn_step_info *info) {
    const cpu_step *s = &p->steps[i];
    memset(info, 0, sizeof *info);
    info->node = s->node;
    info->also_node = s->also_node;
    bool gather = s->kind == CPU_STEP_COPY && strncmp(s->impl, "ftl:gather", 10) == 0; /* cpu_movement_fusion.c's chains */
    info->kind = s->kind == CPU_STEP_ATTENTION ? "Attention"
                 : s->also_node >= 0           ? "Conv+Depthwise"
                 : gather                      ? (s->nargs == 3 ? "Movement+Add" : "Movement")
                                               : NULL;
    info->label = s->label;
    info->impl = s->kind == CPU_STEP_FILL ? "ftl:fill" : s->impl;
    info->reorder = s->reorder;
    info->fill = s->kind == CPU_STEP_FILL;
    info->compute = cpu_is_compute_step(s, NULL);
    info->bf16 = s->nargs > 0 && p->vals[s->arg_val[0]].md.data_type == dnnl_bf16;
    info->int8 = s->nargs > 0 && is_int8_type(p->vals[s->arg_val[0]].md.data_type);
    info->executions = s->mb > 0 ? p->batch / s->mb : 1;
}

/* "f32 16x32x112x112 acdb" or "... aBcd16b": dims, then axes from outermost stride, blocked axes in capitals. */
static void md_text(const dnnl_memory_desc_t *md, char *buf, size_t size) {
    dnnl_data_type_t t = md->data_type;
    size_t used = (size_t)snprintf(buf, size, "%s ", t == dnnl_bf16 ? "bf16" : t == dnnl_f32 ? "f32" : t == dnnl_u8 ? "u8"
                                                     : t == dnnl_s8 ? "s8" : t == dnnl_s32 ? "s32" : "?");
    for (int i = 0; i < md->ndims && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "x" : "", (long long)md->dims[i]);
    if (md->format_kind != dnnl_blocked || used + 1 >= size) return;
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    bool done[DNNL_MAX_NDIMS] = {0}, blocked[DNNL_MAX_NDIMS] = {0};
    for (int k = 0; k < bd->inner_nblks; k++) blocked[bd->inner_idxs[k]] = true;
    buf[used++] = ' ';
    for (int n = 0; n < md->ndims && used + 1 < size; n++) {
        int best = -1;
        for (int i = 0; i < md->ndims; i++)
            if (!done[i] && (best < 0 || bd->strides[i] > bd->strides[best])) best = i;
        done[best] = true;
        buf[used++] = (char)((blocked[best] ? 'A' : 'a') + best);
    }
    for (int k = 0; k < bd->inner_nblks && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%lld%c", (long long)bd->inner_blks[k], (int)('a' + bd->inner_idxs[k]));
    buf[used < size ? used : size - 1] = 0;
}

static int cpu_winograd_convs(const nn_plan *p) { return p->n_winograd; }

static void cpu_describe(const nn_plan *p, FILE *out) {
    fprintf(out, "plan: batch %d, %s, %d threads, %d steps (%d reorders), %d Winograd convs, activations %.1f MiB, "
            "scratchpad %.1f MiB\n", p->batch,
            p->precision == NN_PREC_BF16 ? "bf16" : p->precision == NN_PREC_INT8 ? "int8 (convolutions with scales)" : "fp32", p->threads, p->n_steps,
            p->n_reorders, p->n_winograd,
            (double)p->arena_size / 1048576.0, (double)p->scratch_size / 1048576.0);
    for (int i = 0; i < p->n_steps; i++) {
        const cpu_step *s = &p->steps[i];
        char a[128] = "", b[128] = "";
        if (s->nargs > 0) md_text(&p->vals[s->arg_val[0]].md, a, sizeof a);
        if (s->writes >= 0) md_text(&p->vals[s->arg_val[s->writes]].md, b, sizeof b);
        if (i == 0 || s->mb != p->steps[i - 1].mb)
            fprintf(out, "  -- %d images at a time (%d chunks%s)\n", s->mb, p->batch / s->mb,
                    p->depth_first ? ", segments interleaved depth-first" : "");
        fprintf(out, "  %3d %-36.36s %-22s %s -> %s\n", i, s->label, s->kind == CPU_STEP_FILL ? "ftl:fill" : s->impl, a, b);
    }
}

const nn_backend *nn_backend_cpu(void) {
    static const nn_backend cpu = {
        .name = "cpu (oneDNN)", .compile = cpu_compile, .input = cpu_input, .run = cpu_run,
        .describe = cpu_describe, .winograd_convs = cpu_winograd_convs, .free = plan_free,
        .step_count = cpu_step_count, .step_info = cpu_step_info, .run_timed = cpu_run_timed,
        .time_alone = cpu_time_alone,
    };
    return &cpu;
}

const char *nn_cpu_isa_name(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "unknown";
    }
}

bool ftl_nn_cpu_bf16_available(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core:
    case dnnl_cpu_isa_avx512_core_vnni:
    case dnnl_cpu_isa_avx512_core_bf16:
    case dnnl_cpu_isa_avx512_core_amx: return true;
    default: return false;
    }
}

bool nn_cpu_has_bf16(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}
