/* Small SVG charts for the report, written as text: line charts with several series and marked
 * epochs, and stacked bars. Every point carries its exact value (data-* attributes), so the page
 * can be read back and compared with its data. */
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
} chart_series;

typedef struct chart_marker {
    double x;
    const char *label;
    const char *color;
} chart_marker;

void svg_line_chart(ftl_strbuf *b, const char *title, const char *x_label, const char *y_label, const chart_series *series,
                    int series_count,
                    const chart_marker *markers, int marker_count);
/* Stacked bars at x[i] of values[k][i] (k < part_count); top_label[i] printed above each bar. */
void svg_stacked_bars(ftl_strbuf *b, const char *title, const char *y_label, const double *x, int64_t n,
                      const double *const *values, const char *const *names, const char *const *colors, int part_count,
                      const double *top_label, const char *top_label_unit);
/* Appends text with &, <, >, " escaped. */
void html_append_escaped(ftl_strbuf *b, const char *text);

#endif
