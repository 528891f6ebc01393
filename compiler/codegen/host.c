/* cg: the host schedule (dp_step, dp_forward): each op's host code, found
 * by its family (the op table's last column); long blocks in parts; the
 * model description; emission of the module as LLVM text or an object file. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassManagerBuilder.h>

#include "../../common/abi.h"
#include "../../common/revolve.h"
#include "cgint.h"


LLVMValueRef cg_declare(Cg *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n, LLVMTypeRef *ft)
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

/* The first value up v's VR_ALIAS chain (v included) where stop() holds,
 * every value walked remembered in memo: each chain is walked once. */
static int chain_end(Program *p, int *memo, int v, bool (*stop)(Program *, int))
{
	int r = v;
	while (memo[r] < 0 && !stop(p, r))
		r = p->values.data[r].alias_of;
	int end = memo[r] >= 0 ? memo[r] : r;
	for (int x = v; x != r; x = p->values.data[x].alias_of)
		memo[x] = end;
	memo[r] = end;
	return end;
}

static bool not_alias(Program *p, int v) { return p->values.data[v].res != VR_ALIAS; }

/* where an address is built from: in the arena, or a slice of another value (a plain alias, such as
 * an elementwise result in its operand, is at its operand's address) */
static bool addressed(Program *p, int v)
{
	Value *x = &p->values.data[v];
	return x->res != VR_ALIAS || x->alias_index >= 0 || (x->def && x->def->kind == OP_SLICE);
}

/* Device address of a value: arena base + offset, through views. */
LLVMValueRef cg_addr(Host *h, int v)
{
	Program *p = h->g->p;
	if (v == h->g->moved_from)
		v = h->g->moved_to;
	v = chain_end(p, h->g->addr_from, v, addressed);
	Value *x = &p->values.data[v];
	if (x->res == VR_ARENA)
		return LLVMBuildAdd(h->g->b, h->base, cg_i64(h->g, x->offset), "");
	if (x->res != VR_ALIAS)
		die("value %s has no device storage", ir_value_name(p, v));
	LLVMValueRef a = cg_addr(h, x->alias_of);
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

void cg_call(Host *h, LLVMTypeRef t, LLVMValueRef f, LLVMValueRef *args, int n)
{
	if (h->device)
		die("a runtime call inside a fused loop");
	LLVMBuildCall2(h->g->b, t, f, args, (unsigned)n, "");
}

void cg_dev_kernel(Host *h, KDesc *d, LLVMValueRef *words);
void cg_dev_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes);

void cg_launch(Host *h, KDesc *d, LLVMValueRef *words, int nwords)
{
	Cg *g = h->g;
	d->nargs = nwords;
	if (h->device) {
		cg_dev_kernel(h, d, words);
		return;
	}
	int id = cg_kernel_id(g, d);
	/* threads on the GPU; items on the CPU (a block each on the SIMT emulator) */
	int64_t n = cg_kernel_size(g, d) * (g->cuda ? d->lanes : 1);
	cg_cost_kernel(h, id, n, (int)d->kind == K_LOOP);
	for (int i = 0; i < nwords; i++) {
		LLVMValueRef at = cg_i64(g, i);
		LLVMBuildStore(g->b, words[i], LLVMBuildGEP2(g->b, g->i64, h->argbuf, &at, 1, ""));
	}
	LLVMValueRef args[5] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)id, 0), cg_i64(g, n),
	                        LLVMConstInt(g->i32, (unsigned long long)nwords, 0), h->argbuf};
	cg_call(h, h->t_launch, h->f_launch, args, 5);
}

/* the plan computed `from` in the storage of `to`, or of its slice [index]
 * (stream_pass coalescing), so copying it there is nothing to do */
bool cg_coalesced(Program *p, int from, int to, int index)
{
	Value *v = &p->values.data[from];
	return v->res == VR_ALIAS && v->alias_of == to && v->alias_index == index && (!v->def || v->def->kind != OP_SLICE);
}

void cg_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes)
{
	if (h->device) {
		cg_dev_copy(h, dst, src, bytes);
		return;
	}
	LLVMValueRef args[4] = {h->ctx, dst, src, cg_i64(h->g, bytes)};
	cg_call(h, h->t_copy, h->f_copy, args, 4);
	cg_cost_copy(h, bytes, false);
}

LLVMValueRef cg_i64_table(Cg *g, const char *name, const int64_t *v, int64_t n)
{
	LLVMValueRef *c = ar_alloc(sizeof *c * (size_t)n);
	for (int64_t i = 0; i < n; i++)
		c[i] = cg_i64(g, v[i]);
	LLVMValueRef table = LLVMAddGlobal(g->mod, LLVMArrayType(g->i64, (unsigned)n), name);
	LLVMSetInitializer(table, LLVMConstArray(g->i64, c, (unsigned)n));
	LLVMSetGlobalConstant(table, 1);
	LLVMSetLinkage(table, LLVMInternalLinkage);
	return table;
}

KDesc cg_kdesc(Op *op)
{
	KDesc d;
	memset(&d, 0, sizeof d); /* descriptions are compared byte for byte */
	d.kind = op->kind;
	d.to = op->to;
	d.attr = op->attr;
	return d;
}

/* An op that becomes one kernel over the arena; a reduction given `into`
 * adds its result there instead of storing it (an absorbed acc). */
