/* `ftl inspect MODEL.onnx --profile`: the model's compiled plan run on synthetic input with every
 * step timed, beside plain runs for the total; FLOPs from the graph (2 x its multiply-adds), the
 * measured peak of the plan's precision, and optionally each convolution and matmul alone (the
 * model's ceiling; a fused attention's two products as oneDNN matmuls). Medians over runs, since a shared machine adds spikes. */
#include "ftl/profile.h"
#include "nn/onnx/load.h"
#include "nn/model_parts.h"
#include "nn/ir/shape.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_RUNS = 200, CEILING_PASSES = 3 };

void ftl_profile_options_init(ftl_profile_options *o) {
    memset(o, 0, sizeof *o);
    o->reps = 5;
    o->min_seconds = 1.0;
    o->top = 15;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One pass of the ceiling: every step that can run alone, its best time kept over passes. */
static ftl_status time_steps_alone(const nn_backend *be, nn_plan *plan, ftl_profile *p, double min_seconds) {
    for (int i = 0; i < p->n_steps; i++) {
        double per = 0;
        bool timed = false;
        ftl_status st = be->time_alone(plan, i, min_seconds, &per, &timed);
        if (st != FTL_OK) return st;
        double t = per * p->steps[i].executions;
        if (timed && (p->steps[i].alone_seconds == 0 || t < p->steps[i].alone_seconds)) p->steps[i].alone_seconds = t;
    }
    return FTL_OK;
}

void ftl_profile_free(ftl_profile *p) {
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        free((char *)p->steps[i].label);
        free((char *)p->steps[i].node);
        free((char *)p->steps[i].impl);
        free((char *)p->steps[i].kind);
    }
    free(p->steps);
    free(p->kinds);
    free(p);
}

/* The profile keeps its own copies of every string (it may outlive the model). */
static const char *step_kind(const nn_graph *g, const nn_step_info *si) {
    if (si->reorder) return "Reorder";
    if (si->fill) return "Fill";
    if (si->kind) return si->kind;
    /* the op the node is now: a fused LayerNormalization keeps the name and ONNX type of the Add it was */
    return si->node >= 0 && si->node < g->n_nodes ? nn_op_name(g->nodes[si->node].op) : "Output";
}

static void add_kind(ftl_profile *p, const ftl_profile_step *s) {
    for (int k = 0; k < p->n_kinds; k++)
        if (strcmp(p->kinds[k].kind, s->kind) == 0) {
            p->kinds[k].steps++;
            p->kinds[k].seconds += s->seconds;
            p->kinds[k].flops += s->flops;
            if (s->alone_seconds > 0) {
                p->kinds[k].alone_seconds += s->alone_seconds;
                p->kinds[k].alone_flops += s->flops;
            }
            return;
        }
    p->kinds[p->n_kinds++] = (ftl_profile_kind){s->kind, 1, s->seconds, s->flops,
                                                s->alone_seconds, s->alone_seconds > 0 ? s->flops : 0};
}

static int by_seconds_desc(const void *a, const void *b) {
    double x = ((const ftl_profile_kind *)a)->seconds, y = ((const ftl_profile_kind *)b)->seconds;
    return x > y ? -1 : x < y;
}

/* Synthetic input: a fixed pseudo-random pattern in [-1, 1] (the numbers do not matter, only that
 * they are finite and not all equal, so no kernel takes a shortcut). */
static void fill_input(float *in, size_t n) {
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        in[i] = (float)(x >> 8) / 8388608.0f - 1.0f;
    }
}

/* FLOPs per step from its node's multiply-adds at batch 1 (a graph locked to its batch has shapes
 * for that batch already), scaled to the plan's images; each node counted once. */
static void count_step_flops(ftl_profile *p, const nn_backend *be, nn_plan *plan, const nn_graph *g) {
    int n = p->n_steps;
    double images = g->batch_locked > 1 ? 1.0 : (double)p->plan_batch;
    bool *node_counted = ftl_xcalloc((size_t)g->n_nodes + 1, 1);
    for (int pass = 0; pass < 2; pass++) /* compute steps first, then any step of the node */
        for (int i = 0; i < n; i++) {
            nn_step_info si;
            be->step_info(plan, i, &si);
            if (si.node < 0 || si.node >= g->n_nodes || node_counted[si.node] || si.reorder || si.fill) continue;
            if (pass == 0 && !si.compute) continue;
            long long macs = nn_node_macs(g, si.node);
            if (si.also_node >= 0 && si.also_node < g->n_nodes) macs += nn_node_macs(g, si.also_node);
            if (macs == 0 && pass == 0) continue;
            node_counted[si.node] = true;
            p->steps[i].flops = 2.0 * (double)macs * images;
        }
    free(node_counted);
}

