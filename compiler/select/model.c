/* sel's cost model (select.h describes it), evaluated: a choice whole
 * (sel_evaluate), and a choice that differs from a committed one in a few
 * values (sel_eval_try), which the searches score their moves with. */
#include "model.h"
#include "../util/sort.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

/* sel_check_tries: each try checked against sel_evaluate() */
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

/* sel_eval_try's committed choice (the section "evaluations of a few changes" below) */
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
	bool dirty;                       /* an sel_evaluate() since the commit: w's r, last and at are not its */
	/* a try's scratch */
	int *stamp, *queued, gen;         /* values changed in this try; values queued in it */
	int *heap, *seed, nseed, *changed, nchanged;
	/* sel_keep_try's own queue marks, changed values and span events (the try last measured stays kept for
	 * a commit, which takes its events), and what a position may hold more than its spans say */
	int *fqueued, *fchanged, fgen;
	Event *fev, *pen;
	int cap_fev, cap_pen, npen;
	Event *ev;                        /* the changed spans' ends */
	int cap_ev, nev;
	int *pts, npts, cap_pts;          /* positions where copies are made, before or after, each once */
	int *pt_gen;                      /* per position: the try that put it in pts */
	int64_t *again;                   /* what the copies made at each of pts hold */
	int *head, *tail, *head_gen;      /* per position: the changed values' copies there, a list in value order */
	struct { int v, next; } *node;    /* the lists' entries */
	int cap_node;
	int *scratch, cap_scratch;
	int *merged, cap_merged;          /* most_at's copies at a position, in value order */
	int nnode;                        /* the lists' entries in this try */
	int *at2, cap_at2, *cp2, cap_cp2; /* take_try's new at and cp, swapped in */
	/* the last try sel_eval_try measured, kept until the next (last_gen: its gen, 0 where none is kept),
	 * for a commit of the same choice: its changes, its results, and its changed values' r, last and at */
	int last_gen, nlast, *last_seed;
	uint8_t *last_state;
	int64_t last_peak, last_flops, last_excess;
	int *last_r, *last_last, *last_from, *last_at, cap_last_at;
} Base;


void sel_work_init(Work *w, const SelProblem *P)
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
	w->lastread = calloc((size_t)P->n + 1, sizeof(int)), w->lastread_gen = calloc((size_t)P->n + 1, sizeof(int));
	w->cp = w->cp_t = NULL, w->ncp = w->cap_cp = 0;
	w->sorted = NULL, w->cap_sorted = 0;
	w->count = malloc(sizeof(int) * (size_t)(P->npos + 2));
	w->pos_seen = calloc((size_t)P->npos + 1, sizeof(unsigned)), w->pos_gen = 0;
	w->merged = NULL, w->cap_merged = 0;
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
	w->stop = NULL;
	/* made_here's operand lists: per value, its operands that are not fixed, each once (where one is read twice,
	 * the first), in order; and of them, those that may give it their storage (an elementwise share of k < 32,
	 * read once) */
	int ops = 0;
	for (int v = 0; v < P->n; v++)
		ops += P->nin[v];
	w->op_from = malloc(sizeof(int) * (size_t)(P->n + 1)), w->op = malloc(sizeof(int) * (size_t)(ops + 1));
	w->take_from = malloc(sizeof(int) * (size_t)(P->n + 1)), w->take = malloc(sizeof(int) * (size_t)(ops + 1));
	/* per operand: how many times v reads it, and whether it was read before (stamped by v) */
	int *count = calloc((size_t)P->n + 1, sizeof(int)), *stamp = malloc(sizeof(int) * (size_t)(P->n + 1));
	for (int v = 0; v < P->n; v++)
		stamp[v] = -1;
	for (int v = 0, nop = 0, ntake = 0; v < P->n; v++) {
		w->op_from[v] = nop, w->take_from[v] = ntake;
		for (int k = 0; k < P->nin[v]; k++)
			count[P->in[v][k]] = 0;
		for (int k = 0; k < P->nin[v]; k++)
			count[P->in[v][k]]++;
		for (int k = 0; k < P->nin[v]; k++) {
			int u = P->in[v][k];
			bool earlier = stamp[u] == v;
			stamp[u] = v;
			if (P->kind[u] == SEL_FIXED || earlier)
				continue;
			if (k < 32 && (P->share[v] >> k & 1) && count[u] == 1)
				w->take[ntake++] = nop;
			w->op[nop++] = u;
		}
		w->op_from[v + 1] = nop, w->take_from[v + 1] = ntake;
	}
	free(count), free(stamp);
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

void sel_work_free(Work *w)
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
	free(w->lastread);
	free(w->lastread_gen);
	free(w->cp);
	free(w->cp_t);
	free(w->sorted);
	free(w->count);
	free(w->pos_seen);
	free(w->merged);
	free(w->prof);
	free(w->lend_from);
	free(w->op_from), free(w->op), free(w->take_from), free(w->take);
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
int sel_gap_from(const SelProblem *P, int v) { return P->fwd_last[v] + 1; }
int sel_gap_to(const SelProblem *P, int v) { return P->kind[v] == SEL_CAND ? P->adj_last[v] : -1; }
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
	/* outside its first and last, at once (made_here asks of every copy) */
	if (t < P->adj_first[v] || t > P->adj_last[v])
		return false;
	int two[2], n;
	const int *u = adj_uses(P, v, two, &n);
	return find(u, n, t) >= 0;
}
/* (a value that may take an operand's storage may be made there for nothing: at its adjoint uses too) */
bool sel_frees(const SelProblem *P, int v, int t)
{
	return t >= sel_gap_from(P, v) && t <= sel_gap_to(P, v) && (P->share[v] || !adj_use(P, v, t));
}

/* room for n positions of u */
static void at_room(Work *w, int u, int n)
{
	if (n <= w->cap[u])
		return;
	while (w->cap[u] < n)
		w->cap[u] = w->cap[u] ? 2 * w->cap[u] : 8;
	w->at[u] = realloc(w->at[u], sizeof(int) * (size_t)w->cap[u]);
}

static void at_push(Work *w, int u, int t)
{
	at_room(w, u, w->nat[u] + 1);
	w->at[u][w->nat[u]++] = t;
}

/* list[0..n) added to u's positions at once */
static void at_append(Work *w, int u, const int *list, int n)
{
	at_room(w, u, w->nat[u] + n);
	memcpy(w->at[u] + w->nat[u], list, sizeof(int) * (size_t)n);
	w->nat[u] += n;
}

/* u's positions set to list[0..n) at once */
static void at_set(Work *w, int u, const int *list, int n)
{
	at_room(w, u, n);
	if (n)
		memcpy(w->at[u], list, sizeof(int) * (size_t)n);
	w->nat[u] = n;
}

