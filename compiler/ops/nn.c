/* ops: embedding, attention, layer normalization; the losses, each a scalar, and their gradients
 * (which take the scalar seed as a third operand). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "../../common/rng.h"

/* embed (table[V, D], ids i32[...]) -> [..., D]; embed_grad (g[..., D], ids) -> to */
const char *ops_shape_embed(Program *p, Op *op, Type *out)
{
	Type t = ir_vtype(p, op->in[0]), ids = ir_vtype(p, op->in[1]);
	bool grad = op->kind == OP_EMBED_GRAD;
	if (!ir_is_real(t.dt) || t.rank != (grad ? ids.rank + 1 : 2))
		return ar_printf(grad ? "embed_grad of %s and ids %s" : "embed needs a table f32[V, D], got %s (ids %s)",
		                 ops_vs(p, op->in[0]), ops_vs(p, op->in[1]));
	if (ids.dt != DT_I32)
		return ar_printf("embed needs i32 ids, got %s (table %s)", ops_vs(p, op->in[1]), ops_vs(p, op->in[0]));
	if (ids.rank + 1 > IR_MAXRANK)
		return ar_printf("embed's ids %s have too many axes", ops_ts(ids));
	int64_t V = grad ? op->to.dim[0] : t.dim[0];
	if (op->attr.lab.has && (op->attr.lab.ignore < 0 || op->attr.lab.ignore >= V))
		return ar_printf("embed's padding_idx %d is not a row of a table of %lld", op->attr.lab.ignore, (long long)V);
	if (grad) {
		*out = op->to;
		return NULL;
	}
	*out = ids;
	out->dt = t.dt;
	out->dim[out->rank++] = t.dim[1];
	return NULL;
}

void ops_adjoint_embed(Ad *a, Op *op, int g)
{
	int table = op->in[0];
	if (!ad_active(a, table))
		return;
	Op *d = ir_new_op(ad_program(a), OP_EMBED_GRAD, op->loc, 2, (int[]){g, op->in[1]});
	d->to = ir_vtype(ad_program(a), table);
	d->attr = op->attr; /* padding_idx: its ids add nothing */
	ad_contrib(a, table, ad_emit(a, d), op->loc);
}

/* an attention op's operands before its workspace: q, k, v; q, k, dO, O; q, k, O (attn_lse); dO, O, lse
 * (attn_delta, which has none); q, k, v, dO, stats */
int ops_attn_operands(OpKind k)
{
	return k == OP_ATTENTION || k == OP_ATTN_LSE || k == OP_ATTN_DELTA ? 3 : k == OP_ATTN_STATS ? 4 : 5;
}

/* An attention on GEMMs works in f32 for bf16 (its scores and their
 * gradient; then P or dS rounded to bf16 for the next GEMM, a third part),
 * else in q's type: parts of heads x T reals per query row */
static DType attn_ws_dt(Type q) { return q.dt == DT_BF16 ? DT_F32 : q.dt; }
static int64_t attn_parts(Type q) { return q.dt == DT_BF16 ? 3 : 2; }

/* The query rows it takes at once: as many as 256 MiB holds (a sixteenth
 * of the budget when less), in multiples of 16; when causal at most a
 * quarter of T (from 512): a block's keys end at its last row, so four
 * blocks compute 5/8 of the scores one would. (bf16 took whole rows until
 * 2026-11-27, when GPT-2's step on an H200 spent 169 of its 283 ms in
 * attention's GEMMs and row kernels, and a call's items came to be batched
 * together.) At most `most` when that is given (testing the blocks on
 * small programs). */
static int64_t attn_rows(Type q, int heads, bool causal, int64_t most, int64_t budget)
{
	int64_t T = q.dim[q.rank - 2], row = attn_parts(q) * heads * T * ir_dt_bytes(attn_ws_dt(q));
	int64_t cap = (int64_t)256 << 20;
	cap = budget > 0 && budget / 16 < cap ? budget / 16 : cap;
	int64_t r = cap / row / 16 * 16;
	if (causal && T >= 512 && r > T / 4 / 16 * 16)
		r = T / 4 / 16 * 16;
	r = r < 16 ? 16 : r;
	r = most > 0 && r > most ? most : r;
	return r < T ? r : T;
}

/* The batch items a call takes: every item's heads in one batched GEMM,
 * as many items as the cap of attn_rows holds (a divisor of them; two at
 * most when testing, so that the groups' path runs on small programs).
 * Over the heads alone, GPT-2's 672 GEMMs a step of 256 x 1024 x 64 left
 * an H200 short of blocks (17 TFLOP/s; bench/RESULTS.md, 2026-11-27). */
static int64_t attn_items(Type q, int heads, int64_t rows, int64_t most, int64_t budget)
{
	int64_t T = q.dim[q.rank - 2], items = ir_numel(q) / (T * q.dim[q.rank - 1]);
	int64_t cap = (int64_t)256 << 20;
	cap = budget > 0 && budget / 16 < cap ? budget / 16 : cap;
	int64_t n = cap / (attn_parts(q) * heads * rows * T * ir_dt_bytes(attn_ws_dt(q)));
	n = most > 0 && n > 2 ? 2 : n;
	while (n > 1 && items % n)
		n--;
	return n < 1 ? 1 : n > items ? items : n;
}

/* the values a lane keeps of each row it shares: q and O (attention), q,
 * dO and dq (attn_dq), at most 48 in f32 between them, 24 in f64, whose
 * values take two registers each; k, v, dk and dv (the key side, which
 * holds no row of the tile whole), 64 in f32: the kernels then fit 128
 * registers with no stack (ptxas spilled GPT-2's forward at 64). A head of at most 1 KiB keeps two tiles of the other side's
 * rows within 17 KiB of shared memory. */
static int64_t fma_most(Type q, OpKind k)
{
	int arrays = k == OP_ATTENTION || k == OP_ATTN_LSE ? 2 : k == OP_ATTN_DQ ? 3 : 4;
	return (q.dt == DT_F64 ? 24 : arrays == 4 ? 64 : 48) / arrays;
}

