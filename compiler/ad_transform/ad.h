/* ad: source-to-source reverse mode. Appends to the forward program the
 * adjoint program that accumulates d loss / d param into one gradient
 * variable per parameter. Loops are reversed with a tape of their carried
 * values (store-everything); checkpoint_pass may rewrite that schedule. */
#ifndef DPC_AD_H
#define DPC_AD_H

#include "../ir/ir.h"

typedef struct {
	bool recompute; /* tape only carried values; the reverse loop recomputes the rest (checkpointing needs this) */
	bool keep;      /* with recompute: a top-level loop without loops inside still tapes what its adjoint reads,
	                 * in tapes the checkpoint pass cuts to a few rows (--checkpoint auto) */
} AdOptions;

Program *ad_transform(Program *p, const AdOptions *o);

/* For the adjoint rules, which live with their op families (compiler/ops/)
 * and run while the pass reverses an op whose result has adjoint g. New
 * ops go where the adjoint program is being built. */
typedef struct Ad Ad;
Program *ad_program(Ad *a);
bool ad_active(Ad *a, int v);                  /* v depends on a parameter: it wants a contribution */
void ad_contrib(Ad *a, int v, int c, Loc loc); /* d loss / d v += c */
int ad_emit(Ad *a, Op *op);                    /* checks, appends, returns the result */
int ad_op1(Ad *a, OpKind k, Loc loc, int x);
int ad_op2(Ad *a, OpKind k, Loc loc, int x, int y);
int ad_op3(Ad *a, OpKind k, Loc loc, int x, int y, int z);
int ad_opto(Ad *a, OpKind k, Loc loc, int x, Type to); /* reshape, broadcast, sum_to to type `to` */
int ad_const(Ad *a, Loc loc, double f);
int ad_attn_lse(Ad *a, Op *op);                /* the log-sum-exp the forward keeps for attention op, or -1 */
int ad_unbroadcast(Ad *a, int g, int x, Loc loc); /* g summed down to x's shape */

#endif
