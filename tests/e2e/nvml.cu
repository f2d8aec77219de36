/*
 * nvml: NVML on a GPU-less client, as torch and pynvml reach it: dlopen of
 * "libnvidia-ml.so.1" by name (answered by libremote.so) and dlsym of the
 * symbols nvml.h maps the names to. NVML must describe the same devices as
 * CUDA through the same library: count, name, UUID, PCI address, compute
 * capability, memory (free falls by what this program allocates), and refuse
 * bad handles and indices as NVML does. A function libremote.so does not
 * implement answers NVML_ERROR_NOT_SUPPORTED, never success.
 *
 *   nvml [COUNT]   COUNT: the number of devices REMOTE_GPU names (checked)
 *
 * On the driver test double (RGTEST_FAKE=1) the server has no NVML: live values
 * other than memory must answer NOT_SUPPORTED. On a GPU they must succeed, and
 * the only compute process shown is this program, under its own pid.
 * NVML's types are declared here as a program would take them from nvml.h.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "rgtest.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	char busIdLegacy[16];
	unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
	unsigned version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
	unsigned gpu, memory;
} nvmlUtilization_t;
typedef struct {
	unsigned pid;
	unsigned long long usedGpuMemory;
	unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

enum {
	OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6, INSUFFICIENT_SIZE = 7
};
#define MEMORY_V2 ((unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

static void *lib;
static void *sym(const char *name)
{
	void *p = dlsym(lib, name);
	REQUIRE(p, "libnvidia-ml.so.1 lacks %s", name);
	return p;
}
#define FN(name, params) nvmlReturn_t(*name) params = (nvmlReturn_t(*) params)sym(#name)
#define NV(call, want)                                                                              \
	do {                                                                                        \
		int nv_r_ = (call);                                                                 \
		REQUIRE(nv_r_ == (want), "%s: %d (%s), want %d", #call, nv_r_, err_str(nv_r_), (want)); \
	} while (0)

static const char *(*err_str)(nvmlReturn_t);

int main(int argc, char **argv)
{
	lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	REQUIRE(lib, "dlopen libnvidia-ml.so.1: %s", dlerror());
	void *again = dlopen("libnvidia-ml.so", RTLD_NOW);
	REQUIRE(again == lib, "libnvidia-ml.so is another library than libnvidia-ml.so.1");
	err_str = (const char *(*)(nvmlReturn_t))sym("nvmlErrorString");
	FN(nvmlInit_v2, (void));
	FN(nvmlInitWithFlags, (unsigned));
	FN(nvmlShutdown, (void));
	FN(nvmlDeviceGetCount_v2, (unsigned *));
	FN(nvmlDeviceGetCount, (unsigned *));
	FN(nvmlDeviceGetHandleByIndex_v2, (unsigned, nvmlDevice_t *));
	FN(nvmlDeviceGetHandleByUUID, (const char *, nvmlDevice_t *));
	FN(nvmlDeviceGetHandleByPciBusId_v2, (const char *, nvmlDevice_t *));
	FN(nvmlDeviceGetName, (nvmlDevice_t, char *, unsigned));
	FN(nvmlDeviceGetUUID, (nvmlDevice_t, char *, unsigned));
	FN(nvmlDeviceGetIndex, (nvmlDevice_t, unsigned *));
	FN(nvmlDeviceGetPciInfo_v3, (nvmlDevice_t, nvmlPciInfo_t *));
	FN(nvmlDeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *));
	FN(nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t, nvmlMemory_v2_t *));
	FN(nvmlDeviceGetCudaComputeCapability, (nvmlDevice_t, int *, int *));
	FN(nvmlDeviceGetUtilizationRates, (nvmlDevice_t, nvmlUtilization_t *));
	FN(nvmlDeviceGetComputeRunningProcesses_v3, (nvmlDevice_t, unsigned *, nvmlProcessInfo_t *));
	FN(nvmlDeviceGetNvLinkState, (nvmlDevice_t, unsigned, int *));
	FN(nvmlDeviceGetFanSpeed, (nvmlDevice_t, unsigned *));
	FN(nvmlSystemGetCudaDriverVersion_v2, (int *));
	FN(nvmlDeviceGetP2PStatus, (nvmlDevice_t, nvmlDevice_t, int, int *));

	unsigned n = 0;
	NV(nvmlDeviceGetCount_v2(&n), UNINITIALIZED);
	NV(nvmlInit_v2(), OK);
	NV(nvmlInitWithFlags(0), OK); /* nested: two shutdowns to end */
	NV(nvmlDeviceGetCount_v2(NULL), INVALID_ARGUMENT);
	NV(nvmlDeviceGetCount_v2(&n), OK);
	unsigned n1 = 0;
	NV(nvmlDeviceGetCount(&n1), OK);
	int cuda_n = 0;
	CK(cudaGetDeviceCount(&cuda_n));
	printf("NVML devices: %u, CUDA devices: %d\n", n, cuda_n);
	REQUIRE((int)n == cuda_n && n1 == n, "NVML counts %u (v1 %u), CUDA %d", n, n1, cuda_n);
	if (argc > 1)
		REQUIRE(n == (unsigned)atoi(argv[1]), "%u devices, REMOTE_GPU names %s", n, argv[1]);

	int drv = 0, nvdrv = 0;
	CK(cudaDriverGetVersion(&drv));
	NV(nvmlSystemGetCudaDriverVersion_v2(&nvdrv), OK);
	REQUIRE(drv == nvdrv, "CUDA driver version %d, NVML says %d", drv, nvdrv);

	for (unsigned i = 0; i < n; i++) {
		cudaDeviceProp p;
		CK(cudaGetDeviceProperties(&p, (int)i));
		nvmlDevice_t h;
		NV(nvmlDeviceGetHandleByIndex_v2(i, &h), OK);
		char name[96], uuid[80], want[80], hex[33];
		NV(nvmlDeviceGetName(h, name, sizeof(name)), OK);
		REQUIRE(!strcmp(name, p.name), "device %u: NVML name '%s', CUDA '%s'", i, name, p.name);
		NV(nvmlDeviceGetName(h, name, 1), INSUFFICIENT_SIZE);
		NV(nvmlDeviceGetUUID(h, uuid, sizeof(uuid)), OK);
		rg_hex(hex, p.uuid.bytes, 16);
		snprintf(want, sizeof(want), "GPU-%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
		REQUIRE(!strcmp(uuid, want), "device %u: NVML UUID %s, CUDA %s", i, uuid, want);
		printf("device %u: %s %s\n", i, name, uuid);
		unsigned idx = 99;
		NV(nvmlDeviceGetIndex(h, &idx), OK);
		REQUIRE(idx == i, "index %u of device %u", idx, i);

		nvmlDevice_t by;
		NV(nvmlDeviceGetHandleByUUID(uuid, &by), OK);
		char by_uuid[80];
		NV(nvmlDeviceGetUUID(by, by_uuid, sizeof(by_uuid)), OK);
		REQUIRE(!strcmp(by_uuid, uuid), "the handle by UUID %s has UUID %s", uuid, by_uuid);

		nvmlPciInfo_t pci;
		NV(nvmlDeviceGetPciInfo_v3(h, &pci), OK);
		REQUIRE((int)pci.domain == p.pciDomainID && (int)pci.bus == p.pciBusID && (int)pci.device == p.pciDeviceID,
			"device %u: NVML PCI %x:%x:%x, CUDA %x:%x:%x", i, pci.domain, pci.bus, pci.device, p.pciDomainID,
			p.pciBusID, p.pciDeviceID);
		char cuda_bus[32];
		CK(cudaDeviceGetPCIBusId(cuda_bus, sizeof(cuda_bus), (int)i));
		REQUIRE(!strcasecmp(pci.busIdLegacy, cuda_bus), "legacy bus id %s, CUDA %s", pci.busIdLegacy, cuda_bus);
		printf("  pci %s (legacy %s)\n", pci.busId, pci.busIdLegacy);
		NV(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &by), OK);
		NV(nvmlDeviceGetPciInfo_v3(by, &pci), OK); /* same address (REMOTE_GPU may name one GPU twice) */
		REQUIRE((int)pci.bus == p.pciBusID, "the handle by bus id has bus %x", pci.bus);
		NV(nvmlDeviceGetHandleByPciBusId_v2(cuda_bus, &by), OK);

		int major = 0, minor = 0;
		NV(nvmlDeviceGetCudaComputeCapability(h, &major, &minor), OK);
		REQUIRE(major == p.major && minor == p.minor, "compute capability %d.%d, CUDA %d.%d", major, minor,
			p.major, p.minor);

		/* memory: the device's as the server sees it, falling by what we allocate */
		CK(cudaSetDevice((int)i));
		size_t cfree = 0, ctotal = 0;
		CK(cudaMemGetInfo(&cfree, &ctotal));
		nvmlMemory_t m;
		NV(nvmlDeviceGetMemoryInfo(h, &m), OK);
		/* stderr: the numbers move between runs (stdout is compared with a local run) */
		fprintf(stderr, "  memory: NVML total %llu free %llu used %llu; CUDA total %zu free %zu\n", m.total, m.free,
		       m.used, ctotal, cfree);
		REQUIRE(m.free <= m.total && m.used <= m.total, "free %llu used %llu of %llu", m.free, m.used, m.total);
		REQUIRE(m.total >= ctotal && m.total >= p.totalGlobalMem, "NVML total %llu below CUDA's %zu / %zu", m.total,
			ctotal, p.totalGlobalMem);
		if (rg_fake())
			REQUIRE(m.total == ctotal && m.total == p.totalGlobalMem, "NVML total %llu, CUDA %zu", m.total,
				ctotal);
		const size_t grab = 64u << 20;
		void *d = NULL;
		CK(cudaMalloc(&d, grab));
		nvmlMemory_t m2;
		NV(nvmlDeviceGetMemoryInfo(h, &m2), OK);
		REQUIRE(m2.free + grab <= m.free, "free %llu after a 64 MiB allocation, %llu before", m2.free, m.free);
		nvmlMemory_v2_t v2;
		memset(&v2, 0, sizeof(v2));
		/* Not a wrong struct version: an H100's NVML (driver 580) answered it
		 * FUNCTION_NOT_FOUND once and crashed the next time. */
		v2.version = MEMORY_V2;
		NV(nvmlDeviceGetMemoryInfo_v2(h, &v2), OK);
		REQUIRE(v2.total == m2.total && v2.free <= v2.total && v2.used + v2.reserved <= v2.total,
			"v2: total %llu free %llu used %llu reserved %llu", v2.total, v2.free, v2.used, v2.reserved);

		/* live values: the server's NVML, which the test double lacks */
		nvmlUtilization_t u;
		nvmlProcessInfo_t procs[8];
		unsigned np = 8;
		int ru = nvmlDeviceGetUtilizationRates(h, &u);
		int rp = nvmlDeviceGetComputeRunningProcesses_v3(h, &np, procs);
		if (rg_fake()) {
			REQUIRE(ru == NOT_SUPPORTED, "utilization without NVML on the server: %d", ru);
			REQUIRE(rp == NOT_SUPPORTED, "processes without NVML on the server: %d", rp);
		} else {
			REQUIRE(ru == OK && u.gpu <= 100 && u.memory <= 100, "utilization: %d (%u%%, %u%%)", ru, u.gpu,
				u.memory);
			REQUIRE(rp == OK && np == 1 && procs[0].pid == (unsigned)getpid() &&
					procs[0].usedGpuMemory >= grab,
				"processes: %d, %u of them, pid %u (ours %d), %llu bytes", rp, np, np ? procs[0].pid : 0,
				(int)getpid(), np ? procs[0].usedGpuMemory : 0);
			np = 0;
			NV(nvmlDeviceGetComputeRunningProcesses_v3(h, &np, NULL), INSUFFICIENT_SIZE);
			REQUIRE(np == 1, "the count asked for room for %u", np);
		}
		CK(cudaFree(d));

		/* a field (NVML_FI_DEV_ECC_CURRENT: 1) and the fabric state, as XLA
		 * asks them: the server's NVML, which the test double lacks */
		FN(nvmlDeviceGetFieldValues, (nvmlDevice_t, int, void *));
		FN(nvmlDeviceGetGpuFabricInfoV, (nvmlDevice_t, void *));
		struct {
			unsigned fieldId, scopeId;
			long long timestamp, latencyUsec;
			int valueType, nvmlReturn;
			unsigned long long value;
		} fv = {1, 0, 0, 0, 0, 0, 0};
		unsigned fabric[9] = {(unsigned)(36u | 2u << 24)}; /* nvmlGpuFabricInfo_v2: 36 bytes */
		NV(nvmlDeviceGetFieldValues(h, 1, NULL), INVALID_ARGUMENT);
		NV(nvmlDeviceGetGpuFabricInfoV(h, NULL), INVALID_ARGUMENT);
		int rf = nvmlDeviceGetFieldValues(h, 1, &fv);
		int rg = nvmlDeviceGetGpuFabricInfoV(h, fabric);
		fprintf(stderr, "  field 1: %d (its own %d, type %d); fabric: %d\n", rf, fv.nvmlReturn, fv.valueType, rg);
		if (rg_fake())
			REQUIRE(rf == NOT_SUPPORTED && rg == NOT_SUPPORTED, "fields, fabric without NVML: %d %d", rf, rg);
		else
			REQUIRE(rf == OK && fv.fieldId == 1, "field values: %d (field %u)", rf, fv.fieldId);

		/* not implemented by libremote.so: NOT_SUPPORTED, never success (a
		 * local NVML answers them where the board has NVLink or fans) */
		if (rg_remote()) {
			int state = 0;
			unsigned fan = 0;
			NV(nvmlDeviceGetNvLinkState(h, 0, &state), NOT_SUPPORTED);
			NV(nvmlDeviceGetFanSpeed(h, &fan), NOT_SUPPORTED);
		}
	}

	/* reads between devices 0 and 1: as CUDA's can-access-peer says (0 and 5:
	 * nvml.h's NVML_P2P_STATUS_OK and _NOT_SUPPORTED, index 0: _CAPS_INDEX_READ) */
	if (n >= 2) {
		nvmlDevice_t h0, h1;
		int st = -1, can = -1;
		NV(nvmlDeviceGetHandleByIndex_v2(0, &h0), OK);
		NV(nvmlDeviceGetHandleByIndex_v2(1, &h1), OK);
		NV(nvmlDeviceGetP2PStatus(h0, h1, 0, &st), OK);
		CK(cudaDeviceCanAccessPeer(&can, 0, 1));
		printf("P2P read 0 -> 1: %s, CUDA can access peer: %d\n", st == 0 ? "ok" : "not supported", can);
		REQUIRE((st == 0) == (can == 1) && (st == 0 || st == 5), "NVML P2P status %d, CUDA %d", st, can);
	}

	/* bad handles and indices */
	nvmlDevice_t h;
	char name[96];
	nvmlMemory_t m;
	NV(nvmlDeviceGetHandleByIndex_v2(n, &h), INVALID_ARGUMENT);
	NV(nvmlDeviceGetHandleByIndex_v2(0, NULL), INVALID_ARGUMENT);
	NV(nvmlDeviceGetName(NULL, name, sizeof(name)), INVALID_ARGUMENT);
	/* Handles that are not handles: libremote.so refuses them; NVML itself
	 * may dereference them (a local run on an H100 died of SIGSEGV after the memory checks), so only
	 * where the answer is ours (the test double's runs) is it asked. */
	if (rg_fake()) {
		NV(nvmlDeviceGetName((nvmlDevice_t)(uintptr_t)0x1234, name, sizeof(name)), INVALID_ARGUMENT);
		NV(nvmlDeviceGetMemoryInfo((nvmlDevice_t)name, &m), INVALID_ARGUMENT);
	}
	NV(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &h), NOT_FOUND);
	NV(nvmlDeviceGetHandleByPciBusId_v2("not a bus id", &h), INVALID_ARGUMENT);
	NV(nvmlDeviceGetHandleByPciBusId_v2("00000000:FF:1F.0", &h), NOT_FOUND);
	REQUIRE(!strcmp(err_str(NOT_SUPPORTED), "Not Supported"), "error string %s", err_str(NOT_SUPPORTED));

	NV(nvmlDeviceGetHandleByIndex_v2(0, &h), OK);
	NV(nvmlShutdown(), OK);
	NV(nvmlDeviceGetName(h, name, sizeof(name)), OK); /* one of two inits is still open */
	NV(nvmlShutdown(), OK);
	NV(nvmlDeviceGetName(h, name, sizeof(name)), UNINITIALIZED);
	NV(nvmlShutdown(), UNINITIALIZED);
	printf("nvml: all checks passed\n");
	return 0;
}
