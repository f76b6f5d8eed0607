/* The sweep's search space (include/ftl/sweep.h): parsing and checking --grid / --range specs, and
 * their expansion into trials. Everything is checked here, before any work starts. */
#include "ftl/sweep.h"
#include "ftl/loader.h"
#include "ftl/train.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[FTL_SWEEP_PARAM_COUNT] = {
    "lr", "dropout", "batch", "optimizer", "momentum", "warmup", "weight-decay", "label-smoothing", "lr-schedule", "tta"};

const char *ftl_sweep_param_name(ftl_sweep_param param) {
    return param >= 0 && param < FTL_SWEEP_PARAM_COUNT ? names[param] : "?";
}

void ftl_sweep_setting_text(const ftl_sweep_trial *t, ftl_sweep_param p, char *buf, size_t size) {
    if (p < 0 || p >= FTL_SWEEP_PARAM_COUNT || !t->set[p]) snprintf(buf, size, "%s", "");
    else if (p == FTL_SWEEP_LR_SCHEDULE) snprintf(buf, size, "%s", t->lr_schedule);
    else if (p == FTL_SWEEP_OPTIMIZER) snprintf(buf, size, "%s", ftl_optimizer_kind_name((ftl_optimizer_kind)t->value[p]));
    else if (p == FTL_SWEEP_TTA) snprintf(buf, size, "%s", t->value[p] != 0 ? "flip" : "none");
    else snprintf(buf, size, "%.9g", t->value[p]);
}

void ftl_sweep_space_init(ftl_sweep_space *space) { memset(space, 0, sizeof *space); }

/* The parameter named by spec's "NAME=" prefix; *rest after the '='. */
static ftl_status param_of(const char *spec, const char *flag, ftl_sweep_param *param, const char **rest) {
    const char *eq = strchr(spec, '=');
    if (!eq) return ftl_fail(FTL_E_INVALID_ARG, "%s %s: expected NAME=VALUES (e.g. lr=1e-3,4e-3)", flag, spec);
    size_t n = (size_t)(eq - spec);
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++)
        if (strlen(names[p]) == n && strncmp(spec, names[p], n) == 0) {
            *param = (ftl_sweep_param)p;
            *rest = eq + 1;
            return FTL_OK;
        }
    return ftl_fail(FTL_E_INVALID_ARG,
                    "%s %s: unknown hyperparameter \"%.*s\" (expected lr, dropout, batch, optimizer, momentum, warmup, "
                    "weight-decay, label-smoothing, lr-schedule or tta)",
                    flag, spec, (int)(n < 64 ? n : 64), spec);
}

/* Whether v is in the parameter's range; the range's wording to *what. */
static bool in_range(ftl_sweep_param p, double v, const char **what) {
    switch (p) {
    case FTL_SWEEP_LR: *what = "> 0"; return v > 0 && isfinite(v);
    case FTL_SWEEP_DROPOUT:
    case FTL_SWEEP_LABEL_SMOOTHING: *what = "in [0, 1)"; return v >= 0 && v < 1;
    case FTL_SWEEP_BATCH: *what = "an integer in 1..65536"; return v >= 1 && v <= FTL_LOADER_MAX_BATCH && v == floor(v);
    default: *what = ">= 0 and finite"; return v >= 0 && isfinite(v);
    }
}

