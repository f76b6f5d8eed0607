/* Quantized ONNX models (tests/ref/nn_qdq.py: QDQ pairs, QLinearConv, QLinearMatMul, ConvInteger,
 * MatMulInteger; u8 and s8, per tensor and per channel, symmetric and not) run by ftl with their own
 * scales and compared with ONNX Runtime's outputs, graph optimisations off (its QDQ kernels as written)
 * and on (fused into its integer kernels): within one quantization step of the output. Their
 * convolutions must run in int8 on ftl's CPU backend. Malformed quantization is an error naming the
 * node. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

/* ftl's output for `in` at `batch` (NULL on failure); *int8_convs: convolutions and matrix products that
 * ran in int8. */
static float *run_quantized(const char *model, const nn_npy *in, int batch, ftl_nn_precision prec, int64_t out_count,
                            int *int8_convs) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = batch;
    o.precision = prec;
    o.device = FTL_DEVICE_CPU;
    ftl_model *m;
    if (ftl_model_load(model, &o, &m) != FTL_OK) {
        printf("  load %s: %s\n", model, ftl_last_error());
        return NULL;
    }
    int n = (int)in->shape[0];
    *int8_convs = ftl_model_get_info(m)->int8_convs;
    float *out = NULL;
    if (ftl_model_get_info(m)->feature_dim * n != out_count) {
        printf("  %s: %lld outputs per row, ONNX Runtime has %lld\n", model, ftl_model_get_info(m)->feature_dim,
               (long long)(out_count / n));
    } else {
        out = malloc((size_t)out_count * sizeof *out);
        if (ftl_model_run(m, in->data, n, out) != FTL_OK) {
            printf("  run %s: %s\n", model, ftl_last_error());
            free(out);
            out = NULL;
        }
    }
    ftl_model_free(m);
    return out;
}

TEST(nn_quantized_models_vs_onnxruntime) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    char *dir = ftl_format("%s/ref/nn/qdq", ftl_test_build_dir());
    char *text = nn_manifest_read(dir);
    if (!text) {
        free(dir);
        return;
    }
    int cases = 0, bad = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        nn_manifest_case mc;
        if (!nn_manifest_parse(line, &mc)) continue;
        const char *name = mc.name;
        double tol = mc.tol;
        cases++;
        char *mp = ftl_format("%s/%s", dir, mc.model), *ip = ftl_format("%s/%s", dir, mc.input);
        char *op = ftl_format("%s/%s", dir, mc.output), *opt = ftl_format("%s/%s.opt.npy", dir, name);
        nn_npy x, y, yo;
        bool ok = nn_npy_read(ip, &x) && nn_npy_read(op, &y) && nn_npy_read(opt, &yo);
        if (ok) {
            int n = (int)x.shape[0], convs_whole = 0, convs_single = 0, convs_int8 = 0;
            float *whole = run_quantized(mp, &x, n, FTL_NN_FP32, y.count, &convs_whole);
            float *single = run_quantized(mp, &x, 1, FTL_NN_FP32, y.count, &convs_single);
            /* --precision int8 on a quantized model: its own scales, nothing re-quantized */
            float *as_int8 = run_quantized(mp, &x, n, FTL_NN_INT8, y.count, &convs_int8);
            double d1 = whole ? nn_max_abs_diff(whole, y.data, y.count) : -1;
            double d2 = single ? nn_max_abs_diff(single, y.data, y.count) : -1;
            double d3 = whole ? nn_max_abs_diff(whole, yo.data, y.count) : -1;
            double d4 = whole && as_int8 ? nn_max_abs_diff(whole, as_int8, y.count) : -1;
            /* weights int8 kernels cannot take as they are (uint8 or asymmetric ones, scales along the input
             * channels) run as the float values they stand for; every other case runs its products in int8 */
            bool wants_float = strcmp(name, "qlinear_matmul_u8") == 0 || strcmp(name, "conv_integer_u8_weights") == 0 ||
                               strcmp(name, "qdq_conv_axis1_weights_bn") == 0;
            ok = whole && single && as_int8 && d1 >= 0 && d1 <= tol && d2 >= 0 && d2 <= tol && d3 >= 0 && d3 <= tol &&
                 d4 == 0 && (wants_float ? convs_whole == 0 : convs_whole > 0) && convs_whole == convs_single;
            printf("  %-48s %s max|diff| %.3g (batch %d), %.3g (batch 1), %.3g vs fused; step %.3g; int8 convs %d\n",
                   name, ok ? "ok  " : "FAIL", d1, n, d2, d3, tol, convs_whole);
            free(whole);
            free(single);
            free(as_int8);
            nn_npy_free(&x);
            nn_npy_free(&y);
            nn_npy_free(&yo);
        }
        if (!ok) {
            bad++;
            ftl_test_fail(__FILE__, __LINE__, "quantized case %s differs from ONNX Runtime (or failed to run)", name);
        }
        free(mp);
        free(ip);
        free(op);
        free(opt);
    }
    if (cases < 13) ftl_test_fail(__FILE__, __LINE__, "only %d cases in %s/manifest.txt", cases, dir);
    printf("  %d cases, %d failed\n", cases, bad);
    free(text);
    free(dir);
}

/* Each malformed model is refused at load, naming its node and what is wrong. */
TEST(nn_quantized_models_malformed) {
    static const struct {
        const char *file, *node, *why;
    } bad[] = {
        {"scale_zero", "quant_x", "positive and finite"},
        {"scale_negative", "quant_x", "positive and finite"},
        {"scale_nan", "quant_x", "positive and finite"},
        {"scales_mismatch", "dequant_x", "quantized as"},
        {"zero_point_int32", "quant_x", "int32"},
        {"zero_point_out_of_range", "quant_x", "outside uint8's range"},
        {"dynamic_quantize", "dyn", "DynamicQuantizeLinear"},
        {"scale_not_constant", "quant_runtime", "must be a constant"},
        {"float_op_on_integers", "relu_on_uint8", "reads the uint8 tensor"},
        {"qlinear_conv_two_inputs", "qconv_short", "2 inputs, expected 8 to 9"},
        {"quantize_no_output", "quant_nowhere", "no output"},
        {"dequantize_block_size", "dq_blocked", "attribute 'block_size' is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = ftl_format("%s/ref/nn/qdq/bad/%s.onnx", ftl_test_build_dir(), bad[i].file);
        ftl_model *m = NULL;
        ftl_status st = ftl_model_load(path, NULL, &m);
        const char *msg = ftl_last_error();
        bool ok = st != FTL_OK && !m && strstr(msg, bad[i].node) && strstr(msg, bad[i].why) && strstr(msg, path);
        printf("  %-26s %s %s\n", bad[i].file, ok ? "ok  " : "FAIL", st != FTL_OK ? msg : "(loaded)");
        if (!ok) ftl_test_fail(__FILE__, __LINE__, "%s: expected an error naming '%s' and '%s'", bad[i].file, bad[i].node,
                               bad[i].why);
        if (m) ftl_model_free(m);
        free(path);
    }
}
