/* Driver API: memory. Device, pinned, registered and managed memory, memory
 * pools and pointer attributes, on the runtime layer's allocations and its map
 * of ranges (mem_ranges.c): the two APIs share every allocation. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "drv.h"
#include "managed.h"
#include "rg_log.h"
#include "rt.h"

/* Pool properties and access descriptors are handed to the runtime layer as
 * they are: the two APIs lay them out alike. */
_Static_assert(sizeof(CUmemPoolProps) == sizeof(struct cudaMemPoolProps), "pool props");
_Static_assert(offsetof(CUmemPoolProps, maxSize) == offsetof(struct cudaMemPoolProps, maxSize), "pool props");
_Static_assert(offsetof(CUmemPoolProps, usage) == offsetof(struct cudaMemPoolProps, usage), "pool props");
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(struct cudaMemAccessDesc), "access desc");
_Static_assert(sizeof(CUmemLocation) == sizeof(struct cudaMemLocation), "location");

#define PTR(d) ((void *)(uintptr_t)(d))

static CUresult drv_init(void)
{
	cudaError_t e = fe_rt_init();
	return e == cudaSuccess ? CUDA_SUCCESS : fe_drv_result(e);
}

static int device_kind(int kind) { return kind == FE_MEM_DEVICE || kind == FE_MEM_MODULE || kind == FE_MEM_MANAGED; }
static int host_kind(int kind) { return kind == FE_MEM_HOST_PINNED || kind == FE_MEM_HOST_REGISTERED; }

/* ---- device memory ---- */

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	void *p = NULL;
	CUresult r = FE_DRV(cudaMalloc(&p, bytesize));
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

CUresult cuMemFree(CUdeviceptr dptr) { return FE_DRV(cudaFree(PTR(dptr))); }

/* Rows padded as cudaMallocPitch pads them (to the texture pitch alignment,
 * which every element size divides). */
CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			 unsigned int ElementSizeBytes)
{
	if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if (WidthInBytes > SIZE_MAX / 2 || Height > SIZE_MAX / (WidthInBytes + 4096))
		return CUDA_ERROR_OUT_OF_MEMORY;
	void *p = NULL;
	size_t pitch = 0;
	CUresult r = FE_DRV(cudaMallocPitch(&p, &pitch, WidthInBytes, Height));
	if (r == CUDA_SUCCESS) {
		*dptr = (CUdeviceptr)(uintptr_t)p;
		*pPitch = pitch;
	}
	return r;
}

CUresult cuMemGetInfo(size_t *free, size_t *total) { return FE_DRV(cudaMemGetInfo(free, total)); }

/* The allocation (device, managed, a module's global) that dptr lies in, from
 * the client's map: no round trip. */
CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	CUresult r = drv_init();
	if (r)
		return r;
	fe_range rg;
	if (fe_mem_find(dptr, 0, &rg) < 0 || !device_kind(rg.kind))
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = rg.base;
	if (psize)
		*psize = rg.size;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	void *p = NULL;
	CUresult r = FE_DRV(cudaMallocManaged(&p, bytesize, flags));
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

_Static_assert(sizeof(CUmemLocation) == sizeof(struct cudaMemLocation) &&
		       (int)CU_MEM_LOCATION_TYPE_HOST == (int)cudaMemLocationTypeHost &&
		       (int)CU_MEM_ADVISE_SET_READ_MOSTLY == (int)cudaMemAdviseSetReadMostly,
	       "managed memory's locations and advice are the runtime's");

static struct cudaMemLocation location_of(CUmemLocation l)
{
	return (struct cudaMemLocation){.type = (enum cudaMemLocationType)l.type, .id = l.id};
}

/* Managed memory's advice and prefetches: the runtime layer keeps its
 * coherence (managed.c). */
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
	return FE_DRV(cudaMemAdvise(PTR(devPtr), count, (enum cudaMemoryAdvise)advice, location_of(location)));
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
			    CUstream hStream)
{
	return FE_DRV(cudaMemPrefetchAsync(PTR(devPtr), count, location_of(location), flags, (cudaStream_t)hStream));
}

/* ---- pinned and registered host memory ---- */

CUresult cuMemAllocHost(void **pp, size_t bytesize)
{
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaMallocHost(pp, bytesize));
}

/* CU_MEMHOSTALLOC_DEVICEMAP: a managed allocation, one address for host and
 * device, coherent at the calls (as cudaHostAlloc(cudaHostAllocMapped)). */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	if (!pp || (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
					 CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaHostAlloc(pp, bytesize, Flags));
}

