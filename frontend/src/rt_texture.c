/*
 * Texture and surface objects. Kernels take them by value, so the program gets
 * the server's own CUtexObject / CUsurfObject (a creation is one round trip);
 * the server keeps each session's values and destroys only those.
 *
 * The runtime's descriptors become the driver's here, where the runtime's rules
 * live: the channel descriptor becomes a format and a channel count, the read
 * mode and the coordinate, sRGB and filtering switches become CU_TRSF_* flags,
 * and an array becomes the client's id, which the server looks up. The client
 * keeps what was asked for each object, which answers the Get*Desc calls and
 * lets a destroy of a value this process never had fail at the call (CUDA
 * calls that undefined; here it is cudaErrorInvalidValue).
 *
 * The driver's entry points (drv_texture.c) create, destroy and query the same
 * objects from the driver's descriptors (fe_texobj_*): each object keeps both
 * forms, the one it was created with and the other made from it, so either
 * API's Get*Desc calls answer for any object.
 */
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

typedef struct texobj {
	uint64_t value;
	int surface, device, has_view;
	/* The driver's descriptors: as given to cuTexObjectCreate, or what the
	 * runtime's became (what the server got). */
	CUDA_RESOURCE_DESC dres;
	CUDA_TEXTURE_DESC dtex;
	CUDA_RESOURCE_VIEW_DESC dview;
	/* The runtime's: as given to cudaCreateTextureObject, or made from the
	 * driver's. */
	struct cudaResourceDesc res;
	struct cudaTextureDesc tex;
	struct cudaResourceViewDesc view;
	struct texobj *next;
} texobj;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static texobj *objs;

/* The resource's fields as the wire carries them (api/cuda.api tex_create). */
typedef struct wire_res {
	uint32_t kind, format, channels;
	uint64_t arr, ptr, width, height, pitch;
	int is_int; /* an integer format: the element type is read as integers */
} wire_res;

static int is_int_format(unsigned f) { return f != CU_AD_FORMAT_FLOAT && f != CU_AD_FORMAT_HALF; }

/* The driver's resource for the wire: the array becomes the client's id, a
 * device range is checked against the allocations (its alignments are the
 * server's driver's to check). */
static cudaError_t wire_resource(const CUDA_RESOURCE_DESC *r, wire_res *w)
{
	struct cudaChannelFormatDesc cd;
	fe_array a;
	uint32_t elem;
	cudaError_t e;

	memset(w, 0, sizeof(*w));
	w->kind = (uint32_t)r->resType;
	switch (r->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		if ((e = fe_array_get((cudaArray_const_t)r->res.array.hArray, &a)) != cudaSuccess)
			return e;
		w->arr = a.id;
		w->is_int = is_int_format(a.format);
		return cudaSuccess;
	case CU_RESOURCE_TYPE_LINEAR:
		w->format = r->res.linear.format;
		w->channels = r->res.linear.numChannels;
		if ((e = fe_channel_desc(w->format, w->channels, &cd, &elem)) != cudaSuccess)
			return e;
		if (!fe_mem_device_ok((void *)(uintptr_t)r->res.linear.devPtr, r->res.linear.sizeInBytes))
			return cudaErrorInvalidValue;
		w->ptr = r->res.linear.devPtr;
		w->width = r->res.linear.sizeInBytes;
		break;
	case CU_RESOURCE_TYPE_PITCH2D:
		w->format = r->res.pitch2D.format;
		w->channels = r->res.pitch2D.numChannels;
		if ((e = fe_channel_desc(w->format, w->channels, &cd, &elem)) != cudaSuccess)
			return e;
		w->ptr = r->res.pitch2D.devPtr;
		w->width = r->res.pitch2D.width;
		w->height = r->res.pitch2D.height;
		w->pitch = r->res.pitch2D.pitchInBytes;
		if (w->height && (w->width > SIZE_MAX / elem ||
				  (w->height > 1 && w->pitch > (SIZE_MAX - w->width * elem) / (w->height - 1)) ||
				  !fe_mem_device_ok((void *)(uintptr_t)w->ptr,
						    w->pitch * (w->height - 1) + w->width * elem)))
			return cudaErrorInvalidValue;
		break;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		rg_log_once("frontend", "not supported (mipmapped arrays are not implemented)",
			    "a texture object on a mipmapped array");
		return cudaErrorNotSupported;
	default:
		return cudaErrorInvalidValue;
	}
	w->is_int = is_int_format(w->format);
	return cudaSuccess;
}

