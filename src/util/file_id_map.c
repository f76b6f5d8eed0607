/* Open addressing with linear probing; the table doubles at half full, so probes stay short for
 * the millions of files of a large dataset. */
#include "util/alloc.h"
#include "util/file_id_map.h"

#include <stdlib.h>

static size_t slot_of(uint64_t device, uint64_t inode, size_t capacity) {
    uint64_t h = inode * 0x9E3779B97F4A7C15ull ^ (device + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    return (size_t)h & (capacity - 1);
}

static ftl_file_id_slot *find_slot(ftl_file_id_slot *slots, size_t capacity, uint64_t device, uint64_t inode) {
    size_t i = slot_of(device, inode, capacity);
    while (slots[i].value >= 0 && (slots[i].device != device || slots[i].inode != inode)) i = (i + 1) & (capacity - 1);
    return &slots[i];
}

static ftl_file_id_slot *empty_table(size_t capacity) {
    ftl_file_id_slot *slots = ftl_xmalloc(capacity * sizeof *slots);
    for (size_t i = 0; i < capacity; i++) slots[i].value = -1;
    return slots;
}

int64_t ftl_file_id_map_get(const ftl_file_id_map *map, uint64_t device, uint64_t inode) {
    if (map->capacity == 0) return -1;
    return find_slot(map->slots, map->capacity, device, inode)->value;
}

void ftl_file_id_map_put(ftl_file_id_map *map, uint64_t device, uint64_t inode, int64_t value) {
    if (2 * (map->count + 1) > map->capacity) {
        size_t capacity = map->capacity ? 2 * map->capacity : 64;
        ftl_file_id_slot *slots = empty_table(capacity);
        for (size_t i = 0; i < map->capacity; i++)
            if (map->slots[i].value >= 0)
                *find_slot(slots, capacity, map->slots[i].device, map->slots[i].inode) = map->slots[i];
        free(map->slots);
        map->slots = slots;
        map->capacity = capacity;
    }
    ftl_file_id_slot *s = find_slot(map->slots, map->capacity, device, inode);
    if (s->value < 0) map->count++;
    *s = (ftl_file_id_slot){device, inode, value};
}

void ftl_file_id_map_free(ftl_file_id_map *map) {
    free(map->slots);
    map->slots = NULL;
    map->capacity = map->count = 0;
}
