/* Open MPI behind ftl_collectives. Every collective is non-blocking (MPI_I*) and waited for by
 * one loop, the stall inspector: it polls the request, answers the other ranks' notices, warns
 * at half the stall timeout and aborts the job at the timeout, naming the ranks that have not
 * joined. Notices travel on a second communicator, so they never mix with the data:
 *   WAITING(seq)  "I have waited a while in collective number seq" (sent at half the timeout,
 *                 and by any rank that sees such a notice for the collective it is in), so every
 *                 waiting rank knows who else is there and who is missing;
 *   BUSY(seq)     "I am in a long phase before collective seq" (ftl_dist_phase_begin): waiters
 *                 wait for that rank without a limit, saying what it is doing.
 * On the fast path (the collective completes quickly) no notice is sent at all. */
#include "parallel/transport.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/timing.h"

#include <mpi.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

enum { NOTICE_TAG = 7, GATHER_TAG = 11, WHAT_LEN = 64, HOST_LEN = 64 };
/* How long MPI_Abort gets to end this process before the rank exits by itself. */
enum { ABORT_GRACE_S = 5 };
enum { NOTICE_WAITING = 1, NOTICE_BUSY = 2, NOTICE_DONE = 3 };

typedef struct notice {
    int32_t type, rank;
    int64_t seq, step;
    char what[WHAT_LEN];
} notice;

typedef struct pending_send {
    MPI_Request request;
    notice message;
} pending_send;

typedef struct mpi_group {
    MPI_Comm work, control;
    int rank, size;
    int64_t seq;                  /* collectives this rank has entered */
    int64_t step;
    char what[WHAT_LEN];          /* what the current collectives are for */
    double stall_timeout;
    size_t max_message;
    int64_t *waiting_seq;         /* per rank: the newest collective it said it waits in, -1 */
    int64_t *busy_seq;            /* per rank: the collective its long phase precedes, -1 */
    char (*busy_what)[WHAT_LEN];
    double *joined_at;            /* when a busy rank announced it joined */
    int64_t *waiting_step;
    char (*waiting_what)[WHAT_LEN];
    pending_send *sends;
    int send_count, send_cap;
    bool in_phase;
    char phase[WHAT_LEN];
    char (*hosts)[HOST_LEN];      /* per rank: its host name */
    bool several_hosts;           /* messages name the host of a rank only when the job spans hosts */
    char label[96];               /* this rank's name in messages */
} mpi_group;

static mpi_group group;

/* "1" or, in a job across hosts, "1 (node7)": a rank as messages name it. */
static const char *rank_name(const mpi_group *g, int r, char *buf, size_t cap) {
    if (g->several_hosts && g->hosts && r >= 0 && r < g->size) snprintf(buf, cap, "%d (%s)", r, g->hosts[r]);
    else snprintf(buf, cap, "%d", r);
    return buf;
}

/* MPI_Abort may neither return nor end this process (its daemon unreachable, the launcher
 * gone): a guard thread then exits after ABORT_GRACE_S, removing temporaries, so no rank
 * outlives a failed job. FTL_TEST_ABORT_HANGS makes MPI_Abort "hang" to test the guard. */
static int abort_code = 1;

static void *abort_guard(void *arg) {
    (void)arg;
    struct timespec left = {ABORT_GRACE_S, 0};
    while (nanosleep(&left, &left) != 0) { /* a signal cut it short: sleep the rest */
    }
    char me[96];
    fprintf(stderr, "ftl: error: rank %s: MPI_Abort has not ended this process in %d s; exiting\n",
            rank_name(&group, group.rank, me, sizeof me), ABORT_GRACE_S);
    fflush(stderr);
    ftl_exit_removing_temporaries(abort_code);
    return NULL;
}

static _Noreturn void abort_world(int code) {
    fflush(stderr);
    fflush(stdout);
    abort_code = code ? code : 1;
    pthread_t guard;
    if (pthread_create(&guard, NULL, abort_guard, NULL) == 0) pthread_detach(guard);
    if (getenv("FTL_TEST_ABORT_HANGS"))
        for (;;) pause();
    MPI_Abort(MPI_COMM_WORLD, abort_code);
    ftl_exit_removing_temporaries(abort_code); /* MPI_Abort returned */
}

