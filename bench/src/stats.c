/* Clock, sample statistics and the adaptive transfer loop shared by every benchmark. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void samples_init(struct samples *s, size_t cap)
{
	s->n = 0;
	s->cap = cap ? cap : 16;
	s->v = malloc(s->cap * sizeof(double));
	if (!s->v)
		abort();
}

void samples_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap *= 2;
		s->v = realloc(s->v, s->cap * sizeof(double));
		if (!s->v)
			abort();
	}
	s->v[s->n++] = x;
}

void samples_free(struct samples *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct summary samples_summary(struct samples *s)
{
	struct summary r = {0};
	if (!s->n)
		return r;
	qsort(s->v, s->n, sizeof(double), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
	r.n = s->n;
	r.min = s->v[0];
	r.max = s->v[s->n - 1];
	r.mean = sum / (double)s->n;
	r.median = s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
	/* nearest rank: the smallest sample >= 99% of all samples */
	size_t rank = (s->n * 99 + 99) / 100;
	r.p99 = s->v[rank - 1];
	return r;
}

int measure_xfer(xfer_fn fn, void *ctx, size_t bytes, double min_time, struct summary *out)
{
	struct samples s;
	int err;
	for (int i = 0; i < 2; i++)
		if ((err = fn(ctx, bytes)))
			return err;
	samples_init(&s, 1024);
	uint64_t start = bench_now_ns(), limit = (uint64_t)(min_time * 1e9);
	while (s.n < 1000000) {
		uint64_t t0 = bench_now_ns();
		if ((err = fn(ctx, bytes))) {
			samples_free(&s);
			return err;
		}
		uint64_t t1 = bench_now_ns();
		samples_add(&s, (double)(t1 - t0) * 1e-9);
		if (s.n >= 5 && t1 - start >= limit)
			break;
	}
	*out = samples_summary(&s);
	samples_free(&s);
	return 0;
}

const char *size_name(size_t bytes, char *buf, size_t len)
{
	if (bytes >= MiB && bytes % MiB == 0)
		snprintf(buf, len, "%zu MiB", bytes / MiB);
	else if (bytes >= KiB && bytes % KiB == 0)
		snprintf(buf, len, "%zu KiB", bytes / KiB);
	else
		snprintf(buf, len, "%zu B", bytes);
	return buf;
}
