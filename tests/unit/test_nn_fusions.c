/* Fusions of the CPU plan, each against the unfused computation or PyTorch.
 * A 1x1 convolution with the 3x3 depthwise convolution after it fused as oneDNN's post-op: every
 * pair of the real MobileNetV2 that oneDNN has a fused kernel for runs as one step (at most the pairs the
 * graph has, counted here from the graph itself), and
 * the features equal those of the separate convolutions (FTL_NN_DEPTHWISE_FUSION=0) within 1e-5.
 * ConvNeXt's block tail (second linear layer, permute back, layer scale, residual add) as the product's
 * post-ops: no Mul step is left, and the features equal PyTorch's.
 * SiLU (x * Sigmoid(x)) as one swish activation fused into the conv before it. */
#include "nn_testutil.h"
#include "test.h"
#include "nn/model_parts.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Depthwise 3x3 convolutions (stride 1 or 2, padding 1 on every side) that alone read the output of a
 * 1x1 stride-1 convolution. */
static int fusable_pairs(const nn_graph *g) {
    int pairs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *d = &g->nodes[i];
        if (d->dead || d->op != NN_OP_CONV || d->p.kernel[0] != 3 || d->p.group <= 1 ||
            d->p.group != g->tensors[d->in[0]].shape.d[1] || d->p.pad_begin[0] != 1 || d->p.pad_begin[1] != 1 ||
            d->p.pad_end[0] != 1 || d->p.pad_end[1] != 1 || d->p.stride[0] > 2)
            continue;
        int pr = g->tensors[d->in[0]].producer;
        if (pr < 0 || g->nodes[pr].op != NN_OP_CONV || g->nodes[pr].p.kernel[0] != 1 || g->nodes[pr].p.group != 1) continue;
        int readers = 0;
        for (int j = 0; j < g->n_nodes; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++) readers += g->nodes[j].in[k] == d->in[0];
        pairs += readers == 1;
    }
    return pairs;
}

static float *features(const char *path, const float *input, int count, bool fused, int *fused_steps, int *pairs,
                       int64_t *dim) {
    ftl_model *m = nn_test_load(path, count, NULL, fused ? NULL : "FTL_NN_DEPTHWISE_FUSION");
    if (!m) return NULL;
    nn_model_parts parts;
    nn_model_get_parts(m, &parts);
    *fused_steps = 0;
    for (int i = 0; i < parts.backend->step_count(parts.plan); i++) {
        nn_step_info si;
        parts.backend->step_info(parts.plan, i, &si);
        *fused_steps += si.kind && strcmp(si.kind, "Conv+Depthwise") == 0;
    }
    *pairs = fusable_pairs(parts.graph);
    *dim = ftl_model_get_info(m)->feature_dim;
    float *out = malloc((size_t)(count * *dim) * sizeof *out);
    if (ftl_model_run(m, input, count, out) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
        free(out);
        out = NULL;
    }
    ftl_model_free(m);
    return out;
}

TEST(nn_depthwise_fusion_mobilenet_v2) {
    if (!__builtin_cpu_supports("avx2")) { /* the fused kernel is oneDNN's AVX-512 or AVX2 1x1 convolution */
        ftl_test_skip("nn_depthwise_fusion_mobilenet_v2", "this CPU has neither AVX-512 nor AVX2");
        return;
    }
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    const int count = 16;
    const int64_t per = 3 * 224 * 224;
    float *input = malloc((size_t)(count * per) * sizeof *input);
    uint64_t s = 7;
    for (int64_t i = 0; i < count * per; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        input[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 4.0 - 2.0);
    }
    int fused_steps = 0, unfused_steps = 0, pairs = 0, pairs2 = 0;
    int64_t dim = 0, dim2 = 0;
    float *a = features(path, input, count, true, &fused_steps, &pairs, &dim);
    float *b = features(path, input, count, false, &unfused_steps, &pairs2, &dim2);
    printf("  MobileNetV2: %d 1x1 -> depthwise pairs in the graph, %d fused steps (%d with the fusion off)\n", pairs,
           fused_steps, unfused_steps);
    CHECK(pairs >= 10); /* the stride-1 inverted residual blocks (stride 2 pads asymmetrically in this export) */
    /* oneDNN has a fused kernel for some shapes only (the rest run as two steps) */
    CHECK(fused_steps >= 1 && fused_steps <= pairs);
    CHECK_EQ_INT(unfused_steps, 0);
    if (a && b && dim == dim2) nn_check_close(__FILE__, __LINE__, "fused vs separate convolutions", a, b, count * dim, 1e-5);
    free(a);
    free(b);
    free(input);
    free(path);
}

