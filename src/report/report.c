/* `ftl report`: the page. Facts, curves, time bars from the logs; per-class accuracy and the
 * confusion heatmap from an eval JSON; per-rank step times from a timeline. */
#include "ftl/report.h"
#include "report/run_log.h"
#include "report/sweep_report.h"
#include "report/svg_chart.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/io_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const run_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
static const char *const part_colors[RUN_LOG_TIMES] = {"#9e9e9e", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e",
                                                       "#c7c7c7"};
static const char *const part_names[RUN_LOG_TIMES] = {"data wait", "backbone", "head", "allreduce", "validation", "checkpoint",
                                                      "other"};

static const char *STYLE =
    "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:1100px}h1{font-size:20px}h2{font-size:16px;"
    "margin-top:28px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;"
    "vertical-align:top}code{font-size:12px}.notes li{color:#8a4b00}.chart{display:block;margin:8px 0}"
    ".frame{fill:#fafafa;stroke:#999}.t{font-weight:bold;font-size:13px}.yt{font-size:10px;text-anchor:end}"
    ".xt{font-size:10px;text-anchor:middle}.xl,.yl{font-size:11px;text-anchor:middle}.lg{font-size:11px}"
    ".marker{stroke-dasharray:3 3}.ml{font-size:10px}.bt{font-size:9px;text-anchor:middle}.acc{height:10px;"
    "background:#2ca02c;display:inline-block}";

static const char *string_of(const ftl_json *o, const char *key) {
    const char *s = ftl_json_get_string(o, key);
    return s ? s : "";
}

/* A row of the facts table; a value the log does not hold says so rather than staying empty. */
static void fact(ftl_strbuf *b, const char *name, const char *value) {
    ftl_strbuf_append(b, "<tr><th>", 8);
    html_append_escaped(b, name);
    ftl_strbuf_append(b, "</th><td>", 9);
    html_append_escaped(b, value && *value ? value : "not recorded");
    ftl_strbuf_append(b, "</td></tr>", 10);
}

/* The phases of a run: epochs run, best epoch and learning rate of each; phase 2's cut and
 * tuned parameters from its run record. */
static void phase_facts(ftl_strbuf *b, const run_log *log) {
    for (int phase = 1; phase <= (log->fine_tuned ? 2 : 1); phase++) {
        int64_t first = 0, last = 0, best = 0;
        double lr_lo = INFINITY, lr_hi = -INFINITY;
        for (int64_t e = 0; e < log->epoch_count; e++) {
            const run_epoch *r = &log->epochs[e];
            if (r->phase != phase) continue;
            if (!first) first = r->epoch;
            last = r->epoch;
            best = r->best_epoch;
            if (isfinite(r->lr)) lr_lo = fmin(lr_lo, r->lr), lr_hi = fmax(lr_hi, r->lr);
        }
        ftl_strbuf t = {0};
        if (phase == 1) ftl_strbuf_printf(&t, "%s: ", log->fine_tuned ? "the head on frozen features" : "the head");
        else {
            const ftl_json *ft = NULL;
            for (int i = 0; i < log->run_count && !ft; i++)
                if (log->run_phase[i] == 2) ft = ftl_json_get(log->runs[i], "fine_tune");
            double params = -1, nodes = -1;
            ftl_json_get_number(ft, "parameters", &params);
            ftl_json_get_number(ft, "nodes", &nodes);
            const char *cut = ftl_json_get_string(ft, "cut");
            ftl_strbuf_printf(&t, "fine-tuning %s", cut ? cut : "the backbone's top");
            if (nodes >= 0) ftl_strbuf_printf(&t, " (%.0f nodes", nodes);
            if (params >= 0) ftl_strbuf_printf(&t, "%s%.0f values)", nodes >= 0 ? ", " : " (", params);
            else if (nodes >= 0) ftl_strbuf_append(&t, ")", 1);
            ftl_strbuf_append(&t, " with the head: ", 16);
        }
        if (last) ftl_strbuf_printf(&t, "epochs %lld-%lld", (long long)first, (long long)last);
        else ftl_strbuf_printf(&t, "no epoch logged");
        if (phase == 2 && last) ftl_strbuf_printf(&t, " (x = %lld-%lld on the charts)", (long long)(first + log->phase1_epochs),
                                                  (long long)(last + log->phase1_epochs));
        if (best > 0) ftl_strbuf_printf(&t, ", best epoch %lld", (long long)best);
        else if (last && phase == 2) ftl_strbuf_printf(&t, ", no epoch beat phase 1");
        if (isfinite(lr_lo)) {
            if (lr_hi > lr_lo * (1 + 1e-9)) ftl_strbuf_printf(&t, ", lr %.3g-%.3g", lr_lo, lr_hi);
            else ftl_strbuf_printf(&t, ", lr %.3g", lr_lo);
        }
        fact(b, phase == 1 ? (log->fine_tuned ? "phase 1" : "training") : "phase 2", t.data);
        ftl_strbuf_free(&t);
    }
}

