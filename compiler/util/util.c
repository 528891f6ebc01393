#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Arena: a chain of large blocks; nothing is freed before exit. */
typedef struct Block {
	struct Block *next;
	size_t used, size;
	_Alignas(16) unsigned char mem[];
} Block;

static Block *arena;

void *ar_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (!arena || arena->used + n > arena->size) {
		size_t size = n > (1u << 20) ? n : (1u << 20);
		Block *b = malloc(sizeof *b + size);
		if (!b) {
			fprintf(stderr, "dpc: error: out of memory\n");
			exit(1);
		}
		b->next = arena;
		b->used = 0;
		b->size = size;
		arena = b;
	}
	void *p = arena->mem + arena->used;
	arena->used += n;
	memset(p, 0, n);
	return p;
}

void *ar_realloc(void *p, size_t old, size_t n)
{
	void *q = ar_alloc(n);
	if (p && old)
		memcpy(q, p, old < n ? old : n);
	return q;
}

char *ar_strndup(const char *s, size_t n)
{
	char *p = ar_alloc(n + 1);
	memcpy(p, s, n);
	return p;
}

char *ar_strdup(const char *s) { return ar_strndup(s, strlen(s)); }

char *ar_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *p = ar_alloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* open addressing, linear probing; cap is a power of two, at most half full */
static int slot(const Map *m, const char *key)
{
	int i = (int)(hash(key) & (uint64_t)(m->cap - 1));
	while (m->keys[i] && strcmp(m->keys[i], key) != 0)
		i = (i + 1) & (m->cap - 1);
	return i;
}

int map_get(const Map *m, const char *key)
{
	if (!m->cap)
		return -1;
	int i = slot(m, key);
	return m->keys[i] ? m->vals[i] : -1;
}

void map_put(Map *m, const char *key, int val)
{
	if (2 * (m->len + 1) > m->cap) {
		Map bigger = {0};
		bigger.cap = m->cap ? 2 * m->cap : 16;
		bigger.keys = ar_alloc(sizeof(char *) * (size_t)bigger.cap);
		bigger.vals = ar_alloc(sizeof(int) * (size_t)bigger.cap);
		for (int i = 0; i < m->cap; i++)
			if (m->keys[i])
				map_put(&bigger, m->keys[i], m->vals[i]);
		*m = bigger;
	}
	int i = slot(m, key);
	if (!m->keys[i]) {
		m->keys[i] = key;
		m->len++;
	}
	m->vals[i] = val;
}

typedef struct {
	const char *file, *text;
} Source;

static Vec(Source) sources;

static jmp_buf *trap;

void diag_set_trap(jmp_buf *t) { trap = t; }

/* A user error ends the compilation: exit(1), or back to the harness. */
static noreturn void stop(void)
{
	if (trap)
		longjmp(*trap, 1);
	exit(1);
}

void ar_free_all(void)
{
	while (arena) {
		Block *b = arena;
		arena = b->next;
		free(b);
	}
	/* the registered sources lived in the arena */
	sources.data = NULL;
	sources.len = sources.cap = 0;
}

noreturn void die_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "dpc: internal compiler error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nthis is a bug in dpc, not in your program\n");
	if (trap)
		abort();
	exit(70);
}

void diag_source(const char *file, const char *text)
{
	Source s = {file, text};
	vec_push(&sources, s);
}

/* The line, and a caret under the column; a long line is shown as a window
 * around the column. */
static void show_line(Loc loc)
{
	enum { WIDTH = 120, BEFORE = 60 };
	for (int i = 0; i < sources.len; i++) {
		if (strcmp(sources.data[i].file, loc.file) != 0)
			continue;
		const char *p = sources.data[i].text;
		for (int l = 1; l < loc.line && *p; p++)
			if (*p == '\n')
				l++;
		const char *e = p, *at = p;
		while (*e && *e != '\n')
			e++;
		for (int c = 1; c < loc.col && at < e; c++)
			at++;
		const char *from = e - p > WIDTH && at - p > BEFORE ? at - BEFORE : p;
		const char *to = e - from > WIDTH ? from + WIDTH : e;
		fprintf(stderr, "  %s%.*s%s\n  %s", from > p ? "..." : "", (int)(to - from), from, to < e ? "..." : "",
		        from > p ? "   " : "");
		for (const char *c = from; c < at; c++)
			fputc(*c == '\t' ? '\t' : ' ', stderr);
		fprintf(stderr, "^\n");
		return;
	}
}

static void vdiag(Loc loc, const char *kind, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s:%d:%d: %s: ", loc.file ? loc.file : "<input>", loc.line, loc.col, kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	if (loc.line > 0)
		show_line(loc);
}

noreturn void diag_error(Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdiag(loc, "error", fmt, ap);
	va_end(ap);
	stop();
}

void diag_note(Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdiag(loc, "note", fmt, ap);
	va_end(ap);
}

noreturn void fatal(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "dpc: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	stop();
}

typedef struct {
	void (*each)(void *, int);
	void *arg;
	int n, next;
} Pieces;

static void *take_pieces(void *a)
{
	Pieces *w = a;
	for (int i; (i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n;)
		w->each(w->arg, i);
	return NULL;
}

void util_parallel(int n, int threads, void (*each)(void *arg, int i), void *arg)
{
	enum { MOST = 64 };
	Pieces w = {each, arg, n, 0};
	pthread_t t[MOST];
	int started = 0;
	threads = threads < n ? threads : n;
	while (started < threads - 1 && started < MOST && pthread_create(&t[started], NULL, take_pieces, &w) == 0)
		started++;
	take_pieces(&w);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
}

int util_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int util_fork(void)
{
	fflush(stdout), fflush(stderr);
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* this process ended before the signal was asked for: compared by pid, not with 1, since dpc may be a
		 * container's first process */
		if (getppid() != parent)
			_exit(1);
	}
	return pid;
}

UtilChild util_child_start(void (*run)(void *arg, void *out), void *arg, size_t size)
{
	int io[2];
	if (pipe(io))
		return (UtilChild){-1, -1};
	pid_t pid = util_fork();
	if (pid == 0) {
		close(io[0]);
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, 1), dup2(null, 2);
		if (null > 2)
			close(null);
		void *out = calloc(1, size + 1);
		if (!out)
			_exit(1);
		run(arg, out);
		for (size_t done = 0; done < size;) {
			ssize_t n = write(io[1], (char *)out + done, size - done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				_exit(1);
			done += (size_t)n;
		}
		_exit(0);
	}
	close(io[1]);
	if (pid < 0) {
		close(io[0]);
		return (UtilChild){-1, -1};
	}
	return (UtilChild){pid, io[0]};
}

bool util_child_result(UtilChild c, void *out, size_t size)
{
	if (c.pid < 0)
		return false;
	/* a result past the pipe's buffer comes in pieces */
	size_t done = 0;
	while (done < size) {
		ssize_t n = read(c.fd, (char *)out + done, size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	bool got = done == size;
	close(c.fd);
	int status;
	while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR)
		;
	return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void util_pair(void *(*here)(void *), void *a, void *(*side)(void *), void *b)
{
	pthread_t t;
	bool apart = side && pthread_create(&t, NULL, side, b) == 0;
	here(a);
	if (apart)
		pthread_join(t, NULL);
	else if (side)
		side(b);
}
