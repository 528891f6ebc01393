/* ops: elementwise arithmetic, functions and comparisons, with NumPy broadcasting. */
#include <math.h>

#include "ops.h"

#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_A 0.044715

double ops_eval_ew(OpKind k, const double *x)
{
	double a = x[0], b = x[1];
	switch (k) {
	case OP_ADD: return a + b;
	case OP_SUB: return a - b;
	case OP_MUL: return a * b;
	case OP_DIV: return a / b;
	case OP_NEG: return -a;
	case OP_RELU: return a > 0 ? a : 0;
	case OP_TANH: return tanh(a);
	case OP_SIGMOID: return 1 / (1 + exp(-a));
	case OP_EXP: return exp(a);
	case OP_LOG: return log(a);
	case OP_SQRT: return sqrt(a);
	case OP_STEP: return a > 0 ? 1 : 0;
	case OP_ABS: return fabs(a);
	case OP_SIGN: return a > 0 ? 1 : a < 0 ? -1 : 0;
	case OP_ERF: return erf(a);
	case OP_SIN: return sin(a);
	case OP_COS: return cos(a);
	case OP_GELU: return 0.5 * a * (1 + tanh(GELU_C * (a + GELU_A * a * a * a)));
	case OP_GELU_GRAD: {
		double t = tanh(GELU_C * (a + GELU_A * a * a * a));
		return 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * GELU_C * (1 + 3 * GELU_A * a * a);
	}
	case OP_POW: return pow(a, b);
	case OP_MAXIMUM: return a >= b ? a : b;
	case OP_MINIMUM: return a <= b ? a : b;
	case OP_LT: return a < b;
	case OP_LE: return a <= b;
	case OP_GT: return a > b;
	case OP_GE: return a >= b;
	case OP_EQ: return a == b;
	case OP_NE: return a != b;
	case OP_WHERE: return a != 0 ? b : x[2];
	default: die("no elementwise meaning for %s", ir_ops[k].name);
	}
}

const char *ops_need_real(Program *p, Op *op, int k)
{
	Type t = ir_vtype(p, op->in[k]);
	if (!ir_is_real(t.dt))
		return ar_printf("%s needs a real (f32, bf16 or f64) tensor, got %s", ir_ops[op->kind].name, ops_ts(t));
	return NULL;
}

const char *ops_shape_ew(Program *p, Op *op, Type *out)
{
	const char *err;
	for (int k = 0; k < op->nin; k++)
		if ((err = ops_need_real(p, op, k)))
			return err;
	/* a number takes the element type of the tensors beside it; tensors must agree */
	int first = -1;
	for (int k = 0; k < op->nin; k++) {
		Value *v = &p->values.data[op->in[k]];
		if (v->def && v->def->kind == OP_CONST)
			continue;
		if (first < 0)
			first = k;
		else if (v->type.dt != ir_vtype(p, op->in[first]).dt)
			return ar_printf("%s of %s and %s: the element types differ; convert one with cast(x, %s)", ir_ops[op->kind].name,
			                 ops_ts(ir_vtype(p, op->in[first])), ops_ts(v->type), ir_dt_name(ir_vtype(p, op->in[first]).dt));
	}
	*out = ir_vtype(p, op->in[0]);
	for (int k = 1; k < op->nin; k++) {
		Type b = ir_vtype(p, op->in[k]), a = *out;
		if (!ir_broadcast(a, b, out))
			return ar_printf("shapes %s and %s do not broadcast", ops_ts(a), ops_ts(b));
	}
	out->dt = first >= 0 ? ir_vtype(p, op->in[first]).dt : p->real;
	return NULL;
}

/* operand v's share d of g, summed down to v's shape where it was broadcast */
/* a number operand's value, folded into its gradient's constants: an op
 * of numbers alone would take the program's real type, not x's */
static bool number(Ad *a, int v, double *out)
{
	Op *d = ad_program(a)->values.data[v].def;
	if (!d || d->kind != OP_CONST)
		return false;
	*out = d->attr.value;
	return true;
}

static void share(Ad *a, int v, int d, Loc loc)
{
	if (ad_active(a, v))
		ad_contrib(a, v, ad_unbroadcast(a, d, v, loc), loc);
}

