/* The head: GEMM kernels vs a double-precision reference, the cross-entropy + dense gradient vs
 * central finite differences of an independent double-precision loss, dropout masks, thread-count
 * invariance, evaluation and prediction. */
#include "train/gemm.h"
#include "util/rng.h"
#include "train_test_util.h"

/* ---- GEMM ---- */

/* Exact-ish double result and the sum of |terms| for the rigorous float32 error bound. */
static void gemm_reference(const ftl_gemm_args *g, const float *c_before, double *out, double *abs_sum) {
    for (size_t i = 0; i < g->M; i++)
        for (size_t j = 0; j < g->N; j++) {
            double s = g->accumulate ? c_before[i * g->ldc + j] : 0.0, a = fabs(s);
            for (size_t k = 0; k < g->K; k++) {
                double t = (double)g->A[i * g->a_row_stride + k * g->a_col_stride] * (double)g->B[k * g->ldb + j];
                s += t;
                a += fabs(t);
            }
            out[i * g->N + j] = s;
            abs_sum[i * g->N + j] = a;
        }
}

TEST(train_gemm_matches_double_reference_all_kernels) {
    /* Sizes around every tile edge: MR (4, 6, 8), NR (16, 48), the K block (256), plus 1s. */
    const size_t Ms[] = {1, 5, 6, 7, 8, 9, 17, 33}, Ns[] = {1, 15, 16, 17, 47, 48, 49, 97, 257}, Ks[] = {0, 1, 7, 256, 300};
    ftl_gemm_isa before = ftl_gemm_active();
    for (int isa = FTL_GEMM_PORTABLE; isa <= FTL_GEMM_AVX512; isa++) {
        if (!ftl_gemm_supported((ftl_gemm_isa)isa)) continue;
        ftl_gemm_select((ftl_gemm_isa)isa);
        double worst = 0;
        int runs = 0;
        for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
            for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
                for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                    size_t M = Ms[a], N = Ns[b], K = Ks[c];
                    float *A = malloc((M * K + 1) * 4), *B = malloc((K * N + 1) * 4), *C0 = malloc(M * N * 4),
                          *C = malloc(M * N * 4);
                    double *R = malloc(M * N * 8), *S = malloc(M * N * 8);
                    train_fill_uniform(A, M * K, M * 131 + K, -1, 1);
                    train_fill_uniform(B, K * N, N * 7 + K, -1, 1);
                    train_fill_uniform(C0, M * N, 99, -1, 1);
                    for (int transposed = 0; transposed < 2; transposed++)
                        for (int acc = 0; acc < 2; acc++) {
                            ftl_gemm_args g = {M, N, K, A, transposed ? 1 : K, transposed ? M : 1, B, N, C, N, acc, NULL};
                            memcpy(C, C0, M * N * 4);
                            gemm_reference(&g, C0, R, S);
                            ftl_gemm(&g);
                            /* Worst-case bound of recursive float32 summation: |err| <= (K + 1) u sum|terms|
                             * with u = 2^-24, doubled for separately rounded products (portable kernel). */
                            for (size_t i = 0; i < M * N; i++) {
                                double bound = 2.0 * (double)(K + 1) * 0x1p-24 * S[i] + 1e-30;
                                worst = fmax(worst, fabs(C[i] - R[i]) / bound);
                            }
                            runs++;
                        }
                    free(A), free(B), free(C0), free(C), free(R), free(S);
                }
        printf("  %s: %d products, worst error %.4f of the float32 bound\n", ftl_gemm_isa_name((ftl_gemm_isa)isa), runs, worst);
        if (!(worst <= 1.0)) ftl_test_fail(__FILE__, __LINE__, "%s GEMM error %.3g", ftl_gemm_isa_name((ftl_gemm_isa)isa), worst);
    }
    ftl_gemm_select(before);
}

/* ---- finite differences ---- */

