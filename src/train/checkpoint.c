/* Checkpoints: the whole training state in one safetensors file, enough to resume bit-identically.
 *
 * tensors   head.kernel F32 [D, C], head.bias F32 [C]         (same names as MODEL.ftl)
 *           optimizer.exp_avg / optimizer.exp_avg_sq F32 [P]   (nadam, adam: m and v over the
 *           optimizer.momentum_buffer F32 [P]                   parameter block, sgd: buffer)
 *           optimizer.step I64 [], optimizer.mu_product F64 []
 *           top.params F32 [P - D*C - C]                        (fine-tuning: the backbone's trained
 *                                                                values, after the head's in the block)
 *           early_stopping.best_params F32 [P]                  (when weights are kept)
 *           loader.position U8 [n]                              (the batch source's opaque blob:
 *                                                                one for a global-order source,
 *           loader.position.rank<R> U8 [n]                       else one per rank)
 * The dropout draws need no state: they are keyed by (seed, step, row position).
 * metadata  ftl.format = ftl-checkpoint-2, ftl.version, ftl.feature_dim, the caller's
 *           checkpoint_meta (backbone, classes, args), ftl.optimizer, ftl.train_state (epoch, step,
 *           early-stopping scalars; doubles printed with 17 digits, so they read back exactly),
 *           ftl.history (the epoch records), ftl.checkpoints (files written, for --keep-last),
 *           ftl.checkpoints_to_delete (--keep-last's deletions still owed when it was written: a
 *           resume finishes them), ftl.run_id (the run's id: only its own files are deleted;
 *           checkpoint_owner.c). */
#include "ftl/train.h"
#include "ftl/dist.h"
#include "train/gemm.h"
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Metadata keys that identify what the head was trained on; a resume must match them. */
static const char *const identity_keys[] = {FTL_MODEL_META_BACKBONE_SHA256, FTL_MODEL_META_CLASSES,
                                            FTL_MODEL_META_FEATURE_TENSOR, FTL_MODEL_META_INPUT_SIZE,
                                            FTL_MODEL_META_INPUT_SCALING, FTL_MODEL_META_FINE_TUNE_CUT,
                                            FTL_MODEL_META_BACKBONE_IDENTITY, "ftl.augment", FTL_MODEL_META_TTA};

/* Settings a resume may change, with a warning, as the run then cannot be bit-identical: how the
 * features were computed (they differ only in rounding, or bf16 vs fp32) and the data order.
 * Checkpoints from before they were recorded lack them. */
static const char *const soft_identity_keys[] = {"ftl.precision", "ftl.conv_algorithm", "ftl.shuffle_buffer"};

static const char *slot_name(const ftl_optimizer *opt, int slot) {
    if (opt->config.kind == FTL_OPTIMIZER_SGD) return "optimizer.momentum_buffer";
    return slot == 0 ? "optimizer.exp_avg" : "optimizer.exp_avg_sq";
}

static void append_optimizer_json(ftl_strbuf *b, const ftl_optimizer_config *c) {
    ftl_strbuf_printf(b, "{\"kind\":\"%s\",\"lr\":", ftl_optimizer_kind_name(c->kind));
    const char *names[] = {"beta1", "beta2", "eps", "momentum_decay", "momentum", "weight_decay"};
    double values[] = {c->beta1, c->beta2, c->eps, c->momentum_decay, c->momentum, c->weight_decay};
    ftl_json_append_number(b, c->lr);
    for (int i = 0; i < 6; i++) {
        ftl_strbuf_printf(b, ",\"%s\":", names[i]);
        ftl_json_append_number(b, values[i]);
    }
    ftl_strbuf_printf(b, ",\"nesterov\":%s}", c->nesterov ? "true" : "false");
}

static void append_state_json(ftl_strbuf *b, const ftl_trainer *t) {
    const ftl_early_stopping *es = &t->es;
    int ranks = ftl_dist_size(&t->config.collectives);
    ftl_strbuf_printf(b, "{\"epoch\":%lld,\"step\":%lld,\"steps_per_epoch\":%lld,\"finished\":%s,\"batch_size\":%lld,"
                         "\"world_size\":%d,\"global_batch\":%lld,\"seed\":\"%llu\",\"dropout\":",
                      (long long)t->epoch, (long long)t->step, (long long)t->steps_per_epoch,
                      t->finished ? "true" : "false", (long long)t->config.batch_size, ranks,
                      (long long)(t->config.batch_size * ranks), (unsigned long long)t->config.seed);
    ftl_json_append_number(b, t->config.dropout);
    ftl_strbuf_printf(b, ",\"lr_scaling\":%d,\"base_batch\":%lld,\"warmup_epochs\":", (int)t->config.lr_scaling,
                      (long long)t->config.base_batch);
    ftl_json_append_number(b, t->config.warmup_epochs);
    ftl_strbuf_printf(b, ",\"warmup_start_factor\":");
    ftl_json_append_number(b, t->config.warmup_start_factor);
    char schedule[96];
    ftl_lr_decay_describe(&t->config.lr_decay, schedule, sizeof schedule);
    ftl_strbuf_printf(b, ",\"label_smoothing\":");
    ftl_json_append_number(b, t->config.label_smoothing);
    /* plateau's state, so a resume reduces the learning rate exactly when the run would have */
    ftl_strbuf_printf(b, ",\"lr_schedule\":\"%s\",\"plateau\":{\"lr\":", schedule);
    ftl_json_append_number(b, isnan(t->plateau.lr) ? -1.0 : t->plateau.lr);
    ftl_strbuf_printf(b, ",\"has_best\":%s,\"best\":", isnan(t->plateau.best) ? "false" : "true");
    ftl_json_append_number(b, isnan(t->plateau.best) ? 0.0 : t->plateau.best);
    ftl_strbuf_printf(b, ",\"wait\":%d}", t->plateau.wait);
    ftl_strbuf_printf(b, ",\"simd\":\"%s\",\"early_stopping\":{\"monitor\":\"%s\",\"maximize\":%s,\"has_best\":%s,\"best\":",
                      ftl_gemm_isa_name(ftl_gemm_active()), ftl_monitor_name(es->config.monitor),
                      es->maximize ? "true" : "false", es->has_best ? "true" : "false");
    ftl_json_append_number(b, es->has_best ? es->best : 0.0);
    ftl_strbuf_printf(b, ",\"best_epoch\":%lld,\"wait\":%d,\"stopped_epoch\":%lld,\"has_best_params\":%s}}",
                      (long long)es->best_epoch, es->wait, (long long)es->stopped_epoch,
                      es->has_best_params ? "true" : "false");
}

