/* rt: the optimizer's step after dp_step's gradients are complete: their
 * sums across ranks, the clipping scale, the update of the resident
 * parameters (or this rank's shares of them, then gathered), the deferred
 * update of the streamed ones, and the buffers' new values. dp_step updates
 * streamed units itself as their gradients complete (stream.c), with
 * rt_apply_update, unless clipping or accumulation deferred them. */
#include <math.h>
#include <string.h>

#include "rt.h"

static void word_double(uint64_t *w, double d) { memcpy(w, &d, sizeof d); }

/* --clip-grad: the gradients to the host (bufs), their global L2 norm in double, and the scale
 * min(1, clip / (norm + 1e-6)) of torch.nn.utils.clip_grad_norm_ */
static double clip_scale(RtCtx *c, double clip, void **bufs)
{
	c->dev->sync();
	double sum = 0;
	for (int i = 0; i < c->model->nparams; i++) {
		RtTensor *t = &c->model->params[i];
		if (t->buffer)
			continue;
		/* a streamed parameter's gradient is on the host already, its update deferred */
		const void *g = t->streamed ? c->grads + c->grads_at[i] : bufs[i];
		if (!t->streamed)
			rt_d2h(c, bufs[i], c->base + (uint64_t)t->grad, t->bytes);
		for (int64_t e = 0; e < t->numel; e++) {
			double x = rt_get(g, t->dtype, e);
			sum += x * x;
		}
	}
	/* across ranks the gradients are sums: the norm of their mean, and the mean in the update */
	double scale = clip / (sqrt(sum) / rt_nranks + 1e-6);
	return (scale < 1 ? scale : 1) / rt_nranks;
}

/* data parallelism: before the update, every gradient summed across the ranks (the update divides
 * by the ranks): the resident ones' sums started as each was complete (rt_allreduce), waited for
 * here; streamed units' are summed in the reverse sweep (rt_update), or, deferred and clipped, here,
 * in the host memory they wait in */
static void sum_gradients(RtCtx *c, bool deferred_clip)
{
	const RtModel *m = c->model;
	c->dev->collective_wait();
	if (!deferred_clip)
		return;
	c->dev->sync();
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (t->streamed && !t->buffer) {
			rt_dist_sum(c->grads + c->grads_at[i], t->numel, t->dtype);
			c->n.allreduce_bytes += t->bytes;
		}
	}
}

/* --shard-optimizer: the share of each resident parameter this rank updates, with its share of
 * Adam's moments; then every rank's share of the parameter to every rank */
static void update_shares(RtCtx *c)
{
	const RtModel *m = c->model;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (t->streamed || t->buffer)
			continue;
		int64_t n, lo = rt_share(t, rt_rank, rt_nranks, &n), at = lo * rt_elem_bytes(t->dtype);
		if (n > 0)
			rt_apply_update(c, t, c->base + (uint64_t)(t->offset + at), c->base + (uint64_t)(t->grad + at),
			                c->base + (uint64_t)t->opt_m, c->base + (uint64_t)t->opt_v, n);
		c->dev->collective(RT_GATHER, c->base + (uint64_t)t->offset, t->numel, t->dtype);
		c->n.allgather_bytes += t->bytes;
	}
	c->dev->collective_wait();
}

void rt_apply_update(RtCtx *c, const RtTensor *t, uint64_t p, uint64_t g, uint64_t m, uint64_t v, int64_t n)
{
	int r = rt_real_index(t->dtype);
	uint64_t w[12] = {p, g};
	if (c->model->adam) {
		w[2] = m;
		w[3] = v;
		word_double(&w[4], c->lr);
		word_double(&w[5], 0.9);
		word_double(&w[6], 0.999);
		word_double(&w[7], 1e-8);
		word_double(&w[8], 1 - pow(0.9, (double)c->step));
		word_double(&w[9], 1 - pow(0.999, (double)c->step));
		/* decoupled decay on what has 2 or more dims a layer (not biases, gains) */
		bool decays = c->decay > 0 && !t->nodecay && t->rank - (t->stacked ? 1 : 0) >= 2;
		word_double(&w[10], decays ? 1 - c->lr * c->decay : 1);
		word_double(&w[11], c->gscale);
		rt_launch(c, c->model->k_adam[r], n, 12, w);
	} else {
		word_double(&w[2], c->lr);
		word_double(&w[3], c->gscale);
		rt_launch(c, c->model->k_sgd[r], n, 4, w);
	}
}

