/* cg, linalg: matmul. A small one (ir_small_matmul) is a kernel with a
 * dot product per result; else a GEMM call (rt_gemm), which also serves
 * sums over leading axes (a vector of ones times a matrix). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../common/abi.h"
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

/* the GEMM op makes: its shape, leading dimensions and strides (no addresses: no code) */
static Gemm gemm_dims(Program *p, Op *op)
{
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
	return q;
}

/* the GEMM op makes, C into dst */
static Gemm gemm_of(Host *h, Op *op, LLVMValueRef dst)
{
	Gemm q = gemm_dims(h->g->p, op);
	q.a = cg_addr(h, op->in[0]), q.b = cg_addr(h, op->in[1]), q.c = dst;
	return q;
}

/* whether q is one product of f32 or bf16, as rt_gemm_ep takes, and not one that a bf16 split makes in two
 * (gemm_split) */
static bool one_call(const Program *p, const Gemm *q)
{
	int64_t al = 16 / q->elem;
	return q->batch == 1 && (q->elem == 2 || q->elem == 4) && !(p->split_gemms && q->elem == 2 && (q->n % al || q->k % al));
}

/* C = A @ B into dst; beta 1 accumulates into what dst holds */
void cg_gemm(Host *h, Op *op, LLVMValueRef dst, double beta)
{
	gemm_split(h, gemm_of(h, op, dst), beta);
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

/* ---- a GEMM and the elementwise ops after it in one call ----
 * cuBLASLt applies a bias, GELU, or GELU's derivative to a product on its
 * way to memory (its epilogues, rt_gemm_ep), so the product never makes a
 * round trip through memory and the elementwise kernel is not launched:
 * - P = A @ B; y = P + bias          one call writing y (RT_EP_BIAS)
 * - P = A @ B; z = P + bias; y = gelu(z)
 *                                    one call writing y, and z where
 *                                    anything else reads it (the adjoint's)
 * - P = A @ B; g = gelu_grad(x); y = P * g
 *                                    one call reading x, writing y (RT_EP_DGELU),
 *                                    and the sum of y's rows where a sum_to
 *                                    right after takes it (the bias's gradient)
 * The call is made where the GEMM was, so what the ops after it read must
 * exist by then and what they write must not be touched in between (the
 * plan gave those bytes to these values only from their ops on). Where
 * the device has no such GEMM (the CPU; a shape cuBLASLt has no kernel
 * for), rt_gemm_ep returns 0 and the same place makes them apart: the
 * GEMM into y's (or z's) storage, then the ops as one fused kernel reading
 * the product there. So on the CPU the bits are those of the ops apart,
 * while the order and the storage are the GPU's (tests/kernels). */
typedef struct {
	int epi;            /* RT_EP_* */
	int bias, aux, out; /* values: the bias (-1: none), z or x (-1: none), y */
	int at[3], nat;     /* the ops taken: adjacent positions in the block, elementwise but a last sum_to */
	int ew;             /* how many of them are elementwise */
	bool aux_written;   /* z, made by the call */
	bool bias_written;  /* the sum of y's rows, made by the call */
} Epilogue;

/* the one op of b after i that reads v, where nothing else does; -1 if none */
static int only_reader(Host *h, Block *b, int i, int to, int v)
{
	if (h->uses[v] != 1 || ir_is_result(h->g->p, v))
		return -1;
	for (int j = i + 1; j < to; j++)
		for (int k = 0; k < b->ops[j]->nin; k++)
			if (b->ops[j]->in[k] == v)
				return j;
	return -1;
}

/* v holds n reals in a row, in storage (not an immediate): [n], or [1, ..., 1, n] */
static bool row_vector(Program *p, int v, Type of)
{
	Type t = ir_vtype(p, v);
	if (!cg_operand_in_arena(p, v))
		return false;
	if (t.dt != of.dt || t.rank < 1 || t.dim[t.rank - 1] != of.dim[of.rank - 1])
		return false;
	for (int i = 0; i < t.rank - 1; i++)
		if (t.dim[i] != 1)
			return false;
	return true;
}

/* op j's other operand than v, where it has two and one is v */
static int other(const Op *op, int v)
{
	if (op->nin != 2 || (op->in[0] == v) == (op->in[1] == v))
		return -1;
	return op->in[0] == v ? op->in[1] : op->in[0];
}

/* which epilogue the ops after the GEMM b[i] make, if any */
static bool match_epilogue(Host *h, Block *b, int i, int to, Epilogue *e)
{
	Program *p = h->g->p;
	int pv = b->ops[i]->out, j = only_reader(h, b, i, to, pv);
	if (j < 0)
		return false;
	Op *op = b->ops[j];
	Type pt = ir_vtype(p, pv);
	int x = other(op, pv);
	if (x < 0 || !ir_type_eq(ir_vtype(p, op->out), pt))
		return false;
	memset(e, 0, sizeof *e);
	e->aux = -1;
	if (op->kind == OP_ADD && row_vector(p, x, pt)) {
		e->bias = x, e->out = op->out, e->at[e->nat++] = j;
		Op *next = j + 1 < to ? b->ops[j + 1] : NULL;
		if (next && next->kind == OP_GELU && next->in[0] == op->out) {
			e->epi = RT_EP_GELU_BIAS, e->out = next->out, e->at[e->nat++] = j + 1;
			if (h->uses[op->out] > 1 || ir_is_result(p, op->out))
				e->aux = op->out, e->aux_written = true;
		} else {
			e->epi = RT_EP_BIAS;
		}
		e->ew = e->nat;
		return true;
	}
	Op *prev = b->ops[j - 1];
	if (op->kind == OP_MUL && j - 1 > i && prev->kind == OP_GELU_GRAD && prev->out == x && h->uses[x] == 1 &&
	    !ir_is_result(p, x) && ir_type_eq(ir_vtype(p, prev->in[0]), pt) && cg_operand_in_arena(p, prev->in[0])) {
		e->epi = RT_EP_DGELU, e->bias = -1, e->aux = prev->in[0], e->out = op->out;
		e->at[e->nat++] = j - 1, e->at[e->nat++] = j;
		e->ew = 2;
		/* the sum over y's rows into storage of its own (not planned into the acc after it, which adds) */
		Op *sum = j + 1 < to ? b->ops[j + 1] : NULL;
		int64_t rows, cols;
		if (sum && sum->kind == OP_SUM_TO && sum->in[0] == op->out && row_vector(p, sum->out, pt) &&
		    p->values.data[sum->out].res == VR_ARENA && ir_leading_sum(p, sum, &rows, &cols))
			e->bias = sum->out, e->bias_written = true, e->at[e->nat++] = j + 1;
		return true;
	}
	return false;
}

/* whether the storage of v and w may share bytes (values without storage, such as indices, share none) */
static bool overlaps(Cg *g, int v, int w)
{
	if (!cg_in_arena(g->p, v) || !cg_in_arena(g->p, w))
		return false;
	int64_t a, b, c, d;
	cg_extent(g, v, &a, &b);
	cg_extent(g, w, &c, &d);
	return a < d && c < b;
}

/* whether v exists at b[i], for the call made there to read: made before it, or made after it as a view
 * (a slice at an index known at b[i], a reshape) of a value that exists there */
static bool ready(Host *h, Block *b, int i, int last, int v)
{
	for (int j = i + 1; j <= last; j++) {
		Op *op = b->ops[j];
		if (op->out == v)
			return cg_view_here(h, op) && ready(h, b, i, j - 1, op->in[0]);
	}
	return true;
}

/* whether an op of b in (i, last] moves bytes between the host and the device or orders work after such
 * a move (a fetched value is ready only after its settle, which stays before its first reader: a call
 * made earlier would read it before its copy is done) */
static bool transfers(Block *b, int i, int last)
{
	for (int j = i + 1; j <= last; j++)
		switch (b->ops[j]->kind) {
		case OP_H2D: case OP_WAIT: case OP_OFFLOAD: case OP_FETCH: case OP_SETTLE: case OP_UPDATE: case OP_GRAD_IN:
			return true;
		default:
			break;
		}
	return false;
}

/* whether an op of b in (i, last], other than those at skip[0..nskip), reads or writes bytes of v, or is a
 * loop (whose body is not looked into) */
static bool touched(Host *h, Block *b, int i, int last, const int *skip, int nskip, int v)
{
	for (int j = i + 1; j <= last; j++) {
		Op *op = b->ops[j];
		bool skipped = false;
		for (int k = 0; k < nskip; k++)
			skipped |= skip[k] == j;
		if (skipped)
			continue;
		if (ir_is_loop(op) || (op->out >= 0 && overlaps(h->g, v, op->out)))
			return true;
		for (int k = 0; k < op->nin; k++)
			if (overlaps(h->g, v, op->in[k]))
				return true;
	}
	return false;
}

/* whether the call may be made at the GEMM b[i]: what it reads exists, what it writes (y, z) is read or
 * written by nothing in between and is apart from what it reads, the rows packed (no pitch) */
static bool may_move(Host *h, Block *b, int i, const Epilogue *e)
{
	Cg *g = h->g;
	Program *p = g->p;
	Op *mm = b->ops[i];
	int last = e->at[e->nat - 1];
	int writes[3] = {e->out, e->aux_written ? e->aux : -1, e->bias_written ? e->bias : -1};
	int reads[4] = {mm->in[0], mm->in[1], e->bias_written ? -1 : e->bias, e->aux_written ? -1 : e->aux};
	for (int w = 0; w < 3; w++) {
		if (writes[w] < 0)
			continue;
		Type t = ir_vtype(p, writes[w]);
		if (ir_row_pitch(p, writes[w]) != t.dim[t.rank - 1])
			return false;
		for (int r = 0; r < 4; r++)
			if (reads[r] >= 0 && overlaps(g, writes[w], reads[r]))
				return false;
		for (int v = 0; v < w; v++)
			if (writes[v] >= 0 && overlaps(g, writes[w], writes[v]))
				return false;
	}
	for (int r = 2; r < 4; r++)
		if (reads[r] >= 0 && !ready(h, b, i, last, reads[r]))
			return false;
	if (transfers(b, i, last))
		return false;
	for (int w = 0; w < 3; w++)
		if (writes[w] >= 0 && touched(h, b, i, last, e->at, e->nat, writes[w]))
			return false;
	return true;
}

/* where ep_call left off: the block after the call, and the step's count of its launches */
typedef struct {
	LLVMBasicBlockRef join;
	int64_t times;
} Made;

/* The call rt_gemm_ep(q, epi, ...), priced; the builder is left where it returned 0, for the caller to make
 * the same apart (not priced: the model takes the call's), then ep_made. */
static Made ep_call(Host *h, int epi, bool bgrad, const Gemm *q, double beta, LLVMValueRef bias, LLVMValueRef aux,
                    int64_t ldaux)
{
	Cg *g = h->g;
	LLVMValueRef args[18] = {
		h->ctx, LLVMConstInt(g->i32, (unsigned long long)epi, 0), LLVMConstInt(g->i32, (unsigned long long)q->elem, 0),
		LLVMConstInt(g->i32, (unsigned long long)q->ta, 0), LLVMConstInt(g->i32, (unsigned long long)q->tb, 0),
		cg_i64(g, q->m), cg_i64(g, q->n), cg_i64(g, q->k), q->a, cg_i64(g, q->lda), q->b, cg_i64(g, q->ldb), q->c,
		cg_i64(g, q->ldc), LLVMConstReal(g->f64, beta), bias, aux, cg_i64(g, ldaux),
	};
	LLVMTypeRef pt[18] = {g->i8p, g->i32, g->i32, g->i32, g->i32, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64,
	                      g->i64, g->i64, g->f64, g->i64, g->i64, g->i64};
	LLVMTypeRef ft;
	LLVMValueRef f = cg_declare(g, "rt_gemm_ep", g->i32, pt, 18, &ft);
	LLVMValueRef done = LLVMBuildCall2(g->b, ft, f, args, 18, "");
	cg_cost_gemm_ep(h, epi, bgrad, q->elem, q->m, q->n, q->k, (int64_t[]){q->lda, q->ldb, q->ldc}, ldaux > 0);
	LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "apart");
	Made m = {LLVMAppendBasicBlockInContext(g->ctx, h->fn, "made"), h->times};
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, done, LLVMConstInt(g->i32, 0, 0), ""), no, m.join);
	LLVMPositionBuilderAtEnd(g->b, no);
	h->times = 0;
	return m;
}