void ops_adjoint_ew(Ad *a, Op *op, int g)
{
	int x = op->in[0], y = op->nin > 1 ? op->in[1] : -1, o = op->out;
	int zero, mask;
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
	case OP_MUL: {
		/* the smaller (broadcast) operand's contribution first: its product is summed down at once,
		 * so it is not live beside the other's (a norm's gain: g x and g gain are not both held) */
		Program *p = ad_program(a);
		int u[2] = {x, y};
		if (ir_numel(ir_vtype(p, y)) < ir_numel(ir_vtype(p, x)))
			u[0] = y, u[1] = x;
		for (int i = 0; i < 2; i++)
			if (ad_active(a, u[i]))
				share(a, u[i], ad_op2(a, OP_MUL, loc, g, u[1 - i]), loc);
		return;
	}
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
	case OP_ABS:
		share(a, x, ad_op2(a, OP_MUL, loc, g, ad_op1(a, OP_SIGN, loc, x)), loc);
		return;
	case OP_ERF: /* 2 / sqrt(pi) exp(-x^2) */
		share(a, x, ad_op2(a, OP_MUL, loc, ad_op2(a, OP_MUL, loc, g, ad_const(a, loc, 1.1283791670955126)),
		                   ad_op1(a, OP_EXP, loc, ad_op1(a, OP_NEG, loc, ad_op2(a, OP_MUL, loc, x, x)))), loc);
		return;
	case OP_SIN:
		share(a, x, ad_op2(a, OP_MUL, loc, g, ad_op1(a, OP_COS, loc, x)), loc);
		return;
	case OP_COS: /* -sin */
		share(a, x, ad_op1(a, OP_NEG, loc, ad_op2(a, OP_MUL, loc, g, ad_op1(a, OP_SIN, loc, x))), loc);
		return;
	case OP_GELU:
		share(a, x, ad_op2(a, OP_MUL, loc, g, ad_op1(a, OP_GELU_GRAD, loc, x)), loc);
		return;
	case OP_POW: { /* y x^(y-1), and x^y log x */
		double c;
		if (ad_active(a, x)) {
			int y1 = number(a, y, &c) ? ad_const(a, loc, c - 1) : ad_op2(a, OP_SUB, loc, y, ad_const(a, loc, 1));
			share(a, x, ad_op2(a, OP_MUL, loc, ad_op2(a, OP_MUL, loc, g, y), ad_op2(a, OP_POW, loc, x, y1)), loc);
		}
		if (ad_active(a, y)) {
			int lx = number(a, x, &c) ? ad_const(a, loc, log(c)) : ad_op1(a, OP_LOG, loc, x);
			share(a, y, ad_op2(a, OP_MUL, loc, ad_op2(a, OP_MUL, loc, g, o), lx), loc);
		}
		return;
	}
	case OP_MAXIMUM:
	case OP_MINIMUM: /* the mask of where a won */
		mask = ad_op2(a, op->kind == OP_MAXIMUM ? OP_GE : OP_LE, loc, x, y);
		if (ad_active(a, x))
			share(a, x, ad_op2(a, OP_MUL, loc, g, mask), loc);
		if (ad_active(a, y))
			share(a, y, ad_op2(a, OP_SUB, loc, g, ad_op2(a, OP_MUL, loc, g, mask)), loc);
		return;
	case OP_WHERE:
		zero = ad_const(a, loc, 0);
		if (ad_active(a, y))
			share(a, y, ad_op3(a, OP_WHERE, loc, x, g, zero), loc);
		if (ad_active(a, op->in[2]))
			share(a, op->in[2], ad_op3(a, OP_WHERE, loc, x, zero, g), loc);
		return;
	default:
		die("no elementwise adjoint rule for %s", ir_ops[op->kind].name);
	}
}

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

void ops_run_ew(Interp *m, Op *op)
{
	Type to = ir_vtype(m->p, op->out);
	int64_t idx[IR_MAXRANK];
	double *o = ops_real(m, op->out);
	for (int64_t e = 0; e < ir_numel(to); e++) {
		ops_unravel(to, e, idx);
		double x[3] = {0, 0, 0};
		for (int k = 0; k < op->nin; k++)
			x[k] = ops_ew_arg(m, op, k, to, idx);
		o[e] = ops_eval_ew(op->kind, x);
	}
}