/* the optimizer's step of unit u of a streamed parameter, as dp_step's sweep completes its gradient
 * (dprt.h): captured for --dump-grads, deferred to the host for clipping or accumulation, or summed
 * across the ranks and applied */
void rt_update(RtCtx *c, int param, int64_t u, uint64_t p, uint64_t g, uint64_t m, uint64_t v, int64_t n)
{
	const RtTensor *t = &c->model->params[param];
	int64_t bytes = n * rt_elem_bytes(t->dtype);
	if (c->capture && c->capture[param])
		rt_d2h(c, (unsigned char *)c->capture[param] + u * bytes, g, bytes);
	if (c->no_update)
		return;
	if (c->defer) {
		/* the unit's gradient (its micro-batches' sum so far) waits on the host */
		c->grad_event[param] = rt_host_copy(c, false, g, c->grads + c->grads_at[param] + u * bytes, bytes);
		return;
	}
	if (rt_distributed) {
		/* summed across the ranks before its update, which divides by them */
		c->dev->collective(RT_SUM, g, n, t->dtype);
		c->dev->collective_wait();
		c->n.allreduce_bytes += bytes;
	}
	rt_apply_update(c, t, p, g, m, v, n);
}

void rt_update_streamed(RtCtx *c)
{
	const RtModel *m = c->model;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!t->streamed || t->buffer)
			continue;
		int64_t units = t->dim[0], bytes = t->bytes / units, n = t->numel / units;
		for (int64_t u = 0; u < units; u++) {
			/* slot u mod k, as the sweep would; the copies run in order on the copy stream, each
			 * behind the compute queued before it, so a slot is free when its next copy starts */
			uint64_t at = (uint64_t)((u % m->nslots) * bytes), base = c->base;
			rt_pool_copy(c, true, base + (uint64_t)t->slots + at, t->host + u * bytes, bytes);
			if (m->adam) {
				rt_pool_copy(c, true, base + (uint64_t)t->slots_m + at, t->host_m + u * bytes, bytes);
				rt_pool_copy(c, true, base + (uint64_t)t->slots_v + at, t->host_v + u * bytes, bytes);
			}
			c->dev->copy_wait(rt_host_copy(c, true, base + (uint64_t)t->grad, c->grads + c->grads_at[i] + u * bytes, bytes));
			rt_apply_update(c, t, base + (uint64_t)t->slots + at, base + (uint64_t)t->grad,
			                m->adam ? base + (uint64_t)t->slots_m + at : 0, m->adam ? base + (uint64_t)t->slots_v + at : 0, n);
			rt_pool_copy(c, false, base + (uint64_t)t->slots + at, t->host + u * bytes, bytes);
			if (m->adam) {
				rt_pool_copy(c, false, base + (uint64_t)t->slots_m + at, t->host_m + u * bytes, bytes);
				rt_pool_copy(c, false, base + (uint64_t)t->slots_v + at, t->host_v + u * bytes, bytes);
			}
		}
	}
}

void rt_optimizer_step(RtCtx *c, const RtOpts *o, bool deferred, void **gbuf)
{
	const RtModel *m = c->model;
	if (rt_distributed)
		sum_gradients(c, deferred && o->clip_set);
	if (o->clip_set)
		c->gscale = clip_scale(c, o->clip_grad, gbuf);
	if (c->record)
		rt_prof_mark(c, RT_CALL_PHASE, "update");
	/* the resident parameters' update (sharded: this rank's shares, then gathered); dp_step
	 * updated the streamed ones unit by unit, unless clipping deferred them to a pass of
	 * their own */
	for (int i = 0; m->ranks == 1 && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!t->streamed && !t->buffer)
			rt_apply_update(c, t, c->base + (uint64_t)t->offset, c->base + (uint64_t)t->grad,
			                c->base + (uint64_t)t->opt_m, c->base + (uint64_t)t->opt_v, t->numel);
	}
	if (m->ranks > 1)
		update_shares(c);
	if (deferred && o->clip_set)
		rt_update_streamed(c);
	/* the buffers' updates, in order on the compute stream: after everything that read them;
	 * across ranks, rank 0's (batch statistics differ by rank, as under DDP) */
	for (int i = 0; i < m->nupdates; i++) {
		const RtTensor *t = &m->params[m->updates[i].param];
		c->dev->d2d(c->base + (uint64_t)t->offset, c->base + (uint64_t)m->updates[i].offset, t->bytes);
		if (rt_distributed)
			c->dev->collective(RT_BCAST, c->base + (uint64_t)t->offset, t->numel, t->dtype);
	}
	if (rt_distributed && m->nupdates)
		c->dev->collective_wait();
}
