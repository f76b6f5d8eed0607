/* Writer -> reader round trips for every type x codec x optional combination, several row
 * groups and page sizes: the values read back equal those written, colhash v1 equals SHA-256
 * computed here straight from the input per the interop README, the footer statistics equal the
 * input's min/max/null count, and equal inputs give byte-identical files. */
#include "test.h"
#include "ftl/parquet.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/rng.h"
#include "util/sha256.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

enum { NCOLS = 8 };

typedef struct table {
    int64_t rows;
    ftl_parquet_column_def defs[NCOLS];
    uint8_t *fixed[NCOLS];       /* fixed-width values, rows x width */
    int64_t *offsets[NCOLS];     /* byte arrays */
    uint8_t *data[NCOLS];
    uint8_t *valid[NCOLS];       /* NULL for required columns */
} table;

static int width_of(const ftl_parquet_column_def *d) {
    switch (d->type) {
    case FTL_PARQUET_BOOLEAN: return 1;
    case FTL_PARQUET_INT32:
    case FTL_PARQUET_FLOAT: return 4;
    case FTL_PARQUET_INT64:
    case FTL_PARQUET_DOUBLE: return 8;
    case FTL_PARQUET_FIXED_LEN_BYTE_ARRAY: return d->fixed_length;
    default: return 0;
    }
}

static void make_table(table *t, int64_t rows, bool optional, uint64_t seed, int max_bytes_len) {
    memset(t, 0, sizeof *t);
    t->rows = rows;
    static const ftl_parquet_column_def defs[NCOLS] = {
        {"flag", FTL_PARQUET_BOOLEAN, 0, false, false}, {"i32", FTL_PARQUET_INT32, 0, false, false},
        {"i64", FTL_PARQUET_INT64, 0, false, false},    {"f32", FTL_PARQUET_FLOAT, 0, false, false},
        {"f64", FTL_PARQUET_DOUBLE, 0, false, false},   {"text", FTL_PARQUET_BYTE_ARRAY, 0, true, false},
        {"blob", FTL_PARQUET_BYTE_ARRAY, 0, false, false}, {"vec", FTL_PARQUET_FIXED_LEN_BYTE_ARRAY, 12, false, false},
    };
    ftl_rng rng;
    ftl_rng_seed(&rng, seed);
    for (int c = 0; c < NCOLS; c++) {
        t->defs[c] = defs[c];
        t->defs[c].optional = optional;
        if (optional) {
            t->valid[c] = malloc((size_t)rows + 1);
            int every = 2 + c; /* different null patterns, including runs */
            for (int64_t r = 0; r < rows; r++) t->valid[c][r] = (r / 37) % 5 == 3 ? 0 : r % every != 0;
        }
        int w = width_of(&t->defs[c]);
        if (w) {
            t->fixed[c] = malloc((size_t)rows * (size_t)w + 1);
            for (int64_t r = 0; r < rows; r++) {
                uint64_t x = ftl_rng_next(&rng);
                uint8_t *p = t->fixed[c] + r * w;
                if (t->defs[c].type == FTL_PARQUET_BOOLEAN) p[0] = (uint8_t)(x & 1);
                else if (t->defs[c].type == FTL_PARQUET_FLOAT) {
                    float f = (float)((int64_t)(x >> 11) % 100000) / 7.0f;
                    memcpy(p, &f, 4);
                } else if (t->defs[c].type == FTL_PARQUET_DOUBLE) {
                    double d = (double)(int64_t)x / 3.0;
                    memcpy(p, &d, 8);
                } else {
                    for (int k = 0; k < w; k++) p[k] = (uint8_t)(x >> (8 * (k % 8)));
                }
            }
        } else {
            t->offsets[c] = malloc((size_t)(rows + 1) * 8);
            t->offsets[c][0] = 0;
            for (int64_t r = 0; r < rows; r++) t->offsets[c][r + 1] = t->offsets[c][r] + (int64_t)ftl_rng_below(&rng, (uint64_t)max_bytes_len + 1);
            t->data[c] = malloc((size_t)t->offsets[c][rows] + 1);
            for (int64_t i = 0; i < t->offsets[c][rows]; i++) t->data[c][i] = (uint8_t)('a' + ftl_rng_below(&rng, 26));
        }
    }
}

static void free_table(table *t) {
    for (int c = 0; c < NCOLS; c++) {
        free(t->fixed[c]);
        free(t->offsets[c]);
        free(t->data[c]);
        free(t->valid[c]);
    }
}

