/* The ceiling of a plan's compute steps: each convolution, matmul or inner product rebuilt from
 * its own descriptor with every layout left to oneDNN (format any), its attributes (post-ops,
 * scales) kept, and run alone on fresh buffers until its best time settles. What the plan loses
 * against that (layouts, reorders, cache state after other layers) is then visible per step. */
#include "nn/cpu_plan.h"
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

ftl_status cpu_time_alone(nn_plan *p, int step, double min_seconds, double *seconds, bool *timed) {
    *timed = false;
    *seconds = 0;
    if (step < 0 || step >= p->n_steps) return ftl_fail(FTL_E_INVALID_ARG, "no step %d in the plan", step);
    cpu_step *st = &p->steps[step];
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    if (!cpu_is_compute_step(st, &kind)) return FTL_OK;
    const_dnnl_primitive_desc_t opd;
    CPU_TRY(dnnl_primitive_get_primitive_desc(st->prim, &opd), st->label);
    const_dnnl_primitive_attr_t attr = NULL;
    CPU_TRY(dnnl_primitive_desc_get_attr(opd, &attr), st->label);
    dnnl_primitive_desc_t pd = NULL;
    CPU_TRY(preferred_pd(opd, kind, attr, p->engine, &pd), st->label);
    dnnl_primitive_t prim = NULL;
    dnnl_exec_arg_t args[CPU_MAX_ARGS + 1];
    int nargs = 0;
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    for (int k = 0; s == dnnl_success && k <= st->nargs; k++) {
        int key = k < st->nargs ? st->arg_key[k] : DNNL_ARG_SCRATCHPAD;
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
        /* warm up (caches, pages), then at least 5 timed runs and min_seconds in all */
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
    CPU_TRY(s, st->label);
    *seconds = best;
    *timed = true;
    return FTL_OK;
}
