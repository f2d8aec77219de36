/*
 * CUDA arrays and the copies to and from them. An array is an id the client
 * chose, mapped in the session's table to the driver's CUarray and the shape it
 * was created with (be_array). Every copy names a box of the array, x in bytes,
 * y in rows, z in slices, which is checked against that shape here; the device
 * side of a copy is checked against the session's allocations (ranges.h), as for
 * the other copies. A stale or unknown id is CUDA_ERROR_INVALID_HANDLE.
 *
 * Every copy is one cuMemcpy3DAsync: it takes arrays of any dimension (a 1D
 * array is one row, a 2D array one slice). Host sides are staging buffers,
 * packed (width bytes per row, rows and slices back to back), with the same
 * life as in op_copy.c: H2A payloads were received into staging before the
 * frame got here, A2H replies go from staging once the copy is done (waiter).
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "tenants.h"

/* A box inside an array, or the device or host memory on the other side. */
typedef struct box {
	uint64_t x, y, z;          /* origin: bytes, rows, slices */
	uint64_t w, h, d;          /* extent: bytes, rows, slices */
} box;

static int array_box_ok(be_session *s, const char *op, const be_array *a, const box *b);
static int dev_box_ok(be_session *s, const char *op, CUdeviceptr p, uint64_t pitch, uint64_t rows, const box *b);
static void set_array(CUDA_MEMCPY3D *c, int dst, const be_array *a, const box *b);
static void set_dev(CUDA_MEMCPY3D *c, int dst, CUdeviceptr p, uint64_t pitch, uint64_t rows);
static void set_host(CUDA_MEMCPY3D *c, int dst, void *p, const box *b);
static void set_extent(CUDA_MEMCPY3D *c, const box *b);
static int packed_len(const box *b, uint64_t *out);
static uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, uint32_t elem);

/* What an array takes, as the tenant's quota counts it: its elements (the
 * driver's padding is not known here). UINT64_MAX when that overflows, which
 * no quota admits. */
static uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, uint32_t elem)
{
	uint64_t n = elem, dims[3] = {d->Width, d->Height ? d->Height : 1, d->Depth ? d->Depth : 1};
	for (int i = 0; i < 3; i++) {
		if (dims[i] && n > UINT64_MAX / dims[i])
			return UINT64_MAX;
		n *= dims[i];
	}
	return n;
}

int be_array_elem_size(uint32_t format, uint32_t channels, uint32_t *out)
{
	uint32_t bytes;
	switch (format) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8: bytes = 1; break;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: bytes = 2; break;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: bytes = 4; break;
	default: return 0;
	}
	if (channels != 1 && channels != 2 && channels != 4)
		return 0;
	*out = bytes * channels;
	return 1;
}

