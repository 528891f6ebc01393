/* libFuzzer target: a .dp program through the frontend, reverse mode, both
 * loop schedules and the memory plan, with every printed stage. A user error
 * returns to the harness (diag_set_trap); a compiler bug (die, a failed IR
 * verification) aborts, and so do the sanitizers: both are findings. */
#include <stdint.h>
#include <stdio.h>

#include "../../compiler/ad_transform/ad.h"
#include "../../compiler/checkpoint_pass/ckpt.h"
#include "../../compiler/frontend/fe.h"
#include "../../compiler/stream_pass/stream.h"

static FILE *sink;

/* One schedule, store-everything or binomial, from a fresh lowering. */
static void pipeline(FeAst *ast, int real_bytes, CkptMode mode, int64_t budget, Optimizer opt)
{
	Program *p = fe_lower(ast, real_bytes);
	p->optimizer = opt;
	ir_verify(p, "frontend");
	ir_print(sink, p);
	AdOptions ad = {mode != CKPT_NONE};
	p = ad_transform(p, &ad);
	ir_verify(p, "ad_transform");
	p = ir_dce(p);
	ir_verify(p, "dce");
	CkptOptions ck = {mode, 0, budget};
	p = ckpt_pass(p, &ck);
	ir_verify(p, "checkpoint_pass");
	StreamOptions so = {budget};
	p = stream_pass(p, &so);
	ir_verify(p, "stream_pass");
	ir_print(sink, p);
	stream_print(sink, p);
	ckpt_print_schedule(sink, p, false);
	ckpt_print_schedule(sink, p, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!sink) {
		sink = fopen("/dev/null", "w");
		fe_max_ops = 20000; /* a sanitized run of the full 2^20 takes seconds */
	}
	/* each run gets its own trap: a later one may fail where an earlier passed */
	static const struct { int real_bytes; CkptMode mode; int64_t budget; Optimizer opt; } runs[] = {
		{4, CKPT_NONE, 0, OPT_SGD}, {8, CKPT_BINOMIAL, 0, OPT_SGD}, {4, CKPT_BINOMIAL, 1 << 20, OPT_ADAM},
	};
	for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
		jmp_buf trap;
		if (setjmp(trap) == 0) {
			diag_set_trap(&trap);
			FeAst *ast = fe_parse_text("fuzz.dp", (const char *)data, size, NULL, 0);
			if (i == 0)
				fe_print_ast(sink, ast);
			pipeline(ast, runs[i].real_bytes, runs[i].mode, runs[i].budget, runs[i].opt);
		}
		diag_set_trap(NULL);
		ar_free_all();
	}
	return 0;
}