static int by_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }
static int by_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}
static int by_event(const void *a, const void *b) { return by_int(&((const Event *)a)->pos, &((const Event *)b)->pos); }
#define SELF(v) (v)
#define POS(e) ((e).pos)
DEFINE_SORT(sort_ints, int, SELF, by_int)
DEFINE_SORT(sort_int64s, int64_t, SELF, by_int64)
DEFINE_SORT(sort_events, Event, POS, by_event)

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
static inline bool transient(const Work *w, const uint8_t *keep, int v, int t)
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


/* The copies made at t, list[0..n) in value order (operands first, as the
 * rewrite makes them): each held with what the copies made before it there
 * hold, the lasting ones and the transient ones a later copy there still
 * reads (a transient copy is freed after its last reader there; a chain
 * holds one link and its operands at a time). An operand of its type that
 * dies at a copy gives it its storage. The most they hold at once in
 * w->most[t], the lasting ones' bytes in w->made[t]. Each copy's operands
 * are visited through w->op: a fixed one is neither made nor freed here,
 * and a repeated one counts once. */
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
	const int *op_from = w->op_from, *op = w->op, *take_from = w->take_from, *takes = w->take;
	const int64_t *bytes = P->bytes;
	int ops = 0;
	for (int i = 0; i < n; i++)
		ops += op_from[list[i] + 1] - op_from[list[i]];
	if (2 * n + ops > w->cap_here) {
		w->cap_here = 2 * (2 * n + ops);
		w->here = realloc(w->here, sizeof(int) * (size_t)w->cap_here);
	}
	/* js: each operand's index among the copies made here before its reader, or -1, found once */
	int *readers = w->here, *tr = w->here + n, *js = w->here + 2 * n;
	int gen = ++w->seen_gen, *index = w->index, *index_gen = w->index_gen, *seen = w->seen;
	int *lastread = w->lastread, *lastread_gen = w->lastread_gen;
	for (int i = 0; i < n; i++)
		index[list[i]] = i, index_gen[list[i]] = gen;
	/* an operand made here is transient or lasting; one not made here is neither (select.h) */
	for (int i = 0; i < n; i++)
		readers[i] = 0, tr[i] = keep[list[i]] != SEL_KEEP && transient(w, keep, list[i], t);
	/* how many copies here read each transient one; and the last copy here reading each value not made here:
	 * one held to here that dies here is freed after it */
	for (int i = 0, o = 0; i < n; i++) {
		int v = list[i];
		for (int q = op_from[v]; q < op_from[v + 1]; q++, o++) {
			int u = op[q], j = js[o] = index_gen[u] == gen && index[u] < i ? index[u] : -1;
			if (j >= 0)
				readers[j] += tr[j];
			else
				lastread[u] = i, lastread_gen[u] = gen;
		}
	}
	/* made: the lasting copies while the others are made (an operand whose storage one took still counted by
	 * its span); at_op: the lasting copies while the op runs, less the values held to here that only copies
	 * here read (their spans end here, but they are freed before the op) */
	int64_t made = 0, at_op = 0, gone = 0, waiting = 0, most = 0, freed = 0;
	for (int i = 0, o = 0; i < n; i++) {
		int v = list[i], from = op_from[v], to = op_from[v + 1];
		/* jv[q - from]: operand q's index here */
		const int *jv = js + o;
		o += to - from;
		/* the storage it takes from an operand that dies at it: a transient one (its bytes leave the
		 * waiting ones), or one a span holds to here */
		int64_t take = 0;
		bool from_copy = false;
		int took = -1;
		for (int x = take_from[v]; x < take_from[v + 1] && !take; x++) {
			int q = takes[x], u = op[q], j = jv[q - from];
			int64_t same = bytes[u] < bytes[v] ? bytes[u] : bytes[v];
			if (j >= 0 && tr[j]) {
				if (readers[j] == 1)
					take = same, from_copy = true;
			} else if (dies(w, keep, u, t) && !(P->kind[u] == SEL_CAND && adj_use(P, u, t))) {
				take = same, took = u;
			}
		}
		int64_t b = made + waiting + bytes[v] - take - freed;
		most = b > most ? b : most;
		for (int q = from; q < to; q++) {
			int u = op[q], j = jv[q - from];
			/* its transient operands read for the last time here are freed */
			if (j >= 0 && tr[j]) {
				if (--readers[j] == 0)
					waiting -= bytes[u];
			} else if (dies(w, keep, u, t) && !(P->kind[u] == SEL_CAND && adj_use(P, u, t))) {
				if (seen[u] != gen)
					seen[u] = gen, gone += bytes[u];
				/* held to here by its span, it is freed after its last reader here (a copy that took its
				 * storage keeps it) */
				if (u != took && lastread_gen[u] == gen && lastread[u] == i)
					freed += bytes[u];
			}
		}
		int64_t held = bytes[v] - (from_copy ? 0 : take);
		if (lasting(w, keep, v, t))
			made += held, at_op += bytes[v];
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
			at_append(w, u, at, m);
		} else {
			need(w, keep, u, at[0]);
			need(w, keep, u, at[m - 1]);
		}
	}
}

/* RUNS_MOST: past that many ascending runs, a list is sorted whole */
enum { RUNS_MOST = 16 };

/* a[0..n) in order and each position once, where it is made of RUNS_MOST or fewer ascending runs (each reader's
 * positions come in order, each once): the runs merged pairwise, a position in both taken once, until one is
 * left; its length. -1 (a[] as it was) where there are more */
