/* api: dpc.h, the C interface of a model built as a library (dpc --emit=lib), over the session's
 * phases (session.c) and steps (train.c). The executable's main is a client of it (main.c).
 *
 * Failures inside the runtime go through rt_fail, which exits an executable that sets no trap; every
 * call here sets one (ENTER), so that a failure comes back as a code and a message. A refused call
 * checks everything before it changes anything. */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpc.h"
#include "session.h"

#define MAX_ARGS 512

struct DpcSession {
	Session S;
	bool open;          /* between dpc_open and dpc_close */
	bool up;            /* dpc_open got to its end */
	bool ran;           /* dpc_run ran: its closing work is done */
	bool put_any;       /* some input has a batch put: every step reads the puts */
	bool dev_read[RT_MAX_INPUTS]; /* a batch put in device memory was read by a step: put it again */
	bool dev_put[RT_MAX_INPUTS];
	char *args[MAX_ARGS + 1];
	int nargs;
	char err[2048];
	char open_err[1950]; /* why dpc_open failed */
};

/* one session a process: the runtime's device, threads and options are the process's */
static DpcSession the;
static char open_error[2048]; /* dpc_open's refusal where it gives no session */

bool rt_executable; /* main.c: the session is the executable's (signals, messages) */

static int fail(DpcSession *s, int code, const char *fmt, const char *arg)
{
	snprintf(s->err, sizeof s->err, fmt, arg);
	return code;
}

/* after rt_fail jumped back to a call's trap: its message the session's, its status the call's code */
static int trapped(DpcSession *s)
{
	rt_fail_trap = NULL;
	snprintf(s->err, sizeof s->err, "%s", rt_fail_msg);
	return rt_fail_status == 2 ? DPC_ERR_USAGE : rt_fail_status == 1 ? DPC_ERR_RUN : DPC_ERR_INTERNAL;
}

/* every call: the session open and up (or its reason), then a trap for rt_fail around the call's body */
#define ENTER(s)                      \
	jmp_buf trap_;                    \
	int ready_ = ready(s);            \
	if (ready_ != DPC_OK)             \
		return ready_;                \
	if (setjmp(trap_))                \
		return trapped(s);            \
	rt_fail_trap = &trap_
#define LEAVE(code) return (rt_fail_trap = NULL, (code))

static int ready(DpcSession *s)
{
	if (!s)
		return DPC_ERR_STATE;
	if (!s->open)
		return fail(s, DPC_ERR_STATE, "%s", "the session is closed");
	if (!s->up) {
		snprintf(s->err, sizeof s->err, "the session did not open (%.1900s); close it", s->open_err);
		return DPC_ERR_STATE;
	}
	s->err[0] = 0;
	return DPC_OK;
}

int dpc_version(void) { return DPC_API_VERSION; }

int dpc_open(DpcSession **out, int argc, const char *const *argv)
{
	if (!out)
		return DPC_ERR_USAGE;
	*out = NULL;
	if (the.open) {
		snprintf(open_error, sizeof open_error, "a session of model %s is open in this process already: close it first",
		         the.S.model.model);
		return DPC_ERR_STATE;
	}
	if (argc < 0 || argc > MAX_ARGS || (argc && !argv)) {
		snprintf(open_error, sizeof open_error, "dpc_open takes 0 to %d options, not %d", MAX_ARGS, argc);
		return DPC_ERR_USAGE;
	}
	DpcSession *s = &the;
	memset(s, 0, sizeof *s);
	*out = s;
	s->open = true;
	Session *S = &s->S;
	S->api = !rt_executable;
	S->t_start = rt_now();
	/* the options point into their strings: the session keeps its own copies */
	s->args[0] = strdup(rt_prog);
	for (int i = 0; i < argc; i++)
		if (!(s->args[i + 1] = strdup(argv[i] ? argv[i] : "")))
			return fail(s, DPC_ERR_RUN, "%s", "out of host memory for the options");
	s->nargs = argc + 1;
	jmp_buf trap_;
	if (setjmp(trap_)) {
		snprintf(s->open_err, sizeof s->open_err, "%.1900s", rt_fail_msg);
		return trapped(s);
	}
	rt_fail_trap = &trap_;
	rt_options(S, s->nargs, s->args);
	rt_open_model(S);
	if (S->api) {
		/* the host program asks for each step: --steps is the schedule's horizon and --save-state's last
		 * step, where it is given; else there is no end */
		if (!S->o.steps_set) {
			if (S->o.schedule != RT_LR_CONSTANT)
				rt_usage("%s", "--lr-schedule other than constant needs --steps through the API: its length");
			if ((S->o.trace || S->o.memplot) && !S->o.trace_steps_set)
				rt_usage("%s", "--trace and --memplot through the API need --trace-steps FIRST:LAST (or --steps: the "
				         "last step is theirs)");
			if (S->o.profile)
				rt_usage("%s", "--profile through the API needs --steps N: it profiles step N");
			S->o.steps = 1000000000;
		}
		if (S->o.graph)
			rt_usage("%s", "--graph is the executable's for now");
	}
	rt_read_data(S);
	rt_allocate(S);
	S->done = S->start;
	s->up = true;
	LEAVE(DPC_OK);
}

