/* ir: the program representation every pass takes and returns.
 *
 * A Program holds a table of values and one top-level Block of ops.
 * Values are SSA tensors of static shape, index scalars (loop counters), or
 * mutable variables (gradients, accumulators, tapes) written only by the
 * OPF_WRITE ops. Control flow is structured: OP_LOOP owns a body Block. */
#ifndef DPC_IR_H
#define DPC_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../util/util.h"

#define IR_MAXRANK 6

typedef enum {
	/* reals, by how they are stored. The source's f32 is the program's real
	 * (Program.real): bf16 under --precision bf16, f64 under --precision f64,
	 * which also makes bf16 values f64 (the checking build). */
	DT_F32,
	DT_BF16,  /* 16 bits in memory, computed in f32 */
	DT_F64,
	DT_I32,   /* labels and indices */
	DT_INDEX, /* a loop counter: a host-side integer, no storage */
} DType;

typedef struct {
	DType dt;
	int rank;
	int64_t dim[IR_MAXRANK];
} Type;

enum {
	OPF_LEAF = 1 << 0,
	OPF_VIEW = 1 << 1,  /* result aliases operand 0's storage */
	OPF_EW = 1 << 2,    /* elementwise with broadcasting */
	OPF_RED = 1 << 3,
	OPF_WRITE = 1 << 4, /* writes variable operand 0; no result */
	OPF_IN0 = 1 << 5,   /* may write its result in operand 0's storage: each element read before it is written */
};

typedef enum {
#define X(name, text, arity, flags, shape, adjoint, form, low, attr, cost, family) OP_##name,
#include "ops.def"
#undef X
	OP__COUNT
} OpKind;

/* How a program calls an op by its name, as a builtin function. */
typedef enum {
	FE_NONE,      /* not callable by name */
	FE_EW,        /* f(x, ...), elementwise: as many arguments as the op's arity */
	FE_ROWWISE,   /* f(x) over the last axis of a tensor */
	FE_REDUCE,    /* f(x), f(x, axis) or f(x, [axes]) */
	FE_RESHAPE,   /* reshape(x, [dims]) */
	FE_TRANSPOSE, /* transpose(x) or transpose(x, [perm]) */
	FE_LOSS,      /* f(a, b), a scalar */
	FE_LAYERNORM, /* layernorm(x, g, b) or layernorm(x, g, b, eps=E) */
	FE_EMBED,     /* embed(table, ids) */
	FE_ATTENTION, /* attention(q, k, v, heads=H) or with causal=1 */
	FE_PAD,       /* pad(x, axis, before, after) */
	FE_CONCAT,    /* concat([a, b, ...], axis) */
	FE_DROPOUT,   /* dropout(x, p) */
} FeForm;

/* How codegen spreads an op's kernel over work items (and GPU threads). */
typedef enum {
	LW_HOST,   /* no kernel of its own: leaves, views, control, copies, GEMMs, transfers */
	LW_EACH,   /* a work item per result element (elementwise ops: a vector of them) */
	LW_REDUCE, /* a work item per result element; lanes share the elements it folds when they are contiguous */
	LW_ROWS,   /* a work item per row of the last axis; lanes share the row */
	LW_TOTAL,  /* one work item, a block of lanes, for a scalar of the whole tensor */
	LW_COLS,   /* a work item per column of the result */
	LW_HEADS,  /* a work item per row of one attention head */
} LowClass;

/* A 2-D sliding window over the last two axes (unfold, fold): kernel,
 * stride, zero padding and dilation, each as (rows, columns); g: a
 * convolution's groups (0 elsewhere), each of C/g input channels making
 * O/g output channels. */
typedef struct {
	int kh, kw, sh, sw, ph, pw, dh, dw, g;
} Window;

/* a convolution's groups: 1 unless set */
static inline int ir_groups(const Window *w) { return w->g > 1 ? w->g : 1; }

