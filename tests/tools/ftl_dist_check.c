/* Checks the collectives under a real launcher: `mpirun -np N ftl_dist_check [--chunk BYTES]`.
 * Every rank computes what each collective must give from the rank count alone (exact for
 * integers, a tolerance for float sums) and prints `FAIL name: why` on a mismatch; rank 0 prints
 * `ok name` for each check that passed on every rank (agreed with an allreduce), and the exit
 * status is 1 when anything failed. `--stall-rank R --sleep S` makes rank R sleep S seconds
 * before a barrier instead (the stall inspector test); with `--stall-in broadcast`, before a small
 * broadcast that the others leave to compute; `--stall-in diverge`: rank 1 enters another large
 * collective than the others. */
#include "ftl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const ftl_collectives *world;
static int failures;

static void report(const char *name, bool ok_here, const char *why) {
    if (!ok_here) printf("FAIL %s: rank %d: %s\n", name, world->rank, why);
    bool any = false;
    if (ftl_dist_any_failed(world, !ok_here, &any) != FTL_OK) {
        printf("FAIL %s: rank %d: the agreement allreduce failed: %s\n", name, world->rank, ftl_last_error());
        any = true;
    }
    if (any) failures++;
    else if (world->rank == 0) printf("ok %s\n", name);
    fflush(stdout);
}

