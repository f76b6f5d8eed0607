/* `ftl report SWEEP.jsonl`: a sweep's log (ftl sweep --log) as a page. The trials ranked by their
 * final val_acc with their settings, the top trials' val_acc and val_loss curves, and each swept
 * setting against val_acc as a scatter. A trial's epochs logged twice (an interrupted sweep resumed
 * from the epoch before) are shown as the resumed sweep logged them. */
#include "report/sweep_report.h"
#include "report/svg_chart.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TOP_CURVES = 8, MAX_TRIALS = 1 << 20, MAX_EPOCHS = 1 << 20 };

static const char *const curve_colors[TOP_CURVES] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                                     "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

typedef struct trial_log {
    int id;                  /* 1-based */
    const ftl_json *settings;/* borrowed from its first epoch record */
    int64_t epochs;          /* the last epoch logged */
    double *val_acc, *val_loss; /* [epochs], NaN where absent */
    bool ended;
    double final_val_acc, final_val_loss;
    int64_t best_epoch, epochs_run, halted_at;
} trial_log;

typedef struct sweep_log {
    ftl_json **records;      /* every parsed line (the trials borrow from them) */
    int64_t record_count;
    const ftl_json *sweep;   /* the "record":"sweep" line */
    trial_log *trials;
    int trial_count;
    char *notes;
} sweep_log;

static void sweep_log_free(sweep_log *s) {
    for (int i = 0; i < s->trial_count; i++) free(s->trials[i].val_acc), free(s->trials[i].val_loss);
    free(s->trials);
    for (int64_t i = 0; i < s->record_count; i++) ftl_json_free(s->records[i]);
    free(s->records);
    free(s->notes);
}

static double number_or_nan(const ftl_json *o, const char *key) {
    double v;
    return o && ftl_json_get_number(o, key, &v) ? v : NAN;
}

static ftl_status grow_epochs(trial_log *t, int64_t epoch) {
    if (epoch <= t->epochs) return FTL_OK;
    if (epoch > MAX_EPOCHS) return ftl_fail(FTL_E_FORMAT, "epoch %lld is out of range", (long long)epoch);
    t->val_acc = ftl_xrealloc(t->val_acc, (size_t)epoch * sizeof *t->val_acc);
    t->val_loss = ftl_xrealloc(t->val_loss, (size_t)epoch * sizeof *t->val_loss);
    for (int64_t e = t->epochs; e < epoch; e++) t->val_acc[e] = t->val_loss[e] = NAN;
    t->epochs = epoch;
    return FTL_OK;
}

/* The trial a record names, checked against the sweep's trial count. */
static ftl_status record_trial(sweep_log *s, const ftl_json *r, const char *path, int64_t line, trial_log **out) {
    double id = number_or_nan(r, "trial");
    if (!(id >= 1 && id <= s->trial_count) || id != floor(id))
        return ftl_fail(FTL_E_FORMAT, "%s: line %lld names trial %g, but the sweep has %d trials", path, (long long)line, id,
                        s->trial_count);
    *out = &s->trials[(int)id - 1];
    return FTL_OK;
}

