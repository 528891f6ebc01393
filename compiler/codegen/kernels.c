/* cg: kernel bodies. Each is generated for one element index, so the same
 * body serves a CPU loop and, later, a GPU thread. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"
#include "../ops/ops.h"
#include "../ops/rng.h"

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

static int64_t rows(Type t) { return t.rank ? ir_numel(t) / t.dim[t.rank - 1] : 1; }

/* Which input axes a reduction keeps (and where they are in its result);
 * returns how many elements fold into each output. */
static int64_t reduced_axes(const KDesc *d, bool *kept, int *out_axis)
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
	int v = 16 / ir_dt_bytes(kernel_dt(g, d));
	switch ((int)d->kind) {
	case K_FUSED:
	case OP_BROADCAST:
		return d->out.rank >= 1 && d->out.dim[d->out.rank - 1] % v == 0 ? v : 1;
	case OP_ACC:
	case OP_ACC_SLICE:
		return ir_numel(d->in[d->nin - 1]) % v == 0 ? v : 1;
	case OP_FILL:
	case OP_MSE_GRAD:
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

static bool attn_tiles(const Cg *g, const KDesc *d, int64_t *tq, int64_t *tk);

static int lane_count(Cg *g, const KDesc *d)
{
	if (!g->cuda)
		return 1;
	if ((int)d->kind == K_LOOP)
		return CG_BLOCK; /* one item: the block */
	switch (low_class(d)) {
	case LW_TOTAL:
		return 256;
	case LW_ROWS:
		return lanes_for(d->out.dim[d->out.rank - 1]);
	case LW_HEADS: {
		int64_t tq, tk;
		return attn_tiles(g, d, &tq, &tk) ? (int)tq : 1;
	}
	case LW_REDUCE: {
		bool kept[IR_MAXRANK];
		int out_axis[IR_MAXRANK];
		int64_t count = reduced_axes(d, kept, out_axis);
		if (d->in[0].rank == 0 || kept[d->in[0].rank - 1])
			return 1;
		return lanes_for(count);
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
	case K_SGD: return "sgd";
	case K_ADAM: return "adam";
	case K_LOOP: return ar_printf("%s[%lld]", k->actions ? "revolve" : "loop", (long long)k->out.dim[0]);
	}
	Type t = k->out;
	const char *s = ar_printf("%s[", (int)k->kind == K_FUSED ? "fused" : ir_ops[k->kind].name);
	for (int i = 0; i < t.rank; i++)
		s = ar_printf("%s%s%lld", s, i ? "," : "", (long long)t.dim[i]);
	return ar_printf("%s]", s);
}

int64_t cg_kernel_size(Cg *g, const KDesc *k)
{
	(void)g;
	if ((int)k->kind == K_LOOP)
		return 1;
	if ((int)k->kind == OP_ACC || (int)k->kind == OP_ACC_SLICE)
		return ir_numel(k->in[k->nin - 1]) / k->vec;
	switch (low_class(k)) {
	case LW_TOTAL:
		return 1;
	case LW_ROWS:
		return rows(k->out);
	case LW_COLS:
		return k->out.dim[1];
	case LW_HEADS: { /* a tile of query (key) rows of one head each, or one row */
		Type q = k->in[0];
		int64_t T = q.dim[q.rank - 2], rows = ir_numel(q) / (q.dim[q.rank - 1] / k->attr.attn.heads), tq, tk;
		if (!attn_tiles(g, k, &tq, &tk))
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
	switch (low_class(k)) {
	case LW_ROWS:
		return k->out.rank ? k->out.dim[k->out.rank - 1] : 1;
	case LW_HEADS: {
		Type q = k->in[0];
		int64_t T = q.dim[q.rank - 2], dh = q.dim[q.rank - 1] / k->attr.attn.heads, tq, tk;
		return (attn_tiles(g, k, &tq, &tk) ? tq : 1) * T * dh;
	}
	default:
		return 1;
	}
}

/* ---- small builders ---- */

typedef struct {
	Cg *g;
	LLVMValueRef fn;
	LLVMBuilderRef b;
	int vec;           /* elementwise values are vectors of this many */
	int lanes;         /* threads sharing one output (GPU reductions) */
	LLVMValueRef lane; /* this thread's place among them, i64 */
} K;

static LLVMValueRef ptr_of(K *k, LLVMValueRef word, LLVMTypeRef pt) { return LLVMBuildIntToPtr(k->b, word, pt, ""); }

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

/* f32 to bf16 bits, rounded to nearest even; NaN stays a (quiet) NaN */
static LLVMValueRef to_bf16(K *k, LLVMValueRef x)
{
	LLVMTypeRef wt = like(x, k->g->i32), ht = like(x, LLVMInt16TypeInContext(k->g->ctx));
	LLVMValueRef w = LLVMBuildBitCast(k->b, x, wt, "");
	LLVMValueRef odd = LLVMBuildAnd(k->b, LLVMBuildLShr(k->b, w, int_of(wt, 16), ""), int_of(wt, 1), "");
	w = LLVMBuildAdd(k->b, w, LLVMBuildAdd(k->b, odd, int_of(wt, 0x7fff), ""), "");
	LLVMValueRef h = LLVMBuildTrunc(k->b, LLVMBuildLShr(k->b, w, int_of(wt, 16), ""), ht, "");
	LLVMValueRef nan = LLVMBuildFCmp(k->b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(k->b, nan, int_of(ht, 0x7fc0), h, "");
}

static LLVMValueRef load(K *k, LLVMValueRef base, LLVMValueRef i)
{
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(k->b, k->g->rstore, p, "");
	return k->g->bf16 ? from_bf16(k, v) : v;
}

static void store(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	LLVMBuildStore(k->b, k->g->bf16 ? to_bf16(k, v) : v, p);
}

/* ---- elementwise values: scalars, or vectors of k->vec ---- */

static LLVMTypeRef vtype(K *k) { return k->vec > 1 ? LLVMVectorType(k->g->real, (unsigned)k->vec) : k->g->real; }

static LLVMValueRef kreal(K *k, double v)
{
	LLVMValueRef c = cg_real(k->g, v);
	if (k->vec == 1)
		return c;
	LLVMValueRef e[16];
	for (int i = 0; i < k->vec; i++)
		e[i] = c;
	return LLVMConstVector(e, (unsigned)k->vec);
}

static LLVMValueRef splat(K *k, LLVMValueRef x)
{
	if (k->vec == 1)
		return x;
	LLVMValueRef v = LLVMBuildInsertElement(k->b, LLVMGetUndef(vtype(k)), x, cg_i64(k->g, 0), "");
	LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(k->g->i32, (unsigned)k->vec));
	return LLVMBuildShuffleVector(k->b, v, LLVMGetUndef(vtype(k)), zeros, "");
}

/* k->vec elements from element i, which is a multiple of k->vec */
static LLVMValueRef vload(K *k, LLVMValueRef base, LLVMValueRef i)
{
	if (k->vec == 1)
		return load(k, base, i);
	LLVMTypeRef st = LLVMVectorType(k->g->rstore, (unsigned)k->vec);
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	p = LLVMBuildBitCast(k->b, p, LLVMPointerType(st, 0), "");
	LLVMValueRef v = LLVMBuildLoad2(k->b, st, p, "");
	LLVMSetAlignment(v, 16);
	return k->g->bf16 ? from_bf16(k, v) : v;
}

static void vstore(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	if (k->vec == 1) {
		store(k, base, i, v);
		return;
	}
	LLVMTypeRef st = LLVMVectorType(k->g->rstore, (unsigned)k->vec);
	LLVMValueRef p = LLVMBuildGEP2(k->b, k->g->rstore, base, &i, 1, "");
	p = LLVMBuildBitCast(k->b, p, LLVMPointerType(st, 0), "");
	LLVMSetAlignment(LLVMBuildStore(k->b, k->g->bf16 ? to_bf16(k, v) : v, p), 16);
}

/* A math function of one or two reals: LLVM's intrinsic llvm.NAME on the
 * CPU (erf, which has none, from libm), libdevice's __nv_NAME on the GPU. */
static LLVMValueRef call_math(K *k, const char *name, LLVMValueRef x, LLVMValueRef y)
{
	Cg *g = k->g;
	int n = y ? 2 : 1;
	if (LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind) {
		/* one call per element: libdevice has no vector forms */
		LLVMValueRef r = LLVMGetUndef(LLVMTypeOf(x));
		for (unsigned i = 0; i < LLVMGetVectorSize(LLVMTypeOf(x)); i++) {
			LLVMValueRef at = cg_i64(g, i);
			LLVMValueRef yi = y ? LLVMBuildExtractElement(k->b, y, at, "") : NULL;
			r = LLVMBuildInsertElement(k->b, r, call_math(k, name, LLVMBuildExtractElement(k->b, x, at, ""), yi), at, "");
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

static LLVMValueRef rexp(K *k, LLVMValueRef x) { return call_math(k, "exp", x, NULL); }
static LLVMValueRef rlog(K *k, LLVMValueRef x) { return call_math(k, "log", x, NULL); }
static LLVMValueRef rsqrt(K *k, LLVMValueRef x) { return call_math(k, "sqrt", x, NULL); }

static LLVMValueRef rmax(K *k, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef gt = LLVMBuildFCmp(k->b, LLVMRealOGT, a, b, "");
	return LLVMBuildSelect(k->b, gt, a, b, "");
}

/* A counted loop inside a kernel body: for (i = start; i < n; i += step). */
typedef struct {
	LLVMBasicBlockRef pre, head, exit;
	LLVMValueRef i;
	int64_t step;
} Loop;

static Loop loop_from(K *k, LLVMValueRef start, int64_t step, LLVMValueRef n)
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

static Loop loop_begin(K *k, LLVMValueRef n) { return loop_from(k, cg_i64(k->g, 0), 1, n); }

/* the share of a reduction's elements that this lane takes */
static Loop lane_loop(K *k, LLVMValueRef n) { return loop_from(k, k->lane, k->lanes, n); }

static void loop_end(K *k, Loop *l, LLVMValueRef n)
{
	LLVMValueRef next = LLVMBuildAdd(k->b, l->i, cg_i64(k->g, l->step), "");
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->b);
	LLVMAddIncoming(l->i, &next, &cur, 1);
	LLVMValueRef more = LLVMBuildICmp(k->b, LLVMIntSLT, next, n, "");
	LLVMBuildCondBr(k->b, more, l->head, l->exit);
	LLVMPositionBuilderAtEnd(k->b, l->exit);
}

/* A running value across a loop: phi at the head, updated at the end. */
typedef struct {
	LLVMValueRef phi;
} Acc;

static Acc acc_begin(K *k, Loop *l, LLVMValueRef init)
{
	Acc a = {LLVMBuildPhi(k->b, LLVMTypeOf(init), "")};
	LLVMAddIncoming(a.phi, &init, &l->pre, 1);
	return a;
}

static void acc_next(K *k, Acc *a, LLVMValueRef v)
{
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->b);
	LLVMAddIncoming(a->phi, &v, &cur, 1);
}

/* The value after the loop: init when it ran zero times, else the last
 * update, which loop_end's latch block computed. */
static LLVMValueRef acc_result(K *k, Loop *l, LLVMValueRef init, LLVMValueRef last)
{
	LLVMValueRef r = LLVMBuildPhi(k->b, LLVMTypeOf(init), "");
	LLVMValueRef vals[2] = {init, last};
	LLVMBasicBlockRef from[2] = {l->pre, LLVMGetInstructionParent(last)};
	LLVMAddIncoming(r, vals, from, 2);
	return r;
}

/* ---- combining the lanes of a GPU reduction ---- */

static LLVMValueRef intrinsic(K *k, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n)
{
	LLVMTypeRef pt[4];
	for (int i = 0; i < n; i++)
		pt[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(ret, pt, (unsigned)n, 0);
	LLVMValueRef f = LLVMGetNamedFunction(k->g->mod, name);
	if (!f)
		f = LLVMAddFunction(k->g->mod, name, ft);
	return LLVMBuildCall2(k->b, ft, f, args, (unsigned)n, "");
}

/* the value of the lane whose number differs from this one's in bit `mask` */
static LLVMValueRef shuffle_xor(K *k, LLVMValueRef v, int mask)
{
	Cg *g = k->g;
	LLVMValueRef all = LLVMConstInt(g->i32, 0xffffffffu, 0), m = LLVMConstInt(g->i32, (unsigned)mask, 0);
	LLVMValueRef clamp = LLVMConstInt(g->i32, 31, 0);
	if (g->real != g->f64) {
		LLVMValueRef args[4] = {all, v, m, clamp};
		return intrinsic(k, "llvm.nvvm.shfl.sync.bfly.f32", g->real, args, 4);
	}
	/* a double moves as two 32-bit halves */
	LLVMValueRef bits = LLVMBuildBitCast(k->b, v, g->i64, "");
	LLVMValueRef half[2] = {LLVMBuildTrunc(k->b, bits, g->i32, ""),
	                        LLVMBuildTrunc(k->b, LLVMBuildLShr(k->b, bits, cg_i64(g, 32), ""), g->i32, "")};
	for (int i = 0; i < 2; i++) {
		LLVMValueRef args[4] = {all, half[i], m, clamp};
		half[i] = intrinsic(k, "llvm.nvvm.shfl.sync.bfly.i32", g->i32, args, 4);
	}
	LLVMValueRef hi = LLVMBuildShl(k->b, LLVMBuildZExt(k->b, half[1], g->i64, ""), cg_i64(g, 32), "");
	bits = LLVMBuildOr(k->b, hi, LLVMBuildZExt(k->b, half[0], g->i64, ""), "");
	return LLVMBuildBitCast(k->b, bits, g->f64, "");
}

static LLVMValueRef combine(K *k, LLVMValueRef a, LLVMValueRef b, bool max)
{
	return max ? rmax(k, a, b) : LLVMBuildFAdd(k->b, a, b, "");
}

/* A block's shared array of type at, one per name: created by the first
 * kernel that asks. Names carry the compute type, since a module may hold
 * f32 and f64 kernels. */
static LLVMValueRef shared_array(Cg *g, const char *name, LLVMTypeRef at)
{
	LLVMValueRef s = LLVMGetNamedGlobal(g->mod, name);
	if (!s) {
		s = LLVMAddGlobalInAddressSpace(g->mod, at, name, 3);
		LLVMSetInitializer(s, LLVMGetUndef(at));
		LLVMSetLinkage(s, LLVMInternalLinkage);
		LLVMSetAlignment(s, 16);
	}
	return s;
}

/* Every lane's partial value in, the whole reduction out, the same bits in
 * every lane: the butterfly pairs lanes symmetrically, and the block's warps
 * are then combined in one fixed order. Deterministic from run to run. */
static LLVMValueRef all_reduce(K *k, LLVMValueRef v, bool max)
{
	Cg *g = k->g;
	if (k->lanes == 1)
		return v;
	for (int m = (k->lanes < 32 ? k->lanes : 32) / 2; m >= 1; m /= 2)
		v = combine(k, v, shuffle_xor(k, v, m), max);
	if (k->lanes <= 32)
		return v;
	int nwarps = k->lanes / 32;
	LLVMTypeRef at = LLVMArrayType(g->real, (unsigned)nwarps);
	LLVMValueRef smem = shared_array(g, g->real == g->f64 ? "dp_partials_f64" : "dp_partials_f32", at);
	LLVMValueRef warp = LLVMBuildLShr(k->b, k->lane, cg_i64(g, 5), "");
	LLVMValueRef first = LLVMBuildICmp(k->b, LLVMIntEQ, LLVMBuildAnd(k->b, k->lane, cg_i64(g, 31), ""), cg_i64(g, 0), "");
	LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "put"), join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "join");
	LLVMBuildCondBr(k->b, first, put, join);
	LLVMPositionBuilderAtEnd(k->b, put);
	LLVMValueRef idx[2] = {cg_i64(g, 0), warp};
	LLVMBuildStore(k->b, v, LLVMBuildGEP2(k->b, at, smem, idx, 2, ""));
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
	intrinsic(k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(g->ctx), NULL, 0);
	LLVMValueRef r = NULL;
	for (int w = 0; w < nwarps; w++) {
		LLVMValueRef ix[2] = {cg_i64(g, 0), cg_i64(g, w)};
		LLVMValueRef x = LLVMBuildLoad2(k->b, g->real, LLVMBuildGEP2(k->b, at, smem, ix, 2, ""), "");
		r = r ? combine(k, r, x, max) : x;
	}
	/* the next reduction may overwrite the partials only once all have read them */
	intrinsic(k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(g->ctx), NULL, 0);
	return r;
}

/* A reduction's result, stored once: by lane 0. */
static void store_once(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	if (k->lanes == 1) {
		store(k, base, i, v);
		return;
	}
	LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "put"), join = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "join");
	LLVMBuildCondBr(k->b, LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(k->g, 0), ""), put, join);
	LLVMPositionBuilderAtEnd(k->b, put);
	store(k, base, i, v);
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
}

/* ---- index arithmetic ---- */

/* Unravels a flat index over t's dims (row-major). In 32 bits where t is
 * small enough: division by a constant is several times cheaper there, on
 * the GPU above all. */
static void unravel(K *k, Type t, LLVMValueRef idx, LLVMValueRef *coord)
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
	unravel(k, bmn, idx, c);
	LLVMValueRef batch = c[0], i = c[1], j = c[2];
	LLVMValueRef abase = LLVMBuildMul(B, batch, cg_i64(g, m * kk), "");
	LLVMValueRef bbase = b.rank == 2 ? cg_i64(g, 0) : LLVMBuildMul(B, batch, cg_i64(g, kk * n), "");
	/* a[i, t] and b[t, j], t advancing by these strides */
	LLVMValueRef a0 = LLVMBuildAdd(B, abase, d->attr.mm.ta ? i : LLVMBuildMul(B, i, cg_i64(g, kk), ""), "");
	LLVMValueRef b0 = LLVMBuildAdd(B, bbase, d->attr.mm.tb ? LLVMBuildMul(B, j, cg_i64(g, kk), "") : j, "");
	int64_t as = d->attr.mm.ta ? m : 1, bs = d->attr.mm.tb ? 1 : n;
	LLVMValueRef init = cg_real(g, 0), count = cg_i64(g, kk);
	Loop l = loop_begin(k, count);
	Acc sum = acc_begin(k, &l, init);
	LLVMValueRef x = load(k, ptrs[1], LLVMBuildAdd(B, a0, LLVMBuildMul(B, l.i, cg_i64(g, as), ""), ""));
	LLVMValueRef y = load(k, ptrs[2], LLVMBuildAdd(B, b0, LLVMBuildMul(B, l.i, cg_i64(g, bs), ""), ""));
	LLVMValueRef next = LLVMBuildFAdd(B, sum.phi, LLVMBuildFMul(B, x, y, ""), "");
	acc_next(k, &sum, next);
	loop_end(k, &l, count);
	LLVMValueRef total = acc_result(k, &l, init, next);
	/* an absorbed acc: v + x, in that order, as the acc does */
	if (d->accumulate)
		total = LLVMBuildFAdd(B, load(k, ptrs[0], idx), total, "");
	store(k, ptrs[0], idx, total);
}

