/* File helpers and the interrupt-cleanup registry. */
#include "util/fsutil.h"
#include "util/alloc.h"
#include "util/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ranks_on_host = 1;

void ftl_set_ranks_on_host(int ranks) { ranks_on_host = ranks > 1 ? ranks : 1; }

/* A rank bound to some cores (Open MPI binds by default) uses those; an unbound rank takes its
 * share of the host, so N ranks on one host do not run N x cores threads. */
int ftl_cpu_count(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
        int bound = CPU_COUNT(&set);
        if (bound < n) return bound;
        n = bound;
    }
    n /= ranks_on_host;
    return n > 0 ? n : 1;
}

/* ---- files ---- */

void ftl_sync_directory_of(const char *path) {
    char *dir = ftl_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

ftl_status ftl_write_all(FILE *fp, const void *data, size_t size, const char *path_for_errors) {
    if (size && fwrite(data, 1, size, fp) != size)
        return ftl_fail(FTL_E_IO, "cannot write %s: %s", path_for_errors, strerror(errno));
    return FTL_OK;
}

ftl_status ftl_file_size(const char *path, uint64_t *size) {
    struct stat st;
    if (stat(path, &st) != 0)
        return ftl_fail(errno == ENOENT ? FTL_E_NOT_FOUND : FTL_E_IO, "cannot open %s: %s", path, strerror(errno));
    *size = (uint64_t)st.st_size;
    return FTL_OK;
}

ftl_status ftl_read_file(const char *path, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return ftl_fail(errno == ENOENT ? FTL_E_NOT_FOUND : FTL_E_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return ftl_fail(FTL_E_IO, "cannot read %s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(fp);
        return ftl_fail(FTL_E_NOMEM, "cannot read %s: out of memory for %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, fp);
    int read_error = ferror(fp);
    fclose(fp);
    if (got != n || read_error) {
        free(buf);
        return ftl_fail(FTL_E_IO, "cannot read %s: short read (%zu of %zu bytes)", path, got, n);
    }
    *data = buf;
    *size = n;
    return FTL_OK;
}

bool ftl_path_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

bool ftl_is_directory(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

ftl_status ftl_make_dirs(const char *path) {
    char *p = ftl_strdup(path);
    size_t n = strlen(p);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            ftl_status st = ftl_fail(FTL_E_IO, "cannot create folder %s: %s", p, strerror(errno));
            free(p);
            return st;
        }
        p[i] = saved;
    }
    free(p);
    if (!ftl_is_directory(path)) return ftl_fail(FTL_E_IO, "cannot create folder %s: a file is in the way", path);
    return FTL_OK;
}

ftl_status ftl_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? FTL_OK : ftl_fail(FTL_E_IO, "cannot remove %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *dir = opendir(path);
        if (!dir) return ftl_fail(FTL_E_IO, "cannot open folder %s: %s", path, strerror(errno));
        struct dirent *e;
        ftl_status result = FTL_OK;
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char *child = ftl_format("%s/%s", path, e->d_name);
            ftl_status st2 = ftl_remove_tree(child);
            free(child);
            if (st2 != FTL_OK) result = st2;
        }
        closedir(dir);
        if (result != FTL_OK) return result;
        if (rmdir(path) != 0) return ftl_fail(FTL_E_IO, "cannot remove folder %s: %s", path, strerror(errno));
        return FTL_OK;
    }
    if (unlink(path) != 0) return ftl_fail(FTL_E_IO, "cannot remove %s: %s", path, strerror(errno));
    return FTL_OK;
}

char *ftl_path_folder(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ftl_strdup(".");
    if (slash == path) return ftl_strdup("/");
    char *d = ftl_strdup(path);
    d[slash - path] = 0;
    return d;
}

const char *ftl_path_file_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}
