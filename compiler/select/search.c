/* sel: the choice of what the adjoint keeps (select.h has the cost model;
 * model.c evaluates it, bound.c bounds it).
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
 * FLOPs and still fits is kept. */
#include "model.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

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

/* whether v is one of the search's decisions (sel_candidates; sel_exact_past counts them) */
static bool decides(const SelProblem *P, int v)
{
	return (P->kind[v] == SEL_CAND || P->kind[v] == SEL_TEMP) && !is_free(P, v);
}

/* whether v may be in state st: offloaded only where it has a host cost */
static bool may(const SelProblem *P, int v, uint8_t st)
{
	return st != SEL_HOST || (P->kind[v] == SEL_CAND && P->host[v] > 0);
}

/* the least a candidate not kept costs: computed again once, or offloaded */
int64_t sel_least_cost(const SelProblem *P, int v)
{
	return may(P, v, SEL_HOST) && P->host[v] < P->flops[v] ? P->host[v] : P->flops[v];
}


static const SelProblem *sort_problem;
static int by_flops(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	int64_t fx = sort_problem->flops[x], fy = sort_problem->flops[y];
	return fx < fy ? 1 : fx > fy ? -1 : x - y;
}

/* store-everything: every candidate kept but the free ones; free values made again at each use (that holds
 * them least) */
void sel_store_everything(const SelProblem *P, uint8_t *keep)
{
	for (int v = 0; v < P->n; v++)
		keep[v] = P->kind[v] != SEL_FIXED && is_free(P, v) ? SEL_EACH : P->kind[v] == SEL_CAND ? SEL_KEEP : SEL_ONCE;
}

Cands sel_candidates(const SelProblem *P, uint8_t *keep)
{
	Cands c = {malloc(sizeof(int) * (size_t)(P->n + 1)), 0};
	sel_store_everything(P, keep);
	for (int v = 0; v < P->n; v++)
		if (decides(P, v))
			c.c[c.nc++] = v;
	sort_problem = P;
	qsort(c.c, (size_t)c.nc, sizeof(int), by_flops);
	return c;
}

