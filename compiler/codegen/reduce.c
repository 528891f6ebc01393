/* cg, reduce: sum, mean, max, min, sum_to (one output per item, its
 * elements shared by the lanes of a GPU reduction; over leading axes a
 * GEMM with ones), argmax, softmax, log_softmax and their gradients. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cgint.h"

/* a contiguous run of a reduction's input, negated for min */
typedef struct {
	LLVMValueRef in;
	bool neg;
} Run;

static LLVMValueRef run_term(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	(void)i;
	Run *r = ctx;
	LLVMValueRef x = cg_row_load(k, r->in, at);
	return r->neg ? LLVMBuildFNeg(k->b, x, "") : x;
}

/* base plus the offset of reduction counter i, unravelled over the reduced
 * axes before `end` */
static LLVMValueRef reduced_offset(K *k, Type t, const bool *kept, int end, const int64_t *stride, LLVMValueRef base, LLVMValueRef i)
{
	Type red = {.rank = 0};
	int axis[IR_MAXRANK];
	for (int a = 0; a < end; a++)
		if (!kept[a])
			axis[red.rank] = a, red.dim[red.rank++] = t.dim[a];
	LLVMValueRef rc[IR_MAXRANK];
	cg_unravel(k, red, i, rc);
	for (int j = 0; j < red.rank; j++)
		base = LLVMBuildAdd(k->b, base, LLVMBuildMul(k->b, rc[j], cg_i64(k->g, stride[axis[j]]), ""), "");
	return base;
}

/* a reduction's elements [lo, hi) of the counter over its reduced axes,
 * the lanes taking every lanes-th from lo + lane (lo NULL: 0), then combined */
typedef struct {
	LLVMValueRef in;
	Type t;
	const bool *kept;
	const int64_t *stride;
	LLVMValueRef base;
	bool neg, max;
	LLVMValueRef init;
} Fold;

static LLVMValueRef fold_lanes(K *k, const Fold *f, LLVMValueRef lo, LLVMValueRef hi)
{
	Loop l = cg_for_from(k, lo ? LLVMBuildAdd(k->b, lo, k->lane, "") : k->lane, k->lanes, hi);
	Acc sum = cg_acc(k, &l, f->init);
	LLVMValueRef x = cg_load(k, f->in, reduced_offset(k, f->t, f->kept, f->t.rank, f->stride, f->base, l.i));
	if (f->neg)
		x = LLVMBuildFNeg(k->b, x, "");
	LLVMValueRef next = cg_combine(k, sum.phi, x, f->max);
	cg_acc_next(k, &sum, next);
	cg_for_end(k, &l, hi);
	return cg_all_reduce(k, cg_acc_result(k, &l, f->init, next), f->max);
}

/* sum (max, min) over the input axes that the output does not keep; min
 * is max of the negated values, negated */
