/* int8 post-training quantization: which convolutions run in int8 (the policy), their weights'
 * quantization, and the thresholds calibration finds for the tensors they read.
 *
 * Symmetric everywhere (zero points 0): weights s8 per output channel (scale max|w| / 127);
 * activations per tensor, u8 (scale T / 255) when every calibration value was >= 0 (after a ReLU)
 * and s8 (T / 127) otherwise, T the threshold of |x|. A convolution runs in int8 when its data
 * input has a scale; it writes its output requantized when every reader of that output is an
 * int8 convolution (no fused residual sum), else in fp32. */
#ifndef FTL_NN_QUANTIZE_H
#define FTL_NN_QUANTIZE_H

#include "ftl/nn.h"
#include "nn/ir/graph.h"

#include <stdbool.h>
#include <stdint.h>

/* The calibration a model runs with (public as ftl_nn_int8_scales). */
struct ftl_nn_int8_scales {
    int count;
    char **names;             /* graph tensors */
    float *scale;             /* real = scale x q */
    bool *is_unsigned;        /* u8 (else s8) */
    char method[32];          /* ftl_nn_calibration_method_name */
    int rows;                 /* calibration images */
    char hash[65];
};

/* A scales table from its parts (copied), hashed as calibration's are: for tests and importers. */
ftl_nn_int8_scales *nn_int8_scales_make(char *const *names, const float *scales, const bool *is_unsigned, int count,
                                        const char *method, int rows);
/* Sets s->hash from every field (int8_scales.c; for a table filled in place, as calibration does). */
void nn_int8_scales_rehash(ftl_nn_int8_scales *s);

/* Whether node n may run in int8: a 2-D convolution with constant weights, except the image stem
 * (3 channels of pixels) and the convolution reading the stem's output, which stay fp32 (they lose
 * the most). The graph's shapes must be inferred. */
bool nn_int8_conv_eligible(const nn_graph *g, const nn_node *n);

/* Whether node n may run in int8 as a matrix product: Gemm or MatMul of an activation by constant 2-D
 * float weights (a transformer's linear layers; the attention's products of two activations stay
 * float). */
bool nn_int8_linear_eligible(const nn_graph *g, const nn_node *n);
/* The axis of an eligible matrix product's weights that runs along its output columns (Gemm with transB
 * 0, else 1), or -2 when n is none. */
int nn_int8_linear_out_axis(const nn_graph *g, const nn_node *n);
/* A convolution or a matrix product that may run in int8. */
bool nn_int8_eligible(const nn_graph *g, const nn_node *n);

/* watch[t] = whether calibration needs tensor t's range: the data input of every eligible
 * convolution and matrix product (n_tensors entries). Returns how many. */
int nn_int8_watched(const nn_graph *g, bool *watch);

/* Per-tensor arrays for the plan from a tensor name -> (scale, unsigned) table: scale (0 none),
 * unsigned, and written (its producer is an eligible convolution without a fused sum and every
 * reader an eligible convolution reading it as data; never a graph output). Names the graph does
 * not have are an error naming the first, unless allow_missing (the bottom or top of a cut holds
 * only part of the calibrated graph). */
ftl_status nn_int8_tensor_arrays(const nn_graph *g, char *const *names, const float *scales, const bool *is_unsigned,
                                 int count, bool allow_missing, float *scale, bool *unsigned_out, bool *written);

/* A quantized model's (nn/qdq.h) graph after optimisation: each FakeQuantize whose output only
 * convolutions with the model's integer weights read as data is dropped, those convolutions read its
 * input, and that input records the FakeQuantize's scale, zero point and type (nn_tensor.int8_scale):
 * their own conversion to int8 rounds and saturates the same way, once. One whose output other ops
 * read too (a residual Add), or whose input has such a form already, stays, its output recording its
 * own form for the int8 convolutions among its readers. Returns the number dropped (the caller
 * compacts the graph). */
int nn_qdq_fold_fake_quant(nn_graph *g);
/* A quantized model's convolution or matrix product with its own integer weights (s8, zero point 0,
 * scales along the output channels or one for all): it runs in int8 on them. */
bool nn_qdq_int8_node(const nn_graph *g, const nn_node *n);
/* A quantized model's int8 plan arrays (zeroed by the caller) from the tensors' recorded forms; a
 * convolution whose output only such convolutions read writes it requantized. The rest of the graph
 * runs in float. */
void nn_qdq_plan_int8(const nn_graph *g, float *scale, bool *is_unsigned, bool *written, int *zero);

/* Quantizes a convolution's weights [m][per] to s8, symmetric per output channel, and gives the
 * output scales (input scale x weight scale) and the bias oneDNN 2.x adds to the integer sums
 * before scaling them (bias / output scale; 0 where bias is NULL). An all-zero channel gets
 * weight scale 1. */
void nn_quantize_conv_weights(const float *w, int64_t m, int64_t per, float input_scale, const float *bias,
                              int8_t *q, float *out_scales, float *q_bias);

/* The same with the weights' scales given (a quantized model's, nn_tensor.weight_scale): its integers
 * come back exactly. */
void nn_quantize_conv_weights_with(const float *w, int64_t m, int64_t per, float input_scale, const float *weight_scale,
                                   const float *bias, int8_t *q, float *out_scales, float *q_bias);

/* The scale of the tensor's int8 form for threshold T (u8 when min >= 0). */
float nn_int8_scale_of(double threshold, bool is_unsigned);

#endif
