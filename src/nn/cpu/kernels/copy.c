/* Copies between strided layouts of one data type, or f32 to bf16 (transposes, window partitions,
 * slices, pads), done as runs of contiguous elements spread over the backbone's OpenMP threads. oneDNN 2.6 runs such
 * permutations through its scalar `simple:any` reorder, one element at a time: Swin-T's window
 * shifts and partitions alone are over a hundred of them per forward pass. Built with -fopenmp. */
#include "nn/cpu/kernels/copy.h"
#include "nn/ir/qdq.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/line_shares.h"

#include <omp.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

/* Below this many bytes a run is not worth a memcpy call: oneDNN's reorder stays. */
enum { MIN_RUN_BYTES = 64, MAX_COPY_DIMS = DNNL_MAX_NDIMS };

struct cpu_copy_plan {
    int ndims;                          /* outer dims, after merging; the run is innermost */
    int64_t dims[MAX_COPY_DIMS];
    int64_t src_stride[MAX_COPY_DIMS];  /* bytes */
    int64_t dst_stride[MAX_COPY_DIMS];
    int64_t outer;                      /* product of dims */
    size_t run;                         /* elements copied at a time */
    size_t src_elem, dst_elem;          /* bytes per element: equal, or 4 -> 2 (f32 rounded to bf16) */
    int64_t src_offset, dst_offset;     /* bytes (the mds' offset0) */
    const int64_t *table;               /* a gather: outer runs from these source byte offsets, the
                                           destination's one after another (same allocation) */
};

static bool plain_strided(const dnnl_memory_desc_t *md) {
    return md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 0 && md->ndims >= 1 &&
           md->ndims <= MAX_COPY_DIMS;
}

bool cpu_copy_plan_make(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, cpu_copy_plan **out) {
    *out = NULL;
    bool to_bf16 = src->data_type == dnnl_f32 && dst->data_type == dnnl_bf16;
    if (!plain_strided(src) || !plain_strided(dst) || (src->data_type != dst->data_type && !to_bf16) ||
        src->ndims != dst->ndims)
        return false;
    for (int i = 0; i < src->ndims; i++)
        if (src->dims[i] != dst->dims[i] || src->padded_dims[i] != src->dims[i] || dst->padded_dims[i] != dst->dims[i])
            return false;
    int64_t elem = (int64_t)dnnl_data_type_size(src->data_type), delem = (int64_t)dnnl_data_type_size(dst->data_type);
    /* dims ordered by the destination's strides, outermost first (dst is written in order) */
    int order[MAX_COPY_DIMS], n = src->ndims;
    for (int i = 0; i < n; i++) order[i] = i;
    const dnnl_dims_t *ds = &dst->format_desc.blocking.strides, *ss = &src->format_desc.blocking.strides;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && (*ds)[order[j]] > (*ds)[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    cpu_copy_plan c = {0};
    for (int i = 0; i < n; i++) { /* drop size-1 dims: their strides do not matter */
        int a = order[i];
        if (src->dims[a] == 1) continue;
        c.dims[c.ndims] = src->dims[a];
        c.src_stride[c.ndims] = (*ss)[a] * elem;
        c.dst_stride[c.ndims] = (*ds)[a] * delem;
        c.ndims++;
    }
    /* the run: innermost dims contiguous in both */
    size_t run = 1;
    while (c.ndims > 0 && c.src_stride[c.ndims - 1] == (int64_t)run * elem &&
           c.dst_stride[c.ndims - 1] == (int64_t)run * delem) {
        run *= (size_t)c.dims[c.ndims - 1];
        c.ndims--;
    }
    if (run * (size_t)elem < MIN_RUN_BYTES && c.ndims > 0) return false;
    /* merge neighbours that are contiguous with each other in both layouts */
    int m = 0;
    for (int i = 0; i < c.ndims; i++) {
        if (m > 0 && c.src_stride[m - 1] == c.src_stride[i] * c.dims[i] && c.dst_stride[m - 1] == c.dst_stride[i] * c.dims[i]) {
            c.dims[m - 1] *= c.dims[i];
            c.src_stride[m - 1] = c.src_stride[i];
            c.dst_stride[m - 1] = c.dst_stride[i];
            continue;
        }
        c.dims[m] = c.dims[i];
        c.src_stride[m] = c.src_stride[i];
        c.dst_stride[m] = c.dst_stride[i];
        m++;
    }
    c.ndims = m;
    c.outer = 1;
    for (int i = 0; i < c.ndims; i++) c.outer *= c.dims[i];
    c.run = run;
    c.src_elem = (size_t)elem;
    c.dst_elem = (size_t)delem;
    c.src_offset = src->offset0 * elem;
    c.dst_offset = dst->offset0 * delem;
    *out = ftl_xmalloc(sizeof **out);
    **out = c;
    return true;
}

/* The element loops below vectorise only under GCC's dynamic cost model (-O2's "very cheap" one leaves
 * them scalar: 5 GB/s on a 112x112 feature map); on x86-64 a second, AVX-512 copy is picked at load. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_LOOP __attribute__((target_clones("arch=x86-64-v4", "default"), optimize("vect-cost-model=dynamic")))
#else
#define VECTOR_LOOP
#endif

/* f32 -> bf16, rounding to nearest even as oneDNN's reorders do; a NaN stays a (quiet) NaN. */
VECTOR_LOOP static void round_to_bf16(const float *x, uint16_t *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
    }
}

