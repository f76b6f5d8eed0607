/* Helpers shared by the files of src/train (not part of the public API). */
#ifndef FTL_TRAIN_INTERNAL_H
#define FTL_TRAIN_INTERNAL_H

#include "ftl/train.h"
#include "util/json.h"
#include "train/timeline.h"

/* 64-byte aligned, zeroed float array; aborts when memory is exhausted (sizes are never read
 * from files before being checked). Free with free(). */
float *ftl_train_alloc_floats(size_t count);

/* Parses a JSON array of strings (the ftl.classes metadata). `what` names it in errors. */
ftl_status ftl_train_parse_class_names(const char *json, const char *what, char ***names, size_t *count);
void ftl_train_free_class_names(char **names, size_t count);

/* Value of key in a borrowed key/value list, or NULL. */
const char *ftl_train_kv_find(const ftl_kv *kv, size_t count, const char *key);

enum { FTL_RUN_ID_CHARS = 32 };

/* The trainer (fit.c runs it, checkpoint.c saves and restores it). */
struct ftl_trainer {
    ftl_fit_config config;
    ftl_head head;            /* its params/grads are the start of the blocks below */
    float *params, *grads;    /* the one block: head, then config.top's values */
    size_t param_count;
    float *top_features, *top_dfeatures; /* [top->max_rows x D] */
    float *top_features_mirrored; /* [top->max_rows x D]: --tta flip's mirrored validation rows through the top */
    float *grads_sum;         /* a batch's gradient over several top chunks (allocated when needed) */
    ftl_optimizer opt;
    ftl_early_stopping es;
    ftl_lr_plateau plateau;   /* --lr-schedule plateau's state (lr NaN until the run opens) */
    bool tracking;            /* the monitored metric is measured (validation present for val_*) */
    uint64_t dropout_seed;    /* keys the dropout draws with (step, position in the global batch) */
    int64_t epoch;            /* completed epochs */
    int64_t step;             /* completed optimizer steps */
    int64_t steps_per_epoch;  /* as used by the last fit (0 before) */
    bool finished;            /* early stopping (or a hook) ended training */
    ftl_epoch_log *history;   /* history[i].checkpoint is owned (strdup) */
    size_t history_count, history_cap;
    ftl_timeline timeline;    /* --timeline, open during ftl_trainer_fit */
    char **checkpoints;       /* files written by this run, oldest first (for keep_last) */
    size_t checkpoint_count;
    char run_id[FTL_RUN_ID_CHARS + 1]; /* drawn at init, a resume's checkpoint's once resumed */
    bool legacy_checkpoints;  /* resumed from a checkpoint without a run id: its files have none either */
    char *const *to_delete;   /* while a checkpoint is written: the deletions it owes (borrowed) */
    size_t to_delete_count;
};

/* A new run's id: 128 random bits as 32 lowercase hex digits. */
void ftl_checkpoint_new_run_id(char out[FTL_RUN_ID_CHARS + 1]);
bool ftl_checkpoint_run_id_valid(const char *id);
/* --keep-last's deletions: each file that its header shows to be a checkpoint of t's run is deleted;
 * any other (another run's, or not a checkpoint) is kept, with a warning naming it. Rank 0 calls it. */
void ftl_checkpoint_delete_owned(const ftl_trainer *t, char *const *paths, size_t count);

/* One fit in progress, between its calls: ftl_trainer_fit is open, then per epoch epoch_begin, the
 * source's begin_pass, `steps` x (next_batch, step), epoch_end, and close. A sweep's stack runs
 * several trainers through the same calls over batches it fetches once (src/pipeline/sweep_job.c). */
typedef struct ftl_fit_run {
    ftl_batch_source *train, *val;
    int64_t steps;            /* per epoch */
    bool wrap;                /* batches stream across passes (--steps-per-epoch): no begin_pass */
    ftl_lr_schedule sched;
    FILE *jsonl;              /* --log, rank 0 */
    /* the epoch in progress */
    ftl_epoch_log log;
    double epoch_start;
    int64_t step_in_epoch;
    ftl_metric_counts counts;
    double fetch_s, fetch_backbone_s, backbone_s, head_s, allreduce_s, lr;
} ftl_fit_run;