static ftl_status mpi_failed(int code, const char *call) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    return ftl_fail(FTL_E_IO, "rank %d: %s failed: %.*s", group.rank, call, len, text);
}

/* MPI holds the address of every pending send's message: slots are never moved while one is
 * pending; the array is reused only once all of them have completed. */
static void reap_sends(mpi_group *g) {
    bool all_done = true;
    for (int i = 0; i < g->send_count; i++) {
        int done = 0;
        if (g->sends[i].request != MPI_REQUEST_NULL) MPI_Test(&g->sends[i].request, &done, MPI_STATUS_IGNORE);
        all_done = all_done && g->sends[i].request == MPI_REQUEST_NULL;
    }
    if (all_done) g->send_count = 0;
}

/* Sends one notice to every other rank (non-blocking; the buffers live until sent). */
static void send_notice(mpi_group *g, int type, int64_t seq, const char *what) {
    reap_sends(g);
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank) continue;
        if (g->send_count == g->send_cap) {
            /* Finish every pending send before the array is reused or moves. */
            for (int i = 0; i < g->send_count; i++) MPI_Wait(&g->sends[i].request, MPI_STATUS_IGNORE);
            g->send_count = 0;
            if (g->send_cap < 64 * g->size) {
                g->send_cap = g->send_cap ? 2 * g->send_cap : 4 * g->size;
                g->sends = ftl_xrealloc(g->sends, (size_t)g->send_cap * sizeof *g->sends);
            }
        }
        pending_send *p = &g->sends[g->send_count++];
        memset(&p->message, 0, sizeof p->message);
        p->message.type = type;
        p->message.rank = g->rank;
        p->message.seq = seq;
        p->message.step = g->step;
        snprintf(p->message.what, WHAT_LEN, "%s", what ? what : "");
        /* Notices are advice to the stall watch: one that cannot be sent is dropped (its request
         * made null, so reaping never tests garbage); the collectives report real failures. */
        if (MPI_Isend(&p->message, (int)sizeof p->message, MPI_BYTE, r, NOTICE_TAG, g->control, &p->request) != MPI_SUCCESS)
            p->request = MPI_REQUEST_NULL;
    }
}

/* Receives every notice that has arrived. */
static void read_notices(mpi_group *g) {
    for (;;) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, NOTICE_TAG, g->control, &flag, &status) != MPI_SUCCESS || !flag) return;
        notice n;
        if (MPI_Recv(&n, (int)sizeof n, MPI_BYTE, status.MPI_SOURCE, NOTICE_TAG, g->control, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return; /* never act on an unfilled notice */
        int r = status.MPI_SOURCE;
        if (r < 0 || r >= g->size) continue;
        n.what[WHAT_LEN - 1] = '\0';
        if (n.type == NOTICE_WAITING && n.seq > g->waiting_seq[r]) {
            if (g->busy_seq[r] >= 0 && g->busy_seq[r] <= n.seq) g->joined_at[r] = ftl_now();
            g->waiting_seq[r] = n.seq;
            g->waiting_step[r] = n.step;
            snprintf(g->waiting_what[r], WHAT_LEN, "%s", n.what);
        } else if (n.type == NOTICE_BUSY) {
            g->busy_seq[r] = n.seq;
            snprintf(g->busy_what[r], WHAT_LEN, "%s", n.what);
        } else if (n.type == NOTICE_DONE) { /* back from its long phase: the usual limit again */
            g->busy_seq[r] = -1;
            g->joined_at[r] = ftl_now();
        }
    }
}

/* Non-blocking collectives progress only inside MPI calls: poll without sleeping for the first
 * second (yielding the core to other ranks on it), then every 200 us, which is cheap enough to
 * leave the cores to a rank that is still computing. */
