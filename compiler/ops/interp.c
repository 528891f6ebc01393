/* ops: the reference interpreter. It runs a planned program in float64, in
 * a host arena laid out exactly as the memory plan says, so that a wrong
 * adjoint or an overlapping plan shows up as a wrong number (tests/unit).
 * Each op kind's meaning is its family's rule ops_run_<shape> (ir_ops[].run),
 * in the same file as its shape and adjoint rules. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

unsigned char *ops_mem(Interp *m, int v)
{
	Program *p = m->p;
	Value *x = &p->values.data[v];
	if (x->res == VR_ARENA)
		return m->arena + x->offset;
	if (x->res != VR_ALIAS)
		die("interp: value %s has no storage", ir_value_name(p, v));
	if (x->alias_index == IR_ACC_INTO) {
		/* what codegen adds into the target as it makes it; the acc after
		 * it, its only reader, adds it here */
		if (!m->apart[v] && !(m->apart[v] = calloc(1, (size_t)ir_bytes(p, x->type) + 8)))
			die("interp: out of memory");
		return m->apart[v];
	}
	unsigned char *b = ops_mem(m, x->alias_of);
	if (x->alias_index >= 0)
		b += m->index[x->alias_index] * ir_bytes(p, x->type);
	else if (x->def && x->def->kind == OP_SLICE)
		b += m->index[x->def->in[1]] * ir_bytes(p, x->type);
	return b;
}

double *ops_real(Interp *m, int v) { return (double *)ops_mem(m, v); }

double ops_ew_arg(Interp *m, Op *op, int k, Type out, const int64_t *idx)
{
	int v = op->in[k];
	Value *x = &m->p->values.data[v];
	if (x->def && x->def->kind == OP_CONST)
		return x->def->attr.value;
	Type t = x->type;
	int64_t off = 0;
	for (int i = 0; i < t.rank; i++) {
		int oi = out.rank - t.rank + i;
		off = off * t.dim[i] + (t.dim[i] == 1 ? 0 : idx[oi]);
	}
	return ops_real(m, v)[off];
}

void ops_unravel(Type t, int64_t n, int64_t *idx)
{
	for (int i = t.rank - 1; i >= 0; i--) {
		idx[i] = n % t.dim[i];
		n /= t.dim[i];
	}
}

void ops_run_block(Interp *m, Block *b)
{
	for (int i = 0; i < b->len; i++)
		ir_ops[b->ops[i]->kind].run(m, b->ops[i]);
}

Interp *ops_interp_new(Program *p)
{
	if (p->real != DT_F64)
		die("interp: needs a float64 program");
	Interp *m = calloc(1, sizeof *m);
	m->p = p;
	m->arena = calloc(1, (size_t)p->arena_bytes + 64);
	m->index = calloc((size_t)p->values.len, sizeof *m->index);
	m->apart = calloc((size_t)p->values.len + 1, sizeof *m->apart);
	return m;
}

void ops_interp_free(Interp *m)
{
	free(m->arena);
	free(m->index);
	for (int v = 0; v < m->p->values.len; v++)
		free(m->apart[v]);
	free(m->apart);
	free(m);
}

double *ops_interp_tensor(Interp *m, int v) { return ops_real(m, v); }

double ops_interp_run(Interp *m, bool backward)
{
	Block all = m->p->body;
	if (!backward)
		all.len = m->p->nforward;
	ops_run_block(m, &all);
	return ops_real(m, m->p->loss)[0];
}
