/* report: what a session tells the user: the first lines, the progress line and its JSON, the
 * summary, the memory picture, the last line, --eval's line. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"
#include "../common/svg.h"

double rt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *rt_mib(int64_t b)
{
	static char buf[16][32];
	static int k;
	char *s = buf[k++ & 15];
	if (b < 1024)
		snprintf(s, 32, "%lld B", (long long)b);
	else if (b < 1024 * 1024)
		snprintf(s, 32, "%.1f KiB", (double)b / 1024);
	else
		snprintf(s, 32, "%.1f MiB", (double)b / (1024.0 * 1024));
	return s;
}



/* ---- progress: the line a person reads, the JSON lines a script plots ---- */


/* "12.3s", "4m05s", "2h03m" */
static const char *duration(char *buf, double s)
{
	if (!(s >= 0) || s > 1e9)
		return "?";
	if (s < 60)
		snprintf(buf, 16, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, 16, "%dm%02ds", (int)(s / 60), (int)s % 60);
	else
		snprintf(buf, 16, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
	return buf;
}

/* Step `done` completed at t (training seconds) with this loss: its JSON
 * line, and the progress line when one is due. */
void rt_progress(Progress *pg, const RtOpts *o, const RtModel *m, const Run *r, long done, double t, int64_t moved)
{
	pg->ema = 0.9 * pg->ema + 0.1 * r->last;
	pg->wsum = 0.9 * pg->wsum + 0.1;
	double smooth = pg->ema / pg->wsum;
	if (pg->log) {
		RtJson *j = &pg->json;
		rt_json_reset(j);
		rt_json_object(j);
		rt_json_key(j, "step"), rt_json_int(j, done);
		rt_json_key(j, "loss"), rt_json_num(j, r->last);
		rt_json_key(j, "smoothed"), rt_json_num(j, smooth);
		rt_json_key(j, "lr"), rt_json_num(j, rt_lr_at(o, done - 1));
		rt_json_key(j, "ms"), rt_json_num(j, 1000 * (t - pg->t_step));
		rt_json_key(j, "bytes"), rt_json_int(j, moved);
		if (r->val_step == done)
			rt_json_key(j, "val_loss"), rt_json_num(j, r->val);
		if (m->nreports) {
			rt_json_key(j, "reports");
			rt_json_object(j);
			for (int i = 0; i < m->nreports; i++)
				rt_json_key(j, m->reports[i].name), rt_json_num(j, r->report[i]);
			rt_json_end_object(j);
		}
		rt_json_end_object(j);
		rt_json_raw(j, "\n");
		if (fwrite(j->buf, 1, j->len, pg->log) != j->len || fflush(pg->log))
			rt_fail(1, "cannot write %s: %s", o->log_json, strerror(errno));
	}
	pg->t_step = t;
	bool last = done == o->steps;
	bool due = pg->tty ? last || t - pg->t_line >= 0.1 || done == 1 : last || done % o->log_every == 0;
	if (o->quiet || !due)
		return;
	double dt = t - pg->t_line;
	long n = done - pg->line_done;
	char rate[32], el[16], eta[16];
	double per_s = dt > 0 ? (double)n / dt : 0;
	if (pg->tokens)
		snprintf(rate, sizeof rate, "%.4g tokens/s", per_s * (double)pg->tokens);
	else
		snprintf(rate, sizeof rate, "%.4g steps/s", per_s);
	char of[48] = "";
	if (!pg->open_ended)
		snprintf(of, sizeof of, "/%ld", o->steps);
	printf("%sstep %7ld%s  loss %-12.6g smoothed %-12.6g %8.3f ms/step  %s  elapsed %s", pg->tty ? "\r" : "", done, of,
	       r->last, smooth, n ? 1000 * dt / (double)n : 0.0, rate, duration(el, t));
	if (!pg->open_ended)
		printf("  ETA %s", duration(eta, t / (double)done * (double)(o->steps - done)));
	for (int i = 0; i < m->nreports; i++)
		printf("  %s %.6g", m->reports[i].name, r->report[i]);
	if (r->val_step)
		printf("  val %.6g", r->val);
	/* on a terminal the line stays open until the last step */
	fputs(pg->tty ? (last ? "\033[K\n" : "\033[K") : "\n", stdout);
	fflush(stdout);
	pg->t_line = t;
	pg->line_done = done;
}

/* JSON has no NaN or infinity: a diverged loss is written as null */
const char *rt_json_real(char *buf, double v)
{
	if (isfinite(v))
		snprintf(buf, 32, "%.17g", v);
	else
		strcpy(buf, "null");
	return buf;
}

/* the trained parameters' bytes (each one's gradient's): all, or the resident ones' */
static int64_t grad_bytes(const RtModel *m, bool resident)
{
	int64_t b = 0;
	for (int i = 0; i < m->nparams; i++)
		b += m->params[i].buffer || (resident && m->params[i].streamed) ? 0 : m->params[i].bytes;
	return b;
}

/* The bytes a training step's streamed units and host snapshots move each way,
 * from the plan: each micro-batch's dp_step moves what the plan says (the
 * units up, their gradients down once; their steps run on the host). */
static void stream_per_step(const RtModel *m, const RtOpts *o, int64_t *h2d, int64_t *d2h)
{
	*h2d = o->accum * m->xfer_h2d[1];
	*d2h = o->accum * m->xfer_d2h[1];
}

/* The bytes a training run moves each way, from the plan: the resident
 * parameters up once, each step's inputs, streamed units and loss, and the
 * downloads --clip-grad, --dump-grads (the resident gradients: the streamed
 * ones are on the host), --save and the ranks' comparison make. */
static void predict_transfers(RtCtx *c, const RtOpts *o, const Run *r, int64_t *h2d, int64_t *d2h)
{
	const RtModel *m = c->model;
	int64_t resident = 0, all = 0, inputs = 0, grads = grad_bytes(m, true);
	for (int i = 0; i < m->nparams; i++) {
		all += m->params[i].bytes;
		resident += m->params[i].streamed ? 0 : m->params[i].bytes;
	}
	for (int k = 0; k < m->ninputs; k++)
		inputs += m->inputs[k].bytes;
	int64_t step_h2d, step_d2h;
	stream_per_step(m, o, &step_h2d, &step_d2h);
	*h2d = resident + r->steps * (inputs * o->accum + step_h2d) + r->extra_h2d;
	int64_t scalars = rt_elem_bytes(m->loss_dtype);
	for (int i = 0; i < m->nreports; i++)
		scalars += rt_elem_bytes(m->reports[i].dtype);
	*d2h = r->steps * (scalars + step_d2h + (o->clip_set ? grads : 0) + (o->accum - 1) * rt_elem_bytes(m->loss_dtype)) +
	       (o->dump_grads && r->steps ? grads : 0) +
	       (r->saved || r->checked ? resident : 0) + r->extra_d2h;
}

void rt_write_summary(RtCtx *c, const RtOpts *o, const Run *r)
{
	int64_t ph, pd, sh, sd;
	predict_transfers(c, o, r, &ph, &pd);
	stream_per_step(c->model, o, &sh, &sd);
	char first[32], last[32], val[32];
	double steady = r->steps > 1 ? 1000 * (r->train_s - r->first_s) / (double)(r->steps - 1) : 1000 * r->train_s;
	char buf[6144], reports[1536] = "", num[32];
	for (int i = 0; i < c->model->nreports; i++)
		snprintf(reports + strlen(reports), sizeof reports - strlen(reports), "%s\"%s\": %s", i ? ", " : "",
		         c->model->reports[i].name, rt_json_real(num, r->report[i]));
	RtCounters *n = &c->n;
	int len = snprintf(buf, sizeof buf,
	                   "{\n  \"model\": \"%s\",\n  \"precision\": \"%s\",\n  \"device\": \"%s\",\n  \"optimizer\": \"%s\",\n"
	                   "  \"lr\": %.9g,\n  \"steps\": %ld,\n  \"loss_first\": %s,\n  \"loss_last\": %s,\n  \"val_loss\": %s,\n"
	                   "  \"val_s\": %.6f,\n"
	                   "  \"wall_s\": %.6f,\n  \"ms_per_step\": %.6f,\n  \"setup_s\": %.6f,\n  \"save_s\": %.6f,\n"
	                   "  \"peak_device_bytes\": %lld,\n"
	                   "  \"predicted_device_bytes\": %lld,\n  \"h2d_bytes\": %lld,\n  \"d2h_bytes\": %lld,\n"
	                   "  \"predicted_h2d_bytes\": %lld,\n  \"predicted_d2h_bytes\": %lld,\n"
	                   "  \"host_pool_bytes\": %lld,\n  \"device_slots\": %d,\n  \"prefetch_distance\": %d,\n"
	                   "  \"stream_h2d_bytes\": %lld,\n  \"stream_d2h_bytes\": %lld,\n"
	                   "  \"predicted_stream_h2d_bytes\": %lld,\n  \"predicted_stream_d2h_bytes\": %lld,\n"
	                   "  \"forward_steps\": %lld,\n  \"recomputed_steps\": %lld,\n"
	                   "  \"forward_flops\": %lld,\n  \"recomputed_flops\": %lld,\n  \"recomputed_fraction\": %.9g,\n"
	                   "  \"kernel_launches\": %lld,\n  \"gemm_calls\": %lld,\n  \"conv_calls\": %lld,\n  \"attention_calls\": %lld,\n"
	                   "  \"copy_calls\": %lld,\n"
	                   "  \"threads\": %d,\n  \"ranks\": %d,\n  \"allreduce_bytes\": %lld,\n  \"predicted_allreduce_bytes\": %lld,\n"
	                   "  \"allreduce_wait_s\": %.6f,\n  \"allgather_bytes\": %lld,\n  \"predicted_allgather_bytes\": %lld,\n"
	                   "  \"graph_steps\": %ld,\n  \"host_update_s\": %.6f,\n  \"reports\": {%s}\n}\n",
	                   c->model->model, rt_precision(c->model), c->dev->name, c->model->adam ? "adam" : "sgd",
	                   o->lr, r->steps, rt_json_real(first, r->first), rt_json_real(last, r->last), rt_json_real(val, r->val), r->val_s,
	                   r->train_s, steady, r->setup_s, r->save_s,
	                   (long long)n->peak_device_bytes, (long long)r->predicted, (long long)n->h2d_bytes,
	                   (long long)n->d2h_bytes, (long long)ph, (long long)pd, (long long)c->model->host, c->model->nslots, c->model->ahead,
	                   (long long)n->stream_h2d, (long long)n->stream_d2h, (long long)(r->steps * sh),
	                   (long long)(r->steps * sd), (long long)n->steps[RT_COUNT_FORWARD],
	                   (long long)n->steps[RT_COUNT_RECOMPUTED], (long long)(r->steps * c->model->forward_flops),
	                   (long long)n->recomputed_flops,
	                   r->steps && c->model->forward_flops ? (double)n->recomputed_flops / (double)(r->steps * c->model->forward_flops) : 0.0,
	                   (long long)n->launches, (long long)n->gemms, (long long)n->convs, (long long)n->attentions,
	                   (long long)n->copies, rt_threads, rt_nranks, (long long)n->allreduce_bytes,
	                   (long long)(rt_distributed ? r->steps * grad_bytes(c->model, false) : 0), rt_dist_waited(),
	                   (long long)n->allgather_bytes, (long long)(c->model->ranks > 1 ? r->steps * grad_bytes(c->model, true) : 0),
	                   r->graph_steps, c->model->stream_numel ? rt_host_busy() : 0.0, reports);
	rt_write_atomic(o->summary, buf, (size_t)len);
}

/* --memplot: the plan's categories stacked over one step as dpc --emit=memplot
 * draws them, the bytes in use the allocator counted at each call of the
 * last traced step over them */
void rt_memplot(RtCtx *c, const RtOpts *o)
{
	const RtModel *m = c->model;
	if (!m->mem_series)
		rt_fail(70, "internal error: the model description has no memplot line");
	const int64_t fixed[SVG_FIXED] = {m->plan_params, m->plan_grads, m->plan_opt, m->plan_inputs, m->plan_tape,
	                                  m->plan_slots};
	char title[256];
	snprintf(title, sizeof title, "%s: device memory in step %ld, measured over the plan", m->model, o->trace_to);
	int nline;
	int64_t *measured = rt_trace_bytes(o->trace_to, &nline);
	char *svg = svg_plan(title, "the step's ops in program order (the plan) and its device calls in order (measured)", fixed,
	                     m->mem_series, m->mem_points, measured, nline, "measured (allocator)", m->device_mem);
	if (!svg)
		rt_fail(1, "out of memory drawing --memplot");
	rt_write_atomic(o->memplot, svg, strlen(svg));
	free(svg);
	free(measured);
	if (!o->quiet)
		printf("%s: memory of step %ld in %s\n", m->model, o->trace_to, o->memplot);
}


/* the run's first lines: the parameters, the arena by category, streaming, the ranks, deferred updates */
/* the host's sums of the streamed gradients: each streamed parameter's bytes */
static int64_t sums_bytes(const RtModel *m)
{
	int64_t b = 0;
	for (int i = 0; i < m->nparams; i++)
		b += m->params[i].streamed && !m->params[i].buffer ? m->params[i].bytes : 0;
	return b;
}

void rt_announce(RtCtx *c, const RtOpts *o, const Run *r, int64_t param_bytes, int threads, bool synthetic)
{
	const RtModel *m = c->model;
	if (synthetic && m->ninputs) {
		char names[512] = "";
		for (int k = 0; k < m->ninputs; k++)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", m->inputs[k].name);
		printf("%s: no --data, --labels or --input: training on synthetic data (%s; --help says how it is drawn)\n",
		       m->model, names);
	}
	int64_t count = 0;
	int nbuf = 0;
	for (int i = 0; i < m->nparams; i++)
		count += m->params[i].numel, nbuf += m->params[i].buffer;
	char bufs[48] = "";
	if (nbuf)
		snprintf(bufs, sizeof bufs, " and %d buffer%s", nbuf, nbuf == 1 ? "" : "s");
	printf("%s: %d parameter tensors%s, %lld values (%s), %s; device %s arena %s = params %s + grads %s%s%s + inputs %s + tape %s%s%s + work %s%s%s%s\n",
	       m->model, m->nparams - nbuf, bufs, (long long)count, rt_mib(param_bytes), rt_precision(m), c->dev->name,
	       rt_mib(r->predicted), rt_mib(m->plan_params), rt_mib(m->plan_grads),
	       !m->plan_opt ? "" : !m->mixed ? " + adam state " : m->adam ? " + f32 master copies, sums and adam state " : " + f32 master copies and sums ",
	       m->plan_opt ? rt_mib(m->plan_opt) : "", rt_mib(m->plan_inputs), rt_mib(m->plan_tape),
	       m->plan_slots ? " + streaming slots " : "", m->plan_slots ? rt_mib(m->plan_slots) : "", rt_mib(m->plan_work),
	       m->plan_snap ? " (snapshots among it, " : "", m->plan_snap ? rt_mib(m->plan_snap) : "", m->plan_snap ? " in all)" : "");
	char slots[96] = "";
	if (m->nslots)
		snprintf(slots, sizeof slots, ", %d device slots per tensor (%s), %d ahead", m->nslots, rt_mib(m->plan_slots),
		         m->ahead);
	if (m->host)
		printf("%s: streaming: host pool %s%s; per step %s host->device, %s device->host\n", m->model, rt_mib(m->host),
		       slots, rt_mib(m->xfer_h2d[1]), rt_mib(m->xfer_d2h[1]));
	if (rt_distributed) {
		int64_t g = grad_bytes(m, false);
		printf("%s: %d rank%s (mpirun): each trains on its %lld rows of every global batch of %lld, the gradients "
		       "(%s) summed across the ranks each step\n", m->model, rt_nranks, rt_nranks == 1 ? "" : "s",
		       (long long)(m->ninputs ? rt_batch_rows(&m->inputs[0]) : 1),
		       (long long)(rt_nranks * (m->ninputs ? rt_batch_rows(&m->inputs[0]) : 1)), rt_mib(g));
	}
	if (m->stream_numel) {
		char sums[96] = "";
		if (c->sums)
			snprintf(sums, sizeof sums, "; the micro-batches' gradients are summed there, in %s of pinned memory",
			         rt_mib(sums_bytes(m)));
		printf("%s: the streamed parameters' %lld values are updated on the host by %d thread%s, where their %s "
		       "%s; each micro-batch moves %.4g bytes a value host->device and %.4g device->host\n", m->model,
		       (long long)m->stream_numel, threads, threads == 1 ? "" : "s",
		       m->mixed ? "f32 master copies and optimizer state stay" : "optimizer state stays", sums,
		       (double)m->xfer_h2d[1] / (double)m->stream_numel, (double)m->xfer_d2h[1] / (double)m->stream_numel);
	}
}

/* --eval: the forward program on each batch, dropout off; the means of the loss and of each report,
 * printed and in --summary-json */
int rt_evaluate(RtCtx *c, const RtOpts *o, RtData *data)
{
	RtModel *m = c->model;
	long nb = o->steps_set ? o->steps : rt_batches(m, data);
	double rep[16], loss = rt_mean_loss(c, data, nb, rep) * (double)nb;
	for (int i = 0; i < m->nreports; i++)
		rep[i] *= (double)nb;
	char line[2048], num[32];
	int n = snprintf(line, sizeof line, "%s: eval on %ld batches, loss %.6g", m->model, nb, loss / (double)nb);
	char json[2048];
	int jn = snprintf(json, sizeof json, "{\n  \"model\": \"%s\",\n  \"mode\": \"eval\",\n  \"batches\": %ld,\n  \"loss\": %s,\n  \"reports\": {",
	                  m->model, nb, rt_json_real(num, loss / (double)nb));
	for (int i = 0; i < m->nreports; i++) {
		n += snprintf(line + n, sizeof line - (size_t)n, ", %s %.6g", m->reports[i].name, rep[i] / (double)nb);
		jn += snprintf(json + jn, sizeof json - (size_t)jn, "%s\"%s\": %s", i ? ", " : "", m->reports[i].name,
		               rt_json_real(num, rep[i] / (double)nb));
	}
	jn += snprintf(json + jn, sizeof json - (size_t)jn, "}\n}\n");
	puts(line);
	if (o->summary)
		rt_write_atomic(o->summary, json, (size_t)jn);
	return isfinite(loss) ? 0 : 1;
}


/* after the last step: the profile, the memory picture, the trace, the parameters saved, the summary
 * and the last line */
void rt_finish(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	void **host = S->host;
	c->dev->sync();
	rt_host_drain(); /* the last step's host updates: the run's time includes them */
	double t1 = rt_now();
	if (o->profile)
		rt_prof_report(c, o->steps);
	if (o->memplot)
		rt_memplot(c, o);
	if (o->trace) {
		int n = rt_trace_write(c, o->trace, o->trace_from, o->trace_to);
		char steps[64];
		if (o->trace_from < o->trace_to)
			snprintf(steps, sizeof steps, "steps %ld..%ld", o->trace_from, o->trace_to);
		else
			snprintf(steps, sizeof steps, "step %ld", o->trace_from);
		if (!o->quiet)
			printf("%s: trace of %s: %d events in %s\n", m->model, steps, n, o->trace);
	}
	r->train_s = t1 - S->t0 - r->save_s;
	/* the parameters come down once, for the ranks' comparison and for --save */
	r->checked = rt_distributed && r->steps;
	if (r->checked || o->save)
		rt_download_params(c, host, false);
	if (r->checked)
		rt_ranks_identical(c, host);
	if (o->save) {
		rt_save_safetensors(o->save, m, host, false);
		r->saved = true;
	}
	r->save_s += rt_now() - t1;
	if (o->summary)
		rt_write_summary(c, o, r);
	if (rt_rank > 0)
		; /* rank 0 speaks for the ranks */
	else if (!r->steps && S->start)
		printf("%s: resumed at step %ld of %ld: nothing left to train\n", m->model, S->start, o->steps);
	else
		printf("%s: %ld steps, loss %.6g -> %.6g, %.3f s, peak device memory %s\n", m->model, r->steps, r->first, r->last,
		       r->train_s, rt_mib(c->n.peak_device_bytes));
}


