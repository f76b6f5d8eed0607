/* ftl embed DATA --backbone MODEL.onnx OUT: the feature cache by hand. */
#include "cli.h"

#include <stdio.h>

int cli_cmd_embed(int argc, char **argv) {
    ftl_embed_options o;
    ftl_embed_options_init(&o);
    const char *backbone = NULL, *features_from = NULL, *scale = NULL, *mean = NULL, *std = NULL, *precision = "fp32", *calibration_method = NULL;
    const char *conv_algorithm = "auto", *device = "auto";
    bool quiet = false;
    double stall_timeout = 60;
    const cli_flag flags[] = {
        {"backbone", CLI_STRING, &backbone, "MODEL.onnx", "the frozen backbone (required)"},
        {"features-from", CLI_STRING, &features_from, "TENSOR", "take features from this tensor (default: the graph output)"},
        {"input-scale", CLI_STRING, &scale, "tf|torch", "tf: x/127.5-1 (Keras, the article; default); torch: ImageNet mean/std"},
        {"mean", CLI_STRING, &mean, "R,G,B", "explicit per-channel mean in 0..1 units: x = (q/255 - mean) / std"},
        {"std", CLI_STRING, &std, "R,G,B", "explicit per-channel std (with --mean)"},
        {"precision", CLI_STRING, &precision, "fp32|bf16|tf32|int8|auto", "backbone arithmetic; default fp32 (tf32: GPU only; int8: CPU, calibrated convolutions; auto: bf16 where this CPU runs it faster than fp32)"},
        {"calibration-rows", CLI_INT, &o.calibration_rows, "N", "int8: images the calibration runs on (a seeded sample); default 512"},
        {"calibration", CLI_STRING, &o.calibration_path, "DATA.parquet", "int8: calibrate on this dataset instead of the training data"},
        {"calibration-method", CLI_STRING, &calibration_method, "percentile|minmax", "int8: each tensor's threshold: |x| at the 99.99th percentile (default) or the largest |x|"},
        {"device", CLI_STRING, &device, "cpu|cuda|auto", "where the backbone runs; auto (default): a visible GPU, else the CPU"},
        {"deterministic", CLI_BOOL, &o.deterministic, NULL, "GPU: only algorithms that give the same bits every run"},
        {"conv-algorithm", CLI_STRING, &conv_algorithm, "auto|direct",
         "auto (default): Winograd for fp32 3x3 stride-1 convs with >= 64 channels where it pays; direct: never"},
        {"batch", CLI_INT, &o.batch, "N", "images per forward pass; default 32"},
        {"threads", CLI_INT, &o.threads, "N", "backbone threads; default: all cores"},
        {"loader-threads", CLI_INT, &o.loader_threads, "N", "background readers; default 1, or one per core for a --keep-encoded dataset (they decode)"},
        {"image-size", CLI_INT, &o.image_size, "S", "image size when the dataset has no ftl.image_size metadata"},
        {"image-col", CLI_STRING, &o.image_column, "NAME", "column holding the S*S*3 image bytes; default image"},
        {"label-col", CLI_STRING, &o.label_column, "NAME", "column holding the int label; default label"},
        {"label-offset", CLI_INT, &o.label_offset, "N", "add N to every label (-1: 1-based labels such as Spark's file_to_label)"},
        {"overwrite", CLI_BOOL, &o.overwrite, NULL, "replace an existing OUT"},
        {"stall-timeout", CLI_DOUBLE, &stall_timeout, "S", "under mpirun: abort when a rank waits S s for the others (default 60, 0 = never)"},
        {"quiet", CLI_BOOL, &quiet, NULL, "no progress and no summary"},
    };
    const cli_command cmd = {"embed", "ftl embed DATA --backbone MODEL.onnx OUT [options]",
                             "Runs every image of DATA (a .parquet file or folder of parts) through the backbone once and\n"
                             "writes OUT (.parquet): label, features (float32 x D), path, and what produced them.",
                             2, 2};
    const char *pos[2];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) return rc < 0 ? 0 : rc;
    if (!backbone) {
        fprintf(stderr, "ftl embed: error: --backbone MODEL.onnx is required\n");
        return 2;
    }
    ftl_status st = ftl_device_parse(device, &o.device);
    if (st == FTL_OK) st = ftl_precision_resolve(precision, o.device, o.threads, &o.precision);
    if (st == FTL_OK) st = ftl_calibration_method_resolve(calibration_method, o.precision, o.calibration_path, &o.calibration_method);
    if (st == FTL_OK) st = ftl_nn_conv_algorithm_parse(conv_algorithm, &o.conv_algorithm);
    if (st == FTL_OK) st = ftl_nn_preprocess_parse(&o.preprocess, scale, mean, std);
    if (st != FTL_OK) return cli_report(st);
    o.sources = pos;
    o.source_count = 1;
    o.backbone_path = backbone;
    o.output_path = pos[1];
    o.features_from = features_from;
    o.show_progress = !quiet;
    if (quiet) ftl_log_set_level(FTL_LOG_WARN);
    if (cli_set_stall_timeout("embed", stall_timeout) != 0) return 2;
    o.collectives = ftl_dist_world();
    ftl_embed_summary s;
    st = ftl_embed_run(&o, &s);
    if (st == FTL_OK && !quiet && ftl_dist_rank(o.collectives) == 0)
        printf("embed: %lld images -> %lld features each in %.2f s (%.1f images/s); backbone %.2f s, waiting for data %.2f s "
               "(%.1f%%)\n  backbone sha256 %s\n  wrote %s\n",
               (long long)s.rows, (long long)s.feature_dim, s.seconds, s.seconds > 0 ? (double)s.rows / s.seconds : 0.0,
               s.compute_seconds, s.wait_seconds, s.seconds > 0 ? 100.0 * s.wait_seconds / s.seconds : 0.0,
               s.backbone_sha256, o.output_path);
    if (st == FTL_OK && !quiet && ftl_dist_rank(o.collectives) == 0 && s.gpu_util_percent == s.gpu_util_percent)
        printf("  GPU %.0f%% busy, %.1f GiB in use; %lld of %lld batches copied to it while the one before computed\n",
               s.gpu_util_percent, s.gpu_memory_bytes / 1073741824.0, (long long)s.pipelined_batches, (long long)s.batches);
    return cli_report(st);
}
