/*
 * copy.c: cuMemcpy* and cuMemset*.
 *
 * Every call is turned into one stream operation (fk_op: a 2D copy or a 2D memset;
 * 1D is height 1) and handed to fk_submit(), which runs it at once or, if the stream
 * is capturing, records it into the capture's graph. Device ranges are checked
 * against the current context's allocations when the call is made (a bad range is
 * CUDA_ERROR_INVALID_VALUE, nothing is touched), except on a capturing stream,
 * which records the range as asked, and again when the operation runs,
 * since a replayed graph may find its memory freed; a range gone bad by then is a
 * device fault, the context's sticky CUDA_ERROR_ILLEGAL_ADDRESS.
 *
 * Host sides are not checked: they are the caller's memory.
 * Unified copies (cuMemcpy, CU_MEMORYTYPE_UNIFIED) call a pointer device memory when
 * it lies in an allocation of the current context, host memory when it lies in none;
 * one that lies in another context's allocation is refused.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

static CUresult set_submit(fk_ctx *c, CUstream h, uintptr_t dst, size_t pitch,
                           size_t width, size_t height, unsigned elem, uint32_t value);
static CUresult classify(const fk_ctx *c, uintptr_t p, int *is_dev);

/* ---- running ---- */

CUresult fk_copy_run(fk_ctx *c, const fk_op *op)
{
	size_t w = op->u.c.width, h = op->u.c.height;

	if ((op->u.c.dst_dev && !fk_range2d_ok(c, op->u.c.dst, op->u.c.dpitch, w, h)) ||
	    (op->u.c.src_dev && !fk_range2d_ok(c, op->u.c.src, op->u.c.spitch, w, h))) {
		c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		return CUDA_SUCCESS;
	}
	for (size_t y = 0; y < h; y++)
		memmove((void *)(op->u.c.dst + y * op->u.c.dpitch),
		        (const void *)(op->u.c.src + y * op->u.c.spitch), w);
	return CUDA_SUCCESS;
}

CUresult fk_set_run(fk_ctx *c, const fk_op *op)
{
	size_t w = op->u.s.width, h = op->u.s.height;
	unsigned e = op->u.s.elem;

	if (!fk_range2d_ok(c, op->u.s.dst, op->u.s.pitch, w * e, h)) {
		c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		return CUDA_SUCCESS;
	}
	for (size_t y = 0; y < h; y++) {
		uint8_t *row = (uint8_t *)(op->u.s.dst + y * op->u.s.pitch);
		if (e == 1) {
			memset(row, (int)(op->u.s.value & 0xFF), w);
		} else if (e == 2) {
			uint16_t v = (uint16_t)op->u.s.value;
			for (size_t x = 0; x < w; x++)
				memcpy(row + 2 * x, &v, 2);
		} else {
			uint32_t v = op->u.s.value;
			for (size_t x = 0; x < w; x++)
				memcpy(row + 4 * x, &v, 4);
		}
	}
	return CUDA_SUCCESS;
}

/* ---- submitting ---- */

CUresult fk_copy_submit(fk_ctx *c, CUstream h, uintptr_t dst, int dst_dev, size_t dpitch,
                            uintptr_t src, int src_dev, size_t spitch, size_t width,
                            size_t height)
{
	fk_stream *s = fk_stream_get(c, h);
	CUresult rc;

	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (width && height) {
		if (!dst || !src)
			return CUDA_ERROR_INVALID_VALUE;
		if (height > 1 && (dpitch < width || spitch < width))
			return CUDA_ERROR_INVALID_VALUE;
		if (!s->cap && ((dst_dev && !fk_range2d_ok(c, dst, dpitch, width, height)) ||
		                (src_dev && !fk_range2d_ok(c, src, spitch, width, height))))
			return CUDA_ERROR_INVALID_VALUE;
	}
	if ((rc = fk_stream_legacy_check(c, h)) != CUDA_SUCCESS)
		return rc;

	fk_op op = { .kind = FK_OP_COPY };
	op.u.c.dst = dst;
	op.u.c.src = src;
	op.u.c.dpitch = dpitch;
	op.u.c.spitch = spitch;
	op.u.c.width = width;
	op.u.c.height = height;
	op.u.c.dst_dev = (uint8_t)dst_dev;
	op.u.c.src_dev = (uint8_t)src_dev;
	return fk_submit(c, s, &op);
}

static CUresult set_submit(fk_ctx *c, CUstream h, uintptr_t dst, size_t pitch,
                           size_t width, size_t height, unsigned elem, uint32_t value)
{
	fk_stream *s = fk_stream_get(c, h);
	CUresult rc;

	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (width && height) {
		if (dst % elem || (height > 1 && pitch % elem))
			return CUDA_ERROR_INVALID_VALUE; /* misaligned */
		if (width > SIZE_MAX / elem || (height > 1 && pitch < width * elem))
			return CUDA_ERROR_INVALID_VALUE;
		/* a capture records the range as asked (XLA traces library calls
		 * and sets the addresses later); a replay faults on a bad one */
		if (!s->cap && !fk_range2d_ok(c, dst, pitch, width * elem, height))
			return CUDA_ERROR_INVALID_VALUE;
	}
	if ((rc = fk_stream_legacy_check(c, h)) != CUDA_SUCCESS)
		return rc;

	fk_op op = { .kind = FK_OP_SET };
	op.u.s.dst = dst;
	op.u.s.pitch = height > 1 ? pitch : width * elem;
	op.u.s.width = width;
	op.u.s.height = height;
	op.u.s.elem = elem;
	op.u.s.value = value;
	return fk_submit(c, s, &op);
}

