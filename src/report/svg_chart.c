/* SVG line charts and stacked bars. */
#include "report/svg_chart.h"
#include "util/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The legend sits in the right margin, clear of the curves and the marked epochs. The plot is
 * PLOT_H tall; a chart grows below it when its legend needs more room. */
enum { W = 900, LEFT = 64, RIGHT = 190, TOP = 28, PLOT_H = 192, BOTTOM = 40, LEGEND_ROW = 14, MAX_BOXES = 512 };
enum { PLOT_BOTTOM = TOP + PLOT_H, PLOT_RIGHT = W - RIGHT };

/* Font sizes of the classes in the page's style sheet (report.c). */
#define FONT_TICK 10.0
#define FONT_MARKER 10.0
#define FONT_BAR 9.0
#define FONT_LEGEND 11.0
/* A text's width for placing labels: sans-serif glyphs average well under 0.6 em. */
#define EM_PER_CHAR 0.6

void html_append_escaped(ftl_strbuf *b, const char *text) {
    for (const char *p = text ? text : ""; *p; p++) {
        unsigned char c = (unsigned char)*p;
        int n;
        switch (c) {
        case '&': ftl_strbuf_append(b, "&amp;", 5); break;
        case '<': ftl_strbuf_append(b, "&lt;", 4); break;
        case '>': ftl_strbuf_append(b, "&gt;", 4); break;
        case '"': ftl_strbuf_append(b, "&quot;", 6); break;
        case '\n': case '\t': ftl_strbuf_append(b, p, 1); break;
        default:
            if (c < 0x20 || c == 0x7f) ftl_strbuf_append(b, "&#xFFFD;", 8); /* control characters: not text */
            else if (c < 0x80) ftl_strbuf_append(b, p, 1);
            else if ((n = ftl_utf8_char_length(p)) > 0) {
                ftl_strbuf_append(b, p, (size_t)n);
                p += n - 1;
            } else ftl_strbuf_append(b, "&#xFFFD;", 8); /* a byte that is no UTF-8 */
        }
    }
}

static double text_width(const char *s, double font) {
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) chars += (*p & 0xC0) != 0x80;
    return (double)chars * font * EM_PER_CHAR;
}

/* The shortest decimal that reads back as exactly v (a tooltip's value). */
static void exact_text(char *out, size_t cap, double v) {
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(out, cap, "%.*g", digits, v);
        if (strtod(out, NULL) == v) return;
    }
}

/* ---- label placement: the text boxes drawn so far, so that a new label can avoid them */

typedef struct box {
    double x0, y0, x1, y1;
} box;

typedef struct placed {
    box b[MAX_BOXES];
    int n;
} placed;

static bool collides(const placed *p, box q) {
    for (int i = 0; i < p->n; i++)
        if (q.x0 < p->b[i].x1 + 2 && p->b[i].x0 < q.x1 + 2 && q.y0 < p->b[i].y1 + 1 && p->b[i].y0 < q.y1 + 1) return true;
    return false;
}

static void place(placed *p, box q) {
    if (p->n < MAX_BOXES) p->b[p->n++] = q;
}

/* The box of a text drawn at (x, baseline y) with the given anchor. */
static box text_box(double x, double y, const char *s, double font, char anchor) {
    double w = text_width(s, font);
    double x0 = anchor == 'e' ? x - w : anchor == 'm' ? x - w / 2 : x;
    return (box){x0, y - font * 0.8, x0 + w, y + font * 0.2};
}

/* ---- axes */

typedef struct frame {
    double x0, x1, y0, y1;
    bool log_y;
    int height;
    double y_step; /* the linear axis's tick step, which its bounds are multiples of */
    bool own_x_ticks; /* the chart draws its x ticks itself (a scatter's) */
} frame;

static double px(const frame *f, double x) {
    return LEFT + (f->x1 > f->x0 ? (x - f->x0) / (f->x1 - f->x0) : 0.5) * (PLOT_RIGHT - LEFT);
}
static double py(const frame *f, double y) {
    double a = f->y0, b = f->y1, v = y;
    if (f->log_y) a = log10(a), b = log10(b), v = y > 0 ? log10(y) : a;
    double t = b > a ? (b - v) / (b - a) : 0.5;
    return TOP + fmin(1, fmax(0, t)) * PLOT_H;
}

