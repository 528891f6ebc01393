/* rt: files. NumPy .npy input, safetensors parameters, atomic writes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

const char *rt_prog = "model";

noreturn void rt_fail(int status, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: error: ", rt_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

void *rt_host_alloc(int64_t bytes, const char *what)
{
	void *p = bytes >= 0 ? malloc((size_t)(bytes ? bytes : 1)) : NULL;
	if (!p)
		rt_fail(1, "cannot allocate %lld bytes of host memory for %s", (long long)bytes, what);
	return p;
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

int rt_elem_bytes(const char *dtype) { return !strcmp(dtype, "f64") ? 8 : 4; }

double rt_get(const void *buf, const char *dtype, int64_t i)
{
	if (!strcmp(dtype, "f64"))
		return ((const double *)buf)[i];
	if (!strcmp(dtype, "i32"))
		return ((const int32_t *)buf)[i];
	return ((const float *)buf)[i];
}

void rt_set(void *buf, const char *dtype, int64_t i, double v)
{
	if (!strcmp(dtype, "f64"))
		((double *)buf)[i] = v;
	else if (!strcmp(dtype, "i32"))
		((int32_t *)buf)[i] = (int32_t)v;
	else
		((float *)buf)[i] = (float)v;
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		rt_fail(1, "cannot open %s: %s", path, strerror(errno));
	size_t cap = 1 << 16, n = 0;
	unsigned char *buf = rt_host_alloc((int64_t)cap, path);
	size_t r;
	while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap)
			buf = realloc(buf, cap *= 2);
	}
	if (!buf)
		rt_fail(1, "cannot allocate host memory to read %s", path);
	if (ferror(f))
		rt_fail(1, "cannot read %s", path);
	fclose(f);
	buf[n] = 0; /* n < cap: the text parsers never run past the end */
	*len = n;
	return buf;
}

void rt_write_atomic(const char *path, const void *data, size_t len)
{
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "wb");
	if (!f)
		rt_fail(1, "cannot write %s: %s", tmp, strerror(errno));
	bool ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		rt_fail(1, "cannot write %s: %s", path, strerror(e));
	}
}

/* ---- .npy ---- */

double *rt_load_npy(const char *path, int *rank, int64_t *dim)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
		rt_fail(1, "%s: not a .npy file (bad magic)", path);
	size_t hlen = b[6] == 1 ? (size_t)(b[8] | b[9] << 8) : len >= 12 ? (size_t)(b[8] | b[9] << 8 | b[10] << 16 | (size_t)b[11] << 24) : 0;
	size_t start = b[6] == 1 ? 10 : 12;
	if (b[6] < 1 || b[6] > 3 || start + hlen > len)
		rt_fail(1, "%s: truncated .npy header", path);
	char *h = strndup((char *)b + start, hlen);
	char *d = strstr(h, "'descr'"), *fo = strstr(h, "'fortran_order'"), *sh = strstr(h, "'shape'");
	if (!d || !fo || !sh)
		rt_fail(1, "%s: malformed .npy header", path);
	char descr[16] = {0};
	if (sscanf(strchr(d + 7, '\'') ? strchr(d + 7, '\'') + 1 : "", "%15[^']", descr) != 1)
		rt_fail(1, "%s: malformed .npy dtype", path);
	const char *order = fo + strlen("'fortran_order'");
	while (*order == ' ' || *order == ':')
		order++;
	if (!strncmp(order, "True", 4))
		rt_fail(1, "%s: Fortran-ordered arrays are not supported (save with numpy.ascontiguousarray)", path);
	int esz = 0;
	if (!strcmp(descr, "<f4") || !strcmp(descr, "<i4"))
		esz = 4;
	else if (!strcmp(descr, "<f8") || !strcmp(descr, "<i8"))
		esz = 8;
	else
		rt_fail(1, "%s: unsupported dtype '%s' (use float32, float64, int32 or int64, little-endian)", path, descr);
	char *p = strchr(sh, '(');
	if (!p)
		rt_fail(1, "%s: malformed .npy shape", path);
	p++;
	*rank = 0;
	int64_t n = 1;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		char *end;
		long long v = strtoll(p, &end, 10);
		if (end == p || v < 0 || *rank == RT_MAXRANK)
			rt_fail(1, "%s: malformed .npy shape", path);
		dim[(*rank)++] = v;
		n *= v;
		p = end;
	}
	free(h);
	size_t body = start + hlen;
	if (len - body < (size_t)n * (size_t)esz)
		rt_fail(1, "%s: truncated data: %lld elements need %lld bytes, file has %lld", path, (long long)n,
		        (long long)n * esz, (long long)(len - body));
	double *out = rt_host_alloc((int64_t)sizeof(double) * n, path);
	for (int64_t i = 0; i < n; i++) {
		const unsigned char *e = b + body + (size_t)i * (size_t)esz;
		if (descr[1] == 'f')
			out[i] = esz == 4 ? (double)*(const float *)e : *(const double *)e;
		else
			out[i] = esz == 4 ? (double)*(const int32_t *)e : (double)*(const int64_t *)e;
	}
	free(b);
	return out;
}

/* ---- a small JSON reader, enough for safetensors headers ---- */

typedef struct {
	const char *p, *end, *file;
} Json;

static noreturn void jfail(Json *j) { rt_fail(1, "%s: corrupt safetensors header", j->file); }

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
	while (j->p < j->end && *j->p != '"')
		j->p += *j->p == '\\' ? 2 : 1;
	if (j->p >= j->end)
		jfail(j);
	return strndup(s, (size_t)(j->p++ - s));
}

static int64_t jint(Json *j)
{
	jspace(j);
	char *end;
	long long v = strtoll(j->p, &end, 10);
	if (end == j->p || end > j->end)
		jfail(j);
	j->p = end;
	return v;
}

