/* rt: the runtime's internal header. One device interface (runtime/cpu now,
 * runtime/gpu next), the parsed model description, the counters. */
#ifndef DPRT_RT_H
#define DPRT_RT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

#include "dprt.h"

#define RT_MAXRANK 8

typedef struct {
	char name[128];
	char dtype[8];        /* f32, f64, bf16, i32 */
	int rank;
	int64_t dim[RT_MAXRANK];
	int64_t offset, grad; /* arena offsets; grad -1 for inputs */
	int64_t opt_m, opt_v; /* adam: the moments' arena offsets; -1 otherwise */
	bool streamed;        /* in the host pool: value at host, adam's moments at host_m, host_v */
	bool buffer;          /* a `buffer`: saved and loaded like a parameter, never trained (grad -1) */
	bool nodecay;         /* `nodecay`: AdamW's decay leaves it */
	int64_t host, host_m, host_v;
	int64_t slots;        /* streamed: the device slots' arena offset (nslots units); grad is its unit's */
	int64_t hgrad;        /* streamed: where its units' gradients come down to in the pool */
	/* bf16-mixed (trained parameters): dtype is f32, offset and grad (or host) are the master copy and the
	 * sum of the gradients; copy (host_copy when streamed) is the bf16 compute copy the program reads, and
	 * mgrad the bf16 gradient of a micro-batch. Otherwise host_copy is host, copy and mgrad -1. */
	int64_t copy, mgrad, host_copy;
	char cdtype[8];       /* the compute copy's type, and its gradient's: dtype, or bf16 under bf16-mixed */
	int stacked, classes;
	bool has_ignore;      /* i32 labels: `ignore` is allowed besides 0..classes-1 */
	bool ids;             /* an embed reads it: its elements are tokens */
	int role;             /* an input: RT_ROLE_DATA (the loss computes from it), RT_ROLE_LABELS (the loss reads it
	                       * only as its target) or RT_ROLE_OTHER; --data and --labels bind by it */
	int ignore;
	char init[16];
	char saved[128];      /* load("NAME"): its name in the files --init reads and --save writes; "": name */
	double a, b;
	int64_t numel, bytes;
} RtTensor;

enum { RT_ROLE_OTHER, RT_ROLE_DATA, RT_ROLE_LABELS };

typedef struct {
	char model[128];
	char weights[4096];   /* `weights "FILE"`: the file the run starts from without --init; "": none */
	int real_bytes;       /* the precision line's: what the source's f32 is stored as */
	bool mixed;           /* precision bf16-mixed: f32 master copies and optimizer state (RtTensor.copy) */
	int64_t arena, loss;
	char loss_dtype[8];
	RtTensor params[RT_MAX_PARAMS], inputs[RT_MAX_INPUTS];
	int nparams, ninputs;
	struct {
		char name[64];
		int64_t offset;   /* a scalar the loss block reports (`report NAME = e`), read after each step */
		char dtype[8];
	} reports[16];
	int nreports;
	struct {
		int param;        /* the buffer that takes the value at offset after a training step (`update NAME = e`) */
		int64_t offset;
	} updates[RT_MAX_PARAMS]; /* one a buffer at most */
	int nupdates;
	int k_sgd[3], k_adam[3]; /* by rt_real_index of the parameter's dtype; -1 where none was compiled */
	int k_fold, k_refresh; /* bf16-mixed: a micro-batch's gradient into the sum, the compute copy of the master */
	bool adam;            /* the optimizer dpc compiled in (--optimizer) */
	int ranks;            /* dpc --ranks N: a resident parameter's moments are one rank's share (ranks line; 1) */
	bool has_optimizer;
	char **kname;         /* by kernel id; nkname of them */
	int64_t *kwork;       /* by kernel id: an item's rough work, for splitting it between CPU threads (kwork lines; 1) */
	double *kpred;        /* by kernel id: a launch's time in microseconds as dpc's cost model predicts it (kpred lines; 0) */
	int nkname;
	int64_t plan_params, plan_grads, plan_opt, plan_inputs, plan_tape, plan_snap, plan_slots, plan_work;
	int64_t *mem_series;  /* memplot line: the work region in use over a step, mem_points values */
	int mem_points;
	int64_t device_mem;   /* --device-mem, the plan's budget (the description's "budget"); 0: none */
	int64_t steps_forward, steps_recomputed;
	int64_t forward_flops; /* of the forward program, once, as dpc counts them (flops line) */
	/* streaming: the pinned host pool's size, slots and prefetch distance, and
	 * the bytes dp_forward [0] and dp_step [1] move each way (predicted) */
	int64_t host;
	int nslots, ahead;
	int64_t xfer_h2d[2], xfer_d2h[2];
	int64_t stream_numel; /* the streamed parameters' elements */
	int64_t stream_grads; /* the streamed parameters' gradients' bytes, all units (in the pool) */
} RtModel;

