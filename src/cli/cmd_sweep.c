/* ftl sweep TRAIN --val VAL --backbone MODEL.onnx --out BEST.ftl --grid lr=1e-3,4e-3 ...: trials of
 * `ftl train` over a search space. Every option that is not the sweep's own goes to each trial as
 * `ftl train` takes it (each trial's options are parsed by ftl train's own parser), so each trial's
 * model is the one `ftl train` alone gives with its settings, byte for byte. The library's runner
 * trains them on features embedded once, in stacks sharing batches (ftl_sweep_run); what it cannot
 * stack (fine-tuning, mpirun, a GPU head, ...) runs as one ftl_train_run per trial. */
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
} trial_result;

/* One trial's command line for ftl train's parser: the forwarded options, then its own. */
typedef struct trial_args {
    char **argv;
    int argc;
    char model[4096], log[4096];
    char values[FTL_SWEEP_PARAM_COUNT][40];
} trial_args;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void setting_text(const ftl_sweep_trial *t, int p, char *buf, size_t size) {
    if (!t->set[p]) snprintf(buf, size, "%s", "");
    else if (p == FTL_SWEEP_OPTIMIZER) snprintf(buf, size, "%s", ftl_optimizer_kind_name((ftl_optimizer_kind)t->value[p]));
    else snprintf(buf, size, "%.9g", t->value[p]);
}

/* The trial's `ftl train` flags, after the forwarded ones (a later flag wins). */
static int trial_flags(const ftl_sweep_trial *t, char flags[][40], const char **argv_out) {
    static const char *const train_flag[FTL_SWEEP_PARAM_COUNT] = {"--lr", "--dropout", "--batch", "--optimizer",
                                                                  "--momentum", "--warmup-epochs", "--weight-decay"};
    int n = 0;
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
        if (!t->set[p]) continue;
        argv_out[n++] = train_flag[p];
        setting_text(t, p, flags[p], sizeof flags[p]);
        argv_out[n++] = flags[p];
    }
    return n;
}

/* The table's order: the early-stopping monitor's (val_acc by default), best first, without --val its
 * training counterpart; ties by the other metric of the pair (accuracy by loss, loss by accuracy),
 * then by trial number. */
static ftl_monitor table_monitor = FTL_MONITOR_VAL_ACC;

