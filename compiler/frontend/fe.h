/* fe: the frontend. Lexes and parses a .dp file, resolves names, inlines
 * functions, checks shapes and lowers to the forward IR program. Every user
 * error goes through diag_error with the location of the offending token. */
#ifndef DPC_FE_H
#define DPC_FE_H

#include "../ir/ir.h"

typedef struct {
	const char *name;
	int64_t value;
} FeDefine;

typedef struct FeAst FeAst;

/* Reads and parses path. defs override same-named `const` declarations
 * (an unknown name is an error). */
FeAst *fe_parse(const char *path, const FeDefine *defs, int ndefs);
/* The same for a program in memory (len bytes, NULs refused); path names it in errors. */
FeAst *fe_parse_text(const char *path, const char *text, size_t len, const FeDefine *defs, int ndefs);
void fe_print_ast(FILE *f, FeAst *ast); /* --emit=ast */
/* the cost model's seconds for an attention on `path` (ir.h's AttnPath) */
typedef double (*AttnPrice)(const char *gpu, Type q, int heads, bool causal, int64_t rows, AttnPath path);

typedef struct {
	int real_bytes;  /* 2, 4 or 8: --precision bf16, f32 or f64 */
	bool reference;  /* --reference-kernels: conv2d as unfold + GEMM, the reference the tests compare with */
	bool cuda;       /* the target: cuDNN takes tensors of fewer than 2^31 elements */
	bool verbose;    /* -v: a note for each conv2d that takes the reference path, and why */
	/* attention on GEMMs, with a workspace operand (ops_attn_scratch): by
	 * default (0) on the CUDA target, but for bf16 where the cost model
	 * prices dpc's tensor-core kernels cheaper; DPC_ATTN_GEMM=N (the driver)
	 * asks for it on any target, blocks of at most N query rows;
	 * DPC_ATTN_GEMM=on (-2) for it in the blocks the default takes;
	 * DPC_ATTN_GEMM=off (-1) for none (dpc's attention kernels) */
	int64_t attn_gemm;
	int64_t device_mem; /* --device-mem, or 0: the program keeps it (Program.device_mem); a convolution's
	                     * workspace takes at most a sixteenth of it */
	/* attention on dpc's own kernels in FlashAttention-2's order
	 * (Attr.attn.flash: bf16 with heads of 16 to 128 elements, a multiple of
	 * 16, on tensor cores; f32 and f64 in FMA) where attn_gemm is off: on
	 * the CUDA target, or on the CPU's SIMT emulator (DPC_SIMT, testing) */
	bool simt;
	/* Program.pitch_rows: on the CUDA target, or where DPC_PITCH=on asks (testing: the CPU's bits stay) */
	bool pitch_rows;
	const char *gpu;  /* --gpu: the GPU the cost model prices attention's two paths on (NULL: the h100) */
	/* the cost model's seconds for an attention on either path (cg_attn_price, codegen/cg.h), passed in so
	 * that the frontend does not link code generation; NULL: GEMMs, as without a choice */
	AttnPrice attn_price;
	/* Program.split_gemms: on the CUDA target, or where DPC_GEMM_SPLIT=on asks (testing) */
	bool split_gemms;
	/* f32 attention on dpc's kernels as 3xTF32 on tensor cores (Attr.attn.tf32) rather than in FMA:
	 * DPC_ATTN_TF32=on (1) or off (-1); by default (0) on the CUDA target where the cost model prices it
	 * cheaper, never on the SIMT emulator */
	int attn_tf32;
} FeOptions;

/* Lowers the loss block (functions inlined) to IR. More than fe_max_ops
 * operations (default 2^20) is an error. */
extern int fe_max_ops;
Program *fe_lower(FeAst *ast, const FeOptions *o);

#endif
