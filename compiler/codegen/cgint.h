/* codegen's private header: the LLVM context, the kernel builder and the
 * host-code builder that kernels.c, host.c and the op families' files
 * (leaves.c, movement.c, elementwise.c, linalg.c, reduce.c, nn.c,
 * attention.c, control.c: the op table's last column) share. */
#ifndef DPC_CGINT_H
#define DPC_CGINT_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

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
	int mode;          /* K_ATTN_ROWS: what it computes (attention.c); attention on tensor cores: 1 where it
	                    * writes its rows' log-sum-exp, at the word after its operands */
	int64_t blk[2];    /* K_ATTN_ROWS: the block's first query row, and T */
	int parts_align;   /* K_ATTN_ROWS: the bytes that the workspace's dP and P parts are aligned to (16 at most) */
	int stage;         /* a reduction over the grid in two launches: 1, each block's share into a
	                    * module array; 2, their total (cross_entropy on the GPU); 0: one kernel */
	int64_t pitch[2];  /* cross_entropy and its gradient: the rows' pitch of operand 0, the logits [0], and of
	                    * the result [1] (memplan/pitch.c); 0: rows packed */
	bool hat;          /* layernorm_grad: also writes dy hat (the scale's gradient's rows) at its last word */
} KDesc;

/* kinds beyond the IR's: the optimizers, runs of elementwise ops fused into
 * one kernel, and a loop's whole run as one kernel (host.c, fused loops) */
/* K_SGD, K_ADAM: the optimizer's step (mode 1: bf16-mixed's, which also writes the compute copy); K_FOLD,
 * K_REFRESH: bf16-mixed's gradient sum and compute copy (control.c) */
enum { K_SGD = OP__COUNT, K_ADAM, K_FUSED, K_LOOP, K_ATTN_ROWS, K_FOLD, K_REFRESH };

/* A loop that runs as one kernel: a forward loop's iterations, or the
 * actions of a revolve's schedule (rt_revolve gives them in chunks). One
 * thread block on the GPU, one call on the CPU. */
typedef struct {
	Op *op;
	bool step;         /* lowered in dp_step (a forward loop's tail tapes rows there) */
} CgLoop;

/* What a launch of a tensor-core attention kernel does (attention.c, cg_attn_mma_mix), in the units the
 * cost model prices each of the SM's pipes by: warp instructions of mma.m16n8k16, of ldmatrix.x4, of
 * ex2 and of the rest (integer and FP32 arithmetic, selects, shuffles), bytes through shared memory
 * (ldmatrix, cp.async's and the tiles' stores), bytes read again from L2 (the other side's tiles), and
 * the tensors' own bytes (operands and results once) */
typedef struct {
	double mma, ldmatrix, ex2, alu, shared, l2, dram;
	double fma, lds, shfl; /* attention in FMA (attn_fma.c): FMAs, vector loads from shared memory, shuffles */
	double per_step;       /* attention in FMA: a thread's warp instructions for one row of the other side; on
	                        * tensor cores: a warp's mma instructions a step */
	bool f64;              /* attention in FMA in f64: its FMAs at half FP32's rate */
	bool tf32;             /* on tensor cores as 3xTF32: mma is m16n8k8 .tf32's count, at TF32's rate */
} CgMix;

/* One launch of dp_step for the cost model (cost.c): a kernel of the
 * table, or a library call or copy the runtime makes; per launch, and
 * how many times one step makes it. */
