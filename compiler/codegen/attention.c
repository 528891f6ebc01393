/* cg, attention: the kernels of attention and its gradients (attn_stats,
 * attn_dq, attn_dk, attn_dv) on the GPU and the reference path, and the
 * host's call into the CPU runtime's tiles of GEMMs (runtime/cpu/attention.c).
 * Three lowerings, chosen by shape and target: tensor cores (bf16 on
 * CUDA), tiles through shared memory or the stack, and one row per item. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "../../common/abi.h"
#include "cgint.h"
#include "../ops/ops.h"

/* sum over i < n of x[xb + i] * y[yb + i] */
static LLVMValueRef dot(K *k, LLVMValueRef x, LLVMValueRef xb, LLVMValueRef y, LLVMValueRef yb, int64_t n)
{
	Cg *g = k->g;
	LLVMValueRef nn = cg_i64(g, n);
	Loop l = cg_for(k, nn);
	Acc a = cg_acc(k, &l, cg_real(g, 0));
	LLVMValueRef v = LLVMBuildFAdd(k->b, a.phi, LLVMBuildFMul(k->b, cg_load(k, x, LLVMBuildAdd(k->b, xb, l.i, "")), cg_load(k, y, LLVMBuildAdd(k->b, yb, l.i, "")), ""), "");
	cg_acc_next(k, &a, v);
	cg_for_end(k, &l, nn);
	return cg_acc_result(k, &l, cg_real(g, 0), v);
}

/* out[ob + i] += s * x[xb + i] for i < n */
static void axpy(K *k, LLVMValueRef out, LLVMValueRef ob, LLVMValueRef s, LLVMValueRef x, LLVMValueRef xb, int64_t n)
{
	LLVMValueRef nn = cg_i64(k->g, n);
	Loop l = cg_for(k, nn);
	LLVMValueRef at = LLVMBuildAdd(k->b, ob, l.i, "");
	cg_store(k, out, at, LLVMBuildFAdd(k->b, cg_load(k, out, at), LLVMBuildFMul(k->b, s, cg_load(k, x, LLVMBuildAdd(k->b, xb, l.i, "")), ""), ""));
	cg_for_end(k, &l, nn);
}

/* ---- attention in tiles ----
 * A work item is a tile of Tq rows of one head (query rows; key rows for
 * attn_dk and attn_dv); the other side's rows come in tiles of Tk, copied
 * once into tile memory (shared memory on the GPU, where the item's 256
 * lanes each own a row; a stack array on the CPU, where one lane owns
 * them all) and read there by every row of the item. Each row's sums are
 * kept in the compute type until its result is stored. The order of every
 * sum is the per-row kernel's: keys (queries) ascending. */

#define ATTN_SMEM 32768 /* bytes of shared memory per block on the GPU */

/* on tensor cores (body_attn_mma), the other side's rows a step: 32 for the
 * forward in bf16, else 16; in f32 (3xTF32, whose operands' split halves
 * take registers of the scores') 16 for query rows and 8 for key rows,
 * whose two sums take 64 */
static int64_t mma_tile(const KDesc *d)
{
	OpKind k = d->kind;
	bool bf16 = d->in[0].dt == DT_BF16;
	if (!bf16 && (k == OP_ATTN_DKV || k == OP_ATTN_DK || k == OP_ATTN_DV))
		return 8;
	return (k == OP_ATTENTION || k == OP_ATTN_LSE) && bf16 ? 32 : 16;
}

bool cg_attn_tiles(const Cg *g, const KDesc *d, int64_t *tq, int64_t *tk)
{
	Type q = d->in[0];
	int64_t dh = q.dim[q.rank - 1] / d->attr.attn.heads, rb = q.dt == DT_F64 ? 8 : 4;
	if (cg_attn_mma(g, d)) {
		/* 16 rows a warp on tensor cores, the other side 32 or 16 at a time (mma_tile) */
		*tq = 128;
		*tk = mma_tile(d);
		return true;
	}
	if (cg_attn_flash(g, d)) {
		/* in FMA: rows shared by lanes, the other side's rows a tile at a time */
		*tq = cg_attn_fma_rows(d);
		*tk = cg_attn_fma_tile();
		return true;
	}
	if (!g->cuda) {
		/* the item's rows and tiles live on the stack: at most 1 MiB of it */
		*tq = *tk = 8;
		return (3 * *tq * dh + 2 * *tq + 2 * *tk * dh + 2 * *tk) * rb <= (1 << 20);
	}
	*tq = 256;
	*tk = ATTN_SMEM / rb / (2 * dh + 2);
	if (*tk > 64)
		*tk = 64;
	return *tk >= 8; /* else one row per item, untiled (body_attn) */
}

/* n reals of the compute type on this item's stack, made once in the entry block */
static LLVMValueRef scratch(K *k, int64_t n) { return cg_entry_alloca(k, k->g->real, n); }

/* the item's tile memory, n reals: the block's shared array on the GPU */
static LLVMValueRef tile_memory(K *k, int64_t n)
{
	Cg *g = k->g;
	if (k->lanes == 1)
		return scratch(k, n);
	bool f64 = g->real == g->f64;
	LLVMValueRef s = cg_shared_array(g, f64 ? "dp_tile_f64" : "dp_tile_f32", LLVMArrayType(g->real, ATTN_SMEM / (f64 ? 8 : 4)));
	return cg_shared_ptr(k, s, g->real);
}

static LLVMValueRef at_c(K *k, LLVMValueRef p, LLVMValueRef i) { return LLVMBuildGEP2(k->b, k->g->real, p, &i, 1, ""); }
static LLVMValueRef rd_c(K *k, LLVMValueRef p, LLVMValueRef i) { return LLVMBuildLoad2(k->b, k->g->real, at_c(k, p, i), ""); }
static void wr_c(K *k, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v) { LLVMBuildStore(k->b, v, at_c(k, p, i)); }

/* sum of x[i] y[i] for i < n, both in the compute type */
static LLVMValueRef dot_c(K *k, LLVMValueRef x, LLVMValueRef y, int64_t n)
{
	Cg *g = k->g;
	LLVMValueRef nn = cg_i64(g, n);
	Loop l = cg_for(k, nn);
	Acc a = cg_acc(k, &l, cg_real(g, 0));
	LLVMValueRef v = LLVMBuildFAdd(k->b, a.phi, LLVMBuildFMul(k->b, rd_c(k, x, l.i), rd_c(k, y, l.i), ""), "");
	cg_acc_next(k, &a, v);
	cg_for_end(k, &l, nn);
	return cg_acc_result(k, &l, cg_real(g, 0), v);
}

/* acc[i] += s x[i] for i < n */
static void axpy_c(K *k, LLVMValueRef acc, LLVMValueRef s, LLVMValueRef x, int64_t n)
{
	LLVMValueRef nn = cg_i64(k->g, n);
	Loop l = cg_for(k, nn);
	wr_c(k, acc, l.i, LLVMBuildFAdd(k->b, rd_c(k, acc, l.i), LLVMBuildFMul(k->b, s, rd_c(k, x, l.i), ""), ""));
	cg_for_end(k, &l, nn);
}

/* the item's lanes wait for each other (GPU); nothing to wait for on the CPU */
static void barrier(K *k)
{
	if (k->lanes > 1)
		cg_intrinsic(k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(k->g->ctx), NULL, 0);
}
static LLVMValueRef imin(K *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntSLT, a, b, ""), a, b, ""); }
static LLVMValueRef imax(K *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntSGT, a, b, ""), a, b, ""); }

static void body_attn_tiled(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef item, int64_t tq, int64_t tk)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	Type q = d->in[0];
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], H = d->attr.attn.heads, Dh = C / H;
	int64_t nslot = tq / k->lanes;
	bool keyside = d->kind == OP_ATTN_DK || d->kind == OP_ATTN_DV, causal = d->attr.attn.causal;
	bool fwd = d->kind == OP_ATTENTION, stats = d->kind == OP_ATTN_STATS;
	LLVMValueRef scale = cg_real(g, 1 / sqrt((double)Dh)), nT = cg_i64(g, T), nC = cg_i64(g, C), nDh = cg_i64(g, Dh);
	LLVMValueRef nt = cg_i64(g, (T + tq - 1) / tq);
	LLVMValueRef bh = LLVMBuildUDiv(B, item, nt, ""), row0 = LLVMBuildMul(B, LLVMBuildURem(B, item, nt, ""), cg_i64(g, tq), "");
	LLVMValueRef h = LLVMBuildURem(B, bh, cg_i64(g, H), ""), b = LLVMBuildUDiv(B, bh, cg_i64(g, H), "");
	LLVMValueRef head = LLVMBuildMul(B, h, nDh, "");
	/* element 0 of row r of this head: (b T + r) C + h Dh; its stats at 2 (bh T + r) */
#define AT(r) LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, b, nT, ""), (r), ""), nC, ""), head, "")
#define ST(r) LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, bh, nT, ""), (r), ""), cg_i64(g, 2), "")
#define SLOT(p, s, w) LLVMBuildGEP2(B, g->real, (p), (LLVMValueRef[]){LLVMBuildMul(B, (s), cg_i64(g, (w)), "")}, 1, "")
	/* the row slot s owns: this lane's s-th */