/* Each step's label, node, kind and kernel, and the plan's FLOPs and reference-kernel steps. */
static void describe_steps(ftl_profile *p, const nn_backend *be, nn_plan *plan, const nn_graph *g) {
    for (int i = 0; i < p->n_steps; i++) {
        nn_step_info si;
        be->step_info(plan, i, &si);
        ftl_profile_step *s = &p->steps[i];
        s->index = i;
        s->label = ftl_strdup(si.label);
        s->node = ftl_strdup(si.node >= 0 && si.node < g->n_nodes && !si.reorder ? g->nodes[si.node].name : "");
        s->kind = ftl_strdup(step_kind(g, &si));
        s->impl = ftl_strdup(si.impl ? si.impl : "?");
        s->precision = si.bf16 ? "bf16" : si.int8 ? "int8" : "fp32";
        s->reference = strncmp(s->impl, "ref", 3) == 0;
        s->executions = si.executions;
        s->nodes = si.also_node >= 0 && si.also_node < g->n_nodes ? 2 : 1;
        p->flops += s->flops;
        if (s->reference) p->reference_steps++;
    }
}

/* The runs' buffers: per run, its total, its timed steps' sum and each step's time. */
typedef struct profile_runs {
    double *step_runs, *totals, *sums, *column; /* column: room for one step's times over the runs */
} profile_runs;

/* Medians over the runs: the totals, the timed runs' sums, each step; the ceiling's sums. */
static void summarize_runs(ftl_profile *p, const profile_runs *r, int runs, bool ceiling) {
    int n = p->n_steps;
    double *totals = r->totals, *column = r->column;
    p->runs = runs;
    p->best_seconds = totals[0];
    for (int k = 1; k < runs; k++)
        if (totals[k] < p->best_seconds) p->best_seconds = totals[k];
    p->total_seconds = median(totals, runs);
    p->timed_run_seconds = median(r->sums, runs);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < runs; k++) column[k] = r->step_runs[(size_t)k * (size_t)n + (size_t)i];
        p->steps[i].seconds = median(column, runs);
        p->steps_seconds += p->steps[i].seconds;
    }
    if (ceiling)
        for (int i = 0; i < n; i++)
            if (p->steps[i].alone_seconds > 0 && p->steps[i].flops > 0) {
                p->ceiling_flops += p->steps[i].flops;
                p->ceiling_seconds += p->steps[i].alone_seconds;
            }
}

/* Warm up, then interleave plain and timed runs so both see the same machine state. */
static ftl_status time_runs(ftl_profile *p, const nn_backend *be, const nn_model_parts *mp, const ftl_model_info *info,
                            const ftl_profile_options *opts) {
    int n = p->n_steps;
    nn_plan *plan = mp->plan;
    ftl_status st = FTL_OK;
    size_t in_floats = (size_t)p->plan_batch * (size_t)mp->input_per_image;
    float *features = malloc((size_t)p->plan_batch * (size_t)(info->feature_dim > 0 ? info->feature_dim : 1) * sizeof(float));
    double *step_runs = malloc((size_t)MAX_RUNS * (size_t)(n + 1) * sizeof(double));
    double *totals = malloc(MAX_RUNS * sizeof(double)), *sums = malloc(MAX_RUNS * sizeof(double));
    double *column = malloc(MAX_RUNS * sizeof(double));
    if (!features || !step_runs || !totals || !sums || !column) st = ftl_fail(FTL_E_NOMEM, "out of memory for the profile");
    if (st == FTL_OK) fill_input(be->input(plan), in_floats);
    for (int w = 0; w < 2 && st == FTL_OK; w++) st = be->run(plan, features);
    /* The ceiling's passes are interleaved with the model's runs (CEILING_PASSES blocks), each step
     * keeping its best time alone: on a shared VM whose speed drifts 2x within minutes, a ceiling
     * timed after all runs compared the model with a different machine. */
    bool ceiling = opts->ceiling && be->time_alone;
    if (ceiling) {
        p->has_ceiling = true;
        for (int i = 0; i < n; i++) p->steps[i].alone_seconds = 0;
    }
    int block = (opts->reps + CEILING_PASSES - 1) / CEILING_PASSES;
    /* min_seconds counts the model's runs only: the ceiling's passes (most of the time on a small model)
     * would otherwise stop it after --reps runs, whose median one noisy neighbour moves 30% */
    double started = ftl_now(), ceiling_spent = 0;
    int runs = 0, passes = 0;
    while (st == FTL_OK && runs < MAX_RUNS &&
           (runs < opts->reps || ftl_now() - started - ceiling_spent < opts->min_seconds ||
            (ceiling && passes < CEILING_PASSES))) {
        double t0 = ftl_now();
        st = be->run(plan, features);
        totals[runs] = ftl_now() - t0;
        double *row = step_runs + (size_t)runs * (size_t)n;
        memset(row, 0, (size_t)n * sizeof *row);
        if (st == FTL_OK) st = be->run_timed(plan, features, row);
        sums[runs] = 0;
        for (int i = 0; i < n; i++) sums[runs] += row[i];
        runs++;
        if (st == FTL_OK && ceiling && passes < CEILING_PASSES && runs % block == 0) {
            double pass_started = ftl_now();
            st = time_steps_alone(be, plan, p, 0.05 / CEILING_PASSES);
            passes++;
            if (st == FTL_OK) st = be->run(plan, features); /* untimed: the plan's buffers back in cache */
            ceiling_spent += ftl_now() - pass_started;
        }
    }
    if (st == FTL_OK) summarize_runs(p, &(profile_runs){step_runs, totals, sums, column}, runs, ceiling);
    free(features);
    free(step_runs);
    free(totals);
    free(sums);
    free(column);
    return st;
}

