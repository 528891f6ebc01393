/* cg: the host schedule (dp_step, dp_forward), the model description, and
 * emission of the module as LLVM text or an object file. */
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassManagerBuilder.h>

#include "../../runtime/dprt.h"
#include "../checkpoint_pass/ckpt.h"
#include "cgint.h"

typedef Vec(int) IntVec;

typedef struct {
	Cg *g;
	LLVMValueRef fn, ctx, base, argbuf;
	LLVMValueRef *index;       /* per value: host i64 of index values */
	IntVec *scoped;            /* the loop indices in scope: index values that are not constants */
	int *uses;                 /* per value: how many operands name it */
	LLVMTypeRef t_launch, t_gemm, t_copy, t_zero, t_count, t_base, t_revolve, t_key, t_on;
	LLVMValueRef f_launch, f_gemm, f_copy, f_zero, f_count, f_base, f_revolve, f_key, f_on;
	LLVMTypeRef t_fetch, t_wait, t_writeback, t_update, t_reset, t_snap_copy, t_phase;
	LLVMValueRef f_fetch, f_wait, f_writeback, f_update, f_reset, f_snap_copy, f_phase;
	bool step;                 /* in dp_step (and its parts), which the adjoint follows */
	int norow;                 /* a forward loop's row index outside its tail: its stores do not run */
	/* inside a fused loop's kernel (cg_loop_body): each op's kernel and copy
	 * inline, over the block's threads (tid, on the GPU) or in one loop */
	bool device;
	LLVMValueRef tid;
} Host;

static LLVMValueRef declare(Cg *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n, LLVMTypeRef *ft)
{
	*ft = LLVMFunctionType(ret, params, (unsigned)n, 0);
	LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
	if (f)
		return f;
	f = LLVMAddFunction(g->mod, name, *ft);
	/* every pointer the runtime takes is non-null: said here, InstCombine
	 * need not ask of each call (a walk over the pointer's uses each time) */
	unsigned nonnull = LLVMGetEnumAttributeKindForName("nonnull", 7);
	for (int i = 0; i < n; i++)
		if (LLVMGetTypeKind(params[i]) == LLVMPointerTypeKind)
			LLVMAddAttributeAtIndex(f, (unsigned)i + 1, LLVMCreateEnumAttribute(g->ctx, nonnull, 0));
	return f;
}

/* Device address of a value: arena base + offset, through views. */
static LLVMValueRef addr(Host *h, int v)
{
	Program *p = h->g->p;
	Value *x = &p->values.data[v];
	if (x->res == VR_ARENA)
		return LLVMBuildAdd(h->g->b, h->base, cg_i64(h->g, x->offset), "");
	if (x->res != VR_ALIAS)
		die("value %s has no device storage", ir_value_name(p, v));
	LLVMValueRef a = addr(h, x->alias_of);
	int index = x->alias_index >= 0 ? x->alias_index : x->def && x->def->kind == OP_SLICE ? x->def->in[1] : -1;
	if (index >= 0) {
		LLVMValueRef i = h->index[index];
		if (!i)
			die("index %s has no host value", ir_value_name(p, index));
		Value *of = &p->values.data[x->alias_of];
		if (of->kind == VK_VAR && of->vclass == VC_SLOT)
			i = LLVMBuildURem(h->g->b, i, cg_i64(h->g, of->type.dim[0]), "");
		a = LLVMBuildAdd(h->g->b, a, LLVMBuildMul(h->g->b, i, cg_i64(h->g, ir_bytes(p, x->type)), ""), "");
	}
	return a;
}

static void call(Host *h, LLVMTypeRef t, LLVMValueRef f, LLVMValueRef *args, int n)
{
	if (h->device)
		die("a runtime call inside a fused loop");
	LLVMBuildCall2(h->g->b, t, f, args, (unsigned)n, "");
}

static void dev_kernel(Host *h, KDesc *d, LLVMValueRef *words);
static void dev_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes);

static void launch(Host *h, KDesc *d, LLVMValueRef *words, int nwords)
{
	Cg *g = h->g;
	d->nargs = nwords;
	if (h->device) {
		dev_kernel(h, d, words);
		return;
	}
	int id = cg_kernel_id(g, d);
	int64_t n = cg_kernel_size(g, d) * d->lanes;
	for (int i = 0; i < nwords; i++) {
		LLVMValueRef at = cg_i64(g, i);
		LLVMBuildStore(g->b, words[i], LLVMBuildGEP2(g->b, g->i64, h->argbuf, &at, 1, ""));
	}
	LLVMValueRef args[5] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)id, 0), cg_i64(g, n),
	                        LLVMConstInt(g->i32, (unsigned long long)nwords, 0), h->argbuf};
	call(h, h->t_launch, h->f_launch, args, 5);
}

/* the plan computed `from` in the storage of `to`, or of its slice [index]
 * (stream_pass coalescing), so copying it there is nothing to do */
static bool coalesced(Program *p, int from, int to, int index)
{
	Value *v = &p->values.data[from];
	return v->res == VR_ALIAS && v->alias_of == to && v->alias_index == index && (!v->def || v->def->kind != OP_SLICE);
}

static void copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes)
{
	if (h->device) {
		dev_copy(h, dst, src, bytes);
		return;
	}
	LLVMValueRef args[4] = {h->ctx, dst, src, cg_i64(h->g, bytes)};
	call(h, h->t_copy, h->f_copy, args, 4);
}

/* An op that becomes one kernel over the arena; a reduction given `into`
 * adds its result there instead of storing it (an absorbed acc). */
static void lower_kernel(Host *h, Op *op, LLVMValueRef into)
{
	Program *p = h->g->p;
	KDesc d;
	memset(&d, 0, sizeof d);
	d.kind = op->kind;
	d.to = op->to;
	d.attr = op->attr;
	LLVMValueRef words[8];
	int nw = 0;
	bool write = ir_ops[op->kind].flags & OPF_WRITE;
	if (write) {
		/* acc v, x / acc_slice v[i], x: the word is the destination address */
		int x = op->in[op->nin - 1];
		d.nin = 1;
		d.in[0] = ir_vtype(p, x);
		d.out = d.in[0];
		LLVMValueRef dst = addr(h, op->in[0]);
		if (op->kind == OP_ACC_SLICE)
			dst = LLVMBuildAdd(h->g->b, dst, LLVMBuildMul(h->g->b, h->index[op->in[1]], cg_i64(h->g, ir_bytes(p, d.in[0])), ""), "");
		words[nw++] = dst;
		words[nw++] = addr(h, x);
	} else if (op->kind == OP_DROPOUT) {
		/* the result, x, the key of this op's draws in this iteration (compiler/ops/rng.h),
		 * and 1 while training (0 in evaluation: keep everything) */
		d.nin = 1;
		d.in[0] = ir_vtype(p, op->in[0]);
		d.out = d.in[0];
		words[nw++] = addr(h, op->out);
		words[nw++] = addr(h, op->in[0]);
		LLVMBuilderRef b = h->g->b;
		LLVMValueRef key = LLVMBuildCall2(b, h->t_key, h->f_key, &h->ctx, 1, "");
		key = cg_mix(h->g, b, LLVMBuildXor(b, key, cg_i64(h->g, op->attr.drop.site), ""));
		for (int j = 1; j < op->nin; j++)
			key = cg_mix(h->g, b, LLVMBuildXor(b, key, h->index[op->in[j]], ""));
		words[nw++] = key;
		words[nw++] = LLVMBuildCall2(b, h->t_on, h->f_on, &h->ctx, 1, "");
	} else if (op->kind == OP_TRAINING) {
		d.out = ir_vtype(p, op->out);
		words[nw++] = addr(h, op->out);
		words[nw++] = LLVMBuildCall2(h->g->b, h->t_on, h->f_on, &h->ctx, 1, "");
	} else {
		d.nin = op->nin;
		d.out = ir_vtype(p, op->out);
		d.accumulate = into != NULL;
		words[nw++] = into ? into : addr(h, op->out);
		/* constants are operands of elementwise ops only, and those are fused kernels */
		for (int j = 0; j < op->nin; j++) {
			d.in[j] = ir_vtype(p, op->in[j]);
			words[nw++] = addr(h, op->in[j]);
		}
	}
	launch(h, &d, words, nw);
}

/* C = A @ B into dst; beta 1 accumulates into what dst holds */
static void gemm(Host *h, Op *op, LLVMValueRef dst, double beta)
{
	Program *p = h->g->p;
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]), c = ir_vtype(p, op->out);
	int64_t m = c.dim[c.rank - 2], n = c.dim[c.rank - 1];
	int64_t k = op->attr.mm.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
	int64_t batch = ir_numel(c) / (m * n);
	int64_t sa = a.dim[a.rank - 2] * a.dim[a.rank - 1], sb = b.rank == 2 ? 0 : b.dim[b.rank - 2] * b.dim[b.rank - 1];
	if (b.rank == 2 && batch > 1 && !op->attr.mm.ta) {
		/* a stack of row blocks times one matrix is one tall GEMM */
		m *= batch;
		batch = 1;
	}
	Cg *g = h->g;
	LLVMValueRef args[18] = {
		h->ctx, LLVMConstInt(g->i32, (unsigned long long)ir_dt_bytes(c.dt), 0), LLVMConstInt(g->i32, (unsigned long long)op->attr.mm.ta, 0), LLVMConstInt(g->i32, (unsigned long long)op->attr.mm.tb, 0),
		cg_i64(g, m), cg_i64(g, n), cg_i64(g, k),
		addr(h, op->in[0]), cg_i64(g, a.dim[a.rank - 1]), cg_i64(g, sa),
		addr(h, op->in[1]), cg_i64(g, b.dim[b.rank - 1]), cg_i64(g, sb),
		dst, cg_i64(g, n), cg_i64(g, m * n),
		cg_i64(g, batch), LLVMConstReal(g->f64, beta),
	};
	call(h, h->t_gemm, h->f_gemm, args, 18);
}

