/* rt: files. NumPy .npy input, safetensors parameters, atomic writes.
 * The readers parse from memory (rt_npy_parse, rt_safetensors_parse) and
 * trust nothing a file says: every size is checked for overflow, every
 * offset against the bytes there are, and an error path frees what it
 * allocated before rt_fail (a fuzzer catches it with rt_fail_trap). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

const char *rt_prog = "model";
_Thread_local jmp_buf *rt_fail_trap;

void (*rt_fail_hook)(int status);

uint64_t rt_hash(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

char rt_fail_msg[2048];
int rt_fail_status;

noreturn void rt_fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (rt_fail_trap) {
		/* the message for the trap's setter to give (dpc.h's dpc_error), not printed */
		vsnprintf(rt_fail_msg, sizeof rt_fail_msg, fmt, ap);
		va_end(ap);
		rt_fail_status = status;
		longjmp(*rt_fail_trap, 1);
	}
	fprintf(stderr, "%s: error: ", rt_prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (rt_fail_hook)
		rt_fail_hook(status);
	exit(status);
}

void *rt_host_alloc(int64_t bytes, const char *what)
{
	void *p = bytes >= 0 && (uint64_t)bytes <= SIZE_MAX ? malloc((size_t)(bytes ? bytes : 1)) : NULL;
	if (!p)
		rt_fail(1, "cannot allocate %lld bytes of host memory for %s", (long long)bytes, what);
	return p;
}

void *rt_host_grow(void *p, int64_t bytes, const char *what)
{
	void *q = bytes >= 0 && (uint64_t)bytes <= SIZE_MAX ? realloc(p, (size_t)(bytes ? bytes : 1)) : NULL;
	if (!q)
		rt_fail(1, "cannot allocate %lld bytes of host memory for %s", (long long)bytes, what);
	return q;
}

const char *rt_shape_str(int rank, const int64_t *dim)
{
	static char buf[4][160];
	static int k;
	char *b = buf[k++ & 3];
	int n = snprintf(b, 160, "[");
	for (int i = 0; i < rank && n < 140; i++)
		n += snprintf(b + n, 160 - (size_t)n, "%s%lld", i ? ", " : "", (long long)dim[i]);
	snprintf(b + n, 160 - (size_t)n, "]");
	return b;
}

int rt_elem_bytes(const char *dtype) { return !strcmp(dtype, "f64") ? 8 : !strcmp(dtype, "bf16") ? 2 : 4; }
int rt_real_index(const char *dtype) { return !strcmp(dtype, "f32") ? 0 : !strcmp(dtype, "bf16") ? 1 : !strcmp(dtype, "f64") ? 2 : -1; }

/* bf16: the high half of an f32, rounded to nearest even (NaN stays NaN) */
float rt_bf16_to_f32(uint16_t h)
{
	uint32_t w = (uint32_t)h << 16;
	float f;
	memcpy(&f, &w, 4);
	return f;
}

uint16_t rt_f32_to_bf16(float f)
{
	uint32_t w;
	memcpy(&w, &f, 4);
	if (f != f)
		return 0x7fc0;
	return (uint16_t)((w + 0x7fff + ((w >> 16) & 1)) >> 16);
}

/* f32, f64, bf16 or i32 (the names the model description allows), told
 * apart by their first two letters: these run once per element */
static bool is_f64(const char *dtype) { return dtype[0] == 'f' && dtype[1] == '6'; }

double rt_get(const void *buf, const char *dtype, int64_t i)
{
	if (is_f64(dtype))
		return ((const double *)buf)[i];
	if (dtype[0] == 'i')
		return ((const int32_t *)buf)[i];
	if (dtype[0] == 'b')
		return rt_bf16_to_f32(((const uint16_t *)buf)[i]);
	return ((const float *)buf)[i];
}

void rt_set(void *buf, const char *dtype, int64_t i, double v)
{
	if (is_f64(dtype))
		((double *)buf)[i] = v;
	else if (dtype[0] == 'i')
		((int32_t *)buf)[i] = (int32_t)v;
	else if (dtype[0] == 'b')
		((uint16_t *)buf)[i] = rt_f32_to_bf16((float)v);
	else
		((float *)buf)[i] = (float)v;
}

/* The element count of a shape, or -1 when it (or its size in bytes of
 * `esz`, or of doubles) would not fit in memory. */
