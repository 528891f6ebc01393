/* ckpt: the recomputation schedule of loops. --checkpoint none keeps
 * ad_transform's store-everything tapes. --checkpoint binomial rewrites the
 * adjoint of every top-level loop into an OP_REVOLVE: the forward loop keeps
 * computing the loss but tapes nothing; the adjoint advances from snapshots,
 * and runs each step's taped step and adjoint from the current state.
 * --checkpoint auto keeps what the adjoint reads of a loop without loops
 * inside in a tape of a few rows (Op.ktape): a taped action tapes up to
 * that many steps forward, then runs their adjoints from the rows. It
 * chooses the rows and the snapshots under --device-mem for the fewest
 * recomputed FLOPs, and lets each forward loop whose revolve keeps its
 * slots on the device save the sweep schedule's segment starts (Op.sweep,
 * Op.swept). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"

#include "../../common/abi.h"

static bool is_tape_store(Op *op, const int *tape, int n)
{
	if (op->kind != OP_STORE_SLICE)
		return false;
	for (int k = 0; k < n; k++)
		if (op->in[0] == tape[k])
			return true;
	return false;
}

typedef struct {
	const int *tape;
	int n;
	Program *p;
} Tapes;

static bool skip_store(void *ctx, Op *op)
{
	Tapes *t = ctx;
	return is_tape_store(op, t->tape, t->n) || ir_is_stage_store(t->p, op);
}

static bool has_loop(Block *b)
{
	for (int i = 0; i < b->len; i++)
		if (b->ops[i]->kind == OP_LOOP)
			return true;
	return false;
}

/* A tape of k rows for each value v's tape body stores */
/* whether st stores v's state into its row: a replayed state's tape keeps the taped run's first only */
static bool state_store(Op *v, Op *st)
{
	for (int c = 0; c < v->ncarry; c++)
		if (st->in[2] == v->carg[c])
			return true;
	return false;
}

static void set_rows(Program *p, Op *v, int64_t k)
{
	v->ktape = k;
	for (int i = 0; i < v->body3.len; i++) {
		Op *st = v->body3.ops[i];
		if (st->kind == OP_STORE_SLICE && st->in[1] == v->irow)
			p->values.data[st->in[0]].type.dim[0] = v->replay && state_store(v, st) ? 1 : k;
	}
}

/* one snapshot of v's state, in bytes */
static int64_t state_bytes(Program *p, const Op *v)
{
	int64_t b = 0;
	for (int c = 0; c < v->ncarry; c++)
		b += ir_bytes(p, ir_vtype(p, v->carg[c]));
	return b;
}

/* one row of v's tapes, in bytes: with a replayed state, the tapes of as many rows as the tape has (the
 * state's one row apart, which state_rows counts) */
static int64_t row_bytes(Program *p, Op *v)
{
	int64_t b = 0;
	for (int i = 0; i < v->body3.len; i++) {
		Op *st = v->body3.ops[i];
		if (st->kind == OP_STORE_SLICE && st->in[1] == v->irow && !(v->replay && state_store(v, st)))
			b += ir_bytes(p, ir_drop_first(ir_vtype(p, st->in[0])));
	}
	return b;
}

/* a replayed state's one row, in bytes; 0 without */
static int64_t state_rows(Program *p, Op *v)
{
	int64_t b = 0;
	for (int c = 0; c < v->ncarry && v->replay; c++)
		b += rev_replay_state(v, c) ? ir_bytes(p, ir_vtype(p, v->carg[c])) : 0;
	return b;
}

/* the FLOPs of one replay of v's state; 0 without */
static int64_t replay_flops(Program *p, Op *v)
{
	if (!v->replay)
		return 0;
	int64_t f = rev_replay_marks(p, v, NULL);
	if (f < 0)
		die("a revolve replays a state it cannot");
	return f;
}

/* The tape body: forward step ivar storing into row irow of each tape, and
 * yielding the next state; the adjoint body reads the same rows. */
static void tape_bodies(Program *p, Op *v, Op *f, Op *r, const int *tape, int ntape)
{
	Tapes none = {tape, 0, p};
	IrClone m = {{0}, skip_store, NULL, NULL, &none};
	ir_clone_set(&m, f->ivar, v->ivar);
	for (int k = 0; k < f->ncarry; k++)
		ir_clone_set(&m, f->carg[k], v->carg[k]);
	ir_clone_block(p, &m, &f->body, &v->body3);
	v->cyield3 = ar_alloc(sizeof(int) * (size_t)(f->ncarry + 1));
	for (int k = 0; k < f->ncarry; k++)
		v->cyield3[k] = ir_clone_map(&m, f->cyield[k]);
	for (int i = 0; i < v->body3.len; i++)
		if (is_tape_store(v->body3.ops[i], tape, ntape))
			v->body3.ops[i]->in[1] = v->irow;
	v->ivar2 = r->ivar;
	for (int i = 0; i < r->body.len; i++) {
		Op *op = r->body.ops[i];
		for (int k = 0; k < ntape; k++)
			if (op->kind == OP_SLICE && op->in[0] == tape[k] && op->in[1] == r->ivar)
				op->in[1] = v->irow;
		ir_append(&v->body2, op);
	}
}

static int fresh(Program *p, int v)
{
	Value *x = &p->values.data[v];
	return ir_new_value(p, x->kind, x->type, x->name, x->loc);
}

static Op *revolve(Program *p, Op *r, const CkptOptions *o)
{
	Op *f = r->primal;
	/* ad_transform kept what the adjoint reads of such loops */
	bool taped = o->mode == CKPT_AUTO && o->rows && !has_loop(&f->body);
	/* the forward loop's tape of carried values: the stores at the top of its
	 * body; with taped, its other tapes after them */
	int ntape = f->ncarry;
	int *tape = ar_alloc(sizeof(int) * (size_t)(f->ncarry + f->body.len + 1));
	for (int k = 0; k < f->ncarry; k++) {
		tape[k] = -1;
		for (int i = 0; i < f->body.len; i++) {
			Op *st = f->body.ops[i];
			if (st->kind == OP_STORE_SLICE && st->in[2] == f->carg[k])
				tape[k] = st->in[0];
		}
		if (tape[k] < 0)
			die("forward loop without a tape for carried value %d", k);
	}
	for (int i = 0; i < f->body.len && taped; i++) {
		Op *st = f->body.ops[i];
		if (st->kind == OP_STORE_SLICE && st->in[1] == f->ivar && p->values.data[st->in[0]].vclass == VC_TAPE &&
		    !is_tape_store(st, tape, f->ncarry))
			tape[ntape++] = st->in[0];
	}
	Op *v = ir_new_op(p, OP_REVOLVE, r->loc, f->ncarry, f->in);
	v->primal = f;
	v->lo = f->lo;
	v->trip = f->trip;
	v->role = "binomial";
	int64_t s = o->snapshots ? o->snapshots : (int64_t)ceil(sqrt((double)f->trip)) + 1;
	v->nsnap = (int)(s < f->trip ? s : f->trip);
	v->ncarry = f->ncarry;
	v->carg = ar_alloc(sizeof(int) * (size_t)(f->ncarry + 1));
	v->cyield = ar_alloc(sizeof(int) * (size_t)(f->ncarry + 1));
	v->snap = ar_alloc(sizeof(int) * (size_t)(f->ncarry + 1));
	v->hsnap = ar_alloc(sizeof(int) * (size_t)(f->ncarry + 1));
	Tapes skip = {tape, ntape, p};
	IrClone m = {{0}, skip_store, NULL, NULL, &skip};
	v->ivar = fresh(p, f->ivar);
	ir_clone_set(&m, f->ivar, v->ivar);
	for (int k = 0; k < f->ncarry; k++) {
		v->carg[k] = fresh(p, f->carg[k]);
		ir_clone_set(&m, f->carg[k], v->carg[k]);
		Type t = ir_vtype(p, f->carg[k]), st = t;
		st.rank = t.rank + 1;
		st.dim[0] = v->nsnap;
		for (int d = 0; d < t.rank; d++)
			st.dim[d + 1] = t.dim[d];
		const char *n = p->values.data[f->carg[k]].name;
		if (ir_too_large(st))
			diag_error(f->loc, "%d snapshots of '%s' would be %s, more than 2^40 elements; give fewer --snapshots",
			           v->nsnap, n ? n : "the loop's state", ir_type_str(st));
		v->snap[k] = ir_new_value(p, VK_VAR, st, ar_printf("snap_%s", n ? n : "h"), r->loc);
		p->values.data[v->snap[k]].vclass = VC_SNAP;
		v->hsnap[k] = -1;
	}
	/* advance: the forward body without its tape */
	ir_clone_block(p, &m, &f->body, &v->body);
	for (int k = 0; k < f->ncarry; k++)
		v->cyield[k] = ir_clone_map(&m, f->cyield[k]);
	if (taped) {
		v->role = "auto";
		v->irow = ir_new_value(p, VK_INDEX, ir_scalar(DT_INDEX), "row", r->loc);
		tape_bodies(p, v, f, r, tape, ntape);
		set_rows(p, v, 1);
	}
	/* taped step and adjoint: the reverse body, reading the state instead of the tape */
	v->ivar2 = r->ivar;
	for (int i = 0; i < r->body.len && !taped; i++) {
		Op *op = r->body.ops[i];
		bool reload = false;
		for (int k = 0; k < f->ncarry && !reload; k++)
			if (op->kind == OP_SLICE && op->in[0] == tape[k] && op->in[1] == r->ivar) {
				ir_replace_uses(&r->body, 0, op->out, v->carg[k]);
				reload = true;
			}
		if (!reload)
			ir_append(&v->body2, op);
	}
	/* The forward loop computes the loss and tapes nothing; with rows, it
	 * tapes its last steps into them (the sweep schedule's tail). Under a
	 * budget it saves the segments' starts from the first (sweep_all). */
	if (taped) {
		v->swept = true;
		f->sweep = v;
		f->irow = ir_new_value(p, VK_INDEX, ir_scalar(DT_INDEX), "row", f->loc);
	} else if (p->sweep_fits) {
		v->swept = true;
		f->sweep = v;
	}
	int w = 0;
	for (int i = 0; i < f->body.len; i++) {
		Op *st = f->body.ops[i];
		if (taped && is_tape_store(st, tape, ntape))
			st->in[1] = f->irow;
		if (taped || !is_tape_store(st, tape, ntape))
			f->body.ops[w++] = st;
	}
	f->body.len = w;
	return v;
}

