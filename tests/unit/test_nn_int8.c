/* --precision int8: calibrated int8 features of the shared backbones against their fp32 features
 * on hymenoptera photos (mean row cosine >= 0.99), every int8 convolution shape against a float
 * reference computed from the same integers, the scales table's round trip and checks, and the
 * calibration's determinism across batch sizes. */
#include "nn_testutil.h"
#include "test.h"
#include "nn/model_parts.h"
#include "nn/ir/quantize.h"
#include "util/alloc.h"
#include "util/error.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Up to `limit` photos of hymenoptera's split (both classes, sorted names, alternating), prepped
 * as `ftl prep` does at `size`; *count gets how many. */
static uint8_t *hymenoptera_images(const char *split, int size, int limit, int *count) {
    *count = 0;
    size_t per = (size_t)size * size * 3;
    uint8_t *all = malloc(per * (size_t)limit);
    ftl_image_prepper *prep = NULL;
    if (ftl_image_prepper_init(&prep, size) != FTL_OK) {
        free(all);
        return NULL;
    }
    const char *classes[2] = {"ants", "bees"};
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    for (int c = 0; c < 2; c++) {
        char *dir = ftl_format("%s/data/hymenoptera/%s/%s", ftl_test_shared_dir(), split, classes[c]);
        struct dirent **list = NULL;
        int k = scandir(dir, &list, NULL, alphasort);
        names[c] = calloc((size_t)(k > 0 ? k : 1), sizeof *names[c]);
        for (int i = 0; i < k; i++) {
            if (list[i]->d_name[0] != '.') names[c][n[c]++] = ftl_format("%s/%s", dir, list[i]->d_name);
            free(list[i]);
        }
        free(list);
        free(dir);
    }
    for (int i = 0; *count < limit && (i < n[0] || i < n[1]); i++)
        for (int c = 0; c < 2 && *count < limit; c++) {
            if (i >= n[c]) continue;
            size_t size_bytes = 0;
            uint8_t *b = nn_test_read(names[c][i], &size_bytes);
            if (b && ftl_image_prepper_run(prep, b, size_bytes, all + per * (size_t)*count, NULL) == FTL_OK) (*count)++;
            free(b); /* the GIF placeholder and anything else undecodable is skipped */
        }
    for (int c = 0; c < 2; c++) {
        for (int i = 0; i < n[c]; i++) free(names[c][i]);
        free(names[c]);
    }
    ftl_image_prepper_free(prep);
    return all;
}

/* Model options on the CPU at `batch` images a run. */
static ftl_model_options cpu_options(int batch) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.batch = batch;
    return o;
}