void cg_lower_kernel(Host *h, Op *op, LLVMValueRef into)
{
	Program *p = h->g->p;
	KDesc d = cg_kdesc(op);
	LLVMValueRef words[8];
	int nw = 0;
	d.nin = op->nin;
	d.out = ir_vtype(p, op->out);
	d.accumulate = into != NULL;
	words[nw++] = into ? into : cg_addr(h, op->out);
	/* constants are operands of elementwise ops only, and those are fused kernels */
	for (int j = 0; j < op->nin; j++) {
		d.in[j] = ir_vtype(p, op->in[j]);
		words[nw++] = cg_addr(h, op->in[j]);
	}
	d.pitch[0] = op->nin ? p->values.data[op->in[0]].pitch : 0;
	d.pitch[1] = op->out >= 0 ? p->values.data[op->out].pitch : 0;
	if (!h->device && cg_reduce_parts(h->g, &d) > 1) {
		/* the parts, then their totals (reduce.c, body_reduce) */
		for (d.stage = 1; d.stage <= 2; d.stage++)
			cg_launch(h, &d, words, nw);
		return;
	}
	cg_launch(h, &d, words, nw);
}


/* whether the memory plan gave op's result no storage: the acc right after it must absorb it */
static bool planned_into(Program *p, const Op *op)
{
	return op->out >= 0 && p->values.data[op->out].alias_index == IR_ACC_INTO;
}

/* The acc / acc_slice later in b that is the only use of the GEMM op b[i]
 * makes: when nothing in between touches its variable, the GEMM adds into
 * the variable itself (beta = 1), saving the product's round trip through
 * memory and a kernel. Returns the acc's position, or -1. */
int cg_absorbed_acc(Host *h, Block *b, int i, int to)
{
	Program *p = h->g->p;
	Op *op = b->ops[i];
	if (h->uses[op->out] != 1)
		return -1;
	int j = i + 1;
	while (j < to && !((b->ops[j]->kind == OP_ACC || b->ops[j]->kind == OP_ACC_SLICE) && b->ops[j]->in[b->ops[j]->nin - 1] == op->out))
		j++;
	if (j == to || (b->ops[j]->kind == OP_ACC_SLICE && !h->index[b->ops[j]->in[1]]) || !ir_may_absorb(p, b->ops[j]))
		return -1;
	int64_t lo, hi, a, z;
	cg_extent(h->g, b->ops[j]->in[0], &lo, &hi);
	for (int k = i + 1; k < j; k++) {
		Op *x = b->ops[k];
		if (ir_is_loop(x))
			return -1;
		for (int q = 0; q < x->nin; q++) {
			Value *v = &p->values.data[x->in[q]];
			if (v->res != VR_ARENA && v->res != VR_ALIAS)
				continue;
			cg_extent(h->g, x->in[q], &a, &z);
			if (a < hi && lo < z)
				return -1;
		}
	}
	return j;
}

/* where an acc / acc_slice adds to */
LLVMValueRef cg_acc_target(Host *h, Op *acc)
{
	Program *p = h->g->p;
	LLVMValueRef dst = cg_addr(h, acc->in[0]);
	if (acc->kind == OP_ACC_SLICE)
		dst = LLVMBuildAdd(h->g->b, dst, LLVMBuildMul(h->g->b, h->index[acc->in[1]], cg_i64(h->g, ir_bytes(p, ir_vtype(p, acc->in[2]))), ""), "");
	return dst;
}

/* the host code of each op, by its family */
typedef bool HostFn(Host *h, Op *op);
static HostFn *const family_host[OP__COUNT] = {
#define X(name, text, arity, flags, shape, adjoint, form, low, attr, cost, family) [OP_##name] = cg_host_##family,
#include "../ir/ops.def"
#undef X
};

static void lower_op(Host *h, Op *op)
{
	if (!family_host[op->kind](h, op))
		cg_lower_kernel(h, op, NULL);
}


bool cg_in_arena(const Program *p, int v)
{
	Residence r = p->values.data[v].res;
	return r == VR_ARENA || r == VR_ALIAS;
}

bool cg_operand_in_arena(const Program *p, int v)
{
	const Value *x = &p->values.data[v];
	return cg_in_arena(p, v) && !(x->def && x->def->kind == OP_CONST);
}

bool cg_view_here(Host *h, const Op *op)
{
	return h->g->p->values.data[op->out].res == VR_ALIAS &&
	       (op->kind == OP_RESHAPE || (op->kind == OP_SLICE && h->index[op->in[1]]));
}

/* The arena bytes a value's storage may touch: its root's whole extent. */
void cg_extent(Cg *g, int v, int64_t *lo, int64_t *hi)
{
	Program *p = g->p;
	if (v == g->moved_from)
		v = g->moved_to;
	v = chain_end(p, g->root, v, not_alias);
	*lo = p->values.data[v].offset;
	*hi = *lo + ir_bytes(p, p->values.data[v].type);
}

/* rt_phase: where dp_step has got to (--trace) */
static void phase_mark(Host *h, int phase)
{
	LLVMValueRef args[2] = {h->ctx, LLVMConstInt(h->g->i32, (unsigned long long)phase, 0)};
	cg_call(h, h->t_phase, h->f_phase, args, 2);
}

/* the first position after i that an epilogue took (held[0..nheld)), else to */
static int held_after(const int *held, int nheld, int i, int to)
{
	for (int k = 0; k < nheld; k++)
		if (held[k] > i && held[k] < to)
			to = held[k];
	return to;
}

