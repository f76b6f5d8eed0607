/* The learning-rate schedules (src/train/lr_schedule.c) against torch.optim.lr_scheduler stepped
 * once per epoch (tests/ref/train_ref.py writes schedules.json): CosineAnnealingLR, StepLR and
 * ReduceLROnPlateau on scripted metric sequences (Keras' patience P = torch's P - 1, an absolute
 * threshold = min_delta). Every epoch's rate must agree within 1e-12 relative. Also the specs'
 * parsing and their refusals, and warmup on top of a decay. */
#include "train_test_util.h"
#include "util/json.h"

#include <math.h>
#include <string.h>

static bool number(const ftl_json *o, const char *key, double *v) {
    if (ftl_json_get_number(o, key, v)) return true;
    ftl_test_fail(__FILE__, __LINE__, "schedules.json: a case has no '%s'", key);
    return false;
}

TEST(train_lr_schedules_match_torch) {
    char *path = train_ref_path("schedules.json");
    uint8_t *text = NULL;
    size_t size = 0;
    ftl_json *cases = NULL;
    if (ftl_read_file(path, &text, &size) != FTL_OK || ftl_json_parse((const char *)text, size, &cases) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "reference %s missing or unreadable (run tests/ref/gen_train.sh): %s", path,
                      ftl_last_error());
        free(path), free(text);
        return;
    }
    CHECK(cases->type == FTL_JSON_ARRAY && cases->count >= 5);
    int kinds_seen = 0;
    for (size_t c = 0; c < cases->count; c++) {
        const ftl_json *k = &cases->items[c];
        const char *kind = ftl_json_get_string(k, "kind");
        const ftl_json *lrs = ftl_json_get(k, "lrs"), *metrics = ftl_json_get(k, "metrics");
        double lr, epochs;
        if (!kind || !lrs || !number(k, "lr", &lr) || !number(k, "epochs", &epochs)) continue;
        ftl_lr_schedule s = {.lr = lr, .epochs = (int64_t)epochs};
        double v = 0;
        if (strcmp(kind, "cosine") == 0) {
            s.decay.kind = FTL_LR_COSINE;
            number(k, "min_lr", &s.decay.min_lr);
            kinds_seen |= 1;
        } else if (strcmp(kind, "step") == 0) {
            s.decay.kind = FTL_LR_STEP;
            if (number(k, "step_epochs", &v)) s.decay.step_epochs = (int64_t)v;
            number(k, "gamma", &s.decay.gamma);
            kinds_seen |= 2;
        } else {
            s.decay.kind = FTL_LR_PLATEAU;
            if (number(k, "patience", &v)) s.decay.patience = (int)v;
            number(k, "factor", &s.decay.factor);
            number(k, "min_lr", &s.decay.min_lr);
            kinds_seen |= 4;
        }
        const ftl_json *maximize = ftl_json_get(k, "maximize");
        double min_delta = 0;
        ftl_json_get_number(k, "min_delta", &min_delta);
        ftl_lr_plateau p;
        ftl_lr_plateau_start(&p, ftl_lr_schedule_target(&s));
        double worst = 0;
        CHECK(lrs->count == (size_t)epochs);
        for (size_t e = 0; e < lrs->count; e++) {
            double got = ftl_lr_schedule_epoch(&s, (int64_t)e, p.lr), want = lrs->items[e].number;
            worst = fmax(worst, fabs(got - want) / want);
            if (!(fabs(got - want) <= 1e-12 * want))
                ftl_test_fail(__FILE__, __LINE__, "case %zu (%s) epoch %zu: ftl %.17g, torch %.17g", c, kind, e, got, want);
            if (s.decay.kind == FTL_LR_PLATEAU && metrics && e < metrics->count)
                ftl_lr_plateau_update(&p, &s.decay, metrics->items[e].number, maximize && maximize->boolean, min_delta);
        }
        printf("  case %zu %-8s %2zu epochs: worst relative difference %.2e\n", c, kind, lrs->count, worst);
    }
    CHECK(kinds_seen == 7);
    ftl_json_free(cases);
    free(text);
    free(path);
}

TEST(train_lr_schedule_specs_parse_and_refuse) {
    ftl_lr_decay d = {.min_lr = 1e-4};
    CHECK_OK(ftl_lr_decay_parse("cosine", "lr-schedule", &d));
    CHECK(d.kind == FTL_LR_COSINE && d.min_lr == 1e-4);
    CHECK_OK(ftl_lr_decay_parse("step:30:0.1", "lr-schedule", &d));
    CHECK(d.kind == FTL_LR_STEP && d.step_epochs == 30 && d.gamma == 0.1);
    CHECK_OK(ftl_lr_decay_parse("plateau:3:0.5:1e-6", "lr-schedule", &d));
    CHECK(d.kind == FTL_LR_PLATEAU && d.patience == 3 && d.factor == 0.5 && d.min_lr == 1e-6);
    const char *bad[] = {"cosine:3", "step:0:0.1", "step:2.5:0.1", "step:3", "plateau:2:1.5", "plateau:x:0.5", "linear",
                         "step:3:0.1:7", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ftl_status st = ftl_lr_decay_parse(bad[i], "lr-schedule", &d);
        CHECK(st == FTL_E_INVALID_ARG);
        CHECK(strstr(ftl_last_error(), "--lr-schedule") != NULL);
    }
    char text[96];
    ftl_lr_decay_describe(&(ftl_lr_decay){.kind = FTL_LR_STEP, .step_epochs = 4, .gamma = 0.5}, text, sizeof text);
    CHECK(strcmp(text, "step:4:0.5") == 0);
}

/* Warmup scales the epoch's rate: the ramp of a constant schedule is unchanged, and a cosine's
 * first epoch ramps to the cosine's value. */
TEST(train_lr_warmup_ramps_to_the_epoch_rate) {
    ftl_lr_schedule s = {.lr = 0.1, .warmup_epochs = 1, .steps_per_epoch = 10, .warmup_start_factor = -1, .epochs = 4};
    double before = ftl_lr_schedule_at(&s, 4); /* no epoch rate set: the target */
    s.epoch_lr = ftl_lr_schedule_epoch(&s, 0, NAN), s.epoch_lr_set = true;
    CHECK_NEAR(ftl_lr_schedule_at(&s, 4), before, 1e-15);
    CHECK_NEAR(ftl_lr_schedule_at(&s, 4), 0.1 * 5.0 / 10.0, 1e-15);
    s.decay.kind = FTL_LR_COSINE;
    s.epoch_lr = ftl_lr_schedule_epoch(&s, 1, NAN);
    CHECK_NEAR(s.epoch_lr, 0.1 * (1 + cos(M_PI / 4)) / 2, 1e-15);
    CHECK_NEAR(ftl_lr_schedule_at(&s, 14), s.epoch_lr, 1e-15); /* past the warmup */
}
