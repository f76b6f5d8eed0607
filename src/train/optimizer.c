/* Optimizers over the parameter block: nadam (Keras Nadam = torch >= 2.0 NAdam), adam and sgd
 * (torch.optim semantics); the learning rate each step gets is lr_schedule.c's.
 *
 * The per-element updates are written once (UPDATE_BODY) and compiled for AVX-512, AVX2 and
 * plain C. Divisions and square roots bound their speed, so each element takes one sqrt and one
 * division (torch divides three times; the results differ in the last bit at most). Each is a fixed sequence of IEEE add/mul/div/sqrt in float with no fused
 * multiply-adds (ISO C mode disables contraction), so all three paths give identical bits and the
 * split over threads cannot change a result. Step scalars are computed in double, as torch does
 * in Python, and rounded to float once. */
#include "ftl/train.h"
#include "train/denormal_flush.h"
#include "train/pool.h"
#include "train/train_internal.h"
#include "util/error.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define OPT_X86 1
#endif

ftl_optimizer_config ftl_optimizer_config_default(ftl_optimizer_kind kind) {
    ftl_optimizer_config c = {.kind = kind, .lr = 0.001, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-7,
                              .momentum_decay = 0.004, .momentum = 0.0, .nesterov = false, .weight_decay = 0.0};
    if (kind == FTL_OPTIMIZER_SGD) c.lr = 0.01;
    return c;
}

const char *ftl_optimizer_kind_name(ftl_optimizer_kind kind) {
    switch (kind) {
    case FTL_OPTIMIZER_NADAM: return "nadam";
    case FTL_OPTIMIZER_ADAM: return "adam";
    case FTL_OPTIMIZER_SGD: return "sgd";
    }
    return "?";
}

ftl_status ftl_optimizer_kind_parse(const char *name, ftl_optimizer_kind *out) {
    for (int k = FTL_OPTIMIZER_NADAM; k <= FTL_OPTIMIZER_SGD; k++)
        if (strcmp(name, ftl_optimizer_kind_name((ftl_optimizer_kind)k)) == 0) {
            *out = (ftl_optimizer_kind)k;
            return FTL_OK;
        }
    return ftl_fail(FTL_E_INVALID_ARG, "unknown optimizer \"%s\" (expected nadam, adam or sgd)", name);
}

int ftl_optimizer_slot_count(const ftl_optimizer_config *c) {
    if (c->kind == FTL_OPTIMIZER_SGD) return c->momentum > 0 ? 1 : 0;
    return 2;
}

static ftl_status check_config(const ftl_optimizer_config *c) {
    if (!(c->lr >= 0) || !isfinite(c->lr)) return ftl_fail(FTL_E_INVALID_ARG, "learning rate %g must be >= 0", c->lr);
    if (!(c->weight_decay >= 0)) return ftl_fail(FTL_E_INVALID_ARG, "weight decay %g must be >= 0", c->weight_decay);
    if (c->kind == FTL_OPTIMIZER_SGD) {
        if (!(c->momentum >= 0)) return ftl_fail(FTL_E_INVALID_ARG, "momentum %g must be >= 0", c->momentum);
        if (c->nesterov && c->momentum <= 0)
            return ftl_fail(FTL_E_INVALID_ARG, "nesterov momentum needs --momentum > 0");
        return FTL_OK;
    }
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        return ftl_fail(FTL_E_INVALID_ARG, "betas (%g, %g) must be in [0, 1)", c->beta1, c->beta2);
    if (!(c->eps >= 0)) return ftl_fail(FTL_E_INVALID_ARG, "epsilon %g must be >= 0", c->eps);
    if (!(c->momentum_decay >= 0)) return ftl_fail(FTL_E_INVALID_ARG, "momentum decay %g must be >= 0", c->momentum_decay);
    return FTL_OK;
}

ftl_status ftl_optimizer_init(ftl_optimizer *opt, const ftl_optimizer_config *config, size_t param_count) {
    memset(opt, 0, sizeof *opt);
    FTL_TRY(check_config(config));
    opt->config = *config;
    opt->param_count = param_count;
    opt->mu_product = 1.0;
    opt->pool_site = calloc(1, sizeof *opt->pool_site);
    if (!opt->pool_site) return ftl_fail(FTL_E_NOMEM, "out of memory");
    opt->slot_count = ftl_optimizer_slot_count(config);
    if (opt->slot_count) {
        opt->state = ftl_train_alloc_floats((size_t)opt->slot_count * param_count);
        opt->m = opt->state;
        if (opt->slot_count > 1) opt->v = opt->state + param_count;
    }
    return FTL_OK;
}

