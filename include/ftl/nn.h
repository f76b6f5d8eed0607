/* ftl public API: ONNX backbones (import, CPU/GPU execution, feature extraction). Filled in by src/nn/. */
#ifndef FTL_NN_H
#define FTL_NN_H
#include "ftl/base.h"
#endif