/* A device: memory addressed by 64-bit integers, and work on it. */
typedef struct {
	const char *name;
	void (*init)(void);
	uint64_t (*alloc)(int64_t bytes);   /* zeroed; 0 on failure */
	void (*h2d)(uint64_t dst, const void *src, int64_t bytes);          /* returns when src may be reused */
	void *(*host_alloc)(int64_t bytes);                                 /* page-locked where that matters; NULL on failure */
	void (*h2d_async)(uint64_t dst, const void *src, int64_t bytes);    /* src from host_alloc, unchanged until a later fence is passed */
	void (*d2h)(void *dst, uint64_t src, int64_t bytes);
	void (*d2h_async)(void *dst, uint64_t src, int64_t bytes);          /* dst from host_alloc, valid once a later fence is waited for */
	void (*d2d)(uint64_t dst, uint64_t src, int64_t bytes);
	void (*zero)(uint64_t dst, int64_t bytes);
	/* n items of about `work` elements' work in all (the CPU splits by it) */
	void (*launch)(int kernel, int64_t n, int64_t work, int nargs, const uint64_t *args);
	void (*gemm)(int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
	             int64_t sa, uint64_t b, int64_t ldb, int64_t sb, uint64_t c, int64_t ldc, int64_t sc,
	             int64_t batch, double beta);
	void (*sync)(void);
	/* Fences let the host run ahead of the device: fence(i) marks the
	 * point the queued work has reached, fence_wait(i) returns once the
	 * device has passed the last mark i (at once if there is none). */
	void (*fence)(int slot);
	void (*fence_wait)(int slot);
	/* Profiling: mark() records the time the queued work reaches, returns
	 * its id; mark_ms(a, b) is the time between two marks, after a sync. */
	int (*mark)(void);
	double (*mark_ms)(int a, int b);
	/* at exit: give back what alloc and host_alloc gave */
	void (*free)(uint64_t p);
	void (*host_free)(void *p);
	/* The copy stream, for tensor streaming. copy() queues a transfer between
	 * device memory and a host_alloc buffer behind all device work queued so
	 * far, and returns its event: copies are numbered 1, 2, ... in the order
	 * queued. copy_wait(e) orders device work queued later after copy e;
	 * copy_sync(e) returns once copy e is done, for the host to read what a
	 * device-to-host copy brought back. Copies run beside the compute work
	 * queued after them. */
	int64_t (*copy)(bool to_device, uint64_t dev, void *host, int64_t bytes);
	void (*copy_wait)(int64_t event);
	void (*copy_sync)(int64_t event);
	/* CUDA graphs, NULL where there are none: the work queued between
	 * graph_begin and graph_end is captured, not run; graph_launch runs
	 * what was captured, as often as asked */
	void (*graph_begin)(void);
	void (*graph_end)(void);
	void (*graph_launch)(void);
	/* --trace: while copy_timing(true) the copies queued are timed;
	 * copy_span(e, span) gives copy e's start and end (-1 if untimed), and
	 * mark_at(a) mark a's time, in ms on one clock, once they are done */
	void (*copy_timing)(bool on);
	void (*copy_span)(int64_t event, double *span);
	double (*mark_at)(int a);
	/* rt_conv (dprt.h): the convolution of that kind over x, w and y, with
	 * ws_bytes of planned workspace at ws */
	void (*conv)(int kind, int elem_bytes, const int64_t *dims, uint64_t x, uint64_t w, uint64_t y, uint64_t ws,
	             int64_t ws_bytes);
	/* rt_attention (dprt.h); NULL where the attention ops are generated kernels */
	void (*attention)(int kind, int elem_bytes, const int64_t *dims, const uint64_t *in, uint64_t out);
	/* data parallelism (dist.c): collective queues the n elements of type dtype at dev summed across
	 * the ranks (RT_SUM), or rank 0's given to every rank (RT_BCAST), in place, after the work queued
	 * so far, to run beside the work queued after it; collective_wait orders the work queued later
	 * after every collective queued so far. NULL where the device has no collectives yet. */
	void (*collective)(int op, uint64_t dev, int64_t n, const char *dtype, const char *what);
	void (*collective_wait)(void);
	/* rt_gemm_items (dprt.h) in one call; NULL: a gemm per item */
	void (*gemm_items)(int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
	                   int64_t sa, int64_t oa, uint64_t b, int64_t ldb, int64_t sb, int64_t ob, uint64_t c, int64_t ldc,
	                   int64_t sc, int64_t oc, int64_t batch, int64_t items, double beta);
	/* rt_gemm_ep (dprt.h): 1 done, 0 no such GEMM here; NULL: none on this device */
	int (*gemm_ep)(int epi, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
	               uint64_t b, int64_t ldb, uint64_t c, int64_t ldc, double beta, uint64_t bias, uint64_t aux,
	               int64_t ldaux);
	/* called first by a thread other than the main one that calls copy_sync (host_update.c); NULL: nothing */
	void (*thread_init)(void);
} RtDevice;
enum { RT_SUM, RT_BCAST, RT_GATHER }; /* RT_GATHER: every rank's share (rt_share) given to every rank */

