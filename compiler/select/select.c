/* sel: the choice of what the adjoint keeps (select.h has the cost model).
 *
 * The decisions: each candidate, kept, computed again (once, or at each
 * use) or offloaded (where it has a host cost); each temporary, kept for
 * the recomputations or computed again. A choice's cost is the FLOPs it
 * computes again plus its offloads' costs.
 *
 * Exact search: a depth-first search over the decisions, the costliest
 * first, each candidate dropped (once, then each time, then offloaded) before kept. A branch ends
 * when what its dropped candidates cost reaches the best fit's (each is
 * computed again at least once, or offloaded), or when the bytes that the candidates not kept could free
 * at some position fall short of what the budget needs there (a dropped
 * candidate frees at most its bytes, and only between its last forward use
 * and its first adjoint use; keeping a temporary frees nothing). Every leaf
 * is evaluated, so the result is the optimum of the model.
 *
 * Greedy search, beyond the work limit: two searches, the better kept.
 * One drops, from store-everything, the candidate that removes the most
 * bytes-times-positions above the budget per FLOP it adds (computed again
 * once, once with what it starts from kept, or each time), until the peak
 * fits; the other keeps (or computes each time), from nothing kept, the
 * value that saves the most FLOPs per byte it adds to the peak, while the
 * peak fits. Scores are
 * refreshed lazily: a stale score is an estimate, evaluated again when it
 * comes out on top. Each result is polished: a value whose keeping saves
 * FLOPs and still fits is kept. The lower bound is the position argument
 * made fractional: at each position, the cheapest FLOPs (a fractional
 * knapsack) whose candidates could free what the budget needs there. */
#include "select.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"

/* sel_check_tries: each try checked against eval() */
static bool checking;

SelProblem *sel_new(int n, int npos)
{
	SelProblem *P = ar_alloc(sizeof *P);
	P->n = n;
	P->npos = npos;
	P->base = ar_alloc(sizeof(int64_t) * (size_t)(npos + 1));
	P->issue = ar_alloc(sizeof(int) * (size_t)(npos + 1));
	for (int t = 0; t < npos; t++)
		P->issue[t] = t;
	P->kind = ar_alloc((size_t)n + 1);
	P->bytes = ar_alloc(sizeof(int64_t) * (size_t)(n + 1));
	P->flops = ar_alloc(sizeof(int64_t) * (size_t)(n + 1));
	P->nin = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->in = ar_alloc(sizeof(int *) * (size_t)(n + 1));
	P->def = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->fwd_last = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->adj_first = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->adj_last = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->nadj = ar_alloc(sizeof(int) * (size_t)(n + 1));
	P->adj = ar_alloc(sizeof(int *) * (size_t)(n + 1));
	P->host = ar_alloc(sizeof(int64_t) * (size_t)(n + 1));
	P->share = ar_alloc(sizeof(uint32_t) * (size_t)(n + 1));
	P->own = ar_alloc(sizeof(int64_t) * (size_t)(npos + 1));
	P->lend = ar_alloc(sizeof(int) * (size_t)(npos + 1));
	P->lend_bytes = ar_alloc(sizeof(int64_t) * (size_t)(npos + 1));
	for (int t = 0; t < npos; t++)
		P->lend[t] = -1;
	P->threads = 2;
	for (int v = 0; v < n; v++)
		P->adj_first[v] = P->adj_last[v] = -1;
	return P;
}

/* eval_try's committed choice (the section "evaluations of a few changes" below) */
typedef struct {
	int pos;
	int64_t delta;
} Event;

typedef struct Base {
	uint8_t *cur;                     /* the committed states */
	int64_t peak, flops, excess, budget;
	int *r, *last, *at_from, *at, cap_at; /* eval's r, last and at of each value there (at: by value, from at_from) */
	int *cp_from, *cp, cap_cp;        /* per position: the values whose copies are made there, in value order */
	int64_t *prof, *most;             /* per position: the memory, and what the copies made there hold */
	int64_t *sorted, *sum, *shift;    /* per block: prof sorted (less the shift), its running sums; the shift */
	int *users_from, *users;          /* per value: its distinct users that are not fixed */
	bool dirty;                       /* an eval() since the commit: w's r, last and at are not its */
	/* a try's scratch */
	int *stamp, *queued, gen;         /* values changed in this try; values queued in it */
	int *heap, *seed, *changed, nchanged;
	Event *ev;                        /* the changed spans' ends */
	int cap_ev, nev;
	int *pts, npts, cap_pts;          /* positions where copies are made, before or after */
	int64_t *again;                   /* what the copies made at each of pts hold */
	int *list, cap_list, *scratch, cap_scratch;
	int *merged, cap_merged;          /* most_at's copies at a position, in value order */
} Base;

typedef struct {
	const SelProblem *P;
	int *live, nlive; /* the values that are not fixed, in order: the only ones an evaluation visits */
	int *r, *last;    /* per value: where it is computed again (INT_MAX: not), its last use there */
	int **at, *nat, *cap; /* per value computed each time: the positions that need it */
	int64_t *diff;    /* per position + 1 */
	int64_t *made;    /* per position: the bytes of the lasting copies made there so far, in order */
	int64_t *most;    /* per position: the most the copies made there hold at once, in order */
	int *touched, ntouched, cap_touched; /* the positions where copies were made (made and most are zero elsewhere) */
	int *here, cap_here;  /* made_here's scratch */
	int *seen, seen_gen;  /* made_here's: per value, the last call that counted it */
	int *index, *index_gen; /* made_here's: per value, its index in the list of copies, in call seen_gen */
	int *cp, *cp_t, ncp, cap_cp; /* eval's copies: values and positions, sorted by position then value */
	int *sorted, cap_sorted, *count; /* copies_by_position's: the copies by position, a count per position */
	int64_t *prof;    /* per position: the memory, base included */
	int64_t budget;   /* what excess is measured over */
	int64_t excess;   /* the last evaluation's bytes times positions above the budget */
	int64_t evals;
	int *lend_from, *lend_at; /* per value: the positions whose op may take its storage (P->lend) */
	Base *base;        /* a committed choice that eval_try measures changes from; NULL: none */
} Work;

static void work_init(Work *w, const SelProblem *P)
{
	w->P = P;
	w->r = malloc(sizeof(int) * (size_t)(P->n + 1));
	w->last = malloc(sizeof(int) * (size_t)(P->n + 1));
	w->diff = malloc(sizeof(int64_t) * (size_t)(P->npos + 2));
	w->prof = malloc(sizeof(int64_t) * (size_t)(P->npos + 1));
	w->made = calloc((size_t)P->npos + 1, sizeof(int64_t));
	w->most = calloc((size_t)P->npos + 1, sizeof(int64_t));
	w->touched = NULL;
	w->ntouched = w->cap_touched = 0;
	w->here = NULL, w->cap_here = 0;
	w->seen = calloc((size_t)P->n + 1, sizeof(int)), w->seen_gen = 0;
	w->index = calloc((size_t)P->n + 1, sizeof(int)), w->index_gen = calloc((size_t)P->n + 1, sizeof(int));
	w->cp = w->cp_t = NULL, w->ncp = w->cap_cp = 0;
	w->sorted = NULL, w->cap_sorted = 0;
	w->count = malloc(sizeof(int) * (size_t)(P->npos + 2));
	w->live = malloc(sizeof(int) * (size_t)(P->n + 1));
	w->at = calloc((size_t)P->n + 1, sizeof(int *));
	w->nat = calloc((size_t)P->n + 1, sizeof(int));
	w->cap = calloc((size_t)P->n + 1, sizeof(int));
	w->nlive = 0;
	for (int v = 0; v < P->n; v++)
		if (P->kind[v] != SEL_FIXED)
			w->live[w->nlive++] = v;
	w->budget = INT64_MAX;
	w->evals = 0;
	w->base = NULL;
	w->lend_from = calloc((size_t)P->n + 2, sizeof(int));
	w->lend_at = malloc(sizeof(int) * (size_t)(P->npos + 1));
	for (int t = 0; t < P->npos; t++)
		if (P->lend[t] >= 0)
			w->lend_from[P->lend[t] + 2]++;
	for (int v = 0; v < P->n; v++)
		w->lend_from[v + 2] += w->lend_from[v + 1];
	for (int t = 0; t < P->npos; t++)
		if (P->lend[t] >= 0)
			w->lend_at[w->lend_from[P->lend[t] + 1]++] = t;
}

static void base_free(Base *b);

