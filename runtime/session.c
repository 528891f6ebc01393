/* session: one training session's phases: the options, the model compiled in, the data, every
 * buffer (parameters initialised, loaded or resumed), the parameters' way down, and everything back. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"
#include "../common/rng.h"

bool rt_tf32, rt_conv_fp32, rt_verbose;

/* the batches that hold a data set's rows once (at least one) */
long rt_batches(const RtModel *m, const RtData *data)
{
	long nb = m->ninputs ? (long)(data[0].n / rt_batch_rows(&m->inputs[0])) : 1;
	return nb < 1 ? 1 : nb;
}

/* the forward program on nb batches of data in turn, dropout off, nothing updated: the mean loss,
 * and the reports' means in rep */
double rt_mean_loss(RtCtx *c, RtData *data, long nb, double *rep)
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
		loss += rt_read_loss(c);
		for (int i = 0; i < m->nreports; i++) {
			rt_d2h(c, buf, c->base + (uint64_t)m->reports[i].offset, rt_elem_bytes(m->reports[i].dtype));
			rep[i] += rt_get(buf, m->reports[i].dtype, 0) / (double)nb;
		}
	}
	c->eval = false;
	return loss / (double)nb;
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

double rt_read_loss(RtCtx *c)
{
	unsigned char buf[8];
	rt_d2h(c, buf, c->base + (uint64_t)c->model->loss, rt_elem_bytes(c->model->loss_dtype));
	return rt_get(buf, c->model->loss_dtype, 0);
}


/* page-locked host memory, allocated once at start; nothing has been written yet when it fails */
void *rt_pinned(RtCtx *c, int64_t bytes, const char *what)
{
	void *p = c->dev->host_alloc(bytes > 0 ? bytes : 1);
	if (!p)
		rt_fail(1, "cannot allocate %lld bytes (%s) of pinned host memory for %s", (long long)bytes, rt_mib(bytes), what);
	return p;
}


/* adam's resident moments to the host; the streamed ones are in the pool */
void rt_download_moments(RtCtx *c, void **mom)
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

/* resident parameters (or their gradients) to the host; streamed ones are there already */


void rt_download_params(RtCtx *c, void **host, bool grads)
{
	c->dev->sync();
	rt_host_drain(); /* the streamed ones' steps write them in the pool */
	for (int i = 0; i < c->model->nparams; i++) {
		RtTensor *t = &c->model->params[i];
		if (!t->streamed && !(grads && t->buffer))
			rt_d2h(c, host[i], c->base + (uint64_t)(grads ? t->grad : t->offset), t->bytes);
	}
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
	for (int k = 0; o->in_order && k < m->ninputs; k++)
		data[k].shuffle = false;
	if (*synthetic)
		rt_synthesize(data, m, (uint64_t)o->seed);
	if (rt_distributed) {
		if (!c->dev->collective)
			rt_fail(1, "%d ranks: data parallelism on this device (%s) is not built yet; it runs on the CPU", rt_nranks,
			        c->dev->name);
		if (o->dump_grads || o->gradcheck)
			rt_usage("%s", o->gradcheck ? "--gradcheck runs in one process, not under mpirun"
			                           : "--dump-grads under mpirun is not built yet: it would dump one rank's gradients");
		rt_ranks_agree(m, o, data, saves_state);
	}
	/* validation: rows for every input, by role or by name, as training's */
	memset(val, 0, sizeof(RtData) * RT_MAX_INPUTS);
	static const char *const val_opt[3] = {"--val-data", "--val-labels", "--val-input"};
	return bind_inputs(m, val, val_opt, o->val_data, o->val_labels, o->val_name, o->val_file, o->nval_files);
}



/* the command line, each output checked writable now; under mpirun, each rank's paths */
void rt_options(Session *S, int argc, char **argv)
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
		*paths[i] = rt_rank_path(*paths[i], &S->rank_paths[i]);
	if (rt_rank > 0)
		o->quiet = true;
	/* outputs: writable now, not only after the training; a signal during a
	 * write removes its temporary file */
	if (!S->api)
		rt_cleanup_on_signals();
	const char *outputs[7] = {o->save, o->dump_grads, o->summary, o->log_json, o->trace, o->memplot, o->save_state};
	for (int i = 0; i < 7; i++)
		if (outputs[i])
			rt_check_output(outputs[i]);
}

