/* cg, cost: the kernel cost model. Every launch one training step makes on
 * the GPU (dp_step's kernels, its GEMMs and convolutions, its device
 * copies, the optimizer's pass), with its grid, the bytes it moves and the
 * FLOPs it does, priced on a named GPU: a roofline whose bandwidth and
 * arithmetic are scaled by the warps the grid keeps in flight, and library
 * calls at the fraction of peak they were measured at. Registers, stack
 * and shared memory come from ptxas -v where it is at hand.
 *
 * codegen records the launches as it emits dp_step (cg_cost_*), with how
 * many times the code around them runs in one step (Host.times: loops'
 * trips, a binomial schedule's actions); cg_cost_report prices them. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/abi.h"
#include "cgint.h"
#include "../../common/revolve.h"

#ifndef DPC_CUDA_HOME
#define DPC_CUDA_HOME "/usr/local/cuda"
#endif

extern char **environ;

/* The GPUs: their data sheets' dense peaks (boost clock), and the link's
 * pinned host-to-device bandwidth: measured on the H100 (54.1 GB/s,
 * bench/RESULTS.md, 2026-11-25), PCIe 5.0's for the H200 and 4.0's for
 * the A100 until one is measured. */
static const CgGpu gpus[] = {
	{"h100", "NVIDIA H100 SXM5 80 GB", "sm_90", 132, 3.35e12, 66.9e12, 494.7e12, 989.4e12, 54.1e9, 228 << 10},
	{"h200", "NVIDIA H200 SXM 141 GB", "sm_90", 132, 4.8e12, 66.9e12, 494.7e12, 989.4e12, 54.1e9, 228 << 10},
	{"a100", "NVIDIA A100 SXM4 80 GB", "sm_80", 108, 2.039e12, 19.5e12, 156e12, 312e12, 25e9, 164 << 10},
};

/* Calibration, from the H100 profile of 2026-11-25 (bench/RESULTS.md):
 * - the memory's bandwidth takes bw x MEM_LATENCY bytes in flight (Little's
 *   law), each resident warp keeping one access of its width a lane in
 *   flight: on the H200 (2026-11-28) cross_entropy_grad, a block of 256
 *   lanes a row with 4-byte loads (fp32, B = 8), moved GPT-2's logits
 *   three times (the log-sum-exp's pass, then read and write) at 2.25 TB/s
 *   with 64 warps an SM, 8 KiB in flight an SM: 482 ns; with 2-byte loads
 *   (bf16, B = 32) at 1.52 TB/s, 4 KiB an SM: 356 ns; MEM_LATENCY is
 *   their geometric mean, which prices both within 16%. (Until then 32
 *   warps an SM of 4-byte loads were taken to reach the bandwidth, from
 *   cross_entropy's one block on the H100 of 2026-11-25: an SM alone
 *   fetches with less latency than a loaded GPU.) A row's second pass
 *   over a row too long for the rows in flight to stay in L2 (GPT-2's
 *   logits) is counted again (kernel_bytes);
 * - FP32 arithmetic needs 8 warps an SM (two per scheduler);
 * - cuBLAS's FP32 GEMMs: on the H200 on 2026-12-04 (bench/profiles) GPT-2's
 *   three vocabulary GEMMs (632 GFLOP each) took 36.9 ms, 0.768 of peak,
 *   and its blocks' (216 launches, the six shapes of [8192 | 768 | 3072]^3
 *   under 100 GFLOP) 89.5 ms, 0.70: each shape within 0.93-1.06 of these
 *   two figures (it had been 0.79 and 0.645, from 2026-11-28's 0.62 to 0.67
 *   of the forward's: 0.94-1.15 of the 12-04 measures, the step 1.03);
 *   attention's batched GEMMs over address arrays (cublasGemmBatchedEx, k
 *   or n the head's 64) at 0.415 in FP32 and 0.134 of the tensor cores'
 *   bf16 peak: what the H200's GPT-2 steps of 2026-11-28 spent in GEMMs
 *   (166.4 ms fp32, 148.0 bf16) less the vocabulary's and the blocks'
 *   (priced as above) took 1.9 and 5.0 times the 0.79 and 0.67 figures;
 *   on the H200 (2026-11-27) its bf16
 *   ones at 0.67 of the tensor cores' peak (GPT-2's [32768 x 768 x 768]
 *   and [32768 x 3072 x 768]: 655 and 688 TFLOP/s), and at 0.125 where a
 *   leading dimension is not a whole number of 16 bytes (the vocabulary
 *   projection's three, 50,257 wide: 7.6 TFLOP in 61 ms), where FP32's
 *   lose nothing; on 2026-12-04 (the H200) it was n and k, not the leading
 *   dimensions, that made them slow: with every leading dimension pitched
 *   the logits' GEMM (n = 50,257) ran at 0.096 and its adjoint into x
 *   (k = 50,257) at 0.132, the adjoint into the table (m = 50,257) at 0.53;
 * - a GEMM with too little arithmetic for its bytes (sums over leading
 *   axes as ones[1, M] @ x, GEMM_MEM_*) is bound by the memory: on the
 *   H200 (2026-12-04) GPT-2's [1 x 768 x M] and [1 x 3072 x M] in bf16
 *   and fp32 took 5 us beyond the launch plus their bytes at 0.83 of the
 *   bandwidth, all four within 5%;
 * - cuDNN's conv2d_dw took 44% of ResNet-56's 31.7 ms step at batch 128
 *   on the H100 (about 34 GFLOP in 14 ms: 0.035 of FP32 peak, the
 *   least-memory deterministic algorithm, on FMA); since its workspace
 *   lets cuDNN take its TF32 algorithms, the H200's profile of 2026-11-28
 *   measured it 3.35 times faster than that figure: 0.117; its forward and
 *   conv2d_dx are taken at 0.25 until measured apart;
 * - attention in tiles (a thread per row, serial dot products from shared
 *   memory) took 547 ms of GPT-2's fp32 step over its five kernels: each
 *   multiply-add also reads shared memory, ATTN_TILED_EFF of FP32 peak;
 *   on tensor cores (bf16) an earlier kernel took 133 ms at B = 32 (loads
 *   without cp.async, one block an SM by its registers); the kernel of
 *   today (ldmatrix, cp.async, 2 blocks an SM) is priced from what it does
 *   (mma_time below), not yet against a profile;
 * - a launch costs about LAUNCH_US of the GPU's time between kernels;
 * - embed_grad, each of its threads (a part of the table's rows, a column)
 *   reading every id and adding the matching rows, step after step: a step
 *   of k ids takes SCAN_STEP_CYCLES + k SCAN_ID_CYCLES. On the H200 GPT-2's
 *   66,048 threads (two blocks an SM) took 0.964 ms over 8,192 ids one a
 *   step (fp32, 2026-11-28) and 4.21 over 32,768 (bf16): 118 and 129 ns a
 *   step; reading 8 a step in two 16-byte loads, 0.592 and 2.530 ms
 *   (2026-12-04): 578 and 618 ns. Each id costs about 68 ns (134 cycles)
 *   and a step 55 (109): the ids' compares and branches, not the loads,
 *   set the time. (It had been priced as SCAN_RATE ids a second an SM, a
 *   step's 8 ids as one: 0.48 ms in bf16.) Since then a step tests its 8
 *   ids at once, without a branch between, and goes through them one by
 *   one only where one falls in the thread's part (1 in 86 ids for
 *   GPT-2's): SCAN_TEST_CYCLES an id for the test is an assumption (3
 *   instructions, four warps a scheduler) until a profile says. */