/* Independent double-precision loss: mean over rows of logsumexp(x W + b) - (x W + b)[y]. */
static double reference_loss(const double *x, const int32_t *y, size_t n, size_t D, size_t C, const double *W,
                             const double *b) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        double z[64], m = -INFINITY, s = 0;
        for (size_t c = 0; c < C; c++) {
            z[c] = b[c];
            for (size_t d = 0; d < D; d++) z[c] += x[i * D + d] * W[d * C + c];
            m = fmax(m, z[c]);
        }
        for (size_t c = 0; c < C; c++) s += exp(z[c] - m);
        total += m + log(s) - z[y[i]];
    }
    return total / (double)n;
}

/* Our loss and gradient vs the reference loss and its central differences (h = 1e-5 in double:
 * truncation ~h^2 and round-off ~1e-16/h are both below 1e-9). Ours runs in float32 (unit
 * roundoff 6e-8) over sums of a few dozen terms of size <= 1, hence atol 1e-7 + rtol 1e-5. */
static void check_gradient(float dropout) {
    const size_t n = 5, D = 20, C = 7; /* D even: each row uses D/2 RNG outputs (see below) */
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, (int64_t)D, (int64_t)C));
    ftl_head_init_glorot(&h, 7);
    train_fill_uniform(h.bias, C, 3, -0.5f, 0.5f);
    h.dropout = dropout;
    float x[5 * 20];
    train_fill_uniform(x, n * D, 11, 0, 2);
    int32_t y[5] = {0, 6, 3, 3, 1};
    ftl_row_draws draws = {.seed = 0x1234, .step = 3, .position_base = 10};
    ftl_metric_counts m = {0};
    REQUIRE_OK(ftl_head_train_batch(&h, x, y, n, &draws, (float)(1.0 / (double)n), &m));

    /* The inputs the dense layer saw: dropout scales kept inputs by 1/(1-p), zeroes the rest. */
    double xd[5 * 20];
    if (dropout > 0) {
        /* Each row's mask depends only on (seed, step, its position in the global batch): replay
         * the rows one at a time at their positions. With x = 1, zero weights and 2 classes,
         * grad_kernel[d][0] / grad_bias[0] is the dropped-out input. */
        ftl_head probe;
        REQUIRE_OK(ftl_head_init(&probe, (int64_t)D, 2));
        probe.dropout = dropout;
        float ones[5 * 20];
        for (size_t i = 0; i < n * D; i++) ones[i] = 1.0f;
        int32_t zeros[5] = {0};
        for (size_t i = 0; i < n; i++) {
            ftl_metric_counts mm = {0};
            ftl_row_draws one = {.seed = 0x1234, .step = 3, .position_base = 10 + (int64_t)i};
            REQUIRE_OK(ftl_head_train_batch(&probe, ones + i * D, zeros, 1, &one, 1.0f, &mm));
            /* grad_kernel[d][0] = xd[d] * dz[0], grad_bias[0] = dz[0] */
            for (size_t d = 0; d < D; d++) xd[i * D + d] = probe.grad_kernel[d * 2] / probe.grad_bias[0] * x[i * D + d];
        }
        ftl_head_free(&probe);
        int kept = 0;
        for (size_t i = 0; i < n * D; i++) {
            double ratio = x[i] != 0 ? xd[i] / x[i] : 0;
            CHECK(fabs(ratio) < 1e-6 || fabs(ratio - 1.0 / (1.0 - dropout)) < 1e-5);
            kept += fabs(ratio) > 1e-6;
        }
        CHECK(kept > 0 && kept < (int)(n * D)); /* p = 0.5 over 100 draws: both outcomes occur */
    } else {
        for (size_t i = 0; i < n * D; i++) xd[i] = x[i];
    }

    double W[20 * 7], b[7];
    for (size_t i = 0; i < D * C; i++) W[i] = h.kernel[i];
    for (size_t i = 0; i < C; i++) b[i] = h.bias[i];
    double ref = reference_loss(xd, y, n, D, C, W, b);
    CHECK_NEAR(ftl_metric_loss(&m), ref, 1e-6 * fabs(ref));
    const double step = 1e-5;
    double worst = 0;
    for (size_t i = 0; i < D * C + C; i++) {
        double *p = i < D * C ? &W[i] : &b[i - D * C];
        double saved = *p;
        *p = saved + step;
        double up = reference_loss(xd, y, n, D, C, W, b);
        *p = saved - step;
        double down = reference_loss(xd, y, n, D, C, W, b);
        *p = saved;
        double fd = (up - down) / (2 * step);
        double ours = h.grads[i];
        double err = fabs(ours - fd) / (1e-7 + 1e-5 * fabs(fd));
        worst = fmax(worst, err);
    }
    printf("  dropout %.1f: worst gradient error %.3f of tolerance\n", (double)dropout, worst);
    CHECK(worst <= 1.0);
    /* the input gradient (what fine-tuning sends into the backbone): finite differences of the loss
     * over the inputs the dense layer saw, times d(seen)/d(input) (dropout's 0 or 1/(1-p)) */
    float dx[5 * 20];
    ftl_row_draws batch_draws = {.seed = 0x1234, .step = 3, .position_base = 10};
    REQUIRE_OK(ftl_head_input_grad(&h, n, &batch_draws, dx));
    double worst_dx = 0;
    for (size_t i = 0; i < n * D; i++) {
        double saved = xd[i];
        xd[i] = saved + step;
        double up = reference_loss(xd, y, n, D, C, W, b);
        xd[i] = saved - step;
        double down = reference_loss(xd, y, n, D, C, W, b);
        xd[i] = saved;
        double ratio = dropout > 0 ? (x[i] != 0 ? xd[i] / x[i] : 0) : 1.0;
        double fd = (up - down) / (2 * step) * ratio;
        worst_dx = fmax(worst_dx, fabs(dx[i] - fd) / (1e-7 + 1e-5 * fabs(fd)));
    }
    printf("  dropout %.1f: worst input-gradient error %.3f of tolerance\n", (double)dropout, worst_dx);
    CHECK(worst_dx <= 1.0);
    ftl_head_free(&h);
}

