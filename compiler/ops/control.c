/* ops: mutable variables (gradients, accumulators, tapes: operand 0 is the
 * variable, and there is no result), loops, and tensor streaming's copies
 * between a slot variable and the stacked tensor it streams. */
#include "ops.h"

const char *ops_shape_var(Program *p, Op *op, Type *out)
{
	if (p->values.data[op->in[0]].kind != VK_VAR)
		return ar_printf("%s writes a variable", ir_ops[op->kind].name);
	Type v = ir_vtype(p, op->in[0]);
	switch (op->kind) {
	case OP_ZERO:
		return NULL;
	case OP_ASSIGN:
	case OP_ACC:
		if (!ir_type_eq(v, ir_vtype(p, op->in[1])))
			return ar_printf("%s of %s into %s", ir_ops[op->kind].name, ops_ts(ir_vtype(p, op->in[1])), ops_ts(v));
		return NULL;
	case OP_ACC_SLICE:
	case OP_STORE_SLICE:
		if (ir_vtype(p, op->in[1]).dt != DT_INDEX)
			return "slice index is not an index";
		if (v.rank < 1 || !ir_type_eq(ir_drop_first(v), ir_vtype(p, op->in[2])))
			return ar_printf("%s of %s into %s", ir_ops[op->kind].name, ops_ts(ir_vtype(p, op->in[2])), ops_ts(v));
		return NULL;
	default:
		unreachable();
	}
}

const char *ops_shape_transfer(Program *p, Op *op, Type *out)
{
	int slot = op->kind == OP_D2H ? op->in[1] : op->in[0];
	int host = op->kind == OP_D2H ? op->in[0] : op->in[1];
	int index = op->kind == OP_WAIT ? op->in[1] : op->in[2];
	Value *s = &p->values.data[slot];
	if (s->kind != VK_VAR || s->vclass != VC_SLOT || s->type.rank < 1)
		return ar_printf("%s: %s is not a slot variable", ir_ops[op->kind].name, ir_value_name(p, slot));
	if (ir_vtype(p, index).dt != DT_INDEX)
		return "slice index is not an index";
	Type unit = ir_drop_first(s->type);
	switch (op->kind) {
	case OP_WAIT:
		return NULL;
	case OP_H2D:
	case OP_D2H: {
		Type h = ir_vtype(p, host);
		if (h.rank < 1 || !ir_type_eq(ir_drop_first(h), unit))
			return ar_printf("%s between %s and slots %s", ir_ops[op->kind].name, ops_ts(h), ops_ts(s->type));
		return NULL;
	}
	case OP_UPDATE:
		if (op->nin != 3 && op->nin != 5)
			return ar_printf("update takes 3 or 5 operands, got %d", op->nin);
		if (!ir_type_eq(ir_vtype(p, op->in[1]), unit) || p->values.data[op->in[1]].kind != VK_VAR)
			return ar_printf("update of slots %s with the gradient %s", ops_ts(s->type), ops_ts(ir_vtype(p, op->in[1])));
		for (int k = 3; k < op->nin; k++)
			if (p->values.data[op->in[k]].vclass != VC_SLOT || !ir_type_eq(ir_vtype(p, op->in[k]), s->type))
				return ar_printf("update: optimizer state %s is not slots like %s", ops_ts(ir_vtype(p, op->in[k])),
				                 ops_ts(s->type));
		if (op->index < 0 || op->index >= p->params.len)
			return "update of no parameter";
		return NULL;
	default:
		unreachable();
	}
}

const char *ops_shape_loop(Program *p, Op *op, Type *out)
{
	return "loops have no shape rule";
}

void ops_adjoint_missing(Ad *a, Op *op, int g)
{
	die("no adjoint rule for %s", ir_ops[op->kind].name);
}