int be_op_array_create(be_session *s, be_req *rq, uint64_t id, uint64_t width, uint64_t height, uint64_t depth,
		       uint32_t format, uint32_t channels, uint32_t flags)
{
	be_array *a;
	uint32_t elem;
	CUresult r;
	int err;

	if (!be_array_elem_size(format, channels, &elem)) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": array_create: format 0x%x with %u channels", s->id, format,
			 channels);
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* Check the id first: an array created for a rejected id would leak. */
	if (id == 0 || be_htab_get(&s->arrays, id, NULL, NULL) == BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": array_create %" PRIu64 ": %s", s->id, id,
			 be_h_strerror(id ? BE_H_EINUSE : BE_H_EZERO));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (!(a = calloc(1, sizeof(*a))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->d = (CUDA_ARRAY3D_DESCRIPTOR){.Width = (size_t)width, .Height = (size_t)height, .Depth = (size_t)depth,
					 .Format = (CUarray_format)format, .NumChannels = channels, .Flags = flags};
	a->elem = elem;
	a->charged = array_bytes(&a->d, elem);
	if ((err = be_tenant_charge(s, a->charged))) {
		free(a);
		return err;
	}
	if ((r = be_drv.cuArray3DCreate(&a->h, &a->d)) != CUDA_SUCCESS) {
		be_tenant_uncharge(s, a->charged);
		free(a);
		return r;
	}
	if ((err = be_htab_add(&s->arrays, id, a, 0))) {
		be_drv.cuArrayDestroy(a->h);
		be_tenant_uncharge(s, a->charged);
		free(a);
		return be_h_status(err, CUDA_ERROR_INVALID_HANDLE);
	}
	return CUDA_SUCCESS;
}

int be_op_array_destroy(be_session *s, be_req *rq, uint64_t id)
{
	be_array *a;
	CUresult r;
	int err;

	if ((err = be_get_array(s, id, &a)))
		return err;
	/* Only a successful destroy forgets the array: otherwise it is still
	 * there and the teardown must destroy it. */
	if ((r = be_drv.cuArrayDestroy(a->h)) != CUDA_SUCCESS)
		return r;
	be_htab_del(&s->arrays, id, NULL, NULL);
	be_tenant_uncharge(s, a->charged);
	free(a);
	return CUDA_SUCCESS;
}

/* ---- boxes ---- */

/* b lies inside a, in whole elements. */
static int array_box_ok(be_session *s, const char *op, const be_array *a, const box *b)
{
	uint64_t W = (uint64_t)a->d.Width * a->elem, H = a->d.Height ? a->d.Height : 1, D = a->d.Depth ? a->d.Depth : 1;
	if (b->x <= W && b->w <= W - b->x && b->y <= H && b->h <= H - b->y && b->z <= D && b->d <= D - b->z &&
	    b->x % a->elem == 0 && b->w % a->elem == 0)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: box (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ") + (%" PRIu64 ", %" PRIu64
		 ", %" PRIu64 ") outside an array of %" PRIu64 " x %" PRIu64 " x %" PRIu64 " bytes/rows/slices",
		 s->id, op, b->x, b->y, b->z, b->w, b->h, b->d, W, H, D);
	return CUDA_ERROR_INVALID_VALUE;
}

/* d slices of h rows of w bytes from p, rows pitch apart, slices rows * pitch
 * apart, lie inside one allocation of the session. */
static int dev_box_ok(be_session *s, const char *op, CUdeviceptr p, uint64_t pitch, uint64_t rows, const box *b)
{
	/* An empty box or a pitch below the width is refused here, where the
	 * range check alone would let them pass. */
	if (!b->w || !b->h || !b->d || pitch < b->w || !be_ranges_check_3d(&s->ranges, p, pitch, rows, b->w, b->h, b->d))
		return be_bad_range(s, op, p, b->w);
	return 0;
}

/* ---- one side of a CUDA_MEMCPY3D (dst: the destination side, else the source) ---- */

static void set_array(CUDA_MEMCPY3D *c, int dst, const be_array *a, const box *b)
{
	if (dst) {
		c->dstMemoryType = CU_MEMORYTYPE_ARRAY;
		c->dstArray = a->h;
		c->dstXInBytes = (size_t)b->x;
		c->dstY = (size_t)b->y;
		c->dstZ = (size_t)b->z;
	} else {
		c->srcMemoryType = CU_MEMORYTYPE_ARRAY;
		c->srcArray = a->h;
		c->srcXInBytes = (size_t)b->x;
		c->srcY = (size_t)b->y;
		c->srcZ = (size_t)b->z;
	}
}

static void set_dev(CUDA_MEMCPY3D *c, int dst, CUdeviceptr p, uint64_t pitch, uint64_t rows)
{
	if (dst) {
		c->dstMemoryType = CU_MEMORYTYPE_DEVICE;
		c->dstDevice = p;
		c->dstPitch = (size_t)pitch;
		c->dstHeight = (size_t)rows;
	} else {
		c->srcMemoryType = CU_MEMORYTYPE_DEVICE;
		c->srcDevice = p;
		c->srcPitch = (size_t)pitch;
		c->srcHeight = (size_t)rows;
	}
}

/* A packed host buffer of the box's size. */
static void set_host(CUDA_MEMCPY3D *c, int dst, void *p, const box *b)
{
	if (dst) {
		c->dstMemoryType = CU_MEMORYTYPE_HOST;
		c->dstHost = p;
		c->dstPitch = (size_t)b->w;
		c->dstHeight = (size_t)b->h;
	} else {
		c->srcMemoryType = CU_MEMORYTYPE_HOST;
		c->srcHost = p;
		c->srcPitch = (size_t)b->w;
		c->srcHeight = (size_t)b->h;
	}
}

static void set_extent(CUDA_MEMCPY3D *c, const box *b)
{
	c->WidthInBytes = (size_t)b->w;
	c->Height = (size_t)b->h;
	c->Depth = (size_t)b->d;
}

/* w * h * d without wrapping; 0 if it would. */
static int packed_len(const box *b, uint64_t *out)
{
	if ((b->h && b->w > UINT64_MAX / b->h) || (b->d && b->w * b->h > UINT64_MAX / b->d))
		return 0;
	*out = b->w * b->h * b->d;
	return 1;
}

/* ---- copies ---- */

int be_op_memcpy_htoa(be_session *s, be_req *rq, uint64_t dst_id, uint64_t x, uint64_t y, uint64_t z, uint64_t width,
		      uint64_t height, uint64_t depth, uint64_t stream_id)
{
	box b = {x, y, z, width, height, depth};
	uint64_t len = be_req_payload_len(rq), want;
	be_buf *pb = be_req_payload(rq);
	be_array *a;
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)) || (err = be_get_array(s, dst_id, &a)))
		return err;
	if (!packed_len(&b, &want) || want != len) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": memcpy_htoa: payload of %" PRIu64 " bytes for a box of %" PRIu64
			 " x %" PRIu64 " x %" PRIu64, s->id, len, width, height, depth);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (len == 0)
		return CUDA_SUCCESS;
	if ((err = array_box_ok(s, "memcpy_htoa", a, &b)) || (err = be_stream_capturing(st)))
		return err;
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	set_host(&c, 0, pb->p, &b);
	set_array(&c, 1, a, &b);
	set_extent(&c, &b);
	return be_htod_done(s, st, pb, be_drv.cuMemcpy3DAsync(&c, st));
}