/* Offset into operand type t at the result's coordinates, NumPy-broadcast. */
static LLVMValueRef bcast_offset(K *k, Type t, Type out, LLVMValueRef *coord)
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

/* ---- bodies ---- */

/* tanh |x| = (1 - e^-2|x|) / (1 + e^-2|x|): no overflow, sign restored */
static LLVMValueRef rtanh(K *k, LLVMValueRef a)
{
	LLVMBuilderRef B = k->b;
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, a, kreal(k, 0), "");
	LLVMValueRef ax = LLVMBuildSelect(B, neg, LLVMBuildFNeg(B, a, ""), a, "");
	LLVMValueRef e = rexp(k, LLVMBuildFMul(B, ax, kreal(k, -2), ""));
	LLVMValueRef t = LLVMBuildFDiv(B, LLVMBuildFSub(B, kreal(k, 1), e, ""), LLVMBuildFAdd(B, kreal(k, 1), e, ""), "");
	return LLVMBuildSelect(B, neg, LLVMBuildFNeg(B, t, ""), t, "");
}

static LLVMValueRef mul(K *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(k->b, a, b, ""); }

/* 1.0 where the comparison holds, else 0.0 */
static LLVMValueRef truth(K *k, LLVMRealPredicate pr, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(k->b, LLVMBuildFCmp(k->b, pr, a, b, ""), kreal(k, 1), kreal(k, 0), "");
}

/* One elementwise op on values a, b, c (as its arity has them); its meaning
 * is ops_eval_ew (compiler/ops/elementwise.c). */
