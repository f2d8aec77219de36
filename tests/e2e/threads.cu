/*
 * threads: 8 pthreads share one client (one channel to the server), each with
 * its own non-blocking stream, looping: allocate, fill on its stream, copy
 * back asynchronously, synchronise the stream, verify, free. The results are
 * printed in thread order after all have joined.
 */
#include <pthread.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

enum { NT = 8, ITERS = 25 };

struct result {
	int ok;
	unsigned long long fnv;
	char err[160];
};
static struct result res[NT];

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	struct result *r = &res[t];
	cudaError_t e;
#define TRY(call)                                                                          \
	do {                                                                                   \
		if ((e = (call)) != cudaSuccess) {                                                 \
			snprintf(r->err, sizeof r->err, "%s -> %s", #call, cudaGetErrorName(e));       \
			return NULL;                                                                   \
		}                                                                                  \
	} while (0)
	TRY(cudaSetDevice(0));
	cudaStream_t s;
	TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	unsigned long long h = 0xcbf29ce484222325ULL;
	for (int it = 0; it < ITERS; it++) {
		size_t n = 65536 + t * 1024 + it * 16; /* elements */
		unsigned *d = NULL;
		unsigned *host = (unsigned *)malloc(n * 4);
		unsigned v = 0x3f800000u | (unsigned)(t << 16 | it); /* a normal float: scale by 1 keeps it */
		TRY(cudaMalloc(&d, n * 4));
		rgtest_fill_u32<<<rgtest_grid(n), 256, 0, s>>>(d, v, n);
		TRY(cudaGetLastError());
		if (it % 2) { /* every other iteration: scale too (the bits as floats) */
			rgtest_scale_f32<<<rgtest_grid(n), 256, 0, s>>>((float *)d, 1.0f, (int)n);
			TRY(cudaGetLastError());
		}
		TRY(cudaMemcpyAsync(host, d, n * 4, cudaMemcpyDeviceToHost, s));
		TRY(cudaStreamSynchronize(s));
		for (size_t i = 0; i < n; i++)
			if (host[i] != v) {
				snprintf(r->err, sizeof r->err, "iteration %d element %zu: %08x != %08x", it, i, host[i], v);
				free(host);
				return NULL;
			}
		h = (h ^ rg_fnv(host, n * 4)) * 0x100000001b3ULL;
		TRY(cudaFree(d));
		free(host);
		r->ok++;
	}
	TRY(cudaStreamDestroy(s));
	r->fnv = h;
	return NULL;
}

int main(void)
{
	CK(cudaSetDevice(0));
	CK(cudaFree(0));
	pthread_t th[NT];
	for (int t = 0; t < NT; t++)
		REQUIRE(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < NT; t++) {
		printf("thread %d: %d/%d iterations ok fnv=%016llx%s%s\n", t, res[t].ok, ITERS, res[t].fnv,
		       res[t].err[0] ? " error: " : "", res[t].err);
		if (res[t].ok != ITERS || res[t].err[0])
			rg_failures++;
	}
	CK(cudaDeviceSynchronize());
	return rg_finish("threads");
}
