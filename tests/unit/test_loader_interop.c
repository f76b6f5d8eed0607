/* The loader reads datasets written by DuckDB, arrow-rs and hyparquet with the article's schema
 * (OPTIONAL columns, dictionary and DELTA encodings, several codecs): the labels and images it
 * delivers, in file order, hash to the writers' own column checksums (colhash v1). */
#include "test.h"
#include "ftl/loader.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/sha256.h"

#include <stdlib.h>

static void check_file(const char *name) {
    char *base = ftl_format("%s/ref/loader/%s", ftl_test_build_dir(), name);
    char *parquet = ftl_format("%s.parquet", base), *json_path = ftl_format("%s.json", base);
    uint8_t *text;
    size_t size;
    ftl_json *report = NULL;
    if (ftl_read_file(json_path, &text, &size) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "reference %s missing (tests/ref/gen_loader.sh): %s", json_path, ftl_last_error());
        goto done;
    }
    ftl_status st = ftl_json_parse((const char *)text, size, &report);
    free(text);
    if (st != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", json_path, ftl_last_error());
        goto done;
    }
    const ftl_json *expected = ftl_json_get(report, "expected_columns");
    const char *label_sha = ftl_json_get_string(ftl_json_get(expected, "label"), "sha256");
    const char *image_sha = ftl_json_get_string(ftl_json_get(expected, "image"), "sha256");
    double rows_expected = 0;
    ftl_json_get_number(ftl_json_get(expected, "label"), "count", &rows_expected);
    if (!label_sha || !image_sha) {
        ftl_test_fail(__FILE__, __LINE__, "%s: no expected_columns", json_path);
        goto done;
    }
    const char *src[1] = {parquet};
    ftl_loader_options o;
    ftl_loader_options_init(&o);
    o.sources = src, o.source_count = 1, o.batch_size = 64, o.shuffle = false, o.equal_batches = false;
    o.image_size = 3, o.threads = 3;
    ftl_loader *l;
    if (ftl_loader_open(&o, &l) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", name, ftl_last_error());
        goto done;
    }
    ftl_sha256 hl, hi;
    ftl_sha256_init(&hl);
    ftl_sha256_init(&hi);
    ftl_batch b;
    int64_t rows = 0;
    while ((st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0) {
        for (int64_t i = 0; i < b.rows; i++) {
            uint8_t le[4] = {(uint8_t)b.labels[i], (uint8_t)(b.labels[i] >> 8), (uint8_t)(b.labels[i] >> 16),
                             (uint8_t)(b.labels[i] >> 24)};
            ftl_sha256_update(&hl, le, 4);
            uint8_t len[4] = {27, 0, 0, 0};
            ftl_sha256_update(&hi, len, 4);
            ftl_sha256_update(&hi, b.values + i * 27, 27);
        }
        rows += b.rows;
    }
    CHECK_OK(st);
    ftl_loader_close(l);
    uint8_t d[32];
    char hex[65];
    ftl_sha256_final(&hl, d);
    ftl_sha256_hex(d, hex);
    if (strcmp(hex, label_sha) != 0) ftl_test_fail(__FILE__, __LINE__, "%s: label checksum %s, writer says %s", name, hex, label_sha);
    ftl_sha256_final(&hi, d);
    ftl_sha256_hex(d, hex);
    if (strcmp(hex, image_sha) != 0) ftl_test_fail(__FILE__, __LINE__, "%s: image checksum %s, writer says %s", name, hex, image_sha);
    CHECK_EQ_INT(rows, (int64_t)rows_expected);
done:
    ftl_json_free(report);
    free(base), free(parquet), free(json_path);
}

TEST(loader_reads_duckdb_dataset) { check_file("duckdb_snappy"); }
TEST(loader_reads_arrow_rs_dataset) { check_file("arrow_zstd_dict_v2"); }
TEST(loader_reads_hyparquet_dataset) { check_file("hyparquet_required"); }