static void lower_ops(Host *h, Block *b, int from, int to)
{
	Vec(Op *) absorbed = {0};
	/* the positions of elementwise ops made by a GEMM's epilogue (cg_gemm_epilogue): skipped, their
	 * recomputed FLOPs counted */
	IntVec held = {0};
	bool top = b == &h->g->p->body; /* recomputed ops in loop bodies: rt_revolve counts them */
	for (int i = from; i < to; i++) {
		Op *op = b->ops[i];
		h->op = op;
		/* dp_step's adjoint begins (a fused run may start a little before) */
		if (top && h->step && i >= h->g->p->nforward && !h->g->backward_marked) {
			phase_mark(h, RT_PHASE_BACKWARD);
			h->g->backward_marked = true;
		}
		int first = i;
		/* dp_forward computes the loss only: nothing is offloaded for an adjoint */
		bool skip = !h->step && (op->kind == OP_OFFLOAD || op->kind == OP_SETTLE);
		for (int k = 0; k < absorbed.len; k++)
			skip |= absorbed.data[k] == op;
		bool made = false;
		for (int k = 0; k < held.len; k++)
			made |= held.data[k] == i;
		if (made && top && op->recomputed) {
			LLVMValueRef args[3] = {h->ctx, LLVMConstInt(h->g->i32, RT_COUNT_FLOPS, 0), cg_i64(h->g, ir_op_flops(h->g->p, op))};
			cg_call(h, h->t_count, h->f_count, args, 3);
		}
		if (skip || made)
			continue;
		int64_t m, n;
		int at[CG_EPILOGUE_OPS], nat;
		int j = ir_adds_into(op) ? cg_absorbed_acc(h, b, i, to) : -1;
		if (planned_into(h->g->p, op) && j < 0)
			die("codegen: %s was planned added into its acc, which cannot absorb it", ir_value_name(h->g->p, op->out));
		if (j >= 0) {
			LLVMValueRef dst = cg_acc_target(h, b->ops[j]);
			if (op->kind == OP_MATMUL && !ir_small_matmul(h->g->p, op))
				cg_gemm(h, op, dst, 1);
			else if (ir_leading_sum(h->g->p, op, &m, &n))
				cg_leading_sum(h, op, dst, 1);
			else
				cg_lower_kernel(h, op, dst);
			vec_push(&absorbed, b->ops[j]);
		} else if ((op->kind == OP_ADD || op->kind == OP_LAYERNORM_GRAD) &&
		           cg_norm_add(h, b, i, held_after(held.data, held.len, i, to), at, &nat)) {
			for (int k = 0; k < nat; k++)
				vec_push(&held, at[k]);
		} else if (ir_ops[op->kind].flags & OPF_EW) {
			i += cg_lower_fused(h, b, i, held_after(held.data, held.len, i, to)) - 1;
		} else if ((op->kind == OP_MATMUL && cg_gemm_epilogue(h, b, i, to, at, &nat)) ||
		           (op->kind == OP_SUM_TO && cg_gemm_bgrad(h, b, i, to, at, &nat))) {
			for (int k = 0; k < nat; k++)
				vec_push(&held, at[k]);
		} else if (op->kind == OP_ATTENTION && i + 1 < to && ir_attn_lse_fused(b, i + 1)) {
			cg_attention_lse(h, b, i++); /* the rows' log-sum-exp as it goes */
		} else {
			lower_op(h, op);
		}
		/* straight-line ops the adjoint computes again (ckpt_graph_fit): counted as the plan counts them */
		int64_t again = 0;
		for (int j = first; top && j <= i; j++)
			again += b->ops[j]->recomputed ? ir_op_flops(h->g->p, b->ops[j]) : 0;
		if (again) {
			LLVMValueRef args[3] = {h->ctx, LLVMConstInt(h->g->i32, RT_COUNT_FLOPS, 0), cg_i64(h->g, again)};
			cg_call(h, h->t_count, h->f_count, args, 3);
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
void cg_lower_block(Host *h, Block *b, int from, int to)
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
			/* a product planned added into the acc after it stays with that acc */
			if (j < to && planned_into(h->g->p, b->ops[j - 1]))
				j++;
			lower_part(h, b, i, j);
		}
		i = j;
	}
}

