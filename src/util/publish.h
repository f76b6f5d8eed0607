/* Publishing: a finished temporary takes its final name in one rename. Without --overwrite ftl
 * never replaces what another run created at that name while this one worked: the rename refuses
 * to replace (renameat2 RENAME_NOREPLACE; where a filesystem refuses that flag, link + unlink for
 * files, and for folders a plain rename, which cannot replace a non-empty folder), and the result
 * stays under a free name beside it that the error names. With --overwrite the last writer wins,
 * whole files and folders only. */
#ifndef FTL_UTIL_PUBLISH_H
#define FTL_UTIL_PUBLISH_H

#include "ftl/base.h"
#include <stdbool.h>

/* Renames temp_path (a file or folder) to final_path. replace: a file or folder already there is
 * replaced (a folder is swapped in atomically, the old one removed after). Otherwise an existing
 * final_path is left as it is: temp_path moves to "<stem>-<n><ext>" beside it (the first free n
 * from 2) and FTL_E_EXISTS says so, naming both. */
ftl_status ftl_publish(const char *temp_path, const char *final_path, bool replace);

#endif
