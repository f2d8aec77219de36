/*
 * Device memory: allocations and frees. Every allocation is recorded in the
 * session's ranges (ranges.h), which is what lets copies be checked and what the
 * teardown frees. A free must name the start of a live allocation of this
 * session: a pointer into the middle, another session's pointer, a module global
 * or a double free is CUDA_ERROR_INVALID_VALUE and never reaches the driver.
 * Each allocation is charged to the session's tenant before the driver is
 * asked (tenants.h), so a tenant over its quota gets CUDA_ERROR_OUT_OF_MEMORY
 * as from a full device, and a free gives the bytes back. An allocation the
 * device cannot serve goes through the handover first (handover.h): a latency
 * tenant's is tried again after batch tenants released, a batch tenant's may
 * wait for memory.
 */
#include "backend.h"

#include <inttypes.h>

#include "handover.h"
#include "ops.h"
#include "tenants.h"

typedef struct alloc_try {
	CUdeviceptr *p;
	size_t size;
	CUmemoryPool pool; /* alloc_async: NULL for the current pool's plain call */
	CUstream st;
} alloc_try;

static CUresult try_alloc(void *ctx)
{
	alloc_try *a = ctx;
	return be_drv.cuMemAlloc(a->p, a->size);
}

static CUresult try_alloc_async(void *ctx)
{
	alloc_try *a = ctx;
	return a->pool ? be_drv.cuMemAllocFromPoolAsync(a->p, a->size, a->pool, a->st)
		       : be_drv.cuMemAllocAsync(a->p, a->size, a->st);
}

static int record(be_session *s, CUdeviceptr p, uint64_t size, int kind);
static int check_freeable(be_session *s, CUdeviceptr ptr, const char *what);
static void forget(be_session *s, CUdeviceptr ptr, be_range *gone);

static int record(be_session *s, CUdeviceptr p, uint64_t size, int kind)
{
	pthread_mutex_lock(&s->ranges_mu); /* fetch.c reads them on its thread */
	int r = be_ranges_add(&s->ranges, (uint64_t)p, size, kind);
	pthread_mutex_unlock(&s->ranges_mu);
	if (r == BE_R_OK)
		return 0;
	LOG_ERROR(BE_LOG, "session %" PRIu64 ": cannot record allocation 0x%llx+%" PRIu64 " (%s)", s->id,
		  (unsigned long long)p, size, r == BE_R_OVERLAP ? "overlaps a known range" : "out of memory");
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static void forget(be_session *s, CUdeviceptr ptr, be_range *gone)
{
	pthread_mutex_lock(&s->ranges_mu);
	be_ranges_remove(&s->ranges, (uint64_t)ptr, gone);
	pthread_mutex_unlock(&s->ranges_mu);
}

static int check_freeable(be_session *s, CUdeviceptr ptr, const char *what)
{
	const be_range *r = be_ranges_at(&s->ranges, (uint64_t)ptr);
	if (r && r->kind != BE_RANGE_VAR && r->kind != BE_RANGE_MAPPED)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s(0x%llx): not the start of a live allocation of this session", s->id,
		 what, (unsigned long long)ptr);
	return CUDA_ERROR_INVALID_VALUE;
}

int be_op_mem_alloc(be_session *s, be_req *rq, uint64_t size)
{
	CUdeviceptr p = 0;
	CUresult r;

	if (size > 0) { /* cudaMalloc(0) succeeds with a NULL pointer */
		int err = be_tenant_charge(s, size);
		if (err)
			return err;
		alloc_try a = {&p, (size_t)size, NULL, NULL};
		if ((r = be_handover_alloc(s, try_alloc(&a), try_alloc, &a)) != CUDA_SUCCESS) {
			be_tenant_uncharge(s, size);
			return r;
		}
		if ((err = record(s, p, size, BE_RANGE_ALLOC))) {
			be_drv.cuMemFree(p);
			be_tenant_uncharge(s, size);
			return err;
		}
	}
	return be_reply_u64(s, rq, (uint64_t)p);
}

int be_op_mem_free(be_session *s, be_req *rq, CUdeviceptr ptr)
{
	CUresult r;
	int err;

	if (ptr == 0) /* cudaFree(NULL) does nothing */
		return CUDA_SUCCESS;
	if ((err = check_freeable(s, ptr, "mem_free")))
		return err;
	/* Forgotten first, so no copy outside the executor (fetch.c) reads it
	 * while it goes; back if the free fails: the memory is still there and
	 * the teardown must free it. */
	be_range gone = {0};
	forget(s, ptr, &gone);
	if ((r = be_drv.cuMemFree(ptr)) != CUDA_SUCCESS) {
		record(s, gone.base, gone.size, gone.kind);
		return r;
	}
	be_tenant_uncharge(s, gone.size);
	return CUDA_SUCCESS;
}

/* pool NULL: the session's current pool (cudaMallocAsync). */
static int alloc_async(be_session *s, be_req *rq, uint64_t size, CUmemoryPool pool, uint64_t stream_id)
{
	CUstream st;
	CUdeviceptr p = 0;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (!pool)
		pool = s->cur_pool[s->cur];
	if (size > 0) {
		/* Charged as allocated, not as the pool reserves: the pool's cached
		 * reserve is the driver's, reused by the tenant's next allocation. */
		if ((err = be_tenant_charge(s, size)))
			return err;
		alloc_try a = {&p, (size_t)size, pool, st};
		r = be_handover_alloc(s, try_alloc_async(&a), try_alloc_async, &a);
		if (r != CUDA_SUCCESS) {
			be_tenant_uncharge(s, size);
			return r;
		}
		if ((err = record(s, p, size, BE_RANGE_ASYNC))) {
			be_drv.cuMemFreeAsync(p, st);
			be_tenant_uncharge(s, size);
			return err;
		}
	}
	return be_reply_u64(s, rq, (uint64_t)p);
}

int be_op_mem_alloc_async(be_session *s, be_req *rq, uint64_t size, uint64_t stream_id)
{
	return alloc_async(s, rq, size, NULL, stream_id);
}

int be_op_mem_alloc_pool(be_session *s, be_req *rq, uint64_t size, uint64_t pool_id, uint64_t stream_id)
{
	CUmemoryPool pool;
	int err;

	if ((err = be_get_mempool(s, pool_id, &pool)))
		return err;
	return alloc_async(s, rq, size, pool, stream_id);
}

int be_op_mem_free_async(be_session *s, be_req *rq, CUdeviceptr ptr, uint64_t stream_id)
{
	CUstream st;
	CUresult r;
	int err;

	if (ptr == 0)
		return CUDA_SUCCESS;
	if ((err = be_get_stream(s, stream_id, &st)) || (err = check_freeable(s, ptr, "mem_free_async")))
		return err;
	/* Forgotten now, though the memory lives until the stream gets there:
	 * later calls may no longer use it, as in CUDA (first: as in mem_free). */
	be_range gone = {0};
	forget(s, ptr, &gone);
	if ((r = be_drv.cuMemFreeAsync(ptr, st)) != CUDA_SUCCESS) {
		record(s, gone.base, gone.size, gone.kind);
		return r;
	}
	be_tenant_uncharge(s, gone.size);
	return CUDA_SUCCESS;
}
