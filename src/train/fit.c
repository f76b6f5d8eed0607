/* The fit loop: epochs of optimizer steps over a batch source, validation, the Keras-style epoch
 * line, the JSONL log, early stopping, checkpoints, and the final restore of the best weights. */
#include "ftl/train.h"
#include "ftl/dist.h"
#include "train/gemm.h"
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/rng.h"
#include "util/timing.h"
#include "util/interrupt.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ftl_fit_config ftl_fit_config_default(void) {
    return (ftl_fit_config){
        .batch_size = 16, .epochs = 30, .steps_per_epoch = 0, .drop_remainder = true, .eval_batch_size = 1024,
        .optimizer = ftl_optimizer_config_default(FTL_OPTIMIZER_NADAM), .lr_scaling = FTL_LR_SCALE_NONE,
        .base_batch = 0, .warmup_epochs = 0, .warmup_start_factor = -1, .dropout = 0, .seed = 42,
        .early_stopping = ftl_early_stopping_config_default(), .keep_last = 0,
        .collectives = {.rank = 0, .world_size = 1},
    };
}

/* Independent streams from one seed: stream 0 initialises the weights, 1 keys the dropout draws
 * (with the step and the row's position in the global batch: the same for any rank count). */
static uint64_t derive_seed(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (0xD1B54A32D192ED03ull * (stream + 1));
    return ftl_splitmix64(&x);
}

ftl_status ftl_trainer_init(ftl_trainer **out, const ftl_fit_config *config, int64_t dim, int64_t classes) {
    *out = NULL;
    const ftl_fit_config *c = config;
    if (c->batch_size < 1) return ftl_fail(FTL_E_INVALID_ARG, "--batch %lld must be at least 1", (long long)c->batch_size);
    if (c->epochs < 0) return ftl_fail(FTL_E_INVALID_ARG, "--epochs %lld must be >= 0", (long long)c->epochs);
    if (c->steps_per_epoch < 0)
        return ftl_fail(FTL_E_INVALID_ARG, "--steps-per-epoch %lld must be >= 0", (long long)c->steps_per_epoch);
    if (!(c->dropout >= 0 && c->dropout < 1)) return ftl_fail(FTL_E_INVALID_ARG, "--dropout %g must be in [0, 1)", c->dropout);
    if (c->lr_scaling != FTL_LR_SCALE_NONE && c->base_batch < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "--scale-lr needs --base-batch (the batch size the learning rate was tuned for)");
    if (!(c->warmup_epochs >= 0)) return ftl_fail(FTL_E_INVALID_ARG, "--warmup-epochs %g must be >= 0", c->warmup_epochs);
    if (!(c->label_smoothing >= 0 && c->label_smoothing < 1))
        return ftl_fail(FTL_E_INVALID_ARG, "--label-smoothing %g must be in [0, 1)", c->label_smoothing);
    if (c->keep_last < 0) return ftl_fail(FTL_E_INVALID_ARG, "--keep-last %d must be >= 0", c->keep_last);
    if (c->collectives.world_size < 1 || c->collectives.rank < 0 || c->collectives.rank >= c->collectives.world_size)
        return ftl_fail(FTL_E_INVALID_ARG, "rank %d of %d is not valid", c->collectives.rank, c->collectives.world_size);
    if (c->checkpoint_pattern) {
        char *probe = ftl_train_expand_pattern(c->checkpoint_pattern, 1);
        if (!probe) return FTL_E_INVALID_ARG;
        free(probe);
    }
    const ftl_fit_top *top = c->top;
    if (top && c->head_engine)
        return ftl_fail(FTL_E_UNSUPPORTED, "fine-tuning trains the head on the CPU: it takes no head engine");
    if (c->head_engine && (c->head_engine->dim != dim || c->head_engine->classes != classes))
        return ftl_fail(FTL_E_INVALID_ARG, "the head engine trains %lld features x %lld classes; the head has %lld x %lld",
                        (long long)c->head_engine->dim, (long long)c->head_engine->classes, (long long)dim,
                        (long long)classes);
    if (top && (top->out_dim != dim || top->max_rows < c->batch_size || !top->bind || !top->forward || !top->backward))
        return ftl_fail(FTL_E_INVALID_ARG, "the trained top gives %lld features for at most %lld rows; the head takes %lld "
                        "and batches have %lld",
                        (long long)top->out_dim, (long long)top->max_rows, (long long)dim, (long long)c->batch_size);
    ftl_trainer *t = ftl_xcalloc(1, sizeof *t);
    t->config = *config;
    if (t->config.eval_batch_size < 1) t->config.eval_batch_size = 1024;
    size_t head_count = 0;
    ftl_status s = ftl_head_param_count(dim, classes, &head_count);
    if (s == FTL_OK) { /* one block for the head and the top, the head at its start */
        t->param_count = head_count + (top ? top->param_count : 0);
        t->params = ftl_train_alloc_floats(t->param_count);
        t->grads = ftl_train_alloc_floats(t->param_count);
        s = ftl_head_init_borrowed(&t->head, dim, classes, t->params, t->grads);
        if (s == FTL_OK && top) {
            s = top->bind(top->ctx, t->params + head_count, t->grads + head_count);
            t->top_features = ftl_train_alloc_floats((size_t)top->max_rows * (size_t)dim);
            t->top_dfeatures = ftl_train_alloc_floats((size_t)top->max_rows * (size_t)dim);
        }
    }
    if (s == FTL_OK) s = ftl_optimizer_init(&t->opt, &c->optimizer, t->param_count);
    if (s == FTL_OK) s = ftl_early_stopping_init(&t->es, &c->early_stopping, t->param_count);
    if (s != FTL_OK) {
        ftl_trainer_free(t);
        return s;
    }
    t->head.dropout = (float)c->dropout;
    t->head.label_smoothing = (float)c->label_smoothing;
    t->plateau = (ftl_lr_plateau){.lr = NAN, .best = NAN};
    ftl_checkpoint_new_run_id(t->run_id);
    ftl_head_init_glorot(&t->head, derive_seed(c->seed, 0));
    t->dropout_seed = derive_seed(c->seed, 1);
    /* Every rank starts from rank 0's weights (Horovod's BroadcastGlobalVariablesCallback(0)). */
    s = ftl_dist_broadcast(&c->collectives, t->params, t->param_count * sizeof(float), 0);
    if (s != FTL_OK) {
        ftl_trainer_free(t);
        return ftl_fail_context(s, "broadcasting the initial weights");
    }
    *out = t;
    return FTL_OK;
}

