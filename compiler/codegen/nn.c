/* cg, nn: embed, layernorm, dropout, pooling, the losses, and their
 * gradients; attention is in attention.c. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "../../common/abi.h"
#include "cgint.h"
#include "../ops/ops.h"
#include "../../common/rng.h"

/* the row's label as i64, and with an ignored label whether it counts */
static LLVMValueRef row_label(K *k, const KDesc *d, LLVMValueRef labels, LLVMValueRef row, LLVMValueRef *valid)
{
	Cg *g = k->g;
	LLVMValueRef lab = LLVMBuildLoad2(k->b, g->i32, LLVMBuildGEP2(k->b, g->i32, labels, &row, 1, ""), "");
	*valid = d->attr.lab.has ? LLVMBuildICmp(k->b, LLVMIntNE, lab, LLVMConstInt(g->i32, (unsigned long long)(int64_t)d->attr.lab.ignore, 1), "")
	                       : LLVMConstInt(g->i1, 1, 0);
	lab = LLVMBuildSelect(k->b, *valid, lab, LLVMConstInt(g->i32, 0, 0), "");
	return LLVMBuildSExt(k->b, lab, g->i64, "");
}

/* cross_entropy_grad: one row per item, g (softmax(row) - onehot(label)) / rows */
typedef struct {
	LLVMValueRef x, out, obase, lse, lab, seed;
} XentGrad;

/* the gradient at element i of the row (k->vec of them from i) */
static void xent_grad_at(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	XentGrad *s = ctx;
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef p = cg_exp(k, LLVMBuildFSub(B, cg_row_load(k, s->x, at), cg_splat(k, s->lse), ""));
	LLVMValueRef col = i, lab = s->lab;
	if (k->vec > 1) { /* the vector's columns: i, i + 1, ... */
		LLVMValueRef e[16];
		for (int j = 0; j < k->vec; j++)
			e[j] = cg_i64(g, j);
		LLVMValueRef iota = LLVMConstVector(e, (unsigned)k->vec);
		LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(g->i32, (unsigned)k->vec));
		LLVMTypeRef vt = LLVMVectorType(g->i64, (unsigned)k->vec);
		col = LLVMBuildAdd(B, LLVMBuildShuffleVector(B, LLVMBuildInsertElement(B, LLVMGetUndef(vt), i, cg_i64(g, 0), ""),
		                                             LLVMGetUndef(vt), zeros, ""), iota, "");
		lab = LLVMBuildShuffleVector(B, LLVMBuildInsertElement(B, LLVMGetUndef(vt), lab, cg_i64(g, 0), ""), LLVMGetUndef(vt),
		                             zeros, "");
	}
	LLVMValueRef hot = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, col, lab, ""), cg_kreal(k, 1), cg_kreal(k, 0), "");
	cg_row_store(k, s->out, LLVMBuildAdd(B, s->obase, i, ""), LLVMBuildFMul(B, cg_splat(k, s->seed), LLVMBuildFSub(B, p, hot, ""), ""));
}

static void body_xent_grad(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef row)
{
	Cg *g = k->g;
	int64_t C = d->out.dim[d->out.rank - 1];
	LLVMValueRef base = LLVMBuildMul(k->b, row, cg_i64(g, d->pitch[0] ? d->pitch[0] : C), "");
	LLVMValueRef obase = LLVMBuildMul(k->b, row, cg_i64(g, d->pitch[1] ? d->pitch[1] : C), "");
	/* ptrs: out, logits, labels, seed */
	XentGrad s = {ptrs[1], ptrs[0], obase, NULL, NULL, NULL};
	LLVMValueRef valid;
	s.lab = row_label(k, d, ptrs[2], row, &valid);
	s.seed = LLVMBuildFDiv(k->b, cg_load(k, ptrs[3], cg_i64(g, 0)), cg_real(g, (double)cg_rows(d->out)), "");
	s.seed = LLVMBuildSelect(k->b, valid, s.seed, cg_real(g, 0), "");
	k->aligned = cg_aligned(k, 2, (LLVMValueRef[]){s.x, s.out}, (LLVMValueRef[]){base, obase});
	LLVMValueRef mx;
	s.lse = cg_row_lse(k, s.x, base, C, true, &mx);
	cg_each(k, base, C, xent_grad_at, &s);
	k->aligned = NULL;
}

typedef struct {
	LLVMValueRef x, g, dy, base, mean, r; /* the row's pointers and statistics so far */
	int which;                            /* the sum that norm_term adds up */
	const KDesc *d;
	LLVMValueRef out, b, s1, s2;          /* what the result needs besides */
	LLVMValueRef res, out2;               /* a residual add's other operand, and the second result (mode) */
	LLVMValueRef dyhat;                   /* layernorm_grad's dy hat, the scale's gradient's rows (KDesc.hat) */
} Norm;

/* the row's x at element at: as stored, or (NORM_ADD) the sum a + res, rounded as its store rounds it */
static LLVMValueRef norm_x(K *k, Norm *s, LLVMValueRef at)
{
	LLVMValueRef x = cg_row_load(k, s->x, at);
	if (s->d->mode != NORM_ADD)
		return x;
	return cg_stored(k, LLVMBuildFAdd(k->b, x, cg_row_load(k, s->res, at), ""));
}

static LLVMValueRef norm_hat(K *k, Norm *s, LLVMValueRef at)
{
	return LLVMBuildFMul(k->b, LLVMBuildFSub(k->b, norm_x(k, s, at), cg_splat(k, s->mean), ""), cg_splat(k, s->r), "");
}

/* what layernorm's row sums add up: x, (x - mean)^2, dy g, dy g hat */
static LLVMValueRef norm_term(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	Norm *s = ctx;
	LLVMValueRef v;
	switch (s->which) {
	case 0: return norm_x(k, s, at);
	case 1:
		v = LLVMBuildFSub(k->b, norm_x(k, s, at), cg_splat(k, s->mean), "");
		return LLVMBuildFMul(k->b, v, v, "");
	default:
		v = LLVMBuildFMul(k->b, cg_row_load(k, s->dy, at), cg_row_load(k, s->g, i), "");
		return s->which == 2 ? v : LLVMBuildFMul(k->b, v, norm_hat(k, s, at), "");
	}
}

static LLVMValueRef norm_sum(K *k, Norm *s, int64_t C, int which)
{
	s->which = which;
	return cg_fold(k, s->base, C, false, cg_real(k->g, 0), norm_term, s);
}

