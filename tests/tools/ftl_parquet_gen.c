/* Test helper: writes Parquet files with ftl's writer (public API only) for the end-to-end
 * interop tests and the bad-input tests.
 *
 *   ftl_parquet_gen refdata OUT --rows N --image-bytes B --row-group-rows R [--codec C] [--seed S]
 *                   [--classes K] [--distinct-images D] [--utf8-paths] [--optional] [--dataset]
 *                   [--page-bytes P] [--level L] [--no-crc]
 *       columns label/image/path with the data definition of shared/tools/interop
 *       (parquet_write_ref.mjs, tests/colhash_ref.py), so their expected checksums are known
 *       independently; --dataset adds the ftl dataset metadata (class names class_0..class_K-1).
 *   ftl_parquet_gen types OUT --rows N --row-group-rows R [--codec C] [--seed S] [--optional]
 *       one column of every physical type ftl writes (nulls in every column with --optional),
 *       including NaN, -0.0, infinities, empty strings and a float32-vector column.
 * Prints the colhash v1 of the data it wrote, computed from the writer's input:
 * {"columns": {"NAME": {"sha256", "count", "null_count", "nulls_sha256"}}} (parquet_inspect --expect). */
#include "ftl.h"
#include "data/dataset.h"
#include "util/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct args {
    const char *mode, *out;
    int64_t rows, image_bytes, row_group_rows, page_bytes;
    uint64_t seed;
    int classes, distinct_images, level;
    bool utf8_paths, optional, dataset, no_crc;
    ftl_parquet_codec codec;
} args;

static int usage(const char *why) {
    fprintf(stderr, "ftl_parquet_gen: %s\nusage: ftl_parquet_gen refdata|types OUT --rows N [--image-bytes B] --row-group-rows R "
                    "[--codec C] [--seed S] [--classes K] [--distinct-images D] [--utf8-paths] [--optional] [--dataset] "
                    "[--page-bytes P] [--level L] [--no-crc]\n", why);
    return 2;
}

static int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->seed = 1;
    a->classes = 10;
    a->rows = -1;
    a->row_group_rows = 0;
    if (argc < 3) return usage("need a mode and an output file");
    a->mode = argv[1];
    a->out = argv[2];
    for (int i = 3; i < argc; i++) {
        const char *k = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(k, "--utf8-paths") == 0) a->utf8_paths = true;
        else if (strcmp(k, "--optional") == 0) a->optional = true;
        else if (strcmp(k, "--dataset") == 0) a->dataset = true;
        else if (strcmp(k, "--no-crc") == 0) a->no_crc = true;
        else if (!v) return usage("option without a value");
        else {
            i++;
            if (strcmp(k, "--rows") == 0) a->rows = strtoll(v, NULL, 0);
            else if (strcmp(k, "--image-bytes") == 0) a->image_bytes = strtoll(v, NULL, 0);
            else if (strcmp(k, "--row-group-rows") == 0) a->row_group_rows = strtoll(v, NULL, 0);
            else if (strcmp(k, "--page-bytes") == 0) a->page_bytes = strtoll(v, NULL, 0);
            else if (strcmp(k, "--seed") == 0) a->seed = strtoull(v, NULL, 0);
            else if (strcmp(k, "--classes") == 0) a->classes = atoi(v);
            else if (strcmp(k, "--distinct-images") == 0) a->distinct_images = atoi(v);
            else if (strcmp(k, "--level") == 0) a->level = atoi(v);
            else if (strcmp(k, "--codec") == 0) {
                if (!ftl_parquet_codec_parse(v, &a->codec)) return usage("unknown codec");
            } else return usage("unknown option");
        }
    }
    if (a->rows < 0 || a->row_group_rows < 1 || a->classes < 1) return usage("need --rows >= 0, --row-group-rows >= 1, --classes >= 1");
    return 0;
}

static int report(ftl_status st) {
    if (st == FTL_OK) return 0;
    fprintf(stderr, "ftl_parquet_gen: %s\n", ftl_last_error());
    return 1;
}

/* ---- checksums of the data as written (printed as {"columns": {...}} for --expect) ---- */

typedef struct written_hashes {
    int count;
    const char *names[16];
    ftl_parquet_colhash *h[16];
} written_hashes;

static void hashes_init(written_hashes *wh, const ftl_parquet_column_def *defs, int n) {
    wh->count = n;
    for (int c = 0; c < n; c++) {
        wh->names[c] = defs[c].name;
        ftl_parquet_colhash_init(&wh->h[c], defs[c].type);
    }
}

