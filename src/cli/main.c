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
    {"sweep", cli_cmd_sweep, "train the head over a grid or random search of its settings, keep the best"},
    {"eval", cli_cmd_eval, "loss, top-1/top-5, per-class accuracy and confusion matrix of a trained model"},
    {"predict", cli_cmd_predict, "classify image files with a trained model"},
    {"export", cli_cmd_export, "a trained model as one ONNX graph (preprocessing, backbone, head) for any runtime"},
    {"inspect", cli_cmd_inspect, "describe a Parquet dataset, a trained model or checkpoint, or an ONNX model"},
    {"report", cli_cmd_report, "a training log (and eval, timeline) as one self-contained HTML page"},
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
        ftl_dist_info info = ftl_dist_get_info();
        ftl_backends be;
        ftl_backends_describe(&be);
        printf("ftl %s\nCPU: %s\n", FTL_VERSION, be.cpu);
        if (be.cuda_built)
            printf("GPU: CUDA backend built for %s; driver and libraries loaded at run time: %s: %s\n", be.cuda_archs,
                   be.cuda_found ? "found" : "not found", be.cuda_runtime);
        else printf("GPU: none: %s\n", be.cuda_runtime);
        if (info.mpi_built) printf("data parallelism: %s (mpirun -np N ftl ...; this build links it)\n", info.library);
        else printf("data parallelism: none: built without MPI (single process only; install libopenmpi-dev and rebuild)\n");
        return 0;
    }
    for (int i = 0; i < SUBCOMMAND_COUNT; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0) {
            ftl_install_interrupt_cleanup();
            /* Under mpirun every rank runs this; a process no launcher started stays single. */
            const ftl_collectives *world = NULL;
            ftl_status st = ftl_dist_init(NULL, &world);
            if (st != FTL_OK) return cli_report(st);
            if (ftl_dist_active(world)) {
                st = ftl_dist_check_arguments(world, argc, argv);
                if (st != FTL_OK) world->abort(world->ctx, cli_report(st), NULL);
            }
            int rc = subcommands[i].run(argc - 1, argv + 1);
            /* One rank's failure stops them all (its message is already printed). */
            if (rc != 0 && ftl_dist_active(world)) world->abort(world->ctx, rc, NULL);
            st = ftl_dist_finalize();
            return rc != 0 ? rc : cli_report(st);
        }
    fprintf(stderr, "ftl: error: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
}