static void work_free(Work *w)
{
	for (int v = 0; v < w->P->n; v++)
		free(w->at[v]);
	free(w->at);
	free(w->nat);
	free(w->cap);
	free(w->live);
	free(w->r);
	free(w->last);
	free(w->diff);
	free(w->made);
	free(w->most);
	free(w->touched);
	free(w->here);
	free(w->seen);
	free(w->index);
	free(w->index_gen);
	free(w->cp);
	free(w->cp_t);
	free(w->sorted);
	free(w->count);
	free(w->prof);
	free(w->lend_from);
	free(w->lend_at);
	base_free(w->base);
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

/* candidate v's adjoint uses, ascending, and their count in *n: P->adj's,
 * or (nadj 0) its first and last, in two[] */
static const int *adj_uses(const SelProblem *P, int v, int two[2], int *n)
{
	if (P->nadj[v]) {
		*n = P->nadj[v];
		return P->adj[v];
	}
	two[0] = P->adj_first[v], two[1] = P->adj_last[v];
	*n = two[0] == two[1] ? 1 : 2;
	return two;
}

/* positions where dropping candidate v may free its bytes: after its last
 * forward use, to its last adjoint use, but for the adjoint uses themselves
 * (computed each time, it is live only there); none for a temporary */
static int gap_from(const SelProblem *P, int v) { return P->fwd_last[v] + 1; }
static int gap_to(const SelProblem *P, int v) { return P->kind[v] == SEL_CAND ? P->adj_last[v] : -1; }
/* u's index in list[0..n), sorted, or -1 */
static int find(const int *list, int n, int u)
{
	for (int lo = 0, hi = n - 1; lo <= hi;) {
		int mid = (lo + hi) / 2;
		if (list[mid] == u)
			return mid;
		if (list[mid] < u)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static bool adj_use(const SelProblem *P, int v, int t)
{
	int two[2], n;
	const int *u = adj_uses(P, v, two, &n);
	return find(u, n, t) >= 0;
}
/* (a value that may take an operand's storage may be made there for nothing: at its adjoint uses too) */
static bool frees(const SelProblem *P, int v, int t)
{
	return t >= gap_from(P, v) && t <= gap_to(P, v) && (P->share[v] || !adj_use(P, v, t));
}

static void at_push(Work *w, int u, int t)
{
	if (w->nat[u] == w->cap[u]) {
		w->cap[u] = w->cap[u] ? 2 * w->cap[u] : 8;
		w->at[u] = realloc(w->at[u], sizeof(int) * (size_t)w->cap[u]);
	}
	w->at[u][w->nat[u]++] = t;
}

static int by_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

/* a need of u at position t, from a recomputation or an adjoint op */
static void need(Work *w, const uint8_t *keep, int u, int t)
{
	if (keep[u] == SEL_EACH) {
		at_push(w, u, t);
		return;
	}
	w->last[u] = w->last[u] > t ? w->last[u] : t;
	if (keep[u] == SEL_ONCE || keep[u] == SEL_HOST)
		w->r[u] = w->r[u] < t ? w->r[u] : t;
}

/* whether v's copy made at t is transient: read there only by other
 * recomputations, so freed before the adjoint op at t runs (a chain of
 * them holds one link and its operands at a time, not all of them) */
static bool transient(const Work *w, const uint8_t *keep, int v, int t)
{
	const SelProblem *P = w->P;
	/* a fetched copy is held from where its fetch is issued */
	if (keep[v] == SEL_HOST || (keep[v] == SEL_ONCE && (w->r[v] != t || w->last[v] != t)))
		return false;
	return keep[v] != SEL_KEEP && !(P->kind[v] == SEL_CAND && adj_use(P, v, t));
}

/* whether v's copy made at t lasts past the op there: made each time, where
 * the adjoint op there reads it; made once, where it is not transient */
static bool lasting(const Work *w, const uint8_t *keep, int v, int t)
{
	if (keep[v] == SEL_EACH)
		return w->P->kind[v] == SEL_CAND && adj_use(w->P, v, t);
	return !transient(w, keep, v, t);
}


/* whether u's storage dies at position t under keep[] (its needs known):
 * kept and last read there; at its last forward use where it is not kept
 * (an offloaded value is read again by its copy's settle); its copy last
 * read there */
static bool dies(const Work *w, const uint8_t *keep, int u, int t)
{
	const SelProblem *P = w->P;
	switch (keep[u]) {
	case SEL_KEEP:
		return max3(P->fwd_last[u], P->adj_last[u], w->last[u]) == t;
	case SEL_EACH:
		/* its positions are sorted (own_needs) */
		return P->fwd_last[u] == t || find(w->at[u], w->nat[u], t) >= 0;
	case SEL_ONCE:
		if (P->fwd_last[u] == t)
			return true;
		/* fall through */
	default:
		return w->r[u] != INT_MAX && w->last[u] == t;
	}
}


/* u's index among made_here's copies if it is made there before the i-th, or -1 */
static int before(const Work *w, int i, int u)
{
	return w->index_gen[u] == w->seen_gen && w->index[u] < i ? w->index[u] : -1;
}

/* The copies made at t, list[0..n) in value order (operands first, as the
 * rewrite makes them): each held with what the copies made before it there
 * hold, the lasting ones and the transient ones a later copy there still
 * reads (a transient copy is freed after its last reader there; a chain
 * holds one link and its operands at a time). An operand of its type that
 * dies at a copy gives it its storage. The most they hold at once in
 * w->most[t], the lasting ones' bytes in w->made[t]. */
static void made_here(Work *w, const uint8_t *keep, int t, const int *list, int n)
{
	const SelProblem *P = w->P;
	if (!n)
		return;
	if (w->ntouched == w->cap_touched) {
		w->cap_touched = w->cap_touched ? 2 * w->cap_touched : 64;
		w->touched = realloc(w->touched, sizeof(int) * (size_t)w->cap_touched);
	}
	w->touched[w->ntouched++] = t;
	if (2 * n > w->cap_here) {
		w->cap_here = 4 * n;
		w->here = realloc(w->here, sizeof(int) * (size_t)w->cap_here);
	}
	int *readers = w->here, *tr = w->here + n;
	w->seen_gen++;
	for (int i = 0; i < n; i++)
		w->index[list[i]] = i, w->index_gen[list[i]] = w->seen_gen;
	/* an operand made here is transient or lasting; one not made here is neither (select.h) */
	for (int i = 0; i < n; i++)
		readers[i] = 0, tr[i] = keep[list[i]] != SEL_KEEP && transient(w, keep, list[i], t);
	/* how many copies here read each transient one */
	for (int i = 0; i < n; i++) {
		int v = list[i];
		for (int k = 0; k < P->nin[v]; k++) {
			int u = P->in[v][k], j = before(w, i, u);
			bool seen = false;
			for (int q = 0; q < k && j >= 0; q++)
				seen |= P->in[v][q] == u;
			if (j >= 0 && !seen && tr[j])
				readers[j]++;
		}
	}
	/* made: the lasting copies while the others are made (an operand whose storage one took still counted by
	 * its span); at_op: the lasting copies while the op runs, less the values held to here that only copies
	 * here read (their spans end here, but they are freed before the op) */
	int64_t made = 0, at_op = 0, gone = 0, waiting = 0, most = 0;
	for (int i = 0; i < n; i++) {
		int v = list[i];
		/* the storage it takes from an operand that dies at it: a transient one (its bytes leave the
		 * waiting ones), or one a span holds to here */
		int64_t take = 0;
		bool from_copy = false;
		for (int k = 0; k < P->nin[v] && k < 32 && !take; k++) {
			int u = P->in[v][k], twice = 0;
			for (int q = 0; q < P->nin[v]; q++)
				twice |= q != k && P->in[v][q] == u;
			if (P->kind[u] == SEL_FIXED || twice || !(P->share[v] >> k & 1))
				continue;
			int64_t same = P->bytes[u] < P->bytes[v] ? P->bytes[u] : P->bytes[v];
			int j = before(w, i, u);
			if (j >= 0 && tr[j]) {
				if (readers[j] == 1)
					take = same, from_copy = true;
			} else if (dies(w, keep, u, t) && !(P->kind[u] == SEL_CAND && adj_use(P, u, t))) {
				take = same;
			}
		}
		int64_t b = made + waiting + P->bytes[v] - take;
		most = b > most ? b : most;
		for (int k = 0; k < P->nin[v]; k++) {
			int u = P->in[v][k], j = before(w, i, u);
			bool seen = false;
			for (int q = 0; q < k; q++)
				seen |= P->in[v][q] == u;
			if (seen || P->kind[u] == SEL_FIXED)
				continue;
			/* its transient operands read for the last time here are freed */
			if (j >= 0 && tr[j]) {
				if (--readers[j] == 0)
					waiting -= P->bytes[u];
			} else if (w->seen[u] != w->seen_gen && dies(w, keep, u, t) &&
			           !(P->kind[u] == SEL_CAND && adj_use(P, u, t))) {
				w->seen[u] = w->seen_gen;
				gone += P->bytes[u];
			}
		}
		int64_t held = P->bytes[v] - (from_copy ? 0 : take);
		if (lasting(w, keep, v, t))
			made += held, at_op += P->bytes[v];
		else if (readers[i] > 0)
			waiting += held;
	}
	w->made[t] = at_op - gone;
	w->most[t] = most;
}

/* what position t holds beyond its base and the spans over it: the most of
 * its two moments (select.h), the copies made there in w->most and
 * w->made */
static int64_t extra(const Work *w, const uint8_t *keep, int t)
{
	const SelProblem *P = w->P;
	int u = P->lend[t];
	int64_t saved = u >= 0 && P->kind[u] != SEL_FIXED && dies(w, keep, u, t) ? P->lend_bytes[t] : 0;
	saved = u >= 0 && P->bytes[u] < saved ? P->bytes[u] : saved;
	int64_t before = w->most[t] - P->own[t], during = w->made[t] - saved;
	return before > during ? before : during;
}

/* the needs value v, computed again, puts on its operands (on operand
 * `only` alone where it is >= 0): where it is made once, or the first and
 * last positions where it is made each time (every one, to an operand made
 * each time) */
static void emit(Work *w, const uint8_t *keep, int v, int only)
{
	const SelProblem *P = w->P;
	if (keep[v] == SEL_ONCE && w->r[v] != INT_MAX) {
		for (int k = 0; k < P->nin[v]; k++)
			if (P->kind[P->in[v][k]] != SEL_FIXED && (only < 0 || P->in[v][k] == only))
				need(w, keep, P->in[v][k], w->r[v]);
		return;
	}
	int m = w->nat[v], *at = w->at[v];
	if (keep[v] != SEL_EACH || !m)
		return;
	for (int k = 0; k < P->nin[v]; k++) {
		int u = P->in[v][k];
		if (P->kind[u] == SEL_FIXED || (only >= 0 && u != only))
			continue;
		if (keep[u] == SEL_EACH) {
			for (int j = 0; j < m; j++)
				at_push(w, u, at[j]);
		} else {
			need(w, keep, u, at[0]);
			need(w, keep, u, at[m - 1]);
		}
	}
}

/* a value not kept: needed by its adjoint ops, as a candidate; made each
 * time, its positions sorted, each once */
static void own_needs(Work *w, const uint8_t *keep, int v)
{
	const SelProblem *P = w->P;
	if (P->kind[v] == SEL_CAND) {
		int two[2], n;
		const int *u = adj_uses(P, v, two, &n);
		for (int k = 0; k < n; k++)
			need(w, keep, v, u[k]);
	}
	int n = w->nat[v], *at = w->at[v], m = 0;
	if (keep[v] != SEL_EACH || !n)
		return;
	qsort(at, (size_t)n, sizeof(int), by_int);
	for (int k = 0; k < n; k++)
		if (!m || at[k] != at[m - 1])
			at[m++] = at[k];
	w->nat[v] = m;
}

/* what v costs in its state, its needs known: FLOPs per copy made, or its fetch */
static int64_t cost_of(const Work *w, const uint8_t *keep, int v)
{
	const SelProblem *P = w->P;
	switch (keep[v]) {
	case SEL_HOST:
		return w->r[v] == INT_MAX ? 0 : P->host[v];
	case SEL_ONCE:
		return w->r[v] == INT_MAX ? 0 : P->flops[v];
	case SEL_EACH:
		return P->flops[v] * w->nat[v];
	default:
		return 0;
	}
}

/* the ranges of positions where v is held, its copies' own positions
 * aside (made_here counts those): kept, from its definition to its last use;
 * otherwise to its last forward use, and, computed again once, from after
 * it is made (or, fetched, from where the fetch is issued) to its last
 * need. Their count; span[i] = {from, to}. */
static int spans(const Work *w, const uint8_t *keep, int v, int span[2][2])
{
	const SelProblem *P = w->P;
	if (keep[v] == SEL_KEEP) {
		span[0][0] = P->def[v], span[0][1] = max3(P->fwd_last[v], P->adj_last[v], w->last[v]);
		return 1;
	}
	span[0][0] = P->def[v], span[0][1] = P->fwd_last[v];
	if (keep[v] == SEL_EACH || w->r[v] == INT_MAX)
		return 1;
	span[1][0] = keep[v] == SEL_HOST ? P->issue[w->r[v]] : w->r[v] + 1, span[1][1] = w->last[v];
	return 2;
}

/* the positions where v's copies are made (made_here): once, where first
 * needed; each time, at each; *n of them */
static const int *copies(const Work *w, const uint8_t *keep, int v, int *one, int *n)
{
	*n = 0;
	if (keep[v] == SEL_EACH) {
		*n = w->nat[v];
		return w->at[v];
	}
	if (keep[v] == SEL_ONCE && w->r[v] != INT_MAX)
		*one = w->r[v], *n = 1;
	return one;
}

static int by_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* eval's copies (w->cp, in value order) grouped by position, each group in
 * value order (a stable counting sort), and each made_here */
static void copies_by_position(Work *w, const uint8_t *keep)
{
	int n = w->ncp, npos = w->P->npos;
	if (!n)
		return;
	if (n > w->cap_sorted) {
		w->cap_sorted = 2 * n;
		w->sorted = realloc(w->sorted, sizeof(int) * (size_t)w->cap_sorted);
	}
	int *count = w->count;
	memset(count, 0, sizeof(int) * (size_t)(npos + 2));
	for (int i = 0; i < n; i++)
		count[w->cp_t[i] + 1]++;
	for (int t = 0; t < npos; t++)
		count[t + 1] += count[t];
	for (int i = 0; i < n; i++)
		w->sorted[count[w->cp_t[i]]++] = w->cp[i];
	/* count[t] is now where position t's copies end */
	for (int t = 0, from = 0; t < npos; from = count[t++])
		if (count[t] > from)
			made_here(w, keep, t, w->sorted + from, count[t] - from);
}

/* the peak of keep[]; its FLOPs in *flops; the memory per position in
 * w->prof, and its excess over w->budget in w->excess */
static int64_t eval(Work *w, const uint8_t *keep, int64_t *flops)
{
	const SelProblem *P = w->P;
	w->evals++;
	if (w->base)
		w->base->dirty = true;
	for (int i = 0; i < w->nlive; i++)
		w->r[w->live[i]] = INT_MAX, w->last[w->live[i]] = -1, w->nat[w->live[i]] = 0;
	int64_t f = 0;
	/* users before their operands: a value's needs are all known when it is reached */
	for (int i = w->nlive - 1; i >= 0; i--) {
		int v = w->live[i];
		if (keep[v] == SEL_KEEP)
			continue;
		own_needs(w, keep, v);
		f += cost_of(w, keep, v);
		emit(w, keep, v, -1);
	}
	memset(w->diff, 0, sizeof(int64_t) * (size_t)(P->npos + 1));
	w->ncp = 0;
	for (int i = 0; i < w->nlive; i++) {
		int v = w->live[i], span[2][2], one, n;
		for (int k = spans(w, keep, v, span) - 1; k >= 0; k--)
			add(w->diff, span[k][0], span[k][1], P->bytes[v]);
		/* a copy counts at the position it is made through made_here, after it through diff */
		const int *at = copies(w, keep, v, &one, &n);
		for (int k = 0; k < n; k++) {
			if (w->ncp == w->cap_cp) {
				w->cap_cp = w->cap_cp ? 2 * w->cap_cp : 64;
				w->cp = realloc(w->cp, sizeof(int) * (size_t)w->cap_cp);
				w->cp_t = realloc(w->cp_t, sizeof(int) * (size_t)w->cap_cp);
			}
			w->cp[w->ncp] = v, w->cp_t[w->ncp++] = at[k];
		}
	}
	copies_by_position(w, keep);
	int64_t run = 0, peak = 0, ex = 0, budget = w->budget;
	for (int t = 0; t < P->npos; t++) {
		run += w->diff[t];
		int64_t m = w->prof[t] = P->base[t] + run + extra(w, keep, t);
		peak = m > peak ? m : peak;
		ex += m > budget ? m - budget : 0;
	}
	/* only the positions where copies were made hold anything in made and most */
	for (int k = 0; k < w->ntouched; k++)
		w->made[w->touched[k]] = w->most[w->touched[k]] = 0;
	w->ntouched = 0;
	w->excess = ex;
	*flops = f;
	return peak;
}

/* ---- evaluations of a few changes from a committed choice ----
 *
 * A greedy search scores many moves from one choice, each a value or a few
 * changing state. commit() evaluates the choice and keeps what eval found;
 * eval_try() then evaluates a choice that differs from it in a few values
 * exactly as eval() would, visiting only what the changes reach: the
 * changed values and, operands after users, each operand whose needs
 * change with them; the ranges their spans cover, as shifts of the
 * committed profile; and the positions where their copies are made, where
 * the copies there are laid out again. The committed profile is held in
 * blocks of positions, each sorted with its sums, and a shift per block,
 * so a range's most and its bytes above a budget take a search per block. */

enum {
	BLOCK = 128,    /* positions per block of the committed profile */
	TRY_MOST = 64,  /* changes beyond which eval_try evaluates the whole choice */
};


static void base_free(Base *b)
{
	if (!b)
		return;
	free(b->cur), free(b->r), free(b->last), free(b->at_from), free(b->at), free(b->cp_from), free(b->cp);
	free(b->prof), free(b->most), free(b->sorted), free(b->sum), free(b->shift), free(b->users_from), free(b->users);
	free(b->stamp), free(b->queued), free(b->heap), free(b->seed), free(b->changed), free(b->ev);
	free(b->pts), free(b->again), free(b->list), free(b->scratch), free(b->merged);
	free(b);
}

static void *grow(void *a, int *cap, int want, size_t size)
{
	if (want <= *cap)
		return a;
	while (*cap < want)
		*cap = *cap ? 2 * *cap : 64;
	return realloc(a, size * (size_t)*cap);
}


/* block k of the committed profile sorted again, its shift folded in */
static void sort_block(Base *b, int k, int npos)
{
	int from = k * BLOCK, to = from + BLOCK < npos ? from + BLOCK : npos;
	memcpy(b->sorted + from, b->prof + from, sizeof(int64_t) * (size_t)(to - from));
	qsort(b->sorted + from, (size_t)(to - from), sizeof(int64_t), by_int64);
	for (int t = from, run = 0; t < to; t++)
		b->sum[t] = (run ? b->sum[t - 1] : 0) + b->sorted[t], run = 1;
	b->shift[k] = 0;
}

static Base *base_new(const SelProblem *P)
{
	Base *b = calloc(1, sizeof *b);
	int n = P->n, npos = P->npos, nblocks = (npos + BLOCK - 1) / BLOCK;
	b->cur = malloc((size_t)n + 1);
	b->r = malloc(sizeof(int) * (size_t)(n + 1));
	b->last = malloc(sizeof(int) * (size_t)(n + 1));
	b->at_from = malloc(sizeof(int) * (size_t)(n + 2));
	b->cp_from = malloc(sizeof(int) * (size_t)(npos + 2));
	b->prof = malloc(sizeof(int64_t) * (size_t)(npos + 1));
	b->most = malloc(sizeof(int64_t) * (size_t)(npos + 1));
	b->sorted = malloc(sizeof(int64_t) * (size_t)(npos + 1));
	b->sum = malloc(sizeof(int64_t) * (size_t)(npos + 1));
	b->shift = calloc((size_t)nblocks + 1, sizeof(int64_t));
	b->stamp = calloc((size_t)n + 1, sizeof(int));
	b->queued = calloc((size_t)n + 1, sizeof(int));
	b->heap = malloc(sizeof(int) * (size_t)(n + 1));
	b->seed = malloc(sizeof(int) * (size_t)(TRY_MOST + 1));
	b->changed = malloc(sizeof(int) * (size_t)(n + 1));
	/* users, each once */
	b->users_from = calloc((size_t)n + 2, sizeof(int));
	int *last_user = malloc(sizeof(int) * (size_t)(n + 1));
	for (int pass = 0; pass < 2; pass++) {
		for (int v = 0; v < n; v++)
			last_user[v] = -1;
		for (int y = 0; y < n; y++) {
			if (P->kind[y] == SEL_FIXED)
				continue;
			for (int k = 0; k < P->nin[y]; k++) {
				int u = P->in[y][k];
				if (P->kind[u] == SEL_FIXED || last_user[u] == y)
					continue;
				last_user[u] = y;
				if (pass)
					b->users[b->users_from[u + 1]++] = y;
				else
					b->users_from[u + 2]++;
			}
		}
		if (!pass) {
			for (int v = 0; v < n; v++)
				b->users_from[v + 2] += b->users_from[v + 1];
			b->users = malloc(sizeof(int) * (size_t)(b->users_from[n + 1] + 1));
		}
	}
	free(last_user);
	return b;
}

/* keep[] evaluated and made the choice eval_try measures from */
static int64_t commit(Work *w, const uint8_t *keep, int64_t *flops)
{
	const SelProblem *P = w->P;
	int64_t peak = eval(w, keep, flops);
	if (!w->base)
		w->base = base_new(P);
	Base *b = w->base;
	int npos = P->npos, nblocks = (npos + BLOCK - 1) / BLOCK;
	b->peak = peak, b->flops = *flops, b->excess = w->excess, b->budget = w->budget;
	memcpy(b->cur, keep, (size_t)P->n);
	int nat = 0;
	for (int i = 0; i < w->nlive; i++)
		nat += w->nat[w->live[i]];
	b->at = grow(b->at, &b->cap_at, nat + 1, sizeof(int));
	b->at_from[0] = 0;
	for (int v = 0, k = 0; v < P->n; v++) {
		b->r[v] = w->r[v], b->last[v] = w->last[v];
		if (P->kind[v] != SEL_FIXED && w->nat[v])
			memcpy(b->at + k, w->at[v], sizeof(int) * (size_t)w->nat[v]), k += w->nat[v];
		b->at_from[v + 1] = k;
	}
	/* the copies per position, in value order */
	memset(b->cp_from, 0, sizeof(int) * (size_t)(npos + 2));
	int total = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < w->nlive; i++) {
			int v = w->live[i], one, n;
			const int *at = copies(w, keep, v, &one, &n);
			for (int k = 0; k < n; k++) {
				if (pass)
					b->cp[b->cp_from[at[k] + 1]++] = v;
				else
					b->cp_from[at[k] + 2]++, total++;
			}
		}
		if (!pass) {
			for (int t = 0; t < npos; t++)
				b->cp_from[t + 2] += b->cp_from[t + 1];
			b->cp = grow(b->cp, &b->cap_cp, total + 1, sizeof(int));
		}
	}
	/* the profile: blocks that only moved keep their order and take a shift */
	int64_t run = 0;
	for (int t = 0; t < npos; t++) {
		run += w->diff[t];
		b->most[t] = w->prof[t] - P->base[t] - run;
	}
	bool first = !b->gen;
	for (int k = 0; k < nblocks; k++) {
		int from = k * BLOCK, to = from + BLOCK < npos ? from + BLOCK : npos;
		int64_t d = first ? 0 : w->prof[from] - b->prof[from];
		bool moved = !first;
		for (int t = from; t < to && moved; t++)
			moved = w->prof[t] - b->prof[t] == d;
		memcpy(b->prof + from, w->prof + from, sizeof(int64_t) * (size_t)(to - from));
		if (moved)
			b->shift[k] += d;
		else
			sort_block(b, k, npos);
	}
	b->gen++;
	b->dirty = false;
	return peak;
}

/* over positions [from, to] of the committed profile, each raised by d: the
 * most, and the bytes above `over` summed in *above (over INT64_MAX: 0) */
static int64_t range(const Base *b, int from, int to, int64_t d, int64_t over, int64_t *above)
{
	int64_t most = INT64_MIN, sum = 0;
	for (int t = from; t <= to;) {
		int k = t / BLOCK, end = (k + 1) * BLOCK - 1;
		if (t % BLOCK || end > to) {
			/* part of a block: each position */
			int stop = end < to ? end : to;
			for (; t <= stop; t++) {
				int64_t m = b->prof[t] + d;
				most = m > most ? m : most;
				sum += over != INT64_MAX && m > over ? m - over : 0;
			}
			continue;
		}
		/* a whole block: its largest, and a search for the first above */
		int64_t s = b->shift[k] + d, *x = b->sorted + t;
		most = x[BLOCK - 1] + s > most ? x[BLOCK - 1] + s : most;
		if (over != INT64_MAX && x[BLOCK - 1] + s > over) {
			int lo = 0, hi = BLOCK - 1;
			while (lo < hi) {
				int mid = (lo + hi) / 2;
				if (x[mid] + s > over)
					hi = mid;
				else
					lo = mid + 1;
			}
			int64_t tail = b->sum[t + BLOCK - 1] - (lo ? b->sum[t + lo - 1] : 0);
			sum += tail + (int64_t)(BLOCK - lo) * (s - over);
		}
		t = end + 1;
	}
	*above = sum;
	return most;
}

static void heap_push(Base *b, int *n, int v)
{
	int i = (*n)++;
	for (; i && b->heap[(i - 1) / 2] < v; i = (i - 1) / 2)
		b->heap[i] = b->heap[(i - 1) / 2];
	b->heap[i] = v;
}

static int heap_pop(Base *b, int *n)
{
	int top = b->heap[0], v = b->heap[--*n], i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && b->heap[c + 1] > b->heap[c])
			c++;
		if (b->heap[c] <= v)
			break;
		b->heap[i] = b->heap[c];
		i = c;
	}
	if (*n)
		b->heap[i] = v;
	return top;
}

