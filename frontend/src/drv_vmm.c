/*
 * Driver API: virtual memory management (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess, ...), forwarded: what PyTorch's expandable
 * segments and other allocators grow their pools with.
 *
 * Design:
 *  - A reservation is a range of the server's virtual addresses, as every
 *    device pointer here is the server's address: cuMemAddressReserve is a
 *    round trip (vmm_reserve), and the client records what it got (its device,
 *    for the calls on it later).
 *  - A CUmemGenericAllocationHandle is an id the client chooses (fe_rt_new_id,
 *    as streams); the server maps it to its driver's handle in the session's
 *    table (backend/src/op_vmm.c), and the session's teardown unmaps, releases
 *    and frees whatever the program left, in that order. The client keeps each
 *    handle's properties (cuMemGetAllocationPropertiesFromHandle answers from
 *    them) and its references (cuMemCreate's, each retain's) until they are
 *    released and nothing maps it.
 *  - A mapping is recorded on both sides as device memory: here in the map of
 *    ranges (mem_ranges.c, FE_MEM_DEVICE tagged FE_MEM_VMM: cudaMemcpyDefault,
 *    pointer attributes and the local range checks of copies work on it, and
 *    mappings back to back are one range for a copy), on the server in the
 *    session's range table; both forget it at cuMemUnmap. cudaFree/cuMemFree
 *    refuse it.
 *  - Only device memory of a remote device, exporting no handles (handles do
 *    not cross hosts: cuMemExportToShareableHandle / cuMemImportFromShareableHandle
 *    answer CUDA_ERROR_NOT_SUPPORTED; an allocation that asks for a POSIX file
 *    descriptor handle is made without one, its properties keep the request); access is set for the mapping's own
 *    device only (access from another device, even of the same server, is not
 *    done).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

typedef struct vm_handle {
	uint64_t id;
	int dev;
	uint64_t size;
	CUmemAllocationProp prop;
	unsigned refs; /* 0: released, kept while mapped (a retain brings it back) */
	unsigned maps;
	struct vm_handle *next;
} vm_handle;

typedef struct vm_resv {
	uint64_t base, size;
	int dev;
	struct vm_resv *next;
} vm_resv;

typedef struct vm_map {
	uint64_t base, size;
	vm_handle *h;
	struct vm_map *next;
} vm_map;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static vm_handle *handles;
static vm_resv *resvs;
static vm_map *maps;

static CUresult drv_init(void)
{
	cudaError_t e = fe_rt_init();
	return e == cudaSuccess ? CUDA_SUCCESS : fe_drv_result(e);
}

/* Under lock. */
static vm_handle *handle_of(uint64_t id)
{
	for (vm_handle *h = handles; h; h = h->next)
		if (h->id == id && h->refs)
			return h;
	return NULL;
}

static vm_map *map_at(uint64_t p)
{
	for (vm_map *m = maps; m; m = m->next)
		if (p - m->base < m->size)
			return m;
	return NULL;
}

