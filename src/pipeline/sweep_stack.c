/* Training one stack of ftl sweep's trials (see sweep_job.c): chunks of shared batches and dropout
 * masks, each trial stepped through them in turn or side by side, and a trial opened from its
 * checkpoint or finished into its model and result. */
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

void sweep_record_error(sweep_shared *sh, ftl_status st) {
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

/* Opens a trial: its trainer (from its checkpoint when resuming), its log's first line and its fit.
 * train: a source of the trial's order the checkpoint's position goes into. */
void sweep_trial_sources(sweep_shared *sh, int trial, ftl_batch_source *train, ftl_batch_source *val,
                         ftl_batch_source *val_mirrored) {
    sweep_trial *tr = &sh->trials[trial];
    tr->fr.train = train;
    tr->fr.val = val;
    if (tr->t) tr->t->config.val_mirrored = sh->options[trial].tta_flip ? val_mirrored : NULL;
}

ftl_status sweep_open_trial(sweep_shared *sh, int trial, ftl_batch_source *train, ftl_batch_source *val,
                            ftl_batch_source *val_mirrored) {
    const ftl_train_options *o = &sh->options[trial];
    sweep_trial *tr = &sh->trials[trial];
    train_run *r = sh->run;
    bool resume = sh->ro->resume && ftl_path_exists(tr->checkpoint);
    ftl_fit_config fit = o->fit;
    fit.epoch_out = NULL; /* the sweep prints a line per trial */
    fit.val_mirrored = o->tta_flip ? val_mirrored : NULL;
    fit.checkpoint_meta = sh->meta.kv;
    fit.checkpoint_meta_count = TRAIN_RUN_META_COUNT;
    ftl_train_options with_resume = *o;
    with_resume.resume_path = resume ? tr->checkpoint : NULL;
    char *record = fit.log_path ? train_run_record_json(&with_resume, r->dim, r->classes_json,
                                                        ftl_model_get_info(r->backbone), "cpu", with_resume.resume_path)
                                : NULL;
    fit.run_record = record;
    ftl_status st = ftl_trainer_init(&tr->t, &fit, r->dim, r->class_count);
    if (st == FTL_OK && resume) st = ftl_trainer_resume(tr->t, tr->checkpoint, train);
    if (st == FTL_OK) st = ftl_fit_run_open(tr->t, train, val, &tr->fr);
    if (st == FTL_OK) {
        tr->t->config.run_record = NULL; /* written: the trainer keeps no pointer to it */
        tr->open = true;
        tr->epoch = ftl_trainer_epoch(tr->t);
        if (resume) {
            free(tr->position);
            tr->position = NULL;
            if (train->save_position) st = train->save_position(train->ctx, &tr->position, &tr->position_size);
        }
    } else {
        ftl_trainer_free(tr->t);
        tr->t = NULL;
    }
    free(record);
    return st;
}

/* The trial is over (stopped early, at --epochs, or halted at a rung): best weights, model, result. */
ftl_status sweep_finish_trial(sweep_shared *sh, int trial, int64_t halted_at) {
    sweep_trial *tr = &sh->trials[trial];
    ftl_sweep_trial_result *res = &sh->results[trial];
    res->score = sweep_score_at(tr->t, halted_at > 0 ? halted_at : INT64_MAX);
    ftl_status st = ftl_fit_run_close(tr->t, &tr->fr, FTL_OK, &res->fit);
    tr->open = false;
    res->seconds = tr->seconds;
    res->halted_at = halted_at;
    res->rank = ftl_dist_rank(sh->col);
    pthread_mutex_lock(&sh->lock);
    if (st == FTL_OK) st = train_run_save_model(sh->run, &sh->options[trial], tr->t, &res->fit, NULL, 0, NULL, 0);
    ftl_strbuf b = {0};
    sweep_append_result_json(&b, trial, res);
    if (st == FTL_OK) st = ftl_write_file_atomic(tr->result_path, b.data, b.len); /* after the model: "done" */
    if (st == FTL_OK) st = sweep_log_line(sh, b.data);
    ftl_strbuf_free(&b);
    if (st == FTL_OK) {
        res->done = true;
        tr->ended = true;
        if (ftl_path_exists(tr->checkpoint)) unlink(tr->checkpoint); /* the model and result stand for it now */
        sh->finished++;
        FILE *out = sh->ro->progress;
        if (out) {
            const char *label = sh->ro->labels ? sh->ro->labels[trial] : "";
            char how[64] = "";
            if (halted_at > 0) snprintf(how, sizeof how, ", halted at rung epoch %lld", (long long)halted_at);
            else if (res->fit.stopped_early) snprintf(how, sizeof how, ", stopped early");
            fprintf(out, "sweep: trial %d done (%d/%d):%s%s  %lld epochs%s, best %lld: val_acc %.4f, val_loss %.4f (%.1f s)\n",
                    trial + 1, sh->finished, sh->trial_count, label[0] ? " " : "", label, (long long)res->fit.epochs_run,
                    how, (long long)res->fit.best_epoch, res->fit.final_val_acc, res->fit.final_val_loss, tr->seconds);
            fflush(out);
        }
    }
    pthread_mutex_unlock(&sh->lock);
    ftl_trainer_free(tr->t);
    tr->t = NULL;
    return st;
}

/* FTL_SWEEP_SIDE_BY_SIDE=0 trains every stack one trial at a time per chunk, =1 every stack side by
 * side whatever its size (the tests compare both; the benchmark measures where each pays). */
bool sweep_trains_side_by_side(const sweep_shared *sh, const sweep_stack *stack) {
    const char *env = getenv("FTL_SWEEP_SIDE_BY_SIDE");
    if (env && strcmp(env, "0") == 0) return false;
    if (env && strcmp(env, "1") == 0) return stack->count > 1;
    double bytes = (double)stack->count * (double)sh->run->dim * (double)sh->run->class_count * 4.0;
    return stack->count > 1 && bytes <= (double)SIDE_BY_SIDE_BYTES;
}

/* The epoch's end for each trial still training: its log record, its checkpoint, and its end when it
 * stopped (early or at --epochs: it leaves the stack, *live counts it out). */
static ftl_status end_epoch(sweep_shared *sh, const sweep_stack *stack, ftl_batch_source *train, int *live) {
    ftl_status st = FTL_OK;
    for (int k = 0; k < stack->count && st == FTL_OK; k++) {
        int trial = stack->trials[k];
        sweep_trial *tr = &sh->trials[trial];
        if (!tr->t || !ftl_fit_run_more(tr->t)) continue;
        double k0 = ftl_now();
        st = ftl_fit_run_epoch_end(tr->t, &tr->fr);
        tr->epoch = ftl_trainer_epoch(tr->t);
        /* the log first, then the checkpoint: a kill between them repeats the epoch (the
         * report keeps a trial's last record of each epoch) rather than losing its record */
        if (st == FTL_OK) st = sweep_log_epoch(sh, trial);
        if (st == FTL_OK && ftl_fit_run_more(tr->t) && sh->ro->checkpoints)
            st = ftl_trainer_save_checkpoint(tr->t, tr->checkpoint, train);
        tr->seconds += ftl_now() - k0;
        if (st == FTL_OK && !ftl_fit_run_more(tr->t)) { /* stopped early or at --epochs: it leaves the stack */
            (*live)--;
            st = sweep_finish_trial(sh, trial, 0);
        }
        if (st != FTL_OK) st = ftl_fail_context(st, "trial %d", trial + 1);
    }
    return st;
}

/* Where each member's order stands, for the next phase's stacks; this phase's sources end here. */
static ftl_status save_positions(sweep_shared *sh, const sweep_stack *stack, ftl_batch_source *train) {
    ftl_status st = FTL_OK;
    uint8_t *blob = NULL;
    size_t blob_size = 0;
    if (train->save_position) st = train->save_position(train->ctx, &blob, &blob_size);
    for (int k = 0; k < stack->count && st == FTL_OK; k++) {
        sweep_trial *tr = &sh->trials[stack->trials[k]];
        if (!tr->t) continue;
        free(tr->position);
        tr->position = ftl_xmalloc(blob_size ? blob_size : 1);
        memcpy(tr->position, blob, blob_size);
        tr->position_size = blob_size;
        sweep_trial_sources(sh, stack->trials[k], NULL, NULL, NULL); /* this phase's sources end here */
    }
    free(blob);
    return st;
}

/* Trains one stack up to sh->until_epoch: its trials in lockstep over shared chunks of batches. */
static ftl_status run_stack(sweep_shared *sh, const sweep_stack *stack) {
    train_run *r = sh->run;
    const ftl_train_options *o0 = &sh->options[stack->trials[0]];
    sweep_trial *first = &sh->trials[stack->trials[0]];
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
    file_order_source vms; /* --tta flip trials: val's mirror images */
    ftl_batch_source val_m = {0}, *val_mp = NULL;
    if (r->have_val_flipped) {
        file_order_source_init(&vms, &r->val_flipped);
        val_m = file_order_source_as_batch_source(&vms);
        val_mp = &val_m;
    }
    int n = stack->count;
    ftl_status st = FTL_OK;
    /* where the stack's order stands: the members are at the same epoch, so at the same position */
    if (first->position) st = train.restore_position(train.ctx, first->position, first->position_size);
    for (int k = 0; k < n && st == FTL_OK; k++) {
        sweep_trial *tr = &sh->trials[stack->trials[k]];
        double t0 = ftl_now();
        if (!tr->open) {
            st = sweep_open_trial(sh, stack->trials[k], &train, valp, val_mp);
            if (st != FTL_OK) st = ftl_fail_context(st, "trial %d", stack->trials[k] + 1);
        } else {
            sweep_trial_sources(sh, stack->trials[k], &train, valp, val_mp);
        }
        tr->seconds += ftl_now() - t0;
    }
    size_t rows = (size_t)o0->fit.batch_size;
    double dropout = o0->fit.dropout;
    /* Chunks of about 32 MB of rows (measured at 2048 x 257: shorter chunks bring each trial's
     * blocks back into the cache too often; one trial's blocks are reread once per chunk). */
    double batch_bytes = (double)rows * (double)r->dim * 4.0 * (dropout > 0 ? 2 : 1);
    int chunk_steps = (int)fmax(1.0, fmin(256.0, (32 << 20) / batch_bytes));
    chunk_batches chunk;
    chunk_init(&chunk, chunk_steps, rows, r->dim, dropout > 0);
    /* Small heads train side by side, one GEMM for the stack (their kernels together fit in the
     * cache, and a head of a few classes alone would use a sliver of each vector); large ones one at a
     * time within a chunk, where each keeps its blocks in the cache for its steps. */
    ftl_head_stack *side_by_side = sweep_trains_side_by_side(sh, stack) ? ftl_head_stack_new() : NULL;
    ftl_head **heads = ftl_xcalloc((size_t)n, sizeof *heads);
    ftl_metric_counts **counts = ftl_xcalloc((size_t)n, sizeof *counts);
    int *members = ftl_xcalloc((size_t)n, sizeof *members);
    int live = 0;
    for (int k = 0; k < n && st == FTL_OK; k++) {
        sweep_trial *tr = &sh->trials[stack->trials[k]];
        if (ftl_fit_run_more(tr->t)) live++;
        else st = sweep_finish_trial(sh, stack->trials[k], 0); /* nothing left to train (a resumed, finished fit) */
    }
    while (st == FTL_OK && live > 0 && !atomic_load(&sh->failed)) {
        int lead = -1; /* every active trial is at the same step: the first one's counters stand for all */
        for (int k = 0; k < n; k++) {
            sweep_trial *tr = &sh->trials[stack->trials[k]];
            if (!tr->t || !ftl_fit_run_more(tr->t)) continue;
            ftl_fit_run_epoch_begin(tr->t, &tr->fr);
            if (lead < 0) lead = k;
        }
        sweep_trial *lt = &sh->trials[stack->trials[lead]];
        if (lt->epoch >= sh->until_epoch) break;
        int64_t steps = lt->fr.steps;
        bool wrap = lt->fr.wrap;
        if (!wrap && train.begin_pass) {
            st = train.begin_pass(train.ctx);
            if (st != FTL_OK) st = ftl_fail_context(st, "epoch %lld", (long long)lt->fr.log.epoch);
        }
        for (int64_t i = 0; i < steps && st == FTL_OK; i += chunk_steps) {
            int m = (int)(steps - i < chunk_steps ? steps - i : chunk_steps);
            double f0 = ftl_now();
            for (int j = 0; j < m && st == FTL_OK; j++) {
                st = fetch_batch(&train, &chunk, j, wrap);
                if (st != FTL_OK) st = ftl_fail_context(st, "epoch %lld, batch %lld", (long long)lt->fr.log.epoch, (long long)(i + j + 1));
            }
            if (st == FTL_OK && dropout > 0) /* the masks of the chunk's steps, the same for every trial here */
                for (int j = 0; j < m; j++) {
                    ftl_row_draws d = ftl_trainer_draws(lt->t, &chunk.batches[j]);
                    d.step += j;
                    ftl_head_dropout_rows((float)dropout, r->dim, chunk.batches[j].features, chunk.batches[j].count, &d,
                                          chunk.dropped + (size_t)j * rows * (size_t)r->dim);
                }
            double shared_s = (ftl_now() - f0) / live;
            if (side_by_side) { /* step-major: one GEMM each way per step for the whole stack */
                for (int j = 0; j < m && st == FTL_OK; j++) {
                    int a = 0;
                    for (int k = 0; k < n; k++) {
                        sweep_trial *tr = &sh->trials[stack->trials[k]];
                        if (!tr->t || !ftl_fit_run_more(tr->t)) continue;
                        ftl_fit_test_hooks(0, ftl_trainer_step(tr->t));
                        heads[a] = ftl_trainer_head(tr->t);
                        counts[a] = &tr->fr.counts;
                        members[a++] = k;
                    }
                    const ftl_feature_batch *b = &chunk.batches[j];
                    double g0 = ftl_now();
                    st = ftl_head_stack_train(side_by_side, heads, a,
                                              dropout > 0 ? chunk.dropped + (size_t)j * rows * (size_t)r->dim : b->features,
                                              b->labels, b->count, (float)(1.0 / (double)b->global_count), counts);
                    double g = (ftl_now() - g0) / a;
                    for (int i = 0; i < a && st == FTL_OK; i++) {
                        sweep_trial *tr = &sh->trials[stack->trials[members[i]]];
                        double k0 = ftl_now();
                        st = ftl_fit_run_step_computed(tr->t, &tr->fr, b, k0 - chunk.fetch_seconds[j] / live, k0, g);
                        tr->seconds += ftl_now() - k0 + g + shared_s / m;
                    }
                    if (st != FTL_OK) st = ftl_fail_context(st, "a stack of trials from %d", stack->trials[0] + 1);
                }
                continue;
            }
            for (int k = 0; k < n && st == FTL_OK; k++) {
                sweep_trial *tr = &sh->trials[stack->trials[k]];
                if (!tr->t || !ftl_fit_run_more(tr->t)) continue;
                double k0 = ftl_now();
                for (int j = 0; j < m && st == FTL_OK; j++) {
                    ftl_fit_test_hooks(0, ftl_trainer_step(tr->t));
                    double now = ftl_now();
                    st = ftl_fit_run_step(tr->t, &tr->fr, &chunk.batches[j],
                                          dropout > 0 ? chunk.dropped + (size_t)j * rows * (size_t)r->dim : NULL,
                                          now - chunk.fetch_seconds[j] / live, now);
                }
                if (st != FTL_OK) st = ftl_fail_context(st, "trial %d", stack->trials[k] + 1);
                tr->seconds += ftl_now() - k0 + shared_s;
            }
        }
        if (st == FTL_OK) st = end_epoch(sh, stack, &train, &live);
    }
    if (st == FTL_OK) st = save_positions(sh, stack, &train);
    ftl_head_stack_free(side_by_side);
    free(heads), free(counts), free(members);
    chunk_free(&chunk);
    if (r->have_val_store) file_order_source_free(&vs);
    if (r->have_val_flipped) file_order_source_free(&vms);
    global_order_source_free(&gs);
    return st;
}

void *sweep_worker_main(void *arg) {
    sweep_shared *sh = arg;
    if (sh->caller_only) ftl_pool_set_caller_only(true);
    for (;;) {
        int i = atomic_fetch_add(&sh->next_stack, 1);
        if (i >= sh->stack_count || atomic_load(&sh->failed)) break;
        ftl_status st = run_stack(sh, &sh->stacks[i]);
        if (st != FTL_OK) sweep_record_error(sh, st);
    }
    if (sh->caller_only) ftl_pool_set_caller_only(false);
    return NULL;
}