static int64_t checked_numel(int rank, const int64_t *dim, int64_t esz)
{
	int64_t n = 1, bytes;
	for (int i = 0; i < rank; i++)
		if (dim[i] < 0 || __builtin_mul_overflow(n, dim[i], &n))
			return -1;
	if (__builtin_mul_overflow(n, esz > 8 ? esz : 8, &bytes) || (uint64_t)bytes > SIZE_MAX / 2)
		return -1;
	return n;
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		rt_fail(1, "cannot open %s: %s", path, strerror(errno));
	size_t cap = 1 << 16, n = 0;
	unsigned char *buf = malloc(cap);
	size_t r;
	while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			unsigned char *more = cap <= SIZE_MAX / 2 ? realloc(buf, cap *= 2) : NULL;
			if (!more)
				free(buf);
			buf = more;
		}
	}
	bool bad = ferror(f);
	fclose(f);
	if (!buf)
		rt_fail(1, "cannot allocate host memory to read %s", path);
	if (bad) {
		free(buf);
		rt_fail(1, "cannot read %s", path);
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

/* ---- atomic writes, and their temporary files ---- */

/* The temporary file being written, for the signal handler to remove. */
static char tmp_path[4096];
static volatile sig_atomic_t tmp_live;

static void on_signal(int sig)
{
	if (tmp_live)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

void rt_cleanup_on_signals(void)
{
	int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		struct sigaction sa, old;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		/* a signal ignored when we started (nohup) stays ignored */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
}

static void set_tmp(const char *path)
{
	tmp_live = 0;
	snprintf(tmp_path, sizeof tmp_path, "%s.tmp.%d", path, (int)getpid());
	tmp_live = 1;
}

/* rt_write_atomic's work: NULL, or why it failed (the caller frees its own memory before it fails) */
static const char *write_atomic(const char *path, const void *data, size_t len)
{
	static char why[4400];
	set_tmp(path);
	FILE *f = fopen(tmp_path, "wb");
	if (!f) {
		tmp_live = 0;
		snprintf(why, sizeof why, "cannot write %s: %s", tmp_path, strerror(errno));
		return why;
	}
	bool ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp_path, path) != 0) {
		int e = errno;
		unlink(tmp_path);
		tmp_live = 0;
		snprintf(why, sizeof why, "cannot write %s: %s", path, strerror(e));
		return why;
	}
	tmp_live = 0;
	return NULL;
}

void rt_write_atomic(const char *path, const void *data, size_t len)
{
	const char *why = write_atomic(path, data, len);
	if (why)
		rt_fail(1, "%s", why);
}

void rt_check_output(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	const char *base = slash ? slash + 1 : path;
	if (!*base)
		rt_fail(1, "cannot write %s: it names a directory", path);
	DIR *d = opendir(dir);
	if (!d)
		rt_fail(1, "cannot write %s: %s", path, strerror(errno));
	size_t nb = strlen(base);
	for (struct dirent *e; (e = readdir(d));) {
		const char *s = e->d_name;
		if (strncmp(s, base, nb) || strncmp(s + nb, ".tmp.", 5))
			continue;
		s += nb + 5;
		char *end;
		errno = 0;
		long pid = strtol(s, &end, 10);
		if (end == s || *end || *s < '0' || *s > '9' || errno || pid <= 0 || pid > INT32_MAX)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char stale[8192];
		snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
		fprintf(stderr, "%s: warning: removing stale temporary file %s left by an interrupted save\n", rt_prog, stale);
		if (unlink(stale) != 0)
			fprintf(stderr, "%s: warning: cannot remove %s: %s\n", rt_prog, stale, strerror(errno));
	}
	closedir(d);
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		rt_fail(1, "cannot write %s: it is a directory", path);
	/* a probe: the temporary file the write will use, created and removed */
	set_tmp(path);
	int fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0666);
	if (fd < 0) {
		int e = errno;
		tmp_live = 0;
		if (e != EEXIST)
			rt_fail(1, "cannot write %s: %s", path, strerror(e));
		if (access(dir, W_OK) != 0)
			rt_fail(1, "cannot write %s: %s", path, strerror(errno));
		return;
	}
	close(fd);
	unlink(tmp_path);
	tmp_live = 0;
}

/* ---- .npy ---- */

