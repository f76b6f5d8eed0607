/* ftl train's options by name (ftl/pipeline.h ftl_train_args_parse): the one table and the one set
 * of checks behind `ftl train`, each trial of `ftl sweep`, and the Python package's ftl.train(**options),
 * so no caller trains with options the command line would refuse. */
#include "ftl/pipeline.h"
#include "pipeline/train_paths.h"
#include "ftl/args.h"
#include "ftl/dist.h"
#include "ftl/loader.h"
#include "ftl/profile.h"
#include "ftl/report.h"
#include "util/error.h"
#include "util/log.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

/* The options that are parsed into locals before they land in ftl_train_options. */
typedef struct train_arg_values {
    const char *scale, *mean, *std, *precision, *calibration_method, *device, *conv_algorithm, *optimizer, *scale_lr;
    const char *early, *augment, *tta, *report, *lr_schedule, *fine_tune_lr_schedule;
    double lr, momentum, dropout, weight_decay, stall_timeout, min_lr;
    int64_t batch, epochs, steps, seed, base_batch, eval_batch;
    bool nesterov, restore_best, drop_remainder, quiet;
    int keep_last;
} train_arg_values;

enum { TRAIN_ARG_COUNT = 96 };

static int train_arg_table(train_arg_values *v, ftl_train_options *o, ftl_arg *out) {
    const ftl_arg table[] = {
        {"val", FTL_ARG_STRING, &o->val_path, "VAL", "validation dataset (evaluated after every epoch)"},
        {"backbone", FTL_ARG_STRING, &o->embed.backbone_path, "MODEL.onnx", "the frozen pretrained backbone (required)"},
        {"out", FTL_ARG_STRING, &o->out_path, "MODEL.ftl", "where the trained model goes (required)"},
        {"features-from", FTL_ARG_STRING, &o->embed.features_from, "TENSOR", "backbone tensor to use as features (default: its output)"},
        {"input-scale", FTL_ARG_STRING, &v->scale, "tf|torch", "tf: x/127.5-1 (Keras, the article; default); torch: ImageNet mean/std"},
        {"mean", FTL_ARG_STRING, &v->mean, "R,G,B", "explicit per-channel mean in 0..1 units"},
        {"std", FTL_ARG_STRING, &v->std, "R,G,B", "explicit per-channel std (with --mean)"},
        {"precision", FTL_ARG_STRING, &v->precision, "fp32|bf16|tf32|int8|auto", "backbone arithmetic; default fp32 (tf32: GPU only; int8: CPU, calibrated convolutions; auto: bf16 where this CPU runs it faster than fp32)"},
        {"calibration-rows", FTL_ARG_INT, &o->embed.calibration_rows, "N", "int8: images the calibration runs on (a seeded sample); default 512"},
        {"calibration", FTL_ARG_STRING, &o->embed.calibration_path, "DATA.parquet", "int8: calibrate on this dataset instead of the training data"},
        {"calibration-method", FTL_ARG_STRING, &v->calibration_method, "percentile|minmax", "int8: each tensor's threshold: |x| at the 99.99th percentile (default) or the largest |x|"},
        {"device", FTL_ARG_STRING, &v->device, "cpu|cuda|auto", "where the backbone and the head run; auto (default): a visible GPU, else the CPU"},
        {"deterministic", FTL_ARG_BOOL, &o->embed.deterministic, NULL, "GPU: only algorithms that give the same bits every run"},
        {"conv-algorithm", FTL_ARG_STRING, &v->conv_algorithm, "auto|direct",
         "auto (default): Winograd for fp32 3x3 stride-1 convs with >= 64 channels where it pays; direct: never"},
        {"image-size", FTL_ARG_INT, &o->embed.image_size, "S", "image size when the dataset has no ftl.image_size metadata"},
        {"image-col", FTL_ARG_STRING, &o->embed.image_column, "NAME", "image column; default image"},
        {"label-col", FTL_ARG_STRING, &o->embed.label_column, "NAME", "label column; default label"},
        {"label-offset", FTL_ARG_INT, &o->embed.label_offset, "N",
         "add N to every label (-1: 1-based labels such as Spark's file_to_label); recorded in the model for eval"},
        {"epochs", FTL_ARG_INT64, &v->epochs, "N", "epochs; default 30"},
        {"batch", FTL_ARG_INT64, &v->batch, "B", "batch size; default 16"},
        {"steps-per-epoch", FTL_ARG_INT64, &v->steps, "N", "an epoch is N batches of an endless reshuffled stream (default: one pass)"},
        {"drop-remainder", FTL_ARG_BOOL, &v->drop_remainder, NULL, "only full batches (default; --no-drop-remainder keeps a short last batch)"},
        {"optimizer", FTL_ARG_STRING, &v->optimizer, "nadam|adam|sgd", "default nadam (Keras semantics)"},
        {"lr", FTL_ARG_DOUBLE, &v->lr, "LR", "learning rate (default 0.001 for nadam/adam, 0.01 for sgd)"},
        {"momentum", FTL_ARG_DOUBLE, &v->momentum, "M", "sgd momentum (default 0, as Keras' SGD)"},
        {"nesterov", FTL_ARG_BOOL, &v->nesterov, NULL, "sgd with Nesterov momentum"},
        {"weight-decay", FTL_ARG_DOUBLE, &v->weight_decay, "WD", "L2 penalty added to every gradient (torch.optim's weight_decay, not AdamW's); default 0"},
        {"scale-lr", FTL_ARG_STRING, &v->scale_lr, "none|linear|sqrt", "scale the learning rate with the batch size relative to --base-batch"},
        {"base-batch", FTL_ARG_INT64, &v->base_batch, "B0", "the batch size --lr was tuned for"},
        {"warmup-epochs", FTL_ARG_DOUBLE, &o->fit.warmup_epochs, "N", "ramp the learning rate up linearly over N epochs (Goyal et al.)"},
        {"lr-schedule", FTL_ARG_STRING, &v->lr_schedule, "constant|cosine|step:E:G|plateau:P:F[:MIN]",
         "the learning rate per epoch after warmup: constant (default); cosine to --min-lr over --epochs; x G every E epochs; "
         "x F after P epochs without improving the early-stopping monitor (Keras ReduceLROnPlateau). Free: no extra backbone pass"},
        {"min-lr", FTL_ARG_DOUBLE, &v->min_lr, "LR", "the floor of cosine and plateau; default 0"},
        {"label-smoothing", FTL_ARG_DOUBLE, &o->fit.label_smoothing, "E",
         "train against (1-E) onehot + E/classes (Keras/PyTorch semantics); the loss shown for training is the smoothed "
         "one, val's the plain one. Free: no extra backbone pass"},
        {"dropout", FTL_ARG_DOUBLE, &v->dropout, "P", "dropout before the dense layer; default 0 (the article: 0.5)"},
        {"seed", FTL_ARG_INT64, &v->seed, "N", "weights, dropout and data order; default 42"},
        {"early-stopping", FTL_ARG_STRING, &v->early, "SPEC", "e.g. monitor=val_acc,patience=3,min_delta=0.001"},
        {"restore-best", FTL_ARG_BOOL, &v->restore_best, NULL, "end with the best epoch's weights (default; --no-restore-best keeps the last)"},
        {"checkpoint", FTL_ARG_STRING, &o->fit.checkpoint_pattern, "PATTERN", "checkpoint every epoch, e.g. 'ckpt/checkpoint-{epoch}.ckpt'"},
        {"save-best-only", FTL_ARG_BOOL, &o->fit.save_best_only, NULL, "checkpoint only epochs that improved the monitored metric"},
        {"keep-last", FTL_ARG_INT, &v->keep_last, "K",
         "keep only this run's last K checkpoints (a --resume finishes deletions a killed run owed; other runs' files are kept)"},
        {"resume", FTL_ARG_STRING, &o->resume_path, "CKPT", "continue from a checkpoint (bit-identical to an uninterrupted run)"},
        {"log", FTL_ARG_STRING, &o->fit.log_path, "RUN.jsonl", "per-epoch metrics, learning rate, speed and time split as JSON lines"},
        {"report", FTL_ARG_STRING, &v->report, "REPORT.html", "after training, draw the --log (and --timeline) as an HTML page (ftl report)"},
        {"timeline", FTL_ARG_STRING, &o->fit.timeline_path, "TRACE.json",
         "Chrome trace (chrome://tracing, Perfetto): a track per rank, spans for data wait, backbone, head, allreduce, validation, checkpoint"},
        {"feature-cache", FTL_ARG_BOOL, &o->feature_cache, NULL, "embed every image once, train on stored features (default; --no-feature-cache: backbone on every batch, as the article)"},
        {"cache-dir", FTL_ARG_STRING, &o->cache_dir, "DIR", "feature cache folder; default ftl-feature-cache/ next to --out"},
        {"max-memory", FTL_ARG_BYTES, &o->max_memory, "BYTES", "stream cached features larger than this; default half the RAM, at most 1 GiB"},
        {"shuffle-buffer", FTL_ARG_INT64, &o->shuffle_buffer, "N", "rows in the shuffle buffer; default 400 (the article's)"},
        {"augment", FTL_ARG_STRING, &v->augment, "flip|none",
         "flip: each epoch every training image is mirrored left-right or not, at random (both orientations cached)"},
        {"tta", FTL_ARG_STRING, &v->tta, "flip|none",
         "flip: validation scores the mean of each image's and its mirror image's probabilities, and the model records it "
         "for eval, predict and export (one more backbone pass over val, cached; fine-tuning: the top over mirrored val each epoch)"},
        {"data-cache-dir", FTL_ARG_STRING, &o->data_cache_dir, "DIR", "local-disk cache of image row groups (with --no-feature-cache)"},
        {"data-cache-size-limit", FTL_ARG_BYTES, &o->data_cache_limit, "BYTES", "size limit of --data-cache-dir"},
        {"eval-batch", FTL_ARG_INT64, &v->eval_batch, "N", "validation batch size; default 1024"},
        {"embed-batch", FTL_ARG_INT, &o->embed.batch, "N", "images per backbone pass; default 32"},
        {"threads", FTL_ARG_INT, &o->embed.threads, "N", "compute threads; default: all cores"},
        {"loader-threads", FTL_ARG_INT, &o->embed.loader_threads, "N", "background readers; default 1, or one per core for a --keep-encoded dataset (they decode)"},
        {"overwrite", FTL_ARG_BOOL, &o->overwrite, NULL, "replace an existing --out"},
        {"strict", FTL_ARG_BOOL, &o->strict, NULL,
         "a class without any training (or validation) image is an error, not a warning"},
        {"stall-timeout", FTL_ARG_DOUBLE, &v->stall_timeout, "S",
         "under mpirun: abort when a rank waits S s for the others in one step, naming the missing ranks (default 60, 0 = never)"},
        {"fine-tune-last", FTL_ARG_INT, &o->fine_tune.last_convs, "N",
         "phase 2: unfreeze the last N Conv nodes (and every node after them) and train them with the head"},
        {"fine-tune-from", FTL_ARG_STRING, &o->fine_tune.from_tensor, "TENSOR", "phase 2: unfreeze every node after TENSOR"},
        {"fine-tune-epochs", FTL_ARG_INT64, &o->fine_tune_epochs, "N", "phase 2 epochs (its own early stopping); default 10"},
        {"fine-tune-lr", FTL_ARG_DOUBLE, &o->fine_tune_lr, "LR", "phase 2 learning rate; default 1e-5 (the Keras guide)"},
        {"fine-tune-warmup-epochs", FTL_ARG_DOUBLE, &o->fine_tune_warmup_epochs, "N", "phase 2 learning-rate warmup"},
        {"fine-tune-lr-schedule", FTL_ARG_STRING, &v->fine_tune_lr_schedule, "SPEC", "phase 2's --lr-schedule (over --fine-tune-epochs); default constant"},
        {"fine-tune-only", FTL_ARG_BOOL, &o->fine_tune_only, NULL, "skip phase 1: fine-tune the model given by --init"},
        {"init", FTL_ARG_STRING, &o->init_path, "MODEL.ftl", "the trained model --fine-tune-only starts from"},
        {"quiet", FTL_ARG_BOOL, &v->quiet, NULL, "only warnings, errors and the final line"},
    };

    _Static_assert(sizeof table / sizeof table[0] <= TRAIN_ARG_COUNT, "raise TRAIN_ARG_COUNT");
    int n = (int)(sizeof table / sizeof table[0]);
    memcpy(out, table, sizeof table);
    return n;
}

