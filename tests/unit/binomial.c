/* binomial: the checkpoint schedule against the closed form and a
 * brute-force optimum, and every schedule replayed against a model of the
 * state and the slots, so an invalid schedule cannot pass. The replay also
 * counts, for every count of host slots, the copies through the staging row
 * that the runtime makes, against rev_binomial_host. Prints ok / not ok. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/revolve.h"
#include "check.h"

#define NMAX 80
#define SMAX 8
#define KMAX 5 /* taped actions of up to k steps */

static int64_t best[KMAX + 1][NMAX + 1][SMAX + 1];
/* the same when a free forward sweep may save into the slots: the
 * rightmost n - m steps with one slot fewer, then the first m with all */
static int64_t best_sweep[KMAX + 1][NMAX + 1][SMAX + 1];

/* the fewest advances to reverse n steps with s slots and taped actions of
 * up to k steps, by exhaustive split */
static void brute_force(void)
{
	for (int k = 1; k <= KMAX; k++)
		for (int s = 1; s <= SMAX; s++)
			for (int n = 1; n <= NMAX; n++) {
				int64_t b = INT64_MAX;
				if (n <= k)
					b = 0;
				else if (s == 1)
					b = (n - k) + best[k][n - k][1]; /* advance to the last k, tape them, repeat */
				else
					for (int m = 1; m < n; m++) {
						int64_t c = m + best[k][n - m][s - 1] + best[k][m][s];
						if (c < b)
							b = c;
					}
				best[k][n][s] = b;
			}
	for (int k = 1; k <= KMAX; k++)
		for (int s = 1; s <= SMAX; s++)
			for (int n = 1; n <= NMAX; n++) {
				if (n <= k || s == 1) {
					best_sweep[k][n][s] = best[k][n][s];
					continue;
				}
				int64_t b = INT64_MAX;
				for (int m = 1; m < n; m++) {
					int64_t c = best_sweep[k][n - m][s - 1] + best[k][m][s];
					if (c < b)
						b = c;
				}
				best_sweep[k][n][s] = b;
			}
}

typedef struct {
	int64_t n, s, k, current, advances, next_taped, *slot_state;
	int max_slot;
	const char *error;
	/* per host slot count h in 0..s: saves into slots below h, fetches of
	 * them, and the slot the staging row holds */
	int64_t *hsave, *hfetch, *held;
} Replay;

static void replay(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	Replay *r = ctx;
	if (r->error)
		return;
	if (a != REV_UNTAPE && (slot < 0 || slot >= r->s)) {
		r->error = "slot out of range";
		return;
	}
	if (a != REV_UNTAPE && slot > r->max_slot)
		r->max_slot = slot;
	switch (a) {
	case REV_ADVANCE:
		if (r->current != step || to <= step)
			r->error = "advance from a state that is not current";
		r->advances += to - step;
		r->current = to;
		break;
	case REV_SAVE:
		if (r->current != step)
			r->error = "save of a state that is not current";
		r->slot_state[slot] = step;
		for (int h = slot + 1; h <= r->s; h++)
			r->hsave[h]++, r->held[h] = slot;
		break;
	case REV_RESTORE:
		if (r->slot_state[slot] != step)
			r->error = "restore of a slot that does not hold that state";
		r->current = step;
		for (int h = slot + 1; h <= r->s; h++)
			if (r->held[h] != slot)
				r->hfetch[h]++, r->held[h] = slot;
		break;
	case REV_TAPED:
		if (r->current != step || to - 1 != r->next_taped || to <= step || to - step > r->k)
			r->error = "taped steps out of order, from the wrong state or more than k";
		r->next_taped = step - 1;
		r->current = -1; /* the taped steps run on, and their adjoints leave no state current */
		break;
	case REV_UNTAPE:
		/* the forward loop's tail: first, at the end, at most k steps */
		if (r->next_taped != r->n - 1 || to != r->n || to <= step || to - step > r->k || r->advances)
			r->error = "forward-taped steps not the first action, not the last steps or more than k";
		r->next_taped = step - 1;
		break;
	}
}


