/*
 * event.c: events.
 *
 * As streams run eagerly, an event is complete as soon as it is recorded: query and
 * synchronize always succeed. cuEventRecord stores the host's CLOCK_MONOTONIC time,
 * so cuEventElapsedTime measures real time between the two record calls. Following
 * the driver's documentation, elapsed time is CUDA_ERROR_INVALID_HANDLE if either
 * event was never recorded or was created with CU_EVENT_DISABLE_TIMING.
 *
 * Recording an event on a capturing stream records no time; it marks the event as a
 * point of that capture, which another stream can wait on to join the capture.
 */
#include "fake.h"

#include <stdlib.h>

void fk_event_destroy(void *o)
{
	fk_event *e = o;
	fk_handle_del(e->id);
	free(e);
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	fk_ctx *c;
	fk_event *e = NULL;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS &&
	    (!phEvent ||
	     (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
	                          CU_EVENT_INTERPROCESS)) ||
	     ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !(e = calloc(1, sizeof *e)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		e->ctx = c;
		e->flags = Flags;
		if (!(e->id = fk_handle_new(FK_EVENT, e, c))) {
			free(e);
			e = NULL;
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			*phEvent = (CUevent)(uintptr_t)e->id;
		}
	}
	return fk_end(rc, __func__, "%#x -> %#llx", Flags, e ? (unsigned long long)e->id : 0ull);
}

#define EVENT_BEGIN(h)                                                              \
	fk_ctx *c;                                                                  \
	CUresult rc = fk_begin(&c);                                                 \
	fk_event *e = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(h), FK_EVENT, c) : NULL; \
	if (rc == CUDA_SUCCESS && !e)                                               \
		rc = CUDA_ERROR_INVALID_HANDLE

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
	EVENT_BEGIN(hEvent);
	if (rc == CUDA_SUCCESS)
		fk_event_destroy(e);
	return fk_end(rc, __func__, "%p", (void *)hEvent);
}

static CUresult record(fk_ctx *c, fk_event *e, CUstream h, unsigned flags)
{
	fk_stream *s = fk_stream_get(c, h);
	CUresult rc;

	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	if ((rc = fk_stream_legacy_check(c, h)) != CUDA_SUCCESS)
		return rc;
	if (s->cap) {
		if (s->cap->invalidated)
			return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		e->cap_seq = s->cap->seq;
		e->node = s->last_node;
		return CUDA_SUCCESS;
	}
	e->recorded = 1;
	e->t_ns = fk_now_ns();
	e->cap_seq = 0;
	e->node = 0;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	EVENT_BEGIN(hEvent);
	if (rc == CUDA_SUCCESS)
		rc = record(c, e, hStream, 0);
	return fk_end(rc, __func__, "%p, %p", (void *)hEvent, (void *)hStream);
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	EVENT_BEGIN(hEvent);
	if (rc == CUDA_SUCCESS)
		rc = record(c, e, hStream, flags);
	return fk_end(rc, __func__, "%p, %p, %#x", (void *)hEvent, (void *)hStream, flags);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	EVENT_BEGIN(hEvent);
	return fk_end(rc, __func__, "%p", (void *)hEvent);
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	EVENT_BEGIN(hEvent);
	if (rc == CUDA_SUCCESS) {
		fk_pools_sync(c->dev);
		fk_printf_flush(c);
	}
	return fk_end(rc, __func__, "%p", (void *)hEvent);
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_event *a = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hStart), FK_EVENT, c) : NULL;
	fk_event *b = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hEnd), FK_EVENT, c) : NULL;

	if (rc == CUDA_SUCCESS && (!a || !b))
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !pMilliseconds)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!a->recorded || !b->recorded))
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		*pMilliseconds = (float)((double)((int64_t)(b->t_ns - a->t_ns)) / 1e6);
	return fk_end(rc, __func__, "%p, %p -> %.6f ms", (void *)hStart, (void *)hEnd,
	              rc == CUDA_SUCCESS ? (double)*pMilliseconds : 0.0);
}
