/* ops: elementwise arithmetic and functions, with NumPy broadcasting. */
#include "ops.h"

const char *ops_need_real(Program *p, Op *op, int k)
{
	Type t = ir_vtype(p, op->in[k]);
	if (t.dt != DT_REAL)
		return ar_printf("%s needs a real (f32) tensor, got %s", ir_ops[op->kind].name, ops_ts(t));
	return NULL;
}

const char *ops_shape_ew(Program *p, Op *op, Type *out)
{
	const char *err;
	for (int k = 0; k < op->nin; k++)
		if ((err = ops_need_real(p, op, k)))
			return err;
	Type a = ir_vtype(p, op->in[0]);
	if (op->nin == 1) {
		*out = a;
		return NULL;
	}
	Type b = ir_vtype(p, op->in[1]);
	if (!ir_broadcast(a, b, out))
		return ar_printf("shapes %s and %s do not broadcast", ops_ts(a), ops_ts(b));
	return NULL;
}

/* operand v's share d of g, summed down to v's shape where it was broadcast */
static void share(Ad *a, int v, int d, Loc loc)
{
	if (ad_active(a, v))
		ad_contrib(a, v, ad_unbroadcast(a, d, v, loc), loc);
}

void ops_adjoint_ew(Ad *a, Op *op, int g)
{
	int x = op->in[0], y = op->nin > 1 ? op->in[1] : -1, o = op->out;
	Loc loc = op->loc;
	switch (op->kind) {
	case OP_ADD:
		share(a, x, g, loc);
		share(a, y, g, loc);
		return;
	case OP_SUB:
		share(a, x, g, loc);
		if (ad_active(a, y))
			share(a, y, ad_op1(a, OP_NEG, loc, g), loc);
		return;
	case OP_MUL:
		if (ad_active(a, x))
			share(a, x, ad_op2(a, OP_MUL, loc, g, y), loc);
		if (ad_active(a, y))
			share(a, y, ad_op2(a, OP_MUL, loc, g, x), loc);
		return;
	case OP_DIV:
		if (ad_active(a, x))
			share(a, x, ad_op2(a, OP_DIV, loc, g, y), loc);
		if (ad_active(a, y)) /* d(x/y)/dy = -(x/y)/y */
			share(a, y, ad_op1(a, OP_NEG, loc, ad_op2(a, OP_MUL, loc, g, ad_op2(a, OP_DIV, loc, o, y))), loc);
		return;
	case OP_NEG:
		share(a, x, ad_op1(a, OP_NEG, loc, g), loc);
		return;
	case OP_RELU:
		share(a, x, ad_op2(a, OP_MUL, loc, g, ad_op1(a, OP_STEP, loc, x)), loc);
		return;
	case OP_TANH: /* 1 - tanh^2 */
		share(a, x, ad_op2(a, OP_MUL, loc, g, ad_op2(a, OP_SUB, loc, ad_const(a, loc, 1), ad_op2(a, OP_MUL, loc, o, o))), loc);
		return;
	case OP_SIGMOID: /* s (1 - s) */
		share(a, x, ad_op2(a, OP_MUL, loc, ad_op2(a, OP_MUL, loc, g, o), ad_op2(a, OP_SUB, loc, ad_const(a, loc, 1), o)), loc);
		return;
	case OP_EXP:
		share(a, x, ad_op2(a, OP_MUL, loc, g, o), loc);
		return;
	case OP_LOG:
		share(a, x, ad_op2(a, OP_DIV, loc, g, x), loc);
		return;
	case OP_SQRT: /* 1 / (2 sqrt x) */
		share(a, x, ad_op2(a, OP_DIV, loc, ad_op2(a, OP_MUL, loc, g, ad_const(a, loc, 0.5)), o), loc);
		return;
	default:
		die("no elementwise adjoint rule for %s", ir_ops[op->kind].name);
	}
}
