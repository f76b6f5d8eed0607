/* `ftl prep`: worker threads decode and thumbnail images in parallel; one writer consumes the
 * results strictly in row order, so the files are byte-identical for any thread count. A ring of
 * result slots bounds memory: workers never run more than RING_PER_THREAD*threads images ahead. */
#include "ftl/image.h"
#include "ftl/parquet.h"
#include "ftl/prep.h"
#include "data/dataset.h"
#include "data/prep_source.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/publish.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/timing.h"
#include "util/interrupt.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RING_PER_THREAD = 4 };

void ftl_prep_options_init(ftl_prep_options *o) {
    memset(o, 0, sizeof *o);
    o->image_size = 299;
    o->val_fraction = 0.1;
    o->seed = 42;
    o->stratify = true;
    o->row_group_bytes = FTL_PREP_DEFAULT_ROW_GROUP_BYTES;
    o->codec = "none";
    o->threads = 0;
    o->show_progress = true;
}

typedef struct result_slot {
    bool ready;
    ftl_status status;
    bool fatal;           /* the source itself is damaged or refused (a table, a shard): never skipped */
    char *error;          /* reason when status != OK */
    uint8_t *canvas;      /* S*S*3 */
    uint8_t *encoded;     /* --keep-encoded: the original file when smaller than its pixels, else NULL */
    size_t encoded_size;
    const char *encoded_format; /* "jpeg" or "png" */
    uint64_t source_bytes;
} result_slot;

typedef struct prep_job {
    const ftl_prep_options *options;
    const prep_source *source;
    size_t canvas_bytes;
    result_slot *ring;
    int64_t ring_size;
    pthread_mutex_t lock;
    pthread_cond_t slot_ready, slot_free;
    int64_t next_item;    /* next item a worker claims */
    int64_t write_pos;    /* next item the writer consumes */
    bool stop;
} prep_job;

static void *prep_worker(void *arg) {
    prep_job *job = arg;
    ftl_image_prepper *prepper = NULL;
    ftl_status init = ftl_image_prepper_init(&prepper, job->options->image_size);
    char *init_error = init == FTL_OK ? NULL : ftl_strdup(ftl_last_error());
    uint8_t *file_data = NULL;
    for (;;) {
        pthread_mutex_lock(&job->lock);
        while (!job->stop && job->next_item < job->source->item_count &&
               job->next_item - job->write_pos >= job->ring_size)
            pthread_cond_wait(&job->slot_free, &job->lock);
        if (job->stop || job->next_item >= job->source->item_count) {
            pthread_mutex_unlock(&job->lock);
            break;
        }
        int64_t index = job->next_item++;
        pthread_mutex_unlock(&job->lock);

        result_slot *slot = &job->ring[index % job->ring_size];
        const prep_item *item = &job->source->items[index];
        size_t file_size = 0;
        ftl_status st = init;
        if (st == FTL_OK) st = prep_source_read(job->source, item, &file_data, &file_size);
        /* an unreadable file or a row without an image is skipped; a damaged table or a refused path is not */
        bool fatal = st != FTL_OK && init == FTL_OK &&
                     (st == FTL_E_INVALID_ARG || (job->source->kind != PREP_SOURCE_FOLDERS && st != FTL_E_NOT_FOUND));
        ftl_image_info info = {0};
        if (st == FTL_OK) st = ftl_image_prepper_run(prepper, file_data, file_size, slot->canvas, &info);
        /* kept when it saves bytes: a reader decodes it with the same recipe to the same pixels; a file
         * that decoded with a warning (e.g. truncated) is stored as pixels, so that any warning when a
         * reader decodes a stored file means damage */
        bool keep = st == FTL_OK && job->options->keep_encoded && file_size < job->canvas_bytes && !info.warning[0] &&
                    (info.format == FTL_IMAGE_FORMAT_JPEG || info.format == FTL_IMAGE_FORMAT_PNG);
        slot->encoded = keep ? file_data : NULL;
        slot->encoded_size = keep ? file_size : 0;
        slot->encoded_format = info.format == FTL_IMAGE_FORMAT_PNG ? "png" : "jpeg";
        if (!keep) free(file_data);
        file_data = NULL;
        pthread_mutex_lock(&job->lock);
        slot->status = st;
        slot->fatal = fatal;
        slot->error = st == FTL_OK ? NULL : ftl_strdup(init_error ? init_error : ftl_last_error());
        slot->source_bytes = file_size;
        slot->ready = true;
        pthread_cond_broadcast(&job->slot_ready);
        pthread_mutex_unlock(&job->lock);
    }
    free(init_error);
    ftl_image_prepper_free(prepper);
    return NULL;
}

/* Rows of the current row group, accumulated until row_group_bytes of images (as pixels, whatever
 * is stored: a dataset's row groups, and so the loader's order, are the same in both forms). */
