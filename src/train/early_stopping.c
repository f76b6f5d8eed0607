/* Early stopping with the semantics of Keras' EarlyStopping (TF 2.11+ keras/callbacks.py):
 *   each epoch: wait += 1; improvement = (max mode) value - min_delta > best
 *                                        (min mode) value + min_delta < best
 *   on improvement: best = value, best weights = these, and wait = 0 if there is no baseline or
 *   the value also beats it; otherwise, once wait >= patience (and not at the first epoch), stop.
 * The first epoch improves on the initial +-inf (unless NaN: NaN never improves). */
#include "ftl/train.h"
#include "train/train_internal.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const monitor_names[] = {"val_acc", "val_loss", "acc", "loss"};

const char *ftl_monitor_name(ftl_monitor monitor) {
    return (int)monitor >= 0 && (int)monitor < 4 ? monitor_names[monitor] : "?";
}

ftl_status ftl_monitor_parse(const char *name, ftl_monitor *out) {
    /* Keras 2.3+ names the metric "accuracy"; accept both spellings. */
    const char *aliases[][2] = {{"val_accuracy", "val_acc"}, {"accuracy", "acc"}};
    for (size_t i = 0; i < 2; i++)
        if (strcmp(name, aliases[i][0]) == 0) name = aliases[i][1];
    for (int i = 0; i < 4; i++)
        if (strcmp(name, monitor_names[i]) == 0) {
            *out = (ftl_monitor)i;
            return FTL_OK;
        }
    return ftl_fail(FTL_E_INVALID_ARG, "unknown metric to monitor \"%s\" (expected val_acc, val_loss, acc or loss)", name);
}

ftl_early_stopping_config ftl_early_stopping_config_default(void) {
    return (ftl_early_stopping_config){.stop = false, .monitor = FTL_MONITOR_VAL_ACC, .mode = FTL_MODE_AUTO,
                                       .patience = 3, .min_delta = 0.0, .baseline = NAN, .restore_best = true};
}

static bool parse_number(const char *text, double *out) {
    char *end;
    *out = strtod(text, &end);
    return end != text && *end == '\0' && isfinite(*out);
}

ftl_status ftl_early_stopping_parse(const char *spec, ftl_early_stopping_config *config) {
    config->stop = true;
    char *copy = malloc(strlen(spec) + 1);
    if (!copy) return ftl_fail(FTL_E_NOMEM, "out of memory");
    strcpy(copy, spec);
    ftl_status s = FTL_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && s == FTL_OK; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            s = ftl_fail(FTL_E_INVALID_ARG, "--early-stopping: \"%s\" is not key=value (e.g. monitor=val_acc,patience=3,min_delta=0.001)", item);
            break;
        }
        *eq = '\0';
        const char *key = item, *value = eq + 1;
        double x;
        if (strcmp(key, "monitor") == 0) {
            s = ftl_monitor_parse(value, &config->monitor);
            if (s != FTL_OK) s = ftl_fail_context(s, "--early-stopping");
        } else if (strcmp(key, "mode") == 0) {
            if (strcmp(value, "auto") == 0) config->mode = FTL_MODE_AUTO;
            else if (strcmp(value, "min") == 0) config->mode = FTL_MODE_MIN;
            else if (strcmp(value, "max") == 0) config->mode = FTL_MODE_MAX;
            else s = ftl_fail(FTL_E_INVALID_ARG, "--early-stopping: mode \"%s\" is not auto, min or max", value);
        } else if (strcmp(key, "patience") == 0) {
            if (!parse_number(value, &x) || x < 0 || x != floor(x) || x > 1e9)
                s = ftl_fail(FTL_E_INVALID_ARG, "--early-stopping: patience \"%s\" is not a whole number >= 0", value);
            else config->patience = (int)x;
        } else if (strcmp(key, "min_delta") == 0) {
            if (!parse_number(value, &x))
                s = ftl_fail(FTL_E_INVALID_ARG, "--early-stopping: min_delta \"%s\" is not a number", value);
            else config->min_delta = fabs(x); /* Keras takes abs() too */
        } else if (strcmp(key, "baseline") == 0) {
            if (!parse_number(value, &x))
                s = ftl_fail(FTL_E_INVALID_ARG, "--early-stopping: baseline \"%s\" is not a number", value);
            else config->baseline = x;
        } else {
            s = ftl_fail(FTL_E_INVALID_ARG, "--early-stopping: unknown key \"%s\" (monitor, patience, min_delta, mode, baseline)", key);
        }
    }
    free(copy);
    return s;
}

static bool monitor_maximizes(const ftl_early_stopping_config *c) {
    if (c->mode == FTL_MODE_MAX) return true;
    if (c->mode == FTL_MODE_MIN) return false;
    return c->monitor == FTL_MONITOR_VAL_ACC || c->monitor == FTL_MONITOR_ACC;
}

ftl_status ftl_early_stopping_init(ftl_early_stopping *es, const ftl_early_stopping_config *config,
                                   size_t param_count) {
    memset(es, 0, sizeof *es);
    if (config->patience < 0) return ftl_fail(FTL_E_INVALID_ARG, "early stopping patience %d < 0", config->patience);
    es->config = *config;
    es->config.min_delta = fabs(config->min_delta);
    es->maximize = monitor_maximizes(config);
    es->param_count = param_count;
    if (config->restore_best) es->best_params = ftl_train_alloc_floats(param_count);
    return FTL_OK;
}

void ftl_early_stopping_free(ftl_early_stopping *es) {
    if (!es) return;
    free(es->best_params);
    memset(es, 0, sizeof *es);
}

/* Keras' _is_improvement: monitor_op(current - min_delta, reference) with min_delta negated in min mode. */
static bool improves(const ftl_early_stopping *es, double value, double reference) {
    if (es->maximize) return value - es->config.min_delta > reference;
    return value + es->config.min_delta < reference;
}

bool ftl_early_stopping_update(ftl_early_stopping *es, int64_t epoch, double value, const float *params) {
    /* Keras keeps the first epoch's weights in case no epoch ever improves (e.g. all NaN). */
    if (es->best_params && !es->has_best_params && params) {
        memcpy(es->best_params, params, es->param_count * sizeof(float));
        es->has_best_params = true;
        es->best_epoch = epoch;
    }
    es->wait++;
    double reference = es->has_best ? es->best : es->maximize ? -INFINITY : INFINITY;
    if (improves(es, value, reference)) {
        es->has_best = true;
        es->best = value;
        es->best_epoch = epoch;
        if (es->best_params && params) memcpy(es->best_params, params, es->param_count * sizeof(float));
        /* Only restart the wait if the value also beats the baseline. */
        if (isnan(es->config.baseline) || improves(es, value, es->config.baseline)) es->wait = 0;
        return false;
    }
    /* Keras checks only after the first epoch (so patience 0 never stops at epoch 1). */
    if (es->config.stop && es->wait >= es->config.patience && epoch > 1) {
        es->stopped_epoch = epoch;
        return true;
    }
    return false;
}

void ftl_early_stopping_seed(ftl_early_stopping *es, double value, const float *params) {
    es->has_best = !isnan(value);
    es->best = value;
    es->best_epoch = 0;
    es->wait = 0;
    if (es->best_params && params) {
        memcpy(es->best_params, params, es->param_count * sizeof(float));
        es->has_best_params = true;
    }
}

bool ftl_early_stopping_restore(const ftl_early_stopping *es, float *params) {
    if (!es->config.restore_best || !es->has_best_params) return false;
    memcpy(params, es->best_params, es->param_count * sizeof(float));
    return true;
}
