/* rt: the CPU device. "Device memory" is one arena apart from host memory;
 * transfers are memcpy; kernels are the generated x86 functions; GEMM is
 * OpenBLAS. The same interface runs the GPU (runtime/gpu). */
#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"

static void *P(uint64_t a) { return (void *)(uintptr_t)a; }

static uint64_t cpu_alloc(int64_t bytes)
{
	/* aligned like cuMemAlloc's: the kernels make 16-byte vector accesses */
	void *p;
	if (posix_memalign(&p, 256, (size_t)bytes))
		return 0;
	memset(p, 0, (size_t)bytes);
	return (uint64_t)(uintptr_t)p;
}

static void cpu_h2d(uint64_t dst, const void *src, int64_t n) { memcpy(P(dst), src, (size_t)n); }
static void cpu_d2h(void *dst, uint64_t src, int64_t n) { memcpy(dst, P(src), (size_t)n); }

static void cpu_zero(uint64_t dst, int64_t n) { memset(P(dst), 0, (size_t)n); }

enum { MAX_THREADS = 256, MIN_SPLIT = 1 << 16 };
static int nthreads = 1;

int rt_cpu_threads(void) { return nthreads; }

/* A thread count from the environment: 1..MAX_THREADS (more is capped), or
 * 0 when unset; garbage is ignored with a warning. */
static int env_threads(const char *var)
{
	const char *s = getenv(var);
	if (!s || !*s)
		return 0;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	/* OpenMP allows a list ("4,2"): the first level is ours */
	if (end == s || (*end && *end != ',') || errno == ERANGE || v < 1) {
		fprintf(stderr, "%s: warning: ignoring %s=%s (not a positive integer)\n", rt_prog, var, s);
		return 0;
	}
	return v > MAX_THREADS ? MAX_THREADS : (int)v;
}

/* Kernel threads: OMP_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the
 * online cores. */
static void cpu_init(void)
{
	int n = env_threads("OMP_NUM_THREADS");
	if (!n)
		n = env_threads("OPENBLAS_NUM_THREADS");
	if (!n) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c < 1 ? 1 : c > MAX_THREADS ? MAX_THREADS : (int)c;
	}
	nthreads = n;
}

/* ---- the threads: started once, they wait for work between launches ----
 * A job is `parts` calls fn(arg, part); the calling thread takes part 0 and
 * worker t part t. Launches come thousands of times a step, so each side
 * spins a little (about 0.1 ms) before it sleeps on the condition. */

enum { SPIN = 4000 };

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static struct {
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	int workers;                 /* started */
	int64_t job;                 /* jobs posted; a worker runs each new one */
	int left;                    /* workers still running the current job */
	int parts;
	void (*fn)(void *arg, int part);
	void *arg;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	int64_t seen = 0;
	for (;;) {
		for (int i = 0; i < SPIN && __atomic_load_n(&pool.job, __ATOMIC_ACQUIRE) == seen; i++)
			relax();
		pthread_mutex_lock(&pool.mu);
		while (pool.job == seen)
			pthread_cond_wait(&pool.go, &pool.mu);
		seen = pool.job;
		int parts = pool.parts;
		void (*fn)(void *, int) = pool.fn;
		void *a = pool.arg;
		pthread_mutex_unlock(&pool.mu);
		if (t < parts)
			fn(a, t);
		pthread_mutex_lock(&pool.mu);
		if (__atomic_sub_fetch(&pool.left, 1, __ATOMIC_ACQ_REL) == 0)
			pthread_cond_signal(&pool.done);
		pthread_mutex_unlock(&pool.mu);
	}
	return NULL;
}

/* Once oneDNN is open, its OpenMP team runs the device's parallel work too
 * (rt_cpu_share_openmp): two teams of threads on the same cores would take
 * turns at them, each spinning while the other works. */
static struct {
	void (*parallel)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
	int (*thread)(void), (*threads)(void);
} omp;

void rt_cpu_share_openmp(void *lib)
{
	omp.parallel = (void (*)(void (*)(void *), void *, unsigned, unsigned))dlsym(lib, "GOMP_parallel");
	omp.thread = (int (*)(void))dlsym(lib, "omp_get_thread_num");
	omp.threads = (int (*)(void))dlsym(lib, "omp_get_num_threads");
	if (!omp.parallel || !omp.thread || !omp.threads)
		omp.parallel = NULL;
}

typedef struct {
	int parts;
	void (*fn)(void *arg, int part);
	void *arg;
} OmpJob;

/* the team may be smaller than asked: each thread takes every n-th part */
static void omp_part(void *data)
{
	OmpJob *j = data;
	for (int t = omp.thread(), n = omp.threads(); t < j->parts; t += n)
		j->fn(j->arg, t);
}