TEST(train_head_gradient_matches_finite_differences) { check_gradient(0.0f); }
TEST(train_head_gradient_with_dropout_matches_finite_differences) { check_gradient(0.5f); }

TEST(train_head_dropout_keeps_expected_fraction_and_is_seeded) {
    const size_t D = 4000;
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, (int64_t)D, 2));
    h.dropout = 0.3f;
    float *ones = malloc(D * 4);
    for (size_t i = 0; i < D; i++) ones[i] = 1.0f;
    int32_t y = 1;
    ftl_row_draws r1 = {.seed = 1, .step = 0}, r2 = r1, r3 = {.seed = 1, .step = 1}, r4 = {.seed = 1, .position_base = 1};
    float *g1 = malloc(D * 2 * 4);
    ftl_metric_counts m = {0};
    REQUIRE_OK(ftl_head_train_batch(&h, ones, &y, 1, &r1, 1.0f, &m));
    memcpy(g1, h.grad_kernel, D * 2 * 4);
    int kept = 0;
    for (size_t d = 0; d < D; d++) kept += g1[d * 2] != 0.0f;
    /* Binomial(4000, 0.7): mean 2800, sd 29; 5 sd either side. */
    CHECK(kept > 2800 - 145 && kept < 2800 + 145);
    REQUIRE_OK(ftl_head_train_batch(&h, ones, &y, 1, &r2, 1.0f, &m));
    CHECK(memcmp(g1, h.grad_kernel, D * 2 * 4) == 0); /* same (seed, step, row): same mask */
    REQUIRE_OK(ftl_head_train_batch(&h, ones, &y, 1, &r3, 1.0f, &m));
    CHECK(memcmp(g1, h.grad_kernel, D * 2 * 4) != 0); /* another step */
    REQUIRE_OK(ftl_head_train_batch(&h, ones, &y, 1, &r4, 1.0f, &m));
    CHECK(memcmp(g1, h.grad_kernel, D * 2 * 4) != 0); /* another row position */
    /* Evaluation never drops out: evaluating twice gives the same loss as the weights say. */
    ftl_metric_counts e1 = {0}, e2 = {0};
    CHECK_OK(ftl_head_evaluate_batch(&h, ones, &y, 1, &e1));
    CHECK_OK(ftl_head_evaluate_batch(&h, ones, &y, 1, &e2));
    CHECK(e1.loss_sum == e2.loss_sum);
    CHECK_NEAR(e1.loss_sum, log(2.0), 1e-6); /* zero weights: uniform over 2 classes */
    free(ones), free(g1);
    ftl_head_free(&h);
}