void ftl_trainer_free(ftl_trainer *t) {
    if (!t) return;
    ftl_head_free(&t->head);
    free(t->params);
    free(t->grads);
    free(t->top_features);
    free(t->top_dfeatures);
    free(t->top_features_mirrored);
    free(t->grads_sum);
    ftl_optimizer_free(&t->opt);
    ftl_early_stopping_free(&t->es);
    for (size_t i = 0; i < t->history_count; i++) free((char *)t->history[i].checkpoint);
    free(t->history);
    for (size_t i = 0; i < t->checkpoint_count; i++) free(t->checkpoints[i]);
    free(t->checkpoints);
    free(t);
}

ftl_head *ftl_trainer_head(ftl_trainer *t) { return &t->head; }
float *ftl_trainer_params(ftl_trainer *t, size_t *count) {
    if (count) *count = t->param_count;
    return t->params;
}
const ftl_optimizer *ftl_trainer_optimizer(const ftl_trainer *t) { return &t->opt; }
int64_t ftl_trainer_epoch(const ftl_trainer *t) { return t->epoch; }
int64_t ftl_trainer_step(const ftl_trainer *t) { return t->step; }

size_t ftl_trainer_history(const ftl_trainer *t, const ftl_epoch_log **logs) {
    *logs = t->history;
    return t->history_count;
}

static double monitored_value(ftl_monitor m, const ftl_epoch_log *l) {
    switch (m) {
    case FTL_MONITOR_VAL_ACC: return l->val_acc;
    case FTL_MONITOR_VAL_LOSS: return l->val_loss;
    case FTL_MONITOR_ACC: return l->acc;
    case FTL_MONITOR_LOSS: return l->loss;
    }
    return NAN;
}

static void print_epoch_line(FILE *out, const ftl_epoch_log *l, bool has_val) {
    char line[512];
    /* Epochs on cached features take milliseconds: "0.00s" would say nothing. */
    char took[32];
    if (l->seconds < 0.1) snprintf(took, sizeof took, "%.0fms", l->seconds * 1e3 < 1 ? 1.0 : l->seconds * 1e3);
    else snprintf(took, sizeof took, "%.2fs", l->seconds);
    int n = snprintf(line, sizeof line, "Epoch %lld/%lld - %s - loss: %.4f - acc: %.4f", (long long)l->epoch,
                     (long long)l->epochs, took, l->loss, l->acc);
    if (has_val && n > 0 && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " - val_loss: %.4f - val_acc: %.4f", l->val_loss, l->val_acc);
    if (isfinite(l->gpu_util_percent) && n > 0 && n < (int)sizeof line) /* the article's GPU-utilization graph */
        snprintf(line + n, sizeof line - (size_t)n, " - gpu: %.0f%% busy, %.1f GiB, data wait %.0f%%", l->gpu_util_percent,
                 l->gpu_memory_bytes / 1073741824.0, l->seconds > 0 ? 100.0 * l->data_wait_s / l->seconds : 0.0);
    fprintf(out, "%s\n", line);
    fflush(out);
}

/* The run's checkpoint list once `path` is written: `path` last (moved there if written before),
 * the oldest beyond keep_last split off into *dropped. Neither list shares strings with t's. */
static void checkpoint_list_after(const ftl_trainer *t, const char *path, char ***kept, size_t *kept_count,
                                  char ***dropped, size_t *dropped_count) {
    char **all = ftl_xmalloc((t->checkpoint_count + 1) * sizeof(char *));
    size_t n = 0;
    for (size_t i = 0; i < t->checkpoint_count; i++)
        if (strcmp(t->checkpoints[i], path) != 0) all[n++] = ftl_strdup(t->checkpoints[i]);
    all[n++] = ftl_strdup(path);
    size_t drop = t->config.keep_last > 0 && n > (size_t)t->config.keep_last ? n - (size_t)t->config.keep_last : 0;
    *dropped = ftl_xmalloc((drop ? drop : 1) * sizeof(char *));
    memcpy(*dropped, all, drop * sizeof(char *));
    *dropped_count = drop;
    memmove(all, all + drop, (n - drop) * sizeof(char *));
    *kept = all;
    *kept_count = n - drop;
}

static void free_strings(char **list, size_t count) {
    for (size_t i = 0; i < count; i++) free(list[i]);
    free(list);
}

/* Writes this epoch's checkpoint. It records the files of the run as they are once it is written
 * (itself included, the pruned ones not), so a resume from it knows every file --keep-last may
 * delete later; the pruned ones are deleted only after it is safely on disk, and it records them
 * as owed, so a resume after a kill in between finishes their deletion. */
