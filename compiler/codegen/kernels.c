/* cg: the kernels. Each op's kernel body is emitted for one work item by
 * its family's file (cg_kernel_<family>, the op table's last column); here
 * are what every family builds with (loads and stores in the element type,
 * vectors, counted loops, the lanes of a GPU reduction, index arithmetic),
 * the table of distinct kernels, and the x86 wrappers. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"

LLVMValueRef cg_i64(Cg *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }
LLVMValueRef cg_real(Cg *g, double v) { return LLVMConstReal(g->real, v); }

void cg_set_real(Cg *g, DType dt)
{
	g->real = dt == DT_F64 ? g->f64 : LLVMFloatTypeInContext(g->ctx);
	g->bf16 = dt == DT_BF16;
	g->rstore = g->bf16 ? LLVMInt16TypeInContext(g->ctx) : g->real;
	g->realp = LLVMPointerType(g->rstore, 0);
}

/* the element type a kernel's reals are stored in: its result's, else its
 * first real operand's (a cast between reals switches while it runs) */
static DType kernel_dt(Cg *g, const KDesc *d)
{
	/* attention computes in q's type (attn_lse's result is f32 for bf16) */
	if ((int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_HEADS && d->nin)
		return d->in[0].dt;
	if (ir_is_real(d->out.dt))
		return d->out.dt;
	for (int j = 0; j < d->nin; j++)
		if (ir_is_real(d->in[j].dt))
			return d->in[j].dt;
	return g->p->real;
}

LLVMValueRef cg_mix(Cg *g, LLVMBuilderRef b, LLVMValueRef x)
{
	LLVMValueRef c[3] = {LLVMConstInt(g->i64, 0x9e3779b97f4a7c15ull, 0), LLVMConstInt(g->i64, 0xbf58476d1ce4e5b9ull, 0),
	                     LLVMConstInt(g->i64, 0x94d049bb133111ebull, 0)};
	x = LLVMBuildAdd(b, x, c[0], "");
	x = LLVMBuildMul(b, LLVMBuildXor(b, x, LLVMBuildLShr(b, x, cg_i64(g, 30), ""), ""), c[1], "");
	x = LLVMBuildMul(b, LLVMBuildXor(b, x, LLVMBuildLShr(b, x, cg_i64(g, 27), ""), ""), c[2], "");
	return LLVMBuildXor(b, x, LLVMBuildLShr(b, x, cg_i64(g, 31), ""), "");
}

int64_t cg_rows(Type t) { return t.rank ? ir_numel(t) / t.dim[t.rank - 1] : 1; }

/* Which input axes a reduction keeps (and where they are in its result);
 * returns how many elements fold into each output. */
int64_t cg_reduced_axes(const KDesc *d, bool *kept, int *out_axis)
{
	Type t = d->in[0], o = d->out;
	int64_t count = 1;
	int j = 0;
	for (int a = 0; a < t.rank; a++) {
		if (d->kind == OP_SUM_TO) {
			int ta = a - (t.rank - o.rank);
			kept[a] = ta >= 0 && o.dim[ta] == t.dim[a];
			out_axis[a] = ta;
		} else {
			kept[a] = !(d->attr.axes >> a & 1);
			out_axis[a] = kept[a] ? j++ : -1;
		}
		if (!kept[a])
			count *= t.dim[a];
	}
	return count;
}

/* 16 bytes per access where every operand allows it: each vector lies in one
 * row of the result, and every operand either has that row's elements
 * contiguous (at a 16-byte-aligned place, as planned buffers and slices of
 * whole vectors are) or is broadcast along it. */
static int vector_width(Cg *g, const KDesc *d)
{
	int v = (g->cuda ? 16 : 32) / ir_dt_bytes(kernel_dt(g, d));
	switch ((int)d->kind) {
	case K_FUSED:
	case OP_BROADCAST:
		return d->out.rank >= 1 && d->out.dim[d->out.rank - 1] % v == 0 ? v : 1;
	case OP_ACC:
	case OP_ACC_SLICE:
		return ir_numel(d->in[d->nin - 1]) % v == 0 ? v : 1;
	case OP_FILL:
	case OP_MSE_GRAD:
	case OP_DROPOUT:
		return ir_numel(d->out) % v == 0 ? v : 1;
	default:
		return 1;
	}
}

/* Threads per output for a reduction of n contiguous elements: a block from
 * 4096, a warp from 32, else a group of the largest power of two <= n
 * within a warp (1 below 4). */
static int lanes_for(int64_t n)
{
	if (n >= 4096)
		return 256;
	int l = 32;
	while (l > n)
		l /= 2;
	return l >= 4 ? l : 1;
}

/* On the GPU a reduction's output is computed by a group of lanes of a warp,
 * a whole warp or a 256-thread block when it folds elements that lie
 * contiguous along the lanes; partial results combine through warp shuffles. */
static LowClass low_class(const KDesc *d) { return (int)d->kind < OP__COUNT ? ir_ops[d->kind].low : LW_EACH; }

/* A GPU reduction that leaves the GPU short of threads (fewer than 2^16
 * for all its outputs) while each output folds 4,096 elements or more runs
 * in two launches (KDesc.stage, body_reduce): each output's elements in
 * parts of at least 256, enough parts for 2^16 threads, their partial
 * results through a module array of CG_REDUCE_PARTIALS. ResNet's sums over
 * the batch and the pixels were 16 to 64 blocks of 131,072 elements each. */
int64_t cg_reduce_parts(const Cg *g, const KDesc *d)
{
	if ((!g->cuda && !g->cpu_splits) || (int)d->kind >= OP__COUNT || ir_ops[d->kind].low != LW_REDUCE || d->in[0].rank == 0)
		return 1;
	bool kept[IR_MAXRANK];
	int out_axis[IR_MAXRANK];
	int64_t count = cg_reduced_axes(d, kept, out_axis), outputs = ir_numel(d->out);
	if (!g->cuda) /* DPC_CPU_SPLITS: every reduction of more than one element, in up to 7 parts */
		return count > 1 && outputs <= CG_REDUCE_PARTIALS / 7 ? (count < 7 ? count : 7) : 1;
	int64_t lanes = kept[d->in[0].rank - 1] ? 1 : lanes_for(count);
	if (count < 4096 || outputs * lanes >= 65536)
		return 1;
	/* items of a warp or more: 2,048 of them; of a thread: 65,536 */
	int64_t p = ((lanes > 1 ? 2048 : 65536) + outputs - 1) / outputs;
	p = p < count / 256 ? p : count / 256;
	p = p < CG_REDUCE_PARTIALS / outputs ? p : CG_REDUCE_PARTIALS / outputs;
	return p >= 2 ? p : 1;
}

/* a row kernel's lanes a row on the GPU */
static int row_lanes(const KDesc *d)
{
	/* few long rows: a block each, not a warp (ResNet's last groupnorm: 256 rows of 2,048) */
	int64_t n = d->out.dim[d->out.rank - 1];
	int l = lanes_for(n);
	return l == 32 && n >= 1024 && cg_rows(d->out) * 32 < 65536 ? 256 : l;
}

/* DPC_SIMT: the kernels the CPU runs on the SIMT emulator as the GPU would,
 * in blocks of CG_BLOCK threads: the tensor-core attention and the rows */
static bool simt_kernel(Cg *g, const KDesc *d)
{
	if (!g->simt || g->cuda)
		return false;
	if (low_class(d) == LW_HEADS)
		return cg_attn_flash(g, d);
	return low_class(d) == LW_ROWS && (int)d->kind < OP__COUNT && row_lanes(d) > 1;
}

/* a SIMT row kernel's rows in one block: CG_BLOCK / lanes of them, as the GPU's warps take them (cg_gpu_items) */
static int64_t simt_rows_per_block(const KDesc *d) { return d->lanes >= CG_BLOCK ? 1 : CG_BLOCK / d->lanes; }

static int lane_count(Cg *g, const KDesc *d)
{
	if (!g->cuda) {
		if (!simt_kernel(g, d))
			return 1;
		return low_class(d) == LW_HEADS ? CG_BLOCK : row_lanes(d);
	}
	if ((int)d->kind == K_LOOP)
		return CG_BLOCK; /* one item: the block */
	if ((int)d->kind == K_ATTN_ROWS)
		return lanes_for(d->out.dim[2]);
	switch (low_class(d)) {
	case LW_TOTAL:
		return 256;
	case LW_ROWS:
		return row_lanes(d);
	case LW_HEADS: {
		int64_t tq, tk;
		if (cg_attn_flash(g, d))
			return CG_BLOCK;
		return cg_attn_tiles(g, d, &tq, &tk) ? (int)tq : 1;
	}
	case LW_REDUCE: {
		bool kept[IR_MAXRANK];
		int out_axis[IR_MAXRANK];
		int64_t count = cg_reduced_axes(d, kept, out_axis), parts = cg_reduce_parts(g, d);
		if (d->in[0].rank == 0 || kept[d->in[0].rank - 1] || d->stage == 2)
			return 1;
		return lanes_for(d->stage == 1 ? (count + parts - 1) / parts : count);
	}
	default:
		return 1;
	}
}

static uint64_t kdesc_hash(const KDesc *k)
{
	const unsigned char *b = (const unsigned char *)k;
	uint64_t h = 14695981039346656037ull; /* FNV-1a */
	for (size_t i = 0; i < sizeof *k; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* the slot of k's description in g->kslot: its id's, or the empty one it would take */
static int kernel_slot(Cg *g, const KDesc *k)
{
	int mask = g->kslots - 1, s = (int)(kdesc_hash(k) & (uint64_t)mask);
	while (g->kslot[s] >= 0 && memcmp(&g->kernels.data[g->kslot[s]], k, sizeof *k) != 0)
		s = (s + 1) & mask;
	return s;
}

void cg_kernel_shape(Cg *g, KDesc *k)
{
	k->vec = vector_width(g, k);
	k->lanes = lane_count(g, k);
}

/* Equal descriptions (byte for byte) share one kernel; a hash table finds
 * them, so a program with tens of thousands of distinct kernels (a long sum
 * of terms with different constants) is not quadratic here. */
int cg_kernel_id(Cg *g, KDesc *k)
{
	cg_kernel_shape(g, k);
	if (2 * (g->kernels.len + 1) > g->kslots) {
		g->kslots = g->kslots ? 2 * g->kslots : 64;
		g->kslot = ar_alloc(sizeof(int) * (size_t)g->kslots);
		memset(g->kslot, 0xff, sizeof(int) * (size_t)g->kslots);
		for (int i = 0; i < g->kernels.len; i++)
			g->kslot[kernel_slot(g, &g->kernels.data[i])] = i;
	}
	int s = kernel_slot(g, k);
	if (g->kslot[s] < 0) {
		vec_push(&g->kernels, *k);
		g->kslot[s] = g->kernels.len - 1;
	}
	return g->kslot[s];
}

const char *cg_kernel_label(const KDesc *k)
{
	switch ((int)k->kind) {
	case K_SGD: return k->mode ? "sgd_mixed" : "sgd";
	case K_ADAM: return k->mode ? "adam_mixed" : "adam";
	case K_FOLD: return "grad_sum";
	case K_REFRESH: return "compute_copy";
	case K_LOOP: return ar_printf("%s[%lld]", k->actions ? "revolve" : "loop", (long long)k->out.dim[0]);
	case K_ATTN_ROWS: {
		static const char *const what[] = {[AR_SOFTMAX] = "softmax", [AR_STATS] = "stats", [AR_DS] = "ds", [AR_P] = "p",
		                                   [AR_LSE] = "lse", [AR_SOFTMAX_LSE] = "softmax", [AR_DELTA] = "delta",
		                                   [AR_DS_P] = "ds"};
		return ar_printf("attn_%s[%lld,%lld,%lld]", what[k->mode], (long long)k->out.dim[0], (long long)k->out.dim[1],
		                 (long long)k->out.dim[2]);
	}
	}
	Type t = k->out;
	bool norm = (int)k->kind == OP_LAYERNORM || (int)k->kind == OP_LAYERNORM_GRAD;
	const char *s = ar_printf("%s%s%s%s%s[", norm && k->mode == NORM_ADD ? "add+" : "",
	                          (int)k->kind == K_FUSED ? "fused" : ir_ops[k->kind].name, k->stage ? ar_printf(".%d", k->stage) : "",
	                          norm && k->mode >= NORM_GRAD_ADD ? "+add" : "", k->hat ? "+hat" : "");
	for (int i = 0; i < t.rank; i++)
		s = ar_printf("%s%s%lld", s, i ? "," : "", (long long)t.dim[i]);
	return ar_printf("%s]", s);
}

int64_t cg_kernel_size(Cg *g, const KDesc *k)
{
	if ((int)k->kind == K_LOOP)
		return 1;
	if ((int)k->kind == K_ATTN_ROWS) /* a row of the scores per item */
		return k->out.dim[0] * k->out.dim[1];
	if ((int)k->kind == OP_ACC || (int)k->kind == OP_ACC_SLICE)
		return ir_numel(k->in[k->nin - 1]) / k->vec;
	/* the CPU's window kernels: a row of unfold's result, a plane of fold's (movement.c) */
	if (!g->cuda && ((int)k->kind == OP_UNFOLD || (int)k->kind == OP_FOLD))
		return (int)k->kind == OP_UNFOLD ? cg_rows(k->out) : k->out.dim[0] * k->out.dim[1];
	if (low_class(k) == LW_REDUCE && k->stage) /* a part of each output, then each output */
		return ir_numel(k->out) * (k->stage == 1 ? cg_reduce_parts(g, k) : 1);
	switch (low_class(k)) {
	case LW_TOTAL:
		return k->stage == 1 ? cg_total_blocks(k) : 1;
	case LW_ROWS: /* a row per item; on the SIMT emulator a block's rows */
		return !g->cuda && k->lanes > 1 ? (cg_rows(k->out) + simt_rows_per_block(k) - 1) / simt_rows_per_block(k)
		                                : cg_rows(k->out);
	case LW_COLS:
		return k->out.dim[1] * ((int)k->kind == OP_EMBED_GRAD ? cg_embed_parts(g, k) : 1);
	case LW_HEADS: { /* a tile of query (key) rows of one head each, or one row */
		Type q = k->in[0];
		int64_t T = q.dim[q.rank - 2], rows = ir_numel(q) / (q.dim[q.rank - 1] / k->attr.attn.heads), tq, tk;
		if (!cg_attn_tiles(g, k, &tq, &tk))
			return rows;
		return rows / T * ((T + tq - 1) / tq);
	}
	default:
		return ir_numel(k->out) / k->vec;
	}
}

int64_t cg_kernel_work(Cg *g, const KDesc *k)
{
	if ((int)k->kind == OP_MATMUL) /* a dot product per item */
		return k->attr.mm.ta ? k->in[0].dim[k->in[0].rank - 2] : k->in[0].dim[k->in[0].rank - 1];
	if (!g->cuda && ((int)k->kind == OP_UNFOLD || (int)k->kind == OP_FOLD)) /* a row, or a plane's windows */
		return (int)k->kind == OP_UNFOLD ? k->out.dim[2] : ir_numel(k->in[0]) / (k->out.dim[0] * k->out.dim[1]);
	if ((int)k->kind == K_ATTN_ROWS)
		return k->out.dim[2];
	if ((int)k->kind == OP_EMBED_GRAD) /* its part's rows zeroed, and every id read */
		return k->out.dim[0] / cg_embed_parts(g, k) + ir_numel(k->in[1]);
	switch (low_class(k)) {
	case LW_ROWS:
		return (k->out.rank ? k->out.dim[k->out.rank - 1] : 1) * (!g->cuda && k->lanes > 1 ? simt_rows_per_block(k) : 1);
	case LW_HEADS: {
		Type q = k->in[0];
		int64_t T = q.dim[q.rank - 2], dh = q.dim[q.rank - 1] / k->attr.attn.heads, tq, tk;
		return (cg_attn_tiles(g, k, &tq, &tk) ? tq : 1) * T * dh;
	}
	case LW_REDUCE: { /* a vector of results, each folding its share of the operand */
		int64_t out = ir_numel(k->out), in = k->nin ? ir_numel(k->in[0]) : out;
		if (k->stage)
			return k->stage == 2 ? cg_reduce_parts(g, k) : in / out / cg_reduce_parts(g, k);
		return k->vec * (out > 0 && in > out ? in / out : 1);
	}
	default: /* a vector of results */
		return k->vec;
	}
}
/* ---- small builders ---- */
LLVMValueRef cg_ptr(K *k, LLVMValueRef word, LLVMTypeRef pt) { return LLVMBuildIntToPtr(k->b, word, pt, ""); }

/* The same shape of type as v's (a scalar or a vector) with elements `scalar`. */
static LLVMTypeRef like(LLVMValueRef v, LLVMTypeRef scalar)
{
	LLVMTypeRef t = LLVMTypeOf(v);
	return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMVectorType(scalar, LLVMGetVectorSize(t)) : scalar;
}

/* the integer constant c in type t, splat when t is a vector */
static LLVMValueRef int_of(LLVMTypeRef t, unsigned long long c)
{
	if (LLVMGetTypeKind(t) != LLVMVectorTypeKind)
		return LLVMConstInt(t, c, 0);
	LLVMValueRef e[16];
	unsigned n = LLVMGetVectorSize(t);
	for (unsigned i = 0; i < n; i++)
		e[i] = LLVMConstInt(LLVMGetElementType(t), c, 0);
	return LLVMConstVector(e, n);
}

/* bf16 bits to f32: they are its high half */
static LLVMValueRef from_bf16(K *k, LLVMValueRef v)
{
	LLVMTypeRef wt = like(v, k->g->i32);
	LLVMValueRef w = LLVMBuildShl(k->b, LLVMBuildZExt(k->b, v, wt, ""), int_of(wt, 16), "");
	return LLVMBuildBitCast(k->b, w, like(v, k->g->real), "");
}

/* f32 to bf16 bits, rounded to nearest even; NaN stays a (quiet) NaN. On
 * the GPU one cvt.rn.bf16.f32 an element (sm_80), the same bits for every
 * number (NaN: 0x7fff rather than 0x7fc0): the rounding by hand is some 8
 * instructions an element with the packing, 641 instructions of a work item
 * of GPT-2's GELU in bf16 where cvt takes 457 (cost.c counts them).
 * DPC_ROW_VECTORS=off rounds by hand, as the code the H200 measured on
 * 2026-11-28 did */
static LLVMValueRef to_bf16(K *k, LLVMValueRef x)
{
	LLVMTypeRef wt = like(x, k->g->i32), ht = like(x, LLVMInt16TypeInContext(k->g->ctx));
	if (k->g->gpu && !k->g->scalar_rows) {
		LLVMTypeRef i16 = LLVMInt16TypeInContext(k->g->ctx);
		if (LLVMGetTypeKind(LLVMTypeOf(x)) != LLVMVectorTypeKind)
			return cg_intrinsic(k, "llvm.nvvm.f2bf16.rn", i16, &x, 1);
		LLVMValueRef h = LLVMGetUndef(ht);
		for (unsigned i = 0; i < LLVMGetVectorSize(LLVMTypeOf(x)); i++) {
			LLVMValueRef e = LLVMBuildExtractElement(k->b, x, LLVMConstInt(k->g->i32, i, 0), "");
			h = LLVMBuildInsertElement(k->b, h, cg_intrinsic(k, "llvm.nvvm.f2bf16.rn", i16, &e, 1),
			                           LLVMConstInt(k->g->i32, i, 0), "");
		}
		return h;
	}
	LLVMValueRef w = LLVMBuildBitCast(k->b, x, wt, "");
	LLVMValueRef odd = LLVMBuildAnd(k->b, LLVMBuildLShr(k->b, w, int_of(wt, 16), ""), int_of(wt, 1), "");
	w = LLVMBuildAdd(k->b, w, LLVMBuildAdd(k->b, odd, int_of(wt, 0x7fff), ""), "");
	LLVMValueRef h = LLVMBuildTrunc(k->b, LLVMBuildLShr(k->b, w, int_of(wt, 16), ""), ht, "");
	LLVMValueRef nan = LLVMBuildFCmp(k->b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(k->b, nan, int_of(ht, 0x7fc0), h, "");
}

LLVMValueRef cg_load(K *k, LLVMValueRef base, LLVMValueRef i)
{
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(k->b, k->g->rstore, p, "");
	return k->g->bf16 ? from_bf16(k, v) : v;
}

LLVMValueRef cg_stored(K *k, LLVMValueRef v) { return k->g->bf16 ? from_bf16(k, to_bf16(k, v)) : v; }

void cg_store(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	LLVMBuildStore(k->b, k->g->bf16 ? to_bf16(k, v) : v, p);
}

/* ---- elementwise values: scalars, or vectors of k->vec ---- */

static LLVMTypeRef vtype(K *k) { return k->vec > 1 ? LLVMVectorType(k->g->real, (unsigned)k->vec) : k->g->real; }

LLVMValueRef cg_kreal(K *k, double v)
{
	LLVMValueRef c = cg_real(k->g, v);
	if (k->vec == 1)
		return c;
	LLVMValueRef e[16];
	for (int i = 0; i < k->vec; i++)
		e[i] = c;
	return LLVMConstVector(e, (unsigned)k->vec);
}

LLVMValueRef cg_splat(K *k, LLVMValueRef x)
{
	if (k->vec == 1)
		return x;
	LLVMValueRef v = LLVMBuildInsertElement(k->b, LLVMGetUndef(vtype(k)), x, cg_i64(k->g, 0), "");
	LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(k->g->i32, (unsigned)k->vec));
	return LLVMBuildShuffleVector(k->b, v, LLVMGetUndef(vtype(k)), zeros, "");
}

LLVMValueRef cg_vec_index(K *k, LLVMValueRef idx) { return k->vec > 1 ? LLVMBuildMul(k->b, idx, cg_i64(k->g, k->vec), "") : idx; }

/* On the GPU, bf16 vectors move as 32-bit words, two reals to a word, and
 * are widened and rounded from and to words: NVPTX splits a load of 8 i16
 * into two 8-byte accesses (ld.v4.u16), and LLVM turns a load of words
 * bitcast to i16 back into one; ld.v4.u32 takes all 16 bytes at once.
 * DPC_ROW_VECTORS=off keeps the i16 vectors, as they were. */
static bool bf16_words(K *k, unsigned align)
{
	return k->g->gpu && k->g->bf16 && align >= 4 && k->vec % 2 == 0 && !k->g->scalar_rows;
}

static LLVMValueRef lanes_mask(K *k, int n, int first, int step, int wrap)
{
	LLVMValueRef e[16];
	for (int j = 0; j < n; j++)
		e[j] = LLVMConstInt(k->g->i32, (unsigned long long)(wrap ? (j % 2) * wrap + j / 2 : first + step * j), 0);
	return LLVMConstVector(e, (unsigned)n);
}

/* words of two bf16 each (the lower half first) to k->vec f32 */
static LLVMValueRef words_to_f32(K *k, LLVMValueRef w)
{
	Cg *g = k->g;
	int h = k->vec / 2;
	LLVMTypeRef ft = LLVMVectorType(g->real, (unsigned)h), wt = LLVMTypeOf(w);
	LLVMValueRef lo = LLVMBuildBitCast(k->b, LLVMBuildShl(k->b, w, int_of(wt, 16), ""), ft, "");
	LLVMValueRef hi = LLVMBuildBitCast(k->b, LLVMBuildAnd(k->b, w, int_of(wt, 0xffff0000u), ""), ft, "");
	return LLVMBuildShuffleVector(k->b, lo, hi, lanes_mask(k, k->vec, 0, 0, h), "");
}

/* k->vec f32, rounded to bf16, as words of two: on the GPU a
 * cvt.rn.bf16x2.f32 a word, which puts its first operand in the upper half
 * (the PTX ISA), so the odd element first */
static LLVMValueRef f32_to_words(K *k, LLVMValueRef v)
{
	Cg *g = k->g;
	int h = k->vec / 2;
	if (g->gpu && !g->scalar_rows) {
		LLVMValueRef w = LLVMGetUndef(LLVMVectorType(g->i32, (unsigned)h));
		for (int j = 0; j < h; j++) {
			LLVMValueRef ab[2] = {LLVMBuildExtractElement(k->b, v, LLVMConstInt(g->i32, (unsigned)(2 * j + 1), 0), ""),
			                      LLVMBuildExtractElement(k->b, v, LLVMConstInt(g->i32, (unsigned)(2 * j), 0), "")};
			w = LLVMBuildInsertElement(k->b, w, cg_intrinsic(k, "llvm.nvvm.ff2bf16x2.rn", g->i32, ab, 2),
			                           LLVMConstInt(g->i32, (unsigned)j, 0), "");
		}
		return w;
	}
	LLVMTypeRef wt = LLVMVectorType(g->i32, (unsigned)k->vec);
	LLVMValueRef x = LLVMBuildZExt(k->b, to_bf16(k, v), wt, "");
	LLVMValueRef even = LLVMBuildShuffleVector(k->b, x, LLVMGetUndef(wt), lanes_mask(k, h, 0, 2, 0), "");
	LLVMValueRef odd = LLVMBuildShuffleVector(k->b, x, LLVMGetUndef(wt), lanes_mask(k, h, 1, 2, 0), "");
	return LLVMBuildOr(k->b, even, LLVMBuildShl(k->b, odd, int_of(LLVMTypeOf(odd), 16), ""), "");
}

/* k->vec elements from element i: aligned to 16 bytes, or to anything (a
 * GPU row's aligned branch, k->vec16, takes 16) */
static LLVMValueRef vec_load(K *k, LLVMValueRef base, LLVMValueRef i, unsigned align)
{
	if (k->vec == 1)
		return cg_load(k, base, i);
	if (k->vec16)
		align = 16;
	bool words = bf16_words(k, align);
	LLVMTypeRef mt = words ? LLVMVectorType(k->g->i32, (unsigned)k->vec / 2) : LLVMVectorType(k->g->rstore, (unsigned)k->vec);
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	p = LLVMBuildBitCast(k->b, p, LLVMPointerType(mt, 0), "");
	LLVMValueRef v = LLVMBuildLoad2(k->b, mt, p, "");
	LLVMSetAlignment(v, align);
	if (words)
		return words_to_f32(k, v);
	return k->g->bf16 ? from_bf16(k, v) : v;
}

static void vec_store(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v, unsigned align)
{
	if (k->vec == 1) {
		cg_store(k, base, i, v);
		return;
	}
	if (k->vec16)
		align = 16;
	bool words = bf16_words(k, align);
	LLVMValueRef w = words ? f32_to_words(k, v) : k->g->bf16 ? to_bf16(k, v) : v;
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	p = LLVMBuildBitCast(k->b, p, LLVMPointerType(LLVMTypeOf(w), 0), "");
	LLVMSetAlignment(LLVMBuildStore(k->b, w, p), align);
}

/* i a multiple of k->vec */
LLVMValueRef cg_vload(K *k, LLVMValueRef base, LLVMValueRef i) { return vec_load(k, base, i, 16); }
void cg_vstore(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v) { vec_store(k, base, i, v, 16); }
LLVMValueRef cg_row_load(K *k, LLVMValueRef base, LLVMValueRef i) { return vec_load(k, base, i, 1); }
void cg_row_store(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v) { vec_store(k, base, i, v, 1); }

/* A math function of one or two reals: LLVM's intrinsic llvm.NAME on the
 * CPU (erf, which has none, from libm), libdevice's __nv_NAME on the GPU. */
LLVMValueRef cg_math(K *k, const char *name, LLVMValueRef x, LLVMValueRef y)
{
	Cg *g = k->g;
	int n = y ? 2 : 1;
	if (LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind) {
		/* one call per element: libdevice has no vector forms */
		LLVMValueRef r = LLVMGetUndef(LLVMTypeOf(x));
		for (unsigned i = 0; i < LLVMGetVectorSize(LLVMTypeOf(x)); i++) {
			LLVMValueRef at = cg_i64(g, i);
			LLVMValueRef yi = y ? LLVMBuildExtractElement(k->b, y, at, "") : NULL;
			r = LLVMBuildInsertElement(k->b, r, cg_math(k, name, LLVMBuildExtractElement(k->b, x, at, ""), yi), at, "");
		}
		return r;
	}
	bool f32 = g->real != g->f64;
	const char *full = ar_printf("llvm.%s.f%d", name, f32 ? 32 : 64);
	if (g->gpu && strcmp(name, "sqrt") != 0)
		full = ar_printf("__nv_%s%s", name, f32 ? "f" : "");
	else if (!strcmp(name, "erf"))
		full = f32 ? "erff" : "erf";
	LLVMValueRef f = LLVMGetNamedFunction(g->mod, full);
	LLVMTypeRef params[2] = {g->real, g->real};
	LLVMTypeRef ft = LLVMFunctionType(g->real, params, (unsigned)n, 0);
	if (!f)
		f = LLVMAddFunction(g->mod, full, ft);
	LLVMValueRef args[2] = {x, y};
	return LLVMBuildCall2(k->b, ft, f, args, (unsigned)n, "");
}

/* the constant v in type t, splat when t is a vector */
static LLVMValueRef real_like(LLVMTypeRef t, double v)
{
	if (LLVMGetTypeKind(t) != LLVMVectorTypeKind)
		return LLVMConstReal(t, v);
	LLVMValueRef e[16];
	unsigned n = LLVMGetVectorSize(t);
	for (unsigned i = 0; i < n; i++)
		e[i] = LLVMConstReal(LLVMGetElementType(t), v);
	return LLVMConstVector(e, n);
}

/* exp of f32 values on the CPU without a call, so that it vectorizes:
 * x = k ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor series to r^7,
 * times 2^k built in the exponent bits (as 2^h 2^(k - h), each normal for k
 * in [-126, 128]); within about one ulp; below -87.33 it is 0, above 88.72
 * inf, NaN stays NaN. runtime/cpu/attention.c's fast_expf is the same. */
static LLVMValueRef inline_exp(K *k, LLVMValueRef x)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMTypeRef ft = LLVMTypeOf(x), it = like(x, g->i32);
	LLVMValueRef lo = real_like(ft, -87.33), hi = real_like(ft, 88.72);
	LLVMValueRef c = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), lo, x, "");
	c = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, c, hi, ""), hi, c, "");
	LLVMValueRef magic = real_like(ft, 12582912.0);
	LLVMValueRef kf = LLVMBuildFSub(B, LLVMBuildFAdd(B, LLVMBuildFMul(B, c, real_like(ft, 1.44269504), ""), magic, ""), magic, "");
	LLVMValueRef r = LLVMBuildFSub(B, LLVMBuildFSub(B, c, LLVMBuildFMul(B, kf, real_like(ft, 0.693145752), ""), ""),
	                               LLVMBuildFMul(B, kf, real_like(ft, 1.42860677e-06), ""), "");
	static const double coef[7] = {1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1};
	LLVMValueRef p = real_like(ft, 1.0 / 5040);
	for (int i = 0; i < 7; i++)
		p = LLVMBuildFAdd(B, real_like(ft, coef[i]), LLVMBuildFMul(B, r, p, ""), "");
	LLVMValueRef ki = LLVMBuildFPToSI(B, kf, it, ""), h = LLVMBuildAShr(B, ki, int_of(it, 1), "");
	LLVMValueRef hb = LLVMBuildShl(B, LLVMBuildAdd(B, h, int_of(it, 127), ""), int_of(it, 23), "");
	LLVMValueRef kb = LLVMBuildShl(B, LLVMBuildAdd(B, LLVMBuildSub(B, ki, h, ""), int_of(it, 127), ""), int_of(it, 23), "");
	LLVMValueRef y = LLVMBuildFMul(B, LLVMBuildFMul(B, p, LLVMBuildBitCast(B, hb, ft, ""), ""), LLVMBuildBitCast(B, kb, ft, ""), "");
	y = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), real_like(ft, 0), y, "");
	y = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, x, hi, ""), real_like(ft, INFINITY), y, "");
	return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, y, "");
}

