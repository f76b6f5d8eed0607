/* What a program hosting libftl (the Python package) relies on: the log sink, cooperative
 * cancellation, and features of images in memory, files and datasets (ftl/embed.h), each checked
 * against an independent computation or exact expected values. */
#include "test.h"
#include "ftl.h"
#include "util/alloc.h"
#include "util/log.h"

#include <stdlib.h>

typedef struct {
    char text[4][512];
    ftl_log_level level[4];
    bool output[4];
    int count;
} captured;

static void capture(void *ctx, ftl_log_level level, bool output, const char *text) {
    captured *c = ctx;
    if (c->count < 4) {
        snprintf(c->text[c->count], sizeof c->text[0], "%s", text);
        c->level[c->count] = level;
        c->output[c->count] = output;
    }
    c->count++;
}

TEST(log_sink_receives_messages_and_result_lines) {
    captured c = {0};
    ftl_log_set_sink(capture, &c, false);
    /* a warning from the library: an unknown codec given to prep is refused; a calibration flag
     * without int8 is warned about */
    ftl_nn_calibration_method method = FTL_NN_CALIBRATION_PERCENTILE;
    CHECK(ftl_calibration_method_resolve("minmax", FTL_NN_FP32, NULL, &method) == FTL_OK);
    FILE *out = ftl_log_output();
    fprintf(out, "Epoch 1/2 - loss: %.1f\n", 0.5);
    fflush(out);
    ftl_log_set_sink(NULL, NULL, false);
    CHECK_EQ_INT(c.count, 2);
    CHECK_STR_EQ(c.text[0], "ftl: warning: --calibration and --calibration-method belong to --precision int8; ignored\n");
    CHECK(c.level[0] == FTL_LOG_WARN && !c.output[0]);
    CHECK_STR_EQ(c.text[1], "Epoch 1/2 - loss: 0.5\n");
    CHECK(c.level[1] == FTL_LOG_INFO && c.output[1]);
    CHECK(ftl_log_output() == stdout); /* no sink: the CLI's stdout */
}

static char *model_path(const char *name) { return ftl_format("%s/models/%s", ftl_test_shared_dir(), name); }

static ftl_model *small_model(void) {
    char *path = model_path("mobilenet_v1_0.25_128.onnx");
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.batch = 4;
    ftl_model *m = NULL;
    if (ftl_model_load(path, &o, &m) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "load: %s", ftl_last_error());
    free(path);
    return m;
}

/* Smooth deterministic pixels, different per image. */
static void fill(uint8_t *px, int count, int h, int w) {
    for (int n = 0; n < count; n++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++) px[(((size_t)n * h + y) * w + x) * 3 + c] = (uint8_t)((x * 3 + y * 5 + n * 40 + c * 70) & 255);
}

TEST(embed_images_pads_a_non_square_image_as_prep_pads) {
    ftl_model *m = small_model();
    REQUIRE(m);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    int64_t dim = ftl_model_get_info(m)->feature_dim;
    enum { N = 5, H = 60, W = 90 }; /* 5 images: a batch of 4 and one more */
    uint8_t *wide = malloc((size_t)N * H * W * 3), *square = malloc((size_t)N * W * W * 3);
    fill(wide, N, H, W);
    memset(square, 255, (size_t)N * W * W * 3); /* white, with the image at row (90 - 60) / 2 = 15 */
    for (int n = 0; n < N; n++)
        for (int y = 0; y < H; y++)
            memcpy(square + (((size_t)n * W + y + 15) * W) * 3, wide + (((size_t)n * H + y) * W) * 3, (size_t)W * 3);
    float *a = malloc((size_t)N * dim * sizeof *a), *b = malloc((size_t)N * dim * sizeof *b);
    CHECK(ftl_embed_images(m, &pp, wide, N, H, W, a) == FTL_OK);
    CHECK(ftl_model_extract_features(m, &pp, square, N, W, b) == FTL_OK);
    CHECK(memcmp(a, b, (size_t)N * dim * sizeof *a) == 0);
    CHECK(ftl_embed_images(m, &pp, wide, N, 0, W, a) == FTL_E_INVALID_ARG);
    CHECK(strstr(ftl_last_error(), "expected a positive size") != NULL);
    free(wide), free(square), free(a), free(b);
    ftl_model_free(m);
}

