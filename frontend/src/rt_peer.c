/*
 * Between devices: peer access and peer copies. Devices of one server are one
 * session there, a context each in one process (backend/src/op_peer.c): the
 * server's driver says which may access which (the hello brings its answers,
 * kept in fe_device.peers), enables access, and copies between them itself,
 * over NVLink or PCIe as for a local program. Devices of two servers cannot
 * reach each other's memory: access is refused, and a copy between them goes
 * from server to server (backend/src/peer.h): the destination's server gives
 * a ticket for the range, the source's server pushes its range there with it;
 * the caller waits for the push's reply, after which the bytes are on the
 * destination's device. Where the source's server cannot reach the
 * destination's (or either cannot do it), the copy goes through this process
 * instead (read from one, written to the other, in chunks): the slow path,
 * logged once.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

/* Whether device dev can access peer's memory: the server's driver's answer
 * for two devices of one server, no for any other pair. */
static int can_access(int dev, int peer)
{
	fe_device *d = fe_rt_device(dev), *p = fe_rt_device(peer);
	return d && p && dev != peer && fe_rt_same_server(dev, peer) && (d->peers >> p->remote & 1);
}

int fe_peer_can(int dev, int peer) { return can_access(dev, peer); }

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	cudaError_t e = fe_rt_init();
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	if (!fe_rt_device(device) || !fe_rt_device(peer))
		return fe_rt_fail(cudaErrorInvalidDevice);
	if (!can)
		return fe_rt_fail(cudaErrorInvalidValue);
	*can = can_access(device, peer);
	return cudaSuccess;
}

cudaError_t fe_peer_access(int dev, int peer, int enable, unsigned flags)
{
	fe_conn *c;
	int cur = fe_rt_current_device();
	if (dev != cur)
		fe_rt_set_current_device(dev);
	cudaError_t e = fe_rt_enter(&c);
	if (dev != cur)
		fe_rt_set_current_device(cur);
	if (e != cudaSuccess)
		return e;
	if (!fe_rt_device(peer))
		return fe_rt_fail(cudaErrorInvalidDevice);
	/* Its own device: peer access unsupported to enable (measured on an H100,
	 * where the documentation says invalid device). */
	if (peer == dev)
		return fe_rt_fail(enable ? cudaErrorPeerAccessUnsupported : cudaErrorInvalidDevice);
	if (enable && flags != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!can_access(dev, peer))
		return fe_rt_fail(enable ? cudaErrorPeerAccessUnsupported : cudaErrorPeerAccessNotEnabled);
	return fe_rt_leave(fe_rpc_peer_access(c, (uint32_t)fe_rt_device(peer)->remote, enable != 0, flags));
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
	return fe_peer_access(fe_rt_current_device(), peer, 1, flags);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
	return fe_peer_access(fe_rt_current_device(), peer, 0, 0);
}

/* Through this process, for devices of two servers: each chunk read from the
 * source's server (after the work before it on that device's NULL stream) and
 * written to the destination's, in order on its NULL stream. */
#define STAGE_CHUNK (4u << 20)

static int staged_copy(fe_device *dd, uint64_t dst, fe_device *sd, uint64_t src, size_t n)
{
	size_t cap = n < STAGE_CHUNK ? n : STAGE_CHUNK;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	int st = 0;
	for (size_t off = 0; off < n && st == 0; off += cap) {
		size_t k = n - off < cap ? n - off : cap;
		st = fe_copy_dtoh(sd->conn, buf, src + off, k, 0, 0);
		if (st == 0) /* the payload has left buf when this returns */
			st = fe_copy_htod(dd->conn, dst + off, buf, k, 0);
	}
	free(buf);
	return st;
}

/* Server to server: 1 when tried (the copy's status in *st), 0 when it could
 * not be (no peer listener on dd's server, dd not on tcp or tls, or sd's
 * server could not connect to it): the caller stages. */
static _Atomic uint64_t staged_pairs[FE_MAX_DEVICES]; /* [source server] bit destination server: stage */

static int direct_copy(fe_device *dd, uint64_t dst, uint64_t dsid, fe_device *sd, uint64_t src, uint64_t ssid,
		       size_t n, int *st)
{
	uint8_t t[16];
	uint32_t port = 0, reached = 0;
	uint64_t bit = 1ull << dd->first;

	if (atomic_load(&staged_pairs[sd->first]) & bit)
		return 0;
	if (strcmp(dd->addr.scheme, "tcp") && strcmp(dd->addr.scheme, "tls"))
		goto stage;
	int r = fe_rpc_peer_ticket(dd->conn, dst, n, dsid, t, sizeof(t), &port);
	if (r == CUDA_ERROR_OUT_OF_MEMORY)
		return 0; /* its tickets are all out now: this once */
	if (r == CUDA_ERROR_NOT_SUPPORTED)
		goto stage;
	if (r == 0)
		r = fe_rpc_peer_push(sd->conn, src, n, ssid, t, sizeof(t), dd->addr.scheme, dd->addr.host, port, &reached);
	if ((r == 0 && !reached) || r == CUDA_ERROR_NOT_SUPPORTED)
		goto stage; /* (the ticket goes unused: it expires) */
	*st = r;
	return 1;
stage: /* from now on for this pair of servers */
	atomic_fetch_or(&staged_pairs[sd->first], bit);
	return 0;
}

cudaError_t fe_peer_copy(fe_api_site site, void *dst, int dstdev, const void *src, int srcdev, size_t n,
			 cudaStream_t stream, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	fe_device *dd = fe_rt_device(dstdev), *sd = fe_rt_device(srcdev);
	if (!dd || !sd)
		return fe_rt_fail(cudaErrorInvalidDevice);
	if (n == 0)
		return cudaSuccess;
	if (!dst || !src || !fe_mem_device_ok(dst, n) || !fe_mem_device_ok(src, n))
		return fe_rt_fail(cudaErrorInvalidValue);
	/* The stream is the current device's: where that device is one end of a
	 * copy between two servers, that end runs in its order, the other on its
	 * NULL stream (a stream belongs to its device's context). */
	int cur = fe_rt_current_device();
	uint64_t sid = fe_rt_stream(stream);
	if (!fe_rt_same_server(dstdev, srcdev)) {
		int st;
		uint64_t dsid = cur == dstdev ? sid : 0, ssid = cur == srcdev ? sid : 0;
		if (direct_copy(dd, (uintptr_t)dst, dsid, sd, (uintptr_t)src, ssid, n, &st))
			return fe_rt_leave(st);
		rg_log_once("frontend", "staged through the client (the servers cannot copy to each other)",
			    "copies between devices of two servers");
		return fe_rt_leave(staged_copy(dd, (uintptr_t)dst, sd, (uintptr_t)src, n));
	}
	/* On the current device's session when it is theirs; else on the
	 * destination's, its NULL stream. */
	if (!fe_rt_same_server(cur, dstdev)) {
		c = dd->conn;
		sid = 0;
	}
	return fe_rt_leave(fe_rpc_memcpy_peer(c, (uintptr_t)dst, (uint32_t)dd->remote, (uintptr_t)src,
					      (uint32_t)sd->remote, n, sid, !async));
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	return fe_peer_copy(FE_API_SITE, dst, dstDevice, src, srcDevice, count, 0, 0);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
				cudaStream_t stream)
{
	return fe_peer_copy(FE_API_SITE, dst, dstDevice, src, srcDevice, count, stream, 1);
}
