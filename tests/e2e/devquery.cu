/*
 * devquery: device count, properties and attributes, versions, PCI id,
 * total memory. Through libremote.so these are answered from the handshake
 * and must equal a local run on the same GPU (tests/gpu/run.sh compares);
 * managed memory is left out, as libremote.so reports none by design. On
 * the driver test double the values are the fake's, so CI checks only that
 * every call succeeds and that properties agree with attributes.
 */
#include "rgtest.h"

#define ATTR(a) {a, #a}
static const struct {
	cudaDeviceAttr a;
	const char *name;
} attrs[] = {
	ATTR(cudaDevAttrMaxThreadsPerBlock),         ATTR(cudaDevAttrMaxBlockDimX),
	ATTR(cudaDevAttrMaxGridDimX),                ATTR(cudaDevAttrMaxGridDimY),
	ATTR(cudaDevAttrMaxSharedMemoryPerBlock),    ATTR(cudaDevAttrTotalConstantMemory),
	ATTR(cudaDevAttrWarpSize),                   ATTR(cudaDevAttrMaxRegistersPerBlock),
	ATTR(cudaDevAttrClockRate),                  ATTR(cudaDevAttrMultiProcessorCount),
	ATTR(cudaDevAttrComputeCapabilityMajor),     ATTR(cudaDevAttrComputeCapabilityMinor),
	ATTR(cudaDevAttrL2CacheSize),                ATTR(cudaDevAttrMaxThreadsPerMultiProcessor),
	ATTR(cudaDevAttrGlobalMemoryBusWidth),       ATTR(cudaDevAttrMemoryClockRate),
	ATTR(cudaDevAttrConcurrentKernels),          ATTR(cudaDevAttrAsyncEngineCount),
	ATTR(cudaDevAttrUnifiedAddressing),          ATTR(cudaDevAttrPciBusId),
	ATTR(cudaDevAttrMaxSharedMemoryPerBlockOptin), ATTR(cudaDevAttrMaxSharedMemoryPerMultiprocessor),
	ATTR(cudaDevAttrMaxRegistersPerMultiprocessor), ATTR(cudaDevAttrMaxBlocksPerMultiprocessor),
	ATTR(cudaDevAttrStreamPrioritiesSupported),  ATTR(cudaDevAttrMemoryPoolsSupported),
	ATTR(cudaDevAttrCooperativeLaunch),
};

int main(void)
{
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	printf("device count: %d\n", n);
	REQUIRE(n > 0, "no device");
	int drv = 0, rt = 0;
	CK(cudaDriverGetVersion(&drv));
	CK(cudaRuntimeGetVersion(&rt));
	printf("driver version: %d\nruntime version: %d\n", drv, rt);
	for (int dev = 0; dev < n; dev++) {
		CK(cudaSetDevice(dev));
		int cur = -1;
		CK(cudaGetDevice(&cur));
		REQUIRE(cur == dev, "cudaGetDevice %d != %d", cur, dev);
		cudaDeviceProp p;
		memset(&p, 0, sizeof p);
		CK(cudaGetDeviceProperties(&p, dev));
		char uuid[33];
		rg_hex(uuid, p.uuid.bytes, 16);
		printf("device %d: %s\n", dev, p.name);
		printf("  uuid %s\n", uuid);
		printf("  compute capability %d.%d, %d SMs\n", p.major, p.minor, p.multiProcessorCount);
		printf("  totalGlobalMem %zu totalConstMem %zu\n", p.totalGlobalMem, p.totalConstMem);
		printf("  sharedMemPerBlock %zu optin %zu perSM %zu reserved %zu\n", p.sharedMemPerBlock,
		       p.sharedMemPerBlockOptin, p.sharedMemPerMultiprocessor, p.reservedSharedMemPerBlock);
		printf("  regsPerBlock %d regsPerSM %d warpSize %d\n", p.regsPerBlock, p.regsPerMultiprocessor,
		       p.warpSize);
		printf("  maxThreadsPerBlock %d dim %d,%d,%d grid %d,%d,%d\n", p.maxThreadsPerBlock,
		       p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2], p.maxGridSize[0], p.maxGridSize[1],
		       p.maxGridSize[2]);
		printf("  maxThreadsPerSM %d maxBlocksPerSM %d\n", p.maxThreadsPerMultiProcessor,
		       p.maxBlocksPerMultiProcessor);
		printf("  l2CacheSize %d memoryBusWidth %d\n", p.l2CacheSize, p.memoryBusWidth);
		printf("  pci %04x:%02x:%02x\n", p.pciDomainID, p.pciBusID, p.pciDeviceID);
		printf("  concurrentKernels %d asyncEngineCount %d unifiedAddressing %d\n", p.concurrentKernels,
		       p.asyncEngineCount, p.unifiedAddressing);
		printf("  streamPriorities %d memoryPools %d cooperativeLaunch %d clusterLaunch %d\n",
		       p.streamPrioritiesSupported, p.memoryPoolsSupported, p.cooperativeLaunch, p.clusterLaunch);
		for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
			int v = 0;
			CK(cudaDeviceGetAttribute(&v, attrs[i].a, dev));
			printf("  %s = %d\n", attrs[i].name, v);
		}
		/* properties and attributes agree */
		int sm = 0, maj = 0;
		CK(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, dev));
		CK(cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev));
		REQUIRE(sm == p.multiProcessorCount && maj == p.major, "attributes disagree with properties");
		char bus[64] = "";
		CK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
		printf("  pci bus id %s\n", bus);
		size_t fr = 0, tot = 0;
		CK(cudaMemGetInfo(&fr, &tot));
		printf("  mem total %zu, free <= total: %s\n", tot, fr <= tot ? "yes" : "no");
		int lo = 0, hi = 0;
		CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
		printf("  stream priorities %d..%d\n", lo, hi);
	}
	cudaDeviceProp q;
	EXPECT_ERR("properties of device #count", cudaGetDeviceProperties(&q, n), cudaErrorInvalidDevice);
	cudaGetLastError();
	EXPECT_ERR("set device #count", cudaSetDevice(n), cudaErrorInvalidDevice);
	cudaGetLastError();

	/* cudaDeviceReset frees what the process had (the harness checks the
	 * server's memory after the run) and the device works after it */
	CK(cudaSetDevice(0));
	void *big;
	CK(cudaMalloc(&big, 64u << 20));
	CK(cudaDeviceReset());
	unsigned char *small, h[64];
	CK(cudaMalloc(&small, sizeof(h)));
	CK(cudaMemset(small, 0x3c, sizeof(h)));
	CK(cudaMemcpy(h, small, sizeof(h), cudaMemcpyDeviceToHost));
	printf("after cudaDeviceReset: %02x\n", h[17]);
	CK(cudaFree(small));
	CK(cudaDeviceReset());
	return rg_finish("devquery");
}