static LLVMValueRef ew(K *k, OpKind op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMBuilderRef B = k->b;
	switch (op) {
	case OP_ADD: return LLVMBuildFAdd(B, a, b, "");
	case OP_SUB: return LLVMBuildFSub(B, a, b, "");
	case OP_MUL: return mul(k, a, b);
	case OP_DIV: return LLVMBuildFDiv(B, a, b, "");
	case OP_NEG: return LLVMBuildFNeg(B, a, "");
	case OP_RELU: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, kreal(k, 0), ""), a, kreal(k, 0), "");
	case OP_STEP: return truth(k, LLVMRealOGT, a, kreal(k, 0));
	case OP_EXP: return rexp(k, a);
	case OP_LOG: return rlog(k, a);
	case OP_SQRT: return rsqrt(k, a);
	case OP_SIGMOID:
		return LLVMBuildFDiv(B, kreal(k, 1), LLVMBuildFAdd(B, kreal(k, 1), rexp(k, LLVMBuildFNeg(B, a, "")), ""), "");
	case OP_TANH: return rtanh(k, a);
	case OP_ABS: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, a, kreal(k, 0), ""), LLVMBuildFNeg(B, a, ""), a, "");
	case OP_SIGN: return LLVMBuildFSub(B, truth(k, LLVMRealOGT, a, kreal(k, 0)), truth(k, LLVMRealOLT, a, kreal(k, 0)), "");
	case OP_ERF: return call_math(k, "erf", a, NULL);
	case OP_POW: return call_math(k, "pow", a, b);
	case OP_GELU:
	case OP_GELU_GRAD: {
		/* t = tanh(c (x + 0.044715 x^3)); gelu = x (1 + t) / 2 */
		LLVMValueRef x2 = mul(k, a, a);
		LLVMValueRef t = rtanh(k, mul(k, mul(k, a, kreal(k, 0.7978845608028654)),
		                              LLVMBuildFAdd(B, kreal(k, 1), mul(k, x2, kreal(k, 0.044715)), "")));
		LLVMValueRef half = mul(k, LLVMBuildFAdd(B, kreal(k, 1), t, ""), kreal(k, 0.5));
		if (op == OP_GELU)
			return mul(k, a, half);
		/* (1 + t) / 2 + x (1 - t^2) c (1 + 3 0.044715 x^2) / 2 */
		LLVMValueRef d = mul(k, LLVMBuildFSub(B, kreal(k, 1), mul(k, t, t), ""),
		                     LLVMBuildFAdd(B, kreal(k, 1), mul(k, x2, kreal(k, 3 * 0.044715)), ""));
		return LLVMBuildFAdd(B, half, mul(k, mul(k, a, d), kreal(k, 0.5 * 0.7978845608028654)), "");
	}
	case OP_MAXIMUM: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, a, b, ""), a, b, "");
	case OP_MINIMUM: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLE, a, b, ""), a, b, "");
	case OP_LT: return truth(k, LLVMRealOLT, a, b);
	case OP_LE: return truth(k, LLVMRealOLE, a, b);
	case OP_GT: return truth(k, LLVMRealOGT, a, b);
	case OP_GE: return truth(k, LLVMRealOGE, a, b);
	case OP_EQ: return truth(k, LLVMRealOEQ, a, b);
	case OP_NE: return truth(k, LLVMRealUNE, a, b);
	case OP_WHERE: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNE, a, kreal(k, 0), ""), b, c, "");
	default:
		die("no elementwise lowering for %s", ir_ops[op].name);
	}
}

/* sum (max, min) over the input axes that the output does not keep; min
 * is max of the negated values, negated */
static void body_reduce(K *k, const KDesc *d, LLVMValueRef out, LLVMValueRef in, LLVMValueRef idx)
{
	Cg *g = k->g;
	Type t = d->in[0], o = d->out;
	bool kept[IR_MAXRANK];
	int out_axis[IR_MAXRANK];
	int64_t count = reduced_axes(d, kept, out_axis);
	LLVMValueRef oc[IR_MAXRANK];
	unravel(k, o, idx, oc);
	/* base offset of the kept coordinates */
	LLVMValueRef base = cg_i64(g, 0);
	int64_t stride[IR_MAXRANK], s = 1;
	for (int a = t.rank - 1; a >= 0; a--)
		stride[a] = s, s *= t.dim[a];
	for (int a = 0; a < t.rank; a++)
		if (kept[a] && t.dim[a] > 1)
			base = LLVMBuildAdd(k->b, base, LLVMBuildMul(k->b, oc[out_axis[a]], cg_i64(g, stride[a]), ""), "");
	bool max = d->kind == OP_MAX || d->kind == OP_MIN, neg = d->kind == OP_MIN;
	LLVMValueRef init = cg_real(g, max ? -INFINITY : 0);
	LLVMValueRef n = cg_i64(g, count);
	Loop l = lane_loop(k, n);
	Acc sum = acc_begin(k, &l, init);
	/* decompose the reduction counter over the reduced axes */
	Type red = {.rank = 0};
	int axis[IR_MAXRANK];
	for (int a = 0; a < t.rank; a++)
		if (!kept[a])
			axis[red.rank] = a, red.dim[red.rank++] = t.dim[a];
	LLVMValueRef rc[IR_MAXRANK], off = base;
	unravel(k, red, l.i, rc);
	for (int j = 0; j < red.rank; j++)
		off = LLVMBuildAdd(k->b, off, LLVMBuildMul(k->b, rc[j], cg_i64(g, stride[axis[j]]), ""), "");
	LLVMValueRef x = load(k, in, off);
	if (neg)
		x = LLVMBuildFNeg(k->b, x, "");
	LLVMValueRef next = combine(k, sum.phi, x, max);
	acc_next(k, &sum, next);
	loop_end(k, &l, n);
	LLVMValueRef total = all_reduce(k, acc_result(k, &l, init, next), max);
	if (neg)
		total = LLVMBuildFNeg(k->b, total, "");
	if (d->kind == OP_MEAN)
		total = LLVMBuildFDiv(k->b, total, cg_real(g, (double)count), "");
	if (d->accumulate) {
		/* what the absorbed acc did: v + x, in that order; lane 0 alone reads and writes */
		LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "put"), join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "join");
		LLVMBuildCondBr(k->b, LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(g, 0), ""), put, join);
		LLVMPositionBuilderAtEnd(k->b, put);
		store(k, out, idx, LLVMBuildFAdd(k->b, load(k, out, idx), total, ""));
		LLVMBuildBr(k->b, join);
		LLVMPositionBuilderAtEnd(k->b, join);
		return;
	}
	store_once(k, out, idx, total);
}

/* Log-sum-exp of the C entries of x from base, and their max. split: the
 * lanes share the row; else this thread reads all of it. */
static LLVMValueRef row_lse(K *k, LLVMValueRef x, LLVMValueRef base, int64_t C, bool split, LLVMValueRef *max_out)
{
	Cg *g = k->g;
	LLVMValueRef n = cg_i64(g, C);
	LLVMValueRef first = load(k, x, base);
	Loop l = split ? lane_loop(k, n) : loop_begin(k, n);
	Acc m = acc_begin(k, &l, first);
	LLVMValueRef nm = rmax(k, m.phi, load(k, x, LLVMBuildAdd(k->b, base, l.i, "")));
	acc_next(k, &m, nm);
	loop_end(k, &l, n);
	LLVMValueRef mx = acc_result(k, &l, first, nm);
	if (split)
		mx = all_reduce(k, mx, true);
	Loop l2 = split ? lane_loop(k, n) : loop_begin(k, n);
	Acc s = acc_begin(k, &l2, cg_real(g, 0));
	LLVMValueRef e = rexp(k, LLVMBuildFSub(k->b, load(k, x, LLVMBuildAdd(k->b, base, l2.i, "")), mx, ""));
	LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, e, "");
	acc_next(k, &s, ns);
	loop_end(k, &l2, n);
	LLVMValueRef sum = acc_result(k, &l2, cg_real(g, 0), ns);
	if (split)
		sum = all_reduce(k, sum, false);
	*max_out = mx;
	return LLVMBuildFAdd(k->b, mx, rlog(k, sum), "");
}

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

/* the row ops: each work item is one row of C entries, shared by the lanes */
static void body_rows(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef row)
{
	Cg *g = k->g;
	int64_t C = d->out.dim[d->out.rank - 1];
	LLVMValueRef n = cg_i64(g, C), base = LLVMBuildMul(k->b, row, n, "");
	LLVMValueRef out = ptrs[0], x = ptrs[1];
	if (d->kind == OP_SOFTMAX || d->kind == OP_LOG_SOFTMAX) {
		LLVMValueRef mx, lse = row_lse(k, x, base, C, true, &mx);
		Loop l = lane_loop(k, n);
		LLVMValueRef at = LLVMBuildAdd(k->b, base, l.i, "");
		LLVMValueRef ls = LLVMBuildFSub(k->b, load(k, x, at), lse, "");
		store(k, out, at, d->kind == OP_SOFTMAX ? rexp(k, ls) : ls);
		loop_end(k, &l, n);
		return;
	}
	if (d->kind == OP_XENT_GRAD) {
		/* ptrs: out, logits, labels, seed */
		LLVMValueRef valid, lab = row_label(k, d, ptrs[2], row, &valid);
		LLVMValueRef seed = LLVMBuildFDiv(k->b, load(k, ptrs[3], cg_i64(g, 0)), cg_real(g, (double)rows(d->out)), "");
		seed = LLVMBuildSelect(k->b, valid, seed, cg_real(g, 0), "");
		LLVMValueRef mx, lse = row_lse(k, x, base, C, true, &mx);
		Loop l = lane_loop(k, n);
		LLVMValueRef at = LLVMBuildAdd(k->b, base, l.i, "");
		LLVMValueRef p = rexp(k, LLVMBuildFSub(k->b, load(k, x, at), lse, ""));
		LLVMValueRef hot = LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntEQ, l.i, lab, ""), cg_real(g, 1), cg_real(g, 0), "");
		store(k, out, at, LLVMBuildFMul(k->b, seed, LLVMBuildFSub(k->b, p, hot, ""), ""));
		loop_end(k, &l, n);
		return;
	}
	/* SOFTMAX_GRAD (y, g): y (g - sum g y); LOG_SOFTMAX_GRAD (y, g): g - exp(y) sum g */
	LLVMValueRef y = ptrs[1], gr = ptrs[2];
	bool soft = d->kind == OP_SOFTMAX_GRAD;
	Loop l = lane_loop(k, n);
	Acc s = acc_begin(k, &l, cg_real(g, 0));
	LLVMValueRef at = LLVMBuildAdd(k->b, base, l.i, "");
	LLVMValueRef term = soft ? LLVMBuildFMul(k->b, load(k, gr, at), load(k, y, at), "") : load(k, gr, at);
	LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, term, "");
	acc_next(k, &s, ns);
	loop_end(k, &l, n);
	LLVMValueRef sum = all_reduce(k, acc_result(k, &l, cg_real(g, 0), ns), false);
	Loop l2 = lane_loop(k, n);
	LLVMValueRef at2 = LLVMBuildAdd(k->b, base, l2.i, "");
	LLVMValueRef yv = load(k, y, at2), gv = load(k, gr, at2);
	LLVMValueRef v = soft ? LLVMBuildFMul(k->b, yv, LLVMBuildFSub(k->b, gv, sum, ""), "")
	                      : LLVMBuildFSub(k->b, gv, LLVMBuildFMul(k->b, rexp(k, yv), sum, ""), "");
	store(k, out, at2, v);
	loop_end(k, &l2, n);
}

typedef struct {
	LLVMValueRef x, g, dy, base, mean, r; /* the row's pointers and statistics so far */
} Norm;

static LLVMValueRef norm_hat(K *k, Norm *s, LLVMValueRef at)
{
	return LLVMBuildFMul(k->b, LLVMBuildFSub(k->b, load(k, s->x, at), s->mean, ""), s->r, "");
}