static ftl_status write_epoch_checkpoint(ftl_trainer *t, ftl_batch_source *train, const char *path) {
    bool rank0 = ftl_dist_rank(&t->config.collectives) == 0;
    ftl_status s = FTL_OK;
    char *dir = ftl_strdup(path);
    char *slash = strrchr(dir, '/');
    if (rank0 && slash && slash != dir) {
        *slash = '\0';
        s = ftl_make_dirs(dir);
    }
    free(dir);
    char **kept, **dropped;
    size_t kept_count, dropped_count;
    checkpoint_list_after(t, path, &kept, &kept_count, &dropped, &dropped_count);
    char **before = t->checkpoints;
    size_t before_count = t->checkpoint_count;
    t->checkpoints = kept;
    t->checkpoint_count = kept_count;
    t->to_delete = dropped;
    t->to_delete_count = dropped_count;
    if (s == FTL_OK) s = ftl_trainer_save_checkpoint(t, path, train);
    t->to_delete = NULL;
    t->to_delete_count = 0;
    if (s != FTL_OK) { /* nothing written: the run's files are as before */
        t->checkpoints = before;
        t->checkpoint_count = before_count;
        free_strings(kept, kept_count);
        free_strings(dropped, dropped_count);
        return s;
    }
    free_strings(before, before_count);
    /* Test-only hook (tests/e2e/test_keep_last.sh): killed between the write and the deletions. */
    const char *kill_at = getenv("FTL_TEST_KILL_AFTER_CHECKPOINT_EPOCH");
    if (rank0 && kill_at && atoll(kill_at) == t->epoch) raise(SIGKILL);
    if (rank0) ftl_checkpoint_delete_owned(t, dropped, dropped_count);
    free_strings(dropped, dropped_count);
    return FTL_OK;
}

static ftl_status reduce_counts(const ftl_collectives *col, ftl_metric_counts *c) {
    if (!ftl_dist_active(col)) return FTL_OK;
    double v[3] = {c->loss_sum, c->correct, c->count};
    FTL_TRY(ftl_dist_allreduce_f64(col, v, 3));
    c->loss_sum = v[0];
    c->correct = v[1];
    c->count = v[2];
    return FTL_OK;
}

/* Steps per epoch and whether batches stream across passes. */
static ftl_status plan_epochs(const ftl_trainer *t, const ftl_batch_source *train, int64_t *steps, bool *wrap) {
    const ftl_fit_config *c = &t->config;
    if (c->steps_per_epoch > 0) {
        *steps = c->steps_per_epoch;
        *wrap = true;
        return FTL_OK;
    }
    *wrap = false;
    if (train->size <= 0)
        return ftl_fail(FTL_E_INVALID_ARG, "the training data's size is unknown: give --steps-per-epoch");
    /* Global batches: every rank runs the same steps by construction (no rank waits for a step
     * another one never takes). */
    int64_t global = c->batch_size * ftl_dist_size(&c->collectives), size = train->size;
    *steps = c->drop_remainder ? size / global : (size + global - 1) / global;
    if (*steps == 0 && global == c->batch_size)
        return ftl_fail(FTL_E_INVALID_ARG,
                        "%lld training examples make no full batch of %lld (remainders are dropped): lower --batch",
                        (long long)size, (long long)global);
    if (*steps == 0)
        return ftl_fail(FTL_E_INVALID_ARG,
                        "%lld training examples make no full batch of %lld (the global batch: --batch %lld x %d ranks; "
                        "remainders are dropped): lower --batch",
                        (long long)size, (long long)global, (long long)c->batch_size, ftl_dist_size(&c->collectives));
    return FTL_OK;
}

/* Test hooks for the fault tests (tests/e2e/test_dist.sh), read from the environment:
 * FTL_TEST_STALL_RANK=R with FTL_TEST_STALL_STEP=S makes rank R sleep FTL_TEST_STALL_SECONDS
 * before global step S (the stall inspector must name it); FTL_TEST_STEP_SLEEP_MS slows every
 * step, so a test can kill a rank in the middle of an epoch. */
void ftl_fit_test_hooks(int rank, int64_t step) {
    static int loaded, stall_rank = -1, step_sleep_ms;
    static long long stall_step;
    static double stall_seconds;
    if (!loaded) {
        loaded = 1;
        const char *v;
        if ((v = getenv("FTL_TEST_STALL_RANK"))) stall_rank = atoi(v);
        if ((v = getenv("FTL_TEST_STALL_STEP"))) stall_step = atoll(v);
        if ((v = getenv("FTL_TEST_STALL_SECONDS"))) stall_seconds = atof(v);
        if ((v = getenv("FTL_TEST_STEP_SLEEP_MS"))) step_sleep_ms = atoi(v);
    }
    if (step_sleep_ms > 0) usleep((useconds_t)step_sleep_ms * 1000);
    if (rank == stall_rank && step == stall_step && stall_seconds > 0) usleep((useconds_t)(stall_seconds * 1e6));
}

/* One batch's gradient into the block: the head's, and with a top, back through it. A rank can
 * hold more of a global batch's rows than the top takes at once (the feature-cache order gives
 * each rank the rows it stores): they go through in chunks whose gradients add up. */
