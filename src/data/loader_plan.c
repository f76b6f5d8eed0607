/* Loader planning: source discovery, column checks, sharding and piece order. */
#include "data/loader_plan.h"
#include "data/dataset.h"
#include "data/delta_table.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/string_list.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool is_part_file(const char *name) {
    size_t n = strlen(name);
    /* Spark and pyarrow also leave _SUCCESS, _metadata and .crc files beside the parts. */
    return name[0] != '.' && name[0] != '_' && n > 8 && strcmp(name + n - 8, ".parquet") == 0;
}

/* A folder of parts: every *.parquet below it, but none under the writer's own folders (Spark's
 * _temporary/ holds unfinished parts); a Delta table is refused, since its folder keeps removed parts
 * until they are vacuumed, and only its _delta_log says which are live. */
static ftl_status collect_folder(const char *dir, ftl_string_list *out, int depth) {
    if (depth > 16) return FTL_OK;
    FTL_TRY(delta_table_refuse(dir, "a dataset", "read"));
    ftl_string_list names = {0};
    ftl_status st = ftl_list_folder(dir, &names);
    for (int64_t i = 0; st == FTL_OK && i < names.count; i++) {
        char *p = ftl_format("%s/%s", dir, names.items[i]);
        if (ftl_is_directory(p)) {
            if (names.items[i][0] != '_') st = collect_folder(p, out, depth + 1); /* hidden ones are never listed */
        } else if (is_part_file(names.items[i])) {
            ftl_string_list_push(out, p);
            p = NULL;
        }
        free(p);
    }
    ftl_string_list_free(&names);
    return st;
}

static ftl_status expand_into(const char *const *sources, int source_count, ftl_string_list *out) {
    if (source_count < 1) return ftl_fail(FTL_E_INVALID_ARG, "the loader needs at least one Parquet file or folder");
    for (int i = 0; i < source_count; i++) {
        const char *s = sources[i];
        if (!ftl_path_exists(s)) return ftl_fail(FTL_E_NOT_FOUND, "dataset %s does not exist", s);
        if (ftl_is_directory(s)) {
            int before = out->count;
            FTL_TRY(collect_folder(s, out, 0));
            if (out->count == before) return ftl_fail(FTL_E_NOT_FOUND, "no *.parquet files in folder %s", s);
        } else {
            ftl_string_list_push(out, ftl_strdup(s));
        }
    }
    return FTL_OK;
}

ftl_status loader_expand_sources(const char *const *sources, int source_count, char ***paths, int *count) {
    ftl_string_list l = {0};
    ftl_status st = expand_into(sources, source_count, &l);
    if (st != FTL_OK) {
        for (int i = 0; i < l.count; i++) free(l.items[i]);
        free(l.items);
        return st;
    }
    *paths = l.items;
    *count = l.count;
    return FTL_OK;
}

static ftl_status find_columns(const ftl_loader_options *o, loader_file *f) {
    const char *names[3] = {o->label_column, o->value_column, o->path_column};
    int *slots[3] = {&f->label_column, &f->value_column, &f->path_column};
    for (int k = 0; k < 3; k++) {
        *slots[k] = -1;
        if (!names[k]) continue;
        int c = ftl_parquet_find_column(f->parquet, names[k]);
        if (c < 0 && k == 2 && o->path_optional) continue;
        if (c < 0) {
            ftl_strbuf have = {0};
            for (int j = 0; j < ftl_parquet_num_columns(f->parquet); j++)
                ftl_strbuf_printf(&have, "%s%s", j ? ", " : "", ftl_parquet_column(f->parquet, j)->name);
            ftl_status st = ftl_fail(FTL_E_NOT_FOUND, "%s: no column '%s' (columns: %s)", f->path, names[k],
                                     have.data ? have.data : "none");
            ftl_strbuf_free(&have);
            return st;
        }
        const ftl_parquet_column_info *info = ftl_parquet_column(f->parquet, c);
        /* Paths are read through their offsets: only BYTE_ARRAY strings have them. */
        bool ok = k == 0   ? (info->type == FTL_PARQUET_INT32 || info->type == FTL_PARQUET_INT64)
                  : k == 1 ? (info->type == FTL_PARQUET_BYTE_ARRAY || info->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY)
                           : info->type == FTL_PARQUET_BYTE_ARRAY;
        const char *expected[3] = {"an INT32 or INT64 label", "BYTE_ARRAY or FIXED_LEN_BYTE_ARRAY values",
                                   "BYTE_ARRAY (string) paths"};
        if (!ok || info->nested)
            return ftl_fail(FTL_E_UNSUPPORTED, "%s: column '%s' is %s%s; expected %s", f->path, names[k],
                            info->nested ? "nested " : "", ftl_parquet_type_name(info->type), expected[k]);
        *slots[k] = c;
    }
    return FTL_OK;
}

