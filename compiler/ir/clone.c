/* ir: copying a block with fresh values, for passes that recompute code
 * (the adjoint's taped step, the checkpoint schedule's advance). */
#include "ir.h"

int ir_clone_map(IrClone *c, int v) { return v < c->map.len && c->map.data[v] >= 0 ? c->map.data[v] : v; }

void ir_clone_set(IrClone *c, int from, int to)
{
	while (c->map.len <= from)
		vec_push(&c->map, -1);
	c->map.data[from] = to;
}

static int fresh(Program *p, IrClone *c, int v)
{
	Value *x = &p->values.data[v];
	int n = ir_new_value(p, x->kind, x->type, x->name, x->loc);
	ir_clone_set(c, v, n);
	if (c->value)
		c->value(c->ctx, v, n);
	return n;
}

static int *ints(int n) { return ar_alloc(sizeof(int) * (size_t)(n + 1)); }

void ir_clone_block(Program *p, IrClone *c, Block *src, Block *dst)
{
	for (int i = 0; i < src->len; i++) {
		Op *op = src->ops[i];
		if (c->skip && c->skip(c->ctx, op))
			continue;
		if (op->kind == OP_REVOLVE)
			die("cloning a revolve");
		Op *n = ar_alloc(sizeof *n);
		*n = *op;
		n->in = ints(op->nin);
		for (int k = 0; k < op->nin; k++)
			n->in[k] = ir_clone_map(c, op->in[k]);
		if (op->kind != OP_LOOP) {
			if (op->out >= 0) {
				n->out = fresh(p, c, op->out);
				p->values.data[n->out].def = n;
			}
			ir_append(dst, n);
			continue;
		}
		/* a recomputed loop counts no steps: it is not the forward sweep */
		n->counter = -1;
		n->ivar = fresh(p, c, op->ivar);
		n->carg = ints(op->ncarry);
		n->cyield = ints(op->ncarry);
		n->cout = ints(op->ncarry);
		for (int k = 0; k < op->ncarry; k++)
			n->carg[k] = fresh(p, c, op->carg[k]);
		n->body = (Block){0};
		if (c->loop)
			c->loop(c->ctx, op, n, true);
		ir_clone_block(p, c, &op->body, &n->body);
		if (c->loop)
			c->loop(c->ctx, op, n, false);
		for (int k = 0; k < op->ncarry; k++) {
			n->cyield[k] = ir_clone_map(c, op->cyield[k]);
			n->cout[k] = fresh(p, c, op->cout[k]);
		}
		ir_append(dst, n);
	}
}

void ir_replace_uses(Block *b, int from, int old, int new)
{
	for (int i = from; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			if (op->in[k] == old)
				op->in[k] = new;
		if (op->kind == OP_LOOP) {
			for (int k = 0; k < op->ncarry; k++)
				if (op->cyield[k] == old)
					op->cyield[k] = new;
			ir_replace_uses(&op->body, 0, old, new);
		}
	}
}
