/*
 * Client events. event_sync hands the client's event to the waiter, and
 * event_destroy goes through the waiter's FIFO too: the id is gone from the
 * table at once (later calls see a stale handle), but the CUevent is destroyed
 * only after every wait queued before it, so no pending wait sees it vanish.
 */
#include "backend.h"

#include <inttypes.h>

#include "ops.h"

/* cudaEventDefault/BlockingSync/DisableTiming/Interprocess equal CU_EVENT_*. */
#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

int be_op_event_create(be_session *s, be_req *rq, uint64_t e_id, uint32_t flags)
{
	CUevent ev;
	CUresult r;
	int err;

	if (flags & ~(uint32_t)EVENT_FLAGS)
		return CUDA_ERROR_INVALID_VALUE;
	if (e_id == 0 || be_htab_get(&s->events, e_id, NULL, NULL) == BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": event_create: id %" PRIu64 " %s", s->id, e_id,
			 e_id ? "already in use" : "0 is reserved");
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if ((r = be_drv.cuEventCreate(&ev, flags)) != CUDA_SUCCESS)
		return r;
	if ((err = be_htab_add(&s->events, e_id, ev, 0))) {
		be_drv.cuEventDestroy(ev);
		return be_h_status(err, CUDA_ERROR_INVALID_HANDLE);
	}
	return CUDA_SUCCESS;
}

int be_op_event_destroy(be_session *s, be_req *rq, uint64_t e_id)
{
	void *ev;
	int err = be_htab_del(&s->events, e_id, &ev, NULL);

	if (err) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": event_destroy %" PRIu64 ": %s", s->id, e_id, be_h_strerror(err));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	be_wentry *e = be_wentry_new(s);
	if (!e) {
		/* No entry to order it behind pending waits: keep it registered
		 * (reviving the tombstone needs no memory); the teardown frees it. */
		be_htab_add(&s->events, e_id, ev, 0);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	e->kind = BE_WAIT_NONE;
	e->destroy = (CUevent)ev;
	be_waiter_push(s, e);
	return CUDA_SUCCESS;
}

int be_op_event_sync(be_session *s, be_req *rq, uint64_t e_id)
{
	CUevent ev;
	int err;

	if ((err = be_get_event(s, e_id, &ev)))
		return err;
	if (be_waiter_try_now(s, rq, ev))
		return BE_REPLIED;
	be_wentry *e = be_wentry_new(s);
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->kind = BE_WAIT_USER_EVENT;
	e->ev = ev;
	e->reply = 1;
	e->seq = rq->seq;
	be_waiter_push(s, e);
	return BE_DEFERRED;
}
