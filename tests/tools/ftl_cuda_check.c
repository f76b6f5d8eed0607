/* The CUDA backend against references, on a real GPU (tests/gpu/run.sh) or on the emulated device
 * (tests/cuda_emu: host memory, ftl's own kernel source run on the CPU, reference cuDNN convolution
 * and cuBLAS GEMM), which is what can be checked of the GPU code without a GPU: run with
 * FTL_CUDA_DRIVER_LIBRARY / FTL_CUDNN_LIBRARY / FTL_CUBLAS_LIBRARY pointing at the emulator
 * (tests/e2e/test_cuda.sh does).
 *
 *   ftl_cuda_check ops DIR          every per-op case of DIR/manifest.txt vs ONNX Runtime's output
 *   ftl_cuda_check family BASE      BASE.op13.onnx and BASE.op17_fixed.onnx vs PyTorch (BASE.torch.npy)
 *   ftl_cuda_check model ONNX N S   N random S x S images through ftl_model_extract_features on the
 *                                   GPU (uint8 input scaled there) vs the CPU backend: fp32 within
 *                                   1e-4, bf16 and TF32 by cosine
 *   ftl_cuda_check head             20 training steps of the GPU head (ftl_device_head_engine_create)
 *                                   vs the CPU head and optimizer, for each optimizer, with and
 *                                   without dropout, and once through NCCL's allreduce (one rank):
 *                                   weights and optimizer state within 1e-5 relative, the same
 *                                   losses and hits, then an evaluation batch
 *
 * Prints `ok NAME` / `FAIL NAME` / `skip NAME: reason` lines (an op the GPU backend does not run yet
 * is a skip naming it). Real-GPU numbers (speed, TF32, the real cuDNN and cuBLAS) need tests/gpu/run.sh. */
#include "ftl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct npy { float *data; int64_t count, first; } npy;

/* A little-endian float32 C-order .npy (the reference generators' only kind). */
static bool npy_read(const char *path, npy *a) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char head[10];
    bool ok = fread(head, 1, 10, f) == 10 && memcmp(head, "\x93NUMPY", 6) == 0;
    size_t hl = ok ? (head[6] == 1 ? (size_t)(head[8] | head[9] << 8) : 0) : 0;
    char *h = ok && hl ? calloc(1, hl + 1) : NULL;
    ok = h && fread(h, 1, hl, f) == hl && strstr(h, "'<f4'") && strstr(h, "False");
    const char *sh = ok ? strstr(h, "'shape': (") : NULL;
    int64_t count = 1, first = -1;
    for (const char *p = sh ? sh + 10 : NULL; p && *p && *p != ')';) {
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p) break;
        if (first < 0) first = d;
        count *= d;
        p = end + strspn(end, ", ");
    }
    if (ok && sh) {
        a->data = malloc((size_t)count * sizeof(float) + 4);
        ok = fread(a->data, sizeof(float), (size_t)count, f) == (size_t)count;
        a->count = count;
        a->first = first;
    }
    free(h);
    fclose(f);
    return ok && sh;
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

static double min_row_cosine(const float *a, const float *b, int rows, int64_t dim) {
    double worst = 1;
    for (int r = 0; r < rows; r++) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t i = 0; i < dim; i++) {
            double x = a[r * dim + i], y = b[r * dim + i];
            ab += x * y, aa += x * x, bb += y * y;
        }
        double c = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
        if (!(c >= worst)) worst = c;
    }
    return worst;
}

