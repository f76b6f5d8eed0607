/* oneDNN CPU backend behind backend.h: runs a compiled plan (segments chunk by chunk, each step on
 * oneDNN or on ftl's kernels), describes it, and answers the CPU's ISA questions. Compiling is
 * cpu_compile.c's. */
#include "nn/cpu/cpu_compile.h"
#include "nn/cpu/cpu_observer.h"
#include "nn/cpu/emit_conv.h"
#include "nn/cpu/kernels/copy.h"
#include "nn/cpu/kernels/layernorm.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/timing.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

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

/* The images of arg 0 (the step's micro-batch) through the fused depthwise -> 1x1 pair. */
static void run_separable(nn_plan *p, const cpu_step *s) {
    const cpu_value *x = &p->vals[s->arg_val[0]];
    void *from = NULL, *to = NULL;
    dnnl_memory_get_data_handle(x->mem, &from);
    dnnl_memory_get_data_handle(p->vals[s->arg_val[1]].mem, &to);
    cpu_separable_int8_run(s->separable, from, (int)x->md.dims[0], to, p->threads);
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

/* Hands a watched tensor's values to calibration's observer as f32; a bf16 plan's (calibration computed in
 * bf16) widened a chunk at a time, exactly (a bf16 is the top half of an f32). */
static void observe(nn_plan *p, const cpu_step *s) {
    const cpu_value *v = &p->vals[s->arg_val[0]];
    cpu_observer *o = p->observer;
    void *h = NULL;
    dnnl_memory_get_data_handle(v->mem, &h);
    size_t bytes = dnnl_memory_desc_get_size(&v->md);
    if (v->md.data_type != dnnl_bf16) {
        o->fn(o->ctx, s->tensor, h, bytes / sizeof(float));
        return;
    }
    if (!o->widened) o->widened = ftl_xmalloc(CPU_OBSERVE_CHUNK * sizeof *o->widened);
    const uint16_t *b = h;
    size_t n = bytes / sizeof *b;
    for (size_t i = 0; i < n; i += CPU_OBSERVE_CHUNK) {
        size_t m = n - i < CPU_OBSERVE_CHUNK ? n - i : CPU_OBSERVE_CHUNK;
        cpu_widen_bf16(b + i, o->widened, m, p->threads);
        o->fn(o->ctx, s->tensor, o->widened, m);
    }
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
        else if (s->kind == CPU_STEP_SEPARABLE) run_separable(p, s);
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

static void cpu_step_info(const nn_plan *p, int i, nn_step_info *info) {
    const cpu_step *s = &p->steps[i];
    memset(info, 0, sizeof *info);
    info->node = s->node;
    info->also_node = s->also_node;
    bool gather = s->kind == CPU_STEP_COPY && strncmp(s->impl, "ftl:gather", 10) == 0; /* cpu_movement_fusion.c's chains */
    info->kind = s->kind == CPU_STEP_ATTENTION   ? "Attention"
                 : s->kind == CPU_STEP_SEPARABLE ? "Depthwise+Conv"
                 : s->also_node >= 0             ? "Conv+Depthwise"
                 : gather                        ? (s->nargs == 3 ? "Movement+Add" : "Movement")
                                                 : NULL;
    info->label = s->label;
    info->impl = s->kind == CPU_STEP_FILL ? "ftl:fill" : s->impl;
    info->reorder = s->reorder;
    info->fill = s->kind == CPU_STEP_FILL;
    info->compute = cpu_is_compute_step(s, NULL) || s->kind == CPU_STEP_SEPARABLE;
    info->bf16 = s->nargs > 0 && p->vals[s->arg_val[0]].md.data_type == dnnl_bf16;
    info->int8 = s->nargs > 0 && cpu_is_int8_type(p->vals[s->arg_val[0]].md.data_type);
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

static int cpu_winograd_convs(const nn_plan *p) { return p->conv_choice->n_winograd; }

static void cpu_describe(const nn_plan *p, FILE *out) {
    fprintf(out, "plan: batch %d, %s, %d threads, %d steps (%d reorders), %d Winograd convs, activations %.1f MiB, "
            "scratchpad %.1f MiB\n", p->batch,
            p->precision == NN_PREC_BF16 ? "bf16" : p->precision == NN_PREC_INT8 ? "int8 (convolutions with scales)" : "fp32", p->threads, p->n_steps,
            p->n_reorders, p->conv_choice->n_winograd,
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
        .describe = cpu_describe, .winograd_convs = cpu_winograd_convs, .free = cpu_plan_free,
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
