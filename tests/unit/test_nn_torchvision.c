/* torchvision mobilenet_v2, resnet50, densenet121 and shufflenet_v2 (random weights, exported by tests/ref/nn_torchvision.py
 * with torch.onnx) against PyTorch's outputs: float input, the uint8 path with torch scaling and a
 * 256 -> 224 Pillow-BILINEAR resize, and --features-from the pooled features under fc. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* |ftl - ref| <= rel * max(1, max|ref|) (random-weight ResNet-50 logits reach ~600). */
static void compare(const char *what, const float *got, const nn_npy *ref, double rel) {
    nn_check_close(__FILE__, __LINE__, what, got, ref->data, ref->count, rel);
}

static ftl_model *load(const char *path, int batch, const char *features_from) {
    return nn_test_load(path, batch, features_from, NULL);
}

static void check_model(const char *name) {
    char *base = ftl_format("%s/ref/nn/torchvision/%s", ftl_test_build_dir(), name);
    char *onnx = ftl_format("%s.onnx", base), *in_p = ftl_format("%s.in.npy", base), *out_p = ftl_format("%s.out.npy", base);
    char *img_p = ftl_format("%s.images.rgb", base), *img_out_p = ftl_format("%s.images.out.npy", base);
    nn_npy x = {0}, y = {0}, yi = {0};
    size_t img_size = 0;
    uint8_t *images = NULL;
    if (!nn_npy_read(in_p, &x) || !nn_npy_read(out_p, &y) || !nn_npy_read(img_out_p, &yi) ||
        !(images = nn_test_read(img_p, &img_size)) || img_size != 3u * 256 * 256 * 3) {
        ftl_test_fail(__FILE__, __LINE__, "reference data for %s missing: run tests/ref/gen_nn.sh", name);
    } else {
        ftl_model *m = load(onnx, 2, NULL); /* batches of 2: one full, one partial */
        if (m) {
            float *out = malloc((size_t)y.count * sizeof *out);
            if (ftl_model_run(m, x.data, 3, out) == FTL_OK) compare("fp32, float input", out, &y, 2e-5);
            else ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
            ftl_nn_preprocess pp;
            ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TORCH);
            if (ftl_model_extract_features(m, &pp, images, 3, 256, out) == FTL_OK)
                compare("uint8 256px, torch scale, resize", out, &yi, 2e-5);
            else ftl_test_fail(__FILE__, __LINE__, "extract: %s", ftl_last_error());
            free(out);
            ftl_model_free(m);
        }
    }
    nn_npy_free(&x);
    nn_npy_free(&y);
    nn_npy_free(&yi);
    free(images);
    free(base);
    free(onnx);
    free(in_p);
    free(out_p);
    free(img_p);
    free(img_out_p);
}

TEST(nn_torchvision_mobilenet_v2) { check_model("mobilenet_v2"); }
TEST(nn_torchvision_resnet50) { check_model("resnet50"); }
/* DenseNet's concats grow to 32 inputs (more than one oneDNN concat takes) and its
 * pre-activation BatchNorms follow Concat, so they are not folded into a conv. */
TEST(nn_torchvision_densenet121) { check_model("densenet121"); }
/* ShuffleNet v2 as torch.onnx writes it for a dynamic batch: its channel shuffles reshape with
 * shapes computed by Shape/Gather/Div/Unsqueeze/Concat, folded at load for each batch size (here 2,
 * then 1 for the partial batch), and its branches Slice the channels of activations. */
TEST(nn_torchvision_shufflenet_v2) { check_model("shufflenet_v2_x0_5"); }
/* Exported with a fixed batch of 2, which torch.onnx bakes into the channel-shuffle Reshapes: ftl
 * runs it 2 images at a time, the third image in a padded batch. */
