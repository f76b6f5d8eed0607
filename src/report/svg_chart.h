/* Small SVG charts for the report, written as text: line charts with several series and marked
 * epochs, and stacked bars. Every point carries its exact value (data-* attributes, and a
 * <title> tooltip), so the page can be read back and compared with its data. Axes have round
 * ticks (1-2-5 steps, or decades on a log axis); labels are placed so that no two overlap. */
#ifndef FTL_REPORT_SVG_CHART_H
#define FTL_REPORT_SVG_CHART_H

#include "util/json.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct chart_series {
    const char *label;        /* legend text, e.g. "run 1 val_loss" */
    const char *metric;       /* data-metric, e.g. "val_loss" */
    int run;                  /* data-run: index of the log */
    const char *color;
    bool dashed;
    const double *x, *y;      /* n points; NaN y values are gaps, not drawn */
    int64_t n;
    const int *phase;         /* optional, per point: data-phase; the line breaks where it changes */
    const int64_t *epoch;     /* optional, per point: data-epoch (the epoch within its phase) */
} chart_series;

typedef struct chart_marker {
    double x;
    const char *label;
    const char *color;
} chart_marker;

/* How the y axis is chosen. y_min/y_max: NaN, or a range shared with other charts. */
typedef struct chart_axis {
    bool non_negative;        /* the quantity is never below 0: the axis does not go there */
    bool log_when_wide;       /* logarithmic when the positive values span more than 10x */
    double y_min, y_max;
} chart_axis;

void svg_line_chart(ftl_strbuf *b, const char *title, const char *x_label, const char *y_label, const chart_series *series,
                    int series_count, const chart_marker *markers, int marker_count, const chart_axis *axis);
/* Stacked bars at x[i] of values[k][i] (k < part_count, negative values drawn as 0); top_label[i]
 * printed above each bar (thinned where they would overlap); y_max: NaN or a shared top. phase
 * and epoch (optional, per bar) name the epoch within its phase in data-* and tooltips. */
void svg_stacked_bars(ftl_strbuf *b, const char *title, const char *y_label, const double *x, const int *phase,
                      const int64_t *epoch, int64_t n,
                      const double *const *values, const char *const *names, const char *const *colors, int part_count,
                      const double *top_label, const char *top_label_unit, const chart_marker *markers, int marker_count,
                      double y_max);
/* Points (x[i], y[i]) named by ids[i] (data-trial): a sweep's settings against a metric. categories:
 * x holds indices into them (a setting such as the optimizer); else x is numeric, on a log axis when
 * its positive values span more than 10x. */
void svg_scatter(ftl_strbuf *b, const char *title, const char *x_label, const char *y_label, const double *x, const double *y,
                 const int *ids, int n, const char *const *categories, int category_count, const char *color);
/* The round axis range that covers [lo, hi] (what svg_stacked_bars would use), for sharing. */
double svg_nice_top(double hi);
/* Appends text with &, <, >, " escaped. */
void html_append_escaped(ftl_strbuf *b, const char *text);

#endif
