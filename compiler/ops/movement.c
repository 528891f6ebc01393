/* ops: views (slice, reshape: no storage of their own) and data movement
 * (transpose, broadcast, sum_to, copy). */
#include <string.h>

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
		int q = op->attr.perm[i];
		if (q < 0 || q >= a.rank || (seen >> q & 1))
			return ar_printf("transpose needs a permutation of the %d axes of %s", a.rank, ops_ts(a));
		seen |= 1u << q;
	}
	*out = a;
	for (int i = 0; i < a.rank; i++)
		out->dim[i] = a.dim[op->attr.perm[i]];
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
		t->attr.perm[op->attr.perm[i]] = i;
	ad_contrib(a, op->in[0], ad_emit(a, t), op->loc);
}

void ops_adjoint_copy(Ad *a, Op *op, int g) { ad_contrib(a, op->in[0], g, op->loc); }

/* range takes elements [at, at + n) of the axis, pad puts `at` zeros before
 * x and the rest after it: `to` is the result type either way */
const char *ops_shape_window(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), to = op->to;
	to.dt = a.dt;
	bool pad = op->kind == OP_PAD;
	if (a.dt == DT_INDEX || op->attr.ax.axis < 0 || op->attr.ax.axis >= a.rank || to.rank != a.rank)
		return ar_printf("cannot %s axis %d of %s", pad ? "pad" : "slice", op->attr.ax.axis, ops_ts(a));
	for (int i = 0; i < a.rank; i++)
		if (i != op->attr.ax.axis && to.dim[i] != a.dim[i])
			return ar_printf("cannot %s %s to %s", pad ? "pad" : "slice", ops_ts(a), ops_ts(to));
	int64_t small = pad ? a.dim[op->attr.ax.axis] : to.dim[op->attr.ax.axis], big = pad ? to.dim[op->attr.ax.axis] : a.dim[op->attr.ax.axis];
	if (small < 1 || op->attr.ax.at < 0 || op->attr.ax.at + small > big) {
		if (pad)
			return ar_printf("cannot pad %s to %s with %lld zeros before", ops_ts(a), ops_ts(to), (long long)op->attr.ax.at);
		return ar_printf("cannot take elements %lld..%lld of axis %d of %s", (long long)op->attr.ax.at,
		                 (long long)(op->attr.ax.at + small), op->attr.ax.axis, ops_ts(a));
	}
	*out = to;
	return NULL;
}

/* each one's adjoint is the other */
void ops_adjoint_window(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Op *d = ir_new_op(p, op->kind == OP_PAD ? OP_RANGE : OP_PAD, op->loc, 1, &g);
	d->attr = op->attr;
	d->to = ir_vtype(p, op->in[0]);
	ad_contrib(a, op->in[0], ad_emit(a, d), op->loc);
}

/* concat (a, b): equal but for the axis, where b follows a's `at` elements */
const char *ops_shape_concat(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	int ax = op->attr.ax.axis;
	bool ok = a.dt == b.dt && a.dt != DT_INDEX && a.rank == b.rank && ax >= 0 && ax < a.rank && op->attr.ax.at == a.dim[ax];
	for (int i = 0; ok && i < a.rank; i++)
		ok = i == ax || a.dim[i] == b.dim[i];
	if (!ok)
		return ar_printf("cannot concatenate %s and %s along axis %d", ops_ts(a), ops_ts(b), ax);
	*out = a;
	out->dim[ax] += b.dim[ax];
	return NULL;
}

void ops_adjoint_concat(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	for (int k = 0; k < 2; k++) {
		if (!ad_active(a, op->in[k]))
			continue;
		Op *d = ir_new_op(p, OP_RANGE, op->loc, 1, &g);
		d->attr.ax.axis = op->attr.ax.axis;
		d->attr.ax.at = k ? op->attr.ax.at : 0;
		d->to = ir_vtype(p, op->in[k]);
		ad_contrib(a, op->in[k], ad_emit(a, d), op->loc);
	}
}

/* a window's output size along one axis, or 0 when none fits */
static int64_t windows(int64_t n, int k, int s, int pad, int dil)
{
	int64_t span = (int64_t)dil * (k - 1) + 1;
	return n + 2 * (int64_t)pad < span ? 0 : (n + 2 * (int64_t)pad - span) / s + 1;
}

void ops_window_out(const Window *w, Type img, int64_t *ho, int64_t *wo)
{
	*ho = windows(img.dim[2], w->kh, w->sh, w->ph, w->dh);
	*wo = windows(img.dim[3], w->kw, w->sw, w->pw, w->dw);
}

