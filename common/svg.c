/* svg: stacked areas of bytes over one step, a measured line and a budget
 * line over them, axes in KiB / MiB / GiB, a legend. */
#include "svg.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	char *s;
	size_t len, cap;
	bool oom;
} Buf;

static void add(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Buf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? 2 * b->cap : 1 << 16;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->oom = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

/* text, with XML's specials escaped */
static void text(Buf *b, const char *t)
{
	for (; t && *t; t++)
		switch (*t) {
		case '&': add(b, "&amp;"); break;
		case '<': add(b, "&lt;"); break;
		case '>': add(b, "&gt;"); break;
		case '"': add(b, "&quot;"); break;
		default: add(b, "%c", *t);
		}
}

/* "1.17 MiB": bytes in the largest unit that keeps a number of 1 or more */
static void bytes(Buf *b, int64_t n)
{
	static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;
	while (u < 4 && v >= 1024)
		v /= 1024, u++;
	add(b, "%.4g %s", v, names[u]);
}

static const char *colors[SVG_LAYERS] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                         "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295"};

enum { W = 880, H = 440, LEFT = 86, RIGHT = 210, TOP = 44, BOTTOM = 56 };

static double px(double f) { return LEFT + f * (W - LEFT - RIGHT); }

/* a tick step of 1, 2 or 5 times a power of two's unit, about five ticks to the top */
static void ticks(double top, double *step, double *unit, const char **name)
{
	static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	*unit = 1;
	while (u < 4 && top / *unit >= 1024)
		*unit *= 1024, u++;
	*name = names[u];
	double raw = top / *unit / 5, mag = 1;
	while (mag * 10 <= raw)
		mag *= 10;
	while (mag > raw && mag > 1e-3)
		mag /= 10;
	*step = (raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag) * *unit;
}

/* a step curve through v[0..n) (bytes at y(v)), forward or backward,
 * with a point only where the value changes */
static void step_curve(Buf *b, const int64_t *v, int n, bool back, double top)
{
	double ybase = H - BOTTOM, yspan = H - BOTTOM - TOP;
	for (int k = 0; k < n; k++) {
		int i = back ? n - 1 - k : k;
		double y = ybase - (double)v[i] / top * yspan;
		bool first = k == 0, last = k == n - 1;
		int j = back ? i - 1 : i + 1; /* the neighbour the curve goes to */
		double edge = px((double)(back ? i : i + 1) / n);
		if (first)
			add(b, "%.1f,%.1f ", px((double)(back ? i + 1 : i) / n), y);
		if (last)
			add(b, "%.1f,%.1f ", edge, y);
		else if (v[j] != v[i])
			add(b, "%.1f,%.1f %.1f,%.1f ", edge, y, edge, ybase - (double)v[j] / top * yspan);
	}
}

