/* Options by name (ftl/args.h): the table-driven parser of the command lines and the Python keywords. */
#include "ftl/args.h"
#include "util/error.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ftl_args_parse_bytes(const char *text, int64_t *bytes) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v >= 0)) return false;
    static const struct { const char *suffix; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1000.0}, {"M", 1048576.0},
        {"MiB", 1048576.0}, {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
        {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            double b = v * units[i].scale;
            if (b > 9.0e18) return false;
            *bytes = (int64_t)llround(b);
            return true;
        }
    }
    return false;
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static bool set_value(const ftl_arg *f, const char *value) {
    char *end;
    errno = 0;
    switch (f->kind) {
    case FTL_ARG_INT: {
        long v = strtol(value, &end, 10);
        if (*value == '\0' || *end || errno || v < INT_MIN || v > INT_MAX) return false;
        *(int *)f->target = (int)v;
        return true;
    }
    case FTL_ARG_INT64: {
        long long v = strtoll(value, &end, 10);
        if (*value == '\0' || *end || errno) return false;
        *(int64_t *)f->target = v;
        return true;
    }
    case FTL_ARG_DOUBLE: {
        double v = strtod(value, &end);
        if (*value == '\0' || *end || errno || !isfinite(v)) return false;
        *(double *)f->target = v;
        return true;
    }
    case FTL_ARG_STRING:
        *(const char **)f->target = value;
        return true;
    case FTL_ARG_BYTES:
        return ftl_args_parse_bytes(value, (int64_t *)f->target);
    case FTL_ARG_LIST: {
        ftl_arg_list *l = f->target;
        if (l->count >= FTL_ARG_LIST_MAX) return false;
        l->values[l->count++] = value;
        return true;
    }
    case FTL_ARG_BOOL:
        return false;
    }
    return false;
}

static const ftl_arg *find(const ftl_arg *args, int count, const char *name, size_t name_len, bool *negated) {
    for (int k = 0; k < count; k++) {
        if (strlen(args[k].name) == name_len && strncmp(args[k].name, name, name_len) == 0) return &args[k];
        if (args[k].kind == FTL_ARG_BOOL && name_len == strlen(args[k].name) + 3 && strncmp(name, "no-", 3) == 0 &&
            strncmp(name + 3, args[k].name, name_len - 3) == 0) {
            *negated = true;
            return &args[k];
        }
    }
    return NULL;
}

ftl_status ftl_args_parse(const ftl_arg *args, int arg_count, int argc, char **argv, const char **positional,
                          int max_positional, int *positional_count, bool *help_asked) {
    int npos = 0;
    bool only_positional = false;
    *help_asked = false;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) break;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return *help_asked = true, FTL_OK;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == '\0') {
            if (npos >= max_positional) return ftl_fail(FTL_E_INVALID_ARG, "unexpected argument '%s'", arg);
            positional[npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = true;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        bool negated = false;
        const ftl_arg *match = find(args, arg_count, name, name_len, &negated);
        if (!match) {
            char bare[128];
            snprintf(bare, sizeof bare, "%.*s", (int)(name_len < 100 ? name_len : 100), name);
            const char *best = NULL;
            size_t best_d = 3;
            for (int k = 0; k < arg_count; k++) {
                size_t d = edit_distance(bare, args[k].name);
                if (d < best_d) best_d = d, best = args[k].name;
            }
            if (best) return ftl_fail(FTL_E_INVALID_ARG, "unknown option '--%s' (did you mean '--%s'?)", bare, best);
            return ftl_fail(FTL_E_INVALID_ARG, "unknown option '%s'", arg);
        }
        if (match->kind == FTL_ARG_BOOL) {
            if (eq) return ftl_fail(FTL_E_INVALID_ARG, "option '%s' takes no value", arg);
            *(bool *)match->target = !negated;
            continue;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (i + 1 >= argc) return ftl_fail(FTL_E_INVALID_ARG, "option '%s' needs a value", arg);
            value = argv[++i];
        }
        if (match->kind == FTL_ARG_LIST && ((ftl_arg_list *)match->target)->count >= FTL_ARG_LIST_MAX)
            return ftl_fail(FTL_E_INVALID_ARG, "--%s is given more than %d times", match->name, FTL_ARG_LIST_MAX);
        if (!set_value(match, value))
            return ftl_fail(FTL_E_INVALID_ARG, "invalid value '%s' for --%s (expected %s)", value, match->name,
                            match->value_name ? match->value_name : "a value");
    }
    *positional_count = npos;
    return FTL_OK;
}

bool ftl_args_given(int argc, char **argv, const char *name) {
    size_t n = strlen(name);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (a[0] != '-') continue;
        a += a[1] == '-' ? 2 : 1;
        if (strncmp(a, "no-", 3) == 0 && strcmp(a + 3, name) == 0) return true;
        if (strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '=')) return true;
    }
    return false;
}
