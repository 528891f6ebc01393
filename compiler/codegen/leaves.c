/* cg, leaves: param, input, const, idx and scratch (no code: addresses
 * and host integers), and the kernels that make a tensor from nothing: fill, interp,
 * arange, literal, training. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"

/* interp [n, m]: row i weighs the two source points around i's centre,
 * (i + 1/2) m / n - 1/2, clamped at 0 (PyTorch's align_corners=False) */
static void body_interp(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	int64_t n = d->out.dim[0], m = d->out.dim[1];
	LLVMValueRef coord[2];
	cg_unravel(k, d->out, idx, coord);
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
	cg_store(k, ptrs[0], idx, v);
}

void cg_kernel_leaf(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef e = cg_vec_index(k, idx);
	switch ((int)d->kind) {
	case OP_FILL:
		cg_vstore(k, ptrs[0], e, cg_kreal(k, d->attr.value));
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
		cg_store(k, ptrs[0], idx, g->real == g->f64 ? v : LLVMBuildFPTrunc(B, v, g->real, ""));
		return;
	}
	case OP_TRAINING: {
		/* word 1: 1 while training, 0 in evaluation (rt_training) */
		LLVMValueRef on = LLVMBuildICmp(B, LLVMIntNE, args[1], cg_i64(g, 0), "");
		cg_store(k, ptrs[0], idx, LLVMBuildSelect(B, on, cg_real(g, 1), cg_real(g, 0), ""));
		return;
	}
	case OP_ARANGE:
		cg_elem_store(k, true, args[0], idx, LLVMBuildTrunc(B, idx, g->i32, ""));
		return;
	default:
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	}
}

bool cg_host_leaf(Host *h, Op *op)
{
	switch (op->kind) {
	case OP_PARAM:
	case OP_INPUT:
	case OP_CONST:
	case OP_SCRATCH:
		return true;
	case OP_IDX:
		h->index[op->out] = cg_i64(h->g, op->index);
		return true;
	case OP_TRAINING: {
		/* the result, and 1 while training (0 in evaluation: rt_training) */
		KDesc d = cg_kdesc(op);
		d.out = ir_vtype(h->g->p, op->out);
		LLVMValueRef words[2];
		words[0] = cg_addr(h, op->out);
		words[1] = LLVMBuildCall2(h->g->b, h->t_on, h->f_on, &h->ctx, 1, "");
		cg_launch(h, &d, words, 2);
		return true;
	}
	default:
		return false;
	}
}
