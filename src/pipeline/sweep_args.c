/* ftl sweep's options by name (ftl/sweep.h ftl_sweep_args_parse): the sweep's own table, and every
 * other option given to each trial as `ftl train` takes it (each trial's options are parsed by
 * ftl_train_args_parse), so each trial is what `ftl train` alone would run with its settings. */
#include "ftl/sweep.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One trial's command line for ftl train's parser: the forwarded options, then its own. */
struct ftl_sweep_trial_argv {
    char **argv;
    int argc;
    char model[4096], log[4096];
    char values[FTL_SWEEP_PARAM_COUNT][FTL_SWEEP_TEXT_MAX];
};

enum { SWEEP_ARG_COUNT = 16 };

static void sweep_arg_table(ftl_sweep_args *c, ftl_arg *out) {
    const ftl_arg table[] = {
        {"grid", FTL_ARG_LIST, &c->grids, "NAME=V1,V2,...", "values of a hyperparameter, every combination tried (repeatable): lr, dropout, batch, optimizer, momentum, warmup, weight-decay, label-smoothing, lr-schedule (e.g. lr-schedule=constant,cosine,step:5:0.5)"},
        {"range", FTL_ARG_LIST, &c->ranges, "NAME=LO:HI[:log]", "a range drawn from for --random N (repeatable)"},
        {"random", FTL_ARG_INT, &c->random, "N", "N trials drawn from the ranges and grids instead of every combination"},
        {"search-seed", FTL_ARG_INT64, &c->search_seed, "S", "the random search's draws (default 42)"},
        {"max-trials", FTL_ARG_INT, &c->max_trials, "N", "refuse a search space of more trials (default 1024)"},
        {"out", FTL_ARG_STRING, &c->out, "BEST.ftl", "the best trial's model (required)"},
        {"table", FTL_ARG_STRING, &c->table, "RESULTS.csv", "the trials, best first by the early-stopping monitor (default BEST.trials/results.csv; a .json beside it)"},
        {"trials-dir", FTL_ARG_STRING, &c->trials_dir, "DIR", "every trial's model and log (default BEST.trials next to --out)"},
        {"overwrite", FTL_ARG_BOOL, &c->overwrite, NULL, "replace an existing --out and trial files"},
        {"workers", FTL_ARG_INT, &c->workers, "N", "stacks of trials trained at once, a thread each (default: one per core)"},
        {"stack-size", FTL_ARG_INT, &c->stack_size, "K", "most trials trained together over shared batches (default 16)"},
        {"halving", FTL_ARG_INT, &c->halving, "ETA", "successive halving: at rungs of --epochs/ETA^k epochs only the best 1/ETA of the trials go on"},
        {"log", FTL_ARG_STRING, &c->log_path, "SWEEP.jsonl", "the sweep's log: a record per trial and epoch with its settings (ftl report draws it)"},
        {"checkpoints", FTL_ARG_BOOL, &c->checkpoints, NULL, "each trial's state after every epoch, for --resume (default; --no-checkpoints)"},
        {"resume", FTL_ARG_BOOL, &c->resume, NULL, "continue an interrupted sweep in its --trials-dir: done trials kept, the others from their last epoch"},
        {"fine-tune-top", FTL_ARG_INT, &c->fine_tune_top, "K",
         "with --fine-tune-last N (or --fine-tune-from): phase 1 (the head) of every trial together on the shared boundary "
         "rows, then phase 2 for the K best by the monitor only; BEST is the best after fine-tuning"},
    };
    _Static_assert(sizeof table / sizeof table[0] == SWEEP_ARG_COUNT, "SWEEP_ARG_COUNT");
    memcpy(out, table, sizeof table);
}

const ftl_arg *ftl_sweep_arg_table(int *count) {
    static ftl_arg described[SWEEP_ARG_COUNT];
    static bool made;
    if (!made) {
        ftl_sweep_args a;
        sweep_arg_table(&a, described);
        for (int i = 0; i < SWEEP_ARG_COUNT; i++) described[i].target = NULL;
        made = true;
    }
    *count = SWEEP_ARG_COUNT;
    return described;
}

