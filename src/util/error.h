/* Internal error reporting: set a thread-local message and return a status in one call. */
#ifndef FTL_UTIL_ERROR_H
#define FTL_UTIL_ERROR_H

#include "ftl/base.h"

/* Sets the thread's error message and returns `code`, so callers write `return ftl_fail(...)`. */
ftl_status ftl_fail(ftl_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends context ("file.parquet: row group 3: ") to the current message; returns `code`. */
ftl_status ftl_fail_context(ftl_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ftl_clear_error(void);

#define FTL_TRY(expr)                                  \
    do {                                               \
        ftl_status ftl_try_status_ = (expr);           \
        if (ftl_try_status_ != FTL_OK) return ftl_try_status_; \
    } while (0)

#endif
