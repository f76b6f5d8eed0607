/* Fuzz target: load an ONNX model (parse, check ops and attributes, shapes, prune, optimise, plan)
 * and run it once on zeros when it loads. */
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setenv("FTL_NN_MAX_ACTIVATION_BYTES", "1073741824", 0); /* a hostile shape is refused, not allocated */
    const char *path = fuzz_write_input(data, size, ".onnx");
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = 2;
    o.threads = 1;
    ftl_model *m = NULL;
    if (ftl_model_load(path, &o, &m) != FTL_OK) return 0;
    const ftl_model_info *i = ftl_model_get_info(m);
    if (i->feature_dim > 0 && i->feature_dim < (1 << 20) && i->channels > 0 && i->height > 0 && i->width > 0 &&
        (long long)i->channels * i->height * i->width < (1 << 22)) {
        size_t in_count = 2u * (size_t)i->channels * (size_t)i->height * (size_t)i->width;
        float *in = calloc(in_count, sizeof *in), *out = calloc(2u * (size_t)i->feature_dim, sizeof *out);
        ftl_model_run(m, in, 2, out);
        free(in);
        free(out);
    }
    ftl_model_free(m);
    return 0;
}