static ftl_status train_step(ftl_trainer *t, const ftl_feature_batch *b, const ftl_row_draws *draws,
                             ftl_metric_counts *counts, double *top_seconds) {
    float scale = (float)(1.0 / (double)b->global_count);
    const ftl_fit_top *top = t->config.top;
    const ftl_head_engine *e = t->config.head_engine;
    if (e)
        return e->train_batch(e->ctx, b->features, b->labels, b->count, draws, t->head.dropout, t->head.label_smoothing, scale,
                              counts);
    if (!top) return ftl_head_train_batch(&t->head, b->features, b->labels, b->count, draws, scale, counts);
    *top_seconds = 0;
    size_t rows = (size_t)top->max_rows, chunks = (b->count + rows - 1) / rows;
    if (b->count == 0) { /* this rank holds none of the rows: its part of the sum is zero */
        FTL_TRY(ftl_head_train_batch(&t->head, NULL, b->labels, 0, draws, scale, counts));
        memset(t->grads + t->head.param_count, 0, top->param_count * sizeof(float));
        return FTL_OK;
    }
    if (chunks > 1 && !t->grads_sum) t->grads_sum = ftl_train_alloc_floats(t->param_count);
    for (size_t c = 0; c < chunks; c++) {
        size_t at = c * rows, n = b->count - at < rows ? b->count - at : rows;
        ftl_row_draws d = *draws;
        if (d.positions) d.positions += at;
        else d.position_base += (int64_t)at;
        double t0 = ftl_now();
        FTL_TRY(top->forward(top->ctx, b->features + at * (size_t)top->in_dim, n, t->top_features));
        double t1 = ftl_now();
        FTL_TRY(ftl_head_train_batch(&t->head, t->top_features, b->labels + at, n, &d, scale, counts));
        double t2 = ftl_now();
        FTL_TRY(ftl_head_input_grad(&t->head, n, &d, t->top_dfeatures));
        FTL_TRY(top->backward(top->ctx, t->top_dfeatures, n));
        *top_seconds += (t1 - t0) + (ftl_now() - t2);
        if (chunks == 1) break;
        if (c == 0) memcpy(t->grads_sum, t->grads, t->param_count * sizeof(float));
        else
            for (size_t i = 0; i < t->param_count; i++) t->grads_sum[i] += t->grads[i];
    }
    if (chunks > 1) memcpy(t->grads, t->grads_sum, t->param_count * sizeof(float));
    return FTL_OK;
}

/* One evaluation pass over a source: through the top when fine-tuning (in batches it can take),
 * on the head engine when asked (its weights are the current ones only during fitting), else on
 * the CPU head. With flip TTA (mirrored: val's rows mirrored, fetched in the same batches) each
 * batch scores the mean of both orientations' probabilities on the CPU head: the engine's weights
 * were stored back to the host blocks after the epoch's steps. */
static ftl_status evaluate_pass(ftl_trainer *t, ftl_batch_source *val, ftl_batch_source *mirrored, bool on_engine,
                                ftl_metric_counts *out) {
    const ftl_fit_top *top = t->config.top;
    const ftl_head_engine *e = on_engine && !mirrored ? t->config.head_engine : NULL;
    size_t rows = top ? (size_t)top->max_rows : t->config.eval_batch_size > 0 ? (size_t)t->config.eval_batch_size : 1024;
    if (top && mirrored && !t->top_features_mirrored)
        t->top_features_mirrored = ftl_train_alloc_floats((size_t)top->max_rows * (size_t)top->out_dim);
    memset(out, 0, sizeof *out);
    if (val->begin_pass) FTL_TRY(val->begin_pass(val->ctx));
    if (mirrored && mirrored->begin_pass) FTL_TRY(mirrored->begin_pass(mirrored->ctx));
    for (;;) {
        ftl_feature_batch b = {0}, m = {0};
        FTL_TRY(ftl_interrupt_check());
        FTL_TRY(val->next_batch(val->ctx, rows, false, &b));
        if (mirrored) {
            FTL_TRY(mirrored->next_batch(mirrored->ctx, rows, false, &m));
            if (m.count != b.count || m.global_count != b.global_count ||
                (b.count && memcmp(m.labels, b.labels, b.count * sizeof *b.labels) != 0))
                return ftl_fail(FTL_E_FORMAT, "--tta flip: the mirrored validation rows do not follow the validation rows "
                                "(a batch of %zu rows against %zu, or other labels)", m.count, b.count);
        }
        if (b.count == 0) return FTL_OK;
        const float *x = b.features, *xm = m.features;
        if (top) {
            FTL_TRY(top->forward(top->ctx, b.features, b.count, t->top_features));
            x = t->top_features;
            if (mirrored) FTL_TRY(top->forward(top->ctx, m.features, m.count, t->top_features_mirrored));
            xm = t->top_features_mirrored;
        }
        if (mirrored) FTL_TRY(ftl_head_evaluate_batch_tta(&t->head, x, xm, b.labels, b.count, out));
        else if (e) FTL_TRY(e->evaluate_batch(e->ctx, x, b.labels, b.count, out));
        else FTL_TRY(ftl_head_evaluate_batch(&t->head, x, b.labels, b.count, out));
    }
}

/* The gradients' sum over ranks: on the engine when it has a collective of its own. */
static ftl_status allreduce_grads(ftl_trainer *t) {
    const ftl_collectives *col = &t->config.collectives;
    const ftl_head_engine *e = t->config.head_engine;
    if (!e) return ftl_dist_allreduce_f32(col, t->grads, t->param_count);
    if (e->allreduce) return e->allreduce(e->ctx);
    FTL_TRY(e->grads_to_host(e->ctx, t->grads));
    FTL_TRY(ftl_dist_allreduce_f32(col, t->grads, t->param_count));
    return e->grads_from_host(e->ctx, t->grads);
}

