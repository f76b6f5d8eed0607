/* prep's shard source: WebDataset samples of tar shards, their image members read at their offsets. */
#include "data/prep_shards.h"
#include "data/prep_labels.h"
#include "data/tar_index.h"
#include "data/webdataset.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/string_list.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct shard {
    char *path;
    tar_index *index;
    bool val;          /* from --val-source: every sample val */
} shard;

struct prep_shards {
    shard *shards;
    int count;
};

static bool is_tar(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".tar") == 0;
}

bool prep_shards_folder_has_shards(const char *folder) {
    ftl_string_list names = {0};
    if (ftl_list_folder(folder, &names) != FTL_OK) return false;
    bool found = false;
    for (int64_t i = 0; i < names.count && !found; i++) found = is_tar(names.items[i]);
    ftl_string_list_free(&names);
    return found;
}

/* The shards of a source: the .tar itself, or a folder's .tar files sorted by name. */
static ftl_status add_shards(prep_shards *p, const char *source, bool val) {
    ftl_string_list paths = {0};
    if (ftl_is_directory(source)) {
        ftl_string_list names = {0};
        FTL_TRY(ftl_list_folder(source, &names));
        for (int64_t i = 0; i < names.count; i++)
            if (is_tar(names.items[i])) ftl_string_list_push(&paths, ftl_format("%s/%s", source, names.items[i]));
        ftl_string_list_free(&names);
        if (paths.count == 0) return ftl_fail(FTL_E_NOT_FOUND, "%s holds no .tar shards", source);
    } else {
        ftl_string_list_push(&paths, ftl_strdup(source));
    }
    p->shards = ftl_xrealloc(p->shards, (size_t)(p->count + paths.count) * sizeof *p->shards);
    for (int64_t i = 0; i < paths.count; i++) {
        p->shards[p->count++] = (shard){.path = paths.items[i], .val = val};
        paths.items[i] = NULL;
    }
    ftl_string_list_free(&paths);
    return FTL_OK;
}

static const char *const image_extensions[] = {"jpg", "jpeg", "png"};
static const char *const unsupported_extensions[] = {"gif", "bmp", "webp", "tif", "tiff", "heic", "avif"};

/* The sample's image member: its .jpg, .jpeg or .png; else the name of an image member ftl does not
 * read (*unsupported), or neither. */
static bool sample_image(const webdataset_sample *sample, size_t *member, const char **unsupported) {
    *unsupported = NULL;
    for (size_t k = 0; k < sizeof image_extensions / sizeof *image_extensions; k++)
        if (webdataset_sample_find(sample, image_extensions[k], member)) return true;
    for (size_t k = 0; k < sizeof unsupported_extensions / sizeof *unsupported_extensions && !*unsupported; k++)
        if (webdataset_sample_find(sample, unsupported_extensions[k], member)) *unsupported = unsupported_extensions[k];
    return false;
}

static void add_item(prep_source *s, char *path, int origin, size_t member, prep_split split) {
    s->items = ftl_xrealloc(s->items, (size_t)(s->item_count + 1) * sizeof *s->items);
    s->items[s->item_count++] = (prep_item){.relative_path = path, .split = split, .origin = origin, .row = (int64_t)member};
}

static void add_unsupported(prep_source *s, char *path, const char *ext) {
    char upper[8] = {0};
    for (int k = 0; ext[k] && k < 7; k++) upper[k] = (char)toupper((unsigned char)ext[k]);
    s->unsupported_paths = ftl_xrealloc(s->unsupported_paths, (size_t)(s->unsupported_count + 1) * sizeof(char *));
    s->unsupported_reasons = ftl_xrealloc(s->unsupported_reasons, (size_t)(s->unsupported_count + 1) * sizeof(char *));
    s->unsupported_paths[s->unsupported_count] = path;
    s->unsupported_reasons[s->unsupported_count++] = ftl_format("unsupported image format %s (ftl reads JPEG and PNG)", upper);
}

/* "SHARD/MEMBER" as rows and messages name a sample's image ("./" of `tar -C dir .` left out). */
static char *member_path(const char *shard_name, const char *member) {
    while (member[0] == '.' && member[1] == '/') member += 2;
    return ftl_format("%s/%s", shard_name, member);
}

static void add_warning(prep_source *s, char *text) {
    s->warnings = ftl_xrealloc(s->warnings, (size_t)(s->warning_count + 1) * sizeof *s->warnings);
    s->warnings[s->warning_count++] = text;
}

