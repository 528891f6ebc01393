/* rt: the executable's command line. One table of options: each option's
 * name, its value's name, its kind and range, where it goes in RtOpts and
 * its help. Parsing, the checks of every value and --help all come from
 * it, so that an option added is an entry here and a field in RtOpts. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* the largest --steps, --log-every and --gradcheck-samples */
#define MAX_COUNT 1000000000L

typedef enum {
	O_FLAG,    /* no value: sets a bool */
	O_INT,     /* an integer in lo..hi */
	O_REAL,    /* a finite number, at least 0 */
	O_STR,     /* a string (a file name) */
	O_SPECIAL, /* parsed by special() */
} Kind;

typedef struct {
	const char *name, *alias; /* alias: a short form, or NULL */
	const char *arg;          /* the value's name in --help; NULL for a flag */
	Kind kind;
	long lo, hi;
	size_t at;                /* offsetof the field in RtOpts (O_SPECIAL: unused) */
	size_t given;             /* offsetof a bool set when the option is given, or NONE */
	const char *help;         /* its lines, separated by \n */
} Opt;

#define NONE ((size_t)-1)
#define AT(f) offsetof(RtOpts, f)

static const Opt opts[] = {
	{"--steps", NULL, "N", O_INT, 1, MAX_COUNT, AT(steps), AT(steps_set), "training steps, 1 to 10^9 (default 100)"},
	{"--lr", NULL, "X", O_REAL, 0, 0, AT(lr), AT(lr_set), "learning rate (default 0.01 for sgd, 0.001 for adam)"},
	{"--optimizer", NULL, "sgd|adam|adamw", O_SPECIAL, 0, 0, 0, NONE,
	 "must be the optimizer compiled in (dpc --optimizer, default sgd), which\n"
	 "this executable applies; adam's two moments per parameter are in the plan.\n"
	 "adamw: an adam executable with decoupled weight decay (torch.optim.AdamW)"},
	{"--weight-decay", NULL, "X", O_REAL, 0, 0, AT(weight_decay), AT(weight_decay_set),
	 "adamw's decay (default 0.01): p <- p - lr X p before each step, on the\n"
	 "parameters of two or more dimensions (a stacked one's per layer), not\n"
	 "on biases and norm gains, as nanoGPT"},
	{"--clip-grad", NULL, "X", O_REAL, 0, 0, AT(clip_grad), AT(clip_set),
	 "scale the gradients by min(1, X / (norm + 1e-6)) before the update, norm\n"
	 "the L2 norm over every parameter's gradient, as clip_grad_norm_; X > 0.\n"
	 "The resident gradients come to the host for the norm each step (counted\n"
	 "in the summary's d2h bytes); streamed parameters' gradients are there\n"
	 "already, and their steps run on the host once the norm is known"},
	{"--accum", NULL, "K", O_INT, 1, MAX_COUNT, AT(accum), NONE,
	 "K micro-batches per optimizer step, 1 to 10^9 (default 1): each reads its\n"
	 "own batch, the gradients summed in place (no memory beyond the plan's),\n"
	 "then one update; the step's loss the micro-batches' mean. --steps counts\n"
	 "optimizer steps. A layer's gradient is made on its own, then added; the\n"
	 "streamed parameters' are added on the host, in pinned memory of their\n"
	 "size (bf16-mixed: bf16 gradients into f32 sums); with --graph, the last\n"
	 "micro-batch is captured"},
	{"--lr-schedule", NULL, "constant|cosine|linear", O_SPECIAL, 0, 0, 0, NONE,
	 "the rate after --warmup (default constant): cosine decays from --lr to\n"
	 "--min-lr over the remaining steps, linear likewise in a straight line"},
	{"--warmup", NULL, "N", O_INT, 0, MAX_COUNT, AT(warmup), NONE,
	 "the first N steps rise linearly to --lr: step t (from 0) at lr (t+1)/N\n"
	 "(default 0; at most --steps)"},
	{"--min-lr", NULL, "X", O_REAL, 0, 0, AT(min_lr), NONE, "where cosine and linear end (default 0)"},
	{"--seed", NULL, "N", O_INT, 0, INT64_MAX, AT(seed), NONE,
	 "seed of parameter initialisation and synthetic data, 0 to 2^63-1 (default 0)"},
	{"--data", NULL, "FILE", O_STR, 0, 0, AT(data), NONE,
	 "the data of the input the loss computes from (the one such input; a\n"
	 "model with more names each by --input): a .npy file, or for an i32\n"
	 "input any other file as bytes (text)"},
	{"--labels", NULL, "FILE", O_STR, 0, 0, AT(labels), NONE,
	 "the data of the input the loss reads only as its labels or target\n"
	 "(cross_entropy's labels, mse's target), likewise"},
	{"--in-order", NULL, NULL, O_FLAG, 0, 0, AT(in_order), NONE,
	 "read the rows of the training .npy files in their order, batch after\n"
	 "batch, each epoch alike, not shuffled (data already put in order, as a\n"
	 "loader's batches saved one after another)"},
	{"--input", NULL, "NAME=FILE", O_SPECIAL, 0, 0, 0, NONE,
	 "any input's data, by name, likewise. Once one input has data every\n"
	 "one needs some; an input given twice is an error"},
	{"--val-data", NULL, "FILE", O_STR, 0, 0, AT(val_data), NONE,
	 "validation data for --data's input, read like --data: every --eval-every\n"
	 "steps and after the last, the mean loss over its rows in turn (dropout\n"
	 "off, nothing updated), on the progress line as val and in --log-json\n"
	 "and --summary-json as val_loss"},
	{"--val-labels", NULL, "FILE", O_STR, 0, 0, AT(val_labels), NONE,
	 "validation data for --labels' input, likewise"},
	{"--val-input", NULL, "NAME=FILE", O_SPECIAL, 0, 0, 0, NONE,
	 "any input's validation data, by name, likewise; every input needs some\n"
	 "once one has"},
	{"--eval-every", NULL, "N", O_INT, 1, MAX_COUNT, AT(eval_every), NONE,
	 "the validation interval, 1 to 10^9 (default --log-every's)"},
	{"--init", NULL, "FILE.safetensors", O_STR, 0, 0, AT(init), NONE,
	 "start from these parameters and buffers (every one by name, F32, F64 or\n"
	 "BF16; a PyTorch state dict's num_batches_tracked counters are skipped)"},
	{"--save", NULL, "FILE.safetensors", O_STR, 0, 0, AT(save), NONE,
	 "write the trained parameters and the buffers (atomically: a temporary\n"
	 "file, then rename)"},
	{"--save-state", NULL, "FILE", O_STR, 0, 0, AT(save_state), NONE,
	 "write the run's state: parameters, buffers, adam's moments, the step,\n"
	 "and the settings a resumed run must share (safetensors, atomically),\n"
	 "every --save-every steps and at the end"},
	{"--save-every", NULL, "N", O_INT, 1, MAX_COUNT, AT(save_every), NONE,
	 "--save-state's interval in steps, 1 to 10^9 (default: at the end only)"},
	{"--resume", NULL, "FILE", O_STR, 0, 0, AT(resume), NONE,
	 "continue a run from its --save-state file to --steps: the parameters\n"
	 "then are those of the run uninterrupted, bit for bit. A state of\n"
	 "another model, -D value, precision, optimizer, seed or schedule is\n"
	 "refused, naming the field"},
	{"--dump-grads", NULL, "FILE.safetensors", O_STR, 0, 0, AT(dump_grads), NONE,
	 "write the gradients of the first step (parameters only)"},
	{"--summary-json", NULL, "FILE", O_STR, 0, 0, AT(summary), NONE,
	 "write a JSON summary: losses, reports, time, device bytes, transfers,\n"
	 "loop steps"},
	{"--log-every", NULL, "N", O_INT, 1, MAX_COUNT, AT(log_every), NONE,
	 "progress line interval, 1 to 10^9 (default steps/10), when the output\n"
	 "is not a terminal or runs under mpirun (on a terminal the line redraws\n"
	 "in place); the line shows the loss, its smoothed value (an exponential\n"
	 "average over 10 steps), ms/step and steps/s (tokens/s when an embed\n"
	 "reads an input's ids) of the steps since the previous line, the elapsed\n"
	 "time and the ETA"},
	{"--log-json", NULL, "FILE", O_STR, 0, 0, AT(log_json), NONE,
	 "write one JSON line per step: step, loss, smoothed, lr, ms, bytes (moved\n"
	 "between host and device), and the reports (tools/plot_runs draws them)"},
	{"--collective-timeout", NULL, "S", O_REAL, 0, 0, AT(collective_timeout), AT(collective_timeout_set),
	 "under mpirun: the longest a rank waits in a sum or other collective\n"
	 "before it names the step, the collective and the ranks it waited for,\n"
	 "and the job ends, non-zero (default 300 s; the start-up handshake\n"
	 "waits at most 60 s, or S if less). A link down or a host gone mid-run\n"
	 "ends the job this long after; a --save-state before it resumes"},
	{"--quiet", NULL, NULL, O_FLAG, 0, 0, AT(quiet), NONE, "only errors and the final line"},
	{"--verbose", "-v", NULL, O_FLAG, 0, 0, AT(verbose), NONE, "also say how many threads run and why"},
	{"--threads", NULL, "N", O_INT, 1, RT_MAX_THREADS, AT(threads), NONE,
	 "CPU: the threads that run kernels, GEMMs, convolutions and attention, 1\n"
	 "to 256 (default OMP_NUM_THREADS, else the cores this process may run on,\n"
	 "as its affinity mask says: mpirun's binding, taskset, cgroups); more than\n"
	 "those cores is cut to them, with a warning. The results are the same\n"
	 "bits at any count"},
	{"--tf32", NULL, NULL, O_SPECIAL, 0, 0, 0, NONE, "GPU: let cuBLAS use TF32 tensor cores for f32 GEMMs"},
	{"--conv-fp32", NULL, NULL, O_SPECIAL, 0, 0, 0, NONE,
	 "GPU: f32 convolutions in exact FP32; by default cuDNN may use TF32\n"
	 "tensor cores for them, as PyTorch's cuDNN does (its allow_tf32)"},
	{"--profile", NULL, NULL, O_FLAG, 0, 0, AT(profile), NONE,
	 "time every kernel, GEMM, copy and transfer of the last step, and print\n"
	 "the totals by label (CUDA events on the GPU)"},
	{"--trace", NULL, "FILE.json", O_STR, 0, 0, AT(trace), NONE,
	 "write the traced steps as Chrome trace events, for Perfetto\n"
	 "(ui.perfetto.dev) or chrome://tracing: a track of phases (forward,\n"
	 "backward, advances, taped steps, adjoints, update), one per stream\n"
	 "(compute, copy) with every kernel, GEMM, copy, transfer and wait,\n"
	 "labelled as --profile labels them, and a counter of device bytes in use"},
	{"--trace-steps", NULL, "A:B", O_SPECIAL, 0, 0, 0, NONE, "the steps --trace records (default the last step)"},
	{"--memplot", NULL, "FILE.svg", O_STR, 0, 0, AT(memplot), NONE,
	 "draw device memory in the last traced step: the bytes in use at each\n"
	 "call, as the allocator counts them, over the plan's stacked categories\n"
	 "(what dpc --emit=memplot draws) and the --device-mem line"},
	{"--graph", NULL, NULL, O_FLAG, 0, 0, AT(graph), NONE,
	 "GPU: capture the second step's work as a CUDA graph and replay it\n"
	 "for each later step (not with dropout, streaming, snapshots in host\n"
	 "memory or --profile, which run step by step, as they say)"},
	{"--shard-optimizer", NULL, NULL, O_FLAG, 0, 0, AT(shard_optimizer), NONE,
	 "under mpirun: each rank keeps and updates one share of Adam's state and\n"
	 "of every resident parameter, then gathers the parameters (ZeRO stage 1);\n"
	 "needs an executable of dpc --ranks N run as N ranks"},
	{"--eval", NULL, NULL, O_FLAG, 0, 0, AT(eval), NONE,
	 "evaluate instead of training: the loss and reports of each batch of the\n"
	 "first input's data (or of --steps batches), dropout off, training() 0,\n"
	 "nothing updated (parameters or buffers);\n"
	 "prints their means (and writes them to --summary-json)"},
	{"--gradcheck", NULL, NULL, O_FLAG, 0, 0, AT(gradcheck), NONE,
	 "compare gradients with central finite differences instead of training"},
	{"--gradcheck-samples", NULL, "N", O_INT, 1, MAX_COUNT, AT(gc_samples), NONE,
	 "entries sampled per parameter, 1 to 10^9 (default 8)"},
	{"--gradcheck-threshold", NULL, "X", O_REAL, 0, 0, AT(gc_threshold), NONE,
	 "fail above this relative error (default 1e-6)"},
	{"--help", "-h", NULL, O_SPECIAL, 0, 0, 0, NONE, "this text"},
};