/* Runs fn(arg, 0..parts-1) on at most nthreads threads and returns when all
 * are done. Parts beyond the threads, or for a worker that cannot be
 * started, run on the caller. */
static void pool_run(int parts, void (*fn)(void *arg, int part), void *arg)
{
	int team = parts < nthreads ? parts : nthreads;
	if (omp.parallel && team > 1) {
		OmpJob j = {parts, fn, arg};
		omp.parallel(omp_part, &j, (unsigned)team, 0);
		return;
	}
	while (pool.workers < team - 1) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, (void *)(intptr_t)(pool.workers + 1)) != 0)
			break;
		pthread_detach(t);
		pool.workers++;
	}
	int with = team < pool.workers + 1 ? team : pool.workers + 1;
	if (with <= 1) {
		for (int i = 0; i < parts; i++)
			fn(arg, i);
		return;
	}
	pthread_mutex_lock(&pool.mu);
	pool.parts = with;
	pool.fn = fn;
	pool.arg = arg;
	__atomic_store_n(&pool.left, pool.workers, __ATOMIC_RELEASE);
	__atomic_store_n(&pool.job, pool.job + 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&pool.go);
	pthread_mutex_unlock(&pool.mu);
	fn(arg, 0);
	for (int i = with; i < parts; i++)
		fn(arg, i);
	for (int i = 0; i < SPIN && __atomic_load_n(&pool.left, __ATOMIC_ACQUIRE) > 0; i++)
		relax();
	pthread_mutex_lock(&pool.mu);
	while (pool.left > 0)
		pthread_cond_wait(&pool.done, &pool.mu);
	pthread_mutex_unlock(&pool.mu);
}

typedef struct {
	RtKernelFn fn;
	const uint64_t *args;
	int64_t n;
	int parts;
} Launch;

static void launch_part(void *arg, int part)
{
	Launch *l = arg;
	l->fn(l->args, l->n * part / l->parts, l->n * (part + 1) / l->parts);
}

/* Large index spaces are split between threads; every element is written by
 * exactly one of them, so results do not depend on the split. */
static void cpu_launch(int kernel, int64_t n, int64_t work, int nargs, const uint64_t *args)
{
	(void)nargs;
	if (kernel < 0 || kernel >= dp_cpu_nkernels)
		rt_fail(70, "internal error: kernel %d of %d", kernel, dp_cpu_nkernels);
	RtKernelFn fn = dp_cpu_kernels[kernel];
	int threads = nthreads;
	if (threads > work / (MIN_SPLIT / 4))
		threads = (int)(work / (MIN_SPLIT / 4)); /* at least 16K elements' work each */
	if (threads > n)
		threads = (int)n;
	if (work < MIN_SPLIT || threads <= 1) {
		fn(args, 0, n);
		return;
	}
	Launch l = {fn, args, n, threads};
	pool_run(threads, launch_part, &l);
}

typedef struct {
	void (*fn)(void *arg, int64_t i);
	void *arg;
	int64_t n;
	int parts;
} Items;

static void items_part(void *arg, int part)
{
	Items *it = arg;
	for (int64_t i = it->n * part / it->parts; i < it->n * (part + 1) / it->parts; i++)
		it->fn(it->arg, i);
}

void rt_cpu_parallel(int64_t n, void (*fn)(void *arg, int64_t i), void *arg)
{
	int parts = n < nthreads ? (int)n : nthreads;
	Items it = {fn, arg, n, parts};
	pool_run(parts, items_part, &it);
}

typedef struct {
	char *dst;
	const char *src;
	int64_t n;
	int parts;
} Move;

static void move_part(void *arg, int part)
{
	Move *m = arg;
	int64_t a = m->n * part / m->parts, b = m->n * (part + 1) / m->parts;
	memcpy(m->dst + a, m->src + a, (size_t)(b - a));
}

/* a large copy between disjoint buffers is split between the threads */
static void cpu_d2d(uint64_t dst, uint64_t src, int64_t n)
{
	bool apart = dst + (uint64_t)n <= src || src + (uint64_t)n <= dst;
	int parts = (int)(n / (1 << 20)) < nthreads ? (int)(n / (1 << 20)) : nthreads;
	if (!apart || parts < 2) {
		memmove(P(dst), P(src), (size_t)n);
		return;
	}
	Move m = {P(dst), P(src), n, parts};
	pool_run(parts, move_part, &m);
}

/* bf16 has no BLAS: each matrix widened to f32, one sgemm, the result
 * rounded back (the accumulation is f32, as on the GPU) */
