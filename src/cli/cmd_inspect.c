/* ftl inspect FILE: describe a Parquet dataset or an ONNX model. */
#include "cli.h"

#include <stdio.h>

int cli_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "ftl inspect: error: not built yet\n");
    return 1;
}
