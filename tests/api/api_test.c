/* The C API (runtime/dpc.h) from a host program: every call, and every refusal between the steps of a
 * run whose parameters must come out as the executable's (run.sh compares the files byte for byte: a
 * refused call changes nothing).
 *
 *   api_test DIR
 *
 * DIR holds x.bin and y.bin (one batch of the classifier's inputs, raw f32 and i32). Written there:
 * api.safetensors (5 steps on the batch put, errors between them), files.safetensors (5 steps on the
 * options' data, --input), again.safetensors (a second session after the first closed), resumed.safetensors
 * (3 steps, the state saved, 2 more in another session from it), eval.txt (dpc_eval's loss). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpc.h"

static int npass, nfail;

static void ok(int cond, const char *what)
{
	printf("%s - api: %s\n", cond ? "ok" : "not ok", what);
	cond ? npass++ : nfail++;
}

/* a call that must fail with code and a message holding pat; the session goes on */
static void refused(DpcSession *s, int rc, int code, const char *pat, const char *what)
{
	const char *msg = dpc_error(s);
	int good = rc == code && strstr(msg, pat) != NULL;
	if (!good)
		printf("    code %d (expected %d), message: %s\n", rc, code, msg);
	ok(good, what);
}

static void *slurp(const char *dir, const char *name, long want)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	void *p = malloc((size_t)want);
	if (!f || fread(p, 1, (size_t)want, f) != (size_t)want) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	return p;
}

static const char *at(const char *dir, const char *name)
{
	static char path[4][4096];
	static int k;
	char *p = path[k++ & 3];
	snprintf(p, 4096, "%s/%s", dir, name);
	return p;
}

