/* `ftl embed`: stream a dataset through the frozen backbone into a features file. The loader's
 * background readers fetch the next batch while the backbone computes the current one. */
#include "ftl/embed.h"
#include "ftl/image.h"
#include "ftl/loader.h"
#include "ftl/parquet.h"
#include "data/calibration_sample.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "nn/onnx/backbone_files.h"
#include "nn/device_caps.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/io_check.h"
#include "ftl/dist.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/timing.h"
#include "util/interrupt.h"

#include <math.h>
#include <stdlib.h>
#include <zlib.h>
#include <string.h>
#include <unistd.h>


void ftl_embed_options_init(ftl_embed_options *o) {
    memset(o, 0, sizeof *o);
    o->precision = FTL_NN_FP32;
    ftl_nn_preprocess_init(&o->preprocess, FTL_NN_SCALE_TF);
    o->batch = 32;
    o->loader_threads = 0;
    o->show_progress = true;
    o->num_shards = 1;
    o->calibration_rows = 512;
}

static void embed_model_options(const ftl_embed_options *o, ftl_model_options *mo) {
    ftl_model_options_init(mo);
    mo->features_from = o->features_from;
    mo->overrides = o->overrides;
    mo->n_overrides = o->n_overrides;
    mo->bottom_of = o->bottom_of;
    mo->precision = o->precision;
    mo->int8_scales = o->int8_scales;
    mo->device = o->device;
    mo->deterministic = o->deterministic;
    mo->conv_algorithm = o->conv_algorithm;
    mo->threads = o->threads;
    mo->batch = o->batch;
}

ftl_status ftl_embed_calibrate(const ftl_embed_options *o, ftl_nn_int8_scales **out) {
    *out = NULL;
    if (!nn_device_caps_of(o->device)->int8) /* said before any GPU is looked for */
        return ftl_fail(FTL_E_UNSUPPORTED, "--precision int8 with --device cuda: the GPU backend has no int8 path yet; use "
                        "--device cpu (or auto), or fp32/bf16/tf32 on the GPU");
    ftl_status st = FTL_OK;
    char *json = NULL;
    /* the other ranks wait for rank 0's calibration without the stall limit (a big backbone takes a minute) */
    ftl_dist_phase_begin(o->collectives, "calibrating int8 on rank 0");
    if (!ftl_dist_active(o->collectives) || ftl_dist_rank(o->collectives) == 0) {
        ftl_model_options mo;
        embed_model_options(o, &mo);
        mo.precision = FTL_NN_FP32;
        uint8_t *images = NULL;
        int count = 0, size = 0;
        st = calibration_sample_read(o, &images, &count, &size);
        double t0 = ftl_now();
        char *reused = NULL;
        if (st == FTL_OK)
            st = ftl_nn_calibrate_cached(o->backbone_path, &mo, &o->preprocess, images, count, size, o->calibration_method,
                                         o->calibration_cache_dir, out, &reused);
        free(images);
        if (st == FTL_OK && reused)
            ftl_log_info("int8: reusing the calibration of %d tensors on %d images (%s) from %s",
                         ftl_nn_int8_scales_count(*out), count, ftl_nn_int8_scales_method(*out), reused);
        else if (st == FTL_OK)
            ftl_log_info("int8: calibrated %d tensors on %d images (%s) in %.1f s", ftl_nn_int8_scales_count(*out), count,
                         ftl_nn_int8_scales_method(*out), ftl_now() - t0);
        if (st == FTL_OK) json = ftl_nn_int8_scales_json(*out);
        free(reused);
    }
    if (!ftl_dist_active(o->collectives)) {
        ftl_dist_phase_end(o->collectives);
        return st;
    }
    /* every rank learns whether rank 0 succeeded, then gets its table */
    int64_t ok = st == FTL_OK;
    ftl_status bst = ftl_dist_broadcast(o->collectives, &ok, sizeof ok, 0);
    if (bst == FTL_OK && !ok && st == FTL_OK) st = ftl_fail(FTL_E_INTERNAL, "int8 calibration failed on rank 0");
    size_t bytes = json ? strlen(json) + 1 : 0;
    if (bst == FTL_OK && ok) bst = ftl_dist_broadcast_blob(o->collectives, (uint8_t **)&json, &bytes, 0);
    if (bst != FTL_OK) st = bst;
    ftl_dist_phase_end(o->collectives);
    if (st == FTL_OK && ftl_dist_rank(o->collectives) != 0) {
        if (!json || bytes == 0 || json[bytes - 1] != 0) st = ftl_fail(FTL_E_FORMAT, "int8 scales from rank 0: not a string");
        else st = ftl_nn_int8_scales_from_json(json, "rank 0's calibration", out);
    }
    free(json);
    if (st != FTL_OK) {
        ftl_nn_int8_scales_free(*out);
        *out = NULL;
    }
    return st;
}

