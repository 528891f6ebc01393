/* ckpt: what straight-line code keeps for its adjoint. By default every
 * value the adjoint reads stays live from the forward sweep until its last
 * adjoint use. Under --checkpoint auto, when the budget cannot hold the plan,
 * some of those values are dropped instead: the adjoint computes them again
 * from whatever is kept (a forward temporary may be kept for that), once,
 * just before its first op that needs them, or for each op that needs
 * them. The rewrite only touches the top level: values that an adjoint
 * loop's bodies read stay kept. With up
 * to GRAPH_EXHAUSTIVE candidates every subset is planned (tests/unit/graph.c
 * compares it with every subset); with more, the choice is select.h's, on a
 * cost model built here and calibrated against the planner, each choice
 * checked by the planner. --checkpoint min-memory asks for the least peak.
 * Where offloading is priced (Program.offload_cost), the model may also
 * offload a candidate: copied to a host variable after its definition
 * (settled after its last forward use, which frees it) and fetched where
 * the adjoint first needs it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt.h"

#include "../select/select.h"

enum { GRAPH_EXHAUSTIVE = 12, GRAPH_MAX = 4096, GRAPH_SWEEP = 256, GRAPH_DESCENT = 96 };

typedef struct {
	Op *op;
	int k, old;
} Edit;

typedef struct {
	Program *p;
	int nv;          /* values before a rewrite adds its copies */
	int *pos;        /* per value: the top-level forward op that defines it, or -1 */
	bool *read;      /* per value: the adjoint reads it, at top level or in a loop */
	bool *drop;      /* per value: the adjoint computes it again */
	bool *keep;      /* per value the adjoint does not read: kept for the recomputations that read it */
	bool *each;      /* per value computed again: made again for each adjoint op that needs it, not held between */
	int *hold;       /* per value computed again, the chain planner's (sel_chain): made again for each adjoint op
	                  * before top-level op hold[v] that needs it, and held from there; -1: as each[] says */
	bool *host;      /* per value dropped: offloaded and fetched instead of computed again */
	int *fwd_end;    /* per forward value: the last top-level forward op that reads it or a view of it */
	int *hvar, *copy; /* per value offloaded: its host variable and its offload's event in the current rewrite */
	int *issue;      /* per top-level op: where a fetch for it is issued (issue_points) */
	int *memo;       /* per value: its copy in the current rewrite, or -1 */
	Block *body;     /* the rewrite's new top level */
	Vec(Edit) edits; /* operands the rewrite replaced, to undo it */
	Block saved;
	Vec(int) fresh;  /* the values made for the current adjoint op that are made again for the next */
	Vec(int) order;  /* the values to make for the current adjoint op */
	int *mark, gen;  /* per value: the generation (one per adjoint op) that put it in order */
	int64_t flops;   /* the rewrite's recomputed FLOPs */
	int64_t moved;   /* the bytes it offloads (each down once and up once) */
	int ncopies;     /* its offloads and fetches: their events */
	int cur;         /* the top-level op whose operands it makes */
	Vec(Op *) fetches; /* its fetches, in order */
	Vec(int) fetch_at; /* for each, the top-level op that first needs it */
	int nforward;    /* the forward ops before it */
	bool *result;    /* per value: one the runtime reads after the step (ir_is_result, which walks every update) */
} Graph;

/* what the rewrite costs: its FLOPs, and its offloads at Program.offload_cost a byte each way */
static int64_t cost(Graph *g) { return g->flops + 2 * g->p->offload_cost * g->moved; }

/* DPC_SELECT_TRACE=1: each phase of the searches, its seconds and what it left (bytes planned, FLOPs), on
 * stderr, so that a phase that never lowers either can be found (bench/RESULTS.md, issue 62) */
static void trace(const char *phase, int64_t bytes, int64_t flops)
{
	static int on = -1;
	static struct timespec last;
	if (on < 0)
		on = getenv("DPC_SELECT_TRACE") != NULL, clock_gettime(CLOCK_MONOTONIC, &last);
	if (!on)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double s = (double)(now.tv_sec - last.tv_sec) + 1e-9 * (double)(now.tv_nsec - last.tv_nsec);
	last = now;
	fprintf(stderr, "select: %-18s %8.3f s  %14lld bytes  %16lld flops\n", phase, s, (long long)bytes, (long long)flops);
}

static bool is_view(Op *op) { return ir_ops[op->kind].flags & OPF_VIEW; }

bool ckpt_pure(Program *p, Op *op)
{
	/* loops have no result; transfers are writes */
	if (op->out < 0 || (ir_ops[op->kind].flags & (OPF_WRITE | OPF_LEAF)))
		return false;
	for (int k = 0; k < op->nin; k++) {
		Value *x = &p->values.data[op->in[k]];
		if (x->kind == VK_VAR && !(x->def && (x->def->kind == OP_PARAM || x->def->kind == OP_INPUT)))
			return false;
	}
	return true;
}

/* see(ctx, w) for every value that b's ops read, in their bodies too */
static void each_read(Block *b, void (*see)(void *, int), void *ctx)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			see(ctx, op->in[k]);
		for (int k = 0; k < op->ncarry && op->cyield; k++)
			see(ctx, op->cyield[k]);
		for (int k = 0; k < op->ncarry && op->body3.len; k++)
			see(ctx, op->cyield3[k]);
		each_read(&op->body, see, ctx);
		each_read(&op->body2, see, ctx);
		each_read(&op->body3, see, ctx);
	}
}

static void mark(void *named, int w) { ((bool *)named)[w] = true; }

/* named[w] for every value that b's ops read */
static void mark_block(Block *b, bool *named) { each_read(b, mark, named); }

typedef struct {
	int *last, at;
} LastRead;

static void note_last(void *ctx, int w) { ((LastRead *)ctx)->last[w] = ((LastRead *)ctx)->at; }

/* whether the rewrite computes w again: a forward value dropped, one that
 * only a recomputation reads, or a view of either */
static bool needs(Graph *g, int w)
{
	Program *p = g->p;
	if (w >= g->nv || g->pos[w] < 0 || g->result[w])
		return false;
	Op *d = p->body.ops[g->pos[w]];
	/* a workspace holds nothing: made again for each recomputation (a
	 * recomputed convolution reading the forward's would hold it from the
	 * forward sweep to the adjoint) */
	if (g->drop[w] || d->kind == OP_SCRATCH)
		return true;
	if (is_view(d))
		return needs(g, d->in[0]);
	return !g->read[w] && !g->keep[w] && ckpt_pure(p, d);
}

/* whether w (or what it views) is made again for each adjoint op: a
 * workspace always is */
static bool made_each(Graph *g, int w)
{
	while (w < g->nv && g->pos[w] >= 0 && !g->each[w] && g->hold[w] < 0 && is_view(g->p->body.ops[g->pos[w]]))
		w = g->p->body.ops[g->pos[w]]->in[0];
	if (w < g->nv && g->hold[w] >= 0)
		return g->cur < g->hold[w];
	return w < g->nv && (g->each[w] || (g->pos[w] >= 0 && g->p->body.ops[g->pos[w]]->kind == OP_SCRATCH));
}

static int materialize(Graph *g, int w)
{
	Program *p = g->p;
	if (!needs(g, w))
		return w;
	if (g->memo[w] >= 0)
		return g->memo[w];
	Value *x = &p->values.data[w];
	if (g->host[w]) {
		/* fetched from its host copy, which the forward's offload wrote, and waited for */
		Op *f = ir_new_op(p, OP_FETCH, x->loc, 1, (int[]){g->hvar[w]});
		f->index = g->ncopies++;
		vec_push(&g->fetches, f);
		vec_push(&g->fetch_at, g->cur);
		f->out = ir_new_value(p, x->kind, x->type, x->name, x->loc);
		p->values.data[f->out].def = f;
		ir_append(g->body, f);
		Op *s = ir_new_op(p, OP_SETTLE, f->loc, 1, (int[]){f->out});
		s->index = f->index;
		ir_append(g->body, s);
		return g->memo[w] = f->out;
	}
	if (made_each(g, w))
		vec_push(&g->fresh, w);
	Op *d = p->body.ops[g->pos[w]];
	Op *n = ar_alloc(sizeof *n);
	*n = *d;
	n->in = ar_alloc(sizeof(int) * (size_t)(d->nin + 1));
	for (int k = 0; k < d->nin; k++)
		n->in[k] = materialize(g, d->in[k]);
	x = &p->values.data[w];
	n->out = ir_new_value(p, x->kind, x->type, x->name, x->loc);
	p->values.data[n->out].def = n;
	n->recomputed = true;
	ir_append(g->body, n);
	g->flops += ir_op_flops(p, n);
	return g->memo[w] = n->out;
}

/* the values w's copy needs made first, and w, into g->order (each once an adjoint op) */
static void collect(Graph *g, int w)
{
	if (!needs(g, w) || g->memo[w] >= 0 || g->mark[w] == g->gen)
		return;
	g->mark[w] = g->gen;
	if (!g->host[w]) {
		Op *d = g->p->body.ops[g->pos[w]];
		for (int k = 0; k < d->nin; k++)
			collect(g, d->in[k]);
	}
	vec_push(&g->order, w);
}

static const Graph *order_graph;
static int by_position(const void *a, const void *b)
{
	int x = order_graph->pos[*(const int *)a], y = order_graph->pos[*(const int *)b];
	return (x > y) - (x < y);
}

/* The copies top-level adjoint op `op` needs, made in the forward's order:
 * the order the selection's model counts them in (select.h), whatever the
 * order of the op's operands */
static void make_in_order(Graph *g, Op *op)
{
	g->gen++;
	g->order.len = 0;
	for (int k = 0; k < op->nin; k++)
		collect(g, op->in[k]);
	order_graph = g;
	if (g->order.len > 1)
		qsort(g->order.data, (size_t)g->order.len, sizeof(int), by_position);
	for (int k = 0; k < g->order.len; k++)
		materialize(g, g->order.data[k]);
}

/* where a fetch for top-level adjoint op i is issued: at the last adjoint
 * op before it that computes (FLOPs, or a loop), so that the copy overlaps
 * it; at i itself when none does */
static void issue_points(Program *p, int *issue)
{
	int last = -1;
	for (int i = 0; i < p->body.len; i++) {
		issue[i] = i >= p->nforward && last >= 0 ? last : i;
		Op *op = p->body.ops[i];
		if (i >= p->nforward && (ir_op_flops(p, op) > 0 || ir_is_loop(op)))
			last = i;
	}
}

/* Each fetch moved ahead to the start of the ops made for the adjoint op
 * where it is issued (issue_points; start[i]: where op i's begin in b);
 * its settle stays where it was. */
static void prefetch(Graph *g, Block *b, const int *start)
{
	Op **ops = malloc(sizeof(Op *) * (size_t)(b->len + 1));
	int n = 0, next = 0, seen = 0, nf = g->fetches.len;
	/* a fetch for the first adjoint op stays where it is */
#define MOVED(k) (g->issue[g->fetch_at.data[k]] < g->fetch_at.data[k])
	for (int j = 0; j < b->len; j++) {
		for (; next < nf && (!MOVED(next) || start[g->issue[g->fetch_at.data[next]]] <= j); next++)
			if (MOVED(next))
				ops[n++] = g->fetches.data[next];
		if (seen < nf && b->ops[j] == g->fetches.data[seen]) {
			bool moved = MOVED(seen);
			seen++;
			if (moved)
				continue;
		}
		ops[n++] = b->ops[j];
	}
#undef MOVED
	memcpy(b->ops, ops, sizeof(Op *) * (size_t)n);
	free(ops);
}

/* The program with g->drop's values computed again in the adjoint. */
static void apply(Graph *g)
{
	Program *p = g->p;
	Block *b = ar_alloc(sizeof *b);
	g->body = b;
	g->flops = g->moved = 0;
	g->ncopies = 0;
	g->edits.len = 0;
	g->saved = p->body;
	/* the offloaded values' host copies, and the ops after which each is settled */
	int *settle = malloc(sizeof(int) * (size_t)(g->nv + 1)), nsettle = 0;
	int *after = calloc((size_t)p->nforward + 1, sizeof(int));
	int *start = malloc(sizeof(int) * (size_t)(p->body.len + 1));
	g->fetches.len = g->fetch_at.len = 0;
	for (int v = 0; v < g->nv; v++) {
		g->memo[v] = -1;
		if (!g->host[v])
			continue;
		Value x = p->values.data[v]; /* a copy: the new value may move the table */
		g->hvar[v] = ir_new_value(p, VK_VAR, x.type, x.name ? ar_printf("host_%s", x.name) : "host", x.loc);
		p->values.data[g->hvar[v]].vclass = VC_HOST;
		g->moved += ir_bytes(p, x.type);
		after[g->fwd_end[v]]++;
	}
	g->nforward = p->nforward;
	int nforward = -1;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		/* the forward part grows by its offloads and settles */
		if (i == g->nforward)
			nforward = b->len;
		start[i] = b->len;
		g->cur = i;
		if (i >= g->nforward)
			make_in_order(g, op);
		for (int k = 0; k < op->nin && i >= g->nforward; k++) {
			int w = materialize(g, op->in[k]);
			if (w != op->in[k]) {
				vec_push(&g->edits, ((Edit){op, k, op->in[k]}));
				op->in[k] = w;
			}
		}
		ir_append(b, op);
		if (i < g->nforward && op->out >= 0 && op->out < g->nv && g->host[op->out]) {
			/* the copy down starts behind the op that made it */
			Op *o = ir_new_op(p, OP_OFFLOAD, op->loc, 2, (int[]){g->hvar[op->out], op->out});
			o->index = g->ncopies++;
			g->copy[op->out] = o->index;
			ir_append(b, o);
			settle[nsettle++] = op->out;
		}
		/* after its last forward reader an offloaded value's memory is free once its copy is done */
		for (int k = 0; i < g->nforward && after[i] && k < nsettle; k++) {
			int v = settle[k];
			if (v >= 0 && g->fwd_end[v] == i) {
				Op *s = ir_new_op(p, OP_SETTLE, op->loc, 1, (int[]){v});
				s->index = g->copy[v];
				ir_append(b, s);
				settle[k] = -1;
			}
		}
		for (int k = 0; k < g->fresh.len; k++)
			g->memo[g->fresh.data[k]] = -1;
		g->fresh.len = 0;
	}
	if (g->fetches.len)
		prefetch(g, b, start);
	free(settle);
	free(after);
	free(start);
	p->body = *b;
	p->nforward = nforward < 0 ? b->len : nforward;
}

static void undo(Graph *g)
{
	Program *p = g->p;
	for (int i = 0; i < g->edits.len; i++)
		g->edits.data[i].op->in[g->edits.data[i].k] = g->edits.data[i].old;
	p->body = g->saved;
	p->nforward = g->nforward;
	p->values.len = g->nv;
}

