/* rt: oneDNN, opened at run time (libdnnl.so.2, Debian's libdnnl2), so that
 * an executable runs without it: convolutions then take dpc's own path and
 * f32 GEMMs OpenBLAS.
 *
 * oneDNN runs on libgomp's OpenMP threads, as many as omp_get_max_threads()
 * says on the thread that calls it, and sizes a primitive's work by that
 * count when the primitive is made. Every thread that calls oneDNN here
 * first sets its own count to 1: the device's threads hand out the pieces
 * (a convolution's images, a GEMM's tiles), so that two teams of threads do
 * not take turns at the same cores, and oneDNN's own split (which changes a
 * convolution's bits with the number of threads) never happens. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onednn.h"

#ifdef HAVE_DNNL
#define DNNL_DEFINE(f) __typeof__(&f) p_##f;
DNNL_FNS(DNNL_DEFINE)

dnnl_engine_t rt_dnnl_engine;
static int state; /* 0 not tried, 1 open, -1 missing */
static void (*omp_threads)(int); /* libgomp's omp_set_num_threads */

bool rt_dnnl_open(void)
{
	if (state)
		return state > 0;
	state = -1;
	/* DPC_ONEDNN names another file to open (the tests name a missing one) */
	const char *name = getenv("DPC_ONEDNN") ? getenv("DPC_ONEDNN") : "libdnnl.so.2";
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	const char *why = lib ? NULL : "oneDNN (libdnnl.so.2, Debian's libdnnl2) cannot be opened";
#define DNNL_LOOKUP(f) if (!why && !(p_##f = (__typeof__(p_##f))dlsym(lib, #f))) why = "libdnnl.so.2 lacks " #f;
	DNNL_FNS(DNNL_LOOKUP)
	omp_threads = lib ? (void (*)(int))dlsym(lib, "omp_set_num_threads") : NULL;
	if (omp_threads)
		omp_threads(1);
	if (!why && p_dnnl_engine_create(&rt_dnnl_engine, dnnl_cpu, 0) != dnnl_success)
		why = "oneDNN could not start on this CPU";
	if (why) {
		fprintf(stderr, "%s: warning: %s; convolutions run on dpc's own, slower path, f32 GEMMs on OpenBLAS\n", rt_prog,
		        why);
		return false;
	}
	state = 1;
	return true;
}

dnnl_stream_t rt_dnnl_stream(void)
{
	static __thread dnnl_stream_t stream;
	if (!stream) {
		if (omp_threads)
			omp_threads(1);
		DNNL(p_dnnl_stream_create(&stream, rt_dnnl_engine, dnnl_stream_default_flags));
	}
	return stream;
}

/* f32 GEMMs on oneDNN unless DPC_GEMM=openblas: decided once, whichever thread asks first */
static bool use_dnnl_gemm;

static void choose_gemm(void)
{
	const char *e = getenv("DPC_GEMM");
	use_dnnl_gemm = !(e && !strcmp(e, "openblas")) && rt_dnnl_open();
}

bool rt_cpu_dnnl_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float beta, float *c, int64_t ldc)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, choose_gemm);
	if (!use_dnnl_gemm)
		return false;
	rt_dnnl_stream();
	DNNL(p_dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc));
	return true;
}
#else
bool rt_cpu_dnnl_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float beta, float *c, int64_t ldc)
{
	return false;
}
#endif
