/* ftl sweep's runner: many `ftl train` runs of the head on features embedded once.
 *
 * Trials that share the batch size and dropout rate (and, checked, every other setting but the
 * optimizer's) see the same batches in the same order and the same dropout masks. A stack of them
 * takes each chunk of batches once from the feature store, draws the chunk's masks once, then runs
 * each of its trials through the chunk's steps in turn; within a chunk a trial's weights and
 * optimizer state stay in the cache for its steps (at 2048 x 257 one trial's blocks are ~8 MB, so
 * stepping every trial on every batch would stream them all from memory each step). Stacks run at
 * once on the worker threads, each trial's arithmetic on its own thread. Every trial goes through
 * ftl_trainer_fit's own steps (ftl_fit_run_*), so its epochs, metrics, weights, log and model
 * equal `ftl train` alone with its settings, bit for bit: nothing is approximated.
 *
 * The sweep runs in phases up to each rung of successive halving (one phase without it): trials
 * persist between phases and the stacks are formed afresh from the trials still training, grouped
 * by (batch, dropout, epoch), their batch order continued from where it stopped. Each trial's
 * epoch-end checkpoint, model and result file make the sweep resumable after a kill. */
#include "ftl/sweep.h"
#include "pipeline/sweep_internal.h"
#include "nn/device_caps.h"
#include "pipeline/train_checks.h"
#include "pipeline/train_paths.h"
#include "pipeline/train_run.h"
#include "train/pool.h"
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/timing.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ftl_sweep_run_options_init(ftl_sweep_run_options *o) {
    memset(o, 0, sizeof *o);
}

/* Field by field: the struct's padding bytes are whatever the parser's copies left there. */
static bool same_early_stopping(const ftl_early_stopping_config *a, const ftl_early_stopping_config *b) {
    bool same_baseline = a->baseline == b->baseline || (isnan(a->baseline) && isnan(b->baseline));
    return a->stop == b->stop && a->monitor == b->monitor && a->mode == b->mode && a->patience == b->patience &&
           a->min_delta == b->min_delta && same_baseline && a->restore_best == b->restore_best;
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
                 !same_early_stopping(&f->early_stopping, &g->early_stopping) ||
                 f->lr_scaling != g->lr_scaling || f->base_batch != g->base_batch)
            reason = "the trials differ in more than the head's settings (batch, dropout, optimizer, lr, momentum, "
                     "weight decay, warmup, label smoothing, lr schedule)";
    }
    if (!reason && count > 0) {
        ftl_device d;
        if (ftl_device_select(trials[0].embed.device, -1, &d) != FTL_OK || nn_device_caps_of(d.kind)->gpu)
            reason = "the head would train on a GPU";
    }
    if (why && why_size) snprintf(why, why_size, "%s", reason ? reason : "");
    return reason == NULL;
}

/* ---------------------------------------------------------------- trials, stacks, workers */

static bool same_group(const sweep_shared *sh, int a, int b) {
    const ftl_fit_config *x = &sh->options[a].fit, *y = &sh->options[b].fit;
    return x->batch_size == y->batch_size && x->dropout == y->dropout && sh->trials[a].epoch == sh->trials[b].epoch;
}

static void free_stacks(sweep_shared *sh) {
    for (int i = 0; i < sh->stack_count; i++) free(sh->stacks[i].trials);
    free(sh->stacks);
    sh->stacks = NULL;
    sh->stack_count = 0;
}

/* This phase's stacks: the trials still training, grouped by batch size, dropout and epoch, at most
 * stack_size each, split further until every worker has one; the largest first. */
