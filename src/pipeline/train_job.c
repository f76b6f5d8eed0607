/* `ftl train`: backbone -> (feature cache | per-batch backbone) -> trainer -> MODEL.ftl (phase 1, the head),
 * then fine_tune_phase.c's phase 2 when a fine-tuning cut is given. */
#include "ftl/pipeline.h"
#include "ftl/loader.h"
#include "ftl/dist.h"
#include "ftl/parquet.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "nn/device_caps.h"
#include "pipeline/dataset_classes.h"
#include "pipeline/feature_cache.h"
#include "pipeline/loader_source.h"
#include "pipeline/store_sources.h"
#include "pipeline/train_checks.h"
#include "pipeline/train_paths.h"
#include "pipeline/train_run.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void ftl_train_options_init(ftl_train_options *o) {
    memset(o, 0, sizeof *o);
    ftl_embed_options_init(&o->embed);
    o->feature_cache = true;
    o->shuffle_buffer = 400;
    o->fit = ftl_fit_config_default();
    o->show_progress = true;
    o->fine_tune_epochs = 10;
    o->fine_tune_lr = 1e-5;
}



/* r's sources become the frozen top over the boundary rows they give. */
static void through_top(train_run *r, const ftl_train_options *o) {
    top_source_init(&r->train_top, r->train, r->top);
    r->have_train_top = true;
    r->train = top_source_as_batch_source(&r->train_top);
    if (o->val_path) {
        top_source_init(&r->val_top, r->val, r->top);
        r->have_val_top = true;
        r->val = top_source_as_batch_source(&r->val_top);
    }
    if (r->have_val_mirrored) {
        top_source_init(&r->val_mirrored_top, r->val_mirrored, r->top);
        r->have_val_mirrored_top = true;
        r->val_mirrored = top_source_as_batch_source(&r->val_mirrored_top);
    }
}

ftl_status train_run_setup_through_cut(train_run *r, const ftl_train_options *o, train_run *bottom, ftl_train_summary *s) {
    ftl_status st = o->feature_cache ? boundary_setup(r, o, NULL, 0, bottom, s) : cut_half_load(o, false, NULL, 0, &bottom->backbone);
    if (st == FTL_OK) st = cut_half_load(o, true, NULL, 0, &r->top);
    if (st != FTL_OK) return st;
    int64_t dim = ftl_model_get_info(r->top)->feature_dim;
    r->dim = dim;
    if (!o->feature_cache) { /* bottom, then top, on every batch */
        st = train_run_open_streams(r, o, bottom->backbone, s);
        if (st == FTL_OK) through_top(r, o);
        return st;
    }
    feature_store *bt = &bottom->train_store, *bf = bottom->have_train_flipped ? &bottom->train_flipped : NULL,
                  *bv = bottom->have_val_store ? &bottom->val_store : NULL;
    feature_store *bvf = bottom->have_val_flipped ? &bottom->val_flipped : NULL;
    int64_t rows = (bt->end - bt->begin) * (bf ? 2 : 1) + (bv ? bv->end - bv->begin : 0) * (bvf ? 2 : 1);
    int64_t limit = o->max_memory > 0 ? o->max_memory : train_run_default_max_memory();
    int64_t boundary_bytes = s->features_in_memory ? rows * bottom->dim * 4 : 0; /* held for phase 2 */
    if (boundary_bytes + rows * dim * 4 > limit) { /* no room beside the boundary rows: the top runs per batch */
        ftl_log_info("fine-tuning: phase 1's %.1f GiB of features exceed the memory limit; the frozen top runs on every "
                     "batch of boundary rows", (double)(rows * dim * 4) / (1 << 30));
        st = train_run_sources_over_stores(r, o, bt, bf, bv, s->train_rows, bottom->dim);
        if (st == FTL_OK && bottom->have_val_flipped) train_run_mirrored_val_over_store(r, &bottom->val_flipped, bottom->dim);
        if (st == FTL_OK) through_top(r, o);
        return st;
    }
    double t0 = ftl_now();
    st = top_features_store(bt, r->top, &r->train_store);
    r->have_train_store = st == FTL_OK;
    if (st == FTL_OK && bf) {
        st = top_features_store(bf, r->top, &r->train_flipped);
        r->have_train_flipped = st == FTL_OK;
    }
    if (st == FTL_OK && bv) {
        st = top_features_store(bv, r->top, &r->val_store);
        r->have_val_store = st == FTL_OK;
    }
    if (st == FTL_OK && bvf) {
        st = top_features_store(bvf, r->top, &r->val_flipped);
        r->have_val_flipped = st == FTL_OK;
    }
    double seconds = ftl_now() - t0;
    s->features_seconds += seconds;
    char *cut = fine_tune_cut_text(&o->fine_tune);
    if (st == FTL_OK)
        ftl_log_info("fine-tuning: phase 1's features of %lld rows made from their boundary rows by the frozen top (%s) "
                     "in %.1f s", (long long)rows, cut, seconds);
    free(cut);
    if (st == FTL_OK)
        st = train_run_sources_over_stores(r, o, &r->train_store, r->have_train_flipped ? &r->train_flipped : NULL,
                                 r->have_val_store ? &r->val_store : NULL, s->train_rows, dim);
    if (st == FTL_OK && r->have_val_flipped) train_run_mirrored_val_over_store(r, &r->val_flipped, dim);
    return st;
}