cpu_copy_plan *cpu_copy_plan_gather(const int64_t *src_offset, int64_t n_runs, size_t run, size_t elem, size_t dst_elem) {
    cpu_copy_plan *c = ftl_xcalloc(1, sizeof *c + (size_t)n_runs * sizeof *src_offset);
    int64_t *table = (int64_t *)(void *)(c + 1);
    memcpy(table, src_offset, (size_t)n_runs * sizeof *table);
    c->table = table;
    c->outer = n_runs;
    c->run = run;
    c->src_elem = elem;
    c->dst_elem = dst_elem;
    return c;
}

void cpu_copy_run(const cpu_copy_plan *c, const void *src_base, void *dst_base, int threads) {
    const char *src = (const char *)src_base + c->src_offset;
    char *dst = (char *)dst_base + c->dst_offset;
    int64_t outer = c->outer;
    /* a thread for every ~64 KiB, at most `threads` */
    size_t run_bytes = c->run * c->src_elem;
    bool convert = c->src_elem != c->dst_elem;
    int64_t want = (int64_t)((double)outer * (double)run_bytes / 65536.0) + 1;
    int team = want < threads ? (int)want : threads;
    if (team < 1) team = 1;
    if (c->table) {
#pragma omp parallel num_threads(team)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            for (int64_t i = outer * t / nt, end = outer * (t + 1) / nt; i < end; i++)
                if (convert)
                    round_to_bf16((const float *)(const void *)(src + c->table[i]),
                                  (uint16_t *)(void *)dst + i * (int64_t)c->run, c->run);
                else memcpy(dst + i * (int64_t)run_bytes, src + c->table[i], run_bytes);
        }
        return;
    }
    if (c->ndims == 0) { /* one contiguous run (a plain conversion): split it between the threads */
#pragma omp parallel num_threads(team)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t begin = c->run * (size_t)t / (size_t)nt, end = c->run * (size_t)(t + 1) / (size_t)nt;
            if (convert) round_to_bf16((const float *)(const void *)src + begin, (uint16_t *)(void *)dst + begin, end - begin);
            else memcpy(dst + begin * c->src_elem, src + begin * c->src_elem, (end - begin) * c->src_elem);
        }
        return;
    }
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t begin = outer * t / nt, end = outer * (t + 1) / nt;
        int64_t idx[MAX_COPY_DIMS] = {0};
        int64_t rest = begin, so = 0, dof = 0;
        for (int d = c->ndims - 1; d >= 0; d--) {
            idx[d] = rest % c->dims[d];
            rest /= c->dims[d];
            so += idx[d] * c->src_stride[d];
            dof += idx[d] * c->dst_stride[d];
        }
        for (int64_t i = begin; i < end; i++) {
            if (convert) round_to_bf16((const float *)(const void *)(src + so), (uint16_t *)(void *)(dst + dof), c->run);
            else memcpy(dst + dof, src + so, run_bytes);
            for (int d = c->ndims - 1; d >= 0; d--) { /* odometer step */
                so += c->src_stride[d];
                dof += c->dst_stride[d];
                if (++idx[d] < c->dims[d]) break;
                so -= c->src_stride[d] * c->dims[d];
                dof -= c->dst_stride[d] * c->dims[d];
                idx[d] = 0;
            }
        }
    }
}

VECTOR_LOOP static void add_floats(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void cpu_copy_run_add(const cpu_copy_plan *c, const void *src_base, const float *addend, void *dst_base, int threads) {
    const char *src = src_base;
    float *dst = dst_base;
    int64_t outer = c->outer, want = (int64_t)((double)outer * (double)(c->run * 4) / 65536.0) + 1;
    int team = want < threads ? (int)want : threads;
    if (team < 1) team = 1;
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        for (int64_t i = outer * t / nt, end = outer * (t + 1) / nt; i < end; i++)
            add_floats((const float *)(const void *)(src + c->table[i]), addend + i * (int64_t)c->run,
                       dst + i * (int64_t)c->run, c->run);
    }
}

