/* rt: the CPU device. "Device memory" is one arena apart from host memory;
 * transfers are memcpy; kernels are the generated x86 functions; GEMMs are
 * oneDNN's or OpenBLAS's, on tiles. One team of threads runs them all, on
 * pieces of work fixed by the shapes (docs/threads.md). The same interface
 * runs the GPU (runtime/gpu). */
#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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

enum { MAX_THREADS = RT_MAX_THREADS, MIN_SPLIT = 1 << 16 };
/* A worker waits for the next job spinning for up to idle_ns before it
 * sleeps: a step's launches come microseconds apart, often with a kernel
 * between them that runs on the caller alone, and waking a sleeping thread
 * takes tens of microseconds (more in a virtual machine), longer than many
 * kernels. With more threads than the cores allowed, a spinning worker
 * would keep a core from a thread with work: then it spins briefly. */
static int64_t idle_ns = 2000000;

int rt_threads = 1;
char rt_threads_why[160] = "the default";
static int cores = 1; /* this process may run on (allowed_cores), when rt_threads was chosen */

/* OMP_NUM_THREADS: 1..MAX_THREADS (more is capped), or 0 when unset;
 * garbage is ignored with a warning. */
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

/* the cores this process may run on: its affinity mask, which mpirun's
 * binding, taskset and cgroup cpusets set; else the online cores */
static int allowed_cores(void)
{
	cpu_set_t set;
	long c = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
	return c < 1 ? 1 : c > MAX_THREADS ? MAX_THREADS : (int)c;
}

/* One count for every thread the CPU device runs: --threads (at most the
 * cores allowed), else OMP_NUM_THREADS (as given, as OpenMP takes it),
 * else the cores allowed. OpenBLAS and oneDNN then run single-threaded
 * inside the pieces the device's own threads hand out. */
void rt_choose_threads(long asked)
{
	int env = env_threads("OMP_NUM_THREADS");
	cores = allowed_cores();
	const char *of = cores == 1 ? "core" : "cores";
	if (asked > cores) {
		fprintf(stderr, "%s: warning: --threads %ld: this process may run on %d %s; using %d\n", rt_prog, asked, cores,
		        of, cores);
		rt_threads = cores;
		snprintf(rt_threads_why, sizeof rt_threads_why, "--threads %ld, cut to the %d %s this process may run on", asked,
		         cores, of);
	} else if (asked > 0) {
		rt_threads = (int)asked;
		snprintf(rt_threads_why, sizeof rt_threads_why, "--threads; this process may run on %d %s", cores, of);
	} else if (env) {
		rt_threads = env;
		snprintf(rt_threads_why, sizeof rt_threads_why, "OMP_NUM_THREADS; this process may run on %d %s", cores, of);
	} else {
		rt_threads = cores;
		snprintf(rt_threads_why, sizeof rt_threads_why, "the %d %s this process may run on", cores, of);
	}
}

/* OpenBLAS is called from the device's threads, on pieces of a size fixed
 * by the shapes: its own threads would split a piece by their count (and
 * change its bits), and take turns at the cores with the device's. */
