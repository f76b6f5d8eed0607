/* ftl train's paths: what it reads, what it writes, and the check that the two never meet. */
#include "pipeline/train_paths.h"
#include "ftl/sweep.h"
#include "nn/onnx/backbone_files.h"
#include "pipeline/train_run.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/io_check.h"

#include <stdlib.h>
#include <string.h>

/* What the run writes into the cache folders (feature_cache.c, calibration.c, row_group_cache.c). */
static const char *const feature_cache_files[] = {"*.features.parquet", "int8-calibration-*.json", NULL};
static const char *const data_cache_files[] = {"*.rgc", NULL};

char *train_cache_dir(const ftl_train_options *o) {
    if (o->cache_dir) return ftl_strdup(o->cache_dir);
    const char *slash = strrchr(o->out_path, '/');
    if (!slash) return ftl_strdup("ftl-feature-cache");
    return ftl_format("%.*s/ftl-feature-cache", (int)(slash - o->out_path), o->out_path);
}

ftl_status train_check_paths(const ftl_train_options *o, const char *report_path) {
    ftl_io_check *c = ftl_io_check_new("train");
    ftl_io_check_output(c, "--out", o->out_path);
    ftl_io_check_output(c, "--log", o->fit.log_path);
    ftl_io_check_output(c, "--timeline", o->fit.timeline_path);
    ftl_io_check_output(c, "--report", report_path);
    ftl_io_check_output_pattern(c, "--checkpoint", o->fit.checkpoint_pattern);
    if (fine_tuning(o)) {
        char *phase2 = fine_tune_checkpoint_pattern(o->fit.checkpoint_pattern);
        ftl_io_check_output_pattern(c, "--checkpoint (fine-tuning's)", phase2);
        free(phase2);
    }
    if (o->feature_cache) {
        char *cache = train_cache_dir(o);
        ftl_io_check_output_folder(c, "--cache-dir", cache, feature_cache_files);
        free(cache);
    } else {
        ftl_io_check_output_folder(c, "--data-cache-dir", o->data_cache_dir, data_cache_files);
    }
    ftl_io_check_input(c, "TRAIN", o->train_path);
    ftl_io_check_input(c, "--val", o->val_path);
    ftl_io_check_input(c, "--init", o->init_path);
    ftl_io_check_input(c, "--resume", o->resume_path);
    ftl_io_check_allow_pattern_input(c, "--resume");
    ftl_io_check_input(c, "--calibration", o->embed.calibration_path);
    nn_io_check_backbone(c, "--backbone", o->embed.backbone_path);
    ftl_status st = ftl_io_check_run(c);
    ftl_io_check_free(c);
    return st;
}

char *sweep_trial_file(const char *path, const char *suffix) {
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".ftl") == 0) n -= 4;
    return ftl_format("%.*s%s", (int)n, path, suffix);
}

ftl_status ftl_sweep_check_paths(const ftl_train_options *trials, int count, const char *best_path, const char *table_path,
                                 const char *json_path, const char *log_path) {
    for (int i = 0; i < count; i++) FTL_TRY(train_check_paths(&trials[i], NULL));
    if (count < 1) return FTL_OK;
    ftl_io_check *c = ftl_io_check_new("sweep");
    ftl_io_check_output(c, "--out", best_path);
    ftl_io_check_output(c, "--table", table_path);
    ftl_io_check_output(c, "the table's JSON", json_path);
    ftl_io_check_output(c, "--log", log_path);
    for (int i = 0; i < count; i++) {
        ftl_io_check_output(c, "a trial's model", trials[i].out_path);
        ftl_io_check_output(c, "a trial's log", trials[i].fit.log_path);
        char *ckpt = sweep_trial_file(trials[i].out_path, ".ckpt"), *result = sweep_trial_file(trials[i].out_path, ".result.json");
        ftl_io_check_output(c, "a trial's checkpoint", ckpt);
        ftl_io_check_output(c, "a trial's result", result);
        free(ckpt);
        free(result);
    }
    const ftl_train_options *o = &trials[0]; /* the trials share their inputs */
    ftl_io_check_input(c, "TRAIN", o->train_path);
    ftl_io_check_input(c, "--val", o->val_path);
    ftl_io_check_input(c, "--init", o->init_path);
    ftl_io_check_input(c, "--calibration", o->embed.calibration_path);
    nn_io_check_backbone(c, "--backbone", o->embed.backbone_path);
    ftl_status st = ftl_io_check_run(c);
    ftl_io_check_free(c);
    return st;
}
