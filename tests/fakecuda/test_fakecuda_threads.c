/* The driver test double's contexts, thread safety, and the FAKECUDA_DEVICES
 * / FAKECUDA_MEM_BYTES knobs (see test_fakecuda.c). */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fk_check.h"

/* ---- contexts ---- */

static void *no_ctx_thread(void *arg)
{
	CUdeviceptr d;
	CUcontext cur = (CUcontext)1;
	CK(p_cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
	OK(p_cuCtxGetCurrent(&cur));
	CHECK(cur == NULL);
	/* make the main thread's context current here, and use it */
	OK(p_cuCtxSetCurrent((CUcontext)arg));
	OK(p_cuMemAlloc(&d, 16));
	OK(p_cuMemFree(d));
	return NULL;
}

void test_contexts(CUcontext main_ctx)
{
	size_t before = free_mem();
	CUcontext c4, c5, cur;
	CUdeviceptr d, d1;
	CUstream s, s1;
	CUevent e;
	pthread_t t;

	pthread_create(&t, NULL, no_ctx_thread, main_ctx);
	pthread_join(t, NULL);

	/* destroying a context frees what it owns and makes its handles stale */
	OK(p_cuCtxCreate(&c4, NULL, 0, 0));
	OK(p_cuCtxGetCurrent(&cur));
	CHECK(cur == c4);
	OK(p_cuMemAlloc(&d, 1 << 20));
	OK(p_cuStreamCreate(&s, 0));
	OK(p_cuEventCreate(&e, 0));
#ifdef FK_KERNELS_DIR
	void *fb = read_file("test_kernels.fatbin", NULL);
	CUmodule m;
	OK(p_cuModuleLoadData(&m, fb));
	free(fb);
#endif
	CHECK(free_mem() < before);
	OK(p_cuCtxDestroy(c4));
	OK(p_cuCtxGetCurrent(&cur));
	CHECK(cur == main_ctx); /* c4 was popped */
	CHECK(free_mem() == before);
	CK(p_cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
#ifdef FK_KERNELS_DIR
	CK(p_cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
#endif
	CK(p_cuCtxDestroy(c4), CUDA_ERROR_INVALID_CONTEXT);
	CK(p_cuCtxSetCurrent(c4), CUDA_ERROR_INVALID_CONTEXT);

	/* handles and memory of one context are not valid in another */
	OK(p_cuStreamCreate(&s1, 0));
	OK(p_cuMemAlloc(&d1, 256));
	OK(p_cuCtxCreate(&c5, NULL, 0, 0));
	CK(p_cuStreamSynchronize(s1), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuMemsetD8(d1, 0, 1), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemFree(d1), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpy(d1, d1, 8), CUDA_ERROR_INVALID_VALUE); /* another context's memory */
	OK(p_cuCtxPopCurrent(&cur));
	CHECK(cur == c5);
	OK(p_cuCtxPushCurrent(c5));
	OK(p_cuCtxDestroy(c5));
	OK(p_cuStreamDestroy(s1));
	OK(p_cuMemFree(d1));

	/* primary context */
	CUcontext p1, p2;
	OK(p_cuDevicePrimaryCtxRetain(&p1, 0));
	OK(p_cuDevicePrimaryCtxRetain(&p2, 0));
	CHECK(p1 == p2);
	CK(p_cuCtxDestroy(p1), CUDA_ERROR_INVALID_CONTEXT);
	OK(p_cuDevicePrimaryCtxRelease(0));
	OK(p_cuCtxPushCurrent(p1));
	OK(p_cuMemAlloc(&d, 64));
	OK(p_cuCtxPopCurrent(NULL));
	OK(p_cuDevicePrimaryCtxRelease(0));
	CK(p_cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CK(p_cuCtxPushCurrent(p1), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(free_mem() == before);
}

/* ---- threads ---- */

static void *worker(void *arg)
{
	CUcontext ctx = arg, own = NULL;
	unsigned char buf[512], back[512];

	if (ctx)
		OK(p_cuCtxSetCurrent(ctx)); /* threads sharing one context */
	else
		OK(p_cuCtxCreate(&own, NULL, 0, 0));
	for (int i = 0; i < 300; i++) {
		CUdeviceptr d;
		CUstream s;
		CUevent e;
		memset(buf, i & 0xFF, sizeof buf);
		OK(p_cuMemAlloc(&d, sizeof buf));
		OK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		OK(p_cuEventCreate(&e, 0));
		OK(p_cuMemcpyHtoDAsync(d, buf, sizeof buf, s));
		OK(p_cuEventRecord(e, s));
		OK(p_cuStreamWaitEvent(NULL, e, 0));
		OK(p_cuMemcpyDtoHAsync(back, d, sizeof back, s));
		OK(p_cuStreamSynchronize(s));
		CHECK(memcmp(buf, back, sizeof buf) == 0);
		OK(p_cuEventDestroy(e));
		OK(p_cuStreamDestroy(s));
		OK(p_cuMemFree(d));
	}
	if (own)
		OK(p_cuCtxDestroy(own));
	return NULL;
}

void test_threads(CUcontext main_ctx)
{
	size_t before = free_mem();
	pthread_t t[8];

	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, i % 2 ? main_ctx : NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	CHECK(free_mem() == before);
}

/* ---- FAKECUDA_DEVICES / FAKECUDA_MEM_BYTES (run with both set) ---- */

void test_env(void)
{
	int n = 0;
	size_t total = 0, fr = 0;
	CUcontext c;
	CUdevice dev = -1;
	CUdeviceptr a, b;

	OK(p_cuInit(0));
	OK(p_cuDeviceGetCount(&n));
	CHECK(n == 3);
	OK(p_cuDeviceTotalMem(&total, 2));
	CHECK(total == 64u << 20);
	OK(p_cuCtxCreate(&c, NULL, 0, 2));
	OK(p_cuCtxGetDevice(&dev));
	CHECK(dev == 2);
	CK(p_cuMemAlloc(&a, (64u << 20) + 1), CUDA_ERROR_OUT_OF_MEMORY);
	OK(p_cuMemAlloc(&a, 64u << 20));
	CK(p_cuMemAlloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
	OK(p_cuMemGetInfo(&fr, &total));
	CHECK(fr == 0);
	OK(p_cuMemFree(a));
	OK(p_cuCtxDestroy(c));
	CK(p_cuCtxCreate(&c, NULL, 0, 3), CUDA_ERROR_INVALID_DEVICE);
}
