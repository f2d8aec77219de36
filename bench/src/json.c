/*
 * A minimal JSON writer for the results file: members are appended in order, one per
 * line, indented, so that committed results diff well. No reader: bench/report.py
 * reads the files.
 */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(struct json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct json *j, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			abort();
		if ((size_t)n < j->cap - j->len) {
			j->len += (size_t)n;
			return;
		}
		j->cap = (j->cap + (size_t)n) * 2;
		j->buf = realloc(j->buf, j->cap);
		if (!j->buf)
			abort();
	}
}

static void put_string(struct json *j, const char *s)
{
	put(j, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(j, "\\%c", c);
		else if (c < 0x20)
			put(j, "\\u%04x", c);
		else
			put(j, "%c", c);
	}
	put(j, "\"");
}

/* comma, newline, indent and key of the next member */
static void member(struct json *j, const char *key)
{
	if (j->depth > 0) {
		put(j, "%s\n%*s", j->count[j->depth] ? "," : "", 2 * j->depth, "");
		j->count[j->depth]++;
	}
	if (key) {
		put_string(j, key);
		put(j, ": ");
	}
}

void json_init(struct json *j)
{
	memset(j, 0, sizeof(*j));
	j->cap = 4096;
	j->buf = malloc(j->cap);
	if (!j->buf)
		abort();
	j->buf[0] = 0;
}

void json_open(struct json *j, const char *key, char bracket)
{
	member(j, key);
	put(j, "%c", bracket);
	if (j->depth + 1 >= (int)(sizeof(j->count) / sizeof(j->count[0])))
		abort();
	j->open[j->depth] = bracket;
	j->count[++j->depth] = 0;
}

void json_close(struct json *j, char bracket)
{
	int had = j->count[j->depth];
	j->depth--;
	if (had)
		put(j, "\n%*s", 2 * j->depth, "");
	put(j, "%c", bracket);
}

void json_num(struct json *j, const char *key, double v)
{
	member(j, key);
	if (isfinite(v))
		put(j, "%.6g", v);
	else
		put(j, "null");
}

void json_int(struct json *j, const char *key, long long v)
{
	member(j, key);
	put(j, "%lld", v);
}

void json_str(struct json *j, const char *key, const char *s)
{
	member(j, key);
	if (s)
		put_string(j, s);
	else
		put(j, "null");
}

void json_summary_us(struct json *j, const struct summary *s)
{
	json_int(j, "iters", (long long)s->n);
	json_num(j, "median_us", s->median * 1e6);
	json_num(j, "p99_us", s->p99 * 1e6);
	json_num(j, "min_us", s->min * 1e6);
	json_num(j, "mean_us", s->mean * 1e6);
	json_num(j, "max_us", s->max * 1e6);
}

int json_write_file(struct json *j, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int ok = fwrite(j->buf, 1, j->len, f) == j->len;
	for (int d = j->depth; d > 0; d--)
		ok = ok && fprintf(f, "\n%*s%c", 2 * (d - 1), "", j->open[d - 1] == '[' ? ']' : '}') > 0;
	ok = ok && fputc('\n', f) != EOF;
	if (fclose(f) != 0)
		ok = 0;
	return ok ? 0 : -1;
}

void json_free(struct json *j)
{
	free(j->buf);
	j->buf = NULL;
}
