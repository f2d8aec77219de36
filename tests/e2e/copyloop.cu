/*
 * copyloop: holds 2 x 64 MiB of device memory, streams and events, and copies
 * 64 MiB back and forth in a loop, for the harness to kill with SIGKILL in the
 * middle of a copy. Prints "ready" once everything is allocated and the first
 * round is done.
 *
 *   copyloop [ROUNDS]     (0 or none: until killed)
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define MiB (1024ull * 1024)

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 0;
	size_t n = 64 * MiB;
	unsigned char *h = (unsigned char *)malloc(n), *a, *b, *pin;
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&a, n));
	CK(cudaMalloc(&b, n));
	CK(cudaMallocHost(&pin, 4 * MiB));
	cudaStream_t s;
	cudaEvent_t e;
	CK(cudaStreamCreate(&s));
	CK(cudaEventCreate(&e));
	rg_pattern(h, n, 1);
	for (long r = 0; rounds == 0 || r < rounds; r++) {
		CK(cudaMemcpy(a, h, n, cudaMemcpyHostToDevice));
		CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
		rgtest_fill_u32<<<64, 256, 0, s>>>((unsigned *)a, (unsigned)r, 1024);
		CK(cudaEventRecord(e, s));
		CK(cudaMemcpyAsync(pin, b, 4 * MiB, cudaMemcpyDeviceToHost, s));
		CK(cudaMemcpy(h, b, n, cudaMemcpyDeviceToHost));
		CK(cudaStreamSynchronize(s));
		if (r == 0) {
			printf("ready\n");
			fflush(stdout);
		}
	}
	printf("done\n");
	return 0;
}
