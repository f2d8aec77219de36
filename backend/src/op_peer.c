/*
 * Between the devices of one session (a server that serves several: --device
 * 0,1,... or all). The session holds a context on each in one process, so
 * device addresses are unique among them and the driver moves bytes between
 * them itself (NVLink or PCIe, as for a local program); peer access is the
 * driver's own too. Devices are indices among the server's devices, checked
 * here; the ranges are checked against the session's allocations.
 */
#include "backend.h"

#include <inttypes.h>

#include "ops.h"
#include "session.h"

static CUcontext peer_ctx(be_session *s, uint32_t dev)
{
	return dev < (uint32_t)be_srv.ngpu ? s->ctxs[dev] : NULL;
}

int be_op_memcpy_peer(be_session *s, be_req *rq, CUdeviceptr dst, uint32_t dst_dev, CUdeviceptr src, uint32_t src_dev,
		      uint64_t len, uint64_t stream_id, uint32_t sync)
{
	CUcontext dc = peer_ctx(s, dst_dev), sc = peer_ctx(s, src_dev);
	CUstream st;
	int err;

	if (!dc || !sc)
		return CUDA_ERROR_INVALID_DEVICE;
	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check(&s->ranges, dst, len))
		return be_bad_range(s, "memcpy_peer (dst)", dst, len);
	if (!be_ranges_check(&s->ranges, src, len))
		return be_bad_range(s, "memcpy_peer (src)", src, len);
	return sync ? be_drv.cuMemcpyPeer(dst, dc, src, sc, (size_t)len)
		    : be_drv.cuMemcpyPeerAsync(dst, dc, src, sc, (size_t)len, st);
}

int be_op_peer_access(be_session *s, be_req *rq, uint32_t peer, uint32_t enable, uint32_t flags)
{
	CUcontext pc = peer_ctx(s, peer);
	if (!pc)
		return CUDA_ERROR_INVALID_DEVICE;
	return enable ? be_drv.cuCtxEnablePeerAccess(pc, flags) : be_drv.cuCtxDisablePeerAccess(pc);
}
