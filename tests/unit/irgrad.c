/* irgrad FILE.dp: runs the compiler's passes up to the memory plan, then
 * checks the adjoint program in the reference interpreter against central
 * finite differences. Independent of codegen and the runtime. Prints the max
 * relative error; exits 1 above 1e-6. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/driver.h"
#include "../../compiler/ops/ops.h"

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

/* The parameters or gradients as safetensors, for the compiled program to load or to compare with. */
static void write_safetensors(const char *path, Program *p, Interp *m, bool grads)
{
	FILE *f = fopen(path, "wb");
	char h[65536];
	int n = snprintf(h, sizeof h, "{");
	int64_t off = 0;
	for (int i = 0, first = 1; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (grads && q->buffer)
			continue; /* no gradient */
		n += snprintf(h + n, sizeof h - (size_t)n, "%s\"%s\":{\"dtype\":\"F64\",\"shape\":[", first ? "" : ",", q->name);
		first = 0;
		for (int k = 0; k < q->type.rank; k++)
			n += snprintf(h + n, sizeof h - (size_t)n, "%s%lld", k ? "," : "", (long long)q->type.dim[k]);
		n += snprintf(h + n, sizeof h - (size_t)n, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + 8 * ir_numel(q->type)));
		off += 8 * ir_numel(q->type);
	}
	n += snprintf(h + n, sizeof h - (size_t)n, "}");
	while (n % 8)
		h[n++] = ' ';
	uint64_t len = (uint64_t)n;
	fwrite(&len, 8, 1, f);
	fwrite(h, 1, (size_t)n, f);
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (grads && q->buffer)
			continue;
		fwrite(ops_interp_tensor(m, grads ? q->grad : q->value), 8, (size_t)ir_numel(q->type), f);
	}
	fclose(f);
}

static void write_npy(const char *path, Input *in, Interp *m)
{
	FILE *f = fopen(path, "wb");
	char h[256];
	int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", in->type.dt == DT_I32 ? "<i4" : "<f8");
	for (int k = 0; k < in->type.rank; k++)
		n += snprintf(h + n, sizeof h - (size_t)n, "%lld,%s", (long long)in->type.dim[k], k + 1 < in->type.rank ? " " : "");
	n += snprintf(h + n, sizeof h - (size_t)n, "), }");
	while ((10 + n + 1) % 64)
		h[n++] = ' ';
	h[n++] = '\n';
	unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 255), (unsigned char)(n >> 8)};
	fwrite(pre, 1, 10, f);
	fwrite(h, 1, (size_t)n, f);
	fwrite(ops_interp_tensor(m, in->value), in->type.dt == DT_I32 ? 4 : 8, (size_t)ir_numel(in->type), f);
	fclose(f);
}

int main(int argc, char **argv)
{
	const char *dump = argc == 4 && !strcmp(argv[2], "--dump") ? argv[3] : NULL;
	if (argc != 2 && !dump) {
		fprintf(stderr, "usage: irgrad FILE.dp [--dump DIR]\n");
		return 2;
	}
	/* dpc's pipeline, store-everything, f64, to the memory plan */
	DriverOptions o = {0};
	o.emit = EMIT_STREAM;
	o.real_bytes = 8;
	o.verify = true;
	Emit last;
	Program *p = driver_passes(fe_parse(argv[1], NULL, 0), &o, &last);

	Interp *m = ops_interp_new(p);
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		double *x = ops_interp_tensor(m, q->value);
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
			int32_t *x = (int32_t *)ops_interp_tensor(m, in->value);
			for (int64_t e = 0; e < n; e++)
				x[e] = (int32_t)(uniform() * (in->classes ? in->classes : 1));
		} else {
			double *x = ops_interp_tensor(m, in->value);
			for (int64_t e = 0; e < n; e++)
				x[e] = normal();
		}
	}
	double loss = ops_interp_run(m, true);
	if (dump) {
		/* what the interpreter computed, for the compiled program to reproduce */
		write_safetensors(ar_printf("%s/params.safetensors", dump), p, m, false);
		write_safetensors(ar_printf("%s/grads.safetensors", dump), p, m, true);
		for (int i = 0; i < p->inputs.len; i++)
			write_npy(ar_printf("%s/%s.npy", dump, p->inputs.data[i].name), &p->inputs.data[i], m);
		FILE *f = fopen(ar_printf("%s/loss", dump), "w");
		fprintf(f, "%.17g\n", loss);
		fclose(f);
	}
	double worst = 0;
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->buffer)
			continue;
		int64_t n = ir_numel(q->type);
		double *g = malloc(sizeof(double) * (size_t)n);
		memcpy(g, ops_interp_tensor(m, q->grad), sizeof(double) * (size_t)n);
		double *x = ops_interp_tensor(m, q->value);
		for (int s = 0; s < 6; s++) {
			int64_t e = (int64_t)(uniform() * (double)n);
			double keep = x[e], h = 1e-6 * fmax(1, fabs(keep));
			x[e] = keep + h;
			double up = ops_interp_run(m, false);
			x[e] = keep - h;
			double down = ops_interp_run(m, false);
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
	ops_interp_free(m);
	ar_free_all();
	return worst > 1e-6;
}
