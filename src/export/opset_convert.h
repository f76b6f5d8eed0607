/* Moving the backbone's nodes from the opset they were written for to the export's opset.
 * Most ops only gained types between opsets 7 and 18; the ones whose signature changed (attributes
 * that became inputs, HardSwish that opsets below 14 lack, Dropout's ratio, ...) are rewritten to
 * the same computation, and anything that cannot be is refused naming the node. */
#ifndef FTL_EXPORT_OPSET_CONVERT_H
#define FTL_EXPORT_OPSET_CONVERT_H

#include "export/backbone_graph.h"

enum { EXPORT_OPSET_MIN = 11, EXPORT_OPSET_MAX = 18 };

/* Rewrites g's nodes (written for g->opset) for opset `target`; *rewritten counts changed nodes. */
ftl_status opset_convert(onnx_builder *b, backbone_graph *g, int64_t target, int *rewritten);
/* The IR version that goes with an opset (the ONNX release that introduced it). */
int64_t opset_ir_version(int64_t opset);

#endif