/* sum over leading axes: ones[1, M] @ x[M, N], one GEMM instead of a long serial sum per output */
static bool lower_leading_sum(Host *h, Op *op, LLVMValueRef dst, double beta)
{
	int64_t m, n;
	if (!ir_leading_sum(h->g->p, op, &m, &n))
		return false;
	Cg *g = h->g;
	DType dt = ir_vtype(g->p, op->in[0]).dt;
	LLVMValueRef ones = LLVMBuildAdd(g->b, h->base, cg_i64(g, g->p->ones_offset[dt]), "");
	LLVMValueRef args[18] = {
		h->ctx, LLVMConstInt(g->i32, (unsigned long long)ir_dt_bytes(dt), 0), LLVMConstInt(g->i32, 0, 0), LLVMConstInt(g->i32, 0, 0), cg_i64(g, 1), cg_i64(g, n), cg_i64(g, m),
		ones, cg_i64(g, m), cg_i64(g, 0), addr(h, op->in[0]), cg_i64(g, n), cg_i64(g, 0),
		dst, cg_i64(g, n), cg_i64(g, 0), cg_i64(g, 1), LLVMConstReal(g->f64, beta),
	};
	call(h, h->t_gemm, h->f_gemm, args, 18);
	return true;
}

static void extent(Program *p, int v, int64_t *lo, int64_t *hi);

/* The acc / acc_slice later in b that is the only use of the GEMM op b[i]
 * makes: when nothing in between touches its variable, the GEMM adds into
 * the variable itself (beta = 1), saving the product's round trip through
 * memory and a kernel. Returns the acc's position, or -1. */
static int absorbed_acc(Host *h, Block *b, int i, int to)
{
	Program *p = h->g->p;
	Op *op = b->ops[i];
	if (h->uses[op->out] != 1)
		return -1;
	int j = i + 1;
	while (j < to && !((b->ops[j]->kind == OP_ACC || b->ops[j]->kind == OP_ACC_SLICE) && b->ops[j]->in[b->ops[j]->nin - 1] == op->out))
		j++;
	if (j == to || (b->ops[j]->kind == OP_ACC_SLICE && !h->index[b->ops[j]->in[1]]))
		return -1;
	int64_t lo, hi, a, z;
	extent(p, b->ops[j]->in[0], &lo, &hi);
	for (int k = i + 1; k < j; k++) {
		Op *x = b->ops[k];
		if (x->kind == OP_LOOP || x->kind == OP_REVOLVE)
			return -1;
		for (int q = 0; q < x->nin; q++) {
			Value *v = &p->values.data[x->in[q]];
			if (v->res != VR_ARENA && v->res != VR_ALIAS)
				continue;
			extent(p, x->in[q], &a, &z);
			if (a < hi && lo < z)
				return -1;
		}
	}
	return j;
}

/* where an acc / acc_slice adds to */
static LLVMValueRef acc_target(Host *h, Op *acc)
{
	Program *p = h->g->p;
	LLVMValueRef dst = addr(h, acc->in[0]);
	if (acc->kind == OP_ACC_SLICE)
		dst = LLVMBuildAdd(h->g->b, dst, LLVMBuildMul(h->g->b, h->index[acc->in[1]], cg_i64(h->g, ir_bytes(p, ir_vtype(p, acc->in[2]))), ""), "");
	return dst;
}

static void lower_block(Host *h, Block *b, int from, int to);

/* the tape of v's carried value c, whose rows hold the state */
static int carried_tape(Op *v, int c)
{
	for (int i = 0; i < v->body3.len; i++) {
		Op *st = v->body3.ops[i];
		if (st->kind == OP_STORE_SLICE && st->in[1] == v->irow && st->in[2] == v->carg[c])
			return st->in[0];
	}
	die("revolve without a tape of its carried value %d", c);
}

/* Where snapshot `slot` (an i64) of v's carried value c lives: its row of
 * the snapshots, or with pooled rows beyond those, row ktape - (slot -
 * nsnap + 1) of the value's tape. */
static LLVMValueRef slot_addr(Host *h, Op *v, int c, LLVMValueRef slot)
{
	Cg *g = h->g;
	int64_t bytes = ir_bytes(g->p, ir_vtype(g->p, v->carg[c]));
	LLVMValueRef snap = LLVMBuildAdd(g->b, addr(h, v->snap[c]), LLVMBuildMul(g->b, slot, cg_i64(g, bytes), ""), "");
	if (!v->pool)
		return snap;
	LLVMValueRef row = LLVMBuildSub(g->b, cg_i64(g, v->ktape + v->nsnap - 1), slot, "");
	LLVMValueRef tape = LLVMBuildAdd(g->b, addr(h, carried_tape(v, c)), LLVMBuildMul(g->b, row, cg_i64(g, bytes), ""), "");
	LLVMValueRef in_snap = LLVMBuildICmp(g->b, LLVMIntSLT, slot, cg_i64(g, v->nsnap), "");
	return LLVMBuildSelect(g->b, in_snap, snap, tape, "");
}

/* The sweep schedule's saves, at the top of iteration t of the forward loop
 * in dp_step: the state at each segment's start into its slot. The starts
 * are a constant table ending in INT64_MAX; *next is the next one. */
static void sweep_saves(Host *h, Op *op, LLVMValueRef t, LLVMValueRef next)
{
	Cg *g = h->g;
	Op *v = op->sweep;
	int64_t *len = ar_alloc(sizeof(int64_t) * (size_t)(v->nsnap + v->ktape + 2)), k, tail;
	int64_t *first = ar_alloc(sizeof(int64_t) * (size_t)(v->nsnap + v->ktape + 2));
	if (v->pool) {
		k = ckpt_pool_chain(v->pool, first, len, &tail);
	} else {
		k = ckpt_sweep_segments(v->trip - ckpt_revolve_tail(v), v->nsnap, ckpt_revolve_k(v), len);
		for (int64_t i = 0, a = 0; i < k; a += len[i], i++)
			first[i] = a;
	}
	LLVMValueRef *starts = ar_alloc(sizeof(LLVMValueRef) * (size_t)(k + 1));
	for (int64_t i = 0; i <= k; i++)
		starts[i] = cg_i64(g, i < k ? first[i] : INT64_MAX);
	LLVMTypeRef at = LLVMArrayType(g->i64, (unsigned)(k + 1));
	LLVMValueRef table = LLVMAddGlobal(g->mod, at, "dp_sweep_starts");
	LLVMSetInitializer(table, LLVMConstArray(g->i64, starts, (unsigned)(k + 1)));
	LLVMSetGlobalConstant(table, 1);
	LLVMSetLinkage(table, LLVMInternalLinkage);
	LLVMValueRef i = LLVMBuildLoad2(g->b, g->i64, next, "");
	LLVMValueRef ix[2] = {cg_i64(g, 0), i};
	LLVMValueRef start = LLVMBuildLoad2(g->b, g->i64, LLVMBuildGEP2(g->b, at, table, ix, 2, ""), "");
	LLVMBasicBlockRef save = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "sweep_save");
	LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "sweep_go");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, start, ""), save, go);
	LLVMPositionBuilderAtEnd(g->b, save);
	for (int c = 0; c < op->ncarry; c++)
		copy(h, slot_addr(h, v, c, i), addr(h, op->carg[c]), ir_bytes(g->p, ir_vtype(g->p, op->carg[c])));
	LLVMBuildStore(g->b, LLVMBuildAdd(g->b, i, cg_i64(g, 1), ""), next);
	LLVMBuildBr(g->b, go);
	LLVMPositionBuilderAtEnd(g->b, go);
}

/* the next state into the carried values, where the plan did not compute it there */
static void copy_yields(Host *h, Op *op, const int *yields)
{
	Program *p = h->g->p;
	for (int k = 0; k < op->ncarry; k++) {
		Value *y = &p->values.data[yields[k]], *x = &p->values.data[op->carg[k]];
		if (coalesced(p, yields[k], op->carg[k], -1) || (y->res == VR_ARENA && x->res == VR_ARENA && y->offset == x->offset))
			continue;
		copy(h, addr(h, op->carg[k]), addr(h, yields[k]), ir_bytes(p, y->type));
	}
}

/* Iterations [from, to) of op; with save_next the sweep's saves, with rows
 * the stores into the revolve's rows at row t - from. */
static void lower_iters(Host *h, Op *op, int64_t from, int64_t to, LLVMValueRef save_next, bool rows)
{
	Cg *g = h->g;
	if (from >= to)
		return;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "iter");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "after");
	LLVMBuildBr(g->b, body);
	LLVMPositionBuilderAtEnd(g->b, body);
	LLVMValueRef t = LLVMBuildPhi(g->b, g->i64, "t");
	LLVMValueRef first = cg_i64(g, from);
	LLVMAddIncoming(t, &first, &pre, 1);
	h->index[op->ivar] = op->reverse ? LLVMBuildSub(g->b, cg_i64(g, op->lo + op->trip - 1), t, "")
	                                 : LLVMBuildAdd(g->b, cg_i64(g, op->lo), t, "");
	vec_push(h->scoped, op->ivar);
	int norow = h->norow;
	bool taped = rows && ir_loop_tail(op);
	if (taped) {
		h->index[op->irow] = LLVMBuildSub(g->b, t, first, "");
		vec_push(h->scoped, op->irow);
	} else if (ir_loop_tail(op)) {
		h->norow = op->irow;
	}
	if (save_next)
		sweep_saves(h, op, t, save_next);
	lower_block(h, &op->body, 0, op->body.len);
	copy_yields(h, op, op->cyield);
	if (op->counter >= 0 && !h->device) {
		LLVMValueRef args[3] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->counter, 0), cg_i64(g, 1)};
		call(h, h->t_count, h->f_count, args, 3);
	}
	LLVMValueRef next = LLVMBuildAdd(g->b, t, cg_i64(g, 1), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMAddIncoming(t, &next, &latch, 1);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, cg_i64(g, to), ""), body, exit);
	LLVMPositionBuilderAtEnd(g->b, exit);
	/* scoped to the body: a later part (split_block) must not take them */
	h->index[op->ivar] = NULL;
	h->scoped->len--;
	if (taped) {
		h->index[op->irow] = NULL;
		h->scoped->len--;
	}
	h->norow = norow;
}