/* 1, 2 or 5 times a power of ten: the smallest such step that cuts span into <= max_ticks parts. */
static double nice_step(double span, int max_ticks) {
    if (!(span > 0)) return 1;
    double raw = span / max_ticks, mag = pow(10, floor(log10(raw)));
    const double m[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (m[i] * mag >= raw * (1 - 1e-9)) return m[i] * mag;
    return 10 * mag;
}

double svg_nice_top(double hi) {
    if (!(hi > 0)) return 1;
    double step = nice_step(hi, 5);
    return ceil(hi / step - 1e-9) * step;
}

/* A tick value as few digits as its step needs: 0.25, 1500, 2e-05. */
static void format_tick(char *out, size_t cap, double v, double step, bool log_axis) {
    if (log_axis) {
        snprintf(out, cap, "%g", v);
        return;
    }
    if (fabs(v) < step * 1e-6) v = 0;
    /* as many decimals as the step has, so that neighbouring ticks never read the same */
    if (step >= 1e-10 && fabs(v) < 1e9) {
        int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        snprintf(out, cap, "%.*f", decimals, v);
    } else {
        snprintf(out, cap, "%.3g", v);
    }
}

/* The y range: round bounds around the data, or decades on a log axis. */
static void choose_y(frame *f, double lo, double hi, const chart_axis *a) {
    bool non_negative = a && a->non_negative;
    if (a && isfinite(a->y_min)) lo = a->y_min;
    if (a && isfinite(a->y_max)) hi = a->y_max;
    if (!isfinite(lo) || !isfinite(hi)) lo = 0, hi = 1;
    if (non_negative && lo < 0) lo = 0;
    if (a && a->log_when_wide && lo > 0 && hi / lo > 10) {
        f->log_y = true;
        f->y0 = pow(10, floor(log10(lo) + 1e-9));
        f->y1 = pow(10, ceil(log10(hi) - 1e-9));
        if (f->y1 <= f->y0) f->y1 = f->y0 * 10;
        return;
    }
    if (hi - lo <= fabs(hi) * 1e-12) { /* one value: a range around it */
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.5 : 0.5;
        lo -= pad, hi += pad;
        if (non_negative && lo < 0) lo = 0;
    }
    double step = nice_step(hi - lo, 5);
    f->y0 = floor(lo / step + 1e-9) * step;
    f->y1 = ceil(hi / step - 1e-9) * step;
    if (non_negative && f->y0 < 0) f->y0 = 0;
    if (f->y1 <= f->y0) f->y1 = f->y0 + step;
    f->y_step = step;
}

/* Whole-number x ticks (epochs, steps) in a 1-2-5 step wide enough for their labels. */
static void x_ticks(ftl_strbuf *b, placed *p, const frame *f) {
    double per_unit = (PLOT_RIGHT - LEFT) / (f->x1 - f->x0);
    char widest[32];
    snprintf(widest, sizeof widest, "%.0f", fmax(fabs(f->x0), fabs(f->x1)));
    double need = text_width(widest, FONT_TICK) + 10;
    double step = 1;
    for (double mag = 1; step * per_unit < need; mag *= 10) {
        step = mag;
        if (step * per_unit >= need) break;
        step = 2 * mag;
        if (step * per_unit >= need) break;
        step = 5 * mag;
    }
    int count = 0; /* bounded: with huge epoch numbers a step may not move v */
    for (double v = ceil(f->x0 / step) * step; v <= f->x1 + 1e-9 && count < 64; v += step, count++) {
        char t[32];
        snprintf(t, sizeof t, "%.0f", v);
        box q = text_box(px(f, v), PLOT_BOTTOM + 16, t, FONT_TICK, 'm');
        if (collides(p, q)) continue;
        place(p, q);
        ftl_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xt\" data-tick=\"%.17g\">%s</text>", px(f, v), PLOT_BOTTOM + 16,
                          v, t);
    }
}

