/* One convolution shape, every oneDNN implementation and variant, timed: for picking kernels.
 * usage: convbench MB IC OC IH KH STRIDE PAD SUM(0/1) [reps]
 * Prints per candidate: layout, implementation, ms per call (median of reps), GFLOP/s.
 * Variants: fused (conv + sum + relu post-ops), unfused (conv, then binary add + relu),
 * matmul (1x1 stride 1: [mb*h*w, ic] x [ic, oc] with the same post-ops), strided (stride-2 1x1:
 * subsample copy + stride-1 conv). Threads: OMP_NUM_THREADS. */
#include <dnnl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_clock.h"

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        dnnl_status_t s_ = (x);                                                                                        \
        if (s_ != dnnl_success) {                                                                                      \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, (int)s_);                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int reps = 20;

static dnnl_memory_t mem_md(const dnnl_memory_desc_t *md) {
    dnnl_memory_t m;
    CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    void *h;
    dnnl_memory_get_data_handle(m, &h);
    size_t n = dnnl_memory_desc_get_size(md);
    if (h) memset(h, 0, n);
    if (h && md->data_type == dnnl_f32)
        for (size_t i = 0; i < n / 4; i++) ((float *)h)[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return m;
}

static dnnl_memory_t mem_for(const dnnl_primitive_desc_t pd, dnnl_query_t q) {
    return mem_md(dnnl_primitive_desc_query_md(pd, q, 0));
}

/* times a list of (prim, args) executed in sequence */
static dnnl_memory_t scratch_for(const dnnl_primitive_desc_t pd) {
    return mem_for(pd, dnnl_query_scratchpad_md);
}

static double time_seq(int n, dnnl_primitive_t *prims, dnnl_exec_arg_t **args, int *nargs) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int w = 0; w < 3; w++)
        for (int i = 0; i < n; i++) CK(dnnl_primitive_execute(prims[i], strm, nargs[i], args[i]));
    for (int r = 0; r < reps; r++) {
        double a = bench_now();
        for (int i = 0; i < n; i++) CK(dnnl_primitive_execute(prims[i], strm, nargs[i], args[i]));
        dnnl_stream_wait(strm);
        t[r] = bench_now() - a;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

static dnnl_primitive_attr_t make_attr(int sum, int relu) {
    dnnl_primitive_attr_t a;
    CK(dnnl_primitive_attr_create(&a));
    dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
    dnnl_post_ops_t po;
    CK(dnnl_post_ops_create(&po));
    if (sum) dnnl_post_ops_append_sum(po, 1.0f);
    if (relu) dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0);
    CK(dnnl_primitive_attr_set_post_ops(a, po));
    dnnl_post_ops_destroy(po);
    return a;
}

static int mb, ic, oc, ih, kh, st, pad, sum;
static double flops;

/* every impl of a conv with the given src/dst layout and post-ops; extra: unfused add after */
static void conv_variants(const char *name, dnnl_format_tag_t tag, int fused_sum, int unfused_add) {
    int oh = (ih + 2 * pad - kh) / st + 1;
    dnnl_dims_t sd = {mb, ic, ih, ih}, dd = {mb, oc, oh, oh}, wd = {oc, ic, kh, kh}, bd = {oc};
    dnnl_memory_desc_t src, dst, wei, bias;
    dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, tag);
    dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, tag);
    dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a);
    dnnl_dims_t s = {st, st}, p = {pad, pad}, pr;
    pr[0] = pr[1] = (oh - 1) * st + kh - ih - pad;
    dnnl_convolution_desc_t cd;
    const char *alg = getenv("CONV_ALG"); /* CONV_ALG=winograd: the Winograd implementations instead */
    CK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                          alg && strcmp(alg, "winograd") == 0 ? dnnl_convolution_winograd
                                                                              : dnnl_convolution_direct,
                                          &src, &wei, &bias, &dst, s,
                                          p, pr));
    dnnl_primitive_attr_t attr = make_attr(fused_sum, !unfused_add);
    dnnl_primitive_desc_iterator_t it;
    CK(dnnl_primitive_desc_iterator_create(&it, &cd, attr, eng, NULL));
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *impl;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (strncmp(impl, "ref", 3) == 0 || strstr(impl, "sse41") || strstr(impl, "avx2")) {
            dnnl_primitive_desc_destroy(pd);
            continue;
        }
        dnnl_primitive_t prims[2];
        CK(dnnl_primitive_create(&prims[0], pd));
        dnnl_memory_t ms = mem_for(pd, dnnl_query_src_md), mw = mem_for(pd, dnnl_query_weights_md),
                      md = mem_for(pd, dnnl_query_dst_md);
        dnnl_memory_t mb_;
        dnnl_memory_desc_t bmd = bias;
        mb_ = mem_md(&bmd);
        dnnl_memory_t msp = scratch_for(pd);
        dnnl_exec_arg_t a0[5] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb_}, {DNNL_ARG_DST, md}, {DNNL_ARG_SCRATCHPAD, msp}};
        dnnl_exec_arg_t *args[2] = {a0, NULL};
        int nargs[2] = {5, 0};
        int n = 1;
        dnnl_memory_t mres = NULL;
        if (unfused_add) {
            const dnnl_memory_desc_t *dmd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            dnnl_binary_desc_t b;
            CK(dnnl_binary_desc_init(&b, dnnl_binary_add, dmd, dmd, dmd));
            dnnl_primitive_attr_t ba = make_attr(0, 1);
            dnnl_primitive_desc_t bpd;
            CK(dnnl_primitive_desc_create(&bpd, &b, ba, eng, NULL));
            CK(dnnl_primitive_create(&prims[1], bpd));
            mres = mem_for(bpd, dnnl_query_src_md);
            static dnnl_exec_arg_t a1[4];
            a1[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC_0, md};
            a1[1] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, mres};
            a1[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, md};
            a1[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch_for(bpd)};
            args[1] = a1;
            nargs[1] = 4;
            n = 2;
            dnnl_primitive_desc_destroy(bpd);
            dnnl_primitive_attr_destroy(ba);
        }
        double t = time_seq(n, prims, args, nargs);
        printf("%-8s %-30s %8.3f ms %6.1f GFLOP/s\n", name, impl, t * 1e3, flops / t * 1e-9);
        fflush(stdout);
        for (int i = 0; i < n; i++) dnnl_primitive_destroy(prims[i]);
        dnnl_memory_destroy(ms);
        dnnl_memory_destroy(mw);
        dnnl_memory_destroy(md);
        dnnl_memory_destroy(mb_);
        if (mres) dnnl_memory_destroy(mres);
        dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    dnnl_primitive_attr_destroy(attr);
}

