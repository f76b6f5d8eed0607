/* The fine-tuning training plan's lifetime and runs (train_plan.h): buffers per tensor, who writes
 * each gradient, which tensors may keep a blocked layout, then each node compiled
 * (cpu_train_compile.c); the forward and backward lists run, timed when profiling. */
#include "nn/cpu/cpu_train_steps.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>

/* Ops that run on any layout oneDNN gives them (their primitives take it as is). */
static bool layout_free(nn_op op) {
    switch (op) {
    case NN_OP_CONV: case NN_OP_BATCHNORM: case NN_OP_RELU: case NN_OP_CLIP: case NN_OP_LEAKYRELU: case NN_OP_SIGMOID:
    case NN_OP_HARDSWISH: case NN_OP_TANH: case NN_OP_GELU: case NN_OP_SILU:
        return true;
    default: return false;
    }
}

ftl_status nn_train_plan_create(const nn_graph *g, const nn_trainable *tr, int batch, bool bf16, float *params,
                                float *grads, nn_train_plan **out) {
    *out = NULL;
    nn_train_plan *p = ftl_xcalloc(1, sizeof *p);
    p->bf16 = bf16;
    p->g = g, p->tr = tr, p->batch = batch, p->feature = g->outputs[0];
    int nt = g->n_tensors;
    p->act = ftl_xcalloc((size_t)nt + 1, sizeof *p->act);
    p->grad = ftl_xcalloc((size_t)nt + 1, sizeof *p->grad);
    p->owned = ftl_xcalloc((size_t)nt + 1, sizeof *p->owned);
    p->count = ftl_xcalloc((size_t)nt + 1, sizeof *p->count);
    p->room = ftl_xcalloc((size_t)nt + 1, sizeof *p->room);
    p->may_block = ftl_xcalloc((size_t)nt + 1, sizeof *p->may_block);
    p->layout = ftl_xcalloc((size_t)nt + 1, sizeof *p->layout);
    p->param_of = ftl_xmalloc(((size_t)nt + 1) * sizeof *p->param_of);
    for (int t = 0; t < nt; t++) p->param_of[t] = -1;
    p->offset = ftl_xcalloc((size_t)tr->n_params + 1, sizeof *p->offset);
    for (int k = 0; k < tr->n_params; k++) {
        p->offset[k] = p->n_params;
        p->param_of[tr->params[k].tensor] = k;
        p->n_params += g->tensors[tr->params[k].tensor].count;
    }
    p->borrowed_block = params != NULL;
    p->params = params ? params : ftl_xcalloc((size_t)p->n_params + 1, sizeof *p->params);
    p->pgrads = params ? grads : ftl_xcalloc((size_t)p->n_params + 1, sizeof *p->pgrads);
    for (int k = 0; k < tr->n_params; k++) {
        const nn_tensor *t = &g->tensors[tr->params[k].tensor];
        memcpy(p->params + p->offset[k], t->data, (size_t)t->count * sizeof(float));
    }
    ftl_status st = cpu_check(dnnl_engine_create(&p->engine, dnnl_cpu, 0), "engine");
    if (st == FTL_OK) st = cpu_check(dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags), "stream");
    /* buffers: the boundary tensors and every unfrozen node's output; view ops alias their input */
    for (int k = 0; k < tr->n_boundary && st == FTL_OK; k++) {
        int t = tr->boundary[k];
        p->count[t] = p->room[t] = nn_shape_count(&g->tensors[t].shape);
        p->act[t] = ftl_xcalloc((size_t)p->count[t] + 1, sizeof(float));
        p->grad[t] = ftl_xcalloc((size_t)p->count[t] + 1, sizeof(float));
        p->owned[t] = true;
    }
    for (int i = 0; i < g->n_nodes && st == FTL_OK; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead || !tr->node[i]) continue;
        int t = n->out[0];
        p->count[t] = nn_shape_count(&g->tensors[t].shape);
        if (tp_is_view(n->op) && p->act[n->in[0]]) {
            p->act[t] = p->act[n->in[0]];
            p->grad[t] = p->grad[n->in[0]];
            p->room[t] = p->room[n->in[0]];
        } else { /* room for channels padded to a multiple of 16 (oneDNN's widest blocking) */
            const nn_shape *ts = &g->tensors[t].shape;
            p->room[t] = p->count[t];
            if (ts->rank == 4 && ts->d[1] > 0) p->room[t] = p->count[t] / ts->d[1] * ((ts->d[1] + 15) / 16 * 16);
            p->act[t] = ftl_xcalloc((size_t)p->room[t] + 1, sizeof(float));
            p->grad[t] = ftl_xcalloc((size_t)p->room[t] + 1, sizeof(float));
            p->owned[t] = true;
        }
        for (int k = 1; k < n->n_out; k++)
            if (n->out[k] >= 0) st = tp_fail_node(n, "a second output");
    }
    if (st == FTL_OK && !p->act[p->feature])
        st = ftl_fail(FTL_E_INVALID_ARG, "the feature tensor '%s' is not computed by the unfrozen part",
                      g->tensors[p->feature].name);
    /* who contributes to each gradient: every non-view unfrozen node, once per input it reads */
    p->root = ftl_xmalloc(((size_t)nt + 1) * sizeof *p->root);
    p->writers = ftl_xcalloc((size_t)nt + 1, sizeof *p->writers);
    p->direct = ftl_xcalloc((size_t)nt + 1, sizeof *p->direct);
    p->param_writers = ftl_xcalloc((size_t)tr->n_params + 1, sizeof *p->param_writers);
    p->param_direct = ftl_xcalloc((size_t)tr->n_params + 1, sizeof *p->param_direct);
    for (int t = 0; t < nt; t++) p->root[t] = t;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead || !tr->node[i]) continue;
        if (tp_is_view(n->op)) {
            if (p->act[n->in[0]]) p->root[n->out[0]] = p->root[n->in[0]];
            continue;
        }
        for (int k = 0; k < n->n_in; k++) {
            int t = n->in[k];
            if (t < 0) continue;
            if (p->param_of[t] >= 0) p->param_writers[p->param_of[t]]++;
            else if (p->grad[t]) p->writers[p->root[t]]++;
        }
    }
    /* which tensors may block: produced by a conv, activation or BN and read only by those (an
     * activation's or BN's output then blocks too: it takes its input's layout), decided from the
     * feature back; never a boundary tensor, the feature or a view's input */
    for (int i = g->n_nodes - 1; i >= 0 && st == FTL_OK; i--) {
        const nn_node *n = &g->nodes[i];
        if (n->dead || !tr->node[i] || !layout_free(n->op) || n->out[0] == p->feature) continue;
        bool ok = true;
        for (int j = i + 1; j < g->n_nodes && ok; j++) {
            const nn_node *c = &g->nodes[j];
            if (c->dead || !tr->node[j]) continue;
            for (int k = 0; k < c->n_in && ok; k++) {
                if (c->in[k] != n->out[0]) continue;
                ok = k == 0 && (c->op == NN_OP_CONV || c->op == NN_OP_GLOBALAVGPOOL ||
                                (layout_free(c->op) && p->may_block[c->out[0]]));
            }
        }
        p->may_block[n->out[0]] = ok;
    }
    for (int i = 0; i < g->n_nodes && st == FTL_OK; i++)
        if (!g->nodes[i].dead && tr->node[i]) {
            p->node_name = g->nodes[i].name;
            st = tp_compile_node(p, &g->nodes[i]);
        }
    p->node_name = NULL;
    if (st != FTL_OK) {
        nn_train_plan_free(p);
        return st;
    }
    *out = p;
    return FTL_OK;
}

