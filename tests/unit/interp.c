/* A reference interpreter of planned IR, in float64, for tests: it runs a
 * program in a host arena laid out exactly as the memory plan says, so a
 * wrong adjoint or an overlapping plan shows up as a wrong number. */
#include "interp.h"
#include "../../compiler/ops/ops.h"
#include "../../compiler/ops/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *base(Interp *m, int v)
{
	Program *p = m->p;
	Value *x = &p->values.data[v];
	if (x->res == VR_ARENA)
		return m->arena + x->offset;
	if (x->res != VR_ALIAS)
		die("interp: value %s has no storage", ir_value_name(p, v));
	unsigned char *b = base(m, x->alias_of);
	if (x->alias_index >= 0)
		b += m->index[x->alias_index] * ir_bytes(p, x->type);
	else if (x->def && x->def->kind == OP_SLICE)
		b += m->index[x->def->in[1]] * ir_bytes(p, x->type);
	return b;
}

static double *R(Interp *m, int v) { return (double *)base(m, v); }

/* Operand k of an elementwise op at the multi-index of the result. */
static double ew_arg(Interp *m, Op *op, int k, Type out, const int64_t *idx)
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
	return R(m, v)[off];
}

static void unravel(Type t, int64_t n, int64_t *idx)
{
	for (int i = t.rank - 1; i >= 0; i--) {
		idx[i] = n % t.dim[i];
		n /= t.dim[i];
	}
}

static void matmul(Interp *m, Op *op)
{
	Program *p = m->p;
	Type ta = ir_vtype(p, op->in[0]), tb = ir_vtype(p, op->in[1]), tc = ir_vtype(p, op->out);
	int64_t M = tc.dim[tc.rank - 2], N = tc.dim[tc.rank - 1];
	int64_t K = op->attr.mm.ta ? ta.dim[ta.rank - 2] : ta.dim[ta.rank - 1];
	int64_t batch = ir_numel(tc) / (M * N);
	double *A = R(m, op->in[0]), *B = R(m, op->in[1]), *C = R(m, op->out);
	int64_t sa = ta.dim[ta.rank - 2] * ta.dim[ta.rank - 1], sb = tb.rank == 2 ? 0 : tb.dim[tb.rank - 2] * tb.dim[tb.rank - 1];
	int64_t lda = ta.dim[ta.rank - 1], ldb = tb.dim[tb.rank - 1];
	for (int64_t b = 0; b < batch; b++)
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++) {
				double s = 0;
				for (int64_t k = 0; k < K; k++) {
					double x = op->attr.mm.ta ? A[b * sa + k * lda + i] : A[b * sa + i * lda + k];
					double y = op->attr.mm.tb ? B[b * sb + j * ldb + k] : B[b * sb + k * ldb + j];
					s += x * y;
				}
				C[b * M * N + i * N + j] = s;
			}
}

