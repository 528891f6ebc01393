/* rt: data parallelism over MPI. Under mpirun (Open MPI, which tells each
 * process its place in OMPI_COMM_WORLD_SIZE and _RANK) every process is one
 * rank: it trains on its own part of each global batch, the gradients are
 * summed across the ranks before each update, and every rank applies the
 * same update. libmpi is opened at run time, when mpirun started the
 * process, so a single process needs no MPI at all. Open MPI's handles are
 * the addresses of its predefined objects (mpi.h's MPI_COMM_WORLD is
 * &ompi_mpi_comm_world), and MPI_IN_PLACE is (void *)1. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

int rt_rank, rt_nranks = 1;
bool rt_distributed;

typedef void *Handle;
static struct {
	void *lib;
	int (*init_thread)(int *, char ***, int, int *);
	int (*finalize)(void);
	int (*abort)(Handle, int);
	int (*allreduce)(const void *, void *, int, Handle, Handle, Handle);
	int (*bcast)(void *, int, Handle, int, Handle);
	int (*allgatherv)(const void *, int, Handle, void *, const int *, const int *, Handle, Handle);
	int (*rank)(Handle, int *);
	int (*size)(Handle, int *);
	Handle world, f32, f64, u64, u16, i32, byte, sum, min, max;
} mpi;

#define IN_PLACE ((void *)1)

/* every MPI call is checked, naming the call and where it was made */
#define MPI(call)                                                                                                        \
	do {                                                                                                                 \
		int rc_ = (call);                                                                                                \
		if (rc_ != 0)                                                                                                    \
			rt_fail(1, "%s:%d: %s failed (MPI error %d)", __FILE__, __LINE__, #call, rc_);                               \
	} while (0)

static void *sym(const char *name)
{
	void *p = dlsym(mpi.lib, name);
	if (!p)
		rt_fail(1, "mpirun started this process, but %s has no %s: dpc's executables speak Open MPI's ABI "
		        "(Debian's openmpi-bin)", "libmpi.so.40", name);
	return p;
}

/* ---- the sums in flight: a queue that one thread works through ---- */

typedef struct {
	int op;            /* RT_SUM, RT_BCAST */
	void *buf;
	int64_t n;         /* elements of dtype, or bytes when dtype is NULL */
	const char *dtype;
} Job;

enum { QUEUE = 1024 };
static struct {
	bool threaded;     /* the MPI library allows calls from a second thread, one at a time */
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t more, idle;
	Job q[QUEUE];
	int64_t issued, done;
	double waited;     /* seconds the training loop waited for sums in flight */
} comm = {.mu = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static void run_job(const Job *j);

static void *comm_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&comm.mu);
	for (;;) {
		while (comm.done == comm.issued)
			pthread_cond_wait(&comm.more, &comm.mu);
		Job j = comm.q[comm.done % QUEUE];
		pthread_mutex_unlock(&comm.mu);
		run_job(&j);
		pthread_mutex_lock(&comm.mu);
		comm.done++;
		pthread_cond_broadcast(&comm.idle);
	}
	return NULL;
}