void nn_train_plan_free(nn_train_plan *p) {
    if (!p) return;
    tp_list *lists[2] = {&p->fwd, &p->bwd};
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < lists[l]->n; i++) {
            if (lists[l]->s[i].prim) dnnl_primitive_destroy(lists[l]->s[i].prim);
            free(lists[l]->s[i].offsets);
            free(lists[l]->s[i].args);
        }
        free(lists[l]->s);
    }
    for (int i = 0; i < p->n_mems; i++) dnnl_memory_destroy(p->mems[i]);
    free(p->mems);
    for (int i = 0; i < p->n_scratch; i++) free(p->scratch[i]);
    free(p->scratch);
    for (int t = 0; t < p->g->n_tensors; t++)
        if (p->owned[t]) {
            free(p->act[t]);
            free(p->grad[t]);
        }
    free(p->act);
    free(p->grad);
    free(p->owned);
    free(p->count);
    free(p->param_of);
    free(p->offset);
    if (!p->borrowed_block) {
        free(p->params);
        free(p->pgrads);
    }
    if (p->stream) dnnl_stream_destroy(p->stream);
    if (p->engine) dnnl_engine_destroy(p->engine);
    free(p->reordered);
    free(p->room);
    free(p->may_block);
    free(p->layout);
    free(p->root);
    free(p->writers);
    free(p->direct);
    free(p->param_writers);
    free(p->param_direct);
    free(p);
}