/* Starts function fn(ctx, ...): its entry block, the argument buffer, the arena base. */
void cg_begin(Host *h, LLVMValueRef fn)
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
	h.times = h.step;
	h.uses = g->uses;
	LLVMTypeRef vd = LLVMVoidTypeInContext(g->ctx);
	LLVMTypeRef pl[] = {g->i8p, g->i32, g->i64, g->i32, g->i64p};
	h.f_launch = cg_declare(g, "rt_launch", vd, pl, 5, &h.t_launch);
	LLVMTypeRef pg[] = {g->i8p, g->i32, g->i32, g->i32, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64,
	                    g->i64, g->i64, g->i64, g->i64, g->f64};
	h.f_gemm = cg_declare(g, "rt_gemm", vd, pg, 18, &h.t_gemm);
	LLVMTypeRef pc[] = {g->i8p, g->i64, g->i64, g->i64};
	h.f_copy = cg_declare(g, "rt_copy", vd, pc, 4, &h.t_copy);
	LLVMTypeRef pz[] = {g->i8p, g->i64, g->i64};
	h.f_zero = cg_declare(g, "rt_zero", vd, pz, 3, &h.t_zero);
	LLVMTypeRef pn[] = {g->i8p, g->i32, g->i64};
	h.f_count = cg_declare(g, "rt_count", vd, pn, 3, &h.t_count);
	LLVMTypeRef pp[] = {g->i8p, g->i32};
	h.f_phase = cg_declare(g, "rt_phase", vd, pp, 2, &h.t_phase);
	h.f_base = cg_declare(g, "rt_base", g->i64, &g->i8p, 1, &h.t_base);
	h.f_key = cg_declare(g, "rt_key", g->i64, &g->i8p, 1, &h.t_key);
	h.f_on = cg_declare(g, "rt_training", g->i64, &g->i8p, 1, &h.t_on);
	LLVMTypeRef pr[] = {g->i8p, g->i64, g->i64, g->i64, g->i64, g->i32, g->i64, g->i64, g->i64, g->i8p,
	                    g->i8p, g->i8p, g->i8p, g->i8p, g->i8p, g->i32, g->i64, g->i8p, g->i64};
	h.f_revolve = cg_declare(g, "rt_revolve", vd, pr, 19, &h.t_revolve);
	LLVMTypeRef ps[] = {g->i8p, g->i32, g->i64, g->i64, g->i64};
	h.f_snap_copy = cg_declare(g, "rt_snap_copy", vd, ps, 5, &h.t_snap_copy);

	LLVMTypeRef pf[] = {g->i8p, g->i64p, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i64, g->i32};
	h.f_fetch = cg_declare(g, "rt_fetch", vd, pf, 10, &h.t_fetch);
	LLVMTypeRef pw[] = {g->i8p, g->i64p, g->i64, g->i64};
	h.f_wait = cg_declare(g, "rt_wait", vd, pw, 4, &h.t_wait);
	LLVMTypeRef pu[] = {g->i8p, g->i32, g->i64, g->i64, g->i64, g->i64};
	h.f_update = cg_declare(g, "rt_update", vd, pu, 6, &h.t_update);
	LLVMTypeRef pi[] = {g->i8p, g->i32, g->i64, g->i64, g->i64};
	h.f_grad_in = cg_declare(g, "rt_grad_in", vd, pi, 5, &h.t_grad_in);
	LLVMTypeRef pa[] = {g->i8p, g->i32, g->i64, g->i64};
	h.f_allreduce = cg_declare(g, "rt_allreduce", vd, pa, 4, &h.t_allreduce);
	LLVMTypeRef pk[] = {g->i8p, g->i64p, g->i32, g->i64, g->i64, g->i64};
	h.f_act_copy = cg_declare(g, "rt_act_copy", vd, pk, 6, &h.t_act_copy);
	LLVMTypeRef pq[] = {g->i8p, g->i64p};
	h.f_act_wait = cg_declare(g, "rt_act_wait", vd, pq, 2, &h.t_act_wait);
	LLVMTypeRef pe[] = {g->i8p, g->i64p, g->i64};
	h.f_reset = cg_declare(g, "rt_stream_reset", vd, pe, 3, &h.t_reset);

	LLVMTypeRef ft = LLVMFunctionType(vd, &g->i8p, 1, 0);
	cg_begin(&h, LLVMAddFunction(g->mod, name, ft));
	if (g->slot_words) {
		/* each call starts from empty slots: what the host pool holds may have changed since */
		LLVMValueRef args[3] = {h.ctx, LLVMBuildBitCast(g->b, g->slot_table, g->i64p, ""), cg_i64(g, g->slot_words)};
		cg_call(&h, h.t_reset, h.f_reset, args, 3);
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
		cg_launch(&h, &d, &at, 1);
	}
	if (h.step)
		phase_mark(&h, RT_PHASE_FORWARD);
	cg_lower_block(&h, &g->p->body, 0, nops);
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
			counts[RT_COUNT_RECOMPUTED] += times * rev_op_cost(op);
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

/* Which inputs the loss computes from (data) and which it reads only as its target (labels): from the loss
 * back through the forward program, a loss op's first operand and everything else an op reads carry the
 * data mark, mse's and cross_entropy's second the target mark; a loop's results pass their marks to what
 * makes them. Reports, which the loss does not read, mark nothing. mark[v]: bit 1 data, bit 2 target. */
static bool mark_block(Program *p, Block *b, int nops, char *mark)
{
	bool changed = false;
	for (int i = nops - 1; i >= 0; i--) {
		Op *op = b->ops[i];
		if (op->kind == OP_LOOP) {
			for (int k = 0; k < op->ncarry; k++) {
				char m = (char)(mark[op->cout[k]] | mark[op->carg[k]]);
				for (int s = 0; s < 3; s++) {
					int v = s == 0 ? op->cyield[k] : s == 1 ? op->in[k] : op->carg[k];
					if ((mark[v] | m) != mark[v])
						mark[v] |= m, changed = true;
				}
			}
			changed |= mark_block(p, &op->body, op->body.len, mark);
			continue;
		}
		if (op->out < 0 || !mark[op->out])
			continue;
		bool loss = op->kind == OP_MSE || op->kind == OP_XENT;
		for (int k = 0; k < op->nin; k++) {
			char m = loss ? (k == 0 ? 1 : 2) : mark[op->out];
			if ((mark[op->in[k]] | m) != mark[op->in[k]])
				mark[op->in[k]] |= m, changed = true;
		}
	}
	return changed;
}

static const char *input_role(Program *p, const char *mark, int v)
{
	return mark[v] & 1 ? "data" : mark[v] & 2 ? "labels" : "other";
}

