/* ftl train's paths: what it reads, what it writes, and the check that the two never meet. */
#include "pipeline/train_paths.h"
#include "nn/backbone_files.h"
#include "pipeline/train_run.h"
#include "util/fsutil.h"
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