ftl_status ftl_trainer_save_checkpoint(ftl_trainer *t, const char *path, ftl_batch_source *train) {
    const ftl_fit_config *c = &t->config;
    const ftl_collectives *col = &c->collectives;
    int ranks = ftl_dist_size(col), rank = ftl_dist_rank(col);
    /* The data position: one blob when the batch sequence is the same for any rank count, else
     * every rank's, gathered to rank 0 (every rank takes part in that gather). */
    uint8_t *blob = NULL, *all = NULL;
    size_t blob_size = 0;
    ftl_status s = FTL_OK;
    if (train && train->save_position) s = train->save_position(train->ctx, &blob, &blob_size);
    bool per_rank = train && train->save_position && !train->global_order;
    size_t *sizes = ftl_xcalloc((size_t)ranks, sizeof *sizes);
    if (per_rank && ranks > 1) {
        ftl_status g = ftl_dist_gather(col, blob, blob_size, 0, &all, sizes);
        if (s == FTL_OK) s = g;
    }
    /* A checkpoint missing one rank's position could not resume: none is written then. */
    bool any = false;
    ftl_status agree = ftl_dist_any_failed(col, s != FTL_OK, &any);
    if (s == FTL_OK && agree == FTL_OK && any)
        s = ftl_fail(FTL_E_INTERNAL, "another rank could not save its data position (see its message); no checkpoint written");
    if (s == FTL_OK) s = agree;
    if (s != FTL_OK || rank != 0) {
        free(blob);
        free(all);
        free(sizes);
        /* All leave together: the next collective may be the GPU head's NCCL sum, whose watch has
         * a flat timeout and cannot see that rank 0 is still writing. */
        if (s == FTL_OK && ranks > 1) s = ftl_dist_barrier(col);
        return s;
    }
    ftl_dist_phase_begin(col, "writing a checkpoint");
    /* Test hook (tests/e2e/test_dist.sh): a slow disk, longer than the stall timeout, must not
     * trip the other ranks' stall inspector. */
    const char *slow = getenv("FTL_TEST_CHECKPOINT_SLEEP_S");
    if (slow && atof(slow) > 0) usleep((useconds_t)(atof(slow) * 1e6));
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    for (size_t i = 0; i < c->checkpoint_meta_count; i++)
        ftl_safetensors_writer_set_metadata(w, c->checkpoint_meta[i].key, c->checkpoint_meta[i].value);
    char dim[32];
    snprintf(dim, sizeof dim, "%lld", (long long)t->head.dim);
    ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_FORMAT, FTL_CHECKPOINT_FORMAT);
    ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_VERSION, FTL_VERSION);
    ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_FEATURE_DIM, dim);
    ftl_strbuf b = {0};
    append_optimizer_json(&b, &t->opt.config);
    ftl_safetensors_writer_set_metadata(w, "ftl.optimizer", b.data);
    ftl_strbuf_free(&b);
    append_state_json(&b, t);
    ftl_safetensors_writer_set_metadata(w, "ftl.train_state", b.data);
    ftl_strbuf_free(&b);
    ftl_strbuf_append(&b, "[", 1);
    for (size_t i = 0; i < t->history_count; i++) {
        if (i) ftl_strbuf_append(&b, ",", 1);
        ftl_train_append_epoch_json(&b, &t->history[i]);
    }
    ftl_strbuf_append(&b, "]", 1);
    ftl_safetensors_writer_set_metadata(w, "ftl.history", b.data);
    ftl_strbuf_free(&b);
    ftl_strbuf_append(&b, "[", 1);
    for (size_t i = 0; i < t->checkpoint_count; i++) {
        if (i) ftl_strbuf_append(&b, ",", 1);
        ftl_json_append_string(&b, t->checkpoints[i]);
    }
    ftl_strbuf_append(&b, "]", 1);
    ftl_safetensors_writer_set_metadata(w, "ftl.checkpoints", b.data);
    ftl_strbuf_free(&b);
    ftl_strbuf_append(&b, "[", 1);
    for (size_t i = 0; i < t->to_delete_count; i++) {
        if (i) ftl_strbuf_append(&b, ",", 1);
        ftl_json_append_string(&b, t->to_delete[i]);
    }
    ftl_strbuf_append(&b, "]", 1);
    ftl_safetensors_writer_set_metadata(w, FTL_CHECKPOINT_META_TO_DELETE, b.data);
    ftl_strbuf_free(&b);
    ftl_safetensors_writer_set_metadata(w, FTL_CHECKPOINT_META_RUN_ID, t->run_id);

    int64_t kshape[2] = {t->head.dim, t->head.classes}, bshape[1] = {t->head.classes};
    int64_t pshape[1] = {(int64_t)t->param_count};
    int64_t tshape[1] = {(int64_t)(t->param_count - t->head.param_count)};
    ftl_safetensors_writer_add(w, "head.kernel", FTL_DTYPE_F32, 2, kshape, t->head.kernel);
    ftl_safetensors_writer_add(w, "head.bias", FTL_DTYPE_F32, 1, bshape, t->head.bias);
    if (c->top) ftl_safetensors_writer_add(w, "top.params", FTL_DTYPE_F32, 1, tshape, t->params + t->head.param_count);
    for (int slot = 0; slot < t->opt.slot_count; slot++)
        ftl_safetensors_writer_add(w, slot_name(&t->opt, slot), FTL_DTYPE_F32, 1, pshape,
                                   t->opt.state + (size_t)slot * t->opt.param_count);
    ftl_safetensors_writer_add(w, "optimizer.step", FTL_DTYPE_I64, 0, NULL, &t->opt.step);
    ftl_safetensors_writer_add(w, "optimizer.mu_product", FTL_DTYPE_F64, 0, NULL, &t->opt.mu_product);
    if (t->es.has_best_params)
        ftl_safetensors_writer_add(w, "early_stopping.best_params", FTL_DTYPE_F32, 1, pshape, t->es.best_params);
    char world[16];
    snprintf(world, sizeof world, "%d", ranks);
    ftl_safetensors_writer_set_metadata(w, "ftl.world_size", world);
    ftl_safetensors_writer_set_metadata(w, "ftl.position_kind", per_rank ? "per-rank" : "global");
    char names[64][40];
    int64_t bs[64][1];
    if (per_rank && ranks > 64) s = ftl_fail(FTL_E_UNSUPPORTED, "checkpoints of streaming runs hold at most 64 ranks' positions");
    if (s == FTL_OK && train && train->save_position) {
        if (per_rank && ranks > 1) {
            size_t offset = 0;
            for (int r = 0; r < ranks; r++) {
                snprintf(names[r], sizeof names[r], "loader.position.rank%d", r);
                bs[r][0] = (int64_t)sizes[r];
                ftl_safetensors_writer_add(w, names[r], FTL_DTYPE_U8, 1, bs[r], all + offset);
                offset += sizes[r];
            }
        } else {
            bs[0][0] = (int64_t)blob_size;
            ftl_safetensors_writer_add(w, per_rank ? "loader.position.rank0" : "loader.position", FTL_DTYPE_U8, 1, bs[0], blob);
        }
    }
    if (s == FTL_OK) s = ftl_safetensors_writer_write(w, path);
    ftl_dist_phase_end(col);
    free(blob);
    free(all);
    free(sizes);
    ftl_safetensors_writer_free(w);
    if (s == FTL_OK && ranks > 1) s = ftl_dist_barrier(col);
    return s;
}

