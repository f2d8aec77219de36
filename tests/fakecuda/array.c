/*
 * array.c: CUDA arrays, 3D copies, texture and surface objects.
 *
 * An array's storage is host memory, packed: rows of Width * element bytes, Height
 * (at least 1) rows a slice, Depth (at least 1) slices; its bytes count in the
 * device's used memory like an allocation's (rounded up to FK_ALIGN), so cuMemGetInfo
 * shows whether arrays come back. Arrays, texture and surface objects are handles of
 * their context; cuCtxDestroy frees what is left.
 *
 * cuMemcpy3D(Async) takes host, device and array sides: each slice is one 2D copy
 * through fk_copy_submit (device ranges checked there, array boxes here). A copy
 * with an array side on a capturing stream is CUDA_ERROR_NOT_SUPPORTED: a graph
 * would keep the storage's address past cuArrayDestroy.
 *
 * Texture and surface objects check their resource (an array of the context, a
 * device range inside one allocation) and are only recorded: the fake runs no
 * kernel that reads them. Destroying an unknown or another context's object is
 * CUDA_ERROR_INVALID_VALUE.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

typedef struct fk_array {
	uint64_t id;
	fk_ctx *ctx;
	CUDA_ARRAY3D_DESCRIPTOR d;
	size_t elem, row, rows, slices, charged;
	uint8_t *mem;
} fk_array;

typedef struct fk_texobj {
	uint64_t id;
	CUDA_RESOURCE_DESC res;
} fk_texobj;

/* A side of a 3D copy resolved to memory: the box's first byte, its row pitch
 * and slice stride, and whether it is device memory (checked when submitted). */
typedef struct fk_side {
	uintptr_t p;
	size_t pitch, stride;
	int dev;
} fk_side;

static size_t format_size(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return 0;
	}
}

static void array_free(fk_array *a)
{
	fk_dev_uncharge(&fk_devs[a->ctx->dev], a->charged);
	fk_handle_del(a->id);
	free(a->mem);
	free(a);
}

void fk_array_free_all(fk_ctx *c)
{
	static const int kinds[] = {FK_TEXOBJ, FK_SURFOBJ, FK_ARRAY};
	for (size_t k = 0; k < 3; k++) {
		uint64_t *ids;
		size_t n = fk_handle_list(kinds[k], c, &ids);
		for (size_t i = 0; i < n; i++) {
			void *o = fk_handle_get(ids[i], kinds[k], c);
			if (kinds[k] == FK_ARRAY) {
				array_free(o);
			} else {
				fk_handle_del(ids[i]);
				free(o);
			}
		}
		free(ids);
	}
}

CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pd)
{
	fk_ctx *c;
	fk_array *a = NULL;
	CUresult rc = fk_begin(&c);
	const unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_TEXTURE_GATHER;

	if (rc == CUDA_SUCCESS && (!pHandle || !pd || pd->Width == 0 || !format_size(pd->Format) ||
	                           (pd->NumChannels != 1 && pd->NumChannels != 2 && pd->NumChannels != 4) ||
	                           (pd->Depth && !pd->Height && !(pd->Flags & CUDA_ARRAY3D_LAYERED)) ||
	                           (pd->Flags & ~known)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !(a = calloc(1, sizeof(*a))))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		fk_dev *d = &fk_devs[c->dev];
		a->d = *pd;
		a->ctx = c;
		a->elem = format_size(pd->Format) * pd->NumChannels;
		a->row = pd->Width * a->elem;
		a->rows = pd->Height ? pd->Height : 1;
		a->slices = pd->Depth ? pd->Depth : 1;
		size_t n = a->row * a->rows; /* each factor is at most what an int of the driver holds */
		if (n / a->rows != a->row || (a->slices && n > (SIZE_MAX - FK_ALIGN) / a->slices))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		else
			a->charged = (n * a->slices + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1);
		if (rc == CUDA_SUCCESS && a->charged > fk_dev_free(d))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		if (rc == CUDA_SUCCESS && !(a->mem = malloc(a->charged)))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		if (rc == CUDA_SUCCESS) {
			fk_dev_charge(d, a->charged);
			a->id = fk_handle_new(FK_ARRAY, a, c);
			*pHandle = (CUarray)(uintptr_t)a->id;
		} else {
			free(a);
		}
	}
	return fk_end(rc, __func__, "%p -> %#lx", (const void *)pd, rc == CUDA_SUCCESS ? (unsigned long)a->id : 0ul);
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS) {
		fk_array *a = fk_handle_get(FK_H(hArray), FK_ARRAY, c);
		if (a)
			array_free(a);
		else
			rc = CUDA_ERROR_INVALID_HANDLE;
	}
	return fk_end(rc, __func__, "%#lx", (unsigned long)FK_H(hArray));
}

/* ---- 3D copies ---- */