static int by_event(const void *a, const void *b) { return by_int(&((const Event *)a)->pos, &((const Event *)b)->pos); }

/* v's spans under keep[], each added with sign, and its copies' positions noted */
static void spans_of(Work *w, const uint8_t *keep, int v, int sign)
{
	Base *b = w->base;
	int span[2][2], one, n;
	for (int k = spans(w, keep, v, span) - 1; k >= 0; k--)
		if (span[k][0] <= span[k][1] && w->P->bytes[v]) {
			b->ev = grow(b->ev, &b->cap_ev, b->nev + 2, sizeof(Event));
			b->ev[b->nev++] = (Event){span[k][0], sign * w->P->bytes[v]};
			b->ev[b->nev++] = (Event){span[k][1] + 1, -sign * w->P->bytes[v]};
		}
	const int *at = copies(w, keep, v, &one, &n);
	int nl = w->lend_from[v + 1] - w->lend_from[v];
	/* its copies, the ends of its (at most two) spans, its lending positions */
	b->pts = grow(b->pts, &b->cap_pts, b->npts + n + 2 + nl, sizeof(int));
	for (int k = 0; k < n; k++)
		b->pts[b->npts++] = at[k];
	/* a value gives a copy its storage where a span of it ends */
	for (int k = spans(w, keep, v, span) - 1; k >= 0; k--)
		if (span[k][1] >= 0 && span[k][1] < w->P->npos)
			b->pts[b->npts++] = span[k][1];
	/* where an op may take its storage, what it saves there depends on its state */
	for (int k = 0; k < nl; k++)
		b->pts[b->npts++] = w->lend_at[w->lend_from[v] + k];
}