/* the plan's bytes with `drop` recomputed, and its FLOPs in *flops */
static int64_t eval(Graph *g, int64_t (*plan)(Program *), int64_t *flops)
{
	apply(g);
	int64_t bytes = plan(g->p);
	*flops = cost(g);
	undo(g);
	return bytes;
}

/* the largest problem whose walks walk_moves cut, or whose least search least_packed_hard did not run again,
 * since init(): its values and positions (Program.graph_walks_cut) */
static int64_t walks_cut;

static void init(Graph *g, Program *p)
{
	walks_cut = 0;
	g->p = p;
	g->nv = p->values.len;
	g->pos = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->read = ar_alloc((size_t)g->nv + 1);
	g->drop = ar_alloc((size_t)g->nv + 1);
	g->keep = ar_alloc((size_t)g->nv + 1);
	g->each = ar_alloc((size_t)g->nv + 1);
	g->hold = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->memo = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->mark = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->host = ar_alloc((size_t)g->nv + 1);
	g->issue = ar_alloc(sizeof(int) * (size_t)(p->body.len + 1));
	issue_points(p, g->issue);
	g->fwd_end = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->hvar = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->copy = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->result = ar_alloc((size_t)g->nv + 1);
	for (int i = 0; i < ir_nresults(p); i++)
		if (ir_result(p, i) >= 0 && ir_result(p, i) < g->nv)
			g->result[ir_result(p, i)] = true;
	for (int v = 0; v < g->nv; v++)
		g->pos[v] = g->hold[v] = -1;
	for (int i = 0; i < p->nforward; i++)
		if (p->body.ops[i]->out >= 0)
			g->pos[p->body.ops[i]->out] = g->fwd_end[p->body.ops[i]->out] = i;
	/* the last forward reader of each value (a loop's, anywhere inside it), then through views to their roots */
	for (int i = 0; i < p->nforward; i++)
		each_read(&(Block){p->body.ops + i, 1, 0}, note_last, &(LastRead){g->fwd_end, i});
	for (int i = p->nforward - 1; i >= 0; i--) {
		Op *op = p->body.ops[i];
		if (op->out >= 0 && is_view(op) && g->fwd_end[op->out] > g->fwd_end[op->in[0]])
			g->fwd_end[op->in[0]] = g->fwd_end[op->out];
	}
	Block adj = {p->body.ops + p->nforward, p->body.len - p->nforward, 0};
	mark_block(&adj, g->read);
	/* what the adjoint reads through a view it reads too: kept unless dropped */
	for (int i = p->nforward - 1; i >= 0; i--) {
		Op *op = p->body.ops[i];
		if (op->out >= 0 && g->read[op->out] && is_view(op))
			g->read[op->in[0]] = true;
	}
}

int ckpt_graph_candidates(Program *p, int *out, int max)
{
	Graph g = {0};
	init(&g, p);
	/* values an adjoint loop's bodies read, and the sources of their views, stay */
	bool *nested = ar_alloc((size_t)g.nv + 1);
	for (int i = p->nforward; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		mark_block(&op->body, nested);
		mark_block(&op->body2, nested);
		mark_block(&op->body3, nested);
	}
	for (int i = p->nforward - 1; i >= 0; i--) {
		Op *op = p->body.ops[i];
		if (op->out >= 0 && nested[op->out] && is_view(op))
			nested[op->in[0]] = true;
	}
	int n = 0;
	for (int i = 0; i < p->nforward && n < max; i++) {
		Op *op = p->body.ops[i];
		int v = op->out;
		if (v >= 0 && g.read[v] && !nested[v] && ckpt_pure(p, op) && !is_view(op) && p->values.data[v].kind == VK_SSA &&
		    !ir_is_result(p, v))
			out[n++] = v;
	}
	return n;
}

int64_t ckpt_graph_eval(Program *p, const int *drop, const bool *each, int n, bool temps, int64_t (*plan)(Program *),
                        int64_t *flops)
{
	Graph g = {0};
	init(&g, p);
	for (int v = 0; v < g.nv; v++)
		g.each[v] = temps;
	for (int i = 0; i < n; i++)
		g.drop[drop[i]] = true, g.each[drop[i]] = each && each[i];
	return eval(&g, plan, flops);
}

typedef struct {
	int64_t bytes, flops;
	bool fits;
} Choice;

/* better: fits, then fewer FLOPs, then fewer bytes; without a fit, fewer bytes, then fewer FLOPs */
static bool better(Choice a, Choice b)
{
	if (a.fits != b.fits)
		return a.fits;
	if (a.fits && a.flops != b.flops)
		return a.flops < b.flops;
	return a.bytes < b.bytes || (!a.fits && a.bytes == b.bytes && a.flops < b.flops);
}

typedef struct {
	int64_t bytes;
	int v;
} Sized;

/* largest first, then in program order */
static int by_bytes(const void *a, const void *b)
{
	const Sized *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : x->v - y->v;
}

void ckpt_largest_first(Program *p, int *v, int n)
{
	Sized *s = ar_alloc(sizeof *s * (size_t)(n + 1));
	for (int i = 0; i < n; i++)
		s[i] = (Sized){ir_bytes(p, ir_vtype(p, v[i])), v[i]};
	qsort(s, (size_t)n, sizeof *s, by_bytes);
	for (int i = 0; i < n; i++)
		v[i] = s[i].v;
}

int ckpt_graph_largest(Program *p, int *out, int most)
{
	int cand[GRAPH_MAX];
	int n = ckpt_graph_candidates(p, cand, GRAPH_MAX);
	ckpt_largest_first(p, cand, n);
	n = n < most ? n : most;
	for (int i = 0; i < n; i++)
		out[i] = cand[i];
	return n;
}

/* at most `most` (and GRAPH_EXHAUSTIVE) candidates planned in every subset: 2^most plans of the whole
 * program, about 2^25 values in all at most */
static int exhaustive_most(Program *p, int most)
{
	most = most < GRAPH_EXHAUSTIVE ? most : GRAPH_EXHAUSTIVE;
	while (most > 1 && ((int64_t)p->values.len << most) > ((int64_t)1 << 25))
		most--;
	return most;
}

/* candidate i's state in choice c of fit_planned: 0 kept, 1 computed again once, 2 at each use */
static int state_of(unsigned c, int i, int states)
{
	while (i-- > 0)
		c /= (unsigned)states;
	return (int)(c % (unsigned)states);
}

/* the choice c of fit_planned on g's candidates; with 3 states, the last bit of c: every other value
 * computed again (what the candidates are computed from) at each use too */
static void set_choice(Graph *g, const int *cand, int n, unsigned c, int states)
{
	if (states == 3) {
		for (int v = 0; v < g->nv; v++)
			g->each[v] = c & 1;
		c >>= 1;
	}
	for (int i = 0; i < n; i++) {
		int s = state_of(c, i, states);
		g->drop[cand[i]] = s > 0;
		g->each[cand[i]] = s == 2;
	}
}

/* Every subset of the `most` largest candidates, each planned: exact by
 * the planner's own bytes, for programs of a few candidates. With up to
 * CKPT_FIT_EACH of them, each value not kept is also computed again either
 * once or at each use, and the values they are computed from once or at
 * each use (a value read before a loop and after it, at each use, is not
 * held across the loop). */
int ckpt_fit_states(const Program *p, int n)
{
	int64_t choices = 2;
	for (int i = 0; i < n; i++)
		choices *= 3;
	/* as many values planned in all as exhaustive_most allows two states */
	return n <= CKPT_FIT_EACH && choices * p->values.len <= ((int64_t)1 << 25) ? 3 : 2;
}

static int64_t fit_planned(Graph *g, int64_t budget, int64_t (*plan)(Program *), int most)
{
	Program *p = g->p;
	int cand[GRAPH_EXHAUSTIVE];
	int n = ckpt_graph_largest(p, cand, most), states = ckpt_fit_states(p, n);
	unsigned best = 0, choices = states == 3 ? 2 : 1;
	for (int i = 0; i < n; i++)
		choices *= (unsigned)states;
	Choice top = {INT64_MAX, INT64_MAX, false};
	/* nothing else computed again or offloaded: a model's choice may have been tried before */
	for (int v = 0; v < g->nv; v++)
		g->drop[v] = g->keep[v] = g->each[v] = g->host[v] = false;
	for (unsigned c = 0; c < choices; c++) {
		set_choice(g, cand, n, c, states);
		Choice ch;
		ch.bytes = eval(g, plan, &ch.flops);
		ch.fits = ch.bytes <= budget;
		if (better(ch, top))
			top = ch, best = c;
	}
	set_choice(g, cand, n, best, states);
	p->graph_search = 1;
	p->graph_chain_only = false;
	p->graph_bound = top.flops;
	p->graph_candidates = n;
	apply(g);
	return cost(g);
}

/* ---- the cost model (select.h) ---- */

/* the least search's rounds of iterated descent on the model */
#define GRAPH_KICKS 200
/* the moves of the least search's threshold accepting */
#define GRAPH_ANNEAL 50000
/* The walks (threshold accepting, kicks) take all their moves on problems
 * of up to GRAPH_WALK_SIZE values and positions (every sample's and test's
 * graph: up to 1,199), fewer in proportion beyond: each move evaluates the
 * whole problem, and on the straight line of torchvision's ResNet-152
 * imported with its loops (3,060) the least's walks took 10.4 s of its
 * 27 s to lower the plan taken by 2.8 KB (issue 62, item 4). Beyond, the
 * least search's threshold accepting is not run at all: cut short, it took
 * 0.14 s of that import's 2.3 s at min-memory and lowered nothing the plan
 * kept (without it the plan is 1,280 bytes lower and recomputes 0.02 of a
 * forward less; the hand-written Inception-v3's and the imports' other
 * loops' are the same, 2026-12-05). The kicks stay, a twentieth of their
 * rounds beyond as on graphs of over GRAPH_SWEEP candidates, then fewer in
 * proportion: on the hand-written Inception-v3 (453 candidates) their 2
 * rounds a walk lowered its least by 10 MB in 0.03 s; on the straight line
 * of ResNet-152 imported with its loops (113 candidates), 78 rounds a walk
 * took 0.2 s of its 1.9 s at min-memory and lowered its least by 512 bytes
 * of 820 MB, 3 rounds by nothing (its plans at 821 MB to 1 GB 0 or 512
 * bytes higher, recomputing as much or less, 2026-12-05). */
enum { GRAPH_WALK_SIZE = 1200 };

/* P's size, noted in walks_cut where a search is cut on it */
static int64_t walk_size(const SelProblem *P, bool cut)
{
	int64_t size = (int64_t)P->n + P->npos;
	if (cut && size > walks_cut)
		walks_cut = size;
	return size;
}

static int64_t walk_moves(const SelProblem *P, int64_t most)
{
	int64_t size = walk_size(P, false);
	if (size <= GRAPH_WALK_SIZE || !most)
		return most;
	return most * GRAPH_WALK_SIZE / walk_size(P, true);
}

typedef struct {
	SelProblem *P;
	int *of;   /* per program value: its problem value (views: their root's), or -1 */
	int *val;  /* per problem value: the program value */
	int64_t work;  /* the exact search's limit: SEL_WORK, 0 once it ran out on this model */
	int ncand;     /* the candidates */
	int first_op;  /* the first problem value an op makes (those before: parameters, inputs, the loops' stand-in) */
	int64_t fixed; /* the plan's fixed regions (parameters, gradients, optimizer state, inputs) */
	bool small;    /* up to GRAPH_SWEEP candidates: searches that plan many times are affordable */
	bool descent;  /* up to GRAPH_DESCENT candidates: a search that plans once per value is affordable */
} Model;

static void note_use(Model *m, int v, int at, int nforward)
{
	int u = m->of[v];
	if (u < 0)
		return;
	SelProblem *P = m->P;
	if (at < nforward) {
		P->fwd_last[u] = at > P->fwd_last[u] ? at : P->fwd_last[u];
	} else {
		if (P->adj_first[u] < 0 || at < P->adj_first[u])
			P->adj_first[u] = at;
		P->adj_last[u] = at > P->adj_last[u] ? at : P->adj_last[u];
		/* positions come in order: each once */
		int n = P->nadj[u];
		if (!n || P->adj[u][n - 1] != at) {
			/* full at 0, 1, 2, 4, ...: doubled */
			if (!(n & (n - 1)))
				P->adj[u] = ar_realloc(P->adj[u], sizeof(int) * (size_t)n, sizeof(int) * (size_t)(n ? 2 * n : 1));
			P->adj[u][P->nadj[u]++] = at;
		}
	}
}

static void note_block(Model *m, Block *b, int at, int nforward)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			note_use(m, op->in[k], at, nforward);
		for (int k = 0; k < op->ncarry; k++) {
			note_use(m, op->carg[k], at, nforward);
			if (op->cyield)
				note_use(m, op->cyield[k], at, nforward);
			if (op->body3.len)
				note_use(m, op->cyield3[k], at, nforward);
		}
		note_block(m, &op->body, at, nforward);
		note_block(m, &op->body2, at, nforward);
		note_block(m, &op->body3, at, nforward);
	}
}

/* where u's storage is last named in a plan that keeps what the adjoint reads: its last use, the step's end for a
 * result */
static int fixed_end(Model *m, Program *p, int u)
{
	SelProblem *P = m->P;
	int end = P->adj_last[u] > P->fwd_last[u] ? P->adj_last[u] : P->fwd_last[u];
	end = end > P->def[u] ? end : P->def[u];
	return ir_is_result(p, m->val[u]) ? p->body.len - 1 : end;
}

/* operand k of op may give op's result its storage, as memplan's in_place
 * lets it where it dies there: an elementwise op, an operand of the
 * result's type that no other operand shares storage with (but itself),
 * not a constant, a parameter or an input; its problem value, or -1 */
static int lender(Model *m, Program *p, Op *op, int k, int first_op)
{
	int x = op->in[k], u = m->of[x];
	if (!ir_may_lend(op, k) || op->out < 0 || ir_is_result(p, op->out) || u < first_op)
		return -1;
	Op *d = p->values.data[m->val[u]].def;
	/* a loop's result may share its state's storage (memplan's coalesce): not counted on */
	if (!d || d->kind == OP_CONST || ir_is_loop(d) ||
	    !ir_type_eq(ir_vtype(p, x), ir_vtype(p, op->out)))
		return -1;
	for (int j = 0; j < op->nin; j++)
		if (j != k && m->of[op->in[j]] == u && op->in[j] != x)
			return -1;
	return u;
}

/* The memory plan's elementwise results in their dying operands' storage
 * (select.h): each value's operands that may give it theirs (a copy's,
 * where the operand's copy is transient); at each position the op's own
 * result, and the first operand that may give it storage: a fixed value
 * that dies there is taken from the base at once; a value the choice
 * decides is P->lend. */
