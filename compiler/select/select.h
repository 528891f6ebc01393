/* sel: which values the adjoint keeps and which it computes again. A
 * problem is a DAG of values laid on a line of positions (the ops of a
 * training step, forward then adjoint), and the memory the rest of the step
 * holds at each position. The optimiser knows nothing of the IR:
 * checkpoint_pass/graph.c builds the problem from a program and applies
 * the choice.
 *
 * The cost model. A kept candidate lives from its definition to its last
 * adjoint use. A dropped one lives from its definition to its last forward
 * use, and again where it is computed again, in one of two ways:
 *   once: at the first position that needs it (an adjoint op that reads
 *     it, or a recomputation that does), held to the last;
 *   each: at every position that needs it, each copy live there only
 *     (Checkmate's freedom to compute a value more than once: a module's
 *     output made again for the next module's recomputation and again for
 *     its own adjoint, not held in between).
 *   host: offloaded to host memory after its definition and fetched again
 *     for the first position that needs it, the fetch issued at that
 *     position's `issue` (a prefetch), held to the last, like once, for
 *     what moving it costs (SelProblem.host, in FLOPs) instead of its
 *     recomputation.
 * A recomputation at position r reads its operands at r; an operand that is
 * not kept (a dropped candidate, or a temporary the adjoint never reads) is
 * computed again too, once or each time, and one that is kept stays live to
 * its last such r. The recomputed FLOPs are the sum over the copies made;
 * the peak is the largest sum over a position.
 *
 * A position has two moments, as the memory plan sees them: while the
 * copies made there are computed, in the forward's order (the op's own
 * result, `own`, not yet made; a transient copy held until its last reader
 * there, and so a value held to the position only for its copies), and
 * while the op runs (the lasting copies made; the transient
 * ones, and values held to the position only for its copies, freed). Elementwise results take a dying operand's storage, as the
 * plan's in_place does: a copy an operand of its own type (`share`) that
 * is transient there, and an op the value `lend` names where that value's
 * storage dies there (kept and last read there, or a copy made there and
 * read no later, or at its last forward use where it is not kept). */
#ifndef DPC_SELECT_H
#define DPC_SELECT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
	SEL_FIXED, /* always available to a recomputation (parameters, inputs, what cannot be recomputed): its
	            * bytes are in base */
	SEL_CAND,  /* read by the adjoint: kept, or computed again */
	SEL_TEMP,  /* a forward temporary the adjoint does not read: computed again when a recomputation needs it */
} SelKind;

typedef struct {
	int n;         /* values, operands before their users */
	int npos;      /* positions 0 .. npos - 1 */
	int64_t *base; /* per position: the bytes of everything outside the problem */
	int *issue;    /* per position: where a fetch for it is issued (<= it) */
	/* per value */
	uint8_t *kind;
	int64_t *bytes, *flops; /* flops: to compute it once from its operands */
	int *nin;
	int **in;
	int *def, *fwd_last;       /* positions: its definition, its last forward use (>= def) */
	int *adj_first, *adj_last; /* its adjoint uses (candidates: adj_first > fwd_last) */
	int *nadj, **adj;          /* every adjoint use, ascending; nadj 0: adj_first and adj_last only */
	int64_t *host;             /* candidates: what offloading it costs, in FLOPs; 0: it is not offloaded */
	uint32_t *share;           /* bit k: operand k of an elementwise value may give it its storage */
	/* per position */
	int64_t *own;              /* the bytes of the op's result there (in base, or a value's) */
	int *lend;                 /* the value whose storage the op's result takes where it dies there, or -1 */
	int64_t *lend_bytes;       /* what that saves there (at most own) */
	int threads;               /* the greedy searches' threads: more than 1 (sel_new's 2) runs two; the choice is the same */
} SelProblem;

/* a value's state in a choice */
enum {
	SEL_ONCE = 0, /* not kept: computed again once where first needed */
	SEL_KEEP = 1, /* kept */
	SEL_EACH = 2, /* not kept: computed again at each position that needs it */
	SEL_HOST = 3, /* not kept: offloaded, and fetched where first needed (candidates with a host cost) */
};

typedef enum {
	SEL_EXACT,  /* every choice searched (with pruning): the fewest FLOPs that fit */
	SEL_GREEDY, /* too large for the work limit: a greedy choice, with a proven lower bound */
} SelMethod;

typedef struct {
	bool fits;       /* the choice's peak is within the budget */
	int64_t peak;    /* its peak */
	int64_t flops;   /* its cost: the FLOPs it recomputes, and what its offloads cost */
	int64_t bound;   /* no choice that fits recomputes fewer FLOPs (INT64_MAX: none fits) */
	SelMethod method;
} SelResult;

