/* ckpt: the recomputation schedule of loops and graphs. ad_transform leaves
 * every loop with a store-everything tape of its carried values; this pass
 * may replace tapes with checkpoint schedules. */
#ifndef DPC_CKPT_H
#define DPC_CKPT_H

#include "../ir/ir.h"
#include "../memplan/memplan.h"
#include "../../common/revolve.h"

typedef enum { CKPT_NONE, CKPT_BINOMIAL, CKPT_AUTO } CkptMode;

typedef struct {
	CkptMode mode;
	int64_t snapshots; /* binomial: slots per loop, the initial state's included; 0: ceil(sqrt(n)) + 1 */
	/* streaming, which a later pass decides: the budget is measured with it when it must stream
	 * (may_stream and the resident plan is over the budget) or will (stream_all); with may_stream,
	 * snapshots beyond the budget go to host memory. Its prices come from the driver, so that the
	 * passes depend one way: the arena with every parameter that can stream streamed, one unit
	 * ahead (min_plan), and the host pool that takes (min_host); NULL when it cannot stream. */
	bool may_stream, stream_all;
	int64_t (*min_plan)(Program *);
	int64_t (*min_host)(Program *);
	int64_t host_mem;   /* the pinned host budget, 0: none */
	bool rows;          /* auto: ad_transform kept what loops without loops inside read (AdOptions.keep): tapes of rows */
	bool full_rows;     /* auto without a budget: rows keep relu masks as values, not bits (tests/unit/graph.c searches both) */
	double line_share;  /* auto under a budget, 0 < share < 1: the straight line is first fitted to that share of the
	                     * budget with the loops in their least shape, then the loops take the rest (the driver tries
	                     * a few shares on scratch copies: one objective for both) */
	int64_t offload_cost; /* auto: what moving one byte to the host or back is worth in FLOPs (Program.offload_cost);
	                       * 0: straight-line values are never offloaded */
	bool least;         /* --checkpoint min-memory: auto, loops in their least memory, and straight-line code at the
	                     * least peak the search reaches (the budget, if any, only checked) */
	int64_t fit;        /* min-memory with loops, least off: a budget the pass fits to as to --device-mem
	                     * (Program.device_mem meanwhile); the driver passes 1, which no plan meets, so that the
	                     * pass plans the fewest bytes it can, and keeps that where it is below the loops' least
	                     * shape (budget.c's least_fit); 0: none */
	bool each;          /* with fit: a revolve's taped step without rows computes the values its adjoint reads again
	                     * for each op that reads them, but those it keeps where that saves FLOPs at no more peak
	                     * (ckpt_steps_each) */
	int threads;        /* --threads: the straight-line search's threads, 1 or 2 (Program.search_threads) */
	int64_t least_past; /* min-memory's shapes (budget.c's least_fit): bytes past which another shape is lower
	                     * (Program.least_past); 0: none */
} CkptOptions;

Program *ckpt_pass(Program *p, const CkptOptions *o);
/* --emit=schedule (text) or --schedule-json: each top-level loop's n, s, r
 * and predicted step counts, and the plan's peak by category. Needs the plan.
 * extra: more members of the JSON object (the kernels' costs), or NULL. */
void ckpt_print_schedule(FILE *f, Program *p, bool json, const char *extra);

/* min-memory: each loop whose snapshots are all on the device takes the
 * most slots that keep plan(p) at or below its bytes (fewer steps recomputed
 * at the same peak) */
void ckpt_more_snapshots(Program *p, int64_t (*plan)(Program *));
/* each loop the most slots that keep the plan within budget; one without
 * rows advancing from its start or swept, whichever recomputes less */
void ckpt_fill_slots(Program *p, int64_t budget, int64_t (*plan)(Program *));
/* what a training step recomputes of the program's loops, in FLOPs (saturating) */
int64_t ckpt_recomputed_flops(Program *p);
/* what the schedule costs: its recomputed FLOPs, and its offloads at Program.offload_cost a byte each way */
int64_t ckpt_cost(Program *p);

