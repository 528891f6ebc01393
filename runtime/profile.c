/* rt: --profile and --trace. While a step is recorded (RtCtx.record), each
 * device call is bracketed by device time marks (CUDA events on the GPU,
 * the clock on the CPU, whose calls are synchronous), copies on the copy
 * stream are timed by the device, and the phases of the step are marked.
 * --profile sums its last step's calls by label; --trace writes the
 * recorded steps as Chrome trace events (Perfetto, chrome://tracing). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct {
	char label[64];
	RtCall kind;
	int a, b;          /* marks; a phase has a only, and ends where the next begins */
	int64_t event;     /* RT_CALL_COPY: the copy stream's event */
	long step;
	int64_t bytes;     /* device bytes in use when it was queued, as the allocator counts them */
	double pred_us;    /* a kernel's predicted time (dpc's cost model), 0 when none */
} Call;

static Call *calls;
static int ncalls, cap;

static Call *next_call(RtCtx *c, RtCall kind, const char *label)
{
	if (ncalls == cap) {
		cap = cap ? 2 * cap : 1024;
		calls = rt_host_grow(calls, (int64_t)sizeof *calls * cap, "--profile or --trace");
	}
	Call *k = &calls[ncalls];
	memset(k, 0, sizeof *k);
	snprintf(k->label, sizeof k->label, "%s", label);
	k->kind = kind;
	k->step = c->step;
	k->bytes = c->n.device_bytes;
	k->b = -1;
	return k;
}

void rt_prof_begin(RtCtx *c, RtCall kind, const char *label) { next_call(c, kind, label)->a = c->dev->mark(); }

void rt_prof_predicted(double us) { calls[ncalls].pred_us = us; }

void rt_prof_end(RtCtx *c) { calls[ncalls++].b = c->dev->mark(); }

void rt_prof_copy(RtCtx *c, const char *label, int64_t event)
{
	Call *k = next_call(c, RT_CALL_COPY, label);
	k->event = event;
	k->a = c->dev->mark(); /* when it was queued */
	ncalls++;
}

void rt_prof_mark(RtCtx *c, RtCall kind, const char *label)
{
	next_call(c, kind, label)->a = c->dev->mark();
	ncalls++;
}

typedef struct {
	const char *label;
	long n;
	double ms, pred; /* pred: the predicted ms of the calls that have a prediction */
} Total;

static int by_time(const void *x, const void *y)
{
	double a = ((const Total *)x)->ms, b = ((const Total *)y)->ms;
	return (a < b) - (a > b);
}

static bool timed(const Call *k) { return k->kind <= RT_CALL_TRANSFER; }

void rt_prof_report(RtCtx *c, long step)
{
	c->dev->sync();
	Total *t = calloc((size_t)ncalls + 1, sizeof *t);
	if (!t)
		rt_fail(1, "out of memory for --profile");
	int nt = 0, first = -1, last = -1, n = 0;
	double busy = 0, pred = 0;
	for (int i = 0; i < ncalls; i++) {
		if (calls[i].step != step || !timed(&calls[i]))
			continue;
		first = first < 0 ? i : first;
		last = i;
		n++;
		double ms = c->dev->mark_ms(calls[i].a, calls[i].b);
		busy += ms;
		int j = 0;
		while (j < nt && strcmp(t[j].label, calls[i].label))
			j++;
		if (j == nt)
			t[nt++].label = calls[i].label;
		t[j].n++;
		t[j].ms += ms;
		t[j].pred += calls[i].pred_us / 1000;
		pred += calls[i].pred_us / 1000;
	}
	if (first >= 0) {
		qsort(t, (size_t)nt, sizeof *t, by_time);
		double span = c->dev->mark_ms(calls[first].a, calls[last].b);
		printf("profile of step %ld on the %s device: %.3f ms from its first call to its last, %.3f ms in the %d calls\n",
		       step, c->dev->name, span, busy, n);
		if (pred > 0) {
			/* the kernels' predicted times (dpc --emit=kernels' model), beside the measured */
			printf("%10s %6s %7s %10s  %s\n", "ms", "%", "calls", "predicted", "kernel, GEMM [m x n x k], copy or transfer");
			for (int j = 0; j < nt; j++) {
				char p[32] = "-";
				if (t[j].pred > 0)
					snprintf(p, sizeof p, "%.3f", t[j].pred);
				printf("%10.3f %6.1f %7ld %10s  %s\n", t[j].ms, span > 0 ? 100 * t[j].ms / span : 0, t[j].n, p, t[j].label);
			}
		} else {
			printf("%10s %6s %7s  %s\n", "ms", "%", "calls", "kernel, GEMM [m x n x k], copy or transfer");
			for (int j = 0; j < nt; j++)
				printf("%10.3f %6.1f %7ld  %s\n", t[j].ms, span > 0 ? 100 * t[j].ms / span : 0, t[j].n, t[j].label);
		}
	}
	free(t);
}

static const char *const kinds[] = {"kernel", "gemm", "copy", "zero", "transfer", "copy stream", "wait", "phase"};