static int fma_lanes(Type q, int heads, OpKind k)
{
	int64_t dh = q.dim[q.rank - 1] / heads;
	if (dh * ir_dt_bytes(q.dt) > 1024)
		return 0;
	for (int lanes = 1; lanes <= 32; lanes *= 2)
		if (dh % lanes == 0 && dh / lanes <= fma_most(q, k))
			return lanes;
	return 0;
}

const char *ops_attn_fma_refuses(Type q, int heads)
{
	if (q.dt != DT_F32 && q.dt != DT_F64)
		return ar_printf("they take f32 and f64, and this attention is %s", ir_dt_name(q.dt));
	if (q.rank < 2 || heads < 1 || q.dim[q.rank - 1] % heads)
		return "its heads do not divide its width";
	int64_t dh = q.dim[q.rank - 1] / heads;
	static const OpKind sides[3] = {OP_ATTENTION, OP_ATTN_DQ, OP_ATTN_DKV};
	for (int i = 0; i < 3; i++)
		if (!fma_lanes(q, heads, sides[i]))
			return ar_printf("they take heads of at most 1 KiB that split into equal shares of at most %lld values over "
			                 "1 to 32 lanes, and these are %lld %s elements wide",
			                 (long long)fma_most(q, sides[i]), (long long)dh, ir_dt_name(q.dt));
	return NULL;
}

int ops_attn_fma_lanes(Type q, int heads, OpKind k) { return ops_attn_fma_refuses(q, heads) ? 0 : fma_lanes(q, heads, k); }

/* [items a call, parts x heads x rows x T]: each part holds every item's heads */
int64_t ops_attn_rows(Type q, int heads, bool causal, int64_t most, int64_t budget)
{
	return attn_rows(q, heads, causal, most, budget);
}

Type ops_attn_scratch(Type q, int heads, bool causal, int64_t most, int64_t budget)
{
	int64_t rows = attn_rows(q, heads, causal, most, budget);
	int64_t dims[2] = {attn_items(q, heads, rows, most, budget), attn_parts(q) * heads * rows * q.dim[q.rank - 2]};
	return ir_type(attn_ws_dt(q), 2, dims);
}

/* [..., heads, T, 2]: each row's log-sum-exp and dO . O (the stats; in q's
 * type from attn_stats, in the workspace's from attn_delta, f32 for bf16);
 * [..., heads, T] in the workspace's type: the log-sum-exp alone (attn_lse).
 * Rank 0 when q has too many axes. */
static Type attn_row_type(Type q, int heads, bool stats)
{
	Type st = q;
	int64_t T = q.dim[q.rank - 2];
	st.rank = q.rank + stats;
	if (st.rank > IR_MAXRANK)
		return ir_scalar(q.dt);
	st.dim[q.rank - 2] = heads;
	st.dim[q.rank - 1] = T;
	if (stats)
		st.dim[q.rank] = 2;
	else
		st.dt = attn_ws_dt(q);
	return st;
}

/* attn_delta (dO, O, lse): the stats of the rows from the forward's log-sum-exp, without the scores */
static const char *shape_delta(Program *p, Op *op, Type *out)
{
	const char *err;
	for (int i = 0; i < 3; i++)
		if ((err = ops_need_real(p, op, i)))
			return err;
	Type o = ir_vtype(p, op->in[1]);
	if (o.rank < 2 || !ir_type_eq(ir_vtype(p, op->in[0]), o))
		return ar_printf("attn_delta needs dO and O of one shape [..., T, C], got %s and %s", ops_vs(p, op->in[0]),
		                 ops_vs(p, op->in[1]));
	int heads = op->attr.attn.heads;
	if (heads < 1 || o.dim[o.rank - 1] % heads)
		return ar_printf("attn_delta's heads=%d must divide the width of O %s", heads, ops_ts(o));
	Type lse = attn_row_type(o, heads, false);
	if (!lse.rank || !ir_type_eq(ir_vtype(p, op->in[2]), lse))
		return ar_printf("attn_delta needs the log-sum-exp %s, got %s", ops_ts(lse), ops_vs(p, op->in[2]));
	*out = attn_row_type(o, heads, true);
	out->dt = attn_ws_dt(o);
	return out->rank ? NULL : ar_printf("attention's O %s has too many axes", ops_ts(o));
}

const char *ops_shape_attention(Program *p, Op *op, Type *out)
{
	const char *err;
	static const char *what[] = {"q", "k", "v", "dO", "O"};
	if (op->kind == OP_ATTN_DELTA)
		return shape_delta(p, op, out);
	Type q = ir_vtype(p, op->in[0]);
	int base = ops_attn_operands(op->kind), same = base == 3 ? 3 : 4; /* shaped like q: all but the stats */
	if (op->nin != base && op->nin != base + 1)
		return ar_printf("%s takes %d operands (and a workspace), got %d", ir_ops[op->kind].name, base, op->nin);
	for (int i = 0; i < op->nin; i++)
		if ((err = ops_need_real(p, op, i)))
			return err;
	if (q.rank < 2)
		return ar_printf("attention needs q, k and v of shape [..., T, C], got q %s", ops_ts(q));
	for (int i = 1; i < same; i++) {
		Type t = ir_vtype(p, op->in[i]);
		if (!ir_type_eq(t, q))
			return ar_printf("attention needs q, k and v of one shape, got q %s and %s %s", ops_vs(p, op->in[0]),
			                 what[op->kind == OP_ATTN_LSE && i == 2 ? 4 : op->kind == OP_ATTN_STATS && i >= 2 ? i + 1 : i],
			                 ops_vs(p, op->in[i]));
	}
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1];
	if (op->attr.attn.heads < 1 || C % op->attr.attn.heads != 0)
		return ar_printf("attention's heads=%d must divide the width %lld of q %s", op->attr.attn.heads, (long long)C, ops_ts(q));
	Type st = attn_row_type(q, op->attr.attn.heads, true);
	if (!st.rank)
		return ar_printf("attention's q %s has too many axes", ops_ts(q));
	Type wst = st; /* attn_delta's, on GEMMs */
	wst.dt = attn_ws_dt(q);
	if (base == 5 && !ir_type_eq(ir_vtype(p, op->in[4]), st) &&
	    !((op->nin > base || op->attr.attn.flash) && ir_type_eq(ir_vtype(p, op->in[4]), wst)))
		return ar_printf("%s needs stats %s, got %s", ir_ops[op->kind].name, ops_ts(st), ops_ts(ir_vtype(p, op->in[4])));
	if (op->nin > base) {
		/* for a divisor of the batch items, a whole number of query rows' scores and their gradient, at most T */
		Type ws = ir_vtype(p, op->in[base]);
		int64_t per = attn_parts(q) * op->attr.attn.heads * T, items = ir_numel(q) / (T * C);
		if (ws.rank != 2 || ws.dt != attn_ws_dt(q) || ws.dim[0] < 1 || items % ws.dim[0] || ws.dim[1] % per ||
		    ws.dim[1] / per < 1 || ws.dim[1] > per * T)
			return ar_printf("%s needs a workspace [items, 1 to %lld query rows of %lld %s], items dividing %lld, got %s",
			                 ir_ops[op->kind].name, (long long)T, (long long)per, ir_dt_name(attn_ws_dt(q)), (long long)items,
			                 ops_ts(ws));
	}
	*out = op->kind == OP_ATTN_STATS ? st : op->kind == OP_ATTN_LSE ? attn_row_type(q, op->attr.attn.heads, false) : q;
	if (op->kind == OP_ATTN_DKV) { /* [2, ...q]: dk, then dv */
		if (q.rank + 1 > IR_MAXRANK)
			return ar_printf("attention's q %s has too many axes", ops_ts(q));
		memmove(&out->dim[1], &out->dim[0], sizeof(int64_t) * (size_t)q.rank);
		out->dim[0] = 2;
		out->rank++;
	}
	return NULL;
}

