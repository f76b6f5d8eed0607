/* ftl public API: a hyperparameter sweep over the head's settings. The search space, as
 * `--grid lr=1e-3,4e-3,1e-2` (every combination) or `--range lr=1e-4:1e-1:log` (drawn for a seeded
 * random search), validated before any work and expanded into trials; and the runner that trains
 * the trials on features embedded once, in stacks that share batches, each trial equal to
 * ftl_train_run alone with its settings. */
#ifndef FTL_SWEEP_H
#define FTL_SWEEP_H

#include "ftl/base.h"
#include "ftl/pipeline.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ftl_sweep_param {
    FTL_SWEEP_LR,           /* lr: > 0 */
    FTL_SWEEP_DROPOUT,      /* dropout: [0, 1) */
    FTL_SWEEP_BATCH,        /* batch: an integer 1..FTL_LOADER_MAX_BATCH; grids only */
    FTL_SWEEP_OPTIMIZER,    /* optimizer: nadam, adam or sgd (the value is an ftl_optimizer_kind); grids only */
    FTL_SWEEP_MOMENTUM,     /* momentum: >= 0 (sgd) */
    FTL_SWEEP_WARMUP,       /* warmup: epochs >= 0 */
    FTL_SWEEP_WEIGHT_DECAY, /* weight-decay: >= 0 */
    FTL_SWEEP_LABEL_SMOOTHING, /* label-smoothing: [0, 1) */
    FTL_SWEEP_LR_SCHEDULE,  /* lr-schedule: an --lr-schedule spec (the value is its index in the grid, the
                               text in the trial's lr_schedule); grids only */
    FTL_SWEEP_TTA,          /* tta: none|flip (validation scored on both orientations; grids only) */
    FTL_SWEEP_PARAM_COUNT
} ftl_sweep_param;

enum { FTL_SWEEP_MAX_VALUES = 64, FTL_SWEEP_TEXT_MAX = 48 };

typedef struct ftl_sweep_space {
    int grid_count[FTL_SWEEP_PARAM_COUNT]; /* values of a --grid (0: none) */
    double grid[FTL_SWEEP_PARAM_COUNT][FTL_SWEEP_MAX_VALUES];
    bool ranged[FTL_SWEEP_PARAM_COUNT];    /* a --range: drawn in [lo, hi), log-uniform when log_scale */
    double lo[FTL_SWEEP_PARAM_COUNT], hi[FTL_SWEEP_PARAM_COUNT];
    bool log_scale[FTL_SWEEP_PARAM_COUNT];
    char lr_schedule[FTL_SWEEP_MAX_VALUES][FTL_SWEEP_TEXT_MAX]; /* the lr-schedule grid's specs */
} ftl_sweep_space;

/* One trial: the parameters it sets (the others keep the run's own settings). */
typedef struct ftl_sweep_trial {
    bool set[FTL_SWEEP_PARAM_COUNT];
    double value[FTL_SWEEP_PARAM_COUNT];
    char lr_schedule[FTL_SWEEP_TEXT_MAX]; /* the --lr-schedule spec, when set[FTL_SWEEP_LR_SCHEDULE] */
} ftl_sweep_trial;

/* "lr", "dropout", "batch", "optimizer", "momentum", "warmup", "weight-decay", "label-smoothing",
 * "lr-schedule", "tta". */
const char *ftl_sweep_param_name(ftl_sweep_param param);
/* A trial's value of a parameter as ftl train's flag takes it ("0.001", "sgd", "cosine"; "" when not set). */
void ftl_sweep_setting_text(const ftl_sweep_trial *trial, ftl_sweep_param param, char *buf, size_t size);
void ftl_sweep_space_init(ftl_sweep_space *space);
/* NAME=V1,V2,...: an unknown name, an empty or malformed value, one out of range, a name given
 * twice, or more than FTL_SWEEP_MAX_VALUES values is FTL_E_INVALID_ARG naming it. */