TEST(train_head_rejects_bad_labels_and_sizes) {
    ftl_head h;
    CHECK(ftl_head_init(&h, 0, 5) == FTL_E_INVALID_ARG);
    REQUIRE_OK(ftl_head_init(&h, 3, 4));
    float x[6] = {0};
    int32_t y[2] = {1, 4};
    ftl_row_draws r = {.seed = 1};
    ftl_metric_counts m = {0};
    CHECK(ftl_head_train_batch(&h, x, y, 2, &r, 0.5f, &m) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "label 4 of batch example 1 is outside [0, 4)");
    y[1] = -1;
    CHECK(ftl_head_evaluate_batch(&h, x, y, 2, &m) == FTL_E_FORMAT);
    h.dropout = 1.0f;
    y[1] = 0;
    CHECK(ftl_head_train_batch(&h, x, y, 2, &r, 0.5f, &m) == FTL_E_INVALID_ARG);
    ftl_head_free(&h);
}

TEST(train_head_glorot_init_range_and_determinism) {
    ftl_head a, b;
    REQUIRE_OK(ftl_head_init(&a, 200, 57));
    REQUIRE_OK(ftl_head_init(&b, 200, 57));
    ftl_head_init_glorot(&a, 42);
    ftl_head_init_glorot(&b, 42);
    CHECK(memcmp(a.params, b.params, a.param_count * 4) == 0);
    double limit = sqrt(6.0 / 257.0), sum = 0, sumsq = 0;
    size_t n = 200 * 57;
    bool in_range = true;
    for (size_t i = 0; i < n; i++) {
        in_range &= fabs(a.kernel[i]) <= limit;
        sum += a.kernel[i];
        sumsq += (double)a.kernel[i] * a.kernel[i];
    }
    CHECK(in_range);
    /* U(-a, a): mean 0 (sd a/sqrt(3n)), variance a^2/3 = 2/(D+C). */
    CHECK(fabs(sum / (double)n) < 5 * limit / sqrt(3.0 * (double)n));
    CHECK_NEAR(sumsq / (double)n, 2.0 / 257.0, 0.05 * 2.0 / 257.0);
    for (int c = 0; c < 57; c++) CHECK(a.bias[c] == 0.0f);
    ftl_head_init_glorot(&b, 43);
    CHECK(memcmp(a.params, b.params, a.param_count * 4) != 0);
    ftl_head_free(&a);
    ftl_head_free(&b);
}

