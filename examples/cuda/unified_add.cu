/*
 * unified_add: the tutorial shape of managed memory. The host fills x and y
 * in cudaMallocManaged memory, a kernel adds them, the host reads the result
 * after cudaDeviceSynchronize; then host and device take turns writing the
 * same array, and a prefetch each way. Prints what it checked and a checksum
 * that is the same on every run.
 *
 *   nvcc -cudart shared -o unified_add unified_add.cu
 *   REMOTE_GPU=gpu-node:7420 LD_PRELOAD=libremote.so ./unified_add
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

__global__ void add(int n, const float *x, float *y)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
		y[i] = x[i] + y[i];
}

__global__ void scale(int n, unsigned *v, unsigned k)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		v[i] = v[i] * k + (unsigned)i;
}

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

int main(void)
{
	int n = 1 << 20;
	float *x, *y;
	CK(cudaMallocManaged(&x, n * sizeof(float)));
	CK(cudaMallocManaged(&y, n * sizeof(float)));
	for (int i = 0; i < n; i++) {
		x[i] = 1.0f;
		y[i] = 2.0f;
	}
	add<<<(n + 255) / 256, 256>>>(n, x, y);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	float maxerr = 0;
	for (int i = 0; i < n; i++)
		maxerr = fmaxf(maxerr, fabsf(y[i] - 3.0f));
	printf("add: max error %g\n", maxerr);

	/* host and device write the same memory in turn */
	int m = 4099;
	unsigned *v;
	CK(cudaMallocManaged(&v, m * sizeof(unsigned)));
	for (int i = 0; i < m; i++)
		v[i] = (unsigned)i;
	for (unsigned k = 2; k < 6; k++) {
		scale<<<(m + 127) / 128, 128>>>(m, v, k);
		CK(cudaDeviceSynchronize());
		v[k] += 1000u * k;
	}
	printf("turns: fnv=%016llx\n", (unsigned long long)fnv(v, m * sizeof(unsigned)));

	/* a prefetch either way changes where the bytes are, never what they are */
	cudaMemLocation dev = {cudaMemLocationTypeDevice, 0}, host = {cudaMemLocationTypeHost, 0};
	CK(cudaMemPrefetchAsync(v, m * sizeof(unsigned), dev, 0, 0));
	scale<<<(m + 127) / 128, 128>>>(m, v, 3);
	CK(cudaMemPrefetchAsync(v, m * sizeof(unsigned), host, 0, 0));
	CK(cudaDeviceSynchronize());
	printf("prefetch: fnv=%016llx\n", (unsigned long long)fnv(v, m * sizeof(unsigned)));
	CK(cudaFree(x));
	CK(cudaFree(y));
	CK(cudaFree(v));
	printf("unified_add: done\n");
	return maxerr == 0 ? 0 : 1;
}
