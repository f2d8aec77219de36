/*
 * CUDA arrays and the copies to and from them. A cudaArray_t here is an id the
 * client chose (as for streams); the server maps it to its CUarray. The client
 * keeps each array's shape and format, so cudaArrayGetInfo costs no round trip,
 * copies are checked at the call (a box outside the array is
 * cudaErrorInvalidValue, a freed or foreign array cudaErrorInvalidResourceHandle),
 * and element counts become bytes here, once.
 *
 * Every copy is a box of the array (x in bytes, y in rows, z in slices) and a
 * pointer side (the address of the box's first byte, its row pitch and rows per
 * slice). Host data travel as payloads, packed like those of the 2D copies, cut
 * into frames of at most FE_COPY_CHUNK bytes by whole rows; a copy from an
 * array to the host waits for its data even when async (it is unpacked here),
 * as the pitched 2D copy does. Device and array-to-array copies are one frame.
 */
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

/* One side of an array copy (rt.h). */
typedef fe_array_side side;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fe_array *arrays;

static cudaError_t array_new(fe_api_site site, cudaArray_t *out, const struct cudaChannelFormatDesc *desc,
			     struct cudaExtent ext, unsigned flags);
static cudaError_t copy_box(fe_api_site site, side *dst, side *src, size_t w, size_t h, size_t d,
			    enum cudaMemcpyKind kind, cudaStream_t stream);

cudaError_t fe_channel_format(const struct cudaChannelFormatDesc *d, unsigned *format, unsigned *channels,
			      uint32_t *elem)
{
	int bits[4] = {d->x, d->y, d->z, d->w}, n = 0;
	while (n < 4 && bits[n] != 0)
		n++;
	/* Channels are x, y, z, w in that order, all of one size; the driver has
	 * 1, 2 or 4 of them. */
	for (int i = 0; i < 4; i++)
		if ((i < n && bits[i] != bits[0]) || (i >= n && bits[i] != 0))
			return cudaErrorInvalidChannelDescriptor;
	if (n == 0 || n == 3)
		return cudaErrorInvalidChannelDescriptor;
	switch (d->f) {
	case cudaChannelFormatKindSigned:
	case cudaChannelFormatKindUnsigned: {
		int u = d->f == cudaChannelFormatKindUnsigned;
		if (bits[0] == 8)
			*format = u ? CU_AD_FORMAT_UNSIGNED_INT8 : CU_AD_FORMAT_SIGNED_INT8;
		else if (bits[0] == 16)
			*format = u ? CU_AD_FORMAT_UNSIGNED_INT16 : CU_AD_FORMAT_SIGNED_INT16;
		else if (bits[0] == 32)
			*format = u ? CU_AD_FORMAT_UNSIGNED_INT32 : CU_AD_FORMAT_SIGNED_INT32;
		else
			return cudaErrorInvalidChannelDescriptor;
		break;
	}
	case cudaChannelFormatKindFloat:
		if (bits[0] == 16)
			*format = CU_AD_FORMAT_HALF;
		else if (bits[0] == 32)
			*format = CU_AD_FORMAT_FLOAT;
		else
			return cudaErrorInvalidChannelDescriptor;
		break;
	default:
		rg_log_once("frontend", "not supported (only signed, unsigned and float channels)",
			    "a CUDA array or texture of another channel kind");
		return cudaErrorNotSupported;
	}
	*channels = (unsigned)n;
	*elem = (uint32_t)(n * bits[0] / 8);
	return cudaSuccess;
}