static int merge_runs(Work *w, int *a, int n)
{
	int runs = 1;
	for (int k = 1; k < n && runs <= RUNS_MOST; k++)
		runs += a[k] <= a[k - 1];
	if (runs > RUNS_MOST)
		return -1;
	if (n > w->cap_merged) {
		w->cap_merged = 2 * n;
		w->merged = realloc(w->merged, sizeof(int) * (size_t)w->cap_merged);
	}
	int *from = a, *to = w->merged;
	while (runs > 1) {
		int o = 0;
		runs = 0;
		for (int i = 0; i < n;) {
			int j = i + 1, k;
			while (j < n && from[j] > from[j - 1])
				j++;
			k = j < n ? j + 1 : j;
			while (k < n && from[k] > from[k - 1])
				k++;
			/* [i, j) and [j, k) into to[o..) */
			int x = i, y = j;
			while (x < j && y < k) {
				int vx = from[x], vy = from[y];
				to[o++] = vx < vy ? vx : vy;
				x += vx <= vy, y += vy <= vx;
			}
			while (x < j)
				to[o++] = from[x++];
			while (y < k)
				to[o++] = from[y++];
			runs++;
			i = k;
		}
		int *t = from;
		from = to, to = t, n = o;
	}
	if (from != a)
		memcpy(a, from, sizeof(int) * (size_t)n);
	return n;
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
	/* a value read by many copies made each time gets all their positions (a DenseNet's concatenations: a sort
	 * of every one was a sixth of an evaluation): merged as the runs they come in, or each position once and
	 * then sorted */
	if ((m = merge_runs(w, at, n)) >= 0) {
		w->nat[v] = m;
		return;
	}
	if (++w->pos_gen == 0) {
		memset(w->pos_seen, 0, sizeof(unsigned) * (size_t)(w->P->npos + 1));
		w->pos_gen = 1;
	}
	m = 0;
	for (int k = 0; k < n; k++)
		if (w->pos_seen[at[k]] != w->pos_gen)
			w->pos_seen[at[k]] = w->pos_gen, at[m++] = at[k];
	sort_ints(at, m, 64);
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

/* eval's copies (w->cp, in value order) grouped by position, each group in
 * value order (a stable counting sort): position t's in w->sorted from
 * w->count[t - 1] (0 at t = 0) to w->count[t] */
static void copies_by_position(Work *w)
{
	int n = w->ncp, npos = w->P->npos;
	if (!n) {
		memset(w->count, 0, sizeof(int) * (size_t)(npos + 2));
		return;
	}
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
}

/* sel_evaluate, or where `limit` < INT64_MAX, until a position holds more:
 * then that position's bytes, the FLOPs exact, w->prof and w->excess not
 * made (the copies at each position are laid out as the walk reaches it) */
static int64_t evaluate(Work *w, const uint8_t *keep, int64_t limit, int64_t *flops)
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
	copies_by_position(w);
	*flops = f;
	int64_t run = 0, peak = 0, ex = 0, budget = w->budget;
	for (int t = 0, from = 0; t < P->npos; from = w->count[t++]) {
		if (w->count[t] > from)
			made_here(w, keep, t, w->sorted + from, w->count[t] - from);
		run += w->diff[t];
		int64_t m = w->prof[t] = P->base[t] + run + extra(w, keep, t);
		peak = m > peak ? m : peak;
		ex += m > budget ? m - budget : 0;
		if (m > limit)
			break;
	}
	/* only the positions where copies were made hold anything in made and most */
	for (int k = 0; k < w->ntouched; k++)
		w->made[w->touched[k]] = w->most[w->touched[k]] = 0;
	w->ntouched = 0;
	w->excess = ex;
	return peak;
}

/* the peak of keep[]; its FLOPs in *flops; the memory per position in
 * w->prof, and its excess over w->budget in w->excess */
int64_t sel_evaluate(Work *w, const uint8_t *keep, int64_t *flops)
{
	return evaluate(w, keep, INT64_MAX, flops);
}

/* ---- evaluations of a few changes from a committed choice ----
 *
 * A greedy search scores many moves from one choice, each a value or a few
 * changing state. sel_commit() evaluates the choice and keeps what eval found;
 * sel_eval_try() then evaluates a choice that differs from it in a few values
 * exactly as sel_evaluate() would, visiting only what the changes reach: the
 * changed values and, operands after users, each operand whose needs
 * change with them; the ranges their spans cover, as shifts of the
 * committed profile; and the positions where their copies are made, where
 * the copies there are laid out again. The committed profile is held in
 * blocks of positions, each sorted with its sums, and a shift per block,
 * so a range's most and its bytes above a budget take a search per block. */

enum {
	BLOCK = 128,    /* positions per block of the committed profile */
	TRY_MOST = 64,  /* changes beyond which sel_eval_try evaluates the whole choice */
};


