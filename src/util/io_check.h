/* The check every job makes before any work: no output is one of its inputs or another of its
 * outputs. Paths are compared as the files they name: symlinks, "..", "./" and hard links resolve
 * to the same file (device + inode where it exists; the resolved folder + name where it does not
 * yet), so `--out data/../data/train.parquet` is TRAIN, and --overwrite does not change that. */
#ifndef FTL_UTIL_IO_CHECK_H
#define FTL_UTIL_IO_CHECK_H

#include "ftl/base.h"
#include <stdbool.h>

typedef struct ftl_io_check ftl_io_check;

/* `command` names the job in messages ("train", "embed"). */
ftl_io_check *ftl_io_check_new(const char *command);
void ftl_io_check_free(ftl_io_check *c);

/* `role` is how the user gave the path ("TRAIN", "--backbone"); NULL paths are ignored. An input
 * may be a file or a folder (a dataset of parts: outputs inside it are refused too). */
void ftl_io_check_input(ftl_io_check *c, const char *role, const char *path);
void ftl_io_check_output(ftl_io_check *c, const char *role, const char *path);
/* Outputs named by a pattern where "{epoch}" (also "{epoch:...}") stands for a number: --checkpoint. */
void ftl_io_check_output_pattern(ftl_io_check *c, const char *role, const char *pattern);
/* A folder the job writes files into whose names end in one of `suffixes` (NULL-terminated; a
 * prefix may come first as "PREFIX*SUFFIX"): an input that is such a file there is refused, and so
 * is the folder inside an input folder. */
void ftl_io_check_output_folder(ftl_io_check *c, const char *role, const char *folder, const char *const *suffixes);
/* An input that an output pattern may produce without conflict (--resume's checkpoint under the
 * same --checkpoint pattern: the run continues after it and never rewrites it). */
void ftl_io_check_allow_pattern_input(ftl_io_check *c, const char *role);

/* Whether an output given so far lies directly in `folder` (to look for inputs there only when it
 * matters, e.g. a backbone's external-data files). */
bool ftl_io_check_writes_into(const ftl_io_check *c, const char *folder);

/* FTL_OK, or FTL_E_INVALID_ARG (exit 2) naming both paths and their roles. */
ftl_status ftl_io_check_run(const ftl_io_check *c);

/* Whether two paths name the same file or folder now (see above); false when either is NULL. */
bool ftl_io_same_path(const char *a, const char *b);

#endif