static ftl_status read_sweep_log(const char *path, sweep_log *s) {
    memset(s, 0, sizeof *s);
    uint8_t *data = NULL;
    size_t size = 0;
    FTL_TRY(ftl_read_file(path, &data, &size));
    ftl_status st = FTL_OK;
    int64_t line = 0;
    for (size_t at = 0; at < size && st == FTL_OK;) {
        size_t end = at;
        while (end < size && data[end] != '\n') end++;
        line++;
        bool last = end >= size;
        ftl_json *r = NULL;
        if (end > at && ftl_json_parse((const char *)data + at, end - at, &r) != FTL_OK) {
            if (s->sweep) { /* a sweep killed while writing a line: the resumed one goes on after it */
                char *note = ftl_format("%s%s: line %lld is incomplete (a sweep killed while writing it?) and was skipped.\n",
                                        s->notes ? s->notes : "", path, (long long)line);
                free(s->notes);
                s->notes = note;
            } else {
                st = ftl_fail(FTL_E_FORMAT, "%s: line %lld is not JSON: not an ftl sweep log (ftl sweep --log)", path,
                              (long long)line);
            }
        }
        at = last ? size : end + 1;
        if (!r) continue;
        s->records = ftl_xrealloc(s->records, (size_t)(s->record_count + 1) * sizeof *s->records);
        s->records[s->record_count++] = r;
        const char *kind = r->type == FTL_JSON_OBJECT ? ftl_json_get_string(r, "record") : NULL;
        if (!s->sweep) {
            double n = number_or_nan(r, "trials");
            if (!kind || strcmp(kind, "sweep") != 0 || !(n >= 1 && n <= MAX_TRIALS))
                st = ftl_fail(FTL_E_FORMAT, "%s: line %lld: an ftl sweep log starts with its sweep record", path, (long long)line);
            else {
                s->sweep = r;
                s->trial_count = (int)n;
                s->trials = ftl_xcalloc((size_t)n, sizeof *s->trials);
                for (int i = 0; i < s->trial_count; i++) s->trials[i].id = i + 1;
            }
            continue;
        }
        if (!kind) continue;
        trial_log *t = NULL;
        if (strcmp(kind, "trial_epoch") == 0) {
            st = record_trial(s, r, path, line, &t);
            const ftl_json *log = ftl_json_get(r, "log");
            double epoch = number_or_nan(log, "epoch");
            if (st == FTL_OK && !(epoch >= 1 && epoch == floor(epoch)))
                st = ftl_fail(FTL_E_FORMAT, "%s: line %lld: a trial's epoch record without its epoch", path, (long long)line);
            if (st == FTL_OK && grow_epochs(t, (int64_t)epoch) != FTL_OK)
                st = ftl_fail(FTL_E_FORMAT, "%s: line %lld: epoch %g is out of range", path, (long long)line, epoch);
            if (st == FTL_OK) {
                if (!t->settings) t->settings = ftl_json_get(r, "settings");
                /* later records of an epoch replace earlier ones (a resume redid it) */
                t->val_acc[(int64_t)epoch - 1] = number_or_nan(log, "val_acc");
                t->val_loss[(int64_t)epoch - 1] = number_or_nan(log, "val_loss");
            }
        } else if (strcmp(kind, "trial") == 0) {
            st = record_trial(s, r, path, line, &t);
            if (st == FTL_OK) {
                t->ended = true;
                t->final_val_acc = number_or_nan(r, "val_acc");
                t->final_val_loss = number_or_nan(r, "val_loss");
                t->best_epoch = (int64_t)number_or_nan(r, "best_epoch");
                t->epochs_run = (int64_t)number_or_nan(r, "epochs_run");
                double h = number_or_nan(r, "halted_at");
                t->halted_at = isfinite(h) ? (int64_t)h : 0;
            }
        }
    }
    free(data);
    if (st == FTL_OK && !s->sweep) st = ftl_fail(FTL_E_FORMAT, "%s is empty: not an ftl sweep log (ftl sweep --log)", path);
    if (st != FTL_OK) sweep_log_free(s);
    return st;
}

bool sweep_report_is_sweep_log(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char head[64] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    return strncmp(head, "{\"record\":\"sweep\"", 17) == 0;
}

/* Ended trials by final val_acc (then val_loss), then the unfinished by their last val_acc. */
static int by_result(const void *a, const void *b) {
    const trial_log *x = *(trial_log *const *)a, *y = *(trial_log *const *)b;
    if (x->ended != y->ended) return x->ended ? -1 : 1;
    double vx = x->ended ? x->final_val_acc : (x->epochs ? x->val_acc[x->epochs - 1] : NAN);
    double vy = y->ended ? y->final_val_acc : (y->epochs ? y->val_acc[y->epochs - 1] : NAN);
    if (isnan(vx) != isnan(vy)) return isnan(vx) ? 1 : -1;
    if (vx != vy && !isnan(vx)) return vx > vy ? -1 : 1;
    double lx = x->final_val_loss, ly = y->final_val_loss;
    if (x->ended && y->ended && lx != ly && !isnan(lx) && !isnan(ly)) return lx < ly ? -1 : 1;
    return x->id - y->id;
}

static void setting_text(ftl_strbuf *b, const ftl_json *v) {
    if (!v) return;
    if (v->type == FTL_JSON_STRING) html_append_escaped(b, v->string);
    else if (v->type == FTL_JSON_NUMBER) ftl_strbuf_printf(b, "%.9g", v->number);
}

static void label_of(char *out, size_t cap, const trial_log *t) {
    int n = snprintf(out, cap, "trial %d", t->id);
    const ftl_json *st = t->settings;
    for (size_t k = 0; st && st->type == FTL_JSON_OBJECT && k < st->count && n > 0 && (size_t)n < cap; k++) {
        const ftl_json *v = &st->items[k];
        const char *sep = k == 0 ? " (" : ", ";
        if (v->type == FTL_JSON_STRING) n += snprintf(out + n, cap - (size_t)n, "%s%s", sep, v->string);
        else n += snprintf(out + n, cap - (size_t)n, "%s%g", sep, v->number);
        if (k + 1 == st->count && n > 0 && (size_t)n < cap) n += snprintf(out + n, cap - (size_t)n, ")");
    }
}

