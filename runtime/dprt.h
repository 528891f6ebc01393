/* dprt: the contract between code that dpc generates and the runtime library.
 *
 * A generated executable is one object file from dpc linked with libdprt.a.
 * The runtime owns main(): it parses the command line, loads data and
 * parameters, allocates the device arena, and calls the generated step.
 *
 * The generated object defines:
 *
 *   const char dp_model_desc[];       model description, text, see below
 *   void dp_step(RtCtx *c);           loss and gradients of all parameters
 *   void dp_forward(RtCtx *c);        loss only
 *   const RtKernelFn dp_cpu_kernels[]; CPU target: kernel table, by id
 *   const int dp_cpu_nkernels;
 *   const char dp_ptx[];              CUDA target: the kernels as PTX; "" for the CPU
 *   const int32_t dp_kernel_smem[];   each kernel's dynamic shared memory in bytes, by id (0: none)
 *
 * and calls only the rt_* functions declared here. Device memory is one arena
 * laid out by the compiler; generated code addresses it as rt_base(c) + offset.
 * Device addresses are plain 64-bit integers on the host side.
 *
 * dp_model_desc is a sequence of lines, fields separated by single spaces:
 *
 *   dpc 1
 *   model NAME                        source file's base name
 *   precision f32|f64|bf16|bf16-mixed what the source's f32 is stored as (--precision)
 *   arena BYTES                       the planned device arena size
 *   loss OFFSET DTYPE                 arena offset and element type of the scalar loss
 *   report NAME OFFSET DTYPE          a scalar read after each step (`report NAME = e`)
 *   param NAME DTYPE RANK D0 .. OFFSET GRAD_OFFSET STACKED INIT A B
 *                                     DTYPE is f32|bf16|f64|i32; STACKED 0|1;
 *                                     INIT zeros|ones|normal|uniform (A, B: std / range)
 *   input NAME DTYPE RANK D0 .. OFFSET CLASSES
 *                                     CLASSES > 0 for cross_entropy labels
 *   ids NAME                          the input NAME holds ids an embed reads (tokens, for the progress line)
 *   optimizer sgd|adam                the update dp_step's caller applies (chosen at compile time)
 *   state NAME M_OFFSET V_OFFSET      adam: parameter NAME's two moments, planned in the arena
 *   master NAME OFFSET SUM            bf16-mixed: resident parameter NAME's f32 master copy and f32 sum of
 *                                     its gradients (its param line's: the bf16 compute copy and gradient)
 *   host BYTES                        the pinned host pool of streamed parameters and their state
 *   stream NAME HOST M V MASTER SLOTS GRAD HGRAD
 *                                     parameter NAME lives in the host pool at HOST (its param line's
 *                                     offsets are -1), adam's moments at M and V (-1 for sgd), the
 *                                     bf16-mixed master copy at MASTER (-1 otherwise); its device slots
 *                                     at SLOTS, its unit's gradient at GRAD; its gradients come down to
 *                                     HGRAD in the pool (rt_update), where the host updates it
 *   transfers slots K ahead D forward H2D D2H step H2D D2H numel N grads G
 *                                     device slots per streamed tensor, prefetch distance, the bytes
 *                                     of streamed units one dp_forward and one dp_step move, the
 *                                     streamed parameters' elements and their gradients' bytes
 *   kernel sgd DTYPE ID               args: p, g, lr, scale[, copy]; over each element; one per element type
 *                                     of trained params (bf16-mixed: f32, writing the bf16 copy)
 *   kernel adam DTYPE ID              args: p, g, m, v, lr / bc1, beta1, beta2, eps, 1 / sqrt(bc2), keep, scale[, copy]
 *   kernel fold f32 ID                bf16-mixed: args sum, g, first: sum = (first ? 0 : sum) + g
 *   kernel refresh f32 ID             bf16-mixed: args copy, master: copy = bf16(master)
 *   kname ID LABEL                    every kernel's label, e.g. fused[64,32], for profiles
 *   kpred ID NS                       CUDA: a launch's time in nanoseconds as dpc's cost model predicts
 *                                     it (--profile prints it beside the measured)
 *   kwork ID N                        an item's rough work in elements where it is more than 1 (rows,
 *                                     attention tiles): the CPU splits a launch between threads by it
 *   plan CATEGORY BYTES               predicted bytes by category (params, grads, optimizer, inputs, tape,
 *                                     snapshots, slots, work)
 *   steps forward N recomputed N      loop steps one dp_step runs (as predicted)
 *   memplot N B0 .. BN-1              the plan's work region in use over one step, N maxima over runs of ops
 *   budget BYTES                      --device-mem, when it was given
 *   build program FILE HASH           what the ranks of a job compare at start, by name: the source's file
 *   build const NAME VALUE            name and a hash of its text, each constant after -D, each dpc option
 *   build option NAME VALUE           given that shapes the executable (the runtime reads them from the
 *                                     text; VALUE runs to the end of the line)
 *   flops forward F                   floating-point operations of dp_forward, as the op table counts them
 *   end
 *
 * Kernel arguments are 64-bit words: device addresses, or doubles (by bit
 * pattern) for scalars. A CPU kernel computes elements [begin, end) of its
 * index space; the runtime may split [0, n) between threads.
 */
