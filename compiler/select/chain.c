/* sel's chain planner: nested checkpoints on a forward that is a chain of
 * blocks, as Rotor plans them (Beaumont, Eyraud-Dubois, Herrmann, Joly and
 * Shilova, "Optimal checkpointing for heterogeneous chains"), on select.h's
 * problem. The blocks lie between the forward's narrowest cuts (the
 * positions the fewest values cross, as sel_chain_start finds them); a
 * block's input is what crosses its cut. A dynamic programme over
 * (first block, end block, bytes held) chooses for each segment of blocks
 * whose input is held: the first block's values all held for its adjoint
 * and the rest reversed after it ("all"; "lean": its costly values only),
 * or a run of blocks from it held lean as one block (what crosses the
 * run's end held, but not what crosses the cuts inside it), or the forward
 * run to a later cut without keeping anything but what crosses it
 * ("checkpoint"), the segment after it reversed, then the one before; the
 * fewest FLOPs made again within the budget. The forward sweep itself is
 * free: its "all" keeps a block's values and its checkpoints keep what
 * crosses them.
 *
 * A plan is written as keep[] (SEL_KEEP: kept from the forward) and
 * hold[]: a value not kept is made again for each position that needs it
 * before hold[v] and once, held, from there (the position where the segment
 * whose choice holds it starts its adjoint); INT_MAX: made at each use.
 * That is Rotor's schedule where the adjoint makes copies lazily, as
 * checkpoint_pass/graph.c does: at a segment's first adjoint position the
 * values its last block needs are made from the nearest held ones, those
 * held from there on kept, the rest let go.
 *
 * The model is the blocks': a block's adjoint needs the most the problem's
 * base holds over its adjoint positions plus its own values, a forward run
 * the largest op's operands and result of the blocks it runs, each beside
 * what is held. It is the planner's guide, not its judge: graph.c plans
 * each result and lowers the budget where the plan passes it. */
#include "model.h"

#include "../util/util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* the most blocks the programme takes (more cuts are thinned evenly) */
enum { CHAIN_MOST = 96 };

/* a segment's choice: its first block's values held (all of them, or lean: the costly ones, the cheap made again
 * at each use from them), alone (a leaf) or before the rest; a run from it held lean as one block, alone or before
 * the rest (PICK_RUN - its last block); or k >= 0: a checkpoint at block k's cut */
enum {
	PICK_LEAF_BARE = -7, PICK_BARE = -6, PICK_NONE = -5, PICK_LEAF = -4, PICK_LEAF_LEAN = -3, PICK_ALL = -2, PICK_LEAN = -1
};
/* a run of blocks s .. j held lean as one block: PICK_RUN - j */
enum { PICK_RUN = -8 };

/* a value is cheap to make again when its FLOPs are at most this many times its bytes (elementwise ops) */
#define CHEAP 2

typedef struct {
	const SelProblem *P;
	int nforward, L;
	int *cut;        /* block b: forward positions cut[b] + 1 .. cut[b + 1]; cut[0] = -1, cut[L] = nforward - 1 */
	int *blk;        /* per value (not fixed): its block, by its definition; -1 otherwise */
	int64_t *f;      /* per block: the FLOPs of its values */
	int64_t *xin;    /* per block: the bytes crossing its cut (its input); 0 for the first */
	int *uxin;       /* per block: xin in steps of memory */
	int64_t *abar[3]; /* per block: its candidates and what crosses its end; [1] lean: the cheap ones not; [2] bare:
	                  * what crosses its end only */
	int64_t *W[3];   /* per block: its adjoint's need, beside what is held; [1] lean; [2] bare */
	int64_t *bare;   /* per block, bare: the FLOPs its values cost, made again at each op that reads them */
	int ways;        /* the ways to hold a block: 2 (all, lean) or 3 (and bare) */
	int64_t *extra;  /* per block, lean: the FLOPs its values not held cost, made again at each use (measure) */
	int64_t *out;    /* per block: the bytes of its values that cross its end (goes_out), held either way */
	int R;           /* runs: blocks s .. j, j - s + 1 <= R, held lean as one: per [s * R + j - s] (one block: lean) */
	int64_t *rf, *rabar, *rout, *rextra, *rW;
	bool *cheap;     /* per value: cheap to make again (CHEAP) */
	int64_t *T;      /* per block: its forward's largest op (operands and result) */
	int *A;          /* per block: its first adjoint position (INT_MAX: none) */
	int64_t *base_at; /* per position: P->base */
	int64_t budget, unit;
	int K;
	int64_t *c;      /* inner: (s, t, h) -> FLOPs */
	int *fin;        /* inner: (s, t) -> the first h whose cell is INF (K + 1: none) */
	int16_t *pick;
	int64_t *top;    /* top level, t = L: (s, h) */
	int16_t *top_pick;
} Chain;

#define INF INT64_MAX

static int64_t units(const Chain *ch, int64_t bytes) { return (bytes + ch->unit - 1) / ch->unit; }
static size_t at(const Chain *ch, int s, int t, int h) { return ((size_t)s * (size_t)(ch->L + 1) + (size_t)t) * (size_t)(ch->K + 1) + (size_t)h; }
static size_t at2(const Chain *ch, int s, int t) { return (size_t)s * (size_t)(ch->L + 1) + (size_t)t; }
static int64_t add(int64_t a, int64_t b) { return a == INF || b == INF ? INF : a + b; }

