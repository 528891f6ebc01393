/* ad: reverse mode as an IR-to-IR transform.
 *
 * Every SSA value v with an adjoint has adj[v], an SSA value holding
 * d loss / d v; contributions from several uses are summed with add. Values
 * whose adjoint accumulates across loop iterations use variables instead:
 * parameter gradients (acc into grad_P), values captured by a loop body from
 * outside it (an accumulator zeroed before the reverse loop), and the
 * adjoints of loop-carried values (one variable per carried value).
 *
 * A loop `for i { h = f(h) }` runs forward storing h into a tape at each
 * iteration; its adjoint is a reverse loop whose body reloads h from the
 * tape, recomputes the body (the taped step) and runs the body's adjoint. */
#include "ad.h"
#include <string.h>

#include "../../common/abi.h"

typedef struct {
	Op *loop;  /* a forward loop, or a clone of one */
	int *tape; /* per carried value: the tape variable */
} Tape;

typedef struct {
	int value, var;
} Acc;
typedef Vec(Acc) AccList;

struct Ad {
	Program *p;
	Vec(int) adj;      /* per value: adjoint value or -1 */
	Vec(char) active;  /* per value: depends on a parameter */
	Vec(Op *) scope;   /* per value: the loop whose body defines it */
	Vec(Tape) tapes;
	Op *cur;           /* the reverse loop being built, NULL at top level */
	bool recompute, keep;
	Block *out;        /* where ops go */
	AccList *accs;     /* accumulators of captured values for cur */
	int lse_of, lse;   /* the attn_lse that reverse_op passed last: its attention's result, and its own */
};

/* Per-value tables grow as ops create values. */
static void grow(Ad *a)
{
	while (a->adj.len < a->p->values.len) {
		vec_push(&a->adj, -1);
		vec_push(&a->active, 0);
		vec_push(&a->scope, a->cur);
	}
}

int ad_emit(Ad *a, Op *op)
{
	int v = ir_emit(a->p, a->out, op);
	grow(a);
	if (v >= 0)
		a->scope.data[v] = a->cur;
	return v;
}

int ad_op1(Ad *a, OpKind k, Loc loc, int x)
{
	return ad_emit(a, ir_new_op(a->p, k, loc, 1, &x));
}

int ad_op2(Ad *a, OpKind k, Loc loc, int x, int y)
{
	int in[2] = {x, y};
	return ad_emit(a, ir_new_op(a->p, k, loc, 2, in));
}

int ad_op3(Ad *a, OpKind k, Loc loc, int x, int y, int z)
{
	int in[3] = {x, y, z};
	return ad_emit(a, ir_new_op(a->p, k, loc, 3, in));
}

int ad_opto(Ad *a, OpKind k, Loc loc, int x, Type to)
{
	Op *op = ir_new_op(a->p, k, loc, 1, &x);
	op->to = to;
	return ad_emit(a, op);
}

int ad_const(Ad *a, Loc loc, double f)
{
	Op *op = ir_new_op(a->p, OP_CONST, loc, 0, NULL);
	op->attr.value = f;
	return ad_emit(a, op);
}

static int new_var(Ad *a, VarClass vc, Type t, const char *name, Loc loc)
{
	int v = ir_new_value(a->p, VK_VAR, t, name, loc);
	a->p->values.data[v].vclass = vc;
	grow(a);
	return v;
}

static const char *vname(Ad *a, int v) { return a->p->values.data[v].name; }

static Op *def_of(Ad *a, int v) { return a->p->values.data[v].def; }

