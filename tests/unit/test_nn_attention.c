/* The fused attention: the kernel against an unfused double-precision reference (scores written
 * out, bias added, softmax, product with V) on odd shapes (query and key counts that are no multiple
 * of the kernel's 16-column vectors, 6-row tiles or 48-row blocks, one head, batch 1 and 13, masks
 * with a period as Swin's), operands in strided layouts, bf16 operands, on the AVX-512 and the AVX2
 * kernels; and the torchvision ViT and Swin models with the fusion on against PyTorch and against
 * the same plan with it off. */
#include "nn_testutil.h"
#include "test.h"
#include "nn/cpu/kernels/attention.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

typedef struct attn_case {
    const char *name;
    int64_t batch, heads, rows, keys, depth, vdepth;
    int64_t period;     /* bias table period over (batch x heads); 0: no bias */
    bool k_transposed;  /* K^T given as a transposed view of K [keys x depth] (else plain [depth x keys]) */
    bool qkv_packed;    /* Q, K, V interleaved in one [batch, rows, 3, heads, depth] tensor (Swin's and ViT's QKV) */
    bool out_transposed; /* out written as [batch, rows, heads, vdepth] (heads next to each other) */
    bool bf16;
} attn_case;

/* MXCSR's sticky exception flags (IE DE ZE OE UE PE): cleared before a run, read after it. */
enum { MXCSR_FLAGS = 0x3f, MXCSR_DENORMAL = 0x02, MXCSR_UNDERFLOW = 0x10 };
static void mxcsr_clear_flags(void) { _mm_setcsr(_mm_getcsr() & ~(unsigned)MXCSR_FLAGS); }

/* The flags raised since mxcsr_clear_flags, reported as `what`'s line. */
static unsigned mxcsr_report(const char *what) {
    unsigned raised = _mm_getcsr() & MXCSR_FLAGS;
    printf("  %-44s MXCSR: underflow %s, denormal operand %s\n", what, raised & MXCSR_UNDERFLOW ? "RAISED" : "clear",
           raised & MXCSR_DENORMAL ? "RAISED" : "clear");
    return raised & (MXCSR_UNDERFLOW | MXCSR_DENORMAL);
}

/* Kernel passes of a test: the kernels this CPU picks, then the AVX2 ones where it picked AVX-512
 * (counted before the first pass; use_kernels(pass) before each, use_kernels(-1) after the last). */
static int kernel_passes(void) {
    return strcmp(nn_attention_isa(), "avx512") == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
               ? 2
               : 1;
}
static void use_kernels(int pass) {
    if (pass == 1) setenv("FTL_NN_ATTENTION_ISA", "avx2", 1);
    if (pass < 0) unsetenv("FTL_NN_ATTENTION_ISA");
    else printf("  kernels: %s\n", nn_attention_isa());
}

/* Runs c on `threads` threads against the unfused reference; with underflow_check (1 thread, so the
 * kernel runs on this thread) it also fails where the kernel raised an underflow or met a denormal
 * operand: MXCSR's sticky UE and DE flags, cleared before the run. The bias masks with -100 where
 * the query's and the key's regions differ (the first and the second half of the window, as in
 * Swin's shifted windows, so a row's product starts on a run of masked keys) with underflow_check,
 * else at scattered places. */