static bool row_valid(const table *t, int c, int64_t r) { return !t->valid[c] || t->valid[c][r]; }

/* Writes rows in row groups of the given sizes (cycled). */
static ftl_status write_table(const table *t, const char *path, const ftl_parquet_writer_options *o, const int64_t *groups,
                              int ngroups, bool pointer_form) {
    ftl_parquet_writer *w;
    FTL_TRY(ftl_parquet_writer_open(path, t->defs, NCOLS, o, &w));
    int64_t r0 = 0;
    ftl_status st = FTL_OK;
    for (int g = 0; r0 < t->rows && st == FTL_OK; g++) {
        int64_t m = groups[g % ngroups];
        if (m > t->rows - r0) m = t->rows - r0;
        ftl_parquet_column_data cols[NCOLS];
        const uint8_t **ptrs[NCOLS] = {0};
        uint32_t *lens[NCOLS] = {0};
        memset(cols, 0, sizeof cols);
        for (int c = 0; c < NCOLS; c++) {
            cols[c].validity = t->valid[c] ? t->valid[c] + r0 : NULL;
            int wd = width_of(&t->defs[c]);
            if (wd) {
                cols[c].values = t->fixed[c] + r0 * wd;
            } else if (pointer_form) {
                ptrs[c] = malloc((size_t)m * sizeof *ptrs[c] + 1);
                lens[c] = malloc((size_t)m * 4 + 1);
                for (int64_t i = 0; i < m; i++) {
                    ptrs[c][i] = t->data[c] + t->offsets[c][r0 + i];
                    lens[c][i] = (uint32_t)(t->offsets[c][r0 + i + 1] - t->offsets[c][r0 + i]);
                }
                cols[c].byte_values = ptrs[c];
                cols[c].byte_lengths = lens[c];
            } else {
                cols[c].values = t->data[c]; /* offsets index the whole buffer */
                cols[c].offsets = t->offsets[c] + r0;
            }
        }
        st = ftl_parquet_writer_write_row_group(w, m, cols);
        for (int c = 0; c < NCOLS; c++) {
            free(ptrs[c]);
            free(lens[c]);
        }
        r0 += m;
    }
    if (st == FTL_OK) st = ftl_parquet_writer_set_metadata(w, "k1", "v1");
    if (st == FTL_OK) st = ftl_parquet_writer_set_metadata(w, "k2", "v2");
    if (st == FTL_OK) st = ftl_parquet_writer_set_metadata(w, "k1", "v1 replaced");
    if (st != FTL_OK) {
        ftl_parquet_writer_abort(w);
        return st;
    }
    return ftl_parquet_writer_close(w);
}

/* colhash v1 straight from the input, per the README's definition. */
static void expected_hash(const table *t, int c, char sha[65], char nsha[65], int64_t *count) {
    ftl_sha256 h, n;
    ftl_sha256_init(&h);
    ftl_sha256_init(&n);
    int64_t k = 0, nulls = 0;
    int w = width_of(&t->defs[c]);
    for (int64_t r = 0; r < t->rows; r++) {
        if (!row_valid(t, c, r)) {
            uint8_t b[8];
            for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)r >> (8 * i));
            ftl_sha256_update(&n, b, 8);
            nulls++;
            continue;
        }
        k++;
        if (t->defs[c].type == FTL_PARQUET_BYTE_ARRAY || t->defs[c].type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY) {
            uint32_t len = w ? (uint32_t)w : (uint32_t)(t->offsets[c][r + 1] - t->offsets[c][r]);
            uint8_t lb[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
            ftl_sha256_update(&h, lb, 4);
            ftl_sha256_update(&h, w ? t->fixed[c] + r * w : t->data[c] + t->offsets[c][r], len);
        } else {
            ftl_sha256_update(&h, t->fixed[c] + r * w, (size_t)w);
        }
    }
    uint8_t d[32];
    ftl_sha256_final(&h, d);
    ftl_sha256_hex(d, sha);
    nsha[0] = '\0';
    if (nulls) {
        ftl_sha256_final(&n, d);
        ftl_sha256_hex(d, nsha);
    }
    *count = k;
}