int main(int argc, char **argv) {
    ftl_dist_options o;
    ftl_dist_options_init(&o);
    int stall_rank = -1;
    double sleep_s = 0;
    const char *stall_in = "barrier";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--chunk") == 0) o.max_message_bytes = (size_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--stall-rank") == 0) stall_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--sleep") == 0) sleep_s = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--stall-timeout") == 0) o.stall_timeout_s = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--stall-in") == 0) stall_in = argv[i + 1];
    }
    if (ftl_dist_init(&o, &world) != FTL_OK) {
        fprintf(stderr, "ftl_dist_check: %s\n", ftl_last_error());
        return 1;
    }
    int r = world->rank, n = world->world_size;
    if (strcmp(stall_in, "diverge") == 0) {
        /* A bug's shape: rank 1 broadcasts 1.2 MB while the others sum 1.2 MB (both the blocking
         * path): every rank must fail naming the mismatch, none may wait forever. */
        size_t count = 300000;
        float *x = calloc(count, sizeof *x);
        ftl_dist_set_context(world, 3, "the test collective");
        ftl_status st = r == 1 ? ftl_dist_broadcast(world, x, count * sizeof *x, 0) : ftl_dist_allreduce_f32(world, x, count);
        fprintf(stderr, "rank %d: %s\n", r, st == FTL_OK ? "no error" : ftl_last_error());
        free(x);
        ftl_dist_finalize();
        return st == FTL_OK ? 0 : 1;
    }
    if (stall_rank >= 0 && strcmp(stall_in, "broadcast") == 0) {
        /* A small broadcast from rank 0 that rank R joins late; the others then compute (sleep)
         * instead of entering another collective, so only the watch inside the broadcast can
         * tell who is missing: it must name rank R alone. */
        if (r == stall_rank) sleep((unsigned)sleep_s);
        ftl_dist_set_context(world, 7, "the test broadcast");
        int64_t v = r == 0 ? 42 : 0;
        ftl_status st = ftl_dist_broadcast(world, &v, sizeof v, 0);
        printf("broadcast returned %d (value %lld) on rank %d\n", (int)st, (long long)v, r);
        fflush(stdout);
        if (r != stall_rank) sleep((unsigned)sleep_s);
        ftl_dist_finalize();
        return 0;
    }
    if (stall_rank >= 0) {
        if (r == stall_rank) sleep((unsigned)sleep_s);
        ftl_dist_set_context(world, 7, "the test barrier");
        ftl_status st = ftl_dist_barrier(world);
        printf("barrier returned %d on rank %d\n", (int)st, r);
        ftl_dist_finalize();
        return 0;
    }
    char why[256] = "";

    /* i64: exact sums of rank-dependent values, over a buffer spanning several chunks. */
    size_t count = 1000;
    int64_t *iv = malloc(count * sizeof *iv);
    for (size_t i = 0; i < count; i++) iv[i] = (int64_t)(r + 1) * (int64_t)(i + 1) + ((int64_t)1 << 40);
    bool ok = ftl_dist_allreduce_i64(world, iv, count) == FTL_OK;
    for (size_t i = 0; ok && i < count; i++) {
        int64_t want = (int64_t)n * (n + 1) / 2 * (int64_t)(i + 1) + (int64_t)n * ((int64_t)1 << 40);
        if (iv[i] != want) {
            ok = false;
            snprintf(why, sizeof why, "element %zu is %lld, expected %lld", i, (long long)iv[i], (long long)want);
        }
    }
    report("allreduce_i64_exact", ok, why);
    free(iv);

    /* f64 and f32: sums within rounding. */
    double *dv = malloc(count * sizeof *dv);
    float *fv = malloc(3 * count * sizeof *fv);
    for (size_t i = 0; i < count; i++) dv[i] = 0.1 * (r + 1) + (double)i;
    for (size_t i = 0; i < 3 * count; i++) fv[i] = 0.25f * (float)(r + 1) + (float)(i % 97) * 0.001f;
    ok = ftl_dist_allreduce_f64(world, dv, count) == FTL_OK && ftl_dist_allreduce_f32(world, fv, 3 * count) == FTL_OK;
    for (size_t i = 0; ok && i < count; i++) {
        double want = 0.1 * n * (n + 1) / 2 + (double)n * (double)i;
        if (fabs(dv[i] - want) > 1e-12 * fmax(1, fabs(want))) ok = false, snprintf(why, sizeof why, "f64[%zu] = %.17g, expected %.17g", i, dv[i], want);
    }
    for (size_t i = 0; ok && i < 3 * count; i++) {
        double want = 0.25 * n * (n + 1) / 2 + (double)n * (double)(i % 97) * 0.001;
        if (fabs(fv[i] - want) > 1e-5 * fmax(1, fabs(want))) ok = false, snprintf(why, sizeof why, "f32[%zu] = %.9g, expected %.9g", i, fv[i], want);
    }
    report("allreduce_f32_f64_within_rounding", ok, why);
    free(dv);
    free(fv);

    /* Large buffers take the blocking path (after a stall-inspected barrier): 1.2 MB of floats
     * summed and a 1 MB broadcast from the last rank. */
    size_t big = 300000;
    float *bv = malloc(big * sizeof *bv);
    uint8_t *bb = malloc(1 << 20);
    for (size_t i = 0; i < big; i++) bv[i] = (float)(r + 1) * (float)(i % 1000);
    for (size_t i = 0; i < (1 << 20); i++) bb[i] = (uint8_t)(r == n - 1 ? i * 13 : 0);
    ok = ftl_dist_allreduce_f32(world, bv, big) == FTL_OK && ftl_dist_broadcast(world, bb, 1 << 20, n - 1) == FTL_OK;
    for (size_t i = 0; ok && i < big; i++)
        if (bv[i] != (float)(n * (n + 1) / 2) * (float)(i % 1000)) ok = false, snprintf(why, sizeof why, "large f32[%zu] = %g", i, bv[i]);
    for (size_t i = 0; ok && i < (1 << 20); i++)
        if (bb[i] != (uint8_t)(i * 13)) ok = false, snprintf(why, sizeof why, "large broadcast byte %zu differs", i);
    report("large_buffers_blocking_path", ok, why);
    free(bv);
    free(bb);

    /* Broadcast from every root, a size that is not a multiple of the chunk. */
    ok = true;
    for (int root = 0; root < n && ok; root++) {
        uint8_t buf[3001];
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(r == root ? (i * 7 + (size_t)root) & 0xFF : 0xEE);
        ok = ftl_dist_broadcast(world, buf, sizeof buf, root) == FTL_OK;
        for (size_t i = 0; ok && i < sizeof buf; i++)
            if (buf[i] != (uint8_t)((i * 7 + (size_t)root) & 0xFF)) ok = false, snprintf(why, sizeof why, "root %d byte %zu differs", root, i);
    }
    report("broadcast_from_every_root", ok, why);

    /* Gather and allgather of variable sizes (rank r sends 1000 r + 3 bytes, rank 0 none when n > 1). */
    size_t mine = r == 0 && n > 1 ? 0 : (size_t)r * 1000 + 3;
    uint8_t *send = malloc(mine + 1);
    for (size_t i = 0; i < mine; i++) send[i] = (uint8_t)(r * 31 + (int)i);
    uint8_t *all = NULL;
    size_t *sizes = calloc((size_t)n, sizeof *sizes);
    for (int pass = 0; pass < 2; pass++) {
        ok = (pass == 0 ? ftl_dist_gather(world, send, mine, 0, &all, sizes) : ftl_dist_allgather(world, send, mine, &all, sizes)) == FTL_OK;
        bool check_here = pass == 1 || r == 0;
        size_t at = 0;
        for (int k = 0; ok && check_here && k < n; k++) {
            size_t want = k == 0 && n > 1 ? 0 : (size_t)k * 1000 + 3;
            if (sizes[k] != want) {
                ok = false;
                snprintf(why, sizeof why, "rank %d's part has %zu bytes, expected %zu", k, sizes[k], want);
            }
            for (size_t i = 0; ok && i < want; i++)
                if (all[at + i] != (uint8_t)(k * 31 + (int)i)) ok = false, snprintf(why, sizeof why, "rank %d byte %zu differs", k, i);
            at += want;
        }
        if (ok && !check_here && all) ok = false, snprintf(why, sizeof why, "a non-root rank got gather output");
        report(pass == 0 ? "gather_variable_sizes" : "allgather_variable_sizes", ok, why);
        free(all);
        all = NULL;
    }
    free(send);
    free(sizes);

    /* A blob only root knows the size of. */
    uint8_t *blob = NULL;
    size_t blob_size = 0;
    if (r == 0) {
        blob_size = 12345;
        blob = malloc(blob_size);
        for (size_t i = 0; i < blob_size; i++) blob[i] = (uint8_t)(i ^ 0x5A);
    }
    ok = ftl_dist_broadcast_blob(world, &blob, &blob_size, 0) == FTL_OK && blob_size == 12345;
    for (size_t i = 0; ok && i < blob_size; i++) ok = blob[i] == (uint8_t)(i ^ 0x5A);
    report("broadcast_blob_of_unknown_size", ok, "wrong size or bytes");
    free(blob);

    ok = ftl_dist_barrier(world) == FTL_OK;
    report("barrier", ok, ftl_last_error());
    ftl_dist_finalize();
    return failures ? 1 : 0;
}
