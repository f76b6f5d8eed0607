/* A training log (ftl train --log) read back: its run records and epoch records, in order.
 * Records of unknown kinds are skipped; a truncated last line is skipped with a note. A run
 * record with "phase":"fine-tune" starts phase 2, whose epochs (numbered from 1 again) are
 * placed after phase 1's on one axis; one with a "resume" continues the phase it resumes. Epochs
 * an interrupted run logged past its last checkpoint, logged again after the resume, are shown
 * as the resumed run logged them. */
#ifndef FTL_REPORT_RUN_LOG_H
#define FTL_REPORT_RUN_LOG_H

#include "ftl/base.h"
#include "util/json.h"
#include <stdbool.h>
#include <stdint.h>

enum { RUN_LOG_TIMES = 7 };
extern const char *const run_log_time_names[RUN_LOG_TIMES]; /* data_wait_s, backbone_s, ... */

typedef struct run_epoch {
    int64_t epoch, epochs, steps, examples, best_epoch; /* epochs: planned (--epochs) */
    double seconds, loss, acc, val_loss, val_acc, lr, images_per_second; /* NaN when absent/null */
    double time[RUN_LOG_TIMES];
    bool improved;
    int segment;             /* index of the run record (resume) this epoch belongs to */
    int phase;               /* 1: the head (or the only phase), 2: fine-tuning */
    double x;                /* its place on the report's epoch axis: phase 2 follows phase 1 */
} run_epoch;

typedef enum run_segment_kind { RUN_START, RUN_RESUME, RUN_FINE_TUNE } run_segment_kind;

typedef struct run_log {
    char *path;
    ftl_json **runs;          /* the "record":"run" objects, in order */
    int run_count;
    int64_t *run_first_epoch; /* the first epoch logged after each run record (0: none) */
    run_segment_kind *run_kind;
    int *run_phase;           /* the phase each run record's epochs belong to */
    int64_t phase1_epochs;    /* the last phase-1 epoch: phase 2's epoch e sits at x = phase1_epochs + e */
    bool fine_tuned;
    run_epoch *epochs;
    int64_t epoch_count;
    char *notes;              /* what is missing or was skipped, one sentence per line */
} run_log;

ftl_status run_log_read(const char *path, run_log *log);
void run_log_free(run_log *log);

#endif
