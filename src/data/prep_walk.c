/* The walk claims every folder and file it reaches by device + inode: the first way there reads it,
 * any later way is a loop (a folder on the path down from SRC), a second way within the same class,
 * or a mislabel (another class or split). */
#include "data/prep_walk.h"
#include "util/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

struct prep_walk_record {
    const char *path;  /* relative to SRC ("" for SRC); owned by folder_paths or by the file lists */
    int label;         /* -1: SRC, train/ or val/ themselves */
    int split;         /* -1: SRC; always train in the one-folder-per-class layout */
};

static const char *const readable_extensions[] = {"jpg", "jpeg", "png", NULL};
/* Image files ftl recognises but does not decode: reported as skipped, not silently ignored. */
static const char *const unsupported_extensions[] = {"gif", "bmp", "webp", "tif", "tiff", "heic", "avif", NULL};

static bool has_extension(const char *name, const char *const *extensions) {
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (int i = 0; extensions[i]; i++)
        if (strcasecmp(dot + 1, extensions[i]) == 0) return true;
    return false;
}

static char *full_path(const prep_walk *w, const char *relative) {
    return relative[0] ? ftl_format("%s/%s", w->root, relative) : ftl_strdup(w->root);
}

static char *owner_text(const prep_walk *w, int label, int split) {
    if (label < 0) return split < 0 ? ftl_strdup("the source folder") : ftl_format("the %s/ folder", w->split_folders[split]);
    if (!w->split_folders[0]) return ftl_format("class '%s'", w->class_folders[label]);
    return ftl_format("class '%s' in %s/", w->class_folders[label], w->split_folders[split]);
}

static int64_t add_record(prep_walk *w, const struct stat *sb, const char *relative, int label, int split) {
    if (w->record_count == w->record_cap) {
        w->record_cap = w->record_cap ? 2 * w->record_cap : 256;
        w->records = ftl_xrealloc(w->records, (size_t)w->record_cap * sizeof *w->records);
    }
    if (S_ISDIR(sb->st_mode)) { /* a folder's path is freed by the walk once read: keep a copy */
        ftl_string_list_push(&w->folder_paths, ftl_strdup(relative));
        relative = w->folder_paths.items[w->folder_paths.count - 1];
    }
    w->records[w->record_count] = (prep_walk_record){relative, label, split};
    ftl_file_id_map_put(&w->seen, (uint64_t)sb->st_dev, (uint64_t)sb->st_ino, w->record_count);
    return w->record_count++;
}

static void note_mislabel(prep_walk *w, const prep_walk_record *first, const char *relative, int label, int split,
                          bool is_folder) {
    if (w->mislabel_count++ > 0) return;
    char *first_path = full_path(w, first->path), *path = full_path(w, relative);
    char *first_owner = owner_text(w, first->label, first->split), *owner = owner_text(w, label, split);
    const char *why = first->label < 0 || label < 0 ? "a class folder cannot hold SRC or a split folder"
                      : first->label != label       ? (is_folder ? "its images cannot have two labels" : "an image cannot have two labels")
                      : is_folder                   ? "its images cannot be in both train and val"
                                                    : "an image cannot be in both train and val";
    w->mislabel = ftl_format("%s (%s) and %s (%s) are the same %s: %s; keep only one of them", first_path, first_owner,
                             path, owner, is_folder ? "folder" : "file", why);
    free(first_path);
    free(path);
    free(first_owner);
    free(owner);
}

/* The record of `relative` (a folder or file reached under label/split) when it is to be read,
 * that is met for the first time; -1 otherwise, with the reason noted. */
