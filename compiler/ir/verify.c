/* ir: the verifier run between passes. A broken invariant is a compiler bug:
 * it dies naming the pass that produced the program. */
#include "ir.h"

#include <string.h>

typedef struct {
	Program *p;
	const char *pass;
	unsigned char *defined; /* per value: visible at this point */
} Check;

#define BAD(c, op, ...) die("IR verifier after %s: %s (op %s at %s:%d:%d)", (c)->pass, ar_printf(__VA_ARGS__), \
                            ir_ops[(op)->kind].name, (op)->loc.file ? (op)->loc.file : "?", (op)->loc.line, (op)->loc.col)

static void use(Check *c, Op *op, int v)
{
	if (v < 0 || v >= c->p->values.len)
		BAD(c, op, "operand %d out of range", v);
	if (c->p->values.data[v].kind == VK_VAR)
		return;
	if (!c->defined[v])
		BAD(c, op, "%s used where it is not defined", ir_value_name(c->p, v));
}

static void def(Check *c, Op *op, int v)
{
	if (v < 0 || v >= c->p->values.len)
		BAD(c, op, "result %d out of range", v);
	if (c->defined[v])
		BAD(c, op, "%s defined twice", ir_value_name(c->p, v));
	c->defined[v] = 1;
}

static void check_block(Check *c, Block *b);

/* a body's yields: visible, and of the carried values' types */
static void check_yields(Check *c, Op *op, const int *yields)
{
	for (int k = 0; k < op->ncarry; k++) {
		use(c, op, yields[k]);
		if (!ir_type_eq(ir_vtype(c->p, op->carg[k]), ir_vtype(c->p, yields[k])))
			BAD(c, op, "carried value %d: yields another type", k);
	}
}

/* What loops and revolves share: operands, the index variable, the carried
 * state and the first body with its yields. Returns what was visible before. */
static unsigned char *check_carried(Check *c, Op *op)
{
	Program *p = c->p;
	if (op->nin != op->ncarry)
		BAD(c, op, "%d operands for %d carried values", op->nin, op->ncarry);
	for (int k = 0; k < op->nin; k++)
		use(c, op, op->in[k]);
	unsigned char *before = ar_alloc((size_t)p->values.len);
	memcpy(before, c->defined, (size_t)p->values.len);
	def(c, op, op->ivar);
	if (ir_vtype(p, op->ivar).dt != DT_INDEX)
		BAD(c, op, "loop variable is not an index");
	if (ir_loop_tail(op)) {
		def(c, op, op->irow);
		if (ir_vtype(p, op->irow).dt != DT_INDEX)
			BAD(c, op, "tape row is not an index");
	}
	for (int k = 0; k < op->ncarry; k++) {
		def(c, op, op->carg[k]);
		if (!ir_type_eq(ir_vtype(p, op->carg[k]), ir_vtype(p, op->in[k])))
			BAD(c, op, "carried value %d: initial value of another type", k);
	}
	check_block(c, &op->body);
	check_yields(c, op, op->cyield);
	/* values of the body are not visible after it */
	memcpy(c->defined, before, (size_t)p->values.len);
	return before;
}

static void check_loop(Check *c, Op *op)
{
	Program *p = c->p;
	if (op->trip < 1)
		BAD(c, op, "loop trip count %lld", (long long)op->trip);
	check_carried(c, op);
	for (int k = 0; k < op->ncarry; k++) {
		def(c, op, op->cout[k]);
		if (!ir_type_eq(ir_vtype(p, op->cout[k]), ir_vtype(p, op->carg[k])))
			BAD(c, op, "carried value %d: result of another type", k);
	}
}

