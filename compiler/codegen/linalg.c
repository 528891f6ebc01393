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

/* One GEMM call: its matrices' addresses, leading dimensions and batch
 * strides in elements */
typedef struct {
	int elem, ta, tb;
	int64_t m, n, k, batch;
	LLVMValueRef a, b, c;
	int64_t lda, ldb, ldc, sa, sb, sc;
} Gemm;

static void gemm_call(Host *h, const Gemm *q, double beta)
{
	Cg *g = h->g;
	LLVMValueRef args[18] = {
		h->ctx, LLVMConstInt(g->i32, (unsigned long long)q->elem, 0), LLVMConstInt(g->i32, (unsigned long long)q->ta, 0),
		LLVMConstInt(g->i32, (unsigned long long)q->tb, 0), cg_i64(g, q->m), cg_i64(g, q->n), cg_i64(g, q->k),
		q->a, cg_i64(g, q->lda), cg_i64(g, q->sa), q->b, cg_i64(g, q->ldb), cg_i64(g, q->sb),
		q->c, cg_i64(g, q->ldc), cg_i64(g, q->sc), cg_i64(g, q->batch), LLVMConstReal(g->f64, beta),
	};
	cg_call(h, h->t_gemm, h->f_gemm, args, 18);
	cg_cost_gemm(h, q->elem, q->m, q->n, q->k, q->batch, (int64_t[]){q->lda, q->ldb, q->ldc}, false);
}

static LLVMValueRef advance(Host *h, LLVMValueRef addr, int64_t elems, int elem)
{
	return elems ? LLVMBuildAdd(h->g->b, addr, cg_i64(h->g, elems * elem), "") : addr;
}

/* cuBLAS's tensor-core GEMMs want, beside leading dimensions of whole 16
 * bytes (memplan/pitch.c), the result's row length n and the depth k in
 * whole 16 bytes too: those are the contiguous extents of C and of A in its
 * column-major call. At GPT-2's vocabulary, 50,257 bf16, the logits' GEMM
 * (n) and its adjoint into x (k) ran on kernels of one element's alignment
 * on the H200 (2026-12-04: 95 and 131 TFLOP/s, against 650 for the
 * blocks' GEMMs), the adjoint into the table (its 50,257 a row count) at
 * 526. So where Program.split_gemms asks, such a GEMM is made as its
 * aligned bulk and the rest, a few columns or a few steps of depth (memory
 * bound, microseconds):
 * - n: columns [0, n0) and [n0, n), each result element made once, as by
 *   the one call;
 * - k: the rest's rank-r product first into C, then the bulk added to it
 *   (beta 1), so that the one extra rounding (in bf16) falls on the small
 *   part; only where C is not accumulated into (beta 0). */
static void gemm_split(Host *h, Gemm q, double beta)
{
	int64_t al = 16 / q.elem;
	if (h->g->p->split_gemms && q.elem == 2 && q.n > al && q.n % al) {
		int64_t n0 = q.n - q.n % al;
		Gemm r = q;
		q.n = n0;
		r.n -= n0;
		r.b = advance(h, r.b, q.tb ? n0 * q.ldb : n0, q.elem);
		r.c = advance(h, r.c, n0, q.elem);
		gemm_split(h, q, beta);
		gemm_split(h, r, beta);
		return;
	}
	if (h->g->p->split_gemms && q.elem == 2 && q.k > al && q.k % al && beta == 0) {
		int64_t k0 = q.k - q.k % al;
		Gemm r = q;
		q.k = k0;
		r.k -= k0;
		r.a = advance(h, r.a, q.ta ? k0 * q.lda : k0, q.elem);
		r.b = advance(h, r.b, q.tb ? k0 : k0 * q.ldb, q.elem);
		gemm_call(h, &r, 0);
		gemm_call(h, &q, 1);
		return;
	}
	gemm_call(h, &q, beta);
}

/* C = A @ B into dst; beta 1 accumulates into what dst holds */
void cg_gemm(Host *h, Op *op, LLVMValueRef dst, double beta)
{
	Program *p = h->g->p;
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]), c = ir_vtype(p, op->out);
	Gemm q = {.elem = ir_dt_bytes(c.dt), .ta = op->attr.mm.ta, .tb = op->attr.mm.tb,
	          .m = c.dim[c.rank - 2], .n = c.dim[c.rank - 1], .k = op->attr.mm.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1]};
	q.batch = ir_numel(c) / (q.m * q.n);
	/* leading dimensions: the rows' pitches in storage (memplan/pitch.c); the result's is dst's, which is
	 * an acc's target (never pitched) where the product is added into it */
	q.lda = ir_row_pitch(p, op->in[0]), q.ldb = ir_row_pitch(p, op->in[1]), q.ldc = ir_row_pitch(p, op->out);
	q.sa = a.dim[a.rank - 2] * q.lda, q.sb = b.rank == 2 ? 0 : b.dim[b.rank - 2] * q.ldb;
	if (b.rank == 2 && q.batch > 1 && !q.ta) {
		/* a stack of row blocks times one matrix is one tall GEMM */
		q.m *= q.batch;
		q.batch = 1;
	}
	q.sc = q.m * q.ldc;
	q.a = cg_addr(h, op->in[0]), q.b = cg_addr(h, op->in[1]), q.c = dst;
	gemm_split(h, q, beta);
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
