/*
 * visible: the devices the program sees (REMOTE_GPU's reachable servers,
 * CUDA_VISIBLE_DEVICES on top): "count N", then per device "device I GPU-uuid"
 * after a copy through its memory (a cudaMemset and a copy back, bytes
 * checked). NVML must list the same devices in the same order. When
 * cudaGetDeviceCount fails: "error CODE" and exit status 3. Used by the
 * skip_dead scenario (run_e2e.sh).
 */
#include <dlfcn.h>

#include "rgtest.h"

typedef int (*nv_void)(void);
typedef int (*nv_count)(unsigned *);
typedef int (*nv_handle)(unsigned, void **);
typedef int (*nv_uuid)(void *, char *, unsigned);

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	REQUIRE(p, "dlsym %s: %s", name, dlerror());
	return p;
}

int main(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		printf("error %d\n", (int)e);
		return 3;
	}
	printf("count %d\n", n);
	char uuids[64][48];
	REQUIRE(n <= 64, "%d devices", n);
	for (int dev = 0; dev < n; dev++) {
		CK(cudaSetDevice(dev));
		cudaDeviceProp p;
		CK(cudaGetDeviceProperties(&p, dev));
		const unsigned char *u = (const unsigned char *)p.uuid.bytes;
		snprintf(uuids[dev], sizeof uuids[dev],
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
			 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
		unsigned char *d = NULL, h[4096];
		CK(cudaMalloc(&d, sizeof h));
		CK(cudaMemset(d, 0x40 + dev, sizeof h));
		CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < sizeof h; i++)
			REQUIRE(h[i] == 0x40 + dev, "device %d byte %zu: %#x", dev, i, h[i]);
		CK(cudaFree(d));
		printf("device %d %s\n", dev, uuids[dev]);
	}
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	REQUIRE(lib, "dlopen libnvidia-ml.so.1: %s", dlerror());
	REQUIRE(((nv_void)sym(lib, "nvmlInit_v2"))() == 0, "nvmlInit_v2");
	unsigned m = 0;
	REQUIRE(((nv_count)sym(lib, "nvmlDeviceGetCount_v2"))(&m) == 0, "nvmlDeviceGetCount_v2");
	REQUIRE((int)m == n, "NVML counts %u devices, CUDA %d", m, n);
	for (unsigned i = 0; i < m; i++) {
		void *h = NULL;
		char s[96];
		REQUIRE(((nv_handle)sym(lib, "nvmlDeviceGetHandleByIndex_v2"))(i, &h) == 0, "handle %u", i);
		REQUIRE(((nv_uuid)sym(lib, "nvmlDeviceGetUUID"))(h, s, sizeof s) == 0, "uuid %u", i);
		REQUIRE(strcmp(s, uuids[i]) == 0, "NVML device %u is %s, CUDA's %s", i, s, uuids[i]);
	}
	((nv_void)sym(lib, "nvmlShutdown"))();
	return 0;
}
