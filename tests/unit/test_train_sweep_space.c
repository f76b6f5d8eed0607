/* The sweep's search space: grids expand to every combination in a fixed order, random searches
 * draw within their ranges and repeat with the seed, and every bad spec is refused naming it. */
#include "ftl.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TEST(sweep_grid_expands_every_combination_in_order) {
    ftl_sweep_space s;
    ftl_sweep_space_init(&s);
    CHECK(ftl_sweep_space_add_grid(&s, "lr=1e-3,4e-3,1e-2") == FTL_OK);
    CHECK(ftl_sweep_space_add_grid(&s, "optimizer=adam,sgd") == FTL_OK);
    CHECK(ftl_sweep_space_add_grid(&s, "dropout=0,0.5") == FTL_OK);
    ftl_sweep_trial *t = NULL;
    int n = 0;
    if (!CHECK(ftl_sweep_space_trials(&s, 0, 1, 1024, &t, &n) == FTL_OK)) return;
    CHECK_EQ_INT(n, 12);
    /* lr outermost, then dropout, then optimizer (the enum's order), the last fastest */
    const double lr[3] = {1e-3, 4e-3, 1e-2}, dropout[2] = {0, 0.5};
    const double opt[2] = {FTL_OPTIMIZER_ADAM, FTL_OPTIMIZER_SGD};
    for (int i = 0; i < n; i++) {
        CHECK(t[i].set[FTL_SWEEP_LR] && t[i].set[FTL_SWEEP_DROPOUT] && t[i].set[FTL_SWEEP_OPTIMIZER]);
        CHECK(!t[i].set[FTL_SWEEP_BATCH] && !t[i].set[FTL_SWEEP_MOMENTUM]);
        CHECK(t[i].value[FTL_SWEEP_LR] == lr[i / 4]);
        CHECK(t[i].value[FTL_SWEEP_DROPOUT] == dropout[(i / 2) % 2]);
        CHECK(t[i].value[FTL_SWEEP_OPTIMIZER] == opt[i % 2]);
    }
    for (int i = 0; i < n; i++) /* all distinct */
        for (int j = 0; j < i; j++) CHECK(memcmp(t[i].value, t[j].value, sizeof t[i].value) != 0);
    free(t);
}

/* Label smoothing and the schedule are swept as the head's other settings: the schedule's specs kept
 * as text (ftl train's --lr-schedule), in the grid's order. */
TEST(sweep_grid_of_label_smoothing_and_lr_schedule) {
    ftl_sweep_space s;
    ftl_sweep_space_init(&s);
    CHECK(ftl_sweep_space_add_grid(&s, "label-smoothing=0,0.1") == FTL_OK);
    CHECK(ftl_sweep_space_add_grid(&s, "lr-schedule=constant,cosine,step:2:0.5,plateau:1:0.5:1e-6") == FTL_OK);
    ftl_sweep_trial *t = NULL;
    int n = 0;
    if (!CHECK(ftl_sweep_space_trials(&s, 0, 1, 1024, &t, &n) == FTL_OK)) return;
    CHECK_EQ_INT(n, 8);
    const char *schedule[4] = {"constant", "cosine", "step:2:0.5", "plateau:1:0.5:1e-6"};
    for (int i = 0; i < n; i++) {
        CHECK(t[i].set[FTL_SWEEP_LABEL_SMOOTHING] && t[i].set[FTL_SWEEP_LR_SCHEDULE] && !t[i].set[FTL_SWEEP_LR]);
        CHECK(t[i].value[FTL_SWEEP_LABEL_SMOOTHING] == (i < 4 ? 0 : 0.1));
        CHECK(strcmp(t[i].lr_schedule, schedule[i % 4]) == 0);
    }
    CHECK(strcmp(ftl_sweep_param_name(FTL_SWEEP_LABEL_SMOOTHING), "label-smoothing") == 0);
    CHECK(strcmp(ftl_sweep_param_name(FTL_SWEEP_LR_SCHEDULE), "lr-schedule") == 0);
    free(t);
    /* a random search draws smoothing from a range and picks a schedule from the grid */
    ftl_sweep_space r;
    ftl_sweep_space_init(&r);
    CHECK(ftl_sweep_space_add_range(&r, "label-smoothing=0:0.2") == FTL_OK);
    CHECK(ftl_sweep_space_add_grid(&r, "lr-schedule=constant,cosine") == FTL_OK);
    if (!CHECK(ftl_sweep_space_trials(&r, 20, 3, 1024, &t, &n) == FTL_OK)) return;
    for (int i = 0; i < n; i++) {
        double e = t[i].value[FTL_SWEEP_LABEL_SMOOTHING];
        CHECK(e >= 0 && e < 0.2);
        CHECK(strcmp(t[i].lr_schedule, "constant") == 0 || strcmp(t[i].lr_schedule, "cosine") == 0);
    }
    free(t);
}