static void widen(float *f, uint64_t x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		f[i] = rt_bf16_to_f32(((const uint16_t *)P(x))[i]);
}

static void bf16_gemm(enum CBLAS_TRANSPOSE TA, enum CBLAS_TRANSPOSE TB, int64_t m, int64_t n, int64_t k, uint64_t a,
                      int64_t lda, int64_t sa, uint64_t b, int64_t ldb, int64_t sb, uint64_t c, int64_t ldc, int64_t sc,
                      int64_t batch, double beta)
{
	int64_t na = (TA == CblasTrans ? k : m) * lda, nb = (TB == CblasTrans ? n : k) * ldb, nc = m * ldc;
	float *A = rt_host_alloc((int64_t)sizeof(float) * (na + nb + nc), "a bf16 GEMM"), *Bm = A + na, *C = Bm + nb;
	for (int64_t i = 0; i < batch; i++) {
		widen(A, a + (uint64_t)(2 * i * sa), na);
		widen(Bm, b + (uint64_t)(2 * i * sb), nb);
		if (beta != 0)
			widen(C, c + (uint64_t)(2 * i * sc), nc);
		cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, Bm, (int)ldb, (float)beta, C, (int)ldc);
		uint16_t *out = (uint16_t *)P(c + (uint64_t)(2 * i * sc));
		for (int64_t r = 0; r < m; r++)
			for (int64_t j = 0; j < n; j++)
				out[r * ldc + j] = rt_f32_to_bf16(C[r * ldc + j]);
	}
	free(A);
}

static void cpu_gemm(int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
                     int64_t sa, uint64_t b, int64_t ldb, int64_t sb, uint64_t c, int64_t ldc, int64_t sc,
                     int64_t batch, double beta)
{
	enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
	if (elem_bytes == 2) {
		bf16_gemm(TA, TB, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, beta);
		return;
	}
	for (int64_t i = 0; i < batch; i++) {
		if (elem_bytes == 8)
			cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, (double *)P(a) + i * sa, (int)lda,
			            (double *)P(b) + i * sb, (int)ldb, beta, (double *)P(c) + i * sc, (int)ldc);
		else
			cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, (float *)P(a) + i * sa, (int)lda,
			            (float *)P(b) + i * sb, (int)ldb, (float)beta, (float *)P(c) + i * sc, (int)ldc);
	}
}

static void *cpu_host_alloc(int64_t bytes) { return malloc((size_t)bytes); }

/* the CPU works synchronously: every fence has been passed when it is set */
static void cpu_fence(int slot) { (void)slot; }

static double *marks;
static int nmarks, capmarks;

static int cpu_mark(void)
{
	if (nmarks == capmarks) {
		capmarks = capmarks ? 2 * capmarks : 1024;
		marks = rt_host_grow(marks, (int64_t)sizeof *marks * capmarks, "--profile");
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	marks[nmarks] = 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
	return nmarks++;
}

static double cpu_mark_ms(int a, int b) { return marks[b] - marks[a]; }
static double cpu_mark_at(int a) { return marks[a]; }

static double clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* ---- the copy stream: a second thread that works through a queue ----
 * Compute runs on the calling thread as it is queued, so a copy queued now
 * comes after all compute queued before it; copy_wait blocks the caller,
 * which is what holds later compute back. */

enum { QUEUE = 256 };

typedef struct {
	void *dst;
	const void *src;
	size_t bytes;
} Copy;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t queued, finished;
	Copy q[QUEUE];
	int64_t issued, done; /* copies queued and completed: events are these counts */
	bool running;
	/* --trace: each timed copy's start and end (ms), by event - 1; -1 untimed */
	bool timing;
	double *span;
	int64_t nspan;
} cs = {.mu = PTHREAD_MUTEX_INITIALIZER, .queued = PTHREAD_COND_INITIALIZER, .finished = PTHREAD_COND_INITIALIZER};

/* Streamed layers are often small and come one per loop step: sleeping on
 * a condition variable for each costs two context switches, far more than
 * the copy. So both sides spin a little (SPIN) before they sleep. */

/* spins until *count reaches at least n, or gives up; true when reached */
static bool spin_until(const int64_t *count, int64_t n)
{
	for (int i = 0; i < SPIN; i++) {
		if (__atomic_load_n(count, __ATOMIC_ACQUIRE) >= n)
			return true;
		relax();
	}
	return false;
}

