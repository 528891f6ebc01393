/* ops: what each op kind means, by family, one file each:
 *   leaves.c       param, input, const, idx, fill, interp, arange, literal, training
 *   movement.c     views and data movement: slice, reshape, transpose, broadcast, sum_to, copy,
 *                  range, pad, concat, 2-D windows (unfold, fold), cast
 *   elementwise.c  add ... where: arithmetic, functions, comparisons, with broadcasting
 *   linalg.c       matmul
 *   reduce.c       sum, mean, max, min, argmax, softmax, log_softmax and their gradients
 *   nn.c           embed, attention, conv2d, layernorm, dropout, the losses, and their gradients
 *   control.c      variables, loops, tensor streaming
 *   interp.c       the reference interpreter, which runs each op by its family's rule
 * The op table (ir/ops.def, ir_ops) points at these. Each shape rule fills
 * the op's result type into *out and returns NULL, or returns a message for
 * the user that names the shapes. */
#ifndef DPC_OPS_H
#define DPC_OPS_H

#include "../ad_transform/ad.h"
#include "../ir/ir.h"

const char *ops_shape_leaf(Program *p, Op *op, Type *out);
const char *ops_shape_slice(Program *p, Op *op, Type *out);
const char *ops_shape_reshape(Program *p, Op *op, Type *out);
const char *ops_shape_transpose(Program *p, Op *op, Type *out);
const char *ops_shape_broadcast(Program *p, Op *op, Type *out);
const char *ops_shape_copy(Program *p, Op *op, Type *out);
const char *ops_shape_window(Program *p, Op *op, Type *out);
const char *ops_shape_concat(Program *p, Op *op, Type *out);
const char *ops_shape_unfold(Program *p, Op *op, Type *out);
const char *ops_shape_cast(Program *p, Op *op, Type *out);
const char *ops_shape_argmax(Program *p, Op *op, Type *out);
const char *ops_shape_bits(Program *p, Op *op, Type *out);
const char *ops_shape_ew(Program *p, Op *op, Type *out);
const char *ops_shape_matmul(Program *p, Op *op, Type *out);
const char *ops_shape_reduce(Program *p, Op *op, Type *out);
const char *ops_shape_softmax(Program *p, Op *op, Type *out);
const char *ops_shape_softmax_grad(Program *p, Op *op, Type *out);
const char *ops_shape_embed(Program *p, Op *op, Type *out);
const char *ops_shape_attention(Program *p, Op *op, Type *out);
const char *ops_shape_conv(Program *p, Op *op, Type *out);
const char *ops_shape_pool(Program *p, Op *op, Type *out);
const char *ops_shape_layernorm(Program *p, Op *op, Type *out);
const char *ops_shape_dropout(Program *p, Op *op, Type *out);
const char *ops_shape_mse(Program *p, Op *op, Type *out);
const char *ops_shape_xent(Program *p, Op *op, Type *out);
const char *ops_shape_var(Program *p, Op *op, Type *out);
const char *ops_shape_transfer(Program *p, Op *op, Type *out);
const char *ops_shape_loop(Program *p, Op *op, Type *out);

/* The adjoint rules: called with the op's result adjoint g, they add each
 * active operand's contribution through ad_contrib (ad.h). */
void ops_adjoint_none(Ad *a, Op *op, int g);
void ops_adjoint_missing(Ad *a, Op *op, int g);
void ops_adjoint_slice(Ad *a, Op *op, int g);
void ops_adjoint_retype(Ad *a, Op *op, int g);
void ops_adjoint_transpose(Ad *a, Op *op, int g);
void ops_adjoint_copy(Ad *a, Op *op, int g);
void ops_adjoint_window(Ad *a, Op *op, int g);
void ops_adjoint_concat(Ad *a, Op *op, int g);
void ops_adjoint_unfold(Ad *a, Op *op, int g);
void ops_adjoint_cast(Ad *a, Op *op, int g);
void ops_adjoint_ew(Ad *a, Op *op, int g);
void ops_adjoint_matmul(Ad *a, Op *op, int g);
void ops_adjoint_reduce(Ad *a, Op *op, int g);
void ops_adjoint_softmax(Ad *a, Op *op, int g);
void ops_adjoint_embed(Ad *a, Op *op, int g);
void ops_adjoint_attention(Ad *a, Op *op, int g);
void ops_adjoint_conv(Ad *a, Op *op, int g);
void ops_adjoint_pool(Ad *a, Op *op, int g);
void ops_adjoint_layernorm(Ad *a, Op *op, int g);
void ops_adjoint_dropout(Ad *a, Op *op, int g);
void ops_adjoint_mse(Ad *a, Op *op, int g);
void ops_adjoint_xent(Ad *a, Op *op, int g);

