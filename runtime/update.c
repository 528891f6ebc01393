/* rt: the optimizer's step after dp_step's gradients are complete: their
 * sums across ranks, the clipping scale, the update of the resident
 * parameters (or this rank's shares of them, then gathered), the deferred
 * steps of the streamed ones, and the buffers' new values. A streamed
 * unit's step runs on the host (host_update.c): dp_step's sweep copies each
 * unit's gradient down as it completes (rt_update, stream.c), and queues
 * its step there unless clipping or ranks defer it to here. Under
 * bf16-mixed a micro-batch's gradients are bf16 and added into f32 sums
 * (rt_fold), from which the f32 master copies are updated, each writing its
 * bf16 compute copy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rt.h"

static void word_double(uint64_t *w, double d) { memcpy(w, &d, sizeof d); }

/* the optimizer's scalars at this step for parameter t: the device's kernel words and the host's */
static void scalars(const RtCtx *c, const RtTensor *t, RtHostStep *s)
{
	s->lr = c->lr;
	s->scale = c->gscale;
	if (!c->model->adam)
		return;
	s->b1 = 0.9;
	s->b2 = 0.999;
	s->eps = 1e-8;
	s->size = c->lr / (1 - pow(0.9, (double)c->step));
	s->rbc2 = 1 / sqrt(1 - pow(0.999, (double)c->step));
	/* decoupled decay on what has 2 or more dims a layer (not biases, gains) */
	bool decays = c->decay > 0 && !t->nodecay && t->rank - (t->stacked ? 1 : 0) >= 2;
	s->keep = decays ? 1 - c->lr * c->decay : 1;
}

/* the gradients of one step of every trained parameter, on the host where they are (bufs: the resident ones'
 * buffers), in parameter order, as clip_scale and --dump-grads read them */
static const void *streamed_grad(RtCtx *c, int i, const char **dtype)
{
	const RtTensor *t = &c->model->params[i];
	if (c->sums) {
		*dtype = t->dtype;
		return c->sums + c->sums_at[i];
	}
	*dtype = t->cdtype;
	return c->pool + t->hgrad;
}

/* --clip-grad: the gradients to the host (bufs), their global L2 norm in double, and the scale
 * min(1, clip / (norm + 1e-6)) of torch.nn.utils.clip_grad_norm_ */
static double clip_scale(RtCtx *c, double clip, void **bufs)
{
	c->dev->sync();
	rt_host_drain();
	double sum = 0;
	for (int i = 0; i < c->model->nparams; i++) {
		RtTensor *t = &c->model->params[i];
		if (t->buffer)
			continue;
		/* a streamed parameter's gradient is on the host already */
		const char *dtype = t->dtype;
		const void *g = t->streamed ? streamed_grad(c, i, &dtype) : bufs[i];
		if (!t->streamed)
			rt_d2h(c, bufs[i], c->base + (uint64_t)t->grad, t->bytes);
		for (int64_t e = 0; e < t->numel; e++) {
			double x = rt_get(g, dtype, e);
			sum += x * x;
		}
	}
	/* across ranks the gradients are sums: the norm of their mean, and the mean in the update */
	double scale = clip / (sqrt(sum) / rt_nranks + 1e-6);
	return (scale < 1 ? scale : 1) / rt_nranks;
}

void rt_streamed_grad(RtCtx *c, int i, void *dst)
{
	const RtTensor *t = &c->model->params[i];
	const char *dtype;
	const void *g = streamed_grad(c, i, &dtype);
	for (int64_t e = 0; e < t->numel; e++)
		rt_set(dst, t->dtype, e, 0.0 + rt_get(g, dtype, e)); /* as the update takes it: a fold's 0 + g */
}

/* data parallelism: before the update, every gradient summed across the ranks (the update divides
 * by the ranks): the resident ones' sums started as each was complete (rt_allreduce), waited for
 * here, or under bf16-mixed their f32 sums, here; the streamed units' on the host, where they wait */
static void sum_gradients(RtCtx *c)
{
	const RtModel *m = c->model;
	for (int i = 0; m->mixed && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!t->streamed && !t->buffer) {
			c->dev->collective(RT_SUM, c->base + (uint64_t)t->grad, t->numel, t->dtype, t->name);
			c->n.allreduce_bytes += t->bytes;
		}
	}
	c->dev->collective_wait();
	if (!m->stream_numel)
		return;
	c->dev->sync();
	rt_host_drain();
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!t->streamed || t->buffer)
			continue;
		const char *dtype;
		void *g = (void *)streamed_grad(c, i, &dtype);
		char what[160];
		snprintf(what, sizeof what, "the sum of %s's gradient (streamed, on the host)", t->name);
		rt_dist_sum(g, t->numel, dtype, what);
		c->n.allreduce_bytes += t->numel * rt_elem_bytes(dtype);
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
		uint64_t copy = t->copy >= 0 ? c->base + (uint64_t)(t->copy + lo * 2) : 0;
		if (n > 0)
			rt_apply_update(c, t, c->base + (uint64_t)(t->offset + at), c->base + (uint64_t)(t->grad + at),
			                c->base + (uint64_t)t->opt_m, c->base + (uint64_t)t->opt_v, copy, n);
		c->dev->collective(RT_GATHER, c->base + (uint64_t)t->offset, t->numel, t->dtype, t->name);
		c->n.allgather_bytes += t->bytes;
	}
	c->dev->collective_wait();
	/* every rank's shares of the master copies are here: their compute copies whole */
	for (int i = 0; m->mixed && i < m->nparams; i++)
		if (!m->params[i].streamed && !m->params[i].buffer)
			rt_refresh(c, &m->params[i]);
}