static void in_place(Model *m, Program *p, int nv, int first_op)
{
	SelProblem *P = m->P;
	for (int u = first_op; u < P->n; u++) {
		Op *d = p->values.data[m->val[u]].def;
		for (int k = 0; P->kind[u] != SEL_FIXED && d && k < d->nin && k < 32; k++)
			if (lender(m, p, d, k, first_op) >= 0)
				P->share[u] |= 1u << k;
	}
	for (int t = 0; t < P->npos; t++) {
		Op *op = p->body.ops[t];
		int y = op->out >= 0 && op->out < nv ? m->of[op->out] : -1;
		if (y < 0 || m->val[y] != op->out)
			continue;
		P->own[t] = P->bytes[y];
		for (int k = 0; k < op->nin; k++) {
			int u = lender(m, p, op, k, first_op);
			if (u < 0)
				continue;
			if (P->kind[u] != SEL_FIXED) {
				P->lend[t] = u, P->lend_bytes[t] = P->bytes[y];
				break;
			}
			if (fixed_end(m, p, u) == t) {
				P->base[t] -= P->bytes[y];
				P->own[t] -= P->bytes[y];
				break;
			}
		}
	}
}

/* the top-level positions of the first and last op naming each of the
 * adjoint's accumulators (a loop's carried adjoint): variables the plan
 * packs, live between the two whatever the choice */
static void acc_spans(Program *p, Block *b, int at, int *first, int *last)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k <= op->nin; k++) {
			int v = k < op->nin ? op->in[k] : op->out;
			if (v < 0 || p->values.data[v].kind != VK_VAR || p->values.data[v].vclass != VC_ACC)
				continue;
			first[v] = first[v] < 0 ? at : first[v];
			last[v] = at;
		}
		acc_spans(p, &op->body, at, first, last);
		acc_spans(p, &op->body2, at, first, last);
		acc_spans(p, &op->body3, at, first, last);
	}
}

/* The problem of straight-line code: each top-level op is a position; the
 * forward values are candidates (cand[]), temporaries a recomputation may
 * need, or fixed; views are their roots; the rest of the top level's
 * values are the base, each live from its definition to its last use. */
static Model build(Graph *g, const int *cand, int ncand)
{
	Program *p = g->p;
	int nv = g->nv, len = p->body.len;
	Model m = {0};
	m.of = ar_alloc(sizeof(int) * (size_t)(nv + 1));
	m.val = ar_alloc(sizeof(int) * (size_t)(nv + 1));
	bool *is_cand = ar_alloc((size_t)nv + 1);
	for (int i = 0; i < ncand; i++)
		is_cand[cand[i]] = true;
	for (int v = 0; v < nv; v++)
		m.of[v] = -1;
	/* problem values in program order: one for whatever the model does not place (a loop's results, read
	 * where they are: fixed), parameters and inputs (fixed), then the top level's results */
	int n = 1;
	m.val[0] = -1;
	for (int v = 0; v < nv; v++) {
		Op *d = p->values.data[v].def;
		if (d && (d->kind == OP_PARAM || d->kind == OP_INPUT))
			m.val[n] = v, m.of[v] = n++;
	}
	int first_op = n;
	for (int i = 0; i < len; i++) {
		Op *op = p->body.ops[i];
		int v = op->out;
		/* a loop's results: fixed, from the loop on */
		for (int k = 0; (ir_is_loop(op)) && op->cout && k < op->ncarry; k++) {
			int c = op->cout[k];
			if (c >= 0 && c < nv && p->values.data[c].kind == VK_SSA && m.of[c] < 0)
				m.val[n] = c, m.of[c] = n++;
		}
		if (v < 0 || v >= nv || p->values.data[v].kind != VK_SSA || m.of[v] >= 0)
			continue;
		if (is_view(op) && m.of[op->in[0]] >= 0) {
			m.of[v] = m.of[op->in[0]];
			continue;
		}
		m.val[n] = v, m.of[v] = n++;
	}
	SelProblem *P = sel_new(n, len);
	P->threads = p->search_threads;
	m.P = P;
	m.first_op = first_op;
	memcpy(P->issue, g->issue, sizeof(int) * (size_t)len);
	int *adj_def = ar_alloc(sizeof(int) * (size_t)(nv + 1));
	for (int i = 0; i < len; i++) {
		Op *op = p->body.ops[i];
		if (i >= p->nforward && op->out >= 0 && op->out < nv)
			adj_def[op->out] = i;
		for (int k = 0; (ir_is_loop(op)) && op->cout && k < op->ncarry; k++)
			if (op->cout[k] >= 0 && op->cout[k] < nv)
				adj_def[op->cout[k]] = i;
	}
	for (int u = 0; u < n; u++) {
		int v = m.val[u];
		P->fwd_last[u] = -1;
		if (v < 0) {
			P->kind[u] = SEL_FIXED;
			continue;
		}
		Op *d = p->values.data[v].def;
		P->def[u] = u < first_op ? 0 : g->pos[v] >= 0 ? g->pos[v] : -1;
		if (P->def[u] > 0 && ir_attn_lse_fused(&p->body, P->def[u]))
			P->def[u]--; /* written by the attention before it, and live from there, as the memory plan has it */
		P->bytes[u] = mem_aligned(p, p->values.data[v].type);
		if (u < first_op) {
			P->kind[u] = SEL_FIXED;
			continue;
		}
		if (P->def[u] < 0)
			P->def[u] = adj_def[v];
		/* a forward workspace is a temporary too: a recomputed convolution makes its own (free, each time) */
		P->kind[u] = is_cand[v] ? SEL_CAND
		             : g->pos[v] >= 0 && !g->read[v] && (ckpt_pure(p, d) || d->kind == OP_SCRATCH) && !ir_is_result(p, v)
		                 ? SEL_TEMP
		                 : SEL_FIXED;
		/* offloaded where priced: down once and up once */
		if (P->kind[u] == SEL_CAND)
			P->host[u] = 2 * p->offload_cost * ir_bytes(p, p->values.data[v].type);
		if (P->kind[u] != SEL_FIXED) {
			P->flops[u] = ir_op_flops(p, d);
			P->nin[u] = d->nin;
			P->in[u] = ar_alloc(sizeof(int) * (size_t)(d->nin + 1));
			for (int k = 0; k < d->nin; k++) {
				int w = m.of[d->in[k]];
				P->in[u][k] = w < 0 ? 0 : w;
			}
		}
	}
	for (int i = 0; i < len; i++) {
		Block one = {p->body.ops + i, 1, 0};
		note_block(&m, &one, i, p->nforward);
	}
	/* the fixed values and the adjoint's are the base, each from its definition to its last use, and the
	 * adjoint's accumulators from the first op naming one to the last */
	int64_t *diff = ar_alloc(sizeof(int64_t) * (size_t)(len + 2));
	for (int u = first_op; u < n; u++) {
		if (P->kind[u] != SEL_FIXED)
			continue;
		int end = fixed_end(&m, p, u);
		diff[P->def[u]] += P->bytes[u];
		diff[end + 1] -= P->bytes[u];
	}
	int *first = ar_alloc(sizeof(int) * (size_t)(nv + 1)), *last = ar_alloc(sizeof(int) * (size_t)(nv + 1));
	for (int v = 0; v < nv; v++)
		first[v] = last[v] = -1;
	for (int i = 0; i < len; i++)
		acc_spans(p, &(Block){p->body.ops + i, 1, 0}, i, first, last);
	for (int v = 0; v < nv; v++)
		if (first[v] >= 0) {
			diff[first[v]] += mem_aligned(p, p->values.data[v].type);
			diff[last[v] + 1] -= mem_aligned(p, p->values.data[v].type);
		}
	/* a revolve's snapshots, held whatever the choice (as the memory plan holds them) */
	for (int i = 0; i < len; i++)
		for (int k = 0; p->body.ops[i]->kind == OP_REVOLVE && k < p->body.ops[i]->ncarry; k++) {
			int64_t b = mem_aligned(p, p->values.data[p->body.ops[i]->snap[k]].type);
			diff[rev_op_held_from(p->body.ops, len, i)] += b;
			diff[i + 1] -= b;
		}
	int64_t run = 0;
	for (int t = 0; t < len; t++)
		P->base[t] = run += diff[t];
	for (int u = first_op; u < n; u++)
		if (P->kind[u] != SEL_FIXED && P->fwd_last[u] < P->def[u])
			P->fwd_last[u] = P->def[u];
	in_place(&m, p, nv, first_op);
	return m;
}

/* the program's choice: g->drop, g->keep and g->each from the problem's */
static void choose(Graph *g, Model *m, const uint8_t *keep)
{
	for (int v = 0; v < g->nv; v++) {
		g->drop[v] = g->keep[v] = g->each[v] = g->host[v] = false;
		g->hold[v] = -1;
	}
	for (int u = 0; u < m->P->n; u++) {
		if (m->P->kind[u] == SEL_CAND && keep[u] != SEL_KEEP)
			g->drop[m->val[u]] = true;
		if (m->P->kind[u] == SEL_CAND && keep[u] == SEL_HOST)
			g->host[m->val[u]] = true;
		if (m->P->kind[u] == SEL_TEMP && keep[u] == SEL_KEEP)
			g->keep[m->val[u]] = true;
		if (m->P->kind[u] != SEL_FIXED && keep[u] == SEL_EACH)
			g->each[m->val[u]] = true;
	}
}

/* the model, its base raised by the planner's bytes beyond the model's at store-everything */
static Model calibrated(Graph *g, const int *cand, int n, int64_t (*plan)(Program *))
{
	Model m = build(g, cand, n);
	SelProblem *P = m.P;
	uint8_t *keep = ar_alloc((size_t)P->n + 1);
	for (int u = 0; u < P->n; u++)
		keep[u] = P->kind[u] == SEL_CAND ? SEL_KEEP : SEL_ONCE;
	/* a loop's insides at its position: the model places its results, not the values of its body */
	Program *p = g->p;
	p->inner_live = ar_alloc(sizeof(int64_t) * (size_t)(p->body.len + 1));
	int64_t f, total = plan(p), fixed = total - p->plan_work, live = p->plan_live;
	for (int t = 0; t < P->npos; t++)
		P->base[t] += p->inner_live[t];
	p->inner_live = NULL;
	/* the fixed regions, and the bytes the plan's tensors hold at store-everything beyond the model's where
	 * there are any; not the packing's gaps, which differ from choice to choice */
	int64_t model = sel_eval(P, keep, &f, NULL), calib = fixed + (live > model ? live - model : 0);
	m.fixed = fixed;
	for (int t = 0; t < P->npos; t++)
		P->base[t] += calib;
	m.work = SEL_WORK;
	m.ncand = n;
	m.small = n <= GRAPH_SWEEP;
	m.descent = n <= GRAPH_DESCENT;
	return m;
}

/* the model's peak of a choice beside the plan's: the tensors' bytes live at
 * once, and the packed plan (Program.model_*) */
static void note_model(Program *p, int64_t model, int64_t packed)
{
	int64_t live = packed - p->plan_work + p->plan_live;
	double over_live = (double)(model - live) / (double)live, over_plan = (double)(model - packed) / (double)packed;
	if (!p->model_choices++) {
		p->model_live[0] = p->model_live[1] = over_live;
		p->model_plan[0] = p->model_plan[1] = over_plan;
	}
	p->model_live[0] = over_live < p->model_live[0] ? over_live : p->model_live[0];
	p->model_live[1] = over_live > p->model_live[1] ? over_live : p->model_live[1];
	p->model_plan[0] = over_plan < p->model_plan[0] ? over_plan : p->model_plan[0];
	p->model_plan[1] = over_plan > p->model_plan[1] ? over_plan : p->model_plan[1];
}

/* the planner's bytes of the model's choice keep[], and its FLOPs in *flops */
static int64_t planned(Graph *g, Model *m, const uint8_t *keep, int64_t (*plan)(Program *), int64_t *flops)
{
	choose(g, m, keep);
	int64_t bytes = eval(g, plan, flops), f;
	note_model(g->p, sel_eval(m->P, keep, &f, NULL), bytes);
	return bytes;
}

/* A budget's fit improved where the planner allows, from keep[] (planned
 * *bytes, res->flops, fitting): on up to GRAPH_SWEEP candidates, swaps on
 * the model, each result checked by the planner (the model's fit is pushed
 * to the budget's edge, where its error shows) and the model's budget
 * `want` lowered by the excess after a rejection; on up to GRAPH_DESCENT,
 * each value computed again kept (or made once instead of each time)
 * where the planner says it still fits, since the model errs on the side
 * of too much memory; then the 8 costliest tried kept, each against every
 * kept value made again instead. */
static SelResult swaps_move(const SelProblem *P, int64_t want, uint8_t *keep) { return sel_swaps(P, want, SEL_WORK, keep); }
static SelResult refill_move(const SelProblem *P, int64_t want, uint8_t *keep) { return sel_refill(P, want, SEL_WORK, keep); }
static SelResult improve_move(const SelProblem *P, int64_t want, uint8_t *keep) { return sel_improve(P, want, keep, NULL); }
static SelResult anneal_move(const SelProblem *P, int64_t want, uint8_t *keep)
{
	return sel_anneal_fit(P, want, walk_moves(P, GRAPH_ANNEAL), 10, keep);
}

/* Up to 4 rounds of a move on the model from keep[] at the model's budget
 * `want`, each result checked by the planner: the first the planner fits
 * within budget is taken where it recomputes less than *flops (keep[],
 * *flops and *bytes become its); a rejection lowers want by the excess. A
 * move that does not fit, or saves nothing by the model, ends them. */
static void planner_rounds(Graph *g, Model *m, int64_t budget, int64_t want, int64_t (*plan)(Program *),
                           SelResult (*move)(const SelProblem *, int64_t, uint8_t *), uint8_t *keep, int64_t *flops,
                           int64_t *bytes)
{
	SelProblem *P = m->P;
	uint8_t *try = ar_alloc((size_t)P->n + 1);
	for (int round = 0; round < 4; round++) {
		memcpy(try, keep, (size_t)P->n);
		SelResult r = move(P, want, try);
		if (!r.fits || r.flops >= *flops)
			break;
		int64_t f, b = planned(g, m, try, plan, &f);
		if (b <= budget) {
			if (f < *flops) {
				*bytes = b, *flops = f;
				memcpy(keep, try, (size_t)P->n);
			}
			break;
		}
		want -= b - budget;
	}
}

