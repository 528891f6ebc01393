/* ir: construction, types, walking. */
#include "ir.h"

#include <string.h>

Program *ir_new_program(int real_bytes)
{
	Program *p = ar_alloc(sizeof *p);
	p->real = real_bytes == 8 ? DT_F64 : real_bytes == 2 ? DT_BF16 : DT_F32;
	p->loss = -1;
	return p;
}

int ir_new_value(Program *p, ValueKind kind, Type t, const char *name, Loc loc)
{
	Value v = {0};
	v.kind = kind;
	v.type = t;
	v.name = name;
	v.loc = loc;
	v.alias_of = -1;
	v.alias_index = -1;
	vec_push(&p->values, v);
	return p->values.len - 1;
}

Op *ir_new_op(Program *p, OpKind k, Loc loc, int nin, const int *in)
{
	(void)p;
	Op *op = ar_alloc(sizeof *op);
	op->kind = k;
	op->loc = loc;
	op->nin = nin;
	op->in = ar_alloc(sizeof(int) * (size_t)(nin ? nin : 1));
	if (in)
		memcpy(op->in, in, sizeof(int) * (size_t)nin);
	op->out = -1;
	op->ivar = -1;
	op->counter = -1;
	return op;
}

void ir_append(Block *b, Op *op)
{
	if (b->len == b->cap) {
		int nc = b->cap ? 2 * b->cap : 16;
		b->ops = ar_realloc(b->ops, sizeof(Op *) * (size_t)b->cap, sizeof(Op *) * (size_t)nc);
		b->cap = nc;
	}
	b->ops[b->len++] = op;
}

/* op into b before position at */
void ir_insert(Block *b, int at, Op *op)
{
	ir_append(b, op);
	memmove(&b->ops[at + 1], &b->ops[at], sizeof(Op *) * (size_t)(b->len - 1 - at));
	b->ops[at] = op;
}

bool ir_attn_apart;

/* Is b's op i an attn_lse that the attention right before it writes as it
 * goes (on GEMMs: its softmax's rows)? Its result then lives from that
 * attention's position (the memory plan), and has no kernel of its own
 * (codegen). */
bool ir_attn_lse_fused(const Block *b, int i)
{
	if (ir_attn_apart || i < 1 || i >= b->len || b->ops[i]->kind != OP_ATTN_LSE)
		return false;
	const Op *a = b->ops[i - 1], *l = b->ops[i];
	bool gemm = l->nin == 4 && a->nin == 4 && a->in[3] == l->in[3], flash = l->attr.attn.flash && l->nin == 3 && a->nin == 3;
	return a->kind == OP_ATTENTION && (gemm || flash) && a->out == l->in[2] && a->in[0] == l->in[0] && a->in[1] == l->in[1];
}

bool ir_has_loops(const Program *p)
{
	for (int i = 0; i < p->body.len; i++)
		if (ir_is_loop(p->body.ops[i]))
			return true;
	return false;
}

int ir_emit(Program *p, Block *b, Op *op)
{
	if (ir_is_loop(op))
		die("ir_emit: loops are built by hand");
	if (!(ir_ops[op->kind].flags & OPF_WRITE)) {
		Type t;
		const char *err = ir_check_op(p, op, &t);
		if (err)
			die("ir_emit: %s: %s", ir_ops[op->kind].name, err);
		op->out = ir_new_value(p, op->kind == OP_IDX ? VK_INDEX : VK_SSA, t, NULL, op->loc);
		p->values.data[op->out].def = op;
	} else {
		Type t;
		const char *err = ir_check_op(p, op, &t);
		if (err)
			die("ir_emit: %s: %s", ir_ops[op->kind].name, err);
	}
	ir_append(b, op);
	return op->out;
}

Type ir_type(DType dt, int rank, const int64_t *dim)
{
	Type t = {0};
	t.dt = dt;
	t.rank = rank;
	for (int i = 0; i < rank; i++)
		t.dim[i] = dim[i];
	return t;
}

Type ir_scalar(DType dt) { return ir_type(dt, 0, NULL); }

int64_t ir_numel(Type t)
{
	int64_t n = 1;
	for (int i = 0; i < t.rank; i++)
		if (__builtin_mul_overflow(n, t.dim[i], &n) || n > IR_HUGE)
			return IR_HUGE;
	return n;
}

