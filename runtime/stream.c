/* rt: tensor streaming, the calls generated code makes for dpc's transfer
 * ops (dprt.h). The copies go on the device's copy stream; the slot tables
 * say what each device slot holds, so a unit already there is not fetched
 * again. */
#include <stdio.h>
#include <string.h>

#include "rt.h"

void rt_stream_reset(RtCtx *c, int64_t *table, int64_t n)
{
	c->no_graph = "tensor streaming's copies wait on the host";
	memset(table, 0, sizeof *table * (size_t)n);
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
              int64_t bytes, int opt)
{
	if (u < lo || u >= hi || (opt && c->defer))
		return;
	int64_t s = u % k;
	if (table[2 * s] == u + 1)
		return;
	table[2 * s] = u + 1;
	table[2 * s + 1] = rt_pool_copy(c, true, slots + (uint64_t)(s * bytes), host + u * bytes, bytes);
}

void rt_wait(RtCtx *c, int64_t *table, int64_t k, int64_t u)
{
	wait_copy(c, table[2 * (u % k) + 1]);
}

void rt_writeback(RtCtx *c, int64_t *table, int64_t k, int64_t u, uint64_t slots, int64_t host, int64_t bytes)
{
	/* every write-back follows an update: a deferred one changed nothing */
	if (c->defer)
		return;
	int64_t s = u % k;
	table[2 * s + 1] = rt_pool_copy(c, false, slots + (uint64_t)(s * bytes), host + u * bytes, bytes);
}

void rt_grad_in(RtCtx *c, int param, int64_t u, uint64_t g, int64_t bytes)
{
	/* the unit before this one may still be on its way down from g */
	if (c->grad_event[param]) {
		c->dev->copy_wait(c->grad_event[param]);
		c->grad_event[param] = 0;
	}
	if (c->grads_in) {
		c->dev->copy_wait(rt_host_copy(c, true, g, c->grads + c->grads_at[param] + u * bytes, bytes));
		return;
	}
	/* the step's first micro-batch: rt_zero zeroes (it is not accumulating) */
	rt_zero(c, g, bytes);
}

void rt_snap_copy(RtCtx *c, int to_device, uint64_t dev, int64_t host, int64_t bytes)
{
	c->no_graph = "snapshots in host memory wait on the host";
	c->snap_event = rt_pool_copy(c, to_device, dev, host, bytes);
}