static float *features_of(const char *path, ftl_model_options *o, const ftl_nn_preprocess *pp, const uint8_t *images,
                          int count, int size, long long *dim, int *int8_convs) {
    ftl_model *m = NULL;
    if (ftl_model_load(path, o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s (%s): %s", path, ftl_nn_precision_name(o->precision), ftl_last_error());
        return NULL;
    }
    *dim = ftl_model_get_info(m)->feature_dim;
    if (int8_convs) *int8_convs = ftl_model_get_info(m)->int8_convs;
    float *f = malloc((size_t)count * (size_t)*dim * sizeof *f);
    if (ftl_model_extract_features(m, pp, images, count, size, f) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run %s: %s", path, ftl_last_error());
        free(f);
        f = NULL;
    }
    ftl_model_free(m);
    return f;
}

typedef struct int8_case {
    const char *model;
    int size, calibration_rows, rows;
    ftl_nn_scale scale;
    bool built;                /* a model the reference scripts made (build/ref/nn/torchvision), not a shared one */
} int8_case;

static void check_int8_against_fp32(const int8_case *c) {
    char *path = c->built ? ftl_format("%s/ref/nn/torchvision/%s.onnx", ftl_test_build_dir(), c->model)
                          : ftl_format("%s/models/%s.onnx", ftl_test_shared_dir(), c->model);
    int n_cal = 0, n_val = 0;
    uint8_t *cal = hymenoptera_images("train", c->size, c->calibration_rows, &n_cal);
    uint8_t *val = hymenoptera_images("val", c->size, c->rows, &n_val);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, c->scale);
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    ftl_nn_int8_scales *scales = NULL;
    if (!cal || !val || n_cal != c->calibration_rows || n_val != c->rows) {
        ftl_test_fail(__FILE__, __LINE__, "hymenoptera photos: %d and %d of %d and %d", n_cal, n_val, c->calibration_rows,
                      c->rows);
    } else if (ftl_nn_calibrate(path, &o, &pp, cal, n_cal, c->size, FTL_NN_CALIBRATION_PERCENTILE, &scales) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "calibrate %s: %s", c->model, ftl_last_error());
    } else {
        long long dim = 0, dim8 = 0;
        int int8_convs = 0;
        float *f32 = features_of(path, &o, &pp, val, n_val, c->size, &dim, NULL);
        o.precision = FTL_NN_INT8;
        o.int8_scales = scales;
        float *f8 = features_of(path, &o, &pp, val, n_val, c->size, &dim8, &int8_convs);
        if (f32 && f8 && dim == dim8) {
            double mean = 0, worst = 1;
            for (int r = 0; r < n_val; r++) {
                double cos = nn_cosine(f32 + (size_t)r * dim, f8 + (size_t)r * dim, dim);
                mean += cos / n_val;
                if (cos < worst) worst = cos;
            }
            printf("  %s: %d convolutions / products in int8 (%d scales), %d rows: mean cosine to fp32 %.5f, lowest %.5f\n", c->model,
                   int8_convs, ftl_nn_int8_scales_count(scales), n_val, mean, worst);
            CHECK(int8_convs > 0);
            CHECK(mean >= 0.99);
        }
        free(f32);
        free(f8);
    }
    ftl_nn_int8_scales_free(scales);
    free(cal);
    free(val);
    free(path);
}

TEST(nn_int8_mobilenet_v2_features_close_to_fp32) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    int8_case c = {"mobilenet_v2_1.0_224_features", 224, 64, 48, FTL_NN_SCALE_TF, false};
    check_int8_against_fp32(&c);
}

TEST(nn_int8_mobilenet_v1_embedding_close_to_fp32) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    int8_case c = {"mobilenet_v1_1.0_224_embedding", 224, 64, 48, FTL_NN_SCALE_TF, false};
    check_int8_against_fp32(&c);
}

/* a ViT (torchvision's, small, random weights): its linear layers in int8, attention products in fp32 */
TEST(nn_int8_vit_linear_layers_close_to_fp32) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    int8_case c = {"vit_small", 224, 16, 16, FTL_NN_SCALE_TORCH, true};
    check_int8_against_fp32(&c);
}

TEST(nn_int8_xception_features_close_to_fp32) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    int8_case c = {"xception_random", 299, 16, 16, FTL_NN_SCALE_TF, false};
    check_int8_against_fp32(&c);
}

/* ---- each int8 convolution against a float reference computed from the same integers ---- */

/* x's integer as an int8 node reads it: rounded to nearest (ties to even), saturated to u8 or s8. */
static double quantized_input(float x, float sx, bool xu) {
    double v = nearbyint((double)x / sx);
    return xu ? fmin(fmax(v, 0), 255) : fmin(fmax(v, -128), 127);
}

/* v through the node's fused activation (ReLU in these cases). */
static double fused_activation(const nn_node *c, double v) {
    for (int k = 0; k < c->n_post; k++)
        if (c->post[k].kind == NN_POST_ACT && c->post[k].act.kind == NN_ACT_RELU) v = fmax(v, 0);
    return v;
}

