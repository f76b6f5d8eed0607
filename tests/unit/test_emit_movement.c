/* src/nn/cpu/emit_movement.c's unit test: its op cases (reshapes, squeezes, transposes, concats,
 * pads, slices, gathers, splits and the movement chains of windowed attention) from
 * tests/ref/nn_cases.py, run by ftl and compared with ONNX Runtime's outputs: fp32 whole batch,
 * one image at a time, channels-last and blocked layouts forced, and bf16 (cosine) where the CPU
 * has it. */
#include "nn_op_cases.h"
#include "test.h"

#include <stdlib.h>

TEST(emit_movement_vs_onnxruntime) { nn_op_family_vs_onnxruntime("movement"); }