/* The trainer's per-epoch device figures from the GPU monitor. */
static bool gpu_usage(void *ctx, double *util_percent, double *memory_bytes) {
    return ftl_device_monitor_take(ctx, util_percent, memory_bytes);
}

/* The start of a run, shared by ftl train and ftl sweep: the classes (val's checked against train's),
 * the image size, the int8 calibration (*op then points at *calibrated, which holds the scales), the
 * backbone, and under mpirun the checks that every rank has the same backbone and data. */
ftl_status train_run_prepare(train_run *r, const ftl_train_options **op, ftl_train_options *calibrated,
                             ftl_nn_int8_scales **own_scales) {
    const ftl_train_options *o = *op;
    bool ft = fine_tuning(o);
    const char *train_src[1] = {o->train_path};
    ftl_status st = dataset_read_classes(train_src, o->embed.label_column ? o->embed.label_column : FTL_COLUMN_LABEL,
                                         o->embed.label_offset, &r->class_names, &r->class_count);
    if (st == FTL_OK && o->val_path) {
        const char *val_src[1] = {o->val_path};
        char *what = ftl_format("the training set %s", o->train_path);
        st = dataset_check_classes(val_src, o->embed.label_column ? o->embed.label_column : FTL_COLUMN_LABEL,
                                   o->embed.label_offset, r->class_names,
                                   r->class_count, what);
        free(what);
        int val_size = 0;
        if (st == FTL_OK) st = loader_dataset_image_size(train_src, 1, o->embed.image_size, &r->image_size);
        if (st == FTL_OK) st = loader_dataset_image_size(val_src, 1, o->embed.image_size, &val_size);
        if (st == FTL_OK && val_size != r->image_size)
            st = ftl_fail(FTL_E_INVALID_ARG, "%s holds %dx%d images but %s holds %dx%d: prep both with the same --size",
                          o->val_path, val_size, val_size, o->train_path, r->image_size, r->image_size);
    } else if (st == FTL_OK) {
        st = loader_dataset_image_size(train_src, 1, o->embed.image_size, &r->image_size);
    }
    if (st == FTL_OK) st = train_check_labels(o, r); /* before any calibration or feature reads an image */
    /* int8: one calibration on the training images (rank 0's, broadcast) before any cache key; with a
     * cut, of the frozen bottom only, so the tuned top runs fp32 in every graph it is part of */
    if (st == FTL_OK && o->embed.precision == FTL_NN_INT8 && !o->embed.int8_scales) {
        ftl_embed_options eo = o->embed;
        eo.sources = train_src;
        eo.source_count = 1;
        eo.collectives = &o->fit.collectives;
        if (ft) eo.bottom_of = &o->fine_tune;
        char *cache = train_cache_dir(o);
        eo.calibration_cache_dir = cache; /* beside the features it keys: a rerun or resume skips it */
        st = ftl_embed_calibrate(&eo, own_scales);
        free(cache);
        *calibrated = *o;
        calibrated->embed.int8_scales = *own_scales;
        o = calibrated;
        *op = o;
    }
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    mo.features_from = o->embed.features_from;
    mo.precision = o->embed.precision;
    mo.int8_scales = o->embed.int8_scales;
    mo.device = o->embed.device;
    mo.deterministic = o->embed.deterministic;
    mo.conv_algorithm = o->embed.conv_algorithm;
    mo.threads = o->embed.threads;
    mo.batch = o->embed.batch;
    if (st == FTL_OK) st = ftl_model_load(o->embed.backbone_path, &mo, &r->backbone);
    /* Every rank must train on the same data with the same backbone: compared with rank 0's. */
    const ftl_collectives *col = &o->fit.collectives;
    if (st == FTL_OK && ftl_dist_active(col)) {
        ftl_dist_set_context(col, -1, "the start-up checks");
        st = ftl_dist_check_same(col, "the backbone (sha256)", ftl_model_get_info(r->backbone)->sha256);
        char *ti = dataset_quick_identity(train_src, 1);
        if (st == FTL_OK) st = ftl_dist_check_same(col, "the training dataset", ti);
        free(ti);
        if (st == FTL_OK && o->val_path) {
            const char *val_src[1] = {o->val_path};
            char *vi = dataset_quick_identity(val_src, 1);
            st = ftl_dist_check_same(col, "the validation dataset", vi);
            free(vi);
        }
        /* Sizes can agree while the rows differ (a re-prep with another seed): the content too. */
        if (st == FTL_OK) st = ftl_dataset_fingerprint(train_src, 1, r->train_fingerprint);
        if (st == FTL_OK) st = ftl_dist_check_same(col, "the training dataset's content fingerprint", r->train_fingerprint);
    }
    if (st == FTL_OK) {
        r->preprocess_json = ftl_nn_preprocess_json(&o->embed.preprocess, r->backbone, r->image_size);
        r->classes_json = ftl_json_string_array(r->class_names, r->class_count);
        r->cache_dir = train_cache_dir(o);
        r->dim = ftl_model_get_info(r->backbone)->feature_dim;
    }
    return st;
}

