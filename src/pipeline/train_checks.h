/* What a training run can know before its work (the features, hours of epochs) is checked before
 * it: output folders writable, a resume checkpoint's identity, labels against the class count and
 * classes without images. ftl train and ftl sweep call these at their start. Internal to src/pipeline. */
#ifndef FTL_PIPELINE_TRAIN_CHECKS_H
#define FTL_PIPELINE_TRAIN_CHECKS_H

#include "pipeline/train_run.h"

/* The folder `path` (a file, or a pattern such as 'ck/c-{epoch}.ckpt') goes into: created when missing
 * and written to once (a file made and removed), so a read-only folder fails now, not when the run
 * first writes there; `option` names the path in the message. */
ftl_status train_check_folder_of(const char *path, const char *option);
/* That check for --out, --timeline, --checkpoint and --log, on rank 0 (their writer). */
ftl_status train_check_output_folders(const ftl_train_options *o);
/* `checkpoint` against the run r prepared: a checkpoint of other data, preprocessing or backbone is
 * refused before any feature is computed. */
ftl_status train_check_checkpoint_matches(const ftl_train_options *o, const train_run *r, const char *checkpoint);
/* That check for a --resume (NULL: none), by rank 0, which alone needs the file; every rank agrees. */
ftl_status train_check_resume_identity(const ftl_train_options *o, const train_run *r, const char *checkpoint);
/* Every label of TRAIN and VAL against r's classes (one refused with its file and row), then the
 * classes no training (or validation) image has: a warning naming them, an error with --strict. */
ftl_status train_check_labels(const ftl_train_options *o, const train_run *r);

#endif
