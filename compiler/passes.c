/* driver: the pipeline, in order. Each pass takes the program and returns
 * it; the IR verifier runs after each one. */
#include "driver.h"

#include "ad_transform/ad.h"
#include "dist_pass/dist.h"
#include "select/select.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void driver_phase(const DriverOptions *o, const char *what)
{
	static double last;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
	if (o->verbose && last && what)
		fprintf(stderr, "dpc: %-34s %10.1f ms\n", what, 1000 * (t - last));
	last = t;
}

static void verify(const DriverOptions *o, Program *p, const char *pass)
{
	if (o->verify)
		ir_verify(p, pass);
}

/* a testing switch of on or off in the environment `name` (what it does: `what`); unset or empty: on the GPU */
static bool on_off(const char *name, const char *what, bool gpu)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return gpu;
	if (strcmp(v, "on") && strcmp(v, "off"))
		fatal("%s takes on or off (%s; on by default on the GPU only; for testing), got '%s'", name, what, v);
	return !strcmp(v, "on");
}

Program *driver_lower(FeAst *ast, const DriverOptions *o, bool verbose)
{
	const char *ag = getenv("DPC_ATTN_GEMM"), *apart = getenv("DPC_ATTN_APART");
	if (apart && *apart && strcmp(apart, "1"))
		fatal("DPC_ATTN_APART takes 1 (attention's passes apart on GEMMs: attn_lse on its own, attn_dk and attn_dv "
		      "rather than attn_dkv; for testing), got '%s'", apart);
	ir_attn_apart = apart && *apart;
	if (ag && *ag && strcmp(ag, "off") && strcmp(ag, "on") && atoll(ag) <= 0)
		fatal("DPC_ATTN_GEMM takes on (attention on GEMMs in the blocks the GPU would take), off (dpc's own "
		      "kernels) or N > 0 (GEMMs in blocks of at most N query rows, two items a call; for testing), got '%s'", ag);
	bool gpu = o->target == CG_CUDA;
	bool pitch = on_off("DPC_PITCH", "rows of GEMM operands padded to 16 bytes", gpu);
	bool split = on_off("DPC_GEMM_SPLIT", "a bf16 GEMM whose n or k is not a whole number of 16 bytes made as its "
	                    "aligned bulk and the rest", gpu);
	bool epilogues = on_off("DPC_EPILOGUE", "a GEMM applies the bias, GELU or GELU's derivative after it in its "
	                        "epilogue (cuBLASLt's), made apart where the device has none, and a layernorm the "
	                        "residual add next to it (its adjoint also dy hat)", gpu);
	/* unset: by the cost model on the GPU, never on the SIMT emulator */
	const char *tf = getenv("DPC_ATTN_TF32");
	if (tf && *tf && strcmp(tf, "on") && strcmp(tf, "off"))
		fatal("DPC_ATTN_TF32 takes on or off (f32 attention on dpc's kernels as 3xTF32 on tensor cores, or not; "
		      "unset: on the GPU where the cost model prices it cheaper than in FMA; for testing), got '%s'", tf);
	int tf32 = !tf || !*tf ? 0 : !strcmp(tf, "on") ? 1 : -1;
	FeOptions fo = {o->real_bytes, o->reference, gpu, verbose && o->verbose,
	              !ag || !*ag ? 0 : !strcmp(ag, "off") ? -1 : !strcmp(ag, "on") ? -2 : atoll(ag),
	              o->device_mem, o->target == CG_CPU && getenv("DPC_SIMT") && *getenv("DPC_SIMT"),
	              pitch, o->gpu, o->attn_price, split, tf32};
	Program *p = fe_lower(ast, &fo);
	p->epilogues = epilogues;
	return p;
}