static void improve_fit(Graph *g, Model *m, int64_t budget, int64_t want, int64_t (*plan)(Program *), uint8_t *keep,
                        SelResult *res, int64_t *bytes)
{
	SelProblem *P = m->P;
	int64_t flops, b;
	if (m->small) {
		planner_rounds(g, m, budget, want, plan, swaps_move, keep, &res->flops, bytes);
		planner_rounds(g, m, budget, want, plan, anneal_move, keep, &res->flops, bytes);
	}
	if (!m->descent)
		return;
	/* the states that save FLOPs over each: a value made once kept; one made each time kept, or made once; one
	 * offloaded kept */
	static const uint8_t cheaper[4][2] = {[SEL_ONCE] = {SEL_KEEP}, [SEL_EACH] = {SEL_KEEP, SEL_ONCE}, [SEL_HOST] = {SEL_KEEP}};
	static const int ncheaper[4] = {[SEL_ONCE] = 1, [SEL_EACH] = 2, [SEL_HOST] = 1};
	for (int pass = 0; pass < 2; pass++) {
		bool moved = false;
		for (int u = 0; u < P->n; u++) {
			if (P->kind[u] == SEL_FIXED || keep[u] == SEL_KEEP || !P->flops[u])
				continue;
			uint8_t was = keep[u];
			for (int k = 0; k < ncheaper[was]; k++) {
				keep[u] = cheaper[was][k];
				if ((b = planned(g, m, keep, plan, &flops)) <= budget && flops < res->flops) {
					*bytes = b, res->flops = flops, moved = true;
					break;
				}
				keep[u] = was;
			}
		}
		if (!moved)
			break;
	}
	uint8_t *tried = ar_alloc((size_t)P->n + 1);
	for (int tries = 0; tries < 8; tries++) {
		int u = -1;
		for (int x = 0; x < P->n; x++)
			if (P->kind[x] != SEL_FIXED && keep[x] != SEL_KEEP && P->flops[x] && !tried[x] &&
			    (u < 0 || P->flops[x] > P->flops[u]))
				u = x;
		if (u < 0)
			break;
		tried[u] = 1;
		uint8_t was_u = keep[u];
		keep[u] = SEL_KEEP;
		bool done = false;
		static const uint8_t again[3] = {SEL_ONCE, SEL_EACH, SEL_HOST};
		for (int v = 0; v < P->n && !done; v++) {
			if (v == u || P->kind[v] != SEL_CAND || keep[v] != SEL_KEEP)
				continue;
			for (int k = 0; k < 2 + (P->host[v] > 0) && !done; k++) {
				keep[v] = again[k];
				if ((b = planned(g, m, keep, plan, &flops)) <= budget && flops < res->flops)
					*bytes = b, res->flops = flops, done = true;
				else
					keep[v] = SEL_KEEP;
			}
		}
		if (!done)
			keep[u] = was_u;
	}
}

/* Every candidate, by the model: a choice the planner finds over the
 * budget (for a budget's fit on over GRAPH_SWEEP candidates, packed harder
 * where the quick packing is over) tightens the model's budget below that
 * choice's model peak by the excess (doubling each round) and searches
 * again, up to 8 times. A budget's fit (for_budget) is then improved where
 * the planner allows, and without a fit the least peak the search reaches
 * is taken if the planner agrees it is less (for the plan's error; not on
 * large graphs where the caller searches for the least itself: least_after);
 * otherwise the fit is a step of the least search. The choice in keep[]
 * (not applied); its planned bytes; the search and its bound in *out. */
static int64_t fit_model(Graph *g, Model *m, int64_t budget, int64_t (*plan)(Program *), uint8_t *keep, SelResult *out,
                         bool for_budget, bool least_after)
{
	SelProblem *P = m->P;
	uint8_t *try = ar_alloc((size_t)P->n + 1);
	int64_t want = budget, best_bytes = INT64_MAX;
	SelResult res = {0};
	for (int round = 0; round < 8; round++) {
		SelResult r = sel_fit(P, want, m->work, !for_budget, try);
		m->work = r.method == SEL_GREEDY ? 0 : m->work;
		int64_t flops, bytes = planned(g, m, try, plan, &flops);
		/* the model fits where the quick packing does not: a harder one (the four orders, pack_effort 1) may,
		 * and then the search need not run again (NASNet and DARTS at half their peak: the quick packing 0.4%
		 * over, the harder at the bytes live at once). Taken with its own gap above those bytes to spare: the
		 * final program's lifetimes are not quite the checkpoint pass's, and packed differently (Inception-v3
		 * at 75%: the final plan 2.9 MB above a packing 10.7 MB above its live bytes, and over the budget).
		 * Beyond GRAPH_SWEEP candidates, where a search costs most: on fewer, the rounds below found fewer
		 * FLOPs (the small Inception at 60%: 0.6%) */
		if (bytes > budget && r.fits && for_budget && !m->small && g->p->pack_effort == 0) {
			g->p->pack_effort = 1;
			int64_t f2, hard = planned(g, m, try, plan, &f2);
			g->p->pack_effort = 0;
			if (hard + g->p->plan_work - g->p->plan_live <= budget)
				bytes = hard, flops = f2;
		}
		if (round == 0)
			res = r;
		if (bytes < best_bytes || (bytes <= budget && (best_bytes > budget || flops < res.flops))) {
			best_bytes = bytes;
			memcpy(keep, try, (size_t)P->n);
			res.fits = bytes <= budget, res.flops = flops, res.method = r.method;
		}
		if (bytes <= budget || !r.fits)
			break;
		/* below the rejected choice's own model peak, by the excess, doubling each round: the model must
		 * choose differently, and a small excess that packing adds cannot stall the rounds */
		want = (r.peak < want ? r.peak : want) - ((bytes - budget) << round);
	}
	if (res.fits && for_budget)
		improve_fit(g, m, budget, want, plan, keep, &res, &best_bytes);
	/* without a fit, the least by the model's own bisection (sel_least), where the caller does not search for
	 * the least itself (least_within) on a large graph: there it was always far above the least search's, at
	 * half the compile's time (ResNet-152 imported flat at 950 MB: 5.3 s for 1,199 MB, the least search 877
	 * MB; NASNet 2.5 s for 568 MB, 329; DenseNet-121, Inception-v3 and DARTS alike) */
	if (!res.fits && for_budget && !(least_after && !m->small)) {
		int64_t floor, flops;
		SelResult r = sel_least(P, m->work, try, &floor);
		int64_t bytes = planned(g, m, try, plan, &flops);
		if (bytes < best_bytes) {
			best_bytes = bytes;
			memcpy(keep, try, (size_t)P->n);
			res.fits = bytes <= budget, res.flops = flops, res.method = r.method;
		}
	}
	/* the bound is the model's at the budget itself (the first round), and no fit found recomputes less */
	res.bound = res.bound < res.flops ? res.bound : res.flops;
	*out = res;
	return best_bytes;
}

/* applies the model's choice keep[], found by search res */
static int64_t apply_model(Graph *g, Model *m, const uint8_t *keep, SelResult res, int n)
{
	Program *p = g->p;
	choose(g, m, keep);
	p->graph_search = res.method == SEL_EXACT ? 2 : 3;
	p->graph_chain_only = false;
	p->graph_bound = res.bound;
	p->graph_candidates = n;
	p->graph_walks_cut = walks_cut;
	apply(g);
	return cost(g);
}

/* ---- nested checkpoints on chains (select.h's sel_chain) ---- */

/* the most plans chain_fit makes */
#define CHAIN_ROUNDS 8

/* the chain planner's plan at `want` taken into g (choose, then the holds); its predicted FLOPs, INT64_MAX where
 * the blocks' model fits nothing there (g then as it was) */
static int64_t choose_chain(Graph *g, Model *m, int64_t want, uint8_t *keep, int *hold)
{
	int64_t f = sel_chain(m->P, g->p->nforward, want, keep, hold);
	if (f == INT64_MAX)
		return f;
	choose(g, m, keep);
	for (int u = 0; u < m->P->n; u++)
		if (m->P->kind[u] != SEL_FIXED && keep[u] != SEL_KEEP)
			g->hold[m->val[u]] = hold[u];
	return f;
}

/* The chain plan that fits budget as planned, with the fewest FLOPs the
 * rounds find. The programme's budget `want` is searched between the
 * highest known too low (its model fits nothing there, or the plan fits:
 * more may) and the lowest known too high (the plan passes the budget):
 * lowered by a plan's excess, raised by a fit's room or by a sixteenth of
 * the budget where the model fits nothing (it errs on the side of too much
 * memory: ResNet-152's model fits nothing at 950 MB, its plan at a model's
 * 1 GB is 934 MB), then halved between. Its bytes (INT64_MAX: none fits)
 * and FLOPs; its budget in *at, for choose_chain. */
/* a chain plan chain_fit has planned: what the plan reads of it (each value's state, and where it is held from
 * where it is not kept), its bytes and FLOPs */
typedef struct {
	uint8_t *keep;
	int *hold;
	int64_t bytes, flops;
} ChainSeen;

/* the plan's reading of the chain planner's choice: a value kept has no hold position */
static void chain_key(const SelProblem *P, uint8_t *keep, int *hold)
{
	for (int u = 0; u < P->n; u++)
		if (P->kind[u] == SEL_FIXED || keep[u] == SEL_KEEP)
			keep[u] = P->kind[u] == SEL_FIXED ? 0 : keep[u], hold[u] = 0;
}

static int64_t chain_fit(Graph *g, Model *m, int64_t budget, int64_t (*plan)(Program *), int64_t *flops, int64_t *at)
{
	SelProblem *P = m->P;
	uint8_t *keep = ar_alloc((size_t)P->n + 1);
	int *hold = ar_alloc(sizeof(int) * (size_t)(P->n + 1));
	int64_t want = budget, lo = -1, hi = INT64_MAX, best = INT64_MAX;
	/* the programme's plan is a step in its budget: rounds often choose one planned before (DenseNet-201
	 * imported at Feng & Huang's cut + 1: 4 of 8, each a plan of 20,799 values), which is not planned again */
	ChainSeen seen[CHAIN_ROUNDS];
	int nseen = 0;
	*flops = INT64_MAX;
	for (int round = 0; round < CHAIN_ROUNDS; round++) {
		int64_t f = INT64_MAX, bytes = INT64_MAX, next;
		bool none = choose_chain(g, m, want, keep, hold) == INT64_MAX;
		if (!none) {
			chain_key(P, keep, hold);
			int s = 0;
			while (s < nseen && (memcmp(seen[s].keep, keep, (size_t)P->n) ||
			                     memcmp(seen[s].hold, hold, sizeof(int) * (size_t)P->n)))
				s++;
			if (s < nseen) {
				bytes = seen[s].bytes, f = seen[s].flops;
			} else {
				bytes = eval(g, plan, &f);
				seen[nseen] = (ChainSeen){ar_alloc((size_t)P->n + 1), ar_alloc(sizeof(int) * (size_t)(P->n + 1)), bytes, f};
				memcpy(seen[nseen].keep, keep, (size_t)P->n);
				memcpy(seen[nseen++].hold, hold, sizeof(int) * (size_t)P->n);
			}
		}
		if (bytes <= budget && f < *flops)
			*flops = f, best = bytes, *at = want;
		if (none || bytes <= budget)
			lo = want;
		else
			hi = want;
		if (hi < INT64_MAX && lo >= 0)
			next = lo + (hi - lo) / 2;
		else if (none)
			next = want + budget / 16;
		else if (bytes > budget)
			next = want - (bytes - budget);
		else
			next = want + (budget - bytes);
		if (next == want || next <= 0 || (hi < INT64_MAX && hi - lo <= budget / 1024))
			break;
		want = next;
	}
	trace("fit: chain", best, *flops);
	return best;
}

/* The chain planner's least: the least budget its blocks' model fits with a
 * block held bare where nothing else fits (sel_chain_least, from its
 * programme at a quarter above `near`, the selection's least: the model errs
 * high, DenseNet-201 imported's least chain plan, at a model's 499.6 MB, is
 * 422.1 MB as planned), and the plan there (a 1,024th of `near` higher
 * where the model's rounding leaves nothing there, up to twice), not
 * planned where the programme's FLOPs there are cap or more (planning a
 * plan that recomputes hundreds of forwards takes seconds). Its bytes
 * (INT64_MAX: none), FLOPs, and its budget in *at, for choose_chain. */
static int64_t chain_least(Graph *g, Model *m, int64_t near, int64_t cap, int64_t (*plan)(Program *), int64_t *flops,
                           int64_t *at)
{
	SelProblem *P = m->P;
	uint8_t *keep = ar_alloc((size_t)P->n + 1);
	int *hold = ar_alloc(sizeof(int) * (size_t)(P->n + 1));
	int64_t least_flops, top = near + near / 4, want = sel_chain_least(P, g->p->nforward, top, &least_flops);
	int64_t bytes = INT64_MAX;
	*flops = INT64_MAX;
	if (want == INT64_MAX || least_flops >= cap)
		return INT64_MAX;
	for (int round = 0; round < 3 && want <= top; round++, want += near / 1024 + 1) {
		int64_t f = choose_chain(g, m, want, keep, hold);
		if (f < cap)
			bytes = eval(g, plan, flops), *at = want;
		if (f < INT64_MAX)
			break;
	}
	trace("least: chain least", bytes, *flops);
	return bytes;
}

/* Whether the chain planner is worth its plans (8 at most, each of the
 * whole program): not with loops, where the straight line is what lies
 * between them (ResNet-152 imported: the stem, each stage's first block,
 * the head), and the loops hold the chain. There it found nothing in the 9
 * fits of ResNet-152 imported at Feng & Huang's cut + 1 and min-memory,
 * 0.2 s each (2026-12-04). */
static bool chain_worth(const Program *p)
{
	return !ir_has_loops(p);
}

/* A chain plan that fits a large graph's budget recomputing at most 1 / CKPT_CHAIN_ENOUGH of a forward's FLOPs
 * is taken without the selection's fit searched after it. On torchvision's exports at Feng & Huang's cut
 * + 1 the chain plan was taken over the fit's wherever it recomputed that little (DenseNet-121: 0.025 of a
 * forward, DenseNet-201 0.06, against the fit's 0.027 and 0.19), and the fit took 1.1 and 3.5 s of 1.9 and 5.8
 * (2026-12-05) */
static bool chain_enough(Program *p, int64_t budget, int64_t bytes, int64_t flops)
{
	return bytes <= budget && flops <= ir_block_flops(p, &p->body, 0, p->nforward) / CKPT_CHAIN_ENOUGH;
}

/* applies the chain planner's plan at `at` (chain_fit's); `only`: the selection's fit was not searched */
static int64_t apply_chain(Graph *g, Model *m, int64_t at, int64_t bound, int n, bool only)
{
	Program *p = g->p;
	uint8_t *keep = ar_alloc((size_t)m->P->n + 1);
	int *hold = ar_alloc(sizeof(int) * (size_t)(m->P->n + 1));
	if (choose_chain(g, m, at, keep, hold) == INT64_MAX)
		die("the chain plan at %lld bytes is gone", (long long)at);
	p->graph_search = 4;
	p->graph_chain_only = only;
	p->graph_bound = bound;
	p->graph_candidates = n;
	p->graph_walks_cut = walks_cut;
	apply(g);
	return cost(g);
}

/* A descent checked by the planner: each candidate's state changed where that lowers the planned
 * peak (*hi), or keeps it at fewer FLOPs (*flops), for up to two passes; keep[] becomes its end */
