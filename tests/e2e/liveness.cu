/*
 * liveness: one call made while the harness (liveness.sh) has stopped, killed or
 * kept busy the server; prints what it returned and how long it took. The
 * harness judges the lines.
 *
 *   liveness MODE GO_FILE      MODE: sync | h2d
 *
 * Allocates 256 MiB of device memory (the session then exists on the server),
 * prints "ready", waits until GO_FILE exists, then makes the call: sync, a
 * kernel launch and cudaDeviceSynchronize; h2d, cudaMemcpy of 256 MiB from
 * pageable memory (more than the socket buffers hold). Prints
 * "MODE: NAME CODE SECONDS", then "after: NAME CODE" for a cudaMalloc made
 * afterwards (a lost device keeps failing).
 */
#include <time.h>
#include <unistd.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define MiB (1024ull * 1024)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "sync") != 0 && strcmp(argv[1], "h2d") != 0)) {
		fprintf(stderr, "usage: liveness sync|h2d GO_FILE\n");
		return 2;
	}
	const char *mode = argv[1];
	size_t n = 256 * MiB;
	unsigned char *d, *h = (unsigned char *)malloc(n);
	REQUIRE(h != NULL, "out of host memory");
	memset(h, 0x5a, n);
	CK(cudaMalloc(&d, n));
	printf("ready\n");
	while (access(argv[2], F_OK) != 0)
		usleep(10000);

	double t0 = now_s();
	cudaError_t e;
	if (strcmp(mode, "sync") == 0) {
		rgtest_fill_u32<<<1, 32>>>((unsigned *)d, 7, 32);
		e = cudaDeviceSynchronize();
	} else {
		e = cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
	}
	printf("%s: %s %d %.2f\n", mode, cudaGetErrorName(e), (int)e, now_s() - t0);
	void *p = NULL;
	cudaError_t a = cudaMalloc(&p, 1024);
	printf("after: %s %d\n", cudaGetErrorName(a), (int)a);
	return 0;
}
