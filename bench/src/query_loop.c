/*
 * query-loop N: creates a stream and queries it N times, nothing else. Run
 * under callgrind at two values of N, the difference of the instruction
 * counts divided by the difference of N is what one synchronous call costs
 * (bench/rdma/instr.sh), free of the timing noise of an emulated network.
 * It also prints the wall time per query, for quick round-trip checks.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	cudaStream_t s;
	cudaError_t e = cudaStreamCreate(&s);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n && e == cudaSuccess; i++)
		e = cudaStreamQuery(s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (e != cudaSuccess) {
		fprintf(stderr, "query-loop: %s\n", cudaGetErrorString(e));
		return 1;
	}
	double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
	printf("query-loop: %d queries, %.2f us each\n", n, n > 0 ? us / n : 0.0);
	return 0;
}
