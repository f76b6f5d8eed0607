/* CPU emitters for data movement: reshape-like views, Transpose, Concat, Pad, Slice, Gather of one
 * index, Split. Layout-sensitive, so they work on plain row-major values: a view costs nothing where
 * the input is already plain, else one reorder (a oneDNN copy between layouts). */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Reshape-like ops: the same bytes in plain row-major order, viewed with the new dims. An input that
 * is not plain yet (a permuted view: Swin's window partition) is copied, as bf16 where only bf16
 * readers take the output (no second copy to convert it). */
ftl_status cpu_emit_view(nn_plan *p, nn_graph *g, const nn_node *n) {
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

ftl_status cpu_emit_transpose(nn_plan *p, nn_graph *g, const nn_node *n) {
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
    int out = cpu_new_output(p, n->out[0], &plain);
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
    args[nin] = out_tensor >= 0 ? cpu_new_output(p, out_tensor, &dst_md) : cpu_new_value(p, &dst_md, cpu_new_buf(p, 0, p->cur_node));
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
    if (cpu_attention_role(p, r) != -1) return false;
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
    int out = cpu_new_output(p, n->out[0], &plain_out);
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

ftl_status cpu_emit_concat(nn_plan *p, nn_graph *g, const nn_node *n) {
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

ftl_status cpu_emit_pad(nn_plan *p, nn_graph *g, const nn_node *n) {
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
    int out = cpu_new_output(p, n->out[0], &plain_out);
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
ftl_status cpu_emit_slice(nn_plan *p, nn_graph *g, const nn_node *n) {
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
    int out = cpu_new_output(p, n->out[0], &plain_out);
    return cpu_emit_reorder(p, sv, out, label);
}

/* Gather of one index along a non-batch axis: the slice at that position, viewed without the axis. */
ftl_status cpu_emit_gather_one(nn_plan *p, nn_graph *g, const nn_node *n) {
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

/* Split: each part a view of the plain input at its offset along the axis, copied out. */
ftl_status cpu_emit_split(nn_plan *p, nn_graph *g, const nn_node *n) {
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
            FTL_TRY(cpu_emit_reorder(p, sv, cpu_new_output(p, n->out[k], &plain_out), label));
        }
        at += size;
    }
    return FTL_OK;
}