/* The work limit of the exact search, in the values and positions it visits, and the most decisions it
 * takes on (three or four states each); beyond either, greedy. */
#define SEL_WORK ((int64_t)1 << 26)
#define SEL_EXACT_MOST 32
/* sel_improve on more candidates and temporaries than this scores each lazily, from an estimate (search.c's
 * first_estimates), where fewer are all scored before the first move */
#define SEL_LAZY 1024
/* sel_blocks' work limit, in values and positions visited: where it is spent, the windows left are not tried */
#define SEL_BLOCKS ((int64_t)1 << 28)

SelProblem *sel_new(int n, int npos);
/* A choice is keep[v] per value (fixed ones ignored), SEL_KEEP, SEL_ONCE
 * or SEL_EACH: a candidate kept for the adjoint, or a temporary kept for the
 * recomputations that read it, or either computed again.
 * Store-everything keeps every candidate and no temporary.
 * sel_eval: the choice's peak; its recomputed FLOPs in *flops; the memory
 * at each position in prof unless NULL. */
int64_t sel_eval(const SelProblem *P, const uint8_t *keep, int64_t *flops, int64_t *prof);
/* sel_eval (without the memory per position) where its peak is at most `limit`; past it, the FLOPs exact and
 * a peak over the limit, not necessarily its own: the positions are laid out in order until one passes */
int64_t sel_eval_below(const SelProblem *P, const uint8_t *keep, int64_t limit, int64_t *flops);
/* store-everything into keep[]: every candidate kept, the free values made again at each use */
void sel_store_everything(const SelProblem *P, uint8_t *keep);
/* The fewest recomputed FLOPs whose peak fits budget: the choice in
 * keep[]. Without a fit, the least peak the search found. work: the
 * exact search's limit (SEL_WORK); 0 forces the greedy search. for_least:
 * the fit serves a search for the least peak, where the greedy search
 * that drops from store-everything is skipped (it has not fitted lower
 * than the one that keeps from nothing on any graph measured, and costs
 * as much). A candidate that costs nothing to compute again from fixed
 * values (a fill) is never kept. */
SelResult sel_fit(const SelProblem *P, int64_t budget, int64_t work, bool for_least, uint8_t *keep);
/* The least peak the search reaches, at the fewest FLOPs it found for it;
 * *floor: no choice's peak is below it. */
SelResult sel_least(const SelProblem *P, int64_t work, uint8_t *keep, int64_t *floor);
/* a descent from keep[]: one value's state changed at a time while that
 * lowers the peak (or keeps it at fewer FLOPs), for at most `passes` passes
 * over them; the choice's peak and FLOPs */
SelResult sel_lower(const SelProblem *P, int passes, uint8_t *keep);
/* threshold accepting from keep[]: `moves` values at random changed state,
 * each taken where the peak rises by less than a threshold that falls from
 * keep[]'s peak / part to nothing; the least peak seen, at its fewest FLOPs */
SelResult sel_anneal(const SelProblem *P, int64_t moves, int64_t part, uint8_t *keep);
/* threshold accepting on FLOPs from keep[] within budget: `moves` values at
 * random changed state, each taken where the peak stays within the budget
 * (or, from a start over it, falls) and the FLOPs rise by less than a
 * threshold that falls from keep[]'s FLOPs / part to nothing; the fewest
 * FLOPs seen within the budget, and its peak (fits false: none) */
SelResult sel_anneal_fit(const SelProblem *P, int64_t budget, int64_t moves, int64_t part, uint8_t *keep);
/* A start for the least search on long chains: every value computed again
 * at each use, which holds the least there, except those crossing every
 * `every`-th of the forward's narrowest cuts (the positions the fewest
 * values cross), kept, so that no chain of recomputations runs back past
 * one (without them, ResNet-152's run from its input: 312 forwards
 * recomputed), and those crossing every `inner`-th (0: none), computed
 * once (held through their cut's stretch of the adjoint only); with
 * `tiny`, values tiny beside the largest (SEL_TINY) kept too */
void sel_chain_start(const SelProblem *P, int every, int inner, bool tiny, uint8_t *keep);
/* a value of fewer bytes than the largest's / SEL_TINY is tiny beside it: sel_chain_start keeps it, and the
 * chain planner does not count it toward a cut's width */