static void matmul_variant(void) {
    int oh = (ih - 1) / st + 1;
    int64_t M = (int64_t)mb * oh * oh;
    dnnl_dims_t sd = {M, ic}, wd = {ic, oc}, dd = {M, oc}, bd = {1, oc};
    dnnl_memory_desc_t src, wei, dst, bias;
    dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t d;
    CK(dnnl_matmul_desc_init(&d, &src, &wei, &bias, &dst));
    dnnl_primitive_attr_t attr = make_attr(sum, 1);
    dnnl_primitive_desc_iterator_t it;
    if (dnnl_primitive_desc_iterator_create(&it, &d, attr, eng, NULL) != dnnl_success) return;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *impl;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (strncmp(impl, "ref", 3) == 0) { dnnl_primitive_desc_destroy(pd); continue; }
        dnnl_primitive_t prim;
        CK(dnnl_primitive_create(&prim, pd));
        dnnl_memory_t ms = mem_for(pd, dnnl_query_src_md), mw = mem_for(pd, dnnl_query_weights_md),
                      md = mem_for(pd, dnnl_query_dst_md), mbias;
        mbias = mem_md(&bias);
        dnnl_exec_arg_t a0[5] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mbias}, {DNNL_ARG_DST, md}, {DNNL_ARG_SCRATCHPAD, scratch_for(pd)}};
        dnnl_exec_arg_t *args[1] = {a0};
        int nargs[1] = {5};
        double t = time_seq(1, &prim, args, nargs);
        printf("%-8s %-30s %8.3f ms %6.1f GFLOP/s\n", "matmul", impl, t * 1e3, flops / t * 1e-9);
        dnnl_primitive_destroy(prim);
        dnnl_memory_destroy(ms);
        dnnl_memory_destroy(mw);
        dnnl_memory_destroy(md);
        dnnl_memory_destroy(mbias);
        dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    dnnl_primitive_attr_destroy(attr);
}

int main(int argc, char **argv) {
    if (argc < 9) {
        fprintf(stderr, "usage: convbench MB IC OC IH KH STRIDE PAD SUM [reps]\n");
        return 2;
    }
    mb = atoi(argv[1]), ic = atoi(argv[2]), oc = atoi(argv[3]), ih = atoi(argv[4]), kh = atoi(argv[5]);
    st = atoi(argv[6]), pad = atoi(argv[7]), sum = atoi(argv[8]);
    if (argc > 9) reps = atoi(argv[9]);
    int oh = (ih + 2 * pad - kh) / st + 1;
    flops = 2.0 * mb * oc * oh * oh * ic * kh * kh;
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    printf("mb%d ic%d oc%d ih%d oh%d k%d s%d sum%d: %.1f MFLOP\n", mb, ic, oc, ih, oh, kh, st, sum, flops * 1e-6);
    if (!getenv("CONV_ALG")) conv_variants("nhwc", dnnl_acdb, sum, 0); /* Winograd has blocked layouts only */
    conv_variants("nChw16c", dnnl_aBcd16b, sum, 0);
    if (sum) {
        conv_variants("nhwc+add", dnnl_acdb, 0, 1);
        conv_variants("blk+add", dnnl_aBcd16b, 0, 1);
    }
    if (kh == 1 && st == 1) matmul_variant();
    return 0;
}
