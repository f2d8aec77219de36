/*
 * The device's default memory pool (stream-ordered allocations). Attribute
 * values travel as u64 and are converted to the type cuda.h gives each
 * attribute: int for the REUSE_* ones, cuuint64_t for the sizes.
 *
 * The default pool belongs to the device, not to the session's context, so
 * these settings are shared by every session on the device.
 */
#include "backend.h"

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

int be_op_mempool_set_attr(be_session *s, be_req *rq, int32_t attr, uint64_t value)
{
	int t = attr_type(attr);

	if (!s->mempool)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (t == 1) {
		if (value > INT_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		int v = (int)value;
		return be_drv.cuMemPoolSetAttribute(s->mempool, (CUmemPool_attribute)attr, &v);
	}
	if (t == 2) {
		cuuint64_t v = value;
		return be_drv.cuMemPoolSetAttribute(s->mempool, (CUmemPool_attribute)attr, &v);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

int be_op_mempool_get_attr(be_session *s, be_req *rq, int32_t attr)
{
	int t = attr_type(attr);
	uint64_t out;
	CUresult r;

	if (!s->mempool)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (t == 1) {
		int v = 0;
		if ((r = be_drv.cuMemPoolGetAttribute(s->mempool, (CUmemPool_attribute)attr, &v)) != CUDA_SUCCESS)
			return r;
		out = (uint64_t)(int64_t)v;
	} else if (t == 2) {
		cuuint64_t v = 0;
		if ((r = be_drv.cuMemPoolGetAttribute(s->mempool, (CUmemPool_attribute)attr, &v)) != CUDA_SUCCESS)
			return r;
		out = v;
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_u64(m, out);
	return be_reply_end(s, rq, m, NULL, 0);
}

int be_op_mempool_trim(be_session *s, be_req *rq, uint64_t keep)
{
	if (!s->mempool)
		return CUDA_ERROR_NOT_SUPPORTED;
	return be_drv.cuMemPoolTrimTo(s->mempool, (size_t)keep);
}