/* sum (or max, min) of x over the axes where `keep` has size 1 and x does not */
static void reduce_to(Interp *m, int x, Type keep, double *out, OpKind k)
{
	Type t = ir_vtype(m->p, x);
	int64_t n = ir_numel(t), idx[IR_MAXRANK];
	for (int64_t e = 0; e < ir_numel(keep); e++)
		out[e] = k == OP_MAX ? -INFINITY : k == OP_MIN ? INFINITY : 0;
	double *in = R(m, x);
	for (int64_t e = 0; e < n; e++) {
		unravel(t, e, idx);
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

/* attention and its gradient ops, head by head, with the [T, T] scores in full */
static void attention(Interp *m, Op *op)
{
	Program *p = m->p;
	Type q = ir_vtype(p, op->in[0]);
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], H = op->attr.attn.heads, Dh = C / H, NB = ir_numel(q) / (T * C);
	double *Q = R(m, op->in[0]), *K = R(m, op->in[1]), *o = R(m, op->out);
	double *P = malloc(sizeof(double) * (size_t)(T * T));
	if (op->kind != OP_ATTN_STATS)
		memset(o, 0, (size_t)ir_bytes(p, q));
	for (int64_t b = 0; b < NB; b++)
		for (int64_t h = 0; h < H; h++) {
#define EL(X, r, d) (X)[(b * T + (r)) * C + h * Dh + (d)]
			double *st = op->nin == 5 ? R(m, op->in[4]) + (b * H + h) * T * 2 : NULL;
			for (int64_t i = 0; i < T; i++) {
				double mx = -INFINITY, sum = 0;
				for (int64_t j = 0; j < T; j++) {
					double s = 0;
					for (int64_t d = 0; d < Dh; d++)
						s += EL(Q, i, d) * EL(K, j, d);
					P[i * T + j] = op->attr.attn.causal && j > i ? -INFINITY : s / sqrt((double)Dh);
					mx = fmax(mx, P[i * T + j]);
				}
				for (int64_t j = 0; j < T; j++)
					sum += exp(P[i * T + j] - mx);
				double lse = st ? st[2 * i] : mx + log(sum);
				for (int64_t j = 0; j < T; j++)
					P[i * T + j] = exp(P[i * T + j] - lse);
				if (op->kind == OP_ATTN_STATS) {
					double *dO = R(m, op->in[2]), *O = R(m, op->in[3]), dd = 0;
					for (int64_t d = 0; d < Dh; d++)
						dd += EL(dO, i, d) * EL(O, i, d);
					o[((b * H + h) * T + i) * 2] = lse;
					o[((b * H + h) * T + i) * 2 + 1] = dd;
				}
			}
			if (op->kind == OP_ATTN_STATS)
				continue;
			double *V = R(m, op->in[2]), *dO = op->nin == 5 ? R(m, op->in[3]) : NULL;
			for (int64_t i = 0; i < T; i++)
				for (int64_t j = 0; j < T; j++) {
					double pij = P[i * T + j], ds = 0;
					if (op->kind == OP_ATTENTION) {
						for (int64_t d = 0; d < Dh; d++)
							EL(o, i, d) += pij * EL(V, j, d);
						continue;
					}
					if (op->kind == OP_ATTN_DV) {
						for (int64_t d = 0; d < Dh; d++)
							EL(o, j, d) += pij * EL(dO, i, d);
						continue;
					}
					for (int64_t d = 0; d < Dh; d++)
						ds += EL(dO, i, d) * EL(V, j, d);
					ds = pij * (ds - st[2 * i + 1]) / sqrt((double)Dh);
					for (int64_t d = 0; d < Dh; d++) {
						if (op->kind == OP_ATTN_DQ)
							EL(o, i, d) += ds * EL(K, j, d);
						else
							EL(o, j, d) += ds * EL(Q, i, d);
					}
				}
#undef EL
		}
	free(P);
}

/* layernorm (x, g, b), layernorm_hat (x), layernorm_grad (x, g, dy), row by row */
static void layernorm(Interp *m, Op *op)
{
	Type t = ir_vtype(m->p, op->out);
	int64_t C = t.dim[t.rank - 1], rows = ir_numel(t) / C;
	double *x = R(m, op->in[0]), *o = R(m, op->out);
	double *g = op->nin > 1 ? R(m, op->in[1]) : NULL, *third = op->nin > 2 ? R(m, op->in[2]) : NULL;
	double *hat = malloc(sizeof(double) * (size_t)C);
	for (int64_t r = 0; r < rows; r++) {
		double *xr = x + r * C, *orow = o + r * C, mean = 0, var = 0, s1 = 0, s2 = 0;
		for (int64_t c = 0; c < C; c++)
			mean += xr[c] / (double)C;
		for (int64_t c = 0; c < C; c++)
			var += (xr[c] - mean) * (xr[c] - mean) / (double)C;
		double rs = 1 / sqrt(var + op->attr.value);
		for (int64_t c = 0; c < C; c++) {
			hat[c] = (xr[c] - mean) * rs;
			if (op->kind == OP_LAYERNORM_GRAD) {
				double dyg = third[r * C + c] * g[c];
				s1 += dyg / (double)C;
				s2 += dyg * hat[c] / (double)C;
			}
		}
		for (int64_t c = 0; c < C; c++)
			orow[c] = op->kind == OP_LAYERNORM ? hat[c] * g[c] + third[c]
			        : op->kind == OP_LAYERNORM_HAT ? hat[c]
			        : rs * (third[r * C + c] * g[c] - s1 - hat[c] * s2);
	}
	free(hat);
}

/* range, pad, concat: every element of the result from its source, by
 * element size so that i32 labels move too */
static void move(Interp *m, Op *op)
{
	Program *p = m->p;
	Type to = ir_vtype(p, op->out);
	size_t es = (size_t)(ir_bytes(p, to) / (ir_numel(to) ? ir_numel(to) : 1));
	unsigned char *o = base(m, op->out);
	int64_t idx[IR_MAXRANK];
	for (int64_t e = 0; e < ir_numel(to); e++) {
		unravel(to, e, idx);
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
		memcpy(o + (size_t)e * es, base(m, op->in[k]) + (size_t)off * es, es);
	}
}

/* unfold and fold, written as the scatter from each window's element */
static void window(Interp *m, Op *op)
{
	Program *p = m->p;
	bool fold = op->kind == OP_FOLD;
	Type img = fold ? op->to : ir_vtype(p, op->in[0]);
	const Window *w = &op->attr.win;
	int64_t N = img.dim[0], C = img.dim[1], H = img.dim[2], W = img.dim[3], Ho, Wo;
	ops_window_out(w, img, &Ho, &Wo);
	double *x = R(m, op->in[0]), *o = R(m, op->out);
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

static void run_block(Interp *m, Block *b);

static void run_loop(Interp *m, Op *op)
{
	Program *p = m->p;
	for (int k = 0; k < op->ncarry; k++)
		memmove(R(m, op->carg[k]), R(m, op->in[k]), (size_t)ir_bytes(p, ir_vtype(p, op->carg[k])));
	for (int64_t t = 0; t < op->trip; t++) {
		m->index[op->ivar] = op->reverse ? op->lo + op->trip - 1 - t : op->lo + t;
		run_block(m, &op->body);
		for (int k = 0; k < op->ncarry; k++)
			if (R(m, op->cyield[k]) != R(m, op->carg[k]))
				memmove(R(m, op->carg[k]), R(m, op->cyield[k]), (size_t)ir_bytes(p, ir_vtype(p, op->carg[k])));
		if (op->counter >= 0)
			m->counters[op->counter]++;
	}
}

static void run_op(Interp *m, Op *op)
{
	Program *p = m->p;
	int64_t idx[IR_MAXRANK];
	const OpInfo *info = &ir_ops[op->kind];
	if (op->kind == OP_LOOP) {
		run_loop(m, op);
		return;
	}
	Type to = op->out >= 0 ? ir_vtype(p, op->out) : ir_scalar(DT_REAL);
	if (info->flags & OPF_EW) {
		double *o = R(m, op->out);
		for (int64_t e = 0; e < ir_numel(to); e++) {
			unravel(to, e, idx);
			double x[3] = {0, 0, 0};
			for (int k = 0; k < op->nin; k++)
				x[k] = ew_arg(m, op, k, to, idx);
			o[e] = ops_eval_ew(op->kind, x);
		}
		return;
	}
	switch (op->kind) {
	case OP_PARAM:
	case OP_INPUT:
	case OP_CONST:
	case OP_SLICE:
	case OP_RESHAPE:
		return;
	case OP_IDX:
		m->index[op->out] = op->index;
		return;
	case OP_FILL:
		for (int64_t e = 0; e < ir_numel(to); e++)
			R(m, op->out)[e] = op->attr.value;
		return;
	case OP_COPY:
		memmove(R(m, op->out), R(m, op->in[0]), (size_t)ir_bytes(p, to));
		return;
	case OP_RANGE:
	case OP_PAD:
	case OP_CONCAT:
		move(m, op);
		return;
	case OP_UNFOLD:
	case OP_FOLD:
		window(m, op);
		return;
	case OP_INTERP: {
		/* output point i sits at (i + 1/2) m / n - 1/2 of the source, at least 0 */
		int64_t n = to.dim[0], mm = to.dim[1];
		double *o = R(m, op->out);
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
		memcpy(R(m, op->out), op->attr.lit.v, sizeof(double) * (size_t)ir_numel(to));
		return;
	case OP_TRAINING:
		R(m, op->out)[0] = 1; /* the interpreter runs training steps */
		return;
	case OP_ARANGE:
		for (int64_t e = 0; e < ir_numel(to); e++)
			((int32_t *)base(m, op->out))[e] = (int32_t)e;
		return;
	case OP_CAST: {
		Type ti = ir_vtype(p, op->in[0]);
		for (int64_t e = 0; e < ir_numel(to); e++) {
			double x = ti.dt == DT_I32 ? ((int32_t *)base(m, op->in[0]))[e] : R(m, op->in[0])[e];
			if (to.dt == DT_I32)
				((int32_t *)base(m, op->out))[e] = (int32_t)x;
			else
				R(m, op->out)[e] = x;
		}
		return;
	}
	case OP_ARGMAX: {
		Type ti = ir_vtype(p, op->in[0]);
		int64_t n = ti.dim[op->attr.ax.axis], inner = 1;
		for (int i = op->attr.ax.axis + 1; i < ti.rank; i++)
			inner *= ti.dim[i];
		double *x = R(m, op->in[0]);
		for (int64_t e = 0; e < ir_numel(to); e++) {
			int64_t o = e / inner * n * inner + e % inner, best = 0;
			for (int64_t j = 1; j < n; j++)
				if (x[o + j * inner] > x[o + best * inner])
					best = j;
			((int32_t *)base(m, op->out))[e] = (int32_t)best;
		}
		return;
	}
	case OP_DROPOUT: {
		/* the draws of the first training step with the default seed: the
		 * step that tests compare the compiled program's gradients at */
		uint64_t key = dp_mix(dp_step_key(0, 1) ^ (uint64_t)op->attr.drop.site);
		for (int k = 1; k < op->nin; k++)
			key = dp_mix(key ^ (uint64_t)m->index[op->in[k]]);
		double *x = R(m, op->in[0]), *o = R(m, op->out);
		for (int64_t e = 0; e < ir_numel(to); e++)
			o[e] = dp_mix(key ^ (uint64_t)e) >> 11 >= dp_drop_threshold(op->attr.drop.p) ? x[e] * (1 / (1 - op->attr.drop.p)) : 0;
		return;
	}
	case OP_XENT_COUNT: {
		int32_t *lab = (int32_t *)base(m, op->in[0]);
		double c = 0;
		for (int64_t e = 0; e < ir_numel(ir_vtype(p, op->in[0])); e++)
			c += lab[e] != op->attr.lab.ignore;
		R(m, op->out)[0] = c;
		return;
	}
	case OP_TRANSPOSE: {
		Type ti = ir_vtype(p, op->in[0]);
		double *in = R(m, op->in[0]), *o = R(m, op->out);
		for (int64_t e = 0; e < ir_numel(to); e++) {
			unravel(to, e, idx);
			int64_t src[IR_MAXRANK], off = 0;
			for (int i = 0; i < to.rank; i++)
				src[op->attr.perm[i]] = idx[i];
			for (int i = 0; i < ti.rank; i++)
				off = off * ti.dim[i] + src[i];
			o[e] = in[off];
		}
		return;
	}
	case OP_BROADCAST: {
		double *o = R(m, op->out);
		for (int64_t e = 0; e < ir_numel(to); e++) {
			unravel(to, e, idx);
			o[e] = ew_arg(m, op, 0, to, idx);
		}
		return;
	}
	case OP_SUM_TO:
		reduce_to(m, op->in[0], to, R(m, op->out), OP_SUM);
		return;
	case OP_SUM:
	case OP_MEAN:
	case OP_MAX:
	case OP_MIN: {
		Type ti = ir_vtype(p, op->in[0]), keep = ti;
		double cnt = 1;
		for (int i = 0; i < ti.rank; i++)
			if (op->attr.axes >> i & 1)
				keep.dim[i] = 1, cnt *= (double)ti.dim[i];
		reduce_to(m, op->in[0], keep, R(m, op->out), op->kind);
		if (op->kind == OP_MEAN)
			for (int64_t e = 0; e < ir_numel(to); e++)
				R(m, op->out)[e] /= cnt;
		return;
	}
	case OP_MATMUL:
		matmul(m, op);
		return;
	case OP_LAYERNORM:
	case OP_LAYERNORM_HAT:
	case OP_LAYERNORM_GRAD:
		layernorm(m, op);
		return;
	case OP_ATTENTION:
	case OP_ATTN_STATS:
	case OP_ATTN_DQ:
	case OP_ATTN_DK:
	case OP_ATTN_DV:
		attention(m, op);
		return;
	case OP_EMBED:
	case OP_EMBED_GRAD: {
		bool grad = op->kind == OP_EMBED_GRAD;
		Type tt = grad ? to : ir_vtype(p, op->in[0]);
		int64_t V = tt.dim[0], D = tt.dim[1], N = ir_numel(ir_vtype(p, op->in[1]));
		int32_t *ids = (int32_t *)base(m, op->in[1]);
		double *x = R(m, op->in[0]), *o = R(m, op->out);
		if (grad)
			memset(o, 0, sizeof(double) * (size_t)(V * D));
		for (int64_t n = 0; n < N; n++)
			for (int64_t d = 0; d < D; d++) {
				if (ids[n] < 0 || ids[n] >= V)
					die("interp: id %d out of range 0..%lld", ids[n], (long long)V - 1);
				if (grad)
					o[ids[n] * D + d] += x[n * D + d];
				else
					o[n * D + d] = x[ids[n] * D + d];
			}
		return;
	}
	case OP_SOFTMAX:
	case OP_LOG_SOFTMAX:
	case OP_SOFTMAX_GRAD:
	case OP_LOG_SOFTMAX_GRAD: {
		int64_t C = to.dim[to.rank - 1], rows = ir_numel(to) / C;
		double *x = R(m, op->in[0]), *o = R(m, op->out), *g = op->nin > 1 ? R(m, op->in[1]) : NULL;
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
		return;
	}
	case OP_MSE:
	case OP_MSE_GRAD: {
		Type ti = ir_vtype(p, op->in[0]);
		int64_t n = ir_numel(ti);
		double *a = R(m, op->in[0]), *b = R(m, op->in[1]), s = 0;
		if (op->kind == OP_MSE) {
			for (int64_t e = 0; e < n; e++)
				s += (a[e] - b[e]) * (a[e] - b[e]);
			R(m, op->out)[0] = s / (double)n;
		} else {
			double g = R(m, op->in[2])[0];
			for (int64_t e = 0; e < n; e++)
				R(m, op->out)[e] = g * 2 * (a[e] - b[e]) / (double)n;
		}
		return;
	}
	case OP_XENT:
	case OP_XENT_GRAD: {
		Type ti = ir_vtype(p, op->in[0]);
		int64_t C = ti.dim[ti.rank - 1], rows = ir_numel(ti) / C;
		double *x = R(m, op->in[0]), loss = 0;
		int32_t *lab = (int32_t *)base(m, op->in[1]);
		double g = op->kind == OP_XENT_GRAD ? R(m, op->in[2])[0] : 0, counted = 0;
		for (int64_t r = 0; r < rows; r++) {
			double *xr = x + r * C, mx = -INFINITY, s = 0;
			if (op->attr.lab.has && lab[r] == op->attr.lab.ignore) {
				if (op->kind == OP_XENT_GRAD)
					memset(R(m, op->out) + r * C, 0, sizeof(double) * (size_t)C);
				continue;
			}
			counted++;
			for (int64_t c = 0; c < C; c++)
				mx = fmax(mx, xr[c]);
			for (int64_t c = 0; c < C; c++)
				s += exp(xr[c] - mx);
			loss += mx + log(s) - xr[lab[r]];
			if (op->kind == OP_XENT_GRAD)
				for (int64_t c = 0; c < C; c++)
					R(m, op->out)[r * C + c] = g * (exp(xr[c] - mx) / s - (c == lab[r])) / (double)rows;
		}
		if (op->kind == OP_XENT)
			R(m, op->out)[0] = loss / (op->attr.lab.has ? counted : (double)rows);
		return;
	}
	case OP_ZERO:
		memset(base(m, op->in[0]), 0, (size_t)ir_bytes(p, ir_vtype(p, op->in[0])));
		return;
	case OP_ASSIGN:
		memmove(base(m, op->in[0]), base(m, op->in[1]), (size_t)ir_bytes(p, ir_vtype(p, op->in[0])));
		return;
	case OP_ACC:
	case OP_ACC_SLICE:
	case OP_STORE_SLICE: {
		int x = op->in[op->nin - 1];
		int64_t n = ir_numel(ir_vtype(p, x));
		double *v = R(m, op->in[0]), *src = R(m, x);
		if (op->kind != OP_ACC)
			v += m->index[op->in[1]] * n;
		for (int64_t e = 0; e < n; e++)
			v[e] = op->kind == OP_STORE_SLICE ? src[e] : v[e] + src[e];
		return;
	}
	default:
		die("interp: no rule for %s", info->name);
	}
}

static void run_block(Interp *m, Block *b)
{
	for (int i = 0; i < b->len; i++)
		run_op(m, b->ops[i]);
}

Interp *interp_new(Program *p)
{
	if (p->real_bytes != 8)
		die("interp: needs a float64 program");
	Interp *m = calloc(1, sizeof *m);
	m->p = p;
	m->arena = calloc(1, (size_t)p->arena_bytes + 64);
	m->index = calloc((size_t)p->values.len, sizeof *m->index);
	return m;
}

void interp_free(Interp *m)
{
	free(m->arena);
	free(m->index);
	free(m);
}

double *interp_tensor(Interp *m, int v) { return R(m, v); }

double interp_run(Interp *m, bool backward)
{
	Block all = m->p->body;
	if (!backward)
		all.len = m->p->nforward;
	run_block(m, &all);
	return R(m, m->p->loss)[0];
}