/* ---------------------------------------------------------------- resume */

static ftl_status compare_classes(const char *path, const char *saved, const char *current) {
    char **a = NULL, **b = NULL;
    size_t na = 0, nb = 0;
    ftl_status s = ftl_train_parse_class_names(saved, path, &a, &na);
    if (s == FTL_OK) s = ftl_train_parse_class_names(current, "this run", &b, &nb);
    if (s == FTL_OK && na != nb)
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it was trained on %zu classes, this dataset has %zu", path,
                     na, nb);
    for (size_t i = 0; s == FTL_OK && i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            s = ftl_fail(FTL_E_INVALID_ARG,
                         "cannot resume from %s: another class set (class %zu is \"%s\" in the checkpoint, \"%s\" here)",
                         path, i, a[i], b[i]);
    ftl_train_free_class_names(a, na);
    ftl_train_free_class_names(b, nb);
    return s;
}

static ftl_status check_identity(const ftl_kv *meta, size_t meta_count, const ftl_safetensors *st, const char *path) {
    for (size_t i = 0; i < sizeof identity_keys / sizeof identity_keys[0]; i++) {
        const char *key = identity_keys[i];
        const char *mine = ftl_train_kv_find(meta, meta_count, key);
        if (!mine) continue;
        const char *saved = ftl_safetensors_metadata(st, key);
        if (!saved && (strcmp(key, "ftl.augment") == 0 || strcmp(key, FTL_MODEL_META_TTA) == 0))
            saved = "none"; /* written before augmentation (or TTA) existed */
        if (!saved)
            return ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it does not record %s, so it cannot be checked "
                            "against this run", path, key);
        if (strcmp(key, FTL_MODEL_META_CLASSES) == 0) {
            FTL_TRY(compare_classes(path, saved, mine));
        } else if (strcmp(saved, mine) != 0) {
            if (strcmp(key, FTL_MODEL_META_BACKBONE_SHA256) == 0) {
                const char *sp = ftl_safetensors_metadata(st, FTL_MODEL_META_BACKBONE_PATH);
                const char *mp = ftl_train_kv_find(meta, meta_count, FTL_MODEL_META_BACKBONE_PATH);
                return ftl_fail(FTL_E_INVALID_ARG,
                                "cannot resume from %s: it was trained on features of another backbone "
                                "(sha256 %.16s... %s, this run: %.16s... %s)",
                                path, saved, sp ? sp : "", mine, mp ? mp : "");
            }
            return ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: %s is \"%s\" in the checkpoint but \"%s\" here",
                            path, key, saved, mine);
        }
    }
    return FTL_OK;
}

