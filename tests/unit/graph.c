/* graph FILE.dp...: what straight-line code keeps for its adjoint, against
 * an exhaustive search. For each program every choice of the values the
 * adjoint may compute again is planned (ckpt_graph_eval: each kept or
 * computed again, and with few of them once or at each use); then for
 * budgets from the plan that keeps everything down to below the least plan,
 * the fit over all candidates must pick the fewest FLOPs that fit, and the
 * fit over the 3 largest (what programs with more than 12 candidates get,
 * scaled down) the fewest among choices of those. Without a fit each applies the
 * least plan it searched. Prints ok / not ok. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/ad_transform/ad.h"
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

/* through the checkpoint pass under auto with tapes of rows; budget 0: none */
static Program *taped(const char *path, int64_t budget)
{
	FeOptions fo = {.real_bytes = 4};
	Program *p = fe_lower(fe_parse(path, NULL, 0), &fo);
	AdOptions ad = {true, true};
	CkptOptions ck = {0};
	ck.mode = CKPT_AUTO;
	ck.rows = true;
	ck.may_stream = false;
	p->device_mem = budget;
	ck.full_rows = true;
	p = ckpt_pass(ir_dce(ad_transform(p, &ad)), &ck);
	ir_verify(p, "checkpoint_pass");
	return p;
}

/* What a loop's rows keep, against an exhaustive search: every subset of
 * the values its adjoint could compute again, with and without relu masks
 * in bits, at every snapshot count s and row count k, planned; at budgets from the least plan that recomputes
 * nothing down to the least plan of all, ckpt_pass must plan within the
 * budget with the fewest recomputed FLOPs any of those shapes has there. */
static void rows(const char *path)
{
	Program *p = taped(path, 0);
	mem_plan(p);
	int cand[8], n = ckpt_rows_candidates(p, cand, 8, true), trip = 0;
	for (int i = 0; i < p->body.len; i++)
		if (p->body.ops[i]->kind == OP_REVOLVE && p->body.ops[i]->trip > trip)
			trip = (int)p->body.ops[i]->trip;
	char what[300];
	snprintf(what, sizeof what, "%s: %d candidates in the rows, between 2 and 8; a loop of %d steps, at most 64", path, n,
	         trip);
	check(n >= 2 && n <= 8 && trip >= 2 && trip <= 64, what);
	if (n < 2 || n > 8 || trip < 2 || trip > 64)
		return;
	int shapes = (2 << n) * trip * trip;
	int64_t *bytes = malloc(sizeof(int64_t) * (size_t)shapes), *flops = malloc(sizeof(int64_t) * (size_t)shapes);
	int64_t full = INT64_MAX, least = INT64_MAX;
	for (int m = 0, j = 0; m < 2 << n; m++) {
		int drop[8], k = 0;
		for (int i = 0; i < n; i++)
			if (m >> i & 1)
				drop[k++] = cand[i];
		CkptRows *r = ckpt_rows_apply(p, drop, k, m >> n);
		ir_verify(p, "ckpt_rows_apply");
		for (int s = 1; s <= trip; s++)
			for (int rowsk = 1; rowsk <= trip; rowsk++, j++) {
				ckpt_set_shape(p, s, rowsk);
				bytes[j] = mem_plan(p);
				flops[j] = ckpt_recomputed_flops(p);
				least = bytes[j] < least ? bytes[j] : least;
				if (!flops[j] && bytes[j] < full)
					full = bytes[j];
			}
		ckpt_rows_undo(r);
	}
	snprintf(what, sizeof what, "%s: recomputing nothing plans %lld bytes at least, the least plan %lld", path,
	         (long long)full, (long long)least);
	check(least < full, what);
	int nb = 0, dropped = 0, masked = 0, replayed = 0;
	for (int b = 0; b <= 12; b++) {
		int64_t budget = full - 1 - (full - 1 - least) * b / 12, best = -1;
		for (int j = 0; j < shapes; j++)
			if (bytes[j] <= budget && (best < 0 || flops[j] < best))
				best = flops[j];
		Program *q = taped(path, budget);
		int64_t planned = mem_plan(q), f = ckpt_recomputed_flops(q);
		bool pooled = false;
		for (int i = 0; i < q->body.len; i++) {
			int64_t kb;
			Op *v = q->body.ops[i];
			pooled |= v->kind == OP_REVOLVE && v->pool;
			replayed += v->kind == OP_REVOLVE && v->replay;
			if (v->kind == OP_REVOLVE && v->ktape && ckpt_rows_names(NULL, q, v, true, false, &kb))
				dropped++;
			for (int j = 0; v->kind == OP_REVOLVE && j < v->body3.len; j++)
				masked += v->body3.ops[j]->kind == OP_BITS;
		}
		snprintf(what, sizeof what, "%s, budget %lld: plan %lld bytes, %lld FLOPs again%s; the least any shape that fits "
		         "recomputes: %lld", path, (long long)budget, (long long)planned, (long long)f, pooled ? " (pooled)" : "",
		         (long long)best);
		/* pooled rows (one loop: its snapshots in the rows), which the shapes here do not take, are taken only
		 * where they recompute fewer */
		check(planned <= budget && (f == best || (pooled && f < best)), what);
		nb++;
	}
	snprintf(what, sizeof what, "%s: at some budget the rows keep less than everything (%d of %d)", path, dropped, nb);
	check(dropped > 0, what);
	if (!fail)
		printf("ok - graph/rows: %s: %d candidates, %d shapes planned; at %d budgets the fit recomputes the least any "
		       "shape that fits does, or pooled rows fewer (rows keeping less at %d, masks in bits at %d, the state "
		       "replayed at %d)\n", path, n, shapes, nb, dropped, masked, replayed);
	free(bytes);
	free(flops);
}