static const char epilogue[] =
	"Data. A .npy file for an input of shape [B, ...] holds [N, ...] rows (N >= 1) or exactly [B, ...];\n"
	"float32/64 and int32/64 are accepted. Training reads N > B rows in an order shuffled for each epoch\n"
	"from the seed (inputs of as many rows alike; --in-order: in the files' order). For an i32 input, a\n"
	"file not named *.npy is read as bytes, each an id 0..255 (byte-level text); training reads windows\n"
	"of the input's row length at random offsets, as nanoGPT samples. --eval and --gradcheck read rows in turn. The order is a\n"
	"function of the seed and the step, so --resume continues it.\n"
	"Ids of cross_entropy labels and embed tables must lie below their bound. With no --data, --labels\n"
	"or --input at all every input gets a synthetic data set of 16 batches drawn from the seed (the\n"
	"first line says so): real inputs N(0, 1), i32 inputs ids below their bound (else 0 or 1); the\n"
	"labels input, where there is one, made by a fixed random teacher from the row x of the first input\n"
	"the loss computes from: tanh(x T) for real labels, argmax over classes of x T for i32 labels.\n"
	"\n"
	"Gradient check. On batch 0, for each sampled entry, fd = (L(p+h) - L(p-h)) / 2h with\n"
	"h = 1e-6 max(1, |p|); error = |ad - fd| / max(|ad|, |fd|), counted as 0 when |ad - fd| is below the\n"
	"finite-difference noise floor 1e-8 max(1, |L|). Meaningful in a float64 build (dpc --precision f64).\n"
	"\n"
	"CPU executables split work between --threads threads (else OMP_NUM_THREADS, else one per core\n"
	"this process may run on): into pieces cut by the shapes alone, each summed in one order, so\n"
	"the results are the same bits at any thread count. OpenBLAS and oneDNN run single-threaded\n"
	"inside those pieces; OPENBLAS_NUM_THREADS is not read.\n"
	"\n"
	"Exit status: 0 success, 1 a runtime error or a failed gradient check, 2 a bad command line.\n";