void rt_apply_update(RtCtx *c, const RtTensor *t, uint64_t p, uint64_t g, uint64_t m, uint64_t v, uint64_t copy,
                     int64_t n)
{
	int r = rt_real_index(t->dtype);
	RtHostStep s;
	scalars(c, t, &s);
	uint64_t w[12] = {p, g};
	if (c->model->adam) {
		w[2] = m;
		w[3] = v;
		double d[7] = {s.size, s.b1, s.b2, s.eps, s.rbc2, s.keep, s.scale};
		for (int i = 0; i < 7; i++)
			word_double(&w[4 + i], d[i]);
		w[11] = copy;
		rt_launch(c, c->model->k_adam[r], n, c->model->mixed ? 12 : 11, w);
	} else {
		word_double(&w[2], s.lr);
		word_double(&w[3], s.scale);
		w[4] = copy;
		rt_launch(c, c->model->k_sgd[r], n, c->model->mixed ? 5 : 4, w);
	}
}

void rt_host_unit(RtCtx *c, int param, int64_t u, bool add, bool step, int64_t event)
{
	const RtModel *m = c->model;
	const RtTensor *t = &m->params[param];
	int64_t units = t->dim[0], n = t->numel / units, esz = rt_elem_bytes(t->dtype), gsz = rt_elem_bytes(t->cdtype);
	RtHostStep s;
	memset(&s, 0, sizeof s);
	scalars(c, t, &s);
	s.dt = rt_real_index(t->dtype);
	s.mixed = m->mixed;
	s.add = add;
	s.step = step;
	s.first = c->first;
	s.g = c->pool + t->hgrad + u * n * gsz;
	s.sum = c->sums ? c->sums + c->sums_at[param] + u * n * esz : NULL;
	s.p = c->pool + t->host + u * n * esz;
	if (m->adam) {
		s.m = c->pool + t->host_m + u * n * esz;
		s.v = c->pool + t->host_v + u * n * esz;
	}
	if (m->mixed)
		s.copy = c->pool + t->host_copy + u * n * 2;
	rt_host_post(param, u, &s, n, event);
}

void rt_refresh(RtCtx *c, const RtTensor *t)
{
	if (!c->model->mixed || t->buffer)
		return;
	if (t->streamed) {
		/* written while no job runs: at start, or between the steps of a gradient check */
		rt_host_drain();
		for (int64_t e = 0; e < t->numel; e++)
			((uint16_t *)(c->pool + t->host_copy))[e] = rt_f32_to_bf16(((const float *)(c->pool + t->host))[e]);
		return;
	}
	uint64_t w[2] = {c->base + (uint64_t)t->copy, c->base + (uint64_t)t->offset};
	rt_launch(c, c->model->k_refresh, t->numel, 2, w);
}

void rt_fold(RtCtx *c, bool first)
{
	const RtModel *m = c->model;
	for (int i = 0; m->mixed && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (t->streamed || t->buffer)
			continue;
		uint64_t w[3] = {c->base + (uint64_t)t->grad, c->base + (uint64_t)t->mgrad};
		word_double(&w[2], first ? 1 : 0);
		rt_launch(c, m->k_fold, t->numel, 3, w);
	}
}

void rt_optimizer_step(RtCtx *c, const RtOpts *o, void **gbuf)
{
	const RtModel *m = c->model;
	if (rt_distributed)
		sum_gradients(c);
	if (o->clip_set)
		c->gscale = clip_scale(c, o->clip_grad, gbuf);
	if (c->record)
		rt_prof_mark(c, RT_CALL_PHASE, "update");
	/* the resident parameters' update (sharded: this rank's shares, then gathered); dp_step's
	 * sweep queued the streamed ones' steps, unless they were deferred to here */
	for (int i = 0; m->ranks == 1 && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!t->streamed && !t->buffer)
			rt_apply_update(c, t, c->base + (uint64_t)t->offset, c->base + (uint64_t)t->grad,
			                c->base + (uint64_t)t->opt_m, c->base + (uint64_t)t->opt_v,
			                t->copy >= 0 ? c->base + (uint64_t)t->copy : 0, t->numel);
	}
	if (m->ranks > 1)
		update_shares(c);
	/* the deferred steps, first layer first: the next step's forward fetches it first */
	for (int i = 0; c->deferred && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		for (int64_t u = 0; t->streamed && !t->buffer && u < t->dim[0]; u++)
			rt_host_unit(c, i, u, false, true, 0);
	}
	/* the buffers' updates, in order on the compute stream: after everything that read them;
	 * across ranks, rank 0's (batch statistics differ by rank, as under DDP) */
	for (int i = 0; i < m->nupdates; i++) {
		const RtTensor *t = &m->params[m->updates[i].param];
		c->dev->d2d(c->base + (uint64_t)t->offset, c->base + (uint64_t)m->updates[i].offset, t->bytes);
		if (rt_distributed)
			c->dev->collective(RT_BCAST, c->base + (uint64_t)t->offset, t->numel, t->dtype, t->name);
	}
	if (rt_distributed && m->nupdates)
		c->dev->collective_wait();
}
