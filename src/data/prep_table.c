/* prep's table source: Parquet parts, their image, label, path and split columns, read cell by cell. */
#include "data/prep_table.h"
#include "ftl/parquet.h"
#include "data/delta_table.h"
#include "data/prep_labels.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/interrupt.h"
#include "util/string_list.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct table_part {
    char *path;
    ftl_parquet_file *file;
    char **keys, **values;          /* key=value/ partition folders above it */
    int partition_count;
    int image_col, image_path_col, label_col, split_col, path_col; /* leaves (-1: none, or a partition) */
    prep_split all_split;           /* --val-source parts: every row val */
    bool from_val_source;
} table_part;

/* A cell of the staged copy: where its bytes are, or why the row has none. */
typedef struct staged_cell {
    int64_t offset, size;
    ftl_status status;
    char *error;
} staged_cell;

struct prep_table {
    char *root;                     /* SRC as given */
    char *spill_path;               /* the staged copy (prep_table_stage), or NULL */
    int spill_fd;
    staged_cell *cells;
    int64_t cell_count;
    table_part *parts;
    int part_count;
    char *image_name;               /* the image column as found ("content", "image") */
    bool image_is_struct;           /* bytes may be null while the struct's path is set */
    char *images_root;              /* real path of --images-root, or NULL */
};

static bool has_suffix(const char *name, const char *suffix) {
    size_t n = strlen(name), s = strlen(suffix);
    return n > s && strcasecmp(name + n - s, suffix) == 0;
}

/* ---- the parts ---- */

typedef struct part_list {
    table_part *parts;
    int count;
} part_list;

static void add_part(part_list *l, const char *path, const ftl_string_list *keys, const ftl_string_list *values) {
    l->parts = ftl_xrealloc(l->parts, (size_t)(l->count + 1) * sizeof *l->parts);
    table_part *p = &l->parts[l->count++];
    memset(p, 0, sizeof *p);
    p->path = ftl_strdup(path);
    p->partition_count = (int)keys->count;
    p->keys = ftl_xcalloc((size_t)keys->count + 1, sizeof *p->keys);
    p->values = ftl_xcalloc((size_t)keys->count + 1, sizeof *p->values);
    for (int64_t i = 0; i < keys->count; i++) {
        p->keys[i] = ftl_strdup(keys->items[i]);
        p->values[i] = ftl_strdup(values->items[i]);
    }
}

/* Parts under `folder`, sorted; key=value/ folders entered with their value recorded. Files and
 * folders starting with '_' or '.' are the writer's (_SUCCESS, _committed_..., .crc): skipped. */
static ftl_status find_parts(const char *folder, ftl_string_list *keys, ftl_string_list *values, part_list *out, int depth) {
    FTL_TRY(delta_table_refuse(folder, "a table", "prep"));
    if (depth > 16) return ftl_fail(FTL_E_INVALID_ARG, "%s: partition folders nested deeper than 16 levels", folder);
    ftl_string_list names = {0};
    FTL_TRY(ftl_list_folder(folder, &names));
    ftl_status st = FTL_OK;
    for (int64_t i = 0; i < names.count && st == FTL_OK; i++) {
        const char *name = names.items[i];
        if (name[0] == '_' || name[0] == '.') continue;
        char *path = ftl_format("%s/%s", folder, name);
        const char *eq = strchr(name, '=');
        if (ftl_is_directory(path) && eq && eq > name) {
            ftl_string_list_push(keys, ftl_format("%.*s", (int)(eq - name), name));
            ftl_string_list_push(values, ftl_strdup(eq + 1));
            st = find_parts(path, keys, values, out, depth + 1);
            free(keys->items[--keys->count]);
            free(values->items[--values->count]);
        } else if (!ftl_is_directory(path) && has_suffix(name, ".parquet")) {
            add_part(out, path, keys, values);
        }
        free(path);
    }
    ftl_string_list_free(&names);
    return st;
}

bool prep_table_folder_is_table(const char *folder) {
    if (delta_table_is(folder)) return true;
    ftl_string_list keys = {0}, values = {0};
    part_list l = {0};
    ftl_status st = find_parts(folder, &keys, &values, &l, 0);
    bool found = st == FTL_OK && l.count > 0;
    for (int i = 0; i < l.count; i++) {
        free(l.parts[i].path);
        for (int k = 0; k < l.parts[i].partition_count; k++) free(l.parts[i].keys[k]), free(l.parts[i].values[k]);
        free(l.parts[i].keys), free(l.parts[i].values);
    }
    free(l.parts);
    ftl_string_list_free(&keys);
    ftl_string_list_free(&values);
    return found;
}

