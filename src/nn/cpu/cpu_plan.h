/* The oneDNN CPU backend's plan and its builder (cpu_plan_builder.c: values, buffers, steps, reorders),
 * used by the emitters (emit_*.c, one file per op family), the fusions, compile (cpu_compile.c:
 * memory planning) and run (cpu_backend.c).
 *
 * A value is one dnnl memory: a descriptor (layout + data type) bound to a buffer. Several
 * values may share a buffer (in-place ops, reshapes, sum post-ops). Buffers get offsets in one
 * arena after compilation from their step lifetimes, so memory is planned once and reused by
 * every run. Each graph tensor maps to the value holding it in its current layout; a consumer
 * that needs another layout or type gets a cached reorder of it.
 *
 * Micro-batches per node: a plan of `batch` images may run each node on mb images at a time
 * (mb divides batch; from nn_compile_opts.node_batch). Consecutive steps with the same mb form a
 * segment, run chunk by chunk (every step of the segment on images 0..mb-1, then mb..2mb-1, ...),
 * so a chunk's activations stay in cache from layer to layer while later, smaller layers get
 * bigger chunks. A buffer used by one segment holds one chunk and is reused by the next; a
 * buffer used across segments is "full" (all batch images, batch outermost) and each step
 * addresses its chunk in it. */
#ifndef FTL_NN_CPU_PLAN_H
#define FTL_NN_CPU_PLAN_H

#include "nn/backend.h"
#include "nn/cpu/kernels/copy.h"
#include "nn/cpu/kernels/max_pool.h"
#include "nn/cpu/kernels/separable_int8.h"

#include <dnnl.h>

enum { CPU_MAX_ARGS = 16 };

typedef struct cpu_value {
    dnnl_memory_desc_t md;
    int buf;                  /* >= 0 arena buffer; CPU_BUF_CONST own allocation; CPU_BUF_EXTERNAL set at run */
    dnnl_memory_t mem;
    void *own;                /* CPU_BUF_CONST: allocated data */
    int mb;                   /* images in md (its first dimension) */
} cpu_value;
enum { CPU_BUF_CONST = -1, CPU_BUF_EXTERNAL = -2 };

typedef struct cpu_buf {
    size_t size;
    int first_step, last_step; /* lifetime in steps (first -1: written before the run) */
    int last_node;            /* last graph node that reads a tensor living here */
    size_t offset;
    bool full;                /* holds all batch images (used by more than one segment) */
    size_t image_bytes;       /* full: bytes per image (the values' batch stride) */
} cpu_buf;

/* PRIM: a oneDNN primitive; FILL: a constant written over a value; COPY: ftl's strided copy
 * (kernels/copy.c) between layouts of one data type; OBSERVE: arg 0's values handed to the plan's
 * observer (calibration); CONVERT: ftl's f32 <-> u8/s8 conversion within one layout (kernels/copy.c);
 * FAKEQUANT: a quantized model's FakeQuantize, f32 -> f32 element-wise (nn/qdq.h); ATTENTION: the
 * fused attention of args Q, K^T, V into arg 3 (cpu_attention_fusion.c); MAXPOOL: ftl's max pool of arg 0
 * into arg 1 (kernels/max_pool.c); LAYERNORM: ftl's layer norm of arg 0 into arg 1, fp32 or bf16 each
 * (nn/layernorm.h); SEPARABLE: an int8 depthwise 3x3 and the 1x1 convolution reading it, arg 0 into arg
 * 1 (kernels/separable_int8.c). */
typedef enum cpu_step_kind {
    CPU_STEP_PRIM, CPU_STEP_FILL, CPU_STEP_COPY, CPU_STEP_OBSERVE, CPU_STEP_CONVERT, CPU_STEP_FAKEQUANT,
    CPU_STEP_ATTENTION, CPU_STEP_MAXPOOL, CPU_STEP_LAYERNORM, CPU_STEP_SEPARABLE
} cpu_step_kind;

typedef struct cpu_step {
    cpu_step_kind kind;
    dnnl_primitive_t prim;
    int nargs;
    int arg_key[CPU_MAX_ARGS];
    int arg_val[CPU_MAX_ARGS];
    int writes;               /* index into arg_* of the output (for lifetimes); -1 none */
    bool scratch;             /* pass the shared scratchpad */
    float fill_value;         /* CPU_STEP_FILL: value written over arg 0 */
    cpu_copy_plan *copy;      /* CPU_STEP_COPY: arg 0 -> arg 1 */
    cpu_pool_plan *pool;      /* CPU_STEP_MAXPOOL: arg 0 -> arg 1 */
    cpu_separable_int8 *separable; /* CPU_STEP_SEPARABLE: arg 0 -> arg 1 */
    dnnl_exec_arg_t *exec;    /* built at finalize */
    int mb;                   /* images per execution (the micro-batch of its node) */
    int n_chunked;            /* args in full buffers: their data handle moves with the chunk */
    int chunked_arg[CPU_MAX_ARGS];
    char label[96];
    char impl[64];
    int node;                 /* graph node it was emitted for (n_nodes: the plan's copy to the caller) */
    bool reorder;             /* a layout / type conversion */
    int tensor;               /* CPU_STEP_OBSERVE: the graph tensor arg 0 holds */
    float convert_scale;      /* CPU_STEP_CONVERT: arg 1 = arg 0 x this (rounded and saturated to int8) */
    int convert_zero;         /* CONVERT: the int8 side's zero point (q = round(x scale) + zero; x = (q - zero) scale) */
    float fq_scale;           /* CPU_STEP_FAKEQUANT: the node's scale, zero point and integer range */
    int fq_zero, fq_lo, fq_hi;
    int attn;                 /* CPU_STEP_ATTENTION: which of the plan's fused attentions */
    float *ln_params;         /* CPU_STEP_LAYERNORM: gamma then beta (owned), channels each */
    float ln_epsilon;
    int also_node;            /* another graph node whose work the step does (the fused attention's first MatMul, the
                                 1x1 after a separable depthwise); -1 */
} cpu_step;

