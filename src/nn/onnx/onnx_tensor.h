/* ONNX TensorProto -> constant tensor data, inline or from external-data files. */
#ifndef FTL_NN_ONNX_TENSOR_H
#define FTL_NN_ONNX_TENSOR_H

#include "nn/ir/graph.h"
#include "onnx.pb-c.h"
#include "util/sha256.h"

/* External-data files opened so far (each read whole once, then sliced). */
typedef struct nn_extdata {
    char *model_dir;
    int n;
    struct nn_extfile { char *location; uint8_t *data; size_t size; } files[64];
    ftl_sha256 *hash;         /* files are hashed as they are first read (may be NULL) */
} nn_extdata;

void nn_extdata_free(nn_extdata *x);

/* Converts `tp` into `t`'s data (float for FLOAT/DOUBLE/FLOAT16/BFLOAT16, int64 for integer
 * and bool types). May take ownership of tp's raw bytes. Errors name the tensor. */
ftl_status nn_tensor_from_proto(Onnx__TensorProto *tp, nn_tensor *t, nn_extdata *x);

/* The bytes of an initializer stored as external data (data_location EXTERNAL), after checking
 * location, offset and length against the file and the tensor's shape and type. */
ftl_status nn_tensor_external_data(Onnx__TensorProto *tp, const char *tname, nn_extdata *x, const uint8_t **bytes,
                                  size_t *size);

#endif