bool ir_too_large(Type t) { return ir_numel(t) > IR_MAX_ELEMS; }

int64_t ir_bytes(const Program *p, Type t)
{
	(void)p;
	return ir_numel(t) * ir_dt_bytes(t.dt);
}

int64_t ir_value_bytes(const Program *p, const Value *x)
{
	int64_t n = ir_bytes(p, x->type);
	if (x->pitch && x->type.rank > 0 && x->type.dim[x->type.rank - 1] > 0)
		n = n / x->type.dim[x->type.rank - 1] * x->pitch;
	return n;
}

int64_t ir_row_pitch(const Program *p, int v)
{
	const Value *x = &p->values.data[v];
	return x->pitch ? x->pitch : x->type.rank ? x->type.dim[x->type.rank - 1] : 1;
}

bool ir_pitch_ok(Program *p, const Op *op, int k)
{
	switch (op->kind) {
	case OP_MATMUL: return !ir_small_matmul(p, (Op *)op);
	case OP_XENT: return k == 0;
	case OP_XENT_GRAD: return k <= 0;
	case OP_RESHAPE: {
		Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->out);
		return a.rank >= 2 && b.rank >= 2 && a.dim[a.rank - 1] == b.dim[b.rank - 1];
	}
	default: return false;
	}
}

int ir_dt_bytes(DType dt)
{
	switch (dt) {
	case DT_BF16: return 2;
	case DT_F32:
	case DT_I32: return 4;
	case DT_F64: return 8;
	case DT_INDEX: return 0;
	}
	unreachable();
}

const char *ir_dt_name(DType dt)
{
	static const char *names[] = {[DT_F32] = "f32", [DT_BF16] = "bf16", [DT_F64] = "f64", [DT_I32] = "i32", [DT_INDEX] = "index"};
	return names[dt];
}

DType ir_resolve_dt(const Program *p, DType written)
{
	if (!ir_is_real(written))
		return written;
	if (p->real == DT_F64)
		return DT_F64;
	return written == DT_F32 ? p->real : written;
}

bool ir_type_eq(Type a, Type b)
{
	if (a.dt != b.dt || a.rank != b.rank)
		return false;
	for (int i = 0; i < a.rank; i++)
		if (a.dim[i] != b.dim[i])
			return false;
	return true;
}

char *ir_put_dec(char *w, int64_t v)
{
	uint64_t x = v < 0 ? -(uint64_t)v : (uint64_t)v;
	char digits[24];
	int nd = 0;
	do
		digits[nd++] = (char)('0' + x % 10);
	while (x /= 10);
	if (v < 0)
		*w++ = '-';
	while (nd)
		*w++ = digits[--nd];
	return w;
}

/* "f32[2, 3]": written by hand, not through snprintf, since the printer writes a type for each op (a program
 * printed whole: the rows' search's memo key) */
const char *ir_type_str(Type t)
{
	if (t.dt == DT_INDEX)
		return "index";
	char buf[32 + IR_MAXRANK * 24], *w = buf;
	for (const char *c = ir_dt_name(t.dt); *c; c++)
		*w++ = *c;
	*w++ = '[';
	for (int i = 0; i < t.rank; i++) {
		if (i)
			*w++ = ',', *w++ = ' ';
		w = ir_put_dec(w, t.dim[i]);
	}
	*w++ = ']';
	*w = 0;
	return ar_strdup(buf);
}

Type ir_drop_first(Type t)
{
	Type r = t;
	r.rank = t.rank - 1;
	for (int i = 0; i < r.rank; i++)
		r.dim[i] = t.dim[i + 1];
	return r;
}

const char *ir_decl_type_str(Type t, int stacked)
{
	if (!stacked)
		return ir_type_str(t);
	const char *name = ir_dt_name(t.dt);
	return ar_printf("%s[%lld]%s", name, (long long)t.dim[0], ir_type_str(ir_drop_first(t)) + strlen(name));
}

static void walk(Block *b, ir_op_fn fn, void *ctx)
{
	for (int i = 0; i < b->len; i++) {
		fn(b->ops[i], ctx);
		walk(&b->ops[i]->body, fn, ctx);
		walk(&b->ops[i]->body2, fn, ctx);
		walk(&b->ops[i]->body3, fn, ctx);
	}
}

void ir_walk(Block *b, ir_op_fn fn, void *ctx) { walk(b, fn, ctx); }
