/* Early stopping on scripted metric sequences. Expected outcomes are worked out by hand from
 * the documented behaviour of tf.keras.callbacks.EarlyStopping (TF 2.11+): an epoch improves when
 * value - min_delta > best (max mode) or value + min_delta < best (min mode); training stops at
 * the first epoch (after the first) where `patience` epochs have passed without improvement;
 * restore_best_weights puts back the weights of the best epoch. */
#include "train_test_util.h"

typedef struct scenario_result {
    int64_t stopped_epoch; /* 1-based, 0 = ran all epochs */
    int64_t best_epoch;
    float restored;        /* the "weights" restored: each epoch's weights are {epoch} */
} scenario_result;

static scenario_result run_scenario(ftl_early_stopping_config cfg, const double *values, int epochs) {
    scenario_result r = {0, 0, -1};
    ftl_early_stopping es;
    if (ftl_early_stopping_init(&es, &cfg, 1) != FTL_OK) return r;
    for (int e = 1; e <= epochs; e++) {
        float weights = (float)e;
        if (ftl_early_stopping_update(&es, e, values[e - 1], &weights)) {
            r.stopped_epoch = e;
            break;
        }
    }
    r.best_epoch = es.best_epoch;
    float w = -1;
    if (ftl_early_stopping_restore(&es, &w)) r.restored = w;
    ftl_early_stopping_free(&es);
    return r;
}

static ftl_early_stopping_config stopping(ftl_monitor m, int patience, double min_delta) {
    ftl_early_stopping_config c = ftl_early_stopping_config_default();
    c.stop = true;
    c.monitor = m;
    c.patience = patience;
    c.min_delta = min_delta;
    return c;
}

TEST(train_early_stopping_article_setting_stops_and_restores_best) {
    /* The article: monitor val_acc, patience 3, min_delta 0.001.
     * e1 0.50 best; e2 0.60 best; e3 0.6005 (+0.0005 <= min_delta: wait 1); e4 0.59 (wait 2);
     * e5 0.58 (wait 3 >= 3): stop after epoch 5, restore epoch 2. Epoch 6 never runs. */
    const double v[] = {0.50, 0.60, 0.6005, 0.59, 0.58, 0.90};
    scenario_result r = run_scenario(stopping(FTL_MONITOR_VAL_ACC, 3, 0.001), v, 6);
    CHECK_EQ_INT(r.stopped_epoch, 5);
    CHECK_EQ_INT(r.best_epoch, 2);
    CHECK(r.restored == 2.0f);
}

TEST(train_early_stopping_min_delta_must_be_exceeded) {
    /* 0.5009 - 0.001 < 0.5: no improvement (wait 1); 0.5011 - 0.001 = 0.5001 > 0.5: improvement,
     * wait resets; then 3 flat epochs stop at epoch 6 with the best at epoch 3. */
    const double v[] = {0.5, 0.5009, 0.5011, 0.5015, 0.5016, 0.5020, 0.9};
    scenario_result r = run_scenario(stopping(FTL_MONITOR_VAL_ACC, 3, 0.001), v, 7);
    CHECK_EQ_INT(r.stopped_epoch, 6);
    CHECK_EQ_INT(r.best_epoch, 3);
    CHECK(r.restored == 3.0f);
    /* Without min_delta every rise counts: no stop in 7 epochs, best = epoch 7. */
    r = run_scenario(stopping(FTL_MONITOR_VAL_ACC, 3, 0.0), v, 7);
    CHECK_EQ_INT(r.stopped_epoch, 0);
    CHECK_EQ_INT(r.best_epoch, 7);
}

TEST(train_early_stopping_loss_is_minimised) {
    /* val_loss, mode auto -> min: 1.0, 0.9 best, then 0.95, 0.91, 0.905 never below 0.9: stop at 5. */
    const double v[] = {1.0, 0.9, 0.95, 0.91, 0.905, 0.1};
    scenario_result r = run_scenario(stopping(FTL_MONITOR_VAL_LOSS, 3, 0.0), v, 6);
    CHECK_EQ_INT(r.stopped_epoch, 5);
    CHECK_EQ_INT(r.best_epoch, 2);
    CHECK(r.restored == 2.0f);
    /* mode=max on a loss inverts it: 1.0 stays the best (no later value exceeds it); stop at 4. */
    ftl_early_stopping_config c = stopping(FTL_MONITOR_VAL_LOSS, 3, 0.0);
    c.mode = FTL_MODE_MAX;
    r = run_scenario(c, v, 6);
    CHECK_EQ_INT(r.stopped_epoch, 4);
    CHECK_EQ_INT(r.best_epoch, 1);
    /* min_delta on a loss: 0.9995 is not 0.001 better than 1.0. */
    const double w[] = {1.0, 0.9995, 0.9992, 0.9991};
    r = run_scenario(stopping(FTL_MONITOR_LOSS, 3, 0.001), w, 4);
    CHECK_EQ_INT(r.stopped_epoch, 4);
    CHECK_EQ_INT(r.best_epoch, 1);
}