static int by_monitor(const void *a, const void *b) {
    const trial_result *x = a, *y = b;
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

/* The sweep's own options (everything else goes to every trial's `ftl train`) and what is made of
 * them: the trials, their `ftl train` options, and where the results go. */
typedef struct sweep_cli {
    cli_list grids, ranges;
    int random, max_trials, workers, stack_size, halving;
    int64_t search_seed;
    const char *out, *table, *trials_dir, *log_path;
    bool overwrite, help, resume, checkpoints;
    char **own, **rest; /* argv split: the sweep's flags, and the dataset and ftl train's options */
    int n_own, n_rest;
    ftl_sweep_trial *trials;
    int count;
    char *dir, *csv_path, *json_path;
    trial_args *ta;
    ftl_train_options *opts;
    char **labels;
    bool stacked;
    char why[512]; /* why the trials cannot be stacked */
} sweep_cli;

enum { SWEEP_FLAG_COUNT = 15 };

static void sweep_flags(sweep_cli *c, cli_flag *out) {
    const cli_flag flags[] = {
        {"grid", CLI_LIST, &c->grids, "NAME=V1,V2,...", "values of a hyperparameter, every combination tried (repeatable): lr, dropout, batch, optimizer, momentum, warmup, weight-decay"},
        {"range", CLI_LIST, &c->ranges, "NAME=LO:HI[:log]", "a range drawn from for --random N (repeatable)"},
        {"random", CLI_INT, &c->random, "N", "N trials drawn from the ranges and grids instead of every combination"},
        {"search-seed", CLI_INT64, &c->search_seed, "S", "the random search's draws (default 42)"},
        {"max-trials", CLI_INT, &c->max_trials, "N", "refuse a search space of more trials (default 1024)"},
        {"out", CLI_STRING, &c->out, "BEST.ftl", "the best trial's model (required)"},
        {"table", CLI_STRING, &c->table, "RESULTS.csv", "the trials, best first by the early-stopping monitor (default BEST.trials/results.csv; a .json beside it)"},
        {"trials-dir", CLI_STRING, &c->trials_dir, "DIR", "every trial's model and log (default BEST.trials next to --out)"},
        {"overwrite", CLI_BOOL, &c->overwrite, NULL, "replace an existing --out and trial files"},
        {"workers", CLI_INT, &c->workers, "N", "stacks of trials trained at once, a thread each (default: one per core)"},
        {"stack-size", CLI_INT, &c->stack_size, "K", "most trials trained together over shared batches (default 16)"},
        {"halving", CLI_INT, &c->halving, "ETA", "successive halving: at rungs of --epochs/ETA^k epochs only the best 1/ETA of the trials go on"},
        {"log", CLI_STRING, &c->log_path, "SWEEP.jsonl", "the sweep's log: a record per trial and epoch with its settings (ftl report draws it)"},
        {"checkpoints", CLI_BOOL, &c->checkpoints, NULL, "each trial's state after every epoch, for --resume (default; --no-checkpoints)"},
        {"resume", CLI_BOOL, &c->resume, NULL, "continue an interrupted sweep in its --trials-dir: done trials kept, the others from their last epoch"},
    };
    _Static_assert(sizeof flags / sizeof flags[0] == SWEEP_FLAG_COUNT, "SWEEP_FLAG_COUNT");
    memcpy(out, flags, sizeof flags);
}

static const cli_command sweep_command = {
    "sweep", "ftl sweep TRAIN --val VAL --backbone MODEL.onnx --out BEST.ftl --grid NAME=V1,V2 ... [ftl train options]",
    "Trains the head for every point of a search space (ftl train's options, not swept, apply to all\n"
    "trials; each trial's model equals ftl train's alone), embedding the images once, and keeps the\n"
    "best by the early-stopping monitor (val_acc by default). Trials with the same batch size and\n"
    "dropout train together over shared batches\n"
    "(a stack), stacks in parallel, one per core.",
    0, 0};

/* Splits argv: the sweep's flags to c->own (parsed by the table), the rest, in order, to c->rest. */
static void split_args(sweep_cli *c, const cli_flag *flags, int argc, char **argv) {
    c->own = calloc((size_t)argc + 1, sizeof *c->own);
    c->rest = calloc((size_t)argc + 8, sizeof *c->rest);
    c->n_own = 1;
    c->own[0] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) c->help = true;
        const char *name = a[0] == '-' ? a + (a[1] == '-' ? 2 : 1) : NULL;
        size_t len = name ? strcspn(name, "=") : 0;
        int k = -1;
        for (int f = 0; name && f < SWEEP_FLAG_COUNT; f++) {
            if (strlen(flags[f].name) == len && strncmp(flags[f].name, name, len) == 0) k = f;
            if (flags[f].kind == CLI_BOOL && len == strlen(flags[f].name) + 3 && strncmp(name, "no-", 3) == 0 &&
                strncmp(flags[f].name, name + 3, len - 3) == 0)
                k = f; /* --no-NAME turns a switch off */
        }
        if (k >= 0) {
            c->own[c->n_own++] = argv[i];
            if (flags[k].kind != CLI_BOOL && !strchr(name, '=') && i + 1 < argc) c->own[c->n_own++] = argv[++i];
        } else { /* the dataset and ftl train's options, in order: its parser reads them */
            c->rest[c->n_rest++] = argv[i];
        }
    }
}

