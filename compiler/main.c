/* dpc: the command line. Everything else is in the library (driver.c).
 * One table of options: each option's name, its value's name, its kind and
 * range, and its help. Parsing, the checks of every value, --help and
 * docs/cli.md (checked by tests/cli) all come from it, so that an option
 * added is an entry here and a case in set(). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* cuda when the CUDA toolkit was found at build time (the Makefile defines DPC_HAVE_CUDA) */
#ifdef DPC_HAVE_CUDA
#define DEFAULT_TARGET "cuda"
#define BUILT_WITH "with"
#else
#define DEFAULT_TARGET "cpu"
#define BUILT_WITH "without"
#endif

typedef enum {
	O_OUTPUT, O_EMIT, O_GPU, O_HOST_BW, O_DEFINE, O_PRECISION, O_TARGET, O_CPU, O_OPTIMIZER, O_RANKS, O_DEVICE_MEM,
	O_HOST_MEM, O_STREAM, O_CHECKPOINT, O_OFFLOAD_COST, O_THREADS, O_SNAPSHOTS, O_SCHEDULE_JSON, O_NO_FUSE,
	O_REFERENCE, O_NO_VERIFY, O_VERBOSE, O_HELP, O_LOSS, O_LOSS_ON, O_IGNORE_INDEX, O_SHAPE, O_FREEZE, O_PARAMS_FROM, O_TRAIN_BUFFER, O_PADDING_IDX, O_BATCHNORM, O_NO_LOOPS,
} OptId;

typedef enum {
	K_FLAG,    /* no value */
	K_STR,     /* a string, checked after parsing where it must be */
	K_CHOICE,  /* one of arg's words, separated by | */
	K_COUNT,   /* a whole number in lo..hi */
	K_BYTES,   /* a byte count: 512M, 8G, 1048576 */
	K_SPECIAL, /* parsed in set() */
} Kind;

typedef struct {
	OptId id;
	const char *name, *alias; /* alias: a short form, or NULL */
	const char *arg;          /* the value's name in --help ("=X": written --name=X); NULL for a flag */
	Kind kind;
	long long lo, hi;         /* K_COUNT's range */
	const char *what, *most;  /* K_COUNT: what an error calls the value, and hi in words */
	const char *help;         /* its lines, separated by \n */
} Opt;