/* v's r, last and at as committed */
static void restore(Work *w, int v)
{
	Base *b = w->base;
	int n = b->at_from[v + 1] - b->at_from[v];
	w->r[v] = b->r[v], w->last[v] = b->last[v], w->nat[v] = 0;
	for (int k = 0; k < n; k++)
		at_push(w, v, b->at[b->at_from[v] + k]);
}

/* what the copies made at t hold at once under keep[]: eval's made_here over
 * the committed copies there, the changed values' own in place of theirs */
static int64_t most_at(Work *w, const uint8_t *keep, int t)
{
	Base *b = w->base;
	/* the changed values made at t, in value order */
	int n = 0;
	for (int i = 0; i < b->nchanged; i++) {
		int v = b->changed[i], one, m;
		const int *at = copies(w, keep, v, &one, &m);
		for (int k = 0; k < m; k++)
			if (at[k] == t) {
				b->list = grow(b->list, &b->cap_list, n + 1, sizeof(int));
				int j = n++;
				for (; j > 0 && b->list[j - 1] > v; j--)
					b->list[j] = b->list[j - 1];
				b->list[j] = v;
				break;
			}
	}
	/* merged with the committed ones there that did not change */
	int m = 0;
	for (int k = b->cp_from[t], j = 0; k < b->cp_from[t + 1] || j < n;) {
		int v;
		if (k < b->cp_from[t + 1] && (j == n || b->cp[k] < b->list[j])) {
			if (b->stamp[v = b->cp[k++]] == b->gen)
				continue;
		} else {
			v = b->list[j++];
		}
		b->merged = grow(b->merged, &b->cap_merged, m + 1, sizeof(int));
		b->merged[m++] = v;
	}
	made_here(w, keep, t, b->merged, m);
	int64_t most = extra(w, keep, t);
	w->made[t] = w->most[t] = 0;
	w->ntouched = 0;
	return most;
}

