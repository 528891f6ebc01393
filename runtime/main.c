/* rt: main() of every executable dpc builds: parameters, the training loop
 * around the generated dp_step, evaluation, gradient check, summary. The
 * options are opts.c's table, the data data.c's, the optimizer's step
 * update.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/rng.h"
#include "rt.h"
#include "../common/svg.h"

bool rt_tf32, rt_conv_fp32, rt_verbose;

static double read_loss(RtCtx *c);
static const char *json_real(char *buf, double v);

/* --eval: the forward program on each batch, dropout off; the means of the
 * loss and of each report */
/* the batches that hold a data set's rows once (at least one) */
static long batches(const RtModel *m, const RtData *data)
{
	long nb = m->ninputs ? (long)(data[0].n / rt_batch_rows(&m->inputs[0])) : 1;
	return nb < 1 ? 1 : nb;
}

/* the forward program on nb batches of data in turn, dropout off, nothing updated: the mean loss,
 * and the reports' means in rep */
static double mean_loss(RtCtx *c, RtData *data, long nb, double *rep)
{
	RtModel *m = c->model;
	c->eval = true;
	double loss = 0;
	unsigned char buf[8];
	for (int i = 0; i < m->nreports; i++)
		rep[i] = 0;
	for (long b = 0; b < nb; b++) {
		rt_upload_batch(c, data, b, 0, false);
		dp_forward(c);
		c->dev->sync();
		loss += read_loss(c);
		for (int i = 0; i < m->nreports; i++) {
			rt_d2h(c, buf, c->base + (uint64_t)m->reports[i].offset, rt_elem_bytes(m->reports[i].dtype));
			rep[i] += rt_get(buf, m->reports[i].dtype, 0) / (double)nb;
		}
	}
	c->eval = false;
	return loss / (double)nb;
}

static int evaluate(RtCtx *c, const RtOpts *o, RtData *data)
{
	RtModel *m = c->model;
	long nb = o->steps_set ? o->steps : batches(m, data);
	double rep[16], loss = mean_loss(c, data, nb, rep) * (double)nb;
	for (int i = 0; i < m->nreports; i++)
		rep[i] *= (double)nb;
	char line[2048], num[32];
	int n = snprintf(line, sizeof line, "%s: eval on %ld batches, loss %.6g", m->model, nb, loss / (double)nb);
	char json[2048];
	int jn = snprintf(json, sizeof json, "{\n  \"model\": \"%s\",\n  \"mode\": \"eval\",\n  \"batches\": %ld,\n  \"loss\": %s,\n  \"reports\": {",
	                  m->model, nb, json_real(num, loss / (double)nb));
	for (int i = 0; i < m->nreports; i++) {
		n += snprintf(line + n, sizeof line - (size_t)n, ", %s %.6g", m->reports[i].name, rep[i] / (double)nb);
		jn += snprintf(json + jn, sizeof json - (size_t)jn, "%s\"%s\": %s", i ? ", " : "", m->reports[i].name,
		               json_real(num, rep[i] / (double)nb));
	}
	jn += snprintf(json + jn, sizeof json - (size_t)jn, "}\n}\n");
	puts(line);
	if (o->summary)
		rt_write_atomic(o->summary, json, (size_t)jn);
	return isfinite(loss) ? 0 : 1;
}

/* ---- parameters ---- */

static void init_params(const RtModel *m, void **host, uint64_t seed)
{
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!strcmp(t->init, "load"))
			rt_fail(1, "%s '%s' starts from a file (load(\"%s\")): give one with --init FILE.safetensors",
			        t->buffer ? "buffer" : "parameter", t->name, t->saved);
		rt_rng_seed(seed * 1000003 + (uint64_t)i * 7 + 1);
		for (int64_t e = 0; e < t->numel; e++) {
			double v = 0;
			if (!strcmp(t->init, "ones"))
				v = 1;
			else if (!strcmp(t->init, "normal"))
				v = t->a * rt_rng_normal();
			else if (!strcmp(t->init, "uniform"))
				v = t->a + (t->b - t->a) * rt_rng_uniform();
			rt_set(host[i], t->dtype, e, v);
		}
	}
}

