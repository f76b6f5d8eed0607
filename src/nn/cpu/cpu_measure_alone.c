/* The ceiling of a plan's compute steps: each convolution, matmul or inner product rebuilt from
 * its own descriptor with every layout left to oneDNN (format any), its attributes (post-ops,
 * scales) kept, and run alone on fresh buffers until its best time settles. What the plan loses
 * against that (layouts, reorders, cache state after other layers) is then visible per step. A fused
 * attention's ceiling is its two products (Q K^T and P V) as oneDNN batched matmuls alone: what the
 * graph's two MatMul nodes would cost on the library, the softmax between them not counted. */
#include "nn/cpu/cpu_plan.h"
#include "util/error.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>

static void let_library_choose(dnnl_memory_desc_t *md) {
    if (md->ndims == 0) return; /* an absent bias */
    dnnl_memory_desc_t any;
    if (dnnl_memory_desc_init_by_tag(&any, md->ndims, md->dims, md->data_type, dnnl_format_tag_any) == dnnl_success)
        *md = any;
}

/* A descriptor like the step's own, with its layouts free. */
static dnnl_status_t preferred_pd(const_dnnl_primitive_desc_t opd, dnnl_primitive_kind_t kind,
                                  const_dnnl_primitive_attr_t attr, dnnl_engine_t engine, dnnl_primitive_desc_t *pd) {
    union {
        dnnl_convolution_desc_t conv;
        dnnl_matmul_desc_t mm;
        dnnl_inner_product_desc_t ip;
    } d;
    const void *od = NULL;
    dnnl_query_t q = kind == dnnl_matmul ? dnnl_query_matmul_d
                     : kind == dnnl_inner_product ? dnnl_query_inner_product_d
                     : kind == dnnl_deconvolution ? dnnl_query_deconvolution_d
                                                  : dnnl_query_convolution_d;
    dnnl_status_t s = dnnl_primitive_desc_query(opd, q, 0, &od);
    if (s != dnnl_success || !od) return s != dnnl_success ? s : dnnl_invalid_arguments;
    if (kind == dnnl_matmul) {
        memcpy(&d.mm, od, sizeof d.mm);
        let_library_choose(&d.mm.src_desc);
        let_library_choose(&d.mm.weights_desc);
        let_library_choose(&d.mm.dst_desc);
    } else if (kind == dnnl_inner_product) {
        memcpy(&d.ip, od, sizeof d.ip);
        let_library_choose(&d.ip.src_desc);
        let_library_choose(&d.ip.weights_desc);
        let_library_choose(&d.ip.dst_desc);
    } else { /* convolution and deconvolution share the descriptor layout */
        memcpy(&d.conv, od, sizeof d.conv);
        let_library_choose(&d.conv.src_desc);
        let_library_choose(&d.conv.weights_desc);
        let_library_choose(&d.conv.dst_desc);
    }
    s = dnnl_primitive_desc_create(pd, &d, attr, engine, NULL);
    if (s != dnnl_success) { /* some kernels take no free layout: then the plan's own */
        memcpy(&d, od, kind == dnnl_matmul ? sizeof d.mm : kind == dnnl_inner_product ? sizeof d.ip : sizeof d.conv);
        s = dnnl_primitive_desc_create(pd, &d, attr, engine, NULL);
    }
    return s;
}

/* Small finite values everywhere (bf16 or f32 bit patterns; other types left zero). */
static void fill_small(dnnl_memory_t mem, const dnnl_memory_desc_t *md) {
    void *h = NULL;
    dnnl_memory_get_data_handle(mem, &h);
    size_t bytes = dnnl_memory_desc_get_size(md);
    if (!h || !bytes) return;
    if (md->data_type == dnnl_f32) {
        float *f = h;
        for (size_t i = 0; i < bytes / 4; i++) f[i] = 0.01f * (float)((i * 2654435761u) % 97) - 0.48f;
    } else if (md->data_type == dnnl_bf16) {
        uint16_t *b = h;
        for (size_t i = 0; i < bytes / 2; i++) b[i] = (i & 1) ? 0x3c23 : 0xbc23; /* +-0.01 */
    } else {
        memset(h, 0, bytes);
    }
}

/* The best time of primitive pd alone on fresh buffers (its arguments: keys[0..nkeys) and the
 * scratchpad): warm-up, then at least 5 timed runs and min_seconds in all. Takes pd. */
