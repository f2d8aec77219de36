/*
 * nvml_query: the live values a client's NVML asks about its remote device
 * (frontend/src/nvml_*.c), read from this host's own NVML.
 *
 * libnvidia-ml.so.1 is opened at the first query, not at start: most sessions
 * never ask, and a server without NVML (a container without the library, the
 * driver test double in CI) still serves CUDA; then every query answers
 * NVML_ERROR_NOT_SUPPORTED, except memory, which the session's own context
 * can tell (cuMemGetInfo), so programs that size their work by NVML still run.
 *
 * The device is found by its PCI address, not its ordinal: NVML numbers every
 * GPU of the host and ignores CUDA_VISIBLE_DEVICES, so the two orders differ.
 * A client sees only its own process among the GPU's processes: the session's
 * process here (in --isolation thread, the server's, shared by its sessions).
 */
#include "backend.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops.h"
#include "proto_nvml.h"
#include "rg_nvml.h"

/* The functions used, by the symbol nvml.h maps each name to. */
#define BE_NVML_FUNCS(X)                                                                                       \
	X(nvmlInit_v2, (void))                                                                                 \
	X(nvmlDeviceGetHandleByPciBusId_v2, (const char *, nvmlDevice_t *))                                    \
	X(nvmlDeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *))                                             \
	X(nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t, nvmlMemory_v2_t *))                                       \
	X(nvmlDeviceGetUtilizationRates, (nvmlDevice_t, nvmlUtilization_t *))                                  \
	X(nvmlDeviceGetTemperature, (nvmlDevice_t, int, unsigned *))                                           \
	X(nvmlDeviceGetPowerUsage, (nvmlDevice_t, unsigned *))                                                 \
	X(nvmlDeviceGetClockInfo, (nvmlDevice_t, int, unsigned *))                                             \
	X(nvmlDeviceGetMaxClockInfo, (nvmlDevice_t, int, unsigned *))                                          \
	X(nvmlDeviceGetBAR1MemoryInfo, (nvmlDevice_t, nvmlBAR1Memory_t *))                                     \
	X(nvmlDeviceGetCurrPcieLinkGeneration, (nvmlDevice_t, unsigned *))                                     \
	X(nvmlDeviceGetCurrPcieLinkWidth, (nvmlDevice_t, unsigned *))                                          \
	X(nvmlDeviceGetPciInfo_v3, (nvmlDevice_t, nvmlPciInfo_t *))                                            \
	X(nvmlDeviceGetMinorNumber, (nvmlDevice_t, unsigned *))                                                \
	X(nvmlDeviceGetComputeRunningProcesses_v3, (nvmlDevice_t, unsigned *, nvmlProcessInfo_v2_t *))         \
	X(nvmlDeviceGetPersistenceMode, (nvmlDevice_t, int *))                                                 \
	X(nvmlDeviceGetComputeMode, (nvmlDevice_t, int *))                                                     \
	X(nvmlDeviceGetMigMode, (nvmlDevice_t, unsigned *, unsigned *))                                        \
	X(nvmlSystemGetDriverVersion, (char *, unsigned))                                                      \
	X(nvmlSystemGetNVMLVersion, (char *, unsigned))                                                       \
	X(nvmlDeviceGetFieldValues, (nvmlDevice_t, int, nvmlFieldValue_t *))                                   \
	X(nvmlDeviceGetGpuFabricInfoV, (nvmlDevice_t, nvmlGpuFabricInfoV_t *))

static struct {
#define BE_NVML_FIELD(name, params) nvmlReturn_t(*name) params;
	BE_NVML_FUNCS(BE_NVML_FIELD)
#undef BE_NVML_FIELD
} nv;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
/* Per served device; NULL: no NVML, or it does not know that device. */
static nvmlDevice_t nvml_devs[BE_MAX_GPUS];

static void nvml_load(void);
static nvmlReturn_t nvml_processes(nvmlDevice_t nvml_dev, uint64_t *used);
static nvmlReturn_t nvml_memory(nvmlDevice_t nvml_dev, uint64_t v[4]);

static void nvml_load(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		LOG_INFO(BE_LOG, "no NVML (%s): live device values answer NOT_SUPPORTED", dlerror());
		return;
	}
#define BE_NVML_RESOLVE(name, params) nv.name = (nvmlReturn_t(*) params)dlsym(h, #name);
	BE_NVML_FUNCS(BE_NVML_RESOLVE)
