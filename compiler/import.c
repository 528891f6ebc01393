/* import: an ONNX model becomes a .dp program and its weights file, by the
 * converter compiler/frontend/onnx/onnx2dp.py (Python, on the onnx
 * package), which the rest of the pipeline then compiles like any program.
 *
 * Where the files go: an executable `-o OUT` starts from OUT.safetensors
 * and is compiled from OUT.dp, both kept beside it (the executable reads
 * the weights at its start; the program is there to read and to edit);
 * --emit=dp writes the program (stdout, or -o FILE.dp with FILE.safetensors
 * beside it); every other stage converts into a temporary folder that goes
 * when dpc ends. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

bool driver_is_onnx(const char *path)
{
	size_t n = strlen(path);
	return n > 5 && !strcmp(path + n - 5, ".onnx");
}

#ifndef DPC_SOURCE
#define DPC_SOURCE "."
#endif

/* the converter: beside the compiler (bin/dpc -> compiler/frontend/onnx/onnx2dp.py), else in the
 * source tree dpc was built from (a build under build/san/ has no compiler/ beside it) */
static const char *converter(void)
{
	const char *env = getenv("DPC_ONNX2DP");
	if (env && *env)
		return env;
	const char *rel = "compiler/frontend/onnx/onnx2dp.py", *py = NULL;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = 0;
		*strrchr(exe, '/') = 0;
		py = ar_printf("%s/../%s", exe, rel);
	}
	if (!py || access(py, R_OK) != 0)
		py = ar_printf("%s/%s", DPC_SOURCE, rel);
	if (access(py, R_OK) != 0)
		fatal("the ONNX converter is not at %s (set DPC_ONNX2DP to onnx2dp.py)", py);
	return py;
}

static char temp_dir[4096];
/* the files in it: copies outside the arena, which main frees before the exit handler runs */
static char *temp_files[4];

static const char *temp_file(int i, const char *path)
{
	if (!(temp_files[i] = strdup(path)))
		fatal("out of memory");
	return temp_files[i];
}

static void remove_temp_dir(void)
{
	if (!temp_dir[0])
		return;
	for (size_t i = 0; i < sizeof temp_files / sizeof *temp_files; i++)
		if (temp_files[i])
			unlink(temp_files[i]);
	rmdir(temp_dir);
	temp_dir[0] = 0;
}

static const char *make_temp_dir(void)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir || strlen(dir) > sizeof temp_dir - 32)
		dir = "/tmp";
	snprintf(temp_dir, sizeof temp_dir, "%s/dpc-onnx-XXXXXX", dir);
	if (!mkdtemp(temp_dir)) {
		temp_dir[0] = 0;
		fatal("cannot create a temporary folder in %s: %s", dir, strerror(errno));
	}
	atexit(remove_temp_dir);
	return temp_dir;
}

/* Nothing of the user's is written over: OUT.dp must be the converter's own
 * or absent, and OUT.safetensors may exist only beside such an OUT.dp (an
 * import before this one wrote both; a file saved by --save would have the
 * same name). */
static void check_ours(const char *dp, const char *weights)
{
	FILE *f = fopen(dp, "r");
	if (!f) {
		if (access(weights, F_OK) == 0)
			fatal("%s exists, and no %s that dpc's ONNX converter wrote beside it; dpc keeps the model's weights "
			      "there (choose another -o, or move the file)", weights, dp);
		return;
	}
	char line[64] = "";
	bool ours = fgets(line, sizeof line, f) && !strncmp(line, "# dpc program converted from ", 29);
	fclose(f);
	if (!ours)
		fatal("%s exists and was not written by dpc's ONNX converter; dpc keeps the converted program there "
		      "(choose another -o, or move the file)", dp);
}

/* the path without its file name's extension: build/resnet.dp -> build/resnet */
static const char *stem(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	return ar_strndup(path, dot && dot != base ? (size_t)(dot - path) : strlen(path));
}

/* a library's path without its extension and its name's lib: build/libresnet.so -> build/resnet */
static const char *lib_stem(const char *path)
{
	const char *st = stem(path), *base = strrchr(st, '/');
	base = base ? base + 1 : st;
	if (strncmp(base, "lib", 3) || !base[3])
		return st;
	return ar_printf("%.*s%s", (int)(base - st), st, base + 3);
}

