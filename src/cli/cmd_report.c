/* ftl report RUN.jsonl... -o report.html: a training run as one self-contained HTML page. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

int cli_cmd_report(int argc, char **argv) {
    ftl_report_options o = {0};
    const cli_flag flags[] = {
        {"o", CLI_STRING, &o.output_path, "REPORT.html", "where the page goes (required)"},
        {"out", CLI_STRING, &o.output_path, "REPORT.html", "the same as -o"},
        {"eval", CLI_STRING, &o.eval_json, "EVAL.json", "add per-class accuracy and the confusion matrix (ftl eval --json)"},
        {"timeline", CLI_STRING, &o.timeline, "TRACE.json", "add per-rank step times (ftl train --timeline)"},
        {"overwrite", CLI_BOOL, &o.overwrite, NULL, "replace an existing page"},
    };
    const cli_command cmd = {"report", "ftl report RUN.jsonl [RUN2.jsonl ...] -o REPORT.html [options]",
                             "Draws training logs (ftl train --log) as one HTML page: curves (several logs overlay), learning\n"
                             "rate, where the time went, the run's facts; readable offline, nothing loaded from outside.\n"
                             "A sweep's log (ftl sweep --log) is drawn alone: its trials ranked, the best ones' curves, and\n"
                             "each swept setting against val_acc.",
                             1, 64};
    const char *pos[64];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc != 0) return rc < 0 ? 0 : rc;
    if (!o.output_path) {
        fprintf(stderr, "ftl report: error: -o REPORT.html is required\n");
        return 2;
    }
    o.logs = pos;
    o.log_count = npos;
    ftl_status st = ftl_report_write(&o);
    if (st == FTL_OK) printf("report: %d log%s -> %s\n", npos, npos == 1 ? "" : "s", o.output_path);
    return cli_report(st);
}