/* whether v, defined at or before cut position t, is read in the forward after it */
static bool crosses(const SelProblem *P, int v, int t) { return P->def[v] <= t && P->fwd_last[v] > t; }

/* the cuts: forward positions crossed by the fewest values (at most q, sel_chain_start's narrowest), each
 * block holding a value of its own (one that is not tiny where `owned_tiny` is off), thinned to CHAIN_MOST
 * blocks */
static void find_cuts(Chain *ch, bool owned_tiny)
{
	const SelProblem *P = ch->P;
	int F = ch->nforward;
	int *cross = calloc((size_t)F + 2, sizeof(int)), *owns = calloc((size_t)F + 2, sizeof(int));
	/* what crosses counts where it is not tiny beside the largest value: a batch norm's statistics, read by
	 * the running statistics' updates at the forward's end, cross every cut of an imported ResNet */
	int64_t tiny = sel_tiny_below(P);
	for (int v = 0; v < P->n; v++)
		if (P->kind[v] != SEL_FIXED && P->def[v] < F) {
			owns[P->def[v]] += owned_tiny || P->bytes[v] >= tiny;
			if (P->fwd_last[v] > P->def[v] && P->bytes[v] >= tiny)
				cross[P->def[v]]++, cross[P->fwd_last[v] < F ? P->fwd_last[v] : F]--;
		}
	int *count = calloc((size_t)P->n + 2, sizeof(int)), q = 0;
	for (int t = 0, run = 0; t < F; t++)
		count[cross[t] = run += cross[t]]++;
	for (int c = 1, seen = count[0]; c <= P->n && !q; c++)
		if ((seen += count[c]) >= 16)
			q = c;
	int *cuts = malloc(sizeof(int) * (size_t)(F + 2)), n = 0, since = 0;
	for (int t = 0; t + 1 < F; t++) {
		since += owns[t];
		if (cross[t] <= q && since) /* a block owns a value */
			cuts[n++] = t, since = 0;
	}
	/* the last block owns one too: else its cut goes */
	int rest = 0;
	for (int t = n ? cuts[n - 1] + 1 : 0; t < F; t++)
		rest += owns[t];
	if (n && !rest)
		n--;
	int L = n + 1, keep = L > CHAIN_MOST ? CHAIN_MOST : L;
	ch->cut = malloc(sizeof(int) * (size_t)(keep + 1));
	ch->cut[0] = -1;
	for (int i = 1; i < keep; i++)
		ch->cut[i] = cuts[(int64_t)i * L / keep - 1];
	ch->cut[keep] = F - 1;
	ch->L = keep;
	free(cuts), free(count), free(cross), free(owns);
}

/* v crosses the end of its block */
static bool goes_out(const Chain *ch, int v) { return ch->blk[v] + 1 < ch->L && crosses(ch->P, v, ch->cut[ch->blk[v] + 1]); }

/* held for its block's adjoint: a candidate, or what crosses the block's end; lean: what crosses, and every
 * value that is not cheap, a temporary too (a cheap candidate made at each use from it: tanh of a matmul) */
static bool held_by(const Chain *ch, int v, int lean)
{
	if (lean == 2) /* bare */
		return goes_out(ch, v);
	return goes_out(ch, v) || (lean ? !ch->cheap[v] : ch->P->kind[v] == SEL_CAND);
}

/* a saturating sum for the runs' FLOPs made again (INF / 4 and above: too many to price) */
static int64_t cap_add(int64_t a, int64_t b) { return a >= INF / 4 - b ? INF / 4 : a + b; }

/* the positions that read v in the adjoint (select.h: with nadj 0, adj_first and adj_last) */
static int64_t uses(const SelProblem *P, int v)
{
	return P->nadj[v] > 0 ? P->nadj[v] : P->adj_first[v] < 0 ? 0 : P->adj_first[v] == P->adj_last[v] ? 1 : 2;
}

/* an adjoint position and a value it reads */
typedef struct {
	int t, v;
} Read;

static int by_position(const void *a, const void *b)
{
	const Read *x = a, *y = b;
	return x->t != y->t ? (x->t > y->t) - (x->t < y->t) : (x->v > y->v) - (x->v < y->v);
}

/* v made at position t for a bare block: nothing where made there already (graph.c's lazy copies serve every
 * reader of one op), else its FLOPs and those of its operands of the block not held, made there too */
static int64_t make_bare(const Chain *ch, int v, int t, int *at)
{
	if (at[v] == t)
		return 0;
	at[v] = t;
	const SelProblem *P = ch->P;
	int64_t c = P->flops[v];
	for (int q = 0; q < P->nin[v]; q++) {
		int u = P->in[v][q];
		if (ch->blk[u] == ch->blk[v] && !held_by(ch, u, 2))
			c = cap_add(c, make_bare(ch, u, t, at));
	}
	return c;
}

/* Each block's price held bare (only what crosses its end): its other values made again at each op of its
 * adjoint that reads them, each from the block's input and the others, made there too, one copy an op; as
 * graph.c makes the plan's copies */