static ftl_status list_source_parts(const char *source, part_list *l) {
    if (!ftl_is_directory(source)) {
        ftl_string_list none = {0};
        add_part(l, source, &none, &none);
        return FTL_OK;
    }
    ftl_string_list keys = {0}, values = {0};
    ftl_status st = find_parts(source, &keys, &values, l, 0);
    ftl_string_list_free(&keys);
    ftl_string_list_free(&values);
    if (st == FTL_OK && l->count == 0) st = ftl_fail(FTL_E_NOT_FOUND, "%s holds no .parquet files", source);
    return st;
}

/* ---- columns ---- */

static int partition_index(const table_part *p, const char *key) {
    for (int i = 0; i < p->partition_count; i++)
        if (strcmp(p->keys[i], key) == 0) return i;
    return -1;
}

static bool is_binary(const ftl_parquet_column_info *c) { return c->type == FTL_PARQUET_BYTE_ARRAY && !c->utf8 && !c->repeated; }

/* The image column of a part: --image-col (a binary column or a struct with a binary `bytes` field),
 * or the one such column the file has. */
static ftl_status find_image(const table_part *p, const char *wanted, char **name, bool *in_struct) {
    ftl_parquet_file *f = p->file;
    if (wanted) {
        int c = ftl_parquet_find_column(f, wanted);
        if (c >= 0 && is_binary(ftl_parquet_column(f, c))) {
            *name = ftl_strdup(wanted);
            *in_struct = false;
            return FTL_OK;
        }
        char *bytes = ftl_format("%s.bytes", wanted);
        c = ftl_parquet_find_column(f, bytes);
        free(bytes);
        if (c >= 0 && is_binary(ftl_parquet_column(f, c))) {
            *name = ftl_strdup(wanted);
            *in_struct = true;
            return FTL_OK;
        }
        return ftl_fail(FTL_E_INVALID_ARG, "%s: --image-col %s is not a binary column nor a struct with a binary 'bytes' "
                        "field", p->path, wanted);
    }
    ftl_strbuf found = {0};
    int count = 0;
    for (int c = 0; c < ftl_parquet_num_columns(f); c++) {
        const ftl_parquet_column_info *info = ftl_parquet_column(f, c);
        if (!is_binary(info)) continue;
        const char *dot = strchr(info->name, '.');
        bool flat = !info->nested && !dot;
        bool struct_bytes = dot && strcmp(dot, ".bytes") == 0;
        if (!flat && !struct_bytes) continue;
        char *candidate = flat ? ftl_strdup(info->name) : ftl_format("%.*s", (int)(dot - info->name), info->name);
        if (count++ == 0) {
            *name = candidate;
            *in_struct = struct_bytes;
        } else {
            free(candidate);
        }
        ftl_strbuf_printf(&found, "%s%s", count > 1 ? ", " : "", flat ? info->name : info->name);
    }
    ftl_status st = FTL_OK;
    if (count == 0)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s: no image column (a binary column, or a struct with a binary 'bytes' field); "
                      "name it with --image-col", p->path);
    else if (count > 1)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s: %d columns could hold the images (%s): choose one with --image-col", p->path,
                      count, found.data);
    if (st != FTL_OK && count > 0) {
        free(*name);
        *name = NULL;
    }
    ftl_strbuf_free(&found);
    return st;
}

