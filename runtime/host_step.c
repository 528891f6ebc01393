/* rt: the optimizer's step on the host, element by element. A streamed
 * parameter's units are updated here (host_update.c calls it on its
 * threads) with the same operations, in the same order, as the device's
 * sgd and adam kernels (compiler/codegen/control.c), so that a streamed
 * parameter ends bitwise where a resident one does. No contraction into
 * fused multiply-adds (the Makefile builds this file with
 * -ffp-contract=off, as LLVM leaves the kernels' operations apart); the
 * loops are specialised by types and compiled for the widest vectors this
 * CPU has (target_clones). bench/host_adam.c times it against DeepSpeed's
 * CPU Adam. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rt.h"

static inline float from_bf16(uint16_t h)
{
	uint32_t w = (uint32_t)h << 16;
	float f;
	memcpy(&f, &w, 4);
	return f;
}

/* rounded to nearest even; NaN a quiet NaN (rt_f32_to_bf16, the kernels' to_bf16) */
static inline uint16_t to_bf16(float f)
{
	uint32_t w;
	memcpy(&w, &f, 4);
	uint16_t h = (uint16_t)((w + 0x7fff + ((w >> 16) & 1)) >> 16);
	return f != f ? 0x7fc0 : h;
}

/* element i of a real array of type t (0 f32, 1 bf16: rt_real_index's), as f32 */
static inline float ld(const void *p, int t, int64_t i)
{
	return t == 1 ? from_bf16(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void st(void *p, int t, int64_t i, float x)
{
	if (t == 1)
		((uint16_t *)p)[i] = to_bf16(x);
	else
		((float *)p)[i] = x;
}

/* Elements [lo, hi) of one unit, in f32 arithmetic: the gradient g (type gt)
 * added to the step's sum (type pt: the parameter's, rounded as the
 * device's gradient variable rounds) where the step sums, then the step
 * itself on p, m, v (type pt) and the bf16 compute copy. Every flag is a
 * constant where it is inlined. */
static inline __attribute__((always_inline)) void step32(const RtHostStep *s, int64_t lo, int64_t hi, const int pt,
                                                         const int gt, const bool add, const bool step, const bool adam,
                                                         const bool copy)
{
	const float lr = (float)s->lr, b1 = (float)s->b1, b2 = (float)s->b2, eps = (float)s->eps;
	const float bc1 = (float)s->bc1, bc2 = (float)s->bc2, keep = (float)s->keep, scale = (float)s->scale;
	const bool first = s->first;
	for (int64_t i = lo; i < hi; i++) {
		float g;
		if (add) {
			/* the sum of the micro-batches so far, and this one's: as the device's acc and fold add */
			float was = first ? 0.0f : ld(s->sum, pt, i);
			g = was + ld(s->g, gt, i);
			st(s->sum, pt, i, g);
			if (pt == 1)
				g = ld(s->sum, pt, i);
		} else if (s->sum) {
			g = ld(s->sum, pt, i);
		} else {
			g = 0.0f + ld(s->g, gt, i);
			if (pt == 1 && gt == 1)
				g = ld(s->g, gt, i);
		}
		if (!step)
			continue;
		float gv = g * scale, p = ld(s->p, pt, i), np;
		if (adam) {
			float mv = b1 * ld(s->m, pt, i) + (1.0f - b1) * gv;
			float vv = b2 * ld(s->v, pt, i) + (1.0f - b2) * (gv * gv);
			/* the kernel goes on with the moments unrounded */
			st(s->m, pt, i, mv);
			st(s->v, pt, i, vv);
			float den = sqrtf(vv / bc2) + eps;
			np = p * keep - lr * (mv / bc1) / den;
		} else {
			np = p - lr * gv;
		}
		st(s->p, pt, i, np);
		if (copy)
			((uint16_t *)s->copy)[i] = to_bf16(np);
	}
}

static void step64(const RtHostStep *s, int64_t lo, int64_t hi, bool add, bool step, bool adam)
{
	const double *gp = s->g;
	double *sum = s->sum, *p = s->p, *m = s->m, *v = s->v;
	for (int64_t i = lo; i < hi; i++) {
		double g = add ? (s->first ? 0.0 : sum[i]) + gp[i] : sum ? sum[i] : 0.0 + gp[i];
		if (add)
			sum[i] = g;
		if (!step)
			continue;
		double gv = g * s->scale;
		if (adam) {
			double mv = s->b1 * m[i] + (1.0 - s->b1) * gv, vv = s->b2 * v[i] + (1.0 - s->b2) * (gv * gv);
			m[i] = mv;
			v[i] = vv;
			p[i] = p[i] * s->keep - s->lr * (mv / s->bc1) / (sqrt(vv / s->bc2) + s->eps);
		} else {
			p[i] = p[i] - s->lr * gv;
		}
	}
}

#define CASES(pt, gt, copy)                                                                                          \
	do {                                                                                                             \
		if (add && step && adam)                                                                                     \
			step32(s, lo, hi, pt, gt, true, true, true, copy);                                                       \
		else if (add && step)                                                                                        \
			step32(s, lo, hi, pt, gt, true, true, false, copy);                                                      \
		else if (add)                                                                                                \
			step32(s, lo, hi, pt, gt, true, false, false, false);                                                    \
		else if (adam)                                                                                               \
			step32(s, lo, hi, pt, gt, false, true, true, copy);                                                      \
		else                                                                                                         \
			step32(s, lo, hi, pt, gt, false, true, false, copy);                                                     \
	} while (0)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void rt_host_step(const RtHostStep *s, int64_t lo, int64_t hi)
{
	bool add = s->add, step = s->step, adam = s->m != NULL;
	if (!add && !step)
		return;
	if (s->dt == 2) {
		step64(s, lo, hi, add, step, adam);
		return;
	}
	/* under bf16-mixed an f32 parameter takes bf16 gradients and writes a bf16 copy */
	if (s->dt == 0 && s->mixed)
		CASES(0, 1, true);
	else if (s->dt == 0)
		CASES(0, 0, false);
	else
		CASES(1, 1, false);
}
