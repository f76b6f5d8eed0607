/* Streaming loader: invariants (every row once per epoch across shards, disjoint shards, equal
 * batch counts), determinism across thread counts, shuffle quality, disk cache hits and
 * recovery, exact resume, bounded memory, and error messages. Rows carry their own global index
 * in their value bytes, so every check is exact. */
#include "test.h"
#include "ftl/loader.h"
#include "ftl/parquet.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <dirent.h>
#include <malloc.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ROW_BYTES = 12 }; /* 2 x 2 x 3 "images" */

/* Writes a dataset of `rows` rows in row groups of the given sizes (cycled); value bytes hold the
 * global row index; label = row / label_run % classes (label_run > 1 gives sorted runs). */
static char *write_dataset(const char *dir, const char *name, int64_t rows, const int *group_sizes, int group_count,
                           int classes, int label_run, int64_t row_bytes) {
    char *path = ftl_format("%s/%s", dir, name);
    ftl_parquet_column_def cols[3] = {
        {.name = "label", .type = FTL_PARQUET_INT32},
        {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY},
        {.name = "path", .type = FTL_PARQUET_BYTE_ARRAY, .utf8 = true},
    };
    ftl_parquet_writer *w;
    if (ftl_parquet_writer_open(path, cols, 3, NULL, &w) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "writer: %s", ftl_last_error());
        return path;
    }
    int64_t row = 0;
    for (int g = 0; row < rows; g++) {
        int64_t n = group_sizes[g % group_count];
        if (n > rows - row) n = rows - row;
        int32_t *labels = ftl_xmalloc((size_t)n * 4);
        uint8_t *values = ftl_xcalloc((size_t)n, (size_t)row_bytes);
        const uint8_t **vp = ftl_xmalloc((size_t)n * sizeof *vp), **pp = ftl_xmalloc((size_t)n * sizeof *pp);
        uint32_t *vl = ftl_xmalloc((size_t)n * 4), *pl = ftl_xmalloc((size_t)n * 4);
        char **names = ftl_xmalloc((size_t)n * sizeof *names);
        for (int64_t i = 0; i < n; i++) {
            int64_t r = row + i;
            labels[i] = (int32_t)(r / label_run % classes);
            memcpy(values + i * row_bytes, &r, 8);
            vp[i] = values + i * row_bytes;
            vl[i] = (uint32_t)row_bytes;
            names[i] = ftl_format("img_%06lld.png", (long long)r);
            pp[i] = (const uint8_t *)names[i];
            pl[i] = (uint32_t)strlen(names[i]);
        }
        ftl_parquet_column_data data[3] = {{.values = labels}, {.byte_values = vp, .byte_lengths = vl},
                                           {.byte_values = pp, .byte_lengths = pl}};
        if (ftl_parquet_writer_write_row_group(w, n, data) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
        for (int64_t i = 0; i < n; i++) free(names[i]);
        free(names), free(labels), free(values), free(vp), free(pp), free(vl), free(pl);
        row += n;
    }
    char *size = ftl_format("%d", row_bytes == ROW_BYTES ? 2 : 0);
    if (row_bytes == ROW_BYTES) ftl_parquet_writer_set_metadata(w, "ftl.image_size", size);
    free(size);
    if (ftl_parquet_writer_close(w) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
    return path;
}

static int64_t row_of(const ftl_batch *b, int64_t i) {
    int64_t r;
    memcpy(&r, b->values + i * b->row_bytes, 8);
    return r;
}

typedef struct run_result {
    int64_t *rows;   /* every row index delivered, in order */
    int64_t count, batches;
    int64_t *batches_per_epoch; /* per epoch */
} run_result;

static ftl_status run_loader(const ftl_loader_options *o, run_result *out, int64_t max_batches) {
    memset(out, 0, sizeof *out);
    ftl_loader *l;
    FTL_TRY(ftl_loader_open(o, &l));
    out->batches_per_epoch = ftl_xcalloc(64, sizeof(int64_t));
    ftl_batch b;
    ftl_status st;
    while ((st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0 && out->batches < max_batches) {
        out->rows = ftl_xrealloc(out->rows, (size_t)(out->count + b.rows) * sizeof(int64_t));
        for (int64_t i = 0; i < b.rows; i++) out->rows[out->count++] = row_of(&b, i);
        if (b.epoch < 64) out->batches_per_epoch[b.epoch]++;
        out->batches++;
    }
    ftl_loader_close(l);
    return st;
}

static void run_result_free(run_result *r) {
    free(r->rows);
    free(r->batches_per_epoch);
}

static ftl_loader_options options_for(const char **source, int batch) {
    ftl_loader_options o;
    ftl_loader_options_init(&o);
    o.sources = source;
    o.source_count = 1;
    o.batch_size = batch;
    return o;
}

TEST(loader_shards_cover_every_row_once_with_equal_batches) {
    const char *dir = ftl_test_scratch_dir();
    struct { int64_t rows; int groups[3]; int group_count; } cases[] = {
        {100, {100}, 1},      /* one row group */
        {103, {7, 30, 2}, 3}, /* uneven row groups */
        {10, {10}, 1},        /* fewer row groups than shards */
        {64, {8}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[32];
        snprintf(name, sizeof name, "d%zu.parquet", c);
        char *path = write_dataset(dir, name, cases[c].rows, cases[c].groups, cases[c].group_count, 5, 1, ROW_BYTES);
        const char *src[1] = {path};
        for (int shards = 1; shards <= 5; shards++) {
            int64_t n = cases[c].rows;
            int *seen = ftl_xcalloc((size_t)n, sizeof(int));
            int64_t expect_batches = -1;
            for (int k = 0; k < shards; k++) {
                ftl_loader_options o = options_for(src, 3);
                o.shard = k, o.num_shards = shards, o.equal_batches = false, o.epochs = 1;
                run_result r;
                CHECK_OK(run_loader(&o, &r, 1000000));
                for (int64_t i = 0; i < r.count; i++)
                    if (r.rows[i] >= 0 && r.rows[i] < n) seen[r.rows[i]]++;
                run_result_free(&r);
                /* With equal batches every shard yields the same count (the smallest shard's). */
                o.equal_batches = true, o.drop_remainder = true, o.epochs = 2;
                if ((n / shards) / 3 == 0) { /* no full batch on some shard: a clear error, not a hang */
                    CHECK_EQ_INT(run_loader(&o, &r, 1000000), FTL_E_INVALID_ARG);
                    CHECK_CONTAINS(ftl_last_error(), "give no batch of 3 rows");
                    run_result_free(&r);
                    continue;
                }
                CHECK_OK(run_loader(&o, &r, 1000000));
                if (expect_batches < 0) expect_batches = r.batches_per_epoch[0];
                CHECK_EQ_INT(r.batches_per_epoch[0], expect_batches);
                CHECK_EQ_INT(r.batches_per_epoch[1], expect_batches);
                CHECK_EQ_INT(expect_batches, (n / shards) / 3);
                run_result_free(&r);
            }
            for (int64_t i = 0; i < n; i++)
                if (seen[i] != 1) {
                    ftl_test_fail(__FILE__, __LINE__, "case %zu, %d shards: row %lld seen %d times", c, shards, (long long)i, seen[i]);
                    break;
                }
            free(seen);
        }
        free(path);
    }
}

TEST(loader_same_seed_same_order_any_threads) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {13, 40, 7};
    char *path = write_dataset(dir, "d.parquet", 500, groups, 3, 4, 1, ROW_BYTES);
    const char *src[1] = {path};
    run_result a, b, c;
    ftl_loader_options o = options_for(src, 16);
    o.epochs = 3, o.shuffle_buffer = 50, o.threads = 1;
    CHECK_OK(run_loader(&o, &a, 1000000));
    o.threads = 4, o.queue_row_groups = 3;
    CHECK_OK(run_loader(&o, &b, 1000000));
    REQUIRE(a.count == b.count && a.count == 3 * 500);
    CHECK(memcmp(a.rows, b.rows, (size_t)a.count * sizeof(int64_t)) == 0);
    /* Each epoch is a different permutation; another seed gives another order. */
    CHECK(memcmp(a.rows, a.rows + 500, 500 * sizeof(int64_t)) != 0);
    o.seed = 7;
    CHECK_OK(run_loader(&o, &c, 1000000));
    CHECK(memcmp(a.rows, c.rows, 500 * sizeof(int64_t)) != 0);
    run_result_free(&a), run_result_free(&b), run_result_free(&c);
    free(path);
}

TEST(loader_shuffle_mixes_a_sorted_dataset) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {50};
    /* 4 classes in sorted runs of 250 rows, row groups of 50: an unshuffled batch has one label. */
    char *path = write_dataset(dir, "sorted.parquet", 1000, groups, 1, 4, 250, ROW_BYTES);
    const char *src[1] = {path};
    ftl_loader_options o = options_for(src, 16);
    o.shuffle_buffer = 400;
    ftl_loader *l;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch b;
    int64_t batches = 0, mixed = 0;
    while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0) {
        int seen[4] = {0}, distinct = 0;
        for (int64_t i = 0; i < b.rows; i++) seen[b.labels[i] & 3] = 1;
        for (int k = 0; k < 4; k++) distinct += seen[k];
        mixed += distinct >= 2;
        batches++;
    }
    ftl_loader_close(l);
    CHECK(batches == 63);
    CHECK(mixed >= batches * 9 / 10);
    free(path);
}

