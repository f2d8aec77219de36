/*
 * Copies and memsets, the runtime's entry points: the kind of each side
 * resolved (cudaMemcpyDefault, managed memory), then the path: pinned memory
 * as a device side (host_ops.c), shm regions and the bounce buffer, devices of
 * another server (rt_peer.c), arrays (rt_array.c), or the connection's bytes
 * (copy_bytes.c: chunked, pipelined, striped).
 * Every device range is checked here first, so a bad pointer fails at the call,
 * as with CUDA; the server checks again, trusting nothing.
 */
#include <string.h>

#include "managed.h"
#include "rpc.h"
#include "rt.h"

int fe_symbol_lookup(const void *symbol, uint64_t *dptr, uint64_t *size); /* rt_module.c */

/* A memset or device-to-device copy on a capturing stream is recorded, not run,
 * and the driver records one whose range is no allocation (yet) as asked: XLA
 * traces library calls into graphs and sets the real addresses later. So it is
 * not refused here (pinned host memory aside: host_ops.c); the server records
 * it and keeps execs of that graph from launching (backend/src/op_capture.c). */
int fe_mem_captured(const void *p, size_t len, uint64_t sid)
{
	return !fe_host_pinned(p, len) && fe_stream_capturing(sid);
}

/* Managed memory is copied on the device side whatever the kind says (as
 * CUDA does): its host pages may be stale or inaccessible (managed.c). */
/* A copy sends host bytes when it is called; pinned memory that work still
 * pending on the client will write (a stream-ordered fill or copy, host_ops.c,
 * or a copy from the device landing later) is read once the stream has done
 * that work. Costs two loads when nothing is pending. */
static cudaError_t settle_source(fe_conn *c, const void *src, size_t n, cudaStream_t stream)
{
	if (!fe_host_pending() && !fe_conn_detached_pending(c))
		return cudaSuccess;
	return fe_host_pinned(src, n) ? cudaStreamSynchronize(stream) : cudaSuccess;
}

/* A synchronous copy or memset whose destination is mapped host memory (a
 * managed allocation here: its device side is written, async on the wire)
 * returns once it is done, as CUDA's does for pinned host memory: the host
 * may read the bytes next, and that read's copy back (op managed_fetch) is
 * served outside the server's executor, in no order with queued work. */
int fe_copy_settle_mapped(fe_conn *c, const void *dst, uint64_t sid, int async, int st)
{
	if (st == 0 && !async && fe_managed_mapped_host(dst, 0))
		st = fe_rpc_stream_sync(c, sid);
	return st;
}