typedef enum { CL_KERNEL, CL_GEMM, CL_CONV, CL_COPY } CgLaunchKind;
typedef struct {
	CgLaunchKind kind;
	int kernel;        /* its id in Cg.kernels, or -1 */
	const char *name;
	int64_t count, threads, blocks; /* blocks of 256 threads; -1: a library call's own */
	int64_t bytes, flops;
	DType dt;
	int attention;     /* 1: attention in tiles, 2: on tensor cores */
	int access;        /* bytes a thread loads at a time: the element's times the vector's */
	bool dw;           /* conv2d_dw */
	bool odd;          /* a GEMM with a leading dimension that is not a whole number of 16 bytes */
	bool items;        /* attention's GEMMs batched over address arrays (rt_gemm_items) */
	int64_t scan_ids, scan_step; /* embed_grad: the ids each thread reads (every one), and how many a step */
	double scan_hit;             /* embed_grad: the chance an id falls in a thread's part of the rows */
	int dynamic_smem;  /* the shared memory a launch asks for beside ptxas's static (cg_attn_smem) */
	bool wide;         /* tensor-core attention with heads wider than 64 (cg_attn_wide): one block an SM */
	CgMix mix;         /* attention on tensor cores (attention == 2): what it does, priced pipe by pipe */
} CgLaunch;

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
	int64_t copy_at;   /* the events of offloads and fetches: words copy_at + Op.index of slot_table */
	bool fuse;        /* loops whose bodies qualify run as one kernel (CgOptions.fuse) */
	bool reference;   /* CgOptions.reference */
	bool verbose;     /* CgOptions.verbose */
	Vec(CgLoop) loops;
	int nnotes;       /* the fusion choices noted (dp_fusionN) */
	bool backward_marked; /* dp_step's rt_phase(RT_PHASE_BACKWARD) is emitted */
	int *uses;        /* per value: how many operands name it */
	int *root;        /* per value: its storage root (VR_ALIAS followed), -1 not yet known: a long chain of
	                   * in-place results is walked once, not at each of its values */
	int moved_from, moved_to; /* cg_addr gives value moved_from the storage of moved_to (linalg.c's epilogues) */
	int ep_made[5], ep_apart; /* -v: the GEMM epilogues' call sites by kind (RT_EP_*), and those the plan's
	                           * storage left apart (linalg.c) */
	int *addr_from;   /* per value: where cg_addr starts, the first up its chain that is in the arena or is
	                   * a slice (itself included); -1 not yet known */
	bool cost;        /* record dp_step's launches for the cost model (cost.c) */
	int *lslot, lslots; /* the launches' hash table (cost.c) */
	bool cpu_splits;  /* CgOptions.cpu_splits */
	bool scalar_rows; /* CgOptions.scalar_rows */
	bool simt;        /* CgOptions.simt, on the CPU target */
	int threads;      /* CgOptions.threads */
	bool module_array; /* a kernel built since it was cleared read or wrote a module array (cg_global_array) */
	/* the kernels' units (units.c): modules of ctx, compiled apart; the CPU target's first unit is mod */
	LLVMModuleRef units[CG_UNITS_MOST];
	int nunits;
	bool units_ptx;   /* units[0..nunits) are the CUDA target's PTX units, not yet made PTX */
	bool one_unit;    /* every kernel in one unit (--emit=llvm and obj: one module, one object) */
	bool generic_cpu; /* CgOptions.generic_cpu */
	/* while a wrapper emits a body (cg_gpu_items, the SIMT emulator's
	 * threads): i1, whether this thread's row repeats another group's,
	 * the rows having run out in its warp; NULL where none can */
	LLVMValueRef dup;
	/* while cg_gpu_items emits attn_dkv or attn_dq on tensor cores (ptx.c, item_in_shared): the warp's i64
	 * of shared memory holding its work item, read back (volatile) after the loop over tiles and at the
	 * next item, so that the item is not kept in a register across the loop (ptxas spilled it at some
	 * shapes); NULL otherwise */
	LLVMValueRef item_slot;
	Vec(CgLaunch) launches;
} Cg;

/* the most ops of a block emitted in one host function (host.c, lower_block) */
#ifndef CG_PART
#define CG_PART 256
#endif

