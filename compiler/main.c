/* dpc: the command line. Everything else is in the library (driver.c). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

static const char usage[] =
	"usage: dpc [options] MODEL.dp\n"
	"\n"
	"Compiles a differentiable program into a standalone training executable.\n"
	"\n"
	"options:\n"
	"  -o FILE              output file (default: MODEL, or stdout for --emit text stages)\n"
	"  --emit=STAGE         stop after STAGE and print it: ast, ir (forward program),\n"
	"                       grad (with the adjoint), ckpt, stream (with the memory plan),\n"
	"                       schedule (each loop's checkpoint schedule, the predicted peak and\n"
	"                       a proven lower bound no plan goes below),\n"
	"                       memplot (SVG: planned device memory over one step by category,\n"
	"                       with the --device-mem line),\n"
	"                       llvm (LLVM IR of the host module), ptx (the kernels for NVIDIA GPUs),\n"
	"                       kernels (every launch of one training step on the CUDA target: grid,\n"
	"                       bytes, FLOPs, registers, stack and shared memory from ptxas -v, and\n"
	"                       the time the cost model predicts on --gpu; docs/kernels.md),\n"
	"                       obj (object file); default: the executable\n"
	"  --gpu h100|h200|a100 the GPU --emit=kernels and --schedule-json price launches on\n"
	"                       (default h100)\n"
	"  -D NAME=VALUE        override `const NAME` in the program\n"
	"  --precision f32|f64|bf16\n"
	"                       what the source's f32 is stored as (default f32). bf16: 2 bytes, computed\n"
	"                       in f32, GEMMs accumulate in f32; values written bf16 or f64 keep their type.\n"
	"                       f64: every real is f64, bf16 included (the build for --gradcheck)\n"
	"  --target cpu|cuda    x86 kernels and OpenBLAS, or PTX kernels and cuBLAS; default %s\n"
	"                       (the environment variable DPC_TARGET overrides the default)\n"
	"  --cpu native|generic the CPU the executable's x86 code is for: this one (default; its\n"
	"                       AVX2 or AVX-512), or any x86-64 (to run it on another machine);\n"
	"                       the results are the same bits (DPC_CPU sets the default)\n"
	"  --optimizer sgd|adam the update the executable applies (default sgd); adam's two moments\n"
	"                       per parameter are planned device memory, inside --device-mem\n"
	"  --ranks N            plan adam's moments as one rank's share of N ranks (ZeRO stage 1): each\n"
	"                       resident parameter's ceil(n/N) elements; the executable then runs as N\n"
	"                       ranks under mpirun with --shard-optimizer (default 1: whole moments)\n"
	"  --device-mem BYTES   device memory budget, e.g. 512M or 8G; the plan must fit\n"
	"  --host-mem BYTES     pinned host memory budget: streamed parameters, their optimizer state\n"
	"                       and the snapshots kept in host memory\n"
	"  --stream none|auto|params\n"
	"                       parameters in host memory, streamed one layer W[l] at a time through\n"
	"                       device slots: none keeps all on the device; auto (the default with\n"
	"                       --device-mem) streams the largest ones until the plan fits; params\n"
	"                       streams every stacked parameter read as W[l] in one loop over its layers\n"
	"  --checkpoint none|binomial|auto|min-memory\n"
	"                       loop schedule (default: auto with --device-mem, else none):\n"
	"                       none stores everything the adjoint reads, per\n"
	"                       iteration; binomial keeps a few snapshots of each top-level loop's\n"
	"                       carried values and recomputes (Griewank-Walther revolve); auto\n"
	"                       stores everything when --device-mem holds it; else the forward loop\n"
	"                       saves the snapshots, and each loop without loops inside keeps what\n"
	"                       its adjoint reads in a tape of k rows, taping up to k steps at once\n"
	"                       (the forward loop tapes the last k; a relu's mask in a bit per\n"
	"                       element); under --device-mem a row may keep less, its adjoint step\n"
	"                       computing the rest again, and a program's one loop may keep its\n"
	"                       snapshots in the rows too (pooled, when that recomputes less);\n"
	"                       s and k are those that fit --device-mem with the fewest recomputed\n"
	"                       FLOPs (without it: none advanced, in the least memory); outside\n"
	"                       loops, the values the adjoint reads are kept or computed again\n"
	"                       from other kept values, for the fewest recomputed FLOPs that fit\n"
	"                       (an exact search on small graphs, else greedy with a proven bound,\n"
	"                       both shown by --emit=schedule); min-memory is auto at the least\n"
	"                       peak it reaches, loops in their least memory and straight-line\n"
	"                       code chosen for it (Feng & Huang's objective); --device-mem, if\n"
	"                       given, is then only checked\n"
	"  --offload-cost N     auto: what moving one byte between the device and the host is worth in\n"
	"                       recomputed FLOPs (default 943: an H100's measured 51.6 TFLOP/s of f32\n"
	"                       GEMM over its 54.7 GB/s pinned link). A value outside loops that the\n"
	"                       adjoint reads may then be offloaded after its last forward use and\n"
	"                       fetched back where first needed, instead of kept or computed again,\n"
	"                       where that costs less (priced both ways); 0, or --stream none: never\n"
	"  --threads N          threads the search for what straight-line code keeps may use (default 2;\n"
	"                       it uses at most 2); the plan is the same for any N\n"
	"  --snapshots N        binomial and auto: snapshot slots per loop, the initial state's included\n"
	"                       (default: as many as --device-mem allows, else ceil(sqrt(n)) + 1,\n"
	"                       auto's as above; at most n). Unless --stream none, binomial's that\n"
	"                       --device-mem cannot hold\n"
	"                       live in host memory, and when the parameters stream the default\n"
	"                       count tops up there to ceil(sqrt(n)) + 1\n"
	"  --schedule-json FILE also write the schedule as JSON (with the action list of loops up\n"
	"                       to 1000 steps; for the CUDA target also \"kernels\", each launch of\n"
	"                       a step as --emit=kernels prints it, and \"predicted_step_ms\")\n"
	"  --no-fuse            a kernel launch per op and loop step everywhere; by default a loop whose\n"
	"                       body is small kernels and copies (small matmuls, but no GEMM; no value\n"
	"                       over 4096 elements)\n"
	"                       runs as one kernel: the forward loop's steps, and each chunk of a\n"
	"                       binomial schedule's actions (same bits; --emit=llvm notes each choice)\n"
	"  --reference-kernels  convolutions as unfold + GEMM and attention as dpc's per-row kernels,\n"
	"                       instead of cuDNN or oneDNN and the tiled attention: the slower\n"
	"                       reference that the tests compare against\n"
	"  --no-verify          skip the IR verifier between passes\n"
	"  -v, --verbose        print each phase of the compilation with its time, and each\n"
	"                       convolution or attention that takes the reference kernels, on stderr\n"
	"  -h, --help           this text\n"
	"\n"
	"The executable's own options: ./MODEL --help\n";

/* cuda when the CUDA toolkit was found at build time (the Makefile defines DPC_HAVE_CUDA) */
#ifdef DPC_HAVE_CUDA
#define DEFAULT_TARGET "cuda"
#define DEFAULT_NOTE "cuda,\n                       as this dpc was built with the CUDA toolkit"
#else
#define DEFAULT_TARGET "cpu"
#define DEFAULT_NOTE "cpu,\n                       as this dpc was built without the CUDA toolkit"
#endif