/* a rank's share of a parameter under dpc --ranks N (ZeRO stage 1): elements
 * [lo, lo + *n) of t, ceil(numel / N) at most, for rank r of N */
static inline int64_t rt_share(const RtTensor *t, int r, int nranks, int64_t *n)
{
	int64_t each = (t->numel + nranks - 1) / nranks, lo = each * r < t->numel ? each * r : t->numel;
	*n = t->numel - lo < each ? t->numel - lo : each;
	return lo;
}

/* rt_conv's dims (the places dprt.h's RT_CONV_* name) by name */
typedef struct {
	int64_t n, c, h, w, o, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, g;
} RtConvShape;
static inline RtConvShape rt_conv_shape(const int64_t *d)
{
	return (RtConvShape){d[RT_CONV_N],  d[RT_CONV_C],  d[RT_CONV_H],  d[RT_CONV_W],  d[RT_CONV_O],
	                     d[RT_CONV_HO], d[RT_CONV_WO], d[RT_CONV_KH], d[RT_CONV_KW], d[RT_CONV_SH],
	                     d[RT_CONV_SW], d[RT_CONV_PH], d[RT_CONV_PW], d[RT_CONV_DH], d[RT_CONV_DW], d[RT_CONV_G]};
}

/* fences 0 and 1: the training loop's steps in flight (RT_INFLIGHT); 2 and 3:
 * a fused revolve's action buffers */
#define RT_FENCES 4
#define RT_INFLIGHT 2
#define RT_FENCE_ACTIONS 2
/* the actions a fused revolve's kernel takes at a launch */
#define RT_ACTIONS (1 << 16)

extern const RtDevice rt_cpu_device;
extern const RtDevice rt_cuda_device __attribute__((weak)); /* linked into CUDA executables */
extern bool rt_tf32;        /* cuBLAS tensor-op (TF32) math */
extern bool rt_conv_fp32;   /* --conv-fp32: cuDNN's f32 convolutions without TF32 */
extern bool rt_verbose;     /* -v */

/* The host threads the CPU device runs, chosen once before its init
 * (rt_choose_threads: --threads, else OMP_NUM_THREADS, else the cores this
 * process may run on), and why, for -v */
#define RT_MAX_THREADS 256
extern int rt_threads;
extern char rt_threads_why[160];
void rt_choose_threads(long asked);