#ifndef DPRT_H
#define DPRT_H

#include <stdint.h>

#include "../common/abi.h"

typedef struct RtCtx RtCtx;
typedef void (*RtKernelFn)(const uint64_t *args, int64_t begin, int64_t end);

uint64_t rt_base(RtCtx *c);
void rt_phase(RtCtx *c, int phase);
/* the key of this training step's dropout draws: dp_step_key(seed, step) */
uint64_t rt_key(RtCtx *c);
/* 1 while training, 0 in evaluation (--eval): training() is 0 and dropout keeps everything */
uint64_t rt_training(RtCtx *c);
void rt_launch(RtCtx *c, int kernel, int64_t n, int nargs, const uint64_t *args);
/* C[b] = A[b] @ B[b] (+ C[b] when beta = 1), row-major, b in [0, batch).
 * elem_bytes: 2 (bf16, f32 accumulation), 4 (f32) or 8 (f64), all three
 * matrices; or RT_GEMM_BF16_F32: A and B bf16, C f32 (attention's scores).
 * ta/tb: use the transpose of A / B. Strides are in elements. */
void rt_gemm(RtCtx *c, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k,
             uint64_t a, int64_t lda, int64_t stride_a,
             uint64_t b, int64_t ldb, int64_t stride_b,
             uint64_t cc, int64_t ldc, int64_t stride_c,
             int64_t batch, double beta);
/* A GEMM with an epilogue, as cuBLASLt applies it (the CUDA device): C = op(A) op(B), batch 1, beta
 * 0 or 1 as rt_gemm's, with `epi` applied to the product P on its way to C:
 * - RT_EP_BIAS: C = P + bias, bias n elements, one a column;
 * - RT_EP_GELU_BIAS: C = gelu(P + bias) (GPT-2's tanh form), and where aux is not 0 P + bias
 *   written to aux too (a leading dimension of ldaux elements);
 * - RT_EP_DGELU: C = P * gelu'(aux), aux read; where bias is not 0, each column's sum of C
 *   written to it (n elements);
 * - RT_EP_BGRAD: C as rt_gemm's, and bias[j] = the sum over the depth of op(B)'s column j.
 * GELU and its derivative take beta 0 only (cuBLASLt would apply them to P + C); the aux matrix's
 * leading dimension a multiple of 8, at least n.
 * Returns 1, or 0 where the device has no such GEMM (the CPU, or no algorithm in cuBLASLt for
 * the shape): nothing was written, and the caller makes it apart. elem_bytes: 2 or 4. RT_EP_*: abi.h. */
int rt_gemm_ep(RtCtx *c, int epi, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k,
               uint64_t a, int64_t lda, uint64_t b, int64_t ldb, uint64_t cc, int64_t ldc, double beta,
               uint64_t bias, uint64_t aux, int64_t ldaux);
/* rt_gemm for each of `items` items, item i's matrices oa, ob and oc
 * elements after item i - 1's (attention's heads of several batch items:
 * two strides, so one strided batch does not reach them all) */
void rt_gemm_items(RtCtx *c, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k,
                   uint64_t a, int64_t lda, int64_t stride_a, int64_t item_a,
                   uint64_t b, int64_t ldb, int64_t stride_b, int64_t item_b,
                   uint64_t cc, int64_t ldc, int64_t stride_c, int64_t item_c,
                   int64_t batch, int64_t items, double beta);
