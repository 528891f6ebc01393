/* cg, control: variables (zero, assign, acc, store_slice), loops, binomial
 * schedules (revolve), fused loops, tensor streaming, and the optimizers'
 * kernels (K_SGD, K_ADAM). */
#include <string.h>

#include "../../common/abi.h"
#include "../../common/revolve.h"
#include "cgint.h"

/* the tape of op's row that keeps value w, or -1 */
static int row_tape(Op *op, int w)
{
	for (int i = 0; i < op->body3.len; i++) {
		Op *st = op->body3.ops[i];
		if (st->kind == OP_STORE_SLICE && st->in[1] == op->irow && st->in[2] == w)
			return st->in[0];
	}
	return -1;
}

/* the tape of v's carried value c, whose rows hold the state */
static int carried_tape(Op *v, int c)
{
	int t = row_tape(v, v->carg[c]);
	if (t < 0)
		die("revolve without a tape of its carried value %d", c);
	return t;
}

/* Where snapshot `slot` (an i64) of v's carried value c lives: its row of
 * the snapshots, or with pooled rows beyond those, row ktape - (slot -
 * nsnap + 1) of the value's tape. */
static LLVMValueRef slot_addr(Host *h, Op *v, int c, LLVMValueRef slot)
{
	Cg *g = h->g;
	int64_t bytes = ir_bytes(g->p, ir_vtype(g->p, v->carg[c]));
	LLVMValueRef snap = LLVMBuildAdd(g->b, cg_addr(h, v->snap[c]), LLVMBuildMul(g->b, slot, cg_i64(g, bytes), ""), "");
	if (!v->pool)
		return snap;
	LLVMValueRef row = LLVMBuildSub(g->b, cg_i64(g, v->ktape + v->nsnap - 1), slot, "");
	LLVMValueRef tape = LLVMBuildAdd(g->b, cg_addr(h, carried_tape(v, c)), LLVMBuildMul(g->b, row, cg_i64(g, bytes), ""), "");
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
		k = rev_pool_chain(v->pool, first, len, &tail);
	} else {
		k = rev_sweep_segments(v->trip - rev_op_tail(v), v->nsnap, rev_op_k(v), len);
		for (int64_t i = 0, a = 0; i < k; a += len[i], i++)
			first[i] = a;
	}
	first[k] = INT64_MAX;
	LLVMTypeRef at = LLVMArrayType(g->i64, (unsigned)(k + 1));
	LLVMValueRef table = cg_i64_table(g, "dp_sweep_starts", first, k + 1);
	LLVMValueRef i = LLVMBuildLoad2(g->b, g->i64, next, "");
	LLVMValueRef ix[2] = {cg_i64(g, 0), i};
	LLVMValueRef start = LLVMBuildLoad2(g->b, g->i64, LLVMBuildGEP2(g->b, at, table, ix, 2, ""), "");
	LLVMBasicBlockRef save = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "sweep_save");
	LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "sweep_go");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, start, ""), save, go);
	LLVMPositionBuilderAtEnd(g->b, save);
	for (int c = 0; c < op->ncarry; c++)
		cg_copy(h, slot_addr(h, v, c, i), cg_addr(h, op->carg[c]), ir_bytes(g->p, ir_vtype(g->p, op->carg[c])));
	LLVMBuildStore(g->b, LLVMBuildAdd(g->b, i, cg_i64(g, 1), ""), next);
	LLVMBuildBr(g->b, go);
	LLVMPositionBuilderAtEnd(g->b, go);
}

/* the next state into the carried values, where the plan did not compute it there; with replayed, only those
 * a replay makes (rev_replay_state) */