static double read_loss(RtCtx *c)
{
	unsigned char buf[8];
	rt_d2h(c, buf, c->base + (uint64_t)c->model->loss, rt_elem_bytes(c->model->loss_dtype));
	return rt_get(buf, c->model->loss_dtype, 0);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *mib(int64_t b)
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


/* ---- gradient check ---- */

static int gradcheck(RtCtx *c, const RtOpts *o, void **host)
{
	RtModel *m = c->model;
	if (m->real_bytes != 8)
		fprintf(stderr, "%s: warning: --gradcheck in a %s build is not meaningful; compile with dpc --precision f64\n", rt_prog,
		        m->real_bytes == 2 ? "bfloat16" : "float32");
	/* streamed parameters: each unit's gradient is captured as dp_step makes it, and nothing is updated */
	void *g[RT_MAX_PARAMS];
	for (int i = 0; i < m->nparams; i++)
		g[i] = rt_host_alloc(m->params[i].bytes, "gradients");
	c->capture = g;
	c->no_update = true;
	dp_step(c);
	rt_fold(c, true);
	c->dev->sync();
	double loss = read_loss(c), worst = 0, worst_abs = 0;
	rt_rng_seed((uint64_t)o->seed * 31 + 17);
	for (int i = 0; i < m->nparams; i++) {
		RtTensor *t = &m->params[i];
		if (t->buffer)
			continue;
		if (!t->streamed)
			rt_d2h(c, g[i], c->base + (uint64_t)t->grad, t->bytes);
		int64_t count = t->numel < o->gc_samples ? t->numel : o->gc_samples;
		double pworst = 0, pabs = 0;
		int64_t at = 0;
		for (int64_t s = 0; s < count; s++) {
			int64_t e = t->numel <= o->gc_samples ? s : (int64_t)(rt_rng_next() % (uint64_t)t->numel);
			double keep = rt_get(host[i], t->dtype, e), h = 1e-6 * (fabs(keep) > 1 ? fabs(keep) : 1);
			unsigned char elem[8];
			int esz = rt_elem_bytes(t->dtype);
			uint64_t where = c->base + (uint64_t)t->offset + (uint64_t)(e * esz);
			double lp[2];
			/* a streamed parameter is read from the host pool by each call */
			for (int side = 0; side < 2; side++) {
				rt_set(elem, t->dtype, 0, keep + (side ? -h : h));
				if (t->streamed)
					rt_set(host[i], t->dtype, e, keep + (side ? -h : h));
				else
					rt_h2d(c, where, elem, esz);
				rt_refresh(c, t);
				dp_forward(c);
				lp[side] = read_loss(c); /* synchronous: the copies are done */
			}
			rt_set(elem, t->dtype, 0, keep);
			if (t->streamed)
				rt_set(host[i], t->dtype, e, keep);
			else
				rt_h2d(c, where, elem, esz);
			rt_refresh(c, t);
			double fd = (lp[0] - lp[1]) / (2 * h), ad = rt_get(g[i], t->dtype, e), d = fabs(ad - fd);
			double noise = 1e-8 * (fabs(loss) > 1 ? fabs(loss) : 1);
			double err = d <= noise ? 0 : d / fmax(fabs(ad), fabs(fd));
			if (err >= pworst)
				pworst = err, at = e;
			if (d > pabs)
				pabs = d;
		}
		printf("  %-24s max relative error %.3g (entry %lld of %lld), max |ad - fd| %.3g\n", t->name, pworst,
		       (long long)at, (long long)t->numel, pabs);
		if (pworst > worst)
			worst = pworst;
		if (pabs > worst_abs)
			worst_abs = pabs;
	}
	for (int i = 0; i < m->nparams; i++)
		free(g[i]);
	c->capture = NULL;
	c->no_update = false;
	bool ok = worst <= o->gc_threshold;
	printf("gradcheck: max relative error %.3g (threshold %.3g) %s; max |ad - fd| %.3g, noise floor %.3g\n", worst,
	       o->gc_threshold, ok ? "OK" : "FAIL", worst_abs, 1e-8 * (fabs(loss) > 1 ? fabs(loss) : 1));
	return ok ? 0 : 1;
}

/* ---- summary ---- */

/* What a training run measured; times are wall-clock seconds per phase. */
typedef struct {
	long steps;
	double first, last;
	double report[16]; /* the reports of the last step */
	double setup_s;    /* options, data, parameters, device arena, upload */
	double train_s;    /* the training loop */
	double first_s;    /* step 1 alone: ms_per_step leaves out its one-time costs */
	double save_s;     /* --save and --dump-grads; validation's time too (val_s apart) */
	double val_s;      /* the validation loss's evaluations */
	int64_t predicted; /* the arena, optimizer state included */
	bool saved;        /* --save wrote the parameters */
	bool checked;      /* under mpirun, the parameters came down to compare the ranks' */
	long start;        /* --resume: the step the run continued from */
	double val;        /* the last validation loss (NAN: none yet), of step val_step */
	long val_step;
	int64_t extra_h2d, extra_d2h; /* adam's moments to the device on --resume, states to the host */
	long graph_steps;  /* --graph: the steps run as the captured graph, its capture's included */
} Run;

/* ---- progress: the line a person reads, the JSON lines a script plots ---- */

typedef struct {
	bool tty;         /* stdout is a terminal: one line, redrawn in place */
	double ema, wsum; /* the loss's exponential average over about 10 steps, debiased by wsum */
	double t_line;    /* when the last line was printed (training time) */
	long line_done;   /* the steps done at it */
	double t_step;    /* when the last step completed */
	int64_t tokens;   /* ids a step reads (the first input an embed reads), else 0 */
	FILE *log;        /* --log-json */
	RtJson json;
} Progress;

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
static void progress(Progress *pg, const RtOpts *o, const RtModel *m, const Run *r, long done, double t, int64_t moved)
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
	printf("%sstep %7ld/%ld  loss %-12.6g smoothed %-12.6g %8.3f ms/step  %s  elapsed %s  ETA %s", pg->tty ? "\r" : "",
	       done, o->steps, r->last, smooth, n ? 1000 * dt / (double)n : 0.0, rate, duration(el, t),
	       duration(eta, t / (double)done * (double)(o->steps - done)));
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
static const char *json_real(char *buf, double v)
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

static void write_summary(RtCtx *c, const RtOpts *o, const Run *r)
{
	int64_t ph, pd, sh, sd;
	predict_transfers(c, o, r, &ph, &pd);
	stream_per_step(c->model, o, &sh, &sd);
	char first[32], last[32], val[32];
	double steady = r->steps > 1 ? 1000 * (r->train_s - r->first_s) / (double)(r->steps - 1) : 1000 * r->train_s;
	char buf[6144], reports[1536] = "", num[32];
	for (int i = 0; i < c->model->nreports; i++)
		snprintf(reports + strlen(reports), sizeof reports - strlen(reports), "%s\"%s\": %s", i ? ", " : "",
		         c->model->reports[i].name, json_real(num, r->report[i]));
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
	                   o->lr, r->steps, json_real(first, r->first), json_real(last, r->last), json_real(val, r->val), r->val_s,
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
static void memplot(RtCtx *c, const RtOpts *o)
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
static void run_step(RtCtx *c, const RtOpts *o, long s, Run *r)
{
	static bool ready;
	static RtCounters before, after;
	if (o->graph && s == 1 && c->no_graph && !o->quiet)
		printf("%s: --graph: each step runs call by call, as %s\n", c->model->model, c->no_graph);
	if (!o->graph || s == 0 || c->record || c->no_graph || c->capture) {
		dp_step(c);
		return;
	}
	if (!ready) {
		before = c->n;
		c->capturing = true;
		c->dev->graph_begin();
		dp_step(c);
		c->dev->graph_end();
		c->capturing = false;
		after = c->n;
		ready = true;
	} else {
		add_counts(&c->n, &after, &before);
	}
	c->dev->graph_launch();
	r->graph_steps++;
}

/* resident parameters (or their gradients) to the host; streamed ones are there already */
/* page-locked host memory, allocated once at start; nothing has been written yet when it fails */
static void *pinned(RtCtx *c, int64_t bytes, const char *what)
{
	void *p = c->dev->host_alloc(bytes > 0 ? bytes : 1);
	if (!p)
		rt_fail(1, "cannot allocate %lld bytes (%s) of pinned host memory for %s", (long long)bytes, mib(bytes), what);
	return p;
}

/* an output under data parallelism: with %r in it, this rank's (the rank in its place); else
 * rank 0's alone */
static const char *rank_path(const char *path, char **made)
{
	const char *at = path ? strstr(path, "%r") : NULL;
	if (!at)
		return rt_rank == 0 ? path : NULL;
	size_t n = strlen(path) + 16;
	*made = rt_host_alloc((int64_t)n, "an output's name");
	snprintf(*made, n, "%.*s%d%s", (int)(at - path), path, rt_rank, at + 2);
	return *made;
}

static void download_params(RtCtx *c, void **host, bool grads);

/* every rank applied the same updates: their parameters and buffers, downloaded to host, must be
 * the same bytes */
static void ranks_identical(RtCtx *c, void **host)
{
	uint64_t h = RT_HASH_START;
	for (int i = 0; i < c->model->nparams; i++)
		h = rt_hash(h, host[i], (size_t)c->model->params[i].bytes);
	if (!rt_dist_same(h, "the comparison of the ranks' parameters after training"))
		rt_fail(1, "the %d ranks' parameters differ after training (rank %d's hash %016llx); data parallelism must "
		        "keep them identical", rt_nranks, rt_rank, (unsigned long long)h);
}

/* adam's resident moments to the host; the streamed ones are in the pool */
static void download_moments(RtCtx *c, void **mom)
{
	const RtModel *m = c->model;
	c->dev->sync();
	rt_host_drain(); /* the streamed ones' steps write them in the pool */
	for (int i = 0; m->adam && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (t->streamed || t->buffer)
			continue;
		for (int k = 0; k < 2; k++) {
			uint64_t dev = c->base + (uint64_t)(k ? t->opt_v : t->opt_m);
			if (m->ranks == 1) {
				rt_d2h(c, mom[2 * i + k], dev, t->bytes);
				continue;
			}
			/* each rank's share, then every share on every rank (rank 0 writes the file) */
			int64_t n, lo = rt_share(t, rt_rank, rt_nranks, &n), esz = rt_elem_bytes(t->dtype);
			rt_d2h(c, (char *)mom[2 * i + k] + lo * esz, dev, n * esz);
			rt_dist_gather(mom[2 * i + k], t->numel, t->dtype, "the gather of Adam's moments for the state file");
		}
	}
}

static void download_params(RtCtx *c, void **host, bool grads)
{
	c->dev->sync();
	rt_host_drain(); /* the streamed ones' steps write them in the pool */
	for (int i = 0; i < c->model->nparams; i++) {
		RtTensor *t = &c->model->params[i];
		if (!t->streamed && !(grads && t->buffer))
			rt_d2h(c, host[i], c->base + (uint64_t)(grads ? t->grad : t->offset), t->bytes);
	}
}

/* Data parallelism: every rank must run the same executable on the same settings, data and starting
 * point, or the sums mean nothing. Each rank lists what it has as fields (a name the user knows and
 * its value); every rank's list goes to every rank, and where any field differs rank 0 names each such
 * field with every rank's value, and every rank exits with status 1. A build field (how the model was
 * made: its program, -D values and dpc's options) is named only where the model descriptions differ:
 * an option given on one host that is the other's default builds the same model. */
typedef struct {
	char kind;       /* 'b' build, 'd' the model description, 'f' any other */
	char name[47];
	char value[80];
} Field;
enum { MAX_FIELDS = 128 };

static Field *add_field(Field *f, int *n, char kind, const char *name)
{
	if (*n == MAX_FIELDS)
		return NULL;
	Field *x = &f[(*n)++];
	memset(x, 0, sizeof *x);
	x->kind = kind;
	snprintf(x->name, sizeof x->name, "%.46s", name);
	return x;
}

/* the model description's build lines as fields: "build const H 16" is -D H, 16 */
static void build_fields(Field *f, int *n)
{
	for (const char *l = dp_model_desc, *nl; *l; l = nl + (*nl != 0)) {
		nl = l + strcspn(l, "\n");
		char kind[16], name[41], rest[80], line[256];
		snprintf(line, sizeof line, "%.*s", (int)(nl - l), l);
		if (strncmp(line, "build ", 6) || sscanf(line, "build %15s %40s %79[^\n]", kind, name, rest) != 3)
			continue;
		Field *x = add_field(f, n, 'b', "");
		if (!x)
			return;
		if (!strcmp(kind, "const"))
			snprintf(x->name, sizeof x->name, "-D %s", name);
		else if (!strcmp(kind, "option"))
			snprintf(x->name, sizeof x->name, "dpc %s", name);
		else
			snprintf(x->name, sizeof x->name, "the program");
		if (!strcmp(kind, "program"))
			snprintf(x->value, sizeof x->value, "%.40s (hash %.20s)", name, rest);
		else
			snprintf(x->value, sizeof x->value, "%s", rest);
	}
}

/* the value a rank has for field (kind, name), or NULL */
static const char *field_of(const Field *all, int rank, char kind, const char *name)
{
	const Field *f = all + (size_t)rank * MAX_FIELDS;
	for (int i = 0; i < MAX_FIELDS && f[i].kind; i++)
		if (f[i].kind == kind && !strcmp(f[i].name, name))
			return f[i].value;
	return NULL;
}

static bool alike(const char *v, const char *w) { return v && w ? !strcmp(v, w) : v == w; }

/* "16 on rank 0, 32 on rank 1"; ranks alike grouped: "16 on ranks 0, 2; 32 on rank 1" */
static void values_by_rank(const Field *all, char kind, const char *name, char *out, size_t size)
{
	const char *none = kind == 'b' && !strncmp(name, "dpc ", 4) ? "not given" : "none";
	bool *done = rt_host_alloc(rt_nranks, "the ranks' fields");
	memset(done, 0, (size_t)rt_nranks);
	int groups = 0;
	bool single = true; /* no two ranks alike */
	for (int r = 0; r < rt_nranks; r++)
		for (int q = r + 1; q < rt_nranks; q++)
			single &= !alike(field_of(all, r, kind, name), field_of(all, q, kind, name));
	size_t len = 0;
	out[0] = 0;
	for (int r = 0; r < rt_nranks && len < size; r++) {
		if (done[r])
			continue;
		const char *v = field_of(all, r, kind, name);
		len += (size_t)snprintf(out + len, size - len, "%s%s on rank", groups++ ? single ? ", " : "; " : "", v ? v : none);
		int members = 0;
		char list[96] = "";
		size_t ll = 0;
		for (int q = r; q < rt_nranks; q++) {
			const char *w = field_of(all, q, kind, name);
			if (alike(v, w)) {
				done[q] = true;
				if (members++ < 6 && ll < sizeof list)
					ll += (size_t)snprintf(list + ll, sizeof list - ll, "%s%d", members > 1 ? ", " : "", q);
			}
		}
		if (len < size)
			len += (size_t)snprintf(out + len, size - len, "%s %s%s", members > 1 ? "s" : "", list,
			                        members > 6 ? " and more" : "");
		bool more = false;
		for (int q = r + 1; q < rt_nranks; q++)
			more |= !done[q];
		if (groups == 4 && more) {
			if (len < size)
				snprintf(out + len, size - len, "; ...");
			break;
		}
	}
	free(done);
}

static bool same_everywhere(const Field *all, char kind, const char *name)
{
	const char *v = field_of(all, 0, kind, name);
	for (int r = 1; r < rt_nranks; r++) {
		if (!alike(v, field_of(all, r, kind, name)))
			return false;
	}
	return true;
}

/* a field of any rank's list not yet listed by a lower rank: each name once */
static bool listed_before(const Field *all, int rank, const Field *f)
{
	for (int r = 0; r < rank; r++)
		if (field_of(all, r, f->kind, f->name))
			return true;
	return false;
}

static void agree(const RtModel *m, const Field *mine, const char *when)
{
	Field *all = rt_host_alloc((int64_t)sizeof(Field) * MAX_FIELDS * rt_nranks, "the ranks' fields");
	char what[96];
	snprintf(what, sizeof what, "the comparison of the ranks' %s", when);
	rt_dist_allgather(mine, all, (int)(sizeof(Field) * MAX_FIELDS), what);
	bool desc_differs = false, differs = false, build_named = false;
	for (int r = 0; r < rt_nranks; r++)
		for (const Field *f = all + (size_t)r * MAX_FIELDS; f < all + (size_t)(r + 1) * MAX_FIELDS && f->kind; f++)
			if (!listed_before(all, r, f) && !same_everywhere(all, f->kind, f->name)) {
				differs |= f->kind != 'b';
				desc_differs |= f->kind == 'd';
			}
	if (differs && rt_rank == 0)
		fprintf(stderr, "%s: error: the %d ranks differ in their %s: every rank must run the same build of %s with "
		        "the same options, data and starting point\n", rt_prog, rt_nranks, when, m->model);
	/* the build's fields first; the description itself only where none of them differs */
	for (int pass = 0; pass < 2 && differs; pass++)
		for (int r = 0; r < rt_nranks; r++)
			for (const Field *f = all + (size_t)r * MAX_FIELDS; f < all + (size_t)(r + 1) * MAX_FIELDS && f->kind; f++) {
				bool shown = pass == 0 ? f->kind == 'b' && desc_differs : f->kind == 'f' || (f->kind == 'd' && !build_named);
				if (!shown || listed_before(all, r, f) || same_everywhere(all, f->kind, f->name))
					continue;
				char v[400];
				values_by_rank(all, f->kind, f->name, v, sizeof v);
				if (rt_rank == 0)
					fprintf(stderr, "  %s: %s\n", f->name, v);
				build_named |= f->kind == 'b';
			}
	free(all);
	if (!differs)
		return;
	rt_dist_finish();
	exit(1);
}

/* a state file's number as the user wrote it: the shortest form that reads back the same (0.01, not
 * 0.010000000000000000); any other value as it is */
static void shortest(char *out, size_t size, const char *v)
{
	char *end;
	double x = strtod(v, &end);
	snprintf(out, size, "%.79s", v);
	if (end == v || *end || !strpbrk(v, ".eE"))
		return;
	for (int digits = 1; digits <= 17; digits++) {
		snprintf(out, size, "%.*g", digits, x);
		if (strtod(out, NULL) == x)
			return;
	}
}

/* what the ranks compare before they read their starting point: the build, the run's settings (those a
 * state file records, as options), the steps, whether and when states are saved (saves are collective),
 * and each input's data */
static void ranks_agree(const RtModel *m, const RtOpts *o, const RtData *data, bool saves_state)
{
	Field *f = rt_host_alloc((int64_t)sizeof(Field) * MAX_FIELDS, "the ranks' fields");
	memset(f, 0, sizeof(Field) * MAX_FIELDS);
	int n = 0;
	build_fields(f, &n);
	const char *names[32];
	char v[32][64];
	int k = rt_run_fields(m, o, names, v);
	for (int i = 0; i < k; i++) {
		bool desc = !strcmp(names[i], "model_description"), precision = !strcmp(names[i], "precision");
		char name[48];
		snprintf(name, sizeof name, "%s%s", desc ? "the model description" : precision ? "the precision" : "--",
		         desc || precision ? "" : names[i]);
		for (char *c = name + 2; !desc && !precision && *c; c++)
			*c = *c == '_' ? '-' : *c;
		Field *x = add_field(f, &n, desc ? 'd' : 'f', name);
		if (x)
			shortest(x->value, sizeof x->value, v[i]);
	}
	Field *x;
	if ((x = add_field(f, &n, 'f', "--steps")))
		snprintf(x->value, sizeof x->value, "%ld", o->steps);
	if ((x = add_field(f, &n, 'f', "--save-state")))
		snprintf(x->value, sizeof x->value, "%s", saves_state ? "given" : "not given");
	if (o->save_every && (x = add_field(f, &n, 'f', "--save-every")))
		snprintf(x->value, sizeof x->value, "%ld", o->save_every);
	for (int i = 0; i < m->ninputs; i++) {
		uint64_t h = rt_hash(RT_HASH_START, data[i].rows, (size_t)(data[i].n * data[i].row * rt_elem_bytes(m->inputs[i].dtype)));
		char name[48];
		snprintf(name, sizeof name, "the data of input %s", m->inputs[i].name);
		if ((x = add_field(f, &n, 'f', name)))
			snprintf(x->value, sizeof x->value, "%lld rows, hash %016llx", (long long)data[i].n, (unsigned long long)h);
	}
	agree(m, f, "build, options and data");
	free(f);
}

/* what the ranks compare once each has its starting point: the step a state resumes at, and the
 * parameters (and a state's moments) each starts from, with where they came from */
static void ranks_start_alike(const RtModel *m, const RtOpts *o, long start, void *const *host, void *const *mom)
{
	Field f[MAX_FIELDS];
	memset(f, 0, sizeof f);
	int n = 0;
	Field *x = add_field(f, &n, 'f', "--resume");
	if (o->resume)
		snprintf(x->value, sizeof x->value, "step %ld", start);
	else
		snprintf(x->value, sizeof x->value, "not given");
	uint64_t h = RT_HASH_START;
	for (int i = 0; i < m->nparams; i++) {
		h = rt_hash(h, host[i], (size_t)m->params[i].bytes);
		for (int k = 0; o->resume && m->adam && !m->params[i].buffer && k < 2; k++)
			h = rt_hash(h, mom[2 * i + k], (size_t)m->params[i].bytes);
	}
	x = add_field(f, &n, 'f', "the starting point");
	const char *from = o->resume ? o->resume : o->init ? o->init : m->weights[0] ? m->weights : NULL;
	const char *slash = from ? strrchr(from, '/') : NULL;
	if (from)
		snprintf(x->value, sizeof x->value, "hash %016llx (%s %.40s)", (unsigned long long)h,
		         o->resume ? "--resume" : o->init ? "--init" : "weights", slash ? slash + 1 : from);
	else
		snprintf(x->value, sizeof x->value, "hash %016llx (--seed %ld)", (unsigned long long)h, o->seed);
	agree(m, f, "starting points");
}

/* the input an option names, or the option's error */
static int input_named(const RtModel *m, const char *opt, const char *name)
{
	for (int k = 0; k < m->ninputs; k++)
		if (!strcmp(m->inputs[k].name, name))
			return k;
	char fmt[96];
	snprintf(fmt, sizeof fmt, "%s: the model has no input named '%%s'", opt);
	rt_usage(fmt, name);
}

/* what the executable was compiled for against what the command line asks: the optimizer (its state
 * is part of the memory plan) and the ranks a sharded plan was made for; lr's default by optimizer */
static void check_compiled(const RtModel *m, RtOpts *o)
{
	/* the optimizer is compiled in: its state is part of the memory plan */
	const char *compiled = m->adam ? "adam" : "sgd";
	/* adamw is adam's state and kernel with the decay */
	const char *asked = o->optimizer && !strcmp(o->optimizer, "adamw") ? "adam" : o->optimizer;
	if (asked && strcmp(asked, compiled)) {
		char why[200];
		snprintf(why, sizeof why, "this executable was compiled for --optimizer %s; to train with %s, compile it "
		         "with dpc --optimizer %s", compiled, o->optimizer, asked);
		rt_usage("%s", why);
	}
	if (!o->lr_set)
		o->lr = m->adam ? 0.001 : 0.01;
	/* ZeRO stage 1: the plan holds one rank's share of Adam's state */
	if (m->ranks > 1 && !o->shard_optimizer)
		rt_usage("%s", "this executable was compiled with dpc --ranks: its plan holds one rank's share of Adam's "
		         "state; run it under mpirun with --shard-optimizer");
	if (o->shard_optimizer && m->ranks == 1)
		rt_usage("%s", "--shard-optimizer needs an executable whose plan holds a rank's share of Adam's state: "
		         "compile it with dpc --optimizer adam --ranks N");
	if (m->ranks > 1 && rt_nranks != m->ranks) {
		char why[160];
		snprintf(why, sizeof why, "this executable was compiled with dpc --ranks %d and runs as %d rank%s; run it "
		         "with mpirun -np %d", m->ranks, rt_nranks, rt_nranks == 1 ? "" : "s", m->ranks);
		rt_usage("%s", why);
	}
}

/* the one input of a role (RT_ROLE_DATA: what the loss computes from; RT_ROLE_LABELS: what it reads only as
 * its target) that an option binds, or that option's error naming the inputs */
static int input_of_role(const RtModel *m, int role, const char *opt, const char *file)
{
	int k = -1, n = 0;
	char names[512] = "";
	for (int i = 0; i < m->ninputs; i++)
		if (m->inputs[i].role == role) {
			k = i, n++;
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", n > 1 ? ", " : "", m->inputs[i].name);
		}
	if (n == 1)
		return k;
	char why[768];
	if (n > 1)
		snprintf(why, sizeof why, "%s %s: the model has %d inputs that %s (%s): give each by name, --input NAME=FILE "
		         "(--val-input for validation)", opt, file, n, role == RT_ROLE_DATA ? "the loss computes from" : "its loss "
		         "reads as labels", names);
	else
		snprintf(why, sizeof why, "%s %s: the model has no input that %s%s", opt, file,
		         role == RT_ROLE_DATA ? "the loss computes from" : "its loss reads only as its labels",
		         role == RT_ROLE_LABELS ? " (its inputs are data: give them with --data or --input NAME=FILE)" : "");
	rt_usage("%s", why);
}

/* one set of data, training's or validation's: by role (--data, --labels) and by name (--input NAME=FILE),
 * each input once, and once one has data every one; false when no option gave any */
static bool bind_inputs(const RtModel *m, RtData *data, const char *const opt[3], const char *by_data,
                        const char *by_labels, const char *const *names, const char *const *files, int nfiles)
{
	const char *from[RT_MAX_INPUTS] = {0};
	int k;
	for (int f = 0; f < nfiles + 2; f++) {
		const char *file = f == 0 ? by_data : f == 1 ? by_labels : files[f - 2];
		if (!file)
			continue;
		const char *how = f < 2 ? opt[f] : opt[2];
		k = f == 0 ? input_of_role(m, RT_ROLE_DATA, how, file) : f == 1 ? input_of_role(m, RT_ROLE_LABELS, how, file)
		                                                              : input_named(m, how, names[f - 2]);
		if (from[k]) {
			char why[256];
			if (from[k] == how)
				snprintf(why, sizeof why, "input '%s' is given twice, by %s", m->inputs[k].name, how);
			else
				snprintf(why, sizeof why, "input '%s' is given twice, by %s and by %s", m->inputs[k].name, from[k], how);
			rt_usage("%s", why);
		}
		from[k] = how;
		rt_load_data(&data[k], &m->inputs[k], file);
	}
	bool any = by_data || by_labels || nfiles;
	for (int i = 0; any && i < m->ninputs; i++)
		if (!from[i]) {
			/* the option by role, where it would bind this input */
			int role = m->inputs[i].role, n = 0;
			for (int j = 0; j < m->ninputs; j++)
				n += m->inputs[j].role == role;
			char by[64] = "";
			if (n == 1 && role != RT_ROLE_OTHER)
				snprintf(by, sizeof by, "%s FILE or ", opt[role == RT_ROLE_DATA ? 0 : 1]);
			char why[512];
			snprintf(why, sizeof why, "input '%s' has no data: give it with %s%s %s=FILE (once one input has data, every "
			         "one needs some; with no data option at all, every input is synthetic)", m->inputs[i].name, by,
			         opt[2], m->inputs[i].name);
			rt_usage("%s", why);
		}
	return any;
}

/* the training data (files, else synthetic) and the validation data, every file read and checked before
 * any work; under mpirun, the ranks' agreement on them. Whether there is validation data. */
static bool load_inputs(RtCtx *c, const RtOpts *o, RtData *data, RtData *val, bool *synthetic, bool saves_state)
{
	const RtModel *m = c->model;
	/* inputs: files first, so that errors come before any work */
	memset(data, 0, sizeof(RtData) * RT_MAX_INPUTS);
	static const char *const train_opt[3] = {"--data", "--labels", "--input"};
	*synthetic = !bind_inputs(m, data, train_opt, o->data, o->labels, o->input_name, o->input_file, o->ninput_files);
	if (*synthetic)
		rt_synthesize(data, m, (uint64_t)o->seed);
	if (rt_distributed) {
		if (!c->dev->collective)
			rt_fail(1, "%d ranks: data parallelism on this device (%s) is not built yet; it runs on the CPU", rt_nranks,
			        c->dev->name);
		if (o->dump_grads || o->gradcheck)
			rt_usage("%s", o->gradcheck ? "--gradcheck runs in one process, not under mpirun"
			                           : "--dump-grads under mpirun is not built yet: it would dump one rank's gradients");
		ranks_agree(m, o, data, saves_state);
	}
	/* validation: rows for every input, by role or by name, as training's */
	memset(val, 0, sizeof(RtData) * RT_MAX_INPUTS);
	static const char *const val_opt[3] = {"--val-data", "--val-labels", "--val-input"};
	return bind_inputs(m, val, val_opt, o->val_data, o->val_labels, o->val_name, o->val_file, o->nval_files);
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

static void announce(RtCtx *c, const RtOpts *o, const Run *r, int64_t param_bytes, int threads, bool synthetic)
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
	       m->model, m->nparams - nbuf, bufs, (long long)count, mib(param_bytes), rt_precision(m), c->dev->name,
	       mib(r->predicted), mib(m->plan_params), mib(m->plan_grads),
	       !m->plan_opt ? "" : !m->mixed ? " + adam state " : m->adam ? " + f32 master copies, sums and adam state " : " + f32 master copies and sums ",
	       m->plan_opt ? mib(m->plan_opt) : "", mib(m->plan_inputs), mib(m->plan_tape),
	       m->plan_slots ? " + streaming slots " : "", m->plan_slots ? mib(m->plan_slots) : "", mib(m->plan_work),
	       m->plan_snap ? " (snapshots among it, " : "", m->plan_snap ? mib(m->plan_snap) : "", m->plan_snap ? " in all)" : "");
	char slots[96] = "";
	if (m->nslots)
		snprintf(slots, sizeof slots, ", %d device slots per tensor (%s), %d ahead", m->nslots, mib(m->plan_slots),
		         m->ahead);
	if (m->host)
		printf("%s: streaming: host pool %s%s; per step %s host->device, %s device->host\n", m->model, mib(m->host),
		       slots, mib(m->xfer_h2d[1]), mib(m->xfer_d2h[1]));
	if (rt_distributed) {
		int64_t g = grad_bytes(m, false);
		printf("%s: %d rank%s (mpirun): each trains on its %lld rows of every global batch of %lld, the gradients "
		       "(%s) summed across the ranks each step\n", m->model, rt_nranks, rt_nranks == 1 ? "" : "s",
		       (long long)(m->ninputs ? rt_batch_rows(&m->inputs[0]) : 1),
		       (long long)(rt_nranks * (m->ninputs ? rt_batch_rows(&m->inputs[0]) : 1)), mib(g));
	}
	if (m->stream_numel) {
		char sums[96] = "";
		if (c->sums)
			snprintf(sums, sizeof sums, "; the micro-batches' gradients are summed there, in %s of pinned memory",
			         mib(sums_bytes(m)));
		printf("%s: the streamed parameters' %lld values are updated on the host by %d thread%s, where their %s "
		       "%s; each micro-batch moves %.4g bytes a value host->device and %.4g device->host\n", m->model,
		       (long long)m->stream_numel, threads, threads == 1 ? "" : "s",
		       m->mixed ? "f32 master copies and optimizer state stay" : "optimizer state stays", sums,
		       (double)m->xfer_h2d[1] / (double)m->stream_numel, (double)m->xfer_d2h[1] / (double)m->stream_numel);
	}
}

/* what the phases of main() share */
typedef struct {
	RtOpts o;
	RtModel model;
	RtCtx ctx;
	RtData data[RT_MAX_INPUTS], val[RT_MAX_INPUTS]; /* the training and validation data */
	bool validate, saves_state;
	bool synthetic;               /* no data option: every input synthetic (said on the first line) */
	int host_threads;             /* the threads of the streamed parameters' steps on the host */
	void *host[RT_MAX_PARAMS];    /* the parameters on the host (the pool's, for streamed ones) */
	void *mom[2 * RT_MAX_PARAMS]; /* adam's moments on the host, for state files */
	void *gbuf[RT_MAX_PARAMS];    /* --clip-grad: the resident gradients on the host */
	unsigned char *loss_slots;    /* pinned, per fence slot: the loss, then each report */
	int nres;                     /* 1 + the reports */
	long start;                   /* the step the run starts at (resumed: the state's) */
	Run r;
	char *rank_paths[7];          /* under mpirun, the outputs' paths made for this rank */
	int64_t param_bytes;
	double t_start, t0;           /* the run's start, and the training's */
} Session;

/* the command line, each output checked writable now; under mpirun, each rank's paths */
static void options(Session *S, int argc, char **argv)
{
	RtOpts *o = &S->o;
	rt_parse_opts(o, argc, argv);
	/* every rank's host and cores, under the start-up handshake's deadline */
	rt_dist_start(o->collective_timeout);
	/* every rank takes part in a save (sharded moments are gathered), rank 0 writes it */
	S->saves_state = o->save_state != NULL;
	/* data parallelism: rank 0 speaks and writes; a path with %r is every rank's own */
	const char **paths[7] = {&o->save, &o->dump_grads, &o->summary, &o->log_json, &o->trace, &o->memplot, &o->save_state};
	for (int i = 0; i < 7 && rt_distributed; i++)
		*paths[i] = rank_path(*paths[i], &S->rank_paths[i]);
	if (rt_rank > 0)
		o->quiet = true;
	/* outputs: writable now, not only after the training; a signal during a
	 * write removes its temporary file */
	rt_cleanup_on_signals();
	const char *outputs[7] = {o->save, o->dump_grads, o->summary, o->log_json, o->trace, o->memplot, o->save_state};
	for (int i = 0; i < 7; i++)
		if (outputs[i])
			rt_check_output(outputs[i]);
}

/* the model compiled in, checked against the command line, and its device */
static void open_model(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	rt_parse_desc(m, dp_model_desc);
	check_compiled(m, o);
	c->dev = &rt_cpu_device;
	if (dp_ptx[0]) {
		if (!&rt_cuda_device)
			rt_fail(70, "internal error: a CUDA executable linked without the CUDA runtime");
		c->dev = &rt_cuda_device;
	}
	c->model = m;
	if (o->graph && !c->dev->graph_begin)
		rt_usage("%s", "--graph needs a GPU, and this executable was compiled for the CPU (dpc --target cuda)");
}

/* the training and validation data, and the threads that run the step */
static void read_data(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	RtData *data = S->data, *val = S->val;
	S->validate = load_inputs(c, o, data, val, &S->synthetic, S->saves_state);
	rt_choose_threads(o->threads);
	rt_verbose = o->verbose;
	if (o->verbose) {
		char rank[160] = "";
		if (rt_distributed)
			rt_dist_where(rank, sizeof rank);
		fprintf(stderr, "%s%s: %d thread%s (%s)\n", m->model, rank, rt_threads, rt_threads == 1 ? "" : "s", rt_threads_why);
	}
	if (rt_distributed && !o->quiet)
		rt_dist_warn_binding(m->model);
}

/* every buffer: the pinned batch and loss slots, the host pool, the parameters (initialised, loaded
 * or resumed) and the one device allocation, the planned arena; then the run's first lines */
static void allocate(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	RtData *data = S->data, *val = S->val;
	void **host = S->host, **mom = S->mom, **gbuf = S->gbuf;
	c->dev->init();
	/* Steps are queued one ahead of the host: step s's batch and loss go
	 * through pinned slot s % 2, free again once fence s % 2 is passed. */
	for (int k = 0; k < m->ninputs; k++)
		for (int i = 0; i < RT_INFLIGHT; i++) {
			data[k].batch[i] = pinned(c, m->inputs[k].bytes, m->inputs[k].name);
			val[k].batch[i] = data[k].batch[i]; /* validation runs between steps, all of them done */
		}
	/* per fence slot: the loss, then each report */
	S->nres = 1 + m->nreports;
	S->loss_slots = pinned(c, 8 * RT_INFLIGHT * S->nres, "the loss");

	/* the pinned host pool: streamed parameters live there, and the copy stream reads and writes it */
	if (m->host) {
		c->pool = pinned(c, m->host, "the host pool (streamed parameters, host snapshots, offloaded values)");
		memset(c->pool, 0, (size_t)m->host);
	}
	S->param_bytes = 0;
	for (int i = 0; i < m->nparams; i++) {
		RtTensor *t = &m->params[i];
		host[i] = t->streamed ? c->pool + t->host : rt_host_alloc(t->bytes, t->name);
		S->param_bytes += t->bytes;
	}
	/* adam's moments on the host, for state files: the pool's for streamed parameters */
	for (int i = 0; m->adam && (S->saves_state || o->resume) && i < m->nparams; i++) {
		RtTensor *t = &m->params[i];
		if (t->buffer)
			continue;
		mom[2 * i] = t->streamed ? c->pool + t->host_m : rt_host_alloc(t->bytes, t->name);
		mom[2 * i + 1] = t->streamed ? c->pool + t->host_v : rt_host_alloc(t->bytes, t->name);
	}
	for (int i = 0; o->clip_set && i < m->nparams; i++)
		if (!m->params[i].buffer && !m->params[i].streamed)
			gbuf[i] = rt_host_alloc(m->params[i].bytes, "gradients");
	/* the streamed parameters' steps run on the host: with --accum K > 1 (or, under bf16-mixed, across ranks)
	 * it sums their micro-batches' gradients in their dtype; clipping and ranks defer the steps to after
	 * the step's gradients are all there */
	if (m->stream_numel) {
		S->host_threads = rt_threads;
		rt_host_init(c, S->host_threads);
		c->deferred = o->clip_set || rt_distributed;
		if (o->accum > 1 || (rt_distributed && m->mixed)) {
			int64_t at = 0;
			for (int i = 0; i < m->nparams; i++)
				if (m->params[i].streamed && !m->params[i].buffer)
					c->sums_at[i] = at, at += m->params[i].bytes;
			c->sums = pinned(c, at, "the sums of the streamed parameters' gradients");
		}
	}
	S->start = 0;
	if (o->resume)
		S->start = rt_load_state(o->resume, m, o, host, mom);
	else if (o->init)
		rt_load_safetensors(o->init, m, host);
	else if (m->weights[0]) { /* the program's `weights "FILE"` */
		if (access(m->weights, R_OK) != 0)
			rt_fail(1, "cannot read %s, the weights file this model starts from: %s (give another with --init FILE)",
			        m->weights, strerror(errno));
		rt_load_safetensors(m->weights, m, host);
	}
	else
		init_params(m, host, (uint64_t)o->seed);
	if (rt_distributed)
		ranks_start_alike(m, o, S->start, host, mom);

	/* one device allocation: the planned arena, optimizer state included */
	*r = (Run){.first = NAN, .last = NAN, .val = NAN, .predicted = m->arena};
	c->base = rt_device_alloc(c, r->predicted);
	for (int i = 0; i < m->nparams; i++)
		if (!m->params[i].streamed)
			rt_h2d(c, c->base + (uint64_t)m->params[i].offset, host[i], m->params[i].bytes);
	for (int i = 0; S->start && m->adam && i < m->nparams; i++) {
		RtTensor *t = &m->params[i];
		if (!t->streamed && !t->buffer) {
			/* whole, or this rank's share */
			int64_t n, lo = rt_share(t, m->ranks == 1 ? 0 : rt_rank, m->ranks, &n), esz = rt_elem_bytes(t->dtype);
			rt_h2d(c, c->base + (uint64_t)t->opt_m, (char *)mom[2 * i] + lo * esz, n * esz);
			rt_h2d(c, c->base + (uint64_t)t->opt_v, (char *)mom[2 * i + 1] + lo * esz, n * esz);
			r->extra_h2d += 2 * n * esz;
		}
	}
	/* bf16-mixed: the compute copies of the master copies just loaded */
	for (int i = 0; i < m->nparams; i++)
		rt_refresh(c, &m->params[i]);
	r->start = S->start;
	c->lr = o->lr;
	c->decay = o->weight_decay;
	c->gscale = 1.0 / rt_nranks; /* the update averages the ranks' summed gradients */
	c->seed = (uint64_t)o->seed;

	if (!o->quiet)
		announce(c, o, r, S->param_bytes, S->host_threads, S->synthetic);
}

/* after the last step: the profile, the memory picture, the trace, the parameters saved, the summary
 * and the last line */
static void finish(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	void **host = S->host;
	c->dev->sync();
	rt_host_drain(); /* the last step's host updates: the run's time includes them */
	double t1 = now();
	if (o->profile)
		rt_prof_report(c, o->steps);
	if (o->memplot)
		memplot(c, o);
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
		download_params(c, host, false);
	if (r->checked)
		ranks_identical(c, host);
	if (o->save) {
		rt_save_safetensors(o->save, m, host, false);
		r->saved = true;
	}
	r->save_s += now() - t1;
	if (o->summary)
		write_summary(c, o, r);
	if (rt_rank > 0)
		; /* rank 0 speaks for the ranks */
	else if (!r->steps && S->start)
		printf("%s: resumed at step %ld of %ld: nothing left to train\n", m->model, S->start, o->steps);
	else
		printf("%s: %ld steps, loss %.6g -> %.6g, %.3f s, peak device memory %s\n", m->model, r->steps, r->first, r->last,
		       r->train_s, mib(c->n.peak_device_bytes));
}

/* the training loop, then its reports and saves; the exit status */
static int train(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	RtData *data = S->data, *val = S->val;
	void **host = S->host, **mom = S->mom, **gbuf = S->gbuf;
	double t0 = S->t0 = now();
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
	/* under mpirun each rank's output is a terminal of Open MPI's, whatever the user's is: lines */
	Progress pg = {.tty = isatty(STDOUT_FILENO) && !rt_distributed};
	for (int k = 0; k < m->ninputs && !pg.tokens; k++)
		if (m->inputs[k].ids)
			pg.tokens = m->inputs[k].numel;
	if (o->log_json && !(pg.log = fopen(o->log_json, "w")))
		rt_fail(1, "cannot write %s: %s", o->log_json, strerror(errno));
	/* Step s is queued before step s - 1's loss is read: the device never
	 * waits for the host between steps. */
	for (long s = S->start; s <= o->steps; s++) {
		int slot = (int)(s % RT_INFLIGHT);
		if (s < o->steps) {
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
				micro[slot] += read_loss(c);
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
			run_step(c, o, s, r);
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
				double t = now();
				void *g[RT_MAX_PARAMS] = {0};
				for (int i = 0; i < m->nparams; i++)
					g[i] = rt_host_alloc(m->params[i].bytes, "gradients");
				download_params(c, g, true);
				for (int i = 0; i < m->nparams; i++)
					if (m->params[i].streamed && !m->params[i].buffer)
						rt_streamed_grad(c, i, g[i]);
				rt_save_safetensors(o->dump_grads, m, g, true);
				for (int i = 0; i < m->nparams; i++)
					free(g[i]);
				r->save_s += now() - t;
			}
			rt_optimizer_step(c, o, gbuf);
			if (c->record) {
				rt_prof_mark(c, RT_CALL_PHASE, "");
				c->dev->copy_timing(false);
			}
			c->record = false;
			moved[slot] = c->n.h2d_bytes + c->n.d2h_bytes - before;
			c->dev->fence(slot);
			/* the validation loss after step s + 1: the training step's input slots are free once it is done */
			if (S->validate && (((s + 1) % o->eval_every == 0) || s + 1 == o->steps)) {
				double t = now(), rep[16];
				c->dev->sync();
				r->val = mean_loss(c, val, batches(m, val), rep);
				r->val_step = s + 1;
				double dt = now() - t;
				r->val_s += dt, r->save_s += dt;
			}
			/* --save-state after step s + 1, before step s + 2 is queued; not a state whose loss is not finite */
			if (S->saves_state && ((o->save_every && (s + 1) % o->save_every == 0) || s + 1 == o->steps)) {
				double t = now();
				c->dev->sync();
				/* across ranks, any rank's loss not finite: none saves */
				double bad = !isfinite(rt_get(S->loss_slots + 8 * S->nres * slot, m->loss_dtype, 0));
				if (rt_distributed)
					rt_dist_sum(&bad, 1, "f64", "the check that every rank's loss is finite before the state is saved");
				if (!bad) {
					int64_t d2h = c->n.d2h_bytes;
					download_params(c, host, false);
					download_moments(c, mom);
					if (o->save_state)
						rt_save_state(o->save_state, m, o, host, mom, s + 1);
					r->extra_d2h += c->n.d2h_bytes - d2h;
				}
				r->save_s += now() - t;
			}
			if (s == S->start) {
				c->dev->sync();
				r->first_s = now() - t0 - r->save_s;
			}
			if (sync_dev)
				t_done[slot] = now() - t0 - r->save_s;
		}
		if (s == S->start)
			continue;
		/* step s - 1 is done: its loss */
		int prev = (int)((s - 1) % RT_INFLIGHT);
		c->dev->fence_wait(prev);
		if (!sync_dev)
			t_done[prev] = now() - t0 - r->save_s;
		r->last = (rt_get(S->loss_slots + 8 * S->nres * prev, m->loss_dtype, 0) + micro[prev]) / (double)o->accum;
		micro[prev] = 0;
		for (int i = 0; i < m->nreports; i++)
			r->report[i] = rt_get(S->loss_slots + 8 * (S->nres * prev + 1 + i), m->reports[i].dtype, 0);
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
		if (s == S->start + 1)
			r->first = r->last;
		long done = s;
		r->steps = s - S->start;
		if (!isfinite(r->last)) {
			c->dev->sync();
			r->train_s = now() - t0 - r->save_s;
			if (o->summary)
				write_summary(c, o, r);
			rt_fail(1, "the loss is not finite at step %ld (%g); try a smaller --lr", done, r->last);
		}
		progress(&pg, o, m, r, done, t_done[prev], moved[prev]);
	}
	if (pg.log && fclose(pg.log))
		rt_fail(1, "cannot write %s: %s", o->log_json, strerror(errno));
	rt_json_free(&pg.json);
	finish(S);
	return 0;
}

