/* Logging: one line per call, written with a single fputs so threads never interleave lines; or
 * handed whole to the host program's sink (ftl_log_set_sink), since a notebook does not show C's
 * stdout and stderr. */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static ftl_log_sink sink_fn;
static void *sink_ctx;
static bool sink_redraws;

void ftl_log_set_sink(ftl_log_sink sink, void *ctx, bool redraw_progress) {
    sink_fn = sink;
    sink_ctx = ctx;
    sink_redraws = redraw_progress;
}

bool ftl_log_is_tty(void) { return sink_fn ? sink_redraws : isatty(STDERR_FILENO) == 1; }

void ftl_log_write(ftl_log_level level, bool output, const char *text) {
    if (sink_fn) {
        sink_fn(sink_ctx, level, output, text);
        return;
    }
    FILE *f = output ? stdout : stderr;
    fputs(text, f);
    fflush(f);
}

/* The sink's side of ftl_log_output(): whole lines, as the trainer prints them with fprintf. */
static char pending[8192];
static size_t pending_len;
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t output_write(void *cookie, const char *buf, size_t size) {
    (void)cookie;
    pthread_mutex_lock(&pending_lock);
    for (size_t i = 0; i < size; i++) {
        if (pending_len < sizeof pending - 1) pending[pending_len++] = buf[i];
        if (buf[i] == '\n' || pending_len == sizeof pending - 1) {
            pending[pending_len] = '\0';
            ftl_log_write(FTL_LOG_INFO, true, pending);
            pending_len = 0;
        }
    }
    pthread_mutex_unlock(&pending_lock);
    return (ssize_t)size;
}

static FILE *output_stream;
static void open_output_stream(void) {
    cookie_io_functions_t io = {.write = output_write};
    output_stream = fopencookie(NULL, "w", io);
    if (output_stream) setvbuf(output_stream, NULL, _IOLBF, 0);
}

FILE *ftl_log_output(void) {
    if (!sink_fn) return stdout;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, open_output_stream);
    return output_stream ? output_stream : stdout;
}

static void log_line(ftl_log_level level, const char *tag, const char *fmt, va_list ap) {
    if (!ftl_log_enabled(level)) return;
    char line[4096];
    int n = 0;
    if (log_world > 1) n = snprintf(line, sizeof line, "[rank %d] ", log_rank);
    n += snprintf(line + n, sizeof line - (size_t)n, "%s", tag);
    if (n < (int)sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    size_t len = strlen(line);
    if (len == sizeof line - 1) len--;
    line[len] = '\n', line[len + 1] = '\0';
    ftl_log_write(level, false, line);
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