/* Rows of features waiting to be written. Row groups follow the source's row groups (same row
 * counts, in order), so a loader streaming the features file visits rows in exactly the order
 * it would visit the images; a source row group larger than MAX_ALIGNED_FEATURE_BYTES of
 * features is split (the streamed order then differs from the images', memory stays bounded). */
typedef struct feature_rows {
    int64_t rows, capacity, dim;
    int32_t *labels;
    float *features;
    char **paths;
    int64_t *boundaries;    /* cumulative source row-group ends, in rows of this shard */
    int64_t boundary_count, next_boundary, written;
} feature_rows;

enum { MAX_ALIGNED_FEATURE_BYTES = 64 << 20 };

/* Writes the first n buffered rows as one row group and keeps the rest. */
static ftl_status flush_rows(ftl_parquet_writer *w, feature_rows *f, int64_t n) {
    if (n <= 0) return FTL_OK;
    const uint8_t **pp = ftl_xmalloc((size_t)n * sizeof *pp);
    uint32_t *pl = ftl_xmalloc((size_t)n * sizeof *pl);
    for (int64_t i = 0; i < n; i++) {
        pp[i] = (const uint8_t *)f->paths[i];
        pl[i] = (uint32_t)strlen(f->paths[i]);
    }
    ftl_parquet_column_data cols[3] = {{.values = f->labels}, {.values = f->features}, {.byte_values = pp, .byte_lengths = pl}};
    ftl_status st = ftl_parquet_writer_write_row_group(w, n, cols);
    for (int64_t i = 0; i < n; i++) free(f->paths[i]);
    free(pp);
    free(pl);
    int64_t rest = f->rows - n;
    memmove(f->labels, f->labels + n, (size_t)rest * sizeof *f->labels);
    memmove(f->features, f->features + n * f->dim, (size_t)(rest * f->dim) * sizeof *f->features);
    memmove(f->paths, f->paths + n, (size_t)rest * sizeof *f->paths);
    f->rows = rest;
    f->written += n;
    return st;
}

/* A batch started on the GPU (ftl_model_start_features) whose features have not come back yet:
 * its labels and paths wait here. */
typedef struct started_batch {
    int64_t rows;
    int32_t *labels;
    char **paths;
} started_batch;

static ftl_status flush_ready(ftl_parquet_writer *w, feature_rows *f, bool at_end);

/* The started batch's features, labels and paths appended to f (the features of the batch started
 * after it are being computed meanwhile). */
