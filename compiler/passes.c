/* driver: the pipeline, in order. Each pass takes the program and returns
 * it; the IR verifier runs after each one. */
#include "driver.h"

#include "ad_transform/ad.h"
#include "dist_pass/dist.h"
#include "select/select.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void driver_phase(const DriverOptions *o, const char *what)
{
	static double last;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
	if (o->verbose && last && what)
		fprintf(stderr, "dpc: %-34s %10.1f ms\n", what, 1000 * (t - last));
	last = t;
}

static void verify(const DriverOptions *o, Program *p, const char *pass)
{
	if (o->verify)
		ir_verify(p, pass);
}

static Program *lower(FeAst *ast, const DriverOptions *o, bool verbose)
{
	const char *ag = getenv("DPC_ATTN_GEMM");
	FeOptions fo = {o->real_bytes, o->reference, o->target == CG_CUDA, verbose && o->verbose,
	              !ag || !*ag ? 0 : !strcmp(ag, "off") ? -1 : atoll(ag),
	              o->stream.device_mem};
	return fe_lower(ast, &fo);
}

/* the checkpoint pass's options, with the stream pass's prices: the
 * checkpoint pass knows the memory plan, not the later pass */
static CkptOptions ckpt_options(const DriverOptions *o)
{
	CkptOptions ck = o->ckpt;
	ck.min_plan = stream_min_plan;
	ck.min_host = stream_min_host;
	return ck;
}

/* a scratch copy through the checkpoint pass with these options */
static Program *scratch_with(FeAst *ast, const DriverOptions *o, const CkptOptions *ck)
{
	Program *q = lower(ast, o, false);
	q->optimizer = o->optimizer;
	q->ranks = o->ranks;
	AdOptions ad = {ck->mode != CKPT_NONE, ck->rows};
	return ckpt_pass(ir_dce(ad_transform(q, &ad)), ck);
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
static bool tape_fits(FeAst *ast, const DriverOptions *o)
{
	return mem_plan(scratch(ast, o, CKPT_NONE, false)) <= o->ckpt.device_mem;
}

/* --checkpoint auto under --device-mem: tapes of a few rows, or
 * recomputation of each taped step? Both are planned on scratch copies.
 * Rows hold one step's intermediates, which recomputation keeps only while a
 * step runs, and keep every snapshot on the device: the rows win when they
 * fit (without streaming, if recomputation fits without) and recompute no
 * more FLOPs. */
static bool rows_fit(FeAst *ast, const DriverOptions *o)
{
	int64_t budget = o->ckpt.device_mem;
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
	int64_t flops = mem_plan(r) <= c->device_mem ? ckpt_cost(r) : INT64_MAX;
	if (flops < *best)
		*best = flops, *pick = share;
	return flops;
}

static double share(FeAst *ast, const DriverOptions *o, const CkptOptions *ck)
{
	static const double shares[] = {0.9, 0.8, 0.7, 0.6, 0.5};
	CkptOptions c = *ck;
	c.line_share = 0;
	Program *q = scratch_with(ast, o, &c);
	int64_t budget = ck->device_mem, best = mem_plan(q) <= budget ? ckpt_cost(q) : INT64_MAX;
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
	return pick;
}

/* -v: how the straight-line search chose, and when it fell back to greedy, why */
static void graph_note(Program *p)
{
	fprintf(stderr, "dpc: straight-line search%s: %s over %d candidates", p->graph_least ? " for the least peak" : "",
	        ckpt_graph_search(p), p->graph_candidates);
	if (p->graph_search == 3)
		fprintf(stderr, " (the exact search passed its work limit of %lld values and positions visited, or has more "
		        "than %d decisions); no fit recomputes fewer than %lld FLOPs", (long long)SEL_WORK, SEL_EXACT_MOST,
		        (long long)p->graph_bound);
	fputc('\n', stderr);
}

Program *driver_passes(FeAst *ast, const DriverOptions *o, Emit *last)
{
	Program *p = lower(ast, o, true);
	p->optimizer = o->optimizer;
	p->ranks = o->ranks;
	verify(o, p, "frontend");
	driver_phase(o, "lower");
	if (o->emit == (*last = EMIT_IR))
		return p;
	CkptOptions ck = ckpt_options(o);
	if (ck.mode == CKPT_AUTO && ck.device_mem && !ck.least && tape_fits(ast, o))
		ck.mode = CKPT_NONE;
	/* rows are of loops: straight-line code needs no scratch copies to choose them */
	bool loops = false;
	for (int i = 0; i < p->body.len; i++)
		loops |= p->body.ops[i]->kind == OP_LOOP;
	ck.rows = ck.mode == CKPT_AUTO && (!ck.device_mem || ck.least || !loops || rows_fit(ast, o));
	if (ck.mode == CKPT_AUTO && ck.device_mem && !ck.least && loops)
		ck.line_share = share(ast, o, &ck);
	if (ck.device_mem && o->ckpt.mode == CKPT_AUTO)
		driver_phase(o, "auto: store, rows or recompute");
	AdOptions ad = {ck.mode != CKPT_NONE, ck.rows};
	p = ad_transform(p, &ad);
	verify(o, p, "ad_transform");
	driver_phase(o, "ad_transform");
	p = ir_dce(p);
	verify(o, p, "dce");
	driver_phase(o, "dce");
	if (o->emit == (*last = EMIT_GRAD))
		return p;
	p = ckpt_pass(p, &ck);
	if (o->verbose && p->graph_search)
		graph_note(p);
	verify(o, p, "checkpoint_pass");
	driver_phase(o, "checkpoint_pass");
	if (o->emit == (*last = EMIT_CKPT))
		return p;
	p = dist_pass(p);
	verify(o, p, "dist_pass");
	p = stream_pass(p, &o->stream);
	verify(o, p, "stream_pass");
	if (o->verify)
		mem_verify(p);
	driver_phase(o, "stream_pass (memory plan)");
	*last = EMIT_STREAM;
	return p;
}