TEST(nn_layer_scale_tail_convnext) {
    nn_model_ref r;
    ftl_model *m = NULL;
    if (nn_torchvision_ref_read("convnext_small_cfg", &r) && (m = nn_test_load(r.onnx, 3, NULL, NULL)) != NULL) {
        const nn_npy x = r.in, y = r.out;
        nn_model_parts parts;
        nn_model_get_parts(m, &parts);
        int muls = 0, adds = 0, blocks = 0, reference_products = 0;
        for (int i = 0; i < parts.graph->n_nodes; i++) blocks += parts.graph->nodes[i].op == NN_OP_MUL;
        for (int i = 0; i < parts.backend->step_count(parts.plan); i++) {
            nn_step_info si;
            parts.backend->step_info(parts.plan, i, &si);
            if (si.node < 0 || si.node >= parts.graph->n_nodes || si.reorder || si.kind) continue;
            muls += parts.graph->nodes[si.node].op == NN_OP_MUL;
            adds += parts.graph->nodes[si.node].op == NN_OP_ADD;
            reference_products += si.compute && si.impl && strncmp(si.impl, "ref", 3) == 0;
        }
        printf("  ConvNeXt (small configuration): %d layer-scale Muls in the graph, %d Mul and %d Add steps in the plan\n",
               blocks, muls, adds);
        CHECK(blocks >= 4);
        CHECK_EQ_INT(reference_products, 0); /* a fused tail never costs a reference kernel */
        if (ftl_test_no_avx512_reason()) {
            /* oneDNN 2.6's AVX2 matmul has no fast kernel with the tail's post-ops: the tail runs as nodes */
            ftl_test_skip("fused", "%s: the tail runs unfused (%d Mul, %d Add steps)", ftl_test_no_avx512_reason(), muls, adds);
        } else {
            CHECK_EQ_INT(muls, 0);
            CHECK_EQ_INT(adds, 0);
        }
        float *out = malloc((size_t)y.count * sizeof *out);
        if (ftl_model_run(m, x.data, 3, out) == FTL_OK) nn_check_close(__FILE__, __LINE__, "vs PyTorch", out, y.data, y.count, 2e-5);
        else ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
        free(out);
    }
    ftl_model_free(m);
    nn_model_ref_free(&r);
}

/* bf16 plans of a transformer write the linear products that only bf16 readers take (Q/K/V into the
 * fused attention, fc1 into fc2) as bf16: the plan has such steps and fewer reorders, and the
 * features stay those of PyTorch's fp32 model (row cosine >= 0.999) and of the plan without it. */