/* Splits argv: the sweep's flags to c->own (parsed by the table), the rest, in order, to c->rest. */
static void split_args(ftl_sweep_args *c, const ftl_arg *flags, int argc, char **argv) {
    c->own = ftl_xcalloc((size_t)argc + 1, sizeof *c->own);
    c->rest = ftl_xcalloc((size_t)argc + 8, sizeof *c->rest);
    c->n_own = 1;
    c->own[0] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) c->help_asked = true;
        const char *name = a[0] == '-' ? a + (a[1] == '-' ? 2 : 1) : NULL;
        size_t len = name ? strcspn(name, "=") : 0;
        int k = -1;
        for (int f = 0; name && f < SWEEP_ARG_COUNT; f++) {
            if (strlen(flags[f].name) == len && strncmp(flags[f].name, name, len) == 0) k = f;
            if (flags[f].kind == FTL_ARG_BOOL && len == strlen(flags[f].name) + 3 && strncmp(name, "no-", 3) == 0 &&
                strncmp(flags[f].name, name + 3, len - 3) == 0)
                k = f; /* --no-NAME turns a switch off */
        }
        if (k >= 0) {
            c->own[c->n_own++] = argv[i];
            if (flags[k].kind != FTL_ARG_BOOL && !strchr(name, '=') && i + 1 < argc) c->own[c->n_own++] = argv[++i];
        } else { /* the dataset and ftl train's options, in order: its parser reads them */
            c->rest[c->n_rest++] = argv[i];
        }
    }
}

/* The search space's trials, and the request's checks; `why` gets the first refusal. */
static void make_trials(ftl_sweep_args *c, char *why, size_t why_size) {
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
    if (!why[0] && c->fine_tune_top_given && c->fine_tune_top < 1)
        snprintf(why, why_size, "--fine-tune-top %d: the number of trials to fine-tune must be at least 1", c->fine_tune_top);
    if (!why[0] && access(c->out, F_OK) == 0 && !c->overwrite && !c->resume)
        snprintf(why, why_size, "%s already exists (use --overwrite to replace it)", c->out);
}

/* The trial's `ftl train` flags, after the forwarded ones (a later flag wins). */
static int trial_flags(const ftl_sweep_trial *t, char flags[][FTL_SWEEP_TEXT_MAX], const char **argv_out) {
    static const char *const train_flag[FTL_SWEEP_PARAM_COUNT] = {
        "--lr", "--dropout", "--batch", "--optimizer", "--momentum", "--warmup-epochs", "--weight-decay",
        "--label-smoothing", "--lr-schedule", "--tta"};
    int n = 0;
    for (int p = 0; p < FTL_SWEEP_PARAM_COUNT; p++) {
        if (!t->set[p]) continue;
        argv_out[n++] = train_flag[p];
        ftl_sweep_setting_text(t, (ftl_sweep_param)p, flags[p], sizeof flags[p]);
        argv_out[n++] = flags[p];
    }
    return n;
}

/* Every trial's options, parsed (and so checked) before any work; the first refusal's trial. */
static ftl_status parse_trials(ftl_sweep_args *c) {
    c->trial_argv = ftl_xcalloc((size_t)c->count, sizeof *c->trial_argv);
    c->trial_options = ftl_xcalloc((size_t)c->count, sizeof *c->trial_options);
    c->labels = ftl_xcalloc((size_t)c->count, sizeof *c->labels);
    for (int t = 0; t < c->count; t++) {
        struct ftl_sweep_trial_argv *a = &c->trial_argv[t];
        snprintf(a->model, sizeof a->model, "%s/trial-%04d.ftl", c->dir, t + 1);
        snprintf(a->log, sizeof a->log, "%s/trial-%04d.jsonl", c->dir, t + 1);
        const char *tf[2 * FTL_SWEEP_PARAM_COUNT];
        int n_tf = trial_flags(&c->trials[t], a->values, tf);
        a->argv = ftl_xcalloc((size_t)(c->n_rest + n_tf + 12), sizeof *a->argv);
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
        c->labels[t] = ftl_xcalloc(len, 1);
        for (int i = 0; i < n_tf; i += 2)
            sprintf(c->labels[t] + strlen(c->labels[t]), "%s%s=%s", i ? " " : "", tf[i] + 2, tf[i + 1]);
        ftl_train_args extra;
        ftl_status st = ftl_train_args_parse(a->argc, a->argv, &c->trial_options[t], &extra);
        if (st != FTL_OK) {
            c->failure = FTL_SWEEP_ARGS_TRIAL;
            c->failed_trial = t + 1;
            return st;
        }
        c->quiet |= extra.quiet;
    }
    return FTL_OK;
}