static void usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "dpc: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(dpc --help lists the options)\n");
	exit(2);
}

/* option opt's value v, a whole number from lo to hi: what a message calls it, and hi in words */
static long long parse_count(const char *opt, const char *v, const char *what, long long lo, long long hi, const char *most)
{
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (*end || end == v || n < lo)
		usage_error("%s", ar_printf("%s needs %s of at least %lld, not '%s'", opt, what, lo, v));
	if (errno == ERANGE || n > hi)
		usage_error("%s", ar_printf("%s %s is out of range (at most %s)", opt, v, most));
	return n;
}

/* "512M" -> bytes; K, M, G, T are powers of 1024. */
static int64_t parse_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	double m = 1;
	switch (*end) {
	case 'k': case 'K': m = 1024.0; end++; break;
	case 'm': case 'M': m = 1024.0 * 1024; end++; break;
	case 'g': case 'G': m = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': m = 1024.0 * 1024 * 1024 * 1024; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' && end[1] == 'B' ? 2 : 1;
	if (end == s || *end || !(v > 0))
		usage_error("bad byte count '%s' (examples: 8G, 512M, 1048576)", s);
	/* 2^62 bytes is beyond any memory; it keeps every sum of sizes in range */
	if (!(v * m < 0x1p62) || v * m < 1)
		usage_error("byte count '%s' is out of range (1 byte to 4 EiB)", s);
	return (int64_t)(v * m);
}

