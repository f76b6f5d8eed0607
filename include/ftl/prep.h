/* ftl public API: `ftl prep`, folders of photos -> a Parquet dataset of fixed-size RGB images.
 *
 * SRC holds one folder per class (searched recursively for .jpg/.jpeg/.png, any case), or
 * train/ and val/ folders with the same class folders, whose split is then kept. Each image is
 * decoded, converted to RGB, thumbnailed to fit S x S (Pillow 9.4's LANCZOS thumbnail) and
 * pasted centred on a white S x S canvas. OUT/train.parquet and OUT/val.parquet hold columns
 * label (int32), image (S*S*3 bytes, HWC RGB) and path (relative to SRC), plus metadata; with
 * keep_encoded, image holds the original file where that is smaller, and image_format says so. */
#ifndef FTL_PREP_H
#define FTL_PREP_H

#include "ftl/base.h"
#include "ftl/dist.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ftl_prep_options {
    /* SRC: a folder of class folders (or of train/ and val/ with class folders); a Parquet table of
     * encoded images (a .parquet file, or a folder of parts as Spark writes them, `key=value/`
     * partition folders read as columns: Spark's binaryFile, Hugging Face's image datasets, DuckDB's
     * read_blob); or WebDataset shards (a .tar, or a folder of them: KEY.jpg|png with KEY.cls or
     * KEY.json). */
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
    /* Store each image's original file (JPEG or PNG) when it is smaller than its S*S*3 pixels, else
     * the pixels; readers decode with prep's recipe, so features and models are the same as from a
     * pixel dataset (format ftl-dataset-2: an image_format column says which each row holds). */
    bool keep_encoded;
    /* Tables and shards (NULL: the defaults). The image column is found by type when not named: a
     * binary column, or a struct with a binary `bytes` field (Hugging Face's image feature). */
    const char *image_column;   /* --image-col */
    const char *label_column;   /* --label-col: integer (names from ftl.classes or Hugging Face's
                                   ClassLabel metadata) or string (names sorted into indexes); default label */
    const char *label_from;     /* --label-from path: the parent folder of each row's path (the article's
                                   file_to_label), as class folders are named */
    const char *split_column;   /* --split-col: train, or val|valid|validation|test, per row */
    const char *val_source;     /* --val-source: a second table or shard set, all of it val */
    const char *images_root;    /* --images-root: rows without bytes but with a relative path read
                                   ROOT/path (never outside ROOT) */
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
    bool keep_encoded;                    /* --keep-encoded was asked for */
    int64_t encoded_rows;                 /* then: rows stored as their original file */
    int threads;
    double seconds;
} ftl_prep_summary;

/* Runs the whole job. On failure nothing is left under OUT's name (and an existing OUT is kept). */
ftl_status ftl_prep_run(const ftl_prep_options *options, ftl_prep_summary *summary);
void ftl_prep_summary_print(const ftl_prep_summary *summary, FILE *out);
void ftl_prep_summary_free(ftl_prep_summary *summary);

#endif
