/* ftl inspect MODEL.onnx: describe an ONNX backbone (cmd_inspect.c dispatches here). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* int8 scales for --plan / --profile: from a dataset, or from synthetic images (the plan and its
 * speed do not depend on the scales' values). */
static ftl_status inspect_calibration(const char *model, const ftl_model_options *o, const char *data,
                                      ftl_nn_int8_scales **scales) {
    if (data) {
        ftl_embed_options eo;
        ftl_embed_options_init(&eo);
        const char *sources[1] = {data};
        eo.sources = sources;
        eo.source_count = 1;
        eo.backbone_path = model;
        eo.features_from = o->features_from;
        eo.threads = o->threads;
        eo.batch = o->batch;
        eo.device = FTL_DEVICE_CPU;
        return ftl_embed_calibrate(&eo, scales);
    }
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    return ftl_nn_calibrate(model, o, &pp, NULL, 32, 0, FTL_NN_CALIBRATION_PERCENTILE, scales);
}

int cli_cmd_inspect_model(int argc, char **argv) {
    const char *features_from = NULL, *precision = "fp32", *conv_algorithm = "auto", *device = "auto";
    const char *fine_tune_from = NULL, *calibration = NULL;
    bool tensors = false, plan = false, profile = false, ceiling = false, json = false;
    int batch = 0, threads = 0, fine_tune_last = 0, top = 15, reps = 5;
    ftl_model_options o;
    ftl_model_options_init(&o);
    const cli_flag flags[] = {
        {"features-from", CLI_STRING, &features_from, "NAME", "describe the features taken from this tensor"},
        {"tensors", CLI_BOOL, &tensors, NULL, "list every computed tensor (the names --features-from takes)"},
        {"plan", CLI_BOOL, &plan, NULL, "compile the model and print the primitives it runs (oneDNN; on a GPU: cuDNN "
                                        "algorithms, cuBLAS calls, ftl's kernels)"},
        {"profile", CLI_BOOL, &profile, NULL, "run the model on synthetic input and print where the time goes: per node "
                                              "kind and the slowest steps, with GFLOP/s, % of the measured peak and the kernel"},
        {"ceiling", CLI_BOOL, &ceiling, NULL, "with --profile: also run every convolution and matmul alone (the layouts "
                                              "oneDNN prefers): the model's own ceiling"},
        {"top", CLI_INT, &top, "N", "--profile: the N slowest steps (default 15)"},
        {"reps", CLI_INT, &reps, "N", "--profile: timed runs, the median reported (default 5, and at least 1 s)"},
        {"json", CLI_BOOL, &json, NULL, "--profile: one JSON document instead of text"},
        {"precision", CLI_STRING, &precision, "fp32|bf16|tf32|int8|auto", "precision of the --plan or --profile (default "
                                                                  "fp32; auto: bf16 where this CPU runs it faster)"},
        {"calibration", CLI_STRING, &calibration, "DATA.parquet", "int8: calibrate on these images (default: 32 synthetic "
                                                                  "ones, enough for speed, not for accuracy)"},
        {"device", CLI_STRING, &device, "cpu|cuda|auto", "where the --plan runs (default auto: a visible GPU, else the CPU)"},
        {"deterministic", CLI_BOOL, &o.deterministic, NULL, "GPU --plan: deterministic algorithms only"},
        {"conv-algorithm", CLI_STRING, &conv_algorithm, "auto|direct", "convolution algorithm of the --plan (default auto)"},
        {"batch", CLI_INT, &batch, "N", "batch size of the --plan (default 1) or --profile (default 16)"},
        {"threads", CLI_INT, &threads, "N", "threads for the --plan or --profile (default: all cores)"},
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
    if ((ceiling || json || cli_given(argc, argv, "top") || cli_given(argc, argv, "reps")) && !profile) {
        fprintf(stderr, "ftl inspect: error: --ceiling, --top, --reps and --json go with --profile\n");
        return 2;
    }
    if (batch < 0 || batch > 4096 || top < 1 || reps < 1 || reps > 200 || threads < 0 || threads > 1024) {
        fprintf(stderr, "ftl inspect: error: --batch takes 1..4096, --top N >= 1, --reps 1..200, --threads 0..1024\n");
        return 2;
    }
    o.features_from = features_from;
    o.batch = batch > 0 ? batch : profile ? 16 : 1;
    o.threads = threads;
    ftl_status st = ftl_device_parse(device, &o.device);
    if (st == FTL_OK && profile && o.device == FTL_DEVICE_AUTO) o.device = FTL_DEVICE_CPU; /* the profiler is the CPU's */
    if (st == FTL_OK && strcmp(precision, "auto") == 0) {
        char why[160];
        st = ftl_nn_precision_auto(o.device, threads, &o.precision, why, sizeof why);
        if (st == FTL_OK && !json) printf("precision   auto: %s\n", why);
    } else if (st == FTL_OK) {
        st = ftl_nn_precision_parse(precision, &o.precision);
    }
    if (st == FTL_OK) st = ftl_nn_conv_algorithm_parse(conv_algorithm, &o.conv_algorithm);
    ftl_nn_int8_scales *scales = NULL;
    if (st == FTL_OK && o.precision == FTL_NN_INT8 && (profile || plan)) {
        st = inspect_calibration(pos[0], &o, calibration, &scales);
        o.int8_scales = scales;
    }
    if (st == FTL_OK && profile) {
        ftl_model *m = NULL;
        st = ftl_model_load(pos[0], &o, &m);
        ftl_profile *pr = NULL;
        ftl_profile_options po;
        ftl_profile_options_init(&po);
        po.ceiling = ceiling;
        po.top = top;
        po.reps = reps;
        if (st == FTL_OK) st = ftl_model_profile(m, &po, &pr);
        if (st == FTL_OK) ftl_profile_print(pr, stdout, json);
        ftl_profile_free(pr);
        ftl_model_free(m);
        ftl_nn_int8_scales_free(scales);
        return cli_report(st);
    }
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
            if (i->precision == FTL_NN_INT8) printf("int8        %d convolutions in int8, the rest fp32\n", i->int8_convs);
            ftl_model_print_plan(m, stdout);
            ftl_model_free(m);
        }
    }
    ftl_nn_int8_scales_free(scales);
    return cli_report(st);
}