const ftl_arg *ftl_train_arg_table(int *count) {
    static ftl_arg described[TRAIN_ARG_COUNT];
    static int n;
    if (n == 0) {
        train_arg_values v;
        ftl_train_options o;
        int k = train_arg_table(&v, &o, described);
        for (int i = 0; i < k; i++) described[i].target = NULL;
        n = k;
    }
    *count = n;
    return described;
}

ftl_status ftl_precision_resolve(const char *text, ftl_device_kind device, int threads, ftl_nn_precision *precision) {
    if (strcmp(text, "auto") != 0) return ftl_nn_precision_parse(text, precision);
    char why[200];
    const ftl_collectives *world = ftl_dist_world();
    ftl_status st = ftl_nn_precision_auto_agreed(world, device, threads, precision, why, sizeof why);
    if (st == FTL_OK) ftl_log_info("ftl: --precision auto: %s", why);
    return st;
}

ftl_status ftl_calibration_method_resolve(const char *method, ftl_nn_precision precision, const char *calibration_path,
                                          ftl_nn_calibration_method *out) {
    if (precision != FTL_NN_INT8 && (method || calibration_path))
        ftl_log_warn("--calibration and --calibration-method belong to --precision int8; ignored");
    return method ? ftl_nn_calibration_method_parse(method, out) : FTL_OK;
}

