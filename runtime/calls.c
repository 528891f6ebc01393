/* rt: the calls generated code makes (dprt.h): kernels, GEMMs,
 * convolutions, attention, copies, counters and keys, each timed for
 * --profile and --trace when the step is recorded; and the revolve
 * runner, which walks a binomial schedule's actions for rt_revolve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/revolve.h"
#include "../common/rng.h"
#include "rt.h"

uint64_t rt_base(RtCtx *c) { return c->base; }

void rt_phase(RtCtx *c, int phase)
{
	if (c->record)
		rt_prof_mark(c, RT_CALL_PHASE, phase == RT_PHASE_FORWARD ? "forward" : "backward");
}

void rt_launch(RtCtx *c, int kernel, int64_t n, int nargs, const uint64_t *args)
{
	c->n.launches++;
	if (n <= 0)
		return;
	if (c->record) {
		rt_prof_begin(c, RT_CALL_KERNEL, kernel < c->model->nkname ? c->model->kname[kernel] : "kernel");
		rt_prof_predicted(kernel >= 0 && kernel < c->model->nkname ? c->model->kpred[kernel] : 0);
	}
	int64_t w = kernel >= 0 && kernel < c->model->nkname ? c->model->kwork[kernel] : 1, work;
	if (__builtin_mul_overflow(n, w, &work))
		work = INT64_MAX;
	c->dev->launch(kernel, n, work, nargs, args);
	if (c->record)
		rt_prof_end(c);
}

void rt_gemm(RtCtx *c, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda, int64_t sa,
             uint64_t b, int64_t ldb, int64_t sb, uint64_t cc, int64_t ldc, int64_t sc, int64_t batch, double beta)
{
	c->n.gemms++;
	if (c->record) {
		char label[64];
		snprintf(label, sizeof label, "gemm%s%s [%lld x %lld x %lld]%s%s", ta ? " A^T" : "", tb ? " B^T" : "",
		         (long long)m, (long long)n, (long long)k, batch > 1 ? " batched" : "", beta != 0 ? " +=" : "");
		rt_prof_begin(c, RT_CALL_GEMM, label);
	}
	c->dev->gemm(elem_bytes, ta, tb, m, n, k, a, lda, sa, b, ldb, sb, cc, ldc, sc, batch, beta);
	if (c->record)
		rt_prof_end(c);
}

int rt_gemm_ep(RtCtx *c, int epi, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
               uint64_t b, int64_t ldb, uint64_t cc, int64_t ldc, double beta, uint64_t bias, uint64_t aux, int64_t ldaux)
{
	static const char *const names[] = RT_EP_NAMES;
	if (!c->dev->gemm_ep)
		return 0;
	if (c->record) {
		char label[80];
		snprintf(label, sizeof label, "gemm%s%s%s [%lld x %lld x %lld]%s", names[epi], ta ? " A^T" : "", tb ? " B^T" : "",
		         (long long)m, (long long)n, (long long)k, beta != 0 ? " +=" : "");
		rt_prof_begin(c, RT_CALL_GEMM, label);
	}
	int done = c->dev->gemm_ep(epi, elem_bytes, ta, tb, m, n, k, a, lda, b, ldb, cc, ldc, beta, bias, aux, ldaux);
	if (c->record && done) /* not done: the entry begun is the next call's to fill */
		rt_prof_end(c);
	c->n.gemms += done;
	return done;
}

void rt_gemm_items(RtCtx *c, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
                   int64_t sa, int64_t oa, uint64_t b, int64_t ldb, int64_t sb, int64_t ob, uint64_t cc, int64_t ldc,
                   int64_t sc, int64_t oc, int64_t batch, int64_t items, double beta)
{
	if (items == 1 || !c->dev->gemm_items) {
		int64_t eb = elem_bytes == RT_GEMM_BF16_F32 ? 2 : elem_bytes, cb = elem_bytes == RT_GEMM_BF16_F32 ? 4 : elem_bytes;
		for (int64_t i = 0; i < items; i++)
			rt_gemm(c, elem_bytes, ta, tb, m, n, k, a + (uint64_t)(i * oa * eb), lda, sa, b + (uint64_t)(i * ob * eb), ldb, sb,
			        cc + (uint64_t)(i * oc * cb), ldc, sc, batch, beta);
		return;
	}
	c->n.gemms++;
	if (c->record) {
		char label[80];
		snprintf(label, sizeof label, "gemm%s%s [%lld x %lld x %lld] batched x %lld%s", ta ? " A^T" : "", tb ? " B^T" : "",
		         (long long)m, (long long)n, (long long)k, (long long)items, beta != 0 ? " +=" : "");
		rt_prof_begin(c, RT_CALL_GEMM, label);
	}
	c->dev->gemm_items(elem_bytes, ta, tb, m, n, k, a, lda, sa, oa, b, ldb, sb, ob, cc, ldc, sc, oc, batch, items, beta);
	if (c->record)
		rt_prof_end(c);
}