static ftl_status optimizer_step(ftl_trainer *t, double lr) {
    const ftl_head_engine *e = t->config.head_engine;
    if (!e) {
        ftl_optimizer_step(&t->opt, t->params, t->grads, lr);
        return FTL_OK;
    }
    ftl_optimizer_update u;
    ftl_optimizer_next_update(&t->opt, lr, &u);
    return e->optimizer_step(e->ctx, &u);
}

ftl_status ftl_trainer_evaluate(ftl_trainer *t, ftl_batch_source *source, ftl_metric_counts *out) {
    FTL_TRY(evaluate_pass(t, source, t->config.val_mirrored, false, out));
    return reduce_counts(&t->config.collectives, out);
}

ftl_row_draws ftl_trainer_draws(const ftl_trainer *t, const ftl_feature_batch *b) {
    return (ftl_row_draws){.seed = t->dropout_seed, .step = t->step, .positions = b->positions,
                           .position_base = b->position_base};
}

void ftl_fit_run_epoch_begin(ftl_trainer *t, ftl_fit_run *run) {
    memset(&run->counts, 0, sizeof run->counts);
    run->fetch_s = run->fetch_backbone_s = run->backbone_s = run->head_s = run->allreduce_s = run->lr = 0;
    run->step_in_epoch = 0;
    run->log = (ftl_epoch_log){.epoch = t->epoch + 1, .epochs = t->config.epochs, .gpu_util_percent = NAN,
                               .gpu_memory_bytes = NAN};
    run->sched.epoch_lr = ftl_lr_schedule_epoch(&run->sched, t->epoch, t->plateau.lr);
    run->sched.epoch_lr_set = true;
    run->epoch_start = ftl_now();
}

/* The step's start: its fetch's account, and the end of the data refused. */
static ftl_status begin_step(ftl_trainer *t, ftl_fit_run *run, const ftl_feature_batch *b, double fetch_start, double fetch_end) {
    FTL_TRY(ftl_interrupt_check());
    run->fetch_s += fetch_end - fetch_start;
    run->fetch_backbone_s += b->backbone_seconds;
    run->backbone_s += b->backbone_seconds;
    ftl_timeline_span(&t->timeline, "data wait", fetch_start, fetch_end - b->backbone_seconds, t->step);
    if (b->backbone_seconds > 0) ftl_timeline_span(&t->timeline, "backbone", fetch_end - b->backbone_seconds, fetch_end, t->step);
    if (b->global_count == 0)
        return ftl_fail(FTL_E_FORMAT, "the training data ended after %lld of %lld batches in epoch %lld",
                        (long long)run->step_in_epoch, (long long)run->steps, (long long)run->log.epoch);
    return FTL_OK;
}

/* The step's end once the gradient is in the block (computed from t1 to t2, top_s of it in a trained
 * top): the allreduce, the optimizer, the counters. */
static ftl_status end_step(ftl_trainer *t, ftl_fit_run *run, double t1, double t2, double top_s) {
    const ftl_collectives *col = &t->config.collectives;
    int64_t epoch = run->log.epoch, batch = run->step_in_epoch + 1;
    run->backbone_s += top_s;
    ftl_status st;
    if (ftl_dist_active(col)) {
        /* One allreduce per step over the one contiguous gradient block (Horovod's fusion buffer). */
        ftl_dist_set_context(col, t->step, "the gradient allreduce");
        st = allreduce_grads(t);
        if (st != FTL_OK) return ftl_fail_context(st, "epoch %lld, batch %lld", (long long)epoch, (long long)batch);
    }
    double t3 = ftl_now();
    run->lr = ftl_lr_schedule_at(&run->sched, t->step);
    st = optimizer_step(t, run->lr);
    if (st != FTL_OK) return ftl_fail_context(st, "epoch %lld, batch %lld", (long long)epoch, (long long)batch);
    t->step++;
    run->step_in_epoch++;
    double t4 = ftl_now();
    run->head_s += (t2 - t1 - top_s) + (t4 - t3);
    run->allreduce_s += t3 - t2;
    ftl_timeline_span(&t->timeline, "head", t1, t2, t->step - 1);
    if (ftl_dist_active(col)) ftl_timeline_span(&t->timeline, "allreduce", t2, t3, t->step - 1);
    ftl_timeline_span(&t->timeline, "optimizer", t3, t4, t->step - 1);
    return FTL_OK;
}

ftl_status ftl_fit_run_step(ftl_trainer *t, ftl_fit_run *run, const ftl_feature_batch *b, const float *x_dropped,
                            double fetch_start, double fetch_end) {
    FTL_TRY(begin_step(t, run, b, fetch_start, fetch_end));
    /* The gradient of the global batch's mean loss: each rank sums its rows' gradients scaled
     * by 1 / (rows of the global batch), and the allreduce adds the ranks' parts. */
    ftl_row_draws draws = ftl_trainer_draws(t, b);
    double top_s = 0;
    ftl_status st;
    if (x_dropped) /* the rows through this step's dropout masks, drawn once for a sweep's stack */
        st = ftl_head_train_batch_dropped(&t->head, x_dropped, b->labels, b->count, (float)(1.0 / (double)b->global_count),
                                          &run->counts);
    else
        st = train_step(t, b, &draws, &run->counts, &top_s);
    if (st != FTL_OK)
        return ftl_fail_context(st, "epoch %lld, batch %lld", (long long)run->log.epoch, (long long)run->step_in_epoch + 1);
    return end_step(t, run, fetch_end, ftl_now(), top_s);
}