/* whether the forward loop saves v's snapshots (Op.sweep) */
static void set_swept(Op *v, bool on)
{
	v->swept = on;
	v->primal->sweep = on ? v : NULL;
}

/* op's snapshot slots, the lowest nhost of them in host memory */
static void set_slots(Program *p, Op *op, int64_t nsnap, int64_t nhost)
{
	op->nsnap = (int)nsnap;
	op->nhost = (int)nhost;
	bool sweep = p->sweep_fits && !nhost && !op->no_sweep; /* the forward loop cannot reach host slots */
	if (!op->ktape && op->swept != sweep)
		set_swept(op, sweep);
	for (int k = 0; k < op->ncarry; k++) {
		Value *x = &p->values.data[op->snap[k]];
		x->type.dim[0] = nsnap - nhost + (nhost > 0);
		if (nhost && op->hsnap[k] < 0) {
			op->hsnap[k] = ir_new_value(p, VK_VAR, x->type, ar_printf("host_%s", x->name), x->loc);
			p->values.data[op->hsnap[k]].vclass = VC_HSNAP;
		}
		if (nhost)
			p->values.data[op->hsnap[k]].type.dim[0] = nhost;
	}
}

/* Sets every revolve's snapshot count to `extra` more than one, at most its
 * trip count, all on the device; returns one slot of each loop, in bytes. */
static int64_t set_snapshots(Program *p, int64_t extra)
{
	int64_t slot_bytes = 0;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if (op->kind != OP_REVOLVE)
			continue;
		int64_t s = 1 + extra < op->trip ? 1 + extra : op->trip;
		for (int k = 0; k < op->ncarry; k++) {
			int64_t most = IR_MAX_ELEMS / ir_numel(ir_vtype(p, op->carg[k]));
			s = s < most ? s : most;
			slot_bytes += ir_bytes(p, ir_vtype(p, op->carg[k]));
		}
		set_slots(p, op, s < INT_MAX ? s : INT_MAX, 0);
	}
	return slot_bytes;
}

/* Snapshots take what the budget leaves: plan with one slot per loop, then
 * share out what is left; the memory plan says what each count costs. */
static void fit_snapshots(Program *p, int64_t budget, int64_t (*plan)(Program *))
{
	int64_t slot_bytes = set_snapshots(p, 0);
	if (!slot_bytes)
		return;
	/* measured as the final plan packs: the searches' packing may leave gaps the final one closes */
	int effort = p->pack_effort;
	p->pack_effort = 2;
	int64_t arena = plan(p);
	/* alignment can cost a few bytes per snapshot tensor: step back until it fits */
	int64_t extra = slot_bytes && arena < budget ? (budget - arena) / slot_bytes : 0;
	for (; extra > 0; extra -= extra / 64 + 1) {
		set_snapshots(p, extra);
		if (plan(p) <= budget)
			break;
	}
	if (extra <= 0)
		set_snapshots(p, 0);
	p->pack_effort = effort;
}

/* Without a budget: nothing advances (s k >= n - k: the forward loop tapes
 * the last k steps), in the least memory; with --snapshots s, the rows that
 * make it so. */
static int64_t least_slots(int64_t n, int64_t k) { return (n - 1) / k > 1 ? (n - 1) / k : 1; }

static void least_rows(Program *p, Op *v, const CkptOptions *o)
{
	int64_t n = v->trip, state = state_bytes(p, v), row = row_bytes(p, v);
	if (o->snapshots) {
		set_rows(p, v, (n + v->nsnap) / (v->nsnap + 1));
		return;
	}
	int64_t best_k = 1, best = INT64_MAX;
	for (int64_t k = 1; k <= n && (double)k * (double)row < (double)best; k++) {
		double b = (double)least_slots(n, k) * (double)state + (double)k * (double)row;
		if (b < (double)best)
			best = (int64_t)b, best_k = k;
	}
	int64_t s = least_slots(n, best_k);
	set_slots(p, v, s < INT_MAX ? s : INT_MAX, 0);
	set_rows(p, v, best_k);
}


/* the forward steps a revolve's schedule recomputes with s slots and taped
 * actions of up to k steps: advances, and with a tape each step once more
 * but those the forward loop taped */

/* every revolve's snapshots as set_snapshots sets them, and a tape of
 * min(k, n) rows where it has one; returns one slot of each loop, in bytes */
static int64_t set_shape(Program *p, int64_t extra, int64_t k)
{
	int64_t slot = set_snapshots(p, extra);
	for (int i = 0; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind == OP_REVOLVE && v->ktape)
			set_rows(p, v, k < v->trip ? k : v->trip);
	}
	return slot;
}

void ckpt_set_shape(Program *p, int64_t s, int64_t k)
{
	set_shape(p, s - 1, k);
}

/* what a loop's shapes cost, read once for a search over them: its step's
 * FLOPs (per) and what a taped step computes again (again); its largest
 * carry and tape row in elements, the carries' bytes and a row's */
typedef struct {
	Op *v;
	int64_t per, again, carry_most, carry_bytes, row_most, row, replay;
} LoopStep;

static LoopStep loop_step(Program *p, Op *v)
{
	LoopStep l = {.v = v, .per = ir_block_flops(p, &v->body, 0, v->body.len), .again = ir_recomputed_flops(p, &v->body2)};
	for (int c = 0; c < v->ncarry; c++) {
		Type t = ir_vtype(p, v->carg[c]);
		l.carry_most = ir_numel(t) > l.carry_most ? ir_numel(t) : l.carry_most;
		l.carry_bytes += ir_bytes(p, t);
	}
	for (int j = 0; j < v->body3.len; j++) {
		Op *st = v->body3.ops[j];
		int64_t n;
		if (st->kind == OP_STORE_SLICE && st->in[1] == v->irow &&
		    (n = ir_numel(ir_drop_first(ir_vtype(p, st->in[0])))) > l.row_most)
			l.row_most = n;
	}
	l.row = v->ktape ? row_bytes(p, v) : 0;
	l.replay = replay_flops(p, v);
	return l;
}

/* loop l's recomputed FLOPs with s snapshots and a tape of k rows (sweep
 * schedule), and in *bytes those snapshots' and rows' beyond one each; -1
 * when a snapshot or tape tensor would pass 2^40 elements */
static int64_t loop_cost(const LoopStep *l, int64_t s, int64_t k, int64_t *bytes)
{
	const Op *v = l->v;
	int64_t n = v->trip, kk = v->ktape ? (k < n ? k : n) : 1;
	s = s < n ? s : n;
	*bytes = 0;
	if (l->carry_most > IR_MAX_ELEMS / s || l->row_most > IR_MAX_ELEMS / kk)
		return -1;
	*bytes = (s - 1) * l->carry_bytes + (v->ktape ? (kk - 1) * l->row : 0);
	int64_t f = rev_sat_add(rev_sat_mul(rev_op_steps(v, s, kk, true), l->per), rev_sat_mul(n, l->again));
	if (l->replay)
		f = rev_sat_add(f, rev_sat_mul(rev_replays(n, s, kk, true, rev_sweep_tail(n, kk)), l->replay));
	return f;
}

/* the loops' LoopSteps, in order; their count in *n (freed by the caller) */
static LoopStep *loop_steps(Program *p, int *n)
{
	LoopStep *l = malloc(sizeof *l * (size_t)(p->body.len + 1));
	*n = 0;
	for (int i = 0; i < p->body.len; i++)
		if (p->body.ops[i]->kind == OP_REVOLVE)
			l[(*n)++] = loop_step(p, p->body.ops[i]);
	return l;
}

/* p's loop_steps, made where first asked for: what a loop's step costs and holds does not change with its
 * snapshots and rows, so the shapes a fit tries share them (ResNet-152 imported, at Feng & Huang's cut + 1:
 * 18,104 walks of the loops' bodies, 5% of its compile, where a choice of rows needs one) */
typedef struct {
	Program *p;
	LoopStep *l;
	int n;
} Steps;

static const LoopStep *steps_of(Steps *s)
{
	if (!s->l)
		s->l = loop_steps(s->p, &s->n);
	return s->l;
}

/* The recomputed FLOPs of a training step under that shape (sweep schedules),
 * and the bytes of its snapshots and tape rows beyond one each; -1 when a
 * snapshot or tape tensor would pass 2^40 elements. */
