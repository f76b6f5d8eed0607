/* The fit loop: exact resume from checkpoints, refused checkpoints, checkpoint rotation, the
 * epoch line and JSONL log, restoring the best weights, early stopping inside fit, the batch
 * source, the learning-rate schedule against Horovod's warmup formula, the allreduce hook and
 * the model file. */
#include "train_test_util.h"
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

enum { NTRAIN = 200, NVAL = 60, DIM = 33, CLASSES = 7 };

typedef struct dataset {
    float train_x[NTRAIN * DIM], val_x[NVAL * DIM];
    int32_t train_y[NTRAIN], val_y[NVAL];
} dataset;

/* Learnable but noisy: each class has its own mean pattern, plus uniform noise. */
static void make_dataset(dataset *d) {
    float means[CLASSES * DIM];
    train_fill_uniform(means, CLASSES * DIM, 1, 0, 1.5f);
    train_fill_uniform(d->train_x, NTRAIN * DIM, 2, 0, 1.6f);
    train_fill_uniform(d->val_x, NVAL * DIM, 3, 0, 1.6f);
    for (int i = 0; i < NTRAIN; i++) {
        d->train_y[i] = (int32_t)((i * 5 + i / 7) % CLASSES);
        for (int k = 0; k < DIM; k++) d->train_x[i * DIM + k] += means[d->train_y[i] * DIM + k];
    }
    for (int i = 0; i < NVAL; i++) {
        d->val_y[i] = (int32_t)((i * 3 + 1) % CLASSES);
        for (int k = 0; k < DIM; k++) d->val_x[i * DIM + k] += means[d->val_y[i] * DIM + k];
    }
}

static const char *CLASS_JSON = "[\"c0\",\"c1\",\"c2\",\"c3\",\"c4\",\"c5\",\"c6\"]";
static const char *SHA_A = "aaaa1111bbbb2222cccc3333dddd4444eeee5555ffff6666aaaa1111bbbb2222";
static ftl_kv identity[3] = {{FTL_MODEL_META_CLASSES, NULL},
                             {FTL_MODEL_META_BACKBONE_SHA256, NULL},
                             {FTL_MODEL_META_BACKBONE_PATH, "models/a.onnx"}};

static ftl_fit_config base_config(int64_t epochs) {
    identity[0].value = CLASS_JSON;
    identity[1].value = SHA_A;
    ftl_fit_config c = ftl_fit_config_default();
    c.batch_size = 16;
    c.epochs = epochs;
    c.dropout = 0.3;
    c.seed = 7;
    c.optimizer.lr = 0.01;
    c.checkpoint_meta = identity;
    c.checkpoint_meta_count = 3;
    return c;
}

/* A complete training run: sources, trainer, optional resume, fit. Keeps the trainer. */
typedef struct run {
    ftl_memory_source train_mem, val_mem;
    ftl_batch_source train, val;
    ftl_trainer *trainer;
    ftl_fit_result result;
} run;

static ftl_status run_fit(run *r, const dataset *d, const ftl_fit_config *cfg, const char *resume_from, bool with_val) {
    memset(r, 0, sizeof *r);
    FTL_TRY(ftl_memory_source_init(&r->train_mem, d->train_x, d->train_y, NTRAIN, DIM, true, 11));
    FTL_TRY(ftl_memory_source_init(&r->val_mem, d->val_x, d->val_y, NVAL, DIM, false, 0));
    r->train = ftl_memory_source_as_batch_source(&r->train_mem);
    r->val = ftl_memory_source_as_batch_source(&r->val_mem);
    FTL_TRY(ftl_trainer_init(&r->trainer, cfg, DIM, CLASSES));
    if (resume_from) FTL_TRY(ftl_trainer_resume(r->trainer, resume_from, &r->train));
    return ftl_trainer_fit(r->trainer, &r->train, with_val ? &r->val : NULL, &r->result);
}

static void run_free(run *r) {
    ftl_trainer_free(r->trainer);
    ftl_memory_source_free(&r->train_mem);
    ftl_memory_source_free(&r->val_mem);
}

static void check_same_state(run *a, run *b) {
    ftl_head *ha = ftl_trainer_head(a->trainer), *hb = ftl_trainer_head(b->trainer);
    const ftl_optimizer *oa = ftl_trainer_optimizer(a->trainer), *ob = ftl_trainer_optimizer(b->trainer);
    CHECK(memcmp(ha->params, hb->params, ha->param_count * sizeof(float)) == 0);
    CHECK_EQ_INT(oa->step, ob->step);
    CHECK(oa->mu_product == ob->mu_product);
    if (oa->state) CHECK(memcmp(oa->state, ob->state, (size_t)oa->slot_count * oa->param_count * sizeof(float)) == 0);
    const ftl_epoch_log *la, *lb;
    size_t na = ftl_trainer_history(a->trainer, &la), nb = ftl_trainer_history(b->trainer, &lb);
    CHECK_EQ_INT(na, nb);
    for (size_t i = 0; i < na && i < nb; i++) {
        CHECK(la[i].loss == lb[i].loss && la[i].acc == lb[i].acc);
        CHECK(la[i].val_loss == lb[i].val_loss && la[i].val_acc == lb[i].val_acc);
    }
    CHECK_EQ_INT(a->result.best_epoch, b->result.best_epoch);
    CHECK(a->result.final_val_acc == b->result.final_val_acc);
}

