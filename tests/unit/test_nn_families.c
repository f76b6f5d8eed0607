/* One model per torchvision classification family (tests/ref/nn_families.py), each exported four ways
 * (opset 13 and 17, dynamic and fixed batch): ftl's logits against PyTorch's and against ONNX Runtime's
 * for the same file, within 1e-4 of the largest logit; and --precision bf16 (layer norm and softmax
 * accumulating in fp32) with a cosine >= 0.999 to PyTorch's fp32 logits, row by row. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const variants[] = {"op13", "op17", "op13_fixed", "op17_fixed"};

/* |ftl - ref| <= rel * max(1, max|ref|) (random-weight ResNet-50 logits reach ~600). */
static void compare(const char *what, const float *got, const nn_npy *ref, double rel) {
    nn_check_close(__FILE__, __LINE__, what, got, ref->data, ref->count, rel);
}

/* Runs the 3 reference images through `onnx` (batch 2: a full and a partial batch, where the
 * batch is dynamic); NULL (and the test failed) on an error. The caller frees. */
static float *run_model(const char *onnx, ftl_nn_precision precision, const nn_npy *x, int64_t out_count) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = 2;
    o.precision = precision;
    ftl_model *m = NULL;
    if (ftl_model_load(onnx, &o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s: %s", onnx, ftl_last_error());
        return NULL;
    }
    float *out = NULL;
    if (ftl_model_get_info(m)->feature_dim * 3 != out_count) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %lld features per image, the reference has %lld", onnx,
                      (long long)ftl_model_get_info(m)->feature_dim, (long long)(out_count / 3));
    } else {
        out = malloc((size_t)out_count * sizeof *out);
        if (ftl_model_run(m, x->data, 3, out) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "run %s: %s", onnx, ftl_last_error());
            free(out);
            out = NULL;
        }
    }
    ftl_model_free(m);
    return out;
}

static void check_family(const char *family) {
    char *base = ftl_format("%s/ref/nn/families/%s", ftl_test_build_dir(), family);
    char *in_p = ftl_format("%s.in.npy", base), *torch_p = ftl_format("%s.torch.npy", base);
    nn_npy x = {0}, want = {0};
    if (!nn_npy_read(in_p, &x) || !nn_npy_read(torch_p, &want) || want.count % 3) {
        ftl_test_fail(__FILE__, __LINE__, "reference data for %s missing: run tests/ref/gen_nn.sh", family);
    } else {
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            char *onnx = ftl_format("%s.%s.onnx", base, variants[v]), *ort_p = ftl_format("%s.%s.ort.npy", base, variants[v]);
            nn_npy ort = {0};
            if (!nn_npy_read(ort_p, &ort) || ort.count != want.count) {
                ftl_test_fail(__FILE__, __LINE__, "ONNX Runtime's output %s missing or of the wrong size", ort_p);
            } else {
                float *got = run_model(onnx, FTL_NN_FP32, &x, want.count);
                if (got) {
                    char what[64];
                    snprintf(what, sizeof what, "%s vs PyTorch", variants[v]);
                    compare(what, got, &want, 1e-4);
                    snprintf(what, sizeof what, "%s vs ONNX Runtime", variants[v]);
                    compare(what, got, &ort, 1e-4);
                }
                free(got);
            }
            nn_npy_free(&ort);
            free(onnx);
            free(ort_p);
        }
        char *onnx = ftl_format("%s.op13.onnx", base);
        float *got = NULL;
        if (ftl_test_no_bf16_reason()) ftl_test_skip("bf16", "%s", ftl_test_no_bf16_reason());
        else got = run_model(onnx, FTL_NN_BF16, &x, want.count);
        if (got) {
            double cos = nn_min_row_cosine(got, want.data, 3, want.count / 3);
            printf("  %-26s min row cosine to PyTorch fp32 %.6f\n", "op13 --precision bf16", cos);
            if (!(cos >= 0.999)) ftl_test_fail(__FILE__, __LINE__, "bf16 cosine %.6f < 0.999", cos);
        }
        free(got);
        free(onnx);
    }
    nn_npy_free(&x);
    nn_npy_free(&want);
    free(base);
    free(in_p);
    free(torch_p);
}

TEST(nn_family_alexnet) { check_family("alexnet"); }
TEST(nn_family_convnext) { check_family("convnext"); }
TEST(nn_family_densenet) { check_family("densenet"); }
TEST(nn_family_efficientnet) { check_family("efficientnet"); }
TEST(nn_family_efficientnet_v2) { check_family("efficientnet_v2"); }
TEST(nn_family_googlenet) { check_family("googlenet"); }
TEST(nn_family_inception_v3) { check_family("inception_v3"); }
/* MaxViT: MBConv blocks, then block and grid attention whose products are Einsums
 * ("BGHID,BGHJD->BGHIJ"), run as oneDNN matmuls on permuted views. */
TEST(nn_family_maxvit) { check_family("maxvit"); }
TEST(nn_family_mnasnet) { check_family("mnasnet"); }
TEST(nn_family_mobilenet_v2) { check_family("mobilenet_v2"); }
TEST(nn_family_mobilenet_v3) { check_family("mobilenet_v3"); }
TEST(nn_family_regnet) { check_family("regnet"); }
TEST(nn_family_resnet) { check_family("resnet"); }
TEST(nn_family_resnext) { check_family("resnext"); }
TEST(nn_family_shufflenet_v2) { check_family("shufflenet_v2"); }
TEST(nn_family_squeezenet) { check_family("squeezenet"); }
TEST(nn_family_swin) { check_family("swin"); }
TEST(nn_family_vgg) { check_family("vgg"); }
TEST(nn_family_vit) { check_family("vit"); }
