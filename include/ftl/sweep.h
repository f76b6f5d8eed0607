/* ftl public API: the search space of a hyperparameter sweep over the head's settings, as
 * `--grid lr=1e-3,4e-3,1e-2` (every combination) or `--range lr=1e-4:1e-1:log` (drawn for a seeded
 * random search), validated before any work and expanded into trials. The runner that trains the
 * trials (stacked heads on the cached features) builds on this. */
#ifndef FTL_SWEEP_H
#define FTL_SWEEP_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>

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
    FTL_SWEEP_PARAM_COUNT
} ftl_sweep_param;

enum { FTL_SWEEP_MAX_VALUES = 64 };

typedef struct ftl_sweep_space {
    int grid_count[FTL_SWEEP_PARAM_COUNT]; /* values of a --grid (0: none) */
    double grid[FTL_SWEEP_PARAM_COUNT][FTL_SWEEP_MAX_VALUES];
    bool ranged[FTL_SWEEP_PARAM_COUNT];    /* a --range: drawn in [lo, hi), log-uniform when log_scale */
    double lo[FTL_SWEEP_PARAM_COUNT], hi[FTL_SWEEP_PARAM_COUNT];
    bool log_scale[FTL_SWEEP_PARAM_COUNT];
} ftl_sweep_space;

/* One trial: the parameters it sets (the others keep the run's own settings). */
typedef struct ftl_sweep_trial {
    bool set[FTL_SWEEP_PARAM_COUNT];
    double value[FTL_SWEEP_PARAM_COUNT];
} ftl_sweep_trial;

/* "lr", "dropout", "batch", "optimizer", "momentum", "warmup", "weight-decay". */
const char *ftl_sweep_param_name(ftl_sweep_param param);
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

#ifdef __cplusplus
}
#endif

#endif
