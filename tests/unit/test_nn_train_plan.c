/* The fine-tuning training plan (nn/train_plan.h) against PyTorch autograd (tests/ref/train_backward.py):
 * on graphs covering every op it differentiates - Conv (depthwise, grouped, strided, asymmetric pads,
 * dilations, bias), BatchNormalization with fixed statistics, ReLU/Clip/LeakyReLU/Sigmoid/HardSwish/Tanh,
 * Add and Mul with broadcast parameters, residual Adds, MaxPool/AveragePool/GlobalAveragePool, Concat,
 * Flatten/Reshape, Gemm (both transB) and MatMul on tokens - the forward output, the gradient of every
 * trained parameter and of the input match within 1e-4 of their largest value. The whole graph is
 * unfrozen (the cut at its input). */
#include "nn/onnx/load.h"
#include "nn/ir/shape.h"
#include "nn/ir/topo.h"
#include "nn/train_plan.h"
#include "nn/ir/trainable.h"
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void close_to(const char *what, const float *got, const float *want, int64_t n) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    double d = nn_max_abs_diff(got, want, n), tol = 1e-4 * (scale > 1e-3 ? scale : 1e-3);
    printf("    %-28s max |ftl - torch| %.3g (max |torch| %.3g)\n", what, d, scale);
    if (!(d <= tol)) ftl_test_fail(__FILE__, __LINE__, "%s: %g > %g", what, d, tol);
}

static void check_case(const char *dir, const char *name) {
    char *base = ftl_format("%s/%s", dir, name), *onnx = ftl_format("%s.onnx", base);
    char *xp = ftl_format("%s.x.npy", base), *rp = ftl_format("%s.r.npy", base), *yp = ftl_format("%s.y.npy", base);
    char *dxp = ftl_format("%s.dx.npy", base), *pp = ftl_format("%s.params.txt", base);
    nn_npy x = {0}, r = {0}, y = {0}, dx = {0};
    size_t plen = 0;
    char *params = (char *)nn_test_read(pp, &plen);
    nn_graph *g = NULL;
    nn_trainable tr = {0};
    nn_train_plan *plan = NULL;
    printf("  %s\n", name);
    if (!params || !nn_npy_read(xp, &x) || !nn_npy_read(rp, &r) || !nn_npy_read(yp, &y) || !nn_npy_read(dxp, &dx)) {
        ftl_test_fail(__FILE__, __LINE__, "reference data for %s missing: run tests/ref/gen_train.sh", name);
        goto done;
    }
    int batch = (int)x.shape[0];
    nn_cut_spec cut = {0, "x"};
    if (nn_load_checked(onnx, &g, NULL) != FTL_OK || nn_graph_prune(g, g->outputs[0]) != FTL_OK ||
        nn_infer_shapes(g, batch) != FTL_OK || nn_trainable_select(g, &cut, &tr) != FTL_OK ||
        nn_train_plan_create(g, &tr, batch, false, NULL, NULL, &plan) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", name, ftl_last_error());
        goto done;
    }
    float *out = malloc((size_t)y.count * sizeof *out), *dxg = malloc((size_t)x.count * sizeof *dxg);
    const float *in[1] = {x.data};
    float *bg[1] = {dxg};
    CHECK(tr.n_boundary == 1);
    if (nn_train_plan_forward(plan, in, out) == FTL_OK && nn_train_plan_backward(plan, r.data, bg) == FTL_OK) {
        close_to("forward output", out, y.data, y.count);
        close_to("d input", dxg, dx.data, dx.count);
        /* every parameter torch trained, by name */
        int seen = 0;
        params = realloc(params, plen + 1);
        params[plen] = 0;
        for (char *line = strtok(params, "\n"); line; line = strtok(NULL, "\n")) {
            int k;
            char pname[128];
            if (sscanf(line, "%d %127s", &k, pname) != 2) continue;
            char *gp = ftl_format("%s.grad.%d.npy", base, k);
            nn_npy want = {0};
            int idx = -1;
            for (int q = 0; q < tr.n_params; q++)
                if (strcmp(g->tensors[tr.params[q].tensor].name, pname) == 0) idx = q;
            if (idx < 0) ftl_test_fail(__FILE__, __LINE__, "%s: parameter %s not trained by ftl", name, pname);
            else if (nn_npy_read(gp, &want) && want.count == g->tensors[tr.params[idx].tensor].count) {
                char what[160];
                snprintf(what, sizeof what, "d %s (%s)", pname, nn_param_role_name(tr.params[idx].role));
                close_to(what, nn_train_plan_grads(plan) + nn_train_plan_param_offset(plan, idx), want.data, want.count);
                seen++;
            } else {
                ftl_test_fail(__FILE__, __LINE__, "%s: gradient of %s missing or of the wrong size", name, pname);
            }
            nn_npy_free(&want);
            free(gp);
        }
        CHECK_EQ_INT(seen, tr.n_params); /* ftl trains exactly what torch trained */
    } else {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", name, ftl_last_error());
    }
    free(out);
    free(dxg);
done:
    nn_train_plan_free(plan);
    if (tr.node) nn_trainable_free(&tr);
    if (g) nn_graph_free(g);
    nn_npy_free(&x);
    nn_npy_free(&r);
    nn_npy_free(&y);
    nn_npy_free(&dx);
    free(params);
    free(base);
    free(onnx);
    free(xp);
    free(rp);
    free(yp);
    free(dxp);
    free(pp);
}

