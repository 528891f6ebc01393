/* bench/host_adam.c: the host update's speed (runtime/host_step.c, the
 * streamed parameters' AdamW step) in parameters a second, at a thread
 * count, on n elements; and this machine's memory bandwidth at the same
 * threads over the same streams without the arithmetic (p, m and v each
 * read and written back, g read: 28 bytes an element, as Adam's step
 * moves in f32), which bounds both it and DeepSpeed's CPU Adam.
 * bench/host_adam.sh builds it and runs it beside bench/host_adam_ds.py.
 *
 *   host_adam N THREADS f32|mixed
 *     f32:   f32 parameters, gradients and moments (DeepSpeed's DeepSpeedCPUAdam step on the same tensors)
 *     mixed: bf16-mixed's: f32 master copy and moments, bf16 gradient, the bf16 compute copy written
 * prints one line: "NAME THREADS PARAMS_PER_S BYTES_PER_S BANDWIDTH_BYTES_PER_S" */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/rt.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
	const RtHostStep *s;
	float *p, *m, *v, *g; /* the bandwidth's arrays, when s is NULL */
	int64_t lo, hi;
} Part;

static void *run_part(void *arg)
{
	Part *p = arg;
	if (p->s) {
		rt_host_step(p->s, p->lo, p->hi);
		return NULL;
	}
	float *restrict q = p->p, *restrict m = p->m, *restrict v = p->v;
	const float *restrict g = p->g;
	for (int64_t i = p->lo; i < p->hi; i++) {
		q[i] += g[i];
		m[i] += g[i];
		v[i] += g[i];
	}
	return NULL;
}

/* elements [0, n) split in `threads` parts, each a thread's: the seconds it took */
static double parallel(int threads, int64_t n, const RtHostStep *s, float *p, float *m, float *v, float *g)
{
	pthread_t t[256];
	Part parts[256];
	double t0 = now();
	for (int i = 0; i < threads; i++) {
		parts[i] = (Part){s, p, m, v, g, n * i / threads, n * (i + 1) / threads};
		if (i > 0 && pthread_create(&t[i], NULL, run_part, &parts[i]) != 0) {
			fprintf(stderr, "host_adam: cannot start a thread\n");
			exit(1);
		}
	}
	run_part(&parts[0]);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
	return now() - t0;
}

/* rounded to nearest even (runtime/files.c's rt_f32_to_bf16, which this program does not link) */
static uint16_t to_bf16(float f)
{
	uint32_t w;
	memcpy(&w, &f, 4);
	return (uint16_t)((w + 0x7fff + ((w >> 16) & 1)) >> 16);
}

static void *alloc(int64_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, (size_t)bytes) != 0) {
		fprintf(stderr, "host_adam: out of memory (%lld bytes)\n", (long long)bytes);
		exit(1);
	}
	memset(p, 0, (size_t)bytes); /* the pages touched before timing */
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[3], "f32") && strcmp(argv[3], "mixed"))) {
		fprintf(stderr, "usage: host_adam N THREADS f32|mixed\n");
		return 2;
	}
	int64_t n = atoll(argv[1]);
	int threads = atoi(argv[2]);
	bool mixed = !strcmp(argv[3], "mixed");
	if (n < 1 || threads < 1 || threads > 256) {
		fprintf(stderr, "host_adam: N and THREADS must be positive (THREADS at most 256)\n");
		return 2;
	}
	float *p = alloc(4 * n), *m = alloc(4 * n), *v = alloc(4 * n);
	void *g = alloc((mixed ? 2 : 4) * n), *copy = mixed ? alloc(2 * n) : NULL;
	for (int64_t i = 0; i < n; i++) {
		p[i] = (float)(i % 1000) * 1e-3f;
		if (mixed)
			((uint16_t *)g)[i] = to_bf16((float)((i * 7) % 1000) * 1e-4f - 0.05f);
		else
			((float *)g)[i] = (float)((i * 7) % 1000) * 1e-4f - 0.05f;
	}
	RtHostStep s = {.dt = 0, .mixed = mixed, .step = true, .g = g, .p = p, .m = m, .v = v, .copy = copy,
	                .lr = 1e-3, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .keep = 1 - 1e-3 * 0.01, .scale = 1};
	/* the best of 5 steps, after one to warm up */
	double best = 1e30;
	for (int k = 0; k < 6; k++) {
		s.size = 1e-3 / (1 - 0.9 * (k + 1) / 10.0);
		s.rbc2 = 1 / (1 - 0.999 * (k + 1) / 10.0);
		double t = parallel(threads, n, &s, NULL, NULL, NULL, NULL);
		if (k > 0 && t < best)
			best = t;
	}
	/* read p, g, m, v; write p, m, v (and the compute copy) */
	double bytes = (double)n * (mixed ? 4 + 2 + 8 + 12 + 2 : 4 + 4 + 8 + 12);
	/* the same streams, f32 each, without the arithmetic (the gradient as f32 too, from the moments) */
	float *gf = mixed ? alloc(4 * n) : g;
	double streams = 1e30;
	for (int k = 0; k < 6; k++) {
		double t = parallel(threads, n, NULL, p, m, v, gf);
		if (k > 0 && t < streams)
			streams = t;
	}
	printf("%s %d %.6g %.6g %.6g\n", mixed ? "mixed" : "f32", threads, (double)n / best, bytes / best, 28.0 * (double)n / streams);
	return 0;
}