static int64_t shape_cost(const LoopStep *l, int nl, int64_t extra, int64_t k, int64_t *bytes)
{
	int64_t flops = 0;
	*bytes = 0;
	for (int i = 0; i < nl; i++) {
		int64_t b, c;
		if ((c = loop_cost(&l[i], 1 + extra, k, &b)) < 0)
			return -1;
		*bytes += b;
		flops = rev_sat_add(flops, c);
	}
	return flops;
}

/* a loop's shape, or the shapes of the loops up to it: the bytes beyond one
 * snapshot and one row each, the FLOPs recomputed; this loop's snapshots
 * and rows, and where the loops before it are in their merged frontier */
typedef struct {
	int64_t bytes, flops, s, k;
	int prev;
} Shape;

static int by_bytes(const void *a, const void *b)
{
	const Shape *x = a, *y = b;
	return x->bytes != y->bytes ? (x->bytes > y->bytes) - (x->bytes < y->bytes) : (x->flops > y->flops) - (x->flops < y->flops);
}

/* the shapes no other beats in both bytes and FLOPs, by bytes; their count */
static int frontier(Shape *x, int n)
{
	if (n > 1)
		qsort(x, (size_t)n, sizeof *x, by_bytes);
	int m = 0;
	for (int i = 0; i < n; i++)
		if (!m || x[i].flops < x[m - 1].flops)
			x[m++] = x[i];
	return m;
}

enum { MERGE_MOST = 1 << 22 }; /* the most shapes a merge of two frontiers may list */

/* Several loops under one budget: each loop's shapes (snapshot and row
 * counts, on fit_tapes's grid) within `room` bytes beyond one snapshot and
 * one row each, reduced to its frontier of bytes against FLOPs, and the
 * frontiers merged one loop at a time (a knapsack with a choice per loop,
 * exact on the grid); the shapes of fewest FLOPs within room are set.
 * Their FLOPs, or -1 where none fits or a merge would pass MERGE_MOST.
 * steps: loop_steps' of p, in order. */
static int64_t fit_loops(Program *p, const CkptOptions *o, int64_t room, const LoopStep *steps)
{
	int nloops = 0;
	for (int i = 0; i < p->body.len; i++)
		nloops += p->body.ops[i]->kind == OP_REVOLVE;
	/* malloc'd and freed: fit_rows fits thousands of choices of rows */
	Shape **stage = calloc((size_t)nloops + 1, sizeof(Shape *));
	Op **loop = malloc(sizeof(Op *) * (size_t)(nloops + 1));
	int cap = 0, nopt = 0;
	Shape none = {0, 0, 1, 1, -1}, *prev = &none, *opt = NULL;
	int nprev = 1, l = 0, at_step = 0;
	int64_t flops = -1;
	for (int i = 0; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind != OP_REVOLVE)
			continue;
		int64_t n = v->trip, b, c;
		LoopStep ls = steps[at_step++];
		nopt = 0;
		/* the bytes grow with s and with k: a k whose fewest snapshots pass the room ends the grid */
		for (int64_t k = 1, had = -1; k <= (v->ktape ? n : 1) && nopt > had; k += k < 256 ? 1 : k / 32) {
			had = nopt;
			for (int64_t s = o->snapshots ? o->snapshots : 1; s <= n || s == o->snapshots; s += s < 256 ? 1 : s / 32) {
				if ((c = loop_cost(&ls, s, k, &b)) < 0 || b > room)
					break;
				if (nopt == cap) {
					cap = cap ? 2 * cap : 256;
					opt = realloc(opt, sizeof(Shape) * (size_t)cap);
				}
				opt[nopt++] = (Shape){b, c, s < n ? s : n, k < n ? k : n, -1};
				if (o->snapshots)
					break;
			}
		}
		nopt = frontier(opt, nopt);
		if (!nopt || (int64_t)nprev * nopt > MERGE_MOST)
			goto done;
		Shape *next = malloc(sizeof(Shape) * (size_t)nprev * (size_t)nopt);
		int n2 = 0;
		for (int a = 0; a < nprev; a++)
			for (int j = 0; j < nopt && prev[a].bytes + opt[j].bytes <= room; j++)
				next[n2++] = (Shape){prev[a].bytes + opt[j].bytes, rev_sat_add(prev[a].flops, opt[j].flops), opt[j].s,
				                     opt[j].k, a};
		loop[l] = v;
		nprev = frontier(next, n2);
		prev = stage[l++] = next;
	}
	if (nprev) {
		/* by bytes, FLOPs falling: the last is the fewest */
		int at = nprev - 1;
		flops = prev[at].flops;
		for (l = nloops - 1; l >= 0; l--) {
			Shape *x = &stage[l][at];
			set_slots(p, loop[l], x->s, 0);
			if (loop[l]->ktape)
				set_rows(p, loop[l], x->k);
			at = x->prev;
		}
	}
done:
	for (int i = 0; i < nloops; i++)
		free(stage[i]);
	free(stage);
	free(loop);
	free(opt);
	return flops;
}

static int64_t revolve_flops(Program *p, Op *v);

/* the pool's plan in compiler memory */
static RevPool *keep_pool(RevPool *pl)
{
	RevPool *c = ar_alloc(sizeof *c);
	*c = *pl;
	size_t bytes = sizeof(int32_t) * (size_t)rev_pool_cells(pl->n, pl->k);
	c->choice = ar_alloc(bytes);
	memcpy(c->choice, pl->choice, bytes);
	rev_pool_free(pl);
	return c;
}

/* The one loop of a program, with a tape and no --snapshots: pooled rows
 * (one slot, the rest of the budget in rows that also hold the snapshots)
 * when they fit with fewer recomputed FLOPs than the shape fit_tapes left,
 * which stays otherwise; the planned bytes of what it leaves (planned: of
 * that shape's). */
static int64_t fit_pool(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *), int64_t extra,
                        int64_t k, int64_t planned)
{
	Op *v = NULL;
	int nrev = 0;
	for (int i = 0; i < p->body.len; i++)
		if (p->body.ops[i]->kind == OP_REVOLVE)
			v = p->body.ops[i], nrev++;
	/* a replayed state's tape holds no snapshots */
	if (nrev != 1 || !v->ktape || v->replay || o->snapshots || planned > budget)
		return planned;
	int64_t sweep = revolve_flops(p, v), n = v->trip;
	set_shape(p, 0, 1);
	int64_t base = plan(p), row = row_bytes(p, v), rows = row > 0 && base <= budget ? 1 + (budget - base) / row : 0;
	rows = rows < n ? rows : n;
	while (rows > 1 && (set_shape(p, 0, rows), plan(p) > budget))
		rows -= rows / 64 + 1;
	set_shape(p, 0, rows > 1 ? rows : 1);
	RevPool *pl = rows >= 1 && plan(p) <= budget ? rev_pool_plan(n, rows) : NULL;
	int64_t per = ir_block_flops(p, &v->body, 0, v->body.len), again = ir_recomputed_flops(p, &v->body2);
	if (pl && pl->cost < INT64_MAX && rev_sat_add(rev_sat_mul(pl->cost, per), rev_sat_mul(n, again)) < sweep) {
		v->pool = keep_pool(pl);
		v->ptail = v->pool->tail;
		return plan(p);
	}
	rev_pool_free(pl);
	set_shape(p, extra, k);
	return planned;
}

/* --checkpoint auto under --device-mem: the snapshots (or the --snapshots
 * count) and tape rows that fit the budget with the fewest recomputed FLOPs.
 * Each candidate row count k gives its snapshots what is left; the plan is
 * linear in both but for alignment, which the final check steps back from. */
static int64_t fit_tapes_from(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *), int64_t slot,
                              int64_t base, int64_t above, Steps *st);

/* the least shape: one snapshot and one row each, no pooled rows; one slot of every loop, in bytes */
static int64_t least_shape(Program *p)
{
	for (int i = 0; i < p->body.len; i++)
		p->body.ops[i]->pool = NULL;
	return set_shape(p, 0, 1);
}

static int64_t fit_tapes(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *))
{
	int64_t slot = least_shape(p), base = plan(p);
	Steps st = {p, NULL, 0};
	int64_t planned = fit_tapes_from(p, o, budget, plan, slot, base, INT64_MAX, &st);
	free(st.l);
	return planned;
}

/* Every loop the same shape: the snapshots (or the --snapshots count) and
 * rows of fewest recomputed FLOPs by the sums of their bytes within the
 * budget, the least shape's plan taking `base` bytes (slot: one slot of
 * every loop); its FLOPs (INT64_MAX: none), its snapshots beyond one and
 * rows in *extra and *k. The fewer bytes where two recompute as much. */
