/* mem: the static memory plan. Params, gradients, optimizer state, inputs,
 * tapes and streaming slots get fixed regions; every other tensor, a loop's
 * snapshots included, gets an arena slot for its live range, packed ahead of time, so no allocator
 * runs during training. Streamed parameters and their optimizer state get
 * the pinned host pool instead. */
#include "memplan.h"

#include "../../common/revolve.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 256 /* cuBLAS and 16-byte vector accesses want aligned buffers */
/* Every value is below 2^59 bytes (ir_numel saturates), so sums checked
 * against this bound never overflow. */
#define PLAN_MAX ((int64_t)1 << 62)

typedef struct {
	int64_t start, end; /* op positions */
	int64_t body_end;   /* a revolve's: the last position of its body (before body3 and body2); else start */
} Span;

typedef struct {
	Program *p;
	int pos;
	int64_t *defpos, *last;   /* per value */
	int *root;                /* per value: root(), computed once */
	Span *loops;              /* per op position of a loop */
	Vec(Span) spans;          /* spans of the loops in stack */
} Live;

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* at + size, refused beyond any memory */
static int64_t extend(Program *p, int v, int64_t at, int64_t size)
{
	if (at > PLAN_MAX - size)
		fatal("the memory plan needs more than 2^62 bytes of device memory (at %s %s); the program is too large",
		      ir_value_name(p, v), ir_type_str(p->values.data[v].type));
	return at + size;
}

/* The storage a value really uses: views resolve to their root. */
static int root(Program *p, int v)
{
	while (p->values.data[v].res == VR_ALIAS)
		v = p->values.data[v].alias_of;
	return v;
}

static int64_t count_ops(Block *b)
{
	int64_t n = 0;
	for (int i = 0; i < b->len; i++)
		n += ir_is_loop(b->ops[i])
		     ? 2 + count_ops(&b->ops[i]->body) + count_ops(&b->ops[i]->body2) + count_ops(&b->ops[i]->body3) : 1;
	return n;
}

static void number(Live *L, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		int64_t at = L->pos++;
		if (op->out >= 0) /* an attn_lse its attention writes lives from there */
			L->defpos[op->out] = ir_attn_lse_fused(b, i) ? at - 1 : at;
		if (ir_is_loop(op)) {
			/* a revolve's bodies run interleaved: the state lives across them */
			L->defpos[op->ivar] = at;
			if (op->kind == OP_REVOLVE)
				L->defpos[op->ivar2] = at;
			if ((op->kind == OP_REVOLVE && op->ktape) || ir_loop_tail(op))
				L->defpos[op->irow] = at;
			for (int k = 0; k < op->ncarry; k++)
				L->defpos[op->carg[k]] = at;
			number(L, &op->body);
			/* a revolve's body only: a forward loop's may store into a revolve's rows (Op.sweep) */
			int64_t body_end = op->kind == OP_REVOLVE ? L->pos - 1 : at;
			number(L, &op->body3);
			number(L, &op->body2);
			int64_t end = L->pos++;
			for (int k = 0; k < op->ncarry && op->cout; k++)
				L->defpos[op->cout[k]] = end;
			L->loops[at] = (Span){at, end, body_end};
		}
	}
}

/* A use at position `at`: the value stays live to `at`, and to the end of
 * the outermost enclosing loop that does not contain its definition, since
 * the next iteration reads it again. A variable has no definition: it is live
 * from its first mention, or from the start of the outermost loop around it. */
static void use(Live *L, int v, int64_t at)
{
	Program *p = L->p;
	int r = L->root[v];
	bool var = p->values.data[r].kind == VK_VAR;
	int64_t from = at, until = at;
	for (int i = 0; i < L->spans.len; i++) {
		Span s = L->spans.data[i];
		if (!var && L->defpos[v] >= s.start && L->defpos[v] <= s.end)
			continue;
		from = s.start;
		until = s.end > at ? s.end : at;
		break;
	}
	if (until > L->last[r])
		L->last[r] = until;
	if (var && (L->defpos[r] < 0 || from < L->defpos[r]))
		L->defpos[r] = from;
}

static void uses(Live *L, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		int64_t at = L->pos++;
		for (int k = 0; k < op->nin; k++)
			use(L, op->in[k], at);
		/* a result computed in another value's storage: that storage is live from here */
		if (op->out >= 0 && L->p->values.data[op->out].res == VR_ALIAS && !(ir_ops[op->kind].flags & OPF_VIEW))
			use(L, op->out, at);
		if (!ir_is_loop(op))
			continue;
		Span s = L->loops[at];
		vec_push(&L->spans, s);
		for (int k = 0; k < op->ncarry; k++)
			use(L, op->carg[k], s.end);
		uses(L, &op->body);
		uses(L, &op->body3);
		uses(L, &op->body2);
		L->pos++;
		for (int k = 0; k < op->ncarry; k++)
			use(L, op->cyield[k], s.end);
		for (int k = 0; k < op->ncarry && op->body3.len; k++)
			use(L, op->cyield3[k], s.end);
		L->spans.len--;
	}
}

/* A revolve's snapshot slots hold something from the revolve's start, or
 * from its forward loop's start where that loop saves the segments' starts
 * (Op.sweep), to the revolve's end: they are packed in the work region
 * like any value, so a loop's snapshots take no room before or after. */
static void snapshot_lives(Live *L)
{
	Program *p = L->p;
	int64_t *start = malloc(sizeof(int64_t) * (size_t)(p->body.len + 1)), pos = 0;
	for (int i = 0; i < p->body.len; i++) {
		start[i] = pos;
		pos += count_ops(&(Block){p->body.ops + i, 1, 0});
	}
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if (op->kind != OP_REVOLVE)
			continue;
		for (int k = 0; k < op->ncarry; k++) {
			L->defpos[op->snap[k]] = start[rev_op_held_from(p->body.ops, p->body.len, i)];
			L->last[op->snap[k]] = L->loops[start[i]].end;
		}
	}
	free(start);
}

/* Views and loop results share storage with what they view. */
static void mark_aliases(Program *p, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (ir_ops[op->kind].flags & OPF_VIEW) {
			p->values.data[op->out].res = VR_ALIAS;
			p->values.data[op->out].alias_of = op->in[0];
		}
		if (op->kind == OP_LOOP) {
			for (int k = 0; k < op->ncarry; k++) {
				p->values.data[op->cout[k]].res = VR_ALIAS;
				p->values.data[op->cout[k]].alias_of = op->carg[k];
			}
		}
		if (ir_is_loop(op)) {
			mark_aliases(p, &op->body);
			mark_aliases(p, &op->body2);
			mark_aliases(p, &op->body3);
		}
	}
}

/* ---- coalescing ---- */

/* Whether op names storage root r among its operands. */
static bool mentions(Program *p, Op *op, int r)
{
	for (int k = 0; k < op->nin; k++)
		if (root(p, op->in[k]) == r)
			return true;
	return false;
}

/* The result y is copied into x at position `at` of b (an assign, a yield
 * at the body's end, or with index >= 0 a store_slice into x[index]). If
 * nothing between y's definition and the copy reads or writes x, and nothing
 * after it reads y, y is computed in x's storage: the copy becomes a copy
 * onto itself, which codegen drops. Elementwise ops may write their operand
 * x in place: every element is read and written by the same thread; any
 * other op that computes its result whole (a kernel, a GEMM, a library
 * call) may write x's storage when it does not read it. */
static void coalesce(Program *p, Block *b, int at, int y, int x, int index, const int *uses, const bool *res)
{
	Value *Y = &p->values.data[y];
	Type t = index >= 0 ? ir_drop_first(ir_vtype(p, x)) : ir_vtype(p, x);
	if (Y->res != VR_NONE || Y->kind != VK_SSA || !Y->def || res[y] || !ir_type_eq(Y->type, t))
		return;
	Op *def = Y->def;
	int flags = ir_ops[def->kind].flags;
	bool whole = !(flags & (OPF_VIEW | OPF_LEAF | OPF_WRITE)) && !ir_is_loop(def) &&
	             def->kind != OP_COPY && !mentions(p, def, root(p, x));
	if (!(flags & OPF_EW) && !whole)
		return;
	/* Looked for at most COALESCE_SPAN ops back: a long body whose tape
	 * stores all come at its end would make this quadratic. */
	enum { COALESCE_SPAN = 1024 };
	int r = root(p, x), d = at - 1;
	while (d >= 0 && d >= at - COALESCE_SPAN && b->ops[d] != Y->def)
		d--;
	if (d < 0 || b->ops[d] != Y->def)
		return;
	int seen = 1; /* the copy */
	for (int k = d + 1; k < at; k++) {
		Op *op = b->ops[k];
		/* the slice's index must be known where y is computed */
		if (ir_is_loop(op) || mentions(p, op, r) || (index >= 0 && op->out == index))
			return;
		/* a view of y would go on reading x's storage after the copy: a
		 * variable's may change there, a tape slot's stays as stored */
		if ((ir_ops[op->kind].flags & OPF_VIEW) && op->in[0] == y && index < 0)
			return;
		for (int j = 0; j < op->nin; j++)
			seen += op->in[j] == y;
	}
	if (seen != uses[y])
		return;
	Y->res = VR_ALIAS;
	Y->alias_of = x;
	Y->alias_index = index;
}

/* A body's yields computed in the carried values' storage. The copies at
 * the body's end run in order: no other yield may read a carried value. */
static void coalesce_yields(Program *p, Op *op, Block *b, const int *yields, const int *uses, const bool *res)
{
	for (int k = 0; k < op->ncarry; k++) {
		bool read = false;
		for (int j = 0; j < op->ncarry; j++)
			read |= j != k && root(p, yields[j]) == root(p, op->carg[k]);
		if (!read)
			coalesce(p, b, b->len, yields[k], op->carg[k], -1, uses, res);
	}
}

/* norow: a forward loop's row index; its stores run in some iterations only */
static void coalesce_block(Program *p, Block *b, const int *uses, const bool *res, int norow)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (op->kind == OP_ASSIGN)
			coalesce(p, b, i, op->in[1], op->in[0], -1, uses, res);
		if (op->kind == OP_STORE_SLICE && op->in[1] != norow)
			coalesce(p, b, i, op->in[2], op->in[0], op->in[1], uses, res);
		if (!ir_is_loop(op))
			continue;
		coalesce_yields(p, op, &op->body, op->cyield, uses, res);
		if (op->body3.len)
			coalesce_yields(p, op, &op->body3, op->cyield3, uses, res);
		coalesce_block(p, &op->body, uses, res, ir_loop_tail(op) ? op->irow : -1);
		coalesce_block(p, &op->body2, uses, res, -1);
		coalesce_block(p, &op->body3, uses, res, -1);
	}
}

/* every value's storage root in rt[], each chain of aliases walked once
 * (a long chain of reshapes or in-place results would make root() per use
 * quadratic) */
static void alias_roots(Program *p, int *rt)
{
	int nv = p->values.len;
	for (int v = 0; v < nv; v++)
		rt[v] = -1;
	for (int v = 0; v < nv; v++) {
		int r = v;
		while (rt[r] < 0 && p->values.data[r].res == VR_ALIAS)
			r = p->values.data[r].alias_of;
		r = rt[r] >= 0 ? rt[r] : r;
		for (int w = v; rt[w] < 0; w = p->values.data[w].alias_of) {
			rt[w] = r;
			if (p->values.data[w].res != VR_ALIAS)
				break;
		}
	}
}

/* ---- elementwise results in place ---- */

/* in_place's working arrays, over the program's values, made once for all
 * its blocks: stamps mark what belongs to the block at hand, so that a
 * loop's body costs what it names, not the program's size (ResNet-152
 * imported with its loops: each body cleared and swept every value, 18%
 * of a plan). rt is each value's storage root; each root's values are a
 * list (first, next, prev) kept as rt changes. */
typedef struct {
	Program *p;
	int *rt, *all;     /* the root; how often the program names each value */
	int *last, *last_at; /* per root: the last position the block names it (last_at: the block's stamp) */
	int *in, *in_at;   /* per value: how often the block names it */
	int *made_at;      /* per value: the stamp of the block whose op makes it */
	int *shut_at;      /* per root: its shut[] computed for the block */
	bool *shut;        /* per root: named outside the block, or made outside its ops */
	int *first, *next, *prev;
	int stamp;
} InPlace;

static int last_of(const InPlace *ip, int r)
{
	return ip->last_at[r] == ip->stamp ? ip->last[r] : -1;
}

static void set_last(InPlace *ip, int r, int pos)
{
	ip->last[r] = pos, ip->last_at[r] = ip->stamp;
}

/* the last top-level position at which each storage root is named (an op
 * inside a loop names it at the loop's position) */
static void last_named(InPlace *ip, Block *b, int at)
{
	const int *rt = ip->rt;
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		int pos = at >= 0 ? at : i;
		for (int k = 0; k < op->nin; k++)
			set_last(ip, rt[op->in[k]], pos);
		for (int k = 0; k < op->ncarry; k++) {
			set_last(ip, rt[op->carg[k]], pos);
			if (op->cyield)
				set_last(ip, rt[op->cyield[k]], pos);
			if (op->body3.len)
				set_last(ip, rt[op->cyield3[k]], pos);
		}
		if (op->out >= 0 && last_of(ip, rt[op->out]) < pos)
			set_last(ip, rt[op->out], pos);
		if (!ir_has_bodies(op))
			continue;
		last_named(ip, &op->body, pos);
		last_named(ip, &op->body2, pos);
		last_named(ip, &op->body3, pos);
	}
}

