/* cg, attention in FMA: f32 and f64 attention on the GPU in
 * FlashAttention-2's order, the scores never in memory (the
 * memory-efficient kernel's design: tiles of the other side's rows, an
 * online softmax, sums in FMA), for attention ops the frontend marked
 * (Attr.attn.flash) in f32 or f64; bf16 takes the tensor cores
 * (attention.c, body_attn_mma) in the same order and with the same ops:
 * the forward writes each row's log-sum-exp as it goes, attn_delta gives
 * the rows' dO . O, attn_dkv the key side in one pass, attn_dq the query
 * side.
 *
 * A block of 256 threads takes R rows of one head (query rows for the
 * forward and attn_dq, key rows for attn_dkv, attn_dk and attn_dv), each
 * row shared by L lanes (ops_attn_fma_lanes: a lane keeps at most 64
 * values of its row's operands and sums in registers, 32 in f64), so R =
 * 256 / L. A lane holds the row's elements in vectors of V (16 bytes where
 * the head's width allows), vector c of lane p at columns (p + L c) V: at
 * one step the row's lanes read neighbouring vectors of the tile, in
 * different banks. The other side's rows come through shared memory
 * FMA_TK at a time, read there by every row at once (a broadcast). A
 * score is the lane's share of a dot product, then the sum over the row's
 * lanes by butterfly shuffles, the same bits in each of them. Under a
 * causal mask a warp skips the tiles that none of its rows sees. On the
 * CPU the SIMT emulator runs the same kernels (DPC_SIMT). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cgint.h"
#include "../ops/ops.h"

enum { FMA_TK = OPS_ATTN_FMA_TILE }; /* the other side's rows a step */

typedef struct {
	K *k;
	Cg *g;
	LLVMBuilderRef B;
	int64_t T, C, H, dh;
	int L, V, W, R, chunks;     /* lanes a row, elements a vector, a lane's elements, rows a block, a lane's vectors */
	LLVMValueRef b, h, bh;      /* batch item, head, and both as one index */
	LLVMValueRef me, in, col0;  /* this thread's row, whether it is below T, its first column */
	LLVMValueRef tile;          /* the block's tile memory (shared on the GPU), reals */
	LLVMTypeRef vt;             /* a vector of V reals */
	double unit;                /* scores in units of ln 2 in f32 (ex2), of 1 in f64 */
} Fma;

static LLVMValueRef c64(Fma *f, int64_t v) { return cg_i64(f->g, v); }
static LLVMValueRef add(Fma *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(f->B, a, b, ""); }
static LLVMValueRef mul(Fma *f, LLVMValueRef a, int64_t c) { return LLVMBuildMul(f->B, a, c64(f, c), ""); }
static LLVMValueRef real(Fma *f, double v) { return cg_real(f->g, v); }
static LLVMValueRef f_mul(Fma *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(f->B, a, b, ""); }
static LLVMValueRef f_add(Fma *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(f->B, a, b, ""); }
static LLVMValueRef f_sub(Fma *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(f->B, a, b, ""); }
/* a b + c, one FMA where the target has them (fma.rn on the GPU; NVPTX does not contract a product and a sum itself) */
static LLVMValueRef f_fma(Fma *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef x[3] = {a, b, c};
	return cg_intrinsic(f->k, f->g->real == f->g->f64 ? "llvm.fmuladd.f64" : "llvm.fmuladd.f32", f->g->real, x, 3);
}

/* element 0 of row r of this head in a [.., T, C] tensor */
static LLVMValueRef row_at(Fma *f, LLVMValueRef r)
{
	return add(f, mul(f, add(f, mul(f, f->b, f->T), r), f->C), mul(f, f->h, f->dh));
}

/* the first column of this lane's vector c */
static LLVMValueRef col(Fma *f, int c) { return add(f, f->col0, c64(f, (int64_t)c * f->L * f->V)); }

