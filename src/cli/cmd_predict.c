/* ftl predict MODEL.ftl IMAGE...: the top classes of each image, by name. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

/* A JSON string literal (quotes, backslashes and control characters escaped; bytes that are not
 * UTF-8, as file names may hold, written as U+FFFD). */
static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int n;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else if (c < 0x80) putchar(c);
        else if ((n = ftl_utf8_char_length(s)) > 0) {
            fwrite(s, 1, (size_t)n, stdout);
            s += n - 1;
        } else printf("\\ufffd");
    }
    putchar('"');
}

int cli_cmd_predict(int argc, char **argv) {
    const ftl_collectives *world = ftl_dist_world();
    if (ftl_dist_active(world)) { /* N copies would each classify every image and print N times */
        if (world->rank == 0)
            fprintf(stderr, "ftl predict: error: predict runs in one process; start it without mpirun (or with -np 1)\n");
        return 2;
    }
    ftl_predict_options o;
    ftl_predict_options_init(&o);
    const char *device = "auto";
    bool json = false;
    const char *tta = NULL;
    const cli_flag flags[] = {
        {"backbone", CLI_STRING, &o.backbone_path, "MODEL.onnx", "the backbone, if it moved (its sha256 must match the model's)"},
        {"top", CLI_INT, &o.top_k, "K", "classes to show per image; default 5"},
        {"threads", CLI_INT, &o.threads, "N", "compute threads; default: all cores"},
        {"device", CLI_STRING, &device, "cpu|cuda|auto", "where the backbone runs; auto (default): a visible GPU, else the CPU"},
        {"tta", CLI_STRING, &tta, "flip|none|model", "test-time augmentation: flip averages the probabilities of each image and its mirror image (two backbone passes); default model: as the model was trained (ftl train --tta)"},
        {"json", CLI_BOOL, &json, NULL, "one JSON object per image instead of text"},
    };
    const cli_command cmd = {"predict", "ftl predict MODEL.ftl IMAGE... [options]",
                             "Classifies image files (JPEG/PNG) with the same preparation as the training data.", 2, 1 << 20};
    const char **pos = malloc((size_t)argc * sizeof *pos);
    if (!pos) {
        fprintf(stderr, "ftl predict: error: out of memory for %d arguments\n", argc);
        return 1;
    }
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) {
        free(pos);
        return rc < 0 ? 0 : rc;
    }
    o.model_path = pos[0];
    ftl_predictor *p;
    ftl_status st = ftl_device_parse(device, &o.device);
    if (st == FTL_OK && tta) st = ftl_tta_parse(tta, true, &o.tta);
    if (st == FTL_OK) st = ftl_predictor_open(&o, &p);
    if (st != FTL_OK) {
        free(pos);
        return cli_report(st);
    }
    int failures = 0, exit_code = 0;
    for (int i = 1; i < npos; i++) {
        ftl_prediction pred;
        st = ftl_predictor_run_file(p, pos[i], &pred);
        if (st != FTL_OK) {
            /* A bad file is reported and the others still run; the exit status says something failed. */
            fprintf(stderr, "ftl: error: %s\n", ftl_last_error());
            failures++;
            /* A missing file is an input error (2); anything else failed while running (1). */
            int code = ftl_status_exit_code(st);
            if (code > exit_code) exit_code = code;
            continue;
        }
        if (json) {
            printf("{\"path\": ");
            print_json_string(pos[i]);
            printf(", \"top\": [");
            for (int k = 0; k < pred.count; k++) {
                printf("%s{\"class\": ", k ? ", " : "");
                print_json_string(pred.class_name[k]);
                printf(", \"index\": %d, \"probability\": %.6f}", pred.class_index[k], pred.probability[k]);
            }
            printf("]}\n");
        } else {
            printf("%s:", pos[i]);
            for (int k = 0; k < pred.count; k++) printf("  %s %.4f", pred.class_name[k], pred.probability[k]);
            printf("\n");
        }
    }
    ftl_predictor_close(p);
    free(pos);
    return failures ? exit_code : 0;
}
