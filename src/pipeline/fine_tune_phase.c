/* `ftl train`'s phase 2 (Keras' fine-tuning step): the backbone's top, cut by --fine-tune-last or
 * --fine-tune-from, trained with the head on the frozen bottom's boundary tensors (cached like features),
 * starting from phase 1's best weights as its epoch 0; its checkpoints, resume and the tuned model. */
#include "ftl/pipeline.h"
#include "ftl/dist.h"
#include "pipeline/train_run.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The trainer's top over the training plan (ftl_finetune_*). */
static ftl_status top_bind(void *ctx, float *params, float *grads) { return ftl_finetune_bind(ctx, params, grads); }
static ftl_status top_forward(void *ctx, const float *rows, size_t n, float *features) {
    return ftl_finetune_forward_rows(ctx, rows, (int)n, features);
}
static ftl_status top_backward(void *ctx, const float *dfeatures, size_t n) {
    return ftl_finetune_backward_rows(ctx, dfeatures, (int)n);
}

/* What a resume continues: phase 1 (a head checkpoint) or 2 (fine-tuning), and phase 2's epoch 0
 * (the metrics it started from) as the checkpoint records them. Rank 0 reads it, then tells all. */
#define META_FINE_TUNE_START "ftl.fine_tune_start"

ftl_status fine_tune_resume_phase(const ftl_train_options *o, int *phase, ftl_epoch_log *start) {
    *phase = 1;
    const ftl_collectives *col = &o->fit.collectives;
    double v[5] = {1, NAN, NAN, NAN, NAN};
    ftl_status st = FTL_OK;
    if (ftl_dist_rank(col) == 0) {
        ftl_safetensors *f = NULL;
        st = ftl_safetensors_open(o->resume_path, &f);
        const char *saved_cut = st == FTL_OK ? ftl_safetensors_metadata(f, FTL_MODEL_META_FINE_TUNE_CUT) : NULL;
        /* Refused before any work: a checkpoint of another cut trains other tensors. */
        char *mine = fine_tuning(o) ? fine_tune_cut_text(&o->fine_tune) : NULL;
        if (saved_cut && mine && strcmp(saved_cut, mine) != 0)
            st = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it fine-tunes the cut \"%s\", this run \"%s\"",
                          o->resume_path, saved_cut, mine);
        free(mine);
        if (st == FTL_OK && saved_cut) {
            v[0] = 2;
            const char *js = ftl_safetensors_metadata(f, META_FINE_TUNE_START);
            ftl_json *j = NULL;
            if (js && ftl_json_parse(js, strlen(js), &j) == FTL_OK) {
                const char *names[4] = {"loss", "acc", "val_loss", "val_acc"};
                for (int k = 0; k < 4; k++) {
                    double x;
                    if (ftl_json_get_number(j, names[k], &x)) v[1 + k] = x;
                }
            }
            ftl_json_free(j);
        }
        ftl_safetensors_close(f);
    }
    bool any = false;
    ftl_status agree = ftl_dist_any_failed(col, st != FTL_OK, &any);
    if (st != FTL_OK) return st;
    if (agree != FTL_OK) return agree;
    if (any) return ftl_fail(FTL_E_IO, "rank 0 cannot read the checkpoint %s", o->resume_path);
    FTL_TRY(ftl_dist_broadcast(col, v, sizeof v, 0));
    *phase = (int)v[0];
    *start = (ftl_epoch_log){.loss = v[1], .acc = v[2], .val_loss = v[3], .val_acc = v[4]};
    return FTL_OK;
}

static char *start_json(const ftl_epoch_log *l) {
    ftl_strbuf b = {0};
    const char *names[4] = {"loss", "acc", "val_loss", "val_acc"};
    double values[4] = {l->loss, l->acc, l->val_loss, l->val_acc};
    ftl_strbuf_append(&b, "{", 1);
    for (int k = 0; k < 4; k++) {
        ftl_strbuf_printf(&b, "%s\"%s\":", k ? "," : "", names[k]);
        ftl_json_append_number(&b, values[k]);
    }
    ftl_strbuf_append(&b, "}", 1);
    return b.data;
}

/* Phase 2: the cut's top and the head trained together on the frozen bottom's boundary tensors
 * (cached like features), from head_params (phase 1's best; NULL when resuming phase 2 or from
 * --init) with `initial` as epoch 0. Writes the model with the tuned tensors. */