static ftl_status collect_started(ftl_model *m, ftl_parquet_writer *w, feature_rows *f, started_batch *sb,
                                  ftl_embed_summary *s) {
    if (sb->rows == 0) return FTL_OK;
    if (f->rows + sb->rows > f->capacity) FTL_TRY(flush_rows(w, f, f->rows));
    double t0 = ftl_now();
    ftl_status st = ftl_model_collect_features(m, f->features + f->rows * f->dim);
    s->compute_seconds += ftl_now() - t0;
    for (int64_t i = 0; i < sb->rows; i++) {
        f->labels[f->rows + i] = sb->labels[i];
        f->paths[f->rows + i] = sb->paths[i];
        sb->paths[i] = NULL;
    }
    f->rows += sb->rows;
    s->rows += sb->rows;
    sb->rows = 0;
    if (st == FTL_OK) st = flush_ready(w, f, false);
    return st;
}

/* Flushes every complete source row group (or a full buffer); at the end, everything. */
static ftl_status flush_ready(ftl_parquet_writer *w, feature_rows *f, bool at_end) {
    for (;;) {
        while (f->next_boundary < f->boundary_count && f->boundaries[f->next_boundary] <= f->written) f->next_boundary++;
        int64_t end = f->next_boundary < f->boundary_count ? f->boundaries[f->next_boundary] : INT64_MAX;
        int64_t n = end - f->written;
        if (n <= f->rows) FTL_TRY(flush_rows(w, f, n));
        else if (at_end) return flush_rows(w, f, f->rows);
        else return FTL_OK;
    }
}

/* Row-group ends of the shard's rows in the source files (global row numbers minus the shard start). */
static void source_boundaries(ftl_loader *l, const ftl_embed_options *o, feature_rows *f) {
    char **paths;
    int count;
    f->boundary_count = 0;
    if (loader_expand_sources(o->sources, o->source_count, &paths, &count) != FTL_OK) return;
    int64_t begin = ftl_loader_shard_begin(l), end = begin + ftl_loader_shard_rows(l), row = 0;
    for (int i = 0; i < count; i++) {
        ftl_parquet_file *pf;
        if (ftl_parquet_open(paths[i], &pf) == FTL_OK) {
            for (int g = 0; g < ftl_parquet_num_row_groups(pf); g++) {
                row += ftl_parquet_row_group_rows(pf, g);
                if (row > begin && row < end) {
                    f->boundaries = ftl_xrealloc(f->boundaries, (size_t)(f->boundary_count + 1) * sizeof *f->boundaries);
                    f->boundaries[f->boundary_count++] = row - begin;
                }
            }
            ftl_parquet_close(pf);
        }
        free(paths[i]);
    }
    free(paths);
}

static ftl_status write_metadata(ftl_parquet_writer *w, ftl_loader *l, const ftl_embed_options *o, const ftl_model *m,
                                 const ftl_embed_summary *s, int image_size) {
    const ftl_model_info *info = ftl_model_get_info(m);
    char *pre = ftl_nn_preprocess_json(&o->preprocess, m, image_size);
    char *dim = ftl_format("%lld", (long long)s->feature_dim);
    char *size = ftl_format("%d", image_size);
    char *offset = ftl_format("%d", o->label_offset);
    const char *classes = ftl_loader_metadata(l, FTL_META_CLASSES);
    const char *pairs[][2] = {
        {FTL_META_FORMAT, FTL_META_FEATURES_FORMAT},
        {FTL_META_VERSION, FTL_VERSION},
        {FTL_META_CLASSES, classes ? classes : ""},
        {FTL_META_BACKBONE_SHA256, info->sha256},
        {FTL_META_BACKBONE_PATH, o->backbone_path},
        {FTL_META_FEATURE_TENSOR, info->feature_name},
        {FTL_META_FEATURE_DIM, dim},
        {FTL_META_PREPROCESS, pre},
        {FTL_META_PRECISION, ftl_nn_precision_name(o->precision)},
        {FTL_META_DEVICE, info->device ? info->device : ""},
        {FTL_META_CONV_ALGORITHM, ftl_nn_conv_algorithm_name(o->conv_algorithm)},
        {FTL_META_SOURCE_FINGERPRINT, s->dataset_fingerprint},
        {FTL_META_SOURCE_IMAGE_SIZE, size},
        {"ftl.label_offset", offset},
    };
    ftl_status st = FTL_OK;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0] && st == FTL_OK; i++)
        if (pairs[i][1][0]) st = ftl_parquet_writer_set_metadata(w, pairs[i][0], pairs[i][1]);
    free(pre);
    free(dim);
    free(size);
    free(offset);
    return st;
}