/* The values whose needs change from the committed choice to keep[], from
 * the seeds, operands after their users (b->changed, stamped; w's r, last
 * and at theirs under keep[]), with their spans' changes as events and
 * their copies' positions, before and after; the change in FLOPs. False
 * where they pass `most`. */
static bool reach(Work *w, const uint8_t *keep, int nseeds, int most, int64_t *df)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	int nheap = 0;
	for (int i = 0; i < nseeds; i++)
		b->queued[b->seed[i]] = b->gen, heap_push(b, &nheap, b->seed[i]);
	*df = 0;
	while (nheap) {
		int v = heap_pop(b, &nheap);
		w->r[v] = INT_MAX, w->last[v] = -1, w->nat[v] = 0;
		for (int k = b->users_from[v]; k < b->users_from[v + 1]; k++)
			emit(w, keep, b->users[k], v);
		if (keep[v] != SEL_KEEP)
			own_needs(w, keep, v);
		int from = b->at_from[v], n = b->at_from[v + 1] - from;
		if (keep[v] == b->cur[v] && w->r[v] == b->r[v] && w->last[v] == b->last[v] && w->nat[v] == n &&
		    (!n || !memcmp(w->at[v], b->at + from, sizeof(int) * (size_t)n)))
			continue;
		if (b->nchanged == most) {
			restore(w, v);
			return false;
		}
		b->changed[b->nchanged++] = v;
		b->stamp[v] = b->gen;
		/* what it is, then (restored a moment) what it was */
		*df += cost_of(w, keep, v);
		spans_of(w, keep, v, 1);
		int r = w->r[v], last = w->last[v], nat = w->nat[v];
		b->scratch = grow(b->scratch, &b->cap_scratch, nat + 1, sizeof(int));
		if (nat)
			memcpy(b->scratch, w->at[v], sizeof(int) * (size_t)nat);
		restore(w, v);
		*df -= cost_of(w, b->cur, v);
		spans_of(w, b->cur, v, -1);
		w->r[v] = r, w->last[v] = last, w->nat[v] = 0;
		for (int k = 0; k < nat; k++)
			at_push(w, v, b->scratch[k]);
		for (int k = 0; k < P->nin[v]; k++) {
			int u = P->in[v][k];
			if (P->kind[u] != SEL_FIXED && b->queued[u] != b->gen)
				b->queued[u] = b->gen, heap_push(b, &nheap, u);
		}
	}
	return true;
}

/* keep[]'s peak, FLOPs (*flops) and excess (w->excess) exactly as eval()
 * finds them, from the committed choice, where keep[] differs from it in at
 * most TRY_MOST values and the changes reach at most an eighth of them;
 * otherwise by eval() */
static int64_t eval_try(Work *w, const uint8_t *keep, int64_t *flops)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	if (!b || b->budget != w->budget)
		return eval(w, keep, flops);
	int nseeds = 0;
	for (int v = 0; v < P->n; v += 256) {
		/* 256 states at a time: most are as committed */
		int m = P->n - v < 256 ? P->n - v : 256;
		if (!memcmp(keep + v, b->cur + v, (size_t)m))
			continue;
		for (int u = v; u < v + m; u++)
			if (keep[u] != b->cur[u]) {
				if (nseeds == TRY_MOST)
					return eval(w, keep, flops);
				b->seed[nseeds++] = u;
			}
	}
	if (!nseeds) {
		w->evals++;
		*flops = b->flops, w->excess = b->excess;
		return b->peak;
	}
	if (b->dirty) {
		/* a whole evaluation since the commit wrote over w's r, last and at */
		for (int i = 0; i < w->nlive; i++)
			restore(w, w->live[i]);
		b->dirty = false;
	}
	b->gen++;
	b->nev = b->npts = b->nchanged = 0;
	int64_t df;
	bool ok = reach(w, keep, nseeds, w->nlive / 8 > TRY_MOST ? w->nlive / 8 : TRY_MOST, &df);
	int64_t peak = 0, ex = 0, budget = w->budget;
	if (ok) {
		w->evals++;
		/* the positions where copies are made, before or after, laid out again */
		if (b->npts)
			qsort(b->pts, (size_t)b->npts, sizeof(int), by_int);
		int npts = 0;
		for (int k = 0; k < b->npts; k++)
			if (!npts || b->pts[k] != b->pts[npts - 1])
				b->pts[npts++] = b->pts[k];
		b->again = realloc(b->again, sizeof(int64_t) * (size_t)(npts + 1));
		for (int k = 0; k < npts; k++)
			b->again[k] = most_at(w, keep, b->pts[k]);
		/* between the spans' ends, and apart from those positions, the committed profile shifts as one */
		if (b->nev)
			qsort(b->ev, (size_t)b->nev, sizeof(Event), by_event);
		int64_t d = 0, dex = 0;
		for (int t = 0, e = 0, q = 0; t < P->npos;) {
			while (e < b->nev && b->ev[e].pos <= t)
				d += b->ev[e++].delta;
			if (q < npts && b->pts[q] == t) {
				int64_t was = b->prof[t], m = was + d - b->most[t] + b->again[q++];
				peak = m > peak ? m : peak;
				if (budget != INT64_MAX)
					dex += (m > budget ? m - budget : 0) - (was > budget ? was - budget : 0);
				t++;
				continue;
			}
			int next = e < b->nev && b->ev[e].pos < P->npos ? b->ev[e].pos : P->npos;
			next = q < npts && b->pts[q] < next ? b->pts[q] : next;
			int64_t above, before;
			int64_t m = range(b, t, next - 1, d, budget, &above);
			peak = m > peak ? m : peak;
			if (d && budget != INT64_MAX) {
				range(b, t, next - 1, 0, budget, &before);
				dex += above - before;
			}
			t = next;
		}
		ex = b->excess + dex;
	}
	for (int i = 0; i < b->nchanged; i++)
		restore(w, b->changed[i]);
	if (!ok)
		return eval(w, keep, flops);
	*flops = b->flops + df;
	w->excess = ex;
	if (checking) {
		int64_t f2, p2 = eval(w, keep, &f2);
		w->evals--;
		if (p2 != peak || f2 != *flops || w->excess != ex)
			die("select: a try's peak %lld, FLOPs %lld, excess %lld; evaluated whole, %lld, %lld, %lld",
			    (long long)peak, (long long)*flops, (long long)ex, (long long)p2, (long long)f2,
			    (long long)w->excess);
	}
	return peak;
}

