/* ftl sweep TRAIN --val VAL --backbone MODEL.onnx --out BEST.ftl --grid lr=1e-3,4e-3 ...: trials of
 * `ftl train` over a search space. The library parses the command line (ftl_sweep_args_parse: every
 * option that is not the sweep's own goes to each trial's ftl train parser), so each trial's model is
 * the one `ftl train` alone gives with its settings, byte for byte. The library's runner trains them
 * on features embedded once, in stacks sharing batches (ftl_sweep_run); what it cannot stack
 * (fine-tuning, a GPU head, ...) runs as one ftl_train_run per trial, and --fine-tune-top stacks
 * phase 1 and fine-tunes the best K here. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct trial_result {
    int id;
    ftl_sweep_trial settings;
    double val_acc, val_loss, acc, loss, seconds;
    long long best_epoch, epochs_run, halted_at;
    int rank; /* the rank that trained it (under mpirun its files are on that rank's host) */
    char *model;
    bool fine_tuned;     /* --fine-tune-top: one of the K best of phase 1, then fine-tuned */
    double head_val_acc; /* its phase 1's val_acc */
} trial_result;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether a setting is a word (quoted in JSON), not a number. */
static bool text_setting(int p) { return p == FTL_SWEEP_OPTIMIZER || p == FTL_SWEEP_LR_SCHEDULE || p == FTL_SWEEP_TTA; }

static void setting_text(const ftl_sweep_trial *t, int p, char *buf, size_t size) {
    ftl_sweep_setting_text(t, (ftl_sweep_param)p, buf, size);
}

/* The table's order: the early-stopping monitor's (val_acc by default), best first, without --val its
 * training counterpart; ties by the other metric of the pair (accuracy by loss, loss by accuracy),
 * then by trial number. */
static ftl_monitor table_monitor = FTL_MONITOR_VAL_ACC;

static int by_monitor(const void *a, const void *b) {
    const trial_result *x = a, *y = b;
    if (x->fine_tuned != y->fine_tuned) return x->fine_tuned ? -1 : 1; /* --fine-tune-top: BEST is fine-tuned */
    double ax = isnan(x->val_acc) ? x->acc : x->val_acc, ay = isnan(y->val_acc) ? y->acc : y->val_acc;
    double lx = isnan(x->val_loss) ? x->loss : x->val_loss, ly = isnan(y->val_loss) ? y->loss : y->val_loss;
    bool by_loss = table_monitor == FTL_MONITOR_VAL_LOSS || table_monitor == FTL_MONITOR_LOSS;
    if (by_loss && lx != ly) return lx < ly ? -1 : 1;
    if (ax != ay) return ax > ay ? -1 : 1;
    if (!by_loss && lx != ly) return lx < ly ? -1 : 1;
    return x->id - y->id;
}

/* The sweep's own files (its table, its arguments): rewritten by each run of the sweep, as ftl writes
 * every output (a temporary, locked while written, then renamed). */
static int write_whole(const char *path, const char *text, size_t size) {
    ftl_status st = ftl_output_write(path, text, size, true);
    if (st != FTL_OK) fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
    return st == FTL_OK ? 0 : 1;
}

/* What the command works with: the parsed command line, and the trials' phase 1 options when
 * --fine-tune-top trains phase 1 apart from phase 2. */
typedef struct sweep_cli {
    ftl_sweep_args a;
    ftl_train_options *opts; /* what the runner trains: a.trial_options, or their phase 1 */
    bool stacked;
    char why[512]; /* why the trials cannot be stacked */
} sweep_cli;

static const cli_command sweep_command = {
    "sweep", "ftl sweep TRAIN --val VAL --backbone MODEL.onnx --out BEST.ftl --grid NAME=V1,V2 ... [ftl train options]",
    "Trains the head for every point of a search space (ftl train's options, not swept, apply to all\n"
    "trials; each trial's model equals ftl train's alone), embedding the images once, and keeps the\n"
    "best by the early-stopping monitor (val_acc by default). Trials with the same batch size and\n"
    "dropout train together over shared batches\n"
    "(a stack), stacks in parallel, one per core.",
    0, 0};