const char *dpc_error(const DpcSession *s) { return s ? s->err : open_error; }

const char *dpc_model(const DpcSession *s) { return s && s->up ? s->S.model.model : ""; }
int dpc_inputs(const DpcSession *s) { return s && s->up ? s->S.model.ninputs : 0; }
int dpc_params(const DpcSession *s) { return s && s->up ? s->S.model.nparams : 0; }
int dpc_reports(const DpcSession *s) { return s && s->up ? s->S.model.nreports : 0; }
const char *dpc_optimizer(const DpcSession *s) { return s && s->up ? (s->S.model.adam ? "adam" : "sgd") : ""; }
long dpc_steps_done(const DpcSession *s) { return s && s->up ? s->S.done : 0; }

static void describe(const RtTensor *t, int kind, DpcTensor *d)
{
	memset(d, 0, sizeof *d);
	d->name = t->name;
	d->file = t->saved[0] ? t->saved : t->name;
	d->dtype = t->dtype;
	d->rank = t->rank;
	for (int i = 0; i < t->rank && i < 8; i++)
		d->dims[i] = t->dim[i];
	d->bytes = t->bytes;
	d->kind = kind;
	d->classes = t->classes;
}

int dpc_input(const DpcSession *s, int i, DpcTensor *t)
{
	if (!s || !s->up || !t || i < 0 || i >= s->S.model.ninputs)
		return DPC_ERR_USAGE;
	describe(&s->S.model.inputs[i], DPC_INPUT, t);
	return DPC_OK;
}

int dpc_param(const DpcSession *s, int i, DpcTensor *t)
{
	if (!s || !s->up || !t || i < 0 || i >= s->S.model.nparams)
		return DPC_ERR_USAGE;
	const RtTensor *p = &s->S.model.params[i];
	describe(p, p->buffer ? DPC_BUFFER : DPC_PARAM, t);
	return DPC_OK;
}

/* a list of names for messages: "x, y, z" */
static const char *names(const RtTensor *t, int n)
{
	static char buf[1024];
	size_t len = 0;
	buf[0] = 0;
	for (int i = 0; i < n; i++) {
		size_t k = strlen(t[i].name) + (i ? 2 : 0);
		if (len + k + 5 >= sizeof buf) { /* the list cut where the message would be too long */
			memcpy(buf + len, ", ...", 6);
			break;
		}
		memcpy(buf + len, ", ", i ? 2 : 0);
		memcpy(buf + len + (i ? 2 : 0), t[i].name, strlen(t[i].name) + 1);
		len += k;
	}
	return buf;
}

static const char *shape(int rank, const int64_t *dims)
{
	return rank >= 0 && rank <= RT_MAXRANK && dims ? rt_shape_str(rank, dims) : "(none)";
}

/* the batch's values, checked as a file's are (data.c): class labels in range, reals finite */
static const char *bad_value(const RtTensor *t, const void *data, int64_t n)
{
	static char why[256];
	bool labels = !strcmp(t->dtype, "i32");
	for (int64_t i = 0; i < n; i++) {
		double x = rt_get(data, t->dtype, i);
		if (labels && t->classes > 0 && (x < 0 || x >= t->classes) && !(t->has_ignore && x == t->ignore)) {
			snprintf(why, sizeof why, "entry %lld is %g, not a class in 0..%d of input '%s'", (long long)i, x,
			         t->classes - 1, t->name);
			return why;
		}
		if (!labels && !isfinite(x)) {
			snprintf(why, sizeof why, "entry %lld of input '%s' is not a finite number", (long long)i, t->name);
			return why;
		}
	}
	return NULL;
}