/* N epochs straight vs K epochs + checkpoint + a fresh process state + resume + N - K epochs. */
static void check_exact_resume(ftl_fit_config cfg, int64_t total, int64_t first) {
    static dataset d;
    make_dataset(&d);
    const char *dir = ftl_test_scratch_dir();
    char *pattern = ftl_format("%s/ckpt/checkpoint-{epoch:02d}.ckpt", dir);
    run straight, part1, part2;
    cfg.epochs = total;
    REQUIRE_OK(run_fit(&straight, &d, &cfg, NULL, true));
    cfg.epochs = first;
    cfg.checkpoint_pattern = pattern;
    REQUIRE_OK(run_fit(&part1, &d, &cfg, NULL, true));
    char *ckpt = ftl_format("%s/ckpt/checkpoint-%02lld.ckpt", dir, (long long)first);
    CHECK(ftl_path_exists(ckpt));
    run_free(&part1);
    cfg.epochs = total;
    ftl_status s = run_fit(&part2, &d, &cfg, ckpt, true);
    CHECK_OK(s);
    if (s == FTL_OK) {
        CHECK_EQ_INT(ftl_trainer_epoch(part2.trainer), total);
        check_same_state(&straight, &part2);
    }
    run_free(&straight);
    run_free(&part2);
    free(ckpt), free(pattern);
}

TEST(train_fit_resume_is_bit_identical) {
    /* Nadam, dropout, shuffled passes, best-weight tracking: 6 epochs vs 2 + resume + 4. */
    check_exact_resume(base_config(6), 6, 2);
}

TEST(train_fit_resume_is_bit_identical_mid_pass) {
    /* --steps-per-epoch 9 (144 of 200 examples): epochs end inside a pass, so the loader
     * position matters; sgd with nesterov momentum; warmup spanning the resume point. */
    ftl_fit_config cfg = base_config(5);
    cfg.steps_per_epoch = 9;
    cfg.optimizer = ftl_optimizer_config_default(FTL_OPTIMIZER_SGD);
    cfg.optimizer.lr = 0.05;
    cfg.optimizer.momentum = 0.9;
    cfg.optimizer.nesterov = true;
    cfg.warmup_epochs = 4;
    cfg.early_stopping.monitor = FTL_MONITOR_VAL_LOSS;
    check_exact_resume(cfg, 5, 3);
}

TEST(train_fit_refuses_checkpoints_from_other_runs) {
    static dataset d;
    make_dataset(&d);
    const char *dir = ftl_test_scratch_dir();
    char *pattern = ftl_format("%s/c-{epoch}.ckpt", dir), *ckpt = ftl_format("%s/c-1.ckpt", dir);
    ftl_fit_config cfg = base_config(1);
    cfg.checkpoint_pattern = pattern;
    run r;
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    run_free(&r);
    cfg.checkpoint_pattern = NULL;
    ftl_trainer *t;

    /* Another class set: same count, one name differs. */
    ftl_kv other[3] = {{FTL_MODEL_META_CLASSES, "[\"c0\",\"c1\",\"c2\",\"bat\",\"c4\",\"c5\",\"c6\"]"},
                       {FTL_MODEL_META_BACKBONE_SHA256, SHA_A}, {FTL_MODEL_META_BACKBONE_PATH, "models/a.onnx"}};
    cfg.checkpoint_meta = other;
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM, CLASSES));
    CHECK(ftl_trainer_resume(t, ckpt, NULL) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "another class set (class 3 is \"c3\" in the checkpoint, \"bat\" here)");
    CHECK_CONTAINS(ftl_last_error(), ckpt);
    ftl_trainer_free(t);

    /* Another backbone. */
    other[0].value = CLASS_JSON;
    other[1].value = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    other[2].value = "models/b.onnx";
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM, CLASSES));
    CHECK(ftl_trainer_resume(t, ckpt, NULL) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "another backbone (sha256 aaaa1111bbbb2222... models/a.onnx, this run: 0123456789abcdef... models/b.onnx)");
    ftl_trainer_free(t);

    /* Another number of classes or feature dimension: the tensor shapes say so. */
    cfg.checkpoint_meta = NULL;
    cfg.checkpoint_meta_count = 0;
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM, CLASSES + 1));
    CHECK(ftl_trainer_resume(t, ckpt, NULL) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "trained on 7 classes, this dataset has 8");
    ftl_trainer_free(t);
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM + 1, CLASSES));
    CHECK(ftl_trainer_resume(t, ckpt, NULL) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "trained on 33-dimensional features, these have 34");
    ftl_trainer_free(t);

    /* Another optimizer. */
    cfg.optimizer = ftl_optimizer_config_default(FTL_OPTIMIZER_ADAM);
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM, CLASSES));
    CHECK(ftl_trainer_resume(t, ckpt, NULL) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "trained with nadam, this run uses adam");
    ftl_trainer_free(t);

    /* A truncated checkpoint (a copy cut in half) is rejected, naming the file. */
    uint8_t *bytes;
    size_t size;
    REQUIRE_OK(ftl_read_file(ckpt, &bytes, &size));
    char *cut = ftl_format("%s/cut.ckpt", dir);
    FILE *f = fopen(cut, "wb");
    REQUIRE(f);
    fwrite(bytes, 1, size / 2, f);
    fclose(f);
    cfg.optimizer = ftl_optimizer_config_default(FTL_OPTIMIZER_NADAM);
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM, CLASSES));
    CHECK(ftl_trainer_resume(t, cut, NULL) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), cut);
    CHECK_CONTAINS(ftl_last_error(), "truncated");
    ftl_trainer_free(t);

    /* A final model is not a checkpoint. */
    ftl_classifier m;
    REQUIRE_OK(ftl_classifier_load(ckpt, &m)); /* the head of a checkpoint loads as a model */
    char *model = ftl_format("%s/MODEL.ftl", dir);
    ftl_kv meta[1] = {{FTL_MODEL_META_CLASSES, CLASS_JSON}};
    REQUIRE_OK(ftl_classifier_save(model, &m.head, meta, 1));
    ftl_classifier_free(&m);
    REQUIRE_OK(ftl_trainer_init(&t, &cfg, DIM, CLASSES));
    CHECK(ftl_trainer_resume(t, model, NULL) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "it is a final model, not a checkpoint");
    ftl_trainer_free(t);
    free(bytes), free(cut), free(model), free(pattern), free(ckpt);
}

