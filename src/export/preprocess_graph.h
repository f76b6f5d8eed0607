/* ftl's preprocessing as ONNX ops, exactly: uint8 [N,S,S,3] images (what ftl prep stores) ->
 * Pillow's antialiased bilinear resize to the backbone's size as one constant matrix pair per
 * axis, with Pillow's rounding and clipping between the passes -> the recorded scaling as a
 * 256-entry table per channel (Gather), so every value is the float ftl computes -> the
 * backbone's layout. */
#ifndef FTL_EXPORT_PREPROCESS_GRAPH_H
#define FTL_EXPORT_PREPROCESS_GRAPH_H

#include "export/onnx_build.h"
#include "ftl/nn.h"

typedef struct preprocess_graph_spec {
    int image_size;             /* S of the dataset images */
    int height, width;          /* the backbone's input */
    bool channels_last;         /* the backbone takes NHWC */
    const ftl_nn_preprocess *preprocess;
} preprocess_graph_spec;

/* Appends the nodes from `images` to `target` (the backbone's float input). *resized: whether a
 * resize was needed. */
ftl_status preprocess_graph_build(onnx_builder *b, const preprocess_graph_spec *spec, const char *images,
                                  const char *target, bool *resized);

#endif