static void build_stacks(sweep_shared *sh, int stack_size, int workers) {
    int count = sh->trial_count;
    sweep_stack *stacks = ftl_xcalloc((size_t)count, sizeof *stacks);
    int n = 0;
    bool *taken = ftl_xcalloc((size_t)count, sizeof *taken);
    int me = ftl_dist_rank(sh->col);
    for (int i = 0; i < count; i++) {
        if (taken[i] || sh->trials[i].ended || sh->owner[i] != me) continue;
        int members = 0;
        int *list = ftl_xcalloc((size_t)count, sizeof *list);
        for (int j = i; j < count; j++)
            if (!taken[j] && !sh->trials[j].ended && sh->owner[j] == me && same_group(sh, i, j)) {
                list[members++] = j;
                taken[j] = true;
            }
        int parts = (members + stack_size - 1) / stack_size;
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
        if (n == 0 || n >= workers || stacks[big].count < 2) break;
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
    sh->stacks = stacks;
    sh->stack_count = n;
}

/* Successive halving's rungs for E epochs and rate eta: E / eta^k rounded down (at least 1), k from
 * the largest that leaves a rung >= 1 down to 0, without repeats; one rung (E) without halving. */
static int halving_rungs(int64_t epochs, int eta, int64_t *rungs, int capacity) {
    int n = 0;
    if (eta < 2) {
        rungs[n++] = epochs;
        return n;
    }
    int64_t scale = 1;
    int k = 0;
    while (scale * eta <= epochs && k < capacity - 1) scale *= eta, k++;
    for (; scale >= 1; scale /= eta) {
        int64_t e = epochs / scale < 1 ? 1 : epochs / scale;
        if (n == 0 || e > rungs[n - 1]) rungs[n++] = e;
        if (scale == 1) break;
    }
    return n;
}

/* After rung `epoch`: of the trials that reached it still training (their score: the monitored
 * metric's best by the rung), only the best floor(n / eta) (at least one) go on; the others end here, as halted. Ties:
 * the earlier trial. After a resume the trials halted here before the interruption count again, with
 * the score they ended with, so the same trials go on. */
static ftl_status halve(sweep_shared *sh, int eta, int64_t epoch) {
    int n = 0, count = sh->trial_count, me = ftl_dist_rank(sh->col);
    int *ranked = ftl_xcalloc((size_t)count, sizeof *ranked);
    double *score = ftl_xcalloc((size_t)count * 2, sizeof *score), *in_set = score + count;
    for (int i = 0; i < count; i++) { /* each trial's rank says its part; the others add 0 */
        const sweep_trial *tr = &sh->trials[i];
        if (sh->owner[i] != me) continue;
        if (!tr->ended && tr->t && tr->epoch >= epoch) score[i] = sweep_score_at(tr->t, epoch), in_set[i] = 1;
        else if (tr->ended && sh->results[i].halted_at == epoch) score[i] = sh->results[i].score, in_set[i] = 1;
    }
    ftl_dist_set_context(sh->col, -1, "the successive halving's ranking");
    ftl_status rs = ftl_dist_allreduce_f64(sh->col, score, (size_t)count * 2);
    if (rs != FTL_OK) {
        free(ranked), free(score);
        return rs;
    }
    for (int i = 0; i < count; i++)
        if (in_set[i] > 0.5) ranked[n++] = i;
    for (int i = 1; i < n; i++) /* by score, descending; stable */
        for (int j = i; j > 0 && score[ranked[j]] > score[ranked[j - 1]]; j--) {
            int tmp = ranked[j];
            ranked[j] = ranked[j - 1];
            ranked[j - 1] = tmp;
        }
    int keep = n / eta > 0 ? n / eta : 1; /* floor(n / eta), as Hyperband's successive halving keeps */
    ftl_status st = FTL_OK;
    for (int i = keep; i < n && st == FTL_OK; i++) {
        sweep_trial *tr = &sh->trials[ranked[i]];
        if (tr->ended || sh->owner[ranked[i]] != me) continue;
        if (tr->epoch > epoch) { /* cannot happen: the ranking is a function of what the files record */
            st = ftl_fail(FTL_E_INTERNAL, "trial %d went past rung %lld but ranks below it", ranked[i] + 1, (long long)epoch);
            break;
        }
        tr->t->finished = true; /* ends as early stopping would: its best weights restored, its model written */
        st = sweep_finish_trial(sh, ranked[i], epoch);
    }
    if (sh->ro->progress && n > 0 && me == 0) {
        fprintf(sh->ro->progress, "sweep: rung at epoch %lld: %d of %d trials go on\n", (long long)epoch, keep, n);
        fflush(sh->ro->progress);
    }
    free(ranked), free(score);
    return st;
}

/* Under mpirun every rank trains whole trials, so every rank needs every row: each embedded (or
 * found in the cache) its share, and the shares are gathered in rank order into one store. */
static ftl_status gather_store(const ftl_collectives *col, feature_store *store, int64_t total, int64_t dim) {
    int64_t rows = store->end - store->begin;
    uint8_t *features = NULL, *labels = NULL;
    size_t *sizes = ftl_xcalloc((size_t)ftl_dist_size(col), sizeof *sizes);
    ftl_status st = ftl_dist_allgather(col, store->features, (size_t)(rows * dim) * sizeof(float), &features, sizes);
    size_t got = 0;
    for (int i = 0; i < ftl_dist_size(col); i++) got += sizes[i];
    if (st == FTL_OK && got != (size_t)(total * dim) * sizeof(float))
        st = ftl_fail(FTL_E_INTERNAL, "the ranks' features add up to %zu bytes, not %lld rows", got, (long long)total);
    if (st == FTL_OK) st = ftl_dist_allgather(col, store->labels, (size_t)rows * sizeof(int32_t), &labels, sizes);
    free(sizes);
    if (st != FTL_OK) {
        free(features), free(labels);
        return st;
    }
    feature_store_close(store);
    store->begin = 0;
    store->end = total;
    store->dim = dim;
    store->in_memory = true;
    store->features = (float *)features;
    store->labels = (int32_t *)labels;
    return FTL_OK;
}

/* Which rank trains each trial: the trials grouped as the first phase's stacks are (batch size and
 * dropout, at most stack_size, in the trials' order), the largest stack to the least loaded rank.
 * It depends on the trials and the rank count only, so a resume finds each trial where it was. */
static void assign_owners(const ftl_train_options *trials, int count, int stack_size, int ranks, int *owner) {
    int *group = ftl_xcalloc((size_t)count, sizeof *group), *size = ftl_xcalloc((size_t)count, sizeof *size);
    int *load = ftl_xcalloc((size_t)ranks, sizeof *load), stacks = 0;
    bool *taken = ftl_xcalloc((size_t)count, sizeof *taken);
    for (int i = 0; i < count; i++) {
        if (taken[i]) continue;
        int members = 0;
        for (int j = i; j < count; j++)
            if (!taken[j] && trials[j].fit.batch_size == trials[i].fit.batch_size && trials[j].fit.dropout == trials[i].fit.dropout)
                members++;
        int parts = (members + stack_size - 1) / stack_size, at = 0;
        for (int j = i; j < count; j++)
            if (!taken[j] && trials[j].fit.batch_size == trials[i].fit.batch_size && trials[j].fit.dropout == trials[i].fit.dropout) {
                taken[j] = true;
                int part = at++ * parts / members;
                group[j] = stacks + part;
                size[stacks + part]++;
            }
        stacks += parts;
    }
    int *rank_of = ftl_xcalloc((size_t)(stacks ? stacks : 1), sizeof *rank_of);
    bool *placed = ftl_xcalloc((size_t)(stacks ? stacks : 1), sizeof *placed);
    for (int k = 0; k < stacks; k++) {
        int big = -1, least = 0;
        for (int g = 0; g < stacks; g++)
            if (!placed[g] && (big < 0 || size[g] > size[big])) big = g;
        for (int q = 1; q < ranks; q++)
            if (load[q] < load[least]) least = q;
        placed[big] = true;
        rank_of[big] = least;
        load[least] += size[big];
    }
    for (int i = 0; i < count; i++) owner[i] = rank_of[group[i]];
    free(group), free(size), free(load), free(taken), free(rank_of), free(placed);
}

/* --resume: the first trial checkpoint this host has, against the run, before the features are made
 * (the trials share the run's data, backbone and preprocessing). */
static ftl_status check_resumed_trials(const ftl_train_options *trials, int count, const train_run *r) {
    for (int i = 0; i < count; i++) {
        char *checkpoint = sweep_trial_file(trials[i].out_path, ".ckpt");
        bool found = ftl_path_exists(checkpoint);
        ftl_status st = found ? train_check_checkpoint_matches(&trials[i], r, checkpoint) : FTL_OK;
        free(checkpoint);
        if (found) return st;
    }
    return FTL_OK;
}

/* Whether any rank failed (every rank learns it; the one that failed keeps its message). */
static ftl_status agree(const ftl_collectives *col, ftl_status st, const char *what) {
    if (!ftl_dist_active(col)) return st;
    char kept[2048];
    snprintf(kept, sizeof kept, "%s", ftl_last_error());
    bool any = false;
    ftl_dist_set_context(col, -1, what);
    ftl_status as = ftl_dist_any_failed(col, st != FTL_OK, &any);
    if (st != FTL_OK) return ftl_fail(st, "%s", kept);
    if (as != FTL_OK) return as;
    return any ? ftl_fail(FTL_E_INTERRUPTED, "another rank failed %s (its message says why)", what) : FTL_OK;
}

/* The trials' options, refused before any work as ftl train (and ftl_trainer_init) would refuse them. */
static ftl_status check_trials(const ftl_train_options *trials, int count, const ftl_sweep_run_options *ro) {
    char why[256];
    if (!ftl_sweep_stackable(trials, count, why, sizeof why))
        return ftl_fail(FTL_E_UNSUPPORTED, "these trials cannot share the cached features: %s", why);
    if (ro->halving_eta == 1 || ro->halving_eta < 0)
        return ftl_fail(FTL_E_INVALID_ARG, "--halving %d: the rate must be at least 2", ro->halving_eta);
    for (int i = 0; i < count; i++) {
        const ftl_train_options *o = &trials[i];
        if (!o->train_path || !o->out_path || !o->embed.backbone_path)
            return ftl_fail(FTL_E_INVALID_ARG, "trial %d needs a training dataset, a backbone and an output path", i + 1);
        char *result_path = sweep_trial_file(o->out_path, ".result.json");
        bool done_before = ro->resume && ftl_path_exists(result_path);
        free(result_path);
        if (!done_before && ftl_path_exists(o->out_path) && !o->overwrite && !ro->resume)
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
    FTL_TRY(train_check_folder_of(trials[0].out_path, "trial model")); /* every rank writes its trials */
    return FTL_OK;
}

/* --resume: the trials with a checkpoint are opened first (their epochs decide their stacks), each
 * with its batch order where the checkpoint left it. */
static ftl_status open_resumed_trials(sweep_shared *sh, int me) {
    train_run *r = sh->run;
    ftl_status st = FTL_OK;
    for (int i = 0; i < sh->trial_count && st == FTL_OK; i++) {
        if (sh->owner[i] != me || sh->trials[i].ended || !ftl_path_exists(sh->trials[i].checkpoint)) continue;
        const char *src[1] = {sh->options[i].train_path};
        ftl_loader_options order = train_run_order(&sh->options[i], src);
        global_order_source gs;
        st = global_order_source_init(&gs, &order, &r->train_store, r->have_train_flipped ? &r->train_flipped : NULL,
                                      sh->options[i].fit.seed, sh->train_rows, 1);
        ftl_batch_source train = global_order_source_as_batch_source(&gs);
        file_order_source vs;
        ftl_batch_source val = {0};
        if (r->have_val_store) {
            file_order_source_init(&vs, &r->val_store);
            val = file_order_source_as_batch_source(&vs);
        }
        file_order_source vms;
        ftl_batch_source val_m = {0};
        if (r->have_val_flipped) {
            file_order_source_init(&vms, &r->val_flipped);
            val_m = file_order_source_as_batch_source(&vms);
        }
        if (st == FTL_OK)
            st = sweep_open_trial(sh, i, &train, r->have_val_store ? &val : NULL, r->have_val_flipped ? &val_m : NULL);
        if (st != FTL_OK) st = ftl_fail_context(st, "resuming trial %d from %s", i + 1, sh->trials[i].checkpoint);
        if (sh->trials[i].open) sweep_trial_sources(sh, i, NULL, NULL, NULL);
        if (r->have_val_store) file_order_source_free(&vs);
        if (r->have_val_flipped) file_order_source_free(&vms);
        global_order_source_free(&gs);
    }
    return st;
}

/* One phase: the trials still training, in stacks formed afresh, up to epoch `rung` on the workers. */
static ftl_status train_to_rung(sweep_shared *sh, int stack_size, int workers, int64_t rung) {
    sh->until_epoch = rung;
    build_stacks(sh, stack_size, workers);
    int phase_workers = workers < sh->stack_count ? workers : sh->stack_count;
    sh->caller_only = phase_workers > 1;
    if (sh->ro->progress && sh->stack_count > 0 && ftl_dist_rank(sh->col) == 0) {
        int live = 0, together = 0;
        for (int i = 0; i < sh->stack_count; i++) live += sh->stacks[i].count, together += sweep_trains_side_by_side(sh, &sh->stacks[i]);
        fprintf(sh->ro->progress, "sweep: %d trials in %d stacks (%d side by side, one GEMM per step), %d at a time, up to epoch %lld%s\n",
                live, sh->stack_count, together, phase_workers, (long long)rung, ftl_dist_size(sh->col) > 1 ? " (rank 0's)" : "");
        fflush(sh->ro->progress);
    }
    atomic_store(&sh->next_stack, 0);
    ftl_dist_phase_begin(sh->col, "training its trials"); /* the ranks meet again at the rung */
    pthread_t *threads = ftl_xcalloc((size_t)(phase_workers > 0 ? phase_workers : 1), sizeof *threads);
    int started = 0;
    for (int w = 1; w < phase_workers; w++)
        if (pthread_create(&threads[started + 1], NULL, sweep_worker_main, sh) == 0) started++;
    if (phase_workers > 0) sweep_worker_main(sh);
    for (int w = 1; w <= started; w++) pthread_join(threads[w], NULL);
    free(threads);
    free_stacks(sh);
    ftl_dist_phase_end(sh->col);
    return sh->status != FTL_OK ? ftl_fail(sh->status, "%s", sh->error) : FTL_OK;
}

ftl_status ftl_sweep_run(const ftl_train_options *trials, int count, const ftl_sweep_run_options *ro,
                         ftl_sweep_trial_result *results) {
    ftl_sweep_run_options defaults;
    ftl_sweep_run_options_init(&defaults);
    if (!ro) ro = &defaults;
    if (count < 1) return ftl_fail(FTL_E_INVALID_ARG, "a sweep needs at least one trial");
    memset(results, 0, (size_t)count * sizeof *results);
    FTL_TRY(check_trials(trials, count, ro));
    train_run r;
    memset(&r, 0, sizeof r);
    /* The shared run: phase 1 of fine-tuning has its features through the cut; val's mirror images
     * are cached when any trial scores with --tta flip. */
    ftl_train_options shared = trials[0];
    if (ro->through_cut) shared.fine_tune = *ro->through_cut;
    for (int i = 0; i < count; i++) shared.tta_flip |= trials[i].tta_flip;
    const ftl_train_options *o = &shared;
    train_run bottom; /* the cut's frozen bottom and its boundary rows, with through_cut */
    memset(&bottom, 0, sizeof bottom);
    ftl_train_options calibrated;
    ftl_nn_int8_scales *own_scales = NULL;
    ftl_status st = train_run_prepare(&r, &o, &calibrated, &own_scales);
    ftl_train_summary summary;
    memset(&summary, 0, sizeof summary);
    if (st == FTL_OK && nn_device_caps_of(ftl_model_get_info(r.backbone)->device_kind)->gpu)
        st = ftl_fail(FTL_E_UNSUPPORTED, "the sweep trains its heads on the CPU: give --device cpu");
    if (st == FTL_OK && ro->resume) st = check_resumed_trials(trials, count, &r);
    if (ro->resume) st = agree(&trials[0].fit.collectives, st, "checking the trials' checkpoints");
    if (st == FTL_OK && !ro->through_cut) st = train_run_setup_cached(&r, o, &summary);
    if (st == FTL_OK && ro->through_cut) {
        st = train_run_setup_through_cut(&r, o, &bottom, &summary);
        if (st == FTL_OK && !r.have_train_store)
            st = ftl_fail(FTL_E_UNSUPPORTED, "phase 1's features do not fit in memory beside the boundary rows: raise "
                          "--max-memory for --fine-tune-top");
    }
    /* Under mpirun the trials are spread over the ranks, each trained whole by one: every rank
     * embedded its share of the rows, and gets all of them. */
    const ftl_collectives *col = &trials[0].fit.collectives;
    int me = ftl_dist_rank(col), ranks = ftl_dist_size(col);
    st = agree(col, st, "preparing the features");
    if (st == FTL_OK && ranks > 1 && !summary.features_in_memory)
        st = ftl_fail(FTL_E_UNSUPPORTED, "under mpirun every rank of a sweep holds all the features, and this rank's share "
                      "already exceeds the memory limit: raise --max-memory, or run the sweep in one process");
    st = agree(col, st, "checking the features' size");
    if (st == FTL_OK && ranks > 1) {
        ftl_dist_phase_begin(col, "gathering the features");
        st = gather_store(col, &r.train_store, summary.train_rows, r.dim);
        if (st == FTL_OK && r.have_train_flipped) st = gather_store(col, &r.train_flipped, summary.train_rows, r.dim);
        if (st == FTL_OK && r.have_val_store) st = gather_store(col, &r.val_store, summary.val_rows, r.dim);
        if (st == FTL_OK && r.have_val_flipped) st = gather_store(col, &r.val_flipped, summary.val_rows, r.dim);
        ftl_dist_phase_end(col);
    }
    ftl_train_options *per = ftl_xcalloc((size_t)count, sizeof *per);
    sweep_trial *state = ftl_xcalloc((size_t)count, sizeof *state);
    for (int i = 0; i < count; i++) {
        per[i] = trials[i];
        per[i].embed.int8_scales = o->embed.int8_scales; /* the one calibration */
        per[i].fit.collectives = (ftl_collectives){.rank = 0, .world_size = 1}; /* a trial trains on one rank */
        state[i].checkpoint = sweep_trial_file(trials[i].out_path, ".ckpt");
        state[i].result_path = sweep_trial_file(trials[i].out_path, ".result.json");
    }
    int stack_size = ro->stack_size > 0 ? ro->stack_size : 16;
    int *owner = ftl_xcalloc((size_t)count, sizeof *owner);
    assign_owners(per, count, stack_size, ranks, owner);
    sweep_shared sh = {.run = &r, .options = per, .ro = ro, .results = results, .trials = state, .trial_count = count,
                       .train_rows = summary.train_rows, .owner = owner, .col = col};
    pthread_mutex_init(&sh.lock, NULL);
    train_run_meta_init(&sh.meta, &r, o);
    int64_t resumed_done = 0;
    for (int i = 0; i < count && st == FTL_OK && ro->resume; i++)
        if (owner[i] == me && ftl_path_exists(state[i].result_path)) {
            st = sweep_read_result(state[i].result_path, &results[i]);
            state[i].ended = st == FTL_OK;
            resumed_done += state[i].ended;
        }
    char *log_part = ro->log_path ? ftl_format("%s.rank-%d", ro->log_path, me) : NULL;
    if (st == FTL_OK && ro->log_path) { /* rank 0 writes the log; the others a part of it, merged at the end */
        const char *path = me == 0 ? ro->log_path : log_part;
        sh.log = fopen(path, ro->resume ? "a" : "w");
        if (!sh.log) st = ftl_fail(FTL_E_IO, "cannot open the sweep log %s: %s", path, strerror(errno));
        if (st == FTL_OK && ro->log_record && me == 0) st = sweep_log_line(&sh, ro->log_record);
    }
    st = agree(col, st, "opening the sweep's files");
    if (st == FTL_OK && ranks > 1) st = ftl_dist_allreduce_i64(col, &resumed_done, 1);
    int64_t rungs[64];
    int rung_count = halving_rungs(trials[0].fit.epochs, ro->halving_eta, rungs, 64);
    int workers = ro->threads > 0 ? ro->threads : ftl_train_threads();
    if (!summary.features_in_memory) workers = 1; /* a streamed store reads through one cache of row groups */
    if (st == FTL_OK && ro->progress && me == 0) {
        fprintf(ro->progress, "sweep: %d trials (stacked by batch size and dropout, %d threads%s); features %s%s",
                count, workers, ranks > 1 ? " per rank, spread over the ranks" : "",
                summary.train_cache_reused ? "from the cache" : "embedded once", resumed_done ? "" : "\n");
        if (resumed_done) fprintf(ro->progress, "; %lld trials done before the resume\n", (long long)resumed_done);
        if (rung_count > 1) {
            fprintf(ro->progress, "sweep: successive halving (eta %d): rungs at epochs", ro->halving_eta);
            for (int i = 0; i < rung_count; i++) fprintf(ro->progress, " %lld", (long long)rungs[i]);
            fprintf(ro->progress, "\n");
        }
        fflush(ro->progress);
    }
    /* On resume the trials with a checkpoint are opened first: their epochs decide their stacks. */
    if (st == FTL_OK && ro->resume) st = open_resumed_trials(&sh, me);
    st = agree(col, st, "resuming the trials");
    for (int g = 0; g < rung_count && st == FTL_OK; g++) {
        st = train_to_rung(&sh, stack_size, workers, rungs[g]);
        st = agree(col, st, "training the trials");
        if (st == FTL_OK && g + 1 < rung_count) st = halve(&sh, ro->halving_eta, rungs[g]);
        st = agree(col, st, "ending the trials halved at the rung");
    }
    if (st == FTL_OK) st = sweep_share_results(&sh);
    if (st == FTL_OK && sh.log && fflush(sh.log) != 0)
        st = ftl_fail(FTL_E_IO, "cannot write the sweep log %s: %s", me == 0 ? ro->log_path : log_part, strerror(errno));
    st = agree(col, st, "writing the sweep's log");
    if (st == FTL_OK) st = sweep_merge_logs(&sh, log_part);
    for (int i = 0; i < count; i++) { /* trials a failure left open: their logs closed, their checkpoints kept */
        if (state[i].open) {
            char kept[2048];
            snprintf(kept, sizeof kept, "%s", ftl_last_error());
            ftl_fit_run_close(state[i].t, &state[i].fr, FTL_E_INTERRUPTED, NULL);
            ftl_fail(st, "%s", kept);
        }
        ftl_trainer_free(state[i].t);
        free(state[i].position), free(state[i].checkpoint), free(state[i].result_path);
    }
    if (sh.log && fclose(sh.log) != 0 && st == FTL_OK)
        st = ftl_fail(FTL_E_IO, "cannot write the sweep log %s: %s", ro->log_path, strerror(errno));
    free(log_part), free(owner);
    train_run_meta_free(&sh.meta);
    pthread_mutex_destroy(&sh.lock);
    free(per), free(state);
    train_run_free(&bottom);
    train_run_free(&r);
    ftl_nn_int8_scales_free(own_scales);
    return st;
}

ftl_status ftl_sweep_copy_model(const ftl_collectives *col, const char *model_path, int owner, const char *to,
                                bool replace) {
    int me = ftl_dist_rank(col);
    uint8_t *data = NULL;
    size_t size = 0;
    ftl_status st = FTL_OK;
    if (me == owner) st = ftl_read_file(model_path, &data, &size);
    if (st == FTL_OK && me == owner) { /* a resumed sweep's trial model may have been damaged since it was written */
        ftl_safetensors *model = NULL;
        st = ftl_safetensors_open_buffer(data, size, model_path, &model);
        if (st == FTL_OK) st = ftl_safetensors_verify_all(model);
        ftl_safetensors_close(model);
    }
    if (ftl_dist_active(col)) {
        st = agree(col, st, "reading the best trial's model");
        if (st == FTL_OK) st = ftl_dist_broadcast_blob(col, &data, &size, owner);
    }
    if (st == FTL_OK && me == 0) st = ftl_output_write(to, data, size, replace);
    free(data);
    return st;
}
