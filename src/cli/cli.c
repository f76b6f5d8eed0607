/* Flag parsing shared by every subcommand. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool cli_parse_bytes(const char *text, int64_t *bytes) {
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

static int usage_error(const cli_command *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "ftl %s: error: ", cmd->name);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: %s  (ftl %s --help for options)\n", cmd->usage, cmd->name);
    return 2;
}

static bool set_flag_value(const cli_flag *f, const char *value) {
    char *end;
    errno = 0;
    switch (f->kind) {
    case CLI_INT: {
        long v = strtol(value, &end, 10);
        if (*value == '\0' || *end || errno || v < INT_MIN || v > INT_MAX) return false;
        *(int *)f->target = (int)v;
        return true;
    }
    case CLI_INT64: {
        long long v = strtoll(value, &end, 10);
        if (*value == '\0' || *end || errno) return false;
        *(int64_t *)f->target = v;
        return true;
    }
    case CLI_DOUBLE: {
        double v = strtod(value, &end);
        if (*value == '\0' || *end || errno || !isfinite(v)) return false;
        *(double *)f->target = v;
        return true;
    }
    case CLI_STRING:
        *(const char **)f->target = value;
        return true;
    case CLI_BYTES:
        return cli_parse_bytes(value, (int64_t *)f->target);
    case CLI_LIST: {
        cli_list *l = f->target;
        if (l->count >= CLI_LIST_MAX) return false;
        l->values[l->count++] = value;
        return true;
    }
    case CLI_BOOL:
        return false;
    }
    return false;
}

int cli_parse(const cli_command *cmd, const cli_flag *flags, int flag_count, int argc, char **argv,
              const char **positional, int *positional_count) {
    int npos = 0;
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == '\0') {
            if (npos >= cmd->max_positional) return usage_error(cmd, "unexpected argument '%s'", arg);
            positional[npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = true;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            cli_print_help(cmd, flags, flag_count);
            return -1;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_flag *match = NULL;
        bool negated = false;
        for (int k = 0; k < flag_count; k++) {
            if (strlen(flags[k].name) == name_len && strncmp(flags[k].name, name, name_len) == 0) {
                match = &flags[k];
                break;
            }
            if (flags[k].kind == CLI_BOOL && name_len == strlen(flags[k].name) + 3 &&
                strncmp(name, "no-", 3) == 0 && strncmp(name + 3, flags[k].name, name_len - 3) == 0) {
                match = &flags[k];
                negated = true;
                break;
            }
        }
        if (!match) {
            char bare[128];
            snprintf(bare, sizeof bare, "%.*s", (int)(name_len < 100 ? name_len : 100), name);
            const char *best = NULL;
            size_t best_d = 3;
            for (int k = 0; k < flag_count; k++) {
                size_t d = edit_distance(bare, flags[k].name);
                if (d < best_d) best_d = d, best = flags[k].name;
            }
            if (best) {
                fprintf(stderr, "ftl %s: error: unknown option '--%s' (did you mean '--%s'?)\n", cmd->name, bare, best);
                fprintf(stderr, "usage: %s  (ftl %s --help for options)\n", cmd->usage, cmd->name);
                return 2;
            }
            return usage_error(cmd, "unknown option '%s'", arg);
        }
        if (match->kind == CLI_BOOL) {
            if (eq) return usage_error(cmd, "option '%s' takes no value", arg);
            *(bool *)match->target = !negated;
            continue;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (i + 1 >= argc) return usage_error(cmd, "option '%s' needs a value", arg);
            value = argv[++i];
        }
        if (match->kind == CLI_LIST && ((cli_list *)match->target)->count >= CLI_LIST_MAX) {
            fprintf(stderr, "ftl %s: error: --%s is given more than %d times\n", cmd->name, match->name, CLI_LIST_MAX);
            return 2;
        }
        if (!set_flag_value(match, value)) {
            fprintf(stderr, "ftl %s: error: invalid value '%s' for --%s (expected %s)\n", cmd->name, value,
                    match->name, match->value_name ? match->value_name : "a value");
            return 2;
        }
    }
    if (npos < cmd->min_positional)
        return usage_error(cmd, "%s", npos == 0 ? "missing arguments" : "too few arguments");
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

int cli_check_output(const char *command, const char *path, bool overwrite, const char *const *inputs, int input_count) {
    struct stat out;
    if (!path || stat(path, &out) != 0) return 0;
    for (int i = 0; i < input_count; i++) {
        struct stat in;
        if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
            fprintf(stderr, "ftl %s: error: output %s is the input %s: refusing to overwrite it\n", command, path, inputs[i]);
            return 2;
        }
    }
    if (!overwrite) {
        fprintf(stderr, "ftl %s: error: %s already exists (use --overwrite to replace it)\n", command, path);
        return 2;
    }
    return 0;
}

bool cli_given(int argc, char **argv, const char *name) {
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

ftl_status cli_calibration(const char *method, ftl_nn_precision precision, const char *calibration_path,
                           ftl_nn_calibration_method *out) {
    if (precision != FTL_NN_INT8 && (method || calibration_path))
        fprintf(stderr, "ftl: warning: --calibration and --calibration-method belong to --precision int8; ignored\n");
    return method ? ftl_nn_calibration_method_parse(method, out) : FTL_OK;
}

ftl_status cli_precision(const char *text, ftl_device_kind device, int threads, ftl_nn_precision *precision) {
    if (strcmp(text, "auto") != 0) return ftl_nn_precision_parse(text, precision);
    char why[200];
    const ftl_collectives *world = ftl_dist_world();
    ftl_status st = ftl_nn_precision_auto_agreed(world, device, threads, precision, why, sizeof why);
    if (st == FTL_OK && ftl_dist_rank(world) == 0) fprintf(stderr, "ftl: --precision auto: %s\n", why);
    return st;
}
