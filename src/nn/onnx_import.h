/* ONNX file -> graph IR (protobuf-c code generated from Debian's onnx.proto at build time:
 * the Makefile runs protoc-c on /usr/include/onnx/onnx.proto into build/gen/). */
#ifndef FTL_NN_ONNX_IMPORT_H
#define FTL_NN_ONNX_IMPORT_H

#include "nn/graph.h"

/* Parses `path` (and its external-data files, relative to the model's folder) into a graph
 * whose nodes are in file order, with constants folded from Constant nodes. sha256_hex (65
 * bytes, may be NULL) receives the checksum of the model file followed by its external-data
 * files in order of first use: it changes whenever any weight changes. */
ftl_status nn_onnx_import(const char *path, nn_graph **graph, char *sha256_hex);

#endif