/* Which of an op's attributes it has: its kind's attr column in ops.def. */
typedef enum {
	AT_NONE,
	AT_VALUE,   /* value: const and fill's value, layernorm's eps */
	AT_AXES,    /* axes: the reduced axes, bit i for axis i */
	AT_PERM,    /* perm: result axis i is operand axis perm[i] */
	AT_MATMUL,  /* mm.ta, mm.tb: use the transpose of a / b */
	AT_HEADS,   /* attn.heads, attn.causal */
	AT_AXIS,    /* ax.axis, ax.at: range's first element, pad's zeros before, concat's a size; argmax's axis */
	AT_WINDOW,  /* win */
	AT_LABELS,  /* lab.has, lab.ignore: the label that counts for nothing */
	AT_PADDING, /* lab.has, lab.ignore: embed's padding_idx, the row whose ids add nothing to the gradient */
	AT_DROPOUT, /* drop.p, drop.site: its place in the program, which keys its draws */
	AT_LITERAL, /* lit.v: a constant tensor's elements, row-major (arena memory, shared by copies) */
} AttrKind;

/* An op's attributes, tagged by its kind (AttrKind). Ops are made zeroed
 * and copied whole, so equal attributes are equal bytes: codegen hashes
 * kernel descriptions that hold them. */
/* the ways an attention can go, as the cost model prices them (cg_attn_price): on GEMMs with a workspace;
 * on dpc's own kernels in FlashAttention-2's order (on tensor cores in bf16, in FMA in f32 and f64); f32 on
 * tensor cores as 3xTF32 (Attr.attn.tf32) */
typedef enum { ATTN_GEMMS, ATTN_OWN, ATTN_TF32 } AttnPath;

typedef union {
	double value;
	uint32_t axes;
	int perm[IR_MAXRANK];
	struct {
		int ta, tb;
	} mm;
	struct {
		int heads;
		bool causal;
		/* on tensor cores in FlashAttention-2's order, with no workspace
		 * (the frontend's choice, FeOptions): the forward keeps its rows'
		 * log-sum-exp (attn_lse), the adjoint takes attn_delta, attn_dkv
		 * and attn_dq */
		bool flash;
		/* in f32, flash on tensor cores as 3xTF32: each product the sum of
		 * three TF32 products of the operands' high and low parts (the
		 * frontend's choice, priced against the FMA kernels and GEMMs) */
		bool tf32;
	} attn;
	struct {
		int axis;
		int64_t at;
	} ax;
	Window win;
	struct {
		bool has;
		int ignore;
	} lab;
	struct {
		double p;
		int site;
	} drop;
	struct {
		const double *v;
	} lit;
} Attr;

typedef struct Program Program;
typedef struct Op Op;
typedef struct Ad Ad; /* ad_transform's state, for the adjoint rules */
typedef struct Interp Interp; /* the reference interpreter's state (compiler/ops/ops.h) */

/* How an op's floating-point operations are counted (ops.def's cost
 * column, ir_op_flops): the figures a schedule's recomputation is weighed by. */
typedef enum {
	FL_NONE, /* data movement, views, leaves, variables, control: 0 */
	FL_EW,   /* 1 per result element, whatever the function */
	FL_IN,   /* 1 per element of its largest operand (reductions, losses, accumulation) */
	FL_ROW,  /* 5 per element of its largest operand (softmax, layernorm, cross_entropy) */
	FL_GEMM, /* 2 m n k per product */
	FL_ATTN, /* per head and visible (query, key) pair, Dh times 4 (attention), 2 (stats), 6 (dq, dk), 4 (dv) */
	FL_CONV, /* 2 N O Ho Wo C kh kw: the output's elements times a window's, twice */
} FlopClass;

/* An op kind's entry in the op table (ops.def). */
typedef struct {
	const char *name;
	int arity;
	int flags;
	const char *(*shape)(Program *p, Op *op, Type *out); /* compiler/ops/: the family's file */
	void (*adjoint)(Ad *a, Op *op, int g);               /* likewise: contributions to the operands' adjoints */
	void (*run)(Interp *m, Op *op);                      /* likewise, ops_run_<shape>: its meaning, in the reference interpreter */
	FeForm form;
	LowClass low;
	AttrKind attr;
	FlopClass flops;
} OpInfo;
extern const OpInfo ir_ops[OP__COUNT];
/* operand k of op may give op's result its storage where k dies there (memplan's in_place): an elementwise op
 * (each element read and written by one thread), or an OPF_IN0 op's operand 0 */
