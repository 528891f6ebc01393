/* util: arena memory, growable arrays, threads and child processes, compiler-bug aborts, user diagnostics. */
#ifndef DPC_UTIL_H
#define DPC_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

/* A source location. Every token, AST node and IR op carries one. */
typedef struct {
	const char *file;
	int line, col;
} Loc;

/* Compiler memory: one arena, freed at exit. */
void *ar_alloc(size_t n);            /* zeroed */
void *ar_realloc(void *p, size_t old, size_t n);
char *ar_strdup(const char *s);
char *ar_strndup(const char *s, size_t n);
char *ar_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ar_free_all(void);

/* Growable array of any element type: Vec(int) v = {0}; vec_push(&v, 3); */
#define Vec(T) struct { T *data; int len, cap; }
#define vec_push(v, x) do { \
	if ((v)->len == (v)->cap) { \
		int nc_ = (v)->cap ? 2 * (v)->cap : 8; \
		(v)->data = ar_realloc((v)->data, (size_t)(v)->cap * sizeof *(v)->data, (size_t)nc_ * sizeof *(v)->data); \
		(v)->cap = nc_; \
	} \
	(v)->data[(v)->len++] = (x); \
} while (0)

/* Names to ints, from the arena: lookups stay constant-time however many
 * names a program declares. Keys are not copied. */
typedef struct {
	const char **keys;
	int *vals;
	int cap, len;
} Map;
int map_get(const Map *m, const char *key); /* -1 when absent */
void map_put(Map *m, const char *key, int val);

/* Two pieces of work at once: side(b) on a second thread while here(a)
 * runs on this one, both done on return; where no thread starts, side(b)
 * runs here after here(a), and with side NULL here(a) alone. The two must
 * write nothing the other reads (the searches give each its own copy). */
void util_pair(void *(*here)(void *), void *a, void *(*side)(void *), void *b);

/* Pieces of work 0..n-1, each(arg, i) once for each, on up to `threads`
 * threads (this one among them), all done on return. Which thread runs a
 * piece may differ from run to run: each must write only what is its own. */
void util_parallel(int n, int threads, void (*each)(void *arg, int i), void *arg);
/* the CPUs this process may run on (its affinity), at least 1 */
int util_cpus(void);

/* fork() with stdout and stderr flushed first, whose child ends when this
 * process ends (it is killed: a compile that fails ends dpc before its
 * children are waited for). 0 in the child, its pid here, -1 where none. */
int util_fork(void);

/* A piece of work in a child process beside this one: run(arg, out)
 * fills out[0..size), its output to stdout and stderr dropped (this
 * process prints what it keeps), and util_child_result reads it back and
 * waits for the child: true where the whole result came and the child
 * ended with status 0. With no child (fork or pipe failed), pid is -1 and
 * the caller does the work itself. */
typedef struct {
	int pid, fd;
} UtilChild;
UtilChild util_child_start(void (*run)(void *arg, void *out), void *arg, size_t size);
bool util_child_result(UtilChild c, void *out, size_t size);

/* Compiler bugs: never a user's fault. Names the compiler source location. */
noreturn void die_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define die(...) die_at(__FILE__, __LINE__, __VA_ARGS__)
#define unreachable() die_at(__FILE__, __LINE__, "unreachable")

/* User errors: "file:line:col: error: message", the source line and a caret; exit 1.
 * diag_source() registers a file's text so the line can be shown. */
void diag_source(const char *file, const char *text);
noreturn void diag_error(Loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_note(Loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An error with no source location (bad option, unreadable file): "dpc: error: ...", exit 1. */
noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For a harness that runs many programs in one process (tests/fuzz): while a
 * trap is set, a user error longjmps to it instead of exiting, and a compiler
 * bug aborts, so that the fuzzer reports it. NULL restores exit(). */
void diag_set_trap(jmp_buf *trap);

#endif