/* A loop; in dp_step a forward loop of the sweep schedule saves its
 * segments' starts, and with rows tapes its last steps into them. */
static void lower_loop(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	for (int k = 0; k < op->ncarry; k++)
		copy(h, addr(h, op->carg[k]), addr(h, op->in[k]), ir_bytes(p, ir_vtype(p, op->carg[k])));
	bool sweep = op->sweep && h->step;
	int64_t tail = sweep ? ir_loop_tail(op) : 0;
	LLVMValueRef save_next = NULL;
	if (sweep && tail < op->trip) {
		save_next = LLVMBuildAlloca(g->b, g->i64, "sweep_next");
		LLVMBuildStore(g->b, cg_i64(g, 0), save_next);
	}
	lower_iters(h, op, 0, op->trip - tail, save_next, false);
	lower_iters(h, op, op->trip - tail, op->trip, NULL, true);
}

static void begin(Host *h, LLVMValueRef fn);

static LLVMValueRef sub_function(Host *outer, Host *h, const char *name, LLVMTypeRef *params, int n)
{
	Cg *g = outer->g;
	LLVMValueRef fn = LLVMAddFunction(g->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, (unsigned)n, 0));
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	*h = *outer;
	begin(h, fn);
	return fn;
}

static const char *unfusable(Host *h, Op *op);
static KDesc loop_desc(Host *h, Op *op);
static void note_fusion(Host *h, Op *op, const char *why, int kernel);

/* A binomial schedule: the functions the runtime calls as the schedule
 * says (advance from..to, the taped step i, the copy between the state and
 * a device row of the snapshots, and with host slots the copy between the
 * staging row and a host slot) and the call that starts it. */
static void revolve_functions(Host *h, Op *op, int id, LLVMValueRef *fns)
{
	Cg *g = h->g;
	Program *p = g->p;
	Host a, t, s;

	LLVMTypeRef pa[] = {g->i8p, g->i64, g->i64};
	LLVMValueRef adv = sub_function(h, &a, ar_printf("dp_advance%d", id), pa, 3);
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), body = LLVMAppendBasicBlockInContext(g->ctx, adv, "step");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, adv, "done");
	LLVMBuildBr(g->b, body);
	LLVMPositionBuilderAtEnd(g->b, body);
	LLVMValueRef i = LLVMBuildPhi(g->b, g->i64, "i"), from = LLVMGetParam(adv, 1);
	LLVMAddIncoming(i, &from, &pre, 1);
	a.index[op->ivar] = i;
	vec_push(a.scoped, op->ivar);
	lower_block(&a, &op->body, 0, op->body.len);
	copy_yields(&a, op, op->cyield);
	LLVMValueRef next = LLVMBuildAdd(g->b, i, cg_i64(g, 1), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMAddIncoming(i, &next, &latch, 1);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, LLVMGetParam(adv, 2), ""), body, done);
	LLVMPositionBuilderAtEnd(g->b, done);
	LLVMBuildRetVoid(g->b);

	LLVMTypeRef pt[] = {g->i8p, g->i64, g->i64};
	LLVMValueRef taped = sub_function(h, &t, ar_printf("dp_taped%d", id), pt, 3);
	t.index[op->ivar2] = LLVMGetParam(taped, 1);
	vec_push(t.scoped, op->ivar2);
	if (op->ktape) {
		t.index[op->irow] = LLVMGetParam(taped, 2);
		vec_push(t.scoped, op->irow);
	}
	lower_block(&t, &op->body2, 0, op->body2.len);
	LLVMBuildRetVoid(g->b);

	/* with a tape: forward step i into row irow, stepping the state */
	LLVMValueRef tape = LLVMConstNull(g->i8p);
	if (op->ktape) {
		Host w;
		LLVMValueRef fn = sub_function(h, &w, ar_printf("dp_tape%d", id), pt, 3);
		w.index[op->ivar] = LLVMGetParam(fn, 1);
		w.index[op->irow] = LLVMGetParam(fn, 2);
		vec_push(w.scoped, op->ivar);
		vec_push(w.scoped, op->irow);
		lower_block(&w, &op->body3, 0, op->body3.len);
		copy_yields(&w, op, op->cyield3);
		LLVMBuildRetVoid(g->b);
		tape = LLVMBuildBitCast(g->b, fn, g->i8p, "");
	}

	LLVMTypeRef ps[] = {g->i8p, g->i64, g->i32};
	LLVMValueRef snap = sub_function(h, &s, ar_printf("dp_snapshot%d", id), ps, 3);
	LLVMValueRef restore = LLVMBuildICmp(g->b, LLVMIntNE, LLVMGetParam(snap, 2), LLVMConstInt(g->i32, 0, 0), "");
	for (int k = 0; k < op->ncarry; k++) {
		int64_t bytes = ir_bytes(p, ir_vtype(p, op->carg[k]));
		LLVMValueRef slot = slot_addr(&s, op, k, LLVMGetParam(snap, 1));
		LLVMValueRef state = addr(&s, op->carg[k]);
		copy(&s, LLVMBuildSelect(g->b, restore, state, slot, ""), LLVMBuildSelect(g->b, restore, slot, state, ""), bytes);
	}
	LLVMBuildRetVoid(g->b);

	LLVMValueRef offload = LLVMConstNull(g->i8p);
	if (op->nhost) {
		Host o;
		LLVMValueRef fn = sub_function(h, &o, ar_printf("dp_offload%d", id), ps, 3);
		int64_t stage = op->nsnap - op->nhost;
		for (int k = 0; k < op->ncarry; k++) {
			int64_t bytes = ir_bytes(p, ir_vtype(p, op->carg[k]));
			LLVMValueRef host = LLVMBuildAdd(g->b, cg_i64(g, p->values.data[op->hsnap[k]].offset),
			                                 LLVMBuildMul(g->b, LLVMGetParam(fn, 1), cg_i64(g, bytes), ""), "");
			LLVMValueRef args[5] = {o.ctx, LLVMGetParam(fn, 2), LLVMBuildAdd(g->b, addr(&o, op->snap[k]), cg_i64(g, stage * bytes), ""),
			                        host, cg_i64(g, bytes)};
			call(&o, h->t_snap_copy, h->f_snap_copy, args, 5);
		}
		LLVMBuildRetVoid(g->b);
		offload = LLVMBuildBitCast(g->b, fn, g->i8p, "");
	}
	LLVMValueRef all[5] = {LLVMBuildBitCast(g->b, adv, g->i8p, ""), LLVMBuildBitCast(g->b, taped, g->i8p, ""), tape,
	                       LLVMBuildBitCast(g->b, snap, g->i8p, ""), offload};
	memcpy(fns, all, sizeof all);
}

/* A revolve: its schedule's functions, or its fused kernel, and the rt_revolve call */
static void lower_revolve(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	static int seq;
	int id = seq++;
	/* a fused kernel, when the bodies qualify, runs the schedule's actions; else the runtime calls these */
	const char *why = unfusable(h, op);
	LLVMValueRef fns[5];
	for (int i = 0; i < 5; i++)
		fns[i] = LLVMConstNull(g->i8p);
	LLVMBasicBlockRef resume = LLVMGetInsertBlock(g->b);
	if (why)
		revolve_functions(h, op, id, fns);

	LLVMPositionBuilderAtEnd(g->b, resume);
	for (int k = 0; k < op->ncarry; k++)
		copy(h, addr(h, op->carg[k]), addr(h, op->in[k]), ir_bytes(p, ir_vtype(p, op->carg[k])));
	/* pooled rows: the schedule's choices, as ckpt_pool_plan made them */
	LLVMValueRef pool = LLVMConstNull(g->i8p);
	if (op->pool) {
		unsigned cells = (unsigned)ckpt_pool_cells(op->pool->n, op->pool->k);
		LLVMValueRef *c = ar_alloc(sizeof *c * cells);
		for (unsigned i = 0; i < cells; i++)
			c[i] = LLVMConstInt(g->i32, (unsigned long long)(uint32_t)op->pool->choice[i], 0);
		LLVMTypeRef at = LLVMArrayType(g->i32, cells);
		LLVMValueRef table = LLVMAddGlobal(g->mod, at, ar_printf("dp_pool%d", id));
		LLVMSetInitializer(table, LLVMConstArray(g->i32, c, cells));
		LLVMSetGlobalConstant(table, 1);
		LLVMSetLinkage(table, LLVMInternalLinkage);
		pool = LLVMBuildBitCast(g->b, table, g->i8p, "");
	}
	int kernel = -1;
	int64_t threads = 0;
	if (!why) {
		KDesc d = loop_desc(h, op);
		kernel = cg_kernel_id(g, &d);
		threads = cg_kernel_size(g, &d) * d.lanes;
	}
	note_fusion(h, op, why, kernel);
	LLVMValueRef args[17] = {h->ctx, cg_i64(g, op->trip), cg_i64(g, op->nsnap), cg_i64(g, op->nhost), cg_i64(g, op->lo),
	                         LLVMConstInt(g->i32, op->swept, 0), cg_i64(g, op->ktape),
	                         cg_i64(g, ir_block_flops(p, &op->body, 0, op->body.len)),
	                         cg_i64(g, ir_recomputed_flops(p, &op->body2)),
	                         fns[0], fns[1], fns[2], fns[3], fns[4], pool,
	                         LLVMConstInt(g->i32, (unsigned long long)(unsigned)kernel, 1), cg_i64(g, threads)};
	call(h, h->t_revolve, h->f_revolve, args, 17);
}

/* ---- fused loops: a loop's whole run as one kernel (K_LOOP) ----
 *
 * A loop whose body is small kernels and copies (no GEMM, nothing the
 * runtime must do, no value over CG_FUSE_ELEMS elements) runs as one
 * kernel: a forward loop's iterations, or a revolve's actions, which
 * rt_revolve gives it in chunks of its schedule. Inside, each op is its
 * kernel's body inline, walked by the block's threads with a barrier
 * after it on the GPU, or by one loop on the CPU; the bodies are the
 * unfused kernels', so the bits are the same. */