#define ROW(s) LLVMBuildAdd(B, row0, LLVMBuildAdd(B, k->lane, LLVMBuildMul(B, (s), cg_i64(g, k->lanes), ""), ""), "")
	/* per owned row (slot): its own row(s) copied, its sum, and two scalars
	 * (running max and sum, then log-sum-exp; or the row's stats) */
	LLVMValueRef mine = scratch(k, nslot * Dh), acc = scratch(k, nslot * Dh), st = scratch(k, nslot * 2);
	bool two = d->kind == OP_ATTN_DQ || d->kind == OP_ATTN_DK;
	LLVMValueRef mine2 = two ? scratch(k, nslot * Dh) : NULL;
	LLVMValueRef ta = tile_memory(k, 2 * tk * Dh + 2 * tk);
	LLVMValueRef tb = at_c(k, ta, cg_i64(g, tk * Dh)), ts = at_c(k, ta, cg_i64(g, 2 * tk * Dh));
	/* mine: Q (K for key rows); mine2: dO (V) */
	LLVMValueRef own = keyside ? ptrs[2] : ptrs[1], own2 = d->kind == OP_ATTN_DQ ? ptrs[4] : ptrs[3];
	Loop sl = cg_for(k, cg_i64(g, nslot));
	LLVMValueRef r = ROW(sl.i);
	LLVMBasicBlockRef join = cg_if(k, LLVMBuildICmp(B, LLVMIntSLT, r, nT, ""));
	LLVMValueRef ms = SLOT(mine, sl.i, Dh), as = SLOT(acc, sl.i, Dh), ss = SLOT(st, sl.i, 2);
	LLVMValueRef m2 = two ? SLOT(mine2, sl.i, Dh) : NULL;
	Loop c = cg_for(k, nDh);
	wr_c(k, ms, c.i, cg_load(k, own, LLVMBuildAdd(B, AT(r), c.i, "")));
	if (two)
		wr_c(k, m2, c.i, cg_load(k, own2, LLVMBuildAdd(B, AT(r), c.i, "")));
	wr_c(k, as, c.i, cg_real(g, 0));
	cg_for_end(k, &c, nDh);
	if (d->kind == OP_ATTN_DQ) {
		wr_c(k, ss, cg_i64(g, 0), cg_load(k, ptrs[5], ST(r)));
		wr_c(k, ss, cg_i64(g, 1), cg_load(k, ptrs[5], LLVMBuildAdd(B, ST(r), cg_i64(g, 1), "")));
	} else {
		wr_c(k, ss, cg_i64(g, 0), cg_real(g, -INFINITY));
		wr_c(k, ss, cg_i64(g, 1), cg_real(g, 0));
	}
	cg_end_if(k, join);
	cg_for_end(k, &sl, cg_i64(g, nslot));

	/* the other side's rows: keys 0 .. the tile's last row (all when not
	 * causal) for query rows, queries from the tile's first row for key rows */
	LLVMValueRef ostart = keyside && causal ? row0 : cg_i64(g, 0);
	LLVMValueRef oend = !keyside && causal ? imin(k, nT, LLVMBuildAdd(B, row0, cg_i64(g, tq), "")) : nT;
	for (int pass = 0; pass < (fwd ? 2 : 1); pass++) {
		bool sums = (fwd && pass == 0) || stats; /* running max and sum of exp */
		bool load_b = !sums;
		Loop o = cg_for_from(k, ostart, tk, oend);
		LLVMValueRef on = imin(k, cg_i64(g, tk), LLVMBuildSub(B, oend, o.i, ""));
		barrier(k); /* the last tile's readers are done */
		LLVMValueRef n = LLVMBuildMul(B, on, nDh, "");
		Loop e = cg_for_lanes(k, n);
		LLVMValueRef src = LLVMBuildAdd(B, AT(LLVMBuildAdd(B, o.i, LLVMBuildUDiv(B, e.i, nDh, ""), "")), LLVMBuildURem(B, e.i, nDh, ""), "");
		wr_c(k, ta, e.i, cg_load(k, keyside ? ptrs[1] : ptrs[2], src));
		if (load_b)
			wr_c(k, tb, e.i, cg_load(k, keyside ? ptrs[4] : ptrs[3], src));
		cg_for_end(k, &e, n);
		if (keyside) {
			LLVMValueRef n2 = LLVMBuildMul(B, on, cg_i64(g, 2), "");
			Loop e2 = cg_for_lanes(k, n2);
			wr_c(k, ts, e2.i, cg_load(k, ptrs[5], LLVMBuildAdd(B, ST(o.i), e2.i, "")));
			cg_for_end(k, &e2, n2);
		}
		barrier(k);
		Loop s = cg_for(k, cg_i64(g, nslot));
		LLVMValueRef rr = ROW(s.i);
		LLVMBasicBlockRef j2 = cg_if(k, LLVMBuildICmp(B, LLVMIntSLT, rr, nT, ""));
		LLVMValueRef ms2 = SLOT(mine, s.i, Dh), as2 = SLOT(acc, s.i, Dh), ss2 = SLOT(st, s.i, 2);
		LLVMValueRef m22 = two ? SLOT(mine2, s.i, Dh) : NULL;
		/* causal: a query row sees keys up to itself, a key row queries from itself */
		LLVMValueRef rel = LLVMBuildSub(B, rr, o.i, "");
		LLVMValueRef jfrom = keyside && causal ? imax(k, cg_i64(g, 0), rel) : cg_i64(g, 0);
		LLVMValueRef jto = !keyside && causal ? imin(k, on, LLVMBuildAdd(B, rel, cg_i64(g, 1), "")) : on;
		Loop j = cg_for_from(k, jfrom, 1, jto);
		LLVMValueRef aj = at_c(k, ta, LLVMBuildMul(B, j.i, nDh, "")), bj = at_c(k, tb, LLVMBuildMul(B, j.i, nDh, ""));
		LLVMValueRef sc = LLVMBuildFMul(B, dot_c(k, ms2, aj, Dh), scale, "");
		if (sums) {
			LLVMValueRef m0 = rd_c(k, ss2, cg_i64(g, 0)), l0 = rd_c(k, ss2, cg_i64(g, 1));
			LLVMValueRef nm = cg_max(k, m0, sc);
			LLVMValueRef nl = LLVMBuildFAdd(B, LLVMBuildFMul(B, l0, cg_exp(k, LLVMBuildFSub(B, m0, nm, "")), ""),
			                                cg_exp(k, LLVMBuildFSub(B, sc, nm, "")), "");
			wr_c(k, ss2, cg_i64(g, 0), nm);
			wr_c(k, ss2, cg_i64(g, 1), nl);
		} else if (fwd) {
			/* pass 2: st holds the row's log-sum-exp */
			axpy_c(k, as2, cg_exp(k, LLVMBuildFSub(B, sc, rd_c(k, ss2, cg_i64(g, 0)), "")), bj, Dh);
		} else if (!keyside) {
			/* dq: ds = p (dO . v_j - D) scale, against k_j */
			LLVMValueRef p = cg_exp(k, LLVMBuildFSub(B, sc, rd_c(k, ss2, cg_i64(g, 0)), ""));
			LLVMValueRef ds = LLVMBuildFMul(B, p, LLVMBuildFSub(B, dot_c(k, m22, bj, Dh), rd_c(k, ss2, cg_i64(g, 1)), ""), "");
			axpy_c(k, as2, LLVMBuildFMul(B, ds, scale, ""), aj, Dh);
		} else {
			/* key rows: query j's stats from the tile */
			LLVMValueRef two_j = LLVMBuildMul(B, j.i, cg_i64(g, 2), "");
			LLVMValueRef p = cg_exp(k, LLVMBuildFSub(B, sc, rd_c(k, ts, two_j), ""));
			if (d->kind == OP_ATTN_DV) {
				axpy_c(k, as2, p, bj, Dh);
			} else {
				LLVMValueRef dd = rd_c(k, ts, LLVMBuildAdd(B, two_j, cg_i64(g, 1), ""));
				LLVMValueRef ds = LLVMBuildFMul(B, p, LLVMBuildFSub(B, dot_c(k, bj, m22, Dh), dd, ""), "");
				axpy_c(k, as2, LLVMBuildFMul(B, ds, scale, ""), aj, Dh);
			}
		}
		cg_for_end(k, &j, jto);
		cg_end_if(k, j2);
		cg_for_end(k, &s, cg_i64(g, nslot));
		cg_for_end(k, &o, oend);
		if (fwd && pass == 0) {
			/* each row's log-sum-exp, for the second pass */
			Loop s3 = cg_for(k, cg_i64(g, nslot));
			LLVMValueRef ss3 = SLOT(st, s3.i, 2);
			wr_c(k, ss3, cg_i64(g, 0), LLVMBuildFAdd(B, rd_c(k, ss3, cg_i64(g, 0)), cg_log(k, rd_c(k, ss3, cg_i64(g, 1))), ""));
			cg_for_end(k, &s3, cg_i64(g, nslot));
		}
	}

	/* each owned row's result */
	Loop f = cg_for(k, cg_i64(g, nslot));
	LLVMValueRef rf = ROW(f.i);
	LLVMBasicBlockRef j3 = cg_if(k, LLVMBuildICmp(B, LLVMIntSLT, rf, nT, ""));
	if (stats) {
		/* ptrs: out, q, k, dO, O */
		LLVMValueRef ssf = SLOT(st, f.i, 2), at = ST(rf);
		cg_store(k, ptrs[0], at, LLVMBuildFAdd(B, rd_c(k, ssf, cg_i64(g, 0)), cg_log(k, rd_c(k, ssf, cg_i64(g, 1))), ""));
		cg_store(k, ptrs[0], LLVMBuildAdd(B, at, cg_i64(g, 1), ""), dot(k, ptrs[3], AT(rf), ptrs[4], AT(rf), Dh));
	} else {
		LLVMValueRef asf = SLOT(acc, f.i, Dh);
		Loop c2 = cg_for(k, nDh);
		cg_store(k, ptrs[0], LLVMBuildAdd(B, AT(rf), c2.i, ""), rd_c(k, asf, c2.i));
		cg_for_end(k, &c2, nDh);
	}
	cg_end_if(k, j3);
	cg_for_end(k, &f, cg_i64(g, nslot));
#undef AT
#undef ST
#undef SLOT
#undef ROW
}

/* Attention, one row per work item: query row t of head h in batch b (key
 * row t for attn_dk and attn_dv). Scores are recomputed where needed, so
 * nothing of size [T, T] is stored. ptrs: out, then the operands. */
static void body_attn(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef row)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	Type q = d->in[0];
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], H = d->attr.attn.heads, Dh = C / H;
	LLVMValueRef scale = cg_real(g, 1 / sqrt((double)Dh)), nT = cg_i64(g, T), nC = cg_i64(g, C);
	LLVMValueRef t = LLVMBuildURem(B, row, nT, ""), bh = LLVMBuildUDiv(B, row, nT, "");
	LLVMValueRef h = LLVMBuildURem(B, bh, cg_i64(g, H), ""), b = LLVMBuildUDiv(B, bh, cg_i64(g, H), "");
	LLVMValueRef head = LLVMBuildMul(B, h, cg_i64(g, Dh), "");
	/* element 0 of row r of this head: (b T + r) C + h Dh */
#define AT(r) LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, b, nT, ""), (r), ""), nC, ""), head, "")
	LLVMValueRef mine = AT(t), out = ptrs[0];
	LLVMValueRef Q = ptrs[1], Kp = ptrs[2], V = ptrs[3];
	/* the rows on the other side: keys 0..t (all when not causal) for a
	 * query row, queries t..T-1 for a key row */
	bool keyrow = d->kind == OP_ATTN_DK || d->kind == OP_ATTN_DV;
	LLVMValueRef from = keyrow && d->attr.attn.causal ? t : cg_i64(g, 0);
	LLVMValueRef to = !keyrow && d->attr.attn.causal ? LLVMBuildAdd(B, t, cg_i64(g, 1), "") : nT;
	if (d->kind != OP_ATTN_STATS) {
		/* every other kind adds its row up in out */
		Loop z = cg_for(k, cg_i64(g, Dh));
		cg_store(k, out, LLVMBuildAdd(B, mine, z.i, ""), cg_real(g, 0));
		cg_for_end(k, &z, cg_i64(g, Dh));
	}
	if (d->kind == OP_ATTENTION || d->kind == OP_ATTN_STATS) {
		/* an online softmax: running max m and sum l of exp(s - m) */
		Loop l = cg_for_from(k, cg_i64(g, 0), 1, to);
		Acc m = cg_acc(k, &l, cg_real(g, -INFINITY)), sum = cg_acc(k, &l, cg_real(g, 0));
		LLVMValueRef s = LLVMBuildFMul(B, dot(k, Q, mine, Kp, AT(l.i), Dh), scale, "");
		LLVMValueRef nm = cg_max(k, m.phi, s);
		LLVMValueRef ns = LLVMBuildFAdd(B, LLVMBuildFMul(B, sum.phi, cg_exp(k, LLVMBuildFSub(B, m.phi, nm, "")), ""),
		                                cg_exp(k, LLVMBuildFSub(B, s, nm, "")), "");
		cg_acc_next(k, &m, nm);
		cg_acc_next(k, &sum, ns);
		cg_for_end(k, &l, to);
		LLVMValueRef mx = cg_acc_result(k, &l, cg_real(g, -INFINITY), nm), tot = cg_acc_result(k, &l, cg_real(g, 0), ns);
		if (d->kind == OP_ATTN_STATS) {
			/* ptrs: out, q, k, dO, O */
			LLVMValueRef two = LLVMBuildMul(B, row, cg_i64(g, 2), "");
			cg_store(k, out, two, LLVMBuildFAdd(B, mx, cg_log(k, tot), ""));
			cg_store(k, out, LLVMBuildAdd(B, two, cg_i64(g, 1), ""), dot(k, ptrs[3], mine, ptrs[4], mine, Dh));
			return;
		}
		Loop l2 = cg_for_from(k, cg_i64(g, 0), 1, to);
		LLVMValueRef kr = AT(l2.i);
		LLVMValueRef p = LLVMBuildFDiv(B, cg_exp(k, LLVMBuildFSub(B, LLVMBuildFMul(B, dot(k, Q, mine, Kp, kr, Dh), scale, ""), mx, "")), tot, "");
		axpy(k, out, mine, p, V, kr, Dh);
		cg_for_end(k, &l2, to);
		return;
	}
	/* gradients: ptrs out, q, k, v, dO, stats; ds = p (dO_i . v_j - D_i) */
	LLVMValueRef dO = ptrs[4], st = ptrs[5];
	Loop l = cg_for_from(k, from, 1, to);
	LLVMValueRef other = AT(l.i);
	LLVMValueRef qi = keyrow ? other : mine, kj = keyrow ? mine : other;
	LLVMValueRef irow = keyrow ? LLVMBuildAdd(B, LLVMBuildMul(B, bh, nT, ""), l.i, "") : row;
	LLVMValueRef two = LLVMBuildMul(B, irow, cg_i64(g, 2), "");
	LLVMValueRef lse = cg_load(k, st, two), D = cg_load(k, st, LLVMBuildAdd(B, two, cg_i64(g, 1), ""));
	LLVMValueRef p = cg_exp(k, LLVMBuildFSub(B, LLVMBuildFMul(B, dot(k, Q, qi, Kp, kj, Dh), scale, ""), lse, ""));
	if (d->kind == OP_ATTN_DV) {
		axpy(k, out, mine, p, dO, qi, Dh);
	} else {
		LLVMValueRef ds = LLVMBuildFMul(B, p, LLVMBuildFSub(B, dot(k, dO, qi, V, kj, Dh), D, ""), "");
		ds = LLVMBuildFMul(B, ds, scale, "");
		if (d->kind == OP_ATTN_DQ)
			axpy(k, out, mine, ds, Kp, kj, Dh);
		else
			axpy(k, out, mine, ds, Q, qi, Dh);
	}
	cg_for_end(k, &l, to);
#undef AT
}

/* ---- attention on tensor cores: bf16 on the GPU ----
 * FlashAttention-2's order of work on mma.m16n8k16 (bf16 operands, f32
 * sums), for attention ops the frontend marked (Attr.attn.flash: bf16,
 * heads of 16 to 128 elements, a multiple of 16; past 64 the tile memory
 * passes PTX's 48 KiB of static shared memory and is the launch's dynamic
 * shared memory, cg_attn_smem, and a thread may take 255 registers, one
 * block an SM). An item is a tile of 128
 * rows of one head, 16 for each warp of the block: query rows for
 * attention (which writes its rows' log-sum-exp as it goes when an
 * attn_lse follows it), attn_lse and attn_dq; key rows for attn_dkv, and
 * attn_dk and attn_dv apart. The other side's rows come through shared
 * memory (rows padded by 8 elements against bank conflicts), 32 at a time
 * for the forward, 16 for attn_dq and the key rows (mma_tile), so that the
 * scores, the accumulators and the warp's own rows stay within 128
 * registers (255 for heads wider than 64); the key-side kernels take the tile's statistics (from
 * attn_delta, in f32) with it. Fragments follow PTX's layout for
 * m16n8k16: a thread is (g, t) = (lane / 4, lane % 4) of its warp; A's
 * four registers hold rows g and g + 8 at columns 2t, 2t + 1 and 2t + 8,
 * 2t + 9; B's two hold rows (k) 2t, 2t + 1 and 2t + 8, 2t + 9 of column
 * (n) g; C's four floats rows g and g + 8 at columns 2t, 2t + 1. A tile of
 * scores in C's layout becomes the A operand of the next product (P V, dS K)
 * in registers, rounded to bf16 as FlashAttention-2 does. On the CPU the
 * SIMT emulator runs the same kernels (DPC_SIMT, runtime/cpu/simt.c). */