/* Convolution over x [N, C, H, W] and w [O, C/G, kh, kw], y [N, O, Ho, Wo]
 * in G groups (output channel o reads the C/G input channels from
 * (o / (O/G)) C/G; the conv2d ops): kind 0 writes y = conv(x, w); kind 1 x,
 * the gradient of the input, from y (the output's gradient) and w; kind 2
 * w, the gradient of the weight, from x and y. dims: RT_CONV_DIMS numbers
 * in this order (a window's elements dh, dw apart, as unfold's). The result is
 * overwritten. ws: ws_bytes of planned workspace. elem_bytes as rt_gemm's. */
void rt_conv(RtCtx *c, int kind, int elem_bytes, const int64_t *dims, uint64_t x, uint64_t w, uint64_t y, uint64_t ws,
             int64_t ws_bytes);
/* Attention in tiles (the attention ops on the CPU): kind 0 attention, 1
 * attn_stats, 2 attn_dq, 3 attn_dk, 4 attn_dv; in: the op's operands, out
 * its result. dims: B T C H causal, B the product of the axes before T.
 * elem_bytes as rt_gemm's. */
void rt_attention(RtCtx *c, int kind, int elem_bytes, const int64_t *dims, const uint64_t *in, uint64_t out);
void rt_copy(RtCtx *c, uint64_t dst, uint64_t src, int64_t bytes);
void rt_zero(RtCtx *c, uint64_t dst, int64_t bytes);
void rt_count(RtCtx *c, int counter, int64_t n);
/* Reverses a loop of n steps (indices lo..lo+n-1) under the binomial
 * schedule (sweep 1: the sweep schedule, whose saves the forward loop made,
 * nhost 0) with s snapshot slots, the lowest nhost of them in the host pool,
 * calling the generated functions: advance(c, i, j) steps the state from i
 * to j; with k = 0, taped(c, i, 0) runs step i's taped step and adjoint
 * from the current state; with a tape of k rows, a taped action of steps
 * a..b-1 calls tape(c, i, i - a) for each, which tapes forward step i into
 * row i - a and steps the state, then taped(c, i, i - a) for each, last
 * first, which runs step i's adjoint from its row. Under the sweep with a
 * tape the forward loop taped the last min(n, k) steps into rows from 0 up:
 * their adjoints run first. snapshot(c, row, restore) copies the state into device row
 * 0..s-nhost of the snapshots (row s-nhost: the staging row, with host slots),
 * or back when restore is 1; offload(c, slot, to_device) copies the staging
 * row into host slot 0..nhost-1, or back, with rt_snap_copy. The state of
 * step lo is current on entry. Advances count as recomputed steps, and
 * flops (one step's, as dpc counts them) per step as recomputed FLOPs, and
 * each taped step taped_flops (what it computes of its forward step again);
 * with a tape, each step taped is a recomputed step too. With pool (pooled
 * rows, rev_pool_schedule: the choices of rev_pool_plan(n, k)) the
 * schedule is the pool's, and slots from s up live in the carried values'
 * tapes, which snapshot(c, slot, restore) addresses as it does its rows.
 * With kernel >= 0 (a fused loop, never with host slots) the functions are
 * NULL: the actions are gathered as words (RT_ACTION_WORD), and kernel runs each chunk of them on
 * `threads` threads with arguments (arena base, the words' address, their
 * count); the words are in host_alloc memory, which the device reads.
 * With replay (a state the rows do not keep, never fused, pooled or with
 * host slots), before the adjoint of the j-th step of a taped run the
 * state is made again: replay(c, first, -1) reads the run's first state
 * from the tapes' first row, then replay(c, i, row) steps it j times from
 * the rows, each counted as replay_flops recomputed FLOPs. */
void rt_revolve(RtCtx *c, int64_t n, int64_t s, int64_t nhost, int64_t lo, int sweep, int64_t k, int64_t flops,
                int64_t taped_flops, void (*advance)(RtCtx *, int64_t, int64_t), void (*taped)(RtCtx *, int64_t, int64_t),
                void (*tape)(RtCtx *, int64_t, int64_t), void (*snapshot)(RtCtx *, int64_t, int),
                void (*offload)(RtCtx *, int64_t, int), const int32_t *pool, int kernel, int64_t threads,
                void (*replay)(RtCtx *, int64_t, int64_t), int64_t replay_flops);
/* A copy on the copy stream between device memory and the host pool at
 * offset host; later snapshot copies wait for it through RtCtx.snap_event. */