LLVMValueRef cg_exp(K *k, LLVMValueRef x)
{
	if (!k->g->gpu && k->g->real != k->g->f64)
		return inline_exp(k, x);
	return cg_math(k, "exp", x, NULL);
}
LLVMValueRef cg_log(K *k, LLVMValueRef x) { return cg_math(k, "log", x, NULL); }
LLVMValueRef cg_sqrt(K *k, LLVMValueRef x) { return cg_math(k, "sqrt", x, NULL); }

LLVMValueRef cg_max(K *k, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef gt = LLVMBuildFCmp(k->b, LLVMRealOGT, a, b, "");
	return LLVMBuildSelect(k->b, gt, a, b, "");
}


Loop cg_for_from(K *k, LLVMValueRef start, int64_t step, LLVMValueRef n)
{
	Loop l;
	l.step = step;
	l.pre = LLVMGetInsertBlock(k->b);
	l.head = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "loop");
	l.exit = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "done");
	LLVMValueRef any = LLVMBuildICmp(k->b, LLVMIntSLT, start, n, "");
	LLVMBuildCondBr(k->b, any, l.head, l.exit);
	LLVMPositionBuilderAtEnd(k->b, l.head);
	l.i = LLVMBuildPhi(k->b, k->g->i64, "i");
	LLVMAddIncoming(l.i, &start, &l.pre, 1);
	return l;
}

