/* ir: the textual form printed by --emit=ir / grad / ckpt / stream. Stable:
 * golden tests pin it. Reads like source: one op a line, result type last. */
#include "ir.h"

#include <string.h>

/* "%name.v", or "%v" unnamed: written by hand, not through ar_printf, since the printer names a value at each
 * use and a program printed whole (the key of the rows' search's memo, ten times a compile of ResNet-152
 * imported) names tens of thousands */
const char *ir_value_name(Program *p, int v)
{
	if (v < 0)
		return "%?";
	const char *n = p->values.data[v].name;
	size_t len = n ? strlen(n) : 0;
	char *s = ar_alloc(len + 14), *w = s; /* '%', the name, '.', up to 11 digits; ar_alloc's memory is zeroed */
	*w++ = '%';
	if (n) {
		memcpy(w, n, len);
		w += len;
		*w++ = '.';
	}
	ir_put_dec(w, v);
	return s;
}

static const char *init_str(const Param *q)
{
	switch (q->init) {
	case INIT_ZEROS: return "zeros";
	case INIT_ONES: return "ones";
	case INIT_NORMAL: return ar_printf("normal(%g)", q->a);
	case INIT_UNIFORM: return ar_printf("uniform(%g, %g)", q->a, q->b);
	case INIT_LOAD: return ar_printf("load(\"%s\")", q->saved);
	}
	unreachable();
}

static void indent(FILE *f, int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", f);
}

static const char *axes_str(uint32_t axes, int rank)
{
	char buf[64];
	int n = 0;
	buf[0] = 0;
	for (int i = 0; i < rank; i++)
		if (axes >> i & 1)
			n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%d", n ? ", " : "", i);
	return ar_printf("[%s]", buf);
}

static void print_block(FILE *f, Program *p, Block *b, int depth, int nforward);

/* a revolve's body: its block, the yields when it steps the state, and the close */
static void print_body(FILE *f, Program *p, Op *op, Block *b, const int *yields, int depth)
{
	print_block(f, p, b, depth + 2, -1);
	if (yields) {
		indent(f, depth + 2);
		fputs("yield", f);
		for (int k = 0; k < op->ncarry; k++)
			fprintf(f, "%s %s", k ? "," : "", ir_value_name(p, yields[k]));
		fputs("\n", f);
	}
	indent(f, depth + 1);
	fputs("}\n", f);
}

static void print_revolve(FILE *f, Program *p, Op *op, int depth)
{
	fprintf(f, "revolve %lld..%lld snapshots %d", (long long)op->lo, (long long)(op->lo + op->trip), op->nsnap);
	if (op->nhost)
		fprintf(f, " (%d in host memory)", op->nhost);
	if (op->swept)
		fputs(" saved by the forward loop", f);
	if (op->ktape)
		fprintf(f, " tape rows %lld", (long long)op->ktape);
	if (op->replay)
		fputs(" replaying the state", f);
	fputs(" state (", f);
	for (int k = 0; k < op->ncarry; k++) {
		fprintf(f, "%s%s = %s in %s", k ? ", " : "", ir_value_name(p, op->carg[k]), ir_value_name(p, op->in[k]),
		        ir_value_name(p, op->snap[k]));
		if (op->nhost)
			fprintf(f, " and %s", ir_value_name(p, op->hsnap[k]));
	}
	fputs(") {\n", f);
	indent(f, depth + 1);
	fprintf(f, "advance %s {\n", ir_value_name(p, op->ivar));
	print_body(f, p, op, &op->body, op->cyield, depth);
	indent(f, depth + 1);
	if (op->ktape) {
		fprintf(f, "tape %s into row %s {\n", ir_value_name(p, op->ivar), ir_value_name(p, op->irow));
		print_body(f, p, op, &op->body3, op->cyield3, depth);
		indent(f, depth + 1);
		fprintf(f, "adjoint %s from row %s {\n", ir_value_name(p, op->ivar2), ir_value_name(p, op->irow));
	} else {
		fprintf(f, "taped %s {\n", ir_value_name(p, op->ivar2));
	}
	print_body(f, p, op, &op->body2, NULL, depth);
	indent(f, depth);
	fputs("}\n", f);
}