/* Work is split over output elements only, so 1 and 2 threads give the same bits. */
TEST(train_head_results_do_not_depend_on_thread_count) {
    const size_t n = 64, D = 520, C = 97;
    float *x = malloc(n * D * 4);
    int32_t y[64];
    train_fill_uniform(x, n * D, 5, 0, 2);
    for (size_t i = 0; i < n; i++) y[i] = (int32_t)((i * 37) % C);
    float *params[2];
    int threads_before = ftl_train_threads();
    for (int t = 0; t < 2; t++) {
        ftl_train_set_threads(t + 1);
        ftl_head h;
        ftl_optimizer opt;
        ftl_optimizer_config cfg = ftl_optimizer_config_default(FTL_OPTIMIZER_NADAM);
        REQUIRE_OK(ftl_head_init(&h, (int64_t)D, (int64_t)C));
        REQUIRE_OK(ftl_optimizer_init(&opt, &cfg, h.param_count));
        ftl_head_init_glorot(&h, 1);
        h.dropout = 0.2f;
        for (int step = 0; step < 5; step++) {
            ftl_metric_counts m = {0};
            ftl_row_draws r = {.seed = 9, .step = step};
            REQUIRE_OK(ftl_head_train_batch(&h, x, y, n, &r, (float)(1.0 / (double)n), &m));
            ftl_optimizer_step(&opt, h.params, h.grads, 0.01);
        }
        params[t] = malloc(h.param_count * 4);
        memcpy(params[t], h.params, h.param_count * 4);
        CHECK(memcmp(params[t], params[0], h.param_count * 4) == 0);
        ftl_optimizer_free(&opt);
        ftl_head_free(&h);
    }
    ftl_train_set_threads(threads_before);
    free(params[0]), free(params[1]), free(x);
}

TEST(train_head_predict_and_evaluate_agree) {
    const size_t n = 10, D = 8, C = 5;
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, (int64_t)D, (int64_t)C));
    ftl_head_init_glorot(&h, 3);
    train_fill_uniform(h.bias, C, 4, -1, 1);
    float x[80], probs[50], logits[50];
    train_fill_uniform(x, n * D, 6, 0, 3);
    int32_t y[10];
    for (size_t i = 0; i < n; i++) y[i] = (int32_t)(i % C);
    REQUIRE_OK(ftl_head_predict(&h, x, n, probs, logits));
    double loss = 0;
    int correct = 0;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        size_t arg = 0;
        for (size_t c = 0; c < C; c++) {
            s += probs[i * C + c];
            if (logits[i * C + c] > logits[i * C + arg]) arg = c;
            /* logits are x W + b, checked against a direct double sum */
            double z = h.bias[c];
            for (size_t d = 0; d < D; d++) z += (double)x[i * D + d] * h.kernel[d * C + c];
            CHECK_NEAR(logits[i * C + c], z, 1e-5);
        }
        CHECK_NEAR(s, 1.0, 1e-6);
        loss -= log(probs[i * C + (size_t)y[i]]);
        correct += arg == (size_t)y[i];
    }
    ftl_metric_counts m = {0};
    REQUIRE_OK(ftl_head_evaluate_batch(&h, x, y, n, &m));
    CHECK_EQ_INT(m.count, 10);
    CHECK_EQ_INT(m.correct, correct);
    CHECK_NEAR(m.loss_sum, loss, 1e-5);
    /* Large logits must not overflow: log-sum-exp is shifted by the maximum. */
    for (size_t c = 0; c < C; c++) h.bias[c] = 1000.0f * (float)c;
    ftl_metric_counts big = {0};
    REQUIRE_OK(ftl_head_evaluate_batch(&h, x, y, 1, &big));
    CHECK(isfinite(big.loss_sum));
    ftl_head_free(&h);
}

/* No denormal anywhere in the gradient, the moments or the weights, even with logit gaps far
 * above 87 (where e^gap underflows), and the flushed results equal the unflushed math (double,
 * no cut-off) within 1e-6 relative. */
static bool denormal(float v) { return v != 0.0f && fabsf(v) < 0x1p-126f; }