Loop cg_for(K *k, LLVMValueRef n) { return cg_for_from(k, cg_i64(k->g, 0), 1, n); }

/* the share of a reduction's elements that this lane takes */
Loop cg_for_lanes(K *k, LLVMValueRef n) { return cg_for_from(k, k->lane, k->lanes, n); }

void cg_for_end(K *k, Loop *l, LLVMValueRef n)
{
	LLVMValueRef next = LLVMBuildAdd(k->b, l->i, cg_i64(k->g, l->step), "");
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->b);
	LLVMAddIncoming(l->i, &next, &cur, 1);
	LLVMValueRef more = LLVMBuildICmp(k->b, LLVMIntSLT, next, n, "");
	LLVMBuildCondBr(k->b, more, l->head, l->exit);
	LLVMPositionBuilderAtEnd(k->b, l->exit);
}


Acc cg_acc(K *k, Loop *l, LLVMValueRef init)
{
	Acc a = {LLVMBuildPhi(k->b, LLVMTypeOf(init), "")};
	LLVMAddIncoming(a.phi, &init, &l->pre, 1);
	return a;
}

void cg_acc_next(K *k, Acc *a, LLVMValueRef v)
{
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->b);
	LLVMAddIncoming(a->phi, &v, &cur, 1);
}

/* The value after the loop: init when it ran zero times, else the last
 * update, which loop_end's latch block computed. */
