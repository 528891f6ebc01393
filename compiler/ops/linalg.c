/* ops: linear algebra. matmul multiplies the last two axes, with leading
 * batch axes equal on both sides, or b of rank 2 shared by every batch. */
#include "ops.h"

const char *ops_shape_matmul(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if (!ir_is_real(a.dt) || !ir_is_real(b.dt))
		return ar_printf("matmul needs real tensors, got %s @ %s", ops_ts(a), ops_ts(b));
	if (a.dt != b.dt)
		return ar_printf("matmul operands have different element types: %s @ %s; convert one with cast(x, %s)",
		                 ops_ts(a), ops_ts(b), ir_dt_name(a.dt));
	if (a.rank < 2 || b.rank < 2)
		return ar_printf("matmul needs operands of rank 2 or more, got %s @ %s", ops_ts(a), ops_ts(b));
	int64_t m = a.dim[a.rank - 2], ka = a.dim[a.rank - 1];
	if (op->attr.mm.ta)
		m = a.dim[a.rank - 1], ka = a.dim[a.rank - 2];
	int64_t kb = b.dim[b.rank - 2], n = b.dim[b.rank - 1];
	if (op->attr.mm.tb)
		kb = b.dim[b.rank - 1], n = b.dim[b.rank - 2];
	if (ka != kb)
		return ar_printf("matmul inner dimensions differ: %s @ %s (%lld vs %lld)", ops_ts(a), ops_ts(b), (long long)ka,
		                 (long long)kb);
	if (b.rank > 2) {
		bool same = a.rank == b.rank;
		for (int i = 0; same && i < a.rank - 2; i++)
			same = a.dim[i] == b.dim[i];
		if (!same)
			return ar_printf("batched matmul needs equal batch axes: %s @ %s", ops_ts(a), ops_ts(b));
	}
	*out = a;
	out->dim[a.rank - 2] = m;
	out->dim[a.rank - 1] = n;
	return NULL;
}

static int matmul(Ad *a, Loc loc, int x, int y, int ta, int tb)
{
	int in[2] = {x, y};
	Op *op = ir_new_op(ad_program(a), OP_MATMUL, loc, 2, in);
	op->attr.mm.ta = ta;
	op->attr.mm.tb = tb;
	return ad_emit(a, op);
}

void ops_adjoint_matmul(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	int x = op->in[0], y = op->in[1], ta = op->attr.mm.ta, tb = op->attr.mm.tb;
	Type tx = ir_vtype(p, x), ty = ir_vtype(p, y);
	Loc loc = op->loc;
	if (ad_active(a, x)) {
		/* C = op(A) op(B): dA = g op(B)^T, or op(B) g^T when A was transposed */
		int dx = ta ? matmul(a, loc, y, g, tb, 1) : matmul(a, loc, g, y, 0, !tb);
		if (ta && ty.rank == 2 && tx.rank > 2)
			die("matmul adjoint: transposed batched operand with a shared right operand");
		ad_contrib(a, x, dx, loc);
	}
	if (ad_active(a, y)) {
		int dy;
		if (ty.rank == 2 && tx.rank > 2) {
			/* a shared right operand: sum over the batch by flattening it into rows */
			if (ta)
				die("matmul adjoint: transposed batched operand with a shared right operand");
			Type gt = ir_vtype(p, g);
			int64_t rows = ir_numel(tx) / tx.dim[tx.rank - 1];
			int64_t d2[2] = {rows, tx.dim[tx.rank - 1]}, g2[2] = {rows, gt.dim[gt.rank - 1]};
			int x2 = ad_opto(a, OP_RESHAPE, loc, x, ir_type(tx.dt, 2, d2));
			int gg = ad_opto(a, OP_RESHAPE, loc, g, ir_type(gt.dt, 2, g2));
			dy = tb ? matmul(a, loc, gg, x2, 1, 0) : matmul(a, loc, x2, gg, 1, 0);
		} else {
			dy = tb ? matmul(a, loc, g, x, 1, ta) : matmul(a, loc, x, g, !ta, 0);
		}
		ad_contrib(a, y, dy, loc);
	}
}

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

void ops_run_matmul(Interp *m, Op *op)
{
	Program *p = m->p;
	Type ta = ir_vtype(p, op->in[0]), tb = ir_vtype(p, op->in[1]), tc = ir_vtype(p, op->out);
	int64_t M = tc.dim[tc.rank - 2], N = tc.dim[tc.rank - 1];
	int64_t K = op->attr.mm.ta ? ta.dim[ta.rank - 2] : ta.dim[ta.rank - 1];
	int64_t batch = ir_numel(tc) / (M * N);
	double *A = ops_real(m, op->in[0]), *B = ops_real(m, op->in[1]), *C = ops_real(m, op->out);
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