/* Flip TTA as a grid of words: none / flip, given to each trial as ftl train's --tta; no range. */
TEST(sweep_grid_of_tta) {
    ftl_sweep_space s;
    ftl_sweep_space_init(&s);
    CHECK(ftl_sweep_space_add_grid(&s, "tta=none,flip") == FTL_OK);
    ftl_sweep_trial *t = NULL;
    int n = 0;
    if (!CHECK(ftl_sweep_space_trials(&s, 0, 1, 1024, &t, &n) == FTL_OK)) return;
    CHECK_EQ_INT(n, 2);
    char text[16];
    for (int i = 0; i < n; i++) {
        ftl_sweep_setting_text(&t[i], FTL_SWEEP_TTA, text, sizeof text);
        CHECK_STR_EQ(text, i == 0 ? "none" : "flip");
    }
    free(t);
    CHECK(strcmp(ftl_sweep_param_name(FTL_SWEEP_TTA), "tta") == 0);
    ftl_sweep_space_init(&s);
    CHECK(ftl_sweep_space_add_grid(&s, "tta=none,crop") == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "--grid tta=none,crop: --tta crop: ftl's test-time augmentation is flip");
    ftl_sweep_space_init(&s);
    CHECK(ftl_sweep_space_add_grid(&s, "tta=flip,flip") == FTL_E_INVALID_ARG);
    CHECK(ftl_sweep_space_add_range(&s, "tta=0:1") == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "tta takes a --grid of values");
}

TEST(sweep_random_draws_within_ranges_and_repeat_with_the_seed) {
    ftl_sweep_space s;
    ftl_sweep_space_init(&s);
    CHECK(ftl_sweep_space_add_range(&s, "lr=1e-4:1e-1:log") == FTL_OK);
    CHECK(ftl_sweep_space_add_range(&s, "dropout=0:0.5") == FTL_OK);
    CHECK(ftl_sweep_space_add_grid(&s, "batch=16,64") == FTL_OK);
    ftl_sweep_trial *a = NULL, *b = NULL, *c = NULL;
    int na = 0, nb = 0, nc = 0;
    CHECK(ftl_sweep_space_trials(&s, 400, 7, 1024, &a, &na) == FTL_OK);
    CHECK(ftl_sweep_space_trials(&s, 400, 7, 1024, &b, &nb) == FTL_OK);
    CHECK(ftl_sweep_space_trials(&s, 400, 8, 1024, &c, &nc) == FTL_OK);
    if (!a || !b || !c) goto done;
    CHECK_EQ_INT(na, 400);
    CHECK(memcmp(a, b, (size_t)na * sizeof *a) == 0);
    CHECK(memcmp(a, c, (size_t)na * sizeof *a) != 0);
    int below_1e3 = 0, batch16 = 0;
    for (int i = 0; i < na; i++) {
        double lr = a[i].value[FTL_SWEEP_LR], d = a[i].value[FTL_SWEEP_DROPOUT], bt = a[i].value[FTL_SWEEP_BATCH];
        CHECK(lr >= 1e-4 && lr < 1e-1);
        CHECK(d >= 0 && d < 0.5);
        CHECK(bt == 16 || bt == 64);
        below_1e3 += lr < 1e-3;
        batch16 += bt == 16;
    }
    /* log-uniform: a third of the draws below 1e-3 (1 of 3 decades); uniform 1/3 = 133 of 400, 5 sigma ~ 47 */
    printf("  400 draws: %d with lr < 1e-3 (log-uniform: ~133), %d with batch 16 (~200)\n", below_1e3, batch16);
    CHECK(below_1e3 > 86 && below_1e3 < 180);
    CHECK(batch16 > 150 && batch16 < 250);
done:
    free(a);
    free(b);
    free(c);
}

static void expect_refused(const char *what, ftl_status st, const char *needle) {
    bool ok = st == FTL_E_INVALID_ARG && strstr(ftl_last_error(), needle) != NULL;
    printf("  %-34s -> %s\n", what, st == FTL_OK ? "(accepted)" : ftl_last_error());
    if (!ok) ftl_test_fail(__FILE__, __LINE__, "%s: expected an error naming \"%s\"", what, needle);
}

