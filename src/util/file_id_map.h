/* A map from a file's identity (device + inode, what stat() gives) to a number: how a folder walk
 * knows it has met a file or folder before, whatever path (symlink, hard link) led there. */
#ifndef FTL_UTIL_FILE_ID_MAP_H
#define FTL_UTIL_FILE_ID_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ftl_file_id_slot {
    uint64_t device, inode;
    int64_t value;  /* -1: an empty slot */
} ftl_file_id_slot;

typedef struct ftl_file_id_map {
    ftl_file_id_slot *slots;
    size_t capacity, count;  /* capacity: 0 or a power of two */
} ftl_file_id_map;

/* The value stored for (device, inode), or -1 when there is none. */
int64_t ftl_file_id_map_get(const ftl_file_id_map *map, uint64_t device, uint64_t inode);
/* Stores value (>= 0) for (device, inode), replacing an earlier one. */
void ftl_file_id_map_put(ftl_file_id_map *map, uint64_t device, uint64_t inode, int64_t value);
void ftl_file_id_map_free(ftl_file_id_map *map);

#endif