/* the choices ckpt_graph_fit plans over candidates cand[0..n): each kept or computed again, and with up to
 * CKPT_FIT_EACH of them, computed again once or at each use, the values they are computed from once or at each
 * use (the lowest digit); each choice's planned bytes and recomputed FLOPs, the first keeping everything */
typedef struct {
	unsigned count;
	int64_t *bytes, *flops;
} Space;

static Space space(Program *p, const int *cand, int n)
{
	int states = ckpt_fit_states(p, n);
	Space sp = {states == 3 ? 2 : 1, NULL, NULL};
	for (int i = 0; i < n; i++)
		sp.count *= (unsigned)states;
	sp.bytes = malloc(sizeof(int64_t) * sp.count), sp.flops = malloc(sizeof(int64_t) * sp.count);
	for (unsigned c = 0; c < sp.count; c++) {
		unsigned d = c;
		bool temps = states == 3 && (d & 1);
		if (states == 3)
			d >>= 1;
		int drop[64], k = 0;
		bool each[64];
		for (int i = 0; i < n; i++, d /= (unsigned)states)
			if (d % (unsigned)states) {
				each[k] = d % (unsigned)states == 2;
				drop[k++] = cand[i];
			}
		sp.bytes[c] = ckpt_graph_eval(p, drop, each, k, temps, mem_plan, &sp.flops[c]);
	}
	return sp;
}

int main(int argc, char **argv)
{
	group = "graph";
	for (int a = 1; a < argc; a++) {
		const char *path = argv[a];
		if (!strcmp(path, "--rows") && a + 1 < argc) {
			rows(argv[++a]);
			continue;
		}
		Program *p = differentiated(path);
		int cand[64];
		int n = ckpt_graph_candidates(p, cand, 64);
		char what[300];
		snprintf(what, sizeof what, "%s: %d candidates, between 2 and 12", path, n);
		check(n >= 2 && n <= 12, what);
		if (n < 2 || n > 12)
			continue;
		/* every choice the fit over all of them searches, then over the 3 largest */
		Space all = space(p, cand, n);
		int64_t full = all.bytes[0], least = INT64_MAX;
		for (unsigned c = 0; c < all.count; c++)
			least = all.bytes[c] < least ? all.bytes[c] : least;
		snprintf(what, sizeof what, "%s: keeping everything plans %lld bytes, the least choice %lld", path, (long long)full,
		         (long long)least);
		check(least < full && all.flops[0] == 0, what);
		int large[3], nl = ckpt_graph_largest(p, large, 3);
		bool among = nl == 3;
		for (int j = 0; j < nl; j++) {
			bool found = false;
			for (int i = 0; i < n; i++)
				found |= cand[i] == large[j];
			among &= found;
		}
		for (int i = 0; i < n && among; i++)
			for (int j = 0; j < nl; j++)
				if (cand[i] != large[0] && cand[i] != large[1] && cand[i] != large[2] &&
				    ir_bytes(p, ir_vtype(p, cand[i])) > ir_bytes(p, ir_vtype(p, large[j])))
					among = false;
		snprintf(what, sizeof what, "%s: ckpt_graph_largest gives 3 of the candidates, none smaller than one it leaves", path);
		check(among, what);
		Space three = space(p, large, nl);
		int budgets = 0;
		for (int s = 0; s <= 12; s++) {
			int64_t budget = s == 12 ? least - 1 : full - 1 - (full - 1 - least) * s / 11;
			for (int most = 12; most >= 3; most -= 9) {
				Space *sp = most == 12 ? &all : &three;
				int64_t best = -1, low = INT64_MAX;
				for (unsigned c = 0; c < sp->count; c++) {
					if (sp->bytes[c] <= budget && (best < 0 || sp->flops[c] < best))
						best = sp->flops[c];
					low = sp->bytes[c] < low ? sp->bytes[c] : low;
				}
				Program *q = differentiated(path);
				int64_t f = ckpt_graph_fit(q, budget, mem_plan, most);
				ir_verify(q, "ckpt_graph_fit");
				int64_t planned = mem_plan(q);
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
			printf("ok - graph: %s: %d candidates, all %u choices planned (%u of the 3 largest); at %d budgets the fit is "
			       "the optimum over all of them, and over the 3 largest\n", path, n, all.count, three.count, budgets);
		free(all.bytes), free(all.flops), free(three.bytes), free(three.flops);
	}
	printf("%d checks, %d failed\n", pass + fail, fail);
	return fail != 0;
}