/* the model's base name without .onnx: the executable's default name */
static const char *model_name(const char *input)
{
	const char *base = strrchr(input, '/');
	base = base ? base + 1 : input;
	return ar_strndup(base, strlen(base) - 5);
}

#ifndef DPC_PYTHON_EXE
#define DPC_PYTHON_EXE ""
#endif

/* the Python python3 was when dpc was built (Makefile), where it is still there: `make deps` installed the
 * converter's requirements into it, and a shim in front of it (pyenv's) costs a tenth of a second a run;
 * else python3 */
static const char *default_python(void)
{
	const char *exe = DPC_PYTHON_EXE;
	return *exe && access(exe, X_OK) == 0 ? exe : "python3";
}

/* the converter on o->input: the program to dp (NULL: stdout) and its weights to `weights` (none written with
 * no_weights: a compile that only plans never reads them); with `flat`, also the program without loops there
 * (its weights beside it) where loops were recovered, from the same reading of the model */
static void run_converter(const DriverOptions *o, const char *dp, const char *weights, const char *flat, bool no_weights)
{
	const char *python = getenv("DPC_PYTHON");
	Vec(char *) argv = {0};
	vec_push(&argv, (char *)(python && *python ? python : default_python()));
	vec_push(&argv, (char *)converter());
	vec_push(&argv, (char *)o->input);
	if (dp) {
		vec_push(&argv, "-o");
		vec_push(&argv, (char *)dp);
	}
	vec_push(&argv, "--weights");
	vec_push(&argv, (char *)weights);
	const char *flags[] = {"--loss", o->import.loss, "--output", o->import.loss_on, "--batchnorm", o->import.batchnorm,
	                       "--ignore-index", o->import.ignore_index, "--params-from", o->import.params_from};
	for (size_t i = 0; i < sizeof flags / sizeof *flags; i += 2)
		if (flags[i + 1]) {
			vec_push(&argv, (char *)flags[i]);
			vec_push(&argv, (char *)flags[i + 1]);
		}
	for (int i = 0; i < o->import.shapes.len; i++) {
		vec_push(&argv, "--shape");
		vec_push(&argv, (char *)o->import.shapes.data[i]);
	}
	if (o->import.no_loops)
		vec_push(&argv, "--no-loops");
	if (flat) {
		vec_push(&argv, "--flat");
		vec_push(&argv, (char *)flat);
	}
	if (no_weights)
		vec_push(&argv, "--no-weights");
	if (o->verbose)
		vec_push(&argv, "--verbose");
	for (int i = 0; i < o->import.freeze.len; i++) {
		vec_push(&argv, "--freeze");
		vec_push(&argv, (char *)o->import.freeze.data[i]);
	}
	for (int i = 0; i < o->import.train.len; i++) {
		vec_push(&argv, "--train-buffer");
		vec_push(&argv, (char *)o->import.train.data[i]);
	}
	for (int i = 0; i < o->import.padding.len; i++) {
		vec_push(&argv, "--padding-idx");
		vec_push(&argv, (char *)o->import.padding.data[i]);
	}
	vec_push(&argv, NULL);
	fflush(stdout);
	driver_phase(o, NULL);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv.data[0], NULL, NULL, argv.data, environ), status = 0;
	if (rc != 0)
		fatal("cannot run %s for the ONNX converter: %s (install Python 3, or set DPC_PYTHON)", argv.data[0], strerror(rc));
	if (waitpid(pid, &status, 0) < 0)
		fatal("waiting for the ONNX converter: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		driver_phase(o, "import: the ONNX converter");
		return;
	}
	/* the converter said why on stderr: 1 a model dpc cannot train, 2 a file it cannot read, 3 a package missing */
	exit(WIFEXITED(status) && WEXITSTATUS(status) <= 3 ? WEXITSTATUS(status) : 1);
}

/* The flat conversion is planned beside where a budget is fitted with checkpoints (not min-memory, not with
 * every parameter streamed, which needs loops) and the converter recovered a loop (it writes the flat program
 * only then): an imported ResNet-152's stages as loops recompute 1.5 forwards at Feng & Huang's cut + 1, its
 * flat program, a chain that the chain planner nests, 0.45 (bench/RESULTS.md) */
static bool wants_flat(const DriverOptions *o)
{
	return o->device_mem && o->ckpt.mode == CKPT_AUTO && !o->ckpt.least && !o->ckpt.stream_all && !o->import.no_loops &&
	       !getenv("DPC_NO_FLAT");
}

