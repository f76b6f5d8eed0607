/* Temporaries: locked while their writer lives, swept when it is gone, removed on interrupts. */
#include "util/temporaries.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A writer creates its temporary under this name + "~", locks it, then renames it: a sweeper never
 * sees the real temporary name unlocked while its writer lives. A "~" name is swept only when this
 * old (its writer died in the instant between the two calls). */
enum { PRE_NAME_GRACE_SECONDS = 600 };

char *ftl_temp_name_for(const char *path) {
    static atomic_uint counter;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    return ftl_format("%.*s.tmp-%ld-%u", (int)n, path, (long)getpid(), atomic_fetch_add(&counter, 1));
}

static const char *skip_digits(const char *p) {
    const char *start = p;
    while (*p >= '0' && *p <= '9') p++;
    return p > start ? p : NULL;
}

/* ".tmp-<digits>-<digits>" then `tail` ("" or "~") at the end of the name, after at least one character. */
static bool matches_with_tail(const char *name, const char *tail) {
    for (const char *at = strstr(name, ".tmp-"); at; at = strstr(at + 1, ".tmp-")) {
        if (at == name) continue;
        const char *p = skip_digits(at + 5);
        if (!p || *p != '-') continue;
        p = skip_digits(p + 1);
        if (p && strcmp(p, tail) == 0) return true;
    }
    return false;
}

bool ftl_temp_name_matches(const char *file_name) { return matches_with_tail(file_name, ""); }

/* flock's refusals that mean "this filesystem has no locks", not "someone holds it". */
static bool locks_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == EINVAL || err == ENOSYS; }

static void note_no_locks(const char *path) {
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        ftl_log_info("%s: this filesystem does not support file locks: temporaries of runs killed while writing "
                     "there cannot be told from live ones and are not removed automatically", path);
}

static ftl_status lock_and_name(int fd, const char *pre, const char *temp) {
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (!locks_unsupported(errno))
            return ftl_fail(FTL_E_IO, "cannot lock the new temporary %s: %s", pre, strerror(errno));
        note_no_locks(pre);
    }
    if (rename(pre, temp) != 0) return ftl_fail(FTL_E_IO, "cannot rename %s to %s: %s", pre, temp, strerror(errno));
    return FTL_OK;
}

static void sweep_folder_of(const char *final_path) {
    char *folder = ftl_path_folder(final_path);
    ftl_temporaries_sweep(folder);
    free(folder);
}