ftl_status ftl_fit_run_open(ftl_trainer *t, ftl_batch_source *train, ftl_batch_source *val, ftl_fit_run *run);
/* Another epoch is due (not finished, not at --epochs). */
bool ftl_fit_run_more(const ftl_trainer *t);
void ftl_fit_run_epoch_begin(ftl_trainer *t, ftl_fit_run *run);
/* One optimizer step on batch b, fetched between fetch_start and fetch_end. x_dropped: b's rows
 * through this step's dropout masks when the caller drew them (ftl_head_dropout_rows with the
 * trainer's draws), else NULL. */
ftl_status ftl_fit_run_step(ftl_trainer *t, ftl_fit_run *run, const ftl_feature_batch *b, const float *x_dropped,
                            double fetch_start, double fetch_end);
/* The same step when the caller has put the batch's head gradient into the trainer's gradient block
 * and its metrics into run->counts (a sweep's stacked GEMM), which took gradient_seconds. */
ftl_status ftl_fit_run_step_computed(ftl_trainer *t, ftl_fit_run *run, const ftl_feature_batch *b, double fetch_start,
                                     double fetch_end, double gradient_seconds);
/* Metrics, validation, early stopping, hooks, checkpoint, history, epoch line and log record. */
ftl_status ftl_fit_run_epoch_end(ftl_trainer *t, ftl_fit_run *run);
/* Closes the log and timeline; on success restores the best weights and fills *result. s: the
 * run's status so far (returned unless closing fails first). */
ftl_status ftl_fit_run_close(ftl_trainer *t, ftl_fit_run *run, ftl_status s, ftl_fit_result *result);
/* The fault tests' hooks (FTL_TEST_STALL_RANK/STEP/SECONDS, FTL_TEST_STEP_SLEEP_MS), before a step. */
void ftl_fit_test_hooks(int rank, int64_t step);
/* The trainer's dropout draws for the step it takes next on batch b. */
ftl_row_draws ftl_trainer_draws(const ftl_trainer *t, const ftl_feature_batch *b);

/* The head's dropout on n rows (as ftl_head_train_batch applies it) into out [n x D]. */
void ftl_head_dropout_rows(float dropout, int64_t dim, const float *x, size_t n, const ftl_row_draws *draws, float *out);
/* ftl_head_train_batch on rows already through the dropout (x_dropped), the same result. */
ftl_status ftl_head_train_batch_dropped(ftl_head *head, const float *x_dropped, const int32_t *labels, size_t n,
                                        float grad_scale, ftl_metric_counts *counts);

/* Heads of one shape stepped together on the same rows (a sweep's stack sharing a dropout rate):
 * one GEMM over their kernels side by side [D x K*C] forward and one backward, instead of K narrow
 * ones. Each head's gradient and metrics are the ones ftl_head_train_batch_dropped gives it, bit
 * for bit. The stack holds the side-by-side buffers between steps. */
typedef struct ftl_head_stack ftl_head_stack;
ftl_head_stack *ftl_head_stack_new(void);
void ftl_head_stack_free(ftl_head_stack *stack);
ftl_status ftl_head_stack_train(ftl_head_stack *stack, ftl_head *const *heads, int k, const float *x_dropped,
                                const int32_t *labels, size_t n, float grad_scale, ftl_metric_counts *const *counts);

/* D*C + C after checking the sizes (the errors ftl_head_init gives). */
ftl_status ftl_head_param_count(int64_t dim, int64_t classes, size_t *count);
/* A head whose parameter and gradient blocks are the caller's (the trainer's one block). */
ftl_status ftl_head_init_borrowed(ftl_head *head, int64_t dim, int64_t classes, float *params, float *grads);

/* Expands {epoch} / {epoch:0Nd} in a checkpoint pattern; NULL with an error for bad patterns. */
char *ftl_train_expand_pattern(const char *pattern, int64_t epoch);
void ftl_train_history_append(ftl_trainer *t, const ftl_epoch_log *log);
/* Serialises one epoch record as a JSON object (the JSONL line and the checkpoint history). */
void ftl_train_append_epoch_json(ftl_strbuf *b, const ftl_epoch_log *log);

#endif
