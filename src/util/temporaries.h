/* Temporaries: what ftl writes before it has its final name. Each is named "<final>.tmp-<pid>-<n>"
 * and locked (flock) by its writer for as long as the writer lives, so a temporary nobody holds a
 * lock on was left by a run that died (SIGKILL, a crash, a power cut): the next ftl command that
 * writes into the same folder removes it and says how many bytes that freed. The lock decides, not
 * the PID in the name: PIDs are reused, and differ between PID namespaces and hosts, while a lock
 * ends with its holder everywhere (NFS included). An interrupted run (SIGINT, SIGTERM, SIGHUP)
 * removes its own registered temporaries at once. */
#ifndef FTL_UTIL_TEMPORARIES_H
#define FTL_UTIL_TEMPORARIES_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>

/* "<path>.tmp-<pid>-<n>": unique per process and call ("out/" gives "out.tmp-..."). Caller frees. */
char *ftl_temp_name_for(const char *path);
/* Whether a file name (no folder) has the temporary form "<name>.tmp-<digits>-<digits>". */
bool ftl_temp_name_matches(const char *file_name);

/* A new temporary file for final_path, created exclusively and locked before it takes its name:
 * *fd is open for writing (close it, directly or through fdopen, to drop the lock) and *temp_path
 * is its name (caller frees). Sweeps final_path's folder first. */
ftl_status ftl_temp_file_create(const char *final_path, char **temp_path, int *fd);
/* The same for a folder: *lock_fd holds the lock until closed. */
ftl_status ftl_temp_dir_create(const char *final_path, char **temp_path, int *lock_fd);
/* Locks an existing temporary this process wrote (e.g. a part file a writer just renamed into a
 * temporary name) so that sweepers leave it: the fd to close when done, or -1 when locks are not
 * supported there (the file then stays unprotected, as on such filesystems everywhere). */
int ftl_temp_hold(const char *temp_path);

/* Removes the temporaries in `folder` whose writers are gone (no lock on them), once per folder
 * and process; an info line names the folder, the count and the bytes freed. Entries of other
 * programs are never touched: only names of the temporary form, unlocked. Returns the bytes freed. */
uint64_t ftl_temporaries_sweep(const char *folder);

/* Paths deleted if the process is interrupted (a file, or a folder with everything in it). */
void ftl_cleanup_register(const char *path);
void ftl_cleanup_unregister(const char *path);
/* Ends the process now (no atexit handlers, no flushing), deleting the registered paths first:
 * for a rank whose job has failed and must not linger. */
_Noreturn void ftl_exit_removing_temporaries(int code);
/* Deletes the registered paths (async-signal-safe); false when one of them could not be removed. */
bool ftl_temporaries_remove_registered(void);

#endif
