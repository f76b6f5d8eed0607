/* ONNX file -> graph IR (protobuf-c code generated from Debian's onnx.proto at build time:
 * the Makefile runs protoc-c on /usr/include/onnx/onnx.proto into build/gen/). */
#ifndef FTL_NN_ONNX_IMPORT_H
#define FTL_NN_ONNX_IMPORT_H

#include "nn/ir/graph.h"
#include "util/string_list.h"

/* Parses `path` (and its external-data files, relative to the model's folder) into a graph
 * whose nodes are in file order, with constants folded from Constant nodes. sha256_hex (65
 * bytes, may be NULL) receives the checksum of the model file followed by its external-data
 * files in order of first use: it changes whenever any weight changes. */
ftl_status nn_onnx_import(const char *path, nn_graph **graph, char *sha256_hex);
/* The external-data files `path`'s initializers name (paths joined to the model's folder, each
 * once), without loading any weight: for the check that no output of a job is one of them. */
ftl_status nn_onnx_external_files(const char *path, ftl_string_list *files);

#endif