int dpc_put(DpcSession *s, const char *name, const void *data, const char *dtype, int rank, const int64_t *dims,
            int where)
{
	ENTER(s);
	Session *S = &s->S;
	RtModel *m = &S->model;
	RtCtx *c = &S->ctx;
	int k = -1;
	for (int i = 0; name && i < m->ninputs; i++)
		if (!strcmp(m->inputs[i].name, name))
			k = i;
	if (k < 0) {
		char why[1200];
		snprintf(why, sizeof why, "the model has no input named '%s' (its inputs: %s)", name ? name : "(null)",
		         names(m->inputs, m->ninputs));
		LEAVE(fail(s, DPC_ERR_USAGE, "%s", why));
	}
	const RtTensor *t = &m->inputs[k];
	char why[1024];
	bool same = rank == t->rank && dims;
	for (int i = 0; same && i < rank; i++)
		same = dims[i] == t->dim[i];
	if (!dtype || strcmp(dtype, t->dtype))
		snprintf(why, sizeof why, "input '%s' is %s, and the batch given is %s", t->name, t->dtype, dtype ? dtype : "(null)");
	else if (!same)
		snprintf(why, sizeof why, "input '%s' has shape %s, and the batch given has shape %s (a batch is the whole input)",
		         t->name, rt_shape_str(t->rank, t->dim), shape(rank, dims));
	else if (!data)
		snprintf(why, sizeof why, "input '%s': no data (NULL)", t->name);
	else if (where != DPC_HOST && where != DPC_DEVICE)
		snprintf(why, sizeof why, "input '%s': where is DPC_HOST or DPC_DEVICE, not %d", t->name, where);
	else if (where == DPC_DEVICE && c->dev == &rt_cpu_device)
		snprintf(why, sizeof why, "input '%s' is in device memory, and this library was compiled for the CPU: give host "
		         "memory (DPC_HOST)", t->name);
	else
		why[0] = 0;
	if (why[0])
		LEAVE(fail(s, DPC_ERR_USAGE, "%s", why));
	if (where == DPC_HOST) {
		const char *bad = bad_value(t, data, t->numel);
		if (bad)
			LEAVE(fail(s, DPC_ERR_USAGE, "%s", bad));
	}
	RtData *d = &S->put[k];
	if (where == DPC_DEVICE) {
		/* straight into the input's place in the arena, no host copy: the next step or evaluation reads it */
		c->dev->sync();
		c->dev->d2d(c->base + (uint64_t)t->offset, (uint64_t)(uintptr_t)data, t->bytes);
	} else {
		if (!d->rows)
			d->rows = rt_host_alloc(t->bytes, t->name);
		memcpy(d->rows, data, (size_t)t->bytes);
		d->n = rt_batch_rows(t);
		d->row = t->rank ? t->numel / d->n : 1;
	}
	d->on_device = where == DPC_DEVICE;
	s->dev_put[k] = where == DPC_DEVICE;
	s->dev_read[k] = false;
	S->put_set[k] = true;
	s->put_any = true;
	LEAVE(DPC_OK);
}

/* the inputs a step or an evaluation reads: the batches put, each input's (once any is), else the options'
 * data; NULL and the session's error where an input lacks a batch */
static RtData *batch_of(DpcSession *s, const char *what)
{
	Session *S = &s->S;
	const RtModel *m = &S->model;
	if (!s->put_any)
		return S->data;
	for (int k = 0; k < m->ninputs; k++) {
		if (!S->put_set[k]) {
			char why[512];
			snprintf(why, sizeof why, "input '%%s' has no batch for %s: once one input is put, every one is", what);
			fail(s, DPC_ERR_USAGE, why, m->inputs[k].name);
			return NULL;
		}
		if (s->dev_read[k]) {
			fail(s, DPC_ERR_USAGE, "input '%s' was put in device memory, where the last step or evaluation may have "
			     "used its place: put it again", m->inputs[k].name);
			return NULL;
		}
	}
	if (S->o.accum > 1) {
		fail(s, DPC_ERR_USAGE, "%s", "--accum K > 1 takes its micro-batches from the options' data; with batches put, "
		     "give one batch a step (--accum 1) and sum in the host program, or put larger batches");
		return NULL;
	}
	return S->put;
}

static void batch_read(DpcSession *s)
{
	for (int k = 0; k < s->S.model.ninputs; k++)
		s->dev_read[k] = s->dev_put[k];
}