/* Routes one contribution c to d loss / d v. */
void ad_contrib(Ad *a, int v, int c, Loc loc)
{
	grow(a);
	if (!a->active.data[v] || c < 0)
		return;
	Op *d = def_of(a, v);
	if (d && d->kind == OP_PARAM) {
		int in[2] = {a->p->params.data[d->index].grad, c};
		ad_emit(a, ir_new_op(a->p, OP_ACC, loc, 2, in));
		return;
	}
	if (a->scope.data[v] != a->cur) {
		/* captured from outside the loop being reversed */
		for (int i = 0; i < a->accs->len; i++)
			if (a->accs->data[i].value == v) {
				int in[2] = {a->accs->data[i].var, c};
				ad_emit(a, ir_new_op(a->p, OP_ACC, loc, 2, in));
				return;
			}
		int var = new_var(a, VC_ACC, ir_vtype(a->p, v), ar_printf("acc_%s", vname(a, v) ? vname(a, v) : "v"), loc);
		vec_push(a->accs, ((Acc){v, var}));
		int in[2] = {var, c};
		ad_emit(a, ir_new_op(a->p, OP_ACC, loc, 2, in));
		return;
	}
	int old = a->adj.data[v];
	a->adj.data[v] = old < 0 ? c : ad_op2(a, OP_ADD, loc, old, c);
}

/* g has the broadcast shape of an elementwise result; reduce it to x's. */
int ad_unbroadcast(Ad *a, int g, int x, Loc loc)
{
	Type tx = ir_vtype(a->p, x);
	if (ir_type_eq(tx, ir_vtype(a->p, g)))
		return g;
	return ad_opto(a, OP_SUM_TO, loc, g, tx);
}

bool ad_active(Ad *a, int v) { return a->active.data[v]; }

int ad_attn_lse(Ad *a, Op *op) { return op->kind == OP_ATTENTION && op->out >= 0 && a->lse_of == op->out ? a->lse : -1; }

/* Attention on GEMMs or in FlashAttention-2's order on tensor cores
 * (Attr.attn.flash) keeps each row's log-sum-exp for its adjoint: an
 * attn_lse right after it, which it writes as it goes
 * (ir_attn_lse_fused), so that the adjoint does not compute the scores
 * once more for them (FlashAttention-2's order). */
static void add_lse(Ad *a, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->kind == OP_LOOP)
			add_lse(a, &op->body);
		if (op->kind != OP_ATTENTION || (op->nin != 4 && !op->attr.attn.flash) || !a->active.data[op->out])
			continue;
		Block one = {0};
		Op *l = ir_new_op(a->p, OP_ATTN_LSE, op->loc, op->nin, (int[]){op->in[0], op->in[1], op->out, op->nin == 4 ? op->in[3] : -1});
		l->attr = op->attr;
		ir_emit(a->p, &one, l);
		grow(a);
		a->scope.data[l->out] = a->scope.data[op->out];
		ir_insert(b, ++i, l);
	}
}

Program *ad_program(Ad *a) { return a->p; }

static void reverse_loop(Ad *a, Op *op);

/* The adjoint of one op: loops here, every other op by the rule the op table names (compiler/ops/). */
static void reverse_op(Ad *a, Op *op)
{
	if (op->kind == OP_ATTN_LSE) { /* right after its attention (add_lse): the next op reversed */
		a->lse_of = op->in[2];
		a->lse = op->out;
		return;
	}
	if (op->kind == OP_LOOP) {
		reverse_loop(a, op);
		return;
	}
	if (op->out < 0 || a->adj.data[op->out] < 0)
		return;
	ir_ops[op->kind].adjoint(a, op, a->adj.data[op->out]);
}

/* ---- activity: which values depend on a parameter ---- */

static bool mark_active(Ad *a, Block *b)
{
	bool changed = false;
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->kind == OP_LOOP) {
			for (;;) {
				bool more = false;
				for (int k = 0; k < op->ncarry; k++)
					if ((a->active.data[op->in[k]] || a->active.data[op->cyield[k]]) && !a->active.data[op->carg[k]])
						a->active.data[op->carg[k]] = 1, more = true;
				more |= mark_active(a, &op->body);
				if (!more)
					break;
				changed = true;
			}
			for (int k = 0; k < op->ncarry; k++)
				if (a->active.data[op->carg[k]] && !a->active.data[op->cout[k]])
					a->active.data[op->cout[k]] = 1, changed = true;
			continue;
		}
		if (op->out < 0 || a->active.data[op->out])
			continue;
		char act = op->kind == OP_PARAM && !a->p->params.data[op->index].buffer;
		for (int k = 0; k < op->nin; k++)
			act |= a->active.data[op->in[k]];
		if (act && ir_is_real(ir_vtype(a->p, op->out).dt)) {
			a->active.data[op->out] = 1;
			changed = true;
		}
	}
	return changed;
}