LLVMValueRef cg_i64(Cg *g, int64_t v);
LLVMValueRef cg_real(Cg *g, double v);
/* makes real, rstore, realp and bf16 those of element type dt */
void cg_set_real(Cg *g, DType dt);
/* dp_mix (common/rng.h) of an i64, in LLVM */
LLVMValueRef cg_mix(Cg *g, LLVMBuilderRef b, LLVMValueRef x);
/* Decides k's vector width and lanes (cg_kernel_shape), then finds or adds
 * it; returns its id. */
void cg_kernel_shape(Cg *g, KDesc *k);
int cg_kernel_id(Cg *g, KDesc *k);
/* Work items of its index space: outputs (or vectors of them); each runs on
 * k->lanes GPU threads, so a launch covers size * lanes threads. */
int64_t cg_kernel_size(Cg *g, const KDesc *k);
/* Rough work of one item in elements touched, for splitting a launch
 * between CPU threads: a vector's elements for an elementwise item (1
 * unvectorized), times the elements each result folds for a reduction, a
 * row's length for a row, a tile's rows times the other side's rows times
 * the width for attention. */
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


/* ---- the kernels' code in units, compiled on several threads (units.c) ---- */
int cg_units(const Cg *g);                     /* how many units g's kernels are split into */
int cg_unit_of(const Cg *g, int kernel, int units);
/* after kernel's body is built into unit: one that used a module array (g->module_array) is in the first */
void cg_unit_built(const Cg *g, int kernel, int unit);
void cg_ptx_units(Cg *g);                      /* the CUDA target's kernels as NVPTX IR in g->units (ptx.c) */
/* g->units compiled (and disposed) on g->threads threads, beside host(arg) where host is not NULL: the
 * PTX units' text as one module, or (the CPU target) NULL and the units' objects added to objs */
const char *cg_units_compile(Cg *g, void (*host)(void *), void *arg, CgObjects *objs);
LLVMTargetMachineRef cg_host_machine(bool generic); /* host.c: x86 for this CPU, or any x86-64 */
void cg_target_module(LLVMModuleRef m, LLVMTargetMachineRef tm); /* m's triple and data layout tm's */
#define CG_PTX_TRIPLE "nvptx64-nvidia-cuda"
LLVMTargetMachineRef cg_ptx_machine(void);     /* sm_80, PTX 7.5 (the NVPTX target initialized) */
/* the standard module pipeline; with tm, that target's costs */
void cg_optimize(LLVMModuleRef m, unsigned level, LLVMTargetMachineRef tm);
unsigned cg_host_level(void); /* host.c: the optimizer's level for CPU code (DPC_HOST_OPT) */

/* ---- building a kernel body (kernels.c) ----
 * A body is emitted for one work item. Its reals are loaded and stored in
 * the storage type (bf16 widened on the way in, rounded on the way out) and
 * computed in the compute type; elementwise values may be vectors of vec. */
typedef struct {
	Cg *g;
	LLVMValueRef fn;
	LLVMBuilderRef b;
	int vec;           /* elementwise values are vectors of this many */
	int lanes;         /* threads sharing one output (GPU reductions) */
	LLVMValueRef lane; /* this thread's place among them, i64 */
	/* rows on the GPU (cg_fold, cg_each, cg_row_lse): i1, whether this row's
	 * every access is 16-byte aligned (cg_aligned), where the body knows;
	 * then the lanes take the row in 16-byte vectors, else an element at a
	 * time. vec16: inside that branch, k->vec elements at aligned addresses */
	LLVMValueRef aligned;
	bool vec16;
	/* i1: this thread's row repeats another's (Cg.dup): it takes part in
	 * the row's collectives and stores nothing (cg_each, cg_store_once) */
	LLVMValueRef dup;
} K;

/* A counted loop inside a kernel body: for (i = start; i < n; i += step). */
typedef struct {
	LLVMBasicBlockRef pre, head, exit;
	LLVMValueRef i;
	int64_t step;
} Loop;