/* unfold [N, C, H, W] -> [N, Ho*Wo, C*kh*kw]; fold the reverse, to `to` */
const char *ops_shape_unfold(Program *p, Op *op, Type *out)
{
	Type x = ir_vtype(p, op->in[0]), img = op->kind == OP_FOLD ? op->to : x;
	const Window *w = &op->attr.win;
	if (!ir_is_real(x.dt) || img.rank != 4)
		return ar_printf("a 2-D window needs a tensor [N, C, H, W], got %s", ops_ts(img));
	if (w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1 || w->dh < 1 || w->dw < 1 || w->ph < 0 || w->pw < 0)
		return ar_printf("a window needs kernel, stride and dilation of at least 1 and no negative padding");
	int64_t ho, wo;
	ops_window_out(w, img, &ho, &wo);
	if (!ho || !wo)
		return ar_printf("a %dx%d window (dilation %d, padding %d) does not fit in %s", w->kh, w->kw, w->dh, w->ph, ops_ts(img));
	/* the unfolded rows and columns, each within one tensor's limit before they multiply */
	if (ho > IR_MAX_ELEMS / wo || img.dim[1] > IR_MAX_ELEMS / w->kh / w->kw)
		return ar_printf("a %dx%d window (stride %d, padding %d) over %s unfolds to %lld x %lld positions of "
		                 "%lld x %d x %d values, more than 2^40 elements", w->kh, w->kw, w->sh, w->ph, ops_ts(img),
		                 (long long)ho, (long long)wo, (long long)img.dim[1], w->kh, w->kw);
	Type cols = img;
	cols.rank = 3;
	cols.dim[1] = ho * wo;
	cols.dim[2] = img.dim[1] * w->kh * w->kw;
	if (op->kind == OP_FOLD && !ir_type_eq(x, cols))
		return ar_printf("fold needs %s for %s, got %s", ops_ts(cols), ops_ts(img), ops_ts(x));
	*out = op->kind == OP_FOLD ? img : cols;
	return NULL;
}

void ops_adjoint_unfold(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Op *d = ir_new_op(p, OP_FOLD, op->loc, 1, &g);
	d->attr = op->attr;
	d->to = ir_vtype(p, op->in[0]);
	ad_contrib(a, op->in[0], ad_emit(a, d), op->loc);
}

/* cast: the same shape in element type to.dt (real or i32) */
const char *ops_shape_cast(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]);
	if (a.dt == DT_INDEX || op->to.dt == DT_INDEX)
		return ar_printf("cannot cast %s", ops_ts(a));
	*out = a;
	out->dt = op->to.dt;
	return NULL;
}

/* bits: a real x [.., n] to i32 [.., ceil(n / 32)]; unbits: back to `to` */
const char *ops_shape_bits(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), real = op->kind == OP_BITS ? a : op->to, words = real;
	if (real.rank < 1 || !ir_is_real(real.dt))
		return ar_printf("%s needs a real tensor of rank 1 or more, not %s", ir_ops[op->kind].name, ops_ts(real));
	words.dt = DT_I32;
	words.dim[words.rank - 1] = (real.dim[real.rank - 1] + 31) / 32;
	if (op->kind == OP_UNBITS && !ir_type_eq(a, words))
		return ar_printf("unbits of %s cannot give %s", ops_ts(a), ops_ts(real));
	*out = op->kind == OP_BITS ? words : real;
	return NULL;
}

/* between reals the gradient goes back in the operand's type; i32 has none */
void ops_adjoint_cast(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Type x = ir_vtype(p, op->in[0]);
	if (ir_is_real(x.dt) && ad_active(a, op->in[0]))
		ad_contrib(a, op->in[0], ad_opto(a, OP_CAST, op->loc, g, x), op->loc);
}

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

void ops_run_slice(Interp *m, Op *op) {}    /* views: their storage is their source's */
void ops_run_reshape(Interp *m, Op *op) {}

void ops_run_transpose(Interp *m, Op *op)
{
	Program *p = m->p;
	Type to = ir_vtype(p, op->out);
	int64_t idx[IR_MAXRANK];
	Type ti = ir_vtype(p, op->in[0]);
	double *in = ops_real(m, op->in[0]), *o = ops_real(m, op->out);
	for (int64_t e = 0; e < ir_numel(to); e++) {
		ops_unravel(to, e, idx);
		int64_t src[IR_MAXRANK], off = 0;
		for (int i = 0; i < to.rank; i++)
			src[op->attr.perm[i]] = idx[i];
		for (int i = 0; i < ti.rank; i++)
			off = off * ti.dim[i] + src[i];
		o[e] = in[off];
	}
}

/* broadcast, and sum_to (its adjoint) */
void ops_run_broadcast(Interp *m, Op *op)
{
	Type to = ir_vtype(m->p, op->out);
	int64_t idx[IR_MAXRANK];
	if (op->kind == OP_SUM_TO) {
		ops_reduce_to(m, op->in[0], to, ops_real(m, op->out), OP_SUM);
		return;
	}
	double *o = ops_real(m, op->out);
	for (int64_t e = 0; e < ir_numel(to); e++) {
		ops_unravel(to, e, idx);
		o[e] = ops_ew_arg(m, op, 0, to, idx);
	}
}