TEST(nn_train_plan_backward_vs_torch) {
    char *dir = ftl_format("%s/ref/train/backward", ftl_test_build_dir()), *list = ftl_format("%s/cases.txt", dir);
    size_t len = 0;
    char *text = (char *)nn_test_read(list, &len);
    if (!text) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_train.sh", list);
    } else {
        text = realloc(text, len + 1);
        text[len] = 0;
        int cases = 0;
        char *save = NULL;
        for (char *name = strtok_r(text, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
            check_case(dir, name);
            cases++;
        }
        CHECK(cases >= 4);
    }
    free(text);
    free(list);
    free(dir);
}

/* Finite differences through the whole composed top of MobileNetV2 with --fine-tune-last 4 (depthwise
 * Conv, ReLU6, projection Conv, Conv_1 + ReLU6, the pooled features): for sampled weights, biases and
 * boundary values, (L(v + h) - L(v - h)) / 2h matches the plan's gradient, L = sum(features * r). */
static double loss_of(nn_train_plan *plan, const float *boundary, float *feat, const float *r, int64_t nf) {
    const float *in[1] = {boundary};
    if (nn_train_plan_forward(plan, in, feat) != FTL_OK) return NAN;
    double l = 0;
    for (int64_t i = 0; i < nf; i++) l += (double)feat[i] * r[i];
    return l;
}

TEST(nn_train_plan_mobilenet_v2_top_finite_differences) {
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    nn_graph *g = NULL;
    nn_trainable tr = {0};
    nn_train_plan *plan = NULL;
    const int batch = 2;
    nn_cut_spec cut = {4, NULL};
    if (nn_load_checked(path, &g, NULL) != FTL_OK || nn_graph_prune(g, g->outputs[0]) != FTL_OK ||
        nn_infer_shapes(g, batch) != FTL_OK || nn_trainable_select(g, &cut, &tr) != FTL_OK ||
        nn_train_plan_create(g, &tr, batch, false, NULL, NULL, &plan) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", path, ftl_last_error());
    } else {
        CHECK_EQ_INT(tr.n_boundary, 1);
        int bt = tr.boundary[0];
        int64_t nb = nn_shape_count(&g->tensors[bt].shape), nf = nn_shape_count(&g->tensors[g->outputs[0]].shape);
        float *x = malloc((size_t)nb * sizeof *x), *feat = malloc((size_t)nf * sizeof *feat);
        float *r = malloc((size_t)nf * sizeof *r), *dx = malloc((size_t)nb * sizeof *dx);
        uint64_t s = 12345;
        for (int64_t i = 0; i < nb; i++) { /* ReLU6 outputs: mostly in (0, 6), some exactly 0 */
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) / 9007199254740992.0;
            x[i] = u < 0.2 ? 0.0f : (float)(6.0 * (u - 0.2) / 0.8);
        }
        for (int64_t i = 0; i < nf; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            r[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
        }
        double l0 = loss_of(plan, x, feat, r, nf);
        float *bg[1] = {dx};
        CHECK(isfinite(l0));
        CHECK(nn_train_plan_backward(plan, r, bg) == FTL_OK);
        float *params = nn_train_plan_params(plan);
        const float *grads = nn_train_plan_grads(plan);
        int64_t np = nn_train_plan_param_count(plan);
        double worst = 0, gmax = 0;
        int checked = 0;
        for (int k = 0; k < 48; k++) { /* 40 parameters, 8 boundary values */
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            bool param = k < 40;
            int64_t i = (int64_t)((s >> 11) % (uint64_t)(param ? np : nb));
            float *v = param ? &params[i] : &x[i];
            if (!param && *v == 0.0f) continue; /* at ReLU6's kink of the layer before: no derivative */
            float keep = *v, h = 1e-2f * (fabsf(keep) > 0.1f ? fabsf(keep) : 0.1f);
            *v = keep + h;
            double lp = loss_of(plan, x, feat, r, nf);
            *v = keep - h;
            double lm = loss_of(plan, x, feat, r, nf);
            *v = keep;
            double fd = (lp - lm) / (2.0 * (double)h), an = param ? grads[i] : dx[i];
            double err = fabs(fd - an);
            worst = err > worst ? err : worst;
            gmax = fabs(an) > gmax ? fabs(an) : gmax;
            checked++;
        }
        printf("  %d sampled values: max |finite difference - gradient| %.3g (max |gradient| %.3g), loss %.4g\n", checked,
               worst, gmax, l0);
        CHECK(checked >= 40);
        CHECK(worst <= 2e-2 * (gmax > 1e-3 ? gmax : 1e-3));
        free(x);
        free(feat);
        free(r);
        free(dx);
    }
    nn_train_plan_free(plan);
    if (tr.node) nn_trainable_free(&tr);
    if (g) nn_graph_free(g);
    free(path);
}