static void planner_descent(Graph *g, Model *m, int64_t (*plan)(Program *), uint8_t *keep, int64_t *hi, int64_t *flops)
{
	for (int pass = 0; pass < 2; pass++) {
		bool moved = false;
		for (int u = 0; u < m->P->n; u++) {
			if (m->P->kind[u] != SEL_CAND)
				continue;
			uint8_t was = keep[u], to = was;
			for (uint8_t st = SEL_ONCE; st <= SEL_HOST; st++) {
				if (st == was || (st == SEL_HOST && !m->P->host[u]))
					continue;
				keep[u] = st;
				int64_t f2, b2 = planned(g, m, keep, plan, &f2);
				if (b2 < *hi || (b2 == *hi && f2 < *flops))
					*hi = b2, *flops = f2, to = st;
			}
			keep[u] = to;
			moved |= to != was;
		}
		if (!moved)
			break;
	}
}

/* ---- the problem for bench/milp.py ----
 * Under DPC_SELECT_DUMP=FILE the least search writes its problem as JSON:
 * each value the choice decides (its bytes, FLOPs, operands among them,
 * definition, last forward use, adjoint uses), and per position what no
 * choice changes: the fixed values held across its op (not its operands
 * or result), that op's working set (each operand and its result once, an
 * elementwise result not where an operand could give it storage), the
 * fixed values held into the position (made before it, read there or
 * later: there while its copies are made), and the values its op names. bench/milp.py states the relaxation on it. */

static int named(Model *m, Program *p, Op *op, int *out)
{
	int n = 0, cand[66], nc = 0;
	for (int k = 0; k < op->nin && nc < 64; k++)
		cand[nc++] = op->in[k];
	cand[nc++] = op->out;
	for (int k = 0; k < nc; k++) {
		int u = cand[k] >= 0 && cand[k] < p->values.len && m->of[cand[k]] >= 0 ? m->of[cand[k]] : -1;
		if (u < m->first_op)
			continue;
		int j = 0;
		while (j < n && out[j] != u)
			j++;
		if (j == n)
			out[n++] = u;
	}
	return n;
}

static void dump_problem(Graph *g, Model *m, const char *path)
{
	Program *p = g->p;
	SelProblem *P = m->P;
	FILE *f = fopen(path, "w");
	if (!f)
		fatal("cannot write %s (DPC_SELECT_DUMP)", path);
	bool loops = false;
	for (int t = 0; t < P->npos; t++)
		loops |= ir_is_loop(p->body.ops[t]);
	fprintf(f, "{\"npos\": %d, \"nforward\": %d, \"fixed\": %lld, \"loops\": %s,\n\"positions\": [\n", P->npos,
	        p->nforward, (long long)m->fixed, loops ? "true" : "false");
	/* held: across the op (made before it, read after it); into: from before the position to its op */
	int64_t *held = ar_alloc(sizeof(int64_t) * (size_t)(P->npos + 2)), *into = ar_alloc(sizeof(int64_t) * (size_t)(P->npos + 2));
	for (int u = m->first_op; u < P->n; u++)
		if (P->kind[u] == SEL_FIXED && P->bytes[u]) {
			int e = fixed_end(m, p, u);
			if (e > P->def[u] + 1)
				held[P->def[u] + 1] += P->bytes[u], held[e] -= P->bytes[u];
			if (e > P->def[u])
				into[P->def[u] + 1] += P->bytes[u], into[e + 1] -= P->bytes[u];
		}
	int64_t run = 0, run_into = 0;
	int ids[66];
	for (int t = 0; t < P->npos; t++) {
		Op *op = p->body.ops[t];
		run += held[t];
		run_into += into[t];
		int n = named(m, p, op, ids), y = op->out >= 0 && op->out < g->nv ? m->of[op->out] : -1;
		int64_t h = run, ws = 0;
		bool shared = false;
		for (int k = 0; k < op->nin && op->out >= 0; k++)
			shared |= ir_may_lend(op, k) && m->of[op->in[k]] >= m->first_op && ir_type_eq(ir_vtype(p, op->in[k]), ir_vtype(p, op->out));
		fprintf(f, "{\"op\": \"%s\", \"named\": [", ir_ops[op->kind].name);
		for (int k = 0; k < n; k++) {
			int u = ids[k];
			bool across = P->kind[u] == SEL_FIXED && P->def[u] < t && fixed_end(m, p, u) > t;
			h -= across ? P->bytes[u] : 0;
			ws += u == y && shared && m->val[u] == op->out ? 0 : P->bytes[u];
			fprintf(f, "%s%d", k ? ", " : "", u);
		}
		fprintf(f, "], \"held\": %lld, \"ws\": %lld, \"into\": %lld}%s\n", (long long)h, (long long)ws, (long long)run_into,
		        t + 1 < P->npos ? "," : "");
	}
	fprintf(f, "],\n\"values\": [\n");
	bool first = true;
	for (int u = 0; u < P->n; u++) {
		if (P->kind[u] == SEL_FIXED)
			continue;
		fprintf(f, "%s{\"id\": %d, \"name\": \"%s\", \"kind\": \"%s\", \"bytes\": %lld, \"flops\": %lld, \"def\": %d, "
		        "\"fwd_last\": %d, \"in\": [", first ? "" : ",\n", u, ir_value_name(p, m->val[u]),
		        P->kind[u] == SEL_CAND ? "cand" : "temp", (long long)P->bytes[u], (long long)P->flops[u], P->def[u],
		        P->fwd_last[u]);
		first = false;
		for (int k = 0, c = 0; k < P->nin[u]; k++)
			if (P->kind[P->in[u][k]] != SEL_FIXED)
				fprintf(f, "%s%d", c++ ? ", " : "", P->in[u][k]);
		fprintf(f, "], \"share\": [");
		for (int k = 0, c = 0; k < P->nin[u]; k++)
			if (P->kind[P->in[u][k]] != SEL_FIXED && k < 32 && (P->share[u] >> k & 1))
				fprintf(f, "%s%d", c++ ? ", " : "", P->in[u][k]);
		fprintf(f, "], \"adj\": [");
		int two[2] = {P->adj_first[u], P->adj_last[u]}, na = P->nadj[u] ? P->nadj[u] : P->adj_first[u] < 0 ? 0 : two[0] == two[1] ? 1 : 2;
		const int *a = P->nadj[u] ? P->adj[u] : two;
		for (int k = 0; k < na; k++)
			fprintf(f, "%s%d", k ? ", " : "", a[k]);
		fprintf(f, "]}");
	}
	fprintf(f, "\n]}\n");
	if (fclose(f))
		fatal("cannot write %s (DPC_SELECT_DUMP)", path);
}

/* Under DPC_SELECT_CHOICE=FILE the least search's choice is replaced by
 * FILE's: lines "ID STATE", an id as DPC_SELECT_DUMP writes it and a state
 * of select.h (0 once, 1 keep, 2 each); a value not named keeps its state.
 * For bench/milp.py, which plans the MILP's choice with it. */
static int64_t read_choice(Model *m, const char *path, uint8_t *keep, SelResult *res)
{
	FILE *f = fopen(path, "r");
	if (!f)
		fatal("cannot read %s (DPC_SELECT_CHOICE)", path);
	int u, st;
	while (fscanf(f, "%d %d", &u, &st) == 2) {
		if (u < 0 || u >= m->P->n || m->P->kind[u] == SEL_FIXED || st < SEL_ONCE || st > SEL_EACH)
			fatal("%s: no value %d to take state %d (DPC_SELECT_CHOICE)", path, u, st);
		keep[u] = (uint8_t)st;
	}
	fclose(f);
	res->peak = sel_eval(m->P, keep, &res->flops, NULL);
	res->method = SEL_GREEDY;
	return 0;
}

/* beside DPC_SELECT_DUMP's FILE, FILE.choice: the least search's choice as DPC_SELECT_CHOICE reads it */
static void write_choice(Model *m, const char *path, const uint8_t *keep)
{
	const char *name = ar_printf("%s.choice", path);
	FILE *f = fopen(name, "w");
	if (!f)
		fatal("cannot write %s (DPC_SELECT_DUMP)", name);
	for (int u = 0; u < m->P->n; u++)
		if (m->P->kind[u] != SEL_FIXED)
			fprintf(f, "%d %d\n", u, keep[u]);
	if (fclose(f))
		fatal("cannot write %s (DPC_SELECT_DUMP)", name);
}

/* Iterated descents on the model from start[] (best[], planned *hi bytes,
 * *flops): each round changes a few values' states at random (a fixed
 * seed: the same plan on every run) and descends; its end is taken where
 * the model's peak is lower, or the same at fewer FLOPs (on a plateau walk,
 * the same at any FLOPs), and each choice lower by the model is planned,
 * the planner's least kept in best[]. A descent alone stops where lowering
 * the peak needs several values to change at once. */
static void iterated_descent(Graph *g, Model *m, int64_t (*plan)(Program *), const uint8_t *start, bool plateau,
                             uint8_t *best, int64_t *hi, int64_t *flops)
{
	SelProblem *P = m->P;
	int *dec = ar_alloc(sizeof(int) * (size_t)(P->n + 1)), nd = 0;
	for (int u = 0; u < P->n; u++)
		if (P->kind[u] != SEL_FIXED && P->flops[u])
			dec[nd++] = u;
	if (!nd)
		return;
	uint8_t *cur = ar_alloc((size_t)P->n + 1), *try = ar_alloc((size_t)P->n + 1);
	memcpy(cur, start, (size_t)P->n);
	int64_t f, peak = sel_eval(P, cur, &f, NULL);
	uint64_t seed = 0x2545f4914f6cdd1dull;
	/* all their rounds on up to GRAPH_SWEEP candidates and GRAPH_WALK_SIZE values and positions; else on up to
	 * twice GRAPH_SWEEP candidates, a few rounds (Inception-v3: 453 candidates, 10 rounds a walk, its least 933
	 * to 845 MB in 0.3 s), fewer in proportion past GRAPH_WALK_SIZE; beyond, none (DenseNet-201: 0.5 s for
	 * nothing) */
	bool whole = m->small && walk_size(P, false) <= GRAPH_WALK_SIZE;
	int rounds = (int)walk_moves(P, whole ? GRAPH_KICKS : m->ncand <= 2 * GRAPH_SWEEP ? GRAPH_KICKS / 20 : 0);
	for (int round = 0; round < rounds; round++) {
		memcpy(try, cur, (size_t)P->n);
		for (int k = 0, n = 2 + (int)(seed % 4); k < n; k++) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			int u = dec[seed % (uint64_t)nd];
			int states = P->kind[u] == SEL_CAND && P->host[u] ? 4 : 3;
			try[u] = (uint8_t)((seed >> 32) % (uint64_t)states);
		}
		SelResult r = sel_lower(P, 4, try);
		if (r.peak > peak || (!plateau && r.peak == peak && r.flops >= f))
			continue;
		bool lower = r.peak < peak || r.flops < f;
		peak = r.peak, f = r.flops;
		memcpy(cur, try, (size_t)P->n);
		if (!lower)
			continue;
		int64_t f2, b = planned(g, m, cur, plan, &f2);
		if (b < *hi || (b == *hi && f2 < *flops)) {
			*hi = b, *flops = f2;
			memcpy(best, cur, (size_t)P->n);
		}
	}
}

/* keep[] planned, and made the least in best[] (*hi bytes, *flops) where it is lower, or as low at fewer FLOPs */
static void take_planned(Graph *g, Model *m, int64_t (*plan)(Program *), const uint8_t *keep, uint8_t *best, int64_t *hi,
                         int64_t *flops)
{
	int64_t f, b = planned(g, m, keep, plan, &f);
	if (b < *hi || (b == *hi && f < *flops)) {
		*hi = b, *flops = f;
		memcpy(best, keep, (size_t)m->P->n);
	}
}

/* one start of sel_chain_start's evaluated: its peak and FLOPs; a peak over `limit` (0: none) only where the
 * walk would not take it, laid out only until that shows (sel_eval_below) */
typedef struct {
	const SelProblem *P;
	bool tiny;
	int every, inner;
	int64_t limit, peak, flops;
} Start;

static void *start_eval(void *arg)
{
	Start *e = arg;
	uint8_t *keep = malloc((size_t)e->P->n + 1);
	sel_chain_start(e->P, e->every, e->inner, e->tiny, keep);
	e->peak = sel_eval_below(e->P, keep, e->limit ? e->limit : INT64_MAX, &e->flops);
	free(keep);
	return NULL;
}

/* a[0], and a[1] where `two` (on a second thread where the search has two: the spacing's next step, evaluated
 * before it knows it wants it) */
static void start_evals(Start *a, bool two)
{
	if (two && a->P->threads > 1)
		util_pair(start_eval, &a[0], start_eval, &a[1]);
	else {
		start_eval(&a[0]);
		if (two)
			start_eval(&a[1]);
	}
}

/* sel_chain_start's spacing: the kept cuts' doubled from 4 while that
 * lowers the model's peak by a sixteenth; then cuts between them computed
 * once, at half that spacing or less, while the peak stays within an
 * eighth of the least (each recomputation's chain shorter: fewer FLOPs,
 * and quicker to search). The start's peak, its FLOPs in *flops. Two
 * steps evaluated at a time (each a whole evaluation: DenseNet-121
 * imported, 80 ms a step without the tiny values kept, 7 steps), the
 * second used only where the first does not end the walk: the same
 * choices as one at a time. */
static int64_t chain_spacing(const SelProblem *P, bool tiny, int *every, int *inner, int64_t *flops)
{
	int64_t least = INT64_MAX, start, fewest = INT64_MAX;
	Start e[2] = {{.P = P, .tiny = tiny}, {.P = P, .tiny = tiny}};
	*every = *inner = 0;
	bool done = false;
	for (int k = 4; k <= P->n && !done; k *= 4) {
		bool two = 2 * k <= P->n;
		e[0].every = k, e[1].every = 2 * k, e[0].inner = e[1].inner = 0;
		/* past it, either ends the walk (the second's limit, after the first lowers the least, only lower) */
		e[0].limit = e[1].limit = least < INT64_MAX ? least - least / 16 : 0;
		start_evals(e, two);
		for (int j = 0; j < 1 + two && !done; j++) {
			if ((done = least < INT64_MAX && e[j].peak > least - least / 16))
				break;
			least = e[j].peak, fewest = e[j].flops, *every = e[j].every;
		}
	}
	start = least;
	done = false;
	for (int k = *every / 2; k >= 2 && !done; k /= 4) {
		bool two = k / 2 >= 2;
		e[0].every = e[1].every = *every, e[0].inner = k, e[1].inner = k / 2;
		e[0].limit = e[1].limit = least + least / 8;
		start_evals(e, two);
		for (int j = 0; j < 1 + two && !done; j++) {
			if ((done = e[j].peak > least + least / 8 || e[j].flops >= fewest))
				break;
			start = e[j].peak, fewest = e[j].flops, *inner = e[j].inner;
		}
	}
	*flops = fewest;
	return start;
}

