/* Internal logging to stderr: warnings always, info on rank 0 only. */
#ifndef FTL_UTIL_LOG_H
#define FTL_UTIL_LOG_H

#include "ftl/base.h"
#include <stdbool.h>

void ftl_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ftl_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ftl_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ftl_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool ftl_log_enabled(ftl_log_level level);
/* True when stderr is a terminal (progress bars redraw in place there). */
bool ftl_log_is_tty(void);

#endif