/* The runtime's resource as the driver's: the channel descriptor becomes a
 * format and a channel count (the runtime's rules: its errors). */
static cudaError_t driver_res(const struct cudaResourceDesc *r, CUDA_RESOURCE_DESC *d)
{
	unsigned format, channels;
	uint32_t elem;
	cudaError_t e;

	memset(d, 0, sizeof(*d));
	d->resType = (CUresourcetype)r->resType; /* the runtime's and driver's numbers agree */
	switch (r->resType) {
	case cudaResourceTypeArray:
		d->res.array.hArray = (CUarray)r->res.array.array; /* the same handle */
		return cudaSuccess;
	case cudaResourceTypeLinear:
		if ((e = fe_channel_format(&r->res.linear.desc, &format, &channels, &elem)) != cudaSuccess)
			return e;
		d->res.linear.devPtr = (CUdeviceptr)(uintptr_t)r->res.linear.devPtr;
		d->res.linear.format = (CUarray_format)format;
		d->res.linear.numChannels = channels;
		d->res.linear.sizeInBytes = r->res.linear.sizeInBytes;
		return cudaSuccess;
	case cudaResourceTypePitch2D:
		if ((e = fe_channel_format(&r->res.pitch2D.desc, &format, &channels, &elem)) != cudaSuccess)
			return e;
		if (r->res.pitch2D.height && (r->res.pitch2D.width > SIZE_MAX / elem ||
					      r->res.pitch2D.pitchInBytes < r->res.pitch2D.width * elem))
			return cudaErrorInvalidValue;
		d->res.pitch2D.devPtr = (CUdeviceptr)(uintptr_t)r->res.pitch2D.devPtr;
		d->res.pitch2D.format = (CUarray_format)format;
		d->res.pitch2D.numChannels = channels;
		d->res.pitch2D.width = r->res.pitch2D.width;
		d->res.pitch2D.height = r->res.pitch2D.height;
		d->res.pitch2D.pitchInBytes = r->res.pitch2D.pitchInBytes;
		return cudaSuccess;
	case cudaResourceTypeMipmappedArray:
		rg_log_once("frontend", "not supported (mipmapped arrays are not implemented)",
			    "a texture object on a mipmapped array");
		return cudaErrorNotSupported;
	}
	return cudaErrorInvalidValue;
}

/* The driver's resource as the runtime's (checked by wire_resource). */
static void runtime_res(const CUDA_RESOURCE_DESC *d, struct cudaResourceDesc *r)
{
	uint32_t elem;

	memset(r, 0, sizeof(*r));
	r->resType = (enum cudaResourceType)d->resType;
	switch (d->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		r->res.array.array = (cudaArray_t)d->res.array.hArray;
		break;
	case CU_RESOURCE_TYPE_LINEAR:
		fe_channel_desc(d->res.linear.format, d->res.linear.numChannels, &r->res.linear.desc, &elem);
		r->res.linear.devPtr = (void *)(uintptr_t)d->res.linear.devPtr;
		r->res.linear.sizeInBytes = d->res.linear.sizeInBytes;
		break;
	case CU_RESOURCE_TYPE_PITCH2D:
		fe_channel_desc(d->res.pitch2D.format, d->res.pitch2D.numChannels, &r->res.pitch2D.desc, &elem);
		r->res.pitch2D.devPtr = (void *)(uintptr_t)d->res.pitch2D.devPtr;
		r->res.pitch2D.width = d->res.pitch2D.width;
		r->res.pitch2D.height = d->res.pitch2D.height;
		r->res.pitch2D.pitchInBytes = d->res.pitch2D.pitchInBytes;
		break;
	default:
		break;
	}
}