/* Feeds one row group of writer input to the column's hash, through the reader's value layout. */
static void hashes_add(written_hashes *wh, int c, const ftl_parquet_column_def *def, int64_t rows, const ftl_parquet_column_data *d) {
    ftl_parquet_column_values v = {.type = def->type, .rows = rows, .validity = (uint8_t *)d->validity};
    int64_t *offs = NULL;
    uint8_t *data = NULL;
    if (def->type == FTL_PARQUET_BYTE_ARRAY) {
        offs = malloc((size_t)(rows + 1) * 8);
        offs[0] = 0;
        for (int64_t i = 0; i < rows; i++) {
            bool valid = !d->validity || d->validity[i];
            int64_t len = !valid ? 0 : d->offsets ? d->offsets[i + 1] - d->offsets[i] : (int64_t)d->byte_lengths[i];
            offs[i + 1] = offs[i] + len;
        }
        data = malloc((size_t)offs[rows] + 1);
        for (int64_t i = 0; i < rows; i++) {
            const uint8_t *src = d->offsets ? (const uint8_t *)d->values + d->offsets[i] : d->byte_values[i];
            if (offs[i + 1] > offs[i]) memcpy(data + offs[i], src, (size_t)(offs[i + 1] - offs[i]));
        }
        v.offsets = offs;
        v.data = data;
    } else {
        v.fixed_length = def->type == FTL_PARQUET_BOOLEAN ? 1 : def->type == FTL_PARQUET_INT32 || def->type == FTL_PARQUET_FLOAT ? 4
                         : def->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY ? def->fixed_length : 8;
        v.values = (void *)d->values;
    }
    ftl_parquet_colhash_update(wh->h[c], &v);
    free(offs);
    free(data);
}

static void hashes_print(written_hashes *wh) {
    printf("{\"columns\": {");
    for (int c = 0; c < wh->count; c++) {
        ftl_parquet_colhash_result r;
        ftl_parquet_colhash_final(wh->h[c], &r);
        ftl_parquet_colhash_free(wh->h[c]);
        printf("%s\n  \"%s\": {\"sha256\": \"%s\", \"count\": %lld, \"null_count\": %lld, \"nulls_sha256\": ", c ? "," : "",
               wh->names[c], r.sha256, (long long)r.count, (long long)r.null_count);
        if (r.nulls_sha256[0]) printf("\"%s\"}", r.nulls_sha256);
        else printf("null}");
    }
    printf("\n}}\n");
}

