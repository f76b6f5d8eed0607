/* The per-op cases by emitter family, and their comparison with ONNX Runtime (nn_op_cases.h). */
#include "nn_op_cases.h"
#include "test.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

/* Case-name prefixes per family (tests/ref/nn_cases.py names its cases after what they test). */
static const struct {
    const char *family;
    const char *prefixes[14];
} families[] = {
    {"conv", {"conv_", "bn_", "separable_"}},
    {"eltwise", {"act_", "clip_", "add_", "mul_", "sub_", "div_", "hardswish_", "silu_", "gelu_"}},
    {"pool", {"maxpool_", "avgpool_", "gap", "gmp"}},
    {"norm", {"reducemean_", "layernorm_"}},
    {"movement", {"flatten_", "reshape_", "squeeze_", "concat_", "transpose_", "pad_", "identity_", "fold_", "split_",
                  "class_token_", "roll_", "patch_merging", "windows_"}},
    {"matmul", {"matmul_", "gemm_", "einsum_", "attention_"}},
    {"compile", {"layout_"}},
};

const char *nn_op_case_family(const char *name, int *matches) {
    const char *found = NULL;
    *matches = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        bool hit = false;
        for (int p = 0; p < 14 && families[f].prefixes[p]; p++)
            hit |= strncmp(name, families[f].prefixes[p], strlen(families[f].prefixes[p])) == 0;
        if (hit) found = families[f].family, ++*matches;
    }
    return found;
}

float *nn_op_case_run(const char *model, const nn_npy *in, int batch, ftl_nn_precision prec, ftl_nn_conv_algorithm alg,
                      int64_t out_count, int *winograd_convs) {
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
    return nn_op_case_run(model, in, batch, prec, FTL_NN_CONV_AUTO, out_count, NULL);
}

void nn_op_family_vs_onnxruntime(const char *family) {
    char *dir = ftl_format("%s/ref/nn/ops", ftl_test_build_dir());
    char *text = nn_manifest_read(dir);
    if (!text) {
        free(dir);
        return;
    }
    int cases = 0, bad = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        nn_manifest_case mc;
        int matches;
        if (!nn_manifest_parse(line, &mc)) continue;
        const char *of = nn_op_case_family(mc.name, &matches);
        if (!of || strcmp(of, family) != 0) continue;
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
    if (cases < 1) ftl_test_fail(__FILE__, __LINE__, "no %s case in %s/manifest.txt", family, dir);
    if (ftl_test_no_bf16_reason()) ftl_test_skip("bf16", "%s (fp32 checked on all %d %s cases)", ftl_test_no_bf16_reason(), cases, family);
    printf("  %d %s cases, %d failed\n", cases, family, bad);
    free(text);
    free(dir);
}
