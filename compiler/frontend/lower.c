/* fe: names, function inlining, shape checks and lowering to the forward IR. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "../ops/ops.h"

typedef enum { B_VALUE, B_IVAR } BindKind;

typedef struct {
	const char *name;
	BindKind kind;
	int value;
	int64_t lo, hi; /* B_IVAR: the loop range */
	int locked;     /* > 0 while carried by a loop: the type is fixed */
	bool fixed;     /* a parameter or input: cannot be assigned */
} Binding;

typedef struct Scope {
	Vec(Binding) b;
	struct Scope *parent;
	Map index;      /* name -> its latest binding in b */
} Scope;

typedef Vec(const char *) NameList;

typedef struct {
	double *v;
	int64_t n;
} LitArray;

/* Inlining a call recurses; so does nothing else without bound after the
 * parser's nesting limit. A chain of calls is bounded the same way. */
#define MAX_INLINE 256
/* Inlining can multiply a program: bound what comes out. A fuzzing
 * harness lowers the bound to keep each run short. */
int fe_max_ops = 1 << 20;

typedef struct {
	FeAst *ast;
	Program *p;
	Block *out;
	Scope *global;
	Vec(const char *) inlining;
	bool *called;   /* per function: inlined at least once */
	int nops;       /* ops emitted */
	Vec(int) ivars; /* the index values of the loops being lowered, outermost first */
	Scope *loss;    /* the loss block's own scope: reports are made there */
	int sites;      /* dropout ops so far */
	Vec(LitArray) literals; /* the tensor literals' arrays so far */
	const FeOptions *o;
} Lower;

static const char *ts(Type t) { return ir_type_str(t); }

/* a type as written in the source, as stored in this program (--precision) */
static Type resolve(Lower *L, Type t)
{
	t.dt = ir_resolve_dt(L->p, t.dt);
	return t;
}

static Binding *find_in(Scope *s, const char *name)
{
	int i = map_get(&s->index, name);
	return i >= 0 ? &s->b.data[i] : NULL;
}

static Binding *lookup(Scope *s, const char *name)
{
	for (; s; s = s->parent) {
		Binding *b = find_in(s, name);
		if (b)
			return b;
	}
	return NULL;
}

static void bind(Scope *s, Binding b)
{
	vec_push(&s->b, b);
	map_put(&s->index, b.name, s->b.len - 1);
}

static int distance(const char *a, const char *b)
{
	int la = (int)strlen(a), lb = (int)strlen(b);
	if (la > 32 || lb > 32)
		return 99;
	int d[33][33];
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++)
		for (int j = 1; j <= lb; j++) {
			int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			d[i][j] = c;
		}
	return d[la][lb];
}

/* builtins lowered by a function of their own, beside the op table's
 * (below): compositions of ops, and ops whose arguments are not all tensors */
typedef struct {
	const char *name;
	int (*lower)(Lower *L, Scope *s, Node *n);
} Composite;
#define NCOMPOSITES 9
static const Composite composites[NCOMPOSITES];

static const char *suggest(Lower *L, Scope *s, const char *name, bool callable)
{
	const char *best = NULL;
	int bd = 3;
#define TRY(n) do { if (strchr((n), '.')) break; int d_ = distance(name, (n)); if (d_ < bd) bd = d_, best = (n); } while (0)
	if (callable) {
		for (int k = 0; k < OP__COUNT; k++)
			if (ir_ops[k].form != FE_NONE)
				TRY(ir_ops[k].name);
		for (size_t i = 0; i < NCOMPOSITES; i++)
			TRY(composites[i].name);
		for (int i = 0; i < L->ast->fns.len; i++)
			TRY(L->ast->fns.data[i].name);
	} else {
		for (; s; s = s->parent)
			for (int i = 0; i < s->b.len; i++)
				TRY(s->b.data[i].name);
		for (int i = 0; i < L->ast->consts.len; i++)
			TRY(L->ast->consts.data[i].name);
	}
#undef TRY
	return best && bd <= (int)strlen(name) / 2 + 1 ? ar_printf("; did you mean '%s'?", best) : "";
}

/* Creates an op and checks it; a shape error is the user's, at loc. */
static int emit(Lower *L, Op *op)
{
	Type t;
	const char *err = ir_check_op(L->p, op, &t);
	if (err)
		diag_error(op->loc, "%s", err);
	if (++L->nops > fe_max_ops)
		diag_error(op->loc, "the program is too large: more than %d operations once functions are inlined", fe_max_ops);
	op->out = ir_new_value(L->p, op->kind == OP_IDX ? VK_INDEX : VK_SSA, t, NULL, op->loc);
	L->p->values.data[op->out].def = op;
	ir_append(L->out, op);
	return op->out;
}

static Op *mk(Lower *L, OpKind k, Loc loc, int nin, const int *in) { return ir_new_op(L->p, k, loc, nin, in); }

static bool is_const(Lower *L, int v)
{
	Op *d = L->p->values.data[v].def;
	return d && d->kind == OP_CONST;
}

/* A literal where a tensor is needed becomes a one-element tensor. */
static int tensor(Lower *L, int v, Loc loc)
{
	if (!is_const(L, v))
		return v;
	Op *op = mk(L, OP_FILL, loc, 0, NULL);
	op->attr.value = L->p->values.data[v].def->attr.value;
	op->to = ir_scalar(L->p->real);
	return emit(L, op);
}

static int constant(Lower *L, double f, Loc loc)
{
	Op *op = mk(L, OP_CONST, loc, 0, NULL);
	op->attr.value = f;
	return emit(L, op);
}

/* ---- constant expressions inside tensor expressions (axes, shapes, indices) ---- */

static int64_t const_range(Node *n, int64_t v, bool overflow)
{
	if (overflow || v > MAX_CONST || v < -MAX_CONST)
		diag_error(n->loc, "constant expression overflows (integer constants are limited to 2^40)");
	return v;
}

static bool const_value(Lower *L, Scope *s, Node *n, int64_t *out);

static bool const_binary(Lower *L, Scope *s, Node *n, int64_t a, int64_t *out)
{
	int64_t b, v = 0;
	if (!strchr("+-*/", n->op) || !const_value(L, s, n->b, &b))
		return false;
	bool o = false;
	switch (n->op) {
	case '+': o = __builtin_add_overflow(a, b, &v); break;
	case '-': o = __builtin_sub_overflow(a, b, &v); break;
	case '*': o = __builtin_mul_overflow(a, b, &v); break;
	default:
		if (b == 0)
			diag_error(n->loc, "division by zero in a constant expression");
		v = a / b;
	}
	*out = const_range(n, v, o);
	return true;
}

static bool const_value(Lower *L, Scope *s, Node *n, int64_t *out)
{
	int64_t a;
	switch (n->kind) {
	case N_NUM:
		if (n->num != floor(n->num))
			return false;
		if (fabs(n->num) > (double)MAX_CONST)
			diag_error(n->loc, "integer %g is too large here (integer constants are limited to 2^40)", n->num);
		*out = (int64_t)n->num;
		return true;
	case N_NAME:
		if (lookup(s, n->name) || !fe_const(L->ast, n->name))
			return false;
		*out = fe_const(L->ast, n->name)->value;
		return true;
	case N_NEG:
		if (!const_value(L, s, n->a, &a))
			return false;
		*out = -a;
		return true;
	case N_BIN: {
		NodeList spine = {0};
		if (!const_value(L, s, fe_left_spine(n, &spine), &a))
			return false;
		for (int i = spine.len - 1; i >= 0; i--)
			if (!const_binary(L, s, spine.data[i], a, &a))
				return false;
		*out = a;
		return true;
	}
	default:
		return false;
	}
}

static int64_t need_const(Lower *L, Scope *s, Node *n, const char *what)
{
	int64_t v;
	if (!const_value(L, s, n, &v))
		diag_error(n->loc, "%s must be an integer constant", what);
	return v;
}

static int axis_of(Lower *L, Scope *s, Node *n, int rank)
{
	int64_t a = need_const(L, s, n, "an axis");
	if (a < -rank || a >= rank)
		diag_error(n->loc, "axis %lld is out of range for a tensor of rank %d", (long long)a, rank);
	return (int)(a < 0 ? a + rank : a);
}

/* ---- expressions ---- */

static int expr(Lower *L, Scope *s, Node *n);
static int literal(Lower *L, Scope *s, Node *n);
static int call_fn(Lower *L, Scope *s, Node *n, Fn *f);

static int tensor_expr(Lower *L, Scope *s, Node *n) { return tensor(L, expr(L, s, n), n->loc); }

/* x[i] of a parameter or input: the view of one entry of its first axis;
 * i a loop variable or a constant */
static int pick(Lower *L, Scope *s, Node *n, int base, Node *i)
{
	Op *d = L->p->values.data[base].def;
	Type t = ir_vtype(L->p, base);
	if (t.rank < 1)
		diag_error(n->loc, "cannot index a scalar");
	int idx;
	Binding *b = i->kind == N_NAME ? lookup(s, i->name) : NULL;
	if (b && b->kind == B_IVAR) {
		if (!d || (d->kind != OP_PARAM && d->kind != OP_INPUT))
			diag_error(n->loc, "only parameters and inputs can be indexed by a loop variable");
		if (b->hi > t.dim[0])
			diag_error(i->loc, "index %s runs over %lld..%lld but %s has %lld entries on its first axis", i->name,
			           (long long)b->lo, (long long)b->hi, d->kind == OP_PARAM ? L->p->params.data[d->index].name : L->p->inputs.data[d->index].name,
			           (long long)t.dim[0]);
		idx = b->value;
	} else {
		int64_t k = need_const(L, s, i, "an index (a loop variable or a constant)");
		if (k < 0 || k >= t.dim[0])
			diag_error(i->loc, "index %lld is out of range 0..%lld", (long long)k, (long long)t.dim[0]);
		Op *op = mk(L, OP_IDX, i->loc, 0, NULL);
		op->index = (int)k;
		idx = emit(L, op);
	}
	int in[2] = {base, idx};
	return emit(L, mk(L, OP_SLICE, n->loc, 2, in));
}

