/* Outputs that are inputs (or other outputs), found before the work by resolving every path. */
#include "util/io_check.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum io_kind { IO_INPUT, IO_OUTPUT, IO_PATTERN, IO_FOLDER } io_kind;

typedef struct io_entry {
    io_kind kind;
    char *role, *given;
    char *canonical;          /* absolute, symlinks resolved as far as the path exists */
    bool exists, is_folder;
    dev_t dev;
    ino_t ino;
    char **suffixes;          /* IO_FOLDER: "SUFFIX" or "PREFIX*SUFFIX" */
    bool pattern_allowed;     /* IO_INPUT: an output pattern may name it */
} io_entry;

struct ftl_io_check {
    char *command;
    io_entry *entries;
    size_t count;
};

ftl_io_check *ftl_io_check_new(const char *command) {
    ftl_io_check *c = ftl_xcalloc(1, sizeof *c);
    c->command = ftl_strdup(command);
    return c;
}

void ftl_io_check_free(ftl_io_check *c) {
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) {
        io_entry *e = &c->entries[i];
        free(e->role);
        free(e->given);
        free(e->canonical);
        for (char **s = e->suffixes; s && *s; s++) free(*s);
        free(e->suffixes);
    }
    free(c->entries);
    free(c->command);
    free(c);
}

/* The absolute path with every existing part resolved; the parts that do not exist yet appended
 * as written ("." and ".." applied to the text). */
static char *canonical_path(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    char *trimmed = ftl_format("%.*s", (int)n, path);
    char *real = realpath(trimmed, NULL);
    if (real) {
        free(trimmed);
        return real;
    }
    const char *slash = strrchr(trimmed, '/');
    char *parent;
    if (!slash) {
        char cwd[PATH_MAX];
        parent = getcwd(cwd, sizeof cwd) ? ftl_strdup(cwd) : ftl_strdup(".");
    } else {
        char *folder = ftl_path_folder(trimmed);
        parent = canonical_path(folder);
        free(folder);
    }
    const char *name = slash ? slash + 1 : trimmed;
    char *out;
    if (strcmp(name, ".") == 0 || name[0] == '\0') {
        out = parent;
    } else if (strcmp(name, "..") == 0) {
        out = ftl_path_folder(parent);
        free(parent);
    } else {
        out = strcmp(parent, "/") == 0 ? ftl_format("/%s", name) : ftl_format("%s/%s", parent, name);
        free(parent);
    }
    free(trimmed);
    return out;
}