#define MEM_LATENCY 414e-9
#define FLOP_WARPS 8.0
#define GEMM_F32_EFF 0.768
#define GEMM_BF16_EFF 0.67
#define GEMM_BF16_ODD_EFF 0.125
#define GEMM_F32_SMALL_EFF 0.70
#define GEMM_ITEMS_F32_EFF 0.415
#define GEMM_ITEMS_BF16_EFF 0.134
#define GEMM_MEM_EFF 0.83
#define GEMM_MEM_US 5.0
#define CONV_EFF 0.25
#define CONV_DW_EFF 0.117
#define ATTN_TILED_EFF 0.0233
/* Attention on tensor cores, pipe by pipe (mma_time): an SM issues 4 warp
 * instructions a clock (one per scheduler), does 128 FP32 lanes' work, 16
 * ex2, moves 128 bytes through shared memory (an ldmatrix.x4: 512) and
 * mma.sync's bf16 products (f32's 3xTF32: m16n8k8 .tf32's, at TF32's peak)
 * at the data sheet's dense peak on the A100 and
 * half of it on Hopper, whose full rate is wgmma's (mma.sync reached about
 * half in published microbenchmarks). The other side's tiles come from L2,
 * taken at MMA_L2 times the memory's bandwidth. The busiest pipe bounds the
 * launch; MMA_OVERLAP is the fraction of that bound reached when 16 warps
 * an SM hide each other's latencies (FlashAttention-2 reached 50-73% of
 * the A100's peak, Dao 2023), less with fewer. MMA_OVERLAP was 0.6, an
 * assumption, until the H200's profile of 2026-12-04: GPT-2's three
 * tensor-core kernels (bf16, B = 32) took 24.7 ms where 0.6 said 15.7, and
 * the FMA kernels (fp32, B = 8; fma_time, the same overlap) 51.1 ms where
 * it said 31.1: 0.64 and 0.61 of the figure, so 0.37 for both, which
 * prices each of the six launches within 0.82 to 1.24 of its measure. */
#define MMA_L2 2.0
#define MMA_OVERLAP 0.37
/* Attention on GEMMs (cg_attn_price's other path): its row kernels pass
 * over the scores at ATTN_ROWS_BW of the bandwidth. On the H200
 * (2026-12-04) GPT-2's attention on GEMMs took 6.55 ms a layer in bf16 (B =
 * 32) and 3.29 in fp32 (B = 8), the steps' difference from the own
 * kernels' plus those kernels' measured time; with the scores' bytes at the
 * full bandwidth the price said 3.29 and 2.93, at 0.3 of it 5.75 and 3.54
 * (0.88 and 1.08 of the measures). */
#define ATTN_ROWS_BW 0.3
#define LAUNCH_US 2.0
/* An elementwise kernel's instructions (ptx_instr) at ISSUE_EFF of 4 warp
 * instructions a clock an SM: GPT-2's GELU and its adjoint in bf16 (the
 * H200, 2026-12-04: 24 launches in 7.57 ms) have instructions for 5.73 ms
 * at the full rate. */
#define ISSUE_EFF 0.76
#define SCAN_STEP_CYCLES 109.0
#define SCAN_ID_CYCLES 134.0
#define SCAN_TEST_CYCLES 8.0

const CgGpu *cg_gpu(const char *name)
{
	for (size_t i = 0; i < sizeof gpus / sizeof *gpus; i++)
		if (!strcmp(gpus[i].name, name))
			return &gpus[i];
	return NULL;
}

const char *cg_gpu_names(void)
{
	const char *s = "";
	for (size_t i = 0; i < sizeof gpus / sizeof *gpus; i++)
		s = ar_printf("%s%s%s", s, i ? ", " : "", gpus[i].name);
	return s;
}

/* ---- recording, as dp_step is emitted ---- */