/* the result at element at (i in the row) */
static void norm_out(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	Norm *s = ctx;
	LLVMBuilderRef B = k->b;
	LLVMValueRef hat = norm_hat(k, s, at), v;
	if (s->d->kind == OP_LAYERNORM) {
		v = LLVMBuildFAdd(B, LLVMBuildFMul(B, hat, cg_row_load(k, s->g, i), ""), cg_row_load(k, s->b, i), "");
	} else if (s->d->kind == OP_LAYERNORM_HAT) {
		v = hat;
	} else { /* r (dy g - mean(dy g) - hat mean(dy g hat)) */
		s->which = 2;
		v = LLVMBuildFMul(B, cg_splat(k, s->r), LLVMBuildFSub(B, LLVMBuildFSub(B, norm_term(k, s, at, i), cg_splat(k, s->s1), ""),
		                                                       LLVMBuildFMul(B, hat, cg_splat(k, s->s2), ""), ""), "");
	}
	if (s->d->mode == NORM_ADD) { /* the sum, stored as the add stores it */
		cg_row_store(k, s->out2, at, norm_x(k, s, at));
	} else if (s->d->mode >= NORM_GRAD_ADD) {
		/* the gradient as its store rounds it (and stored, where read elsewhere), then res + it; res read
		 * before anything is stored (a result may be at its place) */
		LLVMValueRef res = cg_row_load(k, s->res, at);
		v = cg_stored(k, v);
		if (s->d->mode == NORM_GRAD_ADD_BOTH)
			cg_row_store(k, s->out2, at, v);
		v = LLVMBuildFAdd(B, res, v, "");
	}
	if (s->dyhat) /* hat as layernorm_hat stores it, times dy, as mul stores it */
		cg_row_store(k, s->dyhat, at, LLVMBuildFMul(B, cg_row_load(k, s->dy, at), cg_stored(k, hat), ""));
	cg_row_store(k, s->out, at, v);
}

/* layernorm (x, g, b), layernorm_hat (x), layernorm_grad (x, g, dy): one row
 * per work item; the mean and variance are two passes over the row */
static void body_norm(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef row)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	int64_t C = d->out.dim[d->out.rank - 1];
	LLVMValueRef n = cg_i64(g, C), inv = cg_real(g, 1.0 / (double)C);
	Norm s = {ptrs[1], ptrs[2], ptrs[3], LLVMBuildMul(B, row, n, ""), NULL, NULL, 0, d, ptrs[0], ptrs[3], NULL, NULL,
	          d->mode ? ptrs[4] : NULL, d->mode == NORM_ADD || d->mode == NORM_GRAD_ADD_BOTH ? ptrs[5] : NULL, NULL};
	/* the row's out and x (and dy), and g and b whole, 16-byte aligned: vectors on the GPU; a residual
	 * add's operand and second result, and dy hat, as the row's */
	int np = d->kind == OP_LAYERNORM_HAT ? 2 : 4;
	if (s.res)
		np = s.out2 ? 6 : 5;
	if (d->hat)
		s.dyhat = ptrs[np++]; /* the word after the others */
	LLVMValueRef off[7] = {s.base, s.base, NULL, d->kind == OP_LAYERNORM_GRAD ? s.base : NULL, s.base, s.base, s.base};
	LLVMValueRef at[7] = {ptrs[0], ptrs[1], ptrs[2], ptrs[3], s.res, s.out2, NULL};
	if (d->hat)
		at[np - 1] = s.dyhat; /* after the first 2, 4, 5 or 6 */
	k->aligned = cg_aligned(k, np, at, off);
	s.mean = LLVMBuildFMul(B, norm_sum(k, &s, C, 0), inv, "");
	LLVMValueRef var = LLVMBuildFMul(B, norm_sum(k, &s, C, 1), inv, "");
	s.r = LLVMBuildFDiv(B, cg_real(g, 1), cg_sqrt(k, LLVMBuildFAdd(B, var, cg_real(g, d->attr.value), "")), "");
	if (d->kind == OP_LAYERNORM_GRAD) {
		s.s1 = LLVMBuildFMul(B, norm_sum(k, &s, C, 2), inv, "");
		s.s2 = LLVMBuildFMul(B, norm_sum(k, &s, C, 3), inv, "");
	}
	cg_each(k, s.base, C, norm_out, &s);
	k->aligned = NULL;
}

/* id n of an embedding's ids, and whether it names a row of a V-row table */
static LLVMValueRef embed_id(K *k, LLVMValueRef ids, LLVMValueRef n, int64_t V, LLVMValueRef *in_range)
{
	LLVMValueRef id = LLVMBuildSExt(k->b, LLVMBuildLoad2(k->b, k->g->i32, LLVMBuildGEP2(k->b, k->g->i32, ids, &n, 1, ""), ""), k->g->i64, "");
	*in_range = LLVMBuildICmp(k->b, LLVMIntULT, id, cg_i64(k->g, V), "");
	return id;
}

/* embed: element idx = (n, d) of the result is table[ids[n], d] (0 for an
 * id out of range, which the runtime's data checks rule out);
 * embed_grad: work item (part, d) owns column d of one part of the
 * table's rows (cg_embed_parts), zeroes it, and walks all the ids, adding
 * the rows of g whose id falls in its part (and is not padding_idx, whose
 * row keeps a zero gradient) in the order of the ids: each
 * result is the same sum in the same order however many parts there are,
 * so the bits do not depend on them. On the GPU the parts make the grid:
 * a thread per column alone was 3 blocks for GPT-2, each thread zeroing
 * 50,257 rows. */
int64_t cg_embed_parts(const Cg *g, const KDesc *d)
{
	int64_t V = d->out.dim[0], D = d->out.dim[1], N = ir_numel(d->in[1]);
	/* the CPU: one part, but small tables in up to 4, so that the CPU's tests check the split */
	int64_t p = g->cuda ? (65536 + D - 1) / D : N * V * D <= (1 << 20) ? 4 : 1;
	int64_t per = (V + p - 1) / p;
	return (V + per - 1) / per; /* none empty: 4 parts of 5 rows are 3 of 2 */
}

/* embed_grad's ids a step where they come in 16-byte loads (cg_embed_ids) */
#define EMBED_IDS 8

int cg_embed_ids(const Cg *g, const KDesc *d)
{
	int64_t N = ir_numel(d->in[1]);
	return N % EMBED_IDS || N < EMBED_IDS || g->scalar_rows ? 1 : EMBED_IDS;
}

typedef struct {
	const KDesc *d;
	LLVMValueRef *ptrs, lo, rows, col, cols;
} EmbedGrad;

/* id n (the id given): its row of g added into column col of the result
 * where it falls in this item's part (and is not padding_idx) */
static void embed_add(K *k, EmbedGrad *e, LLVMValueRef n, LLVMValueRef id)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	/* in this part (and so in the table): id - lo below its rows, unsigned */
	LLVMValueRef ok = LLVMBuildICmp(B, LLVMIntULT, LLVMBuildSub(B, id, e->lo, ""), e->rows, "");
	if (e->d->attr.lab.has) /* padding_idx's ids add nothing */
		ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntNE, id, cg_i64(g, e->d->attr.lab.ignore), ""), "");
	LLVMBasicBlockRef join = cg_if(k, ok);
	LLVMValueRef at = LLVMBuildAdd(B, LLVMBuildMul(B, id, e->cols, ""), e->col, "");
	LLVMValueRef gv = cg_load(k, e->ptrs[1], LLVMBuildAdd(B, LLVMBuildMul(B, n, e->cols, ""), e->col, ""));
	cg_store(k, e->ptrs[0], at, LLVMBuildFAdd(B, cg_load(k, e->ptrs[0], at), gv, ""));
	cg_end_if(k, join);
}