/* S from a file's ftl.image_size metadata: 0 when absent, an error when malformed. */
static ftl_status metadata_image_size(ftl_parquet_file *f, const char *path, int *size) {
    const char *meta = ftl_parquet_metadata_get(f, FTL_META_IMAGE_SIZE);
    *size = 0;
    if (!meta) return FTL_OK;
    char *end;
    long s = strtol(meta, &end, 10);
    if (*end || s < 1 || s > FTL_LOADER_MAX_IMAGE_SIZE)
        return ftl_fail(FTL_E_FORMAT, "%s: metadata %s = '%s' is not an image size (1..%d)", path, FTL_META_IMAGE_SIZE, meta,
                        FTL_LOADER_MAX_IMAGE_SIZE);
    *size = (int)s;
    return FTL_OK;
}

ftl_status loader_total_rows(const char *const *sources, int source_count, int64_t *rows) {
    ftl_string_list paths = {0};
    ftl_status st = expand_into(sources, source_count, &paths);
    *rows = 0;
    for (int i = 0; i < paths.count && st == FTL_OK; i++) {
        ftl_parquet_file *f = NULL;
        st = ftl_parquet_open(paths.items[i], &f);
        if (st == FTL_OK && __builtin_add_overflow(*rows, ftl_parquet_num_rows(f), rows))
            st = ftl_fail(FTL_E_FORMAT, "%s: the row counts of the dataset's files overflow 64 bits", paths.items[i]);
        ftl_parquet_close(f);
    }
    ftl_string_list_free(&paths);
    return st;
}

ftl_status loader_dataset_image_size(const char *const *sources, int source_count, int override, int *size) {
    if (override > 0) {
        if (override > FTL_LOADER_MAX_IMAGE_SIZE)
            return ftl_fail(FTL_E_INVALID_ARG, "image size %d is out of range (1..%d)", override, FTL_LOADER_MAX_IMAGE_SIZE);
        *size = override;
        return FTL_OK;
    }
    ftl_string_list paths = {0};
    ftl_status st = expand_into(sources, source_count, &paths);
    if (st != FTL_OK) {
        ftl_string_list_free(&paths);
        return st;
    }
    ftl_parquet_file *f = NULL;
    st = ftl_parquet_open(paths.items[0], &f);
    if (st == FTL_OK) st = metadata_image_size(f, paths.items[0], size);
    if (st == FTL_OK && *size == 0)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s has no %s metadata; pass --image-size S", paths.items[0], FTL_META_IMAGE_SIZE);
    ftl_parquet_close(f);
    ftl_string_list_free(&paths);
    return st;
}

/* Bytes per row: S*S*3 for images (S from the options or ftl.image_size metadata), else the
 * fixed length of a FIXED_LEN_BYTE_ARRAY value column (feature vectors). */
static ftl_status decide_row_bytes(const ftl_loader_options *o, loader_plan *p) {
    loader_file *f = &p->files[0];
    const ftl_parquet_column_info *value = ftl_parquet_column(f->parquet, f->value_column);
    int size = o->image_size;
    if (size == 0 && value->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY && value->fixed_length > 0) {
        p->row_bytes = value->fixed_length; /* feature vectors */
        return FTL_OK;
    }
    if (size == 0) FTL_TRY(metadata_image_size(f->parquet, f->path, &size));
    if (size > FTL_LOADER_MAX_IMAGE_SIZE)
        return ftl_fail(FTL_E_INVALID_ARG, "image size %d is out of range (1..%d)", size, FTL_LOADER_MAX_IMAGE_SIZE);
    if (size <= 0)
        return ftl_fail(FTL_E_INVALID_ARG,
                        "%s: cannot tell the size of the '%s' values (no %s metadata); pass the image size "
                        "(--image-size S for S x S x 3 images)", f->path, value->name, FTL_META_IMAGE_SIZE);
    p->image_size = size;
    p->row_bytes = (int64_t)size * size * 3;
    /* encoded rows decode to their file's S (pixel rows are held to S by their length) */
    for (int i = 0; i < p->file_count; i++) {
        if (!p->files[i].encoded) continue;
        p->any_encoded = true;
        int stored = 0;
        FTL_TRY(metadata_image_size(p->files[i].parquet, p->files[i].path, &stored));
        if (stored != size)
            return ftl_fail(FTL_E_INVALID_ARG, "%s keeps its images encoded at %s = %d, which %s %d: prep it again at that "
                            "size", p->files[i].path, FTL_META_IMAGE_SIZE, stored,
                            o->image_size ? "differs from the image size asked for," : "differs from the first file's", size);
    }
    return FTL_OK;
}

/* A dataset's format version: 2 keeps encoded images in its image column, which the loader decodes
 * with prep's recipe; a later version, or a recipe this build does not have, is refused rather than
 * read as something it is not. */
