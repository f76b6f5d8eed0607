/* ftl's reader on struct columns written by DuckDB and arrow-rs (tests/ref/gen_parquet_nested.sh):
 * every leaf, value for value, with its validity and definition level, against DuckDB's reading
 * of the same file (tests/tools/parquet_nested.mjs); ftl_parquet_read_value of every row against
 * the whole-chunk read; page maps from the OffsetIndex against the header walk; concurrent
 * single-value reads on one handle; leaves of lists refused by name; definition levels out of
 * range, truncations and bit flips as clean FTL_E_FORMAT errors. */
#include "test.h"
#include "ftl/parquet.h"
#include "parquet/page_map.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/sha256.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static char *nested_path(const char *name, const char *ext) {
    return ftl_format("%s/ref/parquet_nested/%s%s", ftl_test_build_dir(), name, ext);
}

static ftl_json *load_json(const char *path) {
    uint8_t *text;
    size_t n;
    if (ftl_read_file(path, &text, &n) != FTL_OK) return NULL;
    ftl_json *doc = NULL;
    if (ftl_json_parse((const char *)text, n, &doc) != FTL_OK) doc = NULL;
    free(text);
    return doc;
}

/* The manifest's file names (NULL-terminated; free with free_names), or NULL after a failure. */
static char **manifest(void) {
    char *path = nested_path("manifest", ".txt");
    uint8_t *text;
    size_t n;
    char **names = NULL;
    if (ftl_read_file(path, &text, &n) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_parquet_nested.sh (make test does)", path);
    } else {
        int count = 0;
        names = calloc(n + 2, sizeof *names);
        for (size_t i = 0, start = 0; i <= n; i++)
            if (i == n || text[i] == '\n') {
                if (i > start) names[count++] = ftl_format("%.*s", (int)(i - start), (const char *)text + start);
                start = i + 1;
            }
        free(text);
    }
    free(path);
    return names;
}

static void free_names(char **names) {
    for (int i = 0; names && names[i]; i++) free(names[i]);
    free(names);
}

/* Does (data, size) equal DuckDB's rendering: PLAIN bytes in hex, or "sha256:HEX" of them? */
static bool same_value(const char *want, const uint8_t *data, int64_t size) {
    if (strncmp(want, "sha256:", 7) == 0) {
        ftl_sha256 h;
        uint8_t digest[32];
        char hex[65];
        ftl_sha256_init(&h);
        ftl_sha256_update(&h, data, (size_t)size);
        ftl_sha256_final(&h, digest);
        ftl_sha256_hex(digest, hex);
        return size > 64 && strcmp(hex, want + 7) == 0;
    }
    if ((int64_t)strlen(want) != 2 * size) return false;
    for (int64_t i = 0; i < size; i++) {
        unsigned b;
        if (sscanf(want + 2 * i, "%2x", &b) != 1 || b != data[i]) return false;
    }
    return true;
}

/* Row i's bytes in a decoded chunk. */
static void chunk_value(const ftl_parquet_column_values *v, int64_t i, const uint8_t **data, int64_t *size) {
    if (v->type == FTL_PARQUET_BYTE_ARRAY) {
        *data = v->data + v->offsets[i];
        *size = v->offsets[i + 1] - v->offsets[i];
    } else {
        *data = (const uint8_t *)v->values + (size_t)i * (size_t)v->fixed_length;
        *size = v->fixed_length;
    }
}

/* One leaf of one file against DuckDB: the chunk reads and a single-value read of every row.
 * Returns false after recording the first mismatch. */
