/* ftl's reader on files written by DuckDB, arrow-rs and hyparquet (tests/ref/gen_parquet.sh):
 * every column's colhash v1 must equal the checksum computed from the generated data before
 * writing (parquet_write_ref.mjs) or by all three engines (parquet_inspect.mjs), and the row
 * groups must match what the writer reports. Missing reference files fail the test. */
#include "test.h"
#include "ftl/parquet.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <stdlib.h>

static char *ref_path(const char *name, const char *ext) {
    return ftl_format("%s/ref/parquet/%s%s", ftl_test_build_dir(), name, ext);
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

/* Checks one file against its JSON; returns false (after recording failures) on a mismatch. */
static bool check_file(const char *name) {
    char *pq = ref_path(name, ".parquet"), *js = ref_path(name, ".json");
    bool ok = true;
    ftl_json *doc = load_json(js);
    ftl_parquet_file *f = NULL;
    if (!doc) {
        ok = ftl_test_fail(__FILE__, __LINE__, "%s: reference JSON missing or unreadable", js);
        goto done;
    }
    const ftl_json *expected = ftl_json_get(doc, "expected_columns");
    if (!expected) expected = ftl_json_get(doc, "columns");
    if (!expected || expected->type != FTL_JSON_OBJECT) {
        ok = ftl_test_fail(__FILE__, __LINE__, "%s: no expected columns", js);
        goto done;
    }
    if (ftl_parquet_open(pq, &f) != FTL_OK) {
        ok = ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
        goto done;
    }
    /* row groups as the writer reports them (parquet_write_ref.mjs) */
    const ftl_json *written = ftl_json_get(doc, "written");
    const ftl_json *rgs = written ? ftl_json_get(written, "row_groups") : NULL;
    if (rgs) {
        if ((int)rgs->count != ftl_parquet_num_row_groups(f))
            ok = ftl_test_fail(__FILE__, __LINE__, "%s: %d row groups, writer reports %zu", name, ftl_parquet_num_row_groups(f), rgs->count);
        for (size_t g = 0; ok && g < rgs->count; g++)
            if ((double)ftl_parquet_row_group_rows(f, (int)g) != rgs->items[g].number)
                ok = ftl_test_fail(__FILE__, __LINE__, "%s: row group %zu has %lld rows, writer reports %g", name, g,
                                   (long long)ftl_parquet_row_group_rows(f, (int)g), rgs->items[g].number);
    }
    ftl_parquet_column_values v = {0};
    for (size_t k = 0; k < expected->count; k++) {
        const char *col = expected->keys[k];
        const ftl_json *e = &expected->items[k];
        int c = ftl_parquet_find_column(f, col);
        if (c < 0) {
            ok = ftl_test_fail(__FILE__, __LINE__, "%s: column %s not found", name, col);
            continue;
        }
        ftl_parquet_colhash *h;
        if (ftl_parquet_colhash_init(&h, ftl_parquet_column(f, c)->type) != FTL_OK) {
            ok = ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
            continue;
        }
        bool read_ok = true;
        for (int g = 0; g < ftl_parquet_num_row_groups(f) && read_ok; g++) {
            if (ftl_parquet_read_column(f, g, c, &v) != FTL_OK || ftl_parquet_colhash_update(h, &v) != FTL_OK) {
                ok = read_ok = ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
            } else if (v.rows != ftl_parquet_row_group_rows(f, g)) {
                ok = read_ok = ftl_test_fail(__FILE__, __LINE__, "%s: %s row group %d: %lld rows", name, col, g, (long long)v.rows);
            }
        }
        ftl_parquet_colhash_result r;
        ftl_parquet_colhash_final(h, &r);
        ftl_parquet_colhash_free(h);
        if (!read_ok) continue;
        const char *sha = ftl_json_get_string(e, "sha256");
        const char *nsha = ftl_json_get_string(e, "nulls_sha256");
        double count = -1, nulls = -1;
        ftl_json_get_number(e, "count", &count);
        ftl_json_get_number(e, "null_count", &nulls);
        if (!sha || strcmp(sha, r.sha256) != 0 || count != (double)r.count || nulls != (double)r.null_count ||
            strcmp(nsha ? nsha : "", r.nulls_sha256) != 0)
            ok = ftl_test_fail(__FILE__, __LINE__, "%s: column %s: ftl %s (%lld values, %lld nulls), expected %s (%g, %g)", name, col,
                               r.sha256, (long long)r.count, (long long)r.null_count, sha ? sha : "?", count, nulls);
    }
    /* nested columns: a struct's leaves are read, a list's are listed and refused by name */
    for (int c = 0; c < ftl_parquet_num_columns(f); c++) {
        const ftl_parquet_column_info *ci = ftl_parquet_column(f, c);
        if (!ci->nested || ftl_parquet_num_row_groups(f) == 0) continue;
        ftl_status st = ftl_parquet_read_column(f, 0, c, &v);
        if (ci->repeated ? st != FTL_E_UNSUPPORTED || !strstr(ftl_last_error(), ci->name) || !strstr(ftl_last_error(), "not lists")
                         : st != FTL_OK || v.rows != ftl_parquet_row_group_rows(f, 0))
            ok = ftl_test_fail(__FILE__, __LINE__, "%s: nested column %s: status %d, message '%s'", name, ci->name, st, ftl_last_error());
    }
    ftl_parquet_column_values_free(&v);
done:
    ftl_parquet_close(f);
    ftl_json_free(doc);
    free(pq);
    free(js);
    return ok;
}

TEST(parquet_interop_reference_files) {
    char *manifest = ref_path("manifest", ".txt");
    uint8_t *text;
    size_t n;
    if (ftl_read_file(manifest, &text, &n) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_parquet.sh (make test does)", manifest);
        free(manifest);
        return;
    }
    int files = 0, failed = 0, nested = 0, with_nulls = 0;
    char *s = (char *)text;
    s = ftl_xrealloc(s, n + 1);
    s[n] = '\0';
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (!*line) continue;
        files++;
        if (!check_file(line)) failed++;
        nested += strstr(line, "nested") != NULL;
        with_nulls += strstr(line, "types") != NULL;
    }
    /* the matrix must really be there: dozens of files, with the nulls and nested cases */
    CHECK(files >= 60);
    CHECK(nested == 1);
    CHECK(with_nulls >= 6);
    CHECK_EQ_INT(failed, 0);
    free(s);
    free(manifest);
}
