/* cg: code generation through the LLVM C API. Kernels (bodies generated from
 * their element index, wrapped for x86 now and NVPTX later) and the host
 * schedule (dp_step, dp_forward) that calls the runtime (runtime/dprt.h). */
#ifndef DPC_CG_H
#define DPC_CG_H

#include "../ir/ir.h"

typedef enum { CG_CPU, CG_CUDA } CgTarget;

typedef struct {
	CgTarget target;
	const char *model_name;
	bool fuse;         /* a loop whose body qualifies runs as one kernel (host.c, fused loops) */
	void (*phase)(const char *what); /* called as each phase of code generation ends (dpc -v), or NULL */
	int64_t budget;    /* --device-mem, for the executable's --memplot; 0: none */
	bool reference;    /* --reference-kernels: attention as the per-row kernels everywhere */
	bool verbose;      /* -v: a note for each attention that takes the per-row kernels, and why */
	bool generic_cpu;  /* --cpu generic: x86 code for any x86-64, not this CPU's */
} CgOptions;

/* The program must have been through ad_transform and stream_pass (every
 * value planned). */
void cg_emit_llvm(Program *p, const CgOptions *o, FILE *out);       /* --emit=llvm */
void cg_emit_object(Program *p, const CgOptions *o, const char *path);
void cg_emit_ptx(Program *p, const CgOptions *o, FILE *out);        /* --emit=ptx */

#endif
