/* stream: --emit=memplot, the plan's device memory over one step as an SVG
 * picture (runtime/svg.c draws it): the fixed regions as constant layers,
 * the work region as its highest byte in use (Program.mem_series). */
#include "stream.h"

#include <stdlib.h>

#include "../../runtime/svg.h"

void stream_memplot(FILE *f, Program *p, const char *model, int64_t budget)
{
	if (!p->mem_series)
		die("no memory series planned");
	int n = p->mem_points;
	int64_t fixed[] = {p->plan_params, p->plan_grads, p->plan_opt, p->plan_inputs, p->plan_tape, p->plan_snap, p->plan_slots};
	static const char *names[] = {"params", "grads", "optimizer state", "inputs", "tape", "snapshots", "streaming slots", "work"};
	SvgPlot s = {ar_printf("%s: planned device memory over one step, peak %s", model, stream_bytes_str(p->arena_bytes)),
	             "the step's ops in program order (a loop's body once)", n, 8, {0}, {0}, 0, NULL, NULL, budget};
	for (int l = 0; l < 7; l++) {
		int64_t *y = ar_alloc(sizeof(int64_t) * (size_t)n);
		for (int i = 0; i < n; i++)
			y[i] = fixed[l];
		s.name[l] = names[l];
		s.y[l] = y;
	}
	s.name[7] = names[7];
	s.y[7] = p->mem_series;
	char *svg = svg_memplot(&s);
	if (!svg)
		fatal("out of memory drawing the memory plot");
	fputs(svg, f);
	free(svg);
}