/* V reals at element i of p (global or shared memory), a whole vector's alignment */
static void vload(Fma *f, LLVMValueRef p, LLVMValueRef i, LLVMValueRef *x)
{
	LLVMValueRef at = LLVMBuildGEP2(f->B, f->g->real, p, &i, 1, "");
	if (f->V == 1) {
		x[0] = LLVMBuildLoad2(f->B, f->g->real, at, "");
		return;
	}
	unsigned space = LLVMGetPointerAddressSpace(LLVMTypeOf(p));
	LLVMValueRef v = LLVMBuildLoad2(f->B, f->vt, LLVMBuildBitCast(f->B, at, LLVMPointerType(f->vt, space), ""), "");
	LLVMSetAlignment(v, (unsigned)(f->V * (f->g->real == f->g->f64 ? 8 : 4)));
	for (int e = 0; e < f->V; e++)
		x[e] = LLVMBuildExtractElement(f->B, v, LLVMConstInt(f->g->i32, (unsigned)e, 0), "");
}

static void vstore(Fma *f, LLVMValueRef p, LLVMValueRef i, const LLVMValueRef *x)
{
	LLVMValueRef at = LLVMBuildGEP2(f->B, f->g->real, p, &i, 1, "");
	if (f->V == 1) {
		LLVMBuildStore(f->B, x[0], at);
		return;
	}
	LLVMValueRef v = LLVMGetUndef(f->vt);
	for (int e = 0; e < f->V; e++)
		v = LLVMBuildInsertElement(f->B, v, x[e], LLVMConstInt(f->g->i32, (unsigned)e, 0), "");
	unsigned space = LLVMGetPointerAddressSpace(LLVMTypeOf(p));
	LLVMValueRef s = LLVMBuildStore(f->B, v, LLVMBuildBitCast(f->B, at, LLVMPointerType(f->vt, space), ""));
	LLVMSetAlignment(s, (unsigned)(f->V * (f->g->real == f->g->f64 ? 8 : 4)));
}

/* a lane's array of W reals, kept across the tiles' loop: promoted to registers */
static LLVMValueRef regs(Fma *f, int n, double init)
{
	LLVMValueRef a = cg_entry_alloca(f->k, f->g->real, n);
	for (int i = 0; i < n; i++)
		LLVMBuildStore(f->B, real(f, init), LLVMBuildGEP2(f->B, f->g->real, a, (LLVMValueRef[]){c64(f, i)}, 1, ""));
	return a;
}
static LLVMValueRef rd(Fma *f, LLVMValueRef a, int i)
{
	return LLVMBuildLoad2(f->B, f->g->real, LLVMBuildGEP2(f->B, f->g->real, a, (LLVMValueRef[]){c64(f, i)}, 1, ""), "");
}
static void wr(Fma *f, LLVMValueRef a, int i, LLVMValueRef v)
{
	LLVMBuildStore(f->B, v, LLVMBuildGEP2(f->B, f->g->real, a, (LLVMValueRef[]){c64(f, i)}, 1, ""));
}

/* this lane's share of its row of tensor p, times s (rows past T read row 0) */
static void own_row(Fma *f, LLVMValueRef p, double s, LLVMValueRef *x)
{
	LLVMValueRef base = row_at(f, LLVMBuildSelect(f->B, f->in, f->me, c64(f, 0), ""));
	for (int c = 0; c < f->chunks; c++) {
		vload(f, p, add(f, base, col(f, c)), x + c * f->V);
		for (int e = 0; s != 1 && e < f->V; e++)
			x[c * f->V + e] = f_mul(f, x[c * f->V + e], real(f, s));
	}
}

/* this lane's share of acc (times s, or as it is for NULL) into its row of p */
static void store_row(Fma *f, LLVMValueRef p, LLVMValueRef acc, LLVMValueRef s)
{
	LLVMValueRef base = row_at(f, f->me), x[4];
	for (int c = 0; c < f->chunks; c++) {
		for (int e = 0; e < f->V; e++)
			x[e] = s ? f_mul(f, rd(f, acc, c * f->V + e), s) : rd(f, acc, c * f->V + e);
		vstore(f, p, add(f, base, col(f, c)), x);
	}
}

