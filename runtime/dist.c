/* rt: data parallelism over MPI. Under mpirun (Open MPI, which tells each
 * process its place in OMPI_COMM_WORLD_SIZE and _RANK) every process is one
 * rank: it trains on its own part of each global batch, the gradients are
 * summed across the ranks before each update, and every rank applies the
 * same update. libmpi is opened at run time, when mpirun started the
 * process, so a single process needs no MPI at all. Open MPI's handles are
 * the addresses of its predefined objects (mpi.h's MPI_COMM_WORLD is
 * &ompi_mpi_comm_world), and MPI_IN_PLACE is (void *)1.
 *
 * Nothing waits forever. MPI has no deadline on a collective, and a link
 * that goes down mid-run leaves every rank waiting in one (TCP notices
 * only after many minutes, if at all). So each collective is started
 * non-blocking and tested until it is done or its deadline passes
 * (--collective-timeout); then the rank says what it waited in and for
 * whom, and ends the job through MPI_Abort, or by itself where that cannot
 * reach mpirun. To name whom it waited for, a rank that has waited a
 * second tells every other rank the number of the collective it waits in
 * (a note): the ranks it has heard from are waiting with it, the others
 * never came. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

int rt_rank, rt_nranks = 1;
bool rt_distributed;
long rt_dist_step;

typedef void *Handle;
static struct {
	void *lib;
	int (*init_thread)(int *, char ***, int, int *);
	int (*finalize)(void);
	int (*abort)(Handle, int);
	int (*iallreduce)(const void *, void *, int, Handle, Handle, Handle, Handle *);
	int (*ibcast)(void *, int, Handle, int, Handle, Handle *);
	int (*iallgatherv)(const void *, int, Handle, void *, const int *, const int *, Handle, Handle, Handle *);
	int (*isend)(const void *, int, Handle, int, int, Handle, Handle *);
	int (*irecv)(void *, int, Handle, int, int, Handle, Handle *);
	int (*test)(Handle *, int *, void *);
	int (*cancel)(Handle *);
	int (*wait)(Handle *, void *);
	int (*request_free)(Handle *);
	int (*comm_dup)(Handle, Handle *);
	int (*comm_free)(Handle *);
	int (*rank)(Handle, int *);
	int (*size)(Handle, int *);
	Handle world, notes, request_null, f32, f64, u64, u16, i32, byte, sum, min, max;
} mpi;

#define IN_PLACE ((void *)1)

/* every MPI call is checked, naming the call and where it was made */
#define MPI(call)                                                                                                        \
	do {                                                                                                                 \
		int rc_ = (call);                                                                                                \
		if (rc_ != 0)                                                                                                    \
			rt_fail(1, "%s:%d: %s failed (MPI error %d)", __FILE__, __LINE__, #call, rc_);                               \
	} while (0)

static void *sym(const char *name)
{
	void *p = dlsym(mpi.lib, name);
	if (!p)
		rt_fail(1, "mpirun started this process, but %s has no %s: dpc's executables speak Open MPI's ABI "
		        "(Debian's openmpi-bin)", "libmpi.so.40", name);
	return p;
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- each rank's host, its cores and the deadlines ---- */

typedef struct {
	char host[64];
	char bound[64];      /* those cores, as ranges: "0-3,8" */
	int32_t cores;       /* the cores its affinity mask allows */
	int32_t online;      /* the cores the process that started it may use: the host's, as far as the job goes */
	int32_t local;       /* the ranks mpirun started on its host */
	int32_t pad;
} Peer;

static Peer *peers;      /* every rank's, after the start-up handshake */
static double timeout = RT_COLLECTIVE_TIMEOUT, startup = RT_STARTUP_TIMEOUT;
static bool started;     /* the handshake is done: collectives take --collective-timeout */

const char *rt_dist_host(int rank) { return peers ? peers[rank].host : "?"; }

void rt_dist_where(char *buf, size_t size)
{
	const Peer *p = &peers[rt_rank];
	snprintf(buf, size, " rank %d on %s, bound to core%s %s (%d of its %d, %d rank%s there)", rt_rank, p->host,
	         p->cores == 1 ? "" : "s", p->bound, p->cores, p->online, p->local, p->local == 1 ? "" : "s");
}

/* A rank bound to fewer cores than its host's share runs fewer threads than it could: Open MPI binds each
 * rank to one core when it starts two ranks or fewer on a host (and to a socket above), across hosts too */
void rt_dist_warn_binding(const char *model)
{
	int n = 0, first = -1;
	for (int r = 0; r < rt_nranks; r++) {
		const Peer *p = &peers[r];
		if (p->cores < p->online / (p->local > 0 ? p->local : 1))
			n++, first = first < 0 ? r : first;
	}
	if (rt_rank != 0 || !n)
		return;
	const Peer *p = &peers[first];
	int share = p->online / (p->local > 0 ? p->local : 1);
	fprintf(stderr,
	        "%s: warning: %d of the %d ranks run on fewer cores than their host's share: rank %d on %s may use %d of its "
	        "%d cores, with %d rank%s there (%d each); mpirun --bind-to none, or --map-by slot:pe=%d, lets each rank use "
	        "its share (docs/distributed.md)\n",
	        model, n, rt_nranks, first, p->host, p->cores, p->online, p->local, p->local == 1 ? "" : "s", share, share);
}

/* the cores in set as ranges, "0-3,8" */
static void ranges(const cpu_set_t *set, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = 0;
	for (int c = 0; c < CPU_SETSIZE && len < size; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		len += (size_t)(e > c ? snprintf(buf + len, size - len, "%s%d-%d", len ? "," : "", c, e)
		                      : snprintf(buf + len, size - len, "%s%d", len ? "," : "", c));
		c = e;
	}
}

/* ---- notes: which collective each rank waits in ---- */

static struct {
	Handle *recv, *send; /* per peer: the receive always posted, the last note sent */
	uint64_t *in, *out;  /* their buffers */
	int64_t *heard;      /* per peer: the collective it last said it waits in, or -1 */
	int64_t seq;         /* the collectives this rank has started */
} note;

enum { NOTE_TAG = 7 };

static void post_note(int r)
{
	MPI(mpi.irecv(&note.in[r], 1, mpi.u64, r, NOTE_TAG, mpi.notes, &note.recv[r]));
}

/* the notes that came in since the last look */
static void read_notes(void)
{
	for (int r = 0; r < rt_nranks; r++) {
		int done = 0;
		if (r == rt_rank || !note.recv[r])
			continue;
		MPI(mpi.test(&note.recv[r], &done, NULL));
		if (done) {
			note.heard[r] = (int64_t)note.in[r];
			post_note(r);
		}
	}
}

/* every other rank told which collective this one waits in (a note still on its way to a rank is not
 * sent again) */
static void tell_peers(void)
{
	for (int r = 0; r < rt_nranks; r++) {
		int done = 1;
		if (r == rt_rank)
			continue;
		if (note.send[r])
			MPI(mpi.test(&note.send[r], &done, NULL));
		if (!done)
			continue;
		note.out[r] = (uint64_t)note.seq;
		MPI(mpi.isend(&note.out[r], 1, mpi.u64, r, NOTE_TAG, mpi.notes, &note.send[r]));
	}
}

static void open_notes(void)
{
	MPI(mpi.comm_dup(mpi.world, &mpi.notes));
	note.recv = rt_host_alloc((int64_t)sizeof(Handle) * 2 * rt_nranks, "the ranks' notes");
	note.send = note.recv + rt_nranks;
	note.in = rt_host_alloc((int64_t)sizeof(uint64_t) * 2 * rt_nranks, "the ranks' notes");
	note.out = note.in + rt_nranks;
	note.heard = rt_host_alloc((int64_t)sizeof(int64_t) * rt_nranks, "the ranks' notes");
	for (int r = 0; r < rt_nranks; r++) {
		note.recv[r] = note.send[r] = NULL;
		note.heard[r] = -1;
		if (r != rt_rank)
			post_note(r);
	}
}

/* at a clean end: the receives still posted withdrawn, the notes sent let go */
static void close_notes(void)
{
	if (!note.recv)
		return;
	for (int r = 0; r < rt_nranks; r++) {
		if (note.recv[r]) {
			MPI(mpi.cancel(&note.recv[r]));
			MPI(mpi.wait(&note.recv[r], NULL));
		}
		if (note.send[r] && note.send[r] != mpi.request_null)
			MPI(mpi.request_free(&note.send[r]));
	}
	MPI(mpi.comm_free(&mpi.notes));
	free(note.recv);
	free(note.in);
	free(note.heard);
	note.recv = NULL;
}

/* ---- the end of a job that cannot go on ---- */

/* Where the link to mpirun is down, MPI_Abort cannot reach it: mpirun then waits for the daemon on the
 * far host, and that daemon for mpirun, until TCP gives up (a quarter of an hour). So before a rank
 * aborts it leaves a watcher: a process of its own session that outlives the rank by at most
 * REAP_S seconds and, if the process that started the rank (Open MPI's orted, or mpirun on its own
 * host) is still there then, ends it. Where MPI_Abort works, mpirun ends the job first and the watcher goes with it. */
enum { REAP_S = 5 };

/* 'd': Open MPI's daemon on this host (orted, prted), 'm': mpirun itself, 0: neither */
static char launcher_kind(pid_t pid)
{
	char path[64], name[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(name, sizeof name, f))
		name[0] = 0;
	fclose(f);
	name[strcspn(name, "\n")] = 0;
	if (!strcmp(name, "orted") || !strcmp(name, "prted"))
		return 'd';
	if (!strcmp(name, "mpirun") || !strcmp(name, "mpiexec") || !strcmp(name, "orterun") || !strcmp(name, "prterun"))
		return 'm';
	return 0;
}

static void nap(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* waits up to s seconds for pid to be gone */
static bool gone_within(pid_t pid, double s)
{
	for (double t = 0; t < s; t += 0.1) {
		if (kill(pid, 0) != 0)
			return true;
		nap(0.1);
	}
	return kill(pid, 0) != 0;
}

static void leave_watcher(void)
{
	pid_t launcher = getppid();
	char kind = launcher_kind(launcher);
	if (!kind || fork() != 0)
		return;
	/* the watcher: only async-signal-safe calls from here (the rank has threads). Its own session, so
	 * that mpirun's kill of the rank's group passes it by; no descriptor of the rank's, so that nothing
	 * waits for it to close one */
	setsid();
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 1024; fd++)
		if (fd != null)
			close(fd);
	if (gone_within(launcher, REAP_S))
		_exit(0);
	/* an orted ends on SIGTERM, its own processes with it; mpirun, aborting already, takes a signal
	 * as "forcibly" and crashes in its own finalize (Open MPI 4.1), so it is killed outright */
	if (kind == 'm' || (kill(launcher, SIGTERM) == 0 && !gone_within(launcher, 3)))
		kill(launcher, SIGKILL);
	_exit(0);
}

static void abort_late(int sig)
{
	(void)sig;
	_exit(1);
}

/* a rank that fails takes the others down with it at once, rather than leaving them waiting in a
 * collective; where MPI_Abort does not end this rank within 5 s (mpirun out of reach), it ends alone */
static noreturn void abort_world(int status)
{
	leave_watcher();
	signal(SIGALRM, abort_late);
	alarm(5);
	mpi.abort(mpi.world, status ? status : 1);
	_exit(status ? status : 1);
}

/* the ranks this one waited for: those not heard to have reached its collective (a rank heard in a later
 * one has passed it; one in an earlier one waits for someone else in turn) */
static void waited_for(char *buf, size_t size)
{
	int n = 0;
	for (int r = 0; r < rt_nranks; r++)
		n += r != rt_rank && note.heard && note.heard[r] < note.seq;
	if (!n) {
		snprintf(buf, size, "every other rank, each heard to be in it or past it (a link between them down?)");
		return;
	}
	size_t len = (size_t)snprintf(buf, size, "%s", n == 1 ? "rank " : "ranks ");
	int shown = 0;
	for (int r = 0; r < rt_nranks && len < size; r++) {
		if (r == rt_rank || note.heard[r] >= note.seq)
			continue;
		if (shown == 4) {
			len += (size_t)snprintf(buf + len, size - len, " and %d more", n - shown);
			break;
		}
		if (note.heard[r] < 0)
			len += (size_t)snprintf(buf + len, size - len, "%s%d (%s: not heard from)", shown ? ", " : "", r, rt_dist_host(r));
		else
			len += (size_t)snprintf(buf + len, size - len, "%s%d (%s: waits in collective %lld)", shown ? ", " : "", r,
			                        rt_dist_host(r), (long long)note.heard[r]);
		shown++;
	}
}

double rt_dist_timeout(void) { return started ? timeout : startup; }

/* named: the ranks it waited for are known from the notes (a wait in MPI); else (a wait on the GPU's
 * NCCL) not */
static noreturn void end_waiting(const char *what, double waited, bool named)
{
	char whom[400] = "every other rank", step[48], seq[40] = "";
	if (named) {
		waited_for(whom, sizeof whom);
		snprintf(seq, sizeof seq, " (collective %lld)", (long long)note.seq);
	}
	if (rt_dist_step > 0)
		snprintf(step, sizeof step, "at step %ld", rt_dist_step);
	else
		snprintf(step, sizeof step, "%s", started ? "before the first step" : "at start-up");
	fprintf(stderr,
	        "%s: error: rank %d (%s) waited %.0f s in %s%s %s for %s; the job ends "
	        "(%s %g s: a link down, a host gone or a rank stopped; docs/distributed.md)\n",
	        rt_prog, rt_rank, rt_dist_host(rt_rank), waited, what, seq, step, whom,
	        started ? "--collective-timeout" : "the start-up handshake's deadline", started ? timeout : startup);
	fflush(stderr);
	abort_world(1);
}

static noreturn void timed_out(const char *what, double waited) { end_waiting(what, waited, true); }

void rt_dist_timed_out(const char *what, double waited) { end_waiting(what, waited, false); }

/* req done, or the deadline passed: tested at once for a while (a sum overlapped with the adjoint is
 * usually there), then as below */
static void await(Handle *req, const char *what)
{
	double t0 = seconds(), limit = started ? timeout : startup, tell = limit / 4 < 1 ? limit / 4 : 1;
	bool told = false;
	note.seq++;
	for (long k = 0;; k++) {
		int done = 0;
		MPI(mpi.test(req, &done, NULL));
		if (done)
			return;
		if (k < 2000)
			continue;
		double t = seconds() - t0;
		if (note.recv && t > tell) {
			if (!told)
				tell_peers(), told = true;
			read_notes();
		}
		if (t > limit)
			timed_out(what, t);
		/* the first millisecond the core is yielded (a sum nearly done finishes at once), then let go
		 * 50 us at a time: where more threads than cores run, a thread that keeps testing slows them */
		if (t < 0.001)
			sched_yield();
		else
			nanosleep(&(struct timespec){0, 50000}, NULL);
	}
}

/* ---- the sums in flight: a queue that one thread works through ---- */

typedef struct {
	int op;            /* RT_SUM, RT_BCAST, RT_GATHER */
	void *buf;
	int64_t n;         /* elements of dtype, or bytes when dtype is NULL */
	const char *dtype;
	const char *what;  /* the tensor, for a message */
} Job;

enum { QUEUE = 1024 };
static struct {
	bool threaded;     /* the MPI library allows calls from a second thread, one at a time */
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t more, idle;
	Job q[QUEUE];
	int64_t issued, done;
	double waited;     /* seconds the training loop waited for sums in flight */
} comm = {.mu = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static void run_job(const Job *j);

static void *comm_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&comm.mu);
	for (;;) {
		while (comm.done == comm.issued)
			pthread_cond_wait(&comm.more, &comm.mu);
		Job j = comm.q[comm.done % QUEUE];
		pthread_mutex_unlock(&comm.mu);
		run_job(&j);
		pthread_mutex_lock(&comm.mu);
		comm.done++;
		pthread_cond_broadcast(&comm.idle);
	}
	return NULL;
}

void rt_dist_queue(int op, void *buf, int64_t n, const char *dtype, const char *what)
{
	Job j = {op, buf, n, dtype, what};
	if (!comm.threaded) {
		run_job(&j);
		return;
	}
	pthread_mutex_lock(&comm.mu);
	if (!comm.running) {
		pthread_t t;
		if (pthread_create(&t, NULL, comm_thread, NULL) != 0)
			rt_fail(1, "cannot start the thread that sums the gradients across the ranks");
		pthread_detach(t);
		comm.running = true;
	}
	while (comm.issued - comm.done == QUEUE)
		pthread_cond_wait(&comm.idle, &comm.mu);
	comm.q[comm.issued++ % QUEUE] = j;
	pthread_cond_signal(&comm.more);
	pthread_mutex_unlock(&comm.mu);
}

void rt_dist_drain(void)
{
	if (!comm.running)
		return;
	double t = seconds();
	pthread_mutex_lock(&comm.mu);
	while (comm.done != comm.issued)
		pthread_cond_wait(&comm.idle, &comm.mu);
	pthread_mutex_unlock(&comm.mu);
	comm.waited += seconds() - t;
}

double rt_dist_waited(void) { return comm.waited; }

/* ---- start and end ---- */

/* MPI_Init and MPI_Finalize wait for every rank through mpirun's daemons, with no deadline of their
 * own: a host gone then would leave this rank waiting. An alarm ends it, saying which call it was */
static char guarded[160];

static void guard_late(int sig)
{
	(void)sig;
	if (write(STDERR_FILENO, guarded, strlen(guarded)) < 0) {
	}
	_exit(1);
}

static void guard(double s, const char *call)
{
	const char *rank = getenv("OMPI_COMM_WORLD_RANK");
	snprintf(guarded, sizeof guarded, "%s: error: rank %s: %s did not return within %.0f s (a host of the job gone or "
	         "out of reach); this rank ends\n", rt_prog, rank ? rank : "?", call, s);
	signal(SIGALRM, guard_late);
	alarm((unsigned)(s + 0.999));
}

void rt_dist_init(int *argc, char ***argv)
{
	const char *size = getenv("OMPI_COMM_WORLD_SIZE");
	if (!size) {
		if (getenv("PMI_SIZE") || getenv("PMIX_RANK"))
			fprintf(stderr, "%s: note: an MPI launcher other than Open MPI's mpirun started this process; it runs "
			        "alone, as one rank\n", rt_prog);
		return;
	}
	/* the sums are non-blocking (for their deadline), in place; libnbc then takes a binomial tree, where a
	 * ring moves less (across two hosts here, 16 MiB a step: 55 -> 41 ms a step); the user's setting wins */
	setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
	/* RTLD_GLOBAL: Open MPI's own plugins find libmpi's symbols through it */
	mpi.lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
	if (!mpi.lib)
		rt_fail(1, "mpirun started this process, but libmpi.so.40 (Open MPI) cannot be opened: %s", dlerror());
	*(void **)&mpi.init_thread = sym("MPI_Init_thread");
	*(void **)&mpi.finalize = sym("MPI_Finalize");
	*(void **)&mpi.abort = sym("MPI_Abort");
	*(void **)&mpi.iallreduce = sym("MPI_Iallreduce");
	*(void **)&mpi.ibcast = sym("MPI_Ibcast");
	*(void **)&mpi.iallgatherv = sym("MPI_Iallgatherv");
	*(void **)&mpi.isend = sym("MPI_Isend");
	*(void **)&mpi.irecv = sym("MPI_Irecv");
	*(void **)&mpi.test = sym("MPI_Test");
	*(void **)&mpi.cancel = sym("MPI_Cancel");
	*(void **)&mpi.wait = sym("MPI_Wait");
	*(void **)&mpi.request_free = sym("MPI_Request_free");
	*(void **)&mpi.comm_dup = sym("MPI_Comm_dup");
	*(void **)&mpi.comm_free = sym("MPI_Comm_free");
	*(void **)&mpi.rank = sym("MPI_Comm_rank");
	*(void **)&mpi.size = sym("MPI_Comm_size");
	mpi.world = sym("ompi_mpi_comm_world");
	mpi.request_null = sym("ompi_request_null"); /* a request done and tested */
	mpi.f32 = sym("ompi_mpi_float");
	mpi.f64 = sym("ompi_mpi_double");
	mpi.u64 = sym("ompi_mpi_uint64_t");
	mpi.u16 = sym("ompi_mpi_uint16_t");
	mpi.i32 = sym("ompi_mpi_int32_t");
	mpi.byte = sym("ompi_mpi_byte");
	mpi.sum = sym("ompi_mpi_op_sum");
	mpi.min = sym("ompi_mpi_op_min");
	mpi.max = sym("ompi_mpi_op_max");
	/* the sums of a step's gradients run on a thread of their own while the adjoint goes on; the
	 * other calls wait for it to be idle: MPI_THREAD_SERIALIZED (2 in Open MPI's numbering) */
	int provided = 0;
	guard(RT_STARTUP_TIMEOUT, "MPI_Init");
	MPI(mpi.init_thread(argc, argv, 2, &provided));
	alarm(0);
	comm.threaded = provided >= 2;
	MPI(mpi.rank(mpi.world, &rt_rank));
	MPI(mpi.size(mpi.world, &rt_nranks));
	rt_distributed = true;
	rt_fail_hook = abort_world;
	/* the environment of a rank copied into a process that mpirun did not start: MPI then starts it
	 * alone, a world of one, and it would train as if it were the whole job */
	if (atoi(size) != rt_nranks)
		rt_fail(1, "OMPI_COMM_WORLD_SIZE says %s ranks, but MPI started this process as one of %d: mpirun did not "
		        "start it (run it as mpirun -np %s ..., or alone without Open MPI's variables)", size, rt_nranks, size);
}

static int env_int(const char *name, int or)
{
	const char *s = getenv(name);
	return s && atoi(s) > 0 ? atoi(s) : or;
}

static void gather_bytes(const void *mine, void *all, int bytes, const char *what);

void rt_dist_start(double collective_timeout)
{
	if (!rt_distributed)
		return;
	timeout = collective_timeout;
	if (startup > timeout)
		startup = timeout;
	/* the launcher (orted, or mpirun on its own host) runs unbound: its mask is the cores the job may
	 * use on this host (a container's or taskset's, not all the machine's) */
	Peer me = {.cores = 1, .online = (int32_t)sysconf(_SC_NPROCESSORS_ONLN),
	           .local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1)};
	cpu_set_t set;
	if (sched_getaffinity(getppid(), sizeof set, &set) == 0)
		me.online = CPU_COUNT(&set);
	if (gethostname(me.host, sizeof me.host - 1) != 0)
		snprintf(me.host, sizeof me.host, "?");
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		me.cores = CPU_COUNT(&set);
		ranges(&set, me.bound, sizeof me.bound);
	}
	peers = rt_host_alloc((int64_t)sizeof(Peer) * rt_nranks, "the ranks' hosts");
	gather_bytes(&me, peers, (int)sizeof me, "the start-up handshake (every rank's host)");
	open_notes();
	started = true;
}

