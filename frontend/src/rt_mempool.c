/*
 * Memory pools (stream-ordered allocation beyond cudaMallocAsync): the default
 * pool of each device, pools the program makes, the device's current pool.
 *
 * A cudaMemPool_t here names its device in its value, so no record is kept:
 * the default pool of device d is 0x9000 + d (what cudaDeviceGetDefaultMemPool
 * always returned), a pool the program made is (id << 8) | 0x80 | d, id one of
 * fe_rt_new_id's, never equal to a default pool's value. On the wire a default
 * pool is id 0 and a made one its whole value, sent to its device's server,
 * which keeps its own table of the session's pools (so a stale or foreign id
 * is the server's cudaErrorInvalidResourceHandle) and destroys them when the
 * session ends.
 *
 * The current pool (cudaDeviceSetMemPool) is the session's, kept by the server:
 * cudaMallocAsync there allocates from it (one per device). Pools on another
 * device than the stream's and access from other devices are not done; pools
 * that export handles (IPC) cannot work across hosts: cudaErrorNotSupported.
 */
#include <stdatomic.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

#define POOL_DEFAULT 0x9000u /* + device */
#define POOL_MADE 0x80u      /* (id << 8) | POOL_MADE | device */

/* Each device's current pool as the server has it (its wire id, 0: the default
 * pool), known from the calls that set or read it, so an allocation can name
 * its pool (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE) without asking. */
static _Atomic uint64_t current[FE_MAX_DEVICES];

cudaMemPool_t fe_mempool_current(int device)
{
	if (device < 0 || device >= FE_MAX_DEVICES)
		return NULL;
	uint64_t id = atomic_load(&current[device]);
	return (cudaMemPool_t)(uintptr_t)(id ? id : POOL_DEFAULT + (uint64_t)device);
}

static void forget(int device)
{
	for (int i = 0; i < FE_MAX_DEVICES; i++)
		if (device < 0 || i == device)
			atomic_store(&current[i], 0);
}

static cudaError_t pool_ref(cudaMemPool_t pool, int *dev, uint64_t *wire);
static cudaError_t pool_conn(fe_conn **c, int dev);
static cudaError_t pool_enter(fe_api_site site, cudaMemPool_t pool, fe_conn **c, uint64_t *wire);

/* The device of pool and its id on the wire; cudaErrorInvalidValue for a value
 * that is no pool handle of this process's devices. */
static cudaError_t pool_ref(cudaMemPool_t pool, int *dev, uint64_t *wire)
{
	uint64_t v = (uintptr_t)pool;
	if (v - POOL_DEFAULT < FE_MAX_DEVICES) {
		*dev = (int)(v - POOL_DEFAULT);
		*wire = 0;
	} else if ((v & 0xf0) == POOL_MADE && v >> 8) {
		*dev = (int)(v & 0x0f);
		*wire = v;
	} else {
		return cudaErrorInvalidValue;
	}
	return *dev < fe_rt_device_count() ? cudaSuccess : cudaErrorInvalidValue;
}

/* After fe_rt_enter: the connection of dev instead of the current device's. */
static cudaError_t pool_conn(fe_conn **c, int dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d || !d->conn)
		return cudaErrorDevicesUnavailable;
	*c = d->conn;
	return cudaSuccess;
}

/* Entering a call on pool: its device's connection and its wire id; an error
 * is recorded and returned. */
