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
 */
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

typedef struct texobj {
	uint64_t value;
	int surface, device;
	struct cudaResourceDesc res;
	struct cudaTextureDesc tex;
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

static cudaError_t wire_resource(const struct cudaResourceDesc *r, wire_res *w)
{
	fe_array a;
	uint32_t elem;
	cudaError_t e;

	memset(w, 0, sizeof(*w));
	w->kind = (uint32_t)r->resType; /* the runtime's and driver's numbers agree */
	switch (r->resType) {
	case cudaResourceTypeArray:
		if ((e = fe_array_get(r->res.array.array, &a)) != cudaSuccess)
			return e;
		w->arr = a.id;
		w->is_int = is_int_format(a.format);
		return cudaSuccess;
	case cudaResourceTypeLinear:
		if ((e = fe_channel_format(&r->res.linear.desc, &w->format, &w->channels, &elem)) != cudaSuccess)
			return e;
		if (!fe_mem_device_ok(r->res.linear.devPtr, r->res.linear.sizeInBytes))
			return cudaErrorInvalidValue;
		w->ptr = (uintptr_t)r->res.linear.devPtr;
		w->width = r->res.linear.sizeInBytes;
		break;
	case cudaResourceTypePitch2D:
		if ((e = fe_channel_format(&r->res.pitch2D.desc, &w->format, &w->channels, &elem)) != cudaSuccess)
			return e;
		w->ptr = (uintptr_t)r->res.pitch2D.devPtr;
		w->width = r->res.pitch2D.width;
		w->height = r->res.pitch2D.height;
		w->pitch = r->res.pitch2D.pitchInBytes;
		if (w->height && (w->width > SIZE_MAX / elem || w->pitch < w->width * elem ||
				  !fe_mem_device_ok(r->res.pitch2D.devPtr, w->pitch * (w->height - 1) + w->width * elem)))
			return cudaErrorInvalidValue;
		break;
	default:
		rg_log_once("frontend", "not supported (mipmapped arrays are not implemented)",
			    "a texture object on a mipmapped array");
		return cudaErrorNotSupported;
	}
	w->is_int = is_int_format(w->format);
	return cudaSuccess;
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

void fe_texobj_forget_device(int device)
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

cudaError_t cudaCreateTextureObject(cudaTextureObject_t *pTexObject, const struct cudaResourceDesc *pResDesc,
				    const struct cudaTextureDesc *pTexDesc, const struct cudaResourceViewDesc *pResViewDesc)
{
	fe_conn *c;
	wire_res w;
	CUDA_TEXTURE_DESC td;
	CUDA_RESOURCE_VIEW_DESC vd;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pTexObject || !pResDesc || !pTexDesc)
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = wire_resource(pResDesc, &w)) != cudaSuccess)
		return fe_rt_fail(e);
	driver_tex(pTexDesc, w.is_int, &td);
	if (pResViewDesc)
		driver_view(pResViewDesc, &vd);
	texobj *o = calloc(1, sizeof(*o));
	if (!o)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	int st = fe_rpc_tex_create(c, w.kind, w.arr, w.ptr, w.format, w.channels, w.width, w.height, w.pitch, &td,
				   sizeof(td), pResViewDesc ? &vd : NULL, pResViewDesc ? sizeof(vd) : 0, &o->value);
	if (st) {
		free(o);
		return fe_rt_leave(st);
	}
	o->device = fe_rt_current_device();
	o->res = *pResDesc;
	o->tex = *pTexDesc;
	remember(o);
	*pTexObject = (cudaTextureObject_t)o->value;
	return cudaSuccess;
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
	fe_array a;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pSurfObject || !pResDesc || pResDesc->resType != cudaResourceTypeArray)
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = fe_array_get(pResDesc->res.array.array, &a)) != cudaSuccess)
		return fe_rt_fail(e);
	texobj *o = calloc(1, sizeof(*o));
	if (!o)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	int st = fe_rpc_surf_create(c, a.id, &o->value);
	if (st) {
		free(o);
		return fe_rt_leave(st);
	}
	o->surface = 1;
	o->device = fe_rt_current_device();
	o->res = *pResDesc;
	remember(o);
	*pSurfObject = (cudaSurfaceObject_t)o->value;
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
