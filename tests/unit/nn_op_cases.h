/* The per-op cases of tests/ref/nn_cases.py (ONNX Runtime's outputs beside each), grouped by the CPU
 * emitter family that plans them (src/nn/cpu/emit_<family>.c), so each family's test
 * (tests/unit/test_emit_<family>.c) runs its own cases and test_emit_node.c checks that every case
 * has exactly one family. */
#ifndef FTL_NN_OP_CASES_H
#define FTL_NN_OP_CASES_H

#include "nn_testutil.h"

/* The family of a case by its name ("conv", "eltwise", "pool", "norm", "movement", "matmul", or
 * "compile" for the cases that test layout choices across families); NULL: none. *matches counts
 * the families whose prefixes match (exactly 1 when the table is right). */
const char *nn_op_case_family(const char *case_name, int *matches);
/* ftl on a case's model: batch images at a time, at a precision and conv algorithm; NULL (said)
 * when it fails or the output size differs. winograd_convs: optional. */
float *nn_op_case_run(const char *model, const nn_npy *in, int batch, ftl_nn_precision precision,
                      ftl_nn_conv_algorithm algorithm, int64_t out_count, int *winograd_convs);
/* Every case of the family against ONNX Runtime: fp32 with the whole batch, one image at a time,
 * channels-last and blocked forced (within the case's tolerance), and bf16 (row cosine >= 0.999)
 * where the CPU has it; a failure per differing case; at least one case. */
void nn_op_family_vs_onnxruntime(const char *family);

#endif
