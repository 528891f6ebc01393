/* graph FILE.dp...: what straight-line code keeps for its adjoint, against
 * an exhaustive search. For each program every subset of the values the
 * adjoint may compute again is planned (ckpt_graph_eval); then for budgets
 * from the plan that keeps everything down to below the least plan, the fit
 * over all candidates must pick the fewest FLOPs that fit, and the fit over
 * the 3 largest (what programs with more than 12 candidates get, scaled
 * down) the fewest among subsets of those. Without a fit each applies the
 * least plan it searched. Prints ok / not ok. */
#include <stdio.h>
#include <stdlib.h>

#include "../../compiler/driver.h"
#include "check.h"


static Program *differentiated(const char *path)
{
	DriverOptions o = {0};
	o.emit = EMIT_GRAD;
	o.real_bytes = 4;
	o.verify = true;
	Emit last;
	return driver_passes(fe_parse(path, NULL, 0), &o, &last);
}

int main(int argc, char **argv)
{
	group = "graph";
	for (int a = 1; a < argc; a++) {
		const char *path = argv[a];
		Program *p = differentiated(path);
		int cand[64];
		int n = ckpt_graph_candidates(p, cand, 64);
		char what[300];
		snprintf(what, sizeof what, "%s: %d candidates, between 2 and 12", path, n);
		check(n >= 2 && n <= 12, what);
		if (n < 2 || n > 12)
			continue;
		int64_t *bytes = malloc(sizeof(int64_t) << n), *flops = malloc(sizeof(int64_t) << n), least = INT64_MAX;
		for (unsigned m = 0; m < 1u << n; m++) {
			int drop[64], k = 0;
			for (int i = 0; i < n; i++)
				if (m >> i & 1)
					drop[k++] = cand[i];
			bytes[m] = ckpt_graph_eval(p, drop, k, stream_plan, &flops[m]);
			least = bytes[m] < least ? bytes[m] : least;
		}
		int64_t full = bytes[0];
		snprintf(what, sizeof what, "%s: keeping everything plans %lld bytes, the least subset %lld", path, (long long)full,
		         (long long)least);
		check(least < full && flops[0] == 0, what);
		/* the 3 largest: a mask over cand of those alone */
		int large[3], nl = ckpt_graph_largest(p, large, 3);
		unsigned within = 0;
		for (int j = 0; j < nl; j++)
			for (int i = 0; i < n; i++)
				if (cand[i] == large[j])
					within |= 1u << i;
		for (int i = 0; i < n; i++) {
			int64_t b = ir_bytes(p, ir_vtype(p, cand[i]));
			for (int j = 0; j < nl; j++)
				if (!(within >> i & 1) && b > ir_bytes(p, ir_vtype(p, large[j])))
					within = 0;
		}
		snprintf(what, sizeof what, "%s: ckpt_graph_largest gives 3 of the candidates, none smaller than one it leaves", path);
		check(nl == 3 && __builtin_popcount(within) == 3, what);
		int budgets = 0;
		for (int s = 0; s <= 12; s++) {
			int64_t budget = s == 12 ? least - 1 : full - 1 - (full - 1 - least) * s / 11;
			for (int most = 12; most >= 3; most -= 9) {
				unsigned allowed = most == 12 ? (1u << n) - 1 : within;
				int64_t best = -1, low = INT64_MAX;
				for (unsigned m = 0; m < 1u << n; m++) {
					if (m & ~allowed)
						continue;
					if (bytes[m] <= budget && (best < 0 || flops[m] < best))
						best = flops[m];
					low = bytes[m] < low ? bytes[m] : low;
				}
				Program *q = differentiated(path);
				int64_t f = ckpt_graph_fit(q, budget, stream_plan, most);
				ir_verify(q, "ckpt_graph_fit");
				int64_t planned = stream_plan(q);
				snprintf(what, sizeof what, "%s, the %d largest, budget %lld: plan %lld bytes, %lld FLOPs again; the best "
				         "that fits %lld", path, most, (long long)budget, (long long)planned, (long long)f, (long long)best);
				if (best < 0)
					check(planned == low, what);
				else
					check(planned <= budget && f == best, what);
			}
			budgets++;
		}
		if (!fail)
			printf("ok - graph: %s: %d candidates, all %u subsets planned; at %d budgets the fit is the optimum over "
			       "all of them, and over the 3 largest\n", path, n, 1u << n, budgets);
		free(bytes);
		free(flops);
	}
	printf("%d checks, %d failed\n", pass + fail, fail);
	return fail != 0;
}
