/* The regular-file members of a POSIX tar file (a WebDataset shard), found by walking its headers
 * alone: each 512-byte header is read with pread and the member's data is skipped, never read, so
 * indexing costs one small read per member whatever the shard's size. Members are then read one by
 * one at their offsets, from any number of threads at once.
 *
 * Formats: ustar (prefix + name), GNU (typeflag 'L' long names; 'K' long link names skipped), pax
 * (typeflag 'x' records `path` and `size` for the next member; 'g' global headers checked, and
 * refused when they would rename or resize every member) and old v7. Directories are skipped; hard
 * and symbolic links, device files, FIFOs and unknown types are skipped and counted (links are
 * never followed), and `warning` names them. GNU sparse and multi-volume members are refused
 * (FTL_E_UNSUPPORTED): their stored bytes are not the file's.
 *
 * Every field is bounds-checked: the header checksum (unsigned or signed sums, as writers differ),
 * octal and base-256 sizes, pax record lengths, names that fill their field without a NUL, long
 * names and pax headers over 1 MiB, data that runs past the end of the file (a shard cut short).
 * Two zero blocks (or one), or the end of the file at a header boundary, end the archive.
 * Malformed input is FTL_E_FORMAT, its message naming the file, the member (its name, or the byte
 * offset of its header when no name can be trusted) and what was expected. */
#ifndef FTL_DATA_TAR_INDEX_H
#define FTL_DATA_TAR_INDEX_H

#include "ftl/base.h"
#include <stddef.h>
#include <stdint.h>

typedef struct tar_member {
    char *name;              /* full path in the archive: pax path, GNU long name, or ustar prefix/name */
    uint64_t data_offset;    /* byte offset of its data in the file */
    uint64_t size;           /* bytes of data */
    uint64_t header_offset;  /* byte offset of its first header (a pax or long-name header, if any) */
} tar_member;

/* Read-only after tar_index_open. */
typedef struct tar_index {
    char *path;
    int fd;
    uint64_t file_size;
    tar_member *members;     /* regular files, in archive order */
    size_t count;
    size_t links_skipped;    /* hard and symbolic links */
    size_t others_skipped;   /* device files, FIFOs, unknown typeflags (directories are not counted) */
    /* What was skipped, naming the first few members ("shard.tar: 2 links skipped (not followed):
     * 'a/x.jpg', 'a/y.jpg'"), or NULL. Not logged here: the caller prints it (prep on rank 0 only). */
    char *warning;
} tar_index;

/* Walks the headers of the tar file at `path`. On success *out holds the index (free it with
 * tar_index_close); an empty file or one holding only the end-of-archive blocks gives 0 members. */
ftl_status tar_index_open(const char *path, tar_index **out);
void tar_index_close(tar_index *t);

/* Reads member `member`'s bytes into a fresh buffer (*data, malloc'd, the caller frees; never NULL
 * on success, even for 0 bytes). Thread-safe: pread on the shared descriptor, nothing else shared.
 * A file shortened since it was indexed is FTL_E_FORMAT naming the member. */
ftl_status tar_index_read(const tar_index *t, size_t member, uint8_t **data, size_t *size);

/* `len` bytes (a member name, a header field) as text fit for a message, quoted: well-formed UTF-8
 * kept, other bytes and control characters as \xNN, cut with "..." to fit `cap` (at least 8). */
void tar_quote(const char *bytes, size_t len, char *out, size_t cap);

#endif