static void facts(ftl_strbuf *b, const run_log *log, int index) {
    ftl_strbuf_printf(b, "<h2>Run %d: ", index + 1);
    html_append_escaped(b, log->path);
    ftl_strbuf_append(b, "</h2>", 5);
    if (log->run_count == 0) {
        ftl_strbuf_printf(b, "<p>No run record in this log.</p>");
        return;
    }
    const ftl_json *r = log->runs[0];
    ftl_strbuf_append(b, "<table class=\"facts\">", 21);
    ftl_strbuf t = {0};
    const ftl_json *cmd = ftl_json_get(r, "command");
    for (size_t i = 0; cmd && cmd->type == FTL_JSON_ARRAY && i < cmd->count; i++)
        if (cmd->items[i].type == FTL_JSON_STRING) ftl_strbuf_printf(&t, "%s%s", i ? " " : "", cmd->items[i].string);
    fact(b, "command", t.data ? t.data : "");
    ftl_strbuf_free(&t);
    fact(b, "ftl version", string_of(r, "ftl_version"));
    fact(b, "started (UTC)", string_of(r, "started"));
    const ftl_json *bb = ftl_json_get(r, "backbone");
    ftl_strbuf_printf(&t, "%s (sha256 %s), features from '%s'", string_of(bb, "path"), string_of(bb, "sha256"),
                      string_of(bb, "feature_tensor"));
    fact(b, "backbone", t.data);
    ftl_strbuf_free(&t);
    ftl_strbuf_printf(&t, "train %s, val %s", string_of(r, "train"), ftl_json_get_string(r, "val") ? string_of(r, "val") : "none");
    fact(b, "data", t.data);
    ftl_strbuf_free(&t);
    const ftl_json *classes = ftl_json_get(r, "classes");
    size_t nc = classes && classes->type == FTL_JSON_ARRAY ? classes->count : 0;
    ftl_strbuf_printf(&t, "%zu:", nc);
    for (size_t i = 0; i < nc && i < 30; i++)
        if (classes->items[i].type == FTL_JSON_STRING) ftl_strbuf_printf(&t, " %s", classes->items[i].string);
    if (nc > 30) ftl_strbuf_printf(&t, " ...");
    fact(b, "classes", t.data);
    ftl_strbuf_free(&t);
    double threads = 0, ranks = 0, cores = 0;
    ftl_json_get_number(r, "threads", &threads);
    ftl_json_get_number(r, "ranks", &ranks);
    const ftl_json *m = ftl_json_get(r, "machine");
    ftl_json_get_number(m, "cores", &cores);
    ftl_strbuf_printf(&t, "%s precision, %s convolutions, feature cache %s, device %s", string_of(r, "precision"),
                      string_of(r, "conv_algorithm"), ftl_json_get(r, "feature_cache") && ftl_json_get(r, "feature_cache")->boolean ? "on" : "off",
                      string_of(r, "device"));
    fact(b, "compute", t.data);
    ftl_strbuf_free(&t);
    ftl_strbuf_printf(&t, "%.0f rank(s) x %.0f thread(s); host %s, %s, %.0f cores", ranks, threads, string_of(m, "host"),
                      string_of(m, "cpu"), cores);
    fact(b, "parallelism", t.data);
    ftl_strbuf_free(&t);
    phase_facts(b, log);
    for (int i = 1; i < log->run_count; i++) {
        if (log->run_kind[i] != RUN_RESUME) continue;
        const char *started = ftl_json_get_string(log->runs[i], "started");
        if (log->run_first_epoch[i] > 0)
            ftl_strbuf_printf(&t, "%s from %s at epoch %lld", log->run_phase[i] == 2 ? "fine-tuning" : "training",
                              string_of(log->runs[i], "resume"), (long long)log->run_first_epoch[i]);
        else
            ftl_strbuf_printf(&t, "from %s (no epoch logged after it)", string_of(log->runs[i], "resume"));
        if (started) ftl_strbuf_printf(&t, ", started %s", started);
        fact(b, "resumed", t.data);
        ftl_strbuf_free(&t);
    }
    ftl_strbuf_append(b, "</table>", 8);
}