TEST(nn_torchvision_shufflenet_v2_fixed_batch) {
    char *path = ftl_format("%s/ref/nn/torchvision/shufflenet_v2_x0_5_fixed2.onnx", ftl_test_build_dir());
    ftl_model *m = load(path, 16, NULL);
    if (m) {
        CHECK_EQ_INT(ftl_model_get_info(m)->fixed_batch, 2);
        ftl_model_free(m);
    }
    free(path);
    check_model("shufflenet_v2_x0_5_fixed2");
}
/* A (narrow, 3-layer) torchvision ViT: the class token expanded to the batch by shape arithmetic
 * and concatenated, LayerNorm as exported (ReduceMean over the last axis, Sub, Pow, Sqrt, Div), the
 * attention's batched MatMuls and Softmax with the batch axis moved by Transposes, GELU from its
 * five ops, and the class token picked by a Gather. */
TEST(nn_torchvision_vit) { check_model("vit_small"); }
/* A two-stage torchvision ConvNeXt: LayerNorm over channels between permutes, 7x7 depthwise convs,
 * Linear layers on 4-D tensors, layer scale and GELU. */
TEST(nn_torchvision_convnext) { check_model("convnext_small_cfg"); }
/* A two-stage torchvision Swin: shifted-window attention with its mask folded at load (ScatterND,
 * Range, Equal, Where), torch.roll as Slice + Concat, patch merging by strided Slices, the relative
 * position bias gathered from its table, and Gathers along axes the Transposes moved first. */
TEST(nn_torchvision_swin) { check_model("swin_small_cfg"); }
/* The other torchvision families (random weights; alexnet and vgg with narrowed classifiers). */
TEST(nn_torchvision_alexnet) { check_model("alexnet"); }
TEST(nn_torchvision_vgg11_bn) { check_model("vgg11_bn"); }
TEST(nn_torchvision_efficientnet_b0) { check_model("efficientnet_b0"); }
TEST(nn_torchvision_efficientnet_v2_s) { check_model("efficientnet_v2_s"); }
TEST(nn_torchvision_googlenet) { check_model("googlenet"); }
TEST(nn_torchvision_inception_v3) { check_model("inception_v3"); }
TEST(nn_torchvision_mnasnet) { check_model("mnasnet0_5"); }
TEST(nn_torchvision_mobilenet_v3) { check_model("mobilenet_v3_small"); }
TEST(nn_torchvision_regnet) { check_model("regnet_y_400mf"); }
TEST(nn_torchvision_resnext) { check_model("resnext50_32x4d"); }
TEST(nn_torchvision_squeezenet) { check_model("squeezenet1_1"); }
/* The same two transformers exported at opset 17, where LayerNorm is one LayerNormalization node. */
TEST(nn_torchvision_vit_opset17) { check_model("vit_small_op17"); }
TEST(nn_torchvision_swin_opset17) { check_model("swin_small_cfg_op17"); }

/* --features-from: `name` read from <model>.features_name.txt, compared with <model>.features.npy. */
static void check_features_from(const char *model, int64_t dim, const char *what) {
    char *base = ftl_format("%s/ref/nn/torchvision/%s", ftl_test_build_dir(), model);
    char *onnx = ftl_format("%s.onnx", base), *in_p = ftl_format("%s.in.npy", base);
    char *f_p = ftl_format("%s.features.npy", base), *name_p = ftl_format("%s.features_name.txt", base);
    nn_npy x = {0}, f = {0};
    size_t len = 0;
    char *name = (char *)nn_test_read(name_p, &len);
    if (!name || !nn_npy_read(in_p, &x) || !nn_npy_read(f_p, &f)) {
        ftl_test_fail(__FILE__, __LINE__, "reference data missing: run tests/ref/gen_nn.sh");
    } else {
        name = realloc(name, len + 1);
        name[len] = 0;
        name[strcspn(name, "\n")] = 0;
        ftl_model *m = load(onnx, 3, name);
        if (m) {
            const ftl_model_info *i = ftl_model_get_info(m);
            CHECK_EQ_INT(i->feature_dim, dim);
            CHECK_STR_EQ(i->feature_name, name);
            float *out = malloc((size_t)f.count * sizeof *out);
            if (i->feature_dim == dim && ftl_model_run(m, x.data, 3, out) == FTL_OK) compare(what, out, &f, 2e-5);
            free(out);
            ftl_model_free(m);
        }
    }
    free(name);
    nn_npy_free(&x);
    nn_npy_free(&f);
    free(base);
    free(onnx);
    free(in_p);
    free(f_p);
    free(name_p);
}