static void body_reduce(K *k, const KDesc *d, LLVMValueRef out, LLVMValueRef in, LLVMValueRef idx)
{
	Cg *g = k->g;
	Type t = d->in[0], o = d->out;
	bool kept[IR_MAXRANK];
	int out_axis[IR_MAXRANK];
	int64_t count = cg_reduced_axes(d, kept, out_axis);
	/* in two launches (cg_reduce_parts): stage 1's item part x outputs + o
	 * folds part `part` of output o's elements into the module array */
	int64_t parts = d->stage ? cg_reduce_parts(g, d) : 1, outputs = ir_numel(o), per = (count + parts - 1) / parts;
	LLVMValueRef item = idx, part = NULL;
	if (d->stage == 1) {
		part = LLVMBuildUDiv(k->b, idx, cg_i64(g, outputs), "");
		idx = LLVMBuildURem(k->b, idx, cg_i64(g, outputs), "");
	}
	LLVMValueRef oc[IR_MAXRANK];
	cg_unravel(k, o, idx, oc);
	/* base offset of the kept coordinates */
	LLVMValueRef base = cg_i64(g, 0);
	int64_t stride[IR_MAXRANK], s = 1;
	for (int a = t.rank - 1; a >= 0; a--)
		stride[a] = s, s *= t.dim[a];
	for (int a = 0; a < t.rank; a++)
		if (kept[a] && t.dim[a] > 1)
			base = LLVMBuildAdd(k->b, base, LLVMBuildMul(k->b, oc[out_axis[a]], cg_i64(g, stride[a]), ""), "");
	bool max = d->kind == OP_MAX || d->kind == OP_MIN, neg = d->kind == OP_MIN;
	LLVMValueRef init = cg_real(g, max ? -INFINITY : 0);
	/* on the CPU the trailing axes that are reduced (or kept with size 1)
	 * are one contiguous run of `inner` elements from axis `first` */
	int first = t.rank;
	int64_t inner = 1;
	while (!g->cuda && first > 0 && (!kept[first - 1] || t.dim[first - 1] == 1))
		inner *= t.dim[--first];
	LLVMValueRef total;
	if (d->stage == 2) {
		/* the parts in order, by one thread */
		LLVMValueRef parr = cg_global_array(k, g->real == g->f64 ? "dp_reduce_f64" : "dp_reduce_f32", CG_REDUCE_PARTIALS);
		total = init;
		LLVMValueRef np = cg_i64(g, parts);
		Loop l = cg_for(k, np);
		Acc sum = cg_acc(k, &l, init);
		LLVMValueRef at = LLVMBuildAdd(k->b, LLVMBuildMul(k->b, l.i, cg_i64(g, outputs), ""), idx, "");
		LLVMValueRef next = cg_combine(k, sum.phi, LLVMBuildLoad2(k->b, g->real, LLVMBuildGEP2(k->b, g->real, parr, &at, 1, ""), ""), max);
		cg_acc_next(k, &sum, next);
		cg_for_end(k, &l, np);
		total = cg_acc_result(k, &l, init, next);
	} else if (d->stage == 1) {
		LLVMValueRef lo = LLVMBuildMul(k->b, part, cg_i64(g, per), "");
		LLVMValueRef hi = LLVMBuildAdd(k->b, lo, cg_i64(g, per), "");
		hi = LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntSLT, hi, cg_i64(g, count), ""), hi, cg_i64(g, count), "");
		Fold f = {in, t, kept, stride, base, neg, max, init};
		total = fold_lanes(k, &f, lo, hi);
		LLVMValueRef parr = cg_global_array(k, g->real == g->f64 ? "dp_reduce_f64" : "dp_reduce_f32", CG_REDUCE_PARTIALS);
		LLVMBasicBlockRef put = cg_if(k, LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(g, 0), ""));
		LLVMBuildStore(k->b, total, LLVMBuildGEP2(k->b, g->real, parr, &item, 1, ""));
		cg_end_if(k, put);
		return;
	} else if (inner > 1) {
		/* the other reduced axes one place at a time, each a fold over the run */
		LLVMValueRef no = cg_i64(g, count / inner);
		Loop l = cg_for(k, no);
		Acc sum = cg_acc(k, &l, init);
		LLVMValueRef off = reduced_offset(k, t, kept, first, stride, base, l.i);
		Run r = {in, neg};
		LLVMValueRef next = cg_combine(k, sum.phi, cg_fold(k, off, inner, max, init, run_term, &r), max);
		cg_acc_next(k, &sum, next);
		cg_for_end(k, &l, no);
		total = cg_acc_result(k, &l, init, next);
	} else {
		Fold f = {in, t, kept, stride, base, neg, max, init};
		total = fold_lanes(k, &f, NULL, cg_i64(g, count));
	}
	if (neg)
		total = LLVMBuildFNeg(k->b, total, "");
	if (d->kind == OP_MEAN)
		total = LLVMBuildFDiv(k->b, total, cg_real(g, (double)count), "");
	if (d->accumulate) {
		/* what the absorbed acc did: v + x, in that order; lane 0 alone reads and writes (and not a group
		 * that repeats the warp's last item: it would add twice) */
		LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "put"), join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "join");
		LLVMValueRef first = LLVMBuildICmp(k->b, LLVMIntEQ, k->lane, cg_i64(g, 0), "");
		if (k->dup)
			first = LLVMBuildAnd(k->b, first, LLVMBuildNot(k->b, k->dup, ""), "");
		LLVMBuildCondBr(k->b, first, put, join);
		LLVMPositionBuilderAtEnd(k->b, put);
		cg_store(k, out, idx, LLVMBuildFAdd(k->b, cg_load(k, out, idx), total, ""));
		LLVMBuildBr(k->b, join);
		LLVMPositionBuilderAtEnd(k->b, join);
		return;
	}
	cg_store_once(k, out, idx, total);
}

