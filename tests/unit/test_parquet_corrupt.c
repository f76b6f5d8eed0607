/* Corrupt input: truncations at many offsets, seeded bit flips in footers, page headers and page
 * data, overwritten footer bytes, files that shrink while open. Every case must end in a clean
 * error with a message naming the file, or in correct data; never a crash or an out-of-bounds
 * read (this file also runs under ASan+UBSan). ftl's own files carry page CRCs, so there a flip
 * anywhere in the pages must be an error or leave the data as it was. */
#include "test.h"
#include "ftl/parquet.h"
#include "parquet/thrift.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/rng.h"

#include <stdlib.h>
#include <unistd.h>

enum { MAX_COLS = 16 };

typedef struct file_hashes {
    int columns;
    char sha[MAX_COLS][65];
    int64_t count[MAX_COLS];
} file_hashes;

/* Opens and reads every readable column (page CRCs checked or not); FTL_OK with the checksums, or
 * the first error. */
static ftl_status read_all_columns(const char *path, bool verify_crc, file_hashes *out) {
    ftl_parquet_file *f;
    memset(out, 0, sizeof *out);
    ftl_status st = ftl_parquet_open(path, &f);
    if (st != FTL_OK) return st;
    ftl_parquet_set_verify_crc(f, verify_crc);
    ftl_parquet_column_values v = {0};
    out->columns = ftl_parquet_num_columns(f);
    for (int c = 0; c < out->columns && c < MAX_COLS && st == FTL_OK; c++) {
        const ftl_parquet_column_info *ci = ftl_parquet_column(f, c);
        if (ci->repeated) continue;
        ftl_parquet_colhash *h;
        st = ftl_parquet_colhash_init(&h, ci->type);
        if (st != FTL_OK) {
            st = FTL_OK; /* INT96 after a flipped type: nothing to hash */
            continue;
        }
        for (int g = 0; g < ftl_parquet_num_row_groups(f) && st == FTL_OK; g++) {
            st = ftl_parquet_read_column(f, g, c, &v);
            if (st == FTL_OK) st = ftl_parquet_colhash_update(h, &v);
        }
        ftl_parquet_colhash_result r;
        ftl_parquet_colhash_final(h, &r);
        ftl_parquet_colhash_free(h);
        memcpy(out->sha[c], r.sha256, 65);
        out->count[c] = r.count;
    }
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
    return st;
}

static ftl_status read_everything(const char *path, file_hashes *out) { return read_all_columns(path, true, out); }

static bool same_hashes(const file_hashes *a, const file_hashes *b) {
    if (a->columns != b->columns) return false;
    for (int c = 0; c < a->columns && c < MAX_COLS; c++)
        if (strcmp(a->sha[c], b->sha[c]) != 0 || a->count[c] != b->count[c]) return false;
    return true;
}