/* Runs `count` rows of input on device `dev`; NULL with *why set when it cannot. */
static float *run(const char *onnx, ftl_device_kind dev, ftl_nn_precision prec, int batch, const float *in, int count,
                  int64_t *dim, char *why, size_t why_size, bool *unsupported) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = dev;
    o.precision = prec;
    o.batch = batch;
    ftl_model *m;
    ftl_status st = ftl_model_load(onnx, &o, &m);
    *unsupported = st == FTL_E_UNSUPPORTED;
    if (st != FTL_OK) {
        snprintf(why, why_size, "%s", ftl_last_error());
        return NULL;
    }
    if (dev == FTL_DEVICE_CUDA && ftl_model_get_info(m)->device_kind != FTL_DEVICE_CUDA) {
        snprintf(why, why_size, "did not run on the (emulated) GPU: %s", ftl_model_get_info(m)->device);
        ftl_model_free(m);
        return NULL;
    }
    *dim = ftl_model_get_info(m)->feature_dim;
    float *out = malloc((size_t)(*dim * count) * sizeof *out + 4);
    if (ftl_model_run(m, in, count, out) != FTL_OK) {
        snprintf(why, why_size, "%s", ftl_last_error());
        free(out);
        out = NULL;
    }
    ftl_model_free(m);
    return out;
}

static int failures;

/* Names of checks run with CUDA Graphs asked for (FTL_CUDA_GRAPHS=1), or on an emulated cuDNN
 * without NHWC convolutions (FTL_EMU_NO_NHWC=1), say so. */
static const char *tag(void) {
    const char *g = getenv("FTL_CUDA_GRAPHS"), *nchw = getenv("FTL_EMU_NO_NHWC");
    if (nchw && strcmp(nchw, "1") == 0) return "-nchw-fallback";
    return g && strcmp(g, "1") == 0 ? "-graphs" : "";
}

static void verdict(bool ok, const char *name, const char *fmt, double a, double b) {
    printf("%s cuda%s %s", ok ? "ok" : "FAIL", tag(), name);
    printf(fmt, a, b);
    printf("\n");
    if (!ok) failures++;
}

static void check_case(const char *name, const char *onnx, const npy *x, const npy *want, double tol, bool bf16) {
    char why[768];
    bool unsupported;
    int64_t dim = 0;
    int n = (int)x->first;
    float *got = run(onnx, FTL_DEVICE_CUDA, FTL_NN_FP32, n > 2 ? 2 : n, x->data, n, &dim, why, sizeof why, &unsupported);
    if (!got && unsupported && strstr(why, "not on the GPU backend yet")) {
        printf("skip cuda%s %s: %s\n", tag(), name, why);
        return;
    }
    if (!got || dim * n != want->count) {
        printf("FAIL cuda%s %s: %s\n", tag(), name, got ? "feature count differs from the reference" : why);
        failures++;
        free(got);
        return;
    }
    double scale = max_abs(want->data, want->count), d = max_diff(got, want->data, want->count);
    verdict(d <= tol * (scale > 1 ? scale : 1), name, ": fp32 max|diff| %.3g (reference max %.3g)", d, scale);
    free(got);
    if (!bf16) return;
    char bname[160];
    snprintf(bname, sizeof bname, "%s-bf16", name);
    got = run(onnx, FTL_DEVICE_CUDA, FTL_NN_BF16, n > 2 ? 2 : n, x->data, n, &dim, why, sizeof why, &unsupported);
    if (!got) {
        printf("FAIL cuda%s %s: %s\n", tag(), bname, why);
        failures++;
        return;
    }
    double c = min_row_cosine(got, want->data, n, dim);
    verdict(c >= 0.999, bname, ": min row cosine %.6f to the fp32 reference%.0s", c, 0);
    free(got);
}

static int check_ops(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL cuda ops: %s missing\n", path);
        return 1;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char name[128], model[160], input[160], output[160];
        double tol;
        if (sscanf(line, "%127s %159s %159s %159s %lf", name, model, input, output, &tol) != 5) continue;
        char mp[1200], ip[1200], op[1200];
        snprintf(mp, sizeof mp, "%s/%s", dir, model);
        snprintf(ip, sizeof ip, "%s/%s", dir, input);
        snprintf(op, sizeof op, "%s/%s", dir, output);
        npy x, y;
        if (!npy_read(ip, &x) || !npy_read(op, &y)) {
            printf("FAIL cuda op-%s: reference files unreadable\n", name);
            failures++;
        } else {
            char full[160];
            snprintf(full, sizeof full, "op-%s", name);
            check_case(full, mp, &x, &y, tol > 1e-4 ? tol : 1e-4, true);
        }
        free(x.data);
        free(y.data);
    }
    fclose(f);
    return failures != 0;
}