/* A refused command line, worded as before the parser moved into the library: the exit code. */
static int parse_failure(const ftl_sweep_args *a, ftl_status st) {
    switch (a->failure) {
    case FTL_SWEEP_ARGS_USAGE: return cli_usage_error(&sweep_command);
    case FTL_SWEEP_ARGS_NO_DATASET:
        fprintf(stderr, "ftl sweep: error: missing the training dataset\nusage: %s\n", sweep_command.usage);
        return 2;
    case FTL_SWEEP_ARGS_TRIAL: {
        int rc = cli_train_parse_error(st);
        fprintf(stderr, "ftl sweep: error: trial %d (%s) is not a valid ftl train run\n", a->failed_trial,
                a->labels[a->failed_trial - 1]);
        return rc;
    }
    default: fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error()); return 2;
    }
}

/* The checks between parsed trials and work: paths, stacking, --resume's folder; makes the folder. */
static int check_sweep(sweep_cli *c) {
    if (ftl_sweep_check_paths(c->opts, c->a.count, c->a.out, c->a.table_path, c->a.json_path, c->a.log_path) != FTL_OK) {
        fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
        return 2;
    }
    table_monitor = c->opts[0].fit.early_stopping.monitor;
    c->why[0] = 0;
    c->stacked = ftl_sweep_stackable(c->opts, c->a.count, c->why, sizeof c->why);
    if (c->a.fine_tune_top > 0 && !c->stacked) {
        fprintf(stderr, "ftl sweep: error: --fine-tune-top trains phase 1 of the trials together on the shared boundary "
                        "rows, and these cannot be: %s\n", c->why);
        return 2;
    }
    if (c->a.fine_tune_top > 0 && ftl_dist_size(ftl_dist_world()) > 1) {
        fprintf(stderr, "ftl sweep: error: --fine-tune-top runs in one process (phase 2 starts from the trial models, "
                        "which stay on the host that trained them): run the sweep without mpirun\n");
        return 2;
    }
    if (!c->stacked && (c->a.halving || c->a.resume || c->a.log_path)) {
        fprintf(stderr, "ftl sweep: error: --halving, --resume and --log need the trials trained together, and these "
                        "cannot be: %s\n", c->why);
        return 2;
    }
    if (c->a.resume && access(c->a.dir, F_OK) != 0) {
        fprintf(stderr, "ftl sweep: error: --resume: there is no sweep in %s to continue\n", c->a.dir);
        return 2;
    }
    if (mkdir(c->a.dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ftl sweep: error: cannot make %s: %s\n", c->a.dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* The sweep's command line (less --resume and --overwrite), one argument a line. */
static char *args_text_of(int argc, char **argv, size_t *args_len) {
    *args_len = 1;
    for (int i = 1; i < argc; i++) *args_len += strlen(argv[i]) + 1;
    char *text = calloc(*args_len, 1);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--resume") != 0 && strcmp(argv[i], "--overwrite") != 0) strcat(strcat(text, argv[i]), "\n");
    return text;
}

/* The command line beside the trials: --resume continues only the same sweep. */
static int record_or_compare_args(const sweep_cli *c, const char *args_text, size_t args_len) {
    char *args_path = malloc(strlen(c->a.dir) + 16);
    sprintf(args_path, "%s/sweep.args", c->a.dir);
    int failed = 0;
    if (c->a.resume) {
        FILE *f = fopen(args_path, "rb");
        char *before = calloc(args_len + 2, 1);
        size_t got = f ? fread(before, 1, args_len + 1, f) : 0;
        if (f) fclose(f);
        if (!f || got != strlen(args_text) || memcmp(before, args_text, got) != 0) {
            fprintf(stderr, "ftl sweep: error: --resume continues the same sweep, but %s %s; run it with the same options "
                            "(or without --resume and with --overwrite to start again)\n",
                    args_path, f ? "records other options" : "is missing");
            failed = 2;
        }
        free(before);
    } else if (c->stacked) {
        failed = write_whole(args_path, args_text, strlen(args_text));
    }
    free(args_path);
    return failed;
}

/* A trial's settings as a JSON object ({"lr":0.001,"optimizer":"sgd"}). */
static char *settings_json(const ftl_sweep_trial *trial) {
    size_t cap = 64 + FTL_SWEEP_PARAM_COUNT * 96, n = 0;
    char *json = malloc(cap);
    n += (size_t)snprintf(json + n, cap - n, "{");
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
        if (!trial->set[p]) continue;
        char v[FTL_SWEEP_TEXT_MAX];
        setting_text(trial, p, v, sizeof v);
        bool text = text_setting(p);
        n += (size_t)snprintf(json + n, cap - n, "%s\"%s\":%s%s%s", n > 1 ? "," : "",
                              ftl_sweep_param_name((ftl_sweep_param)p), text ? "\"" : "", v, text ? "\"" : "");
    }
    snprintf(json + n, cap - n, "}");
    return json;
}

/* The log's first line: the sweep, its trial count, halving and command. */
static char *sweep_record(int argc, char **argv, int count, int halving, size_t args_len) {
    size_t record_cap = 256 + args_len * 2;
    char *record = malloc(record_cap);
    size_t n = (size_t)snprintf(record, record_cap, "{\"record\":\"sweep\",\"trials\":%d,\"halving\":%d,\"command\":[\"ftl\"",
                                count, halving);
    for (int i = 0; i < argc && n < record_cap; i++) {
        n += (size_t)snprintf(record + n, record_cap - n, ",\"");
        for (const char *ch = argv[i]; *ch && n + 8 < record_cap; ch++) {
            if (*ch == '"' || *ch == '\\') record[n++] = '\\';
            record[n++] = (unsigned char)*ch < 0x20 ? ' ' : *ch;
        }
        n += (size_t)snprintf(record + n, record_cap - n, "\"");
    }
    snprintf(record + n, record_cap - n, "]}");
    return record;
}

/* The trials: stacked by the library's runner, or one ftl_train_run each. 0, or the exit code. */
static int run_trials(const sweep_cli *c, const char *record, char **settings, bool rank0, ftl_sweep_trial_result *out_res) {
    if (c->stacked) {
        ftl_sweep_run_options ro;
        ftl_sweep_run_options_init(&ro);
        ro.threads = c->a.workers;
        ro.stack_size = c->a.stack_size;
        ro.halving_eta = c->a.halving;
        ro.checkpoints = c->a.checkpoints;
        ro.resume = c->a.resume;
        ro.log_path = c->a.log_path;
        ro.log_record = record;
        ro.settings_json = (const char *const *)settings;
        ro.progress = rank0 ? stdout : NULL;
        ro.labels = (const char *const *)c->a.labels;
        if (c->a.fine_tune_top > 0) ro.through_cut = &c->a.trial_options[0].fine_tune; /* phase 1 of the cut */
        ftl_status st = ftl_sweep_run(c->opts, c->a.count, &ro, out_res);
        if (st != FTL_OK) {
            fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
            fprintf(stderr, "ftl sweep: the trials that ended are in %s\n", c->a.dir);
            return cli_report(st);
        }
        return 0;
    }
    for (int t = 0; t < c->a.count; t++) {
        if (rank0) printf("sweep: trial %d/%d: %s\n", t + 1, c->a.count, c->a.labels[t]);
        fflush(stdout);
        ftl_train_summary sum;
        double t0 = now_seconds();
        ftl_status st = ftl_train_run(&c->opts[t], &sum);
        if (st != FTL_OK) { /* the sweep stops with it (the settings are checked alike) */
            fprintf(stderr, "ftl sweep: error: trial %d: %s\n", t + 1, ftl_last_error());
            fprintf(stderr, "ftl sweep: the trials before it are in %s\n", c->a.dir);
            return cli_report(st);
        }
        out_res[t] = (ftl_sweep_trial_result){.done = true, .fit = sum.fit, .seconds = now_seconds() - t0};
    }
    return 0;
}

/* The table, CSV and JSON, every swept setting a column; res sorted best first. */
static void results_table(const sweep_cli *c, const trial_result *res, char **csv_out, size_t *nc_out, char **json_out,
                          size_t *nj_out) {
    size_t cap = 4096 + (size_t)c->a.count * 512;
    char *csv = malloc(cap), *json = malloc(cap);
    size_t nc = 0, nj = 0;
    nc += (size_t)snprintf(csv + nc, cap - nc, "rank,trial");
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++)
        if (c->a.trials[0].set[p]) nc += (size_t)snprintf(csv + nc, cap - nc, ",%s", ftl_sweep_param_name((ftl_sweep_param)p));
    bool ft = c->a.fine_tune_top > 0; /* two more columns: whether fine-tuned, and phase 1's val_acc */
    nc += (size_t)snprintf(csv + nc, cap - nc, ",best_epoch,epochs,halted_at,val_acc,val_loss,acc,loss,seconds,model%s\n",
                           ft ? ",fine_tuned,head_val_acc" : "");
    nj += (size_t)snprintf(json + nj, cap - nj, "[\n");
    for (int i = 0; i < c->a.count; i++) {
        const trial_result *r = &res[i];
        nc += (size_t)snprintf(csv + nc, cap - nc, "%d,%d", i + 1, r->id);
        nj += (size_t)snprintf(json + nj, cap - nj, "  {\"rank\": %d, \"trial\": %d, \"settings\": {", i + 1, r->id);
        bool first = true;
        for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
            if (!r->settings.set[p]) continue;
            char v[FTL_SWEEP_TEXT_MAX];
            setting_text(&r->settings, p, v, sizeof v);
            nc += (size_t)snprintf(csv + nc, cap - nc, ",%s", v);
            nj += (size_t)snprintf(json + nj, cap - nj, "%s\"%s\": %s%s%s", first ? "" : ", ",
                                   ftl_sweep_param_name((ftl_sweep_param)p), text_setting(p) ? "\"" : "", v,
                                   text_setting(p) ? "\"" : "");
            first = false;
        }
        nc += (size_t)snprintf(csv + nc, cap - nc, ",%lld,%lld,%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%s", r->best_epoch,
                               r->epochs_run, r->halted_at, r->val_acc, r->val_loss, r->acc, r->loss, r->seconds, r->model);
        if (ft) nc += (size_t)snprintf(csv + nc, cap - nc, ",%d,%.6f", r->fine_tuned, r->fine_tuned ? r->head_val_acc : r->val_acc);
        nc += (size_t)snprintf(csv + nc, cap - nc, "\n");
        nj += (size_t)snprintf(json + nj, cap - nj,
                               "}, \"best_epoch\": %lld, \"epochs\": %lld, \"halted_at\": %lld, \"val_acc\": %.9g, "
                               "\"val_loss\": %.9g, \"acc\": %.9g, \"loss\": %.9g, \"seconds\": %.3f, \"model\": \"%s\"",
                               r->best_epoch, r->epochs_run, r->halted_at, r->val_acc, r->val_loss, r->acc, r->loss, r->seconds,
                               r->model);
        if (ft)
            nj += (size_t)snprintf(json + nj, cap - nj, ", \"fine_tuned\": %s, \"head_val_acc\": %.9g",
                                   r->fine_tuned ? "true" : "false", r->fine_tuned ? r->head_val_acc : r->val_acc);
        nj += (size_t)snprintf(json + nj, cap - nj, "}%s\n", i + 1 < c->a.count ? "," : "");
    }
    nj += (size_t)snprintf(json + nj, cap - nj, "]\n");
    *csv_out = csv, *nc_out = nc, *json_out = json, *nj_out = nj;
}

