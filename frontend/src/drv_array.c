/*
 * Driver API: CUDA arrays and the copies to, from and between them. A CUarray
 * is the runtime's cudaArray_t (the client's id, rt_array.c), so either API
 * may use an array the other made; creation goes through the runtime layer
 * (its format is the driver's already), copies through rt_array.c's box copy
 * with the driver's rules checked here. Where the driver answers differently
 * from what its documentation says, the rules are as measured on an H100
 * (driver 580): the 1D copies (cuMemcpyHtoA & co.) address the array's first
 * row only; a 2D/3D copy checks a pointer side's pitch against its offset plus
 * the width, and its height only across slices, and takes a pitch or height of
 * 0 as packed rows or slices; an array side's LOD must be 0; two arrays may
 * have elements of different sizes. Mipmapped arrays are not supported
 * (generated stubs).
 */
#include "drv.h"
#include "rg_log.h"
#include "rt.h"

/* Flags that need what libremote.so does not have (memory mapping of
 * arrays). The others reach the server's driver, which judges them. */
#define UNSUPPORTED_FLAGS (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)

static CUresult array_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	struct cudaChannelFormatDesc cd;
	uint32_t elem;
	cudaArray_t a;

	if (!out || !d)
		return CUDA_ERROR_INVALID_VALUE;
	cudaError_t e = fe_channel_desc(d->Format, d->NumChannels, &cd, &elem);
	if (e != cudaSuccess)
		return fe_drv_result(e);
	if (d->Flags & UNSUPPORTED_FLAGS) {
		rg_log_once("frontend", "not supported (sparse and deferred-mapping arrays need cuMemMapArrayAsync)",
			    "cuArray3DCreate(CUDA_ARRAY3D_SPARSE or CUDA_ARRAY3D_DEFERRED_MAPPING)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	/* The runtime's extent is the driver's: height 0 below 2D, depth 0
	 * below 3D (or the layers). */
	CUresult r = FE_DRV(cudaMalloc3DArray(&a, &cd, (struct cudaExtent){d->Width, d->Height, d->Depth}, d->Flags));
	if (r == CUDA_SUCCESS)
		*out = (CUarray)a;
	return r;
}

CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	return array_create(pHandle, pAllocateArray);
}

CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	if (!pAllocateArray)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_ARRAY3D_DESCRIPTOR d = {.Width = pAllocateArray->Width,
				     .Height = pAllocateArray->Height,
				     .Format = pAllocateArray->Format,
				     .NumChannels = pAllocateArray->NumChannels};
	return array_create(pHandle, &d);
}

CUresult cuArrayDestroy(CUarray hArray)
{
	/* cudaFreeArray(NULL) does nothing; the driver calls it a bad handle. */
	if (!hArray)
		return CUDA_ERROR_INVALID_HANDLE;
	return FE_DRV(cudaFreeArray((cudaArray_t)hArray));
}

CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
	fe_array a;
	if (!pArrayDescriptor)
		return CUDA_ERROR_INVALID_VALUE;
	if (fe_array_get((cudaArray_const_t)hArray, &a) != cudaSuccess)
		return CUDA_ERROR_INVALID_HANDLE;
	*pArrayDescriptor = (CUDA_ARRAY3D_DESCRIPTOR){.Width = a.extent.width,
						      .Height = a.extent.height,
						      .Depth = a.extent.depth,
						      .Format = (CUarray_format)a.format,
						      .NumChannels = a.channels,
						      .Flags = a.flags};
	return CUDA_SUCCESS;
}

/* Of any array, 3D ones too (their width and height). */
CUresult cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	if (!pArrayDescriptor)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cuArray3DGetDescriptor(&d, hArray);
	if (r == CUDA_SUCCESS)
		*pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){
			.Width = d.Width, .Height = d.Height, .Format = d.Format, .NumChannels = d.NumChannels};
	return r;
}

/* ---- copies ---- */

