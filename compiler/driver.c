/* driver: lists the pipeline in one place, in order. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


extern char **environ;

static const DriverOptions *verbose_opts;
static void cg_phase(const char *what) { driver_phase(verbose_opts, what); }

#ifndef DPC_CUDA_HOME
#define DPC_CUDA_HOME "/usr/local/cuda"
#endif

static FILE *open_out(const char *path)
{
	if (!path || strcmp(path, "-") == 0)
		return stdout;
	FILE *f = fopen(path, "w");
	if (!f)
		fatal("cannot write %s: %s", path, strerror(errno));
	return f;
}

static void close_out(FILE *f)
{
	if (f != stdout && fclose(f) != 0)
		fatal("write failed: %s", strerror(errno));
}

/* The runtime libraries beside the compiler: bin/dpc -> runtime/NAME. */
static const char *runtime_lib(const char *name)
{
	const char *env = getenv("DPC_RUNTIME");
	if (env)
		return ar_printf("%s/%s", env, name);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		fatal("cannot locate the dpc executable; set DPC_RUNTIME to runtime/libdprt.a");
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	*slash = 0;
	const char *lib = ar_printf("%s/../runtime/%s", exe, name);
	if (access(lib, R_OK) != 0)
		fatal("runtime library not found at %s (build it with make, or set DPC_RUNTIME to its folder)", lib);
	return lib;
}

/* The temporary object files (the host module's, then the kernels' units'), removed if dpc is
 * interrupted while they exist. */
static char temps[1 + CG_UNITS_MOST + 1][4096];
static int ntemps;

static void remove_temps(void)
{
	for (int i = 0; i < ntemps; i++)
		if (temps[i][0])
			unlink(temps[i]);
	ntemps = 0;
}

static void remove_temp(int sig)
{
	remove_temps();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* a new temporary object file's path */
static const char *make_temp_obj(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	if (ntemps == sizeof temps / sizeof *temps)
		die("more temporary objects than units");
	char *t = temps[ntemps];
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir || strlen(dir) > sizeof *temps - 32)
		dir = "/tmp";
	snprintf(t, sizeof *temps, "%s/dpc-XXXXXX.o", dir);
	if (ntemps == 0) {
		for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
			signal(sigs[i], remove_temp);
		atexit(remove_temps);
	}
	int fd = mkstemps(t, 2);
	if (fd < 0) {
		t[0] = 0;
		fatal("cannot create a temporary object file: %s", strerror(errno));
	}
	close(fd);
	ntemps++;
	return t;
}

/* the kernels' units' objects (cg_emit_object) written to temporary files: their paths */
static const char **unit_objects(const CgObjects *more)
{
	const char **paths = ar_alloc(sizeof *paths * (size_t)(more->n + 1));
	for (int i = 0; i < more->n; i++) {
		paths[i] = make_temp_obj();
		FILE *f = fopen(paths[i], "wb");
		bool ok = f && fwrite(more->data[i], 1, more->len[i], f) == more->len[i];
		if (f && fclose(f) != 0)
			ok = false;
		if (!ok)
			fatal("cannot write the temporary object file %s: %s", paths[i], strerror(errno));
	}
	paths[more->n] = NULL;
	return paths;
}

