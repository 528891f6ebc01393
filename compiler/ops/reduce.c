/* ops: reductions. sum, mean, max and min over a set of axes (a bit mask); softmax
 * and log_softmax over the last axis, and their gradients. */
#include "ops.h"

const char *ops_shape_reduce(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (a.rank < 32 && (op->attr.axes >> a.rank) != 0)
		return ar_printf("axis out of range for %s", ops_ts(a));
	Type r = {DT_REAL, 0, {0}};
	for (int i = 0; i < a.rank; i++)
		if (!(op->attr.axes >> i & 1))
			r.dim[r.rank++] = a.dim[i];
	*out = r;
	return NULL;
}

const char *ops_shape_softmax(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (a.rank < 1)
		return ar_printf("%s needs a tensor of rank 1 or more, got %s", ir_ops[op->kind].name, ops_ts(a));
	*out = a;
	return NULL;
}

const char *ops_shape_softmax_grad(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if (!ir_type_eq(a, b) || a.rank < 1)
		return ar_printf("%s of %s and %s", ir_ops[op->kind].name, ops_ts(a), ops_ts(b));
	*out = a;
	return NULL;
}

/* sum: g put back on the reduced axes and broadcast; mean: that over the
 * count; max and min: that on the elements equal to the result, shared
 * equally among ties */
void ops_adjoint_reduce(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Loc loc = op->loc;
	Type tx = ir_vtype(p, op->in[0]), keep = tx;
	double n = 1;
	for (int i = 0; i < tx.rank; i++)
		if (op->attr.axes >> i & 1)
			keep.dim[i] = 1, n *= (double)tx.dim[i];
	int mask = -1;
	if (op->kind == OP_MAX || op->kind == OP_MIN) {
		int hit = ad_opto(a, OP_BROADCAST, loc, ad_opto(a, OP_RESHAPE, loc, op->out, keep), tx);
		mask = ad_op2(a, OP_EQ, loc, op->in[0], hit);
		Op *count = ir_new_op(p, OP_SUM, loc, 1, &mask);
		count->attr = op->attr;
		g = ad_op2(a, OP_DIV, loc, g, ad_emit(a, count));
	}
	int d = ad_opto(a, OP_BROADCAST, loc, ad_opto(a, OP_RESHAPE, loc, g, keep), tx);
	if (op->kind == OP_MEAN)
		d = ad_op2(a, OP_MUL, loc, d, ad_const(a, loc, 1 / n));
	if (mask >= 0)
		d = ad_op2(a, OP_MUL, loc, d, mask);
	ad_contrib(a, op->in[0], d, loc);
}

void ops_adjoint_softmax(Ad *a, Op *op, int g)
{
	OpKind k = op->kind == OP_SOFTMAX ? OP_SOFTMAX_GRAD : OP_LOG_SOFTMAX_GRAD;
	ad_contrib(a, op->in[0], ad_op2(a, k, op->loc, op->out, g), op->loc);
}

/* argmax (x, axis) -> i32, the axis removed */
const char *ops_shape_argmax(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (op->attr.ax.axis < 0 || op->attr.ax.axis >= a.rank)
		return ar_printf("argmax's axis %d is out of range for %s", op->attr.ax.axis, ops_ts(a));
	*out = a;
	out->dt = DT_I32;
	out->rank--;
	for (int i = op->attr.ax.axis; i < out->rank; i++)
		out->dim[i] = a.dim[i + 1];
	return NULL;
}