typedef struct {
	int64_t device_bytes, peak_device_bytes;
	int64_t h2d_bytes, d2h_bytes;
	int64_t stream_h2d, stream_d2h; /* of them, the transfers of streamed units */
	int64_t steps[2];     /* RT_COUNT_FORWARD, RT_COUNT_RECOMPUTED */
	int64_t launches, gemms, copies, convs, attentions;
	int64_t recomputed_flops; /* the advances' steps times their loop's flops per step, and the taped steps' again */
	int64_t allreduce_bytes;  /* data parallelism: the gradients' bytes summed across the ranks */
	int64_t allgather_bytes;  /* --shard-optimizer: the parameters' bytes gathered from their shares */
} RtCounters;

struct RtCtx {
	const RtDevice *dev;
	RtModel *model;
	uint64_t base;        /* the arena */
	RtCounters n;
	bool record;          /* record this step's calls (--profile, --trace: profile.c) */
	/* streaming */
	unsigned char *pool;  /* the pinned host pool */
	int64_t snap_event;   /* the last copy of a snapshot between the staging row and the host pool */
	double lr;            /* the optimizer's step that rt_update applies: the schedule's at this step */
	double decay;         /* AdamW's decoupled weight decay (0: none), on parameters of 2 or more dims a layer */
	double gscale;        /* the gradients' scale in the update: --clip-grad's, else 1 */
	bool accumulating;    /* --accum: a micro-batch after the step's first; rt_zero leaves the gradients */
	bool reducing;        /* the step's last micro-batch: rt_allreduce sums the gradients across the ranks */
	uint64_t draw;        /* the micro-batch's number from 1, for dropout's key (0: the step's) */
	long step;            /* 1, 2, ...: Adam's bias correction, and dropout's key */
	uint64_t seed;        /* --seed: dropout's key */
	bool eval;            /* --eval: the forward program alone, dropout off */
	void **capture;       /* when set: rt_update copies each unit's gradient to capture[param] */
	bool no_update;       /* rt_update leaves the parameters as they are (--gradcheck) */
	uint64_t *actions[2]; /* a fused revolve's action words (host_alloc), RT_ACTIONS each */
	/* --graph: dp_step captured once as a CUDA graph and replayed after */
	bool capturing;       /* dp_step is being captured: nothing may wait on the host */
	const char *no_graph; /* why dp_step cannot be a graph, set by the calls that vary by step or wait on the host */
	uint64_t **kept;      /* the action words a captured revolve reads, each chunk its own (nkept) */
	int nkept;
	/* the streamed parameters' optimizer on the host (host_update.c): each unit's gradient comes down into
	 * the pool (hgrad) once a micro-batch. With --accum K > 1 (or bf16-mixed across ranks) the host adds them
	 * into sums (parameter i's at sums_at[i], in its dtype); the step is applied by the sweep of the last
	 * micro-batch, unless deferred (--clip-grad, ranks: the norm, the sums across the ranks first) */
	unsigned char *sums;
	int64_t sums_at[RT_MAX_PARAMS];
	bool first;           /* this micro-batch is the step's first: the sums start at 0 */
	bool sweep_step;      /* this dp_step's sweep applies the streamed units' steps */
	bool deferred;        /* the steps wait for the step's gradients (rt_optimizer_step posts them) */
	int64_t grad_event[RT_MAX_PARAMS]; /* the last copy out of each streamed parameter's gradient unit (0: none) */
	int64_t sent[RT_MAX_PARAMS];       /* the lowest unit of each whose gradient this call sent down (INT64_MAX) */
};

/* One unit's optimizer step on the host (host_step.c): elements [lo, hi)
 * of g added to sum (add), and the step applied to p, m, v (step), with
 * the device kernels' operations in their order: a streamed parameter ends
 * where a resident one would, bit for bit. */
typedef struct {
	int dt;              /* the parameter's type, rt_real_index's: 0 f32, 1 bf16, 2 f64 */
	bool mixed;          /* bf16-mixed: dt f32, g bf16, and the bf16 compute copy written to copy */
	bool add, step;
	bool first;          /* add: the sum starts at 0 */
	const void *g;       /* a micro-batch's gradient */
	void *sum;           /* the micro-batches' sum (dt), or NULL: the step takes g */
	void *p, *m, *v;     /* m = v = NULL: sgd */
	void *copy;
	/* sgd: lr and scale; adam: the step size lr / bc1, beta1, beta2, eps, 1 / sqrt(bc2) (bc1, bc2: the bias
	 * corrections), AdamW's keep (1 - lr decay) and the gradient's scale */
	double lr, size, b1, b2, eps, rbc2, keep, scale;
} RtHostStep;
void rt_host_step(const RtHostStep *s, int64_t lo, int64_t hi);
/* The queue of such steps (host_update.c): rt_host_init before the first
 * (threads: how many split a large unit); rt_host_post queues one for unit
 * u of parameter `param`, n elements, to run once copy `event` is done (0:
 * at once); rt_host_ready waits for the last job that touches unit u;
 * rt_host_drain for all; rt_host_busy: the seconds the jobs took. */