static bool checkpoint_exists(const char *dir, int epoch) {
    char *p = ftl_format("%s/k-%d.ckpt", dir, epoch);
    bool e = ftl_path_exists(p);
    free(p);
    return e;
}

TEST(train_fit_keeps_last_k_and_best_only_checkpoints) {
    static dataset d;
    make_dataset(&d);
    const char *dir = ftl_test_scratch_dir();
    char *pattern = ftl_format("%s/k-{epoch}.ckpt", dir);
    ftl_fit_config cfg = base_config(5);
    cfg.checkpoint_pattern = pattern;
    cfg.keep_last = 2;
    run r;
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    for (int e = 1; e <= 5; e++) CHECK(checkpoint_exists(dir, e) == (e >= 4));
    const ftl_epoch_log *h;
    size_t n = ftl_trainer_history(r.trainer, &h);
    REQUIRE(n == 5);
    CHECK(h[4].checkpoint && strstr(h[4].checkpoint, "k-5.ckpt"));
    run_free(&r);
    for (int e = 1; e <= 5; e++) {
        char *p = ftl_format("%s/k-%d.ckpt", dir, e);
        remove(p);
        free(p);
    }
    cfg.keep_last = 0;
    cfg.save_best_only = true;
    cfg.optimizer.lr = 0.2; /* big steps: val_acc goes up and down */
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    n = ftl_trainer_history(r.trainer, &h);
    int improved = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(checkpoint_exists(dir, (int)h[i].epoch) == h[i].improved);
        improved += h[i].improved;
    }
    CHECK(improved >= 1);
    run_free(&r);
    free(pattern);
}

TEST(train_fit_epoch_line_and_jsonl_log) {
    static dataset d;
    make_dataset(&d);
    const char *dir = ftl_test_scratch_dir();
    char *log = ftl_format("%s/run.jsonl", dir), *lines_path = ftl_format("%s/stdout.txt", dir);
    ftl_fit_config cfg = base_config(3);
    cfg.log_path = log;
    cfg.epoch_out = fopen(lines_path, "w");
    REQUIRE(cfg.epoch_out);
    run r;
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    fclose(cfg.epoch_out);
    const ftl_epoch_log *h;
    size_t n = ftl_trainer_history(r.trainer, &h);
    REQUIRE(n == 3);

    uint8_t *text;
    size_t size;
    REQUIRE_OK(ftl_read_file(lines_path, &text, &size));
    text = realloc(text, size + 1);
    text[size] = 0;
    char *save = NULL;
    int line_no = 0;
    for (char *line = strtok_r((char *)text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "Epoch ", 6) != 0) continue; /* "Restoring ..." may follow */
        REQUIRE(line_no < 3);
        const ftl_epoch_log *l = &h[line_no++];
        char want[256];
        snprintf(want, sizeof want, "Epoch %d/3 - ", line_no);
        CHECK(strncmp(line, want, strlen(want)) == 0);
        snprintf(want, sizeof want, "s - loss: %.4f - acc: %.4f - val_loss: %.4f - val_acc: %.4f", l->loss, l->acc,
                 l->val_loss, l->val_acc);
        CHECK_CONTAINS(line, want);
        /* the time as the record says: milliseconds below 0.1 s (never "0.00s") */
        if (l->seconds < 0.1) snprintf(want, sizeof want, " - %.0fms - ", l->seconds * 1e3 < 1 ? 1.0 : l->seconds * 1e3);
        else snprintf(want, sizeof want, " - %.2fs - ", l->seconds);
        CHECK_CONTAINS(line, want);
        CHECK(strstr(line, " - 0.00s - ") == NULL);
    }
    CHECK_EQ_INT(line_no, 3);
    free(text);

    REQUIRE_OK(ftl_read_file(log, &text, &size));
    int records = 0;
    size_t start = 0;
    for (size_t i = 0; i < size; i++) {
        if (text[i] != '\n') continue;
        ftl_json *v = NULL;
        if (ftl_json_parse((const char *)text + start, i - start, &v) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "bad JSONL line: %s", ftl_last_error());
            break;
        }
        double x;
        CHECK(ftl_json_get_number(v, "epoch", &x) && x == records + 1);
        CHECK(ftl_json_get_number(v, "val_acc", &x) && x == h[records].val_acc);
        CHECK(ftl_json_get_number(v, "loss", &x) && x == h[records].loss);
        CHECK(ftl_json_get_number(v, "lr", &x) && x == 0.01);
        CHECK(ftl_json_get_number(v, "images_per_s", &x) && x > 0);
        CHECK(ftl_json_get_number(v, "examples", &x) && x == 192); /* 12 full batches of 16 */
        const ftl_json *t = ftl_json_get(v, "time");
        const char *keys[] = {"data_wait_s", "backbone_s", "head_s", "allreduce_s", "validation_s", "checkpoint_s"};
        for (int k = 0; k < 6; k++) CHECK(ftl_json_get_number(t, keys[k], &x) && x >= 0);
        ftl_json_free(v);
        records++;
        start = i + 1;
    }
    CHECK_EQ_INT(records, 3);
    free(text), free(log), free(lines_path);
    run_free(&r);
}

