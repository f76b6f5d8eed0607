/* SVG line charts and stacked bars. */
#include "report/svg_chart.h"

#include <math.h>
#include <string.h>

/* The legend sits in the right margin, clear of the curves and the marked epochs. */
enum { W = 900, H = 260, LEFT = 64, RIGHT = 190, TOP = 28, BOTTOM = 40 };

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

typedef struct frame {
    double x0, x1, y0, y1;
} frame;

static double px(const frame *f, double x) { return LEFT + (f->x1 > f->x0 ? (x - f->x0) / (f->x1 - f->x0) : 0.5) * (W - LEFT - RIGHT); }
static double py(const frame *f, double y) { return TOP + (f->y1 > f->y0 ? (f->y1 - y) / (f->y1 - f->y0) : 0.5) * (H - TOP - BOTTOM); }

static void axes(ftl_strbuf *b, const frame *f, const char *title, const char *x_label, const char *y_label, bool integer_x) {
    ftl_strbuf_printf(b, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\"><title>", W, H, W, H);
    html_append_escaped(b, title);
    ftl_strbuf_printf(b, "</title><text x=\"%d\" y=\"18\" class=\"t\">", LEFT);
    html_append_escaped(b, title);
    ftl_strbuf_printf(b, "</text><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>", LEFT, TOP, W - LEFT - RIGHT,
                      H - TOP - BOTTOM);
    for (int k = 0; k <= 4; k++) { /* y ticks */
        double v = f->y0 + (f->y1 - f->y0) * k / 4.0;
        ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" class=\"yt\">%.4g</text>", LEFT - 6, py(f, v) + 4, v);
    }
    /* about ten x ticks, at whole numbers when x counts epochs or steps */
    double step = integer_x ? fmax(1, ceil((f->x1 - f->x0) / 10)) : (f->x1 - f->x0) / 5;
    for (double v = integer_x ? ceil(f->x0) : f->x0; step > 0 && v <= f->x1 + 1e-9; v += step)
        ftl_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xt\">%.4g</text>", px(f, v), H - BOTTOM + 16, v);
    ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xl\">", W / 2, H - 6);
    html_append_escaped(b, x_label);
    ftl_strbuf_printf(b, "</text><text x=\"12\" y=\"%d\" class=\"yl\" transform=\"rotate(-90 12 %d)\">", H / 2, H / 2);
    html_append_escaped(b, y_label);
    ftl_strbuf_append(b, "</text>", 7);
}

