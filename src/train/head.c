/* The softmax head: inverted dropout -> Dense(D -> C) -> softmax cross-entropy (mean over the batch).
 * Parameters, gradients: one block each (see include/ftl/train.h). */
#include "ftl/train.h"
#include "train/denormal_flush.h"
#include "train/gemm.h"
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ftl_head_workspace {
    size_t capacity; /* rows */
    float *x_dropped; /* [capacity x D] dropout-masked inputs (training with dropout only) */
    float *logits;    /* [capacity x C] */
    float *dlogits;   /* [capacity x C] */
    float *dz_t, *dx_t; /* ftl_head_input_grad: dZ^T [C x rows] and dX^T [D x rows], rows <= t_capacity */
    size_t t_capacity;
    ftl_pool_site train_site, eval_site, backward_site, input_grad_site; /* threading measurements per GEMM shape */
};

float *ftl_train_alloc_floats(size_t count) {
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) {
        fprintf(stderr, "ftl: error: out of memory allocating %zu floats\n", count);
        abort();
    }
    memset(p, 0, bytes);
    return p;
}

ftl_status ftl_head_param_count(int64_t dim, int64_t classes, size_t *count) {
    if (dim < 1 || classes < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "head needs at least 1 feature and 1 class (got %lld features, %lld classes)",
                        (long long)dim, (long long)classes);
    /* Bounded so that every index fits comfortably: 2^20 features x 2^20 classes at most. */
    if (dim > (1 << 20) || classes > (1 << 20) || (double)dim * (double)classes > 4.0e9)
        return ftl_fail(FTL_E_UNSUPPORTED, "head of %lld features x %lld classes is too large", (long long)dim,
                        (long long)classes);
    *count = (size_t)dim * (size_t)classes + (size_t)classes;
    return FTL_OK;
}

/* params/grads NULL: blocks of the head's own. */
static ftl_status head_setup(ftl_head *head, int64_t dim, int64_t classes, float *params, float *grads) {
    memset(head, 0, sizeof *head);
    FTL_TRY(ftl_head_param_count(dim, classes, &head->param_count));
    head->dim = dim;
    head->classes = classes;
    head->borrowed_blocks = params != NULL;
    head->params = params ? params : ftl_train_alloc_floats(head->param_count);
    head->grads = params ? grads : ftl_train_alloc_floats(head->param_count);
    head->kernel = head->params;
    head->bias = head->params + (size_t)dim * (size_t)classes;
    head->grad_kernel = head->grads;
    head->grad_bias = head->grads + (size_t)dim * (size_t)classes;
    head->ws = ftl_xcalloc(1, sizeof *head->ws);
    return FTL_OK;
}

ftl_status ftl_head_init(ftl_head *head, int64_t dim, int64_t classes) {
    return head_setup(head, dim, classes, NULL, NULL);
}

ftl_status ftl_head_init_borrowed(ftl_head *head, int64_t dim, int64_t classes, float *params, float *grads) {
    return head_setup(head, dim, classes, params, grads);
}

void ftl_head_free(ftl_head *head) {
    if (!head) return;
    if (!head->borrowed_blocks) {
        free(head->params);
        free(head->grads);
    }
    if (head->ws) {
        free(head->ws->x_dropped);
        free(head->ws->logits);
        free(head->ws->dlogits);
        free(head->ws->dz_t);
        free(head->ws->dx_t);
        free(head->ws);
    }
    memset(head, 0, sizeof *head);
}

void ftl_head_init_glorot(ftl_head *head, uint64_t seed) {
    ftl_rng rng;
    ftl_rng_seed(&rng, seed);
    double limit = sqrt(6.0 / (double)(head->dim + head->classes));
    size_t n = (size_t)head->dim * (size_t)head->classes;
    for (size_t i = 0; i < n; i++) head->kernel[i] = (float)((2.0 * ftl_rng_uniform(&rng) - 1.0) * limit);
    memset(head->bias, 0, (size_t)head->classes * sizeof(float));
}