static bool write_bytes(const char *path, const uint8_t *data, size_t n) {
    /* unlink first: ext4 flushes a file truncated and rewritten in place (auto_da_alloc), which
     * made thousands of rewrites wait for the disk */
    unlink(path);
    FILE *fp = fopen(path, "wb");
    if (!fp) return false;
    bool ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

/* An ftl file with optional columns, nulls, several row groups and small pages. */
static char *make_ftl_file(const char *dir, ftl_parquet_codec codec) {
    char *path = ftl_format("%s/src_%d.parquet", dir, (int)codec);
    ftl_parquet_column_def defs[4] = {
        {.name = "label", .type = FTL_PARQUET_INT32},
        {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY, .optional = true},
        {.name = "path", .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = true},
        {.name = "score", .type = FTL_PARQUET_DOUBLE, .optional = true},
    };
    ftl_parquet_writer_options o = {.codec = codec, .max_page_bytes = 300};
    ftl_parquet_writer *w;
    if (ftl_parquet_writer_open(path, defs, 4, &o, &w) != FTL_OK) return path;
    enum { ROWS = 60 };
    int32_t labels[ROWS];
    double scores[ROWS];
    uint8_t valid[ROWS], img[ROWS * 24];
    int64_t ioff[ROWS + 1], poff[ROWS + 1];
    char paths[ROWS * 16];
    ioff[0] = poff[0] = 0;
    for (int i = 0; i < ROWS; i++) {
        labels[i] = i % 5;
        scores[i] = i * 0.25;
        valid[i] = i % 4 != 1;
        for (int k = 0; k < 24; k++) img[i * 24 + k] = (uint8_t)(i * 31 + k);
        ioff[i + 1] = ioff[i] + 24;
        int n = snprintf(paths + poff[i], 16, "c%d/%d.png", i % 5, i);
        poff[i + 1] = poff[i] + n;
    }
    for (int g = 0; g < 3; g++) {
        int r0 = g * 20;
        int64_t io[21], po[21];
        for (int i = 0; i <= 20; i++) {
            io[i] = ioff[r0 + i] - ioff[r0];
            po[i] = poff[r0 + i] - poff[r0];
        }
        ftl_parquet_column_data cols[4] = {
            {.values = labels + r0},
            {.values = img + ioff[r0], .offsets = io, .validity = valid + r0},
            {.values = paths + poff[r0], .offsets = po},
            {.values = scores + r0, .validity = valid + r0},
        };
        if (ftl_parquet_writer_write_row_group(w, 20, cols) != FTL_OK) {
            ftl_parquet_writer_abort(w);
            return path;
        }
    }
    ftl_parquet_writer_set_metadata(w, "ftl.classes", "[\"a\",\"b\",\"c\",\"d\",\"e\"]");
    ftl_parquet_writer_close(w);
    return path;
}

static uint32_t footer_start(const uint8_t *data, size_t n) {
    uint32_t len = (uint32_t)data[n - 8] | (uint32_t)data[n - 7] << 8 | (uint32_t)data[n - 6] << 16 | (uint32_t)data[n - 5] << 24;
    return (uint32_t)(n - 8 - len);
}

/* Truncations at every offset: an error naming the file, except when the cut happens to end on
 * bytes that look like a footer (then anything but a crash). */
static void check_truncations(const char *src, const char *dst, size_t step) {
    uint8_t *data;
    size_t n;
    REQUIRE_OK(ftl_read_file(src, &data, &n));
    int errors = 0, cases = 0;
    for (size_t len = 0; len < n; len += (len < 64 || len > n - 64) ? 1 : step) {
        REQUIRE(write_bytes(dst, data, len));
        file_hashes h;
        ftl_status st = read_everything(dst, &h);
        cases++;
        if (st != FTL_OK) {
            errors++;
            if (!strstr(ftl_last_error(), dst)) ftl_test_fail(__FILE__, __LINE__, "error without the file name: %s", ftl_last_error());
        } else if (len < 12 || memcmp(data + len - 4, "PAR1", 4) != 0) {
            ftl_test_fail(__FILE__, __LINE__, "%s cut to %zu bytes was accepted", src, len);
        }
    }
    CHECK(errors > 0 && cases > 50);
    free(data);
}

TEST(parquet_corrupt_truncated_files) {
    const char *dir = ftl_test_scratch_dir();
    char *dst = ftl_format("%s/cut.parquet", dir);
    for (int codec = 0; codec < 3; codec++) {
        static const ftl_parquet_codec codecs[] = {FTL_PARQUET_CODEC_NONE, FTL_PARQUET_CODEC_SNAPPY, FTL_PARQUET_CODEC_ZSTD};
        char *src = make_ftl_file(dir, codecs[codec]);
        check_truncations(src, dst, 7);
        free(src);
    }
    /* files written by others */
    static const char *const refs[] = {"duckdb_zstd_dict-auto_v2", "arrow_types_v2_nodict", "hyparquet_snappy_dict-on_rg1000_req"};
    for (int i = 0; i < 3; i++) {
        char *src = ftl_format("%s/ref/parquet/%s.parquet", ftl_test_build_dir(), refs[i]);
        if (!ftl_path_exists(src)) ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_parquet.sh", src);
        else check_truncations(src, dst, 131);
        free(src);
    }
    free(dst);
}

/* Seeded single-bit flips; for files with page CRCs, a flip before the footer must give an error
 * or the original data. */
static void check_flips(const char *src, const char *dst, uint64_t seed, int flips, bool has_crc) {
    uint8_t *data;
    size_t n;
    REQUIRE_OK(ftl_read_file(src, &data, &n));
    file_hashes want;
    REQUIRE_OK(read_everything(src, &want));
    uint32_t fstart = footer_start(data, n);
    ftl_rng rng;
    ftl_rng_seed(&rng, seed);
    int errors = 0, silent = 0;
    for (int i = 0; i < flips; i++) {
        /* half the flips in the footer (where the sizes and offsets are), half in the pages */
        size_t pos = i % 2 ? fstart + (size_t)ftl_rng_below(&rng, n - fstart) : 4 + (size_t)ftl_rng_below(&rng, fstart - 4);
        uint8_t bit = (uint8_t)(1u << ftl_rng_below(&rng, 8));
        data[pos] ^= bit;
        REQUIRE(write_bytes(dst, data, n));
        file_hashes got;
        ftl_status st = read_everything(dst, &got);
        if (st != FTL_OK) {
            errors++;
            if (!ftl_last_error()[0]) ftl_test_fail(__FILE__, __LINE__, "error without a message (flip at %zu)", pos);
        } else if (!same_hashes(&got, &want)) {
            silent++;
            if (has_crc && pos < fstart) ftl_test_fail(__FILE__, __LINE__, "%s: flip at byte %zu (bit %u) changed the data unnoticed", src, pos, bit);
        }
        data[pos] ^= bit;
    }
    if (has_crc) CHECK(errors > flips / 4); /* with CRCs, flips are caught */
    (void)silent;
    free(data);
}

TEST(parquet_corrupt_bit_flips) {
    const char *dir = ftl_test_scratch_dir();
    char *dst = ftl_format("%s/flip.parquet", dir);
    static const ftl_parquet_codec codecs[] = {FTL_PARQUET_CODEC_NONE, FTL_PARQUET_CODEC_SNAPPY, FTL_PARQUET_CODEC_GZIP, FTL_PARQUET_CODEC_ZSTD};
    for (int i = 0; i < 4; i++) {
        char *src = make_ftl_file(dir, codecs[i]);
        check_flips(src, dst, 100 + (uint64_t)i, 500, true);
        free(src);
    }
    static const char *const refs[] = {"duckdb_types_v2", "arrow_types_v2_nodict", "arrow_types_v1", "hyparquet_gzip_dict-auto_rg1000",
                                       "duckdb_snappy_dict-auto_v1", "arrow_zstd_dict-on_v2_rg1000", "nested"};
    for (int i = 0; i < 7; i++) {
        char *src = ftl_format("%s/ref/parquet/%s.parquet", ftl_test_build_dir(), refs[i]);
        if (!ftl_path_exists(src)) ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_parquet.sh", src);
        else check_flips(src, dst, 200 + (uint64_t)i, 300, false);
        free(src);
    }
    free(dst);
}

TEST(parquet_corrupt_overwritten_footer_bytes) {
    const char *dir = ftl_test_scratch_dir();
    char *src = make_ftl_file(dir, FTL_PARQUET_CODEC_SNAPPY), *dst = ftl_format("%s/ow.parquet", dir);
    uint8_t *data, *copy;
    size_t n;
    REQUIRE_OK(ftl_read_file(src, &data, &n));
    copy = malloc(n);
    uint32_t fstart = footer_start(data, n);
    ftl_rng rng;
    ftl_rng_seed(&rng, 7);
    static const uint8_t patterns[] = {0x00, 0xFF, 0x7F, 0x80, 0x15, 0x19, 0x1C};
    for (int i = 0; i < 1500; i++) {
        memcpy(copy, data, n);
        size_t pos = fstart + (size_t)ftl_rng_below(&rng, n - 8 - fstart);
        size_t len = 1 + (size_t)ftl_rng_below(&rng, 4);
        for (size_t k = 0; k < len && pos + k < n - 8; k++)
            copy[pos + k] = i % 3 ? patterns[ftl_rng_below(&rng, sizeof patterns)] : (uint8_t)ftl_rng_next(&rng);
        REQUIRE(write_bytes(dst, copy, n));
        file_hashes got;
        if (read_everything(dst, &got) != FTL_OK && !ftl_last_error()[0]) ftl_test_fail(__FILE__, __LINE__, "error without a message");
    }
    /* a footer length pointing before the start of the file */
    memcpy(copy, data, n);
    copy[n - 8] = copy[n - 7] = copy[n - 6] = 0xFF;
    REQUIRE(write_bytes(dst, copy, n));
    ftl_parquet_file *f;
    CHECK(ftl_parquet_open(dst, &f) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "footer length");
    free(copy);
    free(data);
    free(src);
    free(dst);
}

TEST(parquet_corrupt_file_shrinks_while_open) {
    const char *dir = ftl_test_scratch_dir();
    char *src = make_ftl_file(dir, FTL_PARQUET_CODEC_NONE);
    ftl_parquet_file *f;
    REQUIRE_OK(ftl_parquet_open(src, &f));
    REQUIRE(truncate(src, 200) == 0);
    ftl_parquet_column_values v = {0};
    ftl_status st = FTL_OK;
    for (int g = 0; g < ftl_parquet_num_row_groups(f) && st == FTL_OK; g++)
        for (int c = 0; c < ftl_parquet_num_columns(f) && st == FTL_OK; c++) st = ftl_parquet_read_column(f, g, c, &v);
    CHECK(st == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "truncated while open");
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
    free(src);
}

TEST(parquet_corrupt_not_parquet_and_missing) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/text.parquet", dir);
    REQUIRE(write_bytes(path, (const uint8_t *)"hello, this is not a parquet file at all", 40));
    ftl_parquet_file *f;
    CHECK(ftl_parquet_open(path, &f) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "not a Parquet file");
    char *missing = ftl_format("%s/missing.parquet", dir);
    CHECK(ftl_parquet_open(missing, &f) == FTL_E_NOT_FOUND);
    CHECK_CONTAINS(ftl_last_error(), missing);
    CHECK(ftl_parquet_open(dir, &f) == FTL_E_INVALID_ARG);
    free(path);
    free(missing);
}

