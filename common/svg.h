/* svg: device memory over one step as an SVG picture, drawn by dpc
 * (--emit=memplot: the plan) and by the training executable (--memplot: the
 * plan and what a traced step measured). One source in both, as
 * binomial.c is: a compact writer of our own, so that neither needs a
 * plotting library at run time. */
#ifndef DPC_SVG_H
#define DPC_SVG_H

#include <stdint.h>

#define SVG_LAYERS 12

typedef struct {
	const char *title;
	const char *xlabel;
	int n;                         /* points of each layer, spread evenly over the x axis */
	int nlayers;
	const char *name[SVG_LAYERS];  /* stacked bottom up */
	const int64_t *y[SVG_LAYERS];  /* bytes, n each */
	int nline;                     /* points of a measured line over the stack (0: none), spread evenly */
	const int64_t *line;
	const char *line_name;
	int64_t device_mem;            /* a dashed line at the budget (--device-mem), 0: none */
} SvgPlot;

/* the picture as SVG text, malloc'd; NULL when out of memory */
char *svg_memplot(const SvgPlot *p);

/* The memory plan's picture, dpc's and the executable's alike: the fixed
 * regions' bytes (params, grads, optimizer state, inputs, tape, streaming
 * slots: SVG_FIXED of them) as constant layers, the work region (snapshots
 * among its tensors) over n points on top, and a measured line of nline points (0: none). */
#define SVG_FIXED 6
char *svg_plan(const char *title, const char *xlabel, const int64_t *fixed, const int64_t *work, int n,
               const int64_t *line, int nline, const char *line_name, int64_t device_mem);

#endif
