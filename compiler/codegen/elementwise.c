/* cg, elementwise: add ... where. A run of up to CG_MAXSTEPS elementwise
 * ops of one result shape is one kernel (K_FUSED), its intermediates in
 * registers; each op's meaning at one point is ew(). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"

/* ---- bodies ---- */

/* tanh |x| = (1 - e^-2|x|) / (1 + e^-2|x|): no overflow, sign restored */
static LLVMValueRef rtanh(K *k, LLVMValueRef a)
{
	LLVMBuilderRef B = k->b;
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, a, cg_kreal(k, 0), "");
	LLVMValueRef ax = LLVMBuildSelect(B, neg, LLVMBuildFNeg(B, a, ""), a, "");
	LLVMValueRef e = cg_exp(k, LLVMBuildFMul(B, ax, cg_kreal(k, -2), ""));
	LLVMValueRef t = LLVMBuildFDiv(B, LLVMBuildFSub(B, cg_kreal(k, 1), e, ""), LLVMBuildFAdd(B, cg_kreal(k, 1), e, ""), "");
	return LLVMBuildSelect(B, neg, LLVMBuildFNeg(B, t, ""), t, "");
}

static LLVMValueRef mul(K *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(k->b, a, b, ""); }

/* 1.0 where the comparison holds, else 0.0 */
static LLVMValueRef truth(K *k, LLVMRealPredicate pr, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(k->b, LLVMBuildFCmp(k->b, pr, a, b, ""), cg_kreal(k, 1), cg_kreal(k, 0), "");
}

/* One elementwise op on values a, b, c (as its arity has them); its meaning
 * is ops_eval_ew (compiler/ops/elementwise.c). */
static LLVMValueRef ew(K *k, OpKind op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMBuilderRef B = k->b;
	switch (op) {
	case OP_ADD: return LLVMBuildFAdd(B, a, b, "");
	case OP_SUB: return LLVMBuildFSub(B, a, b, "");
	case OP_MUL: return mul(k, a, b);
	case OP_DIV: return LLVMBuildFDiv(B, a, b, "");
	case OP_NEG: return LLVMBuildFNeg(B, a, "");
	case OP_RELU: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, cg_kreal(k, 0), ""), a, cg_kreal(k, 0), "");
	case OP_STEP: return truth(k, LLVMRealOGT, a, cg_kreal(k, 0));
	case OP_EXP: return cg_exp(k, a);
	case OP_LOG: return cg_log(k, a);
	case OP_SQRT: return cg_sqrt(k, a);
	case OP_SIGMOID:
		return LLVMBuildFDiv(B, cg_kreal(k, 1), LLVMBuildFAdd(B, cg_kreal(k, 1), cg_exp(k, LLVMBuildFNeg(B, a, "")), ""), "");
	case OP_TANH: return rtanh(k, a);
	case OP_ABS: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, a, cg_kreal(k, 0), ""), LLVMBuildFNeg(B, a, ""), a, "");
	case OP_SIGN: return LLVMBuildFSub(B, truth(k, LLVMRealOGT, a, cg_kreal(k, 0)), truth(k, LLVMRealOLT, a, cg_kreal(k, 0)), "");
	case OP_ERF: return cg_math(k, "erf", a, NULL);
	case OP_SIN: return cg_math(k, "sin", a, NULL);
	case OP_COS: return cg_math(k, "cos", a, NULL);
	case OP_POW: return cg_math(k, "pow", a, b);
	case OP_GELU:
	case OP_GELU_GRAD: {
		/* t = tanh(c (x + 0.044715 x^3)); gelu = x (1 + t) / 2 */
		LLVMValueRef x2 = mul(k, a, a);
		LLVMValueRef t = rtanh(k, mul(k, mul(k, a, cg_kreal(k, 0.7978845608028654)),
		                              LLVMBuildFAdd(B, cg_kreal(k, 1), mul(k, x2, cg_kreal(k, 0.044715)), "")));
		LLVMValueRef half = mul(k, LLVMBuildFAdd(B, cg_kreal(k, 1), t, ""), cg_kreal(k, 0.5));
		if (op == OP_GELU)
			return mul(k, a, half);
		/* (1 + t) / 2 + x (1 - t^2) c (1 + 3 0.044715 x^2) / 2 */
		LLVMValueRef d = mul(k, LLVMBuildFSub(B, cg_kreal(k, 1), mul(k, t, t), ""),
		                     LLVMBuildFAdd(B, cg_kreal(k, 1), mul(k, x2, cg_kreal(k, 3 * 0.044715)), ""));
		return LLVMBuildFAdd(B, half, mul(k, mul(k, a, d), cg_kreal(k, 0.5 * 0.7978845608028654)), "");
	}
	case OP_MAXIMUM: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, a, b, ""), a, b, "");
	case OP_MINIMUM: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLE, a, b, ""), a, b, "");
	case OP_LT: return truth(k, LLVMRealOLT, a, b);
	case OP_LE: return truth(k, LLVMRealOLE, a, b);
	case OP_GT: return truth(k, LLVMRealOGT, a, b);
	case OP_GE: return truth(k, LLVMRealOGE, a, b);
	case OP_EQ: return truth(k, LLVMRealOEQ, a, b);
	case OP_NE: return truth(k, LLVMRealUNE, a, b);
	case OP_WHERE: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNE, a, cg_kreal(k, 0), ""), b, c, "");
	default:
		die("no elementwise lowering for %s", ir_ops[op].name);
	}
}

