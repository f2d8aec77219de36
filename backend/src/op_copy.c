/*
 * Copies and memsets. Every device range is checked against the session's
 * allocations first (ranges.h): a copy that would touch anything else is
 * CUDA_ERROR_INVALID_VALUE and never reaches the driver. The D2D copy
 * (memcpy_dtod) is one driver call whose checks api/gen.py writes into the
 * dispatch from its `dptr[len]` arguments, as these handlers make them.
 *
 * H2D: the payload was received into a staging buffer before the frame got here
 * (session.c's payload_dest). From pinned memory the copy is truly async; the
 * buffer goes back to the pool once an event recorded after the copy completes
 * (a waiter entry with no reply). From malloc'd memory (pool empty, or too big)
 * the driver stages the bytes itself before cuMemcpyHtoDAsync returns, so the
 * buffer is freed at once.
 *
 * D2H: the executor copies into a staging buffer and records an event; the
 * waiter replies with the bytes once it completes, so the executor goes on.
 * Run inline by the loop thread (+now, executor.c), the copy needs an idle
 * staging buffer (allocating pinned memory takes milliseconds) and at most
 * BE_NOW_MAX bytes (the loop sends the reply, and reads nothing meanwhile):
 * otherwise it is the executor's (BE_NOT_NOW).
 *
 * Host sides of 2D copies are packed: width bytes per row, no pitch.
 *
 * A stream that is being captured cannot take a copy through a staging buffer:
 * the graph would keep its address and read it again at every launch, long
 * after the buffer went back to the pool. Such copies fail with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (memsets and D2D copies are fine).
 * A memset or D2D copy a capture records is not refused for a range outside the
 * session's memory, as the driver records it (be_capture_unchecked): its graph
 * is marked, and execs of it do not launch.
 */
#include "backend.h"

#include <inttypes.h>
#include <string.h>

#include "ops.h"

int be_htod_done(be_session *s, CUstream st, be_buf *pb, CUresult r)
{
	if (r != CUDA_SUCCESS || pb->kind == BE_BUF_MALLOC) {
		be_staging_release(&s->staging, pb);
		return r;
	}
	return be_waiter_after(s, st, NULL, NULL, 0, pb);
}

int be_op_memcpy_htod(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t stream_id)
{
	uint64_t len = be_req_payload_len(rq);
	be_buf *pb = be_req_payload(rq);
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check(&s->ranges, dst, len))
		return be_bad_range(s, "memcpy_htod", dst, len);
	if ((err = be_stream_capturing(st)))
		return err;
	return be_htod_done(s, st, pb, be_drv.cuMemcpyHtoDAsync(dst, pb->p, (size_t)len, st));
}

/* A staging buffer for a D2H copy's bytes: an idle one when run inline. */
static int take_out(be_session *s, size_t len, be_buf *b)
{
	if (be_inline_now())
		return len <= BE_NOW_MAX && be_staging_take_idle(&s->staging, len, b) == 0 ? 0 : BE_NOT_NOW;
	return be_staging_take(&s->staging, len, b) == 0 ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

int be_op_memcpy_dtoh(be_session *s, be_req *rq, CUdeviceptr src, uint64_t len, uint64_t stream_id)
{
	CUstream st;
	be_buf b;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0)
		return CUDA_SUCCESS;
	if (len > PROTO_MAX_PAYLOAD) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": memcpy_dtoh of %" PRIu64 " bytes: larger than one frame", s->id,
			 len);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!be_ranges_check(&s->ranges, src, len))
		return be_bad_range(s, "memcpy_dtoh", src, len);
	if ((err = be_stream_capturing(st)))
		return err;
	if ((err = take_out(s, (size_t)len, &b)))
		return err;
	if ((r = be_drv.cuMemcpyDtoHAsync(b.p, src, (size_t)len, st)) != CUDA_SUCCESS) {
		be_staging_release(&s->staging, &b);
		return r;
	}
	return be_waiter_after(s, st, rq, &b, (size_t)len, NULL);
}

/* ---- 2D ---- */

/* width * height without wrapping. */
static int packed_size(uint64_t width, uint64_t height, uint64_t *out)
{
	if (height && width > UINT64_MAX / height)
		return 0;
	*out = width * height;
	return 1;
}

int be_op_memcpy_2d_htod(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t dpitch, uint64_t width,
			 uint64_t height, uint64_t stream_id)
{
	uint64_t len = be_req_payload_len(rq), want;
	be_buf *pb = be_req_payload(rq);
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (!packed_size(width, height, &want) || want != len) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": memcpy_2d_htod: payload of %" PRIu64 " bytes for %" PRIu64
			 " rows of %" PRIu64, s->id, len, height, width);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (len == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check_2d(&s->ranges, dst, dpitch, width, height))
		return be_bad_range(s, "memcpy_2d_htod", dst, dpitch * (height - 1) + width);
	if ((err = be_stream_capturing(st)))
		return err;
	CUDA_MEMCPY2D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = pb->p;
	c.srcPitch = (size_t)width;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dst;
	c.dstPitch = (size_t)dpitch;
	c.WidthInBytes = (size_t)width;
	c.Height = (size_t)height;
	return be_htod_done(s, st, pb, be_drv.cuMemcpy2DAsync(&c, st));
}