/* One side of c (dst: the destination). */
static CUresult side_of(fk_ctx *ctx, const CUDA_MEMCPY3D *c, int dst, fk_side *s, int *is_array)
{
	CUmemorytype t = dst ? c->dstMemoryType : c->srcMemoryType;
	size_t x = dst ? c->dstXInBytes : c->srcXInBytes, y = dst ? c->dstY : c->srcY, z = dst ? c->dstZ : c->srcZ;
	*is_array = 0;
	if ((dst ? c->dstLOD : c->srcLOD) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (t == CU_MEMORYTYPE_ARRAY) {
		fk_array *a = fk_handle_get(FK_H(dst ? c->dstArray : c->srcArray), FK_ARRAY, ctx);
		if (!a)
			return CUDA_ERROR_INVALID_HANDLE;
		if (x > a->row || c->WidthInBytes > a->row - x || y > a->rows || c->Height > a->rows - y ||
		    z > a->slices || c->Depth > a->slices - z || x % a->elem || c->WidthInBytes % a->elem)
			return CUDA_ERROR_INVALID_VALUE;
		*is_array = 1;
		*s = (fk_side){(uintptr_t)a->mem + z * a->row * a->rows + y * a->row + x, a->row, a->row * a->rows, 0};
		return CUDA_SUCCESS;
	}
	size_t pitch = dst ? c->dstPitch : c->srcPitch, height = dst ? c->dstHeight : c->srcHeight;
	uintptr_t base;
	if (t == CU_MEMORYTYPE_HOST)
		base = (uintptr_t)(dst ? c->dstHost : c->srcHost);
	else if (t == CU_MEMORYTYPE_DEVICE)
		base = dst ? c->dstDevice : c->srcDevice;
	else
		return CUDA_ERROR_NOT_SUPPORTED; /* unified: not emulated */
	if (c->Depth > 1 && height < c->Height)
		return CUDA_ERROR_INVALID_VALUE;
	*s = (fk_side){base + z * pitch * height + y * pitch + x, pitch, pitch * height, t == CU_MEMORYTYPE_DEVICE};
	return CUDA_SUCCESS;
}

static CUresult copy3d(fk_ctx *ctx, const CUDA_MEMCPY3D *c, CUstream h)
{
	fk_side d, s;
	int da, sa;
	CUresult rc;

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if ((rc = side_of(ctx, c, 1, &d, &da)) != CUDA_SUCCESS || (rc = side_of(ctx, c, 0, &s, &sa)) != CUDA_SUCCESS)
		return rc;
	fk_stream *st = fk_stream_get(ctx, h);
	if (!st)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((da || sa) && st->cap)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (size_t z = 0; z < c->Depth; z++) {
		rc = fk_copy_submit(ctx, h, d.p + z * d.stride, d.dev, d.pitch, s.p + z * s.stride, s.dev, s.pitch,
		                    c->WidthInBytes, c->Height);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpy3D(const CUDA_MEMCPY3D *pCopy)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = copy3d(c, pCopy, NULL);
	return fk_end(rc, __func__, "%p", (const void *)pCopy);
}

CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = copy3d(c, pCopy, hStream);
	return fk_end(rc, __func__, "%p, %p", (const void *)pCopy, (void *)hStream);
}

/* ---- texture and surface objects ---- */

static CUresult resource_ok(fk_ctx *c, const CUDA_RESOURCE_DESC *r, int surface)
{
	if (!r || r->flags)
		return CUDA_ERROR_INVALID_VALUE;
	switch (r->resType) {
	case CU_RESOURCE_TYPE_ARRAY: {
		fk_array *a = fk_handle_get(FK_H(r->res.array.hArray), FK_ARRAY, c);
		if (!a)
			return CUDA_ERROR_INVALID_HANDLE;
		return surface && !(a->d.Flags & CUDA_ARRAY3D_SURFACE_LDST) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	}
	case CU_RESOURCE_TYPE_LINEAR:
		return !surface && format_size(r->res.linear.format) &&
		               fk_range_ok(c, r->res.linear.devPtr, r->res.linear.sizeInBytes)
		           ? CUDA_SUCCESS
		           : CUDA_ERROR_INVALID_VALUE;
	case CU_RESOURCE_TYPE_PITCH2D: {
		size_t e = format_size(r->res.pitch2D.format) * r->res.pitch2D.numChannels;
		return !surface && e &&
		               fk_range2d_ok(c, r->res.pitch2D.devPtr, r->res.pitch2D.pitchInBytes,
		                             r->res.pitch2D.width * e, r->res.pitch2D.height)
		           ? CUDA_SUCCESS
		           : CUDA_ERROR_INVALID_VALUE;
	}
	default:
		return CUDA_ERROR_NOT_SUPPORTED; /* mipmapped arrays */
	}
}

static CUresult object_new(fk_ctx *c, int kind, const CUDA_RESOURCE_DESC *r, uint64_t *out)
{
	CUresult rc = resource_ok(c, r, kind == FK_SURFOBJ);
	fk_texobj *o;
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!(o = calloc(1, sizeof(*o))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->res = *r;
	o->id = fk_handle_new(kind, o, c);
	*out = o->id;
	return CUDA_SUCCESS;
}

static CUresult object_destroy(fk_ctx *c, int kind, uint64_t id)
{
	fk_texobj *o = fk_handle_get(id, kind, c);
	if (!o)
		return CUDA_ERROR_INVALID_VALUE;
	fk_handle_del(id);
	free(o);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                   const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
	fk_ctx *c;
	uint64_t id = 0;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && (!pTexObject || !pTexDesc))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (rc = object_new(c, FK_TEXOBJ, pResDesc, &id)) == CUDA_SUCCESS)
		*pTexObject = id;
	return fk_end(rc, __func__, "%p, %p, %p -> %#lx", (const void *)pResDesc, (const void *)pTexDesc,
	              (const void *)pResViewDesc, (unsigned long)id);
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = object_destroy(c, FK_TEXOBJ, texObject);
	return fk_end(rc, __func__, "%#llx", (unsigned long long)texObject);
}

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
	fk_ctx *c;
	uint64_t id = 0;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && !pSurfObject)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (rc = object_new(c, FK_SURFOBJ, pResDesc, &id)) == CUDA_SUCCESS)
		*pSurfObject = id;
	return fk_end(rc, __func__, "%p -> %#lx", (const void *)pResDesc, (unsigned long)id);
}

CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = object_destroy(c, FK_SURFOBJ, surfObject);
	return fk_end(rc, __func__, "%#llx", (unsigned long long)surfObject);
}