static const char *model_desc(Cg *g, const CgOptions *o, const int *sgd, const int *adam, int fold, int refresh)
{
	Program *p = g->p;
	Text t = {0};
	if (p->params.len > RT_MAX_PARAMS)
		diag_error(p->params.data[RT_MAX_PARAMS].loc, "a model may have at most %d parameters and buffers (the runtime's "
		           "table); this is the %dth", RT_MAX_PARAMS, RT_MAX_PARAMS + 1);
	if (p->inputs.len > RT_MAX_INPUTS)
		diag_error(p->inputs.data[RT_MAX_INPUTS].loc, "a model may have at most %d inputs; this is the %dth", RT_MAX_INPUTS,
		           RT_MAX_INPUTS + 1);
	put(&t, ar_printf("dpc 1\nmodel %s\nprecision %s%s\narena %lld\nloss %lld %s\n", o->model_name, ir_dt_name(p->real),
	                  p->mixed ? "-mixed" : "",
	                  (long long)p->arena_bytes, (long long)p->values.data[p->loss].offset, ir_dt_name(ir_vtype(p, p->loss).dt)));
	for (int i = 0; i < p->reports.len; i++) {
		Value *v = &p->values.data[p->reports.data[i].value];
		put(&t, ar_printf("report %s %lld %s\n", p->reports.data[i].name, (long long)v->offset, ir_dt_name(v->type.dt)));
	}
	static const char *inits[] = {"zeros", "ones", "normal", "uniform", "load"};
	if (p->weights)
		put(&t, ar_printf("weights %s\n", p->weights));
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		put(&t, ar_printf("param %s %s", q->name, ir_dt_name(q->type.dt)));
		put_type(&t, q->type);
		put(&t, ar_printf(" %lld %lld %d %s %.17g %.17g\n", q->streamed ? -1LL : (long long)p->values.data[q->value].offset,
		                  q->streamed || q->buffer ? -1LL : (long long)p->values.data[q->grad].offset, q->stacked, inits[q->init], q->a, q->b));
		if (q->buffer)
			put(&t, ar_printf("buffer %s\n", q->name));
		if (q->nodecay)
			put(&t, ar_printf("nodecay %s\n", q->name));
		if (q->saved)
			put(&t, ar_printf("saved %s %s\n", q->name, q->saved));
	}
	for (int i = 0; i < p->updates.len; i++)
		put(&t, ar_printf("update %s %lld\n", p->updates.data[i].name, (long long)p->values.data[p->updates.data[i].value].offset));
	char *mark = ar_alloc((size_t)p->values.len + 1);
	memset(mark, 0, (size_t)p->values.len + 1);
	mark[p->loss] = 1;
	while (mark_block(p, &p->body, p->nforward, mark))
		;
	for (int i = 0; i < p->inputs.len; i++) {
		Input *in = &p->inputs.data[i];
		put(&t, ar_printf("input %s %s", in->name, ir_dt_name(in->type.dt)));
		put_type(&t, in->type);
		put(&t, ar_printf(" %lld %d %d %d\n", (long long)p->values.data[in->value].offset, in->classes, in->has_ignore, in->ignore));
		if (embeds(p, &p->body, in->value))
			put(&t, ar_printf("ids %s\n", in->name));
		put(&t, ar_printf("role %s %s\n", in->name, input_role(p, mark, in->value)));
	}
	put(&t, ar_printf("optimizer %s\n", p->optimizer == OPT_ADAM ? "adam" : "sgd"));
	if (p->ranks > 1 && p->optimizer == OPT_ADAM)
		put(&t, ar_printf("ranks %d\n", p->ranks));
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->opt_m >= 0 && !q->streamed)
			put(&t, ar_printf("state %s %lld %lld\n", q->name, (long long)p->values.data[q->opt_m].offset,
			                  (long long)p->values.data[q->opt_v].offset));
	}
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->master >= 0 && !q->streamed)
			put(&t, ar_printf("master %s %lld %lld\n", q->name, (long long)p->values.data[q->master].offset,
			                  (long long)p->values.data[q->gsum].offset));
	}
	put(&t, ar_printf("host %lld\n", (long long)p->host_bytes));
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		/* in the pool: the value, adam's moments, the master copy, the gradients come down to; in the arena:
		 * the slots, the gradient's unit */
		int64_t off[4] = {-1, -1, -1, -1};
		int vs[4] = {q->opt_m, q->opt_v, q->master, q->hgrad};
		for (int k = 0; k < 4; k++)
			if (vs[k] >= 0)
				off[k] = p->values.data[vs[k]].offset;
		if (q->streamed)
			put(&t, ar_printf("stream %s %lld %lld %lld %lld %lld %lld %lld\n", q->name, (long long)p->values.data[q->value].offset,
			                  (long long)off[0], (long long)off[1], (long long)off[2], (long long)p->values.data[q->slot].offset,
			                  (long long)p->values.data[q->grad].offset, (long long)off[3]));
	}
	put(&t, ar_printf("transfers slots %d ahead %d forward %lld %lld step %lld %lld numel %lld grads %lld\n", p->nslots,
	                  p->ahead, (long long)p->h2d_bytes[0], (long long)p->d2h_bytes[0], (long long)p->h2d_bytes[1],
	                  (long long)p->d2h_bytes[1], (long long)p->stream_numel, (long long)p->stream_grads));
	for (int dt = 0; dt <= DT_F64; dt++)
		if (sgd[dt] >= 0)
			put(&t, ar_printf("kernel sgd %s %d\nkernel adam %s %d\n", ir_dt_name((DType)dt), sgd[dt], ir_dt_name((DType)dt), adam[dt]));
	if (fold >= 0)
		put(&t, ar_printf("kernel fold f32 %d\nkernel refresh f32 %d\n", fold, refresh));
	int64_t *ns = ar_alloc(sizeof *ns * (size_t)(g->kernels.len + 1));
	memset(ns, 0, sizeof *ns * (size_t)(g->kernels.len + 1));
	if (g->cuda)
		cg_cost_kernels_ns(g, o->gpu, ns);
	for (int i = 0; i < g->kernels.len; i++) {
		put(&t, ar_printf("kname %d %s\n", i, cg_kernel_label(&g->kernels.data[i])));
		if (ns[i] > 0)
			put(&t, ar_printf("kpred %d %lld\n", i, (long long)ns[i]));
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
	if (p->device_mem)
		put(&t, ar_printf("budget %lld\n", (long long)p->device_mem));
	if (o->build)
		put(&t, o->build);
	int64_t counts[2] = {0, 0};
	count_steps(&p->body, 1, counts);
	put(&t, ar_printf("steps forward %lld recomputed %lld\n", (long long)counts[RT_COUNT_FORWARD],
	                  (long long)counts[RT_COUNT_RECOMPUTED]));
	put(&t, ar_printf("flops forward %lld\nend\n", (long long)ir_block_flops(p, &p->body, 0, p->nforward)));
	vec_push(&t, 0);
	return t.data;
}

