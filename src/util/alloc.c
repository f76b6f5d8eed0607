/* Allocation that aborts on out-of-memory (after the temporaries are removed), and the fresh
 * strings built on it. */
#include "util/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory is fatal, but temporaries must still go, as on Ctrl-C. */
static void (*fatal_cleanup)(void);

void ftl_set_fatal_cleanup(void (*cleanup)(void)) { fatal_cleanup = cleanup; }

static void die_out_of_memory(void) {
    if (fatal_cleanup) fatal_cleanup();
    abort();
}

void *ftl_xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) {
        fprintf(stderr, "ftl: error: out of memory allocating %zu bytes\n", size);
        die_out_of_memory();
    }
    return p;
}

void *ftl_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "ftl: error: out of memory allocating %zu x %zu bytes\n", count, size);
        die_out_of_memory();
    }
    return p;
}

void *ftl_xrealloc(void *old, size_t size) {
    void *p = realloc(old, size ? size : 1);
    if (!p) {
        fprintf(stderr, "ftl: error: out of memory reallocating %zu bytes\n", size);
        die_out_of_memory();
    }
    return p;
}

char *ftl_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ftl_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

char *ftl_format(const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ftl_xmalloc((size_t)(n > 0 ? n : 0) + 1);
    vsnprintf(s, (size_t)(n > 0 ? n : 0) + 1, fmt, ap2);
    va_end(ap2);
    return s;
}