/* A running value across a loop: phi at the head, updated at the end. */
typedef struct {
	LLVMValueRef phi;
} Acc;

LLVMValueRef cg_ptr(K *k, LLVMValueRef word, LLVMTypeRef pt);     /* an argument word as a pointer */
LLVMValueRef cg_load(K *k, LLVMValueRef base, LLVMValueRef i);     /* element i, in the compute type */
void cg_store(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v);
/* v as its storage would hold it, in the compute type: bf16's rounding, else v */
LLVMValueRef cg_stored(K *k, LLVMValueRef v);
LLVMValueRef cg_kreal(K *k, double v);                             /* a constant of k->vec lanes */
LLVMValueRef cg_splat(K *k, LLVMValueRef x);
LLVMValueRef cg_vec_index(K *k, LLVMValueRef idx);                 /* an elementwise item's first element: idx k->vec */
LLVMValueRef cg_vload(K *k, LLVMValueRef base, LLVMValueRef i);    /* k->vec elements from i, a multiple of it */
void cg_vstore(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v);
LLVMValueRef cg_elem_load(K *k, bool i32, LLVMValueRef w, LLVMValueRef i); /* of an i32 or a real tensor at word w */
void cg_elem_store(K *k, bool i32, LLVMValueRef w, LLVMValueRef i, LLVMValueRef v);
/* Operand t of an elementwise kernel at the result's coordinates: a vector
 * where its elements run along the result's last axis, else one element
 * broadcast. */