static void name_once(InPlace *ip, int v)
{
	if (ip->in_at[v] != ip->stamp)
		ip->in_at[v] = ip->stamp, ip->in[v] = 0;
	ip->in[v]++;
}

static int named(const InPlace *ip, int v)
{
	return ip->in_at[v] == ip->stamp ? ip->in[v] : 0;
}

/* how many times each value is named (read, carried or yielded) in b and the blocks inside it */
static void count_named(InPlace *ip, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			name_once(ip, op->in[k]);
		for (int k = 0; k < op->ncarry; k++) {
			name_once(ip, op->carg[k]);
			if (op->cyield)
				name_once(ip, op->cyield[k]);
			if (op->body3.len)
				name_once(ip, op->cyield3[k]);
		}
		if (!ir_has_bodies(op))
			continue;
		count_named(ip, &op->body);
		count_named(ip, &op->body2);
		count_named(ip, &op->body3);
	}
}

/* v's root becomes r (v written over storage of r): v leaves its root's list for r's */
static void move_root(InPlace *ip, int v, int r)
{
	int from = ip->rt[v];
	if (ip->prev[v] >= 0)
		ip->next[ip->prev[v]] = ip->next[v];
	else
		ip->first[from] = ip->next[v];
	if (ip->next[v] >= 0)
		ip->prev[ip->next[v]] = ip->prev[v];
	ip->prev[v] = -1, ip->next[v] = ip->first[r];
	if (ip->first[r] >= 0)
		ip->prev[ip->first[r]] = v;
	ip->first[r] = v;
	ip->rt[v] = r;
}

/* whether root r's storage is named outside the body at hand, or any of its values made outside the body's own ops */
static void shut_root(InPlace *ip, int r)
{
	if (ip->shut_at[r] == ip->stamp)
		return;
	bool shut = false;
	for (int v = ip->first[r]; v >= 0 && !shut; v = ip->next[v])
		shut = ip->made_at[v] != ip->stamp || named(ip, v) != ip->all[v];
	ip->shut_at[r] = ip->stamp, ip->shut[r] = shut;
}

/* An elementwise op whose operand of its own type dies there
 * writes its result in that operand's storage (each element is read and
 * written by the same thread, as coalesce allows): a chain such as a
 * norm's scale, shift and relu, or a gradient times a mask, holds one
 * tensor instead of two at each step. So does cross_entropy_grad in its
 * logits (ir_may_lend): a row's sums are taken before any of it is
 * written, then each element is read and written by one thread, as llm.c
 * overwrites its logits, where GPT stores everything at its peak. Only
 * work-region values, and only an operand no other operand of the op
 * shares storage with (but itself, as in x * x); inside a loop's body,
 * only storage one iteration makes and frees there.
 *
 * in_place_block does it for the ops of b (loop: the loop whose body b
 * is, or NULL at the top level). In a body, only storage local to one
 * iteration of it: every value of that storage made in b and named nowhere
 * else (all: how often each value is named in the program). */
static void in_place_block(InPlace *ip, Block *b, const Op *loop, const bool *res)
{
	Program *p = ip->p;
	int *rt = ip->rt;
	ip->stamp++;
	last_named(ip, b, -1);
	if (!loop) {
		for (int i = 0; i < ir_nresults(p); i++)
			set_last(ip, rt[ir_result(p, i)], INT_MAX);
	} else {
		count_named(ip, b);
		for (int i = 0; i < b->len; i++)
			if (b->ops[i]->out >= 0)
				ip->made_at[b->ops[i]->out] = ip->stamp;
		/* the roots the ops below may ask about, before any of them changes */
		for (int i = 0; i < b->len; i++) {
			Op *op = b->ops[i];
			for (int k = 0; k < op->nin; k++)
				shut_root(ip, rt[op->in[k]]);
			if (op->out >= 0)
				shut_root(ip, op->out), shut_root(ip, rt[op->out]);
		}
	}
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		Value *Y = op->out >= 0 ? &p->values.data[op->out] : NULL;
		if (!Y || Y->res != VR_NONE || Y->kind != VK_SSA || res[op->out])
			continue;
		for (int k = 0; k < op->nin; k++) {
			if (!ir_may_lend(op, k))
				continue;
			int x = op->in[k], r = rt[x];
			Value *R = &p->values.data[r];
			bool alone = !loop || !ip->shut[r];
			/* x read twice (x * x) is read at each element before the element is written */
			for (int j = 0; j < op->nin; j++)
				alone &= j == k || rt[op->in[j]] != r || op->in[j] == x;
			if (!alone || last_of(ip, r) != i || R->res != VR_NONE || R->kind != VK_SSA || !R->def ||
			    R->def->kind == OP_CONST || !ir_type_eq(ir_vtype(p, x), Y->type) ||
			    p->values.data[x].pitch != Y->pitch)
				continue;
			Y->res = VR_ALIAS;
			Y->alias_of = x;
			Y->alias_index = IR_IN_PLACE;
			set_last(ip, r, last_of(ip, op->out));
			if (loop)
				ip->shut[r] |= ip->shut[op->out];
			move_root(ip, op->out, r);
			break;
		}
	}
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (ir_is_loop(op)) {
			in_place_block(ip, &op->body, op, res);
			in_place_block(ip, &op->body3, op, res);
			in_place_block(ip, &op->body2, op, res);
		}
	}
}

static void in_place(Program *p, const bool *res)
{
	int nv = p->values.len;
	size_t n = (size_t)nv + 1;
	InPlace ip = {.p = p, .rt = malloc(sizeof(int) * n), .all = calloc(n, sizeof(int)), .last = malloc(sizeof(int) * n),
	              .last_at = calloc(n, sizeof(int)), .in = malloc(sizeof(int) * n), .in_at = calloc(n, sizeof(int)),
	              .made_at = calloc(n, sizeof(int)), .shut_at = calloc(n, sizeof(int)), .shut = malloc(n),
	              .first = malloc(sizeof(int) * n), .next = malloc(sizeof(int) * n), .prev = malloc(sizeof(int) * n)};
	alias_roots(p, ip.rt);
	for (int v = 0; v < nv; v++)
		ip.first[v] = ip.prev[v] = -1;
	/* each root's list, in no particular order (shut_root only asks whether any value is shut) */
	for (int v = 0; v < nv; v++) {
		int r = ip.rt[v];
		ip.next[v] = ip.first[r];
		if (ip.first[r] >= 0)
			ip.prev[ip.first[r]] = v;
		ip.first[r] = v;
	}
	/* how often the program names each value: the count at stamp 1, which the blocks' stamps pass */
	ip.stamp = 1;
	count_named(&ip, &p->body);
	for (int v = 0; v < nv; v++)
		ip.all[v] = named(&ip, v);
	in_place_block(&ip, &p->body, NULL, res);
	free(ip.rt), free(ip.all), free(ip.last), free(ip.last_at), free(ip.in), free(ip.in_at), free(ip.made_at);
	free(ip.shut_at), free(ip.shut), free(ip.first), free(ip.next), free(ip.prev);
}

/* ---- products added into their acc's target ----
 * A product (a GEMM, a reduction, an embedding's gradient) that only an
 * acc after it reads is added into the acc's target as it is made
 * (codegen's absorbed acc): it needs no storage of its own. For a tied
 * embedding's head that is a [V, D] gradient, twice; a weight's gradient
 * while its layer's input gradient is made. Not into host memory, not
 * where the product reads the target itself, nor past an op that names the
 * target or a loop. */
/* the acc after b[i] that reads its result, where no loop comes between
 * (codegen's absorbed_acc looks for the same), or NULL; up to the first op
 * that reads it, the only one when it is read once */
static Op *acc_after(Block *b, int i)
{
	int out = b->ops[i]->out;
	for (int j = i + 1; j < b->len; j++) {
		Op *x = b->ops[j];
		if (ir_is_loop(x))
			return NULL;
		if ((x->kind == OP_ACC || x->kind == OP_ACC_SLICE) && x->in[x->nin - 1] == out)
			return x;
		for (int k = 0; k < x->nin; k++)
			if (x->in[k] == out)
				return NULL;
	}
	return NULL;
}

static void acc_into(Program *p, Block *b, const Op *loop, const int *uses, const bool *res)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (ir_has_bodies(op)) {
			acc_into(p, &op->body, op, uses, res);
			acc_into(p, &op->body2, op, uses, res);
			acc_into(p, &op->body3, op, uses, res);
		}
		Op *acc = ir_adds_into(op) && uses[op->out] == 1 ? acc_after(b, i) : NULL;
		if (!acc || !ir_may_absorb(p, acc))
			continue;
		/* the ops between (a product's other half, say) must not name the acc's variable: the product is
		 * added in before them */
		bool named = false;
		for (int j = i + 1; b->ops[j] != acc; j++)
			named |= mentions(p, b->ops[j], root(p, acc->in[0]));
		if (named)
			continue;
		/* into a layer's slice: only at the loop's own index, which codegen knows wherever the body runs */
		bool whole = acc->kind == OP_ACC && acc->in[1] == op->out;
		bool layer = acc->kind == OP_ACC_SLICE && acc->in[2] == op->out && loop &&
		             (acc->in[1] == loop->ivar || acc->in[1] == loop->ivar2);
		Value *Y = &p->values.data[op->out];
		int r = root(p, acc->in[0]);
		if (!(whole || layer) || Y->res != VR_NONE || Y->kind != VK_SSA || res[op->out] ||
		    mentions(p, op, r) || p->values.data[r].res == VR_HOST)
			continue;
		Y->res = VR_ALIAS;
		Y->alias_of = acc->in[0];
		Y->alias_index = IR_ACC_INTO;
	}
}

/* ---- first-fit packing ----
 * The free space is a set of gaps ordered by offset, the last one unbounded.
 * A treap keyed by offset, each node keeping the longest gap below it, finds
 * the lowest gap that fits in O(log n); a heap of live slots ordered by end
 * frees them. The result is exactly first-fit over the live slots. */

typedef struct {
	int64_t off, len, most; /* most: the longest gap in this subtree */
	uint32_t prio;
	int l, r;
} Gap;

typedef struct {
	Vec(Gap) g;
	uint32_t seed;
} Gaps;

static int64_t most(Gaps *t, int n) { return n < 0 ? -1 : t->g.data[n].most; }

static int fix(Gaps *t, int n)
{
	Gap *x = &t->g.data[n];
	int64_t m = x->len, a = most(t, x->l), b = most(t, x->r);
	x->most = m > a ? (m > b ? m : b) : (a > b ? a : b);
	return n;
}

/* split n into keys < off and keys >= off */
static void split(Gaps *t, int n, int64_t off, int *lo, int *hi)
{
	if (n < 0) {
		*lo = *hi = -1;
		return;
	}
	if (t->g.data[n].off < off) {
		split(t, t->g.data[n].r, off, &t->g.data[n].r, hi);
		*lo = fix(t, n);
	} else {
		split(t, t->g.data[n].l, off, lo, &t->g.data[n].l);
		*hi = fix(t, n);
	}
}

static int merge(Gaps *t, int a, int b)
{
	if (a < 0 || b < 0)
		return a < 0 ? b : a;
	if (t->g.data[a].prio > t->g.data[b].prio) {
		t->g.data[a].r = merge(t, t->g.data[a].r, b);
		return fix(t, a);
	}
	t->g.data[b].l = merge(t, a, t->g.data[b].l);
	return fix(t, b);
}

static int gap_insert(Gaps *t, int root, int64_t off, int64_t len)
{
	t->seed = t->seed * 1664525u + 1013904223u;
	Gap x = {off, len, len, t->seed, -1, -1};
	vec_push(&t->g, x);
	int lo, hi;
	split(t, root, off, &lo, &hi);
	return merge(t, merge(t, lo, t->g.len - 1), hi);
}

/* removes the gap at exactly `off`, if there is one; its length in *len */
static int gap_remove(Gaps *t, int root, int64_t off, int64_t *len)
{
	int lo, mid, hi;
	split(t, root, off, &lo, &hi);
	split(t, hi, off + 1, &mid, &hi);
	*len = mid >= 0 ? t->g.data[mid].len : 0;
	return merge(t, lo, hi);
}

/* the gap at exactly `off`, or -1 */
static int gap_at(Gaps *t, int n, int64_t off)
{
	while (n >= 0 && t->g.data[n].off != off)
		n = off < t->g.data[n].off ? t->g.data[n].l : t->g.data[n].r;
	return n;
}

/* the gap at `key` becomes (off, len), its place in the order the same (no other gap's offset lies between key
 * and off), the longest gaps on its path fixed: where a remove and an insert would split and merge three times */
static void gap_set(Gaps *t, int n, int64_t key, int64_t off, int64_t len)
{
	Gap *x = &t->g.data[n];
	if (key != x->off)
		gap_set(t, key < x->off ? x->l : x->r, key, off, len);
	else
		x->off = off, x->len = len;
	fix(t, n);
}

/* the gap with the largest offset below `off`, or -1 */
static int gap_before(Gaps *t, int n, int64_t off)
{
	int best = -1;
	while (n >= 0) {
		if (t->g.data[n].off < off)
			best = n, n = t->g.data[n].r;
		else
			n = t->g.data[n].l;
	}
	return best;
}

