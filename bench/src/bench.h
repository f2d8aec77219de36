/*
 * remote-bench: micro-benchmarks of the CUDA runtime path that remote-gpu forwards
 * (null-call round trip, memcpy bandwidth, kernel launch rate) and of the raw TCP
 * loopback they run over (ping-pong, stream throughput), in one binary, so that each
 * forwarded number can be put beside its transport baseline from the same run.
 *
 * The binary is an ordinary CUDA program linked against the shared libcudart: run
 * plainly it measures local CUDA; run with LD_PRELOAD=libremote.so it measures the
 * remote path. See bench/README.md.
 */
#ifndef REMOTE_BENCH_H
#define REMOTE_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "bench_clock.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

struct bench_opts {
	int run_cuda;
	int copy_only; /* --only copy: of the CUDA sections, copy bandwidth alone */
	int run_tcp;
	int run_shm;
	const char *json_path;
	int rtt_iters;     /* timed round trips per null call and for the TCP ping-pong */
	int launches;      /* kernel launches per launch-rate repetition */
	int launch_reps;   /* repetitions; the median rate is reported */
	double min_time;   /* seconds spent per copy / stream size (at least 5 transfers) */
	size_t min_size;   /* copy and stream sizes: min_size, *step, ..., max_size */
	size_t max_size;
	int step;          /* 2 or 4 */
	int device;
	const char *label; /* "local" / "remote" unless given */
};

/* ---- statistics (stats.c; the clock is bench_clock.h's) ---- */

struct samples {
	double *v;
	size_t n, cap;
};

struct summary {
	size_t n;
	double min, median, p99, mean, max;
};

void samples_init(struct samples *s, size_t cap);
void samples_add(struct samples *s, double x);
void samples_free(struct samples *s);
/* Sorts the samples. p99 is the nearest-rank 99th percentile. */
struct summary samples_summary(struct samples *s);

/*
 * Times fn(ctx, bytes) repeatedly: 2 untimed warm-ups, then until min_time seconds
 * have passed and at least 5 transfers were timed (at most 1,000,000). Fills the
 * per-transfer summary in seconds. Returns fn's first non-zero result, else 0.
 */
typedef int (*xfer_fn)(void *ctx, size_t bytes);
int measure_xfer(xfer_fn fn, void *ctx, size_t bytes, double min_time, struct summary *out);

/* "4 KiB", "256 MiB" */
const char *size_name(size_t bytes, char *buf, size_t len);
static inline double gbps(size_t bytes, double seconds)
{
	return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

/* ---- JSON output (json.c): a small pretty-printing writer ---- */

struct json {
	char *buf;
	size_t len, cap;
	int depth;
	int count[32]; /* members written at each depth, for commas */
	char open[32]; /* the bracket opened at each depth */
};

void json_init(struct json *j);
void json_open(struct json *j, const char *key, char bracket); /* key NULL in arrays */
void json_close(struct json *j, char bracket);
void json_num(struct json *j, const char *key, double v);       /* NaN/inf -> null */
void json_int(struct json *j, const char *key, long long v);
void json_str(struct json *j, const char *key, const char *s);  /* NULL -> null */
void json_summary_us(struct json *j, const struct summary *s);  /* seconds -> *_us */
/* Writes what is there so far, with every open bracket closed (a valid document). */
int json_write_file(struct json *j, const char *path);
void json_free(struct json *j);

/* ---- the benchmarks ---- */

/* tcp_bench.c: (d) ping-pong and (e) stream throughput over 127.0.0.1. */
int tcp_bench(const struct bench_opts *o, struct json *j);
/* shm_bench.c: the shm transport alone, ping-pong and stream (its baselines). */
int shm_bench(const struct bench_opts *o, struct json *j);
/* cuda_bench.c: (a) null-call round trip, (b) copy bandwidth, (c) launch rate. */
int cuda_bench(const struct bench_opts *o, struct json *j);

/* main.c: rewrites --json FILE with the results so far, so that a run killed by a
 * time limit still leaves the sections it finished. */
void bench_checkpoint(const struct bench_opts *o, struct json *j);

/* empty_kernel.cu: n launches of an empty <<<1,1>>> kernel on stream s. */
#ifdef __cplusplus
extern "C" {
#endif
int rb_launch_empty(int n, void *stream);
#ifdef __cplusplus
}
#endif

#endif
