/* The CUDA backend's face to the rest of nn: built from src/nn/cuda/ when CUDA is on, from
 * cuda_none.c (every call an error saying so) when it is off. */
#ifndef FTL_NN_CUDA_BACKEND_H
#define FTL_NN_CUDA_BACKEND_H

#include "ftl/device.h"
#include "ftl/dist.h"
#include "ftl/train.h"
#include "nn/backend.h"

bool nn_cuda_built(void);
/* The GPU architectures this build has code for ("75 80 86 89 90"), or NULL without CUDA. */
const char *nn_cuda_archs(void);
/* Loads the libraries and describes visible device `ordinal` (name, sm, memory, versions); an error
 * names what is missing. */
ftl_status nn_cuda_probe(int ordinal, ftl_device *device);
/* The cuDNN/cuBLAS backend (nn_compile_opts.device picks the GPU); NULL without CUDA. */
const nn_backend *nn_backend_cuda(void);
/* The head's training steps on GPU `device` (ftl_device_head_engine_create). */
ftl_status nn_cuda_head_engine_create(const ftl_device *device, int64_t dim, int64_t classes, size_t max_rows,
                                      int optimizer_slots, const ftl_collectives *collectives, ftl_head_engine **out);

#endif
