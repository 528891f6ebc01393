/* The SIMT emulator (runtime/cpu/simt.c) against the PTX ISA's definitions,
 * written out here on their own: blocks of 256 threads whose bodies are C
 * functions meeting at the emulator's collectives. Shuffles and barriers,
 * mma.m16n8k16 bf16 fragments against a plain product, ldmatrix with and
 * without .trans, cp.async groups made at their wait; then the errors a
 * GPU would hang on or leave undefined, each in a child process, by its
 * message. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/rt.h"
#include "check.h"

noreturn void rt_fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

/* one check, its line either way */
static void t(bool cond, const char *what)
{
	check(cond, what);
	if (cond)
		printf("ok - simt/%s\n", what);
}

static int64_t got[256][8]; /* what each thread saw */
static const uint64_t none[1];

static void run(void (*body)(const uint64_t *, int64_t))
{
	memset(got, 0, sizeof got);
	rt_simt_block(body, none, 0);
}

/* ---- shuffles and the barrier ---- */

static void butterfly(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	float v = (float)tid;
	for (int m = 16; m >= 1; m /= 2)
		v += rt_simt_shfl_bfly_f32(-1, v, m, 31);
	got[tid][0] = (int64_t)v;
	got[tid][1] = rt_simt_shfl_bfly_i32(-1, (int32_t)tid, 5, 31); /* lane ^ 5 */
}

static int64_t shared_x[256];

static void barrier(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	shared_x[tid] = tid;
	rt_simt_barrier();
	got[tid][0] = shared_x[255 - tid]; /* written by a thread that runs after this one */
}

/* ---- mma.m16n8k16.row.col.f32.bf16.bf16.f32 ---- */

static float A[16][16], Bm[16][8], C[16][8], D[16][8];

static uint32_t bf16_of(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u >> 16; /* the values below are exact in bf16 */
}

static int32_t pair(float lo, float hi) { return (int32_t)(bf16_of(lo) | bf16_of(hi) << 16); }

/* PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type":
 * groupID = laneid >> 2, threadID_in_group = laneid % 4; A's elements a_i:
 * row groupID for i < 2 or 4 <= i < 6, else groupID + 8; column
 * threadID_in_group * 2 + (i & 1) for i < 4, else that + 8. B's b_i: row
 * threadID_in_group * 2 + (i & 1) for i < 2, else that + 8; column groupID.
 * C's and D's c_i: row groupID for i < 2, else groupID + 8; column
 * threadID_in_group * 2 + (i & 1). Two bf16 a register, a_0 in the low half. */
static void mma_body(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	int lane = (int)(tid % 32), gid = lane >> 2, tig = lane % 4;
	float ae[8], be[4], c[4];
	for (int i = 0; i < 8; i++)
		ae[i] = A[(i < 2 || (i >= 4 && i < 6)) ? gid : gid + 8][tig * 2 + (i & 1) + (i < 4 ? 0 : 8)];
	for (int i = 0; i < 4; i++)
		be[i] = Bm[tig * 2 + (i & 1) + (i < 2 ? 0 : 8)][gid];
	for (int i = 0; i < 4; i++)
		c[i] = C[i < 2 ? gid : gid + 8][tig * 2 + (i & 1)];
	rt_simt_mma_bf16(pair(ae[0], ae[1]), pair(ae[2], ae[3]), pair(ae[4], ae[5]), pair(ae[6], ae[7]), pair(be[0], be[1]),
	                 pair(be[2], be[3]), c);
	if (tid < 32) /* every warp computes the same; the first one's D is kept */
		for (int i = 0; i < 4; i++)
			D[i < 2 ? gid : gid + 8][tig * 2 + (i & 1)] = c[i];
}

/* ---- mma.m16n8k8.row.col.f32.tf32.tf32.f32 and cvt.rna.tf32.f32 ---- */

static float At[16][8], Bt[8][8], Ab[16][8], Bb[8][8]; /* the operands, and their TF32 parts */

static int32_t word_of(float x)
{
	int32_t u;
	memcpy(&u, &x, 4);
	return u;
}

/* PTX ISA, "Matrix Fragments for mma.m16n8k8" with .tf32: A's a_i at row
 * groupID for i = 0, 2, else groupID + 8; column threadID_in_group for
 * i < 2, else that + 4. B's b_i at row threadID_in_group (+ 4 for b_1),
 * column groupID. C and D as m16n8k16's. */