/* One shard's samples: an item and a label each, or an error naming the shard and the sample. */
static ftl_status scan_shard(prep_source *s, int origin, prep_labels *labels) {
    shard *sh = &s->shards->shards[origin];
    FTL_TRY(tar_index_open(sh->path, &sh->index));
    if (sh->index->warning) add_warning(s, ftl_strdup(sh->index->warning));
    webdataset_sample_list *list = NULL;
    FTL_TRY(webdataset_samples(sh->index, &list));
    if (list->members_without_key)
        add_warning(s, ftl_format("%s: %zu members have no KEY.EXT name and belong to no sample", sh->path,
                                  list->members_without_key));
    const char *shard_name = ftl_path_file_name(sh->path);
    size_t without_image = 0;
    ftl_status st = FTL_OK;
    for (size_t i = 0; i < list->count && st == FTL_OK; i++) {
        const webdataset_sample *sample = &list->samples[i];
        size_t member = 0;
        const char *unsupported = NULL;
        if (!sample_image(sample, &member, &unsupported)) {
            if (unsupported) add_unsupported(s, member_path(shard_name, sh->index->members[member].name), unsupported);
            else without_image++;
            continue;
        }
        webdataset_label label;
        st = webdataset_sample_label(sh->index, sample, &label);
        if (st == FTL_OK && label.kind == WEBDATASET_LABEL_ABSENT)
            st = ftl_fail(FTL_E_INVALID_ARG, "%s: sample '%s' has no label (a KEY.cls member with the class index, or KEY.json "
                          "with a \"label\" or \"cls\" field)", sh->path, sample->key);
        if (st == FTL_OK && label.kind == WEBDATASET_LABEL_INDEX) prep_labels_add_int(labels, label.index);
        if (st == FTL_OK && label.kind == WEBDATASET_LABEL_NAME) {
            prep_labels_add_text(labels, label.name);
            label.name = NULL;
        }
        if (st == FTL_OK)
            add_item(s, member_path(shard_name, sh->index->members[member].name), origin, member,
                     sh->val ? PREP_SPLIT_VAL : PREP_SPLIT_TRAIN);
        webdataset_label_free(&label);
    }
    if (without_image)
        add_warning(s, ftl_format("%s: %zu samples have no image member (.jpg, .jpeg or .png): skipped", sh->path, without_image));
    webdataset_samples_free(list);
    return st;
}

static int compare_items(const void *a, const void *b) {
    const prep_item *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    return strcmp(x->relative_path, y->relative_path);
}

/* How prep_labels names an item in its messages: as prep_source_item_name does for shards. */
static char *shards_item_name(const prep_source *s, const prep_item *item) { return prep_shards_item_name(s->shards, item); }

ftl_status prep_shards_open(const ftl_prep_options *o, prep_source *s) {
    if (o->image_column || o->label_column || o->label_from || o->split_column || o->images_root)
        return ftl_fail(FTL_E_INVALID_ARG, "%s is WebDataset shards: their labels come from KEY.cls or KEY.json, and "
                        "--image-col, --label-col, --label-from, --split-col and --images-root are for tables", o->source_dir);
    s->kind = PREP_SOURCE_SHARDS;
    s->shards = ftl_xcalloc(1, sizeof *s->shards);
    /* rows name "SHARD/MEMBER", relative to the shards' folder */
    s->root = ftl_is_directory(o->source_dir) ? ftl_strdup(o->source_dir) : ftl_path_folder(o->source_dir);
    ftl_status st = add_shards(s->shards, o->source_dir, false);
    if (st == FTL_OK && o->val_source) st = add_shards(s->shards, o->val_source, true);
    prep_labels labels = {0};
    for (int i = 0; i < s->shards->count && st == FTL_OK; i++) st = scan_shard(s, i, &labels);
    if (st == FTL_OK && s->item_count == 0)
        st = ftl_fail(FTL_E_NOT_FOUND, "no samples with a .jpg, .jpeg or .png image in %s", o->source_dir);
    if (st == FTL_OK) st = prep_labels_finish(&labels, s, shards_item_name);
    prep_labels_free(&labels);
    if (st == FTL_OK) {
        qsort(s->items, (size_t)s->item_count, sizeof *s->items, compare_items);
        s->given_split = o->val_source ? "val-source" : NULL;
    }
    return st;
}

ftl_status prep_shards_read(const prep_shards *p, const prep_item *item, uint8_t **data, size_t *size) {
    return tar_index_read(p->shards[item->origin].index, (size_t)item->row, data, size);
}

char *prep_shards_item_name(const prep_shards *p, const prep_item *item) {
    const shard *sh = &p->shards[item->origin];
    return ftl_format("%s: %s", sh->path, sh->index->members[item->row].name);
}

void prep_shards_free(prep_shards *p) {
    if (!p) return;
    for (int i = 0; i < p->count; i++) {
        tar_index_close(p->shards[i].index);
        free(p->shards[i].path);
    }
    free(p->shards);
    free(p);
}
