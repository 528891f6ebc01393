/* ir: checking an op against the shape rule the op table names (the rules
 * themselves live with their families, compiler/ops/). Messages are for
 * users: the frontend reports them at the op's location. */
#include "ir.h"

static const char *ts(Type t) { return ir_type_str(t); }

bool ir_broadcast(Type a, Type b, Type *out)
{
	Type r = {0};
	r.dt = a.dt;
	r.rank = a.rank > b.rank ? a.rank : b.rank;
	for (int i = 0; i < r.rank; i++) {
		int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
		int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b.dim[ib] : 1;
		if (da != db && da != 1 && db != 1)
			return false;
		r.dim[i] = da == 1 ? db : da;
	}
	*out = r;
	return true;
}

bool ir_leading_sum(Program *p, Op *op, int64_t *m, int64_t *n)
{
	if (op->kind != OP_SUM_TO && op->kind != OP_SUM)
		return false;
	Type in = ir_vtype(p, op->in[0]), out = ir_vtype(p, op->out);
	if (out.rank >= in.rank || ir_numel(out) == 0)
		return false;
	int lead = in.rank - out.rank;
	for (int i = 0; i < out.rank; i++)
		if (out.dim[i] != in.dim[lead + i])
			return false;
	if (op->kind == OP_SUM && op->attr.axes != (1u << lead) - 1)
		return false;
	*n = ir_numel(out);
	*m = ir_numel(in) / *n;
	return *m > 1 && ir_numel(in) > IR_GEMM_SUM;
}

bool ir_small_matmul(Program *p, Op *op)
{
	if (op->kind != OP_MATMUL)
		return false;
	Type a = ir_vtype(p, op->in[0]), o = ir_vtype(p, op->out);
	int64_t k = op->attr.mm.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
	return ir_numel(o) <= IR_GEMM_SUM && k <= IR_SMALL_DOT;
}

/* the ops whose result codegen can add into an acc's target as it makes
 * it (beta 1 for a GEMM, a kernel that adds where it would store) */
bool ir_adds_into(const Op *op)
{
	return op->kind == OP_MATMUL || op->kind == OP_SUM || op->kind == OP_MEAN || op->kind == OP_SUM_TO ||
	       op->kind == OP_EMBED_GRAD;
}

bool ir_may_absorb(const Program *p, const Op *acc)
{
	if (p->mixed)
		return true;
	for (int i = 0; i < p->params.len; i++)
		if (p->params.data[i].grad == acc->in[0] && p->params.data[i].stacked)
			return false;
	return true;
}

int64_t ir_op_flops(Program *p, Op *op)
{
	int64_t big = 0;
	for (int k = 0; k < op->nin; k++)
		if (ir_numel(ir_vtype(p, op->in[k])) > big)
			big = ir_numel(ir_vtype(p, op->in[k]));
	switch (ir_ops[op->kind].flops) {
	case FL_NONE:
		return 0;
	case FL_EW:
		return op->out >= 0 ? ir_numel(ir_vtype(p, op->out)) : 0;
	case FL_IN:
		return big;
	case FL_ROW:
		return 5 * big;
	case FL_GEMM: {
		Type a = ir_vtype(p, op->in[0]), c = ir_vtype(p, op->out);
		int64_t k = op->attr.mm.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
		return 2 * ir_numel(c) * k;
	}
	case FL_ATTN: {
		Type q = ir_vtype(p, op->in[0]);
		int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], heads = ir_numel(q) / (T * C) * op->attr.attn.heads;
		int64_t pairs = op->attr.attn.causal ? T * (T + 1) / 2 : T * T;
		int per = op->kind == OP_ATTN_STATS || op->kind == OP_ATTN_LSE ? 2
		        : op->kind == OP_ATTN_DKV ? 8 : op->kind == OP_ATTN_DQ || op->kind == OP_ATTN_DK ? 6 : 4;
		return per * heads * pairs * (C / op->attr.attn.heads);
	}
	case FL_CONV: {
		/* the forward's output and weight: the result of conv2d, the first operand of conv2d_dx, the second of conv2d_dw */
		Type y = op->kind == OP_CONV2D ? ir_vtype(p, op->out) : ir_vtype(p, op->in[op->kind == OP_CONV2D_DX ? 0 : 1]);
		Type w = op->kind == OP_CONV2D_DW ? ir_vtype(p, op->out) : ir_vtype(p, op->in[1]);
		return 2 * ir_numel(y) * (ir_numel(w) / w.dim[0]);
	}
	}
	unreachable();
}

int64_t ir_recomputed_flops(Program *p, Block *b)
{
	int64_t f = 0;
	for (int i = 0; i < b->len; i++)
		if (b->ops[i]->recomputed)
			f += ir_block_flops(p, b, i, i + 1);
	return f;
}

int64_t ir_block_flops(Program *p, Block *b, int from, int to)
{
	int64_t f = 0;
	for (int i = from; i < to; i++) {
		Op *op = b->ops[i];
		if (op->kind == OP_LOOP)
			f += op->trip * ir_block_flops(p, &op->body, 0, op->body.len);
		else
			f += ir_op_flops(p, op);
	}
	return f;
}

static const char *check(Program *p, Op *op, Type *out)
{
	const OpInfo *info = &ir_ops[op->kind];
	if (info->arity >= 0 && op->nin != info->arity)
		return ar_printf("%s takes %d operand%s, got %d", info->name, info->arity, info->arity == 1 ? "" : "s", op->nin);
	return info->shape(p, op, out);
}

const char *ir_check_op(Program *p, Op *op, Type *out)
{
	const char *err = check(p, op, out);
	if (!err && !(ir_ops[op->kind].flags & OPF_WRITE) && ir_too_large(*out))
		return ar_printf("the result %s would have more than 2^40 elements, dpc's limit for one tensor", ts(*out));
	return err;
}
