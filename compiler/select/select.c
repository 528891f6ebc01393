/* sel: the choice of what the adjoint keeps (select.h has the cost model).
 *
 * The decisions: each candidate, dropped or kept; each temporary, kept
 * for the recomputations or not.
 *
 * Exact search: a depth-first search over the decisions, the costliest
 * first, each candidate dropped before kept. A branch ends when the FLOPs
 * its dropped candidates cost reach the best fit's (each is computed again
 * at least once), or when the bytes that the candidates not kept could free
 * at some position fall short of what the budget needs there (a dropped
 * candidate frees at most its bytes, and only between its last forward use
 * and its first adjoint use; keeping a temporary frees nothing). Every leaf
 * is evaluated, so the result is the optimum of the model.
 *
 * Greedy search, beyond the work limit: two searches, the better kept.
 * One drops, from store-everything, the candidate that removes the most
 * bytes-times-positions above the budget per FLOP it adds, until the peak
 * fits; the other keeps, from nothing kept, the value that saves the most
 * FLOPs per byte it adds to the peak, while the peak fits. Scores are
 * refreshed lazily: a stale score is an estimate, evaluated again when it
 * comes out on top. Each result is polished: a value whose keeping saves
 * FLOPs and still fits is kept. The lower bound is the position argument
 * made fractional: at each position, the cheapest FLOPs (a fractional
 * knapsack) whose candidates could free what the budget needs there. */
#include "select.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"

SelProblem *sel_new(int n, int npos)
{
	SelProblem *P = ar_alloc(sizeof *P);
	P->n = n;
	P->npos = npos;
	P->base = ar_alloc(sizeof(int64_t) * (size_t)(npos + 1));
	P->kind = ar_alloc((size_t)n + 1);
	P->bytes = ar_alloc(sizeof(int64_t) * (size_t)(n + 1));
	P->flops = ar_alloc(sizeof(int64_t) * (size_t)(n + 1));
	P->nin = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->in = ar_alloc(sizeof(int *) * (size_t)(n + 1));
	P->def = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->fwd_last = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->adj_first = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->adj_last = ar_alloc(sizeof(int) * (size_t)(n + 1));
	for (int v = 0; v < n; v++)
		P->adj_first[v] = P->adj_last[v] = -1;
	return P;
}

typedef struct {
	const SelProblem *P;
	int *live, nlive; /* the values that are not fixed, in order: the only ones an evaluation visits */
	int *r, *last;    /* per value: where it is computed again (INT_MAX: not), its last use there */
	int64_t *diff;    /* per position + 1 */
	int64_t *prof;    /* per position: the memory, base included */
	int64_t budget;   /* what excess is measured over */
	int64_t excess;   /* the last evaluation's bytes times positions above the budget */
	int64_t evals;
} Work;

static void work_init(Work *w, const SelProblem *P)
{
	w->P = P;
	w->r = malloc(sizeof(int) * (size_t)(P->n + 1));
	w->last = malloc(sizeof(int) * (size_t)(P->n + 1));
	w->diff = malloc(sizeof(int64_t) * (size_t)(P->npos + 2));
	w->prof = malloc(sizeof(int64_t) * (size_t)(P->npos + 1));
	w->live = malloc(sizeof(int) * (size_t)(P->n + 1));
	w->nlive = 0;
	for (int v = 0; v < P->n; v++)
		if (P->kind[v] != SEL_FIXED)
			w->live[w->nlive++] = v;
	w->budget = INT64_MAX;
	w->evals = 0;
}

static void work_free(Work *w)
{
	free(w->live);
	free(w->r);
	free(w->last);
	free(w->diff);
	free(w->prof);
}

static void add(int64_t *diff, int from, int to, int64_t bytes)
{
	if (from > to || !bytes)
		return;
	diff[from] += bytes;
	diff[to + 1] -= bytes;
}

static int max3(int a, int b, int c)
{
	int m = a > b ? a : b;
	return m > c ? m : c;
}

/* the peak of keep[]; its FLOPs in *flops; the memory per position in
 * w->prof, and its excess over w->budget in w->excess */
