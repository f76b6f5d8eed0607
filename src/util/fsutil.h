/* File helpers: whole-file reads, checked writes, and atomic outputs (atomic_file.c: temporary name, fsync,
 * rename) whose temporaries are deleted if the process is interrupted. */
#ifndef FTL_UTIL_FSUTIL_H
#define FTL_UTIL_FSUTIL_H

#include "ftl/base.h"
#include "util/temporaries.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* An output file that appears under its final name only when complete. */
typedef struct ftl_atomic_file {
    FILE *fp;
    char *final_path;
    char *temp_path;
    bool skip_fsync;  /* caches: rename still atomic, but durability is not needed */
    bool no_replace;  /* an output without --overwrite: never replace a file another run made meanwhile */
} ftl_atomic_file;

ftl_status ftl_atomic_open(ftl_atomic_file *f, const char *final_path);
/* Flushes and fsyncs without closing: for files committed together, so that the failures a full
 * disk brings happen before any of them is renamed into place. */
ftl_status ftl_atomic_flush(ftl_atomic_file *f);
/* Flushes, fsyncs, renames to the final name (replacing it unless no_replace: see util/publish.h)
 * and closes. */
ftl_status ftl_atomic_commit(ftl_atomic_file *f);
/* Closes and deletes the temporary; safe to call after a failed commit or twice. */
void ftl_atomic_abort(ftl_atomic_file *f);

/* Writes a whole file atomically (temporary name, fsync, rename). */
ftl_status ftl_write_file_atomic(const char *path, const void *data, size_t size);
/* A user's output: ftl_output_write (ftl/base.h). */
/* fwrite that reports a short write (disk full) with the path. */
ftl_status ftl_write_all(FILE *fp, const void *data, size_t size, const char *path_for_errors);
/* How many ranks share this host (ftl_cpu_count then gives each its share of the cores). */
void ftl_set_ranks_on_host(int ranks);
ftl_status ftl_read_file(const char *path, uint8_t **data, size_t *size);
ftl_status ftl_file_size(const char *path, uint64_t *size);
bool ftl_path_exists(const char *path);
bool ftl_is_directory(const char *path);
/* mkdir -p. */
ftl_status ftl_make_dirs(const char *path);
/* rm -rf (files and folders this process made). */
ftl_status ftl_remove_tree(const char *path);
/* fsync a folder so a rename inside it is durable. */
void ftl_sync_directory_of(const char *path);
/* The folder part of a path ("." when none, "/" for a file at the root). Caller frees. */
char *ftl_path_folder(const char *path);
/* What follows the last '/' (a pointer into path). */
const char *ftl_path_file_name(const char *path);

#endif
