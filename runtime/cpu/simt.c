/* rt, the CPU device: a GPU thread block run on one CPU thread, for testing
 * the CUDA target's warp-level kernel bodies here (DPC_SIMT=1, docs/codegen.md).
 *
 * The block's 256 threads are fibers on stacks of their own. Each runs its
 * kernel body until it reaches a collective: a barrier (bar.sync 0), a
 * shuffle or a tensor-core product (mma.sync), which the PTX ISA defines
 * over a warp's 32 lanes. There it stops, and once every thread that takes
 * part has arrived, the scheduler computes what each receives, as the PTX
 * ISA's fragment layouts say, and lets them go on. Asynchronous copies
 * (cp.async) are made only when the thread waits for their group, so a
 * kernel that reads a tile before waiting reads what was there before. Threads that meet
 * different collectives, a warp collective that a finished thread should
 * take part in, or a block where no thread can go on are errors: on a GPU
 * they hang or are undefined. A CPU thread runs one block at a time, so the
 * block's shared arrays are thread-local globals of the generated code. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu.h"

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_ASAN 1
#endif
#endif
#ifdef SIMT_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif

#define THREADS 256
#define STACK (256 << 10) /* bytes of each thread's stack */

enum { RUN, AT_BARRIER, AT_WARP, DONE };
enum { W_SHFL_BFLY, W_MMA_BF16, W_MMA_TF32, W_LDMATRIX };

typedef struct {
	void *sp;          /* its stack pointer while it waits */
	char *stack;
	int state, op;
	uint32_t in[10];   /* what it brings to a warp collective */
	const uint16_t *at; /* ldmatrix: the row whose address it gives */
	uint32_t out[4];   /* what the collective gives it */
	void *fake;        /* ASan's fake stack while it waits */
	/* cp.async: copies issued and not yet made, each with its group (0: not committed yet) */
	struct {
		void *dst;
		const void *src;
		int group;
	} copy[64];
	int ncopies, groups; /* groups committed */
} Fiber;

typedef struct {
	Fiber f[THREADS];
	void *sched_sp;    /* the scheduler's stack pointer while a fiber runs */
	const void *sched_bottom; /* and its stack's bounds, for ASan */
	size_t sched_size;
	int cur;
	void (*body)(const uint64_t *args, int64_t item);
	const uint64_t *args;
	int64_t item;
} Block;

static _Thread_local Block *blk;

#if defined(__x86_64__)
/* saves the callee-saved registers and the SSE and x87 control words on the
 * current stack and its pointer in *from, then takes up `to`'s */
void rt_simt_switch(void **from, void *to);
__asm__(".text\n"
        ".globl rt_simt_switch\n"
        ".type rt_simt_switch,@function\n"
        "rt_simt_switch:\n"
        "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
        "\tsubq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n"
        "\tmovq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n"
        "\tldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n"
        "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
        "\tret\n"
        ".size rt_simt_switch, .-rt_simt_switch\n");
#else
#error "the SIMT emulator switches fibers with x86-64 code"
#endif

/* ASan is told of each switch, with the stack it goes to (fiber.c of its
 * interface): the scheduler's bounds are learnt from the first switch */
#ifdef SIMT_ASAN
#define TO_STACK(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define ON_STACK(fake) __sanitizer_finish_switch_fiber(fake, &blk->sched_bottom, &blk->sched_size)
#else
#define TO_STACK(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define ON_STACK(fake) ((void)(fake))
#endif

