/* rt: the data a run reads: .npy and text files for the inputs, the
 * synthetic default, each step's batch staged for the device; and the
 * random numbers of initialisation, synthetic data and the gradient
 * check. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* ---- random numbers: splitmix64, Box-Muller ---- */

static uint64_t rng_state;

void rt_rng_seed(uint64_t seed) { rng_state = seed; }

uint64_t rt_rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double rt_rng_uniform(void) { return (double)(rt_rng_next() >> 11) / 9007199254740992.0; }

double rt_rng_normal(void)
{
	double u = rt_rng_uniform(), v = rt_rng_uniform();
	return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

/* ---- data ---- */



static int64_t row_elems(const RtTensor *t) { return t->rank ? t->numel / t->dim[0] : 1; }
int64_t rt_batch_rows(const RtTensor *t) { return t->rank ? t->dim[0] : 1; }

static bool is_npy(const char *path)
{
	size_t n = strlen(path);
	return n >= 4 && !strcmp(path + n - 4, ".npy");
}

/* A text file for an i32 input: its bytes are the ids, in rows of the
 * input's row length; the tail that fills no row is dropped. */
static double *load_text(const char *path, const RtTensor *t, int *rank, int64_t *dim)
{
	size_t len;
	unsigned char *b = rt_load_bytes(path, &len);
	int64_t row = row_elems(t), n = (int64_t)len / row;
	if (t->rank == 0 || n < 1)
		rt_fail(1, "%s: %zu bytes do not fill one row of %lld ids of input '%s' %s", path, len, (long long)row, t->name,
		        rt_shape_str(t->rank, t->dim));
	double *v = rt_host_alloc((int64_t)sizeof(double) * n * row, path);
	for (int64_t i = 0; i < n * row; i++)
		v[i] = b[i];
	free(b);
	*rank = t->rank;
	dim[0] = n;
	for (int i = 1; i < t->rank; i++)
		dim[i] = t->dim[i];
	return v;
}

void rt_load_data(RtData *d, const RtTensor *t, const char *path)
{
	int rank;
	int64_t dim[RT_MAXRANK];
	bool text = !is_npy(path) && !strcmp(t->dtype, "i32");
	double *v = text ? load_text(path, t, &rank, dim) : rt_load_npy(path, &rank, dim);
	int64_t row = row_elems(t);
	bool rows_ok = t->rank > 0 && rank == t->rank && dim[0] >= 1;
	for (int i = 1; rows_ok && i < rank; i++)
		rows_ok = dim[i] == t->dim[i];
	bool exact = rank == t->rank;
	for (int i = 0; exact && i < rank; i++)
		exact = dim[i] == t->dim[i];
	if (!rows_ok && !exact)
		rt_fail(1, "%s: shape %s does not fit input '%s' of shape %s (a file holds [N%s%s rows)", path, rt_shape_str(rank, dim),
		        t->name, rt_shape_str(t->rank, t->dim), t->rank > 1 ? ", " : "", rt_shape_str(t->rank - 1, t->dim + 1) + 1);
	d->n = t->rank ? (exact ? t->dim[0] : dim[0]) : 1;
	d->row = row;
	d->windows = text;
	/* the global batch's rows: each rank's batch times the ranks */
	d->shuffle = !text && d->n > rt_nranks * rt_batch_rows(t);
	d->rows = rt_host_alloc(d->n * row * rt_elem_bytes(t->dtype), path);
	for (int64_t i = 0; i < d->n * row; i++) {
		double x = v[i];
		if (!strcmp(t->dtype, "i32")) {
			if (t->classes > 0 && (x != floor(x) || x < 0 || x >= t->classes) && !(t->has_ignore && x == t->ignore))
				rt_fail(1, "%s: entry %lld is %g, not an id in 0..%d of input '%s'", path, (long long)i, x,
				        t->classes - 1, t->name);
			if (x != floor(x) || x < INT32_MIN || x > INT32_MAX)
				rt_fail(1, "%s: entry %lld is %g, not an i32 of input '%s'", path, (long long)i, x, t->name);
		} else if (!isfinite(x)) {
			rt_fail(1, "%s: entry %lld is not a finite number", path, (long long)i);
		} else if ((!strcmp(t->dtype, "f32") || !strcmp(t->dtype, "bf16")) && fabs(x) > FLT_MAX) {
			rt_fail(1, "%s: entry %lld is %g, out of the f32 range of input '%s'", path, (long long)i, x, t->name);
		}
		rt_set(d->rows, t->dtype, i, x);
	}
	free(v);
}

/* The synthetic default (see --help): random data, and the labels input (the one the loss reads only as its
 * labels, when there is one) from a random teacher of the first input the loss computes from */
void rt_synthesize(RtData *data, const RtModel *m, uint64_t seed)
{
	int label = -1, from = -1, nlabels = 0;
	for (int k = 0; k < m->ninputs; k++) {
		if (m->inputs[k].role == RT_ROLE_LABELS)
			label = k, nlabels++;
		if (m->inputs[k].role == RT_ROLE_DATA && from < 0)
			from = k;
	}
	if (nlabels != 1 || from < 0)
		label = -1;
	for (int k = 0; k < m->ninputs; k++) {
		const RtTensor *t = &m->inputs[k];
		if (data[k].rows || k == label)
			continue;
		rng_state = seed * 7919 + 101 + (uint64_t)k;
		data[k].n = 16 * rt_nranks * rt_batch_rows(t); /* the rows of one process with the global batch */
		data[k].row = row_elems(t);
		data[k].rows = rt_host_alloc(data[k].n * data[k].row * rt_elem_bytes(t->dtype), t->name);
		for (int64_t i = 0; i < data[k].n * data[k].row; i++)
			rt_set(data[k].rows, t->dtype, i, !strcmp(t->dtype, "i32") ? (double)(rt_rng_next() % (t->classes > 0 ? (uint64_t)t->classes : 2)) : rt_rng_normal());
	}
	if (label < 0 || data[label].rows)
		return;
	const RtTensor *t = &m->inputs[label];
	RtData *x = &data[from], *y = &data[label];
	int64_t Q = x->row, P = row_elems(t), C = t->classes > 0 ? t->classes : 1;
	int64_t cols = !strcmp(t->dtype, "i32") ? P * C : P;
	rng_state = seed * 7919 + 977;
	double *T = rt_host_alloc((int64_t)sizeof(double) * Q * cols, "the synthetic teacher");
	for (int64_t i = 0; i < Q * cols; i++)
		T[i] = rt_rng_normal() / sqrt((double)Q);
	y->n = x->n;
	y->row = P;
	y->rows = rt_host_alloc(y->n * P * rt_elem_bytes(t->dtype), t->name);
	double *z = rt_host_alloc((int64_t)sizeof(double) * cols, "the synthetic teacher");
	for (int64_t r = 0; r < y->n; r++) {
		for (int64_t j = 0; j < cols; j++) {
			z[j] = 0;
			for (int64_t q = 0; q < Q; q++)
				z[j] += rt_get(x->rows, m->inputs[from].dtype, r * Q + q) * T[q * cols + j];
		}
		for (int64_t p = 0; p < P; p++) {
			double v;
			if (!strcmp(t->dtype, "i32")) {
				int64_t best = 0;
				for (int64_t c = 1; c < C; c++)
					if (z[p * C + c] > z[p * C + best])
						best = c;
				v = (double)best;
			} else {
				v = tanh(z[p]);
			}
			rt_set(y->rows, t->dtype, r * P + p, v);
		}
	}
	free(T);
	free(z);
}

/* Stages step `step`'s batch in buffer `slot`, which no queued copy still reads. */
/* splitmix64's output for x, without the shared state */
static uint64_t mix(uint64_t x)
{
	uint64_t z = x + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* row i of epoch e in the epoch's order: a Fisher-Yates shuffle of the n
 * rows drawn from the seed and the epoch, kept while the epoch lasts. The
 * order is a function of the seed and the step: a resumed run reads what
 * the uninterrupted one would have. Inputs with as many rows share it. */
static int64_t shuffled(RtData *d, uint64_t seed, int64_t e, int64_t i)
{
	if (!d->perm || d->perm_epoch != e) {
		if (!d->perm)
			d->perm = rt_host_alloc((int64_t)sizeof(int64_t) * d->n, "the data's order");
		uint64_t s = mix(seed * 0x2545f4914f6cdd1dull ^ mix((uint64_t)e + 1));
		for (int64_t r = 0; r < d->n; r++)
			d->perm[r] = r;
		for (int64_t r = d->n - 1; r > 0; r--) {
			s = mix(s);
			int64_t q = (int64_t)(s % (uint64_t)(r + 1)), x = d->perm[r];
			d->perm[r] = d->perm[q];
			d->perm[q] = x;
		}
		d->perm_epoch = e;
	}
	return d->perm[i];
}

void rt_upload_batch(RtCtx *c, RtData *data, long step, int slot, bool train)
{
	RtModel *m = c->model;
	for (int k = 0; k < m->ninputs; k++) {
		const RtTensor *t = &m->inputs[k];
		RtData *d = &data[k];
		if (d->on_device)
			continue;
		int64_t B = rt_batch_rows(t), esz = rt_elem_bytes(t->dtype);
		/* training across ranks: rank r takes rows r B .. r B + B - 1 of each global batch of ranks B rows */
		int64_t first = train ? ((int64_t)step * rt_nranks + rt_rank) * B : (int64_t)step * B;
		for (int64_t j = 0; j < B; j++) {
			int64_t g = first + j, at = g % d->n * d->row;
			if (train && d->windows) {
				/* a window of the text at a random element, as nanoGPT samples */
				uint64_t span = (uint64_t)((d->n - 1) * d->row + 1);
				at = (int64_t)(mix(c->seed * 0x9e3779b97f4a7c15ull ^ mix((uint64_t)g)) % span);
			} else if (train && d->shuffle) {
				at = shuffled(d, c->seed, g / d->n, g % d->n) * d->row;
			}
			memcpy((char *)d->batch[slot] + j * d->row * esz, (char *)d->rows + at * esz, (size_t)(d->row * esz));
		}
		c->n.h2d_bytes += t->bytes;
		if (c->record) {
			char label[160];
			snprintf(label, sizeof label, "h2d input %s", t->name);
			rt_prof_begin(c, RT_CALL_TRANSFER, label);
		}
		c->dev->h2d_async(c->base + (uint64_t)t->offset, d->batch[slot], t->bytes);
		if (c->record)
			rt_prof_end(c);
	}
}