void rt_dist_queue(int op, void *buf, int64_t n, const char *dtype)
{
	Job j = {op, buf, n, dtype};
	if (!comm.threaded) {
		run_job(&j);
		return;
	}
	pthread_mutex_lock(&comm.mu);
	if (!comm.running) {
		pthread_t t;
		if (pthread_create(&t, NULL, comm_thread, NULL) != 0)
			rt_fail(1, "cannot start the thread that sums the gradients across the ranks");
		pthread_detach(t);
		comm.running = true;
	}
	while (comm.issued - comm.done == QUEUE)
		pthread_cond_wait(&comm.idle, &comm.mu);
	comm.q[comm.issued++ % QUEUE] = j;
	pthread_cond_signal(&comm.more);
	pthread_mutex_unlock(&comm.mu);
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rt_dist_drain(void)
{
	if (!comm.running)
		return;
	double t = seconds();
	pthread_mutex_lock(&comm.mu);
	while (comm.done != comm.issued)
		pthread_cond_wait(&comm.idle, &comm.mu);
	pthread_mutex_unlock(&comm.mu);
	comm.waited += seconds() - t;
}

double rt_dist_waited(void) { return comm.waited; }

/* a rank that fails takes the others down with it at once, rather than
 * leaving them waiting in a collective */
static void abort_world(int status)
{
	mpi.abort(mpi.world, status ? status : 1);
}

void rt_dist_init(int *argc, char ***argv)
{
	const char *size = getenv("OMPI_COMM_WORLD_SIZE");
	if (!size) {
		if (getenv("PMI_SIZE") || getenv("PMIX_RANK"))
			fprintf(stderr, "%s: note: an MPI launcher other than Open MPI's mpirun started this process; it runs "
			        "alone, as one rank\n", rt_prog);
		return;
	}
	/* RTLD_GLOBAL: Open MPI's own plugins find libmpi's symbols through it */
	mpi.lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
	if (!mpi.lib)
		rt_fail(1, "mpirun started this process, but libmpi.so.40 (Open MPI) cannot be opened: %s", dlerror());
	*(void **)&mpi.init_thread = sym("MPI_Init_thread");
	*(void **)&mpi.finalize = sym("MPI_Finalize");
	*(void **)&mpi.abort = sym("MPI_Abort");
	*(void **)&mpi.allreduce = sym("MPI_Allreduce");
	*(void **)&mpi.bcast = sym("MPI_Bcast");
	*(void **)&mpi.allgatherv = sym("MPI_Allgatherv");
	*(void **)&mpi.rank = sym("MPI_Comm_rank");
	*(void **)&mpi.size = sym("MPI_Comm_size");
	mpi.world = sym("ompi_mpi_comm_world");
	mpi.f32 = sym("ompi_mpi_float");
	mpi.f64 = sym("ompi_mpi_double");
	mpi.u64 = sym("ompi_mpi_uint64_t");
	mpi.u16 = sym("ompi_mpi_uint16_t");
	mpi.i32 = sym("ompi_mpi_int32_t");
	mpi.byte = sym("ompi_mpi_byte");
	mpi.sum = sym("ompi_mpi_op_sum");
	mpi.min = sym("ompi_mpi_op_min");
	mpi.max = sym("ompi_mpi_op_max");
	/* the sums of a step's gradients run on a thread of their own while the adjoint goes on; the
	 * other calls wait for it to be idle: MPI_THREAD_SERIALIZED (2 in Open MPI's numbering) */
	int provided = 0;
	MPI(mpi.init_thread(argc, argv, 2, &provided));
	comm.threaded = provided >= 2;
	MPI(mpi.rank(mpi.world, &rt_rank));
	MPI(mpi.size(mpi.world, &rt_nranks));
	rt_distributed = true;
	rt_fail_hook = abort_world;
	(void)size;
}

void rt_dist_finish(void)
{
	if (!mpi.lib)
		return;
	rt_dist_drain();
	rt_fail_hook = NULL;
	MPI(mpi.finalize());
}

/* in place, in pieces that fit an int count */
static void allreduce(void *buf, int64_t n, Handle type, int64_t elem, Handle op)
{
	for (int64_t at = 0; at < n; at += INT_MAX / 2) {
		int64_t k = n - at < INT_MAX / 2 ? n - at : INT_MAX / 2;
		MPI(mpi.allreduce(IN_PLACE, (char *)buf + at * elem, (int)k, type, op, mpi.world));
	}
}

static void sum(void *buf, int64_t n, const char *dtype);

/* every rank's share of n elements, each rank's in place on every rank */
static void gather(void *buf, int64_t n, const char *dtype)
{
	Handle type = !strcmp(dtype, "f64") ? mpi.f64 : !strcmp(dtype, "bf16") ? mpi.u16 : !strcmp(dtype, "i32") ? mpi.i32 : mpi.f32;
	int *counts = rt_host_alloc((int64_t)sizeof(int) * 2 * rt_nranks, "the shares' counts");
	for (int r = 0; r < rt_nranks; r++) {
		RtTensor t = {.numel = n};
		int64_t k, lo = rt_share(&t, r, rt_nranks, &k);
		if (k > INT_MAX || lo > INT_MAX)
			rt_fail(1, "a tensor of %lld elements is too large to gather its shares across %d ranks in one call",
			        (long long)n, rt_nranks);
		counts[r] = (int)k;
		counts[rt_nranks + r] = (int)lo;
	}
	MPI(mpi.allgatherv(IN_PLACE, 0, type, buf, counts, counts + rt_nranks, type, mpi.world));
	free(counts);
}

static void run_job(const Job *j)
{
	if (j->op == RT_SUM)
		sum(j->buf, j->n, j->dtype);
	else if (j->op == RT_GATHER)
		gather(j->buf, j->n, j->dtype);
	else
		for (int64_t at = 0, bytes = j->dtype ? j->n * rt_elem_bytes(j->dtype) : j->n; at < bytes; at += INT_MAX / 2) {
			int64_t k = bytes - at < INT_MAX / 2 ? bytes - at : INT_MAX / 2;
			MPI(mpi.bcast((char *)j->buf + at, (int)k, mpi.byte, 0, mpi.world));
		}
}

void rt_dist_sum(void *buf, int64_t n, const char *dtype)
{
	if (!rt_distributed)
		return;
	rt_dist_drain();
	sum(buf, n, dtype);
}

static void sum(void *buf, int64_t n, const char *dtype)
{
	if (!strcmp(dtype, "f64")) {
		allreduce(buf, n, mpi.f64, 8, mpi.sum);
	} else if (!strcmp(dtype, "f32")) {
		allreduce(buf, n, mpi.f32, 4, mpi.sum);
	} else {
		/* bf16 (MPI has no such type): summed in f32, rounded once */
		float *f = rt_host_alloc(n * 4, "a bf16 sum across ranks");
		for (int64_t i = 0; i < n; i++)
			f[i] = (float)rt_get(buf, dtype, i);
		allreduce(f, n, mpi.f32, 4, mpi.sum);
		for (int64_t i = 0; i < n; i++)
			rt_set(buf, dtype, i, f[i]);
		free(f);
	}
}

bool rt_dist_same(uint64_t h)
{
	if (!rt_distributed)
		return true;
	rt_dist_drain();
	uint64_t lo = h, hi = h;
	MPI(mpi.allreduce(IN_PLACE, &lo, 1, mpi.u64, mpi.min, mpi.world));
	MPI(mpi.allreduce(IN_PLACE, &hi, 1, mpi.u64, mpi.max, mpi.world));
	return lo == hi;
}

void rt_dist_bcast(void *buf, int64_t bytes)
{
	if (!rt_distributed)
		return;
	rt_dist_drain();
	run_job(&(Job){RT_BCAST, buf, bytes, NULL}); /* bytes */
}

void rt_dist_gather(void *buf, int64_t n, const char *dtype)
{
	if (!rt_distributed)
		return;
	rt_dist_drain();
	gather(buf, n, dtype);
}

void rt_allreduce(RtCtx *c, int param, uint64_t g, int64_t n)
{
	/* bf16-mixed: the f32 sums are summed across the ranks after the step (update.c), not the bf16
	 * gradient of the last micro-batch */
	if (!rt_distributed || !c->reducing || c->model->mixed)
		return;
	c->no_graph = "data parallelism's sums run on a stream of their own";
	const RtTensor *t = &c->model->params[param];
	c->n.allreduce_bytes += n * rt_elem_bytes(t->dtype); /* the whole gradient, or one layer of it */
	c->dev->collective(RT_SUM, g, n, t->dtype);
}