/* The search space's trials, and the request's checks; `why` gets the first refusal. */
static void make_trials(sweep_cli *c, char *why, size_t why_size) {
    ftl_sweep_space space;
    ftl_sweep_space_init(&space);
    ftl_status st = FTL_OK;
    for (int i = 0; i < c->grids.count && st == FTL_OK; i++) st = ftl_sweep_space_add_grid(&space, c->grids.values[i]);
    for (int i = 0; i < c->ranges.count && st == FTL_OK; i++) st = ftl_sweep_space_add_range(&space, c->ranges.values[i]);
    if (st != FTL_OK) snprintf(why, why_size, "%s", ftl_last_error());
    else if (!c->out) snprintf(why, why_size, "--out BEST.ftl is required");
    else if (c->grids.count + c->ranges.count == 0)
        snprintf(why, why_size, "nothing to search: give --grid NAME=V1,V2,... (or --range with --random N)");
    else if (c->random < 0 || c->max_trials < 1) snprintf(why, why_size, "--random must be >= 0 and --max-trials >= 1");
    else if (ftl_sweep_space_trials(&space, c->random, (uint64_t)c->search_seed, c->max_trials, &c->trials, &c->count) != FTL_OK)
        snprintf(why, why_size, "%s", ftl_last_error());
    for (int i = 0; i < c->n_rest && !why[0]; i++) { /* the sweep writes these itself, per trial */
        static const char *const owned[] = {"--checkpoint", "--report", "--keep-last", "--save-best-only", "--timeline"};
        for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) {
            size_t n = strlen(owned[k]);
            if (strncmp(c->rest[i], owned[k], n) == 0 && (c->rest[i][n] == '\0' || c->rest[i][n] == '='))
                snprintf(why, why_size, "%s is not taken by ftl sweep (each trial's model, log and checkpoint go to "
                                        "--trials-dir; --resume continues the sweep; ftl report draws its --log)",
                         owned[k]);
        }
    }
    if (!why[0] && c->halving != 0 && c->halving < 2) snprintf(why, why_size, "--halving %d: the rate must be at least 2", c->halving);
    if (!why[0] && access(c->out, F_OK) == 0 && !c->overwrite && !c->resume)
        snprintf(why, why_size, "%s already exists (use --overwrite to replace it)", c->out);
}

/* Every trial's options, parsed (and so checked) before any work: 0, or the exit code. */
static int parse_trials(sweep_cli *c) {
    c->ta = calloc((size_t)c->count, sizeof *c->ta);
    c->opts = calloc((size_t)c->count, sizeof *c->opts);
    c->labels = calloc((size_t)c->count, sizeof *c->labels);
    int failed = 0;
    for (int t = 0; t < c->count && !failed; t++) {
        trial_args *a = &c->ta[t];
        snprintf(a->model, sizeof a->model, "%s/trial-%04d.ftl", c->dir, t + 1);
        snprintf(a->log, sizeof a->log, "%s/trial-%04d.jsonl", c->dir, t + 1);
        const char *tf[2 * FTL_SWEEP_PARAM_COUNT];
        int n_tf = trial_flags(&c->trials[t], a->values, tf);
        a->argv = calloc((size_t)(c->n_rest + n_tf + 12), sizeof *a->argv);
        a->argv[a->argc++] = (char *)"train";
        for (int i = 0; i < c->n_rest; i++) a->argv[a->argc++] = c->rest[i];
        a->argv[a->argc++] = (char *)"--out";
        a->argv[a->argc++] = a->model;
        a->argv[a->argc++] = (char *)"--log";
        a->argv[a->argc++] = a->log;
        if (c->overwrite) a->argv[a->argc++] = (char *)"--overwrite";
        for (int i = 0; i < n_tf; i++) a->argv[a->argc++] = (char *)tf[i];
        size_t len = 1;
        for (int i = 0; i < n_tf; i += 2) len += strlen(tf[i]) + strlen(tf[i + 1]) + 2;
        c->labels[t] = calloc(len, 1);
        for (int i = 0; i < n_tf; i += 2)
            sprintf(c->labels[t] + strlen(c->labels[t]), "%s%s=%s", i ? " " : "", tf[i] + 2, tf[i + 1]);
        const char *report = NULL;
        int prc = cli_train_parse(a->argc, a->argv, &c->opts[t], &report);
        if (prc != 0) {
            fprintf(stderr, "ftl sweep: error: trial %d (%s) is not a valid ftl train run\n", t + 1, c->labels[t]);
            failed = prc < 0 ? 2 : prc;
        }
    }
    return failed;
}