static dnnl_status_t best_time(nn_plan *p, dnnl_primitive_desc_t pd, const int *keys, int nkeys, double min_seconds,
                               double *best_out) {
    dnnl_primitive_t prim = NULL;
    dnnl_exec_arg_t args[CPU_MAX_ARGS + 1];
    int nargs = 0;
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    for (int k = 0; s == dnnl_success && k <= nkeys; k++) {
        int key = k < nkeys ? keys[k] : DNNL_ARG_SCRATCHPAD;
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, key);
        if (!md || md->ndims == 0) continue;
        dnnl_memory_t mem;
        s = dnnl_memory_create(&mem, md, p->engine, DNNL_MEMORY_ALLOCATE);
        if (s != dnnl_success) break;
        fill_small(mem, md);
        args[nargs++] = (dnnl_exec_arg_t){key, mem};
    }
    double best = 0;
    if (s == dnnl_success) {
        for (int w = 0; w < 2 && s == dnnl_success; w++) s = dnnl_primitive_execute(prim, p->stream, nargs, args);
        double spent = 0;
        for (int r = 0; s == dnnl_success && (r < 5 || spent < min_seconds) && r < 100000; r++) {
            double t0 = ftl_now();
            s = dnnl_primitive_execute(prim, p->stream, nargs, args);
            if (s == dnnl_success) s = dnnl_stream_wait(p->stream);
            double dt = ftl_now() - t0;
            spent += dt;
            if (r == 0 || dt < best) best = dt;
        }
    }
    for (int k = 0; k < nargs; k++) dnnl_memory_destroy(args[k].memory);
    if (prim) dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    *best_out = best;
    return s;
}

/* One batched product [L, m, k] x [L, k, n] -> [L, m, n] of type dt (dst f32 for the scores) alone. */
static dnnl_status_t time_batched_product(nn_plan *p, int64_t L, int64_t m, int64_t k, int64_t n, dnnl_data_type_t dt,
                                          dnnl_data_type_t dst_dt, double min_seconds, double *best) {
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t ad = {L, m, k}, bd = {L, k, n}, cd = {L, m, n};
    dnnl_memory_desc_init_by_tag(&a, 3, ad, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b, 3, bd, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&c, 3, cd, dst_dt, dnnl_format_tag_any);
    dnnl_matmul_desc_t d;
    dnnl_status_t s = dnnl_matmul_desc_init(&d, &a, &b, NULL, &c);
    dnnl_primitive_attr_t attr = NULL;
    if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &d, attr, p->engine, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return s;
    const int keys[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    return best_time(p, pd, keys, 3, min_seconds, best);
}

static ftl_status time_attention_alone(nn_plan *p, const cpu_step *st, double min_seconds, double *seconds) {
    const dnnl_memory_desc_t *q = &p->vals[st->arg_val[0]].md, *kt = &p->vals[st->arg_val[1]].md;
    const dnnl_memory_desc_t *v = &p->vals[st->arg_val[2]].md;
    int r = q->ndims;
    int64_t L = 1;
    for (int i = 0; i < r - 2; i++) L *= q->dims[i];
    int64_t rows = q->dims[r - 2], depth = q->dims[r - 1], keys = kt->dims[r - 1], vdepth = v->dims[r - 1];
    double qk = 0, pv = 0;
    CPU_TRY(time_batched_product(p, L, rows, depth, keys, q->data_type, dnnl_f32, min_seconds / 2, &qk), st->label);
    CPU_TRY(time_batched_product(p, L, rows, keys, vdepth, v->data_type, v->data_type, min_seconds / 2, &pv), st->label);
    *seconds = qk + pv;
    return FTL_OK;
}

ftl_status cpu_time_alone(nn_plan *p, int step, double min_seconds, double *seconds, bool *timed) {
    *timed = false;
    *seconds = 0;
    if (step < 0 || step >= p->n_steps) return ftl_fail(FTL_E_INVALID_ARG, "no step %d in the plan", step);
    cpu_step *st = &p->steps[step];
    if (st->kind == CPU_STEP_ATTENTION) {
        FTL_TRY(time_attention_alone(p, st, min_seconds, seconds));
        *timed = true;
        return FTL_OK;
    }
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    if (!cpu_is_compute_step(st, &kind)) return FTL_OK;
    const_dnnl_primitive_desc_t opd;
    CPU_TRY(dnnl_primitive_get_primitive_desc(st->prim, &opd), st->label);
    const_dnnl_primitive_attr_t attr = NULL;
    CPU_TRY(dnnl_primitive_desc_get_attr(opd, &attr), st->label);
    dnnl_primitive_desc_t pd = NULL;
    CPU_TRY(preferred_pd(opd, kind, attr, p->engine, &pd), st->label);
    int keys[CPU_MAX_ARGS];
    for (int k = 0; k < st->nargs; k++) keys[k] = st->arg_key[k];
    double best = 0;
    CPU_TRY(best_time(p, pd, keys, st->nargs, min_seconds, &best), st->label);
    *seconds = best;
    *timed = true;
    return FTL_OK;
}