void rt_host_init(RtCtx *c, int threads);
void rt_host_post(int param, int64_t u, const RtHostStep *s, int64_t n, int64_t event);
void rt_host_ready(int param, int64_t u);
void rt_host_drain(void);
double rt_host_busy(void);
void rt_host_finish(const RtModel *m);
/* the step of unit u of streamed parameter param (update.c): its sum added to (add), the step applied (step),
 * after copy `event` */
void rt_host_unit(RtCtx *c, int param, int64_t u, bool add, bool step, int64_t event);
/* bf16-mixed (update.c): the compute copy of parameter t made again from its master copy (after the master
 * changed on the host: init, load, resume, a gradient check's probe) */
void rt_refresh(RtCtx *c, const RtTensor *t);
/* bf16-mixed: after each micro-batch, its gradients added into the sums (first: the step's first) */
void rt_fold(RtCtx *c, bool first);
/* the step's gradient of streamed parameter t (parameter index i) into dst, in t's dtype (--dump-grads) */
void rt_streamed_grad(RtCtx *c, int i, void *dst);
/* stream.c's counted copies on the copy stream between device memory and pinned host memory (host),
 * or offset host of the host pool (pool); the copy's event */
int64_t rt_host_copy(RtCtx *c, bool to_device, uint64_t dev, unsigned char *host, int64_t bytes);
int64_t rt_pool_copy(RtCtx *c, bool to_device, uint64_t dev, int64_t host, int64_t bytes);

/* one optimizer step over n elements on the device: sgd or adam as compiled, with c->lr and c->step;
 * under bf16-mixed it writes the bf16 compute copy at `copy` too */
void rt_apply_update(RtCtx *c, const RtTensor *t, uint64_t p, uint64_t g, uint64_t m, uint64_t v, uint64_t copy,
                     int64_t n);

/* --profile and --trace (profile.c): while c->record is set, each device
 * call between rt_prof_begin and rt_prof_end is timed under its label and
 * kind; rt_prof_copy records a copy on the copy stream (the device times
 * it), rt_prof_mark an instant (a wait) or the start of a phase of the step.
 * rt_prof_report prints step's totals by label; rt_trace_write writes steps
 * from..to as Chrome trace events to path and returns how many. */
typedef enum {
	RT_CALL_KERNEL, RT_CALL_GEMM, RT_CALL_COPY_D2D, RT_CALL_ZERO, RT_CALL_TRANSFER, /* on the compute stream, timed */
	RT_CALL_COPY,  /* on the copy stream */
	RT_CALL_WAIT,  /* the compute stream waits for a copy */
	RT_CALL_PHASE, /* a phase of the step begins (label "" ends the step) */
} RtCall;
void rt_prof_begin(RtCtx *c, RtCall kind, const char *label);
void rt_prof_predicted(double us); /* the call under way: its predicted time */
void rt_prof_end(RtCtx *c);
void rt_prof_copy(RtCtx *c, const char *label, int64_t event);
void rt_prof_mark(RtCtx *c, RtCall kind, const char *label);
void rt_prof_report(RtCtx *c, long step);
int rt_trace_write(RtCtx *c, const char *path, long from, long to);
/* the device bytes the allocator held at each recorded call of step, in order (malloc'd, *n of them) */
int64_t *rt_trace_bytes(long step, int *n);

/* errors: a message on stderr, then exit with the status; or, while
 * rt_fail_trap is set (the API's calls, a fuzzer), the message into
 * rt_fail_msg and the status into rt_fail_status, nothing printed, and
 * longjmp(*rt_fail_trap, 1) */
