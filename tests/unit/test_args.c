/* Options by name (ftl/args.h) and ftl train's table and checks (ftl_train_args_parse): the parser
 * behind the command lines and the Python keywords, against exact expected values. */
#include "test.h"
#include "ftl.h"

#include <stdlib.h>

static ftl_status parse(ftl_arg *args, int n, int argc, char **argv, const char **pos, int *npos, bool *help) {
    return ftl_args_parse(args, n, argc, argv, pos, 2, npos, help);
}

TEST(args_parse_every_kind) {
    bool flag = true, other = false;
    int i = 0;
    int64_t big = 0, bytes = 0;
    double d = 0;
    const char *s = NULL;
    ftl_arg_list list = {0};
    ftl_arg args[] = {
        {"flag", FTL_ARG_BOOL, &flag, NULL, ""}, {"other", FTL_ARG_BOOL, &other, NULL, ""},
        {"int", FTL_ARG_INT, &i, "N", ""},       {"big", FTL_ARG_INT64, &big, "N", ""},
        {"d", FTL_ARG_DOUBLE, &d, "X", ""},      {"s", FTL_ARG_STRING, &s, "S", ""},
        {"bytes", FTL_ARG_BYTES, &bytes, "B", ""}, {"grid", FTL_ARG_LIST, &list, "K=V", ""},
    };
    char *argv[] = {"cmd", "pos1", "--no-flag", "--other", "--int", "-7", "--big=9000000000", "-d", "2.5", "--s", "x y",
                    "--bytes", "1.5MiB", "--grid", "a=1", "--grid=b=2", "--", "--pos2"};
    const char *pos[2];
    int npos = -1;
    bool help = true;
    REQUIRE(parse(args, 8, 18, argv, pos, &npos, &help) == FTL_OK);
    CHECK(!help && !flag && other);
    CHECK_EQ_INT(i, -7);
    CHECK_EQ_INT(big, 9000000000LL);
    CHECK_NEAR(d, 2.5, 0);
    CHECK_STR_EQ(s, "x y");
    CHECK_EQ_INT(bytes, 1572864);
    CHECK_EQ_INT(list.count, 2);
    CHECK_STR_EQ(list.values[1], "b=2");
    CHECK_EQ_INT(npos, 2);
    CHECK_STR_EQ(pos[0], "pos1");
    CHECK_STR_EQ(pos[1], "--pos2"); /* after --, an argument even with dashes */
    CHECK(ftl_args_given(18, argv, "flag") && ftl_args_given(18, argv, "big") && !ftl_args_given(18, argv, "pos2"));
}