void cg_string_global(Cg *g, const char *name, const char *text)
{
	LLVMValueRef s = LLVMConstStringInContext(g->ctx, text, (unsigned)strlen(text), 0);
	LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(s), name);
	LLVMSetInitializer(v, s);
	LLVMSetGlobalConstant(v, 1);
}

/* dp_kernel_smem: each kernel's dynamic shared memory in bytes, by id (the
 * tensor-core attention's past 48 KiB: cg_attn_smem; 0 for the rest, and
 * for every kernel of the CPU target) */
static void kernel_smem_table(Cg *g)
{
	int n = g->kernels.len;
	LLVMValueRef *v = ar_alloc(sizeof *v * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		KDesc *d = &g->kernels.data[i];
		bool mma = g->cuda && (int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_HEADS && cg_attn_mma(g, d);
		v[i] = LLVMConstInt(g->i32, mma ? (unsigned long long)cg_attn_smem(d) : 0, 0);
	}
	v[n] = LLVMConstInt(g->i32, 0, 0); /* one entry at least */
	LLVMValueRef t = LLVMAddGlobal(g->mod, LLVMArrayType(g->i32, (unsigned)n + 1), "dp_kernel_smem");
	LLVMSetInitializer(t, LLVMConstArray(g->i32, v, (unsigned)n + 1));
	LLVMSetGlobalConstant(t, 1);
}

static void phase(const CgOptions *o, const char *what)
{
	if (o->phase)
		o->phase(what);
}

/* the cost model's prices of g's launches on o->gpu (--emit=kernels, --schedule-json; table: each launch's) */
static void report(Cg *g, const CgOptions *o, const char *ptx, bool json, bool table, FILE *out)
{
	const CgGpu *gpu = cg_gpu(o->gpu ? o->gpu : "h100");
	if (!gpu)
		die("unknown GPU %s", o->gpu);
	cg_cost_report(g, gpu, o->host_bw > 0 ? o->host_bw : CG_HOST_BW, ptx, json, table, o->verbose, out);
}

/* what build makes of the kernels: HERE, the CUDA target's PTX, and the CPU target's kernels in one unit,
 * the host module (--emit=llvm and obj); APART, their units, compiled later beside the host module
 * (cg_emit_object); NO_PTX, the CUDA target's launches priced without their code (--emit=schedule) */
typedef enum { HERE, APART, NO_PTX } Build;

static Cg *build(Program *p, const CgOptions *o, Build how)
{
	bool apart = how == APART;
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
	g->reference = o->reference;
	g->verbose = o->verbose;
	g->uses = ir_count_uses(p);
	g->root = ar_alloc(sizeof(int) * (size_t)(p->values.len + 1));
	g->addr_from = ar_alloc(sizeof(int) * (size_t)(p->values.len + 1));
	for (int v = 0; v < p->values.len; v++)
		g->root[v] = g->addr_from[v] = -1;
	g->moved_from = -1;
	g->cost = o->cost || o->target == CG_CUDA; /* the executable's --profile prints the predictions */
	g->cpu_splits = o->cpu_splits;
	g->simt = o->simt && !g->cuda;
	g->threads = o->threads > 0 ? o->threads : 1;
	g->one_unit = !apart && o->target == CG_CPU;
	g->generic_cpu = o->generic_cpu;
	g->scalar_rows = o->scalar_rows;

	/* the optimizers' kernels, one pair per element type of trained parameters, and p->real's always; under
	 * bf16-mixed, f32's that also write the bf16 compute copy, and the gradient sum's and the copy's */
	int sgd[DT_F64 + 1], adam[DT_F64 + 1], fold = -1, refresh = -1;
	for (int dt = 0; dt <= DT_F64; dt++) {
		bool used = p->mixed ? dt == DT_F32 : dt == (int)p->real;
		for (int i = 0; i < p->params.len && !p->mixed; i++)
			used |= !p->params.data[i].buffer && p->params.data[i].type.dt == (DType)dt;
		sgd[dt] = adam[dt] = -1;
		if (!used)
			continue;
		KDesc opt;
		memset(&opt, 0, sizeof opt);
		opt.out.dt = (DType)dt;
		opt.mode = p->mixed;
		opt.kind = (OpKind)K_SGD;
		opt.nargs = p->mixed ? 5 : 4;
		sgd[dt] = cg_kernel_id(g, &opt);
		opt.kind = (OpKind)K_ADAM;
		opt.nargs = p->mixed ? 12 : 11;
		adam[dt] = cg_kernel_id(g, &opt);
	}
	if (p->mixed) {
		KDesc k;
		memset(&k, 0, sizeof k);
		k.out.dt = DT_F32;
		k.kind = (OpKind)K_FOLD;
		k.nargs = 3;
		fold = cg_kernel_id(g, &k);
		k.kind = (OpKind)K_REFRESH;
		k.nargs = 2;
		refresh = cg_kernel_id(g, &k);
	}

	g->slot_at = ar_alloc(sizeof(int64_t) * (size_t)(p->values.len + 1));
	for (int v = 0; v < p->values.len; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_SLOT) {
			g->slot_at[v] = g->slot_words;
			g->slot_words += 2 * p->values.data[v].type.dim[0];
		}
	/* one word per offload or fetch: its copy's event */
	g->copy_at = g->slot_words;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if ((op->kind == OP_OFFLOAD || op->kind == OP_FETCH) && g->copy_at + op->index + 1 > g->slot_words)
			g->slot_words = g->copy_at + op->index + 1;
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
	if (o->verbose && o->target == CG_CUDA)
		cg_epilogue_note(g);
	/* the CPU target runs x86 kernels; the CUDA target embeds PTX and has an empty table. Apart, the PTX is
	 * made beside the host module's code (cg_emit_object) */
	const char *ptx = "";
	if (o->target == CG_CUDA && how != NO_PTX) {
		cg_ptx_units(g);
		if (!apart)
			ptx = cg_units_compile(g, NULL, NULL, NULL);
	}
	if (!apart || o->target != CG_CUDA)
		cg_string_global(g, "dp_ptx", ptx);
	kernel_smem_table(g);
	int units = g->nunits ? g->nunits : cg_units(g);
	if (o->target == CG_CUDA && how != NO_PTX)
		phase(o, ar_printf("codegen: %d kernels as %s in %d unit%s", g->kernels.len, apart ? "NVPTX IR" : "PTX", units,
		                   units > 1 ? "s" : ""));
	cg_string_global(g, "dp_model_desc", model_desc(g, o, sgd, adam, fold, refresh));
	if (o->kernels_json && o->target == CG_CUDA && !apart)
		report(g, o, ptx, true, true, o->kernels_json);
	cg_cpu_kernels(g);
	if (o->target == CG_CPU)
		phase(o, ar_printf("codegen: %d kernels for x86 in %d unit%s", g->kernels.len, g->nunits, g->nunits > 1 ? "s" : ""));

	char *err = NULL;
	if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &err))
		die("generated LLVM module is invalid: %s", err);
	LLVMDisposeMessage(err);
	return g;
}