/* The trials' folder (BEST.trials by default), the table and its JSON beside it. */
static void result_paths(sweep_cli *c) {
    c->dir = c->trials_dir ? strdup(c->trials_dir) : NULL;
    if (!c->dir) {
        size_t n = strlen(c->out);
        const char *ext = n > 4 && strcmp(c->out + n - 4, ".ftl") == 0 ? c->out + n - 4 : c->out + n;
        c->dir = malloc(n + 16);
        sprintf(c->dir, "%.*s.trials", (int)(ext - c->out), c->out);
    }
    c->csv_path = c->table ? strdup(c->table) : NULL;
    if (!c->csv_path) {
        c->csv_path = malloc(strlen(c->dir) + 16);
        sprintf(c->csv_path, "%s/results.csv", c->dir);
    }
    size_t lp = strlen(c->csv_path);
    c->json_path = malloc(lp + 8);
    if (lp > 4 && strcmp(c->csv_path + lp - 4, ".csv") == 0) sprintf(c->json_path, "%.*s.json", (int)(lp - 4), c->csv_path);
    else sprintf(c->json_path, "%s.json", c->csv_path);
}

/* The checks between parsed trials and work: paths, stacking, --resume's folder; makes the folder. */
static int check_sweep(sweep_cli *c) {
    if (ftl_sweep_check_paths(c->opts, c->count, c->out, c->csv_path, c->json_path, c->log_path) != FTL_OK) {
        fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
        return 2;
    }
    table_monitor = c->opts[0].fit.early_stopping.monitor;
    c->why[0] = 0;
    c->stacked = ftl_sweep_stackable(c->opts, c->count, c->why, sizeof c->why);
    if (!c->stacked && (c->halving || c->resume || c->log_path)) {
        fprintf(stderr, "ftl sweep: error: --halving, --resume and --log need the trials trained together, and these "
                        "cannot be: %s\n", c->why);
        return 2;
    }
    if (c->resume && access(c->dir, F_OK) != 0) {
        fprintf(stderr, "ftl sweep: error: --resume: there is no sweep in %s to continue\n", c->dir);
        return 2;
    }
    if (mkdir(c->dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ftl sweep: error: cannot make %s: %s\n", c->dir, strerror(errno));
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
    char *args_path = malloc(strlen(c->dir) + 16);
    sprintf(args_path, "%s/sweep.args", c->dir);
    int failed = 0;
    if (c->resume) {
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
    size_t cap = 64 + FTL_SWEEP_PARAM_COUNT * 64, n = 0;
    char *json = malloc(cap);
    n += (size_t)snprintf(json + n, cap - n, "{");
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
        if (!trial->set[p]) continue;
        char v[40];
        setting_text(trial, p, v, sizeof v);
        bool text = p == FTL_SWEEP_OPTIMIZER;
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
        ro.threads = c->workers;
        ro.stack_size = c->stack_size;
        ro.halving_eta = c->halving;
        ro.checkpoints = c->checkpoints;
        ro.resume = c->resume;
        ro.log_path = c->log_path;
        ro.log_record = record;
        ro.settings_json = (const char *const *)settings;
        ro.progress = rank0 ? stdout : NULL;
        ro.labels = (const char *const *)c->labels;
        ftl_status st = ftl_sweep_run(c->opts, c->count, &ro, out_res);
        if (st != FTL_OK) {
            fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
            fprintf(stderr, "ftl sweep: the trials that ended are in %s\n", c->dir);
            return cli_report(st);
        }
        return 0;
    }
    for (int t = 0; t < c->count; t++) {
        if (rank0) printf("sweep: trial %d/%d: %s\n", t + 1, c->count, c->labels[t]);
        fflush(stdout);
        ftl_train_summary sum;
        double t0 = now_seconds();
        ftl_status st = ftl_train_run(&c->opts[t], &sum);
        if (st != FTL_OK) { /* the sweep stops with it (the settings are checked alike) */
            fprintf(stderr, "ftl sweep: error: trial %d: %s\n", t + 1, ftl_last_error());
            fprintf(stderr, "ftl sweep: the trials before it are in %s\n", c->dir);
            return cli_report(st);
        }
        out_res[t] = (ftl_sweep_trial_result){.done = true, .fit = sum.fit, .seconds = now_seconds() - t0};
    }
    return 0;
}

/* The table, CSV and JSON, every swept setting a column; res sorted best first. */
static void results_table(const sweep_cli *c, const trial_result *res, char **csv_out, size_t *nc_out, char **json_out,
                          size_t *nj_out) {
    size_t cap = 4096 + (size_t)c->count * 512;
    char *csv = malloc(cap), *json = malloc(cap);
    size_t nc = 0, nj = 0;
    nc += (size_t)snprintf(csv + nc, cap - nc, "rank,trial");
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++)
        if (c->trials[0].set[p]) nc += (size_t)snprintf(csv + nc, cap - nc, ",%s", ftl_sweep_param_name((ftl_sweep_param)p));
    nc += (size_t)snprintf(csv + nc, cap - nc, ",best_epoch,epochs,halted_at,val_acc,val_loss,acc,loss,seconds,model\n");
    nj += (size_t)snprintf(json + nj, cap - nj, "[\n");
    for (int i = 0; i < c->count; i++) {
        const trial_result *r = &res[i];
        nc += (size_t)snprintf(csv + nc, cap - nc, "%d,%d", i + 1, r->id);
        nj += (size_t)snprintf(json + nj, cap - nj, "  {\"rank\": %d, \"trial\": %d, \"settings\": {", i + 1, r->id);
        bool first = true;
        for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
            if (!r->settings.set[p]) continue;
            char v[40];
            setting_text(&r->settings, p, v, sizeof v);
            nc += (size_t)snprintf(csv + nc, cap - nc, ",%s", v);
            nj += (size_t)snprintf(json + nj, cap - nj, "%s\"%s\": %s%s%s", first ? "" : ", ",
                                   ftl_sweep_param_name((ftl_sweep_param)p), p == FTL_SWEEP_OPTIMIZER ? "\"" : "", v,
                                   p == FTL_SWEEP_OPTIMIZER ? "\"" : "");
            first = false;
        }
        nc += (size_t)snprintf(csv + nc, cap - nc, ",%lld,%lld,%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%s\n", r->best_epoch,
                               r->epochs_run, r->halted_at, r->val_acc, r->val_loss, r->acc, r->loss, r->seconds, r->model);
        nj += (size_t)snprintf(json + nj, cap - nj,
                               "}, \"best_epoch\": %lld, \"epochs\": %lld, \"halted_at\": %lld, \"val_acc\": %.9g, "
                               "\"val_loss\": %.9g, \"acc\": %.9g, \"loss\": %.9g, \"seconds\": %.3f, \"model\": \"%s\"}%s\n",
                               r->best_epoch, r->epochs_run, r->halted_at, r->val_acc, r->val_loss, r->acc, r->loss, r->seconds,
                               r->model, i + 1 < c->count ? "," : "");
    }
    nj += (size_t)snprintf(json + nj, cap - nj, "]\n");
    *csv_out = csv, *nc_out = nc, *json_out = json, *nj_out = nj;
}

