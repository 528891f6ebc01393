/* session: what the runtime's files share about one training session (the executable's, or a library's
 * through dpc.h): the session's phases in order, and where each lives. Internal to the runtime. */
#ifndef DPRT_SESSION_H
#define DPRT_SESSION_H
#include <stdio.h>

#include "rt.h"

/* What a training run measured; times are wall-clock seconds per phase. */
typedef struct {
	long steps;
	double first, last;
	double report[16]; /* the reports of the last step */
	double setup_s;    /* options, data, parameters, device arena, upload */
	double train_s;    /* the training loop */
	double first_s;    /* step 1 alone: ms_per_step leaves out its one-time costs */
	double save_s;     /* --save and --dump-grads; validation's time too (val_s apart) */
	double val_s;      /* the validation loss's evaluations */
	int64_t predicted; /* the arena, optimizer state included */
	bool saved;        /* --save wrote the parameters */
	bool checked;      /* under mpirun, the parameters came down to compare the ranks' */
	long start;        /* --resume: the step the run continued from */
	double val;        /* the last validation loss (NAN: none yet), of step val_step */
	long val_step;
	int64_t extra_h2d, extra_d2h; /* adam's moments to the device on --resume, states to the host */
	long graph_steps;  /* --graph: the steps run as the captured graph, its capture's included */
} Run;

/* the progress line a person reads, and the JSON lines a script plots */
typedef struct {
	bool tty;         /* stdout is a terminal: one line, redrawn in place */
	double ema, wsum; /* the loss's exponential average over about 10 steps, debiased by wsum */
	double t_line;    /* when the last line was printed (training time) */
	long line_done;   /* the steps done at it */
	double t_step;    /* when the last step completed */
	int64_t tokens;   /* ids a step reads (the first input an embed reads), else 0 */
	FILE *log;        /* --log-json */
	bool open_ended;  /* a library's session without --steps: no last step, no ETA */
	RtJson json;
} Progress;


/* one training session: what its phases share. The executable has one (main.c, through dpc.h's API);
 * a library's host program opens one at a time (api.c). */
typedef struct {
	RtOpts o;
	RtModel model;
	RtCtx ctx;
	RtData data[RT_MAX_INPUTS], val[RT_MAX_INPUTS]; /* the training and validation data */
	bool validate, saves_state;
	bool synthetic;               /* no data option: every input synthetic (said on the first line) */
	int host_threads;             /* the threads of the streamed parameters' steps on the host */
	void *host[RT_MAX_PARAMS];    /* the parameters on the host (the pool's, for streamed ones) */
	void *mom[2 * RT_MAX_PARAMS]; /* adam's moments on the host, for state files */
	void *gbuf[RT_MAX_PARAMS];    /* --clip-grad: the resident gradients on the host */
	unsigned char *loss_slots;    /* pinned, per fence slot: the loss, then each report */
	int nres;                     /* 1 + the reports */
	long start;                   /* the step the run starts at (resumed: the state's) */
	Run r;
	char *rank_paths[7];          /* under mpirun, the outputs' paths made for this rank */
	int64_t param_bytes;
	double t_start, t0;           /* the run's start, and the training's */
	/* the API's own: the batch a host program put (dpc_put), one batch of rows per input, and which
	 * inputs have one since the last step; the steps done; the progress line; the last step's reports */
	RtData put[RT_MAX_INPUTS];
	bool put_set[RT_MAX_INPUTS];
	long done;
	Progress pg;
	bool pg_open;
	double loss, report[16];
	bool api;                     /* a library's session (dpc.h): no signal handlers of its own */
	bool dev_up;                  /* the device's init ran */
	bool finished;                /* the run's closing work (rt_finish) is done */
	/* --graph: the step captured once, and the counters it advances by (run_step) */
	bool graph_ready;
	RtCounters graph_before, graph_after;
} Session;


/* session.c: the phases in order: the options (argv as main's), the model compiled in, the data, every
 * buffer; release gives everything back. Failures go through rt_fail. */
void rt_options(Session *S, int argc, char **argv);
void rt_open_model(Session *S);
void rt_read_data(Session *S);
void rt_allocate(Session *S);
void rt_release(Session *S);
/* the parameters (or their gradients) and adam's moments to the host; the loss */
void rt_download_params(RtCtx *c, void **host, bool grads);
void rt_download_moments(RtCtx *c, void **mom);
double rt_read_loss(RtCtx *c);
void *rt_pinned(RtCtx *c, int64_t bytes, const char *what);
/* the batches that hold a data set's rows once; the forward on nb of them, dropout off (the mean loss, the
 * reports' means in rep) */
long rt_batches(const RtModel *m, const RtData *data);
double rt_mean_loss(RtCtx *c, RtData *data, long nb, double *rep);
/* resumed or loaded: the parameters and moments on the host up to the device (session.c) */
void rt_upload_state(Session *S);

/* train.c: the training loop (the executable's run); one step queued (the loop's and the API's: the same
 * work, so the same bits), data the inputs' rows it reads */
int rt_train(Session *S);
void rt_queue_step(Session *S, RtData *data, long s, int slot, double *micro, int64_t *moved);
/* step `done` (from 1) complete, its loss and reports in fence slot `slot` (micro: its other micro-batches'
 * losses): the run's last loss and reports; a loss not finite fails */
void rt_step_done(Session *S, long done, int slot, double micro);
/* the progress line and --log-json, opened before the first step, closed after the last */
void rt_progress_open(Session *S);
void rt_progress_close(Session *S);

/* report.c */
double rt_now(void);
const char *rt_mib(int64_t b);
const char *rt_json_real(char *buf, double v);
void rt_announce(RtCtx *c, const RtOpts *o, const Run *r, int64_t param_bytes, int threads, bool synthetic);
void rt_progress(Progress *pg, const RtOpts *o, const RtModel *m, const Run *r, long done, double t, int64_t moved);
void rt_write_summary(RtCtx *c, const RtOpts *o, const Run *r);
void rt_memplot(RtCtx *c, const RtOpts *o);
void rt_finish(Session *S);
int rt_evaluate(RtCtx *c, const RtOpts *o, RtData *data);

/* check.c: --gradcheck */
int rt_gradcheck(RtCtx *c, const RtOpts *o, void **host);

/* ranks.c: under mpirun, what the ranks must share */
const char *rt_rank_path(const char *path, char **made);
void rt_ranks_identical(RtCtx *c, void **host);
void rt_ranks_agree(const RtModel *m, const RtOpts *o, const RtData *data, bool saves_state);
void rt_ranks_start_alike(const RtModel *m, const RtOpts *o, long start, void *const *host, void *const *mom);
#endif
