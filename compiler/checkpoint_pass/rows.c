/* ckpt: what a loop's taped step keeps in its row. ad_transform tapes
 * every value a loop's adjoint reads; under --checkpoint auto with a tape
 * of rows some of those may be dropped instead: the adjoint step computes
 * them again, from the row's state and the values the row still keeps,
 * where it first read them. A row then costs fewer bytes, so the budget
 * holds more rows or snapshots, and each adjoint step computes more.
 * ckpt_pass plans every subset of the candidates with the loop-level fit
 * and keeps the one with the fewest recomputed FLOPs that fits.
 *
 * The state itself may leave the rows too (Op.replay): a row then keeps
 * what the step computes from the state, and the state is made again from
 * the taped run's first, by the cheap ops the next state needs (a residual
 * net's sum, its batch norm and relu, from the convolution the row keeps).
 * Where the flat program keeps the convolutions and makes the chain of
 * sums again, a loop did not: its rows were the larger by the state. */
#include "ckpt.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	Op *op;
	int k, old;
} Edit;

typedef struct {
	Block *b, old;
} Saved;

/* an op's kind and result type, or a value's type, before narrowing changed it */
typedef struct {
	Op *op;
	OpKind kind;
	Type to;
} Rekind;

typedef struct {
	int v;
	Type type;
} Retype;

typedef struct {
	Op *v;
	struct RevPool *pool;
	int64_t ptail;
} Pooled;

struct CkptRows {
	Program *p;
	int nv0;        /* values before the rewrite, which the undo keeps */
	int nv;
	Op **def;       /* per value: its op in a revolve's taped body, or NULL */
	Op **owner;     /* per value defined or stored there: that revolve */
	int *stored;    /* per value: the row tape a taped body stores it into, or -1 */
	int *src;       /* per row tape: the value stored into it */
	bool *drop;     /* per row tape: the adjoint computes its value again */
	int *memo;      /* per value: its copy in the adjoint body being built, or -1 */
	int *repl;      /* per value: what the adjoint reads instead, or -1 */
	int *lazy;      /* per value: a dropped row's read, the taped body's value it stands for until first read, or -1 */
	Block *out;
	Vec(Edit) edits;
	Vec(Saved) saved;
	Vec(Rekind) rekinds;
	Vec(Retype) retypes;
	Vec(Op *) replays; /* the revolves this choice set replaying */
	Vec(Pooled) pools; /* the pooled rows they had from an earlier fit, which a replay cannot use */
	int *bits;      /* per row tape before narrowing: the tape of its bits, or -1 */
};

static bool carried(const Op *v, int w)
{
	for (int k = 0; k < v->ncarry; k++)
		if (v->carg[k] == w)
			return true;
	return false;
}

/* the maps of p's revolves' rows, into r (made when NULL) */
static CkptRows *init(Program *p, CkptRows *r)
{
	if (!r) {
		r = ar_alloc(sizeof *r);
		r->nv0 = p->values.len;
	}
	int nv = r->nv = p->values.len;
	r->p = p;
	/* the maps live while the rows are rewritten (release()): a fit applies and undoes thousands of choices */
	r->def = calloc((size_t)nv + 1, sizeof(Op *));
	r->owner = calloc((size_t)nv + 1, sizeof(Op *));
	r->stored = malloc(sizeof(int) * (size_t)(nv + 1));
	r->src = malloc(sizeof(int) * (size_t)(nv + 1));
	r->drop = calloc((size_t)nv + 1, 1);
	r->memo = malloc(sizeof(int) * (size_t)(nv + 1));
	r->repl = malloc(sizeof(int) * (size_t)(nv + 1));
	r->lazy = malloc(sizeof(int) * (size_t)(nv + 1));
	for (int w = 0; w < nv; w++)
		r->stored[w] = r->src[w] = r->memo[w] = r->repl[w] = r->lazy[w] = -1;
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind != OP_REVOLVE || !v->ktape)
			continue;
		for (int j = 0; j < v->body3.len; j++) {
			Op *op = v->body3.ops[j];
			if (op->out >= 0)
				r->def[op->out] = op, r->owner[op->out] = v;
			if (op->kind == OP_STORE_SLICE && op->in[1] == v->irow) {
				r->stored[op->in[2]] = op->in[0];
				r->src[op->in[0]] = op->in[2];
				r->owner[op->in[0]] = v;
			}
		}
	}
	return r;
}

