/* String lists and folder listings. */
#include "util/string_list.h"
#include "util/alloc.h"
#include "util/error.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void ftl_string_list_push(ftl_string_list *l, char *s) {
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->items = ftl_xrealloc(l->items, (size_t)l->cap * sizeof *l->items);
    }
    l->items[l->count++] = s;
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void ftl_string_list_sort(ftl_string_list *l) {
    if (l->count > 1) qsort(l->items, (size_t)l->count, sizeof *l->items, compare_strings);
}

void ftl_string_list_free(ftl_string_list *l) {
    for (int64_t i = 0; i < l->count; i++) free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

ftl_status ftl_list_folder(const char *dir, ftl_string_list *names) {
    DIR *d = opendir(dir);
    if (!d) return ftl_fail(errno == ENOENT ? FTL_E_NOT_FOUND : FTL_E_IO, "cannot open folder %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') ftl_string_list_push(names, ftl_strdup(e->d_name));
    closedir(d);
    ftl_string_list_sort(names);
    return FTL_OK;
}
