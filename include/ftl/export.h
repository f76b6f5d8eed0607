/* ftl public API: `ftl export`, a trained model as one ONNX graph that runs without ftl.
 *
 * The graph takes `images`, uint8 [N, S, S, 3] (RGB, what `ftl prep` stores for a photo: thumbnail
 * to S x S and white padding), does ftl's own preprocessing as ONNX ops (Pillow's antialiased
 * bilinear resize to the backbone's size when it differs from S, exactly; the recorded scaling;
 * the backbone's layout), then the backbone's original ONNX nodes pruned at the feature tensor,
 * the head as Gemm and a Softmax: output `probabilities` [N, classes] (or `logits`); under flip TTA the
 * images and their mirror images go through as one batch and the two probabilities are averaged. The class
 * names, input size and scaling, backbone sha256, label offset and ftl version are in
 * metadata_props. */
#ifndef FTL_EXPORT_H
#define FTL_EXPORT_H

#include "ftl/base.h"
#include "ftl/train.h"
#include <stdbool.h>
#include <stdint.h>

typedef enum ftl_export_input {
    FTL_EXPORT_INPUT_UINT8_NHWC = 0,  /* the dataset's bytes; preprocessing inside the graph */
    FTL_EXPORT_INPUT_FLOAT_NCHW,      /* already preprocessed float [N, 3, H, W] at the backbone's size */
} ftl_export_input;
/* "uint8-nhwc" or "float-nchw" */
ftl_status ftl_export_input_parse(const char *text, ftl_export_input *out);

typedef struct ftl_export_options {
    const char *model_path;      /* MODEL.ftl */
    const char *output_path;     /* OUT.onnx, written under a temporary name and renamed */
    const char *backbone_path;   /* NULL: the recorded one; else its sha256 must match */
    int opset;                   /* 0: 13 */
    bool logits;                 /* no Softmax: output `logits`; under flip TTA log(mean probability), whose
                                    softmax is the mean (not the mean of the two logit vectors) */
    ftl_tta tta;                 /* default: as the model records; flip: the graph scores the images and their
                                    mirror images as one batch of 2N and averages the probabilities (a backbone
                                    with a fixed batch is refused: it cannot take 2N) */
    ftl_export_input input;
    bool overwrite;
    uint64_t max_model_bytes;    /* above this the weights go to OUT.onnx.data (0: protobuf's 2 GB limit) */
} ftl_export_options;

void ftl_export_options_init(ftl_export_options *o);

typedef struct ftl_export_result {
    int opset;
    int64_t ir_version;
    int backbone_opset;
    int backbone_nodes;          /* kept (pruned at the feature tensor) */
    int nodes_total;
    int nodes_rewritten;         /* by the opset conversion */
    int tuned_tensors;           /* a fine-tuned model's tensors written in place of the backbone's initializers */
    int int8_convs;              /* an int8-trained model: convolutions written as QDQ with its calibrated scales */
    int classes;
    int image_size;              /* S of the uint8 input */
    int height, width;           /* the backbone's input */
    bool resized;                /* the graph resizes S -> the backbone's size */
    bool tta_flip;               /* the graph averages both orientations */
    uint64_t model_bytes, data_bytes;
    int external_tensors;
    char data_path[4096];        /* "" unless external data was written */
} ftl_export_result;

ftl_status ftl_export_onnx(const ftl_export_options *options, ftl_export_result *result);

#endif