TEST(nn_torchvision_resnet50_features_from) { check_features_from("resnet50", 2048, "--features-from pooled features"); }
/* The ViT's class token after the last LayerNorm, against ONNX Runtime with that tensor exposed. */
TEST(nn_torchvision_vit_features_from_class_token) {
    check_features_from("vit_small", 96, "--features-from class token (vs ORT)");
}

/* The exported ResNet-50 and its 3 reference inputs/outputs; false (the test failed) when missing.
 * The caller frees *onnx and the arrays. */
static bool resnet_refs(char **onnx, nn_npy *x, nn_npy *y) {
    char *base = ftl_format("%s/ref/nn/torchvision/resnet50", ftl_test_build_dir());
    char *in_p = ftl_format("%s.in.npy", base), *out_p = ftl_format("%s.out.npy", base);
    *onnx = ftl_format("%s.onnx", base);
    bool ok = nn_npy_read(in_p, x) && nn_npy_read(out_p, y) && x->count % 3 == 0 && y->count % 3 == 0;
    if (!ok) ftl_test_fail(__FILE__, __LINE__, "reference data for resnet50 missing: run tests/ref/gen_nn.sh");
    free(base);
    free(in_p);
    free(out_p);
    return ok;
}

/* Per-layer micro-batches: with the cache budget forced small (FTL_NN_CACHE_BYTES), ResNet-50 at
 * batch 8 runs its early layers 2 images at a time and its late layers 8 at once (tensors crossing
 * from one chunk size to the next live in whole-batch buffers); 11 images add a tail plan of 3 with
 * its own split. Every row must still match PyTorch's row for its image, and be bit-identical to the
 * rows of the same plan run segment after segment instead of depth-first. */
TEST(nn_torchvision_resnet50_micro_batches) {
    char *onnx = NULL;
    nn_npy x = {0}, y = {0};
    if (resnet_refs(&onnx, &x, &y)) {
        int64_t in_per = x.count / 3, out_per = y.count / 3, n = 11;
        float *in = malloc((size_t)(n * in_per) * sizeof *in), *want = malloc((size_t)(n * out_per) * sizeof *want);
        float *got = malloc((size_t)(n * out_per) * sizeof *got);
        for (int64_t i = 0; i < n; i++) { /* image i is reference image i % 3 */
            memcpy(in + i * in_per, x.data + (i % 3) * in_per, (size_t)in_per * sizeof *in);
            memcpy(want + i * out_per, y.data + (i % 3) * out_per, (size_t)out_per * sizeof *want);
        }
        const char *old = getenv("FTL_NN_CACHE_BYTES");
        char *saved = old ? ftl_strdup(old) : NULL;
        setenv("FTL_NN_CACHE_BYTES", "12582912", 1); /* 12 MiB: a 4 MiB budget per layer */
        ftl_model *m = load(onnx, 8, NULL);
        if (saved) setenv("FTL_NN_CACHE_BYTES", saved, 1);
        else unsetenv("FTL_NN_CACHE_BYTES");
        if (m) {
            const ftl_model_info *i = ftl_model_get_info(m);
            printf("  micro-batches %d to %d images per layer\n", i->micro_batch_min, i->micro_batch);
            CHECK_EQ_INT(i->micro_batch_min, 2);
            CHECK_EQ_INT(i->micro_batch, 8);
            char *plan = nn_test_plan_text(m);
            int segments = 0;
            for (const char *q = plan; (q = strstr(q, "images at a time")); q++) segments++;
            CHECK(segments >= 2); /* 2 images in the early layers, 8 in the late ones */
            CHECK(strstr(plan, "depth-first") != NULL);
            free(plan);
            if (ftl_model_run(m, in, (int)n, got) == FTL_OK) {
                nn_npy w = {.data = want, .count = n * out_per};
                compare("batch 8 (+3), per-layer chunks", got, &w, 2e-5);
            } else {
                ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
            }
            ftl_model_free(m);
            /* the segments one after another (FTL_NN_SCHEDULE=breadth) run the same primitives on
             * the same images, only in another order: the rows must be bit-identical */
            setenv("FTL_NN_CACHE_BYTES", "12582912", 1);
            setenv("FTL_NN_SCHEDULE", "breadth", 1);
            float *got2 = malloc((size_t)(n * out_per) * sizeof *got2);
            ftl_model *m2 = load(onnx, 8, NULL);
            bool ran = m2 && ftl_model_run(m2, in, (int)n, got2) == FTL_OK;
            if (m2) {
                char *plan2 = nn_test_plan_text(m2);
                CHECK(strstr(plan2, "depth-first") == NULL);
                free(plan2);
            }
            unsetenv("FTL_NN_SCHEDULE");
            if (saved) setenv("FTL_NN_CACHE_BYTES", saved, 1);
            else unsetenv("FTL_NN_CACHE_BYTES");
            CHECK(ran);
            if (ran) CHECK(memcmp(got, got2, (size_t)(n * out_per) * sizeof *got) == 0);
            ftl_model_free(m2);
            free(got2);
        }
        free(saved);
        free(in);
        free(want);
        free(got);
    }
    nn_npy_free(&x);
    nn_npy_free(&y);
    free(onnx);
}