static void copy_yields(Host *h, Op *op, const int *yields, bool replayed)
{
	Program *p = h->g->p;
	for (int k = 0; k < op->ncarry; k++) {
		if (replayed && !rev_replay_state(op, k))
			continue;
		Value *y = &p->values.data[yields[k]], *x = &p->values.data[op->carg[k]];
		if (cg_coalesced(p, yields[k], op->carg[k], -1) || (y->res == VR_ARENA && x->res == VR_ARENA && y->offset == x->offset))
			continue;
		cg_copy(h, cg_addr(h, op->carg[k]), cg_addr(h, yields[k]), ir_bytes(p, y->type));
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
	int64_t times = h->times;
	h->times *= to - from;
	cg_lower_block(h, &op->body, 0, op->body.len);
	copy_yields(h, op, op->cyield, false);
	h->times = times;
	if (op->counter >= 0 && !h->device) {
		LLVMValueRef args[3] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->counter, 0), cg_i64(g, 1)};
		cg_call(h, h->t_count, h->f_count, args, 3);
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
		cg_copy(h, cg_addr(h, op->carg[k]), cg_addr(h, op->in[k]), ir_bytes(p, ir_vtype(p, op->carg[k])));
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

void cg_begin(Host *h, LLVMValueRef fn);

static LLVMValueRef sub_function(Host *outer, Host *h, const char *name, LLVMTypeRef *params, int n)
{
	Cg *g = outer->g;
	LLVMValueRef fn = LLVMAddFunction(g->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, (unsigned)n, 0));
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	*h = *outer;
	cg_begin(h, fn);
	return fn;
}

static const char *unfusable(Host *h, Op *op);
static KDesc loop_desc(Host *h, Op *op);
static void note_fusion(Host *h, Op *op, const char *why, int kernel);

/* A replayed state's function (Op.replay), dp_replay(ctx, i, row): with row < 0 the state of a taped run's
 * first step, from the first row of its tapes; else step i's next state from the state and row `row`,
 * running of body3 what rev_replay_marks says, each value a row keeps read from it where body3 made it (its
 * storage may be another's before and after). */