static void facts(ftl_strbuf *b, const sweep_log *s, int ended) {
    ftl_strbuf_append(b, "<table class=\"facts\">", 21);
    const ftl_json *cmd = ftl_json_get(s->sweep, "command");
    if (cmd && cmd->type == FTL_JSON_ARRAY) {
        ftl_strbuf_append(b, "<tr><th>command</th><td><code>", 30);
        for (size_t i = 0; i < cmd->count; i++)
            if (cmd->items[i].type == FTL_JSON_STRING) {
                if (i) ftl_strbuf_append(b, " ", 1);
                html_append_escaped(b, cmd->items[i].string);
            }
        ftl_strbuf_append(b, "</code></td></tr>", 17);
    }
    ftl_strbuf_printf(b, "<tr><th>trials</th><td data-fact=\"trials\">%d (%d finished)</td></tr>", s->trial_count, ended);
    double eta = number_or_nan(s->sweep, "halving");
    if (eta >= 2) ftl_strbuf_printf(b, "<tr><th>successive halving</th><td>eta %g: after each rung the best 1/%g go on</td></tr>",
                                    eta, eta);
    ftl_strbuf_append(b, "</table>", 8);
}

static void trial_table(ftl_strbuf *b, trial_log *const *order, int n, const ftl_json *keys) {
    ftl_strbuf_append(b, "<table class=\"trials\"><tr><th>rank</th><th>trial</th>", 53);
    for (size_t k = 0; keys && k < keys->count; k++) {
        ftl_strbuf_append(b, "<th>", 4);
        html_append_escaped(b, keys->keys[k]);
        ftl_strbuf_append(b, "</th>", 5);
    }
    ftl_strbuf_append(b, "<th>epochs</th><th>best epoch</th><th>val_acc</th><th>val_loss</th></tr>", 72);
    for (int i = 0; i < n; i++) {
        const trial_log *t = order[i];
        double acc = t->ended ? t->final_val_acc : t->epochs ? t->val_acc[t->epochs - 1] : NAN;
        double loss = t->ended ? t->final_val_loss : t->epochs ? t->val_loss[t->epochs - 1] : NAN;
        ftl_strbuf_printf(b, "<tr class=\"trial\" data-trial=\"%d\" data-val-acc=\"%.17g\" data-val-loss=\"%.17g\" data-ended=\"%s\">"
                             "<td>%d</td><td>%d</td>",
                          t->id, acc, loss, t->ended ? "true" : "false", i + 1, t->id);
        for (size_t k = 0; keys && k < keys->count; k++) {
            ftl_strbuf_append(b, "<td>", 4);
            setting_text(b, t->settings ? ftl_json_get(t->settings, keys->keys[k]) : NULL);
            ftl_strbuf_append(b, "</td>", 5);
        }
        if (!t->ended) ftl_strbuf_printf(b, "<td>%lld (not finished)</td><td></td>", (long long)t->epochs);
        else if (t->halted_at > 0) ftl_strbuf_printf(b, "<td>%lld (halted)</td><td>%lld</td>", (long long)t->epochs_run, (long long)t->best_epoch);
        else ftl_strbuf_printf(b, "<td>%lld</td><td>%lld</td>", (long long)t->epochs_run, (long long)t->best_epoch);
        ftl_strbuf_printf(b, "<td>%.4f</td><td>%.4f</td></tr>", acc, loss);
    }
    ftl_strbuf_append(b, "</table>", 8);
}

static void top_curves(ftl_strbuf *b, trial_log *const *order, int n, const char *metric) {
    int k = n < TOP_CURVES ? n : TOP_CURVES;
    chart_series series[TOP_CURVES];
    char labels[TOP_CURVES][160];
    double *x[TOP_CURVES];
    for (int i = 0; i < k; i++) {
        const trial_log *t = order[i];
        label_of(labels[i], sizeof labels[i], t);
        x[i] = ftl_xcalloc((size_t)(t->epochs ? t->epochs : 1), sizeof(double));
        for (int64_t e = 0; e < t->epochs; e++) x[i][e] = (double)(e + 1);
        series[i] = (chart_series){.label = labels[i], .metric = metric, .run = t->id, .color = curve_colors[i],
                                   .x = x[i], .y = strcmp(metric, "val_acc") == 0 ? t->val_acc : t->val_loss, .n = t->epochs};
    }
    char title[96];
    snprintf(title, sizeof title, "%s of the top %d trials", metric, k);
    chart_axis axis = {.non_negative = true, .log_when_wide = strcmp(metric, "val_loss") == 0, .y_min = NAN, .y_max = NAN};
    svg_line_chart(b, title, "epoch", metric, series, k, NULL, 0, &axis);
    for (int i = 0; i < k; i++) free(x[i]);
}

