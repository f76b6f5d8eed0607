/* The model options' names: --precision and --conv-algorithm parsed and named (for the CLI, the
 * Python package, the files that record them, and the precision choice). */
#include "ftl/nn.h"
#include "util/error.h"

#include <string.h>

ftl_status ftl_nn_precision_parse(const char *text, ftl_nn_precision *precision) {
    if (strcmp(text, "fp32") == 0 || strcmp(text, "f32") == 0 || strcmp(text, "float32") == 0) *precision = FTL_NN_FP32;
    else if (strcmp(text, "bf16") == 0 || strcmp(text, "bfloat16") == 0) *precision = FTL_NN_BF16;
    else if (strcmp(text, "tf32") == 0) *precision = FTL_NN_TF32;
    else if (strcmp(text, "int8") == 0) *precision = FTL_NN_INT8;
    else return ftl_fail(FTL_E_INVALID_ARG, "--precision '%s': expected fp32, bf16, tf32 or int8", text);
    return FTL_OK;
}

const char *ftl_nn_precision_name(ftl_nn_precision precision) {
    return precision == FTL_NN_BF16 ? "bf16" : precision == FTL_NN_TF32 ? "tf32" : precision == FTL_NN_INT8 ? "int8" : "fp32";
}

ftl_status ftl_nn_conv_algorithm_parse(const char *text, ftl_nn_conv_algorithm *algorithm) {
    if (strcmp(text, "auto") == 0) *algorithm = FTL_NN_CONV_AUTO;
    else if (strcmp(text, "direct") == 0) *algorithm = FTL_NN_CONV_DIRECT;
    else return ftl_fail(FTL_E_INVALID_ARG, "--conv-algorithm '%s': expected auto or direct", text);
    return FTL_OK;
}

const char *ftl_nn_conv_algorithm_name(ftl_nn_conv_algorithm algorithm) {
    return algorithm == FTL_NN_CONV_DIRECT ? "direct" : "auto";
}