LLVMValueRef cg_acc_result(K *k, Loop *l, LLVMValueRef init, LLVMValueRef last)
{
	LLVMValueRef r = LLVMBuildPhi(k->b, LLVMTypeOf(init), "");
	LLVMValueRef vals[2] = {init, last};
	LLVMBasicBlockRef from[2] = {l->pre, LLVMGetInstructionParent(last)};
	LLVMAddIncoming(r, vals, from, 2);
	return r;
}

/* ---- combining the lanes of a GPU reduction ---- */

LLVMValueRef cg_entry_alloca(K *k, LLVMTypeRef t, int64_t n)
{
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(k->fn);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(k->g->ctx);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(b, first);
	else
		LLVMPositionBuilderAtEnd(b, entry);
	LLVMValueRef a = LLVMBuildArrayAlloca(b, t, LLVMConstInt(k->g->i32, (unsigned long long)n, 0), "");
	LLVMSetAlignment(a, 16);
	LLVMDisposeBuilder(b);
	return a;
}

static LLVMValueRef call_named(K *k, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n)
{
	LLVMTypeRef pt[16];
	if (n > 16)
		die("an intrinsic of %d arguments", n);
	for (int i = 0; i < n; i++)
		pt[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(ret, pt, (unsigned)n, 0);
	LLVMValueRef f = LLVMGetNamedFunction(k->g->mod, name);
	if (!f)
		f = LLVMAddFunction(k->g->mod, name, ft);
	return LLVMBuildCall2(k->b, ft, f, args, (unsigned)n, "");
}

/* The NVPTX intrinsics that the SIMT emulator takes (DPC_SIMT, dprt.h),
 * and its functions for them. A result of four goes through memory: mma's
 * C in and D out (its last four arguments), ldmatrix's words out after its
 * address and .trans. */
enum { SIMT_PLAIN, SIMT_MMA, SIMT_LDMATRIX, SIMT_LDMATRIX_T };
static const struct {
	const char *intrinsic, *emulator;
	int form;
} simt_calls[] = {
	{"llvm.nvvm.barrier0", "rt_simt_barrier", SIMT_PLAIN},
	{"llvm.nvvm.ex2.approx.f", "exp2f", SIMT_PLAIN},
	{"llvm.nvvm.cp.async.cg.shared.global.16", "rt_simt_cp_async16", SIMT_PLAIN},
	{"llvm.nvvm.cp.async.commit.group", "rt_simt_cp_commit", SIMT_PLAIN},
	{"llvm.nvvm.cp.async.wait.group", "rt_simt_cp_wait", SIMT_PLAIN},
	{"llvm.nvvm.shfl.sync.bfly.f32", "rt_simt_shfl_bfly_f32", SIMT_PLAIN},
	{"llvm.nvvm.shfl.sync.bfly.i32", "rt_simt_shfl_bfly_i32", SIMT_PLAIN},
	{"llvm.nvvm.mma.m16n8k16.row.col.bf16", "rt_simt_mma_bf16", SIMT_MMA},
	{"llvm.nvvm.mma.m16n8k8.row.col.tf32", "rt_simt_mma_tf32", SIMT_MMA},
	{"llvm.nvvm.f2tf32.rna", "rt_simt_f2tf32_rna", SIMT_PLAIN},
	{"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p0i8", "rt_simt_ldmatrix_x4", SIMT_LDMATRIX},
	{"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p0i8", "rt_simt_ldmatrix_x4", SIMT_LDMATRIX_T},
};

static LLVMValueRef simt_call(K *k, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n)
{
	Cg *g = k->g;
	int i = 0, count = (int)(sizeof simt_calls / sizeof simt_calls[0]);
	while (i < count && strcmp(simt_calls[i].intrinsic, name))
		i++;
	if (i == count)
		die("the SIMT emulator has no %s", name);
	int form = simt_calls[i].form;
	if (form == SIMT_PLAIN)
		return call_named(k, simt_calls[i].emulator, ret, args, n);
	/* four of them in the entry block: a call in a loop reuses them */
	LLVMTypeRef et = LLVMStructGetTypeAtIndex(ret, 0);
	LLVMValueRef four = cg_entry_alloca(k, et, 4), in[7];
	int nin = 0;
	if (form == SIMT_MMA) {
		for (int j = 0; j < 4; j++) {
			LLVMValueRef at = cg_i64(g, j);
			LLVMBuildStore(k->b, args[n - 4 + j], LLVMBuildGEP2(k->b, et, four, &at, 1, ""));
		}
		for (; nin < n - 4; nin++)
			in[nin] = args[nin];
	} else {
		in[nin++] = args[0];
		in[nin++] = LLVMConstInt(g->i32, form == SIMT_LDMATRIX_T, 0);
	}
	in[nin++] = four;
	call_named(k, simt_calls[i].emulator, LLVMVoidTypeInContext(g->ctx), in, nin);
	LLVMValueRef d = LLVMGetUndef(ret);
	for (int j = 0; j < 4; j++) {
		LLVMValueRef at = cg_i64(g, j);
		LLVMValueRef v = LLVMBuildLoad2(k->b, et, LLVMBuildGEP2(k->b, et, four, &at, 1, ""), "");
		d = LLVMBuildInsertValue(k->b, d, v, (unsigned)j, "");
	}
	return d;
}

LLVMValueRef cg_intrinsic(K *k, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n)
{
	if (!k->g->gpu && !strncmp(name, "llvm.nvvm.", 10))
		return simt_call(k, name, ret, args, n);
	return call_named(k, name, ret, args, n);
}

LLVMValueRef cg_shuffle_xor(K *k, LLVMValueRef v, int mask)
{
	Cg *g = k->g;
	LLVMValueRef all = LLVMConstInt(g->i32, 0xffffffffu, 0), m = LLVMConstInt(g->i32, (unsigned)mask, 0);
	LLVMValueRef clamp = LLVMConstInt(g->i32, 31, 0);
	if (g->real != g->f64) {
		LLVMValueRef args[4] = {all, v, m, clamp};
		return cg_intrinsic(k, "llvm.nvvm.shfl.sync.bfly.f32", g->real, args, 4);
	}
	/* a double moves as two 32-bit halves */
	LLVMValueRef bits = LLVMBuildBitCast(k->b, v, g->i64, "");
	LLVMValueRef half[2] = {LLVMBuildTrunc(k->b, bits, g->i32, ""),
	                        LLVMBuildTrunc(k->b, LLVMBuildLShr(k->b, bits, cg_i64(g, 32), ""), g->i32, "")};
	for (int i = 0; i < 2; i++) {
		LLVMValueRef args[4] = {all, half[i], m, clamp};
		half[i] = cg_intrinsic(k, "llvm.nvvm.shfl.sync.bfly.i32", g->i32, args, 4);
	}
	LLVMValueRef hi = LLVMBuildShl(k->b, LLVMBuildZExt(k->b, half[1], g->i64, ""), cg_i64(g, 32), "");
	bits = LLVMBuildOr(k->b, hi, LLVMBuildZExt(k->b, half[0], g->i64, ""), "");
	return LLVMBuildBitCast(k->b, bits, g->f64, "");
}

LLVMValueRef cg_combine(K *k, LLVMValueRef a, LLVMValueRef b, bool max)
{
	return max ? cg_max(k, a, b) : LLVMBuildFAdd(k->b, a, b, "");
}

/* A block's shared array of type at, one per name: created by the first
 * kernel that asks. Names carry the compute type and, where it varies, the
 * size, since a module may hold f32 and f64 kernels of several shapes. */
LLVMValueRef cg_shared_array(Cg *g, const char *name, LLVMTypeRef at)
{
	LLVMValueRef s = LLVMGetNamedGlobal(g->mod, name);
	if (!s) {
		s = LLVMAddGlobalInAddressSpace(g->mod, at, name, g->gpu ? 3 : 0);
		LLVMSetInitializer(s, LLVMGetUndef(at));
		/* the SIMT emulator runs a block on each CPU thread */
		LLVMSetThreadLocal(s, !g->gpu);
		/* not internal: LLVM would take a barrier not to touch an internal
		 * global and move reads of it above the barrier (tests/ptx/barriers.py) */
		LLVMSetLinkage(s, LLVMExternalLinkage);
		LLVMSetAlignment(s, 16);
	} else if (LLVMGlobalGetValueType(s) != at) {
		/* a second size under one name would read past the first's end */
		die("shared array %s asked for with two types", name);
	}
	return s;
}

LLVMValueRef cg_dynamic_shared(Cg *g)
{
	LLVMValueRef s = LLVMGetNamedGlobal(g->mod, "dp_dynamic_shared");
	if (!s) {
		s = LLVMAddGlobalInAddressSpace(g->mod, LLVMArrayType(g->i32, 0), "dp_dynamic_shared", 3);
		LLVMSetLinkage(s, LLVMExternalLinkage);
		LLVMSetAlignment(s, 16);
	}
	return s;
}

LLVMValueRef cg_shared_ptr(K *k, LLVMValueRef s, LLVMTypeRef elem)
{
	if (!k->g->gpu)
		return LLVMBuildBitCast(k->b, s, LLVMPointerType(elem, 0), "");
	return LLVMBuildAddrSpaceCast(k->b, LLVMBuildBitCast(k->b, s, LLVMPointerType(elem, 3), ""), LLVMPointerType(elem, 0), "");
}

LLVMValueRef cg_global_array(K *k, const char *name, int64_t n)
{
	Cg *g = k->g;
	LLVMTypeRef at = LLVMArrayType(g->real, (unsigned)n);
	LLVMValueRef s = LLVMGetNamedGlobal(g->mod, name);
	unsigned space = g->gpu ? 1 : 0;
	/* the kernels that share it must be in one unit (cg_unit_of) */
	g->module_array = true;
	if (!s) {
		s = LLVMAddGlobalInAddressSpace(g->mod, at, name, space);
		LLVMSetInitializer(s, LLVMConstNull(at));
		LLVMSetLinkage(s, LLVMInternalLinkage);
		LLVMSetAlignment(s, 16);
	} else if (LLVMGlobalGetValueType(s) != at) {
		die("global array %s asked for with two types", name);
	}
	LLVMValueRef first = LLVMBuildBitCast(k->b, s, LLVMPointerType(g->real, space), "");
	return space ? LLVMBuildAddrSpaceCast(k->b, first, LLVMPointerType(g->real, 0), "") : first;
}

/* Every lane's partial value in, the whole reduction out, the same bits in
 * every lane: the butterfly pairs lanes symmetrically, and the block's warps
 * are then combined in one fixed order. Deterministic from run to run. */
LLVMValueRef cg_all_reduce(K *k, LLVMValueRef v, bool max)
{
	Cg *g = k->g;
	if (k->lanes == 1)
		return v;
	for (int m = (k->lanes < 32 ? k->lanes : 32) / 2; m >= 1; m /= 2)
		v = cg_combine(k, v, cg_shuffle_xor(k, v, m), max);
	if (k->lanes <= 32)
		return v;
	int nwarps = k->lanes / 32;
	LLVMTypeRef at = LLVMArrayType(g->real, (unsigned)nwarps);
	LLVMValueRef smem = cg_shared_array(g, g->real == g->f64 ? "dp_partials_f64" : "dp_partials_f32", at);
	LLVMValueRef warp = LLVMBuildLShr(k->b, k->lane, cg_i64(g, 5), "");
	LLVMValueRef first = LLVMBuildICmp(k->b, LLVMIntEQ, LLVMBuildAnd(k->b, k->lane, cg_i64(g, 31), ""), cg_i64(g, 0), "");
	LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "put"), join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "join");
	LLVMBuildCondBr(k->b, first, put, join);
	LLVMPositionBuilderAtEnd(k->b, put);
	LLVMValueRef idx[2] = {cg_i64(g, 0), warp};
	LLVMBuildStore(k->b, v, LLVMBuildGEP2(k->b, at, smem, idx, 2, ""));
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
	cg_intrinsic(k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(g->ctx), NULL, 0);
	LLVMValueRef r = NULL;
	for (int w = 0; w < nwarps; w++) {
		LLVMValueRef ix[2] = {cg_i64(g, 0), cg_i64(g, w)};
		LLVMValueRef x = LLVMBuildLoad2(k->b, g->real, LLVMBuildGEP2(k->b, at, smem, ix, 2, ""), "");
		r = r ? cg_combine(k, r, x, max) : x;
	}
	/* the next reduction may overwrite the partials only once all have read them */
	cg_intrinsic(k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(g->ctx), NULL, 0);
	return r;
}