/* Fails the test when got differs from ref beyond float rounding of the final scaling. */
static void check_against_reference(const char *what, const char *name, const char *input_kind, const float *got,
                                    const double *ref, int64_t count) {
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < count; i++) {
        worst = fmax(worst, fabs(got[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    printf("  %s (%s): max |int8 - reference| %.3g of max %.3g\n", name, input_kind, worst, scale);
    if (!(worst <= 1e-5 * scale + 1e-6))
        ftl_test_fail(__FILE__, __LINE__, "%s: int8 %s differs from its integer reference by %.3g (max %.3g)", name, what,
                      worst, scale);
}

/* y[n][o][i][j] = sum over the group's channels and the kernel of q_x * q_w, scaled by s_x x s_w[o], plus
 * the bias, then the node's activation (ReLU here), in double. */
static void conv_reference(const nn_graph *g, const nn_node *c, const float *x, const nn_shape *xs, float sx, bool xu,
                           const nn_shape *ys, double *y) {
    const nn_params *p = &c->p;
    const nn_tensor *w = &g->tensors[c->in[1]];
    int64_t N = xs->d[0], C = xs->d[1], H = xs->d[2], W = xs->d[3], M = ys->d[1], OH = ys->d[2], OW = ys->d[3];
    int64_t G = p->group, cg = C / G, mg = M / G, KH = p->kernel[0], KW = p->kernel[1], per = cg * KH * KW;
    int8_t *qw = malloc((size_t)(M * per));
    float *osc = malloc((size_t)M * sizeof *osc), *qb = malloc((size_t)M * sizeof *qb);
    const float *bias = c->n_in > 2 && c->in[2] >= 0 ? g->tensors[c->in[2]].data : NULL;
    nn_quantize_conv_weights(w->data, M, per, sx, bias, qw, osc, qb);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < M; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    int64_t acc = 0, gi = o / mg;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t hi = i * p->stride[0] - p->pad_begin[0] + kh * p->dilation[0];
                                int64_t wi = j * p->stride[1] - p->pad_begin[1] + kw * p->dilation[1];
                                if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                                double v = quantized_input(x[((n * C + gi * cg + ci) * H + hi) * W + wi], sx, xu);
                                acc += (int64_t)v * qw[o * per + (ci * KH + kh) * KW + kw];
                            }
                    y[((n * M + o) * OH + i) * OW + j] =
                        fused_activation(c, (double)osc[o] * (double)acc + (bias ? bias[o] : 0));
                }
    free(qw);
    free(osc);
    free(qb);
}

static void check_int8_conv_case(const char *name, bool positive_input) {
    char *model = ftl_format("%s/ref/nn/ops/%s.onnx", ftl_test_build_dir(), name);
    char *input = ftl_format("%s/ref/nn/ops/%s.in.npy", ftl_test_build_dir(), name);
    nn_npy x;
    if (!nn_npy_read(input, &x)) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_nn.sh (tests/run_tests.sh does)", input);
        free(model);
        free(input);
        return;
    }
    if (positive_input) /* a u8 input (as after a ReLU) */
        for (int64_t i = 0; i < x.count; i++) x.data[i] = fabsf(x.data[i]);
    double mx = nn_max_abs(x.data, x.count);
    float sx = (float)(mx / (positive_input ? 255.0 : 127.0));
    char *names[1] = {"x"};
    float scales[1] = {sx};
    bool us[1] = {positive_input};
    ftl_nn_int8_scales *q = nn_int8_scales_make(names, scales, us, 1, "minmax", 1);
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.batch = (int)x.shape[0];
    o.precision = FTL_NN_INT8;
    o.int8_scales = q;
    ftl_model *m = NULL;
    if (ftl_model_load(model, &o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s: %s", name, ftl_last_error());
    } else {
        nn_model_parts parts;
        nn_model_get_parts(m, &parts);
        const nn_graph *g = parts.graph;
        const nn_node *c = &g->nodes[0];
        /* per image from the graph (its shapes are those of the last plan compiled), the batch from the input */
        nn_shape xsv = g->tensors[c->in[0]].shape, ysv = g->tensors[c->out[0]].shape;
        xsv.d[0] = ysv.d[0] = x.shape[0];
        const nn_shape *xs = &xsv, *ys = &ysv;
        int64_t count = nn_shape_count(ys);
        float *got = malloc((size_t)count * sizeof *got);
        double *ref = malloc((size_t)count * sizeof *ref);
        CHECK_EQ_INT(ftl_model_get_info(m)->int8_convs, 1);
        if (ftl_model_run(m, x.data, (int)x.shape[0], got) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "run %s: %s", name, ftl_last_error());
        } else {
            conv_reference(g, c, x.data, xs, sx, positive_input, ys, ref);
            check_against_reference("conv", name, positive_input ? "u8 input" : "s8 input", got, ref, count);
        }
        free(got);
        free(ref);
    }
    ftl_model_free(m);
    ftl_nn_int8_scales_free(q);
    nn_npy_free(&x);
    free(model);
    free(input);
}