void rt_dist_finish(void)
{
	if (!mpi.lib)
		return;
	rt_dist_drain();
	close_notes();
	free(peers);
	peers = NULL;
	rt_fail_hook = NULL;
	guard(timeout, "MPI_Finalize");
	MPI(mpi.finalize());
	alarm(0);
}

/* ---- the collectives ---- */

/* in place, in pieces that fit an int count */
static void allreduce(void *buf, int64_t n, Handle type, int64_t elem, Handle op, const char *what)
{
	for (int64_t at = 0; at < n; at += INT_MAX / 2) {
		int64_t k = n - at < INT_MAX / 2 ? n - at : INT_MAX / 2;
		Handle req;
		MPI(mpi.iallreduce(IN_PLACE, (char *)buf + at * elem, (int)k, type, op, mpi.world, &req));
		await(&req, what);
	}
}

/* each rank's bytes after every other's, in all (bytes * rt_nranks) */
static void gather_bytes(const void *mine, void *all, int bytes, const char *what)
{
	int *counts = rt_host_alloc((int64_t)sizeof(int) * 2 * rt_nranks, "the ranks' counts");
	for (int r = 0; r < rt_nranks; r++)
		counts[r] = bytes, counts[rt_nranks + r] = r * bytes;
	memcpy((char *)all + (size_t)rt_rank * (size_t)bytes, mine, (size_t)bytes);
	Handle req;
	MPI(mpi.iallgatherv(IN_PLACE, 0, mpi.byte, all, counts, counts + rt_nranks, mpi.byte, mpi.world, &req));
	await(&req, what);
	free(counts);
}