TEST(parquet_crc_verification_can_be_turned_off) {
    const char *dir = ftl_test_scratch_dir();
    char *src = make_ftl_file(dir, FTL_PARQUET_CODEC_NONE), *dst = ftl_format("%s/flipped.parquet", dir);
    uint8_t *data;
    size_t n;
    REQUIRE_OK(ftl_read_file(src, &data, &n));
    data[40] ^= 0x10; /* inside the first image page's values */
    REQUIRE(write_bytes(dst, data, n));
    ftl_parquet_file *f;
    REQUIRE_OK(ftl_parquet_open(dst, &f));
    ftl_parquet_column_values v = {0};
    int col = ftl_parquet_find_column(f, "label");
    ftl_status first = FTL_OK;
    for (int c = 0; c < ftl_parquet_num_columns(f) && first == FTL_OK; c++) first = ftl_parquet_read_column(f, 0, c, &v);
    CHECK(first == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "CRC");
    ftl_parquet_set_verify_crc(f, false);
    for (int c = 0; c < ftl_parquet_num_columns(f); c++) CHECK_OK(ftl_parquet_read_column(f, 0, c, &v));
    (void)col;
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
    free(data);
    free(src);
    free(dst);
}

/* Every row group's pages checked without decoding (the feature cache's test before reuse). */
static ftl_status check_all_row_groups(const char *path, int64_t *without_crc) {
    ftl_parquet_file *f;
    *without_crc = 0;
    ftl_status st = ftl_parquet_open(path, &f);
    if (st != FTL_OK) return st;
    for (int g = 0; g < ftl_parquet_num_row_groups(f) && st == FTL_OK; g++) {
        int64_t n = 0;
        st = ftl_parquet_check_row_group(f, g, &n);
        *without_crc += n;
    }
    ftl_parquet_close(f);
    return st;
}