bool ir_may_lend(const Op *op, int k);

typedef enum {
	VK_SSA,   /* defined once by an op (or a loop as block argument / result) */
	VK_INDEX, /* loop counter */
	VK_VAR,   /* mutable buffer */
} ValueKind;

/* Where a value lives after stream_pass's memory plan:
 *  VR_ARENA: bytes [offset, offset + size) of the device arena.
 *  VR_ALIAS: the storage of value alias_of. A SLICE result x[i] lives at
 *            addr(x) + i * bytes(result type); a RESHAPE result and a loop's
 *            cout[k] (alias of carg[k]) at the same address. The plan
 *            may also compute a value in the storage it is copied to:
 *            alias_of the target, or its slice [alias_index] (an index
 *            value) for a store_slice; and an elementwise result in
 *            the storage of its operand alias_of, which dies there
 *            (alias_index IR_IN_PLACE); and a product that the acc right
 *            after it adds into alias_of, made there as it is computed
 *            (alias_index IR_ACC_INTO: codegen's absorbed acc).
 *  VR_HOST:  bytes [offset, offset + size) of the pinned host pool: a
 *            streamed parameter and its optimizer state (stream_pass).
 * Index values and CONSTs of rank 0 live nowhere (VR_NONE): codegen
 * materialises constants into kernels and index values as host integers. */
typedef enum {
	VR_NONE,
	VR_ARENA,
	VR_ALIAS,
	VR_HOST,
} Residence;


/* What a VK_VAR holds; the memory plan accounts each class apart. */
/* VC_SLOT: the device slots [k, ...unit] of a streamed tensor; a slice
 * S[i] of one is slot i mod k. */
/* VC_STAGE: an `update B[l]`'s staging copy of B, which only the forward
 * program writes: recomputations leave it alone. */
/* VC_HOST: a forward value's copy in the host pool, offloaded after its
 * definition and fetched again for the adjoint (checkpoint_pass/graph.c). */
/* VC_HGRAD: a streamed parameter's gradients in the host pool, [L, ...unit]:
 * each reverse step's `update` copies its unit's gradient down there, and the
 * host sums the micro-batches and applies the optimizer's step. */
typedef enum { VC_NONE, VC_GRAD, VC_TAPE, VC_ACC, VC_SNAP, VC_OPT, VC_SLOT, VC_HSNAP, VC_STAGE, VC_HOST, VC_HGRAD } VarClass;

/* The optimizer is chosen at compile time: its state is planned memory. */
typedef enum { OPT_SGD, OPT_ADAM } Optimizer;

typedef struct {
	ValueKind kind;
	VarClass vclass;  /* VK_VAR only */
	Type type;
	const char *name; /* source name or NULL; printing adds the id */
	Op *def;          /* defining op, NULL for loop block arguments and vars */
	Loc loc;
	/* memory plan (stream_pass) */
	Residence res;
	int64_t offset;
	int alias_of;
	int alias_index;  /* -1, the index of the slice of alias_of it lives in, IR_IN_PLACE or IR_ACC_INTO */
	/* the memory plan's row pitch (memplan/pitch.c): the elements a row of the last axis takes in storage,
	 * more than the axis where that is not a whole number of 16 bytes and only GEMMs and cross_entropy
	 * touch the value; 0: rows are packed */
	int64_t pitch;
} Value;

