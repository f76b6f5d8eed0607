/* Class names of a dataset, and checks that two datasets (or a dataset and a model) agree on
 * them: a validation set whose labels mean other classes must be refused, not scored. */
#ifndef FTL_PIPELINE_DATASET_CLASSES_H
#define FTL_PIPELINE_DATASET_CLASSES_H

#include "ftl/base.h"
#include <stdint.h>

/* The dataset's ftl.classes, else "0".."K-1" with K = largest label + 1 (a Spark/pyarrow dataset). */
ftl_status dataset_read_classes(const char *const *sources, const char *label_column, int label_offset, char ***names,
                                int64_t *count);
/* Refuses (FTL_E_INVALID_ARG) a dataset whose class list differs from `names` (or, without a
 * list, whose labels reach `count`); `what` names the other side in the message ("TRAIN", a model). */
ftl_status dataset_check_classes(const char *const *sources, const char *label_column, int label_offset, char *const *names,
                                 int64_t count,
                                 const char *what);
void dataset_free_classes(char **names, int64_t count);
/* Rows per class (counts[count], zeroed here) over every file of the dataset, refusing a null label
 * or one outside 0..count-1 (after label_offset) with the file and row group named: before any
 * work, not at the training batch that meets it. The column statistics are checked first (no rows
 * read); the counts then take one pass over the label column alone. */
ftl_status dataset_count_labels(const char *const *sources, const char *label_column, int label_offset, int64_t count,
                                int64_t *counts);

#endif
