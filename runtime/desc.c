/* rt: the model description that dpc embeds (format in dprt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static noreturn void bad(int line, const char *text)
{
	rt_fail(70, "internal error: model description line %d not understood: %.80s", line, text);
}

static int64_t num(char **p, int line, const char *text)
{
	char *end;
	long long v = strtoll(*p, &end, 10);
	if (end == *p)
		bad(line, text);
	*p = end;
	return v;
}

static double real(char **p, int line, const char *text)
{
	char *end;
	double v = strtod(*p, &end);
	if (end == *p)
		bad(line, text);
	*p = end;
	return v;
}

static void word(char **p, char *out, size_t cap, int line, const char *text)
{
	while (**p == ' ')
		(*p)++;
	size_t n = strcspn(*p, " \n");
	if (n == 0 || n >= cap)
		bad(line, text);
	memcpy(out, *p, n);
	out[n] = 0;
	*p += n;
}

static void shape(RtTensor *t, char **p, int line, const char *text)
{
	if (strcmp(t->dtype, "f32") && strcmp(t->dtype, "f64") && strcmp(t->dtype, "bf16") && strcmp(t->dtype, "i32"))
		bad(line, text);
	t->rank = (int)num(p, line, text);
	if (t->rank < 0 || t->rank > RT_MAXRANK)
		bad(line, text);
	t->numel = 1;
	for (int i = 0; i < t->rank; i++) {
		t->dim[i] = num(p, line, text);
		t->numel *= t->dim[i];
	}
	t->bytes = t->numel * rt_elem_bytes(t->dtype);
}

/* bf16-mixed: the parameter as the runtime sees it is its f32 master copy; the program computes with its
 * bf16 copy */
static void mixed_types(RtTensor *t)
{
	strcpy(t->cdtype, "bf16");
	strcpy(t->dtype, "f32");
	t->bytes = t->numel * 4;
}

static bool inside(int64_t size, int64_t offset, int64_t bytes)
{
	return offset >= 0 && bytes >= 0 && offset <= size - bytes;
}

/* the parameter the next word names, declared by an earlier param line */
static RtTensor *named_param(RtModel *m, char **p, int line, const char *text)
{
	char name[128];
	word(p, name, sizeof name, line, text);
	for (int i = 0; i < m->nparams; i++)
		if (!strcmp(m->params[i].name, name))
			return &m->params[i];
	bad(line, text);
}

