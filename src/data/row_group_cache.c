/* The local-disk row-group cache. Entry file layout (little-endian):
 *   "FTLRGC01" | u64 rows | u64 row_bytes | u64 path_bytes | u32 has_paths | u32 crc32(payload)
 *   payload: i32 labels[rows] | values[rows*row_bytes] | (i64 offsets[rows+1] | path bytes) */
#include "data/row_group_cache.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/sha256.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char ENTRY_MAGIC[8] = {'F', 'T', 'L', 'R', 'G', 'C', '0', '1'};
enum { ENTRY_HEADER_BYTES = 8 + 8 * 3 + 4 * 2 };
static const char ENTRY_SUFFIX[] = ".rgc";

static void reserve(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return;
    *p = ftl_xrealloc(*p, need);
    *cap = need;
}

void loader_rows_reserve(loader_rows *r, int64_t rows, int64_t row_bytes, bool with_paths, int64_t path_bytes) {
    reserve((void **)&r->labels, &r->label_cap, (size_t)rows * sizeof *r->labels);
    reserve((void **)&r->values, &r->value_cap, (size_t)(rows * row_bytes));
    if (with_paths) {
        reserve((void **)&r->path_offsets, &r->offset_cap, (size_t)(rows + 1) * sizeof *r->path_offsets);
        reserve((void **)&r->path_data, &r->path_cap, (size_t)path_bytes + 1);
    }
    r->rows = rows;
    r->row_bytes = row_bytes;
    r->has_paths = with_paths;
    r->path_bytes = with_paths ? path_bytes : 0;
}

void loader_rows_free(loader_rows *r) {
    free(r->labels);
    free(r->values);
    free(r->path_offsets);
    free(r->path_data);
    memset(r, 0, sizeof *r);
}

void row_group_cache_key(const char *path, uint64_t size, uint64_t mtime_ns, int row_group, const char *columns,
                         int64_t row_bytes, char key[65]) {
    char *text = ftl_format("%s\n%llu\n%llu\n%d\n%s\n%lld", path, (unsigned long long)size, (unsigned long long)mtime_ns,
                            row_group, columns, (long long)row_bytes);
    ftl_sha256_hex_of_string(text, key);
    free(text);
}

static int compare_keys(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

ftl_status row_group_cache_open(row_group_cache *c, const char *dir, int64_t limit, char **keys, int64_t key_count) {
    memset(c, 0, sizeof *c);
    ftl_status made = ftl_make_dirs(dir);
    if (made != FTL_OK) {
        for (int64_t i = 0; i < key_count; i++) free(keys[i]);
        free(keys);
        return made;
    }
    c->dir = ftl_strdup(dir);
    c->limit = limit;
    c->keep_keys = keys;
    c->keep_count = key_count;
    if (key_count) qsort(keys, (size_t)key_count, sizeof *keys, compare_keys);
    pthread_mutex_init(&c->lock, NULL);
    DIR *d = opendir(dir);
    if (!d) {
        ftl_status st = ftl_fail(FTL_E_IO, "cannot open cache folder %s: %s", dir, strerror(errno));
        row_group_cache_close(c);
        return st;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n != 64 + sizeof ENTRY_SUFFIX - 1 || strcmp(e->d_name + 64, ENTRY_SUFFIX) != 0) continue;
        char *p = ftl_format("%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0) c->used += (int64_t)sb.st_size;
        free(p);
    }
    closedir(d);
    return FTL_OK;
}

void row_group_cache_close(row_group_cache *c) {
    if (!c->dir) return;
    for (int64_t i = 0; i < c->keep_count; i++) free(c->keep_keys[i]);
    free(c->keep_keys);
    free(c->writing);
    free(c->dir);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

static uint64_t read_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint32_t read_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t crc_of(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) { /* zlib's crc32 takes a uInt length */
        uInt step = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, step);
        p += step;
        n -= step;
    }
    return crc;
}

static char *entry_path(const row_group_cache *c, const char *key) { return ftl_format("%s/%s%s", c->dir, key, ENTRY_SUFFIX); }