static io_entry *add(ftl_io_check *c, io_kind kind, const char *role, const char *path) {
    c->entries = ftl_xrealloc(c->entries, (c->count + 1) * sizeof *c->entries);
    io_entry *e = &c->entries[c->count++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->role = ftl_strdup(role);
    e->given = ftl_strdup(path);
    if (kind == IO_PATTERN) { /* the folder part resolved, the name kept as a pattern */
        const char *slash = strrchr(path, '/');
        char *folder = slash ? ftl_path_folder(path) : ftl_strdup(".");
        char *canon = strchr(folder, '{') ? ftl_strdup(folder) : canonical_path(folder);
        e->canonical = ftl_format("%s/%s", strcmp(canon, "/") == 0 ? "" : canon, slash ? slash + 1 : path);
        free(folder);
        free(canon);
        return e;
    }
    e->canonical = canonical_path(path);
    struct stat st;
    if (stat(path, &st) == 0) {
        e->exists = true;
        e->is_folder = S_ISDIR(st.st_mode);
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    return e;
}

void ftl_io_check_input(ftl_io_check *c, const char *role, const char *path) {
    if (path && *path) add(c, IO_INPUT, role, path);
}

void ftl_io_check_output(ftl_io_check *c, const char *role, const char *path) {
    if (path && *path) add(c, IO_OUTPUT, role, path);
}

void ftl_io_check_output_pattern(ftl_io_check *c, const char *role, const char *pattern) {
    if (pattern && *pattern) add(c, IO_PATTERN, role, pattern);
}

void ftl_io_check_output_folder(ftl_io_check *c, const char *role, const char *folder, const char *const *suffixes) {
    if (!folder || !*folder) return;
    io_entry *e = add(c, IO_FOLDER, role, folder);
    size_t n = 0;
    while (suffixes && suffixes[n]) n++;
    e->suffixes = ftl_xcalloc(n + 1, sizeof *e->suffixes);
    for (size_t i = 0; i < n; i++) e->suffixes[i] = ftl_strdup(suffixes[i]);
}

void ftl_io_check_allow_pattern_input(ftl_io_check *c, const char *role) {
    for (size_t i = 0; i < c->count; i++)
        if (c->entries[i].kind == IO_INPUT && strcmp(c->entries[i].role, role) == 0) c->entries[i].pattern_allowed = true;
}

static bool same_file(const io_entry *a, const io_entry *b) {
    if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->canonical, b->canonical) == 0;
}

/* Whether `path` lies inside folder `dir` (both canonical). */
static bool inside(const char *path, const char *dir) {
    size_t n = strlen(dir);
    if (strcmp(dir, "/") == 0) return path[0] == '/' && path[1] != '\0';
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* "{epoch}" and "{epoch:0Nd}" match one or more digits; everything else itself. */
static bool pattern_matches(const char *pattern, const char *text) {
    while (*pattern) {
        if (*pattern == '{') {
            const char *close = strchr(pattern, '}');
            if (!close) return false;
            if (*text < '0' || *text > '9') return false;
            while (*text >= '0' && *text <= '9') {
                if (pattern_matches(close + 1, text + 1)) return true;
                text++;
            }
            return false;
        }
        if (*pattern++ != *text++) return false;
    }
    return *text == '\0';
}

static bool name_has_suffix(const char *name, const char *spec) {
    const char *star = strchr(spec, '*');
    size_t prefix = star ? (size_t)(star - spec) : 0;
    const char *suffix = star ? star + 1 : spec;
    size_t n = strlen(name), s = strlen(suffix);
    return n >= prefix + s && strncmp(name, spec, prefix) == 0 && strcmp(name + n - s, suffix) == 0;
}

static ftl_status conflict(const ftl_io_check *c, const io_entry *out, const io_entry *other, const char *how) {
    return ftl_fail(FTL_E_INVALID_ARG, "%s: %s %s %s %s %s: refusing before any work (give another path)", c->command,
                    out->role, out->given, how, other->role, other->given);
}

/* The conflict between an output-side entry and another entry, if any. */
static ftl_status check_pair(const ftl_io_check *c, const io_entry *o, const io_entry *x) {
    bool x_input = x->kind == IO_INPUT;
    const char *what = x_input ? "is the input" : "is also the output";
    switch (o->kind) {
    case IO_OUTPUT:
        if ((x->kind == IO_INPUT || x->kind == IO_OUTPUT) && same_file(o, x)) return conflict(c, o, x, what);
        if (x_input && x->is_folder && inside(o->canonical, x->canonical))
            return conflict(c, o, x, "would be written inside the input folder");
        break;
    case IO_PATTERN:
        if ((x->kind == IO_INPUT && !x->pattern_allowed) || x->kind == IO_OUTPUT)
            if (pattern_matches(o->canonical, x->canonical))
                return conflict(c, o, x, x_input ? "would overwrite the input" : "would overwrite the output");
        if (x_input && x->is_folder && inside(o->canonical, x->canonical))
            return conflict(c, o, x, "would be written inside the input folder");
        break;
    case IO_FOLDER:
        if (x->kind == IO_INPUT || x->kind == IO_OUTPUT) {
            char *folder = ftl_path_folder(x->canonical);
            bool here = strcmp(folder, o->canonical) == 0;
            free(folder);
            for (char **s = o->suffixes; here && s && *s; s++)
                if (name_has_suffix(ftl_path_file_name(x->canonical), *s))
                    return conflict(c, o, x, x_input ? "would write over the input" : "would write over the output");
        }
        if (x_input && x->is_folder && (inside(o->canonical, x->canonical) || strcmp(o->canonical, x->canonical) == 0))
            return conflict(c, o, x, "is inside the input folder");
        break;
    case IO_INPUT:
        break;
    }
    return FTL_OK;
}

ftl_status ftl_io_check_run(const ftl_io_check *c) {
    for (size_t i = 0; i < c->count; i++) {
        if (c->entries[i].kind == IO_INPUT) continue;
        for (size_t j = 0; j < c->count; j++) {
            if (j == i) continue;
            /* two outputs: each pair once, the earlier one named first */
            if (c->entries[j].kind == IO_OUTPUT && c->entries[i].kind == IO_OUTPUT && j < i) continue;
            FTL_TRY(check_pair(c, &c->entries[i], &c->entries[j]));
        }
    }
    return FTL_OK;
}

bool ftl_io_check_writes_into(const ftl_io_check *c, const char *folder) {
    char *canon = canonical_path(folder);
    bool found = false;
    for (size_t i = 0; i < c->count && !found; i++) {
        const io_entry *e = &c->entries[i];
        if (e->kind == IO_INPUT) continue;
        char *dir = e->kind == IO_FOLDER ? ftl_strdup(e->canonical) : ftl_path_folder(e->canonical);
        found = strcmp(dir, canon) == 0;
        free(dir);
        if (!found && e->kind != IO_FOLDER) { /* a link there to a file elsewhere: where it was given */
            char *given_folder = ftl_path_folder(e->given);
            char *resolved = canonical_path(given_folder);
            found = strcmp(resolved, canon) == 0;
            free(given_folder);
            free(resolved);
        }
    }
    free(canon);
    return found;
}

bool ftl_io_same_path(const char *a, const char *b) {
    if (!a || !b) return false;
    ftl_io_check *c = ftl_io_check_new("");
    add(c, IO_INPUT, "", a);
    add(c, IO_INPUT, "", b);
    bool same = same_file(&c->entries[0], &c->entries[1]);
    ftl_io_check_free(c);
    return same;
}
