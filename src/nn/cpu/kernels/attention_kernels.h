/* The fused attention's per-ISA fp32 kernels (attention.c's driver calls them through this table):
 * AVX-512 in attention.c, AVX2 + FMA in attention_avx2.c. Internal to src/nn. */
#ifndef FTL_NN_ATTENTION_KERNELS_H
#define FTL_NN_ATTENTION_KERNELS_H

#include "nn/cpu/kernels/attention.h"

/* Softmax terms e^(x - max) with x - max below this are written as 0. Kept, they are tiny
 * (Swin's shifted-window masks add -100) and their products with V are denormal floats, each a
 * microcode assist on Intel CPUs: Swin's masked attention shape ran 9x slower than unmasked on an
 * Ice Lake. e^-44 = 7.8e-20 changes no sum next to the row maximum's e^0 = 1; the head's training
 * softmax cuts at the same place (train/denormal_flush.h). */
#define NN_ATTN_EXP_CUTOFF (-44.0f)

/* Rows per register tile: the driver pads a block's rows to a multiple and hands MR row pointers;
 * tables with 7-row tiles take blocks that 7 divides and 6 does not (Swin's 49) in those. */
enum { NN_ATTN_MR = 6, NN_ATTN_MR_MAX = 7 };

typedef struct nn_attn_kernels {
    const char *isa;
    /* s[MR][keys] = scale x q[MR rows][depth] k[depth][keys] (k rows ks apart, each readable to a multiple
     * of 16 columns when k_padded; s rows sp apart, sp a multiple of 16 >= keys) */
    void (*qk_row_tile)(const float *const *q, int64_t depth, const float *k, int64_t ks, int64_t keys, bool k_padded,
                        float *s, int64_t sp, float scale);
    /* o[MR][vdepth] = (s[MR][keys] v[keys][vdepth]) x inv[row] (o rows op apart, op a multiple of 16) */
    void (*pv_row_tile)(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs, int64_t vdepth,
                        const float *inv, float *o, int64_t op);
    /* + bias, e^(x - row max) in place, inv[row] = 1 / the row's sum */
    void (*softmax_rows)(float *s, int64_t sp, int64_t rows, int64_t keys, const float *bias, float *mx, float *inv);
    /* dst[r * dst_stride + c] = the operand's rows x cols at base, as fp32 */
    void (*pack)(const nn_attn_operand *o, int64_t base, int64_t rows, int64_t cols, float *dst, int64_t dst_stride);
    /* n rows of cols fp32 (op apart) rounded to bf16 rows (row_stride apart, unit column stride) */
    void (*write_bf16_rows)(uint16_t *out, int64_t row_stride, const float *obuf, int64_t op, int64_t n, int64_t cols);
    /* the two tiles on 7 rows (q: 7 row pointers, inv and o: 7 rows); NULL where the ISA has none */
    void (*qk_row_tile7)(const float *const *q, int64_t depth, const float *k, int64_t ks, int64_t keys, bool k_padded,
                         float *s, int64_t sp, float scale);
    void (*pv_row_tile7)(const float *s, int64_t sp, int64_t keys, const float *v, int64_t vs, int64_t vdepth,
                         const float *inv, float *o, int64_t op);
} nn_attn_kernels;

/* The AVX2 table, or NULL where the CPU lacks AVX2 or FMA. */
const nn_attn_kernels *nn_attn_kernels_avx2(void);

/* Shared scalar pieces */
static inline float nn_attn_bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t nn_attn_f32_to_bf16(float f) { /* round to nearest even */
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