TEST(train_head_flushes_tiny_values_instead_of_making_denormals) {
    const size_t n = 4, D = 3, C = 6;
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, (int64_t)D, (int64_t)C));
    /* logits z = x W + b with gaps 0, 30, 60, 90, 120, 150 below class 0 */
    for (size_t c = 0; c < C; c++) {
        h.bias[c] = -30.0f * (float)c;
        for (size_t d = 0; d < D; d++) h.kernel[d * C + c] = 0.0f;
    }
    float x[4 * 3] = {1, 2, 3, 0.5f, 0.25f, 1, 3, 1, 0.125f, 2, 2, 2};
    int32_t y[4] = {0, 0, 1, 5};
    ftl_row_draws draws = {.seed = 1, .step = 0, .position_base = 0};
    ftl_metric_counts m = {0};
    float scale = 1.0f / 64; /* these rows as a part of a global batch of 64 */
    REQUIRE_OK(ftl_head_train_batch(&h, x, y, n, &draws, scale, &m));
    /* the reference: softmax in double without a cut-off */
    double gb[6] = {0}, gk[3 * 6] = {0}, loss = 0;
    for (size_t i = 0; i < n; i++) {
        double sum = 0, p[6];
        for (size_t c = 0; c < C; c++) sum += exp(-30.0 * (double)c);
        loss += log(sum) + 30.0 * (double)y[i];
        for (size_t c = 0; c < C; c++) {
            p[c] = exp(-30.0 * (double)c) / sum - (c == (size_t)y[i]);
            gb[c] += p[c] * scale;
            for (size_t d = 0; d < D; d++) gk[d * C + c] += x[i * D + d] * p[c] * scale;
        }
    }
    double worst = 0, biggest = 0;
    for (size_t c = 0; c < C; c++) {
        biggest = fmax(biggest, fabs(gb[c]));
        worst = fmax(worst, fabs(h.grad_bias[c] - gb[c]));
        CHECK(!denormal(h.grad_bias[c]));
        for (size_t d = 0; d < D; d++) {
            worst = fmax(worst, fabs(h.grad_kernel[d * C + c] - gk[d * C + c]));
            CHECK(!denormal(h.grad_kernel[d * C + c]));
        }
    }
    CHECK(worst <= 1e-6 * biggest);
    CHECK(fabs(m.loss_sum - loss) <= 1e-6 * loss);
    /* many optimizer steps on gradients that then stop: the moments decay to 0, never through
     * denormals, and the weights equal double-precision Adam without flushing within 1e-6 */
    ftl_optimizer_config oc = ftl_optimizer_config_default(FTL_OPTIMIZER_ADAM);
    ftl_optimizer opt;
    REQUIRE_OK(ftl_optimizer_init(&opt, &oc, h.param_count));
    double pr[6 * 4], mr[6 * 4] = {0}, vr[6 * 4] = {0};
    for (size_t k = 0; k < h.param_count; k++) pr[k] = h.params[k];
    float *g = calloc(h.param_count, sizeof(float));
    bool any_denormal = false;
    for (int t = 1; t <= 2000; t++) {
        for (size_t k = 0; k < h.param_count; k++) g[k] = t <= 3 ? h.grads[k] * (k % 2 ? 1e-18f : 1.0f) : 0.0f;
        ftl_optimizer_step(&opt, h.params, g, 0.001);
        double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t);
        for (size_t k = 0; k < h.param_count; k++) {
            mr[k] = 0.9 * mr[k] + 0.1 * g[k];
            vr[k] = 0.999 * vr[k] + 0.001 * (double)g[k] * g[k];
            pr[k] -= 0.001 * (mr[k] / bc1) / (sqrt(vr[k] / bc2) + 1e-7);
        }
        for (size_t k = 0; k < h.param_count * 2; k++) any_denormal |= denormal(opt.state[k]);
        for (size_t k = 0; k < h.param_count; k++) any_denormal |= denormal(h.params[k]);
    }
    CHECK(!any_denormal);
    double pworst = 0;
    for (size_t k = 0; k < h.param_count; k++) pworst = fmax(pworst, fabs(h.params[k] - pr[k]) / fmax(1e-3, fabs(pr[k])));
    CHECK(pworst <= 1e-6);
    free(g);
    ftl_optimizer_free(&opt);
    ftl_head_free(&h);
}

/* Flip TTA's logits: their softmax is the mean of the two orientations' softmax (an independent
 * double computation), they stay finite for probabilities far below float's range, above 256
 * classes too (the heap path); the head's TTA scoring equals scoring those logits. */
