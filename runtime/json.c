/* rt: a small JSON writer. Values go into a growing buffer; commas, quotes
 * and escapes are its business, so callers only say what comes next. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static void put(RtJson *j, const char *s, size_t n)
{
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 4096;
		while (cap < j->len + n + 1)
			cap *= 2;
		j->buf = rt_host_grow(j->buf, (int64_t)cap, "JSON output");
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = 0;
}

static void puts_(RtJson *j, const char *s) { put(j, s, strlen(s)); }

/* the comma before a value, unless it follows its key or opens its container */
static void value(RtJson *j)
{
	if (j->keyed)
		j->keyed = false;
	else if (j->depth && j->count[j->depth - 1]++)
		put(j, ",", 1);
}

static void open_(RtJson *j, const char *c)
{
	value(j);
	if (j->depth == RT_JSON_DEPTH)
		rt_fail(70, "internal error: JSON nested deeper than %d", RT_JSON_DEPTH);
	j->count[j->depth++] = 0;
	puts_(j, c);
}

static void close_(RtJson *j, const char *c)
{
	j->depth--;
	puts_(j, c);
}

void rt_json_object(RtJson *j) { open_(j, "{"); }
void rt_json_end_object(RtJson *j) { close_(j, "}"); }
void rt_json_array(RtJson *j) { open_(j, "["); }
void rt_json_end_array(RtJson *j) { close_(j, "]"); }

static void quoted(RtJson *j, const char *s)
{
	put(j, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			put(j, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", c);
			puts_(j, esc);
		} else {
			put(j, s, 1);
		}
	}
	put(j, "\"", 1);
}

void rt_json_key(RtJson *j, const char *k)
{
	value(j);
	quoted(j, k);
	put(j, ":", 1);
	j->keyed = true;
}

void rt_json_str(RtJson *j, const char *s)
{
	value(j);
	quoted(j, s);
}

void rt_json_num(RtJson *j, double v)
{
	char b[32];
	value(j);
	/* JSON has no NaN or infinity */
	if (isfinite(v))
		snprintf(b, sizeof b, "%.17g", v);
	else
		strcpy(b, "null");
	puts_(j, b);
}

void rt_json_int(RtJson *j, int64_t v)
{
	char b[32];
	value(j);
	snprintf(b, sizeof b, "%lld", (long long)v);
	puts_(j, b);
}

void rt_json_bool(RtJson *j, bool v)
{
	value(j);
	puts_(j, v ? "true" : "false");
}

void rt_json_raw(RtJson *j, const char *text) { puts_(j, text); }

void rt_json_reset(RtJson *j)
{
	j->len = 0;
	j->depth = 0;
	j->keyed = false;
	if (j->buf)
		j->buf[0] = 0;
}

void rt_json_free(RtJson *j)
{
	free(j->buf);
	memset(j, 0, sizeof *j);
}
