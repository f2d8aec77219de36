/* Driver API: copies and memsets. A linear copy is the runtime layer's copy in
 * the direction the entry point names (cuMemcpy: found from the pointers, as
 * cudaMemcpyDefault does), so pageable and pinned memory, chunking and the
 * detached async copies to the host (rt_copy.c) are the same. 2D and 3D
 * descriptors become the runtime's; memsets of 16- and 32-bit elements go out
 * as the wire's memsets with their element size. */
#include <stdint.h>

#include "drv.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

#define PTR(d) ((void *)(uintptr_t)(d))
#define STREAM(s) ((cudaStream_t)(s))

/* ---- linear ---- */

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return FE_DRV(cudaMemcpy(PTR(dst), PTR(src), ByteCount, cudaMemcpyDefault));
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return FE_DRV(cudaMemcpyAsync(PTR(dst), PTR(src), ByteCount, cudaMemcpyDefault, STREAM(hStream)));
}

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return FE_DRV(cudaMemcpy(PTR(dstDevice), srcHost, ByteCount, cudaMemcpyHostToDevice));
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return FE_DRV(cudaMemcpy(dstHost, PTR(srcDevice), ByteCount, cudaMemcpyDeviceToHost));
}

CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return FE_DRV(cudaMemcpy(PTR(dstDevice), PTR(srcDevice), ByteCount, cudaMemcpyDeviceToDevice));
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
	return FE_DRV(cudaMemcpyAsync(PTR(dstDevice), srcHost, ByteCount, cudaMemcpyHostToDevice, STREAM(hStream)));
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
	return FE_DRV(cudaMemcpyAsync(dstHost, PTR(srcDevice), ByteCount, cudaMemcpyDeviceToHost, STREAM(hStream)));
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
	return FE_DRV(cudaMemcpyAsync(PTR(dstDevice), PTR(srcDevice), ByteCount, cudaMemcpyDeviceToDevice,
				      STREAM(hStream)));
}