static int attn_op(Ad *a, Op *op, OpKind k, int nin, const int *in)
{
	Op *d = ir_new_op(ad_program(a), k, op->loc, nin, in);
	d->attr = op->attr;
	return ad_emit(a, d);
}

/* a workspace like the forward's, for a gradient op (none when it has none) */
static int attn_scratch(Ad *a, Op *op)
{
	if (op->nin == 3)
		return -1;
	Program *p = ad_program(a);
	Op *ws = ir_new_op(p, OP_SCRATCH, op->loc, 0, NULL);
	ws->to = ir_vtype(p, op->in[3]);
	return ad_emit(a, ws);
}

/* the rows' statistics once, then each operand's gradient. On GEMMs and
 * on tensor cores (flash) the forward kept each row's log-sum-exp
 * (attn_lse, ad_attn_lse): the stats then need dO . O alone, not the
 * scores once more, and dk and dv come from one pass. */
void ops_adjoint_attention(Ad *a, Op *op, int g)
{
	int q = op->in[0], k = op->in[1], v = op->in[2], n = op->nin == 3 ? 0 : 1, lse = ad_attn_lse(a, op);
	bool flash = op->attr.attn.flash;
	int stats;
	if (lse >= 0) {
		stats = attn_op(a, op, OP_ATTN_DELTA, 3, (int[]){g, op->out, lse});
	} else {
		int st[5] = {q, k, g, op->out, n ? attn_scratch(a, op) : -1};
		stats = attn_op(a, op, OP_ATTN_STATS, 4 + n, st);
	}
	int in[6] = {q, k, v, g, stats, -1};
	static const OpKind grads[3] = {OP_ATTN_DQ, OP_ATTN_DK, OP_ATTN_DV};
	if ((n || flash) && ad_active(a, k) && ad_active(a, v) && !ir_attn_apart) {
		/* dk and dv from one pass over the scores: slices 0 and 1 of attn_dkv */
		in[5] = attn_scratch(a, op);
		int kv = attn_op(a, op, OP_ATTN_DKV, 5 + n, in);
		for (int i = 1; i < 3; i++) {
			Op *at = ir_new_op(ad_program(a), OP_IDX, op->loc, 0, NULL);
			at->index = i - 1;
			ad_contrib(a, op->in[i], ad_op2(a, OP_SLICE, op->loc, kv, ad_emit(a, at)), op->loc);
		}
		if (!ad_active(a, q))
			return;
		in[5] = attn_scratch(a, op);
		ad_contrib(a, q, attn_op(a, op, OP_ATTN_DQ, 5 + n, in), op->loc);
		return;
	}
	for (int i = 0; i < 3; i++)
		if (ad_active(a, op->in[i])) {
			in[5] = n ? attn_scratch(a, op) : -1;
			ad_contrib(a, op->in[i], attn_op(a, op, grads[i], 5 + n, in), op->loc);
		}
}

/* The workspace of a convolution of x by w into y, in the compute type (f32,
 * or f64 for f64 values): `rows` rows of one image's output windows
 * unfolded, [C kh kw, rows Wo], of one group's C channels (w's second
 * axis). cuDNN's implicit-GEMM algorithms need the
 * whole image (rows Ho); the CPU's own path unfolds a band at a time, as
 * many rows as the workspace holds. */
Type ops_conv_scratch(Type x, Type w, Type y, int64_t rows)
{
	int64_t n = w.dim[1] * w.dim[2] * w.dim[3] * rows * y.dim[3];
	return ir_type(x.dt == DT_F64 ? DT_F64 : DT_F32, 1, &n);
}

/* the rows a target's workspace holds: on the CPU the fewest rows that
 * make at least 64 output positions. The CPU's own path serves f64 and
 * bf16 (f32 goes to oneDNN, whose memory is its own): GEMMs 64 wide lose
 * little there, and the workspace is a fraction of an image's. For cuDNN
 * whole images, as many of the batch as 64 MiB holds (a sixteenth of
 * budget when that is less), at least one: its fastest deterministic
 * algorithms need more than one image's windows (conv2d_dw at batch 128,
 * 30 to 90 times), and the runtime takes the fastest that fits. */
int64_t ops_conv_rows(Type x, Type w, Type y, bool cuda, int64_t budget)
{
	int64_t ho = y.dim[2], wo = y.dim[3], r = (64 + wo - 1) / wo;
	if (!cuda)
		return r > ho ? ho : r;
	int64_t cap = (int64_t)64 << 20, image = ir_numel(ops_conv_scratch(x, w, y, ho)) * (x.dt == DT_F64 ? 8 : 4);
	cap = budget > 0 && budget / 16 < cap ? budget / 16 : cap;
	int64_t k = cap / image;
	k = k < 1 ? 1 : k > x.dim[0] ? x.dim[0] : k;
	return k * ho;
}

