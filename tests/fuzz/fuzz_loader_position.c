/* Fuzz target: a loader resumed from a fuzzed position blob (the opaque state stored in
 * checkpoints) over a fixed, valid dataset of 23 rows in 4 row groups. */
#include "fuzz_util.h"

#include <string.h>

static const char *dataset(void) {
    static char path[256];
    if (path[0]) return path;
    const char *dir = getenv("FUZZ_TMPDIR");
    snprintf(path, sizeof path, "%s/ftl-fuzz-position-%d.parquet", dir ? dir : "/tmp", (int)getpid());
    ftl_parquet_column_def cols[2] = {{.name = "label", .type = FTL_PARQUET_INT32},
                                      {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY}};
    ftl_parquet_writer *w = NULL;
    if (ftl_parquet_writer_open(path, cols, 2, NULL, &w) != FTL_OK) abort();
    ftl_parquet_writer_set_metadata(w, "ftl.image_size", "2");
    int32_t labels[8];
    uint8_t pixels[8 * 12];
    int64_t offsets[9];
    for (int g = 0, row = 0; g < 4; g++) {
        int rows = g == 3 ? 2 : 7;
        for (int r = 0; r < rows; r++, row++) {
            labels[r] = row % 3;
            memset(pixels + 12 * r, row, 12);
            offsets[r] = 12 * r;
        }
        offsets[rows] = 12 * rows;
        ftl_parquet_column_data data[2] = {{.values = labels}, {.values = pixels, .offsets = offsets}};
        if (ftl_parquet_writer_write_row_group(w, rows, data) != FTL_OK) abort();
    }
    if (ftl_parquet_writer_close(w) != FTL_OK) abort();
    ftl_log_set_level(FTL_LOG_ERROR);
    return path;
}

/* With FUZZ_WRITE_SEEDS=DIR: writes the positions of a real run (every step of 3 epochs, in pass
 * and in steps-per-epoch mode) as seeds instead (tests/fuzz/run.sh). */
static void write_seeds(const char *dir, ftl_loader_options *o) {
    ftl_loader *l = NULL;
    if (ftl_loader_open(o, &l) != FTL_OK) abort();
    ftl_batch b;
    for (int i = 0; i < 40; i++) {
        uint8_t *blob;
        size_t n;
        if (ftl_loader_position_save(l, &blob, &n) != FTL_OK) abort();
        char path[512];
        snprintf(path, sizeof path, "%s/position-%lld-%d", dir, (long long)o->steps_per_epoch, i);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(blob, 1, n, f);
            fclose(f);
        }
        free(blob);
        if (ftl_loader_next(l, &b) != FTL_OK || b.rows == 0) break;
    }
    ftl_loader_close(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *sources[1] = {dataset()};
    for (int mode = 0; mode < 2; mode++) { /* a pass per epoch, then 5 steps per epoch */
        ftl_loader_options o;
        ftl_loader_options_init(&o);
        o.sources = sources;
        o.source_count = 1;
        o.batch_size = 4;
        o.epochs = 3;
        o.steps_per_epoch = mode ? 5 : 0;
        o.threads = 1;
        o.shuffle_buffer = 6;
        const char *seeds = getenv("FUZZ_WRITE_SEEDS");
        if (seeds) {
            write_seeds(seeds, &o);
            continue;
        }
        o.resume_position = data;
        o.resume_position_size = size;
        ftl_loader *l = NULL;
        if (ftl_loader_open(&o, &l) != FTL_OK) continue;
        ftl_batch b;
        for (int i = 0; i < 100 && ftl_loader_next(l, &b) == FTL_OK && b.rows > 0; i++) {
        }
        ftl_loader_close(l);
    }
    return 0;
}