/* one complete event: ts and dur in microseconds */
static void span_event(RtJson *j, const char *name, const char *cat, int tid, double ts, double dur, long step)
{
	rt_json_object(j);
	rt_json_key(j, "name"), rt_json_str(j, name);
	rt_json_key(j, "cat"), rt_json_str(j, cat);
	rt_json_key(j, "ph"), rt_json_str(j, "X");
	rt_json_key(j, "ts"), rt_json_num(j, ts);
	rt_json_key(j, "dur"), rt_json_num(j, dur > 0 ? dur : 0);
	rt_json_key(j, "pid"), rt_json_int(j, 1);
	rt_json_key(j, "tid"), rt_json_int(j, tid);
	rt_json_key(j, "args"), rt_json_object(j);
	rt_json_key(j, "step"), rt_json_int(j, step);
	rt_json_end_object(j);
	rt_json_end_object(j);
}

static void track_name(RtJson *j, int tid, const char *name)
{
	rt_json_object(j);
	rt_json_key(j, "name"), rt_json_str(j, tid < 0 ? "process_name" : "thread_name");
	rt_json_key(j, "ph"), rt_json_str(j, "M");
	rt_json_key(j, "pid"), rt_json_int(j, 1);
	if (tid >= 0)
		rt_json_key(j, "tid"), rt_json_int(j, tid);
	rt_json_key(j, "args"), rt_json_object(j);
	rt_json_key(j, "name"), rt_json_str(j, name);
	rt_json_end_object(j);
	rt_json_end_object(j);
}

static void counter(RtJson *j, double ts, int64_t bytes)
{
	rt_json_object(j);
	rt_json_key(j, "name"), rt_json_str(j, "device bytes in use");
	rt_json_key(j, "ph"), rt_json_str(j, "C");
	rt_json_key(j, "ts"), rt_json_num(j, ts);
	rt_json_key(j, "pid"), rt_json_int(j, 1);
	rt_json_key(j, "args"), rt_json_object(j);
	rt_json_key(j, "bytes"), rt_json_int(j, bytes);
	rt_json_end_object(j);
	rt_json_end_object(j);
}

enum { TRACK_PHASES, TRACK_COMPUTE, TRACK_COPY };

int rt_trace_write(RtCtx *c, const char *path, long from, long to)
{
	c->dev->sync();
	RtJson j = {0};
	double origin = -1;
	for (int i = 0; i < ncalls && origin < 0; i++)
		if (calls[i].step >= from && calls[i].step <= to)
			origin = c->dev->mark_at(calls[i].a);
	rt_json_object(&j);
	rt_json_key(&j, "traceEvents");
	rt_json_array(&j);
	track_name(&j, -1, c->model->model);
	track_name(&j, TRACK_PHASES, "phases");
	track_name(&j, TRACK_COMPUTE, "compute stream");
	track_name(&j, TRACK_COPY, "copy stream");
	int events = 0;
	for (int i = 0; i < ncalls; i++) {
		Call *k = &calls[i];
		if (k->step < from || k->step > to)
			continue;
		double at = 1000 * (c->dev->mark_at(k->a) - origin), span[2];
		switch (k->kind) {
		case RT_CALL_PHASE: {
			/* until the next phase of the step, or its last call's end */
			double end = at;
			for (int e = i + 1; e < ncalls && calls[e].step == k->step; e++) {
				end = 1000 * (c->dev->mark_at(calls[e].b >= 0 ? calls[e].b : calls[e].a) - origin);
				if (calls[e].kind == RT_CALL_PHASE)
					break;
			}
			if (k->label[0])
				span_event(&j, k->label, "phase", TRACK_PHASES, at, end - at, k->step);
			counter(&j, at, k->bytes);
			break;
		}
		case RT_CALL_COPY:
			c->dev->copy_span(k->event, span);
			if (span[0] >= 0)
				span_event(&j, k->label, kinds[k->kind], TRACK_COPY, 1000 * (span[0] - origin), 1000 * (span[1] - span[0]), k->step);
			else /* untimed: where it was queued */
				span_event(&j, k->label, kinds[k->kind], TRACK_COPY, at, 0, k->step);
			break;
		case RT_CALL_WAIT:
			span_event(&j, k->label, kinds[k->kind], TRACK_COMPUTE, at, 0, k->step);
			break;
		default:
			span_event(&j, k->label, kinds[k->kind], TRACK_COMPUTE, at, 1000 * c->dev->mark_ms(k->a, k->b), k->step);
		}
		events++;
	}
	rt_json_end_array(&j);
	rt_json_key(&j, "displayTimeUnit"), rt_json_str(&j, "ms");
	rt_json_key(&j, "otherData"), rt_json_object(&j);
	rt_json_key(&j, "model"), rt_json_str(&j, c->model->model);
	rt_json_key(&j, "device"), rt_json_str(&j, c->dev->name);
	rt_json_key(&j, "first_step"), rt_json_int(&j, from);
	rt_json_key(&j, "last_step"), rt_json_int(&j, to);
	rt_json_key(&j, "arena_bytes"), rt_json_int(&j, c->model->arena);
	rt_json_end_object(&j);
	rt_json_end_object(&j);
	rt_json_raw(&j, "\n");
	rt_write_atomic(path, j.buf, j.len);
	rt_json_free(&j);
	return events;
}

int64_t *rt_trace_bytes(long step, int *n)
{
	int64_t *out = malloc(sizeof *out * (size_t)(ncalls + 1));
	if (!out)
		rt_fail(1, "out of memory for --memplot");
	*n = 0;
	for (int i = 0; i < ncalls; i++)
		if (calls[i].step == step)
			out[(*n)++] = calls[i].bytes;
	return out;
}
