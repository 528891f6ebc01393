/* rev: an OP_REVOLVE's schedule and its costs, read off the op: its trip
 * count, snapshot slots, tape of rows, sweep and pool. */
#include "../../common/revolve.h"

#include <stdlib.h>

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

/* Whether op may run in a replay: a kernel's work or a view, reading nothing it could write nor a carried
 * value its adjoint does not read (state[w]: w is one it reads, whose tape keeps the taped run's first).
 * GEMMs, convolutions, transfers and loops stay out: a replay is the step's cheap recurrence, and what runs
 * from the host there (a GEMM's epilogue, a prefetch) depends on ops around it that a replay skips. */
static bool replayable(const Program *p, const Op *v, const Op *op, const unsigned char *state)
{
	int f = ir_ops[op->kind].flags;
	if (op->kind == OP_CONST || op->kind == OP_IDX)
		return true; /* a constant, which codegen makes as an immediate */
	if (op->out < 0 || (f & (OPF_WRITE | OPF_LEAF)) || ir_has_bodies(op))
		return false;
	if (ir_ops[op->kind].low == LW_HOST && !(f & OPF_VIEW) && op->kind != OP_COPY)
		return false;
	for (int k = 0; k < op->nin; k++) {
		const Value *x = &p->values.data[op->in[k]];
		if (x->kind == VK_VAR && !state[op->in[k]] && !(x->def && (x->def->kind == OP_PARAM || x->def->kind == OP_INPUT)))
			return false;
	}
	return true;
}

bool rev_replay_state(const Op *v, int c)
{
	for (int i = 0; i < v->body3.len; i++) {
		const Op *st = v->body3.ops[i];
		if (st->kind == OP_STORE_SLICE && st->in[1] == v->irow && st->in[2] == v->carg[c])
			return true;
	}
	return false;
}

int64_t rev_replay_marks(const Program *p, const Op *v, unsigned char *marks)
{
	int nv = p->values.len;
	unsigned char *mark = marks ? marks : malloc((size_t)v->body3.len + 1);
	unsigned char *need = calloc((size_t)nv + 1, 1), *kept = calloc((size_t)nv + 1, 1), *state = calloc((size_t)nv + 1, 1);
	int64_t flops = -1;
	for (int i = 0; i < v->body3.len; i++) {
		const Op *st = v->body3.ops[i];
		mark[i] = REPLAY_SKIP;
		if (st->kind == OP_STORE_SLICE && st->in[1] == v->irow)
			kept[st->in[2]] = 1;
	}
	/* the carried values the adjoint reads: their next values are replayed, from theirs alone */
	for (int c = 0; c < v->ncarry; c++)
		if (rev_replay_state(v, c)) {
			need[v->cyield3[c]] = 1;
			state[v->carg[c]] = 1;
			flops = 0;
		}
	for (int c = 0; c < v->ncarry; c++) {
		kept[v->carg[c]] = 0; /* the state is the replay's own, never read back from a row */
		if (need[v->carg[c]] && !state[v->carg[c]])
			flops = -1; /* the next state is a carried value the adjoint does not read */
	}
	for (int i = v->body3.len - 1; i >= 0 && flops >= 0; i--) {
		const Op *op = v->body3.ops[i];
		if (op->out < 0 || !need[op->out])
			continue;
		if (kept[op->out] && !(ir_ops[op->kind].flags & OPF_VIEW)) {
			mark[i] = REPLAY_LOAD;
			continue;
		}
		if (!replayable(p, v, op, state)) {
			flops = -1;
			break;
		}
		mark[i] = REPLAY_RUN;
		flops += ir_op_flops((Program *)p, (Op *)op);
		for (int k = 0; k < op->nin; k++)
			need[op->in[k]] = 1;
	}
	free(need);
	free(kept);
	free(state);
	if (!marks)
		free(mark);
	return flops;
}

int64_t rev_op_replays(const Op *v)
{
	return v->replay && !v->pool ? rev_replays(v->trip, v->nsnap, rev_op_k(v), v->swept, rev_op_tail(v)) : 0;
}