/* elements [lo, hi) of axis ax of x */
static int take(Lower *L, Loc loc, int x, int ax, int64_t lo, int64_t hi)
{
	Type t = ir_vtype(L->p, x);
	if (lo == 0 && hi == t.dim[ax])
		return x;
	Op *op = mk(L, OP_RANGE, loc, 1, &x);
	op->attr.ax.axis = ax;
	op->attr.ax.at = lo;
	op->to = t;
	op->to.dim[ax] = hi - lo;
	return emit(L, op);
}

static int reshape_to(Lower *L, Loc loc, int x, Type to)
{
	Op *op = mk(L, OP_RESHAPE, loc, 1, &x);
	op->to = to;
	return emit(L, op);
}

/* a subscript's constant, negative counting from the end of an axis of n */
static int64_t place(Lower *L, Scope *s, Node *e, int64_t n, const char *what)
{
	int64_t k = need_const(L, s, e, what);
	return k < 0 ? k + n : k;
}

/* x[s0, s1, ...]: an index drops its axis, a range lo:hi keeps [lo, hi) of
 * it; axes beyond the subscripts are whole. A first index into a parameter
 * or input is a view (pick); the rest are copies. */
static int index_expr(Lower *L, Scope *s, Node *n)
{
	int v = expr(L, s, n->a);
	if (!n->args.len) {
		Op *d = L->p->values.data[v].def;
		if (d && (d->kind == OP_PARAM || d->kind == OP_INPUT))
			return pick(L, s, n, v, n->b);
		vec_push(&n->args, n->b);
	}
	v = tensor(L, v, n->a->loc);
	Type whole = ir_vtype(L->p, v);
	int first = 0;
	Op *d = L->p->values.data[v].def;
	if (n->args.data[0]->kind != N_RANGE && d && (d->kind == OP_PARAM || d->kind == OP_INPUT))
		v = pick(L, s, n, v, n->args.data[first++]);
	Type t = ir_vtype(L->p, v);
	int ax = 0;
	for (int i = first; i < n->args.len; i++) {
		Node *e = n->args.data[i];
		if (ax >= t.rank)
			diag_error(e->loc, "too many subscripts for %s", ts(whole));
		int64_t dim = t.dim[ax];
		if (e->kind == N_RANGE) {
			int64_t lo = e->a ? place(L, s, e->a, dim, "a range's start") : 0;
			int64_t hi = e->b ? place(L, s, e->b, dim, "a range's end") : dim;
			if (lo < 0 || hi > dim || lo >= hi)
				diag_error(e->loc, "range %lld:%lld is not a part of 0:%lld, axis %d of %s", (long long)lo, (long long)hi,
				           (long long)dim, ax, ts(t));
			v = take(L, e->loc, v, ax++, lo, hi);
			t = ir_vtype(L->p, v);
			continue;
		}
		Binding *b = e->kind == N_NAME ? lookup(s, e->name) : NULL;
		if (b && b->kind == B_IVAR)
			diag_error(e->loc, "only parameters and inputs can be indexed by a loop variable, and only on their first axis");
		int64_t k = place(L, s, e, dim, "an index (a loop variable or a constant)");
		if (k < 0 || k >= dim)
			diag_error(e->loc, "index %lld is out of range 0..%lld of axis %d of %s", (long long)k, (long long)dim, ax, ts(t));
		Type to = t;
		to.rank--;
		for (int j = ax; j < to.rank; j++)
			to.dim[j] = t.dim[j + 1];
		v = reshape_to(L, e->loc, take(L, e->loc, v, ax, k, k + 1), to);
		t = to;
	}
	return v;
}

/* i32 ids straight from an input (cross_entropy's labels, embed's ids)
 * record their bound, and labels their ignore_index, for the runtime, which
 * checks the data against them */
static void record_ids(Lower *L, Node *n, int ids, int64_t bound, const Attr *labels)
{
	Op *d = L->p->values.data[ids].def;
	while (d && (d->kind == OP_SLICE || d->kind == OP_RANGE || d->kind == OP_RESHAPE))
		d = L->p->values.data[d->in[0]].def;
	if (d && d->kind == OP_ARANGE && d->to.dim[0] > bound)
		diag_error(n->loc, "arange(%lld) holds ids up to %lld, beyond the bound %lld here", (long long)d->to.dim[0],
		           (long long)d->to.dim[0] - 1, (long long)bound);
	if (!d || d->kind != OP_INPUT)
		return;
	Input *inp = &L->p->inputs.data[d->index];
	if (bound > INT32_MAX)
		diag_error(n->loc, "%lld ids are too many (at most 2^31 - 1)", (long long)bound);
	if (inp->classes && inp->classes != bound)
		diag_error(n->loc, "ids '%s' are used with bounds %d and %lld", inp->name, inp->classes, (long long)bound);
	inp->classes = (int)bound;
	if (labels && labels->lab.has) {
		inp->has_ignore = true;
		inp->ignore = labels->lab.ignore;
	}
}

/* the op a builtin function's name calls, or -1 */
static int builtin(const char *name)
{
	for (int k = 0; k < OP__COUNT; k++)
		if (ir_ops[k].form != FE_NONE && !strcmp(ir_ops[k].name, name))
			return k;
	return -1;
}

/* Checks a builtin's argument count; reductions take axis= in second place,
 * layernorm eps= in fourth, and no other argument has a name. */
static void arity(Node *n, int lo, int hi)
{
	int k = n->args.len;
	if (k < lo || k > hi) {
		if (lo == hi)
			diag_error(n->loc, "%s takes %d argument%s, got %d", n->name, lo, lo == 1 ? "" : "s", k);
		diag_error(n->loc, "%s takes %d to %d arguments, got %d", n->name, lo, hi, k);
	}
	int b = builtin(n->name);
	FeForm form = b >= 0 ? ir_ops[b].form : FE_NONE;
	if (form == FE_ATTENTION)
		return; /* its named arguments: the call reads them */
	const char *named = form == FE_REDUCE ? "axis" : form == FE_LAYERNORM ? "eps" : NULL;
	int at = form == FE_REDUCE ? 1 : 3;
	for (int i = 0; i < k; i++) {
		const char *an = n->argname[i];
		if (an && (!named || strcmp(an, named) != 0))
			diag_error(n->args.data[i]->loc, "%s has no argument named '%s'", n->name, an);
		if (an && i != at)
			diag_error(n->args.data[i]->loc, "%s= must follow the %s argument", an, at == 1 ? "tensor" : "shift");
	}
}

/* why dpc's tensor-core attention kernels do not take q's shape, or NULL */
static const char *mma_refuses(Type q, int64_t dh)
{
	if (q.dt != DT_BF16)
		return ar_printf("they take bf16, and this attention is %s", ir_dt_name(q.dt));
	if (dh % 16 || dh > 128)
		return ar_printf("they take heads of 16 to 128 elements, a multiple of 16, and these are %lld wide", (long long)dh);
	return NULL;
}

/* why f32 attention cannot go on tensor cores as 3xTF32 (NULL: it can): its
 * attn_dq's tile memory (codegen's cg_attn_smem) is 640 (2 dh + 8) + 256
 * bytes, within the A100's 163 KiB a block up to heads of 112 (148,736
 * bytes; 128 would take 169,216) */
static const char *tf32_refuses(Type q, int64_t dh)
{
	if (q.dt != DT_F32)
		return ar_printf("it takes f32, and this attention is %s", ir_dt_name(q.dt));
	if (dh % 16 || dh > 112)
		return ar_printf("it takes heads of 16 to 112 elements, a multiple of 16 (its shared memory within the A100's), "
		                 "and these are %lld wide", (long long)dh);
	return NULL;
}

/* attention on GEMMs (FeOptions.attn_gemm): its workspace, when its q, k
 * and v fit; or on dpc's own kernels in FlashAttention-2's order
 * (Attr.attn.flash: on tensor cores in bf16, in FMA in f32 and f64, or f32
 * on tensor cores as 3xTF32, Attr.attn.tf32). On the GPU by default an
 * attention of a shape those kernels take goes where the cost model prices
 * it cheapest (cg_attn_price); -v says which and why. On the SIMT emulator
 * (FeOptions.simt) the own kernels take it, in FMA for f32 unless
 * DPC_ATTN_TF32=on asks. */