static void keep_reports(DpcSession *s, const double *rep)
{
	for (int i = 0; i < s->S.model.nreports; i++)
		s->S.report[i] = rep[i];
}

int dpc_step(DpcSession *s, double *loss)
{
	ENTER(s);
	Session *S = &s->S;
	RtCtx *c = &S->ctx;
	Run *r = &S->r;
	if (s->ran)
		LEAVE(fail(s, DPC_ERR_STATE, "%s", "dpc_run has run this session's training: open another"));
	RtData *data = batch_of(s, "a step");
	if (!data)
		LEAVE(DPC_ERR_USAGE);
	if (!S->pg_open) {
		S->t0 = rt_now();
		r->setup_s = S->t0 - S->t_start;
		rt_progress_open(S);
	}
	long at = S->done;
	int slot = (int)(at % RT_INFLIGHT);
	double micro = 0;
	int64_t moved = 0;
	rt_queue_step(S, data, at, slot, &micro, &moved);
	batch_read(s);
	c->dev->fence_wait(slot);
	double t = rt_now() - S->t0 - r->save_s;
	if (at == S->start)
		r->first_s = t;
	S->done = at + 1;
	rt_step_done(S, at + 1, slot, micro);
	rt_progress(&S->pg, &S->o, &S->model, r, at + 1, t, moved);
	keep_reports(s, r->report);
	S->loss = r->last;
	if (loss)
		*loss = r->last;
	LEAVE(DPC_OK);
}

int dpc_eval(DpcSession *s, double *loss)
{
	ENTER(s);
	Session *S = &s->S;
	RtCtx *c = &S->ctx;
	RtData *data = batch_of(s, "an evaluation");
	if (!data)
		LEAVE(DPC_ERR_USAGE);
	/* without batches put: the validation data's mean, or the training data's first batch */
	long nb = 1;
	if (!s->put_any && S->validate)
		data = S->val, nb = rt_batches(&S->model, S->val);
	c->dev->sync();
	rt_host_drain(); /* the streamed parameters' last steps */
	double rep[16];
	double l = rt_mean_loss(c, data, nb, rep);
	batch_read(s);
	keep_reports(s, rep);
	S->loss = l;
	if (loss)
		*loss = l;
	LEAVE(DPC_OK);
}

int dpc_report(const DpcSession *s, int i, const char **name, double *value)
{
	if (!s || !s->up || i < 0 || i >= s->S.model.nreports)
		return DPC_ERR_USAGE;
	if (name)
		*name = s->S.model.reports[i].name;
	if (value)
		*value = s->S.report[i];
	return DPC_OK;
}

/* parameter `name` (its name, or its files' name), or -1 and the session's error */
static int param_named(DpcSession *s, const char *name)
{
	const RtModel *m = &s->S.model;
	for (int i = 0; name && i < m->nparams; i++)
		if (!strcmp(m->params[i].name, name) || (m->params[i].saved[0] && !strcmp(m->params[i].saved, name)))
			return i;
	char why[1200];
	snprintf(why, sizeof why, "the model has no parameter or buffer named '%s' (it has: %s)", name ? name : "(null)",
	         names(m->params, m->nparams));
	fail(s, DPC_ERR_USAGE, "%s", why);
	return -1;
}

/* what of parameter i on the host (host memory of the pool), or its place in the arena; the session's
 * error (and false) where it has none */
static bool place(DpcSession *s, int i, int what, bool set, unsigned char **host, uint64_t *dev)
{
	Session *S = &s->S;
	const RtModel *m = &S->model;
	const RtTensor *t = &m->params[i];
	RtCtx *c = &S->ctx;
	static const char *what_name[] = {"value", "gradient", "Adam's first moment", "Adam's second moment"};
	*host = NULL, *dev = 0;
	if (what < DPC_VALUE || what > DPC_ADAM_V) {
		char why[128];
		snprintf(why, sizeof why, "what is DPC_VALUE, DPC_GRAD, DPC_ADAM_M or DPC_ADAM_V, not %d", what);
		fail(s, DPC_ERR_USAGE, "%s", why);
		return false;
	}
	const char *none = NULL;
	if (what != DPC_VALUE && t->buffer)
		none = "a buffer, which is not trained";
	else if (what >= DPC_ADAM_M && !m->adam)
		none = "trained by sgd, which keeps no moments (dpc --optimizer adam compiles them in)";
	else if (what == DPC_GRAD && set)
		none = "made by each step: a gradient is read, not written";
	if (none) {
		char why[512];
		snprintf(why, sizeof why, "'%s' has no %s to %s: it is %s", t->name, what_name[what], set ? "write" : "read", none);
		fail(s, DPC_ERR_USAGE, "%s", why);
		return false;
	}
	if (what == DPC_VALUE)
		t->streamed ? (void)(*host = c->pool + t->host) : (void)(*dev = c->base + (uint64_t)t->offset);
	else if (what == DPC_GRAD)
		*dev = t->streamed ? 0 : c->base + (uint64_t)t->grad; /* streamed: rt_streamed_grad */
	else if (t->streamed)
		*host = c->pool + (what == DPC_ADAM_M ? t->host_m : t->host_v);
	else
		*dev = c->base + (uint64_t)(what == DPC_ADAM_M ? t->opt_m : t->opt_v);
	return true;
}

