/* ftl public API: options by name. A declarative table of `--name value` options, parsed from an
 * argument vector: the parser behind every `ftl` command line, and behind the Python package's
 * keyword arguments, so that both check options the same way. */
#ifndef FTL_ARGS_H
#define FTL_ARGS_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ftl_arg_kind {
    FTL_ARG_BOOL,    /* --name sets true; --no-name sets false */
    FTL_ARG_INT,     /* int */
    FTL_ARG_INT64,   /* int64_t */
    FTL_ARG_DOUBLE,  /* double (finite) */
    FTL_ARG_STRING,  /* const char * (points into argv) */
    FTL_ARG_BYTES,   /* int64_t, accepts K/M/G/KiB/MiB/GiB suffixes */
    FTL_ARG_LIST,    /* ftl_arg_list: a repeatable option; every occurrence appends its value */
} ftl_arg_kind;

enum { FTL_ARG_LIST_MAX = 64 };

typedef struct ftl_arg_list {
    const char *values[FTL_ARG_LIST_MAX]; /* point into argv, in command-line order */
    int count;
} ftl_arg_list;

typedef struct ftl_arg {
    const char *name;       /* without the leading dashes */
    ftl_arg_kind kind;
    void *target;           /* where the value goes (NULL in a table that only describes) */
    const char *value_name; /* shown in help, e.g. "N" */
    const char *help;
} ftl_arg;

/* Parses argv[1..] (argv[0] names the command) against the table: `--name value`, `--name=value`,
 * `-n value` for one-letter names, `--` ends the options. Positional arguments go to positional[]
 * (pointers into argv; at most max_positional). Errors (FTL_E_INVALID_ARG) name the option and what
 * was expected, and suggest the nearest known name for an unknown one. *help_asked: --help or -h was
 * given (then nothing else is checked). */
ftl_status ftl_args_parse(const ftl_arg *args, int arg_count, int argc, char **argv, const char **positional,
                          int max_positional, int *positional_count, bool *help_asked);
/* Parses "1.5MiB", "64K", "1048576" into bytes; false on garbage. */
bool ftl_args_parse_bytes(const char *text, int64_t *bytes);
/* Whether option --name (or -name, --name=V, --no-name) is in argv: an exact token, never a
 * substring of another option's value. */
bool ftl_args_given(int argc, char **argv, const char *name);

#ifdef __cplusplus
}
#endif
#endif
