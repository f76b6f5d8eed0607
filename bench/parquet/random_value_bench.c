/* Random single-value reads (ftl_parquet_read_value), prep's access pattern on an image table:
 * rows in a shuffled order out of one big row group of a binary column with 1 MiB pages. Writes
 * one row group of R rows x B bytes per codec (synthetic image-like bytes; the file is then in
 * the page cache), and reports the per-read latency (median, p99, mean) of single-threaded
 * shuffled reads, the first read (which builds the chunk's page map), reads/s with T threads on
 * one handle, and what decoding the whole chunk costs (the alternative per image).
 *
 *   random_value_bench [--rows R] [--value-bytes B] [--page-bytes P] [--reads K] [--threads T]
 *                      [--out DIR] [--verify-crc 0]
 *   random_value_bench --read FILE --column NAME [--reads K] [--threads T]   (an existing file,
 *                      e.g. an image table written by DuckDB or arrow-rs; row group 0)
 */
#include "ftl.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/rng.h"
#include "util/timing.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, ftl_last_error());
    exit(1);
}

/* Gradients with noise, about as compressible as raw photo pixels. */
static void fill_value(uint8_t *dst, int64_t n, int64_t row) {
    uint64_t x = (uint64_t)row * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        dst[i] = (uint8_t)((i / 3 + row * 7) % 251 + (x >> 61));
    }
}

static void write_table(const char *path, ftl_parquet_codec codec, int64_t rows, int64_t value_bytes, int64_t page_bytes) {
    ftl_parquet_column_def defs[2] = {{.name = "label", .type = FTL_PARQUET_INT32},
                                      {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY, .optional = true}};
    ftl_parquet_writer_options o = {.codec = codec, .max_page_bytes = page_bytes};
    ftl_parquet_writer *w;
    if (ftl_parquet_writer_open(path, defs, 2, &o, &w) != FTL_OK) die("open for writing");
    int32_t *labels = malloc((size_t)rows * sizeof *labels);
    const uint8_t **ptrs = malloc((size_t)rows * sizeof *ptrs);
    uint32_t *lens = malloc((size_t)rows * sizeof *lens);
    uint8_t *bytes = malloc((size_t)(rows * value_bytes));
    for (int64_t r = 0; r < rows; r++) {
        labels[r] = (int32_t)(r % 10);
        fill_value(bytes + r * value_bytes, value_bytes, r);
        ptrs[r] = bytes + r * value_bytes;
        lens[r] = (uint32_t)value_bytes;
    }
    ftl_parquet_column_data cols[2] = {{.values = labels}, {.byte_values = ptrs, .byte_lengths = lens}};
    if (ftl_parquet_writer_write_row_group(w, rows, cols) != FTL_OK || ftl_parquet_writer_close(w) != FTL_OK) die("write");
    free(labels);
    free(ptrs);
    free(lens);
    free(bytes);
}

typedef struct job {
    ftl_parquet_file *f;
    int column;
    int64_t rows, reads, bytes;
    uint64_t seed;
} job;

static void *random_reads(void *arg) {
    job *j = arg;
    ftl_parquet_value v = {0};
    ftl_rng rng;
    ftl_rng_seed(&rng, j->seed);
    for (int64_t k = 0; k < j->reads; k++) {
        if (ftl_parquet_read_value(j->f, 0, j->column, (int64_t)ftl_rng_below(&rng, (uint64_t)j->rows), &v) != FTL_OK) die("read_value");
        j->bytes += v.size;
    }
    ftl_parquet_value_free(&v);
    return NULL;
}

static int no_crc; /* --verify-crc 0 */