LLVMValueRef cg_operand(K *k, LLVMValueRef base, Type t, Type out, LLVMValueRef *coord);
LLVMValueRef cg_word_real(K *k, LLVMValueRef w);                   /* a double passed by bit pattern */
/* math: the llvm.* intrinsics on the CPU (erf from libm), libdevice on the GPU */
LLVMValueRef cg_math(K *k, const char *name, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_exp(K *k, LLVMValueRef x);
LLVMValueRef cg_log(K *k, LLVMValueRef x);
LLVMValueRef cg_sqrt(K *k, LLVMValueRef x);
LLVMValueRef cg_max(K *k, LLVMValueRef a, LLVMValueRef b);
/* n values of type t on the item's stack, made once in the entry block (a loop reuses them) */
LLVMValueRef cg_entry_alloca(K *k, LLVMTypeRef t, int64_t n);
/* a call of intrinsic `name`; an llvm.nvvm.* one in a CPU module calls the
 * SIMT emulator's function for it (DPC_SIMT; kernels.c's table, which
 * stops the compiler on one it does not have) */
LLVMValueRef cg_intrinsic(K *k, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n);
/* loops: cg_for counts from 0, cg_for_lanes takes this lane's share */
Loop cg_for_from(K *k, LLVMValueRef start, int64_t step, LLVMValueRef n);
Loop cg_for(K *k, LLVMValueRef n);
Loop cg_for_lanes(K *k, LLVMValueRef n);
void cg_for_end(K *k, Loop *l, LLVMValueRef n);
Acc cg_acc(K *k, Loop *l, LLVMValueRef init);
void cg_acc_next(K *k, Acc *a, LLVMValueRef v);
/* the value after the loop: init when it ran zero times, else the last update */
LLVMValueRef cg_acc_result(K *k, Loop *l, LLVMValueRef init, LLVMValueRef last);
/* code emitted between cg_if and cg_end_if runs when c holds */
LLVMBasicBlockRef cg_if(K *k, LLVMValueRef c);
void cg_end_if(K *k, LLVMBasicBlockRef join);
/* the lanes of a GPU reduction: every lane's partial in, the whole out in
 * every lane, the same bits from run to run; a result stored by lane 0 */
LLVMValueRef cg_combine(K *k, LLVMValueRef a, LLVMValueRef b, bool max);
LLVMValueRef cg_all_reduce(K *k, LLVMValueRef v, bool max);
void cg_store_once(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v);
/* a block's shared array, one per name (on the CPU, for the SIMT emulator:
 * thread-local), and a generic pointer to its first element of type elem */
LLVMValueRef cg_shared_array(Cg *g, const char *name, LLVMTypeRef at);
/* the GPU module's dynamic shared memory (extern .shared, sized at launch), as i32 words */
LLVMValueRef cg_dynamic_shared(Cg *g);
LLVMValueRef cg_shared_ptr(K *k, LLVMValueRef s, LLVMTypeRef elem);
/* n reals of the compute type in the GPU module's global memory, zeroed, one
 * array per name: its first element's generic address */
LLVMValueRef cg_global_array(K *k, const char *name, int64_t n);
/* rows: a fold (a sum, or the max) of term over n contiguous elements from
 * base (at: an element's index, i: its place in the row), or fn at each;
 * vectors on the CPU, lanes on the GPU. cg_row_load and cg_row_store move
 * k->vec elements at any alignment. */
typedef LLVMValueRef CgTerm(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i);
typedef void CgEach(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i);
LLVMValueRef cg_fold(K *k, LLVMValueRef base, int64_t n, bool max, LLVMValueRef init, CgTerm *term, void *ctx);
/* rows in GPU form: the lanes share them (the GPU, and the SIMT emulator's blocks) */
bool cg_gpu_form(const K *k);
/* i1: each p[j] + off[j] elements (off[j] NULL: + 0) is a multiple of 16
 * bytes; NULL outside GPU form (the CPU's rows need no alignment) */
LLVMValueRef cg_aligned(K *k, int n, const LLVMValueRef *p, const LLVMValueRef *off);
/* reals of storage in 16 bytes: a GPU row's vector */
int cg_row_vec(const Cg *g);
/* the bytes a lane of kernel d loads at a time on the GPU where its rows
 * take vectors (16: the rows' pitch a whole number of 16 bytes), else 0 */
int cg_row_access(const Cg *g, const KDesc *d);
void cg_each(K *k, LLVMValueRef base, int64_t n, CgEach *fn, void *ctx);
LLVMValueRef cg_row_load(K *k, LLVMValueRef base, LLVMValueRef i);
void cg_row_store(K *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v);
/* index arithmetic */
void cg_unravel(K *k, Type t, LLVMValueRef idx, LLVMValueRef *coord);
LLVMValueRef cg_bcast_offset(K *k, Type t, Type out, LLVMValueRef *coord);
int64_t cg_rows(Type t); /* rows of the last axis */
/* which input axes a reduction keeps (and where they are in its result);
 * returns how many elements fold into each output */
int64_t cg_reduced_axes(const KDesc *d, bool *kept, int *out_axis);

/* ---- building host code (host.c) ---- */
typedef Vec(int) IntVec;

typedef struct {
	Cg *g;
	LLVMValueRef fn, ctx, base, argbuf;
	LLVMValueRef *index;       /* per value: host i64 of index values */
	IntVec *scoped;            /* the loop indices in scope: index values that are not constants */
	int *uses;                 /* per value: how many operands name it */
	LLVMTypeRef t_launch, t_gemm, t_copy, t_zero, t_count, t_base, t_revolve, t_key, t_on;
	LLVMValueRef f_launch, f_gemm, f_copy, f_zero, f_count, f_base, f_revolve, f_key, f_on;
	LLVMTypeRef t_act_copy, t_act_wait;
	LLVMValueRef f_act_copy, f_act_wait;
	LLVMTypeRef t_fetch, t_wait, t_update, t_grad_in, t_allreduce, t_reset, t_snap_copy, t_phase;
	LLVMValueRef f_fetch, f_wait, f_update, f_grad_in, f_allreduce, f_reset, f_snap_copy, f_phase;
	bool step;                 /* in dp_step (and its parts), which the adjoint follows */
	int norow;                 /* a forward loop's row index outside its tail: its stores do not run */
	/* inside a fused loop's kernel (cg_loop_body): each op's kernel and copy
	 * inline, over the block's threads (tid, on the GPU) or in one loop */
	bool device;
	LLVMValueRef tid;
	int64_t times;             /* how often this code runs in one dp_step (cost.c); 0 outside it */
	Op *op;                    /* the op being lowered */
} Host;

LLVMValueRef cg_addr(Host *h, int v);  /* a value's device address: arena base + offset, through views */
void cg_call(Host *h, LLVMTypeRef t, LLVMValueRef f, LLVMValueRef *args, int n); /* a runtime call */
/* kernel d with these argument words: a launch, or inline in a fused loop */
void cg_launch(Host *h, KDesc *d, LLVMValueRef *words, int nwords);
void cg_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes);
/* An op that becomes one kernel over its result and operands; a reduction
 * given `into` adds its result there (an absorbed acc). */
