/* `ftl embed`: stream a dataset through the frozen backbone into a features file. The loader's
 * background readers fetch the next batch while the backbone computes the current one. */
#include "ftl/embed.h"
#include "ftl/loader.h"
#include "ftl/parquet.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>

enum { FEATURE_ROW_GROUP_BYTES = 8 << 20 };

void ftl_embed_options_init(ftl_embed_options *o) {
    memset(o, 0, sizeof *o);
    o->precision = FTL_NN_FP32;
    ftl_nn_preprocess_init(&o->preprocess, FTL_NN_SCALE_TF);
    o->batch = 32;
    o->loader_threads = 1;
    o->show_progress = true;
    o->num_shards = 1;
}

static uint64_t read_le32(const uint8_t *p) { return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24; }

/* Hashes name, size and footer of one Parquet file. */
static ftl_status fingerprint_file(const char *path, ftl_sha256 *h) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return ftl_fail(FTL_E_NOT_FOUND, "cannot open %s", path);
    ftl_status st = FTL_OK;
    uint8_t tail[8];
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size < 12 || fseek(fp, size - 8, SEEK_SET) != 0 || fread(tail, 1, 8, fp) != 8 || memcmp(tail + 4, "PAR1", 4) != 0) {
        st = ftl_fail(FTL_E_FORMAT, "%s is not a Parquet file", path);
    } else {
        uint64_t footer = read_le32(tail);
        if (footer > (uint64_t)size - 12) {
            st = ftl_fail(FTL_E_FORMAT, "%s: footer length %llu exceeds the file", path, (unsigned long long)footer);
        } else {
            uint8_t *buf = ftl_xmalloc(footer ? footer : 1);
            if (fseek(fp, size - 8 - (long)footer, SEEK_SET) != 0 || fread(buf, 1, footer, fp) != footer)
                st = ftl_fail(FTL_E_IO, "cannot read the footer of %s", path);
            const char *base = strrchr(path, '/');
            base = base ? base + 1 : path;
            char sizes[64];
            snprintf(sizes, sizeof sizes, "\n%ld\n", size);
            ftl_sha256_update(h, base, strlen(base));
            ftl_sha256_update(h, sizes, strlen(sizes));
            ftl_sha256_update(h, buf, footer);
            free(buf);
        }
    }
    fclose(fp);
    return st;
}

ftl_status ftl_dataset_fingerprint(const char *const *sources, int source_count, char hex[65]) {
    char **paths;
    int count;
    FTL_TRY(loader_expand_sources(sources, source_count, &paths, &count));
    ftl_sha256 h;
    ftl_sha256_init(&h);
    ftl_status st = FTL_OK;
    for (int i = 0; i < count; i++) {
        if (st == FTL_OK) st = fingerprint_file(paths[i], &h);
        free(paths[i]);
    }
    free(paths);
    if (st != FTL_OK) return st;
    uint8_t d[32];
    ftl_sha256_final(&h, d);
    ftl_sha256_hex(d, hex);
    return FTL_OK;
}

/* Rows of features waiting to be written as one row group. */
typedef struct feature_rows {
    int64_t rows, capacity, dim;
    int32_t *labels;
    float *features;
    char **paths;
} feature_rows;

static ftl_status flush_features(ftl_parquet_writer *w, feature_rows *f) {
    if (f->rows == 0) return FTL_OK;
    const uint8_t **pp = ftl_xmalloc((size_t)f->rows * sizeof *pp);
    uint32_t *pl = ftl_xmalloc((size_t)f->rows * sizeof *pl);
    for (int64_t i = 0; i < f->rows; i++) {
        pp[i] = (const uint8_t *)f->paths[i];
        pl[i] = (uint32_t)strlen(f->paths[i]);
    }
    ftl_parquet_column_data cols[3] = {{.values = f->labels}, {.values = f->features}, {.byte_values = pp, .byte_lengths = pl}};
    ftl_status st = ftl_parquet_writer_write_row_group(w, f->rows, cols);
    for (int64_t i = 0; i < f->rows; i++) free(f->paths[i]);
    free(pp);
    free(pl);
    f->rows = 0;
    return st;
}

