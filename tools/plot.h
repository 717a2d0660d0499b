/*
 * plot.h — a minimal SVG line chart for benchmark reports.
 */
#ifndef PI_TOOLS_PLOT_H
#define PI_TOOLS_PLOT_H

#include <stdbool.h>

typedef struct plot_series {
    const char *label;
    const double *x, *y; /* n points; non-finite y values are skipped */
    int n;
    bool dashed;
} plot_series;

/* Write the chart to path (the whole chart or nothing: a previous file stays
   on failure); 0 on success, -1 with pi_last_error() naming path and the
   cause when the file cannot be written. */
int plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel, const plot_series *s,
             int n_series);

#endif