/* Settings that may differ, each named in a warning. */
static void warn_soft_identity(const ftl_kv *meta, size_t meta_count, const ftl_safetensors *st, const char *path) {
    for (size_t i = 0; i < sizeof soft_identity_keys / sizeof soft_identity_keys[0]; i++) {
        const char *key = soft_identity_keys[i];
        const char *mine = ftl_train_kv_find(meta, meta_count, key);
        const char *saved = ftl_safetensors_metadata(st, key);
        if (mine && saved && strcmp(saved, mine) != 0)
            ftl_log_warn("resuming from %s: %s was \"%s\", this run uses \"%s\"; the result will not be identical to an "
                         "uninterrupted run", path, key, saved, mine);
    }
}

static bool json_bool(const ftl_json *o, const char *key, bool *out) {
    const ftl_json *v = ftl_json_get(o, key);
    if (!v || v->type != FTL_JSON_BOOL) return false;
    *out = v->boolean;
    return true;
}

/* Appends "name saved -> now" to *diff when a setting the checkpoint recorded differs in this run
 * (absent in older checkpoints: nothing to compare). */
static void note_change(ftl_strbuf *diff, const ftl_json *o, const char *key, const char *name, double now) {
    double saved;
    if (!o || !ftl_json_get_number(o, key, &saved) || saved == now) return;
    ftl_strbuf_printf(diff, "%s%s %.9g -> %.9g", diff->data ? ", " : "", name, saved, now);
}

static void warn_changes(const char *path, ftl_strbuf *diff) {
    if (diff->data)
        ftl_log_warn("%s was trained with other settings (%s): the result will differ from an uninterrupted run", path,
                     diff->data);
    ftl_strbuf_free(diff);
}

static bool json_int(const ftl_json *o, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    double d;
    if (!ftl_json_get_number(o, key, &d) || d != floor(d) || d < (double)lo || d > (double)hi) return false;
    *out = (int64_t)d;
    return true;
}