static int64_t uniform_shape(Program *p, const CkptOptions *o, int64_t budget, int64_t slot, int64_t base, const LoopStep *l,
                             int nl, int64_t *extra_out, int64_t *k_out)
{
	int64_t maxn = 0;
	for (int i = 0; i < p->body.len; i++)
		if (p->body.ops[i]->kind == OP_REVOLVE && p->body.ops[i]->trip > maxn)
			maxn = p->body.ops[i]->trip;
	int64_t bytes, best_extra = o->snapshots ? o->snapshots - 1 : 0, best_k = 1;
	int64_t best = shape_cost(l, nl, best_extra, 1, &bytes), best_bytes = bytes;
	if (best < 0)
		best = INT64_MAX;
	for (int64_t k = 1; k <= maxn; k += k < 256 ? 1 : k / 32) {
		int64_t extra = o->snapshots ? o->snapshots - 1 : 0, cost = shape_cost(l, nl, 0, k, &bytes);
		if (cost < 0 || base + bytes > budget)
			break;
		if (!o->snapshots && slot)
			extra = (budget - base - bytes) / slot;
		cost = shape_cost(l, nl, extra, k, &bytes);
		if (cost < 0 || base + bytes > budget)
			break;
		/* the budget is a limit: the fewest snapshots that cost no more */
		for (int64_t lo = 0, hi = extra; !o->snapshots && lo < hi;) {
			int64_t mid = lo + (hi - lo) / 2, b;
			if (shape_cost(l, nl, mid, k, &b) <= cost)
				hi = mid;
			else
				lo = mid + 1;
			extra = hi;
		}
		shape_cost(l, nl, extra, k, &bytes);
		if (cost < best || (cost == best && bytes < best_bytes))
			best = cost, best_extra = extra, best_k = k, best_bytes = bytes;
	}
	*extra_out = best_extra, *k_out = best_k;
	return best;
}

static int count_revolves(const Program *p)
{
	int n = 0;
	for (int i = 0; i < p->body.len; i++)
		n += p->body.ops[i]->kind == OP_REVOLVE;
	return n;
}

/* No fewer FLOPs than fit_tapes_from recomputes from the least shape, set
 * (slot: one slot of every loop), whose plan takes `base` bytes or more:
 * the straight line's, and the fewer of the loops' uniform shape and their
 * own shapes chosen together in all the room above base (fit_tapes_from's
 * tries give them less, and stepping back recomputes more; more room
 * recomputes no more). 0 with --snapshots, and for one loop, which may
 * take pooled rows (fit_pool). The least shape is set again. */
static int64_t tapes_bound(Program *p, const CkptOptions *o, int64_t budget, int64_t slot, int64_t base, Steps *st)
{
	if (o->snapshots || count_revolves(p) < 2 || base > budget)
		return 0;
	const LoopStep *l = steps_of(st);
	int64_t e, k, least = uniform_shape(p, o, budget, slot, base, l, st->n, &e, &k), own = fit_loops(p, o, budget - base, l);
	least = own >= 0 && own < least ? own : least;
	set_shape(p, 0, 1);
	return least == INT64_MAX ? 0 : rev_sat_add(least, ir_recomputed_flops(p, &p->body));
}

/* fit_tapes from the least shape, set, and its plan's bytes (base); -1, nothing planned, where no shape it
 * could take recomputes `above` FLOPs or fewer (tapes_bound) */
static int64_t fit_tapes_from(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *), int64_t slot,
                              int64_t base, int64_t above, Steps *st)
{
	/* the least shape passes the budget: every other would too, and the search below would step back to it
	 * (the rows' search meets this in most of its choices under a tight budget: 1,953 of ResNet-152's 2,048) */
	if (base > budget && !o->snapshots)
		return base;
	if (above < INT64_MAX && tapes_bound(p, o, budget, slot, base, st) > above)
		return -1;
	const LoopStep *l = steps_of(st);
	int64_t best_extra, best_k, best = uniform_shape(p, o, budget, slot, base, l, st->n, &best_extra, &best_k);
	/* several loops: each its own shape, chosen together, where that recomputes no more and the plan fits (the
	 * room it is given lowered by the plan's excess, for alignment) */
	int nloops = count_revolves(p);
	for (int64_t tries = 0, room = budget - base; nloops > 1 && tries < 4 && room >= 0; tries++) {
		int64_t flops = fit_loops(p, o, room, l), planned;
		if (flops < 0 || flops > best)
			break;
		if ((planned = plan(p)) <= budget)
			return planned;
		room -= planned - budget;
	}
	set_shape(p, best_extra, best_k);
	/* alignment can cost a few bytes per tensor: step back until it fits */
	/* (the --snapshots count stays: if even one row is too many, the plan's error names the bytes) */
	int64_t planned;
	while ((planned = plan(p)) > budget && ((best_extra > 0 && !o->snapshots) || best_k > 1)) {
		if (best_extra > 0 && !o->snapshots)
			best_extra -= best_extra / 64 + 1;
		else
			best_k = best_k - best_k / 32 - 1 > 1 ? best_k - best_k / 32 - 1 : 1;
		set_shape(p, best_extra, best_k);
	}
	return fit_pool(p, o, budget, plan, best_extra, best_k, planned);
}

/* What the rows keep: every subset of the ROWS_EXHAUSTIVE largest values
 * the loops' adjoints could compute again, each fitted by fit_tapes and
 * planned; the fewest recomputed FLOPs that fit, then the most dropped
 * (rows_better); without a fit, the fewest bytes. Fewer candidates in
 * large programs and long loops: a plan costs about the program's size,
 * and a fit about the loops' steps (fit_tapes tries row counts up to the
 * longest trip). */
enum { ROWS_EXHAUSTIVE = 8 };

/* the fewest FLOPs a step can recompute with the rows as they keep now:
 * the straight line's, and each loop taped whole, so that only what its
 * taped steps compute again of their forward step is */
static int64_t rows_floor(Program *p)
{
	int64_t f = ir_recomputed_flops(p, &p->body);
	for (int i = 0; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind == OP_REVOLVE)
			f = rev_sat_add(f, rev_sat_mul(v->trip, ir_recomputed_flops(p, &v->body2)));
	}
	return f;
}

/* fit_rows' choices by what they were made from: the budget's search
 * (compiler/budget.c) plans the same program in several scratch copies,
 * the shares of the straight line often leaving it as it was (ResNet-152
 * imported, at half its peak: 12 fits of 2 programs, 1,027 plans each,
 * 18 of 19 s), and each fit plans every subset of rows. The key: the
 * program as printed (the straight line has been fitted by then: the
 * print shows it, and the loops' shapes), the budget, --snapshots (the
 * only option the fit reads), the plan it is measured by, and the fields
 * of the program the memory plan reads that it does not print. */
typedef struct {
	uint64_t key;
	unsigned best;
	bool masks;
} RowsChoice;

enum { ROWS_MEMO = 32 };
static RowsChoice rows_memo[ROWS_MEMO];
static int nrows_memo;

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
	const unsigned char *b = data;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* the key of fit_rows' inputs, 0 where it cannot be made */
static uint64_t rows_key(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *))
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return 0;
	ir_print(f, p);
	fprintf(f, "\n%lld %lld %p %d %d %d %d %lld %lld %d %d %d %d %d %d\n", (long long)budget, (long long)o->snapshots,
	        (void *)(uintptr_t)plan, p->real, p->mixed, p->optimizer, p->ranks, (long long)p->device_mem,
	        (long long)p->offload_cost, p->graph_least, p->pack_effort, p->fit_probe, p->values.len, p->nforward,
	        p->sweep_fits);
	fclose(f);
	uint64_t h = fnv(1469598103934665603ull, text, len);
	free(text);
	return h ? h : 1;
}

static void fit_rows_search(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *),
                            const int *cand, int n, unsigned *best, bool *best_masks);
static void least_rows_search(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *),
                              const int *cand, int n, unsigned *best, bool *best_masks);

/* the rows with the values of cand[] in m (bit i: cand[i]) dropped, masks in bits or not (ckpt_rows_apply) */
static CkptRows *rows_choose(Program *p, const int *cand, int n, unsigned m, bool masks)
{
	int drop[ROWS_EXHAUSTIVE], k = 0;
	for (int i = 0; i < n; i++)
		if (m >> i & 1)
			drop[k++] = cand[i];
	return ckpt_rows_apply(p, drop, k, masks);
}

static void fit_rows(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *))
{
	int most = ROWS_EXHAUSTIVE, cand[ROWS_EXHAUSTIVE];
	int64_t steps = 0;
	for (int i = 0; i < p->body.len; i++)
		if (p->body.ops[i]->kind == OP_REVOLVE)
			steps = rev_sat_add(steps, p->body.ops[i]->trip);
	while (most > 0 && (((int64_t)p->values.len << most) > ((int64_t)1 << 24) ||
	                    (steps > ((int64_t)1 << 20) >> most)))
		most--;
	/* the first plan adds the optimizer's state to the values: before the undo's mark */
	plan(p);
	/* a replay reads the loop's parameters where its adjoint does not: they stay resident (stream_pass) */
	int n = ckpt_rows_candidates(p, cand, most, plan == mem_plan && !o->stream_all);
	unsigned best = 0;
	bool best_masks = false;
	uint64_t key = n > 0 ? rows_key(p, o, budget, plan) : 0;
	int at = -1;
	/* the memo is a ring of ROWS_MEMO once that many choices were made */
	for (int i = 0; i < nrows_memo && i < ROWS_MEMO && key; i++)
		if (rows_memo[i].key == key)
			at = i;
	if (at >= 0) {
		best = rows_memo[at].best, best_masks = rows_memo[at].masks;
	} else {
		if (plan == mem_plan && p->plan_params + p->plan_grads + p->plan_opt + p->plan_inputs > budget)
			least_rows_search(p, o, budget, plan, cand, n, &best, &best_masks);
		else
			fit_rows_search(p, o, budget, plan, cand, n, &best, &best_masks);
		if (key)
			rows_memo[nrows_memo++ % ROWS_MEMO] = (RowsChoice){key, best, best_masks};
	}
	rows_choose(p, cand, n, best, best_masks);
	fit_tapes(p, o, budget, plan);
}

