/* ops: what each op kind means, by family, one file each:
 *   leaves.c       param, input, const, idx, fill, interp, arange
 *   movement.c     views and data movement: slice, reshape, transpose, broadcast, sum_to, copy,
 *                  range, pad, concat, 2-D windows (unfold, fold), cast
 *   elementwise.c  add ... where: arithmetic, functions, comparisons, with broadcasting
 *   linalg.c       matmul
 *   reduce.c       sum, mean, max, min, argmax, softmax, log_softmax and their gradients
 *   nn.c           embed, attention, layernorm, dropout, the losses, and their gradients
 *   control.c      variables, loops, tensor streaming
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
const char *ops_shape_ew(Program *p, Op *op, Type *out);
const char *ops_shape_matmul(Program *p, Op *op, Type *out);
const char *ops_shape_reduce(Program *p, Op *op, Type *out);
const char *ops_shape_softmax(Program *p, Op *op, Type *out);
const char *ops_shape_softmax_grad(Program *p, Op *op, Type *out);
const char *ops_shape_embed(Program *p, Op *op, Type *out);
const char *ops_shape_attention(Program *p, Op *op, Type *out);
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
void ops_adjoint_ew(Ad *a, Op *op, int g);
void ops_adjoint_matmul(Ad *a, Op *op, int g);
void ops_adjoint_reduce(Ad *a, Op *op, int g);
void ops_adjoint_softmax(Ad *a, Op *op, int g);
void ops_adjoint_embed(Ad *a, Op *op, int g);
void ops_adjoint_attention(Ad *a, Op *op, int g);
void ops_adjoint_layernorm(Ad *a, Op *op, int g);
void ops_adjoint_dropout(Ad *a, Op *op, int g);
void ops_adjoint_mse(Ad *a, Op *op, int g);
void ops_adjoint_xent(Ad *a, Op *op, int g);

/* an elementwise op's meaning at one point (the interpreter, constant folding) */
double ops_eval_ew(OpKind k, const double *x);

/* the windows of w that fit in img [N, C, H, W]: rows and columns (0 when none) */
void ops_window_out(const Window *w, Type img, int64_t *ho, int64_t *wo);

/* shared by the families */
const char *ops_need_real(Program *p, Op *op, int k); /* operand k must be real, or the message */
static inline const char *ops_ts(Type t) { return ir_type_str(t); }

#endif
