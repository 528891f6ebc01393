/* cg: the kernels' code in units. A program of many kernels (a DenseNet's
 * 1,400) spent most of its compile in LLVM's optimizer and code generator
 * over one module, on one thread. The kernels are split by number into
 * units (cg_unit_of), each built as a module of its own in g's context,
 * written as bitcode, then read into a context of its own and optimized
 * and compiled on one of g->threads threads, beside the host module.
 * NVPTX units are linked with libdevice, and their texts joined into one
 * PTX module: each unit past the first without its header and with its
 * module-scope names (libdevice's functions, shared arrays, constants)
 * given the unit's suffix, so that names from two units never meet. x86
 * units are objects of their own, linked with the host module's, their
 * kernels named by its table. Which unit a kernel is in depends on the
 * program alone: the code is the same for any thread count. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "cgint.h"

#ifndef DPC_CUDA_HOME
#define DPC_CUDA_HOME "/usr/local/cuda"
#endif

/* the most kernels a unit holds: a sample's (a few dozen to 160) stay one
 * unit; each unit costs about 50 ms more than its kernels in one module
 * (libdevice read and linked again, the pass managers made again) */
enum { UNIT_KERNELS = 160 };

int cg_units(const Cg *g)
{
	if (g->one_unit)
		return 1;
	/* DPC_CODEGEN_UNITS=N: N units whatever the count (testing) */
	const char *e = getenv("DPC_CODEGEN_UNITS");
	int n = e && *e ? atoi(e) : (g->kernels.len + UNIT_KERNELS - 1) / UNIT_KERNELS;
	return n < 1 ? 1 : n > CG_UNITS_MOST ? CG_UNITS_MOST : n;
}

/* in turn, but the two launches of a grid's reduction (KDesc.stage), which
 * share a module array, in the first */
int cg_unit_of(const Cg *g, int kernel, int units)
{
	return g->kernels.data[kernel].stage ? 0 : kernel % units;
}

void cg_unit_built(const Cg *g, int kernel, int unit)
{
	if (g->module_array && unit != 0)
		die("kernel %d (%s) uses a module array outside the first unit", kernel, cg_kernel_label(&g->kernels.data[kernel]));
}

LLVMTargetMachineRef cg_ptx_machine(void)
{
	LLVMTargetRef target;
	char *err = NULL;
	if (LLVMGetTargetFromTriple(CG_PTX_TRIPLE, &target, &err))
		die("no NVPTX target in this LLVM: %s", err);
	return LLVMCreateTargetMachine(target, CG_PTX_TRIPLE, "sm_80", "+ptx75", LLVMCodeGenLevelAggressive, LLVMRelocDefault,
	                               LLVMCodeModelDefault);
}

/* one unit's work: its bitcode in, its PTX or object (malloc'd) or an error out */
typedef struct {
	char *bitcode;
	size_t len;
	const char *libdevice; /* its bitcode, read once for every unit; NULL: an x86 unit */
	size_t lib_len;
	int unit;
	LLVMTargetMachineRef tm; /* x86: made on the calling thread (targets are initialized there), disposed here */
	char *out, *err;
	size_t out_len;
	char *diag;              /* the first error LLVM reported in its context (LLVM's own handler would exit) */
	bool bad_lib;            /* libdevice did not read: the user's file, not a compiler bug */
} Unit;

/* LLVM's errors in a unit's context (a bitcode that does not read reports there), kept for the unit's message;
 * its warnings printed, as its own handler prints them */
static void on_diag(LLVMDiagnosticInfoRef info, void *arg)
{
	Unit *u = arg;
	LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(info);
	if (sev != LLVMDSError && sev != LLVMDSWarning)
		return;
	char *d = LLVMGetDiagInfoDescription(info);
	if (sev == LLVMDSWarning)
		fprintf(stderr, "warning: %s\n", d);
	else if (!u->diag)
		u->diag = strdup(d);
	LLVMDisposeMessage(d);
}

/* a module-scope name of the unit's own: not a kernel (dp_k...), an
 * intrinsic, or a function that is only declared (resolved by LLVM's code
 * generator, __nvvm_reflect) */
static bool own_name(LLVMValueRef v, bool function)
{
	size_t n;
	const char *name = LLVMGetValueName2(v, &n);
	if (!n || strncmp(name, "llvm.", 5) == 0)
		return false;
	if (function)
		return !LLVMIsDeclaration(v) && strncmp(name, "dp_k", 4) != 0;
	return true;
}

/* the unit's own names given its suffix: in PTX, every global (one module
 * holds them all); in an x86 object, those it defines (its shared arrays,
 * external for the barriers' sake, cg_shared_array), not the runtime's it
 * refers to */