/* the best choice of rows so far: its recomputed FLOPs (INT64_MAX: none fits), planned bytes, and place
 * in the search's order (masks << n | the subset's place, the most dropped first: rows_at) */
typedef struct {
	int64_t flops, bytes, at;
} RowsBest;

/* Fewer FLOPs wins; of choices that recompute the same, the first in the order, which drops the most (the
 * smallest rows); where none fits, the fewest bytes. Ties are not broken by bytes where they fit: the rows
 * search would have to plan every choice that ties the best, however its floor lies (ResNet-152 imported at
 * Feng & Huang's cut + 1: 55 of the 64 choices it planned whole tied, their bytes within 0.02%) */
static bool rows_better(RowsBest a, RowsBest b)
{
	if (a.flops != b.flops)
		return a.flops < b.flops;
	if (a.flops == INT64_MAX && a.bytes != b.bytes)
		return a.bytes < b.bytes;
	return a.at < b.at;
}

/* a choice's place in the order, and back: the subsets from m = 2^n - 1 (every candidate dropped) down */
static int64_t rows_at(int n, int masks, int64_t m) { return (int64_t)masks << n | (((int64_t)1 << n) - 1 - m); }
static unsigned rows_subset(int n, int64_t at) { return (unsigned)((((int64_t)1 << n) - 1) - (at & (((int64_t)1 << n) - 1))); }

/* marks every value the ops of b and the blocks inside it read */
static void tapes_read(Block *b, uint8_t *mark)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			mark[op->in[k]] = 1;
		tapes_read(&op->body, mark);
		tapes_read(&op->body2, mark);
		tapes_read(&op->body3, mark);
	}
}

/* the bytes of the tapes p's ops read, no fewer than its plan places (unpitched, unaligned); mark: a scratch
 * array of *cap bytes, grown here */
static int64_t tapes_low(Program *p, uint8_t **mark, int *cap)
{
	int nv = p->values.len;
	if (nv + 1 > *cap) {
		*cap = 2 * (nv + 1);
		*mark = realloc(*mark, (size_t)*cap);
	}
	memset(*mark, 0, (size_t)nv + 1);
	tapes_read(&p->body, *mark);
	int64_t bytes = 0;
	for (int v = 0; v < nv; v++) {
		const Value *x = &p->values.data[v];
		if ((*mark)[v] && x->kind == VK_VAR && x->vclass == VC_TAPE)
			bytes += ir_bytes(p, x->type);
	}
	return bytes;
}

/* fit_rows_search's subsets with masks in bits or not (masks), into *best. Each is bounded first from the
 * bytes no packing of its least shape goes below: from mem_floor_outside of the rows dropping none plus the
 * bytes of its own tapes, made once for all the subsets (on ResNet-152 imported at Feng & Huang's cut + 1,
 * every choice's floor was that bound's bytes plus the same constant of its search, 2,044 choices over four
 * searches), then, where that does not end it, from its whole floor (mem_plan_floor, about 1 ms a choice
 * there) */
static void rows_search_part(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *),
                             const int *cand, int n, int masks, bool bounded, RowsBest *best)
{
	int64_t outside = -1;
	uint8_t *mark = NULL;
	int cap = 0;
	if (bounded && plan == mem_plan) {
		static const int none[1];
		CkptRows *r = ckpt_rows_apply(p, none, 0, masks);
		least_shape(p);
		outside = mem_floor_outside(p);
		ckpt_rows_undo(r);
	}
	for (int64_t m = (1 << n) - 1; m >= 0; m--) {
		CkptRows *r = rows_choose(p, cand, n, (unsigned)m, masks);
		/* a choice that cannot recompute fewer FLOPs than the best fit, however shaped, is not fitted,
		 * nor one fitted that recomputes more planned */
		if (bounded && best->flops < INT64_MAX && rows_floor(p) >= best->flops) {
			ckpt_rows_undo(r);
			continue;
		}
		int64_t slot = least_shape(p), at = rows_at(n, masks, m);
		Steps st = {p, NULL, 0};
		/* bounded first from the bytes no packing of the least shape goes below, which is cheaper than
		 * its plan (on ResNet-152 at their cut + 1, most choices end there): one that cannot fit where
		 * another did, nor recompute fewer FLOPs, and where none fits yet, one that cannot plan fewer
		 * bytes */
		if (bounded && plan == mem_plan && best->bytes < INT64_MAX) {
			bool cut = false;
			for (int exact = 0; exact < 2 && !cut; exact++) {
				int64_t floor = exact ? mem_plan_floor(p) : outside + tapes_low(p, &mark, &cap);
				/* (on equal bytes the best, found earlier in the order, stays) */
				bool fewer = floor < best->bytes;
				cut = floor > budget ? best->flops < INT64_MAX || !fewer
				                     : best->flops < INT64_MAX && tapes_bound(p, o, budget, slot, floor, &st) >= best->flops;
			}
			if (cut) {
				free(st.l);
				ckpt_rows_undo(r);
				continue;
			}
		}
		int64_t above = bounded && best->flops < INT64_MAX ? best->flops - 1 : INT64_MAX;
		int64_t planned = fit_tapes_from(p, o, budget, plan, slot, plan(p), above, &st);
		free(st.l);
		if (planned < 0) {
			ckpt_rows_undo(r);
			continue;
		}
		int64_t flops = ckpt_recomputed_flops(p), bytes = flops > best->flops ? INT64_MAX : planned;
		flops = bytes <= budget ? flops : INT64_MAX;
		ckpt_rows_undo(r);
		RowsBest here = {flops, bytes, at};
		if (rows_better(here, *best))
			*best = here;
	}
	free(mark);
}

/* the subsets with masks in bits, searched in a child process (util_child_start) beside those without */
typedef struct {
	Program *p;
	const CkptOptions *o;
	int64_t budget;
	int64_t (*plan)(Program *);
	const int *cand;
	int n;
	bool bounded;
} RowsArgs;

static void rows_search_child(void *arg, void *out)
{
	RowsArgs *a = arg;
	RowsBest *b = out;
	*b = (RowsBest){INT64_MAX, INT64_MAX, INT64_MAX};
	rows_search_part(a->p, a->o, a->budget, a->plan, a->cand, a->n, 1, a->bounded, b);
}

/* Every subset of cand[0..n), with and without masks, fitted and planned:
 * the fewest recomputed FLOPs that fit, then the first in the order
 * (without masks first, then from every candidate dropped down: rows_at);
 * into *best and *best_masks. The choices are tried with the most dropped
 * first (the smallest rows, which leave the most room: ResNet-152
 * imported under a budget fits best with all 8 dropped), so that the
 * first fits bound the rest: a choice whose FLOPs cannot be fewer than
 * the best fit's, however shaped (rows_floor, and tapes_bound from the
 * bytes no packing goes below), is not fitted, nor one that can only tie
 * it (it comes later). The order changes which are fitted, not the
 * choice: ResNet-152 imported at Feng & Huang's cut + 1 fitted all 2,048
 * choices of its 4 searches, 3 to 10 plans each (9 s of its 11.9); now most
 * end at tapes_bound, the whole budget in 4.7 s, the same plan.
 * Where the search has two threads and dpc two CPUs, the choices with masks
 * in bits are searched in a child process beside the others (the memory
 * plan is not made for threads): each half is bounded by its own best
 * only, and the better of the two is the one the whole search finds, since
 * a bound only passes over choices that cannot be better (ResNet-152
 * imported with its loops, at Feng & Huang's cut + 1 from its .dp: 2.96 to
 * 2.06 s, the same plan).
 * DPC_ROWS_UNBOUNDED=1 fits every choice (tests/ckpt checks the plans are
 * the same). */
static void fit_rows_search(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *),
                            const int *cand, int n, unsigned *best, bool *best_masks)
{
	const char *all = getenv("DPC_ROWS_UNBOUNDED");
	bool bounded = !all || strcmp(all, "1");
	RowsBest b = {INT64_MAX, INT64_MAX, INT64_MAX}, c = b;
	UtilChild child = {-1, -1};
	RowsArgs args = {p, o, budget, plan, cand, n, bounded};
	if (p->search_threads > 1 && n >= 4 && util_cpus() > 1)
		child = util_child_start(rows_search_child, &args, sizeof c);
	/* masks in bits save bytes for nothing, but leave a relu's argument to be computed again where a dropped value needs it */
	rows_search_part(p, o, budget, plan, cand, n, 0, bounded, &b);
	/* a child that came back with nothing: its half searched here */
	if (util_child_result(child, &c, sizeof c)) {
		if (rows_better(c, b))
			b = c;
	} else {
		rows_search_part(p, o, budget, plan, cand, n, 1, bounded, &b);
	}
	*best = b.at == INT64_MAX ? 0 : rows_subset(n, b.at);
	*best_masks = b.at != INT64_MAX && b.at >> n;
}

/* the bytes planned with the values of cand[] in m dropped from the rows (masks in bits or not), fitted */
static int64_t rows_bytes(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *), const int *cand,
                          int n, unsigned m, bool masks)
{
	CkptRows *r = rows_choose(p, cand, n, m, masks);
	int64_t bytes = fit_tapes(p, o, budget, plan);
	ckpt_rows_undo(r);
	return bytes;
}