/* the scheduler runs fiber f until it stops */
static void resume(Fiber *f)
{
	void *fake = NULL;
	TO_STACK(&fake, f->stack, STACK);
	rt_simt_switch(&blk->sched_sp, f->sp);
#ifdef SIMT_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* a fiber's way back to the scheduler: at a collective, or at its end */
static void yield(Fiber *f)
{
	TO_STACK(f->state == DONE ? NULL : &f->fake, blk->sched_bottom, blk->sched_size);
	rt_simt_switch(&f->sp, blk->sched_sp);
	ON_STACK(f->fake);
}

static void fiber_main(void)
{
	ON_STACK(NULL);
	Fiber *f = &blk->f[blk->cur];
	blk->body(blk->args, blk->item);
	if (f->ncopies)
		rt_fail(70, "SIMT: thread %d ended with %d cp.async copies not waited for", blk->cur, f->ncopies);
	f->state = DONE;
	yield(f);
	rt_fail(70, "internal error: a finished SIMT thread was resumed");
}

/* a fresh stack whose first switch "returns" into fiber_main */
static void start(Fiber *f)
{
	uint64_t *top = (uint64_t *)(f->stack + STACK);
	*--top = 0;                           /* fiber_main's return address: never used */
	*--top = (uint64_t)(uintptr_t)fiber_main;
	for (int i = 0; i < 6; i++)
		*--top = 0;                       /* rbp rbx r12 r13 r14 r15 */
	uint32_t csr[2];
	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
	--top;
	memcpy(top, csr, 8);
	f->sp = top;
	f->state = RUN;
	f->ncopies = f->groups = 0;
}

int64_t rt_simt_tid(void) { return blk->cur; }

/* ---- the collectives, as each thread calls them ---- */

void rt_simt_barrier(void)
{
	Fiber *f = &blk->f[blk->cur];
	f->state = AT_BARRIER;
	yield(f);
}

static void at_warp(int op)
{
	Fiber *f = &blk->f[blk->cur];
	f->state = AT_WARP;
	f->op = op;
	yield(f);
}

static uint32_t bits_of(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static float float_of(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

int32_t rt_simt_shfl_bfly_i32(int32_t mask, int32_t v, int32_t lanemask, int32_t clamp)
{
	Fiber *f = &blk->f[blk->cur];
	f->in[0] = (uint32_t)v, f->in[1] = (uint32_t)lanemask, f->in[2] = (uint32_t)clamp, f->in[3] = (uint32_t)mask;
	at_warp(W_SHFL_BFLY);
	return (int32_t)f->out[0];
}

float rt_simt_shfl_bfly_f32(int32_t mask, float v, int32_t lanemask, int32_t clamp)
{
	return float_of((uint32_t)rt_simt_shfl_bfly_i32(mask, (int32_t)bits_of(v), lanemask, clamp));
}

/* a thread's part of a warp's tensor-core product `op`: its A and B words
 * in, its four floats of C in c, replaced by D's */
static void mma_at_warp(int op, const int32_t *w, float *c)
{
	Fiber *f = &blk->f[blk->cur];
	for (int i = 0; i < 6; i++)
		f->in[i] = (uint32_t)w[i];
	for (int i = 0; i < 4; i++)
		f->in[6 + i] = bits_of(c[i]);
	at_warp(op);
	for (int i = 0; i < 4; i++)
		c[i] = float_of(f->out[i]);
}

/* d = a b + c on a warp's tensor cores, m16n8k16, A row-major and B
 * column-major in bf16, C and D in f32: this thread's fragments (a: four
 * words of two bf16, b: two, c: four floats, replaced by d's) */
void rt_simt_mma_bf16(int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t b0, int32_t b1, float *c)
{
	mma_at_warp(W_MMA_BF16, (int32_t[]){a0, a1, a2, a3, b0, b1}, c);
}

/* d = a b + c, m16n8k8 with A and B in TF32 (f32 words whose low 13 bits
 * the product ignores), C and D in f32 */
void rt_simt_mma_tf32(int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t b0, int32_t b1, float *c)
{
	mma_at_warp(W_MMA_TF32, (int32_t[]){a0, a1, a2, a3, b0, b1}, c);
}

/* cvt.rna.tf32.f32: x rounded to TF32's 10 bits of fraction, to nearest
 * with ties away from zero, as f32 bits with the low 13 zero; NaN and the
 * infinities as they are (a NaN's payload kept in its high bits) */
int32_t rt_simt_f2tf32_rna(float x)
{
	uint32_t u = bits_of(x);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return (int32_t)((u & 0x7fffffu) ? (u | 0x400000u) & ~0x1fffu : u);
	return (int32_t)((u + 0x1000u) & ~0x1fffu);
}

/* ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: four 8 x 8 matrices of
 * b16 from shared memory, lanes 8i to 8i + 7 giving the addresses of
 * matrix i's rows; d[i] is this thread's word of matrix i */
void rt_simt_ldmatrix_x4(const void *p, int32_t trans, int32_t *d)
{
	Fiber *f = &blk->f[blk->cur];
	f->at = p;
	f->in[0] = (uint32_t)trans;
	if ((uintptr_t)p % 16)
		rt_fail(70, "SIMT: ldmatrix row address %p is not 16-byte aligned", p);
	at_warp(W_LDMATRIX);
	for (int i = 0; i < 4; i++)
		d[i] = (int32_t)f->out[i];
}

/* cp.async.cg.shared.global 16 bytes: recorded, made at the wait for its group */
void rt_simt_cp_async16(void *dst, const void *src)
{
	Fiber *f = &blk->f[blk->cur];
	if ((uintptr_t)dst % 16 || (uintptr_t)src % 16)
		rt_fail(70, "SIMT: cp.async of 16 bytes from %p to %p, not 16-byte aligned", src, dst);
	if (f->ncopies == 64)
		rt_fail(70, "SIMT: thread %d has 64 cp.async copies waiting", blk->cur);
	f->copy[f->ncopies].dst = dst, f->copy[f->ncopies].src = src, f->copy[f->ncopies].group = 0;
	f->ncopies++;
}

/* cp.async.commit_group: the copies issued since the last commit are a group */
void rt_simt_cp_commit(void)
{
	Fiber *f = &blk->f[blk->cur];
	f->groups++;
	for (int i = 0; i < f->ncopies; i++)
		if (!f->copy[i].group)
			f->copy[i].group = f->groups;
}

/* cp.async.wait_group n: every committed group but the newest n is copied */
void rt_simt_cp_wait(int32_t n)
{
	Fiber *f = &blk->f[blk->cur];
	int kept = 0;
	for (int i = 0; i < f->ncopies; i++)
		if (f->copy[i].group && f->copy[i].group <= f->groups - n)
			memcpy(f->copy[i].dst, f->copy[i].src, 16);
		else
			f->copy[kept++] = f->copy[i];
	f->ncopies = kept;
}

/* ---- the scheduler's side ---- */

static float bf16(uint32_t word, int high) { return float_of((high ? word >> 16 : word & 0xffff) << 16); }

/* PTX ISA, "Matrix fragments for mma.m16n8k16" with .bf16: lane l is in
 * group g = l / 4 at t = l % 4. A (16 x 16): word i holds row g + 8 (i & 1)
 * at columns 2t + 8 (i >> 1) and the next. B (16 x 8): word i holds rows
 * 2t + 8i and the next of column g. C, D (16 x 8): float i is row
 * g + 8 (i >> 1), column 2t + (i & 1). The lower half of a word is the
 * lower index. */
static void mma_warp(Fiber *w)
{
	float A[16][16], Bm[16][8], C[16][8];
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		for (int i = 0; i < 4; i++)
			for (int h = 0; h < 2; h++)
				A[g + 8 * (i & 1)][2 * t + 8 * (i >> 1) + h] = bf16(w[l].in[i], h);
		for (int i = 0; i < 2; i++)
			for (int h = 0; h < 2; h++)
				Bm[2 * t + 8 * i + h][g] = bf16(w[l].in[4 + i], h);
		for (int i = 0; i < 4; i++)
			C[g + 8 * (i >> 1)][2 * t + (i & 1)] = float_of(w[l].in[6 + i]);
	}
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		for (int i = 0; i < 4; i++) {
			int r = g + 8 * (i >> 1), c = 2 * t + (i & 1);
			double s = 0; /* bf16 products are exact; their sum is rounded once */
			for (int k = 0; k < 16; k++)
				s += (double)A[r][k] * Bm[k][c];
			w[l].out[i] = bits_of((float)(s + C[r][c]));
		}
	}
}

/* PTX ISA, "Matrix fragments for mma.m16n8k8" with .tf32: lane l is in
 * group g = l / 4 at t = l % 4. A (16 x 8): word i holds row g + 8 (i & 1)
 * at column t + 4 (i >> 1). B (8 x 8): word i holds row t + 4i of column g.
 * C, D as m16n8k16's. Each operand's low 13 bits are ignored. */
static void mma_tf32_warp(Fiber *w)
{
	float A[16][8], Bm[8][8], C[16][8];
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		for (int i = 0; i < 4; i++)
			A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = float_of(w[l].in[i] & ~0x1fffu);
		for (int i = 0; i < 2; i++)
			Bm[t + 4 * i][g] = float_of(w[l].in[4 + i] & ~0x1fffu);
		for (int i = 0; i < 4; i++)
			C[g + 8 * (i >> 1)][2 * t + (i & 1)] = float_of(w[l].in[6 + i]);
	}
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		for (int i = 0; i < 4; i++) {
			int r = g + 8 * (i >> 1), c = 2 * t + (i & 1);
			double s = 0; /* TF32 products are exact in double; their sum is rounded once */
			for (int k = 0; k < 8; k++)
				s += (double)A[r][k] * Bm[k][c];
			w[l].out[i] = bits_of((float)(s + C[r][c]));
		}
	}
}

