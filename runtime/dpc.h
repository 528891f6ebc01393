/* dpc.h: the C interface of a model dpc compiled as a shared library.
 *
 *     dpc model.dp --emit=lib -o libmodel.so
 *
 * builds the model, its training step and the runtime into one library whose
 * only exported symbols are the dpc_ functions below. The executable dpc
 * builds by default is a client of this same interface (runtime/main.c).
 *
 * A session is what one run of the executable is: the options (the
 * executable's, as its --help lists them), the model's parameters
 * (initialised, loaded with --init, or resumed with --resume), its device
 * memory (one allocation, as planned), and the steps. Through the API the
 * host program gives the batches (dpc_put) and asks for the steps one at a
 * time; dpc_run does what the executable does with its options instead.
 *
 * Every call returns DPC_OK or an error code, never exits and never prints
 * the error: dpc_error gives its message. A refused call (a wrong shape, a
 * wrong dtype, a name the model does not have, a closed session) changes
 * nothing and the session goes on; a failure while running (a file that
 * cannot be written, a loss that is not finite, a device error) leaves the
 * session open but possibly half-updated, and says so.
 *
 * One session is open at a time in a process, for each library (the runtime
 * keeps its device and thread pool per process); it can be closed and
 * another opened. Calls on one session come from one thread at a time.
 * Data parallelism (mpirun) is the executable's alone.
 *
 * Version: DPC_API_VERSION changes whenever a declaration here does;
 * dpc_version() gives the version the library was built with. */
#ifndef DPC_H
#define DPC_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DPC_API_VERSION 1

/* return codes: also the executable's exit statuses */
enum {
	DPC_OK = 0,
	DPC_ERR_RUN = 1,       /* a failure while running: a file, memory, the device, a loss not finite */
	DPC_ERR_USAGE = 2,     /* a refused call: an option, a name, a shape, a dtype, a size */
	DPC_ERR_STATE = 3,     /* a session closed, not open, or a second one open */
	DPC_ERR_INTERNAL = 70, /* a bug in dpc: please report it with the message */
};

/* where dpc_put's data is: host memory, or device memory of the GPU the library was compiled for */
enum { DPC_HOST = 0, DPC_DEVICE = 1 };

/* what dpc_get and dpc_set read and write of a parameter */
enum {
	DPC_VALUE = 0, /* the parameter (a buffer's value), as training reads it */
	DPC_GRAD = 1,  /* its gradient from the last step (dpc_get only; not of streamed parameters) */
	DPC_ADAM_M = 2, /* Adam's first moment */
	DPC_ADAM_V = 3, /* Adam's second moment */
};

typedef struct DpcSession DpcSession;

/* a tensor of the model: an input (dpc_input) or a parameter or buffer (dpc_param) */
typedef struct {
	const char *name;  /* the program's name for it; valid while the session is open */
	const char *file;  /* its name in the files --init, --save and the state read and write (an import's
	                    * module names: layer1.0.conv1.weight); name where the program gives none */
	const char *dtype; /* "f32", "f64", "bf16" or "i32" */
	int rank;
	int64_t dims[8];
	int64_t bytes;
	int kind;          /* DPC_INPUT, DPC_PARAM, DPC_BUFFER */
	int classes;       /* an input of class labels: the classes (0 otherwise) */
} DpcTensor;
enum { DPC_INPUT = 0, DPC_PARAM = 1, DPC_BUFFER = 2 };

int dpc_version(void);

/* A session with the executable's options (argv[0..argc), without a program name; NULL and 0 for none),
 * the parameters made as the executable makes them. *out is the session, also when the call fails
 * (dpc_error(*out) says why, and dpc_close ends it); NULL only when out is. */
int dpc_open(DpcSession **out, int argc, const char *const *argv);

/* the message of the session's last failed call ("" after a success); dpc_error(NULL): why the last
 * dpc_open that gave no session refused */
const char *dpc_error(const DpcSession *s);

/* the model: its name, its inputs, parameters and buffers, the reports its loss block makes, the
 * optimizer compiled in ("sgd" or "adam"), the steps done (a resumed session counts the state's) */
const char *dpc_model(const DpcSession *s);
int dpc_inputs(const DpcSession *s);
int dpc_input(const DpcSession *s, int i, DpcTensor *t);
int dpc_params(const DpcSession *s);
int dpc_param(const DpcSession *s, int i, DpcTensor *t);
int dpc_reports(const DpcSession *s);
const char *dpc_optimizer(const DpcSession *s);
long dpc_steps_done(const DpcSession *s);

/* The next batch of input `name`: data of that input's dtype and exactly its shape (rank, dims), in host
 * memory, or device memory with DPC_DEVICE (GPU libraries). Copied at once: data may be reused on return.
 * Once any input is put, each step and evaluation reads every input from what was put (each must have
 * been, once at least); with none put, the steps read the options' data (--data, or synthetic), as the
 * executable's. */
int dpc_put(DpcSession *s, const char *name, const void *data, const char *dtype, int rank, const int64_t *dims,
            int where);

/* One training step on the batch: the loss (the mean of --accum's micro-batches) in *loss unless NULL,
 * the reports after it (dpc_report). Progress lines, --log-json, --trace, --profile and --save-state
 * work as in the executable, counting steps from 1. With batches put, --accum must be 1. */
int dpc_step(DpcSession *s, double *loss);

/* The forward alone on the batch (dropout off, nothing updated): the loss, and the reports after it. */
int dpc_eval(DpcSession *s, double *loss);

/* report i of the last step or evaluation: its name and value (either may be NULL) */
int dpc_report(const DpcSession *s, int i, const char **name, double *value);

/* A parameter's or buffer's value, gradient or Adam moment (what) by name, in its dtype: bytes must be
 * its size (DpcTensor.bytes). Names are the model's (dpc_param), or the names its files use (load("...")). */
int dpc_get(DpcSession *s, const char *name, int what, void *dst, int64_t bytes);
int dpc_set(DpcSession *s, const char *name, int what, const void *src, int64_t bytes);

/* the parameters and buffers to a safetensors file under their file names (the executable's --save); the whole state, moments
 * and step included (--save-state); a state saved so, resumed (--resume): the steps go on from its step.
 * Files are written atomically. */
int dpc_save(DpcSession *s, const char *path);
int dpc_save_state(DpcSession *s, const char *path);
int dpc_resume(DpcSession *s, const char *path);

/* What the executable does with the session's options: train (--steps from the options' data), or
 * --eval, or --gradcheck; its lines printed, its files written. The status the executable exits with. */
int dpc_run(DpcSession *s);

/* Ends the session: after steps through the API, the executable's closing work (--save, --summary,
 * --trace, --memplot, --profile's report, the last line unless --quiet), then everything given back. The session
 * is closed even when that work fails (the code says so); later calls on it return DPC_ERR_STATE. */
int dpc_close(DpcSession *s);

#ifdef __cplusplus
}
#endif
#endif