TEST(train_fit_restores_the_best_epoch_weights) {
    static dataset d;
    make_dataset(&d);
    ftl_fit_config cfg = base_config(6);
    cfg.optimizer.lr = 0.3; /* noisy: the best epoch is usually not the last */
    run full, upto_best;
    REQUIRE_OK(run_fit(&full, &d, &cfg, NULL, true));
    int64_t best = full.result.best_epoch;
    REQUIRE(best >= 1 && best <= 6);
    CHECK(full.result.restored_best);
    /* Training only up to the best epoch, without restoring, gives the same weights. */
    cfg.epochs = best;
    cfg.early_stopping.restore_best = false;
    REQUIRE_OK(run_fit(&upto_best, &d, &cfg, NULL, true));
    ftl_head *a = ftl_trainer_head(full.trainer), *b = ftl_trainer_head(upto_best.trainer);
    CHECK(memcmp(a->params, b->params, a->param_count * sizeof(float)) == 0);
    /* And the reported final metrics are those weights' metrics. */
    ftl_metric_counts vc;
    REQUIRE_OK(ftl_head_evaluate(a, &full.val, 1024, &vc));
    CHECK(ftl_metric_accuracy(&vc) == full.result.final_val_acc);
    CHECK(ftl_metric_loss(&vc) == full.result.final_val_loss);
    printf("  best epoch %lld of 6, val_acc %.4f\n", (long long)best, full.result.final_val_acc);
    run_free(&full);
    run_free(&upto_best);
}

TEST(train_fit_early_stopping_ends_training) {
    static dataset d;
    make_dataset(&d);
    ftl_fit_config cfg = base_config(10);
    cfg.optimizer.lr = 0.0; /* weights never move: val_acc is flat, so patience 2 stops at epoch 3 */
    REQUIRE_OK(ftl_early_stopping_parse("monitor=val_acc,patience=2,min_delta=0.001", &cfg.early_stopping));
    run r;
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    CHECK(r.result.stopped_early);
    CHECK_EQ_INT(r.result.epochs_run, 3);
    CHECK_EQ_INT(r.result.best_epoch, 1);
    run_free(&r);
    /* Monitoring a validation metric without validation data is an error, not a silent no-op. */
    ftl_status s = run_fit(&r, &d, &cfg, NULL, false);
    CHECK(s == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "monitors val_acc but there is no validation data");
    run_free(&r);
}

TEST(train_fit_rejects_bad_configuration) {
    ftl_fit_config cfg = base_config(3);
    ftl_trainer *t = NULL;
    cfg.batch_size = 0;
    CHECK(ftl_trainer_init(&t, &cfg, DIM, CLASSES) == FTL_E_INVALID_ARG);
    cfg = base_config(3);
    cfg.checkpoint_pattern = "ckpt/{step}.ckpt";
    CHECK(ftl_trainer_init(&t, &cfg, DIM, CLASSES) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "unknown field at \"{step}");
    cfg = base_config(3);
    cfg.lr_scaling = FTL_LR_SCALE_LINEAR;
    CHECK(ftl_trainer_init(&t, &cfg, DIM, CLASSES) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "--base-batch");
    cfg = base_config(3);
    cfg.batch_size = 500; /* more than the 200 examples, remainders dropped: no batch at all */
    static dataset d;
    make_dataset(&d);
    run r;
    CHECK(run_fit(&r, &d, &cfg, NULL, true) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "200 training examples make no full batch of 500");
    run_free(&r);
    cfg.drop_remainder = false; /* Keras-style: one partial batch */
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    const ftl_epoch_log *h;
    REQUIRE(ftl_trainer_history(r.trainer, &h) == 3);
    CHECK_EQ_INT(h[0].steps, 1);
    CHECK_EQ_INT(h[0].examples, 200);
    run_free(&r);
    char *p = ftl_train_expand_pattern("ckpt/e{epoch:03d}-{epoch}.ckpt", 7);
    CHECK_STR_EQ(p, "ckpt/e007-7.ckpt");
    free(p);
}

/* A fake 2-rank world inside one process: this rank holds every row of each global batch and
 * the "other rank" none, so its allreduce contributions are zeros. The trainer must then give
 * exactly the single-process run with the global batch: --batch 16 on 2 ranks = --batch 32 on 1
 * (the gradient is the global batch's sum over rows / its row count, dropout keyed by rows). */
typedef struct fake_world {
    int f32_calls, f64_calls, bcast_calls;
} fake_world;

static ftl_status fake_sum_f32(void *ctx, float *x, size_t n) {
    (void)x, (void)n;
    ((fake_world *)ctx)->f32_calls++;
    return FTL_OK;
}
static ftl_status fake_sum_f64(void *ctx, double *x, size_t n) {
    (void)x, (void)n;
    ((fake_world *)ctx)->f64_calls++;
    return FTL_OK;
}
static ftl_status fake_broadcast(void *ctx, void *data, size_t bytes, int root) {
    (void)data, (void)bytes, (void)root;
    ((fake_world *)ctx)->bcast_calls++;
    return FTL_OK;
}

