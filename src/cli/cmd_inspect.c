/* ftl inspect FILE: describe a Parquet dataset or an ONNX model. */
#include "cli.h"

#include <stdio.h>

int cli_cmd_inspect(int argc, char **argv) {
    for (int i = 1; i < argc; i++) /* the first positional argument decides: ONNX model or dataset */
        if (argv[i][0] != '-') {
            if (ftl_model_path_is_onnx(argv[i])) return cli_cmd_inspect_model(argc, argv);
            break;
        }
    fprintf(stderr, "ftl inspect: error: not built yet\n");
    return 1;
}