void ops_run_copy(Interp *m, Op *op)
{
	memmove(ops_real(m, op->out), ops_real(m, op->in[0]), (size_t)ir_bytes(m->p, ir_vtype(m->p, op->out)));
}

/* range, pad, concat: every element of the result from its source, by
 * element size so that i32 labels move too */
void ops_run_window(Interp *m, Op *op)
{
	Program *p = m->p;
	Type to = ir_vtype(p, op->out);
	size_t es = (size_t)(ir_bytes(p, to) / (ir_numel(to) ? ir_numel(to) : 1));
	unsigned char *o = ops_mem(m, op->out);
	int64_t idx[IR_MAXRANK];
	for (int64_t e = 0; e < ir_numel(to); e++) {
		ops_unravel(to, e, idx);
		int k = 0;
		int64_t c = idx[op->attr.ax.axis];
		if (op->kind == OP_RANGE)
			c += op->attr.ax.at;
		else if (op->kind == OP_PAD)
			c -= op->attr.ax.at;
		else if (c >= op->attr.ax.at)
			k = 1, c -= op->attr.ax.at;
		Type ti = ir_vtype(p, op->in[k]);
		if (c < 0 || c >= ti.dim[op->attr.ax.axis]) {
			memset(o + (size_t)e * es, 0, es);
			continue;
		}
		idx[op->attr.ax.axis] = c;
		int64_t off = 0;
		for (int i = 0; i < ti.rank; i++)
			off = off * ti.dim[i] + idx[i];
		memcpy(o + (size_t)e * es, ops_mem(m, op->in[k]) + (size_t)off * es, es);
	}
}

void ops_run_concat(Interp *m, Op *op) { ops_run_window(m, op); }

/* unfold and fold, written as the scatter from each window's element */
void ops_run_unfold(Interp *m, Op *op)
{
	Program *p = m->p;
	bool fold = op->kind == OP_FOLD;
	Type img = fold ? op->to : ir_vtype(p, op->in[0]);
	const Window *w = &op->attr.win;
	int64_t N = img.dim[0], C = img.dim[1], H = img.dim[2], W = img.dim[3], Ho, Wo;
	ops_window_out(w, img, &Ho, &Wo);
	double *x = ops_real(m, op->in[0]), *o = ops_real(m, op->out);
	int64_t K = (int64_t)w->kh * w->kw;
	memset(o, 0, sizeof(double) * (size_t)ir_numel(ir_vtype(p, op->out)));
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t i = 0; i < Ho; i++)
				for (int64_t j = 0; j < Wo; j++)
					for (int a = 0; a < w->kh; a++)
						for (int b = 0; b < w->kw; b++) {
							int64_t h = i * w->sh - w->ph + a * w->dh, v = j * w->sw - w->pw + b * w->dw;
							if (h < 0 || h >= H || v < 0 || v >= W)
								continue;
							int64_t col = ((n * Ho + i) * Wo + j) * C * K + c * K + a * w->kw + b;
							int64_t pix = ((n * C + c) * H + h) * W + v;
							if (fold)
								o[pix] += x[col];
							else
								o[col] = x[pix];
						}
}

void ops_run_bits(Interp *m, Op *op)
{
	Program *p = m->p;
	Type real = op->kind == OP_BITS ? ir_vtype(p, op->in[0]) : ir_vtype(p, op->out);
	int64_t n = real.dim[real.rank - 1], w = (n + 31) / 32, rows = ir_numel(real) / (n ? n : 1);
	int32_t *bits = (int32_t *)ops_mem(m, op->kind == OP_BITS ? op->out : op->in[0]);
	double *x = ops_real(m, op->kind == OP_BITS ? op->in[0] : op->out);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t e = 0; e < n; e++) {
			uint32_t *word = (uint32_t *)&bits[r * w + e / 32], bit = 1u << (e % 32);
			if (op->kind == OP_UNBITS)
				x[r * n + e] = (*word & bit) ? 1 : 0;
			else if (e % 32 == 0)
				*word = x[r * n + e] > 0 ? bit : 0;
			else
				*word |= x[r * n + e] > 0 ? bit : 0;
		}
}

void ops_run_cast(Interp *m, Op *op)
{
	Program *p = m->p;
	Type to = ir_vtype(p, op->out);
	Type ti = ir_vtype(p, op->in[0]);
	for (int64_t e = 0; e < ir_numel(to); e++) {
		double x = ti.dt == DT_I32 ? ((int32_t *)ops_mem(m, op->in[0]))[e] : ops_real(m, op->in[0])[e];
		if (to.dt == DT_I32)
			((int32_t *)ops_mem(m, op->out))[e] = (int32_t)x;
		else
			ops_real(m, op->out)[e] = x;
	}
}
