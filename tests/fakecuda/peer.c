/*
 * Peer access and peer copies between the fake's devices: any two distinct
 * devices can access each other (cuDeviceCanAccessPeer says 1); a context
 * keeps the peer contexts it enabled, with the driver's errors (already
 * enabled, not enabled, own device, flags). cuMemcpyPeer(Async) checks each
 * side against its own context's allocations, then copies on the stream (of
 * the current context) like any copy.
 */
#include "fake.h"

#include <string.h>

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !canAccessPeer)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev || peerDev < 0 || peerDev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS)
		*canAccessPeer = dev != peerDev;
	return fk_end(rc, __func__, "%d, %d", dev, peerDev);
}

static int peer_find(const fk_ctx *c, uint64_t id)
{
	for (int i = 0; i < c->npeers; i++)
		if (c->peers[i] == id)
			return i;
	return -1;
}

static CUresult peer_access(fk_ctx *c, CUcontext peer, unsigned flags, int enable)
{
	fk_ctx *p = fk_handle_get(FK_H(peer), FK_CTX, NULL);
	if (!p)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (p->dev == c->dev)
		return CUDA_ERROR_INVALID_DEVICE;
	int i = peer_find(c, p->id);
	if (!enable) {
		if (i < 0)
			return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
		c->peers[i] = c->peers[--c->npeers];
		return CUDA_SUCCESS;
	}
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (i >= 0)
		return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
	if (c->npeers == FK_MAX_PEERS)
		return CUDA_ERROR_TOO_MANY_PEERS;
	c->peers[c->npeers++] = p->id;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = peer_access(c, peerContext, Flags, 1);
	return fk_end(rc, __func__, "%#llx, %u", (unsigned long long)FK_H(peerContext), Flags);
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = peer_access(c, peerContext, 0, 0);
	return fk_end(rc, __func__, "%#llx", (unsigned long long)FK_H(peerContext));
}

static CUresult peer_copy(fk_ctx *c, CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
			  CUstream h)
{
	fk_ctx *dc = fk_handle_get(FK_H(dctx), FK_CTX, NULL), *sc = fk_handle_get(FK_H(sctx), FK_CTX, NULL);
	if (!dc || !sc)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!fk_range_ok(dc, dst, n) || !fk_range_ok(sc, src, n))
		return CUDA_ERROR_INVALID_VALUE;
	/* Both sides checked against their own contexts: the copy itself runs
	 * as one between unchecked (host-like) addresses. */
	return fk_copy_submit(c, h, dst, 0, n, src, 0, n, n, 1);
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
			      CUcontext srcContext, size_t ByteCount)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = peer_copy(c, dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL);
	return fk_end(rc, __func__, "%#lx, %#lx, %zu", (unsigned long)dstDevice, (unsigned long)srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
				   CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = peer_copy(c, dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream);
	return fk_end(rc, __func__, "%#lx, %#lx, %zu, %p", (unsigned long)dstDevice, (unsigned long)srcDevice,
		      ByteCount, (void *)hStream);
}
