/* Kernels of libcubin_testlib.so: registration from a shared library. */
struct Pair { short s; double d; };

__global__ void klib(float *x, int n, Pair p, char c)
{
	int i = threadIdx.x;
	if (i < n)
		x[i] = (float)(p.d + p.s + c);
}

void testlib_launch(float *x, int n)
{
	klib<<<1, 32>>>(x, n, Pair{1, 2.0}, 3);
}