static void body_embed(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	bool grad = d->kind == OP_EMBED_GRAD;
	Type table = grad ? d->out : d->in[0];
	int64_t V = table.dim[0], D = table.dim[1];
	LLVMValueRef cols = cg_i64(g, D), ok;
	if (!grad) {
		LLVMValueRef n = LLVMBuildUDiv(B, idx, cols, ""), col = LLVMBuildURem(B, idx, cols, "");
		LLVMValueRef id = embed_id(k, ptrs[2], n, V, &ok);
		id = LLVMBuildSelect(B, ok, id, cg_i64(g, 0), "");
		LLVMValueRef v = cg_load(k, ptrs[1], LLVMBuildAdd(B, LLVMBuildMul(B, id, cols, ""), col, ""));
		cg_store(k, ptrs[0], idx, LLVMBuildSelect(B, ok, v, cg_real(g, 0), ""));
		return;
	}
	int64_t per = (V + cg_embed_parts(g, d) - 1) / cg_embed_parts(g, d);
	LLVMValueRef col = LLVMBuildURem(B, idx, cols, ""), part = LLVMBuildUDiv(B, idx, cols, "");
	LLVMValueRef lo = LLVMBuildMul(B, part, cg_i64(g, per), "");
	LLVMValueRef hi = LLVMBuildAdd(B, lo, cg_i64(g, per), "");
	hi = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, hi, cg_i64(g, V), ""), hi, cg_i64(g, V), "");
	LLVMValueRef rows = LLVMBuildSub(B, hi, lo, "");
	/* an absorbed acc: the rows added into what the destination holds */
	if (!d->accumulate) {
		Loop z = cg_for(k, rows);
		cg_store(k, ptrs[0], LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, lo, z.i, ""), cols, ""), col, ""), cg_real(g, 0));
		cg_for_end(k, &z, rows);
	}
	EmbedGrad e = {d, ptrs, lo, rows, col, cols};
	int64_t N = ir_numel(d->in[1]);
	LLVMValueRef nn = cg_i64(g, N);
	if (cg_embed_ids(g, d) == 1) {
		Loop l = cg_for(k, nn);
		embed_add(k, &e, l.i, embed_id(k, ptrs[2], l.i, V, &ok));
		cg_for_end(k, &l, nn);
		return;
	}
	/* EMBED_IDS ids a step, in 16-byte loads where the ids are aligned (the plan's are), else one at a time */
	LLVMValueRef aligned = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, LLVMBuildPtrToInt(B, ptrs[2], g->i64, ""), cg_i64(g, 15), ""),
	                                     cg_i64(g, 0), "");
	LLVMBasicBlockRef wide = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "ids_wide");
	LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "ids_one");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "ids_done");
	LLVMBuildCondBr(B, aligned, wide, one);
	LLVMPositionBuilderAtEnd(B, wide);
	LLVMValueRef steps = cg_i64(g, N / EMBED_IDS);
	Loop l = cg_for(k, steps);
	LLVMTypeRef v4 = LLVMVectorType(g->i32, 4);
	LLVMValueRef first = LLVMBuildMul(B, l.i, cg_i64(g, EMBED_IDS), ""), four[EMBED_IDS / 4];
	for (int j = 0; j < EMBED_IDS / 4; j++) { /* the loads first: all in flight at once */
		LLVMValueRef at = LLVMBuildAdd(B, first, cg_i64(g, 4 * j), "");
		LLVMValueRef p = LLVMBuildBitCast(B, LLVMBuildGEP2(B, g->i32, ptrs[2], &at, 1, ""), LLVMPointerType(v4, 0), "");
		four[j] = LLVMBuildLoad2(B, v4, p, "");
		LLVMSetAlignment(four[j], 16);
	}
	/* whether any of the step's ids falls in this part, tested for all of them at once (32-bit, no branch
	 * between): a branch an id, each waiting on the last, took 134 cycles an id on the H200 (cost.c); an id
	 * falls in one part of the rows in ~86 (GPT-2's), so most steps add nothing */
	LLVMValueRef ids[EMBED_IDS], any = NULL;
	LLVMValueRef lo32 = LLVMBuildTrunc(B, lo, g->i32, ""), rows32 = LLVMBuildTrunc(B, rows, g->i32, "");
	for (int j = 0; j < EMBED_IDS; j++) {
		ids[j] = LLVMBuildExtractElement(B, four[j / 4], cg_i64(g, j % 4), "");
		LLVMValueRef in = LLVMBuildICmp(B, LLVMIntULT, LLVMBuildSub(B, ids[j], lo32, ""), rows32, "");
		any = any ? LLVMBuildOr(B, any, in, "") : in;
	}
	LLVMBasicBlockRef join = cg_if(k, any);
	for (int j = 0; j < EMBED_IDS; j++) /* in the ids' order, each tested again as before */
		embed_add(k, &e, LLVMBuildAdd(B, first, cg_i64(g, j), ""), LLVMBuildSExt(B, ids[j], g->i64, ""));
	cg_end_if(k, join);
	cg_for_end(k, &l, steps);
	LLVMBuildBr(B, done);
	LLVMPositionBuilderAtEnd(B, one);
	Loop l1 = cg_for(k, nn);
	embed_add(k, &e, l1.i, embed_id(k, ptrs[2], l1.i, V, &ok));
	cg_for_end(k, &l1, nn);
	LLVMBuildBr(B, done);
	LLVMPositionBuilderAtEnd(B, done);
}

/* mean over the rows (those whose label is not ignored) of lse - the
 * label's logit. On the GPU each warp takes a row at a time, its 32 lanes
 * sharing the row's columns (coalesced reads, shuffles only); the warps'
 * sums then meet in one block reduction, lane 0 of each warp adding its
 * warp's. (A row per lane read the logits 50,257 floats apart across a
 * warp.) In dp_step's kernels on the GPU that is two launches
 * (cg_host_nn): stage 1, a grid of blocks (cg_xent_blocks), block b's
 * warps taking rows 8b + w, then every 8 x blocks-th, each block's sums
 * into a module array; stage 2, one block adding those in a fixed order.
 * No atomics: the bits do not depend on which block ends first. (One
 * block for all rows took 516 ms of GPT-2's 1.2 s step on an H100,
 * bench/RESULTS.md.) Elsewhere (the CPU, a fused loop) one kernel, but
 * for the CPU's twin of the two launches (DPC_CPU_SPLITS, testing). */
#define TOTAL_BLOCKS 1024

/* mse and count_labels likewise (body_total): stage 1's block b adds
 * elements 256 b + lane, then every 256 x blocks-th; a block for each 2,048
 * elements, at most TOTAL_BLOCKS. (mse over 8 M elements was one block.) */
int64_t cg_total_blocks(const KDesc *d)
{
	int64_t b = (int)d->kind == OP_XENT ? (cg_rows(d->in[0]) + 7) / 8 : (ir_numel(d->in[0]) + 2047) / 2048;
	return b < TOTAL_BLOCKS ? b : TOTAL_BLOCKS;
}

/* the two stages' module array: the blocks' sums, then (cross_entropy) their counts */
static LLVMValueRef total_partials(K *k) { return cg_global_array(k, k->g->real == k->g->f64 ? "dp_total_f64" : "dp_total_f32", 2 * TOTAL_BLOCKS); }