TEST(loader_disk_cache_hits_and_recovers) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {10};
    char *path = write_dataset(dir, "d.parquet", 200, groups, 1, 3, 1, ROW_BYTES); /* 20 row groups */
    const char *src[1] = {path};
    char *cache = ftl_format("%s/cache", dir);
    run_result plain;
    ftl_loader_options o = options_for(src, 8);
    o.epochs = 3;
    CHECK_OK(run_loader(&o, &plain, 1000000));
    o.cache_dir = cache;
    ftl_loader *l;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch b;
    int64_t n = 0;
    int64_t *rows = ftl_xmalloc(600 * sizeof(int64_t));
    while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0)
        for (int64_t i = 0; i < b.rows && n < 600; i++) rows[n++] = row_of(&b, i);
    ftl_loader_stats s;
    ftl_loader_stats_get(l, &s);
    ftl_loader_close(l);
    CHECK_EQ_INT(n, 600);
    CHECK(memcmp(rows, plain.rows, 600 * sizeof(int64_t)) == 0); /* same data with and without cache */
    CHECK_EQ_INT(s.cache_misses, 20);
    CHECK_EQ_INT(s.cache_hits, 40);

    /* Corrupt one entry: it is detected, re-read from the source, and the results do not change. */
    char *cmd = ftl_format("f=$(ls %s/*.rgc | head -1); printf 'XXXX' | dd of=$f bs=1 seek=60 conv=notrunc 2>/dev/null", cache);
    CHECK(system(cmd) == 0);
    free(cmd);
    o.epochs = 1;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    n = 0;
    while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0)
        for (int64_t i = 0; i < b.rows; i++) rows[n++] = row_of(&b, i);
    ftl_loader_stats_get(l, &s);
    ftl_loader_close(l);
    CHECK_EQ_INT(n, 200);
    CHECK(memcmp(rows, plain.rows, 200 * sizeof(int64_t)) == 0);
    CHECK_EQ_INT(s.cache_hits, 19);
    CHECK_EQ_INT(s.cache_misses, 1);

    /* A limit of about half the data keeps a stable half: later epochs hit about half. */
    char *small = ftl_format("%s/small-cache", dir);
    o.cache_dir = small;
    o.cache_size_limit = 10 * (10 * (4 + ROW_BYTES) + 40) + 5 * 0; /* about 10 entries */
    o.epochs = 4;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0) {
    }
    ftl_loader_stats_get(l, &s);
    ftl_loader_close(l);
    CHECK_EQ_INT(s.cache_hits + s.cache_misses, 80);
    CHECK(s.cache_hits >= 25 && s.cache_hits <= 30); /* ~10 of 20 entries hit in each of epochs 2-4 */
    CHECK(s.cache_bytes <= o.cache_size_limit);
    free(small);
    free(rows);
    run_result_free(&plain);
    free(cache);
    free(path);
}