/* Appends every row group of a features file to w, in order. */
static ftl_status append_part(ftl_parquet_writer *w, const char *path) {
    ftl_parquet_file *f;
    FTL_TRY(ftl_parquet_open(path, &f));
    ftl_parquet_column_values v[3];
    memset(v, 0, sizeof v);
    ftl_status st = ftl_parquet_num_columns(f) == 3 ? FTL_OK : ftl_fail(FTL_E_FORMAT, "%s: not a features part", path);
    for (int g = 0; st == FTL_OK && g < ftl_parquet_num_row_groups(f); g++) {
        for (int c = 0; c < 3 && st == FTL_OK; c++) st = ftl_parquet_read_column(f, g, c, &v[c]);
        if (st != FTL_OK) break;
        ftl_parquet_column_data cols[3] = {{.values = v[0].values}, {.values = v[1].values},
                                           {.values = v[2].data, .offsets = v[2].offsets}};
        st = ftl_parquet_writer_write_row_group(w, v[0].rows, cols);
    }
    for (int c = 0; c < 3; c++) ftl_parquet_column_values_free(&v[c]);
    ftl_parquet_close(f);
    return st;
}

/* Before any work: OUT is none of the inputs (the datasets, the backbone and its data files, the
 * calibration set), and exists only with --overwrite. */
static ftl_status embed_check_paths(const ftl_embed_options *o) {
    ftl_io_check *c = ftl_io_check_new("embed");
    ftl_io_check_output(c, "OUT", o->output_path);
    for (int i = 0; i < o->source_count; i++) ftl_io_check_input(c, "DATA", o->sources[i]);
    ftl_io_check_input(c, "--calibration", o->calibration_path);
    nn_io_check_backbone(c, "--backbone", o->backbone_path);
    ftl_status st = ftl_io_check_run(c);
    ftl_io_check_free(c);
    if (st == FTL_OK && ftl_path_exists(o->output_path) && !o->overwrite)
        st = ftl_fail(FTL_E_EXISTS, "output %s already exists (use --overwrite to replace it)", o->output_path);
    return st;
}

/* A part's file, locked while it lives (util/temporaries.h): a temporary's name in `folder`. */
static char *part_name(const char *folder, const char *out, int rank) {
    char *base = ftl_format("%s/ftl-embed-%s-rank%d.parquet", folder, ftl_path_file_name(out), rank);
    char *name = ftl_temp_name_for(base);
    free(base);
    return name;
}

/* Under N ranks: each embeds its contiguous share of the rows into a part on its own disk; rank 0
 * then writes OUT from its part and the others', sent one at a time (no shared filesystem). */
