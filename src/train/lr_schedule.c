/* The learning rate of every step: scaling for the batch size, the per-epoch decay (constant,
 * cosine, step, plateau: the schedules of timm, Keras and torch.optim.lr_scheduler, stepped once
 * per epoch as timm does by default and PyTorch users usually do), then the warmup ramp. */
#include "ftl/train.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ftl_status ftl_lr_scaling_parse(const char *name, ftl_lr_scaling *out) {
    if (strcmp(name, "none") == 0) *out = FTL_LR_SCALE_NONE;
    else if (strcmp(name, "linear") == 0) *out = FTL_LR_SCALE_LINEAR;
    else if (strcmp(name, "sqrt") == 0) *out = FTL_LR_SCALE_SQRT;
    else return ftl_fail(FTL_E_INVALID_ARG, "unknown --scale-lr \"%s\" (expected linear, sqrt or none)", name);
    return FTL_OK;
}

static double scale_factor(const ftl_lr_schedule *s) {
    if (s->scaling == FTL_LR_SCALE_NONE || s->base_batch <= 0 || s->batch <= 0) return 1.0;
    double r = (double)s->batch / (double)s->base_batch;
    return s->scaling == FTL_LR_SCALE_LINEAR ? r : sqrt(r);
}

double ftl_lr_schedule_target(const ftl_lr_schedule *s) { return s->lr * scale_factor(s); }

/* A number field of a spec: all of it must parse. */
static bool spec_number(const char *text, double *out) {
    char *end;
    *out = strtod(text, &end);
    return end != text && *end == '\0' && isfinite(*out);
}

ftl_status ftl_lr_decay_parse(const char *spec, const char *option, ftl_lr_decay *out) {
    ftl_lr_decay d = {.kind = FTL_LR_CONSTANT, .min_lr = out->min_lr};
    char buf[128];
    if (strlen(spec) >= sizeof buf) return ftl_fail(FTL_E_INVALID_ARG, "--%s: \"%.40s...\" is too long", option, spec);
    strcpy(buf, spec);
    char *fields[5] = {buf};
    int n = 1;
    for (char *c = buf; *c && n < 5; c++)
        if (*c == ':') *c = '\0', fields[n++] = c + 1;
    double v[4] = {0};
    for (int i = 1; i < n; i++)
        if (!spec_number(fields[i], &v[i - 1]))
            return ftl_fail(FTL_E_INVALID_ARG, "--%s %s: \"%s\" is not a number", option, spec, fields[i]);
    const char *usage = "constant, cosine, step:EPOCHS:GAMMA or plateau:PATIENCE:FACTOR[:MIN_LR]";
    if (strcmp(fields[0], "constant") == 0 && n == 1) {
        d.kind = FTL_LR_CONSTANT;
    } else if (strcmp(fields[0], "cosine") == 0 && n == 1) {
        d.kind = FTL_LR_COSINE;
    } else if (strcmp(fields[0], "step") == 0 && n == 3) {
        d.kind = FTL_LR_STEP;
        if (!(v[0] >= 1 && v[0] == floor(v[0]) && v[0] < 1e9) || !(v[1] > 0 && v[1] <= 1))
            return ftl_fail(FTL_E_INVALID_ARG, "--%s %s: step needs a whole number of epochs >= 1 and a factor in (0, 1]",
                            option, spec);
        d.step_epochs = (int64_t)v[0], d.gamma = v[1];
    } else if (strcmp(fields[0], "plateau") == 0 && (n == 3 || n == 4)) {
        d.kind = FTL_LR_PLATEAU;
        if (!(v[0] >= 1 && v[0] == floor(v[0]) && v[0] < 1e6) || !(v[1] > 0 && v[1] < 1))
            return ftl_fail(FTL_E_INVALID_ARG, "--%s %s: plateau needs a whole number of epochs >= 1 and a factor in (0, 1)",
                            option, spec);
        d.patience = (int)v[0], d.factor = v[1];
        if (n == 4) d.min_lr = v[2];
    } else {
        return ftl_fail(FTL_E_INVALID_ARG, "--%s \"%s\": expected %s", option, spec, usage);
    }
    if (!(d.min_lr >= 0))
        return ftl_fail(FTL_E_INVALID_ARG, "--%s %s: the smallest learning rate must be >= 0, not %g", option, spec, d.min_lr);
    *out = d;
    return FTL_OK;
}

void ftl_lr_decay_describe(const ftl_lr_decay *d, char *out, size_t size) {
    switch (d->kind) {
    case FTL_LR_CONSTANT: snprintf(out, size, "constant"); break;
    case FTL_LR_COSINE: snprintf(out, size, "cosine to %g", d->min_lr); break;
    case FTL_LR_STEP: snprintf(out, size, "step:%lld:%g", (long long)d->step_epochs, d->gamma); break;
    case FTL_LR_PLATEAU: snprintf(out, size, "plateau:%d:%g:%g", d->patience, d->factor, d->min_lr); break;
    }
}

double ftl_lr_schedule_epoch(const ftl_lr_schedule *s, int64_t epoch, double plateau_lr) {
    double target = ftl_lr_schedule_target(s);
    const ftl_lr_decay *d = &s->decay;
    switch (d->kind) {
    case FTL_LR_COSINE: { /* CosineAnnealingLR(T_max = epochs, eta_min = min_lr) stepped per epoch */
        if (s->epochs < 1) return target;
        double e = (double)(epoch < s->epochs ? epoch : s->epochs);
        return d->min_lr + (target - d->min_lr) * (1.0 + cos(M_PI * e / (double)s->epochs)) / 2.0;
    }
    case FTL_LR_STEP: return target * pow(d->gamma, (double)(epoch / d->step_epochs));
    case FTL_LR_PLATEAU: return isnan(plateau_lr) ? target : plateau_lr;
    case FTL_LR_CONSTANT: break;
    }
    return target;
}

double ftl_lr_schedule_at(const ftl_lr_schedule *s, int64_t step) {
    double k = scale_factor(s);
    double value = s->epoch_lr_set ? s->epoch_lr : s->lr * k;
    double warmup_steps = s->warmup_epochs * (double)s->steps_per_epoch;
    if (!(warmup_steps > 0) || (double)(step + 1) >= warmup_steps) return value;
    double start = s->warmup_start_factor >= 0 ? s->warmup_start_factor : k > 1.0 ? 1.0 / k : 0.0;
    double progress = (double)(step + 1) / warmup_steps;
    return value * (start + (1.0 - start) * progress);
}

void ftl_lr_plateau_start(ftl_lr_plateau *p, double lr) {
    *p = (ftl_lr_plateau){.lr = lr, .best = NAN, .wait = 0};
}

bool ftl_lr_plateau_update(ftl_lr_plateau *p, const ftl_lr_decay *d, double value, bool maximize, double min_delta) {
    if (isnan(value)) return false;
    bool better = isnan(p->best) || (maximize ? value > p->best + min_delta : value < p->best - min_delta);
    if (better) {
        p->best = value;
        p->wait = 0;
        return false;
    }
    if (++p->wait < d->patience) return false;
    p->wait = 0;
    /* Keras: reduce only while above the floor; torch: only when the change is larger than 1e-8 */
    double reduced = fmax(p->lr * d->factor, d->min_lr);
    if (!(p->lr - reduced > 1e-8)) return false;
    p->lr = reduced;
    return true;
}
