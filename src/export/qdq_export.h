/* The QDQ form of an int8-trained classifier's backbone: QuantizeLinear -> DequantizeLinear on every
 * tensor an int8 convolution or matrix product (Gemm, MatMul by an initializer) reads, with the
 * calibrated scale (u8 or s8, zero point 0), and the weights of those nodes as int8 per output channel
 * behind a DequantizeLinear, quantized as ftl quantizes them (symmetric, max|w| / 127). ONNX Runtime
 * then computes what ftl's int8 plan does. */
#ifndef FTL_EXPORT_QDQ_EXPORT_H
#define FTL_EXPORT_QDQ_EXPORT_H

#include "export/backbone_graph.h"
#include "ftl/nn.h"

/* The opset QDQ with per-axis scales needs. */
enum { QDQ_EXPORT_OPSET_MIN = 13 };

/* Rewrites bg's nodes in place (new nodes and initializers belong to b). *convs: the convolutions and
 * matrix products made int8. A weight that is not a float initializer is an error naming the node and model_path. */
ftl_status qdq_export_insert(onnx_builder *b, backbone_graph *bg, const ftl_nn_int8_scales *scales,
                             const char *model_path, int *convs);

#endif