/* A reduction's result, stored once: by lane 0. */
void cg_store_once(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	if (k->lanes == 1) {
		cg_store(k, base, i, v);
		return;
	}
	LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "put"), join = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "join");
	LLVMValueRef first = LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(k->g, 0), "");
	if (k->dup)
		first = LLVMBuildAnd(k->b, first, LLVMBuildNot(k->b, k->dup, ""), "");
	LLVMBuildCondBr(k->b, first, put, join);
	LLVMPositionBuilderAtEnd(k->b, put);
	cg_store(k, base, i, v);
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
}

/* ---- folds and maps over a row of contiguous elements ----
 * On the GPU the lanes share the row (cg_for_lanes), and a fold's partials
 * meet in cg_all_reduce. Where the body says the row is aligned
 * (k->aligned), each lane takes 16 bytes at a time (vectors of
 * cg_row_vec, chunk c at lane c mod lanes), then the tail an element at a
 * time; else an element at a time throughout (the same code, the other
 * branch). One access of 2 bytes a lane kept bf16's loss at a third of
 * the memory's bandwidth (cost.c). On the CPU the row goes CG_ROW_BYTES at
 * a time as vectors (k->vec elements, unaligned), whose partials combine
 * in element order after the loop, then the tail an element at a time:
 * independent partial sums, so that the CPU keeps its adders busy instead
 * of waiting on one running sum. The terms and maps see k->vec set to the
 * width they compute at (splat their scalars). */
