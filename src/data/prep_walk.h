/* The folder walk of `ftl prep`: the image files under each class folder of SRC. Folder symlinks
 * are followed (as `find -L` does), but each real folder is entered once and each real file listed
 * once over the whole scan (device + inode), so that no link can loop, give an image two labels or
 * put it in both train and val. What it meets is recorded, not logged: prep reports it on rank 0
 * only, since every rank scans the same source. */
#ifndef FTL_DATA_PREP_WALK_H
#define FTL_DATA_PREP_WALK_H

#include "data/prep_source.h"
#include "util/file_id_map.h"
#include "util/string_list.h"

#include <stdbool.h>
#include <stdint.h>

enum { PREP_MAX_FOLDER_DEPTH = 32 };

typedef struct prep_walk_record prep_walk_record;
typedef struct prep_walk_ancestor {
    uint64_t device, inode;
    int64_t record;
} prep_walk_ancestor;

typedef struct prep_walk {
    const char *root;
    int class_count;
    char *const *class_folders;
    const char *split_folders[2];  /* "train" and the val folder; NULLs: one folder per class */
    prep_walk_ancestor layout_folders[3];  /* SRC, train/, val/ (record -1: not claimed) */
    prep_walk_ancestor *class_roots;       /* [class * 2 + split]; record -1: not searched */
    ftl_file_id_map seen;          /* device + inode -> index of its record */
    prep_walk_record *records;
    int64_t record_count, record_cap;
    ftl_string_list folder_paths;  /* the folders' relative paths that records point to */
    prep_walk_ancestor path[PREP_MAX_FOLDER_DEPTH + 4];  /* SRC down to the folder being read */
    int path_length;
    /* the class folder walked last: its images (relative paths); unsupported files of all */
    ftl_string_list images, unsupported, unsupported_reasons;
    /* findings: warnings, folder loops, the first of mislabel_count files or folders reached under
     * two classes or splits, and one example of second_way_count reached twice within a class */
    ftl_string_list warnings, loops;
    char *mislabel, *second_way_example;
    int64_t mislabel_count, second_way_count;
} prep_walk;

/* Claims SRC (and train/ and val_folder/ when val_folder is not NULL) and every class folder before
 * any is searched, so that a link into another class's folder is named as such. */
void prep_walk_start(prep_walk *walk, const char *root, int class_count, char *const *class_folders, const char *val_folder);
/* False when the class folder is not searched (a loop, or the folder of another class or split). */
bool prep_walk_class_claimed(const prep_walk *walk, int label, prep_split split);
/* Lists the images under one class folder (SRC/CLASS, or SRC/train|val/CLASS) into walk->images;
 * fails only when a folder cannot be listed. */
ftl_status prep_walk_class(prep_walk *walk, int label, prep_split split);
/* Adds the one line about files and folders reached twice within a class to the warnings. */
void prep_walk_finish(prep_walk *walk);
void prep_walk_free(prep_walk *walk);

#endif