/* the maps init() and narrow() made, which the undo does not need */
static void release(CkptRows *r)
{
	free(r->def), free(r->owner), free(r->stored), free(r->src), free(r->drop), free(r->memo), free(r->repl);
	free(r->lazy);
	free(r->bits);
	r->def = r->owner = NULL;
	r->stored = r->src = r->memo = r->repl = r->bits = r->lazy = NULL;
	r->drop = NULL;
}

/* whether v's adjoint can compute w from its row, given r->drop */
static bool computable(CkptRows *r, Op *v, int w)
{
	if (w == v->ivar || carried(v, w) || !r->def[w] || (r->stored[w] >= 0 && !r->drop[r->stored[w]]))
		return true;
	Op *d = r->def[w];
	if (!ckpt_pure(r->p, d))
		return false;
	for (int k = 0; k < d->nin; k++)
		if (!computable(r, v, d->in[k]))
			return false;
	return true;
}

enum { REPLAY_TRIP_MOST = 1 << 12 }; /* the longest loop replayed: its schedule is walked to count the replays */

/* whether v's state could be replayed, and is not yet, with every row it has now */
static bool may_replay(Program *p, Op *v)
{
	/* pooled rows from an earlier fit do not count: the fit after this choice takes them or a replay */
	if (v->kind != OP_REVOLVE || !v->ktape || v->replay || v->nhost || v->trip > REPLAY_TRIP_MOST)
		return false;
	return rev_replay_marks(p, v, NULL) >= 0;
}

int ckpt_rows_candidates(Program *p, int *out, int max, bool replay)
{
	int first = 0;
	for (int i = p->nforward; i < p->body.len && replay && max > 0 && !first; i++)
		if (may_replay(p, p->body.ops[i]))
			out[first++] = CKPT_ROWS_REPLAY;
	out += first, max -= first;
	CkptRows *r = init(p, NULL);
	/* a state replayed since an earlier choice (the budget's fits apply theirs) loads values from its rows:
	 * those stay */
	unsigned char *loads = calloc((size_t)r->nv + 1, 1);
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind != OP_REVOLVE || !v->replay)
			continue;
		unsigned char *mark = malloc((size_t)v->body3.len + 1);
		rev_replay_marks(p, v, mark);
		for (int j = 0; j < v->body3.len; j++)
			if (mark[j] == REPLAY_LOAD)
				loads[v->body3.ops[j]->out] = 1;
		free(mark);
	}
	/* ranked by the value a row keeps, or the one its bits came from (narrow()):
	 * dropping a mask saves little, but spares its op chain's values as dropping them would */
	int n = 0, *x = malloc(sizeof(int) * (size_t)(r->nv + 1)), *tape = malloc(sizeof(int) * (size_t)(r->nv + 1));
	for (int t = 0; t < r->nv; t++) {
		if (r->src[t] < 0 || carried(r->owner[t], r->src[t]) || !r->def[r->src[t]] || loads[r->src[t]])
			continue;
		r->drop[t] = true;
		if (computable(r, r->owner[t], r->src[t])) {
			Op *d = r->def[r->src[t]];
			x[n++] = d->kind == OP_BITS ? d->in[0] : r->src[t];
			tape[x[n - 1]] = t;
		}
		r->drop[t] = false;
	}
	ckpt_largest_first(p, x, n);
	n = n < max ? n : max;
	for (int i = 0; i < n; i++)
		out[i] = tape[x[i]];
	free(x);
	free(tape);
	free(loads);
	release(r);
	return first + n;
}