static void bare_costs(Chain *ch)
{
	const SelProblem *P = ch->P;
	int *at = malloc(sizeof(int) * (size_t)(P->n + 1)), n = 0;
	for (int v = 0; v < P->n; v++)
		at[v] = -1, n += ch->blk[v] >= 0 && !held_by(ch, v, 2) ? (int)uses(P, v) : 0;
	Read *r = malloc(sizeof *r * (size_t)(n + 1));
	n = 0;
	for (int v = 0; v < P->n; v++) {
		if (ch->blk[v] < 0 || held_by(ch, v, 2))
			continue;
		if (P->nadj[v] > 0)
			for (int k = 0; k < P->nadj[v]; k++)
				r[n++] = (Read){P->adj[v][k], v};
		else if (P->adj_first[v] >= 0) {
			r[n++] = (Read){P->adj_first[v], v};
			if (P->adj_last[v] != P->adj_first[v])
				r[n++] = (Read){P->adj_last[v], v};
		}
	}
	qsort(r, (size_t)n, sizeof *r, by_position);
	for (int i = 0; i < n; i++)
		ch->bare[ch->blk[r[i].v]] = cap_add(ch->bare[ch->blk[r[i].v]], make_bare(ch, r[i].v, r[i].t, at));
	free(r), free(at);
}

static void measure_runs(Chain *ch, const int *E);

static void measure(Chain *ch)
{
	const SelProblem *P = ch->P;
	int L = ch->L;
	ch->blk = malloc(sizeof(int) * (size_t)(P->n + 1));
	ch->cheap = calloc((size_t)P->n + 1, sizeof(bool));
	ch->f = calloc((size_t)L + 1, sizeof(int64_t));
	ch->xin = calloc((size_t)L + 1, sizeof(int64_t));
	ch->extra = calloc((size_t)L + 1, sizeof(int64_t));
	ch->out = calloc((size_t)L + 1, sizeof(int64_t));
	for (int o = 0; o < 3; o++)
		ch->abar[o] = calloc((size_t)L + 1, sizeof(int64_t)), ch->W[o] = calloc((size_t)L + 1, sizeof(int64_t));
	ch->bare = calloc((size_t)L + 1, sizeof(int64_t));
	ch->T = calloc((size_t)L + 1, sizeof(int64_t));
	ch->A = malloc(sizeof(int) * (size_t)(L + 1));
	int *E = malloc(sizeof(int) * (size_t)(L + 1));
	for (int b = 0; b < L; b++)
		ch->A[b] = INT_MAX, E[b] = -1;
	/* the block of each forward position */
	int *of = malloc(sizeof(int) * (size_t)(ch->nforward + 1));
	for (int b = 0; b < L; b++)
		for (int t = ch->cut[b] + 1; t <= ch->cut[b + 1]; t++)
			of[t] = b;
	for (int v = 0; v < P->n; v++) {
		ch->blk[v] = -1;
		if (P->kind[v] == SEL_FIXED || P->def[v] >= ch->nforward || P->def[v] < 0)
			continue;
		int b = ch->blk[v] = of[P->def[v]];
		ch->cheap[v] = P->flops[v] <= CHEAP * P->bytes[v];
		ch->f[b] += P->flops[v];
		for (int k = 1; k < L; k++)
			if (crosses(P, v, ch->cut[k]))
				ch->xin[k] += P->bytes[v];
		for (int o = 0; o < 3; o++)
			ch->abar[o][b] += held_by(ch, v, o) ? P->bytes[v] : 0;
		ch->out[b] += goes_out(ch, v) ? P->bytes[v] : 0;
		if (P->kind[v] == SEL_CAND && P->adj_first[v] >= 0) {
			ch->A[b] = P->adj_first[v] < ch->A[b] ? P->adj_first[v] : ch->A[b];
			E[b] = P->adj_last[v] > E[b] ? P->adj_last[v] : E[b];
		}
		int64_t op = P->bytes[v];
		for (int k = 0; k < P->nin[v]; k++)
			if (P->kind[P->in[v][k]] != SEL_FIXED)
				op += P->bytes[P->in[v][k]];
		ch->T[b] = op > ch->T[b] ? op : ch->T[b];
	}
	for (int b = 0; b < L; b++) {
		int64_t most = 0;
		for (int t = ch->A[b]; ch->A[b] < INT_MAX && t <= E[b]; t++)
			most = P->base[t] > most ? P->base[t] : most;
		ch->W[0][b] = most + ch->abar[0][b];
		/* lean: the cheap made at each use beside what is held, the largest op's worth at a time */
		ch->W[1][b] = most + ch->abar[1][b] + ch->T[b];
		ch->W[2][b] = most + ch->abar[2][b] + ch->T[b];
	}
	if (ch->ways > 2)
		bare_costs(ch);
	/* the runs, and of them the run of one block: lean's FLOPs made again */
	measure_runs(ch, E);
	for (int b = 0; b < L; b++)
		ch->extra[b] = ch->rextra[(size_t)b * (size_t)ch->R];
	free(of), free(E);
}

/* The runs' measures, a run of one block (lean) included. A run holds its costly values and what crosses its end; every other value of
 * it is made again at each use, from what is held and from the others, themselves made again: a residual
 * stream inside the run from the one before it, back to the run's input (held). Each use is priced at the
 * FLOPs of all it makes, each value counted once per operand that needs it (at or above what graph.c's lazy
 * copies make, which share one copy among the readers at a position). */