typedef struct {
	LLVMValueRef x, mx;
} Lse;

static LLVMValueRef lse_x(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i) { return cg_row_load(k, ((Lse *)ctx)->x, at); }

static LLVMValueRef lse_exp(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	Lse *s = ctx;
	return cg_exp(k, LLVMBuildFSub(k->b, cg_row_load(k, s->x, at), cg_splat(k, s->mx), ""));
}

/* The GPU's log-sum-exp in one pass: each lane keeps the largest entry m
 * it has seen and s, the sum of exp(x - m) over its entries, scaled down
 * when m grows (one exp an entry: exp(-|x - m|) serves both cases); then
 * the lanes' maxima meet, and their sums scaled to the row's max. The
 * logits are read once, not twice: GPT-2's rows are 50,257 wide, too many
 * in flight for the second read to come from L2. -inf entries add
 * nothing; a NaN makes the result NaN. The entries may be scaled first,
 * and raw: held in the compute type, not the kernel's storage type. */
static LLVMValueRef row_lse_online(K *k, LLVMValueRef x, bool raw, LLVMValueRef base, LLVMValueRef n, double scale,
                                   bool split, LLVMValueRef *max_out);

LLVMValueRef cg_lse_online(K *k, LLVMValueRef x, bool raw, LLVMValueRef base, LLVMValueRef n, double scale, LLVMValueRef *max_out)
{
	return row_lse_online(k, x, raw, base, n, scale, k->lanes > 1, max_out);
}

/* the running max and sum after entry v: one exp an entry */
static void lse_step(K *k, LLVMValueRef v, LLVMValueRef *m, LLVMValueRef *s)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef ninf = cg_real(g, -INFINITY), zero = cg_real(g, 0), one = cg_real(g, 1);
	LLVMValueRef d = LLVMBuildFSub(B, v, *m, ""), up = LLVMBuildFCmp(B, LLVMRealOGT, d, zero, "");
	LLVMValueRef e = cg_exp(k, LLVMBuildSelect(B, up, LLVMBuildFNeg(B, d, ""), d, ""));
	e = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, v, ninf, ""), zero, e, "");
	*s = LLVMBuildSelect(B, up, LLVMBuildFAdd(B, LLVMBuildFMul(B, *s, e, ""), one, ""), LLVMBuildFAdd(B, *s, e, ""), "");
	*m = LLVMBuildSelect(B, up, v, *m, "");
}

/* entries from..n (this lane's share where split) into the running max and sum */
static void lse_elements(K *k, LLVMValueRef x, bool raw, LLVMValueRef base, LLVMValueRef from, LLVMValueRef n, double scale,
                         bool split, LLVMValueRef *m, LLVMValueRef *s)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	Loop l = split ? cg_for_from(k, LLVMBuildAdd(B, k->lane, from, ""), k->lanes, n) : cg_for_from(k, from, 1, n);
	Acc am = cg_acc(k, &l, *m), as = cg_acc(k, &l, *s);
	LLVMValueRef at = LLVMBuildAdd(B, base, l.i, "");
	LLVMValueRef v = raw ? LLVMBuildLoad2(B, g->real, LLVMBuildGEP2(B, g->real, x, &at, 1, ""), "") : cg_load(k, x, at);
	if (scale != 1)
		v = LLVMBuildFMul(B, v, cg_real(g, scale), "");
	LLVMValueRef nm = am.phi, ns = as.phi;
	lse_step(k, v, &nm, &ns);
	cg_acc_next(k, &am, nm);
	cg_acc_next(k, &as, ns);
	cg_for_end(k, &l, n);
	LLVMValueRef m0 = *m;
	*m = cg_acc_result(k, &l, m0, nm);
	*s = cg_acc_result(k, &l, *s, ns);
}