static void *copy_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cs.mu);
	for (;;) {
		if (cs.done == cs.issued) {
			pthread_mutex_unlock(&cs.mu);
			spin_until(&cs.issued, cs.done + 1);
			pthread_mutex_lock(&cs.mu);
		}
		while (cs.done == cs.issued)
			pthread_cond_wait(&cs.queued, &cs.mu);
		Copy c = cs.q[cs.done % QUEUE];
		pthread_mutex_unlock(&cs.mu);
		double t0 = clock_ms();
		memcpy(c.dst, c.src, c.bytes);
		double t1 = clock_ms();
		pthread_mutex_lock(&cs.mu);
		if (cs.done < cs.nspan && cs.span[2 * cs.done] == -2)
			cs.span[2 * cs.done] = t0, cs.span[2 * cs.done + 1] = t1;
		__atomic_store_n(&cs.done, cs.done + 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&cs.finished);
	}
	return NULL;
}

static int64_t cs_issued(void)
{
	pthread_mutex_lock(&cs.mu);
	int64_t n = cs.issued;
	pthread_mutex_unlock(&cs.mu);
	return n;
}

static int64_t cpu_copy(bool to_device, uint64_t dev, void *host, int64_t bytes)
{
	pthread_mutex_lock(&cs.mu);
	if (!cs.running) {
		pthread_t t;
		if (pthread_create(&t, NULL, copy_thread, NULL) != 0)
			rt_fail(1, "cannot start the copy thread");
		pthread_detach(t);
		cs.running = true;
	}
	while (cs.issued - cs.done == QUEUE)
		pthread_cond_wait(&cs.finished, &cs.mu);
	cs.q[cs.issued % QUEUE] = to_device ? (Copy){P(dev), host, (size_t)bytes} : (Copy){host, P(dev), (size_t)bytes};
	int64_t event = cs.issued + 1;
	if (cs.nspan < event) {
		int64_t n = cs.nspan ? 2 * cs.nspan : 1024;
		while (n < event)
			n *= 2;
		double *s = rt_host_grow(cs.span, (int64_t)sizeof *s * 2 * n, "--trace");
		for (int64_t i = 2 * cs.nspan; i < 2 * n; i++)
			s[i] = -1;
		cs.span = s;
		cs.nspan = n;
	}
	cs.span[2 * (event - 1)] = cs.timing ? -2 : -1; /* -2: the copy thread times it */
	__atomic_store_n(&cs.issued, event, __ATOMIC_RELEASE);
	pthread_cond_signal(&cs.queued);
	pthread_mutex_unlock(&cs.mu);
	return event;
}

static void cpu_copy_sync(int64_t event)
{
	if (event <= __atomic_load_n(&cs.issued, __ATOMIC_ACQUIRE) && spin_until(&cs.done, event))
		return;
	pthread_mutex_lock(&cs.mu);
	if (event > cs.issued)
		rt_fail(70, "internal error: copy event %lld was never queued", (long long)event);
	while (cs.done < event)
		pthread_cond_wait(&cs.finished, &cs.mu);
	pthread_mutex_unlock(&cs.mu);
}

static void cpu_copy_timing(bool on)
{
	pthread_mutex_lock(&cs.mu);
	cs.timing = on;
	pthread_mutex_unlock(&cs.mu);
}

static void cpu_copy_span(int64_t event, double *span)
{
	pthread_mutex_lock(&cs.mu);
	bool timed = event >= 1 && event <= cs.done && event <= cs.nspan && cs.span[2 * (event - 1)] >= 0;
	span[0] = timed ? cs.span[2 * (event - 1)] : -1;
	span[1] = timed ? cs.span[2 * (event - 1) + 1] : -1;
	pthread_mutex_unlock(&cs.mu);
}

/* the compute is done as it is queued; the copies may still run */
static void cpu_sync(void) { cpu_copy_sync(cs_issued()); }

/* the arena is host memory, and its work is done when queued: the collectives run on dist.c's
 * thread beside the work queued after them */
static void cpu_collective(int op, uint64_t dev, int64_t n, const char *dtype) { rt_dist_queue(op, P(dev), n, dtype); }

static void cpu_free(uint64_t p) { free(P(p)); }
static void cpu_host_free(void *p) { free(p); }

const RtDevice rt_cpu_device = {"cpu", cpu_init, cpu_alloc, cpu_h2d, cpu_host_alloc, cpu_h2d, cpu_d2h, cpu_d2h, cpu_d2d, cpu_zero,
                                cpu_launch, cpu_gemm, cpu_sync, cpu_fence, cpu_fence, cpu_mark, cpu_mark_ms, cpu_free, cpu_host_free,
                                cpu_copy, cpu_copy_sync, cpu_copy_sync, NULL, NULL, NULL, cpu_copy_timing, cpu_copy_span,
                                cpu_mark_at, rt_cpu_conv, rt_cpu_attention, cpu_collective, rt_dist_drain};
