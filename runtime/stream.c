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

/* a counted copy between device memory and the host pool at offset host */
static int64_t pool_copy(RtCtx *c, bool to_device, uint64_t dev, int64_t host, int64_t bytes)
{
	if (to_device) {
		c->n.h2d_bytes += bytes;
		c->n.stream_h2d += bytes;
	} else {
		c->n.d2h_bytes += bytes;
		c->n.stream_d2h += bytes;
	}
	int64_t e = c->dev->copy(to_device, dev, c->pool + host, bytes);
	if (c->record) {
		char label[64];
		snprintf(label, sizeof label, "%s %lld bytes", to_device ? "h2d" : "d2h", (long long)bytes);
		rt_prof_copy(c, label, e);
	}
	return e;
}

void rt_fetch(RtCtx *c, int64_t *table, int64_t k, int64_t u, int64_t lo, int64_t hi, uint64_t slots, int64_t host,
              int64_t bytes)
{
	if (u < lo || u >= hi)
		return;
	int64_t s = u % k;
	if (table[2 * s] == u + 1)
		return;
	table[2 * s] = u + 1;
	table[2 * s + 1] = pool_copy(c, true, slots + (uint64_t)(s * bytes), host + u * bytes, bytes);
}

void rt_wait(RtCtx *c, int64_t *table, int64_t k, int64_t u)
{
	int64_t e = table[2 * (u % k) + 1];
	if (e)
		c->dev->copy_wait(e);
	if (e && c->record) {
		char label[64];
		snprintf(label, sizeof label, "wait for copy %lld", (long long)e);
		rt_prof_mark(c, RT_CALL_WAIT, label);
	}
}

void rt_writeback(RtCtx *c, int64_t *table, int64_t k, int64_t u, uint64_t slots, int64_t host, int64_t bytes)
{
	int64_t s = u % k;
	table[2 * s + 1] = pool_copy(c, false, slots + (uint64_t)(s * bytes), host + u * bytes, bytes);
}

void rt_update(RtCtx *c, int param, int64_t u, uint64_t p, uint64_t g, uint64_t m, uint64_t v, int64_t n)
{
	const RtTensor *t = &c->model->params[param];
	int64_t bytes = n * rt_elem_bytes(t->dtype);
	if (c->capture && c->capture[param])
		rt_d2h(c, (unsigned char *)c->capture[param] + u * bytes, g, bytes);
	if (!c->no_update)
		rt_apply_update(c, t, p, g, m, v, n);
}

void rt_snap_copy(RtCtx *c, int to_device, uint64_t dev, int64_t host, int64_t bytes)
{
	c->no_graph = "snapshots in host memory wait on the host";
	c->snap_event = pool_copy(c, to_device, dev, host, bytes);
}
