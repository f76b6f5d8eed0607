/* Reading training logs for the report. */
#include "report/run_log.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const run_log_time_names[RUN_LOG_TIMES] = {"data_wait_s", "backbone_s", "head_s", "allreduce_s",
                                                       "validation_s", "checkpoint_s", "other_s"};

/* A count from the file, clamped so that no conversion can overflow. */
static int64_t count_of(double x) { return x >= 0 ? (x < 1e15 ? (int64_t)x : (int64_t)1e15) : 0; }

static double number_or_nan(const ftl_json *o, const char *key) {
    double v;
    return o && ftl_json_get_number(o, key, &v) ? v : NAN;
}

static void note(run_log *log, const char *text) {
    ftl_strbuf b = {0};
    if (log->notes) ftl_strbuf_append(&b, log->notes, strlen(log->notes));
    ftl_strbuf_append(&b, text, strlen(text));
    ftl_strbuf_append(&b, "\n", 1);
    free(log->notes);
    log->notes = b.data;
}

ftl_status run_log_read(const char *path, run_log *log) {
    memset(log, 0, sizeof *log);
    uint8_t *data;
    size_t size;
    FTL_TRY(ftl_read_file(path, &data, &size));
    log->path = ftl_strdup(path);
    ftl_status st = FTL_OK;
    int64_t line_no = 0, unknown = 0;
    bool any_ftl = false;
    for (size_t at = 0; at < size && st == FTL_OK;) {
        size_t end = at;
        while (end < size && data[end] != '\n') end++;
        bool last = end >= size;
        line_no++;
        size_t n = end - at;
        const char *text = (const char *)data + at;
        at = end + 1;
        if (n == 0) continue;
        ftl_json *v = NULL;
        if (ftl_json_parse(text, n, &v) != FTL_OK || v->type != FTL_JSON_OBJECT) {
            ftl_json_free(v);
            if (any_ftl) { /* a run killed while writing a line (a resume may have appended after it) */
                char *t = last ? ftl_format("%s: the last line (%lld) is incomplete and was skipped.", path, (long long)line_no)
                               : ftl_format("%s: line %lld is incomplete (a run killed while writing it?) and was skipped.",
                                            path, (long long)line_no);
                note(log, t);
                free(t);
                continue;
            }
            st = ftl_fail(FTL_E_FORMAT, "%s: line %lld is not a JSON object: not an ftl training log (ftl train --log)",
                          path, (long long)line_no);
            break;
        }
        const char *record = ftl_json_get_string(v, "record");
        /* Logs written before run records existed have epoch lines without "record". */
        bool is_epoch = record ? strcmp(record, "epoch") == 0 : ftl_json_get(v, "epoch") && ftl_json_get(v, "loss");
        if (record && strcmp(record, "run") == 0) {
            any_ftl = true;
            size_t n = (size_t)log->run_count + 1;
            log->runs = ftl_xrealloc(log->runs, n * sizeof *log->runs);
            log->run_first_epoch = ftl_xrealloc(log->run_first_epoch, n * sizeof(int64_t));
            log->run_kind = ftl_xrealloc(log->run_kind, n * sizeof *log->run_kind);
            log->run_phase = ftl_xrealloc(log->run_phase, n * sizeof(int));
            const char *phase = ftl_json_get_string(v, "phase");
            bool fine_tune = phase && strcmp(phase, "fine-tune") == 0;
            bool resumed = ftl_json_get_string(v, "resume") != NULL;
            int k = log->run_count;
            log->runs[k] = v;
            log->run_first_epoch[k] = 0;
            log->run_kind[k] = resumed ? RUN_RESUME : fine_tune ? RUN_FINE_TUNE : RUN_START;
            log->run_phase[k] = fine_tune ? 2 : 1;
            if (fine_tune) log->fine_tuned = true;
            log->run_count++;
            continue;
        }
        if (!is_epoch) {
            unknown++;
            ftl_json_free(v);
            continue;
        }
        any_ftl = true;
        run_epoch e = {0};
        double d = number_or_nan(v, "epoch");
        if (!(d >= 1 && d < 1e9)) {
            ftl_json_free(v);
            st = ftl_fail(FTL_E_FORMAT, "%s: line %lld: an epoch record without a valid epoch number", path, (long long)line_no);
            break;
        }
        e.epoch = (int64_t)d;
        e.epochs = count_of(number_or_nan(v, "epochs"));
        e.steps = count_of(number_or_nan(v, "steps"));
        e.examples = count_of(number_or_nan(v, "examples"));
        e.best_epoch = count_of(number_or_nan(v, "best_epoch"));
        e.seconds = number_or_nan(v, "time_s");
        e.loss = number_or_nan(v, "loss");
        e.acc = number_or_nan(v, "acc");
        e.val_loss = number_or_nan(v, "val_loss");
        e.val_acc = number_or_nan(v, "val_acc");
        e.lr = number_or_nan(v, "lr");
        e.images_per_second = number_or_nan(v, "images_per_s");
        const ftl_json *t = ftl_json_get(v, "time");
        for (int k = 0; k < RUN_LOG_TIMES; k++) e.time[k] = number_or_nan(t, run_log_time_names[k]);
        const ftl_json *imp = ftl_json_get(v, "improved");
        e.improved = imp && imp->type == FTL_JSON_BOOL && imp->boolean;
        e.segment = log->run_count > 0 ? log->run_count - 1 : 0;
        e.phase = log->run_count > 0 ? log->run_phase[log->run_count - 1] : 1;
        if (log->run_count > 0 && log->run_first_epoch[log->run_count - 1] == 0) log->run_first_epoch[log->run_count - 1] = e.epoch;
        /* A resumed run logs again the epochs its interrupted run logged past the checkpoint (and,
         * resuming phase 1, drops the phase-2 epochs that followed them). Only after a resume
         * record: another run appended to the same log is a run of its own. */
        int64_t kept = log->epoch_count;
        bool resumed = log->run_count > 0 && log->run_kind[log->run_count - 1] == RUN_RESUME;
        while (resumed && kept > 0 && log->epochs[kept - 1].segment != e.segment &&
               (log->epochs[kept - 1].phase > e.phase ||
                (log->epochs[kept - 1].phase == e.phase && log->epochs[kept - 1].epoch >= e.epoch)))
            kept--;
        if (kept < log->epoch_count) {
            char *t = ftl_format("%s: epochs %lld-%lld were logged again by a resumed run; its records are shown.", path,
                                 (long long)e.epoch, (long long)log->epochs[log->epoch_count - 1].epoch);
            note(log, t);
            free(t);
            log->epoch_count = kept;
        }
        log->epochs = ftl_xrealloc(log->epochs, (size_t)(log->epoch_count + 1) * sizeof *log->epochs);
        log->epochs[log->epoch_count++] = e;
        ftl_json_free(v);
    }
    free(data);
    if (st == FTL_OK && log->epoch_count == 0)
        st = ftl_fail(FTL_E_FORMAT, "%s: no epoch records: not an ftl training log (ftl train --log), or a run that "
                      "ended before its first epoch", path);
    if (st == FTL_OK && unknown > 0) {
        char *t = ftl_format("%s: %lld record(s) of kinds this version does not know were skipped.", path, (long long)unknown);
        note(log, t);
        free(t);
    }
    if (st == FTL_OK) { /* one epoch axis: phase 2 after the last epoch of phase 1 */
        for (int64_t i = 0; i < log->epoch_count; i++)
            if (log->epochs[i].phase == 1 && log->epochs[i].epoch > log->phase1_epochs) log->phase1_epochs = log->epochs[i].epoch;
        for (int64_t i = 0; i < log->epoch_count; i++)
            log->epochs[i].x = (double)(log->epochs[i].epoch + (log->epochs[i].phase == 2 ? log->phase1_epochs : 0));
    }
    if (st == FTL_OK) {
        bool any_val = false;
        for (int64_t i = 0; i < log->epoch_count; i++) any_val = any_val || !isnan(log->epochs[i].val_loss);
        if (!any_val) {
            char *t = ftl_format("%s: no validation metrics (trained without --val): val_loss and val_acc are not drawn.", path);
            note(log, t);
            free(t);
        }
        if (log->epoch_count == 1) {
            char *t = ftl_format("%s: one epoch only: the curves are single points.", path);
            note(log, t);
            free(t);
        }
        if (log->run_count == 0) {
            char *t = ftl_format("%s: no run record (a log from an older ftl): the run's facts are unknown.", path);
            note(log, t);
            free(t);
        }
    }
    if (st != FTL_OK) run_log_free(log);
    return st;
}

void run_log_free(run_log *log) {
    for (int i = 0; i < log->run_count; i++) ftl_json_free(log->runs[i]);
    free(log->runs);
    free(log->run_first_epoch);
    free(log->run_kind);
    free(log->run_phase);
    free(log->epochs);
    free(log->notes);
    free(log->path);
    memset(log, 0, sizeof *log);
}