static LLVMValueRef part_at(K *k, LLVMValueRef p, LLVMValueRef i) { return LLVMBuildGEP2(k->b, k->g->real, p, &i, 1, ""); }

/* stage 2: the blocks' sums, each lane adding every 256th in order, then
 * the block's fixed tree; divided by the count (cross_entropy) or the
 * elements (mse), or the sum itself (count_labels) */
static void total_of_blocks(K *k, const KDesc *d, LLVMValueRef *ptrs)
{
	Cg *g = k->g;
	int64_t G = cg_total_blocks(d);
	LLVMValueRef p = total_partials(k), n = cg_i64(g, G), zero = cg_real(g, 0);
	Loop l = cg_for_lanes(k, n);
	Acc s = cg_acc(k, &l, zero), c = cg_acc(k, &l, zero);
	LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, LLVMBuildLoad2(k->b, g->real, part_at(k, p, l.i), ""), "");
	LLVMValueRef nc = LLVMBuildFAdd(k->b, c.phi, LLVMBuildLoad2(k->b, g->real, part_at(k, p, LLVMBuildAdd(k->b, l.i, n, "")), ""), "");
	cg_acc_next(k, &s, ns);
	cg_acc_next(k, &c, nc);
	cg_for_end(k, &l, n);
	LLVMValueRef total = cg_acc_result(k, &l, zero, ns), count = cg_acc_result(k, &l, zero, nc);
	total = cg_all_reduce(k, total, false);
	if ((int)d->kind == OP_XENT_COUNT) {
		cg_store_once(k, ptrs[0], cg_i64(g, 0), total);
		return;
	}
	count = (int)d->kind == OP_MSE ? cg_real(g, (double)ir_numel(d->in[0]))
	      : d->attr.lab.has ? cg_all_reduce(k, count, false) : cg_real(g, (double)cg_rows(d->in[0]));
	cg_store_once(k, ptrs[0], cg_i64(g, 0), LLVMBuildFDiv(k->b, total, count, ""));
}

/* mse's squared differences, or count_labels' labels that count, element i */
static LLVMValueRef total_term(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef i)
{
	if ((int)d->kind == OP_XENT_COUNT) {
		LLVMValueRef valid;
		row_label(k, d, ptrs[1], i, &valid);
		return LLVMBuildSelect(k->b, valid, cg_real(k->g, 1), cg_real(k->g, 0), "");
	}
	LLVMValueRef diff = LLVMBuildFSub(k->b, cg_load(k, ptrs[1], i), cg_load(k, ptrs[2], i), "");
	return LLVMBuildFMul(k->b, diff, diff, "");
}

/* mse and count_labels: one block over every element, or on the GPU
 * stage 1's share of block `item` (cg_total_blocks) into the module
 * array, then stage 2 */
static void body_total(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef item)
{
	Cg *g = k->g;
	if (d->stage == 2) {
		total_of_blocks(k, d, ptrs);
		return;
	}
	LLVMValueRef n = cg_i64(g, ir_numel(d->in[0])), zero = cg_real(g, 0);
	Loop l = d->stage == 1 ? cg_for_from(k, LLVMBuildAdd(k->b, LLVMBuildMul(k->b, item, cg_i64(g, k->lanes), ""), k->lane, ""),
	                                     k->lanes * cg_total_blocks(d), n)
	                       : cg_for_lanes(k, n);
	Acc s = cg_acc(k, &l, zero);
	LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, total_term(k, d, ptrs, l.i), "");
	cg_acc_next(k, &s, ns);
	cg_for_end(k, &l, n);
	LLVMValueRef total = cg_all_reduce(k, cg_acc_result(k, &l, zero, ns), false);
	if (d->stage == 1) {
		LLVMBasicBlockRef put = cg_if(k, LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(g, 0), ""));
		LLVMBuildStore(k->b, total, part_at(k, total_partials(k), item));
		cg_end_if(k, put);
		return;
	}
	if ((int)d->kind == OP_MSE)
		total = LLVMBuildFDiv(k->b, total, cg_real(g, (double)ir_numel(d->in[0])), "");
	cg_store_once(k, ptrs[0], cg_i64(g, 0), total);
}

static void body_xent(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef item)
{
	Cg *g = k->g;
	if (d->stage == 2) {
		total_of_blocks(k, d, ptrs);
		return;
	}
	int64_t C = d->in[0].dim[d->in[0].rank - 1], R = cg_rows(d->in[0]);
	LLVMValueRef nr = cg_i64(g, R), zero = cg_real(g, 0);
	int lanes = k->lanes;
	LLVMValueRef lane = k->lane;
	bool warps = cg_gpu_form(k) && lanes >= 64;
	Loop l;
	if (warps) {
		int64_t stride = lanes / 32 * (d->stage == 1 ? cg_total_blocks(d) : 1);
		LLVMValueRef first = LLVMBuildLShr(k->b, lane, cg_i64(g, 5), "");
		if (d->stage == 1)
			first = LLVMBuildAdd(k->b, first, LLVMBuildMul(k->b, item, cg_i64(g, lanes / 32), ""), "");
		k->lanes = 32;
		k->lane = LLVMBuildAnd(k->b, lane, cg_i64(g, 31), "");
		l = cg_for_from(k, first, stride, nr);
	} else if (d->stage == 1) { /* the CPU's twin (DPC_CPU_SPLITS): rows lanes b + lane, then every lanes x blocks-th */
		l = cg_for_from(k, LLVMBuildAdd(k->b, LLVMBuildMul(k->b, item, cg_i64(g, lanes), ""), lane, ""),
		                lanes * cg_total_blocks(d), nr);
	} else {
		l = cg_for_lanes(k, nr);
	}
	Acc s = cg_acc(k, &l, zero), c = cg_acc(k, &l, zero);
	LLVMValueRef base = LLVMBuildMul(k->b, l.i, cg_i64(g, d->pitch[0] ? d->pitch[0] : C), ""), valid;
	LLVMValueRef lab = row_label(k, d, ptrs[2], l.i, &valid);
	if (warps) /* a row's 16-byte vectors where it is aligned */
		k->aligned = cg_aligned(k, 1, &ptrs[1], &base);
	LLVMValueRef mx, lse = cg_row_lse(k, ptrs[1], base, C, warps, &mx);
	k->aligned = NULL;
	LLVMValueRef pick = cg_load(k, ptrs[1], LLVMBuildAdd(k->b, base, lab, ""));
	LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, LLVMBuildSelect(k->b, valid, LLVMBuildFSub(k->b, lse, pick, ""), zero, ""), "");
	LLVMValueRef nc = LLVMBuildFAdd(k->b, c.phi, LLVMBuildSelect(k->b, valid, cg_real(g, 1), zero, ""), "");
	cg_acc_next(k, &s, ns);
	cg_acc_next(k, &c, nc);
	cg_for_end(k, &l, nr);
	/* both phis first: all_reduce starts new blocks */
	LLVMValueRef total = cg_acc_result(k, &l, zero, ns), count = cg_acc_result(k, &l, zero, nc);
	if (warps) {
		/* every lane of a warp holds its warp's sums: lane 0's count */
		LLVMValueRef first = LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(g, 0), "");
		total = LLVMBuildSelect(k->b, first, total, zero, "");
		count = LLVMBuildSelect(k->b, first, count, zero, "");
		k->lanes = lanes;
		k->lane = lane;
	}
	/* every lane through the block's reductions, then lane 0 alone */
	total = cg_all_reduce(k, total, false);
	count = d->attr.lab.has ? cg_all_reduce(k, count, false) : cg_real(g, (double)R);
	if (d->stage == 1) {
		/* this block's sums */
		LLVMValueRef p = total_partials(k);
		LLVMBasicBlockRef put = cg_if(k, LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(g, 0), ""));
		LLVMBuildStore(k->b, total, part_at(k, p, item));
		LLVMBuildStore(k->b, count, part_at(k, p, LLVMBuildAdd(k->b, item, cg_i64(g, cg_total_blocks(d)), "")));
		cg_end_if(k, put);
		return;
	}
	cg_store_once(k, ptrs[0], cg_i64(g, 0), LLVMBuildFDiv(k->b, total, count, ""));
}

