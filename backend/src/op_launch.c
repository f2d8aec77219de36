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

static int attr_allowed(CUlaunchAttributeID id)
{
	switch ((int)id) {
	case CU_LAUNCH_ATTRIBUTE_IGNORE:
	case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
	case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
	case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
	case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
	case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
	case CU_LAUNCH_ATTRIBUTE_PRIORITY:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
	case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
	case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
	case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
		return 1;
	default:
		return 0;
	}
}

int be_op_launch(be_session *s, be_req *rq, uint64_t f_id, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx,
		 uint32_t by, uint32_t bz, uint32_t shmem, uint64_t stream_id, const void *params, size_t params_len,
		 const void *attrs, size_t attrs_len)
{
	CUfunction fn;
	CUstream st;
	void *o;
	uint64_t psize;
	int err;

	if (be_htab_get(&s->funcs, f_id, &o, &psize) != BE_H_OK)
		return be_get_func(s, f_id, &fn); /* logs and answers INVALID_HANDLE */
	fn = o;
	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (params_len != psize) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": launch of function %" PRIu64 " with %zu bytes of arguments, it "
			 "takes %" PRIu64, s->id, f_id, params_len, psize);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (attrs_len % sizeof(CUlaunchAttribute) || attrs_len / sizeof(CUlaunchAttribute) > BE_MAX_LAUNCH_ATTRS) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": launch attributes of %zu bytes", s->id, attrs_len);
		return CUDA_ERROR_INVALID_VALUE;
	}

	/* Parameters and attributes sit at arbitrary offsets in the message:
	 * copy them to aligned memory. */
	_Alignas(16) unsigned char argbuf[4096];
	unsigned char *args = argbuf;
	if (params_len > sizeof(argbuf) && !(args = malloc(params_len)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (params_len)
		memcpy(args, params, params_len);
	size_t len = params_len;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &len, CU_LAUNCH_PARAM_END};
	void **ex = params_len ? extra : NULL; /* a kernel without parameters needs no buffer */
	CUresult r;

	if (attrs_len == 0) {
		r = be_drv.cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shmem, st, NULL, ex);
	} else {
		CUlaunchAttribute at[BE_MAX_LAUNCH_ATTRS];
		unsigned n = (unsigned)(attrs_len / sizeof(CUlaunchAttribute));
		memcpy(at, attrs, attrs_len);
		r = CUDA_SUCCESS;
		for (unsigned i = 0; i < n; i++) {
			if (!attr_allowed(at[i].id)) {
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
			r = be_drv.cuLaunchKernelEx(&cfg, fn, NULL, ex);
		}
	}
	if (args != argbuf)
		free(args);
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