bool cpu_convert_same_layout(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst) {
    bool int8_src = src->data_type == dnnl_u8 || src->data_type == dnnl_s8;
    bool int8_dst = dst->data_type == dnnl_u8 || dst->data_type == dnnl_s8;
    if (src->format_kind != dnnl_blocked || int8_src == int8_dst || (!int8_src && src->data_type != dnnl_f32) ||
        (!int8_dst && dst->data_type != dnnl_f32) || src->extra.flags || dst->extra.flags)
        return false;
    dnnl_memory_desc_t as_dst = *src;
    as_dst.data_type = dst->data_type;
    return dnnl_memory_desc_equal(&as_dst, dst) &&
           dnnl_memory_desc_get_size(src) / dnnl_data_type_size(src->data_type) ==
               dnnl_memory_desc_get_size(dst) / dnnl_data_type_size(dst->data_type);
}

/* Saturates, then rounds half to even (as oneDNN's reorders do under the default rounding mode):
 * adding and subtracting 1.5 x 2^23 leaves the nearest integer of any |v| <= 2^22 and vectorises,
 * where nearbyintf is a library call per element. */
VECTOR_LOOP static void quantize(const float *x, void *y, bool is_unsigned, size_t n, float scale, int zero) {
    /* rounded before the zero point is added (ONNX QuantizeLinear); saturating first to the range
     * less the zero point gives the same integers */
    const float magic = 12582912.0f, fz = (float)zero;
    if (is_unsigned) {
        uint8_t *q = y;
        const float lo = 0.0f - fz, hi = 255.0f - fz;
        for (size_t i = 0; i < n; i++) {
            float v = x[i] * scale;
            v = v < lo ? lo : v > hi ? hi : v;
            q[i] = (uint8_t)(int)(((v + magic) - magic) + fz);
        }
    } else {
        int8_t *q = y;
        const float lo = -128.0f - fz, hi = 127.0f - fz;
        for (size_t i = 0; i < n; i++) {
            float v = x[i] * scale;
            v = v < lo ? lo : v > hi ? hi : v;
            q[i] = (int8_t)(int)(((v + magic) - magic) + fz);
        }
    }
}

VECTOR_LOOP static void dequantize(const void *x, bool is_unsigned, float *y, size_t n, float scale, int zero) {
    if (is_unsigned)
        for (size_t i = 0; i < n; i++) y[i] = (float)(((const uint8_t *)x)[i] - zero) * scale;
    else
        for (size_t i = 0; i < n; i++) y[i] = (float)(((const int8_t *)x)[i] - zero) * scale;
}

void cpu_convert_run(const void *src, dnnl_data_type_t src_type, void *dst, dnnl_data_type_t dst_type, size_t n,
                     float scale, int zero, int threads) {
    int64_t want = (int64_t)(n / 16384) + 1;
    int team = want < threads ? (int)want : threads;
    if (team < 1) team = 1;
    bool to_int = dst_type == dnnl_u8 || dst_type == dnnl_s8;
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t begin = n * (size_t)t / (size_t)nt, end = n * (size_t)(t + 1) / (size_t)nt;
        if (to_int)
            quantize((const float *)src + begin, (uint8_t *)dst + begin, dst_type == dnnl_u8, end - begin, scale, zero);
        else dequantize((const uint8_t *)src + begin, src_type == dnnl_u8, (float *)dst + begin, end - begin, scale, zero);
    }
}

void cpu_fake_quant_run(const float *src, float *dst, size_t n, float scale, int zero, int lo, int hi, int threads) {
    int64_t want = (int64_t)(n / 16384) + 1;
    int team = want < threads ? (int)want : threads;
    if (team < 1) team = 1;
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t begin = n * (size_t)t / (size_t)nt, end = n * (size_t)(t + 1) / (size_t)nt;
        nn_fake_quantize(src + begin, dst + begin, end - begin, scale, zero, lo, hi);
    }
}

static void widen_bf16(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
#if defined(__x86_64__) /* SSE2, every x86-64: zeros interleaved below each value make it the top half */
    const __m128i zero = _mm_setzero_si128();
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(src + i));
        _mm_storeu_si128((__m128i *)(dst + i), _mm_unpacklo_epi16(zero, v));
        _mm_storeu_si128((__m128i *)(dst + i + 4), _mm_unpackhi_epi16(zero, v));
    }
#endif
    for (; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}

void cpu_widen_bf16(const uint16_t *src, float *dst, size_t n, int threads) {
    int team = ftl_line_shares_team(n, threads);
    if (team == 1) {
        widen_bf16(src, dst, n);
        return;
    }
#pragma omp parallel num_threads(team)
    {
        size_t begin, end;
        ftl_line_share(n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
        if (begin < end) widen_bf16(src + begin, dst + begin, end - begin);
    }
}
