/* codegen's private header: the LLVM context shared by kernels.c and host.c. */
#ifndef DPC_CGINT_H
#define DPC_CGINT_H

#include <llvm-c/Core.h>

#include "cg.h"

/* One step of a fused elementwise kernel. */
#define CG_MAXSTEPS 8
typedef struct {
	OpKind kind;
	int nin;
	int src[3];        /* argument word of the operand, or -(s + 1) for step s's value */
	bool is_const[3];
	double cval[3];
	Type in[3];        /* operand types, for broadcasting */
	int store;         /* argument word its result is stored through, or -1 */
} KStep;

/* One kernel: an op's lowering, with the types it was instantiated at.
 * Identical descriptions share one kernel. Argument words: [0] the result
 * (or the variable written), then each operand, in order; constant operands
 * occur only in fused elementwise kernels, as immediates of their steps. */
typedef struct {
	OpKind kind;
	int nin;
	Type out;
	Type in[5];
	Type to;
	Attr attr;         /* the op's, copied whole */
	int nargs;
	int vec;           /* elements per access: 16 bytes' worth where every access allows, else 1 */
	int lanes;         /* GPU threads that cooperate on one output of a reduction: 1 to 32, or 256 */
	int accumulate;    /* a reduction adds its result to the destination (an absorbed acc) */
	int nsteps;        /* K_FUSED */
	KStep step[CG_MAXSTEPS];
	int loop;          /* K_LOOP: its entry in Cg.loops */
	bool actions;      /* K_LOOP: a revolve's, running the actions of its schedule */
} KDesc;

/* kinds beyond the IR's: the optimizers, runs of elementwise ops fused into
 * one kernel, and a loop's whole run as one kernel (host.c, fused loops) */
enum { K_SGD = OP__COUNT, K_ADAM, K_FUSED, K_LOOP };

/* A loop that runs as one kernel: a forward loop's iterations, or the
 * actions of a revolve's schedule (rt_revolve gives them in chunks). One
 * thread block on the GPU, one call on the CPU. */
typedef struct {
	Op *op;
	bool step;         /* lowered in dp_step (a forward loop's tail tapes rows there) */
} CgLoop;

/* GPU threads of a fused loop's block */
#define CG_BLOCK 256
/* the most elements of any value in a fused loop's body */
#define CG_FUSE_ELEMS IR_GEMM_SUM

typedef struct {
	Program *p;
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTypeRef i1, i8, i32, i64, f64, real, i8p, i64p, realp, i32p;
	/* the reals of the kernel being emitted (cg_set_real): computed in
	 * `real` and stored as `rstore` (realp points at it): the same type,
	 * except that bf16 is stored as i16 and computed in f32 */
	LLVMTypeRef rstore;
	bool bf16;
	Vec(KDesc) kernels;
	int *kslot;       /* open-addressing table of kernel ids by their description's hash, -1 empty */
	int kslots;       /* its size: a power of two, at least twice the kernels */
	bool gpu;         /* emitting the NVPTX kernel module: math from libdevice */
	bool cuda;        /* the executable's target is CUDA: reductions split over lanes */
	int nparts;       /* host functions split off a long block (host.c, lower_part) */
	/* streaming: one table of two i64 per device slot (the unit it holds + 1,
	 * its last copy's event), at slot_at[v] for slot variable v */
	LLVMValueRef slot_table;
	int64_t *slot_at, slot_words;
	bool fuse;        /* loops whose bodies qualify run as one kernel (CgOptions.fuse) */
	Vec(CgLoop) loops;
	int nnotes;       /* the fusion choices noted (dp_fusionN) */
	bool backward_marked; /* dp_step's rt_phase(RT_PHASE_BACKWARD) is emitted */
	int *uses;        /* per value: how many operands name it */
} Cg;

/* the most ops of a block emitted in one host function (host.c, lower_block) */
#ifndef CG_PART
#define CG_PART 256
#endif

LLVMValueRef cg_i64(Cg *g, int64_t v);
LLVMValueRef cg_real(Cg *g, double v);
/* makes real, rstore, realp and bf16 those of element type dt */
void cg_set_real(Cg *g, DType dt);
/* dp_mix (compiler/ops/rng.h) of an i64, in LLVM */
LLVMValueRef cg_mix(Cg *g, LLVMBuilderRef b, LLVMValueRef x);
/* Decides k's vector width and lanes (cg_kernel_shape), then finds or adds
 * it; returns its id. */
void cg_kernel_shape(Cg *g, KDesc *k);
int cg_kernel_id(Cg *g, KDesc *k);
/* Work items of its index space: outputs (or vectors of them); each runs on
 * k->lanes GPU threads, so a launch covers size * lanes threads. */
int64_t cg_kernel_size(Cg *g, const KDesc *k);
/* Rough work of one item in elements touched, for splitting a launch
 * between CPU threads: 1 for an element, a row's length for a row, a
 * tile's rows times the other side's rows times the width for attention. */
int64_t cg_kernel_work(Cg *g, const KDesc *k);
/* "fused[1024,1024]": kind and result shape, for names and profiles */
const char *cg_kernel_label(const KDesc *k);
/* Emits the body of kernel k for work item idx; args are the argument words
 * as i64; lane (i64) is the thread's place among k->lanes. Used by every
 * target's wrapper. */
void cg_kernel_body(Cg *g, LLVMValueRef fn, const KDesc *k, LLVMValueRef *args, LLVMValueRef idx, LLVMValueRef lane);
/* K_LOOP's body (host.c): the loop's ops, each an inline kernel over its
 * items; lane is the thread in the block on the GPU */
void cg_loop_body(Cg *g, LLVMValueRef fn, const KDesc *k, LLVMValueRef *args, LLVMValueRef lane);
/* The GPU's walk over k's n work items (ptx.c): thread gid of `threads`,
 * tid its place in the block; used by the kernel wrappers and, inside one
 * block, by fused loops. */
void cg_gpu_items(Cg *g, LLVMValueRef fn, const KDesc *k, LLVMValueRef *args, LLVMValueRef gid, LLVMValueRef tid,
                  LLVMValueRef threads, LLVMValueRef n);
void cg_barrier(Cg *g);                             /* bar.sync 0: the block's threads meet */
void cg_cpu_kernels(Cg *g);                         /* x86 wrappers and the table */
const char *cg_ptx(Cg *g);                          /* the kernels as NVPTX: PTX text */
void cg_optimize(LLVMModuleRef m, unsigned level);  /* the standard module pipeline */

#endif