static void run_case_on(const attn_case *c, int threads, bool underflow_check) {
    const int64_t B = c->batch, H = c->heads, T = c->rows, S = c->keys, D = c->depth, Dv = c->vdepth, L = B * H;
    /* the logical tensors (what the reference reads), in double */
    double *q = malloc((size_t)(L * T * D) * sizeof *q), *k = malloc((size_t)(L * S * D) * sizeof *k);
    double *v = malloc((size_t)(L * S * Dv) * sizeof *v);
    uint64_t st = 12345u + (uint64_t)(T * 131 + S * 7 + D);
    for (int64_t i = 0; i < L * T * D; i++) q[i] = 2.0 * nn_test_value(&st);
    for (int64_t i = 0; i < L * S * D; i++) k[i] = 2.0 * nn_test_value(&st);
    for (int64_t i = 0; i < L * S * Dv; i++) v[i] = nn_test_value(&st);
    float *bias = NULL;
    if (c->period > 0) {
        bias = malloc((size_t)(c->period * T * S) * sizeof *bias);
        for (int64_t i = 0; i < c->period * T * S; i++) {
            int64_t row = i / S % T, key = i % S;
            bool masked = underflow_check ? (row < T / 2) != (key < S / 2) : i % 7 == 3;
            bias[i] = masked ? -100.0f : nn_test_value(&st); /* Swin's mask: -100 where windows do not meet */
        }
    }
    if (c->bf16) { /* the reference sees the values the kernel sees */
        for (int64_t i = 0; i < L * T * D; i++) q[i] = nn_test_from_bf16(nn_test_to_bf16((float)q[i]));
        for (int64_t i = 0; i < L * S * D; i++) k[i] = nn_test_from_bf16(nn_test_to_bf16((float)k[i]));
        for (int64_t i = 0; i < L * S * Dv; i++) v[i] = nn_test_from_bf16(nn_test_to_bf16((float)v[i]));
    }
    const float scale = 1.0f / sqrtf((float)D);

    /* the operands as the plan would hand them over */
    size_t elem = c->bf16 ? 2 : 4;
    nn_attention a = {.n_lead = 2, .lead = {B, H}, .rows = T, .keys = S, .depth = D, .vdepth = Dv, .scale = scale,
                      .bias = bias, .bias_period = c->period > 0 ? c->period : 1};
    void *qbuf, *kbuf, *vbuf, *obuf = calloc((size_t)(L * T * Dv), elem);
    int64_t qoff = 0, koff = 0, voff = 0;
    if (c->qkv_packed) { /* [B, T, 3, H, D]: requires rows == keys and depth == vdepth */
        qbuf = kbuf = vbuf = calloc((size_t)(B * T * 3 * H * D), elem);
        a.q = (nn_attn_operand){.lead_stride = {T * 3 * H * D, D}, .row_stride = 3 * H * D, .col_stride = 1};
        a.v = a.q;
        a.kt = (nn_attn_operand){.lead_stride = {T * 3 * H * D, D}, .row_stride = 1, .col_stride = 3 * H * D};
        koff = H * D;
        voff = 2 * H * D;
    } else {
        qbuf = calloc((size_t)(L * T * D), elem);
        kbuf = calloc((size_t)(L * S * D), elem);
        vbuf = calloc((size_t)(L * S * Dv), elem);
        a.q = (nn_attn_operand){.lead_stride = {H * T * D, T * D}, .row_stride = D, .col_stride = 1};
        a.kt = c->k_transposed ? (nn_attn_operand){.lead_stride = {H * S * D, S * D}, .row_stride = 1, .col_stride = D}
                               : (nn_attn_operand){.lead_stride = {H * S * D, S * D}, .row_stride = S, .col_stride = 1};
        /* V column-major within a head: the kernel's gathered (packed) path */
        a.v = (nn_attn_operand){.lead_stride = {H * S * Dv, S * Dv}, .row_stride = 1, .col_stride = S};
    }
    a.out = c->out_transposed ? (nn_attn_operand){.lead_stride = {T * H * Dv, Dv}, .row_stride = H * Dv, .col_stride = 1}
                              : (nn_attn_operand){.lead_stride = {H * T * Dv, T * Dv}, .row_stride = Dv, .col_stride = 1};
    a.q.bf16 = a.kt.bf16 = a.v.bf16 = a.out.bf16 = c->bf16;
    a.q.data = (char *)qbuf + (size_t)qoff * elem;
    a.kt.data = (char *)kbuf + (size_t)koff * elem;
    a.v.data = (char *)vbuf + (size_t)voff * elem;
    a.out.data = obuf;
    /* scatter the logical values into those layouts */
    for (int64_t l = 0; l < L; l++) {
        int64_t b = l / H, h = l % H;
        for (int64_t r = 0; r < T; r++)
            for (int64_t d = 0; d < D; d++) {
                int64_t at = b * a.q.lead_stride[0] + h * a.q.lead_stride[1] + r * a.q.row_stride + d * a.q.col_stride;
                float x = (float)q[(l * T + r) * D + d];
                if (c->bf16) ((uint16_t *)a.q.data)[at] = nn_test_to_bf16(x);
                else ((float *)a.q.data)[at] = x;
            }
        for (int64_t j = 0; j < S; j++)
            for (int64_t d = 0; d < D; d++) {
                int64_t at = b * a.kt.lead_stride[0] + h * a.kt.lead_stride[1] + d * a.kt.row_stride + j * a.kt.col_stride;
                float x = (float)k[(l * S + j) * D + d];
                if (c->bf16) ((uint16_t *)a.kt.data)[at] = nn_test_to_bf16(x);
                else ((float *)a.kt.data)[at] = x;
            }
        for (int64_t j = 0; j < S; j++)
            for (int64_t d = 0; d < Dv; d++) {
                int64_t at = b * a.v.lead_stride[0] + h * a.v.lead_stride[1] + j * a.v.row_stride + d * a.v.col_stride;
                float x = (float)v[(l * S + j) * Dv + d];
                if (c->bf16) ((uint16_t *)a.v.data)[at] = nn_test_to_bf16(x);
                else ((float *)a.v.data)[at] = x;
            }
    }
    if (underflow_check) mxcsr_clear_flags();
    nn_attention_run(&a, threads);
    if (underflow_check && mxcsr_report(c->name))
        ftl_test_fail(__FILE__, __LINE__, "%s: the kernel made denormal floats", c->name);

    /* unfused reference: scores, bias, softmax, product */
    double max_err = 0, max_ref = 0, dot = 0, n_ref = 0, n_got = 0;
    double *s = malloc((size_t)S * sizeof *s);
    for (int64_t l = 0; l < L; l++) {
        int64_t b = l / H, h = l % H;
        for (int64_t r = 0; r < T; r++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < S; j++) {
                double acc = 0;
                for (int64_t d = 0; d < D; d++) acc += q[(l * T + r) * D + d] * k[(l * S + j) * D + d];
                s[j] = (double)scale * acc + (bias ? bias[((l % c->period) * T + r) * S + j] : 0.0);
                if (s[j] > mx) mx = s[j];
            }
            for (int64_t j = 0; j < S; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t d = 0; d < Dv; d++) {
                double ref = 0;
                for (int64_t j = 0; j < S; j++) ref += s[j] / sum * v[(l * S + j) * Dv + d];
                int64_t at = b * a.out.lead_stride[0] + h * a.out.lead_stride[1] + r * a.out.row_stride + d;
                double got = c->bf16 ? nn_test_from_bf16(((uint16_t *)obuf)[at]) : ((float *)obuf)[at];
                if (fabs(got - ref) > max_err) max_err = fabs(got - ref);
                if (fabs(ref) > max_ref) max_ref = fabs(ref);
                dot += got * ref;
                n_ref += ref * ref;
                n_got += got * got;
            }
        }
    }
    if (c->bf16) {
        double cosine = dot / sqrt(n_ref * n_got);
        printf("  %-44s bf16 cosine %.6f\n", c->name, cosine);
        if (!(cosine >= 0.999)) ftl_test_fail(__FILE__, __LINE__, "%s: bf16 cosine %.6f < 0.999", c->name, cosine);
    } else {
        double tol = 1e-5 * (max_ref > 1 ? max_ref : 1);
        printf("  %-44s max |fused - unfused| %.2e (max |ref| %.3f)\n", c->name, max_err, max_ref);
        if (!(max_err <= tol)) ftl_test_fail(__FILE__, __LINE__, "%s: max error %.3g > %.3g", c->name, max_err, tol);
    }
    free(s);
    free(q);
    free(k);
    free(v);
    free(bias);
    free(obuf);
    if (!c->qkv_packed) {
        free(kbuf);
        free(vbuf);
    }
    free(qbuf);
}