ftl_status ftl_temp_file_create(const char *final_path, char **temp_path, int *fd) {
    *temp_path = NULL;
    *fd = -1;
    sweep_folder_of(final_path);
    char *temp = ftl_temp_name_for(final_path);
    char *pre = ftl_format("%s~", temp);
    int f = open(pre, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    ftl_status st = f >= 0 ? lock_and_name(f, pre, temp)
                           : ftl_fail(FTL_E_IO, "cannot create %s: %s", temp, strerror(errno));
    if (st != FTL_OK) {
        if (f >= 0) {
            unlink(pre);
            close(f);
        }
        free(pre);
        free(temp);
        return st;
    }
    free(pre);
    *temp_path = temp;
    *fd = f;
    return FTL_OK;
}

ftl_status ftl_temp_dir_create(const char *final_path, char **temp_path, int *lock_fd) {
    *temp_path = NULL;
    *lock_fd = -1;
    sweep_folder_of(final_path);
    char *temp = ftl_temp_name_for(final_path);
    char *pre = ftl_format("%s~", temp);
    ftl_status st = FTL_OK;
    int f = -1;
    if (mkdir(pre, 0777) != 0) st = ftl_fail(FTL_E_IO, "cannot create folder %s: %s", temp, strerror(errno));
    else if ((f = open(pre, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        st = ftl_fail(FTL_E_IO, "cannot open folder %s: %s", pre, strerror(errno));
    else st = lock_and_name(f, pre, temp);
    if (st != FTL_OK) {
        rmdir(pre);
        if (f >= 0) close(f);
        free(pre);
        free(temp);
        return st;
    }
    free(pre);
    *temp_path = temp;
    *lock_fd = f;
    return FTL_OK;
}

int ftl_temp_hold(const char *temp_path) {
    int fd = open(temp_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (locks_unsupported(errno)) note_no_locks(temp_path);
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- sweeping ---- */

static uint64_t tree_bytes(const char *path, int depth) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode) || depth > 16) return (uint64_t)st.st_size;
    uint64_t total = 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *child = ftl_format("%s/%s", path, e->d_name);
        total += tree_bytes(child, depth + 1);
        free(child);
    }
    closedir(d);
    return total;
}

/* Removes `path` when nobody holds its lock; adds its bytes to *bytes. */
static bool remove_if_abandoned(const char *path, bool pre_name, uint64_t *bytes) {
    struct stat st;
    if (lstat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return false;
    if (pre_name && time(NULL) - st.st_mtime < PRE_NAME_GRACE_SECONDS) return false;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
    if (fd < 0) return false;
    bool removed = false;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) { /* its writer is gone: it would still hold the lock */
        uint64_t size = tree_bytes(path, 0);
        if (ftl_remove_tree(path) == FTL_OK) {
            *bytes += size;
            removed = true;
        } else {
            ftl_log_warn("cannot remove %s, left by an interrupted run: %s", path, ftl_last_error());
        }
    } else if (locks_unsupported(errno)) {
        note_no_locks(path);
    }
    close(fd);
    return removed;
}

/* Folders swept by this process (a sweep is needed once: later temporaries there are its own). */
static pthread_mutex_t swept_lock = PTHREAD_MUTEX_INITIALIZER;
static char **swept;
static size_t swept_count;

static bool first_visit(const char *folder) {
    char *real = realpath(folder, NULL);
    if (!real) return false;
    bool first = true;
    pthread_mutex_lock(&swept_lock);
    for (size_t i = 0; i < swept_count && first; i++) first = strcmp(swept[i], real) != 0;
    if (first) {
        swept = ftl_xrealloc(swept, (swept_count + 1) * sizeof *swept);
        swept[swept_count++] = real;
    } else {
        free(real);
    }
    pthread_mutex_unlock(&swept_lock);
    return first;
}

uint64_t ftl_temporaries_sweep(const char *folder) {
    if (!first_visit(folder)) return 0;
    DIR *d = opendir(folder);
    if (!d) return 0;
    uint64_t bytes = 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        bool pre_name = matches_with_tail(e->d_name, "~");
        if (!pre_name && !ftl_temp_name_matches(e->d_name)) continue;
        char *path = strcmp(folder, "/") == 0 ? ftl_format("/%s", e->d_name) : ftl_format("%s/%s", folder, e->d_name);
        removed += remove_if_abandoned(path, pre_name, &bytes);
        free(path);
    }
    closedir(d);
    if (removed) /* on every rank: each cleans its own host */
        ftl_log_warn("removed %d temporar%s left by interrupted runs in %s (%.1f MB)", removed, removed == 1 ? "y" : "ies",
                     folder, (double)bytes / 1e6);
    return bytes;
}

/* ---- interrupt cleanup: a fixed table, so the signal handler needs no locks or malloc ---- */

enum { CLEANUP_SLOTS = 64, CLEANUP_PATH_MAX = 4096, TREE_DEPTH_MAX = 8 };
static char cleanup_paths[CLEANUP_SLOTS][CLEANUP_PATH_MAX];
static atomic_int cleanup_used[CLEANUP_SLOTS];
static pthread_mutex_t cleanup_lock = PTHREAD_MUTEX_INITIALIZER;

static void remove_registered_on_fatal_error(void) { ftl_temporaries_remove_registered(); }

void ftl_cleanup_register(const char *path) {
    ftl_set_fatal_cleanup(remove_registered_on_fatal_error);
    bool stored = false;
    pthread_mutex_lock(&cleanup_lock);
    for (int i = 0; i < CLEANUP_SLOTS && !stored && strlen(path) < CLEANUP_PATH_MAX; i++) {
        if (!atomic_load(&cleanup_used[i])) {
            strcpy(cleanup_paths[i], path);
            atomic_store(&cleanup_used[i], 1);
            stored = true;
        }
    }
    pthread_mutex_unlock(&cleanup_lock);
    if (!stored) fprintf(stderr, "ftl: warning: %s will not be removed if ftl is interrupted (too many open outputs)\n", path);
}

void ftl_cleanup_unregister(const char *path) {
    pthread_mutex_lock(&cleanup_lock);
    for (int i = 0; i < CLEANUP_SLOTS; i++) {
        if (atomic_load(&cleanup_used[i]) && strcmp(cleanup_paths[i], path) == 0) {
            atomic_store(&cleanup_used[i], 0);
            break;
        }
    }
    pthread_mutex_unlock(&cleanup_lock);
}

/* rm -rf with async-signal-safe calls only (openat, getdents64, unlinkat): a folder may hold files
 * of other ranks (prep's parts) that were never registered here. Entries are re-listed until a
 * pass finds none, since removing while listing may skip some. */
static void remove_tree_at(int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
    if (depth >= TREE_DEPTH_MAX) return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    char buf[2048] __attribute__((aligned(8)));
    for (int pass = 0; pass < 8; pass++) {
        bool saw_entry = false;
        if (lseek(fd, 0, SEEK_SET) != 0) break;
        ssize_t n;
        while ((n = getdents64(fd, buf, sizeof buf)) > 0) {
            for (ssize_t at = 0; at < n;) {
                struct dirent64 *e = (struct dirent64 *)(void *)(buf + at);
                at += e->d_reclen;
                const char *c = e->d_name;
                if (c[0] == '.' && (c[1] == '\0' || (c[1] == '.' && c[2] == '\0'))) continue;
                saw_entry = true;
                remove_tree_at(fd, c, depth + 1);
            }
        }
        if (!saw_entry) break;
    }
    close(fd);
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

bool ftl_temporaries_remove_registered(void) {
    /* Later registrations first: a file registered inside a folder registered before it. */
    for (int i = CLEANUP_SLOTS - 1; i >= 0; i--)
        if (atomic_load(&cleanup_used[i])) remove_tree_at(AT_FDCWD, cleanup_paths[i], 0);
    bool all_gone = true;
    for (int i = 0; i < CLEANUP_SLOTS; i++) {
        struct stat st;
        if (atomic_load(&cleanup_used[i]) && fstatat(AT_FDCWD, cleanup_paths[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
            all_gone = false;
    }
    return all_gone;
}

static void write_stderr(const char *text) {
    ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
    (void)ignored;
}

static void handle_interrupt(int sig) {
    bool any = false;
    for (int i = 0; i < CLEANUP_SLOTS && !any; i++) any = atomic_load(&cleanup_used[i]);
    if (!any) {
        write_stderr("\nftl: interrupted\n");
    } else if (ftl_temporaries_remove_registered()) {
        write_stderr("\nftl: interrupted; temporary outputs removed\n");
    } else {
        write_stderr("\nftl: interrupted; could not remove these temporary outputs (the next ftl command writing "
                     "beside them removes them):\n");
        for (int i = 0; i < CLEANUP_SLOTS; i++) {
            struct stat st;
            if (atomic_load(&cleanup_used[i]) && fstatat(AT_FDCWD, cleanup_paths[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
                write_stderr("  ");
                write_stderr(cleanup_paths[i]);
                write_stderr("\n");
            }
        }
    }
    _exit(128 + sig);
}

void ftl_exit_removing_temporaries(int code) {
    ftl_temporaries_remove_registered();
    _exit(code);
}

void ftl_install_interrupt_cleanup(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handle_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}