TEST(nn_bf16_products_vit) {
    if (ftl_test_no_avx512_reason()) {
        ftl_test_skip("nn_bf16_products_vit", "%s", ftl_test_no_avx512_reason());
        return;
    }
    nn_model_ref r;
    if (!nn_torchvision_ref_read("vit_small", &r)) {
        nn_model_ref_free(&r);
        return;
    }
    int bf16_products[2] = {0, 0}, steps[2] = {0, 0};
    float *out[2] = {malloc((size_t)r.out.count * sizeof(float)), malloc((size_t)r.out.count * sizeof(float))};
    for (int pass = 0; pass < 2; pass++) {
        ftl_model *m = nn_test_load_precision(r.onnx, 3, NULL, FTL_NN_BF16, pass == 1 ? "FTL_NN_BF16_PRODUCTS" : NULL);
        if (!m) continue;
        char *plan = nn_test_plan_text(m);
        /* a step line: "  index label impl  in-type dims layout -> out-type dims layout" */
        for (char *line = strtok(plan, "\n"); line; line = strtok(NULL, "\n")) {
            steps[pass] += strstr(line, " -> ") != NULL;
            /* brg: with native bf16, gemm:jit where oneDNN emulates it (AVX-512 without AVX512-BF16) */
            bool product = strstr(line, "brg:") || strstr(line, "gemm:jit");
            bf16_products[pass] += product && strstr(line, "-> bf16") && !strstr(line, "reorder of");
        }
        free(plan);
        if (ftl_model_run(m, r.in.data, 3, out[pass]) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
        ftl_model_free(m);
    }
    int64_t dim = r.out.count / 3;
    double to_torch = nn_min_row_cosine(out[0], r.out.data, 3, dim), to_f32_products = nn_min_row_cosine(out[0], out[1], 3, dim);
    printf("  ViT (small configuration), bf16: %d linear products written as bf16, %d steps (%d without); row cosine "
           "%.6f to PyTorch fp32, %.6f to the plan without\n",
           bf16_products[0], steps[0], steps[1], to_torch, to_f32_products);
    CHECK(bf16_products[0] >= 2);
    CHECK_EQ_INT(bf16_products[1], 0);
    CHECK(steps[0] < steps[1]);
    CHECK(to_torch >= 0.999);
    CHECK(to_f32_products >= 0.999);
    free(out[0]);
    free(out[1]);
    nn_model_ref_free(&r);
}

/* A partial last batch of a plan with per-layer micro-batches: ViT's layers at 2 images, its last layer
 * norm at 4 (a cache budget of 1 MB makes them so at batch 4), and 3 images run as chunks of 1 then 3.
 * The residual stream crosses that boundary, written at one image through the [tokens, batch, channels]
 * view of the attention's output projection, whose batch axis has extent 1 there: the plan used to
 * refuse it ("no per-image layout") in bf16, so an embed of a set whose size is not a multiple of the
 * batch failed at its last batch. Each precision: the 3 rows equal the first 3 of the full batch, bit
 * for bit (rows do not depend on batching).
 * Without AVX-512 the logits are the exception: oneDNN 2.6's AVX2 sgemm (the head's inner product; its
 * matmul too) takes the rows in blocks of 6 and sums a last block of 1 to 3 rows in another order, so
 * the head's 3 rows differ from the first 3 of 4 in the last bits (measured 9.5e-7 on logits up to
 * 4.06); there the rows that enter the head (the class token after the last layer norm) are still
 * checked bit for bit (the encoder's products run 197 and 394 rows here, last blocks of 5 and 4), and
 * the logits to 1e-6 of the largest. */
static bool partial_batch_rows(const nn_model_ref *r, ftl_nn_precision precision, const char *features_from,
                               float **full, float **part, int64_t *dim) {
    *full = *part = NULL;
    setenv("FTL_NN_CACHE_BYTES", "1000000", 1);
    ftl_model *m = nn_test_load_precision(r->onnx, 4, features_from, precision, NULL);
    unsetenv("FTL_NN_CACHE_BYTES");
    if (!m) return false;
    const ftl_model_info *info = ftl_model_get_info(m);
    int64_t per = info->input_floats, have = r->in.count / per;
    *dim = info->feature_dim;
    float *in = malloc((size_t)(4 * per) * sizeof *in);
    *full = malloc((size_t)(4 * *dim) * sizeof **full);
    *part = malloc((size_t)(3 * *dim) * sizeof **part);
    for (int i = 0; i < 4; i++) memcpy(in + i * per, r->in.data + (i % have) * per, (size_t)per * sizeof *in);
    in[3 * per] += 0.5f; /* the fourth image differs from the first */
    const char *name = ftl_nn_precision_name(precision);
    printf("  vit_small %s %s, batch 4: micro-batches %d to %d\n", name, info->feature_name, info->micro_batch_min,
           info->micro_batch);
    CHECK(info->micro_batch_min < info->micro_batch);
    bool ran = false;
    if (ftl_model_run(m, in, 4, *full) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "run 4: %s", ftl_last_error());
    else if (ftl_model_run(m, in, 3, *part) != FTL_OK)
        ftl_test_fail(__FILE__, __LINE__, "run 3 of 4 (%s): %s", name, ftl_last_error());
    else ran = true;
    free(in);
    ftl_model_free(m);
    return ran;
}

static void free_rows(float **full, float **part) {
    free(*full);
    free(*part);
    *full = *part = NULL;
}

/* The class token after the last layer norm, the head's input (gen_nn.sh writes its name). */
static char *vit_head_input(void) {
    char *path = ftl_format("%s/ref/nn/torchvision/vit_small.features_name.txt", ftl_test_build_dir());
    size_t len = 0;
    char *name = (char *)nn_test_read(path, &len);
    if (name) {
        name = realloc(name, len + 1);
        name[len] = 0;
        name[strcspn(name, "\n")] = 0;
    } else {
        ftl_test_fail(__FILE__, __LINE__, "cannot read %s: run tests/ref/gen_nn.sh", path);
    }
    free(path);
    return name;
}

TEST(nn_partial_batch_per_layer_micro_batches_vit) {
    nn_model_ref r;
    if (!nn_torchvision_ref_read("vit_small", &r)) {
        nn_model_ref_free(&r);
        return;
    }
    float *full = NULL, *part = NULL;
    int64_t dim = 0;
    if (partial_batch_rows(&r, FTL_NN_FP32, NULL, &full, &part, &dim)) {
        double d = nn_max_abs_diff(full, part, 3 * dim), scale = nn_max_abs(full, 3 * dim);
        printf("  fp32 logits: max |3 rows - first 3 of 4| %.3g (max |logit| %.3g)\n", d, scale);
        if (!ftl_test_no_avx512_reason()) {
            CHECK(d == 0);
        } else {
            CHECK(d <= 1e-6 * scale);
            if (d != 0)
                ftl_test_skip("bitwise",
                              "logits differ by %.3g (checked to 1e-6 of the largest, %.3g, and the head's input bit for "
                              "bit): this CPU has no AVX-512, and oneDNN 2.6's AVX2 sgemm sums a last block of 1 to 3 "
                              "rows in another order",
                              d, scale);
        }
    }
    free_rows(&full, &part);
    char *head_input = vit_head_input();
    if (head_input && partial_batch_rows(&r, FTL_NN_FP32, head_input, &full, &part, &dim))
        CHECK(memcmp(full, part, (size_t)(3 * dim) * sizeof *part) == 0);
    free(head_input);
    free_rows(&full, &part);
    if (ftl_test_no_bf16_reason()) {
        ftl_test_skip("bf16", "%s", ftl_test_no_bf16_reason());
    } else if (partial_batch_rows(&r, FTL_NN_BF16, NULL, &full, &part, &dim)) {
        CHECK(memcmp(full, part, (size_t)(3 * dim) * sizeof *part) == 0);
    }
    free_rows(&full, &part);
    nn_model_ref_free(&r);
}

/* Concats of slices (Swin's rolls and patch merging, ShuffleNet's channel split) as copies into
 * place, the slices left as views: the same bits as oneDNN's concat of copied slices, and at most
 * 1 in 2 slice copies left (Swin: 1 in 10). */
static void check_concat_copies(const char *name, int batch, int at_most_one_in) {
    nn_model_ref r;
    if (!nn_torchvision_ref_read(name, &r)) {
        nn_model_ref_free(&r);
        return;
    }
    float *out[2] = {malloc((size_t)r.out.count * sizeof(float)), malloc((size_t)r.out.count * sizeof(float))};
    int slice_steps[2] = {0, 0};
    bool ran = true;
    setenv("FTL_NN_GATHER_CHAINS", "0", 1); /* the concats' own copies, not the chains copied at once */
    for (int pass = 0; pass < 2; pass++) {
        ftl_model *m = nn_test_load(r.onnx, batch, NULL, pass == 1 ? "FTL_NN_CONCAT_COPIES" : NULL);
        if (!m) {
            ran = false;
            continue;
        }
        nn_model_parts parts;
        nn_model_get_parts(m, &parts);
        for (int i = 0; i < parts.backend->step_count(parts.plan); i++) { /* slices copied out */
            nn_step_info si;
            parts.backend->step_info(parts.plan, i, &si);
            slice_steps[pass] += si.node >= 0 && si.node < parts.graph->n_nodes && parts.graph->nodes[si.node].op == NN_OP_SLICE;
        }
        if (ftl_model_run(m, r.in.data, 3, out[pass]) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "run %s: %s", name, ftl_last_error());
            ran = false;
        }
        ftl_model_free(m);
    }
    unsetenv("FTL_NN_GATHER_CHAINS");
    if (ran) {
        double d = nn_max_abs_diff(out[0], out[1], r.out.count);
        printf("  %-20s slice copies %d -> %d; max |copies - oneDNN concat| %.3g\n", name, slice_steps[1], slice_steps[0], d);
        CHECK(d == 0);
        nn_check_close(__FILE__, __LINE__, "copies vs PyTorch", out[0], r.out.data, r.out.count, 2e-5);
        CHECK(slice_steps[0] * at_most_one_in <= slice_steps[1]);
    }
    free(out[0]);
    free(out[1]);
    nn_model_ref_free(&r);
}

