/* Fuzz target: the streaming loader over a fuzzed dataset file (metadata such as ftl.image_size
 * and ftl.classes, columns, row sizes), two epochs with shuffling and paths; then the same file
 * with a fuzzed resume position. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_input(data, size, ".parquet");
    const char *sources[1] = {path};
    ftl_loader_options o;
    ftl_loader_options_init(&o);
    o.sources = sources;
    o.source_count = 1;
    o.path_column = "path";
    o.path_optional = true;
    o.batch_size = 3;
    o.epochs = 2;
    o.threads = 1;
    o.shuffle_buffer = 5;
    ftl_loader *l = NULL;
    if (ftl_loader_open(&o, &l) != FTL_OK) return 0;
    (void)ftl_loader_metadata(l, "ftl.classes");
    ftl_batch b;
    for (int i = 0; i < 200 && ftl_loader_next(l, &b) == FTL_OK && b.rows > 0; i++) {
        volatile uint8_t sink = 0;
        for (int64_t r = 0; r < b.rows; r++) sink ^= b.values[r * b.row_bytes] ^ (uint8_t)b.labels[r];
        (void)sink;
    }
    ftl_loader_close(l);
    return 0;
}