static void measure_runs(Chain *ch, const int *E)
{
	const SelProblem *P = ch->P;
	int L = ch->L, R = ch->R;
	size_t cells = (size_t)L * (size_t)R;
	ch->rf = calloc(cells, sizeof(int64_t)), ch->rabar = calloc(cells, sizeof(int64_t));
	ch->rout = calloc(cells, sizeof(int64_t)), ch->rextra = calloc(cells, sizeof(int64_t));
	ch->rW = calloc(cells, sizeof(int64_t));
	/* each block's values in order, and the last cut each crosses */
	int *start = calloc((size_t)L + 1, sizeof(int)), *byblk = malloc(sizeof(int) * (size_t)(P->n + 1));
	int *last = malloc(sizeof(int) * (size_t)(P->n + 1)), *stamp = calloc((size_t)P->n + 1, sizeof(int));
	int64_t *made = malloc(sizeof(int64_t) * (size_t)(P->n + 1));
	for (int v = 0; v < P->n; v++)
		if (ch->blk[v] >= 0)
			start[ch->blk[v] + 1]++;
	for (int b = 0; b < L; b++)
		start[b + 1] += start[b];
	int *fill = malloc(sizeof(int) * (size_t)(L + 1));
	memcpy(fill, start, sizeof(int) * (size_t)(L + 1));
	for (int v = 0; v < P->n; v++) {
		int b = ch->blk[v];
		if (b < 0)
			continue;
		byblk[fill[b]++] = v;
		int e = b;
		while (e + 1 < L && crosses(P, v, ch->cut[e + 1]))
			e++;
		last[v] = e;
	}
	for (int s = 0; s < L; s++) {
		int64_t f = 0, T = 0;
		int A = INT_MAX, Z = -1;
		for (int j = s; j < L && j - s < R; j++) {
			size_t i = (size_t)s * (size_t)R + (size_t)(j - s);
			int run = (int)i + 1;
			f += ch->f[j], T = ch->T[j] > T ? ch->T[j] : T;
			A = ch->A[j] < A ? ch->A[j] : A, Z = E[j] > Z ? E[j] : Z;
			int64_t most = 0, extra = 0;
			for (int t = A; A < INT_MAX && t <= Z; t++)
				most = P->base[t] > most ? P->base[t] : most;
			for (int k = start[s]; k < start[j + 1]; k++) {
				int v = byblk[k];
				bool out = j + 1 < L && last[v] >= j + 1;
				ch->rout[i] += out ? P->bytes[v] : 0;
				if (!ch->cheap[v] || out) {
					ch->rabar[i] += P->bytes[v];
					continue;
				}
				int64_t c = P->flops[v];
				for (int q = 0; q < P->nin[v]; q++)
					if (stamp[P->in[v][q]] == run)
						c = cap_add(c, made[P->in[v][q]]);
				stamp[v] = run, made[v] = c;
				for (int64_t u = uses(P, v); u > 0; u--)
					extra = cap_add(extra, c);
			}
			ch->rf[i] = f;
			ch->rextra[i] = extra;
			ch->rW[i] = most + ch->rabar[i] + T;
		}
	}
	free(start), free(byblk), free(last), free(stamp), free(made), free(fill);
}

/* where the segment s .. t - 1 starts its adjoint: its blocks' first adjoint position */
static int seg_start(const Chain *ch, int s, int t)
{
	int a = INT_MAX;
	for (int b = s; b < t; b++)
		a = ch->A[b] < a ? ch->A[b] : a;
	return a;
}

/* block s's values held (lean or not) before the rest of the segment, s + 1 .. t - 1, is reversed, with h steps
 * held: its cost by `rest` (the rest's table at s + 1, t, or NULL for a leaf) and the forward's price */
static int64_t hold_first(const Chain *ch, int s, int h, int lean, int64_t fwd, const int64_t *rest, int t, bool top)
{
	/* a leaf's values that cross its end cross the end of its segment: held already, by the checkpoint there (every
	 * segment but the top level's last ends at one), and counted in h */
	if ((int64_t)h * ch->unit + ch->W[lean][s] - (rest ? 0 : ch->out[s]) > ch->budget)
		return INF;
	if (lean == 2 && ch->bare[s] >= INF / 4)
		return INF;
	/* a bare leaf holds nothing its forward makes (what crosses its end is held already): its forward is not
	 * run again, each value is made where read */
	if (lean == 2 && !rest)
		fwd = 0;
	int64_t c = add(fwd, lean == 2 ? ch->bare[s] : lean ? ch->extra[s] : 0);
	if (!rest)
		return c;
	int64_t h2 = h + units(ch, ch->abar[lean][s]);
	if (h2 > ch->K)
		return INF;
	return add(c, top ? rest[(size_t)(s + 1) * (size_t)(ch->K + 1) + (size_t)h2] : rest[at(ch, s + 1, t, (int)h2)]);
}