static void mma_tf32_body(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	int lane = (int)(tid % 32), gid = lane >> 2, tig = lane % 4;
	int32_t ae[4], be[2];
	float c[4];
	for (int i = 0; i < 4; i++)
		ae[i] = word_of(At[(i % 2) ? gid + 8 : gid][tig + (i < 2 ? 0 : 4)]);
	for (int i = 0; i < 2; i++)
		be[i] = word_of(Bt[tig + 4 * i][gid]);
	for (int i = 0; i < 4; i++)
		c[i] = C[i < 2 ? gid : gid + 8][tig * 2 + (i & 1)];
	rt_simt_mma_tf32(ae[0], ae[1], ae[2], ae[3], be[0], be[1], c);
	if (tid < 32)
		for (int i = 0; i < 4; i++)
			D[i < 2 ? gid : gid + 8][tig * 2 + (i & 1)] = c[i];
}

/* ---- ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 ---- */

static _Alignas(16) uint16_t M[16][24]; /* a 16 x 16 block, rows 48 bytes apart */
static int trans;

/* matrix i is rows 8 (i & 1).. and columns 8 (i >> 1).. of M; lanes 8i to
 * 8i + 7 give its rows' addresses */
static void ldm_body(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	int lane = (int)(tid % 32), i = lane / 8, r = lane % 8;
	int32_t d[4];
	rt_simt_ldmatrix_x4(&M[8 * (i & 1) + r][8 * (i >> 1)], trans, d);
	for (int k = 0; k < 4; k++)
		got[tid][k] = (uint32_t)d[k];
}

/* ---- cp.async ---- */

static _Alignas(16) char src[2][16], dst[2][16];

static void async_body(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	if (tid == 0) {
		rt_simt_cp_async16(dst[0], src[0]);
		rt_simt_cp_commit();
		rt_simt_cp_async16(dst[1], src[1]);
		rt_simt_cp_commit();
		got[0][0] = dst[0][0], got[0][1] = dst[1][0]; /* nothing waited for: nothing copied */
		rt_simt_cp_wait(1);
		got[0][2] = dst[0][0], got[0][3] = dst[1][0]; /* the older group only */
		rt_simt_cp_wait(0);
		got[0][4] = dst[0][0], got[0][5] = dst[1][0];
	}
}

/* ---- errors ---- */

static void divergent(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int64_t tid = rt_simt_tid();
	if (tid % 32 == 1)
		rt_simt_barrier();
	else
		rt_simt_shfl_bfly_f32(-1, 1, 1, 31);
}

static void lane_gone(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	if (rt_simt_tid() % 32 != 31)
		rt_simt_shfl_bfly_f32(-1, 1, 1, 31);
}

static void half_barrier(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	if (rt_simt_tid() < 128)
		rt_simt_barrier();
}

static void copies_left(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	rt_simt_cp_async16(dst[0], src[0]);
}

static void misaligned(const uint64_t *a, int64_t item)
{
	(void)a, (void)item;
	int32_t d[4];
	rt_simt_ldmatrix_x4(&M[0][1], 0, d);
}

/* body run in a child process: it exits with status 70 and stderr holding want */
static bool fails_with(void (*body)(const uint64_t *, int64_t), const char *want)
{
	int fd[2];
	if (pipe(fd))
		return false;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		rt_simt_block(body, none, 0);
		_exit(0);
	}
	close(fd[1]);
	char buf[1024];
	ssize_t n = read(fd[0], buf, sizeof buf - 1), more;
	while (n >= 0 && n < (ssize_t)sizeof buf - 1 && (more = read(fd[0], buf + n, sizeof buf - 1 - (size_t)n)) > 0)
		n += more;
	close(fd[0]);
	int st;
	waitpid(pid, &st, 0);
	buf[n > 0 ? n : 0] = 0;
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 70 && strstr(buf, want);
	if (!ok)
		printf("# wanted \"%s\", got status %d: %s\n", want, WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf);
	return ok;
}