static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != 0)
		return NULL;
	if (*i + 1 >= argc)
		usage_error("%s needs a value", name);
	return argv[++*i];
}

int main(int argc, char **argv)
{
	DriverOptions o = {0};
	o.real_bytes = 4;
	o.verify = true;
	o.ckpt.threads = 2;
	o.ranks = 1;
	const char *target = getenv("DPC_TARGET");
	const char *target_from = "the environment variable DPC_TARGET";
	if (!target || !*target)
		target = DEFAULT_TARGET;
	const char *cpu = getenv("DPC_CPU"), *cpu_from = "the environment variable DPC_CPU";
	const char *v;
	bool ckpt_given = false;
	/* an H100 (DESIGN.md): 51.6 TFLOP/s of f32 GEMM over a 54.7 GB/s pinned link */
	int64_t offload_cost = 943;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf(usage, DEFAULT_NOTE);
			return 0;
		} else if ((v = opt_value(argc, argv, &i, "-o"))) {
			o.output = v;
		} else if ((v = opt_value(argc, argv, &i, "--emit"))) {
			static const struct { const char *name; Emit e; } stages[] = {
				{"ast", EMIT_AST}, {"ir", EMIT_IR}, {"grad", EMIT_GRAD}, {"ckpt", EMIT_CKPT},
				{"stream", EMIT_STREAM}, {"schedule", EMIT_SCHEDULE}, {"memplot", EMIT_MEMPLOT}, {"llvm", EMIT_LLVM}, {"ptx", EMIT_PTX}, {"kernels", EMIT_KERNELS}, {"obj", EMIT_OBJ}, {"exe", EMIT_EXE},
			};
			size_t k = 0;
			while (k < sizeof stages / sizeof *stages && strcmp(stages[k].name, v))
				k++;
			if (k == sizeof stages / sizeof *stages)
				usage_error("unknown stage '%s' for --emit", v);
			o.emit = stages[k].e;
		} else if (!strncmp(a, "-D", 2)) {
			const char *def = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			const char *eq = def ? strchr(def, '=') : NULL;
			char *end;
			if (!eq || eq == def)
				usage_error("-D needs NAME=VALUE, got '%s'", def ? def : "");
			errno = 0;
			long long val = strtoll(eq + 1, &end, 10);
			if (*end || end == eq + 1)
				usage_error("-D %s: the value must be an integer", def);
			if (errno == ERANGE || val > (1LL << 40) || val < -(1LL << 40))
				usage_error("-D %s: the value is out of range (integer constants are limited to 2^40)", def);
			FeDefine d = {ar_strndup(def, (size_t)(eq - def)), val};
			vec_push(&o.defs, d);
		} else if ((v = opt_value(argc, argv, &i, "--precision"))) {
			if (!strcmp(v, "f32"))
				o.real_bytes = 4;
			else if (!strcmp(v, "f64"))
				o.real_bytes = 8;
			else if (!strcmp(v, "bf16"))
				o.real_bytes = 2;
			else
				usage_error("--precision takes f32, f64 or bf16, not '%s'", v);
		} else if ((v = opt_value(argc, argv, &i, "--target"))) {
			target = v;
			target_from = "--target";
		} else if ((v = opt_value(argc, argv, &i, "--cpu"))) {
			cpu = v;
			cpu_from = "--cpu";
		} else if ((v = opt_value(argc, argv, &i, "--optimizer"))) {
			if (!strcmp(v, "sgd"))
				o.optimizer = OPT_SGD;
			else if (!strcmp(v, "adam"))
				o.optimizer = OPT_ADAM;
			else
				usage_error("--optimizer takes sgd or adam, not '%s'", v);
		} else if ((v = opt_value(argc, argv, &i, "--ranks"))) {
			char *end;
			errno = 0;
			long long n = strtoll(v, &end, 10);
			if (*end || end == v || n < 1 || errno == ERANGE || n > 1 << 20)
				usage_error("--ranks needs a count from 1 to 1048576, not '%s'", v);
			o.ranks = (int)n;
		} else if ((v = opt_value(argc, argv, &i, "--device-mem"))) {
			o.stream.device_mem = parse_bytes(v);
		} else if ((v = opt_value(argc, argv, &i, "--host-mem"))) {
			o.stream.host_mem = parse_bytes(v);
		} else if ((v = opt_value(argc, argv, &i, "--stream"))) {
			if (!strcmp(v, "none"))
				o.stream.mode = STREAM_NONE;
			else if (!strcmp(v, "auto"))
				o.stream.mode = STREAM_AUTO;
			else if (!strcmp(v, "params"))
				o.stream.mode = STREAM_PARAMS;
			else
				usage_error("--stream takes none, auto or params, not '%s'", v);
		} else if ((v = opt_value(argc, argv, &i, "--checkpoint"))) {
			ckpt_given = true;
			if (!strcmp(v, "none"))
				o.ckpt.mode = CKPT_NONE;
			else if (!strcmp(v, "binomial"))
				o.ckpt.mode = CKPT_BINOMIAL;
			else if (!strcmp(v, "auto"))
				o.ckpt.mode = CKPT_AUTO;
			else if (!strcmp(v, "min-memory"))
				o.ckpt.mode = CKPT_AUTO, o.ckpt.least = true;
			else
				usage_error("--checkpoint takes none, binomial, auto or min-memory, not '%s'", v);
		} else if ((v = opt_value(argc, argv, &i, "--offload-cost"))) {
			/* priced bytes times this stay far from int64's end */
			offload_cost = parse_count("--offload-cost", v, "a count of FLOPs", 0, (long long)1 << 20, "2^20 FLOPs a byte");
		} else if ((v = opt_value(argc, argv, &i, "--threads"))) {
			o.ckpt.threads = (int)parse_count("--threads", v, "a count", 1, 1024, "1024");
		} else if ((v = opt_value(argc, argv, &i, "--snapshots"))) {
			o.ckpt.snapshots = parse_count("--snapshots", v, "a count", 1, INT_MAX, "2^31 - 1");
		} else if ((v = opt_value(argc, argv, &i, "--schedule-json"))) {
			o.schedule_json = v;
		} else if ((v = opt_value(argc, argv, &i, "--gpu"))) {
			if (!cg_gpu(v))
				usage_error("%s", ar_printf("unknown GPU '%s' for --gpu; known: %s", v, cg_gpu_names()));
			o.gpu = v;
		} else if (!strcmp(a, "--no-verify")) {
			o.verify = false;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			o.verbose = true;
		} else if (!strcmp(a, "--no-fuse")) {
			o.no_fuse = true;
		} else if (!strcmp(a, "--reference-kernels")) {
			o.reference = true;
		} else if (a[0] == '-' && a[1]) {
			usage_error("unknown option '%s'", a);
		} else if (o.input) {
			usage_error("more than one input file: '%s'", a);
		} else {
			o.input = a;
		}
	}
	if (!o.input)
		usage_error("%s", "no input file");
	if (cpu && *cpu && strcmp(cpu, "native") != 0 && strcmp(cpu, "generic") != 0)
		usage_error("%s", ar_printf("%s takes native or generic, not '%s'", cpu_from, cpu));
	o.generic_cpu = cpu && !strcmp(cpu, "generic");
	if (!strcmp(target, "cpu"))
		o.target = CG_CPU;
	else if (!strcmp(target, "cuda"))
		o.target = CG_CUDA;
	else
		usage_error("%s", ar_printf("%s takes cpu or cuda, not '%s'", target_from, target));
	o.ckpt.device_mem = o.stream.device_mem;
	if (!ckpt_given)
		o.ckpt.mode = o.ckpt.device_mem ? CKPT_AUTO : CKPT_NONE;
	if (o.ckpt.snapshots && o.ckpt.mode == CKPT_NONE)
		usage_error("%s", ckpt_given ? "--snapshots has no meaning with --checkpoint none"
		                             : "--snapshots needs --checkpoint binomial or auto (or --device-mem, which makes auto "
		                               "the default)");
	StreamMode sm = o.stream.mode == STREAM_DEFAULT ? (o.stream.device_mem ? STREAM_AUTO : STREAM_NONE) : o.stream.mode;
	o.ckpt.may_stream = sm != STREAM_NONE;
	o.ckpt.offload_cost = sm != STREAM_NONE ? offload_cost : 0;
	o.ckpt.stream_all = sm == STREAM_PARAMS;
	o.ckpt.host_mem = o.stream.host_mem;
	int rc = driver_run(&o);
	ar_free_all();
	return rc;
}