static ftl_status write_metadata(ftl_parquet_writer *w, ftl_loader *l, const ftl_embed_options *o, const ftl_model *m,
                                 const ftl_embed_summary *s, int image_size) {
    const ftl_model_info *info = ftl_model_get_info(m);
    char *pre = ftl_nn_preprocess_json(&o->preprocess, m, image_size);
    char *dim = ftl_format("%lld", (long long)s->feature_dim);
    char *size = ftl_format("%d", image_size);
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
        {FTL_META_SOURCE_FINGERPRINT, s->dataset_fingerprint},
        {FTL_META_SOURCE_IMAGE_SIZE, size},
    };
    ftl_status st = FTL_OK;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0] && st == FTL_OK; i++)
        if (pairs[i][1][0]) st = ftl_parquet_writer_set_metadata(w, pairs[i][0], pairs[i][1]);
    free(pre);
    free(dim);
    free(size);
    return st;
}

ftl_status ftl_embed_run(const ftl_embed_options *o, ftl_embed_summary *s) {
    memset(s, 0, sizeof *s);
    double start = ftl_now();
    if (!o->backbone_path || !o->output_path || o->source_count < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "embed needs a dataset, a backbone and an output path");
    if (ftl_path_exists(o->output_path) && !o->overwrite)
        return ftl_fail(FTL_E_EXISTS, "output %s already exists (use --overwrite to replace it)", o->output_path);
    FTL_TRY(ftl_dataset_fingerprint(o->sources, o->source_count, s->dataset_fingerprint));

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
    lo.threads = o->loader_threads > 0 ? o->loader_threads : 1;
    lo.shard = o->shard;
    lo.num_shards = o->num_shards > 0 ? o->num_shards : 1;
    ftl_loader *l;
    FTL_TRY(ftl_loader_open(&lo, &l));
    int image_size = ftl_loader_image_size(l);
    if (image_size <= 0) {
        ftl_loader_close(l);
        return ftl_fail(FTL_E_INVALID_ARG, "%s holds no images (no image size); embed takes an image dataset", o->sources[0]);
    }
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    mo.features_from = o->features_from;
    mo.precision = o->precision;
    mo.threads = o->threads;
    mo.batch = o->batch;
    ftl_model *m;
    ftl_status st = ftl_model_load(o->backbone_path, &mo, &m);
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
        {.name = FTL_COLUMN_PATH, .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = true},
    };
    ftl_parquet_writer *w = NULL;
    st = ftl_parquet_writer_open(o->output_path, cols, 3, NULL, &w);
    feature_rows f = {.dim = info->feature_dim};
    f.capacity = FEATURE_ROW_GROUP_BYTES / (4 * f.dim) > o->batch ? FEATURE_ROW_GROUP_BYTES / (4 * f.dim) : o->batch;
    f.labels = ftl_xmalloc((size_t)f.capacity * sizeof *f.labels);
    f.features = ftl_xmalloc((size_t)(f.capacity * f.dim) * sizeof *f.features);
    f.paths = ftl_xcalloc((size_t)f.capacity, sizeof *f.paths);
    ftl_progress progress;
    if (o->show_progress) ftl_progress_start(&progress, "embed", "images", ftl_loader_shard_rows(l));
    ftl_batch b;
    while (st == FTL_OK && (st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0) {
        if (f.rows + b.rows > f.capacity) st = flush_features(w, &f);
        if (st != FTL_OK) break;
        double t0 = ftl_now();
        st = ftl_model_extract_features(m, &o->preprocess, b.values, (int)b.rows, image_size, f.features + f.rows * f.dim);
        s->compute_seconds += ftl_now() - t0;
        if (st != FTL_OK) break;
        for (int64_t i = 0; i < b.rows; i++) {
            f.labels[f.rows + i] = b.labels[i];
            f.paths[f.rows + i] = ftl_strdup(b.paths ? b.paths[i] : "");
        }
        f.rows += b.rows;
        s->rows += b.rows;
        if (o->show_progress) ftl_progress_update(&progress, s->rows);
    }
    if (o->show_progress) ftl_progress_finish(&progress, s->rows);
    if (st == FTL_OK) st = flush_features(w, &f);
    if (st == FTL_OK) st = write_metadata(w, l, o, m, s, image_size);
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
    ftl_model_free(m);
    ftl_loader_close(l);
    s->seconds = ftl_now() - start;
    return st;
}