static enum cudaMemcpyKind resolve_kind(void *dst, const void *src, enum cudaMemcpyKind kind)
{
	if (kind != cudaMemcpyDefault && !fe_managed_any())
		return kind;
	int dk = fe_mem_kind(dst), sk = fe_mem_kind(src);
	if (kind != cudaMemcpyDefault && dk != FE_MEM_MANAGED && sk != FE_MEM_MANAGED)
		return kind;
	int d = fe_mem_kind_device(dk), s = fe_mem_kind_device(sk);
	return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
		 : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

static cudaError_t memcpy_common(fe_api_site site, void *dst, const void *src, size_t count,
				 enum cudaMemcpyKind kind, cudaStream_t stream, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (count == 0)
		return cudaSuccess;
	if (!dst || !src)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t sid = fe_rt_stream(stream);
	int st;
	switch (resolve_kind(dst, src, kind)) {
	case cudaMemcpyHostToHost:
		if (fe_host_pinned(dst, count) || fe_host_pinned(src, count)) /* in stream order */
			return fe_host_copy(dst, src, count, stream, !async);
		memmove(dst, src, count);
		return cudaSuccess;
	case cudaMemcpyHostToDevice:
		if (!fe_mem_device_ok(dst, count)) {
			if (fe_host_pinned(dst, count)) /* pinned memory as the device side: host_ops.c */
				return fe_host_copy(dst, src, count, stream, !async);
			return fe_rt_fail(cudaErrorInvalidValue);
		}
		if ((e = settle_source(c, src, count, stream)) != cudaSuccess)
			return e;
		/* pinned memory the server maps: no bytes through the rings; but a
		 * small synchronous copy is cheaper as bytes in a frame, which
		 * returns once sent (as over tcp) where the region copy waits */
		if ((async || count >= fe_region_sync_min()) && fe_region_copy(c, 1, (uintptr_t)dst, src, count, sid, async, &st))
			return fe_rt_leave(st);
		if (!async && fe_bounce_copy(c, 1, (uintptr_t)dst, (void *)src, count, sid, &st))
			return fe_rt_leave(st); /* pageable over shm: one memcpy, into a region */
		return fe_rt_leave(fe_copy_settle_mapped(c, dst, sid, async, fe_copy_htod(c, (uintptr_t)dst, src, count, sid)));
	case cudaMemcpyDeviceToHost:
		if (!fe_mem_device_ok(src, count)) {
			if (fe_host_pinned(src, count))
				return fe_host_copy(dst, src, count, stream, !async);
			return fe_rt_fail(cudaErrorInvalidValue);
		}
		if (fe_region_copy(c, 0, (uintptr_t)src, dst, count, sid, async, &st))
			return fe_rt_leave(st);
		if (!async && fe_bounce_copy(c, 0, (uintptr_t)src, dst, count, sid, &st))
			return fe_rt_leave(st);
		return fe_rt_leave(fe_copy_dtoh(c, dst, (uintptr_t)src, count, sid, async));
	case cudaMemcpyDeviceToDevice: {
		fe_range rd, rs;
		if (fe_mem_find((uintptr_t)dst, count, &rd) != 0 || !fe_mem_kind_device(rd.kind) ||
		    fe_mem_find((uintptr_t)src, count, &rs) != 0 || !fe_mem_kind_device(rs.kind)) {
			/* a pinned side: the direction it really is (host_ops.c) */
			int dh = fe_host_pinned(dst, count), sh = fe_host_pinned(src, count);
			if (dh && sh)
				return fe_host_copy(dst, src, count, stream, !async);
			if (dh && fe_mem_device_ok(src, count))
				return fe_rt_leave(fe_copy_dtoh(c, dst, (uintptr_t)src, count, sid, async));
			if (sh && fe_mem_device_ok(dst, count)) {
				if ((e = settle_source(c, src, count, stream)) != cudaSuccess)
					return e;
				return fe_rt_leave(fe_copy_htod(c, (uintptr_t)dst, src, count, sid));
			}
			if (!dh && !sh && fe_stream_capturing(sid)) /* recorded as asked */
				return fe_rt_leave(fe_rpc_memcpy_dtod(c, (uintptr_t)dst, (uintptr_t)src, count, sid));
			return fe_rt_fail(cudaErrorInvalidValue);
		}
		int cur = fe_rt_current_device();
		if (rd.device != cur || rs.device != cur) /* another device's memory (rt_peer.c) */
			return fe_peer_copy(site, dst, rd.device, src, rs.device, count, stream, async);
		return fe_rt_leave(
			fe_copy_settle_mapped(c, dst, sid, async, fe_rpc_memcpy_dtod(c, (uintptr_t)dst, (uintptr_t)src, count, sid)));
	}
	default:
		return fe_rt_fail(cudaErrorInvalidMemcpyDirection);
	}
}
/* Counted under the entry point that called it (stats.h). */
#define memcpy_common(...) memcpy_common(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return memcpy_common(dst, src, count, kind, 0, 0);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy_common(dst, src, count, kind, stream, 1);
}