TEST(parquet_check_row_group_finds_flipped_pages) {
    const char *dir = ftl_test_scratch_dir();
    char *src = make_ftl_file(dir, FTL_PARQUET_CODEC_ZSTD), *dst = ftl_format("%s/flipped.parquet", dir);
    int64_t without_crc = -1;
    CHECK_OK(check_all_row_groups(src, &without_crc));
    CHECK_EQ_INT(without_crc, 0);
    file_hashes good, seen;
    REQUIRE_OK(read_everything(src, &good));
    uint8_t *data;
    size_t n;
    REQUIRE_OK(ftl_read_file(src, &data, &n));
    /* Each byte of the pages flipped in turn: the check fails, naming the file, row group, column
     * and page, or (a header field it does not read, like statistics) the data, read without the
     * CRCs, is intact or fails to read; never a check that passes over data that reads different. */
    uint32_t pages_end = footer_start(data, n);
    int detected = 0, missed = 0;
    for (uint32_t at = 4; at < pages_end; at++) {
        data[at] ^= 0x10;
        REQUIRE(write_bytes(dst, data, n));
        data[at] ^= 0x10;
        if (check_all_row_groups(dst, &without_crc) != FTL_OK) {
            detected++;
            if (!strstr(ftl_last_error(), "flipped.parquet: row group ") || !strstr(ftl_last_error(), "column '"))
                ftl_test_fail(__FILE__, __LINE__, "byte %u: %s", at, ftl_last_error());
        } else if (read_all_columns(dst, false, &seen) == FTL_OK && !same_hashes(&good, &seen)) {
            missed++;
            ftl_test_fail(__FILE__, __LINE__, "byte %u flipped, the check passed, the data changed", at);
        }
    }
    CHECK_EQ_INT(missed, 0);
    CHECK(detected > (int)(pages_end - 4) * 3 / 4); /* page bodies are most of the bytes */
    free(data);
    /* A file written without page CRCs: nothing to check, and said so. */
    ftl_parquet_column_def defs[1] = {{.name = "x", .type = FTL_PARQUET_INT32}};
    ftl_parquet_writer_options o = {.no_page_crc = true};
    ftl_parquet_writer *w;
    int32_t x[3] = {1, 2, 3};
    ftl_parquet_column_data cols[1] = {{.values = x}};
    REQUIRE_OK(ftl_parquet_writer_open(dst, defs, 1, &o, &w));
    REQUIRE_OK(ftl_parquet_writer_write_row_group(w, 3, cols));
    REQUIRE_OK(ftl_parquet_writer_close(w));
    CHECK_OK(check_all_row_groups(dst, &without_crc));
    CHECK_EQ_INT(without_crc, 1);
    free(src), free(dst);
}

