/* Per-op tests: every graph built by tests/ref/nn_cases.py (Conv variants, BatchNormalization,
 * activations fused and alone, broadcasting binary ops, pools, shape ops, Gemm/MatMul) run by
 * ftl and compared with ONNX Runtime's outputs (tests/ref/nn_ort_batch.mjs), in fp32 with the
 * whole batch (the CPU's default layout, then channels-last and blocked forced), in fp32 one image
 * at a time, and in bf16 (cosine). */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

static float *run_case_with(const char *model, const nn_npy *in, int batch, ftl_nn_precision prec,
                            ftl_nn_conv_algorithm alg, int64_t out_count, int *winograd_convs) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = batch;
    o.precision = prec;
    o.conv_algorithm = alg;
    ftl_model *m;
    if (ftl_model_load(model, &o, &m) != FTL_OK) {
        printf("  load %s: %s\n", model, ftl_last_error());
        return NULL;
    }
    int n = (int)in->shape[0];
    float *out = NULL;
    if (winograd_convs) *winograd_convs = ftl_model_get_info(m)->winograd_convs;
    if (ftl_model_get_info(m)->feature_dim * n != out_count) {
        printf("  %s: %lld features per image, ONNX Runtime has %lld\n", model, ftl_model_get_info(m)->feature_dim,
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

static float *run_case(const char *model, const nn_npy *in, int batch, ftl_nn_precision prec, int64_t out_count) {
    return run_case_with(model, in, batch, prec, FTL_NN_CONV_AUTO, out_count, NULL);
}

TEST(nn_ops_vs_onnxruntime) {
    char *dir = ftl_format("%s/ref/nn/ops", ftl_test_build_dir());
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
        char *mp = ftl_format("%s/%s", dir, mc.model), *ip = ftl_format("%s/%s", dir, mc.input), *op = ftl_format("%s/%s", dir, mc.output);
        nn_npy x, y;
        bool ok = nn_npy_read(ip, &x) && nn_npy_read(op, &y);
        if (ok) {
            int n = (int)x.shape[0];
            float *whole = run_case(mp, &x, n, FTL_NN_FP32, y.count);
            float *single = run_case(mp, &x, 1, FTL_NN_FP32, y.count);
            /* both conv layouts on every CPU: the default is blocked on AVX2 CPUs, channels-last with AVX-512 */
            double dl[2] = {-1, -1};
            const char *layouts[2] = {"nhwc", "blocked"};
            for (int l = 0; l < 2; l++) {
                setenv("FTL_NN_LAYOUT", layouts[l], 1);
                float *forced = run_case(mp, &x, n, FTL_NN_FP32, y.count);
                unsetenv("FTL_NN_LAYOUT");
                if (forced) dl[l] = nn_max_abs_diff(forced, y.data, y.count);
                free(forced);
            }
            bool bf16 = !ftl_test_no_bf16_reason();
            float *bf = bf16 ? run_case(mp, &x, n, FTL_NN_BF16, y.count) : NULL;
            double d1 = whole ? nn_max_abs_diff(whole, y.data, y.count) : -1;
            double d2 = single ? nn_max_abs_diff(single, y.data, y.count) : -1;
            double c = bf ? nn_min_row_cosine(bf, y.data, n, y.count / n) : -1;
            ok = whole && single && (!bf16 || (bf && c >= 0.999)) && d1 <= tol && d2 <= tol && dl[0] >= 0 &&
                 dl[0] <= tol && dl[1] >= 0 && dl[1] <= tol;
            printf("  %-32s %s fp32 max|diff| %.2g (batch %d), %.2g (batch 1), %.2g / %.2g (channels-last / "
                   "blocked); bf16 cosine %.6f\n",
                   name, ok ? "ok  " : "FAIL", d1, n, d2, dl[0], dl[1], c);
            free(whole);
            free(single);
            free(bf);
        }
        if (!ok) {
            bad++;
            ftl_test_fail(__FILE__, __LINE__, "case %s differs from ONNX Runtime (or failed to run)", name);
        }
        nn_npy_free(&x);
        nn_npy_free(&y);
        free(mp);
        free(ip);
        free(op);
    }
    if (cases < 60) ftl_test_fail(__FILE__, __LINE__, "only %d cases in %s/manifest.txt", cases, dir);
    if (ftl_test_no_bf16_reason()) ftl_test_skip("bf16", "%s (fp32 checked on all %d cases)", ftl_test_no_bf16_reason(), cases);
    printf("  %d cases, %d failed\n", cases, bad);
    free(text);
    free(dir);
}

/* The Winograd cases really run Winograd kernels by default (else the ONNX Runtime comparison
 * above would only test direct convs), none with --conv-algorithm direct, and both agree with
 * ONNX Runtime. */
TEST(nn_winograd_used_by_default_and_direct_on_request) {
    const char *cases[] = {"conv_winograd_64ch_residual", "conv_winograd_80to96_odd", "conv_winograd_64ch_valid"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nn_model_ref r;
        if (nn_op_case_read(cases[i], &r)) {
            const char *mp = r.onnx;
            const nn_npy x = r.in, y = r.out;
            int n = (int)x.shape[0], wino = -1, direct = -1;
            float *a = run_case_with(mp, &x, n, FTL_NN_FP32, FTL_NN_CONV_AUTO, y.count, &wino);
            float *b = run_case_with(mp, &x, n, FTL_NN_FP32, FTL_NN_CONV_DIRECT, y.count, &direct);
            double da = a ? nn_max_abs_diff(a, y.data, y.count) : -1, db = b ? nn_max_abs_diff(b, y.data, y.count) : -1;
            printf("  %-30s auto: %d Winograd conv(s), max|diff| %.2g; direct: %d, max|diff| %.2g\n", cases[i], wino, da,
                   direct, db);
            if (ftl_test_no_avx512_reason()) { /* no Winograd kernels to pick: direct both ways */
                if (wino != 0 || direct != 0)
                    ftl_test_fail(__FILE__, __LINE__, "%s: %d / %d Winograd convs without AVX-512", cases[i], wino, direct);
                ftl_test_skip(cases[i], "Winograd not used: %s", ftl_test_no_avx512_reason());
            } else if (wino != 1 || direct != 0)
                ftl_test_fail(__FILE__, __LINE__, "%s: Winograd convs auto %d (want 1), direct %d (want 0)", cases[i], wino,
                              direct);
            if (!a || !b || !(da <= 1e-4) || !(db <= 1e-4))
                ftl_test_fail(__FILE__, __LINE__, "%s: differs from ONNX Runtime", cases[i]);
            free(a);
            free(b);
        }
        nn_model_ref_free(&r);
    }
}