ftl_status ftl_model_profile(ftl_model *model, const ftl_profile_options *opts_in, ftl_profile **out) {
    *out = NULL;
    ftl_profile_options opts;
    if (opts_in) opts = *opts_in;
    else ftl_profile_options_init(&opts);
    if (opts.reps < 1) opts.reps = 1;
    if (opts.reps > MAX_RUNS) opts.reps = MAX_RUNS;
    const ftl_model_info *info = ftl_model_get_info(model);
    nn_model_parts mp;
    nn_model_get_parts(model, &mp);
    const nn_backend *be = mp.backend;
    if (!be->step_count || !be->run_timed)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: the profiler times oneDNN CPU plans; this model runs on %s (use "
                        "--device cpu)", info->path, info->device);
    nn_plan *plan = mp.plan;
    int n = be->step_count(plan);

    ftl_profile *p = ftl_xcalloc(1, sizeof *p);
    p->model = info->path;
    p->backend = info->backend;
    p->batch = info->batch;
    p->plan_batch = mp.plan_batch;
    p->threads = info->threads;
    p->micro_batch = info->micro_batch;
    p->micro_batch_min = info->micro_batch_min;
    p->precision = info->precision;
    p->top = opts.top > 0 ? opts.top : 15;
    ftl_status st = ftl_cpu_peak_measure(info->threads, &p->peak);
    if (st != FTL_OK) {
        ftl_profile_free(p);
        return st;
    }
    p->peak_gflops = info->precision == FTL_NN_BF16 && p->peak.bf16_gflops > 0   ? p->peak.bf16_gflops
                     : info->precision == FTL_NN_INT8 && p->peak.int8_gops > 0 ? p->peak.int8_gops
                                                                               : p->peak.fp32_gflops;

    nn_graph *g = mp.graph;
    st = nn_infer_shapes(g, 1);
    p->steps = ftl_xcalloc((size_t)n + 1, sizeof *p->steps);
    p->kinds = ftl_xcalloc((size_t)n + 1, sizeof *p->kinds);
    p->n_steps = n;
    if (st == FTL_OK) {
        count_step_flops(p, be, plan, g);
        describe_steps(p, be, plan, g);
        st = time_runs(p, be, &mp, info, &opts);
    }
    if (st != FTL_OK) {
        ftl_profile_free(p);
        return st;
    }
    for (int i = 0; i < n; i++) add_kind(p, &p->steps[i]);
    qsort(p->kinds, (size_t)p->n_kinds, sizeof *p->kinds, by_seconds_desc);
    *out = p;
    return FTL_OK;
}

/* ---- printing ---- */

static double gflops(double flops, double seconds) { return seconds > 0 ? flops / seconds * 1e-9 : 0; }