/* Offset in a tensor of shape s (rank of the output) of the element at output index idx,
 * broadcast axes (size 1) pinned to 0. */
static int64_t bcast_offset(const nn_shape *s, const int64_t *idx) {
    int64_t o = 0;
    for (int i = 0; i < s->rank; i++) o = o * s->d[i] + (s->d[i] == 1 ? 0 : idx[i]);
    return o;
}

static void run_binary(const tp_step *s) {
    int64_t total = nn_shape_count(&s->ys), idx[NN_MAX_RANK] = {0};
    for (int64_t i = 0; i < total; i++) {
        float a = s->a[bcast_offset(&s->as, idx)], b = s->b[bcast_offset(&s->bs, idx)];
        s->dst[i] = s->mul ? a * b : a + b;
        for (int k = s->ys.rank - 1; k >= 0 && ++idx[k] == s->ys.d[k]; k--) idx[k] = 0;
    }
}

static void run_binary_bwd(const tp_step *s) {
    int64_t total = nn_shape_count(&s->ys), idx[NN_MAX_RANK] = {0};
    for (int64_t i = 0; i < total; i++) {
        float dy = s->a[i];
        s->dst[bcast_offset(&s->as, idx)] += s->mul ? dy * s->b[bcast_offset(&s->bs, idx)] : dy;
        for (int k = s->ys.rank - 1; k >= 0 && ++idx[k] == s->ys.d[k]; k--) idx[k] = 0;
    }
}

/* Host loops over large arrays run on the plan's OpenMP team (the backbone's thread count). */
enum { TP_PARALLEL_MIN = 1 << 15 };

static void accumulate(float *dst, const float *src, int64_t n) {
#pragma omp parallel for if (n >= TP_PARALLEL_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

static void run_concat(const tp_step *s) {
#pragma omp parallel for if (s->outer * s->chunk >= TP_PARALLEL_MIN) schedule(static)
    for (int64_t o = 0; o < s->outer; o++)
        memcpy(s->dst + o * s->stride + s->offset, s->a + o * s->chunk, (size_t)s->chunk * sizeof(float));
}

static void run_split_bwd(const tp_step *s) {
#pragma omp parallel for if (s->outer * s->chunk >= TP_PARALLEL_MIN) schedule(static)
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->chunk; i++) s->dst[o * s->chunk + i] += s->a[o * s->stride + s->offset + i];
}

static void run_global_avg(const tp_step *s) {
    const int64_t hw = s->height * s->width;
    const float inv = 1.0f / (float)hw;
#pragma omp parallel for if (s->outer * hw >= TP_PARALLEL_MIN) schedule(static)
    for (int64_t o = 0; o < s->outer; o++) {
        const float *x = s->a + s->offsets[o];
        float sum = 0;
        for (int64_t h = 0; h < s->height; h++)
            for (int64_t w = 0; w < s->width; w++) sum += x[h * s->h_stride + w * s->w_stride];
        s->dst[o] = sum * inv;
    }
}

static void run_global_avg_bwd(const tp_step *s) {
    const int64_t hw = s->height * s->width;
    const float inv = 1.0f / (float)hw;
    if (s->clear_floats) memset(s->dst, 0, (size_t)s->clear_floats * sizeof(float));
#pragma omp parallel for if (s->outer * hw >= TP_PARALLEL_MIN) schedule(static)
    for (int64_t o = 0; o < s->outer; o++) {
        float *dx = s->dst + s->offsets[o], g = s->a[o] * inv;
        for (int64_t h = 0; h < s->height; h++)
            for (int64_t w = 0; w < s->width; w++) dx[h * s->h_stride + w * s->w_stride] = g;
    }
}