typedef struct row_group_buffer {
    int64_t rows, capacity;
    int32_t *labels;
    uint8_t *images;
    uint8_t **encoded;          /* --keep-encoded: row i's original file (owned), or NULL for its pixels */
    const uint8_t **image_ptrs;
    uint32_t *image_lengths;
    const uint8_t **path_ptrs;
    uint32_t *path_lengths;
    const uint8_t **format_ptrs;  /* --keep-encoded: the image_format column */
    uint32_t *format_lengths;
} row_group_buffer;

static ftl_status flush_row_group(ftl_parquet_writer *w, row_group_buffer *b, size_t canvas_bytes, bool keep_encoded) {
    if (b->rows == 0) return FTL_OK;
    for (int64_t i = 0; i < b->rows; i++) {
        if (keep_encoded && b->encoded[i]) continue; /* set when the row was added */
        b->image_ptrs[i] = b->images + (size_t)i * canvas_bytes;
        b->image_lengths[i] = (uint32_t)canvas_bytes;
        if (keep_encoded) b->format_ptrs[i] = (const uint8_t *)FTL_IMAGE_FORMAT_PIXELS, b->format_lengths[i] = 3;
    }
    ftl_parquet_column_data columns[4];
    memset(columns, 0, sizeof columns);
    columns[0].values = b->labels;
    columns[1].byte_values = b->image_ptrs;
    columns[1].byte_lengths = b->image_lengths;
    columns[2].byte_values = b->path_ptrs;
    columns[2].byte_lengths = b->path_lengths;
    columns[3].byte_values = b->format_ptrs;
    columns[3].byte_lengths = b->format_lengths;
    ftl_status st = ftl_parquet_writer_write_row_group(w, b->rows, columns);
    for (int64_t i = 0; keep_encoded && i < b->rows; i++) {
        free(b->encoded[i]);
        b->encoded[i] = NULL;
    }
    b->rows = 0;
    return st;
}

static char *json_count_array(const int64_t *counts, int count) {
    ftl_strbuf b = {0};
    ftl_strbuf_append(&b, "[", 1);
    for (int i = 0; i < count; i++) ftl_strbuf_printf(&b, "%s%lld", i ? ", " : "", (long long)counts[i]);
    ftl_strbuf_append(&b, "]", 1);
    return b.data;
}

static ftl_status parse_codec(const char *name, ftl_parquet_codec *codec) {
    if (!ftl_parquet_codec_parse(name, codec))
        return ftl_fail(FTL_E_INVALID_ARG, "unknown codec '%s' (expected none, snappy, zstd or gzip)", name);
    return FTL_OK;
}

/* The first relative path that is not UTF-8, or NULL (file names are bytes on Linux). */
static const char *first_non_utf8_path(const prep_source *s) {
    for (int64_t i = 0; i < s->item_count; i++)
        for (const char *p = s->items[i].relative_path; *p;) {
            int n = ftl_utf8_char_length(p);
            if (!n) return s->items[i].relative_path;
            p += n;
        }
    return NULL;
}

/* paths_utf8: the path column is a STRING; else plain bytes, since readers (DuckDB, Arrow) refuse
 * a STRING column holding bytes that are not UTF-8. */
static ftl_status open_split_writer(const char *path, const ftl_prep_options *o, bool paths_utf8, ftl_parquet_writer **w) {
    ftl_parquet_column_def columns[4] = {
        {.name = FTL_COLUMN_LABEL, .type = FTL_PARQUET_INT32},
        {.name = FTL_COLUMN_IMAGE, .type = FTL_PARQUET_BYTE_ARRAY},
        {.name = FTL_COLUMN_PATH, .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = paths_utf8},
        {.name = FTL_COLUMN_IMAGE_FORMAT, .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = true},
    };
    ftl_parquet_writer_options wo = {0};
    FTL_TRY(parse_codec(o->codec, &wo.codec));
    return ftl_parquet_writer_open(path, columns, o->keep_encoded ? 4 : 3, &wo, w);
}