static cudaError_t pool_enter(fe_api_site site, cudaMemPool_t pool, fe_conn **c, uint64_t *wire)
{
	int dev;
	cudaError_t e = fe_rt_enter_site(c, site);
	if (e != cudaSuccess)
		return e;
	if ((e = pool_ref(pool, &dev, wire)) != cudaSuccess || (e = pool_conn(c, dev)) != cudaSuccess)
		return fe_rt_fail(e);
	return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
	if (!pool)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!fe_rt_device(device))
		return fe_rt_fail(cudaErrorInvalidDevice);
	*pool = (cudaMemPool_t)(uintptr_t)(POOL_DEFAULT + device);
	return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *props)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!memPool || !props)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (props->location.type != cudaMemLocationTypeDevice) {
		rg_log_once("frontend", "not supported (only device memory pools: host memory of the GPU's server "
					"cannot be reached from here)", "cudaMemPoolCreate(a host location)");
		return fe_rt_fail(cudaErrorNotSupported);
	}
	if (props->handleTypes != cudaMemHandleTypeNone) {
		rg_log_once("frontend", "not supported (pools that export handles: IPC cannot reach another host)",
			    "cudaMemPoolCreate(handleTypes)");
		return fe_rt_fail(cudaErrorNotSupported);
	}
	int dev = props->location.id;
	if (dev < 0 || dev >= fe_rt_device_count())
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = pool_conn(&c, dev)) != cudaSuccess)
		return fe_rt_fail(e);
	uint64_t v = fe_rt_new_id() << 8 | POOL_MADE | (uint64_t)dev;
	int st = fe_rpc_mempool_create(c, v, props->allocType, props->maxSize, props->usage);
	if (st == 0)
		*memPool = (cudaMemPool_t)(uintptr_t)v;
	return fe_rt_leave(st);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
	fe_conn *c;
	uint64_t id;
	cudaError_t e = pool_enter(FE_API_SITE, memPool, &c, &id);
	if (e != cudaSuccess)
		return e;
	int st = fe_rpc_mempool_destroy(c, id);
	if (st == 0) { /* the device's current pool goes back to the default, as in CUDA */
		uint64_t cur = id;
		atomic_compare_exchange_strong(&current[(uintptr_t)memPool & 0x0f], &cur, 0);
	}
	return fe_rt_leave(st);
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
	fe_conn *c;
	int dev;
	uint64_t id;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!ptr || (e = pool_ref(memPool, &dev, &id)) != cudaSuccess)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (dev != fe_rt_current_device()) {
		/* the stream is the current device's, on another server */
		rg_log_once("frontend", "not supported (a pool of another device than the current one)",
			    "cudaMallocFromPoolAsync");
		return fe_rt_fail(cudaErrorNotSupported);
	}
	if (size == 0) {
		*ptr = NULL;
		return cudaSuccess;
	}
	uint64_t p = 0;
	int st = fe_rpc_mem_alloc_pool(c, size, id, fe_rt_stream(stream), &p);
	if (st == 0) {
		fe_mem_add_tagged(p, size, FE_MEM_DEVICE, dev, (uintptr_t)memPool, 0);
		*ptr = (void *)(uintptr_t)p;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
	fe_conn *c;
	int dev;
	uint64_t id;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!fe_rt_device(device))
		return fe_rt_fail(cudaErrorInvalidDevice);
	/* the pool must be local to the device */
	if (pool_ref(memPool, &dev, &id) != cudaSuccess || dev != device)
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = pool_conn(&c, dev)) != cudaSuccess)
		return fe_rt_fail(e);
	int st = fe_rpc_mempool_set_current(c, id);
	if (st == 0)
		atomic_store(&current[dev], id);
	return fe_rt_leave(st);
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!memPool)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!fe_rt_device(device))
		return fe_rt_fail(cudaErrorInvalidDevice);
	if ((e = pool_conn(&c, device)) != cudaSuccess)
		return fe_rt_fail(e);
	uint64_t id = 0;
	int st = fe_rpc_mempool_get_current(c, &id);
	if (st == 0)
		atomic_store(&current[device], id);
	if (st == 0)
		*memPool = (cudaMemPool_t)(uintptr_t)(id ? id : POOL_DEFAULT + (uint64_t)device);
	return fe_rt_leave(st);
}

static int attr_is_u64(enum cudaMemPoolAttr a)
{
	return a == cudaMemPoolAttrReleaseThreshold || a == cudaMemPoolAttrReservedMemCurrent ||
	       a == cudaMemPoolAttrReservedMemHigh || a == cudaMemPoolAttrUsedMemCurrent ||
	       a == cudaMemPoolAttrUsedMemHigh;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	fe_conn *c;
	uint64_t id;
	cudaError_t e = pool_enter(FE_API_SITE, pool, &c, &id);
	if (e != cudaSuccess)
		return e;
	if (!value)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t v = attr_is_u64(attr) ? *(uint64_t *)value : (uint64_t)(int64_t) * (int *)value;
	return fe_rt_leave(fe_rpc_mempool_set_attr(c, id, attr, v));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	fe_conn *c;
	uint64_t id;
	cudaError_t e = pool_enter(FE_API_SITE, pool, &c, &id);
	if (e != cudaSuccess)
		return e;
	if (!value)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t v = 0;
	int st = fe_rpc_mempool_get_attr(c, id, attr, &v);
	if (st == 0) {
		if (attr_is_u64(attr))
			*(uint64_t *)value = v;
		else
			*(int *)value = (int)v;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t minBytesToKeep)
{
	fe_conn *c;
	uint64_t id;
	cudaError_t e = pool_enter(FE_API_SITE, pool, &c, &id);
	if (e != cudaSuccess)
		return e;
	return fe_rt_leave(fe_rpc_mempool_trim(c, id, minBytesToKeep));
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *descList, size_t count)
{
	int dev;
	uint64_t id;
	if (pool_ref(pool, &dev, &id) != cudaSuccess)
		return fe_rt_fail(cudaErrorInvalidValue);
	/* Only the pool's own device may be given access (access from other
	 * devices is not done). */
	for (size_t i = 0; i < count; i++)
		if (descList[i].location.type != cudaMemLocationTypeDevice || descList[i].location.id != dev)
			return fe_rt_fail(cudaErrorInvalidDevice);
	return cudaSuccess;
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool,
				 struct cudaMemLocation *location)
{
	fe_conn *c;
	int dev;
	uint64_t id;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!flags || !location || location->type != cudaMemLocationTypeDevice ||
	    pool_ref(memPool, &dev, &id) != cudaSuccess)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!fe_rt_device(location->id))
		return fe_rt_fail(cudaErrorInvalidDevice);
	if (location->id != dev) { /* access from another device: not done */
		*flags = cudaMemAccessFlagsProtNone;
		return cudaSuccess;
	}
	if ((e = pool_conn(&c, dev)) != cudaSuccess)
		return fe_rt_fail(e);
	int32_t f = 0;
	int st = fe_rpc_mempool_get_access(c, id, &f);
	if (st == 0)
		*flags = (enum cudaMemAccessFlags)f;
	return fe_rt_leave(st);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
