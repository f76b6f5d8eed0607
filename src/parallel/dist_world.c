/* The process group: which transport runs, started once per process by the CLI. */
#include "ftl/dist.h"
#include "parallel/transport.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static const ftl_collectives single_process = {.rank = 0, .world_size = 1, .local_rank = 0, .local_size = 1};
static ftl_collectives world_table;
static const ftl_collectives *world = &single_process;
static bool started_mpi;
static double stall_timeout_s = 60; /* what the transport was given (the NCCL watch reads it) */

void ftl_dist_options_init(ftl_dist_options *o) {
    memset(o, 0, sizeof *o);
    o->stall_timeout_s = 60;
    o->max_message_bytes = (size_t)1 << 30;
}

static int env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end == '\0' && n >= 0 && n < (1 << 24) ? (int)n : -1;
}

void ftl_dist_probe_launcher(ftl_dist_info *info) {
    memset(info, 0, sizeof *info);
    info->mpi_built = dist_transport_available();
    info->transport = info->library = dist_transport_name();
    int size = env_int("OMPI_COMM_WORLD_SIZE");
    if (size < 0) size = env_int("PMI_SIZE");
    if (size < 0 && getenv("PMIX_RANK")) size = env_int("PMIX_SIZE") > 0 ? env_int("PMIX_SIZE") : 1;
    /* SLURM_NTASKS is also set in a batch script itself; only a job step (srun) launches ranks. */
    if (size < 0 && getenv("SLURM_STEP_ID")) size = env_int("SLURM_NTASKS");
    info->launched = size >= 1;
    info->launcher_size = size >= 1 ? size : 1;
}

ftl_dist_info ftl_dist_get_info(void) {
    ftl_dist_info info;
    ftl_dist_probe_launcher(&info);
    if (!started_mpi) info.transport = info.mpi_built ? "single process (no launcher)" : dist_transport_name();
    return info;
}

ftl_status ftl_dist_init(const ftl_dist_options *options, const ftl_collectives **out) {
    ftl_dist_options defaults;
    if (!options) {
        ftl_dist_options_init(&defaults);
        options = &defaults;
    }
    if (started_mpi) {
        *out = world;
        return FTL_OK;
    }
    ftl_dist_info info;
    ftl_dist_probe_launcher(&info);
    if (!info.launched || (!info.mpi_built && info.launcher_size == 1)) {
        world = &single_process;
        *out = world;
        return FTL_OK;
    }
    if (!info.mpi_built)
        return ftl_fail(FTL_E_UNSUPPORTED,
                        "started by a launcher with %d ranks, but this ftl was built without MPI, so every rank would "
                        "train alone: install Open MPI (scripts/install_deps.sh build installs libopenmpi-dev) and "
                        "rebuild (make clean && make); `ftl --version` says which build you have",
                        info.launcher_size);
    FTL_TRY(dist_transport_start(options, &world_table));
    stall_timeout_s = options->stall_timeout_s;
    started_mpi = true;
    world = &world_table;
    ftl_log_set_rank(world->rank, world->world_size);
    ftl_set_ranks_on_host(world->local_size);
    *out = world;
    return FTL_OK;
}

const ftl_collectives *ftl_dist_world(void) { return world; }

void ftl_dist_set_stall_timeout(double seconds) {
    stall_timeout_s = seconds;
    if (started_mpi) dist_transport_set_stall_timeout(&world_table, seconds);
}

double ftl_dist_stall_timeout_s(void) { return stall_timeout_s; }

ftl_status ftl_dist_finalize(void) {
    if (!started_mpi) return FTL_OK;
    ftl_status st = dist_transport_finalize(&world_table);
    started_mpi = false;
    world = &single_process;
    return st;
}