/* rows r0 .. r0 + FMA_TK - 1 of tensor p into the tile memory at element
 * `at`, a vector a thread at a time; rows at or past T zeros */
static void copy_tile(Fma *f, LLVMValueRef p, LLVMValueRef r0, int64_t at)
{
	K *k = f->k;
	LLVMBuilderRef B = f->B;
	int64_t per = f->dh / f->V, n = FMA_TK * per;
	Loop l = cg_for_from(k, k->lane, CG_BLOCK, c64(f, n));
	LLVMValueRef row = LLVMBuildUDiv(B, l.i, c64(f, per), ""), cv = mul(f, LLVMBuildURem(B, l.i, c64(f, per), ""), f->V);
	LLVMValueRef r = add(f, r0, row), ok = LLVMBuildICmp(B, LLVMIntSLT, r, c64(f, f->T), ""), x[4];
	vload(f, p, add(f, row_at(f, LLVMBuildSelect(B, ok, r, c64(f, 0), "")), cv), x);
	for (int e = 0; e < f->V; e++)
		x[e] = LLVMBuildSelect(B, ok, x[e], real(f, 0), "");
	vstore(f, f->tile, add(f, c64(f, at), add(f, mul(f, row, f->dh), cv)), x);
	cg_for_end(k, &l, c64(f, n));
}

/* the queries' log-sum-exp and dO . O for the key side's tile at element `at` (zeros past T) */
static void copy_stats(Fma *f, LLVMValueRef stats, LLVMValueRef r0, int64_t at)
{
	K *k = f->k;
	LLVMBuilderRef B = f->B;
	LLVMBasicBlockRef j = cg_if(k, LLVMBuildICmp(B, LLVMIntULT, k->lane, c64(f, FMA_TK), ""));
	LLVMValueRef r = add(f, r0, k->lane), ok = LLVMBuildICmp(B, LLVMIntSLT, r, c64(f, f->T), "");
	LLVMValueRef e = mul(f, add(f, mul(f, f->bh, f->T), LLVMBuildSelect(B, ok, r, c64(f, 0), "")), 2);
	for (int i = 0; i < 2; i++) {
		LLVMValueRef v = LLVMBuildSelect(B, ok, cg_load(k, stats, add(f, e, c64(f, i))), real(f, 0), "");
		LLVMBuildStore(B, v, LLVMBuildGEP2(B, f->g->real, f->tile, (LLVMValueRef[]){add(f, c64(f, at), add(f, mul(f, k->lane, 2), c64(f, i)))}, 1, ""));
	}
	cg_end_if(k, j);
}

/* x . (row j of the tile at `at`), this lane's share; with acc, also acc += s (the row), each of the
 * row's vectors used by both as it comes (no row of the tile held whole) */
static LLVMValueRef partial(Fma *f, const LLVMValueRef *x, int64_t at, LLVMValueRef j, LLVMValueRef acc, LLVMValueRef s)
{
	LLVMValueRef sum = NULL, y[4];
	for (int c = 0; c < f->chunks; c++) {
		vload(f, f->tile, add(f, add(f, c64(f, at), mul(f, j, f->dh)), col(f, c)), y);
		for (int e = 0; e < f->V; e++) {
			int i = c * f->V + e;
			sum = sum ? f_fma(f, x[i], y[e], sum) : f_mul(f, x[i], y[e]);
			if (acc)
				wr(f, acc, i, f_fma(f, s, y[e], rd(f, acc, i)));
		}
	}
	return sum;
}

/* a lane's share of a sum, then the row's whole sum over its lanes, the same bits in each */
static LLVMValueRef lanes_sum(Fma *f, LLVMValueRef s)
{
	for (int m = f->L / 2; m >= 1; m /= 2)
		s = f_add(f, s, cg_shuffle_xor(f->k, s, m));
	return s;
}

