/* driver: the pipeline, in order, from a .dp file to an executable. */
#ifndef DPC_DRIVER_H
#define DPC_DRIVER_H

#include "checkpoint_pass/ckpt.h"
#include "codegen/cg.h"
#include "frontend/fe.h"
#include "stream_pass/stream.h"

typedef enum { EMIT_EXE, EMIT_AST, EMIT_IR, EMIT_GRAD, EMIT_CKPT, EMIT_STREAM, EMIT_SCHEDULE, EMIT_MEMPLOT, EMIT_LLVM, EMIT_PTX, EMIT_KERNELS, EMIT_OBJ, EMIT_DP, EMIT_LIB } Emit;

typedef struct {
	const char *input;
	const char *output;   /* NULL: stdout for text stages, the input's base name for the executable */
	Emit emit;
	int real_bytes;       /* 2, 4 or 8: --precision bf16, f32 or f64 */
	bool mixed;           /* --precision bf16-mixed: real_bytes 2, with f32 master copies and optimizer state */
	CgTarget target;
	Vec(FeDefine) defs;
	int64_t device_mem;   /* --device-mem: the device budget in bytes, 0: none (the program keeps it) */
	CkptOptions ckpt;
	StreamOptions stream;
	Optimizer optimizer;  /* the update the executable applies; its state is planned */
	int ranks;            /* --ranks N: Adam's state planned as a rank's share of N (ZeRO-1); 1 by default */
	bool verify;          /* run the IR verifier between passes */
	bool no_fuse;         /* --no-fuse: every loop a launch per op and step */
	bool reference;       /* --reference-kernels: conv2d as unfold + GEMM, attention as dpc's row kernels */
	bool generic_cpu;     /* --cpu generic */
	bool verbose;         /* -v: each phase's time on stderr */
	int threads;          /* --threads for code generation; 0: the CPUs dpc may run on (util_cpus) */
	const char *schedule_json;
	const char *gpu;      /* --gpu: the GPU --emit=kernels and --schedule-json price launches on */
	AttnPrice attn_price; /* FeOptions.attn_price: cg_attn_price (main.c), NULL where code generation is not linked */
	double host_bw;       /* --host-bw: the host update's memory bandwidth, bytes/s; 0: the cost model's default */
	Vec(const char *) given; /* the options given that shape the executable, "NAME VALUE" each (-D's are the
	                          * program's constants), for the model description's build lines */
	struct {              /* an ONNX model's conversion (import.c): the converter's options, NULL: its default */
		const char *loss, *loss_on, *batchnorm, *ignore_index, *params_from;
		Vec(const char *) shapes, freeze, train, padding;
		bool no_loops;
		const char *given;    /* the first of them given, for the error when the input is not ONNX */
		/* under a budget, where loops were recovered: the model converted flat too (--no-loops), planned
		 * beside (driver_run), and taken where it fits with less recomputed; NULL: not converted. An
		 * executable's flat files are `final`'s once taken (its program and weights), else removed */
		const char *flat, *flat_weights, *final_dp, *final_weights;
	} import;
} DriverOptions;

int driver_run(DriverOptions *o);
/* an ONNX model (its name ends in .onnx) */
bool driver_is_onnx(const char *path);
/* Converts o->input, an ONNX model, to a .dp program and its weights file
 * (import.c) and returns the program's path to compile; NULL when
 * --emit=dp printed it and nothing is left to do. */
const char *driver_import(DriverOptions *o);
/* the flat conversion taken: an executable's files moved to their final names; the program's path */
const char *driver_take_flat(DriverOptions *o);
/* the flat conversion not taken: an executable's flat files removed */
void driver_drop_flat(DriverOptions *o);
/* in a child process: the temporary folder is the parent's to remove */
void driver_import_child(void);
/* -v: the time since the last phase ended, under what, on stderr */
void driver_phase(const DriverOptions *o, const char *what);
/* the parsed program lowered to the forward IR (passes.c); verbose: -v's notes */
Program *driver_lower(FeAst *ast, const DriverOptions *o, bool verbose);
/* the checkpoint pass's options for p, lowered from ast: under --checkpoint
 * auto and --device-mem, or min-memory with loops, chosen by planning
 * scratch copies (budget.c); *planned: min-memory's scratch copy already
 * through the checkpoint pass with them, the program (or NULL); *made: a
 * scratch copy through the checkpoint pass with them, to go on from, or NULL */
CkptOptions driver_budget(FeAst *ast, const DriverOptions *o, const Program *p, Program **planned, Program **made);
/* --checkpoint auto under --device-mem with loops: p, or min-memory's plan where p passes the budget and
 * that is lower (it may fit; if not, the error names the least) */
Program *driver_least_within(FeAst *ast, const DriverOptions *o, Program *p);
/* The passes from a parsed program to the memory plan, in order (passes.c;
 * no LLVM, so that tests and fuzz harnesses run the same list). Stops after
 * the stage o->emit names when it is one of them; *last says which ran last. */
Program *driver_passes(FeAst *ast, const DriverOptions *o, Emit *last);

#endif
