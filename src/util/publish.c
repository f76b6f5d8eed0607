/* Publishing finished temporaries under their final names, never over another run's result. */
#include "util/publish.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/temporaries.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Whether `text` contains `match`, or ends with it when `match` ends in '$'. */
static bool test_match(const char *text, const char *match) {
    size_t n = strlen(match), t = strlen(text);
    if (n && match[n - 1] == '$') return t >= n - 1 && strncmp(text + t - (n - 1), match, n - 1) == 0;
    return strstr(text, match) != NULL;
}

/* Test-only: FTL_TEST_PAUSE_BEFORE_PUBLISH=MARKER makes the publishing of a final path matching
 * FTL_TEST_PAUSE_MATCH (a substring, or a suffix ending in '$'; any path when unset) write MARKER
 * ("<pid> <temporary>") and wait until MARKER.go exists, so a test can run a second command or kill
 * this one at exactly this point. */
static void test_pause_before_publish(const char *temp_path, const char *final_path) {
    const char *marker = getenv("FTL_TEST_PAUSE_BEFORE_PUBLISH");
    const char *match = getenv("FTL_TEST_PAUSE_MATCH");
    if (!marker || !*marker || (match && *match && !test_match(final_path, match))) return;
    char *text = ftl_format("%ld %s\n", (long)getpid(), temp_path);
    char *go = ftl_format("%s.go", marker);
    FILE *f = fopen(marker, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    const struct timespec tick = {0, 10 * 1000 * 1000};
    while (!ftl_path_exists(go)) nanosleep(&tick, NULL);
    free(go);
    free(text);
}

/* renameat2's flags are refused by some filesystems (and older kernels): EINVAL or ENOSYS. */
static bool flags_unsupported(int err) { return err == EINVAL || err == ENOSYS || err == EOPNOTSUPP; }

/* rename that never replaces: 0, or -1 with errno (EEXIST when final_path is taken). */
static int rename_no_replace(const char *from, const char *to, bool is_folder) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (!flags_unsupported(errno)) return -1;
    if (is_folder) { /* rename(2) replaces only an empty folder: nothing of another run is lost */
        if (ftl_path_exists(to) && !ftl_is_directory(to)) {
            errno = EEXIST;
            return -1;
        }
        return rename(from, to) == 0 ? 0 : ((errno == ENOTEMPTY ? (errno = EEXIST) : 0), -1);
    }
    if (link(from, to) == 0) return unlink(from) == 0 ? 0 : -1;
    if (errno == EEXIST) return -1;
    /* no hard links either (e.g. FAT): check then rename, the one window left */
    if (ftl_path_exists(to)) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

/* "<stem>-<n><ext>" beside final_path: "m.ftl" -> "m-2.ftl", "data/" -> "data-2". */
static char *kept_name(const char *final_path, int n) {
    const char *base = ftl_path_file_name(final_path);
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - final_path) : strlen(final_path);
    return ftl_format("%.*s-%d%s", (int)stem, final_path, n, stem < strlen(final_path) ? final_path + stem : "");
}

static ftl_status keep_aside(const char *temp_path, const char *final_path, bool is_folder) {
    for (int n = 2; n < 1000; n++) {
        char *kept = kept_name(final_path, n);
        if (rename_no_replace(temp_path, kept, is_folder) == 0) {
            ftl_sync_directory_of(kept);
            ftl_status st = ftl_fail(FTL_E_EXISTS,
                                     "%s was created by another run while this one worked, and is left as it is "
                                     "(no --overwrite); this run's result is kept as %s", final_path, kept);
            free(kept);
            return st;
        }
        int err = errno;
        free(kept);
        if (err != EEXIST)
            return ftl_fail(FTL_E_IO, "%s was created by another run while this one worked; keeping this run's result "
                            "beside it failed: %s (it stays at %s)", final_path, strerror(err), temp_path);
    }
    return ftl_fail(FTL_E_EXISTS, "%s was created by another run while this one worked and no free name was found "
                    "beside it: this run's result stays at %s", final_path, temp_path);
}

/* A folder over an existing one: swapped in one step, the old one removed after. */
static ftl_status replace_folder(const char *temp_dir, const char *final_dir) {
    if (renameat2(AT_FDCWD, temp_dir, AT_FDCWD, final_dir, RENAME_EXCHANGE) == 0) {
        ftl_sync_directory_of(final_dir);
        ftl_remove_tree(temp_dir); /* now the old folder; if this fails it is swept as a temporary */
        return FTL_OK;
    }
    if (!flags_unsupported(errno))
        return ftl_fail(FTL_E_IO, "cannot swap %s into %s: %s", temp_dir, final_dir, strerror(errno));
    /* moved aside under a temporary's name: a kill in between leaves it to the next sweep */
    char *old = ftl_temp_name_for(final_dir);
    ftl_status st = FTL_OK;
    if (rename(final_dir, old) != 0) st = ftl_fail(FTL_E_IO, "cannot move the old %s aside: %s", final_dir, strerror(errno));
    else if (rename(temp_dir, final_dir) != 0) {
        st = ftl_fail(FTL_E_IO, "cannot rename %s to %s: %s", temp_dir, final_dir, strerror(errno));
        rename(old, final_dir);
    } else {
        ftl_sync_directory_of(final_dir);
        ftl_remove_tree(old);
    }
    free(old);
    return st;
}

ftl_status ftl_publish(const char *temp_path, const char *final_path, bool replace) {
    test_pause_before_publish(temp_path, final_path);
    struct stat st;
    bool is_folder = lstat(temp_path, &st) == 0 && S_ISDIR(st.st_mode);
    if (replace && !is_folder) {
        if (rename(temp_path, final_path) != 0)
            return ftl_fail(FTL_E_IO, "cannot rename %s to %s: %s", temp_path, final_path, strerror(errno));
        return FTL_OK;
    }
    if (rename_no_replace(temp_path, final_path, is_folder) == 0) return FTL_OK;
    if (errno != EEXIST && errno != ENOTEMPTY)
        return ftl_fail(FTL_E_IO, "cannot rename %s to %s: %s", temp_path, final_path, strerror(errno));
    if (replace) return replace_folder(temp_path, final_path);
    return keep_aside(temp_path, final_path, is_folder);
}