static void run_case(const attn_case *c) { run_case_on(c, 2, false); }

/* Masked scores (Swin's -100 where shifted windows do not meet) give softmax terms near e^-100;
 * kept, their products with V are denormal floats, each a microcode assist on Intel CPUs (Swin's
 * masked attention shape ran 9x slower on an Ice Lake). The kernels write such terms as 0: no
 * underflow, and the result still that of the exact softmax. On both ISAs where the CPU has AVX-512. */
TEST(nn_attention_masked_scores_make_no_denormals) {
    if (!nn_attention_available()) {
        ftl_test_skip("all", "this CPU has neither AVX-512F nor AVX2 + FMA: the plan keeps attention unfused");
        return;
    }
    const attn_case cases[] = {
        {"Swin shifted: mask period 4 windows x 3 heads", 8, 3, 49, 49, 32, 32, 12, true, true, true, false},
        {"tail keys: 37 x 33, depth 20, bias", 2, 2, 37, 33, 20, 24, 2, true, false, false, false},
    };
    for (int pass = 0, passes = kernel_passes(); pass < passes; pass++) {
        use_kernels(pass);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case_on(&cases[i], 1, true);
    }
    use_kernels(-1);
}

/* The cases on the kernels this CPU picks, and again on the AVX2 kernels where it picked AVX-512. */
TEST(nn_attention_kernel_odd_shapes) {
    if (!nn_attention_available()) {
        ftl_test_skip("all", "this CPU has neither AVX-512F nor AVX2 + FMA: the plan keeps attention unfused");
        return;
    }
    const attn_case cases[] = {
        {"one query, one key", 1, 1, 1, 1, 8, 8, 0, false, false, false, false},
        {"Swin window 49, 3 heads, bias per head", 2, 3, 49, 49, 32, 32, 3, true, false, false, false},
        {"Swin shifted: mask period 4 windows x 3 heads", 8, 3, 49, 49, 32, 32, 12, true, true, true, false},
        {"ViT 197 tokens, one head, batch 13", 13, 1, 197, 197, 64, 64, 0, true, false, false, false},
        {"batch 1, 4 heads, QKV interleaved", 1, 4, 50, 50, 24, 24, 0, false, true, true, false},
        {"17 queries x 23 keys, depth 24, values 40", 3, 2, 17, 23, 24, 40, 2, false, false, false, false},
        {"100 queries (blocks of 48), values 80 (> 64)", 2, 2, 100, 61, 16, 80, 0, true, false, true, false},
        {"7 keys, values 5 (one part-vector)", 2, 1, 9, 7, 3, 5, 0, true, false, false, false},
        {"7-row tiles: 35 queries, 70 keys, values 56, bias", 2, 2, 35, 70, 24, 56, 2, true, false, false, false},
        /* key columns past a multiple of 16 that the AVX-512 softmax takes 16 rows at a time: 33, 18 */
        {"tail keys: 37 x 33, depth 20, bias", 2, 2, 37, 33, 20, 24, 2, true, false, false, false},
        {"tail keys: 100 x 18, depth 40, K^T rows", 1, 3, 100, 18, 40, 16, 0, false, false, true, false},
        {"bf16: Swin window", 2, 3, 49, 49, 32, 32, 3, true, false, false, true},
        {"bf16: ViT 197, QKV interleaved", 2, 2, 197, 197, 64, 64, 0, false, true, true, true},
        /* tails in every direction: depth 24 = 16 + 8, keys 23, values 40 */
        {"bf16: 17 x 23, depth 24, values 40, K^T rows", 3, 2, 17, 23, 24, 40, 2, false, false, false, true},
        {"bf16: 17 x 23, depth 24, values 40, K rows", 3, 2, 17, 23, 24, 40, 2, true, false, true, true},
        {"bf16: odd depth 23, 31 keys, values 17", 2, 2, 17, 31, 23, 17, 0, true, false, false, true},
        /* the 7-row bf16 tiles (3-vector chunks): keys 70 -> 3 + 2 vectors, values 56 -> 3 + 1; K^T as
         * K's rows read as 32-bit pairs by the register transposes (K transposed, depth even) */
        {"bf16: 7-row tiles, 35 x 70, values 56, bias", 2, 2, 35, 70, 24, 56, 2, true, false, false, true},
        {"bf16: 7-row tiles, Swin shifted, QKV interleaved", 8, 3, 49, 49, 32, 32, 12, true, true, true, true},
        /* bias on keys under one vector, and on keys filling their vectors exactly */
        {"bf16: 9 queries x 7 keys, bias", 2, 2, 9, 7, 4, 5, 2, true, false, false, true},
        {"bf16: 13 queries x 32 keys, bias", 3, 2, 13, 32, 16, 16, 2, true, false, false, true},
    };
    for (int pass = 0, passes = kernel_passes(); pass < passes; pass++) {
        use_kernels(pass);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            run_case(&cases[i]);
            if (cases[i].bf16 && strcmp(nn_attention_isa(), "avx512") == 0) {
                /* again with the operands widened to fp32 (the path without AVX512-BF16) */
                attn_case widened = cases[i];
                char name[96];
                snprintf(name, sizeof name, "%s (widened)", cases[i].name);
                widened.name = name;
                setenv("FTL_NN_ATTENTION_BF16_DOT", "0", 1);
                run_case(&widened);
                unsetenv("FTL_NN_ATTENTION_BF16_DOT");
            }
        }
    }
    use_kernels(-1);
}

