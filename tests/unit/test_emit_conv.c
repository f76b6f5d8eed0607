/* src/nn/cpu/emit_conv.c's unit test: its op cases (convolutions (plain, grouped, depthwise,
 * dilated, padded every way, Winograd), batch normalization folded into them) from
 * tests/ref/nn_cases.py, run by ftl and compared with ONNX Runtime's outputs: fp32 whole batch,
 * one image at a time, channels-last and blocked layouts forced, and bf16 (cosine) where the CPU
 * has it. */
#include "nn_op_cases.h"
#include "test.h"

#include <stdlib.h>

TEST(emit_conv_vs_onnxruntime) { nn_op_family_vs_onnxruntime("conv"); }

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
            float *a = nn_op_case_run(mp, &x, n, FTL_NN_FP32, FTL_NN_CONV_AUTO, y.count, &wino);
            float *b = nn_op_case_run(mp, &x, n, FTL_NN_FP32, FTL_NN_CONV_DIRECT, y.count, &direct);
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