TEST(parquet_corrupt_random_footers) {
    /* random bytes (biased towards thrift field headers) between valid magic numbers */
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/rand.parquet", dir);
    ftl_rng rng;
    ftl_rng_seed(&rng, 2024);
    static const uint8_t common[] = {0x00, 0x15, 0x16, 0x18, 0x19, 0x1c, 0x26, 0x29, 0x2c, 0x35, 0x3c, 0xf5, 0xff, 0x01, 0x02};
    uint8_t buf[4 + 64 + 256 + 8];
    int accepted = 0;
    for (int i = 0; i < 3000; i++) {
        size_t data = (size_t)ftl_rng_below(&rng, 64), flen = 1 + (size_t)ftl_rng_below(&rng, 256);
        memcpy(buf, "PAR1", 4);
        for (size_t k = 0; k < data + flen; k++)
            buf[4 + k] = ftl_rng_below(&rng, 3) ? common[ftl_rng_below(&rng, sizeof common)] : (uint8_t)ftl_rng_next(&rng);
        size_t n = 4 + data + flen;
        for (int b = 0; b < 4; b++) buf[n + (size_t)b] = (uint8_t)(flen >> (8 * b));
        memcpy(buf + n + 4, "PAR1", 4);
        REQUIRE(write_bytes(path, buf, n + 8));
        file_hashes h;
        if (read_everything(path, &h) == FTL_OK) accepted++;
        else if (!ftl_last_error()[0]) ftl_test_fail(__FILE__, __LINE__, "error without a message");
    }
    CHECK(accepted < 3000);
    free(path);
}

/* A well-formed footer whose counts are huge: refused before anything that size is allocated
 * (ASan would report an allocation of that size). */
