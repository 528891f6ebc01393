/* ckpt: what straight-line code keeps for its adjoint. By default every
 * value the adjoint reads stays live from the forward sweep until its last
 * adjoint use. Under --checkpoint auto, when the budget cannot hold the plan,
 * some of those values are dropped instead: the adjoint computes them again,
 * from the values kept (and parameters and inputs), just before its first
 * op that reads them. The rewrite only touches the top level: values that an
 * adjoint loop's bodies read stay kept. The set dropped is the one that fits
 * the budget with the fewest recomputed FLOPs among every subset of the
 * GRAPH_EXHAUSTIVE largest candidates (the rest stay kept;
 * tests/unit/graph.c compares it with every subset of all of them). */
#include <stdlib.h>

#include "ckpt.h"

enum { GRAPH_EXHAUSTIVE = 12, GRAPH_MAX = 4096 };

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
	int *memo;       /* per value: its copy in the current rewrite, or -1 */
	Block *body;     /* the rewrite's new top level */
	Vec(Edit) edits; /* operands the rewrite replaced, to undo it */
	Block saved;
	int64_t flops;
} Graph;

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

static void mark_block(Block *b, bool *named)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			named[op->in[k]] = true;
		for (int k = 0; k < op->ncarry && op->cyield; k++)
			named[op->cyield[k]] = true;
		for (int k = 0; k < op->ncarry && op->body3.len; k++)
			named[op->cyield3[k]] = true;
		mark_block(&op->body, named);
		mark_block(&op->body2, named);
		mark_block(&op->body3, named);
	}
}

/* whether the rewrite computes w again: a forward value dropped, one that
 * only a recomputation reads, or a view of either */
static bool needs(Graph *g, int w)
{
	Program *p = g->p;
	if (w >= g->nv || g->pos[w] < 0 || ir_is_result(p, w))
		return false;
	Op *d = p->body.ops[g->pos[w]];
	if (g->drop[w])
		return true;
	if (is_view(d))
		return needs(g, d->in[0]);
	return !g->read[w] && ckpt_pure(p, d);
}

static int materialize(Graph *g, int w)
{
	Program *p = g->p;
	if (!needs(g, w))
		return w;
	if (g->memo[w] >= 0)
		return g->memo[w];
	Op *d = p->body.ops[g->pos[w]];
	Op *n = ar_alloc(sizeof *n);
	*n = *d;
	n->in = ar_alloc(sizeof(int) * (size_t)(d->nin + 1));
	for (int k = 0; k < d->nin; k++)
		n->in[k] = materialize(g, d->in[k]);
	Value *x = &p->values.data[w];
	n->out = ir_new_value(p, x->kind, x->type, x->name, x->loc);
	p->values.data[n->out].def = n;
	n->recomputed = true;
	ir_append(g->body, n);
	g->flops += ir_op_flops(p, n);
	return g->memo[w] = n->out;
}

/* The program with g->drop's values computed again in the adjoint. */
static void apply(Graph *g)
{
	Program *p = g->p;
	Block *b = ar_alloc(sizeof *b);
	g->body = b;
	g->flops = 0;
	g->edits.len = 0;
	g->saved = p->body;
	for (int v = 0; v < g->nv; v++)
		g->memo[v] = -1;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		for (int k = 0; k < op->nin && i >= p->nforward; k++) {
			int w = materialize(g, op->in[k]);
			if (w != op->in[k]) {
				vec_push(&g->edits, ((Edit){op, k, op->in[k]}));
				op->in[k] = w;
			}
		}
		ir_append(b, op);
	}
	p->body = *b;
}

static void undo(Graph *g)
{
	Program *p = g->p;
	for (int i = 0; i < g->edits.len; i++)
		g->edits.data[i].op->in[g->edits.data[i].k] = g->edits.data[i].old;
	p->body = g->saved;
	p->values.len = g->nv;
}

/* the plan's bytes with `drop` recomputed, and its FLOPs in *flops */
static int64_t eval(Graph *g, int64_t (*plan)(Program *), int64_t *flops)
{
	apply(g);
	int64_t bytes = plan(g->p);
	*flops = g->flops;
	undo(g);
	return bytes;
}