/* the model compiled in, checked against the command line, and its device */
void rt_open_model(Session *S)
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
void rt_read_data(Session *S)
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

/* the parameters and buffers on the host, and adam's moments where a state was resumed (S->start > 0),
 * up to the device; under bf16-mixed the compute copies made again from the master copies */
void rt_upload_state(Session *S)
{
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	void **host = S->host, **mom = S->mom;
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
}

/* every buffer: the pinned batch and loss slots, the host pool, the parameters (initialised, loaded
 * or resumed) and the one device allocation, the planned arena; then the run's first lines */
void rt_allocate(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	RtData *data = S->data, *val = S->val;
	void **host = S->host, **mom = S->mom, **gbuf = S->gbuf;
	c->dev->init();
	S->dev_up = true;
	/* Steps are queued one ahead of the host: step s's batch and loss go
	 * through pinned slot s % 2, free again once fence s % 2 is passed. */
	for (int k = 0; k < m->ninputs; k++)
		for (int i = 0; i < RT_INFLIGHT; i++) {
			data[k].batch[i] = rt_pinned(c, m->inputs[k].bytes, m->inputs[k].name);
			val[k].batch[i] = data[k].batch[i]; /* validation runs between steps, all of them done */
			S->put[k].batch[i] = data[k].batch[i]; /* the API's batches, one step at a time */
		}
	/* per fence slot: the loss, then each report */
	S->nres = 1 + m->nreports;
	S->loss_slots = rt_pinned(c, 8 * RT_INFLIGHT * S->nres, "the loss");

	/* the pinned host pool: streamed parameters live there, and the copy stream reads and writes it */
	if (m->host) {
		c->pool = rt_pinned(c, m->host, "the host pool (streamed parameters, host snapshots, offloaded values)");
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
			c->sums = rt_pinned(c, at, "the sums of the streamed parameters' gradients");
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
		rt_ranks_start_alike(m, o, S->start, host, mom);

	/* one device allocation: the planned arena, optimizer state included */
	*r = (Run){.first = NAN, .last = NAN, .val = NAN, .predicted = m->arena};
	c->base = rt_device_alloc(c, r->predicted);
	rt_upload_state(S);
	r->start = S->start;
	c->lr = o->lr;
	c->decay = o->weight_decay;
	c->gscale = 1.0 / rt_nranks; /* the update averages the ranks' summed gradients */
	c->seed = (uint64_t)o->seed;

	if (!o->quiet)
		rt_announce(c, o, r, S->param_bytes, S->host_threads, S->synthetic && !S->api); /* a host program puts its batches */
}



/* everything back, so that a leak checker sees a clean exit */
void rt_release(Session *S)
{
	RtOpts *o = &S->o;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	RtData *data = S->data, *val = S->val;
	void **host = S->host, **mom = S->mom, **gbuf = S->gbuf;
	/* a session that failed on its way up gives back what it had (host_free, free: NULL is nothing) */
	if (S->dev_up) {
		c->dev->sync();
		/* the host's last steps of the streamed units read and write the pool and the sums */
		if (m->stream_numel)
			rt_host_finish(m);
		if (c->base)
			c->dev->free(c->base);
	}
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
		free(S->put[k].rows);
		for (int i = 0; i < RT_INFLIGHT; i++)
			if (data[k].batch[i])
				c->dev->host_free(data[k].batch[i]);
	}
	for (int k = 0; k < m->ninputs; k++)
		free(val[k].rows), free(val[k].perm);
	for (int i = 0; i < 2 * m->nparams; i++)
		if (!m->params[i / 2].streamed)
			free(mom[i]);
	for (int i = 0; i < m->nparams; i++)
		free(gbuf[i]);
	if (S->loss_slots)
		c->dev->host_free(S->loss_slots);
	for (int f = 0; f < o->ninput_files; f++)
		free((char *)o->input_name[f]);
	for (int f = 0; f < o->nval_files; f++)
		free((char *)o->val_name[f]);
	for (int i = 0; i < 7; i++)
		free(S->rank_paths[i]);
	/* the description's tables (rt_parse_desc) */
	for (int i = 0; i < m->nkname; i++)
		free(m->kname[i]);
	free(m->kname), free(m->kwork), free(m->kpred), free(m->mem_series);
}