static void check_revolve(Check *c, Op *op)
{
	Program *p = c->p;
	if (op->trip < 1 || op->nsnap < 1 || op->nsnap > op->trip)
		BAD(c, op, "revolve of %lld steps with %d snapshots", (long long)op->trip, op->nsnap);
	if (op->nhost < 0 || op->nhost > op->nsnap)
		BAD(c, op, "revolve with %d of its %d snapshots in host memory", op->nhost, op->nsnap);
	for (int k = 0; k < op->ncarry; k++) {
		Value *x = &p->values.data[op->snap[k]];
		if (x->kind != VK_VAR || x->type.dim[0] != op->nsnap - op->nhost + (op->nhost > 0))
			BAD(c, op, "snapshot %d is not a variable of %d rows", k, op->nsnap - op->nhost + (op->nhost > 0));
		if (op->nhost > 0 && (p->values.data[op->hsnap[k]].kind != VK_VAR ||
		                      p->values.data[op->hsnap[k]].vclass != VC_HSNAP ||
		                      p->values.data[op->hsnap[k]].type.dim[0] != op->nhost))
			BAD(c, op, "host snapshot %d is not a host variable of %d rows", k, op->nhost);
	}
	if (op->ktape < 0 || op->ktape > op->trip || (op->ktape && op->nhost))
		BAD(c, op, "revolve with a tape of %lld rows (%d snapshots in host memory)", (long long)op->ktape, op->nhost);
	unsigned char *before = check_carried(c, op);
	/* the taped step sees the state, not the advance body's values */
	for (int k = 0; k < op->ncarry; k++)
		c->defined[op->carg[k]] = 1;
	if (op->ktape) {
		def(c, op, op->irow);
		if (ir_vtype(p, op->irow).dt != DT_INDEX)
			BAD(c, op, "tape row is not an index");
		c->defined[op->ivar] = 1;
		check_block(c, &op->body3);
		check_yields(c, op, op->cyield3);
		memcpy(c->defined, before, (size_t)p->values.len);
		for (int k = 0; k < op->ncarry; k++)
			c->defined[op->carg[k]] = 1;
		c->defined[op->irow] = 1;
	} else if (op->body3.len) {
		BAD(c, op, "revolve without a tape has a tape body");
	}
	def(c, op, op->ivar2);
	check_block(c, &op->body2);
	memcpy(c->defined, before, (size_t)p->values.len);
}

static void check_op(Check *c, Op *op)
{
	Program *p = c->p;
	const OpInfo *info = &ir_ops[op->kind];
	if (op->kind == OP_LOOP) {
		check_loop(c, op);
		return;
	}
	if (op->kind == OP_REVOLVE) {
		check_revolve(c, op);
		return;
	}
	for (int k = 0; k < op->nin; k++) {
		use(c, op, op->in[k]);
		Value *v = &p->values.data[op->in[k]];
		if (v->def && v->def->kind == OP_CONST && !(info->flags & OPF_EW))
			BAD(c, op, "a constant operand outside an elementwise op");
		if (v->pitch && !ir_pitch_ok(p, op, k))
			BAD(c, op, "an operand whose rows have a pitch (memplan/pitch.c), which this op does not take");
	}
	Type t;
	const char *err = ir_check_op(p, op, &t);
	if (err)
		BAD(c, op, "%s", err);
	if (info->flags & OPF_WRITE) {
		if (op->out >= 0)
			BAD(c, op, "a write op with a result");
		return;
	}
	def(c, op, op->out);
	if (p->values.data[op->out].pitch && !ir_pitch_ok(p, op, -1))
		BAD(c, op, "a result whose rows have a pitch (memplan/pitch.c), which this op does not take");
	if (p->values.data[op->out].def != op)
		BAD(c, op, "result's def is another op");
	if (!ir_type_eq(t, ir_vtype(p, op->out)))
		BAD(c, op, "result type %s, shape rule says %s", ir_type_str(ir_vtype(p, op->out)), ir_type_str(t));
}

static void check_block(Check *c, Block *b)
{
	for (int i = 0; i < b->len; i++)
		check_op(c, b->ops[i]);
}

void ir_verify(Program *p, const char *pass)
{
	Check c = {p, pass, ar_alloc((size_t)p->values.len + 1)};
	Op none = {0};
	check_block(&c, &p->body);
	for (int i = 0; i < p->reports.len; i++)
		if (!c.defined[p->reports.data[i].value] || ir_vtype(p, p->reports.data[i].value).rank != 0)
			BAD(&c, &none, "report %s is not a defined scalar", p->reports.data[i].name);
	for (int i = 0; i < p->updates.len; i++) {
		Report *u = &p->updates.data[i];
		if (!(c.defined[u->value] || p->values.data[u->value].kind == VK_VAR) || u->param < 0 || u->param >= p->params.len || !p->params.data[u->param].buffer ||
		    !ir_type_eq(ir_vtype(p, u->value), p->params.data[u->param].type))
			BAD(&c, &none, "update %s is not a defined value of its buffer's type", u->name);
	}
	if (p->loss < 0 || !c.defined[p->loss])
		BAD(&c, &none, "no loss value");
	if (ir_vtype(p, p->loss).rank != 0 || !ir_is_real(ir_vtype(p, p->loss).dt))
		BAD(&c, &none, "loss is not a real scalar");
	if (p->nforward < 0 || p->nforward > p->body.len)
		BAD(&c, &none, "nforward %d of %d ops", p->nforward, p->body.len);
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (p->has_grad && !q->buffer && (q->grad < 0 || p->values.data[q->grad].kind != VK_VAR))
			BAD(&c, &none, "parameter %s has no gradient variable", q->name);
		if (q->buffer && (q->grad >= 0 || q->streamed))
			BAD(&c, &none, "buffer %s has a gradient or is streamed", q->name);
	}
}