static bool check_leaf(ftl_parquet_file *f, const char *file, const char *leaf, const ftl_json *ref) {
    int c = ftl_parquet_find_column(f, leaf);
    if (c < 0) return ftl_test_fail(__FILE__, __LINE__, "%s: leaf %s not found", file, leaf);
    const ftl_parquet_column_info *ci = ftl_parquet_column(f, c);
    double max_def = -1;
    ftl_json_get_number(ref, "max_def", &max_def);
    const ftl_json *defs = ftl_json_get(ref, "def"), *vals = ftl_json_get(ref, "values");
    if (!defs || !vals || defs->count != vals->count || (int64_t)defs->count != ftl_parquet_num_rows(f))
        return ftl_test_fail(__FILE__, __LINE__, "%s: %s: reference has %zu rows, the file %lld", file, leaf, defs ? defs->count : 0,
                             (long long)ftl_parquet_num_rows(f));
    if (ci->max_definition_level != (int)max_def || ci->repeated || ci->optional != (max_def > 0) || ci->nested != (strchr(leaf, '.') != NULL))
        return ftl_test_fail(__FILE__, __LINE__, "%s: %s: ftl sees max level %d (repeated %d, optional %d, nested %d), DuckDB's schema %g",
                             file, leaf, ci->max_definition_level, ci->repeated, ci->optional, ci->nested, max_def);
    ftl_parquet_column_values v = {0};
    ftl_parquet_value one = {0};
    bool ok = true;
    int64_t base = 0;
    for (int g = 0; ok && g < ftl_parquet_num_row_groups(f); g++) {
        if (ftl_parquet_read_column(f, g, c, &v) != FTL_OK) {
            ok = ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
            break;
        }
        if ((v.def_levels == NULL) != (max_def == 0)) ok = ftl_test_fail(__FILE__, __LINE__, "%s: %s: def_levels presence", file, leaf);
        for (int64_t i = 0; ok && i < v.rows; i++) {
            int want_def = (int)defs->items[base + i].number;
            bool want_null = want_def < (int)max_def;
            int got_def = v.def_levels ? v.def_levels[i] : 0;
            bool got_null = v.validity && !v.validity[i];
            const uint8_t *data;
            int64_t size;
            chunk_value(&v, i, &data, &size);
            if (got_def != want_def || got_null != want_null ||
                (!want_null && (vals->items[base + i].type != FTL_JSON_STRING || !same_value(vals->items[base + i].string, data, size)))) {
                ok = ftl_test_fail(__FILE__, __LINE__, "%s: %s: row group %d row %lld: ftl level %d null %d (%lld bytes), DuckDB level %d value %s",
                                   file, leaf, g, (long long)i, got_def, got_null, (long long)size, want_def,
                                   vals->items[base + i].type == FTL_JSON_STRING ? vals->items[base + i].string : "null");
                break;
            }
            /* the same row read alone */
            if (ftl_parquet_read_value(f, g, c, i, &one) != FTL_OK) {
                ok = ftl_test_fail(__FILE__, __LINE__, "%s: %s: read_value(%d, %lld): %s", file, leaf, g, (long long)i, ftl_last_error());
            } else if (one.is_null != want_null || one.def_level != want_def ||
                       (!want_null && (one.size != size || (size && memcmp(one.data, data, (size_t)size) != 0))) ||
                       (want_null && (one.data || one.size))) {
                ok = ftl_test_fail(__FILE__, __LINE__, "%s: %s: read_value(%d, %lld): null %d level %d %lld bytes, chunk read: null %d level %d %lld bytes",
                                   file, leaf, g, (long long)i, one.is_null, one.def_level, (long long)one.size, want_null, want_def, (long long)size);
            }
        }
        base += v.rows;
    }
    ftl_parquet_value_free(&one);
    ftl_parquet_column_values_free(&v);
    return ok;
}

TEST(parquet_nested_leaves_equal_duckdb) {
    char **names = manifest();
    if (!names) return;
    int files = 0, leaves = 0, lists = 0, deep = 0, duckdb = 0, arrow = 0;
    for (int k = 0; names[k]; k++) {
        char *pq = nested_path(names[k], ".parquet"), *js = nested_path(names[k], ".json");
        ftl_json *doc = load_json(js);
        ftl_parquet_file *f = NULL;
        if (!doc) {
            ftl_test_fail(__FILE__, __LINE__, "%s: missing or unreadable", js);
        } else if (ftl_parquet_open(pq, &f) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
        } else {
            files++;
            const char *writer = ftl_json_get_string(doc, "writer");
            duckdb += writer && strcmp(writer, "duckdb") == 0;
            arrow += writer && strcmp(writer, "arrow-rs") == 0;
            const ftl_json *ls = ftl_json_get(doc, "leaves");
            for (size_t i = 0; ls && i < ls->count; i++) {
                double md = 0;
                ftl_json_get_number(&ls->items[i], "max_def", &md);
                deep += md >= 2;
                leaves += check_leaf(f, names[k], ls->keys[i], &ls->items[i]);
            }
            /* leaves of lists and maps: listed, refused by name, for both kinds of read */
            const ftl_json *rep = ftl_json_get(doc, "repeated");
            for (size_t i = 0; rep && i < rep->count; i++) {
                int c = ftl_parquet_find_column(f, rep->items[i].string);
                ftl_parquet_column_values v = {0};
                ftl_parquet_value one = {0};
                if (c < 0 || !ftl_parquet_column(f, c)->repeated) {
                    ftl_test_fail(__FILE__, __LINE__, "%s: list leaf %s not listed as repeated", names[k], rep->items[i].string);
                    continue;
                }
                lists++;
                ftl_status st = ftl_parquet_read_column(f, 0, c, &v);
                CHECK(st == FTL_E_UNSUPPORTED);
                CHECK_CONTAINS(ftl_last_error(), rep->items[i].string);
                CHECK_CONTAINS(ftl_last_error(), "not lists");
                CHECK(ftl_parquet_read_value(f, 0, c, 0, &one) == FTL_E_UNSUPPORTED);
                CHECK_CONTAINS(ftl_last_error(), rep->items[i].string);
                ftl_parquet_column_values_free(&v);
                ftl_parquet_value_free(&one);
            }
        }
        ftl_parquet_close(f);
        ftl_json_free(doc);
        free(pq);
        free(js);
    }
    free_names(names);
    /* the matrix must be there: both writers, dozens of leaves, deep levels, lists and maps */
    CHECK(files >= 10 && duckdb >= 3 && arrow >= 7);
    CHECK(leaves >= 80);
    CHECK(deep >= 30);
    CHECK(lists >= 8);
}

