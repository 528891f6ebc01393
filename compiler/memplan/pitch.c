/* mem, pitch: rows of GEMM operands and results at a whole number of 16
 * bytes.
 *
 * cuBLAS's tensor-core GEMMs take a leading dimension that is a multiple of
 * 16 bytes; at any other it falls back to slow kernels (GPT-2's logits,
 * [B, T, 50257] in bf16: its three GEMMs took 61 ms of a 220 ms step on an
 * H200). nanoGPT pads the vocabulary by hand. Here the plan pads the rows
 * instead: such a value's rows take a pitch of a whole number of 16 bytes
 * in storage (of 128 where that costs at most 1/64 more), the tail of
 * each row written and read by nobody. The shapes, the parameters and
 * every result stay as the program says.
 *
 * Only where every op that makes or reads the value takes a pitch
 * (ir_pitch_ok): GEMMs (as the leading dimension), cross_entropy and its
 * gradient (as a row stride), and reshapes that keep the last axis, whose
 * results share their operand's storage and so its pitch. And only in the
 * top-level block: a loop's body, its tapes and snapshots copy values
 * whole. On the CUDA target (Program.pitch_rows); the tests ask for it on
 * the CPU too (DPC_PITCH=on), where the bits must not change. */
#include <stdlib.h>

#include "memplan.h"

static int find(int *up, int v)
{
	while (up[v] != v)
		v = up[v] = up[up[v]];
	return v;
}

static bool real(DType dt) { return dt == DT_F32 || dt == DT_BF16 || dt == DT_F64; }

/* every operand and loop yield in b, at any depth: those of ops below the top level, or that take no pitch,
 * mark their value's class bad */
static void mark_reads(Program *p, Block *b, bool top, int *up, bool *bad)
{
	for (int i = 0; i < b->len; i++) {
		Op *op = b->ops[i];
		for (int k = 0; k < op->nin; k++)
			if (!top || !ir_pitch_ok(p, op, k))
				bad[find(up, op->in[k])] = true;
		if (!ir_is_loop(op))
			continue;
		for (int k = 0; k < op->ncarry; k++) {
			bad[find(up, op->cyield[k])] = true;
			if (op->body3.len)
				bad[find(up, op->cyield3[k])] = true;
		}
		mark_reads(p, &op->body, false, up, bad);
		mark_reads(p, &op->body2, false, up, bad);
		mark_reads(p, &op->body3, false, up, bad);
	}
}

/* the row's elements in storage: a whole number of 16 bytes, or of 128 where that adds at most 1/64 */
static int64_t pitch_of(int64_t n, int elem)
{
	int64_t a = 16 / elem, b = 128 / elem;
	int64_t p16 = (n + a - 1) / a * a, p128 = (n + b - 1) / b * b;
	return (p128 - n) * 64 <= n ? p128 : p16;
}

void mem_pitch(Program *p)
{
	int nv = p->values.len;
	for (int v = 0; v < nv; v++)
		p->values.data[v].pitch = 0;
	if (!p->pitch_rows)
		return;
	int *up = malloc(sizeof(int) * (size_t)(nv + 1));
	bool *bad = calloc((size_t)nv + 1, 1), *top = calloc((size_t)nv + 1, 1), *gemm = calloc((size_t)nv + 1, 1);
	for (int v = 0; v < nv; v++)
		up[v] = v;
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if (op->out >= 0)
			top[op->out] = true;
		if (op->kind == OP_RESHAPE && ir_pitch_ok(p, op, 0))
			up[find(up, op->out)] = find(up, op->in[0]);
	}
	/* a class is worth a pitch where a GEMM makes or reads one of its values */
	for (int i = 0; i < p->body.len; i++) {
		Op *op = p->body.ops[i];
		if (op->kind != OP_MATMUL || !ir_pitch_ok(p, op, -1))
			continue;
		gemm[find(up, op->out)] = true;
		for (int k = 0; k < op->nin; k++)
			gemm[find(up, op->in[k])] = true;
	}
	for (int v = 0; v < nv; v++) {
		Value *x = &p->values.data[v];
		if (x->kind != VK_SSA || !top[v] || !x->def || !ir_pitch_ok(p, x->def, -1) || !real(x->type.dt) ||
		    x->type.rank < 2 || ir_is_result(p, v))
			bad[find(up, v)] = true;
	}
	mark_reads(p, &p->body, true, up, bad);
	for (int v = 0; v < nv; v++) {
		Value *x = &p->values.data[v];
		int r = find(up, v);
		if (bad[r] || !gemm[r])
			continue;
		int elem = ir_dt_bytes(x->type.dt);
		int64_t n = x->type.dim[x->type.rank - 1];
		if (n * elem % 16)
			x->pitch = pitch_of(n, elem);
	}
	free(up);
	free(bad);
	free(top);
	free(gemm);
}