typedef struct series_data {
    double *x, *y[5]; /* loss, val_loss, acc, val_acc, lr */
    int *phase;
    int64_t *epoch;
} series_data;

/* The marked epochs of one run: where fine-tuning starts, each phase's best epoch and early stop,
 * resumes. Labels are malloc'd into labels[*nl]. */
static void run_markers(const run_log *l, int run, bool several, char **labels, int *nl, chart_marker *marks, int *nm) {
    const char *color = run_colors[run % 8];
    char who[24] = "";
    if (several) snprintf(who, sizeof who, "run %d ", run + 1);
    if (l->fine_tuned) {
        labels[*nl] = ftl_format("%sfine-tuning from here", who);
        marks[(*nm)++] = (chart_marker){(double)l->phase1_epochs + 0.5, labels[(*nl)++], "#555"};
    }
    for (int phase = 1; phase <= (l->fine_tuned ? 2 : 1); phase++) {
        const run_epoch *last = NULL;
        for (int64_t e = 0; e < l->epoch_count; e++)
            if (l->epochs[e].phase == phase) last = &l->epochs[e];
        if (!last) continue;
        double offset = phase == 2 ? (double)l->phase1_epochs : 0;
        const char *name = l->fine_tuned ? (phase == 1 ? "phase 1 " : "phase 2 ") : "";
        if (last->best_epoch > 0) {
            labels[*nl] = ftl_format("%s%sbest epoch %lld", who, name, (long long)last->best_epoch);
            marks[(*nm)++] = (chart_marker){offset + (double)last->best_epoch, labels[(*nl)++], color};
        }
        if (last->epochs > last->epoch) { /* ended before its planned epochs: early stopping */
            labels[*nl] = ftl_format("%s%sstopped early", who, name);
            marks[(*nm)++] = (chart_marker){offset + (double)last->epoch, labels[(*nl)++], color};
        }
    }
    for (int k = 1; k < l->run_count; k++)
        if (l->run_kind[k] == RUN_RESUME && l->run_first_epoch[k] > 0) {
            double at = (double)l->run_first_epoch[k] + (l->run_phase[k] == 2 ? (double)l->phase1_epochs : 0) - 0.5;
            labels[*nl] = ftl_format("%sresumed", who);
            marks[(*nm)++] = (chart_marker){at, labels[(*nl)++], "#555"};
        }
}

