/* ops: views (slice, reshape: no storage of their own) and data movement
 * (transpose, broadcast, sum_to, copy). */
#include "ops.h"

const char *ops_shape_slice(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if (a.rank < 1 || a.dt == DT_INDEX)
		return ar_printf("cannot index %s", ops_ts(a));
	if (b.dt != DT_INDEX)
		return "an index must be a loop variable or a constant";
	*out = ir_drop_first(a);
	return NULL;
}

const char *ops_shape_reshape(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]);
	if (ir_numel(a) != ir_numel(op->to)) {
		Type to = op->to;
		to.dt = a.dt;
		return ar_printf("cannot reshape %s to %s: %lld vs %lld elements", ops_ts(a), ops_ts(to),
		                 (long long)ir_numel(a), (long long)ir_numel(to));
	}
	*out = op->to;
	out->dt = a.dt;
	return NULL;
}

const char *ops_shape_transpose(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]);
	unsigned seen = 0;
	for (int i = 0; i < a.rank; i++) {
		int q = op->perm[i];
		if (q < 0 || q >= a.rank || (seen >> q & 1))
			return ar_printf("transpose needs a permutation of the %d axes of %s", a.rank, ops_ts(a));
		seen |= 1u << q;
	}
	*out = a;
	for (int i = 0; i < a.rank; i++)
		out->dim[i] = a.dim[op->perm[i]];
	return NULL;
}

/* broadcast widens its operand to `to`; sum_to adds it up to `to`, the reverse */
const char *ops_shape_broadcast(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), to = op->to, r;
	to.dt = a.dt;
	bool down = op->kind == OP_SUM_TO;
	if (!ir_broadcast(a, to, &r) || !ir_type_eq(r, down ? a : to))
		return ar_printf("cannot %s %s to %s", down ? "reduce" : "broadcast", ops_ts(a), ops_ts(to));
	*out = to;
	return NULL;
}

const char *ops_shape_copy(Program *p, Op *op, Type *out)
{
	*out = ir_vtype(p, op->in[0]);
	return NULL;
}

/* x[i] of a parameter: its gradient's row i */
void ops_adjoint_slice(Ad *a, Op *op, int g)
{
	int x = op->in[0];
	if (!ad_active(a, x))
		return;
	Program *p = ad_program(a);
	Op *d = p->values.data[x].def;
	if (!d || d->kind != OP_PARAM)
		die("slice adjoint: only parameters are indexed");
	int in[3] = {p->params.data[d->index].grad, op->in[1], g};
	ad_emit(a, ir_new_op(p, OP_ACC_SLICE, op->loc, 3, in));
}

/* reshape, broadcast, sum_to: g taken back to the operand's type by the
 * reverse op (reshape's is itself) */
void ops_adjoint_retype(Ad *a, Op *op, int g)
{
	OpKind back = op->kind == OP_BROADCAST ? OP_SUM_TO : op->kind == OP_SUM_TO ? OP_BROADCAST : OP_RESHAPE;
	ad_contrib(a, op->in[0], ad_opto(a, back, op->loc, g, ir_vtype(ad_program(a), op->in[0])), op->loc);
}

void ops_adjoint_transpose(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Op *t = ir_new_op(p, OP_TRANSPOSE, op->loc, 1, &g);
	for (int i = 0; i < ir_vtype(p, op->in[0]).rank; i++)
		t->perm[op->perm[i]] = i;
	ad_contrib(a, op->in[0], ad_emit(a, t), op->loc);
}

void ops_adjoint_copy(Ad *a, Op *op, int g) { ad_contrib(a, op->in[0], g, op->loc); }