/* the run s .. j held before the rest of the segment, j + 1 .. t - 1 (t == j + 1: a leaf), with h steps held */
static int64_t hold_run(const Chain *ch, int s, int j, int h, int64_t fwd, const int64_t *rest, int t, bool top)
{
	size_t i = (size_t)s * (size_t)ch->R + (size_t)(j - s);
	bool leaf = j + 1 == t;
	if ((int64_t)h * ch->unit + ch->rW[i] - (leaf ? ch->rout[i] : 0) > ch->budget)
		return INF;
	if (ch->rextra[i] >= INF / 4)
		return INF;
	int64_t c = add(fwd, ch->rextra[i]);
	if (leaf)
		return c;
	int64_t h2 = h + units(ch, ch->rabar[i]);
	if (h2 > ch->K)
		return INF;
	return add(c, top ? rest[(size_t)(j + 1) * (size_t)(ch->K + 1) + (size_t)h2] : rest[at(ch, j + 1, t, (int)h2)]);
}

/* the choice of holding a segment's first block `lean` ways (0 all, 1 lean, 2 bare), alone (a leaf) or before the
 * rest */
static int first_pick(bool leaf, int lean)
{
	static const int16_t picks[2][3] = {{PICK_ALL, PICK_LEAN, PICK_BARE}, {PICK_LEAF, PICK_LEAF_LEAN, PICK_LEAF_BARE}};
	return picks[leaf][lean];
}

/* Every cell's FLOPs grow with the steps already held (each choice's room
 * shrinks with them, and so do its parts', by induction on the segment's
 * length): past the first h where nothing fits, nothing does. */
static void nothing_above(int64_t *c, int16_t *pick, int h, int K)
{
	for (int i = h + 1; i <= K; i++)
		c[i] = INF, pick[i] = PICK_NONE;
}

/* the inner table's segment s .. t - 1: each block's values made again. A
 * segment's cells (one per h held) are filled together, each choice's
 * parts read along h in order: the cells' order of choices and their
 * ties are those of one cell at a time, in half the time on DenseNet-121
 * imported (a part's cells along h lie next to each other; one cell at a
 * time read them K + 1 cells apart, and (L + 1)(K + 1) the other way). */
static void segment(Chain *ch, int s, int t)
{
	int K = ch->K, d = t - s, start = seg_start(ch, s, t);
	int64_t base = start < INT_MAX ? ch->P->base[start] : 0;
	int64_t *best = ch->c + at(ch, s, t, 0);
	int16_t *pick = ch->pick + at(ch, s, t, 0);
	for (int h = 0; h <= K; h++) {
		best[h] = INF, pick[h] = PICK_NONE;
		for (int lean = 0; lean < ch->ways; lean++) {
			int64_t c = hold_first(ch, s, h, lean, ch->f[s], d == 1 ? NULL : ch->c, t, false);
			if (c < best[h])
				best[h] = c, pick[h] = (int16_t)first_pick(d == 1, lean);
		}
	}
	/* the runs s .. j, each along h as the checkpoints below: a cell's choices in the same order as one cell at a
	 * time (all, lean, the runs, the checkpoints) */
	for (int j = s + 1; j < t && j - s < ch->R; j++) {
		size_t i = (size_t)s * (size_t)ch->R + (size_t)(j - s);
		bool leaf = j + 1 == t;
		int64_t room = ch->budget - ch->rW[i] + (leaf ? ch->rout[i] : 0), own = add(ch->rf[i], ch->rextra[i]);
		if (room < 0 || ch->rextra[i] >= INF / 4)
			continue;
		int64_t end = room / ch->unit + 1, u = units(ch, ch->rabar[i]);
		end = end < K + 1 ? end : K + 1;
		if (leaf) {
			for (int h = 0; h < end; h++)
				if (own < best[h])
					best[h] = own, pick[h] = (int16_t)(PICK_RUN - j);
			continue;
		}
		/* the rest's cells finite below its first that is not, and h + u within the steps */
		const int64_t *rest = ch->c + at(ch, j + 1, t, 0);
		end = end < ch->fin[at2(ch, j + 1, t)] - u ? end : ch->fin[at2(ch, j + 1, t)] - u;
		for (int h = 0; h < end; h++) {
			int64_t c = own + rest[h + u];
			if (c < best[h])
				best[h] = c, pick[h] = (int16_t)(PICK_RUN - j);
		}
	}
	int64_t run = 0, most = 0;
	for (int k = s + 1; k < t; k++) {
		run += ch->f[k - 1];
		most = ch->T[k - 1] > most ? ch->T[k - 1] : most;
		const int64_t *before = ch->c + at(ch, s, k, 0), *after = ch->c + at(ch, k, t, 0) + ch->uxin[k];
		/* the h where both parts are finite (each row's cells are, below its first that is not) and the
		 * bytes held fit */
		int64_t room = ch->budget - ch->xin[k] - most - base;
		if (room < 0)
			continue;
		int64_t end = room / ch->unit + 1;
		end = end < ch->fin[at2(ch, s, k)] ? end : ch->fin[at2(ch, s, k)];
		end = end < ch->fin[at2(ch, k, t)] - ch->uxin[k] ? end : ch->fin[at2(ch, k, t)] - ch->uxin[k];
		for (int h = 0; h < end; h++) {
			int64_t c = run + after[h] + before[h];
			if (c < best[h])
				best[h] = c, pick[h] = (int16_t)k;
		}
	}
	/* past the first h where nothing fits, nothing does (nothing_above) */
	int fin = K + 1;
	for (int h = 0; h <= K && fin > K; h++)
		if (best[h] == INF)
			nothing_above(best, pick, h, K), fin = h;
	ch->fin[at2(ch, s, t)] = fin;
}

