/* Chrome trace-event timeline of a training run, one track per rank. */
#include "train/timeline.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ftl_status ftl_timeline_open(ftl_timeline *t, const char *path, const ftl_collectives *col) {
    memset(t, 0, sizeof *t);
    t->col = col;
    if (!path) return FTL_OK;
    ftl_status st = FTL_OK;
    if (ftl_dist_rank(col) == 0) {
        st = ftl_atomic_open(&t->file, path);
        if (st == FTL_OK && fputs("[\n", t->file.fp) == EOF) st = ftl_fail(FTL_E_IO, "cannot write %s", path);
    }
    bool any = false;
    ftl_status agree = ftl_dist_any_failed(col, st != FTL_OK, &any);
    if (st == FTL_OK && agree == FTL_OK && any) st = ftl_fail(FTL_E_IO, "rank 0 cannot write the timeline %s", path);
    if (st == FTL_OK) st = agree;
    if (st != FTL_OK) {
        if (t->file.fp) ftl_atomic_abort(&t->file);
        memset(t, 0, sizeof *t);
        return st;
    }
    /* Every rank's clock starts as it leaves this barrier (skew: the barrier's exit, microseconds
     * on one host, tens of microseconds over TCP). */
    st = ftl_dist_barrier(col);
    if (st != FTL_OK) {
        if (t->file.fp) ftl_atomic_abort(&t->file);
        memset(t, 0, sizeof *t);
        return st;
    }
    t->origin = ftl_now();
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ftl_strbuf_printf(&t->events, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
                      ftl_dist_rank(col));
    char *label = ftl_format("rank %d (%s)", ftl_dist_rank(col), host);
    ftl_json_append_string(&t->events, label);
    free(label);
    ftl_strbuf_printf(&t->events, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                      ftl_dist_rank(col), ftl_dist_rank(col));
    t->any_written = true; /* path given: the timeline is on */
    return FTL_OK;
}

void ftl_timeline_span(ftl_timeline *t, const char *name, double start, double end, int64_t step) {
    if (!t->any_written || end < start) return;
    ftl_strbuf_printf(&t->events,
                      "%s{\"name\":\"%s\",\"cat\":\"train\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
                      "\"args\":{\"step\":%lld}}",
                      t->events.len ? ",\n" : "", name, ftl_dist_rank(t->col), (start - t->origin) * 1e6,
                      (end - start) * 1e6, (long long)step);
}

void ftl_timeline_counter(ftl_timeline *t, const char *name, double at, double value) {
    if (!t->any_written || !(value == value)) return;
    ftl_strbuf_printf(&t->events, "%s{\"name\":\"%s\",\"cat\":\"device\",\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,"
                      "\"args\":{\"value\":%.3f}}",
                      t->events.len ? ",\n" : "", name, ftl_dist_rank(t->col), (at - t->origin) * 1e6, value);
}

ftl_status ftl_timeline_flush(ftl_timeline *t) {
    if (!t->any_written) return FTL_OK;
    uint8_t *all = NULL;
    int ranks = ftl_dist_size(t->col);
    size_t *sizes = ftl_xcalloc((size_t)ranks, sizeof *sizes);
    ftl_status st = ftl_dist_gather(t->col, t->events.data ? t->events.data : "", t->events.len, 0, &all, sizes);
    t->events.len = 0;
    if (t->events.data) t->events.data[0] = '\0';
    if (st == FTL_OK && ftl_dist_rank(t->col) == 0) {
        size_t at = 0;
        for (int r = 0; r < ranks && st == FTL_OK; r++) {
            if (sizes[r] == 0) continue;
            /* The array is built as "[\n" e1 ",\n" e2 ...: a separator before all but the first. */
            if (t->file.fp && ftell(t->file.fp) > 2 && fputs(",\n", t->file.fp) == EOF) st = ftl_fail(FTL_E_IO, "cannot write the timeline");
            if (st == FTL_OK) st = ftl_write_all(t->file.fp, all + at, sizes[r], t->file.final_path);
            at += sizes[r];
        }
        if (st == FTL_OK && fflush(t->file.fp) != 0) st = ftl_fail(FTL_E_IO, "cannot write the timeline %s", t->file.final_path);
    }
    free(sizes);
    free(all);
    return st;
}

ftl_status ftl_timeline_close(ftl_timeline *t, bool ok) {
    if (!t->any_written) return FTL_OK;
    ftl_status st = ok ? ftl_timeline_flush(t) : FTL_OK;
    if (ftl_dist_rank(t->col) == 0 && t->file.fp) {
        if (st == FTL_OK && ok && fputs("\n]\n", t->file.fp) == EOF) st = ftl_fail(FTL_E_IO, "cannot write the timeline");
        if (st == FTL_OK && ok) st = ftl_atomic_commit(&t->file);
        else ftl_atomic_abort(&t->file);
    }
    ftl_strbuf_free(&t->events);
    t->any_written = false;
    return st;
}