void cg_lower_kernel(Host *h, Op *op, LLVMValueRef into);
/* a kernel description with op's kind, attributes and `to`, zeroed elsewhere */
KDesc cg_kdesc(Op *op);
LLVMValueRef cg_acc_target(Host *h, Op *acc); /* where an acc / acc_slice adds to */
void cg_lower_block(Host *h, Block *b, int from, int to);
/* starts function fn(ctx, ...): its entry block, the argument buffer, the arena base */
void cg_begin(Host *h, LLVMValueRef fn);
/* the plan computed `from` in the storage of `to`, or of its slice [index] */
bool cg_coalesced(Program *p, int from, int to, int index);
void cg_extent(Cg *g, int v, int64_t *lo, int64_t *hi); /* the arena bytes v's root spans */
void cg_string_global(Cg *g, const char *name, const char *text);
/* a constant array of n i64 in the module, internal (a shape for the runtime, a schedule's table) */
LLVMValueRef cg_i64_table(Cg *g, const char *name, const int64_t *v, int64_t n);
/* the runtime's function `name` (declared once; its pointers nonnull), and its type in *ft */
LLVMValueRef cg_declare(Cg *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n, LLVMTypeRef *ft);

/* ---- the op families ----
 * cg_kernel_F emits the body of kernel d of family F for work item idx
 * (ptrs: the argument words as pointers, the result's then each operand's);
 * cg_host_F emits an op's host code where it is more than one kernel over
 * its result and operands, and returns false to leave it to cg_lower_kernel. */
#define CG_FAMILY(F) \
	void cg_kernel_##F(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx); \
	bool cg_host_##F(Host *h, Op *op);
CG_FAMILY(leaf) CG_FAMILY(movement) CG_FAMILY(elementwise) CG_FAMILY(linalg) CG_FAMILY(reduce) CG_FAMILY(nn) CG_FAMILY(attention)
CG_FAMILY(control)
#undef CG_FAMILY

/* elementwise.c: a run of elementwise ops of one shape as one kernel
 * (K_FUSED); returns how many of b[from..to) it took */
int cg_lower_fused(Host *h, Block *b, int from, int to);
/* linalg.c: C = A @ B into dst (beta 1 adds to it); a sum over leading axes
 * as ones @ x, false when op is not one */
void cg_gemm(Host *h, Op *op, LLVMValueRef dst, double beta);
/* the GEMM b[i] and the elementwise ops after it that an epilogue applies in one call (rt_gemm_ep), where
 * Program.epilogues asks: false if none; else the positions of the ops it took in at[0..*nat) */
bool cg_gemm_epilogue(Host *h, Block *b, int i, int to, int *at, int *nat);
/* the sum over leading axes b[i] (a bias's gradient, dY's column sums) made by the call of a later GEMM
 * X^T @ dY (the weight's gradient) as its epilogue: false if none; else the positions of the ops it took
 * (the GEMM, and the acc it adds into) in at[0..*nat) */