static uint64_t launch_hash(const CgLaunch *l)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a over the fields that make a row */
	int64_t f[5] = {l->kind, l->kernel, l->threads, l->bytes, l->flops};
	for (size_t i = 0; i < sizeof f; i++)
		h = (h ^ ((const unsigned char *)f)[i]) * 1099511628211ull;
	for (const char *s = l->name; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool same_launch(const CgLaunch *a, const CgLaunch *b)
{
	return a->kind == b->kind && a->kernel == b->kernel && a->threads == b->threads && a->bytes == b->bytes &&
	       a->flops == b->flops && !strcmp(a->name, b->name);
}

/* the same launch again (a loop's body emitted twice, a batch item's blocks) adds to its row:
 * an open-addressing table of row indices by launch_hash, -1 empty */
static void record(Host *h, CgLaunch l)
{
	Cg *g = h->g;
	if (!g->cost || !h->step || h->times <= 0)
		return;
	l.count = h->times;
	if (2 * (g->launches.len + 1) > g->lslots) {
		g->lslots = g->lslots ? 2 * g->lslots : 256;
		g->lslot = ar_alloc(sizeof(int) * (size_t)g->lslots);
		memset(g->lslot, 0xff, sizeof(int) * (size_t)g->lslots);
		for (int i = 0; i < g->launches.len; i++) {
			int s = (int)(launch_hash(&g->launches.data[i]) & (uint64_t)(g->lslots - 1));
			while (g->lslot[s] >= 0)
				s = (s + 1) & (g->lslots - 1);
			g->lslot[s] = i;
		}
	}
	int s = (int)(launch_hash(&l) & (uint64_t)(g->lslots - 1));
	while (g->lslot[s] >= 0 && !same_launch(&g->launches.data[g->lslot[s]], &l))
		s = (s + 1) & (g->lslots - 1);
	if (g->lslot[s] >= 0) {
		g->launches.data[g->lslot[s]].count += l.count;
		return;
	}
	vec_push(&g->launches, l);
	g->lslot[s] = g->launches.len - 1;
}

/* the bytes a kernel reads and writes: its operands and result once (the
 * fused kernel's operands as its steps read them), attention's other side
 * once per tile of rows */
/* a loss over the whole tensor: cross_entropy, mse, count_labels (two launches on the GPU) */
static bool whole(const KDesc *d) { return (int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_TOTAL; }

static int64_t kernel_bytes(Cg *g, const KDesc *d)
{
	int64_t b = ir_bytes(g->p, d->out);
	if ((int)d->kind == K_ATTN_ROWS) {
		/* S (and dP) in the compute type, f32 for bf16; P or dS written in the tensor's. The softmax
		 * reads its row twice (the log-sum-exp, then P); attn_delta reads dO and O, its rows' shape */
		int64_t s = ir_numel(d->out) * (d->out.dt == DT_BF16 ? 4 : ir_dt_bytes(d->out.dt));
		switch (d->mode) {
		case AR_SOFTMAX: case AR_SOFTMAX_LSE: case AR_DS: case AR_DS_P: return 2 * s + b;
		case AR_P: return s + b;
		case AR_DELTA: return 2 * b;
		default: return s; /* the log-sum-exp, or the stats: S once */
		}
	}
	if ((int)d->kind == K_FUSED) {
		for (int s = 0; s < d->nsteps; s++)
			for (int j = 0; j < d->step[s].nin; j++)
				b += d->step[s].src[j] >= 0 && !d->step[s].is_const[j] ? ir_bytes(g->p, d->step[s].in[j]) : 0;
		return b;
	}
	for (int j = 0; j < d->nin && j < 5; j++)
		b += ir_bytes(g->p, d->in[j]);
	/* the log-sum-exp's pass, then the pass that writes: rows of 32 KiB or more, 8 blocks of them on each
	 * SM, are more than L2 holds (50 MiB on the H100), so the second pass reads the row from memory again */
	bool twice = (int)d->kind == OP_XENT_GRAD || (int)d->kind == OP_SOFTMAX || (int)d->kind == OP_LOG_SOFTMAX;
	if (twice && d->nin > 0 && d->in[0].rank > 0 && d->in[0].dim[d->in[0].rank - 1] * ir_dt_bytes(d->in[0].dt) >= (32 << 10))
		b += ir_bytes(g->p, d->in[0]);
	if (whole(d) && d->stage == 2) /* the blocks' sums (and cross_entropy's counts) */
		return ((int)d->kind == OP_XENT ? 2 : 1) * cg_total_blocks(d) * ir_dt_bytes(d->out.dt) + ir_bytes(g->p, d->out);
	if (d->stage == 2) /* a reduction's parts */
		return (cg_reduce_parts(g, d) + 1) * ir_bytes(g->p, d->out);
	if ((int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_HEADS) {
		int64_t tq, tk, T = d->in[0].dim[d->in[0].rank - 2];
		if (!cg_attn_tiles(g, d, &tq, &tk))
			tq = 1;
		b += (T / tq) * (ir_bytes(g->p, d->in[1]) + ir_bytes(g->p, d->in[2])) / 2; /* causal or not: about half */
	}
	return b;
}

static int64_t kernel_flops(Host *h, const KDesc *d)
{
	if ((int)d->kind == K_LOOP) { /* a loop's run, or a schedule's steps (about: each step once, forward and back) */
		Op *op = h->g->loops.data[d->loop].op;
		int64_t per = ir_block_flops(h->g->p, &op->body, 0, op->body.len);
		return per * op->trip * (d->actions ? 3 : 1);
	}
	if ((int)d->kind == K_FUSED)
		return (int64_t)d->nsteps * ir_numel(d->out);
	if (d->stage == 2)
		return whole(d) ? 2 * cg_total_blocks(d) : cg_reduce_parts(h->g, d) * ir_numel(d->out);
	if ((int)d->kind < OP__COUNT && h->op && h->op->kind == d->kind)
		return ir_op_flops(h->g->p, h->op);
	return ir_numel(d->out);
}

void cg_cost_kernel(Host *h, int id, int64_t threads, bool one_block)
{
	Cg *g = h->g;
	if (!g->cost || !h->step)
		return;
	const KDesc *d = &g->kernels.data[id];
	CgLaunch l = {.kind = CL_KERNEL, .kernel = id, .name = cg_kernel_label(d), .threads = threads,
	              .blocks = one_block ? 1 : (threads + 255) / 256, .bytes = kernel_bytes(g, d),
	              .flops = kernel_flops(h, d), .dt = d->out.dt, .access = ir_dt_bytes(d->out.dt) * (d->vec > 1 ? d->vec : 1)};
	if ((int)d->kind < OP__COUNT && ir_ops[d->kind].low == LW_HEADS)
		l.attention = cg_attn_mma(g, d) ? 2 : cg_attn_flash(g, d) ? 3 : 1;
	if (l.attention >= 2) {
		if (l.attention == 2) {
			cg_attn_mma_mix(d, &l.mix);
			l.dynamic_smem = (int)cg_attn_smem(d);
			l.wide = cg_attn_wide(d);
		} else {
			cg_attn_fma_mix(d, &l.mix);
		}
		l.mix.dram = (double)ir_bytes(g->p, d->out);
		for (int j = 0; j < d->nin && j < 5; j++)
			l.mix.dram += (double)ir_bytes(g->p, d->in[j]);
	}
	if (cg_row_access(g, d)) /* the rows' 16-byte vectors (cg_fold) */
		l.access = cg_row_access(g, d);
	if ((int)d->kind == K_ATTN_ROWS) /* S's rows 16 bytes a lane where they are whole vectors */
		l.access = cg_attn_rows_vec(d) * (d->out.dt == DT_F64 ? 8 : 4);
	if ((int)d->kind == OP_EMBED_GRAD) {
		int64_t V = d->out.dim[0], parts = cg_embed_parts(g, d);
		l.scan_ids = ir_numel(d->in[1]), l.scan_step = cg_embed_ids(g, d), l.scan_hit = (double)((V + parts - 1) / parts) / (double)V;
	}
	record(h, l);
}

/* ld: A's, B's and C's leading dimensions, in elements */
static CgLaunch gemm_launch(const char *what, int elem, int64_t m, int64_t n, int64_t k, int64_t batch, const int64_t ld[3],
                            bool items)
{
	CgLaunch l = {.kind = CL_GEMM, .kernel = -1, .name = ar_printf("gemm%s[%lld,%lld,%lld]x%lld", what, (long long)m,
	              (long long)n, (long long)k, (long long)batch), .blocks = -1,
	              .bytes = (m * k + k * n + 2 * m * n) * batch * elem, .flops = 2 * m * n * k * batch,
	              .dt = elem == 2 ? DT_BF16 : elem == 8 ? DT_F64 : DT_F32};
	for (int i = 0; i < 3; i++)
		l.odd |= ld[i] * elem % 16 != 0;
	/* in bf16 also n and k, the contiguous extents of C and A in cuBLAS's column-major call (linalg.c); not
	 * those under 16 bytes, the rest of a split GEMM, which no split could align */
	if (elem == 2)
		l.odd |= (n > 8 && n % 8) || (k > 8 && k % 8);
	l.items = items;
	return l;
}

void cg_cost_gemm(Host *h, int elem, int64_t m, int64_t n, int64_t k, int64_t batch, const int64_t ld[3], bool items)
{
	record(h, gemm_launch("", elem, m, n, k, batch, ld, items));
}

/* a GEMM with an epilogue (linalg.c): the GEMM's time, its bytes and the epilogue's (the bias's; z written
 * or x read, the size of the result) */
void cg_cost_gemm_ep(Host *h, int epi, bool bgrad, int elem, int64_t m, int64_t n, int64_t k, const int64_t ld[3], bool aux)
{
	static const char *const names[] = RT_EP_NAMES;
	CgLaunch l = gemm_launch(bgrad && epi == RT_EP_DGELU ? "+dgelu_bgrad" : names[epi], elem, m, n, k, 1, ld, false);
	l.bytes += n * elem + (aux ? m * n * elem : 0);
	record(h, l);
}

void cg_cost_conv(Host *h, Op *op, int64_t bytes)
{
	CgLaunch l = {.kind = CL_CONV, .kernel = -1, .name = cg_kernel_label(&(KDesc){.kind = op->kind,
	              .out = ir_vtype(h->g->p, op->out)}), .blocks = -1, .bytes = bytes, .flops = ir_op_flops(h->g->p, op),
	              .dt = ir_vtype(h->g->p, op->out).dt, .dw = op->kind == OP_CONV2D_DW};
	record(h, l);
}

void cg_cost_copy(Host *h, int64_t bytes, bool zero)
{
	CgLaunch l = {.kind = CL_COPY, .kernel = -1, .name = zero ? "memset" : "memcpy", .blocks = -1,
	              .bytes = zero ? bytes : 2 * bytes};
	record(h, l);
}

/* how many times each of a binomial schedule's functions runs in one step */
typedef struct {
	int64_t advance, taped, tape, copies;
	bool rows;
} Calls;

static void count_call(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	(void)slot;
	Calls *c = ctx;
	if (a == REV_ADVANCE)
		c->advance += to - step;
	else if (a == REV_SAVE || a == REV_RESTORE)
		c->copies++;
	else if (a == REV_TAPED && !c->rows)
		c->taped++;
	else
		c->taped += to - step, c->tape += a == REV_TAPED ? to - step : 0;
}

void cg_cost_revolve(Host *h, Op *op, int64_t times[4])
{
	Calls c = {.rows = op->ktape > 0};
	if (h->g->cost && h->step && h->times > 0)
		rev_op_schedule(op, count_call, &c);
	times[0] = h->times * c.advance;
	times[1] = h->times * c.taped;
	times[2] = h->times * c.tape;
	times[3] = h->times * c.copies;
}

/* ---- ptxas -v: registers, stack and shared memory per kernel ---- */

/* DPC_PTXAS names it (empty: none), else the toolkit's, else PATH's */
static const char *ptxas_path(void)
{
	const char *env = getenv("DPC_PTXAS");
	if (env)
		return *env && access(env, X_OK) == 0 ? env : NULL;
	const char *p = DPC_CUDA_HOME "/bin/ptxas";
	if (access(p, X_OK) == 0)
		return p;
	const char *path = getenv("PATH");
	for (char *d = strtok(ar_strdup(path ? path : ""), ":"); d; d = strtok(NULL, ":")) {
		const char *c = ar_printf("%s/ptxas", d);
		if (access(c, X_OK) == 0)
			return c;
	}
	return NULL;
}

/* runs ptxas -v on the PTX; the resources of kernel dp_kN into res[N]; NULL
 * when it ran, else why not */
static const char *run_ptxas(const char *ptx, const CgGpu *gpu, CgRes *res, int nk)
{
	const char *exe = ptxas_path();
	if (!exe)
		return getenv("DPC_PTXAS") ? "DPC_PTXAS names no executable" : "ptxas was not found (in " DPC_CUDA_HOME "/bin or on PATH)";
	const char *dir = getenv("TMPDIR");
	char in[4096], out[4200];
	snprintf(in, sizeof in, "%s/dpc-XXXXXX.ptx", dir && *dir ? dir : "/tmp");
	int fd = mkstemps(in, 4);
	if (fd < 0)
		return ar_printf("cannot create a temporary file: %s", strerror(errno));
	size_t len = strlen(ptx);
	bool ok = write(fd, ptx, len) == (ssize_t)len;
	close(fd);
	snprintf(out, sizeof out, "%s.log", in);
	const char *why = NULL;
	if (!ok) {
		why = "cannot write the PTX for ptxas";
	} else {
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 2, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		char *argv[] = {(char *)exe, "-v", "--gpu-name", (char *)gpu->arch, in, "-o", "/dev/null", NULL};
		pid_t pid;
		int st = 0, rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		if (rc != 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			why = ar_printf("%s -v failed on the PTX", exe);
	}
	FILE *f = why ? NULL : fopen(out, "r");
	char line[512];
	int k = -1;
	while (f && fgets(line, sizeof line, f)) {
		int n, a;
		const char *s;
		/* a space in the format takes any run of them; the properties of a
		 * function a kernel calls (libdevice's, not inlined) follow the
		 * kernel's and are not its own */
		if (strstr(line, "Function properties for "))
			k = sscanf(line, "ptxas info : Function properties for dp_k%d", &n) == 1 && n >= 0 && n < nk ? n : -1;
		else if (k >= 0 && sscanf(line, " %d bytes stack frame", &a) == 1)
			res[k].stack = a;
		else if (k >= 0 && (s = strstr(line, "Used ")) && sscanf(s, "Used %d registers", &a) == 1) {
			res[k].known = true;
			res[k].regs = a;
			/* "..., N bytes smem, ...": N is the number after the comma before it */
			const char *sm = strstr(line, " bytes smem");
			res[k].smem = 0;
			if (sm) {
				while (sm > line && sm[-1] != ',')
					sm--;
				res[k].smem = atoi(sm);
			}
		}
	}
	if (f)
		fclose(f);
	unlink(in);
	unlink(out);
	return why;
}

/* A kernel's instructions for one work item, from the PTX: the body of its
 * grid-stride loop (the first label a later branch goes back to, to that
 * branch) and of the functions it calls there (libdevice's __nv_expf, not
 * inlined), one per line; 0 where the loop holds another (a row kernel's
 * passes, a fused loop), whose trips the text does not say. An elementwise
 * kernel of many operations per element is bound by issuing them, not by
 * its bytes: GPT-2's GELU in bf16 took 641 instructions for a work item
 * of 8 elements (an IEEE division, an exponential, bf16's rounding by hand;
 * 457 since that rounding is cvt's), at 4 a clock an SM 0.24 ms a launch,
 * where its bytes are 0.09. */
static bool ptx_op(const char *l, const char *end)
{
	while (l < end && (*l == ' ' || *l == '\t'))
		l++;
	if (end - l < 2 || *l == '.' || *l == '/' || *l == '{' || *l == '}' || *l == '(' || *l == ')')
		return false;
	const char *e = end;
	while (e > l && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	return e > l && e[-1] == ';' && (l[0] == '@' || (l[0] >= 'a' && l[0] <= 'z'));
}

static const char *line_end(const char *l, const char *end)
{
	const char *e = memchr(l, '\n', (size_t)(end - l));
	return e ? e : end;
}

static bool name_char(char c)
{
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* the module's functions (".func (...) NAME(" then a body in braces; a declaration puts its parameters on the
 * next line) and their instructions, a call in them not followed (libdevice's leaves call nothing) */
typedef struct {
	const char *name;
	int len, instr;
} PtxFunc;

static int ptx_funcs(const char *ptx, PtxFunc **out)
{
	int n = 0, cap = 0;
	PtxFunc *f = NULL;
	const char *end = ptx + strlen(ptx);
	for (const char *s = ptx; (s = strstr(s, "\n.func"));) {
		const char *e = line_end(s + 1, end), *open;
		s = e;
		if (e[-1] != '(') /* a declaration */
			continue;
		const char *u = e - 1;
		while (name_char(u[-1]))
			u--;
		if (!(open = strstr(e, "\n{")))
			break;
		const char *close = strstr(open, "\n}");
		if (!close)
			break;
		int k = 0;
		for (const char *l = open + 2; l < close; l = line_end(l, close) + 1)
			k += ptx_op(l, line_end(l, close));
		if (n == cap) {
			f = ar_realloc(f, sizeof *f * (size_t)cap, sizeof *f * (size_t)(cap ? 2 * cap : 16));
			cap = cap ? 2 * cap : 16;
		}
		f[n++] = (PtxFunc){u, (int)(e - 1 - u), k};
		s = close;
	}
	*out = f;
	return n;
}

/* the instructions of lines [a, b), with those of the functions called there */
static int ptx_count(const char *a, const char *b, const PtxFunc *f, int nf)
{
	int n = 0;
	for (const char *l = a; l < b;) {
		const char *e = line_end(l, b);
		n += ptx_op(l, e);
		const char *c = strstr(l, "call.uni");
		if (c && c < e && e < b) {
			/* the callee's name is the next line's first word */
			const char *s = e + 1;
			while (s < b && (*s == ' ' || *s == '\t'))
				s++;
			int len = 0;
			while (s + len < b && name_char(s[len]))
				len++;
			for (int i = 0; i < nf; i++)
				if (f[i].len == len && !memcmp(f[i].name, s, (size_t)len))
					n += f[i].instr;
		}
		l = e + 1;
	}
	return n;
}

/* kernel k's instructions for a work item (lines [k, end) of the PTX): the body of its one loop, from the
 * label a later branch goes back to, to that branch; 0 where there is no loop or more than one */
static int kernel_instr(const char *k, const char *end, const PtxFunc *f, int nf)
{
	const char *loop = NULL, *back = NULL;
	int backs = 0;
	for (const char *l = k; l < end;) {
		const char *e = line_end(l, end), *bra = strstr(l, "bra");
		if (bra && bra < e) {
			const char *t = bra + 3;
			while (t < e && *t != ' ' && *t != '\t')
				t++;
			while (t < e && (*t == ' ' || *t == '\t'))
				t++;
			const char *u = t;
			while (u < e && *u != ';')
				u++;
			/* the label, "NAME:" at the start of a line before this one */
			for (const char *m = k; u > t && m < l; m = line_end(m, end) + 1)
				if (line_end(m, end) - m == u - t + 1 && !memcmp(m, t, (size_t)(u - t)) && m[u - t] == ':') {
					backs++;
					loop = m, back = e;
					break;
				}
		}
		l = e + 1;
	}
	return backs == 1 ? ptx_count(loop, back, f, nf) : 0;
}

/* every kernel's instructions for a work item into res[N].instr (dp_kN), one pass over the PTX */
static void ptx_instr(const char *ptx, CgRes *res, int nk)
{
	PtxFunc *f;
	int nf = ptx_funcs(ptx, &f);
	for (const char *s = ptx; (s = strstr(s, ".entry dp_k"));) {
		int k = atoi(s + 11);
		const char *end = strstr(s, "\n}");
		if (!end)
			break;
		if (k >= 0 && k < nk)
			res[k].instr = kernel_instr(s, end, f, nf);
		s = end;
	}
}

/* ---- the prediction ---- */

/* blocks of 256 threads an SM holds at once, by its registers and shared memory */
static int blocks_per_sm(const CgGpu *gpu, const CgRes *r)
{
	int b = 8; /* 2048 threads */
	if (r && r->known && r->regs > 0) {
		int by_regs = 65536 / (((r->regs + 7) / 8 * 8) * 256);
		b = by_regs < b ? by_regs : b;
	}
	if (r && r->smem > 0) {
		int by_smem = gpu->smem_sm / r->smem;
		b = by_smem < b ? by_smem : b;
	}
	return b > 0 ? b : 1;
}

/* an SM's clock: FP32's peak over its 256 FLOPs a clock (128 lanes' FMAs) */
static double sm_clock(const CgGpu *gpu) { return gpu->fp32 / (256.0 * gpu->sms); }

static double peak_flops(const CgGpu *gpu, DType dt, bool tensor)
{
	if (dt == DT_F64)
		return gpu->fp32 / 2;
	if (tensor)
		return dt == DT_BF16 ? gpu->bf16 : gpu->tf32;
	return gpu->fp32;
}

/* attention on tensor cores: its busiest pipe (MMA_OVERLAP above), over the SMs its blocks fill */
static double mma_time(const CgGpu *gpu, const CgMix *x, int64_t blocks, int per_sm)
{
	double clock = sm_clock(gpu), sms = blocks < gpu->sms ? (double)blocks : gpu->sms;
	/* bf16's m16n8k16: 4096 FLOPs; tf32's m16n8k8: 2048, at half bf16's rate in FLOPs: as many a second */
	double mma_rate = (x->tf32 ? gpu->tf32 / 2048 : gpu->bf16 / 4096) * (strcmp(gpu->arch, "sm_90") ? 1 : 0.5);
	double pipe[5] = {
		x->mma / (mma_rate * sms / gpu->sms),
		(x->mma + x->ldmatrix + x->ex2 + x->alu) / (4 * sms * clock),
		x->ex2 * 32 / (16 * sms * clock),
		x->shared / (128 * sms * clock),
		x->dram / gpu->bw + x->l2 / (MMA_L2 * gpu->bw),
	};
	double t = 0;
	for (int i = 0; i < 5; i++)
		t = fmax(t, pipe[i]);
	return t / (MMA_OVERLAP * fmin(1, per_sm * 8 / 16.0));
}

/* attention in FMA (attn_fma.c), pipe by pipe as mma_time: 4 warp
 * instructions a clock, FP32's 128 lanes (the FMAs and the arithmetic
 * around them; f64's FMAs at half the rate), a warp's vector load from shared memory a clock (its
 * rows' lanes read at most 128 distinct bytes, the rest broadcast), a
 * shuffle a clock, 16 ex2; the tiles from L2; two blocks an SM (128
 * registers) */
static double fma_time(const CgGpu *gpu, const CgMix *x, int64_t blocks, int per_sm)
{
	double clock = sm_clock(gpu), sms = blocks < gpu->sms ? (double)blocks : gpu->sms;
	double pipe[6] = {
		(x->fma + x->alu + x->lds + x->shfl + x->ex2) / (4 * sms * clock),
		(x->fma * (x->f64 ? 2 : 1) + x->alu) / (4 * sms * clock),
		x->lds / (sms * clock),
		x->shfl / (sms * clock),
		x->ex2 * 32 / (16 * sms * clock),
		x->dram / gpu->bw + x->l2 / (MMA_L2 * gpu->bw),
	};
	double t = 0;
	for (int i = 0; i < 6; i++)
		t = fmax(t, pipe[i]);
	return t / (MMA_OVERLAP * fmin(1, per_sm * 8 / 16.0));
}

double cg_attn_price(const char *name, Type q, int heads, bool causal, int64_t rows, AttnPath path)
{
	const CgGpu *gpu = cg_gpu(name ? name : "h100");
	int64_t T = q.dim[q.rank - 2], C = q.dim[q.rank - 1], bh = ir_numel(q) / (T * C) * heads, dh = C / heads;
	double launch = LAUNCH_US * 1e-6, qb = (double)ir_bytes(NULL, q);
	if (!gpu || T <= 0 || dh <= 0)
		return INFINITY;
	if (path != ATTN_GEMMS) {
		/* the forward (q, k, v in; o and the log-sum-exp out), attn_dkv (q, k, v, dO, stats in; dk, dv
		 * out), attn_dq (q, k, v, dO, stats in; dq out), and attn_delta's pass over dO and O; on tensor
		 * cores in bf16 and in f32 as 3xTF32 (ATTN_TF32), else in FMA */
		static const OpKind kinds[3] = {OP_ATTENTION, OP_ATTN_DKV, OP_ATTN_DQ};
		static const double tensors[3] = {4, 6, 5};
		double t = launch + 2 * qb / gpu->bw;
		for (int i = 0; i < 3; i++) {
			KDesc d;
			memset(&d, 0, sizeof d);
			d.kind = kinds[i];
			d.in[0] = q;
			d.attr.attn.heads = heads;
			d.attr.attn.causal = causal;
			d.attr.attn.flash = true;
			d.attr.attn.tf32 = path == ATTN_TF32 && q.dt == DT_F32;
			CgMix x;
			memset(&x, 0, sizeof x);
			if (q.dt != DT_BF16 && !d.attr.attn.tf32) {
				int64_t blocks = cg_attn_fma_mix(&d, &x);
				x.dram = tensors[i] * qb;
				t += launch + fma_time(gpu, &x, blocks, 2);
				continue;
			}
			int64_t blocks = cg_attn_mma_mix(&d, &x);
			x.dram = tensors[i] * qb;
			/* two blocks an SM at 128 registers; heads wider than 64 take up to 255, one; fewer where their
			 * tile memory passes the SM's (the A100's 164 KiB: one of f32's 87 KiB at heads of 64) */
			int per = cg_attn_wide(&d) ? 1 : 2, by_smem = gpu->smem_sm / (int)cg_attn_tile_bytes(&d);
			t += launch + mma_time(gpu, &x, blocks, by_smem < per ? (by_smem > 0 ? by_smem : 1) : per);
		}
		return t;
	}
	double scores = 0, blocks = 0;
	for (int64_t r0 = 0; r0 < T; r0 += rows, blocks++) {
		int64_t nq = r0 + rows < T ? rows : T - r0, nk = causal ? r0 + nq : T;
		scores += (double)nq * (double)nk * (double)bh;
	}
	double rate = q.dt == DT_BF16 ? gpu->bf16 * GEMM_ITEMS_BF16_EFF : peak_flops(gpu, q.dt, false) * GEMM_ITEMS_F32_EFF;
	double per_score = q.dt == DT_F64 ? 40 : 20; /* the scores and their gradient in f32 (f64) */
	return blocks * 7 * launch + 9 * 2 * (double)dh * scores / rate + per_score * scores / (gpu->bw * ATTN_ROWS_BW);
}

/* the fraction of peak cuBLAS reaches (the calibration above) */
static double gemm_eff(const CgLaunch *l)
{
	bool bf16 = l->dt == DT_BF16;
	if (l->items)
		return bf16 ? GEMM_ITEMS_BF16_EFF : GEMM_ITEMS_F32_EFF;
	if (bf16)
		return l->odd ? GEMM_BF16_ODD_EFF : GEMM_BF16_EFF;
	return l->flops < (int64_t)100e9 ? GEMM_F32_SMALL_EFF : GEMM_F32_EFF;
}

static double predict(const CgGpu *gpu, const CgLaunch *l, const CgRes *r)
{
	double launch = LAUNCH_US * 1e-6;
	switch (l->kind) {
	case CL_GEMM:
		return launch + fmax((double)l->flops / (peak_flops(gpu, l->dt, l->dt == DT_BF16) * gemm_eff(l)),
		                     GEMM_MEM_US * 1e-6 + (double)l->bytes / (gpu->bw * GEMM_MEM_EFF));
	case CL_CONV:
		return launch + (double)l->flops / (gpu->fp32 * (l->dw ? CONV_DW_EFF : CONV_EFF));
	case CL_COPY:
		return launch + (double)l->bytes / gpu->bw;
	default:
		break;
	}
	if (l->attention == 2) {
		/* without ptxas's figures (--profile's per-kernel predictions), the registers the kernels carry
		 * (ptx.c): 128, two blocks an SM; 255 for heads wider than 64, one */
		int per = r && r->known ? blocks_per_sm(gpu, r) : l->wide ? 1 : 2;
		return launch + mma_time(gpu, &l->mix, l->blocks, per);
	}
	if (l->attention == 3)
		return launch + fma_time(gpu, &l->mix, l->blocks, r && r->known ? blocks_per_sm(gpu, r) : 2);
	int64_t resident = (int64_t)gpu->sms * blocks_per_sm(gpu, r);
	double warps = (double)(l->blocks < resident ? l->blocks : resident) * 8;
	double width = l->access > 0 ? l->access / 4.0 : 1;
	double mem = fmin(1, warps * 32 * width * 4 / (gpu->bw * MEM_LATENCY)), alu = fmin(1, warps / (gpu->sms * FLOP_WARPS));
	double eff = l->attention == 1 ? ATTN_TILED_EFF : 1;
	double peak = peak_flops(gpu, l->dt, false);
	double t = fmax((double)l->bytes / (gpu->bw * mem), (double)l->flops / (peak * alu * eff));
	if (r && r->instr > 0 && l->blocks == (l->threads + 255) / 256) {
		/* its instructions (ptx_instr), 4 warp instructions a clock an SM, at ISSUE_EFF of that */
		double clock = sm_clock(gpu), sms = l->blocks < gpu->sms ? (double)l->blocks : gpu->sms;
		t = fmax(t, (double)l->threads * r->instr / 32 / (4 * sms * clock * ISSUE_EFF));
	}
	if (l->scan_ids > 0) {
		/* embed_grad: each thread's steps over the ids one after the other, in waves of the resident blocks */
		double clock = sm_clock(gpu), waves = ceil((double)l->blocks / (double)resident);
		double k = (double)l->scan_step, step = SCAN_STEP_CYCLES + SCAN_ID_CYCLES;
		if (l->scan_step > 1) /* all k tested at once; where one falls in the part, each as one a step is */
			step = SCAN_STEP_CYCLES + SCAN_TEST_CYCLES * k + (1 - pow(1 - l->scan_hit, k)) * SCAN_ID_CYCLES * k;
		t = fmax(t, waves * (double)(l->scan_ids / l->scan_step) * step / clock);
	}
	return launch + t;
}

static bool starved(const CgGpu *gpu, const CgLaunch *l)
{
	return l->blocks >= 0 && l->blocks < gpu->sms && (l->bytes > (16 << 20) || l->flops > 1000000000);
}

/* the optimizer's pass over each resident trained parameter after the step (a streamed one's runs on the
 * host), and under bf16-mixed each one's gradient added into its f32 sum (the fold) */
static void optimizer_launches(Cg *g)
{
	Program *p = g->p;
	for (int i = 0; i < p->params.len; i++) {
		Param *q = &p->params.data[i];
		if (q->buffer || q->grad < 0 || q->streamed)
			continue;
		int64_t n = ir_numel(q->type), e = p->mixed ? 4 : ir_dt_bytes(q->type.dt), copy = p->mixed ? 2 : 0;
		bool adam = p->optimizer == OPT_ADAM;
		CgLaunch l = {.kind = CL_KERNEL, .kernel = -1, .name = ar_printf("%s[%s]", adam ? "adam" : "sgd", q->name),
		              .count = 1, .threads = n, .blocks = (n + 255) / 256,
		              .bytes = n * ((adam ? e * 7 : e * 3) + copy), .flops = n * (adam ? 12 : 2), .dt = DT_F32};
		vec_push(&g->launches, l);
		if (p->mixed) {
			l.name = ar_printf("grad_sum[%s]", q->name);
			l.bytes = n * (2 + 4 + 4), l.flops = n;
			vec_push(&g->launches, l);
		}
	}
}

double cg_host_update_bytes(const Program *p)
{
	/* each streamed element's step reads the value (the master copy), its gradient and Adam's moments,
	 * and writes the value, the moments and under bf16-mixed the bf16 compute copy */
	int e = p->mixed ? 4 : ir_dt_bytes(p->real), g = ir_dt_bytes(p->real);
	int per = p->optimizer == OPT_ADAM ? e + g + 2 * e + 3 * e : e + g + e;
	return (double)p->stream_numel * (per + (p->mixed ? 2 : 0));
}

/* each kernel's predicted time on the executable's GPU (--gpu, else the
 * H100), without ptxas's figures, from its first launch in the step (0: none):
 * the kpred lines of the model description; ns has g->kernels.len entries */
void cg_cost_kernels_ns(Cg *g, const char *gpu_name, int64_t *ns)
{
	const CgGpu *gpu = cg_gpu(gpu_name ? gpu_name : "h100");
	memset(ns, 0, sizeof *ns * (size_t)g->kernels.len);
	for (int i = g->launches.len - 1; gpu && i >= 0; i--) {
		const CgLaunch *l = &g->launches.data[i];
		if (l->kind == CL_KERNEL && l->kernel >= 0 && l->kernel < g->kernels.len)
			ns[l->kernel] = (int64_t)(predict(gpu, l, NULL) * 1e9);
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++)
		fprintf(f, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
	fputc('"', f);
}

void cg_cost_report(Cg *g, const CgGpu *gpu, double host_bw, const char *ptx, bool json, bool table, bool verbose, FILE *f)
{
	Program *p = g->p;
	optimizer_launches(g);
	int nk = 0;
	for (int i = 0; i < g->launches.len; i++)
		nk = g->launches.data[i].kernel >= nk ? g->launches.data[i].kernel + 1 : nk;
	CgRes *res = ar_alloc(sizeof *res * (size_t)(nk + 1));
	memset(res, 0, sizeof *res * (size_t)(nk + 1));
	const char *why = ptx ? run_ptxas(ptx, gpu, res, nk) : "the target is not cuda";
	if (ptx)
		ptx_instr(ptx, res, nk);
	if (why && verbose)
		fprintf(stderr, "dpc: note: --emit=kernels without registers, stack and shared memory: %s\n", why);
	double total = 0, by[4] = {0};
	int64_t launches = 0;
	if (json)
		fprintf(f, "\"gpu\": \"%s\",\n  \"kernels\": [", gpu->name);
	else if (table)
		fprintf(f, "# %s (%s): %d SMs, %.0f GB/s, FP32 %.1f TFLOP/s, TF32 %.0f, bf16 %.0f, link %.1f GB/s%s\n"
		        "# %-8s %-40s %9s %7s %14s %14s %5s %6s %6s %12s %12s\n", gpu->name, gpu->desc, gpu->sms, gpu->bw / 1e9,
		        gpu->fp32 / 1e12, gpu->tf32 / 1e12, gpu->bf16 / 1e12, gpu->link / 1e9,
		        why ? ar_printf("; no ptxas figures: %s", why) : "", "count", "launch", "blocks", "threads", "bytes",
		        "flops", "regs", "stack", "smem", "us each", "us in step");
	for (int i = 0; i < g->launches.len; i++) {
		CgLaunch *l = &g->launches.data[i];
		CgRes with = l->kernel >= 0 ? res[l->kernel] : (CgRes){0};
		with.smem += with.known ? l->dynamic_smem : 0; /* the launch's static and dynamic shared memory */
		const CgRes *r = l->kernel >= 0 ? &with : NULL;
		double t = predict(gpu, l, r);
		total += t * (double)l->count;
		by[l->kind] += t * (double)l->count;
		launches += l->count;
		const char *regs = r && r->known ? ar_printf("%d", r->regs) : "-";
		const char *stack = r && r->known ? ar_printf("%d", r->stack) : "-";
		const char *smem = r && r->known ? ar_printf("%d", r->smem) : "-";
		if (!json) {
			if (table)
				fprintf(f, "%-10lld %-40s %9lld %7d %14lld %14lld %5s %6s %6s %12.1f %12.1f%s%s\n", (long long)l->count,
				        l->name, (long long)l->blocks, l->blocks < 0 ? 0 : 256, (long long)l->bytes, (long long)l->flops, regs,
				        stack, smem, t * 1e6, t * 1e6 * (double)l->count, starved(gpu, l) ? "  STARVED" : "",
				        l->odd ? "  UNALIGNED" : "");
			continue;
		}
		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		json_str(f, l->name);
		fprintf(f, ", \"kind\": \"%s\", \"kernel\": %d, \"count\": %lld, \"blocks\": %lld, \"threads\": %d, \"bytes\": %lld, "
		        "\"flops\": %lld, \"registers\": %s, \"stack_bytes\": %s, \"shared_bytes\": %s, \"predicted_us\": %.3f, "
		        "\"starved\": %s, \"unaligned\": %s", (const char *[]){"kernel", "gemm", "conv", "copy"}[l->kind], l->kernel,
		        (long long)l->count, (long long)l->blocks, l->blocks < 0 ? 0 : 256, (long long)l->bytes,
		        (long long)l->flops, r && r->known ? regs : "null", r && r->known ? stack : "null",
		        r && r->known ? smem : "null", t * 1e6, starved(gpu, l) ? "true" : "false", l->odd ? "true" : "false");
		if (l->attention == 3) /* what the FMA kernels' model counts in a step of a row (tests/kernels reads the PTX's) */
			fprintf(f, ", \"instructions_per_step\": %.2f", l->mix.per_step);
		if (l->attention == 2) /* the tensor-core kernels' mma instructions a warp's step (as the PTX's loop has them) */
			fprintf(f, ", \"mma_per_step\": %.0f", l->mix.per_step);
		if (r && r->instr > 0) /* a thread's instructions for one work item, from the PTX (ptx_instr) */
			fprintf(f, ", \"instructions_per_item\": %d, \"items\": %lld", r->instr, (long long)l->threads);
		fputc('}', f);
	}
	/* the three run beside each other: the device's work, the link (a stream each way) and the streamed
	 * parameters' steps on the host */
	double link = (double)(p->h2d_bytes[1] > p->d2h_bytes[1] ? p->h2d_bytes[1] : p->d2h_bytes[1]) / gpu->link;
	double host = cg_host_update_bytes(p) / host_bw;
	double step = fmax(total, fmax(link, host));
	const char *bound = step == total ? "compute" : step == link ? "link" : "host update";
	if (json) {
		fprintf(f, "%s],\n  \"predicted_launches\": %lld,\n  \"predicted_compute_ms\": %.3f,\n  \"predicted_link_ms\": %.3f,\n"
		        "  \"predicted_host_update_ms\": %.3f,\n  \"host_bandwidth\": %.6g,\n  \"predicted_step_ms\": %.3f,\n"
		        "  \"predicted_bound\": \"%s\"", g->launches.len ? "\n  " : "", (long long)launches, total * 1e3, link * 1e3,
		        host * 1e3, host_bw, step * 1e3, bound);
		return;
	}
	if (!table) {
		fprintf(f, "predicted step on %s: %.3f ms, bound by %s: compute %.3f ms (%lld launches), the link %.3f ms (%.4g GB "
		        "up, %.4g GB down at %.4g GB/s a way), the host update %.3f ms (%.4g GB of host memory at %.4g GB/s), "
		        "overlapped\n", gpu->name, step * 1e3, bound, total * 1e3, (long long)launches, link * 1e3,
		        (double)p->h2d_bytes[1] / 1e9, (double)p->d2h_bytes[1] / 1e9, gpu->link / 1e9, host * 1e3,
		        cg_host_update_bytes(p) / 1e9, host_bw / 1e9);
		return;
	}
	fprintf(f, "predicted step on %s: %.3f ms, bound by %s (%lld launches: kernels %.3f ms, GEMMs %.3f ms, convolutions "
	        "%.3f ms, copies %.3f ms; the link %.3f ms and the host update %.3f ms, overlapped)\n", gpu->name, step * 1e3,
	        bound, (long long)launches, by[CL_KERNEL] * 1e3, by[CL_GEMM] * 1e3, by[CL_CONV] * 1e3, by[CL_COPY] * 1e3,
	        link * 1e3, host * 1e3);
}
