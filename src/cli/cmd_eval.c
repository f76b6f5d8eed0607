/* ftl eval MODEL.ftl DATA: loss, top-1/top-5, per-class accuracy, confusion matrix. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_cmd_eval(int argc, char **argv) {
    ftl_eval_options o;
    ftl_eval_options_init(&o);
    const char *device = "auto";
    const char *json = NULL, *confusion = NULL;
    bool quiet = false, overwrite = false;
    double stall_timeout = 60;
    const char *tta = NULL;
    const cli_flag flags[] = {
        {"backbone", CLI_STRING, &o.backbone_path, "MODEL.onnx", "the backbone, if it moved (its sha256 must match the model's)"},
        {"cache-dir", CLI_STRING, &o.cache_dir, "DIR", "use cached features of this dataset from the feature cache when present (default: the ftl-feature-cache/ folder next to the model, as train leaves it, or a sweep's BEST.trials/ftl-feature-cache/)"},
        {"json", CLI_STRING, &json, "FILE", "write the metrics, per-class accuracy and confusion matrix as JSON"},
        {"confusion", CLI_STRING, &confusion, "FILE.csv", "write the confusion matrix as CSV"},
        {"predictions", CLI_STRING, &o.predictions_path, "FILE.csv", "write every image's prediction (path, label, predicted, probability)"},
        {"tta", CLI_STRING, &tta, "flip|none|model", "test-time augmentation: flip scores each image by the mean of its and its mirror image's probabilities (mirrored features from the cache when it holds them, else one more backbone pass); default model: as the model was trained (ftl train --tta)"},
        {"batch", CLI_INT, &o.batch, "N", "images per backbone pass; default 32"},
        {"threads", CLI_INT, &o.threads, "N", "compute threads; default: all cores"},
        {"device", CLI_STRING, &device, "cpu|cuda|auto", "where the backbone runs; auto (default): a visible GPU, else the CPU"},
        {"loader-threads", CLI_INT, &o.loader_threads, "N", "background readers; default 1, or one per core for a --keep-encoded dataset (they decode)"},
        {"image-size", CLI_INT, &o.image_size, "S", "image size when the dataset has no ftl.image_size metadata"},
        {"image-col", CLI_STRING, &o.image_column, "NAME", "image column; default image"},
        {"label-col", CLI_STRING, &o.label_column, "NAME", "label column; default label"},
        {"label-offset", CLI_INT, &o.label_offset, "N", "added to every label; default: what the model was trained with"},
        {"stall-timeout", CLI_DOUBLE, &stall_timeout, "S", "under mpirun: abort when a rank waits S s for the others (default 60, 0 = never)"},
        {"overwrite", CLI_BOOL, &overwrite, NULL, "replace existing --json/--confusion/--predictions files"},
        {"quiet", CLI_BOOL, &quiet, NULL, "no progress"},
    };
    const cli_command cmd = {"eval", "ftl eval MODEL.ftl DATA [options]",
                             "Evaluates a trained model on a dataset (streamed, so it may be larger than memory).", 2, 2};
    const char *pos[2];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) return rc < 0 ? 0 : rc;
    o.label_offset_given = cli_given(argc, argv, "label-offset");
    ftl_status dst = ftl_device_parse(device, &o.device);
    if (dst != FTL_OK) return cli_report(dst);
    if (tta && (dst = ftl_tta_parse(tta, true, &o.tta)) != FTL_OK) return cli_report(dst);
    o.model_path = pos[0];
    o.data_path = pos[1];
    o.show_progress = !quiet;
    if (cli_set_stall_timeout("eval", stall_timeout) != 0) return 2;
    o.collectives = ftl_dist_world();
    bool rank0 = ftl_dist_rank(o.collectives) == 0;
    /* checked by ftl_eval_run before any work; rank 0 alone writes them */
    o.json_path = json;
    o.confusion_path = confusion;
    o.overwrite = overwrite;
    ftl_eval_result r;
    ftl_status st = ftl_eval_run(&o, &r);
    if (st == FTL_OK) { /* rank 0 alone prints and writes what a person reads */
        if (rank0) ftl_eval_result_print(&r, stdout);
        if (rank0 && json) st = ftl_eval_result_write_json(&r, json, overwrite);
        if (rank0 && st == FTL_OK && confusion) st = ftl_eval_result_write_confusion_csv(&r, confusion, overwrite);
        ftl_eval_result_free(&r);
    }
    return cli_report(st);
}
