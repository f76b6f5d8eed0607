/* Fuzz target: decode a JPEG or PNG from memory to RGB. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet++) ftl_log_set_level(FTL_LOG_ERROR);
    ftl_image img = {0};
    ftl_image_decode_rgb(data, size, &img);
    ftl_image_free(&img);
    return 0;
}
