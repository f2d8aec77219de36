/*
 * Texture and surface objects. Kernels take them by value, so the client gets
 * the driver's own CUtexObject / CUsurfObject back, not an id of its choosing;
 * the session keeps each value it was given (texobjs, surfobjs: two tables, as
 * the driver numbers the two kinds apart and a value may be both). A destroy
 * must name one of the session's own live values, so a tenant can never destroy
 * another's object (the values are small integers, easy to guess); what the
 * session leaves is destroyed at its teardown.
 *
 * The resource travels as fields, not as the driver's struct: its array is the
 * client's id, looked up here, and a device range is checked against the
 * session's allocations. The texture and view descriptors are plain numbers
 * and travel as the driver's structs, their reserved fields cleared here.
 */
#include "backend.h"

#include <inttypes.h>
#include <string.h>

#include "ops.h"

static int resource(be_session *s, CUDA_RESOURCE_DESC *r, uint32_t kind, uint64_t arr, CUdeviceptr ptr,
		    uint32_t format, uint32_t channels, uint64_t width, uint64_t height, uint64_t pitch);
static int created(be_session *s, be_req *rq, be_htab *t, const char *what, uint64_t obj,
		   CUresult (*destroy)(unsigned long long));
static int forget(be_session *s, be_htab *t, const char *what, uint64_t obj);

/* Fills r from the wire's fields; 0, or the error for the client. */
static int resource(be_session *s, CUDA_RESOURCE_DESC *r, uint32_t kind, uint64_t arr, CUdeviceptr ptr,
		    uint32_t format, uint32_t channels, uint64_t width, uint64_t height, uint64_t pitch)
{
	be_array *a;
	uint32_t elem;
	int err;

	memset(r, 0, sizeof(*r));
	r->resType = (CUresourcetype)kind;
	switch (kind) {
	case CU_RESOURCE_TYPE_ARRAY:
		if ((err = be_get_array(s, arr, &a)))
			return err;
		r->res.array.hArray = a->h;
		return 0;
	case CU_RESOURCE_TYPE_LINEAR:
		if (!be_array_elem_size(format, channels, &elem))
			return CUDA_ERROR_INVALID_VALUE;
		if (!be_ranges_check(&s->ranges, ptr, width))
			return be_bad_range(s, "tex_create (linear)", ptr, width);
		r->res.linear.devPtr = ptr;
		r->res.linear.format = (CUarray_format)format;
		r->res.linear.numChannels = channels;
		r->res.linear.sizeInBytes = (size_t)width;
		return 0;
	case CU_RESOURCE_TYPE_PITCH2D:
		if (!be_array_elem_size(format, channels, &elem) || width > UINT64_MAX / elem)
			return CUDA_ERROR_INVALID_VALUE;
		if (!be_ranges_check_2d(&s->ranges, ptr, pitch, width * elem, height))
			return be_bad_range(s, "tex_create (pitch2D)", ptr, pitch * height);
		r->res.pitch2D.devPtr = ptr;
		r->res.pitch2D.format = (CUarray_format)format;
		r->res.pitch2D.numChannels = channels;
		r->res.pitch2D.width = (size_t)width;
		r->res.pitch2D.height = (size_t)height;
		r->res.pitch2D.pitchInBytes = (size_t)pitch;
		return 0;
	}
	LOG_INFO(BE_LOG, "session %" PRIu64 ": tex_create: resource type %u is not taken", s->id, kind);
	return CUDA_ERROR_INVALID_VALUE;
}

/* Records obj (the driver's new value) in t and answers it; on failure
 * destroys it again. */
static int created(be_session *s, be_req *rq, be_htab *t, const char *what, uint64_t obj,
		   CUresult (*destroy)(unsigned long long))
{
	int err = be_htab_add(t, obj, NULL, 0);
	if (err) {
		/* The driver never gives a value twice while it lives, nor 0. */
		LOG_ERROR(BE_LOG, "session %" PRIu64 ": cannot record %s %" PRIu64 ": %s", s->id, what, obj,
			  be_h_strerror(err));
		destroy(obj);
		return be_h_status(err, CUDA_ERROR_INVALID_VALUE);
	}
	return be_reply_u64(s, rq, obj);
}

/* Removes obj from t if it is one of the session's live objects. */
static int forget(be_session *s, be_htab *t, const char *what, uint64_t obj)
{
	int err = be_htab_del(t, obj, NULL, NULL);
	if (!err)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s %" PRIu64 ": %s", s->id, what, obj, be_h_strerror(err));
	return CUDA_ERROR_INVALID_VALUE;
}

int be_op_tex_create(be_session *s, be_req *rq, uint32_t kind, uint64_t arr, CUdeviceptr ptr, uint32_t format,
		     uint32_t channels, uint64_t width, uint64_t height, uint64_t pitch, const void *desc,
		     size_t desc_len, const void *view, size_t view_len)
{
	CUDA_RESOURCE_DESC res;
	CUDA_TEXTURE_DESC td;
	CUDA_RESOURCE_VIEW_DESC vd;
	CUtexObject obj = 0;
	CUresult r;
	int err;

	if (desc_len != sizeof(td) || (view_len != 0 && view_len != sizeof(vd)))
		return BE_EPROTO;
	if ((err = resource(s, &res, kind, arr, ptr, format, channels, width, height, pitch)))
		return err;
	memcpy(&td, desc, sizeof(td));
	memset(td.reserved, 0, sizeof(td.reserved));
	if (view_len) {
		memcpy(&vd, view, sizeof(vd));
		memset(vd.reserved, 0, sizeof(vd.reserved));
	}
	if ((r = be_drv.cuTexObjectCreate(&obj, &res, &td, view_len ? &vd : NULL)) != CUDA_SUCCESS)
		return r;
	return created(s, rq, &s->texobjs, "texture object", obj, be_drv.cuTexObjectDestroy);
}

int be_op_tex_destroy(be_session *s, be_req *rq, uint64_t obj)
{
	int err;

	if ((err = forget(s, &s->texobjs, "tex_destroy", obj)))
		return err;
	return be_drv.cuTexObjectDestroy((CUtexObject)obj);
}

int be_op_surf_create(be_session *s, be_req *rq, uint64_t arr)
{
	CUDA_RESOURCE_DESC res;
	CUsurfObject obj = 0;
	CUresult r;
	int err;

	/* Surfaces are arrays only (the driver says so too). */
	if ((err = resource(s, &res, CU_RESOURCE_TYPE_ARRAY, arr, 0, 0, 0, 0, 0, 0)))
		return err;
	if ((r = be_drv.cuSurfObjectCreate(&obj, &res)) != CUDA_SUCCESS)
		return r;
	return created(s, rq, &s->surfobjs, "surface object", obj, be_drv.cuSurfObjectDestroy);
}

int be_op_surf_destroy(be_session *s, be_req *rq, uint64_t obj)
{
	int err;

	if ((err = forget(s, &s->surfobjs, "surf_destroy", obj)))
		return err;
	return be_drv.cuSurfObjectDestroy((CUsurfObject)obj);
}