/* Reads everything back and compares values, validity, checksums and statistics. */
static void check_file(const table *t, const char *path, ftl_parquet_codec codec) {
    ftl_parquet_file *f;
    REQUIRE_OK(ftl_parquet_open(path, &f));
    CHECK_EQ_INT(ftl_parquet_num_rows(f), t->rows);
    CHECK_EQ_INT(ftl_parquet_num_columns(f), NCOLS);
    CHECK_STR_EQ(ftl_parquet_created_by(f), "ftl version " FTL_VERSION);
    CHECK_STR_EQ(ftl_parquet_metadata_get(f, "k1"), "v1 replaced");
    CHECK_STR_EQ(ftl_parquet_metadata_get(f, "k2"), "v2");
    CHECK_EQ_INT(ftl_parquet_metadata_count(f), 2);
    CHECK_STR_EQ(ftl_parquet_metadata_key(f, 0), "k1");
    CHECK(ftl_parquet_metadata_get(f, "nope") == NULL);
    ftl_parquet_column_values v = {0};
    for (int c = 0; c < NCOLS; c++) {
        const ftl_parquet_column_info *ci = ftl_parquet_column(f, c);
        CHECK_STR_EQ(ci->name, t->defs[c].name);
        CHECK_EQ_INT(ci->type, t->defs[c].type);
        CHECK_EQ_INT(ci->optional, t->defs[c].optional);
        CHECK(!ci->nested);
        CHECK_EQ_INT(ci->utf8, t->defs[c].utf8);
        if (t->defs[c].utf8) CHECK_STR_EQ(ci->logical_type, "STRING");
        CHECK_EQ_INT(ftl_parquet_find_column(f, t->defs[c].name), c);
        int w = width_of(&t->defs[c]);
        ftl_parquet_colhash *h;
        REQUIRE_OK(ftl_parquet_colhash_init(&h, ci->type));
        int64_t r0 = 0, mismatches = 0;
        for (int g = 0; g < ftl_parquet_num_row_groups(f); g++) {
            ftl_parquet_chunk_info chunk;
            REQUIRE_OK(ftl_parquet_chunk_info_get(f, g, c, &chunk));
            CHECK_EQ_INT(chunk.codec, codec);
            CHECK(chunk.offset >= 4 && chunk.offset + chunk.length <= (int64_t)ftl_parquet_file_size(f));
            REQUIRE_OK(ftl_parquet_read_column(f, g, c, &v));
            CHECK_OK(ftl_parquet_colhash_update(h, &v));
            int64_t nulls = 0;
            for (int64_t i = 0; i < v.rows; i++) {
                int64_t r = r0 + i;
                bool valid = !v.validity || v.validity[i];
                nulls += !valid;
                if (valid != row_valid(t, c, r)) mismatches++;
                if (!valid) continue;
                if (w) {
                    if (memcmp((uint8_t *)v.values + i * w, t->fixed[c] + r * w, (size_t)w) != 0) mismatches++;
                } else {
                    int64_t len = t->offsets[c][r + 1] - t->offsets[c][r];
                    if (v.offsets[i + 1] - v.offsets[i] != len || memcmp(v.data + v.offsets[i], t->data[c] + t->offsets[c][r], (size_t)len) != 0)
                        mismatches++;
                }
            }
            CHECK_EQ_INT(v.null_count, nulls);
            CHECK(chunk.has_null_count && chunk.null_count == nulls);
            /* min/max statistics of numeric columns equal the input's */
            if (ci->type == FTL_PARQUET_INT32 && nulls < v.rows) {
                int32_t lo = INT32_MAX, hi = INT32_MIN, smin, smax;
                for (int64_t i = 0; i < v.rows; i++) {
                    if (!row_valid(t, c, r0 + i)) continue;
                    int32_t x;
                    memcpy(&x, t->fixed[c] + (r0 + i) * 4, 4);
                    lo = x < lo ? x : lo;
                    hi = x > hi ? x : hi;
                }
                REQUIRE(chunk.has_min_max && chunk.min_length == 4);
                memcpy(&smin, chunk.min_value, 4);
                memcpy(&smax, chunk.max_value, 4);
                CHECK_EQ_INT(smin, lo);
                CHECK_EQ_INT(smax, hi);
            }
            r0 += v.rows;
        }
        CHECK_EQ_INT(r0, t->rows);
        CHECK_EQ_INT(mismatches, 0);
        ftl_parquet_colhash_result res;
        ftl_parquet_colhash_final(h, &res);
        ftl_parquet_colhash_free(h);
        char sha[65], nsha[65];
        int64_t count;
        expected_hash(t, c, sha, nsha, &count);
        CHECK_STR_EQ(res.sha256, sha);
        CHECK_STR_EQ(res.nulls_sha256, nsha);
        CHECK_EQ_INT(res.count, count);
    }
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
}

