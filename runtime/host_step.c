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

/* where an element's gradient comes from: the micro-batch's alone (0 + g, as a fold makes it), the
 * step's sum, or the micro-batch's added to the sum (the first micro-batch's to 0) and stored there */
enum { FROM_G, FROM_SUM, ADD_FIRST, ADD };

/* Elements [lo, hi) of one unit in f32 arithmetic: the gradient (type gt; the sum's and the rest's pt,
 * 0 f32, 1 bf16), then the step itself on p, m, v and the bf16 compute copy. Every flag is a constant
 * where it is inlined, so each case is a loop of its own, vectorised. */
static inline __attribute__((always_inline)) void step32(const RtHostStep *s, int64_t lo, int64_t hi, const int pt,
                                                         const int gt, const int from, const bool step,
                                                         const bool adam, const bool copy)
{
	const float lr = (float)s->lr, size = (float)s->size, b1 = (float)s->b1, b2 = (float)s->b2, eps = (float)s->eps;
	const float rbc2 = (float)s->rbc2, keep = (float)s->keep, scale = (float)s->scale;
	const float c1 = 1.0f - b1, c2 = 1.0f - b2;
	const void *restrict gp = s->g;
	void *restrict sum = s->sum, *restrict p = s->p, *restrict m = s->m, *restrict v = s->v;
	uint16_t *restrict cp = s->copy;
	for (int64_t i = lo; i < hi; i++) {
		float g;
		if (from == FROM_G) {
			g = pt == 1 ? ld(gp, gt, i) : 0.0f + ld(gp, gt, i);
		} else if (from == FROM_SUM) {
			g = ld(sum, pt, i);
		} else {
			/* as the device's acc and fold add: in f32, stored in the sum's type, read back as stored */
			g = (from == ADD_FIRST ? 0.0f : ld(sum, pt, i)) + ld(gp, gt, i);
			st(sum, pt, i, g);
			if (pt == 1)
				g = ld(sum, pt, i);
		}
		if (!step)
			continue;
		float gv = g * scale, np;
		if (adam) {
			float mv = b1 * ld(m, pt, i) + c1 * gv, vv = b2 * ld(v, pt, i) + c2 * (gv * gv);
			/* the kernel goes on with the moments unrounded */
			st(m, pt, i, mv);
			st(v, pt, i, vv);
			np = ld(p, pt, i) * keep - size * (mv / (sqrtf(vv) * rbc2 + eps));
		} else {
			np = ld(p, pt, i) - lr * gv;
		}
		st(p, pt, i, np);
		if (copy)
			cp[i] = to_bf16(np);
	}
}

static void step64(const RtHostStep *s, int64_t lo, int64_t hi, int from, bool step, bool adam)
{
	const double *gp = s->g;
	double *sum = s->sum, *p = s->p, *m = s->m, *v = s->v;
	for (int64_t i = lo; i < hi; i++) {
		double g = from == FROM_G ? 0.0 + gp[i] : from == FROM_SUM ? sum[i] : (from == ADD_FIRST ? 0.0 : sum[i]) + gp[i];
		if (from == ADD || from == ADD_FIRST)
			sum[i] = g;
		if (!step)
			continue;
		double gv = g * s->scale;
		if (adam) {
			double mv = s->b1 * m[i] + (1.0 - s->b1) * gv, vv = s->b2 * v[i] + (1.0 - s->b2) * (gv * gv);
			m[i] = mv;
			v[i] = vv;
			p[i] = p[i] * s->keep - s->size * (mv / (sqrt(vv) * s->rbc2 + s->eps));
		} else {
			p[i] = p[i] - s->lr * gv;
		}
	}
}

/* the loops of one type pair, by where the gradient comes from and what the step does */
#define BY_FROM(pt, gt, copy)                                                                                        \
	do {                                                                                                             \
		if (!step) {                                                                                                 \
			if (from == ADD_FIRST)                                                                                   \
				step32(s, lo, hi, pt, gt, ADD_FIRST, false, false, false);                                           \
			else                                                                                                     \
				step32(s, lo, hi, pt, gt, ADD, false, false, false);                                                 \
		} else if (adam) {                                                                                           \
			if (from == FROM_G)                                                                                      \
				step32(s, lo, hi, pt, gt, FROM_G, true, true, copy);                                                 \
			else if (from == FROM_SUM)                                                                               \
				step32(s, lo, hi, pt, gt, FROM_SUM, true, true, copy);                                               \
			else if (from == ADD_FIRST)                                                                              \
				step32(s, lo, hi, pt, gt, ADD_FIRST, true, true, copy);                                              \
			else                                                                                                     \
				step32(s, lo, hi, pt, gt, ADD, true, true, copy);                                                    \
		} else {                                                                                                     \
			if (from == FROM_G)                                                                                      \
				step32(s, lo, hi, pt, gt, FROM_G, true, false, copy);                                                \
			else if (from == FROM_SUM)                                                                               \
				step32(s, lo, hi, pt, gt, FROM_SUM, true, false, copy);                                              \
			else if (from == ADD_FIRST)                                                                              \
				step32(s, lo, hi, pt, gt, ADD_FIRST, true, false, copy);                                             \
			else                                                                                                     \
				step32(s, lo, hi, pt, gt, ADD, true, false, copy);                                                   \
		}                                                                                                            \
	} while (0)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void rt_host_step(const RtHostStep *s, int64_t lo, int64_t hi)
{
	bool step = s->step, adam = s->m != NULL;
	int from = s->add ? (s->first ? ADD_FIRST : ADD) : s->sum ? FROM_SUM : FROM_G;
	if (!s->add && !step)
		return;
	if (s->dt == 2) {
		step64(s, lo, hi, from, step, adam);
		return;
	}
	/* under bf16-mixed an f32 parameter takes bf16 gradients and writes a bf16 copy */
	if (s->dt == 0 && s->mixed)
		BY_FROM(0, 1, true);
	else if (s->dt == 0)
		BY_FROM(0, 0, false);
	else
		BY_FROM(1, 1, false);
}
