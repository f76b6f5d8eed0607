/* What the CPU emitters (emit_*.c) share: small shape and layout helpers, inline, and the output,
 * primitive and refusal helpers of emit_common.c. Emitters sit between the compile loop (cpu_compile.c,
 * which calls them through emit_node.c) and the plan builder (cpu_plan.h), which never calls them back. */
#ifndef FTL_NN_CPU_EMIT_COMMON_H
#define FTL_NN_CPU_EMIT_COMMON_H

#include "nn/cpu/cpu_int8.h"
#include "nn/cpu/cpu_plan.h"

#include <stdio.h>

static inline void label_of(const nn_node *n, char *buf, size_t size) { snprintf(buf, size, "%s (%s)", n->name, n->op_type); }

static inline void dims_of(const nn_shape *s, dnnl_dims_t d) {
    for (int i = 0; i < s->rank; i++) d[i] = s->d[i];
}

static inline void any_md(dnnl_memory_desc_t *md, const nn_shape *s, dnnl_data_type_t dt) {
    dnnl_dims_t d;
    dims_of(s, d);
    dnnl_memory_desc_init_by_tag(md, s->rank, d, dt, dnnl_format_tag_any);
}

static inline const nn_shape *shape_of(const nn_graph *g, int t) { return &g->tensors[t].shape; }

/* A layout of plain strides (any order, offset), no blocks. */
static inline bool strided_md(const dnnl_memory_desc_t *md) {
    return md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 0;
}

/* The same dims and strides in row-major order with no offset. */
static inline bool row_major_md(const dnnl_memory_desc_t *md) {
    if (!strided_md(md) || md->offset0 != 0) return false;
    int64_t stride = 1;
    for (int i = md->ndims - 1; i >= 0; i--) {
        if (md->dims[i] != 1 && md->format_desc.blocking.strides[i] != stride) return false;
        stride *= md->dims[i];
    }
    return true;
}

static inline dnnl_data_type_t int8_type(const nn_plan *p, int t) { return p->int8->is_unsigned[t] ? dnnl_u8 : dnnl_s8; }

static inline bool has_sum_post(const nn_node *n) {
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_SUM) return true;
    return false;
}

static inline bool has_act_post(const nn_node *n) {
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_ACT) return true;
    return false;
}

/* Shape of tensor t padded on the left with 1s to `rank`. */
static inline nn_shape expand_rank(const nn_shape *s, int rank) {
    nn_shape r = {.rank = rank};
    int off = rank - s->rank;
    for (int i = 0; i < rank; i++) r.d[i] = i < off ? 1 : s->d[i - off];
    return r;
}

static inline bool same_dims(const nn_shape *a, const nn_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

/* A fresh value for the node's output in layout md, in a new buffer. */
int cpu_new_output(nn_plan *p, int t, const dnnl_memory_desc_t *md);
/* Output value in md that reuses src's buffer when nothing later reads src, else a new buffer. */
int cpu_inplace_output(nn_plan *p, int t, int src, const dnnl_memory_desc_t *md);
/* The error for a node the CPU backend cannot run: names the node, its op and `what`. */
ftl_status cpu_fail_node(const nn_node *n, const char *what);
/* The primitive descriptor of an op descriptor, with the post-ops of `fused` (NULL: none) and an
 * optional leading negation; failures name the node. */
ftl_status cpu_node_pd(nn_plan *p, const nn_node *n, const void *desc, const nn_node *fused, bool negate,
                       const char *what, dnnl_primitive_desc_t *pd);
/* Whether oneDNN picked its reference (slow, generic) implementation for pd. */
bool cpu_pd_is_reference(const_dnnl_primitive_desc_t pd);
/* The conv layout family of a 4-D value: acdb when unblocked, nChw8c / nChw16c; undef otherwise. */
dnnl_format_tag_t cpu_image_tag(const dnnl_memory_desc_t *md);
/* Whether every use of tensor t in a bf16 plan reads it as bf16 anyway (depth: recursion guard, start at 0). */
bool cpu_read_as_bf16_only(const nn_plan *p, const nn_graph *g, int t, int depth);
/* The type a copy of tensor t from a source of type dt is written in: bf16 in a bf16 plan when only
 * bf16 readers take t (linear layers, fused attentions, through views), else dt. */
dnnl_data_type_t cpu_copy_type(const nn_plan *p, const nn_graph *g, dnnl_data_type_t dt, int t);

#endif