/* heads of 16 to MMA_MAX_DH elements, a multiple of 16; a block's static
 * shared memory at most MMA_STATIC_SMEM bytes (PTX's limit), dynamic past it */
enum { MMA_ROWS = 128, MMA_PAD = 8, MMA_MAX_DH = 128, MMA_STATIC_SMEM = 48 << 10 };

bool cg_attn_flash(const Cg *g, const KDesc *d)
{
	return d->attr.attn.flash && (g->cuda || g->simt) && !g->reference && (int)d->kind != OP_ATTN_DELTA;
}

bool cg_attn_mma(const Cg *g, const KDesc *d)
{
	DType dt = d->in[0].dt;
	return cg_attn_flash(g, d) && (dt == DT_BF16 || (dt == DT_F32 && d->attr.attn.tf32));
}

/* f32 on tensor cores as 3xTF32: a product a b as a_hi b_hi + a_hi b_lo +
 * a_lo b_hi, each operand's high part its value rounded to TF32 (cvt.rna)
 * and its low part the rest rounded again, m16n8k8's products. PTX's
 * fragments for m16n8k8 .tf32: A's four registers hold rows g and g + 8
 * at columns t, then t + 4; B's two rows (k) t and t + 4 of column (n) g;
 * C as m16n8k16's. An ldmatrix of 16-bit elements over f32 rows gives each
 * thread the word at row g, column t of each 8 x 4 matrix: A's fragment
 * and, from a tile whose rows are B's columns, B's; from a tile whose rows
 * are B's k (V, dO, Q, K for the second products), each thread loads its
 * two words itself. A tile of scores in C's layout is the A operand of the
 * next product with k permuted, as a sum allows: A's column t is the
 * scores' 2t and t + 4 their 2t + 1, B's rows the same. */
static bool tf32_of(const KDesc *d) { return d->in[0].dt == DT_F32; }

/* a shared row's 16-bit halves: the row's bytes, and 16 bytes against
 * bank conflicts (f32's: dh + 4 words, 4 or 20 past a multiple of the 32
 * banks for heads a multiple of 16, so that both ldmatrix's eight rows and
 * the words of rows 2t apart, column g, fall in 32 different banks) */
static int64_t mma_stride(const KDesc *d)
{
	Type q = d->in[0];
	return q.dim[q.rank - 1] / d->attr.attn.heads * (tf32_of(d) ? 2 : 1) + MMA_PAD;
}


typedef struct {
	K *k;
	const KDesc *d;
	LLVMValueRef *ptrs;
	int64_t T, C, H, dh, stride, tk; /* stride: a shared row's elements; tk: the other side's rows a step */
	LLVMValueRef b, h, bh, warp, g, t, lane;
	LLVMValueRef smem;           /* the block's tile memory, as i32 words (in the shared address space) */
	unsigned space;              /* its address space */
	LLVMValueRef ld_at;          /* this thread's row address for ldmatrix, as bf16 elements (i16); a tile of 8
	                              * rows (nj 1): lanes 8 to 15 and 24 to 31 give rows 0 to 7 again, so that
	                              * matrices 1 and 3 repeat 0 and 2 inside the tile */
	LLVMValueRef ld_warp;        /* the same past the warp's first 16 rows */
	LLVMValueRef ld_tile;        /* the same in the buffer of this step's tiles */
	LLVMValueRef halves;         /* the tile memory as bf16 elements (i16) */
	bool keyside, with_dp;       /* key rows (attn_dkv, attn_dk, attn_dv); dP and dS computed */
	int64_t nj, tile;            /* the tile's n-tiles of 8, and its elements in shared memory */
	LLVMValueRef mine0;          /* this warp's first row */
	LLVMTypeRef mma_t;           /* {float, float, float, float} */
	bool tf32;                   /* f32 as 3xTF32 (tf32_of) */
	LLVMValueRef cur;            /* this step's buffer, in halves from the tile memory's start */
	LLVMValueRef kn;             /* f32: this thread's word of a tile whose rows are B's k: row 2t, column g */
} Mma;

/* the 32-bit words of a block's tile memory: two buffers (sets), each two
 * tiles of the other side's rows and two floats per row of statistics,
 * then the block's own rows (one set, or two where dP is computed) */
static int64_t mma_words(const KDesc *d)
{
	int64_t stride = mma_stride(d), tk = mma_tile(d);
	bool with_dp = d->kind == OP_ATTN_DQ || d->kind == OP_ATTN_DK || d->kind == OP_ATTN_DKV;
	int64_t set = 2 * tk * stride + 4 * tk;
	return (2 * set + (1 + with_dp) * MMA_ROWS * stride) / 2;
}

bool cg_attn_wide(const KDesc *d)
{
	Type q = d->in[0];
	return q.dim[q.rank - 1] / d->attr.attn.heads > 64;
}

int64_t cg_attn_tile_bytes(const KDesc *d) { return 4 * mma_words(d); }

int64_t cg_attn_smem(const KDesc *d)
{
	int64_t bytes = cg_attn_tile_bytes(d);
	return bytes > MMA_STATIC_SMEM ? bytes : 0;
}

static LLVMValueRef i64c(Mma *m, int64_t v) { return cg_i64(m->k->g, v); }
static LLVMValueRef add(Mma *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(m->k->b, a, b, ""); }
static LLVMValueRef mulc(Mma *m, LLVMValueRef a, int64_t c) { return LLVMBuildMul(m->k->b, a, i64c(m, c), ""); }

/* the word at element e of a tensor: of bf16 (e even) two elements, of f32 one */
static LLVMValueRef word_at(Mma *m, LLVMValueRef p, LLVMValueRef e)
{
	LLVMBuilderRef B = m->k->b;
	Cg *g = m->k->g;
	LLVMValueRef w = LLVMBuildBitCast(B, p, g->i32p, "");
	LLVMValueRef i = m->tf32 ? e : LLVMBuildLShr(B, e, i64c(m, 1), "");
	return LLVMBuildLoad2(B, g->i32, LLVMBuildGEP2(B, g->i32, w, &i, 1, ""), "");
}

/* element 0 of row r (of this head, in batch b) in a [.., T, C] tensor */
static LLVMValueRef head_row(Mma *m, LLVMValueRef r)
{
	return add(m, mulc(m, add(m, mulc(m, m->b, m->T), r), m->C), mulc(m, m->h, m->dh));
}

static LLVMValueRef smem_word(Mma *m, LLVMValueRef w)
{
	Cg *g = m->k->g;
	return LLVMBuildGEP2(m->k->b, g->i32, m->smem, &w, 1, "");
}

/* Four 8 x 8 matrices of bf16 from shared memory in one ldmatrix.x4 (.trans:
 * each transposed): matrix i is rows 8 (i & 1).. and columns 8 (i >> 1)..
 * of the 16 x 16 block at element `at` from the thread's row address
 * (Mma.ld_tile, or Mma.ld_warp at the warp's own rows), its word of each in
 * d[i]. Lane l gives the address of row l % 8 + 8 ((l >> 3) & 1), column
 * 8 (l >> 4), a constant offset from one register. */
static void ldmatrix(Mma *m, bool warp, int64_t at, bool trans, LLVMValueRef *d)
{
	LLVMBuilderRef B = m->k->b;
	Cg *g = m->k->g;
	LLVMTypeRef i16 = LLVMInt16TypeInContext(g->ctx), i32s[4] = {g->i32, g->i32, g->i32, g->i32};
	LLVMValueRef off = i64c(m, at);
	LLVMValueRef p = LLVMBuildGEP2(B, i16, warp ? m->ld_warp : m->ld_tile, &off, 1, "");
	p = LLVMBuildBitCast(B, p, LLVMPointerType(g->i8, m->space), "");
	/* the name carries the pointer's type (shared: p3i8) */
	const char *name = ar_printf("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4%s.b16.p%ui8", trans ? ".trans" : "", m->space);
	LLVMValueRef r = cg_intrinsic(m->k, name, LLVMStructTypeInContext(g->ctx, i32s, 4, 0), &p, 1);
	for (int i = 0; i < 4; i++)
		d[i] = LLVMBuildExtractValue(B, r, (unsigned)i, "");
}

/* A fragment of this warp's 16 rows and columns c0.. of the block's rows in
 * shared memory at element base: the four matrices are a0 to a3 */
static void frag_a_shared(Mma *m, int64_t base, int64_t c0, LLVMValueRef *a)
{
	ldmatrix(m, true, base + c0, false, a);
}

/* B fragments for columns n0.. and n0 + 8.. from a shared tile whose rows
 * are B's columns (n) and whose elements along a row are B's k (k0..): b
 * for n0, then b2 for n0 + 8 */
static void frag_b_rows(Mma *m, int64_t base, int64_t n0, int64_t k0, LLVMValueRef *b, LLVMValueRef *b2)
{
	LLVMValueRef d[4];
	ldmatrix(m, false, base + n0 * m->stride + k0, false, d);
	b[0] = d[0], b[1] = d[2], b2[0] = d[1], b2[1] = d[3];
}

/* f32: the B fragment (two words) for columns n0.. from a shared tile at
 * base (halves) whose rows are B's k (k0.., 8 of them, permuted as the
 * scores' columns are: rows 2t and 2t + 1) and whose elements are B's
 * columns */
static void frag_b_cols_f32(Mma *m, int64_t base, int64_t k0, int64_t n0, LLVMValueRef *b)
{
	LLVMBuilderRef B = m->k->b;
	LLVMValueRef at = add(m, LLVMBuildLShr(B, m->cur, i64c(m, 1), ""), add(m, m->kn, i64c(m, (base + k0 * m->stride) / 2 + n0)));
	for (int i = 0; i < 2; i++)
		b[i] = LLVMBuildLoad2(B, m->k->g->i32, smem_word(m, add(m, at, i64c(m, i * m->stride / 2))), "");
}

/* B fragments for columns n0.. and n0 + 8.. from a shared tile whose rows
 * are B's k (k0..) and whose elements are B's columns: the transposed load */
static void frag_b_cols(Mma *m, int64_t base, int64_t k0, int64_t n0, LLVMValueRef *b, LLVMValueRef *b2)
{
	LLVMValueRef d[4];
	ldmatrix(m, false, base + k0 * m->stride + n0, true, d);
	b[0] = d[0], b[1] = d[1], b2[0] = d[2], b2[1] = d[3];
}

/* e^x as 2^(x log2 e) by ex2.approx.f32 (relative error about 2^-22, far
 * below bf16's): inline, where libdevice's expf is a call that costs
 * registers in these kernels; -inf gives 0 */
static LLVMValueRef ex2(Mma *m, LLVMValueRef x)
{
	LLVMValueRef y = LLVMBuildFMul(m->k->b, x, cg_real(m->k->g, 1.4426950408889634), "");
	return cg_intrinsic(m->k, "llvm.nvvm.ex2.approx.f", m->k->g->real, &y, 1);
}

/* c += a b, the four floats in place: bf16's m16n8k16, or f32's as
 * 3xTF32 (a and b each their n high parts, then their n low parts) */
static void mma_one(Mma *m, const char *name, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *c)
{
	LLVMValueRef args[10] = {a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], c[2], c[3]};
	LLVMValueRef r = cg_intrinsic(m->k, name, m->mma_t, args, 10);
	for (int i = 0; i < 4; i++)
		c[i] = LLVMBuildExtractValue(m->k->b, r, (unsigned)i, "");
}

static void mma(Mma *m, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *c)
{
	if (!m->tf32) {
		mma_one(m, "llvm.nvvm.mma.m16n8k16.row.col.bf16", a, b, c);
		return;
	}
	/* the small products first, so that the large one's rounding comes last */
	static const char *tf = "llvm.nvvm.mma.m16n8k8.row.col.tf32";
	mma_one(m, tf, a + 4, b, c);
	mma_one(m, tf, a, b + 2, c);
	mma_one(m, tf, a, b, c);
}

/* f32: the TF32 high parts of n words (f32 bits) in v[0..n), their low parts in v[n..2n) */
static void split(Mma *m, LLVMValueRef *v, int n)
{
	LLVMBuilderRef B = m->k->b;
	Cg *g = m->k->g;
	for (int i = 0; i < n; i++) {
		LLVMValueRef x = LLVMBuildBitCast(B, v[i], g->real, "");
		LLVMValueRef hi = cg_intrinsic(m->k, "llvm.nvvm.f2tf32.rna", g->i32, &x, 1);
		LLVMValueRef rest = LLVMBuildFSub(B, x, LLVMBuildBitCast(B, hi, g->real, ""), "");
		v[i] = hi;
		v[n + i] = cg_intrinsic(m->k, "llvm.nvvm.f2tf32.rna", g->i32, &rest, 1);
	}
}

/* two f32 to a word of bf16, rounded to nearest even (the lower first) */
static LLVMValueRef pack(Mma *m, LLVMValueRef lo, LLVMValueRef hi)
{
	LLVMBuilderRef B = m->k->b;
	Cg *g = m->k->g;
	LLVMValueRef h[2] = {lo, hi};
	for (int i = 0; i < 2; i++) {
		LLVMValueRef w = LLVMBuildBitCast(B, h[i], g->i32, "");
		LLVMValueRef odd = LLVMBuildAnd(B, LLVMBuildLShr(B, w, LLVMConstInt(g->i32, 16, 0), ""), LLVMConstInt(g->i32, 1, 0), "");
		w = LLVMBuildAdd(B, w, LLVMBuildAdd(B, odd, LLVMConstInt(g->i32, 0x7fff, 0), ""), "");
		h[i] = LLVMBuildLShr(B, w, LLVMConstInt(g->i32, 16, 0), "");
	}
	return LLVMBuildOr(B, h[0], LLVMBuildShl(B, h[1], LLVMConstInt(g->i32, 16, 0), ""), "");
}