#define CG_ROW_BYTES 64

bool cg_gpu_form(const K *k) { return k->g->cuda || k->lanes > 1; }

int cg_row_vec(const Cg *g) { return 16 / (g->bf16 ? 2 : g->real == g->f64 ? 8 : 4); }

LLVMValueRef cg_aligned(K *k, int n, const LLVMValueRef *p, const LLVMValueRef *off)
{
	Cg *g = k->g;
	if (!cg_gpu_form(k))
		return NULL;
	if (g->scalar_rows)
		return NULL;
	int es = g->bf16 ? 2 : g->real == g->f64 ? 8 : 4;
	LLVMValueRef bits = cg_i64(g, 0);
	for (int j = 0; j < n; j++) {
		LLVMValueRef a = LLVMBuildPtrToInt(k->b, p[j], g->i64, "");
		if (off && off[j])
			a = LLVMBuildAdd(k->b, a, LLVMBuildMul(k->b, off[j], cg_i64(g, es), ""), "");
		bits = LLVMBuildOr(k->b, bits, a, "");
	}
	return LLVMBuildICmp(k->b, LLVMIntEQ, LLVMBuildAnd(k->b, bits, cg_i64(g, 15), ""), cg_i64(g, 0), "");
}

int cg_row_access(const Cg *g, const KDesc *d)
{
	if (!g->cuda || g->scalar_rows || (int)d->kind >= OP__COUNT || !d->nin)
		return 0;
	bool rows = ir_ops[d->kind].low == LW_ROWS, xent = (int)d->kind == OP_XENT && d->stage < 2 && d->lanes >= 64;
	if (!rows && !xent)
		return 0;
	Type t = d->in[0];
	int64_t C = t.dim[t.rank - 1], es = ir_dt_bytes(t.dt);
	int64_t in = d->pitch[0] ? d->pitch[0] : C, out = d->pitch[1] ? d->pitch[1] : C;
	if (C * es < 16 || in * es % 16 || (rows && out * es % 16))
		return 0;
	return 16;
}

static int row_width(K *k)
{
	if (cg_gpu_form(k) || k->vec != 1)
		return 1;
	return CG_ROW_BYTES / (k->g->real == k->g->f64 ? 8 : 4);
}

/* this lane's share of elements from..n of the row, an element at a time */
static LLVMValueRef fold_lanes(K *k, LLVMValueRef base, int64_t from, int64_t n, bool max, LLVMValueRef init, CgTerm *term,
                               void *ctx)
{
	LLVMValueRef nn = cg_i64(k->g, n);
	Loop l = cg_for_from(k, LLVMBuildAdd(k->b, k->lane, cg_i64(k->g, from), ""), k->lanes, nn);
	Acc a = cg_acc(k, &l, init);
	LLVMValueRef next = cg_combine(k, a.phi, term(k, ctx, LLVMBuildAdd(k->b, base, l.i, ""), l.i), max);
	cg_acc_next(k, &a, next);
	cg_for_end(k, &l, nn);
	return cg_acc_result(k, &l, init, next);
}

/* the fold of chunks vectors of v elements from base (this lane's share of
 * them, 16-byte aligned, on the GPU; all, at any alignment, on the CPU),
 * the vector's elements then combined in element order */
static LLVMValueRef fold_chunks(K *k, LLVMValueRef base, int64_t chunks, int v, bool max, LLVMValueRef init, CgTerm *term,
                                void *ctx)
{
	Cg *g = k->g;
	bool gpu = cg_gpu_form(k);
	LLVMValueRef nc = cg_i64(g, chunks);
	k->vec = v;
	k->vec16 = gpu;
	LLVMValueRef vinit = cg_splat(k, init);
	Loop l = gpu ? cg_for_lanes(k, nc) : cg_for(k, nc);
	Acc a = cg_acc(k, &l, vinit);
	LLVMValueRef i = LLVMBuildMul(k->b, l.i, cg_i64(g, v), "");
	LLVMValueRef next = cg_combine(k, a.phi, term(k, ctx, LLVMBuildAdd(k->b, base, i, ""), i), max);
	cg_acc_next(k, &a, next);
	cg_for_end(k, &l, nc);
	LLVMValueRef part = cg_acc_result(k, &l, vinit, next);
	k->vec = 1;
	k->vec16 = false;
	LLVMValueRef r = LLVMBuildExtractElement(k->b, part, cg_i64(g, 0), "");
	for (int e = 1; e < v; e++)
		r = cg_combine(k, r, LLVMBuildExtractElement(k->b, part, cg_i64(g, e), ""), max);
	return r;
}

