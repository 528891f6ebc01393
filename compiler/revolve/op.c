/* rev: an OP_REVOLVE's schedule and its costs, read off the op: its trip
 * count, snapshot slots, tape of rows, sweep and pool. */
#include "../../common/revolve.h"

#include "../ir/ir.h"

int64_t rev_op_steps(const Op *v, int64_t s, int64_t k, bool sweep)
{
	int64_t tail = sweep && v->ktape ? rev_sweep_tail(v->trip, k) : 0;
	int64_t adv = sweep ? rev_sweep_cost(v->trip, s, k, tail) : rev_tape_cost(v->trip, s, k);
	return rev_sat_add(adv, v->ktape ? v->trip - tail : 0);
}

int64_t rev_op_k(const Op *v)
{
	return v->ktape ? v->ktape : 1;
}

int64_t rev_op_tail(const Op *v)
{
	if (v->pool)
		return v->pool->tail;
	return v->swept && v->ktape ? rev_sweep_tail(v->trip, v->ktape) : 0;
}

int64_t rev_op_cost(const Op *v)
{
	return v->pool ? v->pool->cost : rev_op_steps(v, v->nsnap, rev_op_k(v), v->swept);
}

void rev_op_schedule(const Op *v, RevEmit emit, void *ctx)
{
	if (v->pool)
		rev_pool_schedule(v->pool, emit, ctx);
	else
		rev_schedule(v->trip, v->nsnap, rev_op_k(v), v->swept, rev_op_tail(v), emit, ctx);
}

int rev_op_held_from(Op *const *ops, int n, int i)
{
	const Op *v = ops[i];
	for (int j = 0; j < i && j < n && v->swept; j++)
		if (ops[j] == v->primal && v->primal->sweep == v)
			return j;
	return i;
}