static int64_t eval(Work *w, const bool *keep, int64_t *flops)
{
	const SelProblem *P = w->P;
	int *r = w->r, *last = w->last;
	w->evals++;
	for (int i = 0; i < w->nlive; i++)
		r[w->live[i]] = INT_MAX, last[w->live[i]] = -1;
	int64_t f = 0;
	for (int i = w->nlive - 1; i >= 0; i--) {
		int v = w->live[i];
		if (keep[v])
			continue;
		if (P->kind[v] == SEL_CAND) {
			r[v] = r[v] < P->adj_first[v] ? r[v] : P->adj_first[v];
			last[v] = last[v] > P->adj_last[v] ? last[v] : P->adj_last[v];
		}
		if (r[v] == INT_MAX)
			continue;
		f += P->flops[v];
		for (int k = 0; k < P->nin[v]; k++) {
			int u = P->in[v][k];
			if (P->kind[u] == SEL_FIXED)
				continue;
			last[u] = last[u] > r[v] ? last[u] : r[v];
			if (!keep[u])
				r[u] = r[u] < r[v] ? r[u] : r[v];
		}
	}
	memset(w->diff, 0, sizeof(int64_t) * (size_t)(P->npos + 1));
	for (int i = 0; i < w->nlive; i++) {
		int v = w->live[i];
		if (keep[v]) {
			add(w->diff, P->def[v], max3(P->fwd_last[v], P->adj_last[v], last[v]), P->bytes[v]);
			continue;
		}
		add(w->diff, P->def[v], P->fwd_last[v], P->bytes[v]);
		if (r[v] != INT_MAX)
			add(w->diff, r[v], last[v], P->bytes[v]);
	}
	int64_t run = 0, peak = 0, ex = 0, budget = w->budget;
	for (int t = 0; t < P->npos; t++) {
		run += w->diff[t];
		int64_t m = w->prof[t] = P->base[t] + run;
		peak = m > peak ? m : peak;
		ex += m > budget ? m - budget : 0;
	}
	w->excess = ex;
	*flops = f;
	return peak;
}

int64_t sel_eval(const SelProblem *P, const bool *keep, int64_t *flops, int64_t *prof)
{
	Work w;
	work_init(&w, P);
	int64_t peak = eval(&w, keep, flops);
	if (prof)
		memcpy(prof, w.prof, sizeof(int64_t) * (size_t)P->npos);
	work_free(&w);
	return peak;
}

/* free to compute again from what is always there: a fill */
static bool is_free(const SelProblem *P, int v)
{
	if (P->flops[v])
		return false;
	for (int k = 0; k < P->nin[v]; k++)
		if (P->kind[P->in[v][k]] != SEL_FIXED)
			return false;
	return true;
}

/* The choices that matter: candidates that are not free (dropping a free
 * one never costs and never holds more), and temporaries, the costliest
 * first, then in order. keep[] starts as store-everything: every candidate
 * but the free ones. */
typedef struct {
	int *c, nc;
} Cands;

static const SelProblem *sort_problem;
static int by_flops(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	int64_t fx = sort_problem->flops[x], fy = sort_problem->flops[y];
	return fx < fy ? 1 : fx > fy ? -1 : x - y;
}

static void store_everything(const SelProblem *P, bool *keep)
{
	for (int v = 0; v < P->n; v++)
		keep[v] = P->kind[v] == SEL_CAND && !is_free(P, v);
}

static Cands candidates(const SelProblem *P, bool *keep)
{
	Cands c = {malloc(sizeof(int) * (size_t)(P->n + 1)), 0};
	store_everything(P, keep);
	for (int v = 0; v < P->n; v++)
		if ((P->kind[v] == SEL_CAND && keep[v]) || P->kind[v] == SEL_TEMP)
			c.c[c.nc++] = v;
	sort_problem = P;
	qsort(c.c, (size_t)c.nc, sizeof(int), by_flops);
	return c;
}

/* positions where dropping candidate v frees its bytes: after its last
 * forward use, before its first adjoint use (none for a temporary) */
static int gap_from(const SelProblem *P, int v) { return P->fwd_last[v] + 1; }
static int gap_to(const SelProblem *P, int v) { return P->kind[v] == SEL_CAND ? P->adj_first[v] - 1 : -1; }