/* Resolves the part's columns against the first part's choice (the parts of one table must agree). */
static ftl_status resolve_columns(prep_table *t, table_part *p, const ftl_prep_options *o, const char *label_col) {
    if (!t->image_name) FTL_TRY(find_image(p, o->image_column, &t->image_name, &t->image_is_struct));
    char *bytes = t->image_is_struct ? ftl_format("%s.bytes", t->image_name) : ftl_strdup(t->image_name);
    char *struct_path = t->image_is_struct ? ftl_format("%s.path", t->image_name) : NULL;
    p->image_col = ftl_parquet_find_column(p->file, bytes);
    p->image_path_col = struct_path ? ftl_parquet_find_column(p->file, struct_path) : -1;
    ftl_status st = FTL_OK;
    if (p->image_col < 0 || !is_binary(ftl_parquet_column(p->file, p->image_col)))
        st = ftl_fail(FTL_E_INVALID_ARG, "%s: no binary column %s, which the table's first part has", p->path, bytes);
    free(bytes);
    free(struct_path);
    FTL_TRY(st);
    /* the path: the image struct's own, else Spark's `path` or DuckDB read_blob's `filename` */
    p->path_col = p->image_path_col;
    static const char *const path_names[] = {"path", "filename"};
    for (size_t k = 0; p->path_col < 0 && k < 2; k++) {
        int c = ftl_parquet_find_column(p->file, path_names[k]);
        if (c >= 0 && ftl_parquet_column(p->file, c)->type == FTL_PARQUET_BYTE_ARRAY && !ftl_parquet_column(p->file, c)->nested)
            p->path_col = c;
    }
    p->label_col = label_col ? ftl_parquet_find_column(p->file, label_col) : -1;
    if (label_col && p->label_col < 0 && partition_index(p, label_col) < 0)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: no label column '%s' (give --label-col NAME, or --label-from path for the "
                        "parent folder of each row's path)", p->path, label_col);
    if (p->label_col >= 0 && ftl_parquet_column(p->file, p->label_col)->repeated)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: the label column '%s' is a list", p->path, label_col);
    p->split_col = o->split_column ? ftl_parquet_find_column(p->file, o->split_column) : -1;
    if (o->split_column && p->split_col < 0 && partition_index(p, o->split_column) < 0)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: no split column '%s' (--split-col)", p->path, o->split_column);
    return FTL_OK;
}

/* ---- rows ---- */