static void curves(ftl_strbuf *b, run_log *logs, int count) {
    series_data *d = ftl_xcalloc((size_t)count, sizeof *d);
    chart_series *s = ftl_xcalloc((size_t)count * 2 + 1, sizeof *s);
    size_t label_cap = (size_t)count * 16 + 1;
    for (int i = 0; i < count; i++) label_cap += (size_t)logs[i].run_count;
    char **labels = ftl_xcalloc(label_cap, sizeof *labels);
    chart_marker *marks = ftl_xcalloc(label_cap, sizeof *marks);
    int nl = 0, nm = 0;
    for (int i = 0; i < count; i++) {
        run_log *l = &logs[i];
        size_t n = (size_t)l->epoch_count + 1;
        d[i].x = ftl_xmalloc(n * sizeof(double));
        d[i].phase = ftl_xmalloc(n * sizeof(int));
        d[i].epoch = ftl_xmalloc(n * sizeof(int64_t));
        for (int k = 0; k < 5; k++) d[i].y[k] = ftl_xmalloc(n * sizeof(double));
        for (int64_t e = 0; e < l->epoch_count; e++) {
            const run_epoch *r = &l->epochs[e];
            d[i].x[e] = r->x;
            d[i].phase[e] = r->phase;
            d[i].epoch[e] = r->epoch;
            d[i].y[0][e] = r->loss, d[i].y[1][e] = r->val_loss, d[i].y[2][e] = r->acc, d[i].y[3][e] = r->val_acc;
            d[i].y[4][e] = r->lr;
        }
        run_markers(l, i, count > 1, labels, &nl, marks, &nm);
    }
    const char *names[3][2] = {{"loss", "val_loss"}, {"acc", "val_acc"}, {"lr", NULL}};
    const char *titles[3] = {"Loss (training mode; validation dashed)", "Accuracy (validation dashed)", "Learning rate"};
    /* every quantity here is >= 0; a learning rate that spans decades gets a log axis */
    const chart_axis axes[3] = {{true, false, NAN, NAN}, {true, false, NAN, NAN}, {true, true, NAN, NAN}};
    for (int c = 0; c < 3; c++) {
        int ns = 0;
        for (int i = 0; i < count; i++)
            for (int v = 0; v < 2 && names[c][v]; v++) {
                labels[nl] = ftl_format("run %d %s", i + 1, names[c][v]);
                s[ns++] = (chart_series){labels[nl++], names[c][v], i, run_colors[i % 8], v == 1, d[i].x, d[i].y[2 * c + v],
                                         logs[i].epoch_count, d[i].phase, d[i].epoch};
            }
        svg_line_chart(b, titles[c], "epoch", names[c][0], s, ns, marks, nm, &axes[c]);
    }
    for (int i = 0; i < count; i++) {
        free(d[i].x);
        free(d[i].phase);
        free(d[i].epoch);
        for (int k = 0; k < 5; k++) free(d[i].y[k]);
    }
    for (int i = 0; i < nl; i++) free(labels[i]);
    free(labels);
    free(d);
    free(s);
    free(marks);
}

/* The tallest epoch of all runs, so that overlaid runs' bars share one scale. */
static double tallest_epoch(const run_log *logs, int count) {
    double top = 0;
    for (int i = 0; i < count; i++)
        for (int64_t e = 0; e < logs[i].epoch_count; e++) {
            double sum = 0;
            for (int k = 0; k < RUN_LOG_TIMES; k++)
                if (isfinite(logs[i].epochs[e].time[k]) && logs[i].epochs[e].time[k] > 0) sum += logs[i].epochs[e].time[k];
            top = fmax(top, sum);
        }
    return top;
}

static void time_bars(ftl_strbuf *b, const run_log *l, int index, double y_max) {
    int64_t n = l->epoch_count;
    double *x = ftl_xmalloc((size_t)n * sizeof(double) + 1), *ips = ftl_xmalloc((size_t)n * sizeof(double) + 1);
    int *phase = ftl_xmalloc((size_t)n * sizeof(int) + 1);
    int64_t *epoch = ftl_xmalloc((size_t)n * sizeof(int64_t) + 1);
    double *v[RUN_LOG_TIMES];
    for (int k = 0; k < RUN_LOG_TIMES; k++) v[k] = ftl_xmalloc((size_t)n * sizeof(double) + 1);
    for (int64_t e = 0; e < n; e++) {
        x[e] = l->epochs[e].x;
        phase[e] = l->epochs[e].phase;
        epoch[e] = l->epochs[e].epoch;
        ips[e] = l->epochs[e].images_per_second;
        for (int k = 0; k < RUN_LOG_TIMES; k++) v[k][e] = l->epochs[e].time[k];
    }
    char *labels[64] = {0};
    chart_marker marks[64];
    int nl = 0, nm = 0;
    if (l->fine_tuned) {
        labels[nl] = ftl_format("fine-tuning from here");
        marks[nm++] = (chart_marker){(double)l->phase1_epochs + 0.5, labels[nl++], "#555"};
    }
    char *title = ftl_format("Run %d: where each epoch's time went (seconds; images/s above)", index + 1);
    svg_stacked_bars(b, title, "seconds", x, phase, epoch, n, (const double *const *)v, part_names, part_colors, RUN_LOG_TIMES, ips, "/s",
                     marks, nm, y_max);
    for (int i = 0; i < nl; i++) free(labels[i]);
    free(title);
    free(x);
    free(phase);
    free(epoch);
    free(ips);
    for (int k = 0; k < RUN_LOG_TIMES; k++) free(v[k]);
}

