/*
 * sticky: a kernel that writes through an invalid address (rgtest_fault) makes
 * the context unusable: the launch itself succeeds, the next synchronising
 * call returns cudaErrorIllegalAddress, and so does every later call that
 * needs the context. cudaGetLastError reports it once and then clears only its
 * own slot (the context stays broken: the next call fails again). The values are
 * those of the CUDA runtime on a GPU (tests/e2e/expected/sticky.out).
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

int main(void)
{
	CK(cudaSetDevice(0));
	int *p;
	unsigned *u;
	CK(cudaMalloc(&p, 4096));
	CK(cudaMalloc(&u, 4096));
	rgtest_fill_u32<<<1, 256>>>(u, 7, 1024);
	CK(cudaDeviceSynchronize());
	printf("before the fault: ok\n");

	rgtest_fault<<<1, 1>>>(p);
	EXPECT_ERR("launch of the faulting kernel", cudaPeekAtLastError(), cudaSuccess);
	EXPECT_ERR("device synchronize", cudaDeviceSynchronize(), cudaErrorIllegalAddress);
	EXPECT_ERR("get last error", cudaGetLastError(), cudaErrorIllegalAddress);
	/* the last-error slot is cleared; the context stays broken */
	EXPECT_ERR("get last error again", cudaGetLastError(), cudaSuccess);
	EXPECT_ERR("peek last error", cudaPeekAtLastError(), cudaSuccess);
	EXPECT_ERR("device synchronize again", cudaDeviceSynchronize(), cudaErrorIllegalAddress);
	void *q = NULL;
	EXPECT_ERR("malloc", cudaMalloc(&q, 4096), cudaErrorIllegalAddress);
	unsigned h[16];
	EXPECT_ERR("memcpy d2h", cudaMemcpy(h, u, sizeof h, cudaMemcpyDeviceToHost), cudaErrorIllegalAddress);
	EXPECT_ERR("memset", cudaMemset(u, 0, 64), cudaErrorIllegalAddress);
	cudaStream_t s;
	EXPECT_ERR("stream create", cudaStreamCreate(&s), cudaErrorIllegalAddress);
	rgtest_fill_u32<<<1, 256>>>(u, 8, 1024);
	EXPECT_ERR("launch after the fault", cudaGetLastError(), cudaErrorIllegalAddress);
	EXPECT_ERR("free", cudaFree(u), cudaErrorIllegalAddress);
	size_t fr = 0, tot = 0;
	EXPECT_ERR("mem get info", cudaMemGetInfo(&fr, &tot), cudaErrorIllegalAddress);
	/* queries answered without the context still work */
	int count = 0;
	EXPECT_ERR("get device count", cudaGetDeviceCount(&count), cudaSuccess);
	printf("device count > 0: %s\n", count > 0 ? "yes" : "no");
	printf("error string: %s\n", cudaGetErrorString(cudaErrorIllegalAddress));
	/* the exit status says whether every value matched */
	return rg_finish("sticky");
}
