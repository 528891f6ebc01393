/* ckpt: the recomputation schedule of loops and graphs. ad_transform leaves
 * every loop with a store-everything tape of its carried values; this pass
 * may replace tapes with checkpoint schedules. */
#ifndef DPC_CKPT_H
#define DPC_CKPT_H

#include "../ir/ir.h"
#include "../stream_pass/stream.h"

typedef enum { CKPT_NONE, CKPT_BINOMIAL, CKPT_AUTO } CkptMode;

typedef struct {
	CkptMode mode;
	int64_t snapshots; /* binomial: slots per loop, the initial state's included; 0: ceil(sqrt(n)) + 1 */
	int64_t device_mem; /* binomial: the budget the snapshots fit (without snapshots: as many as it allows) */
	StreamMode stream;  /* the budget is measured with streaming when it must stream (auto) or will (params);
	                     * unless none, snapshots beyond the budget go to host memory */
	int64_t host_mem;   /* the pinned host budget, 0: none */
	bool rows;          /* auto: ad_transform kept what loops without loops inside read (AdOptions.keep): tapes of rows */
	bool full_rows;     /* auto without a budget: rows keep relu masks as values, not bits (tests/unit/graph.c searches both) */
	double line_share;  /* auto under a budget, 0 < share < 1: the straight line is first fitted to that share of the
	                     * budget with the loops in their least shape, then the loops take the rest (the driver tries
	                     * a few shares on scratch copies: one objective for both) */
	bool least;         /* --checkpoint min-memory: auto, loops in their least memory, and straight-line code at the
	                     * least peak the search reaches (the budget, if any, only checked) */
} CkptOptions;

Program *ckpt_pass(Program *p, const CkptOptions *o);
/* --emit=schedule (text) or --schedule-json: each top-level loop's n, s, r
 * and predicted step counts, and the plan's peak by category. Needs the plan. */
void ckpt_print_schedule(FILE *f, Program *p, bool json);

/* Binomial checkpointing (Griewank & Walther, revolve). For a loop of n steps
 * and s snapshot slots, the initial state's slot included: r is the smallest
 * integer with C(s + r, s) >= n, and reversing the loop takes
 * r n - C(s + r, r - 1) forward steps beyond the taped ones, the fewest any
 * schedule with s slots can take. */
int64_t ckpt_binomial_r(int64_t n, int64_t s);
int64_t ckpt_binomial_cost(int64_t n, int64_t s);
/* The same when a taped action tapes up to k steps at once (a tape of k
 * rows): r is the smallest with k C(s + r, s) >= n, and the advances number
 * r n - k C(s + r, r - 1). Every step is also taped once, a forward step
 * more. k = 1 is binomial. */
int64_t ckpt_tape_r(int64_t n, int64_t s, int64_t k);
int64_t ckpt_tape_cost(int64_t n, int64_t s, int64_t k);
/* the forward steps an OP_REVOLVE recomputes: its schedule's advances, and
 * with a tape of rows (Op.ktape) the taped actions' forward steps */
int64_t ckpt_revolve_cost(const Op *revolve);
int64_t ckpt_revolve_k(const Op *revolve); /* the steps its taped actions span at most: ktape, or 1 */
/* what a training step recomputes of the program's loops, in FLOPs (saturating) */
int64_t ckpt_recomputed_flops(Program *p);

/* Straight-line code (graph.c): the forward values that only the top level
 * of the adjoint reads, which it may compute again instead of keeping
 * (writes up to max of them to out); the plan's bytes with those in drop[]
 * recomputed, and the FLOPs that costs; the `most` largest candidates;
 * and the fit, applied to p, returning its FLOPs: the choice that fits the
 * budget with the fewest recomputed FLOPs. With at most `most` candidates
 * (at most 12, fewer in programs of over 8,192 values; fewer than 12: the
 * `most` largest only) every subset is planned; with more, every candidate
 * and the temporaries recomputations read are chosen on select.h's cost
 * model, exactly or greedily. Without a fit the least plan found is
 * applied, for the plan's error. */
