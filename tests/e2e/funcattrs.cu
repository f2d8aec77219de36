/*
 * funcattrs: cudaFuncGetAttributes, cudaFuncSetAttribute and the occupancy
 * calculator for the rgtest kernels and for kernels with static shared and
 * local memory. Through the remote these come from the server's driver, so on
 * a GPU they must equal a local run; on the driver test double they are the
 * fake's values (CI checks only that the calls succeed).
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

extern "C" __global__ void rgtest_attr_shared(float *p, int n)
{
	__shared__ float tile[1024];
	int i = threadIdx.x;
	tile[i] = i < n ? p[i] : 0;
	__syncthreads();
	if (i < n)
		p[i] = tile[1023 - i];
}

extern "C" __global__ void rgtest_attr_local(float *p, int n, int k)
{
	float a[64];
	for (int i = 0; i < 64; i++)
		a[i] = p[(i * 7 + k) % n];
	p[threadIdx.x % n] = a[k & 63] + a[(k * 3) & 63];
}

extern "C" __global__ void rgtest_attr_dynamic(float *p)
{
	extern __shared__ float dyn[];
	dyn[threadIdx.x] = p[threadIdx.x];
	__syncthreads();
	p[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x];
}

static void show(const char *name, const void *fn)
{
	cudaFuncAttributes a;
	memset(&a, 0, sizeof a);
	CK(cudaFuncGetAttributes(&a, fn));
	printf("%s: regs %d maxThreads %d shared %zu const %zu local %zu maxDynShared %d ptx %d binary %d "
	       "carveout %d\n",
	       name, a.numRegs, a.maxThreadsPerBlock, a.sharedSizeBytes, a.constSizeBytes, a.localSizeBytes,
	       a.maxDynamicSharedSizeBytes, a.ptxVersion, a.binaryVersion, a.preferredShmemCarveout);
	int blocks = -1;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, 256, 0));
	int blocks2 = -1;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks2, fn, 128, 1024,
	                                                          cudaOccupancyDisableCachingOverride));
	printf("  occupancy: %d blocks of 256 threads, %d blocks of 128 threads + 1 KiB\n", blocks, blocks2);
}

int main(void)
{
	CK(cudaSetDevice(0));
	show("rgtest_fill_u32", (const void *)rgtest_fill_u32);
	show("rgtest_add_f32", (const void *)rgtest_add_f32);
	show("rgtest_scale_f32", (const void *)rgtest_scale_f32);
	show("rgtest_fault", (const void *)rgtest_fault);
	show("rgtest_attr_shared", (const void *)rgtest_attr_shared);
	show("rgtest_attr_local", (const void *)rgtest_attr_local);
	show("rgtest_attr_dynamic", (const void *)rgtest_attr_dynamic);

	/* opt in to more dynamic shared memory (up to the opt-in limit less the
	 * kernel's static shared memory) and read the attribute back */
	int optin = 0;
	CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
	cudaFuncAttributes a;
	CK(cudaFuncGetAttributes(&a, (const void *)rgtest_attr_dynamic));
	int limit = optin - (int)a.sharedSizeBytes;
	CK(cudaFuncSetAttribute((const void *)rgtest_attr_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
	                        limit));
	CK(cudaFuncGetAttributes(&a, (const void *)rgtest_attr_dynamic));
	printf("rgtest_attr_dynamic maxDynShared after opt-in equals the limit: %s\n",
	       a.maxDynamicSharedSizeBytes == limit ? "yes" : "no");
	if (a.maxDynamicSharedSizeBytes != limit && !rg_fake()) /* the fake's attributes are canned */
		rg_failures++;
	int blocks = -1;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)rgtest_attr_dynamic, 256, limit));
	printf("  occupancy with the most dynamic shared memory: %d\n", blocks);
	CK(cudaFuncSetAttribute((const void *)rgtest_attr_dynamic, cudaFuncAttributePreferredSharedMemoryCarveout,
	                        50));
	int min_grid = 0, block = 0;
	CK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, rgtest_fill_u32, 0, 0));
	printf("max potential block size for rgtest_fill_u32: %d (min grid %d)\n", block, min_grid);
	EXPECT_ERR("max dynamic shared memory past the limit",
	           cudaFuncSetAttribute((const void *)rgtest_attr_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
	                                limit + 1),
	           cudaErrorInvalidValue);
	cudaGetLastError();

	/* preferences and limits, set and read back */
	CK(cudaFuncSetCacheConfig((const void *)rgtest_attr_shared, cudaFuncCachePreferL1));
	size_t heap = 0;
	CK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 24u << 20));
	CK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
	printf("malloc heap limit as set: %d\n", heap == (24u << 20));
	enum cudaFuncCache cc = cudaFuncCachePreferNone;
	CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
	CK(cudaDeviceGetCacheConfig(&cc));
	printf("cache config as set: %d\n", cc == cudaFuncCachePreferShared);
	CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));
	struct cudaDeviceProp want;
	memset(&want, 0, sizeof(want));
	want.major = 1;
	int chosen = -1;
	CK(cudaChooseDevice(&chosen, &want));
	printf("chosen device: %d\n", chosen);
	/* a cooperative launch that fits, and one too large for the device */
	float *cp;
	int cn = 1024;
	CK(cudaMalloc(&cp, cn * sizeof(float)));
	void *cargs[] = {&cp, &cn};
	CK(cudaLaunchCooperativeKernel((const void *)rgtest_attr_shared, dim3(2), dim3(1024), cargs, 0, 0));
	CK(cudaDeviceSynchronize());
	EXPECT_ERR("cooperative launch past the device",
	           cudaLaunchCooperativeKernel((const void *)rgtest_attr_shared, dim3(1u << 20), dim3(1024), cargs, 0, 0),
	           cudaErrorCooperativeLaunchTooLarge);
	cudaGetLastError();
	CK(cudaFree(cp));

	/* a runtime call libremote.so does not implement fails plainly, not with
	 * the real runtime's cudaErrorInsufficientDriver (checked silently: the
	 * local run on a GPU answers differently, and prints the same) */
	if (rg_remote()) {
		cudaMipmappedArray_t mm;
		cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
		cudaError_t te = cudaMallocMipmappedArray(&mm, &cd, make_cudaExtent(16, 16, 0), 2, 0);
		if (te != cudaErrorNotSupported) {
			fprintf(stderr, "an unimplemented call: %s, want cudaErrorNotSupported\n", cudaGetErrorName(te));
			rg_failures++;
		}
		cudaGetLastError();
	}
	return rg_finish("funcattrs");
}