static ftl_status set_split_metadata(ftl_parquet_writer *w, const ftl_prep_options *o, const prep_source *s,
                                     const char *split, const int64_t *counts) {
    char *classes = ftl_json_string_array(s->class_names, s->class_count);
    char *folders = ftl_json_string_array(s->class_folders, s->class_count);
    char *count_list = json_count_array(counts, s->class_count);
    char *size = ftl_format("%d", o->image_size);
    char *seed = ftl_format("%llu", (unsigned long long)o->seed);
    char *fraction = ftl_format("%.17g", o->val_fraction);
    const char *method = s->given_split ? s->given_split : o->stratify ? "stratified" : "random";
    const char *pairs[][2] = {
        {FTL_META_FORMAT, o->keep_encoded ? FTL_DATASET_ENCODED : FTL_DATASET_PIXELS},
        {FTL_META_VERSION, FTL_VERSION},
        {FTL_META_CLASSES, classes},
        {FTL_META_CLASS_FOLDERS, folders},
        {FTL_META_CLASS_COUNTS, count_list},
        {FTL_META_IMAGE_SIZE, size},
        {FTL_META_IMAGE_LAYOUT, "HWC-RGB-uint8"},
        {FTL_META_SPLIT, split},
        {FTL_META_SPLIT_METHOD, method},
        {FTL_META_SPLIT_SEED, seed},
        {FTL_META_VAL_FRACTION, s->given_split ? "" : fraction},
        {FTL_META_RESIZE, FTL_RESIZE_RECIPE},
    };
    ftl_status st = FTL_OK;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0] && st == FTL_OK; i++)
        if (pairs[i][1][0]) st = ftl_parquet_writer_set_metadata(w, pairs[i][0], pairs[i][1]);
    free(classes);
    free(folders);
    free(count_list);
    free(size);
    free(seed);
    free(fraction);
    return st;
}

static void summary_add_skipped(ftl_prep_summary *sum, const char *path, const char *reason) {
    sum->skipped = ftl_xrealloc(sum->skipped, (size_t)(sum->skipped_count + 1) * sizeof *sum->skipped);
    sum->skipped[sum->skipped_count++] = (ftl_prep_skipped){ftl_strdup(path), ftl_strdup(reason)};
}

/* The writer loop: consumes results in order, routes them to the train or val file. */
static ftl_status write_rows(prep_job *job, ftl_parquet_writer *writers[2], ftl_prep_summary *sum) {
    const ftl_prep_options *o = job->options;
    const prep_source *s = job->source;
    int64_t rows_per_group = o->row_group_bytes / (int64_t)job->canvas_bytes;
    if (rows_per_group < 1) rows_per_group = 1;
    if (rows_per_group > s->item_count) rows_per_group = s->item_count; /* a huge --row-group-bytes needs no more */
    row_group_buffer b = {.capacity = rows_per_group};
    b.labels = ftl_xmalloc((size_t)rows_per_group * sizeof *b.labels);
    b.images = malloc((size_t)rows_per_group * job->canvas_bytes);
    if (!b.images) {
        free(b.labels);
        return ftl_fail(FTL_E_NOMEM, "not enough memory for row groups of %lld images (%.1f GiB): lower --row-group-bytes",
                        (long long)rows_per_group, (double)rows_per_group * (double)job->canvas_bytes / (double)(1 << 30));
    }
    b.image_ptrs = ftl_xmalloc((size_t)rows_per_group * sizeof *b.image_ptrs);
    b.image_lengths = ftl_xmalloc((size_t)rows_per_group * sizeof *b.image_lengths);
    b.path_ptrs = ftl_xmalloc((size_t)rows_per_group * sizeof *b.path_ptrs);
    b.path_lengths = ftl_xmalloc((size_t)rows_per_group * sizeof *b.path_lengths);
    const bool keep = o->keep_encoded;
    if (keep) {
        b.encoded = ftl_xcalloc((size_t)rows_per_group, sizeof *b.encoded);
        b.format_ptrs = ftl_xmalloc((size_t)rows_per_group * sizeof *b.format_ptrs);
        b.format_lengths = ftl_xmalloc((size_t)rows_per_group * sizeof *b.format_lengths);
    }

    ftl_progress progress;
    if (o->show_progress) ftl_progress_start(&progress, "prep", "images", s->item_count);
    ftl_status st = FTL_OK;
    int current_split = PREP_SPLIT_TRAIN;
    for (int64_t i = 0; i < s->item_count && st == FTL_OK; i++) {
        result_slot *slot = &job->ring[i % job->ring_size];
        pthread_mutex_lock(&job->lock);
        while (!slot->ready) pthread_cond_wait(&job->slot_ready, &job->lock);
        pthread_mutex_unlock(&job->lock);

        const prep_item *item = &s->items[i];
        if ((int)item->split != current_split) {
            st = flush_row_group(writers[current_split], &b, job->canvas_bytes, keep);
            current_split = (int)item->split;
        }
        sum->source_bytes += slot->source_bytes;
        if (st == FTL_OK && slot->status != FTL_OK) {
            char *name = prep_source_item_name(s, item);
            if (slot->fatal) {
                st = ftl_fail(slot->status, "%s: %s", name, slot->error);
            } else if (o->strict) {
                st = ftl_fail(slot->status == FTL_E_NOT_FOUND ? FTL_E_IO : slot->status, "%s: %s (--strict)", name, slot->error);
            } else {
                ftl_log_warn("skipping %s: %s", name, slot->error);
                summary_add_skipped(sum, item->relative_path, slot->error);
            }
            free(name);
        } else if (st == FTL_OK) {
            int64_t r = b.rows++;
            b.labels[r] = item->label;
            if (slot->encoded) { /* the buffer now owns the file */
                b.encoded[r] = slot->encoded;
                b.image_ptrs[r] = slot->encoded;
                b.image_lengths[r] = (uint32_t)slot->encoded_size;
                b.format_ptrs[r] = (const uint8_t *)slot->encoded_format;
                b.format_lengths[r] = (uint32_t)strlen(slot->encoded_format);
                slot->encoded = NULL;
                sum->encoded_rows++;
            } else {
                if (keep) b.encoded[r] = NULL;
                memcpy(b.images + (size_t)r * job->canvas_bytes, slot->canvas, job->canvas_bytes);
            }
            b.path_ptrs[r] = (const uint8_t *)item->relative_path;
            b.path_lengths[r] = (uint32_t)strlen(item->relative_path);
            if (item->split == PREP_SPLIT_TRAIN) sum->train_counts[item->label]++, sum->train_rows++;
            else sum->val_counts[item->label]++, sum->val_rows++;
            if (b.rows == b.capacity) st = flush_row_group(writers[current_split], &b, job->canvas_bytes, keep);
        }
        pthread_mutex_lock(&job->lock);
        free(slot->error);
        slot->error = NULL;
        free(slot->encoded); /* a row that was not written (a failure) */
        slot->encoded = NULL;
        slot->ready = false;
        job->write_pos = i + 1;
        pthread_cond_broadcast(&job->slot_free);
        pthread_mutex_unlock(&job->lock);
        if (o->show_progress) ftl_progress_update(&progress, i + 1);
        if (st == FTL_OK) st = ftl_interrupt_check();
    }
    if (st == FTL_OK) st = flush_row_group(writers[current_split], &b, job->canvas_bytes, keep);
    if (o->show_progress) ftl_progress_finish(&progress, job->write_pos);
    free(b.labels);
    free(b.images);
    free(b.image_ptrs);
    free(b.image_lengths);
    free(b.path_ptrs);
    free(b.path_lengths);
    for (int64_t i = 0; keep && i < b.rows; i++) free(b.encoded[i]); /* rows of a failed run */
    free(b.encoded);
    free(b.format_ptrs);
    free(b.format_lengths);
    return st;
}