static void y_ticks(ftl_strbuf *b, placed *p, const frame *f) {
    double ticks[16];
    int n = 0;
    double step = 0;
    if (f->log_y) {
        int d0 = (int)lround(log10(f->y0)), d1 = (int)lround(log10(f->y1));
        int every = d1 - d0 > 6 ? 2 : 1;
        for (int d = d0; d <= d1 && n < 16; d += every) ticks[n++] = pow(10, d);
    } else {
        step = f->y_step > 0 ? f->y_step : nice_step(f->y1 - f->y0, 5);
        for (int k = 0; n < 16 && f->y0 + k * step <= f->y1 + step * 1e-6; k++) ticks[n++] = f->y0 + k * step;
    }
    for (int i = 0; i < n; i++) {
        char t[32];
        format_tick(t, sizeof t, ticks[i], step, f->log_y);
        double y = py(f, ticks[i]) + 4;
        box q = text_box(LEFT - 6, y, t, FONT_TICK, 'e');
        if (collides(p, q)) continue;
        place(p, q);
        ftl_strbuf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                             "<text x=\"%d\" y=\"%.1f\" class=\"yt\" data-tick=\"%.17g\">%s</text>",
                          LEFT, PLOT_RIGHT, py(f, ticks[i]), py(f, ticks[i]), LEFT - 6, y, ticks[i], t);
    }
}

static void axes(ftl_strbuf *b, placed *p, const frame *f, const char *title, const char *x_label, const char *y_label) {
    ftl_strbuf_printf(b, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\"%s><title>", W,
                      f->height, W, f->height, f->log_y ? " data-y-scale=\"log\"" : " data-y-scale=\"linear\"");
    html_append_escaped(b, title);
    ftl_strbuf_printf(b, "</title><text x=\"%d\" y=\"18\" class=\"t\">", LEFT);
    html_append_escaped(b, title);
    ftl_strbuf_printf(b, "</text><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\" data-y0=\"%.17g\" "
                         "data-y1=\"%.17g\" data-x0=\"%.17g\" data-x1=\"%.17g\"/>",
                      LEFT, TOP, PLOT_RIGHT - LEFT, PLOT_H, f->y0, f->y1, f->x0, f->x1);
    place(p, text_box(LEFT, 18, title, 13, 's'));
    y_ticks(b, p, f);
    if (!f->own_x_ticks) x_ticks(b, p, f);
    ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xl\">", (LEFT + PLOT_RIGHT) / 2, PLOT_BOTTOM + 34);
    html_append_escaped(b, x_label);
    ftl_strbuf_printf(b, "</text><text x=\"12\" y=\"%d\" class=\"yl\" transform=\"rotate(-90 12 %d)\">", TOP + PLOT_H / 2,
                      TOP + PLOT_H / 2);
    html_append_escaped(b, y_label);
    ftl_strbuf_append(b, "</text>", 7);
}

/* Marked epochs: a dashed line each, the label in the first row from the top where it overlaps
 * no other text, to the left of the line where the right would leave the plot. */
static void markers(ftl_strbuf *b, placed *p, const frame *f, const chart_marker *m, int nm) {
    for (int i = 0; i < nm; i++) {
        double x = px(f, m[i].x), w = text_width(m[i].label, FONT_MARKER);
        bool left = x + 3 + w > PLOT_RIGHT;
        double tx = left ? x - 3 : x + 3;
        int row = 0;
        box q;
        for (;; row++) {
            q = text_box(tx, TOP + 12 + 12 * row, m[i].label, FONT_MARKER, left ? 'e' : 's');
            if (!collides(p, q) || TOP + 12 + 12 * (row + 1) > PLOT_BOTTOM - 4) break;
        }
        place(p, q);
        ftl_strbuf_printf(b, "<line class=\"marker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" data-x=\"%.17g\"/>"
                             "<text class=\"ml\" x=\"%.1f\" y=\"%d\" fill=\"%s\"%s>",
                          x, x, TOP, PLOT_BOTTOM, m[i].color, m[i].x, tx, TOP + 12 + 12 * row, m[i].color,
                          left ? " text-anchor=\"end\"" : "");
        html_append_escaped(b, m[i].label);
        ftl_strbuf_append(b, "</text>", 7);
    }
}