static void attention_path(Lower *L, Op *op)
{
	Program *p = L->p;
	Type q = ir_vtype(p, op->in[0]);
	bool chosen = L->o->cuda && !L->o->reference && L->o->attn_gemm == 0;
	bool gemm = L->o->attn_gemm > 0 || L->o->attn_gemm == -2 || chosen;
	if (q.rank < 2 || !ir_is_real(q.dt) || !op->attr.attn.heads || q.dim[q.rank - 1] % op->attr.attn.heads)
		return;
	for (int i = 1; i < 3; i++)
		if (!ir_type_eq(ir_vtype(p, op->in[i]), q))
			return; /* the shape rule says why */
	int64_t dh = q.dim[q.rank - 1] / op->attr.attn.heads;
	bool bf16 = q.dt == DT_BF16;
	int heads = op->attr.attn.heads;
	bool causal = op->attr.attn.causal;
	const char *fma_no = bf16 ? NULL : ops_attn_fma_refuses(q, heads);
	const char *tf32_no = bf16 || L->o->attn_tf32 < 0 ? "DPC_ATTN_TF32=off" : tf32_refuses(q, dh);
	if (q.dt == DT_F32 && L->o->attn_tf32 >= 0 && tf32_no && (L->o->cuda || L->o->simt) && L->o->verbose)
		diag_note(op->loc, "attention not on tensor cores as 3xTF32: %s", tf32_no);
	/* the own kernels' way: 3xTF32 where asked (DPC_ATTN_TF32=on), or on the GPU where priced cheaper than FMA */
	bool tf32 = !tf32_no && (L->o->attn_tf32 > 0 || (L->o->cuda && !L->o->simt && L->o->attn_price));
	double in_fma = -1, in_tf32 = -1; /* the two kernels' prices, where compared */
	if (tf32 && L->o->attn_tf32 == 0 && !fma_no) {
		int64_t rows = ops_attn_rows(q, heads, causal, 0, L->p->device_mem);
		in_fma = L->o->attn_price(L->o->gpu, q, heads, causal, rows, ATTN_OWN);
		in_tf32 = L->o->attn_price(L->o->gpu, q, heads, causal, rows, ATTN_TF32);
		tf32 = in_tf32 < in_fma;
	}
	const char *refuses = bf16 ? mma_refuses(q, dh) : tf32 ? NULL : fma_no;
	const char *own = bf16 ? "dpc's tensor-core kernels" : tf32 ? "dpc's 3xTF32 tensor-core kernels" : "dpc's FMA kernels";
	if (tf32 && in_fma >= 0)
		own = ar_printf("%s (%.3f ms in FMA; DPC_ATTN_TF32=off takes those)", own, in_fma * 1e3);
	else if (in_tf32 >= 0)
		own = ar_printf("%s (%.3f ms as 3xTF32 on tensor cores; DPC_ATTN_TF32=on takes those)", own, in_tf32 * 1e3);
	if (chosen && !refuses && L->o->attn_price) {
		int64_t rows = ops_attn_rows(q, heads, causal, 0, L->p->device_mem);
		double flash = L->o->attn_price(L->o->gpu, q, heads, causal, rows, tf32 ? ATTN_TF32 : ATTN_OWN);
		double on_gemm = L->o->attn_price(L->o->gpu, q, heads, causal, rows, ATTN_GEMMS);
		gemm = on_gemm <= flash;
		if (L->o->verbose)
			diag_note(op->loc, "attention on %s: the cost model's %.3f ms (forward and adjoint) on %s against at "
			          "least %.3f ms on GEMMs, on the %s (DPC_ATTN_GEMM=off or =on takes one)",
			          gemm ? "GEMMs" : bf16 || tf32 ? "tensor cores" : "FMA kernels", flash * 1e3, own, on_gemm * 1e3,
			          L->o->gpu ? L->o->gpu : "h100");
	} else if (chosen && L->o->verbose) {
		diag_note(op->loc, "attention on GEMMs: %s do not take it: %s", own, refuses);
	}
	if (!gemm) {
		op->attr.attn.flash = (L->o->cuda || L->o->simt) && !L->o->reference && !refuses;
		op->attr.attn.tf32 = op->attr.attn.flash && tf32;
		return;
	}
	Op *ws = mk(L, OP_SCRATCH, op->loc, 0, NULL);
	ws->to = ops_attn_scratch(q, op->attr.attn.heads, op->attr.attn.causal, L->o->attn_gemm, L->p->device_mem);
	int *in = ar_alloc(sizeof(int) * 4);
	memcpy(in, op->in, sizeof(int) * 3);
	in[3] = emit(L, ws);
	op->in = in;
	op->nin = 4;
}

static int reduce(Lower *L, Scope *s, Node *n, OpKind k)
{
	arity(n, 1, 2);
	int x = tensor_expr(L, s, n->args.data[0]);
	Type t = ir_vtype(L->p, x);
	Op *op = mk(L, k, n->loc, 1, &x);
	if (n->args.len == 1) {
		op->attr.axes = t.rank ? (1u << t.rank) - 1 : 0;
	} else {
		Node *a = n->args.data[1];
		if (a->kind == N_LIST) {
			for (int i = 0; i < a->args.len; i++) {
				int ax = axis_of(L, s, a->args.data[i], t.rank);
				if (op->attr.axes >> ax & 1)
					diag_error(a->args.data[i]->loc, "axis %d appears twice", ax);
				op->attr.axes |= 1u << ax;
			}
		} else {
			op->attr.axes = 1u << axis_of(L, s, a, t.rank);
		}
	}
	if (t.rank == 0)
		diag_error(n->loc, "%s of a scalar", n->name);
	return emit(L, op);
}

/* An elementwise op; on constants only, the constant it yields. */
static int ew_op(Lower *L, OpKind k, Loc loc, int nin, int *in)
{
	double x[3];
	bool all = true;
	for (int i = 0; i < nin; i++) {
		all &= is_const(L, in[i]);
		x[i] = all ? L->p->values.data[in[i]].def->attr.value : 0;
	}
	if (all)
		return constant(L, ops_eval_ew(k, x), loc);
	return emit(L, mk(L, k, loc, nin, in));
}

/* A builtin's arguments after its npos tensors: constants given in
 * spec's order or by name. Integer ones must be whole and at least min;
 * a required one must be given; the others keep the value they come with. */
typedef struct {
	const char *name;
	double value;
	bool real, required;
	int64_t min;
} Arg;

static void builtin_args(Lower *L, Scope *s, Node *n, int npos, Arg *spec, int nspec)
{
	int k = n->args.len;
	if (k < npos || k > npos + nspec) {
		if (!nspec)
			diag_error(n->loc, "%s takes %d argument%s, got %d", n->name, npos, npos == 1 ? "" : "s", k);
		diag_error(n->loc, "%s takes %d to %d arguments, got %d", n->name, npos, npos + nspec, k);
	}
	bool seen[8] = {0}, named = false;
	for (int i = 0; i < k; i++) {
		Node *a = n->args.data[i];
		const char *an = n->argname[i];
		if (i < npos) {
			if (an)
				diag_error(a->loc, "%s takes %d tensor argument%s before %s=", n->name, npos, npos == 1 ? "" : "s", an);
			continue;
		}
		int j = i - npos;
		if (an) {
			for (j = 0; j < nspec && strcmp(spec[j].name, an) != 0; j++)
				;
			if (j == nspec)
				diag_error(a->loc, "%s has no argument named '%s'", n->name, an);
			named = true;
		} else if (named) {
			diag_error(a->loc, "an argument without a name cannot follow a named one");
		}
		if (seen[j])
			diag_error(a->loc, "%s's %s is given twice", n->name, spec[j].name);
		seen[j] = true;
		if (spec[j].real) {
			int e = expr(L, s, a);
			if (!is_const(L, e))
				diag_error(a->loc, "%s must be a number", spec[j].name);
			spec[j].value = L->p->values.data[e].def->attr.value;
			continue;
		}
		int64_t v = need_const(L, s, a, spec[j].name);
		if (v < spec[j].min)
			diag_error(a->loc, "%s must be at least %lld, got %lld", spec[j].name, (long long)spec[j].min, (long long)v);
		spec[j].value = (double)v;
	}
	for (int j = 0; j < nspec; j++)
		if (spec[j].required && !seen[j])
			diag_error(n->loc, "%s needs %s=", n->name, spec[j].name);
}

/* an axis argument's value, negative counting from the end of rank */
static int axis_in(Node *n, const Arg *a, int rank)
{
	int64_t v = (int64_t)a->value;
	if (v < -rank || v >= rank)
		diag_error(n->loc, "%s's axis %lld is out of range for a tensor of rank %d", n->name, (long long)v, rank);
	return (int)(v < 0 ? v + rank : v);
}

static int need_rank(Lower *L, Node *n, int x, int rank, const char *what)
{
	Type t = ir_vtype(L->p, x);
	if (t.rank != rank)
		diag_error(n->loc, "%s's %s must have rank %d, got %s", n->name, what, rank, ts(t));
	return x;
}

static int transpose_by(Lower *L, Loc loc, int x, const int *perm)
{
	Op *op = mk(L, OP_TRANSPOSE, loc, 1, &x);
	memcpy(op->attr.perm, perm, sizeof(int) * (size_t)ir_vtype(L->p, x).rank);
	return emit(L, op);
}

/* the last two axes swapped */
static int swap_last(Lower *L, Loc loc, int x)
{
	int r = ir_vtype(L->p, x).rank, perm[IR_MAXRANK];
	for (int i = 0; i < r; i++)
		perm[i] = i;
	perm[r - 2] = r - 1;
	perm[r - 1] = r - 2;
	return transpose_by(L, loc, x, perm);
}

static int matmul_bt(Lower *L, Loc loc, int a, int b)
{
	int in[2] = {a, b};
	Op *op = mk(L, OP_MATMUL, loc, 2, in);
	op->attr.mm.tb = 1;
	return emit(L, op);
}

static int fill(Lower *L, Loc loc, double v, Type t)
{
	Op *op = mk(L, OP_FILL, loc, 0, NULL);
	op->attr.value = v;
	op->to = t;
	return emit(L, op);
}

/* ---- builtins that are compositions of ops ---- */

/* Why a convolution of these shapes takes the reference path, or NULL:
 * cuDNN describes each tensor with 32-bit counts. */
static const char *conv_refused(Lower *L, Type x, Type w, Type y)
{
	if (L->o->reference)
		return "--reference-kernels";
	Type t[3] = {x, w, y};
	for (int i = 0; L->o->cuda && i < 3; i++)
		if (ir_numel(t[i]) > INT32_MAX)
			return ar_printf("%s has 2^31 or more elements, more than cuDNN takes", ts(t[i]));
	return NULL;
}

/* the reference path of one group: the windows unfolded, one GEMM with w, and back to NCHW */
static int conv_unfolded(Lower *L, Loc loc, int x, int w, Window win, Type yt)
{
	Op *u = mk(L, OP_UNFOLD, loc, 1, &x);
	u->attr.win = win;
	u->attr.win.g = 0;
	int cols = emit(L, u);
	Type wt = ir_vtype(L->p, w), ct = ir_vtype(L->p, cols), wm = ir_type(wt.dt, 2, (int64_t[]){wt.dim[0], ct.dim[2]});
	int y = matmul_bt(L, loc, cols, reshape_to(L, loc, w, wm));
	return reshape_to(L, loc, swap_last(L, loc, y), yt);
}

/* conv2d(x [N, C, H, W], w [O, C/groups, kh, kw], stride=, pad=, dilation=,
 * groups=) -> [N, O, Ho, Wo]: one conv2d op, whose gradients read x and w;
 * or, the reference path, each group's windows unfolded and one GEMM with
 * its weights, the groups' results concatenated */
