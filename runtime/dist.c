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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int rt_rank, rt_nranks = 1;

typedef void *Handle;
static struct {
	void *lib;
	int (*init)(int *, char ***);
	int (*finalize)(void);
	int (*abort)(Handle, int);
	int (*allreduce)(const void *, void *, int, Handle, Handle, Handle);
	int (*bcast)(void *, int, Handle, int, Handle);
	int (*rank)(Handle, int *);
	int (*size)(Handle, int *);
	Handle world, f32, f64, u64, sum, min, max;
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
	*(void **)&mpi.init = sym("MPI_Init");
	*(void **)&mpi.finalize = sym("MPI_Finalize");
	*(void **)&mpi.abort = sym("MPI_Abort");
	*(void **)&mpi.allreduce = sym("MPI_Allreduce");
	*(void **)&mpi.bcast = sym("MPI_Bcast");
	*(void **)&mpi.rank = sym("MPI_Comm_rank");
	*(void **)&mpi.size = sym("MPI_Comm_size");
	mpi.world = sym("ompi_mpi_comm_world");
	mpi.f32 = sym("ompi_mpi_float");
	mpi.f64 = sym("ompi_mpi_double");
	mpi.u64 = sym("ompi_mpi_uint64_t");
	mpi.sum = sym("ompi_mpi_op_sum");
	mpi.min = sym("ompi_mpi_op_min");
	mpi.max = sym("ompi_mpi_op_max");
	MPI(mpi.init(argc, argv));
	MPI(mpi.rank(mpi.world, &rt_rank));
	MPI(mpi.size(mpi.world, &rt_nranks));
	rt_fail_hook = abort_world;
	(void)size;
}

void rt_dist_finish(void)
{
	if (!mpi.lib)
		return;
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

void rt_dist_sum(void *buf, int64_t n, const char *dtype)
{
	if (rt_nranks == 1)
		return;
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
	if (rt_nranks == 1)
		return true;
	uint64_t lo = h, hi = h;
	MPI(mpi.allreduce(IN_PLACE, &lo, 1, mpi.u64, mpi.min, mpi.world));
	MPI(mpi.allreduce(IN_PLACE, &hi, 1, mpi.u64, mpi.max, mpi.world));
	return lo == hi;
}

void rt_dist_bcast(void *buf, int64_t bytes)
{
	if (rt_nranks == 1)
		return;
	for (int64_t at = 0; at < bytes; at += INT_MAX / 2) {
		int64_t k = bytes - at < INT_MAX / 2 ? bytes - at : INT_MAX / 2;
		MPI(mpi.bcast((char *)buf + at, (int)k, sym("ompi_mpi_byte"), 0, mpi.world));
	}
}

void rt_dist_host_collective(int op, void *buf, int64_t n, const char *dtype)
{
	if (op == RT_SUM)
		rt_dist_sum(buf, n, dtype);
	else
		rt_dist_bcast(buf, n * rt_elem_bytes(dtype));
}
