/* libFuzzer target: a .dp program through the frontend, reverse mode, both
 * loop schedules, streaming and the memory plan, with every printed stage. A user error
 * returns to the harness (diag_set_trap); a compiler bug (die, a failed IR
 * verification) aborts, and so do the sanitizers: both are findings. */
#include <stdint.h>
#include <stdio.h>

#include "../../compiler/driver.h"

static FILE *sink;

/* The pipeline as dpc runs it (driver_passes), to the memory plan, then
 * every printed stage. */
static void pipeline(FeAst *ast, int real_bytes, CkptMode mode, int64_t budget, Optimizer opt, StreamMode stream)
{
	DriverOptions o = {0};
	o.emit = EMIT_EXE;
	o.real_bytes = real_bytes;
	o.optimizer = opt;
	o.ckpt = (CkptOptions){.mode = mode, .may_stream = stream != STREAM_NONE, .stream_all = stream == STREAM_PARAMS};
	o.device_mem = budget;
	o.stream.mode = stream;
	o.verify = true;
	Emit last;
	Program *p = driver_passes(ast, &o, &last);
	ir_print(sink, p);
	mem_print(sink, p);
	ckpt_print_schedule(sink, p, false, NULL);
	ckpt_print_schedule(sink, p, true, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!sink) {
		sink = fopen("/dev/null", "w");
		fe_max_ops = 20000; /* a sanitized run of the full 2^20 takes seconds */
	}
	/* each run gets its own trap: a later one may fail where an earlier passed */
	static const struct { int real_bytes; CkptMode mode; int64_t budget; Optimizer opt; StreamMode stream; } runs[] = {
		{4, CKPT_NONE, 0, OPT_SGD, STREAM_NONE}, {8, CKPT_BINOMIAL, 0, OPT_SGD, STREAM_NONE},
		{4, CKPT_BINOMIAL, 1 << 20, OPT_ADAM, STREAM_AUTO}, {4, CKPT_NONE, 0, OPT_ADAM, STREAM_PARAMS},
	};
	for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
		jmp_buf trap;
		if (setjmp(trap) == 0) {
			diag_set_trap(&trap);
			FeAst *ast = fe_parse_text("fuzz.dp", (const char *)data, size, NULL, 0);
			if (i == 0)
				fe_print_ast(sink, ast);
			pipeline(ast, runs[i].real_bytes, runs[i].mode, runs[i].budget, runs[i].opt, runs[i].stream);
		}
		diag_set_trap(NULL);
		ar_free_all();
	}
	return 0;
}