TEST(nn_concat_copies_swin) { check_concat_copies("swin_small_cfg", 3, 10); }
TEST(nn_concat_copies_shufflenet) { check_concat_copies("shufflenet_v2_x0_5", 2, 2); }

/* Chains of data movement copied at once (cpu_movement_fusion.c): Swin's roll + window partition and back (the
 * way back adding the residual as it copies), in nn_cases.py's roll_window_partition (against ONNX
 * Runtime) and the torchvision Swin (against PyTorch). The floats are moved and added as the nodes' own
 * steps do, so the rows equal theirs bit for bit; there are `copies` gathers and `adds` gathers with the
 * residual, and the plan has fewer steps. */
static void check_gather_chains(const char *onnx, const nn_npy *in, const nn_npy *want, int batch, int images, int copies,
                                int adds) {
    float *out[2] = {malloc((size_t)want->count * sizeof(float)), malloc((size_t)want->count * sizeof(float))};
    int gathers[2] = {0, 0}, with_add[2] = {0, 0}, steps[2] = {0, 0};
    bool ran = true;
    for (int pass = 0; pass < 2; pass++) {
        ftl_model *m = nn_test_load(onnx, batch, NULL, pass == 1 ? "FTL_NN_GATHER_CHAINS" : NULL);
        if (!m) {
            ran = false;
            continue;
        }
        nn_model_parts parts;
        nn_model_get_parts(m, &parts);
        steps[pass] = parts.backend->step_count(parts.plan);
        for (int i = 0; i < steps[pass]; i++) {
            nn_step_info si;
            parts.backend->step_info(parts.plan, i, &si);
            gathers[pass] += strcmp(si.impl, "ftl:gather_copy") == 0;
            with_add[pass] += strcmp(si.impl, "ftl:gather_add") == 0;
            if (strncmp(si.impl, "ftl:gather", 10) == 0) /* what --profile calls them */
                CHECK(si.kind && strcmp(si.kind, strcmp(si.impl, "ftl:gather_add") == 0 ? "Movement+Add" : "Movement") == 0);
        }
        if (ftl_model_run(m, in->data, images, out[pass]) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "run %s: %s", onnx, ftl_last_error());
            ran = false;
        }
        ftl_model_free(m);
    }
    if (ran) {
        const char *file = strrchr(onnx, '/');
        printf("  %s: %d steps -> %d, chains copied at once: %d, and with their residual added: %d\n",
               file ? file + 1 : onnx, steps[1], steps[0], gathers[0], with_add[0]);
        CHECK_EQ_INT(gathers[0], copies);
        CHECK_EQ_INT(with_add[0], adds);
        CHECK_EQ_INT(gathers[1] + with_add[1], 0);
        CHECK(steps[0] < steps[1]);
        CHECK(memcmp(out[0], out[1], (size_t)want->count * sizeof(float)) == 0);
        nn_check_close(__FILE__, __LINE__, "chains copied at once vs reference", out[0], want->data, want->count, 2e-5);
    }
    free(out[0]);
    free(out[1]);
}