static void jskip(Json *j)
{
	jspace(j);
	if (j->p >= j->end)
		jfail(j);
	if (*j->p == '"') {
		free(jstring(j));
	} else if (*j->p == '{' || *j->p == '[') {
		char close = *j->p == '{' ? '}' : ']';
		j->p++;
		if (jlit(j, close))
			return;
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
	} else {
		while (j->p < j->end && !strchr(",}] \n", *j->p))
			j->p++;
	}
}

/* ---- safetensors ---- */

void rt_save_safetensors(const char *path, const RtModel *m, void *const *bufs, bool grads)
{
	const char *dt = m->real_bytes == 8 ? "F64" : "F32";
	size_t cap = 4096 + 512 * (size_t)m->nparams, n = 0;
	char *h = rt_host_alloc((int64_t)cap, path);
	n += (size_t)snprintf(h + n, cap - n, "{\"__metadata__\":{\"format\":\"pt\",\"model\":\"%s\",\"content\":\"%s\"}", m->model,
	                      grads ? "gradients" : "parameters");
	int64_t off = 0;
	for (int i = 0; i < m->nparams; i++) {
		const RtTensor *t = &m->params[i];
		n += (size_t)snprintf(h + n, cap - n, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, dt);
		for (int k = 0; k < t->rank; k++)
			n += (size_t)snprintf(h + n, cap - n, "%s%lld", k ? "," : "", (long long)t->dim[k]);
		n += (size_t)snprintf(h + n, cap - n, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + t->bytes));
		off += t->bytes;
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
		memcpy(out + at, bufs[i], (size_t)m->params[i].bytes);
		at += (size_t)m->params[i].bytes;
	}
	rt_write_atomic(path, out, total);
	free(out);
	free(h);
}

void rt_load_safetensors(const char *path, const RtModel *m, void **bufs)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	if (len < 8)
		rt_fail(1, "%s: not a safetensors file (too short)", path);
	uint64_t hlen = 0;
	for (int k = 0; k < 8; k++)
		hlen |= (uint64_t)b[k] << (8 * k);
	if (hlen > len - 8)
		rt_fail(1, "%s: not a safetensors file (header length %llu exceeds the file)", path, (unsigned long long)hlen);
	Json j = {(char *)b + 8, (char *)b + 8 + hlen, path};
	const unsigned char *data = b + 8 + hlen;
	size_t dlen = len - 8 - (size_t)hlen;
	bool *seen = calloc((size_t)m->nparams + 1, 1);
	if (!jlit(&j, '{'))
		jfail(&j);
	if (!jlit(&j, '}')) {
		do {
			char *key = jstring(&j);
			if (!jlit(&j, ':'))
				jfail(&j);
			int which = -1;
			for (int i = 0; i < m->nparams; i++)
				if (!strcmp(m->params[i].name, key))
					which = i;
			if (which < 0) {
				jskip(&j);
				free(key);
				continue;
			}
			const RtTensor *t = &m->params[which];
			char dtype[8] = "";
			int rank = -1;
			int64_t dim[RT_MAXRANK], a = -1, e = -1;
			if (!jlit(&j, '{'))
				jfail(&j);
			do {
				char *f = jstring(&j);
				if (!jlit(&j, ':'))
					jfail(&j);
				if (!strcmp(f, "dtype")) {
					char *s = jstring(&j);
					snprintf(dtype, sizeof dtype, "%s", s);
					free(s);
				} else if (!strcmp(f, "shape")) {
					if (!jlit(&j, '['))
						jfail(&j);
					rank = 0;
					if (!jlit(&j, ']')) {
						do {
							if (rank == RT_MAXRANK)
								jfail(&j);
							dim[rank++] = jint(&j);
						} while (jlit(&j, ','));
						if (!jlit(&j, ']'))
							jfail(&j);
					}
				} else if (!strcmp(f, "data_offsets")) {
					if (!jlit(&j, '['))
						jfail(&j);
					a = jint(&j);
					if (!jlit(&j, ','))
						jfail(&j);
					e = jint(&j);
					if (!jlit(&j, ']'))
						jfail(&j);
				} else {
					jskip(&j);
				}
				free(f);
			} while (jlit(&j, ','));
			if (!jlit(&j, '}'))
				jfail(&j);
			bool same = rank == t->rank;
			for (int k = 0; same && k < rank; k++)
				same = dim[k] == t->dim[k];
			if (!same)
				rt_fail(1, "%s: tensor '%s' has shape %s, the model's is %s", path, key,
				        rank < 0 ? "(none)" : rt_shape_str(rank, dim), rt_shape_str(t->rank, t->dim));
			int esz = !strcmp(dtype, "F32") ? 4 : !strcmp(dtype, "F64") ? 8 : 0;
			if (!esz)
				rt_fail(1, "%s: tensor '%s' has dtype '%s' (F32 or F64 needed)", path, key, dtype);
			if (a < 0 || e < a || (size_t)e > dlen || e - a != t->numel * esz)
				rt_fail(1, "%s: tensor '%s': data offsets [%lld, %lld] do not fit the file or the shape", path, key,
				        (long long)a, (long long)e);
			for (int64_t i = 0; i < t->numel; i++) {
				const unsigned char *p = data + a + i * esz;
				rt_set(bufs[which], t->dtype, i, esz == 4 ? (double)*(const float *)p : *(const double *)p);
			}
			seen[which] = true;
			free(key);
		} while (jlit(&j, ','));
		if (!jlit(&j, '}'))
			jfail(&j);
	}
	for (int i = 0; i < m->nparams; i++)
		if (!seen[i])
			rt_fail(1, "%s: no tensor named '%s'", path, m->params[i].name);
	free(seen);
	free(b);
}