/* --help: each option's name and value in a column of 22, its help beside
 * (below a longer name's line, continued at the same column) */
void rt_help(void)
{
	printf("usage: %s [options]\n\nTrains the model compiled into this executable by dpc.\n\n", rt_prog);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		const Opt *o = &opts[i];
		char head[64];
		snprintf(head, sizeof head, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
		         o->arg ? " " : "", o->arg ? o->arg : "");
		printf("  %-22s  ", head);
		for (const char *s = o->help; *s;) {
			const char *nl = strchr(s, '\n');
			int n = nl ? (int)(nl - s) : (int)strlen(s);
			printf("%.*s\n", n, s);
			if (!nl)
				break;
			s = nl + 1;
			printf("%26s", "");
		}
	}
	printf("\n%s", epilogue);
}

noreturn void rt_usage(const char *fmt, const char *arg)
{
	char msg[1024];
	snprintf(msg, sizeof msg, fmt, arg);
	if (rt_fail_trap)
		rt_fail(2, "%s", msg);
	fprintf(stderr, "%s: error: %s\n(%s --help lists the options)\n", rt_prog, msg, rt_prog);
	exit(2);
}

/* an integer in lo..hi, or exit 2: never clamped, never wrapped */
static long int_value(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	bool digits = (*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9');
	if (!digits || end == s || *end || errno == ERANGE || v < lo || v > hi) {
		char why[256];
		snprintf(why, sizeof why, "%s needs an integer in %ld..%ld, not '%%s'", opt, lo, hi);
		rt_usage(why, s);
	}
	return v;
}

static double real_value(const char *opt, const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !isfinite(v) || v < 0) {
		char why[256];
		snprintf(why, sizeof why, "%s needs a non-negative number, not '%%s'", opt);
		rt_usage(why, s);
	}
	return v;
}