#define NPY_FAIL(...) do { free(h); rt_fail(1, __VA_ARGS__); } while (0)

double *rt_npy_parse(const char *name, const unsigned char *b, size_t len, int *rank, int64_t *dim)
{
	char *h = NULL;
	if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
		rt_fail(1, "%s: not a .npy file (bad magic)", name);
	int ver = b[6];
	if (ver < 1 || ver > 3)
		rt_fail(1, "%s: unsupported .npy format version %d", name, ver);
	size_t start = ver == 1 ? 10 : 12;
	if (len < start)
		rt_fail(1, "%s: truncated .npy header", name);
	size_t hlen = ver == 1 ? (size_t)(b[8] | b[9] << 8) : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
	if (hlen > len - start)
		rt_fail(1, "%s: truncated .npy header", name);
	h = malloc(hlen + 1);
	if (!h)
		rt_fail(1, "cannot allocate host memory to read %s", name);
	memcpy(h, b + start, hlen);
	h[hlen] = 0;
	if (strlen(h) != hlen)
		NPY_FAIL("%s: malformed .npy header (a NUL byte in it)", name);
	/* a Python dict literal: {...}, then padding */
	size_t first = strspn(h, " "), last = hlen;
	while (last > 0 && (h[last - 1] == ' ' || h[last - 1] == '\n' || h[last - 1] == '\t' || h[last - 1] == '\r'))
		last--;
	if (h[first] != '{' || last == 0 || h[last - 1] != '}')
		NPY_FAIL("%s: malformed .npy header (not a {...} dictionary)", name);
	char *d = strstr(h, "'descr'"), *fo = strstr(h, "'fortran_order'"), *sh = strstr(h, "'shape'");
	if (!d || !fo || !sh)
		NPY_FAIL("%s: malformed .npy header", name);
	char descr[16] = {0};
	if (sscanf(strchr(d + 7, '\'') ? strchr(d + 7, '\'') + 1 : "", "%15[^']", descr) != 1)
		NPY_FAIL("%s: malformed .npy dtype", name);
	const char *order = fo + strlen("'fortran_order'");
	while (*order == ' ' || *order == ':')
		order++;
	if (!strncmp(order, "True", 4))
		NPY_FAIL("%s: Fortran-ordered arrays are not supported (save with numpy.ascontiguousarray)", name);
	int esz = 0;
	if (!strcmp(descr, "<f4") || !strcmp(descr, "<i4"))
		esz = 4;
	else if (!strcmp(descr, "<f8") || !strcmp(descr, "<i8"))
		esz = 8;
	else
		NPY_FAIL("%s: unsupported dtype '%s' (use float32, float64, int32 or int64, little-endian)", name, descr);
	char *p = strchr(sh, '(');
	if (!p)
		NPY_FAIL("%s: malformed .npy shape", name);
	p++;
	*rank = 0;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		if (*p < '0' || *p > '9')
			NPY_FAIL("%s: malformed .npy shape", name);
		if (*rank == RT_MAXRANK)
			NPY_FAIL("%s: .npy shape of more than %d dimensions", name, RT_MAXRANK);
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (errno == ERANGE)
			NPY_FAIL("%s: .npy shape dimension %.*s is out of range", name, (int)(end - p), p);
		dim[(*rank)++] = v;
		p = end;
	}
	free(h);
	h = NULL;
	int64_t n = checked_numel(*rank, dim, esz);
	if (n < 0)
		rt_fail(1, "%s: shape %s has more elements than fit in memory", name, rt_shape_str(*rank, dim));
	size_t body = start + hlen;
	if ((uint64_t)(len - body) / (uint64_t)esz < (uint64_t)n)
		rt_fail(1, "%s: truncated data: %lld elements need %lld bytes, file has %lld", name, (long long)n,
		        (long long)n * esz, (long long)(len - body));
	double *out = rt_host_alloc((int64_t)sizeof(double) * n, name);
	for (int64_t i = 0; i < n; i++) {
		const unsigned char *e = b + body + (size_t)i * (size_t)esz;
		if (descr[1] == 'f' && esz == 4) {
			float v;
			memcpy(&v, e, 4);
			out[i] = v;
		} else if (descr[1] == 'f') {
			memcpy(&out[i], e, 8);
		} else if (esz == 4) {
			int32_t v;
			memcpy(&v, e, 4);
			out[i] = v;
		} else {
			int64_t v;
			memcpy(&v, e, 8);
			out[i] = (double)v;
		}
	}
	return out;
}

