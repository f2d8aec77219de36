/*
 * streams: ordering between streams through events, the legacy NULL stream's
 * implicit ordering, event timing and queries, host functions and callbacks
 * (observed after cudaStreamSynchronize, and seeing data copied before them on
 * the same stream), stream-ordered allocation, stream priorities and flags.
 *
 * The buffers are large enough (16 MiB) that on a GPU a missing dependency
 * shows up as wrong data rather than passing by luck.
 */
#include <pthread.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define N (4u << 20) /* elements */

static void check_all_f32(const char *label, const float *p, size_t n, float want)
{
	if (rg_all_f32(label, p, n, want))
		printf("%s: ok (%zu x %g)\n", label, n, want);
}

static void event_ordering(void)
{
	cudaStream_t a, b;
	cudaEvent_t ev;
	float *d, *h;
	CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	CK(cudaMalloc(&d, N * 4));
	CK(cudaMallocHost(&h, N * 4));
	/* several fills on A so that B would overtake it without the wait */
	for (int i = 0; i < 4; i++)
		rgtest_fill_u32<<<rgtest_grid(N), 256, 0, a>>>((unsigned *)d, rg_f2u(1.0f + i * 0.25f), N);
	CK(cudaGetLastError());
	CK(cudaEventRecord(ev, a));
	CK(cudaStreamWaitEvent(b, ev, 0));
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, b>>>(d, 2.0f, N);
	CK(cudaGetLastError());
	CK(cudaMemcpyAsync(h, d, N * 4, cudaMemcpyDeviceToHost, b));
	CK(cudaStreamSynchronize(b));
	check_all_f32("fill on A, event, wait on B, scale on B", h, N, 3.5f);
	EXPECT_ERR("event query after sync", cudaEventQuery(ev), cudaSuccess);
	EXPECT_ERR("stream query B after sync", cudaStreamQuery(b), cudaSuccess);
	CK(cudaStreamSynchronize(a));
	EXPECT_ERR("stream query A after sync", cudaStreamQuery(a), cudaSuccess);

	/* an event recorded on the NULL stream, waited on by a non-blocking stream */
	rgtest_fill_u32<<<rgtest_grid(N), 256>>>((unsigned *)d, rg_f2u(5.0f), N);
	CK(cudaEventRecord(ev, 0));
	CK(cudaStreamWaitEvent(a, ev, 0));
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, a>>>(d, 0.5f, N);
	CK(cudaMemcpyAsync(h, d, N * 4, cudaMemcpyDeviceToHost, a));
	CK(cudaStreamSynchronize(a));
	check_all_f32("fill on NULL, event, wait on A, scale on A", h, N, 2.5f);

	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(a));
	CK(cudaStreamDestroy(b));
	CK(cudaFree(d));
	CK(cudaFreeHost(h));
}

/* A blocking stream and the legacy NULL stream order each other implicitly. */
static void legacy_null_stream(void)
{
	cudaStream_t c;
	float *d, *h = (float *)malloc(N * 4);
	CK(cudaStreamCreate(&c));
	unsigned flags = 99;
	CK(cudaStreamGetFlags(c, &flags));
	printf("cudaStreamCreate flags: %u\n", flags);
	CK(cudaMalloc(&d, N * 4));
	for (int i = 0; i < 4; i++)
		rgtest_fill_u32<<<rgtest_grid(N), 256, 0, c>>>((unsigned *)d, rg_f2u(7.0f + i), N);
	/* no sync of c: the NULL-stream copy waits for it */
	CK(cudaMemcpy(h, d, N * 4, cudaMemcpyDeviceToHost));
	check_all_f32("blocking stream then NULL-stream copy", h, N, 10.0f);
	/* and the other way: work on NULL is ordered before work on c */
	rgtest_fill_u32<<<rgtest_grid(N), 256>>>((unsigned *)d, rg_f2u(4.0f), N);
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, c>>>(d, 0.25f, N);
	CK(cudaMemcpyAsync(h, d, N * 4, cudaMemcpyDeviceToHost, c));
	CK(cudaStreamSynchronize(c));
	check_all_f32("NULL stream then blocking stream", h, N, 1.0f);
	CK(cudaStreamDestroy(c));
	CK(cudaFree(d));
	free(h);
}

static void timing(void)
{
	cudaStream_t s;
	cudaEvent_t e0, e1, nt0, nt1;
	unsigned *d;
	CK(cudaStreamCreate(&s));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventCreateWithFlags(&nt0, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&nt1, cudaEventDisableTiming));
	CK(cudaMalloc(&d, N * 4));
	CK(cudaEventRecord(e0, s));
	CK(cudaEventRecord(nt0, s));
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>(d, 1, N);
	CK(cudaEventRecord(e1, s));
	CK(cudaEventRecord(nt1, s));
	CK(cudaEventSynchronize(e1));
	float ms = -1;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	printf("elapsed time >= 0: %s\n", ms >= 0 ? "yes" : "no");
	if (!(ms >= 0))
		rg_failures++;
	EXPECT_ERR("event query e1 after event sync", cudaEventQuery(e1), cudaSuccess);
	CK(cudaStreamSynchronize(s));
	EXPECT_ERR("stream query after sync", cudaStreamQuery(s), cudaSuccess);
	EXPECT_ERR("elapsed time of events without timing", cudaEventElapsedTime(&ms, nt0, nt1),
	           cudaErrorInvalidResourceHandle);
	cudaGetLastError();
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	CK(cudaEventDestroy(nt0));
	CK(cudaEventDestroy(nt1));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d));
}

