/* rt: --profile. The calls of one step are bracketed by device time marks
 * (CUDA events on the GPU, the clock on the CPU, whose calls are synchronous);
 * after a sync, the times are summed by label: which kernels, GEMMs and
 * copies the step's time goes to. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct {
	char label[64];
	int a, b;          /* marks */
} Call;

static Call *calls;
static int ncalls, cap;

void rt_prof_begin(RtCtx *c, const char *label)
{
	if (ncalls == cap) {
		cap = cap ? 2 * cap : 1024;
		calls = realloc(calls, sizeof *calls * (size_t)cap);
		if (!calls)
			rt_fail(1, "out of memory for --profile");
	}
	Call *k = &calls[ncalls];
	snprintf(k->label, sizeof k->label, "%s", label);
	k->a = c->dev->mark();
}

void rt_prof_end(RtCtx *c) { calls[ncalls++].b = c->dev->mark(); }

typedef struct {
	const char *label;
	long n;
	double ms;
} Total;

static int by_time(const void *x, const void *y)
{
	double a = ((const Total *)x)->ms, b = ((const Total *)y)->ms;
	return (a < b) - (a > b);
}

void rt_prof_report(RtCtx *c, long step)
{
	if (!ncalls)
		return;
	c->dev->sync();
	Total *t = calloc((size_t)ncalls, sizeof *t);
	if (!t)
		rt_fail(1, "out of memory for --profile");
	int nt = 0;
	double busy = 0;
	for (int i = 0; i < ncalls; i++) {
		double ms = c->dev->mark_ms(calls[i].a, calls[i].b);
		busy += ms;
		int j = 0;
		while (j < nt && strcmp(t[j].label, calls[i].label))
			j++;
		if (j == nt)
			t[nt++].label = calls[i].label;
		t[j].n++;
		t[j].ms += ms;
	}
	qsort(t, (size_t)nt, sizeof *t, by_time);
	double span = c->dev->mark_ms(calls[0].a, calls[ncalls - 1].b);
	printf("profile of step %ld on the %s device: %.3f ms from its first call to its last, %.3f ms in the %d calls\n",
	       step, c->dev->name, span, busy, ncalls);
	printf("%10s %6s %7s  %s\n", "ms", "%", "calls", "kernel, GEMM [m x n x k] or copy");
	for (int j = 0; j < nt; j++)
		printf("%10.3f %6.1f %7ld  %s\n", t[j].ms, span > 0 ? 100 * t[j].ms / span : 0, t[j].n, t[j].label);
	free(t);
}