TEST(train_early_stopping_patience_zero_and_nan) {
    /* patience 0: Keras never stops at the first epoch; the first non-improving epoch stops. */
    const double v[] = {0.5, 0.6, 0.6, 0.9};
    scenario_result r = run_scenario(stopping(FTL_MONITOR_VAL_ACC, 0, 0.0), v, 4);
    CHECK_EQ_INT(r.stopped_epoch, 3);
    CHECK_EQ_INT(r.best_epoch, 2);
    /* NaN never improves; if nothing ever improves the first epoch's weights are kept. */
    const double n[] = {NAN, NAN, NAN};
    r = run_scenario(stopping(FTL_MONITOR_VAL_LOSS, 2, 0.0), n, 3);
    CHECK_EQ_INT(r.stopped_epoch, 2);
    CHECK(r.restored == 1.0f);
    const double m[] = {0.4, NAN, 0.3, 0.5};
    r = run_scenario(stopping(FTL_MONITOR_VAL_ACC, 2, 0.0), m, 4);
    CHECK_EQ_INT(r.stopped_epoch, 3);
    CHECK_EQ_INT(r.best_epoch, 1);
}

TEST(train_early_stopping_baseline) {
    /* baseline 0.8: improvements below it move `best` but do not reset the wait; Keras checks
     * patience only on non-improving epochs. 0.5, 0.4 -> wait 2 at epoch 2: stop. */
    ftl_early_stopping_config c = stopping(FTL_MONITOR_VAL_ACC, 2, 0.0);
    c.baseline = 0.8;
    const double a[] = {0.5, 0.4, 0.9};
    scenario_result r = run_scenario(c, a, 3);
    CHECK_EQ_INT(r.stopped_epoch, 2);
    CHECK_EQ_INT(r.best_epoch, 1);
    /* Rising but under the baseline: never a non-improving epoch, so no stop. */
    const double b[] = {0.5, 0.6, 0.7, 0.75};
    r = run_scenario(c, b, 4);
    CHECK_EQ_INT(r.stopped_epoch, 0);
    CHECK_EQ_INT(r.best_epoch, 4);
    /* Beating the baseline resets the wait as usual. */
    const double d[] = {0.85, 0.84, 0.86, 0.85, 0.85};
    r = run_scenario(c, d, 5);
    CHECK_EQ_INT(r.stopped_epoch, 5);
    CHECK_EQ_INT(r.best_epoch, 3);
}

TEST(train_early_stopping_tracks_best_without_stopping) {
    /* ftl's default without --early-stopping: run every epoch, still restore the best weights. */
    ftl_early_stopping_config c = ftl_early_stopping_config_default();
    const double v[] = {0.5, 0.7, 0.6, 0.6, 0.6, 0.6};
    scenario_result r = run_scenario(c, v, 6);
    CHECK_EQ_INT(r.stopped_epoch, 0);
    CHECK_EQ_INT(r.best_epoch, 2);
    CHECK(r.restored == 2.0f);
    c.restore_best = false; /* --no-restore-best */
    r = run_scenario(c, v, 6);
    CHECK(r.restored == -1.0f);
}

TEST(train_early_stopping_parses_the_cli_spec) {
    ftl_early_stopping_config c = ftl_early_stopping_config_default();
    REQUIRE_OK(ftl_early_stopping_parse("monitor=val_loss,patience=5,min_delta=0.01", &c));
    CHECK(c.stop);
    CHECK(c.monitor == FTL_MONITOR_VAL_LOSS);
    CHECK_EQ_INT(c.patience, 5);
    CHECK_NEAR(c.min_delta, 0.01, 0);
    REQUIRE_OK(ftl_early_stopping_parse("monitor=val_accuracy,mode=max,baseline=0.5", &c));
    CHECK(c.monitor == FTL_MONITOR_VAL_ACC && c.mode == FTL_MODE_MAX && c.baseline == 0.5);
    CHECK(ftl_early_stopping_parse("monitor=val_f1", &c) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "val_f1");
    CHECK(ftl_early_stopping_parse("patience=-1", &c) == FTL_E_INVALID_ARG);
    CHECK(ftl_early_stopping_parse("patience=3,bogus=1", &c) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "unknown key \"bogus\"");
    CHECK(ftl_early_stopping_parse("patience", &c) == FTL_E_INVALID_ARG);
}