int ckpt_graph_candidates(Program *p, int *out, int max);
int ckpt_graph_largest(Program *p, int *out, int most);
int64_t ckpt_graph_eval(Program *p, const int *drop, int n, int64_t (*plan)(Program *), int64_t *flops);
int64_t ckpt_graph_fit(Program *p, int64_t budget, int64_t (*plan)(Program *), int most);
/* the least peak instead (--checkpoint min-memory), at the fewest FLOPs the search finds for it */
int64_t ckpt_graph_least(Program *p, int64_t (*plan)(Program *));
/* the search the fit ran (Program.graph_search): "exact", "greedy", ... */
const char *ckpt_graph_search(const Program *p);
/* the kept set and the ops computed again, for --emit=schedule (json: a "straight_line" member) */
void ckpt_graph_print(FILE *f, Program *p, bool json);
/* an op the adjoint may run again: a result from its operands alone */
bool ckpt_pure(Program *p, Op *op);
/* sorts value ids by their bytes, largest first, then in program order */
void ckpt_largest_first(Program *p, int *v, int n);

/* Loop rows (rows.c): under auto with a tape of rows, the row tapes whose
 * value the loop's adjoint step could compute again from the rest of its
 * row (the largest first, up to max); the program with those in drop[]
 * computed again, each where the adjoint first read it (with masks, first
 * every row whose value the adjoint reads only through step, a relu's
 * mask, keeps it in a bit per element: bits before the stores into the
 * row, unbits where the adjoint took the step; exact, as unbits(bits(x))
 * is step(x)); its undo, which drops every value made since (plan the
 * program once before, so that the optimizer's state is not among them);
 * and per loop the values its row keeps (again false: count, names to f
 * unless NULL, bytes in *total) or the ops its adjoint computes again
 * (FLOPs a step). */
typedef struct CkptRows CkptRows;
int ckpt_rows_candidates(Program *p, int *out, int max);
CkptRows *ckpt_rows_apply(Program *p, const int *drop, int n, bool masks);
void ckpt_rows_undo(CkptRows *r);
int ckpt_rows_names(FILE *f, Program *p, Op *revolve, bool again, bool json, int64_t *total);
/* every revolve's s snapshot slots (at most its trip count) and, where it
 * has a tape, min(k, n) rows, on the device: for tests/unit/graph.c's
 * exhaustive search, which plans each shape itself */
void ckpt_set_shape(Program *p, int64_t s, int64_t k);

typedef enum {
	CKPT_ADVANCE,  /* step forward from `step` to `to` without taping */
	CKPT_SAVE,     /* copy the state at `step` into `slot` */
	CKPT_RESTORE,  /* make the state in `slot` (the state at `step`) current */
	CKPT_TAPED,    /* tape the steps `step`..`to` - 1 from the current state, then their adjoints, last first */
	CKPT_UNTAPE,   /* the adjoints of steps `step`..`to` - 1, last first, whose rows the forward loop taped */
} CkptAction;

typedef void (*CkptEmit)(void *ctx, CkptAction a, int64_t step, int64_t to, int slot);

/* Generates the schedule on the fly: nothing is stored, so n may be in the
 * millions. On entry the state at step 0 is current and held in slot 0.
 * Taped actions span up to k steps. After a taped action the next action
 * is a restore, or there is none. */
void ckpt_binomial_schedule(int64_t n, int64_t s, int64_t k, CkptEmit emit, void *ctx);