static void drop_entry(row_group_cache *c, const char *path, int64_t size, const char *why) {
    ftl_log_warn("disk cache entry %s is %s; reading the row group from the source again", path, why);
    if (unlink(path) == 0) {
        pthread_mutex_lock(&c->lock);
        c->used -= size;
        c->corrupt++;
        pthread_mutex_unlock(&c->lock);
    }
}

bool row_group_cache_get(row_group_cache *c, const char *key, int64_t expect_rows, int64_t row_bytes, bool with_paths,
                         loader_rows *rows) {
    char *path = entry_path(c, key);
    uint8_t *data = NULL;
    size_t size = 0;
    bool ok = false;
    if (ftl_read_file(path, &data, &size) != FTL_OK) goto done; /* absent: a plain miss */
    if (size < ENTRY_HEADER_BYTES || memcmp(data, ENTRY_MAGIC, 8) != 0) {
        drop_entry(c, path, (int64_t)size, "not a cache entry (bad header)");
        goto done;
    }
    uint64_t n = read_u64(data + 8), rb = read_u64(data + 16), pb = read_u64(data + 24);
    uint32_t has_paths = read_u32(data + 32), crc = read_u32(data + 36);
    if (n != (uint64_t)expect_rows || rb != (uint64_t)row_bytes || (has_paths != 0) != with_paths || n > (1ull << 40) ||
        rb > (1ull << 32) || pb > (1ull << 40)) {
        drop_entry(c, path, (int64_t)size, "for a different row layout");
        goto done;
    }
    uint64_t need = ENTRY_HEADER_BYTES + n * 4 + n * rb + (has_paths ? (n + 1) * 8 + pb : 0);
    if (need != size) {
        drop_entry(c, path, (int64_t)size, "truncated or padded");
        goto done;
    }
    const uint8_t *payload = data + ENTRY_HEADER_BYTES;
    if (crc_of(0, payload, size - ENTRY_HEADER_BYTES) != crc) {
        drop_entry(c, path, (int64_t)size, "corrupt (CRC mismatch)");
        goto done;
    }
    loader_rows_reserve(rows, (int64_t)n, row_bytes, with_paths, (int64_t)pb);
    memcpy(rows->labels, payload, n * 4);
    memcpy(rows->values, payload + n * 4, n * rb);
    if (with_paths) {
        const uint8_t *offsets = payload + n * 4 + n * rb;
        for (uint64_t i = 0; i <= n; i++) {
            uint64_t o = read_u64(offsets + 8 * i);
            if (o > pb || (i > 0 && o < (uint64_t)rows->path_offsets[i - 1])) {
                drop_entry(c, path, (int64_t)size, "corrupt (path offsets)");
                goto done;
            }
            rows->path_offsets[i] = (int64_t)o;
        }
        memcpy(rows->path_data, offsets + (n + 1) * 8, pb);
        rows->path_data[pb] = '\0';
    }
    ok = true;
done:
    pthread_mutex_lock(&c->lock);
    if (ok) c->hits++, c->bytes += (int64_t)size;
    else c->misses++;
    pthread_mutex_unlock(&c->lock);
    free(data);
    free(path);
    return ok;
}

static bool is_kept(const row_group_cache *c, const char *key) {
    return c->keep_count && bsearch(&key, c->keep_keys, (size_t)c->keep_count, sizeof *c->keep_keys, compare_keys);
}

/* Deletes stale entries (not of the current dataset), oldest first, until `need` bytes fit.
 * Called with the lock held. */
static bool make_room(row_group_cache *c, int64_t need) {
    if (c->limit == 0 || c->used + need <= c->limit) return true;
    DIR *d = opendir(c->dir);
    if (!d) return false;
    typedef struct { char *path; int64_t size; int64_t mtime; } stale_entry;
    stale_entry *stale = NULL;
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n != 64 + sizeof ENTRY_SUFFIX - 1 || strcmp(e->d_name + 64, ENTRY_SUFFIX) != 0) continue;
        char key[65];
        memcpy(key, e->d_name, 64);
        key[64] = '\0';
        if (is_kept(c, key)) continue;
        char *p = ftl_format("%s/%s", c->dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) != 0) {
            free(p);
            continue;
        }
        stale = ftl_xrealloc(stale, (count + 1) * sizeof *stale);
        stale[count++] = (stale_entry){p, (int64_t)sb.st_size, (int64_t)sb.st_mtime};
    }
    closedir(d);
    for (size_t i = 1; i < count; i++) /* oldest first (insertion sort: few entries) */
        for (size_t j = i; j > 0 && stale[j].mtime < stale[j - 1].mtime; j--) {
            stale_entry t = stale[j];
            stale[j] = stale[j - 1];
            stale[j - 1] = t;
        }
    for (size_t i = 0; i < count && c->used + need > c->limit; i++)
        if (unlink(stale[i].path) == 0) c->used -= stale[i].size;
    for (size_t i = 0; i < count; i++) free(stale[i].path);
    free(stale);
    return c->used + need <= c->limit;
}