/* Per-layer micro-batches cutting Swin's windowed tensors ([N x 16 windows, 16, 8]: 16 rows per image):
 * nn_cases.py's windows_micro_batches with a 700 KiB budget per layer runs its wide products 2 images at
 * a time and the rest 8 at once; the Transpose moving the batch axis holds the small size up to the Add
 * that puts the images back outermost. 11 images (a tail plan of 3: 1 and 3 at a time) match ONNX
 * Runtime's rows, and depth-first equals segment after segment bit for bit. */
TEST(nn_windows_micro_batches) {
    nn_model_ref ref;
    if (!nn_op_case_read("windows_micro_batches", &ref)) {
        nn_model_ref_free(&ref);
        return;
    }
    if (ref.in.count % 8 || ref.out.count % 8) {
        ftl_test_fail(__FILE__, __LINE__, "windows_micro_batches: the reference is not 8 images");
    } else {
        int64_t in_per = ref.in.count / 8, out_per = ref.out.count / 8, n = 11;
        float *in = malloc((size_t)(n * in_per) * sizeof *in), *want = malloc((size_t)(n * out_per) * sizeof *want);
        for (int64_t i = 0; i < n; i++) { /* image i is reference image i % 8 */
            memcpy(in + i * in_per, ref.in.data + (i % 8) * in_per, (size_t)in_per * sizeof *in);
            memcpy(want + i * out_per, ref.out.data + (i % 8) * out_per, (size_t)out_per * sizeof *want);
        }
        nn_npy w = {.data = want, .count = n * out_per};
        const char *old = getenv("FTL_NN_CACHE_BYTES");
        char *saved = old ? ftl_strdup(old) : NULL;
        float *rows[2] = {NULL, NULL};
        for (int breadth = 0; breadth < 2; breadth++) {
            setenv("FTL_NN_CACHE_BYTES", "2150400", 1); /* 700 KiB per layer: 264 KiB per image in the wide ones */
            if (breadth) setenv("FTL_NN_SCHEDULE", "breadth", 1);
            ftl_model *m = load(ref.onnx, 8, NULL);
            unsetenv("FTL_NN_SCHEDULE");
            if (saved) setenv("FTL_NN_CACHE_BYTES", saved, 1);
            else unsetenv("FTL_NN_CACHE_BYTES");
            if (!m) continue;
            const ftl_model_info *i = ftl_model_get_info(m);
            CHECK_EQ_INT(i->micro_batch_min, 2);
            CHECK_EQ_INT(i->micro_batch, 8);
            char *plan = nn_test_plan_text(m);
            /* the boundary after the Add, where the images are outermost again */
            const char *two = strstr(plan, "-- 2 images at a time"), *eight = strstr(plan, "-- 8 images at a time");
            const char *add = strstr(plan, "(Add)"), *mul = strstr(plan, "(Mul)");
            CHECK(two && eight && add && mul && two < add && add < eight && eight < mul);
            free(plan);
            rows[breadth] = malloc((size_t)(n * out_per) * sizeof(float));
            if (ftl_model_run(m, in, (int)n, rows[breadth]) == FTL_OK) {
                compare(breadth ? "batch 8 (+3), windowed chunks, breadth-first" : "batch 8 (+3), windowed chunks",
                        rows[breadth], &w, 1e-5);
            } else {
                ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
                free(rows[breadth]);
                rows[breadth] = NULL;
            }
            ftl_model_free(m);
        }
        if (rows[0] && rows[1]) CHECK(memcmp(rows[0], rows[1], (size_t)(n * out_per) * sizeof(float)) == 0);
        free(rows[0]);
        free(rows[1]);
        free(saved);
        free(in);
        free(want);
    }
    nn_model_ref_free(&ref);
}

