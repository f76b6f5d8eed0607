/* Fuzz target: a safetensors buffer (the layout of ftl's models and checkpoints), then the same
 * bytes as a model file through ftl_classifier_load. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ftl_safetensors *st = NULL;
    if (ftl_safetensors_open_buffer(data, size, "fuzz", &st) == FTL_OK) {
        for (size_t i = 0; i < ftl_safetensors_tensor_count(st); i++) (void)ftl_safetensors_tensor_at(st, i);
        ftl_safetensors_close(st);
    }
    const char *path = fuzz_write_input(data, size, ".ftl");
    ftl_classifier c;
    if (ftl_classifier_load(path, &c) == FTL_OK) ftl_classifier_free(&c);
    return 0;
}
