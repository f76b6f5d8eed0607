/* ftl's own CUDA kernels: what cuDNN and cuBLAS do not do for the backbone (element-wise ops with
 * broadcasting and post-ops, reductions, pooling with ONNX's pad rules, softmax, layer norm, the
 * uint8 input scaling). Compiled to a fatbin that the binary embeds and loads through the driver
 * API (cuda_plan.c), so nothing links the CUDA runtime. Every kernel walks its output with a
 * grid-stride loop and reads inputs through element strides (kernel_args.h). */
#include "nn/cuda/kernel_args.h"

#include <cuda_bf16.h>

__device__ static float load(uint64_t ptr, int dtype, int64_t i) {
    if (dtype == KA_BF16) return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(ptr)[i]);
    return reinterpret_cast<const float *>(ptr)[i];
}

__device__ static void store(uint64_t ptr, int dtype, int64_t i, float v) {
    if (dtype == KA_BF16) reinterpret_cast<__nv_bfloat16 *>(ptr)[i] = __float2bfloat16_rn(v);
    else reinterpret_cast<float *>(ptr)[i] = v;
}

__device__ static float activate(int act, float a, float b, float x) {
    switch (act) {
    case KA_RELU: return x > 0.f ? x : 0.f;
    case KA_LEAKYRELU: return x > 0.f ? x : a * x;
    case KA_CLIP: return fminf(fmaxf(x, a), b);
    case KA_SIGMOID: return 1.f / (1.f + expf(-x));
    case KA_HARDSIGMOID: return fminf(fmaxf(a * x + b, 0.f), 1.f);
    case KA_HARDSWISH: return x * fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f);
    case KA_TANH: return tanhf(x);
    case KA_SQRT: return sqrtf(x);
    case KA_POW: return powf(x, a);
    case KA_GELU_ERF: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case KA_GELU_TANH: return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case KA_SILU: return x / (1.f + expf(-x));
    default: return x;
    }
}

extern "C" __global__ void ftl_ew(ka_ew_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[KA_MAX_IN] = {0, 0, 0, 0}, out = 0, rest = i;
        for (int d = a.rank - 1; d >= 0; d--) {
            int64_t q = rest / a.dims[d], idx = rest - q * a.dims[d];
            rest = q;
            out += idx * a.out.stride[d];
            for (int k = 0; k < a.n_in; k++) off[k] += idx * a.in[k].stride[d];
        }
        float v[KA_MAX_IN];
        for (int k = 0; k < a.n_in; k++) v[k] = load(a.in[k].ptr, a.in[k].dtype, off[k]);
        float x = v[0];
        switch (a.op) {
        case KA_ADD: x = v[0] + v[1]; break;
        case KA_SUB: x = v[0] - v[1]; break;
        case KA_MUL: x = v[0] * v[1]; break;
        case KA_DIV: x = v[0] / v[1]; break;
        case KA_FMA: x = v[0] * v[1] + v[2]; break;
        default: break;
        }
        for (int k = 0; k < a.n_post; k++)
            x = a.post[k].in >= 0 ? x + v[a.post[k].in] : activate(a.post[k].act, a.post[k].alpha, a.post[k].beta, x);
        store(a.out.ptr, a.out.dtype, out, x);
    }
}

extern "C" __global__ void ftl_reduce(ka_reduce_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = 0, rest = i;
        for (int d = a.rank - 1; d >= 0; d--) {
            int64_t q = rest / a.dims[d];
            base += (rest - q * a.dims[d]) * a.in.stride[d];
            rest = q;
        }
        float acc = a.is_max ? -INFINITY : 0.f;
        for (int64_t r = 0; r < a.red_count; r++) {
            int64_t off = base, rr = r;
            for (int d = a.red_rank - 1; d >= 0; d--) {
                int64_t q = rr / a.red_dims[d];
                off += (rr - q * a.red_dims[d]) * a.red_stride[d];
                rr = q;
            }
            float x = load(a.in.ptr, a.in.dtype, off);
            acc = a.is_max ? fmaxf(acc, x) : acc + x;
        }
        store(a.out, a.out_dtype, i, a.is_max ? acc : acc / (float)a.red_count);
    }
}

