/* The head's CUDA kernels, beside cuBLAS's GEMMs (cuda_head.c): dropout with the CPU's random
 * streams, softmax cross-entropy, the bias gradient and the optimizers. Their arithmetic follows
 * the CPU head's, operation by operation: the dropout masks and products and the optimizer's
 * updates are the CPU's bits for the same inputs (the _rn intrinsics are never fused into
 * multiply-adds), the bias gradient sums rows in the CPU's order. What differs in the last bits:
 * the GEMMs' summation order (and the bias added after the product, where the CPU starts from it),
 * the device's expf/log, and the softmax sums' order across a warp. */
#include "nn/cuda/head_kernel_args.h"
#include "train/denormal_flush.h"

__device__ static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

__device__ static uint64_t xoshiro_next(uint64_t *s) {
    uint64_t result = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

extern "C" __global__ void ftl_head_dropout(ka_dropout_args a) {
    const uint32_t *positions = reinterpret_cast<const uint32_t *>(a.positions);
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < a.rows; row += (int64_t)gridDim.x * blockDim.x) {
        int64_t position = positions ? (int64_t)positions[row] : a.position_base + row;
        uint64_t x = a.seed ^ 0x6A09E667F3BCC909ull, k1 = splitmix64(&x);
        x = k1 ^ ((uint64_t)a.step * 0x9E3779B97F4A7C15ull);
        uint64_t k2 = splitmix64(&x), s[4];
        x = k2 ^ ((uint64_t)position * 0xBF58476D1CE4E5B9ull) ^ 0x94D049BB133111EBull;
        for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
        const float *in = reinterpret_cast<const float *>(a.in) + row * a.dim;
        float *out = reinterpret_cast<float *>(a.out) + row * a.dim;
        for (int64_t i = 0; i < a.dim; i += 4) {
            uint64_t r = xoshiro_next(s);
            for (int k = 0; k < 4 && i + k < a.dim; k++)
                out[i + k] = __fmul_rn(in[i + k], ((r >> (16 * k)) & 0xFFFF) < a.threshold ? a.scale : 0.0f); /* x * 0, as the CPU: -0, NaN kept */
        }
    }
}

/* The CPU's first maximum: class 0 to start with, then any strictly larger value (so a NaN
 * counts only at class 0, where it wins); the lower index on ties. A total order, so every lane
 * ends with the same pair. */
__device__ static bool beats(float m, int arg, float om, int oa) {
    bool nan0 = oa == 0 && om != om, mine_nan0 = arg == 0 && m != m;
    if (nan0 || mine_nan0) return nan0;
    return om > m || (om == m && oa < arg);
}

__device__ static void warp_argmax(float *m, int *arg) {
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, *m, o);
        int oa = __shfl_xor_sync(0xffffffffu, *arg, o);
        if (beats(*m, *arg, om, oa)) *m = om, *arg = oa;
    }
}