/* this lane's share in aligned vectors, then the tail's */
static LLVMValueRef fold_vectors(K *k, LLVMValueRef base, int64_t n, bool max, LLVMValueRef init, CgTerm *term, void *ctx)
{
	int v = cg_row_vec(k->g);
	LLVMValueRef r = fold_chunks(k, base, n / v, v, max, init, term, ctx);
	return fold_lanes(k, base, n / v * v, n, max, r, term, ctx);
}

/* if (k->aligned) the vectors' fold else the elements': the lane's partial */
static LLVMValueRef fold_gpu(K *k, LLVMValueRef base, int64_t n, bool max, LLVMValueRef init, CgTerm *term, void *ctx)
{
	if (!k->aligned || n < cg_row_vec(k->g))
		return fold_lanes(k, base, 0, n, max, init, term, ctx);
	LLVMValueRef aligned = k->aligned;
	LLVMBasicBlockRef vb = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "row_vectors");
	LLVMBasicBlockRef sb = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "row_elements");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "row_done");
	LLVMBuildCondBr(k->b, aligned, vb, sb);
	LLVMPositionBuilderAtEnd(k->b, vb);
	LLVMValueRef r[2];
	LLVMBasicBlockRef from[2];
	r[0] = fold_vectors(k, base, n, max, init, term, ctx);
	from[0] = LLVMGetInsertBlock(k->b);
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, sb);
	r[1] = fold_lanes(k, base, 0, n, max, init, term, ctx);
	from[1] = LLVMGetInsertBlock(k->b);
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
	LLVMValueRef phi = LLVMBuildPhi(k->b, LLVMTypeOf(r[0]), "");
	LLVMAddIncoming(phi, r, from, 2);
	return phi;
}

LLVMValueRef cg_fold(K *k, LLVMValueRef base, int64_t n, bool max, LLVMValueRef init, CgTerm *term, void *ctx)
{
	Cg *g = k->g;
	if (cg_gpu_form(k))
		return cg_all_reduce(k, fold_gpu(k, base, n, max, init, term, ctx), max);
	int v = row_width(k);
	if (v == 1 || n < v) {
		LLVMValueRef nn = cg_i64(g, n);
		Loop l = cg_for(k, nn);
		Acc a = cg_acc(k, &l, init);
		LLVMValueRef next = cg_combine(k, a.phi, term(k, ctx, LLVMBuildAdd(k->b, base, l.i, ""), l.i), max);
		cg_acc_next(k, &a, next);
		cg_for_end(k, &l, nn);
		return cg_acc_result(k, &l, init, next);
	}
	int64_t chunks = n / v;
	LLVMValueRef r = fold_chunks(k, base, chunks, v, max, init, term, ctx);
	for (int64_t t = chunks * v; t < n; t++) {
		LLVMValueRef it = cg_i64(g, t);
		r = cg_combine(k, r, term(k, ctx, LLVMBuildAdd(k->b, base, it, ""), it), max);
	}
	return r;
}

/* fn at elements from..n of the row, this lane's share of them */
static void each_lanes(K *k, LLVMValueRef base, int64_t from, int64_t n, CgEach *fn, void *ctx)
{
	LLVMValueRef nn = cg_i64(k->g, n);
	Loop l = cg_for_from(k, LLVMBuildAdd(k->b, k->lane, cg_i64(k->g, from), ""), k->lanes, nn);
	fn(k, ctx, LLVMBuildAdd(k->b, base, l.i, ""), l.i);
	cg_for_end(k, &l, nn);
}

static void each_gpu(K *k, LLVMValueRef base, int64_t n, CgEach *fn, void *ctx)
{
	Cg *g = k->g;
	int v = cg_row_vec(g);
	if (!k->aligned || n < v) {
		each_lanes(k, base, 0, n, fn, ctx);
		return;
	}
	LLVMBasicBlockRef vb = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "row_vectors");
	LLVMBasicBlockRef sb = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "row_elements");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "row_done");
	LLVMBuildCondBr(k->b, k->aligned, vb, sb);
	LLVMPositionBuilderAtEnd(k->b, vb);
	int64_t chunks = n / v;
	LLVMValueRef nc = cg_i64(g, chunks);
	k->vec = v;
	k->vec16 = true;
	Loop l = cg_for_lanes(k, nc);
	LLVMValueRef i = LLVMBuildMul(k->b, l.i, cg_i64(g, v), "");
	fn(k, ctx, LLVMBuildAdd(k->b, base, i, ""), i);
	cg_for_end(k, &l, nc);
	k->vec = 1;
	k->vec16 = false;
	each_lanes(k, base, chunks * v, n, fn, ctx);
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, sb);
	each_lanes(k, base, 0, n, fn, ctx);
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
}

void cg_each(K *k, LLVMValueRef base, int64_t n, CgEach *fn, void *ctx)
{
	Cg *g = k->g;
	if (cg_gpu_form(k)) {
		LLVMBasicBlockRef join = k->dup ? cg_if(k, LLVMBuildNot(k->b, k->dup, "")) : NULL;
		each_gpu(k, base, n, fn, ctx);
		if (join)
			cg_end_if(k, join);
		return;
	}
	int v = row_width(k);
	int64_t chunks = v == 1 ? 0 : n / v;
	if (chunks) {
		k->vec = v;
		LLVMValueRef nc = cg_i64(g, chunks);
		Loop l = cg_for(k, nc);
		LLVMValueRef i = LLVMBuildMul(k->b, l.i, cg_i64(g, v), "");
		fn(k, ctx, LLVMBuildAdd(k->b, base, i, ""), i);
		cg_for_end(k, &l, nc);
		k->vec = 1;
	}
	LLVMValueRef nn = cg_i64(g, n);
	Loop l = cg_for_from(k, cg_i64(g, chunks * v), 1, nn);
	fn(k, ctx, LLVMBuildAdd(k->b, base, l.i, ""), l.i);
	cg_for_end(k, &l, nn);
}

/* ---- index arithmetic ---- */

/* Unravels a flat index over t's dims (row-major). In 32 bits where t is
 * small enough: division by a constant is several times cheaper there, on
 * the GPU above all. */
void cg_unravel(K *k, Type t, LLVMValueRef idx, LLVMValueRef *coord)
{
	bool narrow = ir_numel(t) <= INT32_MAX;
	LLVMTypeRef it = narrow ? k->g->i32 : k->g->i64;
	if (narrow)
		idx = LLVMBuildTrunc(k->b, idx, it, "");
	for (int i = t.rank - 1; i >= 0; i--) {
		if (i == 0) {
			coord[i] = idx;
			break;
		}
		LLVMValueRef d = LLVMConstInt(it, (unsigned long long)t.dim[i], 0);
		coord[i] = LLVMBuildURem(k->b, idx, d, "");
		idx = LLVMBuildUDiv(k->b, idx, d, "");
	}
	if (narrow)
		for (int i = 0; i < t.rank; i++)
			coord[i] = LLVMBuildZExt(k->b, coord[i], k->g->i64, "");
}

/* Offset into operand type t at the result's coordinates, NumPy-broadcast. */
LLVMValueRef cg_bcast_offset(K *k, Type t, Type out, LLVMValueRef *coord)
{
	LLVMValueRef off = cg_i64(k->g, 0);
	for (int i = 0; i < t.rank; i++) {
		int oi = out.rank - t.rank + i;
		off = LLVMBuildMul(k->b, off, cg_i64(k->g, t.dim[i]), "");
		if (t.dim[i] != 1)
			off = LLVMBuildAdd(k->b, off, coord[oi], "");
	}
	return off;
}

/* ---- data movement: range, pad, concat, 2-D windows, bilinear weights ---- */

static LLVMValueRef load_as(K *k, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef i)
{
	return LLVMBuildLoad2(k->b, et, LLVMBuildGEP2(k->b, et, base, &i, 1, ""), "");
}

/* an element of an i32 or a real tensor at argument word w */
LLVMValueRef cg_elem_load(K *k, bool i32, LLVMValueRef w, LLVMValueRef i)
{
	return i32 ? load_as(k, k->g->i32, cg_ptr(k, w, k->g->i32p), i) : cg_load(k, cg_ptr(k, w, k->g->realp), i);
}

void cg_elem_store(K *k, bool i32, LLVMValueRef w, LLVMValueRef i, LLVMValueRef v)
{
	if (i32)
		LLVMBuildStore(k->b, v, LLVMBuildGEP2(k->b, k->g->i32, cg_ptr(k, w, k->g->i32p), &i, 1, ""));
	else
		cg_store(k, cg_ptr(k, w, k->g->realp), i, v);
}


/* code emitted between if_begin and if_end runs when c holds */
LLVMBasicBlockRef cg_if(K *k, LLVMValueRef c)
{
	LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "then"), join = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "join");
	LLVMBuildCondBr(k->b, c, then, join);
	LLVMPositionBuilderAtEnd(k->b, then);
	return join;
}

void cg_end_if(K *k, LLVMBasicBlockRef join)
{
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
}

