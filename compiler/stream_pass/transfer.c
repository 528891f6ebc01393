/* stream: the transfer pass. Decides which parameters live in the pinned
 * host pool, and inserts the copies that bring their units (one layer W[l]
 * each) through device slots just in time: h2d ahead of use, wait before the
 * first read, and in the reverse sweep each unit's gradient down to the
 * host, whose optimizer step updates the unit there: its master copy and
 * optimizer state never cross the link. */
#include "stream.h"

#include <stdlib.h>

#include "../../common/revolve.h"
#include "../../common/abi.h"

#define MAX_AHEAD 2 /* the deepest prefetch tried: one unit more than d = 1 covers jitter */

/* A body of a top-level loop that walks the units: its index and direction. */
typedef struct {
	Block *b;
	int ivar;
	bool reverse;
} Body;

/* Where a parameter's units are read and its gradient accumulated. */
typedef struct {
	Op *fwd, *adj;     /* the forward loop and its adjoint (loop or revolve) */
	Block *acc_body;   /* the body with the gradient's acc_slice */
	const char *why;   /* why the parameter cannot stream, or NULL */
} Usage;

static int nbodies(Op *op, Body *out)
{
	if (op->kind == OP_LOOP) {
		out[0] = (Body){&op->body, op->ivar, op->reverse};
		return 1;
	}
	if (op->kind == OP_REVOLVE) {
		out[0] = (Body){&op->body, op->ivar, false};
		out[1] = (Body){&op->body2, op->ivar2, true};
		out[2] = (Body){&op->body3, op->ivar, false};
		return op->ktape ? 3 : 2;
	}
	return 0;
}

/* usages' walk: per value, the parameter it is the value (w_of) or gradient (g_of) of, or -1; per parameter, the
 * op it was last seen at (each op counts once for it); the loop and body a body op is seen in */
typedef struct {
	Program *p;
	Usage *u;
	int *w_of, *g_of, *seen_at, at;
	Op *loop;
	Body body;
} Walk;

static void fail(Walk *k, int q, const char *why)
{
	if (q >= 0 && !k->u[q].why)
		k->u[q].why = why;
}

/* each parameter v names, once per op (k->at), to see(k, q) */
static void each_param(Walk *k, Op *op, void (*see)(Walk *, Op *, int), int v)
{
	int qs[2] = {k->w_of[v], k->g_of[v]};
	for (int j = 0; j < 2; j++)
		if (qs[j] >= 0 && !k->u[qs[j]].why && k->seen_at[qs[j]] != k->at)
			k->seen_at[qs[j]] = k->at, see(k, op, qs[j]);
}

static void each_named(Walk *k, Op *op, void (*see)(Walk *, Op *, int))
{
	for (int i = 0; i < op->nin; i++)
		each_param(k, op, see, op->in[i]);
	for (int i = 0; i < op->ncarry; i++)
		each_param(k, op, see, op->cyield[i]);
}

static void outside(Walk *k, Op *op, int q)
{
	if (!((op->kind == OP_ZERO || op->kind == OP_ALLREDUCE) && op->in[0] == k->p->params.data[q].grad))
		fail(k, q, "it is used outside a loop over its layers");
}

static void carried(Walk *k, Op *op, int q) { (void)op, fail(k, q, "a loop carries it"); }
static void nested(Walk *k, Op *op, int q) { (void)op, fail(k, q, "it is used in a nested loop"); }

/* every parameter named in b, loops within included, as nested */
static void nested_in(Walk *k, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		each_named(k, op, nested);
		if (ir_has_bodies(op))
			nested_in(k, &op->body), nested_in(k, &op->body2), nested_in(k, &op->body3);
	}
}

