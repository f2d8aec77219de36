/*
 * stream.c: streams.
 *
 * Streams execute eagerly: an operation has finished when the call that queued it
 * returns, so work on any stream is ordered by the order of the calls, queries always
 * answer "done" and synchronizing never waits. What remains of a stream is its
 * identity (context, flags, priority) and its part in stream capture (graph.c).
 *
 * The handles 0 (NULL), CU_STREAM_LEGACY and CU_STREAM_PER_THREAD all name the
 * current context's NULL stream; as the fake runs everything at once, the legacy and
 * per-thread default streams behave alike, except for the rule that work on the
 * legacy stream while a blocking stream of its context captures is an error.
 */
#include "fake.h"

#include <stdlib.h>

fk_stream *fk_stream_get(fk_ctx *c, CUstream h)
{
	uint64_t id = FK_H(h);
	if (id == 0 || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
		return &c->null_stream;
	return fk_handle_get(id, FK_STREAM, c);
}

CUresult fk_stream_legacy_check(fk_ctx *c, CUstream h)
{
	CUresult rc = CUDA_SUCCESS;

	if (h != NULL && h != CU_STREAM_LEGACY)
		return CUDA_SUCCESS;
	for (fk_capture *cap = fk_captures; cap; cap = cap->next) {
		if (cap->origin->ctx == c && cap->nblocking) {
			cap->invalidated = 1;
			rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		}
	}
	return rc;
}

void fk_stream_destroy(fk_stream *s)
{
	if (s->cap)
		fk_capture_leave(s);
	fk_handle_del(s->id);
	free(s);
}

static CUresult create(fk_ctx *c, CUstream *ph, unsigned flags, int priority)
{
	fk_stream *s;

	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = calloc(1, sizeof *s)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* out-of-range priorities are clamped, as the driver does */
	if (priority > FK_STREAM_PRIO_LEAST)
		priority = FK_STREAM_PRIO_LEAST;
	if (priority < FK_STREAM_PRIO_GREATEST)
		priority = FK_STREAM_PRIO_GREATEST;
	s->ctx = c;
	s->flags = flags;
	s->priority = priority;
	if (!(s->id = fk_handle_new(FK_STREAM, s, c))) {
		free(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ph = (CUstream)(uintptr_t)s->id;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = create(c, phStream, Flags, 0);
	return fk_end(rc, __func__, "%#x -> %p", Flags,
	              rc == CUDA_SUCCESS ? (void *)*phStream : NULL);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = create(c, phStream, flags, priority);
	return fk_end(rc, __func__, "%#x, %d -> %p", flags, priority,
	              rc == CUDA_SUCCESS ? (void *)*phStream : NULL);
}

/* A stream handle other than the NULL stream, owned by the current context. */
#define STREAM_BEGIN(h)                                                              \
	fk_ctx *c;                                                                   \
	CUresult rc = fk_begin(&c);                                                  \
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, h) : NULL;              \
	if (rc == CUDA_SUCCESS && !s)                                                \
		rc = CUDA_ERROR_INVALID_HANDLE

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && s == &c->null_stream)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		fk_stream_destroy(s);
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS)
		rc = fk_capture_sync_check(s);
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS)
		rc = fk_capture_sync_check(s);
	if (rc == CUDA_SUCCESS) {
		fk_pools_sync(c->dev);
		fk_printf_flush(c);
	}
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	STREAM_BEGIN(hStream);
	fk_event *e = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hEvent), FK_EVENT, c) : NULL;

	if (rc == CUDA_SUCCESS && !e)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS && e->cap_seq) {
		/* Waiting on an event recorded in a capture draws this stream into that
		 * capture (fork); on an event of another capture, merges two: refused. */
		fk_capture *cap = fk_capture_find(e->cap_seq);
		if (cap && !s->cap && s != &c->null_stream) {
			fk_capture_join(cap, s);
			s->last_node = e->node;
		} else if (cap && s->cap && s->cap != cap) {
			rc = CUDA_ERROR_STREAM_CAPTURE_MERGE;
		} else if (cap && s->cap == cap && e->node) {
			s->last_node = e->node;
		} else if (cap && s == &c->null_stream) {
			rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		}
	}
	/* otherwise the event has completed (everything has): nothing to wait for */
	return fk_end(rc, __func__, "%p, %p, %#x", (void *)hStream, (void *)hEvent, Flags);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                     void *userData, unsigned int flags)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && (!callback || flags != 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS && s->cap) {
		/* stream callbacks cannot be captured (host functions can) */
		s->cap->invalidated = 1;
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (rc == CUDA_SUCCESS) {
		/* The stream has drained already: call back now, on this thread, without
		 * the lock (the callback may call the driver, as it must not on a GPU). */
		pthread_mutex_unlock(&fk_mu);
		callback(hStream, CUDA_SUCCESS, userData);
		pthread_mutex_lock(&fk_mu);
	}
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && !priority)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*priority = s->priority;
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && !flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*flags = s->flags;
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && !streamId)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*streamId = s->id ? s->id : (hStream == CU_STREAM_PER_THREAD ? 2 : 1);
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*pctx = (CUcontext)(uintptr_t)c->id;
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
	STREAM_BEGIN(hStream);
	if (rc == CUDA_SUCCESS && !device)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*device = c->dev;
	return fk_end(rc, __func__, "%p", (void *)hStream);
}