/* The runtime's texture descriptor as the driver's. */
static void driver_tex(const struct cudaTextureDesc *t, int is_int, CUDA_TEXTURE_DESC *d)
{
	memset(d, 0, sizeof(*d));
	for (int i = 0; i < 3; i++)
		d->addressMode[i] = (CUaddress_mode)t->addressMode[i]; /* same numbers */
	d->filterMode = (CUfilter_mode)t->filterMode;
	/* The element type of an integer format is integers; without the flag
	 * the driver reads them as normalized floats. Floats are floats either way. */
	if (t->readMode == cudaReadModeElementType && is_int)
		d->flags |= CU_TRSF_READ_AS_INTEGER;
	if (t->normalizedCoords)
		d->flags |= CU_TRSF_NORMALIZED_COORDINATES;
	if (t->sRGB)
		d->flags |= CU_TRSF_SRGB;
	if (t->disableTrilinearOptimization)
		d->flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
	if (t->seamlessCubemap)
		d->flags |= CU_TRSF_SEAMLESS_CUBEMAP;
	d->maxAnisotropy = t->maxAnisotropy;
	d->mipmapFilterMode = (CUfilter_mode)t->mipmapFilterMode;
	d->mipmapLevelBias = t->mipmapLevelBias;
	d->minMipmapLevelClamp = t->minMipmapLevelClamp;
	d->maxMipmapLevelClamp = t->maxMipmapLevelClamp;
	memcpy(d->borderColor, t->borderColor, sizeof(d->borderColor));
}

/* The driver's texture descriptor as the runtime's: the inverse of driver_tex. */
static void runtime_tex(const CUDA_TEXTURE_DESC *d, int is_int, struct cudaTextureDesc *t)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 3; i++)
		t->addressMode[i] = (enum cudaTextureAddressMode)d->addressMode[i];
	t->filterMode = (enum cudaTextureFilterMode)d->filterMode;
	t->readMode = is_int && !(d->flags & CU_TRSF_READ_AS_INTEGER) ? cudaReadModeNormalizedFloat
								      : cudaReadModeElementType;
	t->normalizedCoords = !!(d->flags & CU_TRSF_NORMALIZED_COORDINATES);
	t->sRGB = !!(d->flags & CU_TRSF_SRGB);
	t->disableTrilinearOptimization = !!(d->flags & CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION);
	t->seamlessCubemap = !!(d->flags & CU_TRSF_SEAMLESS_CUBEMAP);
	t->maxAnisotropy = d->maxAnisotropy;
	t->mipmapFilterMode = (enum cudaTextureFilterMode)d->mipmapFilterMode;
	t->mipmapLevelBias = d->mipmapLevelBias;
	t->minMipmapLevelClamp = d->minMipmapLevelClamp;
	t->maxMipmapLevelClamp = d->maxMipmapLevelClamp;
	memcpy(t->borderColor, d->borderColor, sizeof(t->borderColor));
}

static void driver_view(const struct cudaResourceViewDesc *v, CUDA_RESOURCE_VIEW_DESC *d)
{
	memset(d, 0, sizeof(*d));
	d->format = (CUresourceViewFormat)v->format; /* same numbers */
	d->width = v->width;
	d->height = v->height;
	d->depth = v->depth;
	d->firstMipmapLevel = v->firstMipmapLevel;
	d->lastMipmapLevel = v->lastMipmapLevel;
	d->firstLayer = v->firstLayer;
	d->lastLayer = v->lastLayer;
}