/* x . (row j of the tile at `at`) */
static LLVMValueRef dot_row(Fma *f, const LLVMValueRef *x, int64_t at, LLVMValueRef j)
{
	return lanes_sum(f, partial(f, x, at, j, NULL, NULL));
}

/* acc += s (row j of the tile at `at`), this lane's share */
static void axpy_row(Fma *f, LLVMValueRef acc, LLVMValueRef s, int64_t at, LLVMValueRef j)
{
	LLVMValueRef y[4];
	for (int c = 0; c < f->chunks; c++) {
		vload(f, f->tile, add(f, add(f, c64(f, at), mul(f, j, f->dh)), col(f, c)), y);
		for (int e = 0; e < f->V; e++)
			wr(f, acc, c * f->V + e, f_fma(f, s, y[e], rd(f, acc, c * f->V + e)));
	}
}

/* no load moves across it, nor is one kept across it in place of a second
 * (an empty asm that may write memory) */
static void fence(Fma *f)
{
	LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(f->g->ctx), NULL, 0, 0);
	LLVMValueRef asm_ = LLVMGetInlineAsm(ft, "", 0, "~{memory}", 9, 1, 0, LLVMInlineAsmDialectATT, 0);
	LLVMBuildCall2(f->B, ft, asm_, NULL, 0, "");
}

/* the block's threads meet (on the SIMT emulator too) */
static void barrier(Fma *f)
{
	cg_intrinsic(f->k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(f->g->ctx), NULL, 0);
}

/* whether this row sees the other side's row o + j: below T, and under a
 * causal mask a key at or before the query (key rows: a query at or after
 * the key) */
static LLVMValueRef sees(Fma *f, LLVMValueRef o, LLVMValueRef j, bool causal, bool keyside)
{
	LLVMValueRef other = add(f, o, j), ok = LLVMBuildICmp(f->B, LLVMIntSLT, other, c64(f, f->T), "");
	if (causal)
		ok = LLVMBuildAnd(f->B, ok, LLVMBuildICmp(f->B, keyside ? LLVMIntSGE : LLVMIntSLE, other, f->me, ""), "");
	return ok;
}

/* e^(x / unit): ex2.approx in f32 (the scores are in units of ln 2), exp in f64 */
static LLVMValueRef expo(Fma *f, LLVMValueRef x)
{
	if (f->g->real == f->g->f64)
		return cg_exp(f->k, x);
	return cg_intrinsic(f->k, "llvm.nvvm.ex2.approx.f", f->g->real, &x, 1);
}

/* the vector width for rows of dh shared by L lanes: 16 bytes where each lane's share divides into them */
static int fma_vector(const KDesc *d, int L)
{
	Type q = d->in[0];
	int64_t dh = q.dim[q.rank - 1] / d->attr.attn.heads;
	int v = q.dt == DT_F64 ? 2 : 4;
	while (v > 1 && dh % ((int64_t)L * v))
		v /= 2;
	return v;
}

int64_t cg_attn_fma_rows(const KDesc *d)
{
	int L = ops_attn_fma_lanes(d->in[0], d->attr.attn.heads, d->kind);
	if (!L)
		die("attention of %s heads=%d on the FMA kernels", ir_dt_name(d->in[0].dt), d->attr.attn.heads);
	return CG_BLOCK / L;
}

int64_t cg_attn_fma_tile(void) { return FMA_TK; }