/* the sum over v's gap, for each candidate in c, of sign * its bytes */
static void gaps(const SelProblem *P, const Cands *c, int64_t *at, int sign)
{
	for (int i = 0; i < c->nc; i++)
		for (int t = gap_from(P, c->c[i]); t <= gap_to(P, c->c[i]); t++)
			at[t] += sign * P->bytes[c->c[i]];
}

/* ---- exact search ---- */

typedef struct {
	Work w;
	Cands c;
	int64_t budget, limit, steps; /* steps: positions the pruning walked */
	bool *keep, *best;
	int64_t best_flops, best_peak; /* the fit with the fewest FLOPs */
	bool fits, over;
	int64_t *need;  /* per position: the bytes the budget needs freed there */
	int64_t *avail; /* per position: the bytes the candidates not kept could free there */
} Exact;

static void leaf(Exact *e)
{
	int64_t f, peak = eval(&e->w, e->keep, &f);
	if (peak <= e->budget && (!e->fits || f < e->best_flops || (f == e->best_flops && peak < e->best_peak))) {
		e->fits = true;
		e->best_flops = f;
		e->best_peak = peak;
		memcpy(e->best, e->keep, (size_t)e->w.P->n);
	}
}

/* each candidate dropped, then kept; each temporary kept, then not */
static void dfs(Exact *e, int i, int64_t flops)
{
	const SelProblem *P = e->w.P;
	if (e->over || (e->fits && flops >= e->best_flops))
		return;
	if (e->w.evals * (int64_t)(P->n + P->npos) + e->steps > e->limit) {
		e->over = true;
		return;
	}
	if (i == e->c.nc) {
		leaf(e);
		return;
	}
	int v = e->c.c[i];
	if (P->kind[v] == SEL_TEMP) {
		e->keep[v] = true;
		dfs(e, i + 1, flops);
		e->keep[v] = false;
		dfs(e, i + 1, flops);
		return;
	}
	e->keep[v] = false;
	dfs(e, i + 1, flops + P->flops[v]);
	e->keep[v] = true;
	/* kept: what it could have freed is no longer available */
	int from = gap_from(P, v), to = gap_to(P, v);
	e->steps += 2 * (to - from + 2);
	bool ok = true;
	for (int t = from; t <= to; t++) {
		e->avail[t] -= P->bytes[v];
		ok &= e->avail[t] >= e->need[t];
	}
	if (ok)
		dfs(e, i + 1, flops);
	for (int t = from; t <= to; t++)
		e->avail[t] += P->bytes[v];
}

/* ---- the lower bound ---- */

static const SelProblem *ratio_problem;
static int by_ratio(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	const SelProblem *P = ratio_problem;
	/* FLOPs per byte, cheapest first */
	double rx = (double)P->flops[x] / (double)(P->bytes[x] ? P->bytes[x] : 1);
	double ry = (double)P->flops[y] / (double)(P->bytes[y] ? P->bytes[y] : 1);
	return rx < ry ? -1 : rx > ry ? 1 : x - y;
}

/* need[t]: what the budget needs freed at t; the fewest FLOPs any fit
 * recomputes (INT64_MAX: none fits). Only dropped candidates free bytes,
 * each its own, in its gap, and each costs at least its own FLOPs. */
static int64_t lower_bound(const SelProblem *P, const Cands *c, const int64_t *need)
{
	int *order = malloc(sizeof(int) * (size_t)(c->nc + 1)), n = 0;
	for (int i = 0; i < c->nc; i++)
		if (P->kind[c->c[i]] == SEL_CAND)
			order[n++] = c->c[i];
	ratio_problem = P;
	qsort(order, (size_t)n, sizeof(int), by_ratio);
	double bound = 0;
	bool none = false;
	for (int t = 0; t < P->npos && !none; t++) {
		if (need[t] <= 0)
			continue;
		double left = (double)need[t], cost = 0;
		for (int i = 0; i < n && left > 0; i++) {
			int v = order[i];
			if (t < gap_from(P, v) || t > gap_to(P, v))
				continue;
			double b = (double)P->bytes[v];
			cost += b >= left ? (double)P->flops[v] * left / b : (double)P->flops[v];
			left -= b;
		}
		if (left > 0)
			none = true;
		else if (cost > bound)
			bound = cost;
	}
	free(order);
	if (none)
		return INT64_MAX;
	/* the sums are of integers: round the fractional bound down, a little below for rounding */
	int64_t b = (int64_t)(bound * (1 - 1e-12));
	return b > 0 ? b : 0;
}