typedef struct fine_tune_run {
    ftl_finetune *top;
    ftl_classifier init;
    bool have_init;
    ftl_tensor_override *tuned;
    int n_tuned;
} fine_tune_run;

ftl_status cut_half_load(const ftl_train_options *o, bool top, const ftl_tensor_override *start, int n_start,
                         ftl_model **out) {
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    mo.features_from = o->embed.features_from;
    if (top) mo.top_of = &o->fine_tune;
    else mo.bottom_of = &o->fine_tune;
    mo.precision = o->embed.precision;
    mo.int8_scales = o->embed.int8_scales; /* int8: they cover the bottom only, so the top runs fp32 */
    mo.conv_algorithm = o->embed.conv_algorithm;
    mo.device = o->embed.device;
    mo.deterministic = o->embed.deterministic;
    mo.threads = o->embed.threads;
    mo.batch = o->embed.batch;
    mo.overrides = start;
    mo.n_overrides = n_start;
    return ftl_model_load(o->embed.backbone_path, &mo, out);
}

ftl_status boundary_setup(const train_run *r, const ftl_train_options *o, const ftl_tensor_override *start, int n_start,
                          train_run *bottom, ftl_train_summary *s) {
    if (!bottom->backbone) FTL_TRY(cut_half_load(o, false, start, n_start, &bottom->backbone));
    if (bottom->have_train_global || bottom->have_train_stream) return FTL_OK; /* phase 1 set them up */
    ftl_train_options bo = *o;
    bo.embed.bottom_of = &o->fine_tune;
    bo.embed.overrides = start;
    bo.embed.n_overrides = n_start;
    free(bottom->cache_dir);
    bottom->cache_dir = ftl_strdup(r->cache_dir);
    memcpy(bottom->train_fingerprint, r->train_fingerprint, sizeof r->train_fingerprint);
    bottom->image_size = r->image_size;
    ftl_train_summary bs;
    memset(&bs, 0, sizeof bs);
    ftl_status st = o->feature_cache ? train_run_setup_cached(bottom, &bo, &bs) : train_run_setup_per_batch(bottom, &bo, &bs);
    s->boundary_dim = bottom->dim;
    s->boundary_cache_reused = bs.train_cache_reused && (!o->val_path || bs.val_cache_reused);
    s->features_seconds += bs.features_seconds;
    s->train_rows = bs.train_rows;
    s->val_rows = bs.val_rows;
    s->features_in_memory = bs.features_in_memory;
    s->train_cache_reused = bs.train_cache_reused;
    s->val_cache_reused = bs.val_cache_reused;
    return st;
}

