/*
 * plot.c — a minimal SVG line chart (no dependencies): lines of (x, y)
 * points on linear axes with ticks, a title and a legend. Written through
 * base/outfile.h, so a failed write leaves an older chart in place.
 */
#include "plot.h"

#include "base/outfile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

/* A "nice" tick step for a range: 1, 2 or 5 times a power of ten. */
static double nice_step(double range, int ticks) {
    double raw = range / ticks, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

int plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel, const plot_series *s,
             int n_series) {
    pi_outfile *of;
    if (pi_outfile_open(path, &of)) return -1;
    FILE *f = pi_outfile_stream(of);
    const double W = 720, H = 440, L = 70, R = 20, T = 40, B = 55;
    double x0 = INFINITY, x1 = -INFINITY, y1 = 0.0;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
            x0 = s[k].x[i] < x0 ? s[k].x[i] : x0;
            x1 = s[k].x[i] > x1 ? s[k].x[i] : x1;
            y1 = s[k].y[i] > y1 ? s[k].y[i] : y1;
        }
    if (!(x1 > x0)) {
        x0 = isfinite(x0) ? x0 - 1.0 : 0.0;
        x1 = x0 + 2.0;
    }
    if (!(y1 > 0.0)) y1 = 1.0;
    double xs = nice_step(x1 - x0, 6), ys = nice_step(y1, 5);
    x0 = floor(x0 / xs) * xs;
    x1 = ceil(x1 / xs) * xs;
    y1 = ceil(y1 * 1.05 / ys) * ys;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * (W - L - R))
#define PY(v) (H - B - (v) / y1 * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">", W / 2);
    xml_text(f, title);
    fputs("</text>\n", f);
    for (double v = x0; v <= x1 + xs * 1e-9; v += xs)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "text-anchor=\"middle\">%g</text>\n", PX(v), PY(0), PX(v), PY(y1), PX(v), H - B + 16, v);
    for (double v = 0.0; v <= y1 + ys * 1e-9; v += ys)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "text-anchor=\"end\">%g</text>\n", PX(x0), PY(v), PX(x1), PY(v), L - 6, PY(v) + 4, v);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", PX(x0), PY(0), PX(x1), PY(0));
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", PX(x0), PY(0), PX(x0), PY(y1));
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", (L + W - R) / 2, H - 14);
    xml_text(f, xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(18,%.0f) rotate(-90)\" text-anchor=\"middle\">", (T + H - B) / 2);
    xml_text(f, ylabel);
    fputs("</text>\n", f);
    for (int k = 0; k < n_series; k++) {
        const char *c = colors[k % 5];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", c,
                s[k].dashed ? " stroke-dasharray=\"6,4\"" : "");
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].y[i])) fprintf(f, "%.1f,%.1f ", PX(s[k].x[i]), PY(s[k].y[i]));
        fputs("\"/>\n", f);
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].y[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", PX(s[k].x[i]), PY(s[k].y[i]), c);
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                   "<text x=\"%.0f\" y=\"%.0f\">", L + 15, T + 8 + 18.0 * k, L + 40, T + 8 + 18.0 * k, c,
                s[k].dashed ? " stroke-dasharray=\"6,4\"" : "", L + 46, T + 12 + 18.0 * k);
        xml_text(f, s[k].label);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
#undef PX
#undef PY
    return pi_outfile_commit(of) ? -1 : 0;
}