/* Reads ftl.train_state into the trainer (and the early-stopping scalars). */
static ftl_status read_state(ftl_trainer *t, const ftl_safetensors *st, const char *path) {
    const char *text = ftl_safetensors_metadata(st, "ftl.train_state");
    if (!text) return ftl_fail(FTL_E_FORMAT, "%s: ftl.train_state metadata is missing", path);
    ftl_json *v = NULL;
    ftl_status s = ftl_json_parse(text, strlen(text), &v);
    if (s != FTL_OK) return ftl_fail_context(s, "%s: ftl.train_state", path);
    const ftl_json *es = ftl_json_get(v, "early_stopping");
    int64_t epoch, step, spe, best_epoch, wait, stopped, batch;
    bool finished, has_best, has_best_params;
    double best;
    if (!json_int(v, "epoch", 0, INT32_MAX, &epoch) || !json_int(v, "step", 0, INT64_C(1) << 52, &step) ||
        !json_int(v, "steps_per_epoch", 0, INT64_C(1) << 52, &spe) || !json_bool(v, "finished", &finished) ||
        !json_int(v, "batch_size", 1, INT64_C(1) << 40, &batch) || !es || !json_bool(es, "has_best", &has_best) ||
        !ftl_json_get_number(es, "best", &best) || !json_int(es, "best_epoch", 0, epoch, &best_epoch) ||
        !json_int(es, "wait", 0, INT32_MAX, &wait) || !json_int(es, "stopped_epoch", 0, epoch, &stopped) ||
        !json_bool(es, "has_best_params", &has_best_params)) {
        ftl_json_free(v);
        return ftl_fail(FTL_E_FORMAT, "%s: ftl.train_state is incomplete or out of range", path);
    }
    const char *monitor = ftl_json_get_string(es, "monitor");
    const char *simd = ftl_json_get_string(v, "simd");
    if (monitor && strcmp(monitor, ftl_monitor_name(t->es.config.monitor)) != 0)
        ftl_log_warn("%s tracked %s, this run monitors %s: the best-epoch record starts over", path, monitor,
                     ftl_monitor_name(t->es.config.monitor));
    else {
        t->es.has_best = has_best;
        t->es.best = best;
        t->es.best_epoch = best_epoch;
        t->es.wait = (int)wait;
        t->es.stopped_epoch = stopped;
    }
    int64_t global = batch, ranks = ftl_dist_size(&t->config.collectives);
    if (!json_int(v, "global_batch", 1, INT64_C(1) << 50, &global)) global = batch;
    if (global != t->config.batch_size * ranks)
        ftl_log_warn("%s was trained with a global batch of %lld, resuming with %lld (--batch %lld x %lld ranks): the "
                     "result will differ from an uninterrupted run", path, (long long)global,
                     (long long)(t->config.batch_size * ranks), (long long)t->config.batch_size, (long long)ranks);
    ftl_strbuf diff = {0};
    const char *seed = ftl_json_get_string(v, "seed");
    if (seed && strtoull(seed, NULL, 10) != t->config.seed)
        ftl_strbuf_printf(&diff, "--seed %s -> %llu", seed, (unsigned long long)t->config.seed);
    note_change(&diff, v, "dropout", "--dropout", t->config.dropout);
    note_change(&diff, v, "label_smoothing", "--label-smoothing", t->config.label_smoothing);
    char schedule[96];
    ftl_lr_decay_describe(&t->config.lr_decay, schedule, sizeof schedule);
    const char *saved_schedule = ftl_json_get_string(v, "lr_schedule");
    if (saved_schedule && strcmp(saved_schedule, schedule) != 0)
        ftl_strbuf_printf(&diff, "%s--lr-schedule %s -> %s", diff.data ? ", " : "", saved_schedule, schedule);
    const ftl_json *plateau = ftl_json_get(v, "plateau");
    double plateau_lr, plateau_best;
    int64_t plateau_wait;
    bool plateau_has_best;
    if (plateau && ftl_json_get_number(plateau, "lr", &plateau_lr) && ftl_json_get_number(plateau, "best", &plateau_best) &&
        json_bool(plateau, "has_best", &plateau_has_best) && json_int(plateau, "wait", 0, INT32_MAX, &plateau_wait) &&
        isfinite(plateau_lr))
        t->plateau = (ftl_lr_plateau){.lr = plateau_lr < 0 ? NAN : plateau_lr, .best = plateau_has_best ? plateau_best : NAN,
                                      .wait = (int)plateau_wait};
    note_change(&diff, v, "lr_scaling", "--scale-lr (0 none, 1 linear, 2 sqrt)", (double)t->config.lr_scaling);
    note_change(&diff, v, "base_batch", "--base-batch", (double)t->config.base_batch);
    note_change(&diff, v, "warmup_epochs", "--warmup-epochs", t->config.warmup_epochs);
    note_change(&diff, v, "warmup_start_factor", "the warm-up start factor", t->config.warmup_start_factor);
    warn_changes(path, &diff);
    if (simd && strcmp(simd, ftl_gemm_isa_name(ftl_gemm_active())) != 0)
        ftl_log_warn("%s was written on a machine using %s kernels, this one uses %s: results can differ in the last bits",
                     path, simd, ftl_gemm_isa_name(ftl_gemm_active()));
    t->epoch = epoch;
    t->step = step;
    t->steps_per_epoch = spe;
    t->finished = finished;
    ftl_json_free(v);
    t->es.has_best_params = has_best_params; /* the claim; checked against the tensor by the caller */
    return FTL_OK;
}

/* Whether expanding `pattern` for some epoch in 1..max_epoch gives `path`. */
static bool pattern_produces(const char *pattern, const char *path, int64_t max_epoch) {
    for (int64_t e = 1; e <= max_epoch; e++) {
        char *p = ftl_train_expand_pattern(pattern, e);
        bool same = p && strcmp(p, path) == 0;
        free(p);
        if (same) return true;
    }
    return false;
}

/* The files named in metadata `key` (a JSON array) that --keep-last may delete: only names this run's
 * pattern produces, so a checkpoint from elsewhere can never make ftl delete an unrelated file. */
static void read_run_files(const ftl_trainer *t, const ftl_safetensors *st, const char *key, char ***files,
                           size_t *count) {
    *files = NULL;
    *count = 0;
    const char *text = ftl_safetensors_metadata(st, key);
    ftl_json *v = NULL;
    if (text && t->config.checkpoint_pattern && ftl_json_parse(text, strlen(text), &v) == FTL_OK &&
        v->type == FTL_JSON_ARRAY) {
        *files = ftl_xmalloc((v->count + 1) * sizeof(char *));
        for (size_t i = 0; i < v->count; i++)
            /* Checkpoints are written at completed epochs, each of which has a history record: the
             * record count (bounded by the file's size) bounds the search, not the claimed epoch. */
            if (v->items[i].type == FTL_JSON_STRING &&
                pattern_produces(t->config.checkpoint_pattern, v->items[i].string,
                                 t->epoch < (int64_t)t->history_count ? t->epoch : (int64_t)t->history_count))
                (*files)[(*count)++] = ftl_strdup(v->items[i].string);
    }
    ftl_json_free(v);
}

