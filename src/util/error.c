/* Thread-local error messages. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { ERROR_MESSAGE_CAPACITY = 2048 };
static _Thread_local char error_message[ERROR_MESSAGE_CAPACITY];

const char *ftl_last_error(void) { return error_message; }

void ftl_clear_error(void) { error_message[0] = '\0'; }

ftl_status ftl_fail(ftl_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return code;
}

ftl_status ftl_fail_context(ftl_status code, const char *fmt, ...) {
    char prefix[ERROR_MESSAGE_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0) return code;
    /* Join by hand: the result is cut at the buffer's end on purpose. */
    char joined[ERROR_MESSAGE_CAPACITY];
    size_t used = 0;
    const char *parts[3] = {prefix, error_message[0] ? ": " : "", error_message};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(parts[i]);
        if (len > sizeof joined - 1 - used) len = sizeof joined - 1 - used;
        memcpy(joined + used, parts[i], len);
        used += len;
    }
    joined[used] = '\0';
    memcpy(error_message, joined, used + 1);
    return code;
}

const char *ftl_status_name(ftl_status status) {
    switch (status) {
    case FTL_OK: return "ok";
    case FTL_E_INVALID_ARG: return "invalid argument";
    case FTL_E_NOT_FOUND: return "not found";
    case FTL_E_EXISTS: return "already exists";
    case FTL_E_IO: return "I/O error";
    case FTL_E_FORMAT: return "malformed input";
    case FTL_E_UNSUPPORTED: return "unsupported";
    case FTL_E_NOMEM: return "out of memory";
    case FTL_E_INTERRUPTED: return "interrupted";
    case FTL_E_INTERNAL: return "internal error";
    }
    return "unknown status";
}

int ftl_status_exit_code(ftl_status status) {
    switch (status) {
    case FTL_OK: return 0;
    case FTL_E_INVALID_ARG:
    case FTL_E_NOT_FOUND:
    case FTL_E_EXISTS: return 2;
    default: return 1;
    }
}
