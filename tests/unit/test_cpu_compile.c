/* src/nn/cpu/cpu_compile.c's unit test: the op cases that test its layout choices across families
 * (concats of convolutions into a pool, a Gemm between convolutions, squeeze-excite, a softmax head),
 * run by ftl and compared with ONNX Runtime's outputs in every layout. */
#include "nn_op_cases.h"
#include "test.h"

#include <stdlib.h>

TEST(cpu_compile_layouts_vs_onnxruntime) { nn_op_family_vs_onnxruntime("compile"); }
