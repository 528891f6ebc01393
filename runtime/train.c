/* train: the training loop around the generated dp_step, steps queued one ahead of the host. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"

/* ---- --graph ---- */

/* to += a - b, for the counters a step moves */
static void add_counts(RtCounters *to, const RtCounters *a, const RtCounters *b)
{
	to->h2d_bytes += a->h2d_bytes - b->h2d_bytes;
	to->d2h_bytes += a->d2h_bytes - b->d2h_bytes;
	to->stream_h2d += a->stream_h2d - b->stream_h2d;
	to->stream_d2h += a->stream_d2h - b->stream_d2h;
	for (int i = 0; i < 2; i++)
		to->steps[i] += a->steps[i] - b->steps[i];
	to->launches += a->launches - b->launches;
	to->gemms += a->gemms - b->gemms;
	to->convs += a->convs - b->convs;
	to->attentions += a->attentions - b->attentions;
	to->copies += a->copies - b->copies;
	to->recomputed_flops += a->recomputed_flops - b->recomputed_flops;
}

/* dp_step; with --graph, from the second step on (the first shows what
 * the step calls), the graph captured from it, run again each step, the
 * counters advancing by what the captured step counted. With --accum K,
 * this is the step's last micro-batch, which adds to the gradients the
 * earlier ones (run call by call, the first zeroing them) left. */
static void run_step(Session *S, long s)
{
	RtCtx *c = &S->ctx;
	const RtOpts *o = &S->o;
	if (o->graph && s == 1 && c->no_graph && !o->quiet)
		printf("%s: --graph: each step runs call by call, as %s\n", c->model->model, c->no_graph);
	if (!o->graph || s == 0 || c->record || c->no_graph || c->capture) {
		dp_step(c);
		return;
	}
	if (!S->graph_ready) {
		S->graph_before = c->n;
		c->capturing = true;
		c->dev->graph_begin();
		dp_step(c);
		c->dev->graph_end();
		c->capturing = false;
		S->graph_after = c->n;
		S->graph_ready = true;
	} else {
		add_counts(&c->n, &S->graph_after, &S->graph_before);
	}
	c->dev->graph_launch();
	S->r.graph_steps++;
}


/* Step s (from 0) queued in fence slot `slot`, its inputs' rows from data: its micro-batches, the
 * optimizer's step, the loss and reports' copies into the slot, the fence; then, at their steps, the
 * validation loss and --save-state. *micro gets the losses of the micro-batches but the last (--accum),
 * *moved the bytes the step moved between host and device. The loop's steps and the API's are this. */