static void check_resume(const char *path, int64_t steps_per_epoch, int64_t stop_after) {
    const char *src[1] = {path};
    ftl_loader_options o = options_for(src, 7);
    o.epochs = 3, o.steps_per_epoch = steps_per_epoch, o.shuffle_buffer = 30;
    run_result full;
    CHECK_OK(run_loader(&o, &full, 1000000));
    ftl_loader *l;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch b;
    int64_t delivered = 0;
    for (int64_t k = 0; k < stop_after; k++) {
        REQUIRE_OK(ftl_loader_next(l, &b));
        delivered += b.rows;
    }
    uint8_t *blob;
    size_t size;
    REQUIRE_OK(ftl_loader_position_save(l, &blob, &size));
    ftl_loader_close(l);
    o.resume_position = blob, o.resume_position_size = size;
    run_result rest;
    CHECK_OK(run_loader(&o, &rest, 1000000));
    CHECK_EQ_INT(delivered + rest.count, full.count);
    CHECK(rest.count > 0 && memcmp(rest.rows, full.rows + delivered, (size_t)rest.count * sizeof(int64_t)) == 0);
    /* A position from another plan is refused. */
    o.batch_size = 8;
    ftl_status st = ftl_loader_open(&o, &l);
    CHECK_EQ_INT(st, FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "batch size differs");
    free(blob);
    run_result_free(&full);
    run_result_free(&rest);
}