/* the lowest gap of at least len (the unbounded last gap always is one) */
static int gap_fit(Gaps *t, int n, int64_t len)
{
	for (;;) {
		Gap *x = &t->g.data[n];
		if (most(t, x->l) >= len)
			n = x->l;
		else if (x->len >= len)
			return n;
		else
			n = x->r;
	}
}

typedef struct {
	int64_t end, off, size;
} Slot;

typedef Vec(Slot) Heap;

/* a binary min-heap of live slots by end */
static void heap_push(Heap *h, Slot s)
{
	vec_push(h, s);
	for (int i = h->len - 1; i > 0 && h->data[(i - 1) / 2].end > h->data[i].end; i = (i - 1) / 2) {
		Slot x = h->data[i];
		h->data[i] = h->data[(i - 1) / 2];
		h->data[(i - 1) / 2] = x;
	}
}

static Slot heap_pop(Heap *h)
{
	Slot top = h->data[0];
	h->data[0] = h->data[--h->len];
	for (int i = 0;;) {
		int c = 2 * i + 1;
		if (c >= h->len)
			break;
		if (c + 1 < h->len && h->data[c + 1].end < h->data[c].end)
			c++;
		if (h->data[i].end <= h->data[c].end)
			break;
		Slot x = h->data[i];
		h->data[i] = h->data[c];
		h->data[c] = x;
		i = c;
	}
	return top;
}

typedef struct {
	int v;
	int64_t start;
} Item;

static int by_start(const void *a, const void *b)
{
	const Item *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->v - y->v;
}

typedef struct {
	int v;
	int64_t start, end, size, off, busy;
} Placed;

/* a final plan's iterated greedy: its walks, the rounds of each at most, and without a lower top; the values
 * all its walks place at most (a 64th of that at pack_effort 1), the fewest rounds a walk is worth, and the
 * most values a budget's final plan walks over */
enum { PACK_WALKS = 16, PACK_ROUNDS = 200, PACK_STALL = 50, PACK_WORK = 400000, PACK_FEWEST = 10, PACK_WALK_MOST = 1024 };
/* the search for a packing within a cap (fit_search): the caps it tries, the work all its tries may do (about
 * 0.3 s on this project's machines), the most work a try may do per value, and the share of the top above the
 * bytes live at once (1 / PACK_SEARCH_GAP) below which it is not run on programs of more than PACK_SEARCH_SMALL
 * values */
enum { PACK_CAPS = 3, PACK_SEARCH_WORK = 80000000, PACK_SEARCH_EACH = 4000, PACK_SEARCH_GAP = 1024, PACK_SEARCH_SMALL = 8192 };

static int by_size(const void *a, const void *b)
{
	const Placed *x = a, *y = b;
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->v - y->v;
}

/* a placed value's extent, or a run of them: [off, end) */
typedef struct {
	int64_t off, end;
} Taken;

/* The values placed so far, by lifetime: a segment tree over positions
 * whose nodes list the values that cover the node's range (a value is in
 * the nodes that make up its lifetime) and the values that start in it (a
 * value is in each node above its start), so that the values overlapping
 * a lifetime are found in about its log-many nodes, not among all. */
typedef struct {
	int *d, len, cap;
} Ints;

typedef struct {
	int size; /* leaves: a power of two */
	Ints *cover, *starts;
} Lifetimes;

static void ints_push(Ints *l, int x)
{
	if (l->len == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->d = realloc(l->d, sizeof(int) * (size_t)l->cap);
	}
	l->d[l->len++] = x;
}

static Lifetimes lifetimes_new(int64_t npos)
{
	Lifetimes t = {1, NULL, NULL};
	while (t.size < npos)
		t.size *= 2;
	t.cover = calloc((size_t)(2 * t.size), sizeof(Ints));
	t.starts = calloc((size_t)(2 * t.size), sizeof(Ints));
	return t;
}

static void lifetimes_free(Lifetimes *t)
{
	for (int x = 0; x < 2 * t->size; x++)
		free(t->cover[x].d), free(t->starts[x].d);
	free(t->cover);
	free(t->starts);
}

static void lifetimes_add(Lifetimes *t, int i, int64_t start, int64_t end)
{
	for (int64_t lo = start + t->size, hi = end + t->size + 1; lo < hi; lo /= 2, hi /= 2) {
		if (lo & 1)
			ints_push(&t->cover[lo++], i);
		if (hi & 1)
			ints_push(&t->cover[--hi], i);
	}
	for (int64_t x = start + t->size; x >= 1; x /= 2)
		ints_push(&t->starts[x], i);
}

/* the values placed whose lifetimes overlap [start, end], into out; their count */
static int lifetimes_near(const Lifetimes *t, int64_t start, int64_t end, int *out)
{
	int m = 0;
	/* those that started by `start` and are still live there */
	for (int64_t x = start + t->size; x >= 1; x /= 2)
		for (int k = 0; k < t->cover[x].len; k++)
			out[m++] = t->cover[x].d[k];
	/* those that start after it, within the lifetime */
	for (int64_t lo = start + 1 + t->size, hi = end + t->size + 1; lo < hi; lo /= 2, hi /= 2) {
		if (lo & 1) {
			for (int k = 0; k < t->starts[lo].len; k++)
				out[m++] = t->starts[lo].d[k];
			lo++;
		}
		if (hi & 1) {
			hi--;
			for (int k = 0; k < t->starts[hi].len; k++)
				out[m++] = t->starts[hi].d[k];
		}
	}
	return m;
}

/* The extents placed so far, by lifetime, for first-fit: the segment tree
 * of Lifetimes, each node holding not the values but the union of their
 * extents, as runs in order of offset (runs that meet are one). The
 * extents that overlap a lifetime in time are the union of the runs in
 * about 3 log(positions) lists, where gathering the values themselves read
 * a mean of 676 to 1,145 a value on a DenseNet-201 import (its packings
 * were half of its compile at Feng & Huang's cut + 1); packed low, the
 * values of a node make few runs. */
typedef struct {
	Taken *d;
	int len, cap;
} Runs;

typedef struct {
	int size; /* leaves: a power of two */
	Runs *cover, *starts;
} Skyline;

static Skyline skyline_new(int64_t npos)
{
	Skyline t = {1, NULL, NULL};
	while (t.size < npos)
		t.size *= 2;
	t.cover = calloc((size_t)(2 * t.size), sizeof(Runs));
	t.starts = calloc((size_t)(2 * t.size), sizeof(Runs));
	return t;
}

static void skyline_free(Skyline *t)
{
	for (int x = 0; x < 2 * t->size; x++)
		free(t->cover[x].d), free(t->starts[x].d);
	free(t->cover);
	free(t->starts);
}

