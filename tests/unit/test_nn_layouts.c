/* The CPU plan's image layouts, channels-last (acdb) and channel-blocked (nChw8c / nChw16c):
 * - the cases of tests/ref/nn_cases.py that once fell onto a scalar oneDNN kernel in one of the two
 *   (a MaxPool after a channel concat or after a GEMM-run conv; a squeeze-and-excitation gate onto a
 *   blocked image) run in both with no such step and equal ONNX Runtime's outputs;
 * - the default per CPU: blocked on AVX2 CPUs for convolutional backbones (nn_cpu_blocked_images),
 *   channels-last for one that reads channels last (ViT) and on AVX-512 CPUs. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first step of `plan` that runs oneDNN's scalar code (a `ref:` kernel, or the plain-NCHW
 * `simple_nchw` pooling), copied into line; false when there is none. */
static bool scalar_step(const char *plan, char *line, size_t size) {
    for (const char *p = plan; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), p);
        if (strstr(buf, " ref:") || strstr(buf, "simple_nchw")) {
            snprintf(line, size, "%s", buf);
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

TEST(nn_layouts_run_no_scalar_kernel_and_equal_onnxruntime) {
    const char *cases[] = {"layout_concat_convs_maxpool", "layout_gemm_conv_maxpool", "layout_conv_squeeze_excite"};
    const char *layouts[] = {"nhwc", "blocked"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nn_model_ref r;
        bool have = nn_op_case_read(cases[i], &r);
        for (int l = 0; l < 2 && have; l++) {
            setenv("FTL_NN_LAYOUT", layouts[l], 1);
            ftl_model *m = nn_test_load(r.onnx, (int)r.in.shape[0], NULL, NULL);
            unsetenv("FTL_NN_LAYOUT");
            if (!m) continue;
            char *plan = nn_test_plan_text(m), line[512];
            bool scalar = plan && scalar_step(plan, line, sizeof line);
            printf("  %-30s %-8s %s\n", cases[i], layouts[l], scalar ? line : "no scalar kernel");
            CHECK(plan != NULL);
            CHECK(!scalar);
            free(plan);
            nn_check_against_ref(m, &r, cases[i]);
            ftl_model_free(m);
        }
        nn_model_ref_free(&r);
    }
}

/* The layout of the first convolution's output in the plan of model `name` under tests' ref/nn/`dir`
 * (batch 2). */
static char *first_conv_layout(const char *dir, const char *name) {
    char *path = ftl_format("%s/ref/nn/%s/%s.onnx", ftl_test_build_dir(), dir, name);
    ftl_model *m = nn_test_load(path, 2, NULL, NULL);
    free(path);
    if (!m) return NULL;
    char *plan = nn_test_plan_text(m), *layout = NULL;
    const char *conv = plan ? strstr(plan, "(Conv)") : NULL;
    if (conv) {
        const char *end = strchr(conv, '\n');
        const char *sp = end;
        while (sp && sp > conv && sp[-1] != ' ') sp--;
        if (sp && end) layout = ftl_format("%.*s", (int)(end - sp), sp);
    }
    free(plan);
    ftl_model_free(m);
    return layout;
}

TEST(nn_layout_default_blocked_for_cnns_on_avx2) {
    bool avx2_only = __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f");
    char *resnet = first_conv_layout("torchvision", "resnet50"), *vit = first_conv_layout("torchvision", "vit_small");
    char *softmax_head = first_conv_layout("ops", "layout_cnn_softmax_head");
    setenv("FTL_NN_BLOCKED_IMAGES", "0", 1);
    char *resnet_off = first_conv_layout("torchvision", "resnet50");
    unsetenv("FTL_NN_BLOCKED_IMAGES");
    const char *want = avx2_only ? "aBcd8b" : "acdb";
    printf("  ResNet-50 convs write %s (want %s on this CPU), %s with FTL_NN_BLOCKED_IMAGES=0; a CNN with a softmax "
           "classifier %s; ViT's patch conv %s\n",
           resnet ? resnet : "?", want, resnet_off ? resnet_off : "?", softmax_head ? softmax_head : "?", vit ? vit : "?");
    CHECK(resnet && strcmp(resnet, want) == 0);
    CHECK(softmax_head && strcmp(softmax_head, want) == 0);
    CHECK(resnet_off && strcmp(resnet_off, "acdb") == 0);
    CHECK(vit && strcmp(vit, "acdb") == 0);
    free(resnet);
    free(softmax_head);
    free(resnet_off);
    free(vit);
}