/* A BYTE_ARRAY cell as a string (NULL for a null). */
static char *cell_text(const ftl_parquet_column_values *v, int64_t r) {
    if (v->validity && !v->validity[r]) return NULL;
    return ftl_format("%.*s", (int)(v->offsets[r + 1] - v->offsets[r]), (const char *)v->data + v->offsets[r]);
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Spark's binaryFile paths are URIs ("file:/a/b%20c/x.jpg"): the scheme dropped, %XX decoded. */
static char *path_of_uri(const char *value) {
    if (strncmp(value, "file:", 5) != 0) return ftl_strdup(value);
    const char *p = value + 5;
    if (strncmp(p, "//", 2) == 0 && p[2] == '/') p += 2; /* file:///x -> /x */
    char *out = ftl_xmalloc(strlen(p) + 1);
    size_t n = 0;
    for (; *p; p++) {
        int hi, lo;
        if (*p == '%' && (hi = hex_digit(p[1])) >= 0 && (lo = hex_digit(p[2])) >= 0) {
            out[n++] = (char)(hi * 16 + lo);
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return out;
}

/* --label-from path: the folder the file is in ("photos/ants/x.jpg" -> "ants"), NULL when none. */
static char *parent_folder(const char *path) {
    const char *end = strrchr(path, '/');
    if (!end || end == path) return NULL;
    const char *start = end;
    while (start > path && start[-1] != '/') start--;
    return end > start ? ftl_format("%.*s", (int)(end - start), start) : NULL;
}

static ftl_status split_of(const char *text, prep_split *out) {
    static const char *const train[] = {"train", "training"}, *const val[] = {"val", "valid", "validation", "test"};
    for (size_t i = 0; i < 2; i++)
        if (strcasecmp(text, train[i]) == 0) return *out = PREP_SPLIT_TRAIN, FTL_OK;
    for (size_t i = 0; i < 4; i++)
        if (strcasecmp(text, val[i]) == 0) return *out = PREP_SPLIT_VAL, FTL_OK;
    return FTL_E_INVALID_ARG;
}

typedef struct row_columns {
    ftl_parquet_column_values label, path, split;
} row_columns;

static ftl_status read_row_columns(const table_part *p, int rg, row_columns *c) {
    if (p->label_col >= 0) FTL_TRY(ftl_parquet_read_column(p->file, rg, p->label_col, &c->label));
    if (p->path_col >= 0) FTL_TRY(ftl_parquet_read_column(p->file, rg, p->path_col, &c->path));
    if (p->split_col >= 0) FTL_TRY(ftl_parquet_read_column(p->file, rg, p->split_col, &c->split));
    return FTL_OK;
}

/* One row's label into `labels`: from the label column, its partition folder, or its path. */
static ftl_status row_label(const table_part *p, const ftl_prep_options *o, const char *label_col, const row_columns *c,
                            int64_t r, const char *path, const char *where, prep_labels *labels) {
    if (o->label_from) {
        char *parent = path ? parent_folder(path) : NULL;
        if (!parent)
            return ftl_fail(FTL_E_INVALID_ARG, "%s: --label-from path: %s", where,
                            path ? "the path has no parent folder" : "the row has no path");
        prep_labels_add_text(labels, parent);
        return FTL_OK;
    }
    if (p->label_col < 0) {
        prep_labels_add_text(labels, ftl_strdup(p->values[partition_index(p, label_col)]));
        return FTL_OK;
    }
    const ftl_parquet_column_values *v = &c->label;
    if (v->validity && !v->validity[r]) return ftl_fail(FTL_E_INVALID_ARG, "%s: the label is null", where);
    switch (v->type) {
    case FTL_PARQUET_INT32: prep_labels_add_int(labels, ((const int32_t *)v->values)[r]); return FTL_OK;
    case FTL_PARQUET_INT64: prep_labels_add_int(labels, ((const int64_t *)v->values)[r]); return FTL_OK;
    case FTL_PARQUET_BYTE_ARRAY: prep_labels_add_text(labels, cell_text(v, r)); return FTL_OK;
    default:
        return ftl_fail(FTL_E_INVALID_ARG, "%s: label column '%s' is %s: labels are integers or text", where, label_col,
                        ftl_parquet_type_name(v->type));
    }
}

static ftl_status row_split(const table_part *p, const ftl_prep_options *o, const row_columns *c, int64_t r,
                            const char *where, prep_split *split) {
    if (p->from_val_source) return *split = PREP_SPLIT_VAL, FTL_OK;
    if (!o->split_column) return *split = PREP_SPLIT_TRAIN, FTL_OK;
    char *text = p->split_col >= 0 ? (c->split.type == FTL_PARQUET_BYTE_ARRAY ? cell_text(&c->split, r) : NULL)
                                   : ftl_strdup(p->values[partition_index(p, o->split_column)]);
    ftl_status st = text ? split_of(text, split) : FTL_E_INVALID_ARG;
    if (st != FTL_OK)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s: split '%s' in --split-col %s: expected train, or val, valid, validation or "
                      "test", where, text ? text : "(null or not text)", o->split_column);
    free(text);
    return st;
}

static void add_item(prep_source *s, char *path, int origin, int rg, int64_t row, prep_split split) {
    if ((s->item_count & (s->item_count - 1)) == 0 || s->item_count == 0)
        s->items = ftl_xrealloc(s->items, (size_t)(s->item_count ? 2 * s->item_count : 1) * sizeof *s->items);
    s->items[s->item_count++] = (prep_item){.relative_path = path, .split = split, .origin = origin, .row_group = rg, .row = row};
}

static ftl_status scan_part(prep_source *s, int index, const ftl_prep_options *o, const char *label_col, prep_labels *labels) {
    const table_part *p = &s->table->parts[index];
    row_columns c;
    memset(&c, 0, sizeof c);
    ftl_status st = FTL_OK;
    int64_t first = 0;
    for (int rg = 0; rg < ftl_parquet_num_row_groups(p->file) && st == FTL_OK; rg++) {
        int64_t rows = ftl_parquet_row_group_rows(p->file, rg);
        st = read_row_columns(p, rg, &c);
        for (int64_t r = 0; r < rows && st == FTL_OK; r++) {
            char *raw = p->path_col >= 0 ? cell_text(&c.path, r) : NULL;
            char *path = raw ? path_of_uri(raw) : NULL;
            free(raw);
            char *where = ftl_format("%s row %lld%s%s%s", p->path, (long long)(first + r), path ? " (" : "",
                                     path ? path : "", path ? ")" : "");
            prep_split split = PREP_SPLIT_TRAIN;
            st = row_label(p, o, label_col, &c, r, path, where, labels);
            if (st == FTL_OK) st = row_split(p, o, &c, r, where, &split);
            if (st == FTL_OK) add_item(s, path ? path : ftl_format("%s#%lld", ftl_path_file_name(p->path), (long long)(first + r)),
                                       index, rg, r, split);
            else free(path);
            free(where);
        }
        first += rows;
    }
    ftl_parquet_column_values_free(&c.label);
    ftl_parquet_column_values_free(&c.path);
    ftl_parquet_column_values_free(&c.split);
    return st;
}

/* Items grouped by class, then by path: the stratified split cuts each class's run (as folders). */
static int compare_items(const void *a, const void *b) {
    const prep_item *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    int c = strcmp(x->relative_path, y->relative_path);
    if (c) return c;
    if (x->origin != y->origin) return x->origin < y->origin ? -1 : 1;
    if (x->row_group != y->row_group) return x->row_group < y->row_group ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

static ftl_status open_parts(prep_table *t, const ftl_prep_options *o) {
    part_list train = {0}, val = {0};
    ftl_status st = list_source_parts(o->source_dir, &train);
    if (st == FTL_OK && o->val_source) st = list_source_parts(o->val_source, &val);
    t->part_count = train.count + val.count;
    t->parts = ftl_xcalloc((size_t)t->part_count + 1, sizeof *t->parts);
    if (train.count) memcpy(t->parts, train.parts, (size_t)train.count * sizeof *t->parts);
    if (val.count) memcpy(t->parts + train.count, val.parts, (size_t)val.count * sizeof *t->parts);
    for (int i = train.count; i < t->part_count; i++) t->parts[i].from_val_source = true;
    free(train.parts);
    free(val.parts);
    for (int i = 0; i < t->part_count && st == FTL_OK; i++) st = ftl_parquet_open(t->parts[i].path, &t->parts[i].file);
    return st;
}

static ftl_status check_options(const ftl_prep_options *o) {
    if (o->label_from && strcmp(o->label_from, "path") != 0)
        return ftl_fail(FTL_E_INVALID_ARG, "--label-from %s: the only source of labels it takes is 'path' (the parent folder "
                        "of each row's path)", o->label_from);
    if (o->label_from && o->label_column)
        return ftl_fail(FTL_E_INVALID_ARG, "give --label-col or --label-from, not both");
    if (o->split_column && o->val_source)
        return ftl_fail(FTL_E_INVALID_ARG, "give --split-col or --val-source, not both");
    return FTL_OK;
}

/* How prep_labels names an item in its messages: as prep_source_item_name does for a table. */
static char *table_item_name(const prep_source *s, const prep_item *item) { return prep_table_item_name(s->table, item); }

ftl_status prep_table_open(const ftl_prep_options *o, prep_source *s) {
    FTL_TRY(check_options(o));
    prep_table *t = ftl_xcalloc(1, sizeof *t);
    t->spill_fd = -1;
    s->kind = PREP_SOURCE_TABLE;
    s->table = t;
    s->root = ftl_strdup(o->source_dir);
    t->root = ftl_strdup(o->source_dir);
    const char *label_col = o->label_from ? NULL : o->label_column ? o->label_column : "label";
    ftl_status st = open_parts(t, o);
    if (st == FTL_OK && o->images_root) {
        t->images_root = realpath(o->images_root, NULL);
        if (!t->images_root || !ftl_is_directory(t->images_root))
            st = ftl_fail(FTL_E_NOT_FOUND, "--images-root %s is not a folder", o->images_root);
    }
    prep_labels labels = {0};
    for (int i = 0; i < t->part_count && st == FTL_OK; i++) {
        table_part *p = &t->parts[i];
        st = resolve_columns(t, p, o, label_col);
        if (st == FTL_OK && o->label_from && p->path_col < 0)
            st = ftl_fail(FTL_E_INVALID_ARG, "%s: --label-from path needs a path column (the image struct's path, or a "
                          "'path' or 'filename' column)", p->path);
        if (st == FTL_OK && label_col && p->label_col >= 0)
            prep_labels_names_from_metadata(&labels, ftl_parquet_metadata_get(p->file, "ftl.classes"),
                                            ftl_parquet_metadata_get(p->file, "huggingface"), label_col, p->path);
        if (st == FTL_OK) st = scan_part(s, i, o, label_col, &labels);
    }
    if (st == FTL_OK && s->item_count == 0) st = ftl_fail(FTL_E_NOT_FOUND, "%s holds no rows", o->source_dir);
    if (st == FTL_OK) st = prep_labels_finish(&labels, s, table_item_name);
    prep_labels_free(&labels);
    if (st == FTL_OK) {
        qsort(s->items, (size_t)s->item_count, sizeof *s->items, compare_items);
        s->given_split = o->split_column ? "column" : o->val_source ? "val-source" : NULL;
    }
    return st;
}

/* ---- cells ---- */

/* ROOT/path for a row without bytes: only a relative path that stays under ROOT. */
static ftl_status read_under_root(const prep_table *t, const char *path, uint8_t **data, size_t *size) {
    bool climbs = false;
    for (const char *p = path; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
        climbs |= strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0');
    if (path[0] == '/' || climbs || strstr(path, "://"))
        return ftl_fail(FTL_E_INVALID_ARG, "its path '%s' is absolute or climbs out with '..': --images-root reads only "
                        "relative paths under %s", path, t->images_root);
    char *joined = ftl_format("%s/%s", t->images_root, path);
    char *real = realpath(joined, NULL);
    ftl_status st = FTL_OK;
    size_t n = strlen(t->images_root);
    if (!real) st = ftl_fail(FTL_E_NOT_FOUND, "no image bytes, and %s: %s", joined, strerror(errno));
    else if (strncmp(real, t->images_root, n) != 0 || real[n] != '/')
        st = ftl_fail(FTL_E_INVALID_ARG, "its path '%s' leads out of --images-root %s (to %s)", path, t->images_root, real);
    else st = ftl_read_file(real, data, size);
    free(real);
    free(joined);
    return st;
}

/* The cell as the table holds it. `v` is the caller's, kept from cell to cell: rows read in storage
 * order find their page decoded already (ftl_parquet_read_value). */
static ftl_status read_cell(const prep_table *t, const prep_item *item, ftl_parquet_value *image, ftl_parquet_value *path_value,
                            uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    const table_part *p = &t->parts[item->origin];
    ftl_parquet_value *v = image;
    ftl_status st = ftl_parquet_read_value(p->file, item->row_group, p->image_col, item->row, v);
    if (st == FTL_OK && !v->is_null) {
        *data = ftl_xmalloc(v->size ? (size_t)v->size : 1);
        memcpy(*data, v->data, (size_t)v->size);
        *size = (size_t)v->size;
    } else if (st == FTL_OK) {
        char *path = NULL;
        if (t->image_is_struct && p->image_path_col >= 0) {
            st = ftl_parquet_read_value(p->file, item->row_group, p->image_path_col, item->row, path_value);
            if (st == FTL_OK && !path_value->is_null)
                path = ftl_format("%.*s", (int)path_value->size, (const char *)path_value->data);
        }
        if (st == FTL_OK && path && t->images_root) st = read_under_root(t, path, data, size);
        else if (st == FTL_OK && path)
            st = ftl_fail(FTL_E_NOT_FOUND, "no image bytes (its path %s is read from disk only with --images-root DIR)", path);
        else if (st == FTL_OK) st = ftl_fail(FTL_E_NOT_FOUND, "no image (the %s cell is null)", t->image_name);
        free(path);
    }
    return st;
}

ftl_status prep_table_read(const prep_table *t, const prep_item *item, uint8_t **data, size_t *size) {
    if (!t->cells) { /* not staged: one page read for the cell */
        ftl_parquet_value image, path;
        memset(&image, 0, sizeof image);
        memset(&path, 0, sizeof path);
        ftl_status st = read_cell(t, item, &image, &path, data, size);
        ftl_parquet_value_free(&image);
        ftl_parquet_value_free(&path);
        return st;
    }
    *data = NULL;
    *size = 0;
    if (item->staged < 0 || item->staged >= t->cell_count)
        return ftl_fail(FTL_E_INTERNAL, "an item outside the staged copy of %s", t->root);
    const staged_cell *c = &t->cells[item->staged];
    if (c->status != FTL_OK) return ftl_fail(c->status, "%s", c->error);
    uint8_t *buf = ftl_xmalloc(c->size ? (size_t)c->size : 1);
    ssize_t got = 0;
    for (int64_t at = 0; at < c->size; at += got) {
        got = pread(t->spill_fd, buf + at, (size_t)(c->size - at), (off_t)(c->offset + at));
        if (got <= 0) {
            free(buf);
            return ftl_fail(FTL_E_IO, "cannot read the staged copy %s: %s", t->spill_path, got < 0 ? strerror(errno) : "short file");
        }
    }
    *data = buf;
    *size = (size_t)c->size;
    return FTL_OK;
}

typedef struct stage_order {
    const prep_item *item;
    int64_t index;
} stage_order;

static int compare_storage(const void *a, const void *b) {
    const prep_item *x = ((const stage_order *)a)->item, *y = ((const stage_order *)b)->item;
    if (x->origin != y->origin) return x->origin < y->origin ? -1 : 1;
    if (x->row_group != y->row_group) return x->row_group < y->row_group ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

ftl_status prep_table_stage(prep_table *t, prep_item *items, int64_t count, const char *spill_path) {
    stage_order *order = ftl_xmalloc((size_t)(count ? count : 1) * sizeof *order);
    for (int64_t i = 0; i < count; i++) order[i] = (stage_order){&items[i], i};
    qsort(order, (size_t)count, sizeof *order, compare_storage);
    FILE *spill = fopen(spill_path, "wb");
    if (!spill) {
        free(order);
        return ftl_fail(FTL_E_IO, "cannot create %s: %s", spill_path, strerror(errno));
    }
    t->cells = ftl_xcalloc((size_t)(count ? count : 1), sizeof *t->cells);
    t->cell_count = count;
    t->spill_path = ftl_strdup(spill_path);
    ftl_status st = FTL_OK;
    int64_t offset = 0;
    ftl_parquet_value image, path;
    memset(&image, 0, sizeof image);
    memset(&path, 0, sizeof path);
    for (int64_t k = 0; k < count && st == FTL_OK; k++) {
        prep_item *item = &items[order[k].index];
        staged_cell *c = &t->cells[order[k].index];
        item->staged = order[k].index;
        uint8_t *data = NULL;
        size_t size = 0;
        ftl_status cell = read_cell(t, item, &image, &path, &data, &size);
        if (cell == FTL_OK) {
            st = ftl_write_all(spill, data, size, spill_path);
            *c = (staged_cell){.offset = offset, .size = (int64_t)size};
            offset += (int64_t)size;
        } else if (cell == FTL_E_NOT_FOUND || cell == FTL_E_INVALID_ARG) { /* this row's: said when it is read */
            *c = (staged_cell){.status = cell, .error = ftl_strdup(ftl_last_error())};
        } else {
            char *name = prep_table_item_name(t, item);
            st = ftl_fail_context(cell, "%s", name);
            free(name);
        }
        free(data);
        if (st == FTL_OK) st = ftl_interrupt_check();
    }
    ftl_parquet_value_free(&image);
    ftl_parquet_value_free(&path);
    if (fclose(spill) != 0 && st == FTL_OK) st = ftl_fail(FTL_E_IO, "cannot write %s: %s", spill_path, strerror(errno));
    free(order);
    if (st == FTL_OK && (t->spill_fd = open(spill_path, O_RDONLY | O_CLOEXEC)) < 0)
        st = ftl_fail(FTL_E_IO, "cannot open %s: %s", spill_path, strerror(errno));
    if (st != FTL_OK) prep_table_unstage(t);
    return st;
}

void prep_table_unstage(prep_table *t) {
    if (!t || !t->cells) return;
    for (int64_t i = 0; i < t->cell_count; i++) free(t->cells[i].error);
    free(t->cells);
    t->cells = NULL;
    t->cell_count = 0;
    if (t->spill_fd >= 0) close(t->spill_fd);
    t->spill_fd = -1;
    if (t->spill_path) unlink(t->spill_path);
    free(t->spill_path);
    t->spill_path = NULL;
}

char *prep_table_item_name(const prep_table *t, const prep_item *item) {
    const table_part *p = &t->parts[item->origin];
    int64_t row = item->row;
    for (int rg = 0; rg < item->row_group; rg++) row += ftl_parquet_row_group_rows(p->file, rg);
    return ftl_format("%s row %lld (%s)", p->path, (long long)row, item->relative_path);
}

void prep_table_free(prep_table *t) {
    if (!t) return;
    prep_table_unstage(t);
    for (int i = 0; i < t->part_count; i++) {
        table_part *p = &t->parts[i];
        ftl_parquet_close(p->file);
        for (int k = 0; k < p->partition_count; k++) free(p->keys[k]), free(p->values[k]);
        free(p->keys), free(p->values), free(p->path);
    }
    free(t->parts);
    free(t->image_name);
    free(t->images_root);
    free(t->root);
    free(t);
}