static void base_free(Base *b)
{
	if (!b)
		return;
	free(b->cur), free(b->r), free(b->last), free(b->at_from), free(b->at), free(b->cp_from), free(b->cp);
	free(b->at2), free(b->cp2);
	free(b->prof), free(b->most), free(b->sorted), free(b->sum), free(b->shift), free(b->users_from), free(b->users);
	free(b->stamp), free(b->queued), free(b->heap), free(b->seed), free(b->changed), free(b->ev);
	free(b->fqueued), free(b->fchanged), free(b->fev), free(b->pen);
	free(b->pts), free(b->again), free(b->pt_gen), free(b->head), free(b->tail), free(b->head_gen),
	    free(b->node), free(b->scratch), free(b->merged);
	free(b->last_seed), free(b->last_state), free(b->last_r), free(b->last_last), free(b->last_from), free(b->last_at);
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
	sort_int64s(b->sorted + from, to - from, 64);
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
	b->pt_gen = calloc((size_t)npos + 1, sizeof(int));
	b->head = malloc(sizeof(int) * (size_t)(npos + 1));
	b->tail = malloc(sizeof(int) * (size_t)(npos + 1));
	b->head_gen = calloc((size_t)npos + 1, sizeof(int));
	b->stamp = calloc((size_t)n + 1, sizeof(int));
	b->queued = calloc((size_t)n + 1, sizeof(int));
	b->fqueued = calloc((size_t)n + 1, sizeof(int));
	b->fchanged = malloc(sizeof(int) * (size_t)(n + 1));
	b->heap = malloc(sizeof(int) * (size_t)(n + 1));
	b->seed = malloc(sizeof(int) * (size_t)(TRY_MOST + 1));
	b->changed = malloc(sizeof(int) * (size_t)(n + 1));
	b->last_seed = malloc(sizeof(int) * (size_t)(TRY_MOST + 1));
	b->last_state = malloc((size_t)TRY_MOST + 1);
	b->last_r = malloc(sizeof(int) * (size_t)(n + 1));
	b->last_last = malloc(sizeof(int) * (size_t)(n + 1));
	b->last_from = malloc(sizeof(int) * (size_t)(n + 2));
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

/* w's r, last and at of list[0..n) (of values 0..n-1 where list is NULL)
 * into r[i], last[i] and at, the i-th's positions from from[i] */
static void save_needs(const Work *w, const int *list, int n, int *r, int *last, int *from, int **at, int *cap)
{
	int total = 0;
	for (int i = 0; i < n; i++) {
		int v = list ? list[i] : i;
		total += w->P->kind[v] != SEL_FIXED ? w->nat[v] : 0;
	}
	*at = grow(*at, cap, total + 1, sizeof(int));
	from[0] = 0;
	for (int i = 0, k = 0; i < n; i++) {
		int v = list ? list[i] : i;
		r[i] = w->r[v], last[i] = w->last[v];
		if (w->P->kind[v] != SEL_FIXED && w->nat[v])
			memcpy(*at + k, w->at[v], sizeof(int) * (size_t)w->nat[v]), k += w->nat[v];
		from[i + 1] = k;
	}
}

/* keep[] evaluated and made the choice sel_eval_try measures from */
static int64_t commit_whole(Work *w, const uint8_t *keep, int64_t *flops)
{
	const SelProblem *P = w->P;
	int64_t peak = sel_evaluate(w, keep, flops);
	if (!w->base)
		w->base = base_new(P);
	Base *b = w->base;
	int npos = P->npos, nblocks = (npos + BLOCK - 1) / BLOCK;
	b->peak = peak, b->flops = *flops, b->excess = w->excess, b->budget = w->budget;
	memcpy(b->cur, keep, (size_t)P->n);
	save_needs(w, NULL, P->n, b->r, b->last, b->at_from, &b->at, &b->cap_at);
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
			/* part of a block: each position, d added to its largest once (and taken from the limit) */
			int stop = end < to ? end : to;
			int64_t hi = b->prof[t];
			if (over == INT64_MAX) {
				for (; t <= stop; t++)
					hi = b->prof[t] > hi ? b->prof[t] : hi;
			} else {
				for (int64_t lim = over - d; t <= stop; t++) {
					int64_t x = b->prof[t];
					hi = x > hi ? x : hi;
					sum += x > lim ? x - lim : 0;
				}
			}
			most = hi + d > most ? hi + d : most;
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

/* position t in pts, once a try */
static void point(Base *b, int t)
{
	if (b->pt_gen[t] != b->gen)
		b->pt_gen[t] = b->gen, b->pts[b->npts++] = t;
}

/* v's spans under keep[], each added with sign as events */
static void span_events(Work *w, const uint8_t *keep, int v, int sign)
{
	Base *b = w->base;
	int span[2][2];
	for (int k = spans(w, keep, v, span) - 1; k >= 0; k--)
		if (span[k][0] <= span[k][1] && w->P->bytes[v]) {
			b->ev = grow(b->ev, &b->cap_ev, b->nev + 2, sizeof(Event));
			b->ev[b->nev++] = (Event){span[k][0], sign * w->P->bytes[v]};
			b->ev[b->nev++] = (Event){span[k][1] + 1, -sign * w->P->bytes[v]};
		}
}

/* v's spans under keep[], each added with sign, and its copies' positions noted */
static void spans_of(Work *w, const uint8_t *keep, int v, int sign)
{
	Base *b = w->base;
	int span[2][2], one, n;
	span_events(w, keep, v, sign);
	const int *at = copies(w, keep, v, &one, &n);
	int nl = w->lend_from[v + 1] - w->lend_from[v];
	/* its copies, the ends of its (at most two) spans, its lending positions */
	b->pts = grow(b->pts, &b->cap_pts, b->npts + n + 2 + nl, sizeof(int));
	for (int k = 0; k < n; k++)
		point(b, at[k]);
	/* a value gives a copy its storage where a span of it ends */
	for (int k = spans(w, keep, v, span) - 1; k >= 0; k--)
		if (span[k][1] >= 0 && span[k][1] < w->P->npos)
			point(b, span[k][1]);
	/* where an op may take its storage, what it saves there depends on its state */
	for (int k = 0; k < nl; k++)
		point(b, w->lend_at[w->lend_from[v] + k]);
}

/* v's r, last and at as committed */
static void restore(Work *w, int v)
{
	Base *b = w->base;
	w->r[v] = b->r[v], w->last[v] = b->last[v];
	at_set(w, v, b->at + b->at_from[v], b->at_from[v + 1] - b->at_from[v]);
}

/* the changed values' copies under keep[], listed per position in value
 * order (b->head, from b->changed sorted) */
static void changed_copies(Work *w, const uint8_t *keep)
{
	Base *b = w->base;
	if (b->nchanged)
		sort_ints(b->changed, b->nchanged, 64);
	int n = 0;
	for (int i = 0; i < b->nchanged; i++) {
		int v = b->changed[i], one, m;
		const int *at = copies(w, keep, v, &one, &m);
		b->node = grow(b->node, &b->cap_node, n + m, sizeof *b->node);
		for (int k = 0, t; k < m; k++, n++) {
			b->node[n].v = v, b->node[n].next = -1;
			if (b->head_gen[t = at[k]] != b->gen)
				b->head_gen[t] = b->gen, b->head[t] = n;
			else
				b->node[b->tail[t]].next = n;
			b->tail[t] = n;
		}
	}
	b->nnode = n;
}

/* the copies made at t under keep[], in value order, from out[0] on: the
 * committed ones there that did not change, merged with the changed
 * values' own (changed_copies); their count */
static int merge_at(Base *b, int t, int **out, int *cap, int from)
{
	int m = from, j = b->head_gen[t] == b->gen ? b->head[t] : -1, end = b->cp_from[t + 1], gen = b->gen, c = *cap;
	const int *cp = b->cp, *stamp = b->stamp;
	int *o = *out;
	for (int k = b->cp_from[t]; k < end || j >= 0;) {
		int v;
		if (k < end && (j < 0 || cp[k] < b->node[j].v)) {
			if (stamp[v = cp[k++]] == gen)
				continue;
		} else {
			v = b->node[j].v, j = b->node[j].next;
		}
		if (m >= c)
			o = grow(o, &c, m + 1, sizeof(int));
		o[m++] = v;
	}
	*out = o, *cap = c;
	return m - from;
}

/* what the copies made at t hold at once under keep[]: eval's made_here over
 * the copies there (merge_at) */
static int64_t most_at(Work *w, const uint8_t *keep, int t)
{
	Base *b = w->base;
	int m = merge_at(b, t, &b->merged, &b->cap_merged, 0);
	made_here(w, keep, t, b->merged, m);
	int64_t most = extra(w, keep, t);
	w->made[t] = w->most[t] = 0;
	w->ntouched = 0;
	return most;
}

/* position t may hold `bytes` more than its spans say (sel_keep_try's bound); t < 0: none */
static void penalty(Base *b, int t, int64_t bytes)
{
	if (t < 0 || !bytes)
		return;
	b->pen = grow(b->pen, &b->cap_pen, b->npen + 1, sizeof(Event));
	b->pen[b->npen++] = (Event){t, bytes};
}

/* where a span of v ends under keep[]: a copy there may take its storage */
static void end_penalties(Work *w, const uint8_t *keep, int v)
{
	int span[2][2];
	for (int k = spans(w, keep, v, span) - 1; k >= 0; k--)
		penalty(w->base, span[k][1] < w->P->npos ? span[k][1] : -1, w->P->bytes[v]);
}

/* What changed value v may add to the positions where its copies are made
 * or its storage may be taken, beyond its spans' change (sel_keep_try's
 * bound): where a copy of it is made that was not (or made once, now held
 * longer or shorter), its bytes and its operands'; where a span of it
 * ends, before or after, or an op may take its storage, its bytes. w holds
 * its needs under keep[] (`at`, `nat` of them), b the committed ones. */
static void penalties(Work *w, const uint8_t *keep, int v, const int *at, int nat)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	int64_t with = P->bytes[v];
	for (int k = 0; k < P->nin[v]; k++)
		with += P->kind[P->in[v][k]] != SEL_FIXED ? P->bytes[P->in[v][k]] : 0;
	int from = b->at_from[v], n = b->at_from[v + 1] - from;
	if (keep[v] == SEL_EACH) {
		/* its copies, sorted, against those committed */
		const int *old = b->cur[v] == SEL_EACH ? b->at + from : NULL;
		int m = old ? n : 0;
		for (int k = 0, j = 0; k < nat; k++) {
			while (j < m && old[j] < at[k])
				j++;
			if (j == m || old[j] != at[k])
				penalty(b, at[k], with);
		}
	} else if ((keep[v] == SEL_ONCE || keep[v] == SEL_HOST) && w->r[v] != INT_MAX)
		penalty(b, w->r[v], with);
	end_penalties(w, keep, v);
	for (int k = w->lend_from[v]; k < w->lend_from[v + 1]; k++)
		penalty(b, w->lend_at[k], P->bytes[v]);
}

/* The values whose needs change from the committed choice to keep[], from
 * the seeds, operands after their users (b->changed; w's r, last and at
 * theirs under keep[]), and the change in FLOPs; with `lay`, stamped, with
 * their spans' changes as events and their copies' positions, before and
 * after. However
 * far they reach, a try costs about what a whole evaluation does at most:
 * each value and position it visits, the evaluation visits too (a limit of
 * an eighth of the values, past which the try gave way to sel_evaluate,
 * cost DenseNet-201's least search a quarter of its time). */
static void reach(Work *w, const uint8_t *keep, int nseeds, int64_t *df, bool lay)
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
		b->changed[b->nchanged++] = v;
		if (lay)
			b->stamp[v] = b->gen;
		/* what it is, then (restored a moment) what it was */
		*df += cost_of(w, keep, v);
		if (lay)
			spans_of(w, keep, v, 1);
		else
			span_events(w, keep, v, 1), penalties(w, keep, v, w->at[v], w->nat[v]);
		int r = w->r[v], last = w->last[v], nat = w->nat[v];
		b->scratch = grow(b->scratch, &b->cap_scratch, nat + 1, sizeof(int));
		if (nat)
			memcpy(b->scratch, w->at[v], sizeof(int) * (size_t)nat);
		restore(w, v);
		*df -= cost_of(w, b->cur, v);
		if (lay)
			spans_of(w, b->cur, v, -1);
		else
			span_events(w, b->cur, v, -1), end_penalties(w, b->cur, v);
		w->r[v] = r, w->last[v] = last;
		at_set(w, v, b->scratch, nat);
		for (int k = 0; k < P->nin[v]; k++) {
			int u = P->in[v][k];
			if (P->kind[u] != SEL_FIXED && b->queued[u] != b->gen)
				b->queued[u] = b->gen, heap_push(b, &nheap, u);
		}
	}
}