/* everything back, so that a leak checker sees a clean exit */
static void release(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	RtData *data = S->data, *val = S->val;
	void **host = S->host, **mom = S->mom, **gbuf = S->gbuf;
	c->dev->sync();
	/* the host's last steps of the streamed units read and write the pool and the sums */
	if (m->stream_numel)
		rt_host_finish(m);
	c->dev->free(c->base);
	for (int i = 0; i < m->nparams; i++)
		if (!m->params[i].streamed)
			free(host[i]);
	if (c->pool)
		c->dev->host_free(c->pool);
	if (c->sums)
		c->dev->host_free(c->sums);
	for (int i = 0; i < 2; i++)
		if (c->actions[i])
			c->dev->host_free(c->actions[i]);
	for (int i = 0; i < c->nkept; i++)
		c->dev->host_free(c->kept[i]);
	free(c->kept);
	for (int k = 0; k < m->ninputs; k++) {
		free(data[k].rows);
		free(data[k].perm);
		for (int i = 0; i < RT_INFLIGHT; i++)
			c->dev->host_free(data[k].batch[i]);
	}
	for (int k = 0; k < m->ninputs; k++)
		free(val[k].rows), free(val[k].perm);
	for (int i = 0; i < 2 * m->nparams; i++)
		if (!m->params[i / 2].streamed)
			free(mom[i]);
	for (int i = 0; i < m->nparams; i++)
		free(gbuf[i]);
	c->dev->host_free(S->loss_slots);
	for (int f = 0; f < o->ninput_files; f++)
		free((char *)o->input_name[f]);
	for (int f = 0; f < o->nval_files; f++)
		free((char *)o->val_name[f]);
	for (int i = 0; i < 7; i++)
		free(S->rank_paths[i]);
}

int main(int argc, char **argv)
{
	static Session S;
	S.t_start = now();
	const char *slash = strrchr(argv[0], '/');
	rt_prog = slash ? slash + 1 : argv[0];
	rt_dist_init(&argc, &argv);
	options(&S, argc, argv);
	open_model(&S);
	read_data(&S);
	allocate(&S);
	int status;
	if (S.o.eval) {
		status = evaluate(&S.ctx, &S.o, S.data);
	} else if (S.o.gradcheck) {
		rt_upload_batch(&S.ctx, S.data, 0, 0, false);
		status = gradcheck(&S.ctx, &S.o, S.host);
	} else {
		status = train(&S);
	}
	release(&S);
	rt_dist_finish();
	return status;
}