static ftl_status read_history(ftl_trainer *t, const ftl_safetensors *st) {
    for (size_t i = 0; i < t->history_count; i++) free((char *)t->history[i].checkpoint);
    t->history_count = 0;
    for (size_t i = 0; i < t->checkpoint_count; i++) free(t->checkpoints[i]);
    free(t->checkpoints);
    t->checkpoints = NULL;
    t->checkpoint_count = 0;
    const char *text = ftl_safetensors_metadata(st, "ftl.history");
    ftl_json *v = NULL;
    if (text && ftl_json_parse(text, strlen(text), &v) == FTL_OK && v->type == FTL_JSON_ARRAY) {
        for (size_t i = 0; i < v->count; i++) {
            const ftl_json *e = &v->items[i];
            ftl_epoch_log l = {0};
            int64_t x;
            double d;
            if (json_int(e, "epoch", 0, INT32_MAX, &x)) l.epoch = x;
            if (json_int(e, "epochs", 0, INT32_MAX, &x)) l.epochs = x;
            if (json_int(e, "steps", 0, INT64_C(1) << 52, &x)) l.steps = x;
            if (json_int(e, "examples", 0, INT64_C(1) << 52, &x)) l.examples = x;
            if (json_int(e, "best_epoch", 0, INT32_MAX, &x)) l.best_epoch = x;
            double *fields[] = {&l.seconds, &l.loss, &l.acc, &l.val_loss, &l.val_acc, &l.lr, &l.images_per_second,
                                &l.gpu_util_percent, &l.gpu_memory_bytes};
            const char *names[] = {"time_s", "loss", "acc", "val_loss", "val_acc", "lr", "images_per_s", "gpu_util_percent",
                                   "gpu_memory_bytes"};
            for (int k = 0; k < 9; k++) *fields[k] = ftl_json_get_number(e, names[k], &d) ? d : NAN;
            bool improved = false;
            json_bool(e, "improved", &improved);
            l.improved = improved;
            l.checkpoint = ftl_json_get_string(e, "checkpoint");
            ftl_train_history_append(t, &l);
        }
    }
    ftl_json_free(v);
    read_run_files(t, st, "ftl.checkpoints", &t->checkpoints, &t->checkpoint_count);
    return FTL_OK;
}

/* The run's id (a checkpoint from before run ids has none: its files are deleted by name, as then),
 * and the --keep-last deletions the checkpoint still owed (a kill came between its write and them):
 * done now by rank 0 under this run's --keep-last; with --keep-last 0 they rejoin the run's files. */
static void adopt_run(ftl_trainer *t, const ftl_safetensors *st) {
    const char *id = ftl_safetensors_metadata(st, FTL_CHECKPOINT_META_RUN_ID);
    t->legacy_checkpoints = !id;
    if (ftl_checkpoint_run_id_valid(id)) snprintf(t->run_id, sizeof t->run_id, "%s", id);
    char **owed = NULL;
    size_t n = 0;
    read_run_files(t, st, FTL_CHECKPOINT_META_TO_DELETE, &owed, &n);
    if (n && t->config.keep_last > 0) {
        if (ftl_dist_rank(&t->config.collectives) == 0) ftl_checkpoint_delete_owned(t, owed, n);
        for (size_t i = 0; i < n; i++) free(owed[i]);
    } else if (n) { /* oldest first, as they were */
        owed = ftl_xrealloc(owed, (n + t->checkpoint_count) * sizeof(char *));
        memcpy(owed + n, t->checkpoints, t->checkpoint_count * sizeof(char *));
        free(t->checkpoints);
        t->checkpoints = owed;
        t->checkpoint_count += n;
        return;
    }
    free(owed);
}

/* Rank 0 reads the file and broadcasts its bytes: every rank restores exactly the same state, and
 * only rank 0 needs the file (the other hosts may not have it). */
static ftl_status open_shared_checkpoint(const ftl_collectives *col, const char *path, ftl_safetensors **st) {
    if (!ftl_dist_active(col)) return ftl_safetensors_open(path, st);
    uint8_t *bytes = NULL;
    size_t size = 0;
    if (ftl_dist_rank(col) == 0) FTL_TRY(ftl_read_file(path, &bytes, &size));
    ftl_status s = ftl_dist_broadcast_blob(col, &bytes, &size, 0);
    if (s == FTL_OK) s = ftl_safetensors_open_buffer(bytes, size, path, st);
    free(bytes);
    return s;
}

/* Restores the data position this rank had (or the one global position). */
static ftl_status restore_data_position(ftl_trainer *t, const ftl_safetensors *st, const char *path,
                                        ftl_batch_source *train) {
    const ftl_collectives *col = &t->config.collectives;
    int ranks = ftl_dist_size(col);
    const char *kind = ftl_safetensors_metadata(st, "ftl.position_kind");
    const char *world_text = ftl_safetensors_metadata(st, "ftl.world_size");
    int world = world_text ? atoi(world_text) : 1;
    bool per_rank = kind && strcmp(kind, "per-rank") == 0;
    char name[48];
    if (train->global_order && per_rank)
        return ftl_fail(FTL_E_INVALID_ARG,
                        "cannot resume from %s: it was written by a run whose ranks streamed their own shards "
                        "(--no-feature-cache); resume it the same way", path);
    if (!train->global_order && !per_rank && ftl_safetensors_find(st, "loader.position"))
        return ftl_fail(FTL_E_INVALID_ARG,
                        "cannot resume from %s: it was written by a run on the feature cache; resume it without "
                        "--no-feature-cache", path);
    if (per_rank && world != ranks)
        return ftl_fail(FTL_E_INVALID_ARG,
                        "cannot resume from %s with %d rank%s: it was written by %d rank%s that each streamed their own "
                        "shard (--no-feature-cache), and those positions cannot be split over another number of ranks; "
                        "resume with -np %d, or train on the feature cache (the default), whose checkpoints resume under "
                        "any number of ranks",
                        path, ranks, ranks == 1 ? "" : "s", world, world == 1 ? "" : "s", world);
    if (per_rank) snprintf(name, sizeof name, "loader.position.rank%d", ftl_dist_rank(col));
    else snprintf(name, sizeof name, "loader.position");
    const ftl_safetensors_tensor *pos = ftl_safetensors_find(st, name);
    if (!pos || !train->restore_position) {
        ftl_log_warn("%s: %s, so the data order after resuming differs from an uninterrupted run", path,
                     pos ? "this loader cannot restore a position" : "no loader position saved");
        return FTL_OK;
    }
    if (pos->dtype != FTL_DTYPE_U8 || pos->ndim != 1)
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\" should be U8 [n]", path, name);
    FTL_TRY(ftl_safetensors_verify(st, pos));
    ftl_status s = train->restore_position(train->ctx, pos->data, (size_t)pos->byte_size);
    return s == FTL_OK ? FTL_OK : ftl_fail_context(s, "cannot resume from %s", path);
}