unsigned char *rt_load_bytes(const char *path, size_t *len) { return slurp(path, len); }

double *rt_load_npy(const char *path, int *rank, int64_t *dim)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	double *out = rt_npy_parse(path, b, len, rank, dim);
	free(b);
	return out;
}

/* ---- a small JSON reader, enough for safetensors headers ---- */

/* What a failure frees: the strings being read and the seen-set. */
typedef struct {
	const char *p, *end, *file;
	char *key, *field;
	bool *seen;
	int depth;
} Json;

static noreturn __attribute__((format(printf, 2, 3))) void jerror(Json *j, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	free(j->key);
	free(j->field);
	free(j->seen);
	j->key = j->field = NULL;
	j->seen = NULL;
	rt_fail(1, "%s", msg);
}

static noreturn void jfail(Json *j) { jerror(j, "%s: corrupt safetensors header", j->file); }

static void jspace(Json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r'))
		j->p++;
}

static bool jlit(Json *j, char c)
{
	jspace(j);
	if (j->p < j->end && *j->p == c) {
		j->p++;
		return true;
	}
	return false;
}

static char *jstring(Json *j)
{
	if (!jlit(j, '"'))
		jfail(j);
	const char *s = j->p;
	while (j->p < j->end && *j->p != '"') {
		if (*j->p == '\\' && j->end - j->p < 2)
			jfail(j);
		j->p += *j->p == '\\' ? 2 : 1;
	}
	if (j->p >= j->end)
		jfail(j);
	char *r = strndup(s, (size_t)(j->p++ - s));
	if (!r)
		jerror(j, "%s: out of memory reading the safetensors header", j->file);
	return r;
}

/* an integer, within the header's bytes; negative ones are the caller's to refuse */
static int64_t jint(Json *j)
{
	jspace(j);
	bool neg = j->p < j->end && *j->p == '-';
	const char *q = j->p + neg;
	if (q >= j->end || *q < '0' || *q > '9')
		jfail(j);
	int64_t v = 0;
	for (; q < j->end && *q >= '0' && *q <= '9'; q++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *q - '0', &v))
			jerror(j, "%s: a number in the safetensors header is out of range", j->file);
	j->p = q;
	return neg ? -v : v;
}

static void jskip(Json *j)
{
	jspace(j);
	if (j->p >= j->end)
		jfail(j);
	if (*j->p == '"') {
		free(jstring(j));
	} else if (*j->p == '{' || *j->p == '[') {
		if (++j->depth > 64)
			jerror(j, "%s: safetensors header nested too deeply", j->file);
		char close = *j->p == '{' ? '}' : ']';
		j->p++;
		if (!jlit(j, close)) {
			do {
				if (close == '}') {
					free(jstring(j));
					if (!jlit(j, ':'))
						jfail(j);
				}
				jskip(j);
			} while (jlit(j, ','));
			if (!jlit(j, close))
				jfail(j);
		}
		j->depth--;
	} else {
		const char *s = j->p;
		while (j->p < j->end && !strchr(",}] \n\t\r", *j->p))
			j->p++;
		if (j->p == s)
			jfail(j);
	}
}

/* ---- safetensors ---- */

/* a parameter's name in safetensors files: load("NAME")'s, else its own */
static const char *file_name(const RtTensor *t) { return t->saved[0] ? t->saved : t->name; }

/* A stacked parameter whose load name holds "{B}" (or "{}", B = 0) is one
 * tensor a layer in the files, layer l under the name with B + l in its
 * place: PyTorch's h.0.attn.weight, h.1.attn.weight, ... Returns the
 * placeholder's start in saved, or NULL; *base and *after are its number and
 * the text after it. */
static const char *layer_slot(const RtTensor *t, long *base, const char **after)
{
	const char *at = t->stacked ? strchr(t->saved, '{') : NULL;
	if (!at)
		return NULL;
	char *end;
	*base = strtol(at + 1, &end, 10);
	if (*end != '}')
		return NULL;
	*after = end + 1;
	return at;
}