TEST(loader_resume_yields_exactly_the_remaining_sequence) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {11, 5};
    char *path = write_dataset(dir, "d.parquet", 120, groups, 2, 3, 1, ROW_BYTES);
    check_resume(path, 0, 5);   /* mid-epoch 0 */
    check_resume(path, 0, 18);  /* the epoch boundary (120 / 7 -> 18 batches per epoch) */
    check_resume(path, 0, 23);
    check_resume(path, 10, 13); /* endless stream, steps_per_epoch = 10, crossing a pass */
    free(path);
}

static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && sscanf(line + n, ": %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

/* Peak RSS growth while streaming one epoch, measured in a forked child (so earlier tests'
 * memory does not blur it): free heap is returned to the system, the peak is reset by writing
 * 5 to /proc/self/clear_refs, and the child reports VmHWM - VmRSS through its exit pipe. */
static long loader_peak_rss(const char *path) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        malloc_trim(0);
        FILE *f = fopen("/proc/self/clear_refs", "w");
        long growth = -1;
        if (f) {
            fputs("5", f);
            fclose(f);
            long before = status_kb("VmRSS");
            const char *src[1] = {path};
            ftl_loader_options o = options_for(src, 16);
            o.image_size = 64, o.shuffle_buffer = 64, o.threads = 2;
            ftl_loader *l;
            if (ftl_loader_open(&o, &l) == FTL_OK) {
                ftl_batch b;
                while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0) {
                }
                ftl_loader_close(l);
                growth = status_kb("VmHWM") - before;
            }
        }
        ssize_t w = write(fds[1], &growth, sizeof growth);
        _exit(w == sizeof growth ? 0 : 1);
    }
    close(fds[1]);
    long growth = -1;
    if (read(fds[0], &growth, sizeof growth) != sizeof growth) growth = -1;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return growth;
}

TEST(loader_memory_is_bounded_by_queue_not_dataset) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {32};
    int64_t row_bytes = 64 * 64 * 3;
    char *small = write_dataset(dir, "small.parquet", 640, groups, 1, 3, 1, row_bytes);     /* ~7.9 MB */
    char *large = write_dataset(dir, "large.parquet", 6400, groups, 1, 3, 1, row_bytes);    /* ~79 MB */
    long a = loader_peak_rss(small), b = loader_peak_rss(large);
    REQUIRE(a >= 0 && b >= 0);
    printf("  peak RSS growth: %ld kB for 7.9 MB, %ld kB for 79 MB\n", a, b);
    CHECK(b <= a * 5 / 4 + 4096); /* within 25% (+4 MB slack for allocator noise) */
    free(small);
    free(large);
}

TEST(loader_errors_name_file_column_and_row) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {10};
    char *path = write_dataset(dir, "d.parquet", 30, groups, 1, 3, 1, ROW_BYTES);
    const char *src[1] = {path};
    ftl_loader *l;
    ftl_loader_options o = options_for(src, 4);
    o.value_column = "pixels";
    CHECK_EQ_INT(ftl_loader_open(&o, &l), FTL_E_NOT_FOUND);
    CHECK_CONTAINS(ftl_last_error(), "no column 'pixels'");
    CHECK_CONTAINS(ftl_last_error(), "d.parquet");
    const char *missing[1] = {"/nonexistent/data.parquet"};
    o = options_for(missing, 4);
    CHECK_EQ_INT(ftl_loader_open(&o, &l), FTL_E_NOT_FOUND);
    CHECK_CONTAINS(ftl_last_error(), "/nonexistent/data.parquet");
    /* Wrong image size: the first row's length mismatch is reported with file, row group and row. */
    o = options_for(src, 4);
    o.image_size = 3;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch b;
    ftl_status st = ftl_loader_next(l, &b);
    CHECK_EQ_INT(st, FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "row group");
    CHECK_CONTAINS(ftl_last_error(), "row 0: 'image' has 12 bytes, expected 27");
    ftl_loader_close(l);
    free(path);
}