static const Opt opts[] = {
	{O_OUTPUT, "-o", NULL, "FILE", K_STR, 0, 0, NULL, NULL,
	 "output file (default: MODEL, or stdout for --emit text stages)"},
	{O_EMIT, "--emit", NULL, "=STAGE", K_SPECIAL, 0, 0, NULL, NULL,
	 "stop after STAGE and print it: ast, ir (forward program),\n"
	 "grad (with the adjoint), ckpt, stream (with the memory plan),\n"
	 "schedule (each loop's checkpoint schedule, the predicted peak and\n"
	 "a proven lower bound no plan goes below),\n"
	 "memplot (SVG: planned device memory over one step by category,\n"
	 "with the --device-mem line),\n"
	 "llvm (LLVM IR of the host module), ptx (the kernels for NVIDIA GPUs),\n"
	 "kernels (every launch of one training step on the CUDA target: grid,\n"
	 "bytes, FLOPs, registers, stack and shared memory from ptxas -v, and\n"
	 "the time the cost model predicts on --gpu; docs/kernels.md),\n"
	 "obj (object file), dp (an ONNX model's converted program, with its\n"
	 "weights file beside -o's FILE.dp), lib (a shared library with the C\n"
	 "API of runtime/dpc.h, default libMODEL.so; docs/python.md);\n"
	 "default: the executable"},
	{O_GPU, "--gpu", NULL, "h100|h200|a100", K_SPECIAL, 0, 0, NULL, NULL,
	 "the GPU --emit=kernels and --schedule-json price launches on\n"
	 "(default h100)"},
	{O_HOST_BW, "--host-bw", NULL, "GB/s", K_SPECIAL, 0, 0, NULL, NULL,
	 "the host memory bandwidth the streamed parameters' optimizer steps run\n"
	 "at on the host, for the cost model's step time beside compute and the\n"
	 "link (default 300: a two-socket server's)"},
	{O_DEFINE, "-D", NULL, "NAME=VALUE", K_SPECIAL, 0, 0, NULL, NULL,
	 "override `const NAME` in the program"},
	{O_PRECISION, "--precision", NULL, "f32|f64|bf16|bf16-mixed", K_CHOICE, 0, 0, NULL, NULL,
	 "what the source's f32 is stored as (default f32). bf16: 2 bytes, computed\n"
	 "in f32, GEMMs accumulate in f32; values written bf16 or f64 keep their type;\n"
	 "parameters, gradients and Adam's moments are bf16 too (pure bf16).\n"
	 "bf16-mixed: computes as bf16 does, from a bf16 copy of the weights, but\n"
	 "the parameters (their master copy), the sums of their gradients and the\n"
	 "optimizer's state are f32, as PyTorch's autocast trains (docs/cli.md).\n"
	 "f64: every real is f64, bf16 included (the build for --gradcheck)"},
	{O_TARGET, "--target", NULL, "cpu|cuda", K_STR, 0, 0, NULL, NULL,
	 "x86 kernels and OpenBLAS, or PTX kernels and cuBLAS; default " DEFAULT_TARGET ",\n"
	 "as this dpc was built " BUILT_WITH " the CUDA toolkit\n"
	 "(the environment variable DPC_TARGET overrides the default)"},
	{O_CPU, "--cpu", NULL, "native|generic", K_STR, 0, 0, NULL, NULL,
	 "the CPU the executable's x86 code is for: this one (default; its\n"
	 "AVX2 or AVX-512), or any x86-64 (to run it on another machine);\n"
	 "the results are the same bits (DPC_CPU sets the default)"},
	{O_OPTIMIZER, "--optimizer", NULL, "sgd|adam", K_CHOICE, 0, 0, NULL, NULL,
	 "the update the executable applies (default sgd); adam's two moments\n"
	 "per parameter are planned device memory, inside --device-mem"},
	{O_RANKS, "--ranks", NULL, "N", K_SPECIAL, 0, 0, NULL, NULL,
	 "plan adam's moments as one rank's share of N ranks (ZeRO stage 1): each\n"
	 "resident parameter's ceil(n/N) elements; the executable then runs as N\n"
	 "ranks under mpirun with --shard-optimizer (default 1: whole moments)"},
	{O_DEVICE_MEM, "--device-mem", NULL, "BYTES", K_BYTES, 0, 0, NULL, NULL,
	 "device memory budget, e.g. 512M or 8G; the plan must fit"},
	{O_HOST_MEM, "--host-mem", NULL, "BYTES", K_BYTES, 0, 0, NULL, NULL,
	 "pinned host memory budget: streamed parameters, their optimizer state\n"
	 "and the snapshots kept in host memory"},
	{O_STREAM, "--stream", NULL, "none|auto|params", K_CHOICE, 0, 0, NULL, NULL,
	 "parameters in host memory, streamed one layer W[l] at a time through\n"
	 "device slots: none keeps all on the device; auto (the default with\n"
	 "--device-mem) streams the largest ones until the plan fits; params\n"
	 "streams every stacked parameter read as W[l] in one loop over its layers"},
	{O_CHECKPOINT, "--checkpoint", NULL, "none|binomial|auto|min-memory", K_CHOICE, 0, 0, NULL, NULL,
	 "loop schedule (default: auto with --device-mem, else none):\n"
	 "none stores everything the adjoint reads, per\n"
	 "iteration; binomial keeps a few snapshots of each top-level loop's\n"
	 "carried values and recomputes (Griewank-Walther revolve); auto\n"
	 "stores everything when --device-mem holds it; else the forward loop\n"
	 "saves the snapshots, and each loop without loops inside keeps what\n"
	 "its adjoint reads in a tape of k rows, taping up to k steps at once\n"
	 "(the forward loop tapes the last k; a relu's mask in a bit per\n"
	 "element); under --device-mem a row may keep less, its adjoint step\n"
	 "computing the rest again, and a program's one loop may keep its\n"
	 "snapshots in the rows too (pooled, when that recomputes less);\n"
	 "s and k are those that fit --device-mem with the fewest recomputed\n"
	 "FLOPs (without it: none advanced, in the least memory); outside\n"
	 "loops, the values the adjoint reads are kept or computed again\n"
	 "from other kept values, for the fewest recomputed FLOPs that fit\n"
	 "(an exact search on small graphs, else greedy with a proven bound,\n"
	 "both shown by --emit=schedule); where none fits --device-mem, auto\n"
	 "takes min-memory's plan if that does; min-memory is auto at the least\n"
	 "peak it reaches: loops in the least of their shapes (rows that keep\n"
	 "everything, rows that keep less, each taped step computed again\n"
	 "with its values made again at each read, or store-everything where\n"
	 "that is lower; the forward loop saves the snapshots only where that\n"
	 "adds no peak), straight-line code chosen for it (Feng & Huang's\n"
	 "objective; past 256 candidates, the fewest recomputed FLOPs within\n"
	 "a 256th of the least found, nested checkpoints among the plans);\n"
	 "--device-mem, if given, is then only checked"},
	{O_OFFLOAD_COST, "--offload-cost", NULL, "N", K_COUNT, 0, (long long)1 << 20, "a count of FLOPs", "2^20 FLOPs a byte",
	 "auto: what moving one byte between the device and the host is worth in\n"
	 "recomputed FLOPs (default 943: an H100's measured 51.6 TFLOP/s of f32\n"
	 "GEMM over its 54.7 GB/s pinned link). A value outside loops that the\n"
	 "adjoint reads may then be offloaded after its last forward use and\n"
	 "fetched back where first needed, instead of kept or computed again,\n"
	 "where that costs less (priced both ways); 0, or --stream none: never"},
	{O_THREADS, "--threads", NULL, "N", K_COUNT, 1, 1024, "a count", "1024",
	 "threads the search for what straight-line code keeps may use (default 2;\n"
	 "it uses at most 2; with 2 and two CPUs, loops' rows, min-memory's\n"
	 "shapes of loops, and the least search's two passes on small graphs\n"
	 "are searched in two processes), and code generation\n"
	 "(default: the CPUs dpc may run on); the plan and the code are the same\n"
	 "for any N"},
	{O_SNAPSHOTS, "--snapshots", NULL, "N", K_COUNT, 1, INT_MAX, "a count", "2^31 - 1",
	 "binomial and auto: snapshot slots per loop, the initial state's included\n"
	 "(default: as many as --device-mem allows, else ceil(sqrt(n)) + 1,\n"
	 "auto's as above; at most n). Unless --stream none, binomial's that\n"
	 "--device-mem cannot hold\n"
	 "live in host memory, and when the parameters stream the default\n"
	 "count tops up there to ceil(sqrt(n)) + 1"},
	{O_SCHEDULE_JSON, "--schedule-json", NULL, "FILE", K_STR, 0, 0, NULL, NULL,
	 "also write the schedule as JSON (with the action list of loops up\n"
	 "to 1000 steps; for the CUDA target also \"kernels\", each launch of\n"
	 "a step as --emit=kernels prints it, and \"predicted_step_ms\")"},
	{O_NO_FUSE, "--no-fuse", NULL, NULL, K_FLAG, 0, 0, NULL, NULL,
	 "a kernel launch per op and loop step everywhere; by default a loop whose\n"
	 "body is small kernels and copies (small matmuls, but no GEMM; no value\n"
	 "over 4096 elements)\n"
	 "runs as one kernel: the forward loop's steps, and each chunk of a\n"
	 "binomial schedule's actions (same bits; --emit=llvm notes each choice)"},
	{O_REFERENCE, "--reference-kernels", NULL, NULL, K_FLAG, 0, 0, NULL, NULL,
	 "convolutions as unfold + GEMM and attention as dpc's per-row kernels,\n"
	 "instead of cuDNN or oneDNN and the tiled attention: the slower\n"
	 "reference that the tests compare against"},
	{O_NO_VERIFY, "--no-verify", NULL, NULL, K_FLAG, 0, 0, NULL, NULL,
	 "skip the IR verifier between passes"},
	{O_VERBOSE, "--verbose", "-v", NULL, K_FLAG, 0, 0, NULL, NULL,
	 "print each phase of the compilation with its time, and each\n"
	 "convolution or attention that takes the reference kernels, on stderr"},
	{O_HELP, "--help", "-h", NULL, K_FLAG, 0, 0, NULL, NULL,
	 "this text"},
	/* an ONNX model's conversion (docs/import.md) */
	{O_LOSS, "--loss", NULL, "cross_entropy|mse|none|causal_lm", K_CHOICE, 0, 0, NULL, NULL,
	 "ONNX: the loss on the model's output (default cross_entropy, with an\n"
	 "i32 labels input; mse takes a target input of the output's shape;\n"
	 "none: the output is the loss; causal_lm: a language model's next-token\n"
	 "loss as HuggingFace's labels= computes it, the logits of positions\n"
	 "0..T-2 against labels 1..T-1 of a labels input [.., T], labels equal to\n"
	 "--ignore-index counting for nothing)"},
	{O_LOSS_ON, "--loss-on", NULL, "NAME", K_STR, 0, 0, NULL, NULL,
	 "ONNX: the output the loss reads (default: the first)"},
	{O_IGNORE_INDEX, "--ignore-index", NULL, "N", K_SPECIAL, 0, 0, NULL, NULL,
	 "ONNX: the label that counts for nothing in cross_entropy and causal_lm\n"
	 "(default -100 for causal_lm, none for cross_entropy; one outside the\n"
	 "vocabulary other than -100 is refused)"},
	{O_SHAPE, "--shape", NULL, "NAME=D0,D1,...", K_SPECIAL, 0, 0, NULL, NULL,
	 "ONNX: fix an input's dimensions (needed for a dynamic one)"},
	{O_FREEZE, "--freeze", NULL, "NAME", K_SPECIAL, 0, 0, NULL, NULL,
	 "ONNX: keep the initializer NAME fixed (a buffer, not trained)"},
	{O_PARAMS_FROM, "--params-from", NULL, "FILE", K_STR, 0, 0, NULL, NULL,
	 "ONNX: the module's parameters by name (a .safetensors file of them, as\n"
	 "safetensors.torch.save_file(dict(model.named_parameters())) writes, or\n"
	 "a text file of names, one a line): every other initializer is a PyTorch\n"
	 "buffer, kept fixed. The dynamo exporter records which are buffers, and\n"
	 "they are kept fixed without it; the legacy exporter does not"},
	{O_TRAIN_BUFFER, "--train-buffer", NULL, "NAME", K_SPECIAL, 0, 0, NULL, NULL,
	 "ONNX: train the initializer NAME although PyTorch registered it as a\n"
	 "buffer"},
	{O_PADDING_IDX, "--padding-idx", NULL, "NAME=IDX", K_SPECIAL, 0, 0, NULL, NULL,
	 "ONNX: the embedding table NAME's row IDX gets no gradient, as\n"
	 "nn.Embedding(padding_idx=IDX) (IDX none: every row trains). The\n"
	 "dynamo exporter records padding_idx and it is carried without this;\n"
	 "the legacy exporter loses it"},
	{O_BATCHNORM, "--batchnorm", NULL, "train|frozen", K_CHOICE, 0, 0, NULL, NULL,
	 "ONNX: BatchNormalization with the batch's statistics, updating the\n"
	 "running ones, as PyTorch's train mode (train, the default), or with\n"
	 "the running ones, fixed (frozen)"},
	{O_NO_LOOPS, "--no-loops", NULL, NULL, K_FLAG, 0, 0, NULL, NULL,
	 "ONNX: every layer as the file writes it; by default consecutive\n"
	 "blocks alike become one loop over stacked parameters (under\n"
	 "--device-mem the flat program is planned too, and taken where it\n"
	 "recomputes less)"},
};

