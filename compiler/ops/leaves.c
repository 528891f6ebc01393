/* ops: the leaves. param and input take their declared types; fill makes
 * a tensor of its `to` type. */
#include "ops.h"

const char *ops_shape_leaf(Program *p, Op *op, Type *out)
{
	switch (op->kind) {
	case OP_PARAM:
		*out = p->params.data[op->index].type;
		return NULL;
	case OP_INPUT:
		*out = p->inputs.data[op->index].type;
		return NULL;
	case OP_CONST:
		*out = ir_scalar(DT_REAL);
		return NULL;
	case OP_IDX:
		*out = ir_scalar(DT_INDEX);
		return NULL;
	case OP_FILL:
		*out = op->to;
		return NULL;
	default:
		unreachable();
	}
}

void ops_adjoint_none(Ad *a, Op *op, int g) {}