static int conv2d(Lower *L, Scope *s, Node *n)
{
	Arg a[] = {{"stride", 1, false, false, 1}, {"pad", 0, false, false, 0}, {"dilation", 1, false, false, 1},
	           {"groups", 1, false, false, 1}};
	builtin_args(L, s, n, 2, a, 4);
	int x = need_rank(L, n, tensor_expr(L, s, n->args.data[0]), 4, "input");
	int w = need_rank(L, n, tensor_expr(L, s, n->args.data[1]), 4, "weight");
	Type xt = ir_vtype(L->p, x), wt = ir_vtype(L->p, w);
	int64_t g = a[3].value;
	if (g < 1 || xt.dim[1] % g || wt.dim[0] % g)
		diag_error(n->loc, "conv2d's groups=%lld must be at least 1 and divide both the input's %lld channels and the "
		           "weight's %lld output channels", (long long)g, (long long)xt.dim[1], (long long)wt.dim[0]);
	if (wt.dim[1] != xt.dim[1] / g)
		diag_error(n->loc, "conv2d's weight %s needs %lld input channels to match the input %s%s, not %lld", ops_vs(L->p, w),
		           (long long)(xt.dim[1] / g), ops_vs(L->p, x), g > 1 ? ar_printf(" in %lld groups", (long long)g) : "",
		           (long long)wt.dim[1]);
	if (wt.dt != xt.dt)
		diag_error(n->loc, "conv2d's input %s and weight %s have different element types; convert one with cast(x, %s)",
		           ops_vs(L->p, x), ops_vs(L->p, w), ir_dt_name(xt.dt));
	/* checked before they narrow to int */
	if (wt.dim[2] > INT32_MAX || wt.dim[3] > INT32_MAX || a[0].value > INT32_MAX || a[1].value > INT32_MAX ||
	    a[2].value > INT32_MAX || g > INT32_MAX)
		diag_error(n->loc, "conv2d's kernel, stride, padding, dilation and groups must each be below 2^31");
	int st = (int)a[0].value, pd = (int)a[1].value, dl = (int)a[2].value;
	Window win = {(int)wt.dim[2], (int)wt.dim[3], st, st, pd, pd, dl, dl, (int)g};
	int64_t ho, wo;
	ops_window_out(&win, xt, &ho, &wo);
	Type yt = ir_type(xt.dt, 4, (int64_t[]){xt.dim[0], wt.dim[0], ho, wo});
	/* windows that do not fit, or unfold to more than a tensor may hold: the
	 * composition says so (unfold's shape rule) */
	int64_t cg = xt.dim[1] / g;
	bool fits = ho && wo && ho <= IR_MAX_ELEMS / wo && cg <= IR_MAX_ELEMS / wt.dim[2] / wt.dim[3] &&
	            cg * wt.dim[2] * wt.dim[3] <= IR_MAX_ELEMS / (ho * wo);
	const char *why = fits ? conv_refused(L, xt, wt, yt) : "";
	if (!why) {
		Op *ws = mk(L, OP_SCRATCH, n->loc, 0, NULL);
		ws->to = ops_conv_scratch(xt, wt, yt, ops_conv_rows(xt, wt, yt, L->o->cuda, L->p->device_mem));
		Op *c = mk(L, OP_CONV2D, n->loc, 3, (int[]){x, w, emit(L, ws)});
		c->attr.win = win;
		return emit(L, c);
	}
	if (L->o->verbose && *why)
		diag_note(n->loc, "conv2d as unfold + GEMM: %s", why);
	if (g == 1)
		return conv_unfolded(L, n->loc, x, w, win, yt);
	int64_t og = wt.dim[0] / g;
	Type part = yt;
	part.dim[1] = og;
	int *y = ar_alloc(sizeof(int) * (size_t)g);
	for (int64_t i = 0; i < g; i++) {
		int xi = take(L, n->loc, x, 1, i * cg, (i + 1) * cg), wi = take(L, n->loc, w, 0, i * og, (i + 1) * og);
		y[i] = conv_unfolded(L, n->loc, xi, wi, win, part);
	}
	/* the groups' results concatenated in pairs, level by level: each element is copied log2(g) times, not
	 * up to g (a depthwise convolution has a group per channel) */
	for (int64_t m = g; m > 1; m = (m + 1) / 2)
		for (int64_t i = 0; i < m; i += 2) {
			if (i + 1 == m) {
				y[i / 2] = y[i];
				continue;
			}
			Op *op = mk(L, OP_CONCAT, n->loc, 2, (int[]){y[i], y[i + 1]});
			op->attr.ax.axis = 1;
			op->attr.ax.at = ir_vtype(L->p, y[i]).dim[1];
			y[i / 2] = emit(L, op);
		}
	return y[0];
}

/* max_pool2d / avg_pool2d (x [N, C, H, W], kernel, stride=kernel, pad=0): one op
 * (maxpool, avgpool); under --reference-kernels, and for a window that does
 * not fit (whose error the composition's shape rule gives), each channel's
 * windows unfolded as rows and reduced */
static int pool2d(Lower *L, Scope *s, Node *n, OpKind red)
{
	Arg a[] = {{"kernel", 0, false, true, 1}, {"stride", 0, false, false, 1}, {"pad", 0, false, false, 0}};
	builtin_args(L, s, n, 1, a, 3);
	int x = need_rank(L, n, tensor_expr(L, s, n->args.data[0]), 4, "input");
	Type xt = ir_vtype(L->p, x);
	if (a[0].value > INT32_MAX || a[1].value > INT32_MAX)
		diag_error(n->loc, "%s's kernel and stride must be below 2^31", n->name);
	int k = (int)a[0].value, st = a[1].value ? (int)a[1].value : k;
	if (a[2].value > k / 2)
		diag_error(n->loc, "%s's pad=%lld must be at most half its kernel %d", n->name, (long long)a[2].value, k);
	int pad = (int)a[2].value;
	Window win = {k, k, st, st, pad, pad, 1, 1, 0};
	int64_t ho, wo;
	ops_window_out(&win, xt, &ho, &wo);
	/* a padded max: the op, also under --reference-kernels (an unfolding's padding is zeros, not a max's
	 * nothing; the interpreter is its reference) */
	if ((!L->o->reference || (pad && red == OP_MAX)) && ho && wo) {
		/* one op: no unfolded copy of x, and a max pool's gradient reads x alone */
		Op *pool = mk(L, red == OP_MAX ? OP_MAXPOOL2D : OP_AVGPOOL2D, n->loc, 1, &x);
		pool->attr.win = win;
		return emit(L, pool);
	}
	int planes = reshape_to(L, n->loc, x, ir_type(xt.dt, 4, (int64_t[]){xt.dim[0] * xt.dim[1], 1, xt.dim[2], xt.dim[3]}));
	Op *u = mk(L, OP_UNFOLD, n->loc, 1, &planes);
	u->attr.win = win;
	int cols = emit(L, u);
	Op *r = mk(L, red, n->loc, 1, &cols);
	r->attr.axes = 1u << 2;
	return reshape_to(L, n->loc, emit(L, r), ir_type(xt.dt, 4, (int64_t[]){xt.dim[0], xt.dim[1], ho, wo}));
}

/* groupnorm(x [N, C, ...], g [C], b [C], groups=G, eps=1e-5): each
 * sample's group of C/G channels normalised as one row (layernorm without
 * its own scale), then scaled and shifted per channel */
static int groupnorm(Lower *L, Scope *s, Node *n)
{
	Arg a[] = {{"groups", 0, false, true, 1}, {"eps", 1e-5, true, false, 0}};
	builtin_args(L, s, n, 3, a, 2);
	int x = tensor_expr(L, s, n->args.data[0]);
	Type xt = ir_vtype(L->p, x);
	if (xt.rank < 2)
		diag_error(n->loc, "groupnorm needs x [N, C, ...], got %s", ts(xt));
	int64_t C = xt.dim[1], G = (int64_t)a[0].value;
	if (C % G != 0)
		diag_error(n->loc, "groupnorm's groups=%lld must divide the %lld channels of %s", (long long)G, (long long)C, ts(xt));
	Type row = ir_type(xt.dt, 1, &C), per = xt;
	per.rank--;
	per.dim[0] = C;
	for (int i = 1; i < per.rank; i++)
		per.dim[i] = 1;
	int gb[2];
	for (int i = 0; i < 2; i++) {
		gb[i] = tensor_expr(L, s, n->args.data[i + 1]);
		if (!ir_type_eq(ir_vtype(L->p, gb[i]), row))
			diag_error(n->args.data[i + 1]->loc, "groupnorm's %s must be %s for x %s, got %s", i ? "shift" : "scale", ts(row),
			           ts(xt), ts(ir_vtype(L->p, gb[i])));
		gb[i] = reshape_to(L, n->loc, gb[i], per);
	}
	int64_t M = ir_numel(xt) / (xt.dim[0] * G);
	Type mt = ir_type(xt.dt, 1, &M);
	int in[3] = {reshape_to(L, n->loc, x, ir_type(xt.dt, 3, (int64_t[]){xt.dim[0], G, M})), fill(L, n->loc, 1, mt), fill(L, n->loc, 0, mt)};
	Op *ln = mk(L, OP_LAYERNORM, n->loc, 3, in);
	ln->attr.value = a[1].value;
	int h = reshape_to(L, n->loc, emit(L, ln), xt);
	return emit(L, mk(L, OP_ADD, n->loc, 2, (int[]){emit(L, mk(L, OP_MUL, n->loc, 2, (int[]){h, gb[0]})), gb[1]}));
}

/* upsample(x [..., H, W], factor): bilinear (PyTorch's align_corners=False)
 * as two small GEMMs with the resampling matrices, so its gradient is theirs */
static int upsample(Lower *L, Scope *s, Node *n)
{
	Arg a[] = {{"factor", 0, false, true, 1}};
	builtin_args(L, s, n, 1, a, 1);
	int x = tensor_expr(L, s, n->args.data[0]);
	Type xt = ir_vtype(L->p, x);
	if (xt.rank < 2)
		diag_error(n->loc, "upsample needs a tensor [..., H, W], got %s", ts(xt));
	int64_t f = (int64_t)a[0].value, H = xt.dim[xt.rank - 2], W = xt.dim[xt.rank - 1];
	if (f > (1 << 20) || H * f > MAX_CONST || W * f > MAX_CONST)
		diag_error(n->loc, "upsample's factor %lld is too large", (long long)f);
	int m[2];
	for (int i = 0; i < 2; i++) {
		Op *op = mk(L, OP_INTERP, n->loc, 0, NULL);
		int64_t d = i ? H : W;
		op->to = ir_type(xt.dt, 2, (int64_t[]){d * f, d});
		m[i] = emit(L, op);
	}
	int y = swap_last(L, n->loc, matmul_bt(L, n->loc, x, m[0]));
	return swap_last(L, n->loc, matmul_bt(L, n->loc, y, m[1]));
}

