/* ckpt: the recomputation schedule of loops and graphs. ad_transform leaves
 * every loop with a store-everything tape of its carried values; this pass
 * may replace tapes with checkpoint schedules. */
#ifndef DPC_CKPT_H
#define DPC_CKPT_H

#include "../ir/ir.h"

typedef enum { CKPT_NONE } CkptMode;

typedef struct {
	CkptMode mode;
} CkptOptions;

Program *ckpt_pass(Program *p, const CkptOptions *o);

#endif
