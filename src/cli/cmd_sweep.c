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

int cli_cmd_sweep(int argc, char **argv) {
    ftl_sweep_space space;
    ftl_sweep_space_init(&space);
    cli_list grids = {0}, ranges = {0};
    int random = 0, max_trials = 1024, workers = 0, stack_size = 0, halving = 0;
    int64_t search_seed = 42;
    const char *out = NULL, *table = NULL, *trials_dir = NULL, *log_path = NULL;
    bool overwrite = false, help = false, resume = false, checkpoints = true;
    const bool rank0 = ftl_dist_rank(ftl_dist_world()) == 0; /* under mpirun rank 0 prints and writes the table */
    /* the sweep's own options; everything else goes to every trial's `ftl train` */
    const cli_flag flags[] = {
        {"grid", CLI_LIST, &grids, "NAME=V1,V2,...", "values of a hyperparameter, every combination tried (repeatable): lr, dropout, batch, optimizer, momentum, warmup, weight-decay"},
        {"range", CLI_LIST, &ranges, "NAME=LO:HI[:log]", "a range drawn from for --random N (repeatable)"},
        {"random", CLI_INT, &random, "N", "N trials drawn from the ranges and grids instead of every combination"},
        {"search-seed", CLI_INT64, &search_seed, "S", "the random search's draws (default 42)"},
        {"max-trials", CLI_INT, &max_trials, "N", "refuse a search space of more trials (default 1024)"},
        {"out", CLI_STRING, &out, "BEST.ftl", "the best trial's model (required)"},
        {"table", CLI_STRING, &table, "RESULTS.csv", "the trials, best first by the early-stopping monitor (default BEST.trials/results.csv; a .json beside it)"},
        {"trials-dir", CLI_STRING, &trials_dir, "DIR", "every trial's model and log (default BEST.trials next to --out)"},
        {"overwrite", CLI_BOOL, &overwrite, NULL, "replace an existing --out and trial files"},
        {"workers", CLI_INT, &workers, "N", "stacks of trials trained at once, a thread each (default: one per core)"},
        {"stack-size", CLI_INT, &stack_size, "K", "most trials trained together over shared batches (default 16)"},
        {"halving", CLI_INT, &halving, "ETA", "successive halving: at rungs of --epochs/ETA^k epochs only the best 1/ETA of the trials go on"},
        {"log", CLI_STRING, &log_path, "SWEEP.jsonl", "the sweep's log: a record per trial and epoch with its settings (ftl report draws it)"},
        {"checkpoints", CLI_BOOL, &checkpoints, NULL, "each trial's state after every epoch, for --resume (default; --no-checkpoints)"},
        {"resume", CLI_BOOL, &resume, NULL, "continue an interrupted sweep in its --trials-dir: done trials kept, the others from their last epoch"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    const cli_command cmd = {"sweep", "ftl sweep TRAIN --val VAL --backbone MODEL.onnx --out BEST.ftl --grid NAME=V1,V2 ... [ftl train options]",
                             "Trains the head for every point of a search space (ftl train's options, not swept, apply to all\n"
                             "trials; each trial's model equals ftl train's alone), embedding the images once, and keeps the\n"
                             "best by the early-stopping monitor (val_acc by default). Trials with the same batch size and\n"
                             "dropout train together over shared batches\n"
                             "(a stack), stacks in parallel, one per core.",
                             0, 0};
    /* split argv: the sweep's flags parsed here, the rest forwarded */
    char **own = calloc((size_t)argc + 1, sizeof *own), **rest = calloc((size_t)argc + 8, sizeof *rest);
    int n_own = 1, n_rest = 0;
    own[0] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) help = true;
        const char *name = a[0] == '-' ? a + (a[1] == '-' ? 2 : 1) : NULL;
        size_t len = name ? strcspn(name, "=") : 0;
        int k = -1;
        for (int f = 0; name && f < n_flags; f++) {
            if (strlen(flags[f].name) == len && strncmp(flags[f].name, name, len) == 0) k = f;
            if (flags[f].kind == CLI_BOOL && len == strlen(flags[f].name) + 3 && strncmp(name, "no-", 3) == 0 &&
                strncmp(flags[f].name, name + 3, len - 3) == 0)
                k = f; /* --no-NAME turns a switch off */
        }
        if (k >= 0) {
            own[n_own++] = argv[i];
            if (flags[k].kind != CLI_BOOL && !strchr(name, '=') && i + 1 < argc) own[n_own++] = argv[++i];
        } else { /* the dataset and ftl train's options, in order: its parser reads them */
            rest[n_rest++] = argv[i];
        }
    }
    if (help) {
        cli_print_help(&cmd, flags, n_flags);
        printf("\nevery other option is ftl train's (ftl train --help), given to each trial\n");
        free(own), free(rest);
        return 0;
    }
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, n_flags, n_own, own, pos, &npos);
    if (rc == 0 && n_rest == 0) {
        fprintf(stderr, "ftl sweep: error: missing the training dataset\nusage: %s\n", cmd.usage);
        rc = 2;
    }
    if (rc != 0) {
        free(own), free(rest);
        return rc < 0 ? 0 : rc;
    }
    char why[512] = "";
    ftl_status st = FTL_OK;
    for (int i = 0; i < grids.count && st == FTL_OK; i++) st = ftl_sweep_space_add_grid(&space, grids.values[i]);
    for (int i = 0; i < ranges.count && st == FTL_OK; i++) st = ftl_sweep_space_add_range(&space, ranges.values[i]);
    ftl_sweep_trial *trials = NULL;
    int count = 0;
    if (st != FTL_OK) snprintf(why, sizeof why, "%s", ftl_last_error());
    else if (!out) snprintf(why, sizeof why, "--out BEST.ftl is required");
    else if (grids.count + ranges.count == 0)
        snprintf(why, sizeof why, "nothing to search: give --grid NAME=V1,V2,... (or --range with --random N)");
    else if (random < 0 || max_trials < 1) snprintf(why, sizeof why, "--random must be >= 0 and --max-trials >= 1");
    else if (ftl_sweep_space_trials(&space, random, (uint64_t)search_seed, max_trials, &trials, &count) != FTL_OK)
        snprintf(why, sizeof why, "%s", ftl_last_error());
    for (int i = 0; i < n_rest && !why[0]; i++) { /* the sweep writes these itself, per trial */
        static const char *const owned[] = {"--checkpoint", "--report", "--keep-last", "--save-best-only", "--timeline"};
        for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) {
            size_t n = strlen(owned[k]);
            if (strncmp(rest[i], owned[k], n) == 0 && (rest[i][n] == '\0' || rest[i][n] == '='))
                snprintf(why, sizeof why, "%s is not taken by ftl sweep (each trial's model, log and checkpoint go to "
                                          "--trials-dir; --resume continues the sweep; ftl report draws its --log)",
                         owned[k]);
        }
    }
    if (!why[0] && halving != 0 && halving < 2) snprintf(why, sizeof why, "--halving %d: the rate must be at least 2", halving);
    if (!why[0] && access(out, F_OK) == 0 && !overwrite && !resume)
        snprintf(why, sizeof why, "%s already exists (use --overwrite to replace it)", out);
    if (why[0]) {
        free(own), free(rest), free(trials);
        fprintf(stderr, "ftl sweep: error: %s\n", why);
        return 2;
    }
    char *dir = trials_dir ? strdup(trials_dir) : NULL;
    if (!dir) {
        size_t n = strlen(out);
        const char *ext = n > 4 && strcmp(out + n - 4, ".ftl") == 0 ? out + n - 4 : out + n;
        dir = malloc(n + 16);
        sprintf(dir, "%.*s.trials", (int)(ext - out), out);
    }
    /* every trial's options, parsed (and so checked) before any work */
    trial_args *ta = calloc((size_t)count, sizeof *ta);
    ftl_train_options *opts = calloc((size_t)count, sizeof *opts);
    char **labels = calloc((size_t)count, sizeof *labels);
    trial_result *res = calloc((size_t)count, sizeof *res);
    int failed = 0;
    for (int t = 0; t < count && !failed; t++) {
        trial_args *a = &ta[t];
        snprintf(a->model, sizeof a->model, "%s/trial-%04d.ftl", dir, t + 1);
        snprintf(a->log, sizeof a->log, "%s/trial-%04d.jsonl", dir, t + 1);
        const char *tf[2 * FTL_SWEEP_PARAM_COUNT];
        int n_tf = trial_flags(&trials[t], a->values, tf);
        a->argv = calloc((size_t)(n_rest + n_tf + 12), sizeof *a->argv);
        a->argv[a->argc++] = (char *)"train";
        for (int i = 0; i < n_rest; i++) a->argv[a->argc++] = rest[i];
        a->argv[a->argc++] = (char *)"--out";
        a->argv[a->argc++] = a->model;
        a->argv[a->argc++] = (char *)"--log";
        a->argv[a->argc++] = a->log;
        if (overwrite) a->argv[a->argc++] = (char *)"--overwrite";
        for (int i = 0; i < n_tf; i++) a->argv[a->argc++] = (char *)tf[i];
        size_t len = 1;
        for (int i = 0; i < n_tf; i += 2) len += strlen(tf[i]) + strlen(tf[i + 1]) + 2;
        labels[t] = calloc(len, 1);
        for (int i = 0; i < n_tf; i += 2)
            sprintf(labels[t] + strlen(labels[t]), "%s%s=%s", i ? " " : "", tf[i] + 2, tf[i + 1]);
        const char *report = NULL;
        int prc = cli_train_parse(a->argc, a->argv, &opts[t], &report);
        if (prc != 0) {
            fprintf(stderr, "ftl sweep: error: trial %d (%s) is not a valid ftl train run\n", t + 1, labels[t]);
            failed = prc < 0 ? 2 : prc;
        }
    }
    /* the table and its JSON beside it */
    char *csv_path = table ? strdup(table) : NULL;
    if (!csv_path) {
        csv_path = malloc(strlen(dir) + 16);
        sprintf(csv_path, "%s/results.csv", dir);
    }
    size_t lp = strlen(csv_path);
    char *json_path = malloc(lp + 8);
    if (lp > 4 && strcmp(csv_path + lp - 4, ".csv") == 0) sprintf(json_path, "%.*s.json", (int)(lp - 4), csv_path);
    else sprintf(json_path, "%s.json", csv_path);
    if (!failed && ftl_sweep_check_paths(opts, count, out, csv_path, json_path, log_path) != FTL_OK) {
        fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
        failed = 2;
    }
    if (!failed) table_monitor = opts[0].fit.early_stopping.monitor;
    why[0] = 0;
    bool stacked = !failed && ftl_sweep_stackable(opts, count, why, sizeof why);
    if (!failed && !stacked && (halving || resume || log_path)) {
        fprintf(stderr, "ftl sweep: error: --halving, --resume and --log need the trials trained together, and these "
                        "cannot be: %s\n", why);
        failed = 2;
    }
    if (!failed && resume && access(dir, F_OK) != 0) {
        fprintf(stderr, "ftl sweep: error: --resume: there is no sweep in %s to continue\n", dir);
        failed = 2;
    }
    if (!failed && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ftl sweep: error: cannot make %s: %s\n", dir, strerror(errno));
        failed = 1;
    }
    /* The sweep's command line (less --resume and --overwrite) beside its trials: --resume continues
     * only the same sweep. */
    char *args_path = malloc(strlen(dir) + 16);
    sprintf(args_path, "%s/sweep.args", dir);
    size_t args_len = 1;
    for (int i = 1; i < argc; i++) args_len += strlen(argv[i]) + 1;
    char *args_text = calloc(args_len, 1);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--resume") != 0 && strcmp(argv[i], "--overwrite") != 0)
            strcat(strcat(args_text, argv[i]), "\n");
    if (!failed && resume) {
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
    } else if (!failed && stacked) {
        failed = write_whole(args_path, args_text, strlen(args_text));
    }
    /* the log's first line and each trial's settings as JSON */
    char **settings = calloc((size_t)count, sizeof *settings);
    for (int t = 0; t < count; t++) {
        size_t cap = 64 + FTL_SWEEP_PARAM_COUNT * 64, n = 0;
        settings[t] = malloc(cap);
        n += (size_t)snprintf(settings[t] + n, cap - n, "{");
        for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
            if (!trials[t].set[p]) continue;
            char v[40];
            setting_text(&trials[t], p, v, sizeof v);
            bool text = p == FTL_SWEEP_OPTIMIZER;
            n += (size_t)snprintf(settings[t] + n, cap - n, "%s\"%s\":%s%s%s", n > 1 ? "," : "",
                                  ftl_sweep_param_name((ftl_sweep_param)p), text ? "\"" : "", v, text ? "\"" : "");
        }
        snprintf(settings[t] + n, cap - n, "}");
    }
    size_t record_cap = 256 + args_len * 2;
    char *record = malloc(record_cap);
    {
        size_t n = (size_t)snprintf(record, record_cap, "{\"record\":\"sweep\",\"trials\":%d,\"halving\":%d,\"command\":[\"ftl\"",
                                    count, halving);
        for (int i = 0; i < argc && n < record_cap; i++) {
            n += (size_t)snprintf(record + n, record_cap - n, ",\"");
            for (const char *c = argv[i]; *c && n + 8 < record_cap; c++) {
                if (*c == '"' || *c == '\\') record[n++] = '\\';
                record[n++] = (unsigned char)*c < 0x20 ? ' ' : *c;
            }
            n += (size_t)snprintf(record + n, record_cap - n, "\"");
        }
        snprintf(record + n, record_cap - n, "]}");
    }
    if (!failed) {
        if (rank0) printf("sweep: %d trials -> %s%s%s\n", count, dir, stacked ? "" : "; one after the other: ", why);
        fflush(stdout);
    }
    ftl_sweep_trial_result *out_res = calloc((size_t)count, sizeof *out_res);
    if (!failed && stacked) {
        ftl_sweep_run_options ro;
        ftl_sweep_run_options_init(&ro);
        ro.threads = workers;
        ro.stack_size = stack_size;
        ro.halving_eta = halving;
        ro.checkpoints = checkpoints;
        ro.resume = resume;
        ro.log_path = log_path;
        ro.log_record = record;
        ro.settings_json = (const char *const *)settings;
        ro.progress = rank0 ? stdout : NULL;
        ro.labels = (const char *const *)labels;
        ftl_status st = ftl_sweep_run(opts, count, &ro, out_res);
        if (st != FTL_OK) {
            fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
            fprintf(stderr, "ftl sweep: the trials that ended are in %s\n", dir);
            failed = cli_report(st);
        }
    }
    for (int t = 0; !failed && !stacked && t < count; t++) {
        if (rank0) printf("sweep: trial %d/%d: %s\n", t + 1, count, labels[t]);
        fflush(stdout);
        ftl_train_summary sum;
        double t0 = now_seconds();
        ftl_status st = ftl_train_run(&opts[t], &sum);
        if (st != FTL_OK) { /* the sweep stops with it (the settings are checked alike) */
            fprintf(stderr, "ftl sweep: error: trial %d: %s\n", t + 1, ftl_last_error());
            fprintf(stderr, "ftl sweep: the trials before it are in %s\n", dir);
            failed = cli_report(st);
            break;
        }
        out_res[t] = (ftl_sweep_trial_result){.done = true, .fit = sum.fit, .seconds = now_seconds() - t0};
    }
    for (int t = 0; t < count; t++) free(settings[t]);
    free(settings), free(record), free(args_text), free(args_path);
    for (int t = 0; t < count; t++) {
        trial_result *r = &res[t];
        r->id = t + 1;
        r->settings = trials[t];
        r->model = strdup(ta[t].model);
        const ftl_fit_result *f = &out_res[t].fit;
        r->val_acc = f->final_val_acc;
        r->val_loss = f->final_val_loss;
        r->acc = f->final_acc;
        r->loss = f->final_loss;
        r->best_epoch = f->best_epoch;
        r->epochs_run = f->epochs_run;
        r->seconds = out_res[t].seconds;
        r->halted_at = out_res[t].halted_at;
        r->rank = out_res[t].rank;
    }
    free(out_res);
    for (int t = 0; t < count; t++) free(ta[t].argv), free(labels[t]);
    free(ta), free(opts), free(labels);
    int rc_out = failed;
    if (!failed && count > 0) {
        qsort(res, (size_t)count, sizeof *res, by_monitor);
        /* the table, CSV and JSON, every swept setting a column */
        size_t cap = 4096 + (size_t)count * 512;
        char *csv = malloc(cap), *json = malloc(cap);
        size_t nc = 0, nj = 0;
        nc += (size_t)snprintf(csv + nc, cap - nc, "rank,trial");
        for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++)
            if (trials[0].set[p]) nc += (size_t)snprintf(csv + nc, cap - nc, ",%s", ftl_sweep_param_name((ftl_sweep_param)p));
        nc += (size_t)snprintf(csv + nc, cap - nc, ",best_epoch,epochs,halted_at,val_acc,val_loss,acc,loss,seconds,model\n");
        nj += (size_t)snprintf(json + nj, cap - nj, "[\n");
        for (int i = 0; i < count; i++) {
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
                                   r->model, i + 1 < count ? "," : "");
        }
        nj += (size_t)snprintf(json + nj, cap - nj, "]\n");
        rc_out = rank0 ? write_whole(csv_path, csv, nc) || write_whole(json_path, json, nj) : 0;
        /* the best trial's model, from the rank that trained it */
        ftl_status cs = ftl_sweep_copy_model(ftl_dist_world(), res[0].model, res[0].rank, out, overwrite || resume);
        if (cs != FTL_OK) {
            fprintf(stderr, "ftl sweep: error: %s\n", ftl_last_error());
            rc_out = cli_report(cs);
        }
        if (rc_out == 0 && rank0) {
            printf("sweep: %d trials; best: trial %d (val_acc %.4f, val_loss %.4f) -> %s; table %s\n", count, res[0].id,
                   res[0].val_acc, res[0].val_loss, out, csv_path);
            for (int i = 0; i < count && i < 10; i++) {
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
    }
    for (int i = 0; i < count; i++) free(res[i].model);
    free(res), free(trials), free(own), free(rest), free(dir), free(csv_path), free(json_path);
    return rc_out;
}