/* conv2d (x [N, C, H, W], w [O, C/g, kh, kw], ws) -> [N, O, Ho, Wo]; conv2d_dx
 * (dy, w, ws) -> to, x's type; conv2d_dw (x, dy, ws) -> to, w's type; ws
 * their workspace, ops_conv_scratch's */
const char *ops_shape_conv(Program *p, Op *op, Type *out)
{
	const char *err;
	for (int k = 0; k < 3; k++)
		if ((err = ops_need_real(p, op, k)))
			return err;
	bool dx = op->kind == OP_CONV2D_DX, dw = op->kind == OP_CONV2D_DW;
	Type x = dx ? op->to : ir_vtype(p, op->in[0]), w = dw ? op->to : ir_vtype(p, op->in[1]);
	const Window *win = &op->attr.win;
	int g = ir_groups(win);
	if (x.rank != 4 || w.rank != 4)
		return ar_printf("conv2d needs an input [N, C, H, W] and a weight [O, C/groups, kh, kw], got %s and %s", ops_ts(x), ops_ts(w));
	if (w.dim[1] * g != x.dim[1] || w.dim[0] % g || w.dt != x.dt)
		return ar_printf("conv2d's weight %s does not fit its input %s in %d groups", ops_ts(w), ops_ts(x), g);
	if (w.dim[2] != win->kh || w.dim[3] != win->kw)
		return ar_printf("conv2d's window %dx%d differs from its weight %s", win->kh, win->kw, ops_ts(w));
	if (win->sh < 1 || win->sw < 1 || win->dh < 1 || win->dw < 1 || win->ph < 0 || win->pw < 0)
		return ar_printf("conv2d needs stride and dilation of at least 1 and no negative padding");
	int64_t ho, wo;
	ops_window_out(win, x, &ho, &wo);
	if (!ho || !wo)
		return ar_printf("a %dx%d window (dilation %d, padding %d) does not fit in %s", win->kh, win->kw, win->dh, win->ph, ops_ts(x));
	/* the reference path unfolds it (conv2d in lower.c): within unfold's limits */
	if (ho > IR_MAX_ELEMS / wo || x.dim[1] > IR_MAX_ELEMS / win->kh / win->kw)
		return ar_printf("a %dx%d window (stride %d, padding %d) over %s unfolds to %lld x %lld positions of "
		                 "%lld x %d x %d values, more than 2^40 elements", win->kh, win->kw, win->sh, win->ph, ops_ts(x),
		                 (long long)ho, (long long)wo, (long long)x.dim[1], win->kh, win->kw);
	Type y = ir_type(x.dt, 4, (int64_t[]){x.dim[0], w.dim[0], ho, wo});
	Type dy = dx ? ir_vtype(p, op->in[0]) : dw ? ir_vtype(p, op->in[1]) : y;
	if (!ir_type_eq(dy, y))
		return ar_printf("%s needs a gradient %s for %s and %s, got %s", ir_ops[op->kind].name, ops_ts(y), ops_ts(x), ops_ts(w), ops_ts(dy));
	/* a whole number of rows of unfolded windows, at least one, at most the batch's images' */
	Type ws = ir_vtype(p, op->in[2]), row = ops_conv_scratch(x, w, y, 1), whole = ops_conv_scratch(x, w, y, ho * x.dim[0]);
	if (ws.rank != 1 || ws.dt != row.dt || ws.dim[0] % row.dim[0] || ws.dim[0] > whole.dim[0])
		return ar_printf("%s needs a workspace of 1 to %lld rows of %s, got %s", ir_ops[op->kind].name,
		                 (long long)(ho * x.dim[0]), ops_ts(row), ops_ts(ws));
	*out = dx ? x : dw ? w : y;
	return NULL;
}

static int conv_grad(Ad *a, Op *op, OpKind k, int x, int y, Type to)
{
	Program *p = ad_program(a);
	Op *ws = ir_new_op(p, OP_SCRATCH, op->loc, 0, NULL);
	ws->to = ir_vtype(p, op->in[2]);
	Op *d = ir_new_op(p, k, op->loc, 3, (int[]){x, y, ad_emit(a, ws)});
	d->attr = op->attr;
	d->to = to;
	return ad_emit(a, d);
}

/* dx from the gradient and w; dw from x and the gradient: no unfolded x is kept */
void ops_adjoint_conv(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	int x = op->in[0], w = op->in[1];
	/* the weight's first: it is the last reader of x, which can then die before dx is made */
	if (ad_active(a, w))
		ad_contrib(a, w, conv_grad(a, op, OP_CONV2D_DW, x, g, ir_vtype(p, w)), op->loc);
	if (ad_active(a, x))
		ad_contrib(a, x, conv_grad(a, op, OP_CONV2D_DX, g, w, ir_vtype(p, x)), op->loc);
}

/* maxpool / avgpool (x [N, C, H, W]) -> [N, C, Ho, Wo], windows without
 * dilation, padded by at most half the kernel (as PyTorch's: a max's
 * padding is never the max, an average's counts as zeros);
 * maxpool_dx (x, dy) and avgpool_dx (dy) -> to, x's type */
const char *ops_shape_pool(Program *p, Op *op, Type *out)
{
	const char *err;
	for (int k = 0; k < op->nin; k++)
		if ((err = ops_need_real(p, op, k)))
			return err;
	bool dx = op->kind == OP_MAXPOOL2D_DX || op->kind == OP_AVGPOOL2D_DX;
	Type x = op->kind == OP_AVGPOOL2D_DX ? op->to : ir_vtype(p, op->in[0]);
	const Window *w = &op->attr.win;
	if (x.rank != 4)
		return ar_printf("a 2-D pool needs a tensor [N, C, H, W], got %s", ops_ts(x));
	if (w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1 || w->dh != 1 || w->dw != 1)
		return ar_printf("a pool's window needs kernel and stride of at least 1 and no dilation");
	if (w->ph < 0 || w->pw < 0 || w->ph > w->kh / 2 || w->pw > w->kw / 2)
		return ar_printf("a %dx%d pool's padding must be at most half its kernel, got %dx%d", w->kh, w->kw, w->ph, w->pw);
	int64_t ho, wo;
	ops_window_out(w, x, &ho, &wo);
	if (!ho || !wo)
		return ar_printf("a %dx%d pool does not fit in %s", w->kh, w->kw, ops_ts(x));
	Type y = ir_type(x.dt, 4, (int64_t[]){x.dim[0], x.dim[1], ho, wo});
	for (int k = op->kind == OP_MAXPOOL2D_DX ? 1 : 0; dx && k < op->nin; k++)
		if (!ir_type_eq(ir_vtype(p, op->in[k]), y))
			return ar_printf("%s needs %s for %s, got %s", ir_ops[op->kind].name, ops_ts(y), ops_ts(x),
			                 ops_ts(ir_vtype(p, op->in[k])));
	*out = dx ? x : y;
	return NULL;
}