void cg_attn_fma(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef item)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	Type q = d->in[0];
	OpKind kind = d->kind;
	Fma ff = {.k = k, .g = g, .B = B};
	Fma *f = &ff;
	f->T = q.dim[q.rank - 2], f->C = q.dim[q.rank - 1], f->H = d->attr.attn.heads, f->dh = f->C / f->H;
	f->R = (int)cg_attn_fma_rows(d);
	f->L = CG_BLOCK / f->R;
	f->V = fma_vector(d, f->L);
	f->W = (int)(f->dh / f->L);
	f->chunks = f->W / f->V;
	if (f->W > 32)
		die("attention on the FMA kernels with %d values a lane", f->W);
	f->vt = LLVMVectorType(g->real, (unsigned)f->V);
	f->unit = g->real == g->f64 ? 1 : 1.4426950408889634;
	bool fwd = kind == OP_ATTENTION || kind == OP_ATTN_LSE, dq = kind == OP_ATTN_DQ, causal = d->attr.attn.causal;
	bool keyside = !fwd && !dq, want_dk = kind == OP_ATTN_DK || kind == OP_ATTN_DKV, want_dv = kind == OP_ATTN_DV || kind == OP_ATTN_DKV;
	int64_t nt = (f->T + f->R - 1) / f->R;
	f->bh = LLVMBuildUDiv(B, item, c64(f, nt), "");
	LLVMValueRef row0 = mul(f, LLVMBuildURem(B, item, c64(f, nt), ""), f->R);
	f->h = LLVMBuildURem(B, f->bh, c64(f, f->H), "");
	f->b = LLVMBuildUDiv(B, f->bh, c64(f, f->H), "");
	f->me = add(f, row0, LLVMBuildUDiv(B, k->lane, c64(f, f->L), ""));
	f->in = LLVMBuildICmp(B, LLVMIntSLT, f->me, c64(f, f->T), "");
	f->col0 = mul(f, LLVMBuildURem(B, k->lane, c64(f, f->L), ""), f->V);
	/* tile memory: two tiles of the other side's rows (A: K, or Q for key
	 * rows; B: V, or dO), then the key side's queries' statistics */
	int64_t A = 0, Bt = FMA_TK * f->dh, St = 2 * FMA_TK * f->dh, n = St + 2 * FMA_TK;
	char name[48];
	snprintf(name, sizeof name, "dp_tile_fma_%lld_%s", (long long)n, g->real == g->f64 ? "f64" : "f32");
	LLVMValueRef s = cg_shared_array(g, name, LLVMArrayType(g->real, (unsigned)n));
	f->tile = LLVMBuildBitCast(B, s, LLVMPointerType(g->real, g->gpu ? 3 : 0), "");
	LLVMValueRef scale = real(f, 1 / sqrt((double)f->dh)), sunit = real(f, f->unit);
	double qs = f->unit / sqrt((double)f->dh); /* scores from q (or k) scaled once, in the exponent's units */
	LLVMValueRef stats = fwd ? NULL : cg_ptr(k, args[5], g->realp);

	/* the thread's own rows and sums */
	LLVMValueRef mine[32], mine2[32], acc = NULL, acc2 = NULL, m = NULL, l = NULL, lse = NULL, D = NULL;
	own_row(f, keyside ? ptrs[2] : ptrs[1], qs, mine);
	if (dq)
		own_row(f, ptrs[4], 1, mine2);
	if (want_dk)
		own_row(f, ptrs[3], 1, mine2);
	if (kind != OP_ATTN_LSE)
		acc = regs(f, f->W, 0); /* O, dq, dk, or dv */
	if (kind == OP_ATTN_DKV)
		acc2 = regs(f, f->W, 0); /* dv */
	if (fwd) {
		m = regs(f, 1, -INFINITY);
		l = regs(f, 1, 0);
	}
	if (dq) {
		LLVMValueRef e = mul(f, add(f, mul(f, f->bh, f->T), LLVMBuildSelect(B, f->in, f->me, c64(f, 0), "")), 2);
		lse = f_mul(f, cg_load(k, stats, e), sunit);
		D = cg_load(k, stats, add(f, e, c64(f, 1)));
	}

	/* the other side's rows: keys up to the block's last query row (all
	 * when not causal), or queries from the block's first key row */
	LLVMValueRef ostart = keyside && causal ? row0 : c64(f, 0), end = add(f, row0, c64(f, f->R));
	LLVMValueRef oend = !keyside && causal ? LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, end, c64(f, f->T), ""), end, c64(f, f->T), "")
	                                       : c64(f, f->T);
	LLVMValueRef w0 = add(f, row0, mul(f, LLVMBuildLShr(B, k->lane, c64(f, 5), ""), 32 / f->L)); /* the warp's first row */
	Loop o = cg_for_from(k, ostart, FMA_TK, oend);
	barrier(f); /* the last tile's readers are done */
	copy_tile(f, keyside ? ptrs[1] : ptrs[2], o.i, A);
	if (kind != OP_ATTN_LSE)
		copy_tile(f, keyside ? ptrs[4] : ptrs[3], o.i, Bt);
	if (keyside)
		copy_stats(f, stats, o.i, St);
	barrier(f);
	/* causal: a warp whose rows all come before the tile's first key (after its last query) skips it */
	LLVMBasicBlockRef skip = NULL;
	if (causal) {
		LLVMValueRef any = keyside ? LLVMBuildICmp(B, LLVMIntSGE, add(f, o.i, c64(f, FMA_TK - 1)), w0, "")
		                            : LLVMBuildICmp(B, LLVMIntSLE, o.i, add(f, w0, c64(f, 32 / f->L - 1)), "");
		skip = cg_if(k, any);
	}
	LLVMValueRef ninf = real(f, -INFINITY), zero = real(f, 0);
	if (fwd) {
		/* the tile's scores (unrolled: the online softmax takes their max), the sums rescaled to it, then
		 * the tile's terms in order */
		LLVMValueRef sc[FMA_TK];
		for (int j = 0; j < FMA_TK; j++)
			sc[j] = LLVMBuildSelect(B, sees(f, o.i, c64(f, j), causal, false), dot_row(f, mine, A, c64(f, j)), ninf, "");
		LLVMValueRef mt = sc[0];
		for (int j = 1; j < FMA_TK; j++)
			mt = cg_max(k, mt, sc[j]);
		LLVMValueRef m0 = rd(f, m, 0), mn = cg_max(k, m0, mt), alpha = expo(f, f_sub(f, m0, mn));
		LLVMValueRef sum = f_mul(f, rd(f, l, 0), alpha);
		for (int i = 0; acc && i < f->W; i++)
			wr(f, acc, i, f_mul(f, rd(f, acc, i), alpha));
		LLVMValueRef p[FMA_TK];
		for (int j = 0; j < FMA_TK; j++) {
			p[j] = expo(f, f_sub(f, sc[j], mn));
			sum = f_add(f, sum, p[j]);
		}
		/* O += P V a vector of V's columns at a time, each column's terms in the rows' order: a vector of
		 * the tile live at once, not a row */
		for (int c = 0; acc && c < f->chunks; c++)
			for (int j = 0; j < FMA_TK; j++) {
				LLVMValueRef y[4];
				vload(f, f->tile, add(f, c64(f, Bt + (int64_t)j * f->dh), col(f, c)), y);
				for (int e = 0; e < f->V; e++)
					wr(f, acc, c * f->V + e, f_fma(f, p[j], y[e], rd(f, acc, c * f->V + e)));
			}
		wr(f, m, 0, mn);
		wr(f, l, 0, sum);
	} else {
		/* the gradients: a row of the tile a step (a loop: its values and the sums stay in registers) */
		Loop jl = cg_for(k, c64(f, FMA_TK));
		LLVMValueRef j = jl.i, ok = sees(f, o.i, j, causal, keyside), sc = dot_row(f, mine, A, j);
		if (dq) {
			/* dS = P (dP - D) / sqrt(dh), against k_j */
			LLVMValueRef p = expo(f, f_sub(f, sc, lse));
			LLVMValueRef ds = f_mul(f, f_mul(f, p, f_sub(f, dot_row(f, mine2, Bt, j), D)), scale);
			axpy_row(f, acc, LLVMBuildSelect(B, ok, ds, zero, ""), A, j);
		} else {
			/* key rows: query j's statistics from the tile */
			LLVMValueRef at = add(f, c64(f, St), mul(f, j, 2));
			LLVMValueRef lse_j = LLVMBuildLoad2(B, g->real, LLVMBuildGEP2(B, g->real, f->tile, &at, 1, ""), "");
			LLVMValueRef p = LLVMBuildSelect(B, ok, expo(f, f_sub(f, sc, f_mul(f, lse_j, sunit))), zero, "");
			LLVMValueRef dv = kind == OP_ATTN_DKV ? acc2 : acc;
			if (want_dk) {
				/* dP = v . dO_j, and dv += P dO_j from the same vectors; then dS, and dk += dS q_j with
				 * q_j read again: with k, v, dk and dv in registers, neither query row is held whole */
				LLVMValueRef at1 = add(f, at, c64(f, 1));
				LLVMValueRef d_j = LLVMBuildLoad2(B, g->real, LLVMBuildGEP2(B, g->real, f->tile, &at1, 1, ""), "");
				LLVMValueRef dp = lanes_sum(f, partial(f, mine2, Bt, j, want_dv ? dv : NULL, p));
				LLVMValueRef ds = f_mul(f, f_mul(f, p, f_sub(f, dp, d_j)), scale);
				fence(f);
				axpy_row(f, acc, ds, A, j);
			} else {
				axpy_row(f, dv, p, Bt, j);
			}
		}
		cg_for_end(k, &jl, c64(f, FMA_TK));
	}
	if (skip)
		cg_end_if(k, skip);
	cg_for_end(k, &o, oend);

	/* the thread's row out, where it is below T */
	LLVMBasicBlockRef j = cg_if(k, f->in);
	if (fwd) {
		LLVMValueRef lsum = rd(f, l, 0);
		LLVMValueRef lse_out = kind == OP_ATTN_LSE ? ptrs[0] : d->mode ? cg_ptr(k, args[4], g->realp) : NULL;
		if (lse_out) { /* the row's log-sum-exp, in natural units, by its first lane */
			LLVMBasicBlockRef first = cg_if(k, LLVMBuildICmp(B, LLVMIntEQ, f->col0, c64(f, 0), ""));
			LLVMValueRef v = f_add(f, f_mul(f, rd(f, m, 0), real(f, 1 / f->unit)), cg_log(k, lsum));
			cg_store(k, lse_out, add(f, mul(f, f->bh, f->T), f->me), v);
			cg_end_if(k, first);
		}
		if (kind == OP_ATTENTION)
			store_row(f, ptrs[0], acc, LLVMBuildFDiv(B, real(f, 1), lsum, ""));
	} else if (kind == OP_ATTN_DKV) { /* dk, then dv */
		store_row(f, ptrs[0], acc, NULL);
		store_row(f, LLVMBuildGEP2(B, g->real, ptrs[0], (LLVMValueRef[]){c64(f, ir_numel(q))}, 1, ""), acc2, NULL);
	} else {
		store_row(f, ptrs[0], acc, NULL);
	}
	cg_end_if(k, j);
}

