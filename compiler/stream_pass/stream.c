/* stream: the pass. Residency and the transfers first (transfer.c), then
 * the memory plan of the result, checked against the budgets, then the
 * bytes each call moves. */
#include "stream.h"

/* what the host pool holds, by kind: "streamed values 1.0 MiB, master copies 2.0 MiB, ..." */
static const char *host_parts(Program *p)
{
	enum { VALUES, MASTERS, MOMENTS, GRADS, SNAPS, OFFLOADED, NPARTS };
	static const char *names[NPARTS] = {"streamed values", "their f32 master copies", "their optimizer's moments",
	                                    "their gradients as they come down", "snapshots", "offloaded values"};
	int64_t bytes[NPARTS] = {0};
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		int vs[5] = {q->value, q->master, q->opt_m, q->opt_v, q->hgrad}, part[5] = {VALUES, MASTERS, MOMENTS, MOMENTS, GRADS};
		for (int k = 0; k < 5; k++)
			if (vs[k] >= 0 && p->values.data[vs[k]].res == VR_HOST)
				bytes[part[k]] += mem_aligned(p, ir_vtype(p, vs[k]));
	}
	for (int v = 0; v < p->values.len; v++) {
		Value *x = &p->values.data[v];
		if (x->res == VR_HOST && x->kind == VK_VAR && (x->vclass == VC_HSNAP || x->vclass == VC_HOST))
			bytes[x->vclass == VC_HSNAP ? SNAPS : OFFLOADED] += mem_aligned(p, x->type);
	}
	const char *s = "";
	for (int k = 0; k < NPARTS; k++)
		if (bytes[k])
			s = ar_printf("%s%s%s %s", s, *s ? ", " : "", names[k], mem_bytes_str(bytes[k]));
	return s;
}

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
		fatal("the host pool needs %s (%lld bytes) of pinned host memory (%s), more than --host-mem %s (%lld bytes)",
		      mem_bytes_str(p->host_bytes), (long long)p->host_bytes, host_parts(p), mem_bytes_str(o->host_mem),
		      (long long)o->host_mem);
	stream_count(p);
	return p;
}