char *svg_memplot(const SvgPlot *p)
{
	Buf b = {0};
	int n = p->n > 0 ? p->n : 1;
	double top = (double)p->device_mem;
	int64_t *sum = calloc((size_t)n, sizeof *sum);
	if (!sum)
		return NULL;
	for (int l = 0; l < p->nlayers; l++)
		for (int i = 0; i < p->n; i++)
			sum[i] += p->y[l][i];
	for (int i = 0; i < p->n; i++)
		if (sum[i] > top)
			top = (double)sum[i];
	for (int i = 0; i < p->nline; i++)
		if (p->line[i] > top)
			top = (double)p->line[i];
	top = top > 0 ? top * 1.08 : 1;
	double step, unit;
	const char *uname;
	ticks(top, &step, &unit, &uname);
	double ybase = H - BOTTOM, yspan = H - BOTTOM - TOP;
#define PY(v) (ybase - (double)(v) / top * yspan)

	/* the figures drawn, as attributes: what tests read back (data-peak: the stack's top) */
	int64_t peak = 0, line_max = 0;
	for (int i = 0; i < p->n; i++)
		peak = sum[i] > peak ? sum[i] : peak;
	for (int i = 0; i < p->nline; i++)
		line_max = p->line[i] > line_max ? p->line[i] : line_max;
	add(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
	        "font-family=\"sans-serif\" font-size=\"12\" data-peak=\"%lld\" data-budget=\"%lld\" data-measured=\"%lld\">\n",
	    W, H, W, H, (long long)peak, (long long)p->device_mem, (long long)line_max);
	add(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
	add(&b, "<text x=\"%d\" y=\"24\" font-size=\"15\">", LEFT);
	text(&b, p->title);
	add(&b, "</text>\n");
	/* the grid and the y axis's labels */
	for (double v = 0; v <= top; v += step) {
		add(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, PY(v), W - RIGHT, PY(v));
		add(&b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g %s</text>\n", LEFT - 6, PY(v) + 4, v / unit, uname);
	}
	/* the layers, each a polygon from its top back along the layer under it; a point is a run of ops */
	int64_t *below = calloc((size_t)n, sizeof *below);
	if (!below) {
		free(sum);
		free(b.s);
		return NULL;
	}
	for (int l = 0; l < p->nlayers; l++) {
		bool any = false;
		for (int i = 0; i < p->n; i++)
			any |= p->y[l][i] > 0;
		if (!any)
			continue;
		int64_t most = 0;
		for (int i = 0; i < p->n; i++)
			most = p->y[l][i] > most ? p->y[l][i] : most;
		add(&b, "<polygon class=\"layer\" data-name=\"");
		text(&b, p->name[l]);
		add(&b, "\" data-max=\"%lld\" fill=\"%s\" fill-opacity=\"0.85\" points=\"", (long long)most, colors[l % SVG_LAYERS]);
		int64_t *upper = malloc(sizeof *upper * (size_t)n);
		if (!upper) {
			b.oom = true;
			break;
		}
		for (int i = 0; i < p->n; i++)
			upper[i] = below[i] + p->y[l][i];
		step_curve(&b, upper, p->n, false, top);
		step_curve(&b, below, p->n, true, top);
		add(&b, "\"/>\n");
		memcpy(below, upper, sizeof *upper * (size_t)n);
		free(upper);
	}
	if (p->nline > 0) {
		add(&b, "<polyline class=\"measured\" fill=\"none\" stroke=\"black\" stroke-width=\"2\" points=\"");
		step_curve(&b, p->line, p->nline, false, top);
		add(&b, "\"/>\n");
	}
	if (p->device_mem > 0)
		add(&b, "<line class=\"budget\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"2\" "
		        "stroke-dasharray=\"8 5\"/>\n", LEFT, PY(p->device_mem), W - RIGHT, PY(p->device_mem));
	/* axes */
	add(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\"/>\n", LEFT, ybase, W - RIGHT, ybase);
	add(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\"/>\n", LEFT, TOP, LEFT, ybase);
	add(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px(0.5), H - 18);
	text(&b, p->xlabel);
	add(&b, "</text>\n");
	/* the legend, top down as the stack reads */
	int row = 0;
	int lx = W - RIGHT + 16;
	if (p->device_mem > 0) {
		add(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#c00\" stroke-width=\"2\" stroke-dasharray=\"8 5\"/>", lx,
		    TOP + 6, lx + 18, TOP + 6);
		add(&b, "<text x=\"%d\" y=\"%d\">budget ", lx + 24, TOP + 10);
		bytes(&b, p->device_mem);
		add(&b, "</text>\n");
		row++;
	}
	if (p->nline > 0) {
		add(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\" stroke-width=\"2\"/>", lx, TOP + 6 + 20 * row,
		    lx + 18, TOP + 6 + 20 * row);
		add(&b, "<text x=\"%d\" y=\"%d\">", lx + 24, TOP + 10 + 20 * row);
		text(&b, p->line_name);
		add(&b, "</text>\n");
		row++;
	}
	for (int l = p->nlayers - 1; l >= 0; l--) {
		int64_t most = 0;
		for (int i = 0; i < p->n; i++)
			most = p->y[l][i] > most ? p->y[l][i] : most;
		if (!most)
			continue;
		add(&b, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"12\" fill=\"%s\"/>", lx, TOP + 20 * row, colors[l % SVG_LAYERS]);
		add(&b, "<text x=\"%d\" y=\"%d\">", lx + 24, TOP + 10 + 20 * row);
		text(&b, p->name[l]);
		add(&b, " ");
		bytes(&b, most);
		add(&b, "</text>\n");
		row++;
	}
	add(&b, "</svg>\n");
#undef PY
	free(sum);
	free(below);
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

char *svg_plan(const char *title, const char *xlabel, const int64_t *fixed, const int64_t *work, int n,
               const int64_t *line, int nline, const char *line_name, int64_t device_mem)
{
	static const char *names[SVG_FIXED + 1] = {"params", "grads", "optimizer state", "inputs", "tape",
	                                           "streaming slots", "work"};
	SvgPlot s = {title, xlabel, n, SVG_FIXED + 1, {0}, {0}, nline, line, line_name, device_mem};
	int64_t *constant = malloc(sizeof *constant * (size_t)(n > 0 ? n : 1) * SVG_FIXED);
	if (!constant)
		return NULL;
	for (int l = 0; l < SVG_FIXED; l++) {
		for (int i = 0; i < n; i++)
			constant[l * n + i] = fixed[l];
		s.name[l] = names[l];
		s.y[l] = constant + l * n;
	}
	s.name[SVG_FIXED] = names[SVG_FIXED];
	s.y[SVG_FIXED] = work;
	char *svg = svg_memplot(&s);
	free(constant);
	return svg;
}
