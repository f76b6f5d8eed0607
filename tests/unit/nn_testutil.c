/* Helpers shared by the nn unit tests (see nn_testutil.h). */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t *nn_test_read(const char *path, size_t *size) {
    uint8_t *data;
    if (ftl_read_file(path, &data, size) != FTL_OK) return NULL;
    return data;
}

static bool ref_read(const char *dir, const char *name, nn_model_ref *r) {
    memset(r, 0, sizeof *r);
    char *base = ftl_format("%s/ref/nn/%s/%s", ftl_test_build_dir(), dir, name);
    char *in = ftl_format("%s.in.npy", base), *out = ftl_format("%s.out.npy", base);
    r->onnx = ftl_format("%s.onnx", base);
    bool ok = nn_npy_read(in, &r->in) && nn_npy_read(out, &r->out);
    if (!ok) ftl_test_fail(__FILE__, __LINE__, "reference data for %s missing: run tests/ref/gen_nn.sh", name);
    free(base);
    free(in);
    free(out);
    return ok;
}

bool nn_torchvision_ref_read(const char *name, nn_model_ref *r) { return ref_read("torchvision", name, r); }

bool nn_op_case_read(const char *name, nn_model_ref *r) { return ref_read("ops", name, r); }

void nn_check_against_ref(ftl_model *m, const nn_model_ref *r, const char *what) {
    int n = (int)r->in.shape[0];
    int64_t count = ftl_model_get_info(m)->feature_dim * n;
    if (count != r->out.count) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %lld features, the reference has %lld", what, (long long)count,
                      (long long)r->out.count);
        return;
    }
    float *out = malloc((size_t)count * sizeof *out);
    if (ftl_model_run(m, r->in.data, n, out) == FTL_OK)
        nn_check_close(__FILE__, __LINE__, "  vs ONNX Runtime", out, r->out.data, count, 1e-4);
    else
        ftl_test_fail(__FILE__, __LINE__, "run %s: %s", what, ftl_last_error());
    free(out);
}

void nn_model_ref_free(nn_model_ref *r) {
    nn_npy_free(&r->in);
    nn_npy_free(&r->out);
    free(r->onnx);
    r->onnx = NULL;
}

ftl_model *nn_test_load(const char *path, int batch, const char *features_from, const char *off_env) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    return nn_test_load_precision(path, batch, features_from, o.precision, off_env);
}

ftl_model *nn_test_load_precision(const char *path, int batch, const char *features_from, ftl_nn_precision precision,
                                  const char *off_env) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = batch;
    o.features_from = features_from;
    o.precision = precision;
    if (off_env) setenv(off_env, "0", 1);
    ftl_model *m = NULL;
    ftl_status st = ftl_model_load(path, &o, &m);
    if (off_env) unsetenv(off_env);
    if (st != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "load %s: %s", path, ftl_last_error());
    return st == FTL_OK ? m : NULL;
}

char *nn_test_plan_text(ftl_model *m) {
    char *plan = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&plan, &size);
    if (!f) return NULL;
    ftl_model_print_plan(m, f);
    fclose(f);
    return plan;
}

bool nn_npy_read(const char *path, nn_npy *out) {
    memset(out, 0, sizeof *out);
    size_t size;
    uint8_t *b = nn_test_read(path, &size);
    if (!b) {
        printf("  cannot read %s (reference data missing: run tests/ref/gen_nn.sh)\n", path);
        return false;
    }
    bool ok = false;
    size_t hlen = 0, start = 0;
    if (size >= 10 && memcmp(b, "\x93NUMPY", 6) == 0) {
        if (b[6] == 1) hlen = b[8] | (size_t)b[9] << 8, start = 10;
        else if (size >= 12) hlen = b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24, start = 12;
    }
    if (start && start + hlen <= size) {
        char *h = strndup((const char *)b + start, hlen);
        char *shape = strstr(h, "'shape': (");
        if (strstr(h, "'descr': '<f4'") && strstr(h, "'fortran_order': False") && shape) {
            char *p = shape + 10;
            out->count = 1;
            while (*p && *p != ')' && out->rank < 8) {
                char *end;
                long long d = strtoll(p, &end, 10);
                if (end == p) break;
                out->shape[out->rank++] = d;
                out->count *= d;
                p = end;
                while (*p == ',' || *p == ' ') p++;
            }
            size_t bytes = (size_t)out->count * 4;
            if (start + hlen + bytes == size) {
                out->data = malloc(bytes ? bytes : 4);
                memcpy(out->data, b + start + hlen, bytes);
                ok = true;
            }
        }
        free(h);
    }
    if (!ok) printf("  %s: not a float32 C-order .npy file\n", path);
    free(b);
    return ok;
}

void nn_npy_free(nn_npy *a) {
    free(a->data);
    a->data = NULL;
}

double nn_max_abs_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as the maximum */
    }
    return m;
}

double nn_cosine(const float *a, const float *b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

double nn_min_row_cosine(const float *a, const float *b, int rows, int64_t dim) {
    double m = 1.0;
    for (int r = 0; r < rows; r++) {
        double c = nn_cosine(a + (size_t)r * dim, b + (size_t)r * dim, dim);
        if (!(c >= m)) m = c;
    }
    return m;
}

double nn_max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

void nn_check_close(const char *file, int line, const char *what, const float *got, const float *ref, int64_t n,
                    double rel) {
    double d = nn_max_abs_diff(got, ref, n), scale = nn_max_abs(ref, n);
    double tol = rel * (scale > 1 ? scale : 1);
    printf("  %-34s max |ftl - ref| %.3g (max |ref| %.4g, tolerance %.3g)\n", what, d, scale, tol);
    if (!(d <= tol)) ftl_test_fail(file, line, "%s: %g > %g", what, d, tol);
}

char *nn_manifest_read(const char *dir) {
    char *manifest = ftl_format("%s/manifest.txt", dir);
    size_t size;
    char *text = (char *)nn_test_read(manifest, &size);
    if (!text) {
        ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_nn.sh (tests/run_tests.sh does)", manifest);
    } else {
        text = realloc(text, size + 1);
        text[size] = 0;
    }
    free(manifest);
    return text;
}

bool nn_manifest_parse(const char *line, nn_manifest_case *c) {
    return sscanf(line, "%127s %159s %159s %159s %lf", c->name, c->model, c->input, c->output, &c->tol) == 5;
}

uint16_t nn_test_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float nn_test_from_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float nn_test_value(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