static void legend(ftl_strbuf *b, placed *p, int i, const char *color, const char *symbol, const char *label) {
    int y = TOP + 12 + LEGEND_ROW * i;
    ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"lg\" fill=\"%s\">%s", PLOT_RIGHT + 10, y, color, symbol);
    html_append_escaped(b, label);
    ftl_strbuf_append(b, "</text>", 7);
    char text[256];
    snprintf(text, sizeof text, "%s%s", symbol, label ? label : "");
    place(p, text_box(PLOT_RIGHT + 10, y, text, FONT_LEGEND, 's'));
}

static int chart_height(int legend_rows) {
    int need = TOP + 12 + LEGEND_ROW * legend_rows;
    return need > PLOT_BOTTOM + BOTTOM ? need : PLOT_BOTTOM + BOTTOM;
}

void svg_line_chart(ftl_strbuf *b, const char *title, const char *x_label, const char *y_label, const chart_series *s, int ns,
                    const chart_marker *m, int nm, const chart_axis *axis) {
    frame f = {INFINITY, -INFINITY, 0, 0, false, chart_height(ns), 0, false};
    double lo = INFINITY, hi = -INFINITY, lo_positive = INFINITY;
    for (int i = 0; i < ns; i++)
        for (int64_t k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k]) || !isfinite(s[i].x[k])) continue;
            f.x0 = fmin(f.x0, s[i].x[k]), f.x1 = fmax(f.x1, s[i].x[k]);
            lo = fmin(lo, s[i].y[k]), hi = fmax(hi, s[i].y[k]);
            if (s[i].y[k] > 0) lo_positive = fmin(lo_positive, s[i].y[k]);
        }
    if (!isfinite(f.x0)) f.x0 = 0, f.x1 = 1;
    f.x0 -= 0.5, f.x1 += 0.5;
    /* A log axis over the positive values; a 0 among them (a learning rate decayed to nothing) is
     * drawn on its floor, a decade below the smallest positive one, rather than turning the decades
     * into a linear axis. */
    if (axis && axis->log_when_wide && lo == 0 && isfinite(lo_positive)) lo = lo_positive / 10;
    choose_y(&f, lo, hi, axis);
    placed *p = ftl_xcalloc(1, sizeof *p);
    axes(b, p, &f, title, x_label, y_label);
    for (int i = 0; i < ns; i++) legend(b, p, i, s[i].color, s[i].dashed ? "- - " : "\xe2\x80\x94 ", s[i].label);
    markers(b, p, &f, m, nm);
    for (int i = 0; i < ns; i++) {
        ftl_strbuf_printf(b, "<g class=\"series\" data-run=\"%d\" data-metric=\"", s[i].run);
        html_append_escaped(b, s[i].metric);
        ftl_strbuf_append(b, "\">", 2);
        /* one polyline per unbroken stretch: a gap (NaN) or a new phase starts another */
        bool open = false;
        for (int64_t k = 0; k < s[i].n; k++) {
            bool ok = isfinite(s[i].y[k]) && isfinite(s[i].x[k]);
            bool new_phase = k > 0 && s[i].phase && s[i].phase[k] != s[i].phase[k - 1];
            if (open && (!ok || new_phase)) {
                ftl_strbuf_append(b, "\"/>", 3);
                open = false;
            }
            if (!ok) continue;
            if (!open) {
                ftl_strbuf_printf(b, "<polyline fill=\"none\" stroke=\"%s\"%s points=\"", s[i].color,
                                  s[i].dashed ? " stroke-dasharray=\"5 3\"" : "");
                open = true;
            }
            ftl_strbuf_printf(b, "%.1f,%.1f ", px(&f, s[i].x[k]), py(&f, s[i].y[k]));
        }
        if (open) ftl_strbuf_append(b, "\"/>", 3);
        for (int64_t k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k]) || !isfinite(s[i].x[k])) continue;
            ftl_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\" data-x=\"%.17g\" data-value=\"%.17g\"",
                              px(&f, s[i].x[k]), py(&f, s[i].y[k]), s[i].color, s[i].x[k], s[i].y[k]);
            long long epoch = s[i].epoch ? (long long)s[i].epoch[k] : (long long)llround(s[i].x[k]);
            if (s[i].epoch) ftl_strbuf_printf(b, " data-epoch=\"%lld\"", epoch);
            if (s[i].phase) ftl_strbuf_printf(b, " data-phase=\"%d\"", s[i].phase[k]);
            ftl_strbuf_append(b, "><title>", 8);
            html_append_escaped(b, s[i].label);
            char value[40];
            exact_text(value, sizeof value, s[i].y[k]);
            if (s[i].phase && s[i].phase[k] == 2) ftl_strbuf_printf(b, ", fine-tuning epoch %lld: %s", epoch, value);
            else ftl_strbuf_printf(b, ", %s %lld: %s", x_label, epoch, value);
            ftl_strbuf_append(b, "</title></circle>", 17);
        }
        ftl_strbuf_append(b, "</g>", 4);
    }
    ftl_strbuf_append(b, "</svg>\n", 7);
    free(p);
}