static ftl_status embed_distributed(const ftl_embed_options *o, ftl_embed_summary *s) {
    const ftl_collectives *col = o->collectives;
    int rank = ftl_dist_rank(col), ranks = ftl_dist_size(col);
    double start = ftl_now();
    memset(s, 0, sizeof *s);
    s->gpu_util_percent = s->gpu_memory_bytes = NAN;
    int64_t total = 0;
    FTL_TRY(loader_total_rows(o->sources, o->source_count, &total));
    if (rank == 0) FTL_TRY(embed_check_paths(o));
    ftl_nn_int8_scales *scales = NULL; /* int8: one calibration for every rank */
    if (o->precision == FTL_NN_INT8 && !o->int8_scales) FTL_TRY(ftl_embed_calibrate(o, &scales));
    const char *tmp = getenv("TMPDIR");
    /* Rank 0's parts sit beside OUT, the others' in their host's TMPDIR, all under temporary names
     * (never a user's file), each swept there by a later embed if this one is killed. */
    char *out_folder = ftl_path_folder(o->output_path);
    const char *folder = rank == 0 ? out_folder : tmp && *tmp ? tmp : "/tmp";
    if (rank != 0) ftl_temporaries_sweep(folder);
    char *part = part_name(folder, o->output_path, rank);
    ftl_cleanup_register(part);
    ftl_embed_options local = *o;
    local.collectives = NULL;
    local.row_begin = rank * total / ranks;
    local.row_end = (rank + 1) * total / ranks;
    local.output_path = part;
    local.overwrite = true;
    local.show_progress = o->show_progress && rank == 0;
    if (scales) local.int8_scales = scales;
    ftl_status st = FTL_OK;
    int part_lock = -1;
    if (local.row_end > local.row_begin) {
        ftl_dist_phase_begin(col, "embedding its shard");
        st = ftl_embed_run(&local, s);
        if (st == FTL_OK) part_lock = ftl_temp_hold(part);
        ftl_dist_phase_end(col);
    }
    ftl_nn_int8_scales_free(scales);
    scales = NULL;
    if (st != FTL_OK) {
        ftl_cleanup_unregister(part);
        free(part);
        free(out_folder);
        return st;
    }
    ftl_dist_set_context(col, -1, "collecting the features on rank 0");
    double rows = (double)s->rows, compute = s->compute_seconds, wait = s->wait_seconds;
    /* the 4th: ranks whose shard had byte paths (a rank without rows has no say) */
    double sums[4] = {rows, compute, wait, s->rows > 0 && !s->paths_are_text ? 1 : 0};
    st = ftl_dist_allreduce_f64(col, sums, 4);
    ftl_parquet_writer *w = NULL;
    bool have_metadata = false;
    if (st == FTL_OK && rank == 0) {
        ftl_parquet_column_def cols[3] = {
            {.name = FTL_COLUMN_LABEL, .type = FTL_PARQUET_INT32},
            {.name = FTL_COLUMN_FEATURES, .type = FTL_PARQUET_FIXED_LEN_BYTE_ARRAY, .fixed_length = (int32_t)(4 * s->feature_dim)},
            {.name = FTL_COLUMN_PATH, .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = sums[3] == 0},
        };
        int64_t dim = s->feature_dim;
        if (dim <= 0) { /* rank 0 held no rows: the dimension comes with the first part */
            ftl_model_options mo;
            ftl_model_options_init(&mo);
            mo.features_from = o->features_from;
            mo.overrides = o->overrides;
            mo.n_overrides = o->n_overrides;
            mo.bottom_of = o->bottom_of;
            ftl_model *m = NULL;
            st = ftl_model_load(o->backbone_path, &mo, &m);
            if (st == FTL_OK) dim = s->feature_dim = ftl_model_get_info(m)->feature_dim;
            ftl_model_free(m);
            cols[1].fixed_length = (int32_t)(4 * dim);
        }
        ftl_parquet_writer_options wo = {.no_replace = !o->overwrite};
        if (st == FTL_OK) st = ftl_parquet_writer_open(o->output_path, cols, 3, &wo, &w);
    }
    /* Parts in rank order; the other ranks' each sent to rank 0 as one whole Parquet file. */
    for (int r = 0; r < ranks && st == FTL_OK; r++) {
        bool has_rows = (int64_t)(r + 1) * total / ranks > (int64_t)r * total / ranks;
        if (!has_rows) continue;
        char *path = r == 0 || rank != 0 ? ftl_strdup(part) : part_name(out_folder, o->output_path, r);
        int path_lock = -1;
        if (r > 0) {
            uint8_t *bytes = NULL, *got = NULL;
            size_t size = 0;
            size_t *sizes = ftl_xcalloc((size_t)ranks, sizeof *sizes);
            if (rank == r) { /* reading a large part may take a while: announced */
                ftl_dist_phase_begin(col, "reading its part for rank 0");
                st = ftl_read_file(part, &bytes, &size);
                ftl_dist_phase_end(col);
            }
            if (st == FTL_OK) st = ftl_dist_gather(col, bytes, rank == r ? size : 0, 0, &got, sizes);
            if (st == FTL_OK && rank == 0) { /* only rank r sent bytes: the gathered buffer is its file */
                ftl_cleanup_register(path);
                st = ftl_write_file_atomic(path, got, sizes[r]);
                if (st == FTL_OK) path_lock = ftl_temp_hold(path);
            }
            free(sizes);
            free(bytes);
            free(got);
        }
        if (st == FTL_OK && rank == 0) {
            ftl_dist_phase_begin(col, "writing the features file");
            st = append_part(w, path);
            ftl_dist_phase_end(col);
        }
        if (st == FTL_OK && rank == 0 && !have_metadata) {
            ftl_parquet_file *f = NULL;
            st = ftl_parquet_open(path, &f);
            for (int i = 0; st == FTL_OK && i < ftl_parquet_metadata_count(f); i++)
                if (ftl_parquet_metadata_value(f, i))
                    st = ftl_parquet_writer_set_metadata(w, ftl_parquet_metadata_key(f, i), ftl_parquet_metadata_value(f, i));
            ftl_parquet_close(f);
            have_metadata = true;
        }
        if (r > 0 && rank == 0) {
            unlink(path);
            ftl_cleanup_unregister(path);
        }
        if (path_lock >= 0) close(path_lock);
        free(path);
    }
    if (w) {
        if (st == FTL_OK) st = ftl_parquet_writer_close(w);
        else ftl_parquet_writer_abort(w);
    }
    unlink(part);
    ftl_cleanup_unregister(part);
    if (part_lock >= 0) close(part_lock);
    free(part);
    free(out_folder);
    s->rows = (int64_t)sums[0];
    s->paths_are_text = sums[3] == 0;
    s->compute_seconds = sums[1] / ranks;
    s->wait_seconds = sums[2] / ranks;
    s->seconds = ftl_now() - start;
    return st;
}