ftl_status ftl_fit_run_step_computed(ftl_trainer *t, ftl_fit_run *run, const ftl_feature_batch *b, double fetch_start,
                                     double fetch_end, double gradient_seconds) {
    FTL_TRY(begin_step(t, run, b, fetch_start, fetch_end));
    return end_step(t, run, fetch_end, fetch_end + gradient_seconds, 0);
}

/* The epoch's training metrics and validation (the first half of its end). */
static ftl_status measure_epoch(ftl_trainer *t, ftl_fit_run *run) {
    const ftl_fit_config *c = &t->config;
    const ftl_collectives *col = &c->collectives;
    ftl_epoch_log *log = &run->log;
    /* The host blocks are the record (validation, early stopping, checkpoints). */
    const ftl_head_engine *e = c->head_engine;
    if (e) {
        ftl_status st = e->store(e->ctx, t->params, t->opt.state, t->opt.slot_count);
        if (st != FTL_OK) return ftl_fail_context(st, "epoch %lld: copying the head back from the device", (long long)log->epoch);
    }
    ftl_dist_set_context(col, t->step, "the training metrics");
    FTL_TRY(reduce_counts(col, &run->counts));
    log->steps = run->step_in_epoch;
    log->examples = (int64_t)run->counts.count;
    log->loss = ftl_metric_loss(&run->counts);
    log->acc = ftl_metric_accuracy(&run->counts);
    log->lr = run->lr;
    log->data_wait_s = fmax(0, run->fetch_s - run->fetch_backbone_s);
    log->backbone_s = run->backbone_s;
    log->head_s = run->head_s;
    log->allreduce_s = run->allreduce_s;
    double train_s = ftl_now() - run->epoch_start;
    log->images_per_second = train_s > 0 ? run->counts.count / train_s : 0;
    if (!isfinite(log->loss))
        return ftl_fail(FTL_E_INTERNAL, "training diverged: the loss is %s in epoch %lld (lower --lr?)",
                        isnan(log->loss) ? "NaN" : "infinite", (long long)log->epoch);
    log->val_loss = log->val_acc = NAN;
    if (run->val) {
        double v0 = ftl_now();
        ftl_metric_counts vc;
        ftl_status st = evaluate_pass(t, run->val, t->config.val_mirrored, true, &vc);
        if (st != FTL_OK) return ftl_fail_context(st, "validation after epoch %lld", (long long)log->epoch);
        ftl_dist_set_context(col, t->step, "validation");
        FTL_TRY(reduce_counts(col, &vc));
        log->val_loss = ftl_metric_loss(&vc);
        log->val_acc = ftl_metric_accuracy(&vc);
        log->validation_s = ftl_now() - v0;
        ftl_timeline_span(&t->timeline, "validation", v0, v0 + log->validation_s, t->step);
    }
    return FTL_OK;
}

static void fill_result(const ftl_trainer *t, bool restored, ftl_fit_result *r) {
    memset(r, 0, sizeof *r);
    r->epochs_run = t->epoch;
    r->stopped_early = t->es.stopped_epoch > 0;
    r->restored_best = restored;
    r->best_epoch = t->tracking && t->es.has_best ? t->es.best_epoch : 0;
    r->best_value = t->es.has_best ? t->es.best : NAN;
    r->final_loss = r->final_acc = r->final_val_loss = r->final_val_acc = NAN;
    if (t->history_count == 0 && restored && t->config.initial) {
        r->final_loss = t->config.initial->loss, r->final_acc = t->config.initial->acc;
        r->final_val_loss = t->config.initial->val_loss, r->final_val_acc = t->config.initial->val_acc;
    }
    if (t->history_count == 0) return;
    r->last = t->history[t->history_count - 1];
    r->last.checkpoint = NULL; /* owned by the trainer; read the history for it */
    const ftl_epoch_log *f = &t->history[t->history_count - 1];
    if (restored && t->es.best_epoch == 0 && t->config.initial) f = t->config.initial;
    if (restored)
        for (size_t i = 0; i < t->history_count; i++)
            if (t->history[i].epoch == t->es.best_epoch) f = &t->history[i];
    r->final_loss = f->loss;
    r->final_acc = f->acc;
    r->final_val_loss = f->val_loss;
    r->final_val_acc = f->val_acc;
}