void svg_stacked_bars(ftl_strbuf *b, const char *title, const char *y_label, const double *x, const int *phase,
                      const int64_t *epoch, int64_t n,
                      const double *const *values, const char *const *names, const char *const *colors, int parts,
                      const double *top, const char *unit, const chart_marker *m, int nm, double y_max) {
    frame f = {INFINITY, -INFINITY, 0, 0, false, chart_height(parts), 0, false};
    double tallest = 0;
    for (int64_t i = 0; i < n; i++) {
        double sum = 0;
        for (int k = 0; k < parts; k++) sum += isfinite(values[k][i]) && values[k][i] > 0 ? values[k][i] : 0;
        f.x0 = fmin(f.x0, x[i]), f.x1 = fmax(f.x1, x[i]), tallest = fmax(tallest, sum);
    }
    if (!isfinite(f.x0)) f.x0 = 0, f.x1 = 1;
    f.x0 -= 0.5, f.x1 += 0.5;
    /* room above the tallest bar for its label */
    chart_axis a = {.non_negative = true, .y_min = 0, .y_max = isfinite(y_max) ? y_max : svg_nice_top(tallest * 1.12)};
    choose_y(&f, 0, a.y_max, &a);
    placed *p = ftl_xcalloc(1, sizeof *p);
    axes(b, p, &f, title, "epoch", y_label);
    for (int k = 0; k < parts; k++) legend(b, p, k, colors[k], "\xe2\x96\xa0 ", names[k]);
    double pitch = (PLOT_RIGHT - LEFT) / (f.x1 - f.x0), width = fmax(1.0, pitch * 0.7);
    for (int64_t i = 0; i < n; i++) {
        double acc = 0;
        long long e = epoch ? (long long)epoch[i] : (long long)llround(x[i]);
        bool tuning = phase && phase[i] == 2;
        ftl_strbuf_printf(b, "<g class=\"bar\" data-x=\"%.17g\" data-epoch=\"%lld\" data-phase=\"%d\">", x[i], e,
                          phase ? phase[i] : 1);
        for (int k = 0; k < parts; k++) {
            double v = isfinite(values[k][i]) && values[k][i] > 0 ? values[k][i] : 0;
            double y_top = py(&f, acc + v), y_bottom = py(&f, acc);
            char value[40];
            exact_text(value, sizeof value, v);
            ftl_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%.2f\" width=\"%.1f\" height=\"%.2f\" fill=\"%s\" data-part=\"%s\" "
                                 "data-value=\"%.17g\"><title>%sepoch %lld, %s: %s s</title></rect>",
                              px(&f, x[i]) - width / 2, y_top, width, y_bottom - y_top, colors[k], names[k], v,
                              tuning ? "fine-tuning " : "", e, names[k], value);
            acc += v;
        }
        ftl_strbuf_append(b, "</g>", 4);
    }
    /* labels above the bars, skipped where one would touch another */
    for (int64_t i = 0; top && i < n; i++) {
        if (!isfinite(top[i])) continue;
        double acc = 0;
        for (int k = 0; k < parts; k++) acc += isfinite(values[k][i]) && values[k][i] > 0 ? values[k][i] : 0;
        char t[48];
        snprintf(t, sizeof t, "%.0f%s", top[i], unit ? unit : "");
        double y = py(&f, acc) - 3;
        box q = text_box(px(&f, x[i]), y, t, FONT_BAR, 'm');
        if (collides(p, q)) continue;
        place(p, q);
        ftl_strbuf_printf(b, "<text class=\"bt\" x=\"%.1f\" y=\"%.1f\" data-x=\"%.17g\">%s</text>", px(&f, x[i]), y, x[i], t);
    }
    markers(b, p, &f, m, nm);
    ftl_strbuf_append(b, "</svg>\n", 7);
    free(p);
}