/* The global batch of 2 x max rows, all of them on this rank. */
typedef struct all_rows_source {
    ftl_batch_source inner;
} all_rows_source;

static ftl_status all_rows_next(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    all_rows_source *a = ctx;
    FTL_TRY(a->inner.next_batch(a->inner.ctx, 2 * max_count, wrap, out));
    out->global_count = out->count;
    return FTL_OK;
}
static ftl_status all_rows_begin(void *ctx) {
    all_rows_source *a = ctx;
    return a->inner.begin_pass(a->inner.ctx);
}

TEST(train_fit_global_batch_over_ranks_equals_one_process) {
    static dataset d;
    make_dataset(&d);
    ftl_fit_config cfg = base_config(2);
    cfg.batch_size = 32;
    run single;
    REQUIRE_OK(run_fit(&single, &d, &cfg, NULL, true));
    fake_world w = {0};
    cfg.batch_size = 16;
    cfg.collectives = (ftl_collectives){.ctx = &w, .rank = 0, .world_size = 2, .allreduce_f32 = fake_sum_f32,
                                        .allreduce_f64 = fake_sum_f64, .broadcast = fake_broadcast};
    run pair;
    memset(&pair, 0, sizeof pair);
    REQUIRE_OK(ftl_memory_source_init(&pair.train_mem, d.train_x, d.train_y, NTRAIN, DIM, true, 11));
    REQUIRE_OK(ftl_memory_source_init(&pair.val_mem, d.val_x, d.val_y, NVAL, DIM, false, 0));
    all_rows_source wrapped = {.inner = ftl_memory_source_as_batch_source(&pair.train_mem)};
    pair.train = (ftl_batch_source){.ctx = &wrapped, .size = wrapped.inner.size, .begin_pass = all_rows_begin,
                                    .next_batch = all_rows_next};
    pair.val = ftl_memory_source_as_batch_source(&pair.val_mem);
    REQUIRE_OK(ftl_trainer_init(&pair.trainer, &cfg, DIM, CLASSES));
    REQUIRE_OK(ftl_trainer_fit(pair.trainer, &pair.train, &pair.val, &pair.result));
    CHECK_EQ_INT(w.bcast_calls, 1);        /* rank 0's initial weights */
    CHECK_EQ_INT(w.f32_calls, 2 * 6);      /* one allreduce per step: floor(200 / 32) steps */
    CHECK_EQ_INT(w.f64_calls, 2 * 2);      /* train and validation counts per epoch */
    ftl_head *a = ftl_trainer_head(single.trainer), *b = ftl_trainer_head(pair.trainer);
    CHECK(memcmp(a->params, b->params, a->param_count * sizeof(float)) == 0);
    const ftl_epoch_log *ha, *hb;
    ftl_trainer_history(single.trainer, &ha);
    ftl_trainer_history(pair.trainer, &hb);
    CHECK(ha[1].loss == hb[1].loss && ha[1].val_acc == hb[1].val_acc);
    CHECK_EQ_INT(hb[1].steps, ha[1].steps);
    run_free(&single);
    run_free(&pair);
}

TEST(train_memory_source_passes_and_positions) {
    static dataset d;
    make_dataset(&d);
    ftl_memory_source m;
    REQUIRE_OK(ftl_memory_source_init(&m, d.train_x, d.train_y, NTRAIN, DIM, true, 5));
    ftl_batch_source s = ftl_memory_source_as_batch_source(&m);
    /* One pass visits every example once; the last batch is partial without wrap. */
    REQUIRE_OK(s.begin_pass(s.ctx));
    int seen[NTRAIN] = {0}, total = 0, batches = 0;
    for (;;) {
        ftl_feature_batch b;
        REQUIRE_OK(s.next_batch(s.ctx, 64, false, &b));
        if (b.count == 0) break;
        batches++;
        for (size_t i = 0; i < b.count; i++) {
            /* find the example by its features (rows are distinct) */
            for (int k = 0; k < NTRAIN; k++)
                if (memcmp(b.features + i * DIM, d.train_x + k * DIM, DIM * sizeof(float)) == 0 && b.labels[i] == d.train_y[k]) {
                    seen[k]++;
                    break;
                }
        }
        total += (int)b.count;
    }
    CHECK_EQ_INT(total, NTRAIN);
    CHECK_EQ_INT(batches, 4); /* 64 + 64 + 64 + 8 */
    for (int k = 0; k < NTRAIN; k++) CHECK_EQ_INT(seen[k], 1);
    /* Position mid-pass: save, read on, restore into a fresh source, read the same batches. */
    REQUIRE_OK(s.begin_pass(s.ctx));
    ftl_feature_batch b;
    REQUIRE_OK(s.next_batch(s.ctx, 50, true, &b));
    uint8_t *blob;
    size_t blob_size;
    REQUIRE_OK(s.save_position(s.ctx, &blob, &blob_size));
    float expect[3][64 * DIM];
    for (int i = 0; i < 3; i++) { /* crosses into the next (reshuffled) pass */
        REQUIRE_OK(s.next_batch(s.ctx, 64, true, &b));
        REQUIRE(b.count == 64);
        memcpy(expect[i], b.features, 64 * DIM * sizeof(float));
    }
    ftl_memory_source m2;
    REQUIRE_OK(ftl_memory_source_init(&m2, d.train_x, d.train_y, NTRAIN, DIM, true, 999));
    ftl_batch_source s2 = ftl_memory_source_as_batch_source(&m2);
    REQUIRE_OK(s2.restore_position(s2.ctx, blob, blob_size));
    for (int i = 0; i < 3; i++) {
        REQUIRE_OK(s2.next_batch(s2.ctx, 64, true, &b));
        CHECK(b.count == 64 && memcmp(expect[i], b.features, 64 * DIM * sizeof(float)) == 0);
    }
    /* A position from another dataset size is refused. */
    ftl_memory_source m3;
    REQUIRE_OK(ftl_memory_source_init(&m3, d.train_x, d.train_y, NTRAIN - 1, DIM, true, 5));
    ftl_batch_source s3 = ftl_memory_source_as_batch_source(&m3);
    CHECK(s3.restore_position(s3.ctx, blob, blob_size) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "200 training examples, this data has 199");
    free(blob);
    ftl_memory_source_free(&m);
    ftl_memory_source_free(&m2);
    ftl_memory_source_free(&m3);
}