/* The loader embed reads through: every row of the sources (or of o's rows or shard) once, in order. */
static ftl_loader_options embed_loader_options(const ftl_embed_options *o) {
    ftl_loader_options lo;
    ftl_loader_options_init(&lo);
    lo.sources = o->sources;
    lo.source_count = o->source_count;
    if (o->image_column) lo.value_column = o->image_column;
    if (o->label_column) lo.label_column = o->label_column;
    lo.path_column = FTL_COLUMN_PATH;
    lo.path_optional = true; /* Spark/pyarrow datasets may have no path column */
    lo.image_size = o->image_size;
    lo.batch_size = o->batch;
    lo.shuffle = false;
    lo.equal_batches = false;
    lo.epochs = 1;
    lo.threads = o->loader_threads; /* 0: the loader's default for the dataset */
    lo.shard = o->shard;
    lo.num_shards = o->num_shards > 0 ? o->num_shards : 1;
    lo.row_begin = o->row_begin;
    lo.row_end = o->row_end;
    lo.label_offset = o->label_offset;
    return lo;
}

/* Room for the largest source row group (bounded) plus one batch. */
static void feature_rows_reserve(feature_rows *f, ftl_loader *l, int batch) {
    int64_t largest = 0, previous = 0;
    for (int64_t i = 0; i < f->boundary_count; i++) {
        if (f->boundaries[i] - previous > largest) largest = f->boundaries[i] - previous;
        previous = f->boundaries[i];
    }
    if (ftl_loader_shard_rows(l) - previous > largest) largest = ftl_loader_shard_rows(l) - previous;
    int64_t cap_rows = MAX_ALIGNED_FEATURE_BYTES / (4 * f->dim);
    f->capacity = (largest < cap_rows ? largest : cap_rows) + batch;
    f->labels = ftl_xmalloc((size_t)f->capacity * sizeof *f->labels);
    f->features = ftl_xmalloc((size_t)(f->capacity * f->dim) * sizeof *f->features);
    f->paths = ftl_xcalloc((size_t)f->capacity, sizeof *f->paths);
}

