/* ops: the leaves. param and input take their declared types; fill makes
 * a tensor of its `to` type, scratch the memory of one (its contents
 * undefined); interp, the matrix that resamples bilinearly;
 * arange, the ids 0..n-1. */
#include <math.h>
#include <string.h>

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
		*out = ir_scalar(p->real);
		return NULL;
	case OP_IDX:
		*out = ir_scalar(DT_INDEX);
		return NULL;
	case OP_FILL:
	case OP_TRAINING:
	case OP_LITERAL:
	case OP_SCRATCH:
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

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

void ops_run_leaf(Interp *m, Op *op)
{
	Type to = op->out >= 0 ? ir_vtype(m->p, op->out) : ir_scalar(m->p->real);
	switch (op->kind) {
	case OP_PARAM:
	case OP_INPUT:
	case OP_CONST:
	case OP_SCRATCH:
		return;
	case OP_IDX:
		m->index[op->out] = op->index;
		return;
	case OP_FILL:
		for (int64_t e = 0; e < ir_numel(to); e++)
			ops_real(m, op->out)[e] = op->attr.value;
		return;
	case OP_INTERP: {
		/* output point i sits at (i + 1/2) m / n - 1/2 of the source, at least 0 */
		int64_t n = to.dim[0], mm = to.dim[1];
		double *o = ops_real(m, op->out);
		memset(o, 0, sizeof(double) * (size_t)(n * mm));
		for (int64_t i = 0; i < n; i++) {
			double at = fmax(((double)i + 0.5) * (double)mm / (double)n - 0.5, 0);
			int64_t lo = (int64_t)floor(at), hi = lo + 1 < mm ? lo + 1 : lo;
			o[i * mm + lo] += 1 - (at - (double)lo);
			o[i * mm + hi] += at - (double)lo;
		}
		return;
	}
	case OP_LITERAL:
		memcpy(ops_real(m, op->out), op->attr.lit.v, sizeof(double) * (size_t)ir_numel(to));
		return;
	case OP_TRAINING:
		ops_real(m, op->out)[0] = 1; /* the interpreter runs training steps */
		return;
	case OP_ARANGE:
		for (int64_t e = 0; e < ir_numel(to); e++)
			((int32_t *)ops_mem(m, op->out))[e] = (int32_t)e;
		return;
	default:
		unreachable();
	}
}