static float *run_resnet(const char *onnx, const float *in, int n, int batch, ftl_nn_conv_algorithm alg, int *wino) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = batch;
    o.conv_algorithm = alg;
    ftl_model *m = NULL;
    if (ftl_model_load(onnx, &o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s: %s", onnx, ftl_last_error());
        return NULL;
    }
    *wino = ftl_model_get_info(m)->winograd_convs;
    float *out = malloc((size_t)n * (size_t)ftl_model_get_info(m)->feature_dim * sizeof *out);
    if (ftl_model_run(m, in, n, out) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
        free(out);
        out = NULL;
    }
    ftl_model_free(m);
    return out;
}

/* Batch invariance on ResNet-50, the model with Winograd convs: with direct convolutions the rows of
 * 13 images are bit-identical at batch 1, 5 (+5+3) and 13; with Winograd (the default) the plan
 * picks it per layer from the micro-batch and oneDNN's Winograd schedule depends on it, so rows may
 * differ, but only in rounding (<= 1e-5 of the largest output). */
TEST(nn_torchvision_resnet50_batch_invariance) {
    char *onnx = NULL;
    nn_npy x = {0}, y = {0};
    if (resnet_refs(&onnx, &x, &y)) {
        int64_t in_per = x.count / 3, out_per = y.count / 3;
        const int n = 13;
        float *in = malloc((size_t)(n * in_per) * sizeof *in);
        for (int64_t i = 0; i < n; i++) /* image i: reference image i % 3, scaled so rows differ */
            for (int64_t k = 0; k < in_per; k++) in[i * in_per + k] = x.data[(i % 3) * in_per + k] * (1.0f + 0.01f * (float)i);
        double scale = nn_max_abs(y.data, y.count);
        const int batches[3] = {1, 5, 13};
        for (int alg = 0; alg < 2; alg++) {
            ftl_nn_conv_algorithm a = alg ? FTL_NN_CONV_AUTO : FTL_NN_CONV_DIRECT;
            float *rows[3] = {NULL, NULL, NULL};
            int wino[3] = {0, 0, 0};
            for (int b = 0; b < 3; b++) rows[b] = run_resnet(onnx, in, n, batches[b], a, &wino[b]);
            for (int b = 1; b < 3 && rows[0]; b++) {
                if (!rows[b]) continue;
                double d = nn_max_abs_diff(rows[0], rows[b], n * out_per);
                printf("  %-6s batch 1 (%2d Winograd convs) vs %2d (%2d): max |diff| %.3g (max |out| %.4g)\n",
                       ftl_nn_conv_algorithm_name(a), wino[0], batches[b], wino[b], d, scale);
                /* oneDNN 2.6's AVX2 convolutions sum in an order that depends on the batch (docs/nn.md):
                 * there rows agree to rounding only */
                if (a == FTL_NN_CONV_DIRECT && !ftl_test_no_avx512_reason()) CHECK(d == 0);
                else CHECK(d <= 1e-5 * scale);
                if (a == FTL_NN_CONV_DIRECT && ftl_test_no_avx512_reason() && d != 0)
                    ftl_test_skip("bitwise",
                                  "rows differ by %.3g at batch %d (checked to 1e-5 of the largest output instead): "
                                  "oneDNN 2.6's AVX2 convolutions sum in an order that depends on the batch (%s)",
                                  d, batches[b], ftl_test_no_avx512_reason());
            }
            /* Winograd in use, more of it with more images per run (the weight-amortisation rule) */
            if (a == FTL_NN_CONV_AUTO && ftl_test_no_avx512_reason()) {
                CHECK(wino[0] == 0 && wino[2] == 0);
                ftl_test_skip("winograd", "%s", ftl_test_no_avx512_reason());
            } else if (a == FTL_NN_CONV_AUTO) CHECK(wino[0] > 0 && wino[2] > wino[0]);
            for (int b = 0; b < 3; b++) free(rows[b]);
        }
        free(in);
    }
    nn_npy_free(&x);
    nn_npy_free(&y);
    free(onnx);
}