void sel_check_tries(bool on) { checking = on; }

int64_t sel_eval(const SelProblem *P, const uint8_t *keep, int64_t *flops, int64_t *prof)
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

/* whether v may be in state st: offloaded only where it has a host cost */
static bool may(const SelProblem *P, int v, uint8_t st)
{
	return st != SEL_HOST || (P->kind[v] == SEL_CAND && P->host[v] > 0);
}

/* the least a candidate not kept costs: computed again once, or offloaded */
static int64_t least_cost(const SelProblem *P, int v)
{
	return may(P, v, SEL_HOST) && P->host[v] < P->flops[v] ? P->host[v] : P->flops[v];
}

/* The choices that matter: candidates and temporaries that are not free
 * (a free one made again each time never costs and never holds more), the
 * costliest first, then in order. keep[] starts as store-everything. */
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

/* store-everything: every candidate kept but the free ones; free values made again at each use (that holds
 * them least) */
static void store_everything(const SelProblem *P, uint8_t *keep)
{
	for (int v = 0; v < P->n; v++)
		keep[v] = P->kind[v] != SEL_FIXED && is_free(P, v) ? SEL_EACH : P->kind[v] == SEL_CAND ? SEL_KEEP : SEL_ONCE;
}

static Cands candidates(const SelProblem *P, uint8_t *keep)
{
	Cands c = {malloc(sizeof(int) * (size_t)(P->n + 1)), 0};
	store_everything(P, keep);
	for (int v = 0; v < P->n; v++)
		if ((P->kind[v] == SEL_CAND || P->kind[v] == SEL_TEMP) && !is_free(P, v))
			c.c[c.nc++] = v;
	sort_problem = P;
	qsort(c.c, (size_t)c.nc, sizeof(int), by_flops);
	return c;
}

/* what an op's result taking candidate v's storage may save at t beyond
 * store-everything: where v is not kept, it may die there */
static int64_t lent(const SelProblem *P, int v, int t) { return P->lend[t] == v && P->kind[v] == SEL_CAND ? P->lend_bytes[t] : 0; }

/* the sum over v's gap, for each candidate in c, of sign * its bytes, and
 * over the positions where an op may take its storage, of what that saves */
static void gaps(const SelProblem *P, const Cands *c, int64_t *at, int sign)
{
	for (int i = 0; i < c->nc; i++)
		for (int t = gap_from(P, c->c[i]); t <= gap_to(P, c->c[i]); t++)
			if (frees(P, c->c[i], t))
				at[t] += sign * P->bytes[c->c[i]];
	for (int t = 0; t < P->npos; t++)
		if (P->lend[t] >= 0)
			at[t] += sign * lent(P, P->lend[t], t);
}

/* ---- exact search ---- */

typedef struct {
	Work *w; /* sel_fit's: the search's evaluations grow its arrays */
	Cands c;
	int64_t budget, limit, steps; /* steps: positions the pruning walked */
	uint8_t *keep, *best;
	int64_t best_flops, best_peak; /* the fit with the fewest FLOPs */
	bool fits, over;
	int64_t *need;  /* per position: the bytes the budget needs freed there */
	int64_t *avail; /* per position: the bytes the candidates not kept could free there */
} Exact;

static void leaf(Exact *e)
{
	int64_t f, peak = eval(e->w, e->keep, &f);
	if (peak <= e->budget && (!e->fits || f < e->best_flops || (f == e->best_flops && peak < e->best_peak))) {
		e->fits = true;
		e->best_flops = f;
		e->best_peak = peak;
		memcpy(e->best, e->keep, (size_t)e->w->P->n);
	}
}

/* each candidate computed again once, each time, then kept; each temporary kept, then computed again once,
 * then each time */
static void dfs(Exact *e, int i, int64_t flops)
{
	const SelProblem *P = e->w->P;
	if (e->over || (e->fits && flops >= e->best_flops))
		return;
	if (e->w->evals * (int64_t)(P->n + P->npos) + e->steps > e->limit) {
		e->over = true;
		return;
	}
	if (i == e->c.nc) {
		leaf(e);
		return;
	}
	int v = e->c.c[i];
	if (P->kind[v] == SEL_TEMP) {
		e->keep[v] = SEL_KEEP;
		dfs(e, i + 1, flops);
		e->keep[v] = SEL_ONCE;
		dfs(e, i + 1, flops);
		e->keep[v] = SEL_EACH;
		dfs(e, i + 1, flops);
		e->keep[v] = SEL_ONCE;
		return;
	}
	/* computed again at least once either way */
	e->keep[v] = SEL_ONCE;
	dfs(e, i + 1, flops + P->flops[v]);
	e->keep[v] = SEL_EACH;
	dfs(e, i + 1, flops + P->flops[v]);
	if (may(P, v, SEL_HOST)) {
		e->keep[v] = SEL_HOST;
		dfs(e, i + 1, flops + P->host[v]);
	}
	e->keep[v] = SEL_KEEP;
	/* kept: what it could have freed is no longer available */
	int from = gap_from(P, v), to = gap_to(P, v);
	e->steps += 2 * (to - from + 2);
	bool ok = true;
	for (int t = from; t <= to; t++) {
		if (!frees(P, v, t))
			continue;
		e->avail[t] -= P->bytes[v];
		ok &= e->avail[t] >= e->need[t];
	}
	const Work *w = e->w;
	for (int k = w->lend_from[v]; k < w->lend_from[v + 1]; k++) {
		int t = w->lend_at[k];
		e->avail[t] -= lent(P, v, t);
		ok &= e->avail[t] >= e->need[t];
	}
	if (ok)
		dfs(e, i + 1, flops);
	for (int t = from; t <= to; t++)
		if (frees(P, v, t))
			e->avail[t] += P->bytes[v];
	for (int k = w->lend_from[v]; k < w->lend_from[v + 1]; k++)
		e->avail[w->lend_at[k]] += lent(P, v, w->lend_at[k]);
}

/* ---- the lower bound ---- */

static const SelProblem *ratio_problem;
static int by_ratio(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	const SelProblem *P = ratio_problem;
	/* cost per byte, cheapest first */
	double rx = (double)least_cost(P, x) / (double)(P->bytes[x] ? P->bytes[x] : 1);
	double ry = (double)least_cost(P, y) / (double)(P->bytes[y] ? P->bytes[y] : 1);
	return rx < ry ? -1 : rx > ry ? 1 : x - y;
}

