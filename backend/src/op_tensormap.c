/*
 * Tensor maps (CUtensorMap: TMA descriptors). Their 128 bytes are opaque and
 * undocumented, so the driver here encodes them and the client gets them as
 * they are: device addresses are the same on both ends, so a map is valid in
 * the client's kernels as it comes back. Nothing is kept: a map is a value.
 *
 * The client is not trusted: the arguments must fit the struct (a rank of at
 * most 5, so every array the driver reads lies inside it), and the tensor's
 * whole extent (its dimensions and strides from the global address) must lie
 * in the session's own memory; a new address for a map must be in it too (its
 * extent is in the opaque bytes, so only the address is checked). The driver
 * judges everything else. Driver functions it lacks (cuTensorMapEncodeIm2colWide
 * before CUDA 12.8): CUDA_ERROR_NOT_SUPPORTED.
 */
#include "backend.h"

#include <inttypes.h>
#include <string.h>

#include "ops.h"
#include "proto_tmap.h"

_Static_assert(sizeof(CUtensorMap) == PROTO_TMAP_BYTES, "a tensor map is 128 bytes");

static int encode(be_session *s, uint32_t kind, CUdeviceptr addr, const proto_tmap_params *p, CUtensorMap *map)
{
	void *ga = (void *)(uintptr_t)addr;
	uint32_t nd = p->rank;

	if (nd == 0 || nd > PROTO_TMAP_MAX_RANK)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t ext = proto_tmap_extent(p);
	if (ext == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!be_ranges_check(&s->ranges, addr, ext))
		return be_bad_range(s, "tensor_map_encode", addr, ext);
	switch (kind) {
	case PROTO_TMAP_TILED:
		return be_drv.cuTensorMapEncodeTiled(map, (CUtensorMapDataType)p->dtype, nd, ga, p->dim, p->stride,
						     p->box, p->estride, (CUtensorMapInterleave)p->interleave,
						     (CUtensorMapSwizzle)p->swizzle, (CUtensorMapL2promotion)p->l2,
						     (CUtensorMapFloatOOBfill)p->oob);
	case PROTO_TMAP_IM2COL:
		return be_drv.cuTensorMapEncodeIm2col(map, (CUtensorMapDataType)p->dtype, nd, ga, p->dim, p->stride,
						      p->lower, p->upper, p->channels, p->pixels, p->estride,
						      (CUtensorMapInterleave)p->interleave,
						      (CUtensorMapSwizzle)p->swizzle, (CUtensorMapL2promotion)p->l2,
						      (CUtensorMapFloatOOBfill)p->oob);
	case PROTO_TMAP_IM2COL_WIDE:
		if (!be_drv.cuTensorMapEncodeIm2colWide)
			return CUDA_ERROR_NOT_SUPPORTED;
		return be_drv.cuTensorMapEncodeIm2colWide(
			map, (CUtensorMapDataType)p->dtype, nd, ga, p->dim, p->stride, p->lower[0], p->upper[0],
			p->channels, p->pixels, p->estride, (CUtensorMapInterleave)p->interleave,
			(CUtensorMapIm2ColWideMode)p->mode, (CUtensorMapSwizzle)p->swizzle,
			(CUtensorMapL2promotion)p->l2, (CUtensorMapFloatOOBfill)p->oob);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

int be_op_tensor_map_encode(be_session *s, be_req *rq, uint32_t kind, CUdeviceptr addr, const void *params,
			    size_t params_len)
{
	CUtensorMap map; /* the driver wants it 64-byte aligned: the type is 128 */
	proto_tmap_params p;
	int r;

	if (kind == PROTO_TMAP_REPLACE) {
		if (params_len != sizeof(map))
			return BE_EPROTO;
		if (!be_ranges_check(&s->ranges, addr, 1))
			return be_bad_range(s, "tensor_map_encode (replace address)", addr, 1);
		if (!be_drv.cuTensorMapReplaceAddress)
			return CUDA_ERROR_NOT_SUPPORTED;
		memcpy(&map, params, sizeof(map));
		r = be_drv.cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)addr);
	} else {
		if (params_len != sizeof(p) || kind > PROTO_TMAP_IM2COL_WIDE)
			return BE_EPROTO;
		memcpy(&p, params, sizeof(p));
		if (!be_drv.cuTensorMapEncodeTiled || !be_drv.cuTensorMapEncodeIm2col)
			return CUDA_ERROR_NOT_SUPPORTED;
		memset(&map, 0, sizeof(map));
		r = encode(s, kind, addr, &p, &map);
	}
	if (r)
		return r;
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_bin(m, &map, sizeof(map));
	return be_reply_end(s, rq, m, NULL, 0);
}