#define NOPTS (sizeof opts / sizeof *opts)

static void usage(void)
{
	printf("usage: dpc [options] MODEL.dp|MODEL.onnx\n\nCompiles a differentiable program, or an ONNX model, into a standalone\n"
	       "training executable.\n"
	       "\noptions:\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const Opt *op = &opts[i];
		const char *arg = op->arg ? op->arg : "";
		char shown[64];
		snprintf(shown, sizeof shown, "%s%s%s%s%s", op->alias ? op->alias : "", op->alias ? ", " : "", op->name,
		         op->arg && arg[0] != '=' ? " " : "", arg);
		const char *h = op->help;
		if (strlen(shown) > 20)
			printf("  %s\n%23s", shown, "");
		else
			printf("  %-20s ", shown);
		/* the help's lines, each after the first indented to the column of the first */
		for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
			printf("%.*s\n%23s", (int)(nl - h), h, "");
		printf("%s\n", h);
	}
	printf("\nThe executable's own options: ./MODEL --help\n");
}

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

/* the words of a choice's arg ("none|auto|params") for an error: "none, auto or params" */
static const char *choices(const char *arg)
{
	const char *s = "", *last = strrchr(arg, '|');
	for (const char *w = arg; w; w = strchr(w, '|') ? strchr(w, '|') + 1 : NULL) {
		size_t n = strcspn(w, "|");
		s = ar_printf("%s%s%.*s", s, w == arg ? "" : w == last + 1 ? " or " : ", ", (int)n, w);
	}
	return s;
}

