/*
 * The CUDA runtime measurements. Plain CUDA runtime API calls, nothing else: run
 * without LD_PRELOAD they measure the local GPU (the baseline for launch rate and copy
 * bandwidth); with LD_PRELOAD=libremote.so they measure the forwarded path.
 *
 * (a) null-call round trip: a synchronising call that does no work, timed one call at
 *     a time: cudaStreamQuery on an idle stream, cudaDeviceSynchronize on an idle
 *     device, and a 4-byte device-to-host cudaMemcpy (the smallest call with a payload).
 * (b) copy bandwidth: synchronous cudaMemcpy H2D and D2H from pageable (malloc) and
 *     pinned (cudaMallocHost) memory, wall clock around each call; GB/s from the
 *     median time of one copy.
 * (c) launch rate: N launches of an empty kernel, then one cudaDeviceSynchronize;
 *     rate = N / (time from the first launch to the end of the synchronize).
 *
 * A section whose calls fail reports the error in the table and the JSON and the
 * others carry on, so a partly working frontend still gets a partial picture.
 */
#include "bench.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed(cudaError_t e, const char *what, struct json *j, const char *key)
{
	if (e == cudaSuccess)
		return 0;
	char msg[256];
	snprintf(msg, sizeof(msg), "%s: %s (%s, %d)", what, cudaGetErrorString(e), cudaGetErrorName(e),
		 (int)e);
	fprintf(stderr, "remote-bench: %s\n", msg);
	printf("  error: %s\n", msg);
	if (j && key) {
		/* inside an array (the copy rows) the error becomes an element of its own */
		int in_array = j->depth > 0 && j->open[j->depth - 1] == '[';
		if (in_array)
			json_open(j, NULL, '{');
		json_str(j, key, msg);
		if (in_array)
			json_close(j, '}');
	}
	return 1;
}

/* ---- (a) null-call round trip ---- */

struct rtt_ctx {
	cudaStream_t stream;
	void *dev;
	char host[4];
};

static cudaError_t call_stream_query(struct rtt_ctx *c)
{
	return cudaStreamQuery(c->stream);
}

static cudaError_t call_device_sync(struct rtt_ctx *c)
{
	return cudaDeviceSynchronize();
}

static cudaError_t call_memcpy_d2h_4(struct rtt_ctx *c)
{
	return cudaMemcpy(c->host, c->dev, 4, cudaMemcpyDeviceToHost);
}

static void rtt_one(const struct bench_opts *o, struct json *j, struct rtt_ctx *c, const char *name,
		    cudaError_t (*fn)(struct rtt_ctx *))
{
	struct samples s;
	cudaError_t e = cudaSuccess;
	int warm = o->rtt_iters / 10 + 10;

	samples_init(&s, (size_t)o->rtt_iters);
	for (int i = 0; i < warm + o->rtt_iters && e == cudaSuccess; i++) {
		uint64_t t0 = bench_now_ns();
		e = fn(c);
		if (i >= warm)
			samples_add(&s, (double)(bench_now_ns() - t0) * 1e-9);
	}
	json_open(j, NULL, '{');
	json_str(j, "call", name);
	if (!failed(e, name, j, "error")) {
		struct summary r = samples_summary(&s);
		printf("  %-26s %10.2f %10.2f %10.2f %10.2f\n", name, r.median * 1e6, r.p99 * 1e6,
		       r.min * 1e6, r.mean * 1e6);
		json_summary_us(j, &r);
	}
	json_close(j, '}');
	samples_free(&s);
}