LLVMValueRef cg_operand(K *k, LLVMValueRef base, Type t, Type out, LLVMValueRef *coord)
{
	LLVMValueRef off = cg_bcast_offset(k, t, out, coord);
	if (k->vec > 1 && t.rank >= 1 && t.dim[t.rank - 1] == out.dim[out.rank - 1])
		return cg_vload(k, base, off);
	return cg_splat(k, cg_load(k, base, off));
}

LLVMValueRef cg_word_real(K *k, LLVMValueRef w)
{
	LLVMValueRef d = LLVMBuildBitCast(k->b, w, k->g->f64, "");
	return k->g->real == k->g->f64 ? d : LLVMBuildFPTrunc(k->b, d, k->g->real, "");
}

/* the kernel body of each op, by its family (the op table's last column) */
typedef void KernelFn(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx);
static KernelFn *const family_kernel[OP__COUNT] = {
#define X(name, text, arity, flags, shape, adjoint, form, low, attr, cost, family) [OP_##name] = cg_kernel_##family,
#include "../ir/ops.def"
#undef X
};

static void body(Cg *g, LLVMValueRef fn, const KDesc *d, LLVMValueRef *args, LLVMValueRef idx, LLVMValueRef lane)
{
	K kk = {.g = g, .fn = fn, .b = g->b, .vec = d->vec, .lanes = d->lanes, .lane = lane, .dup = g->dup}, *k = &kk;
	LLVMValueRef ptrs[8];
	/* pointer views of the argument words: the result, then each operand */
	ptrs[0] = cg_ptr(k, args[0], g->realp);
	for (int j = 0; j < d->nin && j < 7; j++)
		ptrs[j + 1] = cg_ptr(k, args[j + 1], d->in[j].dt == DT_I32 ? g->i32p : g->realp);
	switch ((int)d->kind) {
	case K_SGD:
	case K_ADAM:
	case K_FOLD:
	case K_REFRESH:
		cg_kernel_control(k, d, ptrs, args, idx);
		return;
	case K_FUSED:
		cg_kernel_elementwise(k, d, ptrs, args, idx);
		return;
	case K_ATTN_ROWS:
		cg_kernel_attention(k, d, ptrs, args, idx);
		return;
	}
	family_kernel[d->kind](k, d, ptrs, args, idx);
}

void cg_kernel_body(Cg *g, LLVMValueRef fn, const KDesc *d, LLVMValueRef *args, LLVMValueRef idx, LLVMValueRef lane)
{
	if ((int)d->kind == K_LOOP) {
		cg_loop_body(g, fn, d, args, lane);
		return;
	}
	cg_set_real(g, kernel_dt(g, d));
	body(g, fn, d, args, idx, lane);
	cg_set_real(g, g->p->real);
}

/* a CPU kernel's argument words, from the array its first parameter points at */
static void load_words(Cg *g, LLVMValueRef fn, const KDesc *d, LLVMValueRef *args)
{
	for (int j = 0; j < d->nargs; j++) {
		LLVMValueRef at = cg_i64(g, j);
		args[j] = LLVMBuildLoad2(g->b, g->i64, LLVMBuildGEP2(g->b, g->i64, LLVMGetParam(fn, 0), &at, 1, ""), "");
	}
}

/* DPC_SIMT: kernel d's body as one GPU thread, for the emulator's blocks:
 * void (const uint64_t *args, int64_t block), rt_simt_tid() its place in
 * the block. A block is one work item, or for rows shared by fewer lanes
 * than a block CG_BLOCK / lanes rows, thread t taking row t / lanes of
 * them as lane t mod lanes, the last row again where the rows run out
 * (cg_gpu_items does the same on the GPU) */
static LLVMValueRef simt_thread(Cg *g, const KDesc *d, const char *name)
{
	LLVMTypeRef params[2] = {g->i64p, g->i64};
	LLVMValueRef fn = LLVMAddFunction(g->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, 2, 0));
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	LLVMValueRef args[16];
	load_words(g, fn, d, args);
	LLVMTypeRef tft = LLVMFunctionType(g->i64, NULL, 0, 0);
	LLVMValueRef tid = LLVMGetNamedFunction(g->mod, "rt_simt_tid");
	if (!tid)
		tid = LLVMAddFunction(g->mod, "rt_simt_tid", tft);
	LLVMValueRef t = LLVMBuildCall2(g->b, tft, tid, NULL, 0, ""), item = LLVMGetParam(fn, 1), lane = t;
	if (d->lanes < CG_BLOCK) {
		int64_t per = simt_rows_per_block(d), last = cg_rows(d->out) - 1;
		LLVMValueRef want = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, item, cg_i64(g, per), ""),
		                                 LLVMBuildUDiv(g->b, t, cg_i64(g, d->lanes), ""), "");
		LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLE, want, cg_i64(g, last), "");
		item = LLVMBuildSelect(g->b, in, want, cg_i64(g, last), "");
		lane = LLVMBuildURem(g->b, t, cg_i64(g, d->lanes), "");
		g->dup = LLVMBuildNot(g->b, in, "");
	}
	cg_kernel_body(g, fn, d, args, item, lane);
	g->dup = NULL;
	LLVMBuildRetVoid(g->b);
	return fn;
}

/* x86: void kN(const uint64_t *args, int64_t begin, int64_t end); under
 * DPC_SIMT a kernel of GPU blocks runs each item as a block on the emulator.
 * The kernels of the first unit (cg_unit_of) in the host module, the
 * others' in modules of their own (g->units), declared in the host module
 * for its table; none on the CUDA target (its table is empty). */
void cg_cpu_kernels(Cg *g)
{
	LLVMTypeRef params[3] = {g->i64p, g->i64, g->i64};
	LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, 3, 0);
	LLVMTypeRef fpt = LLVMPointerType(ft, 0);
	int n = g->cuda ? 0 : g->kernels.len;
	LLVMModuleRef host = g->mod;
	if (!g->cuda) {
		g->nunits = n ? cg_units(g) : 0;
		for (int u = 1; u < g->nunits; u++) {
			g->units[u] = LLVMModuleCreateWithNameInContext(ar_printf("dp_kernels%d", u), g->ctx);
			LLVMSetTarget(g->units[u], LLVMGetTarget(host));
			LLVMSetDataLayout(g->units[u], LLVMGetDataLayoutStr(host));
		}
	}
	LLVMValueRef *fns = ar_alloc(sizeof(LLVMValueRef) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		KDesc *d = &g->kernels.data[i];
		const char *name = ar_printf("dp_k%d_%s", i, cg_kernel_label(d));
		int u = cg_unit_of(g, i, g->nunits);
		g->mod = u ? g->units[u] : host;
		g->module_array = false;
		LLVMValueRef fn = LLVMAddFunction(g->mod, name, ft);
		/* another unit's kernel: the host module's table names it, the link resolves it */
		if (u) {
			LLVMSetVisibility(fn, LLVMHiddenVisibility);
			fns[i] = LLVMAddFunction(host, name, ft);
			LLVMSetVisibility(fns[i], LLVMHiddenVisibility);
		} else {
			LLVMSetLinkage(fn, LLVMInternalLinkage);
			fns[i] = fn;
		}
		LLVMValueRef thread = d->lanes > 1 ? simt_thread(g, d, ar_printf("%s_thread", name)) : NULL;
		LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
		LLVMPositionBuilderAtEnd(g->b, entry);
		LLVMValueRef args[16];
		if (!thread)
			load_words(g, fn, d, args);
		K k = {.g = g, .fn = fn, .b = g->b, .vec = 1, .lanes = 1};
		LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
		LLVMValueRef count = LLVMBuildSub(g->b, end, begin, "");
		Loop l = cg_for(&k, count);
		LLVMValueRef item = LLVMBuildAdd(g->b, begin, l.i, "");
		if (thread) {
			LLVMTypeRef bp[3] = {LLVMTypeOf(thread), g->i64p, g->i64}, bft;
			LLVMValueRef block = cg_declare(g, "rt_simt_block", LLVMVoidTypeInContext(g->ctx), bp, 3, &bft);
			LLVMBuildCall2(g->b, bft, block, (LLVMValueRef[]){thread, LLVMGetParam(fn, 0), item}, 3, "");
		} else {
			cg_kernel_body(g, fn, d, args, item, cg_i64(g, 0));
		}
		cg_for_end(&k, &l, count);
		LLVMBuildRetVoid(g->b);
		cg_unit_built(g, i, u);
	}
	g->mod = host;
	LLVMTypeRef at = LLVMArrayType(fpt, (unsigned)n);
	LLVMValueRef table = LLVMAddGlobal(g->mod, at, "dp_cpu_kernels");
	LLVMSetInitializer(table, LLVMConstArray(fpt, fns, (unsigned)n));
	LLVMSetGlobalConstant(table, 1);
	LLVMValueRef count = LLVMAddGlobal(g->mod, g->i32, "dp_cpu_nkernels");
	LLVMSetInitializer(count, LLVMConstInt(g->i32, (unsigned long long)n, 0));
	LLVMSetGlobalConstant(count, 1);
}