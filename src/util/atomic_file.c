/* Outputs that appear under their final name only when complete: a locked temporary
 * (util/temporaries.h), fsynced, then published (util/publish.h). */
#include "util/fsutil.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/publish.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ftl_status ftl_atomic_open(ftl_atomic_file *f, const char *final_path) {
    memset(f, 0, sizeof *f);
    int fd;
    FTL_TRY(ftl_temp_file_create(final_path, &f->temp_path, &fd));
    f->final_path = ftl_strdup(final_path);
    ftl_cleanup_register(f->temp_path);
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        ftl_status st = ftl_fail(FTL_E_IO, "cannot write %s: %s", f->temp_path, strerror(errno));
        close(fd);
        ftl_atomic_abort(f);
        return st;
    }
    return FTL_OK;
}

ftl_status ftl_atomic_flush(ftl_atomic_file *f) {
    if (!f->fp) return ftl_fail(FTL_E_INTERNAL, "atomic flush of %s without an open file", f->final_path ? f->final_path : "?");
    if (fflush(f->fp) != 0 || (!f->skip_fsync && fsync(fileno(f->fp)) != 0))
        return ftl_fail(FTL_E_IO, "cannot write %s: %s", f->final_path, strerror(errno));
    return FTL_OK;
}

ftl_status ftl_atomic_commit(ftl_atomic_file *f) {
    if (!f->fp) return ftl_fail(FTL_E_INTERNAL, "atomic commit of %s without an open file",
                                f->final_path ? f->final_path : "?");
    ftl_status st = FTL_OK;
    if (fflush(f->fp) != 0 || (!f->skip_fsync && fsync(fileno(f->fp)) != 0))
        st = ftl_fail(FTL_E_IO, "cannot write %s: %s", f->final_path, strerror(errno));
    /* published while the file is still open: its lock keeps sweepers away until it has its name */
    if (st == FTL_OK) st = ftl_publish(f->temp_path, f->final_path, !f->no_replace);
    if (fclose(f->fp) != 0 && st == FTL_OK)
        st = ftl_fail(FTL_E_IO, "cannot write %s: %s", f->final_path, strerror(errno));
    f->fp = NULL;
    if (st != FTL_OK) {
        ftl_atomic_abort(f);
        return st;
    }
    if (!f->skip_fsync) ftl_sync_directory_of(f->final_path);
    ftl_cleanup_unregister(f->temp_path);
    free(f->temp_path);
    free(f->final_path);
    memset(f, 0, sizeof *f);
    return FTL_OK;
}

void ftl_atomic_abort(ftl_atomic_file *f) {
    if (f->fp) fclose(f->fp);
    if (f->temp_path) {
        unlink(f->temp_path);
        ftl_cleanup_unregister(f->temp_path);
    }
    free(f->temp_path);
    free(f->final_path);
    memset(f, 0, sizeof *f);
}

ftl_status ftl_write_file_atomic(const char *path, const void *data, size_t size) {
    return ftl_output_write(path, data, size, true);
}

ftl_status ftl_output_write(const char *path, const void *data, size_t size, bool overwrite) {
    ftl_atomic_file f;
    FTL_TRY(ftl_atomic_open(&f, path));
    f.no_replace = !overwrite;
    ftl_status st = ftl_write_all(f.fp, data, size, path);
    if (st != FTL_OK) {
        ftl_atomic_abort(&f);
        return st;
    }
    return ftl_atomic_commit(&f);
}
