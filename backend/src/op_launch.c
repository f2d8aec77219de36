/*
 * Kernel launches and function attributes.
 *
 * The client packs a launch's arguments into one buffer by the offsets the
 * module_load reply gave it; the buffer goes to the driver as
 * CU_LAUNCH_PARAM_BUFFER_POINTER, so the server never interprets arguments. It
 * must be exactly as long as the kernel's parameters: a shorter one would let
 * the kernel read past it.
 *
 * Launch attributes arrive as a raw CUlaunchAttribute array. Only attributes
 * made of plain values pass: the ones that carry a handle or a pointer
 * (programmatic / completion events, a device-updatable node, an access policy
 * window's address) would hand the driver a number from the wire as a pointer.
 */
#include "backend.h"

#include <inttypes.h>
#include <string.h>

#include "ops.h"
#include "proto_launch.h"

int be_kargs_take(be_session *s, uint64_t f_id, const void *params, size_t len, CUfunction *fn, be_kargs *a)
{
	void *o;
	uint64_t psize;

	a->p = NULL;
	if (be_htab_get(&s->funcs, f_id, &o, &psize) != BE_H_OK)
		return be_get_func(s, f_id, fn); /* logs and answers INVALID_HANDLE */
	*fn = o;
	if (len != psize) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": function %" PRIu64 " given %zu bytes of arguments, it takes %" PRIu64,
			 s->id, f_id, len, psize);
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* Parameters sit at arbitrary offsets in the message: copy them to
	 * aligned memory. */
	a->p = a->small;
	if (len > sizeof(a->small) && !(a->p = malloc(len)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (len)
		memcpy(a->p, params, len);
	a->len = len;
	a->list[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
	a->list[1] = a->p;
	a->list[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
	a->list[3] = &a->len;
	a->list[4] = CU_LAUNCH_PARAM_END;
	a->extra = len ? a->list : NULL; /* a kernel without parameters needs no buffer */
	return CUDA_SUCCESS;
}

void be_kargs_free(be_kargs *a)
{
	if (a->p != a->small)
		free(a->p);
	a->p = NULL;
}

int be_op_launch(be_session *s, be_req *rq, uint64_t f_id, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx,
		 uint32_t by, uint32_t bz, uint32_t shmem, uint64_t stream_id, const void *params, size_t params_len,
		 const void *attrs, size_t attrs_len)
{
	CUfunction fn;
	CUstream st;
	be_kargs a;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (attrs_len % sizeof(CUlaunchAttribute) || attrs_len / sizeof(CUlaunchAttribute) > BE_MAX_LAUNCH_ATTRS) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": launch attributes of %zu bytes", s->id, attrs_len);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if ((err = be_kargs_take(s, f_id, params, params_len, &fn, &a)))
		return err;
	CUresult r;

	if (attrs_len == 0) {
		r = be_drv.cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shmem, st, NULL, a.extra);
	} else {
		CUlaunchAttribute at[BE_MAX_LAUNCH_ATTRS];
		unsigned n = (unsigned)(attrs_len / sizeof(CUlaunchAttribute));
		memcpy(at, attrs, attrs_len);
		r = CUDA_SUCCESS;
		for (unsigned i = 0; i < n; i++) {
			if (!proto_launch_attr_travels(at[i].id)) {
				LOG_INFO(BE_LOG, "session %" PRIu64 ": launch attribute %d is not supported remotely", s->id,
					 (int)at[i].id);
				r = CUDA_ERROR_NOT_SUPPORTED;
			}
		}
		if (r == CUDA_SUCCESS) {
			CUlaunchConfig cfg = {
				.gridDimX = gx, .gridDimY = gy, .gridDimZ = gz,
				.blockDimX = bx, .blockDimY = by, .blockDimZ = bz,
				.sharedMemBytes = shmem, .hStream = st, .attrs = at, .numAttrs = n,
			};
			r = be_drv.cuLaunchKernelEx(&cfg, fn, NULL, a.extra);
		}
	}
	be_kargs_free(&a);
	return r;
}

int be_op_func_get_attrs(be_session *s, be_req *rq, uint64_t f_id)
{
	CUfunction fn;
	uint8_t out[4 * CU_FUNC_ATTRIBUTE_MAX];
	int err;

	if ((err = be_get_func(s, f_id, &fn)))
		return err;
	for (int i = 0; i < CU_FUNC_ATTRIBUTE_MAX; i++) {
		int v = -1;
		if (be_drv.cuFuncGetAttribute(&v, (CUfunction_attribute)i, fn) != CUDA_SUCCESS)
			v = -1;
		uint32_t u = (uint32_t)v;
		for (int b = 0; b < 4; b++)
			out[4 * i + b] = (uint8_t)(u >> (8 * b));
	}
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_bin(m, out, sizeof(out));
	return be_reply_end(s, rq, m, NULL, 0);
}

int be_op_occupancy_clusters(be_session *s, be_req *rq, uint64_t f_id, uint32_t gx, uint32_t gy, uint32_t gz,
			     uint32_t bx, uint32_t by, uint32_t bz, uint32_t shmem, const void *attrs,
			     size_t attrs_len, uint32_t potential)
{
	CUfunction fn;
	int err;
	if ((err = be_get_func(s, f_id, &fn)))
		return err;
	if (attrs_len % sizeof(CUlaunchAttribute) || attrs_len / sizeof(CUlaunchAttribute) > BE_MAX_LAUNCH_ATTRS)
		return CUDA_ERROR_INVALID_VALUE;
	__typeof__(be_drv.cuOccupancyMaxActiveClusters) query =
		potential ? be_drv.cuOccupancyMaxPotentialClusterSize : be_drv.cuOccupancyMaxActiveClusters;
	if (!query)
		return CUDA_ERROR_NOT_SUPPORTED;
	CUlaunchAttribute at[BE_MAX_LAUNCH_ATTRS];
	unsigned n = (unsigned)(attrs_len / sizeof(CUlaunchAttribute));
	memcpy(at, attrs, attrs_len);
	for (unsigned i = 0; i < n; i++)
		if (!proto_launch_attr_travels(at[i].id))
			return CUDA_ERROR_NOT_SUPPORTED;
	CUlaunchConfig cfg = {
		.gridDimX = gx, .gridDimY = gy, .gridDimZ = gz,
		.blockDimX = bx, .blockDimY = by, .blockDimZ = bz,
		.sharedMemBytes = shmem, .attrs = n ? at : NULL, .numAttrs = n,
	};
	int v = 0;
	CUresult r = query(&v, fn, &cfg);
	if (r != CUDA_SUCCESS)
		return r;
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_i64(m, v);
	return be_reply_end(s, rq, m, NULL, 0);
}