void row_group_cache_put(row_group_cache *c, const char *key, const loader_rows *r) {
    bool with_paths = r->has_paths;
    uint64_t n = (uint64_t)r->rows, rb = (uint64_t)r->row_bytes, pb = (uint64_t)r->path_bytes;
    int64_t size = (int64_t)(ENTRY_HEADER_BYTES + n * 4 + n * rb + (with_paths ? (n + 1) * 8 + pb : 0));
    char *path = entry_path(c, key);
    pthread_mutex_lock(&c->lock);
    bool taken = false;
    for (int i = 0; i < c->writing_count && !taken; i++) taken = strcmp(c->writing[i], key) == 0;
    struct stat sb;
    bool fits = !taken && stat(path, &sb) != 0 && make_room(c, size); /* entries are content-addressed: one is enough */
    if (fits) {
        c->used += size; /* reserve before writing, so parallel readers respect the limit */
        if (c->writing_count == c->writing_cap) {
            c->writing_cap = c->writing_cap ? 2 * c->writing_cap : 8;
            c->writing = ftl_xrealloc(c->writing, (size_t)c->writing_cap * sizeof *c->writing);
        }
        memcpy(c->writing[c->writing_count++], key, 65);
    }
    pthread_mutex_unlock(&c->lock);
    if (!fits) {
        free(path);
        return;
    }

    uint8_t header[ENTRY_HEADER_BYTES];
    memcpy(header, ENTRY_MAGIC, 8);
    put_u64(header + 8, n);
    put_u64(header + 16, rb);
    put_u64(header + 24, pb);
    put_u32(header + 32, with_paths);
    uint32_t crc = crc_of(0, r->labels, n * 4);
    crc = crc_of(crc, r->values, n * rb);
    uint8_t *offsets = NULL;
    if (with_paths) {
        offsets = ftl_xmalloc((n + 1) * 8);
        for (uint64_t i = 0; i <= n; i++) put_u64(offsets + 8 * i, (uint64_t)r->path_offsets[i]);
        crc = crc_of(crc, offsets, (n + 1) * 8);
        crc = crc_of(crc, r->path_data, pb);
    }
    put_u32(header + 36, crc);
    ftl_atomic_file f;
    ftl_status st = ftl_atomic_open(&f, path);
    f.skip_fsync = true;
    if (st == FTL_OK) st = ftl_write_all(f.fp, header, sizeof header, path);
    if (st == FTL_OK) st = ftl_write_all(f.fp, r->labels, n * 4, path);
    if (st == FTL_OK) st = ftl_write_all(f.fp, r->values, n * rb, path);
    if (st == FTL_OK && with_paths) st = ftl_write_all(f.fp, offsets, (n + 1) * 8, path);
    if (st == FTL_OK && with_paths) st = ftl_write_all(f.fp, r->path_data, pb, path);
    if (st == FTL_OK) st = ftl_atomic_commit(&f);
    else ftl_atomic_abort(&f);
    if (st != FTL_OK) ftl_log_warn("cannot store a disk cache entry (%s); continuing without it", ftl_last_error());
    pthread_mutex_lock(&c->lock);
    if (st != FTL_OK) c->used -= size;
    for (int i = 0; i < c->writing_count; i++)
        if (strcmp(c->writing[i], key) == 0) {
            memcpy(c->writing[i], c->writing[--c->writing_count], 65);
            break;
        }
    pthread_mutex_unlock(&c->lock);
    free(offsets);
    free(path);
}