/* the values whose states differ from the committed choice into b->seed, their count; -1 past TRY_MOST */
static int seeds_of(Work *w, const uint8_t *keep)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	int nseeds = 0;
	for (int v = 0; v < P->n; v += 256) {
		/* 256 states at a time: most are as committed */
		int m = P->n - v < 256 ? P->n - v : 256;
		if (!memcmp(keep + v, b->cur + v, (size_t)m))
			continue;
		for (int u = v; u < v + m; u++)
			if (keep[u] != b->cur[u]) {
				if (nseeds == TRY_MOST)
					return -1;
				b->seed[nseeds++] = u;
			}
	}
	return nseeds;
}

/* whether keep[]'s peak, measured from the committed choice, passes
 * `limit` (reach() and changed_copies() made): first where the copies
 * are not laid out again (the committed profile shifted by the spans'
 * changes), then at each position laid out again, in order, each laid out
 * only until one passes. A peak over the limit, from a position that
 * passes it, in *over. */
static bool passes(Work *w, const uint8_t *keep, int64_t limit, int64_t *over)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	int64_t d = 0, above;
	for (int t = 0, e = 0, q = 0; t < P->npos;) {
		while (e < b->nev && b->ev[e].pos <= t)
			d += b->ev[e++].delta;
		if (q < b->npts && b->pts[q] == t) {
			q++, t++;
			continue;
		}
		int next = e < b->nev && b->ev[e].pos < P->npos ? b->ev[e].pos : P->npos;
		next = q < b->npts && b->pts[q] < next ? b->pts[q] : next;
		int64_t m = range(b, t, next - 1, d, INT64_MAX, &above);
		if (m > limit) {
			*over = m;
			return true;
		}
		t = next;
	}
	d = 0;
	for (int q = 0, e = 0; q < b->npts; q++) {
		int t = b->pts[q];
		while (e < b->nev && b->ev[e].pos <= t)
			d += b->ev[e++].delta;
		b->again[q] = most_at(w, keep, t);
		int64_t m = b->prof[t] + d - b->most[t] + b->again[q];
		if (m > limit) {
			*over = m;
			return true;
		}
	}
	return false;
}

/* keep[] measured from the committed choice, exactly as sel_evaluate()
 * finds it: its peak in *peak, FLOPs in *flops, excess in w->excess.
 * -1 where it must be evaluated whole (no committed choice at this budget,
 * or more than TRY_MOST values changed); 0 where it is the committed
 * choice; 1 where measured, the changed values' r, last and at in w then
 * keep[]'s (restored by sel_eval_try, or taken by sel_commit). Where its
 * peak passes the limit (`limit` where its FLOPs are under `fewer`, else
 * `limit_else`; INT64_MAX: none), 2 as soon as that shows, with the FLOPs
 * exact, a peak over the limit and not its own, and no excess: a move a
 * search would not take is not laid out further. */