TEST(train_lr_schedule_scaling_and_horovod_warmup) {
    ftl_lr_schedule s = {.lr = 0.001, .scaling = FTL_LR_SCALE_LINEAR, .batch = 64, .base_batch = 16,
                         .warmup_start_factor = -1};
    CHECK_NEAR(ftl_lr_schedule_target(&s), 0.004, 1e-15);
    s.scaling = FTL_LR_SCALE_SQRT;
    CHECK_NEAR(ftl_lr_schedule_target(&s), 0.002, 1e-15);
    /* Horovod's LearningRateWarmupCallback with size ranks: lr = initial_lr / size *
     * (epoch * (size - 1) / warmup_epochs + 1), epoch = e + (b + 1) / steps_per_epoch, where
     * initial_lr is the already scaled lr * size. With k = size our start factor is 1/k. */
    const int size = 4, spe = 10;
    const double warmup = 2.5, lr = 0.001;
    s = (ftl_lr_schedule){.lr = lr, .scaling = FTL_LR_SCALE_LINEAR, .batch = 16 * size, .base_batch = 16,
                          .warmup_epochs = warmup, .steps_per_epoch = spe, .warmup_start_factor = -1};
    double initial_lr = lr * size;
    for (int t = 0; t < 40; t++) {
        double epoch = t / spe + (double)(t % spe + 1) / spe;
        double horovod = epoch < warmup ? initial_lr / size * (epoch * (size - 1) / warmup + 1) : initial_lr;
        CHECK_NEAR(ftl_lr_schedule_at(&s, t), horovod, 1e-15);
    }
    /* Without scaling, warmup ramps from lr / W_steps to lr. */
    s.scaling = FTL_LR_SCALE_NONE;
    CHECK_NEAR(ftl_lr_schedule_at(&s, 0), lr / 25.0, 1e-15);
    CHECK_NEAR(ftl_lr_schedule_at(&s, 12), lr * 13.0 / 25.0, 1e-15);
    CHECK_NEAR(ftl_lr_schedule_at(&s, 24), lr, 1e-15);
    CHECK_NEAR(ftl_lr_schedule_at(&s, 1000), lr, 1e-15);
}

TEST(train_model_file_round_trip) {
    const char *dir = ftl_test_scratch_dir();
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, 6, 3));
    ftl_head_init_glorot(&h, 9);
    h.bias[1] = 0.5f;
    char *path = ftl_format("%s/MODEL.ftl", dir);
    ftl_kv meta[] = {{FTL_MODEL_META_CLASSES, "[\"ants\",\"bees\",\"caf\\u00e9\"]"},
                     {FTL_MODEL_META_BACKBONE_PATH, "models/resnet.onnx"},
                     {FTL_MODEL_META_INPUT_SCALING, "x/127.5-1"},
                     {FTL_MODEL_META_METRICS, "{\"val_acc\":0.9}"}};
    REQUIRE_OK(ftl_classifier_save(path, &h, meta, 4));
    ftl_classifier m;
    REQUIRE_OK(ftl_classifier_load(path, &m));
    CHECK_EQ_INT(m.head.dim, 6);
    CHECK_EQ_INT(m.head.classes, 3);
    CHECK(memcmp(m.head.params, h.params, h.param_count * sizeof(float)) == 0);
    CHECK_STR_EQ(m.class_names[2], "caf\xc3\xa9");
    CHECK_STR_EQ(ftl_classifier_metadata(&m, FTL_MODEL_META_INPUT_SCALING), "x/127.5-1");
    CHECK_STR_EQ(ftl_classifier_metadata(&m, FTL_MODEL_META_FORMAT), FTL_MODEL_FORMAT);
    CHECK_STR_EQ(ftl_classifier_metadata(&m, FTL_MODEL_META_FEATURE_DIM), "6");
    ftl_classifier_free(&m);
    /* Class names must match the head; a plain safetensors file is not a model. */
    meta[0].value = "[\"ants\",\"bees\"]";
    CHECK(ftl_classifier_save(path, &h, meta, 1) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "2 class names for a head with 3 classes");
    char *plain = ftl_format("%s/plain.safetensors", dir);
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    int64_t shape[1] = {3};
    ftl_safetensors_writer_add(w, "head.bias", FTL_DTYPE_F32, 1, shape, h.bias);
    REQUIRE_OK(ftl_safetensors_writer_write(w, plain));
    ftl_safetensors_writer_free(w);
    CHECK(ftl_classifier_load(plain, &m) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "not an ftl model");
    ftl_head_free(&h);
    free(path), free(plain);
}