static double step_peak(const ftl_profile *p, const ftl_profile_step *s) {
    if (strcmp(s->precision, "int8") == 0 && p->peak.int8_gops > 0) return p->peak.int8_gops;
    return strcmp(s->precision, "bf16") == 0 && p->peak.bf16_gflops > 0 ? p->peak.bf16_gflops : p->peak.fp32_gflops;
}

/* Widens *w to fit text, up to cap. */
static void fit_column(int *w, const char *text, int cap) {
    int len = text ? (int)strlen(text) : 0;
    if (len > *w) *w = len < cap ? len : cap;
}

static int by_step_seconds_desc(const void *a, const void *b) {
    double x = (*(const ftl_profile_step *const *)a)->seconds, y = (*(const ftl_profile_step *const *)b)->seconds;
    return x > y ? -1 : x < y;
}

static void print_text(const ftl_profile *p, FILE *out) {
    double per_image = p->total_seconds / p->plan_batch;
    fprintf(out, "profile     %s: batch %d, %s, %d threads, %s, micro-batches %d..%d, median of %d runs\n", p->model,
            p->batch, ftl_nn_precision_name(p->precision), p->threads, p->backend, p->micro_batch_min, p->micro_batch,
            p->runs);
    if (p->plan_batch != p->batch)
        fprintf(out, "note        the plan runs %d images at a time (its layers could not be sized one by one): the "
                "figures below are for one run of %d images\n", p->plan_batch, p->plan_batch);
    fprintf(out, "peak        fp32 %.0f GFLOP/s (%s)", p->peak.fp32_gflops, p->peak.isa_fp32);
    if (p->peak.bf16_gflops > 0) fprintf(out, ", bf16 %.0f GFLOP/s", p->peak.bf16_gflops);
    if (p->peak.int8_gops > 0) fprintf(out, ", int8 %.0f GOP/s", p->peak.int8_gops);
    fprintf(out, " on %d threads (one thread's best x %d; all at once: fp32 %.0f)\n", p->peak.threads, p->peak.threads,
            p->peak.fp32_measured);
    double g = gflops(p->flops, p->total_seconds);
    fprintf(out, "total       %.3f ms per run (%.3f ms/image, %.1f images/s), %.3f GFLOP per run, %.1f GFLOP/s = "
            "%.1f%% of the %s peak\n", 1e3 * p->total_seconds, 1e3 * per_image, per_image > 0 ? 1.0 / per_image : 0,
            p->flops * 1e-9, g, p->peak_gflops > 0 ? 100.0 * g / p->peak_gflops : 0, ftl_nn_precision_name(p->precision));
    fprintf(out, "steps       %d, timed one by one: %.3f ms (%.1f%% of the total)\n", p->n_steps, 1e3 * p->steps_seconds,
            p->total_seconds > 0 ? 100.0 * p->steps_seconds / p->total_seconds : 0);
    if (p->has_ceiling && p->ceiling_seconds > 0) {
        double c = gflops(p->ceiling_flops, p->ceiling_seconds);
        double best = gflops(p->flops, p->best_seconds);
        fprintf(out, "ceiling     convolutions and matmuls alone (layouts oneDNN prefers): %.1f GFLOP/s = %.1f%% of peak; "
                "the model runs at %.1f%% of its ceiling (best run vs best times alone; the median run %.1f%%)\n", c,
                p->peak_gflops > 0 ? 100.0 * c / p->peak_gflops : 0, c > 0 ? 100.0 * best / c : 0, c > 0 ? 100.0 * g / c : 0);
    }
    if (p->reference_steps > 0)
        fprintf(out, "warning     %d step(s) ran oneDNN's reference (scalar) kernel: marked REF below\n", p->reference_steps);
    fprintf(out, "\nby kind     %-22s %5s %10s %6s %9s %7s%s\n", "kind", "steps", "ms", "share", "GFLOP/s", "% peak",
            p->has_ceiling ? "  alone ms  % of alone" : "");
    for (int k = 0; k < p->n_kinds; k++) {
        const ftl_profile_kind *q = &p->kinds[k];
        fprintf(out, "            %-22.22s %5d %10.3f %5.1f%%", q->kind, q->steps, 1e3 * q->seconds,
                p->steps_seconds > 0 ? 100.0 * q->seconds / p->steps_seconds : 0);
        if (q->flops > 0)
            fprintf(out, " %9.1f %6.1f%%", gflops(q->flops, q->seconds),
                    p->peak_gflops > 0 ? 100.0 * gflops(q->flops, q->seconds) / p->peak_gflops : 0);
        else fprintf(out, " %9s %7s", "-", "-");
        if (p->has_ceiling && q->alone_seconds > 0)
            fprintf(out, "  %8.3f  %9.1f%%", 1e3 * q->alone_seconds, 100.0 * q->alone_seconds / q->seconds);
        fputc('\n', out);
    }
    const ftl_profile_step **order = malloc((size_t)p->n_steps * sizeof *order);
    if (!order) return;
    for (int i = 0; i < p->n_steps; i++) order[i] = &p->steps[i];
    qsort(order, (size_t)p->n_steps, sizeof *order, by_step_seconds_desc);
    int top = p->top < p->n_steps ? p->top : p->n_steps;
    /* columns as wide as the longest entry shown (capped), so names are not cut where they differ */
    int wl = 5, wk = 4, wi = 6;
    for (int j = 0; j < top; j++) {
        fit_column(&wl, order[j]->label, 72);
        fit_column(&wk, order[j]->kind, 24);
        fit_column(&wi, order[j]->impl, 40);
    }
    fprintf(out, "\nslowest     %4s %-*s %-*s %-*s %-4s %4s %9s %6s %9s %7s%s\n", "step", wl, "label", wk, "kind", wi, "kernel",
            "type", "runs", "ms", "share", "GFLOP/s", "% peak", p->has_ceiling ? "  alone ms" : "");
    for (int j = 0; j < top; j++) {
        const ftl_profile_step *s = order[j];
        fprintf(out, "            %4d %-*.*s %-*.*s %-*.*s %-4s %4d %9.3f %5.1f%%", s->index, wl, wl, s->label, wk, wk, s->kind,
                wi, wi, s->impl, s->precision, s->executions, 1e3 * s->seconds,
                p->steps_seconds > 0 ? 100.0 * s->seconds / p->steps_seconds : 0);
        if (s->flops > 0)
            fprintf(out, " %9.1f %6.1f%%", gflops(s->flops, s->seconds), 100.0 * gflops(s->flops, s->seconds) / step_peak(p, s));
        else fprintf(out, " %9s %7s", "-", "-");
        if (p->has_ceiling && s->alone_seconds > 0) fprintf(out, "  %8.3f", 1e3 * s->alone_seconds);
        if (s->reference) fprintf(out, "  REF");
        fputc('\n', out);
    }
    free(order);
    if (p->precision != FTL_NN_INT8) return;
    /* which compute steps int8 kept in fp32 (the stem and the conv after it, or no int8 kernel) */
    int in_int8 = 0, in_fp32 = 0, int8_nodes = 0;
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].flops <= 0) continue;
        bool int8 = strcmp(p->steps[i].precision, "int8") == 0;
        *(int8 ? &in_int8 : &in_fp32) += 1;
        if (int8) int8_nodes += p->steps[i].nodes;
    }
    fprintf(out, "\nint8        %d compute steps in int8, %d in fp32:", in_int8, in_fp32);
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].flops > 0 && strcmp(p->steps[i].precision, "int8") != 0) fprintf(out, " %s;", p->steps[i].node);
    fputc('\n', out);
    /* what an int8 export quantizes: a fused step (ftl:separable_int8) does two convolutions */
    fprintf(out, "int8 nodes  %d convolutions / matrix products run in int8\n", int8_nodes);
}

