/* ir: the shape rule of every op. Messages are for users: the frontend
 * reports them at the op's location. */
#include "ir.h"

static const char *ts(Type t) { return ir_type_str(t); }

bool ir_broadcast(Type a, Type b, Type *out)
{
	Type r = {0};
	r.dt = a.dt;
	r.rank = a.rank > b.rank ? a.rank : b.rank;
	for (int i = 0; i < r.rank; i++) {
		int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
		int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b.dim[ib] : 1;
		if (da != db && da != 1 && db != 1)
			return false;
		r.dim[i] = da == 1 ? db : da;
	}
	*out = r;
	return true;
}

bool ir_leading_sum(Program *p, Op *op, int64_t *m, int64_t *n)
{
	if (op->kind != OP_SUM_TO && op->kind != OP_SUM)
		return false;
	Type in = ir_vtype(p, op->in[0]), out = ir_vtype(p, op->out);
	if (out.rank >= in.rank || ir_numel(out) == 0)
		return false;
	int lead = in.rank - out.rank;
	for (int i = 0; i < out.rank; i++)
		if (out.dim[i] != in.dim[lead + i])
			return false;
	if (op->kind == OP_SUM && op->axes != (1u << lead) - 1)
		return false;
	*n = ir_numel(out);
	*m = ir_numel(in) / *n;
	return *m > 1;
}

static const char *need_real(Program *p, Op *op, int k)
{
	Type t = ir_vtype(p, op->in[k]);
	if (t.dt != DT_REAL)
		return ar_printf("%s needs a real (f32) tensor, got %s", ir_ops[op->kind].name, ts(t));
	return NULL;
}

static const char *check_matmul(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if (a.dt != DT_REAL || b.dt != DT_REAL)
		return ar_printf("matmul needs real tensors, got %s @ %s", ts(a), ts(b));
	if (a.rank < 2 || b.rank < 2)
		return ar_printf("matmul needs operands of rank 2 or more, got %s @ %s", ts(a), ts(b));
	int64_t m = a.dim[a.rank - 2], ka = a.dim[a.rank - 1];
	if (op->ta)
		m = a.dim[a.rank - 1], ka = a.dim[a.rank - 2];
	int64_t kb = b.dim[b.rank - 2], n = b.dim[b.rank - 1];
	if (op->tb)
		kb = b.dim[b.rank - 1], n = b.dim[b.rank - 2];
	if (ka != kb)
		return ar_printf("matmul inner dimensions differ: %s @ %s (%lld vs %lld)", ts(a), ts(b), (long long)ka, (long long)kb);
	if (b.rank > 2) {
		bool same = a.rank == b.rank;
		for (int i = 0; same && i < a.rank - 2; i++)
			same = a.dim[i] == b.dim[i];
		if (!same)
			return ar_printf("batched matmul needs equal batch axes: %s @ %s", ts(a), ts(b));
	}
	*out = a;
	out->dim[a.rank - 2] = m;
	out->dim[a.rank - 1] = n;
	return NULL;
}

/* h2d, d2h, wait, update: a slot variable and the stacked tensor it streams */
static const char *check_transfer(Program *p, Op *op)
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
			return ar_printf("%s between %s and slots %s", ir_ops[op->kind].name, ts(h), ts(s->type));
		return NULL;
	}
	case OP_UPDATE:
		if (op->nin != 3 && op->nin != 5)
			return ar_printf("update takes 3 or 5 operands, got %d", op->nin);
		if (!ir_type_eq(ir_vtype(p, op->in[1]), unit) || p->values.data[op->in[1]].kind != VK_VAR)
			return ar_printf("update of slots %s with the gradient %s", ts(s->type), ts(ir_vtype(p, op->in[1])));
		for (int k = 3; k < op->nin; k++)
			if (p->values.data[op->in[k]].vclass != VC_SLOT || !ir_type_eq(ir_vtype(p, op->in[k]), s->type))
				return ar_printf("update: optimizer state %s is not slots like %s", ts(ir_vtype(p, op->in[k])), ts(s->type));
		if (op->index < 0 || op->index >= p->params.len)
			return "update of no parameter";
		return NULL;
	default:
		unreachable();
	}
}