static ftl_status check_dataset_format(const ftl_loader_options *o, loader_file *f) {
    f->format_column = f->name_column = -1;
    const char *format = ftl_parquet_metadata_get(f->parquet, FTL_META_FORMAT);
    if (!format || strncmp(format, FTL_DATASET_PREFIX, strlen(FTL_DATASET_PREFIX)) != 0 ||
        strcmp(format, FTL_DATASET_PIXELS) == 0)
        return FTL_OK;
    if (strcmp(format, FTL_DATASET_ENCODED) != 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: dataset format '%s' is newer than this ftl reads (%s, %s): update ftl",
                        f->path, format, FTL_DATASET_PIXELS, FTL_DATASET_ENCODED);
    if (strcmp(o->value_column, FTL_COLUMN_IMAGE) != 0) return FTL_OK; /* another column: stored as it is */
    const char *recipe = ftl_parquet_metadata_get(f->parquet, FTL_META_RESIZE);
    if (!recipe || strcmp(recipe, FTL_RESIZE_RECIPE) != 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s keeps encoded images made with the recipe '%s'; this ftl decodes them with "
                        "'%s' only, which would not give the same pixels", f->path, recipe ? recipe : "(none)", FTL_RESIZE_RECIPE);
    int c = ftl_parquet_find_column(f->parquet, FTL_COLUMN_IMAGE_FORMAT);
    const ftl_parquet_column_info *info = c >= 0 ? ftl_parquet_column(f->parquet, c) : NULL;
    if (!info || info->type != FTL_PARQUET_BYTE_ARRAY || info->nested)
        return ftl_fail(FTL_E_FORMAT, "%s: a %s dataset needs a string column '%s' (which rows are encoded); %s", f->path,
                        FTL_DATASET_ENCODED, FTL_COLUMN_IMAGE_FORMAT, info ? "it has the wrong type" : "it has none");
    if (f->value_column >= 0 && ftl_parquet_column(f->parquet, f->value_column)->type != FTL_PARQUET_BYTE_ARRAY)
        return ftl_fail(FTL_E_FORMAT, "%s: a %s dataset's '%s' column must be BYTE_ARRAY", f->path, FTL_DATASET_ENCODED,
                        FTL_COLUMN_IMAGE);
    f->encoded = true;
    f->format_column = c;
    int n = ftl_parquet_find_column(f->parquet, FTL_COLUMN_PATH);
    if (n >= 0 && ftl_parquet_column(f->parquet, n)->type == FTL_PARQUET_BYTE_ARRAY) f->name_column = n;
    return FTL_OK;
}

static ftl_status open_file(const ftl_loader_options *o, loader_file *f, int64_t first_row) {
    FTL_TRY(ftl_parquet_open(f->path, &f->parquet));
    FTL_TRY(find_columns(o, f));
    FTL_TRY(check_dataset_format(o, f));
    struct stat sb;
    if (stat(f->path, &sb) == 0) {
        f->size = (uint64_t)sb.st_size;
        f->mtime_ns = (uint64_t)sb.st_mtim.tv_sec * 1000000000ull + (uint64_t)sb.st_mtim.tv_nsec;
    }
    int groups = ftl_parquet_num_row_groups(f->parquet);
    f->first_row = first_row;
    f->row_group_first_row = ftl_xmalloc((size_t)(groups + 1) * sizeof *f->row_group_first_row);
    int64_t row = first_row;
    for (int g = 0; g < groups; g++) {
        f->row_group_first_row[g] = row;
        if (__builtin_add_overflow(row, ftl_parquet_row_group_rows(f->parquet, g), &row))
            return ftl_fail(FTL_E_FORMAT, "%s: the row counts of the dataset's files overflow 64 bits", f->path);
    }
    f->row_group_first_row[groups] = row;
    return FTL_OK;
}

static void add_piece(loader_plan *p, int file, int group, int64_t begin, int64_t end) {
    p->pieces = ftl_xrealloc(p->pieces, (size_t)(p->piece_count + 1) * sizeof *p->pieces);
    p->pieces[p->piece_count++] = (loader_piece){file, group, begin, end};
}