/* v's index among the choice's words, or -1 */
static int choice(const char *arg, const char *v)
{
	int k = 0;
	for (const char *w = arg; w; w = strchr(w, '|') ? strchr(w, '|') + 1 : NULL, k++)
		if (strlen(v) == strcspn(w, "|") && !strncmp(w, v, strlen(v)))
			return k;
	return -1;
}

/* what parsing leaves for the checks after it */
typedef struct {
	const char *target, *target_from, *cpu, *cpu_from;
	bool ckpt_given;
	int64_t offload_cost;
} Given;

static void define(DriverOptions *o, const char *def)
{
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
	vec_push(&o->defs, d);
}

static void emit_stage(DriverOptions *o, const char *v)
{
	static const struct { const char *name; Emit e; } stages[] = {
		{"ast", EMIT_AST}, {"ir", EMIT_IR}, {"grad", EMIT_GRAD}, {"ckpt", EMIT_CKPT}, {"stream", EMIT_STREAM},
		{"schedule", EMIT_SCHEDULE}, {"memplot", EMIT_MEMPLOT}, {"llvm", EMIT_LLVM}, {"ptx", EMIT_PTX},
		{"kernels", EMIT_KERNELS}, {"obj", EMIT_OBJ}, {"exe", EMIT_EXE}, {"dp", EMIT_DP}, {"lib", EMIT_LIB},
	};
	size_t k = 0;
	while (k < sizeof stages / sizeof *stages && strcmp(stages[k].name, v))
		k++;
	if (k == sizeof stages / sizeof *stages)
		usage_error("unknown stage '%s' for --emit", v);
	o->emit = stages[k].e;
}

