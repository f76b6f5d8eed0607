/* Finding images and classes under SRC, and the seeded train/val split. */
#include "data/prep_source.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/rng.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum { MAX_FOLDER_DEPTH = 32 };

typedef struct string_list {
    char **items;
    int64_t count, cap;
} string_list;

static void string_list_push(string_list *l, char *s) {
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->items = ftl_xrealloc(l->items, (size_t)l->cap * sizeof *l->items);
    }
    l->items[l->count++] = s;
}

static void string_list_free(string_list *l) {
    for (int64_t i = 0; i < l->count; i++) free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool has_extension(const char *name, const char *const *extensions) {
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (int i = 0; extensions[i]; i++)
        if (strcasecmp(dot + 1, extensions[i]) == 0) return true;
    return false;
}

static const char *const readable_extensions[] = {"jpg", "jpeg", "png", NULL};
/* Image files ftl recognises but does not decode: reported as skipped, not silently ignored. */
static const char *const unsupported_extensions[] = {"gif", "bmp", "webp", "tif", "tiff", "heic", "avif", NULL};

/* Immediate subfolders of `dir` (hidden ones skipped), sorted. */
static ftl_status list_subfolders(const char *dir, string_list *out) {
    DIR *d = opendir(dir);
    if (!d) return ftl_fail(errno == ENOENT ? FTL_E_NOT_FOUND : FTL_E_IO, "cannot open folder %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char *path = ftl_format("%s/%s", dir, e->d_name);
        if (ftl_is_directory(path)) string_list_push(out, ftl_strdup(e->d_name));
        free(path);
    }
    closedir(d);
    if (out->count) qsort(out->items, (size_t)out->count, sizeof *out->items, compare_strings);
    return FTL_OK;
}

typedef struct walk_state {
    const char *root;
    string_list images;       /* relative paths */
    prep_source *source;
    string_list *unsupported, *unsupported_reasons;
} walk_state;

static ftl_status walk_folder(walk_state *w, const char *relative_dir, int depth) {
    if (depth > MAX_FOLDER_DEPTH) {
        ftl_log_warn("%s/%s: folders nested deeper than %d levels are not searched", w->root, relative_dir, MAX_FOLDER_DEPTH);
        return FTL_OK;
    }
    char *dir_path = ftl_format("%s/%s", w->root, relative_dir);
    DIR *d = opendir(dir_path);
    if (!d) {
        ftl_status st = ftl_fail(FTL_E_IO, "cannot open folder %s: %s", dir_path, strerror(errno));
        free(dir_path);
        return st;
    }
    string_list names = {0};
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') string_list_push(&names, ftl_strdup(e->d_name));
    closedir(d);
    if (names.count) qsort(names.items, (size_t)names.count, sizeof *names.items, compare_strings);
    ftl_status st = FTL_OK;
    for (int64_t i = 0; i < names.count && st == FTL_OK; i++) {
        char *rel = ftl_format("%s/%s", relative_dir, names.items[i]);
        char *abs = ftl_format("%s/%s", w->root, rel);
        struct stat sb;
        if (stat(abs, &sb) != 0) {
            ftl_log_warn("%s: cannot stat (%s); skipped", abs, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            st = walk_folder(w, rel, depth + 1);
        } else if (S_ISREG(sb.st_mode) && has_extension(names.items[i], readable_extensions)) {
            string_list_push(&w->images, rel);
            rel = NULL;
        } else if (S_ISREG(sb.st_mode) && has_extension(names.items[i], unsupported_extensions)) {
            const char *dot = strrchr(names.items[i], '.');
            char upper[16] = {0};
            for (int k = 0; dot[k + 1] && k < 15; k++) upper[k] = (char)toupper((unsigned char)dot[k + 1]);
            string_list_push(w->unsupported, rel);
            string_list_push(w->unsupported_reasons,
                             ftl_format("unsupported image format %s (ftl reads JPEG and PNG)", upper));
            rel = NULL;
        }
        free(rel);
        free(abs);
    }
    free(dir_path);
    string_list_free(&names);
    return st;
}

/* "001.ak47" -> "ak47": Caltech-style numeric prefixes are dropped from display names. */
static char *display_name_of(const char *folder) {
    const char *p = folder;
    while (isdigit((unsigned char)*p)) p++;
    if (p > folder && (*p == '.' || *p == '_' || *p == '-') && p[1] != '\0') return ftl_strdup(p + 1);
    return ftl_strdup(folder);
}

static void set_class_names(prep_source *s) {
    s->class_names = ftl_xcalloc((size_t)s->class_count, sizeof *s->class_names);
    for (int i = 0; i < s->class_count; i++) s->class_names[i] = display_name_of(s->class_folders[i]);
    /* Stripping prefixes must not merge two classes; fall back to folder names if it would. */
    for (int i = 0; i < s->class_count; i++)
        for (int j = i + 1; j < s->class_count; j++)
            if (strcmp(s->class_names[i], s->class_names[j]) == 0) {
                for (int k = 0; k < s->class_count; k++) {
                    free(s->class_names[k]);
                    s->class_names[k] = ftl_strdup(s->class_folders[k]);
                }
                return;
            }
}

static void add_class_items(prep_source *s, walk_state *w, int label, prep_split split, int64_t *class_total) {
    for (int64_t i = 0; i < w->images.count; i++) {
        s->items = ftl_xrealloc(s->items, (size_t)(s->item_count + 1) * sizeof *s->items);
        s->items[s->item_count++] = (prep_item){w->images.items[i], label, split};
    }
    *class_total += w->images.count;
    free(w->images.items);
    memset(&w->images, 0, sizeof w->images);
}

ftl_status prep_source_scan(const char *root, prep_source *s) {
    memset(s, 0, sizeof *s);
    if (!ftl_path_exists(root)) return ftl_fail(FTL_E_NOT_FOUND, "source folder %s does not exist", root);
    if (!ftl_is_directory(root)) return ftl_fail(FTL_E_NOT_FOUND, "source %s is not a folder", root);
    s->root = ftl_strdup(root);

    string_list top = {0};
    ftl_status st = list_subfolders(root, &top);
    if (st != FTL_OK) return st;
    bool has_train = false, has_val = false;
    for (int64_t i = 0; i < top.count; i++) {
        has_train |= strcmp(top.items[i], "train") == 0;
        has_val |= strcmp(top.items[i], "val") == 0;
    }
    string_list classes = {0};
    if (has_train && has_val) {
        s->has_split_folders = true;
        string_list val_classes = {0};
        char *train_dir = ftl_format("%s/train", root), *val_dir = ftl_format("%s/val", root);
        st = list_subfolders(train_dir, &classes);
        if (st == FTL_OK) st = list_subfolders(val_dir, &val_classes);
        if (st == FTL_OK) {
            bool same = classes.count == val_classes.count;
            for (int64_t i = 0; same && i < classes.count; i++) same = strcmp(classes.items[i], val_classes.items[i]) == 0;
            if (!same)
                st = ftl_fail(FTL_E_INVALID_ARG,
                              "%s/train and %s/val must hold the same class folders (train has %lld, val has %lld); "
                              "make them match, or move the images into one folder per class for a seeded split",
                              root, root, (long long)classes.count, (long long)val_classes.count);
        }
        free(train_dir);
        free(val_dir);
        string_list_free(&val_classes);
    } else {
        classes = top;
        memset(&top, 0, sizeof top);
    }
    string_list_free(&top);
    if (st == FTL_OK && classes.count == 0)
        st = ftl_fail(FTL_E_NOT_FOUND, "no class folders under %s (expected one folder per class, or train/ and val/)", root);
    if (st != FTL_OK) {
        string_list_free(&classes);
        prep_source_free(s);
        return st;
    }

    s->class_count = (int)classes.count;
    s->class_folders = classes.items;
    set_class_names(s);
    string_list unsupported = {0}, reasons = {0};
    walk_state w = {.root = root, .source = s, .unsupported = &unsupported, .unsupported_reasons = &reasons};
    for (int c = 0; c < s->class_count && st == FTL_OK; c++) {
        int64_t class_total = 0;
        for (int part = 0; part < (s->has_split_folders ? 2 : 1) && st == FTL_OK; part++) {
            char *rel = s->has_split_folders ? ftl_format("%s/%s", part ? "val" : "train", s->class_folders[c])
                                             : ftl_strdup(s->class_folders[c]);
            st = walk_folder(&w, rel, 0);
            if (st == FTL_OK) add_class_items(s, &w, c, part ? PREP_SPLIT_VAL : PREP_SPLIT_TRAIN, &class_total);
            free(rel);
        }
        if (st == FTL_OK && class_total == 0) {
            s->empty_class_count++;
            ftl_log_warn("class folder '%s' under %s has no .jpg/.jpeg/.png images", s->class_folders[c], root);
        }
    }
    string_list_free(&w.images);
    s->unsupported_paths = unsupported.items;
    s->unsupported_reasons = reasons.items;
    s->unsupported_count = unsupported.count;
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
    if (!s->has_split_folders) {
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

void prep_source_free(prep_source *s) {
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
    free(s->root);
    memset(s, 0, sizeof *s);
}