static int64_t claim(prep_walk *w, const char *relative, const struct stat *sb, int label, int split) {
    bool is_folder = S_ISDIR(sb->st_mode);
    for (int i = w->path_length - 1; is_folder && i >= 0; i--)
        if (w->path[i].device == (uint64_t)sb->st_dev && w->path[i].inode == (uint64_t)sb->st_ino) {
            char *link = full_path(w, relative), *target = full_path(w, w->records[w->path[i].record].path);
            ftl_string_list_push(&w->loops, ftl_format("%s leads back to %s, a folder it is inside: a folder loop, not followed",
                                                       link, target));
            free(link);
            free(target);
            return -1;
        }
    int64_t seen = ftl_file_id_map_get(&w->seen, (uint64_t)sb->st_dev, (uint64_t)sb->st_ino);
    if (seen < 0) return add_record(w, sb, relative, label, split);
    const prep_walk_record *first = &w->records[seen];
    if (first->label == label && first->split == split) {
        if (w->second_way_count++ == 0) {
            char *path = full_path(w, relative), *first_path = full_path(w, first->path);
            w->second_way_example = ftl_format("%s is %s", path, first_path);
            free(path);
            free(first_path);
        }
    } else {
        note_mislabel(w, first, relative, label, split, is_folder);
    }
    return -1;
}

static void push_ancestor(prep_walk *w, prep_walk_ancestor a) { w->path[w->path_length++] = a; }

static prep_walk_ancestor ancestor_of(const struct stat *sb, int64_t record) {
    return (prep_walk_ancestor){(uint64_t)sb->st_dev, (uint64_t)sb->st_ino, record};
}

static void note_unsupported(prep_walk *w, const char *name, char *relative) {
    const char *dot = strrchr(name, '.');
    char upper[16] = {0};
    for (int k = 0; dot[k + 1] && k < 15; k++) upper[k] = (char)toupper((unsigned char)dot[k + 1]);
    ftl_string_list_push(&w->unsupported, relative);
    ftl_string_list_push(&w->unsupported_reasons, ftl_format("unsupported image format %s (ftl reads JPEG and PNG)", upper));
}

/* Reads the folder at the end of w->path (`relative_dir`, `depth` levels below its class folder). */
static ftl_status walk_folder(prep_walk *w, const char *relative_dir, int depth, int label, int split) {
    char *dir_path = full_path(w, relative_dir);
    ftl_string_list names = {0};
    ftl_status st = ftl_list_folder(dir_path, &names);
    free(dir_path);
    for (int64_t i = 0; i < names.count && st == FTL_OK; i++) {
        char *relative = ftl_format("%s/%s", relative_dir, names.items[i]);
        char *abs = full_path(w, relative);
        struct stat sb; /* stat, not lstat: links are followed, as find -L does */
        if (stat(abs, &sb) != 0) {
            ftl_string_list_push(&w->warnings, ftl_format("%s: cannot stat (%s); skipped", abs, strerror(errno)));
        } else if (S_ISDIR(sb.st_mode)) {
            if (depth + 1 > PREP_MAX_FOLDER_DEPTH) {
                ftl_string_list_push(&w->warnings, ftl_format("%s: folders nested deeper than %d levels are not searched", abs,
                                                              PREP_MAX_FOLDER_DEPTH));
            } else {
                int64_t record = claim(w, relative, &sb, label, split);
                if (record >= 0) {
                    push_ancestor(w, ancestor_of(&sb, record));
                    st = walk_folder(w, relative, depth + 1, label, split);
                    w->path_length--;
                }
            }
        } else if (S_ISREG(sb.st_mode) && has_extension(names.items[i], readable_extensions)) {
            if (claim(w, relative, &sb, label, split) >= 0) {
                ftl_string_list_push(&w->images, relative);
                relative = NULL;
            }
        } else if (S_ISREG(sb.st_mode) && has_extension(names.items[i], unsupported_extensions)) {
            if (claim(w, relative, &sb, label, split) >= 0) {
                note_unsupported(w, names.items[i], relative);
                relative = NULL;
            }
        }
        free(relative);
        free(abs);
    }
    ftl_string_list_free(&names);
    return st;
}