TEST(parquet_roundtrip_every_type_codec_and_nullability) {
    const char *dir = ftl_test_scratch_dir();
    static const ftl_parquet_codec codecs[] = {FTL_PARQUET_CODEC_NONE, FTL_PARQUET_CODEC_SNAPPY, FTL_PARQUET_CODEC_GZIP, FTL_PARQUET_CODEC_ZSTD};
    static const int64_t groups[] = {1, 700, 37, 1500};
    for (int ci = 0; ci < 4; ci++)
        for (int opt = 0; opt < 2; opt++)
            for (int small = 0; small < 2; small++) {
                table t;
                make_table(&t, 2500, opt, 1000 + (uint64_t)(ci * 4 + opt * 2 + small), 40);
                ftl_parquet_writer_options o = {.codec = codecs[ci], .max_page_bytes = small ? 256 : 0, .no_page_crc = small && ci == 2};
                char *path = ftl_format("%s/t_%d_%d_%d.parquet", dir, ci, opt, small);
                ftl_status st = write_table(&t, path, &o, groups, 4, small);
                CHECK_OK(st);
                if (st == FTL_OK) check_file(&t, path, codecs[ci]);
                free(path);
                free_table(&t);
            }
}

static bool same_file(const char *a, const char *b) {
    uint8_t *x, *y;
    size_t nx, ny;
    if (ftl_read_file(a, &x, &nx) != FTL_OK) return false;
    if (ftl_read_file(b, &y, &ny) != FTL_OK) {
        free(x);
        return false;
    }
    bool same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

TEST(parquet_writer_is_deterministic_and_input_forms_agree) {
    const char *dir = ftl_test_scratch_dir();
    table t;
    make_table(&t, 3000, true, 7, 100);
    static const int64_t groups[] = {1024};
    ftl_parquet_writer_options o = {.codec = FTL_PARQUET_CODEC_ZSTD, .max_page_bytes = 4096};
    char *a = ftl_format("%s/a.parquet", dir), *b = ftl_format("%s/b.parquet", dir), *c = ftl_format("%s/c.parquet", dir);
    CHECK_OK(write_table(&t, a, &o, groups, 1, false));
    CHECK_OK(write_table(&t, b, &o, groups, 1, false));
    CHECK_OK(write_table(&t, c, &o, groups, 1, true)); /* pointers + lengths instead of offsets */
    CHECK(same_file(a, b));
    CHECK(same_file(a, c));
    free(a);
    free(b);
    free(c);
    free_table(&t);
}

TEST(parquet_writer_rejects_bad_definitions_and_cleans_up) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/x.parquet", dir);
    ftl_parquet_writer *w = NULL;
    ftl_parquet_column_def dup[2] = {{.name = "a", .type = FTL_PARQUET_INT32}, {.name = "a", .type = FTL_PARQUET_INT64}};
    CHECK(ftl_parquet_writer_open(path, dup, 2, NULL, &w) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "two columns named 'a'");
    ftl_parquet_column_def int96 = {.name = "t", .type = FTL_PARQUET_INT96};
    CHECK(ftl_parquet_writer_open(path, &int96, 1, NULL, &w) == FTL_E_INVALID_ARG);
    ftl_parquet_column_def flba = {.name = "v", .type = FTL_PARQUET_FIXED_LEN_BYTE_ARRAY};
    CHECK(ftl_parquet_writer_open(path, &flba, 1, NULL, &w) == FTL_E_INVALID_ARG);
    ftl_parquet_column_def utf8 = {.name = "u", .type = FTL_PARQUET_INT32, .utf8 = true};
    CHECK(ftl_parquet_writer_open(path, &utf8, 1, NULL, &w) == FTL_E_INVALID_ARG);
    ftl_parquet_writer_options lz4 = {.codec = FTL_PARQUET_CODEC_LZ4};
    ftl_parquet_column_def ok = {.name = "x", .type = FTL_PARQUET_INT32};
    CHECK(ftl_parquet_writer_open(path, &ok, 1, &lz4, &w) == FTL_E_INVALID_ARG);
    /* a validity array on a REQUIRED column is refused; abort leaves nothing behind */
    REQUIRE_OK(ftl_parquet_writer_open(path, &ok, 1, NULL, &w));
    int32_t vals[3] = {1, 2, 3};
    uint8_t valid[3] = {1, 0, 1};
    ftl_parquet_column_data d = {.values = vals, .validity = valid};
    CHECK(ftl_parquet_writer_write_row_group(w, 3, &d) == FTL_E_INVALID_ARG);
    ftl_parquet_writer_abort(w);
    CHECK(!ftl_path_exists(path));
    /* decreasing offsets are refused */
    ftl_parquet_column_def bytes = {.name = "b", .type = FTL_PARQUET_BYTE_ARRAY};
    REQUIRE_OK(ftl_parquet_writer_open(path, &bytes, 1, NULL, &w));
    int64_t offs[3] = {0, 5, 2};
    ftl_parquet_column_data bd = {.values = "hello", .offsets = offs};
    CHECK(ftl_parquet_writer_write_row_group(w, 2, &bd) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "row 1");
    ftl_parquet_writer_abort(w);
    /* the folder holds no temporaries */
    char *cmd = ftl_format("ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    CHECK_EQ_INT(n, 0);
    free(cmd);
    free(path);
}

TEST(parquet_zero_rows_and_large_values) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/empty.parquet", dir);
    ftl_parquet_column_def defs[2] = {{.name = "label", .type = FTL_PARQUET_INT32}, {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY, .optional = true}};
    ftl_parquet_writer *w;
    REQUIRE_OK(ftl_parquet_writer_open(path, defs, 2, NULL, &w));
    REQUIRE_OK(ftl_parquet_writer_close(w));
    ftl_parquet_file *f;
    REQUIRE_OK(ftl_parquet_open(path, &f));
    CHECK_EQ_INT(ftl_parquet_num_rows(f), 0);
    CHECK_EQ_INT(ftl_parquet_num_row_groups(f), 0);
    CHECK_EQ_INT(ftl_parquet_num_columns(f), 2);
    CHECK(ftl_parquet_read_column(f, 0, 0, &(ftl_parquet_column_values){0}) == FTL_E_INVALID_ARG);
    ftl_parquet_close(f);

    /* values bigger than a page get pages of their own; 3 MiB with 64 KiB pages */
    ftl_parquet_writer_options o = {.codec = FTL_PARQUET_CODEC_SNAPPY, .max_page_bytes = 65536};
    REQUIRE_OK(ftl_parquet_writer_open(path, defs, 2, &o, &w));
    enum { BIG = 3 << 20 };
    uint8_t *big = malloc(BIG);
    for (int i = 0; i < BIG; i++) big[i] = (uint8_t)(i * 2654435761u >> 13);
    const uint8_t *ptrs[4] = {big, NULL, big + 7, big};
    uint32_t lens[4] = {BIG, 0, 1000, 10};
    uint8_t valid[4] = {1, 0, 1, 1};
    int32_t labels[4] = {3, 1, 4, 1};
    ftl_parquet_column_data cols[2] = {{.values = labels}, {.byte_values = ptrs, .byte_lengths = lens, .validity = valid}};
    REQUIRE_OK(ftl_parquet_writer_write_row_group(w, 4, cols));
    REQUIRE_OK(ftl_parquet_writer_close(w));
    REQUIRE_OK(ftl_parquet_open(path, &f));
    ftl_parquet_column_values v = {0};
    REQUIRE_OK(ftl_parquet_read_column(f, 0, 1, &v));
    CHECK_EQ_INT(v.rows, 4);
    CHECK_EQ_INT(v.null_count, 1);
    CHECK(v.validity && v.validity[1] == 0);
    CHECK_EQ_INT(v.offsets[1] - v.offsets[0], BIG);
    CHECK(memcmp(v.data, big, BIG) == 0);
    CHECK_EQ_INT(v.offsets[2], v.offsets[1]);
    CHECK(memcmp(v.data + v.offsets[2], big + 7, 1000) == 0);
    CHECK_EQ_INT(v.data_size, BIG + 1010);
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
    free(big);
    free(path);
}