TEST(nn_int8_convolutions_equal_their_integer_reference) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    const char *cases[] = {"conv_asym_pads_stride2", "conv_group2_rect_dilated", "conv_depthwise_s2", "conv_depthwise_mult2",
                           "conv_1x1_s2", "conv_same_upper_s2", "conv_same_lower", "conv_bn_relu", "conv_bias_bn"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_int8_conv_case(cases[i], false);
        check_int8_conv_case(cases[i], true);
    }
}

/* ---- each int8 matrix product (Gemm / MatMul by constant weights) against its integer reference ---- */

/* The first node that runs as an int8 matrix product, or NULL. */
static const nn_node *first_linear(const nn_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        if (nn_int8_linear_eligible(g, &g->nodes[i])) return &g->nodes[i];
    return NULL;
}

/* y[r][o] = s_x s_w[o] sum_i q_x[r][i] q_w[o][i] + bias[o] (the weights as [outs, k]: alpha and transB
 * applied, as the plan reads them), then ReLU when fused, in double. */
static void linear_reference(const nn_graph *g, const nn_node *c, const float *x, int64_t rows, int64_t k, float sx, bool xu,
                             int64_t outs, double *y) {
    const nn_tensor *bt = &g->tensors[c->in[1]];
    bool gemm = c->op == NN_OP_GEMM, tb = gemm && c->p.trans_b;
    float alpha = gemm ? c->p.alpha : 1.0f, beta = gemm ? c->p.beta : 1.0f;
    float *wt = malloc((size_t)(outs * k) * sizeof *wt), *bias = NULL;
    for (int64_t o = 0; o < outs; o++)
        for (int64_t i = 0; i < k; i++) wt[o * k + i] = alpha * ((const float *)bt->data)[tb ? o * k + i : i * outs + o];
    if (c->n_in > 2 && c->in[2] >= 0) {
        const nn_tensor *ct = &g->tensors[c->in[2]];
        bias = malloc((size_t)outs * sizeof *bias);
        for (int64_t o = 0; o < outs; o++) bias[o] = beta * ((const float *)ct->data)[ct->count == 1 ? 0 : o];
    }
    int8_t *qw = malloc((size_t)(outs * k));
    float *osc = malloc((size_t)outs * sizeof *osc), *qb = malloc((size_t)outs * sizeof *qb);
    nn_quantize_conv_weights(wt, outs, k, sx, bias, qw, osc, qb);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < outs; o++) {
            int64_t acc = 0;
            for (int64_t i = 0; i < k; i++) acc += (int64_t)quantized_input(x[r * k + i], sx, xu) * qw[o * k + i];
            y[r * outs + o] = fused_activation(c, (double)osc[o] * (double)acc + (bias ? bias[o] : 0));
        }
    free(wt);
    free(bias);
    free(qw);
    free(osc);
    free(qb);
}