/* option op given with value v (NULL for a flag); k: a choice's index; n: a count or a byte count */
static void set(DriverOptions *o, Given *g, const Opt *op, const char *v, int k, long long n)
{
	static const int real_bytes[] = {4, 8, 2, 2};
	static const Optimizer optimizers[] = {OPT_SGD, OPT_ADAM};
	static const StreamMode streams[] = {STREAM_NONE, STREAM_AUTO, STREAM_PARAMS};
	static const CkptMode ckpts[] = {CKPT_NONE, CKPT_BINOMIAL, CKPT_AUTO, CKPT_AUTO};
	switch (op->id) {
	case O_OUTPUT: o->output = v; break;
	case O_EMIT: emit_stage(o, v); break;
	case O_GPU:
		if (!cg_gpu(v))
			usage_error("%s", ar_printf("unknown GPU '%s' for --gpu; known: %s", v, cg_gpu_names()));
		o->gpu = v;
		break;
	case O_HOST_BW: {
		char *end;
		errno = 0;
		double gb = strtod(v, &end);
		if (*end || end == v || errno == ERANGE || !(gb > 0) || gb > 1e6)
			usage_error("--host-bw needs a bandwidth in GB/s above 0 (at most 1e6), not '%s'", v);
		o->host_bw = gb * 1e9;
		break;
	}
	case O_DEFINE: define(o, v); break;
	case O_PRECISION: o->real_bytes = real_bytes[k], o->mixed = k == 3; break;
	case O_TARGET: g->target = v, g->target_from = "--target"; break;
	case O_CPU: g->cpu = v, g->cpu_from = "--cpu"; break;
	case O_OPTIMIZER: o->optimizer = optimizers[k]; break;
	case O_RANKS: {
		char *end;
		errno = 0;
		long long r = strtoll(v, &end, 10);
		if (*end || end == v || r < 1 || errno == ERANGE || r > 1 << 20)
			usage_error("--ranks needs a count from 1 to 1048576, not '%s'", v);
		o->ranks = (int)r;
		break;
	}
	case O_DEVICE_MEM: o->device_mem = n; break;
	case O_HOST_MEM: o->stream.host_mem = n; break;
	case O_STREAM: o->stream.mode = streams[k]; break;
	case O_CHECKPOINT: g->ckpt_given = true, o->ckpt.mode = ckpts[k], o->ckpt.least = k == 3; break;
	/* priced bytes times this stay far from int64's end */
	case O_OFFLOAD_COST: g->offload_cost = n; break;
	case O_THREADS: o->ckpt.threads = o->threads = (int)n; break;
	case O_SNAPSHOTS: o->ckpt.snapshots = n; break;
	case O_SCHEDULE_JSON: o->schedule_json = v; break;
	case O_NO_FUSE: o->no_fuse = true; break;
	case O_REFERENCE: o->reference = true; break;
	case O_NO_VERIFY: o->verify = false; break;
	case O_VERBOSE: o->verbose = true; break;
	case O_HELP: usage(); exit(0);
	case O_LOSS: o->import.loss = v; break;
	case O_LOSS_ON: o->import.loss_on = v; break;
	case O_IGNORE_INDEX: {
		char *end;
		errno = 0;
		long long n = strtoll(v, &end, 10);
		if (*end || end == v || errno == ERANGE || n < INT32_MIN || n > INT32_MAX)
			usage_error("--ignore-index needs an integer label, not '%s'", v);
		o->import.ignore_index = v;
		break;
	}
	case O_SHAPE: vec_push(&o->import.shapes, v); break;
	case O_FREEZE: vec_push(&o->import.freeze, v); break;
	case O_PARAMS_FROM: o->import.params_from = v; break;
	case O_TRAIN_BUFFER: vec_push(&o->import.train, v); break;
	case O_PADDING_IDX: vec_push(&o->import.padding, v); break;
	case O_BATCHNORM: o->import.batchnorm = v; break;
	case O_NO_LOOPS: o->import.no_loops = true; break;
	}
	if (op->id >= O_LOSS && !o->import.given)
		o->import.given = op->name;
}

