/* ftl sweep's records of its trials: the score halving ranks by, each trial's result (its file, and
 * the lines ranks exchange), and the sweep's log with its per-rank parts. */
#include "pipeline/sweep_internal.h"
#include "ftl/dist.h"
#include "train/pool.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/timing.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The score successive halving ranks by: the best of the monitored metric over the trial's epochs up
 * to `epoch`, larger is better (losses negated); from the history, which a resume restores too. */
double sweep_score_at(const ftl_trainer *t, int64_t epoch) {
    const ftl_epoch_log *h;
    size_t n = ftl_trainer_history(t, &h);
    const ftl_early_stopping *es = &t->es;
    double best = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (h[i].epoch > epoch) continue;
        double v = NAN;
        switch (es->config.monitor) {
        case FTL_MONITOR_VAL_ACC: v = h[i].val_acc; break;
        case FTL_MONITOR_VAL_LOSS: v = h[i].val_loss; break;
        case FTL_MONITOR_ACC: v = h[i].acc; break;
        case FTL_MONITOR_LOSS: v = h[i].loss; break;
        }
        if (!isnan(v) && (es->maximize ? v : -v) > best) best = es->maximize ? v : -v;
    }
    return best;
}

void sweep_append_result_json(ftl_strbuf *b, int trial, const ftl_sweep_trial_result *r) {
    const ftl_fit_result *f = &r->fit;
    ftl_strbuf_printf(b, "{\"record\":\"trial\",\"trial\":%d,\"rank\":%d,\"epochs_run\":%lld,\"best_epoch\":%lld,\"stopped_early\":%s,"
                         "\"halted_at\":%lld,\"score\":",
                      trial + 1, r->rank, (long long)f->epochs_run, (long long)f->best_epoch, f->stopped_early ? "true" : "false",
                      (long long)r->halted_at);
    ftl_json_append_number(b, r->score);
    const char *names[] = {"loss", "acc", "val_loss", "val_acc", "best_value", "seconds"};
    double values[] = {f->final_loss, f->final_acc, f->final_val_loss, f->final_val_acc, f->best_value, r->seconds};
    for (int i = 0; i < 6; i++) {
        ftl_strbuf_printf(b, ",\"%s\":", names[i]);
        ftl_json_append_number(b, values[i]);
    }
    ftl_strbuf_append(b, "}", 1);
}

static double json_number_or_nan(const ftl_json *v, const char *key) {
    double x;
    return ftl_json_get_number(v, key, &x) ? x : NAN;
}

/* A trial's result record (its result file, or a line another rank sent): the trial is done. */
static ftl_status parse_result(const char *text, size_t size, const char *what, ftl_sweep_trial_result *r) {
    ftl_json *v = NULL;
    ftl_status st = ftl_json_parse(text, size, &v);
    if (st != FTL_OK) return ftl_fail_context(st, "%s", what);
    ftl_fit_result *f = &r->fit;
    memset(r, 0, sizeof *r);
    f->epochs_run = (int64_t)json_number_or_nan(v, "epochs_run");
    f->best_epoch = (int64_t)json_number_or_nan(v, "best_epoch");
    const ftl_json *se = ftl_json_get(v, "stopped_early");
    f->stopped_early = se && se->type == FTL_JSON_BOOL && se->boolean;
    r->halted_at = (int64_t)json_number_or_nan(v, "halted_at");
    r->score = json_number_or_nan(v, "score");
    if (isnan(r->score)) r->score = -INFINITY;
    f->final_loss = json_number_or_nan(v, "loss");
    f->final_acc = json_number_or_nan(v, "acc");
    f->final_val_loss = json_number_or_nan(v, "val_loss");
    f->final_val_acc = json_number_or_nan(v, "val_acc");
    f->best_value = json_number_or_nan(v, "best_value");
    r->seconds = json_number_or_nan(v, "seconds");
    r->rank = (int)json_number_or_nan(v, "rank");
    r->done = true;
    ftl_json_free(v);
    return FTL_OK;
}

/* A result file of an earlier (interrupted) run of the sweep. */
ftl_status sweep_read_result(const char *path, ftl_sweep_trial_result *r) {
    uint8_t *data = NULL;
    size_t size = 0;
    FTL_TRY(ftl_read_file(path, &data, &size));
    char *what = ftl_format("%s (delete it to train the trial again)", path);
    ftl_status st = parse_result((const char *)data, size, what, r);
    free(what);
    free(data);
    r->resumed = st == FTL_OK;
    return st;
}

