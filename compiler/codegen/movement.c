/* cg, movement: views (slice, reshape: addresses, no code), copies, and
 * the kernels that move elements: transpose, broadcast, range, pad,
 * concat, the 2-D windows (unfold, fold), cast, bits and unbits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"
#include "../ops/ops.h"

/* range, pad, concat: each result element from its place in an operand, or zero */
static void body_move(K *k, const KDesc *d, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	bool i32 = d->out.dt == DT_I32;
	LLVMValueRef zero = i32 ? LLVMConstInt(g->i32, 0, 0) : cg_real(g, 0);
	LLVMValueRef coord[IR_MAXRANK];
	cg_unravel(k, d->out, idx, coord);
	int ax = d->attr.ax.axis;
	LLVMValueRef c = coord[ax], at = cg_i64(g, d->attr.ax.at), v;
	switch ((int)d->kind) {
	case OP_RANGE:
		coord[ax] = LLVMBuildAdd(B, c, at, "");
		v = cg_elem_load(k, i32, args[1], cg_bcast_offset(k, d->in[0], d->in[0], coord));
		break;
	case OP_PAD: {
		/* unsigned: a place before x wraps round to a huge one */
		LLVMValueRef in = LLVMBuildSub(B, c, at, "");
		LLVMValueRef ok = LLVMBuildICmp(B, LLVMIntULT, in, cg_i64(g, d->in[0].dim[ax]), "");
		coord[ax] = LLVMBuildSelect(B, ok, in, cg_i64(g, 0), "");
		v = LLVMBuildSelect(B, ok, cg_elem_load(k, i32, args[1], cg_bcast_offset(k, d->in[0], d->in[0], coord)), zero, "");
		break;
	}
	default: { /* OP_CONCAT */
		LLVMValueRef first = LLVMBuildICmp(B, LLVMIntSLT, c, at, "");
		coord[ax] = LLVMBuildSelect(B, first, c, cg_i64(g, 0), "");
		LLVMValueRef va = cg_elem_load(k, i32, args[1], cg_bcast_offset(k, d->in[0], d->in[0], coord));
		coord[ax] = LLVMBuildSelect(B, first, cg_i64(g, 0), LLVMBuildSub(B, c, at, ""), "");
		LLVMValueRef vb = cg_elem_load(k, i32, args[2], cg_bcast_offset(k, d->in[1], d->in[1], coord));
		v = LLVMBuildSelect(B, first, va, vb, "");
	}
	}
	cg_elem_store(k, i32, args[0], idx, v);
}

/* x < n for an i64 x that may be negative */
static LLVMValueRef within(K *k, LLVMValueRef x, int64_t n)
{
	return LLVMBuildICmp(k->b, LLVMIntULT, x, cg_i64(k->g, n), "");
}

/* On the CPU a window kernel's item is a row of unfold's result, (n, p)'s
 * C kh kw elements written in order, or a plane (n, c) of fold's, whose
 * windows' elements it adds in, window by window: nested loops, no
 * division per element. The GPU keeps an element per item. */