typedef struct class_row {
    const char *name;
    double images, accuracy;
} class_row;

static int by_accuracy(const void *a, const void *b) {
    const class_row *x = a, *y = b;
    return (x->accuracy > y->accuracy) - (x->accuracy < y->accuracy);
}

/* A whole JSON file (eval --json, a timeline). */
static ftl_status read_json_file(const char *path, ftl_json **v) {
    uint8_t *data;
    size_t size;
    *v = NULL;
    FTL_TRY(ftl_read_file(path, &data, &size));
    ftl_status st = ftl_json_parse((const char *)data, size, v);
    free(data);
    return st;
}

static ftl_status eval_section(ftl_strbuf *b, const char *path) {
    ftl_json *v = NULL;
    ftl_status st = read_json_file(path, &v);
    const ftl_json *classes = st == FTL_OK ? ftl_json_get(v, "classes") : NULL;
    const ftl_json *conf = st == FTL_OK ? ftl_json_get(v, "confusion") : NULL;
    if (st == FTL_OK && (!classes || classes->type != FTL_JSON_ARRAY || !conf || conf->type != FTL_JSON_ARRAY ||
                         conf->count != classes->count))
        st = ftl_fail(FTL_E_FORMAT, "%s: not an ftl eval --json file (classes and confusion expected)", path);
    size_t n = st == FTL_OK ? classes->count : 0;
    for (size_t i = 0; st == FTL_OK && i < n; i++) {
        if (conf->items[i].type != FTL_JSON_ARRAY || conf->items[i].count != n) {
            st = ftl_fail(FTL_E_FORMAT, "%s: confusion row %zu does not have %zu entries", path, i, n);
            break;
        }
        for (size_t j = 0; st == FTL_OK && j < n; j++) {
            const ftl_json *c = &conf->items[i].items[j];
            if (c->type != FTL_JSON_NUMBER || !(c->number >= 0 && c->number <= 1e15))
                st = ftl_fail(FTL_E_FORMAT, "%s: confusion[%zu][%zu] is not an image count", path, i, j);
        }
    }
    if (st != FTL_OK) {
        ftl_json_free(v);
        return st;
    }
    double top1 = NAN, top5 = NAN, loss = NAN, images = 0;
    ftl_json_get_number(v, "top1", &top1);
    ftl_json_get_number(v, "top5", &top5);
    ftl_json_get_number(v, "loss", &loss);
    ftl_json_get_number(v, "images", &images);
    ftl_strbuf_printf(b, "<h2>Evaluation: ");
    html_append_escaped(b, path);
    ftl_strbuf_printf(b, "</h2><p>%.0f images: top-1 %.4f, top-5 %.4f, loss %.4f</p>", images, top1, top5, loss);
    class_row *rows = ftl_xcalloc(n ? n : 1, sizeof *rows);
    for (size_t i = 0; i < n; i++) {
        rows[i].name = ftl_json_get_string(&classes->items[i], "name");
        ftl_json_get_number(&classes->items[i], "images", &rows[i].images);
        ftl_json_get_number(&classes->items[i], "accuracy", &rows[i].accuracy);
    }
    qsort(rows, n, sizeof *rows, by_accuracy);
    ftl_strbuf_printf(b, "<h3>Per-class accuracy, worst first</h3><table class=\"classes\"><tr><th>class</th><th>images</th>"
                         "<th>accuracy</th><th></th></tr>");
    for (size_t i = 0; i < n; i++) {
        ftl_strbuf_printf(b, "<tr data-class=\"");
        html_append_escaped(b, rows[i].name);
        ftl_strbuf_printf(b, "\" data-accuracy=\"%.17g\"><td>", rows[i].accuracy);
        html_append_escaped(b, rows[i].name);
        ftl_strbuf_printf(b, "</td><td>%.0f</td><td>%.4f</td><td><span class=\"acc\" style=\"width:%.0fpx\"></span></td></tr>",
                          rows[i].images, rows[i].accuracy, 200 * rows[i].accuracy);
    }
    ftl_strbuf_append(b, "</table>", 8);
    /* the most confused pairs */
    typedef struct { size_t t, p; double c; } pair;
    pair top[5] = {{0}};
    double max_cell = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double c = conf->items[i].items[j].number;
            if (c > max_cell) max_cell = c;
            if (i == j || c <= 0) continue;
            for (int k = 0; k < 5; k++)
                if (c > top[k].c) {
                    memmove(top + k + 1, top + k, (size_t)(4 - k) * sizeof *top);
                    top[k] = (pair){i, j, c};
                    break;
                }
        }
    ftl_strbuf_printf(b, "<h3>Most confused pairs</h3><ul class=\"confused\">");
    for (int k = 0; k < 5 && top[k].c > 0; k++) {
        ftl_strbuf_append(b, "<li>", 4);
        html_append_escaped(b, ftl_json_get_string(&classes->items[top[k].t], "name"));
        ftl_strbuf_append(b, " predicted as ", 14);
        html_append_escaped(b, ftl_json_get_string(&classes->items[top[k].p], "name"));
        ftl_strbuf_printf(b, ": %.0f images</li>", top[k].c);
    }
    ftl_strbuf_append(b, "</ul>", 5);
    /* heatmap: rows true, columns predicted; darker = more images */
    /* names down the left and (rotated) along the top when the cells are large enough to label */
    int cell = n <= 20 ? 32 : n <= 60 ? 10 : 4, left = n <= 20 ? 110 : 10, top_margin = n <= 20 ? 80 : 10;
    int width = left + cell * (int)n + 10, height = top_margin + cell * (int)n + 10;
    ftl_strbuf_printf(b, "<h3>Confusion matrix (rows: true class, columns: predicted)</h3><svg class=\"heatmap\" "
                         "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\">", width, height, width, height);
    for (size_t i = 0; i < n; i++) {
        if (n <= 20) {
            ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">", left - 4,
                              top_margin + cell * (int)i + cell / 2 + 3);
            html_append_escaped(b, ftl_json_get_string(&classes->items[i], "name"));
            int cx = left + cell * (int)i + cell / 2;
            ftl_strbuf_printf(b, "</text><text x=\"%d\" y=\"%d\" font-size=\"10\" transform=\"rotate(-60 %d %d)\">", cx,
                              top_margin - 4, cx, top_margin - 4);
            html_append_escaped(b, ftl_json_get_string(&classes->items[i], "name"));
            ftl_strbuf_append(b, "</text>", 7);
        }
        for (size_t j = 0; j < n; j++) {
            double c = conf->items[i].items[j].number;
            int shade = (int)lround(255 - 200 * c / max_cell);
            ftl_strbuf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"rgb(%d,%d,255)\" data-true=\"%zu\" "
                                 "data-predicted=\"%zu\" data-count=\"%.0f\"><title>",
                              left + cell * (int)j, top_margin + cell * (int)i, cell, cell, shade, shade, i, j, c);
            html_append_escaped(b, ftl_json_get_string(&classes->items[i], "name"));
            ftl_strbuf_append(b, " predicted as ", 14);
            html_append_escaped(b, ftl_json_get_string(&classes->items[j], "name"));
            ftl_strbuf_printf(b, ": %.0f images</title></rect>", c);
            if (n <= 20)
                ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\" fill=\"%s\">%.0f</text>",
                                  left + cell * (int)j + cell / 2, top_margin + cell * (int)i + cell / 2 + 3,
                                  shade < 140 ? "#fff" : "#000", c);
        }
    }
    ftl_strbuf_append(b, "</svg>", 6);
    free(rows);
    ftl_json_free(v);
    return FTL_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Per-rank step times from a --timeline trace: the spans of one global step, summed. */
