/*
 * Driver API: texture and surface objects. They are the runtime's (rt_texture.c
 * keeps them, with both APIs' descriptors): the value is the server's driver's,
 * which kernels take; the descriptors given at creation answer the Get calls.
 * As the driver: resource flags must be 0, a surface is on an array, a destroy
 * of 0 does nothing; a value this process never had (undefined in CUDA) is
 * CUDA_ERROR_INVALID_VALUE.
 */
#include "drv.h"
#include "rt.h"

static CUresult create(fe_api_site site, uint64_t *out, int surface, const CUDA_RESOURCE_DESC *res,
		       const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view)
{
	fe_drv_begin();
	return fe_drv_end(fe_texobj_create(site, out, surface, res, tex, view));
}

static CUresult destroy(fe_api_site site, uint64_t value, int surface)
{
	fe_drv_begin();
	return fe_drv_end(fe_texobj_destroy(site, value, surface));
}

static CUresult get(fe_api_site site, uint64_t value, int surface, CUDA_RESOURCE_DESC *res, CUDA_TEXTURE_DESC *tex,
		    CUDA_RESOURCE_VIEW_DESC *view)
{
	fe_drv_begin();
	return fe_drv_end(fe_texobj_get(site, value, surface, res, tex, view));
}

CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
			   const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
	uint64_t v;
	CUresult r = create(FE_API_SITE, pTexObject ? &v : NULL, 0, pResDesc, pTexDesc, pResViewDesc);
	if (r == CUDA_SUCCESS)
		*pTexObject = (CUtexObject)v;
	return r;
}

CUresult cuTexObjectDestroy(CUtexObject texObject) { return destroy(FE_API_SITE, texObject, 0); }

CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
	return get(FE_API_SITE, texObject, 0, pResDesc, NULL, NULL);
}

CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
	return get(FE_API_SITE, texObject, 0, NULL, pTexDesc, NULL);
}

CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc, CUtexObject texObject)
{
	return get(FE_API_SITE, texObject, 0, NULL, NULL, pResViewDesc);
}

CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
	uint64_t v;
	CUresult r = create(FE_API_SITE, pSurfObject ? &v : NULL, 1, pResDesc, NULL, NULL);
	if (r == CUDA_SUCCESS)
		*pSurfObject = (CUsurfObject)v;
	return r;
}

CUresult cuSurfObjectDestroy(CUsurfObject surfObject) { return destroy(FE_API_SITE, surfObject, 1); }

CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
	return get(FE_API_SITE, surfObject, 1, pResDesc, NULL, NULL);
}