/* The sweep schedule (--checkpoint auto): the loss's forward loop saves the
 * state at the start of each of up to s segments, slot i holding segment
 * i's; then the segments are reversed, the rightmost first, each from its
 * slot by the binomial schedule with the s - i slots from its own up. The
 * lengths make every step cost the least more: each segment's cost grows by
 * its r per step, so they are filled in order of r, and the schedule is
 * optimal among those whose first sweep is free (tests/unit/binomial.c
 * checks it against brute force). ckpt_sweep_segments writes the lengths
 * to len[0..s) and returns how many are in use (the first ones). With taped
 * actions of k steps a segment with s_i slots holds up to k C(s_i + t, s_i)
 * steps that cost t advances or fewer.
 * With a tape of rows the forward loop also tapes its last `tail` steps,
 * ckpt_sweep_tail(n, ktape) = min(n, ktape) of them: the schedule starts
 * with their adjoints (CKPT_UNTAPE), and the segments cover the first
 * n - tail steps. Those are the free forward sweep's best: every step but
 * the tail is taped once more, and a longer tail does not fit the rows
 * (tests/unit/binomial.c checks each tail length). */
int64_t ckpt_sweep_segments(int64_t n, int64_t s, int64_t k, int64_t *len);
int64_t ckpt_sweep_tail(int64_t n, int64_t ktape);
int64_t ckpt_sweep_cost(int64_t n, int64_t s, int64_t k, int64_t tail); /* the advances: the sum of the segments' costs */
/* On entry the saves are made and no state is current. */
void ckpt_sweep_schedule(int64_t n, int64_t s, int64_t k, int64_t tail, CkptEmit emit, void *ctx);
/* A revolve's schedule, the sweep's (Op.swept) or binomial's: what the
 * runtime drives, the stream pass replays and --schedule-json lists. */
void ckpt_schedule(int64_t n, int64_t s, int64_t k, bool sweep, int64_t tail, CkptEmit emit, void *ctx);
int64_t ckpt_revolve_tail(const Op *revolve); /* the steps its forward loop tapes: with a tape of rows, min(n, ktape), or the pool's */
void ckpt_revolve_schedule(const Op *revolve, CkptEmit emit, void *ctx); /* the pool's schedule, or ckpt_schedule's */

/* Pooled rows (--checkpoint auto, one loop of up to a few thousand steps):
 * the snapshots beyond slot 0 live in the rows of the carried values' tapes,
 * slot i in row k - i, so that rows and snapshots share k rows: with d
 * slots held a taped action has k - (d - 1) rows. The schedule comes from a
 * dynamic programme over (steps, slots held): a reversal of m steps tapes
 * them all when they fit, or advances j and either saves a slot and
 * recurses on the rest or tapes the rest at once, then restores and
 * reverses the j; the loss's forward sweep is free and saves the chain of
 * slots the top level starts from, then tapes its last steps (the tail).
 * ckpt_pool_plan returns NULL when n^2 (k + 1) passes 2^27; choice holds
 * ckpt_pool_cells(n, k) entries, what codegen puts in the executable for
 * the runtime. ckpt_pool_chain writes the top level's segments (start and
 * length; segment i is reversed from slot i) and the tail. */
typedef struct CkptPool {
	int64_t n, k;
	int64_t cost;   /* the recomputed steps: advances and taped steps but the tail's */
	int64_t tail;   /* the steps the forward loop tapes */
	int32_t *choice;
} CkptPool;
CkptPool *ckpt_pool_plan(int64_t n, int64_t k);
void ckpt_pool_free(CkptPool *pool);
int64_t ckpt_pool_cells(int64_t n, int64_t k);
int64_t ckpt_pool_chain(const CkptPool *pool, int64_t *starts, int64_t *len, int64_t *tail);
void ckpt_pool_schedule(const CkptPool *pool, CkptEmit emit, void *ctx);

/* The copies between device and host a schedule makes when its lowest
 * nhost slots live in host memory and pass through one staging row on the
 * device: saves into them (the initial state's, into slot 0, included), and
 * fetches for the restores whose slot the staging row does not hold already
 * (it holds the host slot last saved or fetched). The runtime's driver,
 * rt_revolve, copies exactly these. For taped actions of one step (k = 1),
 * the only kind a revolve with host slots has. */
void ckpt_binomial_host(int64_t n, int64_t s, int64_t nhost, int64_t *saves, int64_t *fetches);

#endif