/* the options a field of RtOpts alone cannot hold */
static void special(RtOpts *o, const char *name, const char *v)
{
	if (!strcmp(name, "--help")) {
		if (rt_fail_trap)
			rt_fail(2, "--help is the executable's: it prints the options a session takes");
		rt_help();
		exit(0);
	} else if (!strcmp(name, "--tf32")) {
		rt_tf32 = true;
	} else if (!strcmp(name, "--conv-fp32")) {
		rt_conv_fp32 = true;
	} else if (!strcmp(name, "--optimizer")) {
		if (strcmp(v, "sgd") && strcmp(v, "adam") && strcmp(v, "adamw"))
			rt_usage("--optimizer takes sgd, adam or adamw, not '%s'", v);
		o->optimizer = v;
	} else if (!strcmp(name, "--lr-schedule")) {
		static const char *names[] = {"constant", "cosine", "linear"};
		o->schedule = -1;
		for (int i = 0; i < 3; i++)
			if (!strcmp(v, names[i]))
				o->schedule = i;
		if (o->schedule < 0)
			rt_usage("--lr-schedule takes constant, cosine or linear, not '%s'", v);
	} else if (!strcmp(name, "--input") || !strcmp(name, "--val-input")) {
		bool val = name[2] == 'v';
		const char *eq = strchr(v, '=');
		int *n = val ? &o->nval_files : &o->ninput_files;
		if (!eq || eq == v || !eq[1])
			rt_usage(val ? "--val-input needs NAME=FILE, not '%s'" : "--input needs NAME=FILE, not '%s'", v);
		if (*n == RT_MAX_INPUT_FILES)
			rt_usage(val ? "%s: too many --val-input options" : "%s: too many --input options", v);
		(val ? o->val_name : o->input_name)[*n] = strndup(v, (size_t)(eq - v));
		(val ? o->val_file : o->input_file)[(*n)++] = eq + 1;
	} else if (!strcmp(name, "--trace-steps")) {
		const char *colon = strchr(v, ':');
		char first[32];
		if (!colon || colon == v || colon - v >= (long)sizeof first || !colon[1])
			rt_usage("--trace-steps takes FIRST:LAST, such as 3:5, not '%s'", v);
		snprintf(first, sizeof first, "%.*s", (int)(colon - v), v);
		o->trace_steps_set = true;
		o->trace_from = int_value("--trace-steps", first, 1, MAX_COUNT);
		o->trace_to = int_value("--trace-steps", colon + 1, 1, MAX_COUNT);
		if (o->trace_to < o->trace_from)
			rt_usage("--trace-steps %s: the last step comes before the first", v);
	}
}