int main(void)
{
	group = "simt";
	run(butterfly);
	bool ok = true, ok2 = true;
	for (int t = 0; t < 256; t++) {
		int64_t w = t / 32 * 32, sum = 32 * w + 31 * 32 / 2;
		ok &= got[t][0] == sum;
		ok2 &= got[t][1] == (t ^ 5);
	}
	t(ok, "shfl.sync.bfly: five butterflies sum each warp's lanes, in every lane");
	t(ok2, "shfl.sync.bfly: lane l reads lane l ^ 5");

	memset(shared_x, -1, sizeof shared_x);
	run(barrier);
	ok = true;
	for (int t = 0; t < 256; t++)
		ok &= got[t][0] == 255 - t;
	t(ok, "bar.sync: each thread reads what the thread across the block wrote before it");

	srand(7);
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			A[r][c] = (float)(rand() % 17 - 8) / 4;
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 8; c++)
			Bm[r][c] = (float)(rand() % 17 - 8) / 8, C[r][c] = (float)(rand() % 101 - 50) / 16;
	run(mma_body);
	ok = true;
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 8; c++) {
			float s = C[r][c];
			for (int k = 0; k < 16; k++)
				s += A[r][k] * Bm[k][c]; /* small multiples of 1/32: exact */
			ok &= D[r][c] == s;
		}
	t(ok, "mma.m16n8k16 bf16: D = A B + C from the ISA's fragments, exactly");

	/* TF32 operands with bits below TF32's 10 of fraction set, which the product ignores */
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 8; c++)
			Ab[r][c] = (float)(rand() % 17 - 8) / 4, At[r][c] = Ab[r][c] * (1 + 0x1p-20f);
	for (int r = 0; r < 8; r++)
		for (int c = 0; c < 8; c++)
			Bb[r][c] = (float)(rand() % 17 - 8) / 8, Bt[r][c] = Bb[r][c] * (1 + 0x1p-16f);
	run(mma_tf32_body);
	ok = true;
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 8; c++) {
			float s = C[r][c];
			for (int k = 0; k < 8; k++)
				s += Ab[r][k] * Bb[k][c]; /* the operands' TF32 parts, small multiples: exact */
			ok &= D[r][c] == s;
		}
	t(ok, "mma.m16n8k8 tf32: D = A B + C from the ISA's fragments, the operands' low 13 bits ignored");

	/* cvt.rna.tf32.f32: to nearest, ties away from zero; the infinities kept, a NaN a NaN */
	/* (a TF32 step above 1 is 2^-10: 2^-11 is half of it) */
	float in[] = {1.0f, 1 + 0x1p-11f, 1 + 0x1p-11f - 0x1p-20f, 1 + 0x1p-11f + 0x1p-20f, 1 + 0x1p-10f + 0x1p-11f,
	              -(1 + 0x1p-11f), -(1 + 0x1p-12f), 0x1.fffffep127f, 1.0f / 0.0f, -1.0f / 0.0f};
	float want[] = {1.0f, 1 + 0x1p-10f, 1.0f, 1 + 0x1p-10f, 1 + 0x1p-9f, -(1 + 0x1p-10f), -1.0f, 1.0f / 0.0f,
	                1.0f / 0.0f, -1.0f / 0.0f};
	ok = true;
	for (size_t i = 0; i < sizeof in / sizeof *in; i++)
		ok &= rt_simt_f2tf32_rna(in[i]) == word_of(want[i]);
	uint32_t nan = (uint32_t)rt_simt_f2tf32_rna(0.0f / 0.0f);
	ok &= (nan & 0x7f800000u) == 0x7f800000u && (nan & 0x7fe000u) != 0 && (nan & 0x1fffu) == 0;
	t(ok, "cvt.rna.tf32.f32: 10 bits of fraction, to nearest with ties away from zero; infinities, NaN");

	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			M[r][c] = (uint16_t)(r * 16 + c);
	for (trans = 0; trans < 2; trans++) {
		run(ldm_body);
		ok = true;
		for (int t = 0; t < 256; t++) {
			int lane = t % 32;
			for (int i = 0; i < 4; i++) {
				/* thread lane holds row lane / 4, columns 2 (lane % 4) and the next, of matrix i
				 * (.trans: of its transpose) */
				int r0 = 8 * (i & 1), c0 = 8 * (i >> 1), e[2];
				for (int h = 0; h < 2; h++)
					e[h] = trans ? M[r0 + 2 * (lane % 4) + h][c0 + lane / 4] : M[r0 + lane / 4][c0 + 2 * (lane % 4) + h];
				ok &= got[t][i] == (int64_t)((uint32_t)e[0] | (uint32_t)e[1] << 16);
			}
		}
		t(ok, trans ? "ldmatrix.x4.trans: each lane's words of the four transposed matrices"
		                : "ldmatrix.x4: each lane's words of the four matrices");
	}

	memset(src[0], 1, 16), memset(src[1], 2, 16);
	run(async_body);
	t(got[0][0] == 0 && got[0][1] == 0 && got[0][2] == 1 && got[0][3] == 0 && got[0][4] == 1 && got[0][5] == 2,
	      "cp.async: made at the wait for its group, the newest n left by wait_group n");

	t(fails_with(divergent, "cannot go on: 8 threads at a barrier, 248 at warp collectives"),
	      "a warp whose lanes meet different collectives stops with a message");
	t(fails_with(lane_gone, "31 lanes at shfl.sync.bfly while 1 have finished"),
	      "a shuffle that a finished lane should take part in stops with a message");
	t(fails_with(half_barrier, "128 threads at a barrier while 128 have finished"),
	      "a barrier half the block never reaches stops with a message");
	t(fails_with(copies_left, "ended with 1 cp.async copies not waited for"),
	      "a thread that ends with copies outstanding stops with a message");
	t(fails_with(misaligned, "not 16-byte aligned"), "a misaligned ldmatrix row stops with a message");
	printf("%d passed, %d failed\n", pass, fail);
	return fail != 0;
}
