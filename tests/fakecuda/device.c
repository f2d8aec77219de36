/*
 * device.c: cuInit, versions, device queries and attributes.
 *
 * The fake presents FAKECUDA_DEVICES identical devices (default 1, at most
 * FK_MAX_DEVICES) that look like an H100 SXM: compute capability 9.0, 132 SMs,
 * FAKECUDA_MEM_BYTES of memory each (default 8 GiB; suffixes k, m, g accepted).
 * Attributes describing features the fake does not implement (virtual memory
 * management, managed memory, IPC handles, stream memory operations) are reported
 * as 0, so that callers which check them take their fallback paths.
 *
 * Each device has its default memory pool (pool.c has the pools).
 */
#include "fake.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FK_DEVICE_NAME "remote-gpu fake device"
#define FK_PCI_BUS_BASE 0x10
#define FK_DEFAULT_MEM (8ull << 30)

int fk_ndev;
fk_dev fk_devs[FK_MAX_DEVICES];

static int parse_size(const char *s, size_t *out);

/*
 * Attribute values (those of an H100 SXM5 where the fake can stand behind them).
 * Attributes missing here are 0. PCI bus id and board group id depend on the
 * ordinal and are filled in by cuDeviceGetAttribute.
 */
static const int attrs[CU_DEVICE_ATTRIBUTE_MAX] = {
	[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = FK_MAX_THREADS_PER_BLOCK,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] = 1024,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] = 1024,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] = 64,
	[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] = 2147483647,
	[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] = 65535,
	[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] = 65535,
	[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK] = FK_SHARED_PER_BLOCK,
	[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY] = 65536,
	[CU_DEVICE_ATTRIBUTE_WARP_SIZE] = 32,
	[CU_DEVICE_ATTRIBUTE_MAX_PITCH] = 2147483647,
	[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK] = 65536,
	[CU_DEVICE_ATTRIBUTE_CLOCK_RATE] = 1980000,
	[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT] = 512,
	[CU_DEVICE_ATTRIBUTE_GPU_OVERLAP] = 1,
	[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] = FK_SM_COUNT,
	[CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT] = 0,
	[CU_DEVICE_ATTRIBUTE_INTEGRATED] = 0,
	[CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 1,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_MODE] = CU_COMPUTEMODE_DEFAULT,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH] = 131072,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH] = 131072,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT] = 65536,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH] = 16384,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT] = 16384,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH] = 16384,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS] = 2048,
	[CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT] = 512,
	[CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS] = 1,
	[CU_DEVICE_ATTRIBUTE_ECC_ENABLED] = 1,
	[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] = 0,
	[CU_DEVICE_ATTRIBUTE_TCC_DRIVER] = 0,
	[CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE] = 2619000,
	[CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH] = 5120,
	[CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE] = 52428800,
	[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] = FK_MAX_THREADS_PER_SM,
	[CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT] = 3,
	[CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING] = 1,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS] = 2048,
	[CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER] = 1,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE] = 8192,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE] = 8192,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE] = 32768,
	[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] = 0,
	[CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT] = 32,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS] = 2046,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH] = 131072,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT] = 65536,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH] = 16384,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT] = 16384,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH] = 16384,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS] = 2048,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS] = 2048,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS] = 2046,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH] = 268435456,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH] = 131072,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT] = 65000,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH] = 2097120,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT] = 32768,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] = FK_CC_MAJOR,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR] = FK_CC_MINOR,
	[CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH] = 32768,
	[CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] = FK_SHARED_PER_SM,
	[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] = FK_REGS_PER_SM,
	[CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY] = 0,           /* no cuMemAllocManaged */
	[CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD] = 0,
	[CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED] = 0,
	[CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO] = 2,
	[CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS] = 0,
	[CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS] = 0,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM] = 1,
	[CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH] = 1,
	[CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH] = 0,
	[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN] = FK_SHARED_PER_BLOCK_OPTIN,
	[CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES] = 0,
	[CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES] = 0,
	[CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST] = 0,
	[CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED] = 1, /* vmm.c */
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR] = FK_MAX_BLOCKS_PER_SM,
	[CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE] = 34603008,
	[CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] = 134213632,
	[CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK] = FK_RESERVED_SHARED_PER_BLOCK,
	[CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES] = 0,
	[CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH] = 1,
	[CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT] = 4,
	[CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS] = 1,
	[CU_DEVICE_ATTRIBUTE_NUMA_CONFIG] = CU_DEVICE_NUMA_CONFIG_NONE,
	[CU_DEVICE_ATTRIBUTE_NUMA_ID] = -1,
	[CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID] = -1,
	[CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID] = 0x233010de,
	[CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID] = 0x16c110de,
};

