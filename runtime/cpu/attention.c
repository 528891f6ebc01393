/* rt: attention on the CPU (the attention ops, rt_attention), in
 * FlashAttention-2's order of work: a work item is a tile of 64 query rows
 * of one head (64 key rows for the gradients of k and v); the other side's
 * rows come up to 512 at a time, and each chunk's scores and products are
 * GEMMs (OpenBLAS), with the softmax between chunks kept online (a running
 * max and sum per row). Nothing [T, T] is made beyond one 64 x 512 block a
 * thread. The items are shared by the device's threads, each computed whole
 * by one; OpenBLAS runs single-threaded inside them, as it always does
 * (docs/threads.md). bf16 is widened to f32 and the result rounded back. */
/* the loops over a tile's elements vectorize, in AVX-512 or AVX2 where the
 * CPU has it; never a fused multiply-add, which only some of those
 * instruction sets have, so that the three clones compute the same bits
 * (the GEMMs between those loops are the BLAS's, whose kernels may differ
 * from CPU to CPU) */
#pragma GCC optimize("tree-vectorize", "no-trapping-math", "fp-contract=off")
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* an item's own rows; the other side's come CHUNK at a time, so that a
 * T of up to CHUNK is one GEMM for the scores and one for the product */
enum { TILE = 64, CHUNK = 512 };

typedef struct {
	int kind;            /* 0 attention, 1 stats, 2 dq, 3 dk, 4 dv */
	int64_t T, C, H, dh, ntiles;
	bool causal;
	double scale;
	const void *in[5];   /* the operands, as the op has them */
	void *out;
} Job;

/* exp in f32 without a call: x = k ln 2 + r with |r| <= ln 2 / 2, exp(r)
 * by its Taylor series to r^7, times
 * 2^k built in the exponent bits: within about one ulp; below -87.3 it is
 * 0, above 88.7 inf.
 * The same steps as the compiler's f32 exp (cg_exp), so that both targets'
 * attention agree. */
static inline float fast_expf(float x)
{
	float c = x < -87.33f ? -87.33f : x;
	c = c > 88.72f ? 88.72f : c;
	float k = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
	float r = (c - k * 0.693145752f) - k * 1.42860677e-06f;
	float p = 1 + r * (1 + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
	/* 2^k as 2^h 2^(k - h), each a normal float for k in [-126, 128] */
	int32_t ki = (int32_t)k, h = ki >> 1, hb = (h + 127) << 23, kb = (ki - h + 127) << 23;
	float a, b;
	memcpy(&a, &hb, sizeof a);
	memcpy(&b, &kb, sizeof b);
	float y = p * a * b;
	y = x < -87.33f ? 0 : y;
	y = x > 88.72f ? INFINITY : y;
	return x != x ? x : y;
}

/* this thread's blocks: two TILE x CHUNK blocks, a tile of rows of the head, two scalars per row */
static void *scratch(const Job *j, size_t real)
{
	static __thread void *buf;
	static __thread size_t cap;
	size_t need = real * (size_t)(2 * TILE * CHUNK + TILE * j->dh + 2 * TILE);
	if (need > cap) {
		free(buf);
		buf = rt_host_alloc((int64_t)need, "attention's tiles");
		cap = need;
	}
	return buf;
}

#define R float
#define GEMM cblas_sgemm
#define EXP fast_expf
#define LOG logf
#define SUFFIX _f32
#include "attention.inc"
#undef R
#undef GEMM
#undef EXP
#undef LOG
#undef SUFFIX

#define R double
#define GEMM cblas_dgemm
#define EXP exp
#define LOG log
#define SUFFIX _f64
#include "attention.inc"

/* the operands' and the result's element counts, for bf16's copies */
static void sizes(int kind, const int64_t *d, int64_t *n, int64_t *out)
{
	int64_t x = d[0] * d[1] * d[2], st = d[0] * d[3] * d[1] * 2;
	for (int i = 0; i < 5; i++)
		n[i] = x;
	n[4] = kind >= 2 ? st : x;
	*out = kind == 1 ? st : x;
}

/* dims: B T C H causal */
void rt_cpu_attention(int kind, int elem_bytes, const int64_t *d, const uint64_t *in, uint64_t out)
{
	Job j = {kind, d[1], d[2], d[3], d[2] / d[3], (d[1] + TILE - 1) / TILE, d[4] != 0, 1 / sqrt((double)(d[2] / d[3])),
	         {NULL}, (void *)(uintptr_t)out};
	int nin = kind == 0 ? 3 : kind == 1 ? 4 : 5;
	for (int i = 0; i < nin; i++)
		j.in[i] = (const void *)(uintptr_t)in[i];
	int64_t items = d[0] * d[3] * j.ntiles;
	if (elem_bytes == 8) {
		rt_cpu_parallel(items, item_f64, &j);
	} else if (elem_bytes == 4) {
		rt_cpu_parallel(items, item_f32, &j);
	} else {
		int64_t n[5], nout;
		sizes(kind, d, n, &nout);
		float *f[6] = {NULL};
		for (int i = 0; i < nin; i++) {
			f[i] = rt_host_alloc((int64_t)sizeof(float) * n[i], "a bf16 attention");
			for (int64_t e = 0; e < n[i]; e++)
				f[i][e] = rt_bf16_to_f32(((const uint16_t *)j.in[i])[e]);
			j.in[i] = f[i];
		}
		f[5] = rt_host_alloc((int64_t)sizeof(float) * nout, "a bf16 attention");
		j.out = f[5];
		rt_cpu_parallel(items, item_f32, &j);
		for (int64_t e = 0; e < nout; e++)
			((uint16_t *)(uintptr_t)out)[e] = rt_f32_to_bf16(f[5][e]);
		for (int i = 0; i < 6; i++)
			free(f[i]);
	}
}
