/* A hand-written stand-in for what dpc generates, so that the runtime can be
 * tested on its own: linear regression, loss = mean((x W + b - y)^2).
 *
 *   cc -Iruntime [-DREAL=double] [-DBREAK_GRAD] [-DBAD_DESC] fake_model.c runtime/libdprt.a -lopenblas -lpthread -lm
 *
 * REAL=double gives the f64 build; BREAK_GRAD makes the bias gradient wrong
 * (for the gradient check to catch); BAD_DESC adds a line the runtime must
 * reject; SLOW_STEP makes step 3 take 300 ms longer (for the progress line's
 * timing); COUNT_PARTS launches a kernel over 2^20 elements in the first
 * step and prints into how many parts the runtime split it. Every tensor gets 8-byte slots in the arena, so one layout serves
 * both precisions. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dprt.h"

#ifndef REAL
#define REAL float
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define float_NAME "f32"
#define double_NAME "f64"
#define PREC CAT(REAL, _NAME)

enum { B = 8, D = 4, P = 2 }; /* batch, features, outputs */

/* arena slots (8 bytes each) */
enum { W = 0, BIAS = 8, GW = 10, GB = 18, X = 20, Y = 52, Z = 68, LOSS = 84, SLOTS = 85 };
_Static_assert(SLOTS * 8 == 680, "the arena line of the description");

/* -DADAM: compiled for adam, its moments planned after the loss: m of W
 * and b at slots 85 and 93, v at 95 and 103, 840 bytes in all */
#ifdef ADAM
#define ARENA "840"
#define OPTIMIZER "optimizer adam\nstate W 680 760\nstate b 744 824\n"
#define PLAN_OPT "160"
#else
#define ARENA "680"
#define OPTIMIZER "optimizer sgd\n"
#define PLAN_OPT "0"
#endif

const char dp_model_desc[] =
	"dpc 1\n"
	"model fake\n"
	"precision " PREC "\n"
	"arena " ARENA "\n"
	"loss 672 " PREC "\n"
	"param W " PREC " 2 4 2 0 80 0 normal 0.5 0\n"
	"param b " PREC " 1 2 64 144 0 zeros 0 0\n"
	"input x " PREC " 2 8 4 160 0 0 0\n"
	"role x data\n"
	"input y " PREC " 2 8 2 416 0 0 0\n"
	"role y labels\n"
	OPTIMIZER
	"kernel sgd " PREC " 0\n"
	"kernel adam " PREC " 1\n"
#ifdef BAD_DESC
	"stream W 3\n"
#endif
	"plan params 80\n"
	"plan grads 80\n"
	"plan optimizer " PLAN_OPT "\n"
	"plan inputs 384\n"
	"plan tape 0\n"
	"plan snapshots 0\n"
	"plan work 136\n"
	"steps forward 1 recomputed 0\n"
	"end\n";

const char dp_ptx[] = "";
const int32_t dp_kernel_smem[1] = {0};

static REAL *ptr(uint64_t w) { return (REAL *)(uintptr_t)w; }

static double scalar(uint64_t w)
{
	double d;
	memcpy(&d, &w, sizeof d);
	return d;
}

static void k_sgd(const uint64_t *a, int64_t lo, int64_t hi)
{
	REAL *p = ptr(a[0]), *g = ptr(a[1]);
	double lr = scalar(a[2]);
	for (int64_t i = lo; i < hi; i++)
		p[i] = (REAL)(p[i] - lr * g[i]);
}

static void k_adam(const uint64_t *a, int64_t lo, int64_t hi)
{
	REAL *p = ptr(a[0]), *g = ptr(a[1]), *m = ptr(a[2]), *v = ptr(a[3]);
	double lr = scalar(a[4]), b1 = scalar(a[5]), b2 = scalar(a[6]), eps = scalar(a[7]);
	double bc1 = scalar(a[8]), bc2 = scalar(a[9]);
	for (int64_t i = lo; i < hi; i++) {
		m[i] = (REAL)(b1 * m[i] + (1 - b1) * g[i]);
		v[i] = (REAL)(b2 * v[i] + (1 - b2) * g[i] * g[i]);
		p[i] = (REAL)(p[i] - lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + eps));
	}
}