ftl_status loader_plan_build(const ftl_loader_options *o, loader_plan *p) {
    memset(p, 0, sizeof *p);
    if (o->num_shards < 1 || o->shard < 0 || o->shard >= o->num_shards)
        return ftl_fail(FTL_E_INVALID_ARG, "shard %d of %d is out of range", o->shard, o->num_shards);
    if (o->batch_size < 1 || o->batch_size > FTL_LOADER_MAX_BATCH)
        return ftl_fail(FTL_E_INVALID_ARG, "batch size %d is out of range (1..%d)", o->batch_size, FTL_LOADER_MAX_BATCH);
    p->shard = o->shard;
    p->num_shards = o->num_shards;
    ftl_string_list paths = {0};
    ftl_status st = expand_into(o->sources, o->source_count, &paths);
    p->files = ftl_xcalloc((size_t)(paths.count ? paths.count : 1), sizeof *p->files);
    p->file_count = paths.count;
    for (int i = 0; i < paths.count; i++) p->files[i].path = paths.items[i];
    free(paths.items);
    for (int i = 0; i < p->file_count && st == FTL_OK; i++) {
        st = open_file(o, &p->files[i], p->total_rows);
        /* Footers' row counts are not backed by data yet. */
        if (st == FTL_OK && __builtin_add_overflow(p->total_rows, ftl_parquet_num_rows(p->files[i].parquet), &p->total_rows))
            st = ftl_fail(FTL_E_FORMAT, "%s: the row counts of the dataset's files overflow 64 bits", p->files[i].path);
    }
    if (st == FTL_OK) st = decide_row_bytes(o, p);
    if (st != FTL_OK) {
        loader_plan_free(p);
        return st;
    }
    int64_t n = p->total_rows, k = o->shard, s = o->num_shards;
    /* floor(k n / s) without forming k n (n can be near 2^63). */
    p->shard_begin = k * (n / s) + k * (n % s) / s;
    p->shard_end = (k + 1) * (n / s) + (k + 1) * (n % s) / s;
    if (o->row_end > 0) {
        if (o->row_begin < 0 || o->row_begin > o->row_end || o->row_end > n) {
            st = ftl_fail(FTL_E_INVALID_ARG, "rows [%lld, %lld) are outside the dataset's %lld rows", (long long)o->row_begin,
                          (long long)o->row_end, (long long)n);
            loader_plan_free(p);
            return st;
        }
        p->shard_begin = o->row_begin;
        p->shard_end = o->row_end;
    }
    for (int i = 0; i < p->file_count; i++) {
        loader_file *f = &p->files[i];
        int groups = ftl_parquet_num_row_groups(f->parquet);
        for (int g = 0; g < groups; g++) {
            int64_t begin = f->row_group_first_row[g], end = f->row_group_first_row[g + 1];
            if (begin < p->shard_begin) begin = p->shard_begin;
            if (end > p->shard_end) end = p->shard_end;
            if (begin < end) add_piece(p, i, g, begin - f->row_group_first_row[g], end - f->row_group_first_row[g]);
        }
    }
    /* Equal batches trim each pass to the smallest shard; an endless stream (steps_per_epoch)
     * needs no trim, since its epochs are counted in batches. */
    p->rows_per_pass = o->equal_batches && o->steps_per_epoch == 0 && o->row_end <= 0 ? n / s : p->shard_end - p->shard_begin;
    if (o->steps_per_epoch > 0) {
        p->batches_per_epoch = o->steps_per_epoch;
    } else {
        int64_t b = o->batch_size;
        p->batches_per_epoch = o->drop_remainder ? p->rows_per_pass / b : (p->rows_per_pass + b - 1) / b;
        if (o->drop_remainder) p->rows_per_pass = p->batches_per_epoch * b;
    }
    if (p->rows_per_pass <= 0 || p->batches_per_epoch <= 0) {
        st = ftl_fail(FTL_E_INVALID_ARG,
                      "%lld rows split over %d shard%s give no batch of %d rows%s", (long long)n, o->num_shards,
                      o->num_shards == 1 ? "" : "s", o->batch_size, o->drop_remainder ? " (drop_remainder)" : "");
        loader_plan_free(p);
        return st;
    }
    return FTL_OK;
}

void loader_plan_free(loader_plan *p) {
    for (int i = 0; i < p->file_count; i++) {
        free(p->files[i].path);
        free(p->files[i].row_group_first_row);
        ftl_parquet_close(p->files[i].parquet);
    }
    free(p->files);
    free(p->pieces);
    memset(p, 0, sizeof *p);
}

uint64_t loader_mix_seed(uint64_t seed, int64_t pass, int shard, uint64_t stream) {
    uint64_t x = seed;
    uint64_t a = ftl_splitmix64(&x);
    x = a ^ ((uint64_t)pass * 0x9E3779B97F4A7C15ull);
    uint64_t b = ftl_splitmix64(&x);
    x = b ^ ((uint64_t)(uint32_t)shard << 32) ^ stream;
    return ftl_splitmix64(&x);
}

void loader_plan_pass_order(const loader_plan *p, uint64_t seed, int64_t pass, bool shuffle, int *order) {
    for (int i = 0; i < p->piece_count; i++) order[i] = i;
    if (!shuffle) return;
    ftl_rng rng;
    ftl_rng_seed(&rng, loader_mix_seed(seed, pass, p->shard, 1));
    for (int i = p->piece_count; i > 1; i--) {
        int j = (int)ftl_rng_below(&rng, (uint64_t)i);
        int t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}