/* the least search's starts from the largest values, each descended on the model (util_parallel's piece) */
enum { GRAPH_STARTS = 16 }; /* the most starts from the largest values */
typedef struct {
	const SelProblem *P;
	uint8_t *keep[GRAPH_STARTS];
} Starts;

static void lower_start(void *arg, int i)
{
	Starts *s = arg;
	sel_lower(s->P, 8, s->keep[i]);
}

/* which of chain_start's two starts is taken, by peak and FLOPs (index 1: the tiny values kept): the one with
 * them where it is lower by a 64th, or within a 64th and of fewer FLOPs */
static bool start_with_tiny(const int64_t start[2], const int64_t f[2])
{
	return start[1] < start[0] - start[0] / 64 || (start[1] <= start[0] + start[0] / 64 && f[1] < f[0]);
}

/* chain_start's start without the tiny values, evaluated (e); `stop` set where it is taken, the one with them
 * (its peak and FLOPs given) not */
typedef struct {
	Start e;
	int64_t tiny_peak, tiny_flops;
	int stop;
} Other;

static void *other_start(void *arg)
{
	Other *o = arg;
	start_eval(&o->e);
	int64_t start[2] = {o->e.peak, o->tiny_peak}, f[2] = {o->e.flops, o->tiny_flops};
	__atomic_store_n(&o->stop, !start_with_tiny(start, f), __ATOMIC_RELAXED);
	return NULL;
}

/* the start with the tiny values kept, improved unless `stop` is set first (r then meaningless) */
typedef struct {
	const SelProblem *P;
	int64_t peak;
	int every, inner;
	uint8_t *keep;
	const int *stop;
	SelResult r;
} Improve;

static void *improve_tiny(void *arg)
{
	Improve *im = arg;
	sel_chain_start(im->P, im->every, im->inner, true, im->keep);
	im->r = sel_improve(im->P, im->peak, im->keep, im->stop);
	return NULL;
}

/* The least search's start for long chains (sel_chain_start, issue 40),
 * spaced by chain_spacing, with values tiny beside the largest kept and
 * without, the lower (or, within a 64th, the one of fewer FLOPs) then kept
 * more where that saves FLOPs at its peak (sel_improve), and planned.
 * The spacing is walked with the tiny values kept, and the start without
 * them evaluated once, at the spacing that walk ends at: where both were
 * walked, both walks ended at the same spacing on every graph measured
 * (the samples, torchvision's four imports flat and with their loops,
 * bench/graphs.sh's networks, DenseNet-121 at twice and four times its
 * depth: 2026-12-06), and without them each evaluation of an import costs
 * about four times as much (DenseNet-201: seven of 0.29 to 0.47 s, against
 * 0.07 to 0.1 with them). On two threads, the start with them is improved
 * beside that evaluation as if taken, and stopped where it is not: the
 * choice one thread makes (DenseNet-201 imported, min-memory: 0.18 s of an
 * evaluation beside the improvement, where the second CPU was idle).
 * Kept, the tiny values cost next to nothing held, where made at each use
 * they make their chains again for each reader (an imported batch norm's
 * statistics, read by its elementwise ops): the flat import of
 * torchvision's ResNet-152 starts at 1.4e14 FLOPs recomputed with them
 * kept, 2.5e14 without, at a lower peak, and its improvement takes 3 s
 * against 15; Inception-v3's is lower without. ResNet-152: 870.1 to
 * 799.5 MB; NASNet: 565.1 to 321.9 MB. */
static void chain_start(Graph *g, Model *m, int64_t (*plan)(Program *), uint8_t *keep, uint8_t *best, int64_t *hi,
                        int64_t *flops)
{
	SelProblem *P = m->P;
	int every[2] = {0, 0}, inner[2] = {0, 0};
	int64_t f[2] = {0, 0}, start[2] = {INT64_MAX, INT64_MAX}, below = sel_tiny_below(P);
	/* with no value tiny, the two starts are one */
	bool any = false;
	for (int v = 0; v < P->n && !any; v++)
		any = P->kind[v] != SEL_FIXED && P->bytes[v] < below;
	start[any] = chain_spacing(P, any, &every[any], &inner[any], &f[any]);
	SelResult r;
	bool improved = false;
	if (any && every[1]) {
		/* the start without them at the spacing the walk with them ended at (see above); past this limit, the
		 * start with them is below it by more than a 64th, and taken whatever its own peak */
		Other o = {{.P = P, .tiny = false, .every = every[1], .inner = inner[1], .limit = start[1] + start[1] / 32 + 64},
		           start[1], f[1], 0};
		if (P->threads > 1 && util_cpus() > 1) {
			/* on two threads, the start with them improved beside it, as if taken: stopped where it is not */
			Improve im = {P, start[1], every[1], inner[1], keep, &o.stop, {0}};
			util_pair(improve_tiny, &im, other_start, &o);
			r = im.r, improved = !o.stop;
		} else {
			other_start(&o);
		}
		start[0] = o.e.peak, f[0] = o.e.flops, every[0] = every[1], inner[0] = inner[1];
	}
	if (!every[0])
		return;
	int t = every[1] && start_with_tiny(start, f);
	trace(t ? "least: chain start, tiny kept" : "least: chain start, none kept", start[t], f[t]);
	if (!improved) {
		sel_chain_start(P, every[t], inner[t], t, keep);
		r = sel_improve(P, start[t], keep, NULL);
	}
	trace("least: chain improved", r.peak, r.flops);
	take_planned(g, m, plan, keep, best, hi, flops);
}

/* The least search's first choice: the fit at store-everything's own plan (hi), which recomputes nothing.
 * On graphs of over GRAPH_SWEEP candidates, store-everything planned, where it plans within hi and so
 * recomputes nothing as that fit would: there the model may price store-everything over its plan and search
 * greedily for it (DenseNet-201 imported, min-memory: 0.5 s for store-everything's FLOPs and 4.9 GB, which
 * the chain start then takes to 416 MB). The method is the fit's: exact where the model fits it within hi. */
static int64_t start_fit(Graph *g, Model *m, int64_t hi, int64_t (*plan)(Program *), uint8_t *best, SelResult *res)
{
	if (!m->small) {
		int64_t f, at, bytes;
		sel_store_everything(m->P, best);
		at = sel_eval(m->P, best, &f, NULL);
		if ((bytes = planned(g, m, best, plan, &f)) <= hi && f == 0) {
			*res = (SelResult){.fits = true, .peak = at, .flops = 0, .bound = 0,
			                   .method = at <= hi ? SEL_EXACT : SEL_GREEDY};
			return bytes;
		}
	}
	return fit_model(g, m, hi, plan, best, res, false, false);
}

static int64_t cut_low = INT64_MAX;

int64_t ckpt_least_cut_low(void)
{
	int64_t low = cut_low;
	cut_low = INT64_MAX;
	return low;
}

/* The least peak the model's searches reach, each choice checked by the
 * planner: the chain start, bisection over budgets, probes, a sweep, starts
 * from the largest values, iterated descents, a descent checked by the planner, then the
 * fewest FLOPs found at that peak. The choice in best[], its planned bytes
 * returned, its search in *out. */
static int64_t least_search(Graph *g, Model *m, int64_t (*plan)(Program *), uint8_t *best, SelResult *out)
{
	Program *p = g->p;
	int64_t flops;
	uint8_t *keep = ar_alloc((size_t)m->P->n + 1), *tried = ar_alloc((size_t)m->P->n + 1);
	memset(tried, 0, (size_t)m->P->n + 1);
	int64_t hi = plan(p);
	SelResult res, r;
	int64_t floor = sel_floor(m->P), lo = floor, bytes = start_fit(g, m, hi, plan, best, &res);
	hi = bytes;
	int64_t all = hi;
	trace("least: fit", hi, res.flops);
	chain_start(g, m, plan, keep, best, &hi, &res.flops);
	trace("least: chain start", hi, res.flops);
	/* a fit is not monotone in the budget: a greedy search may fail at one and succeed below it.
	 * After the bisection, probes 1/8 .. 1/64 below the least found restart it from any that fits.
	 * Not on graphs of over twice GRAPH_SWEEP candidates: on bench/graphs.sh's the chain start is
	 * lower (ResNet-152: 799.5 MB, the bisection 870.1) and the bisection took 1.3 to 3.6 s */
	for (int again = 0; again < 3 && m->ncand <= 2 * GRAPH_SWEEP; again++) {
		for (int step = 0; step < 10 && lo < hi && hi - lo > hi / 256; step++) {
			int64_t mid = lo + (hi - lo) / 2;
			bytes = fit_model(g, m, mid, plan, keep, &r, false, false);
			/* a choice over mid may still be below the least so far: taken, the bisection goes on above mid */
			if (bytes < hi) {
				hi = bytes, res = r;
				memcpy(best, keep, (size_t)m->P->n);
			}
			if (bytes > mid)
				lo = mid + 1;
		}
		bool lower = false;
		for (int j = 3; j <= 6 && !lower; j++) {
			int64_t probe = hi - (hi >> j);
			bytes = fit_model(g, m, probe, plan, keep, &r, false, false);
			if (bytes < hi) {
				hi = bytes, res = r, lower = bytes <= probe;
				memcpy(best, keep, (size_t)m->P->n);
			}
		}
		if (!lower)
			break;
		lo = floor;
	}
	trace("least: bisection", hi, res.flops);
	/* min-memory's other shapes of the loops (budget.c's least_fit): where this one is already an eighth past
	 * the lowest, the searches after the bisection are not worth their seconds (on ResNet-152 imported they
	 * lowered its straight line's least by 4% at most, 2.4 s of two shapes 38% and 72% past the lowest) */
	if (p->least_past && hi > p->least_past) {
		p->least_cut = true;
		cut_low = hi < cut_low ? hi : cut_low;
		res.method = SEL_GREEDY;
		*out = res;
		return hi;
	}
	/* on graphs of up to GRAPH_SWEEP candidates, a sweep of budgets evenly between the floor and the
	 * least found: the greedy fits are noisy, and each costs a few milliseconds there. Not on problems
	 * past GRAPH_WALK_SIZE values and positions: on the straight line of ResNet-152 imported with its
	 * loops (113 candidates, 3,060), each fit took 35 ms, and the sweep lowered its least by 0.1% at most
	 * (bash bench/graphs.sh phases, 2026-12-04) */
	int64_t top = hi;
	bool sweep = m->small && walk_size(m->P, false) <= GRAPH_WALK_SIZE;
	if (m->small && !sweep)
		walk_size(m->P, true);
	for (int k = 1; k < 16 && sweep; k++) {
		int64_t b = floor + (top - floor) * k / 16;
		bytes = fit_model(g, m, b, plan, keep, &r, false, false);
		if (bytes < hi) {
			hi = bytes, res = r;
			memcpy(best, keep, (size_t)m->P->n);
		}
	}
	trace("least: sweep", hi, res.flops);
	/* more starts, each keeping one of the largest values and computing every other again where
	 * needed, then descended on the model: the region of a U-Net's least (its largest concat kept,
	 * the chains recomputed from it), which the searches that keep from nothing do not reach
	 * (issue 40). 16 on up to GRAPH_SWEEP candidates, 4 on up to twice that (Inception-v3: 453
	 * candidates, 1.7% lower and 29% fewer FLOPs), none beyond: each costs a descent. No start reads
	 * another's result: their descents run on the search's threads, then each is planned in order */
	{
		int starts = m->small ? GRAPH_STARTS : m->ncand <= 2 * GRAPH_SWEEP ? 4 : 0, ns = 0;
		Starts st = {m->P, {0}};
		for (int tries = 0; tries < starts; tries++) {
			int c = -1;
			for (int u = 0; u < m->P->n; u++)
				if (m->P->kind[u] == SEL_CAND && !tried[u] && (c < 0 || m->P->bytes[u] > m->P->bytes[c]))
					c = u;
			if (c < 0)
				break;
			tried[c] = 1;
			uint8_t *k = st.keep[ns++] = ar_alloc((size_t)m->P->n + 1);
			for (int u = 0; u < m->P->n; u++)
				k[u] = m->P->kind[u] == SEL_CAND ? SEL_EACH : SEL_ONCE;
			k[c] = SEL_KEEP;
		}
		util_parallel(ns, m->P->threads > 1 ? 2 : 1, lower_start, &st);
		for (int i = 0; i < ns; i++)
			take_planned(g, m, plan, st.keep[i], best, &hi, &res.flops);
	}
	trace("least: largest starts", hi, res.flops);
	/* a descent on the model from the least found: a fit's greedy moves aim at FLOPs, not at the peak */
	memcpy(keep, best, (size_t)m->P->n);
	sel_lower(m->P, 8, keep);
	take_planned(g, m, plan, keep, best, &hi, &res.flops);
	trace("least: descent", hi, res.flops);
	/* two restarts from the least found, each descended: every value computed once there computed at each
	 * use instead, and the reverse. The searches that keep from nothing make values once; computing them
	 * each time frees them between uses (U-Net at B=8: 4,596,736 to 4,334,592 bytes, 24.8% of store-everything
	 * where the bound is 24.2%; DenseNet-201: 478.6 to 445.9 MB). Not on graphs of over 1,024 candidates (NASNet,
	 * DARTS: 0.6 s for nothing) */
	for (int way = 0; way < 2 && m->ncand <= 4 * GRAPH_SWEEP; way++) {
		uint8_t from = way ? SEL_EACH : SEL_ONCE, to = way ? SEL_ONCE : SEL_EACH;
		for (int u = 0; u < m->P->n; u++)
			keep[u] = best[u] == from ? to : best[u];
		sel_lower(m->P, 8, keep);
		take_planned(g, m, plan, keep, best, &hi, &res.flops);
	}
	trace("least: restarts", hi, res.flops);
	/* threshold accepting from the least found, then a descent: a walk through choices up to a twentieth of
	 * the peak worse reaches what changing one value, or kicking a few, does not (Inception at B=8: 2,354,432
	 * to 2,096,384 bytes, 0.2 points of store-everything above the bound; the DenseNet sample: at a tenth,
	 * 134,400 bytes, at a twentieth 132,352). On graphs of up to GRAPH_SWEEP candidates (on bench/graphs.sh's,
	 * of 453 to 1,329, 25,000 moves lowered nothing) and problems of up to GRAPH_WALK_SIZE values and positions */
	if (m->small && walk_size(m->P, false) <= GRAPH_WALK_SIZE) {
		memcpy(keep, best, (size_t)m->P->n);
		sel_anneal(m->P, GRAPH_ANNEAL, 20, keep);
		sel_lower(m->P, 8, keep);
		take_planned(g, m, plan, keep, best, &hi, &res.flops);
	}
	trace("least: anneal", hi, res.flops);
	/* two walks from the least found (each round is a descent): one that only descends, one that also crosses
	 * plateaus */
	memcpy(keep, best, (size_t)m->P->n);
	iterated_descent(g, m, plan, keep, false, best, &hi, &res.flops);
	iterated_descent(g, m, plan, keep, true, best, &hi, &res.flops);
	trace("least: kicks", hi, res.flops);
	/* on small graphs, a descent checked by the planner itself: each candidate's state changed where
	 * that lowers the planned peak (the model's peak is within some 15% of the planner's, not exact) */
	if (m->descent)
		planner_descent(g, m, plan, best, &hi, &res.flops);
	trace("least: planner descent", hi, res.flops);
	/* the least found is a budget of its own: its fit may recompute less than the probe's that found it;
	 * then, from it, what saves FLOPs at its own model peak, checked by the planner. Both only on problems
	 * the walks take whole: beyond GRAPH_WALK_SIZE values and positions neither saved a FLOP on any of
	 * bench/graphs.sh's six networks, torchvision's four imports flat and ResNet-152's with its loops (bash
	 * bench/graphs.sh phases, 2026-12-03), where they took up to 1.9 s of DenseNet-201's 25 s */
	if (walk_size(m->P, false) <= GRAPH_WALK_SIZE) {
		bytes = fit_model(g, m, hi, plan, keep, &r, false, false);
		if (bytes <= hi && r.flops < res.flops) {
			res = r;
			memcpy(best, keep, (size_t)m->P->n);
		}
		trace("least: refit", hi, res.flops);
		planner_rounds(g, m, hi, sel_eval(m->P, best, &flops, NULL), plan, improve_move, best, &res.flops, &bytes);
		trace("least: improve", hi, res.flops);
	} else {
		walk_size(m->P, true);
	}
	/* the fit at store-everything's plan may be exact (nothing dropped); anything lower is the searches' (the
	 * imported ResNet-152's least was said to be "exact over 1408 candidates") */
	if (hi < all)
		res.method = SEL_GREEDY;
	*out = res;
	return hi;
}