static void rename_own(LLVMModuleRef m, int unit, bool declared_too)
{
	for (int function = 0; function < 2; function++)
		for (LLVMValueRef v = function ? LLVMGetFirstFunction(m) : LLVMGetFirstGlobal(m); v;
		     v = function ? LLVMGetNextFunction(v) : LLVMGetNextGlobal(v))
			if (own_name(v, function) && (function || declared_too || LLVMGetInitializer(v))) {
				size_t n;
				const char *name = LLVMGetValueName2(v, &n);
				char buf[512];
				int len = snprintf(buf, sizeof buf, "%.*s_u%d", (int)n, name, unit);
				LLVMSetValueName2(v, buf, (size_t)len);
			}
}

static char *copy_message(const char *what, char *msg)
{
	size_t n = strlen(what) + (msg ? strlen(msg) : 0) + 3;
	char *s = malloc(n);
	snprintf(s, n, "%s: %s", what, msg ? msg : "");
	LLVMDisposeMessage(msg);
	return s;
}

/* libdevice linked into m, every function of it that no kernel calls dropped by the optimizer */
static char *link_libdevice(LLVMContextRef ctx, LLVMModuleRef m, Unit *u)
{
	LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(u->libdevice, u->lib_len, "libdevice", 0);
	LLVMModuleRef lib;
	bool bad = LLVMParseBitcodeInContext2(ctx, buf, &lib);
	LLVMDisposeMemoryBuffer(buf); /* the module holds what it needs */
	if (bad) {
		u->bad_lib = true;
		return copy_message("it does not read as LLVM bitcode", u->diag ? strdup(u->diag) : NULL);
	}
	LLVMSetTarget(lib, LLVMGetTarget(m));
	LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(m));
	if (LLVMLinkModules2(m, lib)) /* and disposes lib */
		return copy_message("linking libdevice failed", NULL);
	for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f) && strncmp(LLVMGetValueName(f), "dp_k", 4) != 0)
			LLVMSetLinkage(f, LLVMInternalLinkage);
	return NULL;
}

/* the unit's bitcode read into a context of its own; NULL and u->err where it does not read back */
static LLVMModuleRef read_unit(Unit *u, LLVMContextRef ctx)
{
	LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(u->bitcode, u->len, "unit", 0);
	LLVMModuleRef m;
	bool bad = LLVMParseBitcodeInContext2(ctx, buf, &m);
	LLVMDisposeMemoryBuffer(buf);
	if (bad)
		u->err = copy_message("a unit's bitcode does not read back", NULL);
	return bad ? NULL : m;
}

static void emitted(Unit *u, LLVMMemoryBufferRef out, bool text)
{
	size_t len = LLVMGetBufferSize(out);
	while (text && len && LLVMGetBufferStart(out)[len - 1] == 0)
		len--;
	u->out = malloc(len + 1);
	memcpy(u->out, LLVMGetBufferStart(out), len);
	u->out[len] = 0;
	u->out_len = len;
	LLVMDisposeMemoryBuffer(out);
}

/* LLVM's NVPTX back end numbers the call sequences it writes (in comments,
 * "{ // callseq N, 0" ... "} // callseq N") from one counter in the
 * process, which the units' threads share: the numbers depend on which
 * units ran before on which thread. Each unit's are numbered again from 0
 * in the order they open, a closing comment taking its opening's number.
 * Into a new malloc'd text. */
static char *number_calls(const char *ptx)
{
	static const char key[] = "// callseq ";
	size_t n = strlen(ptx), cap = n + n / 8 + 64, len = 0, next = 0, open = 0;
	char *out = malloc(cap);
	for (const char *at = ptx; *at;) {
		const char *hit = strstr(at, key);
		size_t keep = hit ? (size_t)(hit - at) + sizeof key - 1 : strlen(at);
		if (len + keep + 24 > cap)
			out = realloc(out, cap = 2 * (len + keep + 24));
		memcpy(out + len, at, keep);
		len += keep, at += keep;
		if (!hit)
			break;
		if (hit - ptx >= 2 && hit[-2] == '{')
			open = next++;
		len += (size_t)snprintf(out + len, 24, "%zu", open);
		while (*at >= '0' && *at <= '9')
			at++;
	}
	out[len] = 0;
	return out;
}

static void ptx_unit(Unit *u, LLVMContextRef ctx, LLVMModuleRef m)
{
	char *err = NULL;
	if (!(u->err = link_libdevice(ctx, m, u)) && LLVMVerifyModule(m, LLVMReturnStatusAction, &err))
		u->err = copy_message("generated NVPTX module is invalid", err);
	else
		LLVMDisposeMessage(err);
	if (u->err)
		return;
	cg_optimize(m, 3, NULL);
	if (u->unit > 0)
		rename_own(m, u->unit, true);
	LLVMTargetMachineRef tm = cg_ptx_machine();
	LLVMMemoryBufferRef out;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMAssemblyFile, &err, &out))
		u->err = copy_message("NVPTX code generation failed", err);
	else
		emitted(u, out, true);
	LLVMDisposeTargetMachine(tm);
	if (u->out) {
		char *t = number_calls(u->out);
		free(u->out);
		u->out = t, u->out_len = strlen(t);
	}
}