/* what layernorm's row sums add up: x, (x - mean)^2, dy g, dy g hat */
static LLVMValueRef norm_term(K *k, Norm *s, LLVMValueRef at, LLVMValueRef i, int which)
{
	LLVMValueRef v;
	switch (which) {
	case 0: return load(k, s->x, at);
	case 1:
		v = LLVMBuildFSub(k->b, load(k, s->x, at), s->mean, "");
		return LLVMBuildFMul(k->b, v, v, "");
	default:
		v = LLVMBuildFMul(k->b, load(k, s->dy, at), load(k, s->g, i), "");
		return which == 2 ? v : LLVMBuildFMul(k->b, v, norm_hat(k, s, at), "");
	}
}

static LLVMValueRef norm_sum(K *k, Norm *s, int64_t C, int which)
{
	Cg *g = k->g;
	LLVMValueRef n = cg_i64(g, C);
	Loop l = lane_loop(k, n);
	Acc a = acc_begin(k, &l, cg_real(g, 0));
	LLVMValueRef next = LLVMBuildFAdd(k->b, a.phi, norm_term(k, s, LLVMBuildAdd(k->b, s->base, l.i, ""), l.i, which), "");
	acc_next(k, &a, next);
	loop_end(k, &l, n);
	return all_reduce(k, acc_result(k, &l, cg_real(g, 0), next), false);
}

/* layernorm (x, g, b), layernorm_hat (x), layernorm_grad (x, g, dy): one row
 * per work item; the mean and variance are two passes over the row */
static void body_norm(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef row)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	int64_t C = d->out.dim[d->out.rank - 1];
	LLVMValueRef n = cg_i64(g, C), inv = cg_real(g, 1.0 / (double)C);
	Norm s = {ptrs[1], ptrs[2], ptrs[3], LLVMBuildMul(B, row, n, ""), NULL, NULL};
	s.mean = LLVMBuildFMul(B, norm_sum(k, &s, C, 0), inv, "");
	LLVMValueRef var = LLVMBuildFMul(B, norm_sum(k, &s, C, 1), inv, "");
	s.r = LLVMBuildFDiv(B, cg_real(g, 1), rsqrt(k, LLVMBuildFAdd(B, var, cg_real(g, d->attr.value), "")), "");
	LLVMValueRef s1 = NULL, s2 = NULL;
	if (d->kind == OP_LAYERNORM_GRAD) {
		s1 = LLVMBuildFMul(B, norm_sum(k, &s, C, 2), inv, "");
		s2 = LLVMBuildFMul(B, norm_sum(k, &s, C, 3), inv, "");
	}
	Loop l = lane_loop(k, n);
	LLVMValueRef at = LLVMBuildAdd(B, s.base, l.i, ""), hat = norm_hat(k, &s, at), v;
	if (d->kind == OP_LAYERNORM)
		v = LLVMBuildFAdd(B, LLVMBuildFMul(B, hat, load(k, ptrs[2], l.i), ""), load(k, ptrs[3], l.i), "");
	else if (d->kind == OP_LAYERNORM_HAT)
		v = hat;
	else /* r (dy g - mean(dy g) - hat mean(dy g hat)) */
		v = LLVMBuildFMul(B, s.r, LLVMBuildFSub(B, LLVMBuildFSub(B, norm_term(k, &s, at, l.i, 2), s1, ""), LLVMBuildFMul(B, hat, s2, ""), ""), "");
	store(k, ptrs[0], at, v);
	loop_end(k, &l, n);
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
 * embed_grad: work item d owns column d of the result and adds the rows of
 * g into it in the order of the ids, so the sums are deterministic */
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
		LLVMValueRef v = load(k, ptrs[1], LLVMBuildAdd(B, LLVMBuildMul(B, id, cols, ""), col, ""));
		store(k, ptrs[0], idx, LLVMBuildSelect(B, ok, v, cg_real(g, 0), ""));
		return;
	}
	LLVMValueRef nv = cg_i64(g, V);
	Loop z = loop_begin(k, nv);
	store(k, ptrs[0], LLVMBuildAdd(B, LLVMBuildMul(B, z.i, cols, ""), idx, ""), cg_real(g, 0));
	loop_end(k, &z, nv);
	LLVMValueRef nn = cg_i64(g, ir_numel(d->in[1]));
	Loop l = loop_begin(k, nn);
	LLVMValueRef id = embed_id(k, ptrs[2], l.i, V, &ok);
	LLVMBasicBlockRef add = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "add"), join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "join");
	LLVMBuildCondBr(B, ok, add, join);
	LLVMPositionBuilderAtEnd(B, add);
	LLVMValueRef at = LLVMBuildAdd(B, LLVMBuildMul(B, id, cols, ""), idx, "");
	LLVMValueRef gv = load(k, ptrs[1], LLVMBuildAdd(B, LLVMBuildMul(B, l.i, cols, ""), idx, ""));
	store(k, ptrs[0], at, LLVMBuildFAdd(B, load(k, ptrs[0], at), gv, ""));
	LLVMBuildBr(B, join);
	LLVMPositionBuilderAtEnd(B, join);
	loop_end(k, &l, nn);
}

/* sum over i < n of x[xb + i] * y[yb + i] */
static LLVMValueRef dot(K *k, LLVMValueRef x, LLVMValueRef xb, LLVMValueRef y, LLVMValueRef yb, int64_t n)
{
	Cg *g = k->g;
	LLVMValueRef nn = cg_i64(g, n);
	Loop l = loop_begin(k, nn);
	Acc a = acc_begin(k, &l, cg_real(g, 0));
	LLVMValueRef v = LLVMBuildFAdd(k->b, a.phi, LLVMBuildFMul(k->b, load(k, x, LLVMBuildAdd(k->b, xb, l.i, "")), load(k, y, LLVMBuildAdd(k->b, yb, l.i, "")), ""), "");
	acc_next(k, &a, v);
	loop_end(k, &l, nn);
	return acc_result(k, &l, cg_real(g, 0), v);
}