/* z = z + b - y, per element of z [B, P] */
static void k_residual(const uint64_t *a, int64_t lo, int64_t hi)
{
	REAL *z = ptr(a[0]), *b = ptr(a[1]), *y = ptr(a[2]);
	for (int64_t i = lo; i < hi; i++)
		z[i] = z[i] + b[i % P] - y[i];
}

/* one element: the loss, summed in a fixed order */
static void k_loss(const uint64_t *a, int64_t lo, int64_t hi)
{
	REAL *z = ptr(a[0]), *loss = ptr(a[1]);
	double s = 0;
	for (int i = 0; i < B * P; i++)
		s += (double)z[i] * z[i];
	*loss = (REAL)(s / (B * P));
}

/* z becomes dL/dz = 2 z / (B P) */
static void k_dloss(const uint64_t *a, int64_t lo, int64_t hi)
{
	REAL *z = ptr(a[0]);
	for (int64_t i = lo; i < hi; i++)
		z[i] = (REAL)(2.0 * z[i] / (B * P));
}

/* gb[j] = sum over rows of dz[., j] */
static void k_bias_grad(const uint64_t *a, int64_t lo, int64_t hi)
{
	REAL *dz = ptr(a[0]), *gb = ptr(a[1]);
	for (int64_t j = lo; j < hi; j++) {
		double s = 0;
		for (int r = 0; r < B; r++)
			s += dz[r * P + j];
#ifdef BREAK_GRAD
		s *= 1.01;
#endif
		gb[j] = (REAL)s;
	}
}

/* counts its calls: the parts of its index space */
static int parts;
static pthread_mutex_t parts_lock = PTHREAD_MUTEX_INITIALIZER;
static void k_count(const uint64_t *a, int64_t lo, int64_t hi)
{
	pthread_mutex_lock(&parts_lock);
	parts++;
	pthread_mutex_unlock(&parts_lock);
}

enum { K_SGD, K_ADAM, K_RESIDUAL, K_LOSS, K_DLOSS, K_BIAS_GRAD, K_COUNT };
const RtKernelFn dp_cpu_kernels[] = {k_sgd, k_adam, k_residual, k_loss, k_dloss, k_bias_grad, k_count};
const int dp_cpu_nkernels = sizeof dp_cpu_kernels / sizeof dp_cpu_kernels[0];

static uint64_t at(RtCtx *c, int slot) { return rt_base(c) + 8 * (uint64_t)slot; }

/* z = x W as two batched halves of the rows (exercises the batch strides) */
static void forward(RtCtx *c)
{
	rt_gemm(c, (int)sizeof(REAL), 0, 0, B / 2, P, D, at(c, X), D, B / 2 * D, at(c, W), P, 0, at(c, Z), P, B / 2 * P, 2, 0);
	rt_launch(c, K_RESIDUAL, B * P, 3, (uint64_t[]){at(c, Z), at(c, BIAS), at(c, Y)});
	rt_launch(c, K_LOSS, 1, 2, (uint64_t[]){at(c, Z), at(c, LOSS)});
	rt_count(c, RT_COUNT_FORWARD, 1);
}

void dp_forward(RtCtx *c) { forward(c); }

void dp_step(RtCtx *c)
{
	static int calls;
	calls++;
#ifdef SLOW_STEP
	if (calls == 3)
		nanosleep(&(struct timespec){0, 300000000}, NULL);
#endif
#ifdef COUNT_PARTS
	if (calls == 1) {
		rt_launch(c, K_COUNT, 1 << 20, 0, NULL);
		printf("kernel split into %d parts\n", parts);
	}
#endif
	forward(c);
	rt_launch(c, K_DLOSS, B * P, 1, (uint64_t[]){at(c, Z)});
	rt_zero(c, at(c, GW), D * P * (int64_t)sizeof(REAL));
	rt_gemm(c, (int)sizeof(REAL), 1, 0, D, P, B, at(c, X), D, 0, at(c, Z), P, 0, at(c, GW), P, 0, 1, 1);
	rt_launch(c, K_BIAS_GRAD, P, 2, (uint64_t[]){at(c, Z), at(c, GB)});
}