/* A feature's own state, defined in its file: the fused attentions (cpu_attention_fusion.c) and the
 * chains of data movement run as one copy (cpu_movement_fusion.c); or in its header: the int8 forms
 * of tensors (cpu_int8.h), calibration's observer (cpu_observer.h) and the conv emitter's choices
 * (emit_conv.h). */
typedef struct cpu_int8_tables cpu_int8_tables;
typedef struct cpu_observer cpu_observer;
typedef struct cpu_conv_choices cpu_conv_choices;
typedef struct cpu_attention_list cpu_attention_list;
typedef struct cpu_movement_chains cpu_movement_chains;

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
    int cur_mb;               /* its micro-batch */
    int *node_mb;             /* per node micro-batch (NULL: batch) */
    int input_val, output_val;
    size_t scratch_size;
    void *scratch;
    dnnl_memory_t scratch_mem;
    void *arena;
    size_t arena_size;
    int64_t out_count;        /* floats written by run */
    int n_reorders;           /* reorders executed per run (layout/type conversions) */
    int n_segs;               /* runs of steps with the same micro-batch */
    int *seg_first;           /* first step of each segment (n_segs + 1 entries: the last = n_steps) */
    bool depth_first;         /* run segments interleaved (see cpu_run) instead of one after another */
    cpu_int8_tables *int8;    /* per-tensor int8 forms (cpu_int8.h; NULL: none, neither int8 nor a quantized model) */
    cpu_observer *observer;   /* calibration's observer of watched tensors (cpu_observer.h; NULL: none) */
    cpu_conv_choices *conv_choice; /* the conv emitter's algorithm and layout choices (emit_conv.h; set by compile) */
    cpu_attention_list *attention; /* fused attentions, each node's role in them (cpu_attention_fusion.c's own;
                                      NULL: none looked for) */
    cpu_movement_chains *chains; /* data movement chains run as one copy, each node's role in them
                                    (cpu_movement_fusion.c's own) */
};

/* Checks a dnnl call; on failure sets an error naming `what` and returns FTL_E_INTERNAL. */
ftl_status cpu_check(dnnl_status_t s, const char *what);
#define CPU_TRY(call, what) FTL_TRY(cpu_check((call), (what)))

int cpu_new_value(nn_plan *p, const dnnl_memory_desc_t *md, int buf);
int cpu_new_buf(nn_plan *p, size_t size, int last_node);
/* A constant value holding `data` (of md_plain's type and plain layout) converted to `md`. */
ftl_status cpu_const_value(nn_plan *p, const void *data, const dnnl_memory_desc_t *md_plain,
                           const dnnl_memory_desc_t *md, int *val);
/* The value of graph tensor t in layout/type md (reordered once and cached when it differs; a
 * conversion to or from u8/s8 scales by the tensor's int8 scale). */
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
/* Whether every node from the current one to tensor t's last reader runs at the current micro-batch
 * (one segment: a view of t whose first axis is not the images is never addressed by image). */
bool cpu_one_chunk_until_read(const nn_plan *p, int t);
/* Makes tensor t's value one of cur_mb images (a view of the same buffer) when it was made for
 * another micro-batch. */
ftl_status cpu_rebatch(nn_plan *p, int t);
/* Bytes between consecutive images of a value of mb images whose first dimension is outermost; 0 when
 * the images are not contiguous. */
size_t cpu_image_bytes(const dnnl_memory_desc_t *md, int mb);
/* Records that tensor t now lives in value v. */
void cpu_bind(nn_plan *p, int t, int v);
/* Primitive attributes: user scratchpad + post-ops of node n (NULL: none), optionally
 * starting with y = -y (a swapped Sub). */
ftl_status cpu_make_attr(const nn_node *n, dnnl_primitive_attr_t *attr, bool negate_first);
/* The attributes of a product n (activations only) followed by x scale (scale_md, broadcast over
 * rows) and + the destination's prior contents (a residual); *binary_index: the scale's post-op index. */
ftl_status cpu_make_attr_scaled_sum(const nn_node *n, const dnnl_memory_desc_t *scale_md, dnnl_primitive_attr_t *attr,
                                    int *binary_index);
