/* dist: an allreduce where each trained parameter's gradient is complete:
 * layer by layer in the reverse sweep when each step completes one layer,
 * else after the last top-level op that writes it. */
#include <string.h>

#include "dist.h"

static bool block_names(Block *b, int v);

/* whether op reads or writes v, its loops' bodies included */
static bool names(Op *op, int v)
{
	for (int k = 0; k < op->nin; k++)
		if (op->in[k] == v)
			return true;
	for (int k = 0; k < op->ncarry; k++)
		if (op->cyield[k] == v || (op->cyield3 && op->cyield3[k] == v))
			return true;
	return block_names(&op->body, v) || block_names(&op->body2, v) || block_names(&op->body3, v);
}

static bool block_names(Block *b, int v)
{
	for (int i = 0; i < b->len; i++)
		if (names(b->ops[i], v))
			return true;
	return false;
}

/* The reverse body in which each step completes one layer of gradient g:
 * g is zeroed before, and written nowhere else but by one acc_slice g[l]
 * in the body of one reverse loop, or of a revolve's adjoint steps, l its
 * index. Then layer l is complete when that acc_slice is done. Returns the
 * body, the index and the acc_slice's place in it; NULL when g is written
 * otherwise. */
static Block *layer_body(Program *p, int g, int *ivar, int *at)
{
	Block *found = NULL;
	for (int t = 0; t < p->body.len; t++) {
		Op *op = p->body.ops[t];
		if (!names(op, g) || (op->kind == OP_ZERO && op->in[0] == g))
			continue;
		bool loop = op->kind == OP_LOOP && op->reverse, revolve = op->kind == OP_REVOLVE;
		if (found || !(loop || revolve))
			return NULL;
		Block *b = loop ? &op->body : &op->body2;
		int iv = loop ? op->ivar : op->ivar2, n = 0;
		for (int k = 0; k < op->nin; k++)
			if (op->in[k] == g)
				return NULL;
		if (revolve && (block_names(&op->body, g) || block_names(&op->body3, g)))
			return NULL;
		for (int i = 0; i < b->len; i++) {
			Op *x = b->ops[i];
			if (!names(x, g))
				continue;
			if (x->kind != OP_ACC_SLICE || x->in[0] != g || x->in[1] != iv || x->in[2] == g)
				return NULL;
			n++;
			*at = i;
		}
		if (n != 1)
			return NULL;
		found = b;
		*ivar = iv;
	}
	return found;
}

/* named[v]: the last top-level op that reads or yields value v (ctx: a Named) */
typedef struct {
	int t, *named;
} Named;

static void note(Op *op, void *ctx)
{
	Named *c = ctx;
	for (int k = 0; k < op->nin; k++)
		if (op->in[k] >= 0)
			c->named[op->in[k]] = c->t;
	for (int k = 0; k < op->ncarry; k++) {
		if (op->cyield[k] >= 0)
			c->named[op->cyield[k]] = c->t;
		if (op->cyield3 && op->cyield3[k] >= 0)
			c->named[op->cyield3[k]] = c->t;
	}
}

static void insert_after(Block *b, int at, Op *op)
{
	ir_append(b, op);
	for (int i = b->len - 1; i > at + 1; i--)
		b->ops[i] = b->ops[i - 1];
	b->ops[at + 1] = op;
}

Program *dist_pass(Program *p)
{
	int n = p->body.len;
	/* last[i]: the top-level op after which parameter i's whole gradient is complete, when it is
	 * not layer by layer */
	int *last = ar_alloc(sizeof(int) * (size_t)(p->params.len + 1));
	/* named[v]: the last top-level op that reads or writes value v */
	int *named = ar_alloc(sizeof(int) * (size_t)(p->values.len + 1));
	for (int v = 0; v < p->values.len; v++)
		named[v] = -1;
	for (int t = 0; t < n; t++) {
		Op *op = p->body.ops[t];
		Named c = {t, named};
		note(op, &c);
		ir_walk(&op->body, note, &c), ir_walk(&op->body2, note, &c), ir_walk(&op->body3, note, &c);
	}
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		last[i] = -1;
		if (q->buffer || q->grad < 0)
			continue;
		int ivar = -1, at = -1;
		Block *b = q->stacked ? layer_body(p, q->grad, &ivar, &at) : NULL;
		if (b) {
			Op *op = ir_new_op(p, OP_ALLREDUCE, b->ops[at]->loc, 2, (int[]){q->grad, ivar});
			op->index = i;
			insert_after(b, at, op);
			continue;
		}
		last[i] = named[q->grad];
	}
	/* after op t, the allreduces of the parameters whose gradients it completes, in the parameters' order */
	int *from = ar_alloc(sizeof(int) * (size_t)(n + 2)), *order = ar_alloc(sizeof(int) * (size_t)(p->params.len + 1));
	memset(from, 0, sizeof(int) * (size_t)(n + 2));
	for (int i = 0; i < p->params.len; i++)
		if (last[i] >= 0)
			from[last[i] + 2]++;
	for (int t = 0; t < n; t++)
		from[t + 2] += from[t + 1];
	for (int i = 0; i < p->params.len; i++)
		if (last[i] >= 0)
			order[from[last[i] + 1]++] = i;
	Block b = {0};
	for (int t = 0; t < n; t++) {
		ir_append(&b, p->body.ops[t]);
		for (int k = from[t]; k < from[t + 1]; k++) {
			Param *q = &p->params.data[order[k]];
			Op *op = ir_new_op(p, OP_ALLREDUCE, p->body.ops[t]->loc, 1, &q->grad);
			op->index = order[k];
			ir_append(&b, op);
		}
	}
	p->body = b;
	return p;
}
