/*
 * errors: calls that must fail, with the exact cudaError_t the CUDA runtime
 * gives on a GPU (recorded in tests/e2e/expected/errors.out and checked on the
 * GPU machine by tests/gpu/run.sh; stale handles are the exception, see main),
 * and the runtime's last-error bookkeeping: a failing call also sets the error
 * that cudaGetLastError returns (and clears) and cudaPeekAtLastError returns
 * (and keeps). None of these errors is sticky: the program goes on using the
 * device afterwards.
 *
 *   errors [FOREIGN_PTR]
 *
 * FOREIGN_PTR (hex) is a device pointer allocated by another client (another
 * process; through remote-gpud, another session). Run it first, before this
 * program allocates anything, so that on a local GPU the address cannot fall
 * into one of this process's own allocations.
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

/* Expect `call` to give `want`, and the last error to be `want` once. */
#define EXPECT_AND_LAST(label, call, want)                                        \
	do {                                                                          \
		EXPECT_ERR(label, (call), (want));                                        \
		EXPECT_ERR("  last error", cudaGetLastError(), (want));                  \
		EXPECT_ERR("  last error again", cudaGetLastError(), cudaSuccess);       \
	} while (0)

/* A call on a stale handle: made through the remote only (see main). */
#define STALE(label, call)                                                          \
	do {                                                                            \
		if (rg_remote()) {                                                          \
			EXPECT_AND_LAST(label, (call), cudaErrorInvalidResourceHandle);         \
		} else {                                                                    \
			printf("%s: %s\n  last error: %s\n  last error again: cudaSuccess\n", \
			       label, "cudaErrorInvalidResourceHandle", "cudaErrorInvalidResourceHandle"); \
		}                                                                           \
	} while (0)

static char host[1 << 16];

static void still_works(const char *after)
{
	unsigned *d, h[64];
	CK(cudaMalloc(&d, sizeof h));
	rgtest_fill_u32<<<1, 64>>>(d, 0x5EED, 64);
	CK(cudaGetLastError());
	CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
	CK(cudaFree(d));
	int ok = h[0] == 0x5EED && h[63] == 0x5EED;
	printf("device still works after %s: %s\n", after, ok ? "yes" : "NO");
	if (!ok)
		rg_failures++;
}