/* a - b for i64 values */
static LLVMValueRef isub(K *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSub(k->b, a, b, ""); }

/* element (r, c) of the plane that starts at base, when it is inside the
 * image, else `outside`; whether it is in *inside unless NULL */
static LLVMValueRef pool_cell(K *k, LLVMValueRef ptr, LLVMValueRef base, LLVMValueRef r, LLVMValueRef c, int64_t H, int64_t W,
                              LLVMValueRef outside, LLVMValueRef *inside)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef z = cg_i64(g, 0);
	LLVMValueRef in = LLVMBuildAnd(B, LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, r, z, ""), LLVMBuildICmp(B, LLVMIntSLT, r, cg_i64(g, H), ""), ""),
	                               LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, c, z, ""), LLVMBuildICmp(B, LLVMIntSLT, c, cg_i64(g, W), ""), ""), "");
	/* outside: the plane's first element is read, and not used */
	LLVMValueRef at = LLVMBuildSelect(B, in, LLVMBuildAdd(B, LLVMBuildMul(B, r, cg_i64(g, W), ""), c, ""), z, "");
	LLVMValueRef v = cg_load(k, ptr, LLVMBuildAdd(B, base, at, ""));
	if (inside)
		*inside = in;
	return LLVMBuildSelect(B, in, v, outside, "");
}

/* The pools, an element per item. Forward: a window's max or mean, its
 * elements in order (padding: never a max, zeros in a mean). The gradient
 * gathers, for an element of x, from each window that holds it: an even
 * share (avgpool_dx), or, when it ties for the window's max, the gradient
 * over the count of the window's elements that do (maxpool_dx finds each
 * window's max and counts them again from x, in one pass: the result is
 * not kept for the gradient). Gathers write once: no atomics, the same
 * bits on every run. */
static void body_pool(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	const Window *w = &d->attr.win;
	bool dx = d->kind == OP_MAXPOOL2D_DX || d->kind == OP_AVGPOOL2D_DX;
	bool max = d->kind == OP_MAXPOOL2D || d->kind == OP_MAXPOOL2D_DX;
	Type img = dx ? d->out : d->in[0];
	int64_t H = img.dim[2], W = img.dim[3], Ho, Wo, K2 = (int64_t)w->kh * w->kw;
	ops_window_out(w, img, &Ho, &Wo);
	LLVMValueRef zero = cg_real(g, 0), z = cg_i64(g, 0), nk = cg_i64(g, K2), kw = cg_i64(g, w->kw);
	if (!dx) {
		LLVMValueRef plane = LLVMBuildUDiv(B, idx, cg_i64(g, Ho * Wo), ""), at = LLVMBuildURem(B, idx, cg_i64(g, Ho * Wo), "");
		LLVMValueRef h0 = isub(k, LLVMBuildMul(B, LLVMBuildUDiv(B, at, cg_i64(g, Wo), ""), cg_i64(g, w->sh), ""), cg_i64(g, w->ph));
		LLVMValueRef x0 = isub(k, LLVMBuildMul(B, LLVMBuildURem(B, at, cg_i64(g, Wo), ""), cg_i64(g, w->sw), ""), cg_i64(g, w->pw));
		LLVMValueRef base = LLVMBuildMul(B, plane, cg_i64(g, H * W), "");
		LLVMValueRef init = cg_real(g, max ? -INFINITY : 0);
		Loop l = cg_for(k, nk);
		Acc s = cg_acc(k, &l, init);
		LLVMValueRef a = LLVMBuildUDiv(B, l.i, kw, ""), b = LLVMBuildURem(B, l.i, kw, "");
		LLVMValueRef v = pool_cell(k, ptrs[1], base, LLVMBuildAdd(B, h0, a, ""), LLVMBuildAdd(B, x0, b, ""), H, W, init, NULL);
		LLVMValueRef ns = max ? LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, v, s.phi, ""), v, s.phi, "") : LLVMBuildFAdd(B, s.phi, v, "");
		cg_acc_next(k, &s, ns);
		cg_for_end(k, &l, nk);
		LLVMValueRef r = cg_acc_result(k, &l, init, ns);
		cg_store(k, ptrs[0], idx, max ? r : LLVMBuildFDiv(B, r, cg_real(g, (double)K2), ""));
		return;
	}
	LLVMValueRef plane = LLVMBuildUDiv(B, idx, cg_i64(g, H * W), ""), at = LLVMBuildURem(B, idx, cg_i64(g, H * W), "");
	LLVMValueRef h = LLVMBuildUDiv(B, at, cg_i64(g, W), ""), x = LLVMBuildURem(B, at, cg_i64(g, W), "");
	LLVMValueRef xv = max ? cg_load(k, ptrs[1], idx) : NULL;
	Loop l = cg_for(k, nk);
	Acc s = cg_acc(k, &l, zero);
	/* the window (ho, wo) whose element (a, b) this is, if there is one */
	LLVMValueRef a = LLVMBuildUDiv(B, l.i, kw, ""), b = LLVMBuildURem(B, l.i, kw, "");
	LLVMValueRef hh = isub(k, LLVMBuildAdd(B, h, cg_i64(g, w->ph), ""), a), xx = isub(k, LLVMBuildAdd(B, x, cg_i64(g, w->pw), ""), b);
	LLVMValueRef sh = cg_i64(g, w->sh), sw = cg_i64(g, w->sw);
	LLVMValueRef ok = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, hh, z, ""), LLVMBuildICmp(B, LLVMIntSGE, xx, z, ""), "");
	ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildSRem(B, hh, sh, ""), z, ""), "");
	ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildSRem(B, xx, sw, ""), z, ""), "");
	LLVMValueRef ho = LLVMBuildSDiv(B, hh, sh, ""), wo = LLVMBuildSDiv(B, xx, sw, "");
	ok = LLVMBuildAnd(B, ok, LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, ho, cg_i64(g, Ho), ""),
	                                      LLVMBuildICmp(B, LLVMIntSLT, wo, cg_i64(g, Wo), ""), ""), "");
	/* outside every window: window (0, 0) is read, and nothing added */
	ho = LLVMBuildSelect(B, ok, ho, z, "");
	wo = LLVMBuildSelect(B, ok, wo, z, "");
	LLVMValueRef win = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, plane, cg_i64(g, Ho), ""), ho, ""), cg_i64(g, Wo), ""), wo, "");
	LLVMValueRef gv = cg_load(k, ptrs[max ? 2 : 1], win), part;
	if (max) {
		/* the window's max and the count tied for it, in one pass: a larger element starts the count again */
		LLVMValueRef in, ninf = cg_real(g, -INFINITY), one = cg_real(g, 1);
		LLVMValueRef base = LLVMBuildMul(B, plane, cg_i64(g, H * W), "");
		LLVMValueRef r0 = isub(k, LLVMBuildMul(B, ho, sh, ""), cg_i64(g, w->ph)), c0 = isub(k, LLVMBuildMul(B, wo, sw, ""), cg_i64(g, w->pw));
		Loop t = cg_for(k, nk);
		Acc mx = cg_acc(k, &t, ninf), c = cg_acc(k, &t, zero);
		LLVMValueRef ta = LLVMBuildUDiv(B, t.i, kw, ""), tb = LLVMBuildURem(B, t.i, kw, "");
		LLVMValueRef tv = pool_cell(k, ptrs[1], base, LLVMBuildAdd(B, r0, ta, ""), LLVMBuildAdd(B, c0, tb, ""), H, W, ninf, &in);
		LLVMValueRef above = LLVMBuildAnd(B, in, LLVMBuildFCmp(B, LLVMRealOGT, tv, mx.phi, ""), "");
		LLVMValueRef tie = LLVMBuildAnd(B, in, LLVMBuildFCmp(B, LLVMRealOEQ, tv, mx.phi, ""), "");
		LLVMValueRef nm = LLVMBuildSelect(B, above, tv, mx.phi, "");
		LLVMValueRef nc = LLVMBuildSelect(B, above, one, LLVMBuildSelect(B, tie, LLVMBuildFAdd(B, c.phi, one, ""), c.phi, ""), "");
		cg_acc_next(k, &mx, nm);
		cg_acc_next(k, &c, nc);
		cg_for_end(k, &t, nk);
		LLVMValueRef yv = cg_acc_result(k, &t, ninf, nm), ties = cg_acc_result(k, &t, zero, nc);
		LLVMValueRef mine = LLVMBuildAnd(B, ok, LLVMBuildFCmp(B, LLVMRealOEQ, xv, yv, ""), "");
		part = LLVMBuildSelect(B, mine, LLVMBuildFDiv(B, gv, ties, ""), zero, "");
	} else {
		part = LLVMBuildSelect(B, ok, LLVMBuildFDiv(B, gv, cg_real(g, (double)K2), ""), zero, "");
	}
	LLVMValueRef ns = LLVMBuildFAdd(B, s.phi, part, "");
	cg_acc_next(k, &s, ns);
	cg_for_end(k, &l, nk);
	cg_store(k, ptrs[0], idx, cg_acc_result(k, &l, zero, ns));
}