/* 2D: the host side travels packed (rows of width bytes back to back). */
static cudaError_t memcpy2d_common(fe_api_site site, void *dst, size_t dpitch, const void *src, size_t spitch,
				   size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (width == 0 || height == 0)
		return cudaSuccess;
	if (width > dpitch || width > spitch || !dst || !src)
		return fe_rt_fail(cudaErrorInvalidPitchValue);
	size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
	uint64_t sid = fe_rt_stream(stream);
	int st;
	switch (resolve_kind(dst, src, kind)) {
	case cudaMemcpyHostToHost:
		for (size_t y = 0; y < height; y++)
			memmove((uint8_t *)dst + y * dpitch, (const uint8_t *)src + y * spitch, width);
		return cudaSuccess;
	case cudaMemcpyHostToDevice: {
		if (!fe_mem_device_ok(dst, dspan))
			return fe_rt_fail(cudaErrorInvalidValue);
		const uint8_t *packed = src;
		uint8_t *tmp = NULL;
		if (spitch != width) {
			if (!(tmp = malloc(width * height)))
				return fe_rt_fail(cudaErrorMemoryAllocation);
			for (size_t y = 0; y < height; y++)
				memcpy(tmp + y * width, (const uint8_t *)src + y * spitch, width);
			packed = tmp;
		}
		st = fe_rpc_memcpy_2d_htod(c, (uintptr_t)dst, dpitch, width, height, sid, packed, width * height);
		free(tmp);
		return fe_rt_leave(st);
	}
	case cudaMemcpyDeviceToHost: {
		if (!fe_mem_device_ok(src, sspan))
			return fe_rt_fail(cudaErrorInvalidValue);
		uint8_t *tmp = dpitch == width ? dst : malloc(width * height);
		if (!tmp)
			return fe_rt_fail(cudaErrorMemoryAllocation);
		/* Unpacking needs the data here: a pitched async D2H waits. */
		st = fe_rpc_memcpy_2d_dtoh(c, (uintptr_t)src, spitch, width, height, sid, tmp, width * height);
		if (tmp != dst) {
			if (st == 0)
				for (size_t y = 0; y < height; y++)
					memcpy((uint8_t *)dst + y * dpitch, tmp + y * width, width);
			free(tmp);
		}
		(void)async;
		return fe_rt_leave(st);
	}
	case cudaMemcpyDeviceToDevice:
		if (!fe_mem_device_ok(dst, dspan) || !fe_mem_device_ok(src, sspan))
			return fe_rt_fail(cudaErrorInvalidValue);
		return fe_rt_leave(fe_rpc_memcpy_2d_dtod(c, (uintptr_t)dst, dpitch, (uintptr_t)src, spitch, width,
							 height, sid));
	default:
		return fe_rt_fail(cudaErrorInvalidMemcpyDirection);
	}
}
/* Counted under the entry point that called it (stats.h). */
#define memcpy2d_common(...) memcpy2d_common(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			 enum cudaMemcpyKind kind)
{
	return memcpy2d_common(dst, dpitch, src, spitch, width, height, kind, 0, 0);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			      size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy2d_common(dst, dpitch, src, spitch, width, height, kind, stream, 1);
}

static cudaError_t symbol_addr(const void *symbol, size_t count, size_t offset, void **out)
{
	uint64_t dptr, size;
	cudaError_t e = (cudaError_t)fe_symbol_lookup(symbol, &dptr, &size);
	if (e != cudaSuccess)
		return e;
	if (offset > size || count > size - offset)
		return cudaErrorInvalidValue;
	*out = (void *)(uintptr_t)(dptr + offset);
	return cudaSuccess;
}

/* A copy to or from a __device__ variable: its address on the device, then an
 * ordinary copy. */
static cudaError_t symbol_copy(fe_api_site site, const void *symbol, void *host, size_t count, size_t offset,
			       enum cudaMemcpyKind kind, cudaStream_t stream, int async, int to_symbol)
{
	void *dev;
	cudaError_t e = symbol_addr(symbol, count, offset, &dev);
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	return to_symbol ? (memcpy_common)(site, dev, host, count, kind, stream, async)
			 : (memcpy_common)(site, host, dev, count, kind, stream, async);
}
/* Statistics name the entry point, not this helper. */
#define symbol_copy(...) symbol_copy(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
			       enum cudaMemcpyKind kind)
{
	return symbol_copy(symbol, (void *)src, count, offset, kind, 0, 0, 1);
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
				 enum cudaMemcpyKind kind)
{
	return symbol_copy(symbol, dst, count, offset, kind, 0, 0, 0);
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
				    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy(symbol, (void *)src, count, offset, kind, stream, 1, 1);
}

cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
				      enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy(symbol, dst, count, offset, kind, stream, 1, 0);
}

cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
	uint64_t dptr, size;
	cudaError_t e = (cudaError_t)fe_symbol_lookup(symbol, &dptr, &size);
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	*devPtr = (void *)(uintptr_t)dptr;
	return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
	uint64_t dptr, sz;
	cudaError_t e = (cudaError_t)fe_symbol_lookup(symbol, &dptr, &sz);
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	*size = sz;
	return cudaSuccess;
}

static cudaError_t memset_common(fe_api_site site, void *p, int value, size_t count, cudaStream_t stream, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (count == 0)
		return cudaSuccess;
	if (!fe_mem_device_ok(p, count) && !fe_mem_captured(p, count, fe_rt_stream(stream))) {
		if (fe_host_pinned(p, count))
			return fe_host_memset(p, count, (uint8_t)value, 1, count, 1, stream, !async);
		return fe_rt_fail(cudaErrorInvalidValue);
	}
	uint64_t sid = fe_rt_stream(stream);
	return fe_rt_leave(fe_copy_settle_mapped(c, p, sid, async, fe_rpc_memset(c, (uintptr_t)p, (uint8_t)value, 1, count, sid)));
}
/* Counted under the entry point that called it (stats.h). */
#define memset_common(...) memset_common(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemset(void *devPtr, int value, size_t count) { return memset_common(devPtr, value, count, 0, 0); }

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return memset_common(devPtr, value, count, stream, 1);
}