/* ---- greedy search ---- */

typedef struct {
	bool fits;
	int64_t peak, flops;
} Outcome;

/* the temporaries with FLOPs that v's recomputation reads first, through
 * temporaries of none (a concat of convolutions: the convolutions), into
 * out; their count */
static int frontier(const SelProblem *P, int v, int *out, bool *seen)
{
	int n = 0, *stack = malloc(sizeof(int) * (size_t)(P->n + 1)), top = 0;
	stack[top++] = v;
	while (top) {
		int x = stack[--top];
		for (int k = 0; k < P->nin[x]; k++) {
			int u = P->in[x][k];
			if (P->kind[u] != SEL_TEMP || seen[u])
				continue;
			seen[u] = true;
			if (P->flops[u])
				out[n++] = u;
			else
				stack[top++] = u;
		}
	}
	for (int k = 0; k < n; k++)
		seen[out[k]] = false;
	/* the zero-FLOP temporaries walked through */
	stack[top++] = v;
	while (top) {
		int x = stack[--top];
		for (int k = 0; k < P->nin[x]; k++) {
			int u = P->in[x][k];
			if (P->kind[u] == SEL_TEMP && seen[u] && !P->flops[u]) {
				seen[u] = false;
				stack[top++] = u;
			}
		}
	}
	free(stack);
	return n;
}

/* From store-everything: drop the candidate that removes the most bytes
 * times positions above the budget per FLOP it adds, until the peak fits.
 * A candidate is also tried dropped with the temporaries its recomputation
 * would start from kept (its frontier), and the better of the two taken. */
static Outcome greedy_drop(Work *w, const Cands *c, int64_t budget, bool *keep)
{
	const SelProblem *P = w->P;
	w->budget = budget;
	int64_t f, peak = eval(w, keep, &f), ex = w->excess;
	double *score = malloc(sizeof(double) * (size_t)(c->nc + 1));
	int *round = malloc(sizeof(int) * (size_t)(c->nc + 1));
	bool *with = malloc((size_t)c->nc + 1); /* the better move keeps the frontier */
	int *front = malloc(sizeof(int) * (size_t)(P->n + 1));
	bool *seen = calloc((size_t)P->n + 1, 1);
	for (int i = 0; i < c->nc; i++)
		score[i] = 1e300, round[i] = -1, with[i] = false;
	int now = 0;
	bool refreshed = false;
	while (peak > budget) {
		int top = -1;
		for (int i = 0; i < c->nc; i++)
			if (P->kind[c->c[i]] == SEL_CAND && keep[c->c[i]] && (top < 0 || score[i] > score[top]))
				top = i;
		if (top < 0)
			break;
		int v = c->c[top];
		int nf = frontier(P, v, front, seen);
		if (round[top] != now) {
			keep[v] = false;
			int64_t f2;
			eval(w, keep, &f2);
			score[top] = (double)(ex - w->excess) / (double)(f2 - f + 1);
			with[top] = false;
			bool *was = malloc((size_t)nf + 1);
			int added = 0;
			for (int k = 0; k < nf; k++)
				was[k] = keep[front[k]], added += !keep[front[k]], keep[front[k]] = true;
			if (added) {
				eval(w, keep, &f2);
				double s2 = (double)(ex - w->excess) / (double)(f2 - f + 1);
				if (s2 > score[top])
					score[top] = s2, with[top] = true;
			}
			for (int k = 0; k < nf; k++)
				keep[front[k]] = was[k];
			free(was);
			keep[v] = true;
			round[top] = now;
			continue;
		}
		if (score[top] <= 0) {
			/* nothing helps by the stale scores: refresh them all once */
			if (refreshed)
				break;
			refreshed = true;
			now++;
			continue;
		}
		refreshed = false;
		keep[v] = false;
		for (int k = 0; k < nf && with[top]; k++)
			keep[front[k]] = true;
		now++;
		peak = eval(w, keep, &f);
		ex = w->excess;
	}
	free(score);
	free(round);
	free(with);
	free(front);
	free(seen);
	return (Outcome){peak <= budget, peak, f};
}

