/* ops: linear algebra. matmul multiplies the last two axes, with leading
 * batch axes equal on both sides, or b of rank 2 shared by every batch. */
#include "ops.h"

const char *ops_shape_matmul(Program *p, Op *op, Type *out)
{
	Type a = ir_vtype(p, op->in[0]), b = ir_vtype(p, op->in[1]);
	if (a.dt != DT_REAL || b.dt != DT_REAL)
		return ar_printf("matmul needs real tensors, got %s @ %s", ops_ts(a), ops_ts(b));
	if (a.rank < 2 || b.rank < 2)
		return ar_printf("matmul needs operands of rank 2 or more, got %s @ %s", ops_ts(a), ops_ts(b));
	int64_t m = a.dim[a.rank - 2], ka = a.dim[a.rank - 1];
	if (op->ta)
		m = a.dim[a.rank - 1], ka = a.dim[a.rank - 2];
	int64_t kb = b.dim[b.rank - 2], n = b.dim[b.rank - 1];
	if (op->tb)
		kb = b.dim[b.rank - 1], n = b.dim[b.rank - 2];
	if (ka != kb)
		return ar_printf("matmul inner dimensions differ: %s @ %s (%lld vs %lld)", ops_ts(a), ops_ts(b), (long long)ka,
		                 (long long)kb);
	if (b.rank > 2) {
		bool same = a.rank == b.rank;
		for (int i = 0; same && i < a.rank - 2; i++)
			same = a.dim[i] == b.dim[i];
		if (!same)
			return ar_printf("batched matmul needs equal batch axes: %s @ %s", ops_ts(a), ops_ts(b));
	}
	*out = a;
	out->dim[a.rank - 2] = m;
	out->dim[a.rank - 1] = n;
	return NULL;
}