TEST(loader_paths_belong_to_their_rows) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {9, 4};
    char *path = write_dataset(dir, "d.parquet", 60, groups, 2, 3, 1, ROW_BYTES);
    char *cache = ftl_format("%s/cache", dir);
    const char *src[1] = {path};
    for (int with_cache = 0; with_cache < 2; with_cache++) {
        ftl_loader_options o = options_for(src, 7);
        o.path_column = "path", o.epochs = 2, o.shuffle_buffer = 20;
        if (with_cache) o.cache_dir = cache;
        ftl_loader *l;
        REQUIRE_OK(ftl_loader_open(&o, &l));
        ftl_batch b;
        int64_t n = 0;
        while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0)
            for (int64_t i = 0; i < b.rows; i++, n++) {
                char want[32];
                snprintf(want, sizeof want, "img_%06lld.png", (long long)row_of(&b, i));
                if (!b.paths || strcmp(b.paths[i], want) != 0) {
                    ftl_test_fail(__FILE__, __LINE__, "row %lld has path '%s'", (long long)row_of(&b, i), b.paths ? b.paths[i] : "(none)");
                    break;
                }
            }
        ftl_loader_close(l);
        CHECK_EQ_INT(n, 120);
    }
    free(cache);
    free(path);
}

/* The order computed from the footers alone is exactly what the streaming loader delivers. */
TEST(loader_pass_rows_equal_the_streamed_sequence) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {17, 6, 30};
    char *path = write_dataset(dir, "d.parquet", 301, groups, 3, 3, 1, ROW_BYTES);
    const char *src[1] = {path};
    struct { int shard, shards; bool drop; int64_t buffer, steps; } cases[] = {
        {0, 1, true, 400, 0}, {1, 3, true, 50, 0}, {2, 3, false, 0, 0}, {0, 2, true, 7, 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ftl_loader_options o = options_for(src, 8);
        o.shard = cases[c].shard, o.num_shards = cases[c].shards, o.drop_remainder = cases[c].drop;
        o.shuffle_buffer = cases[c].buffer, o.steps_per_epoch = cases[c].steps, o.epochs = 3;
        run_result r;
        REQUIRE_OK(run_loader(&o, &r, 1000000));
        int64_t at = 0;
        for (int64_t pass = 0; at < r.count; pass++) {
            int64_t *rows, n;
            REQUIRE_OK(ftl_loader_pass_rows(&o, pass, &rows, &n));
            REQUIRE(n > 0);
            int64_t cmp = n < r.count - at ? n : r.count - at;
            if (memcmp(rows, r.rows + at, (size_t)cmp * sizeof(int64_t)) != 0)
                ftl_test_fail(__FILE__, __LINE__, "case %zu pass %lld differs", c, (long long)pass);
            at += cmp;
            free(rows);
        }
        run_result_free(&r);
    }
    free(path);
}

/* Each row's dataset index and pass travel with it through the shuffle (the flip draws key on them):
 * the index is the row's own (its value bytes), the pass the one ftl_loader_pass_rows puts it in. */
TEST(loader_rows_carry_their_index_and_pass) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {17, 6, 30};
    char *path = write_dataset(dir, "d.parquet", 301, groups, 3, 3, 1, ROW_BYTES);
    const char *src[1] = {path};
    struct { int shard, shards; int64_t buffer, steps; } cases[] = {{0, 1, 400, 0}, {1, 3, 50, 0}, {0, 2, 7, 5}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ftl_loader_options o = options_for(src, 8);
        o.shard = cases[c].shard, o.num_shards = cases[c].shards;
        o.shuffle_buffer = cases[c].buffer, o.steps_per_epoch = cases[c].steps, o.epochs = 4;
        ftl_loader *l;
        REQUIRE_OK(ftl_loader_open(&o, &l));
        int64_t pass = 0, left = 0, *rows = NULL, n = 0, at = 0, checked = 0;
        ftl_batch b;
        while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0) {
            for (int64_t i = 0; i < b.rows; i++, checked++) {
                if (left == 0) { /* the next pass's rows, in order */
                    free(rows);
                    REQUIRE_OK(ftl_loader_pass_rows(&o, pass++, &rows, &n));
                    left = n, at = 0;
                }
                if (b.row_index[i] != row_of(&b, i) || b.row_pass[i] != pass - 1 || rows[at] != row_of(&b, i)) {
                    ftl_test_fail(__FILE__, __LINE__, "case %zu: row %lld says index %lld pass %lld (pass %lld expected)", c,
                                  (long long)row_of(&b, i), (long long)b.row_index[i], (long long)b.row_pass[i],
                                  (long long)(pass - 1));
                    break;
                }
                at++, left--;
            }
        }
        ftl_loader_close(l);
        free(rows);
        CHECK(checked >= 150);
    }
    free(path);
}