static void set_scopes(Ad *a, Block *b, Op *loop)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->out >= 0)
			a->scope.data[op->out] = loop;
		if (op->kind == OP_LOOP) {
			a->scope.data[op->ivar] = op;
			for (int k = 0; k < op->ncarry; k++) {
				a->scope.data[op->carg[k]] = op;
				a->scope.data[op->cout[k]] = loop;
			}
			set_scopes(a, &op->body, op);
		}
	}
}

/* ---- tapes: every loop stores its carried values, one slot per iteration ---- */

static int *tape_of(Ad *a, Op *loop)
{
	for (int i = 0; i < a->tapes.len; i++)
		if (a->tapes.data[i].loop == loop)
			return a->tapes.data[i].tape;
	return NULL;
}

static void add_tapes(Ad *a, Block *b, int depth)
{
	Program *p = a->p;
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->kind != OP_LOOP)
			continue;
		add_tapes(a, &op->body, depth + 1);
		if (depth == 0)
			op->counter = RT_COUNT_FORWARD;
		op->role = "forward";
		Tape t = {op, ar_alloc(sizeof(int) * (size_t)(op->ncarry + 1))};
		Block body = {0};
		for (int k = 0; k < op->ncarry; k++) {
			/* slot i holds iteration i's value; slots below lo stay unused */
			Type ct = ir_vtype(p, op->carg[k]), tt = ct;
			tt.rank = ct.rank + 1;
			tt.dim[0] = op->lo + op->trip;
			for (int d = 0; d < ct.rank; d++)
				tt.dim[d + 1] = ct.dim[d];
			if (tt.rank > IR_MAXRANK)
				diag_error(op->loc, "a loop-carried tensor of rank %d is too large to tape (rank limit %d)", ct.rank, IR_MAXRANK - 1);
			/* with recomputation the checkpoint pass replaces this tape by snapshots */
			if (!a->recompute && ir_too_large(tt))
				diag_error(op->loc, "the store-everything tape of '%s' over this loop would be %s, more than 2^40 "
				           "elements; use --checkpoint binomial", vname(a, op->carg[k]) ? vname(a, op->carg[k]) : "a carried value",
				           ir_type_str(tt));
			const char *n = vname(a, op->carg[k]);
			t.tape[k] = new_var(a, VC_TAPE, tt, ar_printf("tape_%s", n ? n : "h"), op->loc);
			int in[3] = {t.tape[k], op->ivar, op->carg[k]};
			Op *st = ir_new_op(p, OP_STORE_SLICE, op->loc, 3, in);
			ir_append(&body, st);
		}
		for (int j = 0; j < op->body.len; j++)
			ir_append(&body, op->body.ops[j]);
		op->body = body;
		vec_push(&a->tapes, t);
	}
}

/* ---- cloning: the reverse loop recomputes its forward body ---- */

typedef struct {
	Ad *a;
	const int *tape;   /* the loop's own tapes: the recomputation does not store again */
	int ntape;
	Vec(Op *) outer;   /* a->cur outside each cloned loop */
} Recompute;

static bool skip_tape_store(void *ctx, Op *op)
{
	Recompute *r = ctx;
	if (ir_is_stage_store(r->a->p, op))
		return true;
	for (int k = 0; op->kind == OP_STORE_SLICE && k < r->ntape; k++)
		if (op->in[0] == r->tape[k])
			return true;
	return false;
}

static void cloned_value(void *ctx, int from, int to)
{
	Ad *a = ((Recompute *)ctx)->a;
	grow(a);
	a->active.data[to] = a->active.data[from];
	a->scope.data[to] = a->cur;
}

static void cloned_loop(void *ctx, Op *from, Op *to, bool enter)
{
	Recompute *r = ctx;
	Ad *a = r->a;
	if (enter) {
		to->role = "recompute";
		vec_push(&r->outer, a->cur);
		a->cur = to;
		a->scope.data[to->ivar] = to;
		for (int k = 0; k < to->ncarry; k++)
			a->scope.data[to->carg[k]] = to;
		return;
	}
	a->cur = r->outer.data[--r->outer.len];
	Tape t = {to, tape_of(a, from)};
	vec_push(&a->tapes, t);
}

