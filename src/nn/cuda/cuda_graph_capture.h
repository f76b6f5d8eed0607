/* The CUDA Graph feature's state in a CUDA plan: the plan's steps captured once and replayed by each
 * run, under FTL_CUDA_GRAPHS=1 (launch_steps in cuda_plan.c captures, replays and frees it). */
#ifndef FTL_NN_CUDA_GRAPH_CAPTURE_H
#define FTL_NN_CUDA_GRAPH_CAPTURE_H

#include "nn/cuda/cuda_libs.h"

/* Its own struct, made by the plan's first run under FTL_CUDA_GRAPHS=1, so plans run without it carry
 * nothing of graphs. */
typedef struct cu_graph_capture {
    CUgraphExec graph;        /* the captured steps; NULL until captured (and when the capture failed) */
    int state;                /* 0: no run yet, 1: one plain run done, 2: captured (or it failed) */
} cu_graph_capture;

#endif