ftl_status ftl_sweep_space_add_grid(ftl_sweep_space *space, const char *spec);
/* NAME=LO:HI or NAME=LO:HI:log (LO < HI, both in the parameter's range; log needs LO > 0). */
ftl_status ftl_sweep_space_add_range(ftl_sweep_space *space, const char *spec);
/* The trials: random == 0, every combination of the grids (the first parameter in the enum's order
 * outermost), ranges refused; random > 0, that many trials, each ranged parameter drawn and each
 * gridded one picked, from `seed` (the same seed, the same trials). More than max_trials trials is an
 * error saying how many; *trials is malloc'ed. */
ftl_status ftl_sweep_space_trials(const ftl_sweep_space *space, int random, uint64_t seed, int max_trials,
                                  ftl_sweep_trial **trials, int *count);

/* ---- the command line ---- */

/* Where ftl_sweep_args_parse stopped, so that a caller can word it as the command line does. */
typedef enum ftl_sweep_args_failure {
    FTL_SWEEP_ARGS_OK,
    FTL_SWEEP_ARGS_USAGE,      /* one of the sweep's own options is unknown or malformed */
    FTL_SWEEP_ARGS_NO_DATASET, /* no training dataset */
    FTL_SWEEP_ARGS_REFUSED,    /* the search space or the request is refused (the message says why) */
    FTL_SWEEP_ARGS_TRIAL,      /* trial failed_trial's options are not a valid ftl train run (its parser's error) */
} ftl_sweep_args_failure;

struct ftl_sweep_trial_argv; /* a trial's ftl train command line (private) */

/* `ftl sweep`'s command line: its own options, and what is made of them. */
typedef struct ftl_sweep_args {
    ftl_arg_list grids, ranges;     /* --grid NAME=V1,V2 and --range NAME=LO:HI[:log], as given */
    int random, max_trials, workers, stack_size, halving;
    int fine_tune_top;              /* --fine-tune-top K (0: every trial fine-tuned, as ftl train would) */
    bool fine_tune_top_given;
    int64_t search_seed;
    const char *out, *table, *trials_dir, *log_path;
    bool overwrite, help_asked, resume, checkpoints;
    bool quiet;                     /* ftl train's --quiet was given to the trials */
    ftl_sweep_trial *trials;        /* the search space's points */
    int count;
    ftl_train_options *trial_options; /* per trial: ftl_train_args_parse's options (out_path its model) */
    char **labels;                  /* per trial: its settings, "lr=0.001 dropout=0.5" */
    char *dir, *table_path, *json_path; /* --trials-dir (default BEST.trials), the table and its JSON */
    ftl_sweep_args_failure failure;
    int failed_trial;               /* 1-based, with FTL_SWEEP_ARGS_TRIAL */
    char **own, **rest;             /* argv split: the sweep's flags, and the dataset and ftl train's options */
    int n_own, n_rest;
    struct ftl_sweep_trial_argv *trial_argv;
} ftl_sweep_args;

/* argv[0] is "sweep", argv[1..] `ftl sweep`'s arguments: the sweep's options by its table, every other
 * option given to each trial's ftl_train_args_parse (after the trial's settings' flags, its --out and
 * --log in the trials' folder). --help sets help_asked and parses nothing. On an error,
 * args->failure says where it stopped; ftl_sweep_args_free in any case. Strings point into argv. */
ftl_status ftl_sweep_args_parse(int argc, char **argv, ftl_sweep_args *args);
void ftl_sweep_args_free(ftl_sweep_args *args);
/* The sweep's own options (names, kinds, value names, help; targets NULL). */
const ftl_arg *ftl_sweep_arg_table(int *count);

/* ---- the runner ---- */

