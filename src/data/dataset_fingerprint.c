/* The fingerprint of a dataset (feature-cache keys): per Parquet file its size, its footer and a
 * CRC-32 of every byte (footers alone miss changed pixels: byte-array columns carry no statistics).
 * It runs before any image is embedded, so the file's parts are read and summed on every core,
 * then joined with crc32_combine: the same CRC as one pass, so caches keyed by earlier versions
 * stay valid. (pread, not mmap: a file that shrinks meanwhile is an error, not a SIGBUS.) */
#include "ftl/embed.h"
#include "data/loader_plan.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/sha256.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { MAX_PARTS = 64, MIN_PART_BYTES = 16 << 20 };

static uint64_t read_le32(const uint8_t *p) { return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24; }

typedef struct crc_part {
    int fd;
    uint64_t begin, size;
    uLong crc;
    bool failed;
} crc_part;

enum { CHUNK = 8 << 20 };

static void *crc_thread(void *arg) {
    crc_part *c = arg;
    uint8_t *buf = malloc(CHUNK);
    c->crc = crc32(0L, Z_NULL, 0);
    c->failed = !buf;
    for (uint64_t done = 0; !c->failed && done < c->size;) {
        size_t want = c->size - done < CHUNK ? (size_t)(c->size - done) : CHUNK;
        ssize_t n = pread(c->fd, buf, want, (off_t)(c->begin + done));
        if (n <= 0) {
            c->failed = true;
            break;
        }
        c->crc = crc32(c->crc, buf, (uInt)n);
        done += (uint64_t)n;
    }
    free(buf);
    return NULL;
}

/* CRC-32 of the file's first `size` bytes, its parts on up to `threads` threads. */
static bool parallel_crc(int fd, uint64_t size, int threads, uLong *crc) {
    uint64_t parts = size / MIN_PART_BYTES;
    if (parts > (uint64_t)threads) parts = (uint64_t)threads;
    if (parts > MAX_PARTS) parts = MAX_PARTS;
    if (parts < 1) parts = 1;
    crc_part c[MAX_PARTS];
    pthread_t t[MAX_PARTS];
    bool started[MAX_PARTS] = {false};
    for (uint64_t i = 0; i < parts; i++) {
        uint64_t begin = size * i / parts, end = size * (i + 1) / parts;
        c[i] = (crc_part){fd, begin, end - begin, 0, false};
        started[i] = i > 0 && pthread_create(&t[i], NULL, crc_thread, &c[i]) == 0;
    }
    for (uint64_t i = 0; i < parts; i++)
        if (!started[i]) crc_thread(&c[i]); /* part 0, and any whose thread could not start */
    bool ok = true;
    *crc = c[0].crc;
    for (uint64_t i = 0; i < parts; i++) {
        if (started[i]) pthread_join(t[i], NULL);
        ok = ok && !c[i].failed;
        if (i > 0) *crc = crc32_combine(*crc, c[i].crc, (z_off_t)c[i].size);
    }
    return ok;
}

static ftl_status fingerprint_file(const char *path, ftl_sha256 *h) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ftl_fail(FTL_E_NOT_FOUND, "cannot open %s", path);
    struct stat sb;
    ftl_status st = FTL_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) st = ftl_fail(FTL_E_FORMAT, "%s is not a regular file", path);
    uint64_t size = st == FTL_OK ? (uint64_t)sb.st_size : 0;
    if (st == FTL_OK && size < 12) st = ftl_fail(FTL_E_FORMAT, "%s is not a Parquet file", path);
    uLong crc = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (st == FTL_OK && !parallel_crc(fd, size, cores > 0 ? (int)cores : 1, &crc))
        st = ftl_fail(FTL_E_IO, "cannot read %s (did it change while being read?)", path);
    uint8_t tail[8];
    if (st == FTL_OK && (pread(fd, tail, 8, (off_t)(size - 8)) != 8 || memcmp(tail + 4, "PAR1", 4) != 0))
        st = ftl_fail(FTL_E_FORMAT, "%s is not a Parquet file", path);
    if (st == FTL_OK) {
        uint64_t footer = read_le32(tail);
        if (footer > size - 12) {
            st = ftl_fail(FTL_E_FORMAT, "%s: footer length %llu exceeds the file", path, (unsigned long long)footer);
        } else {
            uint8_t *meta = ftl_xmalloc(footer ? footer : 1);
            if (pread(fd, meta, footer, (off_t)(size - 8 - footer)) != (ssize_t)footer)
                st = ftl_fail(FTL_E_IO, "cannot read the footer of %s", path);
            char numbers[64];
            snprintf(numbers, sizeof numbers, "%llu %08lx\n", (unsigned long long)size, (unsigned long)crc);
            ftl_sha256_update(h, numbers, strlen(numbers));
            ftl_sha256_update(h, meta, footer);
            free(meta);
        }
    }
    close(fd);
    return st;
}

ftl_status ftl_dataset_fingerprint(const char *const *sources, int source_count, char hex[65]) {
    char **paths;
    int count;
    FTL_TRY(loader_expand_sources(sources, source_count, &paths, &count));
    ftl_sha256 h;
    ftl_sha256_init(&h);
    ftl_status st = FTL_OK;
    for (int i = 0; i < count; i++) {
        if (st == FTL_OK) st = fingerprint_file(paths[i], &h);
        free(paths[i]);
    }
    free(paths);
    if (st != FTL_OK) return st;
    uint8_t d[32];
    ftl_sha256_final(&h, d);
    ftl_sha256_hex(d, hex);
    return FTL_OK;
}