/* ---- refdata: the interop data definition ---- */
static int write_refdata(const args *a) {
    int64_t n = a->rows;
    int32_t *labels = malloc((size_t)(n ? n : 1) * 4);
    uint64_t x = a->seed;
    for (int64_t i = 0; i < n; i++) labels[i] = (int32_t)(ftl_splitmix64(&x) % (uint64_t)a->classes);
    int64_t nimg = a->distinct_images > 0 ? (a->distinct_images < n ? a->distinct_images : n) : n;
    size_t B = (size_t)a->image_bytes;
    uint8_t *images = malloc((size_t)(nimg ? nimg : 1) * (B ? B : 1));
    uint64_t y = a->seed ^ 0x5851F42D4C957F2DULL;
    for (int64_t k = 0; k < nimg; k++)
        for (size_t b = 0; b < B; b += 8) {
            uint64_t w = ftl_splitmix64(&y);
            for (size_t j = 0; j < 8 && b + j < B; j++) images[(size_t)k * B + b + j] = (uint8_t)(w >> (8 * j));
        }
    char **paths = malloc((size_t)(n ? n : 1) * sizeof *paths);
    for (int64_t i = 0; i < n; i++) {
        char buf[128];
        if (a->utf8_paths) snprintf(buf, sizeof buf, "\xe3\x82\xaf\xe3\x83\xa9\xe3\x82\xb9_%d/\xe7\x94\xbb\xe5\x83\x8f_%06lld_\xc3\xa9.png", labels[i], (long long)i);
        else snprintf(buf, sizeof buf, "class_%d/img_%06lld.png", labels[i], (long long)i);
        paths[i] = strdup(buf);
    }
    ftl_parquet_column_def defs[3] = {
        {.name = "label", .type = FTL_PARQUET_INT32, .optional = a->optional},
        {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY, .optional = a->optional},
        {.name = "path", .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = true, .optional = a->optional},
    };
    ftl_parquet_writer_options o = {.codec = a->codec, .compression_level = a->level, .max_page_bytes = a->page_bytes, .no_page_crc = a->no_crc};
    ftl_parquet_writer *w;
    ftl_status st = ftl_parquet_writer_open(a->out, defs, 3, &o, &w);
    written_hashes wh;
    hashes_init(&wh, defs, 3);
    const uint8_t **img_ptr = malloc((size_t)(n ? n : 1) * sizeof *img_ptr);
    uint32_t *img_len = malloc((size_t)(n ? n : 1) * 4);
    int64_t *path_off = malloc((size_t)(n + 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        img_ptr[i] = images + (size_t)(i % (nimg ? nimg : 1)) * B;
        img_len[i] = (uint32_t)B;
    }
    /* paths in the offsets form, images in the pointer form: both writer inputs get used */
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += strlen(paths[i]);
    char *path_data = malloc(total + 1);
    path_off[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t l = strlen(paths[i]);
        memcpy(path_data + path_off[i], paths[i], l);
        path_off[i + 1] = path_off[i] + (int64_t)l;
    }
    for (int64_t r0 = 0; st == FTL_OK && r0 < n; r0 += a->row_group_rows) {
        int64_t m = n - r0 < a->row_group_rows ? n - r0 : a->row_group_rows;
        /* offsets relative to this row group's first value */
        int64_t *offs = malloc((size_t)(m + 1) * 8);
        for (int64_t i = 0; i <= m; i++) offs[i] = path_off[r0 + i] - path_off[r0];
        ftl_parquet_column_data cols[3] = {
            {.values = labels + r0},
            {.byte_values = img_ptr + r0, .byte_lengths = img_len + r0},
            {.values = path_data + path_off[r0], .offsets = offs},
        };
        st = ftl_parquet_writer_write_row_group(w, m, cols);
        for (int c = 0; c < 3; c++) hashes_add(&wh, c, &defs[c], m, &cols[c]);
        free(offs);
    }
    if (st == FTL_OK && a->dataset) {
        char *classes = malloc((size_t)a->classes * 24 + 8);
        size_t at = 0;
        classes[at++] = '[';
        for (int k = 0; k < a->classes; k++) at += (size_t)sprintf(classes + at, "%s\"class_%d\"", k ? "," : "", k);
        classes[at++] = ']';
        classes[at] = '\0';
        ftl_parquet_writer_set_metadata(w, FTL_META_FORMAT, "ftl-dataset-1");
        ftl_parquet_writer_set_metadata(w, FTL_META_VERSION, FTL_VERSION);
        ftl_parquet_writer_set_metadata(w, FTL_META_CLASSES, classes);
        ftl_parquet_writer_set_metadata(w, FTL_META_IMAGE_LAYOUT, "HWC-RGB-uint8");
        ftl_parquet_writer_set_metadata(w, FTL_META_SPLIT, "train");
        free(classes);
    }
    if (st == FTL_OK) st = ftl_parquet_writer_close(w);
    else ftl_parquet_writer_abort(w);
    hashes_print(&wh);
    for (int64_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
    free(path_data);
    free(path_off);
    free(img_ptr);
    free(img_len);
    free(images);
    free(labels);
    return report(st);
}

/* ---- types: every physical type, with nulls when optional ---- */
enum { TYPE_COLUMNS = 9, VEC_DIM = 8 };

static int write_types(const args *a) {
    ftl_parquet_column_def defs[TYPE_COLUMNS] = {
        {.name = "b", .type = FTL_PARQUET_BOOLEAN},
        {.name = "i32", .type = FTL_PARQUET_INT32},
        {.name = "i64", .type = FTL_PARQUET_INT64},
        {.name = "f32", .type = FTL_PARQUET_FLOAT},
        {.name = "f64", .type = FTL_PARQUET_DOUBLE},
        {.name = "s", .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = true},
        {.name = "bin", .type = FTL_PARQUET_BYTE_ARRAY},
        {.name = "fixed16", .type = FTL_PARQUET_FIXED_LEN_BYTE_ARRAY, .fixed_length = 16},
        {.name = "embedding", .type = FTL_PARQUET_FIXED_LEN_BYTE_ARRAY, .fixed_length = VEC_DIM * 4},
    };
    for (int c = 0; c < TYPE_COLUMNS; c++) defs[c].optional = a->optional;
    ftl_parquet_writer_options o = {.codec = a->codec, .compression_level = a->level, .max_page_bytes = a->page_bytes, .no_page_crc = a->no_crc};
    ftl_parquet_writer *w;
    ftl_status st = ftl_parquet_writer_open(a->out, defs, TYPE_COLUMNS, &o, &w);
    if (st != FTL_OK) return report(st);
    written_hashes wh;
    hashes_init(&wh, defs, TYPE_COLUMNS);
    int64_t R = a->row_group_rows;
    uint8_t *b = malloc((size_t)R), *valid[TYPE_COLUMNS];
    int32_t *i32 = malloc((size_t)R * 4);
    int64_t *i64 = malloc((size_t)R * 8);
    float *f32 = malloc((size_t)R * 4), *emb = malloc((size_t)R * VEC_DIM * 4);
    double *f64 = malloc((size_t)R * 8);
    uint8_t *fx = malloc((size_t)R * 16);
    char *sdata = malloc((size_t)R * 40 + 1);
    uint8_t *bdata = malloc((size_t)R * 64 + 1);
    int64_t *soff = malloc((size_t)(R + 1) * 8), *boff = malloc((size_t)(R + 1) * 8);
    for (int c = 0; c < TYPE_COLUMNS; c++) valid[c] = malloc((size_t)R);
    uint64_t x = a->seed;
    for (int64_t r0 = 0; st == FTL_OK && r0 < a->rows; r0 += R) {
        int64_t m = a->rows - r0 < R ? a->rows - r0 : R;
        soff[0] = boff[0] = 0;
        for (int64_t i = 0; i < m; i++) {
            int64_t row = r0 + i;
            uint64_t z = ftl_splitmix64(&x);
            for (int c = 0; c < TYPE_COLUMNS; c++) valid[c][i] = !a->optional || ((z >> (c * 3)) & 7) != 0;
            b[i] = (uint8_t)(z >> 40 & 1);
            i32[i] = (int32_t)(uint32_t)(z >> 7);
            i64[i] = (int64_t)(z * 0x9E3779B97F4A7C15ULL);
            static const float fspecial[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e-40f, 3.4e38f};
            f32[i] = row % 50 < 6 ? fspecial[row % 50] : row % 50 == 6 ? NAN : (float)((int64_t)(z >> 20) % 200000) / 64.0f;
            f64[i] = row % 40 < 3 ? (double)fspecial[row % 40] : row % 40 == 3 ? NAN : (double)(int64_t)z / 1e9;
            for (int k = 0; k < 16; k++) fx[i * 16 + k] = (uint8_t)(z >> (k * 4));
            for (int k = 0; k < VEC_DIM; k++) emb[i * VEC_DIM + k] = (float)(((int64_t)(z >> k) % 1000) - 500) / 100.0f;
            int sl = snprintf(sdata + soff[i], 40, row % 11 == 0 ? "" : row % 13 == 0 ? "\xc3\xa9t\xc3\xa9 %lld" : "value %lld", (long long)row);
            soff[i + 1] = soff[i] + sl;
            int bl = (int)(z % 64);
            for (int k = 0; k < bl; k++) bdata[boff[i] + k] = (uint8_t)(z >> (k % 8 * 8));
            boff[i + 1] = boff[i] + bl;
        }
        ftl_parquet_column_data cols[TYPE_COLUMNS] = {
            {.values = b}, {.values = i32}, {.values = i64}, {.values = f32}, {.values = f64},
            {.values = sdata, .offsets = soff}, {.values = bdata, .offsets = boff}, {.values = fx}, {.values = emb},
        };
        for (int c = 0; c < TYPE_COLUMNS; c++) cols[c].validity = a->optional ? valid[c] : NULL;
        st = ftl_parquet_writer_write_row_group(w, m, cols);
        for (int c = 0; c < TYPE_COLUMNS; c++) hashes_add(&wh, c, &defs[c], m, &cols[c]);
    }
    if (st == FTL_OK) st = ftl_parquet_writer_set_metadata(w, "generator", "ftl_parquet_gen types");
    if (st == FTL_OK) st = ftl_parquet_writer_close(w);
    else ftl_parquet_writer_abort(w);
    hashes_print(&wh);
    free(b);
    free(i32);
    free(i64);
    free(f32);
    free(emb);
    free(f64);
    free(fx);
    free(sdata);
    free(bdata);
    free(soff);
    free(boff);
    for (int c = 0; c < TYPE_COLUMNS; c++) free(valid[c]);
    return report(st);
}

int main(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (strcmp(a.mode, "refdata") == 0) return write_refdata(&a);
    if (strcmp(a.mode, "types") == 0) return write_types(&a);
    return usage("mode must be refdata or types");
}