noreturn void rt_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern const char *rt_prog;
/* set by the executable's main (api.c reads it): the session is the executable's, its signals and messages */
extern bool rt_executable;
extern _Thread_local jmp_buf *rt_fail_trap; /* this thread's: a failure on another thread exits */
extern char rt_fail_msg[2048];
extern int rt_fail_status;

/* called by rt_fail before it exits (not while trapped): data parallelism's abort of the other ranks */
extern void (*rt_fail_hook)(int status);

/* Data parallelism over MPI (dist.c): under Open MPI's mpirun each process
 * is rank rt_rank of rt_nranks, and rt_distributed is set, even for one rank
 * (alone: 0 of 1, unset, and no MPI loaded). rt_dist_start, once the
 * options are read, exchanges every rank's host and cores (the start-up
 * handshake, its deadline the lesser of RT_STARTUP_TIMEOUT and the
 * collectives'); then every collective has the deadline given, and a rank
 * that waits past it names the collective, the step (rt_dist_step) and the
 * ranks it waited for, and ends the job.
 * rt_dist_sum sums n elements of buf (f32, f64, bf16) across the ranks in
 * place; rt_dist_same says whether every rank passed the same h;
 * rt_dist_bcast gives every rank rank 0's bytes; rt_dist_allgather puts
 * each rank's bytes at all + rank * bytes on every rank. what names the
 * collective in a message ("the mean of the loss"). */
#define RT_COLLECTIVE_TIMEOUT 300.0
#define RT_STARTUP_TIMEOUT 60.0
extern int rt_rank, rt_nranks;
extern bool rt_distributed;
extern long rt_dist_step;
void rt_dist_init(int *argc, char ***argv);
void rt_dist_start(double collective_timeout);
void rt_dist_finish(void);
const char *rt_dist_host(int rank);
/* the deadline of a wait on the collectives (seconds), and its end: the message, then the job aborted */
double rt_dist_timeout(void);
noreturn void rt_dist_timed_out(const char *what, double waited);
/* " rank R on HOST, bound to cores 0-3 (4 of its 16, 2 ranks there)": where this rank runs, for -v */
void rt_dist_where(char *buf, size_t size);
/* rank 0: a warning where a rank is bound to fewer cores than its share of its host's */
void rt_dist_warn_binding(const char *model);
void rt_dist_sum(void *buf, int64_t n, const char *dtype, const char *what);
bool rt_dist_same(uint64_t h, const char *what);
void rt_dist_bcast(void *buf, int64_t bytes, const char *what);
void rt_dist_allgather(const void *mine, void *all, int bytes, const char *what);
/* every rank's share (rt_share) of n elements of dtype at buf, given to every rank, in place */
void rt_dist_gather(void *buf, int64_t n, const char *dtype, const char *what);
/* collectives on memory the host reaches, run one after another on a thread of their own while
 * the caller goes on (rt_dist_queue; what: the tensor's name); rt_dist_drain returns once they are
 * done, and the seconds it has waited in all are rt_dist_waited's */
void rt_dist_queue(int op, void *buf, int64_t n, const char *dtype, const char *what);
void rt_dist_drain(void);
double rt_dist_waited(void);

/* FNV-1a over n bytes, continuing h (from RT_HASH_START: state files keep this start value) */
#define RT_HASH_START 1469598103934665603ull
uint64_t rt_hash(uint64_t h, const void *p, size_t n);

void rt_parse_desc(RtModel *m, const char *desc);
/* host memory; a failure is reported with what it was for, never a crash */
void *rt_host_alloc(int64_t bytes, const char *what);
/* p (from either) resized to bytes, or the same failure */
void *rt_host_grow(void *p, int64_t bytes, const char *what);
uint64_t rt_device_alloc(RtCtx *c, int64_t bytes);
void rt_h2d(RtCtx *c, uint64_t dst, const void *src, int64_t bytes);
void rt_d2h(RtCtx *c, void *dst, uint64_t src, int64_t bytes);

/* JSON text built value by value (runtime/json.c): the writer places the
 * commas and escapes; buf holds len bytes and a NUL. rt_json_raw appends
 * text as it is (a newline between JSON lines). */
