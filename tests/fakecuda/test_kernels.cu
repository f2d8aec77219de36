// Kernels for test_fakecuda: the emulated rgtest_* kernels (with the signatures the
// fake emulates), a kernel with mixed parameter types for the launch-log format, and
// globals of each kind for cuModuleGetGlobal.
struct three { char c[3]; };

extern "C" __global__ void rgtest_fill_u32(unsigned *p, unsigned v, unsigned long long n)
{
	for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (unsigned long long)gridDim.x * blockDim.x)
		p[i] = v;
}

extern "C" __global__ void rgtest_add_f32(const float *a, const float *b, float *c, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		c[i] = a[i] + b[i];
}

extern "C" __global__ void rgtest_scale_f32(float *p, float s, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		p[i] *= s;
}

extern "C" __global__ void rgtest_fault(int *p)
{
	*(volatile int *)0 = *p;
}

extern "C" __global__ void mixed(char a, double b, short c, three s, float *p, int d)
{
	if (p)
		p[threadIdx.x] = a + b + c + s.c[0] + s.c[1] + s.c[2] + d;
}

extern "C" __global__ void noparams(void)
{
}

extern "C" __global__ void with_shared(float *p)
{
	__shared__ float buf[256];
	buf[threadIdx.x] = p[threadIdx.x];
	__syncthreads();
	p[threadIdx.x] = buf[255 - threadIdx.x];
}

__device__ int gvar[10];
__device__ int ginit = 42;
__constant__ float cvals[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