/* Rewrites a checkpoint with one metadata value replaced (everything else copied). */
static ftl_status rewrite_metadata(const char *from, const char *to, const char *key, const char *value) {
    ftl_safetensors *st;
    FTL_TRY(ftl_safetensors_open(from, &st));
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    for (size_t i = 0; i < ftl_safetensors_tensor_count(st); i++) {
        const ftl_safetensors_tensor *t = ftl_safetensors_tensor_at(st, i);
        ftl_safetensors_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    for (size_t i = 0; i < ftl_safetensors_metadata_count(st); i++) {
        ftl_kv kv = ftl_safetensors_metadata_at(st, i);
        ftl_safetensors_writer_set_metadata(w, kv.key, strcmp(kv.key, key) == 0 ? value : kv.value);
    }
    ftl_status s = ftl_safetensors_writer_write(w, to);
    ftl_safetensors_writer_free(w);
    ftl_safetensors_close(st);
    return s;
}

TEST(train_fit_keep_last_survives_resume_and_never_deletes_foreign_files) {
    static dataset d;
    make_dataset(&d);
    const char *dir = ftl_test_scratch_dir();
    char *pattern = ftl_format("%s/k-{epoch}.ckpt", dir), *victim = ftl_format("%s/precious.txt", dir);
    FILE *f = fopen(victim, "w");
    REQUIRE(f);
    fputs("not a checkpoint\n", f);
    fclose(f);
    ftl_fit_config cfg = base_config(3);
    cfg.checkpoint_pattern = pattern;
    cfg.keep_last = 2;
    run r;
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    run_free(&r);
    for (int e = 1; e <= 3; e++) CHECK(checkpoint_exists(dir, e) == (e >= 2));
    /* The checkpoint's list of files now also names an unrelated file. */
    char *k3 = ftl_format("%s/k-3.ckpt", dir), *doctored = ftl_format("%s/doctored.ckpt", dir);
    char *list = ftl_format("[\"%s\",\"%s/k-2.ckpt\",\"%s\"]", victim, dir, k3);
    REQUIRE_OK(rewrite_metadata(k3, doctored, "ftl.checkpoints", list));
    cfg.epochs = 5;
    REQUIRE_OK(run_fit(&r, &d, &cfg, doctored, true));
    run_free(&r);
    for (int e = 1; e <= 5; e++) CHECK(checkpoint_exists(dir, e) == (e >= 4));
    CHECK(ftl_path_exists(victim));
    free(pattern), free(victim), free(k3), free(doctored), free(list);
}

/* A kill between a checkpoint's write and --keep-last's deletions leaves the oldest file: the
 * checkpoint records that deletion as owed (and its run's id), and a resume finishes it, but only
 * for a file whose own header shows it to be a checkpoint of this run. */
TEST(train_fit_resume_finishes_owed_deletions_of_its_own_run_only) {
    static dataset d;
    make_dataset(&d);
    const char *dir = ftl_test_scratch_dir();
    char *pattern = ftl_format("%s/o-{epoch}.ckpt", dir);
    char *c1 = ftl_format("%s/o-1.ckpt", dir), *c2 = ftl_format("%s/o-2.ckpt", dir), *c3 = ftl_format("%s/o-3.ckpt", dir);
    ftl_fit_config cfg = base_config(3);
    cfg.checkpoint_pattern = pattern;
    cfg.keep_last = 2;
    run r;
    REQUIRE_OK(run_fit(&r, &d, &cfg, NULL, true));
    run_free(&r);
    CHECK(!ftl_path_exists(c1) && ftl_path_exists(c2) && ftl_path_exists(c3));
    /* what o-3 records: o-1's deletion, owed when it was written, and one run id in both files */
    ftl_safetensors *s2, *s3;
    REQUIRE_OK(ftl_safetensors_open(c2, &s2));
    REQUIRE_OK(ftl_safetensors_open(c3, &s3));
    char *owed = ftl_format("[\"%s\"]", c1);
    CHECK_STR_EQ(ftl_safetensors_metadata(s3, FTL_CHECKPOINT_META_TO_DELETE), owed);
    CHECK_STR_EQ(ftl_safetensors_metadata(s2, FTL_CHECKPOINT_META_TO_DELETE), "[]");
    const char *id = ftl_safetensors_metadata(s3, FTL_CHECKPOINT_META_RUN_ID);
    CHECK(ftl_checkpoint_run_id_valid(id));
    CHECK_STR_EQ(ftl_safetensors_metadata(s2, FTL_CHECKPOINT_META_RUN_ID), id);
    ftl_safetensors_close(s2);
    ftl_safetensors_close(s3);
    /* o-1 as the kill left it (a checkpoint of this run): the resume deletes it, even with no epoch left */
    REQUIRE_OK(rewrite_metadata(c2, c1, "no.such.key", ""));
    REQUIRE_OK(run_fit(&r, &d, &cfg, c3, true));
    run_free(&r);
    CHECK(!ftl_path_exists(c1) && ftl_path_exists(c2) && ftl_path_exists(c3));
    /* another run's checkpoint under that name, or a file that is no checkpoint: kept */
    REQUIRE_OK(rewrite_metadata(c2, c1, FTL_CHECKPOINT_META_RUN_ID, "0123456789abcdef0123456789abcdef"));
    REQUIRE_OK(run_fit(&r, &d, &cfg, c3, true));
    run_free(&r);
    CHECK(ftl_path_exists(c1));
    FILE *f = fopen(c1, "w");
    REQUIRE(f);
    fputs("notes, not a checkpoint\n", f);
    fclose(f);
    REQUIRE_OK(run_fit(&r, &d, &cfg, c3, true));
    run_free(&r);
    CHECK(ftl_path_exists(c1));
    /* the run goes on: later epochs delete o-2 and o-3 (its own), never the foreign o-1 */
    cfg.epochs = 5;
    REQUIRE_OK(run_fit(&r, &d, &cfg, c3, true));
    run_free(&r);
    char *c4 = ftl_format("%s/o-4.ckpt", dir), *c5 = ftl_format("%s/o-5.ckpt", dir);
    CHECK(ftl_path_exists(c1) && !ftl_path_exists(c2) && !ftl_path_exists(c3));
    CHECK(ftl_path_exists(c4) && ftl_path_exists(c5));
    free(pattern), free(c1), free(c2), free(c3), free(c4), free(c5), free(owed);
}

/* A fine-tuned model: its backbone tensors round-trip bit-exactly under their ONNX names, the file
 * says ftl-model-2 so a reader of ftl-model-1 refuses it (as this reader refuses a format newer than
 * it knows), and a file whose tensors and metadata disagree is refused. */
TEST(train_model_file_with_fine_tuned_tensors) {
    const char *dir = ftl_test_scratch_dir();
    ftl_head h;
    REQUIRE_OK(ftl_head_init(&h, 4, 2));
    ftl_head_init_glorot(&h, 3);
    float w[6] = {0.5f, -1.25f, 3.0f, 1e-7f, -0.0f, 42.0f}, b[2] = {0.125f, -8.0f};
    ftl_tensor_override tuned[2] = {{"MobilenetV2/Conv_1/Relu6/W", w, 6}, {"bn.scale", b, 2}};
    ftl_kv meta[] = {{FTL_MODEL_META_CLASSES, "[\"ants\",\"bees\"]"}};
    char *path = ftl_format("%s/TUNED.ftl", dir), *newer = ftl_format("%s/newer.ftl", dir);
    char *wrong = ftl_format("%s/wrong_count.ftl", dir);
    REQUIRE_OK(ftl_classifier_save_tuned(path, &h, meta, 1, tuned, 2));
    ftl_classifier m;
    REQUIRE_OK(ftl_classifier_load(path, &m));
    CHECK_STR_EQ(ftl_classifier_metadata(&m, FTL_MODEL_META_FORMAT), FTL_MODEL_FORMAT_TUNED);
    CHECK_EQ_INT(m.n_tuned, 2);
    for (int k = 0; k < m.n_tuned && k < 2; k++) {
        int j = strcmp(m.tuned[k].name, tuned[0].name) == 0 ? 0 : 1;
        CHECK_STR_EQ(m.tuned[k].name, tuned[j].name);
        CHECK_EQ_INT(m.tuned[k].count, tuned[j].count);
        CHECK(m.tuned[k].count == tuned[j].count &&
              memcmp(m.tuned[k].data, tuned[j].data, (size_t)tuned[j].count * sizeof(float)) == 0);
    }
    CHECK(memcmp(m.head.params, h.params, h.param_count * sizeof(float)) == 0);
    ftl_classifier_free(&m);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE_OK(ftl_trained_file_describe(path, f, false)); /* ftl inspect MODEL.ftl */
    fclose(f);
    CHECK_CONTAINS(text, "ftl model (ftl-model-2)");
    CHECK_CONTAINS(text, "fine-tuned: 2 tensors (8 values)");
    free(text);
    /* without tuned tensors the file is exactly a frozen-backbone model */
    REQUIRE_OK(ftl_classifier_save_tuned(path, &h, meta, 1, NULL, 0));
    REQUIRE_OK(ftl_classifier_load(path, &m));
    CHECK_STR_EQ(ftl_classifier_metadata(&m, FTL_MODEL_META_FORMAT), FTL_MODEL_FORMAT);
    CHECK_EQ_INT(m.n_tuned, 0);
    ftl_classifier_free(&m);
    REQUIRE_OK(ftl_classifier_save_tuned(path, &h, meta, 1, tuned, 2));
    REQUIRE_OK(rewrite_metadata(path, newer, FTL_MODEL_META_FORMAT, "ftl-model-3"));
    CHECK(ftl_classifier_load(newer, &m) == FTL_E_UNSUPPORTED);
    CHECK_CONTAINS(ftl_last_error(), "written by a newer ftl?");
    REQUIRE_OK(rewrite_metadata(path, wrong, FTL_MODEL_META_TUNED_COUNT, "3"));
    CHECK(ftl_classifier_load(wrong, &m) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "2 fine-tuned backbone tensors, but the file says 3");
    REQUIRE_OK(rewrite_metadata(path, wrong, FTL_MODEL_META_FORMAT, FTL_MODEL_FORMAT));
    CHECK(ftl_classifier_load(wrong, &m) == FTL_E_FORMAT); /* tuned tensors in a frozen-format file */
    ftl_head_free(&h);
    free(path);
    free(newer);
    free(wrong);
}