void cg_kernel_nn(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef e = cg_vec_index(k, idx);
	switch ((int)d->kind) {
	case OP_XENT_GRAD:
		body_xent_grad(k, d, ptrs, idx);
		return;
	case OP_XENT:
		body_xent(k, d, ptrs, idx);
		return;
	case OP_LAYERNORM:
	case OP_LAYERNORM_HAT:
	case OP_LAYERNORM_GRAD:
		body_norm(k, d, ptrs, idx);
		return;
	case OP_EMBED:
	case OP_EMBED_GRAD:
		body_embed(k, d, ptrs, idx);
		return;
	case OP_MAXPOOL2D:
	case OP_AVGPOOL2D:
	case OP_MAXPOOL2D_DX:
	case OP_AVGPOOL2D_DX:
		body_pool(k, d, ptrs, idx);
		return;
	case OP_DROPOUT: {
		/* element i is kept when the top 53 bits of mix(key ^ i) reach p 2^53; in evaluation
		 * (word 3 is 0) every element passes unscaled. A vector of k->vec elements from e (16-byte
		 * accesses: bf16's 2-byte ones kept too few bytes in flight), each element drawn as alone */
		LLVMValueRef keep = k->vec > 1 ? LLVMGetUndef(LLVMVectorType(LLVMInt1TypeInContext(g->ctx), (unsigned)k->vec)) : NULL;
		for (int j = 0; j < k->vec; j++) {
			LLVMValueRef at = LLVMBuildAdd(B, e, cg_i64(g, j), "");
			LLVMValueRef draw = LLVMBuildLShr(B, cg_mix(g, B, LLVMBuildXor(B, args[2], at, "")), cg_i64(g, 11), "");
			LLVMValueRef kj = LLVMBuildICmp(B, LLVMIntUGE, draw, LLVMConstInt(g->i64, dp_drop_threshold(d->attr.drop.p), 0), "");
			keep = k->vec > 1 ? LLVMBuildInsertElement(B, keep, kj, cg_i64(g, j), "") : kj;
		}
		LLVMValueRef on = LLVMBuildICmp(B, LLVMIntNE, args[3], cg_i64(g, 0), "");
		LLVMValueRef x = cg_vload(k, ptrs[1], e), scaled = LLVMBuildFMul(B, x, cg_splat(k, cg_real(g, 1 / (1 - d->attr.drop.p))), "");
		LLVMValueRef train = LLVMBuildSelect(B, keep, scaled, cg_splat(k, cg_real(g, 0)), "");
		cg_vstore(k, ptrs[0], e, LLVMBuildSelect(B, on, train, x, ""));
		return;
	}
	case OP_XENT_COUNT:
	case OP_MSE:
		body_total(k, d, ptrs, idx);
		return;
	case OP_MSE_GRAD: {
		LLVMValueRef scale = LLVMBuildFMul(B, cg_load(k, ptrs[3], cg_i64(g, 0)), cg_real(g, 2.0 / (double)ir_numel(d->out)), "");
		LLVMValueRef diff = LLVMBuildFSub(B, cg_vload(k, ptrs[1], e), cg_vload(k, ptrs[2], e), "");
		cg_vstore(k, ptrs[0], e, LLVMBuildFMul(B, cg_splat(k, scale), diff, ""));
		return;
	}
	default:
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	}
}

/* conv2d and its gradients: rt_conv, with the shape as a constant table and
 * the planned workspace */