/* A checkpoint this version can continue, with a 2-D head kernel (*kernel). */
static ftl_status check_format(const ftl_safetensors *st, const char *path, const ftl_safetensors_tensor **kernel) {
    const char *format = ftl_safetensors_metadata(st, FTL_MODEL_META_FORMAT);
    const ftl_safetensors_tensor *k = ftl_safetensors_find(st, "head.kernel");
    *kernel = k;
    if (format && strcmp(format, "ftl-checkpoint-1") == 0)
        return ftl_fail(FTL_E_INVALID_ARG,
                        "cannot resume from %s: it was written by an older ftl (ftl-checkpoint-1), whose dropout draws "
                        "came from a stream per rank; this version keys them by (seed, step, row) so that any number of "
                        "ranks trains the same model, and cannot continue that run exactly: train again from the start",
                        path);
    if (!format || strcmp(format, FTL_CHECKPOINT_FORMAT) != 0)
        return ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: %s", path,
                        format && strcmp(format, FTL_MODEL_FORMAT) == 0 ? "it is a final model, not a checkpoint"
                                                                       : "not an ftl checkpoint");
    if (!k || k->ndim != 2) return ftl_fail(FTL_E_FORMAT, "%s: tensor \"head.kernel\" is missing or not 2-D", path);
    return FTL_OK;
}

ftl_status ftl_checkpoint_check_identity(const char *path, const ftl_kv *meta, size_t meta_count) {
    ftl_safetensors *st;
    FTL_TRY(ftl_safetensors_open(path, &st));
    const ftl_safetensors_tensor *k = NULL;
    ftl_status s = check_format(st, path, &k);
    if (s == FTL_OK) s = check_identity(meta, meta_count, st, path); /* the cause (a backbone) before its symptoms */
    const char *dim = ftl_train_kv_find(meta, meta_count, FTL_MODEL_META_FEATURE_DIM);
    if (s == FTL_OK && dim && k->shape[0] != atoll(dim))
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it was trained on %lld-dimensional features, these have %s",
                     path, (long long)k->shape[0], dim);
    if (s == FTL_OK) s = ftl_safetensors_verify_all(st); /* a damaged tensor found before the work, not after it */
    ftl_safetensors_close(st);
    return s;
}