bool cg_gemm_bgrad(Host *h, Block *b, int i, int to, int *at, int *nat);
#define CG_EPILOGUE_OPS 3
/* nn.c: the residual add before a layernorm, or after a layernorm_grad, b[i] and b[i + 1] as one kernel
 * (KDesc.mode, below), and a layernorm_grad's dy hat (KDesc.hat), where Program.epilogues asks: false if
 * neither; else the positions of the ops it took in at[0..*nat) */
bool cg_norm_add(Host *h, Block *b, int i, int to, int *at, int *nat);
/* a layernorm kernel's mode: x = a + res made as it goes, stored beside (words: m, a, g, b, res, x); or the
 * gradient added to res (words: y, x, g, dy, res), stored beside (then the word after, v) */
enum { NORM_ADD = 1, NORM_GRAD_ADD, NORM_GRAD_ADD_BOTH };
/* -v: what cg_gemm_epilogue and cg_gemm_bgrad made, on stderr */
void cg_epilogue_note(const Cg *g);
/* host.c: whether v has bytes in the arena (its own, or as a view); and, as an operand, is not a
 * constant (an immediate in a fused kernel) */
bool cg_in_arena(const Program *p, int v);
bool cg_operand_in_arena(const Program *p, int v);
/* whether op is a view that makes no code where the host is now (a reshape, a slice at an index known) */
bool cg_view_here(Host *h, const Op *op);
/* host.c: the acc after the GEMM b[i] that absorbs its product, or -1 */
int cg_absorbed_acc(Host *h, Block *b, int i, int to);
bool cg_leading_sum(Host *h, Op *op, LLVMValueRef dst, double beta);
/* reduce.c: the log-sum-exp of C entries of x from base (split: the lanes share the row), and their max */
LLVMValueRef cg_row_lse(K *k, LLVMValueRef x, LLVMValueRef base, int64_t C, bool split, LLVMValueRef *max_out);
/* the same in one pass over n entries (a value), each times scale, this
 * kernel's lanes sharing them; raw: x holds the compute type */
LLVMValueRef cg_lse_online(K *k, LLVMValueRef x, bool raw, LLVMValueRef base, LLVMValueRef n, double scale, LLVMValueRef *max_out);
/* kernels.c: the parts of a GPU reduction in two launches (KDesc.stage), 1 for one launch */
#define CG_REDUCE_PARTIALS 65536
int64_t cg_reduce_parts(const Cg *g, const KDesc *d);
/* nn.c: the blocks of the first stage of cross_entropy, mse and count_labels on the GPU (KDesc.stage);
 * the parts of embed_grad's table rows (a work item per part and column) */
int64_t cg_total_blocks(const KDesc *d);
int64_t cg_embed_parts(const Cg *g, const KDesc *d);
/* the ids embed_grad's threads read a step: 8 in two 16-byte loads where the count allows (and not
 * DPC_ROW_VECTORS=off), else 1 */
int cg_embed_ids(const Cg *g, const KDesc *d);
/* attention.c: the tile sizes of an attention kernel; false: one row per item.
 * cg_attn_mma: its items run on tensor cores, a block of 8 warps each */
bool cg_attn_tiles(const Cg *g, const KDesc *d, int64_t *tq, int64_t *tk);
bool cg_attn_mma(const Cg *g, const KDesc *d);
/* attention the frontend marked (Attr.attn.flash) on the GPU or the SIMT
 * emulator: on tensor cores in bf16 (cg_attn_mma), else in FMA (attn_fma.c:
 * cg_attn_fma, a block of 256 threads taking cg_attn_fma_rows rows of a
 * head, the other side's rows cg_attn_fma_tile at a time) */