static void in_body(Walk *k, Op *x, int q)
{
	Usage *u = &k->u[q];
	int w = k->p->params.data[q].value, g = k->p->params.data[q].grad;
	bool read = x->kind == OP_SLICE && x->in[0] == w && x->in[1] == k->body.ivar;
	bool acc = x->kind == OP_ACC_SLICE && x->in[0] == g && x->in[1] == k->body.ivar && x->in[2] != w && x->in[2] != g;
	if (!read && !acc) {
		fail(k, q, "it is read other than as W[l] of the loop's index l");
		return;
	}
	/* a forward loop's reads, or an adjoint's (a revolve's advance body is the adjoint's) */
	Op **slot = k->loop->kind == OP_LOOP && !k->body.reverse ? &u->fwd : &u->adj;
	if (*slot && *slot != k->loop) {
		fail(k, q, "more than one loop reads it");
		return;
	}
	*slot = k->loop;
	if (acc) {
		if (!k->body.reverse || u->acc_body)
			fail(k, q, "its gradient is accumulated in more than one place");
		else
			u->acc_body = k->body.b;
	}
}

/* A parameter streams when its only uses are W[l] directly in the bodies of
 * one forward loop over all its units and of that loop's adjoint, and its
 * gradient is zeroed once at the top and accumulated once per reverse step,
 * at [l]: then unit l's gradient is complete when reverse step l ends, and
 * nothing reads unit l after its update. Every parameter's usage, into
 * u[], by one walk of the program: a fit plans a program thousands of
 * times (under stream_min_plan), and a walk per parameter was a third of
 * the budget's search on torchvision's ResNet-152 imported with its
 * loops. Each parameter's first reason in program order stands. */
static void usages(Program *p, Usage *u)
{
	int np = p->params.len, nv = p->values.len;
	Walk k = {.p = p, .u = u, .w_of = malloc(sizeof(int) * (size_t)(nv + 1)), .g_of = malloc(sizeof(int) * (size_t)(nv + 1)),
	          .seen_at = malloc(sizeof(int) * (size_t)(np + 1))};
	for (int v = 0; v < nv; v++)
		k.w_of[v] = k.g_of[v] = -1;
	for (int i = 0; i < np; i++) {
		Param *q = &p->params.data[i];
		u[i] = (Usage){0};
		k.seen_at[i] = -1;
		if (q->buffer)
			u[i].why = "it is a buffer";
		else if (!q->stacked)
			u[i].why = "it is not stacked";
		else if (q->grad < 0)
			u[i].why = "it has no gradient";
		else
			k.w_of[q->value] = i, k.g_of[q->grad] = i;
	}
	for (int t = 0; t < p->body.len; t++) {
		Op *op = p->body.ops[t];
		Body bs[3];
		int nb = nbodies(op, bs);
		k.at++;
		each_named(&k, op, nb ? carried : outside);
		for (int j = 0; j < nb; j++)
			for (int i = 0; i < bs[j].b->len; i++) {
				Op *x = bs[j].b->ops[i];
				k.at++;
				if (ir_has_bodies(x))
					nested_in(&k, &x->body), nested_in(&k, &x->body2), nested_in(&k, &x->body3);
				if (x->kind == OP_ALLREDUCE)
					continue; /* the layer's sum across the ranks (dist_pass), which streaming drops */
				k.at++;
				k.loop = op, k.body = bs[j];
				each_named(&k, x, in_body);
			}
	}
	for (int i = 0; i < np; i++) {
		Usage *x = &u[i];
		Param *q = &p->params.data[i];
		if (x->why)
			continue;
		Op *a = x->adj;
		if (!x->acc_body)
			x->why = "its gradient is not accumulated per layer in a reverse loop";
		else if (!a || !ir_is_loop(a) || (x->fwd && a->primal != x->fwd))
			x->why = "its reads are not one loop and its adjoint";
		else if (a->kind == OP_REVOLVE && a->replay)
			x->why = "its loop's adjoint replays the state, reading it at other steps";
		else if (!a->primal || a->primal->lo != 0 || a->primal->trip != q->type.dim[0] || a->lo != 0 ||
		         a->trip != q->type.dim[0])
			x->why = "the loop does not run over all its layers";
		else
			x->fwd = a->primal;
	}
	free(k.w_of), free(k.g_of), free(k.seen_at);
}

static Type slots_type(Param *q, int k)
{
	Type t = q->type;
	t.dim[0] = k;
	return t;
}

/* device bytes streaming q with k slots saves: the parameter and its
 * gradient (and Adam's moments, and under bf16-mixed the master copy and
 * the gradients' sum) against k slots and one unit of gradient, all fixed
 * regions */