/* The reference interpreter (interp.c): a planned float64 program run in a
 * host arena laid out as the plan says. Its rules, ops_run_<shape>, are the
 * op table's `run` column: each computes one op's result from its operands. */
struct Interp {
	Program *p;
	unsigned char *arena;
	int64_t *index;      /* per value: an index value's current number */
	int64_t counters[4];
	unsigned char **apart; /* per value: a product planned added into its acc (IR_ACC_INTO), kept apart until the acc
	                        * adds it (several may wait at once: the acc need not be the next op) */
};
Interp *ops_interp_new(Program *p);
void ops_interp_free(Interp *m);
double *ops_interp_tensor(Interp *m, int v); /* a value's storage in the host arena */
double ops_interp_run(Interp *m, bool backward); /* the forward program (and the backward): the loss */
/* for the rules */
unsigned char *ops_mem(Interp *m, int v);
double *ops_real(Interp *m, int v);
double ops_ew_arg(Interp *m, Op *op, int k, Type out, const int64_t *idx); /* operand k at the result's multi-index */
void ops_unravel(Type t, int64_t n, int64_t *idx);
void ops_run_block(Interp *m, Block *b);
void ops_reduce_to(Interp *m, int x, Type keep, double *out, OpKind k); /* sum, max or min over the axes keep has at 1 */
#define RULE(s) void ops_run_##s(Interp *m, Op *op);
RULE(leaf) RULE(slice) RULE(reshape) RULE(transpose) RULE(broadcast) RULE(copy) RULE(window) RULE(concat) RULE(unfold)
RULE(cast) RULE(argmax) RULE(bits) RULE(ew) RULE(matmul) RULE(reduce) RULE(softmax) RULE(softmax_grad) RULE(embed) RULE(attention) RULE(conv)
RULE(pool)
RULE(layernorm) RULE(dropout) RULE(mse) RULE(xent) RULE(var) RULE(transfer) RULE(loop)
#undef RULE

/* an elementwise op's meaning at one point (the interpreter, constant folding) */
double ops_eval_ew(OpKind k, const double *x);

/* attention on GEMMs: the operands before the workspace (ops_attn_operands),
 * and the workspace's type (a scratch value): the scores of a block of
 * query rows, and their gradient (and in bf16 P or dS rounded); most > 0
 * caps the block's rows, budget (--device-mem) its bytes */
int ops_attn_operands(OpKind k);
Type ops_attn_scratch(Type q, int heads, bool causal, int64_t most, int64_t budget);
/* the query rows of a block that attention on GEMMs takes at a time (its workspace's) */
int64_t ops_attn_rows(Type q, int heads, bool causal, int64_t most, int64_t budget);
/* attention in f32 or f64 on dpc's FMA kernels (Attr.attn.flash,
 * codegen/attn_fma.c): the lanes that share a row of kind k (attention,
 * attn_dq, or the key side), so that a lane holds at most 64 values of the
 * rows it keeps (32 in f64); 0 where they do not take q. Why they do not,
 * or NULL. The other side's rows come OPS_ATTN_FMA_TILE at a time. */
enum { OPS_ATTN_FMA_TILE = 8 };
int ops_attn_fma_lanes(Type q, int heads, OpKind k);
const char *ops_attn_fma_refuses(Type q, int heads);

/* the workspace of a convolution of x by w into y (a scratch value's type) */
Type ops_conv_scratch(Type x, Type w, Type y, int64_t rows);
int64_t ops_conv_rows(Type x, Type w, Type y, bool cuda, int64_t budget);

/* the windows of w that fit in img [N, C, H, W]: rows and columns (0 when none) */
void ops_window_out(const Window *w, Type img, int64_t *ho, int64_t *wo);

/* shared by the families */
const char *ops_need_real(Program *p, Op *op, int k); /* operand k must be real, or the message */
static inline const char *ops_ts(Type t) { return ir_type_str(t); }
/* value v for a message: "'W' f32[4, 3]" when it has a source name, else its type */
static inline const char *ops_vs(Program *p, int v)
{
	const char *name = p->values.data[v].name;
	return name ? ar_printf("'%s' %s", name, ir_type_str(p->values.data[v].type)) : ir_type_str(p->values.data[v].type);
}

#endif