/* No choice fits where the budget is below the regions every plan holds
 * (min-memory fits to 1 byte): the fewest bytes are wanted, and planning
 * every subset (512) was half of min-memory's time on ResNet-152 imported.
 * A descent instead: from every candidate dropped (the smallest rows), with
 * masks in bits and without, the one change of a candidate or of the masks
 * that plans the fewest bytes is made while it plans fewer; n + 1 plans a
 * step. */
static void least_rows_search(Program *p, const CkptOptions *o, int64_t budget, int64_t (*plan)(Program *),
                              const int *cand, int n, unsigned *best, bool *best_masks)
{
	unsigned m = n ? (1u << n) - 1 : 0;
	int64_t with = rows_bytes(p, o, budget, plan, cand, n, m, true), without = rows_bytes(p, o, budget, plan, cand, n, m, false);
	bool masks = with < without;
	int64_t bytes = masks ? with : without;
	for (;;) {
		unsigned step_m = m;
		bool step_masks = masks;
		int64_t step = bytes;
		for (int i = 0; i <= n; i++) {
			unsigned mm = i < n ? m ^ 1u << i : m;
			bool mk = i < n ? masks : !masks;
			int64_t b = rows_bytes(p, o, budget, plan, cand, n, mm, mk);
			if (b < step)
				step = b, step_m = mm, step_masks = mk;
		}
		if (step >= bytes)
			break;
		bytes = step, m = step_m, masks = step_masks;
	}
	*best = m, *best_masks = masks;
}

/* `rows` host slots of op's state, aligned as the host pool aligns them */
static int64_t host_rows_bytes(Program *p, Op *op, int64_t rows)
{
	int64_t b = 0;
	for (int k = 0; k < op->ncarry; k++) {
		Type t = p->values.data[op->snap[k]].type;
		t.dim[0] = rows;
		b += mem_aligned(p, t);
	}
	return b;
}

/* the plan the budget is measured by: streaming when it must or will */
static int64_t (*budget_plan(Program *p, const CkptOptions *o))(Program *)
{
	bool streams = o->min_plan && (o->stream_all || (o->may_stream && mem_plan(p) > p->device_mem));
	return streams ? o->min_plan : mem_plan;
}

/* The parameters stay resident if they fit with the fewest snapshots (auto);
 * else, and with --stream params, the budget is measured as if every
 * parameter that can stream did. The device takes as many snapshot rows as
 * the budget leaves. Unless --stream none, the rest of the count asked for
 * (--snapshots), or of the default count when the parameters stream, lives in
 * host memory: the device's rows then hold the highest slots and the staging
 * row. Loops over 2^28 steps keep theirs on the device: counting their copies
 * would take too long. */
static void place_snapshots(Program *p, const CkptOptions *o)
{
	int64_t budget = p->device_mem;
	int64_t *want = ar_alloc(sizeof(int64_t) * (size_t)(p->body.len + 1));
	for (int i = 0; i < p->body.len; i++) {
		want[i] = p->body.ops[i]->kind == OP_REVOLVE ? p->body.ops[i]->nsnap : 0;
		p->body.ops[i]->no_sweep = false; /* each fit chooses again (ckpt_fill_slots) */
	}
	set_snapshots(p, 0);
	int64_t (*plan)(Program *) = budget_plan(p, o);
	bool streams = plan != mem_plan;
	bool tapes = false;
	for (int i = 0; i < p->body.len; i++)
		tapes |= p->body.ops[i]->kind == OP_REVOLVE && p->body.ops[i]->ktape;
	if (tapes) {
		/* the rows' contents, the rows and the snapshots are chosen together, all on the device */
		fit_rows(p, o, budget, plan);
		return;
	}
	fit_snapshots(p, budget, plan);
	bool offload = o->may_stream && (o->snapshots || streams);
	int64_t host_left = o->host_mem && o->min_host ? o->host_mem - o->min_host(p) : INT64_MAX;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if (op->kind != OP_REVOLVE)
			continue;
		int64_t dev = op->nsnap, nhost = want[i] - dev + 1;
		if (want[i] <= dev || !offload || op->trip > ((int64_t)1 << 28)) {
			/* all on the device: the count asked for, which the plan may refuse, or the fitted one */
			if (o->snapshots)
				set_slots(p, op, want[i], 0);
			continue;
		}
		/* the default count tops up only as far as --host-mem allows */
		if (!o->snapshots && host_rows_bytes(p, op, nhost) > host_left) {
			nhost = host_left / host_rows_bytes(p, op, 1) + 1;
			while (nhost > 1 && host_rows_bytes(p, op, nhost) > host_left)
				nhost--;
		}
		if (nhost < 2 && !o->snapshots)
			continue;
		host_left -= host_rows_bytes(p, op, nhost);
		set_slots(p, op, dev - 1 + nhost, nhost);
	}
}

/* The forward loop saves the segments' starts (Op.sweep; not into host
 * slots, which it cannot reach): the first sweep costs nothing, but the
 * snapshots are held from the forward loop on. Under a budget that holds
 * from the start (the fits measure it so); planned for the least bytes
 * (min-memory, or fitted to o->fit), where it adds no peak. */
static void sweep_all(Program *p, const CkptOptions *o)
{
	bool frugal = o->least || o->fit;
	int effort = p->pack_effort;
	int64_t (*plan)(Program *) = NULL, before = -1;
	p->pack_effort = 2;
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind != OP_REVOLVE || v->nhost || v->swept || v->no_sweep)
			continue;
		if (frugal && !plan)
			plan = budget_plan(p, o), before = plan(p);
		set_swept(v, true);
		if (frugal && plan(p) > before)
			set_swept(v, false);
	}
	p->pack_effort = effort;
}

static Program *schedule(Program *p, const CkptOptions *o)
{
	/* fitted to --device-mem; without one (or under min-memory) the loops take their least memory */
	bool fitted = p->device_mem && !o->least, autofit = fitted && o->mode == CKPT_AUTO;
	p->offload_cost = o->mode == CKPT_AUTO ? o->offload_cost : 0;
	p->sweep_fits = o->mode == CKPT_AUTO && !o->least && !o->fit;
	p->search_threads = o->threads > 1 ? 2 : 1;
	p->least_past = o->least_past;
	switch (o->mode) {
	case CKPT_NONE:
		return p;
	case CKPT_BINOMIAL:
	case CKPT_AUTO:
		for (int i = p->nforward; i < p->body.len; i++) {
			Op *op = p->body.ops[i];
			if (op->kind == OP_LOOP && op->primal)
				p->body.ops[i] = revolve(p, op, o);
		}
		CkptSteps *each = o->each ? ckpt_steps_each(p) : NULL;
		if (fitted)
			place_snapshots(p, o);
		if (autofit && o->line_share > 0 && o->line_share < 1) {
			/* the straight line first, in its share, the loops in their least shape; then the loops */
			set_shape(p, 0, 1);
			/* the share only makes room for the loops: a fit that misses it goes on as it is, without the
			 * least search (the fit to the whole budget below runs it where that one misses) */
			p->fit_probe = true;
			ckpt_graph_fit(p, (int64_t)((double)p->device_mem * o->line_share), budget_plan(p, o), 12);
			p->fit_probe = false;
			place_snapshots(p, o);
		}
		/* straight-line code recomputes what the budget cannot keep; the loops refit around it */
		if (autofit && ckpt_graph_fit(p, p->device_mem, budget_plan(p, o), 12))
			place_snapshots(p, o);
		if (autofit && !o->snapshots && p->sweep_fits)
			ckpt_fill_slots(p, p->device_mem, budget_plan(p, o));
		if (o->least)
			ckpt_graph_least(p, budget_plan(p, o));
		if (each)
			ckpt_steps_keep(each, budget_plan(p, o));
		/* unfitted: masks in bits cost nothing, and rows are least */
		if (o->mode == CKPT_AUTO && !fitted && !o->full_rows)
			ckpt_rows_apply(p, NULL, 0, true);
		for (int i = p->nforward; i < p->body.len && !fitted; i++)
			if (p->body.ops[i]->kind == OP_REVOLVE && p->body.ops[i]->ktape)
				least_rows(p, p->body.ops[i], o);
		if (o->mode == CKPT_AUTO)
			sweep_all(p, o);
		return p;
	}
	unreachable();
}

Program *ckpt_pass(Program *p, const CkptOptions *o)
{
	/* the searches plan scratch values and take them back by length: the state's variables come first */
	mem_optimizer_state(p);
	if (!o->fit)
		return schedule(p, o);
	/* fitted to o->fit; the user's budget, if any, is checked by the memory plan as before */
	int64_t user = p->device_mem;
	p->device_mem = o->fit;
	p = schedule(p, o);
	p->device_mem = user;
	/* min-memory asked for the least peak: the straight line's fit to o->fit was its least */
	p->graph_least = true;
	return p;
}

/* The least shape gives each loop the fewest snapshots, though the plan's
 * peak may lie elsewhere (ResNet-152 imported: its third stage's 35 steps
 * reversed from one slot, 595 steps recomputed, while the peak is the first
 * stage's). Each revolve whose slots are all on the device takes more, one
 * loop at a time, the most that keep the plan at or below its bytes: slots
 * doubled while they fit, then the count between found by bisection. */
/* v's slots, all on the device, its sweep as it was (set_slots would set it by Program.sweep_fits, which
 * min-memory's fit leaves off: sweep_all chose it) */