/* Part files that differ in having a path column, and a lying ftl.image_size: no crash, clear error. */
TEST(loader_mixed_parts_and_bad_image_size_metadata) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {3};
    char *folder = ftl_format("%s/parts", dir);
    REQUIRE_OK(ftl_make_dirs(folder));
    char *a = write_dataset(folder, "part-0.parquet", 4, groups, 1, 2, 1, ROW_BYTES);
    /* part-1: label and image only */
    char *b = ftl_format("%s/part-1.parquet", folder);
    ftl_parquet_column_def cols[2] = {{.name = "label", .type = FTL_PARQUET_INT32}, {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY}};
    ftl_parquet_writer *w;
    REQUIRE_OK(ftl_parquet_writer_open(b, cols, 2, NULL, &w));
    int32_t labels[10];
    uint8_t values[10][ROW_BYTES];
    const uint8_t *vp[10];
    uint32_t vl[10];
    for (int i = 0; i < 10; i++) {
        labels[i] = i % 2;
        int64_t r = 100 + i;
        memset(values[i], 0, ROW_BYTES);
        memcpy(values[i], &r, 8);
        vp[i] = values[i];
        vl[i] = ROW_BYTES;
    }
    ftl_parquet_column_data data[2] = {{.values = labels}, {.byte_values = vp, .byte_lengths = vl}};
    CHECK_OK(ftl_parquet_writer_write_row_group(w, 10, data));
    CHECK_OK(ftl_parquet_writer_close(w));
    const char *src[1] = {folder};
    ftl_loader_options o = options_for(src, 5);
    o.path_column = "path", o.path_optional = true, o.image_size = 2, o.shuffle_buffer = 6;
    ftl_loader *l;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch batch;
    int64_t n = 0;
    while (ftl_loader_next(l, &batch) == FTL_OK && batch.rows > 0)
        for (int64_t i = 0; i < batch.rows; i++, n++) {
            int64_t r = row_of(&batch, i);
            char want[32] = "";
            if (r < 100) snprintf(want, sizeof want, "img_%06lld.png", (long long)r);
            if (strcmp(batch.paths[i], want) != 0) ftl_test_fail(__FILE__, __LINE__, "row %lld: path '%s'", (long long)r, batch.paths[i]);
        }
    ftl_loader_close(l);
    CHECK_EQ_INT(n, 14);

    /* ftl.image_size far beyond any real image: refused before allocating anything. */
    char *c = ftl_format("%s/huge.parquet", dir);
    REQUIRE_OK(ftl_parquet_writer_open(c, cols, 2, NULL, &w));
    CHECK_OK(ftl_parquet_writer_write_row_group(w, 10, data));
    CHECK_OK(ftl_parquet_writer_set_metadata(w, "ftl.image_size", "60000"));
    CHECK_OK(ftl_parquet_writer_close(w));
    const char *huge[1] = {c};
    o = options_for(huge, 4);
    CHECK_EQ_INT(ftl_loader_open(&o, &l), FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "is not an image size");
    free(a), free(b), free(c), free(folder);
}

/* The flip draws: a pure function of (seed, pass, row), about half the rows per pass, independent
 * between passes and seeds (binomial bounds over 20000 rows: 6 standard deviations). */
TEST(augment_flip_draws_are_fair_and_independent) {
    const int rows = 20000;
    int flipped = 0, same_as_next_pass = 0, same_as_other_seed = 0;
    for (int r = 0; r < rows; r++) {
        bool a = ftl_augment_flip_draw(42, 3, r);
        CHECK(a == ftl_augment_flip_draw(42, 3, r));
        flipped += a;
        same_as_next_pass += a == ftl_augment_flip_draw(42, 4, r);
        same_as_other_seed += a == ftl_augment_flip_draw(43, 3, r);
    }
    int lo = rows / 2 - 425, hi = rows / 2 + 425;
    CHECK(flipped > lo && flipped < hi);
    CHECK(same_as_next_pass > lo && same_as_next_pass < hi);
    CHECK(same_as_other_seed > lo && same_as_other_seed < hi);
}