/* ---- concurrent reads: threads share one open file ---- */

typedef struct reader_job {
    ftl_parquet_file *f;
    int start, column;
    char (*hashes)[65];
    int failures;
} reader_job;

static void *read_all(void *arg) {
    reader_job *j = arg;
    ftl_parquet_column_values v = {0};
    int n = ftl_parquet_num_row_groups(j->f);
    for (int k = 0; k < 3 * n; k++) {
        int g = (j->start + k * 7) % n;
        ftl_parquet_colhash *h;
        ftl_parquet_colhash_result r;
        if (ftl_parquet_read_column(j->f, g, j->column, &v) != FTL_OK || ftl_parquet_colhash_init(&h, v.type) != FTL_OK) {
            j->failures++;
            continue;
        }
        ftl_parquet_colhash_update(h, &v);
        ftl_parquet_colhash_final(h, &r);
        ftl_parquet_colhash_free(h);
        if (strcmp(r.sha256, j->hashes[g]) != 0) j->failures++;
    }
    ftl_parquet_column_values_free(&v);
    return NULL;
}

TEST(parquet_concurrent_reads_of_one_file) {
    const char *dir = ftl_test_scratch_dir();
    table t;
    make_table(&t, 4000, true, 99, 3000);
    static const int64_t groups[] = {97};
    ftl_parquet_writer_options o = {.codec = FTL_PARQUET_CODEC_ZSTD, .max_page_bytes = 8192};
    char *path = ftl_format("%s/mt.parquet", dir);
    REQUIRE_OK(write_table(&t, path, &o, groups, 1, false));
    ftl_parquet_file *f;
    REQUIRE_OK(ftl_parquet_open(path, &f));
    int n = ftl_parquet_num_row_groups(f), col = ftl_parquet_find_column(f, "blob");
    char (*hashes)[65] = calloc((size_t)n, 65);
    ftl_parquet_column_values v = {0};
    for (int g = 0; g < n; g++) {
        ftl_parquet_colhash *h;
        ftl_parquet_colhash_result r;
        REQUIRE_OK(ftl_parquet_read_column(f, g, col, &v));
        REQUIRE_OK(ftl_parquet_colhash_init(&h, v.type));
        ftl_parquet_colhash_update(h, &v);
        ftl_parquet_colhash_final(h, &r);
        ftl_parquet_colhash_free(h);
        memcpy(hashes[g], r.sha256, 65);
    }
    ftl_parquet_column_values_free(&v);
    pthread_t th[4];
    reader_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (reader_job){f, i * 5, col, hashes, 0};
        pthread_create(&th[i], NULL, read_all, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[i].failures, 0);
    }
    ftl_parquet_close(f);
    free(hashes);
    free(path);
    free_table(&t);
}