static ftl_status timeline_section(ftl_strbuf *b, const char *path) {
    ftl_json *v = NULL;
    ftl_status st = read_json_file(path, &v);
    if (st == FTL_OK && v->type != FTL_JSON_ARRAY) st = ftl_fail(FTL_E_FORMAT, "%s: not a trace-event array", path);
    if (st != FTL_OK) {
        ftl_json_free(v);
        return ftl_fail_context(st, "%s: not an ftl --timeline file", path);
    }
    int ranks = 0;
    int64_t steps = 0;
    for (size_t i = 0; i < v->count; i++) {
        double pid = -1, step = -1;
        const ftl_json *e = &v->items[i];
        const char *name = ftl_json_get_string(e, "name");
        if (!name || strcmp(name, "validation") == 0 || strcmp(name, "checkpoint") == 0) continue; /* not a step's */
        if (!ftl_json_get_number(e, "pid", &pid) || !ftl_json_get_number(ftl_json_get(e, "args"), "step", &step)) continue;
        if (pid >= 0 && pid < 4096 && pid + 1 > ranks) ranks = (int)pid + 1;
        if (step >= 0 && step < 1e8 && step + 1 > steps) steps = (int64_t)step + 1;
    }
    /* Step and rank numbers come from the file: a table far larger than its events is not a trace of ours. */
    if ((double)ranks * (double)steps > 8.0 * (double)v->count + 1024) {
        size_t events = v->count;
        ftl_json_free(v);
        return ftl_fail(FTL_E_FORMAT, "%s: %d ranks x %lld steps for %zu events: not an ftl --timeline file", path, ranks,
                        (long long)steps, events);
    }
    double *t = ftl_xcalloc((size_t)(ranks * steps) + 1, sizeof *t);
    for (size_t i = 0; i < v->count; i++) {
        const ftl_json *e = &v->items[i];
        double pid, step, dur;
        const char *name = ftl_json_get_string(e, "name");
        if (!name || strcmp(name, "validation") == 0 || strcmp(name, "checkpoint") == 0) continue;
        if (!ftl_json_get_number(e, "pid", &pid) || !ftl_json_get_number(e, "dur", &dur) ||
            !ftl_json_get_number(ftl_json_get(e, "args"), "step", &step) || pid < 0 || pid >= ranks || step < 0 || step >= steps)
            continue;
        t[(int64_t)pid * steps + (int64_t)step] += dur / 1e3;
    }
    ftl_strbuf_printf(b, "<h2>Per-rank step times: ");
    html_append_escaped(b, path);
    ftl_strbuf_printf(b, "</h2><table class=\"ranks\"><tr><th>rank</th><th>steps</th><th>median ms</th><th>mean ms</th>"
                         "<th>max ms</th></tr>");
    chart_series *s = ftl_xcalloc((size_t)ranks + 1, sizeof *s);
    char **labels = ftl_xcalloc((size_t)ranks + 1, sizeof *labels);
    double *x = ftl_xmalloc((size_t)steps * sizeof(double) + 1);
    for (int64_t k = 0; k < steps; k++) x[k] = (double)k;
    for (int r = 0; r < ranks; r++) {
        double *sorted = ftl_xmalloc((size_t)steps * sizeof(double) + 1), sum = 0;
        memcpy(sorted, t + (int64_t)r * steps, (size_t)steps * sizeof(double));
        qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
        for (int64_t k = 0; k < steps; k++) sum += sorted[k];
        ftl_strbuf_printf(b, "<tr data-rank=\"%d\"><td>%d</td><td>%lld</td><td>%.3f</td><td>%.3f</td><td>%.3f</td></tr>", r, r,
                          (long long)steps, steps ? sorted[steps / 2] : 0.0, steps ? sum / (double)steps : 0.0,
                          steps ? sorted[steps - 1] : 0.0);
        free(sorted);
        labels[r] = ftl_format("rank %d", r);
        s[r] = (chart_series){labels[r], "step_ms", r, run_colors[r % 8], false, x, t + (int64_t)r * steps, steps, NULL, NULL};
    }
    ftl_strbuf_append(b, "</table>", 8);
    const chart_axis ms_axis = {true, false, NAN, NAN};
    svg_line_chart(b, "Step time per rank (ms: data wait + backbone + head + allreduce + optimizer)", "global step", "ms", s,
                   ranks, NULL, 0, &ms_axis);
    for (int r = 0; r < ranks; r++) free(labels[r]);
    free(labels);
    free(s);
    free(x);
    free(t);
    ftl_json_free(v);
    return FTL_OK;
}