static void ensure_capacity(ftl_head *head, size_t n, bool need_dropout_buffer) {
    struct ftl_head_workspace *ws = head->ws;
    if (n > ws->capacity) {
        free(ws->logits);
        free(ws->dlogits);
        free(ws->x_dropped);
        ws->x_dropped = NULL;
        ws->logits = ftl_train_alloc_floats(n * (size_t)head->classes);
        ws->dlogits = ftl_train_alloc_floats(n * (size_t)head->classes);
        ws->capacity = n;
    }
    if (need_dropout_buffer && !ws->x_dropped) ws->x_dropped = ftl_train_alloc_floats(ws->capacity * (size_t)head->dim);
}

ftl_status ftl_head_check_labels(int64_t classes, const int32_t *labels, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return ftl_fail(FTL_E_FORMAT, "label %d of batch example %zu is outside [0, %lld) for a %lld-class head",
                            labels[i], i, (long long)classes, (long long)classes);
    return FTL_OK;
}

/* logits = x W + b */
static void forward(ftl_head *head, const float *x, size_t n, ftl_pool_site *site) {
    size_t C = (size_t)head->classes;
    float *z = head->ws->logits;
    for (size_t i = 0; i < n; i++) memcpy(z + i * C, head->bias, C * sizeof(float));
    ftl_gemm_args g = {.M = n, .N = C, .K = (size_t)head->dim, .A = x, .a_row_stride = (size_t)head->dim,
                       .a_col_stride = 1, .B = head->kernel, .ldb = C, .C = z, .ldc = C, .accumulate = true,
                       .site = site};
    ftl_gemm(&g);
}

/* Per row: loss = logsumexp(z) - z[y] (max-shifted, so no overflow), argmax (first maximum).
 * If dz is given: dz = (softmax(z) - onehot(y)) * grad_scale; else if probs is given: softmax(z).
 * Label smoothing e (training only, with dz): the target is (1 - e) onehot(y) + e / C, as in
 * PyTorch's CrossEntropyLoss(label_smoothing=e) and Keras' label_smoothing: the loss becomes
 * (1 - e) (lse - z[y]) + e (lse - mean(z)) and dz = (softmax(z) - target) * grad_scale. */
static void softmax_cross_entropy_strided(const float *z, size_t n, size_t C, size_t ld, const int32_t *labels,
                                          float grad_scale, float smoothing, float *dz, float *probs,
                                          ftl_metric_counts *counts) {
    const bool smooth = smoothing > 0.0f && dz && labels;
    for (size_t i = 0; i < n; i++) {
        const float *row = z + i * ld;
        size_t arg = 0;
        float m = row[0];
        for (size_t j = 1; j < C; j++)
            if (row[j] > m) m = row[j], arg = j;
        float *e = dz ? dz + i * ld : probs ? probs + i * ld : NULL;
        double sum = 0;
        /* Terms below e^FTL_SOFTMAX_CUTOFF are 0 (train/denormal_flush.h): next to the maximum's
         * e^0 = 1 they change nothing, and kept they would turn into denormals further on. */
        if (e) {
            for (size_t j = 0; j < C; j++) {
                float t = row[j] - m;
                sum += (e[j] = t < FTL_SOFTMAX_CUTOFF ? 0.0f : expf(t));
            }
        } else {
            for (size_t j = 0; j < C; j++) {
                float t = row[j] - m;
                sum += t < FTL_SOFTMAX_CUTOFF ? 0.0f : expf(t);
            }
        }
        if (labels) {
            int32_t y = labels[i];
            double lse = log(sum) + (double)m;
            if (smooth) {
                double zsum = 0;
                for (size_t j = 0; j < C; j++) zsum += (double)row[j];
                counts->loss_sum += (1.0 - (double)smoothing) * (lse - (double)row[y]) + (double)smoothing * (lse - zsum / (double)C);
            } else {
                counts->loss_sum += lse - (double)row[y];
            }
            counts->correct += (size_t)y == arg;
            counts->count += 1;
        }
        if (dz) {
            float inv = (float)(1.0 / sum);
            float *d = dz + i * ld;
            for (size_t j = 0; j < C; j++) d[j] = d[j] * inv * grad_scale;
            if (smooth) {
                float each = (float)((double)smoothing / (double)C) * grad_scale;
                for (size_t j = 0; j < C; j++) d[j] -= each;
                d[labels[i]] -= (1.0f - smoothing) * grad_scale;
            } else if (labels) {
                d[labels[i]] -= grad_scale;
            }
        } else if (probs) {
            float inv = (float)(1.0 / sum);
            for (size_t j = 0; j < C; j++) probs[i * ld + j] *= inv;
        }
    }
}