void svg_scatter(ftl_strbuf *b, const char *title, const char *x_label, const char *y_label, const double *x, const double *y,
                 const int *ids, int n, const char *const *categories, int category_count, const char *color) {
    /* a numeric x spanning more than 10x of positive values goes on a log axis (learning rates) */
    double xmin = INFINITY, xmax = -INFINITY, lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (isfinite(x[i])) xmin = fmin(xmin, x[i]), xmax = fmax(xmax, x[i]);
        if (isfinite(y[i])) lo = fmin(lo, y[i]), hi = fmax(hi, y[i]);
    }
    bool log_x = !categories && xmin > 0 && xmax / xmin >= 9.99; /* 1e-3 .. 1e-2 is already a decade */
    double t0 = log_x ? log10(xmin) : xmin, t1 = log_x ? log10(xmax) : xmax;
    if (!isfinite(t0)) t0 = 0, t1 = 1;
    frame f = {t0, t1, 0, 0, false, chart_height(0), 0, true};
    if (categories) f.x0 = -0.5, f.x1 = category_count - 0.5;
    else if (log_x) f.x0 = floor(t0 + 1e-9) - 0.25, f.x1 = ceil(t1 - 1e-9) + 0.25;
    else {
        double pad = t1 > t0 ? (t1 - t0) * 0.08 : fmax(fabs(t0) * 0.5, 0.5);
        f.x0 = t0 - pad, f.x1 = t1 + pad;
    }
    chart_axis axis = {.non_negative = true, .y_min = NAN, .y_max = NAN};
    choose_y(&f, lo, hi, &axis);
    placed *p = ftl_xcalloc(1, sizeof *p);
    axes(b, p, &f, title, x_label, y_label);
    ftl_strbuf_printf(b, "<g class=\"xaxis\" data-x-scale=\"%s\">", categories ? "category" : log_x ? "log" : "linear");
    if (categories) {
        for (int c = 0; c < category_count; c++) {
            ftl_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xt\">", px(&f, c), PLOT_BOTTOM + 16);
            html_append_escaped(b, categories[c]);
            ftl_strbuf_append(b, "</text>", 7);
        }
    } else {
        double step = log_x ? 1 : nice_step(f.x1 - f.x0, 6);
        for (double v = ceil(f.x0 / step - 1e-9) * step; v <= f.x1 + 1e-9; v += step) {
            char t[32];
            if (log_x) snprintf(t, sizeof t, "1e%d", (int)lround(v));
            else snprintf(t, sizeof t, "%g", fabs(v) < step * 1e-6 ? 0.0 : v);
            box q = text_box(px(&f, v), PLOT_BOTTOM + 16, t, FONT_TICK, 'm');
            if (collides(p, q)) continue;
            place(p, q);
            ftl_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xt\">%s</text>", px(&f, v), PLOT_BOTTOM + 16, t);
        }
    }
    ftl_strbuf_append(b, "</g><g class=\"points\">", 22);
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        double tx = log_x ? log10(x[i]) : x[i];
        ftl_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.7\" data-trial=\"%d\" "
                             "data-x=\"%.17g\" data-value=\"%.17g\"><title>trial %d: ",
                          px(&f, tx), py(&f, y[i]), color, ids[i], x[i], y[i], ids[i]);
        char value[40];
        if (categories) html_append_escaped(b, categories[(int)x[i]]);
        else {
            exact_text(value, sizeof value, x[i]);
            ftl_strbuf_append(b, value, strlen(value));
        }
        exact_text(value, sizeof value, y[i]);
        ftl_strbuf_printf(b, ", %s ", y_label);
        ftl_strbuf_append(b, value, strlen(value));
        ftl_strbuf_append(b, "</title></circle>", 17);
    }
    ftl_strbuf_append(b, "</g></svg>\n", 11);
    free(p);
}