/* From every candidate dropped: while the peak is over the budget, keep
 * the value that removes the most bytes-times-positions above it (a kept
 * value ends the chains of recomputation through it, each of which would
 * otherwise be computed again at once and held); then keep the value that
 * saves the most FLOPs per byte it adds to the peak, while the peak fits. */
static Outcome greedy_keep(Work *w, const Cands *c, int64_t budget, bool *keep)
{
	for (int i = 0; i < c->nc; i++)
		keep[c->c[i]] = false;
	w->budget = budget;
	int64_t f, peak = eval(w, keep, &f), ex = w->excess;
	double *score = malloc(sizeof(double) * (size_t)(c->nc + 1));
	int *round = malloc(sizeof(int) * (size_t)(c->nc + 1));
	for (int i = 0; i < c->nc; i++)
		score[i] = 1e300, round[i] = -1;
	int now = 0;
	bool over = peak > budget, refreshed = false;
	for (;;) {
		int top = -1;
		for (int i = 0; i < c->nc; i++)
			if (!keep[c->c[i]] && score[i] > 0 && (top < 0 || score[i] > score[top]))
				top = i;
		if (top < 0 && over && !refreshed) {
			/* nothing lowers the excess by the stale scores: refresh them all once */
			refreshed = true;
			now++;
			for (int i = 0; i < c->nc; i++)
				score[i] = 1e300;
			continue;
		}
		if (top < 0)
			break;
		int v = c->c[top];
		if (round[top] != now) {
			keep[v] = true;
			int64_t f2, p2 = eval(w, keep, &f2);
			keep[v] = false;
			if (over)
				score[top] = (double)(ex - w->excess);
			else /* no gain, or over the budget: out until something else is kept */
				score[top] = p2 > budget || f2 >= f ? 0 : (double)(f - f2) / (double)((p2 > peak ? p2 - peak : 0) + 1);
			round[top] = now;
			continue;
		}
		keep[v] = true;
		now++;
		refreshed = false;
		peak = eval(w, keep, &f);
		ex = w->excess;
		bool was = over;
		over = peak > budget;
		/* at the change of phase every score is stale; within one, a value out stays out (keeping more
		 * only raises the peak and leaves fewer values to compute again), or comes back at a refresh */
		for (int i = 0; i < c->nc && was != over; i++)
			score[i] = 1e300, round[i] = -1;
	}
	free(score);
	free(round);
	return (Outcome){peak <= budget, peak, f};
}

/* keep again each value whose keeping saves FLOPs and still fits, the costliest first */
static Outcome polish(Work *w, const Cands *c, int64_t budget, bool *keep)
{
	int64_t f, peak = eval(w, keep, &f);
	for (int i = 0; i < c->nc; i++) {
		int v = c->c[i];
		if (keep[v])
			continue;
		keep[v] = true;
		int64_t f2, p2 = eval(w, keep, &f2);
		if (p2 <= budget && f2 < f)
			f = f2, peak = p2;
		else
			keep[v] = false;
	}
	return (Outcome){peak <= budget, peak, f};
}

static bool better(Outcome a, Outcome b)
{
	if (a.fits != b.fits)
		return a.fits;
	return a.fits ? a.flops < b.flops || (a.flops == b.flops && a.peak < b.peak) : a.peak < b.peak;
}