static void bench_rtt(const struct bench_opts *o, struct json *j)
{
	struct rtt_ctx c = {0};
	printf("\n== null-call round trip (%d calls each, wall clock per call) ==\n", o->rtt_iters);
	printf("  %-26s %10s %10s %10s %10s\n", "call", "median us", "p99 us", "min us", "mean us");
	json_open(j, "rtt", '[');
	if (!failed(cudaStreamCreate(&c.stream), "cudaStreamCreate", NULL, NULL))
		rtt_one(o, j, &c, "cudaStreamQuery", call_stream_query);
	rtt_one(o, j, &c, "cudaDeviceSynchronize", call_device_sync);
	if (!failed(cudaMalloc(&c.dev, 4), "cudaMalloc(4)", NULL, NULL) &&
	    !failed(cudaMemset(c.dev, 0, 4), "cudaMemset", NULL, NULL))
		rtt_one(o, j, &c, "cudaMemcpy D2H 4 B", call_memcpy_d2h_4);
	json_close(j, ']');
	if (c.dev)
		cudaFree(c.dev);
	if (c.stream)
		cudaStreamDestroy(c.stream);
}

/* ---- (b) copy bandwidth ---- */

struct copy_ctx {
	void *dev;
	void *host;
	enum cudaMemcpyKind kind;
	cudaError_t err;
};

static int do_copy(void *arg, size_t bytes)
{
	struct copy_ctx *c = arg;
	if (c->kind == cudaMemcpyHostToDevice)
		c->err = cudaMemcpy(c->dev, c->host, bytes, c->kind);
	else
		c->err = cudaMemcpy(c->host, c->dev, bytes, c->kind);
	return c->err != cudaSuccess;
}

static void bench_copy(const struct bench_opts *o, struct json *j)
{
	void *dev = NULL, *pageable = NULL, *pinned = NULL;
	char name[32];
	static const char *const cols[4] = {"H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned"};

	printf("\n== copy bandwidth (cudaMemcpy, GB/s = 1e9 B/s from the median copy time) ==\n");
	json_open(j, "copy", '[');
	if (failed(cudaMalloc(&dev, o->max_size), "cudaMalloc", j, "error"))
		goto out;
	/* a device buffer with defined contents, so D2H copies read initialised memory */
	if (failed(cudaMemset(dev, 0, o->max_size), "cudaMemset", j, "error"))
		goto out;
	pageable = malloc(o->max_size);
	if (!pageable)
		goto out;
	memset(pageable, 0x3c, o->max_size); /* fault the pages in */
	if (failed(cudaMallocHost(&pinned, o->max_size), "cudaMallocHost", j, "error"))
		pinned = NULL;
	else
		memset(pinned, 0x3c, o->max_size);

	printf("  %-9s", "size");
	for (int k = 0; k < 4; k++)
		printf(" %13s", cols[k]);
	printf("\n");
	for (size_t sz = o->min_size; sz <= o->max_size; sz *= (size_t)o->step) {
		printf("  %-9s", size_name(sz, name, sizeof(name)));
		for (int k = 0; k < 4; k++) {
			struct copy_ctx c = {dev, k & 1 ? pinned : pageable,
					     k < 2 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
					     cudaSuccess};
			struct summary r;
			json_open(j, NULL, '{');
			json_str(j, "dir", k < 2 ? "H2D" : "D2H");
			json_str(j, "mem", k & 1 ? "pinned" : "pageable");
			json_int(j, "bytes", (long long)sz);
			if (!c.host) {
				printf(" %13s", "-");
				json_str(j, "error", "no pinned memory");
			} else if (measure_xfer(do_copy, &c, sz, o->min_time, &r) != 0) {
				printf(" %13s", "error");
				char msg[160];
				snprintf(msg, sizeof(msg), "cudaMemcpy: %s", cudaGetErrorName(c.err));
				json_str(j, "error", msg);
			} else {
				printf(" %13.2f", gbps(sz, r.median));
				json_num(j, "gbps", gbps(sz, r.median));
				json_num(j, "mean_gbps", gbps(sz, r.mean));
				json_num(j, "best_gbps", gbps(sz, r.min));
				json_summary_us(j, &r);
			}
			json_close(j, '}');
			fflush(stdout);
		}
		printf("\n");
		if (sz > o->max_size / (size_t)o->step)
			break;
	}
	cudaGetLastError(); /* a failed copy above must not poison the next section */
out:
	json_close(j, ']');
	if (pinned)
		cudaFreeHost(pinned);
	free(pageable);
	if (dev)
		cudaFree(dev);
}

