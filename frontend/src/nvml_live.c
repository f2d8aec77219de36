/*
 * The NVML values that change while a program runs, or that only the GPU's
 * host knows: each is one nvml_query round trip to the device's server, which
 * reads its own NVML (backend/src/op_nvml.c). A server without NVML answers
 * NVML_ERROR_NOT_SUPPORTED for all but memory, which its CUDA context tells.
 */
#include <string.h>
#include <unistd.h>

#include "nvml_int.h"
#include "proto_nvml.h"
#include "rpc.h"

static nvmlReturn_t query(nvmlDevice_t device, uint32_t what, uint32_t arg, const void *out, uint64_t v[4]);
static nvmlReturn_t query_one(nvmlDevice_t device, uint32_t what, uint32_t arg, unsigned int *out);
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *infoCount, void *infos, size_t size);

/* One nvml_query to device h's server: its values and its text's first
 * NVML_TEXT_MAX - 1 bytes into buf (zeroed first); *answered: whether the
 * server answered. need: the text bytes the caller will read, refused past
 * what the reply can hold. */
#define NVML_TEXT_MAX 96
static nvmlReturn_t ask(nvmlDevice_t h, uint32_t what, uint32_t arg, uint64_t v[4], unsigned char *buf, size_t need,
			int *answered)
{
	*answered = 0;
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(h, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!d->conn)
		return NVML_ERROR_GPU_IS_LOST;
	if (need > NVML_TEXT_MAX - 1)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	uint32_t nvret = NVML_ERROR_UNKNOWN;
	memset(buf, 0, NVML_TEXT_MAX);
	int st = fe_rpc_nvml_query(d->conn, what, arg, &nvret, &v[0], &v[1], &v[2], &v[3], buf, NVML_TEXT_MAX - 1);
	if (st < 0)
		return NVML_ERROR_GPU_IS_LOST; /* the connection is gone (conn.c logged why) */
	if (st > 0)
		return NVML_ERROR_UNKNOWN;
	*answered = 1;
	return (nvmlReturn_t)nvret;
}

/* A query whose text is a structure the server's NVML filled: its bytes. */
static nvmlReturn_t query_raw(nvmlDevice_t h, uint32_t what, uint32_t arg, void *out, size_t len)
{
	uint64_t v[4];
	_Alignas(8) unsigned char buf[NVML_TEXT_MAX];
	int answered;
	nvmlReturn_t r = ask(h, what, arg, v, buf, len, &answered);
	if (r == NVML_SUCCESS)
		memcpy(out, buf, len);
	return r;
}

nvmlReturn_t fe_nvml_query(nvmlDevice_t h, uint32_t what, uint32_t arg, uint64_t v[4], char *text, size_t cap)
{
	unsigned char buf[NVML_TEXT_MAX];
	int answered;
	nvmlReturn_t r = ask(h, what, arg, v, buf, 0, &answered);
	if (answered && text && cap)
		snprintf(text, cap, "%s", (const char *)buf);
	return r;
}

/* The checks in NVML's order (the handle, then the caller's pointer), then
 * the query. */
static nvmlReturn_t query(nvmlDevice_t device, uint32_t what, uint32_t arg, const void *out, uint64_t v[4])
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	return fe_nvml_query(device, what, arg, v, NULL, 0);
}

static nvmlReturn_t query_one(nvmlDevice_t device, uint32_t what, uint32_t arg, unsigned int *out)
{
	uint64_t v[4];
	nvmlReturn_t r = query(device, what, arg, out, v);
	if (r == NVML_SUCCESS)
		*out = (unsigned)v[0];
	return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	uint64_t v[4];
	nvmlReturn_t r = query(device, PROTO_NVML_MEMORY, 0, memory, v);
	if (r != NVML_SUCCESS)
		return r;
	/* v1's used counts what the driver reserved, v2's does not */
	memory->total = v[0];
	memory->free = v[1];
	memory->used = v[2] + v[3];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	uint64_t v[4];
	nvmlReturn_t r = fe_nvml_device(device, &(fe_device *){0});
	if (r != NVML_SUCCESS)
		return r;
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	/* What an H100's NVML (driver 580) answers a struct version it does not
	 * know: not ARGUMENT_VERSION_MISMATCH, as nvml.h suggests. */
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_FUNCTION_NOT_FOUND;
	if ((r = fe_nvml_query(device, PROTO_NVML_MEMORY, 0, v, NULL, 0)) != NVML_SUCCESS)
		return r;
	memory->total = v[0];
	memory->free = v[1];
	memory->used = v[2];
	memory->reserved = v[3];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	uint64_t v[4];
	nvmlReturn_t r = query(device, PROTO_NVML_UTILIZATION, 0, utilization, v);
	if (r == NVML_SUCCESS) {
		utilization->gpu = (unsigned)v[0];
		utilization->memory = (unsigned)v[1];
	}
	return r;
}

nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
	uint64_t v[4];
	nvmlReturn_t r = query(device, PROTO_NVML_BAR1, 0, bar1Memory, v);
	if (r == NVML_SUCCESS) {
		bar1Memory->bar1Total = v[0];
		bar1Memory->bar1Free = v[1];
		bar1Memory->bar1Used = v[2];
	}
	return r;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp)
{
	return query_one(device, PROTO_NVML_TEMPERATURE, (uint32_t)sensorType, temp);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	return query_one(device, PROTO_NVML_POWER, 0, power);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
	if (type < 0 || type >= NVML_CLOCK_COUNT)
		return fe_nvml_ready() != NVML_SUCCESS ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
	return query_one(device, PROTO_NVML_CLOCK, (uint32_t)type, clock);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
	if (type < 0 || type >= NVML_CLOCK_COUNT)
		return fe_nvml_ready() != NVML_SUCCESS ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
	return query_one(device, PROTO_NVML_MAX_CLOCK, (uint32_t)type, clock);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
	return query_one(device, PROTO_NVML_PCIE_LINK, 0, currLinkGen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
	uint64_t v[4];
	nvmlReturn_t r = query(device, PROTO_NVML_PCIE_LINK, 0, currLinkWidth, v);
	if (r == NVML_SUCCESS)
		*currLinkWidth = (unsigned)v[1];
	return r;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	return query_one(device, PROTO_NVML_MINOR, 0, minorNumber);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, int *mode);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, int *mode)
{
	return query_one(device, PROTO_NVML_PERSISTENCE, 0, (unsigned int *)mode);
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *mode);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *mode)
{
	return query_one(device, PROTO_NVML_COMPUTE_MODE, 0, (unsigned int *)mode);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
	uint64_t v[4];
	nvmlReturn_t r = query(device, PROTO_NVML_MIG_MODE, 0, pendingMode ? currentMode : NULL, v);
	if (r == NVML_SUCCESS) {
		*currentMode = (unsigned)v[0];
		*pendingMode = (unsigned)v[1];
	}
	return r;
}

/* XLA asks for fields (NVML_FI_*) and the fabric (NVLink domain) state: each
 * field is one query of the server's NVML, sent back as NVML filled it. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!values || valuesCount < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < valuesCount; i++) {
		nvmlFieldValue_t *f = &values[i];
		if (f->fieldId > 0xffffu || f->scopeId > 0xffffu) { /* no such field or scope */
			f->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
			continue;
		}
		nvmlFieldValue_t got;
		r = query_raw(device, PROTO_NVML_FIELD, f->fieldId | f->scopeId << 16, &got, sizeof(got));
		if (r != NVML_SUCCESS)
			return r; /* no NVML there, or no connection: the call's own answer */
		*f = got;
	}
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo);
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!gpuFabricInfo)
		return NVML_ERROR_INVALID_ARGUMENT;
	size_t n = RG_NVML_STRUCT_SIZE(gpuFabricInfo->version);
	if (n < sizeof(*gpuFabricInfo))
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	return query_raw(device, PROTO_NVML_FABRIC, gpuFabricInfo->version, gpuFabricInfo, n);
}

/* The GPU's compute processes as this program may see them: only its own,
 * which on the server is the session's process; shown under this program's
 * pid, the one it knows itself by. size: the caller's element (v1 or v2). */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *infoCount, void *infos, size_t size)
{
	uint64_t v[4];
	nvmlReturn_t r = fe_nvml_device(device, &(fe_device *){0});
	if (r != NVML_SUCCESS)
		return r;
	if (!infoCount || (*infoCount && !infos))
		return NVML_ERROR_INVALID_ARGUMENT;
	r = fe_nvml_query(device, PROTO_NVML_PROCESS, 0, v, NULL, 0);
	if (r == NVML_ERROR_NOT_FOUND) {
		*infoCount = 0;
		return NVML_SUCCESS;
	}
	if (r != NVML_SUCCESS)
		return r;
	if (*infoCount < 1) {
		*infoCount = 1;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	*infoCount = 1;
	if (size == sizeof(nvmlProcessInfo_v2_t)) {
		nvmlProcessInfo_v2_t *p = infos;
		p->pid = (unsigned)getpid();
		p->usedGpuMemory = v[0];
		p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFFu;
	} else {
		nvmlProcessInfo_v1_t *p = infos;
		p->pid = (unsigned)getpid();
		p->usedGpuMemory = v[0];
	}
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos)
{
	return processes(device, infoCount, infos, sizeof(*infos));
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos)
{
	return processes(device, infoCount, infos, sizeof(*infos));
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos)
{
	return processes(device, infoCount, infos, sizeof(*infos));
}