void cg_kernel_elementwise(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMValueRef e = cg_vec_index(k, idx);
	LLVMValueRef coord[IR_MAXRANK];
	if ((int)d->kind != K_FUSED)
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	/* values pass between steps in registers; only the ones used elsewhere
	 * are stored. Each is rounded as its storage would round it (bf16), so
	 * that which ops share a kernel, which depends on the schedule (a value
	 * computed again next to its reader under min-memory), leaves the bits
	 * as they are. */
	cg_unravel(k, d->out, e, coord);
	LLVMValueRef val[CG_MAXSTEPS], x[3] = {NULL, NULL, NULL};
	for (int s = 0; s < d->nsteps; s++) {
		const KStep *st = &d->step[s];
		for (int j = 0; j < st->nin; j++) {
			if (st->is_const[j])
				x[j] = cg_kreal(k, st->cval[j]);
			else if (st->src[j] < 0)
				x[j] = val[-st->src[j] - 1];
			else
				x[j] = cg_operand(k, cg_ptr(k, args[st->src[j]], g->realp), st->in[j], d->out, coord);
		}
		val[s] = cg_stored(k, ew(k, st->kind, x[0], x[1], x[2]));
		if (st->store >= 0)
			cg_vstore(k, cg_ptr(k, args[st->store], g->realp), e, val[s]);
	}
}

/* elementwise ops are lowered by cg_lower_fused */
bool cg_host_elementwise(Host *h, Op *op)
{
	(void)h, (void)op;
	return false;
}

static bool elementwise(Op *op) { return ir_ops[op->kind].flags & OPF_EW; }

/* The word that carries value v, added on first use. */
static int word_of(Host *h, LLVMValueRef *words, int *vals, int *nw, int v)
{
	for (int i = 0; i < *nw; i++)
		if (vals[i] == v)
			return i;
	vals[*nw] = v;
	words[*nw] = cg_addr(h, v);
	return (*nw)++;
}

/* The plan may give an op's result the storage of a value whose last use was
 * an earlier op, or of an operand it updates in place. Fused, the two run in
 * one kernel, where another element's thread may still read what this one
 * writes: such an op starts a new kernel, unless the value read is exactly
 * the result's storage at the result's shape, so that each element is read
 * and written by one thread. */
static bool clobbers(Cg *g, Op *op, const int *vals, int nw)
{
	Program *p = g->p;
	int64_t lo, hi, a, b;
	cg_extent(g, op->out, &lo, &hi);
	Type shape = ir_vtype(p, op->out);
	for (int i = 0; i < nw; i++) {
		cg_extent(g, vals[i], &a, &b);
		bool same = a == lo && b == hi && ir_type_eq(ir_vtype(p, vals[i]), shape) &&
		            (p->values.data[vals[i]].res != VR_ALIAS || !p->values.data[vals[i]].def ||
		             p->values.data[vals[i]].def->kind != OP_SLICE);
		if (a < hi && lo < b && !same)
			return true;
	}
	return false;
}

/* Fuses the elementwise ops b[from..] of one result shape into one kernel;
 * returns how many it took. */
int cg_lower_fused(Host *h, Block *b, int from, int to)
{
	Program *p = h->g->p;
	Type shape = ir_vtype(p, b->ops[from]->out);
	KDesc d;
	memset(&d, 0, sizeof d);
	d.kind = (OpKind)K_FUSED;
	d.out = shape;
	LLVMValueRef words[16];
	int vals[16], nw = 0;
	int n = 0;
	/* the words: each step's operands, and a store for each step's result (known only at the end),
	 * at most 16 (the argument buffer); a step takes at most 3 operands */
	while (from + n < to && n < CG_MAXSTEPS && elementwise(b->ops[from + n]) &&
	       ir_type_eq(ir_vtype(p, b->ops[from + n]->out), shape) && nw + (n + 1) + 3 <= 16 &&
	       (n == 0 || !clobbers(h->g, b->ops[from + n], vals, nw))) {
		Op *op = b->ops[from + n];
		KStep *st = &d.step[n];
		st->kind = op->kind;
		st->nin = op->nin;
		st->store = -1;
		for (int j = 0; j < op->nin; j++) {
			Value *x = &p->values.data[op->in[j]];
			st->in[j] = x->type;
			int earlier = -1;
			for (int s = 0; s < n; s++)
				if (b->ops[from + s]->out == op->in[j])
					earlier = s;
			if (x->def && x->def->kind == OP_CONST)
				st->is_const[j] = true, st->cval[j] = x->def->attr.value;
			else if (earlier >= 0)
				st->src[j] = -(earlier + 1);
			else
				st->src[j] = word_of(h, words, vals, &nw, op->in[j]);
		}
		n++;
	}
	/* store a step's result unless every use is a later step of this kernel */
	for (int s = 0; s < n; s++) {
		int v = b->ops[from + s]->out, inside = 0;
		for (int t = s + 1; t < n; t++)
			for (int j = 0; j < b->ops[from + t]->nin; j++)
				inside += b->ops[from + t]->in[j] == v;
		if (h->uses[v] > inside || ir_is_result(p, v))
			d.step[s].store = word_of(h, words, vals, &nw, v);
	}
	d.nsteps = n;
	cg_launch(h, &d, words, nw);
	return n;
}