/* cast(x, T): the element type's name as the second argument */
static int cast(Lower *L, Scope *s, Node *n)
{
	if (n->args.len != 2 || n->argname[0] || n->argname[1])
		diag_error(n->loc, "cast takes a tensor and an element type: cast(x, f32), cast(x, bf16), cast(x, f64) or cast(x, i32)");
	Node *t = n->args.data[1];
	DType dt = DT_INDEX;
	for (int k = 0; t->kind == N_NAME && k <= DT_I32; k++)
		if (!strcmp(t->name, ir_dt_name((DType)k)))
			dt = (DType)k;
	if (dt == DT_INDEX)
		diag_error(t->loc, "cast's second argument is an element type: f32, bf16, f64 or i32");
	int x = tensor_expr(L, s, n->args.data[0]);
	dt = ir_resolve_dt(L->p, dt);
	if (ir_vtype(L->p, x).dt == dt)
		return x;
	Op *op = mk(L, OP_CAST, n->loc, 1, &x);
	op->to.dt = dt;
	return emit(L, op);
}

/* argmax(x, axis=-1): i32 places */
static int argmax(Lower *L, Scope *s, Node *n)
{
	Arg a[] = {{"axis", -1, false, false, INT64_MIN}};
	builtin_args(L, s, n, 1, a, 1);
	int x = tensor_expr(L, s, n->args.data[0]);
	Type t = ir_vtype(L->p, x);
	if (t.rank < 1)
		diag_error(n->loc, "argmax of a scalar");
	Op *op = mk(L, OP_ARGMAX, n->loc, 1, &x);
	op->attr.ax.axis = axis_in(n, &a[0], t.rank);
	return emit(L, op);
}

/* arange(n): the i32 ids 0..n-1 (position ids) */
static int arange(Lower *L, Scope *s, Node *n)
{
	Arg a[] = {{"n", 0, false, true, 1}};
	builtin_args(L, s, n, 0, a, 1);
	if (a[0].value > INT32_MAX)
		diag_error(n->loc, "arange(%.0f) is too long: ids are i32", a[0].value);
	Op *op = mk(L, OP_ARANGE, n->loc, 0, NULL);
	op->to = ir_type(DT_I32, 1, (int64_t[]){(int64_t)a[0].value});
	return emit(L, op);
}

static int max_pool2d(Lower *L, Scope *s, Node *n) { return pool2d(L, s, n, OP_MAX); }
static int avg_pool2d(Lower *L, Scope *s, Node *n) { return pool2d(L, s, n, OP_MEAN); }

/* cross_entropy(logits, labels, axis=-1, ignore_index=): the classes along
 * axis (moved last), labels shaped like the other axes */
static int cross_entropy(Lower *L, Scope *s, Node *n)
{
	Arg a[] = {{"axis", -1, false, false, INT64_MIN}, {"ignore_index", 0, false, false, INT64_MIN}};
	builtin_args(L, s, n, 2, a, 2);
	int in[2] = {tensor_expr(L, s, n->args.data[0]), tensor_expr(L, s, n->args.data[1])};
	Type lt = ir_vtype(L->p, in[0]), given = lt;
	if (lt.rank >= 1) {
		int ax = axis_in(n, &a[0], lt.rank), perm[IR_MAXRANK];
		if (ax != lt.rank - 1) {
			for (int i = 0, j = 0; i < lt.rank; i++)
				if (i != ax)
					perm[j++] = i;
			perm[lt.rank - 1] = ax;
			in[0] = transpose_by(L, n->loc, in[0], perm);
			lt = ir_vtype(L->p, in[0]);
		}
	}
	Type yt = ir_vtype(L->p, in[1]);
	bool match = yt.rank == lt.rank - 1;
	for (int i = 0; match && i < yt.rank; i++)
		match = yt.dim[i] == lt.dim[i];
	if (lt.rank >= 1 && !match && yt.dt == DT_I32) {
		Type want = lt;
		want.dt = DT_I32;
		want.rank--;
		int ax = axis_in(n, &a[0], lt.rank);
		diag_error(n->loc, "cross_entropy labels %s do not match logits %s%s: expected %s", ts(yt), ts(given),
		           ax == lt.rank - 1 ? "" : ar_printf(" with classes on axis %d", ax), ts(want));
	}
	Op *op = mk(L, OP_XENT, n->loc, 2, in);
	for (int i = 0; i < n->args.len; i++)
		if (n->argname[i] ? !strcmp(n->argname[i], "ignore_index") : i == 3) {
			if (a[1].value < INT32_MIN || a[1].value > INT32_MAX)
				diag_error(n->args.data[i]->loc, "ignore_index must be an i32");
			op->attr.lab.has = true;
			op->attr.lab.ignore = (int)a[1].value;
		}
	int v = emit(L, op);
	record_ids(L, n, in[1], lt.dim[lt.rank - 1], &op->attr);
	return v;
}

/* embed's padding_idx=P (PyTorch's): a row of the table, negative counting
 * from its end; ids equal to it add nothing to the table's gradient */
static void padding_idx(Lower *L, Node *n, Op *op, int64_t P)
{
	Type t = ir_vtype(L->p, op->in[0]);
	if (t.rank != 2)
		return; /* the shape rule names the table's shape */
	int64_t V = t.dim[0];
	if (P < -V || P >= V)
		diag_error(n->args.data[2]->loc, "padding_idx %lld is not a row of the table %s: it must lie in %lld..%lld "
		           "(negative counts from the end)", (long long)P, ts(t), (long long)-V, (long long)V - 1);
	op->attr.lab.has = true;
	op->attr.lab.ignore = (int)(P < 0 ? P + V : P);
}

/* training(): 1 in a training step, 0 in evaluation (the executable's --eval) */
static int training(Lower *L, Scope *s, Node *n)
{
	builtin_args(L, s, n, 0, NULL, 0);
	Op *op = mk(L, OP_TRAINING, n->loc, 0, NULL);
	op->to = ir_scalar(L->p->real);
	return emit(L, op);
}

static const Composite composites[NCOMPOSITES] = {{"conv2d", conv2d}, {"max_pool2d", max_pool2d}, {"avg_pool2d", avg_pool2d},
                   {"groupnorm", groupnorm}, {"upsample", upsample}, {"cast", cast},
                   {"argmax", argmax}, {"arange", arange}, {"training", training}};

