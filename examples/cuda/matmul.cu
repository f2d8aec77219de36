/*
 * matmul: C = A x B in float with a 16x16 shared-memory tiled kernel, for
 * sizes that are not multiples of the tile (M=500, K=300, N=400). Checked
 * against a double-precision CPU product (relative error bound); the printed
 * checksum of C is the same on every run on the same GPU.
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

#define TILE 16

/* A is MxK, B is KxN, C is MxN, all row-major. */
__global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
	__shared__ float as[TILE][TILE], bs[TILE][TILE];
	int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
	float acc = 0;
	for (int t = 0; t < K; t += TILE) {
		int ak = t + threadIdx.x, bk = t + threadIdx.y;
		as[threadIdx.y][threadIdx.x] = row < M && ak < K ? A[row * K + ak] : 0.0f;
		bs[threadIdx.y][threadIdx.x] = bk < K && col < N ? B[bk * N + col] : 0.0f;
		__syncthreads();
		for (int k = 0; k < TILE; k++)
			acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
		__syncthreads();
	}
	if (row < M && col < N)
		C[row * N + col] = acc;
}

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / (float)(1u << 24) - 0.5f;
}

int main(void)
{
	const int M = 500, K = 300, N = 400;
	float *A = (float *)malloc(sizeof(float) * M * K), *B = (float *)malloc(sizeof(float) * K * N);
	float *C = (float *)malloc(sizeof(float) * M * N);
	uint32_t seed = 2024;
	for (int i = 0; i < M * K; i++)
		A[i] = frand(&seed);
	for (int i = 0; i < K * N; i++)
		B[i] = frand(&seed);

	float *dA, *dB, *dC;
	CK(cudaMalloc(&dA, sizeof(float) * M * K));
	CK(cudaMalloc(&dB, sizeof(float) * K * N));
	CK(cudaMalloc(&dC, sizeof(float) * M * N));
	CK(cudaMemcpy(dA, A, sizeof(float) * M * K, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dB, B, sizeof(float) * K * N, cudaMemcpyHostToDevice));
	dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventRecord(e0));
	matmul_tiled<<<grid, block>>>(dA, dB, dC, M, N, K);
	CK(cudaGetLastError());
	CK(cudaEventRecord(e1));
	CK(cudaMemcpy(C, dC, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	fprintf(stderr, "matmul: kernel %.3f ms\n", ms); /* timing to stderr: not deterministic */

	double max_rel = 0, sum = 0;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double ref = 0, mag = 0;
			for (int k = 0; k < K; k++) {
				ref += (double)A[i * K + k] * B[k * N + j];
				mag += fabs((double)A[i * K + k] * B[k * N + j]);
			}
			double rel = fabs(C[i * N + j] - ref) / (mag + 1e-30);
			if (rel > max_rel)
				max_rel = rel;
			sum += C[i * N + j];
		}
	int ok = max_rel < 1e-5;
	printf("matmul: %dx%d * %dx%d, tile %d, max relative error %s 1e-5, checksum=%.6f\n", M, K, K, N, TILE,
	       ok ? "<" : ">=", sum);
	printf("matmul: %s\n", ok ? "PASSED" : "FAILED");
	CK(cudaFree(dA));
	CK(cudaFree(dB));
	CK(cudaFree(dC));
	free(A);
	free(B);
	free(C);
	return !ok;
}
