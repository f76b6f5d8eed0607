/* Internal logging to stderr: warnings always, info on rank 0 only. */
#ifndef FTL_UTIL_LOG_H
#define FTL_UTIL_LOG_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdio.h>

void ftl_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ftl_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ftl_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ftl_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool ftl_log_enabled(ftl_log_level level);
/* True when progress bars redraw in place: stderr is a terminal, or the sink asked for it. */
bool ftl_log_is_tty(void);
/* text as it is (a line with its newline, or a progress redraw starting with '\r') to the sink, or
 * to stdout (output) or stderr. */
void ftl_log_write(ftl_log_level level, bool output, const char *text);
/* Where result lines go (the trainer's epoch lines): stdout, or a stream that hands each whole line
 * to the sink when one is set. */
FILE *ftl_log_output(void);

#endif
