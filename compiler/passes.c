/* driver: the pipeline, in order. Each pass takes the program and returns
 * it; the IR verifier runs after each one. */
#include "driver.h"

#include "ad_transform/ad.h"

static void verify(const DriverOptions *o, Program *p, const char *pass)
{
	if (o->verify)
		ir_verify(p, pass);
}

Program *driver_passes(FeAst *ast, const DriverOptions *o, Emit *last)
{
	Program *p = fe_lower(ast, o->real_bytes);
	p->optimizer = o->optimizer;
	verify(o, p, "frontend");
	if (o->emit == (*last = EMIT_IR))
		return p;
	AdOptions ad = {o->ckpt.mode != CKPT_NONE};
	p = ad_transform(p, &ad);
	verify(o, p, "ad_transform");
	p = ir_dce(p);
	verify(o, p, "dce");
	if (o->emit == (*last = EMIT_GRAD))
		return p;
	p = ckpt_pass(p, &o->ckpt);
	verify(o, p, "checkpoint_pass");
	if (o->emit == (*last = EMIT_CKPT))
		return p;
	p = stream_pass(p, &o->stream);
	verify(o, p, "stream_pass");
	*last = EMIT_STREAM;
	return p;
}