static LLVMValueRef replay_function(Host *h, Op *op, int id, LLVMTypeRef *pt)
{
	Cg *g = h->g;
	Program *p = g->p;
	Host r;
	LLVMValueRef fn = sub_function(h, &r, ar_printf("dp_replay%d", id), pt, 3);
	unsigned char *mark = ar_alloc((size_t)op->body3.len + 1);
	if (rev_replay_marks(p, op, mark) < 0)
		die("codegen: a revolve replays a state it cannot");
	r.times = rev_op_replays(op); /* the state's first copies too, about as often */
	LLVMValueRef row = LLVMGetParam(fn, 2);
	LLVMBasicBlockRef first = LLVMAppendBasicBlockInContext(g->ctx, fn, "first");
	LLVMBasicBlockRef step = LLVMAppendBasicBlockInContext(g->ctx, fn, "step");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, row, cg_i64(g, 0), ""), first, step);
	LLVMPositionBuilderAtEnd(g->b, first);
	for (int k = 0; k < op->ncarry; k++)
		if (rev_replay_state(op, k))
			cg_copy(&r, cg_addr(&r, op->carg[k]), cg_addr(&r, row_tape(op, op->carg[k])), ir_bytes(p, ir_vtype(p, op->carg[k])));
	LLVMBuildRetVoid(g->b);
	LLVMPositionBuilderAtEnd(g->b, step);
	r.index[op->ivar] = LLVMGetParam(fn, 1);
	r.index[op->irow] = row;
	vec_push(r.scoped, op->ivar);
	vec_push(r.scoped, op->irow);
	Block run = {0};
	for (int i = 0; i <= op->body3.len; i++) {
		Op *x = i < op->body3.len ? op->body3.ops[i] : NULL;
		if (x && mark[i] == REPLAY_RUN) {
			ir_append(&run, x);
			continue;
		}
		if (run.len)
			cg_lower_block(&r, &run, 0, run.len);
		run.len = 0;
		if (!x || mark[i] != REPLAY_LOAD)
			continue;
		int t = row_tape(op, x->out);
		if (t < 0)
			die("codegen: a replay loads %s, which no row keeps", ir_value_name(p, x->out));
		if (cg_coalesced(p, x->out, t, op->irow))
			continue; /* computed in its row: read there */
		int64_t bytes = ir_bytes(p, ir_vtype(p, x->out));
		LLVMValueRef src = LLVMBuildAdd(g->b, cg_addr(&r, t), LLVMBuildMul(g->b, row, cg_i64(g, bytes), ""), "");
		cg_copy(&r, cg_addr(&r, x->out), src, bytes);
	}
	copy_yields(&r, op, op->cyield3, true);
	LLVMBuildRetVoid(g->b);
	return LLVMBuildBitCast(g->b, fn, g->i8p, "");
}

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
	int64_t times[4];
	cg_cost_revolve(h, op, times);
	LLVMValueRef adv = sub_function(h, &a, ar_printf("dp_advance%d", id), pa, 3);
	a.times = times[0];
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), body = LLVMAppendBasicBlockInContext(g->ctx, adv, "step");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, adv, "done");
	LLVMBuildBr(g->b, body);
	LLVMPositionBuilderAtEnd(g->b, body);
	LLVMValueRef i = LLVMBuildPhi(g->b, g->i64, "i"), from = LLVMGetParam(adv, 1);
	LLVMAddIncoming(i, &from, &pre, 1);
	a.index[op->ivar] = i;
	vec_push(a.scoped, op->ivar);
	cg_lower_block(&a, &op->body, 0, op->body.len);
	copy_yields(&a, op, op->cyield, false);
	LLVMValueRef next = LLVMBuildAdd(g->b, i, cg_i64(g, 1), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMAddIncoming(i, &next, &latch, 1);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, LLVMGetParam(adv, 2), ""), body, done);
	LLVMPositionBuilderAtEnd(g->b, done);
	LLVMBuildRetVoid(g->b);

	LLVMTypeRef pt[] = {g->i8p, g->i64, g->i64};
	LLVMValueRef taped = sub_function(h, &t, ar_printf("dp_taped%d", id), pt, 3);
	t.times = times[1];
	t.index[op->ivar2] = LLVMGetParam(taped, 1);
	vec_push(t.scoped, op->ivar2);
	if (op->ktape) {
		t.index[op->irow] = LLVMGetParam(taped, 2);
		vec_push(t.scoped, op->irow);
	}
	cg_lower_block(&t, &op->body2, 0, op->body2.len);
	LLVMBuildRetVoid(g->b);

	/* with a tape: forward step i into row irow, stepping the state */
	LLVMValueRef tape = LLVMConstNull(g->i8p);
	if (op->ktape) {
		Host w;
		LLVMValueRef fn = sub_function(h, &w, ar_printf("dp_tape%d", id), pt, 3);
		w.times = times[2];
		w.index[op->ivar] = LLVMGetParam(fn, 1);
		w.index[op->irow] = LLVMGetParam(fn, 2);
		vec_push(w.scoped, op->ivar);
		vec_push(w.scoped, op->irow);
		cg_lower_block(&w, &op->body3, 0, op->body3.len);
		copy_yields(&w, op, op->cyield3, false);
		LLVMBuildRetVoid(g->b);
		tape = LLVMBuildBitCast(g->b, fn, g->i8p, "");
	}

	if (op->replay)
		fns[5] = replay_function(h, op, id, pt);

	LLVMTypeRef ps[] = {g->i8p, g->i64, g->i32};
	LLVMValueRef snap = sub_function(h, &s, ar_printf("dp_snapshot%d", id), ps, 3);
	s.times = times[3];
	LLVMValueRef restore = LLVMBuildICmp(g->b, LLVMIntNE, LLVMGetParam(snap, 2), LLVMConstInt(g->i32, 0, 0), "");
	for (int k = 0; k < op->ncarry; k++) {
		int64_t bytes = ir_bytes(p, ir_vtype(p, op->carg[k]));
		LLVMValueRef slot = slot_addr(&s, op, k, LLVMGetParam(snap, 1));
		LLVMValueRef state = cg_addr(&s, op->carg[k]);
		cg_copy(&s, LLVMBuildSelect(g->b, restore, state, slot, ""), LLVMBuildSelect(g->b, restore, slot, state, ""), bytes);
	}
	LLVMBuildRetVoid(g->b);

	LLVMValueRef offload = LLVMConstNull(g->i8p);
	if (op->nhost) {
		Host o;
		LLVMValueRef fn = sub_function(h, &o, ar_printf("dp_offload%d", id), ps, 3);
		o.times = 0; /* host copies: the link's time, counted from the plan's bytes */
		int64_t stage = op->nsnap - op->nhost;
		for (int k = 0; k < op->ncarry; k++) {
			int64_t bytes = ir_bytes(p, ir_vtype(p, op->carg[k]));
			LLVMValueRef host = LLVMBuildAdd(g->b, cg_i64(g, p->values.data[op->hsnap[k]].offset),
			                                 LLVMBuildMul(g->b, LLVMGetParam(fn, 1), cg_i64(g, bytes), ""), "");
			LLVMValueRef args[5] = {o.ctx, LLVMGetParam(fn, 2), LLVMBuildAdd(g->b, cg_addr(&o, op->snap[k]), cg_i64(g, stage * bytes), ""),
			                        host, cg_i64(g, bytes)};
			cg_call(&o, h->t_snap_copy, h->f_snap_copy, args, 5);
		}
		LLVMBuildRetVoid(g->b);
		offload = LLVMBuildBitCast(g->b, fn, g->i8p, "");
	}
	LLVMValueRef all[5] = {LLVMBuildBitCast(g->b, adv, g->i8p, ""), LLVMBuildBitCast(g->b, taped, g->i8p, ""), tape,
	                       LLVMBuildBitCast(g->b, snap, g->i8p, ""), offload};
	memcpy(fns, all, sizeof all);
}