static void device_slots(Program *p, Op *v, int64_t s, bool swept)
{
	set_slots(p, v, s, 0);
	set_swept(v, swept);
}

/* the most slots, from lo (which fits) up, all on the device and its sweep
 * as given, that keep the plan at or below limit: doubled while they fit,
 * then the count between found by bisection; v is left with them */
static int64_t most_slots(Program *p, Op *v, bool swept, int64_t lo, int64_t limit, int64_t (*plan)(Program *))
{
	int64_t hi = v->trip + 1;
	/* lo fits; hi (or the trip count and beyond) does not, or is past the end */
	for (int64_t s = 2 * lo; s <= v->trip; s *= 2) {
		device_slots(p, v, s, swept);
		if (plan(p) > limit) {
			hi = s;
			break;
		}
		lo = s;
	}
	if (hi > v->trip && lo < v->trip) {
		device_slots(p, v, v->trip, swept);
		if (plan(p) <= limit)
			lo = v->trip;
		else
			hi = v->trip;
	}
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		device_slots(p, v, mid, swept);
		if (plan(p) <= limit)
			lo = mid;
		else
			hi = mid;
	}
	device_slots(p, v, lo, swept);
	return lo;
}

void ckpt_more_snapshots(Program *p, int64_t (*plan)(Program *))
{
	int64_t before = plan(p);
	for (int i = 0; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind == OP_REVOLVE && !v->nhost && v->nsnap < v->trip)
			most_slots(p, v, v->swept, v->nsnap, before, plan);
	}
	plan(p);
}

/* Under a budget the forward loops save every loop's segment starts
 * (Op.sweep): the first sweep costs nothing, but the snapshots are held
 * from the forward on, across the turn where the straight line holds the
 * most, and fit_snapshots gives every loop as many. A loop may do better
 * advancing from its start: one pass more over its steps, its snapshots
 * held only while its adjoint runs, so that more fit (ResNet-152 imported,
 * at 1.05 GB: its 35-step stage reversed from one slot, 595 steps
 * recomputed). Once the straight line has its choice, each loop, the
 * most recomputing first, takes the most slots that keep the plan within
 * the budget (the fits' sums of bytes leave room where the loops' slots
 * are not all live at once); one without rows also advancing from its
 * start instead of swept or the reverse, taken where that recomputes less
 * (rows are swept: their forward loop tapes the last steps). */
void ckpt_fill_slots(Program *p, int64_t budget, int64_t (*plan)(Program *))
{
	if (plan(p) > budget)
		return;
	int n = 0;
	int64_t *order = malloc(sizeof(int64_t) * 2 * (size_t)(p->body.len + 1));
	for (int i = 0; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind == OP_REVOLVE && !v->nhost && !v->pool && v->trip > 1)
			order[2 * n] = revolve_flops(p, v), order[2 * n + 1] = i, n++;
	}
	qsort(order, (size_t)n, 2 * sizeof(int64_t), ckpt_by_first_down);
	for (int j = 0; j < n; j++) {
		Op *v = p->body.ops[order[2 * j + 1]];
		bool was = v->swept;
		int64_t s = most_slots(p, v, was, v->nsnap, budget, plan);
		if (v->ktape) /* rows are swept: their forward loop tapes the last steps */
			continue;
		int64_t f = revolve_flops(p, v);
		v->no_sweep = was;
		device_slots(p, v, 1, !was);
		if (plan(p) <= budget) {
			most_slots(p, v, !was, 1, budget, plan);
			if (revolve_flops(p, v) < f)
				continue;
		}
		v->no_sweep = !was;
		device_slots(p, v, s, was);
	}
	free(order);
	plan(p);
}

/* what v's schedule recomputes in FLOPs: whole steps (advances, and with a
 * tape the taped ones), and what each taped step computes again of its
 * forward step to run its adjoint */
static int64_t revolve_flops(Program *p, Op *v)
{
	int64_t per = ir_block_flops(p, &v->body, 0, v->body.len), again = ir_recomputed_flops(p, &v->body2);
	int64_t f = rev_sat_add(rev_sat_mul(rev_op_cost(v), per), rev_sat_mul(v->trip, again));
	return v->replay ? rev_sat_add(f, rev_sat_mul(rev_op_replays(v), replay_flops(p, v))) : f;
}

int64_t ckpt_recomputed_flops(Program *p)
{
	int64_t flops = 0;
	for (int i = 0; i < p->body.len; i++)
		if (p->body.ops[i]->kind == OP_REVOLVE)
			flops = rev_sat_add(flops, revolve_flops(p, p->body.ops[i]));
	return rev_sat_add(flops, ir_recomputed_flops(p, &p->body));
}

int64_t ckpt_cost(Program *p)
{
	int64_t cost = ckpt_recomputed_flops(p);
	for (int i = 0; i < p->nforward; i++)
		if (p->body.ops[i]->kind == OP_OFFLOAD)
			cost = rev_sat_add(cost, 2 * p->offload_cost * ir_bytes(p, ir_vtype(p, p->body.ops[i]->in[0])));
	return cost;
}

/* ---- --emit=schedule and --schedule-json ---- */

/* data parallelism's bytes a step: every trained parameter's gradient summed
 * across the ranks, and under --ranks the resident ones gathered from their
 * shares */
static void collective_bytes(Program *p, int64_t *grads, int64_t *resident)
{
	*grads = *resident = 0;
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->buffer || q->grad < 0)
			continue;
		*grads += ir_bytes(p, q->type);
		*resident += q->streamed ? 0 : ir_bytes(p, q->type);
	}
}

typedef struct {
	FILE *f;
	int64_t count;
} Actions;

static void print_action(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	static const char *names[] = {"advance", "save", "restore", "taped", "untape"};
	Actions *x = ctx;
	fprintf(x->f, "%s[\"%s\", %lld, %lld, %d]", x->count++ ? ", " : "", names[a], (long long)step, (long long)to, slot);
}