static void check_int8_linear_case(const char *name, bool positive_input) {
    char *model = ftl_format("%s/ref/nn/ops/%s.onnx", ftl_test_build_dir(), name);
    char *input = ftl_format("%s/ref/nn/ops/%s.in.npy", ftl_test_build_dir(), name);
    nn_npy x;
    ftl_model *m = NULL, *fp = NULL;
    ftl_nn_int8_scales *q = NULL;
    if (!nn_npy_read(input, &x)) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_nn.sh (tests/run_tests.sh does)", input);
        free(model);
        free(input);
        return;
    }
    if (positive_input)
        for (int64_t i = 0; i < x.count; i++) x.data[i] = fabsf(x.data[i]);
    double mx = nn_max_abs(x.data, x.count);
    float sx = (float)(mx / (positive_input ? 255.0 : 127.0));
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.batch = (int)x.shape[0];
    /* the product reads a view of the input (Flatten / Reshape): its scale goes to that tensor */
    if (ftl_model_load(model, &o, &fp) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s: %s", name, ftl_last_error());
    } else {
        nn_model_parts parts;
        nn_model_get_parts(fp, &parts);
        const nn_node *c = first_linear(parts.graph);
        if (!c) {
            ftl_test_fail(__FILE__, __LINE__, "%s: no matrix product eligible for int8", name);
        } else {
            char *names[1] = {parts.graph->tensors[c->in[0]].name};
            float scales[1] = {sx};
            bool us[1] = {positive_input};
            q = nn_int8_scales_make(names, scales, us, 1, "minmax", 1);
        }
    }
    o.precision = FTL_NN_INT8;
    o.int8_scales = q;
    if (q && ftl_model_load(model, &o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s (int8): %s", name, ftl_last_error());
    } else if (q) {
        nn_model_parts parts;
        nn_model_get_parts(m, &parts);
        const nn_graph *g = parts.graph;
        const nn_node *c = first_linear(g);
        const nn_shape *ys = &g->tensors[c->out[0]].shape;
        int64_t k = g->tensors[c->in[0]].shape.d[g->tensors[c->in[0]].shape.rank - 1], outs = ys->d[ys->rank - 1];
        int64_t rows = x.count / k, count = rows * outs;
        float *got = malloc((size_t)count * sizeof *got);
        double *ref = malloc((size_t)count * sizeof *ref);
        CHECK_EQ_INT(ftl_model_get_info(m)->int8_convs, 1);
        if (ftl_model_run(m, x.data, (int)x.shape[0], got) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "run %s: %s", name, ftl_last_error());
        } else {
            linear_reference(g, c, x.data, rows, k, sx, positive_input, outs, ref);
            char kind[48];
            snprintf(kind, sizeof kind, "%s input, %lld rows", positive_input ? "u8" : "s8", (long long)rows);
            check_against_reference("product", name, kind, got, ref, count);
        }
        free(got);
        free(ref);
    }
    ftl_model_free(m);
    ftl_model_free(fp);
    ftl_nn_int8_scales_free(q);
    nn_npy_free(&x);
    free(model);
    free(input);
}

TEST(nn_int8_matrix_products_equal_their_integer_reference) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_int8_reason());
        return;
    }
    const char *cases[] = {"matmul_2d", "matmul_3d", "matmul_tokens_bias_relu"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_int8_linear_case(cases[i], false);
        check_int8_linear_case(cases[i], true);
    }
}