static void runtime_view(const CUDA_RESOURCE_VIEW_DESC *d, struct cudaResourceViewDesc *v)
{
	memset(v, 0, sizeof(*v));
	v->format = (enum cudaResourceViewFormat)d->format;
	v->width = d->width;
	v->height = d->height;
	v->depth = d->depth;
	v->firstMipmapLevel = d->firstMipmapLevel;
	v->lastMipmapLevel = d->lastMipmapLevel;
	v->firstLayer = d->firstLayer;
	v->lastLayer = d->lastLayer;
}

static void remember(texobj *o)
{
	pthread_mutex_lock(&lock);
	o->next = objs;
	objs = o;
	pthread_mutex_unlock(&lock);
}

/* Unlinks the record of a live object of the kind (NULL if there is none). */
static texobj *take(uint64_t value, int surface)
{
	pthread_mutex_lock(&lock);
	texobj **pp = &objs;
	while (*pp && ((*pp)->value != value || (*pp)->surface != surface))
		pp = &(*pp)->next;
	texobj *o = *pp;
	if (o)
		*pp = o->next;
	pthread_mutex_unlock(&lock);
	return o;
}

/* A copy of the record of a live object of the kind; 0 if found. */
static int find(uint64_t value, int surface, texobj *out)
{
	pthread_mutex_lock(&lock);
	texobj *o = objs;
	while (o && (o->value != value || o->surface != surface))
		o = o->next;
	if (o)
		*out = *o;
	pthread_mutex_unlock(&lock);
	return o ? 0 : -1;
}

static void forget(int device)
{
	pthread_mutex_lock(&lock);
	for (texobj **pp = &objs; *pp;) {
		texobj *o = *pp;
		if (device < 0 || o->device == device) {
			*pp = o->next;
			free(o);
		} else {
			pp = &o->next;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* Sends the creation of o (its driver's descriptors filled) and, once the
 * server gave its value, records it; the caller's error rules apply to the
 * result. */
static int send_create(fe_conn *c, texobj *o, const wire_res *w, uint64_t *out)
{
	int st = o->surface ? fe_rpc_surf_create(c, w->arr, &o->value)
			    : fe_rpc_tex_create(c, w->kind, w->arr, w->ptr, w->format, w->channels, w->width, w->height,
						w->pitch, &o->dtex, sizeof(o->dtex), o->has_view ? &o->dview : NULL,
						o->has_view ? sizeof(o->dview) : 0, &o->value);
	if (st) {
		free(o);
		return st;
	}
	o->device = fe_rt_current_device();
	*out = o->value;
	remember(o);
	return 0;
}

cudaError_t cudaCreateTextureObject(cudaTextureObject_t *pTexObject, const struct cudaResourceDesc *pResDesc,
				    const struct cudaTextureDesc *pTexDesc, const struct cudaResourceViewDesc *pResViewDesc)
{
	fe_conn *c;
	wire_res w;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pTexObject || !pResDesc || !pTexDesc)
		return fe_rt_fail(cudaErrorInvalidValue);
	texobj *o = calloc(1, sizeof(*o));
	if (!o)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	if ((e = driver_res(pResDesc, &o->dres)) != cudaSuccess || (e = wire_resource(&o->dres, &w)) != cudaSuccess) {
		free(o);
		return fe_rt_fail(e);
	}
	driver_tex(pTexDesc, w.is_int, &o->dtex);
	if (pResViewDesc) {
		o->has_view = 1;
		o->view = *pResViewDesc;
		driver_view(pResViewDesc, &o->dview);
	}
	o->res = *pResDesc;
	o->tex = *pTexDesc;
	uint64_t v;
	int st = send_create(c, o, &w, &v);
	if (st)
		return fe_rt_leave(st);
	*pTexObject = (cudaTextureObject_t)v;
	return cudaSuccess;
}

cudaError_t fe_texobj_create(fe_api_site site, uint64_t *out, int surface, const CUDA_RESOURCE_DESC *res,
			     const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view)
{
	fe_conn *c;
	wire_res w;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	/* The driver's rules: flags must be 0, a surface is on an array. */
	if (!out || !res || (!surface && !tex) || res->flags || (surface && res->resType != CU_RESOURCE_TYPE_ARRAY))
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = wire_resource(res, &w)) != cudaSuccess)
		return fe_rt_fail(e);
	texobj *o = calloc(1, sizeof(*o));
	if (!o)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	o->surface = surface;
	o->dres = *res;
	runtime_res(res, &o->res);
	if (!surface) {
		o->dtex = *tex;
		runtime_tex(tex, w.is_int, &o->tex);
	}
	if (!surface && view) {
		o->has_view = 1;
		o->dview = *view;
		runtime_view(view, &o->view);
	}
	int st = send_create(c, o, &w, out);
	return st ? fe_rt_leave(st) : cudaSuccess;
}

/* Destroys travel async: the value was checked here, the server checks again. */
static cudaError_t destroy(fe_api_site site, uint64_t value, int surface)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (value == 0) /* as CUDA: nothing to destroy */
		return cudaSuccess;
	texobj *o = take(value, surface);
	if (!o)
		return fe_rt_fail(cudaErrorInvalidValue);
	free(o);
	return fe_rt_leave(surface ? fe_rpc_surf_destroy(c, value) : fe_rpc_tex_destroy(c, value));
}