/* the A fragments of columns 16kc.. of a 16-row tile held as C fragments
 * (columns 8j..8j+7 in s[j]); f32: of columns 8kc.., permuted (tf32_of),
 * split (a[0..8)) */
static void as_a(Mma *m, LLVMValueRef s[8][4], int kc, LLVMValueRef *a)
{
	if (m->tf32) {
		static const int from[4] = {0, 2, 1, 3};
		for (int i = 0; i < 4; i++)
			a[i] = LLVMBuildBitCast(m->k->b, s[kc][from[i]], m->k->g->i32, "");
		split(m, a, 4);
		return;
	}
	a[0] = pack(m, s[2 * kc][0], s[2 * kc][1]);
	a[1] = pack(m, s[2 * kc][2], s[2 * kc][3]);
	a[2] = pack(m, s[2 * kc + 1][0], s[2 * kc + 1][1]);
	a[3] = pack(m, s[2 * kc + 1][2], s[2 * kc + 1][3]);
}

/* the value of the quad's four threads combined (max or sum), in each */
static LLVMValueRef quad(Mma *m, LLVMValueRef v, bool max)
{
	Cg *g = m->k->g;
	for (int mask = 1; mask <= 2; mask *= 2) {
		LLVMValueRef args[4] = {LLVMConstInt(g->i32, 0xffffffffu, 0), v, LLVMConstInt(g->i32, (unsigned)mask, 0), LLVMConstInt(g->i32, 31, 0)};
		LLVMValueRef o = cg_intrinsic(m->k, "llvm.nvvm.shfl.sync.bfly.f32", g->real, args, 4);
		v = max ? cg_max(m->k, v, o) : LLVMBuildFAdd(m->k->b, v, o, "");
	}
	return v;
}

static void barrier_all(Mma *m)
{
	cg_intrinsic(m->k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(m->k->g->ctx), NULL, 0);
}

/* rows r0.. (n) of tensor p into the shared tile at element base; past T zeros */
static void load_tile(Mma *m, LLVMValueRef p, LLVMValueRef r0, int64_t base, int64_t n)
{
	K *k = m->k;
	LLVMBuilderRef B = k->b;
	Cg *g = k->g;
	int64_t per = m->tf32 ? m->dh : m->dh / 2, words = n * per; /* a row's words */
	Loop l = cg_for_from(k, m->lane, CG_BLOCK, i64c(m, words));
	LLVMValueRef row = LLVMBuildUDiv(B, l.i, i64c(m, per), ""), col = LLVMBuildURem(B, l.i, i64c(m, per), "");
	LLVMValueRef r = add(m, r0, row), in = LLVMBuildICmp(B, LLVMIntSLT, r, i64c(m, m->T), "");
	LLVMValueRef e = add(m, head_row(m, LLVMBuildSelect(B, in, r, i64c(m, 0), "")), m->tf32 ? col : mulc(m, col, 2));
	LLVMValueRef v = LLVMBuildSelect(B, in, word_at(m, p, e), LLVMConstInt(g->i32, 0, 0), "");
	LLVMBuildStore(B, v, smem_word(m, add(m, i64c(m, base / 2), add(m, mulc(m, row, m->stride / 2), col))));
	cg_for_end(k, &l, i64c(m, words));
}

/* f32 element e of an argument word (the statistics, a log-sum-exp) */
static LLVMValueRef f32_at(Mma *m, LLVMValueRef word, LLVMValueRef e)
{
	LLVMBuilderRef B = m->k->b;
	LLVMValueRef p = LLVMBuildIntToPtr(B, word, LLVMPointerType(m->k->g->real, 0), "");
	return LLVMBuildGEP2(B, m->k->g->real, p, &e, 1, "");
}

/* ---- the tiles' asynchronous copies (cp.async, 16 bytes each) ---- */
typedef struct {
	LLVMValueRef first, second, stats; /* the tensors a tile's rows come from (second, stats: or NULL) */
	int64_t tile;                      /* a tile's elements in shared memory */
} Tiles;

static void async_commit(Mma *m)
{
	cg_intrinsic(m->k, "llvm.nvvm.cp.async.commit.group", LLVMVoidTypeInContext(m->k->g->ctx), NULL, 0);
}

static void async_wait(Mma *m, int n)
{
	LLVMValueRef a = LLVMConstInt(m->k->g->i32, (unsigned)n, 0);
	cg_intrinsic(m->k, "llvm.nvvm.cp.async.wait.group", LLVMVoidTypeInContext(m->k->g->ctx), &a, 1);
}

/* rows r0.. (m->tk) of tensor p into shared memory at element `at` (a
 * value): 16 bytes a copy; rows at or past T zeros, stored at once */
static void issue_tile(Mma *m, LLVMValueRef p, LLVMValueRef r0, LLVMValueRef at)
{
	K *k = m->k;
	LLVMBuilderRef B = k->b;
	Cg *g = k->g;
	LLVMTypeRef i16 = LLVMInt16TypeInContext(g->ctx), v4 = LLVMVectorType(g->i32, 4);
	LLVMTypeRef et = m->tf32 ? g->real : i16; /* the tensor's element */
	int64_t per = m->dh / (m->tf32 ? 4 : 8), n = m->tk * per; /* 16-byte copies a row */
	Loop l = cg_for_from(k, m->lane, CG_BLOCK, i64c(m, n));
	LLVMValueRef part = LLVMBuildURem(B, l.i, i64c(m, per), "");
	LLVMValueRef row = LLVMBuildUDiv(B, l.i, i64c(m, per), ""), col = mulc(m, part, 8); /* halves */
	LLVMValueRef r = add(m, r0, row), e = add(m, at, add(m, mulc(m, row, m->stride), col));
	LLVMValueRef dst = LLVMBuildGEP2(B, i16, m->halves, &e, 1, "");
	LLVMBasicBlockRef copy = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "copy");
	LLVMBasicBlockRef zero = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "zero");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "copied");
	LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, r, i64c(m, m->T), ""), copy, zero);
	LLVMPositionBuilderAtEnd(B, copy);
	LLVMValueRef x = add(m, head_row(m, r), m->tf32 ? mulc(m, part, 4) : col);
	LLVMValueRef ep = LLVMBuildBitCast(B, p, LLVMPointerType(et, 0), "");
	LLVMValueRef src = LLVMBuildBitCast(B, LLVMBuildGEP2(B, et, ep, &x, 1, ""), g->i8p, "");
	if (m->space) /* the generic address of global memory, in its own space */
		src = LLVMBuildAddrSpaceCast(B, src, LLVMPointerType(g->i8, 1), "");
	LLVMValueRef args[2] = {LLVMBuildBitCast(B, dst, LLVMPointerType(g->i8, m->space), ""), src};
	cg_intrinsic(k, "llvm.nvvm.cp.async.cg.shared.global.16", LLVMVoidTypeInContext(g->ctx), args, 2);
	LLVMBuildBr(B, join);
	LLVMPositionBuilderAtEnd(B, zero);
	LLVMValueRef z = LLVMBuildStore(B, LLVMConstNull(v4), LLVMBuildBitCast(B, dst, LLVMPointerType(v4, m->space), ""));
	LLVMSetAlignment(z, 16);
	LLVMBuildBr(B, join);
	LLVMPositionBuilderAtEnd(B, join);
	cg_for_end(k, &l, i64c(m, n));
}

/* the tiles of rows r0.. into the buffer at element `at`, and for key rows
 * the queries' statistics after them (f32, plain loads and stores) */
static void issue_tiles(Mma *m, const Tiles *t, LLVMValueRef r0, LLVMValueRef at)
{
	K *k = m->k;
	LLVMBuilderRef B = k->b;
	Cg *g = k->g;
	issue_tile(m, t->first, r0, at);
	if (t->second)
		issue_tile(m, t->second, r0, add(m, at, i64c(m, t->tile)));
	if (!t->stats)
		return;
	LLVMTypeRef i16 = LLVMInt16TypeInContext(g->ctx);
	LLVMValueRef st0 = add(m, at, i64c(m, 2 * t->tile));
	LLVMValueRef statp = LLVMBuildBitCast(B, LLVMBuildGEP2(B, i16, m->halves, &st0, 1, ""), LLVMPointerType(g->real, m->space), "");
	LLVMBasicBlockRef j = cg_if(k, LLVMBuildICmp(B, LLVMIntULT, m->lane, i64c(m, m->tk), ""));
	LLVMValueRef r = add(m, r0, m->lane), in = LLVMBuildICmp(B, LLVMIntSLT, r, i64c(m, m->T), "");
	LLVMValueRef e = mulc(m, add(m, mulc(m, m->bh, m->T), LLVMBuildSelect(B, in, r, i64c(m, 0), "")), 2);
	for (int i = 0; i < 2; i++)
		wr_c(k, statp, add(m, mulc(m, m->lane, 2), i64c(m, i)), LLVMBuildLoad2(B, g->real, f32_at(m, t->stats, add(m, e, i64c(m, i))), ""));
	cg_end_if(k, j);
}

/* acc[n] += a B for the tile's columns n, B from the shared tile at base (its rows are B's k) */
static void acc_mma(Mma *m, LLVMValueRef acc, LLVMValueRef s[8][4], int64_t base)
{
	K *k = m->k;
	/* f32: the tile's keys 8 at a time */
	for (int c = 0; m->tf32 && c < m->tk / 8; c++) {
		LLVMValueRef a[8];
		as_a(m, s, c, a);
		for (int n = 0; n < m->dh / 8; n++) {
			LLVMValueRef bf[4], cc[4];
			frag_b_cols_f32(m, base, 8 * c, 8 * n, bf);
			split(m, bf, 2);
			for (int i = 0; i < 4; i++)
				cc[i] = rd_c(k, acc, i64c(m, 4 * n + i));
			mma(m, a, bf, cc);
			for (int i = 0; i < 4; i++)
				wr_c(k, acc, i64c(m, 4 * n + i), cc[i]);
		}
	}
	for (int c = 0; !m->tf32 && c < m->tk / 16; c++) {
		LLVMValueRef a[4];
		as_a(m, s, c, a);
		for (int n = 0; n < m->dh / 8; n += 2) {
			LLVMValueRef bf[2][2], cc[4];
			frag_b_cols(m, base, 16 * c, 8 * n, bf[0], bf[1]);
			for (int h = 0; h < 2; h++) {
				for (int i = 0; i < 4; i++)
					cc[i] = rd_c(k, acc, i64c(m, 4 * (n + h) + i));
				mma(m, a, bf[h], cc);
				for (int i = 0; i < 4; i++)
					wr_c(k, acc, i64c(m, 4 * (n + h) + i), cc[i]);
			}
		}
	}
}

/* the warp's rows of acc (times inv) into the tensor at word `to`: rows g and g + 8 below T */
static void store_rows(Mma *m, LLVMValueRef to, LLVMValueRef acc, LLVMValueRef mine0, int r, LLVMValueRef inv)
{
	K *k = m->k;
	LLVMBuilderRef B = k->b;
	LLVMValueRef row = add(m, mine0, add(m, m->g, i64c(m, 8 * r)));
	LLVMValueRef e = head_row(m, row), p = LLVMBuildIntToPtr(B, to, k->g->realp, "");
	for (int n = 0; n < m->dh / 8; n++)
		for (int i = 0; i < 2; i++) {
			LLVMValueRef v = rd_c(k, acc, i64c(m, 4 * n + 2 * r + i));
			cg_store(k, p, add(m, e, add(m, mulc(m, m->t, 2), i64c(m, 8 * n + i))), inv ? LLVMBuildFMul(B, v, inv, "") : v);
		}
}

/* f32: out += the warp's 16 rows at abase times the tile's rows at tbase
 * (transposed), in steps of 8 of k (16 halves), as 3xTF32 */
static void scores_tf32(Mma *m, int64_t abase, int64_t tbase, LLVMValueRef out[8][4])
{
	for (int c = 0; c < m->dh / 8; c++) {
		LLVMValueRef a[8];
		frag_a_shared(m, abase, 16 * c, a);
		split(m, a, 4);
		for (int j = 0; j < m->nj; j += 2) {
			/* the n-tiles j and j + 1, where the tile has them (a tile of 8 rows: j's alone, Mma.ld_at) */
			LLVMValueRef bf[2][4];
			frag_b_rows(m, tbase, 8 * j, 16 * c, bf[0], bf[1]);
			for (int h = 0; h < 2 && j + h < m->nj; h++) {
				split(m, bf[h], 2);
				mma(m, a, bf[h], out[j + h]);
			}
		}
	}
}

/* the scores of the warp's 16 rows against the tile's: S = own x other^T,
 * and dP = own2 x second^T where the kind needs it */
