/* The calibration sample (see calibration_sample.h). */
#include "data/calibration_sample.h"
#include "ftl/loader.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

enum { WINDOWS = 8, CALIBRATION_SEED = 42 };

static void loader_options_for(const ftl_embed_options *o, const char *const *sources, int count, ftl_loader_options *lo) {
    ftl_loader_options_init(lo);
    lo->sources = sources;
    lo->source_count = count;
    if (o->image_column) lo->value_column = o->image_column;
    if (o->label_column) lo->label_column = o->label_column;
    lo->image_size = o->image_size;
    lo->shuffle = false;
    lo->equal_batches = false;
    lo->epochs = 1;
    lo->threads = 0; /* the loader's default: a reader per core when it decodes */
}

/* The image size and rows of a set (its first loader's view). */
static ftl_status set_shape(const ftl_embed_options *o, const char *const *sources, int count, int *size, int64_t *rows) {
    ftl_loader_options lo;
    loader_options_for(o, sources, count, &lo);
    ftl_loader *l;
    FTL_TRY(ftl_loader_open(&lo, &l));
    *size = ftl_loader_image_size(l);
    *rows = ftl_loader_total_rows(l);
    ftl_loader_close(l);
    return FTL_OK;
}

ftl_status calibration_sample_read(const ftl_embed_options *o, uint8_t **images, int *count, int *size) {
    *images = NULL;
    *count = *size = 0;
    const char *own[1] = {o->calibration_path};
    const char *const *sources = o->calibration_path ? own : o->sources;
    int n_sources = o->calibration_path ? 1 : o->source_count;
    const char *name = o->calibration_path ? o->calibration_path : o->sources[0];
    int64_t total = 0;
    FTL_TRY(set_shape(o, sources, n_sources, size, &total));
    if (*size <= 0) return ftl_fail(FTL_E_INVALID_ARG, "calibration set %s holds no images", name);
    if (o->calibration_path) {
        int data_size = 0;
        int64_t data_rows = 0;
        FTL_TRY(set_shape(o, o->sources, o->source_count, &data_size, &data_rows));
        if (data_size != *size)
            return ftl_fail(FTL_E_INVALID_ARG, "calibration set %s has %dx%d images, the data %s %dx%d: calibrate on a set "
                            "prepped at the same size", name, *size, *size, o->sources[0], data_size, data_size);
    }
    int batch = o->batch > 0 ? o->batch : 1;
    if (total < batch)
        return ftl_fail(FTL_E_INVALID_ARG, "calibration set %s has %lld rows, fewer than a batch (%d): calibration needs "
                        "at least one full batch of images", name, (long long)total, batch);
    if (o->calibration_rows < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "--calibration-rows %d: must be >= 1", o->calibration_rows);
    int64_t want = o->calibration_rows < total ? o->calibration_rows : total;
    int windows = want < WINDOWS ? (int)want : WINDOWS;
    size_t per = (size_t)*size * (size_t)*size * 3;
    *images = ftl_xmalloc(per * (size_t)want);
    ftl_rng rng;
    ftl_rng_seed(&rng, CALIBRATION_SEED);
    ftl_status st = FTL_OK;
    int64_t got = 0;
    for (int k = 0; k < windows && st == FTL_OK; k++) {
        int64_t len = want / windows + (k < want % windows ? 1 : 0);
        /* window k starts somewhere in the k-th of `windows` equal stretches of the rows */
        int64_t stretch = total / windows, begin = k * stretch + (int64_t)(ftl_rng_uniform(&rng) * (float)stretch);
        if (begin + len > total) begin = total - len;
        ftl_loader_options lo;
        loader_options_for(o, sources, n_sources, &lo);
        lo.row_begin = begin;
        lo.row_end = begin + len;
        lo.batch_size = (int)(len < 256 ? len : 256);
        ftl_loader *l = NULL;
        st = ftl_loader_open(&lo, &l);
        ftl_batch b;
        while (st == FTL_OK && (st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0) {
            if ((size_t)b.row_bytes != per || got + b.rows > want) {
                st = ftl_fail(FTL_E_FORMAT, "calibration set %s: rows of %lld bytes, expected %zu", name, (long long)b.row_bytes, per);
                break;
            }
            memcpy(*images + per * (size_t)got, b.values, per * (size_t)b.rows);
            got += b.rows;
        }
        if (l) ftl_loader_close(l);
    }
    if (st != FTL_OK) {
        free(*images);
        *images = NULL;
        return st;
    }
    *count = (int)got;
    return FTL_OK;
}
