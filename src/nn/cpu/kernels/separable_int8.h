/* ftl's int8 separable convolution (separable_int8.c): a 3x3 depthwise convolution (stride 1 padded by 1, or
 * stride 2; u8 or s8 input) requantized to s8 or u8 and, without leaving cache, the 1x1 convolution that alone reads it,
 * both channels-last. The arithmetic is oneDNN 2.6's for the same two primitives, so the results are the
 * same bit for bit: exact integer sums, then (sum + bias) x scale, the post-ops in order, rounding to
 * nearest even and saturation. Xception's blocks (and the MobileNets' separable pairs) are made of
 * these; apart, the depthwise output makes a round trip through memory before every 1x1 product. */
#ifndef FTL_NN_CPU_KERNELS_SEPARABLE_INT8_H
#define FTL_NN_CPU_KERNELS_SEPARABLE_INT8_H

#include <stdbool.h>
#include <stdint.h>

typedef enum cpu_separable_output { CPU_SEPARABLE_U8, CPU_SEPARABLE_S8, CPU_SEPARABLE_F32 } cpu_separable_output;

/* A post-op: an activation clamping to [lo, hi] (a ReLU: [0, inf), ReLU6: [0, 6]) whose result is
 * multiplied by scale, or (sum, the 1x1's only) the output's previous f32 value added. */
typedef struct cpu_separable_post {
    bool sum;
    float lo, hi, scale;
} cpu_separable_post;

enum { CPU_SEPARABLE_MAX_POSTS = 4 };

typedef struct cpu_separable_int8_desc {
    int channels, outputs, height, width;
    bool src_signed;                   /* the depthwise input is s8 (a residual stream without a ReLU), else u8 */
    const int8_t *dw_weights;          /* [channels][3][3] */
    const float *dw_scales, *dw_bias;  /* [channels]: (sum + bias) x scale, its activations, saturated, rounded */
    int dw_n_post;                     /* activations only */
    cpu_separable_post dw_post[CPU_SEPARABLE_MAX_POSTS];
    bool mid_unsigned;                 /* the depthwise output is u8 (after a ReLU), else s8 */
    const int8_t *pw_weights;          /* [outputs][channels] */
    const float *pw_scales, *pw_bias;  /* [outputs]: (sum + bias) x scale, then the post-ops */
    int n_post;
    cpu_separable_post post[CPU_SEPARABLE_MAX_POSTS];
    cpu_separable_output output;
    /* pool_height > 0: a 3x3 stride-2 max pool of the 1x1's f32 output (no sum post-op), taken while its
     * rows are in cache (Xception's entry-flow blocks end so; apart, the unpooled tensor, four times
     * the pooled one, goes through memory and back). Pooled pixel (i, j) is the max over the rows
     * 2i - pool_pad_top + {0, 1, 2} and the columns 2j - pool_pad_left + {0, 1, 2} inside the image; every
     * window must hold one. dst is then [images][pool_height][pool_width][outputs]. */
    int pool_height, pool_width, pool_pad_top, pool_pad_left;
    /* stride2: the depthwise runs at stride 2 (the MobileNets' downsampling blocks), padded by dw_pad_top
     * and dw_pad_left (0 or 1) before and by what out_height / out_width leave (0 or 1) after; no pool.
     * Else stride 1, padded by 1 all round, and the output is the input's size. */
    bool stride2;
    int dw_pad_top, dw_pad_left, out_height, out_width;
} cpu_separable_int8_desc;

typedef struct cpu_separable_int8 cpu_separable_int8;

/* Whether this CPU runs the kernel (AVX-512 with VNNI and VBMI). */
bool cpu_separable_int8_available(void);
/* Whether int8 plans use it: yes on a CPU that runs it, unless FTL_NN_SEPARABLE_INT8=0 (to time or
 * compare against oneDNN's two primitives; Xception int8 at 2 threads runs 2-6% faster with it,
 * docs/BENCHMARKS.md, issue 52). */
bool cpu_separable_int8_wanted(void);
/* Whether int8 plans fuse stride-2 pairs too: only with FTL_NN_SEPARABLE_STRIDE2=1. Measured even with
 * oneDNN's two primitives at best (MobileNetV2's projections), slower where the 1x1 widens few channels
 * (MobileNetV1: 4-8% per pair) or the channels are few (MNASNet 0.5, MobileNetV3-small: 25-50%) at 2
 * threads on a Zen 4 (docs/BENCHMARKS.md, issue 52): the round trip it saves is a quarter of the input. */
bool cpu_separable_stride2_wanted(void);
/* Whether int8 plans also take a following 3x3 stride-2 MaxPool into the step: yes where the step runs,
 * unless FTL_NN_SEPARABLE_POOL=0 (docs/BENCHMARKS.md, issue 52). */
bool cpu_separable_pool_wanted(void);
/* The weights packed for the kernel (the desc's arrays are copied). NULL when the shape is out of its
 * reach (no channels, more than CPU_SEPARABLE_MAX_POSTS post-ops, a sum into an integer output or the
 * depthwise output, a pool of an integer output or with a sum, a pool window outside the image, a pool
 * after a stride-2 depthwise, a stride-2 padding other than 0 or 1 on a side). */
cpu_separable_int8 *cpu_separable_int8_make(const cpu_separable_int8_desc *d);
void cpu_separable_int8_free(cpu_separable_int8 *k);
/* src: u8 (s8 with desc.src_signed) [images][height][width][channels]; dst: [images][out_height][out_width][outputs]
 * (the input's size at stride 1, the pool's with one) of the output type
 * (with a sum post-op it holds the summand on entry). On up to `threads` threads. */
void cpu_separable_int8_run(const cpu_separable_int8 *k, const uint8_t *src, int images, void *dst, int threads);

#endif