/* a max pool's gradient reads x (each window's max is found again: the
 * result is not kept for it); an average's, the gradient alone */
void ops_adjoint_pool(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	int x = op->in[0];
	if (!ad_active(a, x))
		return;
	Op *d = op->kind == OP_MAXPOOL2D ? ir_new_op(p, OP_MAXPOOL2D_DX, op->loc, 2, (int[]){x, g})
	                                 : ir_new_op(p, OP_AVGPOOL2D_DX, op->loc, 1, &g);
	d->attr = op->attr;
	d->to = ir_vtype(p, x);
	ad_contrib(a, x, ad_emit(a, d), op->loc);
}

/* layernorm (x, g, b): g and b are [D] for x [..., D]; layernorm_hat (x);
 * layernorm_grad (x, g, dy) */
const char *ops_shape_layernorm(Program *p, Op *op, Type *out)
{
	const char *err;
	for (int k = 0; k < op->nin; k++)
		if ((err = ops_need_real(p, op, k)))
			return err;
	Type x = ir_vtype(p, op->in[0]);
	if (x.rank < 1)
		return ar_printf("layernorm needs a tensor of rank 1 or more, got %s", ops_ts(x));
	Type row = ir_type(x.dt, 1, &x.dim[x.rank - 1]);
	static const char *what[] = {"x", "scale", "shift"};
	for (int k = 1; k < op->nin; k++) {
		Type t = ir_vtype(p, op->in[k]);
		bool dy = op->kind == OP_LAYERNORM_GRAD && k == 2;
		if (!ir_type_eq(t, dy ? x : row))
			return ar_printf("layernorm's %s must be %s for x %s, got %s", dy ? "gradient" : what[k], ops_ts(dy ? x : row),
			                 ops_ts(x), ops_ts(t));
	}
	if (!(op->attr.value > 0))
		return ar_printf("layernorm's eps must be positive, got %g", op->attr.value);
	*out = x;
	return NULL;
}

/* dx from layernorm_grad; dg = sum of dy * hat, db = sum of dy over the rows. dy hat is made right after
 * dx, before dx is added anywhere: the GPU's layernorm_grad kernel writes it as it goes (codegen/nn.c,
 * norm_dyhat), into bytes the plan has not given to a value that dies in between */
void ops_adjoint_layernorm(Ad *a, Op *op, int g)
{
	int x = op->in[0], scale = op->in[1], shift = op->in[2], dx = -1;
	Loc loc = op->loc;
	if (ad_active(a, x)) {
		Op *d = ir_new_op(ad_program(a), OP_LAYERNORM_GRAD, loc, 3, (int[]){x, scale, g});
		d->attr = op->attr;
		dx = ad_emit(a, d);
	}
	if (ad_active(a, scale)) {
		Op *h = ir_new_op(ad_program(a), OP_LAYERNORM_HAT, loc, 1, &x);
		h->attr = op->attr;
		int dyhat = ad_op2(a, OP_MUL, loc, g, ad_emit(a, h));
		if (dx >= 0)
			ad_contrib(a, x, dx, loc), dx = -1;
		ad_contrib(a, scale, ad_unbroadcast(a, dyhat, scale, loc), loc);
	}
	if (dx >= 0)
		ad_contrib(a, x, dx, loc);
	if (ad_active(a, shift))
		ad_contrib(a, shift, ad_unbroadcast(a, g, shift, loc), loc);
}

/* dropout (x, i...): x's shape; the index operands name the iteration */
const char *ops_shape_dropout(Program *p, Op *op, Type *out)
{
	const char *err = ops_need_real(p, op, 0);
	if (err)
		return err;
	for (int k = 1; k < op->nin; k++)
		if (ir_vtype(p, op->in[k]).dt != DT_INDEX)
			return "dropout's operands after x must be loop indices";
	if (!(op->attr.drop.p >= 0 && op->attr.drop.p < 1))
		return ar_printf("dropout's p must lie in [0, 1), got %g", op->attr.drop.p);
	*out = ir_vtype(p, op->in[0]);
	return NULL;
}

/* the same mask on g: the same site, step and indices draw it again */
void ops_adjoint_dropout(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Op *d = ir_new_op(p, OP_DROPOUT, op->loc, op->nin, op->in);
	d->in[0] = g;
	d->attr = op->attr;
	ad_contrib(a, op->in[0], ad_emit(a, d), op->loc);
}

/* the gradient's seed, or the loss's scalar result */
static const char *result(Program *p, Op *op, Type a, Type *out, const char *name)
{
	if (op->nin == 3) {
		if (ir_vtype(p, op->in[2]).rank != 0)
			return ar_printf("%s_grad needs a scalar seed", name);
		*out = a;
	} else {
		*out = ir_scalar(a.dt);
	}
	return NULL;
}

const char *ops_shape_mse(Program *p, Op *op, Type *out)
{
	const char *err;
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if ((err = ops_need_real(p, op, 0)) || (err = ops_need_real(p, op, 1)))
		return err;
	if (!ir_type_eq(a, b))
		return ar_printf("mse needs operands of one shape, got %s and %s", ops_ts(a), ops_ts(b));
	return result(p, op, a, out, "mse");
}