static bool size_fits(DpcSession *s, const RtTensor *t, int64_t bytes, const void *p)
{
	char why[512];
	if (!p)
		snprintf(why, sizeof why, "'%s': no buffer (NULL)", t->name);
	else if (bytes != t->bytes)
		snprintf(why, sizeof why, "'%s' is %s %s, %lld bytes; the buffer given is %lld bytes", t->name, t->dtype,
		         rt_shape_str(t->rank, t->dim), (long long)t->bytes, (long long)bytes);
	else
		return true;
	fail(s, DPC_ERR_USAGE, "%s", why);
	return false;
}

/* dpc_get's and dpc_set's parameter `name`, its place for `what` and the buffer's size checked, then the
 * device and the host's streamed steps done with it: its index, or -1 and the session's error */
static int reach(DpcSession *s, const char *name, int what, bool set, const void *p, int64_t bytes,
                 unsigned char **host, uint64_t *dev)
{
	int i = param_named(s, name);
	if (i < 0 || !place(s, i, what, set, host, dev) || !size_fits(s, &s->S.model.params[i], bytes, p))
		return -1;
	s->S.ctx.dev->sync();
	rt_host_drain(); /* the streamed parameters' steps read and write the pool */
	return i;
}

int dpc_get(DpcSession *s, const char *name, int what, void *dst, int64_t bytes)
{
	ENTER(s);
	RtCtx *c = &s->S.ctx;
	unsigned char *host;
	uint64_t dev;
	int i = reach(s, name, what, false, dst, bytes, &host, &dev);
	if (i < 0)
		LEAVE(DPC_ERR_USAGE);
	if (what == DPC_GRAD && !dev)
		rt_streamed_grad(c, i, dst);
	else if (host)
		memcpy(dst, host, (size_t)bytes);
	else
		rt_d2h(c, dst, dev, bytes);
	LEAVE(DPC_OK);
}

int dpc_set(DpcSession *s, const char *name, int what, const void *src, int64_t bytes)
{
	ENTER(s);
	RtCtx *c = &s->S.ctx;
	unsigned char *host;
	uint64_t dev;
	int i = reach(s, name, what, true, src, bytes, &host, &dev);
	if (i < 0)
		LEAVE(DPC_ERR_USAGE);
	if (host)
		memcpy(host, src, (size_t)bytes);
	else
		rt_h2d(c, dev, src, bytes);
	if (what == DPC_VALUE)
		rt_refresh(c, &s->S.model.params[i]); /* bf16-mixed: the compute copy of the new master */
	LEAVE(DPC_OK);
}

/* adam's moments on the host, for state files (allocate makes them only where the options save or resume) */
static void moments(Session *S)
{
	const RtModel *m = &S->model;
	for (int i = 0; m->adam && i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (t->buffer || S->mom[2 * i])
			continue;
		S->mom[2 * i] = t->streamed ? S->ctx.pool + t->host_m : rt_host_alloc(t->bytes, t->name);
		S->mom[2 * i + 1] = t->streamed ? S->ctx.pool + t->host_v : rt_host_alloc(t->bytes, t->name);
	}
}

int dpc_save(DpcSession *s, const char *path)
{
	ENTER(s);
	if (!path)
		LEAVE(fail(s, DPC_ERR_USAGE, "%s", "dpc_save: no path (NULL)"));
	Session *S = &s->S;
	rt_download_params(&S->ctx, S->host, false);
	rt_save_safetensors(path, &S->model, S->host, false);
	LEAVE(DPC_OK);
}

