/* cg, linalg: matmul. A small one (ir_small_matmul) is a kernel with a
 * dot product per result; else a GEMM call (rt_gemm), which also serves
 * sums over leading axes (a vector of ones times a matrix). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"

/* a small matmul's result element idx: the dot product of a row of a and a
 * column of b (ir_small_matmul), with a's batch strides as the GEMM's */
static void body_matmul(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	Type a = d->in[0], b = d->in[1], o = d->out;
	int64_t m = o.dim[o.rank - 2], n = o.dim[o.rank - 1];
	int64_t kk = d->attr.mm.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
	Type bmn = {.rank = 3, .dim = {ir_numel(o) / (m * n), m, n}};
	LLVMValueRef c[3];
	cg_unravel(k, bmn, idx, c);
	LLVMValueRef batch = c[0], i = c[1], j = c[2];
	LLVMValueRef abase = LLVMBuildMul(B, batch, cg_i64(g, m * kk), "");
	LLVMValueRef bbase = b.rank == 2 ? cg_i64(g, 0) : LLVMBuildMul(B, batch, cg_i64(g, kk * n), "");
	/* a[i, t] and b[t, j], t advancing by these strides */
	LLVMValueRef a0 = LLVMBuildAdd(B, abase, d->attr.mm.ta ? i : LLVMBuildMul(B, i, cg_i64(g, kk), ""), "");
	LLVMValueRef b0 = LLVMBuildAdd(B, bbase, d->attr.mm.tb ? LLVMBuildMul(B, j, cg_i64(g, kk), "") : j, "");
	int64_t as = d->attr.mm.ta ? m : 1, bs = d->attr.mm.tb ? 1 : n;
	LLVMValueRef init = cg_real(g, 0), count = cg_i64(g, kk);
	Loop l = cg_for(k, count);
	Acc sum = cg_acc(k, &l, init);
	LLVMValueRef x = cg_load(k, ptrs[1], LLVMBuildAdd(B, a0, LLVMBuildMul(B, l.i, cg_i64(g, as), ""), ""));
	LLVMValueRef y = cg_load(k, ptrs[2], LLVMBuildAdd(B, b0, LLVMBuildMul(B, l.i, cg_i64(g, bs), ""), ""));
	LLVMValueRef next = LLVMBuildFAdd(B, sum.phi, LLVMBuildFMul(B, x, y, ""), "");
	cg_acc_next(k, &sum, next);
	cg_for_end(k, &l, count);
	LLVMValueRef total = cg_acc_result(k, &l, init, next);
	/* an absorbed acc: v + x, in that order, as the acc does */
	if (d->accumulate)
		total = LLVMBuildFAdd(B, cg_load(k, ptrs[0], idx), total, "");
	cg_store(k, ptrs[0], idx, total);
}

void cg_kernel_linalg(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	(void)args;
	if (d->kind != OP_MATMUL)
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	body_matmul(k, d, ptrs, idx);
}

/* C = A @ B into dst; beta 1 accumulates into what dst holds */
void cg_gemm(Host *h, Op *op, LLVMValueRef dst, double beta)
{
	Program *p = h->g->p;
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]), c = ir_vtype(p, op->out);
	int64_t m = c.dim[c.rank - 2], n = c.dim[c.rank - 1];
	int64_t k = op->attr.mm.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
	int64_t batch = ir_numel(c) / (m * n);
	/* leading dimensions: the rows' pitches in storage (memplan/pitch.c); the result's is dst's, which is
	 * an acc's target (never pitched) where the product is added into it */
	int64_t lda = ir_row_pitch(p, op->in[0]), ldb = ir_row_pitch(p, op->in[1]), ldc = ir_row_pitch(p, op->out);
	int64_t sa = a.dim[a.rank - 2] * lda, sb = b.rank == 2 ? 0 : b.dim[b.rank - 2] * ldb;
	if (b.rank == 2 && batch > 1 && !op->attr.mm.ta) {
		/* a stack of row blocks times one matrix is one tall GEMM */
		m *= batch;
		batch = 1;
	}
	Cg *g = h->g;
	LLVMValueRef args[18] = {
		h->ctx, LLVMConstInt(g->i32, (unsigned long long)ir_dt_bytes(c.dt), 0), LLVMConstInt(g->i32, (unsigned long long)op->attr.mm.ta, 0), LLVMConstInt(g->i32, (unsigned long long)op->attr.mm.tb, 0),
		cg_i64(g, m), cg_i64(g, n), cg_i64(g, k),
		cg_addr(h, op->in[0]), cg_i64(g, lda), cg_i64(g, sa),
		cg_addr(h, op->in[1]), cg_i64(g, ldb), cg_i64(g, sb),
		dst, cg_i64(g, ldc), cg_i64(g, m * ldc),
		cg_i64(g, batch), LLVMConstReal(g->f64, beta),
	};
	cg_call(h, h->t_gemm, h->f_gemm, args, 18);
	cg_cost_gemm(h, ir_dt_bytes(c.dt), m, n, k, batch, (int64_t[]){lda, ldb, ldc}, false);
}

/* sum over leading axes: ones[1, M] @ x[M, N], one GEMM instead of a long serial sum per output */
bool cg_leading_sum(Host *h, Op *op, LLVMValueRef dst, double beta)
{
	int64_t m, n;
	if (!ir_leading_sum(h->g->p, op, &m, &n))
		return false;
	Cg *g = h->g;
	DType dt = ir_vtype(g->p, op->in[0]).dt;
	LLVMValueRef ones = LLVMBuildAdd(g->b, h->base, cg_i64(g, g->p->ones_offset[dt]), "");
	LLVMValueRef args[18] = {
		h->ctx, LLVMConstInt(g->i32, (unsigned long long)ir_dt_bytes(dt), 0), LLVMConstInt(g->i32, 0, 0), LLVMConstInt(g->i32, 0, 0), cg_i64(g, 1), cg_i64(g, n), cg_i64(g, m),
		ones, cg_i64(g, m), cg_i64(g, 0), cg_addr(h, op->in[0]), cg_i64(g, n), cg_i64(g, 0),
		dst, cg_i64(g, n), cg_i64(g, 0), cg_i64(g, 1), LLVMConstReal(g->f64, beta),
	};
	cg_call(h, h->t_gemm, h->f_gemm, args, 18);
	cg_cost_gemm(h, ir_dt_bytes(dt), 1, n, m, 1, (int64_t[]){m, n, n}, false);
	return true;
}

bool cg_host_linalg(Host *h, Op *op)
{
	if (ir_small_matmul(h->g->p, op))
		cg_lower_kernel(h, op, NULL);
	else
		cg_gemm(h, op, cg_addr(h, op->out), 0);
	return true;
}