static void run(int64_t n, int s, int64_t k, bool against_brute)
{
	Replay r = {n, s, k, 0, 0, n - 1, calloc((size_t)s, sizeof(int64_t)), 0, NULL, calloc((size_t)s + 1, sizeof(int64_t)),
	            calloc((size_t)s + 1, sizeof(int64_t)), calloc((size_t)s + 1, sizeof(int64_t))};
	for (int i = 0; i < s; i++)
		r.slot_state[i] = -1;
	r.slot_state[0] = 0;
	/* the initial state's save into slot 0 */
	for (int h = 1; h <= s; h++)
		r.hsave[h] = 1;
	rev_binomial_schedule(n, s, k, replay, &r);
	char what[200];
	snprintf(what, sizeof what, "n=%lld s=%d k=%lld: %s, %lld advances, formula %lld", (long long)n, s, (long long)k,
	         r.error ? r.error : "valid", (long long)r.advances, (long long)rev_tape_cost(n, s, k));
	check(!r.error && r.next_taped == -1 && r.advances == rev_tape_cost(n, s, k), what);
	if (k == 1)
		check(rev_binomial_cost(n, s) == rev_tape_cost(n, s, 1), what);
	if (against_brute)
		check(best[k][n][s] == rev_tape_cost(n, s, k), what);
	for (int h = 0; h <= s && k == 1; h++) {
		int64_t saves, fetches;
		rev_binomial_host(n, s, h, &saves, &fetches);
		snprintf(what, sizeof what, "n=%lld s=%d, %d in host memory: replay %lld saves %lld fetches, "
		         "rev_binomial_host %lld %lld", (long long)n, s, h, (long long)r.hsave[h], (long long)r.hfetch[h],
		         (long long)saves, (long long)fetches);
		check(saves == r.hsave[h] && fetches == r.hfetch[h], what);
	}
	free(r.slot_state);
	free(r.hsave);
	free(r.hfetch);
	free(r.held);
}

/* The sweep schedule: the forward sweep's saves made, and with a tail its
 * last steps taped, no state current; valid, every step taped once in
 * reverse, its advances as counted, and against the brute-force optimum
 * with free sweep saves. With the forward loop taping its last j <= k steps
 * a schedule recomputes (n - j) + best_sweep(n - j) steps: the tail
 * min(n, k) must be the best j. */
static void run_sweep(int64_t n, int s, int64_t k, int64_t tail, bool against_brute)
{
	Replay r = {n, s, k, -1, 0, n - 1, calloc((size_t)s, sizeof(int64_t)), 0, NULL, calloc((size_t)s + 1, sizeof(int64_t)),
	            calloc((size_t)s + 1, sizeof(int64_t)), calloc((size_t)s + 1, sizeof(int64_t))};
	int64_t *len = calloc((size_t)s, sizeof(int64_t)), used = rev_sweep_segments(n - tail, s, k, len), at = 0, total = 0;
	for (int i = 0; i < s; i++)
		r.slot_state[i] = -1;
	for (int64_t i = 0; i < used; i++) {
		r.slot_state[i] = at;
		at += len[i];
		total += len[i] >= 1;
	}
	rev_sweep_schedule(n, s, k, tail, replay, &r);
	int64_t best = INT64_MAX, cost = rev_sweep_cost(n, s, k, tail);
	for (int64_t j = 0; against_brute && j <= (tail ? k : 0) && j <= n; j++) {
		int64_t c = n - j + (j < n ? best_sweep[k][n - j][s] : 0);
		best = c < best ? c : best;
	}
	char what[260];
	snprintf(what, sizeof what, "sweep n=%lld s=%d k=%lld tail=%lld: %s, %lld segments over %lld steps, %lld advances, "
	         "counted %lld, optimum %lld", (long long)n, s, (long long)k, (long long)tail, r.error ? r.error : "valid",
	         (long long)used, (long long)at, (long long)r.advances, (long long)cost, against_brute ? (long long)best : -1LL);
	check(!r.error && r.next_taped == -1 && at == n - tail && total == used && r.advances == cost, what);
	if (against_brute)
		check(best == cost + n - tail, what);
	free(len);
	free(r.slot_state);
	free(r.hsave);
	free(r.hfetch);
	free(r.held);
}

/* Pooled rows: the replay keeps the slots as a stack (slot 0 the initial
 * state's; slots from 1 up in rows k - 1 down) and checks that a taped
 * action's rows 0..j-1, and the forward loop's tail, stay below the rows
 * the held slots take; that each save and restore holds the step it
 * claims; that every adjoint runs once, last first; and that the forward
 * steps the schedule runs are the plan's cost. */
typedef struct {
	int64_t n, k, cur, held, next, steps;
	int64_t slot[80];
	bool error;
} Pool;

static void pool_rows(Pool *x, int64_t a, int64_t b)
{
	if (b - a > x->k - (x->held - 1))
		x->error = true;
	for (int64_t i = b - 1; i >= a; i--)
		x->error |= i != x->next--;
}

static void pool_replay(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	Pool *x = ctx;
	switch (a) {
	case REV_ADVANCE:
		x->error |= x->cur != step;
		x->cur = to, x->steps += to - step;
		break;
	case REV_SAVE:
		x->error |= x->cur != step || slot != x->held || slot >= 80;
		if (slot < 80)
			x->slot[slot] = step;
		x->held = slot + 1;
		break;
	case REV_RESTORE:
		x->error |= slot >= x->held || x->slot[slot] != step;
		x->held = slot + 1, x->cur = step;
		break;
	case REV_TAPED:
		x->error |= x->cur != step;
		x->steps += to - step;
		pool_rows(x, step, to);
		x->cur = -1;
		break;
	case REV_UNTAPE:
		x->error |= to != x->n;
		pool_rows(x, step, to);
		break;
	}
}

