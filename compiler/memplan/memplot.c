/* stream: --emit=memplot, the plan's device memory over one step as an SVG
 * picture (common/svg.c draws it): the fixed regions as constant layers,
 * the work region as its highest byte in use (Program.mem_series). */
#include "memplan.h"

#include <stdlib.h>

#include "../../common/svg.h"

void mem_memplot(FILE *f, Program *p, const char *model)
{
	if (!p->mem_series)
		die("no memory series planned");
	int64_t fixed[SVG_FIXED] = {p->plan_params, p->plan_grads, p->plan_opt, p->plan_inputs, p->plan_tape,
	                            p->plan_slots};
	char *svg = svg_plan(ar_printf("%s: planned device memory over one step, peak %s", model, mem_bytes_str(p->arena_bytes)),
	                     "the step's ops in program order (a loop's body once)", fixed, p->mem_series, p->mem_points, NULL, 0,
	                     NULL, p->device_mem);
	if (!svg)
		fatal("out of memory drawing the memory plot");
	fputs(svg, f);
	free(svg);
}