/* -v: how the straight-line search chose, and when it fell back to greedy, why */
static void graph_note(Program *p)
{
	fprintf(stderr, "dpc: straight-line search%s: %s over %d candidates", p->graph_least ? " for the least peak" : "",
	        ckpt_graph_search(p), p->graph_candidates);
	if (p->graph_search == 3)
		fprintf(stderr, " (the exact search passed its work limit of %lld values and positions visited, or has more "
		        "than %d decisions); no fit recomputes fewer than %lld FLOPs", (long long)SEL_WORK, SEL_EXACT_MOST,
		        (long long)p->graph_bound);
	if (p->graph_chain_only)
		fprintf(stderr, "; the chain plan recomputes so little (at most 1/%d of a forward's FLOPs) that the "
		        "selection's fit was not searched", CKPT_CHAIN_ENOUGH);
	if (p->graph_walks_cut)
		fprintf(stderr, "; its walks (threshold accepting, kicks) cut short in proportion to a problem of %lld values "
		        "and positions, and its least search not run again packed harder nor refitted at the least it found "
		        "(--emit=schedule prints the plan's gap to its peak's bound)", (long long)p->graph_walks_cut);
	fputc('\n', stderr);
}

static Program *checkpointed(const DriverOptions *o, Program *p, Emit *last);

Program *driver_passes(FeAst *ast, const DriverOptions *o, Emit *last)
{
	Program *p = driver_lower(ast, o, true);
	p->optimizer = o->optimizer;
	p->mixed = o->mixed;
	p->ranks = o->ranks;
	/* bf16-mixed keeps an f32 master copy of each trained parameter and computes with its bf16 copy */
	for (int i = 0; p->mixed && i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (!q->buffer && q->type.dt != DT_BF16)
			diag_error(q->loc, "--precision bf16-mixed trains each parameter from an f32 master copy and computes "
			           "with a bf16 copy of it; '%s' is declared %s: declare it f32, or use --precision f32 or f64",
			           q->name, ir_type_str(q->type));
	}
	verify(o, p, "frontend");
	driver_phase(o, "lower");
	if (o->emit == (*last = EMIT_IR))
		return p;
	Program *planned, *made;
	CkptOptions ck = driver_budget(ast, o, p, &planned, &made);
	if (o->device_mem && o->ckpt.mode == CKPT_AUTO)
		driver_phase(o, "auto: store, rows or recompute");
	if (planned)
		driver_phase(o, "min-memory: rows or recomputed steps");
	if (planned && o->emit != EMIT_GRAD)
		return checkpointed(o, planned, last);
	if (made && o->emit != EMIT_GRAD) {
		/* the budget's search took the program through AD, DCE and the checkpoint pass already */
		driver_phase(o, "ad_transform, dce and the checkpoint pass: in the budget's search");
		return checkpointed(o, driver_least_within(ast, o, made), last);
	}
	AdOptions ad = {ck.mode != CKPT_NONE, ck.rows};
	p = ad_transform(p, &ad);
	verify(o, p, "ad_transform");
	driver_phase(o, "ad_transform");
	p = ir_dce(p);
	verify(o, p, "dce");
	driver_phase(o, "dce");
	if (o->emit == (*last = EMIT_GRAD))
		return p;
	p = driver_least_within(ast, o, ckpt_pass(p, &ck));
	return checkpointed(o, p, last);
}

/* the passes after the checkpoint pass */
static Program *checkpointed(const DriverOptions *o, Program *p, Emit *last)
{
	/* the choices by bytes are made: each plan from here packs harder, at or below the searches' */
	p->pack_effort = 2;
	if (o->verbose && p->graph_search)
		graph_note(p);
	verify(o, p, "checkpoint_pass");
	driver_phase(o, "checkpoint_pass");
	if (o->emit == (*last = EMIT_CKPT))
		return p;
	p = dist_pass(p);
	verify(o, p, "dist_pass");
	p = stream_pass(p, &o->stream);
	verify(o, p, "stream_pass");
	if (o->verify)
		mem_verify(p);
	driver_phase(o, "stream_pass (memory plan)");
	*last = EMIT_STREAM;
	return p;
}