TEST(sweep_bad_specs_are_refused_naming_them) {
    ftl_sweep_space s;
    ftl_sweep_space_init(&s);
    expect_refused("unknown hyperparameter", ftl_sweep_space_add_grid(&s, "learning_rate=1e-3"), "unknown hyperparameter \"learning_rate\"");
    expect_refused("no '='", ftl_sweep_space_add_grid(&s, "lr"), "expected NAME=VALUES");
    expect_refused("empty value", ftl_sweep_space_add_grid(&s, "lr=1e-3,,1e-2"), "empty value for lr");
    expect_refused("empty list", ftl_sweep_space_add_grid(&s, "dropout="), "empty value for dropout");
    expect_refused("not a number", ftl_sweep_space_add_grid(&s, "lr=fast"), "\"fast\" is not a number");
    expect_refused("negative lr", ftl_sweep_space_add_grid(&s, "lr=-0.1"), "lr -0.1 is out of range");
    expect_refused("dropout 1", ftl_sweep_space_add_grid(&s, "dropout=0.5,1"), "dropout 1 is out of range");
    expect_refused("fractional batch", ftl_sweep_space_add_grid(&s, "batch=16.5"), "batch 16.5 is out of range");
    expect_refused("unknown optimizer", ftl_sweep_space_add_grid(&s, "optimizer=adam,rmsprop"), "rmsprop");
    expect_refused("a value twice", ftl_sweep_space_add_grid(&s, "lr=1e-3,0.001"), "given twice");
    CHECK(ftl_sweep_space_add_grid(&s, "lr=1e-3") == FTL_OK);
    expect_refused("a hyperparameter twice", ftl_sweep_space_add_range(&s, "lr=1e-4:1e-2"), "lr is already given");
    expect_refused("empty range", ftl_sweep_space_add_range(&s, "dropout=0.5:0.5"), "an empty range");
    expect_refused("log range from 0", ftl_sweep_space_add_range(&s, "weight-decay=0:1e-2:log"), "a log range needs LO > 0");
    expect_refused("bad scale", ftl_sweep_space_add_range(&s, "momentum=0:0.9:exp"), "not \"exp\"");
    expect_refused("range without ':'", ftl_sweep_space_add_range(&s, "momentum=0.9"), "expected momentum=LO:HI");
    expect_refused("range of batch", ftl_sweep_space_add_range(&s, "batch=16:64"), "batch takes a --grid");
    expect_refused("label smoothing 1", ftl_sweep_space_add_grid(&s, "label-smoothing=0,1"), "label-smoothing 1 is out of range");
    expect_refused("unknown schedule", ftl_sweep_space_add_grid(&s, "lr-schedule=constant,linear"), "\"linear\": expected");
    expect_refused("bad step schedule", ftl_sweep_space_add_grid(&s, "lr-schedule=step:0:0.5"), "step needs a whole number");
    expect_refused("a schedule twice", ftl_sweep_space_add_grid(&s, "lr-schedule=cosine,cosine"), "given twice");
    expect_refused("range of schedules", ftl_sweep_space_add_range(&s, "lr-schedule=1:2"), "lr-schedule takes a --grid");
    /* too many trials: 64 x 64 x 2 > 1024, said before any work */
    ftl_sweep_space big;
    ftl_sweep_space_init(&big);
    char spec[1024] = "warmup=";
    for (int i = 0; i < 64; i++) snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%d", i ? "," : "", i);
    CHECK(ftl_sweep_space_add_grid(&big, spec) == FTL_OK);
    spec[0] = '\0';
    snprintf(spec, sizeof spec, "momentum=");
    for (int i = 0; i < 64; i++) snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s0.%02d", i ? "," : "", i);
    CHECK(ftl_sweep_space_add_grid(&big, spec) == FTL_OK);
    CHECK(ftl_sweep_space_add_grid(&big, "dropout=0,0.5") == FTL_OK);
    ftl_sweep_trial *t = NULL;
    int n = 0;
    expect_refused("more than --max-trials", ftl_sweep_space_trials(&big, 0, 1, 1024, &t, &n),
                   "makes 8192 trials, more than --max-trials 1024");
    CHECK(t == NULL && n == 0);
    ftl_sweep_space r;
    ftl_sweep_space_init(&r);
    CHECK(ftl_sweep_space_add_range(&r, "lr=1e-4:1e-1:log") == FTL_OK);
    expect_refused("range without --random", ftl_sweep_space_trials(&r, 0, 1, 1024, &t, &n), "give --random N");
    char many[2048] = "lr=";
    for (int i = 1; i <= 65; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d", i > 1 ? "," : "", i);
    ftl_sweep_space m;
    ftl_sweep_space_init(&m);
    expect_refused("65 values", ftl_sweep_space_add_grid(&m, many), "more than 64 values");
}
