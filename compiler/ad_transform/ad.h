/* ad: source-to-source reverse mode. Appends to the forward program the
 * adjoint program that accumulates d loss / d param into one gradient
 * variable per parameter. Loops are reversed with a tape of their carried
 * values (store-everything); checkpoint_pass may rewrite that schedule. */
#ifndef DPC_AD_H
#define DPC_AD_H

#include "../ir/ir.h"

typedef struct {
	bool recompute; /* tape only carried values; the reverse loop recomputes the rest (checkpointing needs this) */
} AdOptions;

Program *ad_transform(Program *p, const AdOptions *o);

#endif