/* The CPU the kernels and the host code are compiled for: this one (its
 * vector width, AVX2 or AVX-512 where it has them), or with generic any
 * x86-64. The bits of results are the same either way: no operation is
 * contracted (fused multiply-add) in either. */
LLVMTargetMachineRef cg_host_machine(bool generic)
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
	char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, generic ? "x86-64" : cpu, generic ? "" : features,
	                                                  cg_host_level() ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelNone,
	                                                  LLVMRelocPIC, LLVMCodeModelDefault);
	LLVMDisposeMessage(triple);
	LLVMDisposeMessage(cpu);
	LLVMDisposeMessage(features);
	return tm;
}

void cg_target_module(LLVMModuleRef m, LLVMTargetMachineRef tm)
{
	char *triple = LLVMGetTargetMachineTriple(tm);
	LLVMSetTarget(m, triple);
	LLVMDisposeMessage(triple);
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(m, td); /* copies it */
	LLVMDisposeTargetData(td);
}

/* Everything build made in LLVM: the builder, the module, the context. */
static void dispose(Cg *g)
{
	LLVMDisposeBuilder(g->b);
	LLVMDisposeModule(g->mod);
	LLVMContextDispose(g->ctx);
}

/* The optimizer's level for CPU code: 2, or DPC_HOST_OPT's 0 to 3 (testing: make test-sanitize compiles at 0, where
 * LLVM's optimizer, which no sanitizer instruments, took 90% of each compile under the sanitizers' allocator). The
 * bits of results are the same at any level: no operation is contracted, and no level reorders floating point. */
unsigned cg_host_level(void)
{
	const char *e = getenv("DPC_HOST_OPT");
	if (!e || !*e)
		return 2;
	if (e[1] || e[0] < '0' || e[0] > '3')
		fatal("DPC_HOST_OPT takes 0, 1, 2 or 3 (the optimizer's level for CPU code, 2 by default; for testing), got '%s'",
		      e);
	return (unsigned)(e[0] - '0');
}