/* the value w of v's taped body, in the adjoint body being built */
static int materialize(CkptRows *r, Op *v, int w)
{
	Program *p = r->p;
	if (w == v->ivar)
		return v->ivar2;
	int tape = -1;
	for (int k = 0; k < v->ncarry && tape < 0; k++)
		if (v->carg[k] == w) {
			if (v->replay)
				return w; /* the state the runtime replayed */
			tape = r->stored[w];
		}
	if (tape < 0 && r->stored[w] >= 0 && !r->drop[r->stored[w]])
		tape = r->stored[w];
	if (tape < 0 && !r->def[w])
		return w;
	if (r->memo[w] >= 0)
		return r->memo[w];
	Op *n;
	if (tape >= 0) {
		/* a read of the row, as the adjoint's own */
		int in[2] = {tape, v->irow};
		n = ir_new_op(p, OP_SLICE, v->loc, 2, in);
	} else {
		Op *d = r->def[w];
		n = ar_alloc(sizeof *n);
		*n = *d;
		n->in = ar_alloc(sizeof(int) * (size_t)(d->nin + 1));
		for (int k = 0; k < d->nin; k++)
			n->in[k] = materialize(r, v, d->in[k]);
		n->recomputed = true;
	}
	Value *x = &p->values.data[w];
	n->out = ir_new_value(p, VK_SSA, x->type, x->name, x->loc);
	p->values.data[n->out].def = n;
	ir_append(r->out, n);
	return r->memo[w] = n->out;
}

static void edit(CkptRows *r, Op *op, int k, int v)
{
	vec_push(&r->edits, ((Edit){op, k, op->in[k]}));
	op->in[k] = v;
}

static void save(CkptRows *r, Block *b)
{
	vec_push(&r->saved, ((Saved){b, *b}));
	*b = (Block){0};
}

/* b's ops but the stores into dropped row tapes */
static void drop_stores(CkptRows *r, Block *b)
{
	Block old = *b;
	save(r, b);
	for (int i = 0; i < old.len; i++) {
		Op *op = old.ops[i];
		if (!(op->kind == OP_STORE_SLICE && r->src[op->in[0]] >= 0 && r->drop[op->in[0]]))
			ir_append(b, op);
	}
}

/* v replaying its state, where its rows as they keep now let it: the carried values' tapes keep one row */
static void set_replay(CkptRows *r, Op *v)
{
	Program *p = r->p;
	if (rev_replay_marks(p, v, NULL) < 0)
		return;
	v->replay = true;
	vec_push(&r->replays, v);
	if (v->pool) {
		vec_push(&r->pools, ((Pooled){v, v->pool, v->ptail}));
		v->pool = NULL, v->ptail = 0;
	}
	for (int k = 0; k < v->ncarry; k++) {
		int t = r->stored[v->carg[k]];
		if (t < 0)
			continue; /* a carried value the adjoint does not read: not replayed */
		vec_push(&r->retypes, ((Retype){t, p->values.data[t].type}));
		p->values.data[t].type.dim[0] = 1;
	}
}

static void rewrite(CkptRows *r, Op *v, bool replay)
{
	/* the stores first: what a replay loads is what the rows still keep */
	drop_stores(r, &v->body3);
	drop_stores(r, &v->primal->body);
	if (replay)
		set_replay(r, v);
	Block old = v->body2;
	save(r, &v->body2);
	r->out = &v->body2;
	for (int w = 0; w < r->nv; w++)
		r->memo[w] = -1;
	for (int i = 0; i < old.len; i++) {
		Op *op = old.ops[i];
		int t = op->in[0];
		/* a read of the state's row: the state itself, which the runtime replayed */
		if (v->replay && op->kind == OP_SLICE && op->in[1] == v->irow && t < r->nv && r->src[t] >= 0 &&
		    carried(v, r->src[t])) {
			r->repl[op->out] = r->src[t];
			continue;
		}
		/* a dropped row's value is computed again right before the first op that reads it, not where the
		 * row was read: what it is computed from is then held from there on */
		if (op->kind == OP_SLICE && op->in[1] == v->irow && t < r->nv && r->src[t] >= 0 && r->drop[t]) {
			r->lazy[op->out] = r->src[t];
			continue;
		}
		for (int k = 0; k < op->nin; k++) {
			int x = op->in[k];
			if (x < r->nv && r->lazy[x] >= 0 && r->repl[x] < 0)
				r->repl[x] = materialize(r, v, r->lazy[x]);
			if (x < r->nv && r->repl[x] >= 0)
				edit(r, op, k, r->repl[x]);
		}
		ir_append(&v->body2, op);
	}
}