/* The results: the table (rank 0), the best trial's model at --out, and the top ten printed. */
static int publish_results(const sweep_cli *c, trial_result *res, bool rank0) {
    qsort(res, (size_t)c->count, sizeof *res, by_monitor);
    char *csv, *json;
    size_t nc, nj;
    results_table(c, res, &csv, &nc, &json, &nj);
    int rc_out = rank0 ? write_whole(c->csv_path, csv, nc) || write_whole(c->json_path, json, nj) : 0;
    /* the best trial's model, from the rank that trained it */
    ftl_status cs = ftl_sweep_copy_model(ftl_dist_world(), res[0].model, res[0].rank, c->out, c->overwrite || c->resume);
    if (cs != FTL_OK) {
        fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
        rc_out = cli_report(cs);
    }
    if (rc_out == 0 && rank0) {
        printf("sweep: %d trials; best: trial %d (val_acc %.4f, val_loss %.4f) -> %s; table %s\n", c->count, res[0].id,
               res[0].val_acc, res[0].val_loss, c->out, c->csv_path);
        for (int i = 0; i < c->count && i < 10; i++) {
            printf("  %2d. trial %d:", i + 1, res[i].id);
            for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
                if (!res[i].settings.set[p]) continue;
                char v[40];
                setting_text(&res[i].settings, p, v, sizeof v);
                printf(" %s=%s", ftl_sweep_param_name((ftl_sweep_param)p), v);
            }
            printf("  val_acc %.4f  val_loss %.4f  best epoch %lld\n", res[i].val_acc, res[i].val_loss, res[i].best_epoch);
        }
    }
    free(csv), free(json);
    return rc_out;
}