/* the least forward steps beyond the first n, by a plain recursion over
 * (steps, slots held), for the plan to equal */
static int64_t pool_best(int64_t m, int64_t d, int64_t k, bool top, int64_t memo[2][41][8])
{
	int64_t rows = k - (d - 1), *at = &memo[top][m][d];
	if (m == 0)
		return 0;
	if (m <= rows)
		return m;
	if (*at >= 0)
		return *at;
	int64_t best = INT64_MAX / 4;
	for (int64_t j = 1; j < m && rows >= 0; j++) {
		int64_t left = pool_best(j, d, k, false, memo);
		if (d + 1 <= k + 1) {
			int64_t c = j + pool_best(m - j, d + 1, k, top, memo) + left;
			best = c < best ? c : best;
		}
		if (m - j <= rows && m + left < best)
			best = m + left;
	}
	return *at = best;
}

static void run_pool(int64_t n, int64_t k)
{
	RevPool *pl = rev_pool_plan(n, k);
	char what[200];
	snprintf(what, sizeof what, "pool n %lld k %lld", (long long)n, (long long)k);
	if (!pl) {
		check(false, what);
		return;
	}
	int64_t starts[80], len[80], tail;
	int64_t c = rev_pool_chain(pl, starts, len, &tail);
	Pool x = {n, k, -1, c, n - 1, n, {0}, false};
	/* the forward loop saved the chain's starts and taped the tail behind the held slots' rows */
	for (int64_t i = 0; i < c; i++)
		x.slot[i] = starts[i];
	x.error |= c > 0 && starts[0] != 0;
	rev_pool_schedule(pl, pool_replay, &x);
	int64_t memo[2][41][8];
	for (int t = 0; t < 2; t++)
		for (int m = 0; m <= 40; m++)
			for (int d = 0; d < 8; d++)
				memo[t][m][d] = -1;
	int64_t best = n <= 40 && k <= 6 ? pool_best(n, 1, k, true, memo) : x.steps;
	snprintf(what, sizeof what, "pool n %lld k %lld: valid %d, adjoints left %lld, steps %lld, cost %lld, least %lld",
	         (long long)n, (long long)k, !x.error, (long long)(x.next + 1), (long long)x.steps, (long long)pl->cost,
	         (long long)best);
	check(!x.error && x.next == -1 && x.steps - n == pl->cost && x.steps == best, what);
	rev_pool_free(pl);
}

int main(void)
{
	group = "binomial";
	int pool_before = pass, pool_failed = fail;
	for (int64_t k = 1; k <= 6; k++)
		for (int64_t n = 1; n <= 40; n++)
			run_pool(n, k);
	run_pool(1024, 24);
	run_pool(1000, 7);
	if (fail == pool_failed)
		printf("ok - binomial: pooled rows: schedules valid (slots as a stack, rows below the held slots' rows), "
		       "their steps the plan's cost and, for n <= 40, k <= 6, the least a plain recursion finds (%d checks)\n",
		       pass - pool_before);
	brute_force();
	for (int k = 1; k <= KMAX; k++)
		for (int s = 1; s <= SMAX; s++)
			for (int n = 1; n <= NMAX; n++) {
				run(n, s, k, true);
				run_sweep(n, s, k, 0, true);
				run_sweep(n, s, k, rev_sweep_tail(n, k), true);
			}
	if (!fail)
		printf("ok - binomial: schedules (and sweep schedules, with and without a forward-taped tail) valid and optimal with "
		       "taped actions of up to k steps, "
		       "and host-slot copies as counted, for n <= %d, s <= %d, k <= %d (%d checks)\n", NMAX, SMAX, KMAX, pass);
	int before = pass, failed = fail;
	static const int64_t big[] = {1000, 10000, 100000, 1000000};
	static const int slots[] = {2, 3, 5, 10, 20};
	for (size_t i = 0; i < sizeof big / sizeof *big; i++)
		for (size_t j = 0; j < sizeof slots / sizeof *slots; j++)
			for (int64_t k = 1; k <= 64; k *= 8)
				run(big[i], slots[j], k, false), run_sweep(big[i], slots[j], k, 0, false),
					run_sweep(big[i], slots[j], k, k, false);
	if (fail == failed)
		printf("ok - binomial: generated schedules for n up to 10^6 match r n - k C(s + r, r - 1) (sweep schedules their "
		       "segments' sum), host-slot copies as counted (%d checks)\n", pass - before);
	return fail != 0;
}
