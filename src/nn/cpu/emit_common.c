/* What the CPU emitters share: a node's output values, its primitive descriptor, its refusal, and
 * the type a copy of a tensor is written in. */
#include "nn/cpu/emit_common.h"
#include "util/error.h"

#include <string.h>

/* A fresh value for the node's output in layout md, in a new buffer. */
int cpu_new_output(nn_plan *p, int t, const dnnl_memory_desc_t *md) {
    int b = cpu_new_buf(p, 0, p->last_node[t]);
    int v = cpu_new_value(p, md, b);
    cpu_bind(p, t, v);
    return v;
}

/* Output value in md that reuses src's buffer when nothing later reads src, else a new buffer. */
int cpu_inplace_output(nn_plan *p, int t, int src, const dnnl_memory_desc_t *md) {
    if (!cpu_can_overwrite(p, src) || dnnl_memory_desc_get_size(md) > p->bufs[p->vals[src].buf].size) return cpu_new_output(p, t, md);
    int v = cpu_new_value(p, md, p->vals[src].buf);
    cpu_bind(p, t, v);
    return v;
}

ftl_status cpu_fail_node(const nn_node *n, const char *what) {
    return ftl_fail_context(FTL_E_UNSUPPORTED, "node '%s' (%s): %s", n->name, n->op_type, what);
}

/* The primitive descriptor of an op descriptor, with the post-ops of `fused` (NULL: none) and an
 * optional leading negation; failures name the node. */
ftl_status cpu_node_pd(nn_plan *p, const nn_node *n, const void *desc, const nn_node *fused, bool negate,
                          const char *what, dnnl_primitive_desc_t *pd) {
    dnnl_primitive_attr_t attr;
    FTL_TRY(cpu_make_attr(fused, &attr, negate));
    dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, attr, p->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return ftl_fail_context(cpu_check(s, what), "node '%s' (%s)", n->name, n->op_type);
    return FTL_OK;
}

bool cpu_pd_is_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl && strncmp(impl, "ref", 3) == 0;
}

/* The conv layout family of a 4-D value, by its blocking (strides unchecked): acdb when unblocked
 * (channels-last; its readers check the strides), nChw8c / nChw16c; undef otherwise. */
dnnl_format_tag_t cpu_image_tag(const dnnl_memory_desc_t *md) {
    if (md->format_kind != dnnl_blocked) return dnnl_format_tag_undef;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (b->inner_nblks == 0) return dnnl_acdb;
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && b->inner_blks[0] == 8) return dnnl_aBcd8b;
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && b->inner_blks[0] == 16) return dnnl_aBcd16b;
    return dnnl_format_tag_undef;
}

/* Whether every use of tensor t in a bf16 plan reads it as bf16 anyway: linear layers with constant
 * weights (they convert their input) and fused attentions' operands, through view-like nodes. Such a
 * product is written as bf16 directly: half the bytes, and no f32 -> bf16 reorder before each use. */
bool cpu_read_as_bf16_only(const nn_plan *p, const nn_graph *g, int t, int depth) {
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
                if (k != 0 && cpu_attention_role(p, i) == -1) return false;
                reads = true;
            }
        if (!reads) continue;
        readers++;
        if (cpu_attention_role(p, i) != -1) continue; /* Q (maybe scaled), K^T or V of a fused attention */
        switch (r->op) {
        case NN_OP_GEMM: case NN_OP_MATMUL:
            if (r->n_in < 2 || !nn_is_const(g, r->in[1]) || cpu_node_int8(p, r)) return false;
            break;
        case NN_OP_RESHAPE: case NN_OP_FLATTEN: case NN_OP_SQUEEZE: case NN_OP_UNSQUEEZE: case NN_OP_IDENTITY:
        case NN_OP_TRANSPOSE: case NN_OP_SLICE: case NN_OP_GATHER: case NN_OP_SPLIT:
            if (r->n_post > 0) return false;
            for (int k = 0; k < r->n_out; k++)
                if (r->out[k] >= 0 && !cpu_read_as_bf16_only(p, g, r->out[k], depth + 1)) return false;
            break;
        default: return false;
        }
    }
    return readers > 0;
}

dnnl_data_type_t cpu_copy_type(const nn_plan *p, const nn_graph *g, dnnl_data_type_t dt, int t) {
    return dt == dnnl_f32 && p->precision == NN_PREC_BF16 && !p->int8 && cpu_switch_on("FTL_NN_BF16_PRODUCTS") &&
                   cpu_read_as_bf16_only(p, g, t, 0)
               ? dnnl_bf16
               : dt;
}