/* Straight-line code (graph.c): the forward values that only the top level
 * of the adjoint reads, which it may compute again instead of keeping
 * (writes up to max of them to out); the plan's bytes with those in drop[]
 * recomputed, and the FLOPs that costs; the `most` largest candidates;
 * and the fit, applied to p, returning its FLOPs: the choice that fits the
 * budget with the fewest recomputed FLOPs. With at most `most` candidates
 * (at most 12, fewer in programs of over 8,192 values; fewer than 12: the
 * `most` largest only) every subset is planned (with up to CKPT_FIT_EACH,
 * every choice of kept, computed again once or at each use, the values
 * they are computed from once or at each use: ckpt_graph_eval's `each`
 * and `temps`); with more, every candidate
 * and the temporaries recomputations read are chosen on select.h's cost
 * model, exactly or greedily. Without a fit the least plan found is
 * applied, for the plan's error. */
int ckpt_graph_candidates(Program *p, int *out, int max);
int ckpt_graph_largest(Program *p, int *out, int most);
enum { CKPT_FIT_EACH = 7 };
/* how many states ckpt_graph_fit's exhaustive search gives each of n candidates: 3 (kept, once, each, and the
 * values they are computed from once or each) with up to CKPT_FIT_EACH in programs small enough, else 2 */
int ckpt_fit_states(const Program *p, int n);
int64_t ckpt_graph_eval(Program *p, const int *drop, const bool *each, int n, bool temps, int64_t (*plan)(Program *),
                        int64_t *flops);
int64_t ckpt_graph_fit(Program *p, int64_t budget, int64_t (*plan)(Program *), int most);
/* the least peak instead (--checkpoint min-memory), at the fewest FLOPs the search finds for it */
int64_t ckpt_graph_least(Program *p, int64_t (*plan)(Program *));
/* the lowest peak after its bisection at which a least search stopped on Program.least_past since the last
 * call (INT64_MAX: none stopped), and a fresh count: a search that stops at a peak above a shape's least_past
 * stops at any least_past below it (budget.c's least_fit plans shapes ahead with least_past 1) */
int64_t ckpt_least_cut_low(void);
/* a large straight line's chain plan that fits the budget recomputing at most 1 / CKPT_CHAIN_ENOUGH of a
 * forward is taken without the selection's fit searched (Program.graph_chain_only) */
#define CKPT_CHAIN_ENOUGH 16
/* the search the fit ran (Program.graph_search): "exact", "greedy", ... */
const char *ckpt_graph_search(const Program *p);
/* the kept set and the ops computed again, for --emit=schedule (json: a "straight_line" member) */
void ckpt_graph_print(FILE *f, Program *p, bool json);
/* an op the adjoint may run again: a result from its operands alone */
bool ckpt_pure(Program *p, Op *op);
/* sorts value ids by their bytes, largest first, then in program order */
void ckpt_largest_first(Program *p, int *v, int n);
/* qsort's order of records whose first member is an int64_t: largest first */
int ckpt_by_first_down(const void *a, const void *b);

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
/* A candidate that is no tape: every loop that can replays its state (Op.replay), its carried values'
 * tapes down to one row. ckpt_rows_candidates lists it first where some loop can; with replay false,
 * never. */
enum { CKPT_ROWS_REPLAY = -1 };
int ckpt_rows_candidates(Program *p, int *out, int max, bool replay);
CkptRows *ckpt_rows_apply(Program *p, const int *drop, int n, bool masks);
void ckpt_rows_undo(CkptRows *r);
/* each revolve's taped step without rows computes the values its adjoint reads again before each op that
 * reads them; then keeps those, one at a time, where that saves FLOPs at no more peak by plan */
typedef struct CkptSteps CkptSteps;
CkptSteps *ckpt_steps_each(Program *p);
void ckpt_steps_keep(CkptSteps *s, int64_t (*plan)(Program *));
int ckpt_rows_names(FILE *f, Program *p, Op *revolve, bool again, bool json, int64_t *total);
/* every revolve's s snapshot slots (at most its trip count) and, where it
 * has a tape, min(k, n) rows, on the device: for tests/unit/graph.c's
 * exhaustive search, which plans each shape itself */
void ckpt_set_shape(Program *p, int64_t s, int64_t k);

#endif
