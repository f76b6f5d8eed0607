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

/* The trainer (fit.c runs it, checkpoint.c saves and restores it). */
struct ftl_trainer {
    ftl_fit_config config;
    ftl_head head;            /* its params/grads are the start of the blocks below */
    float *params, *grads;    /* the one block: head, then config.top's values */
    size_t param_count;
    float *top_features, *top_dfeatures; /* [top->max_rows x D] */
    float *grads_sum;         /* a batch's gradient over several top chunks (allocated when needed) */
    ftl_optimizer opt;
    ftl_early_stopping es;
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
};

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