static void placeholder(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		fatal("cannot create %s: %s", path, strerror(errno));
	close(fd);
}

const char *driver_import(DriverOptions *o)
{
	if (o->emit == EMIT_DP) {
		bool file = o->output && strcmp(o->output, "-");
		const char *weights = ar_printf("%s.safetensors", stem(file ? o->output : o->input));
		if (file)
			check_ours(o->output, weights);
		run_converter(o, file ? o->output : NULL, weights, NULL, false);
		return NULL;
	}
	const char *dp, *flat = NULL;
	if (o->emit == EMIT_EXE || o->emit == EMIT_LIB) {
		if (!o->output)
			o->output = o->emit == EMIT_LIB ? ar_printf("lib%s.so", model_name(o->input)) : model_name(o->input);
		/* beside the executable, its name; beside a library libNAME.so, NAME */
		const char *at = o->emit == EMIT_LIB ? lib_stem(o->output) : o->output;
		dp = ar_printf("%s.dp", at);
		const char *weights = ar_printf("%s.safetensors", at);
		check_ours(dp, weights);
		if (wants_flat(o)) {
			flat = ar_printf("%s.flat.dp", at);
			o->import.flat_weights = ar_printf("%s.flat.safetensors", at);
			o->import.final_dp = dp, o->import.final_weights = weights;
			check_ours(flat, o->import.flat_weights);
			/* an earlier import's: the converter writes them again only where it finds loops */
			unlink(flat), unlink(o->import.flat_weights);
		}
		run_converter(o, dp, weights, flat, false);
	} else {
		/* a stage before the executable: the weights are never read */
		const char *dir = make_temp_dir(), *name = model_name(o->input);
		dp = temp_file(0, ar_printf("%s/%s.dp", dir, name));
		if (wants_flat(o)) {
			flat = temp_file(2, ar_printf("%s/%s.flat.dp", dir, name));
			o->import.flat_weights = temp_file(3, ar_printf("%s/%s.flat.safetensors", dir, name));
		}
		const char *weights = temp_file(1, ar_printf("%s/%s.safetensors", dir, name));
		run_converter(o, dp, weights, flat, true);
		/* the program names its weights file, which the front end finds (an executable's path to it) but
		 * these stages never open: an empty one in its place, gone with the folder (writing ResNet-152's
		 * 240 MB took half a second of each conversion) */
		placeholder(weights);
	}
	if (flat && access(flat, F_OK) == 0) {
		o->import.flat = flat;
		if (o->emit != EMIT_EXE && o->emit != EMIT_LIB)
			placeholder(o->import.flat_weights);
	}
	return dp;
}

/* the flat program's text with its weights line naming `weights` (a name beside it), written atomically to dp */
static void rewrite_weights(const char *from, const char *dp, const char *weights)
{
	FILE *in = fopen(from, "r");
	const char *tmp = ar_printf("%s.tmp", dp);
	FILE *out = in ? fopen(tmp, "w") : NULL;
	if (!out)
		fatal("cannot rewrite %s as %s: %s", from, dp, strerror(errno));
	const char *base = strrchr(weights, '/');
	base = base ? base + 1 : weights;
	char line[65536];
	bool done = false;
	while (fgets(line, sizeof line, in)) {
		if (!done && !strncmp(line, "weights \"", 9)) {
			fprintf(out, "weights \"%s\"\n", base);
			done = true;
		} else {
			fputs(line, out);
		}
	}
	fclose(in);
	if (fclose(out) || rename(tmp, dp))
		fatal("cannot write %s: %s", dp, strerror(errno));
	unlink(from);
}

const char *driver_take_flat(DriverOptions *o)
{
	if (!o->import.final_dp)
		return o->import.flat;
	if (rename(o->import.flat_weights, o->import.final_weights))
		fatal("cannot move %s to %s: %s", o->import.flat_weights, o->import.final_weights, strerror(errno));
	rewrite_weights(o->import.flat, o->import.final_dp, o->import.final_weights);
	return o->import.final_dp;
}

void driver_drop_flat(DriverOptions *o)
{
	if (o->import.final_dp) {
		unlink(o->import.flat);
		unlink(o->import.flat_weights);
	}
}

void driver_import_child(void) { temp_dir[0] = 0; }