/* Each swept setting against the final val_acc of the finished trials. */
static void scatters(ftl_strbuf *b, trial_log *const *order, int n, const ftl_json *keys) {
    double *x = ftl_xcalloc((size_t)n + 1, sizeof *x), *y = ftl_xcalloc((size_t)n + 1, sizeof *y);
    int *ids = ftl_xcalloc((size_t)n + 1, sizeof *ids);
    const char **cats = ftl_xcalloc((size_t)n + 1, sizeof *cats);
    for (size_t k = 0; keys && k < keys->count; k++) {
        const char *key = keys->keys[k];
        bool categorical = keys->items[k].type == FTL_JSON_STRING;
        int m = 0, nc = 0;
        for (int i = 0; i < n; i++) {
            const trial_log *t = order[i];
            const ftl_json *v = t->settings ? ftl_json_get(t->settings, key) : NULL;
            if (!t->ended || !v) continue;
            if (categorical) {
                if (v->type != FTL_JSON_STRING) continue;
                int c = 0;
                while (c < nc && strcmp(cats[c], v->string) != 0) c++;
                if (c == nc) cats[nc++] = v->string;
                x[m] = c;
            } else {
                if (v->type != FTL_JSON_NUMBER) continue;
                x[m] = v->number;
            }
            y[m] = order[i]->final_val_acc;
            ids[m++] = t->id;
        }
        char title[96];
        snprintf(title, sizeof title, "val_acc by %s", key);
        ftl_strbuf_printf(b, "<div class=\"scatter\" data-setting=\"");
        html_append_escaped(b, key);
        ftl_strbuf_append(b, "\">", 2);
        svg_scatter(b, title, key, "val_acc", x, y, ids, m, categorical ? cats : NULL, nc, "#1f77b4");
        ftl_strbuf_append(b, "</div>", 6);
    }
    free(x), free(y), free(ids), free(cats);
}

ftl_status sweep_report_write(const char *log_path, const char *style, ftl_strbuf *b) {
    sweep_log s;
    FTL_TRY(read_sweep_log(log_path, &s));
    trial_log **order = ftl_xcalloc((size_t)s.trial_count, sizeof *order);
    int ended = 0;
    const ftl_json *keys = NULL; /* the swept settings, from the first trial that logged an epoch */
    for (int i = 0; i < s.trial_count; i++) {
        order[i] = &s.trials[i];
        ended += s.trials[i].ended;
        if (!keys && s.trials[i].settings && s.trials[i].settings->type == FTL_JSON_OBJECT) keys = s.trials[i].settings;
    }
    qsort(order, (size_t)s.trial_count, sizeof *order, by_result);
    ftl_strbuf_printf(b, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
                         "'unsafe-inline'\"><title>ftl sweep report</title><style>%s</style></head><body><h1>ftl sweep report</h1>",
                      style);
    if (s.notes) {
        ftl_strbuf_append(b, "<ul class=\"notes\">", 18);
        for (char *p = s.notes; *p;) {
            char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            char *line = ftl_format("%.*s", (int)n, p);
            ftl_strbuf_append(b, "<li>", 4);
            html_append_escaped(b, line);
            ftl_strbuf_append(b, "</li>", 5);
            free(line);
            p += n + (nl ? 1 : 0);
        }
        ftl_strbuf_append(b, "</ul>", 5);
    }
    facts(b, &s, ended);
    ftl_strbuf_append(b, "<h2>The best trials' curves</h2>", 32);
    top_curves(b, order, s.trial_count, "val_acc");
    top_curves(b, order, s.trial_count, "val_loss");
    ftl_strbuf_append(b, "<h2>Settings against val_acc</h2>", 33);
    scatters(b, order, s.trial_count, keys);
    ftl_strbuf_append(b, "<h2>Trials, best first</h2>", 27);
    trial_table(b, order, s.trial_count, keys);
    free(order);
    sweep_log_free(&s);
    return FTL_OK;
}