static void softmax_cross_entropy(const float *z, size_t n, size_t C, const int32_t *labels, float grad_scale,
                                  float smoothing, float *dz, float *probs, ftl_metric_counts *counts) {
    softmax_cross_entropy_strided(z, n, C, C, labels, grad_scale, smoothing, dz, probs, counts);
}

/* The dropout stream of one row: a function of (seed, step, position in the global batch) only. */
static void row_stream(const ftl_row_draws *d, size_t i, ftl_rng *rng) {
    int64_t position = d->positions ? (int64_t)d->positions[i] : d->position_base + (int64_t)i;
    uint64_t x = d->seed ^ 0x6A09E667F3BCC909ull;
    uint64_t a = ftl_splitmix64(&x);
    x = a ^ ((uint64_t)d->step * 0x9E3779B97F4A7C15ull);
    uint64_t b = ftl_splitmix64(&x);
    ftl_rng_seed(rng, b ^ ((uint64_t)position * 0xBF58476D1CE4E5B9ull) ^ 0x94D049BB133111EBull);
}

/* Inverted dropout: keep each input with probability 1 - p and scale it by 1 / (1 - p). Each
 * element takes 16 bits of a xoshiro256** output (four per output, low bits first) of its row's
 * stream and is kept when they are below round((1 - p) * 65536): p is honoured to 1/65536, and
 * drawing the masks costs a quarter of one RNG call per input, which matters at D = 2048. */
void ftl_head_dropout_rows(float p, int64_t dim, const float *x, size_t n, const ftl_row_draws *draws, float *out) {
    size_t D = (size_t)dim;
    const uint32_t threshold = (uint32_t)lround((1.0 - (double)p) * 65536.0);
    const float scale = (float)(1.0 / (1.0 - (double)p));
    /* A table instead of `keep ? x * scale : 0`: a coin-flip branch mispredicts half the time. */
    const float factor[2] = {0.0f, scale};
    for (size_t row = 0; row < n; row++) {
        ftl_rng rng;
        row_stream(draws, row, &rng);
        const float *xr = x + row * D;
        float *o = out + row * D;
        size_t i = 0;
        for (; i + 4 <= D; i += 4) {
            uint64_t r = ftl_rng_next(&rng);
            for (int k = 0; k < 4; k++) o[i + (size_t)k] = xr[i + (size_t)k] * factor[((r >> (16 * k)) & 0xFFFF) < threshold];
        }
        if (i < D) {
            uint64_t r = ftl_rng_next(&rng);
            for (int k = 0; i < D; i++, k++) o[i] = xr[i] * factor[((r >> (16 * k)) & 0xFFFF) < threshold];
        }
    }
}

static ftl_status check_train_args(const ftl_head *head, float grad_scale) {
    if (!(head->dropout >= 0.0f && head->dropout < 1.0f))
        return ftl_fail(FTL_E_INVALID_ARG, "dropout %g is outside [0, 1)", (double)head->dropout);
    if (!(head->label_smoothing >= 0.0f && head->label_smoothing < 1.0f))
        return ftl_fail(FTL_E_INVALID_ARG, "label smoothing %g is outside [0, 1)", (double)head->label_smoothing);
    if (!(grad_scale > 0.0f) || !isfinite(grad_scale))
        return ftl_fail(FTL_E_INVALID_ARG, "gradient scale %g must be positive", (double)grad_scale);
    return FTL_OK;
}