/* Several readers missing on the one row group of a small shard at once store it once: the
 * cache's byte count is the entry file's size, not a multiple of it. */
TEST(loader_disk_cache_counts_a_concurrent_entry_once) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {40};
    char *path = write_dataset(dir, "one_group.parquet", 40, groups, 1, 2, 1, ROW_BYTES);
    const char *src[1] = {path};
    char *cache = ftl_format("%s/cache_once", dir);
    ftl_loader_options o = options_for(src, 8);
    o.epochs = 6, o.threads = 4, o.cache_dir = cache;
    ftl_loader *l;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch b;
    int64_t n = 0;
    while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0) n += b.rows;
    ftl_loader_stats s;
    ftl_loader_stats_get(l, &s);
    ftl_loader_close(l);
    CHECK_EQ_INT(n, 240);
    int64_t on_disk = 0, entries = 0;
    DIR *d = opendir(cache);
    REQUIRE(d != NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char *p = ftl_format("%s/%s", cache, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) on_disk += (int64_t)sb.st_size, entries++;
        free(p);
    }
    closedir(d);
    CHECK_EQ_INT(entries, 1);
    CHECK_EQ_INT(s.cache_bytes, on_disk);
    free(path), free(cache);
}

/* A path column of fixed-length bytes has no offsets to read paths by: refused by name, no crash. */
TEST(loader_refuses_a_fixed_length_path_column) {
    const char *dir = ftl_test_scratch_dir();
    char *p = ftl_format("%s/flba_path.parquet", dir);
    ftl_parquet_column_def cols[3] = {{.name = "label", .type = FTL_PARQUET_INT32},
                                      {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY},
                                      {.name = "path", .type = FTL_PARQUET_FIXED_LEN_BYTE_ARRAY, .fixed_length = 4}};
    ftl_parquet_writer *w;
    REQUIRE_OK(ftl_parquet_writer_open(p, cols, 3, NULL, &w));
    int32_t labels[4] = {0, 1, 0, 1};
    uint8_t values[4][ROW_BYTES] = {{0}};
    const uint8_t *vp[4];
    uint32_t vl[4];
    for (int i = 0; i < 4; i++) vp[i] = values[i], vl[i] = ROW_BYTES;
    const char paths[16] = "a.pnb.pnc.pnd.pn";
    ftl_parquet_column_data data[3] = {{.values = labels}, {.byte_values = vp, .byte_lengths = vl}, {.values = paths}};
    CHECK_OK(ftl_parquet_writer_write_row_group(w, 4, data));
    CHECK_OK(ftl_parquet_writer_close(w));
    const char *src[1] = {p};
    ftl_loader_options o = options_for(src, 2);
    o.path_column = "path", o.image_size = 2;
    ftl_loader *l = NULL;
    CHECK_EQ_INT(ftl_loader_open(&o, &l), FTL_E_UNSUPPORTED);
    CHECK_CONTAINS(ftl_last_error(), "flba_path.parquet: column 'path' is FIXED_LEN_BYTE_ARRAY; expected BYTE_ARRAY (string) paths");
    free(p);
}

/* Options left zero take the loader's defaults (columns "label"/"image", one shard) all the way
 * into the plan, as ftl_loader_options_init's would. */
TEST(loader_zeroed_options_take_the_defaults) {
    const char *dir = ftl_test_scratch_dir();
    int groups[] = {5};
    char *path = write_dataset(dir, "zeroed.parquet", 10, groups, 1, 2, 1, ROW_BYTES);
    const char *src[1] = {path};
    ftl_loader_options o;
    memset(&o, 0, sizeof o);
    o.sources = src, o.source_count = 1, o.batch_size = 5, o.epochs = 1;
    ftl_loader *l = NULL;
    REQUIRE_OK(ftl_loader_open(&o, &l));
    ftl_batch b;
    int64_t n = 0;
    while (ftl_loader_next(l, &b) == FTL_OK && b.rows > 0) n += b.rows;
    ftl_loader_close(l);
    CHECK_EQ_INT(n, 10);
    free(path);
}