static int call(Lower *L, Scope *s, Node *n)
{
	for (size_t i = 0; i < NCOMPOSITES; i++)
		if (!strcmp(composites[i].name, n->name))
			return composites[i].lower(L, s, n);
	int k = builtin(n->name);
	switch (k < 0 ? FE_NONE : ir_ops[k].form) {
	case FE_NONE:
		break;
	case FE_EW: {
		int nin = ir_ops[k].arity, in[3];
		arity(n, nin, nin);
		for (int i = 0; i < nin; i++)
			in[i] = expr(L, s, n->args.data[i]);
		return ew_op(L, (OpKind)k, n->loc, nin, in);
	}
	case FE_ROWWISE: {
		arity(n, 1, 1);
		int x = tensor_expr(L, s, n->args.data[0]);
		return emit(L, mk(L, (OpKind)k, n->loc, 1, &x));
	}
	case FE_REDUCE:
		return reduce(L, s, n, (OpKind)k);
	case FE_RESHAPE: {
		arity(n, 2, 2);
		int x = tensor_expr(L, s, n->args.data[0]);
		Node *l = n->args.data[1];
		if (l->kind != N_LIST)
			diag_error(l->loc, "reshape takes a shape list such as [B, 4]");
		if (l->args.len > IR_MAXRANK)
			diag_error(l->loc, "too many dimensions (at most %d)", IR_MAXRANK);
		Op *op = mk(L, OP_RESHAPE, n->loc, 1, &x);
		op->to.dt = ir_vtype(L->p, x).dt;
		int64_t count = 1;
		for (int i = 0; i < l->args.len; i++) {
			int64_t d = need_const(L, s, l->args.data[i], "a dimension");
			if (d < 1)
				diag_error(l->args.data[i]->loc, "a dimension must be at least 1, this one is %lld", (long long)d);
			if (d > ((int64_t)1 << 40) / count)
				diag_error(l->args.data[i]->loc, "the shape is too large (more than 2^40 elements)");
			count *= d;
			op->to.dim[op->to.rank++] = d;
		}
		return emit(L, op);
	}
	case FE_TRANSPOSE: {
		arity(n, 1, 2);
		int x = tensor_expr(L, s, n->args.data[0]);
		Type t = ir_vtype(L->p, x);
		Op *op = mk(L, OP_TRANSPOSE, n->loc, 1, &x);
		for (int i = 0; i < t.rank; i++)
			op->attr.perm[i] = i;
		if (n->args.len == 1) {
			if (t.rank < 2)
				diag_error(n->loc, "transpose needs a tensor of rank 2 or more, got %s", ts(t));
			op->attr.perm[t.rank - 2] = t.rank - 1;
			op->attr.perm[t.rank - 1] = t.rank - 2;
		} else {
			Node *l = n->args.data[1];
			if (l->kind != N_LIST || l->args.len != t.rank)
				diag_error(l->loc, "transpose of %s needs a permutation list of %d axes", ts(t), t.rank);
			for (int i = 0; i < t.rank; i++)
				op->attr.perm[i] = axis_of(L, s, l->args.data[i], t.rank);
		}
		return emit(L, op);
	}
	case FE_LAYERNORM: {
		arity(n, 3, 4);
		int in[3];
		for (int i = 0; i < 3; i++)
			in[i] = tensor_expr(L, s, n->args.data[i]);
		Op *op = mk(L, OP_LAYERNORM, n->loc, 3, in);
		op->attr.value = 1e-5;
		if (n->args.len == 4) {
			int e = expr(L, s, n->args.data[3]);
			if (!is_const(L, e))
				diag_error(n->args.data[3]->loc, "eps must be a number");
			op->attr.value = L->p->values.data[e].def->attr.value;
		}
		return emit(L, op);
	}
	case FE_ATTENTION: {
		arity(n, 3, 5);
		int in[3] = {0, 0, 0};
		Op *op = mk(L, OP_ATTENTION, n->loc, 3, in);
		for (int i = 0; i < n->args.len; i++) {
			Node *a = n->args.data[i];
			const char *an = n->argname[i];
			if (i < 3 && an)
				diag_error(a->loc, "attention's q, k and v come first, before %s=", an);
			if (i < 3) {
				op->in[i] = tensor_expr(L, s, a);
			} else if (an && !strcmp(an, "heads")) {
				int64_t h = need_const(L, s, a, "heads");
				if (h < 1 || h > INT32_MAX)
					diag_error(a->loc, "heads must be at least 1, got %lld", (long long)h);
				op->attr.attn.heads = (int)h;
			} else if (an && !strcmp(an, "causal")) {
				int64_t c = need_const(L, s, a, "causal");
				if (c != 0 && c != 1)
					diag_error(a->loc, "causal must be 0 or 1, got %lld", (long long)c);
				op->attr.attn.causal = c;
			} else {
				diag_error(a->loc, "attention takes heads= and causal= after q, k and v");
			}
		}
		if (!op->attr.attn.heads)
			diag_error(n->loc, "attention needs heads=");
		attention_path(L, op);
		return emit(L, op);
	}
	case FE_EMBED: {
		Arg a[] = {{"padding_idx", 0, false, false, INT64_MIN}};
		builtin_args(L, s, n, 2, a, 1);
		int in[2] = {tensor_expr(L, s, n->args.data[0]), tensor_expr(L, s, n->args.data[1])};
		Op *op = mk(L, OP_EMBED, n->loc, 2, in);
		if (n->args.len > 2)
			padding_idx(L, n, op, (int64_t)a[0].value);
		int v = emit(L, op);
		record_ids(L, n, in[1], ir_vtype(L->p, in[0]).dim[0], NULL);
		return v;
	}
	case FE_PAD: {
		Arg a[] = {{"axis", 0, false, true, INT64_MIN}, {"before", 0, false, true, 0}, {"after", 0, false, true, 0}};
		builtin_args(L, s, n, 1, a, 3);
		int x = tensor_expr(L, s, n->args.data[0]);
		Type t = ir_vtype(L->p, x);
		if (t.rank < 1)
			diag_error(n->loc, "cannot pad a scalar");
		int ax = axis_in(n, &a[0], t.rank);
		if (a[1].value + a[2].value > (double)MAX_CONST)
			diag_error(n->loc, "pad's padding is too large");
		if (a[1].value + a[2].value == 0)
			return x;
		Op *op = mk(L, OP_PAD, n->loc, 1, &x);
		op->attr.ax.axis = ax;
		op->attr.ax.at = (int64_t)a[1].value;
		op->to = t;
		op->to.dim[ax] += (int64_t)(a[1].value + a[2].value);
		return emit(L, op);
	}
	case FE_CONCAT: {
		Arg a[] = {{"axis", 0, false, true, INT64_MIN}};
		builtin_args(L, s, n, 1, a, 1);
		Node *l = n->args.data[0];
		if (l->kind != N_LIST || l->args.len < 1)
			diag_error(l->loc, "concat takes a list of tensors such as [a, b]");
		int v = tensor_expr(L, s, l->args.data[0]);
		int ax = axis_in(n, &a[0], ir_vtype(L->p, v).rank);
		for (int i = 1; i < l->args.len; i++) {
			int in[2] = {v, tensor_expr(L, s, l->args.data[i])};
			Op *op = mk(L, OP_CONCAT, l->args.data[i]->loc, 2, in);
			op->attr.ax.axis = ax;
			op->attr.ax.at = ir_vtype(L->p, v).dim[ax];
			v = emit(L, op);
		}
		return v;
	}
	case FE_DROPOUT: {
		Arg a[] = {{"p", 0, true, true, 0}};
		builtin_args(L, s, n, 1, a, 1);
		int x = tensor_expr(L, s, n->args.data[0]);
		if (!(a[0].value >= 0 && a[0].value < 1))
			diag_error(n->args.data[1]->loc, "dropout's p must lie in [0, 1), got %g", a[0].value);
		Op *op = mk(L, OP_DROPOUT, n->loc, 1 + L->ivars.len, NULL);
		op->in[0] = x;
		for (int i = 0; i < L->ivars.len; i++)
			op->in[1 + i] = L->ivars.data[i];
		op->attr.drop.p = a[0].value;
		op->attr.drop.site = L->sites++;
		return emit(L, op);
	}
	case FE_LOSS: {
		if (k == OP_XENT)
			return cross_entropy(L, s, n);
		arity(n, 2, 2);
		int in[2] = {tensor_expr(L, s, n->args.data[0]), tensor_expr(L, s, n->args.data[1])};
		return emit(L, mk(L, (OpKind)k, n->loc, 2, in));
	}
	}
	if (fe_fn(L->ast, n->name))
		return call_fn(L, s, n, fe_fn(L->ast, n->name));
	diag_error(n->loc, "unknown function '%s'%s", n->name, suggest(L, s, n->name, true));
}

/* v's operand when v is a transpose of its last two axes alone, with *t set; else v */
static int untransposed(Lower *L, int v, int *t)
{
	Op *d = L->p->values.data[v].def;
	if (!d || d->kind != OP_TRANSPOSE)
		return v;
	int r = ir_vtype(L->p, d->in[0]).rank;
	for (int i = 0; i < r - 2; i++)
		if (d->attr.perm[i] != i)
			return v;
	if (r < 2 || d->attr.perm[r - 2] != r - 1 || d->attr.perm[r - 1] != r - 2)
		return v;
	*t = 1;
	return d->in[0];
}

static int binary(Lower *L, Node *n, int a, int b)
{
	int in[2] = {a, b};
	if (n->op == '@') {
		/* a product with a transposed operand reads it in place (GPT's tied head, x @ transpose(E)):
		 * no copy of it, nor of its gradient; the transpose, unread, goes in dce */
		int ta = 0, tb = 0;
		in[0] = tensor(L, in[0], n->a->loc);
		in[1] = tensor(L, in[1], n->b->loc);
		Op *op = mk(L, OP_MATMUL, n->loc, 2, in);
		Type t;
		if (ir_check_op(L->p, op, &t))
			return emit(L, op); /* its error, on the operands as written */
		/* the left operand only beside one of its rank, as the adjoint takes it transposed (a batched
		 * left one beside a matrix keeps its transpose) */
		if (ir_vtype(L->p, in[0]).rank == ir_vtype(L->p, in[1]).rank)
			op->in[0] = untransposed(L, in[0], &ta);
		op->in[1] = untransposed(L, in[1], &tb);
		op->attr.mm.ta = ta;
		op->attr.mm.tb = tb;
		return emit(L, op);
	}
	static const char codes[] = "+-*/<l>g=!";
	static const OpKind kinds[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE};
	return ew_op(L, kinds[strchr(codes, n->op) - codes], n->loc, 2, in);
}

static int expr(Lower *L, Scope *s, Node *n)
{
	switch (n->kind) {
	case N_NUM:
		return constant(L, n->num, n->loc);
	case N_NAME: {
		Binding *b = lookup(s, n->name);
		if (b) {
			if (b->kind == B_IVAR)
				diag_error(n->loc, "loop variable '%s' can only be used as an index", n->name);
			return b->value;
		}
		if (fe_const(L->ast, n->name))
			return constant(L, (double)fe_const(L->ast, n->name)->value, n->loc);
		if (fe_fn(L->ast, n->name))
			diag_error(n->loc, "'%s' is a function: call it with arguments", n->name);
		diag_error(n->loc, "unknown name '%s'%s", n->name, suggest(L, s, n->name, false));
	}
	case N_NEG: {
		int x = expr(L, s, n->a);
		if (is_const(L, x))
			return constant(L, -L->p->values.data[x].def->attr.value, n->loc);
		return emit(L, mk(L, OP_NEG, n->loc, 1, &x));
	}
	case N_BIN: {
		NodeList spine = {0};
		int v = expr(L, s, fe_left_spine(n, &spine));
		for (int i = spine.len - 1; i >= 0; i--)
			v = binary(L, spine.data[i], v, expr(L, s, spine.data[i]->b));
		return v;
	}
	case N_CALL:
		return call(L, s, n);
	case N_INDEX:
		return index_expr(L, s, n);
	case N_LIST:
		return literal(L, s, n);
	default:
		unreachable();
	}
}

/* ---- tensor literals ---- */

#define MAX_LITERAL 65536

typedef struct {
	int rank;
	int64_t dim[IR_MAXRANK], at;
	double *v;
} Lit;

/* the elements of n, a number or a list at depth, into l->v in row-major order */
static void literal_fill(Lower *L, Scope *s, Node *n, Lit *l, int depth)
{
	if (n->kind != N_LIST) {
		if (depth != l->rank)
			diag_error(n->loc, "a number where a list of %lld belongs: the rows of a tensor literal have one shape",
			           (long long)l->dim[depth]);
		int e = expr(L, s, n);
		if (!is_const(L, e))
			diag_error(n->loc, "a tensor literal holds numbers and consts only (build one from tensors with concat)");
		l->v[l->at++] = L->p->values.data[e].def->attr.value;
		return;
	}
	if (depth == l->rank)
		diag_error(n->loc, "a list where a number belongs: the rows of a tensor literal have one shape");
	if (n->args.len != l->dim[depth])
		diag_error(n->loc, "this list has %d element%s where the first has %lld: the rows of a tensor literal have one shape",
		           n->args.len, n->args.len == 1 ? "" : "s", (long long)l->dim[depth]);
	for (int i = 0; i < n->args.len; i++)
		literal_fill(L, s, n->args.data[i], l, depth + 1);
}

