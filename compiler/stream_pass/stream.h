/* stream: where every tensor lives and how it moves. Decides which
 * parameters live in the pinned host pool and stream through device slots,
 * inserts the copies that move them (transfer.c), has the memory plan lay
 * everything out (memplan.h) and counts the bytes each call moves. */
#ifndef DPC_STREAM_H
#define DPC_STREAM_H

#include "../ir/ir.h"
#include "../memplan/memplan.h"

typedef enum {
	STREAM_DEFAULT, /* auto when a device budget is given, else none */
	STREAM_NONE,    /* every tensor resident */
	STREAM_AUTO,    /* stream the parameters the budget forces out, largest first */
	STREAM_PARAMS,  /* stream every parameter that can */
} StreamMode;

typedef struct {
	int64_t host_mem;   /* pinned host pool budget, 0: none */
	StreamMode mode;
} StreamOptions;

/* Decides residency, inserts the transfers, lays out the arena and the host
 * pool (mem_plan) and counts the bytes each call moves (Program.h2d_bytes,
 * d2h_bytes). */
Program *stream_pass(Program *p, const StreamOptions *o);
/* The smallest arena streaming could reach for p: every parameter that can
 * stream streamed, one unit ahead (the checkpoint pass's price, through the
 * driver). */
int64_t stream_min_plan(Program *p);
/* The host pool that streaming every parameter that can would take. */
int64_t stream_min_host(Program *p);

/* within the component: the transfer pass (transfer.c), for stream_pass */
void stream_transfers(Program *p, const StreamOptions *o);
void stream_count(Program *p);

#endif