cudaError_t fe_channel_desc(unsigned format, unsigned channels, struct cudaChannelFormatDesc *d, uint32_t *elem)
{
	int bits;
	enum cudaChannelFormatKind f;
	switch (format) {
	case CU_AD_FORMAT_UNSIGNED_INT8: bits = 8, f = cudaChannelFormatKindUnsigned; break;
	case CU_AD_FORMAT_UNSIGNED_INT16: bits = 16, f = cudaChannelFormatKindUnsigned; break;
	case CU_AD_FORMAT_UNSIGNED_INT32: bits = 32, f = cudaChannelFormatKindUnsigned; break;
	case CU_AD_FORMAT_SIGNED_INT8: bits = 8, f = cudaChannelFormatKindSigned; break;
	case CU_AD_FORMAT_SIGNED_INT16: bits = 16, f = cudaChannelFormatKindSigned; break;
	case CU_AD_FORMAT_SIGNED_INT32: bits = 32, f = cudaChannelFormatKindSigned; break;
	case CU_AD_FORMAT_HALF: bits = 16, f = cudaChannelFormatKindFloat; break;
	case CU_AD_FORMAT_FLOAT: bits = 32, f = cudaChannelFormatKindFloat; break;
	default:
		/* The driver's other formats (normalized, block-compressed, video):
		 * cuda.h 13.0 numbers them in these ranges. */
		if (format == 0x50 || (format >= 0x91 && format <= 0xa9 && format != 0xa0) ||
		    (format >= 0xb0 && format <= 0xb5) || (format >= 0xc0 && format <= 0xcb)) {
			rg_log_once("frontend", "not supported (only signed, unsigned and float channels)",
				    "a CUDA array or texture of another format");
			return cudaErrorNotSupported;
		}
		return cudaErrorInvalidValue;
	}
	if (channels != 1 && channels != 2 && channels != 4)
		return cudaErrorInvalidValue;
	*d = (struct cudaChannelFormatDesc){bits, channels > 1 ? bits : 0, channels > 2 ? bits : 0,
					    channels > 2 ? bits : 0, f};
	*elem = (uint32_t)(channels * bits / 8);
	return cudaSuccess;
}

/* cudaCreateChannelDesc is host code in libcudart; defined here too, so that it
 * does not depend on what the real libcudart does without a driver. */
struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
	struct cudaChannelFormatDesc d = {x, y, z, w, f};
	return d;
}

/* ---- arrays ---- */

static cudaError_t array_new(fe_api_site site, cudaArray_t *out, const struct cudaChannelFormatDesc *desc,
			     struct cudaExtent ext, unsigned flags)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (!out || !desc)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_array *a = calloc(1, sizeof(*a));
	if (!a)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	if ((e = fe_channel_format(desc, &a->format, &a->channels, &a->elem)) != cudaSuccess) {
		free(a);
		return fe_rt_fail(e);
	}
	a->id = fe_rt_new_id();
	a->device = fe_rt_current_device();
	a->desc = *desc;
	a->extent = ext;
	a->flags = flags;
	/* Synchronous: an allocation that fails must fail here. */
	int st = fe_rpc_array_create(c, a->id, ext.width, ext.height, ext.depth, a->format, a->channels, flags);
	if (st) {
		free(a);
		return fe_rt_leave(st);
	}
	pthread_mutex_lock(&lock);
	a->next = arrays;
	arrays = a;
	pthread_mutex_unlock(&lock);
	*out = (cudaArray_t)(uintptr_t)a->id;
	return cudaSuccess;
}
/* Counted under the entry point that called it (stats.h). */
#define array_new(...) array_new(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc, size_t width, size_t height,
			    unsigned int flags)
{
	return array_new(array, desc, (struct cudaExtent){width, height, 0}, flags);
}

cudaError_t cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc, struct cudaExtent extent,
			      unsigned int flags)
{
	return array_new(array, desc, extent, flags);
}

/* Unlinks the record of id (NULL if there is none). */
static fe_array *array_take(uint64_t id)
{
	pthread_mutex_lock(&lock);
	fe_array **pp = &arrays;
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	fe_array *a = *pp;
	if (a)
		*pp = a->next;
	pthread_mutex_unlock(&lock);
	return a;
}

cudaError_t fe_array_get(cudaArray_const_t h, fe_array *out)
{
	uint64_t id = (uint64_t)(uintptr_t)h;
	pthread_mutex_lock(&lock);
	fe_array *a = arrays;
	while (a && a->id != id)
		a = a->next;
	if (a)
		*out = *a;
	pthread_mutex_unlock(&lock);
	return a ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

static void forget(int device)
{
	pthread_mutex_lock(&lock);
	for (fe_array **pp = &arrays; *pp;) {
		fe_array *a = *pp;
		if (device < 0 || a->device == device) {
			*pp = a->next;
			free(a);
		} else {
			pp = &a->next;
		}
	}
	pthread_mutex_unlock(&lock);
}

cudaError_t cudaFreeArray(cudaArray_t array)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!array)
		return cudaSuccess;
	fe_array *a = array_take((uint64_t)(uintptr_t)array);
	if (!a)
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	uint64_t id = a->id;
	free(a);
	return fe_rt_leave(fe_rpc_array_destroy(c, id));
}

cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc *desc, struct cudaExtent *extent, unsigned int *flags,
			     cudaArray_t array)
{
	fe_conn *c;
	fe_array a;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if ((e = fe_array_get(array, &a)) != cudaSuccess)
		return fe_rt_fail(e);
	if (desc)
		*desc = a.desc;
	if (extent)
		*extent = a.extent;
	if (flags)
		*flags = a.flags;
	return cudaSuccess;
}

cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc *desc, cudaArray_const_t array)
{
	fe_conn *c;
	fe_array a;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!desc)
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = fe_array_get(array, &a)) != cudaSuccess)
		return fe_rt_fail(e);
	*desc = a.desc;
	return cudaSuccess;
}

/* ---- copies ---- */

static side array_side(cudaArray_const_t a, size_t x, size_t y, size_t z, cudaError_t *e)
{
	side s = {.is_array = 1, .x = x, .y = y, .z = z};
	if (*e == cudaSuccess)
		*e = fe_array_get(a, &s.a);
	return s;
}

static side ptr_side(const void *p, size_t pitch, size_t rows)
{
	return (side){.p = (char *)p, .pitch = pitch, .rows = rows};
}

/* The box lies inside the array, in whole elements. */
static int box_in_array(const side *s, size_t w, size_t h, size_t d)
{
	const fe_array *a = &s->a;
	uint64_t W = (uint64_t)a->extent.width * a->elem, H = a->extent.height ? a->extent.height : 1,
		 D = a->extent.depth ? a->extent.depth : 1;
	return s->x <= W && w <= W - s->x && s->y <= H && h <= H - s->y && s->z <= D && d <= D - s->z &&
	       s->x % a->elem == 0 && w % a->elem == 0;
}

/* Where a pointer side lies, from the kind (as cudaMemcpy trusts it) or, for
 * cudaMemcpyDefault and managed memory, from the pointer; 0 or
 * cudaErrorInvalidMemcpyDirection when the kind names the wrong side. */
static cudaError_t place(side *s, enum cudaMemcpyKind kind, int is_src)
{
	int k = fe_mem_kind(s->p);
	if (kind == cudaMemcpyDefault || k == FE_MEM_MANAGED) {
		s->dev = k == FE_MEM_DEVICE || k == FE_MEM_MODULE || k == FE_MEM_MANAGED;
		return cudaSuccess;
	}
	if (kind == cudaMemcpyDeviceToDevice || kind == (is_src ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost)) {
		s->dev = kind == cudaMemcpyDeviceToDevice;
		return cudaSuccess;
	}
	return cudaErrorInvalidMemcpyDirection;
}

/* Bytes from a pointer side's first byte to the end of its box; 0 if they do
 * not fit in a size_t or the rows overlap. */
static size_t ptr_span(const side *s, size_t w, size_t h, size_t d)
{
	if (s->pitch < w || (d > 1 && s->rows < h))
		return 0;
	size_t slice = s->pitch * s->rows;
	if ((s->rows && slice / s->rows != s->pitch) || (d > 1 && slice && d - 1 > SIZE_MAX / slice))
		return 0;
	return (d - 1) * slice + (h - 1) * s->pitch + w;
}

/* Host rows to or from an array, FE_COPY_CHUNK bytes a frame at most. */
static int host_rows(fe_conn *c, const side *arr, side *host, int to_array, size_t w, size_t h, size_t d,
		     uint64_t sid)
{
	size_t per = FE_COPY_CHUNK / w ? FE_COPY_CHUNK / w : 1;
	uint8_t *tmp = host->pitch == w ? NULL : malloc(w * (per < h ? per : h));
	if (host->pitch != w && !tmp)
		return cudaErrorMemoryAllocation;
	int st = 0;
	for (size_t z = 0; z < d && !st; z++) {
		for (size_t y = 0; y < h && !st; y += per) {
			size_t n = h - y < per ? h - y : per;
			char *rows = host->p + z * host->pitch * host->rows + y * host->pitch;
			uint8_t *buf = tmp ? tmp : (uint8_t *)rows;
			if (to_array) {
				for (size_t r = 0; tmp && r < n; r++)
					memcpy(tmp + r * w, rows + r * host->pitch, w);
				st = fe_rpc_memcpy_htoa(c, arr->a.id, arr->x, arr->y + y, arr->z + z, w, n, 1, sid, buf,
							 w * n);
			} else {
				st = fe_rpc_memcpy_atoh(c, arr->a.id, arr->x, arr->y + y, arr->z + z, w, n, 1, sid, buf,
							 w * n);
				for (size_t r = 0; !st && tmp && r < n; r++)
					memcpy(rows + r * host->pitch, tmp + r * w, w);
			}
		}
	}
	free(tmp);
	return st;
}