/* shfl.sync.bfly: lane l reads lane l ^ b, unless that is past the
 * segment's last lane (c's low bits and segment mask, PTX ISA) */
static void shfl_warp(Fiber *w, int warp)
{
	for (int l = 0; l < 32; l++) {
		uint32_t b = w[l].in[1] & 31, c = w[l].in[2], seg = (c >> 8) & 31, mask = w[l].in[3];
		if (mask != 0xffffffffu)
			rt_fail(70, "SIMT: warp %d lane %d: shfl.sync with member mask %#x (the kernels use whole warps)", warp, l,
			        mask);
		uint32_t max = ((uint32_t)l & seg) | (c & 31 & ~seg), j = (uint32_t)l ^ b;
		w[l].out[0] = w[j <= max ? j : (uint32_t)l].in[0];
	}
}

/* PTX ISA, ldmatrix: lane l holds, of each matrix, row l / 4 at columns
 * 2 (l % 4) and the next (the lower one in the low half); .trans: the
 * matrix transposed, so column l / 4 at rows 2 (l % 4) and the next */
static void ldmatrix_warp(Fiber *w, int warp)
{
	uint32_t trans = w[0].in[0];
	for (int l = 1; l < 32; l++)
		if (w[l].in[0] != trans)
			rt_fail(70, "SIMT: warp %d: lanes 0 and %d disagree on ldmatrix's .trans", warp, l);
	for (int l = 0; l < 32; l++)
		for (int m = 0; m < 4; m++) {
			uint32_t lo, hi;
			if (trans) {
				lo = w[8 * m + 2 * (l % 4)].at[l / 4];
				hi = w[8 * m + 2 * (l % 4) + 1].at[l / 4];
			} else {
				lo = w[8 * m + l / 4].at[2 * (l % 4)];
				hi = w[8 * m + l / 4].at[2 * (l % 4) + 1];
			}
			w[l].out[m] = lo | hi << 16;
		}
}

