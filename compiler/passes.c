/* driver: the pipeline, in order. Each pass takes the program and returns
 * it; the IR verifier runs after each one. */
#include "driver.h"

#include "ad_transform/ad.h"

static void verify(const DriverOptions *o, Program *p, const char *pass)
{
	if (o->verify)
		ir_verify(p, pass);
}

/* --checkpoint auto: does the budget hold the store-everything program,
 * planned without streaming? Then nothing needs recomputing. */
static bool tape_fits(FeAst *ast, const DriverOptions *o)
{
	Program *q = fe_lower(ast, o->real_bytes);
	q->optimizer = o->optimizer;
	AdOptions ad = {false};
	q = ir_dce(ad_transform(q, &ad));
	return stream_plan(q) <= o->ckpt.device_mem;
}

Program *driver_passes(FeAst *ast, const DriverOptions *o, Emit *last)
{
	Program *p = fe_lower(ast, o->real_bytes);
	p->optimizer = o->optimizer;
	verify(o, p, "frontend");
	if (o->emit == (*last = EMIT_IR))
		return p;
	CkptOptions ck = o->ckpt;
	if (ck.mode == CKPT_AUTO && ck.device_mem && tape_fits(ast, o))
		ck.mode = CKPT_NONE;
	AdOptions ad = {ck.mode != CKPT_NONE};
	p = ad_transform(p, &ad);
	verify(o, p, "ad_transform");
	p = ir_dce(p);
	verify(o, p, "dce");
	if (o->emit == (*last = EMIT_GRAD))
		return p;
	p = ckpt_pass(p, &ck);
	verify(o, p, "checkpoint_pass");
	if (o->emit == (*last = EMIT_CKPT))
		return p;
	p = stream_pass(p, &o->stream);
	verify(o, p, "stream_pass");
	*last = EMIT_STREAM;
	return p;
}