/* ---- loops ---- */

/* Where each value is read in a block, nested loops included: in[k] of an
 * op, or (k < 0) a loop's cyield[-1 - k]. One list per value, through next. */
typedef struct {
	Op *op;
	int k, next;
} UseSite;

typedef struct {
	Vec(UseSite) sites;
	int *head; /* per value id below n: its first site, or -1 */
	int n;
} UseMap;

static void add_site(UseMap *u, int v, Op *op, int k)
{
	if (v < 0 || v >= u->n)
		return;
	UseSite s = {op, k, u->head[v]};
	vec_push(&u->sites, s);
	u->head[v] = u->sites.len - 1;
}

static void collect_uses(UseMap *u, Block *b, int from)
{
	for (int i = from; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			add_site(u, op->in[k], op, k);
		if (op->kind == OP_LOOP) {
			for (int k = 0; k < op->ncarry; k++)
				add_site(u, op->cyield[k], op, -1 - k);
			collect_uses(u, &op->body, 0);
		}
	}
}

/* Store everything: each forward value of the loop body that the adjoint
 * reads gets a tape of its own, written by the forward loop and read by the
 * reverse loop, so the recomputation of the body that produced it dies.
 * Views and leaves stay recomputed: they cost nothing. */
static void tape_intermediates(Ad *a, Op *op, Op *r, IrClone *m, int first, int last)
{
	Program *p = a->p;
	/* the adjoint part's reads, found once: a per-value scan would be quadratic in a long body */
	UseMap u = {{0}, ar_alloc(sizeof(int) * (size_t)(p->values.len + 1)), p->values.len};
	for (int v = 0; v < u.n; v++)
		u.head[v] = -1;
	collect_uses(&u, &r->body, last);
	/* a value the adjoint reads through a view (a reshape before a
	 * layernorm, say) is read: the view is recomputed from its tape */
	for (int i = last - 1; i >= first; i--) {
		Op *o = r->body.ops[i];
		if ((ir_ops[o->kind].flags & OPF_VIEW) && o->out < u.n && u.head[o->out] >= 0)
			add_site(&u, o->in[0], o, 0);
	}
	Vec(Op *) slices = {0};
	for (int i = 0; i < op->body.len; i++) {
		Op *o = op->body.ops[i];
		int kind = o->kind;
		if (o->out < 0 || kind == OP_LOOP || kind == OP_STORE_SLICE || (ir_ops[kind].flags & (OPF_LEAF | OPF_VIEW)) ||
		    kind == OP_FILL)
			continue;
		int c = ir_clone_map(m, o->out);
		Type t = ir_vtype(p, o->out);
		if (c == o->out || t.rank + 1 > IR_MAXRANK || c >= u.n || u.head[c] < 0)
			continue;
		Type tt = t;
		tt.rank = t.rank + 1;
		tt.dim[0] = op->lo + op->trip;
		for (int d = 0; d < t.rank; d++)
			tt.dim[d + 1] = t.dim[d];
		if (!a->recompute && ir_too_large(tt))
			diag_error(o->loc, "the store-everything tape of this value over its loop would be %s, more than 2^40 "
			           "elements; use --checkpoint binomial", ir_type_str(tt));
		const char *n = vname(a, o->out);
		int tape = new_var(a, VC_TAPE, tt, ar_printf("tape_%s", n ? n : ar_printf("v%d", o->out)), o->loc);
		/* stored at the end of the body, so that the ops before stay one fusible run */
		int in[3] = {tape, op->ivar, o->out};
		ir_append(&op->body, ir_new_op(p, OP_STORE_SLICE, o->loc, 3, in));
		Block tmp = {0}, *save = a->out;
		a->out = &tmp;
		int v = ad_op2(a, OP_SLICE, o->loc, tape, r->ivar);
		a->out = save;
		p->values.data[v].name = n;
		vec_push(&slices, tmp.ops[0]);
		for (int s = u.head[c]; s >= 0; s = u.sites.data[s].next) {
			UseSite *x = &u.sites.data[s];
			if (x->k >= 0)
				x->op->in[x->k] = v;
			else
				x->op->cyield[-1 - x->k] = v;
		}
	}
	/* the tape reads go at `first` in the reverse body, the last taped first */
	if (!slices.len)
		return;
	Block body = {0};
	for (int i = 0; i < r->body.len; i++) {
		if (i == first)
			for (int k = slices.len - 1; k >= 0; k--)
				ir_append(&body, slices.data[k]);
		ir_append(&body, r->body.ops[i]);
	}
	if (first >= r->body.len)
		for (int k = slices.len - 1; k >= 0; k--)
			ir_append(&body, slices.data[k]);
	r->body = body;
}