const char *ops_shape_xent(Program *p, Op *op, Type *out)
{
	const char *err;
	if (op->kind == OP_XENT_COUNT) {
		if (ir_vtype(p, op->in[0]).dt != DT_I32)
			return ar_printf("count_labels needs i32 labels, got %s", ops_ts(ir_vtype(p, op->in[0])));
		*out = ir_scalar(op->to.dt); /* the logits' */
		return NULL;
	}
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if ((err = ops_need_real(p, op, 0)))
		return err;
	if (a.rank < 1)
		return ar_printf("cross_entropy needs logits of rank 1 or more, got %s", ops_ts(a));
	if (b.dt != DT_I32)
		return ar_printf("cross_entropy needs i32 labels, got %s", ops_ts(b));
	bool ok = b.rank == a.rank - 1;
	for (int i = 0; ok && i < b.rank; i++)
		ok = a.dim[i] == b.dim[i];
	if (!ok) {
		Type want = a;
		want.dt = DT_I32;
		want.rank = a.rank - 1;
		return ar_printf("cross_entropy labels %s do not match logits %s: expected %s", ops_ts(b), ops_ts(a),
		                 ops_ts(want));
	}
	return result(p, op, a, out, "cross_entropy");
}

void ops_adjoint_mse(Ad *a, Op *op, int g)
{
	int d = ad_op3(a, OP_MSE_GRAD, op->loc, op->in[0], op->in[1], g);
	ad_contrib(a, op->in[0], d, op->loc);
	if (ad_active(a, op->in[1]))
		ad_contrib(a, op->in[1], ad_op1(a, OP_NEG, op->loc, d), op->loc);
}

/* With an ignored label the mean is over the other rows: the seed is
 * scaled by rows / count, and xent_grad gives the ignored rows nothing. */
void ops_adjoint_xent(Ad *a, Op *op, int g)
{
	Program *p = ad_program(a);
	Loc loc = op->loc;
	if (op->attr.lab.has) {
		Op *c = ir_new_op(p, OP_XENT_COUNT, loc, 1, &op->in[1]);
		c->attr = op->attr;
		c->to = ir_scalar(ir_vtype(p, op->in[0]).dt);
		int64_t rows = ir_numel(ir_vtype(p, op->in[1]));
		g = ad_op2(a, OP_DIV, loc, ad_op2(a, OP_MUL, loc, g, ad_const(a, loc, (double)rows)), ad_emit(a, c));
	}
	Op *d = ir_new_op(p, OP_XENT_GRAD, loc, 3, (int[]){op->in[0], op->in[1], g});
	d->attr = op->attr;
	ad_contrib(a, op->in[0], ad_emit(a, d), loc);
}

/* ---- the reference interpreter's rules (ops_run_*: compiler/ops/interp.c) ---- */

/* attn_delta: the stats from the log-sum-exp, and dO . O per row of each head */
static void run_delta(Interp *m, Op *op)
{
	Type t = ir_vtype(m->p, op->in[1]);
	int64_t T = t.dim[t.rank - 2], C = t.dim[t.rank - 1], H = op->attr.attn.heads, Dh = C / H, rows = ir_numel(t) / C;
	double *dO = ops_real(m, op->in[0]), *O = ops_real(m, op->in[1]), *lse = ops_real(m, op->in[2]);
	double *o = ops_real(m, op->out);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t h = 0; h < H; h++) {
			int64_t at = ((r / T) * H + h) * T + r % T;
			double dd = 0;
			for (int64_t d = 0; d < Dh; d++)
				dd += dO[r * C + h * Dh + d] * O[r * C + h * Dh + d];
			o[2 * at] = lse[at];
			o[2 * at + 1] = dd;
		}
}

/* attention and its gradient ops, head by head, with the [T, T] scores in full */
void ops_run_attention(Interp *m, Op *op)
{
	Program *p = m->p;
	if (op->kind == OP_ATTN_DELTA) {
		run_delta(m, op);
		return;
	}
	Type q = ir_vtype(p, op->in[0]);
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], H = op->attr.attn.heads, Dh = C / H, NB = ir_numel(q) / (T * C);
	double *Q = ops_real(m, op->in[0]), *K = ops_real(m, op->in[1]), *o = ops_real(m, op->out);
	double *P = malloc(sizeof(double) * (size_t)(T * T));
	if (op->kind != OP_ATTN_STATS && op->kind != OP_ATTN_LSE)
		memset(o, 0, (size_t)ir_bytes(p, ir_vtype(p, op->out)));
	double *ov = op->kind == OP_ATTN_DKV ? o + ir_numel(q) : NULL; /* dv, after dk */
	for (int64_t b = 0; b < NB; b++)
		for (int64_t h = 0; h < H; h++) {
#define EL(X, r, d) (X)[(b * T + (r)) * C + h * Dh + (d)]
			bool grad = ops_attn_operands(op->kind) == 5;
			double *st = grad ? ops_real(m, op->in[4]) + (b * H + h) * T * 2 : NULL;
			for (int64_t i = 0; i < T; i++) {
				double mx = -INFINITY, sum = 0;
				for (int64_t j = 0; j < T; j++) {
					double s = 0;
					for (int64_t d = 0; d < Dh; d++)
						s += EL(Q, i, d) * EL(K, j, d);
					P[i * T + j] = op->attr.attn.causal && j > i ? -INFINITY : s / sqrt((double)Dh);
					mx = fmax(mx, P[i * T + j]);
				}
				for (int64_t j = 0; j < T; j++)
					sum += exp(P[i * T + j] - mx);
				double lse = st ? st[2 * i] : mx + log(sum);
				if (op->kind == OP_ATTN_LSE) {
					o[(b * H + h) * T + i] = lse;
					continue;
				}
				for (int64_t j = 0; j < T; j++)
					P[i * T + j] = exp(P[i * T + j] - lse);
				if (op->kind == OP_ATTN_STATS) {
					double *dO = ops_real(m, op->in[2]), *O = ops_real(m, op->in[3]), dd = 0;
					for (int64_t d = 0; d < Dh; d++)
						dd += EL(dO, i, d) * EL(O, i, d);
					o[((b * H + h) * T + i) * 2] = lse;
					o[((b * H + h) * T + i) * 2 + 1] = dd;
				}
			}
			if (op->kind == OP_ATTN_STATS || op->kind == OP_ATTN_LSE)
				continue;
			double *V = ops_real(m, op->in[2]), *dO = grad ? ops_real(m, op->in[3]) : NULL;
			for (int64_t i = 0; i < T; i++)
				for (int64_t j = 0; j < T; j++) {
					double pij = P[i * T + j], ds = 0;
					if (op->kind == OP_ATTENTION) {
						for (int64_t d = 0; d < Dh; d++)
							EL(o, i, d) += pij * EL(V, j, d);
						continue;
					}
					if (op->kind == OP_ATTN_DV || ov) {
						for (int64_t d = 0; d < Dh; d++)
							EL(ov ? ov : o, j, d) += pij * EL(dO, i, d);
						if (!ov)
							continue;
					}
					for (int64_t d = 0; d < Dh; d++)
						ds += EL(dO, i, d) * EL(V, j, d);
					ds = pij * (ds - st[2 * i + 1]) / sqrt((double)Dh);
					for (int64_t d = 0; d < Dh; d++) {
						if (op->kind == OP_ATTN_DQ)
							EL(o, i, d) += ds * EL(K, j, d);
						else
							EL(o, j, d) += ds * EL(Q, i, d);
					}
				}
#undef EL
		}
	free(P);
}

