/* ops: mutable variables (gradients, accumulators, tapes: operand 0 is the
 * variable, and there is no result), loops, and tensor streaming's copies
 * between a slot variable and the stacked tensor it streams. */
#include <string.h>

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
	if (op->kind == OP_GRAD_IN || op->kind == OP_ALLREDUCE) {
		const char *name = ir_ops[op->kind].name;
		Value *g = &p->values.data[op->in[0]];
		if (g->kind != VK_VAR || g->vclass != VC_GRAD)
			return ar_printf("%s: %s is not a gradient variable", name, ir_value_name(p, op->in[0]));
		if (op->kind == OP_ALLREDUCE && op->nin != 1 && op->nin != 2)
			return ar_printf("allreduce takes 1 or 2 operands, got %d", op->nin);
		if (op->nin == 2 && ir_vtype(p, op->in[1]).dt != DT_INDEX)
			return "slice index is not an index";
		if (op->nin == 2 && g->type.rank < 1)
			return "allreduce of a layer of a gradient without layers";
		if (op->index < 0 || op->index >= p->params.len || p->params.data[op->index].grad != op->in[0])
			return ar_printf("%s of no parameter's gradient", name);
		return NULL;
	}
	if (op->kind == OP_OFFLOAD || op->kind == OP_FETCH) {
		Value *h = &p->values.data[op->in[0]];
		if (h->kind != VK_VAR || h->vclass != VC_HOST)
			return ar_printf("%s: %s is not a host copy", ir_ops[op->kind].name, ir_value_name(p, op->in[0]));
		if (op->kind == OP_OFFLOAD && !ir_type_eq(h->type, ir_vtype(p, op->in[1])))
			return ar_printf("offload of %s into %s", ops_ts(ir_vtype(p, op->in[1])), ops_ts(h->type));
		*out = h->type;
		return NULL;
	}
	if (op->kind == OP_SETTLE)
		return p->values.data[op->in[0]].kind == VK_SSA ? NULL : "settle of a variable";
	if (op->kind == OP_UPDATE) {
		Value *h = &p->values.data[op->in[0]], *g = &p->values.data[op->in[1]];
		if (h->kind != VK_VAR || h->vclass != VC_HGRAD || h->type.rank < 1)
			return ar_printf("update: %s is not a streamed gradient in host memory", ir_value_name(p, op->in[0]));
		if (ir_vtype(p, op->in[2]).dt != DT_INDEX)
			return "slice index is not an index";
		if (g->kind != VK_VAR || g->vclass != VC_GRAD || !ir_type_eq(g->type, ir_drop_first(h->type)))
			return ar_printf("update of %s with the gradient %s", ops_ts(h->type), ops_ts(g->type));
		if (op->index < 0 || op->index >= p->params.len || p->params.data[op->index].grad != op->in[1])
			return "update of no parameter's gradient";
		return NULL;
	}
	int slot = op->in[0], host = op->in[1];
	int index = op->kind == OP_WAIT ? op->in[1] : op->in[2];
	Value *s = &p->values.data[slot];
	if (s->kind != VK_VAR || s->vclass != VC_SLOT || s->type.rank < 1)
		return ar_printf("%s: %s is not a slot variable", ir_ops[op->kind].name, ir_value_name(p, slot));
	if (ir_vtype(p, index).dt != DT_INDEX)
		return "slice index is not an index";
	if (op->kind == OP_WAIT)
		return NULL;
	Type h = ir_vtype(p, host);
	if (h.rank < 1 || !ir_type_eq(ir_drop_first(h), ir_drop_first(s->type)))
		return ar_printf("h2d between %s and slots %s", ops_ts(h), ops_ts(s->type));
	if (op->index < 0 || op->index >= p->params.len || p->params.data[op->index].value != host)
		return "h2d of no parameter";
	return NULL;
}

const char *ops_shape_loop(Program *p, Op *op, Type *out)
{
	return "loops have no shape rule";
}

void ops_adjoint_missing(Ad *a, Op *op, int g)
{
	die("no adjoint rule for %s", ir_ops[op->kind].name);
}

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

/* zero, assign, acc, acc_slice, store_slice */
void ops_run_var(Interp *m, Op *op)
{
	Program *p = m->p;
	size_t bytes = (size_t)ir_bytes(p, ir_vtype(p, op->in[0]));
	if (op->kind == OP_ZERO) {
		memset(ops_mem(m, op->in[0]), 0, bytes);
		return;
	}
	if (op->kind == OP_ASSIGN) {
		memmove(ops_mem(m, op->in[0]), ops_mem(m, op->in[1]), bytes);
		return;
	}
	int x = op->in[op->nin - 1];
	int64_t n = ir_numel(ir_vtype(p, x));
	double *v = ops_real(m, op->in[0]), *src = ops_real(m, x);
	if (op->kind != OP_ACC)
		v += m->index[op->in[1]] * n;
	for (int64_t e = 0; e < n; e++)
		v[e] = op->kind == OP_STORE_SLICE ? src[e] : v[e] + src[e];
}

void ops_run_transfer(Interp *m, Op *op)
{
	if (op->kind == OP_ALLREDUCE || op->kind == OP_SETTLE)
		return; /* one process; copies that are done when they return */
	if (op->kind == OP_OFFLOAD || op->kind == OP_FETCH) {
		int from = op->kind == OP_OFFLOAD ? op->in[1] : op->in[0], to = op->kind == OP_OFFLOAD ? op->in[0] : op->out;
		memmove(ops_real(m, to), ops_real(m, from), (size_t)ir_bytes(m->p, ir_vtype(m->p, from)));
		return;
	}
	die("interp: %s: the interpreter runs programs without tensor streaming", ir_ops[op->kind].name);
}

void ops_run_loop(Interp *m, Op *op)
{
	Program *p = m->p;
	if (op->kind != OP_LOOP)
		die("interp: %s: the interpreter runs store-everything programs", ir_ops[op->kind].name);
	for (int k = 0; k < op->ncarry; k++)
		memmove(ops_real(m, op->carg[k]), ops_real(m, op->in[k]), (size_t)ir_bytes(p, ir_vtype(p, op->carg[k])));
	for (int64_t t = 0; t < op->trip; t++) {
		m->index[op->ivar] = op->reverse ? op->lo + op->trip - 1 - t : op->lo + t;
		ops_run_block(m, &op->body);
		for (int k = 0; k < op->ncarry; k++)
			if (ops_real(m, op->cyield[k]) != ops_real(m, op->carg[k]))
				memmove(ops_real(m, op->carg[k]), ops_real(m, op->cyield[k]), (size_t)ir_bytes(p, ir_vtype(p, op->carg[k])));
		if (op->counter >= 0)
			m->counters[op->counter]++;
	}
}