/* The step on rows that went through the dropout already (or need none). */
static void train_rows(ftl_head *head, const float *xin, const int32_t *labels, size_t n, float grad_scale,
                       ftl_metric_counts *counts) {
    size_t C = (size_t)head->classes, D = (size_t)head->dim;
    forward(head, xin, n, &head->ws->train_site);
    softmax_cross_entropy(head->ws->logits, n, C, labels, grad_scale, head->label_smoothing, head->ws->dlogits, NULL, counts);
    /* dW = x^T dZ: A[d][b] = x[b][d], so rows of A have stride 1 and columns stride D. */
    ftl_gemm_args g = {.M = D, .N = C, .K = n, .A = xin, .a_row_stride = 1, .a_col_stride = D,
                       .B = head->ws->dlogits, .ldb = C, .C = head->grad_kernel, .ldc = C, .accumulate = false,
                       .site = &head->ws->backward_site};
    ftl_gemm(&g);
    const float *dz = head->ws->dlogits;
    memcpy(head->grad_bias, dz, C * sizeof(float));
    for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < C; j++) head->grad_bias[j] += dz[i * C + j];
}

ftl_status ftl_head_train_batch(ftl_head *head, const float *x, const int32_t *labels, size_t n,
                                const ftl_row_draws *draws, float grad_scale, ftl_metric_counts *counts) {
    FTL_TRY(check_train_args(head, grad_scale));
    if (n == 0) { /* none of the global batch's rows are here: this rank adds nothing */
        memset(head->grads, 0, head->param_count * sizeof(float));
        return FTL_OK;
    }
    FTL_TRY(ftl_head_check_labels(head->classes, labels, n));
    bool dropout = head->dropout > 0.0f;
    if (dropout && !draws) return ftl_fail(FTL_E_INVALID_ARG, "dropout needs the rows' random draws");
    ensure_capacity(head, n, dropout);
    if (dropout) ftl_head_dropout_rows(head->dropout, head->dim, x, n, draws, head->ws->x_dropped);
    train_rows(head, dropout ? head->ws->x_dropped : x, labels, n, grad_scale, counts);
    return FTL_OK;
}

ftl_status ftl_head_train_batch_dropped(ftl_head *head, const float *x_dropped, const int32_t *labels, size_t n,
                                        float grad_scale, ftl_metric_counts *counts) {
    FTL_TRY(check_train_args(head, grad_scale));
    if (n == 0) {
        memset(head->grads, 0, head->param_count * sizeof(float));
        return FTL_OK;
    }
    FTL_TRY(ftl_head_check_labels(head->classes, labels, n));
    ensure_capacity(head, n, false);
    train_rows(head, x_dropped, labels, n, grad_scale, counts);
    return FTL_OK;
}

ftl_status ftl_head_input_grad(ftl_head *head, size_t n, const ftl_row_draws *draws, float *dx) {
    size_t C = (size_t)head->classes, D = (size_t)head->dim;
    if (n == 0) return FTL_OK;
    bool dropout = head->dropout > 0.0f;
    if (dropout && !draws) return ftl_fail(FTL_E_INVALID_ARG, "dropout needs the rows' random draws");
    const float *dz = head->ws->dlogits, *W = head->kernel;
    const uint32_t threshold = (uint32_t)lround((1.0 - (double)head->dropout) * 65536.0);
    const float scale = dropout ? (float)(1.0 / (1.0 - (double)head->dropout)) : 1.0f;
    /* dX = dZ W^T, computed as dX^T [D x n] = W [D x C] dZ^T [C x n] so the GEMM streams W's rows
     * (W^T would need a copy of the whole kernel; the two small transposes cost n x (C + D)) */
    struct ftl_head_workspace *ws = head->ws;
    if (n > ws->t_capacity) {
        free(ws->dz_t);
        free(ws->dx_t);
        ws->dz_t = ftl_train_alloc_floats(n * C);
        ws->dx_t = ftl_train_alloc_floats(n * D);
        ws->t_capacity = n;
    }
    for (size_t row = 0; row < n; row++)
        for (size_t c = 0; c < C; c++) ws->dz_t[c * n + row] = dz[row * C + c];
    ftl_gemm_args g = {.M = D, .N = n, .K = C, .A = W, .a_row_stride = C, .a_col_stride = 1, .B = ws->dz_t, .ldb = n,
                       .C = ws->dx_t, .ldc = n, .accumulate = false, .site = &ws->input_grad_site};
    ftl_gemm(&g);
    for (size_t row = 0; row < n; row++) {
        float *o = dx + row * D;
        for (size_t d = 0; d < D; d++) o[d] = ws->dx_t[d * n + row];
        if (!dropout) continue;
        /* through the mask: the same draws as apply_dropout, in the same order */
        ftl_rng rng;
        row_stream(draws, row, &rng);
        for (size_t i = 0; i < D; i += 4) {
            uint64_t r = ftl_rng_next(&rng);
            for (size_t k = 0; k < 4 && i + k < D; k++) o[i + k] *= ((r >> (16 * k)) & 0xFFFF) < threshold ? scale : 0.0f;
        }
    }
    return FTL_OK;
}