cudaError_t fe_texobj_destroy(fe_api_site site, uint64_t value, int surface) { return destroy(site, value, surface); }

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject) { return destroy(FE_API_SITE, texObject, 0); }

/* The record of a live object, for a Get*Desc call. */
static cudaError_t lookup(fe_api_site site, uint64_t value, int surface, const void *out, texobj *o)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (!out || find(value, surface, o) != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	return cudaSuccess;
}

cudaError_t fe_texobj_get(fe_api_site site, uint64_t value, int surface, CUDA_RESOURCE_DESC *res,
			  CUDA_TEXTURE_DESC *tex, CUDA_RESOURCE_VIEW_DESC *view)
{
	texobj o;
	const void *out = res ? (const void *)res : tex ? (const void *)tex : (const void *)view;
	cudaError_t e = lookup(site, value, surface, out, &o);
	if (e != cudaSuccess)
		return e;
	if (res)
		*res = o.dres;
	if (tex)
		*tex = o.dtex;
	if (view && o.has_view)
		*view = o.dview;
	return cudaSuccess;
}

cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *pResDesc, cudaTextureObject_t texObject)
{
	texobj o;
	cudaError_t e = lookup(FE_API_SITE, texObject, 0, pResDesc, &o);
	if (e == cudaSuccess)
		*pResDesc = o.res;
	return e;
}

cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc *pTexDesc, cudaTextureObject_t texObject)
{
	texobj o;
	cudaError_t e = lookup(FE_API_SITE, texObject, 0, pTexDesc, &o);
	if (e == cudaSuccess)
		*pTexDesc = o.tex;
	return e;
}

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *pSurfObject, const struct cudaResourceDesc *pResDesc)
{
	fe_conn *c;
	wire_res w;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pSurfObject || !pResDesc || pResDesc->resType != cudaResourceTypeArray)
		return fe_rt_fail(cudaErrorInvalidValue);
	texobj *o = calloc(1, sizeof(*o));
	if (!o)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	if ((e = driver_res(pResDesc, &o->dres)) != cudaSuccess || (e = wire_resource(&o->dres, &w)) != cudaSuccess) {
		free(o);
		return fe_rt_fail(e);
	}
	o->surface = 1;
	o->res = *pResDesc;
	uint64_t v;
	int st = send_create(c, o, &w, &v);
	if (st)
		return fe_rt_leave(st);
	*pSurfObject = (cudaSurfaceObject_t)v;
	return cudaSuccess;
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) { return destroy(FE_API_SITE, surfObject, 1); }

cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *pResDesc, cudaSurfaceObject_t surfObject)
{
	texobj o;
	cudaError_t e = lookup(FE_API_SITE, surfObject, 1, pResDesc, &o);
	if (e == cudaSuccess)
		*pResDesc = o.res;
	return e;
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