static ftl_status validate_options(const ftl_prep_options *o) {
    if (!o->source_dir || !o->output_dir) return ftl_fail(FTL_E_INVALID_ARG, "prep needs a source folder and an output folder");
    if (o->image_size < 8 || o->image_size > 4096)
        return ftl_fail(FTL_E_INVALID_ARG, "--size %d is out of range (8..4096)", o->image_size);
    if (!(o->val_fraction >= 0.0 && o->val_fraction < 1.0))
        return ftl_fail(FTL_E_INVALID_ARG, "--val-fraction %g must be in [0, 1)", o->val_fraction);
    if (o->row_group_bytes < 1) return ftl_fail(FTL_E_INVALID_ARG, "--row-group-bytes must be positive");
    if (o->threads < 0 || o->threads > 1024) return ftl_fail(FTL_E_INVALID_ARG, "--threads %d is out of range", o->threads);
    ftl_parquet_codec codec;
    return parse_codec(o->codec, &codec);
}

/* Where OUT's dataset will be, as a real path: its folder resolved (symlinks, ".."; the nearest
 * existing folder above it, since OUT and its parents may not exist yet) and its own name
 * appended, not followed, since publishing renames OUT itself (a link there is replaced). NULL
 * when nothing resolves. */
static char *resolve_output_path(const char *path) {
    char *copy = ftl_strdup(path);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : copy;
    bool dots = name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
    char *result = dots ? realpath(copy, NULL) : NULL;
    if (!result && copy[0] != '\0') {
        char *parent = slash == copy ? ftl_strdup("/") : slash ? ftl_format("%.*s", (int)(slash - copy), copy) : ftl_strdup(".");
        char *parent_real = realpath(parent, NULL);
        if (!parent_real && strcmp(parent, copy) != 0) parent_real = resolve_output_path(parent);
        if (parent_real && strcmp(name, "..") == 0) {
            char *up = strrchr(parent_real, '/');
            result = up == parent_real ? ftl_strdup("/") : ftl_format("%.*s", (int)(up - parent_real), parent_real);
        } else if (parent_real) {
            bool at_root = strcmp(parent_real, "/") == 0;
            result = dots ? ftl_strdup(parent_real) : ftl_format("%s%s%s", parent_real, at_root ? "" : "/", name);
        }
        free(parent_real);
        free(parent);
    }
    free(copy);
    return result;
}

/* True when `inner` is `outer` or a path below it (both real, absolute). */
static bool path_within(const char *inner, const char *outer) {
    size_t n = strlen(outer);
    return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/' || strcmp(outer, "/") == 0);
}

/* OUT must not be SRC, hold it (--overwrite would delete the images) or lie inside it (the next
 * prep of SRC would read it as a class folder); an existing OUT is refused unless --overwrite; an
 * empty folder is fine. */