void ftl_optimizer_free(ftl_optimizer *opt) {
    if (!opt) return;
    free(opt->state);
    free(opt->pool_site);
    memset(opt, 0, sizeof *opt);
}

/* ---------------------------------------------------------------- element-wise updates */

typedef struct update_args {
    ftl_optimizer_update u;
    size_t total;         /* elements in the block */
    float *p;
    const float *g;
    float *m, *v;
} update_args;

/* V: vector type, W: lanes, L/S: load/store, B: broadcast, SQ: sqrt, FL(x, t): x with the lanes
 * whose magnitude is below t set to 0 (NaN kept), the flushes of train/denormal_flush.h. */
#define UPDATE_BODY(V, W, L, S, B, SQ, FL)                                                                      \
    size_t i = begin;                                                                                           \
    const V gflush = B(FTL_GRAD_FLUSH), mflush = B(FTL_MOMENT_FLUSH);                                           \
    const V wd = B(a->u.wd), b1 = B(a->u.b1), omb1 = B(a->u.omb1), b2 = B(a->u.b2), omb2 = B(a->u.omb2);        \
    const V ibcs = B(a->u.inv_bc2_sqrt), eps = B(a->u.eps), cg = B(a->u.c_grad), cm = B(a->u.c_m), one = B(1.0f); \
    const V mom = B(a->u.momentum), nlr = B(a->u.neg_lr);                                                       \
    switch (a->u.kind) {                                                                                        \
    case FTL_OPTIMIZER_NADAM:                                                                                   \
        for (; i + W <= end; i += W) {                                                                          \
            V g = FL(L(a->g + i), gflush), p = L(a->p + i);                                                     \
            if (a->u.wd != 0.0f) g = FL(g + wd * p, gflush);                                                    \
            V m = FL(L(a->m + i) * b1 + g * omb1, mflush);                                                      \
            V v = FL(L(a->v + i) * b2 + omb2 * (g * g), mflush);                                                \
            S(a->m + i, m);                                                                                     \
            S(a->v + i, v);                                                                                     \
            V r = one / (SQ(v) * ibcs + eps);                                                                   \
            p = p + cg * (g * r);                                                                               \
            p = p + cm * (m * r);                                                                               \
            S(a->p + i, p);                                                                                     \
        }                                                                                                       \
        break;                                                                                                  \
    case FTL_OPTIMIZER_ADAM:                                                                                    \
        for (; i + W <= end; i += W) {                                                                          \
            V g = FL(L(a->g + i), gflush), p = L(a->p + i);                                                     \
            if (a->u.wd != 0.0f) g = FL(g + wd * p, gflush);                                                    \
            V m = FL(L(a->m + i) * b1 + g * omb1, mflush);                                                      \
            V v = FL(L(a->v + i) * b2 + omb2 * (g * g), mflush);                                                \
            S(a->m + i, m);                                                                                     \
            S(a->v + i, v);                                                                                     \
            S(a->p + i, p + cm * (m / (SQ(v) * ibcs + eps)));                                                   \
        }                                                                                                       \
        break;                                                                                                  \
    case FTL_OPTIMIZER_SGD:                                                                                     \
        for (; i + W <= end; i += W) {                                                                          \
            V g = FL(L(a->g + i), gflush), p = L(a->p + i);                                                     \
            if (a->u.wd != 0.0f) g = FL(g + wd * p, gflush);                                                    \
            if (a->u.has_momentum) {                                                                            \
                V buf = FL(L(a->m + i) * mom + g, mflush);                                                      \
                S(a->m + i, buf);                                                                               \
                if (a->u.nesterov) g = g + mom * buf;                                                           \
                else g = buf;                                                                                   \
            }                                                                                                   \
            S(a->p + i, p + nlr * g);                                                                           \
        }                                                                                                       \
        break;                                                                                                  \
    }                                                                                                           \
    return i;

#define SCALAR_LOAD(p) (*(p))
#define SCALAR_STORE(p, x) (*(p) = (x))
#define SCALAR_SET1(x) (x)
static inline float flush_scalar(float x, float t) { return fabsf(x) < t ? 0.0f : x; }
static size_t update_scalar(const update_args *a, size_t begin, size_t end) {
    UPDATE_BODY(float, 1, SCALAR_LOAD, SCALAR_STORE, SCALAR_SET1, sqrtf, flush_scalar)
}

