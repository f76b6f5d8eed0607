/* Fuzz target: open a Parquet file, read every column of every row group, hash it, and read a
 * few of its rows one by one (the page maps, dictionaries and single pages of
 * ftl_parquet_read_value). Must never crash, leak or read out of bounds, whatever the bytes. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_input(data, size, ".parquet");
    ftl_parquet_file *f = NULL;
    if (ftl_parquet_open(path, &f) != FTL_OK) return 0;
    for (int g = 0; g < ftl_parquet_num_row_groups(f) && g < 8; g++) {
        for (int c = 0; c < ftl_parquet_num_columns(f) && c < 16; c++) {
            ftl_parquet_column_values v = {0};
            if (ftl_parquet_read_column(f, g, c, &v) == FTL_OK) {
                ftl_parquet_colhash *h = NULL;
                if (ftl_parquet_colhash_init(&h, v.type) == FTL_OK) {
                    ftl_parquet_colhash_update(h, &v);
                    ftl_parquet_colhash_free(h);
                }
            }
            ftl_parquet_column_values_free(&v);
            ftl_parquet_value one = {0};
            int64_t rows = ftl_parquet_row_group_rows(f, g);
            for (int64_t r = rows - 1; r >= 0; r = r > 2 ? r / 3 : r - 1) ftl_parquet_read_value(f, g, c, r, &one);
            ftl_parquet_value_free(&one);
        }
    }
    ftl_parquet_close(f);
    FILE *null = fopen("/dev/null", "w");
    ftl_parquet_describe_options o = {0};
    ftl_parquet_describe(path, null, &o);
    fclose(null);
    return 0;
}
