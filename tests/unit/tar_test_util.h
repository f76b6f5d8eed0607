/* Helpers for the tar index and WebDataset unit tests: files of known bytes, shards made by GNU tar
 * (the reference), and headers written by hand for the malformed cases GNU tar never writes. */
#ifndef FTL_TAR_TEST_UTIL_H
#define FTL_TAR_TEST_UTIL_H

#include "data/tar_index.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why GNU tar cannot make the shards here (report the test as skipped), or NULL. */
const char *tar_test_no_gnu_tar_reason(void);
/* Runs a shell command; false (a failure is recorded, naming it) when it exits non-zero. */
bool tar_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes `size` bytes that depend on (seed, position) to root/relative, making its folders. */
void tar_test_write_payload(const char *root, const char *relative, size_t size, unsigned seed);
void tar_test_write_text(const char *root, const char *relative, const char *text);
void tar_test_write_bytes(const char *path, const void *data, size_t size);
/* A whole file (NULL, a failure recorded, when it cannot be read); caller frees. */
uint8_t *tar_test_read(const char *path, size_t *size);

/* One regular member of GNU tar's listing (`tar -tvf`). */
typedef struct tar_test_entry {
    char *name;
    unsigned long long size;
} tar_test_entry;
/* The regular members that `tar -tvf` lists, in order; *links and *others count the link and other
 * non-folder lines. false (a failure recorded) when tar fails. Free with tar_test_entries_free. */
bool tar_test_list(const char *shard, tar_test_entry **entries, size_t *count, size_t *links, size_t *others);
void tar_test_entries_free(tar_test_entry *entries, size_t count);

/* Checks the index against GNU tar's listing of the same shard (names, sizes, order) and every
 * member's bytes against the file root/NAME they were archived from; `what` names the case. */
void tar_test_check_against_gnu_tar(const tar_index *t, const char *shard, const char *root, const char *what);

/* A ustar header (magic "ustar\0", version "00") for `name` (at most 100 bytes), `size` in octal and
 * typeflag `type`, with its checksum; tar_test_fix_checksum recomputes it after an edit. */
void tar_test_header(uint8_t h[512], const char *name, uint64_t size, char type);
void tar_test_fix_checksum(uint8_t h[512]);
/* A growable byte buffer for shards written by hand. */
typedef struct tar_test_bytes {
    uint8_t *data;
    size_t size;
} tar_test_bytes;
void tar_test_append(tar_test_bytes *b, const void *data, size_t size);
/* A header then `size` data bytes (`data`, or the payload of `seed` when NULL), padded to 512. */
void tar_test_append_member(tar_test_bytes *b, const char *name, char type, const void *data, size_t size, unsigned seed);
/* Two zero blocks. */
void tar_test_append_end(tar_test_bytes *b);

#endif