/* Value.alias_index of an elementwise result computed in its dying operand's storage */
#define IR_IN_PLACE (-2)
/* Value.alias_index of a product added into its acc's target as it is made */
#define IR_ACC_INTO (-3)
bool ir_adds_into(const Op *op);
/* Whether the product an acc adds may be made into its target (IR_ACC_INTO,
 * codegen's absorbed acc). Not into a stacked parameter's gradient (or a
 * streamed one's unit), except under bf16-mixed: with --accum K a resident
 * layer's gradient adds each micro-batch's to the earlier ones', while a
 * streamed layer's is made on its own and added to the sum on the host
 * (runtime/host_update.c); a product made into the sum (a GEMM adding its
 * blocks of k one by one) would round otherwise, and the two plans differ
 * alike. Under bf16-mixed each micro-batch's gradient is made on its own
 * either way. */
bool ir_may_absorb(const Program *p, const Op *acc);

typedef struct {
	Op **ops;
	int len, cap;
} Block;

typedef enum { INIT_ZEROS, INIT_ONES, INIT_NORMAL, INIT_UNIFORM, INIT_LOAD } InitKind;

typedef struct {
	const char *name;
	Type type;        /* full type, stack axis first when stacked */
	int stacked;      /* 1 when declared f32[L][...] */
	bool buffer;      /* `buffer`: kept and saved like a parameter, never trained (no gradient) */
	bool nodecay;     /* `nodecay`: AdamW's weight decay leaves it, whatever its rank */
	InitKind init;
	double a, b;      /* normal: std in a; uniform: [a, b) */
	const char *saved; /* load("NAME"): its name in the weights file, --init's and --save's files */
	Loc loc;
	int value;        /* the OP_PARAM value */
	int grad;         /* VK_VAR holding d loss / d param; -1 before ad_transform */
	int opt_m, opt_v; /* Adam's moments (VK_VAR, VC_OPT; f32 under bf16-mixed); -1 without them */
	/* bf16-mixed (Program.mixed): value is the bf16 compute copy the program
	 * reads; master is the f32 master copy the optimizer updates, gsum the f32
	 * sum of the micro-batches' gradients (resident only: the host sums a
	 * streamed one's); VK_VAR, VC_OPT; -1 otherwise */
	int master, gsum;
	/* streamed (stream_pass): the value, the master copy and the moments live
	 * in the host pool, grad is one unit's gradient, the units pass through
	 * device slots, and hgrad (VC_HGRAD) is where each unit's gradient goes
	 * down to for the host's update */
	bool streamed;
	int slot, hgrad; /* -1 when absent */
} Param;

/* a value the loss block reports beside the loss (`report NAME = e`): a
 * scalar of the forward program, kept to its end for the runtime to read */
typedef struct {
	const char *name;
	int value;
	Loc loc;
	int param;        /* an update (`update NAME = e`): the buffer that takes the value after a training step; -1 for a report */
} Report;
#define IR_MAX_REPORTS 16
/* every buffer may have its update: as many as parameters and buffers (common/abi.h's RT_MAX_PARAMS) */
#define IR_MAX_UPDATES 4096

typedef struct {
	const char *name;
	Type type;
	int classes;      /* i32 inputs used as cross_entropy labels or embed ids: the bound on the ids, else 0 */
	bool has_ignore;  /* labels whose cross_entropy ignores one value: `ignore`, which the data may hold too */
	int ignore;
	Loc loc;
	int value;
} Input;

