/* Fuzz target: a tar shard (WebDataset) through the tar index, then its samples, each sample's label
 * and every member's bytes. */
#include "fuzz_util.h"
#include "data/tar_index.h"
#include "data/webdataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_input(data, size, ".tar");
    tar_index *t = NULL;
    if (tar_index_open(path, &t) != FTL_OK) return 0;
    for (size_t i = 0; i < t->count; i++) {
        uint8_t *bytes;
        size_t n;
        if (tar_index_read(t, i, &bytes, &n) == FTL_OK) free(bytes);
    }
    webdataset_sample_list *samples = NULL;
    if (webdataset_samples(t, &samples) == FTL_OK) {
        for (size_t i = 0; i < samples->count; i++) {
            webdataset_label label;
            if (webdataset_sample_label(t, &samples->samples[i], &label) == FTL_OK) webdataset_label_free(&label);
        }
        webdataset_samples_free(samples);
    }
    tar_index_close(t);
    return 0;
}
