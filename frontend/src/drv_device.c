/* Driver API: initialisation, version, devices (answered from the properties
 * the handshake brought). */
#include <stdio.h>
#include <string.h>

#include "drv.h"
#include "rt.h"

CUresult cuInit(unsigned int flags) { return (CUresult)fe_rt_init(); }

CUresult cuDriverGetVersion(int *v) { return (CUresult)cudaDriverGetVersion(v); }

CUresult cuDeviceGetCount(int *count) { return (CUresult)cudaGetDeviceCount(count); }

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fe_rt_device(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", d->name);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	return (CUresult)cudaDeviceGetAttribute(pi, (enum cudaDeviceAttr)attrib, dev);
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = d->total_mem;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(uuid, d->uuid, sizeof(*uuid));
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	return (CUresult)cudaDeviceGetPCIBusId(id, len, dev);
}

/* The unversioned symbol of a function whose _v2 kept the ABI (cuda.h maps
 * the source names to the _v2 ones); cuDeviceTotalMem's v1 took 32-bit sizes. */
extern __typeof__(cuDeviceGetUuid) cuDeviceGetUuid_v1 __asm__("cuDeviceGetUuid")
	__attribute__((alias("cuDeviceGetUuid_v2")));