TEST(nn_gather_chains_roll_windows) {
    nn_model_ref r;
    if (nn_op_case_read("roll_window_partition", &r)) check_gather_chains(r.onnx, &r.in, &r.out, 2, 2, 1, 1);
    nn_model_ref_free(&r);
}

/* Swin's patch merging (nn_cases.py's patch_merging, against ONNX Runtime): two Slices by rows, four by
 * columns and their Concat, one copy instead of two passes (a copy per Slice, then one per Concat input) */
TEST(nn_gather_chains_patch_merging) {
    nn_model_ref r;
    if (nn_op_case_read("patch_merging", &r)) check_gather_chains(r.onnx, &r.in, &r.out, 2, 2, 1, 0);
    nn_model_ref_free(&r);
}

/* swin_small_cfg: stages 1 and 2 of two blocks: the shifted block's roll + partition copied at once,
 * every block's way back with its residual (the unshifted ones' a partition reverse only), the patch
 * merging between the stages */
TEST(nn_gather_chains_swin) {
    nn_model_ref r;
    if (nn_torchvision_ref_read("swin_small_cfg", &r)) check_gather_chains(r.onnx, &r.in, &r.out, 3, 3, 3, 4);
    nn_model_ref_free(&r);
}

/* The same chains in a bf16 plan: the window partitions that only the QKV products read are written as
 * bf16 by their one copy (no f32 copy and conversion after it), and the way back adds the residual in
 * fp32 as in the fp32 plan (the residual stream stays fp32, as PyTorch's autocast keeps it). Rows within
 * bf16's cosine of PyTorch's fp32 and of the plan without chains. */