static int64_t saving(Program *p, Param *q, int k)
{
	int64_t resident = 2 * mem_aligned(p, q->type), streamed = mem_aligned(p, slots_type(q, k)) + mem_aligned(p, ir_drop_first(q->type));
	int state[4] = {q->opt_m, q->opt_v, q->master, q->gsum};
	for (int i = 0; i < 4; i++)
		if (state[i] >= 0)
			resident += mem_aligned(p, ir_vtype(p, state[i])); /* whole, or a rank's share */
	return resident - streamed;
}

/* ---- the rewrite ---- */

static Op *h2d(Program *p, Loc loc, int qi, int slots, int host, int ivar, int64_t shift, int64_t units)
{
	Op *op = ir_new_op(p, OP_H2D, loc, 3, (int[]){slots, host, ivar});
	op->index = qi;
	op->shift = shift;
	op->lo = 0;
	op->trip = units;
	return op;
}

typedef Vec(Op *) Ops;

static void splice(Block *b, Ops *front, Ops *back)
{
	Block n = {0};
	for (int i = 0; i < front->len; i++)
		ir_append(&n, front->data[i]);
	for (int i = 0; i < b->len; i++)
		ir_append(&n, b->ops[i]);
	for (int i = 0; i < back->len; i++)
		ir_append(&n, back->data[i]);
	*b = n;
}

static int new_var(Program *p, VarClass c, Type t, const char *name, Loc loc)
{
	int v = ir_new_value(p, VK_VAR, t, name, loc);
	p->values.data[v].vclass = c;
	return v;
}

static void stream_param(Program *p, int qi, const Usage *u, int k, int d)
{
	Param *q = &p->params.data[qi];
	int64_t units = q->type.dim[0];
	Loc loc = q->loc;
	int w = q->value, g = q->grad;
	q->streamed = true;
	if (q->opt_m >= 0 && ir_numel(ir_vtype(p, q->opt_m)) != ir_numel(q->type)) {
		/* a rank's share (--ranks): a streamed parameter's moments are whole, in host memory */
		Type t = ir_vtype(p, q->opt_m);
		t = ir_type(t.dt, q->type.rank, q->type.dim);
		q->opt_m = new_var(p, VC_OPT, t, ar_printf("adam_m_%s", q->name), loc);
		q->opt_v = new_var(p, VC_OPT, t, ar_printf("adam_v_%s", q->name), loc);
	}
	/* the host sums the micro-batches' gradients */
	q->gsum = -1;
	q->slot = new_var(p, VC_SLOT, slots_type(q, k), ar_printf("slots_%s", q->name), loc);
	q->hgrad = new_var(p, VC_HGRAD, ir_vtype(p, g), ar_printf("host_grad_%s", q->name), loc);
	int gu = new_var(p, VC_GRAD, ir_drop_first(ir_vtype(p, g)), ar_printf("grad_%s_unit", q->name), loc);
	q->grad = gu;

	/* the whole gradient is gone: no zeroing at the top, no sum across the ranks at the end (the host
	 * sums each unit's) */
	int n = 0;
	for (int i = 0; i < p->body.len; i++) {
		Op *x = p->body.ops[i];
		if (!((x->kind == OP_ZERO || x->kind == OP_ALLREDUCE) && x->in[0] == g))
			p->body.ops[n++] = x;
	}
	p->body.len = n;

	Op *tops[2] = {u->fwd, u->adj};
	for (int t = 0; t < 2; t++) {
		Body bs[3];
		int nb = nbodies(tops[t], bs);
		for (int j = 0; j < nb; j++) {
			Block *b = bs[j].b;
			int l = bs[j].ivar, dir = bs[j].reverse ? -1 : 1;
			bool reads = false, owns = b == u->acc_body;
			int kept = 0;
			for (int i = 0; i < b->len; i++)
				if (!(b->ops[i]->kind == OP_ALLREDUCE && b->ops[i]->in[0] == g))
					b->ops[kept++] = b->ops[i];
			b->len = kept;
			for (int i = 0; i < b->len; i++) {
				Op *x = b->ops[i];
				if (x->kind == OP_SLICE && x->in[0] == w) {
					x->in[0] = q->slot;
					reads = true;
				}
				if (x->kind == OP_ACC_SLICE && x->in[0] == g) {
					x->kind = OP_ACC;
					x->in[0] = gu;
					x->in[1] = x->in[2];
					x->nin = 2;
				}
			}
			if (!reads && !owns)
				continue;
			Ops front = {0}, back = {0};
			/* this step's unit first, then the next d ahead */
			for (int a = 0; a <= d; a++)
				vec_push(&front, h2d(p, loc, qi, q->slot, w, l, dir * a, units));
			vec_push(&front, ir_new_op(p, OP_WAIT, loc, 2, (int[]){q->slot, l}));
			if (owns) {
				Op *in = ir_new_op(p, OP_GRAD_IN, loc, 2, (int[]){gu, l});
				in->index = qi;
				vec_push(&front, in);
				Op *up = ir_new_op(p, OP_UPDATE, loc, 3, (int[]){q->hgrad, gu, l});
				up->index = qi;
				vec_push(&back, up);
			}
			splice(b, &front, &back);
		}
	}
}

