/* cg: code generation through the LLVM C API. Kernels (bodies generated from
 * their element index, wrapped for x86 now and NVPTX later) and the host
 * schedule (dp_step, dp_forward) that calls the runtime (runtime/dprt.h). */
#ifndef DPC_CG_H
#define DPC_CG_H

#include "../ir/ir.h"

typedef enum { CG_CPU, CG_CUDA } CgTarget;

/* the kernels are split into at most this many units, each compiled on a thread of its own (units.c) */
enum { CG_UNITS_MOST = 8 };

typedef struct {
	CgTarget target;
	const char *model_name;
	bool fuse;         /* a loop whose body qualifies runs as one kernel (host.c, fused loops) */
	void (*phase)(const char *what); /* called as each phase of code generation ends (dpc -v), or NULL */
	bool reference;    /* --reference-kernels: attention as the per-row kernels everywhere */
	bool verbose;      /* -v: a note for each attention that takes the per-row kernels, and why */
	bool generic_cpu;  /* --cpu generic: x86 code for any x86-64, not this CPU's */
	const char *gpu;   /* --gpu: the GPU the cost model prices launches on (cost.c) */
	bool cost;         /* record dp_step's launches (cg_emit_kernels sets it) */
	bool cpu_splits;   /* DPC_CPU_SPLITS: the GPU's reductions in two launches on the CPU too (testing) */
	FILE *kernels_json; /* the CUDA target: the build also writes its launches there as --schedule-json's members */
	bool simt;         /* DPC_SIMT: the CPU target runs the GPU's tensor-core kernels on the runtime's SIMT
	                    * emulator (runtime/cpu/simt.c; testing) */
	double host_bw;    /* --host-bw: the bytes a second the streamed parameters' steps on the host stream through
	                    * its memory (cost.c); 0: CG_HOST_BW */
	const char *build; /* the model description's build lines: what the ranks of a job compare at start,
	                    * "build KIND NAME VALUE\n" each (runtime/dprt.h), or NULL */
	bool scalar_rows;  /* DPC_ROW_VECTORS=off: the GPU's row kernels an element at a time a lane,
	                    * embed_grad's ids one at a time and bf16 vectors as 16-bit elements, as before
	                    * 2026-12-03 (the code the H200 profile of 2026-11-28 measured; testing) */
	int threads;       /* threads the kernels' code is generated on (units.c); 0: 1. The code is the same
	                    * for any count */
} CgOptions;
/* the host update's memory bandwidth when --host-bw is not given: a two-socket server's, as DeepSpeed's
 * CPU Adam over 175B parameters is priced in issue 60 (300 GB/s) */
#define CG_HOST_BW 300e9

/* A GPU the cost model knows: its SMs, memory bandwidth (bytes/s), dense
 * peaks (FLOP/s: FP32, TF32 and bf16 on tensor cores), the host link's
 * bandwidth and shared memory per SM */
typedef struct {
	const char *name, *desc, *arch;
	int sms;
	double bw, fp32, tf32, bf16, link;
	int smem_sm;
} CgGpu;
const CgGpu *cg_gpu(const char *name); /* NULL: unknown */
const char *cg_gpu_names(void);        /* "h100, h200, a100" */

/* The program must have been through ad_transform and stream_pass (every
 * value planned). */
void cg_emit_llvm(Program *p, const CgOptions *o, FILE *out);       /* --emit=llvm */
/* the host module's object at path; more: NULL, every kernel in it; else the kernels' units, compiled on
 * o->threads threads beside it, as objects in memory that the link must add (units.c) */
typedef struct {
	int n;
	char *data[CG_UNITS_MOST + 1];
	size_t len[CG_UNITS_MOST + 1];
} CgObjects;
void cg_emit_object(Program *p, const CgOptions *o, const char *path, CgObjects *more);
void cg_emit_ptx(Program *p, const CgOptions *o, FILE *out);        /* --emit=ptx */
/* --emit=kernels: every launch of one training step on the CUDA target,
 * with its predicted time on o->gpu; json: as members of --schedule-json's
 * object ("gpu", "kernels", "predicted_step_ms") */
void cg_emit_kernels(Program *p, const CgOptions *o, FILE *out, bool json);
/* --emit=schedule on the CUDA target: the step's predicted time on o->gpu, and what bounds it (compute, the
 * link, the host update) */
void cg_emit_step(Program *p, const CgOptions *o, FILE *out);
/* the bytes of host memory one step's host update of the streamed parameters reads and writes */
double cg_host_update_bytes(const Program *p);
/* The cost model's seconds for one attention over q (its forward and adjoint) on gpu (NULL: the h100):
 * on dpc's own kernels in FlashAttention-2's order (ATTN_OWN: the forward, attn_delta, attn_dkv, attn_dq, on
 * tensor cores in bf16 and in FMA otherwise; ATTN_TF32: f32 on tensor cores as 3xTF32; priced as
 * --emit=kernels prices them, at 2 blocks an SM), or on GEMMs (ATTN_GEMMS) in blocks of `rows` query rows (at least: its nine GEMMs a block at cuBLAS's rate, the row
 * kernels' 20 bytes a score in f32 at the memory's bandwidth, their launches). The frontend takes the
 * cheaper on the GPU (lower.c, attention_path). */
double cg_attn_price(const char *gpu, Type q, int heads, bool causal, int64_t rows, AttnPath path);

#endif