static ftl_status check_output(const ftl_prep_options *o) {
    /* OUT followed (a link to SRC is SRC) for "holds", and where it is placed for "inside" */
    char *src = realpath(o->source_dir, NULL), *followed = realpath(o->output_dir, NULL);
    char *out = resolve_output_path(o->output_dir);
    bool holds_source = src && ((followed && path_within(src, followed)) || (out && path_within(src, out)));
    bool inside_source = src && out && !holds_source && path_within(out, src);
    ftl_status st = FTL_OK;
    if (holds_source)
        st = ftl_fail(FTL_E_INVALID_ARG, "output %s is the source folder %s or holds it: prep writes OUT anew and would "
                      "delete the images", o->output_dir, o->source_dir);
    else if (inside_source)
        st = ftl_fail(FTL_E_INVALID_ARG, "output %s is inside the source folder %s (%s is under %s): the next prep of the "
                      "source would read the dataset as a class folder; choose an output outside it", o->output_dir,
                      o->source_dir, out, src);
    free(out);
    free(followed);
    free(src);
    if (st != FTL_OK || !ftl_path_exists(o->output_dir) || o->overwrite) return st;
    if (ftl_is_directory(o->output_dir)) {
        bool empty = rmdir(o->output_dir) == 0;
        if (empty) return FTL_OK;
    }
    return ftl_fail(FTL_E_EXISTS, "output %s already exists (use --overwrite to replace it)", o->output_dir);
}

/* What the scan met, the same on every rank: rank 0 says it, and fails on a mislabel or (--strict)
 * a loop; the other ranks go on to wait for rank 0, whose error then ends the job. */
static ftl_status report_scan_findings(const prep_source *s, bool strict) {
    for (int64_t i = 0; i < s->warning_count; i++) ftl_log_warn("%s", s->warnings[i]);
    for (int64_t i = 0; i < s->loop_count; i++) {
        if (strict) return ftl_fail(FTL_E_INVALID_ARG, "%s (--strict)", s->loops[i]);
        ftl_log_warn("%s", s->loops[i]);
    }
    if (!s->mislabel) return FTL_OK;
    if (s->mislabel_count == 1) return ftl_fail(FTL_E_INVALID_ARG, "%s", s->mislabel);
    bool one_more = s->mislabel_count == 2;
    return ftl_fail(FTL_E_INVALID_ARG, "%s (and %lld more file%s or folder%s reached under two classes or splits)", s->mislabel,
                    (long long)(s->mislabel_count - 1), one_more ? "" : "s", one_more ? "" : "s");
}

static ftl_status prep_run_normalized(const ftl_prep_options *o, ftl_prep_summary *sum);

ftl_status ftl_prep_run(const ftl_prep_options *options, ftl_prep_summary *sum) {
    memset(sum, 0, sizeof *sum);
    double start = ftl_now();
    FTL_TRY(validate_options(options));
    /* "data/" and "data" name the same output; renames need the form without the slash. */
    ftl_prep_options normalized = *options;
    char *out_dir = ftl_strdup(options->output_dir);
    for (size_t n = strlen(out_dir); n > 1 && out_dir[n - 1] == '/'; n--) out_dir[n - 1] = '\0';
    normalized.output_dir = out_dir;
    ftl_status result = prep_run_normalized(&normalized, sum);
    free(out_dir);
    sum->seconds = ftl_now() - start;
    return result;
}

/* Keeps this rank's contiguous share of the train rows and of the val rows (items are ordered
 * train first, then val), so the parts read in rank order give the single-process order. */
static void keep_rank_share(prep_source *s, int rank, int ranks) {
    int64_t nt = 0;
    while (nt < s->item_count && s->items[nt].split == PREP_SPLIT_TRAIN) nt++;
    int64_t nv = s->item_count - nt;
    int64_t tb = rank * nt / ranks, te = (rank + 1) * nt / ranks;
    int64_t vb = nt + rank * nv / ranks, ve = nt + (rank + 1) * nv / ranks;
    int64_t kept = 0;
    for (int64_t i = 0; i < s->item_count; i++) {
        if ((i >= tb && i < te) || (i >= vb && i < ve)) s->items[kept++] = s->items[i];
        else free(s->items[i].relative_path);
    }
    s->item_count = kept;
}

/* Rank 0 makes the temporary output folder and tells the others its name; every rank must see
 * it, since each writes its parts there. */