/* b with a bits op before st, packing st's operand k into a new value, which it returns */
static int pack_before(CkptRows *r, Block *b, Op *st, int k)
{
	Program *p = r->p;
	int x = st->in[k];
	Op *pk = ir_new_op(p, OP_BITS, st->loc, 1, &x);
	Type t;
	if (ir_check_op(p, pk, &t))
		die("no bits of %s", ir_value_name(p, x));
	pk->out = ir_new_value(p, VK_SSA, t, ar_printf("bits_%s", ir_value_name(p, x) + 1), st->loc);
	p->values.data[pk->out].def = pk;
	Block old = *b;
	save(r, b);
	for (int i = 0; i < old.len; i++) {
		if (old.ops[i] == st)
			ir_append(b, pk);
		ir_append(b, old.ops[i]);
	}
	edit(r, st, k, pk->out);
	return pk->out;
}

/* whether v's adjoint reads the row of tape t (slice s) only through step ops */
static bool only_steps(Op *v, int t, Op **s)
{
	*s = NULL;
	for (int i = 0; i < v->body2.len; i++) {
		Op *op = v->body2.ops[i];
		if (op->kind == OP_SLICE && op->in[0] == t && op->in[1] == v->irow)
			*s = op;
	}
	int uses = 0;
	for (int i = 0; i < v->body2.len && *s; i++)
		for (int k = 0; k < v->body2.ops[i]->nin; k++)
			if (v->body2.ops[i]->in[k] == (*s)->out) {
				if (v->body2.ops[i]->kind != OP_STEP)
					return false;
				uses++;
			}
	return uses > 0;
}

/* Rows whose value the adjoint reads only through step (a relu's mask)
 * keep it in a bit per element: a bits op before each store into the row
 * (the tape body's and the forward loop's tail), unbits where the adjoint
 * took the step. Exact: unbits(bits(x)) is step(x). */
static void narrow(CkptRows *r)
{
	Program *p = r->p;
	r->bits = malloc(sizeof(int) * (size_t)(p->values.len + 1));
	for (int w = 0; w < p->values.len; w++)
		r->bits[w] = -1;
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *v = p->body.ops[i], *s;
		if (v->kind != OP_REVOLVE || !v->ktape)
			continue;
		for (int j = 0; j < v->body3.len; j++) {
			Op *st = v->body3.ops[j];
			int t = st->in[0];
			if (st->kind != OP_STORE_SLICE || st->in[1] != v->irow || carried(v, st->in[2]) ||
			    !ir_is_real(ir_vtype(p, t).dt) || !only_steps(v, t, &s))
				continue;
			/* a tape of the packed rows, as many as the value's tape has */
			Type row = ir_vtype(p, pack_before(r, &v->body3, st, 2)), tt = row;
			Value *x = &p->values.data[t];
			tt.rank = row.rank + 1;
			tt.dim[0] = x->type.dim[0];
			for (int d = 0; d < row.rank; d++)
				tt.dim[d + 1] = row.dim[d];
			int bits = r->bits[t] = ir_new_value(p, VK_VAR, tt, ar_printf("bits_%s", x->name), x->loc);
			p->values.data[bits].vclass = VC_TAPE;
			edit(r, st, 0, bits);
			j++; /* past the store, which the pack now precedes */
			for (int k = 0; k < v->primal->body.len; k++) {
				Op *fs = v->primal->body.ops[k];
				if (fs->kind == OP_STORE_SLICE && fs->in[0] == t) {
					pack_before(r, &v->primal->body, fs, 2);
					edit(r, fs, 0, bits);
					break;
				}
			}
			edit(r, s, 0, bits);
			vec_push(&r->retypes, ((Retype){s->out, p->values.data[s->out].type}));
			p->values.data[s->out].type = row;
			for (int k = 0; k < v->body2.len; k++) {
				Op *op = v->body2.ops[k];
				if (op->kind == OP_STEP && op->in[0] == s->out) {
					vec_push(&r->rekinds, ((Rekind){op, op->kind, op->to}));
					op->kind = OP_UNBITS;
					op->to = ir_vtype(p, op->out);
				}
			}
		}
	}
}