static void cpu_init(void)
{
	if (rt_threads > cores)
		idle_ns = 50000;
	openblas_set_num_threads(1);
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

static int64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* spins while *word is seen, for up to ns */
static void spin_while(const int64_t *word, int64_t seen, int64_t ns)
{
	int64_t end = clock_ns() + ns;
	for (int i = 1; __atomic_load_n(word, __ATOMIC_ACQUIRE) == seen; i++) {
		relax();
		if (i % 64 == 0 && clock_ns() > end)
			return;
	}
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	int64_t seen = 0;
	for (;;) {
		spin_while(&pool.job, seen, idle_ns);
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

/* Runs fn(arg, 0..parts-1) on at most rt_threads threads and returns when all
 * are done. Parts beyond the threads, or for a worker that cannot be
 * started, run on the caller. */
static void pool_run(int parts, void (*fn)(void *arg, int part), void *arg)
{
	int team = parts < rt_threads ? parts : rt_threads;
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
	int threads = rt_threads;
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

/* Items are taken in turn from a shared counter, so a thread slowed by
 * another process takes fewer; which thread runs an item changes nothing
 * it computes. */
typedef struct {
	void (*fn)(void *arg, int64_t i);
	void *arg;
	int64_t n, next;
} Items;

static void items_part(void *arg, int part)
{
	(void)part;
	Items *it = arg;
	for (int64_t i; (i = __atomic_fetch_add(&it->next, 1, __ATOMIC_RELAXED)) < it->n;)
		it->fn(it->arg, i);
}

void rt_cpu_parallel(int64_t n, void (*fn)(void *arg, int64_t i), void *arg)
{
	if (n <= 1 || rt_threads == 1) {
		for (int64_t i = 0; i < n; i++)
			fn(arg, i);
		return;
	}
	Items it = {fn, arg, n, 0};
	pool_run(n < rt_threads ? (int)n : rt_threads, items_part, &it);
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
	int parts = (int)(n / (1 << 20)) < rt_threads ? (int)(n / (1 << 20)) : rt_threads;
	if (!apart || parts < 2) {
		memmove(P(dst), P(src), (size_t)n);
		return;
	}
	Move m = {P(dst), P(src), n, parts};
	pool_run(parts, move_part, &m);
}

/* ---- GEMMs: tiles fixed by the shape ----
 * C is cut into tiles from m, n and k alone (about GEMM_GRAIN FLOPs each,
 * at most GEMM_TILES a matrix, sides of GEMM_SIDE or more cut at multiples
 * of GEMM_ALIGN), and each tile is one single-threaded BLAS call over the
 * whole of k. So an element's sum runs in the same order whatever the
 * number of threads, and whichever thread computes its tile. A GEMM of
 * GEMM_GRAIN FLOPs or more runs on oneDNN where it is installed (10-20%
 * faster than OpenBLAS on one core here); a smaller one on OpenBLAS, which
 * starts at once (oneDNN's first GEMM loads it and generates its code). */
enum { GEMM_GRAIN = 1 << 24, GEMM_TILES = 64, GEMM_SIDE = 64, GEMM_ALIGN = 16 };

typedef struct {
	int elem; /* 4 (sgemm) or 8 (dgemm) */
	bool ta, tb;
	int64_t m, n, k, lda, sa, ldb, sb, ldc, sc;
	const char *a, *b;
	char *c;
	double beta;
	int tm, tn; /* tiles along m and n */
	bool dnnl;  /* f32 on oneDNN: a GEMM of GEMM_GRAIN FLOPs or more */
} Gemm;

/* the tiles along m and n: halve the longer side while a tile keeps
 * GEMM_GRAIN FLOPs and sides of GEMM_SIDE */
static void gemm_tiles(int64_t m, int64_t n, int64_t k, int *tm, int *tn)
{
	double flops = 2.0 * (double)m * (double)n * (double)k;
	*tm = *tn = 1;
	while (*tm * *tn * 2 <= GEMM_TILES && flops / (*tm * *tn * 2) >= GEMM_GRAIN) {
		bool cm = m / (2 * *tm) >= GEMM_SIDE, cn = n / (2 * *tn) >= GEMM_SIDE;
		if (cm && (!cn || m / *tm >= n / *tn))
			*tm *= 2;
		else if (cn)
			*tn *= 2;
		else
			break;
	}
}

/* where piece i of t of len starts (len at i == t) */
static int64_t cut(int64_t len, int t, int i) { return i >= t ? len : len * i / t / GEMM_ALIGN * GEMM_ALIGN; }

static void gemm_tile(void *arg, int64_t item)
{
	const Gemm *g = arg;
	int64_t per = (int64_t)g->tm * g->tn, bi = item / per;
	int i = (int)(item % per / g->tn), j = (int)(item % per % g->tn);
	int64_t r0 = cut(g->m, g->tm, i), r1 = cut(g->m, g->tm, i + 1), c0 = cut(g->n, g->tn, j), c1 = cut(g->n, g->tn, j + 1);
	int64_t ao = bi * g->sa + (g->ta ? r0 : r0 * g->lda), bo = bi * g->sb + (g->tb ? c0 * g->ldb : c0);
	int64_t co = bi * g->sc + r0 * g->ldc + c0;
	enum CBLAS_TRANSPOSE TA = g->ta ? CblasTrans : CblasNoTrans, TB = g->tb ? CblasTrans : CblasNoTrans;
	if (g->elem == 8)
		cblas_dgemm(CblasRowMajor, TA, TB, (int)(r1 - r0), (int)(c1 - c0), (int)g->k, 1.0, (const double *)g->a + ao,
		            (int)g->lda, (const double *)g->b + bo, (int)g->ldb, g->beta, (double *)g->c + co, (int)g->ldc);
	else if (!g->dnnl || !rt_cpu_dnnl_sgemm(g->ta, g->tb, r1 - r0, c1 - c0, g->k, (const float *)g->a + ao, g->lda,
	                            (const float *)g->b + bo, g->ldb, (float)g->beta, (float *)g->c + co, g->ldc))
		cblas_sgemm(CblasRowMajor, TA, TB, (int)(r1 - r0), (int)(c1 - c0), (int)g->k, 1.0f, (const float *)g->a + ao,
		            (int)g->lda, (const float *)g->b + bo, (int)g->ldb, (float)g->beta, (float *)g->c + co, (int)g->ldc);
}

void rt_cpu_gemm(int elem, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, int64_t sa,
                 const void *b, int64_t ldb, int64_t sb, void *c, int64_t ldc, int64_t sc, int64_t batch, double beta)
{
	Gemm g = {elem, ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, a, b, c, beta, 1, 1,
	          2.0 * (double)m * (double)n * (double)k >= GEMM_GRAIN};
	gemm_tiles(m, n, k, &g.tm, &g.tn);
	rt_cpu_parallel(batch * g.tm * g.tn, gemm_tile, &g);
}

/* bf16 has no BLAS: each matrix widened to f32, one sgemm, the result
 * rounded back (the accumulation is f32, as on the GPU), or with out32
 * kept in f32 (RT_GEMM_BF16_F32: C is f32) */
static void widen(float *f, uint64_t x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		f[i] = rt_bf16_to_f32(((const uint16_t *)P(x))[i]);
}

/* a matrix's elements from its first to its last: rows - 1 leading dimensions and one row (a part of a larger
 * matrix, a split GEMM's rest (codegen/linalg.c), may end well before its last row's leading dimension would) */
static int64_t span(int64_t rows, int64_t ld, int64_t cols)
{
	return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

static void bf16_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda, int64_t sa, uint64_t b,
                      int64_t ldb, int64_t sb, uint64_t c, int64_t ldc, int64_t sc, int64_t batch, double beta, bool out32)
{
	int64_t na = span(ta ? k : m, lda, ta ? m : k), nb = span(tb ? n : k, ldb, tb ? k : n), nc = span(m, ldc, n);
	float *A = rt_host_alloc((int64_t)sizeof(float) * (na + nb + nc), "a bf16 GEMM"), *Bm = A + na, *C = Bm + nb;
	for (int64_t i = 0; i < batch; i++) {
		widen(A, a + (uint64_t)(2 * i * sa), na);
		widen(Bm, b + (uint64_t)(2 * i * sb), nb);
		if (out32) {
			rt_cpu_gemm(4, ta, tb, m, n, k, A, lda, 0, Bm, ldb, 0, P(c + (uint64_t)(4 * i * sc)), ldc, 0, 1, beta);
			continue;
		}
		if (beta != 0)
			widen(C, c + (uint64_t)(2 * i * sc), nc);
		rt_cpu_gemm(4, ta, tb, m, n, k, A, lda, 0, Bm, ldb, 0, C, ldc, 0, 1, beta);
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
	if (elem_bytes == 2 || elem_bytes == RT_GEMM_BF16_F32)
		bf16_gemm(ta, tb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, beta, elem_bytes == RT_GEMM_BF16_F32);
	else
		rt_cpu_gemm(elem_bytes, ta, tb, m, n, k, P(a), lda, sa, P(b), ldb, sb, P(c), ldc, sc, batch, beta);
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
static void cpu_collective(int op, uint64_t dev, int64_t n, const char *dtype, const char *what)
{
	rt_dist_queue(op, P(dev), n, dtype, what);
}

static void cpu_free(uint64_t p) { free(P(p)); }
static void cpu_host_free(void *p) { free(p); }

const RtDevice rt_cpu_device = {"cpu", cpu_init, cpu_alloc, cpu_h2d, cpu_host_alloc, cpu_h2d, cpu_d2h, cpu_d2h, cpu_d2d, cpu_zero,
                                cpu_launch, cpu_gemm, cpu_sync, cpu_fence, cpu_fence, cpu_mark, cpu_mark_ms, cpu_free, cpu_host_free,
                                cpu_copy, cpu_copy_sync, cpu_copy_sync, NULL, NULL, NULL, cpu_copy_timing, cpu_copy_span,
                                cpu_mark_at, rt_cpu_conv, rt_cpu_attention, cpu_collective, rt_dist_drain, NULL, NULL, NULL};