/* Claims one folder of the layout (SRC, a split folder, a class folder) under `parents` ancestors. */
static prep_walk_ancestor claim_layout_folder(prep_walk *w, const char *relative, int parents, int label, int split) {
    prep_walk_ancestor none = {0, 0, -1};
    w->path_length = parents;
    char *abs = full_path(w, relative);
    struct stat sb;
    if (stat(abs, &sb) != 0) {
        ftl_string_list_push(&w->warnings, ftl_format("%s: cannot stat (%s); skipped", abs, strerror(errno)));
        free(abs);
        return none;
    }
    free(abs);
    int64_t record = claim(w, relative, &sb, label, split);
    return record >= 0 ? ancestor_of(&sb, record) : none;
}

void prep_walk_start(prep_walk *w, const char *root, int class_count, char *const *class_folders, const char *val_folder) {
    memset(w, 0, sizeof *w);
    w->root = root;
    w->class_count = class_count;
    w->class_folders = class_folders;
    w->split_folders[0] = val_folder ? "train" : NULL;
    w->split_folders[1] = val_folder;
    w->class_roots = ftl_xmalloc((size_t)class_count * 2 * sizeof *w->class_roots);
    for (int i = 0; i < class_count * 2; i++) w->class_roots[i].record = -1;
    w->layout_folders[0] = claim_layout_folder(w, "", 0, -1, -1);
    w->layout_folders[1].record = w->layout_folders[2].record = -1;
    if (w->layout_folders[0].record < 0) return;
    push_ancestor(w, w->layout_folders[0]);
    for (int split = 0; split < (val_folder ? 2 : 1); split++) {
        int parents = 1;
        if (val_folder) {
            w->layout_folders[1 + split] = claim_layout_folder(w, w->split_folders[split], 1, -1, split);
            if (w->layout_folders[1 + split].record < 0) continue;
            push_ancestor(w, w->layout_folders[1 + split]);
            parents = 2;
        }
        for (int c = 0; c < class_count; c++) {
            char *relative = val_folder ? ftl_format("%s/%s", w->split_folders[split], class_folders[c]) : ftl_strdup(class_folders[c]);
            w->class_roots[c * 2 + split] = claim_layout_folder(w, relative, parents, c, split);
            free(relative);
        }
    }
    w->path_length = 0;
}

bool prep_walk_class_claimed(const prep_walk *w, int label, prep_split split) {
    return w->class_roots[label * 2 + (int)split].record >= 0;
}

ftl_status prep_walk_class(prep_walk *w, int label, prep_split split) {
    prep_walk_ancestor class_root = w->class_roots[label * 2 + (int)split];
    if (class_root.record < 0) return FTL_OK;
    w->path_length = 0;
    push_ancestor(w, w->layout_folders[0]);
    if (w->split_folders[0]) push_ancestor(w, w->layout_folders[1 + (int)split]);
    push_ancestor(w, class_root);
    ftl_status st = walk_folder(w, w->records[class_root.record].path, 0, label, (int)split);
    w->path_length = 0;
    return st;
}

void prep_walk_finish(prep_walk *w) {
    if (w->second_way_count == 0) return;
    bool one = w->second_way_count == 1;
    ftl_string_list_push(&w->warnings, ftl_format("%lld file%s or folder%s under %s %s reached a second way within %s class "
                                                  "(e.g. %s): each is read once", (long long)w->second_way_count, one ? "" : "s",
                                                  one ? "" : "s", w->root, one ? "is" : "are", one ? "its" : "their",
                                                  w->second_way_example));
}

void prep_walk_free(prep_walk *w) {
    ftl_file_id_map_free(&w->seen);
    free(w->records);
    free(w->class_roots);
    ftl_string_list_free(&w->folder_paths);
    ftl_string_list_free(&w->images);
    ftl_string_list_free(&w->unsupported);
    ftl_string_list_free(&w->unsupported_reasons);
    ftl_string_list_free(&w->warnings);
    ftl_string_list_free(&w->loops);
    free(w->mislabel);
    free(w->second_way_example);
    memset(w, 0, sizeof *w);
}