/* Ten SGD (momentum 0.9) steps of a small CNN with --fine-tune-last 2 (two convs and a BN unfrozen, the
 * Gemm logits after them), softmax cross-entropy over 4 labelled images, the optimiser updating the plan's
 * parameter block in place: every step's loss and the final weights match PyTorch's float32 run
 * within 1e-5 relative. */
TEST(nn_train_plan_ten_sgd_steps_vs_torch) {
    char *base = ftl_format("%s/ref/train/backward/ten_steps", ftl_test_build_dir());
    char *onnx = ftl_format("%s.onnx", base), *bp = ftl_format("%s.boundary.npy", base);
    char *lp = ftl_format("%s.labels.txt", base), *sp = ftl_format("%s.losses.txt", base), *pp = ftl_format("%s.params.txt", base);
    nn_npy boundary = {0};
    size_t llen = 0, slen = 0, plen = 0;
    char *ltext = (char *)nn_test_read(lp, &llen), *stext = (char *)nn_test_read(sp, &slen), *ptext = (char *)nn_test_read(pp, &plen);
    nn_graph *g = NULL;
    nn_trainable tr = {0};
    nn_train_plan *plan = NULL;
    nn_cut_spec cut = {2, NULL};
    ftl_optimizer opt = {0};
    if (!ltext || !stext || !ptext || !nn_npy_read(bp, &boundary)) {
        ftl_test_fail(__FILE__, __LINE__, "reference data for ten_steps missing: run tests/ref/gen_train.sh");
    } else if (nn_load_checked(onnx, &g, NULL) != FTL_OK || nn_graph_prune(g, g->outputs[0]) != FTL_OK ||
               nn_infer_shapes(g, 4) != FTL_OK || nn_trainable_select(g, &cut, &tr) != FTL_OK ||
               nn_train_plan_create(g, &tr, 4, false, NULL, NULL, &plan) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "ten_steps: %s", ftl_last_error());
    } else {
        ltext = realloc(ltext, llen + 1), ltext[llen] = 0;
        stext = realloc(stext, slen + 1), stext[slen] = 0;
        ptext = realloc(ptext, plen + 1), ptext[plen] = 0;
        int labels[4];
        CHECK(sscanf(ltext, "%d %d %d %d", &labels[0], &labels[1], &labels[2], &labels[3]) == 4);
        CHECK_EQ_INT(tr.n_boundary, 1);
        ftl_optimizer_config oc = ftl_optimizer_config_default(FTL_OPTIMIZER_SGD);
        oc.momentum = 0.9;
        CHECK(ftl_optimizer_init(&opt, &oc, (size_t)nn_train_plan_param_count(plan)) == FTL_OK);
        float logits[16], dlogits[16];
        const float *in[1] = {boundary.data};
        char *save = NULL, *want_line = strtok_r(stext, "\n", &save);
        double worst_loss = 0;
        for (int step = 0; step < 10 && want_line; step++, want_line = strtok_r(NULL, "\n", &save)) {
            if (nn_train_plan_forward(plan, in, logits) != FTL_OK) break;
            double loss = 0;
            for (int i = 0; i < 4; i++) { /* mean softmax cross-entropy and its gradient */
                double mx = logits[i * 4], z = 0;
                for (int c = 1; c < 4; c++) mx = logits[i * 4 + c] > mx ? logits[i * 4 + c] : mx;
                for (int c = 0; c < 4; c++) z += exp(logits[i * 4 + c] - mx);
                loss += (log(z) + mx - logits[i * 4 + labels[i]]) / 4;
                for (int c = 0; c < 4; c++)
                    dlogits[i * 4 + c] = (float)((exp(logits[i * 4 + c] - mx) / z - (c == labels[i])) / 4);
            }
            double want = strtod(want_line, NULL), rel = fabs(loss - want) / fabs(want);
            worst_loss = rel > worst_loss ? rel : worst_loss;
            if (nn_train_plan_backward(plan, dlogits, NULL) != FTL_OK) break;
            ftl_optimizer_step(&opt, nn_train_plan_params(plan), nn_train_plan_grads(plan), 0.05);
        }
        printf("  10 steps: max relative difference of the loss to torch's, per step: %.3g\n", worst_loss);
        CHECK(worst_loss <= 1e-5);
        int seen = 0;
        for (char *line = strtok_r(ptext, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            int k;
            char name[128];
            if (sscanf(line, "%d %127s", &k, name) != 2) continue;
            char *fp = ftl_format("%s.final.%d.npy", base, k);
            nn_npy want = {0};
            int idx = -1;
            for (int q = 0; q < tr.n_params; q++)
                if (strcmp(g->tensors[tr.params[q].tensor].name, name) == 0) idx = q;
            if (idx >= 0 && nn_npy_read(fp, &want) && want.count == g->tensors[tr.params[idx].tensor].count) {
                const float *got = nn_train_plan_params(plan) + nn_train_plan_param_offset(plan, idx);
                double scale = 0, d = nn_max_abs_diff(got, want.data, want.count);
                for (int64_t i = 0; i < want.count; i++) scale = fabs(want.data[i]) > scale ? fabs(want.data[i]) : scale;
                printf("    %-6s after 10 steps: max |ftl - torch| %.3g (max |w| %.3g)\n", name, d, scale);
                CHECK(d <= 1e-5 * scale);
                seen++;
            } else {
                ftl_test_fail(__FILE__, __LINE__, "parameter %s: not trained by ftl, or its reference is missing", name);
            }
            nn_npy_free(&want);
            free(fp);
        }
        CHECK_EQ_INT(seen, tr.n_params);
    }
    ftl_optimizer_free(&opt);
    nn_train_plan_free(plan);
    if (tr.node) nn_trainable_free(&tr);
    if (g) nn_graph_free(g);
    nn_npy_free(&boundary);
    free(ltext);
    free(stext);
    free(ptext);
    free(base);
    free(onnx);
    free(bp);
    free(lp);
    free(sp);
    free(pp);
}