void rt_parse_desc(RtModel *m, const char *desc)
{
	memset(m, 0, sizeof *m);
	m->ranks = 1;
	for (int i = 0; i < 3; i++)
		m->k_sgd[i] = m->k_adam[i] = -1;
	m->k_fold = m->k_refresh = -1;
	/* held where a failure trapped by the API's call can still reach it: freed by the next parse */
	static char *copy;
	free(copy);
	copy = strdup(desc);
	char *save = NULL;
	int line = 0;
	bool ended = false;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		line++;
		char key[32], *p = l;
		word(&p, key, sizeof key, line, l);
		if (!strcmp(key, "dpc")) {
			if (num(&p, line, l) != 1)
				rt_fail(70, "internal error: model description version mismatch");
		} else if (!strcmp(key, "model")) {
			word(&p, m->model, sizeof m->model, line, l);
		} else if (!strcmp(key, "precision")) {
			char s[16];
			word(&p, s, sizeof s, line, l);
			m->mixed = !strcmp(s, "bf16-mixed");
			m->real_bytes = !strcmp(s, "f64") ? 8 : !strcmp(s, "f32") ? 4 : !strcmp(s, "bf16") || m->mixed ? 2 : 0;
			if (!m->real_bytes)
				bad(line, l);
		} else if (!strcmp(key, "arena")) {
			m->arena = num(&p, line, l);
		} else if (!strcmp(key, "loss")) {
			m->loss = num(&p, line, l);
			word(&p, m->loss_dtype, sizeof m->loss_dtype, line, l);
			if (rt_real_index(m->loss_dtype) < 0)
				bad(line, l);
		} else if (!strcmp(key, "report")) {
			if (m->nreports >= (int)(sizeof m->reports / sizeof *m->reports))
				rt_fail(70, "internal error: too many reports in the model description");
			word(&p, m->reports[m->nreports].name, sizeof m->reports[m->nreports].name, line, l);
			m->reports[m->nreports].offset = num(&p, line, l);
			word(&p, m->reports[m->nreports].dtype, sizeof m->reports[m->nreports].dtype, line, l);
			if (rt_real_index(m->reports[m->nreports++].dtype) < 0)
				bad(line, l);
		} else if (!strcmp(key, "param") || !strcmp(key, "input")) {
			bool param = key[0] == 'p';
			if ((param && m->nparams == RT_MAX_PARAMS) || (!param && m->ninputs == RT_MAX_INPUTS))
				rt_fail(70, "internal error: too many tensors in the model description");
			RtTensor *t = param ? &m->params[m->nparams++] : &m->inputs[m->ninputs++];
			word(&p, t->name, sizeof t->name, line, l);
			word(&p, t->dtype, sizeof t->dtype, line, l);
			shape(t, &p, line, l);
			t->offset = num(&p, line, l);
			t->grad = t->opt_m = t->opt_v = t->copy = t->mgrad = t->hgrad = -1;
			snprintf(t->cdtype, sizeof t->cdtype, "%s", t->dtype);
			if (param) {
				t->grad = num(&p, line, l);
				t->stacked = (int)num(&p, line, l);
				word(&p, t->init, sizeof t->init, line, l);
				if (strcmp(t->init, "zeros") && strcmp(t->init, "ones") && strcmp(t->init, "normal") &&
				    strcmp(t->init, "uniform") && strcmp(t->init, "load"))
					bad(line, l);
				t->a = real(&p, line, l);
				t->b = real(&p, line, l);
			} else {
				t->classes = (int)num(&p, line, l);
				t->has_ignore = num(&p, line, l) != 0;
				t->ignore = (int)num(&p, line, l);
			}
		} else if (!strcmp(key, "buffer")) {
			named_param(m, &p, line, l)->buffer = true;
		} else if (!strcmp(key, "nodecay")) {
			named_param(m, &p, line, l)->nodecay = true;
		} else if (!strcmp(key, "saved")) {
			RtTensor *t = named_param(m, &p, line, l);
			word(&p, t->saved, sizeof t->saved, line, l);
		} else if (!strcmp(key, "weights")) {
			word(&p, m->weights, sizeof m->weights, line, l);
		} else if (!strcmp(key, "update")) {
			if (m->nupdates >= (int)(sizeof m->updates / sizeof *m->updates))
				rt_fail(70, "internal error: too many updates in the model description");
			RtTensor *t = named_param(m, &p, line, l);
			if (!t->buffer)
				bad(line, l);
			m->updates[m->nupdates].param = (int)(t - m->params);
			m->updates[m->nupdates++].offset = num(&p, line, l);
		} else if (!strcmp(key, "optimizer")) {
			char s[8];
			word(&p, s, sizeof s, line, l);
			if (strcmp(s, "sgd") && strcmp(s, "adam"))
				bad(line, l);
			m->adam = !strcmp(s, "adam");
			m->has_optimizer = true;
		} else if (!strcmp(key, "ranks")) {
			int64_t n = num(&p, line, l);
			if (n < 2 || n > 1 << 20)
				bad(line, l);
			m->ranks = (int)n;
		} else if (!strcmp(key, "state")) {
			RtTensor *t = named_param(m, &p, line, l);
			t->opt_m = num(&p, line, l);
			t->opt_v = num(&p, line, l);
		} else if (!strcmp(key, "master")) {
			/* bf16-mixed: the parameter is its f32 master copy, its gradient the f32 sum */
			RtTensor *t = named_param(m, &p, line, l);
			if (!m->mixed || t->buffer || strcmp(t->dtype, "bf16"))
				bad(line, l);
			t->copy = t->offset;
			t->mgrad = t->grad;
			t->offset = num(&p, line, l);
			t->grad = num(&p, line, l);
			mixed_types(t);
		} else if (!strcmp(key, "host")) {
			m->host = num(&p, line, l);
		} else if (!strcmp(key, "stream")) {
			RtTensor *t = named_param(m, &p, line, l);
			t->streamed = true;
			t->host = t->host_copy = num(&p, line, l);
			t->host_m = num(&p, line, l);
			t->host_v = num(&p, line, l);
			int64_t master = num(&p, line, l);
			t->slots = num(&p, line, l);
			t->grad = num(&p, line, l);
			t->hgrad = num(&p, line, l);
			if (master >= 0) {
				if (!m->mixed || strcmp(t->dtype, "bf16"))
					bad(line, l);
				t->host = master;
				mixed_types(t);
			}
		} else if (!strcmp(key, "transfers")) {
			char k[16];
			for (int f = 0; f < 6; f++) {
				static const char *want[] = {"slots", "ahead", "forward", "step", "numel", "grads"};
				word(&p, k, sizeof k, line, l);
				if (strcmp(k, want[f]))
					bad(line, l);
				if (f == 0)
					m->nslots = (int)num(&p, line, l);
				else if (f == 1)
					m->ahead = (int)num(&p, line, l);
				else if (f == 4)
					m->stream_numel = num(&p, line, l);
				else if (f == 5)
					m->stream_grads = num(&p, line, l);
				else {
					m->xfer_h2d[f - 2] = num(&p, line, l);
					m->xfer_d2h[f - 2] = num(&p, line, l);
				}
			}
		} else if (!strcmp(key, "kernel")) {
			char k[16], dt[8];
			word(&p, k, sizeof k, line, l);
			word(&p, dt, sizeof dt, line, l);
			int id = (int)num(&p, line, l), r = rt_real_index(dt);
			if (r < 0 || id < 0)
				bad(line, l);
			if (!strcmp(k, "sgd"))
				m->k_sgd[r] = id;
			else if (!strcmp(k, "adam"))
				m->k_adam[r] = id;
			else if (!strcmp(k, "fold") && r == 0)
				m->k_fold = id;
			else if (!strcmp(k, "refresh") && r == 0)
				m->k_refresh = id;
			else
				bad(line, l);
		} else if (!strcmp(key, "flops")) {
			char k[16];
			word(&p, k, sizeof k, line, l);
			if (strcmp(k, "forward"))
				bad(line, l);
			m->forward_flops = num(&p, line, l);
		} else if (!strcmp(key, "kpred")) {
			int64_t id = num(&p, line, l), ns = num(&p, line, l);
			if (id < 0 || id >= m->nkname || ns < 0)
				bad(line, l);
			m->kpred[id] = (double)ns / 1000;
		} else if (!strcmp(key, "kwork")) {
			int64_t id = num(&p, line, l), w = num(&p, line, l);
			if (id < 0 || id >= m->nkname || w < 1)
				bad(line, l);
			m->kwork[id] = w;
		} else if (!strcmp(key, "kname")) {
			int id = (int)num(&p, line, l);
			char label[256];
			word(&p, label, sizeof label, line, l);
			if (id != m->nkname)
				bad(line, l);
			m->kname = rt_host_grow(m->kname, (int64_t)sizeof *m->kname * (id + 1), "the kernel names");
			m->kwork = rt_host_grow(m->kwork, (int64_t)sizeof *m->kwork * (id + 1), "the kernel names");
			m->kpred = rt_host_grow(m->kpred, (int64_t)sizeof *m->kpred * (id + 1), "the kernel names");
			m->kpred[id] = 0;
			if (!(m->kname[id] = strdup(label)))
				rt_fail(1, "out of memory for the kernel names");
			m->kwork[id] = 1;
			m->nkname++;
		} else if (!strcmp(key, "plan")) {
			char k[16];
			word(&p, k, sizeof k, line, l);
			int64_t v = num(&p, line, l);
			if (!strcmp(k, "params")) m->plan_params = v;
			else if (!strcmp(k, "grads")) m->plan_grads = v;
			else if (!strcmp(k, "optimizer")) m->plan_opt = v;
			else if (!strcmp(k, "inputs")) m->plan_inputs = v;
			else if (!strcmp(k, "tape")) m->plan_tape = v;
			else if (!strcmp(k, "snapshots")) m->plan_snap = v;
			else if (!strcmp(k, "slots")) m->plan_slots = v;
			else if (!strcmp(k, "work")) m->plan_work = v;
			else bad(line, l);
		} else if (!strcmp(key, "role")) {
			char name[128], r[8];
			word(&p, name, sizeof name, line, l);
			word(&p, r, sizeof r, line, l);
			int k = 0;
			while (k < m->ninputs && strcmp(m->inputs[k].name, name))
				k++;
			if (k == m->ninputs || (strcmp(r, "data") && strcmp(r, "labels") && strcmp(r, "other")))
				bad(line, l);
			m->inputs[k].role = r[0] == 'd' ? RT_ROLE_DATA : r[0] == 'l' ? RT_ROLE_LABELS : RT_ROLE_OTHER;
		} else if (!strcmp(key, "ids")) {
			char name[128];
			word(&p, name, sizeof name, line, l);
			int k = 0;
			while (k < m->ninputs && strcmp(m->inputs[k].name, name))
				k++;
			if (k == m->ninputs)
				bad(line, l);
			m->inputs[k].ids = true;
		} else if (!strcmp(key, "memplot")) {
			int64_t n = num(&p, line, l);
			if (n < 1 || n > 1 << 20 || m->mem_series)
				bad(line, l);
			if (!(m->mem_series = malloc(sizeof *m->mem_series * (size_t)n)))
				rt_fail(1, "out of memory");
			m->mem_points = (int)n;
			for (int64_t i = 0; i < n; i++)
				m->mem_series[i] = num(&p, line, l);
		} else if (!strcmp(key, "budget")) {
			m->device_mem = num(&p, line, l);
		} else if (!strcmp(key, "build")) {
			p += strlen(p); /* the ranks' comparison at start reads these lines from the text (main.c) */
		} else if (!strcmp(key, "steps")) {
			char k[16];
			word(&p, k, sizeof k, line, l);
			m->steps_forward = num(&p, line, l);
			if (strcmp(k, "forward"))
				bad(line, l);
			word(&p, k, sizeof k, line, l);
			m->steps_recomputed = num(&p, line, l);
			if (strcmp(k, "recomputed"))
				bad(line, l);
		} else if (!strcmp(key, "end") && !ended) {
			ended = true;
		} else {
			bad(line, l);
		}
		if (p[strspn(p, " ")])
			bad(line, l);
	}
	free(copy);
	copy = NULL;
	if (!ended || !m->real_bytes || !m->has_optimizer || !m->loss_dtype[0] ||
	    (m->mixed && (m->k_fold < 0 || m->k_refresh < 0)))
		rt_fail(70, "internal error: incomplete model description");
	for (int i = 0; i < m->nparams; i++) {
		int r = rt_real_index(m->params[i].dtype);
		if (!m->params[i].buffer && (r < 0 || m->k_sgd[r] < 0 || m->k_adam[r] < 0))
			rt_fail(70, "internal error: no optimizer kernel for parameter %s (%s)", m->params[i].name, m->params[i].dtype);
	}
	/* generated code trusts these offsets; a mismatch would corrupt memory */
	if (m->loss < 0 || m->loss + rt_elem_bytes(m->loss_dtype) > m->arena)
		rt_fail(70, "internal error: the loss lies outside the arena of %lld bytes", (long long)m->arena);
	for (int i = 0; i < m->nparams + m->ninputs; i++) {
		const RtTensor *t = i < m->nparams ? &m->params[i] : &m->inputs[i - m->nparams];
		bool out;
		if (t->streamed) {
			/* in the host pool: the value (and its compute copy), adam's moments, the gradients coming down */
			int64_t units = t->dim[0] > 0 ? t->dim[0] : 1, cbytes = t->numel * rt_elem_bytes(t->cdtype), unit = cbytes / units;
			out = !inside(m->host, t->host, t->bytes) || !inside(m->host, t->host_copy, cbytes) ||
			      !inside(m->host, t->hgrad, cbytes) || !t->stacked;
			if (m->adam)
				out |= !inside(m->host, t->host_m, t->bytes) || !inside(m->host, t->host_v, t->bytes);
			if (out)
				rt_fail(70, "internal error: tensor '%s' lies outside the host pool of %lld bytes", t->name,
				        (long long)m->host);
			/* its slots and its gradient's unit in the arena */
			out = m->nslots < 1 || !inside(m->arena, t->slots, m->nslots * unit) || !inside(m->arena, t->grad, unit);
			if (out)
				rt_fail(70, "internal error: the slots of tensor '%s' lie outside the arena of %lld bytes", t->name,
				        (long long)m->arena);
			continue;
		}
		bool trained = i < m->nparams && !t->buffer;
		out = !inside(m->arena, t->offset, t->bytes) || (trained && !inside(m->arena, t->grad, t->bytes));
		if (t->copy >= 0)
			out |= !inside(m->arena, t->copy, t->numel * 2) || !inside(m->arena, t->mgrad, t->numel * 2);
		else if (trained && m->mixed)
			out = true; /* every trained parameter has its master line */
		/* adam's moments, planned for every resident trained parameter: whole, or one rank's share */
		int64_t share = (t->numel + m->ranks - 1) / m->ranks * rt_elem_bytes(t->dtype);
		if (trained && m->adam)
			out |= !inside(m->arena, t->opt_m, share) || !inside(m->arena, t->opt_v, share);
		if (out || t->numel < 0)
			rt_fail(70, "internal error: tensor '%s' lies outside the arena of %lld bytes", t->name,
			        (long long)m->arena);
	}
	for (int i = 0; i < m->nupdates; i++) {
		const RtTensor *t = &m->params[m->updates[i].param];
		if (t->streamed || !inside(m->arena, m->updates[i].offset, t->bytes))
			rt_fail(70, "internal error: the update of '%s' lies outside the arena of %lld bytes", t->name,
			        (long long)m->arena);
	}
}