/* Float statistics follow the spec: NaN ignored, a zero minimum is -0.0 and a zero maximum +0.0. */
static void float_stats(const char *path, const float *vals, int n, bool *has, float *lo, float *hi) {
    ftl_parquet_column_def def = {.name = "f", .type = FTL_PARQUET_FLOAT};
    ftl_parquet_writer *w;
    ftl_parquet_column_data d = {.values = vals};
    *has = false;
    if (ftl_parquet_writer_open(path, &def, 1, NULL, &w) != FTL_OK) return;
    ftl_parquet_writer_write_row_group(w, n, &d);
    if (ftl_parquet_writer_close(w) != FTL_OK) return;
    ftl_parquet_file *f;
    ftl_parquet_chunk_info ci;
    if (ftl_parquet_open(path, &f) != FTL_OK) return;
    if (ftl_parquet_chunk_info_get(f, 0, 0, &ci) == FTL_OK && ci.has_min_max && ci.min_length == 4 && ci.max_length == 4) {
        *has = true;
        memcpy(lo, ci.min_value, 4);
        memcpy(hi, ci.max_value, 4);
    }
    ftl_parquet_close(f);
}

TEST(parquet_float_statistics) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/f.parquet", dir);
    bool has;
    float lo, hi;
    const float a[] = {3.5f, -0.0f, 2.0f, NAN, -7.25f, 0.0f};
    float_stats(path, a, 6, &has, &lo, &hi);
    CHECK(has);
    CHECK(lo == -7.25f && hi == 3.5f);
    const float b[] = {0.0f, NAN, 0.0f};
    float_stats(path, b, 3, &has, &lo, &hi);
    CHECK(has && lo == 0 && signbit(lo) && hi == 0 && !signbit(hi));
    const float c[] = {NAN, NAN};
    float_stats(path, c, 2, &has, &lo, &hi);
    CHECK(!has);
    free(path);
}