/* One line of the sweep's log (under the lock). */
ftl_status sweep_log_line(sweep_shared *sh, const char *text) {
    if (!sh->log) return FTL_OK;
    if (fputs(text, sh->log) == EOF || fputc('\n', sh->log) == EOF || fflush(sh->log) != 0)
        return ftl_fail(FTL_E_IO, "cannot write the sweep log %s: %s", sh->ro->log_path, strerror(errno));
    return FTL_OK;
}

/* The trial's epoch record for the sweep's log: its settings and the epoch's metrics. */
ftl_status sweep_log_epoch(sweep_shared *sh, int trial) {
    const ftl_epoch_log *h;
    size_t n = ftl_trainer_history(sh->trials[trial].t, &h);
    if (!sh->log || n == 0) return FTL_OK;
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"record\":\"trial_epoch\",\"trial\":%d,\"settings\":%s,\"log\":", trial + 1,
                      sh->ro->settings_json ? sh->ro->settings_json[trial] : "{}");
    ftl_train_append_epoch_json(&b, &h[n - 1]);
    ftl_strbuf_append(&b, "}", 1);
    pthread_mutex_lock(&sh->lock);
    ftl_status st = sweep_log_line(sh, b.data);
    pthread_mutex_unlock(&sh->lock);
    ftl_strbuf_free(&b);
    return st;
}

/* Every rank's finished trials' results, to every rank. */
ftl_status sweep_share_results(sweep_shared *sh) {
    if (!ftl_dist_active(sh->col)) return FTL_OK;
    ftl_strbuf b = {0};
    ftl_strbuf_append(&b, "", 0);
    int me = ftl_dist_rank(sh->col);
    for (int i = 0; i < sh->trial_count; i++)
        if (sh->owner[i] == me && sh->results[i].done) {
            sweep_append_result_json(&b, i, &sh->results[i]);
            ftl_strbuf_append(&b, "\n", 1);
        }
    uint8_t *all = NULL;
    size_t *sizes = ftl_xcalloc((size_t)ftl_dist_size(sh->col), sizeof *sizes);
    ftl_dist_set_context(sh->col, -1, "gathering the trials' results");
    ftl_status st = ftl_dist_allgather(sh->col, b.data, b.len, &all, sizes);
    size_t total = 0;
    for (int i = 0; i < ftl_dist_size(sh->col); i++) total += sizes[i];
    for (size_t at = 0; st == FTL_OK && at < total;) {
        size_t end = at;
        while (end < total && all[end] != '\n') end++;
        ftl_sweep_trial_result r;
        st = parse_result((const char *)all + at, end - at, "a trial's result from another rank", &r);
        ftl_json *v = NULL;
        double id = NAN;
        if (st == FTL_OK && ftl_json_parse((const char *)all + at, end - at, &v) == FTL_OK) id = json_number_or_nan(v, "trial");
        ftl_json_free(v);
        if (st == FTL_OK && !(id >= 1 && id <= sh->trial_count)) st = ftl_fail(FTL_E_INTERNAL, "a result of trial %g", id);
        if (st == FTL_OK && sh->owner[(int)id - 1] != me) {
            r.resumed = sh->results[(int)id - 1].resumed;
            sh->results[(int)id - 1] = r;
        }
        at = end + 1;
    }
    free(all), free(sizes);
    ftl_strbuf_free(&b);
    return st;
}

/* Ranks other than 0 log to LOG.rank-R while the sweep runs; at its end rank 0 appends their parts. */
ftl_status sweep_merge_logs(sweep_shared *sh, const char *part_path) {
    if (!ftl_dist_active(sh->col) || !sh->ro->log_path) return FTL_OK;
    int me = ftl_dist_rank(sh->col);
    uint8_t *mine = NULL, *all = NULL;
    size_t size = 0;
    if (me != 0 && ftl_path_exists(part_path)) FTL_TRY(ftl_read_file(part_path, &mine, &size));
    size_t *sizes = ftl_xcalloc((size_t)ftl_dist_size(sh->col), sizeof *sizes);
    ftl_dist_set_context(sh->col, -1, "gathering the sweep's log");
    ftl_status st = ftl_dist_gather(sh->col, mine ? mine : (const uint8_t *)"", size, 0, &all, sizes);
    if (st == FTL_OK && me == 0 && sh->log) {
        size_t total = 0;
        for (int i = 0; i < ftl_dist_size(sh->col); i++) total += sizes[i];
        if (total && (fwrite(all, 1, total, sh->log) != total || fflush(sh->log) != 0))
            st = ftl_fail(FTL_E_IO, "cannot write the sweep log %s: %s", sh->ro->log_path, strerror(errno));
    }
    if (st == FTL_OK && me != 0 && mine) unlink(part_path);
    free(mine), free(all), free(sizes);
    return st;
}
