/*
 * NVML's life cycle as libremote.so answers it: nvmlInit counts, nvmlShutdown
 * uncounts (NVML allows nested pairs), and between them the remote devices are
 * the ones libremote.so connected to for CUDA (REMOTE_GPU): initialising NVML
 * opens the sessions, which the CUDA calls that follow then use.
 */
#include <stdatomic.h>
#include <string.h>

#include "nvml_int.h"
#include "rg_log.h"

static atomic_int nvml_refs;
static struct nvmlDevice_st nvml_handles[FE_MAX_DEVICES];

static nvmlReturn_t nvml_init(unsigned flags);

static nvmlReturn_t nvml_init(unsigned flags)
{
	for (int i = 0; i < FE_MAX_DEVICES; i++)
		nvml_handles[i].index = i;
	cudaError_t e = fe_rt_init();
	/* NVML without a driver answers DRIVER_NOT_LOADED; with NO_GPUS a
	 * program may go on with none (the count is then 0). */
	if (e != cudaSuccess && !(flags & NVML_INIT_FLAG_NO_GPUS)) {
		LOG_WARN("frontend", "nvmlInit: no remote device (CUDA error %d)", (int)e);
		return e == cudaErrorNoDevice ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_ERROR_UNKNOWN;
	}
	atomic_fetch_add(&nvml_refs, 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit_v2(void) { return nvml_init(0); }
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit(void) { return nvml_init(0); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return nvml_init(flags); }

nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlShutdown(void)
{
	int n = atomic_load(&nvml_refs);
	while (n > 0 && !atomic_compare_exchange_weak(&nvml_refs, &n, n - 1))
		;
	return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t fe_nvml_ready(void) { return atomic_load(&nvml_refs) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED; }

nvmlDevice_t fe_nvml_handle(int index) { return &nvml_handles[index]; }

nvmlReturn_t fe_nvml_device(nvmlDevice_t h, fe_device **d)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	/* compared as integers: a forged pointer is not dereferenced */
	uintptr_t p = (uintptr_t)h, base = (uintptr_t)nvml_handles;
	if (p < base || p >= base + sizeof(nvml_handles) || (p - base) % sizeof(nvml_handles[0]))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!(*d = fe_rt_device(h->index)))
		return NVML_ERROR_INVALID_ARGUMENT;
	return NVML_SUCCESS;
}

nvmlReturn_t fe_nvml_copy_str(char *dst, unsigned len, const char *s)
{
	size_t n = strlen(s);
	if (!dst)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (n >= len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, s, n + 1);
	return NVML_SUCCESS;
}

int fe_nvml_unsupported(const char *name)
{
	rg_log_once("frontend", "not supported (NVML, not implemented by libremote.so)", name);
	return NVML_ERROR_NOT_SUPPORTED;
}

const char *nvmlErrorString(nvmlReturn_t result);
const char *nvmlErrorString(nvmlReturn_t result)
{
	switch (result) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
	case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_TIMEOUT: return "Timeout";
	case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
	case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
	case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
	case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
	case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
	case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
	case NVML_ERROR_IN_USE: return "In use by another client";
	case NVML_ERROR_MEMORY: return "Insufficient Memory";
	case NVML_ERROR_NO_DATA: return "No data";
	case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "Not supported when ECC is enabled";
	case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
	case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
	case NVML_ERROR_DEPRECATED: return "Deprecated";
	case NVML_ERROR_NOT_READY: return "Not ready";
	case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
	case NVML_ERROR_INVALID_STATE: return "Invalid state";
	case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
	default: return "Unknown Error";
	}
}