/* ---- (c) launch rate ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void bench_launch(const struct bench_opts *o, struct json *j)
{
	double rate[64];
	int reps = o->launch_reps < 64 ? o->launch_reps : 64;
	cudaError_t e;

	printf("\n== async launch rate (empty kernel <<<1,1>>> on the NULL stream) ==\n");
	json_open(j, "launch", '{');
	json_int(j, "launches", o->launches);
	json_int(j, "reps", reps);
	/* warm-up: loads the module and the function (on the server, with libremote.so) */
	e = (cudaError_t)rb_launch_empty(1000, NULL);
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	for (int r = 0; r < reps && e == cudaSuccess; r++) {
		uint64_t t0 = bench_now_ns();
		e = (cudaError_t)rb_launch_empty(o->launches, NULL);
		uint64_t t1 = bench_now_ns();
		if (e == cudaSuccess)
			e = cudaDeviceSynchronize();
		uint64_t t2 = bench_now_ns();
		rate[r] = o->launches / ((double)(t2 - t0) * 1e-9);
		printf("  rep %d: %d launches in %.1f ms (issue %.1f ms, final sync %.1f ms): %.0f launches/s\n",
		       r, o->launches, (t2 - t0) * 1e-6, (t1 - t0) * 1e-6, (t2 - t1) * 1e-6, rate[r]);
	}
	if (!failed(e, "launch", j, "error")) {
		qsort(rate, (size_t)reps, sizeof(double), cmp_double);
		double med = reps % 2 ? rate[reps / 2] : (rate[reps / 2 - 1] + rate[reps / 2]) / 2;
		printf("  median %.0f launches/s (%.2f us per launch), best %.0f\n", med, 1e6 / med,
		       rate[reps - 1]);
		json_num(j, "rate_per_s", med);
		json_num(j, "best_per_s", rate[reps - 1]);
		json_num(j, "us_per_launch", 1e6 / med);
	}
	json_close(j, '}');
}

int cuda_bench(const struct bench_opts *o, struct json *j)
{
	int count = 0, rt = 0, drv = 0;
	struct cudaDeviceProp prop;
	cudaError_t e;

	uint64_t t0 = bench_now_ns();
	e = cudaGetDeviceCount(&count);
	json_open(j, "cuda", '{');
	if (failed(e, "cudaGetDeviceCount", j, "error") ||
	    failed(cudaSetDevice(o->device), "cudaSetDevice", j, "error") ||
	    failed(cudaFree(NULL), "cudaFree(NULL) (context creation)", j, "error")) {
		json_close(j, '}');
		return -1;
	}
	double init_ms = (double)(bench_now_ns() - t0) * 1e-6;
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	memset(&prop, 0, sizeof(prop));
	if (cudaGetDeviceProperties(&prop, o->device) != cudaSuccess)
		snprintf(prop.name, sizeof(prop.name), "unknown");
	printf("\n== CUDA: device %d of %d: %s (sm_%d%d), runtime %d, driver %d; init %.1f ms ==\n",
	       o->device, count, prop.name, prop.major, prop.minor, rt, drv, init_ms);
	json_int(j, "device_count", count);
	json_int(j, "device", o->device);
	json_str(j, "name", prop.name);
	json_int(j, "cc_major", prop.major);
	json_int(j, "cc_minor", prop.minor);
	json_int(j, "runtime_version", rt);
	json_int(j, "driver_version", drv);
	json_num(j, "init_ms", init_ms);
	json_close(j, '}');
	fflush(stdout);

	bench_checkpoint(o, j);
	if (!o->copy_only)
		bench_rtt(o, j);
	fflush(stdout);
	bench_checkpoint(o, j);
	bench_copy(o, j);
	fflush(stdout);
	bench_checkpoint(o, j);
	if (!o->copy_only)
		bench_launch(o, j);
	fflush(stdout);
	return 0;
}