CkptRows *ckpt_rows_apply(Program *p, const int *drop, int n, bool masks)
{
	CkptRows *r = ar_alloc(sizeof *r);
	r->p = p;
	r->nv0 = p->values.len;
	if (masks)
		narrow(r);
	init(p, r);
	/* a dropped tape that narrowing replaced: its bits go instead */
	bool replay = false;
	for (int i = 0; i < n; i++) {
		if (drop[i] == CKPT_ROWS_REPLAY)
			replay = true;
		else
			r->drop[masks && r->bits[drop[i]] >= 0 ? r->bits[drop[i]] : drop[i]] = true;
	}
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		bool any = false, again = replay && may_replay(p, v);
		for (int t = 0; t < r->nv && v->kind == OP_REVOLVE; t++)
			any |= r->drop[t] && r->owner[t] == v;
		if (any || again)
			rewrite(r, v, again);
	}
	release(r);
	return r;
}

void ckpt_rows_undo(CkptRows *r)
{
	for (int i = r->edits.len - 1; i >= 0; i--)
		r->edits.data[i].op->in[r->edits.data[i].k] = r->edits.data[i].old;
	for (int i = r->saved.len - 1; i >= 0; i--)
		*r->saved.data[i].b = r->saved.data[i].old;
	for (int i = r->rekinds.len - 1; i >= 0; i--) {
		r->rekinds.data[i].op->kind = r->rekinds.data[i].kind;
		r->rekinds.data[i].op->to = r->rekinds.data[i].to;
	}
	for (int i = r->retypes.len - 1; i >= 0; i--)
		r->p->values.data[r->retypes.data[i].v].type = r->retypes.data[i].type;
	for (int i = 0; i < r->replays.len; i++)
		r->replays.data[i]->replay = false;
	for (int i = 0; i < r->pools.len; i++)
		r->pools.data[i].v->pool = r->pools.data[i].pool, r->pools.data[i].v->ptail = r->pools.data[i].ptail;
	r->p->values.len = r->nv0;
}

/* per loop, the values its row keeps and the ops its adjoint computes
 * again: names, count and bytes (kept) or FLOPs a step (again) */
int ckpt_rows_names(FILE *f, Program *p, Op *v, bool again, bool json, int64_t *total)
{
	int n = 0;
	*total = 0;
	Block *b = again ? &v->body2 : &v->body3;
	for (int i = 0; i < b->len && v->ktape; i++) {
		Op *op = b->ops[i];
		int w = again ? op->out : op->in[2];
		/* views cost nothing: an adjoint step reads its parameters' slices anyway */
		if (again ? !op->recomputed || (ir_ops[op->kind].flags & OPF_VIEW)
		          : !(op->kind == OP_STORE_SLICE && op->in[1] == v->irow) || (v->replay && carried(v, w)))
			continue;
		*total += again ? ir_op_flops(p, op) : ir_bytes(p, ir_drop_first(ir_vtype(p, op->in[0])));
		if (f && again)
			fprintf(f, json ? "%s\"%s %s\"" : "%s%s %s", n ? ", " : "", ir_value_name(p, w), ir_ops[op->kind].name);
		else if (f)
			fprintf(f, json ? "%s\"%s\"" : "%s%s", n ? ", " : "", ir_value_name(p, w));
		n++;
	}
	return n;
}

