/* Driver API: initialisation, version, devices (answered from the properties
 * the handshake brought). Devices of one server can access each other's memory
 * where its driver says so (rt_peer.c); devices of two servers cannot; no
 * peer or host atomics are reported. Error codes and their order are the driver's, as measured on
 * an H100 where its documentation says nothing. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rt.h"

/* The device of an ordinal: NULL with CUDA_ERROR_INVALID_DEVICE if there is
 * none, or with why the client could not start. */
static fe_device *device(CUdevice dev, CUresult *r)
{
	cudaError_t e = fe_rt_init();
	if (e != cudaSuccess) {
		*r = fe_drv_result(e);
		return NULL;
	}
	fe_device *d = fe_rt_device(dev);
	*r = d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
	return d;
}

CUresult cuInit(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	return fe_drv_result(fe_rt_init());
}

/* The server's driver (device 0's); without a server, the version of the API
 * this library answers, so that a caller gets to cuInit and its reason. */
CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	fe_device *d = fe_rt_device(0);
	*v = d ? d->driver_version : CUDA_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	cudaError_t e = fe_rt_init();
	*count = e == cudaSuccess ? fe_rt_device_count() : 0;
	return fe_drv_result(e);
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	CUresult r;
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device(ordinal, &r))
		return r;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult r;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", d->name);
	return CUDA_SUCCESS;
}

/* Every attribute from the handshake's table, less what cannot work across
 * hosts (fe_rt_device_attr, which the runtime answers from too). */
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult r;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	if (!pi || (int)attrib <= 0 || (int)attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = fe_rt_device_attr(d, attrib);
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	CUresult r;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = d->total_mem;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	CUresult r;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(uuid, d->uuid, sizeof(*uuid));
	return CUDA_SUCCESS;
}

/* Windows only: the driver on Linux answers CUDA_ERROR_NOT_SUPPORTED. */
CUresult cuDeviceGetLuid(char *luid, unsigned int *deviceNodeMask, CUdevice dev)
{
	CUresult r;
	if (!device(dev, &r))
		return r;
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult r;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "%s", d->pci_bus_id);
	return CUDA_SUCCESS;
}

/* domain:bus:device.function, domain:bus:device or bus:device.function, in
 * hexadecimal (v: domain, bus, device, function); 0 if s is one of them. */
static int parse_bus_id(const char *s, unsigned v[4])
{
	unsigned long n[4];
	char sep[4];
	int k = 0;
	for (;;) {
		char *end;
		if (k == 4 || !isxdigit((unsigned char)*s))
			return -1;
		n[k] = strtoul(s, &end, 16);
		if (n[k] > 0xffffffffUL)
			return -1;
		sep[k++] = *end;
		if (!*end)
			break;
		if (*end != ':' && *end != '.')
			return -1;
		s = end + 1;
	}
	if (k == 4 && sep[0] == ':' && sep[1] == ':' && sep[2] == '.')
		v[0] = n[0], v[1] = n[1], v[2] = n[2], v[3] = n[3];
	else if (k == 3 && sep[0] == ':' && sep[1] == ':')
		v[0] = n[0], v[1] = n[1], v[2] = n[2], v[3] = 0;
	else if (k == 3 && sep[0] == ':' && sep[1] == '.')
		v[0] = 0, v[1] = n[0], v[2] = n[1], v[3] = n[2];
	else
		return -1;
	return 0;
}

/* The first device at that address: devices of different servers may share one. */
CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	unsigned want[4], have[4];
	CUresult r = fe_drv_result(fe_rt_init());
	if (r != CUDA_SUCCESS)
		return r;
	if (!dev || !pciBusId || parse_bus_id(pciBusId, want))
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < fe_rt_device_count(); i++) {
		fe_device *d = fe_rt_device(i);
		if (d && !parse_bus_id(d->pci_bus_id, have) && !memcmp(want, have, sizeof(want))) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *maxWidthInElements, CUarray_format format, unsigned numChannels,
					    CUdevice dev)
{
	struct cudaChannelFormatDesc cd;
	uint32_t elem;
	CUresult r;
	if (!maxWidthInElements)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device(dev, &r))
		return r;
	cudaError_t e = fe_channel_desc(format, numChannels, &cd, &elem);
	if (e != cudaSuccess)
		return fe_drv_result(e);
	/* The driver's answer is no attribute (on an H100 it is neither the
	 * 1D linear width nor documented): only the server's driver knows it. */
	rg_log_once("frontend", "not supported (no wire operation asks the server's driver)",
		    "cuDeviceGetTexture1DLinearMaxWidth");
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* Not across hosts (and no NvSciSync here): an attribute list is checked
 * first, as the driver does. */