/* [1, 2], [[1, 0], [0, 1]]: a constant f32 tensor, its shape from the nesting */
static int literal(Lower *L, Scope *s, Node *n)
{
	Lit l = {0};
	int64_t numel = 1;
	for (Node *x = n; x->kind == N_LIST; x = x->args.data[0]) {
		if (!x->args.len)
			diag_error(x->loc, "an empty list is not a tensor");
		if (l.rank == IR_MAXRANK)
			diag_error(x->loc, "a tensor literal has at most %d axes", IR_MAXRANK);
		l.dim[l.rank++] = x->args.len;
		numel *= x->args.len;
		if (numel > MAX_LITERAL)
			diag_error(n->loc, "a tensor literal has at most %d elements (load a larger constant into a buffer with --init)",
			           MAX_LITERAL);
	}
	l.v = ar_alloc(sizeof(double) * (size_t)numel);
	literal_fill(L, s, n, &l, 0);
	Op *op = mk(L, OP_LITERAL, n->loc, 0, NULL);
	op->to = ir_type(L->p->real, l.rank, l.dim);
	/* equal literals share one array, so their kernels' descriptions are equal bytes: one kernel */
	double *same = NULL;
	for (int i = 0; i < L->literals.len && !same; i++)
		if (L->literals.data[i].n == numel && !memcmp(L->literals.data[i].v, l.v, sizeof(double) * (size_t)numel))
			same = L->literals.data[i].v;
	if (same)
		l.v = same;
	else
		vec_push(&L->literals, ((LitArray){l.v, numel}));
	op->attr.lit.v = l.v;
	return emit(L, op);
}

/* ---- statements ---- */

/* the parameter or buffer that binding b names, or NULL */
static Param *param_of(Lower *L, const Binding *b)
{
	Op *d = b && b->kind == B_VALUE ? L->p->values.data[b->value].def : NULL;
	return d && d->kind == OP_PARAM ? &L->p->params.data[d->index] : NULL;
}

/* update B = e: after each training step, buffer B takes e's value from that
 * step's forward program (the runtime copies it; evaluation leaves B alone).
 * update B[l] = e, in a loop over l directly in the loss block: iteration l
 * writes layer l of a staging variable, which starts as a copy of B and
 * which the runtime copies over B. Each layer is written by one iteration
 * only, so a recomputation under checkpointing writes the same bits again. */
static void lower_update(Lower *L, Scope *s, Node *n)
{
	bool layer = n->b != NULL;
	if (layer ? s->parent != L->loss || s == L->loss : s != L->loss)
		diag_error(n->loc, layer ? "update %s[...] is only allowed in a loop directly in the loss block, not in a nested loop or function"
		                         : "update %s = e is only allowed in the loss block itself (a loop directly in it updates one layer: update %s[i] = e)",
		           n->name, n->name);
	Param *q = param_of(L, find_in(L->global, n->name));
	if (!q || !q->buffer)
		diag_error(n->loc, !q ? "'%s' is not a buffer: update names a `buffer` declaration"
		                      : "'%s' is a parameter: parameters are trained, only a `buffer` is updated", n->name);
	int qi = (int)(q - L->p->params.data);
	Binding *ib = NULL;
	if (layer) {
		ib = n->b->kind == N_NAME ? find_in(s, n->b->name) : NULL;
		if (!ib || ib->kind != B_IVAR)
			diag_error(n->b->loc, "update %s[...] takes the variable of the loop it is in as its index", n->name);
		if (q->type.rank < 1)
			diag_error(n->loc, "'%s' is a scalar: update it whole, update %s = e", n->name, n->name);
		if (ib->hi > q->type.dim[0])
			diag_error(n->b->loc, "index %s runs over %lld..%lld but %s has %lld layers", ib->name, (long long)ib->lo,
			           (long long)ib->hi, n->name, (long long)q->type.dim[0]);
	}
	Type want = layer ? ir_drop_first(q->type) : q->type;
	int v = tensor(L, expr(L, s, n->a), n->a->loc);
	if (!ir_type_eq(ir_vtype(L->p, v), want))
		diag_error(n->a->loc, layer ? "buffer '%s' has layers %s but this update is %s" : "buffer '%s' is %s but this update is %s",
		           n->name, layer ? ts(want) : ir_decl_type_str(q->type, q->stacked), ts(ir_vtype(L->p, v)));
	for (int k = 0; k < L->p->updates.len; k++)
		if (L->p->updates.data[k].param == qi)
			diag_error(n->loc, "buffer '%s' is updated twice", n->name);
	if (L->p->updates.len >= IR_MAX_UPDATES)
		diag_error(n->loc, "at most %d updates", IR_MAX_UPDATES);
	if (layer) {
		int var = ir_new_value(L->p, VK_VAR, q->type, ar_printf("update_%s", q->name), n->loc);
		L->p->values.data[var].vclass = VC_STAGE;
		int in[3] = {var, ib->value, v};
		ir_emit(L->p, L->out, mk(L, OP_STORE_SLICE, n->loc, 3, in));
		/* the layers no iteration writes keep their value: the staging variable
		 * starts as B, just before the loop (whose op follows its body) */
		int init[2] = {var, q->value};
		ir_emit(L->p, &L->p->body, mk(L, OP_ASSIGN, n->loc, 2, init));
		vec_push(&L->p->updates, ((Report){n->name, var, n->loc, qi}));
		return;
	}
	/* a leaf or a view of one would be read after the optimizer has changed it: copy */
	Op *d = L->p->values.data[v].def;
	if (!d || ir_ops[d->kind].flags & (OPF_LEAF | OPF_VIEW)) /* no def: a loop's result, which is its carried storage */
		v = emit(L, mk(L, OP_COPY, n->loc, 1, &v));
	vec_push(&L->p->updates, ((Report){n->name, v, n->loc, qi}));
}

static int block(Lower *L, Scope *s, NodeList *body, bool want_return, Loc where);

static bool has_name(NameList *l, const char *name)
{
	for (int i = 0; i < l->len; i++)
		if (!strcmp(l->data[i], name))
			return true;
	return false;
}

/* The names a loop body assigns before binding them with its own let (in
 * statement order, nested loops included): those come from outside. */
static void outer_assigns(NodeList *body, NameList locals, NameList *out)
{
	NameList mine = {0};
	for (int i = 0; i < locals.len; i++)
		vec_push(&mine, locals.data[i]);
	for (int i = 0; i < body->len; i++) {
		Node *n = body->data[i];
		if (n->kind == N_LET)
			vec_push(&mine, n->name);
		else if (n->kind == N_ASSIGN && !has_name(&mine, n->name) && !has_name(out, n->name))
			vec_push(out, n->name);
		else if (n->kind == N_FOR)
			outer_assigns(&n->args, mine, out);
	}
}

static void lower_for(Lower *L, Scope *s, Node *n)
{
	Program *p = L->p;
	NameList names = {0};
	outer_assigns(&n->args, (NameList){0}, &names);
	Vec(Binding *) carried = {0};
	for (int i = 0; i < names.len; i++) {
		Binding *b = lookup(s, names.data[i]);
		if (b && b->kind == B_VALUE && !b->fixed)
			vec_push(&carried, b);
	}
	Op *op = ir_new_op(p, OP_LOOP, n->loc, carried.len, NULL);
	op->lo = n->lo;
	op->trip = n->hi - n->lo;
	op->ncarry = carried.len;
	op->ivar = ir_new_value(p, VK_INDEX, ir_scalar(DT_INDEX), n->name, n->loc);
	op->carg = ar_alloc(sizeof(int) * (size_t)(carried.len + 1));
	op->cyield = ar_alloc(sizeof(int) * (size_t)(carried.len + 1));
	op->cout = ar_alloc(sizeof(int) * (size_t)(carried.len + 1));
	for (int k = 0; k < carried.len; k++) {
		Binding *b = carried.data[k];
		b->value = tensor(L, b->value, n->loc);
		op->in[k] = b->value;
		op->carg[k] = ir_new_value(p, VK_SSA, ir_vtype(p, b->value), b->name, n->loc);
		b->value = op->carg[k];
		b->locked++;
	}
	Scope inner = {.parent = s};
	bind(&inner, (Binding){n->name, B_IVAR, op->ivar, n->lo, n->hi, 0, true});
	Block *outer = L->out;
	L->out = &op->body;
	vec_push(&L->ivars, op->ivar);
	block(L, &inner, &n->args, false, n->loc);
	L->ivars.len--;
	L->out = outer;
	for (int k = 0; k < carried.len; k++) {
		Binding *b = carried.data[k];
		op->cyield[k] = b->value;
		op->cout[k] = ir_new_value(p, VK_SSA, ir_vtype(p, b->value), b->name, n->loc);
		b->value = op->cout[k];
		b->locked--;
	}
	ir_append(L->out, op);
}

static int block(Lower *L, Scope *s, NodeList *body, bool want_return, Loc where)
{
	for (int i = 0; i < body->len; i++) {
		Node *n = body->data[i];
		switch (n->kind) {
		case N_LET: {
			Binding *old = find_in(s, n->name);
			if (old)
				diag_error(n->loc, "'%s' is already defined in this block; assign to it with %s = ...", n->name, n->name);
			int v = expr(L, s, n->a);
			if (!L->p->values.data[v].name && !is_const(L, v))
				L->p->values.data[v].name = n->name;
			bind(s, (Binding){n->name, B_VALUE, v, 0, 0, 0, false});
			break;
		}
		case N_ASSIGN: {
			Binding *b = lookup(s, n->name);
			if (!b)
				diag_error(n->loc, "assignment to undefined name '%s' (introduce it with let)%s", n->name,
				           suggest(L, s, n->name, false));
			if (b->fixed && param_of(L, b) && param_of(L, b)->buffer)
				diag_error(n->loc, "cannot assign to buffer '%s' (it changes after a training step by `update %s = e`)", n->name, n->name);
			if (b->fixed || b->kind == B_IVAR)
				diag_error(n->loc, "cannot assign to %s '%s'", b->kind == B_IVAR ? "loop variable" : "parameter or input", n->name);
			int v = expr(L, s, n->a);
			if (b->locked) {
				v = tensor(L, v, n->loc);
				if (!ir_type_eq(ir_vtype(L->p, v), ir_vtype(L->p, b->value)))
					diag_error(n->a->loc, "'%s' is carried by the loop as %s but this assigns %s", n->name,
					           ts(ir_vtype(L->p, b->value)), ts(ir_vtype(L->p, v)));
			}
			if (!L->p->values.data[v].name && !is_const(L, v))
				L->p->values.data[v].name = n->name;
			b->value = v;
			break;
		}
		case N_FOR:
			lower_for(L, s, n);
			break;
		case N_REPORT: {
			if (s != L->loss)
				diag_error(n->loc, "report is only allowed in the loss block itself, not in a loop or function");
			int v = tensor(L, expr(L, s, n->a), n->a->loc);
			Type t = ir_vtype(L->p, v);
			if (t.rank != 0 || !ir_is_real(t.dt))
				diag_error(n->a->loc, "a report must be a real scalar such as f32[], this one is %s", ts(t));
			for (int k = 0; k < L->p->reports.len; k++)
				if (!strcmp(L->p->reports.data[k].name, n->name))
					diag_error(n->loc, "'%s' is reported twice", n->name);
			if (L->p->reports.len >= IR_MAX_REPORTS)
				diag_error(n->loc, "at most %d reports", IR_MAX_REPORTS);
			vec_push(&L->p->reports, ((Report){n->name, v, n->loc, -1}));
			break;
		}
		case N_UPDATE:
			lower_update(L, s, n);
			break;
		case N_RETURN:
			if (!want_return)
				diag_error(n->loc, "return is only allowed at the end of a function or the loss block");
			if (i != body->len - 1)
				diag_error(body->data[i + 1]->loc, "statement after return");
			return expr(L, s, n->a);
		default:
			diag_error(n->loc, "an expression cannot stand alone as a statement (bind it with let)");
		}
	}
	if (want_return)
		diag_error(where, "missing return: this block must end with `return EXPR`");
	return -1;
}