extern "C" __global__ void ftl_pool(ka_pool_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t size[4] = {a.n, a.c, a.oh, a.ow};
        int64_t at[4], rest = i;
        for (int k = 3; k >= 0; k--) {
            int ax = a.out_order[k];
            int64_t q = rest / size[ax];
            at[ax] = rest - q * size[ax];
            rest = q;
        }
        int64_t base = at[0] * a.in_stride[0] + at[1] * a.in_stride[1];
        int y0 = (int)at[2] * a.sh - a.ph, x0 = (int)at[3] * a.sw - a.pw;
        float acc = a.is_max ? -INFINITY : 0.f;
        int counted = 0;
        for (int ky = 0; ky < a.kh; ky++) {
            int y = y0 + ky * a.dh;
            for (int kx = 0; kx < a.kw; kx++) {
                int x = x0 + kx * a.dw;
                if (y < 0 || y >= a.h || x < 0 || x >= a.w) continue;
                float v = load(a.in, a.in_dtype, base + y * a.in_stride[2] + x * a.in_stride[3]);
                acc = a.is_max ? fmaxf(acc, v) : acc + v;
                counted++;
            }
        }
        if (a.count_include_pad) { /* ONNX: the window clipped to the padded input, a ceil_mode overhang not counted */
            int y1 = min(y0 + a.kh, a.h + a.peh), x1 = min(x0 + a.kw, a.w + a.pew);
            counted = (y1 - y0) * (x1 - x0);
        }
        store(a.out, a.out_dtype, i, a.is_max ? acc : (counted > 0 ? acc / (float)counted : 0.f));
    }
}

__device__ static float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Softmax over len of [outer, len, inner]: one warp per (outer, inner) row. */
extern "C" __global__ void ftl_softmax(ka_rows_args a) {
    int64_t rows = a.outer * a.inner, warps = (int64_t)gridDim.x * (blockDim.x / 32);
    int lane = threadIdx.x % 32;
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
        int64_t o = r / a.inner, base = o * a.len * a.inner + (r - o * a.inner);
        float m = -INFINITY;
        for (int64_t j = lane; j < a.len; j += 32) m = fmaxf(m, load(a.in, a.in_dtype, base + j * a.inner));
        m = warp_max(m);
        float s = 0.f;
        for (int64_t j = lane; j < a.len; j += 32) s += expf(load(a.in, a.in_dtype, base + j * a.inner) - m);
        s = warp_sum(s);
        for (int64_t j = lane; j < a.len; j += 32)
            store(a.out, a.out_dtype, base + j * a.inner, expf(load(a.in, a.in_dtype, base + j * a.inner) - m) / s);
    }
}

/* Layer normalization of each row of [outer, len] (inner 1), in fp32: one warp per row. */
extern "C" __global__ void ftl_layernorm(ka_rows_args a) {
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    int lane = threadIdx.x % 32;
    const float *scale = reinterpret_cast<const float *>(a.scale), *shift = reinterpret_cast<const float *>(a.shift);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < a.outer; r += warps) {
        int64_t base = r * a.len;
        float s = 0.f;
        for (int64_t j = lane; j < a.len; j += 32) s += load(a.in, a.in_dtype, base + j);
        float mean = warp_sum(s) / (float)a.len, q = 0.f;
        for (int64_t j = lane; j < a.len; j += 32) {
            float d = load(a.in, a.in_dtype, base + j) - mean;
            q += d * d;
        }
        float inv = rsqrtf(warp_sum(q) / (float)a.len + a.epsilon);
        for (int64_t j = lane; j < a.len; j += 32) {
            float y = (load(a.in, a.in_dtype, base + j) - mean) * inv * scale[j] + (shift ? shift[j] : 0.f);
            store(a.out, a.out_dtype, base + j, y);
        }
    }
}

extern "C" __global__ void ftl_preprocess(ka_preprocess_args a) {
    const uint8_t *in = reinterpret_cast<const uint8_t *>(a.in);
    const float *table = reinterpret_cast<const float *>(a.table);
    int64_t plane = (int64_t)a.h * a.w;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.total; i += (int64_t)gridDim.x * blockDim.x) {
        int c = (int)(i % 3);
        int64_t pixel = i / 3, img = pixel / plane, at = pixel - img * plane;
        float v = table[c * 256 + in[i]];
        store(a.out, a.out_dtype, a.nhwc ? i : (img * 3 + c) * plane + at, v);
    }
}

extern "C" __global__ void ftl_fill(ka_fill_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.count; i += (int64_t)gridDim.x * blockDim.x)
        store(a.out, a.dtype, i, a.value);
}
