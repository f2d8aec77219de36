/*
 * Memory pools (stream-ordered allocations). Pool 0 is the device's default
 * pool; the others are the session's own, made by mempool_create on the
 * session's device under ids the client chose, looked up in s->pools (so one
 * tenant cannot name another's), and destroyed at the session's end after its
 * allocations are freed: a pool belongs to the device, not to the context, so
 * cuCtxDestroy would leave it and its reserve behind. Attribute values travel
 * as u64 and are converted to the type cuda.h gives each attribute: int for
 * the REUSE_* ones, cuuint64_t for the sizes.
 *
 * The default pool belongs to the device, so its settings are shared by every
 * session of the process (--isolation thread). For the same reason the current
 * pool (cudaDeviceSetMemPool) is kept per session and never set in the driver:
 * mem_alloc_async allocates from it with cuMemAllocFromPoolAsync.
 *
 * Pools with export handle types are refused by the client (IPC cannot reach
 * another host), so the server makes pools without any.
 */
#include "backend.h"

#include <inttypes.h>
#include <limits.h>

#include "ops.h"

/* 1: int attribute, 2: cuuint64_t attribute, 0: unknown. */
static int attr_type(int32_t attr)
{
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		return 1;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		return 2;
	default:
		return 0;
	}
}

int be_get_mempool(be_session *s, uint64_t id, CUmemoryPool *out)
{
	if (id == 0) {
		*out = s->mempool;
		return s->mempool ? 0 : CUDA_ERROR_NOT_SUPPORTED;
	}
	void *o = NULL;
	int r = be_htab_get(&s->pools, id, &o, NULL);
	if (r != BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": memory pool %" PRIu64 ": %s", s->id, id, be_h_strerror(r));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	*out = o;
	return 0;
}

int be_op_mempool_set_attr(be_session *s, be_req *rq, uint64_t pool_id, int32_t attr, uint64_t value)
{
	int t = attr_type(attr), err;
	CUmemoryPool pool;

	if ((err = be_get_mempool(s, pool_id, &pool)))
		return err;
	if (t == 1) {
		if (value > INT_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		int v = (int)value;
		return be_drv.cuMemPoolSetAttribute(pool, (CUmemPool_attribute)attr, &v);
	}
	if (t == 2) {
		cuuint64_t v = value;
		return be_drv.cuMemPoolSetAttribute(pool, (CUmemPool_attribute)attr, &v);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

int be_op_mempool_get_attr(be_session *s, be_req *rq, uint64_t pool_id, int32_t attr)
{
	int t = attr_type(attr), err;
	CUmemoryPool pool;
	uint64_t out;
	CUresult r;

	if ((err = be_get_mempool(s, pool_id, &pool)))
		return err;
	if (t == 1) {
		int v = 0;
		if ((r = be_drv.cuMemPoolGetAttribute(pool, (CUmemPool_attribute)attr, &v)) != CUDA_SUCCESS)
			return r;
		out = (uint64_t)(int64_t)v;
	} else if (t == 2) {
		cuuint64_t v = 0;
		if ((r = be_drv.cuMemPoolGetAttribute(pool, (CUmemPool_attribute)attr, &v)) != CUDA_SUCCESS)
			return r;
		out = v;
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	return be_reply_u64(s, rq, out);
}

int be_op_mempool_create(be_session *s, be_req *rq, uint64_t pool_id, uint32_t alloc_type, uint64_t max_size,
			 uint32_t usage)
{
	CUmemPoolProps props = {
		.allocType = (CUmemAllocationType)alloc_type,
		.handleTypes = CU_MEM_HANDLE_TYPE_NONE,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = be_cur_gpu(s)->dev},
		.maxSize = (size_t)max_size,
		.usage = (unsigned short)usage,
	};
	CUmemoryPool pool;
	CUresult r;

	if (pool_id == 0 || usage > USHRT_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = be_drv.cuMemPoolCreate(&pool, &props)) != CUDA_SUCCESS)
		return r;
	int h = be_htab_add(&s->pools, pool_id, pool, 0);
	if (h != BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": memory pool %" PRIu64 ": %s", s->id, pool_id, be_h_strerror(h));
		be_drv.cuMemPoolDestroy(pool);
		return be_h_status(h, CUDA_ERROR_INVALID_VALUE);
	}
	return CUDA_SUCCESS;
}

/* As cuMemPoolDestroy: allocations still live stay usable (and in the
 * session's ranges, freeable), the pool goes with the last of them. */
int be_op_mempool_destroy(be_session *s, be_req *rq, uint64_t pool_id)
{
	CUmemoryPool pool;
	CUresult r;
	int err;

	if (pool_id == 0) /* the default pool cannot be destroyed */
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = be_get_mempool(s, pool_id, &pool)))
		return err;
	if ((r = be_drv.cuMemPoolDestroy(pool)) != CUDA_SUCCESS)
		return r;
	be_htab_del(&s->pools, pool_id, NULL, NULL);
	for (int d = 0; d < be_srv.ngpu; d++)
		if (s->cur_pool_id[d] == pool_id) { /* back to the default pool, as in CUDA */
			s->cur_pool_id[d] = 0;
			s->cur_pool[d] = NULL;
		}
	return CUDA_SUCCESS;
}

int be_op_mempool_set_current(be_session *s, be_req *rq, uint64_t pool_id)
{
	CUmemoryPool pool;
	int err;

	if ((err = be_get_mempool(s, pool_id, &pool)))
		return err;
	s->cur_pool_id[s->cur] = pool_id;
	s->cur_pool[s->cur] = pool_id ? pool : NULL;
	return CUDA_SUCCESS;
}

int be_op_mempool_get_current(be_session *s, be_req *rq)
{
	return be_reply_u64(s, rq, s->cur_pool_id[s->cur]);
}

/* From the session's device (the client answers for its other devices). */
int be_op_mempool_get_access(be_session *s, be_req *rq, uint64_t pool_id)
{
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = be_cur_gpu(s)->dev};
	CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	CUmemoryPool pool;
	CUresult r;
	int err;

	if ((err = be_get_mempool(s, pool_id, &pool)))
		return err;
	if ((r = be_drv.cuMemPoolGetAccess(&f, pool, &loc)) != CUDA_SUCCESS)
		return r;
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_i64(m, (int64_t)f);
	return be_reply_end(s, rq, m, NULL, 0);
}
