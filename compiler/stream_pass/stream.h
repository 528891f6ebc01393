/* stream: residency and the static memory plan. Today every tensor is
 * resident in the device arena; host streaming of parameters plugs in here. */
#ifndef DPC_STREAM_H
#define DPC_STREAM_H

#include "../ir/ir.h"

typedef struct {
	int64_t device_mem; /* budget in bytes, 0: none */
} StreamOptions;

/* Assigns every value a residence and arena offset (Value.res/offset/alias_of)
 * and fills Program.arena_bytes and plan_*. */
Program *stream_pass(Program *p, const StreamOptions *o);
/* The memory plan alone: lays out p as stream_pass does and returns the
 * arena's size, for passes that choose by bytes (the snapshot count). */
int64_t stream_plan(Program *p);
/* --emit=stream: the plan's regions and every arena tensor's offset. */
void stream_print(FILE *f, Program *p);
/* "1.5 MiB" */
const char *stream_bytes_str(int64_t bytes);

#endif