static int check_family(const char *base) {
    const char *name = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    char ip[1200], tp[1200];
    snprintf(ip, sizeof ip, "%s.in.npy", base);
    snprintf(tp, sizeof tp, "%s.torch.npy", base);
    npy x, want;
    if (!npy_read(ip, &x) || !npy_read(tp, &want)) {
        printf("FAIL cuda family-%s: reference files unreadable\n", name);
        return 1;
    }
    const char *variants[] = {"op13", "op17_fixed"};
    for (int v = 0; v < 2; v++) {
        char onnx[1200], full[160];
        snprintf(onnx, sizeof onnx, "%s.%s.onnx", base, variants[v]);
        snprintf(full, sizeof full, "family-%s-%s", name, variants[v]);
        check_case(full, onnx, &x, &want, 1e-4, v == 0);
    }
    free(x.data);
    free(want.data);
    return failures != 0;
}

/* Dataset bytes through extract_features: the GPU's uint8 path (scaled on the device) vs the CPU. */
static int check_model(const char *onnx, int count, int size) {
    const char *name = strrchr(onnx, '/') ? strrchr(onnx, '/') + 1 : onnx;
    size_t bytes = (size_t)count * size * size * 3;
    uint8_t *img = malloc(bytes);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < bytes; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        img[i] = (uint8_t)(s >> 56);
    }
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    float *res[5] = {0};
    int64_t dim = 0;
    const ftl_device_kind devs[5] = {FTL_DEVICE_CPU, FTL_DEVICE_CUDA, FTL_DEVICE_CUDA, FTL_DEVICE_CPU, FTL_DEVICE_CUDA};
    const ftl_nn_precision precs[5] = {FTL_NN_FP32, FTL_NN_FP32, FTL_NN_BF16, FTL_NN_BF16, FTL_NN_TF32};
    bool cpu_bf16 = ftl_nn_cpu_bf16_available();
    for (int k = 0; k < 5; k++) {
        if (k == 3 && !cpu_bf16) continue; /* the CPU's own bf16, the yardstick below */
        ftl_model_options o;
        ftl_model_options_init(&o);
        o.device = devs[k];
        o.precision = precs[k];
        o.batch = count > 1 ? count - 1 : 1; /* a full and a partial batch */
        ftl_model *m;
        if (ftl_model_load(onnx, &o, &m) != FTL_OK) {
            printf("FAIL cuda model-%s: load on %s: %s\n", name, ftl_device_kind_name(devs[k]), ftl_last_error());
            failures++;
            continue;
        }
        dim = ftl_model_get_info(m)->feature_dim;
        res[k] = malloc((size_t)(dim * count) * sizeof(float));
        if (ftl_model_extract_features(m, &pp, img, count, size, res[k]) != FTL_OK) {
            printf("FAIL cuda model-%s: run on %s: %s\n", name, ftl_device_kind_name(devs[k]), ftl_last_error());
            failures++;
            free(res[k]);
            res[k] = NULL;
        }
        ftl_model_free(m);
    }
    if (res[0] && res[1]) {
        double scale = max_abs(res[0], dim * count), d = max_diff(res[1], res[0], dim * count);
        char full[160];
        snprintf(full, sizeof full, "model-%s-uint8-input", name);
        verdict(d <= 1e-4 * (scale > 1 ? scale : 1), full, ": fp32 max|diff| to the CPU backend %.3g (max %.3g)", d, scale);
    }
    if (res[0] && res[2] && !cpu_bf16) {
        printf("skip cuda%s model-%s-bf16: this CPU has no bf16 kernels in oneDNN (bf16 needs AVX-512), so there is no "
               "CPU bf16 to hold the GPU's against\n", tag(), name);
    } else if (res[0] && res[2]) {
        char full[160];
        snprintf(full, sizeof full, "model-%s-bf16", name);
        double c = min_row_cosine(res[2], res[0], count, dim);
        double cpu = res[3] ? min_row_cosine(res[3], res[0], count, dim) : 0;
        /* bf16 on random bytes: as close as the CPU's own bf16 (within 0.001), or 0.999 */
        verdict(c >= 0.999 || c >= cpu - 1e-3, full, ": min row cosine %.6f to the CPU's fp32 (the CPU's own bf16: %.6f)", c, cpu);
    }
    if (res[0] && res[4]) {
        char full[160];
        snprintf(full, sizeof full, "model-%s-tf32", name);
        double c = min_row_cosine(res[4], res[0], count, dim);
        verdict(c >= 0.999, full, ": min row cosine %.6f to the CPU's fp32%.0s", c, 0);
    }
    for (int k = 0; k < 5; k++) free(res[k]);
    free(img);
    return failures != 0;
}