int be_op_memcpy_2d_dtoh(be_session *s, be_req *rq, CUdeviceptr src, uint64_t spitch, uint64_t width,
			 uint64_t height, uint64_t stream_id)
{
	uint64_t len;
	CUstream st;
	be_buf b;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (!packed_size(width, height, &len) || len > PROTO_MAX_PAYLOAD)
		return CUDA_ERROR_INVALID_VALUE;
	if (len == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check_2d(&s->ranges, src, spitch, width, height))
		return be_bad_range(s, "memcpy_2d_dtoh", src, spitch * (height - 1) + width);
	if ((err = be_stream_capturing(st)))
		return err;
	if ((err = take_out(s, (size_t)len, &b)))
		return err;
	CUDA_MEMCPY2D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = src;
	c.srcPitch = (size_t)spitch;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = b.p;
	c.dstPitch = (size_t)width;
	c.WidthInBytes = (size_t)width;
	c.Height = (size_t)height;
	if ((r = be_drv.cuMemcpy2DAsync(&c, st)) != CUDA_SUCCESS) {
		be_staging_release(&s->staging, &b);
		return r;
	}
	return be_waiter_after(s, st, rq, &b, (size_t)len, NULL);
}

int be_op_memcpy_2d_dtod(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t dpitch, CUdeviceptr src,
			 uint64_t spitch, uint64_t width, uint64_t height, uint64_t stream_id)
{
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (width == 0 || height == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check_2d(&s->ranges, dst, dpitch, width, height))
		return be_bad_range(s, "memcpy_2d_dtod (dst)", dst, dpitch * (height - 1) + width);
	if (!be_ranges_check_2d(&s->ranges, src, spitch, width, height))
		return be_bad_range(s, "memcpy_2d_dtod (src)", src, spitch * (height - 1) + width);
	CUDA_MEMCPY2D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = src;
	c.srcPitch = (size_t)spitch;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dst;
	c.dstPitch = (size_t)dpitch;
	c.WidthInBytes = (size_t)width;
	c.Height = (size_t)height;
	return be_drv.cuMemcpy2DAsync(&c, st);
}

/* ---- memset ---- */

int be_op_memset(be_session *s, be_req *rq, CUdeviceptr dst, uint32_t value, uint32_t elemsize, uint64_t count,
		 uint64_t stream_id)
{
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (elemsize != 1 && elemsize != 2 && elemsize != 4)
		return CUDA_ERROR_INVALID_VALUE;
	if (count > UINT64_MAX / elemsize)
		return CUDA_ERROR_INVALID_VALUE;
	if (count == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check(&s->ranges, dst, count * elemsize) &&
	    (err = be_capture_unchecked(s, st, "memset", dst, count * elemsize)))
		return err;
	switch (elemsize) {
	case 1: return be_drv.cuMemsetD8Async(dst, (unsigned char)value, (size_t)count, st);
	case 2: return be_drv.cuMemsetD16Async(dst, (unsigned short)value, (size_t)count, st);
	default: return be_drv.cuMemsetD32Async(dst, value, (size_t)count, st);
	}
}

int be_op_memset_2d(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t pitch, uint32_t value, uint32_t elemsize,
		    uint64_t width, uint64_t height, uint64_t stream_id)
{
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (elemsize != 1 && elemsize != 2 && elemsize != 4)
		return CUDA_ERROR_INVALID_VALUE;
	if (width > UINT64_MAX / elemsize)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t wbytes = width * elemsize;
	if (wbytes == 0 || height == 0)
		return CUDA_SUCCESS;
	if (!be_ranges_check_2d(&s->ranges, dst, pitch, wbytes, height) &&
	    (err = be_capture_unchecked(s, st, "memset_2d", dst, pitch * (height - 1) + wbytes)))
		return err;
	switch (elemsize) {
	case 1: return be_drv.cuMemsetD2D8Async(dst, (size_t)pitch, (unsigned char)value, (size_t)width, (size_t)height, st);
	case 2: return be_drv.cuMemsetD2D16Async(dst, (size_t)pitch, (unsigned short)value, (size_t)width, (size_t)height, st);
	default: return be_drv.cuMemsetD2D32Async(dst, (size_t)pitch, value, (size_t)width, (size_t)height, st);
	}
}