static void print_json(const ftl_profile *p, FILE *out) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"model\":");
    ftl_json_append_string(&b, p->model);
    ftl_strbuf_printf(&b, ",\"backend\":");
    ftl_json_append_string(&b, p->backend);
    ftl_strbuf_printf(&b, ",\"batch\":%d,\"plan_batch\":%d,\"precision\":\"%s\",\"threads\":%d,\"micro_batch_min\":%d,"
                      "\"micro_batch\":%d,\"runs\":%d", p->batch, p->plan_batch, ftl_nn_precision_name(p->precision), p->threads, p->micro_batch_min,
                      p->micro_batch, p->runs);
    ftl_strbuf_printf(&b, ",\"peak\":{\"threads\":%d,\"fp32_gflops\":", p->peak.threads);
    ftl_json_append_number(&b, p->peak.fp32_gflops);
    ftl_strbuf_printf(&b, ",\"bf16_gflops\":");
    ftl_json_append_number(&b, p->peak.bf16_gflops);
    ftl_strbuf_printf(&b, ",\"int8_gops\":");
    ftl_json_append_number(&b, p->peak.int8_gops);
    ftl_strbuf_printf(&b, ",\"fp32_measured_all_threads\":");
    ftl_json_append_number(&b, p->peak.fp32_measured);
    ftl_strbuf_printf(&b, "},\"peak_gflops\":");
    ftl_json_append_number(&b, p->peak_gflops);
    ftl_strbuf_printf(&b, ",\"total_seconds\":");
    ftl_json_append_number(&b, p->total_seconds);
    ftl_strbuf_printf(&b, ",\"best_seconds\":");
    ftl_json_append_number(&b, p->best_seconds);
    ftl_strbuf_printf(&b, ",\"steps_seconds\":");
    ftl_json_append_number(&b, p->steps_seconds);
    ftl_strbuf_printf(&b, ",\"timed_run_seconds\":");
    ftl_json_append_number(&b, p->timed_run_seconds);
    ftl_strbuf_printf(&b, ",\"flops\":");
    ftl_json_append_number(&b, p->flops);
    ftl_strbuf_printf(&b, ",\"gflops\":");
    ftl_json_append_number(&b, gflops(p->flops, p->total_seconds));
    ftl_strbuf_printf(&b, ",\"reference_steps\":%d", p->reference_steps);
    if (p->has_ceiling) {
        ftl_strbuf_printf(&b, ",\"ceiling\":{\"flops\":");
        ftl_json_append_number(&b, p->ceiling_flops);
        ftl_strbuf_printf(&b, ",\"seconds\":");
        ftl_json_append_number(&b, p->ceiling_seconds);
        ftl_strbuf_printf(&b, ",\"gflops\":");
        ftl_json_append_number(&b, gflops(p->ceiling_flops, p->ceiling_seconds));
        ftl_strbuf_printf(&b, ",\"model_share\":"); /* best run vs best times alone */
        ftl_json_append_number(&b, p->ceiling_flops > 0 && p->best_seconds > 0
                                       ? gflops(p->flops, p->best_seconds) / gflops(p->ceiling_flops, p->ceiling_seconds)
                                       : 0);
        ftl_strbuf_printf(&b, "}");
    }
    ftl_strbuf_printf(&b, ",\"kinds\":[");
    for (int k = 0; k < p->n_kinds; k++) {
        const ftl_profile_kind *q = &p->kinds[k];
        ftl_strbuf_printf(&b, "%s{\"kind\":", k ? "," : "");
        ftl_json_append_string(&b, q->kind);
        ftl_strbuf_printf(&b, ",\"steps\":%d,\"seconds\":", q->steps);
        ftl_json_append_number(&b, q->seconds);
        ftl_strbuf_printf(&b, ",\"flops\":");
        ftl_json_append_number(&b, q->flops);
        ftl_strbuf_printf(&b, ",\"alone_seconds\":");
        ftl_json_append_number(&b, q->alone_seconds);
        ftl_strbuf_printf(&b, "}");
    }
    ftl_strbuf_printf(&b, "],\"steps\":[");
    for (int i = 0; i < p->n_steps; i++) {
        const ftl_profile_step *s = &p->steps[i];
        ftl_strbuf_printf(&b, "%s{\"index\":%d,\"label\":", i ? "," : "", s->index);
        ftl_json_append_string(&b, s->label);
        ftl_strbuf_printf(&b, ",\"node\":");
        ftl_json_append_string(&b, s->node);
        ftl_strbuf_printf(&b, ",\"kind\":");
        ftl_json_append_string(&b, s->kind);
        ftl_strbuf_printf(&b, ",\"impl\":");
        ftl_json_append_string(&b, s->impl);
        ftl_strbuf_printf(&b, ",\"precision\":\"%s\",\"reference\":%s,\"executions\":%d,\"seconds\":", s->precision,
                          s->reference ? "true" : "false", s->executions);
        ftl_json_append_number(&b, s->seconds);
        ftl_strbuf_printf(&b, ",\"flops\":");
        ftl_json_append_number(&b, s->flops);
        ftl_strbuf_printf(&b, ",\"alone_seconds\":");
        ftl_json_append_number(&b, s->alone_seconds);
        ftl_strbuf_printf(&b, "}");
    }
    ftl_strbuf_printf(&b, "]}\n");
    fwrite(b.data, 1, b.len, out);
    ftl_strbuf_free(&b);
}

void ftl_profile_print(const ftl_profile *p, FILE *out, bool json) {
    if (json) print_json(p, out);
    else print_text(p, out);
}
