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
	return *m > 1;
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
