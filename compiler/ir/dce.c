/* ir: dead-code elimination. Removes ops whose result nobody uses: the
 * adjoint's recomputed loop bodies compute values only the forward sweep
 * needed. Writes to variables and loops stay. */
#include "ir.h"

static void count_block(Block *b, int *uses)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			uses[op->in[k]]++;
		if (ir_is_loop(op)) {
			for (int k = 0; k < op->ncarry; k++)
				uses[op->cyield[k]]++;
			for (int k = 0; k < op->ncarry && op->body3.len; k++)
				uses[op->cyield3[k]]++;
			count_block(&op->body, uses);
			count_block(&op->body2, uses);
			count_block(&op->body3, uses);
		}
	}
}

int *ir_count_uses(Program *p)
{
	int *uses = ar_alloc(sizeof(int) * (size_t)(p->values.len + 1));
	count_block(&p->body, uses);
	for (int i = 0; i < ir_nresults(p); i++)
		uses[ir_result(p, i)]++;
	return uses;
}

/* Returns how many ops of b[0, limit) were removed. Last op first, so that
 * a dead chain goes in one sweep: its ops' operands come before them. */
static int sweep(Block *b, int *uses, int limit, bool *changed)
{
	int removed = 0;
	for (int i = b->len - 1; i >= 0; i--) {
		Op *op = b->ops[i];
		if (ir_is_loop(op)) {
			sweep(&op->body, uses, op->body.len, changed);
			sweep(&op->body2, uses, op->body2.len, changed);
			sweep(&op->body3, uses, op->body3.len, changed);
			continue;
		}
		if ((ir_ops[op->kind].flags & OPF_WRITE) || op->out < 0 || uses[op->out] != 0)
			continue;
		for (int k = 0; k < op->nin; k++)
			uses[op->in[k]]--;
		*changed = true;
		if (i < limit)
			removed++;
		b->ops[i] = NULL;
	}
	int w = 0;
	for (int i = 0; i < b->len; i++)
		if (b->ops[i])
			b->ops[w++] = b->ops[i];
	b->len = w;
	return removed;
}

Program *ir_dce(Program *p)
{
	int *uses = ir_count_uses(p);
	for (int i = 0; i < p->params.len; i++)
		uses[p->params.data[i].value]++;
	for (int i = 0; i < p->inputs.len; i++)
		uses[p->inputs.data[i].value]++;
	bool changed = true;
	while (changed) {
		changed = false;
		p->nforward -= sweep(&p->body, uses, p->nforward, &changed);
	}
	return p;
}
