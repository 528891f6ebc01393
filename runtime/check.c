/* check: --gradcheck, the gradients of dp_step against central differences of dp_forward. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"
#include "../common/rng.h"

/* ---- gradient check ---- */

int rt_gradcheck(RtCtx *c, const RtOpts *o, void **host)
{
	RtModel *m = c->model;
	if (m->real_bytes != 8)
		fprintf(stderr, "%s: warning: --gradcheck in a %s build is not meaningful; compile with dpc --precision f64\n", rt_prog,
		        m->real_bytes == 2 ? "bfloat16" : "float32");
	/* streamed parameters: each unit's gradient is captured as dp_step makes it, and nothing is updated */
	void *g[RT_MAX_PARAMS];
	for (int i = 0; i < m->nparams; i++)
		g[i] = rt_host_alloc(m->params[i].bytes, "gradients");
	c->capture = g;
	c->no_update = true;
	dp_step(c);
	rt_fold(c, true);
	c->dev->sync();
	double loss = rt_read_loss(c), worst = 0, worst_abs = 0;
	rt_rng_seed((uint64_t)o->seed * 31 + 17);
	for (int i = 0; i < m->nparams; i++) {
		RtTensor *t = &m->params[i];
		if (t->buffer)
			continue;
		if (!t->streamed)
			rt_d2h(c, g[i], c->base + (uint64_t)t->grad, t->bytes);
		int64_t count = t->numel < o->gc_samples ? t->numel : o->gc_samples;
		double pworst = 0, pabs = 0;
		int64_t at = 0;
		for (int64_t s = 0; s < count; s++) {
			int64_t e = t->numel <= o->gc_samples ? s : (int64_t)(rt_rng_next() % (uint64_t)t->numel);
			double keep = rt_get(host[i], t->dtype, e), h = 1e-6 * (fabs(keep) > 1 ? fabs(keep) : 1);
			unsigned char elem[8];
			int esz = rt_elem_bytes(t->dtype);
			uint64_t where = c->base + (uint64_t)t->offset + (uint64_t)(e * esz);
			double lp[2];
			/* a streamed parameter is read from the host pool by each call */
			for (int side = 0; side < 2; side++) {
				rt_set(elem, t->dtype, 0, keep + (side ? -h : h));
				if (t->streamed)
					rt_set(host[i], t->dtype, e, keep + (side ? -h : h));
				else
					rt_h2d(c, where, elem, esz);
				rt_refresh(c, t);
				dp_forward(c);
				lp[side] = rt_read_loss(c); /* synchronous: the copies are done */
			}
			rt_set(elem, t->dtype, 0, keep);
			if (t->streamed)
				rt_set(host[i], t->dtype, e, keep);
			else
				rt_h2d(c, where, elem, esz);
			rt_refresh(c, t);
			double fd = (lp[0] - lp[1]) / (2 * h), ad = rt_get(g[i], t->dtype, e), d = fabs(ad - fd);
			double noise = 1e-8 * (fabs(loss) > 1 ? fabs(loss) : 1);
			double err = d <= noise ? 0 : d / fmax(fabs(ad), fabs(fd));
			if (err >= pworst)
				pworst = err, at = e;
			if (d > pabs)
				pabs = d;
		}
		printf("  %-24s max relative error %.3g (entry %lld of %lld), max |ad - fd| %.3g\n", t->name, pworst,
		       (long long)at, (long long)t->numel, pabs);
		if (pworst > worst)
			worst = pworst;
		if (pabs > worst_abs)
			worst_abs = pabs;
	}
	for (int i = 0; i < m->nparams; i++)
		free(g[i]);
	c->capture = NULL;
	c->no_update = false;
	bool ok = worst <= o->gc_threshold;
	printf("gradcheck: max relative error %.3g (threshold %.3g) %s; max |ad - fd| %.3g, noise floor %.3g\n", worst,
	       o->gc_threshold, ok ? "OK" : "FAIL", worst_abs, 1e-8 * (fabs(loss) > 1 ? fabs(loss) : 1));
	return ok ? 0 : 1;
}