static void string_global(Cg *g, const char *name, const char *text);

/* why op cannot run inside a fused loop, or NULL */
static const char *op_unfusable(Program *p, Op *op)
{
	int64_t m, n;
	const char *name = ir_ops[op->kind].name;
	switch (op->kind) {
	case OP_PARAM:
	case OP_INPUT:
	case OP_CONST:
	case OP_IDX:
	case OP_SLICE:
	case OP_RESHAPE:
	case OP_COPY:
	case OP_ZERO:
	case OP_ASSIGN:
	case OP_STORE_SLICE:
		break;
	case OP_DROPOUT:
	case OP_TRAINING:
		return ar_printf("%s asks the runtime for the step's key or mode", name);
	default:
		if (ir_ops[op->kind].low == LW_HOST && !ir_small_matmul(p, op))
			return ar_printf("%s runs from the host (a GEMM, a loop or a transfer)", name);
		if (ir_ops[op->kind].low == LW_HEADS)
			return ar_printf("%s works in tiles of its own", name);
		if (ir_leading_sum(p, op, &m, &n))
			return ar_printf("%s over leading axes is a GEMM", name);
	}
	if (op->kind == OP_SLICE || op->kind == OP_RESHAPE)
		return NULL; /* views: their ops compute over them */
	/* what the op computes over: a row stored or added into a tape, not the tape */
	bool row = op->kind == OP_STORE_SLICE || op->kind == OP_ACC_SLICE;
	for (int j = row ? op->nin - 1 : -1; j < op->nin; j++) {
		int v = j < 0 ? op->out : op->in[j];
		if (v < 0 || p->values.data[v].kind == VK_INDEX)
			continue;
		int64_t e = ir_numel(ir_vtype(p, v));
		if (e > CG_FUSE_ELEMS)
			return ar_printf("%s has %lld elements, more than a fused loop's %d", ir_value_name(p, v), (long long)e,
			                 CG_FUSE_ELEMS);
	}
	return NULL;
}

static const char *block_unfusable(Program *p, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		const char *why = op_unfusable(p, b->ops[i]);
		if (why)
			return why;
	}
	return NULL;
}

/* Why loop or revolve op runs a kernel per op and step, or NULL when it is one kernel. */
static const char *unfusable(Host *h, Op *op)
{
	Program *p = h->g->p;
	if (!h->g->fuse)
		return "--no-fuse";
	if (h->scoped->len)
		return "it is inside another loop";
	if (op->kind == OP_LOOP)
		return block_unfusable(p, &op->body);
	if (op->nhost)
		return "its snapshots pass through host memory";
	/* pooled rows come with GEMM bodies so far: none that qualifies has been run to test them fused */
	if (op->pool)
		return "its snapshots share the tape's rows (pooled)";
	if (op->trip >= (int64_t)1 << RT_ACTION_STEP || op->nsnap + op->ktape >= (int64_t)1 << RT_ACTION_FIELD)
		return "its steps or slots outgrow an action's fields";
	const char *why = block_unfusable(p, &op->body);
	if (!why)
		why = block_unfusable(p, &op->body2);
	if (!why && op->ktape)
		why = block_unfusable(p, &op->body3);
	return why;
}

/* The K_LOOP description of op as lowered here (its own kernel for dp_forward and dp_step) */
static KDesc loop_desc(Host *h, Op *op)
{
	Cg *g = h->g;
	int i = 0;
	while (i < g->loops.len && !(g->loops.data[i].op == op && g->loops.data[i].step == h->step))
		i++;
	if (i == g->loops.len)
		vec_push(&g->loops, ((CgLoop){op, h->step}));
	KDesc d;
	memset(&d, 0, sizeof d);
	d.kind = (OpKind)K_LOOP;
	d.loop = i;
	d.actions = op->kind == OP_REVOLVE;
	d.out = ir_type(g->p->real, 1, &op->trip);
	d.nargs = 3;
	return d;
}

/* --emit=llvm shows the choice as a string constant per loop */
static void note_fusion(Host *h, Op *op, const char *why, int kernel)
{
	Cg *g = h->g;
	const char *what = ar_printf("%s %s (%lld steps) in %s", op->kind == OP_LOOP ? "loop" : "revolve",
	                             ir_value_name(g->p, op->kind == OP_LOOP ? op->ivar : op->ivar2), (long long)op->trip,
	                             h->step ? "dp_step" : "dp_forward");
	const char *text = why ? ar_printf("%s: a launch per op and step, as %s", what, why)
	                       : ar_printf("%s: one kernel, dp_k%d (%s)", what, kernel, cg_kernel_label(&g->kernels.data[kernel]));
	string_global(g, ar_printf("dp_fusion%d", g->nnotes++), text);
}

/* A forward loop as one launch; false when it does not qualify. */
static bool fused_loop(Host *h, Op *op)
{
	Cg *g = h->g;
	const char *why = unfusable(h, op);
	if (why) {
		note_fusion(h, op, why, -1);
		return false;
	}
	KDesc d = loop_desc(h, op);
	LLVMValueRef words[3] = {h->base, cg_i64(g, 0), cg_i64(g, 0)};
	launch(h, &d, words, 3);
	note_fusion(h, op, NULL, cg_kernel_id(g, &d));
	if (op->counter >= 0) {
		LLVMValueRef args[3] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->counter, 0), cg_i64(g, op->trip)};
		call(h, h->t_count, h->f_count, args, 3);
	}
	return true;
}

/* counted loops in a fused kernel: i from `from` while below `to`, by `step` */
typedef struct {
	LLVMValueRef i, to;
	LLVMBasicBlockRef body, exit;
} DLoop;

static DLoop dloop_begin(Host *h, LLVMValueRef from, LLVMValueRef to)
{
	Cg *g = h->g;
	DLoop l = {.to = to};
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
	l.body = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "dloop");
	l.exit = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "dloop_end");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, from, to, ""), l.body, l.exit);
	LLVMPositionBuilderAtEnd(g->b, l.body);
	l.i = LLVMBuildPhi(g->b, g->i64, "i");
	LLVMAddIncoming(l.i, &from, &pre, 1);
	return l;
}

static void dloop_end(Host *h, DLoop *l, int64_t step)
{
	Cg *g = h->g;
	LLVMValueRef next = LLVMBuildAdd(g->b, l->i, cg_i64(g, step), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMAddIncoming(l->i, &next, &latch, 1);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, l->to, ""), l->body, l->exit);
	LLVMPositionBuilderAtEnd(g->b, l->exit);
}

/* the items a fused loop's thread takes: all of them on the CPU, every CG_BLOCK-th from tid on the GPU */
static DLoop dloop_items(Host *h, LLVMValueRef n) { return dloop_begin(h, h->tid ? h->tid : cg_i64(h->g, 0), n); }
static int64_t items_step(Host *h) { return h->tid ? CG_BLOCK : 1; }

static void dev_kernel(Host *h, KDesc *d, LLVMValueRef *words)
{
	Cg *g = h->g;
	cg_kernel_shape(g, d);
	LLVMValueRef n = cg_i64(g, cg_kernel_size(g, d));
	if (g->gpu) {
		cg_gpu_items(g, h->fn, d, words, h->tid, h->tid, cg_i64(g, CG_BLOCK), n);
		cg_barrier(g);
		return;
	}
	DLoop l = dloop_items(h, n);
	cg_kernel_body(g, h->fn, d, words, l.i, cg_i64(g, 0));
	dloop_end(h, &l, 1);
}

/* a copy, or with src NULL zeros, in the widest words that divide it */
static void dev_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes)
{
	Cg *g = h->g;
	int unit = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
	LLVMTypeRef t = LLVMIntTypeInContext(g->ctx, (unsigned)unit * 8), pt = LLVMPointerType(t, 0);
	LLVMValueRef d = LLVMBuildIntToPtr(g->b, dst, pt, ""), s = src ? LLVMBuildIntToPtr(g->b, src, pt, "") : NULL;
	DLoop l = dloop_items(h, cg_i64(g, bytes / unit));
	LLVMValueRef v = s ? LLVMBuildLoad2(g->b, t, LLVMBuildGEP2(g->b, t, s, &l.i, 1, ""), "") : LLVMConstInt(t, 0, 0);
	LLVMBuildStore(g->b, v, LLVMBuildGEP2(g->b, t, d, &l.i, 1, ""));
	dloop_end(h, &l, items_step(h));
	if (g->gpu)
		cg_barrier(g);
}

/* A revolve's fused kernel: it decodes each action word (RT_ACTION_WORD,
 * runtime/main.c writes them) and runs the action. */