static ftl_status shared_temp_dir(const ftl_prep_options *o, const ftl_collectives *col, char **out, int *lock_fd) {
    uint8_t *name = NULL;
    size_t size = 0;
    ftl_status st = FTL_OK;
    if (ftl_dist_rank(col) == 0) {
        char *t = NULL;
        st = ftl_temp_dir_create(o->output_dir, &t, lock_fd);
        if (st == FTL_OK) {
            char *a = ftl_format("%s/train.parquet", t), *b = ftl_format("%s/val.parquet", t);
            st = ftl_make_dirs(a);
            if (st == FTL_OK) st = ftl_make_dirs(b);
            free(a);
            free(b);
        }
        name = (uint8_t *)(t ? t : ftl_strdup(""));
        size = strlen((char *)name) + 1;
    }
    bool any = false;
    ftl_status agree = ftl_dist_any_failed(col, st != FTL_OK, &any);
    if (agree != FTL_OK || any) {
        free(name);
        return agree != FTL_OK ? agree : st != FTL_OK ? st : ftl_fail(FTL_E_IO, "rank 0 could not create the output folder");
    }
    st = ftl_dist_broadcast_blob(col, &name, &size, 0);
    if (st != FTL_OK) {
        free(name);
        return st;
    }
    char *probe = ftl_format("%s/train.parquet", (char *)name);
    bool seen = ftl_is_directory(probe);
    free(probe);
    st = seen ? FTL_OK
              : ftl_fail(FTL_E_INVALID_ARG,
                         "rank %d cannot see the output folder %s that rank 0 created: under mpirun every rank writes its "
                         "part of the dataset there, so OUT must be on a filesystem all ranks share (or run prep as one "
                         "process)", ftl_dist_rank(col), (char *)name);
    agree = ftl_dist_any_failed(col, !seen, &any);
    if (st == FTL_OK && agree == FTL_OK && any)
        st = ftl_fail(FTL_E_INVALID_ARG, "another rank cannot see the shared output folder %s (see its message)", (char *)name);
    if (st == FTL_OK) st = agree;
    if (st != FTL_OK) {
        if (ftl_dist_rank(col) == 0) ftl_remove_tree((char *)name);
        free(name);
        return st;
    }
    *out = (char *)name;
    return FTL_OK;
}

/* Sums the per-rank summaries into every rank's (counts, rows, bytes). */
static ftl_status gather_skipped(const ftl_collectives *col, ftl_prep_summary *sum) {
    ftl_strbuf b = {0};
    for (int64_t i = 0; i < sum->skipped_count; i++)
    {
        ftl_strbuf_append(&b, sum->skipped[i].path, strlen(sum->skipped[i].path) + 1);
        ftl_strbuf_append(&b, sum->skipped[i].reason, strlen(sum->skipped[i].reason) + 1);
    }
    uint8_t *all = NULL;
    size_t *sizes = ftl_xcalloc((size_t)ftl_dist_size(col), sizeof *sizes);
    ftl_status st = ftl_dist_gather(col, b.data ? b.data : "", b.len, 0, &all, sizes);
    ftl_strbuf_free(&b);
    for (int64_t i = 0; i < sum->skipped_count; i++) free(sum->skipped[i].path), free(sum->skipped[i].reason);
    free(sum->skipped);
    sum->skipped = NULL;
    sum->skipped_count = 0;
    if (st == FTL_OK && ftl_dist_rank(col) == 0) { /* every rank's list, in rank order */
        size_t total = 0;
        for (int r = 0; r < ftl_dist_size(col); r++) total += sizes[r];
        for (size_t at = 0; at < total;) {
            const char *path = (const char *)all + at;
            const char *reason = path + strlen(path) + 1;
            summary_add_skipped(sum, path, reason);
            at += strlen(path) + strlen(reason) + 2;
        }
    }
    free(all);
    free(sizes);
    return st;
}

static ftl_status reduce_summary(const ftl_collectives *col, ftl_prep_summary *sum) {
    FTL_TRY(gather_skipped(col, sum));
    int c = sum->class_count;
    int64_t n = 6 + 2 * (int64_t)c;
    int64_t *v = ftl_xcalloc((size_t)n, sizeof *v);
    v[0] = sum->train_rows, v[1] = sum->val_rows, v[2] = sum->encoded_rows;
    v[3] = (int64_t)sum->source_bytes, v[4] = (int64_t)sum->train_file_bytes, v[5] = (int64_t)sum->val_file_bytes;
    memcpy(v + 6, sum->train_counts, (size_t)c * sizeof *v);
    memcpy(v + 6 + c, sum->val_counts, (size_t)c * sizeof *v);
    ftl_status st = ftl_dist_allreduce_i64(col, v, (size_t)n);
    if (st == FTL_OK) {
        sum->train_rows = v[0], sum->val_rows = v[1], sum->encoded_rows = v[2];
        sum->source_bytes = (uint64_t)v[3], sum->train_file_bytes = (uint64_t)v[4], sum->val_file_bytes = (uint64_t)v[5];
        memcpy(sum->train_counts, v + 6, (size_t)c * sizeof *v);
        memcpy(sum->val_counts, v + 6 + c, (size_t)c * sizeof *v);
    }
    free(v);
    return st;
}

/* The summary's classes and counts from the source, and what its scan found: reported by rank 0,
 * refused under --strict (the caller frees the source then). */