static void cpu_window(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	const Window *w = &d->attr.win;
	bool fold = d->kind == OP_FOLD;
	Type img = fold ? d->out : d->in[0];
	int64_t C = img.dim[1], H = img.dim[2], W = img.dim[3], Ho, Wo, K2 = (int64_t)w->kh * w->kw;
	ops_window_out(w, img, &Ho, &Wo);
	LLVMValueRef zero = cg_real(g, 0), z = cg_i64(g, 0);
	if (!fold) {
		LLVMValueRef n = LLVMBuildUDiv(B, idx, cg_i64(g, Ho * Wo), ""), p = LLVMBuildURem(B, idx, cg_i64(g, Ho * Wo), "");
		LLVMValueRef h0 = LLVMBuildSub(B, LLVMBuildMul(B, LLVMBuildUDiv(B, p, cg_i64(g, Wo), ""), cg_i64(g, w->sh), ""), cg_i64(g, w->ph), "");
		LLVMValueRef x0 = LLVMBuildSub(B, LLVMBuildMul(B, LLVMBuildURem(B, p, cg_i64(g, Wo), ""), cg_i64(g, w->sw), ""), cg_i64(g, w->pw), "");
		LLVMValueRef out = LLVMBuildMul(B, idx, cg_i64(g, C * K2), "");
		Loop lc = cg_for(k, cg_i64(g, C));
		Loop la = cg_for(k, cg_i64(g, w->kh));
		LLVMValueRef h = LLVMBuildAdd(B, h0, LLVMBuildMul(B, la.i, cg_i64(g, w->dh), ""), "");
		LLVMValueRef row = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, n, cg_i64(g, C), ""), lc.i, ""), cg_i64(g, H), ""), h, ""), cg_i64(g, W), "");
		LLVMValueRef q0 = LLVMBuildAdd(B, out, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, lc.i, cg_i64(g, w->kh), ""), la.i, ""), cg_i64(g, w->kw), ""), "");
		Loop lb = cg_for(k, cg_i64(g, w->kw));
		LLVMValueRef x = LLVMBuildAdd(B, x0, LLVMBuildMul(B, lb.i, cg_i64(g, w->dw), ""), "");
		LLVMValueRef ok = LLVMBuildAnd(B, within(k, h, H), within(k, x, W), "");
		LLVMValueRef off = LLVMBuildSelect(B, ok, LLVMBuildAdd(B, row, x, ""), z, "");
		cg_store(k, ptrs[0], LLVMBuildAdd(B, q0, lb.i, ""), LLVMBuildSelect(B, ok, cg_load(k, ptrs[1], off), zero, ""));
		cg_for_end(k, &lb, cg_i64(g, w->kw));
		cg_for_end(k, &la, cg_i64(g, w->kh));
		cg_for_end(k, &lc, cg_i64(g, C));
		return;
	}
	LLVMValueRef n = LLVMBuildUDiv(B, idx, cg_i64(g, C), ""), c = LLVMBuildURem(B, idx, cg_i64(g, C), "");
	LLVMValueRef plane = LLVMBuildMul(B, idx, cg_i64(g, H * W), "");
	Loop lz = cg_for(k, cg_i64(g, H * W));
	cg_store(k, ptrs[0], LLVMBuildAdd(B, plane, lz.i, ""), zero);
	cg_for_end(k, &lz, cg_i64(g, H * W));
	Loop lp = cg_for(k, cg_i64(g, Ho * Wo));
	LLVMValueRef h0 = LLVMBuildSub(B, LLVMBuildMul(B, LLVMBuildUDiv(B, lp.i, cg_i64(g, Wo), ""), cg_i64(g, w->sh), ""), cg_i64(g, w->ph), "");
	LLVMValueRef x0 = LLVMBuildSub(B, LLVMBuildMul(B, LLVMBuildURem(B, lp.i, cg_i64(g, Wo), ""), cg_i64(g, w->sw), ""), cg_i64(g, w->pw), "");
	LLVMValueRef cols = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, n, cg_i64(g, Ho * Wo), ""), lp.i, ""), cg_i64(g, C), ""), c, ""), cg_i64(g, K2), "");
	Loop la = cg_for(k, cg_i64(g, w->kh));
	LLVMValueRef h = LLVMBuildAdd(B, h0, LLVMBuildMul(B, la.i, cg_i64(g, w->dh), ""), "");
	LLVMBasicBlockRef in_h = cg_if(k, within(k, h, H));
	Loop lb = cg_for(k, cg_i64(g, w->kw));
	LLVMValueRef x = LLVMBuildAdd(B, x0, LLVMBuildMul(B, lb.i, cg_i64(g, w->dw), ""), "");
	LLVMBasicBlockRef in_x = cg_if(k, within(k, x, W));
	LLVMValueRef at = LLVMBuildAdd(B, plane, LLVMBuildAdd(B, LLVMBuildMul(B, h, cg_i64(g, W), ""), x, ""), "");
	LLVMValueRef from = LLVMBuildAdd(B, cols, LLVMBuildAdd(B, LLVMBuildMul(B, la.i, cg_i64(g, w->kw), ""), lb.i, ""), "");
	cg_store(k, ptrs[0], at, LLVMBuildFAdd(B, cg_load(k, ptrs[0], at), cg_load(k, ptrs[1], from), ""));
	cg_end_if(k, in_x);
	cg_for_end(k, &lb, cg_i64(g, w->kw));
	cg_end_if(k, in_h);
	cg_for_end(k, &la, cg_i64(g, w->kh));
	cg_for_end(k, &lp, cg_i64(g, Ho * Wo));
}