struct Op {
	OpKind kind;
	Loc loc;
	int nin;
	int *in;          /* operand value ids */
	int out;          /* result value id, -1 when none */
	/* attributes */
	int index;        /* PARAM/INPUT: table index; IDX: the index */
	Type to;          /* RESHAPE, BROADCAST, SUM_TO, EMBED_GRAD, RANGE, PAD, FOLD, INTERP, ARANGE, CAST, FILL: the result type */
	Attr attr;        /* the rest: which member is the kind's attr column in ops.def */
	/* OP_LOOP: for ivar in lo..lo+trip-1 (downward when reverse), carrying values.
	 * in[k] initialises carg[k]; after each iteration carg[k] = cyield[k];
	 * after the loop cout[k] holds the last value. */
	int64_t lo, trip;
	bool reverse;
	int ivar;
	int ncarry;
	int *carg, *cyield, *cout;
	Block body;
	int counter;      /* OP_LOOP: runtime counter (RT_COUNT_*) bumped once per iteration, or -1 */
	Op *primal;       /* an adjoint OP_LOOP: the forward loop it reverses */
	Op *sweep;        /* a forward OP_LOOP: the OP_REVOLVE whose snapshots it saves (the sweep schedule);
	                   * when that revolve has a tape of rows, the loop keeps its stores into them,
	                   * indexed by irow: in dp_step's last ir_loop_tail() iterations only, at
	                   * irow = t - (trip - tail), and the revolve starts with their adjoints */
	bool recomputed;  /* in a reverse loop's body: a copy of a forward op, computed again from the carried state */
	/* OP_REVOLVE: reverses the loop lo..lo+trip-1 with nsnap snapshot slots.
	 * carg holds the current state, in[k] its initial value; `body` advances
	 * one step (ivar, yields cyield); `body2` is step ivar2's taped step and
	 * adjoint, reading the state in carg; snap[k] are the snapshot variables
	 * ([nsnap, ...carg[k]]). The runtime drives the binomial schedule.
	 * With nhost > 0, slots [0, nhost) live in the host pool, in hsnap[k]
	 * ([nhost, ...], VC_HSNAP): the lowest, which the schedule saves and
	 * restores least. snap[k] then holds slot j at row j - nhost and one more
	 * row, the staging row that host copies pass through.
	 * With a tape of ktape > 0 rows (--checkpoint auto), a taped action
	 * covers up to ktape steps: `body3` is forward step ivar taped into row
	 * irow of each tape, yielding cyield3 as the next state, and `body2` is step
	 * ivar2's adjoint, reading row irow. With ktape = 0, body2 recomputes
	 * its step from the state and body3 is empty. */
	Block body2, body3;
	int ivar2, nsnap, nhost, irow;
	int *cyield3;
	int64_t ktape;
	bool swept;       /* OP_REVOLVE: its forward loop saved the segments' starts (rev_sweep_schedule) */
	bool no_sweep;    /* OP_REVOLVE: a budget's fit chose to advance from the loop's start (ckpt_fill_slots) */
	bool replay;      /* OP_REVOLVE with a tape of rows: the carried values' tapes keep one row, a taped run's
	                   * first state, and body2 reads the state from carg: before the adjoint of the run's
	                   * j-th step the runtime makes it again from that row, replaying j steps of body3's
	                   * ops the next state needs from what the rows keep (rev_replay_marks, checkpoint_pass/
	                   * rows.c) */
	struct RevPool *pool; /* OP_REVOLVE with a tape: pooled rows, slots beyond 0 in the carried tapes' rows
	                        * (rev_pool_schedule, checkpoint_pass/ckpt.h), or NULL */
	int64_t ptail;    /* with a pool: the steps its forward loop tapes (the pool's tail, for ir_loop_tail) */
	int *snap, *hsnap;
	const char *role; /* free text shown by the printer: "forward", "adjoint", "recompute" */
	int64_t shift;    /* H2D: the unit fetched is index + shift (a prefetch ahead of the loop) */
};