/* out[ob + i] += s * x[xb + i] for i < n */
static void axpy(K *k, LLVMValueRef out, LLVMValueRef ob, LLVMValueRef s, LLVMValueRef x, LLVMValueRef xb, int64_t n)
{
	LLVMValueRef nn = cg_i64(k->g, n);
	Loop l = loop_begin(k, nn);
	LLVMValueRef at = LLVMBuildAdd(k->b, ob, l.i, "");
	store(k, out, at, LLVMBuildFAdd(k->b, load(k, out, at), LLVMBuildFMul(k->b, s, load(k, x, LLVMBuildAdd(k->b, xb, l.i, "")), ""), ""));
	loop_end(k, &l, nn);
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

static bool attn_tiles(const Cg *g, const KDesc *d, int64_t *tq, int64_t *tk)
{
	Type q = d->in[0];
	int64_t dh = q.dim[q.rank - 1] / d->attr.attn.heads, rb = q.dt == DT_F64 ? 8 : 4;
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
static LLVMValueRef scratch(K *k, int64_t n)
{
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(k->fn);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(k->g->ctx);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(b, first);
	else
		LLVMPositionBuilderAtEnd(b, entry);
	LLVMValueRef a = LLVMBuildArrayAlloca(b, k->g->real, LLVMConstInt(k->g->i32, (unsigned long long)n, 0), "");
	LLVMSetAlignment(a, 16);
	LLVMDisposeBuilder(b);
	return a;
}

/* the item's tile memory, n reals: the block's shared array on the GPU */
static LLVMValueRef tile_memory(K *k, int64_t n)
{
	Cg *g = k->g;
	if (k->lanes == 1)
		return scratch(k, n);
	bool f64 = g->real == g->f64;
	LLVMValueRef s = shared_array(g, f64 ? "dp_tile_f64" : "dp_tile_f32", LLVMArrayType(g->real, ATTN_SMEM / (f64 ? 8 : 4)));
	return LLVMBuildAddrSpaceCast(k->b, LLVMBuildBitCast(k->b, s, LLVMPointerType(g->real, 3), ""), LLVMPointerType(g->real, 0), "");
}

static LLVMValueRef at_c(K *k, LLVMValueRef p, LLVMValueRef i) { return LLVMBuildGEP2(k->b, k->g->real, p, &i, 1, ""); }
static LLVMValueRef rd_c(K *k, LLVMValueRef p, LLVMValueRef i) { return LLVMBuildLoad2(k->b, k->g->real, at_c(k, p, i), ""); }
static void wr_c(K *k, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v) { LLVMBuildStore(k->b, v, at_c(k, p, i)); }

/* sum of x[i] y[i] for i < n, both in the compute type */
static LLVMValueRef dot_c(K *k, LLVMValueRef x, LLVMValueRef y, int64_t n)
{
	Cg *g = k->g;
	LLVMValueRef nn = cg_i64(g, n);
	Loop l = loop_begin(k, nn);
	Acc a = acc_begin(k, &l, cg_real(g, 0));
	LLVMValueRef v = LLVMBuildFAdd(k->b, a.phi, LLVMBuildFMul(k->b, rd_c(k, x, l.i), rd_c(k, y, l.i), ""), "");
	acc_next(k, &a, v);
	loop_end(k, &l, nn);
	return acc_result(k, &l, cg_real(g, 0), v);
}

/* acc[i] += s x[i] for i < n */
static void axpy_c(K *k, LLVMValueRef acc, LLVMValueRef s, LLVMValueRef x, int64_t n)
{
	LLVMValueRef nn = cg_i64(k->g, n);
	Loop l = loop_begin(k, nn);
	wr_c(k, acc, l.i, LLVMBuildFAdd(k->b, rd_c(k, acc, l.i), LLVMBuildFMul(k->b, s, rd_c(k, x, l.i), ""), ""));
	loop_end(k, &l, nn);
}

/* the item's lanes wait for each other (GPU); nothing to wait for on the CPU */
static void barrier(K *k)
{
	if (k->lanes > 1)
		intrinsic(k, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(k->g->ctx), NULL, 0);
}

/* code emitted between if_begin and if_end runs when c holds */
static LLVMBasicBlockRef if_begin(K *k, LLVMValueRef c)
{
	LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "then"), join = LLVMAppendBasicBlockInContext(k->g->ctx, k->fn, "join");
	LLVMBuildCondBr(k->b, c, then, join);
	LLVMPositionBuilderAtEnd(k->b, then);
	return join;
}

static void if_end(K *k, LLVMBasicBlockRef join)
{
	LLVMBuildBr(k->b, join);
	LLVMPositionBuilderAtEnd(k->b, join);
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
	Loop sl = loop_begin(k, cg_i64(g, nslot));
	LLVMValueRef r = ROW(sl.i);
	LLVMBasicBlockRef join = if_begin(k, LLVMBuildICmp(B, LLVMIntSLT, r, nT, ""));
	LLVMValueRef ms = SLOT(mine, sl.i, Dh), as = SLOT(acc, sl.i, Dh), ss = SLOT(st, sl.i, 2);
	LLVMValueRef m2 = two ? SLOT(mine2, sl.i, Dh) : NULL;
	Loop c = loop_begin(k, nDh);
	wr_c(k, ms, c.i, load(k, own, LLVMBuildAdd(B, AT(r), c.i, "")));
	if (two)
		wr_c(k, m2, c.i, load(k, own2, LLVMBuildAdd(B, AT(r), c.i, "")));
	wr_c(k, as, c.i, cg_real(g, 0));
	loop_end(k, &c, nDh);
	if (d->kind == OP_ATTN_DQ) {
		wr_c(k, ss, cg_i64(g, 0), load(k, ptrs[5], ST(r)));
		wr_c(k, ss, cg_i64(g, 1), load(k, ptrs[5], LLVMBuildAdd(B, ST(r), cg_i64(g, 1), "")));
	} else {
		wr_c(k, ss, cg_i64(g, 0), cg_real(g, -INFINITY));
		wr_c(k, ss, cg_i64(g, 1), cg_real(g, 0));
	}
	if_end(k, join);
	loop_end(k, &sl, cg_i64(g, nslot));

	/* the other side's rows: keys 0 .. the tile's last row (all when not
	 * causal) for query rows, queries from the tile's first row for key rows */
	LLVMValueRef ostart = keyside && causal ? row0 : cg_i64(g, 0);
	LLVMValueRef oend = !keyside && causal ? imin(k, nT, LLVMBuildAdd(B, row0, cg_i64(g, tq), "")) : nT;
	for (int pass = 0; pass < (fwd ? 2 : 1); pass++) {
		bool sums = (fwd && pass == 0) || stats; /* running max and sum of exp */
		bool load_b = !sums;
		Loop o = loop_from(k, ostart, tk, oend);
		LLVMValueRef on = imin(k, cg_i64(g, tk), LLVMBuildSub(B, oend, o.i, ""));
		barrier(k); /* the last tile's readers are done */
		LLVMValueRef n = LLVMBuildMul(B, on, nDh, "");
		Loop e = lane_loop(k, n);
		LLVMValueRef src = LLVMBuildAdd(B, AT(LLVMBuildAdd(B, o.i, LLVMBuildUDiv(B, e.i, nDh, ""), "")), LLVMBuildURem(B, e.i, nDh, ""), "");
		wr_c(k, ta, e.i, load(k, keyside ? ptrs[1] : ptrs[2], src));
		if (load_b)
			wr_c(k, tb, e.i, load(k, keyside ? ptrs[4] : ptrs[3], src));
		loop_end(k, &e, n);
		if (keyside) {
			LLVMValueRef n2 = LLVMBuildMul(B, on, cg_i64(g, 2), "");
			Loop e2 = lane_loop(k, n2);
			wr_c(k, ts, e2.i, load(k, ptrs[5], LLVMBuildAdd(B, ST(o.i), e2.i, "")));
			loop_end(k, &e2, n2);
		}
		barrier(k);
		Loop s = loop_begin(k, cg_i64(g, nslot));
		LLVMValueRef rr = ROW(s.i);
		LLVMBasicBlockRef j2 = if_begin(k, LLVMBuildICmp(B, LLVMIntSLT, rr, nT, ""));
		LLVMValueRef ms2 = SLOT(mine, s.i, Dh), as2 = SLOT(acc, s.i, Dh), ss2 = SLOT(st, s.i, 2);
		LLVMValueRef m22 = two ? SLOT(mine2, s.i, Dh) : NULL;
		/* causal: a query row sees keys up to itself, a key row queries from itself */
		LLVMValueRef rel = LLVMBuildSub(B, rr, o.i, "");
		LLVMValueRef jfrom = keyside && causal ? imax(k, cg_i64(g, 0), rel) : cg_i64(g, 0);
		LLVMValueRef jto = !keyside && causal ? imin(k, on, LLVMBuildAdd(B, rel, cg_i64(g, 1), "")) : on;
		Loop j = loop_from(k, jfrom, 1, jto);
		LLVMValueRef aj = at_c(k, ta, LLVMBuildMul(B, j.i, nDh, "")), bj = at_c(k, tb, LLVMBuildMul(B, j.i, nDh, ""));
		LLVMValueRef sc = LLVMBuildFMul(B, dot_c(k, ms2, aj, Dh), scale, "");
		if (sums) {
			LLVMValueRef m0 = rd_c(k, ss2, cg_i64(g, 0)), l0 = rd_c(k, ss2, cg_i64(g, 1));
			LLVMValueRef nm = rmax(k, m0, sc);
			LLVMValueRef nl = LLVMBuildFAdd(B, LLVMBuildFMul(B, l0, rexp(k, LLVMBuildFSub(B, m0, nm, "")), ""),
			                                rexp(k, LLVMBuildFSub(B, sc, nm, "")), "");
			wr_c(k, ss2, cg_i64(g, 0), nm);
			wr_c(k, ss2, cg_i64(g, 1), nl);
		} else if (fwd) {
			/* pass 2: st holds the row's log-sum-exp */
			axpy_c(k, as2, rexp(k, LLVMBuildFSub(B, sc, rd_c(k, ss2, cg_i64(g, 0)), "")), bj, Dh);
		} else if (!keyside) {
			/* dq: ds = p (dO . v_j - D) scale, against k_j */
			LLVMValueRef p = rexp(k, LLVMBuildFSub(B, sc, rd_c(k, ss2, cg_i64(g, 0)), ""));
			LLVMValueRef ds = LLVMBuildFMul(B, p, LLVMBuildFSub(B, dot_c(k, m22, bj, Dh), rd_c(k, ss2, cg_i64(g, 1)), ""), "");
			axpy_c(k, as2, LLVMBuildFMul(B, ds, scale, ""), aj, Dh);
		} else {
			/* key rows: query j's stats from the tile */
			LLVMValueRef two_j = LLVMBuildMul(B, j.i, cg_i64(g, 2), "");
			LLVMValueRef p = rexp(k, LLVMBuildFSub(B, sc, rd_c(k, ts, two_j), ""));
			if (d->kind == OP_ATTN_DV) {
				axpy_c(k, as2, p, bj, Dh);
			} else {
				LLVMValueRef dd = rd_c(k, ts, LLVMBuildAdd(B, two_j, cg_i64(g, 1), ""));
				LLVMValueRef ds = LLVMBuildFMul(B, p, LLVMBuildFSub(B, dot_c(k, bj, m22, Dh), dd, ""), "");
				axpy_c(k, as2, LLVMBuildFMul(B, ds, scale, ""), aj, Dh);
			}
		}
		loop_end(k, &j, jto);
		if_end(k, j2);
		loop_end(k, &s, cg_i64(g, nslot));
		loop_end(k, &o, oend);
		if (fwd && pass == 0) {
			/* each row's log-sum-exp, for the second pass */
			Loop s3 = loop_begin(k, cg_i64(g, nslot));
			LLVMValueRef ss3 = SLOT(st, s3.i, 2);
			wr_c(k, ss3, cg_i64(g, 0), LLVMBuildFAdd(B, rd_c(k, ss3, cg_i64(g, 0)), rlog(k, rd_c(k, ss3, cg_i64(g, 1))), ""));
			loop_end(k, &s3, cg_i64(g, nslot));
		}
	}

	/* each owned row's result */
	Loop f = loop_begin(k, cg_i64(g, nslot));
	LLVMValueRef rf = ROW(f.i);
	LLVMBasicBlockRef j3 = if_begin(k, LLVMBuildICmp(B, LLVMIntSLT, rf, nT, ""));
	if (stats) {
		/* ptrs: out, q, k, dO, O */
		LLVMValueRef ssf = SLOT(st, f.i, 2), at = ST(rf);
		store(k, ptrs[0], at, LLVMBuildFAdd(B, rd_c(k, ssf, cg_i64(g, 0)), rlog(k, rd_c(k, ssf, cg_i64(g, 1))), ""));
		store(k, ptrs[0], LLVMBuildAdd(B, at, cg_i64(g, 1), ""), dot(k, ptrs[3], AT(rf), ptrs[4], AT(rf), Dh));
	} else {
		LLVMValueRef asf = SLOT(acc, f.i, Dh);
		Loop c2 = loop_begin(k, nDh);
		store(k, ptrs[0], LLVMBuildAdd(B, AT(rf), c2.i, ""), rd_c(k, asf, c2.i));
		loop_end(k, &c2, nDh);
	}
	if_end(k, j3);
	loop_end(k, &f, cg_i64(g, nslot));
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
		Loop z = loop_begin(k, cg_i64(g, Dh));
		store(k, out, LLVMBuildAdd(B, mine, z.i, ""), cg_real(g, 0));
		loop_end(k, &z, cg_i64(g, Dh));
	}
	if (d->kind == OP_ATTENTION || d->kind == OP_ATTN_STATS) {
		/* an online softmax: running max m and sum l of exp(s - m) */
		Loop l = loop_from(k, cg_i64(g, 0), 1, to);
		Acc m = acc_begin(k, &l, cg_real(g, -INFINITY)), sum = acc_begin(k, &l, cg_real(g, 0));
		LLVMValueRef s = LLVMBuildFMul(B, dot(k, Q, mine, Kp, AT(l.i), Dh), scale, "");
		LLVMValueRef nm = rmax(k, m.phi, s);
		LLVMValueRef ns = LLVMBuildFAdd(B, LLVMBuildFMul(B, sum.phi, rexp(k, LLVMBuildFSub(B, m.phi, nm, "")), ""),
		                                rexp(k, LLVMBuildFSub(B, s, nm, "")), "");
		acc_next(k, &m, nm);
		acc_next(k, &sum, ns);
		loop_end(k, &l, to);
		LLVMValueRef mx = acc_result(k, &l, cg_real(g, -INFINITY), nm), tot = acc_result(k, &l, cg_real(g, 0), ns);
		if (d->kind == OP_ATTN_STATS) {
			/* ptrs: out, q, k, dO, O */
			LLVMValueRef two = LLVMBuildMul(B, row, cg_i64(g, 2), "");
			store(k, out, two, LLVMBuildFAdd(B, mx, rlog(k, tot), ""));
			store(k, out, LLVMBuildAdd(B, two, cg_i64(g, 1), ""), dot(k, ptrs[3], mine, ptrs[4], mine, Dh));
			return;
		}
		Loop l2 = loop_from(k, cg_i64(g, 0), 1, to);
		LLVMValueRef kr = AT(l2.i);
		LLVMValueRef p = LLVMBuildFDiv(B, rexp(k, LLVMBuildFSub(B, LLVMBuildFMul(B, dot(k, Q, mine, Kp, kr, Dh), scale, ""), mx, "")), tot, "");
		axpy(k, out, mine, p, V, kr, Dh);
		loop_end(k, &l2, to);
		return;
	}
	/* gradients: ptrs out, q, k, v, dO, stats; ds = p (dO_i . v_j - D_i) */
	LLVMValueRef dO = ptrs[4], st = ptrs[5];
	Loop l = loop_from(k, from, 1, to);
	LLVMValueRef other = AT(l.i);
	LLVMValueRef qi = keyrow ? other : mine, kj = keyrow ? mine : other;
	LLVMValueRef irow = keyrow ? LLVMBuildAdd(B, LLVMBuildMul(B, bh, nT, ""), l.i, "") : row;
	LLVMValueRef two = LLVMBuildMul(B, irow, cg_i64(g, 2), "");
	LLVMValueRef lse = load(k, st, two), D = load(k, st, LLVMBuildAdd(B, two, cg_i64(g, 1), ""));
	LLVMValueRef p = rexp(k, LLVMBuildFSub(B, LLVMBuildFMul(B, dot(k, Q, qi, Kp, kj, Dh), scale, ""), lse, ""));
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
	loop_end(k, &l, to);
#undef AT
}