static void lower_conv(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	int kind = op->kind == OP_CONV2D ? 0 : op->kind == OP_CONV2D_DX ? 1 : 2;
	/* x, w, y: the operands and result in the forward's roles */
	int v[3];
	if (kind == 0)
		v[0] = op->in[0], v[1] = op->in[1], v[2] = op->out;
	else if (kind == 1)
		v[0] = op->out, v[1] = op->in[1], v[2] = op->in[0];
	else
		v[0] = op->in[0], v[1] = op->out, v[2] = op->in[1];
	Type x = ir_vtype(p, v[0]), w = ir_vtype(p, v[1]), y = ir_vtype(p, v[2]);
	const Window *win = &op->attr.win;
	int64_t dims[RT_CONV_DIMS] = {[RT_CONV_N] = x.dim[0], [RT_CONV_C] = x.dim[1], [RT_CONV_H] = x.dim[2],
	                              [RT_CONV_W] = x.dim[3], [RT_CONV_O] = w.dim[0], [RT_CONV_HO] = y.dim[2],
	                              [RT_CONV_WO] = y.dim[3], [RT_CONV_KH] = win->kh, [RT_CONV_KW] = win->kw,
	                              [RT_CONV_SH] = win->sh, [RT_CONV_SW] = win->sw, [RT_CONV_PH] = win->ph,
	                              [RT_CONV_PW] = win->pw, [RT_CONV_DH] = win->dh, [RT_CONV_DW] = win->dw,
	                              [RT_CONV_G] = ir_groups(win)};
	LLVMValueRef table = cg_i64_table(g, "dp_conv", dims, RT_CONV_DIMS);
	LLVMTypeRef ft, pt[9] = {g->i8p, g->i32, g->i32, g->i64p, g->i64, g->i64, g->i64, g->i64, g->i64};
	LLVMValueRef f = cg_declare(g, "rt_conv", LLVMVoidTypeInContext(g->ctx), pt, 9, &ft);
	LLVMValueRef args[9] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)kind, 0),
	                        LLVMConstInt(g->i32, (unsigned long long)ir_dt_bytes(x.dt), 0),
	                        LLVMBuildBitCast(g->b, table, g->i64p, ""), NULL, NULL, NULL, NULL,
	                        cg_i64(g, ir_bytes(p, ir_vtype(p, op->in[2])))};
	for (int i = 0; i < 3; i++)
		args[4 + i] = cg_addr(h, v[i]);
	args[7] = cg_addr(h, op->in[2]);
	cg_call(h, ft, f, args, 9);
	cg_cost_conv(h, op, ir_bytes(p, x) + ir_bytes(p, w) + ir_bytes(p, y));
}

bool cg_host_nn(Host *h, Op *op)
{
	if (op->kind == OP_CONV2D || op->kind == OP_CONV2D_DX || op->kind == OP_CONV2D_DW) {
		lower_conv(h, op);
		return true;
	}
	if ((op->kind == OP_XENT || op->kind == OP_MSE || op->kind == OP_XENT_COUNT) && (h->g->cuda || h->g->cpu_splits) &&
	    !h->device) {
		/* over the whole grid in two launches (body_xent, body_total); on the CPU too with DPC_CPU_SPLITS */
		Program *p = h->g->p;
		KDesc d = cg_kdesc(op);
		d.nin = op->nin;
		d.out = ir_vtype(p, op->out);
		LLVMValueRef words[3] = {cg_addr(h, op->out)};
		for (int i = 0; i < op->nin; i++) {
			d.in[i] = ir_vtype(p, op->in[i]);
			words[1 + i] = cg_addr(h, op->in[i]);
		}
		d.pitch[0] = p->values.data[op->in[0]].pitch;
		for (d.stage = 1; d.stage <= 2; d.stage++)
			cg_launch(h, &d, words, 1 + op->nin);
		return true;
	}
	if (op->kind != OP_DROPOUT)
		return false;
	/* the result, x, the key of this op's draws in this iteration (common/rng.h),
	 * and 1 while training (0 in evaluation: keep everything) */
	Program *p = h->g->p;
	LLVMBuilderRef b = h->g->b;
	KDesc d = cg_kdesc(op);
	d.nin = 1;
	d.in[0] = ir_vtype(p, op->in[0]);
	d.out = d.in[0];
	LLVMValueRef out = cg_addr(h, op->out), x = cg_addr(h, op->in[0]);
	LLVMValueRef key = LLVMBuildCall2(b, h->t_key, h->f_key, &h->ctx, 1, "");
	key = cg_mix(h->g, b, LLVMBuildXor(b, key, cg_i64(h->g, op->attr.drop.site), ""));
	for (int j = 1; j < op->nin; j++)
		key = cg_mix(h->g, b, LLVMBuildXor(b, key, h->index[op->in[j]], ""));
	LLVMValueRef words[4];
	words[0] = out;
	words[1] = x;
	words[2] = key;
	words[3] = LLVMBuildCall2(b, h->t_on, h->f_on, &h->ctx, 1, "");
	cg_launch(h, &d, words, 4);
	return true;
}

/* ---- a layernorm and the residual add next to it, one kernel ----
 * A pre-LN block adds its branch into the residual stream and normalizes
 * the sum (x = a + res; m = layernorm(x, g, b)); its adjoint adds the
 * layernorm's gradient into the stream's (y = res + layernorm_grad(x, g,
 * dy)). Each pair is one kernel over the rows (KDesc.mode, body_norm): the
 * sum made again at each pass over the row from a and res, rounded as its
 * store rounds it, and stored with the result; the gradient rounded as
 * stored, then added. The same bits as the two kernels (tests/kernels);
 * where Program.epilogues asks, and the results share no bytes with the
 * operands but each one's own place (an element read and written by one
 * thread), as a fused kernel allows. */
static bool full(Program *p, int v, Type t)
{
	return cg_operand_in_arena(p, v) && ir_type_eq(ir_vtype(p, v), t) && ir_row_pitch(p, v) == t.dim[t.rank - 1];
}

/* whether result v may be written in one kernel that reads w: apart, or at the same place and shape */
static bool apart_or_same(Cg *g, int v, int w)
{
	int64_t a, b, c, d;
	if (!cg_in_arena(g->p, v) || !cg_in_arena(g->p, w))
		return true;
	cg_extent(g, v, &a, &b);
	cg_extent(g, w, &c, &d);
	return b <= c || d <= a || (a == c && b == d && ir_type_eq(ir_vtype(g->p, v), ir_vtype(g->p, w)));
}

/* whether v's arena bytes and [lo, hi) meet */
static bool meets(Cg *g, int v, int64_t lo, int64_t hi)
{
	int64_t a, z;
	if (v < 0 || !cg_in_arena(g->p, v))
		return false;
	cg_extent(g, v, &a, &z);
	return a < hi && lo < z;
}

/* A layernorm's adjoint makes the scale's gradient from dy hat: layernorm_hat(x) and mul(dy, it) later
 * in the block, then summed. layernorm_grad(x, g, dy) at b[i] reads x and dy and has hat, so its kernel
 * writes dy hat too: hat as layernorm_hat stores it, the product as mul stores it (the same bits), one pass
 * over the rows and a kernel fewer. Where the hat is read by the mul alone, and nothing from b[i] up to
 * the mul touches the product's bytes or writes x's and dy's: the mul's position in *jm and the hat's in
 * *jh, or false. */
