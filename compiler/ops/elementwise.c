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