/* A revolve: its schedule's functions, or its fused kernel, and the rt_revolve call */
/* The gradients a fused loop completes layer by layer (its allreduce ops,
 * which a kernel cannot run): each summed whole after it. */
static void fused_allreduce(Host *h, Op *loop)
{
	Cg *g = h->g;
	Block *bs[3] = {&loop->body, &loop->body2, &loop->body3};
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < bs[k]->len; i++) {
			Op *x = bs[k]->ops[i];
			if (x->kind != OP_ALLREDUCE)
				continue;
			LLVMValueRef args[4] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)x->index, 0), cg_addr(h, x->in[0]),
			                        cg_i64(g, ir_numel(ir_vtype(g->p, x->in[0])))};
			cg_call(h, h->t_allreduce, h->f_allreduce, args, 4);
		}
}

static void lower_revolve(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	static int seq;
	int id = seq++;
	/* a fused kernel, when the bodies qualify, runs the schedule's actions; else the runtime calls these */
	const char *why = unfusable(h, op);
	LLVMValueRef fns[6];
	for (int i = 0; i < 6; i++)
		fns[i] = LLVMConstNull(g->i8p);
	LLVMBasicBlockRef resume = LLVMGetInsertBlock(g->b);
	if (why)
		revolve_functions(h, op, id, fns);

	LLVMPositionBuilderAtEnd(g->b, resume);
	for (int k = 0; k < op->ncarry; k++)
		cg_copy(h, cg_addr(h, op->carg[k]), cg_addr(h, op->in[k]), ir_bytes(p, ir_vtype(p, op->carg[k])));
	/* pooled rows: the schedule's choices, as rev_pool_plan made them */
	LLVMValueRef pool = LLVMConstNull(g->i8p);
	if (op->pool) {
		unsigned cells = (unsigned)rev_pool_cells(op->pool->n, op->pool->k);
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
		cg_cost_kernel(h, kernel, threads, true);
	}
	note_fusion(h, op, why, kernel);
	int64_t replay = op->replay ? rev_replay_marks(p, op, NULL) : 0;
	LLVMValueRef args[19] = {h->ctx, cg_i64(g, op->trip), cg_i64(g, op->nsnap), cg_i64(g, op->nhost), cg_i64(g, op->lo),
	                         LLVMConstInt(g->i32, op->swept, 0), cg_i64(g, op->ktape),
	                         cg_i64(g, ir_block_flops(p, &op->body, 0, op->body.len)),
	                         cg_i64(g, ir_recomputed_flops(p, &op->body2)),
	                         fns[0], fns[1], fns[2], fns[3], fns[4], pool,
	                         LLVMConstInt(g->i32, (unsigned long long)(unsigned)kernel, 1), cg_i64(g, threads),
	                         fns[5], cg_i64(g, replay)};
	cg_call(h, h->t_revolve, h->f_revolve, args, 19);
	if (!why)
		fused_allreduce(h, op);
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

void cg_string_global(Cg *g, const char *name, const char *text);

/* why op cannot run inside a fused loop, or NULL */
static const char *op_unfusable(Program *p, Op *op)
{
	int64_t m, n;
	const char *name = ir_ops[op->kind].name;
	if (op->kind == OP_ALLREDUCE)
		return NULL; /* its whole gradient is summed after the fused kernel (fused_allreduce) */
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
	if (op->replay || (op->kind == OP_LOOP && op->sweep && op->sweep->replay))
		return "its adjoint replays the state from the rows";
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
	cg_string_global(g, ar_printf("dp_fusion%d", g->nnotes++), text);
}

/* A forward loop as one launch; false when it does not qualify. */
bool cg_fused_loop(Host *h, Op *op)
{
	Cg *g = h->g;
	const char *why = unfusable(h, op);
	if (why) {
		note_fusion(h, op, why, -1);
		return false;
	}
	KDesc d = loop_desc(h, op);
	LLVMValueRef words[3] = {h->base, cg_i64(g, 0), cg_i64(g, 0)};
	cg_launch(h, &d, words, 3);
	note_fusion(h, op, NULL, cg_kernel_id(g, &d));
	if (op->counter >= 0) {
		LLVMValueRef args[3] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->counter, 0), cg_i64(g, op->trip)};
		cg_call(h, h->t_count, h->f_count, args, 3);
	}
	fused_allreduce(h, op);
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