/* Features of torchvision's ViT and Swin (small configurations) with the fusion on vs PyTorch, and vs
 * the unfused plan, at batch 1 and 13 (13 = the 3 reference inputs repeated). */
static void check_fused_model(const char *name, int expect_at_least) {
    if (!nn_attention_available()) {
        ftl_test_skip(name, "this CPU has neither AVX-512F nor AVX2 + FMA: the plan keeps attention unfused");
        return;
    }
    nn_model_ref r;
    if (!nn_torchvision_ref_read(name, &r)) {
        nn_model_ref_free(&r);
        return;
    }
    const nn_npy x = r.in, y = r.out;
    int64_t in_per = x.count / 3, out_per = y.count / 3;
    float *x13 = malloc((size_t)(13 * in_per) * sizeof *x13), *y13 = malloc((size_t)(13 * out_per) * sizeof *y13);
    for (int i = 0; i < 13; i++) {
        memcpy(x13 + i * in_per, x.data + (i % 3) * in_per, (size_t)in_per * sizeof *x13);
        memcpy(y13 + i * out_per, y.data + (i % 3) * out_per, (size_t)out_per * sizeof *y13);
    }
    float *fused = malloc((size_t)(13 * out_per) * sizeof *fused), *unfused = malloc((size_t)(13 * out_per) * sizeof *unfused);
    int batches[2] = {1, 13};
    for (int bi = 0; bi < 2; bi++) {
        for (int pass = 0; pass < 2; pass++) {
            ftl_model *m = nn_test_load(r.onnx, batches[bi], NULL, pass == 1 ? "FTL_NN_FUSED_ATTENTION" : NULL);
            if (!m) continue;
            char *plan = nn_test_plan_text(m);
            int fused_steps = 0;
            for (const char *p = plan; (p = strstr(p, "ftl:attention")) != NULL; p++) fused_steps++;
            free(plan);
            if (pass == 0 && fused_steps < expect_at_least)
                ftl_test_fail(__FILE__, __LINE__, "%s batch %d: %d fused attention steps, expected >= %d", name,
                              batches[bi], fused_steps, expect_at_least);
            if (pass == 1) CHECK_EQ_INT(fused_steps, 0);
            if (ftl_model_run(m, x13, 13, pass == 0 ? fused : unfused) != FTL_OK)
                ftl_test_fail(__FILE__, __LINE__, "run %s: %s", name, ftl_last_error());
            ftl_model_free(m);
        }
        char what[96];
        snprintf(what, sizeof what, "batch %d: fused vs PyTorch", batches[bi]);
        nn_check_close(__FILE__, __LINE__, what, fused, y13, 13 * out_per, 2e-5);
        snprintf(what, sizeof what, "batch %d: fused vs unfused", batches[bi]);
        nn_check_close(__FILE__, __LINE__, what, fused, unfused, 13 * out_per, 1e-5);
    }
    free(x13);
    free(y13);
    free(fused);
    free(unfused);
    nn_model_ref_free(&r);
}