/* Between contexts: rt_peer.c (NULL names the current context). */
static CUresult peer_copy(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s,
			  int async)
{
	int cur = fe_rt_current_device();
	int dd = dctx ? fe_drv_dev_of(dctx) : cur, sd = sctx ? fe_drv_dev_of(sctx) : cur;
	if (dd < 0 || sd < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return FE_DRV(fe_peer_copy(FE_API_SITE, PTR(dst), dd, PTR(src), sd, n, STREAM(s), async));
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
		      size_t ByteCount)
{
	return peer_copy(dstDevice, dstContext, srcDevice, srcContext, ByteCount, 0, 0);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
			   size_t ByteCount, CUstream hStream)
{
	return peer_copy(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 1);
}

/* ---- 2D and 3D: the driver's descriptors as the runtime's ---- */

/* One linear side of a copy descriptor: p is the first byte of the box (its
 * x, y and z applied). */
typedef struct side {
	CUmemorytype type;
	char *p;
	size_t pitch, height;
	size_t x, y, z;
} side;

static CUresult side_of(side *s, CUmemorytype type, const void *host, CUdeviceptr dev, size_t pitch, size_t height,
			size_t x, size_t y, size_t z)
{
	*s = (side){.type = type, .pitch = pitch, .height = height, .x = x, .y = y, .z = z};
	const char *base;
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		base = host;
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		base = PTR(dev);
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	size_t off;
	/* (z * height + y) * pitch + x, refused where it wraps: a wrapped offset
	 * could land in another allocation and pass the range checks */
	if (!base || __builtin_mul_overflow(z, height, &off) || __builtin_add_overflow(off, y, &off) ||
	    __builtin_mul_overflow(off, pitch, &off) || __builtin_add_overflow(off, x, &off) ||
	    (uintptr_t)base > UINTPTR_MAX - off)
		return CUDA_ERROR_INVALID_VALUE;
	s->p = (char *)base + off;
	return CUDA_SUCCESS;
}

/* A linear side of a w x h x d box: its rows within its pitch, its slices
 * within its height, the pitch within the device's limit. One row has no
 * pitch to check (as on an H100). */
static int side_fits(const side *s, size_t w, size_t h, size_t d)
{
	if (h == 1 && d == 1)
		return 1;
	fe_device *dev = fe_rt_device(fe_rt_current_device());
	int max = dev ? dev->attrs[CU_DEVICE_ATTRIBUTE_MAX_PITCH] : 0;
	return s->pitch >= w && s->x <= s->pitch - w && (max <= 0 || s->pitch <= (size_t)max) &&
	       (d <= 1 || (s->height >= h && s->y <= s->height - h));
}

/* The runtime's kind: unified memory is found from the pointer. */
static enum cudaMemcpyKind kind_of(const side *dst, const side *src)
{
	if (dst->type == CU_MEMORYTYPE_UNIFIED || src->type == CU_MEMORYTYPE_UNIFIED)
		return cudaMemcpyDefault;
	int d = dst->type != CU_MEMORYTYPE_HOST, s = src->type != CU_MEMORYTYPE_HOST;
	return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
		 : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

/* Linear memory on both sides (array sides go to drv_array.c). */
static CUresult copy_box(side *dst, side *src, size_t w, size_t h, size_t d, CUstream stream, int async)
{
	if (w == 0 || h == 0 || d == 0)
		return CUDA_SUCCESS;
	if (!side_fits(dst, w, h, d) || !side_fits(src, w, h, d))
		return CUDA_ERROR_INVALID_VALUE;
	if (h == 1 && d == 1) { /* what the runtime layer checks the width against */
		dst->pitch = w;
		src->pitch = w;
	}
	struct cudaMemcpy3DParms p = {0};
	p.kind = kind_of(dst, src);
	if (d == 1)
		return async ? FE_DRV(cudaMemcpy2DAsync(dst->p, dst->pitch, src->p, src->pitch, w, h, p.kind,
							STREAM(stream)))
			     : FE_DRV(cudaMemcpy2D(dst->p, dst->pitch, src->p, src->pitch, w, h, p.kind));
	p.srcPtr = (struct cudaPitchedPtr){src->p, src->pitch, w, src->height};
	p.dstPtr = (struct cudaPitchedPtr){dst->p, dst->pitch, w, dst->height};
	p.extent = (struct cudaExtent){w, h, d};
	return async ? FE_DRV(cudaMemcpy3DAsync(&p, STREAM(stream))) : FE_DRV(cudaMemcpy3D(&p));
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream stream, int async)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return fe_drv_copy_array_2d(c, async ? stream : 0);
	side s, d;
	CUresult r = side_of(&s, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcPitch, 0,
			     c->srcXInBytes, c->srcY, 0);
	if (r == CUDA_SUCCESS)
		r = side_of(&d, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstPitch, 0,
			    c->dstXInBytes, c->dstY, 0);
	if (r != CUDA_SUCCESS)
		return r;
	return copy_box(&d, &s, c->WidthInBytes, c->Height, 1, stream, async);
}

/* The pitch rules cuMemcpy2D adds to cuMemcpy2DUnaligned's concern only how
 * a GPU's copy engines take them: the server's driver applies them or not. */
CUresult cuMemcpy2D(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy, 0, 0); }
CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy, 0, 0); }
CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D *pCopy, CUstream hStream) { return copy2d(pCopy, hStream, 1); }

/* srcLOD, dstLOD and the reserved pointers are ignored, as the driver ignores
 * them for these memory kinds (measured on an H100). */
static CUresult copy3d(const CUDA_MEMCPY3D *m, CUstream stream, int async)
{
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	if (m->srcMemoryType == CU_MEMORYTYPE_ARRAY || m->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return fe_drv_copy_array_3d(m, async ? stream : 0);
	side s, d;
	CUresult r = side_of(&s, m->srcMemoryType, m->srcHost, m->srcDevice, m->srcPitch, m->srcHeight,
			     m->srcXInBytes, m->srcY, m->srcZ);
	if (r == CUDA_SUCCESS)
		r = side_of(&d, m->dstMemoryType, m->dstHost, m->dstDevice, m->dstPitch, m->dstHeight,
			    m->dstXInBytes, m->dstY, m->dstZ);
	if (r != CUDA_SUCCESS)
		return r;
	return copy_box(&d, &s, m->WidthInBytes, m->Height, m->Depth, stream, async);
}

CUresult cuMemcpy3D(const CUDA_MEMCPY3D *pCopy) { return copy3d(pCopy, 0, 0); }
CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D *pCopy, CUstream hStream) { return copy3d(pCopy, hStream, 1); }

