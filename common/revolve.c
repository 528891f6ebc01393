/* rev: the binomial schedule, with taped actions of up to k steps. The
 * split that keeps every recursion optimal is
 * m = clamp(k C(s + r - 2, s), n - k C(s + r - 1, s - 1), n - 1): the right
 * part never needs more than s - 1 slots can do in r sweeps, and the left
 * part is as long as that allows (tests/unit/binomial.c checks it against a
 * brute-force optimum). With k = 1 it is revolve's. */
#include <stdlib.h>

#include "revolve.h"

/* C(n, k), saturating at INT64_MAX */
static int64_t choose(int64_t n, int64_t k)
{
	if (k < 0 || k > n)
		return 0;
	if (k > n - k)
		k = n - k;
	int64_t c = 1;
	for (int64_t i = 1; i <= k; i++) {
		int64_t num = n - k + i;
		if (c > INT64_MAX / num)
			return INT64_MAX;
		c = c * num / i; /* exact: c * num is divisible by i here */
	}
	return c;
}

/* k c, saturating */
static int64_t times(int64_t k, int64_t c)
{
	return c > INT64_MAX / k ? INT64_MAX : k * c;
}

/* the least t >= 0 with k (C(s + t + e, s) - e) >= n, e 0 or 1: the left
 * side grows with t, so by doubling and halving (with one slot t is about
 * n / k, too many to step through) */
