/* MaxPool as ftl's own loop (ftl:max_pool) in the plan's conv layouts, channels-last or nChw8c /
 * nChw16c: each output pixel is the elementwise max of the window's channel vectors, which lie
 * contiguous in both. oneDNN 2.6's AVX2 pooling runs Xception's 3x3 stride-2 pools in channels-last
 * at half this loop's speed (2 x 128 x 147 x 147: 3.6 vs 1.7 ms on a Zen 3). Taken on CPUs with AVX2
 * and without AVX-512, where it was measured (FTL_NN_FTL_MAXPOOL=1 / 0 forces it either way). Built
 * with -fopenmp. */
#include "nn/cpu/kernels/max_pool.h"
#include "nn/cpu/kernels/target_region.h"
#include "util/alloc.h"

#include <float.h>
#include <immintrin.h> /* outside the avx2 region: its declarations keep their own targets */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct cpu_pool_plan {
    int64_t outer;             /* images x channel blocks (channels-last: images) */
    int64_t vec;               /* channels contiguous per pixel: C, or the block size */
    int64_t ih, iw, oh, ow;
    int64_t in_outer_stride, out_outer_stride; /* elements */
    int64_t kernel[2], stride[2], dilation[2], pad_begin[2];
};

bool cpu_pool_ftl_wanted(void) {
    const char *e = getenv("FTL_NN_FTL_MAXPOOL");
    if (e) return strcmp(e, "0") != 0 && __builtin_cpu_supports("avx2");
    return __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f");
}

/* Channels per pixel and the stride between channel blocks (0: not a layout the loop reads). */
static int64_t pixel_vector(const dnnl_memory_desc_t *md, int64_t *outer, int64_t *outer_stride) {
    if (md->format_kind != dnnl_blocked || md->ndims != 4 || md->data_type != dnnl_f32 || md->offset0 != 0) return 0;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    const int64_t *d = md->padded_dims, *s = b->strides;
    if (b->inner_nblks == 0) { /* channels-last, dense */
        if (s[1] != 1 || s[3] != d[1] || s[2] != d[3] * d[1] || s[0] != d[2] * s[2] || d[1] != md->dims[1]) return 0;
        *outer = d[0];
        *outer_stride = s[0];
        return d[1];
    }
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1) { /* nChw{B}c, dense */
        int64_t B = b->inner_blks[0], cb = d[1] / B;
        if (md->dims[1] != d[1]) return 0; /* padded channels: their zeros are oneDNN's business */
        if (s[3] != B || s[2] != d[3] * B || s[1] != d[2] * s[2] || s[0] != cb * s[1]) return 0;
        *outer = d[0] * cb;
        *outer_stride = s[1];
        return B;
    }
    return 0;
}

bool cpu_pool_plan_make(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, const int64_t kernel[2],
                        const int64_t stride[2], const int64_t dilation[2], const int64_t pad_begin[2],
                        cpu_pool_plan **out) {
    *out = NULL;
    int64_t so = 0, sos = 0, dout = 0, dos = 0;
    int64_t sv = pixel_vector(src, &so, &sos), dv = pixel_vector(dst, &dout, &dos);
    if (sv == 0 || sv != dv || so != dout || src->padded_dims[1] != dst->padded_dims[1]) return false;
    if (kernel[0] > 64 || kernel[1] > 64) return false; /* pool_row's window lists */
    cpu_pool_plan *p = ftl_xcalloc(1, sizeof *p);
    *p = (cpu_pool_plan){.outer = so, .vec = sv, .ih = src->dims[2], .iw = src->dims[3], .oh = dst->dims[2],
                         .ow = dst->dims[3], .in_outer_stride = sos, .out_outer_stride = dos};
    for (int i = 0; i < 2; i++) {
        p->kernel[i] = kernel[i];
        p->stride[i] = stride[i];
        p->dilation[i] = dilation[i];
        p->pad_begin[i] = pad_begin[i];
    }
    *out = p;
    return true;
}

void cpu_pool_plan_free(cpu_pool_plan *p) { free(p); }

FTL_TARGET_BEGIN("avx2")

/* One output row: every pixel the max over its window's rows and columns inside the image (dilated),
 * 8 channels at a time in a register, the channels past the last multiple of 8 one by one. */
static void pool_row(const cpu_pool_plan *p, const float *in, float *out, int64_t y) {
    const int64_t vec = p->vec, full = vec / 8 * 8;
    int64_t hs[64], ws[64], nh = 0;
    for (int64_t kh = 0; kh < p->kernel[0] && nh < 64; kh++) {
        int64_t h = y * p->stride[0] - p->pad_begin[0] + kh * p->dilation[0];
        if (h >= 0 && h < p->ih) hs[nh++] = h;
    }
    for (int64_t x = 0; x < p->ow; x++) {
        float *o = out + x * vec;
        int64_t nw = 0;
        for (int64_t kw = 0; kw < p->kernel[1] && nw < 64; kw++) {
            int64_t w = x * p->stride[1] - p->pad_begin[1] + kw * p->dilation[1];
            if (w >= 0 && w < p->iw) ws[nw++] = w;
        }
        for (int64_t c = 0; c < full; c += 8) {
            __m256 acc = _mm256_set1_ps(-FLT_MAX); /* a window all in the padding: oneDNN's lowest */
            for (int64_t a = 0; a < nh; a++)
                for (int64_t b = 0; b < nw; b++)
                    acc = _mm256_max_ps(_mm256_loadu_ps(in + (hs[a] * p->iw + ws[b]) * vec + c), acc);
            _mm256_storeu_ps(o + c, acc);
        }
        for (int64_t c = full; c < vec; c++) {
            float m = -FLT_MAX;
            for (int64_t a = 0; a < nh; a++)
                for (int64_t b = 0; b < nw; b++) {
                    float v = in[(hs[a] * p->iw + ws[b]) * vec + c];
                    m = v > m ? v : m;
                }
            o[c] = m;
        }
    }
}

FTL_TARGET_END

void cpu_pool_run(const cpu_pool_plan *p, const float *src, float *dst, int threads) {
    int64_t rows = p->outer * p->oh;
    int team = threads < 1 ? 1 : rows < threads ? (int)rows : threads;
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; r++) {
            int64_t o = r / p->oh, y = r % p->oh;
            pool_row(p, src + o * p->in_outer_stride, dst + o * p->out_outer_stride + y * p->ow * p->vec, y);
        }
    }
}
