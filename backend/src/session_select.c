/*
 * Which of a session's devices the calling thread works on
 * (be_session_select, backend.h): the executor, the loop running a frame
 * inline, the waiter and the teardown select a device before they touch it.
 */
#include "backend.h"

#include "driver.h"

/* The session and context this thread made current last. A thread may serve
 * several sessions (the loop, with --isolation thread) and a session several
 * devices, but usually the same context runs frame after frame: then nothing
 * is asked of the driver. Keyed by the session id, which is never reused,
 * because a new context may get a destroyed one's handle. */
static _Thread_local uint64_t sel_session;
static _Thread_local CUcontext sel_ctx;

CUresult be_session_select(be_session *s, uint32_t dev)
{
	if (dev >= (uint32_t)be_srv.ngpu || !s->ctxs[dev])
		return CUDA_ERROR_INVALID_DEVICE;
	CUcontext c = s->ctxs[dev];
	if (sel_session != s->id || sel_ctx != c) {
		CUresult r = be_drv.cuCtxSetCurrent(c);
		if (r != CUDA_SUCCESS)
			return r;
		sel_session = s->id;
		sel_ctx = c;
	}
	s->cur = (int)dev;
	s->ctx = c;
	s->mempool = s->mempools[dev];
	return CUDA_SUCCESS;
}

void be_session_select_forget(void) { sel_session = 0, sel_ctx = NULL; }
