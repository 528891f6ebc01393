/* cg: the NVPTX wrapper of the kernel bodies. Each kernel takes its argument
 * words and its thread count (work items times lanes), and walks its work
 * items with a grid-stride loop; exp and log link from CUDA's libdevice. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "cgint.h"

static LLVMValueRef sreg(Cg *g, const char *name)
{
	LLVMTypeRef ft = LLVMFunctionType(g->i32, NULL, 0, 0);
	LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
	if (!f)
		f = LLVMAddFunction(g->mod, name, ft);
	return LLVMBuildZExt(g->b, LLVMBuildCall2(g->b, ft, f, NULL, 0, ""), g->i64, "");
}

/* A kernel entry; every launch has 256 threads per block (runtime/gpu), which
 * the block-wide reductions rely on. Attention on tensor cores and in FMA
 * keeps to 128 registers a thread (two blocks an SM); on tensor cores heads wider than 64 to 255 (one
 * block an SM, cg_attn_wide; its shared memory dynamic past 48 KiB:
 * cg_attn_smem), and ptxas must
 * fit it there (tests/kernels checks that it spills nothing). */
static void mark_kernel(Cg *g, LLVMValueRef fn, const KDesc *d)
{
	static const char *keys[3] = {"kernel", "maxntidx", "maxnreg"};
	bool flash = (int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_HEADS && cg_attn_flash(g, d);
	/* layernorms and (but bf16's) their adjoints: without a bound ptxas keeps them to 64 registers or
	 * fewer and spills (16 bytes in GPT-2's f32 layernorm_grad+hat for sm_80, 8 in bf16's add+layernorm,
	 * 8 in the samples' f32 layernorm of rows of 512 at 40 registers for sm_90); at 96 (f64's at 128: at
	 * 96 its adjoint of rows of 2,048 spilled) none spills, f32, f64 and bf16, rows of 256 to 4,096, sm_80
	 * and sm_90, nor in the samples (at 72 and 80 some still did). bf16's adjoints spill nothing
	 * unbounded and take fewer registers (64-80, not 90-93: blocks an SM) */
	bool norm = (int)d->kind == OP_LAYERNORM || ((int)d->kind == OP_LAYERNORM_GRAD && d->out.dt != DT_BF16);
	/* (attr.attn is read only for attention: another kernel's attr holds something else) */
	int vals[3] = {1, 256, flash && cg_attn_mma(g, d) && cg_attn_wide(d) ? 255 : norm && d->out.dt != DT_F64 ? 96 : 128};
	for (int i = 0; i < 2 + (flash || norm); i++) {
		LLVMMetadataRef md[3] = {LLVMValueAsMetadata(fn), LLVMMDStringInContext2(g->ctx, keys[i], strlen(keys[i])),
		                         LLVMValueAsMetadata(LLVMConstInt(g->i32, (unsigned)vals[i], 0))};
		LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations", LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
	}
}

void cg_barrier(Cg *g)
{
	LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), NULL, 0, 0);
	LLVMValueRef f = LLVMGetNamedFunction(g->mod, "llvm.nvvm.barrier0");
	if (!f)
		f = LLVMAddFunction(g->mod, "llvm.nvvm.barrier0", ft);
	LLVMBuildCall2(g->b, ft, f, NULL, 0, "");
}

/* attn_dkv and attn_dq on tensor cores: a block a work item (a tile of rows), a loop over the other side's
 * tiles. The work item goes through the warp's word of shared memory (Cg.item_slot), and the thread index
 * is read again at each item: kept in registers across the loop, ptxas spilled the item, or values made
 * from them, at some shapes (attn_dkv 8 bytes for sm_90 in f32, 32-48 for sm_80 in f32 and bf16; attn_dq
 * 8-16 in f32 at T = 256); with one of the two some still did; with both, none of a sweep of 12 shapes.
 * The forward spills nothing without them. */
static bool item_in_shared(const Cg *g, const KDesc *d)
{
	return ((int)d->kind == OP_ATTN_DKV || (int)d->kind == OP_ATTN_DQ) && cg_attn_flash(g, d) && cg_attn_mma(g, d) &&
	       d->lanes == 256;
}

/* d->lanes consecutive threads share each work item. The items are walked
 * with a stride loop that is uniform within each span of threads that meet
 * at shuffles (a warp, or the block); a warp of narrower groups takes
 * 32 / lanes items at a time, and at the tail its spare groups repeat the
 * last item, storing the same bits. */