/* Where oneDNN's int8 kernels are not exact (no VNNI or AMX), int8 is refused with the reason. */
TEST(nn_int8_is_refused_where_its_kernels_saturate) {
    if (!ftl_test_no_int8_reason()) {
        ftl_test_skip("all", "this CPU has int8 dot-product instructions: int8 runs (the tests above check it)");
        return;
    }
    char *path = ftl_format("%s/models/mobilenet_v1_0.25_128.onnx", ftl_test_shared_dir());
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.precision = FTL_NN_INT8;
    ftl_nn_int8_scales *scales = NULL;
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    ftl_model_options c = o;
    c.precision = FTL_NN_FP32;
    CHECK(ftl_nn_calibrate(path, &c, &pp, NULL, 8, 0, FTL_NN_CALIBRATION_PERCENTILE, &scales) == FTL_OK);
    o.int8_scales = scales;
    ftl_model *m = NULL;
    CHECK(ftl_model_load(path, &o, &m) == FTL_E_UNSUPPORTED);
    CHECK(strstr(ftl_last_error(), "no int8 dot-product instructions") != NULL);
    CHECK(strstr(ftl_last_error(), "mobilenet_v1_0.25_128.onnx") != NULL);
    ftl_model_free(m);
    ftl_nn_int8_scales_free(scales);
    free(path);
}

/* ---- the scales table: round trip, and what a model file must not hold ---- */