/* the lanes' share of the row in aligned 16-byte vectors, each vector's
 * entries in order, then the tail's entries */
static void lse_vectors(K *k, LLVMValueRef x, LLVMValueRef base, LLVMValueRef n, double scale, LLVMValueRef *m, LLVMValueRef *s)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	int w = cg_row_vec(g);
	LLVMValueRef nc = LLVMBuildUDiv(B, n, cg_i64(g, w), "");
	Loop l = cg_for_lanes(k, nc);
	Acc am = cg_acc(k, &l, *m), as = cg_acc(k, &l, *s);
	k->vec = w;
	k->vec16 = true;
	LLVMValueRef chunk = cg_row_load(k, x, LLVMBuildAdd(B, base, LLVMBuildMul(B, l.i, cg_i64(g, w), ""), ""));
	k->vec = 1;
	k->vec16 = false;
	LLVMValueRef nm = am.phi, ns = as.phi;
	for (int e = 0; e < w; e++) {
		LLVMValueRef v = LLVMBuildExtractElement(B, chunk, cg_i64(g, e), "");
		if (scale != 1)
			v = LLVMBuildFMul(B, v, cg_real(g, scale), "");
		lse_step(k, v, &nm, &ns);
	}
	cg_acc_next(k, &am, nm);
	cg_acc_next(k, &as, ns);
	cg_for_end(k, &l, nc);
	*m = cg_acc_result(k, &l, *m, nm);
	*s = cg_acc_result(k, &l, *s, ns);
	lse_elements(k, x, false, base, LLVMBuildMul(B, nc, cg_i64(g, w), ""), n, scale, true, m, s);
}

static LLVMValueRef row_lse_online(K *k, LLVMValueRef x, bool raw, LLVMValueRef base, LLVMValueRef n, double scale,
                                   bool split, LLVMValueRef *max_out)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	LLVMValueRef ninf = cg_real(g, -INFINITY), zero = cg_real(g, 0);
	LLVMValueRef mx = ninf, sum = zero;
	if (split && !raw && k->aligned) { /* the row's 16-byte vectors where it is aligned (cg_fold) */
		LLVMBasicBlockRef vb = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "lse_vectors");
		LLVMBasicBlockRef sb = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "lse_elements");
		LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, k->fn, "lse_done");
		LLVMBuildCondBr(B, k->aligned, vb, sb);
		LLVMValueRef m[2] = {ninf, ninf}, s[2] = {zero, zero};
		LLVMBasicBlockRef from[2];
		LLVMPositionBuilderAtEnd(B, vb);
		lse_vectors(k, x, base, n, scale, &m[0], &s[0]);
		from[0] = LLVMGetInsertBlock(B);
		LLVMBuildBr(B, join);
		LLVMPositionBuilderAtEnd(B, sb);
		lse_elements(k, x, false, base, cg_i64(g, 0), n, scale, true, &m[1], &s[1]);
		from[1] = LLVMGetInsertBlock(B);
		LLVMBuildBr(B, join);
		LLVMPositionBuilderAtEnd(B, join);
		mx = LLVMBuildPhi(B, g->real, "");
		LLVMAddIncoming(mx, m, from, 2);
		sum = LLVMBuildPhi(B, g->real, "");
		LLVMAddIncoming(sum, s, from, 2);
	} else {
		lse_elements(k, x, raw, base, cg_i64(g, 0), n, scale, split, &mx, &sum);
	}
	if (split) {
		LLVMValueRef all = cg_all_reduce(k, mx, true);
		LLVMValueRef scale = cg_exp(k, LLVMBuildFSub(B, mx, all, ""));
		scale = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, mx, ninf, ""), zero, scale, "");
		sum = cg_all_reduce(k, LLVMBuildFMul(B, sum, scale, ""), false);
		mx = all;
	}
	*max_out = mx;
	return LLVMBuildFAdd(B, mx, cg_log(k, sum), "");
}