/* the segments of length d from s = from, from + 2, ... (one of two threads' share of a length) */
typedef struct {
	Chain *ch;
	int d, from;
} Segments;

static void *segments(void *arg)
{
	Segments *g = arg;
	for (int s = g->from; s + g->d <= g->ch->L; s += 2)
		segment(g->ch, s, s + g->d);
	return NULL;
}

/* the inner table, segments by length. A segment reads only shorter ones, so the segments of one length are
 * filled on two threads where the problem has them (P->threads) and the length's work is worth a thread's start
 * (CHAIN_APART cells' sums): every cell is the same either way (DenseNet-201 imported at Feng & Huang's cut + 1: nine
 * programmes of 96 blocks, 45 ms each on one thread, 30 on two) */
enum { CHAIN_APART = 1 << 16 };

static int apart = -1; /* sel_chain_apart's */

void sel_chain_apart(int mode) { apart = mode; }

static void inner(Chain *ch)
{
	int L = ch->L;
	bool two = ch->P->threads > 1 && (apart > 0 || (apart < 0 && util_cpus() > 1));
	for (int d = 1; d <= L; d++) {
		if (two && (apart > 0 || (int64_t)(L - d + 1) * (d - 1) * (ch->K + 1) >= CHAIN_APART)) {
			Segments even = {ch, d, 0}, odd = {ch, d, 1};
			util_pair(segments, &even, segments, &odd);
			continue;
		}
		for (int s = 0; s + d <= L; s++)
			segment(ch, s, s + d);
	}
}

/* the top level: the forward sweep is free */
static void outer(Chain *ch)
{
	int L = ch->L, K = ch->K;
	for (int s = L - 1; s >= 0; s--)
		for (int h = 0; h <= K; h++) {
			int64_t best = INF;
			int pick = PICK_NONE;
			bool leaf = s == L - 1;
			for (int lean = 0; lean < ch->ways; lean++) {
				int64_t c = hold_first(ch, s, h, lean, 0, leaf ? NULL : ch->top, L, true);
				if (c < best)
					best = c, pick = first_pick(leaf, lean);
			}
			for (int j = s + 1; j < L && j - s < ch->R; j++) {
				int64_t c = hold_run(ch, s, j, h, 0, ch->top, L, true);
				if (c < best)
					best = c, pick = PICK_RUN - j;
			}
			for (int k = s + 1; k < L; k++) {
				int64_t hk = h + ch->uxin[k];
				if (hk > K)
					continue;
				int64_t c = add(ch->top[(size_t)k * (size_t)(K + 1) + (size_t)hk], ch->c[at(ch, s, k, h)]);
				if (c < best)
					best = c, pick = k;
			}
			size_t i = (size_t)s * (size_t)(K + 1) + (size_t)h;
			ch->top[i] = best;
			ch->top_pick[i] = (int16_t)pick;
			if (best == INF) {
				nothing_above(ch->top + i - h, ch->top_pick + i - h, h, K);
				break;
			}
		}
}

/* block b's values held for its adjoint: kept from the forward (top), else held from `from`; lean: the cheap
 * candidates made at each use */
static void hold_block(const Chain *ch, int b, int lean, bool top, int from, uint8_t *keep, int *hold)
{
	const SelProblem *P = ch->P;
	for (int v = 0; v < P->n; v++) {
		if (ch->blk[v] != b || !held_by(ch, v, lean))
			continue;
		if (top)
			keep[v] = SEL_KEEP;
		else
			hold[v] = from < hold[v] ? from : hold[v];
	}
}

/* what crosses cut k: kept from the forward (top), else held from `from` */
static void hold_cut(const Chain *ch, int k, bool top, int from, uint8_t *keep, int *hold)
{
	const SelProblem *P = ch->P;
	for (int v = 0; v < P->n; v++)
		if (ch->blk[v] >= 0 && crosses(P, v, ch->cut[k])) {
			if (top)
				keep[v] = SEL_KEEP;
			else
				hold[v] = from < hold[v] ? from : hold[v];
		}
}

/* the run s .. j's values held: lean, and what crosses its end */
static void hold_run_values(const Chain *ch, int s, int j, bool top, int from, uint8_t *keep, int *hold)
{
	const SelProblem *P = ch->P;
	for (int v = 0; v < P->n; v++) {
		int b = ch->blk[v];
		if (b < s || b > j || !(!ch->cheap[v] || (j + 1 < ch->L && crosses(P, v, ch->cut[j + 1]))))
			continue;
		if (top)
			keep[v] = SEL_KEEP;
		else
			hold[v] = from < hold[v] ? from : hold[v];
	}
}

static bool picks_first(int pick) { return pick >= PICK_LEAF_BARE && pick < 0 && pick != PICK_NONE; }
static int lean_of(int pick) { return pick == PICK_BARE || pick == PICK_LEAF_BARE ? 2 : pick == PICK_LEAF_LEAN || pick == PICK_LEAN; }