TEST(parquet_corrupt_huge_counts_allocate_nothing) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/huge.parquet", dir);
    thrift_writer page = {0}, foot = {0};
    /* one data page: 2^31 - 1 values claimed, 2 GiB uncompressed claimed from 16 zstd bytes */
    thrift_write_struct_begin(&page, 0);
    thrift_write_i32_field(&page, 1, 0);
    thrift_write_i32_field(&page, 2, INT32_MAX);
    thrift_write_i32_field(&page, 3, 16);
    thrift_write_struct_begin(&page, 5);
    thrift_write_i32_field(&page, 1, INT32_MAX);
    thrift_write_i32_field(&page, 2, 0);
    thrift_write_i32_field(&page, 3, 3);
    thrift_write_i32_field(&page, 4, 3);
    thrift_write_struct_end(&page);
    thrift_write_struct_end(&page);
    uint8_t body[16] = {0x28, 0xb5, 0x2f, 0xfd};
    int64_t chunk = (int64_t)page.size + 16;
    for (int variant = 0; variant < 2; variant++) {
        int64_t rows = variant ? INT32_MAX : (int64_t)1 << 40;
        thrift_writer_reset(&foot);
        thrift_write_struct_begin(&foot, 0);
        thrift_write_i32_field(&foot, 1, 1);
        thrift_write_list_begin(&foot, 2, THRIFT_STRUCT, 2);
        thrift_write_struct_begin(&foot, 0);
        thrift_write_string_field(&foot, 4, "schema");
        thrift_write_i32_field(&foot, 5, 1);
        thrift_write_struct_end(&foot);
        thrift_write_struct_begin(&foot, 0);
        thrift_write_i32_field(&foot, 1, FTL_PARQUET_INT64);
        thrift_write_i32_field(&foot, 3, 0);
        thrift_write_string_field(&foot, 4, "x");
        thrift_write_struct_end(&foot);
        thrift_write_i64_field(&foot, 3, rows);
        thrift_write_list_begin(&foot, 4, THRIFT_STRUCT, 1);
        thrift_write_struct_begin(&foot, 0);
        thrift_write_list_begin(&foot, 1, THRIFT_STRUCT, 1);
        thrift_write_struct_begin(&foot, 0);
        thrift_write_i64_field(&foot, 2, 4);
        thrift_write_struct_begin(&foot, 3);
        thrift_write_i32_field(&foot, 1, FTL_PARQUET_INT64);
        thrift_write_list_begin(&foot, 2, THRIFT_I32, 1);
        thrift_write_zigzag(&foot, 0);
        thrift_write_list_begin(&foot, 3, THRIFT_BINARY, 1);
        thrift_write_binary(&foot, "x", 1);
        thrift_write_i32_field(&foot, 4, FTL_PARQUET_CODEC_ZSTD);
        thrift_write_i64_field(&foot, 5, rows);
        thrift_write_i64_field(&foot, 6, (int64_t)1 << 45);
        thrift_write_i64_field(&foot, 7, chunk);
        thrift_write_i64_field(&foot, 9, 4);
        thrift_write_struct_end(&foot);
        thrift_write_struct_end(&foot);
        thrift_write_i64_field(&foot, 2, (int64_t)1 << 45);
        thrift_write_i64_field(&foot, 3, rows);
        thrift_write_struct_end(&foot);
        thrift_write_struct_end(&foot);
        size_t n = 4 + page.size + 16 + foot.size + 8;
        uint8_t *file = malloc(n);
        memcpy(file, "PAR1", 4);
        memcpy(file + 4, page.data, page.size);
        memcpy(file + 4 + page.size, body, 16);
        memcpy(file + 4 + page.size + 16, foot.data, foot.size);
        for (int b = 0; b < 4; b++) file[n - 8 + (size_t)b] = (uint8_t)(foot.size >> (8 * b));
        memcpy(file + n - 4, "PAR1", 4);
        REQUIRE(write_bytes(path, file, n));
        free(file);
        ftl_parquet_file *f;
        REQUIRE_OK(ftl_parquet_open(path, &f));
        ftl_parquet_column_values v = {0};
        CHECK(ftl_parquet_read_column(f, 0, 0, &v) == FTL_E_FORMAT);
        CHECK_CONTAINS(ftl_last_error(), variant ? "implausibly large" : "row group has 1099511627776 rows");
        ftl_parquet_column_values_free(&v);
        ftl_parquet_close(f);
    }
    thrift_writer_free(&page);
    thrift_writer_free(&foot);
    free(path);
}