bool cg_attn_flash(const Cg *g, const KDesc *d);
void cg_attn_fma(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef item);
int64_t cg_attn_fma_rows(const KDesc *d);
int64_t cg_attn_fma_tile(void);
int64_t cg_attn_fma_mix(const KDesc *d, CgMix *mix); /* the launch's blocks */
/* the value of the lane whose number differs from this one's in bit `mask` (a warp shuffle) */
LLVMValueRef cg_shuffle_xor(K *k, LLVMValueRef v, int mask);
int64_t cg_attn_mma_mix(const KDesc *d, CgMix *mix); /* the launch's blocks */
int64_t cg_attn_tile_bytes(const KDesc *d); /* a tensor-core attention block's tile memory, static or not */
/* a tensor-core attention kernel's dynamic shared memory: its tile memory's
 * bytes where they pass PTX's 48 KiB of static shared memory (bf16's heads
 * wider than 64, f32's of 64 and wider), else 0 */
int64_t cg_attn_smem(const KDesc *d);
/* heads wider than 64: the tensor-core kernels may take 255 registers a thread (one block an SM) */
bool cg_attn_wide(const KDesc *d);
void cg_attention_lse(Host *h, Block *b, int i); /* an attention and the attn_lse it writes as it goes */
/* what a K_ATTN_ROWS kernel computes (KDesc.mode; body_attn_rows) */
enum { AR_SOFTMAX, AR_STATS, AR_DS, AR_P, AR_LSE, AR_SOFTMAX_LSE, AR_DELTA, AR_DS_P };
/* K_ATTN_ROWS: the keys a lane takes at once (16 bytes of S, or 1 where its rows are not whole vectors) */
int cg_attn_rows_vec(const KDesc *d);
/* cost.c: the launches of dp_step as they are emitted (a kernel, a GEMM
 * of elem-byte reals with leading dimensions ld, a convolution moving
 * bytes, a copy or with zero a memset); cg_cost_revolve: how often a binomial schedule runs its
 * advance, taped-step, tape and snapshot functions in one step */
void cg_cost_kernel(Host *h, int id, int64_t threads, bool one_block);
/* items: attention's GEMMs batched over address arrays (rt_gemm_items), priced apart */
void cg_cost_gemm(Host *h, int elem, int64_t m, int64_t n, int64_t k, int64_t batch, const int64_t ld[3], bool items);
/* a GEMM with epilogue epi (RT_EP_*; bgrad: with the sum of the result's rows), aux: it writes or reads a
 * matrix the size of the result beside it */
void cg_cost_gemm_ep(Host *h, int epi, bool bgrad, int elem, int64_t m, int64_t n, int64_t k, const int64_t ld[3], bool aux);
void cg_cost_conv(Host *h, Op *op, int64_t bytes);
void cg_cost_copy(Host *h, int64_t bytes, bool zero);
void cg_cost_revolve(Host *h, Op *op, int64_t times[4]);
/* what ptxas -v says of a kernel */
typedef struct {
	bool known;
	int regs, stack, smem;
	int instr; /* from the PTX: a thread's instructions for one work item (cost.c, ptx_instr), 0 unknown */
} CgRes;
/* each kernel's predicted time in ns on the GPU named (NULL: the H100), 0 when it has none */
void cg_cost_kernels_ns(Cg *g, const char *gpu, int64_t *ns);
/* prices the recorded launches on gpu (ptx: the kernels, for ptxas; NULL: none) */
/* the step's launches priced on gpu, with the link and the host update (its memory's bandwidth host_bw,
 * bytes/s) beside them: a table of them (or as --schedule-json's members), or the step's summary alone */
void cg_cost_report(Cg *g, const CgGpu *gpu, double host_bw, const char *ptx, bool json, bool table, bool verbose, FILE *f);

/* control.c: inside a fused loop, a kernel's items and a copy (NULL src: zeros) run inline */
void cg_dev_kernel(Host *h, KDesc *d, LLVMValueRef *words);
void cg_dev_copy(Host *h, LLVMValueRef dst, LLVMValueRef src, int64_t bytes);

#endif