static void pause_briefly(double waited) {
    if (waited < 1.0) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* The ranks that have not said they are in collective `seq` (excluding this one); *excused
 * counts those that announced a long phase before it. Writes a list like "1, 3" into out. */
static int missing_ranks(const mpi_group *g, int64_t seq, char *out, size_t cap, char *excused, size_t ecap,
                         int *excused_count) {
    int missing = 0;
    *excused_count = 0;
    out[0] = excused[0] = '\0';
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank || g->waiting_seq[r] >= seq) continue;
        if (g->busy_seq[r] == seq) {
            size_t n = strlen(excused);
            snprintf(excused + n, ecap - n, "%srank %d (%s)", *excused_count ? ", " : "", r, g->busy_what[r]);
            (*excused_count)++;
            continue;
        }
        size_t n = strlen(out);
        char name[96];
        snprintf(out + n, cap - n, "%s%s", missing ? ", " : "", rank_name(g, r, name, sizeof name));
        missing++;
    }
    return missing;
}

static void describe_position(const mpi_group *g, char *out, size_t cap) {
    if (g->step >= 0) snprintf(out, cap, "%s at step %lld", g->what[0] ? g->what : "a collective", (long long)g->step);
    else snprintf(out, cap, "%s", g->what[0] ? g->what : "a collective");
}

/* Waits for req with the stall inspector; the collective's sequence number is g->seq. */
static ftl_status wait_request(mpi_group *g, MPI_Request *req, const char *call) {
    double start = ftl_now();
    bool announced = false, warned = false, told_excused = false;
    int64_t seq = g->seq;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, call);
        if (done) break;
        read_notices(g);
        bool someone_waits = false;
        for (int r = 0; r < g->size && !someone_waits; r++) someone_waits = r != g->rank && g->waiting_seq[r] >= seq;
        double now = ftl_now(), waited = now - start;
        double T = g->stall_timeout;
        if (!announced && (someone_waits || (T > 0 && waited > T / 2))) {
            send_notice(g, NOTICE_WAITING, seq, g->what);
            announced = true;
        }
        if (T > 0 && waited > T / 2 + 0.1) {
            char missing[512], excused[1024], where[160], me[96];
            rank_name(g, g->rank, me, sizeof me);
            int excused_count;
            int n = missing_ranks(g, seq, missing, sizeof missing, excused, sizeof excused, &excused_count);
            describe_position(g, where, sizeof where);
            /* A rank back from a long phase restarts the clock for the others. */
            double since = start;
            for (int r = 0; r < g->size; r++)
                if (g->joined_at[r] > since) since = g->joined_at[r];
            if (n > 0 && now - since > T) {
                fprintf(stderr,
                        "ftl: error: rank %s: stalled for %.0f s in %s: rank%s %s %s not joined (see %s own messages); "
                        "aborting the job (--stall-timeout %g)\n",
                        me, now - start, where, n > 1 ? "s" : "", missing, n > 1 ? "have" : "has",
                        n > 1 ? "their" : "its", T);
                abort_world(1);
            }
            /* Everyone says it is in collective seq, yet it does not complete: the ranks are in
             * different collectives (a divergence bug), which would otherwise spin forever. */
            double hard = T + (T > 30 ? T : 30);
            if (n == 0 && excused_count == 0 && now - since > hard) {
                char where_all[1024] = "";
                for (int r = 0, at = 0; r < g->size && at < (int)sizeof where_all - 1; r++) {
                    if (r == g->rank) continue;
                    char other[96];
                    at += snprintf(where_all + at, sizeof where_all - (size_t)at, "%srank %s in %s at step %lld",
                                   at ? ", " : "", rank_name(g, r, other, sizeof other), g->waiting_what[r][0] ? g->waiting_what[r] : "a collective",
                                   (long long)g->waiting_step[r]);
                }
                fprintf(stderr,
                        "ftl: error: rank %s: %s (collective %lld) has not completed in %.0f s although every rank "
                        "has reached collective %lld (%s): the ranks are in different collectives; aborting the job\n",
                        me, where, (long long)seq, now - start, (long long)seq, where_all);
                abort_world(1);
            }
            if (n > 0 && !warned) {
                fprintf(stderr, "ftl: warning: rank %s: waiting %.0f s in %s for rank%s %s (the job aborts after %g s)\n",
                        me, waited, where, n > 1 ? "s" : "", missing, T);
                fflush(stderr);
                warned = true;
            }
            if (excused_count > 0 && !told_excused) {
                fprintf(stderr, "ftl: rank %s: waiting for %s\n", me, excused);
                fflush(stderr);
                told_excused = true;
            }
        }
        pause_briefly(waited);
    }
    g->seq++;
    return FTL_OK;
}