/* The attributes of a 1x1 convolution n that runs the 3x3 depthwise convolution dw (stride 1 or 2,
 * padding 1) on its output as a post-op: n's activations, the depthwise conv, dw's activations (fp32). */
ftl_status cpu_make_attr_dw(const nn_node *n, const nn_node *dw, int stride, dnnl_primitive_attr_t *attr);
/* The same for an int8 primitive: per-output-channel scales (count 1: one for all) applied to the
 * integer sums, then n's post-ops, the last activation's result multiplied by act_scale (the
 * requantization to the output's scale when an activation runs last; else 1). */
ftl_status cpu_make_attr_int8(const nn_node *n, dnnl_primitive_attr_t *attr, const float *scales, int64_t count,
                              float act_scale, int src_zero, int dst_zero);
static inline bool cpu_is_int8_type(dnnl_data_type_t t) { return t == dnnl_u8 || t == dnnl_s8; }
/* Whether node n's data input has an int8 form, so the node runs in int8. */
bool cpu_node_int8(const nn_plan *p, const nn_node *n);
/* Appends a FakeQuantize step src -> dst (f32 values of one layout; dst may be src). */
void cpu_emit_fake_quant(nn_plan *p, int src, int dst, float scale, int zero, int lo, int hi, const char *label);
/* Appends the f32 -> u8/s8 conversion of value src into value dst (same layout) at `scale` (real =
 * scale x (q - zero)): the node's own work, e.g. a ReLU that only int8 convolutions read. */
ftl_status cpu_emit_quantize(nn_plan *p, int src, int dst, float scale, int zero, const char *label);
/* Appends a step that sets every element of value v to `value` (Pad borders). */
ftl_status cpu_emit_fill(nn_plan *p, int v, float value, const char *label);
dnnl_data_type_t cpu_compute_type(const nn_plan *p);

/* Whether a step is a convolution, matmul or inner product (kind_out, may be NULL: which). */
bool cpu_is_compute_step(const cpu_step *s, dnnl_primitive_kind_t *kind_out);
/* cpu_measure_alone.c: step `step`'s convolution / matmul / inner product rebuilt with the layouts oneDNN
 * prefers (format any) and run alone on its own buffers; best seconds per execution. */
ftl_status cpu_time_alone(nn_plan *p, int step, double min_seconds, double *seconds, bool *timed);

/* A step of kind `kind` that ftl runs itself from value src into dst (arg 0 -> arg 1), its kernel
 * named impl. */
cpu_step *cpu_host_step(nn_plan *p, cpu_step_kind kind, int src, int dst, const char *impl, const char *label);
/* A new step of the current node (kind PRIM until set), and the record that it uses value v. */
cpu_step *cpu_new_step(nn_plan *p, const char *label);
void cpu_touch(nn_plan *p, int v, int step);

/* cpu_attention_fusion.c: marks the fused attentions of g (before any node is emitted; none when the CPU
 * lacks AVX-512F and AVX2, FTL_NN_FUSED_ATTENTION=0, or an absorbed tensor is observed), emits one at its
 * second MatMul, runs its step, frees them. */
ftl_status cpu_attention_find(nn_plan *p, const nn_graph *g, const bool *observe);
ftl_status cpu_attention_emit(nn_plan *p, nn_graph *g, int node);
void cpu_attention_run(nn_plan *p, const cpu_step *s);
void cpu_attention_free(nn_plan *p);
/* Node `node`'s role in the fused attentions: -1 its own steps (also before cpu_attention_find), -2 part
 * of a fused attention emitted later or of a step another node emits, k >= 0 where attention k is
 * emitted. Emitters that fuse a node into their own step (a depthwise pair, a matmul's scale and
 * residual) mark it -2 with cpu_attention_mark_absorbed, so compile skips it and no fusion takes it. */
int cpu_attention_role(const nn_plan *p, int node);
void cpu_attention_mark_absorbed(nn_plan *p, int node);
/* An optimisation switch in the environment (FTL_NN_...): on unless set to 0 (A/B runs, tests). */
bool cpu_switch_on(const char *name);
/* Whether tensor t (produced by the current node) is read only by fused attentions, directly or
 * through Gather/Transpose/Slice views, all at the current micro-batch: then a view of it in any
 * strides costs nothing (the kernel reads strides; depth: recursion guard, start at 0). */
bool cpu_attention_reads_only(const nn_plan *p, const nn_graph *g, int t, int depth);
/* cpu_movement_fusion.c: marks the chains of data movement that run as one copy (after cpu_attention_find;
 * none under FTL_NN_GATHER_CHAINS=0, in int8 plans, or through an observed tensor), emits one at its
 * sink node, frees them. Shapes are for p->batch on return. */
ftl_status cpu_gather_find(nn_plan *p, nn_graph *g, const bool *observe);
ftl_status cpu_gather_emit(nn_plan *p, nn_graph *g, int node);
void cpu_gather_free(nn_plan *p);
/* Node `node`'s role in the chains: -1 its own steps (also before cpu_gather_find), -2 part of a chain
 * copied at its sink, k >= 0 the sink of chain k (cpu_gather_emit emits it). */
int cpu_movement_role(const nn_plan *p, int node);

#endif