/* A box of w bytes x h rows x d slices between two sides, at least one an array. */
static cudaError_t copy_box(fe_api_site site, side *dst, side *src, size_t w, size_t h, size_t d,
			    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (w == 0 || h == 0 || d == 0)
		return cudaSuccess;
	side *arr = dst->is_array ? dst : src, *ptr = dst->is_array ? src : dst;
	if ((dst->is_array && !box_in_array(dst, w, h, d)) || (src->is_array && !box_in_array(src, w, h, d)))
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t sid = fe_rt_stream(stream);
	if (ptr->is_array) { /* array to array */
		if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
			return fe_rt_fail(cudaErrorInvalidMemcpyDirection);
		return fe_rt_leave(fe_rpc_memcpy_atoa(c, dst->a.id, dst->x, dst->y, dst->z, src->a.id, src->x, src->y,
						      src->z, w, h, d, sid));
	}
	if (!ptr->p)
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = place(ptr, kind, ptr == src)) != cudaSuccess)
		return fe_rt_fail(e);
	if (d == 1 && ptr->rows < h)
		ptr->rows = h; /* one slice: its height is never used, the driver may still check it */
	size_t span = ptr_span(ptr, w, h, d);
	if (!span)
		return fe_rt_fail(cudaErrorInvalidPitchValue);
	if (!ptr->dev)
		return fe_rt_leave(host_rows(c, arr, ptr, arr == dst, w, h, d, sid));
	if (!fe_mem_device_ok(ptr->p, span))
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t p = (uintptr_t)ptr->p;
	return fe_rt_leave(arr == dst ? fe_rpc_memcpy_dtoa(c, arr->a.id, arr->x, arr->y, arr->z, p, ptr->pitch,
							   ptr->rows, w, h, d, sid)
				      : fe_rpc_memcpy_atod(c, p, ptr->pitch, ptr->rows, arr->a.id, arr->x, arr->y,
							   arr->z, w, h, d, sid));
}
/* Counted under the entry point that called it (stats.h). */
#define copy_box(...) copy_box(FE_API_SITE, __VA_ARGS__)

cudaError_t fe_array_copy(fe_api_site site, side *dst, side *src, size_t w, size_t h, size_t d,
			  enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return (copy_box)(site, dst, src, w, h, d, kind, stream);
}

/* An entry point's lookups failed: counted as its call. */
static cudaError_t lookup_failed(fe_api_site site, cudaError_t e)
{
	fe_conn *c;
	cudaError_t s = fe_rt_enter_site(&c, site);
	return s != cudaSuccess ? s : fe_rt_fail(e);
}
#define lookup_failed(e) lookup_failed(FE_API_SITE, e)

static cudaError_t to_array_2d(fe_api_site site, cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
			       size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	cudaError_t e = cudaSuccess;
	side d = array_side(dst, wOffset, hOffset, 0, &e), s = ptr_side(src, spitch, height);
	return e != cudaSuccess ? (lookup_failed)(site, e)
				: (copy_box)(site, &d, &s, width, height, 1, kind, stream);
}
#define to_array_2d(...) to_array_2d(FE_API_SITE, __VA_ARGS__)

static cudaError_t from_array_2d(fe_api_site site, void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
				 size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
				 cudaStream_t stream)
{
	cudaError_t e = cudaSuccess;
	side s = array_side(src, wOffset, hOffset, 0, &e), d = ptr_side(dst, dpitch, height);
	return e != cudaSuccess ? (lookup_failed)(site, e)
				: (copy_box)(site, &d, &s, width, height, 1, kind, stream);
}
#define from_array_2d(...) from_array_2d(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
				size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, 0);
}

cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, stream);
}

cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
				  size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, 0);
}

cudaError_t cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
				       size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
				       cudaStream_t stream)
{
	return from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream);
}

cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
				     size_t wOffsetSrc, size_t hOffsetSrc, size_t width, size_t height,
				     enum cudaMemcpyKind kind)
{
	cudaError_t e = cudaSuccess;
	side d = array_side(dst, wOffsetDst, hOffsetDst, 0, &e), s = array_side(src, wOffsetSrc, hOffsetSrc, 0, &e);
	return e != cudaSuccess ? lookup_failed(e) : copy_box(&d, &s, width, height, 1, kind, 0);
}

/* cudaMemcpyToArray/FromArray (deprecated): count bytes of the array read as
 * rows back to back from (wOffset, hOffset): the rest of the first row, whole
 * rows, the start of the last, each a 2D copy. */