/* ---------------------------------------------------------------- the collectives */

static size_t chunk_elements(const mpi_group *g, size_t element_size) {
    size_t n = g->max_message / element_size;
    if (n > INT_MAX) n = INT_MAX;
    return n ? n : 1;
}

/* Large buffers: a stall-inspected agreement proves every rank has arrived at the same call,
 * then the blocking MPI_Allreduce runs Open MPI's tuned algorithm (2.6x the non-blocking one for
 * 84 MB on shared memory). It can no longer stall, since everyone is there with the same call; a
 * rank dying inside it ends the job through the launcher. */
enum { BLOCKING_FROM_BYTES = 256 << 10 };

/* Every rank says which blocking collective it is about to enter (kind, element size, count,
 * root) in a small watched allreduce of max(sig) and max(-sig): ranks that diverged (a bug) get
 * an error naming both calls instead of a blocking call that would never return. */
static ftl_status agree_on_call(mpi_group *g, const char *kind, size_t element_size, size_t count, int root) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the call's description */
    char desc[96];
    if (root < 0) snprintf(desc, sizeof desc, "%s of %zu x %zu bytes", kind, count, element_size);
    else snprintf(desc, sizeof desc, "%s of %zu x %zu bytes from rank %d", kind, count, element_size, root);
    for (const char *p = desc; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    int64_t sig = (int64_t)(h >> 2), v[2] = {sig, -sig};
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, g->work, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Iallreduce");
    FTL_TRY(wait_request(g, &req, "MPI_Iallreduce"));
    if (v[0] != sig || -v[1] != sig) {
        char where[160];
        describe_position(g, where, sizeof where);
        return ftl_fail(FTL_E_INTERNAL, "rank %d: in %s the ranks entered different collectives (this one: a blocking %s); "
                        "stopping instead of waiting forever", g->rank, where, desc);
    }
    return FTL_OK;
}

static ftl_status allreduce(void *ctx, void *data, size_t count, MPI_Datatype type, size_t element_size) {
    mpi_group *g = ctx;
    size_t chunk = chunk_elements(g, element_size);
    for (size_t at = 0; at < count; at += chunk) {
        size_t n = count - at < chunk ? count - at : chunk;
        void *p = (char *)data + at * element_size;
        if (n * element_size >= BLOCKING_FROM_BYTES) {
            FTL_TRY(agree_on_call(g, "sum", element_size, n, -1));
            int rc = MPI_Allreduce(MPI_IN_PLACE, p, (int)n, type, MPI_SUM, g->work);
            if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Allreduce");
            continue;
        }
        MPI_Request req;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)n, type, MPI_SUM, g->work, &req);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Iallreduce");
        FTL_TRY(wait_request(g, &req, "MPI_Iallreduce"));
    }
    if (count == 0) { /* still a collective: every rank must agree on the sequence */
        MPI_Request req;
        int rc = MPI_Ibarrier(g->work, &req);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Ibarrier");
        FTL_TRY(wait_request(g, &req, "MPI_Ibarrier"));
    }
    return FTL_OK;
}

static ftl_status allreduce_f32(void *ctx, float *data, size_t count) { return allreduce(ctx, data, count, MPI_FLOAT, 4); }
static ftl_status allreduce_f64(void *ctx, double *data, size_t count) { return allreduce(ctx, data, count, MPI_DOUBLE, 8); }
static ftl_status allreduce_i64(void *ctx, int64_t *data, size_t count) {
    return allreduce(ctx, data, count, MPI_INT64_T, 8);
}