void rt_conv(RtCtx *c, int kind, int elem_bytes, const int64_t *d, uint64_t x, uint64_t w, uint64_t y, uint64_t ws,
             int64_t ws_bytes)
{
	static const char *name[3] = {"conv2d", "conv2d_dx", "conv2d_dw"};
	if (kind < 0 || kind > 2)
		rt_fail(70, "internal error: convolution kind %d", kind);
	c->n.convs++;
	if (c->record) {
		char label[128];
		snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld] -> [%lld,%lld,%lld,%lld] %lldx%lld/%lld", name[kind],
		         (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3], (long long)d[0], (long long)d[4],
		         (long long)d[5], (long long)d[6], (long long)d[7], (long long)d[8], (long long)d[9]);
		rt_prof_begin(c, RT_CALL_GEMM, label);
	}
	c->dev->conv(kind, elem_bytes, d, x, w, y, ws, ws_bytes);
	if (c->record)
		rt_prof_end(c);
}

void rt_attention(RtCtx *c, int kind, int elem_bytes, const int64_t *d, const uint64_t *in, uint64_t out)
{
	static const char *name[5] = {"attention", "attn_stats", "attn_dq", "attn_dk", "attn_dv"};
	if (kind < 0 || kind > 4 || !c->dev->attention)
		rt_fail(70, "internal error: attention kind %d on the %s device", kind, c->dev->name);
	c->n.attentions++;
	if (c->record) {
		char label[128];
		snprintf(label, sizeof label, "%s [%lld,%lld,%lld] heads %lld%s", name[kind], (long long)d[0], (long long)d[1],
		         (long long)d[2], (long long)d[3], d[4] ? " causal" : "");
		rt_prof_begin(c, RT_CALL_GEMM, label);
	}
	c->dev->attention(kind, elem_bytes, d, in, out);
	if (c->record)
		rt_prof_end(c);
}

void rt_copy(RtCtx *c, uint64_t dst, uint64_t src, int64_t bytes)
{
	if (dst == src)
		return;
	c->n.copies++;
	if (c->record)
		rt_prof_begin(c, RT_CALL_COPY_D2D, "copy");
	c->dev->d2d(dst, src, bytes);
	if (c->record)
		rt_prof_end(c);
}

void rt_zero(RtCtx *c, uint64_t dst, int64_t bytes)
{
	/* --accum: the gradients' region keeps what the earlier micro-batches added */
	uint64_t grads = c->base + (uint64_t)c->model->plan_params;
	if (c->accumulating && dst >= grads && dst < grads + (uint64_t)c->model->plan_grads)
		return;
	if (c->record)
		rt_prof_begin(c, RT_CALL_ZERO, "zero");
	c->dev->zero(dst, bytes);
	if (c->record)
		rt_prof_end(c);
}

void rt_count(RtCtx *c, int counter, int64_t n)
{
	if (counter == RT_COUNT_FLOPS)
		c->n.recomputed_flops += n;
	else
		c->n.steps[counter & 1] += n;
}
uint64_t rt_key(RtCtx *c)
{
	c->no_graph = "dropout draws a new key each step";
	return dp_step_key(c->seed, c->draw ? c->draw : (uint64_t)c->step);
}
uint64_t rt_training(RtCtx *c) { return !c->eval; }

typedef struct {
	RevAction a;
	int64_t step, to;
	int slot;
} Action;

/* The binomial schedule's driver. Slots below nhost live in the host pool
 * and pass through the staging row of the device's snapshots, which holds
 * the host slot last saved or fetched (held). One action of lookahead lets a
 * restore's fetch run on the copy stream while the action before it
 * computes. rev_binomial_host counts the same copies at compile time. */
typedef struct {
	RtCtx *c;
	int64_t lo, nhost, stage, held, k;
	int64_t flops, taped_flops; /* of one step, and what a taped step computes again, as dpc counts them */
	void (*advance)(RtCtx *, int64_t, int64_t);
	void (*taped)(RtCtx *, int64_t, int64_t); /* step i's taped step and adjoint; with a tape, its adjoint from row */
	void (*tape)(RtCtx *, int64_t, int64_t);  /* with a tape: forward step i taped into row */
	void (*snapshot)(RtCtx *, int64_t, int);
	void (*offload)(RtCtx *, int64_t, int);
	bool pending;
	Action next; /* the action the schedule gave last, not yet run */
	/* a fused kernel (>= 0) runs the actions instead, RT_ACTIONS at a launch */
	int kernel;
	int64_t threads, count;
	uint64_t *words;
	int buf;     /* which of c->actions words is */
	void (*replay)(RtCtx *, int64_t, int64_t);
	int64_t replay_flops;
} Revolve;