/* unfold: result [N, P, C*kh*kw] at (n, p, q) is x[n, c, h, w] of the
 * window p's element q, zero in the padding. fold: x[n, c, h, w] adds up
 * the result's places that unfold took it to; a gather, so deterministic. */
static void body_window(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	if (!k->g->cuda) {
		cpu_window(k, d, ptrs, idx);
		return;
	}
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	const Window *w = &d->attr.win;
	bool fold = d->kind == OP_FOLD;
	Type img = fold ? d->out : d->in[0];
	int64_t C = img.dim[1], H = img.dim[2], W = img.dim[3], Ho, Wo, K2 = (int64_t)w->kh * w->kw;
	ops_window_out(w, img, &Ho, &Wo);
	LLVMValueRef coord[IR_MAXRANK], zero = cg_real(g, 0), z = cg_i64(g, 0);
	if (!fold) {
		cg_unravel(k, d->out, idx, coord);
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
		cg_store(k, ptrs[0], idx, LLVMBuildSelect(B, ok, cg_load(k, ptrs[1], off), zero, ""));
		return;
	}
	cg_unravel(k, img, idx, coord);
	LLVMValueRef n = coord[0], c = coord[1], h = coord[2], x = coord[3];
	LLVMValueRef nk = cg_i64(g, K2);
	Loop l = cg_for(k, nk);
	Acc s = cg_acc(k, &l, zero);
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
	LLVMValueRef ns = LLVMBuildFAdd(B, s.phi, LLVMBuildSelect(B, ok, cg_load(k, ptrs[1], off), zero, ""), "");
	cg_acc_next(k, &s, ns);
	cg_for_end(k, &l, nk);
	cg_store(k, ptrs[0], idx, cg_acc_result(k, &l, zero, ns));
}

