/*
 * rgtest_kernels.cuh: the kernels the driver test double (tests/fakecuda)
 * emulates by name. Their names and signatures are a contract with the fake:
 * change them only together with it. The bodies are real CUDA so the same
 * programs run on a GPU. Every other kernel is only logged by the fake.
 *
 * Include this in exactly one .cu file per program (the kernels are defined
 * here, extern "C" so the fake sees unmangled names).
 */
#ifndef RGTEST_KERNELS_CUH
#define RGTEST_KERNELS_CUH

#include <cuda_runtime.h>

/* p[i] = v for i < n. */
extern "C" __global__ void rgtest_fill_u32(unsigned *p, unsigned v, unsigned long long n)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		p[i] = v;
}

/* c[i] = a[i] + b[i] for i < n. */
extern "C" __global__ void rgtest_add_f32(const float *a, const float *b, float *c, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		c[i] = a[i] + b[i];
}

/* p[i] *= s for i < n. */
extern "C" __global__ void rgtest_scale_f32(float *p, float s, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		p[i] *= s;
}

/*
 * Writes through an invalid address: on a GPU the context gets the sticky
 * cudaErrorIllegalAddress; the fake sets CUDA_ERROR_ILLEGAL_ADDRESS. p is
 * unused on purpose (the fake's contract has one pointer parameter).
 */
extern "C" __global__ void rgtest_fault(int *p)
{
	*(volatile int *)0x10 = p != 0;
}

/* The launch geometry every program uses for these kernels (grid-stride). */
static inline unsigned rgtest_grid(unsigned long long n)
{
	unsigned long long g = (n + 255) / 256;
	if (g < 1)
		g = 1;
	if (g > 1024)
		g = 1024;
	return (unsigned)g;
}

#endif