static int64_t least(int64_t n, int64_t s, int64_t k, int64_t e)
{
	int64_t lo = 0, hi = 1;
	while (times(k, choose(s + hi + e, s) - e) < n)
		lo = hi, hi *= 2;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (times(k, choose(s + mid + e, s) - e) >= n)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int64_t rev_tape_r(int64_t n, int64_t s, int64_t k)
{
	return least(n, s, k, 0);
}

int64_t rev_tape_cost(int64_t n, int64_t s, int64_t k)
{
	int64_t r = rev_tape_r(n, s, k);
	if (r == 0)
		return 0;
	/* r n, saturating: with one slot it is about n^2 / k */
	return r > INT64_MAX / n ? INT64_MAX : r * n - times(k, choose(s + r, r - 1));
}

int64_t rev_binomial_r(int64_t n, int64_t s) { return rev_tape_r(n, s, 1); }
int64_t rev_binomial_cost(int64_t n, int64_t s) { return rev_tape_cost(n, s, 1); }

typedef struct {
	RevEmit emit;
	void *ctx;
	int64_t k;
} Gen;

/* Where a reversal of n > k steps with s > 1 slots saves its second slot. */
static int64_t split(int64_t n, int64_t s, int64_t k)
{
	int64_t r = rev_tape_r(n, s, k);
	int64_t m = r >= 2 ? times(k, choose(s + r - 2, s)) : 0, lo = n - times(k, choose(s + r - 1, s - 1));
	if (m < lo)
		m = lo;
	if (m < 1)
		m = 1;
	if (m > n - 1)
		m = n - 1;
	return m;
}

/* Reverses steps [a, b): the state at a is current and held in `slot`;
 * s slots, that one included, are the recursion's to use. */
static void reverse(Gen *g, int64_t a, int64_t b, int64_t s, int slot)
{
	int64_t n = b - a;
	if (n <= g->k) {
		g->emit(g->ctx, REV_TAPED, a, b, slot);
		return;
	}
	if (s == 1) {
		for (int64_t e = b; e > a;) {
			int64_t i = e - g->k > a ? e - g->k : a;
			if (e != b)
				g->emit(g->ctx, REV_RESTORE, a, a, slot);
			if (i > a)
				g->emit(g->ctx, REV_ADVANCE, a, i, slot);
			g->emit(g->ctx, REV_TAPED, i, e, slot);
			e = i;
		}
		return;
	}
	int64_t m = split(n, s, g->k);
	g->emit(g->ctx, REV_ADVANCE, a, a + m, slot);
	g->emit(g->ctx, REV_SAVE, a + m, a + m, slot + 1);
	reverse(g, a + m, b, s - 1, slot + 1);
	g->emit(g->ctx, REV_RESTORE, a, a, slot);
	reverse(g, a, a + m, s, slot);
}

void rev_binomial_schedule(int64_t n, int64_t s, int64_t k, RevEmit emit, void *ctx)
{
	Gen g = {emit, ctx, k};
	if (n > 0 && s > 0 && k > 0)
		reverse(&g, 0, n, s, 0);
}

int64_t rev_sweep_segments(int64_t n, int64_t s, int64_t k, int64_t *len)
{
	/* the least t with sum over segments of k C(s_i + t, s_i) = k (C(s + t + 1, s) - 1) >= n */
	int64_t t = least(n, s, k, 1);
	int64_t left = n;
	for (int64_t i = 0; i < s; i++) {
		len[i] = t ? times(k, choose(s - i + t - 1, s - i)) : 0; /* each step costing t - 1 advances or fewer */
		left -= len[i];
	}
	/* then steps costing t, from the left: segment i takes at most k C(s_i + t - 1, s_i - 1) of them */
	for (int64_t i = 0; i < s && left > 0; i++) {
		int64_t more = times(k, choose(s - i + t - 1, s - i - 1));
		if (more > left)
			more = left;
		len[i] += more;
		left -= more;
	}
	/* the lengths fall from the left: the segments in use come first */
	int64_t used = 0;
	while (used < s && len[used] > 0)
		used++;
	return used;
}

/* the segments' lengths, malloc'd (free them), and how many in *used; NULL when none */
static int64_t *segments(int64_t n, int64_t s, int64_t k, int64_t *used)
{
	*used = 0;
	if (n <= 0 || s <= 0 || k <= 0)
		return NULL;
	int64_t *len = malloc(sizeof(int64_t) * (size_t)(s + 1));
	if (len)
		*used = rev_sweep_segments(n, s, k, len);
	return len;
}

int64_t rev_sweep_tail(int64_t n, int64_t ktape) { return ktape < n ? ktape : n; }

int64_t rev_sweep_cost(int64_t n, int64_t s, int64_t k, int64_t tail)
{
	int64_t used, *len = segments(n - tail, s, k, &used), cost = 0;
	for (int64_t i = 0; i < used; i++) {
		int64_t c = rev_tape_cost(len[i], s - i, k);
		cost = rev_sat_add(cost, c);
	}
	free(len);
	return cost;
}

void rev_sweep_schedule(int64_t n, int64_t s, int64_t k, int64_t tail, RevEmit emit, void *ctx)
{
	if (tail > 0)
		emit(ctx, REV_UNTAPE, n - tail, n, -1);
	int64_t used, *len = segments(n - tail, s, k, &used);
	Gen g = {emit, ctx, k};
	int64_t a = n - tail;
	for (int64_t i = used - 1; i >= 0; i--) {
		a -= len[i];
		emit(ctx, REV_RESTORE, a, a, (int)i);
		reverse(&g, a, a + len[i], s - i, (int)i);
	}
	free(len);
}

void rev_schedule(int64_t n, int64_t s, int64_t k, bool sweep, int64_t tail, RevEmit emit, void *ctx)
{
	if (sweep)
		rev_sweep_schedule(n, s, k, tail, emit, ctx);
	else
		rev_binomial_schedule(n, s, k, emit, ctx);
}

/* the replays of a schedule: each taped run of m steps replays 0 + 1 + ... + (m - 1) */
static void count_replays(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	(void)slot;
	int64_t m = to - step, *n = ctx;
	if (a == REV_TAPED || a == REV_UNTAPE)
		*n = rev_sat_add(*n, m % 2 ? rev_sat_mul(m, (m - 1) / 2) : rev_sat_mul(m / 2, m - 1));
}

/* the walks are short (a replayed loop has at most a few thousand steps), but a fit asks for the same
 * shapes thousands of times: the last answers, per thread */
enum { REPLAY_MEMO = 1024 };

int64_t rev_replays(int64_t n, int64_t s, int64_t k, bool sweep, int64_t tail)
{
	static _Thread_local struct {
		int64_t n, s, k, tail, count;
		bool sweep, set;
	} memo[REPLAY_MEMO];
	uint64_t h = (uint64_t)n * 0x9e3779b97f4a7c15ull ^ (uint64_t)s * 0xc2b2ae3d27d4eb4full ^ (uint64_t)k * 0x165667b19e3779f9ull ^
	             (uint64_t)tail * 31 ^ (uint64_t)sweep;
	int at = (int)((h >> 20) % REPLAY_MEMO);
	if (memo[at].set && memo[at].n == n && memo[at].s == s && memo[at].k == k && memo[at].tail == tail && memo[at].sweep == sweep)
		return memo[at].count;
	int64_t count = 0;
	rev_schedule(n, s, k, sweep, tail, count_replays, &count);
	memo[at].n = n, memo[at].s = s, memo[at].k = k, memo[at].tail = tail, memo[at].sweep = sweep;
	memo[at].count = count, memo[at].set = true;
	return count;
}

/* reverse() without the steps, following only the slots below nhost and the
 * staging row their copies pass through, which holds the host slot last
 * saved or fetched: a restore of that slot needs no copy. Slots only grow
 * down the recursion, so a call at slot nhost or above copies nothing, and
 * the walk stays far smaller than the schedule. */
typedef struct {
	int64_t nhost, held, saves, fetches;
} HostWalk;

static void host_restore(HostWalk *w, int64_t slot)
{
	if (w->held != slot)
		w->fetches++, w->held = slot;
}

static void host_walk(HostWalk *w, int64_t n, int64_t s, int64_t slot)
{
	while (slot < w->nhost && n > 1) {
		if (s == 1) {
			host_restore(w, slot);
			return;
		}
		int64_t m = split(n, s, 1);
		if (slot + 1 < w->nhost)
			w->saves++, w->held = slot + 1;
		host_walk(w, n - m, s - 1, slot + 1);
		host_restore(w, slot);
		n = m;
	}
}

void rev_binomial_host(int64_t n, int64_t s, int64_t nhost, int64_t *saves, int64_t *fetches)
{
	HostWalk w = {nhost, -1, 0, 0};
	if (n > 0 && s > 0 && nhost > 0) {
		w.saves = 1, w.held = 0;
		host_walk(&w, n, s, 0);
	}
	*saves = w.saves;
	*fetches = w.fetches;
}

/* ---- pooled rows: snapshots beyond slot 0 in the carried tapes' rows ---- */

enum { POOL_TAPE = -1 };

static int32_t *pool_at(int32_t *t, int64_t n, int64_t d, int64_t m) { return &t[d * (n + 1) + m]; }

RevPool *rev_pool_plan(int64_t n, int64_t k)
{
	if (n < 1 || k < 1 || (double)n * (double)n * (double)(k + 1) > (double)(1 << 27))
		return NULL;
	int64_t D = k + 1, cells = (D + 2) * (n + 1);
	RevPool *pl = calloc(1, sizeof *pl);
	int64_t *R = malloc(sizeof(int64_t) * (size_t)cells), *T = malloc(sizeof(int64_t) * (size_t)cells);
	int32_t *c = malloc(sizeof(int32_t) * (size_t)(2 * cells));
	if (!pl || !R || !T || !c) {
		free(pl), free(R), free(T), free(c);
		return NULL;
	}
	pl->n = n, pl->k = k, pl->choice = c;
	int32_t *rc = c, *tc = c + cells;
	const int64_t inf = INT64_MAX / 4;
	for (int64_t d = D + 1; d >= 1; d--) {
		int64_t rows = k - (d - 1); /* slots 1 .. d - 1 hold rows k - 1 .. k - d + 1 */
		R[d * (n + 1)] = T[d * (n + 1)] = 0;
		for (int64_t m = 1; m <= n; m++) {
			int64_t best = inf, top = inf;
			int32_t bc = POOL_TAPE, tcc = POOL_TAPE;
			if (m <= rows) {
				best = top = m;
			} else if (rows >= 0) {
				for (int64_t j = 1; j < m; j++) {
					int64_t left = R[d * (n + 1) + j];
					if (d + 1 <= D) {
						int64_t a = j + R[(d + 1) * (n + 1) + m - j] + left, b = j + T[(d + 1) * (n + 1) + m - j] + left;
						if (a < best)
							best = a, bc = (int32_t)(j << 1);
						if (b < top)
							top = b, tcc = (int32_t)(j << 1);
					}
					if (m - j <= rows && m + left < best)
						best = m + left, bc = (int32_t)(j << 1 | 1);
					if (m - j <= rows && m + left < top)
						top = m + left, tcc = (int32_t)(j << 1 | 1);
				}
			}
			R[d * (n + 1) + m] = best > inf ? inf : best;
			T[d * (n + 1) + m] = top > inf ? inf : top;
			*pool_at(rc, n, d, m) = bc;
			*pool_at(tc, n, d, m) = tcc;
		}
	}
	pl->cost = T[n + 1 + n] >= inf ? INT64_MAX : T[n + 1 + n] - n;
	free(R);
	free(T);
	int64_t *starts = malloc(sizeof(int64_t) * (size_t)(k + 2)), *len = malloc(sizeof(int64_t) * (size_t)(k + 2));
	if (starts && len)
		rev_pool_chain(pl, starts, len, &pl->tail);
	free(starts);
	free(len);
	return pl;
}

void rev_pool_free(RevPool *pl)
{
	if (pl)
		free(pl->choice);
	free(pl);
}

int64_t rev_pool_cells(int64_t n, int64_t k) { return 2 * (k + 3) * (n + 1); }

/* Reverses steps [a, a + m) from the state at a, current and held in slot d - 1 */
static void pool_reverse(const RevPool *pl, Gen *g, int64_t a, int64_t m, int64_t d)
{
	int32_t *rc = pl->choice;
	while (m > 0) {
		int32_t c = *pool_at(rc, pl->n, d, m);
		if (c == POOL_TAPE) {
			g->emit(g->ctx, REV_TAPED, a, a + m, (int)(d - 1));
			return;
		}
		int64_t j = c >> 1;
		g->emit(g->ctx, REV_ADVANCE, a, a + j, (int)(d - 1));
		if (c & 1) {
			g->emit(g->ctx, REV_TAPED, a + j, a + m, (int)(d - 1));
		} else {
			g->emit(g->ctx, REV_SAVE, a + j, a + j, (int)d);
			pool_reverse(pl, g, a + j, m - j, d + 1);
		}
		g->emit(g->ctx, REV_RESTORE, a, a, (int)(d - 1));
		m = j;
	}
}

int64_t rev_pool_chain(const RevPool *pl, int64_t *starts, int64_t *len, int64_t *tail)
{
	int32_t *tc = pl->choice + (pl->k + 3) * (pl->n + 1);
	int64_t a = 0, d = 1, c = 0;
	*tail = 0;
	while (a < pl->n) {
		int64_t m = pl->n - a;
		int32_t x = *pool_at(tc, pl->n, d, m);
		if (x == POOL_TAPE) {
			*tail = m;
			break;
		}
		starts[c] = a, len[c] = x >> 1, c++;
		if (x & 1) {
			*tail = m - (x >> 1);
			break;
		}
		a += x >> 1, d++;
	}
	return c;
}

void rev_pool_schedule(const RevPool *pl, RevEmit emit, void *ctx)
{
	int64_t *starts = malloc(sizeof(int64_t) * (size_t)(pl->k + 2)), *len = malloc(sizeof(int64_t) * (size_t)(pl->k + 2)), tail;
	if (!starts || !len) {
		free(starts), free(len);
		return;
	}
	int64_t c = rev_pool_chain(pl, starts, len, &tail);
	Gen g = {emit, ctx, 0};
	if (tail > 0)
		emit(ctx, REV_UNTAPE, pl->n - tail, pl->n, -1);
	for (int64_t i = c - 1; i >= 0; i--) {
		emit(ctx, REV_RESTORE, starts[i], starts[i], (int)i);
		pool_reverse(pl, &g, starts[i], len[i], i + 1);
	}
	free(starts);
	free(len);
}
