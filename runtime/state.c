/* rt: a run's state, for --save-state and --resume. A safetensors file:
 * every parameter and buffer by name, adam's moments as NAME.adam_m and
 * NAME.adam_v, and in __metadata__ the step reached and everything else
 * the rest of the run depends on. The data's position, dropout's keys and
 * the synthetic data are functions of the seed and the step, so the step
 * and the seed restore them; the schedule's rate is one of the step. A
 * resumed run therefore computes what the uninterrupted one would have,
 * bit for bit. A state from another model, -D values, precision,
 * optimizer, seed or schedule is refused, naming the field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static const char *schedules[] = {"constant", "cosine", "linear"};

/* the model and the moments as one list of tensors (the moments after
 * their parameters), for the safetensors writer and reader; in *bufs
 * (malloc'd) where each one's host copy is */
static RtModel *state_model(const RtModel *m, void *const *params, void *const *moments, void ***bufs)
{
	static RtModel s;
	s = *m;
	s.nparams = 0;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		int n = m->adam && !t->buffer ? 3 : 1;
		if (s.nparams + n > (int)(sizeof s.params / sizeof s.params[0]))
			rt_fail(1, "a state file holds at most %d tensors; this model needs more",
			        (int)(sizeof s.params / sizeof s.params[0]));
		s.params[s.nparams++] = *t;
		for (int k = 1; k < n; k++) {
			RtTensor *x = &s.params[s.nparams++];
			*x = *t;
			snprintf(x->name, sizeof x->name, "%.100s.adam_%c", t->name, k == 1 ? 'm' : 'v');
			x->saved[0] = 0; /* a moment goes under its own name, not its parameter's file name */
		}
	}
	void **b = rt_host_alloc((int64_t)sizeof(void *) * (s.nparams + 1), "a state");
	for (int i = 0, n = 0; i < m->nparams; i++) {
		b[n++] = params[i];
		if (m->adam && !m->params[i].buffer) {
			b[n++] = moments[2 * i];
			b[n++] = moments[2 * i + 1];
		}
	}
	*bufs = b;
	return &s;
}

/* FNV-1a of the model description: the program, its -D values and its plan; not its build lines, which
 * name how it was made (the same program built with an option given that is also the default is the same
 * model, and resumes its states) */
static uint64_t desc_hash(void)
{
	uint64_t h = RT_HASH_START;
	for (const char *l = dp_model_desc, *nl; *l; l = nl + (*nl != 0)) {
		nl = l + strcspn(l, "\n");
		if (strncmp(l, "build ", 6))
			h = rt_hash(h, l, (size_t)(nl - l) + (*nl != 0));
	}
	return h;
}

/* the metadata fields, in order: what a resumed run must share with the saved one */
/* (the description last: it covers the precision and more, so the specific field is named first) */
enum { F_PRECISION, F_OPTIMIZER, F_SEED, F_SCHEDULE, F_LR, F_WARMUP, F_MIN_LR, F_DECAY, F_CLIP, F_ACCUM, F_STEPS, F_DESC,
       NFIELDS };
static const char *field_name[NFIELDS] = {"precision", "optimizer", "seed", "lr_schedule", "lr", "warmup", "min_lr",
                                          "weight_decay", "clip_grad", "accum", "steps", "model_description"};

static void fields(const RtModel *m, const RtOpts *o, char v[NFIELDS][64])
{
	snprintf(v[F_DESC], 64, "%016llx", (unsigned long long)desc_hash());
	snprintf(v[F_PRECISION], 64, "%s", rt_precision(m));
	snprintf(v[F_OPTIMIZER], 64, "%s", !m->adam ? "sgd" : o->optimizer && !strcmp(o->optimizer, "adamw") ? "adamw" : "adam");
	snprintf(v[F_SEED], 64, "%ld", o->seed);
	snprintf(v[F_SCHEDULE], 64, "%s", schedules[o->schedule]);
	snprintf(v[F_LR], 64, "%.17g", o->lr);
	snprintf(v[F_WARMUP], 64, "%ld", o->warmup);
	snprintf(v[F_MIN_LR], 64, "%.17g", o->min_lr);
	snprintf(v[F_DECAY], 64, "%.17g", o->weight_decay);
	snprintf(v[F_CLIP], 64, "%.17g", o->clip_grad);
	snprintf(v[F_ACCUM], 64, "%ld", o->accum);
	/* the schedule depends on the run's length; a constant rate without warmup does not */
	snprintf(v[F_STEPS], 64, "%ld", o->schedule == RT_LR_CONSTANT && !o->warmup ? 0 : o->steps);
}