ftl_status ftl_trainer_resume(ftl_trainer *t, const char *path, ftl_batch_source *train) {
    ftl_safetensors *st;
    FTL_TRY(open_shared_checkpoint(&t->config.collectives, path, &st));
    const ftl_safetensors_tensor *k = NULL;
    const char *opt_text = ftl_safetensors_metadata(st, "ftl.optimizer");
    ftl_status s = check_format(st, path, &k);
    if (s == FTL_OK && k->shape[0] != t->head.dim)
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it was trained on %lld-dimensional features, these have %lld",
                     path, (long long)k->shape[0], (long long)t->head.dim);
    else if (s == FTL_OK && k->shape[1] != t->head.classes)
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it was trained on %lld classes, this dataset has %lld", path,
                     (long long)k->shape[1], (long long)t->head.classes);
    if (s == FTL_OK) s = check_identity(t->config.checkpoint_meta, t->config.checkpoint_meta_count, st, path);
    if (s == FTL_OK) warn_soft_identity(t->config.checkpoint_meta, t->config.checkpoint_meta_count, st, path);
    if (s == FTL_OK) {
        ftl_json *o = NULL;
        const char *kind = NULL;
        if (opt_text && ftl_json_parse(opt_text, strlen(opt_text), &o) == FTL_OK) kind = ftl_json_get_string(o, "kind");
        ftl_optimizer_kind saved;
        bool nesterov = false;
        double momentum = 0, lr = 0;
        if (o) {
            json_bool(o, "nesterov", &nesterov);
            ftl_json_get_number(o, "momentum", &momentum);
            ftl_json_get_number(o, "lr", &lr);
        }
        if (!kind || ftl_optimizer_kind_parse(kind, &saved) != FTL_OK)
            s = ftl_fail(FTL_E_FORMAT, "%s: ftl.optimizer metadata is missing or names no known optimizer", path);
        else if (saved != t->opt.config.kind)
            s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it was trained with %s, this run uses %s", path, kind,
                         ftl_optimizer_kind_name(t->opt.config.kind));
        else if (saved == FTL_OPTIMIZER_SGD && (momentum > 0) != (t->opt.config.momentum > 0))
            s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it used sgd %s momentum, this run %s", path,
                         momentum > 0 ? "with" : "without", t->opt.config.momentum > 0 ? "has momentum" : "has none");
        else {
            if (lr != t->opt.config.lr) ftl_log_warn("%s was trained with --lr %g, resuming with %g", path, lr, t->opt.config.lr);
            const ftl_optimizer_config *oc = &t->opt.config;
            ftl_strbuf diff = {0};
            note_change(&diff, o, "beta1", "beta1", oc->beta1);
            note_change(&diff, o, "beta2", "beta2", oc->beta2);
            note_change(&diff, o, "eps", "eps", oc->eps);
            note_change(&diff, o, "momentum_decay", "momentum_decay", oc->momentum_decay);
            note_change(&diff, o, "momentum", "--momentum", oc->momentum);
            note_change(&diff, o, "weight_decay", "--weight-decay", oc->weight_decay);
            if (nesterov != oc->nesterov)
                ftl_strbuf_printf(&diff, "%s--nesterov %s -> %s", diff.data ? ", " : "", nesterov ? "on" : "off",
                                  oc->nesterov ? "on" : "off");
            warn_changes(path, &diff);
        }
        ftl_json_free(o);
    }
    int64_t kshape[2] = {t->head.dim, t->head.classes}, bshape[1] = {t->head.classes};
    int64_t pshape[1] = {(int64_t)t->param_count};
    size_t pbytes = t->param_count * sizeof(float);
    size_t top_count = t->param_count - t->head.param_count;
    const ftl_safetensors_tensor *top = ftl_safetensors_find(st, "top.params");
    if (s == FTL_OK && top && !t->config.top)
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it is a fine-tuning checkpoint (it trains %lld backbone "
                     "values too); give the same --fine-tune-last/--fine-tune-from as the run that wrote it",
                     path, (long long)top->element_count);
    else if (s == FTL_OK && !top && t->config.top)
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume fine-tuning from %s: it trained the head alone (a phase-1 checkpoint)",
                     path);
    else if (s == FTL_OK && top && (top->dtype != FTL_DTYPE_F32 || top->ndim != 1 || top->element_count != top_count))
        s = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it fine-tunes %lld backbone values, this run %zu "
                     "(another cut of the backbone?)", path, (long long)top->element_count, top_count);
    if (s == FTL_OK && top) {
        int64_t tshape[1] = {(int64_t)top_count};
        s = ftl_safetensors_read(st, "top.params", FTL_DTYPE_F32, 1, tshape, t->params + t->head.param_count,
                                 top_count * sizeof(float));
    }
    if (s == FTL_OK)
        s = ftl_safetensors_read(st, "head.kernel", FTL_DTYPE_F32, 2, kshape, t->head.kernel,
                                 (size_t)(t->head.dim * t->head.classes) * sizeof(float));
    if (s == FTL_OK)
        s = ftl_safetensors_read(st, "head.bias", FTL_DTYPE_F32, 1, bshape, t->head.bias,
                                 (size_t)t->head.classes * sizeof(float));
    for (int slot = 0; s == FTL_OK && slot < t->opt.slot_count; slot++)
        s = ftl_safetensors_read(st, slot_name(&t->opt, slot), FTL_DTYPE_F32, 1, pshape,
                                 t->opt.state + (size_t)slot * t->opt.param_count, pbytes);
    int64_t step = 0;
    if (s == FTL_OK) s = ftl_safetensors_read(st, "optimizer.step", FTL_DTYPE_I64, 0, NULL, &step, sizeof step);
    if (s == FTL_OK) s = ftl_safetensors_read(st, "optimizer.mu_product", FTL_DTYPE_F64, 0, NULL, &t->opt.mu_product,
                                              sizeof(double));
    if (s == FTL_OK && step < 0) s = ftl_fail(FTL_E_FORMAT, "%s: optimizer.step %lld is negative", path, (long long)step);
    if (s == FTL_OK) {
        t->opt.step = step;
        s = read_state(t, st, path);
    }
    if (s == FTL_OK) {
        bool claimed = t->es.has_best_params, has = ftl_safetensors_find(st, "early_stopping.best_params") != NULL;
        t->es.has_best_params = false;
        if (claimed != has)
            s = ftl_fail(FTL_E_FORMAT, "%s: ftl.train_state says has_best_params %s but the tensor early_stopping.best_params "
                         "is %s", path, claimed ? "true" : "false", has ? "there" : "missing");
        else if (has && t->es.best_params && t->es.has_best) {
            s = ftl_safetensors_read(st, "early_stopping.best_params", FTL_DTYPE_F32, 1, pshape, t->es.best_params, pbytes);
            t->es.has_best_params = s == FTL_OK;
        } else if (t->es.best_params && t->es.has_best) {
            /* Its best epoch's weights are not in the file: a best record without them would
             * restore the wrong weights at the end. */
            ftl_log_warn("%s holds no best weights (written with --no-restore-best?): the best-epoch record starts over",
                         path);
            t->es.has_best = false;
            t->es.best_epoch = 0;
            t->es.wait = 0;
        }
    }
    if (s == FTL_OK) s = read_history(t, st);
    if (s == FTL_OK && train) s = restore_data_position(t, st, path, train);
    if (s == FTL_OK) adopt_run(t, st);
    ftl_safetensors_close(st);
    return s;
}