static ftl_status begin_summary(const ftl_prep_options *o, const prep_source *source, int rank, ftl_prep_summary *sum) {
    sum->class_count = source->class_count;
    sum->class_names = ftl_xcalloc((size_t)source->class_count, sizeof *sum->class_names);
    for (int c = 0; c < source->class_count; c++) sum->class_names[c] = ftl_strdup(source->class_names[c]);
    sum->train_counts = ftl_xcalloc((size_t)source->class_count, sizeof *sum->train_counts);
    sum->val_counts = ftl_xcalloc((size_t)source->class_count, sizeof *sum->val_counts);
    sum->empty_class_count = source->empty_class_count;
    sum->split_method = source->given_split ? source->given_split : o->stratify ? "stratified" : "random";
    ftl_status findings = rank == 0 ? report_scan_findings(source, o->strict) : FTL_OK;
    if (findings != FTL_OK) return findings;
    for (int64_t i = 0; i < source->unsupported_count && rank == 0; i++) { /* every rank sees them: rank 0 says it */
        if (o->strict)
            return ftl_fail(FTL_E_UNSUPPORTED, "%s/%s: %s (--strict)", source->root, source->unsupported_paths[i],
                            source->unsupported_reasons[i]);
        ftl_log_warn("skipping %s/%s: %s", source->root, source->unsupported_paths[i], source->unsupported_reasons[i]);
        summary_add_skipped(sum, source->unsupported_paths[i], source->unsupported_reasons[i]);
    }
    return FTL_OK;
}

/* The decoding threads fill the ring while this one writes the rows in order; when st is already an
 * error nothing starts. Rank phase: ended by the caller once the files are closed. */
static ftl_status run_workers(prep_job *job, int threads, ftl_parquet_writer **writers, ftl_prep_summary *sum, ftl_status st) {
    pthread_t *workers = ftl_xcalloc((size_t)threads, sizeof *workers);
    int started = 0;
    if (st == FTL_OK) {
        for (; started < threads; started++)
            if (pthread_create(&workers[started], NULL, prep_worker, job) != 0) break;
        if (started == 0) st = ftl_fail(FTL_E_INTERNAL, "cannot start worker threads");
    }
    /* Ranks' shares can take very different times (image sizes, hosts): a long phase. */
    ftl_dist_phase_begin(job->options->collectives, "preparing its share of the images");
    if (st == FTL_OK) st = write_rows(job, writers, sum);
    pthread_mutex_lock(&job->lock);
    job->stop = true;
    pthread_cond_broadcast(&job->slot_free);
    pthread_mutex_unlock(&job->lock);
    for (int i = 0; i < started; i++) pthread_join(workers[i], NULL);
    free(workers);
    return st;
}

static void prep_job_free(prep_job *job) {
    for (int64_t i = 0; i < job->ring_size; i++) {
        free(job->ring[i].canvas);
        free(job->ring[i].error);
        free(job->ring[i].encoded);
    }
    free(job->ring);
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->slot_ready);
    pthread_cond_destroy(&job->slot_free);
}