/* Host functions: counted, in order, and after the copies queued before them. */
enum { NHF = 5 };
static volatile int hf_count;
static int hf_order[NHF], hf_saw[NHF];
static unsigned *hf_slots;
static pthread_mutex_t hf_mu = PTHREAD_MUTEX_INITIALIZER;

static void CUDART_CB host_fn(void *arg)
{
	int k = (int)(intptr_t)arg;
	pthread_mutex_lock(&hf_mu);
	hf_order[hf_count] = k;
	hf_saw[k] = hf_slots[k * 4] == 100u + k && hf_slots[k * 4 + 3] == 100u + k;
	hf_count++;
	pthread_mutex_unlock(&hf_mu);
}

static volatile int cb_count;
static cudaError_t cb_status = cudaErrorUnknown;
static void CUDART_CB stream_cb(cudaStream_t s, cudaError_t status, void *arg)
{
	cb_status = status;
	cb_count += (int)(intptr_t)arg;
}

static void host_functions(void)
{
	cudaStream_t s;
	unsigned *d;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&d, N * 4));
	CK(cudaMallocHost(&hf_slots, NHF * 16));
	memset(hf_slots, 0, NHF * 16);
	for (int k = 0; k < NHF; k++) {
		rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>(d, 100u + k, N);
		CK(cudaGetLastError());
		CK(cudaMemcpyAsync(hf_slots + k * 4, d + N - 4, 16, cudaMemcpyDeviceToHost, s));
		CK(cudaLaunchHostFunc(s, host_fn, (void *)(intptr_t)k));
	}
	CK(cudaStreamAddCallback(s, stream_cb, (void *)(intptr_t)7, 0));
	CK(cudaStreamSynchronize(s));
	int in_order = 1, saw = 0;
	for (int k = 0; k < NHF; k++) {
		in_order &= hf_order[k] == k;
		saw += hf_saw[k];
	}
	printf("host functions run: %d, in order: %s, saw preceding copies: %d\n", hf_count,
	       in_order ? "yes" : "no", saw);
	if (hf_count != NHF || !in_order || saw != NHF)
		rg_failures++;
	printf("stream callback: count %d status %s\n", cb_count, cudaGetErrorName(cb_status));
	if (cb_count != 7 || cb_status != cudaSuccess)
		rg_failures++;
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d));
	CK(cudaFreeHost(hf_slots));
}

static void malloc_async(void)
{
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	unsigned *h = (unsigned *)malloc(N * 4);
	for (int round = 0; round < 3; round++) {
		unsigned *p = NULL;
		CK(cudaMallocAsync((void **)&p, N * 4, s));
		rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>(p, 0xABC00 + round, N);
		CK(cudaGetLastError());
		CK(cudaMemcpyAsync(h, p, N * 4, cudaMemcpyDeviceToHost, s));
		CK(cudaFreeAsync(p, s));
		CK(cudaStreamSynchronize(s));
		int ok = 1;
		for (size_t i = 0; i < N; i++)
			ok &= h[i] == 0xABC00u + round;
		printf("mallocasync round %d: %s fnv=%016llx\n", round, ok ? "ok" : "MISMATCH",
		       (unsigned long long)rg_fnv(h, N * 4));
		if (!ok)
			rg_failures++;
	}
	/* stream-ordered allocation used on another stream after an event */
	cudaStream_t s2;
	cudaEvent_t ev;
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	unsigned *p = NULL;
	CK(cudaMallocAsync((void **)&p, 4096, s));
	CK(cudaMemsetAsync(p, 0x11, 4096, s));
	CK(cudaEventRecord(ev, s));
	CK(cudaStreamWaitEvent(s2, ev, 0));
	CK(cudaMemcpyAsync(h, p, 4096, cudaMemcpyDeviceToHost, s2));
	CK(cudaFreeAsync(p, s2));
	CK(cudaStreamSynchronize(s2));
	int ok = 1;
	for (int i = 0; i < 1024; i++)
		ok &= h[i] == 0x11111111u;
	printf("mallocasync across streams: %s\n", ok ? "ok" : "MISMATCH");
	if (!ok)
		rg_failures++;
	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(s2));
	free(h);
}

static void priorities(void)
{
	int least = 0, greatest = 0, got = 12345;
	CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	cudaStream_t s;
	CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
	CK(cudaStreamGetPriority(s, &got));
	unsigned flags = 0;
	CK(cudaStreamGetFlags(s, &flags));
	printf("priority stream: priority is greatest: %s, flags %u\n", got == greatest ? "yes" : "no", flags);
	if (got != greatest)
		rg_failures++;
	int sdev = -1, ndev = -1, cur = -1;
	CK(cudaGetDevice(&cur));
	CK(cudaStreamGetDevice(s, &sdev));
	CK(cudaStreamGetDevice(0, &ndev));
	printf("stream device is the current one: %s, NULL stream's: %s\n", sdev == cur ? "yes" : "no",
	       ndev == cur ? "yes" : "no");
	unsigned *d, h[256];
	CK(cudaMalloc(&d, 1024));
	rgtest_fill_u32<<<1, 256, 0, s>>>(d, 42, 256);
	CK(cudaMemcpyAsync(h, d, 1024, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	REQUIRE(h[0] == 42 && h[255] == 42, "priority stream fill");
	CK(cudaFree(d));
	CK(cudaStreamDestroy(s));
}

int main(void)
{
	CK(cudaSetDevice(0));
	event_ordering();
	legacy_null_stream();
	timing();
	host_functions();
	malloc_async();
	priorities();
	CK(cudaDeviceSynchronize());
	return rg_finish("streams");
}