/* The results: the table (rank 0), the best trial's model at --out, and the top ten printed. */
static int publish_results(const sweep_cli *c, trial_result *res, bool rank0) {
    qsort(res, (size_t)c->a.count, sizeof *res, by_monitor);
    char *csv, *json;
    size_t nc, nj;
    results_table(c, res, &csv, &nc, &json, &nj);
    int rc_out = rank0 ? write_whole(c->a.table_path, csv, nc) || write_whole(c->a.json_path, json, nj) : 0;
    /* the best trial's model, from the rank that trained it */
    ftl_status cs = ftl_sweep_copy_model(ftl_dist_world(), res[0].model, res[0].rank, c->a.out, c->a.overwrite || c->a.resume);
    if (cs != FTL_OK) {
        fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
        rc_out = cli_report(cs);
    }
    if (rc_out == 0 && rank0) {
        printf("sweep: %d trials; best: trial %d (val_acc %.4f, val_loss %.4f) -> %s; table %s\n", c->a.count, res[0].id,
               res[0].val_acc, res[0].val_loss, c->a.out, c->a.table_path);
        for (int i = 0; i < c->a.count && i < 10; i++) {
            printf("  %2d. trial %d:", i + 1, res[i].id);
            for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
                if (!res[i].settings.set[p]) continue;
                char v[FTL_SWEEP_TEXT_MAX];
                setting_text(&res[i].settings, p, v, sizeof v);
                printf(" %s=%s", ftl_sweep_param_name((ftl_sweep_param)p), v);
            }
            printf("  val_acc %.4f  val_loss %.4f  best epoch %lld\n", res[i].val_acc, res[i].val_loss, res[i].best_epoch);
        }
    }
    free(csv), free(json);
    return rc_out;
}

