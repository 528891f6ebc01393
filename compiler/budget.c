/* driver: the budget search. Under --checkpoint auto and --device-mem,
 * the checkpoint pass's options are chosen by planning scratch copies of
 * the program (lowered again, through AD, DCE and the checkpoint pass):
 * whether store-everything fits, whether loops keep tapes of rows or
 * recompute each taped step, and what share of the budget the straight
 * line takes. driver_passes calls it once, between lowering and AD. */
#include "driver.h"

#include "ad_transform/ad.h"

/* the checkpoint pass's options, with the stream pass's prices: the
 * checkpoint pass knows the memory plan, not the later pass */
static CkptOptions ckpt_options(const DriverOptions *o)
{
	CkptOptions ck = o->ckpt;
	ck.min_plan = stream_min_plan;
	ck.min_host = stream_min_host;
	return ck;
}

/* Within driver_budget, scratch copies made with the same options are one program: rows_fit's and share's
 * first copy are the same, and so is the program the budget picks, which then goes on from there instead of
 * through the checkpoint pass again (ResNet-152 imported, its loops at Feng & Huang's cut + 1: 0.5 s of
 * straight-line fit each time). Planning a copy only measures it. */
enum { MEMO_MOST = 16 };
static struct {
	CkptOptions ck;
	Program *p;
} memo[MEMO_MOST];
static int nmemo;
static bool memo_on;

/* every field of CkptOptions (one added there is compared here, or copies made with it differing are taken
 * for one another) */
static bool same_options(const CkptOptions *a, const CkptOptions *b)
{
	return a->mode == b->mode && a->snapshots == b->snapshots && a->may_stream == b->may_stream &&
	       a->stream_all == b->stream_all && a->min_plan == b->min_plan && a->min_host == b->min_host &&
	       a->host_mem == b->host_mem && a->rows == b->rows && a->full_rows == b->full_rows &&
	       a->line_share == b->line_share && a->offload_cost == b->offload_cost && a->least == b->least &&
	       a->fit == b->fit && a->each == b->each && a->threads == b->threads && a->least_past == b->least_past;
}

static Program *memo_find(const CkptOptions *ck)
{
	for (int i = 0; memo_on && i < nmemo; i++)
		if (same_options(&memo[i].ck, ck))
			return memo[i].p;
	return NULL;
}

/* a scratch copy through the checkpoint pass with these options (checked after each pass with --verify, as
 * the program is: it may become the program) */
static Program *scratch_with(FeAst *ast, const DriverOptions *o, const CkptOptions *ck)
{
	Program *q = memo_find(ck);
	if (q)
		return q;
	q = driver_lower(ast, o, false);
	q->optimizer = o->optimizer;
	q->mixed = o->mixed;
	q->ranks = o->ranks;
	AdOptions ad = {ck->mode != CKPT_NONE, ck->rows};
	q = ad_transform(q, &ad);
	if (o->verify)
		ir_verify(q, "ad_transform");
	q = ir_dce(q);
	if (o->verify)
		ir_verify(q, "dce");
	q = ckpt_pass(q, ck);
	if (memo_on && nmemo < MEMO_MOST)
		memo[nmemo].ck = *ck, memo[nmemo++].p = q;
	return q;
}

/* a scratch copy through the checkpoint pass in that mode, loops taped in rows or not */
static Program *scratch(FeAst *ast, const DriverOptions *o, CkptMode mode, bool rows)
{
	CkptOptions ck = ckpt_options(o);
	ck.mode = mode;
	ck.rows = rows;
	return scratch_with(ast, o, &ck);
}

/* --checkpoint auto: does the budget hold the store-everything program,
 * planned without streaming? Then nothing needs recomputing. */
/* a scratch copy's bytes as the final plan packs them: the searches' packing may leave a gap the final one closes */
static int64_t final_bytes(Program *q)
{
	q->pack_effort = 2;
	return mem_plan(q);
}

/* The searches' packing is at or above the final plan's, and no packing is
 * below the bytes live at once: the final packing (the costly one) only
 * settles a budget between the two. */
static bool tape_fits(FeAst *ast, const DriverOptions *o)
{
	Program *q = scratch(ast, o, CKPT_NONE, false);
	q->pack_effort = 0;
	int64_t quick = mem_plan(q);
	if (quick <= o->device_mem)
		return true;
	if (quick - q->plan_work + q->plan_live > o->device_mem)
		return false;
	return final_bytes(q) <= o->device_mem;
}

/* --checkpoint auto under --device-mem: tapes of a few rows, or
 * recomputation of each taped step? Both are planned on scratch copies.
 * Rows hold one step's intermediates, which recomputation keeps only while a
 * step runs, and keep every snapshot on the device: the rows win when they
 * fit (without streaming, if recomputation fits without) and recompute no
 * more FLOPs. */