static int call_fn(Lower *L, Scope *s, Node *n, Fn *f)
{
	for (int i = 0; i < L->inlining.len; i++)
		if (!strcmp(L->inlining.data[i], f->name))
			diag_error(n->loc, "recursive call of '%s' (functions are inlined, so they cannot recurse)", f->name);
	if (L->inlining.len >= MAX_INLINE)
		diag_error(n->loc, "calls nested too deeply: '%s' would be the %dth function inlined inside another "
		           "(the limit is %d)", f->name, L->inlining.len + 1, MAX_INLINE);
	for (int i = 0; i < n->args.len; i++)
		if (n->argname[i])
			diag_error(n->args.data[i]->loc, "'%s' takes positional arguments only", f->name);
	if (n->args.len != f->pnames.len)
		diag_error(n->loc, "'%s' takes %d argument%s, got %d", f->name, f->pnames.len, f->pnames.len == 1 ? "" : "s", n->args.len);
	Scope fs = {.parent = L->global};
	for (int i = 0; i < n->args.len; i++) {
		int v = tensor_expr(L, s, n->args.data[i]);
		Type want = resolve(L, f->ptypes.data[i]);
		if (!ir_type_eq(ir_vtype(L->p, v), want))
			diag_error(n->args.data[i]->loc, "argument %d of '%s' (%s) must be %s, got %s", i + 1, f->name,
			           f->pnames.data[i], ts(want), ts(ir_vtype(L->p, v)));
		bind(&fs, (Binding){f->pnames.data[i], B_VALUE, v, 0, 0, 0, false});
	}
	vec_push(&L->inlining, f->name);
	L->called[f - L->ast->fns.data] = true;
	int r = tensor(L, block(L, &fs, &f->body, true, f->loc), f->loc);
	L->inlining.len--;
	if (!ir_type_eq(ir_vtype(L->p, r), resolve(L, f->ret)))
		diag_error(f->loc, "'%s' is declared to return %s but returns %s", f->name, ts(resolve(L, f->ret)), ts(ir_vtype(L->p, r)));
	return r;
}

/* A parameter or input: one leaf op, bound by name in the global scope. */
static int leaf(Lower *L, Scope *global, OpKind k, int index, const char *name, Loc loc)
{
	Op *op = mk(L, k, loc, 0, NULL);
	op->index = index;
	int v = emit(L, op);
	L->p->values.data[v].name = name;
	bind(global, (Binding){name, B_VALUE, v, 0, 0, 0, true});
	return v;
}

/* `weights "FILE"`: the path beside the program's own file, which the
 * executable reads at its start; every parameter and buffer then comes from
 * it (load("NAME")), and each name once. */
static void weights_file(Lower *L, FeAst *ast)
{
	Map seen = {0};
	for (int i = 0; i < ast->params.len; i++) {
		Param *q = &ast->params.data[i];
		if (ast->weights && q->init != INIT_LOAD)
			diag_error(q->loc, "the program starts from the weights file \"%s\": %s '%s' needs the initialiser load(\"NAME\")",
			           ast->weights, q->buffer ? "buffer" : "parameter", q->name);
		if (q->init != INIT_LOAD)
			continue;
		if (strlen(q->saved) > 127)
			diag_error(q->loc, "'%s' loads a name of %zu characters; names in weights files are at most 127", q->name,
			           strlen(q->saved));
		/* "{B}": one tensor a layer, layer l named with B + l there (runtime/files.c) */
		const char *br = strchr(q->saved, '{');
		if (br) {
			const char *d = br + 1;
			while (*d >= '0' && *d <= '9')
				d++;
			if (*d != '}' || d - br > 10 || strchr(d, '{') || strchr(q->saved, '}') != d)
				diag_error(q->loc, "load(\"%s\"): a layer's number is written {} or {B} (B the first layer's), once",
				           q->saved);
			if (!q->stacked)
				diag_error(q->loc, "load(\"%s\") names one tensor a layer, but '%s' is not stacked (f32[L][...])", q->saved,
				           q->name);
		}
		int other = map_get(&seen, q->saved);
		if (other >= 0)
			diag_error(q->loc, "'%s' loads \"%s\", which '%s' loads already", q->name, q->saved,
			           ast->params.data[other].name);
		map_put(&seen, q->saved, i);
	}
	if (!ast->weights)
		return;
	const char *path = ast->weights, *slash = strrchr(ast->file, '/');
	if (path[0] != '/' && slash)
		path = ar_printf("%.*s/%s", (int)(slash - ast->file), ast->file, path);
	char *abs = realpath(path, NULL);
	if (!abs || strlen(abs) > 4095 || strchr(abs, ' '))
		diag_error(ast->weights_loc, "cannot read the weights file %s: %s", path,
		           !abs ? strerror(errno) : "its full path is longer than 4095 characters or holds a space");
	L->p->weights = ar_strdup(abs);
	free(abs);
}

/* Binds the parameters and inputs in a fresh program. */
static void leaves(Lower *L, FeAst *ast, Scope *global)
{
	weights_file(L, ast);
	for (int i = 0; i < ast->params.len; i++) {
		vec_push(&L->p->params, ast->params.data[i]);
		L->p->params.data[i].type.dt = ir_resolve_dt(L->p, ast->params.data[i].type.dt);
		L->p->params.data[i].value = leaf(L, global, OP_PARAM, i, ast->params.data[i].name, ast->params.data[i].loc);
	}
	for (int i = 0; i < ast->inputs.len; i++) {
		vec_push(&L->p->inputs, ast->inputs.data[i]);
		L->p->inputs.data[i].type.dt = ir_resolve_dt(L->p, ast->inputs.data[i].type.dt);
		L->p->inputs.data[i].value = leaf(L, global, OP_INPUT, i, ast->inputs.data[i].name, ast->inputs.data[i].loc);
	}
}

/* A function the loss never calls is still checked: it is lowered once into
 * a scratch program, its arguments stood in for by inputs of their types. */
static void check_uncalled(FeAst *ast, bool *called)
{
	for (int i = 0; i < ast->fns.len; i++) {
		if (called[i])
			continue;
		Fn *f = &ast->fns.data[i];
		Lower L = {0};
		L.ast = ast;
		L.p = ir_new_program(4);
		L.out = &L.p->body;
		L.called = called;
		Scope global = {0};
		L.global = &global;
		leaves(&L, ast, &global);
		Node call = {0};
		call.kind = N_CALL;
		call.loc = f->loc;
		call.name = f->name;
		call.argname = ar_alloc(sizeof(const char *) * (size_t)(f->pnames.len + 1));
		for (int k = 0; k < f->pnames.len; k++) {
			const char *name = ar_printf("%s.arg%d", f->name, k);
			vec_push(&L.p->inputs, ((Input){.name = name, .type = resolve(&L, f->ptypes.data[k]), .loc = f->plocs.data[k]}));
			leaf(&L, &global, OP_INPUT, L.p->inputs.len - 1, name, f->plocs.data[k]);
			Node *a = ar_alloc(sizeof *a);
			a->kind = N_NAME;
			a->loc = f->plocs.data[k];
			a->name = name;
			vec_push(&call.args, a);
		}
		call_fn(&L, &global, &call, f);
	}
}

Program *fe_lower(FeAst *ast, const FeOptions *o)
{
	Lower L = {0};
	L.ast = ast;
	L.o = o;
	L.p = ir_new_program(o->real_bytes);
	L.p->device_mem = o->device_mem;
	L.p->pitch_rows = o->pitch_rows;
	L.p->split_gemms = o->split_gemms;
	L.out = &L.p->body;
	L.called = ar_alloc(sizeof(bool) * (size_t)(ast->fns.len + 1));
	Scope global = {0};
	L.global = &global;
	leaves(&L, ast, &global);
	Scope loss = {.parent = &global};
	L.loss = &loss;
	int v = tensor(&L, block(&L, &loss, &ast->loss, true, ast->loss_loc), ast->loss_loc);
	Type t = ir_vtype(L.p, v);
	if (t.rank != 0 || !ir_is_real(t.dt))
		diag_error(ast->loss_loc, "the loss must be a real scalar such as f32[], this one is %s (reduce it with sum, mean or a loss)", ts(t));
	check_uncalled(ast, L.called);
	L.p->loss = v;
	L.p->nforward = L.p->body.len;
	const char *consts = "";
	for (int i = 0; i < ast->consts.len; i++)
		consts = ar_printf("%s%s %lld\n", consts, ast->consts.data[i].name, (long long)ast->consts.data[i].value);
	L.p->consts = consts;
	return L.p;
}
