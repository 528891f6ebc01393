/* ops: the leaves. param and input take their declared types; fill makes
 * a tensor of its `to` type; interp, the matrix that resamples bilinearly;
 * arange, the ids 0..n-1. */
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
	case OP_TRAINING:
	case OP_LITERAL:
		*out = op->to;
		return NULL;
	case OP_ARANGE:
		if (op->to.rank != 1 || op->to.dt != DT_I32 || op->to.dim[0] > INT32_MAX)
			return ar_printf("arange makes i32[n] with n below 2^31, not %s", ops_ts(op->to));
		*out = op->to;
		return NULL;
	case OP_INTERP:
		if (op->to.rank != 2 || op->to.dim[0] < op->to.dim[1])
			return ar_printf("bilinear weights resample to at least as many points, not %s", ops_ts(op->to));
		*out = op->to;
		return NULL;
	default:
		unreachable();
	}
}

void ops_adjoint_none(Ad *a, Op *op, int g) {}