static ftl_status broadcast(void *ctx, void *data, size_t bytes, int root) {
    mpi_group *g = ctx;
    size_t chunk = chunk_elements(g, 1);
    size_t at = 0;
    do {
        size_t n = bytes - at < chunk ? bytes - at : chunk;
        if (n >= BLOCKING_FROM_BYTES) { /* as allreduce: everyone arrived, then the tuned call */
            FTL_TRY(agree_on_call(g, "broadcast", 1, n, root));
            int rc = MPI_Bcast((char *)data + at, (int)n, MPI_BYTE, root, g->work);
            if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Bcast");
            at += n;
            continue;
        }
        MPI_Request req;
        int rc = MPI_Ibcast((char *)data + at, (int)n, MPI_BYTE, root, g->work, &req);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Ibcast");
        int64_t seq = g->seq;
        FTL_TRY(wait_request(g, &req, "MPI_Ibcast"));
        if (g->size > 2) {
            /* The root (and ranks it sends to directly) finish a small broadcast before the relays
             * do, and would be named as missing by a rank still waiting for its relay: all stay
             * in it, under the same sequence number, until everyone has it (as gather does). */
            g->seq = seq;
            rc = MPI_Ibarrier(g->work, &req);
            if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Ibarrier");
            FTL_TRY(wait_request(g, &req, "MPI_Ibarrier"));
        }
        at += n;
    } while (at < bytes);
    return FTL_OK;
}