/* the first run of r[lo..len) that ends past off (len: none); runs in order of offset end in order too */
static int run_past(const Runs *r, int lo, int64_t off)
{
	int hi = r->len;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (r->d[mid].end > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* [off, end) into r: the runs it meets or touches become one */
static void runs_add(Runs *r, int64_t off, int64_t end)
{
	int i = run_past(r, 0, off - 1), j = i; /* r->d[i] the first that ends at or past off */
	while (j < r->len && r->d[j].off <= end)
		j++;
	if (i < j) {
		/* r->d[i..j) become the one run at i */
		off = r->d[i].off < off ? r->d[i].off : off;
		end = r->d[j - 1].end > end ? r->d[j - 1].end : end;
		memmove(r->d + i + 1, r->d + j, sizeof *r->d * (size_t)(r->len - j));
		r->len -= j - i - 1;
	} else {
		if (r->len == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 4;
			r->d = realloc(r->d, sizeof *r->d * (size_t)r->cap);
		}
		memmove(r->d + i + 1, r->d + i, sizeof *r->d * (size_t)(r->len - i));
		r->len++;
	}
	r->d[i] = (Taken){off, end};
}

static void skyline_add(Skyline *t, int64_t start, int64_t end, Taken e)
{
	if (e.end == e.off)
		return; /* blocks nothing */
	for (int64_t lo = start + t->size, hi = end + t->size + 1; lo < hi; lo /= 2, hi /= 2) {
		if (lo & 1)
			runs_add(&t->cover[lo++], e.off, e.end);
		if (hi & 1)
			runs_add(&t->cover[--hi], e.off, e.end);
	}
	for (int64_t x = start + t->size; x >= 1; x /= 2)
		runs_add(&t->starts[x], e.off, e.end);
}

enum { SKYLINE_LISTS = 3 * 64 };

/* The lowest offset from which `size` bytes are clear of the extents
 * placed whose lifetimes overlap [start, end]: those live at start (the
 * cover lists above its leaf) and those that start within (start, end]
 * (the starts lists of the nodes that make up that range), as Lifetimes
 * finds the values. From 0, the offset moves to the end of any run that
 * meets it until none does: the lowest clear offset, as first-fit over the
 * extents in order of offset finds it. */
static int64_t skyline_lowest(const Skyline *t, int64_t start, int64_t end, int64_t size)
{
	const Runs *l[SKYLINE_LISTS];
	int at[SKYLINE_LISTS], k = 0;
	for (int64_t x = start + t->size; x >= 1; x /= 2)
		if (t->cover[x].len)
			l[k++] = &t->cover[x];
	for (int64_t lo = start + 1 + t->size, hi = end + t->size + 1; lo < hi; lo /= 2, hi /= 2) {
		if ((lo & 1) && t->starts[lo++].len)
			l[k++] = &t->starts[lo - 1];
		if ((hi & 1) && t->starts[--hi].len)
			l[k++] = &t->starts[hi];
	}
	memset(at, 0, sizeof(int) * (size_t)k);
	int64_t off = 0;
	for (bool moved = true; moved;) {
		moved = false;
		for (int i = 0; i < k; i++) {
			const Runs *r = l[i];
			int c = at[i];
			if (c < r->len && r->d[c].end <= off)
				c = run_past(r, c + 1, off);
			/* a run that starts before off + size and ends past off meets it: off to its end */
			while (c < r->len && r->d[c].off < off + size)
				off = r->d[c++].end, moved = true;
			at[i] = c;
		}
	}
	return off;
}

/* q[] packed in its order, each at the lowest offset clear of the values
 * placed before it whose lifetimes overlap its own, into q[].off; stops
 * where the top reaches limit. The top. */
static int64_t pack_in_order(Placed *q, int n, int64_t npos, int64_t limit)
{
	Skyline t = skyline_new(npos);
	int64_t top = 0;
	for (int i = 0; i < n && top < limit; i++) {
		int64_t off = skyline_lowest(&t, q[i].start, q[i].end, q[i].size);
		q[i].off = off;
		top = off + q[i].size > top ? off + q[i].size : top;
		skyline_add(&t, q[i].start, q[i].end, (Taken){off, off + q[i].size});
	}
	skyline_free(&t);
	return top;
}

/* each value's busy: the most bytes live at once over its lifetime, from
 * the bytes live at each position (a segment tree of maxima) */
static void busy(Placed *q, int n, int64_t npos)
{
	int64_t size = 1;
	while (size < npos)
		size *= 2;
	int64_t *most = calloc((size_t)(2 * size), sizeof *most), *d = calloc((size_t)npos + 1, sizeof *d), run = 0;
	for (int i = 0; i < n; i++)
		d[q[i].start] += q[i].size, d[q[i].end + 1] -= q[i].size;
	for (int64_t t = 0; t < npos; t++)
		most[size + t] = run += d[t];
	for (int64_t x = size - 1; x > 0; x--)
		most[x] = most[2 * x] > most[2 * x + 1] ? most[2 * x] : most[2 * x + 1];
	for (int i = 0; i < n; i++) {
		int64_t b = 0;
		for (int64_t lo = q[i].start + size, hi = q[i].end + size + 1; lo < hi; lo /= 2, hi /= 2) {
			if (lo & 1)
				b = most[lo] > b ? most[lo] : b, lo++;
			if (hi & 1)
				--hi, b = most[hi] > b ? most[hi] : b;
		}
		q[i].busy = b;
	}
	free(most);
	free(d);
}

/* the busier first: -1, 1, or 0 where as busy */
static int busier(const void *a, const void *b)
{
	const Placed *x = a, *y = b;
	return (x->busy < y->busy) - (x->busy > y->busy);
}

/* the values live where the most bytes are first (each stacks on the ones
 * that share its busiest position), then the largest */
static int by_busy(const void *a, const void *b)
{
	int c = busier(a, b);
	return c ? c : by_size(a, b);
}

static int by_area(const void *a, const void *b)
{
	const Placed *x = a, *y = b;
	double ax = (double)x->size * (double)(x->end - x->start + 1), ay = (double)y->size * (double)(y->end - y->start + 1);
	if (ax != ay)
		return ax > ay ? -1 : 1;
	return by_size(a, b);
}

static int by_length(const void *a, const void *b)
{
	const Placed *x = a, *y = b;
	if (x->end - x->start != y->end - y->start)
		return x->end - x->start > y->end - y->start ? -1 : 1;
	return by_size(a, b);
}

/* Iterated greedy from q[]'s packing (its top *top, keep[] its offsets):
 * one of the values that reach the top of the last packing moves to the
 * front of the order, and the order is packed again, until the top is the
 * most bytes live at once (live), for at most `rounds` rounds and
 * PACK_STALL without a lower top; the rounds taken. The values at the top
 * are the ones the order placed too late; placed first, they stack below
 * the others. Which of them moves is drawn from seed: every run packs
 * alike. */
static int iterate(Placed *q, int n, int64_t npos, int64_t live, int rounds, uint32_t seed, int64_t *top, Placed *keep)
{
	int64_t last = *top;
	int r = 0;
	for (int stall = 0; r < rounds && stall < PACK_STALL && *top > live; r++, stall++) {
		int ntop = 0, at = 0;
		for (int i = 0; i < n; i++)
			ntop += q[i].off + q[i].size == last;
		seed = seed * 1103515245u + 12345u;
		int pick = (int)((seed >> 8) % (uint32_t)(ntop ? ntop : 1));
		for (int i = 0, seen = 0; i < n; i++)
			if (q[i].off + q[i].size == last && seen++ == pick) {
				at = i;
				break;
			}
		Placed x = q[at];
		memmove(q + 1, q, sizeof *q * (size_t)at);
		q[0] = x;
		last = pack_in_order(q, n, npos, INT64_MAX);
		if (last < *top)
			*top = last, stall = -1, memcpy(keep, q, sizeof *q * (size_t)n);
	}
	return r;
}

/* ---- a search for a packing within a cap ----
 * Depth-first over placements in order of offset, after MiniMalloc
 * (Moffitt, ASPLOS 2023). Each value goes at its floor, the top of the
 * placed values that overlap it in time, and values are placed in order of
 * (floor, rank): every packing has one in this form no higher, reached
 * once. A value is not placed where another left could go wholly below
 * its floor (a gap a later value would have filled), and a branch ends
 * where some position's unplaced bytes, stacked from the lowest offset
 * they can take there, pass the cap. Bounded by work (PACK_SEARCH_WORK:
 * a few tenths of a second on any graph). */
typedef struct {
	Placed *q;
	int n, leaves;
	int64_t cap, work;
	int64_t *tmax, *tadd;             /* over positions: the unplaced bytes at each (range add, range max) */
	int64_t *floor, *kmin, *kmax, *hmin; /* per value its floor; over ranks: (floor, rank) keys, floor + size */
	int *rank, *byrank, *ovs, *ov, *undo_v;
	int64_t *undo_f;
	int nundo;
	bool *placed;
} Fit;

/* the unplaced bytes at positions [a, b) change by v (no push-down: a node's max counts its own add) */
static void fit_add(Fit *f, int x, int lo, int hi, int a, int b, int64_t v)
{
	f->work--;
	if (b <= lo || hi <= a)
		return;
	if (a <= lo && hi <= b) {
		f->tmax[x] += v, f->tadd[x] += v;
		return;
	}
	int mid = (lo + hi) / 2;
	fit_add(f, 2 * x, lo, mid, a, b, v);
	fit_add(f, 2 * x + 1, mid, hi, a, b, v);
	f->tmax[x] = (f->tmax[2 * x] > f->tmax[2 * x + 1] ? f->tmax[2 * x] : f->tmax[2 * x + 1]) + f->tadd[x];
}

static int64_t fit_most(Fit *f, int x, int lo, int hi, int a, int b)
{
	f->work--;
	if (b <= lo || hi <= a)
		return INT64_MIN / 2;
	if (a <= lo && hi <= b)
		return f->tmax[x];
	int mid = (lo + hi) / 2;
	int64_t l = fit_most(f, 2 * x, lo, mid, a, b), r = fit_most(f, 2 * x + 1, mid, hi, a, b);
	return (l > r ? l : r) + f->tadd[x];
}

/* value i's key in the tree over ranks, after its floor or placement changed */
static void fit_key(Fit *f, int i)
{
	int x = f->leaves + f->rank[i];
	bool in = !f->placed[i];
	f->kmin[x] = in ? f->floor[i] * f->n + f->rank[i] : INT64_MAX;
	f->kmax[x] = in ? f->kmin[x] : INT64_MIN;
	f->hmin[x] = in ? f->floor[i] + f->q[i].size : INT64_MAX;
	for (x /= 2; x; x /= 2) {
		f->work--;
		int64_t lo = f->kmin[2 * x] < f->kmin[2 * x + 1] ? f->kmin[2 * x] : f->kmin[2 * x + 1];
		int64_t hi = f->kmax[2 * x] > f->kmax[2 * x + 1] ? f->kmax[2 * x] : f->kmax[2 * x + 1];
		int64_t h = f->hmin[2 * x] < f->hmin[2 * x + 1] ? f->hmin[2 * x] : f->hmin[2 * x + 1];
		if (lo == f->kmin[x] && hi == f->kmax[x] && h == f->hmin[x]) {
			/* the nodes above are as they were: their visits counted as if made (the work bounds the search) */
			f->work -= 31 - __builtin_clz((unsigned)x);
			return;
		}
		f->kmin[x] = lo, f->kmax[x] = hi, f->hmin[x] = h;
	}
}

/* the least key above `key` among the unplaced values, or INT64_MAX */
static int64_t fit_next(Fit *f, int x, int64_t key)
{
	f->work--;
	if (f->kmax[x] <= key)
		return INT64_MAX;
	if (f->kmin[x] > key)
		return f->kmin[x];
	int64_t l = fit_next(f, 2 * x, key), r = fit_next(f, 2 * x + 1, key);
	return l < r ? l : r;
}

/* places value i at its floor o (undo: fit_lift); false where a position's unplaced bytes then pass the cap */
static bool fit_place(Fit *f, int i, int64_t o)
{
	int a = (int)f->q[i].start, b = (int)f->q[i].end + 1;
	int64_t top = o + f->q[i].size;
	fit_add(f, 1, 0, f->leaves, a, b, -f->q[i].size);
	f->placed[i] = true;
	fit_key(f, i);
	for (int k = f->ovs[i]; k < f->ovs[i + 1]; k++) {
		int j = f->ov[k];
		if (!f->placed[j] && f->floor[j] < top) {
			f->undo_v[f->nundo] = j, f->undo_f[f->nundo++] = f->floor[j];
			f->floor[j] = top;
			fit_key(f, j);
		}
	}
	/* where it lies the unplaced stack on its top; elsewhere on at least o, the offsets only rise */
	return top + fit_most(f, 1, 0, f->leaves, a, b) <= f->cap && o + f->tmax[1] <= f->cap;
}

static void fit_lift(Fit *f, int i, int mark)
{
	while (f->nundo > mark) {
		f->nundo--;
		int j = f->undo_v[f->nundo];
		f->floor[j] = f->undo_f[f->nundo];
		fit_key(f, j);
	}
	f->placed[i] = false;
	fit_key(f, i);
	fit_add(f, 1, 0, f->leaves, (int)f->q[i].start, (int)f->q[i].end + 1, f->q[i].size);
}

/* The search from nothing placed, depth-first with a level per value
 * placed (a stack, not recursion: a graph has tens of thousands of
 * values): each level tries the unplaced values in order of key above the
 * one it tried last. 1: all placed (offsets in q[].off); 0: none; -1: out
 * of work. */
static int fit_run(Fit *f)
{
	typedef struct {
		int64_t key, lowest_top, off; /* the key tried last; the least floor + size when the level began */
		int i, mark;
	} Level;
	Level *st = malloc(sizeof *st * (size_t)(f->n + 1));
	st[0] = (Level){-1, f->hmin[1], 0, -1, 0};
	int d = 0, r;
	for (;;) {
		if (f->work < 0) {
			r = -1;
			break;
		}
		int64_t key = fit_next(f, 1, st[d].key);
		int i = key == INT64_MAX ? -1 : f->byrank[key % f->n];
		if (i < 0 || f->floor[i] >= st[d].lowest_top) {
			/* none left here: the level below tries its next */
			if (!d) {
				r = 0;
				break;
			}
			d--;
			fit_lift(f, st[d].i, st[d].mark);
			continue;
		}
		int64_t o = f->floor[i];
		st[d].key = key;
		if (o + f->q[i].size > f->cap)
			continue;
		st[d].i = i, st[d].off = o, st[d].mark = f->nundo;
		if (!fit_place(f, i, o)) {
			fit_lift(f, i, st[d].mark);
			continue;
		}
		if (++d == f->n) {
			for (int k = 0; k < f->n; k++)
				f->q[st[k].i].off = st[k].off;
			r = 1;
			break;
		}
		st[d] = (Level){key, f->hmin[1], 0, -1, 0};
	}
	free(st);
	return r;
}

/* the search's ranks: most bytes live over its life first, or longest first, each way ties broken */
static int rank_busy_length(const void *a, const void *b)
{
	int c = busier(a, b);
	return c ? c : by_length(a, b);
}

static int rank_busy_area(const void *a, const void *b)
{
	int c = busier(a, b);
	return c ? c : by_area(a, b);
}

/* each value's overlaps in time, into f->ovs/ov (lifetimes_near, all placed) */
static void fit_overlaps(Fit *f, Placed *q, int n, int64_t npos)
{
	Lifetimes t = lifetimes_new(npos);
	for (int i = 0; i < n; i++)
		lifetimes_add(&t, i, q[i].start, q[i].end);
	int *near = malloc(sizeof(int) * (size_t)n);
	f->ovs = malloc(sizeof(int) * (size_t)(n + 1));
	f->ovs[0] = 0;
	for (int i = 0; i < n; i++)
		f->ovs[i + 1] = f->ovs[i] + lifetimes_near(&t, q[i].start, q[i].end, near) - 1; /* less itself */
	f->ov = malloc(sizeof(int) * (size_t)(f->ovs[n] + 1));
	for (int i = 0, at = 0; i < n; i++)
		for (int k = 0, m = lifetimes_near(&t, q[i].start, q[i].end, near); k < m; k++)
			if (near[k] != i)
				f->ov[at++] = near[k];
	lifetimes_free(&t);
	free(near);
}

/* one search at cap with the ranks of order `rank`, from nothing placed: 1 found (offsets in q[].off) */
static int fit_try(Fit *f, int (*rank)(const void *, const void *), int64_t cap)
{
	Placed *s = malloc(sizeof *s * (size_t)f->n);
	for (int i = 0; i < f->n; i++)
		s[i] = f->q[i], s[i].v = i;
	qsort(s, (size_t)f->n, sizeof *s, rank);
	for (int k = 0; k < f->n; k++)
		f->rank[s[k].v] = k, f->byrank[k] = s[k].v;
	free(s);
	memset(f->tmax, 0, sizeof(int64_t) * (size_t)(2 * f->leaves));
	memset(f->tadd, 0, sizeof(int64_t) * (size_t)(2 * f->leaves));
	for (int i = 0; i < f->n; i++)
		fit_add(f, 1, 0, f->leaves, (int)f->q[i].start, (int)f->q[i].end + 1, f->q[i].size);
	for (int x = 0; x < 2 * f->leaves; x++)
		f->kmin[x] = f->hmin[x] = INT64_MAX, f->kmax[x] = INT64_MIN;
	for (int i = 0; i < f->n; i++)
		f->floor[i] = 0, f->placed[i] = false, fit_key(f, i);
	f->cap = cap, f->nundo = 0;
	return fit_run(f);
}

/* a Fit's own arrays, for n values over `leaves` positions (its overlaps, ovs and ov, set) */
static void fit_alloc(Fit *f)
{
	size_t tree = sizeof(int64_t) * (size_t)(2 * f->leaves), n = (size_t)f->n;
	f->tmax = malloc(tree), f->tadd = malloc(tree), f->kmin = malloc(tree), f->kmax = malloc(tree), f->hmin = malloc(tree);
	f->floor = malloc(sizeof(int64_t) * n);
	f->rank = malloc(sizeof(int) * n);
	f->byrank = malloc(sizeof(int) * n);
	f->placed = malloc(n);
	f->undo_v = malloc(sizeof(int) * (size_t)(f->ovs[f->n] + 1));
	f->undo_f = malloc(sizeof(int64_t) * (size_t)(f->ovs[f->n] + 1));
}

static void fit_free(Fit *f)
{
	free(f->tmax), free(f->tadd), free(f->kmin), free(f->kmax), free(f->hmin), free(f->floor), free(f->rank), free(f->byrank);
	free(f->placed), free(f->undo_v), free(f->undo_f);
}

/* one search at a cap in one order of ranks: with `pair`, two at once, the second on a thread of its own */
typedef struct {
	Fit f;
	int (*rank)(const void *, const void *);
	int64_t cap, work;
	int found;
} FitSide;

static void *fit_side(void *arg)
{
	FitSide *s = arg;
	s->f.work = s->work;
	s->found = fit_try(&s->f, s->rank, s->cap);
	return NULL;
}

/* The search from a packing at peak towards the bytes live at once
 * (live): the cap at live first (on a large program, near the packing:
 * below), then halfway to the lowest found,
 * PACK_CAPS caps in all, each with each order of ranks (with `pair`, two
 * orders at a time on two threads, the first in order that fits taken: the
 * packing one thread finds). best[] becomes the lowest found; its top. */
static int64_t fit_search(Placed *q, int n, int64_t npos, int64_t live, int64_t peak, Placed *best, bool pair)
{
	int (*rank[])(const void *, const void *) = {rank_busy_length, by_length, rank_busy_area, by_area};
	/* a (floor, rank) key is floor * n + rank */
	if (peak >= INT64_MAX / 4 / (n + 1))
		return peak;
	/* s[0] places q itself; s[1], with `pair`, a copy of it */
	FitSide s[2] = {{.f = {.q = q, .n = n, .leaves = 1}}};
	Fit *f = &s[0].f;
	while (f->leaves < npos || f->leaves < n)
		f->leaves *= 2;
	fit_overlaps(f, q, n, npos);
	fit_alloc(f);
	if (pair) {
		s[1].f = *f;
		s[1].f.q = malloc(sizeof *q * (size_t)n);
		memcpy(s[1].f.q, q, sizeof *q * (size_t)n);
		fit_alloc(&s[1].f);
	}
	int64_t lo = live, cap = live, work = PACK_SEARCH_WORK / (4 * PACK_CAPS) < (int64_t)n * PACK_SEARCH_EACH
	                                          ? PACK_SEARCH_WORK / (4 * PACK_CAPS) : (int64_t)n * PACK_SEARCH_EACH;
	/* On a large program the search goes down from an eighth of the gap below the packing, each round's tries
	 * with a quarter of what is left of the whole work, at most a quarter of it: there one try cannot place
	 * every value within the small programs' share of it, at any cap (DenseNet-201 imported at min-memory,
	 * 12,859 values: 16 M places its packing 2.5% above live; 6.7 M places nothing), and the caps near live
	 * found nothing at any work tried. What a round spent is counted as one thread would spend it, in order
	 * to the order that found (the same bits on one thread or two). */
	bool down = n > PACK_SEARCH_SMALL;
	int64_t left = PACK_SEARCH_WORK;
	if (down)
		cap = (peak - (peak - live) / 8) / ALIGN * ALIGN;
	for (int round = 0; round < PACK_CAPS && cap < peak && cap >= lo; round++) {
		if (down) {
			work = left / 4 < PACK_SEARCH_WORK / 4 ? left / 4 : PACK_SEARCH_WORK / 4;
			if (work < (int64_t)n * PACK_FEWEST)
				break;
		}
		bool found = false;
		for (int k = 0; k < 4 && !found; k += pair ? 2 : 1) {
			for (int i = 0; i < 1 + pair; i++)
				s[i].rank = rank[k + i], s[i].cap = cap, s[i].work = work;
			util_pair(fit_side, &s[0], pair ? fit_side : NULL, &s[1]);
			found = s[0].found == 1;
			left -= work - s[0].f.work;
			if (pair && !found) {
				found = s[1].found == 1;
				left -= work - s[1].f.work;
				if (found)
					for (int i = 0; i < n; i++)
						q[i].off = s[1].f.q[i].off;
			}
		}
		if (found) {
			peak = 0;
			for (int i = 0; i < n; i++)
				peak = q[i].off + q[i].size > peak ? q[i].off + q[i].size : peak;
			memcpy(best, q, sizeof *q * (size_t)n);
		} else if (down && !round) {
			break;
		} else
			lo = cap + 1;
		cap = (lo + peak) / 2 / ALIGN * ALIGN;
		if (cap < lo)
			break;
	}
	fit_free(f);
	if (pair)
		fit_free(&s[1].f), free(s[1].f.q);
	free(f->ovs), free(f->ov);
	return peak;
}

/* The last packing pack_again found at each pack_effort, and its input:
 * a compile plans the same program more than once (the stream pass and the
 * verifier the final one; a search a choice it has planned before: the
 * chain fit's, four times on DenseNet-201 imported), and the packing is the
 * plan's costly part. The same input packs the same: every order and walk
 * is deterministic. */
static struct {
	Placed *in, *out;
	int n;
	int64_t peak;
} last[3];

static bool same_input(int effort, const Placed *q, int n)
{
	if (n != last[effort].n || !last[effort].in)
		return false;
	for (int i = 0; i < n; i++)
		if (q[i].v != last[effort].in[i].v || q[i].start != last[effort].in[i].start ||
		    q[i].end != last[effort].in[i].end || q[i].size != last[effort].in[i].size)
			return false;
	return true;
}

/* pack_again's orders on two threads (Program.search_threads, two CPUs):
 * each side packs its own copy of q in its orders (k, k + 2), each bounded
 * by the lowest top its side found before; the lowest of the four, the
 * first in order of k among equal tops, is what one thread packing all four
 * in turn keeps (it keeps a packing only below every earlier one's top).
 * DenseNet-201 imported, its final plan at Feng & Huang's cut + 1: 0.86 to
 * 0.76 s (2026-12-06) */
typedef struct {
	Placed *q, *best;
	int n, first;
	int64_t npos, keep_below, top; /* top: the side's lowest, INT64_MAX where none below keep_below */
	int (**order)(const void *, const void *);
	int k; /* the order that found it */
} OrderSide;

static void *order_side(void *arg)
{
	OrderSide *s = arg;
	s->top = INT64_MAX, s->k = -1;
	for (int k = s->first; k < 4; k += 2) {
		qsort(s->q, (size_t)s->n, sizeof *s->q, s->order[k]);
		int64_t top = pack_in_order(s->q, s->n, s->npos, s->keep_below);
		if (top < s->keep_below)
			memcpy(s->best, s->q, sizeof *s->q * (size_t)s->n), s->keep_below = s->top = top, s->k = k;
	}
	return NULL;
}

/* Packed again where first-fit in order of start (its top: peak) is
 * above the most bytes live at once (live): largest first, kept where
 * that is below keep_below; with Program.pack_effort 1 also busiest
 * first, largest area first and longest first, then a walk of iterated
 * greedy from the lowest of them; with 2 (once the choices are made),
 * PACK_WALKS walks. The lowest is kept, and placed. The peak. */
static int64_t pack_again(Program *p, Placed *q, int n, int64_t npos, int64_t base, int64_t peak, int64_t keep_below,
                          int64_t live)
{
	int (*order[])(const void *, const void *) = {by_size, by_busy, by_area, by_length};
	int orders = p->pack_effort ? 4 : 1, walks = p->pack_effort > 1 ? PACK_WALKS : p->pack_effort;
	/* a final plan of many values packs without walks, which cost seconds there (a budget's fit compares
	 * plans at pack_effort 2 only on graphs of few values). The least's plan walked on any until issue 62:
	 * on bench/graphs.sh's six networks and four torchvision imports (1,329 to 7,000 values) its walks
	 * lowered DARTS' least by 256 bytes and nothing else, in up to 2.2 s (Inception-v3 imported) */
	if (p->pack_effort > 1 && n > PACK_WALK_MOST)
		walks = 0;
	/* the values all walks place: fewer rounds on large programs, where each packing costs more */
	int64_t work = p->pack_effort > 1 ? PACK_WORK : PACK_WORK / 64;
	Placed *best = malloc(sizeof *best * (size_t)n);
	bool found = false, hard = p->pack_effort > 1;
	int e = p->pack_effort < 0 ? 0 : p->pack_effort > 2 ? 2 : p->pack_effort;
	if (same_input(e, q, n)) {
		memcpy(best, last[e].out, sizeof *q * (size_t)n);
		found = last[e].peak < keep_below, peak = found ? last[e].peak : peak;
		walks = orders = 0;
	}
	if (orders) {
		free(last[e].in);
		last[e].in = malloc(sizeof *q * (size_t)n), last[e].n = n;
		memcpy(last[e].in, q, sizeof *q * (size_t)n);
	}
	if (orders)
		busy(q, n, npos);
	bool par = false;
	if (orders == 4 && p->search_threads > 1 && util_cpus() > 1) {
		Placed *q2 = malloc(sizeof *q * (size_t)n), *best2 = malloc(sizeof *q * (size_t)n);
		memcpy(q2, q, sizeof *q * (size_t)n);
		OrderSide side[2] = {{q, best, n, 0, npos, keep_below, 0, order, 0}, {q2, best2, n, 1, npos, keep_below, 0, order, 0}};
		util_pair(order_side, &side[0], order_side, &side[1]);
		/* the lower; on equal tops the earlier order */
		int w = side[1].top < side[0].top || (side[1].top == side[0].top && side[1].k >= 0 && side[1].k < side[0].k);
		if (side[w].top < keep_below) {
			if (w)
				memcpy(best, best2, sizeof *q * (size_t)n);
			peak = keep_below = side[w].top, found = true;
		}
		free(q2), free(best2);
		/* q as one thread leaves it, in the last order: fit_search's ranks break ties by position in q */
		qsort(q, (size_t)n, sizeof *q, order[3]);
		par = true;
	}
	for (int k = 0; k < orders && !par; k++) {
		qsort(q, (size_t)n, sizeof *q, order[k]);
		int64_t top = pack_in_order(q, n, npos, keep_below);
		if (top < keep_below)
			memcpy(best, q, sizeof *q * (size_t)n), peak = keep_below = top, found = true;
	}
	/* the walks start from the best orders' packing: the search's packing is in no order they can walk from */
	Placed *from = NULL;
	if (walks && found && peak > live) {
		from = malloc(sizeof *from * (size_t)n);
		memcpy(from, best, sizeof *q * (size_t)n);
	}
	/* on a large program the search only where the orders' packing is a 1,024th or more above the bytes live at
	 * once: within it, the search spent its whole work and found nothing on every large program measured
	 * (DenseNet-121 and -201 imported, at Feng & Huang's cut + 1: 0.07% above, 0.3 s of DenseNet-201's 2.2), and
	 * it could save no more than that; on a small one it is cheap, and closes such gaps (the sample DenseNet's
	 * store-everything plan: 512 bytes) */
	if (hard && orders && peak > live && (n <= PACK_SEARCH_SMALL || (peak - live) >= peak / PACK_SEARCH_GAP)) {
		int64_t top = fit_search(q, n, npos, live, peak, best, p->search_threads > 1);
		found |= top < peak, peak = top;
	}
	if (from && peak > live) {
		/* each walk with its own seed: some reach the bytes live at once where others stop above them
		 * (issue 40's small Inception: not within 4 walks, within 8) */
		for (int walk = 0; walk < walks && peak > live && work >= (int64_t)n * PACK_FEWEST; walk++) {
			memcpy(q, from, sizeof *q * (size_t)n);
			int rounds = work / n < PACK_ROUNDS ? (int)(work / n) : PACK_ROUNDS;
			work -= (int64_t)n * iterate(q, n, npos, live, rounds, 12345u + (uint32_t)walk, &peak, best);
		}
	}
	free(from);
	if (orders) {
		free(last[e].out);
		last[e].out = malloc(sizeof *q * (size_t)n);
		memcpy(last[e].out, best, sizeof *q * (size_t)n);
		last[e].peak = found ? peak : INT64_MAX;
	}
	if (found)
		for (int i = 0; i < n; i++) {
			extend(p, best[i].v, base + best[i].off, best[i].size);
			p->values.data[best[i].v].offset = base + best[i].off;
		}
	free(best);
	return peak;
}

/* mem_verify's check of a packing: values sorted by start, each compared
 * with those still live where it starts */
static bool checking;

static int by_start_placed(const void *a, const void *b)
{
	const Placed *x = a, *y = b;
	return x->start != y->start ? (x->start > y->start) - (x->start < y->start) : x->v - y->v;
}

static void check_packing(Program *p, Placed *q, int n)
{
	qsort(q, (size_t)n, sizeof *q, by_start_placed);
	int *live = malloc(sizeof(int) * (size_t)(n + 1)), nlive = 0;
	for (int i = 0; i < n; i++) {
		int m = 0;
		for (int k = 0; k < nlive; k++) {
			const Placed *a = &q[live[k]];
			if (a->end < q[i].start)
				continue;
			live[m++] = live[k];
			if (a->off < q[i].off + q[i].size && q[i].off < a->off + a->size)
				die("the memory plan puts %s (positions %lld to %lld, bytes %lld to %lld) and %s (%lld to %lld, "
				    "%lld to %lld) in the same bytes while both are live", ir_value_name(p, a->v), (long long)a->start,
				    (long long)a->end, (long long)a->off, (long long)(a->off + a->size), ir_value_name(p, q[i].v),
				    (long long)q[i].start, (long long)q[i].end, (long long)q[i].off, (long long)(q[i].off + q[i].size));
		}
		nlive = m;
		live[nlive++] = i;
	}
	free(live);
}

/* Packing of live ranges, first-fit in order of start, and largest first
 * where that is markedly lower. Returns the peak. */
/* DPC_PEAK_DUMP (the final plan's packing): what is live where the work region's live bytes are most, on
 * stderr, for whoever works on the selection (issue 40) */
static void dump_peak(Program *p, const Placed *q, int n, int64_t at, int64_t live)
{
	fprintf(stderr, "the most bytes live at once: %lld, at position %lld:\n", (long long)live, (long long)at);
	for (int i = 0; i < n; i++) {
		Op *d = p->values.data[q[i].v].def;
		if (q[i].start <= at && at <= q[i].end)
			fprintf(stderr, "  %-24s %10lld bytes, live %lld to %lld, %s%s\n", ir_value_name(p, q[i].v), (long long)q[i].size,
			        (long long)q[i].start, (long long)q[i].end, d ? ir_ops[d->kind].name : "a variable",
			        d && d->recomputed ? " (computed again)" : "");
	}
}

/* mem_plan_floor's plan: the work region's most bytes live at once, not packed */
static bool floor_only, floor_outside; /* floor_outside: with floor_only, at positions outside the loops */
static int64_t floor_packed; /* with floor_only: the work region's most bytes live at once */

/* items[0..n) as values to place: their lifetimes (L's) and aligned bytes, into q[]; the positions they span */
static int64_t placed_of(Program *p, Live *L, const Item *items, int n, Placed *q)
{
	int64_t npos = 1;
	for (int i = 0; i < n; i++) {
		int v = items[i].v;
		q[i] = (Placed){v, items[i].start, L->last[v] >= items[i].start ? L->last[v] : items[i].start,
		                align_up(ir_value_bytes(p, &p->values.data[v])), 0, 0};
		npos = q[i].end + 1 > npos ? q[i].end + 1 : npos;
	}
	return npos;
}

/* the most bytes q[0..n) hold at once, and the first position where they do in *at */
/* the most bytes live at once and where (*at); with `outside` (the loops' spans by their first position), only
 * at positions outside every top-level loop or within a revolve's body (not its taped body, body3, nor its
 * adjoint's, body2) */
static int64_t most_live(const Placed *q, int n, int64_t npos, int64_t *at, const Span *outside)
{
	int64_t *d = calloc((size_t)npos + 1, sizeof *d), run = 0, most = 0, skip = -1, from = 0, to = -1;
	for (int i = 0; i < n; i++)
		d[q[i].start] += q[i].size, d[q[i].end + 1] -= q[i].size;
	*at = 0;
	for (int64_t t = 0; t < npos; t++) {
		run += d[t];
		if (outside && t > skip && outside[t].end > t)
			skip = outside[t].end, from = t + 1, to = outside[t].body_end;
		if ((t > skip || (t >= from && t <= to)) && run > most)
			most = run, *at = t;
	}
	free(d);
	return most;
}

static int64_t pack(Program *p, Live *L, int64_t base)
{
	int n = 0;
	Item *items = calloc((size_t)p->values.len + 1, sizeof *items);
	for (int v = 0; v < p->values.len; v++) {
		Value *x = &p->values.data[v];
		if (x->res == VR_NONE && x->kind != VK_INDEX && ir_value_bytes(p, x) > 0 && L->defpos[v] >= 0 &&
		    !(x->def && x->def->kind == OP_CONST))
			items[n++] = (Item){v, L->defpos[v]};
	}
	if (floor_only) {
		Placed *q = malloc(sizeof *q * (size_t)(n + 1));
		int64_t at, most = most_live(q, n, placed_of(p, L, items, n, q), &at, floor_outside ? L->loops : NULL);
		free(q);
		free(items);
		return most;
	}
	qsort(items, (size_t)n, sizeof *items, by_start);
	/* sized so that vec_push never grows them (each value inserts at most two gaps, and is live once), and
	 * freed below: a search plans thousands of times */
	Gap *gaps = malloc(sizeof(Gap) * (size_t)(2 * n + 8));
	Slot *slots = malloc(sizeof(Slot) * (size_t)(n + 8));
	Gaps t = {{gaps, 0, 2 * n + 8}, 1};
	int root = gap_insert(&t, -1, 0, PLAN_MAX);
	Heap live = {slots, 0, n + 8};
	int64_t peak = 0;
	for (int i = 0; i < n; i++) {
		Value *x = &p->values.data[items[i].v];
		int64_t size = align_up(ir_value_bytes(p, x)), start = items[i].start, len;
		/* slots that ended before this start are free: each merges with the gaps beside it */
		while (live.len && live.data[0].end < start) {
			Slot s = heap_pop(&live);
			int64_t off = s.off, end = s.off + s.size;
			int after = gap_at(&t, root, end), b = gap_before(&t, root, off);
			bool joins = b >= 0 && t.g.data[b].off + t.g.data[b].len == off;
			int64_t top = after >= 0 ? end + t.g.data[after].len : end;
			if (joins) {
				/* the gap before grows over the slot and the gap after it */
				if (after >= 0)
					root = gap_remove(&t, root, end, &len);
				gap_set(&t, root, t.g.data[b].off, t.g.data[b].off, top - t.g.data[b].off);
			} else if (after >= 0) {
				gap_set(&t, root, end, off, top - off);
			} else {
				root = gap_insert(&t, root, off, end - off);
			}
		}
		int g = gap_fit(&t, root, size);
		int64_t off = t.g.data[g].off, glen = t.g.data[g].len;
		extend(p, items[i].v, base + off, size);
		if (glen > size)
			gap_set(&t, root, off, off + size, glen - size);
		else
			root = gap_remove(&t, root, off, &len);
		heap_push(&live, (Slot){L->last[items[i].v] >= start ? L->last[items[i].v] : start, off, size});
		x->res = VR_ARENA;
		x->offset = base + off;
		if (off + size > peak)
			peak = off + size;
	}
	/* Packed again (pack_again): first-fit in order of start leaves gaps
	 * that a later, larger value cannot use. The searches' plans and the
	 * final one (pack_effort) may pack differently, the final at or below:
	 * a budget a search fitted is met by the final plan. No packing is
	 * below the most bytes live at once: where first-fit is at that, no
	 * other is tried. */
	if (n > 1) {
		Placed *q = malloc(sizeof *q * (size_t)n);
		int64_t npos = placed_of(p, L, items, n, q), at_most, live_most = most_live(q, n, npos, &at_most, NULL);
		if (p->pack_effort && getenv("DPC_PEAK_DUMP"))
			dump_peak(p, q, n, at_most, live_most);
		p->plan_live = live_most;
		/* in the searches' plans the second packing is kept only where it saves 1/64 of the work region: it
		 * fills the region's top for most of the step, so that the memory picture (series) no longer
		 * shows when the memory is used */
		int64_t keep_below = p->pack_effort ? peak : peak - peak / 64;
		if (live_most < keep_below)
			peak = pack_again(p, q, n, npos, base, peak, keep_below, live_most);
		if (checking) {
			for (int i = 0; i < n; i++)
				q[i].off = p->values.data[q[i].v].offset - base;
			check_packing(p, q, n);
		}
		free(q);
	}
	free(items);
	free(gaps);
	free(slots);
	return peak;
}

typedef struct {
	int64_t top;
	int from, to; /* buckets */
} Extent;

static int by_top(const void *a, const void *b)
{
	int64_t x = ((const Extent *)a)->top, y = ((const Extent *)b)->top;
	return (x < y) - (x > y);
}

static int next_open(int *up, int b)
{
	while (up[b] != b)
		b = up[b] = up[up[b]];
	return b;
}

/* Program.mem_series: each bucket of positions takes the highest top of
 * the packed values live in it (above the ones, which the work region
 * starts with: base is where the packing starts), the largest first; a
 * union-find skips the buckets already set, so the work is the sort. */
static void series(Program *p, Live *L, int64_t npos, int64_t base, int64_t ones)
{
	int nb = p->mem_points, n = 0;
	Extent *e = malloc(sizeof *e * (size_t)(p->values.len + 1));
	int *up = malloc(sizeof *up * (size_t)(nb + 1));
	for (int v = 0; v < p->values.len; v++) {
		Value *x = &p->values.data[v];
		if (x->res != VR_ARENA || x->offset < base || L->defpos[v] < 0)
			continue;
		int64_t last = L->last[v] > L->defpos[v] ? L->last[v] : L->defpos[v];
		e[n++] = (Extent){ones + x->offset - base + align_up(ir_value_bytes(p, x)), (int)(L->defpos[v] * nb / (npos + 1)),
		                  (int)(last * nb / (npos + 1))};
	}
	qsort(e, (size_t)n, sizeof *e, by_top);
	p->mem_series = ar_alloc(sizeof(int64_t) * (size_t)nb);
	for (int b = 0; b <= nb; b++)
		up[b] = b;
	for (int b = 0; b < nb; b++)
		p->mem_series[b] = ones;
	for (int i = 0; i < n; i++)
		for (int b = next_open(up, e[i].from); b <= e[i].to; b = next_open(up, b)) {
			p->mem_series[b] = e[i].top;
			up[b] = b + 1;
		}
	free(e);
	free(up);
}

/* Program.inner_live: per top-level op, the most bytes of the work region
 * that the tensors made inside it (a loop's body values, not its results)
 * hold at once while it runs */
static void inner_live(Program *p, Live *L, int64_t npos, int64_t base)
{
	int *owner = malloc(sizeof(int) * (size_t)(npos + 1));
	int64_t *start = malloc(sizeof(int64_t) * (size_t)(p->body.len + 1)), *d = calloc((size_t)npos + 2, sizeof *d);
	int64_t pos = 0;
	for (int i = 0; i < p->body.len; i++) {
		Block one = {p->body.ops + i, 1, 0};
		start[i] = pos;
		for (int64_t n = count_ops(&one); n > 0; n--)
			owner[pos++] = i;
		p->inner_live[i] = 0;
	}
	for (int v = 0; v < p->values.len; v++) {
		Value *x = &p->values.data[v];
		int64_t def = L->defpos[v];
		if (x->res != VR_ARENA || x->offset < base || def < 0 || def >= npos)
			continue;
		int i = owner[def];
		Op *op = p->body.ops[i];
		int64_t end = start[i] + count_ops(&(Block){p->body.ops + i, 1, 0}) - 1;
		if (!(ir_is_loop(op)) || def <= start[i] || def >= end)
			continue;
		int64_t last = L->last[v] < def ? def : L->last[v] > end ? end : L->last[v];
		d[def] += align_up(ir_value_bytes(p, x));
		d[last + 1] -= align_up(ir_value_bytes(p, x));
	}
	int64_t run = 0;
	for (int64_t t = 0; t < npos; t++) {
		run += d[t];
		int i = owner[t];
		p->inner_live[i] = run > p->inner_live[i] ? run : p->inner_live[i];
	}
	free(owner);
	free(start);
	free(d);
}

static void leading_sums(Program *p, Block *b)
{
	for (int i = 0; i < b->len; i++) {
		int64_t m, n;
		if (ir_leading_sum(p, b->ops[i], &m, &n)) {
			DType dt = ir_vtype(p, b->ops[i]->in[0]).dt;
			if (m > p->ones_len[dt])
				p->ones_len[dt] = m;
		}
		if (ir_is_loop(b->ops[i])) {
			leading_sums(p, &b->ops[i]->body);
			leading_sums(p, &b->ops[i]->body2);
			leading_sums(p, &b->ops[i]->body3);
		}
	}
}

int64_t mem_aligned(Program *p, Type t) { return align_up(ir_bytes(p, t)); }

static int64_t place(Program *p, int v, int64_t at)
{
	Value *x = &p->values.data[v];
	x->res = VR_ARENA;
	x->offset = at;
	int64_t size = align_up(ir_value_bytes(p, x));
	return extend(p, v, at, size) - at;
}

static void plan(Program *p);

/* Adam's two moments per trained parameter: variables like the gradients,
 * planned with them, so that the budget covers them. With --ranks N each
 * rank keeps and updates one share of every parameter's (ZeRO stage 1):
 * ceil(n / N) elements, flat. The stream pass gives a parameter it streams
 * whole moments again (they live in host memory). Under bf16-mixed the
 * state is f32, and each trained parameter has an f32 master copy and
 * gradient sum besides its bf16 value and gradient. */
static int state_var(Program *p, Type t, const char *name, Loc loc)
{
	int v = ir_new_value(p, VK_VAR, t, name, loc);
	p->values.data[v].vclass = VC_OPT;
	return v;
}

void mem_optimizer_state(Program *p)
{
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->grad < 0)
			continue;
		Type whole = q->type;
		if (p->mixed)
			whole.dt = DT_F32;
		if (p->mixed && q->master < 0) {
			q->master = state_var(p, whole, ar_printf("master_%s", q->name), q->loc);
			q->gsum = state_var(p, whole, ar_printf("grad_sum_%s", q->name), q->loc);
		}
		if (p->optimizer != OPT_ADAM || q->opt_m >= 0)
			continue;
		Type t = whole;
		if (p->ranks > 1) {
			int64_t n = ir_numel(q->type);
			t = ir_type(whole.dt, 1, (int64_t[]){(n + p->ranks - 1) / p->ranks});
		}
		q->opt_m = state_var(p, t, ar_printf("adam_m_%s", q->name), q->loc);
		q->opt_v = state_var(p, t, ar_printf("adam_v_%s", q->name), q->loc);
	}
}

