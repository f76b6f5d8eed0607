/* ftl train TRAIN --val VAL --backbone MODEL.onnx --out MODEL.ftl: the article's recipe. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_train_parse(int argc, char **argv, ftl_train_options *out, const char **report_out) {
    ftl_train_options o;
    ftl_train_options_init(&o);
    const char *scale = NULL, *mean = NULL, *std = NULL, *precision = "fp32", *calibration_method = NULL, *device = "auto", *conv_algorithm = "auto", *optimizer = "nadam", *scale_lr = "none";
    const char *early = NULL, *augment = "none";
    double lr = NAN, momentum = NAN, dropout = 0, weight_decay = 0;
    int64_t batch = o.fit.batch_size, epochs = o.fit.epochs, steps = 0, seed = (int64_t)o.fit.seed, base_batch = 0;
    int64_t eval_batch = o.fit.eval_batch_size;
    bool nesterov = false, restore_best = true, drop_remainder = true, quiet = false;
    int keep_last = 0;
    double stall_timeout = 60;
    const char *report = NULL;
    const cli_flag flags[] = {
        {"val", CLI_STRING, &o.val_path, "VAL", "validation dataset (evaluated after every epoch)"},
        {"backbone", CLI_STRING, &o.embed.backbone_path, "MODEL.onnx", "the frozen pretrained backbone (required)"},
        {"out", CLI_STRING, &o.out_path, "MODEL.ftl", "where the trained model goes (required)"},
        {"features-from", CLI_STRING, &o.embed.features_from, "TENSOR", "backbone tensor to use as features (default: its output)"},
        {"input-scale", CLI_STRING, &scale, "tf|torch", "tf: x/127.5-1 (Keras, the article; default); torch: ImageNet mean/std"},
        {"mean", CLI_STRING, &mean, "R,G,B", "explicit per-channel mean in 0..1 units"},
        {"std", CLI_STRING, &std, "R,G,B", "explicit per-channel std (with --mean)"},
        {"precision", CLI_STRING, &precision, "fp32|bf16|tf32|int8|auto", "backbone arithmetic; default fp32 (tf32: GPU only; int8: CPU, calibrated convolutions; auto: bf16 where this CPU runs it faster than fp32)"},
        {"calibration-rows", CLI_INT, &o.embed.calibration_rows, "N", "int8: images the calibration runs on (a seeded sample); default 512"},
        {"calibration", CLI_STRING, &o.embed.calibration_path, "DATA.parquet", "int8: calibrate on this dataset instead of the training data"},
        {"calibration-method", CLI_STRING, &calibration_method, "percentile|minmax", "int8: each tensor's threshold: |x| at the 99.99th percentile (default) or the largest |x|"},
        {"device", CLI_STRING, &device, "cpu|cuda|auto", "where the backbone and the head run; auto (default): a visible GPU, else the CPU"},
        {"deterministic", CLI_BOOL, &o.embed.deterministic, NULL, "GPU: only algorithms that give the same bits every run"},
        {"conv-algorithm", CLI_STRING, &conv_algorithm, "auto|direct",
         "auto (default): Winograd for fp32 3x3 stride-1 convs with >= 64 channels where it pays; direct: never"},
        {"image-size", CLI_INT, &o.embed.image_size, "S", "image size when the dataset has no ftl.image_size metadata"},
        {"image-col", CLI_STRING, &o.embed.image_column, "NAME", "image column; default image"},
        {"label-col", CLI_STRING, &o.embed.label_column, "NAME", "label column; default label"},
        {"label-offset", CLI_INT, &o.embed.label_offset, "N",
         "add N to every label (-1: 1-based labels such as Spark's file_to_label); recorded in the model for eval"},
        {"epochs", CLI_INT64, &epochs, "N", "epochs; default 30"},
        {"batch", CLI_INT64, &batch, "B", "batch size; default 16"},
        {"steps-per-epoch", CLI_INT64, &steps, "N", "an epoch is N batches of an endless reshuffled stream (default: one pass)"},
        {"drop-remainder", CLI_BOOL, &drop_remainder, NULL, "only full batches (default; --no-drop-remainder keeps a short last batch)"},
        {"optimizer", CLI_STRING, &optimizer, "nadam|adam|sgd", "default nadam (Keras semantics)"},
        {"lr", CLI_DOUBLE, &lr, "LR", "learning rate (default 0.001 for nadam/adam, 0.01 for sgd)"},
        {"momentum", CLI_DOUBLE, &momentum, "M", "sgd momentum (default 0, as Keras' SGD)"},
        {"nesterov", CLI_BOOL, &nesterov, NULL, "sgd with Nesterov momentum"},
        {"weight-decay", CLI_DOUBLE, &weight_decay, "WD", "L2 penalty added to every gradient (torch.optim's weight_decay, not AdamW's); default 0"},
        {"scale-lr", CLI_STRING, &scale_lr, "none|linear|sqrt", "scale the learning rate with the batch size relative to --base-batch"},
        {"base-batch", CLI_INT64, &base_batch, "B0", "the batch size --lr was tuned for"},
        {"warmup-epochs", CLI_DOUBLE, &o.fit.warmup_epochs, "N", "ramp the learning rate up linearly over N epochs (Goyal et al.)"},
        {"dropout", CLI_DOUBLE, &dropout, "P", "dropout before the dense layer; default 0 (the article: 0.5)"},
        {"seed", CLI_INT64, &seed, "N", "weights, dropout and data order; default 42"},
        {"early-stopping", CLI_STRING, &early, "SPEC", "e.g. monitor=val_acc,patience=3,min_delta=0.001"},
        {"restore-best", CLI_BOOL, &restore_best, NULL, "end with the best epoch's weights (default; --no-restore-best keeps the last)"},
        {"checkpoint", CLI_STRING, &o.fit.checkpoint_pattern, "PATTERN", "checkpoint every epoch, e.g. 'ckpt/checkpoint-{epoch}.ckpt'"},
        {"save-best-only", CLI_BOOL, &o.fit.save_best_only, NULL, "checkpoint only epochs that improved the monitored metric"},
        {"keep-last", CLI_INT, &keep_last, "K", "keep only the last K checkpoints"},
        {"resume", CLI_STRING, &o.resume_path, "CKPT", "continue from a checkpoint (bit-identical to an uninterrupted run)"},
        {"log", CLI_STRING, &o.fit.log_path, "RUN.jsonl", "per-epoch metrics, learning rate, speed and time split as JSON lines"},
        {"report", CLI_STRING, &report, "REPORT.html", "after training, draw the --log (and --timeline) as an HTML page (ftl report)"},
        {"timeline", CLI_STRING, &o.fit.timeline_path, "TRACE.json",
         "Chrome trace (chrome://tracing, Perfetto): a track per rank, spans for data wait, backbone, head, allreduce, validation, checkpoint"},
        {"feature-cache", CLI_BOOL, &o.feature_cache, NULL, "embed every image once, train on stored features (default; --no-feature-cache: backbone on every batch, as the article)"},
        {"cache-dir", CLI_STRING, &o.cache_dir, "DIR", "feature cache folder; default ftl-feature-cache/ next to --out"},
        {"max-memory", CLI_BYTES, &o.max_memory, "BYTES", "stream cached features larger than this; default half the RAM, at most 1 GiB"},
        {"shuffle-buffer", CLI_INT64, &o.shuffle_buffer, "N", "rows in the shuffle buffer; default 400 (the article's)"},
        {"augment", CLI_STRING, &augment, "flip|none",
         "flip: each epoch every training image is mirrored left-right or not, at random (both orientations cached)"},
        {"data-cache-dir", CLI_STRING, &o.data_cache_dir, "DIR", "local-disk cache of image row groups (with --no-feature-cache)"},
        {"data-cache-size-limit", CLI_BYTES, &o.data_cache_limit, "BYTES", "size limit of --data-cache-dir"},
        {"eval-batch", CLI_INT64, &eval_batch, "N", "validation batch size; default 1024"},
        {"embed-batch", CLI_INT, &o.embed.batch, "N", "images per backbone pass; default 32"},
        {"threads", CLI_INT, &o.embed.threads, "N", "compute threads; default: all cores"},
        {"loader-threads", CLI_INT, &o.embed.loader_threads, "N", "background readers; default 1"},
        {"overwrite", CLI_BOOL, &o.overwrite, NULL, "replace an existing --out"},
        {"stall-timeout", CLI_DOUBLE, &stall_timeout, "S",
         "under mpirun: abort when a rank waits S s for the others in one step, naming the missing ranks (default 60, 0 = never)"},
        {"fine-tune-last", CLI_INT, &o.fine_tune.last_convs, "N",
         "phase 2: unfreeze the last N Conv nodes (and every node after them) and train them with the head"},
        {"fine-tune-from", CLI_STRING, &o.fine_tune.from_tensor, "TENSOR", "phase 2: unfreeze every node after TENSOR"},
        {"fine-tune-epochs", CLI_INT64, &o.fine_tune_epochs, "N", "phase 2 epochs (its own early stopping); default 10"},
        {"fine-tune-lr", CLI_DOUBLE, &o.fine_tune_lr, "LR", "phase 2 learning rate; default 1e-5 (the Keras guide)"},
        {"fine-tune-warmup-epochs", CLI_DOUBLE, &o.fine_tune_warmup_epochs, "N", "phase 2 learning-rate warmup"},
        {"fine-tune-only", CLI_BOOL, &o.fine_tune_only, NULL, "skip phase 1: fine-tune the model given by --init"},
        {"init", CLI_STRING, &o.init_path, "MODEL.ftl", "the trained model --fine-tune-only starts from"},
        {"quiet", CLI_BOOL, &quiet, NULL, "only warnings, errors and the final line"},
    };
    const cli_command cmd = {"train", "ftl train TRAIN --val VAL --backbone MODEL.onnx --out MODEL.ftl [options]",
                             "Trains a softmax head (optional dropout + dense) on a frozen backbone's features, with early\n"
                             "stopping, learning-rate scaling and warmup, checkpoints and exact resume. With --fine-tune-last\n"
                             "or --fine-tune-from, a phase 2 then trains the backbone's top with the head (Keras' two-phase\n"
                             "recipe) on cached boundary tensors, never ending worse on val than phase 1.\n"
                             "Across ranks and hosts: mpirun -np N ftl train ...; for -H/--hostfile add Open MPI's keepalive\n"
                             "settings (--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca\n"
                             "oob_tcp_keepalive_probes 3) so that a lost host ends the job; see docs/DIST.md.",
                             1, 1};
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) return rc < 0 ? -1 : rc;
    if (!o.embed.backbone_path || !o.out_path) {
        fprintf(stderr, "ftl train: error: --backbone MODEL.onnx and --out MODEL.ftl are required\n");
        return 2;
    }
    if (batch < 1 || batch > FTL_LOADER_MAX_BATCH || eval_batch < 1 || eval_batch > FTL_LOADER_MAX_BATCH || epochs < 1 ||
        steps < 0 || seed < 0 || keep_last < 0 || !(dropout >= 0 && dropout < 1) || o.shuffle_buffer < 0 ||
        !(weight_decay >= 0)) {
        fprintf(stderr, "ftl train: error: --batch and --eval-batch must be 1..%d, --epochs positive, --steps-per-epoch, "
                        "--seed, --keep-last, --shuffle-buffer and --weight-decay non-negative, --dropout in [0, 1)\n",
                FTL_LOADER_MAX_BATCH);
        return 2;
    }
    o.train_path = pos[0];
    ftl_optimizer_kind kind;
    ftl_status st = ftl_optimizer_kind_parse(optimizer, &kind);
    /* A flag that cannot take effect is an error or a warning, never silently dropped. */
    if (st == FTL_OK && kind != FTL_OPTIMIZER_SGD && (!isnan(momentum) || nesterov)) {
        fprintf(stderr, "ftl train: error: --momentum and --nesterov apply to --optimizer sgd, not %s\n", optimizer);
        return 2;
    }
    if (report && !o.fit.log_path) {
        fprintf(stderr, "ftl train: error: --report draws the log: give --log RUN.jsonl too\n");
        return 2;
    }
    if (report && access(report, F_OK) == 0 && !o.overwrite) {
        fprintf(stderr, "ftl train: error: report %s already exists (use --overwrite to replace it)\n", report);
        return 2;
    }
    if ((keep_last > 0 || o.fit.save_best_only) && !o.fit.checkpoint_pattern) {
        fprintf(stderr, "ftl train: error: --keep-last and --save-best-only need --checkpoint PATTERN\n");
        return 2;
    }
    if (o.feature_cache && o.data_cache_dir)
        fprintf(stderr, "ftl: warning: --data-cache-dir caches image row groups for --no-feature-cache; with the feature "
                        "cache every image is read once, so it is not used\n");
    if (!o.feature_cache && (o.cache_dir || o.max_memory))
        fprintf(stderr, "ftl: warning: --cache-dir and --max-memory belong to the feature cache, which --no-feature-cache turns off\n");
    if (st == FTL_OK) {
        o.fit.optimizer = ftl_optimizer_config_default(kind);
        if (!isnan(lr)) o.fit.optimizer.lr = lr;
        if (!isnan(momentum)) o.fit.optimizer.momentum = momentum;
        o.fit.optimizer.nesterov = nesterov;
        o.fit.optimizer.weight_decay = weight_decay;
        st = ftl_lr_scaling_parse(scale_lr, &o.fit.lr_scaling);
    }
    if (st == FTL_OK && o.fit.lr_scaling != FTL_LR_SCALE_NONE && base_batch < 1) {
        fprintf(stderr, "ftl train: error: --scale-lr needs --base-batch B0 (the batch size the learning rate was tuned for)\n");
        return 2;
    }
    if (st == FTL_OK && early) st = ftl_early_stopping_parse(early, &o.fit.early_stopping);
    if (strcmp(augment, "flip") == 0) {
        o.augment_flip = true;
    } else if (strcmp(augment, "none") != 0) {
        fprintf(stderr, "ftl train: error: --augment %s: ftl augments with flip (or none); augmentations that change "
                        "an image differently every epoch, such as crops, cannot use the feature cache\n", augment);
        return 2;
    }
    if (st == FTL_OK) st = ftl_device_parse(device, &o.embed.device);
    if (st == FTL_OK) st = cli_precision(precision, o.embed.device, o.embed.threads, &o.embed.precision);
    if (st == FTL_OK) st = cli_calibration(calibration_method, o.embed.precision, o.embed.calibration_path, &o.embed.calibration_method);
    if (st == FTL_OK) st = ftl_nn_conv_algorithm_parse(conv_algorithm, &o.embed.conv_algorithm);
    if (st == FTL_OK) st = ftl_nn_preprocess_parse(&o.embed.preprocess, scale, mean, std);
    if (st != FTL_OK) return cli_report(st);
    o.fit.early_stopping.restore_best = restore_best;
    o.fit.batch_size = batch;
    o.fit.epochs = epochs;
    o.fit.steps_per_epoch = steps;
    o.fit.drop_remainder = drop_remainder;
    o.fit.eval_batch_size = eval_batch;
    o.fit.base_batch = base_batch;
    o.fit.dropout = dropout;
    o.fit.seed = (uint64_t)seed;
    o.fit.keep_last = keep_last;
    o.show_progress = !quiet;
    o.embed.show_progress = !quiet;
    if (quiet) ftl_log_set_level(FTL_LOG_WARN);
    if (cli_set_stall_timeout("train", stall_timeout) != 0) return 2;
    o.fit.collectives = *ftl_dist_world();
    o.argc = argc;
    o.argv = argv;
    *out = o;
    *report_out = report;
    return 0;
}

