/*
 * The registration test's program: its own kernel, params.cu's kernels (a second
 * translation unit: a second fatbin) and a shared library's (libcubin_testlib.so).
 * nvcc's host stubs register all of them before main runs, which is all the test
 * needs: it runs with no GPU, under the registration probe, and launches nothing
 * unless given an argument.
 */
#include <cstdio>

void params_launch_all();
void testlib_launch(float *x, int n);

template <typename T> __global__ void kscale(T *x, T a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= a;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		kscale<double><<<1, 32>>>(nullptr, 2.0, 0);
		params_launch_all();
		testlib_launch(nullptr, 0);
	}
	std::printf("registered\n");
	return 0;
}