/* ---- the bytes each call moves, by running the schedule's copies ---- */

typedef struct {
	Program *p;
	int64_t **held;  /* per slot variable: the unit in each slot, + 1 (0: none) */
	int64_t *sent;   /* per parameter: the lowest unit whose gradient has gone down (INT64_MAX: none) */
	int64_t h2d, d2h;
	Op *rev;         /* the revolve being simulated */
} Sim;

/* the most loop steps one count may run through: seconds of counting */
#define SIM_MAX ((int64_t)1 << 28)

static void sim_body(Sim *s, Block *b, int64_t i)
{
	Program *p = s->p;
	for (int j = 0; j < b->len; j++) {
		Op *op = b->ops[j];
		if (op->kind == OP_UPDATE) {
			s->d2h += ir_bytes(p, ir_vtype(p, op->in[1]));
			s->sent[op->index] = i < s->sent[op->index] ? i : s->sent[op->index];
			continue;
		}
		if (op->kind != OP_H2D)
			continue;
		/* nothing reads a unit after its gradient is down (usages' rule): no fetch */
		int64_t u = i + op->shift;
		if (u < op->lo || u >= op->lo + op->trip || u >= s->sent[op->index])
			continue;
		Type t = ir_vtype(p, op->in[0]);
		int64_t *held = s->held[op->in[0]];
		if (held[u % t.dim[0]] == u + 1)
			continue;
		held[u % t.dim[0]] = u + 1;
		s->h2d += ir_bytes(p, t) / t.dim[0];
	}
}

static void sim_action(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	(void)slot;
	Sim *s = ctx;
	if (a == REV_ADVANCE)
		for (int64_t i = step; i < to; i++)
			sim_body(s, &s->rev->body, s->rev->lo + i);
	if (a == REV_TAPED && !s->rev->ktape)
		sim_body(s, &s->rev->body2, s->rev->lo + step);
	if (a == REV_TAPED && s->rev->ktape)
		for (int64_t i = step; i < to; i++)
			sim_body(s, &s->rev->body3, s->rev->lo + i);
	if ((a == REV_TAPED && s->rev->ktape) || a == REV_UNTAPE)
		for (int64_t i = to - 1; i >= step; i--)
			sim_body(s, &s->rev->body2, s->rev->lo + i);
}

static bool has_transfers(Block *b)
{
	for (int i = 0; i < b->len; i++)
		if (b->ops[i]->kind == OP_H2D || b->ops[i]->kind == OP_UPDATE)
			return true;
	return false;
}

/* What dp_forward (the first nforward ops) and dp_step (all of them) move,
 * each from slots that hold nothing: one walk, read at both ends. */
