/* ftl public API: `ftl report`, a training run's log as one self-contained HTML page (inline SVG
 * and CSS, a Content-Security-Policy that loads nothing from outside): loss and accuracy curves
 * (train and val, best epoch and early stop marked, resumed segments visible), the learning rate,
 * where each epoch's time went with images/s, and the run's facts; several logs overlay their
 * curves. An eval JSON adds per-class accuracy and the confusion matrix; a timeline adds per-rank
 * step times. Every plotted point carries its value (data-epoch, data-value), so a test can read
 * the page back against the log. */
#ifndef FTL_REPORT_H
#define FTL_REPORT_H

#include "ftl/base.h"
#include <stdbool.h>

typedef struct ftl_report_options {
    const char *const *logs;   /* RUN.jsonl files (ftl train --log) */
    int log_count;
    const char *eval_json;     /* ftl eval --json output, or NULL */
    const char *timeline;      /* ftl train --timeline output, or NULL */
    const char *output_path;   /* written under a temporary name, renamed when complete */
    bool overwrite;
} ftl_report_options;

/* A log that is not an ftl log is an error naming the file and line; a log with one epoch, no
 * validation (null metrics) or a truncated last line still renders, with a note saying what is
 * missing. */
ftl_status ftl_report_write(const ftl_report_options *options);

#endif
