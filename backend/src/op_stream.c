/*
 * Streams and the synchronising calls that wait on the GPU. None of them blocks
 * the executor: stream_sync records an internal event and device_sync queues a
 * cuCtxSynchronize for the waiter, which replies when the GPU gets there, while
 * the executor runs the frames that follow (another client thread's launches).
 */
#include "backend.h"

#include <inttypes.h>

#include "ops.h"
#include "prio.h"

static int add_failed(be_session *s, const char *kind, uint64_t id, int err)
{
	LOG_INFO(BE_LOG, "session %" PRIu64 ": cannot register %s %" PRIu64 ": %s", s->id, kind, id, be_h_strerror(err));
	return be_h_status(err, CUDA_ERROR_INVALID_HANDLE);
}

int be_op_stream_create(be_session *s, be_req *rq, uint64_t stream_id, uint32_t flags, int32_t priority)
{
	CUstream st;
	CUresult r;
	int err;

	/* Check the id first: a stream created for a rejected id would leak. */
	if (stream_id == 0 || be_htab_get(&s->streams, stream_id, NULL, NULL) == BE_H_OK)
		return add_failed(s, "stream", stream_id, stream_id ? BE_H_EINUSE : BE_H_EZERO);
	priority = be_prio_stream_priority(s, priority); /* a tenant's class decides (prio.c) */
	if ((r = be_drv.cuStreamCreateWithPriority(&st, flags, priority)) != CUDA_SUCCESS)
		return r;
	if ((err = be_htab_add(&s->streams, stream_id, st, 0))) {
		be_drv.cuStreamDestroy(st);
		return add_failed(s, "stream", stream_id, err);
	}
	return CUDA_SUCCESS;
}

int be_op_stream_destroy(be_session *s, be_req *rq, uint64_t stream_id)
{
	void *st;

	if (stream_id == 0) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": stream_destroy of the NULL stream", s->id);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	uint64_t capture_graph = 0;
	int err = be_htab_del(&s->streams, stream_id, &st, &capture_graph);
	if (err) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": stream_destroy %" PRIu64 ": %s", s->id, stream_id,
			 be_h_strerror(err));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (capture_graph)
		be_capture_drop((CUstream)st, capture_graph, s);
	/* Work still queued on it completes; the driver frees it afterwards.
	 * Internal events recorded on it stay valid. */
	return be_drv.cuStreamDestroy((CUstream)st);
}

int be_op_stream_sync(be_session *s, be_req *rq, uint64_t stream_id)
{
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	/* Recording into a capturing stream would add a node to the graph and
	 * "wait" for nothing. CUDA refuses to synchronise such a stream and
	 * invalidates its capture: the driver's own answer does both, at once. */
	if ((err = be_stream_capturing(st)))
		return err == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ? (int)be_drv.cuStreamSynchronize(st) : err;
	return be_waiter_after(s, st, rq, NULL, 0, NULL);
}

static void query_stream(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	int *busy = ctx;
	if (!*busy && be_drv.cuStreamQuery((CUstream)obj) != CUDA_SUCCESS)
		*busy = 1;
}

/* Every stream of the session (and the legacy one) has finished its work, and
 * nothing waits in the waiter's FIFO: the device is already synchronised. Any
 * answer but CUDA_SUCCESS (work left, an error to report) takes the waiter's
 * cuCtxSynchronize. */
static int device_idle(be_session *s)
{
	if (be_srv.no_fastpath || !be_waiter_idle(s) || be_htab_count(&s->streams) > BE_IDLE_QUERY_MAX)
		return 0;
	int busy = be_drv.cuStreamQuery(NULL) != CUDA_SUCCESS;
	be_htab_each_dev(&s->streams, s->cur, query_stream, &busy); /* this device's */
	return !busy;
}

int be_op_device_sync(be_session *s, be_req *rq)
{
	/* Idle: the driver's own synchronize returns at once, and it is the sync
	 * point that makes memory freed into pools releasable. */
	if (device_idle(s))
		return be_drv.cuCtxSynchronize();
	be_wentry *e = be_wentry_new(s);
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->kind = BE_WAIT_CTX;
	e->reply = 1;
	e->seq = rq->seq;
	be_waiter_push(s, e);
	return BE_DEFERRED;
}