struct Program {
	Vec(Value) values;
	Vec(Param) params;
	Vec(Input) inputs;
	Block body;
	int nforward;     /* body.ops[0, nforward) compute the loss: dp_forward runs those */
	int loss;         /* scalar value id */
	Vec(Report) reports;
	Vec(Report) updates; /* `update B = e`: buffer B takes e's value after each training step */
	bool has_grad;    /* set by ad_transform */
	DType real;       /* what the source's f32 is stored as (--precision) */
	bool mixed;       /* --precision bf16-mixed: real is bf16, and each trained parameter has an f32 master copy,
	                   * gradient sum and optimizer state (Param.master, gsum) */
	Optimizer optimizer;
	const char *weights; /* `weights "FILE"`: its absolute path, which the executable starts from; NULL: none */
	const char *consts;  /* the source's constants after -D, "NAME VALUE\n" each, for the model description's
	                      * build lines (the ranks of a job compare them) */
	int ranks;         /* --ranks N > 1: a resident parameter's Adam moments are one rank's share, ceil(n / N) elements */
	/* memory plan (stream_pass) */
	int64_t device_mem; /* the device budget (--device-mem) in bytes, 0: none: set by fe_lower, read by every
	                     * pass and the code generator that needs it */
	int64_t arena_bytes;
	/* the straight-line search (checkpoint_pass/graph.c): 0 none, 1 every subset planned, 2 exact by the
	 * cost model, 3 greedy by it; the fewest FLOPs any fit recomputes (proved), and the candidates searched */
	int graph_search, graph_candidates;
	int64_t graph_bound;
	bool graph_least; /* --checkpoint min-memory: the least peak, not a budget's fewest FLOPs */
	bool graph_chain_only; /* the chain planner's plan recomputed so little that the selection's fit was not
	                        * searched (checkpoint_pass/graph.c's chain_enough) */
	int64_t graph_walks_cut; /* the straight line's walks (threshold accepting, kicks) were cut short, and its least
	                          * search not run again packed harder, on a problem of this many values and positions
	                          * (checkpoint_pass/graph.c's walk_moves, least_packed_hard); 0: neither */
	/* the straight-line search's model against the planner: the choices both priced, and the least and most of
	 * (model - plan) / plan, the plan's tensors' bytes live at once [live] and its packed peak [plan] */
	int model_choices;
	double model_live[2], model_plan[2];
	int64_t offload_cost; /* what moving one byte to the host, or back, is worth in FLOPs; 0: nothing is offloaded */
	int search_threads;   /* the straight-line search's threads (1 or 2); the plan is the same for either */
	bool fit_probe;       /* the straight line's fit to its share of the budget (CkptOptions.line_share): one that
	                       * misses it is not searched further for the least peak */
	int64_t least_past;   /* min-memory's shapes of the loops (budget.c's least_fit): a least search whose least after
	                       * its bisection plans past these bytes stops there (least_cut set), another shape being
	                       * lower; 0: none */
	bool least_cut;
	bool sweep_fits;      /* ckpt: a revolve's forward loop saves its snapshots wherever it can (auto under a budget:
	                       * the fits measure that) */
	int64_t plan_params, plan_grads, plan_opt, plan_inputs, plan_tape, plan_snap, plan_work;
	int64_t *inner_live; /* where set, mem_plan fills it: per top-level op, the most bytes the tensors made inside it hold at once */
	bool pitch_rows;   /* the memory plan pads the rows of GEMM operands and results to 16 bytes (memplan/pitch.c) */
	bool epilogues;    /* a GEMM applies the bias, GELU or GELU's derivative after it in its epilogue
	                    * (codegen/linalg.c, cg_gemm_epilogue), a layernorm the residual add next to it
	                    * (codegen/nn.c, cg_norm_add) */
	bool split_gemms;  /* a bf16 GEMM whose n or k is not a whole number of 16 bytes is made as its aligned bulk and
	                    * the rest (codegen/linalg.c) */
	int pack_effort;   /* the memory plan's packing: 0 the searches', 2 once the choices are made (memplan/plan.c) */
	int64_t plan_live; /* the most bytes the work region's tensors hold at once (plan_work less its packing's gaps) */
	/* a vector of ones in the arena per real element type: reductions as GEMMs */
	int64_t ones_offset[DT_F64 + 1], ones_len[DT_F64 + 1];
	/* streaming (stream_pass): the pinned host pool, the device slots, and the
	 * bytes one call of dp_forward [0] and of dp_step [1] moves each way */
	int64_t host_bytes, plan_slots;
	/* stream_pass (--emit=memplot, the model description): the bytes of the
	 * work region in use over one step, its highest byte among the values
	 * live, as mem_points maxima over equal runs of the ops in program order
	 * (loop bodies once); its maximum is plan_work */
	int mem_points;
	int64_t *mem_series;
	int nslots, ahead; /* slots per streamed tensor, prefetch distance; 0 without streaming */
	int64_t h2d_bytes[2], d2h_bytes[2];
	/* the streamed parameters: their elements, the bytes of their gradients (each unit's copied down once a
	 * micro-batch), and of dp_step's copies those of their units (the rest: snapshots, offloaded values) */
	int64_t stream_numel, stream_grads, stream_h2d, stream_d2h;
};