static const char *warp_op_name(int op)
{
	return op == W_SHFL_BFLY ? "shfl.sync.bfly" : op == W_MMA_BF16 ? "mma.sync (bf16)" : op == W_MMA_TF32 ? "mma.sync (tf32)" : "ldmatrix";
}

/* a warp whose every lane waits at one collective: done, and its lanes run again */
static bool warp_ready(int warp)
{
	Fiber *w = &blk->f[32 * warp];
	int at = 0, done = 0;
	for (int l = 0; l < 32; l++)
		at += w[l].state == AT_WARP, done += w[l].state == DONE;
	if (at == 0 || at + done < 32)
		return false;
	if (done)
		rt_fail(70, "SIMT: warp %d: %d lanes at %s while %d have finished", warp, at, warp_op_name(w[0].state == AT_WARP ? w[0].op : w[31].op), done);
	for (int l = 1; l < 32; l++)
		if (w[l].op != w[0].op)
			rt_fail(70, "SIMT: warp %d: lane 0 at %s, lane %d at %s", warp, warp_op_name(w[0].op), l, warp_op_name(w[l].op));
	if (w[0].op == W_MMA_BF16)
		mma_warp(w);
	else if (w[0].op == W_MMA_TF32)
		mma_tf32_warp(w);
	else if (w[0].op == W_LDMATRIX)
		ldmatrix_warp(w, warp);
	else
		shfl_warp(w, warp);
	for (int l = 0; l < 32; l++)
		w[l].state = RUN;
	return true;
}

static Block *block_here(void)
{
	if (!blk) {
		Block *b = calloc(1, sizeof *b);
		if (!b)
			rt_fail(71, "out of memory for the SIMT emulator");
		for (int i = 0; i < THREADS; i++) {
			b->f[i].stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (b->f[i].stack == MAP_FAILED)
				rt_fail(71, "out of memory for the SIMT emulator's stacks");
		}
		blk = b;
	}
	return blk;
}

/* runs work item `item` of a kernel as one block of 256 threads: body(args,
 * item) in each, rt_simt_tid() telling them apart */
void rt_simt_block(void (*body)(const uint64_t *args, int64_t item), const uint64_t *args, int64_t item)
{
	Block *b = block_here();
	b->body = body, b->args = args, b->item = item;
	for (int i = 0; i < THREADS; i++)
		start(&b->f[i]);
	for (;;) {
		bool ran = false;
		for (int i = 0; i < THREADS; i++)
			if (b->f[i].state == RUN) {
				b->cur = i;
				resume(&b->f[i]);
				ran = true;
			}
		int waiting = 0, done = 0;
		for (int i = 0; i < THREADS; i++)
			waiting += b->f[i].state == AT_BARRIER, done += b->f[i].state == DONE;
		if (done == THREADS)
			return;
		bool moved = false;
		for (int w = 0; w < THREADS / 32; w++)
			moved |= warp_ready(w);
		if (!moved && waiting && waiting + done == THREADS) {
			if (done)
				rt_fail(70, "SIMT: %d threads at a barrier while %d have finished", waiting, done);
			for (int i = 0; i < THREADS; i++)
				b->f[i].state = RUN;
			moved = true;
		}
		if (!ran && !moved) {
			int at = 0;
			for (int i = 0; i < THREADS; i++)
				at += b->f[i].state == AT_WARP;
			rt_fail(70, "SIMT: the block cannot go on: %d threads at a barrier, %d at warp collectives, %d finished",
			        waiting, at, done);
		}
	}
}
