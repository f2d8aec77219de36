/*
 * query-loop N: creates a stream and queries it N times, nothing else. Run
 * under callgrind at two values of N, the difference of the instruction
 * counts divided by the difference of N is what one synchronous call costs
 * (bench/rdma/instr.sh), free of the timing noise of an emulated network.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	cudaStream_t s;
	cudaError_t e = cudaStreamCreate(&s);
	for (int i = 0; i < n && e == cudaSuccess; i++)
		e = cudaStreamQuery(s);
	if (e != cudaSuccess) {
		fprintf(stderr, "query-loop: %s\n", cudaGetErrorString(e));
		return 1;
	}
	printf("query-loop: %d queries\n", n);
	return 0;
}