/* mean over the rows (those whose label is not ignored) of lse - the
 * label's logit: the lanes share the rows */
static void body_xent(K *k, const KDesc *d, LLVMValueRef *ptrs)
{
	Cg *g = k->g;
	int64_t C = d->in[0].dim[d->in[0].rank - 1], R = rows(d->in[0]);
	LLVMValueRef nr = cg_i64(g, R), zero = cg_real(g, 0);
	Loop l = lane_loop(k, nr);
	Acc s = acc_begin(k, &l, zero), c = acc_begin(k, &l, zero);
	LLVMValueRef base = LLVMBuildMul(k->b, l.i, cg_i64(g, C), ""), valid;
	LLVMValueRef lab = row_label(k, d, ptrs[2], l.i, &valid);
	LLVMValueRef mx, lse = row_lse(k, ptrs[1], base, C, false, &mx);
	LLVMValueRef pick = load(k, ptrs[1], LLVMBuildAdd(k->b, base, lab, ""));
	LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, LLVMBuildSelect(k->b, valid, LLVMBuildFSub(k->b, lse, pick, ""), zero, ""), "");
	LLVMValueRef nc = LLVMBuildFAdd(k->b, c.phi, LLVMBuildSelect(k->b, valid, cg_real(g, 1), zero, ""), "");
	acc_next(k, &s, ns);
	acc_next(k, &c, nc);
	loop_end(k, &l, nr);
	/* both phis first: all_reduce starts new blocks */
	LLVMValueRef total = acc_result(k, &l, zero, ns), count = acc_result(k, &l, zero, nc);
	total = all_reduce(k, total, false);
	count = d->attr.lab.has ? all_reduce(k, count, false) : cg_real(g, (double)R);
	store_once(k, ptrs[0], cg_i64(g, 0), LLVMBuildFDiv(k->b, total, count, ""));
}

/* how many labels are not the ignored one */
static void body_count(K *k, const KDesc *d, LLVMValueRef *ptrs)
{
	Cg *g = k->g;
	LLVMValueRef n = cg_i64(g, ir_numel(d->in[0])), zero = cg_real(g, 0), valid;
	Loop l = lane_loop(k, n);
	Acc c = acc_begin(k, &l, zero);
	row_label(k, d, ptrs[1], l.i, &valid);
	LLVMValueRef nc = LLVMBuildFAdd(k->b, c.phi, LLVMBuildSelect(k->b, valid, cg_real(g, 1), zero, ""), "");
	acc_next(k, &c, nc);
	loop_end(k, &l, n);
	store_once(k, ptrs[0], cg_i64(g, 0), all_reduce(k, acc_result(k, &l, zero, nc), false));
}

/* ---- data movement: range, pad, concat, 2-D windows, bilinear weights ---- */

static LLVMValueRef load_as(K *k, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef i)
{
	return LLVMBuildLoad2(k->b, et, LLVMBuildGEP2(k->b, et, base, &i, 1, ""), "");
}

/* an element of an i32 or a real tensor at argument word w */
static LLVMValueRef elem_load(K *k, bool i32, LLVMValueRef w, LLVMValueRef i)
{
	return i32 ? load_as(k, k->g->i32, ptr_of(k, w, k->g->i32p), i) : load(k, ptr_of(k, w, k->g->realp), i);
}

static void elem_store(K *k, bool i32, LLVMValueRef w, LLVMValueRef i, LLVMValueRef v)
{
	if (i32)
		LLVMBuildStore(k->b, v, LLVMBuildGEP2(k->b, k->g->i32, ptr_of(k, w, k->g->i32p), &i, 1, ""));
	else
		store(k, ptr_of(k, w, k->g->realp), i, v);
}

/* range, pad, concat: each result element from its place in an operand, or zero */
static void body_move(K *k, const KDesc *d, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	bool i32 = d->out.dt == DT_I32;
	LLVMValueRef zero = i32 ? LLVMConstInt(g->i32, 0, 0) : cg_real(g, 0);
	LLVMValueRef coord[IR_MAXRANK];
	unravel(k, d->out, idx, coord);
	int ax = d->attr.ax.axis;
	LLVMValueRef c = coord[ax], at = cg_i64(g, d->attr.ax.at), v;
	switch ((int)d->kind) {
	case OP_RANGE:
		coord[ax] = LLVMBuildAdd(B, c, at, "");
		v = elem_load(k, i32, args[1], bcast_offset(k, d->in[0], d->in[0], coord));
		break;
	case OP_PAD: {
		/* unsigned: a place before x wraps round to a huge one */
		LLVMValueRef in = LLVMBuildSub(B, c, at, "");
		LLVMValueRef ok = LLVMBuildICmp(B, LLVMIntULT, in, cg_i64(g, d->in[0].dim[ax]), "");
		coord[ax] = LLVMBuildSelect(B, ok, in, cg_i64(g, 0), "");
		v = LLVMBuildSelect(B, ok, elem_load(k, i32, args[1], bcast_offset(k, d->in[0], d->in[0], coord)), zero, "");
		break;
	}
	default: { /* OP_CONCAT */
		LLVMValueRef first = LLVMBuildICmp(B, LLVMIntSLT, c, at, "");
		coord[ax] = LLVMBuildSelect(B, first, c, cg_i64(g, 0), "");
		LLVMValueRef va = elem_load(k, i32, args[1], bcast_offset(k, d->in[0], d->in[0], coord));
		coord[ax] = LLVMBuildSelect(B, first, cg_i64(g, 0), LLVMBuildSub(B, c, at, ""), "");
		LLVMValueRef vb = elem_load(k, i32, args[2], bcast_offset(k, d->in[1], d->in[1], coord));
		v = LLVMBuildSelect(B, first, va, vb, "");
	}
	}
	elem_store(k, i32, args[0], idx, v);
}

/* x < n for an i64 x that may be negative */
static LLVMValueRef within(K *k, LLVMValueRef x, int64_t n)
{
	return LLVMBuildICmp(k->b, LLVMIntULT, x, cg_i64(k->g, n), "");
}

/* unfold: result [N, P, C*kh*kw] at (n, p, q) is x[n, c, h, w] of the
 * window p's element q, zero in the padding. fold: x[n, c, h, w] adds up
 * the result's places that unfold took it to; a gather, so deterministic. */
static void body_window(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	const Window *w = &d->attr.win;
	bool fold = d->kind == OP_FOLD;
	Type img = fold ? d->out : d->in[0];
	int64_t C = img.dim[1], H = img.dim[2], W = img.dim[3], Ho, Wo, K2 = (int64_t)w->kh * w->kw;
	ops_window_out(w, img, &Ho, &Wo);
	LLVMValueRef coord[IR_MAXRANK], zero = cg_real(g, 0), z = cg_i64(g, 0);
	if (!fold) {
		unravel(k, d->out, idx, coord);
		LLVMValueRef n = coord[0], p = coord[1], q = coord[2];
		LLVMValueRef ho = LLVMBuildUDiv(B, p, cg_i64(g, Wo), ""), wo = LLVMBuildURem(B, p, cg_i64(g, Wo), "");
		LLVMValueRef c = LLVMBuildUDiv(B, q, cg_i64(g, K2), ""), r = LLVMBuildURem(B, q, cg_i64(g, K2), "");
		LLVMValueRef ki = LLVMBuildUDiv(B, r, cg_i64(g, w->kw), ""), kj = LLVMBuildURem(B, r, cg_i64(g, w->kw), "");
		LLVMValueRef h = LLVMBuildAdd(B, LLVMBuildSub(B, LLVMBuildMul(B, ho, cg_i64(g, w->sh), ""), cg_i64(g, w->ph), ""),
		                              LLVMBuildMul(B, ki, cg_i64(g, w->dh), ""), "");
		LLVMValueRef x = LLVMBuildAdd(B, LLVMBuildSub(B, LLVMBuildMul(B, wo, cg_i64(g, w->sw), ""), cg_i64(g, w->pw), ""),
		                              LLVMBuildMul(B, kj, cg_i64(g, w->dw), ""), "");
		LLVMValueRef ok = LLVMBuildAnd(B, within(k, h, H), within(k, x, W), "");
		LLVMValueRef off = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, n, cg_i64(g, C), ""), c, ""), cg_i64(g, H), ""), h, ""), cg_i64(g, W), ""), x, "");
		off = LLVMBuildSelect(B, ok, off, z, "");
		store(k, ptrs[0], idx, LLVMBuildSelect(B, ok, load(k, ptrs[1], off), zero, ""));
		return;
	}
	unravel(k, img, idx, coord);
	LLVMValueRef n = coord[0], c = coord[1], h = coord[2], x = coord[3];
	LLVMValueRef nk = cg_i64(g, K2);
	Loop l = loop_begin(k, nk);
	Acc s = acc_begin(k, &l, zero);
	LLVMValueRef ki = LLVMBuildUDiv(B, l.i, cg_i64(g, w->kw), ""), kj = LLVMBuildURem(B, l.i, cg_i64(g, w->kw), "");
	/* the window row ho with ho * sh - ph + ki * dh = h, if there is one */
	LLVMValueRef hh = LLVMBuildSub(B, LLVMBuildAdd(B, h, cg_i64(g, w->ph), ""), LLVMBuildMul(B, ki, cg_i64(g, w->dh), ""), "");
	LLVMValueRef xx = LLVMBuildSub(B, LLVMBuildAdd(B, x, cg_i64(g, w->pw), ""), LLVMBuildMul(B, kj, cg_i64(g, w->dw), ""), "");
	LLVMValueRef ho = LLVMBuildSDiv(B, hh, cg_i64(g, w->sh), ""), wo = LLVMBuildSDiv(B, xx, cg_i64(g, w->sw), "");
	LLVMValueRef ok = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, hh, z, ""), LLVMBuildICmp(B, LLVMIntSGE, xx, z, ""), "");
	ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildSRem(B, hh, cg_i64(g, w->sh), ""), z, ""), "");
	ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildSRem(B, xx, cg_i64(g, w->sw), ""), z, ""), "");
	ok = LLVMBuildAnd(B, ok, LLVMBuildAnd(B, within(k, ho, Ho), within(k, wo, Wo), ""), "");
	LLVMValueRef p = LLVMBuildAdd(B, LLVMBuildMul(B, ho, cg_i64(g, Wo), ""), wo, "");
	LLVMValueRef q = LLVMBuildAdd(B, LLVMBuildMul(B, c, nk, ""), l.i, "");
	LLVMValueRef off = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, n, cg_i64(g, Ho * Wo), ""), p, ""), cg_i64(g, C * K2), ""), q, "");
	off = LLVMBuildSelect(B, ok, off, z, "");
	LLVMValueRef ns = LLVMBuildFAdd(B, s.phi, LLVMBuildSelect(B, ok, load(k, ptrs[1], off), zero, ""), "");
	acc_next(k, &s, ns);
	loop_end(k, &l, nk);
	store(k, ptrs[0], idx, acc_result(k, &l, zero, ns));
}

