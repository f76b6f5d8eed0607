/* Logging: one line per call, written with a single fputs so threads never interleave lines. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static ftl_log_level current_level = FTL_LOG_INFO;
static int log_rank = 0, log_world = 1;

void ftl_log_set_level(ftl_log_level level) { current_level = level; }

void ftl_log_set_rank(int rank, int world_size) {
    log_rank = rank;
    log_world = world_size;
}

bool ftl_log_enabled(ftl_log_level level) {
    if (level > current_level) return false;
    if (level >= FTL_LOG_INFO && log_rank != 0) return false;
    return true;
}

bool ftl_log_is_tty(void) { return isatty(STDERR_FILENO) == 1; }

static void log_line(ftl_log_level level, const char *tag, const char *fmt, va_list ap) {
    if (!ftl_log_enabled(level)) return;
    char line[4096];
    int n = 0;
    if (log_world > 1) n = snprintf(line, sizeof line, "[rank %d] ", log_rank);
    n += snprintf(line + n, sizeof line - (size_t)n, "%s", tag);
    if (n < (int)sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
}

#define DEFINE_LOG_FUNCTION(name, level, tag)      \
    void name(const char *fmt, ...) {              \
        va_list ap;                                \
        va_start(ap, fmt);                         \
        log_line(level, tag, fmt, ap);             \
        va_end(ap);                                \
    }

DEFINE_LOG_FUNCTION(ftl_log_error, FTL_LOG_ERROR, "ftl: error: ")
DEFINE_LOG_FUNCTION(ftl_log_warn, FTL_LOG_WARN, "ftl: warning: ")
DEFINE_LOG_FUNCTION(ftl_log_info, FTL_LOG_INFO, "")
DEFINE_LOG_FUNCTION(ftl_log_debug, FTL_LOG_DEBUG, "ftl: debug: ")
