/* ftl's strided copies (transposes, slices, window shuffles in the CPU plan) and their f32 -> bf16
 * form against oneDNN's own reorder of the same layouts: the same bits. */
#include "nn/cpu/cpu_plan.h"
#include "test.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

/* dims with the strides of `perm` (perm[0] outermost) at offset0 `offset`. */
static void strided_md(dnnl_memory_desc_t *md, int nd, const dnnl_dim_t *dims, const int *perm, dnnl_data_type_t dt,
                       dnnl_dim_t offset, const dnnl_dim_t *alloc_dims) {
    dnnl_dims_t strides;
    dnnl_dim_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        strides[perm[i]] = s;
        s *= alloc_dims[perm[i]];
    }
    dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
    md->offset0 = offset;
}

static void check_copy(const char *what, int nd, const dnnl_dim_t *dims, const int *src_perm, const dnnl_dim_t *src_alloc,
                       dnnl_dim_t src_offset, dnnl_data_type_t dst_type) {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_engine_create(&eng, dnnl_cpu, 0);
    dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    int plain[DNNL_MAX_NDIMS];
    for (int i = 0; i < nd; i++) plain[i] = i;
    dnnl_memory_desc_t src, dst;
    strided_md(&src, nd, dims, src_perm, dnnl_f32, src_offset, src_alloc);
    strided_md(&dst, nd, dims, plain, dst_type, 0, dims);
    size_t src_bytes = sizeof(float), dst_bytes = dnnl_memory_desc_get_size(&dst);
    for (int i = 0; i < nd; i++) src_bytes *= (size_t)src_alloc[i]; /* the whole source, the view's offset included */
    float *x = malloc(src_bytes);
    uint64_t st = 99;
    for (size_t i = 0; i < src_bytes / sizeof *x; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 8.0 - 4.0);
        if (i % 97 == 5) x[i] = 1.00390625f; /* halfway between two bf16 values: rounds to even */
        if (i % 89 == 7) x[i] = 1.01171875f; /* halfway, odd neighbour below: rounds up */
    }
    void *ours = calloc(1, dst_bytes), *theirs = calloc(1, dst_bytes);
    cpu_copy_plan *plan = NULL;
    if (!CHECK(cpu_copy_plan_make(&src, &dst, &plan))) goto done;
    cpu_copy_run(plan, x, ours, 2);
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t ms, md;
    dnnl_memory_create(&ms, &src, eng, x);
    dnnl_memory_create(&md, &dst, eng, theirs);
    if (!CHECK(dnnl_reorder_primitive_desc_create(&pd, &src, eng, &dst, eng, NULL) == dnnl_success)) goto done;
    dnnl_primitive_create(&prim, pd);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
    dnnl_primitive_execute(prim, stream, 2, args);
    dnnl_stream_wait(stream);
    size_t differ = 0;
    for (size_t i = 0; i < dst_bytes; i++) differ += ((uint8_t *)ours)[i] != ((uint8_t *)theirs)[i];
    printf("  %-44s %zu bytes, %zu differ from oneDNN's reorder\n", what, dst_bytes, differ);
    CHECK(differ == 0);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(md);
done:
    free(plan);
    free(x);
    free(ours);
    free(theirs);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(eng);
}

TEST(nn_strided_copy_matches_onednn_reorder) {
    const dnnl_dim_t vit[3] = {197, 4, 768}; /* ViT's [tokens, images, channels] from [images, tokens, channels] */
    const int bac[3] = {1, 0, 2};
    check_copy("transpose 197x4x768, f32", 3, vit, bac, vit, 0, dnnl_f32);
    check_copy("transpose 197x4x768, f32 -> bf16", 3, vit, bac, vit, 0, dnnl_bf16);
    const int abc[3] = {0, 1, 2};
    check_copy("plain 197x4x768, f32 -> bf16 (one run)", 3, vit, abc, vit, 0, dnnl_bf16);
    /* a slice: the middle third of [197, 4, 2304] (Q, K, V side by side) */
    const dnnl_dim_t qkv[3] = {197, 4, 2304};
    check_copy("slice 197x4x768 of 197x4x2304, f32", 3, vit, abc, qkv, 768, dnnl_f32);
    check_copy("slice 197x4x768 of 197x4x2304, f32 -> bf16", 3, vit, abc, qkv, 768, dnnl_bf16);
    const dnnl_dim_t win[4] = {3, 7, 5, 96}; /* odd sizes, a window-like permutation */
    const int perm[4] = {2, 0, 1, 3};
    check_copy("permute 3x7x5x96 (c, a, b, d), f32 -> bf16", 4, win, perm, win, 0, dnnl_bf16);
}

/* bf16 -> f32 widening (calibration in bf16 hands its values over this way): every one of the 65,536 bf16
 * bit patterns, at every offset of an 8-value vector, against the definition (the pattern as the top half). */
TEST(nn_widen_bf16_is_exact) {
    size_t n = 65536 + 7;
    uint16_t *src = malloc(n * sizeof *src);
    float *dst = malloc((n + 1) * sizeof *dst);
    for (size_t i = 0; i < n; i++) src[i] = (uint16_t)(i * 40503u); /* a permutation of all patterns, then 7 more */
    size_t wrong = 0;
    for (size_t start = 0; start < 8; start++) {
        dst[n - start] = 12345.0f; /* past the end: untouched */
        cpu_widen_bf16(src + start, dst, n - start, 1 + (int)(start % 3)); /* one thread, and shares of two and three */
        for (size_t i = 0; i < n - start; i++) {
            uint32_t want = (uint32_t)src[start + i] << 16, got;
            memcpy(&got, &dst[i], sizeof got);
            wrong += got != want;
        }
        CHECK(dst[n - start] == 12345.0f);
    }
    CHECK(wrong == 0);
    free(src);
    free(dst);
}
