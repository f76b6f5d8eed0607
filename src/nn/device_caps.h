/* What a backend can do. Code above src/nn (pipeline/, data/) asks this instead of naming a device
 * kind, so the backend is chosen in one place (nn) and a new one changes no caller. */
#ifndef FTL_NN_DEVICE_CAPS_H
#define FTL_NN_DEVICE_CAPS_H

#include "ftl/device.h"

#include <stdbool.h>

typedef struct nn_device_caps {
    const char *name; /* "cpu", "cuda": as run records name it, and a GPU's feature-cache keys */
    bool gpu;         /* a GPU: features of its own (their own cache key), a head engine, a monitor */
    bool int8;        /* has an int8 path (without one, int8 is refused before a model is loaded) */
    bool tf32;        /* has TensorFloat-32 (without it a tf32 model runs in fp32) */
} nn_device_caps;

/* The backend of a request or of a loaded model's ftl_model_info.device_kind; auto gives the
 * CPU's (what auto falls back to, and what takes int8 under auto). */
const nn_device_caps *nn_device_caps_of(ftl_device_kind kind);

#endif
