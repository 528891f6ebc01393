/* dist: an allreduce after each trained parameter's gradient is complete. */
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

Program *dist_pass(Program *p)
{
	int n = p->body.len;
	/* after[t]: the gradients complete after top-level op t, in parameter order */
	int *last = ar_alloc(sizeof(int) * (size_t)(p->params.len + 1));
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		last[i] = -1;
		if (q->buffer || q->grad < 0)
			continue;
		for (int t = 0; t < n; t++)
			if (names(p->body.ops[t], q->grad))
				last[i] = t;
	}
	Block b = {0};
	for (int t = 0; t < n; t++) {
		ir_append(&b, p->body.ops[t]);
		for (int i = 0; i < p->params.len; i++) {
			if (last[i] != t)
				continue;
			Param *q = &p->params.data[i];
			Op *op = ir_new_op(p, OP_ALLREDUCE, p->body.ops[t]->loc, 1, &q->grad);
			op->index = i;
			ir_append(&b, op);
		}
	}
	p->body = b;
	return p;
}