TEST(nn_attention_vit_fused_vs_unfused) { check_fused_model("vit_small", 3); }
TEST(nn_attention_swin_fused_vs_unfused) { check_fused_model("swin_small_cfg", 4); }

/* The whole Swin plan (shifted windows, so masked attentions) on one thread, so that every step runs
 * on this thread: no step raises an underflow or meets a denormal operand (MXCSR's sticky flags),
 * and the features stay PyTorch's. */
TEST(nn_swin_plan_makes_no_denormals) {
    nn_model_ref r;
    if (!nn_torchvision_ref_read("swin_small_cfg", &r)) {
        nn_model_ref_free(&r);
        return;
    }
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = 3;
    o.threads = 1;
    ftl_model *m = NULL;
    if (ftl_model_load(r.onnx, &o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s: %s", r.onnx, ftl_last_error());
        nn_model_ref_free(&r);
        return;
    }
    float *out = malloc((size_t)r.out.count * sizeof *out);
    mxcsr_clear_flags();
    ftl_status st = ftl_model_run(m, r.in.data, 3, out);
    unsigned raised = mxcsr_report("swin_small_cfg, 1 thread");
    if (st != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
    else nn_check_close(__FILE__, __LINE__, "vs PyTorch", out, r.out.data, r.out.count, 2e-5);
    CHECK(raised == 0);
    free(out);
    ftl_model_free(m);
    nn_model_ref_free(&r);
}