static bool has_loop(Block *b)
{
	for (int i = 0; i < b->len; i++)
		if (b->ops[i]->kind == OP_LOOP)
			return true;
	return false;
}

static void reverse_loop(Ad *a, Op *op)
{
	Program *p = a->p;
	bool any = false;
	for (int k = 0; k < op->ncarry; k++)
		any |= a->adj.data[op->cout[k]] >= 0;
	if (!any)
		return;
	int *tape = tape_of(a, op);
	if (!tape)
		die("loop without a tape");
	Loc loc = op->loc;

	/* one variable per carried adjoint, seeded from the loop results */
	int *dh = ar_alloc(sizeof(int) * (size_t)(op->ncarry + 1));
	for (int k = 0; k < op->ncarry; k++) {
		dh[k] = -1;
		if (!ad_active(a, op->carg[k]))
			continue;
		const char *n = vname(a, op->carg[k]);
		dh[k] = new_var(a, VC_ACC, ir_vtype(p, op->carg[k]), ar_printf("d_%s", n ? n : "h"), loc);
		int g = a->adj.data[op->cout[k]];
		if (g >= 0) {
			int in[2] = {dh[k], g};
			ad_emit(a, ir_new_op(p, OP_ASSIGN, loc, 2, in));
		} else {
			ad_emit(a, ir_new_op(p, OP_ZERO, loc, 1, &dh[k]));
		}
	}

	Op *r = ir_new_op(p, OP_LOOP, loc, 0, NULL);
	r->lo = op->lo;
	r->trip = op->trip;
	r->reverse = true;
	r->role = "adjoint";
	r->primal = op;
	r->ivar = ir_new_value(p, VK_INDEX, ir_scalar(DT_INDEX), p->values.data[op->ivar].name, loc);
	grow(a);

	Block *outer = a->out;
	Op *outer_cur = a->cur;
	AccList *outer_accs = a->accs;
	AccList accs = {0};
	a->out = &r->body;
	a->cur = r;
	a->accs = &accs;
	a->scope.data[r->ivar] = r;

	/* reload the carried values of iteration i and recompute the body */
	Recompute rc = {a, tape, op->ncarry, {0}};
	IrClone m = {{0}, skip_tape_store, cloned_value, cloned_loop, &rc};
	ir_clone_set(&m, op->ivar, r->ivar);
	for (int k = 0; k < op->ncarry; k++) {
		int h = ad_op2(a, OP_SLICE, loc, tape[k], r->ivar);
		p->values.data[h].name = vname(a, op->carg[k]);
		a->active.data[h] = a->active.data[op->carg[k]];
		ir_clone_set(&m, op->carg[k], h);
	}
	int first = r->body.len;
	ir_clone_block(p, &m, &op->body, a->out);
	int last = r->body.len;
	for (int i = first; i < last; i++)
		r->body.ops[i]->recomputed = true;

	/* the adjoint of the body, seeded by the carried adjoints */
	for (int k = 0; k < op->ncarry; k++)
		if (dh[k] >= 0)
			ad_contrib(a, ir_clone_map(&m, op->cyield[k]), dh[k], loc);
	for (int i = last - 1; i >= first; i--)
		reverse_op(a, r->body.ops[i]);
	int *next = ar_alloc(sizeof(int) * (size_t)(op->ncarry + 1));
	for (int k = 0; k < op->ncarry; k++) {
		next[k] = -1;
		if (dh[k] < 0)
			continue;
		int g = a->adj.data[ir_clone_map(&m, op->carg[k])];
		/* copy first: another carried adjoint may still read dh[k] */
		if (g >= 0 && p->values.data[g].kind == VK_VAR)
			g = ad_op1(a, OP_COPY, loc, g);
		next[k] = g;
	}
	for (int k = 0; k < op->ncarry; k++) {
		if (dh[k] < 0)
			continue;
		if (next[k] >= 0) {
			int in[2] = {dh[k], next[k]};
			ad_emit(a, ir_new_op(p, OP_ASSIGN, loc, 2, in));
		} else {
			ad_emit(a, ir_new_op(p, OP_ZERO, loc, 1, &dh[k]));
		}
	}

	if (!a->recompute || (a->keep && op->counter == RT_COUNT_FORWARD && !has_loop(&op->body)))
		tape_intermediates(a, op, r, &m, first, last);

	a->out = outer;
	a->cur = outer_cur;
	a->accs = outer_accs;
	/* accumulators start at zero before the reverse loop */
	for (int i = 0; i < accs.len; i++)
		ad_emit(a, ir_new_op(p, OP_ZERO, loc, 1, &accs.data[i].var));
	ir_append(a->out, r);
	for (int k = 0; k < op->ncarry; k++)
		if (dh[k] >= 0 && ad_active(a, op->in[k]))
			ad_contrib(a, op->in[k], ad_op1(a, OP_COPY, loc, dh[k]), loc);
	for (int i = 0; i < accs.len; i++)
		ad_contrib(a, accs.data[i].value, ad_op1(a, OP_COPY, loc, accs.data[i].var), loc);
}