/* Log-sum-exp of the C entries of x from base, and their max. split: the
 * lanes share the row; else this thread reads all of it. On the CPU, in
 * vectors (cg_fold): a scalar running sum waited on its adder for each of
 * GPT's 256 classes. On the GPU in one pass over the row (row_lse_online). */
LLVMValueRef cg_row_lse(K *k, LLVMValueRef x, LLVMValueRef base, int64_t C, bool split, LLVMValueRef *max_out)
{
	Cg *g = k->g;
	if (!cg_gpu_form(k)) {
		LLVMValueRef first = cg_load(k, x, base);
		Lse s = {x, NULL};
		s.mx = cg_fold(k, base, C, true, first, lse_x, &s);
		*max_out = s.mx;
		return LLVMBuildFAdd(k->b, s.mx, cg_log(k, cg_fold(k, base, C, false, cg_real(g, 0), lse_exp, &s)), "");
	}
	return row_lse_online(k, x, false, base, cg_i64(g, C), 1, split, max_out);
}

/* softmax, log_softmax and their gradients: each work item is one row of C
 * entries, shared by the lanes (cg_fold, cg_each: on the GPU in 16-byte
 * vectors where the row is aligned) */
typedef struct {
	const KDesc *d;
	LLVMValueRef out, x, y, gr, lse, sum;
} Rows;

/* softmax and log_softmax at element at */
static void rows_out(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	Rows *r = ctx;
	LLVMValueRef ls = LLVMBuildFSub(k->b, cg_row_load(k, r->x, at), cg_splat(k, r->lse), "");
	cg_row_store(k, r->out, at, r->d->kind == OP_SOFTMAX ? cg_exp(k, ls) : ls);
}

/* what the gradients' row sum adds up: g y (softmax), g (log_softmax) */
static LLVMValueRef rows_term(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	Rows *r = ctx;
	LLVMValueRef g = cg_row_load(k, r->gr, at);
	return r->d->kind == OP_SOFTMAX_GRAD ? LLVMBuildFMul(k->b, g, cg_row_load(k, r->y, at), "") : g;
}

/* SOFTMAX_GRAD (y, g): y (g - sum g y); LOG_SOFTMAX_GRAD (y, g): g - exp(y) sum g */
static void rows_grad(K *k, void *ctx, LLVMValueRef at, LLVMValueRef i)
{
	Rows *r = ctx;
	LLVMValueRef yv = cg_row_load(k, r->y, at), gv = cg_row_load(k, r->gr, at), sum = cg_splat(k, r->sum);
	LLVMValueRef v = r->d->kind == OP_SOFTMAX_GRAD ? LLVMBuildFMul(k->b, yv, LLVMBuildFSub(k->b, gv, sum, ""), "")
	                                               : LLVMBuildFSub(k->b, gv, LLVMBuildFMul(k->b, cg_exp(k, yv), sum, ""), "");
	cg_row_store(k, r->out, at, v);
}

