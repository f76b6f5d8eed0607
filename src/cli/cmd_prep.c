/* ftl prep SRC OUT: image folders -> Parquet dataset. */
#include "cli.h"

#include <stdio.h>

int cli_cmd_prep(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "ftl prep: error: not built yet\n");
    return 1;
}
