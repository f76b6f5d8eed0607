/* A growable list of owned strings, and sorted folder listings built on it. */
#ifndef FTL_UTIL_STRING_LIST_H
#define FTL_UTIL_STRING_LIST_H

#include "ftl/base.h"
#include <stdint.h>

typedef struct ftl_string_list {
    char **items;
    int64_t count, cap;
} ftl_string_list;

/* Takes ownership of s (malloc'd). */
void ftl_string_list_push(ftl_string_list *l, char *s);
void ftl_string_list_sort(ftl_string_list *l);  /* byte order, so listings are the same everywhere */
void ftl_string_list_free(ftl_string_list *l);
/* Names in a folder, sorted, hidden ones (".x") skipped. */
ftl_status ftl_list_folder(const char *dir, ftl_string_list *names);

#endif
