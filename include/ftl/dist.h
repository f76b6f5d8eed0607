/* ftl public API: the collectives every job uses under data parallelism (the article's steps 5-6).
 *
 * One table, filled by src/parallel: Open MPI when ftl is built with it and started by a launcher
 * (mpirun, srun), else a single-process stub. The trainer, prep, embed and eval only call the
 * ftl_dist_* helpers below, which also work on a NULL table (one process).
 *
 * Rules every caller follows:
 * - All ranks call the same collectives in the same order (the sequence numbers must match).
 * - Only the main thread calls them (MPI_THREAD_FUNNELED).
 * - No rank waits longer than the stall timeout in one collective: the waiting ranks name the
 *   missing ranks and the step, then the job is aborted (Horovod's stall inspector). A long phase
 *   that may legitimately take different times on different ranks (building a cache part, writing
 *   a checkpoint) is announced with ftl_dist_phase_begin: waiters then wait for that rank without
 *   a limit, saying what it is doing, until it joins (a crashed rank still ends the job: the
 *   launcher kills the others when one process dies).
 * - A rank that hits an error calls ftl_dist_abort with its message: every rank stops. */
#ifndef FTL_DIST_H
#define FTL_DIST_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ftl_collectives {
    void *ctx;
    int rank, world_size;
    int local_rank, local_size;   /* among the ranks on this host */
    /* This rank as messages name it: "1", or "1 (node7)" in a job across hosts; NULL: the number. */
    const char *label;
    /* In-place sums over all ranks. */
    ftl_status (*allreduce_f32)(void *ctx, float *data, size_t count);
    ftl_status (*allreduce_f64)(void *ctx, double *data, size_t count);
    ftl_status (*allreduce_i64)(void *ctx, int64_t *data, size_t count);
    /* root's bytes to every rank (same size on every rank). */
    ftl_status (*broadcast)(void *ctx, void *data, size_t bytes, int root);
    /* Every rank's bytes (sizes may differ) concatenated in rank order: *out (malloc'd) and
     * sizes[world_size] on root (all ranks for allgather); other ranks get NULL. */
    ftl_status (*gather)(void *ctx, const void *data, size_t bytes, int root, uint8_t **out, size_t *sizes);
    ftl_status (*allgather)(void *ctx, const void *data, size_t bytes, uint8_t **out, size_t *sizes);
    ftl_status (*barrier)(void *ctx);
    /* Prints "ftl: error: rank R: message" (unless message is NULL: already said) and ends every
     * rank with exit code `code`. */
    void (*abort)(void *ctx, int code, const char *message);
    /* What the next collectives belong to, for stall messages ("step 12 of epoch 3"). */
    void (*set_context)(void *ctx, int64_t step, const char *what);
    /* A long phase starts / ends on this rank (see the rules above). */
    void (*phase_begin)(void *ctx, const char *what);
    void (*phase_end)(void *ctx);
} ftl_collectives;

/* How the process was started and what this build can do. */
typedef struct ftl_dist_info {
    bool mpi_built;          /* ftl was built with Open MPI */
    bool launched;           /* started by mpirun / srun (an MPI environment was found) */
    int launcher_size;       /* ranks the launcher announced (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS) */
    const char *transport;   /* "Open MPI 4.1.4" or "single process" */
    const char *library;     /* what the build links: "Open MPI 4.1.4", or "single process (built without MPI)" */
} ftl_dist_info;

typedef struct ftl_dist_options {
    double stall_timeout_s;  /* default 60 (Horovod's); 0 disables the stall inspector */
    size_t max_message_bytes;/* split buffers into MPI calls of at most this (default 1 GiB) */
} ftl_dist_options;

void ftl_dist_options_init(ftl_dist_options *options);

/* Starts the process group once per process: MPI when launched with an MPI build (MPI_Init is
 * never called by a process that no launcher started), else the single-process group. A build
 * without MPI started by a launcher with more than one rank refuses, saying how to build with
 * MPI. Sets the log rank and the default thread count (host cores / ranks on the host). */
ftl_status ftl_dist_init(const ftl_dist_options *options, const ftl_collectives **world);
/* The group ftl_dist_init made (the single-process group before it). */
const ftl_collectives *ftl_dist_world(void);
/* Waits for every rank (with the stall inspector) and shuts MPI down. */
ftl_status ftl_dist_finalize(void);
ftl_dist_info ftl_dist_get_info(void);
/* Reads the launcher's environment only (no MPI): what ftl_dist_init would see. */
void ftl_dist_probe_launcher(ftl_dist_info *info);
/* The stall timeout now in force (tests and --stall-timeout change it). */
void ftl_dist_set_stall_timeout(double seconds);
double ftl_dist_stall_timeout_s(void);

/* ---- helpers: NULL or single-rank tables do the local thing ---- */

static inline int ftl_dist_rank(const ftl_collectives *c) { return c ? c->rank : 0; }
static inline int ftl_dist_size(const ftl_collectives *c) { return c && c->world_size > 0 ? c->world_size : 1; }
static inline bool ftl_dist_active(const ftl_collectives *c) { return c && c->world_size > 1; }

ftl_status ftl_dist_allreduce_f32(const ftl_collectives *c, float *data, size_t count);
ftl_status ftl_dist_allreduce_f64(const ftl_collectives *c, double *data, size_t count);
ftl_status ftl_dist_allreduce_i64(const ftl_collectives *c, int64_t *data, size_t count);
ftl_status ftl_dist_broadcast(const ftl_collectives *c, void *data, size_t bytes, int root);
/* Broadcasts a malloc'd buffer of any size from root: other ranks get a malloc'd copy. */
ftl_status ftl_dist_broadcast_blob(const ftl_collectives *c, uint8_t **data, size_t *bytes, int root);
ftl_status ftl_dist_gather(const ftl_collectives *c, const void *data, size_t bytes, int root, uint8_t **out,
                           size_t *sizes);
ftl_status ftl_dist_allgather(const ftl_collectives *c, const void *data, size_t bytes, uint8_t **out, size_t *sizes);
ftl_status ftl_dist_barrier(const ftl_collectives *c);
void ftl_dist_set_context(const ftl_collectives *c, int64_t step, const char *what);
void ftl_dist_phase_begin(const ftl_collectives *c, const char *what);
void ftl_dist_phase_end(const ftl_collectives *c);
/* The sum over ranks of one status flag: whether any rank failed (a cheap agreement point). */
ftl_status ftl_dist_any_failed(const ftl_collectives *c, bool failed_here, bool *any);

/* Rank 0's `value` is compared with every rank's; a rank that differs fails with
 * "rank R has WHAT \"mine\" but rank 0 has \"theirs\"" (all ranks get an error status, the one
 * that differs the message). Used at start for arguments, datasets and backbones. */
ftl_status ftl_dist_check_same(const ftl_collectives *c, const char *what, const char *value);
/* Compares the command lines (argv) of all ranks; a mismatch names the option that differs. */
ftl_status ftl_dist_check_arguments(const ftl_collectives *c, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