/* conv2d and its gradients, one product of a window at a time */
/* the pools window by window: a window's max or mean (padding: none of a
 * max's elements, zeros of a mean's); a gradient scattered to the elements
 * tied for the max, each an equal share, or evenly */
void ops_run_pool(Interp *m, Op *op)
{
	Program *p = m->p;
	bool dx = op->kind == OP_MAXPOOL2D_DX || op->kind == OP_AVGPOOL2D_DX;
	bool max = op->kind == OP_MAXPOOL2D || op->kind == OP_MAXPOOL2D_DX;
	Type img = dx ? ir_vtype(p, op->out) : ir_vtype(p, op->in[0]);
	const Window *w = &op->attr.win;
	int64_t planes = img.dim[0] * img.dim[1], H = img.dim[2], W = img.dim[3], Ho, Wo, K = (int64_t)w->kh * w->kw;
	ops_window_out(w, img, &Ho, &Wo);
	double *o = ops_real(m, op->out), *x = max || !dx ? ops_real(m, op->in[0]) : NULL;
	double *dy = dx ? ops_real(m, op->in[max ? 1 : 0]) : NULL;
	if (dx)
		memset(o, 0, sizeof(double) * (size_t)ir_numel(img));
	for (int64_t c = 0; c < planes; c++)
		for (int64_t i = 0; i < Ho; i++)
			for (int64_t j = 0; j < Wo; j++) {
				int64_t at = (c * Ho + i) * Wo + j, r0 = i * w->sh - w->ph, c0 = j * w->sw - w->pw;
#define INSIDE(a, b) (r0 + (a) >= 0 && r0 + (a) < H && c0 + (b) >= 0 && c0 + (b) < W)
#define CELL(a, b) ((c * H + r0 + (a)) * W + c0 + (b))
				double r = max ? -INFINITY : 0, ties = 0;
				for (int a = 0; a < w->kh; a++)
					for (int b = 0; b < w->kw; b++) {
						if (max && !INSIDE(a, b))
							continue;
						double v = x && INSIDE(a, b) ? x[CELL(a, b)] : 0;
						r = max ? (v > r ? v : r) : r + v;
					}
				/* the window's max found, the elements tied for it */
				for (int a = 0; a < w->kh && dx && max; a++)
					for (int b = 0; b < w->kw; b++)
						ties += INSIDE(a, b) && x[CELL(a, b)] == r;
				if (!dx) {
					o[at] = max ? r : r / (double)K;
					continue;
				}
				for (int a = 0; a < w->kh; a++)
					for (int b = 0; b < w->kw; b++)
						if (!INSIDE(a, b))
							continue;
						else if (!max)
							o[CELL(a, b)] += dy[at] / (double)K;
						else if (x[CELL(a, b)] == r)
							o[CELL(a, b)] += dy[at] / ties;
#undef INSIDE
#undef CELL
			}
}

void ops_run_conv(Interp *m, Op *op)
{
	Program *p = m->p;
	bool dx = op->kind == OP_CONV2D_DX, dw = op->kind == OP_CONV2D_DW;
	Type x = dx ? op->to : ir_vtype(p, op->in[0]), w = dw ? op->to : ir_vtype(p, op->in[1]);
	const Window *win = &op->attr.win;
	int64_t N = x.dim[0], C = x.dim[1], H = x.dim[2], W = x.dim[3], O = w.dim[0], Ho, Wo;
	/* output channel f reads the Cg input channels of its group, from channel (f / Og) Cg */
	int64_t Cg = C / ir_groups(win), Og = O / ir_groups(win);
	ops_window_out(win, x, &Ho, &Wo);
	double *o = ops_real(m, op->out);
	/* the operands as x, w and y, whichever the op computes */
	double *xs = dx ? o : ops_real(m, op->in[0]), *ws = dw ? o : ops_real(m, op->in[1]);
	double *ys = dx ? ops_real(m, op->in[0]) : dw ? ops_real(m, op->in[1]) : o;
	memset(o, 0, sizeof(double) * (size_t)ir_numel(ir_vtype(p, op->out)));
	for (int64_t n = 0; n < N; n++)
		for (int64_t f = 0; f < O; f++)
			for (int64_t i = 0; i < Ho; i++)
				for (int64_t j = 0; j < Wo; j++) {
					double *y = &ys[((n * O + f) * Ho + i) * Wo + j];
					for (int64_t c = 0; c < Cg; c++)
						for (int a = 0; a < win->kh; a++)
							for (int b = 0; b < win->kw; b++) {
								int64_t h = i * win->sh - win->ph + a * win->dh, v = j * win->sw - win->pw + b * win->dw;
								if (h < 0 || h >= H || v < 0 || v >= W)
									continue;
								int64_t ch = f / Og * Cg + c;
								double *xe = &xs[((n * C + ch) * H + h) * W + v], *we = &ws[((f * Cg + c) * win->kh + a) * win->kw + b];
								if (dx)
									*xe += *y * *we;
								else if (dw)
									*we += *y * *xe;
								else
									*y += *xe * *we;
							}
				}
}