/* What a launch of cg_attn_fma does, counted from its structure above, for
 * the cost model: per block the tiles its loop takes (causal: up to the
 * block's last query row, or from its first key row), per warp and tile
 * the tile's rows it computes (under a causal mask only those of tiles
 * that one of its rows sees), and per such row and thread its FMAs, its
 * vector loads from shared memory, its shuffles, its exponentials and the
 * arithmetic around them; per block and tile the tiles' copies (global
 * loads and shared stores, over 256 threads); the tensors' own bytes are
 * the caller's. Returns the launch's blocks. */
int64_t cg_attn_fma_mix(const KDesc *d, CgMix *mix)
{
	Type q = d->in[0];
	OpKind kind = d->kind;
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], H = d->attr.attn.heads, dh = C / H;
	int64_t bh = ir_numel(q) / (T * C) * H, R = cg_attn_fma_rows(d), L = CG_BLOCK / R, V = fma_vector(d, (int)L);
	int64_t W = dh / L, vecs = W / V, warp_rows = 32 / L, shuffles = 0;
	for (int64_t m = L / 2; m >= 1; m /= 2)
		shuffles++;
	bool fwd = kind == OP_ATTENTION || kind == OP_ATTN_LSE, dq = kind == OP_ATTN_DQ, causal = d->attr.attn.causal;
	bool keyside = !fwd && !dq, dk = kind == OP_ATTN_DK || kind == OP_ATTN_DKV, dv = kind == OP_ATTN_DV || kind == OP_ATTN_DKV;
	int64_t blocks = (T + R - 1) / R, block_tiles = 0, warp_tiles = 0;
	for (int64_t i = 0; i < blocks; i++) {
		int64_t row0 = i * R, lo = keyside && causal ? row0 : 0;
		int64_t hi = !keyside && causal ? (row0 + R < T ? row0 + R : T) : T;
		for (int64_t o = lo; o < hi; o += FMA_TK) {
			block_tiles++;
			for (int64_t w = 0; w < CG_BLOCK / 32; w++) {
				int64_t w0 = row0 + w * warp_rows;
				warp_tiles += !causal || (keyside ? o + FMA_TK - 1 >= w0 : o <= w0 + warp_rows - 1);
			}
		}
	}
	/* per other row and thread: the dot products (a vector load and W FMAs each, then the shuffles and
	 * their adds), the accumulations (W FMAs; the tile's vectors the dot products loaded), the exponential;
	 * the rest as GPT-2's kernels' PTX has it (tests/kernels counts it there): in the forward (unrolled)
	 * 9 a key (the mask, the max, the exponent's argument, the sum) and the tile's rescaling of O; in
	 * the gradients' loop 16 (the loop, the tile's indices, the mask, the exponent's argument), dS's 3,
	 * and the key side's 6 more to read q_j again. A double crosses a shuffle as two words, with about 9 more to split and join them; its
	 * exponential is libdevice's exp, about 30 instructions (f64 is priced roughly: the checks count f32). */
	int dots = fwd ? 1 : dq ? 2 : 1 + dk, axpys = kind == OP_ATTN_LSE ? 0 : fwd || dq ? 1 : dk + dv;
	double rows = (double)(warp_tiles * bh) * FMA_TK; /* warp instructions: one per thread's row step */
	bool f64 = q.dt == DT_F64;
	double shfl = (double)(shuffles * dots) * (f64 ? 2 : 1), fma = (double)(W * (dots + axpys));
	double lds = (double)(vecs * (kind == OP_ATTN_LSE ? 1 : keyside && dk ? 3 : 2) + (keyside ? 1 : 0)), ex2 = fwd ? 1 + 1.0 / FMA_TK : 1;
	double alu = (double)(shuffles * dots) * (f64 ? 10 : 1) + (fwd ? 9 + (double)W / FMA_TK : 16 + (dq || dk ? 3 : 0) + (keyside && dk ? 6 : 0)) +
	             (f64 ? 30 * ex2 : 0);
	mix->f64 = f64;
	mix->per_step = fma + lds + shfl + ex2 + alu;
	mix->fma = rows * fma;
	/* a tile row's vectors loaded once for its dot product and its sum (the compiler keeps them; the key
	 * side's q_j twice, for dS), the queries' statistics in one load */
	mix->lds = rows * lds;
	mix->shfl = rows * shfl;
	mix->ex2 = rows * ex2;
	mix->alu = rows * alu + (double)(block_tiles * bh) * 40; /* and a tile's barriers, bounds and skip */
	int tiles = kind == OP_ATTN_LSE ? 1 : 2;
	double tile_bytes = (double)(tiles * FMA_TK * dh + (keyside ? 2 * FMA_TK : 0)) * (double)ir_dt_bytes(q.dt);
	/* a warp's vector load reads L distinct vectors, within one pass of the shared memory's 128 bytes */
	mix->shared = mix->lds * 128 + (double)(block_tiles * bh) * tile_bytes;
	mix->l2 = (double)(block_tiles * bh) * tile_bytes;
	mix->alu += (double)(block_tiles * bh) * (double)tiles * 6 * (double)(FMA_TK * dh / V) / 32;
	return blocks * bh;
}
