/* Internals of the oneDNN CPU backend, shared by cpu_plan.c (values, buffers, memory planning,
 * execution) and cpu_ops.c (one emitter per op).
 *
 * A value is one dnnl memory: a descriptor (layout + data type) bound to a buffer. Several
 * values may share a buffer (in-place ops, reshapes, sum post-ops). Buffers get offsets in one
 * arena after compilation from their step lifetimes, so memory is planned once and reused by
 * every run. Each graph tensor maps to the value holding it in its current layout; a consumer
 * that needs another layout or type gets a cached reorder of it. */
#ifndef FTL_NN_CPU_PLAN_H
#define FTL_NN_CPU_PLAN_H

#include "nn/backend.h"

#include <dnnl.h>

enum { CPU_MAX_ARGS = 16 };

typedef struct cpu_value {
    dnnl_memory_desc_t md;
    int buf;                  /* >= 0 arena buffer; CPU_BUF_CONST own allocation; CPU_BUF_EXTERNAL set at run */
    dnnl_memory_t mem;
    void *own;                /* CPU_BUF_CONST: allocated data */
} cpu_value;
enum { CPU_BUF_CONST = -1, CPU_BUF_EXTERNAL = -2 };

typedef struct cpu_buf {
    size_t size;
    int first_step, last_step; /* lifetime in steps (first -1: written before the run) */
    int last_node;            /* last graph node that reads a tensor living here */
    size_t offset;
} cpu_buf;

typedef enum cpu_step_kind { CPU_STEP_PRIM, CPU_STEP_FILL } cpu_step_kind;

typedef struct cpu_step {
    cpu_step_kind kind;
    dnnl_primitive_t prim;
    int nargs;
    int arg_key[CPU_MAX_ARGS];
    int arg_val[CPU_MAX_ARGS];
    int writes;               /* index into arg_* of the output (for lifetimes); -1 none */
    bool scratch;             /* pass the shared scratchpad */
    float fill_value;         /* CPU_STEP_FILL: value written over arg 0 */
    dnnl_exec_arg_t *exec;    /* built at finalize */
    char label[96];
    char impl[64];
} cpu_step;

typedef struct cpu_conv_cache {
    int tensor, value;
} cpu_conv_cache;

struct nn_plan {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    nn_precision precision;
    int batch, threads;
    cpu_value *vals;
    int n_vals, cap_vals;
    cpu_buf *bufs;
    int n_bufs, cap_bufs;
    cpu_step *steps;
    int n_steps, cap_steps;
    int *tval;                /* graph tensor -> value in its native layout (-1 none) */
    int *last_node;           /* graph tensor -> last node index reading it (INT_MAX: output) */
    cpu_conv_cache *conv;     /* reorders made for consumers: (tensor, value) */
    int n_conv, cap_conv;
    int cur_node;             /* node being compiled */
    int input_val, output_val;
    size_t scratch_size;
    void *scratch;
    dnnl_memory_t scratch_mem;
    void *arena;
    size_t arena_size;
    int64_t out_count;        /* floats written by run */
    int n_reorders;           /* reorders executed per run (layout/type conversions) */
};

/* Checks a dnnl call; on failure sets an error naming `what` and returns FTL_E_INTERNAL. */
ftl_status cpu_check(dnnl_status_t s, const char *what);
#define CPU_TRY(call, what) FTL_TRY(cpu_check((call), (what)))

int cpu_new_value(nn_plan *p, const dnnl_memory_desc_t *md, int buf);
int cpu_new_buf(nn_plan *p, size_t size, int last_node);
/* A constant value holding `data` (float32, plain layout `md_plain`) converted to `md`. */
ftl_status cpu_const_value(nn_plan *p, const float *data, const dnnl_memory_desc_t *md_plain,
                           const dnnl_memory_desc_t *md, int *val);
/* The value of graph tensor t in layout/type md (reordered once and cached when it differs). */
ftl_status cpu_ensure(nn_plan *p, int t, const dnnl_memory_desc_t *md, int *val);
/* Plain row-major layout of t's current dims with data type dt. */
void cpu_plain_md(dnnl_memory_desc_t *md, const nn_shape *s, dnnl_data_type_t dt);
/* Appends a reorder step src -> dst (values). */
ftl_status cpu_emit_reorder(nn_plan *p, int src, int dst, const char *label);
/* Appends a primitive step created from pd (takes ownership of pd). */
ftl_status cpu_emit_prim(nn_plan *p, dnnl_primitive_desc_t pd, const int *keys, const int *vals, int nargs,
                         int writes, const char *label);
/* True when the buffer of value v may be overwritten by the current node (nothing later reads it). */
bool cpu_can_overwrite(const nn_plan *p, int v);
/* Records that tensor t now lives in value v. */
void cpu_bind(nn_plan *p, int t, int v);
/* Primitive attributes: user scratchpad + post-ops of node n (NULL: none), optionally
 * starting with y = -y (a swapped Sub). */
ftl_status cpu_make_attr(const nn_node *n, dnnl_primitive_attr_t *attr, bool negate_first);
/* Appends a step that sets every element of value v to `value` (Pad borders). */
ftl_status cpu_emit_fill(nn_plan *p, int v, float value, const char *label);
dnnl_data_type_t cpu_compute_type(const nn_plan *p);
/* Convolutions ask for nChw16c activations unless FTL_NN_LAYOUT=any (for A/B benchmarks). */
bool cpu_blocked_layout_enabled(void);

/* cpu_ops.c: emits the steps of one node. */
ftl_status cpu_emit_node(nn_plan *p, nn_graph *g, int node);

#endif