/* A range of a range along the same axis reads the outer one's source
 * and moves up to just after it: the adjoint of nested concats then slices
 * the gradient once into its pieces, where each level copied its part
 * again (the inner copies are left dead, for dce). */
static void fold_ranges(Program *p, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		fold_ranges(p, &op->body);
		fold_ranges(p, &op->body2);
		fold_ranges(p, &op->body3);
		if (op->kind != OP_RANGE)
			continue;
		Op *s = p->values.data[op->in[0]].def;
		if (!s || s->kind != OP_RANGE || s->attr.ax.axis != op->attr.ax.axis)
			continue;
		int j = i - 1;
		while (j >= 0 && b->ops[j] != s)
			j--;
		/* not found in this block, or (at top level) in the forward sweep, where no adjoint op may go */
		if (j < 0 || (b == &p->body && (j < p->nforward) != (i < p->nforward)))
			continue;
		op->in[0] = s->in[0];
		op->attr.ax.at += s->attr.ax.at;
		memmove(b->ops + j + 2, b->ops + j + 1, sizeof(Op *) * (size_t)(i - j - 1));
		b->ops[j + 1] = op;
	}
}

Program *ad_transform(Program *p, const AdOptions *o)
{
	Ad a = {0};
	a.p = p;
	a.recompute = o && o->recompute;
	a.keep = a.recompute && o->keep;
	AccList top = {0};
	a.accs = &top;
	grow(&a);
	set_scopes(&a, &p->body, NULL);
	while (mark_active(&a, &p->body))
		;
	a.lse_of = -1;
	add_lse(&a, &p->body);
	add_tapes(&a, &p->body, 0);
	p->nforward = p->body.len;
	a.out = &p->body;

	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->buffer)
			continue;
		q->grad = new_var(&a, VC_GRAD, q->type, ar_printf("grad_%s", q->name), q->loc);
		ad_emit(&a, ir_new_op(p, OP_ZERO, q->loc, 1, &q->grad));
	}
	Op *seed = ir_new_op(p, OP_FILL, p->values.data[p->loss].loc, 0, NULL);
	seed->attr.value = 1;
	seed->to = ir_scalar(ir_vtype(p, p->loss).dt);
	int s = ad_emit(&a, seed);
	p->values.data[s].name = "seed";
	if (a.active.data[p->loss])
		a.adj.data[p->loss] = s;
	for (int i = p->nforward - 1; i >= 0; i--)
		reverse_op(&a, p->body.ops[i]);
	fold_ranges(p, &p->body);
	p->has_grad = true;
	return p;
}