/* Runs the linker; the temporary objects go in every case. */
static void run_cc(char **argv)
{
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	int status = 0;
	bool ok = rc == 0 && waitpid(pid, &status, 0) >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	remove_temps();
	if (rc != 0)
		fatal("cannot run %s: %s", argv[0], strerror(rc));
	if (!ok)
		fatal("linking failed (%s exited with status %d)", argv[0], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* the executable, or with lib the shared library whose only exported symbols are dpc.h's (the runtime's
 * dpc.map), its API's object pulled from the archive */
static void link_exe(const char *obj, const char **units, const char *exe, CgTarget target, bool lib)
{
	/* $CC may carry flags, as in make: CC='cc -fsanitize=address' */
	const char *cc = getenv("CC");
	char *argv[80];
	int n = 0;
	for (char *w = strtok(ar_strdup(cc && *cc ? cc : "cc"), " \t"); w && n < 40; w = strtok(NULL, " \t"))
		argv[n++] = w;
	if (n == 0)
		argv[n++] = "cc";
	argv[n++] = "-o";
	argv[n++] = (char *)exe;
	argv[n++] = (char *)obj;
	for (int i = 0; units[i]; i++)
		argv[n++] = (char *)units[i];
	if (lib) {
		argv[n++] = "-shared";
		argv[n++] = "-Wl,--undefined=dpc_version";
		argv[n++] = (char *)ar_printf("-Wl,--version-script=%s", runtime_lib("dpc.map"));
	}
	if (target == CG_CUDA) {
		/* the CUDA device, cuBLAS and cuBLASLt (GEMMs with epilogues); the runtime opens the driver's libcuda
		 * itself */
		argv[n++] = "-Wl,--undefined=rt_cuda_device";
		argv[n++] = (char *)runtime_lib("libdprt_cuda.a");
		argv[n++] = (char *)runtime_lib("libdprt.a");
		argv[n++] = "-L" DPC_CUDA_HOME "/lib64";
		argv[n++] = "-Wl,-rpath," DPC_CUDA_HOME "/lib64";
		argv[n++] = "-lcublas";
		argv[n++] = "-lcublasLt";
		argv[n++] = "-ldl";
	} else {
		argv[n++] = (char *)runtime_lib("libdprt.a");
	}
	argv[n++] = "-lopenblas";
	argv[n++] = "-lpthread";
	argv[n++] = "-lm";
	argv[n] = NULL;
	run_cc(argv);
}

/* The input's base name without .dp: the model's name and its executable's. */
static const char *base_name(const char *input)
{
	const char *base = strrchr(input, '/');
	base = base ? base + 1 : input;
	size_t n = strlen(base);
	if (n > 3 && strcmp(base + n - 3, ".dp") == 0)
		n -= 3;
	return ar_strndup(base, n);
}


/* --schedule-json: the schedule, and the kernels' members written into `kernels` (a memory stream) */
typedef struct {
	const DriverOptions *o;
	Program *p;
	FILE *kernels;
	char *text;
	size_t len;
} Schedule;

static void write_schedule(Schedule *s)
{
	if (!s->o->schedule_json)
		return;
	if (s->kernels)
		fclose(s->kernels);
	FILE *f = open_out(s->o->schedule_json);
	ckpt_print_schedule(f, s->p, true, s->text);
	close_out(f);
	free(s->text);
}

static int finish(DriverOptions *o, Program *p, Emit stop);

/* The flat conversion (o->import.flat) planned in a child process beside the loops' own plan in this one: a
 * plan that does not fit ends the child with the budget's error, which goes to /dev/null. flat_start forks
 * it (NULL: none); flat_cost waits for its cost, recomputed FLOPs and offloads (INT64_MAX: no fit), and
 * flat_verdict tells it whether its program is taken: then the child makes the outputs from the plan it has
 * (planning it again here took as long as the first plan, 1.9 s for ResNet-152) and this process ends with
 * its status; else it ends. */
typedef struct {
	pid_t pid;
	int fd, go; /* its cost comes through fd; the verdict goes through go */
} Flat;

static Flat *flat_start(const DriverOptions *o)
{
	int fd[2], go[2];
	if (pipe(fd))
		return NULL;
	if (pipe(go)) {
		close(fd[0]), close(fd[1]);
		return NULL;
	}
	pid_t pid = util_fork();
	if (pid < 0) {
		close(fd[0]), close(fd[1]), close(go[0]), close(go[1]);
		return NULL;
	}
	if (pid == 0) {
		driver_import_child();
		int out = dup(1), err = dup(2), null = open("/dev/null", O_WRONLY);
		dup2(null, 1), dup2(null, 2);
		close(fd[0]), close(go[1]);
		DriverOptions c = *o;
		c.input = o->import.flat;
		c.verbose = false;
		Emit st;
		Program *q = driver_passes(fe_parse(c.input, c.defs.data, c.defs.len), &c, &st);
		int64_t cost = ckpt_cost(q);
		char verdict = 0;
		if (write(fd[1], &cost, sizeof cost) != sizeof cost || read(go[0], &verdict, 1) != 1 || verdict != 'y')
			_exit(0);
		/* taken: the outputs from this plan, said where the user sees them */
		dup2(out, 1), dup2(err, 2);
		c.verbose = o->verbose;
		c.input = driver_take_flat(&c);
		/* its weights moved beside the executable's name (the front end had the flat file's path) */
		char *w = c.import.final_weights ? realpath(c.import.final_weights, NULL) : NULL;
		if (w)
			q->weights = ar_strdup(w);
		free(w);
		exit(finish(&c, q, st));
	}
	close(fd[1]), close(go[0]);
	Flat *f = ar_alloc(sizeof *f);
	f->pid = pid, f->fd = fd[0], f->go = go[1];
	return f;
}

static int64_t flat_cost(Flat *f)
{
	int64_t cost = INT64_MAX;
	if (read(f->fd, &cost, sizeof cost) != sizeof cost)
		cost = INT64_MAX;
	close(f->fd);
	return cost;
}

/* the child told whether its program is taken; taken, its exit status (-1: it was gone before it was told) */
static int flat_verdict(Flat *f, bool taken)
{
	char v = taken ? 'y' : 'n';
	/* a child whose plan failed is gone: its pipe's end closed, which is no signal to end this process */
	void (*was)(int) = signal(SIGPIPE, SIG_IGN);
	bool told = write(f->go, &v, 1) == 1;
	signal(SIGPIPE, was);
	close(f->go);
	int status;
	while (waitpid(f->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!taken)
		return 0;
	if (!told)
		return -1;
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "dpc: the compile of the model's flat program ended by signal %d (%s)\n", WTERMSIG(status),
		        strsignal(WTERMSIG(status)));
		return 1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int driver_run(DriverOptions *o)
{
	driver_phase(o, NULL);
	FeAst *ast = fe_parse(o->input, o->defs.data, o->defs.len);
	driver_phase(o, "parse");
	if (o->emit == EMIT_AST) {
		FILE *f = open_out(o->output);
		fe_print_ast(f, ast);
		close_out(f);
		return 0;
	}

	Emit stop;
	Flat *flat = o->import.flat ? flat_start(o) : NULL;
	Program *p = driver_passes(ast, o, &stop);
	if (o->import.flat) {
		int64_t have = ckpt_cost(p), cost = flat ? flat_cost(flat) : INT64_MAX;
		bool taken = have > 0 && cost < have;
		if (taken && o->verbose)
			fprintf(stderr, "dpc: the model's flat program (--no-loops) recomputes less within --device-mem than its "
			                "loops: taken\n");
		int rc = flat ? flat_verdict(flat, taken) : 0;
		if (taken && rc >= 0)
			return rc;
		if (taken) {
			/* the child was gone before it was told: the flat program planned again here */
			o->input = driver_take_flat(o);
			p = driver_passes(fe_parse(o->input, o->defs.data, o->defs.len), o, &stop);
		} else {
			driver_drop_flat(o);
		}
	}
	return finish(o, p, stop);
}

/* DPC_ROW_VECTORS=off: the GPU's row kernels an element at a time (CgOptions.scalar_rows; testing) */
static bool scalar_rows(void)
{
	const char *e = getenv("DPC_ROW_VECTORS");
	if (e && *e && strcmp(e, "on") && strcmp(e, "off"))
		fatal("DPC_ROW_VECTORS takes on or off (the GPU's row kernels and embed_grad's ids in 16-byte vectors "
		      "where aligned, the default, or an element at a time; for testing), got '%s'", e);
	return e && !strcmp(e, "off");
}

/* what the ranks of a job compare at start (the model description's build lines): the program (its
 * file's name and a hash of its text), its constants after -D, and the options given that shape it */
static const char *build_lines(const DriverOptions *o, const Program *p)
{
	uint64_t h = 1469598103934665603ull;
	FILE *f = fopen(o->input, "rb");
	for (int c; f && (c = getc(f)) != EOF;)
		h = (h ^ (unsigned char)c) * 1099511628211ull;
	if (f)
		fclose(f);
	const char *s = ar_printf("build program %s %016llx\n", base_name(o->input), (unsigned long long)h);
	for (const char *c = p->consts ? p->consts : "", *nl; (nl = strchr(c, '\n')); c = nl + 1)
		s = ar_printf("%sbuild const %.*s\n", s, (int)(nl - c), c);
	for (int i = 0; i < o->given.len; i++)
		s = ar_printf("%sbuild option %s\n", s, o->given.data[i]);
	return s;
}

/* the outputs of the plan p: the stage `stop` printed, or the code, object and executable */
static int finish(DriverOptions *o, Program *p, Emit stop)
{
	if (o->emit == stop) {
		FILE *f = open_out(o->output);
		ir_print(f, p);
		if (stop == EMIT_STREAM)
			mem_print(f, p);
		close_out(f);
		return 0;
	}
	const char *name = base_name(o->input);
	verbose_opts = o;
	CgOptions cg = {o->target, name, !o->no_fuse, o->verbose ? cg_phase : NULL, o->reference, o->verbose,
	                o->generic_cpu, o->gpu, false, getenv("DPC_CPU_SPLITS") && *getenv("DPC_CPU_SPLITS"), NULL,
	                getenv("DPC_SIMT") && *getenv("DPC_SIMT"), o->host_bw, build_lines(o, p), scalar_rows(),
	                o->threads ? o->threads : util_cpus()};
	/* --schedule-json, with the CUDA target's launches and their predicted times as members of the
	 * object: from the code generation that makes the output, or one of their own for the stages
	 * that end before it */
	bool codegen = o->emit == EMIT_LLVM || o->emit == EMIT_PTX || o->emit == EMIT_OBJ || o->emit == EMIT_EXE ||
	               o->emit == EMIT_LIB;
	Schedule sj = {o, p, NULL, NULL, 0};
	if (o->schedule_json && o->target == CG_CUDA) {
		if (!(sj.kernels = open_memstream(&sj.text, &sj.len)))
			fatal("out of memory");
		if (codegen)
			cg.kernels_json = sj.kernels;
		else
			cg_emit_kernels(p, &cg, sj.kernels, true);
	}
	if (!codegen)
		write_schedule(&sj);
	if (o->emit == EMIT_KERNELS) {
		FILE *f = open_out(o->output);
		cg_emit_kernels(p, &cg, f, false);
		close_out(f);
		return 0;
	}
	if (o->emit == EMIT_MEMPLOT) {
		FILE *f = open_out(o->output);
		mem_memplot(f, p, base_name(o->input));
		close_out(f);
		return 0;
	}
	if (o->emit == EMIT_SCHEDULE) {
		FILE *f = open_out(o->output);
		ckpt_print_schedule(f, p, false, NULL);
		/* on the GPU: the step's time as the cost model predicts it, and what bounds it */
		if (o->target == CG_CUDA)
			cg_emit_step(p, &cg, f);
		close_out(f);
		return 0;
	}

	if (o->emit == EMIT_LLVM || o->emit == EMIT_PTX) {
		FILE *f = open_out(o->output);
		(o->emit == EMIT_LLVM ? cg_emit_llvm : cg_emit_ptx)(p, &cg, f);
		close_out(f);
		write_schedule(&sj);
		return 0;
	}
	if (o->emit == EMIT_OBJ) {
		cg_emit_object(p, &cg, o->output ? o->output : ar_printf("%s.o", name), NULL);
		write_schedule(&sj);
		return 0;
	}
	bool lib = o->emit == EMIT_LIB;
	const char *exe = o->output ? o->output : lib ? ar_printf("lib%s.so", name) : name;
	const char *obj = make_temp_obj();
	CgObjects more = {0};
	cg_emit_object(p, &cg, obj, &more);
	write_schedule(&sj);
	link_exe(obj, unit_objects(&more), exe, o->target, lib);
	driver_phase(o, "link");
	return 0;
}