/* whether the option shapes the executable: those that do are in its model description, which the ranks of
 * a job compare at start, naming the option that differs (-D's are the program's constants, compared as
 * such; what the outputs, the cost model's prices and the planner's threads are left out) */
static bool shapes_build(OptId id)
{
	static const OptId not[] = {O_OUTPUT, O_EMIT, O_GPU, O_HOST_BW, O_DEFINE, O_THREADS, O_SCHEDULE_JSON,
	                            O_NO_VERIFY, O_VERBOSE, O_HELP};
	for (size_t i = 0; i < sizeof not / sizeof *not; i++)
		if (not[i] == id)
			return false;
	return true;
}

/* the option argv[*i] names, with its value (from "--name=V" or the next argument) in *v; NULL: none */
static const Opt *match(int argc, char **argv, int *i, const char **v)
{
	const char *a = argv[*i];
	for (size_t k = 0; k < NOPTS; k++) {
		const Opt *op = &opts[k];
		size_t n = strlen(op->name);
		*v = NULL;
		if (!op->arg) {
			if (!strcmp(a, op->name) || (op->alias && !strcmp(a, op->alias)))
				return op;
			continue;
		}
		/* -D takes its definition joined (-DB=8) or apart */
		if (op->id == O_DEFINE && !strncmp(a, "-D", 2)) {
			*v = a[2] ? a + 2 : (*i + 1 < argc ? argv[++*i] : NULL);
			return op;
		}
		if (strncmp(a, op->name, n) || (a[n] && a[n] != '='))
			continue;
		if (a[n] == '=')
			*v = a + n + 1;
		else if (*i + 1 >= argc)
			usage_error("%s needs a value", op->name);
		else
			*v = argv[++*i];
		return op;
	}
	return NULL;
}

