/* Checks before a training run's work (see train_checks.h). */
#include "pipeline/train_checks.h"
#include "ftl/dist.h"
#include "data/dataset.h"
#include "pipeline/dataset_classes.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Creates `folder` if missing and writes a file into it (removed at once): only a write tells,
 * as root passes access(2) on a folder whose permission bits forbid writing. */
static ftl_status check_folder_writable(const char *folder, const char *option, const char *value) {
    ftl_status st = ftl_make_dirs(folder);
    if (st != FTL_OK) return ftl_fail_context(st, "%s %s", option, value);
    char *probe = ftl_format("%s/.ftl-write-check-XXXXXX", folder);
    int fd = mkstemp(probe);
    if (fd < 0) st = ftl_fail(FTL_E_IO, "%s %s: cannot write into %s: %s", option, value, folder, strerror(errno));
    else {
        close(fd);
        unlink(probe);
    }
    free(probe);
    return st;
}

/* The folder a path pattern's files go into: up to its last '/', or, when that part holds a field
 * ({epoch}), the deepest folder before the field. */
static char *pattern_folder(const char *pattern) {
    const char *field = strchr(pattern, '{');
    size_t fixed = field ? (size_t)(field - pattern) : strlen(pattern);
    const char *slash = NULL;
    for (size_t i = 0; i < fixed; i++)
        if (pattern[i] == '/') slash = pattern + i;
    if (!slash) return ftl_strdup(".");
    if (slash == pattern) return ftl_strdup("/");
    return ftl_format("%.*s", (int)(slash - pattern), pattern);
}

ftl_status train_check_folder_of(const char *path, const char *option) {
    char *folder = pattern_folder(path);
    ftl_status st = check_folder_writable(folder, option, path);
    free(folder);
    return st;
}

ftl_status train_check_output_folders(const ftl_train_options *o) {
    if (ftl_dist_rank(&o->fit.collectives) != 0) return FTL_OK;
    FTL_TRY(train_check_folder_of(o->out_path, "--out"));
    if (o->fit.timeline_path) FTL_TRY(train_check_folder_of(o->fit.timeline_path, "--timeline"));
    if (o->fit.checkpoint_pattern) FTL_TRY(train_check_folder_of(o->fit.checkpoint_pattern, "--checkpoint"));
    if (o->fit.log_path) FTL_TRY(train_check_folder_of(o->fit.log_path, "--log"));
    return FTL_OK;
}

ftl_status train_check_checkpoint_matches(const ftl_train_options *o, const train_run *r, const char *checkpoint) {
    train_run_meta meta;
    train_run_meta_init(&meta, r, o);
    ftl_status st = ftl_checkpoint_check_identity(checkpoint, meta.kv, TRAIN_RUN_META_COUNT);
    train_run_meta_free(&meta);
    return st;
}

ftl_status train_check_resume_identity(const ftl_train_options *o, const train_run *r, const char *checkpoint) {
    if (!checkpoint) return FTL_OK;
    const ftl_collectives *col = &o->fit.collectives;
    /* only rank 0 needs the file (as for the resume itself) */
    ftl_status st = ftl_dist_rank(col) == 0 ? train_check_checkpoint_matches(o, r, checkpoint) : FTL_OK;
    bool any = false;
    ftl_status agree = ftl_dist_any_failed(col, st != FTL_OK, &any);
    if (st != FTL_OK) return st;
    if (agree != FTL_OK) return agree;
    if (any) return ftl_fail(FTL_E_INVALID_ARG, "rank 0 refused the checkpoint %s (see its message)", checkpoint);
    return FTL_OK;
}

/* "name" (label k), ... of the classes without rows, the first few; NULL when there are none. */
static char *empty_classes(const train_run *r, const int64_t *counts, int64_t *n_empty) {
    ftl_strbuf b = {0};
    *n_empty = 0;
    for (int64_t k = 0; k < r->class_count; k++) {
        if (counts[k] > 0) continue;
        if (++*n_empty <= 10) {
            ftl_strbuf_printf(&b, "%s", *n_empty > 1 ? ", " : "");
            ftl_json_append_string(&b, r->class_names[k]);
            ftl_strbuf_printf(&b, " (label %lld)", (long long)k);
        }
    }
    if (*n_empty > 10) ftl_strbuf_printf(&b, " and %lld more", (long long)(*n_empty - 10));
    return b.data;
}

/* The classes `path` has no rows of: a warning (rank 0 prints it), an error with --strict. */
static ftl_status report_empty(const ftl_train_options *o, const train_run *r, const char *path, const int64_t *counts,
                               const char *consequence) {
    int64_t n = 0;
    char *names = empty_classes(r, counts, &n);
    ftl_status st = FTL_OK;
    if (n > 0 && o->strict)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s has no images of %lld of the %lld classes: %s (--strict)", path, (long long)n,
                      (long long)r->class_count, names);
    else if (n > 0 && ftl_dist_rank(&o->fit.collectives) == 0)
        ftl_log_warn("%s has no images of %lld of the %lld classes: %s; %s (--strict makes this an error)", path,
                     (long long)n, (long long)r->class_count, names, consequence);
    free(names);
    return st;
}

ftl_status train_check_labels(const ftl_train_options *o, const train_run *r) {
    const char *column = o->embed.label_column ? o->embed.label_column : FTL_COLUMN_LABEL;
    int64_t *counts = ftl_xcalloc((size_t)r->class_count, sizeof *counts);
    const char *train_src[1] = {o->train_path}, *val_src[1] = {o->val_path};
    ftl_status st = dataset_count_labels(train_src, column, o->embed.label_offset, r->class_count, counts);
    if (st == FTL_OK)
        st = report_empty(o, r, o->train_path, counts, "the head learns classes it never sees an image of");
    if (st == FTL_OK && o->val_path) {
        st = dataset_count_labels(val_src, column, o->embed.label_offset, r->class_count, counts);
        if (st == FTL_OK) st = report_empty(o, r, o->val_path, counts, "val_acc and val_loss do not measure them");
    }
    free(counts);
    return st;
}