int cli_cmd_train(int argc, char **argv) {
    ftl_train_options o;
    const char *report = NULL;
    int rc = cli_train_parse(argc, argv, &o, &report);
    if (rc != 0) return rc < 0 ? 0 : rc;
    ftl_train_summary s;
    ftl_status st = ftl_train_run(&o, &s);
    if (st == FTL_OK && report && ftl_dist_rank(ftl_dist_world()) == 0) {
        const char *logs[1] = {o.fit.log_path};
        ftl_report_options ro = {.logs = logs, .log_count = 1, .timeline = o.fit.timeline_path, .output_path = report,
                                 .overwrite = true};
        ftl_dist_phase_begin(ftl_dist_world(), "writing the report");
        st = ftl_report_write(&ro);
        ftl_dist_phase_end(ftl_dist_world());
    }
    if (st == FTL_OK && ftl_dist_rank(ftl_dist_world()) == 0 && s.fine_tuned && !o.fine_tune_only && s.head_phase.epochs_run > 0)
        printf("train: phase 1 (head): %lld epochs, best epoch %lld: val_acc %.4f, val_loss %.4f\n",
               (long long)s.head_phase.epochs_run, (long long)s.head_phase.best_epoch, s.head_phase.final_val_acc,
               s.head_phase.final_val_loss);
    if (st == FTL_OK && ftl_dist_rank(ftl_dist_world()) == 0) {
        const ftl_fit_result *r = &s.fit;
        /* best epoch 0 of phase 2: no fine-tuning epoch beat phase 1, whose model is kept */
        char best[64];
        if (r->best_epoch > 0) snprintf(best, sizeof best, "best epoch %lld", (long long)r->best_epoch);
        else snprintf(best, sizeof best, "%s", s.fine_tuned ? "no epoch beat phase 1" : "no best epoch");
        printf("train: %s%lld epochs in %.1f s (features %.1f s%s); %s; model %s: val_acc %.4f, val_loss %.4f, "
               "acc %.4f%s\n",
               s.fine_tuned ? "phase 2 (fine-tuning): " : "", (long long)r->epochs_run, s.seconds, s.features_seconds,
               !s.features_cached ? ", recomputed every batch" : s.train_cache_reused ? ", from the cache" : "", best,
               o.out_path, r->final_val_acc, r->final_val_loss, r->final_acc, r->stopped_early ? " (stopped early)" : "");
    }
    return cli_report(st);
}