static void init(Graph *g, Program *p)
{
	g->p = p;
	g->nv = p->values.len;
	g->pos = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	g->read = ar_alloc((size_t)g->nv + 1);
	g->drop = ar_alloc((size_t)g->nv + 1);
	g->memo = ar_alloc(sizeof(int) * (size_t)(g->nv + 1));
	for (int v = 0; v < g->nv; v++)
		g->pos[v] = -1;
	for (int i = 0; i < p->nforward; i++)
		if (p->body.ops[i]->out >= 0)
			g->pos[p->body.ops[i]->out] = i;
	Block adj = {p->body.ops + p->nforward, p->body.len - p->nforward, 0};
	mark_block(&adj, g->read);
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

int64_t ckpt_graph_eval(Program *p, const int *drop, int n, int64_t (*plan)(Program *), int64_t *flops)
{
	Graph g = {0};
	init(&g, p);
	for (int i = 0; i < n; i++)
		g.drop[drop[i]] = true;
	return eval(&g, plan, flops);
}

typedef struct {
	int64_t bytes, flops;
	bool fits;
} Choice;

/* better: fits, then fewer FLOPs, then fewer bytes; without a fit, fewer bytes */
static bool better(Choice a, Choice b)
{
	if (a.fits != b.fits)
		return a.fits;
	if (a.fits && a.flops != b.flops)
		return a.flops < b.flops;
	return a.bytes < b.bytes;
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

int64_t ckpt_graph_fit(Program *p, int64_t budget, int64_t (*plan)(Program *), int most)
{
	/* each subset is a plan of the whole program: 2^most plans of about 2^25 values at most */
	most = most < GRAPH_EXHAUSTIVE ? most : GRAPH_EXHAUSTIVE;
	while (most > 1 && ((int64_t)p->values.len << most) > ((int64_t)1 << 25))
		most--;
	int cand[GRAPH_EXHAUSTIVE];
	int n = ckpt_graph_largest(p, cand, most);
	if (!n || plan(p) <= budget)
		return 0;
	Graph g = {0};
	init(&g, p);
	unsigned best = 0;
	Choice top = {INT64_MAX, INT64_MAX, false};
	for (unsigned mask = 0; mask < 1u << n; mask++) {
		for (int i = 0; i < n; i++)
			g.drop[cand[i]] = mask >> i & 1;
		Choice c;
		c.bytes = eval(&g, plan, &c.flops);
		c.fits = c.bytes <= budget;
		if (better(c, top))
			top = c, best = mask;
	}
	for (int i = 0; i < n; i++)
		g.drop[cand[i]] = best >> i & 1;
	apply(&g);
	return g.flops;
}

/* a forward op whose result the adjoint keeps (views and leaves cost nothing) */
static bool kept(Graph *g, Op *op)
{
	Program *p = g->p;
	return op->out >= 0 && g->read[op->out] && p->values.data[op->out].kind == VK_SSA && !is_view(op) &&
	       !(ir_ops[op->kind].flags & OPF_LEAF);
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

/* --emit=schedule's line for straight-line code: what the adjoint keeps of
 * the forward values, and what it computes again */
void ckpt_graph_print(FILE *f, Program *p, bool json)
{
	Graph g = {0};
	init(&g, p);
	int64_t bytes, flops;
	int nkept = names(NULL, &g, false, json, &bytes), nrec = names(NULL, &g, true, json, &flops);
	if (json) {
		fprintf(f, "  \"straight_line\": {\"kept_bytes\": %lld, \"recomputed_flops\": %lld, \"kept\": [", (long long)bytes,
		        (long long)flops);
		names(f, &g, false, json, &bytes);
		fprintf(f, "], \"recomputed\": [");
		names(f, &g, true, json, &flops);
		fprintf(f, "]},\n");
		return;
	}
	fprintf(f, "straight-line code: the adjoint keeps %d forward values (%lld bytes)%s", nkept, (long long)bytes, nkept ? ": " : "");
	names(f, &g, false, json, &bytes);
	if (nrec) {
		fprintf(f, "; it computes %d ops again (%lld FLOPs): ", nrec, (long long)flops);
		names(f, &g, true, json, &flops);
	}
	fputs("\n", f);
}