#define SEL_TINY 1024
/* the bytes below which a value is tiny: the largest value's (not fixed) / SEL_TINY */
int64_t sel_tiny_below(const SelProblem *P);
/* Nested checkpoints on a chain (chain.c): where the forward (positions
 * before nforward) is a chain of blocks between its narrowest cuts, Rotor's
 * dynamic programme over the blocks at `budget`. The predicted FLOPs made
 * again (INT64_MAX: the blocks' model fits nothing, or no chain), and the
 * plan: keep[v] SEL_KEEP for what the forward keeps; a value not kept is
 * made again for each position that needs it before hold[v], and once,
 * held, from there (INT_MAX: at each use). The blocks' cuts are found two
 * ways, a block owning a tiny value or not, and the programme is run on the
 * second too where that may pay, and where neither fits, with a block
 * held bare too (only what crosses its end; chain.c says when). */
int64_t sel_chain(const SelProblem *P, int nforward, int64_t budget, uint8_t *keep, int *hold);
/* the least budget at which sel_chain's blocks' model (a block bare too) fits, read from its programme at `budget`
 * (INT64_MAX: nothing fits there), within the programme's steps of memory at that budget; in *flops, the FLOPs
 * its model makes again there */
int64_t sel_chain_least(const SelProblem *P, int nforward, int64_t budget, int64_t *flops);
/* a test's switch: sel_chain's programme on one way only: its cuts with a block owning a tiny value (1, 3) or
 * not (2, 4), its blocks held all or lean (1, 2) or bare too (3, 4); 0, the default: as chain.c says */
void sel_chain_only(int mode);
/* its memory's steps: bytes held are counted in units of (budget - the least base) / SEL_CHAIN_STEPS, rounded up */
#define SEL_CHAIN_STEPS 128
/* the most blocks a run held lean as one block may have (chain.c) */
#define SEL_CHAIN_RUN 16
/* a test's switch: the programme's segments of one length on two threads wherever the problem has two (1), on
 * one (0), or where there are two CPUs and the length's work is worth a thread's start (-1, the default); the
 * same cells every way */
void sel_chain_apart(int mode);
/* from a choice keep[] (that fits budget, or not): the greedy search that
 * keeps, started there, then polished, as a fit from nothing kept ends; the
 * choice's peak and FLOPs. Where *stop (NULL: none) becomes nonzero, set by
 * another thread, it ends soon after, its choice and result meaningless. */
SelResult sel_improve(const SelProblem *P, int64_t budget, uint8_t *keep, const int *stop);
/* whether P has more decisions than the exact search takes (SEL_EXACT_MOST): then every fit and least search
 * on it is greedy, whatever work limit it is given */
bool sel_exact_past(const SelProblem *P);
/* from a choice that fits budget: swaps (a value kept, or computed once,
 * while another changes state) that save FLOPs and still fit, within
 * `work` values and positions visited */
SelResult sel_swaps(const SelProblem *P, int64_t budget, int64_t work, uint8_t *keep);
/* from a choice that fits budget: each kept value made again, each value
 * not kept kept, then each pair of kept values made again, and the greedy
 * searches run again over the others, where that saves FLOPs and still
 * fits, within `work` values and positions visited */
SelResult sel_refill(const SelProblem *P, int64_t budget, int64_t work, uint8_t *keep);
/* a test's check: every evaluation of a few changes from a committed
 * choice (the greedy searches' scores) is evaluated whole too, and a
 * difference is a compiler bug (die) */
void sel_check_tries(bool on);
/* a test's switch: the searches' tries laid out only until their peak passes what the search would take (on by
 * default; off, every try laid out whole) */
void sel_try_limits(bool on);
/* tests: the lazy loop's keep moves scored without laying out copies where the peak is shown no higher (on by
 * default), and how many were so scored since */
void sel_cheap_keeps(bool on);
int64_t sel_cheap_taken(void);
/* that floor alone: the most any position holds less every candidate that could be freed there */
int64_t sel_floor(const SelProblem *P);
/* no choice whose peak is within budget recomputes fewer FLOPs (INT64_MAX: none fits) */
int64_t sel_flops_bound(const SelProblem *P, int64_t budget);
/* From keep[]: for windows of 32 and 64 values in program order (each
 * overlapping the next by half), each value computed once there computed
 * at each use instead, then descents for the peak (one value, then pairs:
 * one kept value for another) and for FLOPs; keep[] becomes the lowest
 * found (where recomputations' chains overlap, a module's values computed
 * at each use together hold less, which no change of one or two values
 * shows), within SEL_BLOCKS values and positions visited. */
SelResult sel_blocks(const SelProblem *P, uint8_t *keep);

#endif