/* construction */
Program *ir_new_program(int real_bytes);
int ir_new_value(Program *p, ValueKind kind, Type t, const char *name, Loc loc);
Op *ir_new_op(Program *p, OpKind k, Loc loc, int nin, const int *in);
void ir_append(Block *b, Op *op);
/* Creates the op, infers its result type (dies on a type error: the frontend
 * checks user programs with ir_check_op first), appends it, returns the result id. */
int ir_emit(Program *p, Block *b, Op *op);
void ir_insert(Block *b, int at, Op *op);
bool ir_attn_lse_fused(const Block *b, int i); /* op i is written by the attention before it */
bool ir_has_loops(const Program *p);           /* p's top level has a loop (or a revolve) */
/* a loop or a revolve */
static inline bool ir_is_loop(const Op *op) { return op->kind == OP_LOOP || op->kind == OP_REVOLVE; }
/* whether op has a block inside it (a loop's bodies; walks skip the call for the many ops without) */
static inline bool ir_has_bodies(const Op *op) { return op->body.len || op->body2.len || op->body3.len; }
extern bool ir_attn_apart; /* testing (DPC_ATTN_APART): attn_lse a pass of its own, attn_dk and attn_dv apart */

/* types */
Type ir_type(DType dt, int rank, const int64_t *dim);
Type ir_scalar(DType dt);
/* A tensor has at most IR_MAX_ELEMS elements: the frontend, the tapes and the
 * snapshots are checked against it, so that no size overflows. ir_numel
 * saturates at IR_HUGE, for types that exist only to be refused. */
#define IR_MAX_ELEMS ((int64_t)1 << 40)
#define IR_HUGE ((int64_t)1 << 56)
int64_t ir_numel(Type t);
bool ir_too_large(Type t);
int64_t ir_bytes(const Program *p, Type t);
/* a value's storage, rows at their pitch (Value.pitch) */
int64_t ir_value_bytes(const Program *p, const Value *x);
/* the elements from one row of v's last axis to the next in storage */
int64_t ir_row_pitch(const Program *p, int v);
/* whether op may read (k >= 0: operand k) or write (k < 0: its result) a value whose rows have a pitch:
 * a GEMM takes it as a leading dimension, cross_entropy and its gradient as a row stride, and a reshape
 * that keeps the last axis passes it on */
bool ir_pitch_ok(Program *p, const Op *op, int k);
bool ir_type_eq(Type a, Type b);
Type ir_drop_first(Type t); /* t without its leading axis: the type of x[i] */
const char *ir_type_str(Type t); /* "f32[64, 32]" */
char *ir_put_dec(char *w, int64_t v); /* v in decimal at w (no terminator); the end */
const char *ir_decl_type_str(Type t, int stacked); /* as declared: "f32[8][128, 128]" when stacked */

/* Shape rules (ir/shape.c). ir_check_op fills op's result type into *out and
 * returns NULL, or returns a message for the user ("shapes f32[2, 3] and f32[4] do not broadcast"). */
const char *ir_check_op(Program *p, Op *op, Type *out);
bool ir_broadcast(Type a, Type b, Type *out);
/* A sum_to or sum that adds up the leading axes of its operand, keeping the
 * trailing ones whole: [M, N] -> [N] in effect, which is ones[1, M] @ x[M, N],
 * one GEMM instead of a long serial sum per output. Below IR_GEMM_SUM
 * elements the kernel's serial sums are cheaper than a GEMM call, and can
 * run inside a fused loop. */
#define IR_GEMM_SUM 4096
bool ir_leading_sum(Program *p, Op *op, int64_t *m, int64_t *n);
/* A matmul small enough for a kernel of dot products, one per result
 * element (at most IR_GEMM_SUM of them, each of at most IR_SMALL_DOT
 * terms), rather than a GEMM call: cheaper than the call, and it can run
 * inside a fused loop (an RNN cell with a small state). */
