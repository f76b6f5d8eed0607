/* ftl export MODEL.ftl OUT.onnx: the trained classifier as one ONNX graph that runs without ftl. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_cmd_export(int argc, char **argv) {
    const ftl_collectives *world = ftl_dist_world();
    if (ftl_dist_active(world)) { /* N ranks would race to write the same file */
        if (world->rank == 0)
            fprintf(stderr, "ftl export: error: export runs in one process; start it without mpirun (or with -np 1)\n");
        return 2;
    }
    ftl_export_options o;
    ftl_export_options_init(&o);
    const char *input = NULL, *tta = NULL;
    bool quiet = false;
    int64_t max_bytes = 0;
    const cli_flag flags[] = {
        {"opset", CLI_INT, &o.opset, "N", "ONNX opset of the graph (11-18); default 13"},
        {"logits", CLI_BOOL, &o.logits, NULL, "output `logits` (no Softmax) instead of `probabilities`; under flip TTA log(mean probability), whose softmax is the mean"},
        {"tta", CLI_STRING, &tta, "flip|none|model", "flip: the graph scores the images and their mirror images as one batch and averages the probabilities; default model: as the model was trained (ftl train --tta)"},
        {"input", CLI_STRING, &input, "uint8-nhwc|float-nchw",
         "uint8-nhwc (default): the dataset's S*S*3 bytes, preprocessing in the graph; float-nchw: preprocessed floats"},
        {"backbone", CLI_STRING, &o.backbone_path, "MODEL.onnx", "the backbone, if it moved (its sha256 must match the model's)"},
        {"external-data-above", CLI_BYTES, &max_bytes, "BYTES",
         "put the weights in OUT.data when the model would be larger (default: protobuf's 2 GB limit)"},
        {"overwrite", CLI_BOOL, &o.overwrite, NULL, "replace an existing OUT"},
        {"quiet", CLI_BOOL, &quiet, NULL, "print nothing on success"},
    };
    const cli_command cmd = {"export", "ftl export MODEL.ftl OUT.onnx [options]",
                             "Writes the trained classifier as one ONNX model: images uint8 [N,S,S,3] -> ftl's preprocessing\n"
                             "-> the backbone's own nodes -> the head (Gemm) -> Softmax: probabilities [N,classes].",
                             2, 2};
    const char *pos[2];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) return rc < 0 ? 0 : rc;
    if (input && ftl_export_input_parse(input, &o.input) != FTL_OK) {
        fprintf(stderr, "ftl export: error: %s\n", ftl_last_error());
        return 2;
    }
    if (tta && ftl_tta_parse(tta, true, &o.tta) != FTL_OK) {
        fprintf(stderr, "ftl export: error: %s\n", ftl_last_error());
        return 2;
    }
    if (max_bytes < 0) {
        fprintf(stderr, "ftl export: error: --external-data-above must be positive\n");
        return 2;
    }
    o.max_model_bytes = (uint64_t)max_bytes;
    o.model_path = pos[0];
    o.output_path = pos[1];
    ftl_export_result r;
    ftl_status st = ftl_export_onnx(&o, &r);
    if (st == FTL_OK && !quiet) {
        printf("export: %s -> %s (opset %d, IR %lld; %d backbone nodes of opset %d", o.model_path, o.output_path, r.opset,
               (long long)r.ir_version, r.backbone_nodes, r.backbone_opset);
        if (r.nodes_rewritten) printf(", %d rewritten for opset %d", r.nodes_rewritten, r.opset);
        printf("; %d nodes in all)\n", r.nodes_total);
        if (r.tta_flip) printf("flip TTA: the images and their mirror images as one batch, the probabilities averaged\n");
        if (r.tuned_tensors) printf("fine-tuned: %d backbone tensors in place of the file's\n", r.tuned_tensors);
        if (r.int8_convs)
            printf("int8: %d convolutions / matrix products as QuantizeLinear/DequantizeLinear with the model's calibrated scales\n",
                   r.int8_convs);
        if (o.input == FTL_EXPORT_INPUT_UINT8_NHWC)
            printf("input: images uint8 [N,%d,%d,3]%s\n", r.image_size, r.image_size,
                   r.resized ? "" : " (the backbone's size: no resize)");
        else
            printf("input: images float [N,3,%d,%d]\n", r.height, r.width);
        if (o.input == FTL_EXPORT_INPUT_UINT8_NHWC && r.resized)
            printf("resize: %d -> %dx%d in the graph (Pillow's bilinear, exact)\n", r.image_size, r.height, r.width);
        printf("output: %s float [N,%d]\n", o.logits ? "logits" : "probabilities", r.classes);
        printf("size: %llu bytes", (unsigned long long)r.model_bytes);
        if (r.data_path[0])
            printf(" + %llu bytes of external data in %s (%d tensors; keep it next to the model)",
                   (unsigned long long)r.data_bytes, r.data_path, r.external_tensors);
        printf("\n");
    }
    return cli_report(st);
}