static void dev_revolve(Host *h, Op *op, LLVMValueRef actions, LLVMValueRef count)
{
	Cg *g = h->g;
	Program *p = g->p;
	LLVMBuilderRef b = g->b;
	LLVMValueRef acts = LLVMBuildIntToPtr(b, actions, g->i64p, ""), shared = NULL;
	LLVMTypeRef at = LLVMArrayType(g->i64, CG_BLOCK);
	if (g->gpu) {
		shared = LLVMGetNamedGlobal(g->mod, "dp_actions");
		if (!shared) {
			shared = LLVMAddGlobalInAddressSpace(g->mod, at, "dp_actions", 3);
			LLVMSetInitializer(shared, LLVMGetUndef(at));
			LLVMSetLinkage(shared, LLVMInternalLinkage);
		}
	}
	DLoop j = dloop_begin(h, cg_i64(g, 0), count);
	LLVMValueRef w;
	if (g->gpu) {
		/* the block reads the next CG_BLOCK actions at once (they may be in host memory) */
		LLVMValueRef r = LLVMBuildURem(b, j.i, cg_i64(g, CG_BLOCK), "");
		LLVMBasicBlockRef fetch = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "fetch");
		LLVMBasicBlockRef have = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "have");
		LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "put");
		LLVMBasicBlockRef fetched = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "fetched");
		LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r, cg_i64(g, 0), ""), fetch, have);
		LLVMPositionBuilderAtEnd(b, fetch);
		cg_barrier(g);
		LLVMValueRef from = LLVMBuildAdd(b, j.i, h->tid, "");
		LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, from, count, ""), put, fetched);
		LLVMPositionBuilderAtEnd(b, put);
		LLVMValueRef ix[2] = {cg_i64(g, 0), h->tid};
		LLVMBuildStore(b, LLVMBuildLoad2(b, g->i64, LLVMBuildGEP2(b, g->i64, acts, &from, 1, ""), ""),
		               LLVMBuildGEP2(b, at, shared, ix, 2, ""));
		LLVMBuildBr(b, fetched);
		LLVMPositionBuilderAtEnd(b, fetched);
		cg_barrier(g);
		LLVMBuildBr(b, have);
		LLVMPositionBuilderAtEnd(b, have);
		LLVMValueRef rx[2] = {cg_i64(g, 0), r};
		w = LLVMBuildLoad2(b, g->i64, LLVMBuildGEP2(b, at, shared, rx, 2, ""), "");
	} else {
		w = LLVMBuildLoad2(b, g->i64, LLVMBuildGEP2(b, g->i64, acts, &j.i, 1, ""), "");
	}
	LLVMValueRef kind = LLVMBuildLShr(b, w, cg_i64(g, RT_ACTION_KIND), "");
	LLVMValueRef step = LLVMBuildAnd(b, w, cg_i64(g, ((int64_t)1 << RT_ACTION_STEP) - 1), "");
	LLVMValueRef n = LLVMBuildAnd(b, LLVMBuildLShr(b, w, cg_i64(g, RT_ACTION_STEP), ""), cg_i64(g, ((int64_t)1 << RT_ACTION_FIELD) - 1), "");
	LLVMValueRef first = LLVMBuildAdd(b, step, cg_i64(g, op->lo), "");
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "action_done");
	LLVMValueRef sw = LLVMBuildSwitch(b, kind, next, 5);
	LLVMBasicBlockRef untape = op->ktape ? LLVMAppendBasicBlockInContext(g->ctx, h->fn, "untape") : NULL;
	for (int a = CKPT_ADVANCE; a <= CKPT_TAPED; a++) {
		LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "action");
		LLVMAddCase(sw, cg_i64(g, a), bb);
		LLVMPositionBuilderAtEnd(b, bb);
		if (a == CKPT_ADVANCE || (a == CKPT_TAPED && op->ktape)) {
			/* steps first..first+n: with a tape, each into its row, then their adjoints */
			DLoop i = dloop_begin(h, first, LLVMBuildAdd(b, first, n, ""));
			h->index[op->ivar] = i.i;
			if (a == CKPT_TAPED)
				h->index[op->irow] = LLVMBuildSub(b, i.i, first, "");
			Block *body = a == CKPT_TAPED ? &op->body3 : &op->body;
			lower_block(h, body, 0, body->len);
			copy_yields(h, op, a == CKPT_TAPED ? op->cyield3 : op->cyield);
			dloop_end(h, &i, 1);
			LLVMBuildBr(b, a == CKPT_TAPED ? untape : next);
			continue;
		}
		if (a == CKPT_TAPED) {
			h->index[op->ivar2] = first;
			lower_block(h, &op->body2, 0, op->body2.len);
			LLVMBuildBr(b, next);
			continue;
		}
		for (int c = 0; c < op->ncarry; c++) {
			LLVMValueRef slot = slot_addr(h, op, c, n), state = addr(h, op->carg[c]);
			int64_t bytes = ir_bytes(p, ir_vtype(p, op->carg[c]));
			copy(h, a == CKPT_SAVE ? slot : state, a == CKPT_SAVE ? state : slot, bytes);
		}
		LLVMBuildBr(b, next);
	}
	if (untape) {
		/* the adjoints of steps first+n-1 down to first, from rows n-1..0 */
		LLVMAddCase(sw, cg_i64(g, CKPT_UNTAPE), untape);
		LLVMPositionBuilderAtEnd(b, untape);
		DLoop t = dloop_begin(h, cg_i64(g, 0), n);
		LLVMValueRef row = LLVMBuildSub(b, LLVMBuildSub(b, n, cg_i64(g, 1), ""), t.i, "");
		h->index[op->irow] = row;
		h->index[op->ivar2] = LLVMBuildAdd(b, first, row, "");
		lower_block(h, &op->body2, 0, op->body2.len);
		dloop_end(h, &t, 1);
		LLVMBuildBr(b, next);
	}
	LLVMPositionBuilderAtEnd(b, next);
	dloop_end(h, &j, 1);
}

void cg_loop_body(Cg *g, LLVMValueRef fn, const KDesc *k, LLVMValueRef *args, LLVMValueRef lane)
{
	Program *p = g->p;
	CgLoop *l = &g->loops.data[k->loop];
	Host h = {0};
	h.g = g;
	h.fn = fn;
	h.device = true;
	h.tid = g->gpu ? lane : NULL;
	h.step = l->step;
	h.uses = g->uses;
	h.norow = -1;
	h.base = args[0];
	h.index = ar_alloc(sizeof(LLVMValueRef) * (size_t)(p->values.len + 1));
	h.scoped = ar_alloc(sizeof *h.scoped);
	/* the body may name index constants defined before the loop */
	for (int v = 0; v < p->values.len; v++)
		if (p->values.data[v].def && p->values.data[v].def->kind == OP_IDX)
			h.index[v] = cg_i64(g, p->values.data[v].def->index);
	if (l->op->kind == OP_LOOP)
		lower_loop(&h, l->op);
	else
		dev_revolve(&h, l->op, args[1], args[2]);
}

/* ---- streaming: the copies go through the runtime (rt_fetch and company, dprt.h) ---- */

static LLVMValueRef slot_entry(Host *h, int slots)
{
	Cg *g = h->g;
	LLVMValueRef at = cg_i64(g, g->slot_at[slots]);
	return LLVMBuildGEP2(g->b, g->i64, LLVMBuildBitCast(g->b, g->slot_table, g->i64p, ""), &at, 1, "");
}

static void lower_transfer(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	int slots = op->kind == OP_D2H ? op->in[1] : op->in[0], host = op->kind == OP_D2H ? op->in[0] : op->in[1];
	int index = op->in[op->kind == OP_WAIT ? 1 : 2];
	Type t = ir_vtype(p, slots);
	int64_t k = t.dim[0], unit = ir_bytes(p, t) / k;
	LLVMValueRef i = h->index[index];
	if (!i)
		die("index %s has no host value", ir_value_name(p, index));
	switch (op->kind) {
	case OP_H2D: {
		LLVMValueRef args[9] = {h->ctx, slot_entry(h, slots), cg_i64(g, k), LLVMBuildAdd(g->b, i, cg_i64(g, op->shift), ""),
		                        cg_i64(g, op->lo), cg_i64(g, op->lo + op->trip), addr(h, slots),
		                        cg_i64(g, p->values.data[host].offset), cg_i64(g, unit)};
		call(h, h->t_fetch, h->f_fetch, args, 9);
		return;
	}
	case OP_D2H: {
		LLVMValueRef args[7] = {h->ctx, slot_entry(h, slots), cg_i64(g, k), i, addr(h, slots),
		                        cg_i64(g, p->values.data[host].offset), cg_i64(g, unit)};
		call(h, h->t_writeback, h->f_writeback, args, 7);
		return;
	}
	case OP_WAIT: {
		LLVMValueRef args[4] = {h->ctx, slot_entry(h, slots), cg_i64(g, k), i};
		call(h, h->t_wait, h->f_wait, args, 4);
		return;
	}
	case OP_UPDATE: {
		LLVMValueRef at = LLVMBuildMul(g->b, LLVMBuildURem(g->b, i, cg_i64(g, k), ""), cg_i64(g, unit), "");
		LLVMValueRef m = cg_i64(g, 0), v = cg_i64(g, 0);
		if (op->nin == 5) {
			m = LLVMBuildAdd(g->b, addr(h, op->in[3]), at, "");
			v = LLVMBuildAdd(g->b, addr(h, op->in[4]), at, "");
		}
		LLVMValueRef args[8] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->index, 0), i,
		                        LLVMBuildAdd(g->b, addr(h, slots), at, ""), addr(h, op->in[1]), m, v,
		                        cg_i64(g, ir_numel(ir_vtype(p, op->in[1])))};
		call(h, h->t_update, h->f_update, args, 8);
		return;
	}
	default:
		unreachable();
	}
}

static void lower_op(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	switch (op->kind) {
	case OP_PARAM:
	case OP_INPUT:
	case OP_CONST:
	case OP_SLICE:
	case OP_RESHAPE:
		return;
	case OP_IDX:
		h->index[op->out] = cg_i64(g, op->index);
		return;
	case OP_LOOP:
		if (!fused_loop(h, op))
			lower_loop(h, op);
		return;
	case OP_REVOLVE:
		lower_revolve(h, op);
		return;
	case OP_H2D:
	case OP_D2H:
	case OP_WAIT:
	case OP_UPDATE:
		lower_transfer(h, op);
		return;
	case OP_MATMUL:
		if (ir_small_matmul(p, op))
			lower_kernel(h, op, NULL);
		else
			gemm(h, op, addr(h, op->out), 0);
		return;
	case OP_COPY:
		copy(h, addr(h, op->out), addr(h, op->in[0]), ir_bytes(p, ir_vtype(p, op->out)));
		return;
	case OP_ASSIGN:
		if (!coalesced(p, op->in[1], op->in[0], -1))
			copy(h, addr(h, op->in[0]), addr(h, op->in[1]), ir_bytes(p, ir_vtype(p, op->in[0])));
		return;
	case OP_STORE_SLICE: {
		if (op->in[1] == h->norow || coalesced(p, op->in[2], op->in[0], op->in[1]))
			return;
		Type t = ir_vtype(p, op->in[2]);
		LLVMValueRef dst = LLVMBuildAdd(g->b, addr(h, op->in[0]), LLVMBuildMul(g->b, h->index[op->in[1]], cg_i64(g, ir_bytes(p, t)), ""), "");
		copy(h, dst, addr(h, op->in[2]), ir_bytes(p, t));
		return;
	}
	case OP_ZERO: {
		if (h->device) {
			dev_copy(h, addr(h, op->in[0]), NULL, ir_bytes(p, ir_vtype(p, op->in[0])));
			return;
		}
		LLVMValueRef args[3] = {h->ctx, addr(h, op->in[0]), cg_i64(g, ir_bytes(p, ir_vtype(p, op->in[0])))};
		call(h, h->t_zero, h->f_zero, args, 3);
		return;
	}
	default: {
		int64_t m, n;
		if (ir_leading_sum(p, op, &m, &n))
			lower_leading_sum(h, op, addr(h, op->out), 0);
		else
			lower_kernel(h, op, NULL);
	}
	}
}

