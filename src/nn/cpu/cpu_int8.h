/* The int8 feature's state in a CPU plan: per graph tensor, the int8 form of nn_compile_opts (see
 * nn/quantize.h), copied at compile (cpu_compile.c) and read by the plan builder's conversions and the
 * int8 emitters (emit_conv.c, emit_matmul.c, emit_eltwise.c). */
#ifndef FTL_NN_CPU_INT8_H
#define FTL_NN_CPU_INT8_H

#include <stdbool.h>
#include <stddef.h>

/* Its own struct, held by the plan only when it has int8 forms (an int8 plan, or a quantized model at
 * any precision), so plans without them carry nothing of int8. */
typedef struct cpu_int8_tables {
    float *scale;             /* real = scale x (q - zero); 0: the tensor has no int8 form */
    bool *is_unsigned;        /* that form is u8 (else s8) */
    bool *written;            /* its producing convolution writes it requantized */
    int *zero;                /* a quantized model's zero points; NULL: all 0 */
} cpu_int8_tables;

/* Whether the tables q (NULL: none) carry zero points, and tensor t's zero point (0 without them). */
static inline bool cpu_int8_has_zero(const cpu_int8_tables *q) { return q && q->zero; }
static inline int cpu_int8_zero(const cpu_int8_tables *q, int t) { return q && q->zero ? q->zero[t] : 0; }

#endif
