/*
 * vector_add: c = a + b on 16M floats with fixed-seed inputs, checked element
 * by element against the CPU. Prints a checksum that is the same on every run.
 *
 *   nvcc -cudart shared -o vector_add vector_add.cu
 *   REMOTE_GPU=gpu-node:7420 LD_PRELOAD=libremote.so ./vector_add
 */
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

__global__ void vector_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

int main(void)
{
	const int n = 16 << 20;
	size_t bytes = (size_t)n * sizeof(float);
	float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
	uint32_t seed = 12345;
	for (int i = 0; i < n; i++) {
		a[i] = frand(&seed);
		b[i] = frand(&seed);
	}
	float *da, *db, *dc;
	CK(cudaMalloc(&da, bytes));
	CK(cudaMalloc(&db, bytes));
	CK(cudaMalloc(&dc, bytes));
	CK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));

	int block = 256, grid = (n + block - 1) / block;
	vector_add<<<grid, block>>>(da, db, dc, n);
	CK(cudaGetLastError());
	CK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));

	int bad = 0;
	double sum = 0;
	for (int i = 0; i < n; i++) {
		if (c[i] != a[i] + b[i]) /* one rounding, same on both sides */
			bad++;
		sum += c[i];
	}
	printf("vector_add: n=%d mismatches=%d checksum=%.6f\n", n, bad, sum);
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dc));
	free(a);
	free(b);
	free(c);
	printf("vector_add: %s\n", bad ? "FAILED" : "PASSED");
	return bad != 0;
}