void svg_line_chart(ftl_strbuf *b, const char *title, const char *x_label, const char *y_label, const chart_series *s, int ns,
                    const chart_marker *m, int nm) {
    frame f = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (int i = 0; i < ns; i++)
        for (int64_t k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].y[k])) continue;
            f.x0 = fmin(f.x0, s[i].x[k]), f.x1 = fmax(f.x1, s[i].x[k]);
            f.y0 = fmin(f.y0, s[i].y[k]), f.y1 = fmax(f.y1, s[i].y[k]);
        }
    if (!isfinite(f.x0)) f = (frame){0, 1, 0, 1};
    if (f.x1 - f.x0 < 1) f.x0 -= 0.5, f.x1 += 0.5;
    double pad = (f.y1 - f.y0) * 0.08;
    if (pad <= 0) pad = fabs(f.y0) > 0 ? fabs(f.y0) * 0.1 : 0.5;
    f.y0 -= pad, f.y1 += pad;
    axes(b, &f, title, x_label, y_label, true);
    for (int i = 0; i < nm; i++) {
        ftl_strbuf_printf(b, "<line class=\"marker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\"/>"
                             "<text class=\"ml\" x=\"%.1f\" y=\"%d\" fill=\"%s\">",
                          px(&f, m[i].x), px(&f, m[i].x), TOP, H - BOTTOM, m[i].color, px(&f, m[i].x) + 3,
                          H - BOTTOM - 6 - 12 * (i % 4), m[i].color);
        html_append_escaped(b, m[i].label);
        ftl_strbuf_append(b, "</text>", 7);
    }
    for (int i = 0; i < ns; i++) {
        ftl_strbuf_printf(b, "<g class=\"series\" data-run=\"%d\" data-metric=\"", s[i].run);
        html_append_escaped(b, s[i].metric);
        ftl_strbuf_printf(b, "\"><polyline fill=\"none\" stroke=\"%s\"%s points=\"", s[i].color,
                          s[i].dashed ? " stroke-dasharray=\"5 3\"" : "");
        for (int64_t k = 0; k < s[i].n; k++)
            if (isfinite(s[i].y[k])) ftl_strbuf_printf(b, "%.1f,%.1f ", px(&f, s[i].x[k]), py(&f, s[i].y[k]));
        ftl_strbuf_append(b, "\"/>", 3);
        for (int64_t k = 0; k < s[i].n; k++)
            if (isfinite(s[i].y[k]))
                ftl_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\" data-epoch=\"%.17g\" data-value=\"%.17g\"/>",
                                  px(&f, s[i].x[k]), py(&f, s[i].y[k]), s[i].color, s[i].x[k], s[i].y[k]);
        ftl_strbuf_append(b, "</g>", 4);
    }
    for (int i = 0; i < ns; i++) { /* legend */
        ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"lg\" fill=\"%s\">%s", W - RIGHT + 10, TOP + 12 + 14 * i, s[i].color,
                          s[i].dashed ? "- - " : "\xe2\x80\x94 ");
        html_append_escaped(b, s[i].label);
        ftl_strbuf_append(b, "</text>", 7);
    }
    ftl_strbuf_append(b, "</svg>\n", 7);
}

void svg_stacked_bars(ftl_strbuf *b, const char *title, const char *y_label, const double *x, int64_t n,
                      const double *const *values, const char *const *names, const char *const *colors, int parts,
                      const double *top, const char *unit) {
    frame f = {INFINITY, -INFINITY, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        double sum = 0;
        for (int k = 0; k < parts; k++) sum += isfinite(values[k][i]) ? values[k][i] : 0;
        f.x0 = fmin(f.x0, x[i]), f.x1 = fmax(f.x1, x[i]), f.y1 = fmax(f.y1, sum);
    }
    if (!isfinite(f.x0)) f.x0 = 0, f.x1 = 1;
    f.x0 -= 0.5, f.x1 += 0.5;
    if (f.y1 <= 0) f.y1 = 1;
    f.y1 *= 1.15;
    axes(b, &f, title, "epoch", y_label, true);
    double width = fmax(1.0, (W - LEFT - RIGHT) / (double)(n ? n : 1) * 0.7);
    for (int64_t i = 0; i < n; i++) {
        double acc = 0;
        ftl_strbuf_printf(b, "<g class=\"bar\" data-epoch=\"%.17g\">", x[i]);
        for (int k = 0; k < parts; k++) {
            double v = isfinite(values[k][i]) ? values[k][i] : 0;
            double y_top = py(&f, acc + v), y_bottom = py(&f, acc);
            ftl_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.2f\" fill=\"%s\" data-part=\"%s\" "
                                 "data-value=\"%.17g\"/>",
                              px(&f, x[i]) - width / 2, y_top, width, y_bottom - y_top, colors[k], names[k], v);
            acc += v;
        }
        if (top && isfinite(top[i]))
            ftl_strbuf_printf(b, "<text class=\"bt\" x=\"%.1f\" y=\"%.1f\">%.0f%s</text>", px(&f, x[i]), py(&f, acc) - 3, top[i],
                              unit ? unit : "");
        ftl_strbuf_append(b, "</g>", 4);
    }
    for (int k = 0; k < parts; k++) {
        ftl_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"lg\" fill=\"%s\">\xe2\x96\xa0 ", W - RIGHT + 10, TOP + 12 + 14 * k,
                          colors[k]);
        html_append_escaped(b, names[k]);
        ftl_strbuf_append(b, "</text>", 7);
    }
    ftl_strbuf_append(b, "</svg>\n", 7);
}