static void realize(const Chain *ch, int s, int t, int h, uint8_t *keep, int *hold)
{
	int from = seg_start(ch, s, t);
	int pick = ch->pick[at(ch, s, t, h)];
	if (pick <= PICK_RUN) {
		int j = PICK_RUN - pick;
		hold_run_values(ch, s, j, false, from, keep, hold);
		if (j + 1 < t)
			realize(ch, j + 1, t, h + (int)units(ch, ch->rabar[(size_t)s * (size_t)ch->R + (size_t)(j - s)]), keep, hold);
		return;
	}
	if (picks_first(pick))
		hold_block(ch, s, lean_of(pick), false, from, keep, hold);
	if (pick == PICK_ALL || pick == PICK_LEAN || pick == PICK_BARE) {
		realize(ch, s + 1, t, h + (int)units(ch, ch->abar[lean_of(pick)][s]), keep, hold);
	} else if (pick >= 0) {
		hold_cut(ch, pick, false, from, keep, hold);
		realize(ch, pick, t, h + (int)units(ch, ch->xin[pick]), keep, hold);
		realize(ch, s, pick, h, keep, hold);
	}
}

static void realize_top(const Chain *ch, int s, int h, uint8_t *keep, int *hold)
{
	int pick = ch->top_pick[(size_t)s * (size_t)(ch->K + 1) + (size_t)h];
	if (pick <= PICK_RUN) {
		int j = PICK_RUN - pick;
		hold_run_values(ch, s, j, true, 0, keep, hold);
		if (j + 1 < ch->L)
			realize_top(ch, j + 1, h + (int)units(ch, ch->rabar[(size_t)s * (size_t)ch->R + (size_t)(j - s)]), keep, hold);
		return;
	}
	if (picks_first(pick))
		hold_block(ch, s, lean_of(pick), true, 0, keep, hold);
	if (pick == PICK_ALL || pick == PICK_LEAN || pick == PICK_BARE)
		realize_top(ch, s + 1, h + (int)units(ch, ch->abar[lean_of(pick)][s]), keep, hold);
	else if (pick >= 0) {
		hold_cut(ch, pick, true, 0, keep, hold);
		realize_top(ch, pick, h + (int)units(ch, ch->xin[pick]), keep, hold);
		realize(ch, s, pick, h, keep, hold);
	}
}

static void chain_free(Chain *ch)
{
	free(ch->cut), free(ch->blk), free(ch->cheap), free(ch->f), free(ch->xin), free(ch->uxin), free(ch->extra), free(ch->out), free(ch->T), free(ch->A);
	for (int o = 0; o < 3; o++)
		free(ch->abar[o]), free(ch->W[o]);
	free(ch->bare);
	free(ch->c), free(ch->fin), free(ch->pick), free(ch->top), free(ch->top_pick);
	free(ch->rf), free(ch->rabar), free(ch->rout), free(ch->rextra), free(ch->rW);
}

/* the programme on the cuts find_cuts makes with owned_tiny; its FLOPs, its plan in keep[] and hold[] (keep NULL: no
 * plan); *least (where not NULL and it fits): the least budget its table fits, that less the steps its top level
 * may hold before it starts, and then the FLOPs returned are those there (no plan made) */
static int64_t chain_on(const SelProblem *P, int nforward, int64_t budget, bool owned_tiny, int ways, uint8_t *keep,
                        int *hold, int64_t *least)
{
	Chain ch = {.P = P, .nforward = nforward, .budget = budget, .K = SEL_CHAIN_STEPS, .R = SEL_CHAIN_RUN, .ways = ways};
	find_cuts(&ch, owned_tiny);
	if (ch.L < 2 || budget <= 0) {
		free(ch.cut);
		return INF;
	}
	measure(&ch);
	/* every plan holds each block's values for its adjoint, lean or not, as the first block of a segment, or in a
	 * run (a segment of one block holds it; a checkpoint splits a segment into shorter ones): a block whose
	 * adjoint needs more than the budget every way leaves the programme nothing, which is known without it (the
	 * chain fit at the least peaks of DenseNet-121 and -201 imported: 8 programmes of 17 to 39 ms each, all of
	 * them) */
	for (int b = 0; b < ch.L; b++) {
		/* as a leaf its least (what crosses its end held by the checkpoint there), or in a run */
		int64_t least = ch.W[0][b] < ch.W[1][b] ? ch.W[0][b] : ch.W[1][b];
		least = ch.ways > 2 && ch.W[2][b] < least ? ch.W[2][b] : least;
		least -= ch.out[b];
		for (int s = b - ch.R + 1 > 0 ? b - ch.R + 1 : 0; s <= b && ch.R > 1; s++)
			for (int j = b > s ? b : s + 1; j < ch.L && j - s < ch.R; j++) {
				size_t i = (size_t)s * (size_t)ch.R + (size_t)(j - s);
				least = ch.rW[i] - ch.rout[i] < least ? ch.rW[i] - ch.rout[i] : least;
			}
		if (least > budget) {
			chain_free(&ch);
			return INF;
		}
	}
	/* the steps of memory: the budget above the least any position's base holds, so that they measure what the
	 * blocks may hold */
	int64_t low = INF;
	for (int t = 0; t < P->npos; t++)
		low = P->base[t] < low ? P->base[t] : low;
	int64_t room = budget > low ? budget - low : 1;
	ch.unit = (room + ch.K - 1) / ch.K;
	ch.uxin = malloc(sizeof(int) * (size_t)(ch.L + 1));
	for (int k = 0; k < ch.L; k++)
		ch.uxin[k] = (int)(units(&ch, ch.xin[k]) < ch.K + 1 ? units(&ch, ch.xin[k]) : ch.K + 1);
	size_t cells = (size_t)(ch.L + 1) * (size_t)(ch.L + 1) * (size_t)(ch.K + 1);
	ch.c = malloc(sizeof(int64_t) * cells);
	ch.pick = malloc(sizeof(int16_t) * cells);
	ch.fin = malloc(sizeof(int) * (size_t)(ch.L + 1) * (size_t)(ch.L + 1));
	ch.top = malloc(sizeof(int64_t) * (size_t)(ch.L + 1) * (size_t)(ch.K + 1));
	ch.top_pick = malloc(sizeof(int16_t) * (size_t)(ch.L + 1) * (size_t)(ch.K + 1));
	inner(&ch);
	outer(&ch);
	int64_t flops = ch.top[0];
	if (flops < INF && least) {
		/* the top level's cells fit up to h steps held (nothing_above): then the blocks fit in h steps less */
		int h = 0;
		while (h < ch.K && ch.top[h + 1] < INF)
			h++;
		*least = budget - (int64_t)h * ch.unit;
		flops = ch.top[h];
	}
	if (flops < INF && keep) {
		for (int v = 0; v < P->n; v++) {
			keep[v] = P->kind[v] == SEL_FIXED ? SEL_KEEP : SEL_ONCE;
			hold[v] = INT_MAX;
		}
		realize_top(&ch, 0, 0, keep, hold);
	}
	chain_free(&ch);
	return flops;
}

