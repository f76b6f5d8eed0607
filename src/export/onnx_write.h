/* Writing an assembled ModelProto: one file when it fits protobuf's 2 GB message limit, else the
 * large initializers in OUT.data next to it (ONNX external data: location, offset, length). Both
 * are written under temporary names and renamed when complete, the data file first, so a model
 * never names a data file that is not all there. */
#ifndef FTL_EXPORT_ONNX_WRITE_H
#define FTL_EXPORT_ONNX_WRITE_H

#include "export/onnx_build.h"

#include <stdbool.h>

/* Protobuf refuses messages of 2 GiB and more; leave room for the graph itself. */
#define ONNX_WRITE_DEFAULT_LIMIT ((uint64_t)2 << 30) - ((uint64_t)64 << 20)
/* Initializers below this size stay inline even when the rest goes to external data. */
#define ONNX_WRITE_EXTERNAL_MIN_BYTES 1024

typedef struct onnx_write_result {
    uint64_t model_bytes, data_bytes;
    int external_tensors;
    char *data_path;   /* the external-data file, or NULL */
} onnx_write_result;

/* max_model_bytes: above this the model goes to external data (0: the default limit). */
ftl_status onnx_model_write(onnx_builder *b, Onnx__ModelProto *m, const char *path, bool overwrite,
                            uint64_t max_model_bytes, onnx_write_result *result);

#endif