static int measure(Work *w, const uint8_t *keep, int64_t limit, int64_t fewer, int64_t limit_else, int64_t *peak_out,
                   int64_t *flops)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	if (!b || b->budget != w->budget)
		return -1;
	int nseeds = seeds_of(w, keep);
	if (nseeds < 0)
		return -1;
	if (!nseeds) {
		w->evals++;
		*flops = b->flops, w->excess = b->excess, *peak_out = b->peak;
		return 0;
	}
	b->nseed = nseeds;
	if (b->dirty) {
		/* a whole evaluation since the commit wrote over w's r, last and at */
		for (int i = 0; i < w->nlive; i++)
			restore(w, w->live[i]);
		b->dirty = false;
	}
	b->gen++;
	b->nev = b->npts = b->nchanged = 0;
	int64_t df;
	reach(w, keep, nseeds, &df, true);
	int64_t peak = 0, budget = w->budget;
	w->evals++;
	/* the positions where copies are made, before or after, laid out again */
	if (b->npts)
		sort_ints(b->pts, b->npts, 64);
	int npts = b->npts;
	b->again = realloc(b->again, sizeof(int64_t) * (size_t)(npts + 1));
	changed_copies(w, keep);
	if (b->nev)
		sort_events(b->ev, b->nev, 64);
	*flops = b->flops + df;
	limit = *flops < fewer ? limit : limit_else;
	if (limit < INT64_MAX) {
		if (passes(w, keep, limit, peak_out))
			return 2;
	} else {
		for (int k = 0; k < npts; k++)
			b->again[k] = most_at(w, keep, b->pts[k]);
	}
	/* between the spans' ends, and apart from those positions, the committed profile shifts as one */
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
	w->excess = b->excess + dex;
	*peak_out = peak;
	return 1;
}

/* the try measure() just measured kept (b's last_*), before its changed
 * values' r, last and at are restored: the greedy searches commit the
 * move they last tried, and a commit then takes it without measuring it
 * again (the tries of a choice that computes much again cost tens of ms) */
static void keep_try(Work *w, const uint8_t *keep, int64_t peak, int64_t flops)
{
	Base *b = w->base;
	b->last_gen = b->gen, b->nlast = b->nseed;
	for (int i = 0; i < b->nseed; i++)
		b->last_seed[i] = b->seed[i], b->last_state[i] = keep[b->seed[i]];
	b->last_peak = peak, b->last_flops = flops, b->last_excess = w->excess;
	save_needs(w, b->changed, b->nchanged, b->last_r, b->last_last, b->last_from, &b->last_at, &b->cap_last_at);
}

/* whether keep[] is the choice of the try last kept, which nothing measured
 * or committed since */
static bool try_kept(const Work *w, const uint8_t *keep)
{
	const SelProblem *P = w->P;
	const Base *b = w->base;
	if (!b || !b->last_gen || b->last_gen != b->gen || b->budget != w->budget)
		return false;
	int n = 0;
	for (int v = 0; v < P->n; v += 256) {
		int m = P->n - v < 256 ? P->n - v : 256;
		if (!memcmp(keep + v, b->cur + v, (size_t)m))
			continue;
		for (int u = v; u < v + m; u++)
			if (keep[u] != b->cur[u] && (n == b->nlast || b->last_seed[n] != u || b->last_state[n++] != keep[u]))
				return false;
	}
	return n == b->nlast;
}

/* try_kept; then w's changed values' r, last and at are the try's again, and its results in *peak, *flops
 * and w->excess */
static bool kept_try(Work *w, const uint8_t *keep, int64_t *peak, int64_t *flops)
{
	Base *b = w->base;
	if (!try_kept(w, keep))
		return false;
	for (int i = 0; i < b->nchanged; i++) {
		int v = b->changed[i];
		w->r[v] = b->last_r[i], w->last[v] = b->last_last[i];
		at_set(w, v, b->last_at + b->last_from[i], b->last_from[i + 1] - b->last_from[i]);
	}
	w->evals++;
	*peak = b->last_peak, *flops = b->last_flops, w->excess = b->last_excess;
	return true;
}

/* keep[]'s peak, FLOPs (*flops) and excess (w->excess) exactly as sel_evaluate()
 * finds them, from the committed choice, where keep[] differs from it in at
 * most TRY_MOST values; otherwise by sel_evaluate() */
int64_t sel_eval_try(Work *w, const uint8_t *keep, int64_t *flops)
{
	return sel_eval_under(w, keep, INT64_MAX, INT64_MAX, INT64_MAX, flops);
}

static bool limits = true;

void sel_try_limits(bool on) { limits = on; }

bool sel_model_defaults(void) { return limits && !checking; }

int64_t sel_eval_under(Work *w, const uint8_t *keep, int64_t limit, int64_t fewer, int64_t limit_else, int64_t *flops)
{
	Base *b = w->base;
	int64_t peak;
	if (!limits)
		limit = limit_else = INT64_MAX;
	int got = measure(w, keep, limit, fewer, limit_else, &peak, flops);
	limit = *flops < fewer ? limit : limit_else;
	if (got < 0)
		return sel_evaluate(w, keep, flops);
	if (got == 1)
		keep_try(w, keep, peak, *flops);
	for (int i = 0; got > 0 && i < b->nchanged; i++)
		restore(w, b->changed[i]);
	if (checking && got > 0) {
		int64_t f2, ex = w->excess, p2 = sel_evaluate(w, keep, &f2);
		w->evals--;
		if (got == 2 ? p2 < peak || peak <= limit || f2 != *flops : p2 != peak || f2 != *flops || w->excess != ex)
			die("select: a try's peak %lld, FLOPs %lld, excess %lld (limit %lld); evaluated whole, %lld, %lld, %lld",
			    (long long)peak, (long long)*flops, (long long)ex, (long long)limit, (long long)p2, (long long)f2,
			    (long long)w->excess);
	}
	return peak;
}

/* keep[], the committed choice but for value v now kept, where its peak is
 * no higher: its FLOPs exactly as sel_evaluate() finds them into *flops,
 * and true. The peak is bounded without laying out the copies (a try of a
 * choice that computes much again spends most of its time there): the
 * committed profile, shifted by the changed values' spans exactly, and at
 * each position where a changed value's copy is made anew, or a span of
 * it ends, or an op may take its storage, raised by what that may hold
 * (penalties()). A copy that goes holds nothing more: a copy that took
 * its storage holds its own, but its bytes leave. False where the bound
 * passes the committed peak, or keep[] is not a try sel_eval_try measures
 * from the committed choice: nothing is measured. The try last measured
 * stays kept for a commit: this one has its own queue marks, changed
 * values and events. */