void rt_queue_step(Session *S, RtData *data, long s, int slot, double *micro, int64_t *moved)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	RtData *val = S->val;
	void **host = S->host, **mom = S->mom, **gbuf = S->gbuf;
	c->dev->fence_wait(slot);
	int64_t before = c->n.h2d_bytes + c->n.d2h_bytes;
	c->step = s + 1;
	rt_dist_step = s + 1;
	/* before dp_step: streamed units update inside it */
	c->lr = rt_lr_at(o, s);
	c->record = (o->profile && s == o->steps - 1) ||
	            ((o->trace || o->memplot) && c->step >= o->trace_from && c->step <= o->trace_to);
	if (c->record) {
		c->dev->copy_timing(true);
		rt_prof_mark(c, RT_CALL_PHASE, "batch");
	}
	/* --accum K: K micro-batches, each a batch of its own and a dropout key of its own; the
	 * gradients summed in place (rt_zero leaves them while accumulating; under bf16-mixed each
	 * micro-batch's bf16 gradients are added into the f32 sums, rt_fold), the streamed ones' on
	 * the host; the losses but the last read here, the last as a step's */
	for (long k = 0; k + 1 < o->accum; k++) {
		c->accumulating = k > 0 && !m->mixed;
		c->first = k == 0;
		c->draw = (uint64_t)(s * o->accum + k + 1);
		rt_upload_batch(c, data, s * o->accum + k, slot, true);
		dp_step(c);
		rt_fold(c, k == 0);
		c->dev->sync(); /* the staging buffer again, the loss read */
		*micro += rt_read_loss(c);
	}
	c->accumulating = o->accum > 1 && !m->mixed;
	c->first = o->accum == 1;
	/* streamed units: the last micro-batch's sweep applies their steps, unless the norm or the
	 * ranks' sums must come first */
	c->sweep_step = !c->deferred;
	c->draw = (uint64_t)((s + 1) * o->accum);
	rt_upload_batch(c, data, s * o->accum + o->accum - 1, slot, true);
	/* --dump-grads: the gradients of step 1 */
	bool dump = s == S->start && o->dump_grads;
	c->reducing = true; /* the gradients are complete at the end of this micro-batch */
	run_step(S, s);
	rt_fold(c, o->accum == 1);
	c->accumulating = c->sweep_step = c->reducing = false;
	if (c->record)
		rt_prof_begin(c, RT_CALL_TRANSFER, "d2h loss");
	c->dev->d2h_async(S->loss_slots + 8 * S->nres * slot, c->base + (uint64_t)m->loss, rt_elem_bytes(m->loss_dtype));
	if (c->record)
		rt_prof_end(c);
	c->n.d2h_bytes += rt_elem_bytes(m->loss_dtype);
	for (int i = 0; i < m->nreports; i++) {
		c->dev->d2h_async(S->loss_slots + 8 * (S->nres * slot + 1 + i), c->base + (uint64_t)m->reports[i].offset,
		                  rt_elem_bytes(m->reports[i].dtype));
		c->n.d2h_bytes += rt_elem_bytes(m->reports[i].dtype);
	}
	if (dump) {
		double t = rt_now();
		void *g[RT_MAX_PARAMS] = {0};
		for (int i = 0; i < m->nparams; i++)
			g[i] = rt_host_alloc(m->params[i].bytes, "gradients");
		rt_download_params(c, g, true);
		for (int i = 0; i < m->nparams; i++)
			if (m->params[i].streamed && !m->params[i].buffer)
				rt_streamed_grad(c, i, g[i]);
		rt_save_safetensors(o->dump_grads, m, g, true);
		for (int i = 0; i < m->nparams; i++)
			free(g[i]);
		r->save_s += rt_now() - t;
	}
	rt_optimizer_step(c, o, gbuf);
	if (c->record) {
		rt_prof_mark(c, RT_CALL_PHASE, "");
		c->dev->copy_timing(false);
	}
	c->record = false;
	*moved = c->n.h2d_bytes + c->n.d2h_bytes - before;
	c->dev->fence(slot);
	/* the validation loss after step s + 1: the training step's input slots are free once it is done */
	if (S->validate && (((s + 1) % o->eval_every == 0) || s + 1 == o->steps)) {
		double t = rt_now(), rep[16];
		c->dev->sync();
		r->val = rt_mean_loss(c, val, rt_batches(m, val), rep);
		r->val_step = s + 1;
		double dt = rt_now() - t;
		r->val_s += dt, r->save_s += dt;
	}
	/* --save-state after step s + 1, before step s + 2 is queued; not a state whose loss is not finite */
	if (S->saves_state && ((o->save_every && (s + 1) % o->save_every == 0) || s + 1 == o->steps)) {
		double t = rt_now();
		c->dev->sync();
		/* across ranks, any rank's loss not finite: none saves */
		double bad = !isfinite(rt_get(S->loss_slots + 8 * S->nres * slot, m->loss_dtype, 0));
		if (rt_distributed)
			rt_dist_sum(&bad, 1, "f64", "the check that every rank's loss is finite before the state is saved");
		if (!bad) {
			int64_t d2h = c->n.d2h_bytes;
			rt_download_params(c, host, false);
			rt_download_moments(c, mom);
			if (o->save_state)
				rt_save_state(o->save_state, m, o, host, mom, s + 1);
			r->extra_d2h += c->n.d2h_bytes - d2h;
		}
		r->save_s += rt_now() - t;
	}
}

/* the progress line and --log-json's file, before the first step; closed after the last */
void rt_progress_open(Session *S)
{
	Progress *pg = &S->pg;
	const RtModel *m = &S->model;
	/* under mpirun each rank's output is a terminal of Open MPI's, whatever the user's is: lines */
	*pg = (Progress){.tty = isatty(STDOUT_FILENO) && !rt_distributed};
	/* a host program asks for the steps one at a time: with no --steps there is no last one to count
	 * down to, and no last line to end a line redrawn in place */
	if (S->api && !S->o.steps_set)
		pg->open_ended = true, pg->tty = false;
	for (int k = 0; k < m->ninputs && !pg->tokens; k++)
		if (m->inputs[k].ids)
			pg->tokens = m->inputs[k].numel;
	if (S->o.log_json && !(pg->log = fopen(S->o.log_json, "w")))
		rt_fail(1, "cannot write %s: %s", S->o.log_json, strerror(errno));
	S->pg_open = true;
}