static void softmax_double(const float *z, size_t c, double *p) {
    double m = z[0], s = 0;
    for (size_t j = 1; j < c; j++) m = z[j] > m ? z[j] : m;
    for (size_t j = 0; j < c; j++) s += (p[j] = exp((double)z[j] - m));
    for (size_t j = 0; j < c; j++) p[j] /= s;
}

TEST(train_tta_mean_logits_softmax_is_the_mean) {
    const size_t sizes[2] = {5, 300};
    for (int t = 0; t < 2; t++) {
        size_t c = sizes[t], n = 3;
        float *za = malloc(n * c * 4), *zb = malloc(n * c * 4), *out = malloc(n * c * 4);
        double *pa = malloc(c * 8), *pb = malloc(c * 8), *po = malloc(c * 8);
        ftl_rng rng;
        ftl_rng_seed(&rng, 7 + (uint64_t)t);
        for (size_t i = 0; i < n * c; i++) za[i] = (float)(20 * ftl_rng_uniform(&rng) - 10), zb[i] = (float)(20 * ftl_rng_uniform(&rng) - 10);
        za[0] = 900.0f; /* row 0: one class dominates one orientation by e^900 */
        ftl_tta_mean_logits(za, zb, n, c, out);
        double worst = 0;
        bool finite = true;
        for (size_t i = 0; i < n; i++) {
            softmax_double(za + i * c, c, pa);
            softmax_double(zb + i * c, c, pb);
            softmax_double(out + i * c, c, po);
            for (size_t j = 0; j < c; j++) {
                finite &= isfinite(out[i * c + j]);
                double e = fabs(po[j] - 0.5 * (pa[j] + pb[j]));
                worst = e > worst ? e : worst;
            }
        }
        CHECK(finite);
        CHECK(worst <= 1e-6);
        free(za), free(zb), free(out), free(pa), free(pb), free(po);
    }
    ftl_tta pick;
    CHECK(ftl_tta_parse("flip", false, &pick) == FTL_OK && pick == FTL_TTA_FLIP);
    CHECK(ftl_tta_parse("model", false, &pick) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "--tta model: ftl's test-time augmentation is flip");
    CHECK(ftl_tta_parse("model", true, &pick) == FTL_OK && pick == FTL_TTA_AS_TRAINED);
}

TEST(train_head_tta_scores_the_mean_logits) {
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, 4, 3));
    ftl_head_init_glorot(&h, 3);
    float x[8] = {1, -2, 0.5f, 3, 0, 1, -1, 2}, xm[8] = {0.5f, -1, 2, 1, 1, 1, 0, -3};
    int32_t y[2] = {2, 0};
    float za[6], zb[6], want[6], got[6], probs[6];
    REQUIRE_OK(ftl_head_predict(&h, x, 2, NULL, za));
    REQUIRE_OK(ftl_head_predict(&h, xm, 2, NULL, zb));
    ftl_tta_mean_logits(za, zb, 2, 3, want);
    REQUIRE_OK(ftl_head_predict_tta(&h, x, xm, 2, probs, got));
    CHECK(memcmp(got, want, sizeof got) == 0);
    ftl_metric_counts tta = {0};
    REQUIRE_OK(ftl_head_evaluate_batch_tta(&h, x, xm, y, 2, &tta));
    double loss = 0;
    for (int i = 0; i < 2; i++) {
        double pa[3], pb[3];
        softmax_double(za + 3 * i, 3, pa);
        softmax_double(zb + 3 * i, 3, pb);
        loss -= log(0.5 * (pa[y[i]] + pb[y[i]]));
        CHECK_NEAR(probs[3 * i + y[i]], 0.5 * (pa[y[i]] + pb[y[i]]), 1e-6);
    }
    CHECK_NEAR(tta.loss_sum, loss, 1e-6);
    CHECK(tta.count == 2);
    ftl_head_free(&h);
}