#undef BE_NVML_RESOLVE
	nvmlReturn_t r = nv.nvmlInit_v2 ? nv.nvmlInit_v2() : NVML_ERROR_FUNCTION_NOT_FOUND;
	for (int i = 0; i < be_srv.ngpu; i++) {
		nvmlDevice_t d = NULL;
		nvmlReturn_t rd = r;
		if (rd == NVML_SUCCESS)
			rd = nv.nvmlDeviceGetHandleByPciBusId_v2
				     ? nv.nvmlDeviceGetHandleByPciBusId_v2(be_srv.gpu[i].pci_bus_id, &d)
				     : NVML_ERROR_FUNCTION_NOT_FOUND;
		if (rd != NVML_SUCCESS) {
			LOG_WARN(BE_LOG, "NVML does not answer for device %s (error %d): its live values answer "
				 "NOT_SUPPORTED", be_srv.gpu[i].pci_bus_id, rd);
			continue;
		}
		nvml_devs[i] = d;
	}
}

/* v: total, free, used, reserved. Without NVML, the context's view. */
static nvmlReturn_t nvml_memory(nvmlDevice_t nvml_dev, uint64_t v[4])
{
	if (nvml_dev && nv.nvmlDeviceGetMemoryInfo_v2) {
		nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
		if (nv.nvmlDeviceGetMemoryInfo_v2(nvml_dev, &m) == NVML_SUCCESS) {
			v[0] = m.total, v[1] = m.free, v[2] = m.used, v[3] = m.reserved;
			return NVML_SUCCESS;
		}
	}
	if (nvml_dev && nv.nvmlDeviceGetMemoryInfo) {
		nvmlMemory_t m;
		nvmlReturn_t r = nv.nvmlDeviceGetMemoryInfo(nvml_dev, &m);
		if (r == NVML_SUCCESS)
			v[0] = m.total, v[1] = m.free, v[2] = m.used, v[3] = 0;
		return r;
	}
	size_t f = 0, t = 0;
	if (be_drv.cuMemGetInfo(&f, &t) != CUDA_SUCCESS)
		return NVML_ERROR_UNKNOWN;
	v[0] = t, v[1] = f, v[2] = t - f, v[3] = 0;
	return NVML_SUCCESS;
}

/* The GPU memory of this process, the one that runs the session. */
static nvmlReturn_t nvml_processes(nvmlDevice_t nvml_dev, uint64_t *used)
{
	unsigned n = 64;
	nvmlProcessInfo_v2_t *p = NULL;
	nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;
	/* the list may grow between the calls: ask again with room to spare */
	for (int tries = 0; tries < 4 && r == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
		n += 16;
		free(p);
		if (!(p = calloc(n, sizeof(*p))))
			return NVML_ERROR_MEMORY;
		r = nv.nvmlDeviceGetComputeRunningProcesses_v3(nvml_dev, &n, p);
	}
	if (r == NVML_SUCCESS) {
		r = NVML_ERROR_NOT_FOUND;
		for (unsigned i = 0; i < n; i++)
			if (p[i].pid == (unsigned)getpid()) {
				*used = p[i].usedGpuMemory;
				r = NVML_SUCCESS;
				break;
			}
	}
	free(p);
	return r;
}