/* interp [n, m]: row i weighs the two source points around i's centre,
 * (i + 1/2) m / n - 1/2, clamped at 0 (PyTorch's align_corners=False) */
static void body_interp(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	int64_t n = d->out.dim[0], m = d->out.dim[1];
	LLVMValueRef coord[2];
	unravel(k, d->out, idx, coord);
	LLVMValueRef i = LLVMBuildSIToFP(B, coord[0], g->f64, "");
	LLVMValueRef src = LLVMBuildFSub(B, LLVMBuildFMul(B, LLVMBuildFAdd(B, i, LLVMConstReal(g->f64, 0.5), ""),
	                                                  LLVMConstReal(g->f64, (double)m / (double)n), ""), LLVMConstReal(g->f64, 0.5), "");
	src = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, src, LLVMConstReal(g->f64, 0), ""), LLVMConstReal(g->f64, 0), src, "");
	LLVMValueRef i0 = LLVMBuildFPToSI(B, src, g->i64, ""); /* src >= 0: truncation is floor */
	LLVMValueRef i1 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, i0, cg_i64(g, m - 1), ""), LLVMBuildAdd(B, i0, cg_i64(g, 1), ""), i0, "");
	LLVMValueRef l1 = LLVMBuildFSub(B, src, LLVMBuildSIToFP(B, i0, g->f64, ""), "");
	LLVMValueRef l0 = LLVMBuildFSub(B, LLVMConstReal(g->f64, 1), l1, ""), z = LLVMConstReal(g->f64, 0);
	LLVMValueRef v = LLVMBuildFAdd(B, LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, coord[1], i0, ""), l0, z, ""),
	                               LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, coord[1], i1, ""), l1, z, ""), "");
	if (g->real != g->f64)
		v = LLVMBuildFPTrunc(B, v, g->real, "");
	store(k, ptrs[0], idx, v);
}

/* Operand t of an elementwise kernel at the result's coordinates: a vector
 * where its elements run along the result's last axis, else one element
 * broadcast. */
static LLVMValueRef operand(K *k, LLVMValueRef base, Type t, Type out, LLVMValueRef *coord)
{
	LLVMValueRef off = bcast_offset(k, t, out, coord);
	if (k->vec > 1 && t.rank >= 1 && t.dim[t.rank - 1] == out.dim[out.rank - 1])
		return vload(k, base, off);
	return splat(k, load(k, base, off));
}

static LLVMValueRef word_real(K *k, LLVMValueRef w)
{
	LLVMValueRef d = LLVMBuildBitCast(k->b, w, k->g->f64, "");
	return k->g->real == k->g->f64 ? d : LLVMBuildFPTrunc(k->b, d, k->g->real, "");
}