/* every rank's share of n elements, each rank's in place on every rank */
static void gather(void *buf, int64_t n, const char *dtype, const char *what)
{
	Handle type = !strcmp(dtype, "f64") ? mpi.f64 : !strcmp(dtype, "bf16") ? mpi.u16 : !strcmp(dtype, "i32") ? mpi.i32 : mpi.f32;
	int *counts = rt_host_alloc((int64_t)sizeof(int) * 2 * rt_nranks, "the shares' counts");
	for (int r = 0; r < rt_nranks; r++) {
		RtTensor t = {.numel = n};
		int64_t k, lo = rt_share(&t, r, rt_nranks, &k);
		if (k > INT_MAX || lo > INT_MAX)
			rt_fail(1, "a tensor of %lld elements is too large to gather its shares across %d ranks in one call",
			        (long long)n, rt_nranks);
		counts[r] = (int)k;
		counts[rt_nranks + r] = (int)lo;
	}
	Handle req;
	MPI(mpi.iallgatherv(IN_PLACE, 0, type, buf, counts, counts + rt_nranks, type, mpi.world, &req));
	await(&req, what);
	free(counts);
}

static void sum(void *buf, int64_t n, const char *dtype, const char *what)
{
	if (!strcmp(dtype, "f64")) {
		allreduce(buf, n, mpi.f64, 8, mpi.sum, what);
	} else if (!strcmp(dtype, "f32")) {
		allreduce(buf, n, mpi.f32, 4, mpi.sum, what);
	} else {
		/* bf16 (MPI has no such type): summed in f32, rounded once */
		float *f = rt_host_alloc(n * 4, "a bf16 sum across ranks");
		for (int64_t i = 0; i < n; i++)
			f[i] = (float)rt_get(buf, dtype, i);
		allreduce(f, n, mpi.f32, 4, mpi.sum, what);
		for (int64_t i = 0; i < n; i++)
			rt_set(buf, dtype, i, f[i]);
		free(f);
	}
}

