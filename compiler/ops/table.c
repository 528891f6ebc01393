/* ops: the op table the IR reads (ir.h's ir_ops), built here from ops.def
 * and each family's rules (its shape, adjoint and value at a point), so
 * that ir/ includes nothing above it. */
#include "ops.h"

const OpInfo ir_ops[OP__COUNT] = {
#define X(name, text, arity, flags, shape, adjoint, form, low, attr, cost, family) \
	[OP_##name] = {text, arity, flags, ops_shape_##shape, ops_adjoint_##adjoint, ops_run_##shape, form, low, attr, cost},
#include "../ir/ops.def"
#undef X
};

bool ir_may_lend(const Op *op, int k)
{
	return (ir_ops[op->kind].flags & OPF_EW) || ((ir_ops[op->kind].flags & OPF_IN0) && k == 0);
}