TEST(args_errors_name_the_option) {
    int i = 0;
    bool b = false;
    ftl_arg args[] = {{"batch", FTL_ARG_INT, &i, "B", ""}, {"quiet", FTL_ARG_BOOL, &b, NULL, ""}};
    static const struct {
        char *arg1, *arg2;
        const char *message;
    } cases[] = {
        {"--bach", "3", "unknown option '--bach' (did you mean '--batch'?)"},
        {"--zzzzzz", NULL, "unknown option '--zzzzzz'"},
        {"--batch", "x", "invalid value 'x' for --batch (expected B)"},
        {"--batch", "99999999999", "invalid value '99999999999' for --batch (expected B)"},
        {"--quiet=1", NULL, "option '--quiet=1' takes no value"},
        {"--batch", NULL, "option '--batch' needs a value"},
        {"a", "b", "unexpected argument 'b'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *argv[3] = {"cmd", cases[k].arg1, cases[k].arg2};
        int argc = cases[k].arg2 ? 3 : 2;
        const char *pos[1];
        int npos = 0;
        bool help = false;
        CHECK(ftl_args_parse(args, 2, argc, argv, pos, 1, &npos, &help) == FTL_E_INVALID_ARG);
        CHECK_STR_EQ(ftl_last_error(), cases[k].message);
    }
    char *help_argv[] = {"cmd", "--batch", "x", "--help"};
    const char *pos[1];
    int npos = 0;
    bool help = false;
    CHECK(ftl_args_parse(args, 2, 4, help_argv, pos, 1, &npos, &help) == FTL_OK && help); /* help wins */
}

static ftl_status train_parse(int argc, char **argv, ftl_train_options *o, ftl_train_args *extra) {
    return ftl_train_args_parse(argc, argv, o, extra);
}

TEST(train_args_defaults_and_values) {
    char *argv[] = {"train", "t.parquet", "--val", "v.parquet", "--backbone", "m.onnx", "--out", "m.ftl",
                    "--batch", "8", "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--dropout", "0.25",
                    "--early-stopping", "monitor=val_loss,patience=2", "--no-restore-best", "--augment", "flip",
                    "--device", "cpu"};
    ftl_train_options o;
    ftl_train_args extra;
    REQUIRE(train_parse(25, argv, &o, &extra) == FTL_OK);
    CHECK(!extra.help_asked && !extra.quiet && !extra.report_path);
    CHECK_STR_EQ(o.train_path, "t.parquet");
    CHECK_STR_EQ(o.val_path, "v.parquet");
    CHECK_EQ_INT(o.fit.batch_size, 8);
    CHECK_EQ_INT(o.fit.epochs, 30); /* the default */
    CHECK_EQ_INT(o.fit.optimizer.kind, FTL_OPTIMIZER_SGD);
    CHECK_NEAR(o.fit.optimizer.lr, 0.01, 0);
    CHECK_NEAR(o.fit.optimizer.momentum, 0.9, 0);
    CHECK_NEAR(o.fit.dropout, 0.25, 0);
    CHECK_EQ_INT(o.fit.early_stopping.monitor, FTL_MONITOR_VAL_LOSS);
    CHECK_EQ_INT(o.fit.early_stopping.patience, 2);
    CHECK(!o.fit.early_stopping.restore_best && o.augment_flip && o.feature_cache && !o.strict);
    CHECK_EQ_INT(o.fit.seed, 42);
    CHECK_EQ_INT(o.argc, 25);
    int n = 0;
    const ftl_arg *table = ftl_train_arg_table(&n);
    bool found_batch = false;
    for (int i = 0; i < n; i++) {
        CHECK(table[i].target == NULL && table[i].help && table[i].name);
        if (strcmp(table[i].name, "batch") == 0) found_batch = table[i].kind == FTL_ARG_INT64;
    }
    CHECK(n > 40 && found_batch);
}

TEST(train_args_refused_with_the_reason) {
    static const struct {
        const char *flags;
        const char *message;
    } cases[] = {
        {"--batch 0", "--batch must be 1..65536, not 0"},
        {"--embed-batch 0", "--embed-batch must be 1..4096, not 0"},
        {"--embed-batch 4097", "--embed-batch must be 1..4096, not 4097"},
        {"--epochs 0", "--epochs must be positive, not 0"},
        {"--dropout 1", "--dropout must be in [0, 1), not 1"},
        {"--seed -1", "--seed must be non-negative, not -1"},
        {"--weight-decay -0.5", "--weight-decay must be non-negative, not -0.5"},
        {"--lr -0.1", "--lr must be positive, not -0.1"},
        {"--momentum 0.9", "--momentum and --nesterov apply to --optimizer sgd, not nadam"},
        {"--keep-last 2", "--keep-last and --save-best-only need --checkpoint PATTERN"},
        {"--scale-lr linear", "--scale-lr needs --base-batch B0 (the batch size the learning rate was tuned for)"},
        {"--report r.html", "--report draws the log: give --log RUN.jsonl too"},
        {"--stall-timeout -1", "--stall-timeout must be a finite number of seconds >= 0 (0 = never)"},
        {"--augment crop", "--augment crop: ftl augments with flip (or none); augmentations that change an image "
                           "differently every epoch, such as crops, cannot use the feature cache"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *flags = strdup(cases[k].flags);
        char *argv[16] = {"train", "t.parquet", "--backbone", "m.onnx", "--out", "m.ftl"};
        int argc = 6;
        for (char *tok = strtok(flags, " "); tok && argc < 16; tok = strtok(NULL, " ")) argv[argc++] = tok;
        ftl_train_options o;
        ftl_train_args extra;
        CHECK(train_parse(argc, argv, &o, &extra) == FTL_E_INVALID_ARG);
        CHECK_STR_EQ(ftl_last_error(), cases[k].message);
        free(flags);
    }
    char *missing[] = {"train", "t.parquet", "--out", "m.ftl"};
    ftl_train_options o;
    ftl_train_args extra;
    CHECK(train_parse(4, missing, &o, &extra) == FTL_E_INVALID_ARG);
    CHECK_STR_EQ(ftl_last_error(), "--backbone MODEL.onnx and --out MODEL.ftl are required");
    ftl_dist_set_stall_timeout(60); /* what the parses above may have changed */
}