static ftl_status prep_run_normalized(const ftl_prep_options *o, ftl_prep_summary *sum) {
    sum->keep_encoded = o->keep_encoded;
    FTL_TRY(check_output(o));
    prep_source source;
    FTL_TRY(prep_source_open(o, &source));
    if (source.given_split && o->split_flags_given)
        ftl_log_warn("%s comes with its split (%s): the split is kept and --val-fraction / --stratify are not used", o->source_dir,
                     strcmp(source.given_split, "folders") == 0 ? "train/ and val/ or test/ folders"
                     : strcmp(source.given_split, "column") == 0 ? "--split-col" : "--val-source");
    prep_source_assign_splits(&source, o->val_fraction, o->seed, o->stratify);
    const ftl_collectives *col = o->collectives;
    bool dist = ftl_dist_active(col);
    int rank = ftl_dist_rank(col);
    int64_t all_items = source.item_count;
    if (dist) keep_rank_share(&source, rank, ftl_dist_size(col));

    ftl_status begun = begin_summary(o, &source, rank, sum);
    if (begun != FTL_OK) {
        prep_source_free(&source);
        return begun;
    }

    int threads = o->threads > 0 ? o->threads : ftl_cpu_count();
    sum->threads = threads;
    char *temp_dir = NULL;
    int temp_lock = -1; /* held while the temporary folder lives: see util/temporaries.h */
    ftl_status made = dist ? shared_temp_dir(o, col, &temp_dir, &temp_lock) : ftl_temp_dir_create(o->output_dir, &temp_dir, &temp_lock);
    if (made != FTL_OK) {
        prep_source_free(&source);
        return made;
    }
    char *paths[2];
    if (dist) {
        paths[0] = ftl_format("%s/train.parquet/part-%05d.parquet", temp_dir, rank);
        paths[1] = ftl_format("%s/val.parquet/part-%05d.parquet", temp_dir, rank);
    } else {
        paths[0] = ftl_format("%s/train.parquet", temp_dir);
        paths[1] = ftl_format("%s/val.parquet", temp_dir);
    }
    ftl_parquet_writer *writers[2] = {NULL, NULL};
    prep_job job = {.options = o, .source = &source, .canvas_bytes = (size_t)o->image_size * (size_t)o->image_size * 3};
    job.ring_size = (int64_t)threads * RING_PER_THREAD;
    job.ring = ftl_xcalloc((size_t)job.ring_size, sizeof *job.ring);
    for (int64_t i = 0; i < job.ring_size; i++) job.ring[i].canvas = ftl_xmalloc(job.canvas_bytes);
    pthread_mutex_init(&job.lock, NULL);
    pthread_cond_init(&job.slot_ready, NULL);
    pthread_cond_init(&job.slot_free, NULL);

    /* The temporary folder and its finished files are removed if we are interrupted. */
    ftl_cleanup_register(temp_dir);
    /* Under mpirun the parts sit in the split folders, which must go before temp_dir can
     * (folders registered later are removed first). */
    char *split_dirs[2] = {dist ? ftl_format("%s/train.parquet", temp_dir) : NULL,
                           dist ? ftl_format("%s/val.parquet", temp_dir) : NULL};
    for (int k = 0; k < 2; k++)
        if (split_dirs[k]) ftl_cleanup_register(split_dirs[k]);
    ftl_cleanup_register(paths[0]);
    ftl_cleanup_register(paths[1]);
    ftl_status st = ftl_make_dirs(temp_dir);
    /* a table's cells copied in storage order first: rows are then read in any order for a small read each */
    if (st == FTL_OK) st = prep_source_stage(&source, temp_dir, rank);
    /* Every rank scanned the whole source: all decide the same column type. */
    const char *odd = first_non_utf8_path(&source);
    if (odd && (!dist || rank == 0))
        ftl_log_warn("file names that are not UTF-8 (e.g. %s/%s): the path column is written as bytes, not a string",
                     source.root, odd);
    if (st == FTL_OK) st = open_split_writer(paths[0], o, !odd, &writers[0]);
    if (st == FTL_OK) st = open_split_writer(paths[1], o, !odd, &writers[1]);

    st = run_workers(&job, threads, writers, sum, st);

    if (st == FTL_OK) st = set_split_metadata(writers[0], o, &source, "train", sum->train_counts);
    if (st == FTL_OK) st = set_split_metadata(writers[1], o, &source, "val", sum->val_counts);
    for (int k = 0; k < 2; k++) {
        if (!writers[k]) continue;
        if (st == FTL_OK) st = ftl_parquet_writer_close(writers[k]);
        else ftl_parquet_writer_abort(writers[k]);
    }
    prep_source_unstage(&source); /* the staged copy is not part of the dataset */
    ftl_dist_phase_end(col);
    if (st == FTL_OK) {
        uint64_t size;
        if (ftl_file_size(paths[0], &size) == FTL_OK) sum->train_file_bytes = size;
        if (ftl_file_size(paths[1], &size) == FTL_OK) sum->val_file_bytes = size;
    }
    if (dist) { /* the dataset appears only when every rank has written its parts */
        ftl_dist_set_context(col, -1, "the end of prep (every rank's parts written)");
        bool any = false;
        ftl_status agree = ftl_dist_any_failed(col, st != FTL_OK, &any);
        if (st == FTL_OK && agree == FTL_OK && any)
            st = ftl_fail(FTL_E_IO, "another rank failed (see its message); nothing was written to %s", o->output_dir);
        if (st == FTL_OK) st = agree;
        if (st == FTL_OK) st = reduce_summary(col, sum);
    }
    if (st == FTL_OK && sum->train_rows + sum->val_rows == 0)
        st = ftl_fail(FTL_E_FORMAT, "none of the %lld images under %s could be read", (long long)all_items, source.root);
    if (st == FTL_OK && rank == 0) st = ftl_publish(temp_dir, o->output_dir, o->overwrite);
    if (st != FTL_OK && rank == 0) ftl_remove_tree(temp_dir); /* gone already when kept aside */
    if (temp_lock >= 0) close(temp_lock);
    if (st != FTL_OK && dist) {
        unlink(paths[0]);
        unlink(paths[1]);
    }
    ftl_cleanup_unregister(paths[0]);
    ftl_cleanup_unregister(paths[1]);
    for (int k = 0; k < 2; k++) {
        if (split_dirs[k]) ftl_cleanup_unregister(split_dirs[k]);
        free(split_dirs[k]);
    }
    ftl_cleanup_unregister(temp_dir);

    prep_job_free(&job);
    free(paths[0]);
    free(paths[1]);
    free(temp_dir);
    prep_source_free(&source);
    return st;
}