static void bench_file(const char *label, const char *path, const char *column, int64_t reads, int threads) {
    ftl_parquet_file *f;
    if (ftl_parquet_open(path, &f) != FTL_OK) die(path);
    ftl_parquet_set_verify_crc(f, !no_crc);
    int c = ftl_parquet_find_column(f, column);
    if (c < 0 || ftl_parquet_num_row_groups(f) < 1) {
        fprintf(stderr, "%s: no column %s or no row group\n", path, column);
        exit(1);
    }
    int64_t rows = ftl_parquet_row_group_rows(f, 0);
    ftl_parquet_value v = {0};
    double t0 = ftl_now();
    if (ftl_parquet_read_value(f, 0, c, rows / 2, &v) != FTL_OK) die("first read_value");
    double first = ftl_now() - t0;
    /* single thread, shuffled rows: the latency of one read */
    double *lat = malloc((size_t)reads * sizeof *lat), sum = 0;
    int64_t bytes = 0;
    ftl_rng rng;
    ftl_rng_seed(&rng, 1);
    for (int64_t k = 0; k < reads; k++) {
        int64_t row = (int64_t)ftl_rng_below(&rng, (uint64_t)rows);
        double s = ftl_now();
        if (ftl_parquet_read_value(f, 0, c, row, &v) != FTL_OK) die("read_value");
        lat[k] = ftl_now() - s;
        sum += lat[k];
        bytes += v.size;
    }
    qsort(lat, (size_t)reads, sizeof *lat, cmp_double);
    /* threads on one handle */
    pthread_t th[64];
    job jobs[64];
    t0 = ftl_now();
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job){f, c, rows, reads, 0, 100 + (uint64_t)i};
        pthread_create(&th[i], NULL, random_reads, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    double threaded = ftl_now() - t0;
    /* the alternative: decoding the whole chunk for one image */
    ftl_parquet_column_values cv = {0};
    if (ftl_parquet_read_column(f, 0, c, &cv) != FTL_OK) die("read_column");
    t0 = ftl_now();
    if (ftl_parquet_read_column(f, 0, c, &cv) != FTL_OK) die("read_column");
    double chunk = ftl_now() - t0;
    printf("%-10s %6lld %8.0f %9.1f %9.1f %9.1f %9.2f %10.0f %10.1f\n", label, (long long)rows, (double)bytes / (double)reads / 1e3,
           lat[reads / 2] * 1e6, lat[reads * 99 / 100] * 1e6, sum / (double)reads * 1e6, first * 1e3,
           (double)reads * threads / threaded, chunk * 1e3);
    ftl_parquet_column_values_free(&cv);
    ftl_parquet_value_free(&v);
    free(lat);
    ftl_parquet_close(f);
}

int main(int argc, char **argv) {
    int64_t rows = 600, value_bytes = 150528, page_bytes = 1 << 20, reads = 2000;
    int threads = 2;
    const char *out = "build/bench-tmp", *read = NULL, *column = "image";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) rows = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--value-bytes")) value_bytes = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--page-bytes")) page_bytes = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reads")) reads = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else if (!strcmp(argv[i], "--read")) read = argv[i + 1];
        else if (!strcmp(argv[i], "--column")) column = argv[i + 1];
        else if (!strcmp(argv[i], "--verify-crc")) no_crc = !atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (rows < 1 || value_bytes < 1 || reads < 1 || threads < 1 || threads > 64) return 2;
    printf("%-10s %6s %8s %9s %9s %9s %9s %10s %10s\n", "codec", "rows", "value KB", "median us", "p99 us", "mean us", "first ms",
           "reads/s", "chunk ms");
    printf("           (%d threads for reads/s; chunk ms: ftl_parquet_read_column of the whole row group)\n", threads);
    if (read) {
        bench_file("(file)", read, column, reads, threads);
        return 0;
    }
    ftl_make_dirs(out);
    static const ftl_parquet_codec codecs[] = {FTL_PARQUET_CODEC_NONE, FTL_PARQUET_CODEC_SNAPPY, FTL_PARQUET_CODEC_ZSTD};
    for (int k = 0; k < 3; k++) {
        char *path = ftl_format("%s/random_value_%s.parquet", out, ftl_parquet_codec_name(codecs[k]));
        write_table(path, codecs[k], rows, value_bytes, page_bytes);
        bench_file(ftl_parquet_codec_name(codecs[k]), path, "image", reads, threads);
        remove(path);
        free(path);
    }
    return 0;
}
