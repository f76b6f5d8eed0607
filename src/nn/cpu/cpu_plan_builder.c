/* oneDNN CPU backend: the plan builder. Values (a dnnl memory bound to a buffer), buffers, steps,
 * reorders to the layout or type a consumer asks for, constants and primitive attributes: what the
 * emitters (emit_*.c) and the fusions build a plan with. It calls kernels only, never an emitter, so
 * the backend's files point one way: compile -> emitters -> builder -> kernels. */
#include "nn/cpu/cpu_int8.h"
#include "nn/cpu/cpu_plan.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

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
size_t cpu_image_bytes(const dnnl_memory_desc_t *md, int mb) {
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
    if (p->vals[v].buf < 0 || md.dims[0] % mb != 0 || md.offset0 != 0 || !cpu_image_bytes(&md, mb))
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
    return p->int8 && n->n_in > 0 && n->in[0] >= 0 && p->int8->scale[n->in[0]] > 0;
}

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
        dnnl_primitive_attr_set_zero_points(attr, cpu_is_int8_type(p->vals[src].md.data_type) ? DNNL_ARG_FROM : DNNL_ARG_TO, 1,
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
    bool from_int = cpu_is_int8_type(p->vals[v].md.data_type), to_int = cpu_is_int8_type(md->data_type);
    float scale = 1.0f;
    int zero = 0;
    if (from_int != to_int) {
        float ts = p->int8 ? p->int8->scale[t] : 0;
        if (!(ts > 0)) return ftl_fail(FTL_E_INTERNAL, "tensor %d: an int8 conversion without a scale", t);
        scale = from_int ? ts : 1.0f / ts;
        zero = cpu_int8_zero(p->int8, t);
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

void cpu_emit_fake_quant(nn_plan *p, int src, int dst, float scale, int zero, int lo, int hi, const char *label) {
    cpu_step *st = host_conversion_step(p, CPU_STEP_FAKEQUANT, src, dst, "ftl:fake_quantize", label);
    p->n_reorders--; /* the node's own work, not a conversion the plan adds */
    st->fq_scale = scale;
    st->fq_zero = zero;
    st->fq_lo = lo;
    st->fq_hi = hi;
}

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