static void body(Cg *g, LLVMValueRef fn, const KDesc *d, LLVMValueRef *args, LLVMValueRef idx, LLVMValueRef lane)
{
	K kk = {g, fn, g->b, d->vec, d->lanes, lane}, *k = &kk;
	LLVMBuilderRef B = g->b;
	LLVMValueRef ptrs[8];
	/* pointer views of the argument words: the result, then each operand */
	ptrs[0] = ptr_of(k, args[0], g->realp);
	for (int j = 0; j < d->nin && j < 7; j++)
		ptrs[j + 1] = ptr_of(k, args[j + 1], d->in[j].dt == DT_I32 ? g->i32p : g->realp);
	LLVMValueRef coord[IR_MAXRANK];
	/* elementwise kernels: work item idx is the vector of elements from e */
	LLVMValueRef e = d->vec > 1 ? LLVMBuildMul(B, idx, cg_i64(g, d->vec), "") : idx;
	switch ((int)d->kind) {
	case K_SGD: {
		LLVMValueRef p = ptr_of(k, args[0], g->realp), gr = ptr_of(k, args[1], g->realp);
		LLVMValueRef v = LLVMBuildFSub(B, load(k, p, idx), LLVMBuildFMul(B, word_real(k, args[2]), load(k, gr, idx), ""), "");
		store(k, p, idx, v);
		return;
	}
	case K_ADAM: {
		LLVMValueRef p = ptr_of(k, args[0], g->realp), gr = ptr_of(k, args[1], g->realp);
		LLVMValueRef m = ptr_of(k, args[2], g->realp), v = ptr_of(k, args[3], g->realp);
		LLVMValueRef lr = word_real(k, args[4]), b1 = word_real(k, args[5]), b2 = word_real(k, args[6]);
		LLVMValueRef eps = word_real(k, args[7]), bc1 = word_real(k, args[8]), bc2 = word_real(k, args[9]);
		LLVMValueRef gv = load(k, gr, idx), one = cg_real(g, 1);
		LLVMValueRef mv = LLVMBuildFAdd(B, LLVMBuildFMul(B, b1, load(k, m, idx), ""), LLVMBuildFMul(B, LLVMBuildFSub(B, one, b1, ""), gv, ""), "");
		LLVMValueRef vv = LLVMBuildFAdd(B, LLVMBuildFMul(B, b2, load(k, v, idx), ""),
		                                LLVMBuildFMul(B, LLVMBuildFSub(B, one, b2, ""), LLVMBuildFMul(B, gv, gv, ""), ""), "");
		store(k, m, idx, mv);
		store(k, v, idx, vv);
		LLVMValueRef den = LLVMBuildFAdd(B, rsqrt(k, LLVMBuildFDiv(B, vv, bc2, "")), eps, "");
		LLVMValueRef step = LLVMBuildFDiv(B, LLVMBuildFMul(B, lr, LLVMBuildFDiv(B, mv, bc1, ""), ""), den, "");
		store(k, p, idx, LLVMBuildFSub(B, load(k, p, idx), step, ""));
		return;
	}
	case OP_FILL:
		vstore(k, ptrs[0], e, kreal(k, d->attr.value));
		return;
	case K_FUSED: {
		/* values pass between steps in registers; only the ones used elsewhere are stored */
		unravel(k, d->out, e, coord);
		LLVMValueRef val[CG_MAXSTEPS], x[3] = {NULL, NULL, NULL};
		for (int s = 0; s < d->nsteps; s++) {
			const KStep *st = &d->step[s];
			for (int j = 0; j < st->nin; j++) {
				if (st->is_const[j])
					x[j] = kreal(k, st->cval[j]);
				else if (st->src[j] < 0)
					x[j] = val[-st->src[j] - 1];
				else
					x[j] = operand(k, ptr_of(k, args[st->src[j]], g->realp), st->in[j], d->out, coord);
			}
			val[s] = ew(k, st->kind, x[0], x[1], x[2]);
			if (st->store >= 0)
				vstore(k, ptr_of(k, args[st->store], g->realp), e, val[s]);
		}
		return;
	}
	case OP_BROADCAST:
		unravel(k, d->out, e, coord);
		vstore(k, ptrs[0], e, operand(k, ptrs[1], d->in[0], d->out, coord));
		return;
	case OP_TRANSPOSE: {
		unravel(k, d->out, idx, coord);
		LLVMValueRef src[IR_MAXRANK];
		for (int i = 0; i < d->out.rank; i++)
			src[d->attr.perm[i]] = coord[i];
		store(k, ptrs[0], idx, load(k, ptrs[1], bcast_offset(k, d->in[0], d->in[0], src)));
		return;
	}
	case OP_ACC:
	case OP_ACC_SLICE: {
		/* operand words: the variable (slice address from the host), the addend */
		LLVMValueRef x = ptr_of(k, args[1], g->realp);
		vstore(k, ptrs[0], e, LLVMBuildFAdd(B, vload(k, ptrs[0], e), vload(k, x, e), ""));
		return;
	}
	case OP_SUM:
	case OP_MEAN:
	case OP_MAX:
	case OP_MIN:
	case OP_SUM_TO:
		body_reduce(k, d, ptrs[0], ptrs[1], idx);
		return;
	case OP_MATMUL:
		body_matmul(k, d, ptrs, idx);
		return;
	case OP_SOFTMAX:
	case OP_LOG_SOFTMAX:
	case OP_SOFTMAX_GRAD:
	case OP_LOG_SOFTMAX_GRAD:
	case OP_XENT_GRAD:
		body_rows(k, d, ptrs, idx);
		return;
	case OP_XENT:
		body_xent(k, d, ptrs);
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
	case OP_RANGE:
	case OP_PAD:
	case OP_CONCAT:
		body_move(k, d, args, idx);
		return;
	case OP_UNFOLD:
	case OP_FOLD:
		body_window(k, d, ptrs, idx);
		return;
	case OP_INTERP:
		body_interp(k, d, ptrs, idx);
		return;
	case OP_LITERAL: {
		/* the elements, as f64, in a constant array of the module (global memory on the GPU) */
		unsigned n = (unsigned)ir_numel(d->out);
		LLVMValueRef *c = ar_alloc(sizeof *c * n);
		for (unsigned i = 0; i < n; i++)
			c[i] = LLVMConstReal(g->f64, d->attr.lit.v[i]);
		LLVMTypeRef at = LLVMArrayType(g->f64, n);
		LLVMValueRef gv = LLVMAddGlobalInAddressSpace(g->mod, at, "dp_literal", g->gpu ? 1 : 0);
		LLVMSetInitializer(gv, LLVMConstArray(g->f64, c, n));
		LLVMSetGlobalConstant(gv, 1);
		LLVMSetLinkage(gv, LLVMInternalLinkage);
		LLVMValueRef at_idx[2] = {cg_i64(g, 0), idx};
		LLVMValueRef v = LLVMBuildLoad2(B, g->f64, LLVMBuildGEP2(B, at, gv, at_idx, 2, ""), "");
		store(k, ptrs[0], idx, g->real == g->f64 ? v : LLVMBuildFPTrunc(B, v, g->real, ""));
		return;
	}
	case OP_TRAINING: {
		/* word 1: 1 while training, 0 in evaluation (rt_training) */
		LLVMValueRef on = LLVMBuildICmp(B, LLVMIntNE, args[1], cg_i64(g, 0), "");
		store(k, ptrs[0], idx, LLVMBuildSelect(B, on, cg_real(g, 1), cg_real(g, 0), ""));
		return;
	}
	case OP_ARANGE:
		elem_store(k, true, args[0], idx, LLVMBuildTrunc(B, idx, g->i32, ""));
		return;
	case OP_CAST: {
		bool from_int = d->in[0].dt == DT_I32, to_int = d->out.dt == DT_I32;
		if (!from_int && !to_int) {
			/* between reals: load in the operand's type, store in the result's */
			cg_set_real(g, d->in[0].dt);
			LLVMValueRef x = load(k, ptr_of(k, args[1], g->realp), idx);
			LLVMTypeRef from = g->real;
			cg_set_real(g, d->out.dt);
			if (from != g->real)
				x = from == g->f64 ? LLVMBuildFPTrunc(B, x, g->real, "") : LLVMBuildFPExt(B, x, g->real, "");
			store(k, ptr_of(k, args[0], g->realp), idx, x);
			return;
		}
		LLVMValueRef x = elem_load(k, from_int, args[1], idx);
		if (from_int != to_int)
			x = to_int ? LLVMBuildFPToSI(B, x, g->i32, "") : LLVMBuildSIToFP(B, x, g->real, "");
		elem_store(k, to_int, args[0], idx, x);
		return;
	}
	case OP_ARGMAX: {
		/* out element idx: the input's elements from base, stride apart along the axis */
		Type t = d->in[0];
		int64_t n = t.dim[d->attr.ax.axis], stride = 1;
		for (int i = d->attr.ax.axis + 1; i < t.rank; i++)
			stride *= t.dim[i];
		LLVMValueRef base = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildUDiv(B, idx, cg_i64(g, stride), ""), cg_i64(g, n * stride), ""),
		                                 LLVMBuildURem(B, idx, cg_i64(g, stride), ""), "");
		LLVMValueRef first = load(k, ptrs[1], base), nn = cg_i64(g, n);
		Loop l = loop_from(k, cg_i64(g, 1), 1, nn);
		Acc best = acc_begin(k, &l, first), at = acc_begin(k, &l, cg_i64(g, 0));
		LLVMValueRef v = load(k, ptrs[1], LLVMBuildAdd(B, base, LLVMBuildMul(B, l.i, cg_i64(g, stride), ""), ""));
		LLVMValueRef more = LLVMBuildFCmp(B, LLVMRealOGT, v, best.phi, "");
		LLVMValueRef nb = LLVMBuildSelect(B, more, v, best.phi, ""), na = LLVMBuildSelect(B, more, l.i, at.phi, "");
		acc_next(k, &best, nb);
		acc_next(k, &at, na);
		loop_end(k, &l, nn);
		LLVMValueRef r = acc_result(k, &l, cg_i64(g, 0), na);
		elem_store(k, true, args[0], idx, LLVMBuildTrunc(B, r, g->i32, ""));
		return;
	}
	case OP_BITS: {
		/* word idx of its row: bit b is element 32 idx + b > 0, up to the row's end */
		int64_t n = d->in[0].dim[d->in[0].rank - 1], nw = (n + 31) / 32;
		LLVMValueRef row = LLVMBuildUDiv(B, idx, cg_i64(g, nw), ""), w = LLVMBuildURem(B, idx, cg_i64(g, nw), "");
		LLVMValueRef first = LLVMBuildMul(B, w, cg_i64(g, 32), "");
		LLVMValueRef left = LLVMBuildSub(B, cg_i64(g, n), first, "");
		LLVMValueRef cnt = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, left, cg_i64(g, 32), ""), left, cg_i64(g, 32), "");
		LLVMValueRef base = LLVMBuildAdd(B, LLVMBuildMul(B, row, cg_i64(g, n), ""), first, "");
		LLVMValueRef none = LLVMConstInt(g->i32, 0, 0);
		Loop l = loop_begin(k, cnt);
		Acc word = acc_begin(k, &l, none);
		LLVMValueRef x = load(k, ptr_of(k, args[1], g->realp), LLVMBuildAdd(B, base, l.i, ""));
		LLVMValueRef bit = LLVMBuildZExt(B, LLVMBuildFCmp(B, LLVMRealOGT, x, cg_real(g, 0), ""), g->i32, "");
		LLVMValueRef next = LLVMBuildOr(B, word.phi, LLVMBuildShl(B, bit, LLVMBuildTrunc(B, l.i, g->i32, ""), ""), "");
		acc_next(k, &word, next);
		loop_end(k, &l, cnt);
		elem_store(k, true, args[0], idx, acc_result(k, &l, none, next));
		return;
	}
	case OP_UNBITS: {
		int64_t n = d->out.dim[d->out.rank - 1], nw = (n + 31) / 32;
		LLVMValueRef row = LLVMBuildUDiv(B, idx, cg_i64(g, n), ""), e = LLVMBuildURem(B, idx, cg_i64(g, n), "");
		LLVMValueRef at = LLVMBuildAdd(B, LLVMBuildMul(B, row, cg_i64(g, nw), ""), LLVMBuildUDiv(B, e, cg_i64(g, 32), ""), "");
		LLVMValueRef word = elem_load(k, true, args[1], at);
		LLVMValueRef sh = LLVMBuildTrunc(B, LLVMBuildURem(B, e, cg_i64(g, 32), ""), g->i32, "");
		LLVMValueRef bit = LLVMBuildAnd(B, LLVMBuildLShr(B, word, sh, ""), LLVMConstInt(g->i32, 1, 0), "");
		store(k, ptr_of(k, args[0], g->realp), idx, LLVMBuildUIToFP(B, bit, g->real, ""));
		return;
	}
	case OP_DROPOUT: {
		/* element idx is kept when the top 53 bits of mix(key ^ idx) reach p 2^53;
		 * in evaluation (word 3 is 0) every element passes unscaled */
		LLVMValueRef draw = LLVMBuildLShr(B, cg_mix(g, B, LLVMBuildXor(B, args[2], idx, "")), cg_i64(g, 11), "");
		LLVMValueRef keep = LLVMBuildICmp(B, LLVMIntUGE, draw, LLVMConstInt(g->i64, dp_drop_threshold(d->attr.drop.p), 0), "");
		LLVMValueRef on = LLVMBuildICmp(B, LLVMIntNE, args[3], cg_i64(g, 0), "");
		LLVMValueRef x = load(k, ptrs[1], idx), scaled = LLVMBuildFMul(B, x, cg_real(g, 1 / (1 - d->attr.drop.p)), "");
		LLVMValueRef train = LLVMBuildSelect(B, keep, scaled, cg_real(g, 0), "");
		store(k, ptrs[0], idx, LLVMBuildSelect(B, on, train, x, ""));
		return;
	}
	case OP_XENT_COUNT:
		body_count(k, d, ptrs);
		return;
	case OP_ATTENTION:
	case OP_ATTN_STATS:
	case OP_ATTN_DQ:
	case OP_ATTN_DK:
	case OP_ATTN_DV: {
		int64_t tq, tk;
		if (attn_tiles(g, d, &tq, &tk))
			body_attn_tiled(k, d, ptrs, idx, tq, tk);
		else
			body_attn(k, d, ptrs, idx);
		return;
	}
	case OP_MSE: {
		LLVMValueRef n = cg_i64(g, ir_numel(d->in[0]));
		Loop l = lane_loop(k, n);
		Acc s = acc_begin(k, &l, cg_real(g, 0));
		LLVMValueRef diff = LLVMBuildFSub(B, load(k, ptrs[1], l.i), load(k, ptrs[2], l.i), "");
		LLVMValueRef ns = LLVMBuildFAdd(B, s.phi, LLVMBuildFMul(B, diff, diff, ""), "");
		acc_next(k, &s, ns);
		loop_end(k, &l, n);
		LLVMValueRef total = all_reduce(k, acc_result(k, &l, cg_real(g, 0), ns), false);
		store_once(k, ptrs[0], cg_i64(g, 0), LLVMBuildFDiv(B, total, cg_real(g, (double)ir_numel(d->in[0])), ""));
		return;
	}
	case OP_MSE_GRAD: {
		LLVMValueRef scale = LLVMBuildFMul(B, load(k, ptrs[3], cg_i64(g, 0)), cg_real(g, 2.0 / (double)ir_numel(d->out)), "");
		LLVMValueRef diff = LLVMBuildFSub(B, vload(k, ptrs[1], e), vload(k, ptrs[2], e), "");
		vstore(k, ptrs[0], e, LLVMBuildFMul(B, splat(k, scale), diff, ""));
		return;
	}
	default:
		break;
	}
	die("no kernel lowering for %s", ir_ops[d->kind].name);
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

/* x86: void kN(const uint64_t *args, int64_t begin, int64_t end) */
void cg_cpu_kernels(Cg *g)
{
	LLVMTypeRef params[3] = {g->i64p, g->i64, g->i64};
	LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, 3, 0);
	LLVMTypeRef fpt = LLVMPointerType(ft, 0);
	int n = g->kernels.len;
	LLVMValueRef *fns = ar_alloc(sizeof(LLVMValueRef) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		KDesc *d = &g->kernels.data[i];
		const char *name = ar_printf("dp_k%d_%s", i, cg_kernel_label(d));
		LLVMValueRef fn = LLVMAddFunction(g->mod, name, ft);
		LLVMSetLinkage(fn, LLVMInternalLinkage);
		fns[i] = fn;
		LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
		LLVMPositionBuilderAtEnd(g->b, entry);
		LLVMValueRef args[16];
		for (int j = 0; j < d->nargs; j++) {
			LLVMValueRef at = cg_i64(g, j);
			args[j] = LLVMBuildLoad2(g->b, g->i64, LLVMBuildGEP2(g->b, g->i64, LLVMGetParam(fn, 0), &at, 1, ""), "");
		}
		K k = {.g = g, .fn = fn, .b = g->b, .vec = 1, .lanes = 1};
		LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
		LLVMValueRef count = LLVMBuildSub(g->b, end, begin, "");
		Loop l = loop_begin(&k, count);
		cg_kernel_body(g, fn, d, args, LLVMBuildAdd(g->b, begin, l.i, ""), cg_i64(g, 0));
		loop_end(&k, &l, count);
		LLVMBuildRetVoid(g->b);
	}
	LLVMTypeRef at = LLVMArrayType(fpt, (unsigned)n);
	LLVMValueRef table = LLVMAddGlobal(g->mod, at, "dp_cpu_kernels");
	LLVMSetInitializer(table, LLVMConstArray(fpt, fns, (unsigned)n));
	LLVMSetGlobalConstant(table, 1);
	LLVMValueRef count = LLVMAddGlobal(g->mod, g->i32, "dp_cpu_nkernels");
	LLVMSetInitializer(count, LLVMConstInt(g->i32, (unsigned long long)n, 0));
	LLVMSetGlobalConstant(count, 1);
}