void cg_gpu_items(Cg *g, LLVMValueRef fn, const KDesc *d, LLVMValueRef *args, LLVMValueRef gid, LLVMValueRef tid,
                  LLVMValueRef threads, LLVMValueRef n)
{
	int span = d->lanes >= 32 ? d->lanes : d->lanes > 1 ? 32 : 1, per = span / d->lanes;
	LLVMValueRef lanes = cg_i64(g, d->lanes);
	LLVMValueRef lane = LLVMBuildURem(g->b, tid, lanes, "");
	LLVMValueRef group = LLVMBuildUDiv(g->b, LLVMBuildURem(g->b, tid, cg_i64(g, span), ""), lanes, "");
	LLVMValueRef first = LLVMBuildMul(g->b, LLVMBuildUDiv(g->b, gid, cg_i64(g, span), ""), cg_i64(g, per), "");
	LLVMValueRef stride = LLVMBuildMul(g->b, LLVMBuildUDiv(g->b, threads, cg_i64(g, span), ""), cg_i64(g, per), "");
	LLVMBasicBlockRef entry = LLVMGetInsertBlock(g->b);
	LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->ctx, fn, "items");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, fn, "items_done");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, first, n, ""), loop, done);
	LLVMPositionBuilderAtEnd(g->b, loop);
	LLVMValueRef i = LLVMBuildPhi(g->b, g->i64, "i");
	LLVMAddIncoming(i, &first, &entry, 1);
	LLVMValueRef item = i;
	if (item_in_shared(g, d)) {
		/* the thread's index read again at each item (an asm with side effects, which nothing hoists), so
		 * that what is made from it (shared memory's addresses) is made in the item, not kept across it;
		 * the item into the warp's slot */
		LLVMTypeRef ft = LLVMFunctionType(g->i32, NULL, 0, 0);
		const char *text = "mov.u32 $0, %tid.x;";
		LLVMValueRef asm_ = LLVMGetInlineAsm(ft, (char *)text, strlen(text), "=r", 2, 1, 0, LLVMInlineAsmDialectATT, 0);
		lane = LLVMBuildURem(g->b, LLVMBuildZExt(g->b, LLVMBuildCall2(g->b, ft, asm_, NULL, 0, ""), g->i64, ""), lanes, "");
		LLVMValueRef slots = cg_shared_array(g, "dp_item_slots", LLVMArrayType(g->i64, 256 / 32));
		LLVMValueRef at[2] = {cg_i64(g, 0), LLVMBuildLShr(g->b, lane, cg_i64(g, 5), "")};
		g->item_slot = LLVMBuildGEP2(g->b, LLVMArrayType(g->i64, 256 / 32), slots, at, 2, "");
		LLVMSetVolatile(LLVMBuildStore(g->b, i, g->item_slot), 1);
	}
	if (per > 1) {
		LLVMValueRef want = LLVMBuildAdd(g->b, i, group, ""), last = LLVMBuildSub(g->b, n, cg_i64(g, 1), "");
		LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLT, want, n, "");
		item = LLVMBuildSelect(g->b, in, want, last, "");
		g->dup = LLVMBuildNot(g->b, in, "");
	}
	cg_kernel_body(g, fn, d, args, item, lane);
	g->dup = NULL;
	LLVMValueRef now = i;
	if (g->item_slot) {
		now = LLVMBuildLoad2(g->b, g->i64, g->item_slot, "");
		LLVMSetVolatile(now, 1);
		g->item_slot = NULL;
	}
	LLVMValueRef next = LLVMBuildAdd(g->b, now, stride, "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMAddIncoming(i, &next, &latch, 1);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, n, ""), loop, done);
	LLVMPositionBuilderAtEnd(g->b, done);
}

/* The kernels as NVPTX IR in cg_units' modules (g->units), each kernel in
 * its unit's (cg_unit_of); cg_units_compile makes them PTX. */
void cg_ptx_units(Cg *g)
{
	LLVMInitializeNVPTXTargetInfo();
	LLVMInitializeNVPTXTarget();
	LLVMInitializeNVPTXTargetMC();
	LLVMInitializeNVPTXAsmPrinter();
	LLVMTargetMachineRef tm = cg_ptx_machine();
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
	LLVMModuleRef host = g->mod, *units = g->units;
	int n = g->nunits = cg_units(g);
	g->units_ptx = true;
	for (int u = 0; u < n; u++) {
		units[u] = LLVMModuleCreateWithNameInContext("dp_kernels", g->ctx);
		LLVMSetTarget(units[u], CG_PTX_TRIPLE);
		LLVMSetModuleDataLayout(units[u], td);
	}
	LLVMDisposeTargetData(td);
	LLVMDisposeTargetMachine(tm);
	g->gpu = true;
	for (int i = 0; i < g->kernels.len; i++) {
		KDesc *d = &g->kernels.data[i];
		int u = cg_unit_of(g, i, n);
		g->mod = units[u];
		g->module_array = false;
		LLVMTypeRef params[17];
		for (int j = 0; j <= d->nargs; j++)
			params[j] = g->i64;
		LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, (unsigned)d->nargs + 1, 0);
		LLVMValueRef fn = LLVMAddFunction(g->mod, ar_printf("dp_k%d", i), ft);
		mark_kernel(g, fn, d);
		LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
		LLVMValueRef args[16];
		for (int j = 0; j < d->nargs; j++)
			args[j] = LLVMGetParam(fn, (unsigned)j);
		LLVMValueRef n = LLVMBuildUDiv(g->b, LLVMGetParam(fn, (unsigned)d->nargs), cg_i64(g, d->lanes), "");
		LLVMValueRef tid = sreg(g, "llvm.nvvm.read.ptx.sreg.tid.x"), ntid = sreg(g, "llvm.nvvm.read.ptx.sreg.ntid.x");
		LLVMValueRef gid = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, sreg(g, "llvm.nvvm.read.ptx.sreg.ctaid.x"), ntid, ""), tid, "");
		LLVMValueRef threads = LLVMBuildMul(g->b, sreg(g, "llvm.nvvm.read.ptx.sreg.nctaid.x"), ntid, "");
		cg_gpu_items(g, fn, d, args, gid, tid, threads, n);
		LLVMBuildRetVoid(g->b);
		cg_unit_built(g, i, u);
	}
	g->mod = host;
	g->gpu = false;
}