static void ep_made(Host *h, Made m)
{
	h->times = m.times;
	LLVMBuildBr(h->g->b, m.join);
	LLVMPositionBuilderAtEnd(h->g->b, m.join);
}

/* the elementwise ops e took, made apart at the GEMM b[i] (where rt_gemm_ep did not): the GEMM into
 * y's storage (z's where the call writes z), then the ops as one kernel, which reads the product there */
static void apart(Host *h, Block *b, int i, const Epilogue *e, Gemm q)
{
	Cg *g = h->g;
	int into = e->aux_written ? e->aux : e->out;
	q.c = cg_addr(h, into);
	gemm_split(h, q, 0);
	Op *ops[2] = {b->ops[e->at[0]], e->ew > 1 ? b->ops[e->at[1]] : NULL};
	Block run = {ops, e->ew, e->ew};
	g->moved_from = b->ops[i]->out, g->moved_to = into;
	if (cg_lower_fused(h, &run, 0, e->ew) != e->ew)
		die("codegen: an epilogue's %d ops were not one kernel", e->ew);
	g->moved_from = -1;
	if (e->bias_written)
		cg_leading_sum(h, b->ops[e->at[e->ew]], cg_addr(h, e->bias), 0);
}

bool cg_gemm_epilogue(Host *h, Block *b, int i, int to, int *at, int *nat)
{
	Cg *g = h->g;
	Program *p = g->p;
	Op *mm = b->ops[i];
	Epilogue e;
	Gemm q = gemm_dims(p, mm);
	if (!p->epilogues || h->device || ir_small_matmul(p, mm) || !one_call(p, &q) || !match_epilogue(h, b, i, to, &e))
		return false;
	if (!may_move(h, b, i, &e) && e.bias_written) /* without the sum, whose storage the plan may share */
		e.bias = -1, e.bias_written = false, e.nat--, g->ep_apart++;
	if (!may_move(h, b, i, &e)) {
		g->ep_apart++;
		return false;
	}
	int64_t ldaux = e.aux >= 0 ? ir_row_pitch(p, e.aux) : 0;
	if (ldaux % 8) /* cuBLASLt takes an aux matrix of rows a multiple of 8 elements */
		return false;
	q = gemm_of(h, mm, cg_addr(h, e.out));
	LLVMValueRef zero = cg_i64(g, 0);
	g->ep_made[e.epi]++;
	Made m = ep_call(h, e.epi, e.bias_written, &q, 0, e.bias >= 0 ? cg_addr(h, e.bias) : zero,
	                 e.aux >= 0 ? cg_addr(h, e.aux) : zero, ldaux);
	apart(h, b, i, &e, q);
	ep_made(h, m);
	for (int k = 0; k < e.nat; k++)
		at[k] = e.at[k];
	*nat = e.nat;
	return true;
}