#ifdef OPT_X86
/* |x| not below t (unordered: NaN) keeps x */
__attribute__((target("avx2"))) static inline __m256 flush_avx2(__m256 x, __m256 t) {
    __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    return _mm256_and_ps(x, _mm256_cmp_ps(magnitude, t, _CMP_NLT_UQ));
}
__attribute__((target("avx2"))) static size_t update_avx2(const update_args *a, size_t begin, size_t end) {
    UPDATE_BODY(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_sqrt_ps, flush_avx2)
}
__attribute__((target("avx512f"))) static inline __m512 flush_avx512(__m512 x, __m512 t) {
    return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(_mm512_abs_ps(x), t, _CMP_LT_OQ), _mm512_setzero_ps());
}
__attribute__((target("avx512f"))) static size_t update_avx512(const update_args *a, size_t begin, size_t end) {
    UPDATE_BODY(__m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_sqrt_ps, flush_avx512)
}
#endif

static void update_range(const update_args *a, size_t begin, size_t end) {
    size_t i = begin;
#ifdef OPT_X86
    static atomic_int cached = -1; /* 2: avx512, 1: avx2, 0: plain */
    int isa = atomic_load_explicit(&cached, memory_order_relaxed);
    if (isa < 0) {
        isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&cached, isa, memory_order_relaxed);
    }
    if (isa == 2) i = update_avx512(a, begin, end);
    else if (isa == 1) i = update_avx2(a, begin, end);
#endif
    update_scalar(a, i, end);
}

static void update_part(void *ctx, int part, int parts) {
    const update_args *a = ctx;
    size_t total = a->total;
    size_t units = (total + 15) / 16;
    size_t b = units * (size_t)part / (size_t)parts * 16, e = units * (size_t)(part + 1) / (size_t)parts * 16;
    if (e > total) e = total;
    if (b < e) update_range(a, b, e);
}

void ftl_optimizer_next_update(ftl_optimizer *opt, double lr, ftl_optimizer_update *a) {
    const ftl_optimizer_config *c = &opt->config;
    int64_t t = opt->step + 1;
    memset(a, 0, sizeof *a);
    a->kind = c->kind;
    a->wd = (float)c->weight_decay;
    a->b1 = (float)c->beta1;
    a->omb1 = (float)(1.0 - c->beta1);
    a->b2 = (float)c->beta2;
    a->omb2 = (float)(1.0 - c->beta2);
    a->eps = (float)c->eps;
    double bc2 = 1.0 - pow(c->beta2, (double)t);
    a->inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    if (c->kind == FTL_OPTIMIZER_NADAM) {
        /* Keras Nadam's momentum schedule; mu_product_next = prod(mu_1..mu_t) * mu_{t+1}
         * (torch 1.13's single-tensor NAdam multiplies by mu_t twice: pytorch/pytorch#92699). */
        double mu = c->beta1 * (1.0 - 0.5 * pow(0.96, (double)t * c->momentum_decay));
        double mu_next = c->beta1 * (1.0 - 0.5 * pow(0.96, (double)(t + 1) * c->momentum_decay));
        opt->mu_product *= mu;
        double mu_product_next = opt->mu_product * mu_next;
        a->c_grad = (float)(-lr * (1.0 - mu) / (1.0 - opt->mu_product));
        a->c_m = (float)(-lr * mu_next / (1.0 - mu_product_next));
    } else if (c->kind == FTL_OPTIMIZER_ADAM) {
        a->c_m = (float)(-lr / (1.0 - pow(c->beta1, (double)t)));
    } else {
        a->momentum = (float)c->momentum;
        a->has_momentum = c->momentum > 0;
        a->nesterov = c->nesterov;
        a->neg_lr = (float)-lr;
    }
    opt->step = t;
}

void ftl_optimizer_apply(ftl_optimizer *opt, const ftl_optimizer_update *update, float *params, const float *grads) {
    update_args task = {.u = *update, .total = opt->param_count, .p = params, .g = grads, .m = opt->m, .v = opt->v};
    /* ~16k elements per part: below that, handing work to another thread costs more than it saves. */
    int parts = ftl_pool_parts_for((double)opt->param_count, 16384.0);
    ftl_pool_run_adaptive(opt->pool_site, parts, update_part, &task, (double)opt->param_count);
}

void ftl_optimizer_step(ftl_optimizer *opt, float *params, const float *grads, double lr) {
    ftl_optimizer_update u;
    ftl_optimizer_next_update(opt, lr, &u);
    ftl_optimizer_apply(opt, &u, params, grads);
}
