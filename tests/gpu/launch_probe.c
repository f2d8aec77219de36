/* Launch-rate probe for the driver API, on the GPU machine: where does a remote
 * launch's time go? Empty kernel, 100k async launches on the NULL stream then one
 * synchronize, in a context made with cuCtxCreate (as remote-gpud's sessions) and
 * in the primary context, with kernelParams and with an `extra` parameter buffer
 * (what remote-gpud uses).
 *   cc launch_probe.c -I/usr/local/cuda/include -lcuda -o launch_probe
 *   ./launch_probe empty.cubin   (a cubin with extern "C" __global__ void k(int) {}) */
#include <cuda.h>
#include <stdio.h>
#include <time.h>

#define N 100000

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void run(const char *what, CUfunction f, int use_extra)
{
	int v = 1;
	void *params[] = {&v};
	int buf = 1;
	size_t len = sizeof(buf);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &len, CU_LAUNCH_PARAM_END};
	for (int rep = 0; rep < 2; rep++) {
		double t0 = now();
		for (int i = 0; i < N; i++)
			cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, use_extra ? NULL : params, use_extra ? extra : NULL);
		double t1 = now();
		cuCtxSynchronize();
		double t2 = now();
		if (rep)
			printf("%-40s %8.0f launches/s (issue %.1f ms, sync %.1f ms)\n", what, N / (t2 - t0), (t1 - t0) * 1e3,
			       (t2 - t1) * 1e3);
	}
}

int main(int argc, char **argv)
{
	CUdevice d;
	CUcontext ctx, prim;
	CUmodule m;
	CUfunction f;
	cuInit(0);
	cuDeviceGet(&d, 0);
	cuCtxCreate(&ctx, NULL, 0, d);
	cuModuleLoad(&m, argv[1]);
	cuModuleGetFunction(&f, m, "k");
	run("cuCtxCreate context, kernelParams", f, 0);
	run("cuCtxCreate context, extra buffer", f, 1);
	cuDevicePrimaryCtxRetain(&prim, d);
	cuCtxSetCurrent(prim);
	cuModuleLoad(&m, argv[1]);
	cuModuleGetFunction(&f, m, "k");
	run("primary context, kernelParams", f, 0);
	run("primary context, extra buffer", f, 1);
	return 0;
}