int dpc_save_state(DpcSession *s, const char *path)
{
	ENTER(s);
	if (!path)
		LEAVE(fail(s, DPC_ERR_USAGE, "%s", "dpc_save_state: no path (NULL)"));
	Session *S = &s->S;
	moments(S);
	rt_download_params(&S->ctx, S->host, false);
	rt_download_moments(&S->ctx, S->mom);
	rt_save_state(path, &S->model, &S->o, S->host, S->mom, S->done);
	LEAVE(DPC_OK);
}

int dpc_resume(DpcSession *s, const char *path)
{
	ENTER(s);
	if (!path)
		LEAVE(fail(s, DPC_ERR_USAGE, "%s", "dpc_resume: no path (NULL)"));
	Session *S = &s->S;
	const RtModel *m = &S->model;
	moments(S);
	S->ctx.dev->sync();
	rt_host_drain();
	/* the state read into buffers of this call's own where a failure would leave the session's live memory
	 * half-written: the streamed parameters and their moments, in the host pool (a resident parameter's
	 * host buffer is only the way to the device) */
	static void *into[3 * RT_MAX_PARAMS];
	void **mom_into = into + RT_MAX_PARAMS;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		into[i] = t->streamed ? rt_host_alloc(t->bytes, t->name) : S->host[i];
		for (int k = 0; k < 2; k++)
			mom_into[2 * i + k] = t->streamed && S->mom[2 * i + k] ? rt_host_alloc(t->bytes, t->name) : S->mom[2 * i + k];
	}
	jmp_buf inner;
	if (setjmp(inner)) {
		char why[sizeof rt_fail_msg];
		int status = rt_fail_status;
		memcpy(why, rt_fail_msg, sizeof why);
		for (int i = 0; i < m->nparams; i++)
			if (m->params[i].streamed)
				free(into[i]), free(mom_into[2 * i]), free(mom_into[2 * i + 1]);
		rt_fail_trap = &trap_;
		rt_fail(status, "%s", why);
	}
	rt_fail_trap = &inner;
	long step = rt_load_state(path, m, &S->o, into, mom_into);
	rt_fail_trap = &trap_;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (!t->streamed)
			continue;
		memcpy(S->host[i], into[i], (size_t)t->bytes);
		free(into[i]);
		for (int k = 0; k < 2; k++)
			if (S->mom[2 * i + k]) {
				memcpy(S->mom[2 * i + k], mom_into[2 * i + k], (size_t)t->bytes);
				free(mom_into[2 * i + k]);
			}
	}
	S->start = S->done = step;
	rt_upload_state(S);
	LEAVE(DPC_OK);
}

int dpc_run(DpcSession *s)
{
	ENTER(s);
	Session *S = &s->S;
	if (s->ran || S->done != S->start || S->pg_open)
		LEAVE(fail(s, DPC_ERR_STATE, "%s", "dpc_run runs a session's whole training, and this one has had steps"));
	s->ran = true;
	int status;
	if (S->o.eval) {
		status = rt_evaluate(&S->ctx, &S->o, S->data);
	} else if (S->o.gradcheck) {
		rt_upload_batch(&S->ctx, S->data, 0, 0, false);
		status = rt_gradcheck(&S->ctx, &S->o, S->host);
	} else {
		status = rt_train(S);
	}
	S->finished = true;
	LEAVE(status);
}

int dpc_close(DpcSession *s)
{
	if (!s || !s->open)
		return s ? fail(s, DPC_ERR_STATE, "%s", "the session is closed") : DPC_ERR_STATE;
	Session *S = &s->S;
	int code = DPC_OK;
	jmp_buf trap_;
	if (setjmp(trap_)) {
		/* the closing work failed: what it could not do is said; the rest is given back all the same */
		code = trapped(s);
		S->finished = true;
	}
	rt_fail_trap = &trap_;
	if (s->up && !S->finished && S->pg_open) {
		S->finished = true;
		rt_progress_close(S);
		rt_finish(S);
	}
	rt_fail_trap = NULL;
	rt_release(S);
	for (int i = 0; i < s->nargs; i++)
		free(s->args[i]);
	char err[sizeof s->err];
	memcpy(err, s->err, sizeof err);
	memset(s, 0, sizeof *s); /* closed: open false */
	memcpy(s->err, err, sizeof err);
	return code;
}
