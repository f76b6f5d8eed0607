/* ftl sweep's runner: many `ftl train` runs of the head on features embedded once.
 *
 * Trials that share the batch size and dropout rate (and, checked, every other setting but the
 * optimizer's) see the same batches in the same order and the same dropout masks. A stack of them
 * takes each chunk of batches once from the feature store, draws the chunk's masks once, then runs
 * each of its trials through the chunk's steps in turn; between chunks a trial's weights and
 * optimizer state stay in the cache for its steps (at 2048 x 257 one trial's blocks are ~8 MB, so
 * stepping every trial on every batch would stream them all from memory each step). Stacks run at
 * once on the worker threads, each trial's arithmetic on its own thread. Every trial goes through
 * ftl_trainer_fit's own steps (ftl_fit_run_*), so its epochs, metrics, weights, log and model
 * equal `ftl train` alone with its settings, bit for bit: nothing is approximated. */
#include "ftl/sweep.h"
#include "pipeline/train_run.h"
#include "train/pool.h"
#include "train/train_internal.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/timing.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void ftl_sweep_run_options_init(ftl_sweep_run_options *o) {
    memset(o, 0, sizeof *o);
}

static bool same_text(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

bool ftl_sweep_stackable(const ftl_train_options *trials, int count, char *why, size_t why_size) {
    const char *reason = NULL;
    for (int i = 0; i < count && !reason; i++) {
        const ftl_train_options *o = &trials[i], *z = &trials[0];
        const ftl_fit_config *f = &o->fit, *g = &z->fit;
        if (!o->feature_cache) reason = "--no-feature-cache runs the backbone on every batch";
        else if (fine_tuning(o) || o->fine_tune_only || o->init_path) reason = "fine-tuning trains the backbone's top";
        else if (o->resume_path) reason = "--resume continues one run";
        else if (f->checkpoint_pattern || f->timeline_path) reason = "--checkpoint and --timeline belong to one run";
        else if (f->collectives.world_size > 1) reason = "under mpirun each trial trains data-parallel";
        else if (f->top || f->head_engine || f->on_epoch_end) reason = "a trained top, head engine or epoch hook";
        else if (!same_text(o->train_path, z->train_path) || !same_text(o->val_path, z->val_path) ||
                 !same_text(o->embed.backbone_path, z->embed.backbone_path) || !same_text(o->cache_dir, z->cache_dir) ||
                 !same_text(o->embed.features_from, z->embed.features_from) ||
                 !same_text(o->embed.image_column, z->embed.image_column) ||
                 !same_text(o->embed.label_column, z->embed.label_column) || o->embed.precision != z->embed.precision ||
                 o->embed.label_offset != z->embed.label_offset || o->embed.image_size != z->embed.image_size ||
                 memcmp(&o->embed.preprocess, &z->embed.preprocess, sizeof o->embed.preprocess) != 0 ||
                 o->augment_flip != z->augment_flip || o->shuffle_buffer != z->shuffle_buffer ||
                 o->max_memory != z->max_memory)
            reason = "the trials read different data or features";
        else if (f->seed != g->seed || f->epochs != g->epochs || f->steps_per_epoch != g->steps_per_epoch ||
                 f->drop_remainder != g->drop_remainder || f->eval_batch_size != g->eval_batch_size ||
                 memcmp(&f->early_stopping, &g->early_stopping, sizeof f->early_stopping) != 0 ||
                 f->lr_scaling != g->lr_scaling || f->base_batch != g->base_batch)
            reason = "the trials differ in more than the head's settings (batch, dropout, optimizer, lr, momentum, "
                     "weight decay, warmup)";
    }
    if (!reason && count > 0) {
        ftl_device d;
        if (ftl_device_select(trials[0].embed.device, -1, &d) != FTL_OK || d.kind != FTL_DEVICE_CPU)
            reason = "the head would train on a GPU";
    }
    if (why && why_size) snprintf(why, why_size, "%s", reason ? reason : "");
    return reason == NULL;
}

/* ---------------------------------------------------------------- stacks and workers */

typedef struct sweep_stack {
    int *trials; /* indices into the trial list, ascending */
    int count;
} sweep_stack;

typedef struct sweep_shared {
    train_run *run;
    const ftl_train_options *options; /* per trial, with the run's int8 scales */
    const ftl_sweep_run_options *ro;
    ftl_sweep_trial_result *results;
    int trial_count;
    int64_t train_rows;
    sweep_stack *stacks;
    int stack_count;
    atomic_int next_stack;
    atomic_bool failed;
    pthread_mutex_t lock; /* model files, progress lines, the first error */
    ftl_status status;
    char error[2048];
    int finished;
    bool caller_only;
} sweep_shared;

static void record_error(sweep_shared *sh, ftl_status st) {
    pthread_mutex_lock(&sh->lock);
    if (sh->status == FTL_OK) {
        sh->status = st;
        snprintf(sh->error, sizeof sh->error, "%s", ftl_last_error());
    }
    atomic_store(&sh->failed, true);
    pthread_mutex_unlock(&sh->lock);
}

/* A chunk's batches, copied out of the source (its buffer holds one batch). */
typedef struct chunk_batches {
    int capacity;  /* batches */
    size_t rows;   /* per batch */
    int64_t dim;
    float *features, *dropped;
    int32_t *labels;
    uint32_t *positions;
    ftl_feature_batch *batches;
    double *fetch_seconds;
} chunk_batches;

static void chunk_init(chunk_batches *c, int capacity, size_t rows, int64_t dim, bool dropout) {
    memset(c, 0, sizeof *c);
    c->capacity = capacity;
    c->rows = rows;
    c->dim = dim;
    c->features = ftl_train_alloc_floats((size_t)capacity * rows * (size_t)dim);
    c->dropped = dropout ? ftl_train_alloc_floats((size_t)capacity * rows * (size_t)dim) : NULL;
    c->labels = ftl_xcalloc((size_t)capacity * rows, sizeof *c->labels);
    c->positions = ftl_xcalloc((size_t)capacity * rows, sizeof *c->positions);
    c->batches = ftl_xcalloc((size_t)capacity, sizeof *c->batches);
    c->fetch_seconds = ftl_xcalloc((size_t)capacity, sizeof *c->fetch_seconds);
}

static void chunk_free(chunk_batches *c) {
    free(c->features), free(c->dropped), free(c->labels), free(c->positions), free(c->batches), free(c->fetch_seconds);
}

static ftl_status fetch_batch(ftl_batch_source *src, chunk_batches *c, int j, bool wrap) {
    double t0 = ftl_now();
    ftl_feature_batch b = {0};
    FTL_TRY(src->next_batch(src->ctx, c->rows, wrap, &b));
    if (b.count > c->rows) return ftl_fail(FTL_E_INTERNAL, "a batch of %zu rows for a chunk of %zu", b.count, c->rows);
    size_t at = (size_t)j * c->rows;
    memcpy(c->features + at * (size_t)c->dim, b.features, b.count * (size_t)c->dim * sizeof(float));
    memcpy(c->labels + at, b.labels, b.count * sizeof(int32_t));
    for (size_t i = 0; i < b.count; i++) c->positions[at + i] = b.positions ? b.positions[i] : (uint32_t)(b.position_base + (int64_t)i);
    ftl_feature_batch *k = &c->batches[j];
    *k = b;
    k->features = c->features + at * (size_t)c->dim;
    k->labels = c->labels + at;
    k->positions = c->positions + at;
    k->position_base = 0;
    c->fetch_seconds[j] = ftl_now() - t0;
    return FTL_OK;
}

/* The trial's log's first line, its trainer and its fit. */
static ftl_status open_trial(sweep_shared *sh, int trial, ftl_batch_source *train, ftl_batch_source *val,
                             ftl_trainer **t, ftl_fit_run *fr) {
    const ftl_train_options *o = &sh->options[trial];
    train_run *r = sh->run;
    ftl_fit_config fit = o->fit;
    fit.epoch_out = NULL; /* the sweep prints a line per trial */
    char *record = fit.log_path ? train_run_record_json(o, r->dim, r->classes_json, ftl_model_get_info(r->backbone), "cpu", NULL)
                                : NULL;
    fit.run_record = record;
    ftl_status st = ftl_trainer_init(t, &fit, r->dim, r->class_count);
    if (st == FTL_OK) st = ftl_fit_run_open(*t, train, val, fr);
    if (st == FTL_OK) (*t)->config.run_record = NULL; /* written: the trainer keeps no pointer to it */
    free(record);
    return st;
}

static ftl_status finish_trial(sweep_shared *sh, int trial, ftl_trainer *t, ftl_fit_run *fr, double seconds) {
    ftl_sweep_trial_result *res = &sh->results[trial];
    FTL_TRY(ftl_fit_run_close(t, fr, FTL_OK, &res->fit));
    res->seconds = seconds;
    res->done = true;
    pthread_mutex_lock(&sh->lock);
    ftl_status st = train_run_save_model(sh->run, &sh->options[trial], t, &res->fit, NULL, 0, NULL, 0);
    if (st == FTL_OK) {
        sh->finished++;
        FILE *out = sh->ro->progress;
        if (out) {
            const char *label = sh->ro->labels ? sh->ro->labels[trial] : "";
            fprintf(out, "sweep: trial %d done (%d/%d):%s%s  %lld epochs, best %lld: val_acc %.4f, val_loss %.4f (%.1f s)\n",
                    trial + 1, sh->finished, sh->trial_count, label[0] ? " " : "", label, (long long)res->fit.epochs_run,
                    (long long)res->fit.best_epoch, res->fit.final_val_acc, res->fit.final_val_loss, seconds);
            fflush(out);
        }
    }
    pthread_mutex_unlock(&sh->lock);
    return st;
}

/* Trains one stack: its trials in lockstep over shared chunks of batches. */
static ftl_status run_stack(sweep_shared *sh, const sweep_stack *stack) {
    train_run *r = sh->run;
    const ftl_train_options *o0 = &sh->options[stack->trials[0]];
    const char *src[1] = {o0->train_path};
    ftl_loader_options order = train_run_order(o0, src);
    global_order_source gs;
    FTL_TRY(global_order_source_init(&gs, &order, &r->train_store, r->have_train_flipped ? &r->train_flipped : NULL,
                                     o0->fit.seed, sh->train_rows, 1));
    ftl_batch_source train = global_order_source_as_batch_source(&gs);
    file_order_source vs;
    ftl_batch_source val = {0}, *valp = NULL;
    if (r->have_val_store) {
        file_order_source_init(&vs, &r->val_store);
        val = file_order_source_as_batch_source(&vs);
        valp = &val;
    }
    int n = stack->count;
    ftl_trainer **t = ftl_xcalloc((size_t)n, sizeof *t);
    ftl_fit_run *fr = ftl_xcalloc((size_t)n, sizeof *fr);
    bool *active = ftl_xcalloc((size_t)n, sizeof *active), *open = ftl_xcalloc((size_t)n, sizeof *open);
    double *seconds = ftl_xcalloc((size_t)n, sizeof *seconds);
    ftl_status st = FTL_OK;
    int opened = 0;
    for (int k = 0; k < n && st == FTL_OK; k++, opened++) {
        double t0 = ftl_now();
        st = open_trial(sh, stack->trials[k], &train, valp, &t[k], &fr[k]);
        open[k] = st == FTL_OK;
        if (st == FTL_OK) active[k] = ftl_fit_run_more(t[k]);
        if (st != FTL_OK) st = ftl_fail_context(st, "trial %d", stack->trials[k] + 1);
        seconds[k] += ftl_now() - t0;
    }
    /* Chunks of about 2 MB of rows (twice that with the masked copy): small beside the L2/L3 share a
     * trial's blocks need, long enough that each trial's blocks are brought in once per chunk. */
    size_t rows = (size_t)o0->fit.batch_size;
    double dropout = o0->fit.dropout;
    double batch_bytes = (double)rows * (double)r->dim * 4.0 * (dropout > 0 ? 2 : 1);
    int chunk_steps = (int)fmax(1.0, fmin(64.0, (2 << 20) / batch_bytes));
    chunk_batches chunk;
    chunk_init(&chunk, chunk_steps, rows, r->dim, dropout > 0);
    int live = 0;
    for (int k = 0; k < n; k++) live += active[k];
    /* Trials that end before their first epoch (--epochs 0 is refused; a finished resume is not here) are saved below. */
    while (st == FTL_OK && live > 0 && !atomic_load(&sh->failed)) {
        int lead = -1; /* every active trial is at the same step: the first one's counters stand for all */
        for (int k = 0; k < n; k++)
            if (active[k]) {
                ftl_fit_run_epoch_begin(t[k], &fr[k]);
                if (lead < 0) lead = k;
            }
        int64_t steps = fr[lead].steps;
        bool wrap = fr[lead].wrap;
        if (!wrap && train.begin_pass) {
            st = train.begin_pass(train.ctx);
            if (st != FTL_OK) st = ftl_fail_context(st, "epoch %lld", (long long)fr[lead].log.epoch);
        }
        for (int64_t i = 0; i < steps && st == FTL_OK; i += chunk_steps) {
            int m = (int)(steps - i < chunk_steps ? steps - i : chunk_steps);
            double f0 = ftl_now();
            for (int j = 0; j < m && st == FTL_OK; j++) {
                st = fetch_batch(&train, &chunk, j, wrap);
                if (st != FTL_OK) st = ftl_fail_context(st, "epoch %lld, batch %lld", (long long)fr[lead].log.epoch, (long long)(i + j + 1));
            }
            if (st == FTL_OK && dropout > 0) /* the masks of steps step..step+m-1, the same for every trial here */
                for (int j = 0; j < m; j++) {
                    ftl_row_draws d = ftl_trainer_draws(t[lead], &chunk.batches[j]);
                    d.step += j;
                    ftl_head_dropout_rows((float)dropout, r->dim, chunk.batches[j].features, chunk.batches[j].count, &d,
                                          chunk.dropped + (size_t)j * rows * (size_t)r->dim);
                }
            double shared_s = (ftl_now() - f0) / live;
            for (int k = 0; k < n && st == FTL_OK; k++) {
                if (!active[k]) continue;
                double k0 = ftl_now();
                for (int j = 0; j < m && st == FTL_OK; j++) {
                    double now = ftl_now();
                    st = ftl_fit_run_step(t[k], &fr[k], &chunk.batches[j],
                                          dropout > 0 ? chunk.dropped + (size_t)j * rows * (size_t)r->dim : NULL,
                                          now - chunk.fetch_seconds[j] / live, now);
                }
                if (st != FTL_OK) st = ftl_fail_context(st, "trial %d", stack->trials[k] + 1);
                seconds[k] += ftl_now() - k0 + shared_s;
            }
        }
        for (int k = 0; k < n && st == FTL_OK; k++) {
            if (!active[k]) continue;
            double k0 = ftl_now();
            st = ftl_fit_run_epoch_end(t[k], &fr[k]);
            if (st != FTL_OK) {
                st = ftl_fail_context(st, "trial %d", stack->trials[k] + 1);
                break;
            }
            seconds[k] += ftl_now() - k0;
            if (!ftl_fit_run_more(t[k])) { /* stopped early or at --epochs: it leaves the stack */
                active[k] = false;
                live--;
                st = finish_trial(sh, stack->trials[k], t[k], &fr[k], seconds[k]);
                if (st != FTL_OK) st = ftl_fail_context(st, "trial %d", stack->trials[k] + 1);
                ftl_trainer_free(t[k]);
                t[k] = NULL;
            }
        }
    }
    for (int k = 0; k < opened; k++) {
        if (!t[k]) continue;
        if (st == FTL_OK && !active[k]) { /* no epoch was due */
            st = finish_trial(sh, stack->trials[k], t[k], &fr[k], seconds[k]);
        } else if (open[k]) { /* stopped with the sweep: close its log */
            char kept[2048];
            snprintf(kept, sizeof kept, "%s", ftl_last_error());
            ftl_fit_run_close(t[k], &fr[k], FTL_E_INTERRUPTED, NULL);
            if (st != FTL_OK) ftl_fail(st, "%s", kept);
        }
        ftl_trainer_free(t[k]);
    }
    chunk_free(&chunk);
    free(t), free(fr), free(active), free(open), free(seconds);
    if (r->have_val_store) file_order_source_free(&vs);
    global_order_source_free(&gs);
    return st;
}

static void *worker_main(void *arg) {
    sweep_shared *sh = arg;
    if (sh->caller_only) ftl_pool_set_caller_only(true);
    for (;;) {
        int i = atomic_fetch_add(&sh->next_stack, 1);
        if (i >= sh->stack_count || atomic_load(&sh->failed)) break;
        ftl_status st = run_stack(sh, &sh->stacks[i]);
        if (st != FTL_OK) record_error(sh, st);
    }
    if (sh->caller_only) ftl_pool_set_caller_only(false);
    return NULL;
}

/* Stacks: trials with the same batch size and dropout rate, at most stack_size each, split further
 * until every worker has one; the largest first (each worker takes the next when it is done). */
static int build_stacks(const ftl_train_options *trials, int count, int stack_size, int workers, sweep_stack **out) {
    sweep_stack *stacks = ftl_xcalloc((size_t)count, sizeof *stacks);
    int n = 0;
    bool *taken = ftl_xcalloc((size_t)count, sizeof *taken);
    for (int i = 0; i < count; i++) {
        if (taken[i]) continue;
        int members = 0;
        for (int j = i; j < count; j++)
            if (!taken[j] && trials[j].fit.batch_size == trials[i].fit.batch_size && trials[j].fit.dropout == trials[i].fit.dropout)
                members++;
        int parts = (members + stack_size - 1) / stack_size, at = 0;
        int *list = ftl_xcalloc((size_t)members, sizeof *list);
        for (int j = i; j < count; j++)
            if (!taken[j] && trials[j].fit.batch_size == trials[i].fit.batch_size && trials[j].fit.dropout == trials[i].fit.dropout) {
                list[at++] = j;
                taken[j] = true;
            }
        for (int p = 0; p < parts; p++) { /* even parts */
            int b = p * members / parts, e = (p + 1) * members / parts;
            stacks[n].trials = ftl_xcalloc((size_t)(e - b), sizeof(int));
            memcpy(stacks[n].trials, list + b, (size_t)(e - b) * sizeof(int));
            stacks[n++].count = e - b;
        }
        free(list);
    }
    free(taken);
    for (;;) { /* fewer stacks than workers: halve the largest */
        int big = 0;
        for (int i = 1; i < n; i++)
            if (stacks[i].count > stacks[big].count) big = i;
        if (n >= workers || stacks[big].count < 2) break;
        int half = stacks[big].count / 2;
        stacks[n].trials = ftl_xcalloc((size_t)half, sizeof(int));
        memcpy(stacks[n].trials, stacks[big].trials + stacks[big].count - half, (size_t)half * sizeof(int));
        stacks[n++].count = half;
        stacks[big].count -= half;
    }
    for (int i = 1; i < n; i++) /* largest first; ties by their first trial */
        for (int j = i; j > 0 && (stacks[j].count > stacks[j - 1].count ||
                                  (stacks[j].count == stacks[j - 1].count && stacks[j].trials[0] < stacks[j - 1].trials[0]));
             j--) {
            sweep_stack tmp = stacks[j];
            stacks[j] = stacks[j - 1];
            stacks[j - 1] = tmp;
        }
    *out = stacks;
    return n;
}

ftl_status ftl_sweep_run(const ftl_train_options *trials, int count, const ftl_sweep_run_options *ro,
                         ftl_sweep_trial_result *results) {
    ftl_sweep_run_options defaults;
    ftl_sweep_run_options_init(&defaults);
    if (!ro) ro = &defaults;
    if (count < 1) return ftl_fail(FTL_E_INVALID_ARG, "a sweep needs at least one trial");
    memset(results, 0, (size_t)count * sizeof *results);
    char why[256];
    if (!ftl_sweep_stackable(trials, count, why, sizeof why))
        return ftl_fail(FTL_E_UNSUPPORTED, "these trials cannot share the cached features: %s", why);
    for (int i = 0; i < count; i++) {
        const ftl_train_options *o = &trials[i];
        if (!o->train_path || !o->out_path || !o->embed.backbone_path)
            return ftl_fail(FTL_E_INVALID_ARG, "trial %d needs a training dataset, a backbone and an output path", i + 1);
        if (ftl_path_exists(o->out_path) && !o->overwrite)
            return ftl_fail(FTL_E_EXISTS, "trial %d: model %s already exists (use --overwrite to replace it)", i + 1, o->out_path);
        if (!o->val_path && (o->fit.early_stopping.monitor == FTL_MONITOR_VAL_ACC || o->fit.early_stopping.monitor == FTL_MONITOR_VAL_LOSS) &&
            o->fit.early_stopping.stop)
            return ftl_fail(FTL_E_INVALID_ARG, "early stopping on %s needs --val (or monitor=acc|loss)",
                            ftl_monitor_name(o->fit.early_stopping.monitor));
        /* what ftl_trainer_init would refuse, refused before the features are made */
        if (o->fit.batch_size < 1 || !(o->fit.dropout >= 0 && o->fit.dropout < 1) || !(o->fit.warmup_epochs >= 0))
            return ftl_fail(FTL_E_INVALID_ARG, "trial %d: batch %lld, dropout %g or warmup %g is out of range", i + 1,
                            (long long)o->fit.batch_size, o->fit.dropout, o->fit.warmup_epochs);
    }
    if (trials[0].val_path && !ftl_path_exists(trials[0].val_path))
        return ftl_fail(FTL_E_NOT_FOUND, "validation dataset %s does not exist", trials[0].val_path);
    train_run r;
    memset(&r, 0, sizeof r);
    const ftl_train_options *o = &trials[0];
    ftl_train_options calibrated;
    ftl_nn_int8_scales *own_scales = NULL;
    ftl_status st = train_run_prepare(&r, &o, &calibrated, &own_scales);
    ftl_train_summary summary;
    memset(&summary, 0, sizeof summary);
    if (st == FTL_OK && ftl_model_get_info(r.backbone)->device_kind != FTL_DEVICE_CPU)
        st = ftl_fail(FTL_E_UNSUPPORTED, "the sweep trains its heads on the CPU: give --device cpu");
    if (st == FTL_OK) st = train_run_setup_cached(&r, o, &summary);
    ftl_train_options *per = ftl_xcalloc((size_t)count, sizeof *per);
    for (int i = 0; i < count; i++) {
        per[i] = trials[i];
        per[i].embed.int8_scales = o->embed.int8_scales; /* the one calibration */
    }
    sweep_shared sh = {.run = &r, .options = per, .ro = ro, .results = results, .trial_count = count,
                       .train_rows = summary.train_rows};
    pthread_mutex_init(&sh.lock, NULL);
    if (st == FTL_OK) {
        int workers = ro->threads > 0 ? ro->threads : ftl_train_threads();
        if (!summary.features_in_memory) workers = 1; /* a streamed store reads through one cache of row groups */
        int stack_size = ro->stack_size > 0 ? ro->stack_size : 16;
        sh.stack_count = build_stacks(per, count, stack_size, workers, &sh.stacks);
        if (workers > sh.stack_count) workers = sh.stack_count;
        sh.caller_only = workers > 1;
        if (ro->progress) {
            fprintf(ro->progress, "sweep: %d trials in %d stacks (same batch size and dropout), %d at a time; features %s\n",
                    count, sh.stack_count, workers,
                    summary.train_cache_reused ? "from the cache" : "embedded once");
            fflush(ro->progress);
        }
        pthread_t *threads = ftl_xcalloc((size_t)workers, sizeof *threads);
        int started = 0;
        for (int w = 1; w < workers; w++)
            if (pthread_create(&threads[w], NULL, worker_main, &sh) == 0) started++;
        worker_main(&sh);
        for (int w = 1; w <= started; w++) pthread_join(threads[w], NULL);
        free(threads);
        if (sh.status != FTL_OK) st = ftl_fail(sh.status, "%s", sh.error);
    }
    for (int i = 0; i < sh.stack_count; i++) free(sh.stacks[i].trials);
    free(sh.stacks);
    pthread_mutex_destroy(&sh.lock);
    free(per);
    train_run_free(&r);
    ftl_nn_int8_scales_free(own_scales);
    return st;
}
