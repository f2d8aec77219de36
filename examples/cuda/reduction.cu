/*
 * reduction: sums 2^24 floats in two passes (per-block shared-memory tree
 * reduction, then one block over the partial sums), so the float result is
 * the same on every run; also counts elements above zero with atomicAdd on
 * an integer. Checked against the CPU (double sum, tolerance for the float
 * summation order; the count exactly).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CK(call)                                                                          \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                          \
		if (e_ != cudaSuccess) {                                                          \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
			exit(1);                                                                      \
		}                                                                                 \
	} while (0)

#define BLOCK 512

/* Each block sums a grid-stride share of x into partial[blockIdx.x] and, if
 * positive is set, adds its count of elements > 0 to it. */
__global__ void block_sum(const float *x, float *partial, unsigned *positive, int n)
{
	__shared__ float s[BLOCK];
	float acc = 0;
	unsigned pos = 0;
	for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) {
		acc += x[i];
		pos += x[i] > 0;
	}
	s[threadIdx.x] = acc;
	__syncthreads();
	for (int w = BLOCK / 2; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			s[threadIdx.x] += s[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s[0];
	if (positive)
		atomicAdd(positive, pos);
}

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / (float)(1u << 24) - 0.25f;
}

int main(void)
{
	const int n = 1 << 24, grid = 1024;
	float *x = (float *)malloc(sizeof(float) * n);
	uint32_t seed = 7;
	double ref = 0;
	unsigned ref_pos = 0;
	for (int i = 0; i < n; i++) {
		x[i] = frand(&seed);
		ref += x[i];
		ref_pos += x[i] > 0;
	}
	float *dx, *dpart, *dsum;
	unsigned *dpos;
	CK(cudaMalloc(&dx, sizeof(float) * n));
	CK(cudaMalloc(&dpart, sizeof(float) * grid));
	CK(cudaMalloc(&dsum, sizeof(float)));
	CK(cudaMalloc(&dpos, sizeof(unsigned)));
	CK(cudaMemcpy(dx, x, sizeof(float) * n, cudaMemcpyHostToDevice));
	CK(cudaMemset(dpos, 0, sizeof(unsigned)));
	block_sum<<<grid, BLOCK>>>(dx, dpart, dpos, n);
	CK(cudaGetLastError());
	block_sum<<<1, BLOCK>>>(dpart, dsum, NULL, grid);
	CK(cudaGetLastError());
	float sum;
	unsigned pos;
	CK(cudaMemcpy(&sum, dsum, sizeof sum, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&pos, dpos, sizeof pos, cudaMemcpyDeviceToHost));
	double rel = fabs(sum - ref) / fabs(ref);
	int ok = rel < 1e-4 && pos == ref_pos;
	printf("reduction: n=%d sum=%.6f (cpu %.6f, relative error %s 1e-4) positive=%u (cpu %u)\n", n, sum, ref,
	       rel < 1e-4 ? "<" : ">=", pos, ref_pos);
	printf("reduction: %s\n", ok ? "PASSED" : "FAILED");
	CK(cudaFree(dx));
	CK(cudaFree(dpart));
	CK(cudaFree(dsum));
	CK(cudaFree(dpos));
	free(x);
	return !ok;
}