/* layernorm (x, g, b), layernorm_hat (x), layernorm_grad (x, g, dy), row by row */
void ops_run_layernorm(Interp *m, Op *op)
{
	Type t = ir_vtype(m->p, op->out);
	int64_t C = t.dim[t.rank - 1], rows = ir_numel(t) / C;
	double *x = ops_real(m, op->in[0]), *o = ops_real(m, op->out);
	double *g = op->nin > 1 ? ops_real(m, op->in[1]) : NULL, *third = op->nin > 2 ? ops_real(m, op->in[2]) : NULL;
	double *hat = malloc(sizeof(double) * (size_t)C);
	for (int64_t r = 0; r < rows; r++) {
		double *xr = x + r * C, *orow = o + r * C, mean = 0, var = 0, s1 = 0, s2 = 0;
		for (int64_t c = 0; c < C; c++)
			mean += xr[c] / (double)C;
		for (int64_t c = 0; c < C; c++)
			var += (xr[c] - mean) * (xr[c] - mean) / (double)C;
		double rs = 1 / sqrt(var + op->attr.value);
		for (int64_t c = 0; c < C; c++) {
			hat[c] = (xr[c] - mean) * rs;
			if (op->kind == OP_LAYERNORM_GRAD) {
				double dyg = third[r * C + c] * g[c];
				s1 += dyg / (double)C;
				s2 += dyg * hat[c] / (double)C;
			}
		}
		for (int64_t c = 0; c < C; c++)
			orow[c] = op->kind == OP_LAYERNORM ? hat[c] * g[c] + third[c]
			        : op->kind == OP_LAYERNORM_HAT ? hat[c]
			        : rs * (third[r * C + c] * g[c] - s1 - hat[c] * s2);
	}
	free(hat);
}

void ops_run_embed(Interp *m, Op *op)
{
	Program *p = m->p;
	Type to = ir_vtype(p, op->out);
	bool grad = op->kind == OP_EMBED_GRAD;
	Type tt = grad ? to : ir_vtype(p, op->in[0]);
	int64_t V = tt.dim[0], D = tt.dim[1], N = ir_numel(ir_vtype(p, op->in[1]));
	int32_t *ids = (int32_t *)ops_mem(m, op->in[1]);
	double *x = ops_real(m, op->in[0]), *o = ops_real(m, op->out);
	if (grad)
		memset(o, 0, sizeof(double) * (size_t)(V * D));
	for (int64_t n = 0; n < N; n++) {
		if (ids[n] < 0 || ids[n] >= V)
			die("interp: id %d out of range 0..%lld", ids[n], (long long)V - 1);
		if (grad && op->attr.lab.has && ids[n] == op->attr.lab.ignore)
			continue; /* padding_idx: read in the forward, no gradient */
		for (int64_t d = 0; d < D; d++) {
			if (grad)
				o[ids[n] * D + d] += x[n * D + d];
			else
				o[n * D + d] = x[ids[n] * D + d];
		}
	}
}

/* the draws of the first training step with the default seed: the step
 * that tests compare the compiled program's gradients at */
void ops_run_dropout(Interp *m, Op *op)
{
	Type to = ir_vtype(m->p, op->out);
	uint64_t key = dp_mix(dp_step_key(0, 1) ^ (uint64_t)op->attr.drop.site);
	for (int k = 1; k < op->nin; k++)
		key = dp_mix(key ^ (uint64_t)m->index[op->in[k]]);
	double *x = ops_real(m, op->in[0]), *o = ops_real(m, op->out);
	for (int64_t e = 0; e < ir_numel(to); e++)
		o[e] = dp_mix(key ^ (uint64_t)e) >> 11 >= dp_drop_threshold(op->attr.drop.p) ? x[e] * (1 / (1 - op->attr.drop.p)) : 0;
}

void ops_run_mse(Interp *m, Op *op)
{
	Program *p = m->p;
	Type ti = ir_vtype(p, op->in[0]);
	int64_t n = ir_numel(ti);
	double *a = ops_real(m, op->in[0]), *b = ops_real(m, op->in[1]), s = 0;
	if (op->kind == OP_MSE) {
		for (int64_t e = 0; e < n; e++)
			s += (a[e] - b[e]) * (a[e] - b[e]);
		ops_real(m, op->out)[0] = s / (double)n;
	} else {
		double g = ops_real(m, op->in[2])[0];
		for (int64_t e = 0; e < n; e++)
			ops_real(m, op->out)[e] = g * 2 * (a[e] - b[e]) / (double)n;
	}
}

/* cross_entropy, its gradient, and count_labels */
void ops_run_xent(Interp *m, Op *op)
{
	Program *p = m->p;
	if (op->kind == OP_XENT_COUNT) {
		int32_t *lab = (int32_t *)ops_mem(m, op->in[0]);
		double c = 0;
		for (int64_t e = 0; e < ir_numel(ir_vtype(p, op->in[0])); e++)
			c += lab[e] != op->attr.lab.ignore;
		ops_real(m, op->out)[0] = c;
		return;
	}
	Type ti = ir_vtype(p, op->in[0]);
	int64_t C = ti.dim[ti.rank - 1], rows = ir_numel(ti) / C;
	double *x = ops_real(m, op->in[0]), loss = 0;
	int32_t *lab = (int32_t *)ops_mem(m, op->in[1]);
	double g = op->kind == OP_XENT_GRAD ? ops_real(m, op->in[2])[0] : 0, counted = 0;
	for (int64_t r = 0; r < rows; r++) {
		double *xr = x + r * C, mx = -INFINITY, s = 0;
		if (op->attr.lab.has && lab[r] == op->attr.lab.ignore) {
			if (op->kind == OP_XENT_GRAD)
				memset(ops_real(m, op->out) + r * C, 0, sizeof(double) * (size_t)C);
			continue;
		}
		counted++;
		for (int64_t c = 0; c < C; c++)
			mx = fmax(mx, xr[c]);
		for (int64_t c = 0; c < C; c++)
			s += exp(xr[c] - mx);
		loss += mx + log(s) - xr[lab[r]];
		if (op->kind == OP_XENT_GRAD)
			for (int64_t c = 0; c < C; c++)
				ops_real(m, op->out)[r * C + c] = g * (exp(xr[c] - mx) / s - (c == lab[r])) / (double)rows;
	}
	if (op->kind == OP_XENT)
		ops_real(m, op->out)[0] = loss / (op->attr.lab.has ? counted : (double)rows);
}
