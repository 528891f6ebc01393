/* stream: residency and the static memory plan. Today every tensor is
 * resident in the device arena; host streaming of parameters plugs in here. */
#ifndef DPC_STREAM_H
#define DPC_STREAM_H

#include "../ir/ir.h"

typedef struct {
	int64_t device_mem; /* budget in bytes, 0: none */
	bool fit_snapshots; /* give binomial loops the most snapshots the budget allows */
} StreamOptions;

/* Assigns every value a residence and arena offset (Value.res/offset/alias_of)
 * and fills Program.arena_bytes and plan_*. */
Program *stream_pass(Program *p, const StreamOptions *o);
/* --emit=stream: the plan's regions and every arena tensor's offset. */
void stream_print(FILE *f, Program *p);
/* "1.5 MiB" */
const char *stream_bytes_str(int64_t bytes);

#endif