int64_t mem_plan(Program *p)
{
	mem_optimizer_state(p);
	plan(p);
	return p->arena_bytes;
}

int64_t mem_plan_floor(Program *p)
{
	/* the memory picture and the loops' inner peaks read the offsets, which this plan does not set */
	int points = p->mem_points;
	int64_t *inner = p->inner_live;
	p->mem_points = 0, p->inner_live = NULL;
	mem_optimizer_state(p);
	floor_only = true;
	plan(p);
	floor_only = false;
	p->mem_points = points, p->inner_live = inner;
	return p->arena_bytes;
}

/* The bytes every choice of rows plans at least, where the rows as they are drop none (ckpt's rows search):
 * the fixed regions but the tapes, slots and ones (which the choice changes), and the most bytes live at once
 * at a position outside every loop or within a revolve's body, which advances a step untaped (the rows change
 * its taped body and its adjoint's, and a forward loop's stores into its rows). A dropped value that a loop's adjoint step computes again reads values of
 * its step, or values made outside the loop, whose lives that can only lengthen: at those positions nothing
 * a choice drops is live, and what is live stays so. */
int64_t mem_floor_outside(Program *p)
{
	int points = p->mem_points;
	int64_t *inner = p->inner_live;
	p->mem_points = 0, p->inner_live = NULL;
	mem_optimizer_state(p);
	floor_only = floor_outside = true;
	plan(p);
	floor_only = floor_outside = false;
	p->mem_points = points, p->inner_live = inner;
	return p->plan_params + p->plan_grads + p->plan_opt + p->plan_inputs + floor_packed;
}