SelResult sel_fit(const SelProblem *P, int64_t budget, int64_t work, bool *keep)
{
	SelResult res = {0};
	Work w;
	work_init(&w, P);
	Cands c = candidates(P, keep);
	int64_t f, peak = eval(&w, keep, &f);
	int64_t *need = malloc(sizeof(int64_t) * (size_t)(P->npos + 1));
	for (int t = 0; t < P->npos; t++)
		need[t] = w.prof[t] - budget;
	res.bound = peak <= budget ? f : lower_bound(P, &c, need);
	res.method = SEL_EXACT;
	if (peak <= budget) {
		res.fits = true, res.peak = peak, res.flops = f;
		goto done;
	}
	bool over = work <= 0;
	if (!over && res.bound < INT64_MAX) {
		Exact e = {0};
		e.w = w;
		e.c = c;
		e.budget = budget;
		e.limit = work;
		e.keep = malloc((size_t)P->n + 1);
		e.best = malloc((size_t)P->n + 1);
		memcpy(e.keep, keep, (size_t)P->n);
		for (int i = 0; i < c.nc; i++)
			e.keep[c.c[i]] = P->kind[c.c[i]] == SEL_CAND;
		e.need = need;
		e.avail = calloc((size_t)P->npos + 1, sizeof(int64_t));
		gaps(P, &c, e.avail, 1);
		dfs(&e, 0, 0);
		w.evals = e.w.evals;
		over = e.over;
		if (!over && e.fits) {
			memcpy(keep, e.best, (size_t)P->n);
			res.fits = true, res.peak = e.best_peak, res.flops = res.bound = e.best_flops;
		}
		free(e.keep);
		free(e.best);
		free(e.avail);
		if (!over && !e.fits)
			res.bound = INT64_MAX;
	}
	if (over || !res.fits) {
		/* the greedy searches: dropping from store-everything, keeping from nothing kept; then each polished */
		bool *other = malloc((size_t)P->n + 1);
		store_everything(P, keep);
		Outcome a = greedy_drop(&w, &c, budget, keep);
		if (a.fits)
			a = polish(&w, &c, budget, keep);
		memcpy(other, keep, (size_t)P->n);
		Outcome b = greedy_keep(&w, &c, budget, other);
		if (b.fits)
			b = polish(&w, &c, budget, other);
		if (better(b, a)) {
			a = b;
			memcpy(keep, other, (size_t)P->n);
		}
		free(other);
		res.fits = a.fits, res.peak = a.peak, res.flops = a.flops;
		if (over)
			res.method = SEL_GREEDY;
	}
done:
	free(need);
	free(c.c);
	work_free(&w);
	return res;
}

int64_t sel_floor(const SelProblem *P)
{
	Work w;
	work_init(&w, P);
	bool *keep = malloc((size_t)P->n + 1);
	Cands c = candidates(P, keep);
	int64_t f;
	eval(&w, keep, &f);
	/* no position holds less than its memory less every candidate that could be freed there */
	int64_t *freeable = calloc((size_t)P->npos + 1, sizeof(int64_t));
	gaps(P, &c, freeable, 1);
	int64_t lo = 0;
	for (int t = 0; t < P->npos; t++)
		lo = w.prof[t] - freeable[t] > lo ? w.prof[t] - freeable[t] : lo;
	free(freeable);
	free(keep);
	free(c.c);
	work_free(&w);
	return lo;
}

SelResult sel_least(const SelProblem *P, int64_t work, bool *keep, int64_t *floor)
{
	Work w;
	work_init(&w, P);
	Cands c = candidates(P, keep);
	int64_t f, hi = eval(&w, keep, &f);
	for (int i = 0; i < c.nc; i++)
		keep[c.c[i]] = false;
	int64_t all = eval(&w, keep, &f);
	hi = all < hi ? all : hi;
	free(c.c);
	work_free(&w);
	int64_t lo = *floor = sel_floor(P);
	/* the least budget the search fits, by bisection between the floor and the better of keeping and
	 * dropping all; once the exact search runs out of work, the rest is greedy */
	bool *try = malloc((size_t)P->n + 1);
	SelResult best = sel_fit(P, hi, work, keep);
	if (best.method == SEL_GREEDY)
		work = 0;
	while (lo < hi && hi - lo > hi / 4096) {
		int64_t mid = lo + (hi - lo) / 2;
		SelResult r = sel_fit(P, mid, work, try);
		if (r.method == SEL_GREEDY)
			work = 0;
		if (r.fits) {
			hi = r.peak;
			best = r;
			memcpy(keep, try, (size_t)P->n);
		} else {
			lo = mid + 1;
		}
	}
	free(try);
	return best;
}