static bool norm_dyhat(Host *h, Block *b, int i, int to, Type t, int *jh, int *jm)
{
	Cg *g = h->g;
	Program *p = g->p;
	Op *ln = b->ops[i], *hat = NULL, *mul = NULL;
	for (int j = i + 1; j < to && !mul; j++) {
		Op *x = b->ops[j];
		if (ir_is_loop(x))
			return false;
		if (!hat && x->kind == OP_LAYERNORM_HAT && x->in[0] == ln->in[0] && x->attr.value == ln->attr.value)
			hat = x, *jh = j;
		else if (hat && x->kind == OP_MUL && x->nin == 2 && (x->in[0] == hat->out || x->in[1] == hat->out))
			mul = x, *jm = j;
	}
	if (!mul || h->uses[hat->out] != 1 || ir_is_result(p, hat->out) || mul->in[mul->in[0] == hat->out] != ln->in[2] ||
	    !full(p, mul->out, t))
		return false;
	int64_t lo, hi, xlo, xhi, dlo, dhi;
	cg_extent(g, mul->out, &lo, &hi);
	for (int r = 0; r < 3; r++) /* apart from the kernel's operands */
		if (meets(g, ln->in[r], lo, hi))
			return false;
	cg_extent(g, ln->in[0], &xlo, &xhi);
	cg_extent(g, ln->in[2], &dlo, &dhi);
	for (int j = i + 1; j < *jm; j++) {
		Op *x = b->ops[j];
		if (j == *jh)
			continue;
		/* the ops between: none touches the product's bytes; none writes x's or dy's (its result, or
		 * an acc's, assign's or store's target) */
		int w = x->out >= 0 ? x->out : x->nin > 0 ? x->in[0] : -1;
		if (meets(g, x->out, lo, hi) || meets(g, w, xlo, xhi) || meets(g, w, dlo, dhi))
			return false;
		for (int k = 0; k < x->nin; k++)
			if (meets(g, x->in[k], lo, hi))
				return false;
	}
	return true;
}

/* v = layernorm_grad(x, g, dy), then y = res + v, as one kernel: res, or -1 where not. (Until dy hat
 * came into the kernel, in bf16 only: in f32 ptxas spilled 28 bytes at the 64 registers it then kept a
 * 256-thread kernel to, and at 96 the model priced it slower than apart; with dy hat f32's kernel is
 * bounded at 96 either way, ptx.c, and the add in it is priced 0.2 ms a GPT-2 step faster than apart.) */
static int grad_add_res(Program *p, Op *ln, Op *add, Type t)
{
	if (!add || add->kind != OP_ADD || add->nin != 2 || !ir_type_eq(ir_vtype(p, add->out), t) ||
	    !full(p, add->in[0], t) || !full(p, add->in[1], t) || !full(p, add->out, t))
		return -1;
	int res = add->in[0] == ln->out ? add->in[1] : add->in[1] == ln->out ? add->in[0] : -1;
	return res == ln->out ? -1 : res;
}

bool cg_norm_add(Host *h, Block *b, int i, int to, int *at, int *nat)
{
	Cg *g = h->g;
	Program *p = g->p;
	/* the op after, past views that make no code (a layer's g and b, sliced from the stacked parameters) */
	int j = i + 1;
	while (b->ops[i]->kind == OP_ADD && j < to && cg_view_here(h, b->ops[j]))
		j++;
	Op *op = b->ops[i], *next = j < to ? b->ops[j] : NULL;
	if (!p->epilogues || h->device)
		return false;
	Op *ln = op->kind == OP_ADD ? next : op, *add = op->kind == OP_ADD ? op : next;
	if (!ln || (ln->kind != OP_LAYERNORM && ln->kind != OP_LAYERNORM_GRAD) || (ln == next) != (ln->kind == OP_LAYERNORM))
		return false;
	Type t = ir_vtype(p, ln->out);
	if (!full(p, ln->out, t) || !full(p, ln->in[0], t) || (ln->kind == OP_LAYERNORM_GRAD && !full(p, ln->in[2], t)))
		return false;
	int mode = 0, res = -1, out = ln->out, out2 = -1, x = ln->in[0], w[7], jh = -1, jm = -1;
	if (ln->kind == OP_LAYERNORM) {
		/* x = a + res, then m = layernorm(x, g, b) */
		if (add->kind != OP_ADD || add->nin != 2 || ln->in[0] != add->out || !ir_type_eq(ir_vtype(p, add->out), t) ||
		    !full(p, add->in[0], t) || !full(p, add->in[1], t) || !full(p, add->out, t))
			return false;
		mode = NORM_ADD, x = add->in[0], res = add->in[1], out = ln->out, out2 = add->out;
	} else {
		if (!norm_dyhat(h, b, i, to, t, &jh, &jm))
			jh = jm = -1;
		else if (jh == i + 1 && jm == i + 2) /* the add after dy hat's ops (ops_adjoint_layernorm's order) */
			j = jm + 1, add = j < to ? b->ops[j] : NULL;
		if ((res = grad_add_res(p, ln, add, t)) >= 0) {
			bool both = h->uses[ln->out] > 1 || ir_is_result(p, ln->out);
			mode = both ? NORM_GRAD_ADD_BOTH : NORM_GRAD_ADD, out = add->out, out2 = both ? ln->out : -1;
		}
		if (mode == 0 && jm < 0)
			return false;
	}
	int reads[4] = {x, ln->in[1], ln->in[2], res}, writes[2] = {out, out2};
	for (int k = 0; k < 2; k++)
		for (int r = 0; r < 4 && writes[k] >= 0; r++)
			if (res >= 0 || r < 3)
				if (!apart_or_same(g, writes[k], reads[r]))
					return false;
	if (out2 >= 0 && !apart_or_same(g, out, out2))
		return false;
	if (mode == NORM_GRAD_ADD_BOTH) /* a word more than KDesc's operands hold */
		jm = -1;
	if (jm >= 0) { /* dy hat apart from the other results and res */
		int64_t lo, hi;
		cg_extent(g, b->ops[jm]->out, &lo, &hi);
		if (meets(g, out, lo, hi) || meets(g, out2, lo, hi) || meets(g, res, lo, hi))
			jm = -1;
	}
	if (mode == 0 && jm < 0)
		return false;
	KDesc d = cg_kdesc(ln);
	d.mode = mode;
	d.hat = jm >= 0;
	d.out = t;
	/* the operands, and the second result and dy hat as operands (their bytes: cost.c) */
	d.nin = (mode ? (out2 >= 0 ? 5 : 4) : 3) + d.hat;
	d.in[0] = t, d.in[1] = ir_vtype(p, ln->in[1]), d.in[2] = ir_vtype(p, ln->in[2]), d.in[3] = t, d.in[4] = t;
	int n = 0;
	w[n++] = out, w[n++] = x, w[n++] = ln->in[1], w[n++] = ln->in[2];
	if (mode)
		w[n++] = res;
	if (out2 >= 0)
		w[n++] = out2;
	if (d.hat)
		w[n++] = b->ops[jm]->out;
	LLVMValueRef words[7];
	for (int k = 0; k < n; k++)
		words[k] = cg_addr(h, w[k]);
	cg_launch(h, &d, words, n);
	*nat = 0;
	if (mode)
		at[(*nat)++] = j;
	if (d.hat)
		at[(*nat)++] = jh, at[(*nat)++] = jm;
	return true;
}