#define IR_SMALL_DOT 256
bool ir_small_matmul(Program *p, Op *op);
/* floating-point operations, counted by the op table's cost column (FlopClass) */
int64_t ir_op_flops(Program *p, Op *op);
/* ops [from, to) of b, loops times their trip counts (revolves, the adjoint's, count 0) */
int64_t ir_block_flops(Program *p, Block *b, int from, int to);
/* the FLOPs of b's ops marked recomputed: a taped step's copy of its forward step */
int64_t ir_recomputed_flops(Program *p, Block *b);

/* printing (--emit=ir, --emit=grad) and checking */
void ir_print(FILE *f, Program *p);
const char *ir_value_name(Program *p, int v); /* "%h3" */
void ir_verify(Program *p, const char *after_pass); /* dies naming the pass on a broken invariant */

/* Cloning a block with fresh values. map takes old value ids to new ones;
 * the hooks, all optional, let a pass drop ops, follow new values, and
 * follow entering (enter = true) and leaving a cloned loop's body. */
typedef struct {
	Vec(int) map;
	bool (*skip)(void *ctx, Op *op);
	void (*value)(void *ctx, int from, int to);
	void (*loop)(void *ctx, Op *from, Op *to, bool enter);
	void *ctx;
} IrClone;
void ir_clone_block(Program *p, IrClone *c, Block *src, Block *dst);
int ir_clone_map(IrClone *c, int v);   /* v's clone, or v when it was not cloned */
void ir_clone_set(IrClone *c, int from, int to);
/* operands and loop yields naming old, in b[from..] and the loops within, name new instead */
void ir_replace_uses(Block *b, int from, int old, int new);

/* dead-code elimination: a pass of its own */
Program *ir_dce(Program *p);
/* per value: how many operands, loop yields and the loss name it */
int *ir_count_uses(Program *p);

/* walking */
typedef void (*ir_op_fn)(Op *op, void *ctx);
void ir_walk(Block *b, ir_op_fn fn, void *ctx); /* pre-order, into loop bodies */

static inline Value *ir_val(Program *p, int v) { return &p->values.data[v]; }
/* The values the runtime reads after the step: result 0 is the loss, then
 * the reports, then the updates' values. */
static inline int ir_nresults(const Program *p) { return 1 + p->reports.len + p->updates.len; }
static inline int ir_result(const Program *p, int i)
{
	return i == 0 ? p->loss : i <= p->reports.len ? p->reports.data[i - 1].value : p->updates.data[i - 1 - p->reports.len].value;
}
static inline bool ir_is_result(const Program *p, int v)
{
	for (int i = 0; i < ir_nresults(p); i++)
		if (ir_result(p, i) == v)
			return true;
	return false;
}
/* a store into an update's staging variable: the forward program's alone, which recomputations skip */
static inline bool ir_is_stage_store(const Program *p, const Op *op)
{
	return op->kind == OP_STORE_SLICE && p->values.data[op->in[0]].vclass == VC_STAGE;
}
static inline Type ir_vtype(Program *p, int v) { return p->values.data[v].type; }
/* the last iterations of a forward loop that tape into its revolve's rows (Op.sweep), or 0 */
static inline int64_t ir_loop_tail(const Op *loop)
{
	if (loop->kind != OP_LOOP || !loop->sweep || !loop->sweep->ktape)
		return 0;
	if (loop->sweep->pool)
		return loop->sweep->ptail;
	return loop->sweep->ktape < loop->trip ? loop->sweep->ktape : loop->trip;
}
static inline bool ir_is_real(DType dt) { return dt <= DT_F64; }
/* bytes of one element: 2, 4 or 8; 0 for DT_INDEX */
int ir_dt_bytes(DType dt);
/* "f32", "bf16", "f64", "i32" or "index" */
const char *ir_dt_name(DType dt);
/* a source type name's element type in p: f32 is p->real, and f64 builds make every real f64 */
DType ir_resolve_dt(const Program *p, DType written);

#endif
