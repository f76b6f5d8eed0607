/* Local-disk cache of decoded row groups (Petastorm's cache_type='local-disk'). Entries are
 * written atomically and verified (sizes and CRC-32) on read; a bad entry is deleted and the row
 * group is read from the source again. When the data is larger than the limit the cache keeps a
 * stable subset instead of evicting on every miss (which gives ~0 hits for a sequential scan):
 * entries of the current dataset are never evicted, only stale ones (other files or versions,
 * oldest first), so the hit rate is about limit / data from the second epoch on. */
#ifndef FTL_DATA_ROW_GROUP_CACHE_H
#define FTL_DATA_ROW_GROUP_CACHE_H

#include "ftl/base.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* One decoded row group (or piece of one): labels, fixed-size values and optional paths. */
typedef struct loader_rows {
    int64_t rows, row_bytes;
    bool has_paths;         /* path_offsets/path_data describe these rows (else stale buffers) */
    int32_t *labels;
    uint8_t *values;
    int64_t *path_offsets;  /* rows + 1, or NULL */
    char *path_data;
    int64_t path_bytes;
    size_t label_cap, value_cap, offset_cap, path_cap;  /* allocated sizes, for reuse */
} loader_rows;

void loader_rows_reserve(loader_rows *r, int64_t rows, int64_t row_bytes, bool with_paths, int64_t path_bytes);
void loader_rows_free(loader_rows *r);

typedef struct row_group_cache {
    char *dir;
    int64_t limit;           /* 0 = unlimited */
    int64_t used;            /* bytes of all entries in dir */
    char **keep_keys;        /* keys of the current dataset, sorted: never evicted */
    int64_t keep_count;
    pthread_mutex_t lock;
    /* Keys being written now: readers that miss on the same row group at once store it once
     * (a second reservation would count its bytes twice). */
    char (*writing)[65];
    int writing_count, writing_cap;
    int64_t hits, misses, corrupt, bytes;
} row_group_cache;

/* A key names one row group of one file version and column selection (hex sha256). */
void row_group_cache_key(const char *path, uint64_t size, uint64_t mtime_ns, int row_group, const char *columns,
                         int64_t row_bytes, char key[65]);
/* Takes ownership of keys (freed by _close, or here on failure). */
ftl_status row_group_cache_open(row_group_cache *c, const char *dir, int64_t limit, char **keys, int64_t key_count);
void row_group_cache_close(row_group_cache *c);
/* Loads an entry into `rows`; false on a miss (absent, or corrupt: then it is deleted). */
bool row_group_cache_get(row_group_cache *c, const char *key, int64_t expect_rows, int64_t row_bytes, bool with_paths,
                         loader_rows *rows);
/* Stores an entry if it fits the limit (after evicting stale entries); failures only warn. */
void row_group_cache_put(row_group_cache *c, const char *key, const loader_rows *rows);

#endif