static bool rows_fit(FeAst *ast, const DriverOptions *o)
{
	int64_t budget = o->device_mem;
	Program *q = scratch(ast, o, CKPT_AUTO, true), *r = scratch(ast, o, CKPT_AUTO, false);
	bool fits = mem_plan(q) <= budget, r_fits = mem_plan(r) <= budget;
	if (o->ckpt.stream_all)
		fits = r_fits = stream_min_plan(q) <= budget;
	else if (!fits && o->ckpt.may_stream && !r_fits)
		fits = stream_min_plan(q) <= budget;
	return fits && (!r_fits || ckpt_cost(q) <= ckpt_cost(r));
}

static bool graph_has_candidates(Program *p)
{
	int one;
	return ckpt_graph_candidates(p, &one, 1) > 0;
}

/* One objective for the straight line and the loops under --device-mem:
 * by default the loops take the budget and the straight line drops only
 * what still does not fit. When the loops then recompute, the straight
 * line may drop more to give them room: it is fitted first to a share of
 * the budget (the loops in their least shape), the loops take the rest.
 * The shares are tried from 90% down while each recomputes less than the
 * one before, then the half steps (5%) either side of the best; the one
 * with the fewest recomputed FLOPs in all that fits is kept, 0 meaning the
 * default order. Each is planned on a scratch copy. */
/* the cost of a scratch copy planned with the straight line in `share` of
 * the budget (INT64_MAX where it does not fit), taken into *best and *pick
 * where it is less */
static int64_t share_cost(FeAst *ast, const DriverOptions *o, CkptOptions *c, double share, int64_t *best, double *pick)
{
	c->line_share = share;
	Program *r = scratch_with(ast, o, c);
	int64_t flops = mem_plan(r) <= o->device_mem ? ckpt_cost(r) : INT64_MAX;
	if (flops < *best)
		*best = flops, *pick = share;
	return flops;
}

static double share(FeAst *ast, const DriverOptions *o, const CkptOptions *ck, int64_t *cost)
{
	static const double shares[] = {0.9, 0.8, 0.7, 0.6, 0.5};
	CkptOptions c = *ck;
	c.line_share = 0;
	Program *q = scratch_with(ast, o, &c);
	int64_t budget = o->device_mem, best = mem_plan(q) <= budget ? ckpt_cost(q) : INT64_MAX;
	*cost = best;
	/* nothing to gain when the loops recompute nothing, or the straight line has nothing to drop */
	if (best == INT64_MAX || ckpt_recomputed_flops(q) == ir_recomputed_flops(q, &q->body) || !graph_has_candidates(q))
		return 0;
	/* the shares from the largest down, while each recomputes less than the one before */
	double pick = 0;
	int64_t before = INT64_MAX;
	for (size_t i = 0; i < sizeof shares / sizeof *shares; i++) {
		int64_t flops = share_cost(ast, o, &c, shares[i], &best, &pick);
		if (flops >= before)
			break;
		before = flops;
	}
	/* then the half steps beside the pick */
	for (int side = -1; side <= 1 && pick > 0; side += 2)
		share_cost(ast, o, &c, pick + side * 0.05, &best, &pick);
	*cost = best;
	return pick;
}

enum { SHAPES = 4 };

/* What the shapes after the first plan with least_past 1 (their least searches stopped after each bisection):
 * each one's final bytes, and the lowest peak a search of it stopped at (ckpt_least_cut_low; INT64_MAX: none
 * stopped) */
typedef struct {
	int64_t bytes[SHAPES], cut[SHAPES];
} Ahead;

/* shapes[order[1..]] planned ahead in a child process (util_child_start), beside the first planned here */
typedef struct {
	FeAst *ast;
	const DriverOptions *o;
	const CkptOptions *shapes;
	const int *order;
} AheadArgs;

static void shapes_ahead(void *arg, void *out)
{
	AheadArgs *h = arg;
	Ahead *a = out;
	for (int j = 1; j < SHAPES; j++) {
		int i = h->order[j];
		CkptOptions c = h->shapes[i];
		c.least_past = 1;
		ckpt_least_cut_low();
		a->bytes[i] = final_bytes(scratch_with(h->ast, h->o, &c));
		a->cut[i] = ckpt_least_cut_low();
	}
}

/* --checkpoint min-memory with loops: their least shape (every row kept,
 * the fewest snapshots) holds more than the fitted path can: its taped
 * steps may be recomputed instead, each value the step's adjoint reads
 * computed again for each op that reads it but those whose keeping costs
 * no peak (ckpt_steps_each), or their rows may drop values, computed again
 * where the adjoint first reads them. Fitted to 1 byte, which nothing
 * meets, that path plans the fewest bytes it can, with tapes of rows and
 * without; the lowest of the three, or store-everything where that is
 * lower still, is taken (the first of those in that order where two are
 * as low), and its scratch copy is the program (*planned).
 * The taped steps recomputed are planned first (the lowest on the imports
 * measured): a shape planned after one lower has its straight line's least
 * search stop after the bisection where it is already an eighth past that
 * (CkptOptions.least_past). */
