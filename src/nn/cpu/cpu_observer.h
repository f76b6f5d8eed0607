/* The calibration feature's state in a CPU plan: the observer that OBSERVE steps (cpu_compile.c emits
 * them after each watched tensor) hand their values to at run (cpu_backend.c). */
#ifndef FTL_NN_CPU_OBSERVER_H
#define FTL_NN_CPU_OBSERVER_H

#include "nn/backend.h"

/* Its own struct, held by the plan only while calibrating (nn_compile_opts.observe_fn set), so other
 * plans carry nothing of calibration. */
typedef struct cpu_observer {
    nn_observe_fn fn;
    void *ctx;                /* fn's first argument */
    float *widened;           /* a bf16 plan's values widened to f32, CPU_OBSERVE_CHUNK at a time (lazy) */
} cpu_observer;

/* Values handed over per call from a bf16 tensor: 1 MiB of f32, which stays in L2 between the widening
 * and the statistics, and is large enough for the statistics to split among threads. */
enum { CPU_OBSERVE_CHUNK = 1 << 18 };

#endif