ftl_status ftl_fit_run_open(ftl_trainer *t, ftl_batch_source *train, ftl_batch_source *val, ftl_fit_run *run) {
    const ftl_fit_config *c = &t->config;
    const ftl_collectives *col = &c->collectives;
    memset(run, 0, sizeof *run);
    run->train = train;
    run->val = val;
    ftl_monitor m = c->early_stopping.monitor;
    bool val_metric = m == FTL_MONITOR_VAL_ACC || m == FTL_MONITOR_VAL_LOSS;
    if (val_metric && !val && c->early_stopping.stop)
        return ftl_fail(FTL_E_INVALID_ARG, "early stopping monitors %s but there is no validation data", ftl_monitor_name(m));
    t->tracking = !(val_metric && !val);
    FTL_TRY(plan_epochs(t, train, &run->steps, &run->wrap));
    if (t->steps_per_epoch && t->steps_per_epoch != run->steps && t->epoch > 0)
        ftl_log_warn("resumed with %lld steps per epoch instead of %lld: the run differs from an uninterrupted one",
                     (long long)run->steps, (long long)t->steps_per_epoch);
    t->steps_per_epoch = run->steps;
    run->sched = (ftl_lr_schedule){.lr = c->optimizer.lr, .scaling = c->lr_scaling,
                                   .batch = c->batch_size * ftl_dist_size(col), .base_batch = c->base_batch,
                                   .warmup_epochs = c->warmup_epochs, .steps_per_epoch = run->steps,
                                   .warmup_start_factor = c->warmup_start_factor, .decay = c->lr_decay,
                                   .epochs = c->epochs};
    if (c->lr_decay.kind == FTL_LR_PLATEAU && !t->tracking)
        return ftl_fail(FTL_E_INVALID_ARG, "--lr-schedule plateau follows %s, which is not measured (no validation data)",
                        ftl_monitor_name(m));
    if (isnan(t->plateau.lr)) ftl_lr_plateau_start(&t->plateau, ftl_lr_schedule_target(&run->sched));
    if (c->log_path && col->rank == 0) {
        FILE *jsonl = fopen(c->log_path, "a");
        if (!jsonl) return ftl_fail(FTL_E_IO, "cannot open the log %s: %s", c->log_path, strerror(errno));
        /* A run killed while writing left half a line: end it, so the next record is a line of its own. */
        long size = (fseek(jsonl, 0, SEEK_END) == 0) ? ftell(jsonl) : -1;
        if (size > 0) {
            FILE *r = fopen(c->log_path, "rb");
            int lastc = EOF;
            if (r && fseek(r, -1, SEEK_END) == 0) lastc = fgetc(r);
            if (r) fclose(r);
            if (lastc != '\n' && lastc != EOF) fputs("\n", jsonl);
        }
        /* Each run (and each resume) starts its part of the log with what it is. */
        if (c->run_record && (fputs(c->run_record, jsonl) == EOF || fputs("\n", jsonl) == EOF || fflush(jsonl) != 0)) {
            fclose(jsonl);
            return ftl_fail(FTL_E_IO, "cannot write the log %s: %s", c->log_path, strerror(errno));
        }
        run->jsonl = jsonl;
    }
    /* Epoch 0: the starting weights' measured value (unless a resume brought its own state). */
    if (c->initial && t->tracking && t->epoch == 0 && !t->finished)
        ftl_early_stopping_seed(&t->es, monitored_value(m, c->initial), t->params);
    ftl_status s = ftl_timeline_open(&t->timeline, c->timeline_path, col);
    if (s == FTL_OK && c->head_engine && ftl_fit_run_more(t))
        s = c->head_engine->load(c->head_engine->ctx, t->params, t->opt.state, t->opt.slot_count);
    if (s != FTL_OK) {
        if (run->jsonl) fclose(run->jsonl);
        run->jsonl = NULL;
        ftl_timeline_close(&t->timeline, false);
    }
    return s;
}

bool ftl_fit_run_more(const ftl_trainer *t) { return !t->finished && t->epoch < t->config.epochs; }

ftl_status ftl_fit_run_epoch_end(ftl_trainer *t, ftl_fit_run *run) {
    const ftl_fit_config *c = &t->config;
    bool rank0 = c->collectives.rank == 0;
    ftl_monitor m = c->early_stopping.monitor;
    ftl_epoch_log *logp = &run->log;
    FTL_TRY(measure_epoch(t, run));
    ftl_epoch_log log = *logp;
    double start = run->epoch_start;
    if (!c->device_usage || !c->device_usage(c->device_usage_ctx, &log.gpu_util_percent, &log.gpu_memory_bytes))
        log.gpu_util_percent = log.gpu_memory_bytes = NAN;
    ftl_timeline_counter(&t->timeline, "GPU busy %", ftl_now(), log.gpu_util_percent);
    ftl_timeline_counter(&t->timeline, "GPU memory GiB", ftl_now(), log.gpu_memory_bytes / 1073741824.0);
    t->epoch = log.epoch;
    bool stop = false;
    if (t->tracking) {
        stop = ftl_early_stopping_update(&t->es, log.epoch, monitored_value(m, &log), t->params);
        log.improved = t->es.has_best && t->es.best_epoch == log.epoch;
        log.best_epoch = t->es.best_epoch;
    }
    if (stop) t->finished = true;
    double lr_before = t->plateau.lr;
    bool reduced = c->lr_decay.kind == FTL_LR_PLATEAU && t->tracking &&
                   ftl_lr_plateau_update(&t->plateau, &c->lr_decay, monitored_value(m, &log), t->es.maximize,
                                         c->early_stopping.min_delta);
    /* Hooks first may stop too; the checkpoint then records the finished state. */
    log.seconds = ftl_now() - start;
    ftl_status s = FTL_OK;
    if (c->on_epoch_end) {
        bool hook_stop = false;
        s = c->on_epoch_end(c->on_epoch_end_ctx, &log, &hook_stop);
        if (s != FTL_OK) return s;
        if (hook_stop) t->finished = true;
    }
    char *ckpt = NULL;
    /* Every rank takes part (the streaming path gathers their loader positions); rank 0 writes. */
    if (c->checkpoint_pattern && (!c->save_best_only || log.improved)) {
        double c0 = ftl_now();
        ckpt = ftl_train_expand_pattern(c->checkpoint_pattern, t->epoch);
        if (!ckpt) return FTL_E_INVALID_ARG;
        log.checkpoint = ckpt;
        ftl_train_history_append(t, &log); /* the checkpoint carries this epoch's record too */
        s = write_epoch_checkpoint(t, run->train, ckpt);
        t->history_count--;
        free((char *)t->history[t->history_count].checkpoint);
        if (s != FTL_OK) {
            free(ckpt);
            return s;
        }
        log.checkpoint_s = ftl_now() - c0;
        ftl_timeline_span(&t->timeline, "checkpoint", c0, c0 + log.checkpoint_s, t->step);
    }
    s = ftl_timeline_flush(&t->timeline);
    log.seconds = ftl_now() - start;
    /* What no part covers: the pass set-up, count reductions, early stopping, hooks, the flush. */
    log.other_s = fmax(0, log.seconds - (log.data_wait_s + log.backbone_s + log.head_s + log.allreduce_s +
                                         log.validation_s + log.checkpoint_s));
    ftl_train_history_append(t, &log);
    if (rank0 && c->epoch_out) print_epoch_line(c->epoch_out, &log, run->val != NULL);
    if (reduced && rank0 && c->epoch_out && !t->finished) /* as Keras' ReduceLROnPlateau says it, after the epoch */
        fprintf(c->epoch_out, "Epoch %lld: reducing the learning rate from %g to %g (%s did not improve for %d epochs)\n",
                (long long)log.epoch, lr_before, t->plateau.lr, ftl_monitor_name(m), c->lr_decay.patience);
    if (run->jsonl) {
        ftl_strbuf b = {0};
        ftl_train_append_epoch_json(&b, &log);
        ftl_strbuf_append(&b, "\n", 1);
        if (fputs(b.data, run->jsonl) == EOF || fflush(run->jsonl) != 0)
            s = ftl_fail(FTL_E_IO, "cannot write the log %s: %s", c->log_path, strerror(errno));
        ftl_strbuf_free(&b);
    }
    free(ckpt);
    *logp = log;
    logp->checkpoint = NULL;
    if (t->finished && rank0 && c->epoch_out && t->es.stopped_epoch == log.epoch)
        fprintf(c->epoch_out, "Early stopping after epoch %lld: %s did not improve by more than %g for %d epochs\n",
                (long long)log.epoch, ftl_monitor_name(m), t->es.config.min_delta, t->es.config.patience);
    return s;
}

