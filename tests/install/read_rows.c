/* Built against an installed ftl (pkg-config --cflags --libs ftl) by tests/e2e/test_install.sh:
 * opens a dataset and prints its rows and row groups. */
#include <ftl.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: read_rows FILE.parquet\n");
        return 2;
    }
    ftl_parquet_file *f;
    if (ftl_parquet_open(argv[1], &f) != FTL_OK) {
        fprintf(stderr, "read_rows: %s\n", ftl_last_error());
        return 1;
    }
    printf("rows %lld row_groups %d version %s\n", (long long)ftl_parquet_num_rows(f), ftl_parquet_num_row_groups(f),
           FTL_VERSION);
    ftl_parquet_close(f);
    return 0;
}