int rt_run_fields(const RtModel *m, const RtOpts *o, const char **names, char (*v)[64])
{
	fields(m, o, v);
	for (int f = 0; f < NFIELDS; f++)
		names[f] = field_name[f];
	return NFIELDS;
}

void rt_save_state(const char *path, const RtModel *m, const RtOpts *o, void *const *params, void *const *moments, long step)
{
	void **bufs;
	RtModel *s = state_model(m, params, moments, &bufs);
	char v[NFIELDS][64], meta[2048];
	fields(m, o, v);
	int len = snprintf(meta, sizeof meta, ",\"step\":\"%ld\"", step);
	for (int f = 0; f < NFIELDS; f++)
		len += snprintf(meta + len, sizeof meta - (size_t)len, ",\"%s\":\"%s\"", field_name[f], v[f]);
	rt_save_tensors(path, s, bufs, false, "state", meta);
	free(bufs);
}

static const char *lookup(const RtMeta *meta, const char *key)
{
	for (int i = 0; i < meta->n; i++)
		if (!strcmp(meta->key[i], key))
			return meta->val[i];
	return NULL;
}

long rt_load_state(const char *path, const RtModel *m, const RtOpts *o, void **params, void **moments)
{
	size_t len;
	unsigned char *b = rt_load_bytes(path, &len);
	RtMeta meta = {0};
	void **bufs;
	RtModel *s = state_model(m, params, moments, &bufs);
	/* a state of another model fails on its fields, not on its first tensor that does not fit:
	 * the tensors' error, trapped, stands only once the fields agree. The error is said once what
	 * this call holds is freed (under the API the session goes on). */
	char why[2400] = "";
	{
		jmp_buf trap, *outer = rt_fail_trap;
		rt_fail_trap = &trap;
		bool failed = setjmp(trap) != 0;
		if (!failed)
			rt_safetensors_parse(path, b, len, s, bufs, &meta);
		rt_fail_trap = outer;
		const char *content = lookup(&meta, "content");
		char v[NFIELDS][64];
		fields(m, o, v);
		if (!content || strcmp(content, "state"))
			snprintf(why, sizeof why, "%.1000s: not a state file (%.200s); --save-state writes one, --save writes "
			         "parameters only", path, content ? content : "no content field");
		for (int f = 0; !why[0] && f < NFIELDS; f++) {
			const char *got = lookup(&meta, field_name[f]);
			if (!got || strcmp(got, v[f]))
				snprintf(why, sizeof why, "%.1000s: saved with %s %.200s, this run has %s%s", path, field_name[f],
				         got ? got : "(none)", v[f], f == F_DESC ? " (another model, -D value or memory plan)" : "");
		}
		if (!why[0] && failed) /* the fields agree, so the tensors' error stands */
			snprintf(why, sizeof why, "%s", rt_fail_msg);
	}
	const char *st = lookup(&meta, "step");
	char *end;
	long step = st ? strtol(st, &end, 10) : -1;
	if (!why[0] && (!st || *end || step < 1))
		snprintf(why, sizeof why, "%.1000s: no valid step in the state (%.100s)", path, st ? st : "none");
	if (!why[0] && step > o->steps)
		snprintf(why, sizeof why, "%.1000s: the state is at step %ld, past --steps %ld", path, step, o->steps);
	for (int i = 0; i < meta.n; i++)
		free(meta.key[i]), free(meta.val[i]);
	free(bufs);
	free(b);
	if (why[0])
		rt_fail(1, "%s", why);
	return step;
}