static void bcast(void *buf, int64_t bytes, const char *what)
{
	for (int64_t at = 0; at < bytes; at += INT_MAX / 2) {
		int64_t k = bytes - at < INT_MAX / 2 ? bytes - at : INT_MAX / 2;
		Handle req;
		MPI(mpi.ibcast((char *)buf + at, (int)k, mpi.byte, 0, mpi.world, &req));
		await(&req, what);
	}
}

/* a queued job's collective, named for a message: "the sum of W's gradient" */
static void run_job(const Job *j)
{
	char what[160];
	if (j->op == RT_SUM) {
		snprintf(what, sizeof what, "the sum of %s's gradient", j->what);
		sum(j->buf, j->n, j->dtype, what);
	} else if (j->op == RT_GATHER) {
		snprintf(what, sizeof what, "the gather of %s's shares", j->what);
		gather(j->buf, j->n, j->dtype, what);
	} else {
		snprintf(what, sizeof what, "the broadcast of rank 0's %s", j->what);
		bcast(j->buf, j->dtype ? j->n * rt_elem_bytes(j->dtype) : j->n, what);
	}
}

void rt_dist_sum(void *buf, int64_t n, const char *dtype, const char *what)
{
	if (!rt_distributed)
		return;
	rt_dist_drain();
	sum(buf, n, dtype, what);
}