/* a streamed tensor's place in the host pool */
static int64_t host_place(Program *p, int v, int64_t at)
{
	Value *x = &p->values.data[v];
	x->res = VR_HOST;
	x->offset = at;
	return extend(p, v, at, align_up(ir_value_bytes(p, x))) - at;
}

static void plan(Program *p)
{
	int nv = p->values.len;
	for (int v = 0; v < nv; v++) {
		p->values.data[v].res = VR_NONE;
		p->values.data[v].alias_of = -1;
		p->values.data[v].alias_index = -1;
	}
	mem_pitch(p);
	mark_aliases(p, &p->body);

	/* Fixed regions first: they live for the whole step. */
	int64_t at = 0, mark = 0, host = 0;
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->streamed)
			host += host_place(p, q->value, host);
		else
			at += place(p, q->value, at);
	}
	p->plan_params = at - mark, mark = at;
	for (int i = 0; i < p->params.len; i++)
		if (p->params.data[i].grad >= 0)
			at += place(p, p->params.data[i].grad, at);
	p->plan_grads = at - mark, mark = at;
	/* the optimizer's state: the moments, and under bf16-mixed the master copy and the gradients' sum;
	 * a streamed parameter's in the host pool, with the place its gradients come down to */
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		int state[5] = {q->opt_m, q->opt_v, q->master, q->gsum, q->hgrad};
		for (int k = 0; k < 5; k++) {
			if (state[k] < 0)
				continue;
			if (q->streamed)
				host += host_place(p, state[k], host);
			else
				at += place(p, state[k], at);
		}
	}
	p->plan_opt = at - mark, mark = at;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		for (int k = 0; op->kind == OP_REVOLVE && k < op->ncarry && op->nhost; k++)
			host += host_place(p, op->hsnap[k], host);
	}
	/* forward values offloaded for the adjoint */
	for (int v = 0; v < nv; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_HOST)
			host += host_place(p, v, host);
	p->host_bytes = host;
	for (int i = 0; i < p->inputs.len; i++)
		at += place(p, p->inputs.data[i].value, at);
	p->plan_inputs = at - mark, mark = at;
	/* tapes and snapshots that something still reads or writes */
	int *used = ir_count_uses(p);
	/* the results, marked once (ir_is_result walks every update: ResNet-152's 310) */
	bool *res = calloc((size_t)nv + 1, 1);
	for (int i = 0; i < ir_nresults(p); i++)
		if (ir_result(p, i) >= 0)
			res[ir_result(p, i)] = true;
	coalesce_block(p, &p->body, used, res, -1);
	in_place(p, res);
	acc_into(p, &p->body, NULL, used, res);
	free(res);
	for (int v = 0; v < nv; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_TAPE && used[v])
			at += place(p, v, at);
	p->plan_tape = at - mark, mark = at;
	/* snapshots live in the work region while they hold anything (snapshot_lives) */
	p->plan_snap = 0;
	for (int v = 0; v < nv; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_SNAP)
			p->plan_snap += align_up(ir_value_bytes(p, &p->values.data[v]));
	for (int v = 0; v < nv; v++)
		if (p->values.data[v].kind == VK_VAR && p->values.data[v].vclass == VC_SLOT)
			at += place(p, v, at);
	p->plan_slots = at - mark, mark = at;

	/* ones for the reductions codegen turns into GEMMs */
	int64_t ones = 0;
	for (int dt = 0; dt <= DT_F64; dt++)
		p->ones_len[dt] = 0;
	leading_sums(p, &p->body);
	for (int dt = 0; dt <= DT_F64; dt++) {
		p->ones_offset[dt] = at + ones;
		ones += align_up(p->ones_len[dt] * ir_dt_bytes((DType)dt));
	}
	at += ones;

	Live L = {0};
	L.p = p;
	L.defpos = malloc(sizeof(int64_t) * (size_t)nv);
	L.last = malloc(sizeof(int64_t) * (size_t)nv);
	for (int v = 0; v < nv; v++)
		L.defpos[v] = L.last[v] = -1;
	L.root = malloc(sizeof(int) * (size_t)nv);
	alias_roots(p, L.root);
	int64_t npos = count_ops(&p->body);
	L.loops = calloc((size_t)npos + 1, sizeof *L.loops);
	number(&L, &p->body);
	for (int v = 0; v < nv; v++)
		if (p->values.data[v].kind == VK_VAR)
			L.defpos[v] = -1;
	L.pos = 0;
	uses(&L, &p->body);
	snapshot_lives(&L);
	/* The runtime reads the loss, the reports and the updates' values after the step. */
	for (int i = 0; i < ir_nresults(p); i++)
		L.last[L.root[ir_result(p, i)]] = npos;

	p->plan_live = -1;
	int64_t packed = floor_packed = pack(p, &L, at);
	p->plan_work = ones + packed;
	p->plan_live = ones + (p->plan_live < 0 ? packed : p->plan_live);
	p->arena_bytes = at + packed;
	if (p->mem_points)
		series(p, &L, npos, at, ones);
	if (p->inner_live)
		inner_live(p, &L, npos, at);
	free(L.defpos);
	free(L.last);
	free(L.root);
	free(L.loops);

}