int be_op_memcpy_atoh(be_session *s, be_req *rq, uint64_t src_id, uint64_t x, uint64_t y, uint64_t z, uint64_t width,
		      uint64_t height, uint64_t depth, uint64_t stream_id)
{
	box b = {x, y, z, width, height, depth};
	uint64_t len;
	be_array *a;
	CUstream st;
	be_buf out;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)) || (err = be_get_array(s, src_id, &a)))
		return err;
	if (!packed_len(&b, &len) || len > PROTO_MAX_PAYLOAD)
		return CUDA_ERROR_INVALID_VALUE;
	if (len == 0)
		return CUDA_SUCCESS;
	if ((err = array_box_ok(s, "memcpy_atoh", a, &b)) || (err = be_stream_capturing(st)))
		return err;
	if (be_staging_take(&s->staging, (size_t)len, &out) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	set_array(&c, 0, a, &b);
	set_host(&c, 1, out.p, &b);
	set_extent(&c, &b);
	if ((r = be_drv.cuMemcpy3DAsync(&c, st)) != CUDA_SUCCESS) {
		be_staging_release(&s->staging, &out);
		return r;
	}
	return be_waiter_after(s, st, rq, &out, (size_t)len, NULL);
}

/* Device memory <-> an array (to_array: device to array). */
static int dev_array(be_session *s, const char *op, int to_array, uint64_t arr_id, const box *b, CUdeviceptr p,
		     uint64_t pitch, uint64_t rows, uint64_t stream_id)
{
	be_array *a;
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)) || (err = be_get_array(s, arr_id, &a)))
		return err;
	if (!b->w || !b->h || !b->d)
		return CUDA_SUCCESS;
	if ((err = array_box_ok(s, op, a, b)) || (err = dev_box_ok(s, op, p, pitch, rows, b)))
		return err;
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	set_dev(&c, !to_array, p, pitch, rows);
	set_array(&c, to_array, a, b);
	set_extent(&c, b);
	return be_drv.cuMemcpy3DAsync(&c, st);
}

int be_op_memcpy_dtoa(be_session *s, be_req *rq, uint64_t dst_id, uint64_t x, uint64_t y, uint64_t z, CUdeviceptr src,
		      uint64_t spitch, uint64_t sheight, uint64_t width, uint64_t height, uint64_t depth,
		      uint64_t stream_id)
{
	box b = {x, y, z, width, height, depth};
	return dev_array(s, "memcpy_dtoa", 1, dst_id, &b, src, spitch, sheight, stream_id);
}

int be_op_memcpy_atod(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t dpitch, uint64_t dheight, uint64_t src_id,
		      uint64_t x, uint64_t y, uint64_t z, uint64_t width, uint64_t height, uint64_t depth,
		      uint64_t stream_id)
{
	box b = {x, y, z, width, height, depth};
	return dev_array(s, "memcpy_atod", 0, src_id, &b, dst, dpitch, dheight, stream_id);
}

int be_op_memcpy_atoa(be_session *s, be_req *rq, uint64_t dst_id, uint64_t dx, uint64_t dy, uint64_t dz,
		      uint64_t src_id, uint64_t sx, uint64_t sy, uint64_t sz, uint64_t width, uint64_t height,
		      uint64_t depth, uint64_t stream_id)
{
	box db = {dx, dy, dz, width, height, depth}, sb = {sx, sy, sz, width, height, depth};
	be_array *da, *sa;
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)) || (err = be_get_array(s, dst_id, &da)) ||
	    (err = be_get_array(s, src_id, &sa)))
		return err;
	if (!width || !height || !depth)
		return CUDA_SUCCESS;
	if ((err = array_box_ok(s, "memcpy_atoa (dst)", da, &db)) || (err = array_box_ok(s, "memcpy_atoa (src)", sa, &sb)))
		return err;
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	set_array(&c, 0, sa, &sb);
	set_array(&c, 1, da, &db);
	set_extent(&c, &db);
	return be_drv.cuMemcpy3DAsync(&c, st);
}