static void x86_unit(Unit *u, LLVMModuleRef m)
{
	char *err = NULL;
	if (LLVMVerifyModule(m, LLVMReturnStatusAction, &err)) {
		u->err = copy_message("generated LLVM module is invalid", err);
		return;
	}
	LLVMDisposeMessage(err);
	LLVMTargetMachineRef tm = u->tm;
	cg_target_module(m, tm);
	rename_own(m, u->unit, false);
	cg_optimize(m, cg_host_level(), tm);
	LLVMMemoryBufferRef out;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &err, &out))
		u->err = copy_message("x86 code generation failed", err);
	else
		emitted(u, out, false);
}

static void compile_unit(Unit *u)
{
	LLVMContextRef ctx = LLVMContextCreate();
	LLVMContextSetDiagnosticHandler(ctx, on_diag, u);
	LLVMModuleRef m = read_unit(u, ctx);
	if (m && u->libdevice)
		ptx_unit(u, ctx, m);
	else if (m)
		x86_unit(u, m);
	if (m)
		LLVMDisposeModule(m);
	LLVMContextDispose(ctx);
	if (u->tm)
		LLVMDisposeTargetMachine(u->tm);
	free(u->diag);
}

/* where libdevice is read from: DPC_LIBDEVICE, or CUDA's */
static const char *libdevice_path(void)
{
	const char *env = getenv("DPC_LIBDEVICE");
	return env ? env : DPC_CUDA_HOME "/nvvm/libdevice/libdevice.10.bc";
}

/* libdevice's bitcode, malloc'd */
static char *read_libdevice(size_t *len)
{
	const char *path = libdevice_path();
	LLVMMemoryBufferRef buf;
	char *err = NULL;
	if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err))
		fatal("cannot read CUDA's libdevice at %s (set DPC_LIBDEVICE): %s", path, err);
	*len = LLVMGetBufferSize(buf);
	char *s = malloc(*len);
	memcpy(s, LLVMGetBufferStart(buf), *len);
	LLVMDisposeMemoryBuffer(buf);
	return s;
}

/* unit u's text past its header: from the line after ".address_size" */
static const char *past_header(const char *ptx, int u)
{
	const char *at = strstr(ptx, "\n.address_size ");
	const char *end = at ? strchr(at + 1, '\n') : NULL;
	if (!end)
		die("unit %d's PTX has no .address_size line", u);
	return end + 1;
}

/* the units and the host module's job (first: it is the longest), taken by the threads in turn */
typedef struct {
	Unit *u;
	void (*host)(void *);
	void *arg;
} Jobs;

static void run_job(void *arg, int i)
{
	Jobs *j = arg;
	if (j->host && i-- == 0)
		j->host(j->arg);
	else
		compile_unit(&j->u[i]);
}

const char *cg_units_compile(Cg *g, void (*host)(void *), void *arg, CgObjects *objs)
{
	/* the CPU target's first unit is the host module */
	int first = g->units_ptx ? 0 : 1, n = g->nunits > first ? g->nunits - first : 0;
	Unit *u = calloc((size_t)n + 1, sizeof *u);
	size_t lib_len = 0;
	char *lib = g->units_ptx ? read_libdevice(&lib_len) : NULL;
	for (int i = 0; i < n; i++) {
		LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(g->units[first + i]);
		u[i].len = LLVMGetBufferSize(bc);
		u[i].bitcode = malloc(u[i].len);
		memcpy(u[i].bitcode, LLVMGetBufferStart(bc), u[i].len);
		LLVMDisposeMemoryBuffer(bc);
		LLVMDisposeModule(g->units[first + i]);
		u[i].libdevice = lib, u[i].lib_len = lib_len, u[i].unit = first + i;
		u[i].tm = lib ? NULL : cg_host_machine(g->generic_cpu);
	}
	g->nunits = 0;
	Jobs jobs = {u, host, arg};
	util_parallel(n + !!host, g->threads, run_job, &jobs);
	for (int i = 0; i < n; i++)
		if (u[i].bad_lib)
			fatal("cannot use CUDA's libdevice at %s (set DPC_LIBDEVICE): %s", libdevice_path(), u[i].err);
	for (int i = 0; i < n; i++)
		if (u[i].err)
			die("unit %d of %d: %s", u[i].unit, first + n, u[i].err);
	char *ptx = NULL;
	if (lib) {
		size_t total = 1;
		for (int i = 0; i < n; i++)
			total += u[i].out_len;
		char *at = ptx = ar_alloc(total);
		for (int i = 0; i < n; i++) {
			const char *text = i ? past_header(u[i].out, i) : u[i].out;
			size_t len = strlen(text);
			memcpy(at, text, len);
			at += len;
		}
		*at = 0;
	} else {
		for (int i = 0; i < n; i++) {
			objs->data[objs->n] = ar_alloc(u[i].out_len + 1);
			memcpy(objs->data[objs->n], u[i].out, u[i].out_len);
			objs->len[objs->n++] = u[i].out_len;
		}
	}
	for (int i = 0; i < n; i++)
		free(u[i].out), free(u[i].bitcode), free(u[i].err);
	free(lib);
	free(u);
	return ptx;
}