static void simulate(Program *p, int64_t h2d_bytes[2], int64_t d2h_bytes[2])
{
	Sim s = {p, ar_alloc(sizeof(int64_t *) * (size_t)p->values.len), ar_alloc(sizeof(int64_t) * (size_t)(p->params.len + 1)),
	         0, 0, NULL};
	for (int i = 0; i < p->params.len; i++)
		s.sent[i] = INT64_MAX;
	for (int v = 0; v < p->values.len; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_SLOT)
			s.held[v] = ar_alloc(sizeof(int64_t) * (size_t)p->values.data[v].type.dim[0]);
	int64_t runs = 0;
	for (int t = 0; t <= p->body.len; t++) {
		if (t == p->nforward)
			h2d_bytes[0] = s.h2d, d2h_bytes[0] = s.d2h;
		if (t == p->body.len)
			break;
		Op *op = p->body.ops[t];
		if (!has_transfers(&op->body) && !has_transfers(&op->body2) && !has_transfers(&op->body3))
			continue;
		runs += op->trip + (op->kind == OP_REVOLVE ? rev_op_cost(op) : 0);
		if (runs > SIM_MAX)
			diag_error(op->loc, "this loop of %lld steps streams its layers; counting a training step's transfers "
			           "would take more than 2^28 loop steps, the most dpc counts; use fewer layers, or --stream none",
			           (long long)op->trip);
		if (op->kind == OP_LOOP)
			for (int64_t i = 0; i < op->trip; i++)
				sim_body(&s, &op->body, op->reverse ? op->lo + op->trip - 1 - i : op->lo + i);
		if (op->kind == OP_REVOLVE) {
			s.rev = op;
			rev_op_schedule(op, sim_action, &s);
		}
	}
	h2d_bytes[1] = s.h2d;
	d2h_bytes[1] = s.d2h;
}

/* ---- the decision ---- */

int64_t stream_min_plan(Program *p)
{
	int64_t arena = mem_plan(p);
	Usage *u = malloc(sizeof *u * (size_t)(p->params.len + 1));
	usages(p, u);
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (!q->streamed && !u[i].why)
			arena -= saving(p, q, 2);
	}
	free(u);
	return arena;
}

int64_t stream_min_host(Program *p)
{
	int64_t host = 0;
	Usage *u = malloc(sizeof *u * (size_t)(p->params.len + 1));
	usages(p, u);
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (u[i].why)
			continue;
		/* the value, its gradients as they come down, the moments (whole) and the master copy */
		host += 2 * mem_aligned(p, q->type);
		int state[3] = {q->opt_m, q->opt_v, q->master};
		for (int k = 0; k < 3; k++)
			if (state[k] >= 0)
				host += mem_aligned(p, ir_type(ir_vtype(p, state[k]).dt, q->type.rank, q->type.dim));
	}
	free(u);
	return host;
}

static const char *budget_str(int64_t b) { return ar_printf("%s (%lld bytes)", mem_bytes_str(b), (long long)b); }

