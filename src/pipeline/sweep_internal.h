/* What ftl sweep's runner (sweep_job.c) shares with the stack trainer (sweep_stack.c) and the trials'
 * records (sweep_results.c): the trials, the stacks and the state all workers share. Internal to
 * src/pipeline. */
#ifndef FTL_PIPELINE_SWEEP_INTERNAL_H
#define FTL_PIPELINE_SWEEP_INTERNAL_H

#include "ftl/sweep.h"
#include "pipeline/train_run.h"
#include "train/train_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

/* A stack whose kernels together take at most this many bytes trains side by side (one GEMM). */
enum { SIDE_BY_SIDE_BYTES = 2 << 20 };

typedef struct sweep_trial {
    ftl_trainer *t;
    ftl_fit_run fr;
    bool open;             /* trainer made, its fit open */
    bool ended;            /* its model and result are written */
    int64_t epoch;         /* completed epochs */
    uint8_t *position;     /* its batch order's position after its last epoch (NULL: the start) */
    size_t position_size;
    double seconds;
    char *checkpoint, *result_path;
} sweep_trial;

typedef struct sweep_stack {
    int *trials; /* indices, ascending */
    int count;
} sweep_stack;

typedef struct sweep_shared {
    train_run *run;
    const ftl_train_options *options; /* per trial, with the run's int8 scales */
    const ftl_sweep_run_options *ro;
    ftl_sweep_trial_result *results;
    sweep_trial *trials;
    int trial_count;
    int64_t train_rows;
    train_run_meta meta;
    FILE *log;             /* the sweep's log (guarded by lock) */
    sweep_stack *stacks;
    int stack_count;
    int64_t until_epoch;   /* this phase trains up to here */
    atomic_int next_stack;
    atomic_bool failed;
    pthread_mutex_t lock;  /* model and result files, progress lines, the log, the first error */
    ftl_status status;
    char error[2048];
    int finished;
    bool caller_only;
    int *owner;            /* the rank that trains each trial (all 0 in one process) */
    const ftl_collectives *col;
} sweep_shared;

/* ---- the trials' records (sweep_results.c) ---- */

/* The score successive halving ranks by: the best of the monitored metric over the trial's epochs up
 * to `epoch`, larger is better (losses negated); from the history, which a resume restores too. */
double sweep_score_at(const ftl_trainer *t, int64_t epoch);
/* A trial's result as a JSON record ({"record":"trial",...}): its result file and the sweep's log. */
void sweep_append_result_json(ftl_strbuf *b, int trial, const ftl_sweep_trial_result *r);
/* A result file of an earlier (interrupted) run of the sweep. */
ftl_status sweep_read_result(const char *path, ftl_sweep_trial_result *r);
/* One line of the sweep's log (under the lock). */
ftl_status sweep_log_line(sweep_shared *sh, const char *text);
/* The trial's epoch record for the sweep's log: its settings and the epoch's metrics. */
ftl_status sweep_log_epoch(sweep_shared *sh, int trial);
/* Every rank's finished trials' results, to every rank. */
ftl_status sweep_share_results(sweep_shared *sh);
/* Ranks other than 0 log to LOG.rank-R while the sweep runs; at its end rank 0 appends their parts. */
ftl_status sweep_merge_logs(sweep_shared *sh, const char *part_path);

/* ---- training a stack (sweep_stack.c) ---- */

/* Opens a trial: its trainer (from its checkpoint when resuming), its log's first line and its fit.
 * train: a source of the trial's order the checkpoint's position goes into. */
ftl_status sweep_open_trial(sweep_shared *sh, int trial, ftl_batch_source *train, ftl_batch_source *val,
                            ftl_batch_source *val_mirrored);
/* The trial's sources for the phase that starts (val_mirrored: val's mirror images, used by a --tta flip
 * trial), or none when it ends (NULL, NULL, NULL). */
void sweep_trial_sources(sweep_shared *sh, int trial, ftl_batch_source *train, ftl_batch_source *val,
                         ftl_batch_source *val_mirrored);
/* The trial is over (stopped early, at --epochs, or halted at a rung): best weights, model, result. */
ftl_status sweep_finish_trial(sweep_shared *sh, int trial, int64_t halted_at);
/* FTL_SWEEP_SIDE_BY_SIDE=0 trains every stack one trial at a time per chunk, =1 every stack side by
 * side whatever its size (the tests compare both; the benchmark measures where each pays). */
bool sweep_trains_side_by_side(const sweep_shared *sh, const sweep_stack *stack);
/* A worker thread: takes stacks until none is left or one failed (arg: the sweep_shared). */
void *sweep_worker_main(void *arg);
/* The first error of any worker, kept with its message; the others stop at their next stack. */
void sweep_record_error(sweep_shared *sh, ftl_status st);

#endif
