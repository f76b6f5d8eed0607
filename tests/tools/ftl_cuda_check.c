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
    for (int k = 0; k < 5; k++) {
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
    if (res[0] && res[2]) {
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

int main(int argc, char **argv) {
    ftl_log_set_level(FTL_LOG_WARN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines between the warnings on stderr */
    if (argc == 3 && strcmp(argv[1], "ops") == 0) return check_ops(argv[2]);
    if (argc == 3 && strcmp(argv[1], "family") == 0) return check_family(argv[2]);
    if (argc == 5 && strcmp(argv[1], "model") == 0) return check_model(argv[2], atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: ftl_cuda_check ops DIR | family BASE | model ONNX COUNT SIZE\n");
    return 2;
}