void cg_dev_kernel(Host *h, KDesc *d, LLVMValueRef *words)
{
	Cg *g = h->g;
	cg_kernel_shape(g, d);
	if (!g->gpu && (int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_ROWS)
		d->lanes = 1; /* inside a loop's kernel on the CPU a row is one thread's, SIMT emulator or not */
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
void cg_dev_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes)
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
	if (g->gpu)
		shared = cg_shared_array(g, "dp_actions", at);
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
	for (int a = REV_ADVANCE; a <= REV_TAPED; a++) {
		LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "action");
		LLVMAddCase(sw, cg_i64(g, a), bb);
		LLVMPositionBuilderAtEnd(b, bb);
		if (a == REV_ADVANCE || (a == REV_TAPED && op->ktape)) {
			/* steps first..first+n: with a tape, each into its row, then their adjoints */
			DLoop i = dloop_begin(h, first, LLVMBuildAdd(b, first, n, ""));
			h->index[op->ivar] = i.i;
			if (a == REV_TAPED)
				h->index[op->irow] = LLVMBuildSub(b, i.i, first, "");
			Block *body = a == REV_TAPED ? &op->body3 : &op->body;
			cg_lower_block(h, body, 0, body->len);
			copy_yields(h, op, a == REV_TAPED ? op->cyield3 : op->cyield, false);
			dloop_end(h, &i, 1);
			LLVMBuildBr(b, a == REV_TAPED ? untape : next);
			continue;
		}
		if (a == REV_TAPED) {
			h->index[op->ivar2] = first;
			cg_lower_block(h, &op->body2, 0, op->body2.len);
			LLVMBuildBr(b, next);
			continue;
		}
		for (int c = 0; c < op->ncarry; c++) {
			LLVMValueRef slot = slot_addr(h, op, c, n), state = cg_addr(h, op->carg[c]);
			int64_t bytes = ir_bytes(p, ir_vtype(p, op->carg[c]));
			cg_copy(h, a == REV_SAVE ? slot : state, a == REV_SAVE ? state : slot, bytes);
		}
		LLVMBuildBr(b, next);
	}
	if (untape) {
		/* the adjoints of steps first+n-1 down to first, from rows n-1..0 */
		LLVMAddCase(sw, cg_i64(g, REV_UNTAPE), untape);
		LLVMPositionBuilderAtEnd(b, untape);
		DLoop t = dloop_begin(h, cg_i64(g, 0), n);
		LLVMValueRef row = LLVMBuildSub(b, LLVMBuildSub(b, n, cg_i64(g, 1), ""), t.i, "");
		h->index[op->irow] = row;
		h->index[op->ivar2] = LLVMBuildAdd(b, first, row, "");
		cg_lower_block(h, &op->body2, 0, op->body2.len);
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

/* offloaded forward values: rt_act_copy starts the copy, recording its
 * event in the op's word of the slot table; rt_act_wait waits for it */
static void lower_offload(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	LLVMValueRef at = cg_i64(g, g->copy_at + op->index);
	LLVMValueRef event = LLVMBuildGEP2(g->b, g->i64, LLVMBuildBitCast(g->b, g->slot_table, g->i64p, ""), &at, 1, "");
	if (op->kind == OP_SETTLE) {
		LLVMValueRef args[2] = {h->ctx, event};
		cg_call(h, h->t_act_wait, h->f_act_wait, args, 2);
		return;
	}
	bool down = op->kind == OP_OFFLOAD;
	int dev = down ? op->in[1] : op->out, host = op->in[0];
	LLVMValueRef args[6] = {h->ctx, event, LLVMConstInt(g->i32, down ? 0 : 1, 0), cg_addr(h, dev),
	                        cg_i64(g, p->values.data[host].offset), cg_i64(g, ir_bytes(p, ir_vtype(p, host)))};
	cg_call(h, h->t_act_copy, h->f_act_copy, args, 6);
}

static void lower_transfer(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	if (op->kind == OP_ALLREDUCE) {
		/* inside a fused kernel: the whole gradient is summed after it (fused_allreduce) */
		if (h->device)
			return;
		Type t = ir_vtype(p, op->in[0]);
		LLVMValueRef at = cg_addr(h, op->in[0]);
		int64_t n = ir_numel(t);
		if (op->nin == 2) {
			LLVMValueRef i = h->index[op->in[1]];
			if (!i)
				die("index %s has no host value", ir_value_name(p, op->in[1]));
			n /= t.dim[0];
			at = LLVMBuildAdd(g->b, at, LLVMBuildMul(g->b, i, cg_i64(g, ir_bytes(p, t) / t.dim[0]), ""), "");
		}
		LLVMValueRef args[4] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->index, 0), at, cg_i64(g, n)};
		cg_call(h, h->t_allreduce, h->f_allreduce, args, 4);
		return;
	}
	if (op->kind == OP_GRAD_IN) {
		LLVMValueRef i = h->index[op->in[1]];
		if (!i)
			die("index %s has no host value", ir_value_name(p, op->in[1]));
		LLVMValueRef args[5] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->index, 0), i, cg_addr(h, op->in[0]),
		                        cg_i64(g, ir_bytes(p, ir_vtype(p, op->in[0])))};
		cg_call(h, h->t_grad_in, h->f_grad_in, args, 5);
		return;
	}
	if (op->kind == OP_UPDATE) {
		LLVMValueRef i = h->index[op->in[2]];
		if (!i)
			die("index %s has no host value", ir_value_name(p, op->in[2]));
		LLVMValueRef args[6] = {h->ctx, LLVMConstInt(g->i32, (unsigned long long)op->index, 0), i, cg_addr(h, op->in[1]),
		                        cg_i64(g, p->values.data[op->in[0]].offset), cg_i64(g, ir_bytes(p, ir_vtype(p, op->in[1])))};
		cg_call(h, h->t_update, h->f_update, args, 6);
		return;
	}
	int slots = op->in[0], host = op->in[1];
	int index = op->in[op->kind == OP_WAIT ? 1 : 2];
	Type t = ir_vtype(p, slots);
	int64_t k = t.dim[0], unit = ir_bytes(p, t) / k;
	LLVMValueRef i = h->index[index];
	if (!i)
		die("index %s has no host value", ir_value_name(p, index));
	if (op->kind == OP_H2D) {
		LLVMValueRef args[10] = {h->ctx, slot_entry(h, slots), cg_i64(g, k), LLVMBuildAdd(g->b, i, cg_i64(g, op->shift), ""),
		                        cg_i64(g, op->lo), cg_i64(g, op->lo + op->trip), cg_addr(h, slots),
		                        cg_i64(g, p->values.data[host].offset), cg_i64(g, unit),
		                        LLVMConstInt(g->i32, (unsigned long long)op->index, 0)};
		cg_call(h, h->t_fetch, h->f_fetch, args, 10);
		return;
	}
	LLVMValueRef args[4] = {h->ctx, slot_entry(h, slots), cg_i64(g, k), i};
	cg_call(h, h->t_wait, h->f_wait, args, 4);
}