bool sel_keep_try(Work *w, const uint8_t *keep, int v, int64_t *flops)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	if (!b || b->budget != w->budget || keep[v] != SEL_KEEP || b->cur[v] == SEL_KEEP || seeds_of(w, keep) != 1)
		return false;
	if (b->dirty) {
		for (int i = 0; i < w->nlive; i++)
			restore(w, w->live[i]);
		b->dirty = false;
	}
	int *queued = b->queued, *changed = b->changed, gen = b->gen, nchanged = b->nchanged, nev = b->nev,
	    cap_ev = b->cap_ev;
	Event *ev = b->ev;
	b->queued = b->fqueued, b->changed = b->fchanged, b->gen = ++b->fgen, b->nchanged = 0;
	b->ev = b->fev, b->cap_ev = b->cap_fev, b->nev = b->npen = 0;
	int64_t df;
	reach(w, keep, 1, &df, false);
	for (int i = 0; i < b->nchanged; i++)
		restore(w, b->changed[i]);
	b->queued = queued, b->changed = changed, b->gen = gen, b->nchanged = nchanged;
	if (b->nev)
		sort_events(b->ev, b->nev, 64);
	if (b->npen)
		sort_events(b->pen, b->npen, 64);
	int64_t d = 0, most = 0;
	for (int t = 0, e = 0, q = 0; t < P->npos && most <= b->peak;) {
		while (e < b->nev && b->ev[e].pos <= t)
			d += b->ev[e++].delta;
		if (q < b->npen && b->pen[q].pos == t) {
			int64_t m = b->prof[t] + d;
			while (q < b->npen && b->pen[q].pos == t)
				m += b->pen[q++].delta;
			most = m > most ? m : most;
			t++;
			continue;
		}
		int next = e < b->nev && b->ev[e].pos < P->npos ? b->ev[e].pos : P->npos;
		next = q < b->npen && b->pen[q].pos < next ? b->pen[q].pos : next;
		int64_t above, m = range(b, t, next - 1, d, INT64_MAX, &above);
		most = m > most ? m : most;
		t = next;
	}
	b->fev = b->ev, b->cap_fev = b->cap_ev;
	b->ev = ev, b->cap_ev = cap_ev, b->nev = nev;
	if (most > b->peak)
		return false;
	*flops = b->flops + df;
	if (checking) {
		int64_t f2, p2 = sel_evaluate(w, keep, &f2);
		w->evals--;
		if (f2 != *flops || p2 > most)
			die("select: keeping %d: FLOPs %lld, the peak at most %lld; evaluated whole, %lld and %lld", v,
			    (long long)*flops, (long long)most, (long long)f2, (long long)p2);
	}
	w->evals++;
	return true;
}

/* a commit's change of the profile over [from, to) by dt != 0 (take_try): positions in order, and the block
 * they are in (*k, its first position's change *first, whether every position so far changes by it *same, up to
 * *end) closed where the next begins: shifted where it changes as one, else sorted again */
typedef struct {
	int k, end;
	int64_t first;
	bool same;
} Moved;

static void close_block(Base *b, const Moved *m, int npos)
{
	if (m->k < 0)
		return;
	int to = (m->k + 1) * BLOCK < npos ? (m->k + 1) * BLOCK : npos;
	if (m->same && (m->end == to || !m->first))
		b->shift[m->k] += m->first;
	else
		sort_block(b, m->k, npos);
}

static void move_range(Base *b, Moved *m, int from, int to, int64_t dt, int npos)
{
	for (int t = from; t < to;) {
		int k = t / BLOCK, stop = (k + 1) * BLOCK < to ? (k + 1) * BLOCK : to;
		if (k != m->k) {
			close_block(b, m, npos);
			*m = (Moved){k, k * BLOCK, t == k * BLOCK ? dt : 0, true};
		}
		/* the positions between unchanged */
		m->same = m->same && (t == m->end || !m->first) && dt == m->first;
		for (int x = t; x < stop; x++)
			b->prof[x] += dt;
		m->end = t = stop;
	}
}

/* lists v..u-1 of a list of lists (from[] their starts in src, from[u] still the old start of u) copied as one
 * run to dst at k, their starts moved there; the end of the run in dst */
static int copy_run(int *from, const int *src, int *dst, int v, int u, int k)
{
	int start = from[v], n = from[u] - start;
	if (n)
		memcpy(dst + k, src + start, sizeof(int) * (size_t)n);
	for (int x = v; x < u && k != start; x++)
		from[x] += k - start;
	return k + n;
}

/* The try measure() just measured made the committed choice: its changed
 * values' r, last and at (w's now), the copies at the positions it laid
 * out again, and the profile: each block that only moved takes a shift,
 * the others are sorted again (as commit_whole does). The lists of values
 * and positions that did not change are copied as runs, and the profile
 * visited only where it changes: a commit costs about its changes (the
 * threshold accepting of a fit commits thousands). */
static void take_try(Work *w, const uint8_t *keep, int64_t peak, int64_t flops)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	int npos = P->npos;
	int total = b->at_from[P->n];
	for (int i = 0; i < b->nchanged; i++) {
		int v = b->changed[i];
		total += w->nat[v] - (b->at_from[v + 1] - b->at_from[v]);
		b->r[v] = w->r[v], b->last[v] = w->last[v];
	}
	/* the needs' positions: b->changed is in value order (changed_copies) */
	b->at2 = grow(b->at2, &b->cap_at2, total + 1, sizeof(int));
	int k = 0;
	for (int i = 0, v = 0;; i++) {
		int u = i < b->nchanged ? b->changed[i] : P->n;
		k = copy_run(b->at_from, b->at, b->at2, v, u, k);
		if (u == P->n)
			break;
		b->at_from[u] = k;
		if (w->nat[u])
			memcpy(b->at2 + k, w->at[u], sizeof(int) * (size_t)w->nat[u]);
		k += w->nat[u];
		v = u + 1;
	}
	b->at_from[P->n] = k;
	int *t0 = b->at, c0 = b->cap_at;
	b->at = b->at2, b->cap_at = b->cap_at2, b->at2 = t0, b->cap_at2 = c0;
	/* the copies per position: those it laid out again (b->pts, in order) merged, the others as they were */
	b->cp2 = grow(b->cp2, &b->cap_cp2, b->cp_from[npos] + b->nnode + 1, sizeof(int));
	int m = 0;
	for (int q = 0, t = 0;; q++) {
		int u = q < b->npts ? b->pts[q] : npos;
		m = copy_run(b->cp_from, b->cp, b->cp2, t, u, m);
		if (u == npos)
			break;
		int n = merge_at(b, u, &b->cp2, &b->cap_cp2, m);
		b->cp_from[u] = m;
		m += n;
		t = u + 1;
	}
	b->cp_from[npos] = m;
	t0 = b->cp, c0 = b->cap_cp;
	b->cp = b->cp2, b->cap_cp = b->cap_cp2, b->cp2 = t0, b->cap_cp2 = c0;
	/* the profile, as measure() found it: the committed one shifted by the spans' changes, and at the
	 * positions laid out again what the copies there hold */
	Moved mv = {-1, 0, 0, true};
	int64_t d = 0;
	for (int t = 0, e = 0, q = 0; t < npos;) {
		while (e < b->nev && b->ev[e].pos <= t)
			d += b->ev[e++].delta;
		if (q < b->npts && b->pts[q] == t) {
			int64_t dt = d + b->again[q] - b->most[t];
			b->most[t] = b->again[q++];
			if (dt)
				move_range(b, &mv, t, t + 1, dt, npos);
			t++;
			continue;
		}
		int next = e < b->nev && b->ev[e].pos < npos ? b->ev[e].pos : npos;
		next = q < b->npts && b->pts[q] < next ? b->pts[q] : next;
		if (d)
			move_range(b, &mv, t, next, d, npos);
		t = next;
	}
	close_block(b, &mv, npos);
	memcpy(b->cur, keep, (size_t)P->n);
	b->peak = peak, b->flops = flops, b->excess = w->excess;
	b->gen++;
}