/* the attributes its kind has (ops.def's attr column) */
static void print_attr(FILE *f, Program *p, Op *op)
{
	const Attr *a = &op->attr;
	switch (ir_ops[op->kind].attr) {
	case AT_VALUE:
		fprintf(f, " eps=%g", a->value); /* const and fill print theirs first */
		break;
	case AT_AXES:
		fprintf(f, " axes=%s", axes_str(a->axes, ir_vtype(p, op->in[0]).rank));
		break;
	case AT_PERM:
		fputs(" perm=[", f);
		for (int i = 0; i < ir_vtype(p, op->in[0]).rank; i++)
			fprintf(f, "%s%d", i ? ", " : "", a->perm[i]);
		fputs("]", f);
		break;
	case AT_HEADS:
		fprintf(f, " heads=%d%s%s%s", a->attn.heads, a->attn.causal ? " causal" : "", a->attn.flash ? " flash" : "",
		        a->attn.tf32 ? " tf32" : "");
		break;
	case AT_AXIS:
		fprintf(f, " axis=%d", a->ax.axis);
		if (op->kind != OP_ARGMAX)
			fprintf(f, " at=%lld", (long long)a->ax.at);
		break;
	case AT_WINDOW:
		fprintf(f, " kernel=%dx%d stride=%dx%d pad=%dx%d dilation=%dx%d", a->win.kh, a->win.kw, a->win.sh, a->win.sw,
		        a->win.ph, a->win.pw, a->win.dh, a->win.dw);
		if (a->win.g > 1)
			fprintf(f, " groups=%d", a->win.g);
		break;
	case AT_LABELS:
		if (a->lab.has)
			fprintf(f, " ignore=%d", a->lab.ignore);
		break;
	case AT_PADDING:
		if (a->lab.has)
			fprintf(f, " padding_idx=%d", a->lab.ignore);
		break;
	case AT_DROPOUT:
		fprintf(f, " p=%g site=%d", a->drop.p, a->drop.site);
		break;
	case AT_LITERAL: {
		int64_t n = ir_numel(op->to);
		for (int64_t i = 0; i < n && i < 8; i++)
			fprintf(f, "%s%.17g", i ? ", " : " [", a->lit.v[i]);
		fputs(n > 8 ? ", ...]" : "]", f);
		break;
	}
	case AT_NONE:
	case AT_MATMUL: /* printed with its operands */
		break;
	}
}

static void print_op(FILE *f, Program *p, Op *op, int depth)
{
	const char *name = ir_ops[op->kind].name;
	indent(f, depth);
	if (op->kind == OP_REVOLVE) {
		print_revolve(f, p, op, depth);
		return;
	}
	if (op->kind == OP_LOOP) {
		fprintf(f, "loop %s in %lld..%lld%s", ir_value_name(p, op->ivar), (long long)op->lo,
		        (long long)(op->lo + op->trip), op->reverse ? " reverse" : "");
		if (op->ncarry) {
			fputs(" carry (", f);
			for (int k = 0; k < op->ncarry; k++)
				fprintf(f, "%s%s = %s", k ? ", " : "", ir_value_name(p, op->carg[k]), ir_value_name(p, op->in[k]));
			fputs(")", f);
		}
		if (ir_loop_tail(op))
			fprintf(f, " taping its last %lld into row %s", (long long)ir_loop_tail(op), ir_value_name(p, op->irow));
		if (op->role)
			fprintf(f, "  # %s", op->role);
		fputs(" {\n", f);
		print_block(f, p, &op->body, depth + 1, -1);
		if (op->ncarry) {
			indent(f, depth + 1);
			fputs("yield", f);
			for (int k = 0; k < op->ncarry; k++)
				fprintf(f, "%s %s", k ? "," : "", ir_value_name(p, op->cyield[k]));
			fputs("\n", f);
		}
		indent(f, depth);
		fputs("}", f);
		if (op->ncarry) {
			fputs(" -> ", f);
			for (int k = 0; k < op->ncarry; k++)
				fprintf(f, "%s%s", k ? ", " : "", ir_value_name(p, op->cout[k]));
		}
		fputs("\n", f);
		return;
	}
	if (op->kind == OP_H2D) {
		fprintf(f, "h2d %s, %s[%s", ir_value_name(p, op->in[0]), ir_value_name(p, op->in[1]), ir_value_name(p, op->in[2]));
		if (op->shift)
			fprintf(f, " %c %lld", op->shift < 0 ? '-' : '+', (long long)(op->shift < 0 ? -op->shift : op->shift));
		fprintf(f, "]  # units %lld..%lld\n", (long long)op->lo, (long long)(op->lo + op->trip - 1));
		return;
	}
	if (op->kind == OP_UPDATE) {
		fprintf(f, "update %s[%s], %s  # %s %s on the host: the gradient down, added to the step's, the update there\n",
		        ir_value_name(p, op->in[0]), ir_value_name(p, op->in[2]), ir_value_name(p, op->in[1]),
		        p->optimizer == OPT_ADAM ? "adam" : "sgd", p->params.data[op->index].name);
		return;
	}
	if (op->kind == OP_GRAD_IN) {
		fprintf(f, "grad_in %s, %s  # %s: 0, once the unit before it is down\n", ir_value_name(p, op->in[0]),
		        ir_value_name(p, op->in[1]), p->params.data[op->index].name);
		return;
	}
	if (op->kind == OP_ALLREDUCE) {
		if (op->nin == 2)
			fprintf(f, "allreduce %s[%s]  # this layer of %s complete: summed across the ranks\n",
			        ir_value_name(p, op->in[0]), ir_value_name(p, op->in[1]), p->params.data[op->index].name);
		else
			fprintf(f, "allreduce %s  # %s complete: summed across the ranks\n", ir_value_name(p, op->in[0]),
			        p->params.data[op->index].name);
		return;
	}
	if (op->kind == OP_OFFLOAD || op->kind == OP_SETTLE) {
		fprintf(f, "%s %s", name, ir_value_name(p, op->in[0]));
		if (op->kind == OP_OFFLOAD)
			fprintf(f, ", %s", ir_value_name(p, op->in[1]));
		fprintf(f, "  # copy %d%s\n", op->index, op->kind == OP_OFFLOAD ? " to the host" : " done");
		return;
	}
	if (op->kind == OP_WAIT) {
		fprintf(f, "%s %s[%s]\n", name, ir_value_name(p, op->in[0]), ir_value_name(p, op->in[1]));
		return;
	}
	if (ir_ops[op->kind].flags & OPF_WRITE) {
		fprintf(f, "%s %s", name, ir_value_name(p, op->in[0]));
		if (op->kind == OP_ACC_SLICE || op->kind == OP_STORE_SLICE)
			fprintf(f, "[%s], %s", ir_value_name(p, op->in[1]), ir_value_name(p, op->in[2]));
		else if (op->nin > 1)
			fprintf(f, ", %s", ir_value_name(p, op->in[1]));
		fputs("\n", f);
		return;
	}
	fprintf(f, "%s = ", ir_value_name(p, op->out));
	switch (op->kind) {
	case OP_PARAM:
		fprintf(f, "param %s", p->params.data[op->index].name);
		break;
	case OP_INPUT:
		fprintf(f, "input %s", p->inputs.data[op->index].name);
		break;
	case OP_CONST:
		fprintf(f, "const %.17g", op->attr.value);
		break;
	case OP_IDX:
		fprintf(f, "idx %d", op->index);
		break;
	case OP_FILL:
		fprintf(f, "fill %.17g", op->attr.value);
		break;
	case OP_SLICE:
		fprintf(f, "%s[%s]", ir_value_name(p, op->in[0]), ir_value_name(p, op->in[1]));
		break;
	case OP_MATMUL:
		fprintf(f, "matmul %s%s, %s%s", ir_value_name(p, op->in[0]), op->attr.mm.ta ? "^T" : "",
		        ir_value_name(p, op->in[1]), op->attr.mm.tb ? "^T" : "");
		break;
	default:
		fputs(name, f);
		for (int k = 0; k < op->nin; k++)
			fprintf(f, "%s %s", k ? "," : "", ir_value_name(p, op->in[k]));
		print_attr(f, p, op);
		break;
	}
	/* a copy of a forward op that the adjoint computes again */
	fprintf(f, " : %s%s\n", ir_type_str(ir_vtype(p, op->out)), op->recomputed ? "  # again" : "");
}

