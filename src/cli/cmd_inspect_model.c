/* ftl inspect MODEL.onnx: describe an ONNX backbone (cmd_inspect.c dispatches here). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

int cli_cmd_inspect_model(int argc, char **argv) {
    const char *features_from = NULL, *precision = "fp32", *conv_algorithm = "auto", *device = "auto";
    const char *fine_tune_from = NULL;
    bool tensors = false, plan = false;
    int batch = 1, threads = 0, fine_tune_last = 0;
    ftl_model_options o;
    ftl_model_options_init(&o);
    const cli_flag flags[] = {
        {"features-from", CLI_STRING, &features_from, "NAME", "describe the features taken from this tensor"},
        {"tensors", CLI_BOOL, &tensors, NULL, "list every computed tensor (the names --features-from takes)"},
        {"plan", CLI_BOOL, &plan, NULL, "compile the model and print the primitives it runs (oneDNN; on a GPU: cuDNN "
                                        "algorithms, cuBLAS calls, ftl's kernels)"},
        {"precision", CLI_STRING, &precision, "fp32|bf16|tf32", "precision of the --plan (default fp32)"},
        {"device", CLI_STRING, &device, "cpu|cuda|auto", "where the --plan runs (default auto: a visible GPU, else the CPU)"},
        {"deterministic", CLI_BOOL, &o.deterministic, NULL, "GPU --plan: deterministic algorithms only"},
        {"conv-algorithm", CLI_STRING, &conv_algorithm, "auto|direct", "convolution algorithm of the --plan (default auto)"},
        {"batch", CLI_INT, &batch, "N", "batch size of the --plan (default 1)"},
        {"threads", CLI_INT, &threads, "N", "threads for the --plan (default: all cores)"},
        {"fine-tune-last", CLI_INT, &fine_tune_last, "N",
         "list what fine-tuning the last N Conv nodes unfreezes: nodes, parameters, boundary tensors"},
        {"fine-tune-from", CLI_STRING, &fine_tune_from, "TENSOR", "the same for every node after TENSOR"},
    };
    const cli_command cmd = {"inspect", "ftl inspect MODEL.onnx [options]",
                             "Print a model's inputs, outputs, op counts, parameters and MACs per image.", 1, 1};
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) return rc < 0 ? 0 : rc;
    if (tensors) return cli_report(ftl_model_list_tensors(pos[0], stdout));
    if (fine_tune_last < 0 || (fine_tune_last > 0 && fine_tune_from)) {
        fprintf(stderr, "ftl: error: --fine-tune-last takes N >= 1, and not together with --fine-tune-from\n");
        return 2;
    }
    o.features_from = features_from;
    o.batch = batch;
    o.threads = threads;
    ftl_status st = ftl_nn_precision_parse(precision, &o.precision);
    if (st == FTL_OK) st = ftl_nn_conv_algorithm_parse(conv_algorithm, &o.conv_algorithm);
    if (st == FTL_OK) st = ftl_device_parse(device, &o.device);
    if (st == FTL_OK) st = ftl_model_describe(pos[0], &o, stdout);
    if (st == FTL_OK && (fine_tune_last > 0 || fine_tune_from)) {
        ftl_fine_tune_cut cut = {fine_tune_last, fine_tune_from};
        st = ftl_model_describe_fine_tune(pos[0], &o, &cut, stdout);
    }
    if (st == FTL_OK && plan) {
        ftl_model *m;
        st = ftl_model_load(pos[0], &o, &m);
        if (st == FTL_OK) {
            const ftl_model_info *i = ftl_model_get_info(m);
            if (i->micro_batch_min < i->micro_batch)
                printf("backend     %s; batch %d run as micro-batches of %d to %d images, per layer\n", i->backend,
                       i->batch, i->micro_batch_min, i->micro_batch);
            else printf("backend     %s; batch %d run as micro-batches of %d\n", i->backend, i->batch, i->micro_batch);
            ftl_model_print_plan(m, stdout);
            ftl_model_free(m);
        }
    }
    return cli_report(st);
}
