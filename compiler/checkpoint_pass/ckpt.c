/* ckpt: --checkpoint none keeps ad_transform's store-everything tapes.
 * Binomial checkpointing of loops replaces them here (a later issue). */
#include "ckpt.h"

Program *ckpt_pass(Program *p, const CkptOptions *o)
{
	switch (o->mode) {
	case CKPT_NONE:
		return p;
	}
	unreachable();
}
