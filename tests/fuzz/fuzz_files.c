/* libFuzzer target: the runtime's file readers, from memory. The same bytes
 * go to rt_npy_parse and to rt_safetensors_parse for a small fixed model
 * (parameters of rank 0, 1 and 2; f32, f64 and i32). A refused file returns
 * to the harness through rt_fail_trap; a crash, a sanitizer report or a
 * leak (the parsers free what they allocated before they fail) is a finding.
 *
 *   clang -fsanitize=fuzzer,address,undefined -Iruntime tests/fuzz/fuzz_files.c \
 *       runtime/files.c runtime/desc.c -lm -o fuzz_files
 *   ./fuzz_files -close_fd_mask=2 tests/fuzz/corpus_files
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rt.h"

/* arena layout: W f32 [4, 2] at 0 (grad 32), b f64 [3] at 64 (grad 88),
 * s f32 [] at 112 (grad 116), k i32 [2] at 120 (a buffer), x f32 [2, 4] at 136 */
static const char desc[] =
	"dpc 1\n"
	"model fuzz\n"
	"precision f32\n"
	"arena 256\n"
	"loss 200 f32\n"
	"param W f32 2 4 2 0 32 0 normal 0.5 0\n"
	"param b f64 1 3 64 88 0 zeros 0 0\n"
	"param s f32 0 112 116 0 ones 0 0\n"
	"param k i32 1 2 120 -1 0 zeros 0 0\n"
	"buffer k\n"
	"input x f32 2 2 4 136 0 0 0\n"
	"optimizer sgd\n"
	"kernel sgd f32 0\n"
	"kernel adam f32 1\n"
	"kernel sgd f64 2\n"
	"kernel adam f64 3\n"
	"end\n";

static RtModel model;
static bool ready;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ready) {
		rt_prog = "fuzz_files";
		rt_parse_desc(&model, desc);
		ready = true;
	}
	jmp_buf trap;
	rt_fail_trap = &trap;
	if (setjmp(trap) == 0) {
		int rank = 0;
		int64_t dim[RT_MAXRANK];
		double *v = rt_npy_parse("fuzz.npy", data, size, &rank, dim);
		if (rank < 0 || rank > RT_MAXRANK)
			abort();
		free(v);
	}
	void *bufs[4];
	for (int i = 0; i < model.nparams; i++)
		bufs[i] = calloc(1, (size_t)model.params[i].bytes);
	RtMeta meta = {0};
	if (setjmp(trap) == 0)
		rt_safetensors_parse("fuzz.safetensors", data, size, &model, bufs, &meta);
	for (int i = 0; i < meta.n; i++)
		free(meta.key[i]), free(meta.val[i]);
	for (int i = 0; i < model.nparams; i++)
		free(bufs[i]);
	rt_fail_trap = NULL;
	return 0;
}
