/* oneDNN CPU backend: compiling a graph into a plan. Finds the fusions (attention, movement chains),
 * runs the node loop through the emitters (emit_node.c), then plans the memory: segments of one
 * micro-batch, the buffers each holds, one arena of offsets, and the dnnl memories and arguments.
 * Threads: Debian's libdnnl 2.6 is built with the OpenMP runtime (DNNL_CPU_RUNTIME_OMP, GNU
 * libgomp), so the thread count is omp_set_num_threads() on the calling thread; it is set before
 * primitives are created (oneDNN sizes its work split then) and before each run (cpu_backend.c). */
#include "nn/cpu/cpu_compile.h"
#include "nn/cpu/cpu_int8.h"
#include "nn/cpu/cpu_observer.h"
#include "nn/cpu/emitters.h"
#include "nn/ir/topo.h"
#include "nn/ir/shape.h"
#include "util/alloc.h"
#include "util/error.h"

#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { ARENA_ALIGN = 4096, BUF_ALIGN = 256 };

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
        size_t stride = cpu_image_bytes(&p->vals[v].md, p->vals[v].mb);
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

/* Plan memory, its pages faulted in now rather than during the first run. Large blocks ask for 2 MiB
 * pages: a fault per 4 KiB page made the 132 MiB arena of MobileNetV2 at batch 32 cost 0.46 s of a
 * 0.55 s load on a VM (Zen 5, 2026-12-07), 2.6x less with huge pages. */
static void *faulted_in(size_t size) {
    enum { HUGE_PAGE = 2 << 20 };
    size_t align = size >= HUGE_PAGE ? HUGE_PAGE : ARENA_ALIGN, sz = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, sz);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) madvise(p, sz, MADV_HUGEPAGE); /* a hint: a kernel without it just says no */
#endif
    memset(p, 0, sz);
    return p;
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
    if (p->arena_size && !(p->arena = faulted_in(p->arena_size)))
        return ftl_fail(FTL_E_NOMEM, "cannot allocate %zu MiB of activation memory", p->arena_size >> 20);
    if (p->scratch_size) {
        if (!(p->scratch = faulted_in(p->scratch_size))) return ftl_fail(FTL_E_NOMEM, "cannot allocate the oneDNN scratchpad");
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

/* Copies of o's per-tensor int8 arrays for n - 1 tensors (one spare entry, zeroed). */
static cpu_int8_tables *int8_tables_of(const nn_compile_opts *o, size_t n) {
    cpu_int8_tables *q = ftl_xcalloc(1, sizeof *q);
    q->scale = ftl_xcalloc(n, sizeof *q->scale);
    q->is_unsigned = ftl_xcalloc(n, sizeof *q->is_unsigned);
    q->written = ftl_xcalloc(n, sizeof *q->written);
    memcpy(q->scale, o->int8_scale, (n - 1) * sizeof *q->scale);
    memcpy(q->is_unsigned, o->int8_unsigned, (n - 1) * sizeof *q->is_unsigned);
    memcpy(q->written, o->int8_written, (n - 1) * sizeof *q->written);
    if (o->int8_zero) {
        q->zero = ftl_xcalloc(n, sizeof *q->zero);
        memcpy(q->zero, o->int8_zero, (n - 1) * sizeof *q->zero);
    }
    return q;
}

static void int8_tables_free(cpu_int8_tables *q) {
    if (!q) return;
    free(q->scale);
    free(q->is_unsigned);
    free(q->written);
    free(q->zero);
    free(q);
}

void cpu_plan_free(nn_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].prim) dnnl_primitive_destroy(p->steps[i].prim);
        free(p->steps[i].exec);
        free(p->steps[i].copy);
        free(p->steps[i].ln_params);
        cpu_pool_plan_free(p->steps[i].pool);
        cpu_separable_int8_free(p->steps[i].separable);
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
    int8_tables_free(p->int8);
    if (p->observer) free(p->observer->widened);
    free(p->observer);
    free(p->conv_choice);
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
        int attention = cpu_attention_role(p, i), movement = cpu_movement_role(p, i);
        if (attention == -2) continue; /* part of an attention emitted at its second MatMul */
        if (movement == -2) continue;  /* data movement copied at once at its chain's end */
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !nn_is_const(g, n->in[k])) FTL_TRY(cpu_rebatch(p, n->in[k]));
        for (int k = 0; k < n->n_post; k++)
            if (n->post[k].kind == NN_POST_SUM) FTL_TRY(cpu_rebatch(p, n->post[k].sum_tensor));
        FTL_TRY(attention >= 0  ? cpu_attention_emit(p, g, i)
                : movement >= 0 ? cpu_gather_emit(p, g, i)
                                : cpu_emit_node(p, g, i));
        for (int k = 0; observe && k < n->n_out; k++) {
            int t = n->out[k];
            if (t < 0 || !observe[t] || p->tval[t] < 0) continue;
            dnnl_data_type_t type = p->vals[p->tval[t]].md.data_type;
            if (type != dnnl_f32 && type != dnnl_bf16)
                return ftl_fail(FTL_E_INTERNAL, "node '%s': a watched tensor that is neither f32 nor bf16", n->name);
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

ftl_status cpu_compile(nn_graph *g, const nn_compile_opts *o, nn_plan **out) {
    *out = NULL;
    if (o->precision == NN_PREC_INT8 && (!o->int8_scale || !o->int8_unsigned || !o->int8_written))
        return ftl_fail(FTL_E_INTERNAL, "an int8 plan without its scales");
    omp_set_num_threads(o->threads);
    FTL_TRY(nn_infer_shapes(g, o->batch));
    nn_plan *p = ftl_xcalloc(1, sizeof *p);
    p->precision = o->precision;
    p->batch = o->batch;
    p->threads = o->threads;
    if (o->node_batch) {
        p->node_mb = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *p->node_mb);
        for (int i = 0; i < g->n_nodes; i++) {
            int mb = o->node_batch[i];
            p->node_mb[i] = mb >= 1 && mb <= o->batch && o->batch % mb == 0 ? mb : o->batch;
        }
    }
    if (o->int8_scale && o->int8_unsigned && o->int8_written) /* int8, or a quantized model at any precision */
        p->int8 = int8_tables_of(o, (size_t)g->n_tensors + 1);
    if (o->observe_fn) {
        p->observer = ftl_xmalloc(sizeof *p->observer);
        *p->observer = (cpu_observer){o->observe_fn, o->observe_ctx, NULL};
    }
    cpu_conv_choose(p, g, o->winograd);
    p->tval = ftl_xmalloc(((size_t)g->n_tensors + 1) * sizeof *p->tval);
    p->last_node = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *p->last_node);
    for (int t = 0; t < g->n_tensors; t++) p->tval[t] = -1;
    ftl_status st = cpu_check(dnnl_engine_create(&p->engine, dnnl_cpu, 0), "oneDNN CPU engine");
    if (st == FTL_OK) st = cpu_check(dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags), "oneDNN stream");
    if (st == FTL_OK) st = compile_nodes(p, g, o->observe_fn ? o->observe : NULL);
    if (st == FTL_OK) st = finalize(p);
    if (st != FTL_OK) {
        cpu_plan_free(p);
        return st;
    }
    *out = p;
    return FTL_OK;
}