int be_op_nvml_query(be_session *s, be_req *rq, uint32_t what, uint32_t arg)
{
	uint64_t v[4] = {0, 0, 0, 0};
	char text[96] = "";
	_Alignas(8) unsigned char raw[96]; /* a structure NVML filled, sent as it is */
	size_t raw_len = 0;
	unsigned a = 0, b = 0;
	int e = 0;
	nvmlReturn_t r = NVML_ERROR_NOT_SUPPORTED;

	pthread_once(&nvml_once, nvml_load);
	nvmlDevice_t nvml_dev = nvml_devs[s->cur]; /* the frame's device */
	/* A missing function is a value this NVML cannot give: NOT_SUPPORTED. */
#define BE_NVML_CALL(fn, ...) (nv.fn ? nv.fn(__VA_ARGS__) : NVML_ERROR_NOT_SUPPORTED)
	if (what == PROTO_NVML_MEMORY)
		r = nvml_memory(nvml_dev, v);
	else if (!nvml_dev)
		r = NVML_ERROR_NOT_SUPPORTED;
	else
		switch (what) {
		case PROTO_NVML_UTILIZATION: {
			nvmlUtilization_t u;
			if ((r = BE_NVML_CALL(nvmlDeviceGetUtilizationRates, nvml_dev, &u)) == NVML_SUCCESS)
				v[0] = u.gpu, v[1] = u.memory;
			break;
		}
		case PROTO_NVML_TEMPERATURE:
			r = BE_NVML_CALL(nvmlDeviceGetTemperature, nvml_dev, (int)arg, &a);
			v[0] = a;
			break;
		case PROTO_NVML_POWER:
			r = BE_NVML_CALL(nvmlDeviceGetPowerUsage, nvml_dev, &a);
			v[0] = a;
			break;
		case PROTO_NVML_CLOCK:
			r = BE_NVML_CALL(nvmlDeviceGetClockInfo, nvml_dev, (int)arg, &a);
			v[0] = a;
			break;
		case PROTO_NVML_MAX_CLOCK:
			r = BE_NVML_CALL(nvmlDeviceGetMaxClockInfo, nvml_dev, (int)arg, &a);
			v[0] = a;
			break;
		case PROTO_NVML_BAR1: {
			nvmlBAR1Memory_t m;
			if ((r = BE_NVML_CALL(nvmlDeviceGetBAR1MemoryInfo, nvml_dev, &m)) == NVML_SUCCESS)
				v[0] = m.bar1Total, v[1] = m.bar1Free, v[2] = m.bar1Used;
			break;
		}
		case PROTO_NVML_PCIE_LINK:
			r = BE_NVML_CALL(nvmlDeviceGetCurrPcieLinkGeneration, nvml_dev, &a);
			if (r == NVML_SUCCESS)
				r = BE_NVML_CALL(nvmlDeviceGetCurrPcieLinkWidth, nvml_dev, &b);
			v[0] = a, v[1] = b;
			break;
		case PROTO_NVML_PCI_IDS: {
			nvmlPciInfo_t p;
			if ((r = BE_NVML_CALL(nvmlDeviceGetPciInfo_v3, nvml_dev, &p)) == NVML_SUCCESS)
				v[0] = p.pciDeviceId, v[1] = p.pciSubSystemId;
			break;
		}
		case PROTO_NVML_MINOR:
			r = BE_NVML_CALL(nvmlDeviceGetMinorNumber, nvml_dev, &a);
			v[0] = a;
			break;
		case PROTO_NVML_PROCESS:
			r = nv.nvmlDeviceGetComputeRunningProcesses_v3 ? nvml_processes(nvml_dev, &v[0]) : NVML_ERROR_NOT_SUPPORTED;
			break;
		case PROTO_NVML_PERSISTENCE:
			r = BE_NVML_CALL(nvmlDeviceGetPersistenceMode, nvml_dev, &e);
			v[0] = (uint64_t)e;
			break;
		case PROTO_NVML_COMPUTE_MODE:
			r = BE_NVML_CALL(nvmlDeviceGetComputeMode, nvml_dev, &e);
			v[0] = (uint64_t)e;
			break;
		case PROTO_NVML_MIG_MODE:
			r = BE_NVML_CALL(nvmlDeviceGetMigMode, nvml_dev, &a, &b);
			v[0] = a, v[1] = b;
			break;
		case PROTO_NVML_DRIVER_VERSION:
			r = BE_NVML_CALL(nvmlSystemGetDriverVersion, text, sizeof(text));
			break;
		case PROTO_NVML_NVML_VERSION:
			r = BE_NVML_CALL(nvmlSystemGetNVMLVersion, text, sizeof(text));
			break;
		case PROTO_NVML_FIELD: {
			nvmlFieldValue_t f = {.fieldId = arg & 0xffffu, .scopeId = arg >> 16};
			if ((r = BE_NVML_CALL(nvmlDeviceGetFieldValues, nvml_dev, 1, &f)) == NVML_SUCCESS)
				memcpy(raw, &f, raw_len = sizeof(f));
			break;
		}
		case PROTO_NVML_FABRIC:
			/* the caller's version, whose size this NVML checks itself */
			if (RG_NVML_STRUCT_SIZE(arg) < sizeof(nvmlGpuFabricInfoV_t) || RG_NVML_STRUCT_SIZE(arg) >= sizeof(raw)) {
				r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
				break;
			}
			memset(raw, 0, sizeof(raw));
			((nvmlGpuFabricInfoV_t *)raw)->version = arg;
			if ((r = BE_NVML_CALL(nvmlDeviceGetGpuFabricInfoV, nvml_dev, (nvmlGpuFabricInfoV_t *)raw)) == NVML_SUCCESS)
				raw_len = RG_NVML_STRUCT_SIZE(arg);
			break;
		default:
			r = NVML_ERROR_INVALID_ARGUMENT;
		}
#undef BE_NVML_CALL
	text[sizeof(text) - 1] = 0;
	proto_msg *m = be_reply_begin(s, rq, 6);
	proto_msg_u64(m, (uint64_t)(uint32_t)r);
	for (int i = 0; i < 4; i++)
		proto_msg_u64(m, v[i]);
	if (raw_len)
		proto_msg_bin(m, raw, r == NVML_SUCCESS ? raw_len : 0);
	else
		proto_msg_bin(m, text, r == NVML_SUCCESS ? strlen(text) : 0);
	return be_reply_end(s, rq, m, NULL, 0);
}