static void print_block(FILE *f, Program *p, Block *b, int depth, int nforward)
{
	for (int i = 0; i < b->len; i++) {
		if (i == nforward && nforward < b->len) {
			indent(f, depth);
			fputs("# backward\n", f);
		}
		print_op(f, p, b->ops[i], depth);
	}
}

void ir_print(FILE *f, Program *p)
{
	fprintf(f, "# precision %s%s\n", ir_dt_name(p->real), p->mixed ? "-mixed" : "");
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		fprintf(f, "%s %s : %s = %s%s\n", q->buffer ? "buffer" : "param", q->name, ir_decl_type_str(q->type, q->stacked), init_str(q),
		        q->nodecay ? " nodecay" : "");
	}
	for (int i = 0; i < p->inputs.len; i++) {
		Input *in = &p->inputs.data[i];
		fprintf(f, "input %s : %s", in->name, ir_type_str(in->type));
		if (in->classes)
			fprintf(f, "  # classes %d", in->classes);
		fputs("\n", f);
	}
	for (int v = 0; v < p->values.len; v++)
		if (p->values.data[v].kind == VK_VAR)
			fprintf(f, "var %s : %s%s\n", ir_value_name(p, v), ir_type_str(p->values.data[v].type),
			        p->values.data[v].vclass == VC_SLOT ? "  # device slots: [i] is slot i mod the first axis"
			        : p->values.data[v].vclass == VC_HGRAD ? "  # in host memory: each unit's gradient, copied down"
			        : "");
	fputs("\n", f);
	print_block(f, p, &p->body, 0, p->has_grad ? p->nforward : -1);
	fprintf(f, "loss %s\n", ir_value_name(p, p->loss));
	for (int i = 0; i < p->reports.len; i++)
		fprintf(f, "report %s %s\n", p->reports.data[i].name, ir_value_name(p, p->reports.data[i].value));
	for (int i = 0; i < p->updates.len; i++)
		fprintf(f, "update %s = %s\n", p->updates.data[i].name, ir_value_name(p, p->updates.data[i].value));
	if (p->has_grad)
		for (int i = 0; i < p->params.len; i++)
			if (!p->params.data[i].buffer)
				fprintf(f, "grad %s = %s%s\n", p->params.data[i].name, ir_value_name(p, p->params.data[i].grad),
				        p->params.data[i].streamed ? "  # streamed: one unit at a time" : "");
}