/* Page maps from the OffsetIndex (arrow-rs writes one) equal the header walk's. */
TEST(parquet_nested_page_maps) {
    char **names = manifest();
    if (!names) return;
    int indexed = 0, walked = 0, chunks = 0;
    for (int k = 0; names[k]; k++) {
        char *pq = nested_path(names[k], ".parquet");
        ftl_parquet_file *f = NULL;
        if (ftl_parquet_open(pq, &f) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
            free(pq);
            continue;
        }
        for (int g = 0; g < ftl_parquet_num_row_groups(f); g++)
            for (int c = 0; c < ftl_parquet_num_columns(f); c++) {
                if (f->columns[c].info.repeated) continue;
                pq_chunk_ctx ctx = {.f = f, .row_group = g, .column = c, .col = &f->columns[c], .chunk = &f->md.row_groups[g].chunks[c]};
                pq_page_map *a = NULL, *b = NULL;
                if (pq_page_map_build(&ctx, true, &a) != FTL_OK || pq_page_map_build(&ctx, false, &b) != FTL_OK) {
                    ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
                } else {
                    chunks++;
                    indexed += a->from_offset_index;
                    walked += !b->from_offset_index;
                    bool same = a->page_count == b->page_count && a->has_dictionary == b->has_dictionary &&
                                (!a->has_dictionary || (a->dict.offset == b->dict.offset && a->dict.length == b->dict.length));
                    for (int64_t p = 0; same && p < a->page_count; p++)
                        same = a->pages[p].offset == b->pages[p].offset && a->pages[p].length == b->pages[p].length &&
                               a->pages[p].first_row == b->pages[p].first_row;
                    if (!same)
                        ftl_test_fail(__FILE__, __LINE__, "%s: row group %d column %s: OffsetIndex map (%lld pages) differs from the walk (%lld)",
                                      names[k], g, f->columns[c].info.name, (long long)a->page_count, (long long)b->page_count);
                }
                pq_page_map_free(a);
                pq_page_map_free(b);
            }
        ftl_parquet_close(f);
        free(pq);
    }
    free_names(names);
    CHECK(chunks >= 100);
    CHECK(indexed >= 50); /* arrow-rs's files have offset indexes */
    CHECK(indexed < chunks && walked == chunks);
}

/* Several threads read single values of one handle at once, in their own shuffled orders, from
 * a fresh handle (so they race to build the page maps and the dictionaries). */
typedef struct reader_job {
    ftl_parquet_file *f;
    int column;
    const ftl_parquet_column_values *want; /* per row group */
    uint64_t seed;
    int mismatches, errors;
} reader_job;

static void *read_values(void *arg) {
    reader_job *j = arg;
    ftl_parquet_value one = {0};
    ftl_rng rng;
    ftl_rng_seed(&rng, j->seed);
    for (int g = 0; g < ftl_parquet_num_row_groups(j->f); g++) {
        int64_t rows = ftl_parquet_row_group_rows(j->f, g);
        for (int64_t k = 0; k < rows; k++) {
            int64_t i = (int64_t)ftl_rng_below(&rng, (uint64_t)rows);
            const ftl_parquet_column_values *w = &j->want[g];
            const uint8_t *data;
            int64_t size;
            chunk_value(w, i, &data, &size);
            bool null = w->validity && !w->validity[i];
            if (ftl_parquet_read_value(j->f, g, j->column, i, &one) != FTL_OK) j->errors++;
            else if (one.is_null != null || (!null && (one.size != size || memcmp(one.data, data, (size_t)size) != 0))) j->mismatches++;
        }
    }
    ftl_parquet_value_free(&one);
    return NULL;
}

