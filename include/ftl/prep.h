/* ftl public API: `ftl prep`, folders of photos -> a Parquet dataset of fixed-size RGB images.
 *
 * SRC holds one folder per class (searched recursively for .jpg/.jpeg/.png, any case), or
 * train/ and val/ folders with the same class folders, whose split is then kept. Each image is
 * decoded, converted to RGB, thumbnailed to fit S x S (Pillow 9.4's LANCZOS thumbnail) and
 * pasted centred on a white S x S canvas. OUT/train.parquet and OUT/val.parquet hold columns
 * label (int32), image (S*S*3 bytes, HWC RGB) and path (relative to SRC), plus metadata. */
#ifndef FTL_PREP_H
#define FTL_PREP_H

#include "ftl/base.h"
#include "ftl/dist.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ftl_prep_options {
    const char *source_dir;
    const char *output_dir;
    int image_size;           /* S, default 299 */
    double val_fraction;      /* used when SRC has no train/val folders; default 0.1 */
    uint64_t seed;            /* split and row order; default 42 */
    bool stratify;            /* per-class split (default); false: per-image random draw like Spark's randomSplit */
    bool split_flags_given;   /* the caller set val_fraction or stratify (warned about when SRC has train/val) */
    int64_t row_group_bytes;  /* image bytes per row group */
    const char *codec;        /* "none", "snappy" or "zstd" */
    int threads;              /* 0: all cores */
    bool strict;              /* a bad image or a folder loop is fatal instead of skipped */
    bool overwrite;           /* replace an existing OUT */
    bool show_progress;       /* progress bar / periodic lines on stderr */
    /* Under mpirun: the ranks split the images; OUT/train.parquet and OUT/val.parquet become
     * folders of part files, one per rank (part-RRRRR.parquet, read in order = the single-process
     * row order), so OUT must be on a filesystem every rank shares. NULL: one process. */
    const ftl_collectives *collectives;
} ftl_prep_options;

#define FTL_PREP_DEFAULT_ROW_GROUP_BYTES (8 * 1024 * 1024)

void ftl_prep_options_init(ftl_prep_options *options);

typedef struct ftl_prep_skipped {
    char *path;    /* relative to SRC */
    char *reason;
} ftl_prep_skipped;

typedef struct ftl_prep_summary {
    int class_count;
    char **class_names;
    int64_t *train_counts, *val_counts;   /* per class */
    int64_t train_rows, val_rows;
    int64_t skipped_count;
    ftl_prep_skipped *skipped;
    int empty_class_count;
    const char *split_method;             /* "folders", "stratified" or "random" */
    uint64_t train_file_bytes, val_file_bytes;
    uint64_t source_bytes;                /* bytes of image files read */
    int threads;
    double seconds;
} ftl_prep_summary;

/* Runs the whole job. On failure nothing is left under OUT's name (and an existing OUT is kept). */
ftl_status ftl_prep_run(const ftl_prep_options *options, ftl_prep_summary *summary);
void ftl_prep_summary_print(const ftl_prep_summary *summary, FILE *out);
void ftl_prep_summary_free(ftl_prep_summary *summary);

#endif