void rt_snap_copy(RtCtx *c, int to_device, uint64_t dev, int64_t host, int64_t bytes);

/* Tensor streaming. A streamed tensor lives in the host pool at offset
 * `host`; its unit u (bytes each) passes through device slot u mod k of the
 * slots at `slots`. `table` holds two words per slot, in the generated code:
 * the unit it holds + 1 (0: none) and the event of its last copy.
 *   rt_stream_reset  empties n words of tables (each dp_step and dp_forward starts so)
 *   rt_fetch         copies unit u of parameter `param` in, unless u is outside [lo, hi), its slot
 *                    holds it, or its gradient went down in this call (nothing reads it after)
 *   rt_wait          device work queued later waits for the copy into u's slot
 *   rt_update        unit u's gradient of parameter `param` (bytes at g) is complete: it goes down
 *                    to the pool at host + u bytes, where the host adds it to the step's and applies
 *                    the optimizer's step to the unit (runtime/host_update.c)
 *   rt_grad_in       unit u's gradient of parameter `param` (bytes at g) starts at 0, once the unit
 *                    before it is down */
void rt_stream_reset(RtCtx *c, int64_t *table, int64_t n);
/* Offloaded forward values: rt_act_copy starts a copy on the copy stream
 * between device memory and the host pool at offset host (to_device 0:
 * down, the offload after the value's definition; 1: up, the fetch for the
 * adjoint), its event in *event; rt_act_wait makes device work queued later
 * wait for it (the offloaded value's memory is then free, the fetched one's
 * ready). */
void rt_act_copy(RtCtx *c, int64_t *event, int to_device, uint64_t dev, int64_t host, int64_t bytes);
void rt_act_wait(RtCtx *c, int64_t *event);
void rt_fetch(RtCtx *c, int64_t *table, int64_t k, int64_t u, int64_t lo, int64_t hi, uint64_t slots, int64_t host,
              int64_t bytes, int param);
void rt_wait(RtCtx *c, int64_t *table, int64_t k, int64_t u);
void rt_update(RtCtx *c, int param, int64_t u, uint64_t g, int64_t host, int64_t bytes);
void rt_grad_in(RtCtx *c, int param, int64_t u, uint64_t g, int64_t bytes);
/* data parallelism: parameter `param`'s gradient (n elements at g) is complete; under mpirun, in the
 * step's last micro-batch, its sum across the ranks starts (the training loop waits for it before
 * the update); in one process, nothing */
void rt_allreduce(RtCtx *c, int param, uint64_t g, int64_t n);

/* The CPU target under DPC_SIMT=1 (testing): kernels written for a GPU
 * block of 256 threads run on the SIMT emulator (runtime/cpu/simt.c).
 * rt_simt_block runs work item `item` as one block, body(args, item) in
 * each thread; inside a body, rt_simt_tid is the thread's place in the
 * block and the others are the PTX collectives the body meets:
 * bar.sync 0, shfl.sync.bfly, mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32
 * (c: this thread's four floats, replaced by d's), ldmatrix and cp.async. */
void rt_simt_block(void (*body)(const uint64_t *args, int64_t item), const uint64_t *args, int64_t item);
int64_t rt_simt_tid(void);
void rt_simt_barrier(void);
float rt_simt_shfl_bfly_f32(int32_t mask, float v, int32_t lanemask, int32_t clamp);
int32_t rt_simt_shfl_bfly_i32(int32_t mask, int32_t v, int32_t lanemask, int32_t clamp);
void rt_simt_mma_bf16(int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t b0, int32_t b1, float *c);
void rt_simt_mma_tf32(int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t b0, int32_t b1, float *c);
int32_t rt_simt_f2tf32_rna(float x);
/* ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: d, this thread's four words */
void rt_simt_ldmatrix_x4(const void *p, int32_t trans, int32_t *d);
/* cp.async.cg.shared.global (16 bytes), cp.async.commit_group, cp.async.wait_group n */
void rt_simt_cp_async16(void *dst, const void *src);
void rt_simt_cp_commit(void);
void rt_simt_cp_wait(int32_t n);

extern const char dp_model_desc[];
void dp_step(RtCtx *c);
void dp_forward(RtCtx *c);
extern const RtKernelFn dp_cpu_kernels[];
extern const int dp_cpu_nkernels;
extern const char dp_ptx[];
extern const int32_t dp_kernel_smem[];

#endif
