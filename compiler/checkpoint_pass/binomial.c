/* ckpt: the binomial schedule, with taped actions of up to k steps. The
 * split that keeps every recursion optimal is
 * m = clamp(k C(s + r - 2, s), n - k C(s + r - 1, s - 1), n - 1): the right
 * part never needs more than s - 1 slots can do in r sweeps, and the left
 * part is as long as that allows (tests/unit/binomial.c checks it against a
 * brute-force optimum). With k = 1 it is revolve's. */
#include <stdlib.h>

#include "ckpt.h"

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

int64_t ckpt_tape_r(int64_t n, int64_t s, int64_t k)
{
	return least(n, s, k, 0);
}

int64_t ckpt_tape_cost(int64_t n, int64_t s, int64_t k)
{
	int64_t r = ckpt_tape_r(n, s, k);
	if (r == 0)
		return 0;
	/* r n, saturating: with one slot it is about n^2 / k */
	return r > INT64_MAX / n ? INT64_MAX : r * n - times(k, choose(s + r, r - 1));
}

int64_t ckpt_binomial_r(int64_t n, int64_t s) { return ckpt_tape_r(n, s, 1); }
int64_t ckpt_binomial_cost(int64_t n, int64_t s) { return ckpt_tape_cost(n, s, 1); }

typedef struct {
	CkptEmit emit;
	void *ctx;
	int64_t k;
} Gen;

/* Where a reversal of n > k steps with s > 1 slots saves its second slot. */
static int64_t split(int64_t n, int64_t s, int64_t k)
{
	int64_t r = ckpt_tape_r(n, s, k);
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
		g->emit(g->ctx, CKPT_TAPED, a, b, slot);
		return;
	}
	if (s == 1) {
		for (int64_t e = b; e > a;) {
			int64_t i = e - g->k > a ? e - g->k : a;
			if (e != b)
				g->emit(g->ctx, CKPT_RESTORE, a, a, slot);
			if (i > a)
				g->emit(g->ctx, CKPT_ADVANCE, a, i, slot);
			g->emit(g->ctx, CKPT_TAPED, i, e, slot);
			e = i;
		}
		return;
	}
	int64_t m = split(n, s, g->k);
	g->emit(g->ctx, CKPT_ADVANCE, a, a + m, slot);
	g->emit(g->ctx, CKPT_SAVE, a + m, a + m, slot + 1);
	reverse(g, a + m, b, s - 1, slot + 1);
	g->emit(g->ctx, CKPT_RESTORE, a, a, slot);
	reverse(g, a, a + m, s, slot);
}

void ckpt_binomial_schedule(int64_t n, int64_t s, int64_t k, CkptEmit emit, void *ctx)
{
	Gen g = {emit, ctx, k};
	if (n > 0 && s > 0 && k > 0)
		reverse(&g, 0, n, s, 0);
}

int64_t ckpt_sweep_segments(int64_t n, int64_t s, int64_t k, int64_t *len)
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
		*used = ckpt_sweep_segments(n, s, k, len);
	return len;
}

int64_t ckpt_sweep_tail(int64_t n, int64_t ktape) { return ktape < n ? ktape : n; }

int64_t ckpt_sweep_cost(int64_t n, int64_t s, int64_t k, int64_t tail)
{
	int64_t used, *len = segments(n - tail, s, k, &used), cost = 0;
	for (int64_t i = 0; i < used; i++) {
		int64_t c = ckpt_tape_cost(len[i], s - i, k);
		cost = c > INT64_MAX - cost ? INT64_MAX : cost + c;
	}
	free(len);
	return cost;
}

void ckpt_sweep_schedule(int64_t n, int64_t s, int64_t k, int64_t tail, CkptEmit emit, void *ctx)
{
	if (tail > 0)
		emit(ctx, CKPT_UNTAPE, n - tail, n, -1);
	int64_t used, *len = segments(n - tail, s, k, &used);
	Gen g = {emit, ctx, k};
	int64_t a = n - tail;
	for (int64_t i = used - 1; i >= 0; i--) {
		a -= len[i];
		emit(ctx, CKPT_RESTORE, a, a, (int)i);
		reverse(&g, a, a + len[i], s - i, (int)i);
	}
	free(len);
}

void ckpt_schedule(int64_t n, int64_t s, int64_t k, bool sweep, int64_t tail, CkptEmit emit, void *ctx)
{
	if (sweep)
		ckpt_sweep_schedule(n, s, k, tail, emit, ctx);
	else
		ckpt_binomial_schedule(n, s, k, emit, ctx);
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

void ckpt_binomial_host(int64_t n, int64_t s, int64_t nhost, int64_t *saves, int64_t *fetches)
{
	HostWalk w = {nhost, -1, 0, 0};
	if (n > 0 && s > 0 && nhost > 0) {
		w.saves = 1, w.held = 0;
		host_walk(&w, n, s, 0);
	}
	*saves = w.saves;
	*fetches = w.fetches;
}