static cudaError_t linear_copy(fe_api_site site, cudaArray_const_t arr, size_t wOffset, size_t hOffset, char *p,
			       size_t count, enum cudaMemcpyKind kind, cudaStream_t stream, int to_array)
{
	fe_array a;
	cudaError_t e = fe_array_get(arr, &a);
	if (e != cudaSuccess)
		return (lookup_failed)(site, e);
	size_t row = a.extent.width * a.elem, x = wOffset, y = hOffset;
	do {
		/* count 0, or an offset past the row: one box, which copy_box
		 * answers (nothing to do, or cudaErrorInvalidValue) */
		size_t w = count, h = 1;
		if (x == 0 && count >= row) {
			w = row;
			h = count / row;
		} else if (x < row && row - x < count) {
			w = row - x;
		}
		side as = {.is_array = 1, .a = a, .x = x, .y = y}, ps = ptr_side(p, w, h);
		e = to_array ? (copy_box)(site, &as, &ps, w, h, 1, kind, stream)
			     : (copy_box)(site, &ps, &as, w, h, 1, kind, stream);
		if (e != cudaSuccess)
			return e;
		p += w * h;
		count -= w * h;
		y += h;
		x = 0;
	} while (count);
	return cudaSuccess;
}
#define linear_copy(...) linear_copy(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
			      enum cudaMemcpyKind kind)
{
	return linear_copy(dst, wOffset, hOffset, (char *)src, count, kind, 0, 1);
}

cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
				   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return linear_copy(dst, wOffset, hOffset, (char *)src, count, kind, stream, 1);
}

cudaError_t cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
				enum cudaMemcpyKind kind)
{
	return linear_copy(src, wOffset, hOffset, dst, count, kind, 0, 0);
}

cudaError_t cudaMemcpyFromArrayAsync(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
				     enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return linear_copy(src, wOffset, hOffset, dst, count, kind, stream, 0);
}

/* A pointer side of cudaMemcpy3D with an array on the other: its position
 * counts in the array's elements too (measured on an H100: dstPos.x 4 of a
 * float array with a 36-byte pitch and a 4-wide box is accepted, 8 is not),
 * and the box must lie within its pitch and, across slices, its ysize. */
static side ptr_side_3d(const struct cudaPitchedPtr *pp, const struct cudaPos *pos, const struct cudaExtent *ext, size_t elem,
			cudaError_t *e)
{
	if (*e == cudaSuccess && ((pos->x + ext->width) * elem > pp->pitch ||
				  (ext->depth > 1 && pos->y + ext->height > pp->ysize)))
		*e = cudaErrorInvalidValue;
	return ptr_side((char *)pp->ptr + pos->z * pp->pitch * pp->ysize + pos->y * pp->pitch + pos->x * elem,
			pp->pitch, pp->ysize);
}

/* cudaMemcpy3D with an array: extent and both positions are in elements of
 * the array. */
cudaError_t fe_memcpy3d_array(fe_api_site site, const struct cudaMemcpy3DParms *m, cudaStream_t stream)
{
	cudaError_t e = cudaSuccess;
	side s, d;
	if (m->srcArray)
		s = array_side(m->srcArray, 0, m->srcPos.y, m->srcPos.z, &e);
	if (m->dstArray)
		d = array_side(m->dstArray, 0, m->dstPos.y, m->dstPos.z, &e);
	if (e != cudaSuccess)
		return (lookup_failed)(site, e);
	uint32_t elem = m->srcArray ? s.a.elem : d.a.elem;
	if (m->srcArray && m->dstArray && s.a.elem != d.a.elem)
		return (lookup_failed)(site, cudaErrorInvalidValue);
	if (m->extent.width > SIZE_MAX / elem || m->srcPos.x > SIZE_MAX / elem - m->extent.width ||
	    m->dstPos.x > SIZE_MAX / elem - m->extent.width)
		return (lookup_failed)(site, cudaErrorInvalidValue);
	if (!m->srcArray)
		s = ptr_side_3d(&m->srcPtr, &m->srcPos, &m->extent, elem, &e);
	if (!m->dstArray)
		d = ptr_side_3d(&m->dstPtr, &m->dstPos, &m->extent, elem, &e);
	if (e != cudaSuccess)
		return (lookup_failed)(site, e);
	s.x = m->srcArray ? m->srcPos.x * elem : 0;
	d.x = m->dstArray ? m->dstPos.x * elem : 0;
	return (copy_box)(site, &d, &s, m->extent.width * elem, m->extent.height, m->extent.depth, m->kind, stream);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