/* layer l's name of t (its whole name when t is not one tensor a layer) */
static const char *layer_name(const RtTensor *t, int64_t l, char *buf, size_t cap)
{
	long base;
	const char *after, *at = layer_slot(t, &base, &after);
	if (!at)
		return file_name(t);
	snprintf(buf, cap, "%.*s%lld%s", (int)(at - t->saved), t->saved, (long long)(base + l), after);
	return buf;
}

/* the layer of t that key names, or -1 */
static int64_t key_layer(const RtTensor *t, const char *key)
{
	long base;
	const char *after, *at = layer_slot(t, &base, &after);
	if (!at)
		return strcmp(key, file_name(t)) ? -1 : 0;
	size_t pre = (size_t)(at - t->saved), post = strlen(after), n = strlen(key);
	if (n <= pre + post || strncmp(key, t->saved, pre) || strcmp(key + n - post, after))
		return -1;
	const char *d = key + pre;
	if (*d < '0' || *d > '9' || (*d == '0' && d + 1 < key + n - post))
		return -1;
	int64_t v = 0;
	for (; d < key + n - post; d++) {
		if (*d < '0' || *d > '9' || v > INT32_MAX)
			return -1;
		v = v * 10 + (*d - '0');
	}
	return v >= base && v - base < t->dim[0] ? v - base : -1;
}

/* the tensors a parameter is in the files: one, or one a layer */
static int64_t units(const RtTensor *t)
{
	long base;
	const char *after;
	return layer_slot(t, &base, &after) ? t->dim[0] : 1;
}

void rt_save_safetensors(const char *path, const RtModel *m, void *const *bufs, bool grads)
{
	rt_save_tensors(path, m, bufs, grads, grads ? "gradients" : "parameters", "");
}

void rt_save_tensors(const char *path, const RtModel *m, void *const *bufs, bool grads, const char *content, const char *meta)
{
	size_t cap = 4096 + strlen(meta), n = 0;
	for (int i = 0; i < m->nparams; i++)
		cap += 512 * (size_t)units(&m->params[i]);
	char *h = rt_host_alloc((int64_t)cap, path);
	n += (size_t)snprintf(h + n, cap - n, "{\"__metadata__\":{\"format\":\"pt\",\"model\":\"%s\",\"content\":\"%s\"%s}",
	                      m->model, content, meta);
	int64_t off = 0;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		if (grads && t->buffer)
			continue; /* a buffer has no gradient */
		const char *dt = !strcmp(t->dtype, "f64") ? "F64" : !strcmp(t->dtype, "bf16") ? "BF16" : "F32";
		int64_t u = units(t), bytes = t->bytes / u;
		for (int64_t l = 0; l < u; l++) { /* a layer's tensor lacks the stack axis */
			char buf[160];
			n += (size_t)snprintf(h + n, cap - n, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", layer_name(t, l, buf, sizeof buf), dt);
			for (int k = u > 1; k < t->rank; k++)
				n += (size_t)snprintf(h + n, cap - n, "%s%lld", k > (u > 1) ? "," : "", (long long)t->dim[k]);
			n += (size_t)snprintf(h + n, cap - n, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + bytes));
			off += bytes;
		}
	}
	n += (size_t)snprintf(h + n, cap - n, "}");
	while (n % 8)
		h[n++] = ' ';
	size_t total = 8 + n + (size_t)off;
	unsigned char *out = rt_host_alloc((int64_t)total, path);
	for (int k = 0; k < 8; k++)
		out[k] = (unsigned char)((uint64_t)n >> (8 * k));
	memcpy(out + 8, h, n);
	size_t at = 8 + n;
	for (int i = 0; i < m->nparams; i++) {
		if (grads && m->params[i].buffer)
			continue;
		memcpy(out + at, bufs[i], (size_t)m->params[i].bytes);
		at += (size_t)m->params[i].bytes;
	}
	free(h);
	/* under the API a failed write goes on: nothing of this call's is left allocated */
	const char *why = write_atomic(path, out, total);
	free(out);
	if (why)
		rt_fail(1, "%s", why);
}