ftl_status fine_tune_phase(train_run *r, train_run *bottom, const ftl_train_options *o, const float *head_params,
                           ftl_epoch_log initial, bool resume, const ftl_kv *base_meta, size_t n_base_meta,
                           const char *run_record, ftl_train_summary *s) {
    const ftl_collectives *col = &o->fit.collectives;
    bool rank0 = ftl_dist_rank(col) == 0;
    fine_tune_run f;
    memset(&f, 0, sizeof f);
    ftl_status st = FTL_OK;
    const ftl_tensor_override *start_tensors = NULL; /* --init's tuned tensors: the backbone phase 2 starts from */
    int n_start = 0;
    if (o->init_path) {
        st = ftl_classifier_load(o->init_path, &f.init);
        f.have_init = st == FTL_OK;
        const char *sha = f.have_init ? ftl_classifier_metadata(&f.init, FTL_MODEL_META_BACKBONE_SHA256) : NULL;
        if (st == FTL_OK && (!sha || strcmp(sha, ftl_model_get_info(r->backbone)->sha256) != 0))
            st = ftl_fail(FTL_E_INVALID_ARG, "--init %s was trained on another backbone (sha256 %.16s...) than --backbone %s (%.16s...)",
                          o->init_path, sha ? sha : "none", o->embed.backbone_path, ftl_model_get_info(r->backbone)->sha256);
        if (st == FTL_OK && f.init.head.classes != r->class_count)
            st = ftl_fail(FTL_E_INVALID_ARG, "--init %s has %lld classes, the training set %s has %lld", o->init_path,
                          (long long)f.init.head.classes, o->train_path, (long long)r->class_count);
        for (int64_t k = 0; st == FTL_OK && k < r->class_count; k++)
            if (strcmp(f.init.class_names[k], r->class_names[k]) != 0)
                st = ftl_fail(FTL_E_INVALID_ARG, "--init %s: class %lld is \"%s\", in the training set \"%s\"", o->init_path,
                              (long long)k, f.init.class_names[k], r->class_names[k]);
        if (st == FTL_OK && f.init.head.dim != r->dim)
            st = ftl_fail(FTL_E_INVALID_ARG, "--init %s takes %lld features, the backbone gives %lld", o->init_path,
                          (long long)f.init.head.dim, (long long)r->dim);
        if (st == FTL_OK) {
            start_tensors = f.init.tuned;
            n_start = f.init.n_tuned;
            if (!head_params) head_params = f.init.head.params;
        }
    }
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    mo.features_from = o->embed.features_from;
    mo.threads = o->embed.threads;
    mo.precision = o->embed.precision; /* bf16: the top's convolutions too (fp32 master weights) */
    mo.overrides = start_tensors;
    mo.n_overrides = n_start;
    if (st == FTL_OK) st = ftl_finetune_open(o->embed.backbone_path, &mo, &o->fine_tune, (int)o->fit.batch_size, &f.top);
    const ftl_finetune_info *fi = st == FTL_OK ? ftl_finetune_get_info(f.top) : NULL;
    if (st == FTL_OK && fi->feature_dim != r->dim)
        st = ftl_fail(FTL_E_INTERNAL, "the top gives %lld features, the backbone %lld", (long long)fi->feature_dim,
                      (long long)r->dim);
    /* The frozen bottom: phase 1's (its boundary rows computed once per recipe), or loaded here. */
    if (st == FTL_OK) st = boundary_setup(r, o, start_tensors, n_start, bottom, s);
    if (st == FTL_OK && ftl_model_get_info(bottom->backbone)->feature_dim != fi->boundary_floats)
        st = ftl_fail(FTL_E_INTERNAL, "the bottom gives %lld floats per image, the top takes %lld",
                      ftl_model_get_info(bottom->backbone)->feature_dim, fi->boundary_floats);
    ftl_fit_top top = {0};
    if (st == FTL_OK)
        top = (ftl_fit_top){.ctx = f.top, .in_dim = fi->boundary_floats, .out_dim = fi->feature_dim,
                            .param_count = (size_t)fi->param_count, .max_rows = o->fit.batch_size,
                            .bind = top_bind, .forward = top_forward, .backward = top_backward};
    /* The checkpoints name the cut, the backbone phase 2 started from and its epoch 0. */
    char *cut = fine_tune_cut_text(&o->fine_tune), *start = start_json(&initial);
    ftl_kv *meta = ftl_xcalloc(n_base_meta + 3, sizeof *meta);
    memcpy(meta, base_meta, n_base_meta * sizeof *meta);
    meta[n_base_meta] = (ftl_kv){FTL_MODEL_META_FINE_TUNE_CUT, cut};
    meta[n_base_meta + 1] = (ftl_kv){FTL_MODEL_META_BACKBONE_IDENTITY, st == FTL_OK ? ftl_model_get_info(bottom->backbone)->identity : ""};
    meta[n_base_meta + 2] = (ftl_kv){META_FINE_TUNE_START, start};
    ftl_fit_config fit = o->fit;
    fit.optimizer.lr = o->fine_tune_lr;
    fit.epochs = o->fine_tune_epochs;
    fit.warmup_epochs = o->fine_tune_warmup_epochs;
    fit.lr_decay = o->fine_tune_lr_decay;
    fit.top = &top;
    fit.val_mirrored = o->val_path ? train_run_val_mirrored(bottom) : NULL; /* the trained top runs on it each epoch */
    fit.initial = &initial;
    char *pattern = fine_tune_checkpoint_pattern(o->fit.checkpoint_pattern);
    fit.checkpoint_pattern = pattern;
    fit.checkpoint_meta = meta;
    fit.checkpoint_meta_count = n_base_meta + 3;
    /* The log gets a run record of its own for phase 2, so a report draws the phases apart. */
    const char *tag = "{\"record\":\"run\",";
    char *record = NULL;
    if (st == FTL_OK && run_record && strncmp(run_record, tag, strlen(tag)) == 0) {
        ftl_strbuf ft = {0};
        ftl_strbuf_printf(&ft, "%s\"phase\":\"fine-tune\",\"fine_tune\":{\"cut\":", tag);
        ftl_json_append_string(&ft, cut);
        ftl_strbuf_printf(&ft, ",\"nodes\":%d,\"parameters\":%lld,\"lr\":", fi->unfrozen_nodes, (long long)fi->param_count);
        ftl_json_append_number(&ft, fit.optimizer.lr);
        ftl_strbuf_printf(&ft, ",\"epochs\":%lld},%s", (long long)fit.epochs, run_record + strlen(tag));
        record = ft.data;
    }
    fit.run_record = record;
    if (!fit.epoch_out && rank0) fit.epoch_out = ftl_log_output();
    ftl_trainer *t = NULL;
    if (st == FTL_OK) st = ftl_trainer_init(&t, &fit, r->dim, r->class_count);
    if (st == FTL_OK && head_params) {
        ftl_head *h = ftl_trainer_head(t);
        memcpy(h->params, head_params, h->param_count * sizeof(float));
        size_t count;
        float *block = ftl_trainer_params(t, &count);
        st = ftl_dist_broadcast(col, block, count * sizeof(float), 0);
    }
    if (st == FTL_OK && resume) st = ftl_trainer_resume(t, o->resume_path, &bottom->train);
    /* --fine-tune-only: epoch 0 is the --init model measured here, on this validation set. */
    if (st == FTL_OK && !resume && o->fine_tune_only && o->val_path && !o->fine_tune_start) {
        ftl_metric_counts vc;
        st = ftl_trainer_evaluate(t, &bottom->val, &vc);
        initial.val_loss = ftl_metric_loss(&vc);
        initial.val_acc = ftl_metric_accuracy(&vc);
        free(start);
        start = start_json(&initial);
        meta[n_base_meta + 2].value = start;
    }
    if (st == FTL_OK && rank0 && fit.epoch_out && !resume)
        fprintf(fit.epoch_out, "Fine-tuning %d nodes (%s, %lld values) with the head at lr %g; epoch 0: val_acc %.4f\n",
                fi->unfrozen_nodes, cut, (long long)fi->param_count, fit.optimizer.lr, initial.val_acc);
    if (st == FTL_OK) st = ftl_trainer_fit(t, &bottom->train, o->val_path ? &bottom->val : NULL, &s->fit);
    s->fine_tuned = st == FTL_OK;
    if (st == FTL_OK && rank0) {
        /* The model holds the top's values and any of --init's tuned tensors outside this cut. */
        float *block = ftl_trainer_params(t, NULL);
        size_t head_count = ftl_trainer_head(t)->param_count;
        f.tuned = ftl_xcalloc((size_t)(fi->n_params + n_start) + 1, sizeof *f.tuned);
        for (int k = 0; k < fi->n_params; k++) {
            long long count, offset;
            const char *name = ftl_finetune_param_name(f.top, k, &count, &offset);
            f.tuned[f.n_tuned++] = (ftl_tensor_override){name, block + head_count + offset, count};
        }
        for (int k = 0; k < n_start; k++) {
            bool inside = false;
            for (int j = 0; j < fi->n_params; j++) inside |= strcmp(start_tensors[k].name, f.tuned[j].name) == 0;
            if (!inside) f.tuned[f.n_tuned++] = start_tensors[k];
        }
        char identity[65];
        ftl_model_identity_of(ftl_model_get_info(r->backbone)->sha256, f.tuned, f.n_tuned, identity);
        char *lr = ftl_format("%.9g", o->fine_tune_lr);
        ftl_kv extra[] = {{FTL_MODEL_META_FINE_TUNE_CUT, cut}, {FTL_MODEL_META_BACKBONE_IDENTITY, identity},
                          {FTL_MODEL_META_BOTTOM_IDENTITY, ftl_model_get_info(bottom->backbone)->identity},
                          {"ftl.fine_tune_lr", lr}, {META_FINE_TUNE_START, start}};
        st = train_run_save_model(r, o, t, &s->fit, f.tuned, f.n_tuned, extra, sizeof extra / sizeof extra[0]);
        free(lr);
    }
    ftl_trainer_free(t);
    free(pattern);
    free(record);
    free(meta);
    free(cut);
    free(start);
    free(f.tuned);
    ftl_finetune_free(f.top);
    if (f.have_init) ftl_classifier_free(&f.init);
    return st;
}

