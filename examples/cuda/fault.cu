/*
 * fault: a kernel that writes out of bounds through a bad pointer makes CUDA's
 * sticky error. The launch succeeds; the next synchronising call returns
 * cudaErrorIllegalAddress, and so does every later call in this process that
 * needs the context: cudaGetLastError reports the error once and clears its
 * own slot, but cannot repair the context. Exits 0 when that is what happened.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

__global__ void scale(float *p, float s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] *= s;
}

/* Walks far past the end of the allocation: unmapped memory. */
__global__ void bad_write(float *p, long long stride)
{
	p[(long long)(threadIdx.x + 1) * stride] = 1.0f;
}

static int expect(const char *what, cudaError_t got, cudaError_t want)
{
	printf("%-40s %s\n", what, cudaGetErrorName(got));
	return got == want;
}

int main(void)
{
	int ok = 1;
	float *d, h[256];
	for (int i = 0; i < 256; i++)
		h[i] = (float)i;
	ok &= expect("cudaMalloc", cudaMalloc(&d, sizeof h), cudaSuccess);
	ok &= expect("cudaMemcpy H2D", cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice), cudaSuccess);
	scale<<<1, 256>>>(d, 2.0f, 256);
	ok &= expect("scale kernel launch", cudaGetLastError(), cudaSuccess);
	ok &= expect("cudaMemcpy D2H", cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
	printf("h[255] = %.1f\n", h[255]);
	ok &= h[255] == 510.0f;

	bad_write<<<1, 32>>>(d, 1LL << 36); /* 256 GiB apart */
	ok &= expect("bad_write launch", cudaGetLastError(), cudaSuccess);
	ok &= expect("cudaDeviceSynchronize", cudaDeviceSynchronize(), cudaErrorIllegalAddress);
	ok &= expect("cudaGetLastError", cudaGetLastError(), cudaErrorIllegalAddress);
	/* cudaGetLastError clears its own slot, but the context stays broken */
	ok &= expect("cudaGetLastError again", cudaGetLastError(), cudaSuccess);
	ok &= expect("cudaMemcpy D2H after the fault", cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost),
	             cudaErrorIllegalAddress);
	float *e;
	ok &= expect("cudaMalloc after the fault", cudaMalloc(&e, 16), cudaErrorIllegalAddress);
	scale<<<1, 256>>>(d, 2.0f, 256);
	ok &= expect("kernel launch after the fault", cudaGetLastError(), cudaErrorIllegalAddress);
	printf("fault: sticky error behaves as CUDA specifies: %s\n", ok ? "yes" : "NO");
	return !ok;
}