static bool scheduled(const Value *x)
{
	VarClass c = x->vclass;
	return x->kind == VK_VAR && (c == VC_TAPE || c == VC_SNAP || c == VC_SLOT || c == VC_HSNAP || c == VC_STAGE || c == VC_HOST ||
	                              c == VC_HGRAD);
}

/* the value whose storage v is (VR_ALIAS chains followed) */
static int storage_root(Program *p, int v)
{
	while (p->values.data[v].res == VR_ALIAS)
		v = p->values.data[v].alias_of;
	return v;
}

/* the storage of v that does not depend on the choice: views and a loop's
 * coalesced state followed, not an elementwise result in its dying operand */
static int group_of(Program *p, int v)
{
	while (p->values.data[v].res == VR_ALIAS && p->values.data[v].alias_index != IR_IN_PLACE)
		v = p->values.data[v].alias_of;
	return v;
}

/* The bytes one op needs live at once, outside the fixed regions: each
 * group of storage among its operands and result counted once, at its
 * largest member's bytes (two slices of one tape may be one row), and an
 * elementwise result not at all where an operand of its type could give it
 * its storage (in_place does where that operand dies there, which depends
 * on the choice). fixed[v]: v's storage is a fixed region, or is not on the
 * device. Variables that a schedule makes (tapes, snapshots, slots, staging
 * and host copies) count only through the rows an op reads or writes of
 * them, since another schedule has none. */
static int64_t op_working_set(Program *p, Op *op, const bool *fixed)
{
	int n = op->nin + 1, root[64];
	int64_t most[64], total = 0;
	int nr = 0;
	bool shared = false;
	for (int j = 0; j < n && nr < 64; j++) {
		int v = j < op->nin ? op->in[j] : op->out;
		if (v < 0 || p->values.data[v].kind == VK_INDEX)
			continue;
		int s = storage_root(p, v), r = group_of(p, v);
		if (fixed[s] || p->values.data[s].res != VR_ARENA || scheduled(&p->values.data[v]))
			continue;
		if (j < op->nin && op->out >= 0 && ir_may_lend(op, j) && ir_type_eq(ir_vtype(p, v), ir_vtype(p, op->out)))
			shared = true;
		if (j == op->nin && shared)
			continue;
		int64_t b = mem_aligned(p, p->values.data[v].type);
		int k = 0;
		while (k < nr && root[k] != r)
			k++;
		if (k == nr)
			root[nr] = r, most[nr++] = 0;
		most[k] = b > most[k] ? b : most[k];
	}
	for (int k = 0; k < nr; k++)
		total += most[k];
	return total;
}

/* the largest working set of the ops of b that every choice runs: not the
 * straight line's recomputed copies, whose need depends on the choice */
static int64_t largest_working_set(Program *p, Block *b, const bool *fixed)
{
	int64_t most = 0;
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		int64_t w = op->recomputed ? 0 : op_working_set(p, op, fixed);
		Block *inner[3] = {&op->body, &op->body2, &op->body3};
		for (int k = 0; k < 3 && (ir_is_loop(op)); k++) {
			int64_t x = largest_working_set(p, inner[k], fixed);
			w = x > w ? x : w;
		}
		most = w > most ? w : most;
	}
	return most;
}

/* ---- what every plan holds across a top-level op ----
 * The ops every choice runs, in the same order, are the forward's and the
 * adjoint's own (not the recomputed copies, nor an offload's copies).
 * A value one of them makes and a later one of the same part reads is
 * live between the two in every plan: the forward's values up to their
 * last forward reader (a dropped one is freed there), the adjoint's to
 * their last reader. Values are grouped by the storage that does not
 * depend on the choice (views, a loop's coalesced state; not an
 * elementwise result in its dying operand, which two values held across
 * an op never are). */

typedef struct {
	Program *p;
	int *group;       /* per value: its group (the value whose storage it is, in-place aside), or -1 */
	int *def, *last;  /* per group: the top-level positions of its first definition and last same-part read */
	int at;           /* the top-level position of the op visited */
	bool forward;     /* whether it is in the forward part */
	bool *loops;      /* per group: a forward loop's result, which no choice drops (the adjoint's reads count) */
} Across;

static bool every_plan_runs(Op *op) { return !op->recomputed && op->kind != OP_OFFLOAD && op->kind != OP_FETCH && op->kind != OP_SETTLE; }

static void across_read(void *ctx, int v)
{
	Across *A = ctx;
	if (v < 0 || A->group[v] < 0)
		return;
	int g = A->group[v];
	/* made by an op of the other part (a forward value the adjoint reads): its life there is the choice's, but
	 * for a loop's result, which no choice computes again or offloads */
	if (A->def[g] < 0 || A->def[g] >= A->at || ((A->def[g] < A->p->nforward) != A->forward && !A->loops[g]))
		return;
	A->last[g] = A->at > A->last[g] ? A->at : A->last[g];
}

/* read(ctx, v) for each value the ops of b read, at any depth (operands,
 * carried values and yields), but those of ops skip() names */
static void each_read(Program *p, Block *b, bool (*skip)(Program *, const Op *), void (*read)(void *, int), void *ctx)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		if (skip && skip(p, op))
			continue;
		for (int k = 0; k < op->nin; k++)
			read(ctx, op->in[k]);
		for (int k = 0; k < op->ncarry; k++) {
			read(ctx, op->carg[k]);
			if (op->cyield)
				read(ctx, op->cyield[k]);
			if (op->body3.len)
				read(ctx, op->cyield3[k]);
		}
		if (!ir_has_bodies(op))
			continue;
		each_read(p, &op->body, skip, read, ctx);
		each_read(p, &op->body2, skip, read, ctx);
		each_read(p, &op->body3, skip, read, ctx);
	}
}

static void across_reads(Across *A, Block *b) { each_read(A->p, b, NULL, across_read, A); }

/* the bytes of the groups op names (operands, result) that are held across
 * position i: its own working set counts them */
static int64_t named_across(Across *A, Op *op, int i)
{
	int seen[65], n = 0;
	int64_t b = 0;
	for (int k = 0; k <= op->nin && n < 65; k++) {
		int v = k < op->nin ? op->in[k] : op->out;
		int g = v >= 0 ? A->group[v] : -1;
		if (g < 0 || A->def[g] < 0 || A->def[g] >= i || A->last[g] <= i)
			continue;
		int j = 0;
		while (j < n && seen[j] != g)
			j++;
		if (j == n) {
			seen[n++] = g;
			b += mem_aligned(A->p, A->p->values.data[g].type);
		}
	}
	return b;
}

/* Inside a loop's step (a forward loop's body, an adjoint loop's, a
 * revolve's adjoint step), the same at each op every plan runs: its values
 * the step makes and a later op of the step reads (held between the two in
 * every plan; not a tape's rows, whose values a revolve computes again), a
 * forward step's state from the start to its last read, and the variables
 * the step assigns (a carried adjoint), which the plan holds through the
 * loop. The top level's groups held across the loop (at) are held too. */
typedef struct {
	const int *group;
	int *def, *last; /* per group: its step position (-1: the state it starts with; INT_MIN: not the step's), last read */
	int at;
} Step;

/* an op only a plan with tapes runs: a store into a tape's row, a mask packed in bits for one */
static bool taping(Program *p, const Op *op)
{
	return op->kind == OP_BITS ||
	       (op->kind == OP_STORE_SLICE && p->values.data[op->in[0]].kind == VK_VAR && p->values.data[op->in[0]].vclass == VC_TAPE);
}

static void step_read(void *ctx, int v)
{
	Step *S = ctx;
	int g = v >= 0 ? S->group[v] : -1;
	if (g >= 0 && S->def[g] != INT_MIN && S->def[g] < S->at && S->at > S->last[g])
		S->last[g] = S->at;
}