static void scores(Mma *m, int64_t abase, int64_t a2base, LLVMValueRef sc[8][4], LLVMValueRef dp[8][4])
{
	LLVMValueRef own[MMA_MAX_DH / 16][4], own2[MMA_MAX_DH / 16][4], zero = cg_real(m->k->g, 0);
	for (int j = 0; j < m->nj; j++)
		for (int i = 0; i < 4; i++)
			sc[j][i] = dp[j][i] = zero;
	if (m->tf32) {
		/* S, then dP: the split fragments of one product at a time, within 128 registers */
		scores_tf32(m, abase, 0, sc);
		if (m->with_dp)
			scores_tf32(m, a2base, m->tile, dp);
		return;
	}
	for (int c = 0; c < m->dh / 16; c++) {
		frag_a_shared(m, abase, 16 * c, own[c]);
		if (m->with_dp)
			frag_a_shared(m, a2base, 16 * c, own2[c]);
		for (int j = 0; j < m->nj; j += 2) {
			LLVMValueRef bf[2], bf2[2];
			frag_b_rows(m, 0, 8 * j, 16 * c, bf, bf2);
			mma(m, own[c], bf, sc[j]);
			mma(m, own[c], bf2, sc[j + 1]);
			if (m->with_dp) {
				frag_b_rows(m, m->tile, 8 * j, 16 * c, bf, bf2);
				mma(m, own2[c], bf, dp[j]);
				mma(m, own2[c], bf2, dp[j + 1]);
			}
		}
	}
}

/* scale and mask: rows g, g + 8 of this warp; columns 8j + 2t (+1) of the
 * tile of the other side's rows from o. The other side's row o + 2t + co
 * and this row mine0 + g + cm, compared through two 32-bit values and
 * constants: no register for each of the tile's places */
static void mask(Mma *m, LLVMValueRef o, LLVMValueRef sc[8][4])
{
	LLVMBuilderRef B = m->k->b;
	Cg *g = m->k->g;
	LLVMTypeRef i32 = g->i32;
	LLVMValueRef scale = cg_real(g, 1 / sqrt((double)m->dh)), ninf = cg_real(g, -INFINITY);
	LLVMValueRef o2t = LLVMBuildTrunc(B, add(m, o, mulc(m, m->t, 2)), i32, "");
	LLVMValueRef gap = LLVMBuildSub(B, o2t, LLVMBuildTrunc(B, add(m, m->mine0, m->g), i32, ""), ""); /* other - mine, less co - cm */
	for (int j = 0; j < m->nj; j++)
		for (int i = 0; i < 4; i++) {
			int64_t co = 8 * j + (i & 1), cm = i & 2 ? 8 : 0;
			LLVMValueRef ok = LLVMBuildICmp(B, LLVMIntSLT, o2t, LLVMConstInt(i32, (unsigned long long)(m->T - co), 1), "");
			if (m->d->attr.attn.causal) /* other <= mine (query rows), other >= mine (key rows) */
				ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, m->keyside ? LLVMIntSGE : LLVMIntSLE, gap,
				                                       LLVMConstInt(i32, (unsigned long long)(cm - co), 1), ""), "");
			sc[j][i] = LLVMBuildSelect(B, ok, LLVMBuildFMul(B, sc[j][i], scale, ""), ninf, "");
		}
}

/* the forward's online softmax: each row's running max (mrow) and sum
 * (lrow), P in sc, and the output so far (pacc, or NULL) rescaled */
static void online_softmax(Mma *m, LLVMValueRef sc[8][4], LLVMValueRef mrow, LLVMValueRef lrow, LLVMValueRef pacc)
{
	K *k = m->k;
	LLVMBuilderRef B = k->b;
	LLVMValueRef ninf = cg_real(k->g, -INFINITY), zero = cg_real(k->g, 0);
	for (int r = 0; r < 2; r++) {
		LLVMValueRef mx = rd_c(k, mrow, i64c(m, r));
		for (int j = 0; j < m->nj; j++)
			for (int i = 2 * r; i < 2 * r + 2; i++)
				mx = cg_max(k, mx, sc[j][i]);
		mx = quad(m, mx, true);
		/* a row that has seen only masked keys keeps max -inf: nothing to rescale */
		LLVMValueRef none = LLVMBuildFCmp(B, LLVMRealOEQ, mx, ninf, "");
		LLVMValueRef base = LLVMBuildSelect(B, none, zero, mx, "");
		LLVMValueRef shrink = ex2(m, LLVMBuildFSub(B, rd_c(k, mrow, i64c(m, r)), base, ""));
		LLVMValueRef sum = zero;
		for (int j = 0; j < m->nj; j++)
			for (int i = 2 * r; i < 2 * r + 2; i++) {
				sc[j][i] = ex2(m, LLVMBuildFSub(B, sc[j][i], base, ""));
				sum = LLVMBuildFAdd(B, sum, sc[j][i], "");
			}
		wr_c(k, lrow, i64c(m, r), LLVMBuildFAdd(B, LLVMBuildFMul(B, rd_c(k, lrow, i64c(m, r)), shrink, ""), sum, ""));
		wr_c(k, mrow, i64c(m, r), mx);
		for (int n = 0; pacc && n < m->dh / 8; n++)
			for (int i = 2 * r; i < 2 * r + 2; i++)
				wr_c(k, pacc, i64c(m, 4 * n + i), LLVMBuildFMul(B, rd_c(k, pacc, i64c(m, 4 * n + i)), shrink, ""));
	}
}

/* the adjoint's P = exp(S - lse) in sc and dS = P (dP - D) / sqrt(Dh) in
 * dp: each query's statistics, this warp's rows' (st) or the tile's
 * (stat_at, the thread's 4t) */
static void probabilities(Mma *m, LLVMValueRef sc[8][4], LLVMValueRef dp[8][4], LLVMValueRef stat_at, LLVMValueRef st)
{
	K *k = m->k;
	LLVMBuilderRef B = k->b;
	LLVMValueRef scale = cg_real(k->g, 1 / sqrt((double)m->dh));
	for (int j = 0; j < m->nj; j++)
		for (int i = 0; i < 4; i++) {
			LLVMValueRef lse, dd;
			if (m->keyside) { /* column 2t + 8j + (i & 1) */
				lse = rd_c(k, stat_at, i64c(m, 2 * (8 * j + (i & 1))));
				dd = rd_c(k, stat_at, i64c(m, 2 * (8 * j + (i & 1)) + 1));
			} else {
				lse = rd_c(k, st, i64c(m, i & 2 ? 2 : 0));
				dd = rd_c(k, st, i64c(m, i & 2 ? 3 : 1));
			}
			sc[j][i] = ex2(m, LLVMBuildFSub(B, sc[j][i], lse, ""));
			if (m->with_dp)
				dp[j][i] = LLVMBuildFMul(B, LLVMBuildFMul(B, sc[j][i], LLVMBuildFSub(B, dp[j][i], dd, ""), ""), scale, "");
		}
}

static void body_attn_mma(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef item)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	Type q = d->in[0];
	OpKind kind = d->kind;
	Mma mm;
	memset(&mm, 0, sizeof mm);
	Mma *m = &mm;
	m->k = k, m->d = d, m->ptrs = ptrs;
	m->T = q.dim[q.rank - 2], m->C = q.dim[q.rank - 1], m->H = d->attr.attn.heads;
	m->dh = m->C / m->H;
	m->stride = mma_stride(d);
	m->tf32 = tf32_of(d);
	m->tk = mma_tile(d);
	LLVMTypeRef f4[4] = {g->real, g->real, g->real, g->real};
	m->mma_t = LLVMStructTypeInContext(g->ctx, f4, 4, 0);
	int64_t nt = (m->T + MMA_ROWS - 1) / MMA_ROWS, nd = m->dh / 8, nj = m->tk / 8, tile = m->tk * m->stride;
	m->bh = LLVMBuildUDiv(B, item, i64c(m, nt), "");
	LLVMValueRef row0 = mulc(m, LLVMBuildURem(B, item, i64c(m, nt), ""), MMA_ROWS);
	m->h = LLVMBuildURem(B, m->bh, i64c(m, m->H), "");
	m->b = LLVMBuildUDiv(B, m->bh, i64c(m, m->H), "");
	m->lane = k->lane;
	m->warp = LLVMBuildLShr(B, k->lane, i64c(m, 5), "");
	LLVMValueRef l32 = LLVMBuildAnd(B, k->lane, i64c(m, 31), "");
	m->g = LLVMBuildLShr(B, l32, i64c(m, 2), "");
	m->t = LLVMBuildAnd(B, l32, i64c(m, 3), "");
	m->kn = add(m, mulc(m, m->t, m->stride), m->g); /* row 2t's word g: (2t) stride / 2 + g */
	/* two buffers, each two tiles of shared rows and two floats per row of
	 * statistics (set halves), then the block's own rows (one or two sets) */
	bool keyside = kind == OP_ATTN_DK || kind == OP_ATTN_DV || kind == OP_ATTN_DKV, causal = d->attr.attn.causal;
	bool with_dp = kind == OP_ATTN_DQ || kind == OP_ATTN_DK || kind == OP_ATTN_DKV; /* dP, then dS */
	m->keyside = keyside, m->with_dp = with_dp, m->nj = nj, m->tile = tile;
	int64_t set = 2 * tile + 4 * m->tk, words = mma_words(d);
	/* named by its size: a module's kernels share one global per name, and
	 * heads of another width need another size; past MMA_STATIC_SMEM the
	 * GPU's is the launch's dynamic shared memory (cg_attn_smem), the SIMT
	 * emulator's a thread-local array as always */
	char name[48];
	snprintf(name, sizeof name, "dp_tile_mma_%lld", (long long)words);
	LLVMValueRef s = g->gpu && cg_attn_smem(d) ? cg_dynamic_shared(g) : cg_shared_array(g, name, LLVMArrayType(g->i32, (unsigned)words));
	m->space = g->gpu ? 3 : 0;
	m->smem = LLVMBuildBitCast(B, s, LLVMPointerType(g->i32, m->space), "");
	LLVMTypeRef i16 = LLVMInt16TypeInContext(g->ctx);
	LLVMValueRef halves = LLVMBuildBitCast(B, m->smem, LLVMPointerType(i16, m->space), "");
	LLVMValueRef lr = add(m, LLVMBuildAnd(B, l32, i64c(m, 7), ""), mulc(m, LLVMBuildAnd(B, LLVMBuildLShr(B, l32, i64c(m, 3), ""), i64c(m, 1), ""), 8));
	LLVMValueRef col = mulc(m, LLVMBuildLShr(B, l32, i64c(m, 4), ""), 8);
	LLVMValueRef e0 = add(m, mulc(m, lr, m->stride), col);
	LLVMValueRef w0 = mulc(m, m->warp, 16 * m->stride);
	m->ld_warp = LLVMBuildGEP2(B, i16, LLVMBuildGEP2(B, i16, halves, &e0, 1, ""), &w0, 1, "");
	if (nj == 1)
		e0 = add(m, mulc(m, LLVMBuildAnd(B, l32, i64c(m, 7), ""), m->stride), col);
	m->ld_at = LLVMBuildGEP2(B, i16, halves, &e0, 1, "");
	m->halves = halves;
	bool fwd = kind == OP_ATTENTION || kind == OP_ATTN_LSE;
	bool p_acc = kind == OP_ATTENTION || kind == OP_ATTN_DV || kind == OP_ATTN_DKV;  /* += P V, P^T dO */
	bool s_acc = with_dp;                                                           /* += dS K, dS^T Q */
	LLVMValueRef lse_out = kind == OP_ATTENTION && d->mode ? args[4] : kind == OP_ATTN_LSE ? args[0] : NULL;
	LLVMValueRef stats = fwd ? NULL : args[5];
	LLVMValueRef mine0 = m->mine0 = add(m, row0, mulc(m, m->warp, 16));
	LLVMValueRef ninf = cg_real(g, -INFINITY), zero = cg_real(g, 0);
	/* the block's own rows, the A operands: Q, and dO for dP (K, and V for
	 * dP, for key rows), in shared memory after the tiles and their
	 * statistics, read at each step: in registers they would leave too
	 * few for the scores and the accumulators */
	int64_t abase = 2 * set, a2base = abase + MMA_ROWS * m->stride; /* elements */
	load_tile(m, keyside ? ptrs[2] : ptrs[1], row0, abase, MMA_ROWS);
	if (with_dp)
		load_tile(m, keyside ? ptrs[3] : ptrs[4], row0, a2base, MMA_ROWS);
	/* per thread: its two rows' (g, g + 8) running max and sum, or statistics, and 16 x Dh accumulators */
	LLVMValueRef pacc = scratch(k, nd * 4), sacc = scratch(k, nd * 4), mrow = scratch(k, 2), lrow = scratch(k, 2), st = scratch(k, 4);
	for (int i = 0; i < nd * 4; i++) {
		wr_c(k, pacc, i64c(m, i), zero);
		wr_c(k, sacc, i64c(m, i), zero);
	}
	for (int i = 0; i < 2; i++) {
		wr_c(k, mrow, i64c(m, i), ninf);
		wr_c(k, lrow, i64c(m, i), zero);
		if (kind == OP_ATTN_DQ) {
			/* the rows' log-sum-exp and dO . O */
			LLVMValueRef r = add(m, mine0, add(m, m->g, i64c(m, 8 * i)));
			LLVMValueRef in = LLVMBuildICmp(B, LLVMIntSLT, r, i64c(m, m->T), "");
			LLVMValueRef e = mulc(m, add(m, mulc(m, m->bh, m->T), LLVMBuildSelect(B, in, r, i64c(m, 0), "")), 2);
			for (int j = 0; j < 2; j++)
				wr_c(k, st, i64c(m, 2 * i + j), LLVMBuildLoad2(B, g->real, f32_at(m, stats, add(m, e, i64c(m, j))), ""));
		}
	}
	/* the other side's rows: keys up to the tile's last query row (all when
	 * not causal), or queries from the tile's first key row */
	LLVMValueRef ostart = keyside && causal ? row0 : i64c(m, 0);
	LLVMValueRef oend = !keyside && causal ? LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, add(m, row0, i64c(m, MMA_ROWS)), i64c(m, m->T), ""),
	                                                         add(m, row0, i64c(m, MMA_ROWS)), i64c(m, m->T), "")
	                                       : i64c(m, m->T);
	/* the tiles of the other side's rows in two buffers: while the block
	 * computes with one, the next tile comes into the other by cp.async.
	 * Query rows: K, then V (the forward) or V (attn_dq); key rows: Q, then
	 * dO, and the queries' statistics */
	Tiles tl = {keyside ? ptrs[1] : ptrs[2], kind == OP_ATTN_LSE ? NULL : keyside ? ptrs[4] : ptrs[3], keyside ? stats : NULL, tile};
	issue_tiles(m, &tl, ostart, i64c(m, 0));
	async_commit(m);
	Loop o = cg_for_from(k, ostart, m->tk, oend);
	LLVMValueRef which = LLVMBuildAnd(B, LLVMBuildUDiv(B, LLVMBuildSub(B, o.i, ostart, ""), i64c(m, m->tk), ""), i64c(m, 1), "");
	LLVMValueRef cur = mulc(m, which, set), nxt = mulc(m, LLVMBuildXor(B, which, i64c(m, 1), ""), set);
	/* every thread is done with the buffer the next tile goes to (this one's, two steps ago) */
	barrier_all(m);
	LLVMValueRef after = add(m, o.i, i64c(m, m->tk));
	LLVMBasicBlockRef more = cg_if(k, LLVMBuildICmp(B, LLVMIntSLT, after, oend, ""));
	issue_tiles(m, &tl, after, nxt);
	cg_end_if(k, more);
	/* this tile's copies made (every group but the newest), then everyone's */
	async_commit(m);
	async_wait(m, 1);
	barrier_all(m);
	m->ld_tile = LLVMBuildGEP2(B, i16, m->ld_at, &cur, 1, "");
	m->cur = cur;
	LLVMValueRef st0 = add(m, cur, i64c(m, 2 * tile));
	LLVMValueRef statp = LLVMBuildBitCast(B, LLVMBuildGEP2(B, i16, halves, &st0, 1, ""), LLVMPointerType(g->real, m->space), "");
	LLVMValueRef stat_at = at_c(k, statp, mulc(m, m->t, 4));
	LLVMValueRef sc[8][4], dp[8][4];
	/* a causal mask that hides the whole tile from the warp's 16 rows (keys past its last query row, queries
	 * before its first key row) leaves its sums as they are: the warp skips the step */
	LLVMBasicBlockRef seen = NULL;
	if (causal) {
		LLVMValueRef hidden = keyside ? LLVMBuildICmp(B, LLVMIntSLT, add(m, o.i, i64c(m, m->tk - 1)), mine0, "")
		                              : LLVMBuildICmp(B, LLVMIntSGT, o.i, add(m, mine0, i64c(m, 15)), "");
		seen = cg_if(k, LLVMBuildNot(B, hidden, ""));
	}
	/* pacc += P V (attention), P^T dO (key rows: the second tile); sacc += dS K (attn_dq), dS^T Q (key rows: the first) */
	scores(m, abase, a2base, sc, dp);
	mask(m, o.i, sc);
	if (fwd)
		online_softmax(m, sc, mrow, lrow, p_acc ? pacc : NULL);
	else
		probabilities(m, sc, dp, stat_at, st);
	if (p_acc)
		acc_mma(m, pacc, sc, tile);
	if (s_acc)
		acc_mma(m, sacc, dp, 0);
	if (seen)
		cg_end_if(k, seen);
	cg_for_end(k, &o, oend);
	async_wait(m, 0); /* the last group is empty: nothing left in flight */
	if (g->item_slot) {
		/* the work item read back, and what the rows' places come from made again from it: kept across
		 * the loop they took registers the loop wanted (ptxas spilled at some shapes) */
		LLVMValueRef again = LLVMBuildLoad2(B, g->i64, g->item_slot, "");
		LLVMSetVolatile(again, 1);
		m->bh = LLVMBuildUDiv(B, again, i64c(m, nt), "");
		m->h = LLVMBuildURem(B, m->bh, i64c(m, m->H), "");
		m->b = LLVMBuildUDiv(B, m->bh, i64c(m, m->H), "");
		row0 = mulc(m, LLVMBuildURem(B, again, i64c(m, nt), ""), MMA_ROWS);
		mine0 = m->mine0 = add(m, row0, mulc(m, m->warp, 16));
	}

	/* the warp's rows out, rows g and g + 8 below T. The quads' shuffles
	 * come first, while every thread of the warp takes part. */
	for (int r = 0; r < 2; r++) {
		LLVMValueRef row = add(m, mine0, add(m, m->g, i64c(m, 8 * r)));
		LLVMValueRef in = LLVMBuildICmp(B, LLVMIntSLT, row, i64c(m, m->T), "");
		LLVMValueRef l = fwd ? quad(m, rd_c(k, lrow, i64c(m, r)), false) : NULL;
		LLVMBasicBlockRef j = cg_if(k, in);
		if (lse_out) {
			/* the row's log-sum-exp, by the quad's first thread */
			LLVMBasicBlockRef first = cg_if(k, LLVMBuildICmp(B, LLVMIntEQ, m->t, i64c(m, 0), ""));
			LLVMValueRef at = add(m, mulc(m, m->bh, m->T), row);
			LLVMBuildStore(B, LLVMBuildFAdd(B, rd_c(k, mrow, i64c(m, r)), cg_log(k, l), ""), f32_at(m, lse_out, at));
			cg_end_if(k, first);
		}
		if (kind == OP_ATTENTION)
			store_rows(m, args[0], pacc, mine0, r, LLVMBuildFDiv(B, cg_real(g, 1), l, ""));
		if (kind == OP_ATTN_DV)
			store_rows(m, args[0], pacc, mine0, r, NULL);
		if (kind == OP_ATTN_DQ || kind == OP_ATTN_DK || kind == OP_ATTN_DKV)
			store_rows(m, args[0], sacc, mine0, r, NULL);
		if (kind == OP_ATTN_DKV) /* dv after dk */
			store_rows(m, LLVMBuildAdd(B, args[0], i64c(m, ir_numel(q) * (m->tf32 ? 4 : 2)), ""), pacc, mine0, r, NULL);
		cg_end_if(k, j);
	}
}