static CUresult box_copy(fe_api_site site, fe_array_side *dst, fe_array_side *src, size_t w, size_t h, size_t d,
			 enum cudaMemcpyKind kind, CUstream stream)
{
	fe_drv_begin();
	return fe_drv_end(fe_array_copy(site, dst, src, w, h, d, kind, (cudaStream_t)stream));
}

/* The array side of a 1D copy: offset bytes into its first row. */
static CUresult array_side(CUarray h, size_t offset, fe_array_side *s)
{
	*s = (fe_array_side){.is_array = 1, .x = offset};
	return fe_array_get((cudaArray_const_t)h, &s->a) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static fe_array_side ptr_side(const void *p, size_t count)
{
	return (fe_array_side){.p = (char *)p, .pitch = count, .rows = 1};
}

/* A 1D copy of count bytes with an array on one side or both. */
static CUresult copy_1d(fe_api_site site, CUarray da, size_t doff, void *dp, CUarray sa, size_t soff, const void *sp,
			size_t count, enum cudaMemcpyKind kind, CUstream stream)
{
	fe_array_side d, s;
	CUresult r = CUDA_SUCCESS;
	if (da)
		r = array_side(da, doff, &d);
	else
		d = ptr_side(dp, count);
	if (r == CUDA_SUCCESS && sa)
		r = array_side(sa, soff, &s);
	else if (!sa)
		s = ptr_side(sp, count);
	return r != CUDA_SUCCESS ? r : box_copy(site, &d, &s, count, 1, 1, kind, stream);
}

CUresult cuMemcpyHtoA(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
	if (!dstArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, dstArray, dstOffset, NULL, NULL, 0, srcHost, ByteCount, cudaMemcpyHostToDevice, 0);
}

CUresult cuMemcpyHtoAAsync(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream)
{
	if (!dstArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, dstArray, dstOffset, NULL, NULL, 0, srcHost, ByteCount, cudaMemcpyHostToDevice,
		       hStream);
}

CUresult cuMemcpyAtoH(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
	if (!srcArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, NULL, 0, dstHost, srcArray, srcOffset, NULL, ByteCount, cudaMemcpyDeviceToHost, 0);
}

CUresult cuMemcpyAtoHAsync(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream)
{
	if (!srcArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, NULL, 0, dstHost, srcArray, srcOffset, NULL, ByteCount, cudaMemcpyDeviceToHost,
		       hStream);
}

CUresult cuMemcpyDtoA(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)
{
	if (!dstArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, dstArray, dstOffset, NULL, NULL, 0, (const void *)(uintptr_t)srcDevice, ByteCount,
		       cudaMemcpyDeviceToDevice, 0);
}

CUresult cuMemcpyAtoD(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
	if (!srcArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, NULL, 0, (void *)(uintptr_t)dstDevice, srcArray, srcOffset, NULL, ByteCount,
		       cudaMemcpyDeviceToDevice, 0);
}

CUresult cuMemcpyAtoA(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
	if (!dstArray || !srcArray)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_1d(FE_API_SITE, dstArray, dstOffset, NULL, srcArray, srcOffset, NULL, ByteCount,
		       cudaMemcpyDeviceToDevice, 0);
}

/* One side of a CUDA_MEMCPY3D, from its fields. */
typedef struct side3d {
	size_t x, y, z, lod;
	CUmemorytype type;
	const void *host;
	CUdeviceptr dev;
	CUarray arr;
	size_t pitch, height;
} side3d;

/* The fe_array_side of f for a box of w x h x d, with what it says of the
 * copy's kind: 0 host, 1 device, 2 unified, 3 array. */
static CUresult side_of(const side3d *f, size_t w, size_t h, size_t d, fe_array_side *s, int *where)
{
	switch (f->type) {
	case CU_MEMORYTYPE_ARRAY:
		/* A mipmap level is an array of its own here: levels of one do not exist. */
		if (!f->arr || f->lod)
			return CUDA_ERROR_INVALID_VALUE;
		*s = (fe_array_side){.is_array = 1, .x = f->x, .y = f->y, .z = f->z};
		*where = 3;
		return fe_array_get((cudaArray_const_t)f->arr, &s->a) == cudaSuccess ? CUDA_SUCCESS
										      : CUDA_ERROR_INVALID_HANDLE;
	case CU_MEMORYTYPE_HOST:
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	*where = f->type == CU_MEMORYTYPE_HOST ? 0 : f->type == CU_MEMORYTYPE_DEVICE ? 1 : 2;
	uintptr_t base = f->type == CU_MEMORYTYPE_HOST ? (uintptr_t)f->host : (uintptr_t)f->dev;
	/* No pitch or no height: rows or slices packed, from the box's origin. */
	size_t pitch = f->pitch ? f->pitch : f->x + w, height = f->height ? f->height : f->y + h, off;
	if (pitch < f->x || pitch - f->x < w || (d > 1 && (height < f->y || height - f->y < h)))
		return CUDA_ERROR_INVALID_VALUE;
	if (__builtin_mul_overflow(f->z, height, &off) || __builtin_add_overflow(off, f->y, &off) ||
	    __builtin_mul_overflow(off, pitch, &off) || __builtin_add_overflow(off, f->x, &off))
		return CUDA_ERROR_INVALID_VALUE;
	*s = (fe_array_side){.p = base ? (char *)(base + off) : NULL, .pitch = pitch, .rows = height};
	return CUDA_SUCCESS;
}

static CUresult copy_3d(fe_api_site site, const side3d *src, const side3d *dst, size_t w, size_t h, size_t d,
			CUstream stream)
{
	fe_array_side s, t;
	int sw, dw;
	CUresult r = side_of(src, w, h, d, &s, &sw);
	if (r == CUDA_SUCCESS)
		r = side_of(dst, w, h, d, &t, &dw);
	if (r != CUDA_SUCCESS)
		return r;
	if (sw != 3 && dw != 3)
		return CUDA_ERROR_INVALID_VALUE; /* not an array copy: drv_copy.c's */
	int ptr = sw == 3 ? dw : sw;
	enum cudaMemcpyKind kind = ptr == 0   ? (sw == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost)
				   : ptr == 2 ? cudaMemcpyDefault
					      : cudaMemcpyDeviceToDevice;
	return box_copy(site, &t, &s, w, h, d, kind, stream);
}

CUresult fe_drv_copy_array_3d_at(fe_api_site site, const CUDA_MEMCPY3D *m, CUstream stream)
{
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	side3d s = {m->srcXInBytes, m->srcY,    m->srcZ,     m->srcLOD,  m->srcMemoryType,
		    m->srcHost,     m->srcDevice, m->srcArray, m->srcPitch, m->srcHeight};
	side3d d = {m->dstXInBytes, m->dstY,    m->dstZ,     m->dstLOD,  m->dstMemoryType,
		    m->dstHost,     m->dstDevice, m->dstArray, m->dstPitch, m->dstHeight};
	return copy_3d(site, &s, &d, m->WidthInBytes, m->Height, m->Depth, stream);
}

CUresult fe_drv_copy_array_2d_at(fe_api_site site, const CUDA_MEMCPY2D *m, CUstream stream)
{
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	side3d s = {.x = m->srcXInBytes, .y = m->srcY, .type = m->srcMemoryType, .host = m->srcHost,
		    .dev = m->srcDevice, .arr = m->srcArray, .pitch = m->srcPitch};
	side3d d = {.x = m->dstXInBytes, .y = m->dstY, .type = m->dstMemoryType, .host = m->dstHost,
		    .dev = m->dstDevice, .arr = m->dstArray, .pitch = m->dstPitch};
	return copy_3d(site, &s, &d, m->WidthInBytes, m->Height, 1, stream);
}