void cg_kernel_movement(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef e = cg_vec_index(k, idx);
	LLVMValueRef coord[IR_MAXRANK];
	switch ((int)d->kind) {
	case OP_BROADCAST:
		cg_unravel(k, d->out, e, coord);
		cg_vstore(k, ptrs[0], e, cg_operand(k, ptrs[1], d->in[0], d->out, coord));
		return;
	case OP_TRANSPOSE: {
		cg_unravel(k, d->out, idx, coord);
		LLVMValueRef src[IR_MAXRANK];
		for (int i = 0; i < d->out.rank; i++)
			src[d->attr.perm[i]] = coord[i];
		cg_store(k, ptrs[0], idx, cg_load(k, ptrs[1], cg_bcast_offset(k, d->in[0], d->in[0], src)));
		return;
	}
	case OP_RANGE:
	case OP_PAD:
	case OP_CONCAT:
		body_move(k, d, args, idx);
		return;
	case OP_UNFOLD:
	case OP_FOLD:
		body_window(k, d, ptrs, idx);
		return;
	case OP_CAST: {
		bool from_int = d->in[0].dt == DT_I32, to_int = d->out.dt == DT_I32;
		if (!from_int && !to_int) {
			/* between reals: load in the operand's type, store in the result's */
			cg_set_real(g, d->in[0].dt);
			LLVMValueRef x = cg_load(k, cg_ptr(k, args[1], g->realp), idx);
			LLVMTypeRef from = g->real;
			cg_set_real(g, d->out.dt);
			if (from != g->real)
				x = from == g->f64 ? LLVMBuildFPTrunc(B, x, g->real, "") : LLVMBuildFPExt(B, x, g->real, "");
			cg_store(k, cg_ptr(k, args[0], g->realp), idx, x);
			return;
		}
		LLVMValueRef x = cg_elem_load(k, from_int, args[1], idx);
		if (from_int != to_int)
			x = to_int ? LLVMBuildFPToSI(B, x, g->i32, "") : LLVMBuildSIToFP(B, x, g->real, "");
		cg_elem_store(k, to_int, args[0], idx, x);
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
		Loop l = cg_for(k, cnt);
		Acc word = cg_acc(k, &l, none);
		LLVMValueRef x = cg_load(k, cg_ptr(k, args[1], g->realp), LLVMBuildAdd(B, base, l.i, ""));
		LLVMValueRef bit = LLVMBuildZExt(B, LLVMBuildFCmp(B, LLVMRealOGT, x, cg_real(g, 0), ""), g->i32, "");
		LLVMValueRef next = LLVMBuildOr(B, word.phi, LLVMBuildShl(B, bit, LLVMBuildTrunc(B, l.i, g->i32, ""), ""), "");
		cg_acc_next(k, &word, next);
		cg_for_end(k, &l, cnt);
		cg_elem_store(k, true, args[0], idx, cg_acc_result(k, &l, none, next));
		return;
	}
	case OP_UNBITS: {
		int64_t n = d->out.dim[d->out.rank - 1], nw = (n + 31) / 32;
		LLVMValueRef row = LLVMBuildUDiv(B, idx, cg_i64(g, n), ""), e = LLVMBuildURem(B, idx, cg_i64(g, n), "");
		LLVMValueRef at = LLVMBuildAdd(B, LLVMBuildMul(B, row, cg_i64(g, nw), ""), LLVMBuildUDiv(B, e, cg_i64(g, 32), ""), "");
		LLVMValueRef word = cg_elem_load(k, true, args[1], at);
		LLVMValueRef sh = LLVMBuildTrunc(B, LLVMBuildURem(B, e, cg_i64(g, 32), ""), g->i32, "");
		LLVMValueRef bit = LLVMBuildAnd(B, LLVMBuildLShr(B, word, sh, ""), LLVMConstInt(g->i32, 1, 0), "");
		cg_store(k, cg_ptr(k, args[0], g->realp), idx, LLVMBuildUIToFP(B, bit, g->real, ""));
		return;
	}
	default:
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	}
}

bool cg_host_movement(Host *h, Op *op)
{
	Program *p = h->g->p;
	switch (op->kind) {
	case OP_SLICE:
	case OP_RESHAPE:
		return true;
	case OP_COPY:
		cg_copy(h, cg_addr(h, op->out), cg_addr(h, op->in[0]), ir_bytes(p, ir_vtype(p, op->out)));
		return true;
	case OP_RANGE: {
		/* the operand's address advanced to the range's first element, so that ranges of one shape at
		 * different places share a kernel (a concat's adjoint makes one for each of its operands: DenseNet-121
		 * made 593 kernels of them, each compiled apart) */
		KDesc d = cg_kdesc(op);
		Type x = ir_vtype(p, op->in[0]);
		int64_t inner = 1;
		for (int i = op->attr.ax.axis + 1; i < x.rank; i++)
			inner *= x.dim[i];
		d.attr.ax.at = 0;
		d.nin = 1;
		d.in[0] = x;
		d.out = ir_vtype(p, op->out);
		LLVMValueRef words[2] = {cg_addr(h, op->out), LLVMBuildAdd(h->g->b, cg_addr(h, op->in[0]),
		                                                           cg_i64(h->g, op->attr.ax.at * inner * ir_dt_bytes(x.dt)), "")};
		cg_launch(h, &d, words, 2);
		return true;
	}
	default:
		return false;
	}
}
