/* Memory and string helpers: allocation that aborts on out-of-memory, and fresh strings. */
#ifndef FTL_UTIL_ALLOC_H
#define FTL_UTIL_ALLOC_H

#include <stddef.h>

/* strdup/printf into a fresh string; abort on out-of-memory (small strings only). */
char *ftl_strdup(const char *s);
char *ftl_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* malloc/calloc/realloc that abort with a message when memory is exhausted; use for sizes that
 * do not come from untrusted input (parsers bound sizes by the file size first). */
void *ftl_xmalloc(size_t size);
void *ftl_xcalloc(size_t count, size_t size);
void *ftl_xrealloc(void *p, size_t size);

/* What running out of memory does before it aborts (the temporaries registry removes its paths). */
void ftl_set_fatal_cleanup(void (*cleanup)(void));

#endif