/* --fine-tune-top K: phase 2 for the K best trials of phase 1 (res sorted by the monitor), each as
 * `ftl train --fine-tune-only --init` its phase 1 model with the trial's options and phase 1's end as
 * epoch 0, so it equals ftl train's two phases with the trial's settings; over the shared boundary
 * rows. Their results replace phase 1's. 0, or the exit code. */
static int fine_tune_top(const sweep_cli *c, trial_result *res, bool rank0) {
    qsort(res, (size_t)c->a.count, sizeof *res, by_monitor);
    int k = c->a.fine_tune_top < c->a.count ? c->a.fine_tune_top : c->a.count;
    if (rank0) printf("sweep: fine-tuning the %d best trial%s of phase 1\n", k, k == 1 ? "" : "s");
    for (int i = 0; i < k; i++) {
        trial_result *r = &res[i];
        const ftl_train_options *trial = &c->a.trial_options[r->id - 1];
        size_t n = strlen(c->a.dir) + 64;
        char *out = malloc(n), *log = malloc(n);
        snprintf(out, n, "%s/trial-%04d.fine-tuned.ftl", c->a.dir, r->id);
        snprintf(log, n, "%s/trial-%04d.fine-tune.jsonl", c->a.dir, r->id);
        ftl_epoch_log start = {.loss = r->loss, .acc = r->acc, .val_loss = r->val_loss, .val_acc = r->val_acc,
                               .gpu_util_percent = NAN, .gpu_memory_bytes = NAN};
        ftl_train_options o = *trial;
        o.fine_tune_only = true;
        o.init_path = r->model;
        o.fine_tune_start = &start;
        o.out_path = out;
        o.fit.log_path = log;
        o.overwrite = c->a.overwrite || c->a.resume;
        if (rank0) printf("sweep: fine-tuning trial %d (%s; phase 1 val_acc %.4f)\n", r->id, c->a.labels[r->id - 1], r->val_acc);
        fflush(stdout);
        ftl_train_summary sum;
        double t0 = now_seconds();
        ftl_status st = ftl_train_run(&o, &sum);
        free(log);
        if (st != FTL_OK) {
            fprintf(stderr, "ftl sweep: error: fine-tuning trial %d: %s\n", r->id, ftl_last_error());
            free(out);
            return cli_report(st);
        }
        const ftl_fit_result *f = &sum.fit;
        r->head_val_acc = r->val_acc;
        r->fine_tuned = true;
        r->val_acc = f->final_val_acc, r->val_loss = f->final_val_loss, r->acc = f->final_acc, r->loss = f->final_loss;
        r->best_epoch = f->best_epoch, r->epochs_run = f->epochs_run;
        r->seconds += now_seconds() - t0;
        free(r->model);
        r->model = out;
    }
    return 0;
}