/* element idx of the bf16 array at word w, in a kernel whose reals are f32 */
static LLVMValueRef load_bf16(K *k, LLVMValueRef w, LLVMValueRef idx)
{
	cg_set_real(k->g, DT_BF16);
	LLVMValueRef x = cg_load(k, cg_ptr(k, w, k->g->realp), idx);
	cg_set_real(k->g, DT_F32);
	return x;
}

static void store_bf16(K *k, LLVMValueRef w, LLVMValueRef idx, LLVMValueRef x)
{
	cg_set_real(k->g, DT_BF16);
	cg_store(k, cg_ptr(k, w, k->g->realp), idx, x);
	cg_set_real(k->g, DT_F32);
}

void cg_kernel_control(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef e = cg_vec_index(k, idx);
	switch ((int)d->kind) {
	case K_SGD: {
		/* words: p, g, lr, and the gradient's scale (--clip-grad; 1 leaves g's bits); mode 1 (bf16-mixed):
		 * p and g f32, and the bf16 compute copy of p at word 4 */
		LLVMValueRef p = cg_ptr(k, args[0], g->realp), gr = cg_ptr(k, args[1], g->realp);
		LLVMValueRef gv = LLVMBuildFMul(B, cg_load(k, gr, idx), cg_word_real(k, args[3]), "");
		LLVMValueRef v = LLVMBuildFSub(B, cg_load(k, p, idx), LLVMBuildFMul(B, cg_word_real(k, args[2]), gv, ""), "");
		cg_store(k, p, idx, v);
		if (d->mode)
			store_bf16(k, args[4], idx, v);
		return;
	}
	case K_ADAM: {
		/* words: p, g, m, v, the step size lr / bc1, beta1, beta2, eps, 1 / sqrt(bc2) (bc1, bc2: the bias
		 * corrections), AdamW's keep 1 - lr decay, the gradient's scale; mode 1 (bf16-mixed): all f32, and
		 * the bf16 compute copy of p at word 11. One square root and one division an element, as
		 * DeepSpeed's CPU Adam; runtime/host_step.c computes the same operations in the same order. */
		LLVMValueRef p = cg_ptr(k, args[0], g->realp), gr = cg_ptr(k, args[1], g->realp);
		LLVMValueRef m = cg_ptr(k, args[2], g->realp), v = cg_ptr(k, args[3], g->realp);
		LLVMValueRef size = cg_word_real(k, args[4]), b1 = cg_word_real(k, args[5]), b2 = cg_word_real(k, args[6]);
		LLVMValueRef eps = cg_word_real(k, args[7]), rbc2 = cg_word_real(k, args[8]);
		/* AdamW's decoupled decay: p (1 - lr decay) first; 1 for Adam, which leaves p's bits */
		LLVMValueRef keep = cg_word_real(k, args[9]);
		LLVMValueRef gv = LLVMBuildFMul(B, cg_load(k, gr, idx), cg_word_real(k, args[10]), ""), one = cg_real(g, 1);
		LLVMValueRef mv = LLVMBuildFAdd(B, LLVMBuildFMul(B, b1, cg_load(k, m, idx), ""), LLVMBuildFMul(B, LLVMBuildFSub(B, one, b1, ""), gv, ""), "");
		LLVMValueRef vv = LLVMBuildFAdd(B, LLVMBuildFMul(B, b2, cg_load(k, v, idx), ""),
		                                LLVMBuildFMul(B, LLVMBuildFSub(B, one, b2, ""), LLVMBuildFMul(B, gv, gv, ""), ""), "");
		cg_store(k, m, idx, mv);
		cg_store(k, v, idx, vv);
		LLVMValueRef den = LLVMBuildFAdd(B, LLVMBuildFMul(B, cg_sqrt(k, vv), rbc2, ""), eps, "");
		LLVMValueRef step = LLVMBuildFMul(B, size, LLVMBuildFDiv(B, mv, den, ""), "");
		LLVMValueRef np = LLVMBuildFSub(B, LLVMBuildFMul(B, cg_load(k, p, idx), keep, ""), step, "");
		cg_store(k, p, idx, np);
		if (d->mode)
			store_bf16(k, args[11], idx, np);
		return;
	}
	case K_FOLD: {
		/* bf16-mixed: a micro-batch's gradient (bf16, word 1) added to the step's sum (f32, word 0), which
		 * starts at 0 when word 2 is 1 */
		LLVMValueRef sum = cg_ptr(k, args[0], g->realp), first = cg_word_real(k, args[2]);
		LLVMValueRef was = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealONE, first, cg_real(g, 0), ""), cg_real(g, 0),
		                                   cg_load(k, sum, idx), "");
		cg_store(k, sum, idx, LLVMBuildFAdd(B, was, load_bf16(k, args[1], idx), ""));
		return;
	}
	case K_REFRESH:
		/* bf16-mixed: the compute copy (bf16, word 0) of the master copy (f32, word 1) */
		store_bf16(k, args[0], idx, cg_load(k, cg_ptr(k, args[1], g->realp), idx));
		return;
	case OP_ACC:
	case OP_ACC_SLICE: {
		/* operand words: the variable (slice address from the host), the addend */
		LLVMValueRef x = cg_ptr(k, args[1], g->realp);
		cg_vstore(k, ptrs[0], e, LLVMBuildFAdd(B, cg_vload(k, ptrs[0], e), cg_vload(k, x, e), ""));
		return;
	}
	default:
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	}
}

