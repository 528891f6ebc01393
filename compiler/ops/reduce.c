/* ops: reductions. sum, mean, max and min over a set of axes (a bit mask); softmax
 * and log_softmax over the last axis, and their gradients. */
#include <math.h>
#include <string.h>

#include "ops.h"

const char *ops_shape_reduce(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (a.rank < 32 && (op->attr.axes >> a.rank) != 0)
		return ar_printf("axis out of range for %s", ops_ts(a));
	Type r = {a.dt, 0, {0}};
	for (int i = 0; i < a.rank; i++)
		if (!(op->attr.axes >> i & 1))
			r.dim[r.rank++] = a.dim[i];
	*out = r;
	return NULL;
}

const char *ops_shape_softmax(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (a.rank < 1)
		return ar_printf("%s needs a tensor of rank 1 or more, got %s", ir_ops[op->kind].name, ops_ts(a));
	*out = a;
	return NULL;
}

const char *ops_shape_softmax_grad(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if (!ir_type_eq(a, b) || a.rank < 1)
		return ar_printf("%s of %s and %s", ir_ops[op->kind].name, ops_ts(a), ops_ts(b));
	*out = a;
	return NULL;
}

/* sum: g put back on the reduced axes and broadcast; mean: that over the
 * count; max and min: that on the elements equal to the result, shared
 * equally among ties */
void ops_adjoint_reduce(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Loc loc = op->loc;
	Type tx = ir_vtype(p, op->in[0]), keep = tx;
	double n = 1;
	for (int i = 0; i < tx.rank; i++)
		if (op->attr.axes >> i & 1)
			keep.dim[i] = 1, n *= (double)tx.dim[i];
	int mask = -1;
	if (op->kind == OP_MAX || op->kind == OP_MIN) {
		int hit = ad_opto(a, OP_BROADCAST, loc, ad_opto(a, OP_RESHAPE, loc, op->out, keep), tx);
		mask = ad_op2(a, OP_EQ, loc, op->in[0], hit);
		Op *count = ir_new_op(p, OP_SUM, loc, 1, &mask);
		count->attr = op->attr;
		g = ad_op2(a, OP_DIV, loc, g, ad_emit(a, count));
	}
	int d = ad_opto(a, OP_BROADCAST, loc, ad_opto(a, OP_RESHAPE, loc, g, keep), tx);
	if (op->kind == OP_MEAN)
		d = ad_op2(a, OP_MUL, loc, d, ad_const(a, loc, 1 / n));
	if (mask >= 0)
		d = ad_op2(a, OP_MUL, loc, d, mask);
	ad_contrib(a, op->in[0], d, loc);
}

void ops_adjoint_softmax(Ad *a, Op *op, int g)
{
	OpKind k = op->kind == OP_SOFTMAX ? OP_SOFTMAX_GRAD : OP_LOG_SOFTMAX_GRAD;
	ad_contrib(a, op->in[0], ad_op2(a, k, op->loc, op->out, g), op->loc);
}

/* argmax (x, axis) -> i32, the axis removed */
const char *ops_shape_argmax(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (op->attr.ax.axis < 0 || op->attr.ax.axis >= a.rank)
		return ar_printf("argmax's axis %d is out of range for %s", op->attr.ax.axis, ops_ts(a));
	*out = a;
	out->dt = DT_I32;
	out->rank--;
	for (int i = op->attr.ax.axis; i < out->rank; i++)
		out->dim[i] = a.dim[i + 1];
	return NULL;
}

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

/* sum (or max, min) of x over the axes where `keep` has size 1 and x does not */
void ops_reduce_to(Interp *m, int x, Type keep, double *out, OpKind k)
{
	Type t = ir_vtype(m->p, x);
	int64_t n = ir_numel(t), idx[IR_MAXRANK];
	for (int64_t e = 0; e < ir_numel(keep); e++)
		out[e] = k == OP_MAX ? -INFINITY : k == OP_MIN ? INFINITY : 0;
	double *in = ops_real(m, x);
	for (int64_t e = 0; e < n; e++) {
		ops_unravel(t, e, idx);
		int64_t off = 0;
		for (int i = 0; i < keep.rank; i++) {
			int ti = t.rank - keep.rank + i;
			off = off * keep.dim[i] + (keep.dim[i] == 1 ? 0 : idx[ti]);
		}
		if (k == OP_MAX)
			out[off] = fmax(out[off], in[e]);
		else if (k == OP_MIN)
			out[off] = fmin(out[off], in[e]);
		else
			out[off] += in[e];
	}
}

void ops_run_reduce(Interp *m, Op *op)
{
	Type to = ir_vtype(m->p, op->out), ti = ir_vtype(m->p, op->in[0]), keep = ti;
	double cnt = 1;
	for (int i = 0; i < ti.rank; i++)
		if (op->attr.axes >> i & 1)
			keep.dim[i] = 1, cnt *= (double)ti.dim[i];
	ops_reduce_to(m, op->in[0], keep, ops_real(m, op->out), op->kind);
	if (op->kind == OP_MEAN)
		for (int64_t e = 0; e < ir_numel(to); e++)
			ops_real(m, op->out)[e] /= cnt;
}

/* softmax, log_softmax (x) and their gradients (y, g), row by row */
void ops_run_softmax(Interp *m, Op *op)
{
	Type to = ir_vtype(m->p, op->out);
	int64_t C = to.dim[to.rank - 1], rows = ir_numel(to) / C;
	double *x = ops_real(m, op->in[0]), *o = ops_real(m, op->out), *g = op->nin > 1 ? ops_real(m, op->in[1]) : NULL;
	for (int64_t r = 0; r < rows; r++) {
		double *xr = x + r * C, *or = o + r * C, *gr = g ? g + r * C : NULL;
		if (op->kind == OP_SOFTMAX_GRAD || op->kind == OP_LOG_SOFTMAX_GRAD) {
			double s = 0;
			for (int64_t c = 0; c < C; c++)
				s += op->kind == OP_SOFTMAX_GRAD ? gr[c] * xr[c] : gr[c];
			for (int64_t c = 0; c < C; c++)
				or[c] = op->kind == OP_SOFTMAX_GRAD ? xr[c] * (gr[c] - s) : gr[c] - exp(xr[c]) * s;
			continue;
		}
		double mx = -INFINITY, s = 0;
		for (int64_t c = 0; c < C; c++)
			mx = fmax(mx, xr[c]);
		for (int64_t c = 0; c < C; c++)
			s += exp(xr[c] - mx);
		for (int64_t c = 0; c < C; c++)
			or[c] = op->kind == OP_SOFTMAX ? exp(xr[c] - mx) / s : xr[c] - mx - log(s);
	}
}

void ops_run_softmax_grad(Interp *m, Op *op) { ops_run_softmax(m, op); }

void ops_run_argmax(Interp *m, Op *op)
{
	Program *p = m->p;
	Type to = ir_vtype(p, op->out);
	Type ti = ir_vtype(p, op->in[0]);
	int64_t n = ti.dim[op->attr.ax.axis], inner = 1;
	for (int i = op->attr.ax.axis + 1; i < ti.rank; i++)
		inner *= ti.dim[i];
	double *x = ops_real(m, op->in[0]);
	for (int64_t e = 0; e < ir_numel(to); e++) {
		int64_t o = e / inner * n * inner + e % inner, best = 0;
		for (int64_t j = 1; j < n; j++)
			if (x[o + j * inner] > x[o + best * inner])
				best = j;
		((int32_t *)ops_mem(m, op->out))[e] = (int32_t)best;
	}
}
