/* Compiling a graph into a CPU plan (cpu_compile.c), for the backend table (cpu_backend.c). */
#ifndef FTL_NN_CPU_COMPILE_H
#define FTL_NN_CPU_COMPILE_H

#include "nn/cpu/cpu_plan.h"

/* The plan of graph g for o's batch, precision and micro-batches (backend.h's compile). */
ftl_status cpu_compile(nn_graph *g, const nn_compile_opts *o, nn_plan **out);
void cpu_plan_free(nn_plan *p);

#endif