static ftl_status run_list(nn_train_plan *p, tp_list *l, bool reverse) {
    bool pending = false; /* a primitive may still run (an asynchronous runtime): host steps wait for it */
    for (int j = 0; j < l->n; j++) {
        tp_step *s = &l->s[reverse ? l->n - 1 - j : j];
        if (s->superseded || (s->boundary_only && p->skip_boundary_only)) continue;
        double t0 = p->profiling ? ftl_now() : 0;
        if (s->kind != TP_PRIM && pending) {
            CPU_TRY(dnnl_stream_wait(p->stream), "training step");
            pending = false;
        }
        switch (s->kind) {
        case TP_PRIM:
            CPU_TRY(dnnl_primitive_execute(s->prim, p->stream, s->n_args, s->args), "training step");
            pending = true;
            if (p->profiling) {
                CPU_TRY(dnnl_stream_wait(p->stream), "training step");
                pending = false;
            }
            break;
        case TP_ACCUM: accumulate(s->dst, s->src, s->count); break;
        case TP_BINARY: run_binary(s); break;
        case TP_BINARY_BWD: run_binary_bwd(s); break;
        case TP_CONCAT: run_concat(s); break;
        case TP_SPLIT_BWD: run_split_bwd(s); break;
        case TP_GLOBAL_AVG: run_global_avg(s); break;
        case TP_GLOBAL_AVG_BWD: run_global_avg_bwd(s); break;
        }
        if (p->profiling) s->seconds += ftl_now() - t0;
    }
    if (pending) CPU_TRY(dnnl_stream_wait(p->stream), "training step");
    return FTL_OK;
}

void nn_train_plan_set_profiling(nn_train_plan *p, bool on) {
    p->profiling = on;
    p->profiled_steps = 0;
    p->host_clear_seconds = 0;
    tp_list *lists[2] = {&p->fwd, &p->bwd};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < lists[l]->n; i++) lists[l]->s[i].seconds = 0;
}

typedef struct tp_profile_row {
    const char *what;
    double seconds, flops;
    int steps;
    bool host;                  /* a loop of ftl's, not a oneDNN primitive */
} tp_profile_row;

static int by_time(const void *a, const void *b) {
    const tp_profile_row *x = a, *y = b;
    return x->seconds < y->seconds ? 1 : x->seconds > y->seconds ? -1 : strcmp(x->what, y->what);
}