static ftl_status barrier(void *ctx) {
    mpi_group *g = ctx;
    MPI_Request req;
    int rc = MPI_Ibarrier(g->work, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Ibarrier");
    return wait_request(g, &req, "MPI_Ibarrier");
}

/* Sizes by allgather, then point-to-point chunks to root, all waited for at once. */
static ftl_status gather(void *ctx, const void *data, size_t bytes, int root, uint8_t **out, size_t *sizes) {
    mpi_group *g = ctx;
    if (out) *out = NULL;
    int64_t *all = ftl_xcalloc((size_t)g->size, sizeof *all);
    all[g->rank] = (int64_t)bytes;
    ftl_status st = allreduce_i64(ctx, all, (size_t)g->size);
    if (st != FTL_OK) {
        free(all);
        return st;
    }
    size_t chunk = chunk_elements(g, 1), total = 0;
    for (int r = 0; r < g->size; r++) total += (size_t)all[r];
    size_t requests = 0;
    if (g->rank == root) {
        for (int r = 0; r < g->size; r++)
            if (r != root) requests += ((size_t)all[r] + chunk - 1) / chunk;
    } else {
        requests = (bytes + chunk - 1) / chunk;
    }
    MPI_Request *reqs = ftl_xcalloc(requests ? requests : 1, sizeof *reqs);
    uint8_t *buffer = NULL;
    size_t k = 0;
    int rc = MPI_SUCCESS;
    if (g->rank == root) {
        buffer = ftl_xmalloc(total ? total : 1);
        size_t offset = 0;
        for (int r = 0; r < g->size; r++) {
            if (r == root && bytes > 0) memcpy(buffer + offset, data, bytes);
            else
                for (size_t at = 0; at < (size_t)all[r] && rc == MPI_SUCCESS; at += chunk) {
                    size_t n = (size_t)all[r] - at < chunk ? (size_t)all[r] - at : chunk;
                    rc = MPI_Irecv(buffer + offset + at, (int)n, MPI_BYTE, r, GATHER_TAG, g->work, &reqs[k++]);
                }
            if (sizes) sizes[r] = (size_t)all[r];
            offset += (size_t)all[r];
        }
    } else {
        for (size_t at = 0; at < bytes && rc == MPI_SUCCESS; at += chunk) {
            size_t n = bytes - at < chunk ? bytes - at : chunk;
            rc = MPI_Isend((const char *)data + at, (int)n, MPI_BYTE, root, GATHER_TAG, g->work, &reqs[k++]);
        }
    }
    if (rc != MPI_SUCCESS) st = mpi_failed(rc, "MPI_Isend/MPI_Irecv");
    /* The chunks of one gather count as one collective for the stall inspector. */
    int64_t seq = g->seq;
    for (size_t i = 0; st == FTL_OK && i < k; i++) {
        g->seq = seq;
        st = wait_request(g, &reqs[i], "gather");
    }
    g->seq = seq;
    if (st == FTL_OK) {
        MPI_Request req; /* ends the gather on every rank at the same sequence number */
        rc = MPI_Ibarrier(g->work, &req);
        st = rc == MPI_SUCCESS ? wait_request(g, &req, "MPI_Ibarrier") : mpi_failed(rc, "MPI_Ibarrier");
    }
    free(all);
    if (st != FTL_OK) {
        /* Requests may still be pending: their buffers stay allocated (the job is being aborted). */
        return st;
    }
    free(reqs);
    if (out) *out = buffer;
    else free(buffer);
    return FTL_OK;
}

static ftl_status allgather(void *ctx, const void *data, size_t bytes, uint8_t **out, size_t *sizes) {
    mpi_group *g = ctx;
    uint8_t *all = NULL;
    size_t *local_sizes = ftl_xcalloc((size_t)g->size, sizeof *local_sizes);
    ftl_status st = gather(ctx, data, bytes, 0, &all, local_sizes);
    int64_t *sz = ftl_xcalloc((size_t)g->size, sizeof *sz);
    if (g->rank == 0)
        for (int r = 0; r < g->size; r++) sz[r] = (int64_t)local_sizes[r];
    if (st == FTL_OK) st = broadcast(ctx, sz, (size_t)g->size * sizeof *sz, 0);
    size_t total = 0;
    for (int r = 0; r < g->size; r++) total += (size_t)sz[r];
    if (st == FTL_OK && g->rank != 0) all = ftl_xmalloc(total ? total : 1);
    if (st == FTL_OK && total > 0) st = broadcast(ctx, all, total, 0);
    if (st == FTL_OK && sizes)
        for (int r = 0; r < g->size; r++) sizes[r] = (size_t)sz[r];
    free(sz);
    free(local_sizes);
    if (st != FTL_OK) {
        free(all);
        return st;
    }
    *out = all;
    return FTL_OK;
}

static void abort_job(void *ctx, int code, const char *message) {
    mpi_group *g = ctx;
    char me[96];
    if (message && *message) fprintf(stderr, "ftl: error: rank %s: %s\n", rank_name(g, g->rank, me, sizeof me), message);
    abort_world(code);
}

static void set_context(void *ctx, int64_t step, const char *what) {
    mpi_group *g = ctx;
    g->step = step;
    snprintf(g->what, WHAT_LEN, "%s", what ? what : "");
}

static void phase_begin(void *ctx, const char *what) {
    mpi_group *g = ctx;
    g->in_phase = true;
    snprintf(g->phase, WHAT_LEN, "%s", what ? what : "a long phase");
    send_notice(g, NOTICE_BUSY, g->seq, g->phase);
}

static void phase_end(void *ctx) {
    mpi_group *g = ctx;
    if (!g->in_phase) return;
    g->in_phase = false;
    send_notice(g, NOTICE_DONE, g->seq, g->phase);
}

/* ---------------------------------------------------------------- start / stop */

bool dist_transport_available(void) { return true; }

const char *dist_transport_name(void) {
    static char name[64];
#ifdef OMPI_MAJOR_VERSION
    snprintf(name, sizeof name, "Open MPI %d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#else
    snprintf(name, sizeof name, "MPI %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
    return name;
}

ftl_status dist_transport_start(const ftl_dist_options *o, ftl_collectives *t) {
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED) /* only the main thread calls MPI, but other threads exist */
        return ftl_fail(FTL_E_UNSUPPORTED, "this MPI library offers thread level %d, ftl needs MPI_THREAD_FUNNELED", provided);
    mpi_group *g = &group;
    memset(g, 0, sizeof *g);
    MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g->size);
    MPI_Comm_dup(MPI_COMM_WORLD, &g->work);
    MPI_Comm_dup(MPI_COMM_WORLD, &g->control);
    MPI_Comm_set_errhandler(g->work, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(g->control, MPI_ERRORS_RETURN);
    /* Ranks on this host: from Open MPI's environment when it says (MPI_Comm_split_type over
     * shared memory crashed Open MPI 4.1.4 with two ranks per network namespace), else asked. */
    int local_rank = 0, local_size = 1;
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (lr && ls && atoi(ls) >= 1) {
        local_rank = atoi(lr);
        local_size = atoi(ls);
    } else {
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, &local_rank);
            MPI_Comm_size(node, &local_size);
            MPI_Comm_free(&node);
        }
    }
    /* Every rank's host name, so that messages about a rank can say where it runs. */
    g->hosts = ftl_xcalloc((size_t)g->size, sizeof *g->hosts);
    char host[HOST_LEN] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    if (MPI_Allgather(host, HOST_LEN, MPI_CHAR, g->hosts, HOST_LEN, MPI_CHAR, g->work) == MPI_SUCCESS) {
        for (int r = 0; r < g->size; r++) {
            g->hosts[r][HOST_LEN - 1] = '\0';
            if (strcmp(g->hosts[r], g->hosts[0]) != 0) g->several_hosts = true;
        }
    } else {
        free(g->hosts);
        g->hosts = NULL;
    }
    g->stall_timeout = o->stall_timeout_s;
    g->max_message = o->max_message_bytes ? o->max_message_bytes : (size_t)1 << 30;
    g->step = -1;
    size_t n = (size_t)g->size;
    g->waiting_seq = ftl_xmalloc(n * sizeof *g->waiting_seq);
    g->busy_seq = ftl_xmalloc(n * sizeof *g->busy_seq);
    g->busy_what = ftl_xcalloc(n, sizeof *g->busy_what);
    g->joined_at = ftl_xcalloc(n, sizeof *g->joined_at);
    g->waiting_step = ftl_xcalloc(n, sizeof *g->waiting_step);
    g->waiting_what = ftl_xcalloc(n, sizeof *g->waiting_what);
    for (size_t r = 0; r < n; r++) g->waiting_seq[r] = g->busy_seq[r] = -1;
    *t = (ftl_collectives){
        .ctx = g, .rank = g->rank, .label = rank_name(g, g->rank, g->label, sizeof g->label), .world_size = g->size, .local_rank = local_rank, .local_size = local_size,
        .allreduce_f32 = allreduce_f32, .allreduce_f64 = allreduce_f64, .allreduce_i64 = allreduce_i64,
        .broadcast = broadcast, .gather = gather, .allgather = allgather, .barrier = barrier, .abort = abort_job,
        .set_context = set_context, .phase_begin = phase_begin, .phase_end = phase_end,
    };
    return FTL_OK;
}

void dist_transport_set_stall_timeout(ftl_collectives *t, double seconds) {
    mpi_group *g = t->ctx;
    if (g) g->stall_timeout = seconds;
}

ftl_status dist_transport_finalize(ftl_collectives *t) {
    mpi_group *g = t->ctx;
    if (!g) return FTL_OK;
    set_context(g, -1, "the end of the job");
    ftl_status st = barrier(g);
    read_notices(g);
    for (int i = 0; i < g->send_count; i++)
        if (g->sends[i].request != MPI_REQUEST_NULL) MPI_Request_free(&g->sends[i].request);
    MPI_Comm_free(&g->work);
    MPI_Comm_free(&g->control);
    MPI_Finalize();
    free(g->waiting_seq);
    free(g->busy_seq);
    free(g->busy_what);
    free(g->joined_at);
    free(g->waiting_step);
    free(g->waiting_what);
    free(g->hosts);
    g->hosts = NULL;
    g->several_hosts = false;
    free(g->sends);
    t->ctx = NULL;
    return st;
}
