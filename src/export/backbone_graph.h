/* The backbone's own ONNX nodes for an export: the file read as a ModelProto, the nodes that
 * compute the feature tensor (pruned there, in a topological order), the initializers they
 * use with external data brought inline, and names kept apart from the exporter's. */
#ifndef FTL_EXPORT_BACKBONE_GRAPH_H
#define FTL_EXPORT_BACKBONE_GRAPH_H

#include "export/onnx_build.h"
#include "nn/onnx/onnx_tensor.h"

typedef struct backbone_graph {
    Onnx__ModelProto *model;        /* the unpacked file (owns the original messages) */
    nn_extdata ext;                 /* external-data files, read whole; inlined tensors point here */
    int64_t opset;                  /* of the default domain */
    char *input_name;               /* the runtime input (after renaming) */
    const Onnx__ValueInfoProto *input;
    char *feature_name;             /* the feature tensor (after renaming) */
    Onnx__NodeProto **nodes;        /* kept nodes, shallow copies owned by the builder */
    size_t n_nodes;
    Onnx__TensorProto **inits;      /* kept initializers, all data inline */
    size_t n_inits;
    ob_table init_index;            /* initializer name -> index in inits */
} backbone_graph;

/* Reads `path` and keeps what computes `feature` (NULL: the first graph output). Every name of
 * the kept graph is reserved in the builder; backbone tensors named like one in `reserved`
 * are renamed (suffix "_backbone"). */
ftl_status backbone_graph_read(onnx_builder *b, const char *path, const char *feature, const char *const *reserved,
                               int n_reserved, backbone_graph *g);
void backbone_graph_free(backbone_graph *g);

/* Renames a tensor in every kept node, initializer and in input_name/feature_name. */
void backbone_graph_rename(onnx_builder *b, backbone_graph *g, const char *from, const char *to);
/* The kept initializer of that name, or NULL. */
Onnx__TensorProto *backbone_graph_init(const backbone_graph *g, const char *name);
/* Adds an initializer made by the builder (opset conversion). */
void backbone_graph_add_init(backbone_graph *g, Onnx__TensorProto *t);

#endif