/* The parse, then every check before work: 0, or the exit code (-1: help was printed). */
static int prepare_sweep(sweep_cli *c, int argc, char **argv) {
    ftl_status st = ftl_sweep_args_parse(argc, argv, &c->a);
    if (c->a.help_asked) {
        int n;
        const ftl_arg *table = ftl_sweep_arg_table(&n);
        cli_print_help(&sweep_command, table, n);
        printf("\nevery other option is ftl train's (ftl train --help), given to each trial\n");
        return -1;
    }
    if (c->a.quiet) ftl_log_set_level(FTL_LOG_WARN);
    if (st != FTL_OK) return parse_failure(&c->a, st);
    c->opts = c->a.trial_options;
    if (c->a.fine_tune_top > 0) { /* phase 1 alone: the head, on the features through the cut */
        c->opts = calloc((size_t)c->a.count, sizeof *c->opts);
        for (int t = 0; t < c->a.count; t++) {
            c->opts[t] = c->a.trial_options[t];
            memset(&c->opts[t].fine_tune, 0, sizeof c->opts[t].fine_tune);
        }
    }
    return check_sweep(c);
}

int cli_cmd_sweep(int argc, char **argv) {
    sweep_cli c = {0};
    const bool rank0 = ftl_dist_rank(ftl_dist_world()) == 0; /* under mpirun rank 0 prints and writes the table */
    int failed = prepare_sweep(&c, argc, argv);
    if (failed) {
        if (c.opts != c.a.trial_options) free(c.opts);
        ftl_sweep_args_free(&c.a);
        return failed < 0 ? 0 : failed;
    }
    trial_result *res = calloc((size_t)c.a.count, sizeof *res);
    size_t args_len;
    char *args_text = args_text_of(argc, argv, &args_len);
    failed = record_or_compare_args(&c, args_text, args_len);
    /* the log's first line and each trial's settings as JSON */
    char **settings = calloc((size_t)c.a.count, sizeof *settings);
    for (int t = 0; t < c.a.count; t++) settings[t] = settings_json(&c.a.trials[t]);
    char *record = sweep_record(argc, argv, c.a.count, c.a.halving, args_len);
    if (!failed) {
        if (rank0) printf("sweep: %d trials -> %s%s%s\n", c.a.count, c.a.dir, c.stacked ? "" : "; one after the other: ", c.why);
        fflush(stdout);
    }
    ftl_sweep_trial_result *out_res = calloc((size_t)c.a.count, sizeof *out_res);
    if (!failed) failed = run_trials(&c, record, settings, rank0, out_res);
    for (int t = 0; t < c.a.count; t++) free(settings[t]);
    free(settings), free(record), free(args_text);
    for (int t = 0; t < c.a.count; t++) {
        const ftl_fit_result *f = &out_res[t].fit;
        res[t] = (trial_result){.id = t + 1, .settings = c.a.trials[t], .model = strdup(c.opts[t].out_path),
                                .val_acc = f->final_val_acc, .val_loss = f->final_val_loss, .acc = f->final_acc,
                                .loss = f->final_loss, .best_epoch = f->best_epoch, .epochs_run = f->epochs_run,
                                .seconds = out_res[t].seconds, .halted_at = out_res[t].halted_at, .rank = out_res[t].rank,
                                .head_val_acc = NAN};
    }
    free(out_res);
    if (!failed && c.a.fine_tune_top > 0) failed = fine_tune_top(&c, res, rank0);
    int rc_out = failed;
    if (!failed && c.a.count > 0) rc_out = publish_results(&c, res, rank0);
    for (int i = 0; i < c.a.count; i++) free(res[i].model);
    free(res);
    if (c.opts != c.a.trial_options) free(c.opts);
    ftl_sweep_args_free(&c.a);
    return rc_out;
}