static CUresult classify(const fk_ctx *c, uintptr_t p, int *is_dev)
{
	uint64_t *ids;
	size_t n;

	if (fk_mem_find(c, p)) {
		*is_dev = 1;
		return CUDA_SUCCESS;
	}
	*is_dev = 0;
	n = fk_handle_list(FK_CTX, NULL, &ids);
	for (size_t i = 0; i < n; i++) {
		fk_ctx *o = fk_handle_get(ids[i], FK_CTX, NULL);
		if (o && o != c && fk_mem_find(o, p)) {
			free(ids);
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	free(ids);
	return CUDA_SUCCESS;
}

static CUresult copy_unified(fk_ctx *c, CUstream h, uintptr_t dst, uintptr_t src, size_t n)
{
	int dd, sd;
	CUresult rc = classify(c, dst, &dd);
	if (rc == CUDA_SUCCESS)
		rc = classify(c, src, &sd);
	if (rc == CUDA_SUCCESS)
		rc = fk_copy_submit(c, h, dst, dd, n, src, sd, n, n, 1);
	return rc;
}

/* One side of a CUDA_MEMCPY2D: its address and whether it is device memory. */
static CUresult side(const fk_ctx *c, CUmemorytype type, const void *host, CUdeviceptr dev,
                     size_t x, size_t y, size_t pitch, uintptr_t *addr, int *is_dev)
{
	uintptr_t base;
	CUresult rc = CUDA_SUCCESS;

	switch (type) {
	case CU_MEMORYTYPE_HOST:
		base = (uintptr_t)host;
		*is_dev = 0;
		break;
	case CU_MEMORYTYPE_DEVICE:
		base = dev;
		*is_dev = 1;
		break;
	case CU_MEMORYTYPE_UNIFIED:
		base = dev;
		rc = classify(c, dev, is_dev);
		break;
	case CU_MEMORYTYPE_ARRAY:
		return CUDA_ERROR_NOT_SUPPORTED; /* no CUDA arrays */
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!base || (y && pitch > (UINTPTR_MAX - base) / y) ||
	    x > UINTPTR_MAX - base - y * pitch)
		return CUDA_ERROR_INVALID_VALUE;
	*addr = base + y * pitch + x;
	return CUDA_SUCCESS;
}

static CUresult copy2d(fk_ctx *c, const CUDA_MEMCPY2D *p, CUstream h)
{
	uintptr_t dst, src;
	int dd, sd;
	CUresult rc;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	rc = side(c, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
	          p->srcPitch, &src, &sd);
	if (rc == CUDA_SUCCESS)
		rc = side(c, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
		          p->dstPitch, &dst, &dd);
	if (rc == CUDA_SUCCESS)
		rc = fk_copy_submit(c, h, dst, dd, p->dstPitch, src, sd, p->srcPitch, p->WidthInBytes,
		                 p->Height);
	return rc;
}

/* ---- API ---- */

#define COPY_API(call, fmt, ...)                                   \
	do {                                                       \
		fk_ctx *c;                                         \
		CUresult rc = fk_begin(&c);                        \
		if (rc == CUDA_SUCCESS)                            \
			rc = (call);                               \
		return fk_end(rc, __func__, fmt, __VA_ARGS__);     \
	} while (0)

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	COPY_API(fk_copy_submit(c, NULL, dstDevice, 1, ByteCount, (uintptr_t)srcHost, 0, ByteCount,
	                     ByteCount, 1),
	         "%#lx, %p, %zu", (unsigned long)dstDevice, srcHost, ByteCount);
}

CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	COPY_API(fk_copy_submit(c, NULL, (uintptr_t)dstHost, 0, ByteCount, srcDevice, 1, ByteCount,
	                     ByteCount, 1),
	         "%p, %#lx, %zu", dstHost, (unsigned long)srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	COPY_API(fk_copy_submit(c, NULL, dstDevice, 1, ByteCount, srcDevice, 1, ByteCount,
	                     ByteCount, 1),
	         "%#lx, %#lx, %zu", (unsigned long)dstDevice, (unsigned long)srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost,
                                   size_t ByteCount, CUstream hStream)
{
	COPY_API(fk_copy_submit(c, hStream, dstDevice, 1, ByteCount, (uintptr_t)srcHost, 0,
	                     ByteCount, ByteCount, 1),
	         "%#lx, %p, %zu, %p", (unsigned long)dstDevice, srcHost, ByteCount,
	         (void *)hStream);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
	COPY_API(fk_copy_submit(c, hStream, (uintptr_t)dstHost, 0, ByteCount, srcDevice, 1,
	                     ByteCount, ByteCount, 1),
	         "%p, %#lx, %zu, %p", dstHost, (unsigned long)srcDevice, ByteCount,
	         (void *)hStream);
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                   size_t ByteCount, CUstream hStream)
{
	COPY_API(fk_copy_submit(c, hStream, dstDevice, 1, ByteCount, srcDevice, 1, ByteCount,
	                     ByteCount, 1),
	         "%#lx, %#lx, %zu, %p", (unsigned long)dstDevice, (unsigned long)srcDevice,
	         ByteCount, (void *)hStream);
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	COPY_API(copy_unified(c, NULL, dst, src, ByteCount), "%#lx, %#lx, %zu",
	         (unsigned long)dst, (unsigned long)src, ByteCount);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                               CUstream hStream)
{
	COPY_API(copy_unified(c, hStream, dst, src, ByteCount), "%#lx, %#lx, %zu, %p",
	         (unsigned long)dst, (unsigned long)src, ByteCount, (void *)hStream);
}

CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D *pCopy)
{
	COPY_API(copy2d(c, pCopy, NULL), "%p", (const void *)pCopy);
}

CUresult CUDAAPI cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *pCopy)
{
	COPY_API(copy2d(c, pCopy, NULL), "%p", (const void *)pCopy);
}

CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	COPY_API(copy2d(c, pCopy, hStream), "%p, %p", (const void *)pCopy, (void *)hStream);
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	COPY_API(set_submit(c, NULL, dstDevice, 0, N, 1, 1, uc), "%#lx, %#x, %zu",
	         (unsigned long)dstDevice, uc, N);
}

CUresult CUDAAPI cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	COPY_API(set_submit(c, NULL, dstDevice, 0, N, 1, 2, us), "%#lx, %#x, %zu",
	         (unsigned long)dstDevice, us, N);
}

CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	COPY_API(set_submit(c, NULL, dstDevice, 0, N, 1, 4, ui), "%#lx, %#x, %zu",
	         (unsigned long)dstDevice, ui, N);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream)
{
	COPY_API(set_submit(c, hStream, dstDevice, 0, N, 1, 1, uc), "%#lx, %#x, %zu, %p",
	         (unsigned long)dstDevice, uc, N, (void *)hStream);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                  CUstream hStream)
{
	COPY_API(set_submit(c, hStream, dstDevice, 0, N, 1, 2, us), "%#lx, %#x, %zu, %p",
	         (unsigned long)dstDevice, us, N, (void *)hStream);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream)
{
	COPY_API(set_submit(c, hStream, dstDevice, 0, N, 1, 4, ui), "%#lx, %#x, %zu, %p",
	         (unsigned long)dstDevice, ui, N, (void *)hStream);
}

CUresult CUDAAPI cuMemsetD2D8(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height)
{
	COPY_API(set_submit(c, NULL, dstDevice, dstPitch, Width, Height, 1, uc),
	         "%#lx, %zu, %#x, %zu, %zu", (unsigned long)dstDevice, dstPitch, uc, Width,
	         Height);
}

CUresult CUDAAPI cuMemsetD2D16(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                               size_t Width, size_t Height)
{
	COPY_API(set_submit(c, NULL, dstDevice, dstPitch, Width, Height, 2, us),
	         "%#lx, %zu, %#x, %zu, %zu", (unsigned long)dstDevice, dstPitch, us, Width,
	         Height);
}

CUresult CUDAAPI cuMemsetD2D32(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                               size_t Width, size_t Height)
{
	COPY_API(set_submit(c, NULL, dstDevice, dstPitch, Width, Height, 4, ui),
	         "%#lx, %zu, %#x, %zu, %zu", (unsigned long)dstDevice, dstPitch, ui, Width,
	         Height);
}

CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                   size_t Width, size_t Height, CUstream hStream)
{
	COPY_API(set_submit(c, hStream, dstDevice, dstPitch, Width, Height, 1, uc),
	         "%#lx, %zu, %#x, %zu, %zu, %p", (unsigned long)dstDevice, dstPitch, uc, Width,
	         Height, (void *)hStream);
}

CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                    size_t Width, size_t Height, CUstream hStream)
{
	COPY_API(set_submit(c, hStream, dstDevice, dstPitch, Width, Height, 2, us),
	         "%#lx, %zu, %#x, %zu, %zu, %p", (unsigned long)dstDevice, dstPitch, us, Width,
	         Height, (void *)hStream);
}

CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                    size_t Width, size_t Height, CUstream hStream)
{
	COPY_API(set_submit(c, hStream, dstDevice, dstPitch, Width, Height, 4, ui),
	         "%#lx, %zu, %#x, %zu, %zu, %p", (unsigned long)dstDevice, dstPitch, ui, Width,
	         Height, (void *)hStream);
}