double rt_lr_at(const RtOpts *o, long t)
{
	double lr = o->lr, m = o->min_lr;
	long w = o->warmup, n = o->steps;
	if (t < w)
		return lr * (double)(t + 1) / (double)w;
	if (o->schedule == RT_LR_CONSTANT || n <= w)
		return lr;
	double f = (double)(t - w) / (double)(n - w);
	if (o->schedule == RT_LR_COSINE)
		return m + 0.5 * (lr - m) * (1 + cos(3.14159265358979323846 * f));
	return lr - (lr - m) * f;
}

void rt_parse_opts(RtOpts *o, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->steps = 100;
	o->gc_samples = 8;
	o->gc_threshold = 1e-6;
	o->log_every = -1;
	o->accum = 1;
	o->collective_timeout = RT_COLLECTIVE_TIMEOUT;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const Opt *opt = NULL;
		for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !opt; k++)
			if (!strcmp(a, opts[k].name) || (opts[k].alias && !strcmp(a, opts[k].alias)))
				opt = &opts[k];
		if (!opt)
			rt_usage("unknown option '%s'", a);
		const char *v = NULL;
		if (opt->arg) {
			if (i + 1 >= argc)
				rt_usage("%s needs a value", a);
			v = argv[++i];
		}
		char *field = (char *)o + opt->at;
		switch (opt->kind) {
		case O_FLAG: *(bool *)field = true; break;
		case O_INT: *(long *)field = int_value(a, v, opt->lo, opt->hi); break;
		case O_REAL: *(double *)field = real_value(a, v); break;
		case O_STR: *(const char **)field = v; break;
		case O_SPECIAL: special(o, opt->name, v); break;
		}
		if (opt->given != NONE)
			*(bool *)((char *)o + opt->given) = true;
	}

	if (o->log_every < 0)
		o->log_every = o->steps / 10 > 0 ? o->steps / 10 : 1;
	if (o->clip_set && !(o->clip_grad > 0))
		rt_usage("%s", "--clip-grad needs a norm above 0");
	if (!o->eval_every)
		o->eval_every = o->log_every;
	if (o->warmup > o->steps) {
		char steps[96];
		snprintf(steps, sizeof steps, "%ld warmup steps, more than --steps %ld", o->warmup, o->steps);
		rt_usage("--warmup: %s", steps);
	}
	if (o->weight_decay_set && (!o->optimizer || strcmp(o->optimizer, "adamw")))
		rt_usage("%s", "--weight-decay is AdamW's decoupled decay: give --optimizer adamw (with an executable compiled "
		         "with dpc --optimizer adam)");
	if (o->collective_timeout_set && !(o->collective_timeout > 0))
		rt_usage("%s", "--collective-timeout needs a number of seconds above 0");
	if (o->save_every && !o->save_state)
		rt_usage("%s", "--save-every needs --save-state FILE");
	if (o->resume && o->init)
		rt_usage("%s", "--resume continues a run with its own parameters: it does not take --init");
	if (o->optimizer && !strcmp(o->optimizer, "adamw") && !o->weight_decay_set)
		o->weight_decay = 0.01;
	if (o->trace_from && !o->trace && !o->memplot)
		rt_usage("%s", "--trace-steps needs --trace FILE or --memplot FILE");
	if (!o->trace_from)
		o->trace_from = o->trace_to = o->steps;
	if ((o->trace || o->memplot) && o->trace_to > o->steps) {
		char steps[32];
		snprintf(steps, sizeof steps, "%ld", o->steps);
		rt_usage("--trace-steps reaches past the last step (--steps %s)", steps);
	}
}