static void sweep_cli_free(sweep_cli *c) {
    for (int t = 0; c->ta && t < c->count; t++) free(c->ta[t].argv);
    for (int t = 0; c->labels && t < c->count; t++) free(c->labels[t]);
    free(c->ta), free(c->opts), free(c->labels);
    free(c->trials), free(c->own), free(c->rest), free(c->dir), free(c->csv_path), free(c->json_path);
}

int cli_cmd_sweep(int argc, char **argv) {
    sweep_cli c = {.max_trials = 1024, .search_seed = 42, .checkpoints = true};
    const bool rank0 = ftl_dist_rank(ftl_dist_world()) == 0; /* under mpirun rank 0 prints and writes the table */
    cli_flag flags[SWEEP_FLAG_COUNT];
    sweep_flags(&c, flags);
    split_args(&c, flags, argc, argv);
    if (c.help) {
        cli_print_help(&sweep_command, flags, SWEEP_FLAG_COUNT);
        printf("\nevery other option is ftl train's (ftl train --help), given to each trial\n");
        sweep_cli_free(&c);
        return 0;
    }
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse(&sweep_command, flags, SWEEP_FLAG_COUNT, c.n_own, c.own, pos, &npos);
    if (rc == 0 && c.n_rest == 0) {
        fprintf(stderr, "ftl sweep: error: missing the training dataset\nusage: %s\n", sweep_command.usage);
        rc = 2;
    }
    if (rc != 0) {
        sweep_cli_free(&c);
        return rc < 0 ? 0 : rc;
    }
    char why[512] = "";
    make_trials(&c, why, sizeof why);
    if (why[0]) {
        sweep_cli_free(&c);
        fprintf(stderr, "ftl sweep: error: %s\n", why);
        return 2;
    }
    result_paths(&c);
    trial_result *res = calloc((size_t)c.count, sizeof *res);
    int failed = parse_trials(&c);
    if (!failed) failed = check_sweep(&c);
    size_t args_len;
    char *args_text = args_text_of(argc, argv, &args_len);
    if (!failed) failed = record_or_compare_args(&c, args_text, args_len);
    /* the log's first line and each trial's settings as JSON */
    char **settings = calloc((size_t)c.count, sizeof *settings);
    for (int t = 0; t < c.count; t++) settings[t] = settings_json(&c.trials[t]);
    char *record = sweep_record(argc, argv, c.count, c.halving, args_len);
    if (!failed) {
        if (rank0) printf("sweep: %d trials -> %s%s%s\n", c.count, c.dir, c.stacked ? "" : "; one after the other: ", c.why);
        fflush(stdout);
    }
    ftl_sweep_trial_result *out_res = calloc((size_t)c.count, sizeof *out_res);
    if (!failed) failed = run_trials(&c, record, settings, rank0, out_res);
    for (int t = 0; t < c.count; t++) free(settings[t]);
    free(settings), free(record), free(args_text);
    for (int t = 0; t < c.count; t++) {
        const ftl_fit_result *f = &out_res[t].fit;
        res[t] = (trial_result){.id = t + 1, .settings = c.trials[t], .model = strdup(c.ta[t].model),
                                .val_acc = f->final_val_acc, .val_loss = f->final_val_loss, .acc = f->final_acc,
                                .loss = f->final_loss, .best_epoch = f->best_epoch, .epochs_run = f->epochs_run,
                                .seconds = out_res[t].seconds, .halted_at = out_res[t].halted_at, .rank = out_res[t].rank};
    }
    free(out_res);
    int rc_out = failed;
    if (!failed && c.count > 0) rc_out = publish_results(&c, res, rank0);
    for (int i = 0; i < c.count; i++) free(res[i].model);
    free(res);
    sweep_cli_free(&c);
    return rc_out;
}