typedef struct ftl_sweep_run_options {
    int threads;               /* stacks trained at once, one per thread (0: ftl_train_threads()) */
    int stack_size;            /* most trials per stack (0: 16) */
    int halving_eta;           /* >= 2: successive halving, after each rung only the best 1/eta go on (0: off) */
    bool checkpoints;          /* each trial's state after every epoch, beside its model (.ckpt): what resume needs */
    bool resume;               /* continue an interrupted sweep: trials with a result file are done, the others
                                  continue from their checkpoints (bit-identical to an uninterrupted sweep) */
    const char *log_path;      /* the sweep's log: log_record, then per trial and epoch a record with its
                                  settings, and one as each trial ends (NULL: none) */
    const char *log_record;    /* the log's first line (a JSON object; NULL: none) */
    const char *const *settings_json; /* per trial, its swept settings as a JSON object (for the log) */
    FILE *progress;            /* a line as each trial ends (NULL: quiet) */
    const char *const *labels; /* per trial, its settings for the progress lines (optional) */
    const ftl_fine_tune_cut *through_cut; /* not NULL: the trials are phase 1 of fine-tuning at this cut; their
                                  features are the frozen top's over the cut's boundary rows (cached), as
                                  ftl train's phase 1 has them, so each trial equals that phase 1 */
} ftl_sweep_run_options;

void ftl_sweep_run_options_init(ftl_sweep_run_options *options);

typedef struct ftl_sweep_trial_result {
    bool done;                 /* trained and its model written */
    bool resumed;              /* done before a resume (fit holds what its result file records) */
    ftl_fit_result fit;        /* as ftl_train_run's summary has it */
    int64_t halted_at;         /* successive halving ended it after this epoch (0: it was not halted) */
    double score;              /* what halving ranks by: the monitored metric's best, negated for losses */
    double seconds;            /* the trial's own compute: its steps, validations and share of the fetches */
    int rank;                  /* under mpirun: the rank that trained it (its files are on that rank's host) */
} ftl_sweep_trial_result;

/* Whether ftl_sweep_run can train these trials together: the CPU, the feature cache, no
 * fine-tuning, resume, checkpoints or timeline, and trials that differ only in the head's
 * settings (batch, dropout, optimizer, lr, momentum, weight decay, warmup, label smoothing, lr
 * schedule) and their out and log
 * paths. If not, *why says what stands in the way (the caller then runs ftl_train_run per trial). */
bool ftl_sweep_stackable(const ftl_train_options *trials, int count, char *why, size_t why_size);
/* Trains every trial: the features are embedded (or found in the cache) once, then trials with the
 * same batch size and dropout rate train together over shared batches, stacks in parallel. Under
 * mpirun (the trials' fit.collectives) the ranks embed their shares of the rows and all get every
 * row; each trial is trained whole by one rank (the same for a resume with as many ranks), so its
 * results equal one process's exactly, and every rank ends with every trial's results. Each
 * trial writes its out_path and fit.log_path as ftl_train_run would, byte for byte the same model
 * (a halted trial: as ftl_train_run with --epochs at its rung), then OUT.result.json (its result;
 * its presence marks the trial done). results[count] say how each went; on an error, trials already
 * done keep their files and the others their checkpoints. */
ftl_status ftl_sweep_run(const ftl_train_options *trials, int count, const ftl_sweep_run_options *options,
                         ftl_sweep_trial_result *results);

/* Writes trial's model (model_path on the rank `owner` that trained it, its results' rank) to `to`
 * on rank 0, through a temporary name: under mpirun the owner sends it. Every rank calls it.
 * replace: a file at `to` is replaced (--overwrite, --resume); else one that another run made there
 * meanwhile is left as it is (FTL_E_EXISTS, this model kept beside it). */
ftl_status ftl_sweep_copy_model(const ftl_collectives *collectives, const char *model_path, int owner, const char *to,
                                bool replace);
/* Before any work: no output of the sweep (best_path, table_path and json_path, log_path, each
 * trial's model, log, checkpoints and caches) is one of its inputs or another output. NULLs are
 * skipped. FTL_E_INVALID_ARG naming both paths. */
ftl_status ftl_sweep_check_paths(const ftl_train_options *trials, int count, const char *best_path, const char *table_path,
                                 const char *json_path, const char *log_path);

#ifdef __cplusplus
}
#endif

#endif