/* What a launch of body_attn_mma does, counted from its structure above, for
 * the cost model (CgMix): per block of MMA_ROWS rows, the steps of the other
 * side's tiles its loop takes (causal: the keys up to the block's last query
 * row, or the queries from its first key row); per warp and step (but
 * those a causal mask hides from the warp's rows), scores()'s
 * and acc_mma()'s products and ldmatrix loads, and per thread the tile's
 * exponentials and the arithmetic around them (mask and scale, the online
 * softmax or the probabilities, packing P or dS to bf16 for the next
 * product, the forward's rescaling of its sums); per block and step the
 * tiles' cp.async bytes; per block its own rows in and its results out.
 * f32 as 3xTF32: three m16n8k8 products for each of m16n8k16's halves,
 * each operand word split (two cvt.rna and a subtraction), and the second
 * products' B fragments loaded a word at a time, not by ldmatrix.
 * Returns the launch's blocks. */
int64_t cg_attn_mma_mix(const KDesc *d, CgMix *mix)
{
	Type q = d->in[0];
	OpKind kind = d->kind;
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], H = d->attr.attn.heads, dh = C / H;
	int64_t bh = ir_numel(q) / (T * C) * H, tk = mma_tile(d), nj = tk / 8;
	bool keyside = kind == OP_ATTN_DK || kind == OP_ATTN_DV || kind == OP_ATTN_DKV, causal = d->attr.attn.causal;
	bool with_dp = kind == OP_ATTN_DQ || kind == OP_ATTN_DK || kind == OP_ATTN_DKV;
	bool fwd = kind == OP_ATTENTION || kind == OP_ATTN_LSE;
	int accs = (kind == OP_ATTENTION || kind == OP_ATTN_DV || kind == OP_ATTN_DKV) + with_dp;
	int tiles = kind == OP_ATTN_LSE ? 1 : 2, sides = 1 + with_dp;
	int64_t steps = 0, seen = 0, blocks = (T + MMA_ROWS - 1) / MMA_ROWS;
	for (int64_t i = 0; i < blocks; i++) {
		int64_t row0 = i * MMA_ROWS, lo = keyside && causal ? row0 : 0;
		int64_t hi = !keyside && causal ? (row0 + MMA_ROWS < T ? row0 + MMA_ROWS : T) : T;
		steps += (hi - lo + tk - 1) / tk;
		/* each warp's steps not hidden by a causal mask (body_attn_mma skips those): query rows see the
		 * steps from lo with o <= mine + 15, key rows those with o + tk - 1 >= mine */
		int64_t n = (hi - lo + tk - 1) / tk;
		for (int64_t mine = row0; mine < row0 + MMA_ROWS; mine += 16) {
			int64_t first = keyside ? (mine - lo) / tk : 0;
			int64_t last = keyside ? n : (mine + 15 - lo) / tk + 1;
			seen += !causal ? n : (last < n ? last : n) - first > 0 ? (last < n ? last : n) - first : 0;
		}
	}
	double warp_steps = (double)(seen * bh), block_steps = (double)(steps * bh);
	double e = (double)tk / 2; /* a thread's scores a step */
	if (tf32_of(d)) {
		double kc = (double)dh / 8, n = (double)dh / 8, kt = (double)tk / 8; /* k steps of 8; n-tiles; the tile's k steps */
		mix->tf32 = true;
		mix->per_step = 3 * (kc * (double)nj * sides + accs * kt * n);
		mix->mma = warp_steps * mix->per_step;
		mix->ldmatrix = warp_steps * (kc * sides + kc * (double)((nj + 1) / 2) * sides);
		double lds = warp_steps * accs * kt * n * 2, splits = kc * sides * (4 + 2.0 * (double)nj) + accs * kt * (4 + 2 * n);
		double per = 5 + (fwd ? 4 : 2 + 3 * with_dp); /* mask and scale; softmax or P (and dS) */
		int64_t copies = tiles * tk * dh / 4;
		mix->alu = lds + warp_steps * (3 * splits + e * per + (fwd ? (double)dh / 2 + 12 : 0) + 20 + 10.0 * (double)copies / CG_BLOCK);
		double tile_bytes = (double)(tiles * tk * dh * 4 + (keyside ? 8 * tk : 0));
		mix->shared = mix->ldmatrix * 512 + lds * 128 + block_steps * tile_bytes + (double)(blocks * bh) * (double)(MMA_ROWS * dh * 4 * sides);
		mix->l2 = block_steps * tile_bytes;
		mix->ex2 = warp_steps * (e + (fwd ? 2 : 0));
		return blocks * bh;
	}
	mix->per_step = (double)((dh / 16) * nj * sides + accs * (tk / 16) * (dh / 8));
	mix->mma = warp_steps * mix->per_step;
	mix->ldmatrix = warp_steps * (double)((dh / 16) * sides + (dh / 16) * (nj / 2) * sides + accs * (tk / 16) * (dh / 16));
	mix->ex2 = warp_steps * (e + (fwd ? 2 : 0));
	double per = 5 + (fwd ? 4 : 2 + 3 * with_dp) + 4 * accs; /* mask and scale; softmax or P (and dS); packing */
	int64_t copies = tiles * tk * dh / 8;                     /* 16-byte cp.async copies a step, over 256 threads */
	mix->alu = warp_steps * (e * per + (fwd ? (double)dh / 2 + 12 : 0) + 20 + 10.0 * (double)copies / CG_BLOCK);
	double tile_bytes = (double)(tiles * tk * dh * 2 + (keyside ? 8 * tk : 0));
	double own = (double)(MMA_ROWS * dh * 2 * sides);
	mix->shared = mix->ldmatrix * 512 + block_steps * tile_bytes + (double)(blocks * bh) * own;
	mix->l2 = block_steps * tile_bytes;
	return blocks * bh;
}

static void body_attn_rows(K *k, const KDesc *d, LLVMValueRef *args, LLVMValueRef r);

/* A kernel item of an attention op: the lowering its shape and target take */
void cg_kernel_attention(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	if ((int)d->kind == K_ATTN_ROWS) {
		body_attn_rows(k, d, args, idx);
		return;
	}
	int64_t tq, tk;
	if (cg_attn_mma(k->g, d))
		body_attn_mma(k, d, ptrs, args, idx);
	else if (cg_attn_flash(k->g, d))
		cg_attn_fma(k, d, ptrs, args, idx);
	else if (cg_attn_tiles(k->g, d, &tq, &tk))
		body_attn_tiled(k, d, ptrs, idx, tq, tk);
	else
		body_attn(k, d, ptrs, idx);
}

/* An attention op on the CPU: rt_attention, the runtime's tiles of GEMMs,
 * with the shape as a constant table and the operands' addresses in the
 * argument buffer. */
