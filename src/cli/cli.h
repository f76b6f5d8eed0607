/* Shared command-line plumbing: a declarative flag table per subcommand, `--flag value` and
 * `--flag=value`, generated --help, and an error (with a suggestion) for unknown flags. */
#ifndef FTL_CLI_H
#define FTL_CLI_H

#include "ftl.h"
#include <stdbool.h>
#include <stdint.h>

/* The flag table is the library's (ftl/args.h); these are its names in the command files. */
typedef ftl_arg cli_flag;
typedef ftl_arg_list cli_list;
#define CLI_BOOL FTL_ARG_BOOL
#define CLI_INT FTL_ARG_INT
#define CLI_INT64 FTL_ARG_INT64
#define CLI_DOUBLE FTL_ARG_DOUBLE
#define CLI_STRING FTL_ARG_STRING
#define CLI_BYTES FTL_ARG_BYTES
#define CLI_LIST FTL_ARG_LIST

typedef struct cli_command {
    const char *name;
    const char *usage;      /* e.g. "ftl prep SRC OUT [options]" */
    const char *summary;    /* one line */
    int min_positional, max_positional;
} cli_command;

/* Whether option --name (or -name, --name=V, --no-name) is on the command line: an exact token,
 * never a substring of another option's value. */
bool cli_given(int argc, char **argv, const char *name);
/* Applies --stall-timeout S (S >= 0; 0 = never): 0, or 2 after a usage error naming the command. */
int cli_set_stall_timeout(const char *command, double seconds);
/* Parses argv[1..] (argv[0] is the subcommand name). On success fills positional[] (pointers
 * into argv) and *positional_count, returns 0. Prints help and returns -1 for --help; prints
 * an error and returns 2 for bad usage. */
int cli_parse(const cli_command *cmd, const cli_flag *flags, int flag_count, int argc, char **argv,
              const char **positional, int *positional_count);
void cli_print_help(const cli_command *cmd, const cli_flag *flags, int flag_count);
/* Prints "ftl: error: <last error>" and returns the exit code for the status. */
int cli_report(ftl_status status);
#define cli_parse_bytes ftl_args_parse_bytes
/* A usage error of `ftl COMMAND` (ftl_last_error()'s message) and the usage line; returns 2. */
int cli_usage_error(const cli_command *cmd);

/* One function per subcommand; argv[0] is the subcommand name. */
int cli_cmd_prep(int argc, char **argv);
int cli_cmd_inspect(int argc, char **argv);
int cli_cmd_embed(int argc, char **argv);
int cli_cmd_train(int argc, char **argv);
/* An error of ftl_train_args_parse as `ftl train` prints it (a usage error with its usage line, or
 * the error): the exit code. ftl sweep prints a trial's refused options with it. */
int cli_train_parse_error(ftl_status status);
int cli_cmd_eval(int argc, char **argv);
int cli_cmd_predict(int argc, char **argv);
int cli_cmd_inspect_model(int argc, char **argv); /* ftl inspect MODEL.onnx */
int cli_cmd_report(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);
int cli_cmd_sweep(int argc, char **argv);

#endif