static ftl_status parse_value(ftl_sweep_param p, const char *text, size_t len, const char *spec, const char *flag,
                              double *out) {
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return ftl_fail(FTL_E_INVALID_ARG, "%s %s: %s value for %s", flag, spec, len == 0 ? "an empty" : "a too long",
                        names[p]);
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (p == FTL_SWEEP_OPTIMIZER) {
        ftl_optimizer_kind kind;
        ftl_status st = ftl_optimizer_kind_parse(buf, &kind);
        if (st != FTL_OK) return ftl_fail_context(st, "%s %s", flag, spec);
        *out = (double)kind;
        return FTL_OK;
    }
    if (p == FTL_SWEEP_TTA) {
        ftl_tta tta;
        ftl_status st = ftl_tta_parse(buf, false, &tta);
        if (st != FTL_OK) return ftl_fail_context(st, "%s %s", flag, spec);
        *out = tta == FTL_TTA_FLIP ? 1 : 0;
        return FTL_OK;
    }
    if (p == FTL_SWEEP_LR_SCHEDULE) { /* checked as ftl train checks it; the caller keeps the text */
        ftl_lr_decay decay = {0};
        ftl_status st = ftl_lr_decay_parse(buf, "lr-schedule", &decay);
        if (st != FTL_OK) return ftl_fail_context(st, "%s %s", flag, spec);
        *out = 0;
        return FTL_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || *end || errno)
        return ftl_fail(FTL_E_INVALID_ARG, "%s %s: \"%s\" is not a number (%s)", flag, spec, buf, names[p]);
    const char *what;
    if (!in_range(p, v, &what))
        return ftl_fail(FTL_E_INVALID_ARG, "%s %s: %s %s is out of range (expected %s)", flag, spec, names[p], buf, what);
    *out = v;
    return FTL_OK;
}

/* The parameter a new --grid / --range spec names, not given before. */
static ftl_status new_param(const ftl_sweep_space *s, const char *spec, const char *flag, ftl_sweep_param *p,
                            const char **rest) {
    FTL_TRY(param_of(spec, flag, p, rest));
    if (s->grid_count[*p] || s->ranged[*p])
        return ftl_fail(FTL_E_INVALID_ARG, "%s %s: %s is already given (one --grid or --range per hyperparameter)", flag,
                        spec, names[*p]);
    return FTL_OK;
}

ftl_status ftl_sweep_space_add_grid(ftl_sweep_space *s, const char *spec) {
    ftl_sweep_param p;
    const char *rest;
    FTL_TRY(new_param(s, spec, "--grid", &p, &rest));
    int n = 0;
    for (const char *at = rest;;) {
        const char *comma = strchr(at, ',');
        size_t len = comma ? (size_t)(comma - at) : strlen(at);
        if (n == FTL_SWEEP_MAX_VALUES)
            return ftl_fail(FTL_E_INVALID_ARG, "--grid %s: more than %d values", spec, FTL_SWEEP_MAX_VALUES);
        FTL_TRY(parse_value(p, at, len, spec, "--grid", &s->grid[p][n]));
        if (p == FTL_SWEEP_LR_SCHEDULE) { /* a spec's text stands for it; the value is its place in the grid */
            if (len >= FTL_SWEEP_TEXT_MAX)
                return ftl_fail(FTL_E_INVALID_ARG, "--grid %s: the lr-schedule %.*s is longer than %d characters", spec,
                                (int)len, at, FTL_SWEEP_TEXT_MAX - 1);
            memcpy(s->lr_schedule[n], at, len);
            s->lr_schedule[n][len] = '\0';
            s->grid[p][n] = n;
        }
        for (int k = 0; k < n; k++)
            if (p == FTL_SWEEP_LR_SCHEDULE ? strcmp(s->lr_schedule[k], s->lr_schedule[n]) == 0 : s->grid[p][k] == s->grid[p][n])
                return ftl_fail(FTL_E_INVALID_ARG, "--grid %s: the value %.*s is given twice", spec, (int)len, at);
        n++;
        if (!comma) break;
        at = comma + 1;
    }
    s->grid_count[p] = n;
    return FTL_OK;
}