/* A revolve's taped step without rows (body2: its forward step computed
 * again, then the step's adjoint) holds every value the adjoint reads from
 * where the step makes it to the adjoint's last read: the step's
 * intermediates are live at once. Under min-memory's fit (budget.c) the
 * step may hold less: each value the adjoint reads is computed again for
 * each op that reads it, right before it, from the state and the
 * parameters, and dies after it; then, one value at a time (the costliest
 * op first), a value is made where the step made it and kept to its last
 * read again wherever that saves FLOPs and the plan's peak does not grow. */
typedef struct {
	Op *op;
	int *in;
} Orig;

typedef struct {
	Program *p;
	Op *v;
	Op **def;      /* per value: its op in the step's forward part, made again where read (not kept) */
	int *memo;     /* per value: its copy made for the adjoint op at hand, or -1 */
	Vec(int) made; /* the values memo holds */
	Block *out;
} Each;

/* whether op of the taped step's forward part can be computed again anywhere in the step */
static bool again_anywhere(Program *p, Op *v, Op **def, Op *op)
{
	/* an adjoint op's workspace too, made right before it rather than before the copies it reads */
	if (op->kind == OP_SCRATCH)
		return true;
	if (!op->recomputed || op->out < 0 || (ir_ops[op->kind].flags & (OPF_WRITE | OPF_LEAF)))
		return false;
	for (int k = 0; k < op->nin; k++) {
		int x = op->in[k];
		Value *xv = &p->values.data[x];
		bool leaf = xv->def && (xv->def->kind == OP_PARAM || xv->def->kind == OP_INPUT);
		if (!def[x] && xv->kind == VK_VAR && !carried(v, x) && !leaf)
			return false;
	}
	return true;
}

static int again_at(Each *e, int w)
{
	Program *p = e->p;
	if (!e->def[w])
		return w;
	if (e->memo[w] >= 0)
		return e->memo[w];
	Op *d = e->def[w], *n = ar_alloc(sizeof *n);
	*n = *d;
	n->in = ar_alloc(sizeof(int) * (size_t)(d->nin + 1));
	for (int k = 0; k < d->nin; k++)
		n->in[k] = again_at(e, d->in[k]);
	Value *x = &p->values.data[w];
	n->out = ir_new_value(p, VK_SSA, x->type, x->name, x->loc);
	p->values.data[n->out].def = n;
	ir_append(e->out, n);
	vec_push(&e->made, w);
	return e->memo[w] = n->out;
}

/* v's taped step rebuilt from its original ops: the values def names made where read, the rest in place */
static void rebuild(Each *e, Op *v, const Orig *orig, int n)
{
	e->v = v;
	v->body2 = (Block){0};
	e->out = &v->body2;
	for (int j = 0; j < n; j++) {
		Op *op = orig[j].op;
		if (op->nin)
			memcpy(op->in, orig[j].in, sizeof(int) * (size_t)op->nin);
		if (op->out >= 0 && e->def[op->out])
			continue;
		for (int k = 0; k < e->made.len; k++)
			e->memo[e->made.data[k]] = -1;
		e->made.len = 0;
		for (int k = 0; k < op->nin; k++)
			op->in[k] = again_at(e, op->in[k]);
		ir_append(&v->body2, op);
	}
}

int ckpt_by_first_down(const void *a, const void *b)
{
	int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
	return (x < y) - (x > y);
}

struct CkptSteps {
	Each e;
	int nrev;
	Op **revs;
	Orig **orig;
	int *norig;
	Vec(int64_t) cand; /* (FLOPs, revolve, value) of each value that may be kept instead */
};

/* whether b has a loop in it: its bodies may read the step's values, which rebuild() does not follow */
static bool steps_nest(const Block *b)
{
	for (int i = 0; i < b->len; i++)
		if (ir_is_loop(b->ops[i]))
			return true;
	return false;
}