/* The trials' folder (BEST.trials by default), the table and its JSON beside it. */
static void result_paths(ftl_sweep_args *c) {
    c->dir = c->trials_dir ? ftl_strdup(c->trials_dir) : NULL;
    if (!c->dir) {
        size_t n = strlen(c->out);
        const char *ext = n > 4 && strcmp(c->out + n - 4, ".ftl") == 0 ? c->out + n - 4 : c->out + n;
        c->dir = ftl_xmalloc(n + 16);
        sprintf(c->dir, "%.*s.trials", (int)(ext - c->out), c->out);
    }
    c->table_path = c->table ? ftl_strdup(c->table) : NULL;
    if (!c->table_path) {
        c->table_path = ftl_xmalloc(strlen(c->dir) + 16);
        sprintf(c->table_path, "%s/results.csv", c->dir);
    }
    size_t lp = strlen(c->table_path);
    c->json_path = ftl_xmalloc(lp + 8);
    if (lp > 4 && strcmp(c->table_path + lp - 4, ".csv") == 0) sprintf(c->json_path, "%.*s.json", (int)(lp - 4), c->table_path);
    else sprintf(c->json_path, "%s.json", c->table_path);
}

/* With --fine-tune-top K: the trials must have the cut that phase 2 tunes. */
static bool fine_tunes(const ftl_train_options *o) {
    return o->fine_tune.last_convs > 0 || (o->fine_tune.from_tensor && o->fine_tune.from_tensor[0]);
}

ftl_status ftl_sweep_args_parse(int argc, char **argv, ftl_sweep_args *c) {
    memset(c, 0, sizeof *c);
    c->max_trials = 1024;
    c->search_seed = 42;
    c->checkpoints = true;
    ftl_arg flags[SWEEP_ARG_COUNT];
    sweep_arg_table(c, flags);
    split_args(c, flags, argc, argv);
    if (c->help_asked) return FTL_OK;
    const char *pos[1];
    int npos = 0;
    bool help = false;
    c->failure = FTL_SWEEP_ARGS_USAGE;
    FTL_TRY(ftl_args_parse(flags, SWEEP_ARG_COUNT, c->n_own, c->own, pos, 0, &npos, &help));
    c->fine_tune_top_given = ftl_args_given(c->n_own, c->own, "fine-tune-top");
    c->failure = FTL_SWEEP_ARGS_NO_DATASET;
    if (c->n_rest == 0) return ftl_fail(FTL_E_INVALID_ARG, "missing the training dataset");
    c->failure = FTL_SWEEP_ARGS_REFUSED;
    char why[512] = "";
    make_trials(c, why, sizeof why);
    if (why[0]) return ftl_fail(FTL_E_INVALID_ARG, "%s", why);
    result_paths(c);
    c->failure = FTL_SWEEP_ARGS_OK;
    FTL_TRY(parse_trials(c));
    if (c->fine_tune_top > 0 && !fine_tunes(&c->trial_options[0])) {
        c->failure = FTL_SWEEP_ARGS_REFUSED;
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-top %d picks the trials that phase 2 fine-tunes: give the cut too "
                                           "(--fine-tune-last N or --fine-tune-from TENSOR)",
                        c->fine_tune_top);
    }
    return FTL_OK;
}

void ftl_sweep_args_free(ftl_sweep_args *c) {
    for (int t = 0; c->trial_argv && t < c->count; t++) free(c->trial_argv[t].argv);
    for (int t = 0; c->labels && t < c->count; t++) free(c->labels[t]);
    free(c->trial_argv), free(c->trial_options), free(c->labels);
    free(c->trials), free(c->own), free(c->rest), free(c->dir), free(c->table_path), free(c->json_path);
    memset(c, 0, sizeof *c);
}