ftl_status ftl_head_evaluate_batch(ftl_head *head, const float *x, const int32_t *labels, size_t n,
                                   ftl_metric_counts *counts) {
    if (n == 0) return FTL_OK;
    FTL_TRY(ftl_head_check_labels(head->classes, labels, n));
    ensure_capacity(head, n, false);
    forward(head, x, n, &head->ws->eval_site);
    softmax_cross_entropy(head->ws->logits, n, (size_t)head->classes, labels, 0.0f, 0.0f, NULL, NULL, counts);
    return FTL_OK;
}

ftl_status ftl_head_predict(ftl_head *head, const float *x, size_t n, float *probs_out, float *logits_out) {
    if (n == 0) return FTL_OK;
    ensure_capacity(head, n, false);
    forward(head, x, n, &head->ws->eval_site);
    size_t C = (size_t)head->classes;
    if (logits_out) memcpy(logits_out, head->ws->logits, n * C * sizeof(float));
    if (probs_out) softmax_cross_entropy(head->ws->logits, n, C, NULL, 0.0f, 0.0f, NULL, probs_out, NULL);
    return FTL_OK;
}

/* Both orientations' logits, then their TTA logits in the workspace's logits (n rows). */
static void forward_tta(ftl_head *head, const float *x, const float *x_mirrored, size_t n) {
    ensure_capacity(head, n, false);
    size_t C = (size_t)head->classes;
    forward(head, x_mirrored, n, &head->ws->eval_site);
    memcpy(head->ws->dlogits, head->ws->logits, n * C * sizeof(float)); /* dlogits is free outside training */
    forward(head, x, n, &head->ws->eval_site);
    ftl_tta_mean_logits(head->ws->logits, head->ws->dlogits, n, C, head->ws->logits);
}

ftl_status ftl_head_evaluate_batch_tta(ftl_head *head, const float *x, const float *x_mirrored, const int32_t *labels,
                                       size_t n, ftl_metric_counts *counts) {
    if (n == 0) return FTL_OK;
    FTL_TRY(ftl_head_check_labels(head->classes, labels, n));
    forward_tta(head, x, x_mirrored, n);
    softmax_cross_entropy(head->ws->logits, n, (size_t)head->classes, labels, 0.0f, 0.0f, NULL, NULL, counts);
    return FTL_OK;
}

ftl_status ftl_head_predict_tta(ftl_head *head, const float *x, const float *x_mirrored, size_t n, float *probs_out,
                                float *logits_out) {
    if (n == 0) return FTL_OK;
    forward_tta(head, x, x_mirrored, n);
    size_t C = (size_t)head->classes;
    if (logits_out) memcpy(logits_out, head->ws->logits, n * C * sizeof(float));
    if (probs_out) softmax_cross_entropy(head->ws->logits, n, C, NULL, 0.0f, 0.0f, NULL, probs_out, NULL);
    return FTL_OK;
}

ftl_status ftl_head_evaluate(ftl_head *head, ftl_batch_source *source, size_t batch_size, ftl_metric_counts *out) {
    memset(out, 0, sizeof *out);
    if (batch_size == 0) batch_size = 1024;
    if (source->begin_pass) FTL_TRY(source->begin_pass(source->ctx));
    for (;;) {
        ftl_feature_batch b = {0};
        FTL_TRY(source->next_batch(source->ctx, batch_size, false, &b));
        if (b.count == 0) return FTL_OK;
        FTL_TRY(ftl_head_evaluate_batch(head, b.features, b.labels, b.count, out));
    }
}