static void step_reads(Program *p, Step *S, Block *b) { each_read(p, b, taping, step_read, S); }

/* the bytes of op's groups held across step position k (S) and of the step's assigned variables op names */
static int64_t step_named(Program *p, Step *S, Op *op, int k, const bool *assigned)
{
	int seen[65], n = 0;
	int64_t b = 0;
	for (int j = 0; j <= op->nin && n < 65; j++) {
		int v = j < op->nin ? op->in[j] : op->out;
		int g = v < 0 ? -1 : assigned[v] ? v : S->group[v];
		if (g < 0 || (!assigned[v] && (S->def[g] == INT_MIN || S->def[g] >= k || S->last[g] <= k)))
			continue;
		int i = 0;
		while (i < n && seen[i] != g)
			i++;
		if (i == n) {
			seen[n++] = g;
			b += mem_aligned(p, p->values.data[g].type);
		}
	}
	return b;
}

/* An adjoint step of a loop of two steps or more holds the step's state
 * and the loop's first: every plan dpc makes keeps them on the device
 * through the loop's adjoint (a tape's rows; a revolve's state and its
 * slot 0, or the staging row that slot comes back through), since none
 * computes a loop's first state again from outside the loop. Their bytes,
 * or 0 in a forward step. */
static int64_t adjoint_states(Program *p, const Across *A, const Op *loop)
{
	const Op *f = loop->primal;
	int64_t b = 0;
	if (A->forward || !f || f->trip < 2)
		return 0;
	for (int k = 0; k < f->ncarry; k++)
		b += mem_aligned(p, p->values.data[f->carg[k]].type);
	return 2 * b;
}

/* whether storage r holds the loop's state: a revolve's state, or a tape the forward loop stores its state in */
static bool state_storage(const Op *loop, int r)
{
	const Op *f = loop->primal;
	for (int k = 0; loop->kind == OP_REVOLVE && k < loop->ncarry; k++)
		if (r == loop->carg[k])
			return true;
	for (int i = 0; i < f->body.len; i++) {
		const Op *st = f->body.ops[i];
		for (int k = 0; st->kind == OP_STORE_SLICE && st->in[0] == r && k < f->ncarry; k++)
			if (st->in[2] == f->carg[k])
				return true;
	}
	return false;
}

/* the bytes op's working set already counts of the loop's state (its row of a tape, the revolve's state) */
static int64_t state_named(Program *p, const Op *loop, const Op *op)
{
	int seen[65], n = 0;
	int64_t b = 0;
	for (int j = 0; j < op->nin && n < 65 && loop->primal; j++) {
		int r = storage_root(p, op->in[j]);
		bool state = state_storage(loop, r);
		int i = 0;
		while (i < n && seen[i] != r)
			i++;
		if (!state || i < n)
			continue;
		seen[n++] = r;
		b += mem_aligned(p, p->values.data[op->in[j]].type);
	}
	return b;
}

static int64_t step_most(Program *p, Across *A, Op *loop, Block *b, const bool *fixed)
{
	int nv = p->values.len;
	int *group = malloc(sizeof(int) * (size_t)(nv + 1)), *def = malloc(sizeof(int) * (size_t)(nv + 1)),
	    *last = malloc(sizeof(int) * (size_t)(nv + 1));
	bool *assigned = calloc((size_t)nv + 1, sizeof *assigned);
	int64_t *diff = calloc((size_t)b->len + 2, sizeof *diff);
	if (!group || !def || !last || !assigned || !diff)
		die("out of memory");
	for (int v = 0; v < nv; v++) {
		/* a view of a tape's row is the choice's: with recomputation the value is computed again instead */
		int r = storage_root(p, v);
		group[v] = A->group[v] >= 0 && p->values.data[r].kind == VK_SSA ? A->group[v] : -1;
		def[v] = INT_MIN, last[v] = -1;
	}
	int64_t vars = 0;
	for (int k = 0; k < b->len; k++) {
		Op *op = b->ops[k];
		int x = op->kind == OP_ASSIGN ? op->in[0] : -1;
		if (x >= 0 && !assigned[x] && !fixed[x] && p->values.data[x].res == VR_ARENA)
			assigned[x] = true, vars += mem_aligned(p, p->values.data[x].type);
	}
	Step S = {group, def, last, 0};
	if (loop->kind == OP_LOOP && A->forward)
		for (int k = 0; k < loop->ncarry; k++)
			if (group[loop->carg[k]] >= 0)
				def[group[loop->carg[k]]] = -1;
	for (int k = 0; k < b->len; k++) {
		Op *op = b->ops[k];
		if (!every_plan_runs(op) || taping(p, op))
			continue;
		S.at = k;
		step_reads(p, &S, &(Block){b->ops + k, 1, 0});
		if (op->out >= 0 && group[op->out] >= 0 && def[group[op->out]] == INT_MIN)
			def[group[op->out]] = k;
	}
	for (int g = 0; g < nv; g++)
		if (def[g] != INT_MIN && last[g] > def[g] + 1) {
			int64_t bytes = mem_aligned(p, p->values.data[g].type);
			diff[def[g] + 2] += bytes;
			diff[last[g] + 1] -= bytes;
		}
	int64_t run = 0, most = 0, states = adjoint_states(p, A, loop);
	for (int k = 0; k < b->len; k++) {
		run += diff[k + 1];
		Op *op = b->ops[k];
		if (!every_plan_runs(op) || taping(p, op) || ir_is_loop(op))
			continue;
		int64_t named = state_named(p, loop, op), w = run + vars - step_named(p, &S, op, k, assigned) -
		                named_across(A, op, A->at) + op_working_set(p, op, fixed) + (states > named ? states - named : 0);
		most = w > most ? w : most;
	}
	free(group), free(def), free(last), free(assigned), free(diff);
	return most;
}

/* the most bytes of the top level's groups held across one of its ops that
 * every plan runs, beside that op's own working set */
static int64_t largest_across(Program *p, const bool *fixed)
{
	int nv = p->values.len, len = p->body.len;
	Across A = {p, malloc(sizeof(int) * (size_t)(nv + 1)), malloc(sizeof(int) * (size_t)(nv + 1)),
	            malloc(sizeof(int) * (size_t)(nv + 1)), 0, true, calloc((size_t)nv + 1, sizeof(bool))};
	if (!A.group || !A.def || !A.last || !A.loops)
		die("out of memory");
	for (int v = 0; v < nv; v++) {
		Value *x = &p->values.data[v];
		int g = group_of(p, v);
		bool counted = x->kind == VK_SSA && !fixed[storage_root(p, v)] && p->values.data[storage_root(p, v)].res == VR_ARENA;
		A.group[v] = counted ? g : -1;
		A.def[v] = A.last[v] = -1;
	}
	for (int i = 0; i < len; i++) {
		Op *op = p->body.ops[i];
		if (!every_plan_runs(op))
			continue;
		A.at = i, A.forward = i < p->nforward;
		across_reads(&A, &(Block){p->body.ops + i, 1, 0});
		int outs[1 + 64], n = 0;
		outs[n++] = op->out;
		for (int k = 0; k < op->ncarry && op->cout && n < 65; k++)
			outs[n++] = op->cout[k];
		for (int k = 0; k < n; k++)
			if (outs[k] >= 0 && A.group[outs[k]] >= 0 && A.def[A.group[outs[k]]] < 0) {
				A.def[A.group[outs[k]]] = i;
				A.loops[A.group[outs[k]]] = op->kind == OP_LOOP && i < p->nforward;
			}
	}
	int64_t *diff = calloc((size_t)len + 2, sizeof *diff);
	if (!diff)
		die("out of memory");
	for (int g = 0; g < nv; g++)
		if (A.def[g] >= 0 && A.last[g] > A.def[g] + 1) {
			int64_t b = mem_aligned(p, p->values.data[g].type);
			diff[A.def[g] + 1] += b;
			diff[A.last[g]] -= b;
		}
	int64_t run = 0, most = 0;
	for (int i = 0; i < len; i++) {
		run += diff[i];
		Op *op = p->body.ops[i];
		if (!every_plan_runs(op))
			continue;
		if (ir_is_loop(op)) {
			/* what the top level holds across the loop, and at each op of its step what the step holds */
			A.at = i, A.forward = i < p->nforward;
			int64_t w = run + step_most(p, &A, op, op->kind == OP_LOOP ? &op->body : &op->body2, fixed);
			most = w > most ? w : most;
			continue;
		}
		/* the op's own operands and result are its working set, not held across it */
		int64_t w = run - named_across(&A, op, i) + op_working_set(p, op, fixed);
		most = w > most ? w : most;
	}
	free(diff);
	free(A.group);
	free(A.def);
	free(A.last);
	free(A.loops);
	return most;
}

int64_t mem_peak_bound(Program *p)
{
	int nv = p->values.len;
	bool *fixed = calloc((size_t)nv + 1, sizeof *fixed);
	if (!fixed)
		die("out of memory");
	int64_t base = 0;
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		int vs[6] = {q->value, q->grad, q->opt_m, q->opt_v, q->master, q->gsum};
		for (int k = 0; k < 6; k++) {
			if (vs[k] < 0)
				continue;
			fixed[vs[k]] = true;
			base += q->streamed ? 0 : mem_aligned(p, p->values.data[vs[k]].type);
		}
	}
	for (int i = 0; i < p->inputs.len; i++) {
		fixed[p->inputs.data[i].value] = true;
		base += mem_aligned(p, p->values.data[p->inputs.data[i].value].type);
	}
	int64_t w = largest_working_set(p, &p->body, fixed), held = largest_across(p, fixed);
	free(fixed);
	return base + (held > w ? held : w);
}

void mem_verify(Program *p)
{
	int64_t arena = p->arena_bytes;
	checking = true;
	mem_plan(p);
	checking = false;
	if (p->arena_bytes != arena)
		die("the memory plan made again has %lld bytes, not %lld", (long long)p->arena_bytes, (long long)arena);
}

const char *mem_bytes_str(int64_t n)
{
	if (n < 1024)
		return ar_printf("%lld B", (long long)n);
	if (n < 1024 * 1024)
		return ar_printf("%.1f KiB", n / 1024.0);
	if (n < 1024LL * 1024 * 1024)
		return ar_printf("%.1f MiB", n / (1024.0 * 1024));
	return ar_printf("%.2f GiB", n / (1024.0 * 1024 * 1024));
}

void mem_print(FILE *f, Program *p)
{
	fprintf(f, "\n# memory plan: arena %lld bytes = params %lld + grads %lld + optimizer %lld + inputs %lld + tape %lld"
	        " + slots %lld + work %lld (of it %lld ones at %lld%s)\n",
	        (long long)p->arena_bytes, (long long)p->plan_params, (long long)p->plan_grads, (long long)p->plan_opt,
	        (long long)p->plan_inputs, (long long)p->plan_tape, (long long)p->plan_slots, (long long)p->plan_work,
	        (long long)p->ones_len[p->real], (long long)p->ones_offset[p->real],
	        p->plan_snap ? ar_printf("; snapshots %lld in all, packed by their lives", (long long)p->plan_snap) : "");
	for (int dt = 0; dt <= DT_F64; dt++)
		if (dt != (int)p->real && p->ones_len[dt])
			fprintf(f, "# and %lld %s ones at %lld\n", (long long)p->ones_len[dt], ir_dt_name((DType)dt), (long long)p->ones_offset[dt]);
	if (p->host_bytes)
		fprintf(f, "# host pool %lld bytes; %d device slots per streamed tensor, prefetch distance %d; per call "
		        "host->device / device->host bytes: dp_forward %lld / %lld, dp_step %lld / %lld\n",
		        (long long)p->host_bytes, p->nslots, p->ahead, (long long)p->h2d_bytes[0], (long long)p->d2h_bytes[0],
		        (long long)p->h2d_bytes[1], (long long)p->d2h_bytes[1]);
	for (int v = 0; v < p->values.len; v++) {
		Value *x = &p->values.data[v];
		if (x->res == VR_HOST)
			fprintf(f, "#   %-24s host @ %-5lld %lld bytes\n", ir_value_name(p, v), (long long)x->offset,
			        (long long)ir_value_bytes(p, x));
		else if (x->res == VR_ARENA)
			fprintf(f, "#   %-24s @ %-10lld %lld bytes%s\n", ir_value_name(p, v), (long long)x->offset,
			        (long long)ir_value_bytes(p, x), x->pitch ? ar_printf(", rows of %lld elements", (long long)x->pitch) : "");
		else if (x->res == VR_ALIAS && x->def && (x->alias_index == IR_IN_PLACE || (ir_ops[x->def->kind].flags & OPF_EW)))
			fprintf(f, "#   %-24s in %s%s%s%s, %s\n", ir_value_name(p, v), ir_value_name(p, x->alias_of),
			        x->alias_index >= 0 ? "[" : "", x->alias_index >= 0 ? ir_value_name(p, x->alias_index) : "",
			        x->alias_index >= 0 ? "]" : "",
			        x->alias_index == IR_IN_PLACE ? "its operand, which dies there" : "which it is copied to");
		else if (x->res == VR_ALIAS && x->alias_index == IR_ACC_INTO)
			fprintf(f, "#   %-24s added into %s as it is made\n", ir_value_name(p, v), ir_value_name(p, x->alias_of));
	}
}