static int dev_ok(CUdevice d)
{
	return d >= 0 && d < fk_ndev;
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
	CUresult rc = CUDA_SUCCESS;

	fk_begin_raw();
	if (Flags != 0) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else if (!fk_initialized) {
		const char *nd = getenv("FAKECUDA_DEVICES");
		const char *mb = getenv("FAKECUDA_MEM_BYTES");
		size_t mem = FK_DEFAULT_MEM;
		int n = 1;

		if (nd && *nd) {
			char *end;
			long v = strtol(nd, &end, 10);
			n = (*end || v < 0) ? 1 : (v > FK_MAX_DEVICES ? FK_MAX_DEVICES : (int)v);
		}
		if (mb && *mb && (parse_size(mb, &mem) != 0 || mem == 0))
			mem = FK_DEFAULT_MEM;
		if (n == 0) {
			rc = CUDA_ERROR_NO_DEVICE;
		} else {
			fk_ndev = n;
			fk_devshare_init();
			fk_mps_init();
			for (int i = 0; i < n; i++) {
				fk_devs[i].total = mem;
				fk_devs[i].pool = fk_devs[i].cur_pool = fk_pool_new(i);
			}
			fk_initialized = 1;
		}
	}
	return fk_end(rc, __func__, "%u", Flags);
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	fk_begin_raw();
	if (!driverVersion)
		return fk_end(CUDA_ERROR_INVALID_VALUE, __func__, NULL);
	*driverVersion = FK_DRIVER_VERSION;
	return fk_end(CUDA_SUCCESS, __func__, NULL);
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !device)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(ordinal))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		*device = ordinal;
	return fk_end(rc, __func__, "%d", ordinal);
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !count)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*count = fk_ndev;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && (!name || len <= 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		snprintf(name, (size_t)len, "%s", FK_DEVICE_NAME);
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !bytes)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		*bytes = fk_devs[dev].total;
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	/* A fixed, version-4-shaped UUID whose last byte is the ordinal and the
	 * one before it FAKECUDA_ARENA_SLOT (two servers' devices differ). */
	static const unsigned char base[16] = { 0x72, 0x67, 0x66, 0x61, 0x6b, 0x65, 0x40,
	                                        0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
	                                        0x00, 0x00 };
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !uuid)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS) {
		memcpy(uuid->bytes, base, 16);
		const char *slot = getenv("FAKECUDA_ARENA_SLOT");
		uuid->bytes[14] = (char)(slot ? atoi(slot) : 0);
		uuid->bytes[15] = (char)dev;
	}
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && (!pciBusId || len <= 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", FK_PCI_BUS_BASE + dev);
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	unsigned dom = 0, bus, slot, fn;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && (!dev || !pciBusId))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		/* "domain:bus:device.function" or "bus:device.function", hexadecimal */
		if (sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) {
			dom = 0;
			if (sscanf(pciBusId, "%x:%x.%x", &bus, &slot, &fn) != 3)
				rc = CUDA_ERROR_INVALID_VALUE;
		}
	}
	if (rc == CUDA_SUCCESS) {
		int d = (int)bus - FK_PCI_BUS_BASE;
		if (dom != 0 || slot != 0 || fn != 0 || !dev_ok(d))
			rc = CUDA_ERROR_INVALID_DEVICE;
		else
			*dev = d;
	}
	return fk_end(rc, __func__, "%s", pciBusId ? pciBusId : "(null)");
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS) {
		switch (attrib) {
		case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
			*pi = FK_PCI_BUS_BASE + dev;
			break;
		case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
			*pi = dev;
			break;
		case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
			*pi = fk_mps;
			break;
		default:
			*pi = attrs[attrib];
		}
	}
	return fk_end(rc, __func__, "%d, %d", (int)attrib, dev);
}

/* "8589934592", "8g", "512M", "64k" */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;

	if (end == s)
		return -1;
	switch (tolower((unsigned char)*end)) {
	case 'k': shift = 10; end++; break;
	case 'm': shift = 20; end++; break;
	case 'g': shift = 30; end++; break;
	case 't': shift = 40; end++; break;
	}
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return -1;
	*out = (size_t)(v << shift);
	return 0;
}