static const char *check_var(Program *p, Op *op)
{
	if (op->kind == OP_H2D || op->kind == OP_D2H || op->kind == OP_WAIT || op->kind == OP_UPDATE)
		return check_transfer(p, op);
	if (p->values.data[op->in[0]].kind != VK_VAR)
		return ar_printf("%s writes a variable", ir_ops[op->kind].name);
	Type v = ir_vtype(p, op->in[0]);
	switch (op->kind) {
	case OP_ZERO:
		return NULL;
	case OP_ASSIGN:
	case OP_ACC:
		if (!ir_type_eq(v, ir_vtype(p, op->in[1])))
			return ar_printf("%s of %s into %s", ir_ops[op->kind].name, ts(ir_vtype(p, op->in[1])), ts(v));
		return NULL;
	case OP_ACC_SLICE:
	case OP_STORE_SLICE:
		if (ir_vtype(p, op->in[1]).dt != DT_INDEX)
			return "slice index is not an index";
		if (v.rank < 1 || !ir_type_eq(ir_drop_first(v), ir_vtype(p, op->in[2])))
			return ar_printf("%s of %s into %s", ir_ops[op->kind].name, ts(ir_vtype(p, op->in[2])), ts(v));
		return NULL;
	default:
		unreachable();
	}
}