static void lower_attention(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	Type q = ir_vtype(p, op->in[0]);
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1];
	int64_t dims[5] = {ir_numel(q) / (T * C), T, C, op->attr.attn.heads, op->attr.attn.causal};
	LLVMValueRef table = cg_i64_table(g, "dp_attention", dims, 5);
	for (int i = 0; i < op->nin; i++) {
		LLVMValueRef at_i = cg_i64(g, i);
		LLVMBuildStore(g->b, cg_addr(h, op->in[i]), LLVMBuildGEP2(g->b, g->i64, h->argbuf, &at_i, 1, ""));
	}
	static const OpKind kinds[5] = {OP_ATTENTION, OP_ATTN_STATS, OP_ATTN_DQ, OP_ATTN_DK, OP_ATTN_DV};
	int kind = 0;
	while (kinds[kind] != op->kind)
		kind++;
	LLVMTypeRef ft, pt[6] = {g->i8p, g->i32, g->i32, g->i64p, g->i64p, g->i64};
	LLVMValueRef f = cg_declare(g, "rt_attention", LLVMVoidTypeInContext(g->ctx), pt, 6, &ft);
	LLVMValueRef args[6] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)kind, 0),
	                        LLVMConstInt(g->i32, (unsigned long long)ir_dt_bytes(q.dt), 0),
	                        LLVMBuildBitCast(g->b, table, g->i64p, ""), h->argbuf, cg_addr(h, op->out)};
	cg_call(h, ft, f, args, 6);
}


int cg_attn_rows_vec(const KDesc *d)
{
	int v = d->out.dt == DT_F64 ? 2 : 4;
	return d->out.dim[2] % v ? 1 : v;
}

/* a stat in the compute type (wide: f32 for bf16) or the tensor's */
static LLVMValueRef load_stat(K *k, LLVMValueRef st, LLVMValueRef at, bool wide)
{
	if (!wide)
		return cg_load(k, st, at);
	return LLVMBuildLoad2(k->b, k->g->real, LLVMBuildGEP2(k->b, k->g->real, st, &at, 1, ""), "");
}

/* a row's log-sum-exp (or another stat) in the compute type (f32 for bf16), by one lane */
static void store_lse(K *k, LLVMValueRef lse, LLVMValueRef at, LLVMValueRef v)
{
	LLVMBasicBlockRef j = cg_if(k, LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(k->g, 0), ""));
	LLVMBuildStore(k->b, v, LLVMBuildGEP2(k->b, k->g->real, lse, &at, 1, ""));
	cg_end_if(k, j);
}

/* K_ATTN_ROWS: row r of a block's scores S [items x H, nq, nk] (ag_rows:
 * words S, dP, stats, dO, O), query t = q0 + r % nq of head r / nq of the
 * items' heads, keys [0, n) (n = t + 1 when causal, else nk), scaled by 1 /
 * sqrt(Dh). Softmax: P in place of S (and, softmax_lse, the row's
 * log-sum-exp into the third word); stats: the row's log-sum-exp and dO .
 * O; lse: the log-sum-exp alone; dS: P (dP - D) / sqrt(Dh) in place of S;
 * P: P in place of S; dS from P: dS = P (dP - D) / sqrt(Dh) with P read
 * where S was (f32 and f64 after attn_p). Masked keys get 0. The stats are [items, H, T, 2], so
 * row r's are at (r / nq) T + t, and a log-sum-exp at (r / nq) T + t; dO
 * and O are [items, T, C]. Delta (attn_delta): no scores; rows [items x H,
 * T, Dh], the first word the log-sum-exp that the stats take with dO . O. */
static void body_attn_rows(K *k, const KDesc *d, LLVMValueRef *args, LLVMValueRef r)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	int64_t H = d->attr.attn.heads, nq = d->out.dim[1], nk = d->out.dim[2], q0 = d->blk[0], T = d->blk[1];
	int64_t C = d->in[0].dim[d->in[0].rank - 1], dh = C / H;
	double scale = 1 / sqrt((double)dh);
	/* S and dP hold the compute type (f32 for bf16); P, the stats, dO and O the tensor's */
	LLVMTypeRef wp = LLVMPointerType(g->real, 0);
	/* the stats in the compute type (attn_delta's, d->in[1]) or the tensor's (attn_stats') */
	bool wide = g->bf16 && d->in[1].dt == DT_F32;
	LLVMValueRef S = cg_ptr(k, args[0], wp), dP = cg_ptr(k, args[1], wp), st = cg_ptr(k, args[2], wide ? wp : g->realp);
	LLVMValueRef P = cg_ptr(k, args[5], g->realp);
	LLVMValueRef head = LLVMBuildUDiv(B, r, cg_i64(g, nq), ""), t = LLVMBuildAdd(B, LLVMBuildURem(B, r, cg_i64(g, nq), ""), cg_i64(g, q0), "");
	LLVMValueRef base = LLVMBuildMul(B, r, cg_i64(g, nk), "");
	LLVMValueRef n = d->attr.attn.causal ? LLVMBuildAdd(B, t, cg_i64(g, 1), "") : cg_i64(g, nk);
	LLVMValueRef lrow = LLVMBuildAdd(B, LLVMBuildMul(B, head, cg_i64(g, T), ""), t, "");
	LLVMValueRef srow = LLVMBuildMul(B, lrow, cg_i64(g, 2), "");
	if (d->mode == AR_LSE) {
		LLVMValueRef mx;
		store_lse(k, cg_ptr(k, args[2], wp), lrow, cg_lse_online(k, S, true, base, n, scale, &mx));
		return;
	}
	if (d->mode == AR_STATS || d->mode == AR_DELTA) {
		LLVMValueRef mx, lse = d->mode == AR_DELTA ? LLVMBuildLoad2(B, g->real, LLVMBuildGEP2(B, g->real, S, &lrow, 1, ""), "")
		                                           : cg_lse_online(k, S, true, base, n, scale, &mx);
		LLVMValueRef dO = cg_ptr(k, args[3], g->realp), O = cg_ptr(k, args[4], g->realp);
		/* item head / H's row t, head head % H's columns */
		LLVMValueRef row = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildUDiv(B, head, cg_i64(g, H), ""), cg_i64(g, T), ""), t, "");
		LLVMValueRef at0 = LLVMBuildAdd(B, LLVMBuildMul(B, row, cg_i64(g, C), ""),
		                                LLVMBuildMul(B, LLVMBuildURem(B, head, cg_i64(g, H), ""), cg_i64(g, dh), ""), "");
		Loop l = cg_for_lanes(k, cg_i64(g, dh));
		Acc s = cg_acc(k, &l, cg_real(g, 0));
		LLVMValueRef at = LLVMBuildAdd(B, at0, l.i, "");
		LLVMValueRef ns = LLVMBuildFAdd(B, s.phi, LLVMBuildFMul(B, cg_load(k, dO, at), cg_load(k, O, at), ""), "");
		cg_acc_next(k, &s, ns);
		cg_for_end(k, &l, cg_i64(g, dh));
		LLVMValueRef dd = cg_all_reduce(k, cg_acc_result(k, &l, cg_real(g, 0), ns), false);
		if (wide) {
			store_lse(k, st, srow, lse);
			store_lse(k, st, LLVMBuildAdd(B, srow, cg_i64(g, 1), ""), dd);
		} else {
			cg_store_once(k, st, srow, lse);
			cg_store_once(k, st, LLVMBuildAdd(B, srow, cg_i64(g, 1), ""), dd);
		}
		return;
	}
	bool soft = d->mode == AR_SOFTMAX || d->mode == AR_SOFTMAX_LSE;
	LLVMValueRef mx, lse = soft ? cg_lse_online(k, S, true, base, n, scale, &mx) : load_stat(k, st, srow, wide);
	if (d->mode == AR_SOFTMAX_LSE)
		store_lse(k, cg_ptr(k, args[2], wp), lrow, lse);
	bool ds = d->mode == AR_DS || d->mode == AR_DS_P;
	LLVMValueRef D = ds ? load_stat(k, st, LLVMBuildAdd(B, srow, cg_i64(g, 1), ""), wide) : NULL;
	/* v keys a lane at a time, 16 bytes of S when the rows are whole
	 * vectors: the accesses carry the alignment that the plan's 256-byte
	 * buffers and the parts' offsets give them, so that LLVM's load-store
	 * vectorizer joins them (a float a lane took 3x the model's time on
	 * an H200, bench/RESULTS.md 2026-11-27) */
	int rb = g->real == g->f64 ? 8 : 4, pb = g->bf16 ? 2 : rb, v = cg_attn_rows_vec(d);
	/* P is S but in bf16, where it is the third part */
	unsigned sa = (unsigned)(v * rb), da = (unsigned)(d->parts_align < v * rb ? d->parts_align : v * rb);
	unsigned pa = (unsigned)(!g->bf16 ? v * pb : d->parts_align < v * pb ? d->parts_align : v * pb);
	LLVMValueRef nn = cg_i64(g, nk);
	Loop l = cg_for_from(k, LLVMBuildMul(B, k->lane, cg_i64(g, v), ""), (int64_t)k->lanes * v, nn);
	/* the v loads first, then the stores: nothing between them for the vectorizer to reorder */
	LLVMValueRef at[4], ls[4], ld[4];
	for (int e = 0; e < v; e++) {
		at[e] = LLVMBuildAdd(B, base, LLVMBuildAdd(B, l.i, cg_i64(g, e), ""), "");
		ls[e] = LLVMBuildLoad2(B, g->real, LLVMBuildGEP2(B, g->real, S, &at[e], 1, ""), "");
		LLVMSetAlignment(ls[e], e ? (unsigned)rb : sa);
	}
	for (int e = 0; ds && e < v; e++) {
		ld[e] = LLVMBuildLoad2(B, g->real, LLVMBuildGEP2(B, g->real, dP, &at[e], 1, ""), "");
		LLVMSetAlignment(ld[e], e ? (unsigned)rb : da);
	}
	for (int e = 0; e < v; e++) {
		LLVMValueRef p = d->mode == AR_DS_P ? ls[e] : cg_exp(k, LLVMBuildFSub(B, LLVMBuildFMul(B, ls[e], cg_real(g, scale), ""), lse, ""));
		if (ds)
			p = LLVMBuildFMul(B, LLVMBuildFMul(B, p, LLVMBuildFSub(B, ld[e], D, ""), ""), cg_real(g, scale), "");
		LLVMValueRef j = LLVMBuildAdd(B, l.i, cg_i64(g, e), "");
		ls[e] = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, j, n, ""), p, cg_real(g, 0), "");
	}
	for (int e = 0; e < v; e++) {
		cg_store(k, P, at[e], ls[e]);
		LLVMSetAlignment(LLVMGetLastInstruction(LLVMGetInsertBlock(B)), e ? (unsigned)pb : pa);
	}
	cg_for_end(k, &l, nn);
}

/* ---- attention on GEMMs (the GPU's) ----
 * Per group of batch items (as many as the op's workspace holds: its first
 * axis) and block of query rows [q0, q0 + nq) (its second, over the parts),
 * against keys [0, nk) (nk = q0 + nq when causal, else T), every head of
 * every item of the group at once, as a GEMM batched over the heads and
 * the items (rt_gemm_items: the heads are dh apart, the items T C):
 *   S = Q K^T  (the workspace's first part, [items, H, nq, nk])
 * then a row kernel (K_ATTN_ROWS, a row of S per item) and another GEMM:
 *   attention:  P = softmax(S / sqrt(Dh)), causal rows masked; O = P V
 *   attn_stats: each row's log-sum-exp and dO . O into the stats
 *   attn_dq:    dP = dO V^T (the second half); dS = P (dP - D) / sqrt(Dh); dQ = dS K
 *   attn_dk:    the same dS; dK += dS^T Q over the query blocks
 *   attn_dv:    P; dV += P^T dO over the query blocks
 * dK and dV are zeroed first, then summed block by block in order: the
 * bits do not depend on timing. The rows' sums are the row kernel's, in
 * one order for a given shape. In bf16, S and dP are f32 (the GEMM's sums
 * kept: RT_GEMM_BF16_F32), and the row kernel writes P or dS rounded to
 * bf16 into the workspace's third part, the next GEMM's operand; in f32
 * and f64 it writes them in place of S. */
typedef struct {
	Host *h;
	Op *op;
	int64_t T, C, H, dh, elt, rows, ib; /* elt: q's element bytes; rows: the query rows of a block; ib: items a group */
	int parts_align;                    /* the bytes dP and P are aligned to (a part's lowest bit, 16 at most) */
	bool bf16;
	LLVMValueRef S, dP, P;              /* the workspace's parts (P: S's unless bf16) */
	LLVMValueRef at[6];                 /* this group's operands (stats: its heads' rows), then the result */
	LLVMValueRef lse;                   /* attention's rows' log-sum-exp, written as it goes (attn_lse), or NULL */
	LLVMValueRef dv;                    /* attn_dkv: the group's dv, after dk */
} Ag;

static LLVMValueRef off(Ag *a, LLVMValueRef base, int64_t elems)
{
	return LLVMBuildAdd(a->h->g->b, base, cg_i64(a->h->g, elems * a->elt), "");
}

/* C[i, h] = A[i, h] B[i, h] (ta, tb: transposed) for every item i of the
 * group and head h: A's heads sa apart and its items oa, and so on;
 * scores: C in the workspace's type (f32 for bf16 operands) */