/* The planner's searches allocate and free arrays of megabytes many times (an evaluator's per value and
 * position, a plan's): kept in the heap rather than mapped and unmapped by glibc each time, they do not fault
 * their pages in again (DenseNet-121 imported, min-memory: 1.49 to 1.39 s, 161 to 175 MB) */
static void heap_kept(void)
{
#ifdef __GLIBC__
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	mallopt(M_TOP_PAD, 16 << 20);
#endif
}

int main(int argc, char **argv)
{
	heap_kept();
	DriverOptions o = {0};
	o.real_bytes = 4;
	o.verify = true;
	o.ckpt.threads = 2;
	o.ranks = 1;
	o.attn_price = cg_attn_price;
	/* an H100 (DESIGN.md): 51.6 TFLOP/s of f32 GEMM over a 54.7 GB/s pinned link */
	Given g = {getenv("DPC_TARGET"), "the environment variable DPC_TARGET", getenv("DPC_CPU"),
	           "the environment variable DPC_CPU", false, 943};
	if (!g.target || !*g.target)
		g.target = DEFAULT_TARGET;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		const Opt *op = match(argc, argv, &i, &v);
		if (!op) {
			if (a[0] == '-' && a[1])
				usage_error("unknown option '%s'", a);
			if (o.input)
				usage_error("more than one input file: '%s'", a);
			o.input = a;
			continue;
		}
		int k = -1;
		long long n = 0;
		if (op->kind == K_CHOICE && (k = choice(op->arg, v)) < 0)
			usage_error("%s", ar_printf("%s takes %s, not '%s'", op->name, choices(op->arg), v));
		if (op->kind == K_COUNT)
			n = parse_count(op->name, v, op->what, op->lo, op->hi, op->most);
		if (op->kind == K_BYTES)
			n = parse_bytes(v);
		set(&o, &g, op, v, k, n);
		if (shapes_build(op->id))
			vec_push(&o.given, op->kind == K_BYTES ? ar_printf("%s %lld", op->name, n)
			                   : ar_printf("%s %s", op->name, v ? v : "on"));
	}
	if (!o.input)
		usage_error("%s", "no input file");
	if (!driver_is_onnx(o.input) && o.import.given)
		usage_error("%s", ar_printf("%s applies to an ONNX model (MODEL.onnx), not to '%s'", o.import.given, o.input));
	if (!driver_is_onnx(o.input) && o.emit == EMIT_DP)
		usage_error("%s", ar_printf("--emit=dp prints an ONNX model's converted program; '%s' is not one", o.input));
	if (g.cpu && *g.cpu && strcmp(g.cpu, "native") != 0 && strcmp(g.cpu, "generic") != 0)
		usage_error("%s", ar_printf("%s takes native or generic, not '%s'", g.cpu_from, g.cpu));
	o.generic_cpu = g.cpu && !strcmp(g.cpu, "generic");
	if (!strcmp(g.target, "cpu"))
		o.target = CG_CPU;
	else if (!strcmp(g.target, "cuda"))
		o.target = CG_CUDA;
	else
		usage_error("%s", ar_printf("%s takes cpu or cuda, not '%s'", g.target_from, g.target));
	if (!g.ckpt_given)
		o.ckpt.mode = o.device_mem ? CKPT_AUTO : CKPT_NONE;
	if (o.ckpt.snapshots && o.ckpt.mode == CKPT_NONE)
		usage_error("%s", g.ckpt_given ? "--snapshots has no meaning with --checkpoint none"
		                               : "--snapshots needs --checkpoint binomial or auto (or --device-mem, which makes auto "
		                                 "the default)");
	StreamMode sm = o.stream.mode == STREAM_DEFAULT ? (o.device_mem ? STREAM_AUTO : STREAM_NONE) : o.stream.mode;
	o.ckpt.may_stream = sm != STREAM_NONE;
	o.ckpt.offload_cost = sm != STREAM_NONE ? g.offload_cost : 0;
	o.ckpt.stream_all = sm == STREAM_PARAMS;
	o.ckpt.host_mem = o.stream.host_mem;
	if (driver_is_onnx(o.input) && !(o.input = driver_import(&o)))
		return 0;
	int rc = driver_run(&o);
	ar_free_all();
	return rc;
}