/* The cuts two ways: a block owns a tiny value or not. On an imported ResNet-152 the running statistics'
 * updates after the forward each define one tiny value: owned, they make 82 of its 96 blocks and the network
 * itself 14, whose lean way makes the residual stream inside each again from the convolutions; not owned,
 * the network has 96 blocks (thinned), each holding the stream that crosses its end, which plans lower (the
 * flat import at 950 MB: 0.90 forwards recomputed against 1.21) but recomputes more at Feng & Huang's cut + 1
 * (0.70 against 0.45), as its model says. The programme on the first way; on the second too where their
 * cuts differ and the first fits nothing, or the second is at most an eighth of its work (at most half its
 * blocks: the cells' sums grow as their cube; DenseNet-201 imported, 41 blocks against 96: 2 ms against 22),
 * the fewer FLOPs taken (the first where as few). Where neither fits, the same with a block held bare too
 * (only what crosses its end; the rest made again at each op that reads it): ResNet-152 imported flat, its
 * stem bare, plans within 0.9 MB of the selection's least (877.8 MB, 1.05 forwards recomputed against the
 * least's 14.5), where without it nothing below 890 MB; bare is not a way at higher budgets, where its plans
 * pass their model's memory and the budget's rounds end lower (at 950 MB: 4.2 forwards against 0.76). */
static int only; /* sel_chain_only's */

/* whether the two ways of cuts differ; their blocks in *La (a block owning a tiny value) and *Lb */
static bool cuts_differ(const SelProblem *P, int nforward, int *La, int *Lb)
{
	Chain a = {.P = P, .nforward = nforward}, b = a;
	find_cuts(&a, true), find_cuts(&b, false);
	bool differ = a.L != b.L || memcmp(a.cut, b.cut, sizeof(int) * (size_t)(a.L + 1));
	*La = a.L, *Lb = b.L;
	free(a.cut), free(b.cut);
	return differ;
}

void sel_chain_only(int mode) { only = mode; }

int64_t sel_chain(const SelProblem *P, int nforward, int64_t budget, uint8_t *keep, int *hold)
{
	if (only)
		return chain_on(P, nforward, budget, only % 2 == 1, only > 2 ? 3 : 2, keep, hold, NULL);
	int La, Lb;
	bool differ = cuts_differ(P, nforward, &La, &Lb);
	uint8_t *k2 = malloc((size_t)P->n + 1);
	int *h2 = malloc(sizeof(int) * (size_t)(P->n + 1));
	int64_t f = INF;
	for (int bare = 0; bare < 2 && f == INF; bare++) {
		f = chain_on(P, nforward, budget, true, 2 + bare, keep, hold, NULL);
		if (!differ || (f < INF && 2 * Lb > La))
			continue;
		int64_t g = chain_on(P, nforward, budget, false, 2 + bare, k2, h2, NULL);
		if (g < f) {
			memcpy(keep, k2, (size_t)P->n);
			memcpy(hold, h2, sizeof(int) * (size_t)P->n);
			f = g;
		}
	}
	free(k2), free(h2);
	return f;
}

/* The least budget the blocks' model fits, from one programme at `budget` on each way of cuts with every way to
 * hold a block (bare too): each one's top level fits with h steps held before it starts, so the blocks fit within
 * the budget less those steps (the least memory, read from the table). The lower of the two
 * (INT64_MAX: neither fits at budget), and in *flops what the programme makes again there. */
int64_t sel_chain_least(const SelProblem *P, int nforward, int64_t budget, int64_t *flops)
{
	int La, Lb;
	bool differ = cuts_differ(P, nforward, &La, &Lb);
	int64_t best = INF;
	*flops = INF;
	for (int way = 0; way < 1 + differ; way++) {
		int64_t least = INF, f = chain_on(P, nforward, budget, way == 0, 3, NULL, NULL, &least);
		if (f < INF && (least < best || (least == best && f < *flops)))
			best = least, *flops = f;
	}
	return best;
}