static uint64_t *action_words(RtCtx *c)
{
	uint64_t *w = c->dev->host_alloc(RT_ACTIONS * (int64_t)sizeof(uint64_t));
	if (!w)
		rt_fail(1, "cannot allocate %lld bytes of host memory for a fused loop's actions",
		        (long long)(RT_ACTIONS * sizeof(uint64_t)));
	return w;
}

/* a chunk of its own for a graph being captured, which reads it at each replay */
static uint64_t *kept_words(RtCtx *c)
{
	c->kept = rt_host_grow(c->kept, (int64_t)sizeof *c->kept * (c->nkept + 1), "a captured graph");
	return c->kept[c->nkept++] = action_words(c);
}

/* Launches the fused kernel on the actions gathered, then gathers into the
 * other buffer once the device has read it (fence RT_FENCE_ACTIONS + i);
 * under capture, into a new one. */
static void flush_actions(Revolve *r)
{
	RtCtx *c = r->c;
	if (!r->count)
		return;
	uint64_t args[3] = {c->base, (uint64_t)(uintptr_t)r->words, (uint64_t)r->count};
	rt_launch(c, r->kernel, r->threads, 3, args);
	r->count = 0;
	if (c->capturing) {
		r->words = NULL; /* the next action takes a new chunk */
		return;
	}
	c->dev->fence(RT_FENCE_ACTIONS + r->buf);
	r->buf ^= 1;
	r->words = c->actions[r->buf];
	c->dev->fence_wait(RT_FENCE_ACTIONS + r->buf);
}

/* the action word the fused kernel reads (compiler/codegen/host.c, dev_revolve) */
static void put_action(Revolve *r, RevAction a, int64_t step, int64_t field)
{
	if (!r->words)
		r->words = kept_words(r->c);
	r->words[r->count++] = RT_ACTION_WORD(a, field, step);
	if (r->count == RT_ACTIONS)
		flush_actions(r);
}

static void fetch_host(Revolve *r, int slot)
{
	r->offload(r->c, slot, 1);
	r->held = slot;
}

static void run_action(Revolve *r, Action x)
{
	RtCtx *c = r->c;
	int slot = x.slot;
	if (c->record && r->kernel < 0 && (x.a == REV_ADVANCE || x.a == REV_TAPED || x.a == REV_UNTAPE))
		rt_prof_mark(c, RT_CALL_PHASE, x.a == REV_ADVANCE ? "advance" : x.a == REV_TAPED ? "taped step" : "adjoint");
	if (r->kernel >= 0) {
		bool slots = x.a == REV_SAVE || x.a == REV_RESTORE;
		put_action(r, x.a, slots ? 0 : x.step, slots ? slot : x.to - x.step);
		int64_t n = slots ? 0 : x.to - x.step;
		if (x.a == REV_ADVANCE || (x.a == REV_TAPED && r->k))
			c->n.steps[RT_COUNT_RECOMPUTED] += n, c->n.recomputed_flops += n * r->flops;
		if (x.a == REV_TAPED || x.a == REV_UNTAPE)
			c->n.recomputed_flops += n * r->taped_flops;
		return;
	}
	switch (x.a) {
	case REV_ADVANCE:
		r->advance(c, r->lo + x.step, r->lo + x.to);
		c->n.steps[RT_COUNT_RECOMPUTED] += x.to - x.step;
		c->n.recomputed_flops += (x.to - x.step) * r->flops;
		break;
	case REV_SAVE:
		if (slot >= r->nhost) {
			r->snapshot(c, slot - r->nhost, 0);
			break;
		}
		/* the staging row's last copy must be done before the state overwrites it */
		if (c->snap_event)
			c->dev->copy_wait(c->snap_event);
		r->snapshot(c, r->stage, 0);
		r->offload(c, slot, 0);
		r->held = slot;
		break;
	case REV_RESTORE:
		if (slot >= r->nhost) {
			r->snapshot(c, slot - r->nhost, 1);
			break;
		}
		if (r->held != slot)
			fetch_host(r, slot);
		c->dev->copy_wait(c->snap_event);
		r->snapshot(c, r->stage, 1);
		break;
	case REV_TAPED:
		if (!r->k) {
			r->taped(c, r->lo + x.step, 0);
			c->n.recomputed_flops += r->taped_flops;
			break;
		}
		for (int64_t i = x.step; i < x.to; i++)
			r->tape(c, r->lo + i, i - x.step);
		c->n.steps[RT_COUNT_RECOMPUTED] += x.to - x.step;
		c->n.recomputed_flops += (x.to - x.step) * r->flops;
		if (c->record)
			rt_prof_mark(c, RT_CALL_PHASE, "adjoint");
		/* then the adjoints from the rows, as for the steps the forward loop taped */
		/* fall through */
	case REV_UNTAPE:
		c->n.recomputed_flops += (x.to - x.step) * r->taped_flops;
		for (int64_t i = x.to - 1; i >= x.step; i--) {
			if (r->replay) {
				/* the state of step i again, from the run's first */
				r->replay(c, r->lo + x.step, -1);
				for (int64_t j = x.step; j < i; j++)
					r->replay(c, r->lo + j, j - x.step);
				c->n.recomputed_flops += (i - x.step) * r->replay_flops;
			}
			r->taped(c, r->lo + i, i - x.step);
		}
		break;
	}
}

