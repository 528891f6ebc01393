/* sel's lower bounds. On FLOPs (sel_lower_bound): the position argument
 * made fractional, at each position the cheapest FLOPs (a fractional
 * knapsack) whose candidates could free what the budget needs there. On
 * the peak (sel_floor): what each position holds less every candidate that
 * could be freed there. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

/* what an op's result taking candidate v's storage may save at t beyond
 * store-everything: where v is not kept, it may die there */
int64_t sel_lent(const SelProblem *P, int v, int t) { return P->lend[t] == v && P->kind[v] == SEL_CAND ? P->lend_bytes[t] : 0; }

/* the sum over v's gap, for each candidate in c, of sign * its bytes, and
 * over the positions where an op may take its storage, of what that saves */
void sel_gaps(const SelProblem *P, const Cands *c, int64_t *at, int sign)
{
	for (int i = 0; i < c->nc; i++)
		for (int t = sel_gap_from(P, c->c[i]); t <= sel_gap_to(P, c->c[i]); t++)
			if (sel_frees(P, c->c[i], t))
				at[t] += sign * P->bytes[c->c[i]];
	for (int t = 0; t < P->npos; t++)
		if (P->lend[t] >= 0)
			at[t] += sign * sel_lent(P, P->lend[t], t);
}

/* ---- the lower bound ---- */

static const SelProblem *ratio_problem;
static int by_ratio(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	const SelProblem *P = ratio_problem;
	/* cost per byte, cheapest first */
	double rx = (double)sel_least_cost(P, x) / (double)(P->bytes[x] ? P->bytes[x] : 1);
	double ry = (double)sel_least_cost(P, y) / (double)(P->bytes[y] ? P->bytes[y] : 1);
	return rx < ry ? -1 : rx > ry ? 1 : x - y;
}

/* from[t]: the earliest start of the gaps of the candidates whose gap
 * holds position t (t + 1 where none does). A candidate that frees bytes
 * at two positions s < t has a gap that holds both, so s < from[t] means
 * no candidate frees at both, and in a chain of positions each below the
 * next's from[], no candidate frees at any two (a gap that held the first
 * and the last would hold those between). */
static int by_gap_start(const void *a, const void *b)
{
	int x = sel_gap_from(ratio_problem, *(const int *)a), y = sel_gap_from(ratio_problem, *(const int *)b);
	return (x > y) - (x < y);
}

/* the next position from t not yet given its from[] (next[] skips those given: near-linear in all) */
static int next_open(int *next, int t)
{
	int r = t;
	while (next[r] != r)
		r = next[r];
	while (next[t] != r) {
		int up = next[t];
		next[t] = r;
		t = up;
	}
	return r;
}

static int *gap_starts(const SelProblem *P, const int *cand, int n)
{
	int *from = malloc(sizeof(int) * (size_t)(P->npos + 1)), *next = malloc(sizeof(int) * (size_t)(P->npos + 2));
	int *by_start = malloc(sizeof(int) * (size_t)(n + 1));
	for (int t = 0; t <= P->npos; t++)
		next[t] = t;
	for (int t = 0; t < P->npos; t++)
		from[t] = t + 1;
	memcpy(by_start, cand, sizeof(int) * (size_t)n);
	ratio_problem = P;
	qsort(by_start, (size_t)n, sizeof(int), by_gap_start);
	/* the earliest starting gap that holds a position gives it its from[] */
	for (int i = 0; i < n; i++) {
		int a = sel_gap_from(P, by_start[i]), b = sel_gap_to(P, by_start[i]);
		for (int t = next_open(next, a > 0 ? a : 0); t <= b && t < P->npos; t = next_open(next, t)) {
			from[t] = a;
			next[t] = t + 1;
		}
	}
	free(next);
	free(by_start);
	return from;
}

/* need[t]: what the budget needs freed at t; the least cost of any fit
 * (INT64_MAX: none fits). Only candidates not kept free bytes, each its
 * own, in its gap, and each costs at least its own FLOPs or its offload:
 * at each position, the cheapest that could free what it needs (a
 * fractional knapsack), and over positions no two of which any candidate
 * frees at (gap_starts), the sum of theirs, since no candidate's cost is
 * counted twice; the most such sum, by a pass over positions in order. */
int64_t sel_lower_bound(const SelProblem *P, const Cands *c, const int64_t *need)
{
	int *order = malloc(sizeof(int) * (size_t)(c->nc + 1)), n = 0;
	for (int i = 0; i < c->nc; i++)
		if (P->kind[c->c[i]] == SEL_CAND)
			order[n++] = c->c[i];
	ratio_problem = P;
	qsort(order, (size_t)n, sizeof(int), by_ratio);
	int *from = gap_starts(P, order, n);
	/* sum[t + 1]: the most over chains of positions up to t */
	double *sum = calloc((size_t)P->npos + 2, sizeof *sum);
	bool none = false;
	for (int t = 0; t < P->npos && !none; t++) {
		sum[t + 1] = sum[t];
		if (need[t] <= 0)
			continue;
		/* what an op taking a candidate's storage saves there, counted as free: a bound still */
		double left = (double)(need[t] - (P->lend[t] >= 0 ? sel_lent(P, P->lend[t], t) : 0)), cost = 0;
		for (int i = 0; i < n && left > 0; i++) {
			int v = order[i];
			if (!sel_frees(P, v, t))
				continue;
			double b = (double)P->bytes[v];
			double cv = (double)sel_least_cost(P, v);
			cost += b >= left ? cv * left / b : cv;
			left -= b;
		}
		if (left > 0)
			none = true;
		else if (sum[from[t]] + cost > sum[t + 1])
			sum[t + 1] = sum[from[t]] + cost;
	}
	double bound = sum[P->npos];
	free(order);
	free(from);
	free(sum);
	if (none)
		return INT64_MAX;
	/* the sums are of integers: round the fractional bound down, a little below for rounding */
	int64_t b = (int64_t)(bound * (1 - 1e-12));
	return b > 0 ? b : 0;
}

int64_t sel_flops_bound(const SelProblem *P, int64_t budget)
{
	Work w;
	sel_work_init(&w, P);
	uint8_t *keep = malloc((size_t)P->n + 1);
	Cands c = sel_candidates(P, keep);
	int64_t f, peak = sel_evaluate(&w, keep, &f);
	int64_t *need = malloc(sizeof(int64_t) * (size_t)(P->npos + 1));
	for (int t = 0; t < P->npos; t++)
		need[t] = w.prof[t] - budget;
	int64_t bound = peak <= budget ? f : sel_lower_bound(P, &c, need);
	free(need);
	free(keep);
	free(c.c);
	sel_work_free(&w);
	return bound;
}

int64_t sel_floor(const SelProblem *P)
{
	Work w;
	sel_work_init(&w, P);
	uint8_t *keep = malloc((size_t)P->n + 1);
	Cands c = sel_candidates(P, keep);
	int64_t f;
	sel_evaluate(&w, keep, &f);
	/* no position holds less than its memory less every candidate that could be freed there */
	int64_t *freeable = calloc((size_t)P->npos + 1, sizeof(int64_t));
	sel_gaps(P, &c, freeable, 1);
	int64_t lo = 0;
	for (int t = 0; t < P->npos; t++)
		lo = w.prof[t] - freeable[t] > lo ? w.prof[t] - freeable[t] : lo;
	free(freeable);
	free(keep);
	free(c.c);
	sel_work_free(&w);
	return lo;
}
