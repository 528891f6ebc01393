/* stream: where every tensor lives and how it moves. Two parts:
 *   transfer.c  residency: which parameters live in the pinned host pool and
 *               stream through device slots, and the copies that move them;
 *   plan.c      the memory plan: liveness, packing, the arena's regions and
 *               the host pool's layout.
 * stream_pass runs the first, then the second. */
#ifndef DPC_STREAM_H
#define DPC_STREAM_H

/* the points of Program.mem_series that stream_pass plans */
#define STREAM_MEM_POINTS 512

#include "../ir/ir.h"

typedef enum {
	STREAM_DEFAULT, /* auto when a device budget is given, else none */
	STREAM_NONE,    /* every tensor resident */
	STREAM_AUTO,    /* stream the parameters the budget forces out, largest first */
	STREAM_PARAMS,  /* stream every parameter that can */
} StreamMode;

typedef struct {
	int64_t device_mem; /* budget in bytes, 0: none */
	int64_t host_mem;   /* pinned host pool budget, 0: none */
	StreamMode mode;
} StreamOptions;

/* Decides residency, inserts the transfers, lays out the arena and the host
 * pool (Value.res/offset/alias_of; Program.arena_bytes, host_bytes, plan_*)
 * and counts the bytes each call moves (Program.h2d_bytes, d2h_bytes). */
Program *stream_pass(Program *p, const StreamOptions *o);
/* The memory plan alone: lays out p as it stands and returns the arena's
 * size, for passes that choose by bytes (the snapshot count). */
int64_t stream_plan(Program *p);
/* The smallest arena streaming could reach for p: every parameter that can
 * stream streamed, one unit ahead. */
int64_t stream_min_plan(Program *p);
/* The host pool that streaming every parameter that can would take. */
int64_t stream_min_host(Program *p);
/* --emit=stream: the plan's regions, every tensor's place and every transfer. */
void stream_print(FILE *f, Program *p);
/* --emit=memplot: the plan over one step as SVG, with the budget's line (0: none) */
void stream_memplot(FILE *f, Program *p, const char *model, int64_t budget);
/* "1.5 MiB" */
const char *stream_bytes_str(int64_t bytes);

/* within the component: a tensor's bytes in a fixed region (plan.c); the
 * transfer pass (transfer.c), for stream_pass */
int64_t stream_aligned(Program *p, Type t);
void stream_transfers(Program *p, const StreamOptions *o);
void stream_count(Program *p);

#endif