__device__ static double warp_sum_f64(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void ftl_head_softmax_ce(ka_ce_args a) {
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    int lane = threadIdx.x % 32;
    const float *bias = reinterpret_cast<const float *>(a.bias);
    const int32_t *labels = reinterpret_cast<const int32_t *>(a.labels);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < a.rows; r += warps) {
        float *z = reinterpret_cast<float *>(a.logits) + r * a.classes;
        float m = -INFINITY;
        int arg = 0x7fffffff;
        for (int64_t j = lane; j < a.classes; j += 32) {
            float v = __fadd_rn(z[j], bias[j]);
            z[j] = v;
            if (j == 0 || v > m) m = v, arg = (int)j;
        }
        __syncwarp(); /* every lane's z[j] + bias written before lane 0 reads the label's */
        warp_argmax(&m, &arg);
        double sum = 0;
        /* the CPU head's flushes (train/denormal_flush.h), so both give the same numbers */
        for (int64_t j = lane; j < a.classes; j += 32) {
            float t = __fsub_rn(z[j], m);
            sum += t < FTL_SOFTMAX_CUTOFF ? 0.0 : (double)expf(t);
        }
        sum = warp_sum_f64(sum);
        int y = labels[r];
        const float e = a.dz ? a.label_smoothing : 0.0f;
        double zsum = 0;
        if (e > 0.0f) {
            for (int64_t j = lane; j < a.classes; j += 32) zsum += (double)z[j];
            zsum = warp_sum_f64(zsum);
        }
        if (lane == 0) {
            double lse = log(sum) + (double)m;
            reinterpret_cast<double *>(a.loss)[r] = e > 0.0f ? (1.0 - (double)e) * (lse - (double)z[y]) +
                                                                   (double)e * (lse - zsum / (double)a.classes)
                                                             : lse - (double)z[y];
            reinterpret_cast<int32_t *>(a.correct)[r] = arg == y;
        }
        if (!a.dz) continue;
        float inv = (float)(1.0 / sum), *d = reinterpret_cast<float *>(a.dz) + r * a.classes;
        const float each = __fmul_rn((float)((double)e / (double)a.classes), a.grad_scale);
        const float on_label = e > 0.0f ? __fmul_rn(__fsub_rn(1.0f, e), a.grad_scale) : a.grad_scale;
        for (int64_t j = lane; j < a.classes; j += 32) {
            float t = __fsub_rn(z[j], m);
            float g = __fmul_rn(__fmul_rn(t < FTL_SOFTMAX_CUTOFF ? 0.0f : expf(t), inv), a.grad_scale);
            if (e > 0.0f) g = __fsub_rn(g, each);
            d[j] = j == y ? __fsub_rn(g, on_label) : g;
        }
    }
}

extern "C" __global__ void ftl_head_bias_grad(ka_bias_grad_args a) {
    const float *dz = reinterpret_cast<const float *>(a.dz);
    float *out = reinterpret_cast<float *>(a.out);
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < a.classes; j += (int64_t)gridDim.x * blockDim.x) {
        float s = dz[j];
        for (int64_t i = 1; i < a.rows; i++) s = __fadd_rn(s, dz[i * a.classes + j]);
        out[j] = s;
    }
}

__device__ static inline float flush_below(float x, float t) { return fabsf(x) < t ? 0.0f : x; }

extern "C" __global__ void ftl_head_optimizer(ka_optimizer_args a) {
    float *P = reinterpret_cast<float *>(a.params), *M = reinterpret_cast<float *>(a.m), *V = reinterpret_cast<float *>(a.v);
    const float *G = reinterpret_cast<const float *>(a.grads);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.count; i += (int64_t)gridDim.x * blockDim.x) {
        float g = flush_below(G[i], FTL_GRAD_FLUSH), p = P[i];
        if (a.wd != 0.0f) g = flush_below(__fadd_rn(g, __fmul_rn(a.wd, p)), FTL_GRAD_FLUSH);
        if (a.kind == KA_OPT_SGD) {
            if (a.has_momentum) {
                float buf = flush_below(__fadd_rn(__fmul_rn(M[i], a.momentum), g), FTL_MOMENT_FLUSH);
                M[i] = buf;
                g = a.nesterov ? __fadd_rn(g, __fmul_rn(a.momentum, buf)) : buf;
            }
            P[i] = __fadd_rn(p, __fmul_rn(a.neg_lr, g));
            continue;
        }
        float m = flush_below(__fadd_rn(__fmul_rn(M[i], a.b1), __fmul_rn(g, a.omb1)), FTL_MOMENT_FLUSH);
        float v = flush_below(__fadd_rn(__fmul_rn(V[i], a.b2), __fmul_rn(a.omb2, __fmul_rn(g, g))), FTL_MOMENT_FLUSH);
        M[i] = m;
        V[i] = v;
        float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v), a.inv_bc2_sqrt), a.eps);
        if (a.kind == KA_OPT_NADAM) {
            float r = __fdiv_rn(1.0f, denom);
            p = __fadd_rn(p, __fmul_rn(a.c_grad, __fmul_rn(g, r)));
            P[i] = __fadd_rn(p, __fmul_rn(a.c_m, __fmul_rn(m, r)));
        } else {
            P[i] = __fadd_rn(p, __fmul_rn(a.c_m, __fdiv_rn(m, denom)));
        }
    }
}