void cg_optimize(LLVMModuleRef m, unsigned level, LLVMTargetMachineRef tm)
{
	LLVMPassManagerBuilderRef pmb = LLVMPassManagerBuilderCreate();
	LLVMPassManagerBuilderSetOptLevel(pmb, level);
	LLVMPassManagerRef pm = LLVMCreatePassManager();
	/* the target's costs, so that the vectorizers know its vector registers */
	if (tm)
		LLVMAddAnalysisPasses(tm, pm);
	LLVMPassManagerBuilderPopulateModulePassManager(pmb, pm);
	LLVMRunPassManager(pm, m);
	LLVMDisposePassManager(pm);
	LLVMPassManagerBuilderDispose(pmb);
}

void cg_emit_ptx(Program *p, const CgOptions *o, FILE *out)
{
	CgOptions cuda = *o;
	cuda.target = CG_CUDA;
	Cg *g = build(p, &cuda, HERE);
	LLVMValueRef v = LLVMGetNamedGlobal(g->mod, "dp_ptx");
	size_t n;
	const char *s = LLVMGetAsString(LLVMGetInitializer(v), &n);
	fwrite(s, 1, strlen(s) < n ? strlen(s) : n, out); /* without the terminating NUL */
	dispose(g);
}

void cg_emit_kernels(Program *p, const CgOptions *o, FILE *out, bool json)
{
	CgOptions cuda = *o;
	cuda.target = CG_CUDA;
	cuda.cost = true;
	cuda.kernels_json = json ? out : NULL;
	Cg *g = build(p, &cuda, HERE);
	if (!json) {
		LLVMValueRef v = LLVMGetNamedGlobal(g->mod, "dp_ptx");
		size_t n;
		const char *s = LLVMGetAsString(LLVMGetInitializer(v), &n);
		report(g, o, ar_strndup(s, n), false, true, out);
	}
	dispose(g);
}

void cg_emit_step(Program *p, const CgOptions *o, FILE *out)
{
	CgOptions cuda = *o;
	cuda.target = CG_CUDA;
	cuda.cost = true;
	cuda.kernels_json = NULL;
	cuda.verbose = false;
	Cg *g = build(p, &cuda, NO_PTX);
	report(g, &cuda, NULL, false, false, out);
	dispose(g);
}

void cg_emit_llvm(Program *p, const CgOptions *o, FILE *out)
{
	Cg *g = build(p, o, HERE);
	char *s = LLVMPrintModuleToString(g->mod);
	fputs(s, out);
	LLVMDisposeMessage(s);
	dispose(g);
}

/* the host module's optimizer and object, on whichever thread takes it (cg_units_compile) */
typedef struct {
	Cg *g;
	LLVMTargetMachineRef tm;
	const char *path;
	char *err;
} HostJob;

static void host_job(void *arg)
{
	HostJob *h = arg;
	cg_target_module(h->g->mod, h->tm);
	cg_optimize(h->g->mod, cg_host_level(), h->tm);
	if (LLVMTargetMachineEmitToFile(h->tm, h->g->mod, (char *)h->path, LLVMObjectFile, &h->err) == 0)
		h->err = NULL;
}

/* the CUDA target's PTX as an object of its own, dp_ptx, for the runtime (dprt.h) */
static void ptx_object(LLVMTargetMachineRef tm, const char *ptx, CgObjects *more)
{
	LLVMContextRef ctx = LLVMContextCreate();
	LLVMModuleRef m = LLVMModuleCreateWithNameInContext("dp_ptx", ctx);
	cg_target_module(m, tm);
	LLVMValueRef s = LLVMConstStringInContext(ctx, ptx, (unsigned)strlen(ptx), 0);
	LLVMValueRef v = LLVMAddGlobal(m, LLVMTypeOf(s), "dp_ptx");
	LLVMSetInitializer(v, s);
	LLVMSetGlobalConstant(v, 1);
	char *err = NULL;
	LLVMMemoryBufferRef out;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &err, &out))
		die("the PTX's object: %s", err);
	size_t n = LLVMGetBufferSize(out);
	more->data[more->n] = ar_alloc(n + 1);
	memcpy(more->data[more->n], LLVMGetBufferStart(out), n);
	more->len[more->n++] = n;
	LLVMDisposeMemoryBuffer(out);
	LLVMDisposeModule(m);
	LLVMContextDispose(ctx);
}

void cg_emit_object(Program *p, const CgOptions *o, const char *path, CgObjects *more)
{
	Cg *g = build(p, o, more ? APART : HERE);
	LLVMTargetMachineRef tm = cg_host_machine(o->generic_cpu);
	HostJob h = {g, tm, path, NULL};
	int units = g->nunits, kernels = g->kernels.len;
	/* the kernels' units beside the host module, where any is apart from it */
	const char *ptx = NULL;
	if (g->nunits > (g->units_ptx ? 0 : 1))
		ptx = cg_units_compile(g, host_job, &h, more);
	else
		host_job(&h);
	if (h.err)
		fatal("cannot write %s: %s", path, h.err);
	phase(o, ar_printf("LLVM optimizer and object files: the host module%s, on %d thread%s",
	                   units > 1 || (ptx && units) ? ar_printf(" and %d unit%s of %d kernels", units, units > 1 ? "s" : "", kernels)
	                                               : "",
	                   g->threads, g->threads > 1 ? "s" : ""));
	if (ptx) {
		ptx_object(tm, ptx, more);
		if (o->kernels_json)
			report(g, o, ptx, true, true, o->kernels_json);
	}
	LLVMDisposeTargetMachine(tm);
	dispose(g);
}
