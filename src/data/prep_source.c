/* Finding images and classes under SRC, and the seeded train/val split. */
#include "data/prep_source.h"
#include "data/prep_labels.h"
#include "data/prep_shards.h"
#include "data/prep_table.h"
#include "data/prep_walk.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/rng.h"
#include "util/string_list.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Immediate subfolders of `dir` (hidden ones skipped), sorted. */
static ftl_status list_subfolders(const char *dir, ftl_string_list *out) {
    ftl_string_list names = {0};
    FTL_TRY(ftl_list_folder(dir, &names));
    for (int64_t i = 0; i < names.count; i++) {
        char *path = ftl_format("%s/%s", dir, names.items[i]);
        if (ftl_is_directory(path)) {
            ftl_string_list_push(out, names.items[i]);
            names.items[i] = NULL;
        }
        free(path);
    }
    ftl_string_list_free(&names);
    return FTL_OK;
}

static void add_class_items(prep_source *s, ftl_string_list *images, int label, prep_split split, int64_t *class_total) {
    for (int64_t i = 0; i < images->count; i++) {
        s->items = ftl_xrealloc(s->items, (size_t)(s->item_count + 1) * sizeof *s->items);
        s->items[s->item_count++] = (prep_item){.relative_path = images->items[i], .label = label, .split = split};
    }
    *class_total += images->count;
    free(images->items);
    memset(images, 0, sizeof *images);
}

/* Moves the strings of `from` to the end of `to`. */
static void append_strings(ftl_string_list *to, ftl_string_list *from) {
    for (int64_t i = 0; i < from->count; i++) ftl_string_list_push(to, from->items[i]);
    free(from->items);
    memset(from, 0, sizeof *from);
}

ftl_status prep_source_scan(const char *root, prep_source *s) {
    memset(s, 0, sizeof *s);
    if (!ftl_path_exists(root)) return ftl_fail(FTL_E_NOT_FOUND, "source folder %s does not exist", root);
    if (!ftl_is_directory(root)) return ftl_fail(FTL_E_NOT_FOUND, "source %s is not a folder", root);
    s->root = ftl_strdup(root);

    ftl_string_list top = {0}, warnings = {0};
    ftl_status st = list_subfolders(root, &top);
    if (st != FTL_OK) return st;
    /* train/ with val/ (or valid/, validation/, test/, in that order of preference) is a split
     * layout; train/ alone would make "train" a class, which is never what was meant. */
    static const char *const val_names[] = {"val", "valid", "validation", "test"};
    bool has_train = false;
    const char *val_name = NULL;
    for (int64_t i = 0; i < top.count; i++) has_train |= strcmp(top.items[i], "train") == 0;
    for (size_t k = 0; k < sizeof val_names / sizeof val_names[0] && !val_name; k++)
        for (int64_t i = 0; i < top.count; i++)
            if (strcmp(top.items[i], val_names[k]) == 0) val_name = val_names[k];
    if (has_train && !val_name) {
        ftl_string_list_free(&top);
        prep_source_free(s);
        return ftl_fail(FTL_E_INVALID_ARG, "%s has a train/ folder but no val/ (or valid/, validation/, test/) beside it: "
                        "add one, or give %s/train as SRC for a seeded split", root, root);
    }
    ftl_string_list classes = {0};
    if (has_train) {
        s->has_split_folders = true;
        s->given_split = "folders";
        s->val_folder = val_name;
        for (int64_t i = 0; i < top.count; i++)
            if (strcmp(top.items[i], "train") != 0 && strcmp(top.items[i], val_name) != 0)
                ftl_string_list_push(&warnings, ftl_format("%s/%s/ is ignored: the split comes from train/ and %s/", root,
                                                           top.items[i], val_name));
        ftl_string_list val_classes = {0};
        char *train_dir = ftl_format("%s/train", root), *val_dir = ftl_format("%s/%s", root, val_name);
        st = list_subfolders(train_dir, &classes);
        if (st == FTL_OK) st = list_subfolders(val_dir, &val_classes);
        if (st == FTL_OK) {
            bool same = classes.count == val_classes.count;
            for (int64_t i = 0; same && i < classes.count; i++) same = strcmp(classes.items[i], val_classes.items[i]) == 0;
            if (!same)
                st = ftl_fail(FTL_E_INVALID_ARG,
                              "%s/train and %s/%s must hold the same class folders (train has %lld, %s has %lld); "
                              "make them match, or move the images into one folder per class for a seeded split",
                              root, root, val_name, (long long)classes.count, val_name, (long long)val_classes.count);
        }
        free(train_dir);
        free(val_dir);
        ftl_string_list_free(&val_classes);
    } else {
        classes = top;
        memset(&top, 0, sizeof top);
    }
    ftl_string_list_free(&top);
    if (st == FTL_OK && classes.count == 0)
        st = ftl_fail(FTL_E_NOT_FOUND, "no class folders under %s (expected one folder per class, or train/ and val/)", root);
    if (st != FTL_OK) {
        ftl_string_list_free(&classes);
        ftl_string_list_free(&warnings);
        prep_source_free(s);
        return st;
    }

    s->class_count = (int)classes.count;
    s->class_folders = classes.items;
    prep_labels_set_class_names(s);
    prep_walk w;
    prep_walk_start(&w, root, s->class_count, s->class_folders, s->has_split_folders ? s->val_folder : NULL);
    for (int c = 0; c < s->class_count && st == FTL_OK; c++) {
        int64_t class_total = 0;
        bool claimed = true;
        for (int part = 0; part < (s->has_split_folders ? 2 : 1) && st == FTL_OK; part++) {
            claimed &= prep_walk_class_claimed(&w, c, (prep_split)part);
            st = prep_walk_class(&w, c, (prep_split)part);
            if (st == FTL_OK) add_class_items(s, &w.images, c, part ? PREP_SPLIT_VAL : PREP_SPLIT_TRAIN, &class_total);
        }
        if (st == FTL_OK && class_total == 0) {
            s->empty_class_count++;
            if (claimed) /* a class folder not searched has a message of its own */
                ftl_string_list_push(&w.warnings, ftl_format("class folder '%s' under %s has no .jpg/.jpeg/.png images",
                                                             s->class_folders[c], root));
        }
    }
    prep_walk_finish(&w);
    append_strings(&warnings, &w.warnings);
    s->warnings = warnings.items;
    s->warning_count = warnings.count;
    s->loops = w.loops.items;
    s->loop_count = w.loops.count;
    s->mislabel = w.mislabel;
    s->mislabel_count = w.mislabel_count;
    s->unsupported_paths = w.unsupported.items;
    s->unsupported_reasons = w.unsupported_reasons.items;
    s->unsupported_count = w.unsupported.count;
    memset(&w.loops, 0, sizeof w.loops);
    memset(&w.unsupported, 0, sizeof w.unsupported);
    memset(&w.unsupported_reasons, 0, sizeof w.unsupported_reasons);
    w.mislabel = NULL;
    prep_walk_free(&w);
    if (st == FTL_OK && s->item_count == 0)
        st = ftl_fail(FTL_E_NOT_FOUND, "no images found under %s (looked for .jpg, .jpeg and .png files in %d class folder%s)",
                      root, s->class_count, s->class_count == 1 ? "" : "s");
    if (st != FTL_OK) prep_source_free(s);
    return st;
}

