/* ftl command line: dispatches `ftl <command>` to one file per subcommand. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"prep", cli_cmd_prep, "image folders -> Parquet dataset (the article's thumbnail recipe)"},
    {"embed", cli_cmd_embed, "dataset -> feature vectors through a frozen ONNX backbone (the feature cache)"},
    {"train", cli_cmd_train, "train a softmax head on a frozen backbone (feature cache, early stopping, checkpoints)"},
    {"eval", cli_cmd_eval, "loss, top-1/top-5, per-class accuracy and confusion matrix of a trained model"},
    {"predict", cli_cmd_predict, "classify image files with a trained model"},
    {"inspect", cli_cmd_inspect, "describe a Parquet dataset or an ONNX model"},
};
enum { SUBCOMMAND_COUNT = sizeof subcommands / sizeof subcommands[0] };

static void print_usage(FILE *out) {
    fprintf(out, "ftl %s - fast transfer learning\n\nusage: ftl <command> [options]\n\ncommands:\n", FTL_VERSION);
    for (int i = 0; i < SUBCOMMAND_COUNT; i++) fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\n`ftl <command> --help` lists a command's options.\n"
                 "Exit status: 0 success, 1 failure while running, 2 bad usage or missing/existing input.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("ftl %s\n", FTL_VERSION);
        return 0;
    }
    for (int i = 0; i < SUBCOMMAND_COUNT; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0) {
            ftl_install_interrupt_cleanup();
            return subcommands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "ftl: error: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
}