TEST(nn_int8_scales_json_round_trip_and_bad_tables) {
    char *names[2] = {"a", "b/c\"d"};
    float scales[2] = {0.0123456789f, 3.5e-5f};
    bool us[2] = {true, false};
    ftl_nn_int8_scales *s = nn_int8_scales_make(names, scales, us, 2, "percentile-99.99", 512);
    char *json = ftl_nn_int8_scales_json(s);
    ftl_nn_int8_scales *back = NULL;
    CHECK(ftl_nn_int8_scales_from_json(json, "test", &back) == FTL_OK);
    if (back) {
        CHECK_STR_EQ(ftl_nn_int8_scales_hash(back), ftl_nn_int8_scales_hash(s));
        CHECK_EQ_INT(ftl_nn_int8_scales_rows(back), 512);
        CHECK_EQ_INT(ftl_nn_int8_scales_count(back), 2);
    }
    const char *bad[][2] = {
        {"{\"method\":\"minmax\",\"rows\":1,\"hash\":\"00\",\"tensors\":[[\"x\",0,false]]}", "has scale 0; a scale must be positive"},
        {"{\"method\":\"minmax\",\"rows\":1,\"hash\":\"00\",\"tensors\":[[\"x\",-0.5,false]]}", "has scale -0.5"},
        {"{\"method\":\"minmax\",\"rows\":1,\"hash\":\"00\",\"tensors\":[[\"x\",0.5,false]]}", "does not match the recorded"},
        {"{\"method\":\"minmax\",\"rows\":1,\"hash\":\"00\",\"tensors\":[[\"x\",0.5]]}", "entry 0 is not [name, scale, unsigned]"},
        {"{\"method\":\"minmax\",\"rows\":0,\"hash\":\"00\",\"tensors\":[]}", "expected {\"method\", \"rows\" >= 1"},
        {"{\"method\":", "int8 scales"},
        {"[1,2]", "expected {\"method\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ftl_nn_int8_scales *x = NULL;
        ftl_status st = ftl_nn_int8_scales_from_json(bad[i][0], "model.ftl", &x);
        if (st == FTL_OK || !strstr(ftl_last_error(), bad[i][1]) || !strstr(ftl_last_error(), "model.ftl"))
            ftl_test_fail(__FILE__, __LINE__, "table %zu: status %d, message '%s' (want '%s')", i, (int)st, ftl_last_error(),
                          bad[i][1]);
        ftl_nn_int8_scales_free(x);
    }
    free(json);
    ftl_nn_int8_scales_free(s);
    ftl_nn_int8_scales_free(back);
}

TEST(nn_int8_calibration_is_deterministic) {
    char *path = ftl_format("%s/models/mobilenet_v1_0.25_128.onnx", ftl_test_shared_dir());
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    ftl_nn_int8_scales *a = NULL, *b = NULL;
    o.batch = 8;
    CHECK(ftl_nn_calibrate(path, &o, &pp, NULL, 24, 0, FTL_NN_CALIBRATION_PERCENTILE, &a) == FTL_OK);
    o.batch = 5; /* other batches, other micro-batches: the same thresholds */
    CHECK(ftl_nn_calibrate(path, &o, &pp, NULL, 24, 0, FTL_NN_CALIBRATION_PERCENTILE, &b) == FTL_OK);
    if (a && b) CHECK_STR_EQ(ftl_nn_int8_scales_hash(a), ftl_nn_int8_scales_hash(b));
    ftl_nn_int8_scales_free(a);
    ftl_nn_int8_scales_free(b);
    free(path);
}

/* One pass (each tensor's tail of largest values) gives the scales the two passes (range, then
 * histogram) gave, byte for byte: real MobileNetV2 on hymenoptera photos, a partial last batch. */
TEST(nn_int8_one_pass_calibration_equals_two_passes) {
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    int n = 0;
    uint8_t *images = hymenoptera_images("train", 224, 20, &n);
    ftl_model_options o = cpu_options(8);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    ftl_nn_int8_scales *one = NULL, *two = NULL;
    CHECK(n == 20);
    CHECK(ftl_nn_calibrate(path, &o, &pp, images, n, 224, FTL_NN_CALIBRATION_PERCENTILE, &one) == FTL_OK);
    setenv("FTL_NN_CALIBRATION_ONE_PASS", "0", 1);
    CHECK(ftl_nn_calibrate(path, &o, &pp, images, n, 224, FTL_NN_CALIBRATION_PERCENTILE, &two) == FTL_OK);
    unsetenv("FTL_NN_CALIBRATION_ONE_PASS");
    if (one && two) {
        char *a = ftl_nn_int8_scales_json(one), *b = ftl_nn_int8_scales_json(two);
        CHECK(ftl_nn_int8_scales_count(one) == 50);
        CHECK_STR_EQ(a, b);
        free(a);
        free(b);
    }
    ftl_nn_int8_scales_free(one);
    ftl_nn_int8_scales_free(two);
    free(images);
    free(path);
}

static void count_second_passes(void *ctx, ftl_log_level level, bool output, const char *text) {
    (void)level;
    (void)output;
    if (strstr(text, "take a second pass")) ++*(int *)ctx;
}

/* Calibration computed in bf16 (FTL_NN_CALIBRATION_PRECISION=bf16; the default where bf16 runs at least
 * 1.2x fp32's rate) against fp32: the real MobileNetV2 on hymenoptera photos. The same tensors calibrated,
 * each scale within a few percent of fp32's (bf16 rounds each activation by up to 0.4%; the median scale
 * moves less), not all equal (the bf16 plan ran), and int8 features as close to fp32's with either. */
TEST(nn_int8_calibration_in_bf16_matches_fp32) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("nn_int8_calibration_in_bf16_matches_fp32", "%s", ftl_test_no_int8_reason());
        return;
    }
    if (!ftl_nn_cpu_bf16_available()) {
        ftl_test_skip("nn_int8_calibration_in_bf16_matches_fp32", "this CPU has no bf16 kernels in oneDNN (AVX-512)");
        return;
    }
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    int n_cal = 0, n_val = 0;
    uint8_t *cal = hymenoptera_images("train", 224, 24, &n_cal), *val = hymenoptera_images("val", 224, 16, &n_val);
    ftl_model_options o = cpu_options(8);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    ftl_nn_int8_scales *s[2] = {NULL, NULL};
    const char *names[2] = {"fp32", "bf16"};
    CHECK(n_cal == 24 && n_val == 16);
    int second_passes[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        setenv("FTL_NN_CALIBRATION_PRECISION", names[i], 1);
        /* one pass in either, each value seen once: a bf16 plan in its usual nChw16c would hand over the
         * 24-channel tensors' padding to 32 too (the tails then run short: a second pass) */
        ftl_log_set_level(FTL_LOG_DEBUG);
        ftl_log_set_sink(count_second_passes, &second_passes[i], false);
        if (ftl_nn_calibrate(path, &o, &pp, cal, n_cal, 224, FTL_NN_CALIBRATION_PERCENTILE, &s[i]) != FTL_OK)
            ftl_test_fail(__FILE__, __LINE__, "calibrate in %s: %s", names[i], ftl_last_error());
        ftl_log_set_sink(NULL, NULL, false);
        ftl_log_set_level(FTL_LOG_INFO);
    }
    CHECK_EQ_INT(second_passes[0], 0);
    CHECK_EQ_INT(second_passes[1], 0);
    setenv("FTL_NN_CALIBRATION_PRECISION", "fp16", 1);
    ftl_nn_int8_scales *bad = NULL;
    CHECK(ftl_nn_calibrate(path, &o, &pp, cal, n_cal, 224, FTL_NN_CALIBRATION_PERCENTILE, &bad) != FTL_OK);
    CHECK(strstr(ftl_last_error(), "FTL_NN_CALIBRATION_PRECISION='fp16': expected fp32, bf16 or auto") != NULL);
    unsetenv("FTL_NN_CALIBRATION_PRECISION");
    if (s[0] && s[1] && CHECK(s[0]->count == s[1]->count) && CHECK(s[0]->count == 50)) {
        double *rel = ftl_xcalloc((size_t)s[0]->count, sizeof *rel), worst = 0;
        int differ = 0;
        for (int k = 0; k < s[0]->count; k++) {
            CHECK_STR_EQ(s[0]->names[k], s[1]->names[k]);
            CHECK(s[0]->is_unsigned[k] == s[1]->is_unsigned[k]);
            rel[k] = fabs((double)s[1]->scale[k] / s[0]->scale[k] - 1.0);
            differ += s[1]->scale[k] != s[0]->scale[k];
            if (rel[k] > worst) worst = rel[k];
        }
        for (int a = 1; a < s[0]->count; a++) /* sorted, for the median */
            for (int b = a; b > 0 && rel[b - 1] > rel[b]; b--) {
                double t = rel[b];
                rel[b] = rel[b - 1];
                rel[b - 1] = t;
            }
        double median = rel[s[0]->count / 2];
        printf("  bf16 calibration: %d of %d scales differ from fp32's, median %.3f%%, largest %.3f%%\n", differ,
               s[0]->count, 100 * median, 100 * worst);
        CHECK(differ > 0);
        CHECK(median <= 0.01);
        CHECK(worst <= 0.03);
        free(rel);
        long long dim = 0, dim8 = 0;
        float *f32 = features_of(path, &o, &pp, val, n_val, 224, &dim, NULL), *f8[2] = {NULL, NULL};
        o.precision = FTL_NN_INT8;
        for (int i = 0; i < 2; i++) {
            o.int8_scales = s[i];
            f8[i] = features_of(path, &o, &pp, val, n_val, 224, &dim8, NULL);
        }
        if (f32 && f8[0] && f8[1] && CHECK(dim == dim8)) {
            double mean[2] = {0, 0};
            for (int i = 0; i < 2; i++)
                for (int r = 0; r < n_val; r++) mean[i] += nn_cosine(f32 + (size_t)r * dim, f8[i] + (size_t)r * dim, dim) / n_val;
            printf("  int8 features' mean cosine to fp32: calibrated in fp32 %.5f, in bf16 %.5f\n", mean[0], mean[1]);
            CHECK(mean[0] >= 0.99 && mean[1] >= 0.99);
            CHECK(fabs(mean[1] - mean[0]) <= 0.002);
        }
        free(f32);
        free(f8[0]);
        free(f8[1]);
    }
    ftl_nn_int8_scales_free(s[0]);
    ftl_nn_int8_scales_free(s[1]);
    ftl_nn_int8_scales_free(bad);
    free(cal);
    free(val);
    free(path);
}