static void shuffle_items(prep_item *items, int64_t n, ftl_rng *rng) {
    for (int64_t i = n; i > 1; i--) {
        int64_t j = (int64_t)ftl_rng_below(rng, (uint64_t)i);
        prep_item t = items[i - 1];
        items[i - 1] = items[j];
        items[j] = t;
    }
}

void prep_source_assign_splits(prep_source *s, double val_fraction, uint64_t seed, bool stratify) {
    ftl_rng rng;
    ftl_rng_seed(&rng, seed);
    if (!s->given_split) {
        if (stratify) {
            /* Items are grouped by class in scan order; shuffle each class and cut. */
            int64_t start = 0;
            while (start < s->item_count) {
                int64_t end = start;
                while (end < s->item_count && s->items[end].label == s->items[start].label) end++;
                int64_t n = end - start;
                shuffle_items(s->items + start, n, &rng);
                int64_t n_val = (int64_t)llround((double)n * val_fraction);
                for (int64_t i = 0; i < n; i++) s->items[start + i].split = i < n_val ? PREP_SPLIT_VAL : PREP_SPLIT_TRAIN;
                start = end;
            }
        } else {
            for (int64_t i = 0; i < s->item_count; i++)
                s->items[i].split = ftl_rng_uniform(&rng) < val_fraction ? PREP_SPLIT_VAL : PREP_SPLIT_TRAIN;
        }
    }
    /* Stable partition: train rows first, then val; then a seeded shuffle inside each split. */
    prep_item *ordered = ftl_xmalloc((size_t)s->item_count * sizeof *ordered);
    int64_t n_train = 0, n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < s->item_count; i++)
            if ((int)s->items[i].split == pass) ordered[n++] = s->items[i];
    for (int64_t i = 0; i < s->item_count; i++) n_train += ordered[i].split == PREP_SPLIT_TRAIN;
    free(s->items);
    s->items = ordered;
    ftl_rng order_rng;
    ftl_rng_seed(&order_rng, seed ^ 0x6F72646572ull); /* a stream of its own: "order" */
    shuffle_items(s->items, n_train, &order_rng);
    shuffle_items(s->items + n_train, s->item_count - n_train, &order_rng);
}