CUresult cuDeviceGetNvSciSyncAttributes(void *nvSciSyncAttrList, CUdevice dev, int flags)
{
	CUresult r;
	if (!nvSciSyncAttrList)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!device(dev, &r))
		return r;
	rg_log_once("frontend", "not supported (NvSciSync)", "cuDeviceGetNvSciSyncAttributes");
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* No execution affinity of any type (contexts are the sessions' own); the
 * driver answers 0 for types it does not know too. */
CUresult cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
	CUresult r;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device(dev, &r))
		return r;
	*pi = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
	CUresult r;
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	const int32_t *a = d->attrs;
	*prop = (CUdevprop){
		.maxThreadsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK],
		.maxThreadsDim = {a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X], a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y],
				  a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z]},
		.maxGridSize = {a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X], a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y],
				a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z]},
		.sharedMemPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK],
		.totalConstantMemory = a[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY],
		.SIMDWidth = a[CU_DEVICE_ATTRIBUTE_WARP_SIZE],
		.memPitch = a[CU_DEVICE_ATTRIBUTE_MAX_PITCH],
		.regsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK],
		.clockRate = a[CU_DEVICE_ATTRIBUTE_CLOCK_RATE],
		.textureAlign = a[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT],
	};
	return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	CUresult r;
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	fe_device *d = device(dev, &r);
	if (!d)
		return r;
	*major = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
	*minor = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
	return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	CUresult r;
	if (!device(dev, &r) || !device(peerDev, &r))
		return r;
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	*canAccessPeer = fe_peer_can(dev, peerDev);
	return CUDA_SUCCESS;
}

/* Two distinct devices, as the driver wants them: 0, or its error. */
static CUresult peer_pair(CUdevice src, CUdevice dst)
{
	CUresult r;
	if (!device(src, &r) || !device(dst, &r))
		return r;
	return src == dst ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice, CUdevice dstDevice)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = peer_pair(srcDevice, dstDevice);
	if (r != CUDA_SUCCESS)
		return r;
	switch (attrib) {
	case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
		*value = fe_peer_can(srcDevice, dstDevice);
		return CUDA_SUCCESS;
	case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
	case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
		*value = 0;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* No atomic operation works natively over the link (capabilities 0). */
static CUresult no_atomics(unsigned int *caps, const CUatomicOperation *ops, unsigned int count)
{
	for (unsigned int i = 0; i < count; i++)
		if ((unsigned)ops[i] >= CU_ATOMIC_OPERATION_MAX)
			return CUDA_ERROR_INVALID_VALUE;
	memset(caps, 0, count * sizeof(*caps));
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetHostAtomicCapabilities(unsigned int *capabilities, const CUatomicOperation *operations,
					   unsigned int count, CUdevice dev)
{
	CUresult r;
	if (!capabilities || !operations || !count)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device(dev, &r))
		return r;
	return no_atomics(capabilities, operations, count);
}

CUresult cuDeviceGetP2PAtomicCapabilities(unsigned int *capabilities, const CUatomicOperation *operations,
					  unsigned int count, CUdevice srcDevice, CUdevice dstDevice)
{
	if (!capabilities || !operations || !count)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = peer_pair(srcDevice, dstDevice);
	return r != CUDA_SUCCESS ? r : no_atomics(capabilities, operations, count);
}

/* No GPUDirect RDMA into a remote device (its attributes say so). */
CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target, CUflushGPUDirectRDMAWritesScope scope)
{
	if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
	    (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER &&
	     scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
		return CUDA_ERROR_INVALID_VALUE;
	rg_log_once("frontend", "not supported (no GPUDirect RDMA to a remote device)", "cuFlushGPUDirectRDMAWrites");
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* The unversioned symbol of a function whose _v2 kept the ABI (cuda.h maps
 * the source names to the _v2 ones); cuDeviceTotalMem's v1 took 32-bit sizes. */
extern __typeof__(cuDeviceGetUuid) cuDeviceGetUuid_v1 __asm__("cuDeviceGetUuid")
	__attribute__((alias("cuDeviceGetUuid_v2")));