ftl_status ftl_train_run(const ftl_train_options *o, ftl_train_summary *s) {
    memset(s, 0, sizeof *s);
    double start = ftl_now();
    if (!o->train_path || !o->out_path || !o->embed.backbone_path)
        return ftl_fail(FTL_E_INVALID_ARG, "train needs a training dataset, --backbone and --out");
    FTL_TRY(train_check_paths(o, NULL));
    if (ftl_path_exists(o->out_path) && !o->overwrite && !o->resume_path)
        return ftl_fail(FTL_E_EXISTS, "model %s already exists (use --overwrite to replace it)", o->out_path);
    if (!o->val_path && (o->fit.early_stopping.monitor == FTL_MONITOR_VAL_ACC || o->fit.early_stopping.monitor == FTL_MONITOR_VAL_LOSS) &&
        o->fit.early_stopping.stop)
        return ftl_fail(FTL_E_INVALID_ARG, "early stopping on %s needs --val (or monitor=acc|loss)",
                        ftl_monitor_name(o->fit.early_stopping.monitor));
    /* Everything that can be checked before hours of work is checked first. */
    if (o->val_path && !ftl_path_exists(o->val_path))
        return ftl_fail(FTL_E_NOT_FOUND, "validation dataset %s does not exist", o->val_path);
    /* Only rank 0 reads the checkpoint (and broadcasts it): the other hosts need not have it. */
    if (o->resume_path && ftl_dist_rank(&o->fit.collectives) == 0 && !ftl_path_exists(o->resume_path))
        return ftl_fail(FTL_E_NOT_FOUND, "checkpoint %s does not exist", o->resume_path);
    bool ft = fine_tuning(o);
    if (o->fine_tune_only && !ft)
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-only needs the cut: --fine-tune-last N or --fine-tune-from TENSOR");
    if (ft && o->fine_tune.last_convs > 0 && o->fine_tune.from_tensor && o->fine_tune.from_tensor[0])
        return ftl_fail(FTL_E_INVALID_ARG, "give --fine-tune-last or --fine-tune-from, not both");
    if (o->fine_tune_only && !o->init_path && !o->resume_path)
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-only starts from a trained model: give --init MODEL.ftl");
    if (o->init_path && !o->fine_tune_only)
        return ftl_fail(FTL_E_INVALID_ARG, "--init MODEL.ftl goes with --fine-tune-only (the head is not trained again)");
    if (o->init_path && !ftl_path_exists(o->init_path))
        return ftl_fail(FTL_E_NOT_FOUND, "--init %s does not exist", o->init_path);
    if (ft && !(o->fine_tune_lr > 0)) return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-lr %g must be > 0", o->fine_tune_lr);
    if (ft && o->fine_tune_epochs < 0)
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-epochs %lld must be >= 0", (long long)o->fine_tune_epochs);
    /* the tuned top trains on the CPU whatever runs the backbone: refuse before phase 1, not after */
    if (ft && o->embed.precision == FTL_NN_BF16 && !ftl_nn_cpu_bf16_available())
        return ftl_fail(FTL_E_UNSUPPORTED, "--precision bf16 with fine-tuning: the top trains on this CPU, which has no bf16 "
                        "kernels in oneDNN (bf16 needs AVX-512): use --precision fp32, or auto");
    FTL_TRY(train_check_output_folders(o));
    train_run r, bottom; /* bottom: the cut's frozen bottom, when fine-tuning */
    memset(&r, 0, sizeof r);
    memset(&bottom, 0, sizeof bottom);
    ftl_train_options calibrated;
    ftl_nn_int8_scales *own_scales = NULL;
    ftl_status st = train_run_prepare(&r, &o, &calibrated, &own_scales);
    /* A resume continues the phase its checkpoint comes from; phase 2 then needs no phase 1. */
    int resume_phase = 1;
    ftl_epoch_log epoch0 = {.loss = NAN, .acc = NAN, .val_loss = NAN, .val_acc = NAN, .gpu_util_percent = NAN, .gpu_memory_bytes = NAN};
    if (st == FTL_OK && o->resume_path) st = fine_tune_resume_phase(o, &resume_phase, &epoch0);
    else if (o->fine_tune_only && o->fine_tune_start) epoch0 = *o->fine_tune_start; /* the caller's phase 1 */
    if (st == FTL_OK) st = train_check_resume_identity(o, &r, o->resume_path); /* before the features */
    if (st == FTL_OK && resume_phase == 2 && !ft)
        st = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it is a fine-tuning checkpoint; give the same "
                      "--fine-tune-last/--fine-tune-from as the run that wrote it", o->resume_path);
    bool run_phase1 = st == FTL_OK && !o->fine_tune_only && resume_phase == 1;
    if (st == FTL_OK) {
        s->features_cached = o->feature_cache;
        /* with a cut, phase 1's features come from the boundary rows phase 2 trains on: one bottom pass */
        if (run_phase1 && ft) st = train_run_setup_through_cut(&r, o, &bottom, s);
        else if (run_phase1) st = o->feature_cache ? train_run_setup_cached(&r, o, s) : train_run_setup_per_batch(&r, o, s);
    }
    s->dim = r.dim;
    s->classes = r.class_count;

    ftl_trainer *trainer = NULL;
    train_run_meta meta;
    train_run_meta_init(&meta, &r, o);
    const ftl_model_info *info = st == FTL_OK ? ftl_model_get_info(r.backbone) : NULL;
    ftl_fit_config fit = o->fit;
    /* The head trains where the backbone runs: on a GPU, on the GPU engine (fine-tuning's phase 2
     * keeps its head on the CPU, with the top). */
    ftl_head_engine *engine = NULL;
    snprintf(s->head_device, sizeof s->head_device, "cpu");
    ftl_device gpu;
    bool on_gpu = st == FTL_OK && nn_device_caps_of(info->device_kind)->gpu &&
                  ftl_device_select(info->device_kind, -1, &gpu) == FTL_OK;
    bool head_on_gpu = on_gpu;
    if (st == FTL_OK && run_phase1 && ftl_dist_active(&fit.collectives)) {
        /* The gradient sums take one path on all ranks (NCCL on the GPU head, MPI on the CPU's):
         * when only some ranks have a GPU, every head trains on the CPU. */
        int64_t gpu_ranks = on_gpu ? 1 : 0;
        st = ftl_dist_allreduce_i64(&fit.collectives, &gpu_ranks, 1);
        if (st == FTL_OK && gpu_ranks > 0 && gpu_ranks < fit.collectives.world_size) {
            head_on_gpu = false;
            if (fit.collectives.rank == 0)
                ftl_log_warn("%lld of %d ranks run the backbone on a GPU, the others on the CPU: every rank trains its "
                             "head on the CPU", (long long)gpu_ranks, fit.collectives.world_size);
        }
    }
    if (head_on_gpu && run_phase1) {
        st = ftl_device_head_engine_create(&gpu, r.dim, (int64_t)r.class_count, (size_t)fit.batch_size,
                                           ftl_optimizer_slot_count(&fit.optimizer),
                                           ftl_dist_active(&fit.collectives) ? &fit.collectives : NULL, &engine);
        if (st == FTL_OK) {
            fit.head_engine = engine;
            snprintf(s->head_device, sizeof s->head_device, "%s", engine->description);
        }
    }
    char *run_record =
        info && fit.log_path ? train_run_record_json(o, r.dim, r.classes_json, info, s->head_device, o->resume_path) : NULL;
    /* phase 2's record is a resume only when phase 2 itself resumes (a resumed phase 1 starts it afresh) */
    char *phase2_record = info && fit.log_path && ft
                              ? train_run_record_json(o, r.dim, r.classes_json, info, s->head_device,
                                                resume_phase == 2 ? o->resume_path : NULL)
                              : NULL;
    fit.run_record = run_record;
    fit.val_mirrored = o->val_path ? train_run_val_mirrored(&r) : NULL;
    fit.checkpoint_meta = meta.kv;
    fit.checkpoint_meta_count = TRAIN_RUN_META_COUNT;
    if (!fit.epoch_out && fit.collectives.rank == 0) fit.epoch_out = ftl_log_output();
    ftl_device_monitor *monitor = NULL;
    if (on_gpu) monitor = ftl_device_monitor_start(&gpu); /* GPU busy % and memory in every epoch line */
    if (engine && fit.epoch_out) fprintf(fit.epoch_out, "Head on %s\n", engine->description);
    if (monitor) {
        fit.device_usage = gpu_usage;
        fit.device_usage_ctx = monitor;
    }
    if (st == FTL_OK && run_phase1) st = ftl_trainer_init(&trainer, &fit, r.dim, r.class_count);
    if (st == FTL_OK && run_phase1 && o->resume_path) st = ftl_trainer_resume(trainer, o->resume_path, &r.train);
    if (st == FTL_OK && run_phase1) st = ftl_trainer_fit(trainer, &r.train, o->val_path ? &r.val : NULL, &s->fit);
    if (st == FTL_OK && run_phase1 && !ft && fit.collectives.rank == 0)
        st = train_run_save_model(&r, o, trainer, &s->fit, NULL, 0, NULL, 0);
    ftl_head_engine_free(engine); /* phase 2 trains its head on the CPU, with the top */
    engine = NULL;
    if (st == FTL_OK && ft) {
        /* Phase 1's best weights are phase 2's start and its epoch 0. */
        if (run_phase1) {
            s->head_phase = s->fit;
            epoch0 = (ftl_epoch_log){.loss = s->fit.final_loss, .acc = s->fit.final_acc, .val_loss = s->fit.final_val_loss,
                                    .val_acc = s->fit.final_val_acc, .gpu_util_percent = NAN, .gpu_memory_bytes = NAN};
        }
        st = fine_tune_phase(&r, &bottom, o, run_phase1 ? ftl_trainer_head(trainer)->params : NULL, epoch0, resume_phase == 2,
                             meta.kv, TRAIN_RUN_META_COUNT, phase2_record, s);
    }
    ftl_trainer_free(trainer);
    ftl_device_monitor_stop(monitor);
    train_run_meta_free(&meta);
    free(run_record);
    free(phase2_record);
    train_run_free(&bottom);
    train_run_free(&r);
    ftl_nn_int8_scales_free(own_scales);
    s->seconds = ftl_now() - start;
    return st;
}
