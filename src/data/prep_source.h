/* The input side of `ftl prep`: find the class folders and image files under SRC, assign each
 * image to train or val, and fix the order rows are written in. */
#ifndef FTL_DATA_PREP_SOURCE_H
#define FTL_DATA_PREP_SOURCE_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>

typedef enum prep_split { PREP_SPLIT_TRAIN = 0, PREP_SPLIT_VAL = 1 } prep_split;

typedef struct prep_item {
    char *relative_path;  /* relative to SRC, '/'-separated */
    int label;
    prep_split split;
} prep_item;

typedef struct prep_source {
    char *root;
    int class_count;
    char **class_folders;  /* sorted folder names; index = label */
    char **class_names;    /* display names ("001.ak47" -> "ak47" when unambiguous) */
    prep_item *items;
    int64_t item_count;
    bool has_split_folders;       /* SRC/train and SRC/val (or valid, validation, test) */
    const char *val_folder;       /* which of those holds the validation split */
    /* files that look like images in a format ftl does not read (e.g. .gif), and empty classes */
    char **unsupported_paths;
    char **unsupported_reasons;
    int64_t unsupported_count;
    int empty_class_count;
    /* What the scan met, for prep to report on rank 0 only (every rank scans alike): warnings;
     * folder loops (warnings, errors under --strict); the first of mislabel_count files or folders
     * reached under two classes or splits (always an error; NULL when none). */
    char **warnings;
    int64_t warning_count;
    char **loops;
    int64_t loop_count;
    char *mislabel;
    int64_t mislabel_count;
} prep_source;

/* Scans SRC (folder symlinks followed, each real folder and file read once: see prep_walk.h).
 * Missing SRC, no class folders or no images: FTL_E_NOT_FOUND (exit 2). */
ftl_status prep_source_scan(const char *root, prep_source *source);
/* Without split folders: stratified per class (exact count round(n*fraction) per class) or a
 * per-image random draw. Then shuffles the row order within each split (seeded), so that row
 * groups mix classes, and orders all train rows before all val rows. */
void prep_source_assign_splits(prep_source *source, double val_fraction, uint64_t seed, bool stratify);
void prep_source_free(prep_source *source);

#endif
