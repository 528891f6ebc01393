/* select: the optimiser of what the adjoint keeps (compiler/select/),
 * against brute force. On hundreds of random DAGs (random kinds, operands,
 * bytes, FLOPs, uses and base memory) every choice of every candidate and
 * temporary (kept, computed again once, computed again at each use, and
 * for candidates with a host cost, in half the problems, offloaded) is
 * evaluated; then at budgets from the
 * store-everything peak down to below the least peak:
 *   - the exact search gives the fewest FLOPs of any choice that fits, or
 *     says that none fits;
 *   - the greedy search (forced) fits where it says so, never claims a fit
 *     that is not one, and its proven bound is at most the optimum;
 *   - sel_least's floor is at most the least peak of any choice, and its
 *     peak is a real one.
 * Prints ok / not ok lines and the counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/select/select.h"
#include "check.h"

static uint64_t state = 0x9e3779b97f4a7c15ull;
static int rnd(int n)
{
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return (int)(state % (uint64_t)n);
}

/* FNV-1a over n bytes, on from h: a trail of the choices a run of searches made */
static uint64_t fnv(uint64_t h, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* a random problem of n values over positions: forward positions are the
 * values' own, the adjoint's follow */
static SelProblem *random_problem(int n, int nfixed, bool offload, int nadj)
{
	nadj = nadj > 0 ? nadj : 4 + rnd(12);
	int npos = n + nadj;
	SelProblem *P = sel_new(n, npos);
	for (int v = 0; v < n; v++) {
		P->def[v] = v;
		P->fwd_last[v] = v;
		P->bytes[v] = 1 + rnd(100);
		int k = rnd(10);
		P->kind[v] = v < nfixed ? SEL_FIXED : k < 6 ? SEL_CAND : k < 9 ? SEL_TEMP : SEL_FIXED;
		P->flops[v] = rnd(4) == 0 ? 0 : 1 + rnd(60);
		if (v < nfixed)
			continue;
		P->nin[v] = 1 + rnd(3);
		P->in[v] = malloc(sizeof(int) * 3);
		for (int j = 0; j < P->nin[v]; j++) {
			/* mostly the recent values, as in a network */
			int u = rnd(3) ? v - 1 - rnd(v < 4 ? v : 4) : rnd(v);
			P->in[v][j] = u;
			if (P->fwd_last[u] < v)
				P->fwd_last[u] = v;
		}
	}
	for (int v = 0; v < n; v++) {
		if (P->kind[v] != SEL_CAND)
			continue;
		P->adj_first[v] = n + rnd(nadj);
		P->adj_last[v] = P->adj_first[v] + rnd(npos - P->adj_first[v]);
		/* every use listed (sometimes only the first and last) */
		if (rnd(4) == 0 || P->adj_last[v] == P->adj_first[v])
			continue;
		P->adj[v] = malloc(sizeof(int) * 4);
		P->adj[v][P->nadj[v]++] = P->adj_first[v];
		for (int t = P->adj_first[v] + 1; t < P->adj_last[v] && P->nadj[v] < 3; t++)
			if (rnd(3) == 0)
				P->adj[v][P->nadj[v]++] = t;
		P->adj[v][P->nadj[v]++] = P->adj_last[v];
	}
	for (int t = 0; t < npos; t++)
		P->base[t] = rnd(60);
	/* a fetch for an adjoint position issued there or up to two positions before, not before the adjoint */
	for (int t = n + 1; t < npos; t++) {
		int back = rnd(3);
		P->issue[t] = t - back < n ? n : t - back;
	}
	/* in half the problems, some candidates may be offloaded, at a cost below or above their FLOPs */
	for (int v = 0; v < n && offload; v++)
		if (P->kind[v] == SEL_CAND && rnd(3))
			P->host[v] = 1 + rnd(80);
	/* elementwise values that may take an operand's storage; ops' own results; ops that may take a dying
	 * operand's storage: at a forward position (a value's definition) one of its operands, at an adjoint
	 * one a candidate it reads */
	for (int v = nfixed; v < n; v++)
		P->share[v] = rnd(3) ? 0 : (uint32_t)rnd(8);
	for (int t = 0; t < npos; t++) {
		P->own[t] = t < n ? (rnd(2) ? P->bytes[t] : 0) : rnd(40);
		if (rnd(3))
			continue;
		if (t < n && t >= nfixed) {
			int u = P->in[t][rnd(P->nin[t])];
			if (P->kind[u] != SEL_FIXED)
				P->lend[t] = u;
		} else if (t >= n) {
			for (int v = 0; v < n; v++)
				if (P->kind[v] == SEL_CAND && P->adj_first[v] <= t && t <= P->adj_last[v] && rnd(2))
					P->lend[t] = v;
		}
		P->lend_bytes[t] = P->lend[t] >= 0 ? rnd((int)P->own[t] + 1) : 0;
	}
	return P;
}

/* a move (`name`, result r, its choice got[]) from the greedy fit of `greedy` FLOPs: within the budget, as
 * evaluated, no more FLOPs than it started from and no fewer than the optimum `best`; true where at it */
static bool from_greedy(const SelProblem *P, const char *name, SelResult r, const uint8_t *got, int iter,
                        int64_t budget, int64_t greedy, int64_t best)
{
	char what[300];
	int64_t f, pk = sel_eval(P, got, &f, NULL);
	snprintf(what, sizeof what, "problem %d, budget %lld: from the greedy's %lld FLOPs, %s %lld at peak %lld "
	         "(evaluated %lld, %lld); brute force %lld", iter, (long long)budget, (long long)greedy, name,
	         (long long)r.flops, (long long)r.peak, (long long)f, (long long)pk, (long long)best);
	check(r.fits && f == r.flops && pk == r.peak && pk <= budget && r.flops <= greedy && r.flops >= best, what);
	return r.flops == best;
}


/* ---- the chain planner (sel_chain) on a chain of heterogeneous blocks ----
 * Block b has three candidates: m = F(o of block b - 1), costly; c = G(m, that o), cheap; o = H(c, m), cheap,
 * which crosses into block b + 1, so that the narrowest cuts fall after each o. The adjoint takes the blocks
 * last first, two positions each: the first reads m and c, the second the block's input. With a stem, a fourth
 * d = K(m), cheap, read by the first position too, and o = H(d, c); block 1's m, c and d are `stem` quanta
 * each, as a network's first layers outgrow the rest, so that only that block held bare plans at some budgets
 * (all holds m, c and d; lean m beside the largest op; bare what crosses its end). Sizes are multiples
 * of a quantum that the programme's memory step divides, so that its rounding is exact; the test's own
 * recursion over the same block model (the one chain.c's comment gives) with exact bytes must find the same
 * FLOPs, and the plan sel_chain writes, made lazily as graph.c makes it (a value not kept made where first
 * needed, held from its hold position, else made again for each position), must recompute them, less at most
 * what its lean blocks' cheap values cost (one copy may serve two readers at a position). */
enum { CN = 20 };
typedef struct {
	int n;
	int64_t f[CN + 1], xin[CN + 1], abar[3][CN + 1], W[3][CN + 1], T[CN + 1], extra[CN + 1], out[CN + 1], base, budget, room;
	int64_t bare[CN + 1]; /* held bare (what crosses its end only): the rest made at each op that reads it */
	int ways;             /* 2: all and lean; 3: bare too */
	/* the runs s .. j (chain.c's measure_runs), [s][j] */
	int64_t rf[CN + 1][CN + 1], rabar[CN + 1][CN + 1], rout[CN + 1][CN + 1], rextra[CN + 1][CN + 1], rW[CN + 1][CN + 1];
} ChainModel;

static int64_t cmin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cmax64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cadd(int64_t a, int64_t b) { return a == INT64_MAX || b == INT64_MAX ? INT64_MAX : a + b; }

/* the fewest FLOPs reversing blocks s .. t - 1 with `held` bytes held (top: the forward sweep's, free) */
static int64_t chain_best(const ChainModel *c, int s, int t, int64_t held, bool top, int64_t *memo, int64_t q)
{
	int64_t *m = &memo[(((size_t)top * (CN + 1) + (size_t)s) * (CN + 2) + (size_t)t) * 2048 + (size_t)(held / q)];
	if (*m >= 0)
		return *m;
	int64_t best = INT64_MAX;
	for (int lean = 0; lean < c->ways; lean++) {
		/* a leaf's values that cross its end are held already, by the checkpoint that ends its segment */
		if (held + c->W[lean][s] - (t == s + 1 ? c->out[s] : 0) > c->budget)
			continue;
		/* a bare leaf's forward is not run again: what crosses its end is held, the rest made where read */
		int64_t own = (top || (lean == 2 && t == s + 1) ? 0 : c->f[s]) + (lean == 2 ? c->bare[s] : lean ? c->extra[s] : 0);
		if (t == s + 1)
			best = cmin(best, own);
		else if (held + c->abar[lean][s] <= c->room)
			best = cmin(best, cadd(own, chain_best(c, s + 1, t, held + c->abar[lean][s], top, memo, q)));
	}
	/* a run s .. j held lean as one block, alone (a leaf) or before the rest */
	for (int j = s + 1; j < t && j - s < SEL_CHAIN_RUN; j++) {
		bool leaf = j + 1 == t;
		if (held + c->rW[s][j] - (leaf ? c->rout[s][j] : 0) > c->budget)
			continue;
		int64_t own = (top ? 0 : c->rf[s][j]) + c->rextra[s][j];
		if (leaf)
			best = cmin(best, own);
		else if (held + c->rabar[s][j] <= c->room)
			best = cmin(best, cadd(own, chain_best(c, j + 1, t, held + c->rabar[s][j], top, memo, q)));
	}
	int64_t run = 0, most = 0;
	for (int k = s + 1; k < t; k++) {
		run += c->f[k - 1];
		most = c->T[k - 1] > most ? c->T[k - 1] : most;
		if (held + c->xin[k] > c->room || (!top && held + c->xin[k] + most + c->base > c->budget))
			continue;
		best = cmin(best, cadd(top ? 0 : run, cadd(chain_best(c, k, t, held + c->xin[k], top, memo, q),
		                                             chain_best(c, s, k, held, false, memo, q))));
	}
	return *m = best;
}

/* a bare block's value v made at position t: nothing where made there already (at[v] == t), else its FLOPs and
 * those of its operands in the block (positions after lo) that are not held (not[u]), made there too */
static int64_t bare_make(const SelProblem *P, int v, int t, int lo, const bool *not, int *at)
{
	if (at[v] == t)
		return 0;
	at[v] = t;
	int64_t f = P->flops[v];
	for (int k = 0; k < P->nin[v]; k++)
		if (P->def[P->in[v][k]] > lo && not[P->in[v][k]])
			f += bare_make(P, P->in[v][k], t, lo, not, at);
	return f;
}

/* the plan's FLOPs, made lazily: at each adjoint position what it reads, from what is kept or held */
static int64_t chain_sim(const SelProblem *P, int nforward, const uint8_t *keep, const int *hold, int v, int t, int *made,
                         bool *held)
{
	if (P->kind[v] == SEL_FIXED || keep[v] == SEL_KEEP || held[v] || made[v] == t)
		return 0;
	int64_t f = P->flops[v];
	for (int k = 0; k < P->nin[v]; k++)
		f += chain_sim(P, nforward, keep, hold, P->in[v][k], t, made, held);
	made[v] = t;
	held[v] = t >= hold[v];
	return f;
}

/* a chain of n such blocks, sizes in multiples of q, each position's base `base`; then a tail of `tail` tiny
 * temporaries, one a position, each reading only the fixed input (as an imported ResNet's running statistics'
 * updates end its forward) */
static SelProblem *chain_problem_tail(int n, int tail, int64_t q, int64_t base, int stem)
{
	int per = stem ? 4 : 3, nv = 1 + per * n + tail, F = per * n + tail;
	SelProblem *P = sel_new(nv, F + 2 * n);
	P->kind[0] = SEL_FIXED, P->def[0] = 0, P->fwd_last[0] = 0, P->bytes[0] = q;
	for (int b = 0; b < n; b++) {
		int64_t M = q * (1 + rnd(4)), C = q * (1 + rnd(4)), O = q * (1 + rnd(3)), D = q * (1 + rnd(4));
		if (stem && b == 1)
			M = C = D = q * stem;
		int m = 1 + per * b, c = m + 1, d = stem ? m + 2 : -1, o = m + per - 1, in = b ? o - per : 0;
		int qb = F + 2 * (n - 1 - b);
		/* m, c, d (with a stem), o: each one's FLOPs, bytes, operands and last reader in the forward */
		int64_t fl[4] = {1000 * M * (1 + rnd(5)), C / 4, D / 4, O / 4}, by[4] = {M, C, D, O};
		int ins[4][2] = {{in, -1}, {m, in}, {m, -1}, {stem ? d : c, stem ? c : m}};
		int last[4] = {stem ? d : o, o, o, b + 1 < n ? o + 2 : o};
		for (int k = 0; k < 4; k++) {
			if (k == 2 && !stem)
				continue;
			int v = k < 2 ? m + k : k == 2 ? d : o;
			P->kind[v] = SEL_CAND, P->def[v] = v - 1, P->bytes[v] = by[k], P->flops[v] = fl[k];
			P->fwd_last[v] = last[k] - 1;
			P->nin[v] = ins[k][1] < 0 ? 1 : 2;
			P->in[v] = malloc(sizeof(int) * 2);
			memcpy(P->in[v], ins[k], sizeof(int) * (size_t)P->nin[v]);
		}
		P->adj_first[m] = P->adj_last[m] = P->adj_first[c] = P->adj_last[c] = qb;
		if (stem)
			P->adj_first[d] = P->adj_last[d] = qb;
		P->adj_first[o] = P->adj_last[o] = b + 1 < n ? qb - 1 : F; /* read by the next block's second */
	}
	for (int i = 0; i < tail; i++) {
		int v = 1 + per * n + i;
		P->kind[v] = SEL_TEMP, P->def[v] = P->fwd_last[v] = v - 1, P->bytes[v] = 1, P->flops[v] = 1;
		P->nin[v] = 1;
		P->in[v] = calloc(1, sizeof(int));
	}
	for (int t = 0; t < P->npos; t++)
		P->base[t] = base;
	return P;
}

static SelProblem *chain_problem(int n, int64_t q, int64_t base) { return chain_problem_tail(n, 0, q, base, 0); }

/* The programme's segments of one length filled on two threads (sel_chain_apart(1): at every length, on any
 * number of CPUs) against one: the same FLOPs and the same plan, on chains of 150 blocks (96 after thinning) at
 * 8 budgets each */
static void chain_apart_check(void)
{
	enum { N = 150 };
	const int64_t q = 64, base = 40 * q;
	int same = 0, plans = 0, tries = 0;
	for (int iter = 0; iter < 3; iter++) {
		SelProblem *P = chain_problem(N, q, base);
		int64_t least = 0;
		for (int v = 1; v < P->n; v++)
			least = P->bytes[v] > least ? P->bytes[v] : least;
		for (int j = 1; j <= 8; j++) {
			int64_t budget = base + 4 * least + j * (int64_t)N * q / 2;
			uint8_t keep[2][1 + 3 * N];
			int hold[2][1 + 3 * N];
			int64_t got[2];
			/* two threads first: a table left by the run before in the same memory would hide a cell not filled */
			for (int two = 1; two >= 0; two--) {
				P->threads = 1 + two;
				sel_chain_apart(two);
				got[two] = sel_chain(P, 3 * N, budget, keep[two], hold[two]);
			}
			sel_chain_apart(-1);
			bool right = got[0] == got[1] && (got[0] == INT64_MAX || (!memcmp(keep[0], keep[1], sizeof keep[0]) &&
			                                                           !memcmp(hold[0], hold[1], sizeof hold[0])));
			char what[200];
			snprintf(what, sizeof what, "chain of %d blocks %d, budget %lld: %lld FLOPs on one thread, %lld on two, "
			         "the plans %s", N, iter, (long long)budget, (long long)got[0], (long long)got[1],
			         right ? "the same" : "apart");
			check(right, what);
			same += right, plans += got[0] < INT64_MAX, tries++;
		}
	}
	if (same == tries)
		printf("ok - select: sel_chain's programme on two threads, every length apart, on 3 chains of %d blocks at 8 "
		       "budgets: the FLOPs and plans of one thread (%d with a plan)\n", N, plans);
}

static void chain_check(void)
{
	enum { TAIL = 100 };
	int n = CN, agree = 0, budgets = 0, tail_budgets = 0, tail_lower = 0, tail_right = 0;
	int64_t made[1 + 4 * CN + TAIL]; /* per value: the FLOPs of making it again where not held, -1 where held */
	int bare_plans = 0, least_lower = 0;
	const int64_t q = 9 * 5 * 7 * 64, base = 40 * q;
	int64_t *memo = malloc(sizeof(int64_t) * 2 * (CN + 1) * (CN + 2) * 2048);
	/* chains 4 and 5 end in a tail of tiny temporaries: as a block's own values they would make 100 blocks of
	 * the tail and, the cuts thinned to 96, drop some of the chain's; sel_chain then plans on the cuts without
	 * them too, which are the chain's own, so that the exact recursion is on those cuts */
	for (int iter = 0; iter < 6; iter++) {
		int tail = iter < 4 ? 0 : TAIL, stem = iter == 2 || iter == 3 ? 12 : 0, per = stem ? 4 : 3;
		int nv = 1 + per * CN + tail, F = per * CN + tail;
		SelProblem *P = chain_problem_tail(n, tail, q, base, stem);
		for (int v = 0; v < nv; v++)
			made[v] = -1;
		/* the block model, as chain.c's comment describes it, on the cuts the fewest values cross: after m of
		 * block 0 (its input is fixed) and after each o but the last */
		int cut[CN + 2], L = 0;
		cut[L++] = -1, cut[L++] = 0;
		for (int b = 0; b + 1 < n; b++)
			cut[L++] = per * b + per - 1;
		cut[L] = F - 1;
		ChainModel cm = {.n = L, .base = base};
		for (int k = 0; k < L; k++) {
			for (int v = 1; v < nv; v++) {
				bool inside = P->def[v] > cut[k] && P->def[v] <= cut[k + 1];
				bool out = k + 1 < L && P->def[v] <= cut[k + 1] && P->fwd_last[v] > cut[k + 1];
				if (P->def[v] <= cut[k] && P->fwd_last[v] > cut[k])
					cm.xin[k] += P->bytes[v];
				if (!inside)
					continue;
				bool cheap = P->flops[v] <= 2 * P->bytes[v];
				cm.f[k] += P->flops[v];
				cm.out[k] += out ? P->bytes[v] : 0;
				cm.abar[0][k] += out || P->kind[v] == SEL_CAND ? P->bytes[v] : 0;
				cm.abar[1][k] += out || !cheap ? P->bytes[v] : 0;
				/* lean: a value not held made at each of its uses, with those of its block's it reads not held */
				made[v] = out || !cheap ? -1 : P->flops[v];
				for (int i = 0; i < P->nin[v] && made[v] >= 0; i++)
					if (made[P->in[v][i]] >= 0 && P->def[P->in[v][i]] > cut[k])
						made[v] += made[P->in[v][i]];
				cm.extra[k] += made[v] >= 0 && P->adj_first[v] >= 0 ? made[v] : 0;
				int64_t op = P->bytes[v];
				for (int i = 0; i < P->nin[v]; i++)
					op += P->in[v][i] ? P->bytes[P->in[v][i]] : 0;
				cm.T[k] = cmax64(cm.T[k], op);
			}
			cm.W[0][k] = base + cm.abar[0][k], cm.W[1][k] = base + cm.abar[1][k] + cm.T[k];
			/* bare: what crosses its end held; the rest made at each position that reads it, once there */
			bool not[1 + 4 * CN + TAIL] = {false};
			int at[1 + 4 * CN + TAIL];
			for (int v = 1; v < nv; v++) {
				at[v] = -1;
				not[v] = P->def[v] > cut[k] && P->def[v] <= cut[k + 1] &&
				         !(k + 1 < L && P->fwd_last[v] > cut[k + 1]);
			}
			cm.abar[2][k] = cm.out[k], cm.W[2][k] = base + cm.out[k] + cm.T[k], cm.bare[k] = 0;
			for (int t = F; t < P->npos; t++)
				for (int v = 1; v < nv; v++)
					if (not[v] && P->adj_first[v] == t)
						cm.bare[k] += bare_make(P, v, t, cut[k], not, at);
		}
		/* the runs: blocks s .. j, their costly values and what crosses the run's end held, every other value
		 * made at each use from those, and from the others not held, made again too */
		for (int rs = 0; rs < L; rs++)
			for (int j = rs + 1; j < L && j - rs < SEL_CHAIN_RUN; j++) {
				cm.rf[rs][j] = cm.rabar[rs][j] = cm.rout[rs][j] = cm.rextra[rs][j] = 0;
				int64_t T = 0;
				for (int v = 1; v < nv; v++) {
					made[v] = -1;
					if (P->def[v] <= cut[rs] || P->def[v] > cut[j + 1])
						continue;
					bool out = j + 1 < L && P->fwd_last[v] > cut[j + 1], cheap = P->flops[v] <= 2 * P->bytes[v];
					cm.rf[rs][j] += P->flops[v];
					cm.rout[rs][j] += out ? P->bytes[v] : 0;
					cm.rabar[rs][j] += out || !cheap ? P->bytes[v] : 0;
					if (!out && cheap) {
						made[v] = P->flops[v];
						for (int i = 0; i < P->nin[v]; i++)
							made[v] += made[P->in[v][i]] >= 0 ? made[P->in[v][i]] : 0;
						cm.rextra[rs][j] += P->adj_first[v] >= 0 ? made[v] : 0;
					}
				}
				for (int k = rs; k <= j; k++)
					T = cmax64(T, cm.T[k]);
				cm.rW[rs][j] = base + cm.rabar[rs][j] + T;
			}
		int64_t extras = 0;
		for (int k = 0; k < L; k++)
			extras += cm.extra[k];
		for (int j = 1; j <= 16; j++) {
			/* a memory step of q / j, which divides every size: the budget the base and SEL_CHAIN_STEPS of them */
			if (q % j)
				continue;
			cm.room = SEL_CHAIN_STEPS * (q / j), cm.budget = base + cm.room;
			/* all and lean, then bare too where they fit nothing */
			int64_t want = INT64_MAX;
			for (cm.ways = 2; cm.ways <= 3 && want == INT64_MAX; cm.ways++) {
				for (size_t i = 0; i < 2 * (CN + 1) * (CN + 2) * 2048; i++)
					memo[i] = -1;
				want = chain_best(&cm, 0, L, 0, true, memo, q / j);
				bare_plans += cm.ways == 3 && want < INT64_MAX;
			}
			/* sel_chain_least: the least budget, in whole steps of this one, at which the exact recursion with every
			 * way (bare too) fits, bisected; and its FLOPs there. On the chains without a tail (one way of cuts) */
			if (!tail) {
				ChainModel c3 = cm;
				c3.ways = 3;
				int lo = -1, hi = SEL_CHAIN_STEPS; /* steps of room: lo fits nothing, hi fits (or nothing does) */
				int64_t at_hi = INT64_MAX;
				while (hi - lo > 1) {
					int mid = lo + (hi - lo) / 2;
					c3.room = (int64_t)mid * (q / j), c3.budget = base + c3.room;
					for (size_t i = 0; i < 2 * (CN + 1) * (CN + 2) * 2048; i++)
						memo[i] = -1;
					int64_t w = chain_best(&c3, 0, L, 0, true, memo, q / j);
					if (w < INT64_MAX)
						hi = mid, at_hi = w;
					else
						lo = mid;
				}
				if (at_hi == INT64_MAX) {
					c3.room = cm.room, c3.budget = cm.budget;
					for (size_t i = 0; i < 2 * (CN + 1) * (CN + 2) * 2048; i++)
						memo[i] = -1;
					at_hi = chain_best(&c3, 0, L, 0, true, memo, q / j);
				}
				int64_t lf = 0, least = sel_chain_least(P, F, cm.budget, &lf);
				int64_t exact = at_hi == INT64_MAX ? INT64_MAX : base + (int64_t)hi * (q / j);
				char what[300];
				snprintf(what, sizeof what, "chain %d, budget %lld: sel_chain_least %lld at %lld FLOPs; the exact "
				         "recursion's least %lld at %lld", iter, (long long)cm.budget, (long long)least, (long long)lf,
				         (long long)exact, (long long)at_hi);
				check(least == exact && (least == INT64_MAX || lf == at_hi), what);
				least_lower += least < cm.budget;
			}
			uint8_t keep[1 + 4 * CN + TAIL], way_keep[4][1 + 4 * CN + TAIL];
			int hold[1 + 4 * CN + TAIL], made[1 + 4 * CN + TAIL], way_hold[4][1 + 4 * CN + TAIL];
			bool held[1 + 4 * CN + TAIL];
			int64_t way[4] = {0, 0, 0, 0};
			if (tail) {
				/* each way alone: cuts with the tail's values owned (0, 2) or not (1, 3), bare or not (2, 3) */
				for (int w = 0; w < 4; w++) {
					sel_chain_only(w + 1);
					way[w] = sel_chain(P, F, cm.budget, way_keep[w], way_hold[w]);
				}
				sel_chain_only(0);
			}
			int64_t got = sel_chain(P, F, cm.budget, keep, hold), sim = 0;
			if (tail) {
				/* the two cuts' fewer FLOPs (the first's where as few), bare where neither fits */
				int w = way[1] < way[0];
				if (way[w] == INT64_MAX)
					w = 2 + (way[3] < way[2]);
				bool right = got == way[w] && (got == INT64_MAX || (!memcmp(keep, way_keep[w], (size_t)nv) &&
				                                                    !memcmp(hold, way_hold[w], sizeof(int) * (size_t)nv)));
				char what[300];
				snprintf(what, sizeof what, "chain %d with a tail, budget %lld: sel_chain %lld FLOPs, its ways %lld and %lld, "
				         "bare %lld and %lld", iter, (long long)cm.budget, (long long)got, (long long)way[0],
				         (long long)way[1], (long long)way[2], (long long)way[3]);
				check(right, what);
				tail_right += right, tail_lower += way[1] < way[0], tail_budgets++;
				/* the second way's cuts are the chain's own: the exact recursion below is on them (bare where the
				 * rest fits nothing) */
				w = way[1] < INT64_MAX ? 1 : 3;
				got = way[w];
				memcpy(keep, way_keep[w], (size_t)nv), memcpy(hold, way_hold[w], sizeof(int) * (size_t)nv);
			}
			if (got < INT64_MAX) {
				for (int v = 0; v < nv; v++)
					made[v] = -1, held[v] = false;
				for (int t = F; t < P->npos; t++)
					for (int v = 1; v < nv; v++)
						if (P->adj_first[v] == t)
							sim += chain_sim(P, F, keep, hold, v, t, made, held);
			}
			char what[300];
			snprintf(what, sizeof what, "chain %d, budget %lld: sel_chain %lld FLOPs, its plan made lazily %lld; the "
			         "exact recursion %lld", iter, (long long)cm.budget, (long long)got, (long long)sim, (long long)want);
			/* made lazily, a lean block's cheap values may serve two readers at one position: no more than the
			 * programme counts, less by at most the cheap values' FLOPs */
			check(got == want && (got == INT64_MAX || (sim <= got && sim >= got - extras)), what);
			agree += got == want && want < INT64_MAX;
			budgets++;
		}
	}
	free(memo);
	/* the tail's blocks cost the first way some of the chain's cuts: it must plan worse somewhere, or the two ways
	 * were one */
	check(tail_lower > 0, "a chain with a tail: the cuts without its tiny values plan fewer FLOPs at some budget");
	/* the least below the budget asked, somewhere, or the table's top row was never read */
	check(least_lower > 0, "a chain: sel_chain_least finds a least below the budget it plans at");
	/* bare must plan where all and lean do not, somewhere, or it was never asked */
	check(bare_plans > 0, "a chain: a block held bare plans at some budget where all and lean plan nothing");
	if (!fail)
		printf("ok - select: sel_chain on 6 chains of %d heterogeneous blocks (2 ending in a tail of %d tiny values), %d "
		       "budgets: the exact recursion's FLOPs (%d with a plan), and its plan made lazily recomputes them (less at "
		       "most the cheap values' FLOPs); with the tail, the fewer of its two ways of cuts (%d of %d budgets, the "
		       "cuts without the tail's values fewer at %d; %d plans with blocks bare, where nothing else fits)\n", CN,
		       TAIL, budgets, agree, tail_right, tail_budgets, tail_lower, bare_plans);
}

/* --quick (make test-sanitize): a quarter of the random DAGs, the same checks on each */
/* sel_least's memo (search.c): a problem asked again gets the search's own answer, and one that differs from it
 * in one field (a position's base bytes, the largest candidate made offloadable or not, a value's bytes or
 * FLOPs) is searched, not answered from the memo: each answer compared with the search run afresh
 * (sel_check_tries on, which the memo leaves to the search). Each kind of change must change some answer, or the
 * check could not see a memo that ignored it (a changed offload cost alone changed none in the full run's 60) */
static void least_memo_check(void)
{
	enum { FIELDS = 4 };
	static const char *field[FIELDS] = {"base", "host", "bytes", "flops"};
	int changed[FIELDS] = {0}, wrong = 0, asked = 0;
	char what[256];
	for (int iter = 0; iter < 60; iter++) {
		int n = 6 + rnd(8);
		SelProblem *P = random_problem(n, 1 + rnd(2), iter % 2, 0);
		/* the offload cost changed where it matters most: on the largest candidate, made offloadable or not */
		int big = -1;
		for (int u = 0; u < n; u++)
			if (P->kind[u] == SEL_CAND && (big < 0 || P->bytes[u] > P->bytes[big]))
				big = u;
		for (int k = -1; k < FIELDS; k++) {
			int v = k == 1 ? big : 2 + rnd(n - 2), t = rnd(P->npos);
			if (k == 1 && v < 0)
				continue;
			/* k < 0: the problem as it is, asked twice; else one field changed, then asked */
			int64_t *x = k == 0 ? &P->base[t] : k == 1 ? &P->host[v] : k == 2 ? &P->bytes[v] : k == 3 ? &P->flops[v] : NULL;
			int64_t was = x ? *x : 0;
			uint8_t memo[64], fresh[64], before[64];
			int64_t fm, ff, fb;
			sel_check_tries(false);
			SelResult b = sel_least(P, SEL_WORK, before, &fb);
			if (x)
				*x = k == 1 ? !was : k == 3 ? 7 * was + 13 : 3 * was + 40 + rnd(40);
			SelResult m = sel_least(P, SEL_WORK, memo, &fm);
			sel_check_tries(true);
			SelResult f = sel_least(P, SEL_WORK, fresh, &ff);
			bool same = !memcmp(memo, fresh, (size_t)n) && m.peak == f.peak && m.flops == f.flops && m.fits == f.fits &&
			            m.bound == f.bound && m.method == f.method && fm == ff;
			asked++;
			if (!same) {
				snprintf(what, sizeof what, "sel_least's memo, problem %d, %s%s: %lld bytes, %lld FLOPs; the search "
				         "afresh %lld, %lld", iter, k < 0 ? "asked again" : "changed in ", k < 0 ? "" : field[k],
				         (long long)m.peak, (long long)m.flops, (long long)f.peak, (long long)f.flops);
				check(false, what);
				wrong++;
			}
			if (k >= 0)
				changed[k] += b.peak != f.peak || b.flops != f.flops || memcmp(before, fresh, (size_t)n);
			if (x)
				*x = was;
		}
	}
	for (int k = 0; k < FIELDS; k++) {
		snprintf(what, sizeof what, "sel_least's memo: a change of %s changed the least in %d problems", field[k],
		         changed[k]);
		check(changed[k] > 0, what);
		wrong += !changed[k];
	}
	if (!wrong)
		printf("ok - select: sel_least's memo: %d problems asked, again or changed in one field, each answered as the "
		       "search afresh answers it\n", asked);
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	group = "select";
	/* every score the greedy searches take from a committed choice is evaluated whole too */
	sel_check_tries(true);
	int below_checked = 0;
	int problems = 0, budgets = 0, exact_fits = 0, greedy_fits = 0, greedy_opt = 0, anneal_opt = 0, refill_opt = 0, offloading = 0;
	double worst_gap = 0;
	for (int iter = 0; iter < (quick ? 75 : 300); iter++) {
		int n = 6 + rnd(8);
		bool offload = iter % 2;
		SelProblem *P = random_problem(n, 1 + rnd(2), offload, 0);
		int dec[32], radix[32], nd = 0;
		for (int v = 0; v < n; v++)
			if (P->kind[v] != SEL_FIXED)
				radix[nd] = P->host[v] ? 4 : 3, dec[nd++] = v;
		/* brute force: every choice, three states a decision (four where it may be offloaded) */
		unsigned nm = 1;
		for (int i = 0; i < nd; i++)
			nm *= (unsigned)radix[i];
		if (nd > 9 || nm > 60000)
			continue;
		problems++;
		offloading += nm % 4 == 0;
		int64_t *peak = malloc(sizeof(int64_t) * nm), *flops = malloc(sizeof(int64_t) * nm), least = INT64_MAX, full;
		uint8_t keep[64] = {0};
		for (unsigned m = 0; m < nm; m++) {
			for (unsigned i = 0, x = m; i < (unsigned)nd; x /= (unsigned)radix[i], i++)
				keep[dec[i]] = (uint8_t)(x % (unsigned)radix[i]);
			peak[m] = sel_eval(P, keep, &flops[m], NULL);
			least = peak[m] < least ? peak[m] : least;
			/* evaluated to a limit: exact at the peak; a unit below it, over the limit and at most the peak (so it),
			 * the FLOPs exact */
			if (m % 7 == 0) {
				int64_t f1, f2, at = sel_eval_below(P, keep, peak[m], &f1), under = sel_eval_below(P, keep, peak[m] - 1, &f2);
				char w[200];
				snprintf(w, sizeof w, "problem %d, choice %u: peak %lld, %lld FLOPs; to its peak %lld, %lld; below it %lld, %lld",
				         iter, m, (long long)peak[m], (long long)flops[m], (long long)at, (long long)f1,
				         (long long)under, (long long)f2);
				check(at == peak[m] && f1 == flops[m] && under == peak[m] && f2 == flops[m], w);
				below_checked++;
			}
		}
		for (int i = 0; i < nd; i++)
			keep[dec[i]] = P->kind[dec[i]] == SEL_CAND ? SEL_KEEP : SEL_ONCE;
		int64_t f0;
		full = sel_eval(P, keep, &f0, NULL);
		char what[300];
		snprintf(what, sizeof what, "problem %d: store-everything recomputes nothing (%lld FLOPs)", iter, (long long)f0);
		check(f0 == 0, what);
		for (int s = 0; s <= 10; s++) {
			int64_t budget = s == 10 ? least - 1 : full - (full - least) * s / 9;
			int64_t best = -1;
			for (unsigned m = 0; m < nm; m++)
				if (peak[m] <= budget && (best < 0 || flops[m] < best))
					best = flops[m];
			budgets++;
			uint8_t got[64];
			SelResult r = sel_fit(P, budget, SEL_WORK, false, got);
			int64_t f, pk = sel_eval(P, got, &f, NULL);
			snprintf(what, sizeof what, "problem %d (%d decisions), budget %lld: exact search %s %lld FLOPs at peak %lld "
			         "(evaluated: %lld FLOPs, peak %lld); brute force: %lld", iter, nd, (long long)budget,
			         r.fits ? "fits with" : "finds no fit;", (long long)r.flops, (long long)r.peak, (long long)f,
			         (long long)pk, (long long)best);
			check(r.method == SEL_EXACT, what);
			if (best < 0)
				check(!r.fits && r.bound == INT64_MAX, what);
			else
				check(r.fits && r.flops == best && f == r.flops && pk == r.peak && pk <= budget && r.bound == best, what);
			exact_fits += best >= 0;
			/* greedy */
			SelResult g = sel_fit(P, budget, 0, false, got);
			pk = sel_eval(P, got, &f, NULL);
			snprintf(what, sizeof what, "problem %d (%d decisions), budget %lld: greedy %s %lld FLOPs at peak %lld, bound %lld "
			         "(evaluated: %lld FLOPs, peak %lld); brute force: %lld", iter, nd, (long long)budget,
			         g.fits ? "fits with" : "finds no fit;", (long long)g.flops, (long long)g.peak, (long long)g.bound,
			         (long long)f, (long long)pk, (long long)best);
			check(f == g.flops && pk == g.peak && g.fits == (pk <= budget), what);
			check(best < 0 ? !g.fits : g.bound <= best && (!g.fits || g.flops >= best), what);
			/* the bound alone, as min-memory prints it at its least */
			int64_t fb = sel_flops_bound(P, budget);
			snprintf(what, sizeof what, "problem %d (%d decisions), budget %lld: sel_flops_bound %lld; brute force: %lld",
			         iter, nd, (long long)budget, (long long)fb, (long long)best);
			check(best < 0 || fb <= best, what); /* below the least, any figure bounds "none" */
			if (best >= 0 && g.fits) {
				greedy_fits++;
				greedy_opt += g.flops == best;
				double gap = best ? (double)(g.flops - best) / (double)best : g.flops ? 1 : 0;
				worst_gap = gap > worst_gap ? gap : worst_gap;
				/* threshold accepting and drop and refill, each from the greedy fit */
				uint8_t ref[64];
				memcpy(ref, got, sizeof ref);
				anneal_opt += from_greedy(P, "threshold accepting", sel_anneal_fit(P, budget, 2000, 10, got), got, iter,
				                          budget, g.flops, best);
				refill_opt += from_greedy(P, "drop and refill", sel_refill(P, budget, SEL_WORK, ref), ref, iter, budget,
				                          g.flops, best);
			}
		}
		int64_t floor;
		uint8_t got[64];
		SelResult l = sel_least(P, SEL_WORK, got, &floor);
		int64_t f, pk = sel_eval(P, got, &f, NULL);
		snprintf(what, sizeof what, "problem %d: least peak %lld (evaluated %lld), floor %lld; brute force %lld", iter,
		         (long long)l.peak, (long long)pk, (long long)floor, (long long)least);
		check(l.fits && pk == l.peak && floor <= least && l.peak >= least, what);
		/* improved at its own peak: no higher, no more FLOPs, and as evaluated */
		uint8_t imp[64];
		memcpy(imp, got, sizeof imp);
		SelResult m = sel_improve(P, l.peak, imp, NULL);
		int64_t mf, mp = sel_eval(P, imp, &mf, NULL);
		snprintf(what, sizeof what, "problem %d: the least improved to %lld bytes, %lld FLOPs (evaluated %lld, %lld), "
		         "from %lld, %lld", iter, (long long)m.peak, (long long)m.flops, (long long)mp, (long long)mf,
		         (long long)l.peak, (long long)f);
		check(m.fits && mp == m.peak && mf == m.flops && mp <= l.peak && mf <= f, what);
		free(peak);
		free(flops);
	}
	if (!fail) {
		printf("ok - select: %d random DAGs (%d with values that may be offloaded), %d budgets: the exact search equals "
		       "brute force over every choice (%d fits); %d choices evaluated to a limit at and below their peak\n",
		       problems, offloading, budgets, exact_fits, below_checked);
		printf("ok - select: the greedy search's fits are real and its bounds hold; optimal at %d of %d fits, worst %.0f%% "
		       "over the optimum\n", greedy_opt, greedy_fits, 100 * worst_gap);
		printf("ok - select: threshold accepting on FLOPs from each greedy fit stays within the budget, as evaluated, "
		       "never above where it started; optimal at %d of %d\n", anneal_opt, greedy_fits);
		printf("ok - select: drop and refill from each greedy fit stays within the budget, as evaluated, never above "
		       "where it started; optimal at %d of %d\n", refill_opt, greedy_fits);
		printf("ok - select: sel_least's floor is below every choice's peak on all %d, and sel_improve from its least "
		       "keeps the peak and recomputes no more\n", problems);
	}
	/* the chain start on a chain of 40 values (value 0 the input, fixed; value v reads v - 1): positions 1 to
	 * 38 each crossed by one value, its own, so the narrowest cuts are those 38, the i-th at position i + 1.
	 * At every 4th cut kept (values 4, 8, .. 36), every 2nd between computed once (2, 6, .. 38), the rest at
	 * each use; inner 0: none once */
	{
		int n = 40, chain_ok = 0;
		SelProblem *P = sel_new(n, n + 10);
		for (int v = 0; v < n; v++) {
			P->kind[v] = v ? SEL_CAND : SEL_FIXED;
			P->def[v] = v, P->fwd_last[v] = v + 1 < n ? v + 1 : v;
			P->bytes[v] = 8, P->flops[v] = 1;
			P->adj_first[v] = P->adj_last[v] = v ? 2 * n - v : -1;
			if (v) {
				P->nin[v] = 1;
				P->in[v] = malloc(sizeof(int));
				P->in[v][0] = v - 1;
			}
		}
		for (int inner = 0; inner <= 2; inner += 2)
			for (int tiny = 0; tiny < 2; tiny++) {
				/* with tiny, value 5 is 1 byte beside the others' 2,048 (under SEL_TINY): kept */
				for (int v = 1; v < n; v++)
					P->bytes[v] = tiny ? (v == 5 ? 1 : 2048) : 8;
				uint8_t got[40];
				got[0] = 7;
				sel_chain_start(P, 4, inner, tiny, got);
				bool right = got[0] == 7;
				for (int v = 1; v < n; v++) {
					uint8_t want = (v % 4 == 0 && v < n - 1) || (tiny && v == 5) ? SEL_KEEP
					               : inner && v % 2 == 0 && v < n - 1        ? SEL_ONCE
					                                                         : SEL_EACH;
					right &= got[v] == want;
				}
				char what[128];
				snprintf(what, sizeof what, "the chain start on a chain of %d values, cuts kept every 4, once every %d%s",
				         n, inner, tiny ? ", a tiny value kept" : "");
				check(right, what);
				chain_ok += right;
			}
		if (chain_ok == 4)
			printf("ok - select: the chain start on a chain keeps every 4th of its narrowest cuts and computes every 2nd "
			       "between once, and keeps a tiny value where asked\n");
	}
	/* Larger DAGs (hundreds of values and positions, so the committed
	 * profile has many blocks and the changes reach far): every greedy
	 * entry point, each result evaluated again, each try checked whole;
	 * then all of it again with every try laid out whole (sel_try_limits),
	 * which must make the same choices */
	int large = 0, large_fits = 0, limited_same = 0;
	uint64_t seed = 0, trail[2] = {0, 0};
	for (int iter = 0, lim = 1; iter < (quick ? 6 : 24); iter += !lim, lim = !lim) {
		/* the same problem twice */
		if (lim)
			seed = state;
		else
			state = seed;
		sel_try_limits(lim);
		trail[lim] = 1469598103934665603ull;
		int n = 120 + rnd(200);
		SelProblem *P = random_problem(n, 1 + rnd(3), iter % 2, n / 2 + rnd(n));
		P->threads = 1 + iter % 2;
		uint8_t *got = malloc((size_t)n), *all = malloc((size_t)n);
		for (int v = 0; v < n; v++)
			all[v] = P->kind[v] == SEL_CAND ? SEL_KEEP : SEL_ONCE;
		int64_t f, full = sel_eval(P, all, &f, NULL), floor;
		char what[256];
		for (int pc = 90; pc >= 30; pc -= 20) {
			int64_t budget = full * pc / 100;
			for (int least = 0; least < 2; least++) {
				SelResult r = sel_fit(P, budget, 0, least, got);
				int64_t pk = sel_eval(P, got, &f, NULL);
				snprintf(what, sizeof what, "large %d at %d%%%s: fit %d, peak %lld, %lld FLOPs (evaluated %lld, %lld)",
				         iter, pc, least ? " (for the least)" : "", r.fits, (long long)r.peak, (long long)r.flops,
				         (long long)pk, (long long)f);
				check(pk == r.peak && f == r.flops && r.fits == (pk <= budget), what);
				large_fits += lim && r.fits;
				trail[lim] = fnv(trail[lim], got, (size_t)n);
			}
			SelResult w = sel_swaps(P, budget, SEL_WORK / 64, got);
			int64_t pk = sel_eval(P, got, &f, NULL);
			snprintf(what, sizeof what, "large %d at %d%%: swaps to %lld, %lld FLOPs (evaluated %lld, %lld)", iter, pc,
			         (long long)w.peak, (long long)w.flops, (long long)pk, (long long)f);
			check(pk == w.peak && f == w.flops, what);
			trail[lim] = fnv(trail[lim], got, (size_t)n);
			SelResult a = sel_anneal_fit(P, budget, 200, 10, got);
			pk = sel_eval(P, got, &f, NULL);
			snprintf(what, sizeof what, "large %d at %d%%: threshold accepting to %lld, %lld FLOPs (evaluated %lld, %lld)",
			         iter, pc, (long long)a.peak, (long long)a.flops, (long long)pk, (long long)f);
			check(pk == a.peak && (!a.fits || f == a.flops), what);
			trail[lim] = fnv(trail[lim], got, (size_t)n);
		}
		SelResult l = sel_least(P, 0, got, &floor);
		int64_t lf, lp = sel_eval(P, got, &lf, NULL);
		trail[lim] = fnv(trail[lim], got, (size_t)n);
		SelResult m = sel_improve(P, l.peak, got, NULL);
		int64_t mf, mp = sel_eval(P, got, &mf, NULL);
		trail[lim] = fnv(trail[lim], got, (size_t)n);
		SelResult d = sel_lower(P, 2, got);
		int64_t df, dp = sel_eval(P, got, &df, NULL);
		trail[lim] = fnv(trail[lim], got, (size_t)n);
		SelResult an = sel_anneal(P, 200, 20, got);
		int64_t af, ap = sel_eval(P, got, &af, NULL);
		snprintf(what, sizeof what, "large %d: threshold accepting on the peak to %lld, %lld FLOPs (evaluated %lld, %lld)",
		         iter, (long long)an.peak, (long long)an.flops, (long long)ap, (long long)af);
		check(ap == an.peak && af == an.flops && ap <= dp, what);
		trail[lim] = fnv(trail[lim], got, (size_t)n);
		snprintf(what, sizeof what, "large %d: least %lld (evaluated %lld), floor %lld; improved %lld, %lld FLOPs from "
		         "%lld (evaluated %lld, %lld); lowered %lld, %lld (evaluated %lld, %lld)", iter, (long long)l.peak,
		         (long long)lp, (long long)floor, (long long)m.peak, (long long)m.flops, (long long)lf, (long long)mp,
		         (long long)mf, (long long)d.peak, (long long)d.flops, (long long)dp, (long long)df);
		check(lp == l.peak && floor <= lp && mp == m.peak && mf == m.flops && mp <= lp && mf <= lf && dp == d.peak &&
		      df == d.flops && dp <= mp, what);
		if (!lim) {
			snprintf(what, sizeof what, "large %d: every search's choices with each try laid out whole are those with "
			         "tries cut where their peak passes what the search takes", iter);
			check(trail[0] == trail[1], what);
			limited_same += trail[0] == trail[1];
		}
		free(got);
		free(all);
		large += lim;
	}
	sel_try_limits(true);
	if (!fail)
		printf("ok - select: %d larger DAGs (%d fits): every greedy search's result is as evaluated, and each of their "
		       "scores from a committed choice equals a whole evaluation, each commit made from a try a whole commit; "
		       "the same choices on %d with every try laid out whole\n", large, large_fits, limited_same);
	/* sel_improve on over SEL_LAZY candidates scores lazily, from estimates: from every value computed again
	 * once, or at each use but those crossing every 4th cut (the chain start, as on the imported networks), its
	 * result is as evaluated, at or below the start's peak, and recomputes less than the start */
	{
		int lazy_ok = 0;
		for (int iter = 0; iter < 3; iter++) {
			int n = 1250, choices = 0;
			SelProblem *P = random_problem(n, 2, false, 64);
			/* none free, so that the choices pass SEL_LAZY */
			for (int v = 0; v < n; v++) {
				P->flops[v] += !P->flops[v];
				choices += P->kind[v] != SEL_FIXED;
			}
			uint8_t *got = malloc((size_t)n);
			char what[256];
			if (iter)
				sel_chain_start(P, 4, 2, iter > 1, got);
			else
				for (int v = 0; v < n; v++)
					got[v] = SEL_ONCE;
			int64_t f0, p0 = sel_eval(P, got, &f0, NULL);
			/* on one thread, and on two (every score at once on both, at a change of phase): the same moves; on one thread
			 * with every keep move's try laid out, the same moves as where the peak is shown no higher
			 * without (each so scored checked whole: sel_check_tries; under --quick, from the chain start
			 * with tiny values kept only, as the imports' is: the laid-out run took 38 s sanitized) */
			uint8_t *one = malloc((size_t)n), *laid = malloc((size_t)n);
			bool lay = !quick || iter == 2;
			memcpy(one, got, (size_t)n);
			memcpy(laid, got, (size_t)n);
			P->threads = 1;
			sel_cheap_keeps(false);
			SelResult ml = lay ? sel_improve(P, p0, laid, NULL) : (SelResult){0};
			sel_cheap_keeps(true);
			SelResult m1 = sel_improve(P, p0, one, NULL);
			int64_t cheap = sel_cheap_taken();
			if (lay)
				snprintf(what, sizeof what, "lazy improve %d: %lld keep moves scored without laying out their "
				         "copies, the same choice (%lld, %lld) as each laid out (%lld, %lld)", iter, (long long)cheap,
				         (long long)m1.peak, (long long)m1.flops, (long long)ml.peak, (long long)ml.flops);
			else
				snprintf(what, sizeof what, "lazy improve %d: %lld keep moves scored without laying out their copies",
				         iter, (long long)cheap);
			if (lay)
				check(cheap > 0 && !memcmp(one, laid, (size_t)n) && m1.peak == ml.peak && m1.flops == ml.flops, what);
			else
				check(cheap > 0, what);
			free(laid);
			/* asked to stop (as chain_start's other start does from its thread): at once, the choice as it was;
			 * with the flag clear, the moves of none */
			uint8_t *held = malloc((size_t)n);
			memcpy(held, got, (size_t)n);
			int stop = 1;
			sel_improve(P, p0, held, &stop);
			bool stays = !memcmp(held, got, (size_t)n);
			memcpy(held, got, (size_t)n);
			stop = 0;
			SelResult ms = sel_improve(P, p0, held, &stop);
			snprintf(what, sizeof what, "lazy improve %d: stopped at once, the start as it was; with the flag clear, "
			         "as with none (%lld, %lld against %lld, %lld)", iter, (long long)ms.peak, (long long)ms.flops,
			         (long long)m1.peak, (long long)m1.flops);
			check(stays && !memcmp(held, one, (size_t)n) && ms.peak == m1.peak && ms.flops == m1.flops, what);
			free(held);
			P->threads = 2;
			SelResult m = sel_improve(P, p0, got, NULL);
			snprintf(what, sizeof what, "lazy improve %d: on two threads as on one (%lld, %lld against %lld, %lld)", iter,
			         (long long)m.peak, (long long)m.flops, (long long)m1.peak, (long long)m1.flops);
			bool same = !memcmp(one, got, (size_t)n) && m.peak == m1.peak && m.flops == m1.flops;
			check(same, what);
			free(one);
			int64_t mf, mp = sel_eval(P, got, &mf, NULL);
			snprintf(what, sizeof what, "lazy improve %d: %d choices, from %lld bytes, %lld FLOPs to %lld, %lld (evaluated "
			         "%lld, %lld)", iter, choices, (long long)p0, (long long)f0, (long long)m.peak, (long long)m.flops,
			         (long long)mp, (long long)mf);
			bool right = same && choices > SEL_LAZY && mp == m.peak && mf == m.flops && mp <= p0 && mf < f0;
			check(right, what);
			lazy_ok += right;
			free(got);
		}
		if (lazy_ok == 3)
			printf("ok - select: sel_improve on over %d choices (lazy scores), from every value made once and from the "
			       "chain start (tiny values kept or not): as evaluated, no higher, fewer FLOPs, on DAGs of 1,250 values; "
			       "on two threads the same choice as on one, and as with every keep move's "
			       "copies laid out\n", SEL_LAZY);
	}
	chain_check();
	chain_apart_check();
	least_memo_check();
	printf("%d checks, %d failed\n", pass + fail, fail);
	return fail != 0;
}
