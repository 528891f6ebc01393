/* rt: tensor streaming, the calls generated code makes for dpc's transfer
 * ops (dprt.h). The copies go on the device's copy stream; the slot tables
 * say what each device slot holds, so a unit already there is not fetched
 * again. Each unit's gradient goes down to the host, whose optimizer step
 * (host_update.c) updates the unit there. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "rt.h"

void rt_stream_reset(RtCtx *c, int64_t *table, int64_t n)
{
	c->no_graph = "tensor streaming's copies wait on the host";
	memset(table, 0, sizeof *table * (size_t)n);
	for (int i = 0; i < c->model->nparams; i++)
		c->sent[i] = INT64_MAX;
}

/* a counted copy between device memory and pinned host memory */
int64_t rt_host_copy(RtCtx *c, bool to_device, uint64_t dev, unsigned char *host, int64_t bytes)
{
	if (to_device) {
		c->n.h2d_bytes += bytes;
		c->n.stream_h2d += bytes;
	} else {
		c->n.d2h_bytes += bytes;
		c->n.stream_d2h += bytes;
	}
	int64_t e = c->dev->copy(to_device, dev, host, bytes);
	if (c->record) {
		char label[64];
		snprintf(label, sizeof label, "%s %lld bytes", to_device ? "h2d" : "d2h", (long long)bytes);
		rt_prof_copy(c, label, e);
	}
	return e;
}

/* the same, at offset host of the host pool */
int64_t rt_pool_copy(RtCtx *c, bool to_device, uint64_t dev, int64_t host, int64_t bytes)
{
	return rt_host_copy(c, to_device, dev, c->pool + host, bytes);
}

/* device work queued later waits for copy e (0: none), marked in --trace */
static void wait_copy(RtCtx *c, int64_t e)
{
	if (!e)
		return;
	c->dev->copy_wait(e);
	if (c->record) {
		char label[64];
		snprintf(label, sizeof label, "wait for copy %lld", (long long)e);
		rt_prof_mark(c, RT_CALL_WAIT, label);
	}
}

void rt_act_copy(RtCtx *c, int64_t *event, int to_device, uint64_t dev, int64_t host, int64_t bytes)
{
	*event = rt_pool_copy(c, to_device, dev, host, bytes);
}

void rt_act_wait(RtCtx *c, int64_t *event)
{
	wait_copy(c, *event);
	*event = 0;
}

void rt_fetch(RtCtx *c, int64_t *table, int64_t k, int64_t u, int64_t lo, int64_t hi, uint64_t slots, int64_t host,
              int64_t bytes, int param)
{
	/* nothing reads a unit once its gradient is down (dpc's stream pass counts the same) */
	if (u < lo || u >= hi || u >= c->sent[param])
		return;
	int64_t s = u % k;
	if (table[2 * s] == u + 1)
		return;
	/* the host's step of the unit, queued in an earlier call, writes what this copy reads */
	rt_host_ready(param, u);
	table[2 * s] = u + 1;
	table[2 * s + 1] = rt_pool_copy(c, true, slots + (uint64_t)(s * bytes), host + u * bytes, bytes);
}

void rt_wait(RtCtx *c, int64_t *table, int64_t k, int64_t u)
{
	wait_copy(c, table[2 * (u % k) + 1]);
}

/* the unit's gradient into a host buffer in the parameter's dtype (--gradcheck) */
static void capture(RtCtx *c, const RtTensor *t, int64_t u, uint64_t g, int64_t bytes)
{
	int64_t n = bytes / rt_elem_bytes(t->cdtype);
	unsigned char *dst = (unsigned char *)c->capture[t - c->model->params] + u * n * rt_elem_bytes(t->dtype);
	if (!strcmp(t->cdtype, t->dtype)) {
		rt_d2h(c, dst, g, bytes);
		return;
	}
	void *tmp = rt_host_alloc(bytes, "a gradient");
	rt_d2h(c, tmp, g, bytes);
	for (int64_t e = 0; e < n; e++)
		rt_set(dst, t->dtype, e, 0.0 + rt_get(tmp, t->cdtype, e));
	free(tmp);
}

void rt_update(RtCtx *c, int param, int64_t u, uint64_t g, int64_t host, int64_t bytes)
{
	const RtTensor *t = &c->model->params[param];
	if (c->capture && c->capture[param])
		capture(c, t, u, g, bytes);
	if (c->no_update)
		return;
	/* the host's last job on the unit read what this copy overwrites */
	rt_host_ready(param, u);
	int64_t e = rt_pool_copy(c, false, g, host + u * bytes, bytes);
	c->grad_event[param] = e;
	c->sent[param] = u < c->sent[param] ? u : c->sent[param];
	bool add = c->sums != NULL, step = c->sweep_step;
	if (add || step)
		rt_host_unit(c, param, u, add, step, e);
}

void rt_grad_in(RtCtx *c, int param, int64_t u, uint64_t g, int64_t bytes)
{
	(void)u;
	/* the unit before this one may still be on its way down from g */
	if (c->grad_event[param]) {
		c->dev->copy_wait(c->grad_event[param]);
		c->grad_event[param] = 0;
	}
	if (c->record)
		rt_prof_begin(c, RT_CALL_ZERO, "zero");
	c->dev->zero(g, bytes);
	if (c->record)
		rt_prof_end(c);
}

void rt_snap_copy(RtCtx *c, int to_device, uint64_t dev, int64_t host, int64_t bytes)
{
	c->no_graph = "snapshots in host memory wait on the host";
	c->snap_event = rt_pool_copy(c, to_device, dev, host, bytes);
}
