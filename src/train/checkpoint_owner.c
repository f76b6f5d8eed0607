/* Which run a checkpoint file belongs to, and the --keep-last deletions that may touch only those.
 *
 * Every run draws a random 128-bit id at its start (kept across resumes: a resume adopts its
 * checkpoint's) and writes it into each checkpoint as ftl.run_id. A file is deleted only when its
 * own header says it is a checkpoint of this run: a name alone never decides, so another run's
 * checkpoint (or any other file) that took the same name is left where it is. */
#include "train/train_internal.h"
#include "util/error.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* A checkpoint's header holds its metadata and tensor table; far below this for any head. */
#define MAX_HEADER_BYTES ((uint64_t)64 << 20)

void ftl_checkpoint_new_run_id(char out[FTL_RUN_ID_CHARS + 1]) {
    uint8_t bytes[16];
    size_t got = 0;
    while (got < sizeof bytes) {
        ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
        if (n <= 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (got < sizeof bytes) { /* no getrandom (an old kernel or a seccomp filter): time, pid and an address */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^ (uintptr_t)&ts;
        for (size_t i = 0; i < sizeof bytes; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            bytes[i] = (uint8_t)(x >> 56);
        }
    }
    for (size_t i = 0; i < sizeof bytes; i++) snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

bool ftl_checkpoint_run_id_valid(const char *id) {
    if (!id || strlen(id) != FTL_RUN_ID_CHARS) return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

/* The header of a safetensors file: false when the file is not one (too short, absurd length). */
static bool read_header(int fd, char **text, size_t *len) {
    uint8_t prefix[8];
    if (pread(fd, prefix, 8, 0) != 8) return false;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | prefix[i];
    if (n < 2 || n > MAX_HEADER_BYTES) return false;
    char *buf = malloc((size_t)n);
    if (!buf) return false;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, buf + done, (size_t)n - done, (off_t)(8 + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += (size_t)r;
    }
    if (done < n || buf[0] != '{') {
        free(buf);
        return false;
    }
    *text = buf;
    *len = (size_t)n;
    return true;
}

/* Whether `path` is a checkpoint of run `run_id` (legacy: one written before run ids also counts);
 * else *why says what it is. */
static bool owned_by(const char *path, const char *run_id, bool legacy, char *why, size_t why_size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(why, why_size, "cannot read it: %s", strerror(errno));
        return false;
    }
    char *text = NULL;
    size_t len = 0;
    bool header = read_header(fd, &text, &len);
    close(fd);
    ftl_json *root = NULL;
    if (!header || ftl_json_parse(text, len, &root) != FTL_OK) {
        free(text);
        ftl_clear_error();
        snprintf(why, why_size, "not an ftl checkpoint");
        return false;
    }
    free(text);
    const ftl_json *meta = ftl_json_get(root, "__metadata__");
    const char *format = meta ? ftl_json_get_string(meta, FTL_MODEL_META_FORMAT) : NULL;
    const char *id = meta ? ftl_json_get_string(meta, FTL_CHECKPOINT_META_RUN_ID) : NULL;
    bool mine = false;
    if (!format || strncmp(format, "ftl-checkpoint-", 15) != 0) snprintf(why, why_size, "not an ftl checkpoint");
    else if (!id && legacy) mine = true;
    else if (!id) snprintf(why, why_size, "a checkpoint without a run id, written before this run");
    else if (strcmp(id, run_id) != 0) snprintf(why, why_size, "a checkpoint of another run (run id %.12s...)", id);
    else mine = true;
    ftl_json_free(root);
    return mine;
}

void ftl_checkpoint_delete_owned(const ftl_trainer *t, char *const *paths, size_t count) {
    for (size_t i = 0; i < count; i++) {
        char why[160];
        if (access(paths[i], F_OK) != 0) continue; /* deleted already (the previous try got this far) */
        if (!owned_by(paths[i], t->run_id, t->legacy_checkpoints, why, sizeof why)) {
            ftl_log_warn("--keep-last: not deleting %s: %s (this run is %.12s...)", paths[i], why, t->run_id);
            continue;
        }
        if (unlink(paths[i]) != 0 && errno != ENOENT)
            ftl_log_warn("cannot delete old checkpoint %s: %s", paths[i], strerror(errno));
    }
}