static void handle_put(vm_handle *h)
{
	if (h->refs || h->maps)
		return;
	for (vm_handle **pp = &handles; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	free(h);
}

/* The connection of dev for a driver call between fe_drv_begin and fe_drv_end
 * (dev < 0: the current device's). */
static cudaError_t enter(int dev, fe_conn **c)
{
	cudaError_t e = fe_rt_enter(c);
	if (e != cudaSuccess || dev < 0)
		return e;
	fe_device *d = fe_rt_device(dev);
	if (!d || !d->conn)
		return fe_rt_fail(cudaErrorDevicesUnavailable);
	*c = d->conn;
	return cudaSuccess;
}

/* What the remote can allocate: device memory of one of its devices, no export
 * handles, no GPUDirect RDMA. */
static CUresult check_prop(const CUmemAllocationProp *p, const char *fn)
{
	if (p->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
		rg_log_once("frontend", "not supported (only device memory: the GPU server's host memory cannot be "
					"reached from here)", fn);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	/* A POSIX file descriptor handle is asked for by allocators that might
	 * share the memory with another process later (PyTorch's expandable
	 * segments, after FABRIC): the allocation is made without one, and only
	 * its export is refused. Other handle kinds cannot be made at all. A
	 * fabric handle is refused as by a driver whose device has none (the
	 * attribute says so, rt_device.c): PyTorch tries one first and goes on
	 * with a file descriptor, so that refusal is no news worth a warning. */
	if (p->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) {
		LOG_DEBUG("frontend", "%s: no fabric handles (HANDLE_TYPE_FABRIC_SUPPORTED is 0)", fn);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (p->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
		rg_log_once("frontend", "not supported (shareable handles do not cross hosts)", fn);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (p->allocFlags.gpuDirectRDMACapable) {
		rg_log_once("frontend", "not supported (GPUDirect RDMA does not reach another host)", fn);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (p->location.id < 0 || p->location.id >= fe_rt_device_count())
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
				       CUmemAllocationGranularity_flags option)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!granularity || !prop ||
	    (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_prop(prop, "cuMemGetAllocationGranularity")))
		return r;
	fe_conn *c;
	uint64_t g = 0;
	fe_drv_begin();
	cudaError_t e = enter(prop->location.id, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_granularity(c, prop->type, CU_MEM_HANDLE_TYPE_NONE, prop->location.type,
						       option, &g));
	if ((r = fe_drv_end(e)) == CUDA_SUCCESS)
		*granularity = (size_t)g;
	return r;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!ptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	vm_resv *rv = malloc(sizeof(*rv));
	if (!rv)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fe_conn *c;
	uint64_t p = 0;
	fe_drv_begin();
	cudaError_t e = enter(-1, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_reserve(c, size, alignment, addr, flags, &p));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS) {
		free(rv);
		return r;
	}
	*rv = (vm_resv){p, size, fe_rt_current_device(), NULL};
	pthread_mutex_lock(&lock);
	rv->next = resvs;
	resvs = rv;
	pthread_mutex_unlock(&lock);
	*ptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = drv_init();
	if (r)
		return r;
	int dev = -1;
	pthread_mutex_lock(&lock);
	for (vm_resv *rv = resvs; rv; rv = rv->next)
		if (rv->base == ptr && rv->size == size)
			dev = rv->dev;
	pthread_mutex_unlock(&lock);
	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_free(c, ptr, size));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&lock);
	for (vm_resv **pp = &resvs; *pp; pp = &(*pp)->next)
		if ((*pp)->base == ptr && (*pp)->size == size) {
			vm_resv *gone = *pp;
			*pp = gone->next;
			free(gone);
			break;
		}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!handle || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_prop(prop, "cuMemCreate")))
		return r;
	vm_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->id = fe_rt_new_id();
	h->dev = prop->location.id;
	h->size = size;
	h->prop = *prop;
	h->refs = 1;
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = enter(h->dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_create(c, h->id, size, prop->type, CU_MEM_HANDLE_TYPE_NONE,
						  prop->location.type, prop->allocFlags.compressionType,
						  prop->allocFlags.usage, flags));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS) {
		free(h);
		return r;
	}
	pthread_mutex_lock(&lock);
	h->next = handles;
	handles = h;
	pthread_mutex_unlock(&lock);
	*handle = h->id;
	return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult r = drv_init();
	if (r)
		return r;
	pthread_mutex_lock(&lock);
	vm_handle *h = handle_of(handle);
	int dev = h ? h->dev : -1;
	pthread_mutex_unlock(&lock);
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_release(c, handle));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&lock);
	if ((h = handle_of(handle))) {
		h->refs--;
		handle_put(h);
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	vm_handle *h = handle_of(handle);
	if (h)
		*prop = h->prop;
	pthread_mutex_unlock(&lock);
	return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	CUresult r = drv_init();
	if (r)
		return r;
	vm_map *m = malloc(sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	vm_handle *h = handle_of(handle);
	int dev = h ? h->dev : -1;
	pthread_mutex_unlock(&lock);
	if (!h) {
		free(m);
		return CUDA_ERROR_INVALID_VALUE;
	}
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_map(c, ptr, size, offset, handle, flags));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS) {
		free(m);
		return r;
	}
	pthread_mutex_lock(&lock);
	/* The server mapped it: the handle's record is there (a release waits for
	 * this call's reply no more than the server's table does). */
	h = handle_of(handle);
	*m = (vm_map){ptr, size, h, maps};
	if (h)
		h->maps++;
	maps = m;
	pthread_mutex_unlock(&lock);
	fe_mem_add_tagged(ptr, size, FE_MEM_DEVICE, dev, 0, FE_MEM_VMM);
	return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult r = drv_init();
	if (r)
		return r;
	pthread_mutex_lock(&lock);
	vm_map *first = size ? map_at(ptr) : NULL;
	int dev = first && first->h ? first->h->dev : -1;
	pthread_mutex_unlock(&lock);
	if (!first || dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* The server checks that whole mappings are named. */
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_unmap(c, ptr, size));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&lock);
	for (vm_map **pp = &maps; *pp;) {
		vm_map *m = *pp;
		if (m->base - ptr >= size) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		fe_mem_remove(m->base, FE_MEM_DEVICE, NULL);
		if (m->h) {
			m->h->maps--;
			handle_put(m->h);
		}
		free(m);
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!desc || count == 0 || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	vm_map *m = map_at(ptr);
	int dev = m && m->h ? m->h->dev : -1;
	pthread_mutex_unlock(&lock);
	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
			rg_log_once("frontend", "not supported (access from the GPU server's host: not reachable from here)",
				    "cuMemSetAccess(a host location)");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		if (desc[i].location.id < 0 || desc[i].location.id >= fe_rt_device_count())
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[i].location.id != dev) {
			rg_log_once("frontend", "not supported (access from another device)",
				    "cuMemSetAccess(another device)");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	}
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	for (size_t i = 0; e == cudaSuccess && i < count; i++)
		e = fe_rt_leave(fe_rpc_vmm_set_access(c, ptr, size, desc[i].location.type, desc[i].flags));
	return fe_drv_end(e);
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!flags || !location)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	vm_map *m = map_at(ptr);
	int dev = m && m->h ? m->h->dev : -1;
	pthread_mutex_unlock(&lock);
	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) {
		rg_log_once("frontend", "not supported (access from the GPU server's host: not reachable from here)",
			    "cuMemGetAccess(a host location)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (location->id < 0 || location->id >= fe_rt_device_count())
		return CUDA_ERROR_INVALID_DEVICE;
	if (location->id != dev) { /* access from another device: not done */
		*flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
		return CUDA_SUCCESS;
	}
	fe_conn *c;
	uint64_t v = 0;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_get_access(c, ptr, location->type, &v));
	if ((r = fe_drv_end(e)) == CUDA_SUCCESS)
		*flags = v;
	return r;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	CUresult r = drv_init();
	if (r)
		return r;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	vm_map *m = map_at((uintptr_t)addr);
	int dev = m && m->h ? m->h->dev : -1;
	pthread_mutex_unlock(&lock);
	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	fe_conn *c;
	uint64_t id = 0;
	fe_drv_begin();
	cudaError_t e = enter(dev, &c);
	if (e == cudaSuccess)
		e = fe_rt_leave(fe_rpc_vmm_retain(c, (uintptr_t)addr, &id));
	if ((r = fe_drv_end(e)) != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&lock);
	for (vm_handle *h = handles; h; h = h->next)
		if (h->id == id) {
			h->refs++;
			break;
		}
	pthread_mutex_unlock(&lock);
	*handle = id;
	return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
				      CUmemAllocationHandleType handleType, unsigned long long flags)
{
	(void)shareableHandle, (void)handle, (void)handleType, (void)flags;
	rg_log_once("frontend", "not supported (shareable handles do not cross hosts)", "cuMemExportToShareableHandle");
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					CUmemAllocationHandleType shHandleType)
{
	(void)handle, (void)osHandle, (void)shHandleType;
	rg_log_once("frontend", "not supported (shareable handles do not cross hosts)",
		    "cuMemImportFromShareableHandle");
	return CUDA_ERROR_NOT_SUPPORTED;
}
