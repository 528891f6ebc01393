/* ad: source-to-source reverse mode. Appends to the forward program the
 * adjoint program that accumulates d loss / d param into one gradient
 * variable per parameter. Loops are reversed with a tape of their carried
 * values (store-everything); checkpoint_pass may rewrite that schedule. */
#ifndef DPC_AD_H
#define DPC_AD_H

#include "../ir/ir.h"

Program *ad_transform(Program *p);

#endif