bool cg_host_control(Host *h, Op *op)
{
	Cg *g = h->g;
	Program *p = g->p;
	switch (op->kind) {
	case OP_LOOP:
		if (!cg_fused_loop(h, op))
			lower_loop(h, op);
		return true;
	case OP_REVOLVE:
		lower_revolve(h, op);
		return true;
	case OP_OFFLOAD:
	case OP_FETCH:
	case OP_SETTLE:
		lower_offload(h, op);
		return true;
	case OP_H2D:
	case OP_WAIT:
	case OP_UPDATE:
	case OP_GRAD_IN:
	case OP_ALLREDUCE:
		lower_transfer(h, op);
		return true;
	case OP_ACC:
	case OP_ACC_SLICE: {
		/* acc v, x / acc_slice v[i], x: the words are the destination address and x */
		int x = op->in[op->nin - 1];
		KDesc d = cg_kdesc(op);
		d.nin = 1;
		d.in[0] = ir_vtype(p, x);
		d.out = d.in[0];
		LLVMValueRef words[2];
		words[0] = cg_acc_target(h, op);
		words[1] = cg_addr(h, x);
		cg_launch(h, &d, words, 2);
		return true;
	}
	case OP_ASSIGN:
		if (!cg_coalesced(p, op->in[1], op->in[0], -1))
			cg_copy(h, cg_addr(h, op->in[0]), cg_addr(h, op->in[1]), ir_bytes(p, ir_vtype(p, op->in[0])));
		return true;
	case OP_STORE_SLICE: {
		if (op->in[1] == h->norow || cg_coalesced(p, op->in[2], op->in[0], op->in[1]))
			return true;
		Type t = ir_vtype(p, op->in[2]);
		LLVMValueRef row = h->index[op->in[1]];
		LLVMBasicBlockRef after = NULL;
		/* a tape of one row indexed by a taped run's rows: a replayed state's (Op.replay), which keeps the run's first */
		if (ir_vtype(p, op->in[0]).dim[0] == 1 && !LLVMIsConstant(row)) {
			LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "first_row");
			after = LLVMAppendBasicBlockInContext(g->ctx, h->fn, "after_first_row");
			LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, row, cg_i64(g, 0), ""), store, after);
			LLVMPositionBuilderAtEnd(g->b, store);
		}
		LLVMValueRef dst = LLVMBuildAdd(g->b, cg_addr(h, op->in[0]), LLVMBuildMul(g->b, row, cg_i64(g, ir_bytes(p, t)), ""), "");
		cg_copy(h, dst, cg_addr(h, op->in[2]), ir_bytes(p, t));
		if (after) {
			LLVMBuildBr(g->b, after);
			LLVMPositionBuilderAtEnd(g->b, after);
		}
		return true;
	}
	case OP_ZERO: {
		if (h->device) {
			cg_dev_copy(h, cg_addr(h, op->in[0]), NULL, ir_bytes(p, ir_vtype(p, op->in[0])));
			return true;
		}
		LLVMValueRef args[3] = {h->ctx, cg_addr(h, op->in[0]), cg_i64(g, ir_bytes(p, ir_vtype(p, op->in[0])))};
		cg_call(h, h->t_zero, h->f_zero, args, 3);
		cg_cost_copy(h, ir_bytes(p, ir_vtype(p, op->in[0])), true);
		return true;
	}
	default:
		return false;
	}
}
