/* The files a backbone is made of, for the check that no output of a job is one of them. */
#ifndef FTL_NN_BACKBONE_FILES_H
#define FTL_NN_BACKBONE_FILES_H

#include "util/io_check.h"

/* Adds the ONNX file at `path` as an input under `role`, and its external-data files when an output
 * already added goes into the model's folder. Call after the outputs. */
void nn_io_check_backbone(ftl_io_check *c, const char *role, const char *path);

#endif