void rt_progress_close(Session *S)
{
	if (!S->pg_open)
		return;
	S->pg_open = false;
	FILE *log = S->pg.log;
	rt_json_free(&S->pg.json);
	S->pg.log = NULL;
	if (log && fclose(log))
		rt_fail(1, "cannot write %s: %s", S->o.log_json, strerror(errno));
}

/* Step `done` (from 1), whose loss and reports came down into fence slot `slot`, is complete: the run's
 * last loss (micro: the step's other micro-batches' losses) and reports, across ranks their means; a loss
 * not finite ends the run */
void rt_step_done(Session *S, long done, int slot, double micro)
{
	const RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	r->last = (rt_get(S->loss_slots + 8 * S->nres * slot, m->loss_dtype, 0) + micro) / (double)o->accum;
	for (int i = 0; i < m->nreports; i++)
		r->report[i] = rt_get(S->loss_slots + 8 * (S->nres * slot + 1 + i), m->reports[i].dtype, 0);
	if (rt_distributed) {
		/* the global batch's loss and reports: the ranks' means */
		double x[17] = {r->last};
		for (int i = 0; i < m->nreports; i++)
			x[1 + i] = r->report[i];
		rt_dist_sum(x, 1 + m->nreports, "f64", "the mean of the ranks' losses");
		r->last = x[0] / rt_nranks;
		for (int i = 0; i < m->nreports; i++)
			r->report[i] = x[1 + i] / rt_nranks;
	}
	if (done == S->start + 1)
		r->first = r->last;
	r->steps = done - S->start;
	if (!isfinite(r->last)) {
		c->dev->sync();
		r->train_s = rt_now() - S->t0 - r->save_s;
		if (o->summary)
			rt_write_summary(c, o, r);
		rt_fail(1, "the loss is not finite at step %ld (%g); try a smaller --lr", done, r->last);
	}
}

/* the training loop, then its reports and saves; the exit status */
int rt_train(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	RtData *data = S->data;
	double t0 = S->t0 = rt_now();
	r->setup_s = t0 - S->t_start;
	/* The progress line's ms/step: the training time (saves left out)
	 * between the completion of the last step it reports and that of the
	 * previous line's. The CPU device runs each step as it is queued, so
	 * its step s is complete then; on an asynchronous device, once its
	 * fence has been waited for. */
	bool sync_dev = c->dev == &rt_cpu_device;
	double t_done[RT_INFLIGHT] = {0};
	double micro[RT_INFLIGHT] = {0}; /* --accum: the step's micro-batch losses but its last */
	int64_t moved[RT_INFLIGHT] = {0}; /* the bytes each step in flight moved between host and device */
	rt_progress_open(S);
	/* Step s is queued before step s - 1's loss is read: the device never
	 * waits for the host between steps. */
	for (long s = S->start; s <= o->steps; s++) {
		int slot = (int)(s % RT_INFLIGHT);
		if (s < o->steps) {
			rt_queue_step(S, data, s, slot, &micro[slot], &moved[slot]);
			if (s == S->start) {
				c->dev->sync();
				r->first_s = rt_now() - t0 - r->save_s;
			}
			if (sync_dev)
				t_done[slot] = rt_now() - t0 - r->save_s;
		}
		if (s == S->start)
			continue;
		/* step s - 1 is done: its loss */
		int prev = (int)((s - 1) % RT_INFLIGHT);
		c->dev->fence_wait(prev);
		if (!sync_dev)
			t_done[prev] = rt_now() - t0 - r->save_s;
		rt_step_done(S, s, prev, micro[prev]);
		micro[prev] = 0;
		rt_progress(&S->pg, o, m, r, s, t_done[prev], moved[prev]);
	}
	rt_progress_close(S);
	rt_finish(S);
	return 0;
}