ftl_status ftl_embed_run(const ftl_embed_options *o, ftl_embed_summary *s) {
    if (ftl_dist_active(o->collectives) && o->row_end <= 0) return embed_distributed(o, s);
    memset(s, 0, sizeof *s);
    s->gpu_util_percent = s->gpu_memory_bytes = NAN;
    double start = ftl_now();
    if (!o->backbone_path || !o->output_path || o->source_count < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "embed needs a dataset, a backbone and an output path");
    FTL_TRY(embed_check_paths(o));
    if (o->source_fingerprint) snprintf(s->dataset_fingerprint, sizeof s->dataset_fingerprint, "%s", o->source_fingerprint);
    else FTL_TRY(ftl_dataset_fingerprint(o->sources, o->source_count, s->dataset_fingerprint));

    ftl_loader_options lo = embed_loader_options(o);
    ftl_loader *l;
    FTL_TRY(ftl_loader_open(&lo, &l));
    int image_size = ftl_loader_image_size(l);
    if (image_size <= 0) {
        ftl_loader_close(l);
        return ftl_fail(FTL_E_INVALID_ARG, "%s holds no images (no image size); embed takes an image dataset", o->sources[0]);
    }
    ftl_model_options mo;
    embed_model_options(o, &mo);
    ftl_nn_int8_scales *own_scales = NULL;
    ftl_status st = FTL_OK;
    if (o->precision == FTL_NN_INT8 && !o->int8_scales) {
        st = ftl_embed_calibrate(o, &own_scales);
        mo.int8_scales = own_scales;
    }
    ftl_model *m = NULL;
    if (st == FTL_OK) st = ftl_model_load(o->backbone_path, &mo, &m);
    /* the features file records the calibration its features came from */
    char *scales_json = st == FTL_OK && mo.int8_scales ? ftl_nn_int8_scales_json(mo.int8_scales) : NULL;
    ftl_nn_int8_scales_free(own_scales);
    if (st != FTL_OK) {
        ftl_loader_close(l);
        return st;
    }
    const ftl_model_info *info = ftl_model_get_info(m);
    memcpy(s->backbone_sha256, info->sha256, 64);
    s->feature_dim = info->feature_dim;
    ftl_parquet_column_def cols[3] = {
        {.name = FTL_COLUMN_LABEL, .type = FTL_PARQUET_INT32},
        {.name = FTL_COLUMN_FEATURES, .type = FTL_PARQUET_FIXED_LEN_BYTE_ARRAY, .fixed_length = (int32_t)(4 * info->feature_dim)},
        {.name = FTL_COLUMN_PATH, .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = ftl_loader_paths_are_text(l)},
    };
    s->paths_are_text = cols[2].utf8;
    ftl_parquet_writer *w = NULL;
    ftl_parquet_writer_options wo = {.no_replace = !o->overwrite};
    st = ftl_parquet_writer_open(o->output_path, cols, 3, &wo, &w);
    feature_rows f = {.dim = info->feature_dim};
    source_boundaries(l, o, &f);
    feature_rows_reserve(&f, l, o->batch);
    ftl_progress progress;
    if (o->show_progress) ftl_progress_start(&progress, "embed", "images", ftl_loader_shard_rows(l));
    ftl_batch b;
    uint8_t *flipped = NULL;
    ftl_device gpu;
    ftl_device_monitor *monitor = nn_device_caps_of(info->device_kind)->gpu && ftl_device_select(info->device_kind, -1, &gpu) == FTL_OK
                                      ? ftl_device_monitor_start(&gpu) : NULL;
    /* On a GPU, batch k+1 is started (copied to the device) before batch k's features are collected,
     * so the copy overlaps the compute; elsewhere (and for a partial last batch) each batch runs at once. */
    started_batch started = {.labels = ftl_xmalloc((size_t)o->batch * sizeof(int32_t)),
                             .paths = ftl_xcalloc((size_t)o->batch, sizeof(char *))};
    while (st == FTL_OK && (st = ftl_interrupt_check()) == FTL_OK && (st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0) {
        const uint8_t *images = b.values;
        if (o->flip) {
            flipped = ftl_xrealloc(flipped, (size_t)(b.rows * b.row_bytes));
            ftl_image_flip_horizontal(b.values, flipped, (int)b.rows, image_size);
            images = flipped;
        }
        bool now_started = false;
        double t0 = ftl_now();
        if (b.rows <= o->batch) st = ftl_model_start_features(m, &o->preprocess, images, (int)b.rows, image_size, &now_started);
        s->compute_seconds += ftl_now() - t0;
        if (st == FTL_OK) st = collect_started(m, w, &f, &started, s); /* the one before: done or nearly */
        s->batches++;
        s->pipelined_batches += now_started;
        if (st == FTL_OK && now_started) {
            for (int64_t i = 0; i < b.rows; i++) {
                started.labels[i] = b.labels[i];
                started.paths[i] = ftl_strdup(b.paths ? b.paths[i] : "");
            }
            started.rows = b.rows;
            if (o->show_progress) ftl_progress_update(&progress, s->rows);
            continue;
        }
        if (st != FTL_OK) break;
        if (f.rows + b.rows > f.capacity) st = flush_rows(w, &f, f.rows); /* a split oversized row group */
        if (st != FTL_OK) break;
        t0 = ftl_now();
        st = ftl_model_extract_features(m, &o->preprocess, images, (int)b.rows, image_size, f.features + f.rows * f.dim);
        s->compute_seconds += ftl_now() - t0;
        if (st != FTL_OK) break;
        for (int64_t i = 0; i < b.rows; i++) {
            f.labels[f.rows + i] = b.labels[i];
            f.paths[f.rows + i] = ftl_strdup(b.paths ? b.paths[i] : "");
        }
        f.rows += b.rows;
        s->rows += b.rows;
        st = flush_ready(w, &f, false);
        if (o->show_progress) ftl_progress_update(&progress, s->rows);
    }
    if (st == FTL_OK) st = collect_started(m, w, &f, &started, s);
    for (int64_t i = 0; i < started.rows; i++) free(started.paths[i]);
    free(started.labels);
    free(started.paths);
    free(flipped);
    if (!ftl_device_monitor_take(monitor, &s->gpu_util_percent, &s->gpu_memory_bytes))
        s->gpu_util_percent = s->gpu_memory_bytes = NAN;
    ftl_device_monitor_stop(monitor);
    if (o->show_progress) ftl_progress_finish(&progress, s->rows);
    if (st == FTL_OK) st = flush_ready(w, &f, true);
    if (st == FTL_OK) st = write_metadata(w, l, o, m, s, image_size);
    if (st == FTL_OK && scales_json) st = ftl_parquet_writer_set_metadata(w, FTL_META_INT8_SCALES, scales_json);
    free(scales_json);
    ftl_loader_stats ls;
    ftl_loader_stats_get(l, &ls);
    s->wait_seconds = ls.wait_seconds;
    if (w) {
        if (st == FTL_OK) st = ftl_parquet_writer_close(w);
        else ftl_parquet_writer_abort(w);
    }
    for (int64_t i = 0; i < f.rows; i++) free(f.paths[i]);
    free(f.labels);
    free(f.features);
    free(f.paths);
    free(f.boundaries);
    ftl_model_free(m);
    ftl_loader_close(l);
    s->seconds = ftl_now() - start;
    return st;
}