/* ---- memsets: elements of 1, 2 or 4 bytes, on naturally aligned addresses ---- */

static cudaError_t memset_1d(fe_api_site site, CUdeviceptr dst, uint32_t value, uint32_t elem, size_t n,
			     CUstream stream, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (n == 0)
		return cudaSuccess;
	if (dst % elem || n > SIZE_MAX / elem)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!fe_mem_device_ok(PTR(dst), n * elem) && !fe_mem_captured(PTR(dst), n * elem, fe_rt_stream(STREAM(stream)))) {
		if (fe_host_pinned(PTR(dst), n * elem))
			return fe_host_memset(PTR(dst), n * elem, value, elem, n, 1, STREAM(stream), !async);
		return fe_rt_fail(cudaErrorInvalidValue);
	}
	uint64_t sid = fe_rt_stream(STREAM(stream));
	return fe_rt_leave(fe_copy_settle_mapped(c, PTR(dst), sid, async, fe_rpc_memset(c, dst, value, elem, n, sid)));
}
/* Counted under the entry point that called it (stats.h). */
#define memset_1d(...) FE_DRV(memset_1d(FE_API_SITE, __VA_ARGS__))

/* width in elements */
static cudaError_t memset_2d(fe_api_site site, CUdeviceptr dst, size_t pitch, uint32_t value, uint32_t elem,
			     size_t width, size_t height, CUstream stream, int async)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (width == 0 || height == 0)
		return cudaSuccess;
	if (dst % elem || pitch % elem || width > pitch / elem ||
	    (height > 1 && pitch > (SIZE_MAX - width * elem) / (height - 1)))
		return fe_rt_fail(cudaErrorInvalidValue);
	size_t span = pitch * (height - 1) + width * elem;
	if (!fe_mem_device_ok(PTR(dst), span) && !fe_mem_captured(PTR(dst), span, fe_rt_stream(STREAM(stream)))) {
		if (fe_host_pinned(PTR(dst), span))
			return fe_host_memset(PTR(dst), pitch, value, elem, width, height, STREAM(stream), !async);
		return fe_rt_fail(cudaErrorInvalidValue);
	}
	uint64_t sid = fe_rt_stream(STREAM(stream));
	return fe_rt_leave(
		fe_copy_settle_mapped(c, PTR(dst), sid, async, fe_rpc_memset_2d(c, dst, pitch, value, elem, width, height, sid)));
}
#define memset_2d(...) FE_DRV(memset_2d(FE_API_SITE, __VA_ARGS__))

CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) { return memset_1d(dstDevice, uc, 1, N, 0, 0); }

CUresult cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return memset_1d(dstDevice, us, 2, N, 0, 0);
}

CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) { return memset_1d(dstDevice, ui, 4, N, 0, 0); }

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	return memset_1d(dstDevice, uc, 1, N, hStream, 1);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
	return memset_1d(dstDevice, us, 2, N, hStream, 1);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	return memset_1d(dstDevice, ui, 4, N, hStream, 1);
}

CUresult cuMemsetD2D8(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height)
{
	return memset_2d(dstDevice, dstPitch, uc, 1, Width, Height, 0, 0);
}

CUresult cuMemsetD2D16(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height)
{
	return memset_2d(dstDevice, dstPitch, us, 2, Width, Height, 0, 0);
}

CUresult cuMemsetD2D32(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height)
{
	return memset_2d(dstDevice, dstPitch, ui, 4, Width, Height, 0, 0);
}

CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height,
			   CUstream hStream)
{
	return memset_2d(dstDevice, dstPitch, uc, 1, Width, Height, hStream, 1);
}

CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height,
			    CUstream hStream)
{
	return memset_2d(dstDevice, dstPitch, us, 2, Width, Height, hStream, 1);
}

CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height,
			    CUstream hStream)
{
	return memset_2d(dstDevice, dstPitch, ui, 4, Width, Height, hStream, 1);
}