static void revolve_action(void *ctx, RevAction a, int64_t step, int64_t to, int slot)
{
	Revolve *r = ctx;
	/* fetch ahead, unless the action before is a save into the staging row */
	if (a == REV_RESTORE && slot < r->nhost && r->held != slot && r->pending &&
	    !(r->next.a == REV_SAVE && r->next.slot < r->nhost))
		fetch_host(r, slot);
	if (r->pending)
		run_action(r, r->next);
	r->pending = true;
	r->next = (Action){a, step, to, slot};
}

void rt_revolve(RtCtx *c, int64_t n, int64_t s, int64_t nhost, int64_t lo, int sweep, int64_t k, int64_t flops,
                int64_t taped_flops, void (*advance)(RtCtx *, int64_t, int64_t), void (*taped)(RtCtx *, int64_t, int64_t),
                void (*tape)(RtCtx *, int64_t, int64_t), void (*snapshot)(RtCtx *, int64_t, int),
                void (*offload)(RtCtx *, int64_t, int), const int32_t *pool, int kernel, int64_t threads,
                void (*replay)(RtCtx *, int64_t, int64_t), int64_t replay_flops)
{
	Revolve r = {c, lo, nhost, s - nhost, -1, k, flops, taped_flops, advance, taped, tape, snapshot, offload, false,
	             {REV_SAVE, 0, 0, 0}, kernel, threads, 0, NULL, 0, replay, replay_flops};
	if (kernel >= 0 && nhost)
		rt_fail(70, "internal error: a fused revolve with snapshots in host memory");
	if (replay && (kernel >= 0 || nhost || pool || !k))
		rt_fail(70, "internal error: a replayed state in a fused, pooled or host-slotted revolve, or one without rows");
	if (c->record && r.kernel >= 0)
		rt_prof_mark(c, RT_CALL_PHASE, "schedule, fused (advances, taped steps, adjoints)");
	if (r.kernel >= 0 && !c->capturing) {
		for (int i = 0; i < 2; i++)
			if (!c->actions[i])
				c->actions[i] = action_words(c);
		c->dev->fence_wait(RT_FENCE_ACTIONS);
		r.words = c->actions[0];
	}
	/* the initial state into slot 0; under the sweep the forward loop saved it, and the other segments' starts */
	if (!sweep)
		run_action(&r, r.next);
	if (pool) {
		RevPool plan = {.n = n, .k = k, .choice = (int32_t *)pool};
		rev_pool_schedule(&plan, revolve_action, &r);
	} else {
		rev_schedule(n, s, k ? k : 1, sweep, sweep && k ? rev_sweep_tail(n, k) : 0, revolve_action, &r);
	}
	if (r.pending)
		run_action(&r, r.next);
	if (r.kernel >= 0)
		flush_actions(&r);
	if (c->record)
		rt_prof_mark(c, RT_CALL_PHASE, "backward");
}

uint64_t rt_device_alloc(RtCtx *c, int64_t bytes)
{
	uint64_t a = c->dev->alloc(bytes > 0 ? bytes : 1);
	if (!a)
		rt_fail(1, "cannot allocate %lld bytes of %s device memory", (long long)bytes, c->dev->name);
	c->n.device_bytes += bytes;
	if (c->n.device_bytes > c->n.peak_device_bytes)
		c->n.peak_device_bytes = c->n.device_bytes;
	return a;
}

void rt_h2d(RtCtx *c, uint64_t dst, const void *src, int64_t bytes)
{
	c->n.h2d_bytes += bytes;
	c->dev->h2d(dst, src, bytes);
}

void rt_d2h(RtCtx *c, void *dst, uint64_t src, int64_t bytes)
{
	c->n.d2h_bytes += bytes;
	c->dev->d2h(dst, src, bytes);
}