void ckpt_print_schedule(FILE *f, Program *p, bool json, const char *extra)
{
	int64_t fwd = 0, rec = 0, rec_flops = 0, fwd_flops = ir_block_flops(p, &p->body, 0, p->nforward);
	int nloops = 0;
	if (json)
		fprintf(f, "{\n  \"loops\": [");
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if (op->kind != OP_LOOP || op->counter != RT_COUNT_FORWARD)
			continue;
		Op *v = NULL;
		for (int j = p->nforward; j < p->body.len; j++)
			if (p->body.ops[j]->kind == OP_REVOLVE && p->body.ops[j]->primal == op)
				v = p->body.ops[j];
		int64_t n = op->trip, s = v ? v->nsnap : n, r = v && !v->swept ? rev_binomial_r(n, s) : 0;
		int64_t cost = v ? rev_op_cost(v) : 0;
		const char *kind = !v ? "store-everything" : v->pool ? "pooled" : v->swept ? "sweep" : "binomial";
		int64_t per = ir_block_flops(p, &op->body, 0, op->body.len), taped = v ? ir_recomputed_flops(p, &v->body2) : 0;
		int64_t again = v ? revolve_flops(p, v) : 0;
		fwd += n;
		rec += cost;
		rec_flops += again;
		const char *flops = ar_printf(", %lld FLOPs a step (%lld again in a taped step), recomputed FLOPs %lld (%.4g of one forward)",
		                              (long long)per, (long long)taped, (long long)again,
		                              fwd_flops ? (double)again / (double)fwd_flops : 0.0);
		const char *where = ar_printf("%s:%d:%d", op->loc.file, op->loc.line, op->loc.col);
		int64_t kb, af;
		if (!json) {
			if (v && v->swept)
				fprintf(f, "loop at %s: n %lld, sweep with s %lld snapshots saved by the forward loop%s: forward steps %lld, "
				        "recomputed steps %lld%s", where, (long long)n, (long long)s,
				        v->pool ? ar_printf(", pooled: %lld rows hold the taped actions and the snapshots beyond the first, "
				                            "the last %lld steps taped by the forward loop", (long long)v->ktape,
				                            (long long)rev_op_tail(v))
				        : v->ktape ? ar_printf(", taped actions of up to %lld steps, the last %lld taped by the forward loop",
				                               (long long)v->ktape, (long long)rev_op_tail(v)) : "", (long long)n,
				        (long long)cost, flops);
			if (v && v->swept && v->ktape) {
				/* what a row keeps, and what the adjoint step computes again */
				int nk = ckpt_rows_names(NULL, p, v, false, false, &kb), na = ckpt_rows_names(NULL, p, v, true, false, &af);
				fprintf(f, "; a row keeps %d value%s (%lld bytes): ", nk, nk == 1 ? "" : "s", (long long)kb);
				ckpt_rows_names(f, p, v, false, false, &kb);
				if (na)
					fprintf(f, "; its adjoint step computes %d op%s again (%lld FLOPs): ", na, na == 1 ? "" : "s", (long long)af);
				ckpt_rows_names(na ? f : NULL, p, v, true, false, &af);
				if (v->replay)
					fprintf(f, "; the state is not in the rows: each taped run keeps its first (%lld bytes), and %lld "
					        "replays of %lld FLOPs make it again for the adjoints", (long long)state_rows(p, v),
					        (long long)rev_op_replays(v), (long long)replay_flops(p, v));
			}
			if (v && v->swept)
				fputs("\n", f);
			else if (v)
				fprintf(f, "loop at %s: n %lld, binomial with s %lld snapshots%s, r %lld: forward steps %lld, recomputed steps %lld%s\n",
				        where, (long long)n, (long long)s, v->nhost ? ar_printf(" (%d in host memory)", v->nhost) : "",
				        (long long)r, (long long)n, (long long)cost, flops);
			else
				fprintf(f, "loop at %s: n %lld, store everything: forward steps %lld, recomputed steps 0%s\n", where,
				        (long long)n, (long long)n, flops);
			continue;
		}
		fprintf(f, "%s\n    {\"at\": \"%s\", \"n\": %lld, \"schedule\": \"%s\", \"s\": %lld, \"host_snapshots\": %d, "
		        "\"r\": %lld, \"tape_rows\": %lld, \"forward_steps\": %lld, \"recomputed_steps\": %lld, \"flops_per_step\": %lld, "
		        "\"taped_recomputed_flops_per_step\": %lld, \"recomputed_flops\": %lld", nloops ? "," : "", where, (long long)n,
		        kind, (long long)s, v ? v->nhost : 0, (long long)r, v ? (long long)v->ktape : (long long)n, (long long)n,
		        (long long)cost, (long long)per, (long long)taped, (long long)again);
		if (v)
			fprintf(f, ", \"snapshot_bytes\": %lld, \"tape_row_bytes\": %lld", (long long)state_bytes(p, v),
			        (long long)(v->ktape ? row_bytes(p, v) : 0));
		if (v && v->ktape) {
			fprintf(f, ", \"row_kept\": [");
			ckpt_rows_names(f, p, v, false, true, &kb);
			fprintf(f, "], \"row_recomputed\": [");
			ckpt_rows_names(f, p, v, true, true, &af);
			fprintf(f, "], \"state_replays\": %lld, \"replay_flops\": %lld", (long long)rev_op_replays(v),
			        (long long)replay_flops(p, v));
		}
		if (v && n <= 1000) {
			/* small loops: the whole action list; large ones are generated as they run */
			Actions x = {f, 0};
			fprintf(f, ", \"actions\": [");
			rev_op_schedule(v, print_action, &x);
			fprintf(f, "]");
		}
		fprintf(f, "}");
		nloops++;
	}
	int64_t total = p->arena_bytes;
	rec_flops = rev_sat_add(rec_flops, ir_recomputed_flops(p, &p->body));
	if (json) {
		fprintf(f, "%s],\n", nloops ? "\n  " : "");
		ckpt_graph_print(f, p, true);
		fprintf(f, "  \"forward_steps\": %lld,\n  \"recomputed_steps\": %lld,\n", (long long)fwd, (long long)rec);
		fprintf(f, "  \"forward_flops\": %lld,\n  \"recomputed_flops\": %lld,\n  \"recomputed_fraction\": %.9g,\n",
		        (long long)fwd_flops, (long long)rec_flops, fwd_flops ? (double)rec_flops / (double)fwd_flops : 0.0);
		fprintf(f, "  \"optimizer\": \"%s\",\n  \"precision\": \"%s%s\",\n", p->optimizer == OPT_ADAM ? "adam" : "sgd",
		        ir_dt_name(p->real), p->mixed ? "-mixed" : "");
		fprintf(f, "  \"streamed\": [");
		for (int i = 0, n = 0; i < p->params.len; i++)
			if (p->params.data[i].streamed)
				fprintf(f, "%s\"%s\"", n++ ? ", " : "", p->params.data[i].name);
		fprintf(f, "],\n  \"transfers\": {\"h2d_bytes\": %lld, \"d2h_bytes\": %lld, \"device_slots\": %d, "
		        "\"prefetch_distance\": %d, \"forward_h2d_bytes\": %lld},\n",
		        (long long)p->h2d_bytes[1], (long long)p->d2h_bytes[1], p->nslots, p->ahead, (long long)p->h2d_bytes[0]);
		if (p->stream_numel)
			fprintf(f, "  \"host_update\": {\"elements\": %lld, \"h2d_bytes\": %lld, \"d2h_bytes\": %lld, "
			        "\"h2d_bytes_per_element\": %.9g, \"d2h_bytes_per_element\": %.9g, \"host_grad_bytes\": %lld},\n",
			        (long long)p->stream_numel, (long long)p->stream_h2d, (long long)p->stream_d2h,
			        (double)p->stream_h2d / (double)p->stream_numel, (double)p->stream_d2h / (double)p->stream_numel,
			        (long long)p->stream_grads);
		int64_t grads, resident;
		collective_bytes(p, &grads, &resident);
		fprintf(f, "  \"ranks\": %d,\n  \"allreduce_bytes_per_step\": %lld,\n  \"allgather_bytes_per_step\": %lld,\n",
		        p->ranks > 1 && p->optimizer == OPT_ADAM ? p->ranks : 1, (long long)grads,
		        (long long)(p->ranks > 1 && p->optimizer == OPT_ADAM ? resident : 0));
		fprintf(f, "  \"peak_host_bytes\": %lld,\n", (long long)p->host_bytes);
		int64_t bound = mem_peak_bound(p);
		fprintf(f, "  \"peak_lower_bound\": %lld,\n  \"peak_gap\": %.9g,\n", (long long)bound,
		        total ? (double)(total - bound) / (double)total : 0.0);
		fprintf(f, "  \"peak_device_bytes\": {\"params\": %lld, \"grads\": %lld, \"optimizer\": %lld, \"inputs\": %lld, "
		        "\"tape\": %lld, \"snapshots\": %lld, \"slots\": %lld, \"work\": %lld, \"total\": %lld}%s%s\n}\n",
		        (long long)p->plan_params, (long long)p->plan_grads, (long long)p->plan_opt, (long long)p->plan_inputs,
		        (long long)p->plan_tape, (long long)p->plan_snap, (long long)p->plan_slots, (long long)p->plan_work,
		        (long long)total, extra ? ",\n  " : "", extra ? extra : "");
		return;
	}
	ckpt_graph_print(f, p, false);
	fprintf(f, "per training step: forward steps %lld, recomputed steps %lld; forward FLOPs %lld, recomputed FLOPs %lld "
	        "(%.4g of one forward)\n", (long long)fwd, (long long)rec, (long long)fwd_flops, (long long)rec_flops,
	        fwd_flops ? (double)rec_flops / (double)fwd_flops : 0.0);
	if (p->nslots) {
		fprintf(f, "streamed from host memory:");
		for (int i = 0; i < p->params.len; i++)
			if (p->params.data[i].streamed)
				fprintf(f, " %s", p->params.data[i].name);
		fprintf(f, "; %d device slots each, prefetch distance %d\n", p->nslots, p->ahead);
	}
	fprintf(f, "per training step: host->device %lld bytes, device->host %lld bytes (streamed units, snapshots and offloaded values)\n",
	        (long long)p->h2d_bytes[1], (long long)p->d2h_bytes[1]);
	if (p->stream_numel)
		fprintf(f, "the streamed parameters' %lld elements are updated on the host, where their %s stay: a micro-batch "
		        "moves %lld bytes host->device and %lld bytes device->host of them, %.4g and %.4g bytes an element "
		        "(the compute copy up, each unit's gradient down once); --clip-grad and --accum K add none; the resident "
		        "parameters are updated on the device\n",
		        (long long)p->stream_numel, p->mixed ? (p->optimizer == OPT_ADAM ? "f32 master copy and Adam's moments"
		                                                                    : "f32 master copy")
		                                    : p->optimizer == OPT_ADAM ? "values and Adam's moments" : "values",
		        (long long)p->stream_h2d, (long long)p->stream_d2h, (double)p->stream_h2d / (double)p->stream_numel,
		        (double)p->stream_d2h / (double)p->stream_numel);
	fprintf(f, "predicted peak device memory %lld bytes: params %lld, grads %lld, optimizer state %lld (%s), inputs %lld, "
	        "live tape %lld, streaming slots %lld, workspace %lld%s\n",
	        (long long)total, (long long)p->plan_params, (long long)p->plan_grads, (long long)p->plan_opt,
	        p->optimizer == OPT_ADAM ? "adam" : "sgd", (long long)p->plan_inputs, (long long)p->plan_tape,
	        (long long)p->plan_slots, (long long)p->plan_work,
	        p->plan_snap ? ar_printf(" (snapshots among it, %lld bytes in all, each loop's held only while it needs them)",
	                                 (long long)p->plan_snap) : "");
	int64_t bound = mem_peak_bound(p);
	fprintf(f, "no plan goes below %lld bytes of device memory (the parameters, gradients, optimizer state and inputs, and "
	        "at one op its operands and result and what every plan holds across it): this one is %.4g of its peak above that\n", (long long)bound,
	        total ? (double)(total - bound) / (double)total : 0.0);
	fprintf(f, "predicted pinned host memory %lld bytes\n", (long long)p->host_bytes);
	if (p->ranks > 1 && p->optimizer == OPT_ADAM) {
		int64_t grads, resident;
		collective_bytes(p, &grads, &resident);
		fprintf(f, "optimizer state sharded over %d ranks (--ranks; run with --shard-optimizer under mpirun -np %d): each "
		        "rank keeps %lld bytes of it, every resident parameter's ceil(n/%d) moments; per step across the ranks, "
		        "the gradients summed: %lld bytes, the resident parameters gathered from their shares: %lld bytes\n",
		        p->ranks, p->ranks, (long long)p->plan_opt, p->ranks, (long long)grads, (long long)resident);
	}
}
