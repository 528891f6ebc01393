/* rt: the streamed parameters' optimizer, on the host. A streamed layer's
 * master copy and optimizer state live in the host pool and never cross the
 * link: each reverse step's rt_update (stream.c) copies its unit's gradient
 * down, and queues a job here that, once the copy is done, adds it to the
 * step's sum (--accum) and applies the optimizer's step to the unit
 * (host_step.c), writing the compute copy the next fetch takes. One thread
 * works through the jobs in order, with helpers for large units; the jobs
 * run beside the reverse sweep of the layers below. A fetch of a unit, or
 * a gradient copied down over one, first waits for the last job that
 * touched it (rt_host_ready). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

typedef struct {
	RtHostStep s;
	int64_t n;      /* elements */
	int64_t event;  /* the copy down of the gradient it reads (0: none) */
} Job;

enum { QUEUE = 1024, MIN_PART = 1 << 16 };

static struct {
	pthread_mutex_t mu;
	pthread_cond_t more, finished;
	Job q[QUEUE];
	int64_t issued, done;     /* jobs queued and done; a job's number is issued after it is queued */
	bool running;
	const RtDevice *dev;
	int threads;
	int64_t *last[RT_MAX_PARAMS]; /* per unit of each streamed parameter: the last job that touches it */
	double busy;              /* seconds the jobs took */
} hq = {.mu = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER, .finished = PTHREAD_COND_INITIALIZER};

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- helpers: a large unit's elements in parts, one part a thread ---- */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t go, fin;
	int64_t round;            /* rounds posted */
	int left;                 /* helpers still at the current round */
	int parts, helpers;
	const Job *job;
} team = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .fin = PTHREAD_COND_INITIALIZER};

static void run_part(const Job *j, int part, int parts)
{
	rt_host_step(&j->s, j->n * part / parts, j->n * (part + 1) / parts);
}

static void *helper(void *arg)
{
	int t = (int)(intptr_t)arg;
	int64_t seen = 0;
	pthread_mutex_lock(&team.mu);
	for (;;) {
		while (team.round == seen)
			pthread_cond_wait(&team.go, &team.mu);
		seen = team.round;
		const Job *j = team.job;
		int parts = team.parts;
		pthread_mutex_unlock(&team.mu);
		if (t < parts)
			run_part(j, t, parts);
		pthread_mutex_lock(&team.mu);
		if (--team.left == 0)
			pthread_cond_signal(&team.fin);
	}
	return NULL;
}

static void run_job(const Job *j)
{
	int parts = (int)(j->n / MIN_PART);
	parts = parts < hq.threads ? parts : hq.threads;
	while (team.helpers < parts - 1) {
		pthread_t t;
		if (pthread_create(&t, NULL, helper, (void *)(intptr_t)(team.helpers + 1)) != 0)
			break;
		pthread_detach(t);
		team.helpers++;
	}
	parts = parts < team.helpers + 1 ? parts : team.helpers + 1;
	if (parts <= 1) {
		rt_host_step(&j->s, 0, j->n);
		return;
	}
	pthread_mutex_lock(&team.mu);
	team.job = j;
	team.parts = parts;
	team.left = team.helpers;
	team.round++;
	pthread_cond_broadcast(&team.go);
	pthread_mutex_unlock(&team.mu);
	run_part(j, 0, parts);
	pthread_mutex_lock(&team.mu);
	while (team.left > 0)
		pthread_cond_wait(&team.fin, &team.mu);
	pthread_mutex_unlock(&team.mu);
}

static void *updater(void *arg)
{
	(void)arg;
	if (hq.dev->thread_init)
		hq.dev->thread_init();
	pthread_mutex_lock(&hq.mu);
	for (;;) {
		while (hq.done == hq.issued)
			pthread_cond_wait(&hq.more, &hq.mu);
		Job j = hq.q[hq.done % QUEUE];
		pthread_mutex_unlock(&hq.mu);
		if (j.event)
			hq.dev->copy_sync(j.event);
		double t0 = seconds();
		run_job(&j);
		double t1 = seconds();
		pthread_mutex_lock(&hq.mu);
		hq.busy += t1 - t0;
		__atomic_store_n(&hq.done, hq.done + 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&hq.finished);
	}
	return NULL;
}

void rt_host_init(RtCtx *c, int threads)
{
	const RtModel *m = c->model;
	hq.dev = c->dev;
	hq.threads = threads < 1 ? 1 : threads;
	for (int i = 0; i < m->nparams; i++)
		if (m->params[i].streamed && !m->params[i].buffer)
			hq.last[i] = rt_host_alloc((int64_t)sizeof(int64_t) * (m->params[i].dim[0] + 1), "the host update's table");
	for (int i = 0; i < m->nparams; i++)
		if (hq.last[i])
			memset(hq.last[i], 0, sizeof(int64_t) * (size_t)m->params[i].dim[0]);
}

/* waits until job number n is done */
static void wait_done(int64_t n)
{
	if (__atomic_load_n(&hq.done, __ATOMIC_ACQUIRE) >= n)
		return;
	pthread_mutex_lock(&hq.mu);
	while (hq.done < n)
		pthread_cond_wait(&hq.finished, &hq.mu);
	pthread_mutex_unlock(&hq.mu);
}

void rt_host_ready(int param, int64_t u)
{
	if (hq.last[param])
		wait_done(hq.last[param][u]);
}

void rt_host_drain(void)
{
	pthread_mutex_lock(&hq.mu);
	int64_t n = hq.issued;
	pthread_mutex_unlock(&hq.mu);
	wait_done(n);
}

double rt_host_busy(void)
{
	pthread_mutex_lock(&hq.mu);
	double b = hq.busy;
	pthread_mutex_unlock(&hq.mu);
	return b;
}

void rt_host_post(int param, int64_t u, const RtHostStep *s, int64_t n, int64_t event)
{
	pthread_mutex_lock(&hq.mu);
	if (!hq.running) {
		pthread_t t;
		if (pthread_create(&t, NULL, updater, NULL) != 0)
			rt_fail(1, "cannot start the thread that updates the streamed parameters");
		pthread_detach(t);
		hq.running = true;
	}
	while (hq.issued - hq.done == QUEUE)
		pthread_cond_wait(&hq.finished, &hq.mu);
	hq.q[hq.issued % QUEUE] = (Job){*s, n, event};
	hq.issued++;
	hq.last[param][u] = hq.issued;
	pthread_cond_signal(&hq.more);
	pthread_mutex_unlock(&hq.mu);
}

void rt_host_finish(const RtModel *m)
{
	rt_host_drain();
	for (int i = 0; i < m->nparams; i++)
		free(hq.last[i]), hq.last[i] = NULL;
}