static ftl_status check_values(const train_arg_values *v, const ftl_train_options *o) {
    if (!o->embed.backbone_path || !o->out_path)
        return ftl_fail(FTL_E_INVALID_ARG, "--backbone MODEL.onnx and --out MODEL.ftl are required");
    if (v->batch < 1 || v->batch > FTL_LOADER_MAX_BATCH)
        return ftl_fail(FTL_E_INVALID_ARG, "--batch must be 1..%d, not %lld", FTL_LOADER_MAX_BATCH, (long long)v->batch);
    if (v->eval_batch < 1 || v->eval_batch > FTL_LOADER_MAX_BATCH)
        return ftl_fail(FTL_E_INVALID_ARG, "--eval-batch must be 1..%d, not %lld", FTL_LOADER_MAX_BATCH,
                        (long long)v->eval_batch);
    /* checked here, where the option has its name: the backbone's own check knows it only as a batch */
    if (o->embed.batch < 1 || o->embed.batch > FTL_MODEL_MAX_BATCH)
        return ftl_fail(FTL_E_INVALID_ARG, "--embed-batch must be 1..%d, not %d", FTL_MODEL_MAX_BATCH, o->embed.batch);
    if (v->epochs < 1) return ftl_fail(FTL_E_INVALID_ARG, "--epochs must be positive, not %lld", (long long)v->epochs);
    const struct { const char *name; double value; } counts[] = {
        {"steps-per-epoch", (double)v->steps}, {"seed", (double)v->seed}, {"keep-last", v->keep_last},
        {"shuffle-buffer", (double)o->shuffle_buffer}, {"weight-decay", v->weight_decay}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (!(counts[i].value >= 0))
            return ftl_fail(FTL_E_INVALID_ARG, "--%s must be non-negative, not %g", counts[i].name, counts[i].value);
    if (!(v->dropout >= 0 && v->dropout < 1))
        return ftl_fail(FTL_E_INVALID_ARG, "--dropout must be in [0, 1), not %g", v->dropout);
    if (!(o->fit.label_smoothing >= 0 && o->fit.label_smoothing < 1))
        return ftl_fail(FTL_E_INVALID_ARG, "--label-smoothing must be in [0, 1), not %g", o->fit.label_smoothing);
    if (!(v->min_lr >= 0)) return ftl_fail(FTL_E_INVALID_ARG, "--min-lr must be >= 0, not %g", v->min_lr);
    if (!isnan(v->lr) && !(v->lr > 0)) return ftl_fail(FTL_E_INVALID_ARG, "--lr must be positive, not %g", v->lr);
    if (v->report && !o->fit.log_path)
        return ftl_fail(FTL_E_INVALID_ARG, "--report draws the log: give --log RUN.jsonl too");
    if (v->report && access(v->report, F_OK) == 0 && !o->overwrite)
        return ftl_fail(FTL_E_EXISTS, "report %s already exists (use --overwrite to replace it)", v->report);
    if (v->report) FTL_TRY(train_check_paths(o, v->report)); /* the rest is checked again by ftl_train_run */
    if ((v->keep_last > 0 || o->fit.save_best_only) && !o->fit.checkpoint_pattern)
        return ftl_fail(FTL_E_INVALID_ARG, "--keep-last and --save-best-only need --checkpoint PATTERN");
    if (!(v->stall_timeout >= 0) || isinf(v->stall_timeout))
        return ftl_fail(FTL_E_INVALID_ARG, "--stall-timeout must be a finite number of seconds >= 0 (0 = never)");
    return FTL_OK;
}

ftl_status ftl_train_args_parse(int argc, char **argv, ftl_train_options *out, ftl_train_args *extra) {
    memset(extra, 0, sizeof *extra);
    ftl_train_options o;
    ftl_train_options_init(&o);
    train_arg_values v = {.precision = "fp32", .device = "auto", .conv_algorithm = "auto", .optimizer = "nadam",
                          .scale_lr = "none", .augment = "none", .lr = NAN, .momentum = NAN,
                          .batch = o.fit.batch_size, .epochs = o.fit.epochs, .seed = (int64_t)o.fit.seed,
                          .eval_batch = o.fit.eval_batch_size, .restore_best = true, .drop_remainder = true,
                          .stall_timeout = 60};
    ftl_arg table[TRAIN_ARG_COUNT];
    int n = train_arg_table(&v, &o, table);
    const char *pos[1];
    int npos = 0;
    FTL_TRY(ftl_args_parse(table, n, argc, argv, pos, 1, &npos, &extra->help_asked));
    if (extra->help_asked) return FTL_OK;
    if (npos < 1) return ftl_fail(FTL_E_INVALID_ARG, "missing the training dataset (ftl train TRAIN ...)");
    FTL_TRY(check_values(&v, &o));
    o.train_path = pos[0];
    ftl_optimizer_kind kind;
    FTL_TRY(ftl_optimizer_kind_parse(v.optimizer, &kind));
    /* An option that cannot take effect is an error or a warning, never silently dropped. */
    if (kind != FTL_OPTIMIZER_SGD && (!isnan(v.momentum) || v.nesterov))
        return ftl_fail(FTL_E_INVALID_ARG, "--momentum and --nesterov apply to --optimizer sgd, not %s", v.optimizer);
    if (o.feature_cache && o.data_cache_dir)
        ftl_log_warn("--data-cache-dir caches image row groups for --no-feature-cache; with the feature cache every "
                     "image is read once, so it is not used");
    if (!o.feature_cache && (o.cache_dir || o.max_memory))
        ftl_log_warn("--cache-dir and --max-memory belong to the feature cache, which --no-feature-cache turns off");
    o.fit.optimizer = ftl_optimizer_config_default(kind);
    if (!isnan(v.lr)) o.fit.optimizer.lr = v.lr;
    if (!isnan(v.momentum)) o.fit.optimizer.momentum = v.momentum;
    o.fit.optimizer.nesterov = v.nesterov;
    o.fit.optimizer.weight_decay = v.weight_decay;
    FTL_TRY(ftl_lr_scaling_parse(v.scale_lr, &o.fit.lr_scaling));
    if (o.fit.lr_scaling != FTL_LR_SCALE_NONE && v.base_batch < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "--scale-lr needs --base-batch B0 (the batch size the learning rate was tuned for)");
    if (v.early) FTL_TRY(ftl_early_stopping_parse(v.early, &o.fit.early_stopping));
    o.fit.lr_decay.min_lr = o.fine_tune_lr_decay.min_lr = v.min_lr;
    if (v.lr_schedule) FTL_TRY(ftl_lr_decay_parse(v.lr_schedule, "lr-schedule", &o.fit.lr_decay));
    if (v.fine_tune_lr_schedule)
        FTL_TRY(ftl_lr_decay_parse(v.fine_tune_lr_schedule, "fine-tune-lr-schedule", &o.fine_tune_lr_decay));
    if (v.min_lr > 0 && o.fit.lr_decay.kind != FTL_LR_COSINE && o.fit.lr_decay.kind != FTL_LR_PLATEAU &&
        o.fine_tune_lr_decay.kind != FTL_LR_COSINE && o.fine_tune_lr_decay.kind != FTL_LR_PLATEAU)
        return ftl_fail(FTL_E_INVALID_ARG, "--min-lr is the floor of --lr-schedule cosine or plateau, which this run does not use");
    if (strcmp(v.augment, "flip") == 0) o.augment_flip = true;
    else if (strcmp(v.augment, "none") != 0)
        return ftl_fail(FTL_E_INVALID_ARG, "--augment %s: ftl augments with flip (or none); augmentations that change an "
                                           "image differently every epoch, such as crops, cannot use the feature cache",
                        v.augment);
    if (v.tta) {
        ftl_tta tta;
        FTL_TRY(ftl_tta_parse(v.tta, false, &tta));
        o.tta_flip = tta == FTL_TTA_FLIP;
    }
    if (o.tta_flip && !o.val_path)
        ftl_log_warn("--tta flip scores validation, and there is no --val: it only sets the model's default for eval and predict");
    FTL_TRY(ftl_device_parse(v.device, &o.embed.device));
    FTL_TRY(ftl_precision_resolve(v.precision, o.embed.device, o.embed.threads, &o.embed.precision));
    FTL_TRY(ftl_calibration_method_resolve(v.calibration_method, o.embed.precision, o.embed.calibration_path,
                                           &o.embed.calibration_method));
    FTL_TRY(ftl_nn_conv_algorithm_parse(v.conv_algorithm, &o.embed.conv_algorithm));
    FTL_TRY(ftl_nn_preprocess_parse(&o.embed.preprocess, v.scale, v.mean, v.std));
    o.fit.early_stopping.restore_best = v.restore_best;
    o.fit.batch_size = v.batch;
    o.fit.epochs = v.epochs;
    o.fit.steps_per_epoch = v.steps;
    o.fit.drop_remainder = v.drop_remainder;
    o.fit.eval_batch_size = v.eval_batch;
    o.fit.base_batch = v.base_batch;
    o.fit.dropout = v.dropout;
    o.fit.seed = (uint64_t)v.seed;
    o.fit.keep_last = v.keep_last;
    o.show_progress = !v.quiet;
    o.embed.show_progress = !v.quiet;
    ftl_dist_set_stall_timeout(v.stall_timeout);
    o.fit.collectives = *ftl_dist_world();
    o.argc = argc;
    o.argv = argv;
    extra->report_path = v.report;
    extra->quiet = v.quiet;
    *out = o;
    return FTL_OK;
}

ftl_status ftl_train_write_report(const ftl_train_options *o, const char *report_path) {
    if (!report_path || ftl_dist_rank(ftl_dist_world()) != 0) return FTL_OK;
    const char *logs[1] = {o->fit.log_path};
    ftl_report_options ro = {.logs = logs, .log_count = 1, .timeline = o->fit.timeline_path, .output_path = report_path,
                             .overwrite = true};
    ftl_dist_phase_begin(ftl_dist_world(), "writing the report");
    ftl_status st = ftl_report_write(&ro);
    ftl_dist_phase_end(ftl_dist_world());
    return st;
}
