/* stream: the pass. Residency and the transfers first (transfer.c), then
 * the memory plan of the result, checked against the budgets, then the
 * bytes each call moves. */
#include "stream.h"

Program *stream_pass(Program *p, const StreamOptions *o)
{
	stream_transfers(p, o);
	p->mem_points = MEM_POINTS;
	mem_plan(p);
	if (p->device_mem && p->arena_bytes > p->device_mem)
		fatal("the memory plan needs %s (%lld bytes) of device memory (params %s, grads %s, optimizer state %s, "
		      "inputs %s, tape %s, streaming slots %s, work %s%s%s), more than --device-mem %s (%lld bytes)%s; "
		      "no plan can go below %lld bytes",
		      mem_bytes_str(p->arena_bytes), (long long)p->arena_bytes, mem_bytes_str(p->plan_params),
		      mem_bytes_str(p->plan_grads), mem_bytes_str(p->plan_opt), mem_bytes_str(p->plan_inputs),
		      mem_bytes_str(p->plan_tape), mem_bytes_str(p->plan_slots), mem_bytes_str(p->plan_work),
		      p->plan_snap ? " with snapshots " : "", p->plan_snap ? mem_bytes_str(p->plan_snap) : "",
		      mem_bytes_str(p->device_mem), (long long)p->device_mem,
		      p->graph_search && !p->graph_least ? "; that is the least plan the checkpoint selection found, "
		                                           "as --checkpoint min-memory would"
		      : p->graph_least ? "; that is --checkpoint min-memory's plan, the least dpc finds" : "",
		      (long long)mem_peak_bound(p));
	if (o->host_mem && p->host_bytes > o->host_mem)
		fatal("the streamed parameters, their optimizer state and the snapshots in host memory need %s (%lld bytes) "
		      "of pinned host memory, more than --host-mem %s (%lld bytes)", mem_bytes_str(p->host_bytes), (long long)p->host_bytes,
		      mem_bytes_str(o->host_mem), (long long)o->host_mem);
	stream_count(p);
	return p;
}