/* Rows of `n` images run `batch` at a time (the caller frees). */
static float *run_rows(const char *onnx, const float *in, int n, int batch, int64_t out_per) {
    ftl_model *m = load(onnx, batch, NULL);
    if (!m) return NULL;
    float *out = malloc((size_t)(n * out_per) * sizeof *out);
    if (ftl_model_run(m, in, n, out) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run %s at batch %d: %s", onnx, batch, ftl_last_error());
        free(out);
        out = NULL;
    }
    ftl_model_free(m);
    return out;
}

/* Batch invariance of a transformer: 13 images give the same rows one at a time as 13 at once
 * (attention mixes tokens, never images; a Transpose that moves the batch axis must not mix them). */
static void check_batch_invariance(const char *name) {
    char *base = ftl_format("%s/ref/nn/torchvision/%s", ftl_test_build_dir(), name);
    char *onnx = ftl_format("%s.onnx", base), *in_p = ftl_format("%s.in.npy", base), *out_p = ftl_format("%s.out.npy", base);
    nn_npy x = {0}, y = {0};
    if (!nn_npy_read(in_p, &x) || !nn_npy_read(out_p, &y) || x.count % 3 || y.count % 3) {
        ftl_test_fail(__FILE__, __LINE__, "reference data for %s missing: run tests/ref/gen_nn.sh", name);
    } else {
        int64_t in_per = x.count / 3, out_per = y.count / 3;
        const int n = 13;
        float *in = malloc((size_t)(n * in_per) * sizeof *in);
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < in_per; k++) in[i * in_per + k] = x.data[(i % 3) * in_per + k] * (1.0f + 0.01f * (float)i);
        float *one = run_rows(onnx, in, n, 1, out_per), *all = run_rows(onnx, in, n, 13, out_per);
        if (one && all) {
            double d = nn_max_abs_diff(one, all, n * out_per), scale = nn_max_abs(one, n * out_per);
            printf("  %-18s batch 1 vs 13: max |diff| %.3g (max |out| %.4g)\n", name, d, scale);
            CHECK(d <= 1e-6 * (scale > 1 ? scale : 1));
            /* and the rows differ from image to image (the scaled copies are not the same input) */
            CHECK(nn_max_abs_diff(all, all + 3 * out_per, out_per) > 0);
        }
        free(one);
        free(all);
        free(in);
    }
    nn_npy_free(&x);
    nn_npy_free(&y);
    free(base);
    free(onnx);
    free(in_p);
    free(out_p);
}

TEST(nn_torchvision_vit_batch_invariance) { check_batch_invariance("vit_small"); }
TEST(nn_torchvision_swin_batch_invariance) { check_batch_invariance("swin_small_cfg"); }