static cudaError_t memset2d_common(fe_api_site site, void *p, size_t pitch, int value, size_t width, size_t height,
				   cudaStream_t s, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (width == 0 || height == 0)
		return cudaSuccess;
	if (width > pitch)
		return fe_rt_fail(cudaErrorInvalidPitchValue);
	if (!fe_mem_device_ok(p, pitch * (height - 1) + width) &&
	    !fe_mem_captured(p, pitch * (height - 1) + width, fe_rt_stream(s))) {
		if (fe_host_pinned(p, pitch * (height - 1) + width))
			return fe_host_memset(p, pitch, (uint8_t)value, 1, width, height, s, !async);
		return fe_rt_fail(cudaErrorInvalidValue);
	}
	uint64_t sid = fe_rt_stream(s);
	return fe_rt_leave(
		fe_copy_settle_mapped(c, p, sid, async, fe_rpc_memset_2d(c, (uintptr_t)p, pitch, (uint8_t)value, 1, width, height, sid)));
}
/* Counted under the entry point that called it (stats.h). */
#define memset2d_common(...) memset2d_common(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
	return memset2d_common(devPtr, pitch, value, width, height, 0, 0);
}

cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
			      cudaStream_t stream)
{
	return memset2d_common(devPtr, pitch, value, width, height, stream, 1);
}

/* ---- 3D: linear (pitched) memory as depth slices of 2D copies; arrays in rt_array.c ---- */

static char *slice(struct cudaPitchedPtr p, struct cudaPos pos, size_t z)
{
	return (char *)p.ptr + (pos.z + z) * p.pitch * p.ysize + pos.y * p.pitch + pos.x;
}

static cudaError_t memcpy3d(fe_api_site site, const struct cudaMemcpy3DParms *m, cudaStream_t stream, int async)
{
	if (!m)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (m->srcArray || m->dstArray)
		return fe_memcpy3d_array(site, m, stream);
	/* For linear memory, extent.width and pos.x are bytes. */
	struct cudaExtent e = m->extent;
	if (e.width > m->srcPtr.pitch || e.width > m->dstPtr.pitch || (e.depth > 1 && (e.height > m->srcPtr.ysize ||
	    e.height > m->dstPtr.ysize)))
		return fe_rt_fail(cudaErrorInvalidValue);
	for (size_t z = 0; z < e.depth; z++) {
		cudaError_t r = async ? cudaMemcpy2DAsync(slice(m->dstPtr, m->dstPos, z), m->dstPtr.pitch,
							 slice(m->srcPtr, m->srcPos, z), m->srcPtr.pitch, e.width,
							 e.height, m->kind, stream)
				      : cudaMemcpy2D(slice(m->dstPtr, m->dstPos, z), m->dstPtr.pitch,
						     slice(m->srcPtr, m->srcPos, z), m->srcPtr.pitch, e.width, e.height,
						     m->kind);
		if (r != cudaSuccess)
			return r;
	}
	return cudaSuccess;
}

/* Counted under the entry point that called it (stats.h). */
#define memcpy3d(...) memcpy3d(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p) { return memcpy3d(p, 0, 0); }

cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
	return memcpy3d(p, stream, 1);
}

static cudaError_t memset3d(struct cudaPitchedPtr p, int value, struct cudaExtent e, cudaStream_t stream, int async)
{
	if (e.width > p.pitch || (e.depth > 1 && e.height > p.ysize))
		return fe_rt_fail(cudaErrorInvalidValue);
	struct cudaPos origin = {0, 0, 0};
	for (size_t z = 0; z < e.depth; z++) {
		cudaError_t r = async ? cudaMemset2DAsync(slice(p, origin, z), p.pitch, value, e.width, e.height, stream)
				      : cudaMemset2D(slice(p, origin, z), p.pitch, value, e.width, e.height);
		if (r != cudaSuccess)
			return r;
	}
	return cudaSuccess;
}

cudaError_t cudaMemset3D(struct cudaPitchedPtr p, int value, struct cudaExtent e) { return memset3d(p, value, e, 0, 0); }

cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr p, int value, struct cudaExtent e, cudaStream_t stream)
{
	return memset3d(p, value, e, stream, 1);
}
