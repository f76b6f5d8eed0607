/* ftl train's inputs and outputs, checked before any work so that no output is one of its inputs
 * or another of its outputs (util/io_check.h). Shared by ftl train and each ftl sweep trial. */
#ifndef FTL_PIPELINE_TRAIN_PATHS_H
#define FTL_PIPELINE_TRAIN_PATHS_H

#include "ftl/pipeline.h"

/* report_path: --report (NULL: none). FTL_OK, or FTL_E_INVALID_ARG naming both paths. */
ftl_status train_check_paths(const ftl_train_options *options, const char *report_path);
/* The feature cache folder a run uses: --cache-dir, or ftl-feature-cache/ beside --out. Caller frees. */
char *train_cache_dir(const ftl_train_options *options);

/* A sweep trial's file beside its model: OUT.ftl -> OUT<suffix> (".ckpt", ".result.json"). Caller frees. */
char *sweep_trial_file(const char *out_path, const char *suffix);

#endif