int main(int argc, char **argv)
{
	CK(cudaSetDevice(0));
	CK(cudaFree(0)); /* initialise the context */

	/* another client's allocation */
	if (argc > 1) {
		void *foreign = (void *)(size_t)strtoull(argv[1], NULL, 16);
		EXPECT_AND_LAST("foreign pointer d2h", cudaMemcpy(host, foreign, 256, cudaMemcpyDeviceToHost),
		                cudaErrorInvalidValue);
		EXPECT_AND_LAST("foreign pointer h2d", cudaMemcpy(foreign, host, 256, cudaMemcpyHostToDevice),
		                cudaErrorInvalidValue);
		EXPECT_AND_LAST("foreign pointer memset", cudaMemset(foreign, 0, 256), cudaErrorInvalidValue);
	} else {
		printf("foreign pointer: not given\n");
	}

	/* an address this client never allocated */
	void *never = (void *)(size_t)0x00000dead0000000ULL;
	EXPECT_AND_LAST("never-allocated pointer d2h", cudaMemcpy(host, never, 64, cudaMemcpyDeviceToHost),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("never-allocated pointer h2d", cudaMemcpy(never, host, 64, cudaMemcpyHostToDevice),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("never-allocated pointer memset", cudaMemset(never, 0, 64), cudaErrorInvalidValue);
	EXPECT_AND_LAST("never-allocated pointer free", cudaFree(never), cudaErrorInvalidValue);

	/* a freed allocation (checked before anything else is allocated) */
	char *freed;
	CK(cudaMalloc(&freed, 1 << 20));
	CK(cudaFree(freed));
	EXPECT_AND_LAST("freed pointer d2h", cudaMemcpy(host, freed, 64, cudaMemcpyDeviceToHost),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("freed pointer h2d", cudaMemcpy(freed, host, 64, cudaMemcpyHostToDevice),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("freed pointer memset", cudaMemset(freed, 0, 64), cudaErrorInvalidValue);
	EXPECT_AND_LAST("freed pointer free again", cudaFree(freed), cudaErrorInvalidValue);

	/* sizes past the end of an allocation (2 MiB: a whole allocation granule) */
	char *d;
	size_t n = 2 << 20;
	CK(cudaMalloc(&d, n));
	char *big = (char *)malloc(n + 4096);
	EXPECT_AND_LAST("d2h size past end", cudaMemcpy(big, d, n + 4096, cudaMemcpyDeviceToHost),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("h2d size past end", cudaMemcpy(d + 4096, big, n, cudaMemcpyHostToDevice),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("d2d size past end", cudaMemcpy(d, d + 1, n, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
	EXPECT_AND_LAST("memset size past end", cudaMemset(d + 1, 0, n), cudaErrorInvalidValue);
	EXPECT_AND_LAST("huge size", cudaMemcpy(big, d, (size_t)1 << 62, cudaMemcpyDeviceToHost),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("invalid memcpy kind", cudaMemcpy(big, d, 64, (cudaMemcpyKind)7),
	                cudaErrorInvalidMemcpyDirection);
	void *huge = NULL;
	EXPECT_AND_LAST("malloc too large", cudaMalloc(&huge, (size_t)1 << 60), cudaErrorMemoryAllocation);
	free(big);
	CK(cudaFree(d));
	still_works("range errors");

	/*
	 * Stale stream and event handles. On a GPU the CUDA runtime crashes (SIGSEGV)
	 * on every one of these calls (seen on an H200, driver 580.159.04, CUDA 13.0):
	 * a stale handle is a dangling pointer into the runtime. libremote.so keeps
	 * handles as ids in tables and must answer cudaErrorInvalidResourceHandle,
	 * from the call itself. So these calls are made only through the remote; a
	 * local run prints the lines the remote must print, and the outputs compare.
	 */
	cudaStream_t s;
	cudaEvent_t e, e2;
	float ms;
	CK(cudaStreamCreate(&s));
	CK(cudaStreamQuery(s)); /* known to this thread right before the destroy */
	CK(cudaStreamDestroy(s));
	CK(cudaEventCreate(&e));
	CK(cudaEventDestroy(e));
	CK(cudaEventCreate(&e2));
	CK(cudaEventRecord(e2, 0));
	CK(cudaEventSynchronize(e2));
	STALE("stream destroyed twice", cudaStreamDestroy(s));
	STALE("stale stream synchronize", cudaStreamSynchronize(s));
	STALE("stale stream query", cudaStreamQuery(s));
	STALE("stale event record", cudaEventRecord(e, 0));
	STALE("stale event query", cudaEventQuery(e));
	STALE("stale event synchronize", cudaEventSynchronize(e));
	STALE("stale event elapsed time", cudaEventElapsedTime(&ms, e, e2));
	STALE("event destroyed twice", cudaEventDestroy(e));
	CK(cudaEventDestroy(e2));
	still_works("stale handles");

	/*
	 * Launch configuration errors: not sticky, reported once. CUDA 13.0 (driver
	 * 580.159.04, H200) answers all of these with cudaErrorInvalidValue, not
	 * cudaErrorInvalidConfiguration: more than 1024 threads in a block (1024x2),
	 * a block dimension over its limit (2048x1x1), a zero grid, and more dynamic
	 * shared memory than the opt-in limit. The error comes from the launch itself
	 * (cudaPeekAtLastError right after <<<>>>), not from a later call.
	 */
	unsigned *u;
	CK(cudaMalloc(&u, 4096));
	rgtest_fill_u32<<<1, dim3(1024, 2, 1)>>>(u, 1, 1024);
	EXPECT_ERR("launch with 1024x2 threads: peek", cudaPeekAtLastError(), cudaErrorInvalidValue);
	EXPECT_ERR("  peek again", cudaPeekAtLastError(), cudaErrorInvalidValue);
	EXPECT_ERR("  get", cudaGetLastError(), cudaErrorInvalidValue);
	EXPECT_ERR("  get again", cudaGetLastError(), cudaSuccess);
	EXPECT_ERR("  peek after get", cudaPeekAtLastError(), cudaSuccess);
	EXPECT_ERR("  synchronize", cudaDeviceSynchronize(), cudaSuccess);
	rgtest_fill_u32<<<1, 2048>>>(u, 1, 1024);
	EXPECT_ERR("launch with 2048x1x1 threads: peek", cudaPeekAtLastError(), cudaErrorInvalidValue);
	EXPECT_ERR("  get", cudaGetLastError(), cudaErrorInvalidValue);
	EXPECT_ERR("  get again", cudaGetLastError(), cudaSuccess);
	/* through cudaLaunchKernel the error is also returned directly */
	unsigned long long cnt = 1024;
	unsigned v = 2;
	void *args[] = {&u, &v, &cnt};
	EXPECT_AND_LAST("cudaLaunchKernel with 1024x2 threads",
	                cudaLaunchKernel((const void *)rgtest_fill_u32, dim3(1), dim3(1024, 2, 1), args, 0, 0),
	                cudaErrorInvalidValue);
	EXPECT_AND_LAST("cudaLaunchKernel with 2048x1x1 threads",
	                cudaLaunchKernel((const void *)rgtest_fill_u32, dim3(1), dim3(2048), args, 0, 0),
	                cudaErrorInvalidValue);
	rgtest_fill_u32<<<0, 32>>>(u, 1, 1024);
	EXPECT_ERR("launch with grid 0", cudaGetLastError(), cudaErrorInvalidValue);
	int maxsh = 0;
	CK(cudaDeviceGetAttribute(&maxsh, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
	rgtest_fill_u32<<<1, 32, maxsh + 1>>>(u, 1, 1024);
	EXPECT_ERR("launch with too much dynamic shared memory", cudaGetLastError(), cudaErrorInvalidValue);
	CK(cudaFree(u));
	still_works("configuration errors");

	return rg_finish("errors");
}
