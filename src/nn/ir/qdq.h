/* Quantized ONNX models (QDQ: QuantizeLinear/DequantizeLinear pairs; QLinearConv, QLinearMatMul;
 * ConvInteger, MatMulInteger) rewritten into ftl's float graph with the model's own scales.
 *
 * Every integer tensor of the model is held as the float value it stands for, (q - zero) x scale:
 * QuantizeLinear of an activation becomes FakeQuantize (that value, rounded and saturated as the
 * integer type would), DequantizeLinear of it the identity, integer weights and biases float
 * constants, a QLinear op its float op followed by FakeQuantize at its output's scale, and an
 * Integer op's int32 sums the float sums. Conv weights keep their scales (nn_tensor.weight_scale) so
 * that the CPU backend runs those convolutions in int8 on the model's own integers. */
#ifndef FTL_NN_QDQ_H
#define FTL_NN_QDQ_H

#include "nn/ir/graph.h"

/* Rewrites the quantized ops of a freshly imported graph (nothing to do: FTL_OK, g->quantized false).
 * Malformed quantization (a scale <= 0 or not finite, a zero point outside its type's range, scales
 * that are not constants, a DequantizeLinear that does not match its QuantizeLinear, an integer
 * tensor read by an op that cannot take one) is an error naming the node. */
ftl_status nn_qdq_lower(nn_graph *g);

/* FakeQuantize of n values (y may be x). */
void nn_fake_quantize(const float *x, float *y, size_t n, float scale, int zero, int lo, int hi);

#endif