ftl_status ftl_sweep_space_add_range(ftl_sweep_space *s, const char *spec) {
    ftl_sweep_param p;
    const char *rest;
    FTL_TRY(new_param(s, spec, "--range", &p, &rest));
    if (p == FTL_SWEEP_BATCH || p == FTL_SWEEP_OPTIMIZER || p == FTL_SWEEP_LR_SCHEDULE || p == FTL_SWEEP_TTA)
        return ftl_fail(FTL_E_INVALID_ARG, "--range %s: %s takes a --grid of values", spec, names[p]);
    const char *c1 = strchr(rest, ':');
    if (!c1) return ftl_fail(FTL_E_INVALID_ARG, "--range %s: expected %s=LO:HI or %s=LO:HI:log", spec, names[p], names[p]);
    const char *c2 = strchr(c1 + 1, ':');
    bool log_scale = false;
    if (c2) {
        if (strcmp(c2 + 1, "log") != 0 && strcmp(c2 + 1, "linear") != 0)
            return ftl_fail(FTL_E_INVALID_ARG, "--range %s: the scale is \"log\" or \"linear\", not \"%s\"", spec, c2 + 1);
        log_scale = strcmp(c2 + 1, "log") == 0;
    }
    double lo, hi;
    FTL_TRY(parse_value(p, rest, (size_t)(c1 - rest), spec, "--range", &lo));
    FTL_TRY(parse_value(p, c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1), spec, "--range", &hi));
    if (!(lo < hi)) return ftl_fail(FTL_E_INVALID_ARG, "--range %s: an empty range (LO must be below HI)", spec);
    if (log_scale && !(lo > 0)) return ftl_fail(FTL_E_INVALID_ARG, "--range %s: a log range needs LO > 0", spec);
    s->ranged[p] = true;
    s->lo[p] = lo;
    s->hi[p] = hi;
    s->log_scale[p] = log_scale;
    return FTL_OK;
}

ftl_status ftl_sweep_space_trials(const ftl_sweep_space *s, int random, uint64_t seed, int max_trials,
                                  ftl_sweep_trial **trials, int *count) {
    *trials = NULL;
    *count = 0;
    if (random < 0) return ftl_fail(FTL_E_INVALID_ARG, "a random search of %d trials", random);
    double total = 1;
    int ranged = 0;
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
        if (s->grid_count[p]) total *= s->grid_count[p];
        ranged += s->ranged[p];
    }
    if (random == 0 && ranged)
        return ftl_fail(FTL_E_INVALID_ARG, "--range draws values for a random search: give --random N too");
    if (random > 0) total = random;
    if (total > max_trials)
        return ftl_fail(FTL_E_INVALID_ARG, "the search space makes %.0f trials, more than --max-trials %d", total, max_trials);
    int n = (int)total;
    ftl_sweep_trial *t = ftl_xcalloc((size_t)n, sizeof *t);
    ftl_rng rng;
    ftl_rng_seed(&rng, seed ^ 0x5357454550ull); /* "SWEEP": its own stream, apart from the weights' */
    for (int i = 0; i < n; i++) {
        int rest = i; /* grid: mixed-radix digits of i, the last parameter fastest */
        for (int p = FTL_SWEEP_PARAM_COUNT - 1; p >= 0; p--) {
            if (s->grid_count[p]) {
                int k = random > 0 ? (int)ftl_rng_below(&rng, (uint64_t)s->grid_count[p]) : rest % s->grid_count[p];
                rest /= s->grid_count[p];
                t[i].set[p] = true;
                t[i].value[p] = s->grid[p][k];
                if (p == FTL_SWEEP_LR_SCHEDULE) snprintf(t[i].lr_schedule, sizeof t[i].lr_schedule, "%s", s->lr_schedule[k]);
            } else if (s->ranged[p]) {
                double u = (double)(ftl_rng_next(&rng) >> 11) / 9007199254740992.0; /* [0, 1) */
                t[i].set[p] = true;
                t[i].value[p] = s->log_scale[p] ? exp(log(s->lo[p]) + u * (log(s->hi[p]) - log(s->lo[p])))
                                                : s->lo[p] + u * (s->hi[p] - s->lo[p]);
            }
        }
    }
    *trials = t;
    *count = n;
    return FTL_OK;
}