TEST(parquet_nested_read_value_threads) {
    static const char *const files[] = {"arrow_images_v1_dict", "arrow_images_v2", "duckdb_structs_v1"};
    for (int k = 0; k < 3; k++) {
        char *pq = nested_path(files[k], ".parquet");
        ftl_parquet_file *f = NULL, *fresh = NULL;
        if (ftl_parquet_open(pq, &f) != FTL_OK || ftl_parquet_open(pq, &fresh) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
        } else {
            int c = ftl_parquet_find_column(f, "image.bytes");
            int groups = ftl_parquet_num_row_groups(f);
            ftl_parquet_column_values *want = calloc((size_t)groups, sizeof *want);
            bool ok = c >= 0;
            for (int g = 0; ok && g < groups; g++) ok = ftl_parquet_read_column(f, g, c, &want[g]) == FTL_OK;
            CHECK(ok);
            enum { THREADS = 4 };
            reader_job jobs[THREADS];
            pthread_t t[THREADS];
            for (int i = 0; ok && i < THREADS; i++) {
                jobs[i] = (reader_job){.f = fresh, .column = c, .want = want, .seed = 17 + (uint64_t)i};
                CHECK(pthread_create(&t[i], NULL, read_values, &jobs[i]) == 0);
            }
            for (int i = 0; ok && i < THREADS; i++) {
                pthread_join(t[i], NULL);
                CHECK_EQ_INT(jobs[i].errors, 0);
                CHECK_EQ_INT(jobs[i].mismatches, 0);
            }
            for (int g = 0; g < groups; g++) ftl_parquet_column_values_free(&want[g]);
            free(want);
        }
        ftl_parquet_close(fresh);
        ftl_parquet_close(f);
        free(pq);
    }
}

