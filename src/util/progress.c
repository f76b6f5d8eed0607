/* Progress bar / periodic progress lines on stderr (or the log sink). */
#include "util/progress.h"
#include "util/log.h"
#include "util/timing.h"

#include <stdio.h>

enum { BAR_WIDTH = 30 };
static const double TTY_INTERVAL = 0.2, PLAIN_INTERVAL = 10.0;

void ftl_progress_start(ftl_progress *p, const char *label, const char *unit, int64_t total) {
    p->label = label;
    p->unit = unit;
    p->total = total;
    p->start = p->last_draw = ftl_now();
    p->tty = ftl_log_is_tty();
    p->enabled = ftl_log_enabled(FTL_LOG_INFO);
    p->drew_bar = false;
}

static void format_duration(double s, char *out, size_t n) {
    if (s < 0 || s > 1e7) s = 0;
    int total = (int)(s + 0.5);
    if (total >= 3600) snprintf(out, n, "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60);
    else snprintf(out, n, "%d:%02d", total / 60, total % 60);
}

static void draw(ftl_progress *p, int64_t done, double now) {
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)done / elapsed : 0;
    char eta[32] = "?", spent[32], text[512];
    format_duration(elapsed, spent, sizeof spent);
    if (p->total > 0 && rate > 0) format_duration((double)(p->total - done) / rate, eta, sizeof eta);
    if (p->tty) {
        char bar[BAR_WIDTH + 1];
        int filled = p->total > 0 ? (int)((double)done / (double)p->total * BAR_WIDTH) : 0;
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[BAR_WIDTH] = '\0';
        snprintf(text, sizeof text, "\r%s [%s] %lld/%lld %s  %.1f %s/s  elapsed %s  ETA %s \033[K", p->label, bar,
                 (long long)done, (long long)p->total, p->unit, rate, p->unit, spent, eta);
        p->drew_bar = true;
    } else {
        snprintf(text, sizeof text, "%s: %lld/%lld %s, %.1f %s/s, elapsed %s, ETA %s\n", p->label, (long long)done,
                 (long long)p->total, p->unit, rate, p->unit, spent, eta);
    }
    ftl_log_write(FTL_LOG_INFO, false, text);
}

void ftl_progress_update(ftl_progress *p, int64_t done) {
    if (!p->enabled) return;
    double now = ftl_now();
    if (now - p->last_draw < (p->tty ? TTY_INTERVAL : PLAIN_INTERVAL)) return;
    p->last_draw = now;
    draw(p, done, now);
}

void ftl_progress_finish(ftl_progress *p, int64_t done) {
    if (!p->enabled) return;
    if (p->tty) {
        draw(p, done, ftl_now());
        ftl_log_write(FTL_LOG_INFO, false, "\n");
    }
}
