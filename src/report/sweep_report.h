/* The page of a sweep's log (ftl sweep --log), for `ftl report SWEEP.jsonl`. */
#ifndef FTL_REPORT_SWEEP_REPORT_H
#define FTL_REPORT_SWEEP_REPORT_H

#include "ftl/base.h"
#include "util/json.h"
#include <stdbool.h>

/* Whether the file starts with a sweep record. */
bool sweep_report_is_sweep_log(const char *path);
/* Appends the page, up to its closing tags, to b. A line that is not JSON before the sweep record, a
 * trial or epoch out of range is an error naming the file and line; a broken line later (a sweep
 * killed while writing it) is skipped with a note. */
ftl_status sweep_report_write(const char *log_path, const char *style, ftl_strbuf *b);

#endif