/* An op the plan has no backward for is an error naming the node, not a crash or a silent zero
 * gradient: ViT's decomposed LayerNorm (ReduceMean) after its last block. */
TEST(nn_train_plan_refuses_ops_without_backward) {
    char *path = ftl_format("%s/ref/nn/torchvision/vit_small.onnx", ftl_test_build_dir());
    nn_graph *g = NULL;
    nn_trainable tr = {0};
    nn_train_plan *plan = NULL;
    nn_cut_spec cut = {0, "/encoder/layers/encoder_layer_2/Add_1_output_0"};
    if (nn_load_checked(path, &g, NULL) != FTL_OK || nn_graph_prune(g, g->outputs[0]) != FTL_OK ||
        nn_infer_shapes(g, 2) != FTL_OK || nn_trainable_select(g, &cut, &tr) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", path, ftl_last_error());
    } else {
        CHECK(nn_train_plan_create(g, &tr, 2, false, NULL, NULL, &plan) == FTL_E_UNSUPPORTED);
        CHECK(plan == NULL);
        printf("  %s\n", ftl_last_error());
        CHECK(strstr(ftl_last_error(), "node '/encoder/ln/ReduceMean' (ReduceMean): fine-tuning cannot train through it") != NULL);
    }
    nn_train_plan_free(plan);
    if (tr.node) nn_trainable_free(&tr);
    if (g) nn_graph_free(g);
    free(path);
}