/* the committed choice's arrays against those a whole commit makes (sel_check_tries) */
static void check_commit(Work *w, const uint8_t *keep)
{
	const SelProblem *P = w->P;
	Base *b = w->base;
	int n = P->n, npos = P->npos, nat = b->at_from[n], ncp = b->cp_from[npos];
	int64_t peak = b->peak, flops = b->flops, excess = b->excess, f;
	int *r = malloc(sizeof(int) * (size_t)(2 * n + 1)), *last = r + n;
	int *at_from = malloc(sizeof(int) * (size_t)(n + 1)), *at = malloc(sizeof(int) * (size_t)(nat + 1));
	int *cp_from = malloc(sizeof(int) * (size_t)(npos + 1)), *cp = malloc(sizeof(int) * (size_t)(ncp + 1));
	int64_t *prof = malloc(sizeof(int64_t) * (size_t)(2 * npos + 1)), *most = prof + npos;
	memcpy(r, b->r, sizeof(int) * (size_t)n), memcpy(last, b->last, sizeof(int) * (size_t)n);
	memcpy(at_from, b->at_from, sizeof(int) * (size_t)(n + 1)), memcpy(at, b->at, sizeof(int) * (size_t)nat);
	memcpy(cp_from, b->cp_from, sizeof(int) * (size_t)(npos + 1)), memcpy(cp, b->cp, sizeof(int) * (size_t)ncp);
	memcpy(prof, b->prof, sizeof(int64_t) * (size_t)npos), memcpy(most, b->most, sizeof(int64_t) * (size_t)npos);
	/* each block sorted, less its shift */
	for (int k = 0; k * BLOCK < npos; k++)
		for (int t = k * BLOCK + 1; t < (k + 1) * BLOCK && t < npos; t++)
			if (b->sorted[t] < b->sorted[t - 1] || b->sum[t] != b->sum[t - 1] + b->sorted[t])
				die("select: a commit from a try left block %d of the profile unsorted", k);
	/* and holding the block's positions' values, less its shift */
	int64_t *block = malloc(sizeof(int64_t) * BLOCK);
	for (int k = 0; k * BLOCK < npos; k++) {
		int from = k * BLOCK, to = from + BLOCK < npos ? from + BLOCK : npos;
		for (int t = from; t < to; t++)
			block[t - from] = b->prof[t] - b->shift[k];
		sort_int64s(block, to - from, 64);
		if (memcmp(block, b->sorted + from, sizeof(int64_t) * (size_t)(to - from)))
			die("select: a commit from a try left block %d of the profile sorted from other values than its positions'", k);
	}
	free(block);
	int64_t p2 = commit_whole(w, keep, &f);
	/* counted as one evaluation, as the commit it checks is */
	w->evals--;
	bool same = p2 == peak && f == flops && w->excess == excess && !memcmp(r, b->r, sizeof(int) * (size_t)n) &&
	            !memcmp(last, b->last, sizeof(int) * (size_t)n) && b->at_from[n] == nat &&
	            !memcmp(at_from, b->at_from, sizeof(int) * (size_t)(n + 1)) && !memcmp(at, b->at, sizeof(int) * (size_t)nat) &&
	            b->cp_from[npos] == ncp && !memcmp(cp_from, b->cp_from, sizeof(int) * (size_t)(npos + 1)) &&
	            !memcmp(cp, b->cp, sizeof(int) * (size_t)ncp) && !memcmp(prof, b->prof, sizeof(int64_t) * (size_t)npos) &&
	            !memcmp(most, b->most, sizeof(int64_t) * (size_t)npos);
	if (!same)
		die("select: a commit from a try (peak %lld, FLOPs %lld, excess %lld) differs from the whole commit's "
		    "(%lld, %lld, %lld) or its arrays", (long long)peak, (long long)flops, (long long)excess, (long long)p2,
		    (long long)f, (long long)w->excess);
	free(r), free(at_from), free(at), free(cp_from), free(cp), free(prof);
}

/* keep[] evaluated and made the choice sel_eval_try measures from: from the
 * committed one where a try can measure it, else whole */
int64_t sel_commit(Work *w, const uint8_t *keep, int64_t *flops)
{
	int64_t peak;
	/* the try just measured, kept (1), or measured now */
	int got = kept_try(w, keep, &peak, flops) ? 1 : measure(w, keep, INT64_MAX, INT64_MAX, INT64_MAX, &peak, flops);
	if (got < 0)
		return commit_whole(w, keep, flops);
	if (got > 0)
		take_try(w, keep, peak, *flops);
	if (w->base->dirty) {
		/* as a whole commit leaves them: w's r, last and at the committed choice's (a whole evaluation since
		 * a kept try wrote over the others') */
		for (int i = 0; i < w->nlive; i++)
			restore(w, w->live[i]);
		w->base->dirty = false;
	}
	if (checking)
		check_commit(w, keep);
	return peak;
}

void sel_check_tries(bool on) { checking = on; }

int64_t sel_eval(const SelProblem *P, const uint8_t *keep, int64_t *flops, int64_t *prof)
{
	Work w;
	sel_work_init(&w, P);
	int64_t peak = sel_evaluate(&w, keep, flops);
	if (prof)
		memcpy(prof, w.prof, sizeof(int64_t) * (size_t)P->npos);
	sel_work_free(&w);
	return peak;
}

int64_t sel_eval_below(const SelProblem *P, const uint8_t *keep, int64_t limit, int64_t *flops)
{
	Work w;
	sel_work_init(&w, P);
	int64_t peak = evaluate(&w, keep, limits ? limit : INT64_MAX, flops);
	sel_work_free(&w);
	return peak;
}