static bool elementwise(Op *op) { return ir_ops[op->kind].flags & OPF_EW; }

/* The word that carries value v, added on first use. */
static int word_of(Host *h, LLVMValueRef *words, int *vals, int *nw, int v)
{
	for (int i = 0; i < *nw; i++)
		if (vals[i] == v)
			return i;
	vals[*nw] = v;
	words[*nw] = addr(h, v);
	return (*nw)++;
}

/* The arena bytes a value's storage may touch: its root's whole extent. */
static void extent(Program *p, int v, int64_t *lo, int64_t *hi)
{
	while (p->values.data[v].res == VR_ALIAS)
		v = p->values.data[v].alias_of;
	*lo = p->values.data[v].offset;
	*hi = *lo + ir_bytes(p, p->values.data[v].type);
}

/* The plan may give an op's result the storage of a value whose last use was
 * an earlier op, or of an operand it updates in place. Fused, the two run in
 * one kernel, where another element's thread may still read what this one
 * writes: such an op starts a new kernel, unless the value read is exactly
 * the result's storage at the result's shape, so that each element is read
 * and written by one thread. */
static bool clobbers(Program *p, Op *op, const int *vals, int nw)
{
	int64_t lo, hi, a, b;
	extent(p, op->out, &lo, &hi);
	Type shape = ir_vtype(p, op->out);
	for (int i = 0; i < nw; i++) {
		extent(p, vals[i], &a, &b);
		bool same = a == lo && b == hi && ir_type_eq(ir_vtype(p, vals[i]), shape) &&
		            (p->values.data[vals[i]].res != VR_ALIAS || !p->values.data[vals[i]].def ||
		             p->values.data[vals[i]].def->kind != OP_SLICE);
		if (a < hi && lo < b && !same)
			return true;
	}
	return false;
}

/* Fuses the elementwise ops b[from..] of one result shape into one kernel;
 * returns how many it took. */
static int lower_fused(Host *h, Block *b, int from, int to)
{
	Program *p = h->g->p;
	Type shape = ir_vtype(p, b->ops[from]->out);
	KDesc d;
	memset(&d, 0, sizeof d);
	d.kind = (OpKind)K_FUSED;
	d.out = shape;
	LLVMValueRef words[16];
	int vals[16], nw = 0;
	int n = 0;
	while (from + n < to && n < CG_MAXSTEPS && elementwise(b->ops[from + n]) &&
	       ir_type_eq(ir_vtype(p, b->ops[from + n]->out), shape) && nw + 4 <= 16 &&
	       (n == 0 || !clobbers(p, b->ops[from + n], vals, nw))) {
		Op *op = b->ops[from + n];
		KStep *st = &d.step[n];
		st->kind = op->kind;
		st->nin = op->nin;
		st->store = -1;
		for (int j = 0; j < op->nin; j++) {
			Value *x = &p->values.data[op->in[j]];
			st->in[j] = x->type;
			int earlier = -1;
			for (int s = 0; s < n; s++)
				if (b->ops[from + s]->out == op->in[j])
					earlier = s;
			if (x->def && x->def->kind == OP_CONST)
				st->is_const[j] = true, st->cval[j] = x->def->attr.value;
			else if (earlier >= 0)
				st->src[j] = -(earlier + 1);
			else
				st->src[j] = word_of(h, words, vals, &nw, op->in[j]);
		}
		n++;
	}
	/* store a step's result unless every use is a later step of this kernel */
	for (int s = 0; s < n; s++) {
		int v = b->ops[from + s]->out, inside = 0;
		for (int t = s + 1; t < n; t++)
			for (int j = 0; j < b->ops[from + t]->nin; j++)
				inside += b->ops[from + t]->in[j] == v;
		if (h->uses[v] > inside || ir_is_result(p, v))
			d.step[s].store = word_of(h, words, vals, &nw, v);
	}
	d.nsteps = n;
	launch(h, &d, words, nw);
	return n;
}

/* rt_phase: where dp_step has got to (--trace) */
static void phase_mark(Host *h, int phase)
{
	LLVMValueRef args[2] = {h->ctx, LLVMConstInt(h->g->i32, (unsigned long long)phase, 0)};
	call(h, h->t_phase, h->f_phase, args, 2);
}

static void lower_ops(Host *h, Block *b, int from, int to)
{
	Vec(Op *) absorbed = {0};
	bool top = b == &h->g->p->body; /* recomputed ops in loop bodies: rt_revolve counts them */
	for (int i = from; i < to; i++) {
		Op *op = b->ops[i];
		/* dp_step's adjoint begins (a fused run may start a little before) */
		if (top && h->step && i >= h->g->p->nforward && !h->g->backward_marked) {
			phase_mark(h, RT_PHASE_BACKWARD);
			h->g->backward_marked = true;
		}
		int first = i;
		bool skip = false;
		for (int k = 0; k < absorbed.len; k++)
			skip |= absorbed.data[k] == op;
		if (skip)
			continue;
		int64_t m, n;
		bool reduction = op->kind == OP_SUM || op->kind == OP_MEAN || op->kind == OP_SUM_TO;
		int j = op->kind == OP_MATMUL || reduction ? absorbed_acc(h, b, i, to) : -1;
		if (j >= 0) {
			LLVMValueRef dst = acc_target(h, b->ops[j]);
			if (op->kind == OP_MATMUL && !ir_small_matmul(h->g->p, op))
				gemm(h, op, dst, 1);
			else if (ir_leading_sum(h->g->p, op, &m, &n))
				lower_leading_sum(h, op, dst, 1);
			else
				lower_kernel(h, op, dst);
			vec_push(&absorbed, b->ops[j]);
		} else if (elementwise(op)) {
			i += lower_fused(h, b, i, to) - 1;
		} else {
			lower_op(h, op);
		}
		/* straight-line ops the adjoint computes again (ckpt_graph_fit): counted as the plan counts them */
		int64_t again = 0;
		for (int j = first; top && j <= i; j++)
			again += b->ops[j]->recomputed ? ir_op_flops(h->g->p, b->ops[j]) : 0;
		if (again) {
			LLVMValueRef args[3] = {h->ctx, LLVMConstInt(h->g->i32, RT_COUNT_FLOPS, 0), cg_i64(h->g, again)};
			call(h, h->t_count, h->f_count, args, 3);
		}
	}
}


/* Host code of an op, counted in ops: a loop's body is emitted inline. */
static int64_t block_weight(Block *b, int from, int to);
static int64_t op_weight(Op *op)
{
	/* a forward loop with a tail is emitted twice (lower_loop) */
	return 1 + (op->kind == OP_LOOP ? (1 + !!ir_loop_tail(op)) * block_weight(&op->body, 0, op->body.len) : 0);
}

static int64_t block_weight(Block *b, int from, int to)
{
	int64_t w = 0;
	for (int i = from; i < to; i++)
		w += op_weight(b->ops[i]);
	return w;
}

/* Emits b[from, to) as an internal function of its own and calls it: void
 * NAME.partN(ctx, base, the loop indices live here). noinline, so the parts
 * of a long block stay apart through the optimizer and the backend. */
static void lower_part(Host *h, Block *b, int from, int to)
{
	Cg *g = h->g;
	/* the host values of index values that are not constants: enclosing loops' indices */
	int *live = ar_alloc(sizeof(int) * (size_t)(h->scoped->len + 1));
	int nlive = 0;
	for (int i = 0; i < h->scoped->len; i++) {
		int v = h->scoped->data[i];
		if (h->index[v] && !LLVMIsConstant(h->index[v]))
			live[nlive++] = v;
	}
	LLVMTypeRef *pt = ar_alloc(sizeof(LLVMTypeRef) * (size_t)(nlive + 2));
	LLVMValueRef *args = ar_alloc(sizeof(LLVMValueRef) * (size_t)(nlive + 2)), *outer = ar_alloc(sizeof(LLVMValueRef) * (size_t)(nlive + 1));
	pt[0] = g->i8p, pt[1] = g->i64;
	args[0] = h->ctx, args[1] = h->base;
	for (int k = 0; k < nlive; k++) {
		pt[k + 2] = g->i64;
		args[k + 2] = outer[k] = h->index[live[k]];
	}
	LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), pt, (unsigned)nlive + 2, 0);
	LLVMValueRef fn = LLVMAddFunction(g->mod, ar_printf("%s.part%d", LLVMGetValueName(h->fn), g->nparts++), ft);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, noinline, 0));
	LLVMBasicBlockRef resume = LLVMGetInsertBlock(g->b);

	Host c = *h;
	c.fn = fn;
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	c.ctx = LLVMGetParam(fn, 0);
	c.base = LLVMGetParam(fn, 1);
	c.argbuf = LLVMBuildArrayAlloca(g->b, g->i64, cg_i64(g, 16), "args");
	/* one index table: constants an idx op defines in the part stay visible after it */
	for (int k = 0; k < nlive; k++)
		h->index[live[k]] = LLVMGetParam(fn, (unsigned)k + 2);
	lower_ops(&c, b, from, to);
	LLVMBuildRetVoid(g->b);
	for (int k = 0; k < nlive; k++)
		h->index[live[k]] = outer[k];

	LLVMPositionBuilderAtEnd(g->b, resume);
	LLVMBuildCall2(g->b, ft, fn, args, (unsigned)nlive + 2, "");
}