TEST(interrupt_stops_work_between_batches) {
    ftl_model *m = small_model();
    REQUIRE(m);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    int64_t dim = ftl_model_get_info(m)->feature_dim;
    uint8_t *px = malloc(8 * 64 * 64 * 3);
    fill(px, 8, 64, 64);
    float *f = malloc(8 * (size_t)dim * sizeof *f);
    ftl_interrupt();
    CHECK(ftl_interrupt_requested());
    CHECK(ftl_embed_images(m, &pp, px, 8, 64, 64, f) == FTL_E_INTERRUPTED);
    CHECK_STR_EQ(ftl_last_error(), "interrupted");
    ftl_interrupt_clear();
    CHECK(!ftl_interrupt_requested());
    CHECK(ftl_embed_images(m, &pp, px, 8, 64, 64, f) == FTL_OK);
    free(px), free(f);
    ftl_model_free(m);
}

TEST(embed_files_and_dataset_equal_the_prep_then_embed_path) {
    const char *dir = ftl_test_scratch_dir();
    char *src = ftl_format("%s/data/hymenoptera", ftl_test_shared_dir());
    char *out = ftl_format("%s/ds", dir);
    ftl_prep_options po;
    ftl_prep_options_init(&po);
    po.source_dir = src;
    po.output_dir = out;
    po.image_size = 128;
    po.show_progress = false;
    ftl_prep_summary sum;
    REQUIRE(ftl_prep_run(&po, &sum) == FTL_OK);
    ftl_prep_summary_free(&sum);
    ftl_model *m = small_model();
    REQUIRE(m);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    int64_t dim = ftl_model_get_info(m)->feature_dim;
    char *val = ftl_format("%s/val.parquet", out);
    float *features = NULL;
    int32_t *labels = NULL;
    int64_t rows = 0;
    REQUIRE(ftl_embed_dataset(m, &pp, val, &features, &labels, &rows) == FTL_OK);
    CHECK_EQ_INT(rows, 153);
    /* the first rows' images, read by the loader, through the model: the same rows */
    ftl_loader_options lo;
    ftl_loader_options_init(&lo);
    const char *sources[1] = {val};
    lo.sources = sources, lo.source_count = 1, lo.batch_size = 6, lo.shuffle = false, lo.epochs = 1;
    lo.path_column = "path";
    ftl_loader *l = NULL;
    REQUIRE(ftl_loader_open(&lo, &l) == FTL_OK);
    ftl_batch b;
    REQUIRE(ftl_loader_next(l, &b) == FTL_OK && b.rows == 6);
    float *direct = malloc(6 * (size_t)dim * sizeof *direct), *files = malloc(6 * (size_t)dim * sizeof *files);
    CHECK(ftl_model_extract_features(m, &pp, b.values, 6, 128, direct) == FTL_OK);
    CHECK(memcmp(direct, features, 6 * (size_t)dim * sizeof *direct) == 0);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(labels[i], b.labels[i]);
    /* the same photos from their files, by prep's recipe at 128 */
    char *paths[6];
    for (int i = 0; i < 6; i++) paths[i] = ftl_format("%s/%s", src, b.paths[i]); /* relative to SRC */
    CHECK(ftl_embed_files(m, &pp, (const char *const *)paths, 6, 128, files) == FTL_OK);
    CHECK(memcmp(direct, files, 6 * (size_t)dim * sizeof *direct) == 0);
    char *missing[1] = {ftl_format("%s/no-such.jpg", dir)};
    CHECK(ftl_embed_files(m, &pp, (const char *const *)missing, 1, 128, files) != FTL_OK);
    CHECK(strstr(ftl_last_error(), "no-such.jpg") != NULL);
    free(missing[0]);
    for (int i = 0; i < 6; i++) free(paths[i]);
    ftl_loader_close(l);
    free(direct), free(files), free(features), free(labels), free(val), free(out), free(src);
    ftl_model_free(m);
}