/* the least search packed harder (least_packed_hard's second), in a child process beside the first where
 * the two cannot differ from one after the other (hard_start) */
typedef struct {
	Graph *g;
	Model *m;
	int64_t (*plan)(Program *);
	int choices;     /* the choices the model was checked on before (Program.model_choices) */
	UtilChild child; /* the child searching ({-1, -1}: none) */
} Hard;

typedef struct {
	int64_t again;
	SelResult r;
	int choices; /* Program.model_choices and its ranges after the search: its plans' checks of the model */
	double live[2], plan[2];
} HardResult; /* then the choice, P->n bytes */

static void hard_search(void *arg, void *out)
{
	Hard *h = arg;
	HardResult *res = out;
	Program *p = h->g->p;
	p->pack_effort = 1;
	res->again = least_search(h->g, h->m, h->plan, (uint8_t *)out + sizeof *res, &res->r);
	res->choices = p->model_choices;
	memcpy(res->live, p->model_live, sizeof res->live), memcpy(res->plan, p->model_plan, sizeof res->plan);
}

/* the child's checks of the model added to this process's, as if its plans had been made here */
static void hard_checks(Program *p, const Hard *h, const HardResult *r)
{
	if (r->choices <= h->choices)
		return;
	if (!p->model_choices) {
		memcpy(p->model_live, r->live, sizeof r->live), memcpy(p->model_plan, r->plan, sizeof r->plan);
	} else {
		p->model_live[0] = r->live[0] < p->model_live[0] ? r->live[0] : p->model_live[0];
		p->model_live[1] = r->live[1] > p->model_live[1] ? r->live[1] : p->model_live[1];
		p->model_plan[0] = r->plan[0] < p->model_plan[0] ? r->plan[0] : p->model_plan[0];
		p->model_plan[1] = r->plan[1] > p->model_plan[1] ? r->plan[1] : p->model_plan[1];
	}
	p->model_choices += r->choices - h->choices;
}

/* The second search started in a child (util_child_start) before the first, on two CPUs with two threads: it
 * reads nothing the first leaves it but the exact search's work limit (Model.work, 0 once a fit went greedy),
 * and none of its fits searches exactly on a problem of more decisions than SEL_EXACT_MOST; nor does the
 * first stop after its bisection for a lower shape (least_past). Its phases are not traced (DPC_SELECT_TRACE):
 * the wait for it is "least: packed hard". */
static void hard_start(Graph *g, Model *m, int64_t (*plan)(Program *), Hard *h)
{
	Program *p = g->p;
	*h = (Hard){g, m, plan, p->model_choices, {-1, -1}};
	if (m->small && walk_size(m->P, false) <= GRAPH_WALK_SIZE && !p->least_past && p->search_threads > 1 &&
	    util_cpus() > 1 && sel_exact_past(m->P))
		h->child = util_child_start(hard_search, h, sizeof(HardResult) + (size_t)m->P->n);
}

/* The least search again where its plans pack nearer the final plan
 * (Program.pack_effort 1): the searches are greedy, and the peaks they
 * compare change with the packing, so each reaches choices the other does
 * not (issue 40's small Inception: the MILP's optimum). On graphs of up
 * to GRAPH_SWEEP candidates and GRAPH_WALK_SIZE values and positions,
 * where it costs about as much as the first (where hard_start started it
 * in a child, its result read back). best[] and *res become the lower of the two at
 * the final plan's packing (pack_effort 2): its bytes. */
static int64_t least_packed_hard(Graph *g, Model *m, int64_t (*plan)(Program *), uint8_t *best, SelResult *res,
                                 const Hard *hard)
{
	Program *p = g->p;
	uint8_t *other = ar_alloc((size_t)m->P->n + 1);
	SelResult r;
	/* the search again only on problems of up to GRAPH_WALK_SIZE values and positions, as the walks: on the
	 * straight line of torchvision's ResNet-152 imported with its loops (3,060) it found nothing in 3 of 3, at
	 * the cost of the first */
	int64_t f, hi, h;
	size_t size = sizeof(HardResult) + (size_t)m->P->n;
	HardResult *ahead = hard->child.pid > 0 ? ar_alloc(size + 1) : NULL;
	if (ahead && !util_child_result(hard->child, ahead, size))
		ahead = NULL;
	if (walk_size(m->P, false) <= GRAPH_WALK_SIZE) {
		int64_t again;
		if (ahead) {
			again = ahead->again, r = ahead->r;
			memcpy(other, (uint8_t *)ahead + sizeof *ahead, (size_t)m->P->n);
			hard_checks(p, hard, ahead);
		} else {
			p->pack_effort = 1;
			again = least_search(g, m, plan, other, &r);
		}
		trace("least: packed hard", again, r.flops);
		p->pack_effort = 2;
		hi = planned(g, m, best, plan, &f), h = planned(g, m, other, plan, &r.flops);
		if (h < hi || (h == hi && r.flops < f)) {
			memcpy(best, other, (size_t)m->P->n);
			*res = r;
			hi = h, f = r.flops;
		}
	} else {
		walk_size(m->P, true);
		p->pack_effort = 2;
		hi = planned(g, m, best, plan, &f);
	}
	/* from the lower, blocks of values computed once turned to each use together (sel_blocks), planned as
	 * the final plan packs: the searches' packings may hold its choice higher (Inception's MILP optimum:
	 * 65,280 bytes packed hard, 69,376 as the searches pack) */
	memcpy(other, best, (size_t)m->P->n);
	r = sel_blocks(m->P, other);
	h = planned(g, m, other, plan, &r.flops);
	p->pack_effort = 0;
	trace("least: blocks", h < hi ? h : hi, h < hi ? r.flops : f);
	if (h < hi || (h == hi && r.flops < f)) {
		memcpy(best, other, (size_t)m->P->n);
		*res = r;
		return h;
	}
	res->flops = f;
	return hi;
}

/* A budget's fit again where its plans pack nearer the final plan
 * (Program.pack_effort 1), as least_packed_hard does for the least: the
 * fit's planner checks reject a choice whose quick packing is over the
 * budget though the final plan's is not (issue 40's small U-Net at 75% of
 * store-everything: 1,884,160 FLOPs recomputed, 147,456 this way, the
 * MILP's fewest). On straight-line programs of up to GRAPH_SWEEP
 * candidates. keep[] and *res become the one that fits the budget at the
 * final plan's packing with fewer FLOPs; its bytes there. */
static int64_t fit_packed_hard(Graph *g, Model *m, int64_t budget, int64_t (*plan)(Program *), uint8_t *keep,
                               SelResult *res, int64_t bytes)
{
	Program *p = g->p;
	uint8_t *other = ar_alloc((size_t)m->P->n + 1);
	SelResult r;
	p->pack_effort = 1;
	fit_model(g, m, budget, plan, other, &r, true, false);
	p->pack_effort = 2;
	int64_t f, hi = planned(g, m, keep, plan, &f), f2, h = planned(g, m, other, plan, &f2);
	p->pack_effort = 0;
	if (h <= budget && (hi > budget || f2 < f)) {
		memcpy(keep, other, (size_t)m->P->n);
		r.bound = res->bound < r.bound ? res->bound : r.bound;
		*res = r;
		res->fits = true, res->flops = f2;
		return h;
	}
	if (hi <= budget)
		res->fits = true, res->flops = f;
	return hi < bytes ? hi : bytes;
}

/* More starts for a budget's fit, each the greedy search that keeps
 * (sel_improve) from a choice that keeps nothing: every value computed
 * again once, or each time, or the model's least (sel_least). Each is
 * planned as the final plan packs; one over the budget is searched again
 * with the model's budget below its model peak by the excess, doubling,
 * up to 6 times. The fits before start from store-everything's side or
 * from one search's least; issue 40's small U-Net at 60% of
 * store-everything: 10,141,696 FLOPs recomputed, 5,455,872 (the MILP's
 * fewest) from the model's least this way. On straight-line programs of
 * up to GRAPH_SWEEP candidates. keep[] and *res become the one of fewest
 * FLOPs that fits; its bytes. */
static int64_t fit_restarts(Graph *g, Model *m, int64_t budget, int64_t (*plan)(Program *), uint8_t *keep,
                            SelResult *res, int64_t bytes)
{
	SelProblem *P = m->P;
	Program *p = g->p;
	uint8_t *start = ar_alloc((size_t)P->n + 1), *try = ar_alloc((size_t)P->n + 1);
	int effort = p->pack_effort;
	p->pack_effort = 2;
	int64_t f, best = bytes <= budget ? res->flops : INT64_MAX;
	for (int s = 0; s < 3; s++) {
		for (int u = 0; u < P->n; u++)
			start[u] = s == 1 ? SEL_EACH : SEL_ONCE;
		if (s == 2)
			sel_least(P, m->work, start, &f);
		int64_t want = budget;
		for (int round = 0; round < 6; round++) {
			memcpy(try, start, (size_t)P->n);
			SelResult r = sel_improve(P, want, try, NULL);
			if (!r.fits || r.flops >= best)
				break;
			int64_t b = planned(g, m, try, plan, &f);
			if (b <= budget) {
				if (f < best) {
					best = f, bytes = b;
					memcpy(keep, try, (size_t)P->n);
					res->fits = true, res->flops = f, res->method = r.method;
				}
				break;
			}
			want = (r.peak < want ? r.peak : want) - ((b - budget) << round);
		}
	}
	p->pack_effort = effort;
	res->bound = res->bound < res->flops ? res->bound : res->flops;
	return bytes;
}

/* A budget's fit, from wherever the searches before found it, improved
 * by swaps (sel_swaps) and then drop and refill (sel_refill) on the model,
 * each result checked by the planner at the final packing: the DenseNet
 * sample at half of store-everything, 70,656 FLOPs recomputed from
 * fit_restarts' start, 58,880 (the MILP's fewest) after, and at 60%
 * 26,112 to 25,600 (the MILP's: one value kept, two dropped with their
 * kept operands, one kept value's elementwise reader kept instead); issue
 * 40's small Inception at half, 10,321,920 to 9,764,864 (the MILP's), by
 * one swap. */
static void refill_fit(Graph *g, Model *m, int64_t budget, int64_t (*plan)(Program *), uint8_t *keep, SelResult *res,
                       int64_t *bytes)
{
	int effort = g->p->pack_effort;
	g->p->pack_effort = 2;
	planner_rounds(g, m, budget, budget, plan, swaps_move, keep, &res->flops, bytes);
	planner_rounds(g, m, budget, budget, plan, refill_move, keep, &res->flops, bytes);
	g->p->pack_effort = effort;
	res->bound = res->bound < res->flops ? res->bound : res->flops;
}

/* A budget the fit's searches found no choice within: the least search's
 * least (lower than theirs: a budget that min-memory's plan fits must
 * compile), and where that fits, what saves FLOPs from it within the budget.
 * keep[], *res and *bytes become its where it is lower. */
static void least_within(Graph *g, Model *m, int64_t budget, int64_t (*plan)(Program *), uint8_t *keep, SelResult *res,
                         int64_t *bytes)
{
	uint8_t *best = ar_alloc((size_t)m->P->n + 1);
	SelResult least;
	Hard h;
	hard_start(g, m, plan, &h);
	int64_t hi = least_search(g, m, plan, best, &least);
	if (m->small && !g->p->least_cut)
		hi = least_packed_hard(g, m, plan, best, &least, &h);
	if (hi >= *bytes)
		return;
	int64_t bound = res->bound, f;
	memcpy(keep, best, (size_t)m->P->n);
	*res = least, *bytes = hi;
	res->fits = hi <= budget;
	if (res->fits) {
		int64_t want = sel_eval(m->P, keep, &f, NULL) + (budget - hi);
		/* on large graphs (improve_fit's searches are for smaller ones), the keep search's lazy greedy into
		 * the room past the least: its plan recomputes much (torchvision's ResNet-152 imported flat, at 950
		 * MB, 8% past its least: 14.47 forwards recomputed as the least's plan, 1.21 kept into the room) */
		if (!m->small)
			planner_rounds(g, m, budget, want, plan, improve_move, keep, &res->flops, bytes);
		improve_fit(g, m, budget, want, plan, keep, res, bytes);
	}
	/* the fit's bound is the budget's: the least's own is at a lower peak */
	res->bound = bound < res->flops ? bound : res->flops;
}

/* Whether min-memory takes the chain planner's least (cbytes, cflops; chain_least) over the selection's (hi,
 * flops): where it recomputes less at a peak at most the selection's, or on graphs past GRAPH_SWEEP candidates
 * (not small), where the least is a greedy search's, a 256th above it, the least bisection's own step: ResNet-152
 * imported flat, the selection's least 877.0 MB recomputes 14.47 forwards, the chain planner's 877.8 MB 1.06. A
 * lower chain plan that recomputes more is not taken: on bench/graphs.py's NASNet and DARTS its blocks held bare
 * plan 1% and 5% lower at 550 forwards recomputed, and 15 s to plan them */
static bool least_takes_chain(int64_t hi, int64_t flops, int64_t cbytes, int64_t cflops, bool small)
{
	return cflops < flops && cbytes <= hi + (small ? 0 : hi / 256);
}

