/* The emulated device's NCCL, for ranks that are processes on one machine: the unique id names a
 * fresh folder (under $TMPDIR, else /tmp), and an allreduce writes this rank's buffer there as file
 * <sequence>.<rank>, waits for every rank's file of that sequence and sums them in rank order, so
 * every rank gets the same bits. Float sums only (what ftl's head uses). A rank deletes its file of
 * sequence k-2 when it starts k: by then every rank has read it (see cleanup for the last ones). Waits end after
 * FTL_EMU_NCCL_TIMEOUT seconds (default 120) with ncclRemoteError, naming the missing ranks. Like
 * NCCL, two ranks on one GPU are refused (each claims file gpu.<device> of the folder).
 * FTL_EMU_NCCL_STUCK=1: an allreduce never finishes (its stream stays busy until the communicator
 * is aborted), as when a peer's GPU hangs: what the head's stall watch is for. */
#define _DEFAULT_SOURCE /* mkdtemp, usleep, clock_gettime */
#include <cuda.h>
#include <nccl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int emu_valid_range(const void *p, size_t bytes);
int emu_current_device(void);
void emu_set_stream_stuck(int on);

struct ncclComm {
    char dir[NCCL_UNIQUE_ID_BYTES];
    int nranks, rank, device;
    long seq;
};

static const char *tmp_root(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

ncclResult_t ncclGetVersion(int *version) {
    *version = 22700; /* 2.27.0 */
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL)";
    case ncclRemoteError: return "remote process exited or there was a network error (emulated NCCL: a rank's file never came)";
    case ncclSystemError: return "unhandled system error (emulated NCCL)";
    default: return "internal error (emulated NCCL)";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    char path[112];
    if (snprintf(path, sizeof path, "%s/ftl-emu-nccl-XXXXXX", tmp_root()) >= (int)sizeof path || !mkdtemp(path))
        return ncclSystemError;
    memcpy(id->internal, path, strlen(path) + 1);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (nranks < 1 || rank < 0 || rank >= nranks || memchr(id.internal, 0, sizeof id.internal) == NULL || !id.internal[0])
        return ncclInvalidArgument;
    char claim[200];
    snprintf(claim, sizeof claim, "%s/gpu.%d", id.internal, emu_current_device());
    int fd = open(claim, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0) {
        fprintf(stderr, "emulated NCCL: rank %d: Duplicate GPU detected: another rank is on device %d too\n", rank,
                emu_current_device());
        return ncclInvalidUsage;
    }
    close(fd);
    struct ncclComm *c = calloc(1, sizeof *c);
    c->device = emu_current_device();
    snprintf(c->dir, sizeof c->dir, "%s", id.internal);
    c->nranks = nranks;
    c->rank = rank;
    *comm = c;
    return ncclSuccess;
}

static void file_of(const struct ncclComm *c, long seq, int rank, char *out, size_t size) {
    snprintf(out, size, "%s/%ld.%d", c->dir, seq, rank);
}

/* A rank leaving deletes its files up to the second last (every rank has read those) and says it
 * left; the last rank out deletes the rest and the folder. */
static void cleanup(struct ncclComm *c) {
    char path[200];
    for (long s = c->seq - 2; s < c->seq; s++) {
        file_of(c, s, c->rank, path, sizeof path);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/gpu.%d", c->dir, c->device);
    unlink(path);
    snprintf(path, sizeof path, "%s/left.%d", c->dir, c->rank);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
    int left = 0;
    for (int r = 0; r < c->nranks; r++) {
        snprintf(path, sizeof path, "%s/left.%d", c->dir, r);
        left += access(path, F_OK) == 0;
    }
    if (left == c->nranks) {
        for (int r = 0; r < c->nranks; r++) {
            snprintf(path, sizeof path, "%s/left.%d", c->dir, r);
            unlink(path);
            file_of(c, c->seq, r, path, sizeof path);
            unlink(path);
        }
        rmdir(c->dir);
    }
    free(c);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm) cleanup(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *error) {
    (void)comm;
    *error = ncclSuccess; /* the emulated allreduce reports its errors from the call itself */
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    emu_set_stream_stuck(0);
    return ncclCommDestroy(comm);
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)root, (void)comm, (void)stream;
    fprintf(stderr, "emulated NCCL: ncclBroadcast is not emulated\n");
    return ncclInternalError;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t stream) {
    (void)stream;
    if (!c || datatype != ncclFloat32 || op != ncclSum) return ncclInvalidArgument;
    const char *stuck = getenv("FTL_EMU_NCCL_STUCK");
    if (stuck && strcmp(stuck, "1") == 0) { /* a peer that never comes: the stream stays busy */
        emu_set_stream_stuck(1);
        return ncclSuccess;
    }
    size_t bytes = count * sizeof(float);
    if (!emu_valid_range(sendbuff, bytes) || !emu_valid_range(recvbuff, bytes)) {
        fprintf(stderr, "emulated NCCL: an allreduce buffer of %zu bytes lies outside every device allocation\n", bytes);
        return ncclInvalidArgument;
    }
    long seq = ++c->seq;
    char path[200], tmp[210];
    file_of(c, seq - 2, c->rank, path, sizeof path);
    unlink(path);
    file_of(c, seq, c->rank, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(sendbuff, 1, bytes, f) != bytes || fclose(f) != 0 || rename(tmp, path) != 0) return ncclSystemError;
    const char *t = getenv("FTL_EMU_NCCL_TIMEOUT");
    double timeout = t && *t ? atof(t) : 120.0, start = now_s();
    float *sum = malloc(bytes ? bytes : 1), *part = malloc(bytes ? bytes : 1);
    ncclResult_t result = ncclSuccess;
    for (int r = 0; r < c->nranks && result == ncclSuccess; r++) {
        file_of(c, seq, r, path, sizeof path);
        FILE *in;
        while (!(in = fopen(path, "rb"))) {
            if (now_s() - start > timeout) {
                fprintf(stderr, "emulated NCCL: rank %d: allreduce %ld: rank %d's part never came\n", c->rank, seq, r);
                result = ncclRemoteError;
                break;
            }
            usleep(1000);
        }
        if (!in) break;
        size_t got = fread(r == 0 ? sum : part, 1, bytes, in);
        fclose(in);
        if (got != bytes) {
            result = ncclSystemError;
            break;
        }
        if (r > 0)
            for (size_t i = 0; i < count; i++) sum[i] += part[i];
    }
    if (result == ncclSuccess) memcpy(recvbuff, sum, bytes);
    free(sum);
    free(part);
    return result;
}