static void body_rows(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef row)
{
	Cg *g = k->g;
	int64_t C = d->out.dim[d->out.rank - 1];
	LLVMValueRef n = cg_i64(g, C), base = LLVMBuildMul(k->b, row, n, "");
	Rows r = {d, ptrs[0], ptrs[1], ptrs[1], d->nin > 1 ? ptrs[2] : NULL, NULL, NULL};
	k->aligned = cg_aligned(k, d->nin > 1 ? 3 : 2, (LLVMValueRef[]){r.out, r.x, r.gr}, (LLVMValueRef[]){base, base, base});
	if (d->kind == OP_SOFTMAX || d->kind == OP_LOG_SOFTMAX) {
		LLVMValueRef mx;
		r.lse = cg_row_lse(k, r.x, base, C, true, &mx);
		cg_each(k, base, C, rows_out, &r);
		k->aligned = NULL;
		return;
	}
	if (cg_gpu_form(k)) {
		r.sum = cg_fold(k, base, C, false, cg_real(g, 0), rows_term, &r);
	} else { /* one running sum, in the row's order */
		Loop l = cg_for(k, n);
		Acc s = cg_acc(k, &l, cg_real(g, 0));
		LLVMValueRef ns = LLVMBuildFAdd(k->b, s.phi, rows_term(k, &r, LLVMBuildAdd(k->b, base, l.i, ""), l.i), "");
		cg_acc_next(k, &s, ns);
		cg_for_end(k, &l, n);
		r.sum = cg_acc_result(k, &l, cg_real(g, 0), ns);
	}
	cg_each(k, base, C, rows_grad, &r);
	k->aligned = NULL;
}

void cg_kernel_reduce(K *k, const KDesc *d, LLVMValueRef *ptrs, LLVMValueRef *args, LLVMValueRef idx)
{
	Cg *g = k->g;
	LLVMBuilderRef B = k->b;
	switch ((int)d->kind) {
	case OP_SUM:
	case OP_MEAN:
	case OP_MAX:
	case OP_MIN:
	case OP_SUM_TO:
		body_reduce(k, d, ptrs[0], ptrs[1], idx);
		return;
	case OP_SOFTMAX:
	case OP_LOG_SOFTMAX:
	case OP_SOFTMAX_GRAD:
	case OP_LOG_SOFTMAX_GRAD:
		body_rows(k, d, ptrs, idx);
		return;
	case OP_ARGMAX: {
		/* out element idx: the input's elements from base, stride apart along the axis */
		Type t = d->in[0];
		int64_t n = t.dim[d->attr.ax.axis], stride = 1;
		for (int i = d->attr.ax.axis + 1; i < t.rank; i++)
			stride *= t.dim[i];
		LLVMValueRef base = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildUDiv(B, idx, cg_i64(g, stride), ""), cg_i64(g, n * stride), ""),
		                                 LLVMBuildURem(B, idx, cg_i64(g, stride), ""), "");
		LLVMValueRef first = cg_load(k, ptrs[1], base), nn = cg_i64(g, n);
		Loop l = cg_for_from(k, cg_i64(g, 1), 1, nn);
		Acc best = cg_acc(k, &l, first), at = cg_acc(k, &l, cg_i64(g, 0));
		LLVMValueRef v = cg_load(k, ptrs[1], LLVMBuildAdd(B, base, LLVMBuildMul(B, l.i, cg_i64(g, stride), ""), ""));
		LLVMValueRef more = LLVMBuildFCmp(B, LLVMRealOGT, v, best.phi, "");
		LLVMValueRef nb = LLVMBuildSelect(B, more, v, best.phi, ""), na = LLVMBuildSelect(B, more, l.i, at.phi, "");
		cg_acc_next(k, &best, nb);
		cg_acc_next(k, &at, na);
		cg_for_end(k, &l, nn);
		LLVMValueRef r = cg_acc_result(k, &l, cg_i64(g, 0), na);
		cg_elem_store(k, true, args[0], idx, LLVMBuildTrunc(B, r, g->i32, ""));
		return;
	}
	default:
		die("no kernel lowering for %s", ir_ops[d->kind].name);
	}
}

bool cg_host_reduce(Host *h, Op *op)
{
	int64_t m, n;
	if (!ir_leading_sum(h->g->p, op, &m, &n))
		return false;
	cg_leading_sum(h, op, cg_addr(h, op->out), 0);
	return true;
}