void stream_transfers(Program *p, const StreamOptions *o)
{
	int np = p->params.len;
	Usage *u = ar_alloc(sizeof *u * (size_t)(np + 1));
	int eligible = 0;
	usages(p, u);
	for (int i = 0; i < np; i++)
		eligible += !u[i].why;
	int64_t resident = mem_plan(p), budget = p->device_mem;
	StreamMode mode = o->mode;
	if (mode == STREAM_DEFAULT)
		mode = budget ? STREAM_AUTO : STREAM_NONE;
	if (mode == STREAM_NONE || (mode == STREAM_AUTO && (!budget || resident <= budget)))
		return;
	if (!eligible) {
		if (mode == STREAM_PARAMS)
			fatal("--stream params: no parameter can stream: each must be a stacked f32[L][...] read as W[l] in one "
			      "loop over its L layers (and that loop's adjoint)%s%s", np ? "; " : "",
			      np ? ar_printf("%s cannot: %s", p->params.data[0].name, u[0].why) : "");
		return; /* the memory plan refuses the budget, naming it */
	}
	/* which: every candidate for params; for auto, the largest savings first until the plan fits */
	bool *pick = ar_alloc(sizeof(bool) * (size_t)(np + 1));
	int d = MAX_AHEAD;
	for (;; d--) {
		int64_t arena = resident;
		for (int i = 0; i < np; i++)
			pick[i] = false;
		if (mode == STREAM_PARAMS) {
			for (int i = 0; i < np; i++)
				if (!u[i].why)
					pick[i] = true, arena -= saving(p, &p->params.data[i], d + 1);
		} else {
			while (arena > budget) {
				int best = -1;
				for (int i = 0; i < np; i++)
					if (!u[i].why && !pick[i] && (best < 0 || saving(p, &p->params.data[i], d + 1) > saving(p, &p->params.data[best], d + 1)))
						best = i;
				if (best < 0)
					break;
				pick[best] = true;
				arena -= saving(p, &p->params.data[best], d + 1);
			}
		}
		if (!budget || arena <= budget)
			break;
		if (d == 1)
			fatal("the memory plan needs at least %s of device memory with every stackable parameter streamed "
			      "(one layer ahead), more than --device-mem %s%s", budget_str(arena), budget_str(budget),
			      p->plan_tape ? ar_printf("; of it %s is tape, which --checkpoint binomial replaces with a few "
			                               "snapshots", budget_str(p->plan_tape)) : "");
	}
	for (int i = 0; i < np; i++)
		if (pick[i])
			stream_param(p, i, &u[i], d + 1, d);
	/* every parameter's fetches before the first wait, so that no fetch is queued behind a wait */
	for (int t = 0; t < p->body.len; t++) {
		Body bs[3];
		int nb = nbodies(p->body.ops[t], bs);
		for (int j = 0; j < nb; j++) {
			Block *b = bs[j].b;
			int n = 0;
			while (n < b->len && (b->ops[n]->kind == OP_H2D || b->ops[n]->kind == OP_WAIT || b->ops[n]->kind == OP_GRAD_IN))
				n++;
			/* this step's units first, then those one step ahead, ... */
			Ops first = {0}, rest = {0};
			for (int a = 0; a <= d; a++)
				for (int i = 0; i < n; i++)
					if (b->ops[i]->kind == OP_H2D && (b->ops[i]->shift == a || b->ops[i]->shift == -a))
						vec_push(&first, b->ops[i]);
			for (int i = 0; i < n; i++)
				if (b->ops[i]->kind != OP_H2D)
					vec_push(&rest, b->ops[i]);
			for (int i = 0; i < first.len; i++)
				b->ops[i] = first.data[i];
			for (int i = 0; i < rest.len; i++)
				b->ops[first.len + i] = rest.data[i];
		}
	}
	p->nslots = d + 1;
	p->ahead = d;
}

void stream_count(Program *p)
{
	p->h2d_bytes[0] = p->h2d_bytes[1] = p->d2h_bytes[0] = p->d2h_bytes[1] = 0;
	p->stream_numel = p->stream_grads = 0;
	if (p->nslots)
		simulate(p, p->h2d_bytes, p->d2h_bytes);
	p->stream_h2d = p->h2d_bytes[1];
	p->stream_d2h = p->d2h_bytes[1];
	for (int i = 0; i < p->params.len; i++)
		if (p->params.data[i].streamed) {
			p->stream_numel += ir_numel(p->params.data[i].type);
			p->stream_grads += ir_bytes(p, ir_vtype(p, p->params.data[i].hgrad));
		}
	/* snapshots in host memory: each save goes down and each fetch comes up, whole */
	for (int t = p->nforward; t < p->body.len; t++) {
		Op *op = p->body.ops[t];
		if (op->kind != OP_REVOLVE || !op->nhost)
			continue;
		int64_t saves, fetches, bytes = 0;
		rev_binomial_host(op->trip, op->nsnap, op->nhost, &saves, &fetches);
		for (int k = 0; k < op->ncarry; k++)
			bytes += ir_bytes(p, ir_vtype(p, op->carg[k]));
		p->h2d_bytes[1] += fetches * bytes;
		p->d2h_bytes[1] += saves * bytes;
	}
	/* offloaded forward values: each down once and up once in dp_step, never in dp_forward */
	for (int t = 0; t < p->body.len; t++) {
		Op *op = p->body.ops[t];
		if (op->kind == OP_OFFLOAD || op->kind == OP_FETCH)
			(op->kind == OP_OFFLOAD ? p->d2h_bytes : p->h2d_bytes)[1] += ir_bytes(p, ir_vtype(p, op->in[0]));
	}
}