static bool has_suffix(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && strcasecmp(name + n - k, suffix) == 0;
}

/* A .parquet file or a folder of parts is a table; a .tar or a folder of them, shards; else folders. */
static prep_source_kind prep_source_kind_of(const char *src) {
    if (!ftl_is_directory(src)) return has_suffix(src, ".tar") ? PREP_SOURCE_SHARDS : PREP_SOURCE_TABLE;
    if (prep_table_folder_is_table(src)) return PREP_SOURCE_TABLE;
    return prep_shards_folder_has_shards(src) ? PREP_SOURCE_SHARDS : PREP_SOURCE_FOLDERS;
}

ftl_status prep_source_open(const ftl_prep_options *o, prep_source *s) {
    memset(s, 0, sizeof *s);
    const char *src = o->source_dir;
    if (!ftl_path_exists(src)) return ftl_fail(FTL_E_NOT_FOUND, "source %s does not exist", src);
    ftl_status st = FTL_OK;
    switch (prep_source_kind_of(src)) {
    case PREP_SOURCE_TABLE: st = prep_table_open(o, s); break;
    case PREP_SOURCE_SHARDS: st = prep_shards_open(o, s); break;
    case PREP_SOURCE_FOLDERS: goto folders;
    }
    if (st != FTL_OK) prep_source_free(s);
    return st;
folders:
    if (o->image_column || o->label_column || o->label_from || o->split_column || o->val_source || o->images_root)
        return ftl_fail(FTL_E_INVALID_ARG, "%s is a folder of class folders: --image-col, --label-col, --label-from, "
                        "--split-col, --val-source and --images-root are for tables and shards", src);
    return prep_source_scan(src, s);
}

ftl_status prep_source_stage(prep_source *s, const char *folder, int rank) {
    if (s->kind != PREP_SOURCE_TABLE) return FTL_OK;
    char *path = ftl_format("%s/.staged-rank%d", folder, rank);
    ftl_status st = prep_table_stage(s->table, s->items, s->item_count, path);
    free(path);
    return st;
}

void prep_source_unstage(prep_source *s) {
    if (s->kind == PREP_SOURCE_TABLE) prep_table_unstage(s->table);
}

ftl_status prep_source_read(const prep_source *s, const prep_item *item, uint8_t **data, size_t *size) {
    switch (s->kind) {
    case PREP_SOURCE_TABLE: return prep_table_read(s->table, item, data, size);
    case PREP_SOURCE_SHARDS: return prep_shards_read(s->shards, item, data, size);
    case PREP_SOURCE_FOLDERS: break;
    }
    char *path = ftl_format("%s/%s", s->root, item->relative_path);
    ftl_status st = ftl_read_file(path, data, size);
    free(path);
    return st;
}

char *prep_source_item_name(const prep_source *s, const prep_item *item) {
    switch (s->kind) {
    case PREP_SOURCE_TABLE: return prep_table_item_name(s->table, item);
    case PREP_SOURCE_SHARDS: return prep_shards_item_name(s->shards, item);
    case PREP_SOURCE_FOLDERS: break;
    }
    return ftl_format("%s/%s", s->root, item->relative_path);
}

void prep_source_free(prep_source *s) {
    prep_table_free(s->table);
    prep_shards_free(s->shards);
    for (int i = 0; i < s->class_count; i++) {
        if (s->class_folders) free(s->class_folders[i]);
        if (s->class_names) free(s->class_names[i]);
    }
    free(s->class_folders);
    free(s->class_names);
    for (int64_t i = 0; i < s->item_count; i++) free(s->items[i].relative_path);
    free(s->items);
    for (int64_t i = 0; i < s->unsupported_count; i++) {
        free(s->unsupported_paths[i]);
        free(s->unsupported_reasons[i]);
    }
    free(s->unsupported_paths);
    free(s->unsupported_reasons);
    for (int64_t i = 0; i < s->warning_count; i++) free(s->warnings[i]);
    free(s->warnings);
    for (int64_t i = 0; i < s->loop_count; i++) free(s->loops[i]);
    free(s->loops);
    free(s->mislabel);
    free(s->root);
    memset(s, 0, sizeof *s);
}
