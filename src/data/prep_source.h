/* The input side of `ftl prep`: find the class folders and image files under SRC, assign each
 * image to train or val, and fix the order rows are written in. */
#ifndef FTL_DATA_PREP_SOURCE_H
#define FTL_DATA_PREP_SOURCE_H

#include "ftl/base.h"
#include "ftl/prep.h"
#include <stdbool.h>
#include <stdint.h>

typedef enum prep_split { PREP_SPLIT_TRAIN = 0, PREP_SPLIT_VAL = 1 } prep_split;

typedef enum prep_source_kind { PREP_SOURCE_FOLDERS, PREP_SOURCE_TABLE, PREP_SOURCE_SHARDS } prep_source_kind;

typedef struct prep_item {
    char *relative_path;  /* the row's path: relative to SRC ('/'-separated) for folders; a table's path
                             value (or "PART#ROW" without one); "SHARD/KEY.EXT" for shards */
    int label;
    prep_split split;
    int32_t origin;       /* tables, shards: the file (part or shard) the image is in */
    int32_t row_group;    /* tables */
    int64_t row;          /* tables: the row in its row group; shards: the member */
    int64_t staged;       /* tables: the item's place in the staged copy (prep_source_stage) */
} prep_item;

typedef struct prep_table prep_table;
typedef struct prep_shards prep_shards;

typedef struct prep_source {
    prep_source_kind kind;
    prep_table *table;            /* PREP_SOURCE_TABLE: the parts and their columns */
    prep_shards *shards;          /* PREP_SOURCE_SHARDS */
    const char *given_split;      /* the split came with the source ("folders", "column", "val-source"),
                                     NULL: drawn by prep_source_assign_splits */
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

/* Opens SRC as its kind (a table, shards or class folders: see ftl_prep_options) and lists its images,
 * labels and given splits. Bad usage or input: FTL_E_INVALID_ARG / FTL_E_NOT_FOUND (exit 2), naming
 * the file, row or member. */
ftl_status prep_source_open(const ftl_prep_options *options, prep_source *source);
/* Before the images are read in row order: a table's cells copied, in the order they are stored,
 * into a file in `folder` (one pass over its pages, however large they are), so that reading them
 * in any order costs one small read each. This process's items only (under mpirun, its share).
 * Other sources need nothing. prep_source_unstage removes the copy. */
ftl_status prep_source_stage(prep_source *source, const char *folder, int rank);
void prep_source_unstage(prep_source *source);
/* The encoded bytes of an item (a file's, a table cell's or a shard member's); thread-safe. *data is
 * malloc'ed. */
ftl_status prep_source_read(const prep_source *source, const prep_item *item, uint8_t **data, size_t *size);
/* How messages name an item: "SRC/ants/x.jpg", "part.parquet row 12 (photos/ants/x.jpg)",
 * "shard-0.tar: 000012.jpg". Caller frees. */
char *prep_source_item_name(const prep_source *source, const prep_item *item);

/* Scans SRC (folder symlinks followed, each real folder and file read once: see prep_walk.h).
 * Missing SRC, no class folders or no images: FTL_E_NOT_FOUND (exit 2). */
ftl_status prep_source_scan(const char *root, prep_source *source);
/* Without split folders: stratified per class (exact count round(n*fraction) per class) or a
 * per-image random draw. Then shuffles the row order within each split (seeded), so that row
 * groups mix classes, and orders all train rows before all val rows. */
void prep_source_assign_splits(prep_source *source, double val_fraction, uint64_t seed, bool stratify);
void prep_source_free(prep_source *source);

#endif