/* ---------------------------------------------------------------- heads stepped together */

struct ftl_head_stack {
    size_t weight_capacity, row_capacity; /* floats of w / dw, and of logits / dlogits */
    float *w, *dw, *logits, *dlogits;     /* [D x K*C], [n x K*C] */
    ftl_pool_site forward_site, backward_site;
};

ftl_head_stack *ftl_head_stack_new(void) { return ftl_xcalloc(1, sizeof(ftl_head_stack)); }

void ftl_head_stack_free(ftl_head_stack *s) {
    if (!s) return;
    free(s->w), free(s->dw), free(s->logits), free(s->dlogits);
    free(s);
}

static void grow(float **p, size_t *capacity, size_t want) {
    if (want <= *capacity) return;
    free(*p);
    *p = ftl_train_alloc_floats(want);
    *capacity = want;
}

ftl_status ftl_head_stack_train(ftl_head_stack *s, ftl_head *const *heads, int k, const float *x, const int32_t *labels,
                                size_t n, float grad_scale, ftl_metric_counts *const *counts) {
    if (k < 1 || n == 0) return ftl_fail(FTL_E_INVALID_ARG, "a stacked step needs heads and rows");
    size_t C = (size_t)heads[0]->classes, D = (size_t)heads[0]->dim, KC = (size_t)k * C;
    for (int h = 0; h < k; h++) {
        if ((size_t)heads[h]->classes != C || (size_t)heads[h]->dim != D)
            return ftl_fail(FTL_E_INVALID_ARG, "stacked heads must share their shape");
        FTL_TRY(check_train_args(heads[h], grad_scale));
    }
    FTL_TRY(ftl_head_check_labels((int64_t)C, labels, n));
    size_t w_cap = s->weight_capacity, r_cap = s->row_capacity;
    grow(&s->w, &w_cap, D * KC);
    grow(&s->dw, &s->weight_capacity, D * KC);
    grow(&s->logits, &r_cap, n * KC);
    grow(&s->dlogits, &s->row_capacity, n * KC);
    /* the heads side by side: row d of the stacked kernel is row d of every head's */
    for (size_t d = 0; d < D; d++)
        for (int h = 0; h < k; h++) memcpy(s->w + d * KC + (size_t)h * C, heads[h]->kernel + d * C, C * sizeof(float));
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < k; h++) memcpy(s->logits + i * KC + (size_t)h * C, heads[h]->bias, C * sizeof(float));
    /* One GEMM each way; every element is the same sequence of multiply-adds as in a head's own
     * GEMM (train/gemm.h), so each head's logits and gradient are bit for bit its own step's. */
    ftl_gemm_args f = {.M = n, .N = KC, .K = D, .A = x, .a_row_stride = D, .a_col_stride = 1, .B = s->w, .ldb = KC,
                       .C = s->logits, .ldc = KC, .accumulate = true, .site = &s->forward_site};
    ftl_gemm(&f);
    for (int h = 0; h < k; h++)
        softmax_cross_entropy_strided(s->logits + (size_t)h * C, n, C, KC, labels, grad_scale, heads[h]->label_smoothing,
                                      s->dlogits + (size_t)h * C, NULL, counts[h]);
    ftl_gemm_args g = {.M = D, .N = KC, .K = n, .A = x, .a_row_stride = 1, .a_col_stride = D, .B = s->dlogits, .ldb = KC,
                       .C = s->dw, .ldc = KC, .accumulate = false, .site = &s->backward_site};
    ftl_gemm(&g);
    for (int h = 0; h < k; h++) {
        ftl_head *head = heads[h];
        for (size_t d = 0; d < D; d++) memcpy(head->grad_kernel + d * C, s->dw + d * KC + (size_t)h * C, C * sizeof(float));
        const float *dz = s->dlogits + (size_t)h * C;
        memcpy(head->grad_bias, dz, C * sizeof(float));
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < C; j++) head->grad_bias[j] += dz[i * KC + j];
    }
    return FTL_OK;
}