static const char *check(Program *p, Op *op, Type *out)
{
	const OpInfo *info = &ir_ops[op->kind];
	if (info->arity >= 0 && op->nin != info->arity)
		return ar_printf("%s takes %d operand%s, got %d", info->name, info->arity, info->arity == 1 ? "" : "s", op->nin);
	const char *err;
	Type a = op->nin > 0 ? ir_vtype(p, op->in[0]) : ir_scalar(DT_REAL);
	Type b = op->nin > 1 ? ir_vtype(p, op->in[1]) : ir_scalar(DT_REAL);
	if (info->flags & OPF_WRITE)
		return check_var(p, op);
	if (info->flags & OPF_EW) {
		for (int k = 0; k < op->nin; k++)
			if ((err = need_real(p, op, k)))
				return err;
		if (op->nin == 1) {
			*out = a;
			return NULL;
		}
		if (!ir_broadcast(a, b, out))
			return ar_printf("shapes %s and %s do not broadcast", ts(a), ts(b));
		return NULL;
	}
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
	case OP_SLICE:
		if (a.rank < 1 || a.dt == DT_INDEX)
			return ar_printf("cannot index %s", ts(a));
		if (b.dt != DT_INDEX)
			return "an index must be a loop variable or a constant";
		*out = ir_drop_first(a);
		return NULL;
	case OP_RESHAPE:
		if (ir_numel(a) != ir_numel(op->to)) {
			Type to = op->to;
			to.dt = a.dt;
			return ar_printf("cannot reshape %s to %s: %lld vs %lld elements", ts(a), ts(to), (long long)ir_numel(a), (long long)ir_numel(to));
		}
		*out = op->to;
		out->dt = a.dt;
		return NULL;
	case OP_TRANSPOSE: {
		unsigned seen = 0;
		for (int i = 0; i < a.rank; i++) {
			int q = op->perm[i];
			if (q < 0 || q >= a.rank || (seen >> q & 1))
				return ar_printf("transpose needs a permutation of the %d axes of %s", a.rank, ts(a));
			seen |= 1u << q;
		}
		*out = a;
		for (int i = 0; i < a.rank; i++)
			out->dim[i] = a.dim[op->perm[i]];
		return NULL;
	}
	case OP_BROADCAST: {
		Type to = op->to, r;
		to.dt = a.dt;
		if (!ir_broadcast(a, to, &r) || !ir_type_eq(r, to))
			return ar_printf("cannot broadcast %s to %s", ts(a), ts(to));
		*out = to;
		return NULL;
	}
	case OP_SUM_TO: {
		Type to = op->to, r;
		to.dt = a.dt;
		if (!ir_broadcast(to, a, &r) || !ir_type_eq(r, a))
			return ar_printf("cannot reduce %s to %s", ts(a), ts(to));
		*out = to;
		return NULL;
	}
	case OP_COPY:
		*out = a;
		return NULL;
	case OP_MATMUL:
		return check_matmul(p, op, out);
	case OP_SUM:
	case OP_MEAN: {
		if ((err = need_real(p, op, 0)))
			return err;
		if (a.rank < 32 && (op->axes >> a.rank) != 0)
			return ar_printf("axis out of range for %s", ts(a));
		Type r = {DT_REAL, 0, {0}};
		for (int i = 0; i < a.rank; i++)
			if (!(op->axes >> i & 1))
				r.dim[r.rank++] = a.dim[i];
		*out = r;
		return NULL;
	}
	case OP_SOFTMAX:
	case OP_LOG_SOFTMAX:
		if ((err = need_real(p, op, 0)))
			return err;
		if (a.rank < 1)
			return ar_printf("%s needs a tensor of rank 1 or more, got %s", info->name, ts(a));
		*out = a;
		return NULL;
	case OP_SOFTMAX_GRAD:
	case OP_LOG_SOFTMAX_GRAD:
		if (!ir_type_eq(a, b) || a.rank < 1)
			return ar_printf("%s of %s and %s", info->name, ts(a), ts(b));
		*out = a;
		return NULL;
	case OP_MSE:
	case OP_MSE_GRAD:
		if ((err = need_real(p, op, 0)) || (err = need_real(p, op, 1)))
			return err;
		if (!ir_type_eq(a, b))
			return ar_printf("mse needs operands of one shape, got %s and %s", ts(a), ts(b));
		if (op->kind == OP_MSE_GRAD) {
			if (ir_vtype(p, op->in[2]).rank != 0)
				return "mse_grad needs a scalar seed";
			*out = a;
		} else {
			*out = ir_scalar(DT_REAL);
		}
		return NULL;
	case OP_XENT:
	case OP_XENT_GRAD: {
		if ((err = need_real(p, op, 0)))
			return err;
		if (a.rank < 1)
			return ar_printf("cross_entropy needs logits of rank 1 or more, got %s", ts(a));
		if (b.dt != DT_I32)
			return ar_printf("cross_entropy needs i32 labels, got %s", ts(b));
		bool ok = b.rank == a.rank - 1;
		for (int i = 0; ok && i < b.rank; i++)
			ok = a.dim[i] == b.dim[i];
		if (!ok) {
			Type want = a;
			want.dt = DT_I32;
			want.rank = a.rank - 1;
			return ar_printf("cross_entropy labels %s do not match logits %s: expected %s", ts(b), ts(a), ts(want));
		}
		if (op->kind == OP_XENT_GRAD) {
			if (ir_vtype(p, op->in[2]).rank != 0)
				return "cross_entropy_grad needs a scalar seed";
			*out = a;
		} else {
			*out = ir_scalar(DT_REAL);
		}
		return NULL;
	}
	case OP_LOOP:
	case OP_REVOLVE:
		return "loops have no shape rule";
	default:
		break;
	}
	unreachable();
}

const char *ir_check_op(Program *p, Op *op, Type *out)
{
	const char *err = check(p, op, out);
	if (!err && !(ir_ops[op->kind].flags & OPF_WRITE) && ir_too_large(*out))
		return ar_printf("the result %s would have more than 2^40 elements, dpc's limit for one tensor", ts(*out));
	return err;
}