#define RT_JSON_DEPTH 16
typedef struct {
	char *buf;
	size_t len, cap;
	int depth;
	int count[RT_JSON_DEPTH]; /* values so far in each open container */
	bool keyed;               /* a key was written: its value comes next */
} RtJson;
void rt_json_object(RtJson *j);
void rt_json_end_object(RtJson *j);
void rt_json_array(RtJson *j);
void rt_json_end_array(RtJson *j);
void rt_json_key(RtJson *j, const char *k);
void rt_json_str(RtJson *j, const char *s);
void rt_json_num(RtJson *j, double v);  /* null when not finite */
void rt_json_int(RtJson *j, int64_t v);
void rt_json_bool(RtJson *j, bool v);
void rt_json_raw(RtJson *j, const char *text);
void rt_json_reset(RtJson *j);           /* empty again, keeping the buffer */
void rt_json_free(RtJson *j);

/* host tensors in the model's element type */
double rt_get(const void *buf, const char *dtype, int64_t i);
void rt_set(void *buf, const char *dtype, int64_t i, double v);
int rt_elem_bytes(const char *dtype);
/* f32 0, bf16 1, f64 2; -1 for anything else */
int rt_real_index(const char *dtype);
float rt_bf16_to_f32(uint16_t h);
uint16_t rt_f32_to_bf16(float f); /* rounded to nearest even */
/* the dtype name of the model's reals: "f32", "f64" or "bf16" */
static inline const char *rt_real_dtype(const RtModel *m) { return m->real_bytes == 8 ? "f64" : m->real_bytes == 2 ? "bf16" : "f32"; }
/* --precision as dpc was given it: the reals', or "bf16-mixed" */
static inline const char *rt_precision(const RtModel *m) { return m->mixed ? "bf16-mixed" : rt_real_dtype(m); }
/* "[2, 3]"; four results stay valid at a time */
const char *rt_shape_str(int rank, const int64_t *dim);

/* .npy files: data converted to double (malloc'd, the caller frees it),
 * shape out (at most RT_MAXRANK dims); `name` is for messages */
double *rt_npy_parse(const char *name, const unsigned char *buf, size_t len, int *rank, int64_t *dim);
double *rt_load_npy(const char *path, int *rank, int64_t *dim);
unsigned char *rt_load_bytes(const char *path, size_t *len); /* a whole file, malloc'd */
/* safetensors: params in the model's precision, written atomically. A file
 * must hold every parameter of m by name and nothing else (__metadata__
 * aside); bufs[i] receives params[i], each value finite and within range. */
#define RT_META 32
typedef struct {
	int n;
	char *key[RT_META], *val[RT_META]; /* malloc'd */
} RtMeta;
/* meta, unless NULL: the string fields of __metadata__ */
void rt_safetensors_parse(const char *name, const unsigned char *buf, size_t len, const RtModel *m, void **bufs, RtMeta *meta);
void rt_save_safetensors(const char *path, const RtModel *m, void *const *bufs, bool grads);
/* the same with __metadata__'s content field and more fields (meta: ",\"key\":\"value\"..." or "") */
void rt_save_tensors(const char *path, const RtModel *m, void *const *bufs, bool grads, const char *content, const char *meta);
void rt_load_safetensors(const char *path, const RtModel *m, void **bufs);
/* write `data` to path through a temporary file PATH.tmp.PID and rename */
void rt_write_atomic(const char *path, const void *data, size_t len);
/* SIGINT, SIGTERM, SIGHUP remove the temporary file of a write in progress,
 * then kill the process as before */
void rt_cleanup_on_signals(void);
/* before any work: removes stale PATH.tmp.PID files of dead processes (with
 * a warning), and fails unless a file can be created where path goes */
void rt_check_output(const char *path);

