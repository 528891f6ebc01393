/* irgrad FILE.dp: runs the compiler's passes up to the memory plan, then
 * checks the adjoint program in the reference interpreter against central
 * finite differences. Independent of codegen and the runtime. Prints the max
 * relative error; exits 1 above 1e-6. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/ad_transform/ad.h"
#include "../../compiler/frontend/fe.h"
#include "../../compiler/stream_pass/stream.h"
#include "interp.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double normal(void)
{
	double u = uniform() + 1e-12, v = uniform();
	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: irgrad FILE.dp\n");
		return 2;
	}
	Program *p = fe_lower(fe_parse(argv[1], NULL, 0), 8);
	ir_verify(p, "frontend");
	p = ad_transform(p);
	ir_verify(p, "ad_transform");
	p = ir_dce(p);
	ir_verify(p, "dce");
	StreamOptions so = {0};
	p = stream_pass(p, &so);
	ir_verify(p, "stream_pass");

	Interp *m = interp_new(p);
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		double *x = interp_tensor(m, q->value);
		for (int64_t e = 0; e < ir_numel(q->type); e++)
			/* the declared scale, perturbed so that zeros and ones are generic points */
			x[e] = q->init == INIT_NORMAL ? q->a * normal()
			     : q->init == INIT_UNIFORM ? q->a + (q->b - q->a) * uniform()
			     : (q->init == INIT_ONES) + 0.05 * normal();
	}
	for (int i = 0; i < p->inputs.len; i++) {
		Input *in = &p->inputs.data[i];
		int64_t n = ir_numel(in->type);
		if (in->type.dt == DT_I32) {
			int32_t *x = (int32_t *)interp_tensor(m, in->value);
			for (int64_t e = 0; e < n; e++)
				x[e] = (int32_t)(uniform() * (in->classes ? in->classes : 1));
		} else {
			double *x = interp_tensor(m, in->value);
			for (int64_t e = 0; e < n; e++)
				x[e] = normal();
		}
	}
	double loss = interp_run(m, true);
	double worst = 0;
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		int64_t n = ir_numel(q->type);
		double *g = malloc(sizeof(double) * (size_t)n);
		memcpy(g, interp_tensor(m, q->grad), sizeof(double) * (size_t)n);
		double *x = interp_tensor(m, q->value);
		for (int s = 0; s < 6; s++) {
			int64_t e = (int64_t)(uniform() * (double)n);
			double keep = x[e], h = 1e-6 * fmax(1, fabs(keep));
			x[e] = keep + h;
			double up = interp_run(m, false);
			x[e] = keep - h;
			double down = interp_run(m, false);
			x[e] = keep;
			double fd = (up - down) / (2 * h), d = fabs(fd - g[e]);
			/* below the noise floor of central differences, agreement is all we can ask */
			double err = d <= 1e-8 * fmax(1, fabs(loss)) ? 0 : d / fmax(fabs(fd), fabs(g[e]));
			if (err > worst)
				worst = err;
			if (err > 1e-6 || getenv("IRGRAD_VERBOSE"))
				printf("%s[%lld]: ad %.10g fd %.10g\n", q->name, (long long)e, g[e], fd);
		}
		free(g);
	}
	printf("%s: loss %.6g, max relative error %.3g\n", argv[1], loss, worst);
	return worst > 1e-6;
}