enum { B = 128, D = 20 };

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: api_test DIR\n");
		return 2;
	}
	const char *dir = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0); /* each line out as it is made, whatever ends the process */
	float *x = slurp(dir, "x.bin", 4L * B * D);
	int *y = slurp(dir, "y.bin", 4L * B);
	int64_t xd[2] = {B, D}, yd[1] = {B}, bad[2] = {B, D + 1};
	const char *opts[] = {"--seed", "3", "--quiet", "--optimizer", "adam"};
	DpcSession *s, *other;
	double loss = 0;

	ok(dpc_version() == DPC_API_VERSION, "dpc_version is the header's");
	/* a bad option: a usage error, a session that only closes */
	const char *badopt[] = {"--steps", "x"};
	int rc = dpc_open(&s, 2, badopt);
	refused(s, rc, DPC_ERR_USAGE, "--steps needs an integer", "an option the runtime refuses");
	refused(s, dpc_step(s, &loss), DPC_ERR_STATE, "did not open", "a session that did not open refuses steps");
	ok(dpc_close(s) == DPC_OK, "a session that did not open closes");
	const char *wrongopt[] = {"--optimizer", "sgd"};
	refused(s, dpc_open(&s, 2, wrongopt), DPC_ERR_USAGE, "compiled for --optimizer adam", "an optimizer not compiled in");
	dpc_close(s);
	const char *help[] = {"--help"};
	refused(s, dpc_open(&s, 1, help), DPC_ERR_USAGE, "--help is the executable's", "--help is refused, not printed");
	dpc_close(s);

	/* the run whose parameters run.sh compares with the executable's */
	ok(dpc_open(&s, 5, opts) == DPC_OK, "dpc_open");
	refused(NULL, dpc_open(&other, 5, opts), DPC_ERR_STATE, "open in this process already", "a second session at once");
	ok(other == NULL, "no second session is given");
	ok(!strcmp(dpc_model(s), "classifier") && dpc_inputs(s) == 2 && dpc_params(s) == 4 && dpc_reports(s) == 1 &&
	   !strcmp(dpc_optimizer(s), "adam"), "the model's name, inputs, parameters, reports and optimizer");
	DpcTensor t;
	ok(dpc_input(s, 0, &t) == DPC_OK && !strcmp(t.name, "x") && !strcmp(t.dtype, "f32") && t.rank == 2 &&
	   t.dims[0] == B && t.dims[1] == D && t.bytes == 4L * B * D && t.kind == DPC_INPUT, "dpc_input");
	ok(dpc_input(s, 1, &t) == DPC_OK && t.classes == 10 && !strcmp(t.dtype, "i32"), "dpc_input: labels and classes");
	ok(dpc_input(s, 2, &t) == DPC_ERR_USAGE, "dpc_input past the last");
	ok(dpc_param(s, 0, &t) == DPC_OK && !strcmp(t.name, "W1") && t.kind == DPC_PARAM && t.bytes == 4L * D * 64,
	   "dpc_param");

	refused(s, dpc_put(s, "z", x, "f32", 2, xd, DPC_HOST), DPC_ERR_USAGE, "no input named 'z' (its inputs: x, y)",
	        "a name not in the model");
	refused(s, dpc_put(s, "x", x, "f64", 2, xd, DPC_HOST), DPC_ERR_USAGE, "input 'x' is f32, and the batch given is f64",
	        "a wrong dtype");
	refused(s, dpc_put(s, "x", x, "f32", 2, bad, DPC_HOST), DPC_ERR_USAGE,
	        "input 'x' has shape [128, 20], and the batch given has shape [128, 21]", "a wrong shape");
	refused(s, dpc_put(s, "x", x, "f32", 1, xd, DPC_HOST), DPC_ERR_USAGE, "the batch given has shape [128]",
	        "a wrong rank");
	refused(s, dpc_put(s, "x", NULL, "f32", 2, xd, DPC_HOST), DPC_ERR_USAGE, "no data", "no data");
	refused(s, dpc_put(s, "x", x, "f32", 2, xd, DPC_DEVICE), DPC_ERR_USAGE, "compiled for the CPU",
	        "device memory on a CPU library");
	int *wrong = malloc(4L * B);
	memcpy(wrong, y, 4L * B);
	wrong[7] = 10;
	refused(s, dpc_put(s, "y", wrong, "i32", 1, yd, DPC_HOST), DPC_ERR_USAGE, "entry 7 is 10, not a class in 0..9",
	        "a label out of range");
	float *nan = malloc(4L * B * D);
	memcpy(nan, x, 4L * B * D);
	nan[5] = NAN;
	refused(s, dpc_put(s, "x", nan, "f32", 2, xd, DPC_HOST), DPC_ERR_USAGE, "entry 5 of input 'x' is not a finite",
	        "a value that is not finite");
	ok(dpc_put(s, "x", x, "f32", 2, xd, DPC_HOST) == DPC_OK, "dpc_put x");
	refused(s, dpc_step(s, &loss), DPC_ERR_USAGE, "input 'y' has no batch for a step", "a step with an input not put");
	ok(dpc_put(s, "y", y, "i32", 1, yd, DPC_HOST) == DPC_OK, "dpc_put y");
	double first = NAN, last = NAN;
	for (int i = 0; i < 5; i++) {
		int r = dpc_step(s, &loss);
		if (r != DPC_OK)
			printf("    step %d: %s\n", i + 1, dpc_error(s));
		ok(r == DPC_OK && isfinite(loss), "dpc_step");
		if (i == 0)
			first = loss;
		last = loss;
		if (i == 1) {
			/* between steps: the refusals of the parameters' calls and a failed save change nothing */
			float w[4 * D * 64];
			refused(s, dpc_get(s, "W9", DPC_VALUE, w, sizeof w), DPC_ERR_USAGE,
			        "no parameter or buffer named 'W9' (it has: W1, b1, W2, b2)", "dpc_get of a name not in the model");
			refused(s, dpc_get(s, "W1", DPC_VALUE, w, 12), DPC_ERR_USAGE, "'W1' is f32 [20, 64], 5120 bytes",
			        "dpc_get with a wrong size");
			refused(s, dpc_set(s, "W1", DPC_GRAD, w, 5120), DPC_ERR_USAGE, "a gradient is read, not written",
			        "dpc_set of a gradient");
			refused(s, dpc_get(s, "W1", 9, w, 5120), DPC_ERR_USAGE, "not 9", "dpc_get of an unknown kind");
			refused(s, dpc_save(s, "/nonexistent-dir/p.safetensors"), DPC_ERR_RUN, "/nonexistent-dir/p.safetensors",
			        "a save that cannot be written");
			/* read and written back: the same bits */
			ok(dpc_get(s, "W1", DPC_VALUE, w, 5120) == DPC_OK && dpc_set(s, "W1", DPC_VALUE, w, 5120) == DPC_OK,
			   "dpc_get and dpc_set of a value");
			float m[D * 64], v[D * 64], g[D * 64];
			ok(dpc_get(s, "W1", DPC_ADAM_M, m, sizeof m) == DPC_OK && dpc_get(s, "W1", DPC_ADAM_V, v, sizeof v) == DPC_OK,
			   "dpc_get of Adam's moments");
			int pos = 1;
			for (int e = 0; e < D * 64; e++)
				pos &= v[e] >= 0;
			ok(pos, "the second moments are not negative");
			ok(dpc_set(s, "W1", DPC_ADAM_M, m, sizeof m) == DPC_OK, "dpc_set of a moment");
			ok(dpc_get(s, "W1", DPC_GRAD, g, sizeof g) == DPC_OK, "dpc_get of a gradient");
		}
	}
	ok(last < first, "the loss falls over 5 steps on one batch");
	const char *name = NULL;
	double acc = -1;
	ok(dpc_report(s, 0, &name, &acc) == DPC_OK && !strcmp(name, "accuracy") && acc >= 0 && acc <= 1,
	   "dpc_report: accuracy in 0..1");
	ok(dpc_report(s, 1, &name, &acc) == DPC_ERR_USAGE, "dpc_report past the last");
	ok(dpc_steps_done(s) == 5, "dpc_steps_done");
	ok(dpc_save(s, at(dir, "api.safetensors")) == DPC_OK, "dpc_save");
	double ev = NAN;
	ok(dpc_eval(s, &ev) == DPC_OK && isfinite(ev), "dpc_eval");
	FILE *f = fopen(at(dir, "eval.txt"), "w");
	fprintf(f, "%.6g\n", ev);
	fclose(f);
	ok(dpc_close(s) == DPC_OK, "dpc_close");
	refused(s, dpc_step(s, &loss), DPC_ERR_STATE, "the session is closed", "a step on a closed session");
	refused(s, dpc_put(s, "x", x, "f32", 2, xd, DPC_HOST), DPC_ERR_STATE, "closed", "a put on a closed session");
	refused(s, dpc_close(s), DPC_ERR_STATE, "closed", "a session closed twice");

	/* again in the same process, from the options' data: the same bits */
	char input_x[4200], input_y[4200];
	snprintf(input_x, sizeof input_x, "x=%s", at(dir, "x.npy"));
	snprintf(input_y, sizeof input_y, "y=%s", at(dir, "y.npy"));
	const char *files[] = {"--seed", "3", "--quiet", "--optimizer", "adam", "--input", input_x, "--input", input_y};
	ok(dpc_open(&s, 9, files) == DPC_OK, "a second session once the first is closed");
	for (int i = 0; i < 5; i++)
		dpc_step(s, NULL);
	ok(dpc_save(s, at(dir, "files.safetensors")) == DPC_OK && dpc_close(s) == DPC_OK, "5 steps on the options' data");

	/* a state saved after 3 steps, resumed in another session for 2 more */
	ok(dpc_open(&s, 5, opts) == DPC_OK, "a third session");
	dpc_put(s, "x", x, "f32", 2, xd, DPC_HOST);
	dpc_put(s, "y", y, "i32", 1, yd, DPC_HOST);
	for (int i = 0; i < 3; i++)
		dpc_step(s, NULL);
	ok(dpc_save_state(s, at(dir, "state.safetensors")) == DPC_OK, "dpc_save_state");
	dpc_close(s);
	ok(dpc_open(&s, 5, opts) == DPC_OK, "a fourth session");
	refused(s, dpc_resume(s, at(dir, "x.bin")), DPC_ERR_RUN, "x.bin", "dpc_resume of a file that is not a state");
	ok(dpc_resume(s, at(dir, "state.safetensors")) == DPC_OK && dpc_steps_done(s) == 3, "dpc_resume at step 3");
	dpc_put(s, "x", x, "f32", 2, xd, DPC_HOST);
	dpc_put(s, "y", y, "i32", 1, yd, DPC_HOST);
	for (int i = 0; i < 2; i++)
		dpc_step(s, NULL);
	ok(dpc_save(s, at(dir, "resumed.safetensors")) == DPC_OK && dpc_steps_done(s) == 5, "2 steps after the resume");
	ok(dpc_run(s) == DPC_ERR_STATE, "dpc_run after steps is refused");
	dpc_close(s);
	free(wrong), free(nan), free(x), free(y);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail != 0;
}