/* min-memory's two last pieces, apart (each reads the problem; the chain's least plans, the bound does not):
 * the FLOPs' bound at the least's peak, and the chain planner's least near it */
typedef struct {
	Graph *g;
	Model *m;
	int64_t (*plan)(Program *);
	int64_t hi, flops;             /* the selection's least and its FLOPs */
	bool chain;                    /* whether the chain planner is asked */
	int64_t cbytes, cflops, cat;   /* its least (INT64_MAX: none), FLOPs and budget */
	int64_t peak, bound;           /* the least's model peak, and the bound there */
} LeastEnd;

static void *least_bound(void *arg)
{
	LeastEnd *e = arg;
	e->bound = sel_flops_bound(e->m->P, e->peak);
	return NULL;
}

static void *least_chain(void *arg)
{
	LeastEnd *e = arg;
	if (e->chain)
		e->cbytes = chain_least(e->g, e->m, e->hi, e->flops, e->plan, &e->cflops, &e->cat);
	return NULL;
}

int64_t ckpt_graph_least(Program *p, int64_t (*plan)(Program *))
{
	trace("least: begin", 0, 0);
	Graph g = {0};
	init(&g, p);
	int *all = ar_alloc(sizeof(int) * (size_t)(p->nforward + 1));
	int nall = ckpt_graph_candidates(p, all, p->nforward + 1);
	if (!nall)
		return 0;
	int most = exhaustive_most(p, GRAPH_EXHAUSTIVE);
	int64_t flops, planned_least = INT64_MAX;
	if (nall <= most) {
		/* every subset planned: none fits a budget of 0, so the least plan, at its fewest FLOPs */
		flops = fit_planned(&g, 0, plan, most);
		planned_least = plan(p);
		/* offloading priced: the model's least below, taken where it is lower */
		if (p->offload_cost)
			undo(&g);
	}
	if (nall > most || p->offload_cost) {
		/* the least budget the fit plans within, by bisection over budgets (each fit checked by the
		 * planner), from the model's floor to store-everything's plan */
		Model m = calibrated(&g, all, nall, plan);
		if (getenv("DPC_SELECT_DUMP"))
			dump_problem(&g, &m, getenv("DPC_SELECT_DUMP"));
		uint8_t *best = ar_alloc((size_t)m.P->n + 1);
		SelResult res;
		Hard h;
		hard_start(&g, &m, plan, &h);
		int64_t hi = least_search(&g, &m, plan, best, &res);
		if (m.small && !p->least_cut)
			hi = least_packed_hard(&g, &m, plan, best, &res, &h);
		if (getenv("DPC_SELECT_CHOICE"))
			hi = read_choice(&m, getenv("DPC_SELECT_CHOICE"), best, &res);
		else if (getenv("DPC_SELECT_DUMP"))
			write_choice(&m, getenv("DPC_SELECT_DUMP"), best);
		/* the FLOPs' bound at the least's own peak (the searches' fits were at other budgets, and one below
		 * it bounds only the choices that fit there), beside the chain planner's least: nested checkpoints,
		 * where they recompute less at about the least's peak (least_takes_chain; a bound at a higher peak
		 * holds at a lower one). Inception-v3 imported, for CUDA: 998.0 MB at 0.24 forwards recomputed, where
		 * the selection's least is 1,010.2 MB at 0.37 */
		int64_t f;
		bool chain = hi < planned_least && !getenv("DPC_SELECT_CHOICE") && !p->least_cut && chain_worth(p);
		LeastEnd end = {&g, &m, plan, hi, res.flops, chain, INT64_MAX, INT64_MAX, 0, sel_eval(m.P, best, &f, NULL), 0};
		if (m.P->threads > 1)
			util_pair(least_bound, &end, least_chain, &end);
		else
			least_bound(&end), least_chain(&end);
		res.bound = end.bound < res.flops ? end.bound : res.flops;
		int64_t cflops = end.cflops, cat = end.cat, cbytes = end.cbytes;
		if (least_takes_chain(hi, res.flops, cbytes, cflops, m.small))
			flops = apply_chain(&g, &m, cat, res.bound, nall, false);
		else if (hi < planned_least)
			flops = apply_model(&g, &m, best, res, nall);
		else
			flops = fit_planned(&g, 0, plan, most);
	}
	p->graph_least = true;
	return flops;
}

int64_t ckpt_graph_fit(Program *p, int64_t budget, int64_t (*plan)(Program *), int most)
{
	if (plan(p) <= budget)
		return 0;
	trace("fit: begin", budget, 0);
	Graph g = {0};
	init(&g, p);
	int *all = ar_alloc(sizeof(int) * (size_t)(p->nforward + 1));
	int nall = ckpt_graph_candidates(p, all, p->nforward + 1);
	if (!nall)
		return 0;
	bool asked = most < GRAPH_EXHAUSTIVE;
	most = exhaustive_most(p, most);
	if (!asked && nall > most) {
		Model m = calibrated(&g, all, nall, plan);
		uint8_t *keep = ar_alloc((size_t)m.P->n + 1);
		SelResult res;
		/* nested checkpoints, where the forward is a chain and that recomputes less (its cost is its FLOPs: it
		 * offloads nothing; the selection's has its offloads priced); not planned where a file decides, nor
		 * with loops (chain_worth). On a large graph first: where its plan recomputes little enough
		 * (chain_enough), the selection's fit is not searched */
		bool file = getenv("DPC_SELECT_CHOICE") || getenv("DPC_SELECT_DUMP"), chain = !file && chain_worth(p);
		int64_t cflops = INT64_MAX, at = 0, cbytes = INT64_MAX;
		if (chain && !m.small) {
			cbytes = chain_fit(&g, &m, budget, plan, &cflops, &at);
			if (chain_enough(p, budget, cbytes, cflops))
				return apply_chain(&g, &m, at, sel_flops_bound(m.P, budget), nall, true);
		}
		int64_t bytes = fit_model(&g, &m, budget, plan, keep, &res, true, !p->fit_probe);
		trace("fit: model", bytes, res.flops);
		if (m.small && !ir_has_loops(p))
			bytes = fit_packed_hard(&g, &m, budget, plan, keep, &res, bytes);
		trace("fit: packed hard", bytes, res.flops);
		if (m.small && !ir_has_loops(p))
			bytes = fit_restarts(&g, &m, budget, plan, keep, &res, bytes);
		trace("fit: restarts", bytes, res.flops);
		if (bytes > budget && !p->fit_probe)
			least_within(&g, &m, budget, plan, keep, &res, &bytes);
		trace("fit: least within", bytes, res.flops);
		if (m.small && !ir_has_loops(p) && bytes <= budget)
			refill_fit(&g, &m, budget, plan, keep, &res, &bytes);
		trace("fit: refill", bytes, res.flops);
		if (chain && m.small)
			cbytes = chain_fit(&g, &m, budget, plan, &cflops, &at);
		/* nothing fits: the chain planner's least too, which may (its plans at the budget's rounds are fewest
		 * FLOPs', not least bytes'), else the plan to refuse with is min-memory's (least_takes_chain) */
		if (chain && bytes > budget && cbytes > budget && !p->fit_probe) {
			int64_t lflops, lat, lbytes = chain_least(&g, &m, bytes, INT64_MAX, plan, &lflops, &lat);
			if (lbytes <= budget || least_takes_chain(bytes, res.flops, lbytes, lflops, m.small))
				return apply_chain(&g, &m, lat, res.bound, nall, false);
		}
		if (getenv("DPC_SELECT_CHOICE"))
			read_choice(&m, getenv("DPC_SELECT_CHOICE"), keep, &res);
		else if (getenv("DPC_SELECT_DUMP"))
			write_choice(&m, ar_printf("%s.fit", getenv("DPC_SELECT_DUMP")), keep);
		else if (cbytes <= budget && (bytes > budget || cflops < res.flops || getenv("DPC_SELECT_CHAIN")))
			return apply_chain(&g, &m, at, res.bound, nall, false);
		return apply_model(&g, &m, keep, res, nall);
	}
	if (asked || !p->offload_cost)
		return fit_planned(&g, budget, plan, most);
	/* offloading priced: every subset recomputed, or the model's choice, which may offload, where that
	 * fits and costs less */
	Model m = calibrated(&g, all, nall, plan);
	uint8_t *keep = ar_alloc((size_t)m.P->n + 1);
	SelResult res;
	int64_t bytes = fit_model(&g, &m, budget, plan, keep, &res, true, false);
	trace("fit: model", bytes, res.flops);
	int64_t c = fit_planned(&g, budget, plan, most);
	if (bytes > budget || (plan(p) <= budget && c <= res.flops))
		return c;
	undo(&g);
	return apply_model(&g, &m, keep, res, nall);
}

/* a forward op whose result the adjoint keeps (views and leaves cost nothing) */
static bool kept(Graph *g, Op *op)
{
	Program *p = g->p;
	return op->out >= 0 && g->read[op->out] && p->values.data[op->out].kind == VK_SSA && !is_view(op) &&
	       !(ir_ops[op->kind].flags & OPF_LEAF);
}

const char *ckpt_graph_search(const Program *p)
{
	static const char *name[] = {"none", "every subset planned", "exact", "greedy", "chain"};
	return name[p->graph_search];
}

/* the names of the forward values the adjoint keeps (rec false) or of the
 * ops it computes again, as a list; their count, and bytes or FLOPs */
static int names(FILE *f, Graph *g, bool rec, bool json, int64_t *total)
{
	Program *p = g->p;
	int n = 0;
	*total = 0;
	for (int i = rec ? p->nforward : 0; i < (rec ? p->body.len : p->nforward); i++) {
		Op *op = p->body.ops[i];
		int v = op->out;
		if (rec ? !op->recomputed : !kept(g, op))
			continue;
		*total += rec ? ir_op_flops(p, op) : ir_bytes(p, ir_vtype(p, v));
		if (f)
			fprintf(f, json ? "%s\"%s\"" : "%s%s", n ? ", " : "", ir_value_name(p, v));
		n++;
	}
	return n;
}

/* the names of the forward values offloaded, as a list; their count, and bytes */
static int offloaded(FILE *f, Program *p, bool json, int64_t *total)
{
	int n = 0;
	*total = 0;
	for (int i = 0; i < p->nforward; i++) {
		Op *op = p->body.ops[i];
		if (op->kind != OP_OFFLOAD)
			continue;
		*total += ir_bytes(p, ir_vtype(p, op->in[1]));
		if (f)
			fprintf(f, json ? "%s\"%s\"" : "%s%s", n ? ", " : "", ir_value_name(p, op->in[1]));
		n++;
	}
	return n;
}

/* --emit=schedule's line for straight-line code: what the adjoint keeps of
 * the forward values, and what it computes again */
void ckpt_graph_print(FILE *f, Program *p, bool json)
{
	Graph g = {0};
	init(&g, p);
	int64_t bytes, flops;
	int64_t moved;
	int nkept = names(NULL, &g, false, json, &bytes), nrec = names(NULL, &g, true, json, &flops);
	int noff = offloaded(NULL, p, json, &moved);
	if (json) {
		fprintf(f, "  \"straight_line\": {\"kept_bytes\": %lld, \"recomputed_flops\": %lld, \"kept\": [", (long long)bytes,
		        (long long)flops);
		names(f, &g, false, json, &bytes);
		fprintf(f, "], \"recomputed\": [");
		names(f, &g, true, json, &flops);
		fprintf(f, "], \"offloaded_bytes\": %lld, \"offload_cost\": %lld, \"offloaded\": [", (long long)moved,
		        (long long)p->offload_cost);
		offloaded(f, p, json, &moved);
		fprintf(f, "]");
		if (p->graph_search)
			fprintf(f, ", \"search\": \"%s\", \"least_peak\": %s, \"candidates\": %d, \"flops_bound\": %lld, "
			        "\"walks_cut_at\": %lld, \"fit_searched\": %s", ckpt_graph_search(p), p->graph_least ? "true" : "false",
			        p->graph_candidates, (long long)p->graph_bound, (long long)p->graph_walks_cut,
			        p->graph_chain_only ? "false" : "true");
		if (p->model_choices)
			fprintf(f, ", \"model_checked\": {\"choices\": %d, \"over_live\": [%.6f, %.6f], \"over_plan\": [%.6f, %.6f]}",
			        p->model_choices, p->model_live[0], p->model_live[1], p->model_plan[0], p->model_plan[1]);
		fprintf(f, "},\n");
		return;
	}
	fprintf(f, "straight-line code: the adjoint keeps %d forward values (%lld bytes)%s", nkept, (long long)bytes, nkept ? ": " : "");
	names(f, &g, false, json, &bytes);
	if (nrec) {
		fprintf(f, "; it computes %d ops again (%lld FLOPs): ", nrec, (long long)flops);
		names(f, &g, true, json, &flops);
	}
	if (noff) {
		fprintf(f, "; it offloads %d (%lld bytes, each to the host and back once a step, priced at %lld FLOPs a byte "
		        "each way): ", noff, (long long)moved, (long long)p->offload_cost);
		offloaded(f, p, json, &moved);
	}
	fputs("\n", f);
	if (!p->graph_search)
		return;
	fprintf(f, "straight-line search%s: %s over %d candidates", p->graph_least ? " for the least peak" : "",
	        ckpt_graph_search(p), p->graph_candidates);
	if (p->graph_search >= 3 && p->graph_bound < INT64_MAX)
		fprintf(f, "; no fit recomputes fewer than %lld FLOPs (gap %.3g%%)", (long long)p->graph_bound,
		        flops > p->graph_bound ? 100.0 * (double)(flops - p->graph_bound) / (double)(flops ? flops : 1) : 0.0);
	if (p->graph_chain_only)
		fprintf(f, "; the selection's fit not searched: the chain plan recomputes at most 1/%d of a forward's FLOPs",
		        CKPT_CHAIN_ENOUGH);
	if (p->graph_walks_cut)
		fprintf(f, "; its walks (threshold accepting, kicks) cut short: its least search's threshold accepting not "
		        "run, its kicks a twentieth of their rounds, then %d of every %lld; and its least search without its "
		        "sweep of budgets, not run again "
		        "packed harder nor refitted at the least it found, on a problem of %lld values and positions (its gap "
		        "to the bound is below)", GRAPH_WALK_SIZE, (long long)p->graph_walks_cut, (long long)p->graph_walks_cut);
	if (p->least_cut)
		fprintf(f, "; its least search stopped after its bisection, an eighth past the peak of another shape of the "
		        "loops that min-memory planned (this one planned lower in the end)");
	fputs("\n", f);
	if (p->model_choices)
		fprintf(f, "its cost model against the memory plan, over the %d choices it planned: the model's peak %+.2f%% to "
		        "%+.2f%% of the tensors' bytes live at once, %+.2f%% to %+.2f%% of the packed plan's\n", p->model_choices,
		        100 * p->model_live[0], 100 * p->model_live[1], 100 * p->model_plan[0], 100 * p->model_plan[1]);
}