CkptSteps *ckpt_steps_each(Program *p)
{
	int nv = p->values.len;
	CkptSteps *st = ar_alloc(sizeof *st);
	Each *e = &st->e;
	*e = (Each){p, NULL, ar_alloc(sizeof(Op *) * (size_t)(nv + 1)), ar_alloc(sizeof(int) * (size_t)(nv + 1)), {0}, NULL};
	for (int w = 0; w < nv; w++)
		e->def[w] = NULL, e->memo[w] = -1;
	int n = 0;
	for (int i = p->nforward; i < p->body.len; i++)
		n += p->body.ops[i]->kind == OP_REVOLVE;
	st->orig = ar_alloc(sizeof(Orig *) * (size_t)(n + 1));
	st->norig = ar_alloc(sizeof(int) * (size_t)(n + 1));
	st->revs = ar_alloc(sizeof(Op *) * (size_t)(n + 1));
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *v = p->body.ops[i];
		if (v->kind != OP_REVOLVE || v->ktape || steps_nest(&v->body2))
			continue;
		Block old = v->body2;
		Orig *o = st->orig[st->nrev] = ar_alloc(sizeof(Orig) * (size_t)(old.len + 1));
		for (int j = 0; j < old.len; j++) {
			Op *op = old.ops[j];
			o[j] = (Orig){op, ar_alloc(sizeof(int) * (size_t)(op->nin + 1))};
			if (op->nin)
				memcpy(o[j].in, op->in, sizeof(int) * (size_t)op->nin);
			if (!again_anywhere(p, v, e->def, op))
				continue;
			e->def[op->out] = op;
			int64_t f = ir_op_flops(p, op);
			if (op->kind != OP_SCRATCH && !(ir_ops[op->kind].flags & OPF_VIEW) && f > 0) {
				vec_push(&st->cand, f);
				vec_push(&st->cand, st->nrev);
				vec_push(&st->cand, j);
			}
		}
		st->norig[st->nrev] = old.len;
		st->revs[st->nrev] = v;
		rebuild(e, v, o, old.len);
		st->nrev++;
	}
	if (st->cand.len)
		qsort(st->cand.data, (size_t)st->cand.len / 3, sizeof(int64_t) * 3, ckpt_by_first_down);
	return st;
}

void ckpt_steps_keep(CkptSteps *st, int64_t (*plan)(Program *))
{
	Each *e = &st->e;
	Program *p = e->p;
	int mark = p->values.len;
	int64_t peak = plan(p), flops = ckpt_recomputed_flops(p);
	/* every value kept, as the step was: where that holds no more, nothing is made again */
	for (int c = 0; c < st->cand.len; c += 3)
		e->def[st->orig[st->cand.data[c + 1]][st->cand.data[c + 2]].op->out] = NULL;
	for (int r = 0; r < st->nrev; r++)
		rebuild(e, st->revs[r], st->orig[r], st->norig[r]);
	if (plan(p) <= peak)
		return;
	/* Each value kept is planned; one that saves under a 4,096th of what keeping them all would is not (its
	 * own FLOPs say little: a batch norm's mean kept spares the convolution before it, but most of the cheap
	 * ones spare a few thousand FLOPs). ResNet-152 imported: 220 candidates, 32 plans where there were 163
	 * (0.9 s), the recomputed FLOPs 0.08% more. */
	int64_t small = (flops - ckpt_recomputed_flops(p)) >> 12;
	for (int c = 0; c < st->cand.len; c += 3) {
		Op *op = st->orig[st->cand.data[c + 1]][st->cand.data[c + 2]].op;
		e->def[op->out] = op;
	}
	p->values.len = mark;
	for (int r = 0; r < st->nrev; r++)
		rebuild(e, st->revs[r], st->orig[r], st->norig[r]);
	mark = p->values.len;
	for (int c = 0; c < st->cand.len; c += 3) {
		int r = (int)st->cand.data[c + 1];
		Op *op = st->orig[r][st->cand.data[c + 2]].op;
		e->def[op->out] = NULL;
		p->values.len = mark;
		rebuild(e, st->revs[r], st->orig[r], st->norig[r]);
		int64_t fl = ckpt_recomputed_flops(p);
		if (flops - fl > small && plan(p) <= peak) {
			flops = fl;
			mark = p->values.len;
			continue;
		}
		e->def[op->out] = op;
		p->values.len = mark;
		rebuild(e, st->revs[r], st->orig[r], st->norig[r]);
		mark = p->values.len;
	}
	plan(p);
}
