/*
 * Striped copies, the ops the executor runs (stripe.h has the whole path).
 *
 * stripe_open: secrets for up to min(want, --stripes) connections and the
 * stripe listener's port (n 0 when stripes are off or cannot be had).
 * memcpy_htod_striped: waits until the transfer's bytes all came over the
 * stripes (they were sent before this frame, so the wait is the wire's), then
 * copies from the staging buffer in stream order, as memcpy_htod does.
 * memcpy_dtoh_striped: copies into a staging buffer and records an event;
 * the stripe threads send the parts the client asks for once it completed,
 * and the waiter replies (status only) when the stream got there.
 * The stripe connections' own ops are refused on a client's main connection.
 */
#include "stripe.h"

#include <inttypes.h>

#include "ops.h"

int be_op_stripe_open(be_session *s, be_req *rq, uint32_t want)
{
	uint8_t secrets[BE_STRIPE_MAX * BE_STRIPE_SECRET_LEN];
	unsigned n = want < be_stripe_max() ? want : be_stripe_max();
	int port = n ? be_stripe_listen_port() : 0;

	if (!port || !be_stripes_usable(s) || !be_stripes_of(s, 1))
		n = 0;
	LOG_DEBUG(BE_LOG, "session %" PRIu64 ": stripe_open: %u of %u stripes", s->id, n, want);
	for (unsigned i = 0; i < n; i++)
		if (be_stripe_secret_issue(s, secrets + i * BE_STRIPE_SECRET_LEN) != 0) {
			n = i;
			break;
		}
	proto_msg *m = be_reply_begin(s, rq, 3);
	proto_msg_u64(m, (uint64_t)(n ? port : 0));
	proto_msg_u64(m, n);
	proto_msg_bin(m, secrets, n * BE_STRIPE_SECRET_LEN);
	return be_reply_end(s, rq, m, NULL, 0);
}

int be_op_memcpy_htod_striped(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t len, uint64_t stream_id,
			      uint64_t xfer)
{
	CUstream st;
	be_buf b = {0};
	int err;

	/* The bytes are taken (or the transfer dropped) whatever else fails. */
	int got = be_stripes_take_in(s, xfer, len, &b);
	if ((err = be_get_stream(s, stream_id, &st)) == 0 && !be_ranges_check(&s->ranges, dst, len))
		err = be_bad_range(s, "memcpy_htod_striped", dst, len);
	if (err == 0)
		err = got;
	if (err == 0)
		err = be_stream_capturing(st);
	if (err) {
		be_staging_release(&s->staging, &b);
		return err;
	}
	return be_htod_done(s, st, &b, be_drv.cuMemcpyHtoDAsync(dst, b.p, (size_t)len, st));
}

int be_op_memcpy_dtoh_striped(be_session *s, be_req *rq, CUdeviceptr src, uint64_t len, uint64_t stream_id,
			      uint64_t xfer)
{
	CUstream st;
	CUevent ev = NULL;
	be_buf b = {0};
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0 || len > BE_STRIPE_MAX_LEN || !be_stripes_of(s, 0))
		return CUDA_ERROR_INVALID_VALUE;
	if (!be_ranges_check(&s->ranges, src, len))
		return be_bad_range(s, "memcpy_dtoh_striped", src, len);
	if ((err = be_stream_capturing(st)))
		return err;
	/* Not be_staging_take: a buffer for this copy alone (BE_BUF_PINNED) would
	 * need the context where a stripe thread lets it go. take_wait, waiting
	 * for nothing, regrows a big buffer here when none fits. */
	if (be_staging_take_wait(&s->staging, (size_t)len, 0, NULL, &b) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((r = be_drv.cuMemcpyDtoHAsync(b.p, src, (size_t)len, st)) == CUDA_SUCCESS &&
	    (r = be_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS &&
	    (r = be_drv.cuEventRecord(ev, st)) == CUDA_SUCCESS)
		r = be_stripes_add_out(s, xfer, &b, len, ev);
	if (r != CUDA_SUCCESS) {
		if (ev) {
			be_drv.cuEventSynchronize(ev); /* the copy into b may have started */
			be_drv.cuEventDestroy(ev);
		} else {
			be_drv.cuStreamSynchronize(st);
		}
		be_staging_release(&s->staging, &b);
		return r;
	}
	return be_waiter_after(s, st, rq, NULL, 0, NULL);
}

static int refused(be_session *s, const char *op)
{
	LOG_WARN(BE_LOG, "session %" PRIu64 ": %s belongs on a stripe connection, not a client's", s->id, op);
	return CUDA_ERROR_NOT_PERMITTED;
}

int be_op_stripe_hello(be_session *s, be_req *rq, const void *secret, size_t secret_len)
{
	return refused(s, "stripe_hello");
}

int be_op_stripe_put(be_session *s, be_req *rq, uint64_t xfer, uint64_t total, uint64_t off)
{
	return refused(s, "stripe_put");
}

int be_op_stripe_get(be_session *s, be_req *rq, uint64_t xfer, uint64_t off, uint64_t len)
{
	return refused(s, "stripe_get");
}