bool sel_exact_past(const SelProblem *P)
{
	int n = 0;
	for (int v = 0; v < P->n && n <= SEL_EXACT_MOST; v++)
		n += decides(P, v);
	return n > SEL_EXACT_MOST;
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
	int64_t f, peak = sel_evaluate(e->w, e->keep, &f);
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
	int from = sel_gap_from(P, v), to = sel_gap_to(P, v);
	e->steps += 2 * (to - from + 2);
	bool ok = true;
	for (int t = from; t <= to; t++) {
		if (!sel_frees(P, v, t))
			continue;
		e->avail[t] -= P->bytes[v];
		ok &= e->avail[t] >= e->need[t];
	}
	const Work *w = e->w;
	for (int k = w->lend_from[v]; k < w->lend_from[v + 1]; k++) {
		int t = w->lend_at[k];
		e->avail[t] -= sel_lent(P, v, t);
		ok &= e->avail[t] >= e->need[t];
	}
	if (ok)
		dfs(e, i + 1, flops);
	for (int t = from; t <= to; t++)
		if (sel_frees(P, v, t))
			e->avail[t] += P->bytes[v];
	for (int k = w->lend_from[v]; k < w->lend_from[v + 1]; k++)
		e->avail[w->lend_at[k]] += sel_lent(P, v, w->lend_at[k]);
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
 * needed; the best of the three taken. With `chain` (from a choice that
 * keeps temporaries), also once with its kept frontier made again too (a
 * value whose kept operand only it reads frees nothing alone), and once
 * with its elementwise reader kept instead (its successor: the same bytes
 * held to a different adjoint use). */
enum { MOVE_ONCE, MOVE_FRONT, MOVE_EACH, MOVE_HOST, MOVE_CHAIN, MOVE_SHIFT };
static const uint8_t move_state[] = {[MOVE_ONCE] = SEL_ONCE, [MOVE_FRONT] = SEL_ONCE, [MOVE_EACH] = SEL_EACH,
                                     [MOVE_HOST] = SEL_HOST, [MOVE_CHAIN] = SEL_ONCE, [MOVE_SHIFT] = SEL_ONCE};

/* the value not kept that may take v's storage (an elementwise reader of it), or -1 */
static int successor(const SelProblem *P, const uint8_t *keep, int v)
{
	for (int x = 0; x < P->n; x++)
		for (int k = 0; k < P->nin[x] && k < 32; k++)
			if (P->in[x][k] == v && (P->share[x] >> k & 1) && P->kind[x] != SEL_FIXED && keep[x] != SEL_KEEP)
				return x;
	return -1;
}

static Outcome greedy_drop(Work *w, const Cands *c, int64_t budget, bool chain, uint8_t *keep)
{
	const SelProblem *P = w->P;
	w->budget = budget;
	int64_t f, peak = sel_commit(w, keep, &f), ex = w->excess;
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
		int next = chain ? successor(P, keep, v) : -1;
		if (round[top] != now) {
			int64_t f2;
			score[top] = -1e300;
			for (int m = MOVE_ONCE; m <= (chain ? MOVE_SHIFT : MOVE_HOST); m++) {
				/* read by one adjoint op: each time is once, unless recomputations read it too */
				if ((m == MOVE_EACH && P->adj_first[v] == P->adj_last[v] && w->nlive > 256) || !may(P, v, move_state[m]))
					continue;
				int added = 0;
				keep[v] = move_state[m];
				for (int k = 0; k < nf && m == MOVE_FRONT; k++)
					was[k] = keep[front[k]], added += keep[front[k]] != SEL_KEEP, keep[front[k]] = SEL_KEEP;
				for (int k = 0; k < nf && m == MOVE_CHAIN; k++)
					if ((was[k] = keep[front[k]]) == SEL_KEEP)
						keep[front[k]] = SEL_ONCE, added++;
				uint8_t was_next = next >= 0 ? keep[next] : 0;
				if (m == MOVE_SHIFT && next >= 0)
					keep[next] = SEL_KEEP, added = 1;
				if ((m != MOVE_FRONT && m != MOVE_CHAIN && m != MOVE_SHIFT) || added) {
					sel_eval_try(w, keep, &f2);
					double s2 = (double)(ex - w->excess) / (double)(f2 - f + 1);
					if (s2 > score[top])
						score[top] = s2, move[top] = (uint8_t)m;
				}
				for (int k = 0; k < nf && (m == MOVE_FRONT || m == MOVE_CHAIN); k++)
					keep[front[k]] = was[k];
				if (m == MOVE_SHIFT && next >= 0)
					keep[next] = was_next;
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
		for (int k = 0; k < nf && (move[top] == MOVE_FRONT || move[top] == MOVE_CHAIN); k++)
			keep[front[k]] = move[top] == MOVE_FRONT ? SEL_KEEP : keep[front[k]] == SEL_KEEP ? SEL_ONCE : keep[front[k]];
		if (move[top] == MOVE_SHIFT && next >= 0)
			keep[next] = SEL_KEEP;
		now++;
		peak = sel_commit(w, keep, &f);
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

/* candidate i's score, into *score and its move into *to: the best of
 * keeping it, computing it each time (over the budget) and offloading it;
 * keep[] as it was */
static void score_of(Work *w, const KeepScores *k, uint8_t *keep, int i, double *score, uint8_t *to)
{
	const SelProblem *P = w->P;
	int v = k->c->c[i];
	uint8_t was = keep[v];
	*score = 0;
	/* over the budget, computing it each time is a move too; offloading it always */
	static const uint8_t to_try[3] = {SEL_KEEP, SEL_EACH, SEL_HOST};
	for (int j = 0; j < 3; j++) {
		uint8_t st = to_try[j];
		if ((st == SEL_EACH && !(k->over && was == SEL_ONCE)) || st == was || !may(P, v, st))
			continue;
		keep[v] = st;
		/* within the budget, a move past it scores nothing: laid out only until that shows */
		int64_t f2, p2 = k->over ? sel_eval_try(w, keep, &f2) : sel_eval_under(w, keep, k->budget, k->f, -1, &f2);
		double sc = k->over ? (double)(k->ex - w->excess)
		                    /* no gain, or over the budget: out until something else is kept */
		                    : p2 > k->budget || f2 >= k->f ? 0 : (double)(k->f - f2) / (double)((p2 > k->peak ? p2 - k->peak : 0) + 1);
		if (sc > *score)
			*score = sc, *to = st;
	}
	keep[v] = was;
}

static void score_keep(Work *w, const KeepScores *k, uint8_t *keep, int i)
{
	score_of(w, k, keep, i, &k->score[i], &k->to[i]);
}

/* some of score_all's candidates, todo[from], todo[from + step], ...,
 * scored with w (a second thread's own Work commits its copy of the
 * choice first) */
typedef struct {
	Work *w;
	const KeepScores *k;
	uint8_t *keep;
	const int *todo;
	int n, from, step;
	bool commit;
} Part;

static void *score_part(void *arg)
{
	Part *h = arg;
	int64_t f;
	if (h->commit)
		sel_commit(h->w, h->keep, &f);
	for (int j = h->from; j < h->n; j += h->step)
		score_keep(h->w, h->k, h->keep, h->todo[j]);
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
	Part mine = {.w = w, .k = k, .keep = keep, .todo = todo, .n = n, .step = 1};
	if (pair && n > 1) {
		Work side;
		sel_work_init(&side, P);
		side.budget = w->budget;
		Part other = {.w = &side, .k = k, .keep = malloc((size_t)P->n + 1), .todo = todo, .n = n, .from = 1, .step = 2,
		              .commit = true};
		memcpy(other.keep, keep, (size_t)P->n);
		mine.step = 2;
		util_pair(score_part, &mine, score_part, &other);
		w->evals += side.evals;
		sel_work_free(&side);
		free(other.keep);
	} else
		score_part(&mine);
	free(todo);
}

/* greedy_keep's first scores without evaluating: what each value's copies cost now (computed again once, or
 * at each position that needs it), the FLOPs that keeping it saves at the least, as a stale score */
static void first_estimates(Work *w, const KeepScores *k, const uint8_t *keep, int *round)
{
	const SelProblem *P = w->P;
	for (int i = 0; i < k->c->nc; i++) {
		int v = k->c->c[i];
		int64_t est = keep[v] == SEL_EACH ? P->flops[v] * w->nat[v]
		              : keep[v] == SEL_ONCE && w->r[v] != INT_MAX ? P->flops[v]
		              : keep[v] == SEL_HOST && w->r[v] != INT_MAX ? P->host[v] : 0;
		k->score[i] = (double)est, k->to[i] = SEL_KEEP, round[i] = -1;
	}
}

/* the lazy loop's keep moves scored without laying out their copies (scored_cheaply) */
typedef struct {
	bool *dear;      /* per candidate: its move tried so once in vain, so not again */
	int cheap, vain; /* the moves so scored, and those tried in vain */
} Cheap;

static bool cheap_keeps = true;
static int64_t cheap_taken;

void sel_cheap_keeps(bool on)
{
	cheap_keeps = on;
	cheap_taken = 0;
}

int64_t sel_cheap_taken(void) { return cheap_taken; }

/* Within the budget, a candidate is scored as score_of() would, where keeping
 * it is its only move there and sel_keep_try shows the peak no higher: its
 * score is then the FLOPs it saves. DenseNet-201 imported: the first moves
 * from its chain start keep values made at each of up to 991 positions, at
 * no cost to the peak, where a try that lays out their copies takes tens of
 * ms. A try in vain costs a reach(): not tried again for that candidate,
 * nor at all where most were in vain (NASNet at 340 MB: 112 of 3,008).
 * Whether candidate i may be so tried: */
static bool cheap_open(const Work *w, const KeepScores *k, const uint8_t *keep, int i, const Cheap *ch)
{
	int v = k->c->c[i];
	return cheap_keeps && !k->over && keep[v] != SEL_KEEP && !may(w->P, v, SEL_HOST) && !ch->dear[i] &&
	       ch->vain <= 32 + 4 * ch->cheap;
}

/* one cheap try: keep[v] kept for it, then as it was */
typedef struct {
	Work *w;
	uint8_t *keep;
	int v;
	bool got;
	int64_t f2;
} CheapTry;

static void *cheap_try(void *arg)
{
	CheapTry *t = arg;
	uint8_t was = t->keep[t->v];
	t->keep[t->v] = SEL_KEEP;
	t->got = sel_keep_try(t->w, t->keep, t->v, &t->f2);
	t->keep[t->v] = was;
	return NULL;
}

/* a cheap try's outcome counted, and its score (the FLOPs it saves, 0 where none) in *score, *to */
static bool cheap_taken_as(const KeepScores *k, int i, const CheapTry *t, Cheap *ch, double *score, uint8_t *to)
{
	ch->dear[i] = !t->got;
	ch->cheap += t->got, ch->vain += !t->got;
	if (!t->got)
		return false;
	cheap_taken++;
	*score = t->f2 < k->f ? (double)(k->f - t->f2) : 0;
	if (t->f2 < k->f)
		*to = SEL_KEEP;
	return true;
}

/* top scored cheaply (true where so scored) */
static bool scored_cheaply(Work *w, KeepScores *k, uint8_t *keep, int top, Cheap *ch)
{
	if (!cheap_open(w, k, keep, top, ch))
		return false;
	CheapTry t = {w, keep, k->c->c[top], false, 0};
	cheap_try(&t);
	return cheap_taken_as(k, top, &t, ch, &k->score[top], &k->to[top]);
}

/* whether another thread has asked w's search to end (Work.stop) */
static bool stopped(const Work *w) { return w->stop && __atomic_load_n(w->stop, __ATOMIC_RELAXED); }

/* From every candidate computed again once: while the peak is over the
 * budget, keep (or compute each time) the value that removes the most
 * bytes-times-positions above it (a kept value ends the chains of
 * recomputation through it, each of which would otherwise be computed
 * again at once and held); then keep the value that saves the most FLOPs
 * per byte it adds to the peak, while the peak fits. Where every score is
 * stale, all are scored at once (score_all; with `pair`, on two threads). */
static Outcome greedy_keep(Work *w, const Cands *c, int64_t budget, bool pair, bool from_nothing, bool lazy,
                           uint8_t *keep)
{
	for (int i = 0; i < c->nc && from_nothing; i++)
		keep[c->c[i]] = SEL_ONCE;
	w->budget = budget;
	KeepScores k = {c, false, 0, 0, 0, budget, malloc(sizeof(double) * (size_t)(c->nc + 1)), malloc((size_t)c->nc + 1)};
	k.peak = sel_commit(w, keep, &k.f), k.ex = w->excess;
	double *score = k.score;
	int *round = malloc(sizeof(int) * (size_t)(c->nc + 1));
	for (int i = 0; i < c->nc; i++)
		score[i] = 1e300, round[i] = -1, k.to[i] = SEL_KEEP;
	int now = 0;
	bool refreshed = false;
	k.over = k.peak > budget;
	/* lazy (sel_improve on large graphs): from a choice within the budget, the first scores are estimates,
	 * each evaluated when it comes to the top, not every candidate at once: a start that computes much
	 * again is costly to evaluate, and its first few moves save most of it (Inception-v3 imported: 2,342
	 * candidates, scored at once in 36 s before the first move) */
	if (lazy && !k.over)
		first_estimates(w, &k, keep, round);
	else
		score_all(w, &k, keep, round, now, pair);
	Cheap cheap = {calloc((size_t)c->nc + 1, sizeof(bool)), 0, 0};
	while (!stopped(w)) {
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
			/* the keep move scored cheaply where it can be */
			if (!lazy || !scored_cheaply(w, &k, keep, top, &cheap))
				score_keep(w, &k, keep, top);
			round[top] = now;
			continue;
		}
		keep[c->c[top]] = k.to[top];
		now++;
		refreshed = false;
		k.peak = sel_commit(w, keep, &k.f);
		k.ex = w->excess;
		bool was = k.over;
		k.over = k.peak > budget;
		/* at the change of phase every score is stale; within one, a value out stays out (keeping more
		 * only raises the peak and leaves fewer values to compute again), or comes back at a refresh */
		if (was != k.over)
			score_all(w, &k, keep, round, now, pair);
	}
	free(cheap.dear);
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
	int64_t f, peak = sel_commit(w, keep, &f);
	/* first every value not kept tried kept, then every value made each time tried made once, then every
	 * value made again tried offloaded */
	static const uint8_t pass_to[3] = {SEL_KEEP, SEL_ONCE, SEL_HOST};
	for (int pass = 0; pass < 3 && !stopped(w); pass++)
		for (int i = 0; i < c->nc && !stopped(w); i++) {
			int v = c->c[i];
			uint8_t was = keep[v];
			if (was == SEL_KEEP || (pass == 1 && was != SEL_EACH) || (pass == 2 && (was == SEL_HOST || !may(w->P, v, SEL_HOST))))
				continue;
			keep[v] = pass_to[pass];
			int64_t f2, p2 = sel_eval_under(w, keep, budget, f, -1, &f2);
			if (p2 <= budget && f2 < f)
				f = f2, peak = p2, sel_commit(w, keep, &f2);
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
	int64_t f, peak = sel_commit(w, keep, &f), per = P->n + P->npos;
	bool moved = true, spent = false;
	while (moved && !spent && peak <= budget) {
		moved = false;
		for (int i = 0; i < c->nc && !moved && !spent; i++) {
			int u = c->c[i];
			uint8_t was_u = keep[u];
			if (was_u == SEL_KEEP || !P->flops[u])
				continue;
			keep[u] = was_u == SEL_EACH ? SEL_ONCE : SEL_KEEP;
			/* its FLOPs alone: its peak not laid out */
			int64_t fu;
			sel_eval_under(w, keep, -1, 0, -1, &fu);
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
					int64_t f2, p2 = sel_eval_under(w, keep, budget, f, -1, &f2);
					if (p2 <= budget && f2 < f)
						f = f2, peak = p2, moved = true, sel_commit(w, keep, &f2);
					else
						keep[v] = was_v;
				}
			}
			if (!moved)
				keep[u] = was_u;
		}
	}
	peak = sel_evaluate(w, keep, &f);
	return (Outcome){peak <= budget, peak, f};
}

/* keep[] with the values drop[] (nd of them) in states st[]; with
 * `repair`, the greedy drop (its chain moves too) over the other values
 * while that is over the budget; then the greedy keep and polish over the
 * others: taken where that saves FLOPs over *f, or as many at a lower
 * peak, and still fits (keep[], *f and *peak become its) */
static bool refilled(Work *w, const Cands *c, int64_t budget, const int *drop, const uint8_t *st, int nd, bool repair,
                     uint8_t *keep, int64_t *f, int64_t *peak)
{
	const SelProblem *P = w->P;
	uint8_t *try = malloc((size_t)P->n + 1);
	Cands rest = {malloc(sizeof(int) * (size_t)(c->nc + 1)), 0};
	memcpy(try, keep, (size_t)P->n);
	for (int k = 0; k < nd; k++)
		try[drop[k]] = st[k];
	for (int j = 0; j < c->nc; j++) {
		int k = 0;
		while (k < nd && drop[k] != c->c[j])
			k++;
		if (k == nd)
			rest.c[rest.nc++] = c->c[j];
	}
	Outcome o = {true, 0, 0};
	if (repair)
		o = greedy_drop(w, &rest, budget, true, try);
	if (o.fits)
		o = greedy_keep(w, &rest, budget, false, false, false, try);
	if (o.fits)
		o = polish(w, &rest, budget, try);
	bool took = o.fits && (o.flops < *f || (o.flops == *f && o.peak < *peak));
	if (took) {
		memcpy(keep, try, (size_t)P->n);
		*f = o.flops, *peak = o.peak;
	}
	free(try);
	free(rest.c);
	return took;
}

/* Drop and refill within a fit: each kept value made again (once, each
 * time, or offloaded), then the greedy keep and polish from there over the
 * other values; each value not kept kept (or made once, from each time),
 * the greedy drop from there and then the keep; where neither helps, each
 * pair of kept values made again once and the keep. Taken where that
 * saves FLOPs and still fits; passes while one helps, within `work` values
 * and positions visited. A swap trades one value for one; these trade
 * several (the DenseNet sample at 75% of store-everything: one 10,240-byte
 * value made once, four smaller kept in its place). */
static Outcome refill(Work *w, const Cands *c, int64_t budget, uint8_t *keep, int64_t work)
{
	const SelProblem *P = w->P;
	int64_t f, peak = sel_commit(w, keep, &f), per = P->n + P->npos;
	bool moved = true;
	while (moved && peak <= budget && w->evals * per <= work) {
		moved = false;
		for (int i = 0; i < c->nc && !moved && w->evals * per <= work; i++) {
			int v = c->c[i];
			for (uint8_t st = SEL_ONCE; st <= SEL_HOST && !moved && keep[v] == SEL_KEEP; st++)
				if (st != SEL_KEEP && may(P, v, st))
					moved = refilled(w, c, budget, &v, &st, 1, false, keep, &f, &peak);
		}
		for (int i = 0; i < c->nc && !moved && w->evals * per <= work; i++) {
			int v = c->c[i];
			uint8_t st = keep[v] == SEL_EACH ? SEL_ONCE : SEL_KEEP;
			if (keep[v] != SEL_KEEP && P->flops[v] && may(P, v, st))
				moved = refilled(w, c, budget, &v, &st, 1, true, keep, &f, &peak);
		}
		static const uint8_t once[2] = {SEL_ONCE, SEL_ONCE};
		for (int i = 0; i < c->nc && !moved && w->evals * per <= work; i++)
			for (int j = i + 1; j < c->nc && !moved && w->evals * per <= work; j++) {
				int two[2] = {c->c[i], c->c[j]};
				if (keep[two[0]] == SEL_KEEP && keep[two[1]] == SEL_KEEP)
					moved = refilled(w, c, budget, two, once, 2, false, keep, &f, &peak);
			}
	}
	peak = sel_evaluate(w, keep, &f);
	return (Outcome){peak <= budget, peak, f};
}

/* the greedy search that drops from store-everything, polished, on a Work
 * of its own. sel_fit runs it before the one that keeps from nothing, not
 * beside it: it is the quicker (DenseNet-121 imported at Feng & Huang's
 * cut + 1: a twelfth of the other), and the keep's scoring rounds then
 * have both threads (greedy_keep's pair) */
static Outcome drop_search(const SelProblem *P, const Cands *c, int64_t budget, uint8_t *keep)
{
	Work w;
	sel_work_init(&w, P);
	Outcome o = greedy_drop(&w, c, budget, false, keep);
	if (o.fits)
		o = polish(&w, c, budget, keep);
	sel_work_free(&w);
	return o;
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
	sel_work_init(&w, P);
	Cands c = sel_candidates(P, keep);
	int64_t f, peak = sel_evaluate(&w, keep, &f);
	int64_t *need = malloc(sizeof(int64_t) * (size_t)(P->npos + 1));
	for (int t = 0; t < P->npos; t++)
		need[t] = w.prof[t] - budget;
	res.bound = peak <= budget ? f : sel_lower_bound(P, &c, need);
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
		sel_gaps(P, &c, e.avail, 1);
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
		/* the greedy searches, each polished: dropping from store-everything (not for the least), and
		 * keeping from nothing kept, its scores on the search's threads */
		uint8_t *other = malloc((size_t)P->n + 1);
		sel_store_everything(P, keep);
		memcpy(other, keep, (size_t)P->n);
		Outcome a = for_least ? (Outcome){false, INT64_MAX, INT64_MAX} : drop_search(P, &c, budget, keep);
		Outcome b = greedy_keep(&w, &c, budget, P->threads > 1, true, false, other);
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
	sel_work_free(&w);
	return res;
}

static SelResult least_bisect(const SelProblem *P, int64_t work, uint8_t *keep, int64_t *floor)
{
	Work w;
	sel_work_init(&w, P);
	Cands c = sel_candidates(P, keep);
	int64_t f, hi = sel_evaluate(&w, keep, &f);
	/* nothing kept, computed once or each time */
	for (uint8_t st = SEL_ONCE; st != SEL_KEEP; st = st == SEL_ONCE ? SEL_EACH : SEL_KEEP) {
		for (int i = 0; i < c.nc; i++)
			keep[c.c[i]] = st;
		int64_t all = sel_evaluate(&w, keep, &f);
		hi = all < hi ? all : hi;
	}
	free(c.c);
	sel_work_free(&w);
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

/* sel_least's answers, by problem. The budget's search (compiler/budget.c) plans the program in several
 * scratch copies, and a straight line's fit that misses its share of the budget ends at the model's least
 * (checkpoint_pass/graph.c's fit_model): the same problem in each copy where the loops' least shape is the
 * same. ResNet-152 imported, its loops at Feng & Huang's cut + 1: four bisections of 0.1 s, one problem. The
 * answer is a function of the problem, the work limit and the searches' switches (the choice passed in is
 * replaced by store-everything first: sel_candidates), so a problem is matched on all its bytes, and only
 * with every switch as the compiler leaves it (a test that turns one gets the search run). */
enum { LEAST_MEMO = 8 };
static struct {
	unsigned char *problem; /* problem_bytes' */
	size_t len;
	int64_t work, floor;
	SelResult res;
	uint8_t *keep;
} least_memo[LEAST_MEMO];
static int nleast_memo;

static void put(unsigned char **b, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (*len + n > *cap) {
		*cap = 2 * (*len + n);
		*b = realloc(*b, *cap);
	}
	if (n) /* a value without operands or listed uses has no array */
		memcpy(*b + *len, data, n);
	*len += n;
}

/* every field of P that a search reads, in one array of *len bytes (malloc'd) */
static unsigned char *problem_bytes(const SelProblem *P, size_t *len)
{
	size_t cap = 0, n = (size_t)P->n, np = (size_t)P->npos;
	unsigned char *b = NULL;
	*len = 0;
	put(&b, len, &cap, &P->n, sizeof P->n);
	put(&b, len, &cap, &P->npos, sizeof P->npos);
	put(&b, len, &cap, &P->threads, sizeof P->threads);
	put(&b, len, &cap, P->base, np * sizeof *P->base);
	put(&b, len, &cap, P->issue, np * sizeof *P->issue);
	put(&b, len, &cap, P->own, np * sizeof *P->own);
	put(&b, len, &cap, P->lend, np * sizeof *P->lend);
	put(&b, len, &cap, P->lend_bytes, np * sizeof *P->lend_bytes);
	put(&b, len, &cap, P->kind, n * sizeof *P->kind);
	put(&b, len, &cap, P->bytes, n * sizeof *P->bytes);
	put(&b, len, &cap, P->flops, n * sizeof *P->flops);
	put(&b, len, &cap, P->nin, n * sizeof *P->nin);
	put(&b, len, &cap, P->def, n * sizeof *P->def);
	put(&b, len, &cap, P->fwd_last, n * sizeof *P->fwd_last);
	put(&b, len, &cap, P->adj_first, n * sizeof *P->adj_first);
	put(&b, len, &cap, P->adj_last, n * sizeof *P->adj_last);
	put(&b, len, &cap, P->nadj, n * sizeof *P->nadj);
	put(&b, len, &cap, P->host, n * sizeof *P->host);
	put(&b, len, &cap, P->share, n * sizeof *P->share);
	for (int v = 0; v < P->n; v++) {
		put(&b, len, &cap, P->in[v], (size_t)P->nin[v] * sizeof **P->in);
		put(&b, len, &cap, P->adj[v], (size_t)P->nadj[v] * sizeof **P->adj);
	}
	return b;
}

SelResult sel_least(const SelProblem *P, int64_t work, uint8_t *keep, int64_t *floor)
{
	if (!cheap_keeps || !sel_model_defaults())
		return least_bisect(P, work, keep, floor);
	size_t len;
	unsigned char *b = problem_bytes(P, &len);
	for (int i = 0; i < nleast_memo && i < LEAST_MEMO; i++)
		if (least_memo[i].work == work && least_memo[i].len == len && !memcmp(least_memo[i].problem, b, len)) {
			free(b);
			memcpy(keep, least_memo[i].keep, (size_t)P->n);
			*floor = least_memo[i].floor;
			return least_memo[i].res;
		}
	SelResult r = least_bisect(P, work, keep, floor);
	int at = nleast_memo++ % LEAST_MEMO;
	free(least_memo[at].problem);
	free(least_memo[at].keep);
	least_memo[at].problem = b, least_memo[at].len = len;
	least_memo[at].work = work, least_memo[at].floor = *floor, least_memo[at].res = r;
	least_memo[at].keep = malloc((size_t)P->n + 1);
	memcpy(least_memo[at].keep, keep, (size_t)P->n);
	return r;
}

/* the candidates alone: sel_candidates() without a choice to start */
static Cands candidates_of(const SelProblem *P)
{
	uint8_t *all = malloc((size_t)P->n + 1);
	Cands c = sel_candidates(P, all);
	free(all);
	return c;
}

static SelResult greedy_result(Outcome o) { return (SelResult){o.fits, o.peak, o.flops, INT64_MAX, SEL_GREEDY}; }

/* First-improvement descent from keep[]: one value's state changed (kept,
 * computed once, computed each time) where that lowers the peak, or
 * (flops_too) keeps it and saves FLOPs; passes until none helps or
 * `passes` ran out. The peak returned, its FLOPs in *fl. */
static int64_t descend(Work *w, const Cands *c, int passes, bool flops_too, uint8_t *keep, int64_t *fl)
{
	const SelProblem *P = w->P;
	int64_t f, peak = sel_commit(w, keep, &f);
	for (int pass = 0; pass < passes; pass++) {
		bool moved = false;
		for (int i = 0; i < c->nc; i++) {
			int v = c->c[i];
			uint8_t was = keep[v], best = was;
			for (uint8_t st = SEL_ONCE; st <= SEL_HOST; st++) {
				if (st == was || !may(P, v, st))
					continue;
				keep[v] = st;
				/* a move that raises the peak is not taken, nor one that keeps it and saves no FLOPs: laid
				 * out only until that shows */
				int64_t f2, p2 = sel_eval_under(w, keep, flops_too ? peak : peak - 1, f, peak - 1, &f2);
				if (p2 < peak || (flops_too && p2 == peak && f2 < f))
					peak = p2, f = f2, best = st;
			}
			keep[v] = best;
			if (best != was)
				sel_commit(w, keep, &f);
			moved |= best != was;
		}
		if (!moved)
			break;
	}
	*fl = f;
	return peak;
}

SelResult sel_lower(const SelProblem *P, int passes, uint8_t *keep)
{
	Work w;
	sel_work_init(&w, P);
	Cands c = candidates_of(P);
	int64_t f, peak = descend(&w, &c, passes, true, keep, &f);
	free(c.c);
	sel_work_free(&w);
	return greedy_result((Outcome){true, peak, f});
}

/* threshold accepting's move: a candidate drawn from seed and a state
 * other than its own (*st); -1 where that state is not open to it */
static int draw(const SelProblem *P, const Cands *c, const uint8_t *keep, uint64_t *seed, uint8_t *st)
{
	*seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
	int v = c->c[*seed % (uint64_t)c->nc];
	*st = (uint8_t)((keep[v] + 1 + (*seed >> 40) % 3) % 4);
	return may(P, v, *st) ? v : -1;
}

/* its threshold at move k of moves: start - floor(start k / moves), without the product's overflow */
static int64_t falling(int64_t start, int64_t k, int64_t moves)
{
	return start - (start / moves * k + start % moves * k / moves);
}

/* Threshold accepting (Dueck and Scheuer, 1990) on the model's peak: a
 * value at random changes state, taken where the peak rises less than a
 * threshold that falls from keep[]'s peak / part to nothing over `moves`
 * moves (integers and a fixed seed: the same choice on every machine). The
 * least peak seen, at its fewest FLOPs, ends in keep[]. */
SelResult sel_anneal(const SelProblem *P, int64_t moves, int64_t part, uint8_t *keep)
{
	Work w;
	sel_work_init(&w, P);
	Cands c = candidates_of(P);
	uint8_t *best = malloc((size_t)P->n + 1);
	memcpy(best, keep, (size_t)P->n);
	int64_t f, peak = sel_commit(&w, keep, &f), best_peak = peak, best_f = f, start = peak / part;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int64_t k = 0; k < moves && c.nc; k++) {
		uint8_t st;
		int v = draw(P, &c, keep, &seed, &st);
		if (v < 0)
			continue;
		uint8_t was = keep[v];
		int64_t th = falling(start, k, moves);
		keep[v] = st;
		/* at a threshold of 0, a move to the same peak is taken only where it adds no FLOPs */
		int64_t fewer = th || f == INT64_MAX ? INT64_MAX : f + 1;
		int64_t f2, p2 = sel_eval_under(&w, keep, peak + th, fewer, th ? peak + th : peak - 1, &f2);
		if (p2 - peak > th || (p2 == peak && th == 0 && f2 > f)) {
			keep[v] = was;
			continue;
		}
		peak = sel_commit(&w, keep, &f);
		if (peak < best_peak || (peak == best_peak && f < best_f)) {
			best_peak = peak, best_f = f;
			memcpy(best, keep, (size_t)P->n);
		}
	}
	memcpy(keep, best, (size_t)P->n);
	free(best);
	free(c.c);
	sel_work_free(&w);
	return greedy_result((Outcome){true, best_peak, best_f});
}

SelResult sel_anneal_fit(const SelProblem *P, int64_t budget, int64_t moves, int64_t part, uint8_t *keep)
{
	Work w;
	sel_work_init(&w, P);
	Cands c = candidates_of(P);
	uint8_t *best = malloc((size_t)P->n + 1);
	memcpy(best, keep, (size_t)P->n);
	int64_t f, peak = sel_commit(&w, keep, &f), best_peak = peak, best_f = peak <= budget ? f : INT64_MAX;
	int64_t start = f / part;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int64_t k = 0; k < moves && c.nc; k++) {
		uint8_t st;
		int v = draw(P, &c, keep, &seed, &st);
		if (v < 0)
			continue;
		uint8_t was = keep[v];
		int64_t th = falling(start, k, moves);
		keep[v] = st;
		int64_t fewer = th < INT64_MAX - 1 - f ? f + th + 1 : INT64_MAX;
		int64_t f2, p2 = sel_eval_under(&w, keep, budget > peak - 1 ? budget : peak - 1, fewer, -1, &f2);
		/* over the budget only from a start over it, and never further over */
		if ((p2 > budget && p2 >= peak) || f2 - f > th) {
			keep[v] = was;
			continue;
		}
		peak = sel_commit(&w, keep, &f);
		if (peak <= budget && f < best_f) {
			best_peak = peak, best_f = f;
			memcpy(best, keep, (size_t)P->n);
		}
	}
	memcpy(keep, best, (size_t)P->n);
	free(best);
	free(c.c);
	sel_work_free(&w);
	return greedy_result((Outcome){best_f < INT64_MAX, best_peak, best_f});
}

SelResult sel_improve(const SelProblem *P, int64_t budget, uint8_t *keep, const int *stop)
{
	Work w;
	sel_work_init(&w, P);
	w.stop = stop;
	Cands c = candidates_of(P);
	Outcome o = greedy_keep(&w, &c, budget, P->threads > 1, false, c.nc > SEL_LAZY, keep);
	if (o.fits)
		o = polish(&w, &c, budget, keep);
	free(c.c);
	sel_work_free(&w);
	return greedy_result(o);
}

/* a move from a fit (swaps, refill) on a Work of its own over every candidate */
static SelResult on_own_work(const SelProblem *P, int64_t budget, int64_t work, uint8_t *keep,
                             Outcome (*move)(Work *, const Cands *, int64_t, uint8_t *, int64_t))
{
	Work w;
	sel_work_init(&w, P);
	Cands c = candidates_of(P);
	Outcome o = move(&w, &c, budget, keep, work);
	free(c.c);
	sel_work_free(&w);
	return greedy_result(o);
}

SelResult sel_swaps(const SelProblem *P, int64_t budget, int64_t work, uint8_t *keep)
{
	return on_own_work(P, budget, work, keep, swaps);
}

SelResult sel_refill(const SelProblem *P, int64_t budget, int64_t work, uint8_t *keep)
{
	return on_own_work(P, budget, work, keep, refill);
}

/* the forward's narrowest cuts: cross[t], the values (not fixed) defined
 * at or before t and read after it; the positions up to *end that the
 * fewest cross, the least count that at least 16 positions reach */
static int narrowest(const SelProblem *P, int *cross, int *end)
{
	int e = 0;
	for (int v = 0; v < P->n; v++)
		if (P->kind[v] != SEL_FIXED && P->fwd_last[v] > e)
			e = P->fwd_last[v];
	memset(cross, 0, sizeof(int) * (size_t)(e + 1));
	for (int v = 0; v < P->n; v++)
		if (P->kind[v] != SEL_FIXED && P->fwd_last[v] > P->def[v])
			cross[P->def[v]]++, cross[P->fwd_last[v]]--;
	int *count = calloc((size_t)P->n + 2, sizeof(int)), q = 0;
	for (int t = 0, run = 0; t < e; t++) {
		run += cross[t];
		cross[t] = run;
		count[run]++;
	}
	for (int c = 1, seen = 0; c <= P->n && !q; c++)
		if ((seen += count[c]) >= 16)
			q = c;
	free(count);
	*end = e;
	return q;
}

/* whether v, defined at def and read in the forward until fwd_last, crosses
 * one of the cuts counted in cut[] (cut[t]: those at or before t) */
static bool crosses(const SelProblem *P, const int *cut, int v)
{
	int from = P->def[v], to = P->fwd_last[v];
	return to > from && cut[to - 1] > (from ? cut[from - 1] : 0);
}

int64_t sel_tiny_below(const SelProblem *P)
{
	int64_t largest = 0;
	for (int v = 0; v < P->n; v++)
		largest = P->kind[v] != SEL_FIXED && P->bytes[v] > largest ? P->bytes[v] : largest;
	return largest / SEL_TINY;
}

void sel_chain_start(const SelProblem *P, int every, int inner, bool tiny, uint8_t *keep)
{
	int *cross = malloc(sizeof(int) * (size_t)(P->npos + 1)), end;
	int q = narrowest(P, cross, &end);
	/* cut[t]: the kept cuts at or before t */
	int *cut = malloc(sizeof(int) * (size_t)(P->npos + 1) * 2), *cut2 = cut + P->npos + 1;
	for (int t = 0, i = 0, n = 0, n2 = 0; t < P->npos; t++) {
		if (t < end && cross[t] >= 1 && cross[t] <= q) {
			n += i % every == every - 1;
			n2 += inner && i % inner == inner - 1;
			i++;
		}
		cut[t] = n, cut2[t] = n2;
	}
	int64_t below = tiny ? sel_tiny_below(P) : 0;
	for (int v = 0; v < P->n; v++)
		if (P->kind[v] != SEL_FIXED)
			keep[v] = crosses(P, cut, v) || P->bytes[v] < below ? SEL_KEEP
			          : crosses(P, cut2, v)                  ? SEL_ONCE
			                                                 : SEL_EACH;
	free(cut);
	free(cross);
}

/* A descent by pairs for the peak: a kept value computed once instead
 * while another, not kept, is kept instead, where that lowers the peak (the
 * same bytes held across another stretch); passes while one helps. */
static int64_t pair_lower(Work *w, const Cands *c, uint8_t *keep, int64_t peak, int64_t *f, int64_t limit)
{
	bool moved = true;
	while (moved) {
		moved = false;
		for (int i = 0; i < c->nc && !moved && w->evals <= limit; i++) {
			int u = c->c[i];
			if (keep[u] != SEL_KEEP)
				continue;
			keep[u] = SEL_ONCE;
			for (int j = 0; j < c->nc && !moved; j++) {
				int v = c->c[j];
				uint8_t was = keep[v];
				if (v == u || was == SEL_KEEP)
					continue;
				keep[v] = SEL_KEEP;
				int64_t f2, p2 = sel_eval_under(w, keep, peak - 1, INT64_MAX, peak - 1, &f2);
				if (p2 < peak)
					peak = p2, *f = f2, moved = true, sel_commit(w, keep, &f2);
				else
					keep[v] = was;
			}
			if (!moved)
				keep[u] = SEL_KEEP;
		}
	}
	return peak;
}

SelResult sel_blocks(const SelProblem *P, uint8_t *keep)
{
	Work w;
	sel_work_init(&w, P);
	Cands c = candidates_of(P);
	uint8_t *try = malloc((size_t)P->n + 1);
	int64_t f, peak = sel_commit(&w, keep, &f);
	/* its work limit, in evaluations: SEL_BLOCKS values and positions visited (the samples take some 15
	 * million; the imported ResNet-152's straight line, 412 candidates, took 8 billion, 13 s, for 1.4% lower) */
	int64_t limit = SEL_BLOCKS / (P->n + P->npos + 1);
	for (int len = 32; len <= 64 && w.evals <= limit; len *= 2)
		for (int s = 0; s < P->n && w.evals <= limit; s += len / 2) {
			memcpy(try, keep, (size_t)P->n);
			bool any = false;
			for (int u = s; u < s + len && u < P->n; u++)
				if (P->kind[u] != SEL_FIXED && try[u] == SEL_ONCE)
					try[u] = SEL_EACH, any = true;
			if (!any)
				continue;
			/* for the peak alone first: a descent that also saves FLOPs undoes the block at once */
			int64_t f2, p2 = descend(&w, &c, 4, false, try, &f2);
			p2 = pair_lower(&w, &c, try, p2, &f2, limit);
			p2 = descend(&w, &c, 4, true, try, &f2);
			if (p2 < peak || (p2 == peak && f2 < f)) {
				peak = p2, f = f2;
				memcpy(keep, try, (size_t)P->n);
			}
			sel_commit(&w, keep, &f2);
		}
	free(try);
	free(c.c);
	sel_work_free(&w);
	return greedy_result((Outcome){true, peak, f});
}