/* A block of more than CG_PART ops is emitted as consecutive parts of at
 * most CG_PART ops, each its own function (a loop heavier than that alone
 * stays inline, and its body is split in turn). LLVM's optimizer and backend
 * have steps that grow with the square of a function's or a basic block's
 * length (InstCombine revisiting the argument buffer's alloca, nonnull
 * queries that renumber the block, register allocation); bounded parts keep
 * the compile time of a 20,000-term expression linear. Fusion and absorbed
 * accs do not reach across a part's boundary. */
static void lower_block(Host *h, Block *b, int from, int to)
{
	if (h->device || block_weight(b, from, to) <= CG_PART) {
		lower_ops(h, b, from, to);
		return;
	}
	for (int i = from; i < to;) {
		int64_t w = op_weight(b->ops[i]);
		int j = i + 1;
		if (w > CG_PART) {
			lower_ops(h, b, i, j);
		} else {
			while (j < to && w + op_weight(b->ops[j]) <= CG_PART)
				w += op_weight(b->ops[j++]);
			lower_part(h, b, i, j);
		}
		i = j;
	}
}

/* Starts function fn(ctx, ...): its entry block, the argument buffer, the arena base. */
static void begin(Host *h, LLVMValueRef fn)
{
	Cg *g = h->g;
	h->fn = fn;
	h->norow = -1;
	h->index = ar_alloc(sizeof(LLVMValueRef) * (size_t)(g->p->values.len + 1));
	h->scoped = ar_alloc(sizeof *h->scoped);
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	h->ctx = LLVMGetParam(fn, 0);
	h->argbuf = LLVMBuildArrayAlloca(g->b, g->i64, cg_i64(g, 16), "args");
	h->base = LLVMBuildCall2(g->b, h->t_base, h->f_base, &h->ctx, 1, "base");
}

static void host_function(Cg *g, const char *name, int nops)
{
	Host h = {0};
	h.g = g;
	h.step = !strcmp(name, "dp_step");
	h.uses = g->uses;
	LLVMTypeRef vd = LLVMVoidTypeInContext(g->ctx);
	LLVMTypeRef pl[] = {g->i8p, g->i32, g->i64, g->i32, g->i64p};
	h.f_launch = declare(g, "rt_launch", vd, pl, 5, &h.t_launch);
	LLVMTypeRef pg[] = {g->i8p, g->i32, g->i32, g->i32, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64,
	                    g->i64, g->i64, g->i64, g->i64, g->f64};
	h.f_gemm = declare(g, "rt_gemm", vd, pg, 18, &h.t_gemm);
	LLVMTypeRef pc[] = {g->i8p, g->i64, g->i64, g->i64};
	h.f_copy = declare(g, "rt_copy", vd, pc, 4, &h.t_copy);
	LLVMTypeRef pz[] = {g->i8p, g->i64, g->i64};
	h.f_zero = declare(g, "rt_zero", vd, pz, 3, &h.t_zero);
	LLVMTypeRef pn[] = {g->i8p, g->i32, g->i64};
	h.f_count = declare(g, "rt_count", vd, pn, 3, &h.t_count);
	LLVMTypeRef pp[] = {g->i8p, g->i32};
	h.f_phase = declare(g, "rt_phase", vd, pp, 2, &h.t_phase);
	h.f_base = declare(g, "rt_base", g->i64, &g->i8p, 1, &h.t_base);
	h.f_key = declare(g, "rt_key", g->i64, &g->i8p, 1, &h.t_key);
	h.f_on = declare(g, "rt_training", g->i64, &g->i8p, 1, &h.t_on);
	LLVMTypeRef pr[] = {g->i8p, g->i64, g->i64, g->i64, g->i64, g->i32, g->i64, g->i64, g->i64, g->i8p,
	                    g->i8p, g->i8p, g->i8p, g->i8p, g->i8p, g->i32, g->i64};
	h.f_revolve = declare(g, "rt_revolve", vd, pr, 17, &h.t_revolve);
	LLVMTypeRef ps[] = {g->i8p, g->i32, g->i64, g->i64, g->i64};
	h.f_snap_copy = declare(g, "rt_snap_copy", vd, ps, 5, &h.t_snap_copy);

	LLVMTypeRef pf[] = {g->i8p, g->i64p, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64};
	h.f_fetch = declare(g, "rt_fetch", vd, pf, 9, &h.t_fetch);
	LLVMTypeRef pw[] = {g->i8p, g->i64p, g->i64, g->i64};
	h.f_wait = declare(g, "rt_wait", vd, pw, 4, &h.t_wait);
	LLVMTypeRef pb[] = {g->i8p, g->i64p, g->i64, g->i64, g->i64, g->i64, g->i64};
	h.f_writeback = declare(g, "rt_writeback", vd, pb, 7, &h.t_writeback);
	LLVMTypeRef pu[] = {g->i8p, g->i32, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64};
	h.f_update = declare(g, "rt_update", vd, pu, 8, &h.t_update);
	LLVMTypeRef pe[] = {g->i8p, g->i64p, g->i64};
	h.f_reset = declare(g, "rt_stream_reset", vd, pe, 3, &h.t_reset);

	LLVMTypeRef ft = LLVMFunctionType(vd, &g->i8p, 1, 0);
	begin(&h, LLVMAddFunction(g->mod, name, ft));
	if (g->slot_words) {
		/* each call starts from empty slots: what the host pool holds may have changed since */
		LLVMValueRef args[3] = {h.ctx, LLVMBuildBitCast(g->b, g->slot_table, g->i64p, ""), cg_i64(g, g->slot_words)};
		call(&h, h.t_reset, h.f_reset, args, 3);
	}
	for (int dt = 0; dt <= DT_F64; dt++) {
		if (!g->p->ones_len[dt])
			continue;
		KDesc d;
		memset(&d, 0, sizeof d);
		d.kind = OP_FILL;
		d.attr.value = 1;
		d.out = ir_type((DType)dt, 1, &g->p->ones_len[dt]);
		LLVMValueRef at = LLVMBuildAdd(g->b, h.base, cg_i64(g, g->p->ones_offset[dt]), "");
		launch(&h, &d, &at, 1);
	}
	if (h.step)
		phase_mark(&h, RT_PHASE_FORWARD);
	lower_block(&h, &g->p->body, 0, nops);
	LLVMBuildRetVoid(g->b);
}

/* ---- the model description (runtime/dprt.h) ---- */

typedef Vec(char) Text;

static void put(Text *t, const char *s)
{
	for (; *s; s++)
		vec_push(t, *s);
}

static void put_type(Text *t, Type ty)
{
	put(t, ar_printf(" %d", ty.rank));
	for (int i = 0; i < ty.rank; i++)
		put(t, ar_printf(" %lld", (long long)ty.dim[i]));
}

static void count_steps(Block *b, int64_t times, int64_t *counts)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->kind == OP_REVOLVE)
			counts[RT_COUNT_RECOMPUTED] += times * ckpt_revolve_cost(op);
		if (op->kind != OP_LOOP)
			continue;
		if (op->counter >= 0)
			counts[op->counter] += times * op->trip;
		count_steps(&op->body, times * op->trip, counts);
	}
}

/* does an embed in b read input value v as its ids: v itself, or a part
 * of it that views, slices or copies make (each an op of one i32 operand)? */
static bool embeds(Program *p, Block *b, int v)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->kind == OP_EMBED) {
			int r = op->in[1];
			for (Op *d; r != v && (d = p->values.data[r].def) && d->nin == 1;)
				r = d->in[0];
			if (r == v)
				return true;
		}
		if (embeds(p, &op->body, v) || embeds(p, &op->body2, v) || embeds(p, &op->body3, v))
			return true;
	}
	return false;
}

