/* Flag parsing shared by every subcommand. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_print_help(const cli_command *cmd, const cli_flag *flags, int flag_count) {
    printf("usage: %s\n\n%s\n", cmd->usage, cmd->summary);
    if (flag_count > 0) printf("\noptions:\n");
    for (int i = 0; i < flag_count; i++) {
        char left[96];
        /* as it is typed: one dash for a one-letter option (-o), two otherwise */
        const char *dashes = flags[i].name[0] && !flags[i].name[1] ? "-" : "--";
        if (flags[i].kind == CLI_BOOL)
            snprintf(left, sizeof left, "%s%s", dashes, flags[i].name);
        else if (flags[i].kind == CLI_LIST) /* repeatable */
            snprintf(left, sizeof left, "%s%s %s ...", dashes, flags[i].name, flags[i].value_name ? flags[i].value_name : "VALUE");
        else
            snprintf(left, sizeof left, "%s%s %s", dashes, flags[i].name, flags[i].value_name ? flags[i].value_name : "VALUE");
        printf("  %-30s %s\n", left, flags[i].help);
    }
}

int cli_report(ftl_status status) {
    if (status == FTL_OK) return 0;
    const ftl_collectives *world = ftl_dist_world();
    const char *message = ftl_last_error()[0] ? ftl_last_error() : ftl_status_name(status);
    if (ftl_dist_active(world) && world->label) fprintf(stderr, "ftl: error: rank %s: %s\n", world->label, message);
    else if (ftl_dist_active(world)) fprintf(stderr, "ftl: error: rank %d: %s\n", world->rank, message);
    else fprintf(stderr, "ftl: error: %s\n", message);
    return ftl_status_exit_code(status);
}

int cli_usage_error(const cli_command *cmd) {
    fprintf(stderr, "ftl %s: error: %s\n", cmd->name, ftl_last_error());
    fprintf(stderr, "usage: %s  (ftl %s --help for options)\n", cmd->usage, cmd->name);
    return 2;
}

int cli_parse(const cli_command *cmd, const cli_flag *flags, int flag_count, int argc, char **argv,
              const char **positional, int *positional_count) {
    bool help = false;
    int npos = 0;
    if (ftl_args_parse(flags, flag_count, argc, argv, positional, cmd->max_positional, &npos, &help) != FTL_OK)
        return cli_usage_error(cmd);
    if (help) {
        cli_print_help(cmd, flags, flag_count);
        return -1;
    }
    if (npos < cmd->min_positional) {
        fprintf(stderr, "ftl %s: error: %s\nusage: %s  (ftl %s --help for options)\n", cmd->name,
                npos == 0 ? "missing arguments" : "too few arguments", cmd->usage, cmd->name);
        return 2;
    }
    *positional_count = npos;
    return 0;
}

int cli_set_stall_timeout(const char *command, double seconds) {
    if (!(seconds >= 0) || isinf(seconds)) {
        fprintf(stderr, "ftl %s: error: --stall-timeout must be a finite number of seconds >= 0 (0 = never)\n", command);
        return 2;
    }
    ftl_dist_set_stall_timeout(seconds);
    return 0;
}

bool cli_given(int argc, char **argv, const char *name) { return ftl_args_given(argc, argv, name); }
