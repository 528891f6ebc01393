/* ranks: what the ranks of a run under mpirun must share, checked before the first step and
 * after the last. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"

/* an output under data parallelism: with %r in it, this rank's (the rank in its place); else
 * rank 0's alone */
const char *rt_rank_path(const char *path, char **made)
{
	const char *at = path ? strstr(path, "%r") : NULL;
	if (!at)
		return rt_rank == 0 ? path : NULL;
	size_t n = strlen(path) + 16;
	*made = rt_host_alloc((int64_t)n, "an output's name");
	snprintf(*made, n, "%.*s%d%s", (int)(at - path), path, rt_rank, at + 2);
	return *made;
}

/* every rank applied the same updates: their parameters and buffers, downloaded to host, must be
 * the same bytes */
void rt_ranks_identical(RtCtx *c, void **host)
{
	uint64_t h = RT_HASH_START;
	for (int i = 0; i < c->model->nparams; i++)
		h = rt_hash(h, host[i], (size_t)c->model->params[i].bytes);
	if (!rt_dist_same(h, "the comparison of the ranks' parameters after training"))
		rt_fail(1, "the %d ranks' parameters differ after training (rank %d's hash %016llx); data parallelism must "
		        "keep them identical", rt_nranks, rt_rank, (unsigned long long)h);
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
void rt_ranks_agree(const RtModel *m, const RtOpts *o, const RtData *data, bool saves_state)
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
void rt_ranks_start_alike(const RtModel *m, const RtOpts *o, long start, void *const *host, void *const *mom)
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