ftl_status ftl_report_write(const ftl_report_options *o) {
    if (o->log_count < 1 || !o->output_path) return ftl_fail(FTL_E_INVALID_ARG, "report needs at least one log and an output path");
    ftl_io_check *paths = ftl_io_check_new("report");
    ftl_io_check_output(paths, "-o", o->output_path);
    for (int i = 0; i < o->log_count; i++) ftl_io_check_input(paths, "LOG", o->logs[i]);
    ftl_io_check_input(paths, "--eval", o->eval_json);
    ftl_io_check_input(paths, "--timeline", o->timeline);
    ftl_status checked = ftl_io_check_run(paths);
    ftl_io_check_free(paths);
    FTL_TRY(checked);
    if (ftl_path_exists(o->output_path) && !o->overwrite)
        return ftl_fail(FTL_E_EXISTS, "%s already exists (use --overwrite to replace it)", o->output_path);
    for (int i = 0; i < o->log_count; i++)
        if (sweep_report_is_sweep_log(o->logs[i])) {
            if (o->log_count > 1 || o->eval_json || o->timeline)
                return ftl_fail(FTL_E_INVALID_ARG, "%s is a sweep's log: its report is drawn alone (no other logs, eval or "
                                "timeline)", o->logs[i]);
            ftl_strbuf b = {0};
            ftl_status st = sweep_report_write(o->logs[i], STYLE, &b);
            if (st == FTL_OK) {
                ftl_strbuf_printf(&b, "<p><small>Written by ftl %s: no scripts, nothing loaded from outside.</small></p>"
                                      "</body></html>\n", FTL_VERSION);
                st = ftl_output_write(o->output_path, b.data, b.len, o->overwrite);
            }
            ftl_strbuf_free(&b);
            return st;
        }
    run_log *logs = ftl_xcalloc((size_t)o->log_count, sizeof *logs);
    ftl_status st = FTL_OK;
    int read = 0;
    for (; read < o->log_count && st == FTL_OK; read++) st = run_log_read(o->logs[read], &logs[read]);
    if (st != FTL_OK) read--;
    ftl_strbuf b = {0};
    if (st == FTL_OK) {
        ftl_strbuf_printf(&b, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                              "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
                              "'unsafe-inline'\"><title>ftl run report</title><style>%s</style></head><body><h1>ftl run report</h1>",
                          STYLE);
        bool any_notes = false;
        for (int i = 0; i < o->log_count; i++) any_notes = any_notes || logs[i].notes;
        if (any_notes) {
            ftl_strbuf_append(&b, "<ul class=\"notes\">", 18);
            for (int i = 0; i < o->log_count; i++) {
                for (char *p = logs[i].notes; p && *p;) {
                    char *nl = strchr(p, '\n');
                    size_t n = nl ? (size_t)(nl - p) : strlen(p);
                    char *line = ftl_format("%.*s", (int)n, p);
                    ftl_strbuf_append(&b, "<li>", 4);
                    html_append_escaped(&b, line);
                    ftl_strbuf_append(&b, "</li>", 5);
                    free(line);
                    p += n + (nl ? 1 : 0);
                }
            }
            ftl_strbuf_append(&b, "</ul>", 5);
        }
        ftl_strbuf_append(&b, "<h2>Training curves</h2>", 24);
        curves(&b, logs, o->log_count);
        double bar_top = svg_nice_top(tallest_epoch(logs, o->log_count) * 1.12);
        for (int i = 0; i < o->log_count; i++) time_bars(&b, &logs[i], i, bar_top);
        for (int i = 0; i < o->log_count; i++) facts(&b, &logs[i], i);
    }
    if (st == FTL_OK && o->eval_json) st = eval_section(&b, o->eval_json);
    if (st == FTL_OK && o->timeline) st = timeline_section(&b, o->timeline);
    if (st == FTL_OK) {
        ftl_strbuf_printf(&b, "<p><small>Written by ftl %s: no scripts, nothing loaded from outside.</small></p></body></html>\n",
                          FTL_VERSION);
        st = ftl_output_write(o->output_path, b.data, b.len, o->overwrite);
    }
    ftl_strbuf_free(&b);
    for (int i = 0; i < read; i++) run_log_free(&logs[i]);
    free(logs);
    return st;
}