/* need[t]: what the budget needs freed at t; the least cost of any fit
 * (INT64_MAX: none fits). Only candidates not kept free bytes, each its
 * own, in its gap, and each costs at least its own FLOPs or its offload. */
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
		/* what an op taking a candidate's storage saves there, counted as free: a bound still */
		double left = (double)(need[t] - (P->lend[t] >= 0 ? lent(P, P->lend[t], t) : 0)), cost = 0;
		for (int i = 0; i < n && left > 0; i++) {
			int v = order[i];
			if (!frees(P, v, t))
				continue;
			double b = (double)P->bytes[v];
			double cv = (double)least_cost(P, v);
			cost += b >= left ? cv * left / b : cv;
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
 * A candidate is tried computed again once, once with the temporaries its
 * recomputation would start from kept (its frontier), and each time it is
 * needed; the best of the three taken. */
enum { MOVE_ONCE, MOVE_FRONT, MOVE_EACH, MOVE_HOST };
static const uint8_t move_state[] = {[MOVE_ONCE] = SEL_ONCE, [MOVE_FRONT] = SEL_ONCE, [MOVE_EACH] = SEL_EACH,
                                     [MOVE_HOST] = SEL_HOST};

static Outcome greedy_drop(Work *w, const Cands *c, int64_t budget, uint8_t *keep)
{
	const SelProblem *P = w->P;
	w->budget = budget;
	int64_t f, peak = commit(w, keep, &f), ex = w->excess;
	double *score = malloc(sizeof(double) * (size_t)(c->nc + 1));
	int *round = malloc(sizeof(int) * (size_t)(c->nc + 1));
	uint8_t *move = malloc((size_t)c->nc + 1);
	int *front = malloc(sizeof(int) * (size_t)(P->n + 1));
	bool *seen = calloc((size_t)P->n + 1, 1);
	uint8_t *was = malloc((size_t)P->n + 1);
	for (int i = 0; i < c->nc; i++)
		score[i] = 1e300, round[i] = -1, move[i] = MOVE_ONCE;
	int now = 0;
	bool refreshed = false;
	while (peak > budget) {
		int top = -1;
		for (int i = 0; i < c->nc; i++)
			if (P->kind[c->c[i]] == SEL_CAND && keep[c->c[i]] == SEL_KEEP && (top < 0 || score[i] > score[top]))
				top = i;
		if (top < 0)
			break;
		int v = c->c[top];
		int nf = frontier(P, v, front, seen);
		if (round[top] != now) {
			int64_t f2;
			score[top] = -1e300;
			for (int m = MOVE_ONCE; m <= MOVE_HOST; m++) {
				/* read by one adjoint op: each time is once, unless recomputations read it too */
				if ((m == MOVE_EACH && P->adj_first[v] == P->adj_last[v] && w->nlive > 256) || !may(P, v, move_state[m]))
					continue;
				int added = 0;
				keep[v] = move_state[m];
				for (int k = 0; k < nf && m == MOVE_FRONT; k++)
					was[k] = keep[front[k]], added += keep[front[k]] != SEL_KEEP, keep[front[k]] = SEL_KEEP;
				if (m != MOVE_FRONT || added) {
					eval_try(w, keep, &f2);
					double s2 = (double)(ex - w->excess) / (double)(f2 - f + 1);
					if (s2 > score[top])
						score[top] = s2, move[top] = (uint8_t)m;
				}
				for (int k = 0; k < nf && m == MOVE_FRONT; k++)
					keep[front[k]] = was[k];
			}
			keep[v] = SEL_KEEP;
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
		keep[v] = move_state[move[top]];
		for (int k = 0; k < nf && move[top] == MOVE_FRONT; k++)
			keep[front[k]] = SEL_KEEP;
		now++;
		peak = commit(w, keep, &f);
		ex = w->excess;
	}
	free(score);
	free(round);
	free(move);
	free(front);
	free(seen);
	free(was);
	return (Outcome){peak <= budget, peak, f};
}

/* what greedy_keep scores a move against: the choice's state */
typedef struct {
	const Cands *c;
	bool over;
	int64_t f, peak, ex, budget;
	double *score;
	uint8_t *to;
} KeepScores;

/* candidate i's score: the best of keeping it, computing it each time (over
 * the budget) and offloading it; keep[] as it was */
static void score_keep(Work *w, const KeepScores *k, uint8_t *keep, int i)
{
	const SelProblem *P = w->P;
	int v = k->c->c[i];
	uint8_t was = keep[v];
	k->score[i] = 0;
	/* over the budget, computing it each time is a move too; offloading it always */
	static const uint8_t to_try[3] = {SEL_KEEP, SEL_EACH, SEL_HOST};
	for (int j = 0; j < 3; j++) {
		uint8_t st = to_try[j];
		if ((st == SEL_EACH && !(k->over && was == SEL_ONCE)) || st == was || !may(P, v, st))
			continue;
		keep[v] = st;
		int64_t f2, p2 = eval_try(w, keep, &f2);
		double sc = k->over ? (double)(k->ex - w->excess)
		                    /* no gain, or over the budget: out until something else is kept */
		                    : p2 > k->budget || f2 >= k->f ? 0 : (double)(k->f - f2) / (double)((p2 > k->peak ? p2 - k->peak : 0) + 1);
		if (sc > k->score[i])
			k->score[i] = sc, k->to[i] = st;
	}
	keep[v] = was;
}

typedef struct {
	Work w;
	const KeepScores *k;
	uint8_t *keep;
	const int *todo;
	int n;
} Half;

static void *score_half(void *arg)
{
	Half *h = arg;
	int64_t f;
	commit(&h->w, h->keep, &f);
	for (int j = 1; j < h->n; j += 2)
		score_keep(&h->w, h->k, h->keep, h->todo[j]);
	return NULL;
}

/* every candidate not kept scored afresh, as the lazy loop would before
 * taking any move when every score is stale: with `pair`, every other one
 * on a second thread (its own Work and copy of the choice), so the scores
 * are the same */
static void score_all(Work *w, const KeepScores *k, uint8_t *keep, int *round, int now, bool pair)
{
	const SelProblem *P = w->P;
	int *todo = malloc(sizeof(int) * (size_t)(k->c->nc + 1)), n = 0;
	for (int i = 0; i < k->c->nc; i++)
		if (keep[k->c->c[i]] != SEL_KEEP)
			todo[n++] = i, round[i] = now;
	Half h = {.k = k, .todo = todo, .n = n};
	pthread_t side;
	bool apart = false;
	if (pair && n > 1) {
		work_init(&h.w, P);
		h.w.budget = w->budget;
		h.keep = malloc((size_t)P->n + 1);
		memcpy(h.keep, keep, (size_t)P->n);
		apart = pthread_create(&side, NULL, score_half, &h) == 0;
	}
	for (int j = 0; j < n; j += apart ? 2 : 1)
		score_keep(w, k, keep, todo[j]);
	if (apart)
		pthread_join(side, NULL);
	if (pair && n > 1) {
		w->evals += h.w.evals;
		work_free(&h.w);
		free(h.keep);
	}
	free(todo);
}

/* From every candidate computed again once: while the peak is over the
 * budget, keep (or compute each time) the value that removes the most
 * bytes-times-positions above it (a kept value ends the chains of
 * recomputation through it, each of which would otherwise be computed
 * again at once and held); then keep the value that saves the most FLOPs
 * per byte it adds to the peak, while the peak fits. Where every score is
 * stale, all are scored at once (score_all; with `pair`, on two threads). */
static Outcome greedy_keep(Work *w, const Cands *c, int64_t budget, bool pair, bool from_nothing, uint8_t *keep)
{
	for (int i = 0; i < c->nc && from_nothing; i++)
		keep[c->c[i]] = SEL_ONCE;
	w->budget = budget;
	KeepScores k = {c, false, 0, 0, 0, budget, malloc(sizeof(double) * (size_t)(c->nc + 1)), malloc((size_t)c->nc + 1)};
	k.peak = commit(w, keep, &k.f), k.ex = w->excess;
	double *score = k.score;
	int *round = malloc(sizeof(int) * (size_t)(c->nc + 1));
	for (int i = 0; i < c->nc; i++)
		score[i] = 1e300, round[i] = -1, k.to[i] = SEL_KEEP;
	int now = 0;
	bool refreshed = false;
	k.over = k.peak > budget;
	score_all(w, &k, keep, round, now, pair);
	for (;;) {
		int top = -1;
		for (int i = 0; i < c->nc; i++)
			if (keep[c->c[i]] != SEL_KEEP && score[i] > 0 && (top < 0 || score[i] > score[top]))
				top = i;
		if (top < 0 && k.over && !refreshed) {
			/* nothing lowers the excess by the stale scores: refresh them all once */
			refreshed = true;
			now++;
			score_all(w, &k, keep, round, now, pair);
			continue;
		}
		if (top < 0)
			break;
		if (round[top] != now) {
			score_keep(w, &k, keep, top);
			round[top] = now;
			continue;
		}
		keep[c->c[top]] = k.to[top];
		now++;
		refreshed = false;
		k.peak = commit(w, keep, &k.f);
		k.ex = w->excess;
		bool was = k.over;
		k.over = k.peak > budget;
		/* at the change of phase every score is stale; within one, a value out stays out (keeping more
		 * only raises the peak and leaves fewer values to compute again), or comes back at a refresh */
		if (was != k.over)
			score_all(w, &k, keep, round, now, pair);
	}
	free(score);
	free(round);
	free(k.to);
	return (Outcome){k.peak <= budget, k.peak, k.f};
}

/* keep again each value whose keeping saves FLOPs and still fits, the
 * costliest first; then compute once each value computed each time where
 * that saves FLOPs and still fits; then offload each value computed again
 * where that costs less and still fits */
static Outcome polish(Work *w, const Cands *c, int64_t budget, uint8_t *keep)
{
	int64_t f, peak = commit(w, keep, &f);
	/* first every value not kept tried kept, then every value made each time tried made once, then every
	 * value made again tried offloaded */
	static const uint8_t pass_to[3] = {SEL_KEEP, SEL_ONCE, SEL_HOST};
	for (int pass = 0; pass < 3; pass++)
		for (int i = 0; i < c->nc; i++) {
			int v = c->c[i];
			uint8_t was = keep[v];
			if (was == SEL_KEEP || (pass == 1 && was != SEL_EACH) || (pass == 2 && (was == SEL_HOST || !may(w->P, v, SEL_HOST))))
				continue;
			keep[v] = pass_to[pass];
			int64_t f2, p2 = eval_try(w, keep, &f2);
			if (p2 <= budget && f2 < f)
				f = f2, peak = p2, commit(w, keep, &f2);
			else
				keep[v] = was;
		}
	return (Outcome){peak <= budget, peak, f};
}

/* Swaps within a fit: a value not kept is kept (or computed once instead
 * of each time) while another changes state so that the peak still fits,
 * where that saves FLOPs; passes while one helps, within `work` values and
 * positions visited. */
static Outcome swaps(Work *w, const Cands *c, int64_t budget, uint8_t *keep, int64_t work)
{
	const SelProblem *P = w->P;
	int64_t f, peak = commit(w, keep, &f), per = P->n + P->npos;
	bool moved = true, spent = false;
	while (moved && !spent && peak <= budget) {
		moved = false;
		for (int i = 0; i < c->nc && !moved && !spent; i++) {
			int u = c->c[i];
			uint8_t was_u = keep[u];
			if (was_u == SEL_KEEP || !P->flops[u])
				continue;
			keep[u] = was_u == SEL_EACH ? SEL_ONCE : SEL_KEEP;
			int64_t fu;
			eval_try(w, keep, &fu);
			if (fu >= f) {
				keep[u] = was_u;
				continue;
			}
			for (int j = 0; j < c->nc && !moved && !spent; j++) {
				int v = c->c[j];
				if (v == u)
					continue;
				uint8_t was_v = keep[v];
				/* a kept value made again (once or each time) or offloaded, or one not kept made so
				 * another way */
				for (uint8_t st = SEL_ONCE; st <= SEL_HOST && !moved; st++) {
					if (st == was_v || st == SEL_KEEP || !may(P, v, st))
						continue;
					if ((spent = w->evals * per > work))
						break;
					keep[v] = st;
					int64_t f2, p2 = eval_try(w, keep, &f2);
					if (p2 <= budget && f2 < f)
						f = f2, peak = p2, moved = true, commit(w, keep, &f2);
					else
						keep[v] = was_v;
				}
			}
			if (!moved)
				keep[u] = was_u;
		}
	}
	peak = eval(w, keep, &f);
	return (Outcome){peak <= budget, peak, f};
}

/* the greedy search that drops from store-everything, polished, on a Work
 * of its own: sel_fit runs it on a thread beside the one that keeps from
 * nothing, as the two share only the problem, which neither writes */
typedef struct {
	const SelProblem *P;
	const Cands *c;
	int64_t budget;
	uint8_t *keep;
	Outcome out;
} Drop;

static void *drop_side(void *arg)
{
	Drop *d = arg;
	Work w;
	work_init(&w, d->P);
	d->out = greedy_drop(&w, d->c, d->budget, d->keep);
	if (d->out.fits)
		d->out = polish(&w, d->c, d->budget, d->keep);
	work_free(&w);
	return NULL;
}

static bool better(Outcome a, Outcome b)
{
	if (a.fits != b.fits)
		return a.fits;
	return a.fits ? a.flops < b.flops || (a.flops == b.flops && a.peak < b.peak) : a.peak < b.peak;
}

SelResult sel_fit(const SelProblem *P, int64_t budget, int64_t work, bool for_least, uint8_t *keep)
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
	/* three or four states a decision: past SEL_EXACT_MOST of them the exact search would only spend its limit */
	bool over = work <= 0 || c.nc > SEL_EXACT_MOST;
	if (!over && res.bound < INT64_MAX) {
		Exact e = {0};
		e.w = &w;
		e.c = c;
		e.budget = budget;
		e.limit = work;
		e.keep = malloc((size_t)P->n + 1);
		e.best = malloc((size_t)P->n + 1);
		memcpy(e.keep, keep, (size_t)P->n);
		for (int i = 0; i < c.nc; i++)
			e.keep[c.c[i]] = P->kind[c.c[i]] == SEL_CAND ? SEL_KEEP : SEL_ONCE;
		e.need = need;
		e.avail = calloc((size_t)P->npos + 1, sizeof(int64_t));
		gaps(P, &c, e.avail, 1);
		dfs(&e, 0, 0);
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
		/* the greedy searches, each polished: dropping from store-everything (on a thread, where one
		 * starts), and keeping from nothing kept */
		uint8_t *other = malloc((size_t)P->n + 1);
		store_everything(P, keep);
		memcpy(other, keep, (size_t)P->n);
		Drop d = {P, &c, budget, keep, {false, INT64_MAX, INT64_MAX}};
		pthread_t side;
		bool apart = !for_least && P->threads > 1 && pthread_create(&side, NULL, drop_side, &d) == 0;
		Outcome b = greedy_keep(&w, &c, budget, for_least && P->threads > 1, true, other);
		if (b.fits)
			b = polish(&w, &c, budget, other);
		if (apart)
			pthread_join(side, NULL);
		else if (!for_least)
			drop_side(&d);
		Outcome a = d.out;
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
	uint8_t *keep = malloc((size_t)P->n + 1);
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

SelResult sel_least(const SelProblem *P, int64_t work, uint8_t *keep, int64_t *floor)
{
	Work w;
	work_init(&w, P);
	Cands c = candidates(P, keep);
	int64_t f, hi = eval(&w, keep, &f);
	/* nothing kept, computed once or each time */
	for (uint8_t st = SEL_ONCE; st != SEL_KEEP; st = st == SEL_ONCE ? SEL_EACH : SEL_KEEP) {
		for (int i = 0; i < c.nc; i++)
			keep[c.c[i]] = st;
		int64_t all = eval(&w, keep, &f);
		hi = all < hi ? all : hi;
	}
	free(c.c);
	work_free(&w);
	int64_t lo = *floor = sel_floor(P);
	/* the least budget the search fits, by bisection between the floor and the best of keeping and
	 * dropping all; once the exact search runs out of work, the rest is greedy */
	uint8_t *try = malloc((size_t)P->n + 1);
	SelResult best = sel_fit(P, hi, work, true, keep);
	if (best.method == SEL_GREEDY)
		work = 0;
	while (lo < hi && hi - lo > hi / 4096) {
		int64_t mid = lo + (hi - lo) / 2;
		SelResult r = sel_fit(P, mid, work, true, try);
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

/* the candidates alone: candidates() without a choice to start */
static Cands candidates_of(const SelProblem *P)
{
	uint8_t *all = malloc((size_t)P->n + 1);
	Cands c = candidates(P, all);
	free(all);
	return c;
}

static SelResult greedy_result(Outcome o) { return (SelResult){o.fits, o.peak, o.flops, INT64_MAX, SEL_GREEDY}; }

/* First-improvement descent from keep[]: one value's state changed (kept,
 * computed once, computed each time) where that lowers the peak, or keeps
 * it and saves FLOPs; passes until none helps or `passes` ran out. */
SelResult sel_lower(const SelProblem *P, int passes, uint8_t *keep)
{
	Work w;
	work_init(&w, P);
	Cands c = candidates_of(P);
	int64_t f, peak = commit(&w, keep, &f);
	for (int pass = 0; pass < passes; pass++) {
		bool moved = false;
		for (int i = 0; i < c.nc; i++) {
			int v = c.c[i];
			uint8_t was = keep[v], best = was;
			for (uint8_t st = SEL_ONCE; st <= SEL_HOST; st++) {
				if (st == was || !may(P, v, st))
					continue;
				keep[v] = st;
				int64_t f2, p2 = eval_try(&w, keep, &f2);
				if (p2 < peak || (p2 == peak && f2 < f))
					peak = p2, f = f2, best = st;
			}
			keep[v] = best;
			if (best != was)
				commit(&w, keep, &f);
			moved |= best != was;
		}
		if (!moved)
			break;
	}
	free(c.c);
	work_free(&w);
	return greedy_result((Outcome){true, peak, f});
}

/* Threshold accepting (Dueck and Scheuer, 1990) on the model's peak: a
 * value at random changes state, taken where the peak rises less than a
 * threshold that falls from `start` bytes to nothing over `moves` moves
 * (integers and a fixed seed: the same choice on every machine). The least
 * peak seen, at its fewest FLOPs, ends in keep[]. */
SelResult sel_anneal(const SelProblem *P, int64_t moves, int64_t start, uint8_t *keep)
{
	Work w;
	work_init(&w, P);
	Cands c = candidates_of(P);
	uint8_t *best = malloc((size_t)P->n + 1);
	memcpy(best, keep, (size_t)P->n);
	int64_t f, peak = commit(&w, keep, &f), best_peak = peak, best_f = f;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int64_t k = 0; k < moves && c.nc; k++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		int v = c.c[seed % (uint64_t)c.nc];
		uint8_t was = keep[v], st = (uint8_t)((was + 1 + (seed >> 40) % 3) % 4);
		if (!may(P, v, st))
			continue;
		int64_t th = start - (int64_t)((double)start * (double)k / (double)moves);
		keep[v] = st;
		int64_t f2, p2 = eval_try(&w, keep, &f2);
		if (p2 - peak > th || (p2 == peak && th == 0 && f2 > f)) {
			keep[v] = was;
			continue;
		}
		peak = commit(&w, keep, &f);
		if (peak < best_peak || (peak == best_peak && f < best_f)) {
			best_peak = peak, best_f = f;
			memcpy(best, keep, (size_t)P->n);
		}
	}
	memcpy(keep, best, (size_t)P->n);
	free(best);
	free(c.c);
	work_free(&w);
	return greedy_result((Outcome){true, best_peak, best_f});
}

SelResult sel_improve(const SelProblem *P, int64_t budget, uint8_t *keep)
{
	Work w;
	work_init(&w, P);
	Cands c = candidates_of(P);
	Outcome o = greedy_keep(&w, &c, budget, P->threads > 1, false, keep);
	if (o.fits)
		o = polish(&w, &c, budget, keep);
	free(c.c);
	work_free(&w);
	return greedy_result(o);
}

SelResult sel_swaps(const SelProblem *P, int64_t budget, int64_t work, uint8_t *keep)
{
	Work w;
	work_init(&w, P);
	Cands c = candidates_of(P);
	Outcome o = swaps(&w, &c, budget, keep, work);
	free(c.c);
	work_free(&w);
	return greedy_result(o);
}