/* ---- a bias's gradient in the weight's GEMM ----
 * A linear layer's adjoint sums dY over its rows (a sum_to, the bias's
 * gradient) and multiplies X^T @ dY (the weight's gradient, most often
 * added into its acc): the GEMM reduces over the same rows, so cuBLASLt's
 * BGRADA epilogue writes the sum as it goes. The sum_to comes first in the
 * program, so the call is made there, the GEMM (and the acc it adds into)
 * taken from later: what it reads must exist then, and what it writes be
 * touched by nothing in between. Apart: the sum and the GEMM there. */
bool cg_gemm_bgrad(Host *h, Block *b, int i, int to, int *at, int *nat)
{
	Cg *g = h->g;
	Program *p = g->p;
	Op *sum = b->ops[i];
	int64_t rows, cols;
	if (!p->epilogues || h->device || !ir_leading_sum(p, sum, &rows, &cols) || p->values.data[sum->out].res != VR_ARENA)
		return false;
	int y = sum->in[0], j = i + 1;
	/* the first GEMM after it of X^T and dY (as it is, or a view of its rows) */
	for (; j < to; j++) {
		Op *op = b->ops[j];
		int x = op->kind == OP_MATMUL && op->attr.mm.ta && !op->attr.mm.tb ? op->in[1] : -1;
		Value *xv = x >= 0 ? &p->values.data[x] : NULL;
		if (x == y || (xv && xv->def && xv->def->kind == OP_RESHAPE && xv->def->in[0] == y))
			break;
	}
	if (j == to || ir_small_matmul(p, b->ops[j]))
		return false;
	Op *mm = b->ops[j];
	Type yt = ir_vtype(p, y);
	if (ir_vtype(p, mm->in[1]).dim[ir_vtype(p, mm->in[1]).rank - 1] != yt.dim[yt.rank - 1] ||
	    !row_vector(p, sum->out, yt))
		return false;
	int acc = cg_absorbed_acc(h, b, j, to);
	if (acc < 0 && p->values.data[mm->out].alias_index == IR_ACC_INTO)
		return false;
	int dst = acc >= 0 ? b->ops[acc]->in[0] : mm->out;
	int skip[2] = {j, acc};
	Gemm q = gemm_dims(p, mm);
	if (!one_call(p, &q) || q.n != cols || q.k != rows)
		return false;
	/* X and dY exist here; nothing in between touches the weight's gradient; the sum's bytes are apart from
	 * what the GEMM reads and writes */
	if (!ready(h, b, i, j, mm->in[0]) || !ready(h, b, i, j, mm->in[1]) || transfers(b, i, j) || touched(h, b, i, j, skip, 1, dst) ||
	    overlaps(g, sum->out, mm->in[0]) || overlaps(g, sum->out, y) || overlaps(g, sum->out, dst)) {
		g->ep_apart++;
		return false;
	}
	g->ep_made[RT_EP_BGRAD]++;
	q = gemm_of(h, mm, acc >= 0 ? cg_acc_target(h, b->ops[acc]) : cg_addr(h, mm->out));
	double beta = acc >= 0 ? 1 : 0;
	Made m = ep_call(h, RT_EP_BGRAD, false, &q, beta, cg_addr(h, sum->out), cg_i64(g, 0), 0);
	cg_leading_sum(h, sum, cg_addr(h, sum->out), 0);
	gemm_split(h, q, beta);
	ep_made(h, m);
	at[0] = j;
	*nat = 1;
	if (acc >= 0)
		at[(*nat)++] = acc;
	return true;
}

void cg_epilogue_note(const Cg *g)
{
	const int *n = g->ep_made;
	if (!g->p->epilogues || n[1] + n[2] + n[3] + n[4] + g->ep_apart == 0)
		return;
	fprintf(stderr, "dpc: GEMM epilogues (cuBLASLt's; DPC_EPILOGUE=off makes them apart): %d call sites with a bias, %d "
	        "with a bias and GELU, %d with GELU's derivative, %d with a bias's gradient; %d left apart, what they "
	        "write sharing bytes with what lies between or what they read\n", n[RT_EP_BIAS], n[RT_EP_GELU_BIAS],
	        n[RT_EP_DGELU], n[RT_EP_BGRAD], g->ep_apart);
}