void rt_safetensors_parse(const char *name, const unsigned char *b, size_t len, const RtModel *m, void **bufs, RtMeta *meta)
{
	if (meta)
		meta->n = 0;
	if (len < 8)
		rt_fail(1, "%s: not a safetensors file (too short)", name);
	uint64_t hlen = 0;
	for (int k = 0; k < 8; k++)
		hlen |= (uint64_t)b[k] << (8 * k);
	if (hlen > len - 8)
		rt_fail(1, "%s: not a safetensors file (header length %llu exceeds the file)", name, (unsigned long long)hlen);
	Json j = {(const char *)b + 8, (const char *)b + 8 + hlen, name, NULL, NULL, NULL, 0};
	const unsigned char *data = b + 8 + hlen;
	size_t dlen = len - 8 - (size_t)hlen;
	/* seen: a flag per tensor of the file's, first[i] the first of parameter i's */
	int64_t first[RT_MAX_PARAMS + 1];
	first[0] = 0;
	for (int i = 0; i < m->nparams; i++)
		first[i + 1] = first[i] + units(&m->params[i]);
	j.seen = calloc((size_t)first[m->nparams] + 1, 1);
	if (!j.seen)
		rt_fail(1, "%s: out of memory", name);
	if (!jlit(&j, '{'))
		jfail(&j);
	if (!jlit(&j, '}')) {
		do {
			j.key = jstring(&j);
			if (!jlit(&j, ':'))
				jfail(&j);
			if (!strcmp(j.key, "__metadata__")) {
				/* string values kept for the caller (at most RT_META of them), anything else skipped */
				if (!meta || !jlit(&j, '{')) {
					jskip(&j);
				} else if (!jlit(&j, '}')) {
					do {
						j.field = jstring(&j); /* jerror frees it */
						if (!jlit(&j, ':'))
							jfail(&j);
						const char *at = j.p;
						while (at < j.end && (*at == ' ' || *at == '\n' || *at == '\t' || *at == '\r'))
							at++;
						if (at < j.end && *at == '"' && meta->n < RT_META) {
							char *v = jstring(&j);
							meta->key[meta->n] = j.field;
							meta->val[meta->n++] = v;
						} else {
							free(j.field);
							j.field = NULL; /* before jskip, whose failure frees j.field */
							jskip(&j);
						}
						j.field = NULL;
					} while (jlit(&j, ','));
					if (!jlit(&j, '}'))
						jfail(&j);
				}
				free(j.key);
				j.key = NULL;
				continue;
			}
			int which = -1;
			int64_t layer = -1;
			for (int i = 0; i < m->nparams && which < 0; i++)
				if ((layer = key_layer(&m->params[i], j.key)) >= 0)
					which = i;
			/* PyTorch's batch-normalization step counters, which a state dict holds and dpc does not keep */
			size_t kl = strlen(j.key), cl = strlen("num_batches_tracked");
			if (which < 0 && kl >= cl && !strcmp(j.key + kl - cl, "num_batches_tracked")) {
				jskip(&j);
				free(j.key);
				j.key = NULL;
				continue;
			}
			if (which < 0)
				jerror(&j, "%s: tensor '%.200s' is not a parameter of model %s", name, j.key, m->model);
			if (j.seen[first[which] + layer])
				jerror(&j, "%s: tensor '%.200s' appears twice", name, j.key);
			const RtTensor *whole = &m->params[which];
			/* one layer of a parameter stored a tensor a layer: its shape without the stack axis */
			RtTensor one = *whole;
			snprintf(one.name, sizeof one.name, "%.127s", j.key); /* the errors name it as the file does */
			if (units(whole) > 1) {
				one.rank--;
				memmove(one.dim, one.dim + 1, sizeof one.dim[0] * (size_t)one.rank);
				one.numel /= whole->dim[0];
			}
			const RtTensor *t = &one;
			int64_t at0 = (units(whole) > 1 ? layer : 0) * one.numel;
			char dtype[8] = "";
			int rank = -1;
			int64_t dim[RT_MAXRANK], a = -1, e = -1;
			if (!jlit(&j, '{'))
				jfail(&j);
			do {
				j.field = jstring(&j);
				if (!jlit(&j, ':'))
					jfail(&j);
				if (!strcmp(j.field, "dtype")) {
					char *s = jstring(&j);
					snprintf(dtype, sizeof dtype, "%s", s);
					free(s);
				} else if (!strcmp(j.field, "shape")) {
					if (!jlit(&j, '['))
						jfail(&j);
					rank = 0;
					if (!jlit(&j, ']')) {
						do {
							if (rank == RT_MAXRANK)
								jerror(&j, "%s: tensor '%s' has more than %d dimensions", name, t->name, RT_MAXRANK);
							dim[rank] = jint(&j);
							if (dim[rank] < 0)
								jerror(&j, "%s: tensor '%s' has a negative dimension %lld", name, t->name,
								       (long long)dim[rank]);
							rank++;
						} while (jlit(&j, ','));
						if (!jlit(&j, ']'))
							jfail(&j);
					}
					if (checked_numel(rank, dim, 8) < 0)
						jerror(&j, "%s: tensor '%s' of shape %s has more elements than fit in memory", name, t->name,
						       rt_shape_str(rank, dim));
				} else if (!strcmp(j.field, "data_offsets")) {
					if (!jlit(&j, '['))
						jfail(&j);
					a = jint(&j);
					if (!jlit(&j, ','))
						jfail(&j);
					e = jint(&j);
					if (!jlit(&j, ']'))
						jfail(&j);
					if (a < 0 || e < 0)
						jerror(&j, "%s: tensor '%s' has negative data offsets [%lld, %lld]", name, t->name, (long long)a,
						       (long long)e);
				} else {
					jskip(&j);
				}
				free(j.field);
				j.field = NULL;
			} while (jlit(&j, ','));
			if (!jlit(&j, '}'))
				jfail(&j);
			bool same = rank == t->rank;
			for (int k = 0; same && k < rank; k++)
				same = dim[k] == t->dim[k];
			if (!same)
				jerror(&j, "%s: tensor '%s' has shape %s, the model's is %s", name, t->name,
				       rank < 0 ? "(none)" : rt_shape_str(rank, dim), rt_shape_str(t->rank, t->dim));
			int esz = !strcmp(dtype, "F32") ? 4 : !strcmp(dtype, "F64") ? 8 : !strcmp(dtype, "BF16") ? 2 : 0;
			if (!esz)
				jerror(&j, "%s: tensor '%s' has dtype '%s' (F32, F64 or BF16 needed)", name, t->name, dtype);
			int64_t want;
			if (a < 0 || e < a || (uint64_t)e > dlen || __builtin_mul_overflow(t->numel, (int64_t)esz, &want) ||
			    e - a != want)
				jerror(&j, "%s: tensor '%s': data offsets [%lld, %lld] do not fit the file or the shape", name, t->name,
				       (long long)a, (long long)e);
			bool is_f32 = !strcmp(t->dtype, "f32") || !strcmp(t->dtype, "bf16"), is_i32 = !strcmp(t->dtype, "i32");
			for (int64_t i = 0; i < t->numel; i++) {
				const unsigned char *p = data + a + i * esz;
				double v;
				if (esz == 2) {
					uint16_t h;
					memcpy(&h, p, 2);
					v = rt_bf16_to_f32(h);
				} else if (esz == 4) {
					float f;
					memcpy(&f, p, 4);
					v = f;
				} else {
					memcpy(&v, p, 8);
				}
				if (!isfinite(v))
					jerror(&j, "%s: tensor '%s' entry %lld is %g, not a finite number", name, t->name, (long long)i, v);
				if (is_f32 && fabs(v) > FLT_MAX)
					jerror(&j, "%s: tensor '%s' entry %lld is %g, out of the range of its %s", name, t->name,
					       (long long)i, v, t->dtype);
				if (is_i32 && (v != floor(v) || v < INT32_MIN || v > INT32_MAX))
					jerror(&j, "%s: tensor '%s' entry %lld is %g, not an i32", name, t->name, (long long)i, v);
				rt_set(bufs[which], t->dtype, at0 + i, v);
			}
			j.seen[first[which] + layer] = true;
			free(j.key);
			j.key = NULL;
		} while (jlit(&j, ','));
		if (!jlit(&j, '}'))
			jfail(&j);
	}
	for (int i = 0; i < m->nparams; i++)
		for (int64_t l = 0; l < units(&m->params[i]); l++)
			if (!j.seen[first[i] + l]) {
				char buf[160];
				jerror(&j, "%s: no tensor named '%s'", name, layer_name(&m->params[i], l, buf, sizeof buf));
			}
	free(j.seen);
}

void rt_load_safetensors(const char *path, const RtModel *m, void **bufs)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	rt_safetensors_parse(path, b, len, m, bufs, NULL);
	free(b);
}