static const char *model_desc(Cg *g, const CgOptions *o, const int *sgd, const int *adam)
{
	Program *p = g->p;
	Text t = {0};
	put(&t, ar_printf("dpc 1\nmodel %s\nprecision %s\narena %lld\nloss %lld %s\n", o->model_name, ir_dt_name(p->real),
	                  (long long)p->arena_bytes, (long long)p->values.data[p->loss].offset, ir_dt_name(ir_vtype(p, p->loss).dt)));
	for (int i = 0; i < p->reports.len; i++) {
		Value *v = &p->values.data[p->reports.data[i].value];
		put(&t, ar_printf("report %s %lld %s\n", p->reports.data[i].name, (long long)v->offset, ir_dt_name(v->type.dt)));
	}
	static const char *inits[] = {"zeros", "ones", "normal", "uniform"};
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		put(&t, ar_printf("param %s %s", q->name, ir_dt_name(q->type.dt)));
		put_type(&t, q->type);
		put(&t, ar_printf(" %lld %lld %d %s %.17g %.17g\n", q->streamed ? -1LL : (long long)p->values.data[q->value].offset,
		                  q->streamed || q->buffer ? -1LL : (long long)p->values.data[q->grad].offset, q->stacked, inits[q->init], q->a, q->b));
		if (q->buffer)
			put(&t, ar_printf("buffer %s\n", q->name));
	}
	for (int i = 0; i < p->updates.len; i++)
		put(&t, ar_printf("update %s %lld\n", p->updates.data[i].name, (long long)p->values.data[p->updates.data[i].value].offset));
	for (int i = 0; i < p->inputs.len; i++) {
		Input *in = &p->inputs.data[i];
		put(&t, ar_printf("input %s %s", in->name, ir_dt_name(in->type.dt)));
		put_type(&t, in->type);
		put(&t, ar_printf(" %lld %d %d %d\n", (long long)p->values.data[in->value].offset, in->classes, in->has_ignore, in->ignore));
		if (embeds(p, &p->body, in->value))
			put(&t, ar_printf("ids %s\n", in->name));
	}
	put(&t, ar_printf("optimizer %s\n", p->optimizer == OPT_ADAM ? "adam" : "sgd"));
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->opt_m >= 0 && !q->streamed)
			put(&t, ar_printf("state %s %lld %lld\n", q->name, (long long)p->values.data[q->opt_m].offset,
			                  (long long)p->values.data[q->opt_v].offset));
	}
	put(&t, ar_printf("host %lld\n", (long long)p->host_bytes));
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->streamed)
			put(&t, ar_printf("stream %s %lld %lld %lld\n", q->name, (long long)p->values.data[q->value].offset,
			                  q->opt_m >= 0 ? (long long)p->values.data[q->opt_m].offset : -1LL,
			                  q->opt_m >= 0 ? (long long)p->values.data[q->opt_v].offset : -1LL));
	}
	put(&t, ar_printf("transfers slots %d ahead %d forward %lld %lld step %lld %lld\n", p->nslots, p->ahead,
	                  (long long)p->h2d_bytes[0], (long long)p->d2h_bytes[0], (long long)p->h2d_bytes[1],
	                  (long long)p->d2h_bytes[1]));
	for (int dt = 0; dt <= DT_F64; dt++)
		if (sgd[dt] >= 0)
			put(&t, ar_printf("kernel sgd %s %d\nkernel adam %s %d\n", ir_dt_name((DType)dt), sgd[dt], ir_dt_name((DType)dt), adam[dt]));
	for (int i = 0; i < g->kernels.len; i++) {
		put(&t, ar_printf("kname %d %s\n", i, cg_kernel_label(&g->kernels.data[i])));
		int64_t w = cg_kernel_work(g, &g->kernels.data[i]);
		if (w > 1)
			put(&t, ar_printf("kwork %d %lld\n", i, (long long)w));
	}
	put(&t, ar_printf("plan params %lld\nplan grads %lld\nplan optimizer %lld\nplan inputs %lld\nplan tape %lld\n"
	                  "plan snapshots %lld\nplan slots %lld\nplan work %lld\n",
	                  (long long)p->plan_params, (long long)p->plan_grads, (long long)p->plan_opt, (long long)p->plan_inputs,
	                  (long long)p->plan_tape, (long long)p->plan_snap, (long long)p->plan_slots, (long long)p->plan_work));
	if (p->mem_series) {
		put(&t, ar_printf("memplot %d", p->mem_points));
		for (int i = 0; i < p->mem_points; i++)
			put(&t, ar_printf(" %lld", (long long)p->mem_series[i]));
		put(&t, "\n");
	}
	if (o->budget)
		put(&t, ar_printf("budget %lld\n", (long long)o->budget));
	int64_t counts[2] = {0, 0};
	count_steps(&p->body, 1, counts);
	put(&t, ar_printf("steps forward %lld recomputed %lld\n", (long long)counts[RT_COUNT_FORWARD],
	                  (long long)counts[RT_COUNT_RECOMPUTED]));
	put(&t, ar_printf("flops forward %lld\nend\n", (long long)ir_block_flops(p, &p->body, 0, p->nforward)));
	vec_push(&t, 0);
	return t.data;
}

static void string_global(Cg *g, const char *name, const char *text)
{
	LLVMValueRef s = LLVMConstStringInContext(g->ctx, text, (unsigned)strlen(text), 0);
	LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(s), name);
	LLVMSetInitializer(v, s);
	LLVMSetGlobalConstant(v, 1);
}

static void phase(const CgOptions *o, const char *what)
{
	if (o->phase)
		o->phase(what);
}

static Cg *build(Program *p, const CgOptions *o)
{
	Cg *g = ar_alloc(sizeof *g);
	g->p = p;
	g->ctx = LLVMContextCreate();
	g->mod = LLVMModuleCreateWithNameInContext(o->model_name, g->ctx);
	g->b = LLVMCreateBuilderInContext(g->ctx);
	g->i1 = LLVMInt1TypeInContext(g->ctx);
	g->i8 = LLVMInt8TypeInContext(g->ctx);
	g->i32 = LLVMInt32TypeInContext(g->ctx);
	g->i64 = LLVMInt64TypeInContext(g->ctx);
	g->f64 = LLVMDoubleTypeInContext(g->ctx);
	g->i8p = LLVMPointerType(g->i8, 0);
	g->i64p = LLVMPointerType(g->i64, 0);
	cg_set_real(g, p->real);
	g->i32p = LLVMPointerType(g->i32, 0);
	g->cuda = o->target == CG_CUDA;
	g->fuse = o->fuse;
	g->uses = ir_count_uses(p);

	/* the optimizers' kernels, one pair per element type of trained parameters, and p->real's always */
	int sgd[DT_F64 + 1], adam[DT_F64 + 1];
	for (int dt = 0; dt <= DT_F64; dt++) {
		bool used = dt == (int)p->real;
		for (int i = 0; i < p->params.len; i++)
			used |= !p->params.data[i].buffer && p->params.data[i].type.dt == (DType)dt;
		sgd[dt] = adam[dt] = -1;
		if (!used)
			continue;
		KDesc opt;
		memset(&opt, 0, sizeof opt);
		opt.out.dt = (DType)dt;
		opt.kind = (OpKind)K_SGD;
		opt.nargs = 3;
		sgd[dt] = cg_kernel_id(g, &opt);
		opt.kind = (OpKind)K_ADAM;
		opt.nargs = 10;
		adam[dt] = cg_kernel_id(g, &opt);
	}

	g->slot_at = ar_alloc(sizeof(int64_t) * (size_t)(p->values.len + 1));
	for (int v = 0; v < p->values.len; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_SLOT) {
			g->slot_at[v] = g->slot_words;
			g->slot_words += 2 * p->values.data[v].type.dim[0];
		}
	if (g->slot_words) {
		LLVMTypeRef at = LLVMArrayType(g->i64, (unsigned)g->slot_words);
		g->slot_table = LLVMAddGlobal(g->mod, at, "dp_slots");
		LLVMSetInitializer(g->slot_table, LLVMConstNull(at));
		LLVMSetLinkage(g->slot_table, LLVMInternalLinkage);
	}
	host_function(g, "dp_forward", p->nforward);
	host_function(g, "dp_step", p->body.len);
	phase(o, "codegen: host schedule");
	/* the CPU target runs x86 kernels; the CUDA target embeds PTX and has an empty table */
	string_global(g, "dp_ptx", o->target == CG_CUDA ? cg_ptx(g) : "");
	if (o->target == CG_CUDA)
		phase(o, ar_printf("codegen: %d kernels as PTX", g->kernels.len));
	string_global(g, "dp_model_desc", model_desc(g, o, sgd, adam));
	if (o->target == CG_CUDA)
		g->kernels.len = 0, g->kslots = 0; /* the table (and its index) empty */
	cg_cpu_kernels(g);
	if (o->target == CG_CPU)
		phase(o, ar_printf("codegen: %d kernels for x86", g->kernels.len));

	char *err = NULL;
	if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &err))
		die("generated LLVM module is invalid: %s", err);
	LLVMDisposeMessage(err);
	return g;
}

static LLVMTargetMachineRef host_machine(void)
{
	LLVMInitializeX86TargetInfo();
	LLVMInitializeX86Target();
	LLVMInitializeX86TargetMC();
	LLVMInitializeX86AsmPrinter();
	char *triple = LLVMGetDefaultTargetTriple();
	LLVMTargetRef target;
	char *err = NULL;
	if (LLVMGetTargetFromTriple(triple, &target, &err))
		die("no LLVM target for %s: %s", triple, err);
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, "x86-64", "", LLVMCodeGenLevelDefault,
	                                                  LLVMRelocPIC, LLVMCodeModelDefault);
	LLVMDisposeMessage(triple);
	return tm;
}

static void optimize(Cg *g, LLVMTargetMachineRef tm)
{
	char *triple = LLVMGetTargetMachineTriple(tm);
	LLVMSetTarget(g->mod, triple);
	LLVMDisposeMessage(triple);
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(g->mod, td); /* copies it */
	LLVMDisposeTargetData(td);
	cg_optimize(g->mod, 2);
}

/* Everything build made in LLVM: the builder, the module, the context. */
static void dispose(Cg *g)
{
	LLVMDisposeBuilder(g->b);
	LLVMDisposeModule(g->mod);
	LLVMContextDispose(g->ctx);
}

void cg_optimize(LLVMModuleRef m, unsigned level)
{
	LLVMPassManagerBuilderRef pmb = LLVMPassManagerBuilderCreate();
	LLVMPassManagerBuilderSetOptLevel(pmb, level);
	LLVMPassManagerRef pm = LLVMCreatePassManager();
	LLVMPassManagerBuilderPopulateModulePassManager(pmb, pm);
	LLVMRunPassManager(pm, m);
	LLVMDisposePassManager(pm);
	LLVMPassManagerBuilderDispose(pmb);
}

void cg_emit_ptx(Program *p, const CgOptions *o, FILE *out)
{
	CgOptions cuda = *o;
	cuda.target = CG_CUDA;
	Cg *g = build(p, &cuda);
	LLVMValueRef v = LLVMGetNamedGlobal(g->mod, "dp_ptx");
	size_t n;
	const char *s = LLVMGetAsString(LLVMGetInitializer(v), &n);
	fwrite(s, 1, strlen(s) < n ? strlen(s) : n, out); /* without the terminating NUL */
	dispose(g);
}

void cg_emit_llvm(Program *p, const CgOptions *o, FILE *out)
{
	Cg *g = build(p, o);
	char *s = LLVMPrintModuleToString(g->mod);
	fputs(s, out);
	LLVMDisposeMessage(s);
	dispose(g);
}

void cg_emit_object(Program *p, const CgOptions *o, const char *path)
{
	Cg *g = build(p, o);
	LLVMTargetMachineRef tm = host_machine();
	optimize(g, tm);
	phase(o, "LLVM optimizer (host module)");
	char *err = NULL;
	if (LLVMTargetMachineEmitToFile(tm, g->mod, (char *)path, LLVMObjectFile, &err))
		fatal("cannot write %s: %s", path, err);
	phase(o, "object file");
	LLVMDisposeTargetMachine(tm);
	dispose(g);
}