void nn_train_plan_print_profile(const nn_train_plan *p, FILE *out) {
    int64_t n = p->profiled_steps > 0 ? p->profiled_steps : 1;
    int total_steps = p->fwd.n + p->bwd.n;
    tp_profile_row *rows = ftl_xcalloc((size_t)total_steps + 1, sizeof *rows);
    int n_rows = 0;
    double sum = p->host_clear_seconds;
    const tp_list *lists[2] = {&p->fwd, &p->bwd};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < lists[l]->n; i++) {
            const tp_step *s = &lists[l]->s[i];
            if (s->superseded || (s->boundary_only && p->skip_boundary_only)) continue; /* not run */
            sum += s->seconds;
            int r = 0;
            while (r < n_rows && strcmp(rows[r].what, s->what) != 0) r++;
            if (r == n_rows) rows[n_rows++] = (tp_profile_row){s->what, 0, 0, 0, s->kind != TP_PRIM};
            rows[r].seconds += s->seconds;
            rows[r].flops += s->flops;
            rows[r].steps++;
        }
    qsort(rows, (size_t)n_rows, sizeof *rows, by_time);
    /* what kind of work: oneDNN's convolutions (the ceiling), its other primitives, layout reorders, host loops */
    double conv = 0, reorder = 0, other_prim = 0, host = p->host_clear_seconds, flops = 0;
    for (int r = 0; r < n_rows; r++) {
        flops += rows[r].flops;
        if (rows[r].host) host += rows[r].seconds;
        else if (strstr(rows[r].what, ": convolution ")) conv += rows[r].seconds;
        else if (strstr(rows[r].what, ": reorder")) reorder += rows[r].seconds;
        else other_prim += rows[r].seconds;
    }
    fprintf(out, "training step: %.3f ms (forward + backward, %lld timed) = convolutions %.3f + other primitives %.3f + "
                 "reorders %.3f + host loops and gradient clearing %.3f ms; %.3f GFLOP of convolutions: %.1f GFLOP/s "
                 "over the step, %.1f in the convolutions\n",
            1e3 * sum / (double)n, (long long)p->profiled_steps, 1e3 * conv / (double)n, 1e3 * other_prim / (double)n,
            1e3 * reorder / (double)n, 1e3 * host / (double)n, flops / 1e9, sum > 0 ? flops * (double)n / sum / 1e9 : 0.0,
            conv > 0 ? flops * (double)n / conv / 1e9 : 0.0);
    fprintf(out, "  %9s %6s %8s  %s\n", "ms/step", "share", "GFLOP/s", "node: work");
    for (int r = 0; r < n_rows; r++) {
        char rate[16] = "";
        if (rows[r].flops > 0 && rows[r].seconds > 0)
            snprintf(rate, sizeof rate, "%.1f", rows[r].flops * (double)n / rows[r].seconds / 1e9);
        char steps[24] = "";
        if (rows[r].steps > 1) snprintf(steps, sizeof steps, " (%d steps)", rows[r].steps);
        fprintf(out, "  %9.3f %5.1f%% %8s  %s%s\n", 1e3 * rows[r].seconds / (double)n,
                sum > 0 ? 100.0 * rows[r].seconds / sum : 0.0, rate, rows[r].what, steps);
    }
    fprintf(out, "  %9.3f %5.1f%% %8s  clearing the gradient buffers\n", 1e3 * p->host_clear_seconds / (double)n,
            sum > 0 ? 100.0 * p->host_clear_seconds / sum : 0.0, "");
    free(rows);
}

ftl_status nn_train_plan_forward(nn_train_plan *p, const float *const *boundary, float *features) {
    for (int k = 0; k < p->tr->n_boundary; k++) {
        int t = p->tr->boundary[k];
        memcpy(p->act[t], boundary[k], (size_t)p->count[t] * sizeof(float));
    }
    FTL_TRY(run_list(p, &p->fwd, false));
    memcpy(features, p->act[p->feature], (size_t)p->count[p->feature] * sizeof(float));
    return FTL_OK;
}

ftl_status nn_train_plan_backward(nn_train_plan *p, const float *dfeatures, float *const *boundary_grads) {
    double t0 = p->profiling ? ftl_now() : 0;
    for (int t = 0; t < p->g->n_tensors; t++)
        if (p->owned[t] && !p->direct[t]) memset(p->grad[t], 0, (size_t)p->room[t] * sizeof(float));
    for (int k = 0; k < p->tr->n_params; k++)
        if (!p->param_direct[k])
            memset(p->pgrads + p->offset[k], 0, (size_t)p->g->tensors[p->tr->params[k].tensor].count * sizeof(float));
    if (p->profiling) {
        p->host_clear_seconds += ftl_now() - t0;
        p->profiled_steps++;
    }
    memcpy(p->grad[p->feature], dfeatures, (size_t)p->count[p->feature] * sizeof(float));
    p->skip_boundary_only = boundary_grads == NULL;
    FTL_TRY(run_list(p, &p->bwd, true));
    for (int k = 0; boundary_grads && k < p->tr->n_boundary; k++) {
        int t = p->tr->boundary[k];
        memcpy(boundary_grads[k], p->grad[t], (size_t)p->count[t] * sizeof(float));
    }
    return FTL_OK;
}

float *nn_train_plan_params(nn_train_plan *p) { return p->params; }
const float *nn_train_plan_grads(const nn_train_plan *p) { return p->pgrads; }
int64_t nn_train_plan_param_count(const nn_train_plan *p) { return p->n_params; }
int64_t nn_train_plan_param_offset(const nn_train_plan *p, int k) { return p->offset[k]; }
int nn_train_plan_bf16_convs(const nn_train_plan *p) { return p->bf16_convs; }