bool rt_dist_same(uint64_t h, const char *what)
{
	if (!rt_distributed)
		return true;
	rt_dist_drain();
	uint64_t lo = h, hi = h;
	allreduce(&lo, 1, mpi.u64, 8, mpi.min, what);
	allreduce(&hi, 1, mpi.u64, 8, mpi.max, what);
	return lo == hi;
}

void rt_dist_bcast(void *buf, int64_t bytes, const char *what)
{
	if (!rt_distributed)
		return;
	rt_dist_drain();
	bcast(buf, bytes, what);
}

void rt_dist_gather(void *buf, int64_t n, const char *dtype, const char *what)
{
	if (!rt_distributed)
		return;
	rt_dist_drain();
	gather(buf, n, dtype, what);
}

void rt_dist_allgather(const void *mine, void *all, int bytes, const char *what)
{
	if (!rt_distributed) {
		memcpy(all, mine, (size_t)bytes);
		return;
	}
	rt_dist_drain();
	gather_bytes(mine, all, bytes, what);
}

void rt_allreduce(RtCtx *c, int param, uint64_t g, int64_t n)
{
	/* bf16-mixed: the f32 sums are summed across the ranks after the step (update.c), not the bf16
	 * gradient of the last micro-batch */
	if (!rt_distributed || !c->reducing || c->model->mixed)
		return;
	c->no_graph = "data parallelism's sums run on a stream of their own";
	const RtTensor *t = &c->model->params[param];
	c->n.allreduce_bytes += n * rt_elem_bytes(t->dtype); /* the whole gradient, or one layer of it */
	c->dev->collective(RT_SUM, g, n, t->dtype, t->name);
}