CUresult cuMemFreeHost(void *p) { return FE_DRV(cudaFreeHost(p)); }

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	if (!p || bytesize == 0 || (uintptr_t)p > UINTPTR_MAX - bytesize ||
	    (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
				 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
		return CUDA_ERROR_INVALID_VALUE;
	if (Flags & CU_MEMHOSTREGISTER_IOMEMORY) {
		rg_log_once("frontend", "not supported (another device's I/O memory cannot reach a remote GPU)",
			    "cuMemHostRegister(CU_MEMHOSTREGISTER_IOMEMORY)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	/* Any part already pinned or registered (the runtime layer catches only a
	 * range inside one). Host ranges never overlap each other, so the first
	 * range the new one overlaps decides, unless it is device memory. */
	CUresult r = drv_init();
	if (r)
		return r;
	fe_range rg;
	if (fe_mem_overlap((uintptr_t)p, bytesize, &rg) == 0 && host_kind(rg.kind))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	/* READ_ONLY only promises the device will not write: nothing to do here. */
	return FE_DRV(cudaHostRegister(p, bytesize, Flags & ~(unsigned)CU_MEMHOSTREGISTER_READ_ONLY));
}

CUresult cuMemHostUnregister(void *p)
{
	CUresult r = drv_init();
	if (r)
		return r;
	/* Inside a registered range but not its start: an invalid value to the
	 * driver (measured on an H100), not an unregistered pointer. */
	fe_range rg;
	if (fe_mem_find((uintptr_t)p, 0, &rg) >= 0 && rg.kind == FE_MEM_HOST_REGISTERED && rg.base != (uintptr_t)p)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaHostUnregister(p));
}

/* A GPU in this host maps all pinned and registered memory (unified
 * addressing) and reports DEVICEMAP, plus WRITECOMBINED for an allocation,
 * PORTABLE for a registration, if they were asked for (as on an H100); here
 * nothing is mapped, so those are left. */
CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	CUresult r = drv_init();
	if (r)
		return r;
	fe_range rg;
	if (pFlags && fe_managed_mapped_host(p, 0)) {
		*pFlags = CU_MEMHOSTALLOC_DEVICEMAP;
		return CUDA_SUCCESS;
	}
	if (!pFlags || fe_mem_find((uintptr_t)p, 0, &rg) < 0 || !host_kind(rg.kind))
		return CUDA_ERROR_INVALID_VALUE;
	unsigned kept = rg.kind == FE_MEM_HOST_PINNED ? CU_MEMHOSTALLOC_WRITECOMBINED : CU_MEMHOSTREGISTER_PORTABLE;
	*pFlags = rg.flags & kept;
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	CUresult r = drv_init();
	if (r)
		return r;
	fe_range rg;
	if (!pdptr || Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fe_managed_mapped_host(p, 0)) { /* mapped: the same address */
		*pdptr = (CUdeviceptr)(uintptr_t)p;
		return CUDA_SUCCESS;
	}
	if (fe_mem_find((uintptr_t)p, 0, &rg) < 0 || !host_kind(rg.kind))
		return CUDA_ERROR_INVALID_VALUE;
	/* other pinned memory: as cudaHostGetDevicePointer answers */
	rg_log_once("frontend", "not supported (host memory cannot be mapped into a remote GPU)",
		    "cuMemHostGetDevicePointer");
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- stream-ordered allocation and pools ---- */

/* Size 0: success and a NULL pointer (as on an H100). */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	void *p = NULL;
	CUresult r = FE_DRV(cudaMallocAsync(&p, bytesize, (cudaStream_t)hStream));
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	void *p = NULL;
	CUresult r = FE_DRV(cudaMallocFromPoolAsync(&p, bytesize, (cudaMemPool_t)pool, (cudaStream_t)hStream));
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return FE_DRV(cudaFreeAsync(PTR(dptr), (cudaStream_t)hStream));
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	if (!pool || !poolProps)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaMemPoolCreate((cudaMemPool_t *)pool, (const struct cudaMemPoolProps *)poolProps));
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) { return FE_DRV(cudaMemPoolDestroy((cudaMemPool_t)pool)); }

/* The attributes have the same values and value types in both APIs. */
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	return FE_DRV(cudaMemPoolSetAttribute((cudaMemPool_t)pool, (enum cudaMemPoolAttr)attr, value));
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	return FE_DRV(cudaMemPoolGetAttribute((cudaMemPool_t)pool, (enum cudaMemPoolAttr)attr, value));
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	return FE_DRV(cudaMemPoolTrimTo((cudaMemPool_t)pool, minBytesToKeep));
}

CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	if (!map && count)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaMemPoolSetAccess((cudaMemPool_t)pool, (const struct cudaMemAccessDesc *)map, count));
}

CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
	return FE_DRV(cudaMemPoolGetAccess((enum cudaMemAccessFlags *)flags, (cudaMemPool_t)memPool,
					   (struct cudaMemLocation *)location));
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	return FE_DRV(cudaDeviceGetDefaultMemPool((cudaMemPool_t *)pool_out, dev));
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return FE_DRV(cudaDeviceGetMemPool((cudaMemPool_t *)pool, dev));
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	return FE_DRV(cudaDeviceSetMemPool(dev, (cudaMemPool_t)pool));
}

/* ---- pointer attributes, from the client's map of ranges ---- */

/* The answer for one attribute of p, in the range rg (NULL: memory no CUDA call
 * made or registered). plural: as cuPointerGetAttributes answers, which gives
 * NULL for an address the memory does not have where the singular form fails,
 * and never fails for unknown memory. */
static CUresult answer(CUpointer_attribute a, void *data, CUdeviceptr p, const fe_range *rg, int plural)
{
	/* mapped host memory (a managed allocation here) reads as the host memory
	 * it is to the program: host type, not managed, a device pointer too */
	int mapped = rg && rg->kind == FE_MEM_MANAGED && fe_managed_mapped_host(PTR(p), 0);
	int dev = rg && device_kind(rg->kind) && !mapped, host = rg && (host_kind(rg->kind) || mapped);
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		/* stream-ordered allocations belong to no context (the CUDA
		 * programming guide, "Pointer Attributes") */
		*(CUcontext *)data = rg && !rg->pool ? fe_drv_ctx_of(rg->device) : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: /* managed memory reads as device memory (as on an H100) */
		*(unsigned *)data = dev ? CU_MEMORYTYPE_DEVICE : host ? CU_MEMORYTYPE_HOST : 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		/* other pinned host memory is not mapped into the remote GPU */
		if (host && !mapped && !plural)
			return CUDA_ERROR_INVALID_VALUE;
		*(CUdeviceptr *)data = dev || mapped ? p : 0;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (dev && rg->kind != FE_MEM_MANAGED) {
			if (!plural)
				return CUDA_ERROR_INVALID_VALUE;
			*(void **)data = NULL;
		} else {
			*(void **)data = PTR(p); /* unknown memory too (as on an H100) */
		}
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = rg ? rg->id : 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned *)data = rg && rg->kind == FE_MEM_MANAGED && !mapped;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = rg ? rg->device : -2;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		if (rg) /* unknown memory: left as it was (as on an H100) */
			*(CUdeviceptr *)data = rg->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		if (rg)
			*(size_t *)data = rg->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned *)data = rg != NULL;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: /* never set: cuPointerSetAttribute */
		*(unsigned *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = rg ? (CUmemoryPool)(uintptr_t)rg->pool : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: /* IPC cannot reach another host */
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*(unsigned *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: /* no allocation exports handles */
		*(unsigned long long *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		/* the device of the current context reaches its own memory only */
		*(unsigned *)data = dev && rg->device == fe_rt_current_device()
					    ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
					    : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
		break;
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		rg_log_once("frontend",
			    "not supported (GPUDirect tokens and virtual memory mappings do not exist across hosts)",
			    "cuPointerGetAttribute(P2P_TOKENS, MAPPING_*, MEMORY_BLOCK_ID)");
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static const fe_range *lookup(CUdeviceptr p, fe_range *out) { return fe_mem_find(p, 0, out) >= 0 ? out : NULL; }

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	CUresult r = drv_init();
	if (r)
		return r;
	fe_range rg;
	const fe_range *known = lookup(ptr, &rg);
	if (!data || !known)
		return CUDA_ERROR_INVALID_VALUE;
	return answer(attribute, data, ptr, known, 0);
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
				CUdeviceptr ptr)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	fe_range rg;
	const fe_range *known = lookup(ptr, &rg);
	for (unsigned i = 0; i < numAttributes; i++) {
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
		if ((r = answer(attributes[i], data[i], ptr, known, 1)) != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* SYNC_MEMOPS is the only attribute a program sets. Off is what this library
 * does: a synchronous copy from the host or a memset returns once its frame is
 * sent, before the GPU has it (every later call of the session sees it done,
 * but nothing outside the session could). On would need them to wait for the
 * server: not supported. */
CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	CUresult r = drv_init();
	if (r)
		return r;
	fe_range rg;
	if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS || !lookup(ptr, &rg))
		return CUDA_ERROR_INVALID_VALUE;
	if (*(const unsigned *)value == 0)
		return CUDA_SUCCESS;
	rg_log_once("frontend", "not supported (synchronous copies do not wait for the remote GPU)",
		    "cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 1)");
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* The unversioned symbol: its _v2 kept the ABI (the 32-bit-pointer variants of
 * the others did not, and stay unsupported). */
extern __typeof__(cuMemHostRegister) cuMemHostRegister_v1 __asm__("cuMemHostRegister")
	__attribute__((alias("cuMemHostRegister_v2")));