TEST(nn_gather_chains_swin_bf16) {
    if (ftl_test_no_bf16_reason()) { /* the fp32 chains: nn_gather_chains_swin */
        ftl_test_skip("all", "%s", ftl_test_no_bf16_reason());
        return;
    }
    nn_model_ref r;
    if (!nn_torchvision_ref_read("swin_small_cfg", &r)) {
        nn_model_ref_free(&r);
        return;
    }
    int to_bf16[2] = {0, 0}, with_add[2] = {0, 0}, steps[2] = {0, 0};
    const int images = 3;
    float *out[2] = {malloc((size_t)r.out.count * sizeof(float)), malloc((size_t)r.out.count * sizeof(float))};
    bool ran = true;
    for (int pass = 0; pass < 2; pass++) {
        ftl_model *m = nn_test_load_precision(r.onnx, images, NULL, FTL_NN_BF16, pass == 1 ? "FTL_NN_GATHER_CHAINS" : NULL);
        if (!m) {
            ran = false;
            continue;
        }
        char *plan = nn_test_plan_text(m);
        for (char *line = strtok(plan, "\n"); line; line = strtok(NULL, "\n")) {
            steps[pass] += strstr(line, " -> ") != NULL;
            to_bf16[pass] += strstr(line, "ftl:gather_copy") && strstr(line, "f32") && strstr(line, "-> bf16");
            with_add[pass] += strstr(line, "ftl:gather_add") && strstr(line, "-> f32");
        }
        free(plan);
        if (ftl_model_run(m, r.in.data, images, out[pass]) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
            ran = false;
        }
        ftl_model_free(m);
    }
    if (ran) {
        int64_t dim = r.out.count / images;
        double to_torch = nn_min_row_cosine(out[0], r.out.data, images, dim);
        double to_plain = nn_min_row_cosine(out[0], out[1], images, dim);
        printf("  Swin (small configuration), bf16: %d steps -> %d; partitions copied to bf16 at once: %d, ways back "
               "adding the residual in fp32: %d; row cosine %.6f to PyTorch fp32, %.6f to the plan without chains\n",
               steps[1], steps[0], to_bf16[0], with_add[0], to_torch, to_plain);
        CHECK_EQ_INT(to_bf16[0], 2);
        CHECK_EQ_INT(with_add[0], 4);
        CHECK_EQ_INT(to_bf16[1] + with_add[1], 0);
        CHECK(steps[0] < steps[1]);
        CHECK(to_torch >= 0.999);
        CHECK(to_plain >= 0.999);
    }
    free(out[0]);
    free(out[1]);
    nn_model_ref_free(&r);
}

/* SiLU, x * Sigmoid(x), fused (nn_optimize's fuse_silu, then a swish post-op of the conv before it): the
 * nn_cases graphs run with no Sigmoid or Mul step where the sigmoid has no other reader, keep both where
 * it has, and equal ONNX Runtime (their values are also checked in both layouts by test_emit_<family>.c). */
static void check_silu(const char *name, int want_sigmoid_steps, int want_mul_steps) {
    nn_model_ref r;
    if (nn_op_case_read(name, &r)) {
        ftl_model *m = nn_test_load(r.onnx, (int)r.in.shape[0], NULL, NULL);
        if (m) {
            char *plan = nn_test_plan_text(m);
            int sigmoids = 0, muls = 0;
            for (const char *p = plan; p && (p = strstr(p, "(Sigmoid)")) != NULL; p++) sigmoids++;
            for (const char *p = plan; p && (p = strstr(p, "(Mul)")) != NULL; p++) muls++;
            printf("  %-22s %d Sigmoid and %d Mul steps (want %d and %d)\n", name, sigmoids, muls, want_sigmoid_steps,
                   want_mul_steps);
            CHECK_EQ_INT(sigmoids, want_sigmoid_steps);
            CHECK_EQ_INT(muls, want_mul_steps);
            free(plan);
            nn_check_against_ref(m, &r, name);
            ftl_model_free(m);
        }
    }
    nn_model_ref_free(&r);
}

TEST(nn_silu_fused) {
    check_silu("silu_after_conv", 0, 0);
    check_silu("silu_sigmoid_shared", 1, 1);
}