/* ---------------------------------------------------------------- the head on the GPU */

typedef struct head_case {
    const char *name;
    ftl_optimizer_kind kind;
    double momentum, weight_decay, dropout;
    bool nesterov, shuffled_positions;
    int dim, classes, rows;
    bool nccl; /* one rank through NCCL's allreduce between the gradient and the update */
    double label_smoothing;
} head_case;

/* One rank whose collectives can broadcast (a no-op): the head engine then opens NCCL. */
static ftl_status one_rank_broadcast(void *ctx, void *data, size_t bytes, int root) {
    (void)ctx, (void)data, (void)bytes, (void)root;
    return FTL_OK;
}
static const ftl_collectives one_rank = {.rank = 0, .world_size = 1, .local_rank = 0, .local_size = 1,
                                         .broadcast = one_rank_broadcast};

static double rel_diff(const float *a, const float *b, size_t n) {
    double m = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs((double)a[i] - (double)b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? m / scale : m;
}

static void check_head_case(const ftl_device *dev, const head_case *hc) {
    char name[96];
    snprintf(name, sizeof name, "head-%s", hc->name);
    ftl_head cpu;
    ftl_optimizer cpu_opt, gpu_opt;
    ftl_optimizer_config oc = ftl_optimizer_config_default(hc->kind);
    oc.momentum = hc->momentum;
    oc.nesterov = hc->nesterov;
    oc.weight_decay = hc->weight_decay;
    if (ftl_head_init(&cpu, hc->dim, hc->classes) != FTL_OK || ftl_optimizer_init(&cpu_opt, &oc, cpu.param_count) != FTL_OK ||
        ftl_optimizer_init(&gpu_opt, &oc, cpu.param_count) != FTL_OK) {
        printf("FAIL cuda %s: setup: %s\n", name, ftl_last_error());
        failures++;
        return;
    }
    cpu.dropout = (float)hc->dropout;
    cpu.label_smoothing = (float)hc->label_smoothing;
    ftl_head_init_glorot(&cpu, 7);
    ftl_head_engine *e = NULL;
    if (ftl_device_head_engine_create(dev, hc->dim, hc->classes, (size_t)hc->rows, cpu_opt.slot_count,
                                      hc->nccl ? &one_rank : NULL, &e) != FTL_OK ||
        e->load(e->ctx, cpu.params, cpu_opt.state, cpu_opt.slot_count) != FTL_OK) {
        printf("FAIL cuda %s: %s\n", name, ftl_last_error());
        failures++;
        ftl_head_free(&cpu);
        ftl_optimizer_free(&cpu_opt);
        ftl_optimizer_free(&gpu_opt);
        ftl_head_engine_free(e);
        return;
    }
    if (hc->nccl && !e->allreduce) {
        printf("skip cuda %s: NCCL could not be loaded (%s)\n", name, getenv("FTL_NCCL_LIBRARY") ? getenv("FTL_NCCL_LIBRARY") : "libnccl.so.2");
        ftl_head_engine_free(e);
        ftl_head_free(&cpu);
        ftl_optimizer_free(&cpu_opt);
        ftl_optimizer_free(&gpu_opt);
        return;
    }
    size_t D = (size_t)hc->dim, n = (size_t)hc->rows;
    float *x = malloc(n * D * sizeof *x);
    int32_t *labels = malloc(n * sizeof *labels);
    uint32_t *positions = malloc(n * sizeof *positions);
    ftl_metric_counts cc = {0}, gc = {0};
    bool ok = true;
    uint64_t state = 12345;
    for (int step = 0; step < 20 && ok; step++) {
        /* step 5 holds none of the global batch's rows (a rank with no share) */
        size_t rows = step == 5 ? 0 : n - (size_t)(step % 3);
        for (size_t i = 0; i < rows * D; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((double)(state >> 40) / 16777216.0 * 4.0 - 2.0);
        }
        for (size_t i = 0; i < rows; i++) {
            labels[i] = (int32_t)((i * 7 + (size_t)step) % (size_t)hc->classes);
            positions[i] = (uint32_t)((i * 13 + 5) % (n + 3));
        }
        ftl_row_draws draws = {.seed = 99, .step = step, .positions = hc->shuffled_positions ? positions : NULL,
                               .position_base = 3};
        float scale = 1.0f / (float)n;
        double lr = 0.01 * (1.0 + step * 0.05);
        ok = ftl_head_train_batch(&cpu, x, labels, rows, &draws, scale, &cc) == FTL_OK &&
             e->train_batch(e->ctx, x, labels, rows, &draws, cpu.dropout, cpu.label_smoothing, scale, &gc) == FTL_OK;
        if (ok && hc->nccl) ok = e->allreduce(e->ctx) == FTL_OK;
        if (!ok) break;
        ftl_optimizer_step(&cpu_opt, cpu.params, cpu.grads, lr);
        ftl_optimizer_update u;
        ftl_optimizer_next_update(&gpu_opt, lr, &u);
        ok = e->optimizer_step(e->ctx, &u) == FTL_OK;
    }
    float *gp = calloc(cpu.param_count, sizeof *gp), *gs = calloc(cpu.param_count * 2 + 1, sizeof *gs);
    ok = ok && e->store(e->ctx, gp, gs, cpu_opt.slot_count) == FTL_OK;
    if (!ok) {
        printf("FAIL cuda %s: %s\n", name, ftl_last_error());
        failures++;
    } else {
        double dp = rel_diff(gp, cpu.params, cpu.param_count);
        double ds = cpu_opt.slot_count ? rel_diff(gs, cpu_opt.state, cpu.param_count * (size_t)cpu_opt.slot_count) : 0;
        double dl = fabs(gc.loss_sum - cc.loss_sum) / fmax(fabs(cc.loss_sum), 1e-12);
        verdict(dp <= 1e-5 && ds <= 1e-5, name, ": weights %.2e, optimizer state %.2e relative after 20 steps", dp, ds);
        char n2[128];
        snprintf(n2, sizeof n2, "%s-metrics", name);
        /* a near-tie may flip one argmax on a real GPU (other summation order): one hit of slack */
        verdict(dl <= 1e-5 && fabs(gc.correct - cc.correct) <= 1 && gc.count == cc.count, n2,
                ": loss sums differ by %.2e relative, hits %+.0f", dl, gc.correct - cc.correct);
        /* evaluation: both from the CPU's weights */
        ftl_metric_counts ce = {0}, ge = {0};
        ok = e->load(e->ctx, cpu.params, cpu_opt.state, cpu_opt.slot_count) == FTL_OK &&
             ftl_head_evaluate_batch(&cpu, x, labels, n, &ce) == FTL_OK &&
             e->evaluate_batch(e->ctx, x, labels, n, &ge) == FTL_OK;
        snprintf(n2, sizeof n2, "%s-evaluate", name);
        double de = ok ? fabs(ge.loss_sum - ce.loss_sum) / fmax(fabs(ce.loss_sum), 1e-12) : 1;
        verdict(ok && de <= 1e-5 && fabs(ge.correct - ce.correct) <= 1 && ge.count == ce.count, n2,
                ": loss sums differ by %.2e relative, hits %+.0f", de, ge.correct - ce.correct);
    }
    free(gp);
    free(gs);
    free(x);
    free(labels);
    free(positions);
    ftl_head_engine_free(e);
    ftl_head_free(&cpu);
    ftl_optimizer_free(&cpu_opt);
    ftl_optimizer_free(&gpu_opt);
}

static int check_head(void) {
    ftl_device dev;
    if (ftl_device_select(FTL_DEVICE_CUDA, 0, &dev) != FTL_OK) {
        printf("skip cuda head: %s\n", ftl_last_error());
        return 0;
    }
    /* a label out of range is refused before anything runs, naming it */
    ftl_head_engine *e = NULL;
    if (ftl_device_head_engine_create(&dev, 8, 3, 4, 2, NULL, &e) == FTL_OK) {
        float x[8 * 2] = {0};
        int32_t bad[2] = {1, 3};
        ftl_metric_counts c = {0};
        ftl_status st = e->train_batch(e->ctx, x, bad, 2, NULL, 0.0f, 0.0f, 0.5f, &c);
        verdict(st != FTL_OK && strstr(ftl_last_error(), "label 3 of batch example 1"), "head-bad-label",
                "%.0s%.0s", 0, 0);
        ftl_head_engine_free(e);
    }
    static const head_case cases[] = {
        {"nadam-dropout", FTL_OPTIMIZER_NADAM, 0, 0, 0.3, false, false, 98, 7, 24, false, 0},
        {"adam-weight-decay-45-classes", FTL_OPTIMIZER_ADAM, 0, 1e-3, 0, false, false, 64, 45, 20, false, 0},
        {"sgd-nesterov-dropout-positions", FTL_OPTIMIZER_SGD, 0.9, 0, 0.5, true, true, 98, 7, 24, false, 0},
        {"sgd-plain", FTL_OPTIMIZER_SGD, 0, 0, 0, false, false, 33, 2, 16, false, 0},
        {"nadam-nccl-one-rank", FTL_OPTIMIZER_NADAM, 0, 0, 0.2, false, false, 64, 10, 16, true, 0},
        {"nadam-label-smoothing", FTL_OPTIMIZER_NADAM, 0, 0, 0.2, false, false, 98, 7, 24, false, 0.1},
        {"sgd-label-smoothing-45-classes", FTL_OPTIMIZER_SGD, 0.9, 0, 0, false, false, 64, 45, 20, false, 0.3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_head_case(&dev, &cases[i]);
    return failures != 0;
}

int main(int argc, char **argv) {
    ftl_log_set_level(FTL_LOG_WARN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines between the warnings on stderr */
    if (argc == 3 && strcmp(argv[1], "ops") == 0) return check_ops(argv[2]);
    if (argc == 3 && strcmp(argv[1], "family") == 0) return check_family(argv[2]);
    if (argc == 5 && strcmp(argv[1], "model") == 0) return check_model(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc == 2 && strcmp(argv[1], "head") == 0) return check_head();
    fprintf(stderr, "usage: ftl_cuda_check ops DIR | family BASE | model ONNX COUNT SIZE | head\n");
    return 2;
}
