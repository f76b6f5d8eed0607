/* ftl_parquet_read_value keeps the page it read last: rows read in storage order pick from a page
 * decoded once. Every order of reading (storage order, reverse, random, two columns in turn with
 * one struct, one struct over two files opened at the same address) gives the values the writer
 * wrote, null or not, with the definition levels of an optional column. */
#include "test.h"
#include "ftl/parquet.h"
#include "util/alloc.h"
#include "util/rng.h"

#include <stdlib.h>

enum { ROWS = 300 };

typedef struct cells {
    uint8_t *data[ROWS];
    uint32_t len[ROWS];
    uint8_t valid[ROWS];
    int32_t number[ROWS];
} cells;

/* ROWS rows in 3 row groups, pages of about 2 KiB: byte arrays of 0-600 bytes, every 7th null. */
static bool write_table(const char *path, uint64_t seed, ftl_parquet_codec codec, cells *c) {
    ftl_rng rng;
    ftl_rng_seed(&rng, seed);
    for (int r = 0; r < ROWS; r++) {
        c->len[r] = (uint32_t)ftl_rng_below(&rng, 601);
        c->data[r] = malloc(c->len[r] ? c->len[r] : 1);
        for (uint32_t k = 0; k < c->len[r]; k++) c->data[r][k] = (uint8_t)ftl_rng_below(&rng, 256);
        c->valid[r] = r % 7 != 3;
        c->number[r] = (int32_t)(seed * 1000 + (uint64_t)r);
    }
    ftl_parquet_column_def defs[2] = {{.name = "blob", .type = FTL_PARQUET_BYTE_ARRAY, .optional = true},
                                      {.name = "n", .type = FTL_PARQUET_INT32}};
    ftl_parquet_writer_options o = {.codec = codec, .max_page_bytes = 2048};
    ftl_parquet_writer *w = NULL;
    if (ftl_parquet_writer_open(path, defs, 2, &o, &w) != FTL_OK) return false;
    for (int g = 0; g < 3; g++) {
        int first = g * ROWS / 3, rows = (g + 1) * ROWS / 3 - first;
        ftl_parquet_column_data cols[2] = {{.byte_values = (const uint8_t *const *)&c->data[first], .byte_lengths = &c->len[first],
                                            .validity = &c->valid[first]},
                                           {.values = &c->number[first]}};
        if (ftl_parquet_writer_write_row_group(w, rows, cols) != FTL_OK) return false;
    }
    return ftl_parquet_writer_close(w) == FTL_OK;
}

static void free_cells(cells *c) {
    for (int r = 0; r < ROWS; r++) free(c->data[r]);
}

/* Row r read through v equals what was written. */
static bool row_matches(ftl_parquet_file *f, int column, int r, ftl_parquet_value *v, const cells *c) {
    int g = 0;
    while ((g + 1) * ROWS / 3 <= r) g++;
    int64_t row = r - g * ROWS / 3;
    if (ftl_parquet_read_value(f, g, column, row, v) != FTL_OK) return false;
    if (column == 1) return !v->is_null && v->size == 4 && memcmp(v->data, &c->number[r], 4) == 0;
    if (!c->valid[r]) return v->is_null && v->def_level == 0;
    return !v->is_null && v->def_level == 1 && v->size == c->len[r] && (c->len[r] == 0 || memcmp(v->data, c->data[r], c->len[r]) == 0);
}

TEST(parquet_read_value_in_any_order_equals_what_was_written) {
    const char *d = ftl_test_scratch_dir();
    static const ftl_parquet_codec codecs[] = {FTL_PARQUET_CODEC_NONE, FTL_PARQUET_CODEC_SNAPPY, FTL_PARQUET_CODEC_ZSTD};
    for (size_t ci = 0; ci < 3; ci++) {
        char *path = ftl_format("%s/t%zu.parquet", d, ci);
        cells c;
        REQUIRE(write_table(path, 7 + ci, codecs[ci], &c));
        ftl_parquet_file *f = NULL;
        REQUIRE(ftl_parquet_open(path, &f) == FTL_OK);
        ftl_parquet_value v;
        memset(&v, 0, sizeof v);
        int bad = 0;
        for (int r = 0; r < ROWS; r++) bad += !row_matches(f, 0, r, &v, &c);          /* storage order */
        for (int r = ROWS - 1; r >= 0; r--) bad += !row_matches(f, 0, r, &v, &c);     /* reverse */
        ftl_rng rng;
        ftl_rng_seed(&rng, 99);
        for (int k = 0; k < 3 * ROWS; k++) bad += !row_matches(f, 0, (int)ftl_rng_below(&rng, ROWS), &v, &c); /* random */
        for (int r = 0; r < ROWS; r++) bad += !row_matches(f, r % 2, r, &v, &c);      /* two columns in turn */
        for (int r = 0; r < ROWS; r++) bad += !row_matches(f, 0, r / 2, &v, &c);     /* each row twice */
        CHECK_EQ_INT(bad, 0);
        ftl_parquet_value_free(&v);
        ftl_parquet_close(f);
        free_cells(&c);
        free(path);
    }
}

TEST(parquet_read_value_struct_kept_across_files) {
    const char *d = ftl_test_scratch_dir();
    char *a = ftl_format("%s/a.parquet", d), *b = ftl_format("%s/b.parquet", d);
    cells ca, cb;
    REQUIRE(write_table(a, 1, FTL_PARQUET_CODEC_NONE, &ca) && write_table(b, 2, FTL_PARQUET_CODEC_NONE, &cb));
    ftl_parquet_value v;
    memset(&v, 0, sizeof v);
    int bad = 0;
    for (int round = 0; round < 4; round++) { /* closed and opened again: possibly at the same address */
        ftl_parquet_file *f = NULL;
        REQUIRE(ftl_parquet_open(round % 2 ? b : a, &f) == FTL_OK);
        for (int r = 10; r < 14; r++) bad += !row_matches(f, 0, r, &v, round % 2 ? &cb : &ca);
        ftl_parquet_close(f);
    }
    CHECK_EQ_INT(bad, 0);
    ftl_parquet_value_free(&v);
    free_cells(&ca);
    free_cells(&cb);
    free(a), free(b);
}