static CkptOptions least_fit(FeAst *ast, const DriverOptions *o, CkptOptions ck, Program **planned)
{
	CkptOptions f = ck, none = ck;
	f.least = false, f.may_stream = false, f.fit = 1;
	/* a small loop's snapshots and state may cost more than its whole tape: then store-everything is least */
	none.mode = CKPT_NONE, none.least = false, none.rows = false;
	/* in the order they are taken where two plan as low; planned in order[] */
	CkptOptions shapes[SHAPES] = {ck, f, f, none};
	shapes[1].rows = false, shapes[1].each = true, shapes[2].rows = true;
	static const int order[SHAPES] = {1, 0, 2, 3};
	/* Where the search has two threads and dpc two CPUs, the shapes after the first are planned ahead in a
	 * child beside it, their searches stopped after each bisection. A search stopped there at a peak above
	 * the least_past it is given here plans the same as it: then the child's bytes are the shape's, and the
	 * shape is planned here only where it is taken (ResNet-152 imported: 0.3 s of its 1.7 s, the same plan) */
	UtilChild child = {-1, -1};
	Ahead a;
	AheadArgs args = {ast, o, shapes, order};
	if (ck.threads > 1 && util_cpus() > 1)
		child = util_child_start(shapes_ahead, &args, sizeof a);
	bool ahead = child.pid > 0;
	Program *q[SHAPES] = {0};
	int64_t bytes[SHAPES], least = INT64_MAX;
	for (int j = 0; j < SHAPES; j++) {
		int i = order[j];
		if (least < INT64_MAX)
			shapes[i].least_past = least + least / 8;
		if (j == 1 && ahead)
			ahead = util_child_result(child, &a, sizeof a);
		if (j > 0 && ahead && a.cut[i] > shapes[i].least_past) {
			bytes[i] = a.bytes[i];
		} else {
			q[i] = scratch_with(ast, o, &shapes[i]);
			bytes[i] = final_bytes(q[i]);
		}
		least = bytes[i] < least ? bytes[i] : least;
	}
	int at = 0;
	for (int i = 1; i < SHAPES; i++)
		if (bytes[i] < bytes[at])
			at = i;
	if (!q[at])
		q[at] = scratch_with(ast, o, &shapes[at]);
	Program *best = q[at];
	CkptOptions pick = shapes[at];
	ckpt_more_snapshots(best, final_bytes);
	*planned = best;
	return pick;
}

/* The budget's fit keeps the loops' snapshots and rows and the straight
 * line's choice from its own searches, which may stop above the least
 * min-memory's shapes reach (ResNet: 247,808 bytes against 210,944). A
 * budget between the two would be refused though a plan fits it: where the
 * fitted plan passes the budget (as the budget is measured: streaming when
 * it may), min-memory's plan is made, and taken where it is lower; its
 * loops then take the slots the budget leaves above its peak. */
Program *driver_least_within(FeAst *ast, const DriverOptions *o, Program *p)
{
	CkptOptions ck = ckpt_options(o);
	if (ck.mode != CKPT_AUTO || !o->device_mem || ck.least || ck.stream_all || !ir_has_loops(p))
		return p;
	int64_t (*plan)(Program *) = ck.may_stream && ck.min_plan ? ck.min_plan : mem_plan;
	p->pack_effort = 2;
	int64_t have = plan(p);
	if (have <= o->device_mem)
		return p;
	Program *q;
	ck.least = true;
	ck.rows = true;
	least_fit(ast, o, ck, &q);
	q->pack_effort = 2;
	if (plan(q) >= have)
		return p;
	/* the least's shape leaves the loops the fewest slots: the budget's room above its peak goes to them */
	ckpt_fill_slots(q, o->device_mem, plan);
	return q;
}

CkptOptions driver_budget(FeAst *ast, const DriverOptions *o, const Program *p, Program **planned, Program **made)
{
	*planned = *made = NULL;
	CkptOptions ck = ckpt_options(o);
	if (ck.mode == CKPT_AUTO && o->device_mem && !ck.least && tape_fits(ast, o))
		ck.mode = CKPT_NONE;
	/* rows are of loops: straight-line code needs no scratch copies to choose them */
	bool loops = ir_has_loops(p);
	if (ck.mode == CKPT_AUTO && ck.least && loops && !ck.stream_all)
		return least_fit(ast, o, (ck.rows = true, ck), planned);
	memo_on = true, nmemo = 0;
	ck.rows = ck.mode == CKPT_AUTO && (!o->device_mem || ck.least || !loops || rows_fit(ast, o));
	if (ck.mode == CKPT_AUTO && o->device_mem && !ck.least && loops) {
		/* the rows' choice above compares the two with the straight line unshared, and the shares may turn it where
		 * it went against the rows (ResNet-152 imported at 1.53 GB: 1.05 forwards recomputed without rows, 0.70 with
		 * them and the straight line in a share); where it took them, the shares never turned it (at 1.32 and 2.15 GB) */
		CkptOptions rows = ck;
		rows.rows = true;
		int64_t cost, rows_cost = INT64_MAX;
		ck.line_share = share(ast, o, &ck, &cost);
		if (!ck.rows)
			rows.line_share = share(ast, o, &rows, &rows_cost);
		if (rows_cost < cost)
			ck = rows;
	}
	*made = memo_find(&ck);
	memo_on = false, nmemo = 0;
	return ck;
}
