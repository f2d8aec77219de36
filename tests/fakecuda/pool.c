/*
 * pool.c: memory pools (stream-ordered allocation): each device's default pool,
 * pools made with cuMemPoolCreate, the device's current pool, attributes, trim.
 *
 * A pool keeps what its allocations freed in reserve, as a GPU's does: freed
 * bytes leave used at once but stay charged to the device (reserved, and so
 * missing from cuMemGetInfo's free) until a synchronisation (cuCtxSynchronize,
 * cuStreamSynchronize, cuEventSynchronize) releases the reserve down to the
 * pool's release threshold (0 by default), or cuMemPoolTrimTo down to what it
 * is told to keep; a new allocation takes from the reserve first. The blocks
 * themselves come from the device arena and go back one by one (memory.c):
 * only the accounting is pooled. Unlike a GPU, reserved is exact (no granularity).
 *
 * Destroying a pool with live allocations returns at once; they stay usable,
 * and the pool goes with the last of them (cuMemPoolDestroy's contract). The
 * default pool cannot be destroyed. Only device pools without export handle
 * types exist here (CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES is 0).
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

static int dev_ok(CUdevice d) { return d >= 0 && d < fk_ndev; }
static void release(fk_pool *p, size_t keep);
static CUresult pool_get(CUmemoryPool h, fk_pool **out);
static CUresult attr_begin(CUmemoryPool h, void *value, fk_pool **out);

fk_pool *fk_pool_new(int dev)
{
	fk_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->dev = dev;
	p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
	p->id = fk_handle_new(FK_POOL, p, NULL);
	return p;
}

/* Down to keep, never below what is in use. */
static void release(fk_pool *p, size_t keep)
{
	size_t target = p->reserved < keep ? p->reserved : keep;
	if (target < p->used)
		target = p->used;
	fk_dev_uncharge(&fk_devs[p->dev], p->reserved - target);
	p->reserved = target;
}

void fk_pool_put(fk_pool *p, size_t charged)
{
	p->used -= charged;
	p->nallocs--;
	if (p->id == 0) { /* destroyed: nothing is kept */
		release(p, 0);
		if (p->nallocs == 0)
			free(p);
	}
}

void fk_pools_sync(int dev)
{
	uint64_t *ids;
	size_t n = fk_handle_list(FK_POOL, NULL, &ids);
	for (size_t i = 0; i < n; i++) {
		fk_pool *p = fk_handle_get(ids[i], FK_POOL, NULL);
		if (p && p->dev == dev)
			release(p, p->release_threshold);
	}
	free(ids);
}

static CUresult pool_get(CUmemoryPool h, fk_pool **out)
{
	*out = fk_handle_get(FK_H(h), FK_POOL, NULL);
	return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* fk_begin_init, then the pool and a value to read or write. */
static CUresult attr_begin(CUmemoryPool h, void *value, fk_pool **out)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS)
		rc = pool_get(h, out);
	if (rc == CUDA_SUCCESS && !value)
		rc = CUDA_ERROR_INVALID_VALUE;
	return rc;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	CUresult rc = fk_begin_init();
	static const unsigned char zero[sizeof props->reserved];

	if (rc == CUDA_SUCCESS && (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	                           memcmp(props->reserved, zero, sizeof zero) != 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		rc = CUDA_ERROR_NOT_SUPPORTED; /* host pools are not emulated */
	else if (rc == CUDA_SUCCESS && !dev_ok(props->location.id))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
		rc = CUDA_ERROR_NOT_SUPPORTED; /* no export handle types here */
	fk_pool *p = NULL;
	if (rc == CUDA_SUCCESS && !(p = fk_pool_new(props->location.id)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		p->max_size = props->maxSize;
		*pool = (CUmemoryPool)(uintptr_t)p->id;
	}
	return fk_end(rc, __func__, "-> %#lx", p ? (unsigned long)p->id : 0ul);
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	fk_pool *p = NULL;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS)
		rc = pool_get(pool, &p);
	if (rc == CUDA_SUCCESS && fk_devs[p->dev].pool == p)
		rc = CUDA_ERROR_INVALID_VALUE; /* a default pool cannot be destroyed */
	if (rc == CUDA_SUCCESS) {
		fk_dev *d = &fk_devs[p->dev];
		if (d->cur_pool == p)
			d->cur_pool = d->pool;
		fk_handle_del(p->id);
		p->id = 0;
		release(p, 0);
		if (p->nallocs == 0)
			free(p);
	}
	return fk_end(rc, __func__, "%#lx", (unsigned long)FK_H(pool));
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !pool_out)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		*pool_out = (CUmemoryPool)(uintptr_t)fk_devs[dev].pool->id;
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !pool)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		*pool = (CUmemoryPool)(uintptr_t)fk_devs[dev].cur_pool->id;
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	fk_pool *p = NULL;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && !dev_ok(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS && pool_get(pool, &p) != CUDA_SUCCESS)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && p->dev != dev)
		rc = CUDA_ERROR_INVALID_VALUE; /* the pool must be local to the device */
	if (rc == CUDA_SUCCESS)
		fk_devs[dev].cur_pool = p;
	return fk_end(rc, __func__, "%d, %#lx", dev, (unsigned long)FK_H(pool));
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	fk_pool *p = NULL;
	CUresult rc = attr_begin(pool, value, &p);
	if (rc != CUDA_SUCCESS)
		return fk_end(rc, __func__, "%d", (int)attr);

	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value != 0;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		p->release_threshold = *(cuuint64_t *)value;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		/* only a reset (to the current value) may be asked for */
		if (*(cuuint64_t *)value != 0)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			p->reserved_high = p->reserved;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (*(cuuint64_t *)value != 0)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			p->used_high = p->used;
		break;
	default: /* the CURRENT values are read-only */
		rc = CUDA_ERROR_INVALID_VALUE;
	}
	return fk_end(rc, __func__, "%d", (int)attr);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	fk_pool *p = NULL;
	CUresult rc = attr_begin(pool, value, &p);
	if (rc != CUDA_SUCCESS)
		return fk_end(rc, __func__, "%d", (int)attr);

	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		*(cuuint64_t *)value = p->release_threshold;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
		*(cuuint64_t *)value = p->reserved;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		*(cuuint64_t *)value = p->used;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		*(cuuint64_t *)value = p->reserved_high;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		*(cuuint64_t *)value = p->used_high;
		break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
	}
	return fk_end(rc, __func__, "%d", (int)attr);
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	fk_pool *p = NULL;
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS)
		rc = pool_get(pool, &p);
	if (rc == CUDA_SUCCESS)
		release(p, minBytesToKeep);
	return fk_end(rc, __func__, "%zu", minBytesToKeep);
}

/* Only the pool's own device has access (peer access is not emulated). */
CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
	fk_pool *p = NULL;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS)
		rc = pool_get(memPool, &p);
	if (rc == CUDA_SUCCESS && (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
	                           !dev_ok(location->id)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*flags = location->id == p->dev ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
	return fk_end(rc, __func__, "%#lx", (unsigned long)FK_H(memPool));
}