ftl_status ftl_fit_run_close(ftl_trainer *t, ftl_fit_run *run, ftl_status s, ftl_fit_result *result) {
    const ftl_fit_config *c = &t->config;
    bool rank0 = c->collectives.rank == 0;
    ftl_monitor m = c->early_stopping.monitor;
    if (run->jsonl && fclose(run->jsonl) != 0 && s == FTL_OK)
        s = ftl_fail(FTL_E_IO, "cannot write the log %s: %s", c->log_path, strerror(errno));
    run->jsonl = NULL;
    /* A failed epoch leaves the engine ahead of the host copies: bring them level where it still
     * answers, so what the caller reads next (params, a checkpoint) matches the step counters. */
    if (s != FTL_OK && c->head_engine) {
        char kept[1024];
        snprintf(kept, sizeof kept, "%s", ftl_last_error());
        c->head_engine->store(c->head_engine->ctx, t->params, t->opt.state, t->opt.slot_count);
        ftl_fail(s, "%s", kept);
    }
    ftl_status ts = ftl_timeline_close(&t->timeline, s == FTL_OK);
    if (s == FTL_OK) s = ts;
    if (s != FTL_OK) return s;
    bool restored = t->tracking && ftl_early_stopping_restore(&t->es, t->params);
    if (restored && rank0 && c->epoch_out && t->es.best_epoch == 0 && c->initial)
        fprintf(c->epoch_out, "Restoring the starting weights: no epoch beat their %s of %.4f\n", ftl_monitor_name(m),
                t->es.best);
    else if (restored && rank0 && c->epoch_out && t->es.best_epoch != t->epoch)
        fprintf(c->epoch_out, "Restoring the weights of epoch %lld (best %s: %.4f)\n", (long long)t->es.best_epoch,
                ftl_monitor_name(m), t->es.best);
    ftl_fit_result local;
    fill_result(t, restored, result ? result : &local);
    return FTL_OK;
}

ftl_status ftl_trainer_fit(ftl_trainer *t, ftl_batch_source *train, ftl_batch_source *val, ftl_fit_result *result) {
    if (result) memset(result, 0, sizeof *result);
    ftl_fit_run run;
    FTL_TRY(ftl_fit_run_open(t, train, val, &run));
    const ftl_fit_config *c = &t->config;
    ftl_status s = FTL_OK;
    while (s == FTL_OK && ftl_fit_run_more(t)) {
        ftl_fit_run_epoch_begin(t, &run);
        if (!run.wrap && train->begin_pass) {
            s = train->begin_pass(train->ctx);
            if (s != FTL_OK) s = ftl_fail_context(s, "epoch %lld", (long long)run.log.epoch);
        }
        for (int64_t i = 0; s == FTL_OK && i < run.steps; i++) {
            ftl_fit_test_hooks(ftl_dist_rank(&c->collectives), t->step);
            double t0 = ftl_now();
            ftl_feature_batch b = {0};
            s = train->next_batch(train->ctx, (size_t)c->batch_size, run.wrap, &b);
            if (s != FTL_OK) s = ftl_fail_context(s, "epoch %lld, batch %lld", (long long)run.log.epoch, (long long)i + 1);
            else s = ftl_fit_run_step(t, &run, &b, NULL, t0, ftl_now());
        }
        if (s == FTL_OK) s = ftl_fit_run_epoch_end(t, &run);
    }
    return ftl_fit_run_close(t, &run, s, result);
}