static void ag_gemm(Ag *a, bool scores, int ta, int tb, int64_t m, int64_t n, int64_t k, LLVMValueRef A, int64_t lda,
                    int64_t sa, int64_t oa, LLVMValueRef Bm, int64_t ldb, int64_t sb, int64_t ob, LLVMValueRef Cm,
                    int64_t ldc, int64_t sc, int64_t oc, double beta)
{
	Host *h = a->h;
	Cg *g = h->g;
	int type = scores && a->bf16 ? RT_GEMM_BF16_F32 : (int)a->elt;
	LLVMValueRef args[22] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)type, 0), LLVMConstInt(g->i32, (unsigned)ta, 0),
	                         LLVMConstInt(g->i32, (unsigned)tb, 0), cg_i64(g, m), cg_i64(g, n), cg_i64(g, k), A,
	                         cg_i64(g, lda), cg_i64(g, sa), cg_i64(g, oa), Bm, cg_i64(g, ldb), cg_i64(g, sb), cg_i64(g, ob),
	                         Cm, cg_i64(g, ldc), cg_i64(g, sc), cg_i64(g, oc), cg_i64(g, a->H), cg_i64(g, a->ib),
	                         LLVMConstReal(g->f64, beta)};
	LLVMTypeRef ft, pt[22] = {g->i8p, g->i32, g->i32, g->i32};
	for (int i = 4; i < 21; i++)
		pt[i] = g->i64;
	pt[21] = g->f64;
	LLVMValueRef f = cg_declare(g, "rt_gemm_items", LLVMVoidTypeInContext(g->ctx), pt, 22, &ft);
	cg_call(h, ft, f, args, 22);
	cg_cost_gemm(h, (int)a->elt, m, n, k, a->H * a->ib, (int64_t[]){lda, ldb, ldc}, true);
}

/* the row kernel over S [items, H, nq, nk]: words S, dP, stats, dO, O, P */
static void ag_rows(Ag *a, int mode, int64_t q0, int64_t nq, int64_t nk)
{
	KDesc d;
	memset(&d, 0, sizeof d);
	d.kind = (OpKind)K_ATTN_ROWS;
	d.attr = a->op->attr;
	d.out = ir_type(ir_vtype(a->h->g->p, a->op->in[0]).dt, 3, (int64_t[]){a->ib * a->H, nq, nk});
	d.in[0] = ir_vtype(a->h->g->p, a->op->in[0]);
	if (ops_attn_operands(a->op->kind) == 5) /* the stats */
		d.in[1] = ir_vtype(a->h->g->p, a->op->in[4]);
	d.mode = mode;
	d.blk[0] = q0;
	d.blk[1] = a->T;
	d.parts_align = a->parts_align;
	LLVMValueRef z = cg_i64(a->h->g, 0), words[6] = {a->S, a->dP, z, z, z, a->P};
	if (a->op->kind == OP_ATTN_STATS) /* (q, k, dO, O) -> stats */
		words[2] = a->at[5], words[3] = a->at[2], words[4] = a->at[3];
	else if (a->op->kind == OP_ATTN_LSE) /* (q, k, O) -> lse */
		words[2] = a->at[5];
	else if (a->op->kind == OP_ATTENTION)
		words[2] = a->lse ? a->lse : z;
	else /* (q, k, v, dO, stats) */
		words[2] = a->at[4], words[3] = a->at[3];
	cg_launch(a->h, &d, words, 6);
}

/* one block of query rows of a group of items */
static void ag_block(Ag *a, int64_t q0, int64_t nq)
{
	int64_t T = a->T, C = a->C, dh = a->dh, nk = a->op->attr.attn.causal ? q0 + nq : T, it = T * C, sc = nq * nk;
	int64_t os = a->H * sc; /* an item's scores */
	LLVMValueRef q = a->at[0], k = a->at[1], v = a->at[2], dO = a->at[3], out = a->at[5];
	OpKind kind = a->op->kind;
	/* S = Q[q0:q0+nq] K[0:nk]^T, head by head (a head's columns: dh of them, dh apart) */
	ag_gemm(a, true, 0, 1, nq, nk, dh, off(a, q, q0 * C), C, dh, it, k, C, dh, it, a->S, nk, sc, os, 0);
	switch ((int)kind) {
	case OP_ATTENTION:
		ag_rows(a, a->lse ? AR_SOFTMAX_LSE : AR_SOFTMAX, q0, nq, nk);
		ag_gemm(a, false, 0, 0, nq, dh, nk, a->P, nk, sc, os, v, C, dh, it, off(a, out, q0 * C), C, dh, it, 0);
		return;
	case OP_ATTN_STATS:
		ag_rows(a, AR_STATS, q0, nq, nk);
		return;
	case OP_ATTN_LSE:
		ag_rows(a, AR_LSE, q0, nq, nk);
		return;
	case OP_ATTN_DV:
	case OP_ATTN_DKV:
		ag_rows(a, AR_P, q0, nq, nk);
		ag_gemm(a, false, 1, 0, nk, dh, nq, a->P, nk, sc, os, off(a, dO, q0 * C), C, dh, it, kind == OP_ATTN_DV ? out : a->dv,
		        C, dh, it, 1);
		if (kind == OP_ATTN_DV)
			return;
	}
	/* dP = dO[q0:q0+nq] V[0:nk]^T, then dS (in P's place) */
	ag_gemm(a, true, 0, 1, nq, nk, dh, off(a, dO, q0 * C), C, dh, it, v, C, dh, it, a->dP, nk, sc, os, 0);
	/* attn_dkv in f32 and f64: P is where S was (bf16 keeps S, P in the third part) */
	ag_rows(a, kind == OP_ATTN_DKV && !a->bf16 ? AR_DS_P : AR_DS, q0, nq, nk);
	if (kind == OP_ATTN_DQ)
		ag_gemm(a, false, 0, 0, nq, dh, nk, a->P, nk, sc, os, k, C, dh, it, off(a, out, q0 * C), C, dh, it, 0);
	else
		ag_gemm(a, false, 1, 0, nk, dh, nq, a->P, nk, sc, os, off(a, q, q0 * C), C, dh, it, out, C, dh, it, 1);
}

/* op on GEMMs; lse: the value of the attn_lse it writes as it goes (ir_attn_lse_fused), or -1 */
static void lower_attention_gemm(Host *h, Op *op, int lse)
{
	Cg *g = h->g;
	Program *p = g->p;
	Type q = ir_vtype(p, op->in[0]);
	int base = ops_attn_operands(op->kind);
	Ag a = {.h = h, .op = op, .T = q.dim[q.rank - 2], .C = q.dim[q.rank - 1], .H = op->attr.attn.heads,
	        .elt = ir_dt_bytes(q.dt), .bf16 = q.dt == DT_BF16};
	a.dh = a.C / a.H;
	Type wt = ir_vtype(p, op->in[base]);
	a.ib = wt.dim[0];
	int64_t part = ir_numel(wt) / (a.bf16 ? 3 : 2), wb = ir_dt_bytes(wt.dt);
	a.rows = part / (a.ib * a.H * a.T);
	int64_t low = part * wb & -(part * wb);
	a.parts_align = low > 16 ? 16 : (int)low;
	LLVMValueRef ws = cg_addr(h, op->in[base]);
	a.S = ws;
	a.dP = LLVMBuildAdd(g->b, ws, cg_i64(g, part * wb), "");
	a.P = a.bf16 ? LLVMBuildAdd(g->b, ws, cg_i64(g, 2 * part * wb), "") : ws;
	int64_t groups = ir_numel(q) / (a.T * a.C) / a.ib, out_bytes = ir_bytes(p, ir_vtype(p, op->out));
	if (op->kind == OP_ATTN_DK || op->kind == OP_ATTN_DV || op->kind == OP_ATTN_DKV) {
		/* summed over the query blocks from zero */
		LLVMValueRef args[3] = {h->ctx, cg_addr(h, op->out), cg_i64(g, out_bytes)};
		cg_call(h, h->t_zero, h->f_zero, args, 3);
		cg_cost_copy(h, out_bytes, true);
	}
	/* for each group of items: a loop in the host code */
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "attn_item");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "attn_done");
	LLVMBuildBr(g->b, body);
	LLVMPositionBuilderAtEnd(g->b, body);
	LLVMValueRef b = LLVMBuildPhi(g->b, g->i64, "b"), zero = cg_i64(g, 0);
	LLVMAddIncoming(b, &zero, &pre, 1);
	LLVMValueRef item = LLVMBuildMul(g->b, b, cg_i64(g, a.ib * a.T * a.C * a.elt), "");
	/* the group's operands: q-shaped ones T C an item, the stats H T 2, a log-sum-exp H T */
	int64_t sb = ops_attn_operands(op->kind) == 5 ? ir_dt_bytes(ir_vtype(p, op->in[4]).dt) : a.elt; /* the stats' */
	LLVMValueRef stats = LLVMBuildMul(g->b, b, cg_i64(g, a.ib * a.H * a.T * 2 * sb), "");
	LLVMValueRef rows = LLVMBuildMul(g->b, b, cg_i64(g, a.ib * a.H * a.T * wb), "");
	for (int i = 0; i < base; i++)
		a.at[i] = LLVMBuildAdd(g->b, cg_addr(h, op->in[i]), i == 4 ? stats : item, "");
	a.at[5] = LLVMBuildAdd(g->b, cg_addr(h, op->out),
	                       op->kind == OP_ATTN_STATS ? stats : op->kind == OP_ATTN_LSE ? rows : item, "");
	a.lse = lse >= 0 ? LLVMBuildAdd(g->b, cg_addr(h, lse), rows, "") : NULL;
	a.dv = LLVMBuildAdd(g->b, a.at[5], cg_i64(g, ir_bytes(p, q)), "");
	int64_t times = h->times;
	h->times *= groups;
	for (int64_t q0 = 0; q0 < a.T; q0 += a.rows)
		ag_block(&a, q0, a.T - q0 < a.rows ? a.T - q0 : a.rows);
	h->times = times;
	LLVMValueRef next = LLVMBuildAdd(g->b, b, cg_i64(g, 1), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMAddIncoming(b, &next, &latch, 1);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, cg_i64(g, groups), ""), body, done);
	LLVMPositionBuilderAtEnd(g->b, done);
}

/* attn_delta: a row kernel over dO and O, [items x H, T, Dh] (no scores) */
static void lower_delta(Host *h, Op *op)
{
	Program *p = h->g->p;
	Type o = ir_vtype(p, op->in[1]);
	int64_t T = o.dim[o.rank - 2], C = o.dim[o.rank - 1], H = op->attr.attn.heads;
	KDesc d;
	memset(&d, 0, sizeof d);
	d.kind = (OpKind)K_ATTN_ROWS;
	d.attr = op->attr;
	d.out = ir_type(o.dt, 3, (int64_t[]){ir_numel(o) / (T * C) * H, T, C / H});
	d.in[0] = o;
	d.in[1] = ir_vtype(p, op->out);
	d.mode = AR_DELTA;
	d.blk[1] = T;
	LLVMValueRef z = cg_i64(h->g, 0);
	LLVMValueRef words[6] = {cg_addr(h, op->in[2]), z, cg_addr(h, op->out), cg_addr(h, op->in[0]), cg_addr(h, op->in[1]), z};
	cg_launch(h, &d, words, 6);
}

/* b's attention at i and the attn_lse after it that it writes (ir_attn_lse_fused):
 * on GEMMs, or on tensor cores with the log-sum-exp's word after the operands (KDesc.mode 1) */
void cg_attention_lse(Host *h, Block *b, int i)
{
	Op *op = b->ops[i];
	Program *p = h->g->p;
	if (!op->attr.attn.flash) {
		lower_attention_gemm(h, op, b->ops[i + 1]->out);
		return;
	}
	KDesc d = cg_kdesc(op);
	d.nin = 3;
	d.out = ir_vtype(p, op->out);
	d.mode = 1;
	LLVMValueRef words[5] = {cg_addr(h, op->out)};
	for (int j = 0; j < 3; j++) {
		d.in[j] = ir_vtype(p, op->in[j]);
		words[j + 1] = cg_addr(h, op->in[j]);
	}
	words[4] = cg_addr(h, b->ops[i + 1]->out);
	cg_launch(h, &d, words, 5);
}

/* DPC_SIMT: an attention op that the CPU target runs as the GPU's
 * tensor-core or FMA kernel, on the runtime's emulator */
static bool simt_attention(Cg *g, Op *op)
{
	if (!g->simt)
		return false;
	KDesc d = cg_kdesc(op);
	d.in[0] = ir_vtype(g->p, op->in[0]);
	return cg_attn_flash(g, &d);
}

bool cg_host_attention(Host *h, Op *op)
{
	if (op->kind == OP_ATTN_DELTA) {
		lower_delta(h, op);
		return true;
	}
	if (op->nin > ops_attn_operands(op->kind)) {
		lower_attention_gemm(h, op, -1);
		return true;
	}
	if (ir_ops[op->kind].low == LW_HEADS && !h->g->cuda && !h->g->reference && !simt_attention(h->g, op)) {
		lower_attention(h, op);
		return true;
	}
	if (op->kind == OP_ATTENTION && h->step && h->g->cuda && h->g->verbose && !h->g->reference) {
		/* -v: an attention that neither tensor cores (bf16, heads 16 to 128 wide) nor the FMA kernels take */
		KDesc d = cg_kdesc(op);
		d.in[0] = ir_vtype(h->g->p, op->in[0]);
		if (!cg_attn_flash(h->g, &d))
			diag_note(op->loc, "attention on dpc's tiled kernels (DPC_ATTN_GEMM=off): %s",
			          d.in[0].dt == DT_BF16 ? ar_printf("the tensor-core kernels take bf16 heads of 16 to 128 elements, a "
			                                            "multiple of 16, and these are %lld wide",
			                                            (long long)(d.in[0].dim[d.in[0].rank - 1] / op->attr.attn.heads))
			                                : ar_printf("the FMA kernels refuse it: %s", ops_attn_fma_refuses(d.in[0], op->attr.attn.heads)));
	}
	return false;
}