static bool write_bytes(const char *path, const uint8_t *data, size_t n) {
    unlink(path);
    FILE *fp = fopen(path, "wb");
    if (!fp) return false;
    bool ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

/* Reads every leaf outside lists whole and a few rows alone; the first error, or FTL_OK. */
static ftl_status read_leaves(const char *path, bool verify_crc) {
    ftl_parquet_file *f;
    ftl_status st = ftl_parquet_open(path, &f);
    if (st != FTL_OK) return st;
    ftl_parquet_set_verify_crc(f, verify_crc);
    ftl_parquet_column_values v = {0};
    ftl_parquet_value one = {0};
    for (int g = 0; g < ftl_parquet_num_row_groups(f) && st == FTL_OK; g++)
        for (int c = 0; c < ftl_parquet_num_columns(f) && st == FTL_OK; c++) {
            if (ftl_parquet_column(f, c)->repeated) continue;
            st = ftl_parquet_read_column(f, g, c, &v);
            int64_t rows = ftl_parquet_row_group_rows(f, g);
            for (int64_t r = 0; r < rows && st == FTL_OK; r += 1 + rows / 5) st = ftl_parquet_read_value(f, g, c, r, &one);
            if (st == FTL_OK && rows > 0) st = ftl_parquet_read_value(f, g, c, rows - 1, &one);
        }
    ftl_parquet_value_free(&one);
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
    return st;
}

/* The first data page of leaf `leaf` in row group 0: the file offset of its definition levels'
 * RLE data and their byte length. */
static bool find_levels(const char *path, const char *leaf, size_t *at, size_t *len, int *max_def) {
    ftl_parquet_file *f;
    if (ftl_parquet_open(path, &f) != FTL_OK) return false;
    int c = ftl_parquet_find_column(f, leaf);
    bool ok = false;
    if (c >= 0) {
        pq_chunk_ctx ctx = {.f = f, .row_group = 0, .column = c, .col = &f->columns[c], .chunk = &f->md.row_groups[0].chunks[c]};
        pq_page_map *m = NULL;
        uint8_t head[256];
        if (pq_page_map_build(&ctx, false, &m) == FTL_OK && m->page_count > 0 && m->pages[0].length >= 16 &&
            pq_pread_full(f, head, sizeof head < (size_t)m->pages[0].length ? sizeof head : (size_t)m->pages[0].length,
                          (uint64_t)m->pages[0].offset) == FTL_OK) {
            pq_page_header h;
            size_t hs;
            const char *err;
            size_t got = sizeof head < (size_t)m->pages[0].length ? sizeof head : (size_t)m->pages[0].length;
            if (pq_parse_page_header(head, got, &h, &hs, &err) && f->md.row_groups[0].chunks[c].codec == FTL_PARQUET_CODEC_NONE) {
                *max_def = f->columns[c].info.max_definition_level;
                if (h.type == PQ_DATA_PAGE_V2) { /* levels uncompressed right after the header */
                    *at = (size_t)m->pages[0].offset + hs;
                    *len = (size_t)h.def_length;
                    ok = true;
                } else if (hs + 4 <= got) { /* v1: a 4-byte length, then the levels */
                    *at = (size_t)m->pages[0].offset + hs + 4;
                    *len = (size_t)head[hs] | (size_t)head[hs + 1] << 8 | (size_t)head[hs + 2] << 16 | (size_t)head[hs + 3] << 24;
                    ok = true;
                }
            }
        }
        pq_page_map_free(m);
    }
    ftl_parquet_close(f);
    return ok;
}

/* Definition levels above the column's maximum (a struct's `bytes` at level 2 stored as 3, which
 * 2 bits can hold) in a v1 (DuckDB) and a v2 (arrow-rs) page: FTL_E_FORMAT naming the file, row
 * group, column and page, for whole-chunk and single-value reads. */
TEST(parquet_nested_levels_out_of_range) {
    static const char *const files[] = {"duckdb_images", "arrow_structs_v2_delta"};
    const char *dir = ftl_test_scratch_dir();
    for (int k = 0; k < 2; k++) {
        char *src = nested_path(files[k], ".parquet"), *dst = ftl_format("%s/%s_levels.parquet", dir, files[k]);
        size_t at = 0, len = 0;
        int max_def = 0;
        uint8_t *data;
        size_t n;
        if (!find_levels(src, "image.bytes", &at, &len, &max_def) || ftl_read_file(src, &data, &n) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s: no uncompressed page of image.bytes found (%s)", src, ftl_last_error());
            free(src);
            free(dst);
            continue;
        }
        CHECK_EQ_INT(max_def, 2);
        /* one RLE run of level 3 for the page's values (a 2-byte varint count, then the value) */
        REQUIRE(len >= 3 && at + len <= n);
        data[at] = 0x80 | (uint8_t)((1000 << 1) & 0x7f);
        data[at + 1] = (uint8_t)((1000 << 1) >> 7);
        data[at + 2] = 3;
        REQUIRE(write_bytes(dst, data, n));
        ftl_parquet_file *f;
        REQUIRE_OK(ftl_parquet_open(dst, &f));
        ftl_parquet_set_verify_crc(f, false); /* the levels are what is wrong, not the bytes */
        int c = ftl_parquet_find_column(f, "image.bytes");
        ftl_parquet_column_values v = {0};
        ftl_parquet_value one = {0};
        CHECK(ftl_parquet_read_column(f, 0, c, &v) == FTL_E_FORMAT);
        CHECK_CONTAINS(ftl_last_error(), dst);
        CHECK_CONTAINS(ftl_last_error(), "row group 0, column 'image.bytes': page at offset");
        CHECK_CONTAINS(ftl_last_error(), "definition level 3 of value 0 is above the column's maximum 2");
        CHECK(ftl_parquet_read_value(f, 0, c, 0, &one) == FTL_E_FORMAT);
        CHECK_CONTAINS(ftl_last_error(), "above the column's maximum 2");
        CHECK(one.is_null && !one.data);
        ftl_parquet_value_free(&one);
        ftl_parquet_column_values_free(&v);
        ftl_parquet_close(f);
        free(data);
        free(src);
        free(dst);
    }
}

/* Truncations and seeded bit flips of nested files: a clean error naming the file, or data;
 * never a crash (this also runs under ASan+UBSan). */
TEST(parquet_nested_corrupt_files) {
    static const char *const files[] = {"duckdb_structs_v1", "arrow_structs_v1_dict", "arrow_structs_v2_plain"};
    const char *dir = ftl_test_scratch_dir();
    char *dst = ftl_format("%s/cut.parquet", dir);
    for (int k = 0; k < 3; k++) {
        char *src = nested_path(files[k], ".parquet");
        uint8_t *data;
        size_t n;
        if (ftl_read_file(src, &data, &n) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_parquet_nested.sh", src);
            free(src);
            continue;
        }
        CHECK_OK(read_leaves(src, true));
        int errors = 0, cases = 0;
        for (size_t len = 0; len < n; len += len < 32 || len > n - 32 ? 1 : 997) {
            REQUIRE(write_bytes(dst, data, len));
            ftl_status st = read_leaves(dst, true);
            cases++;
            errors += st != FTL_OK;
            if (st != FTL_OK && !strstr(ftl_last_error(), dst)) ftl_test_fail(__FILE__, __LINE__, "error without the file name: %s", ftl_last_error());
        }
        CHECK(cases > 60 && errors == cases);
        ftl_rng rng;
        ftl_rng_seed(&rng, 300 + (uint64_t)k);
        errors = 0;
        for (int i = 0; i < 150; i++) {
            size_t pos = 4 + (size_t)ftl_rng_below(&rng, n - 12);
            uint8_t bit = (uint8_t)(1u << ftl_rng_below(&rng, 8));
            data[pos] ^= bit;
            REQUIRE(write_bytes(dst, data, n));
            ftl_status st = read_leaves(dst, false);
            if (st != FTL_OK) {
                errors++;
                if (!ftl_last_error()[0]) ftl_test_fail(__FILE__, __LINE__, "error without a message (flip at %zu)", pos);
            }
            data[pos] ^= bit;
        }
        CHECK(errors > 0);
        free(data);
        free(src);
    }
    free(dst);
}

/* Single-value reads against whole-chunk reads on every file of the flat interop matrix
 * (tests/ref/gen_parquet.sh: DuckDB, arrow-rs and hyparquet, every codec, dictionary with
 * fallback, DELTA_*, BYTE_STREAM_SPLIT, RLE booleans, v1 and v2 pages, nulls): every 23rd row and
 * the last of each row group, every column. */
TEST(parquet_read_value_matches_chunk_reads_on_reference_files) {
    char *path = ftl_format("%s/ref/parquet/manifest.txt", ftl_test_build_dir());
    uint8_t *text;
    size_t n;
    if (ftl_read_file(path, &text, &n) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_parquet.sh (make test does)", path);
        free(path);
        return;
    }
    int files = 0, reads = 0, mismatches = 0;
    ftl_parquet_column_values v = {0};
    ftl_parquet_value one = {0};
    for (size_t i = 0, start = 0; i <= n; i++) {
        if (i < n && text[i] != '\n') continue;
        if (i == start) {
            start = i + 1;
            continue;
        }
        char *pq = ftl_format("%s/ref/parquet/%.*s.parquet", ftl_test_build_dir(), (int)(i - start), (const char *)text + start);
        start = i + 1;
        ftl_parquet_file *f = NULL;
        if (ftl_parquet_open(pq, &f) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
            free(pq);
            continue;
        }
        files++;
        for (int g = 0; g < ftl_parquet_num_row_groups(f); g++)
            for (int c = 0; c < ftl_parquet_num_columns(f); c++) {
                if (ftl_parquet_column(f, c)->repeated) continue;
                if (ftl_parquet_read_column(f, g, c, &v) != FTL_OK) {
                    ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
                    continue;
                }
                for (int64_t r = 0; r < v.rows; r = r + 23 < v.rows || r == v.rows - 1 ? r + 23 : v.rows - 1) {
                    const uint8_t *data;
                    int64_t size;
                    chunk_value(&v, r, &data, &size);
                    bool null = v.validity && !v.validity[r];
                    reads++;
                    if (ftl_parquet_read_value(f, g, c, r, &one) != FTL_OK || one.is_null != null ||
                        (!null && (one.size != size || (size && memcmp(one.data, data, (size_t)size) != 0)))) {
                        if (!mismatches++)
                            ftl_test_fail(__FILE__, __LINE__, "%s: row group %d column %s row %lld: read_value differs (%s)", pq, g,
                                          ftl_parquet_column(f, c)->name, (long long)r, ftl_last_error());
                    }
                }
            }
        ftl_parquet_close(f);
        free(pq);
    }
    ftl_parquet_value_free(&one);
    ftl_parquet_column_values_free(&v);
    free(text);
    free(path);
    CHECK_EQ_INT(mismatches, 0);
    CHECK(files >= 60 && reads > 10000);
}
