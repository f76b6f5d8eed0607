/* Helpers shared by the nn unit tests: reference files (.npy, raw float32), comparisons. */
#ifndef FTL_NN_TESTUTIL_H
#define FTL_NN_TESTUTIL_H

#include "ftl.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct nn_npy {
    float *data;         /* float32 arrays only */
    int rank;
    int64_t shape[8];
    int64_t count;
} nn_npy;

/* Reads a little-endian float32 .npy (v1/v2 header, C order); false with a message on failure. */
bool nn_npy_read(const char *path, nn_npy *out);
void nn_npy_free(nn_npy *a);
/* Reads a whole file; NULL when missing. */
uint8_t *nn_test_read(const char *path, size_t *size);

/* A reference written by tests/ref/gen_nn.sh: NAME.onnx, its input and the reference output (PyTorch's
 * for a torchvision model, ONNX Runtime's for a per-op case). */
typedef struct nn_model_ref {
    char *onnx;
    nn_npy in, out;
} nn_model_ref;
/* Reads NAME's reference; false after a test failure naming it (the paths are freed by _free). */
bool nn_torchvision_ref_read(const char *name, nn_model_ref *r);
/* The same for a per-op case of tests/ref/nn_cases.py (ref/nn/ops/NAME: ONNX Runtime's output). */
bool nn_op_case_read(const char *name, nn_model_ref *r);
void nn_model_ref_free(nn_model_ref *r);
/* Runs m (loaded for the reference's batch) on r's input and fails the current test unless its
 * features equal r's output within 1e-4 of the largest (printed as "vs ONNX Runtime": for op cases);
 * `what` names it in messages. */
void nn_check_against_ref(ftl_model *m, const nn_model_ref *r, const char *what);
/* Loads the model at `path` for `batch` (features_from may be NULL), with the environment switch
 * `off_env` (e.g. "FTL_NN_FUSED_ATTENTION") set to 0 during the load when not NULL; NULL after a
 * test failure. */
ftl_model *nn_test_load(const char *path, int batch, const char *features_from, const char *off_env);
/* The same in a given precision (bf16 plans). */
ftl_model *nn_test_load_precision(const char *path, int batch, const char *features_from, ftl_nn_precision precision,
                                  const char *off_env);

/* The model's plan as `ftl inspect --plan` prints it, to free. */
char *nn_test_plan_text(ftl_model *m);

/* One line of a reference manifest (tests/ref: NAME MODEL INPUT.npy OUTPUT.npy TOLERANCE). */
typedef struct nn_manifest_case {
    char name[128], model[160], input[160], output[160];
    double tol;
} nn_manifest_case;
/* DIR/manifest.txt as NUL-terminated text to free, or NULL after a test failure naming the missing file. */
char *nn_manifest_read(const char *dir);
/* Parses one manifest line; false for a line that is not a case. */
bool nn_manifest_parse(const char *line, nn_manifest_case *c);
double nn_max_abs_diff(const float *a, const float *b, int64_t n);
double nn_max_abs(const float *a, int64_t n);
/* Fails the current test unless |got - ref| <= rel * max(1, max|ref|) everywhere; prints the figures
 * under `what`. */
void nn_check_close(const char *file, int line, const char *what, const float *got, const float *ref, int64_t n,
                    double rel);
double nn_cosine(const float *a, const float *b, int64_t n);
/* Smallest per-row cosine over `rows` rows of `dim` floats. */
double nn_min_row_cosine(const float *a, const float *b, int rows, int64_t dim);

/* f32 -> bf16 rounded to nearest even (no NaN handling: test data has none), and back. */
uint16_t nn_test_to_bf16(float f);
float nn_test_from_bf16(uint16_t b);
/* Deterministic values in [-1, 1) from a 64-bit LCG state. */
float nn_test_value(uint64_t *state);

#endif