/* the executable's options (opts.c: one table parses, checks and prints --help) */
#define RT_MAX_INPUT_FILES 64
enum { RT_LR_CONSTANT, RT_LR_COSINE, RT_LR_LINEAR };
typedef struct {
	long steps, log_every, seed, gc_samples;
	double lr, gc_threshold;
	bool quiet, verbose, gradcheck, lr_set, profile, eval, steps_set, graph;
	bool in_order;         /* --in-order: the training rows in the files' order, never shuffled */
	long threads;          /* --threads N: 0 not given */
	bool shard_optimizer;  /* --shard-optimizer: each rank updates its share (an executable of dpc --ranks N) */
	int schedule;          /* RT_LR_CONSTANT, _COSINE, _LINEAR */
	long warmup;           /* --warmup steps */
	double min_lr, weight_decay;
	double clip_grad;      /* --clip-grad: the largest global gradient norm (0: no clipping) */
	long accum;            /* --accum: micro-batches per optimizer step (1) */
	bool clip_set;
	bool weight_decay_set;
	const char *trace;     /* --trace FILE */
	const char *memplot;   /* --memplot FILE.svg */
	long trace_from, trace_to; /* --trace-steps a:b; 0: the last step */
	bool trace_steps_set;      /* --trace-steps was given */
	const char *optimizer; /* as asked for: it must be the one compiled in */
	const char *data, *labels, *init, *save, *dump_grads, *summary, *log_json;
	const char *save_state, *resume; /* --save-state, --resume FILE */
	const char *val_data, *val_labels; /* --val-data, --val-labels FILE */
	long eval_every;                 /* the validation loss's interval (default --log-every's) */
	long save_every;                 /* --save-every N: 0 only at the end */
	double collective_timeout;       /* --collective-timeout S: under mpirun, the longest wait in a collective */
	bool collective_timeout_set;
	const char *input_name[RT_MAX_INPUT_FILES], *input_file[RT_MAX_INPUT_FILES];
	int ninput_files;
	const char *val_name[RT_MAX_INPUT_FILES], *val_file[RT_MAX_INPUT_FILES]; /* --val-input NAME=FILE */
	int nval_files;
} RtOpts;
void rt_parse_opts(RtOpts *o, int argc, char **argv);
/* after dp_step (update.c): the gradients summed across ranks, clipped (--clip-grad, with gbuf the
 * resident gradients' host buffers), the parameters updated, the streamed ones' steps queued where
 * deferred (c->deferred), the buffers given their new values */
void rt_optimizer_step(RtCtx *c, const RtOpts *o, void **gbuf);
/* state files (state.c): parameters, buffers, adam's moments (moments[2 i], [2 i + 1] for params[i]),
 * the step and the run's settings; rt_load_state checks the settings and returns the step */
void rt_save_state(const char *path, const RtModel *m, const RtOpts *o, void *const *params, void *const *moments, long step);
/* the settings a state records, which a resumed run and every rank must share: their names and
 * values (at most 16); returns how many */
int rt_run_fields(const RtModel *m, const RtOpts *o, const char **names, char (*v)[64]);
long rt_load_state(const char *path, const RtModel *m, const RtOpts *o, void **params, void **moments);
/* the learning rate of 0-based step t: --lr-schedule after --warmup */
double rt_lr_at(const RtOpts *o, long t);
/* a bad command line: the message, a pointer to --help, exit 2 (trapped: rt_fail's status 2) */
noreturn void rt_usage(const char *fmt, const char *arg);
/* --help's text on stdout */
void rt_help(void);

/* an input's data (data.c) */
typedef struct {
	void *rows;        /* N rows in the input's dtype */
	int64_t n, row;    /* rows; elements per row */
	bool shuffle;      /* training reads the rows in an order drawn for each epoch (a file of more than a batch) */
	bool windows;      /* training reads windows at random elements (a text file) */
	int64_t *perm, perm_epoch;
	void *batch[RT_INFLIGHT]; /* pinned staging, one per step in flight */
	bool on_device;    /* the API's batch put in device memory, in the input's place already: no upload */
} RtData;
/* a file's rows for input t, every entry checked against its type */
void rt_load_data(RtData *d, const RtTensor *t, const char *path);
/* the synthetic default (see --help) for the inputs without a file */
void rt_synthesize(RtData *data, const RtModel *m, uint64_t seed);
/* stages step `step`'s batch in pinned buffer `slot`, which no queued copy still reads; training
 * (train) in each input's order (shuffled, windows), else its rows in turn */
void rt_upload_batch(RtCtx *c, RtData *data, long step, int slot, bool train);
int64_t rt_batch_rows(const RtTensor *t);
/* splitmix64, and normals by Box-Muller */
void rt_rng_seed(uint64_t seed);
uint64_t rt_rng_next(void);
double rt_rng_uniform(void);
double rt_rng_normal(void);

#endif
