/*
 * Coherence copies outside the executor (op managed_fetch). Managed and mapped
 * memory live on the device here and in the client's pages there
 * (frontend/src/managed.c); when the client's host touches them after device
 * work, it asks for the device's bytes. A host function does that too, and its
 * stream is blocked until it returns, while the executor may be waiting for
 * that very stream: inside cuLaunchHostFunc (the driver test double runs host
 * functions there) or in a call that synchronizes (cuMemFree, a copy on the
 * legacy stream). A copy queued behind the executor would never run.
 *
 * So the loop thread, which reads frames however busy the executor is, hands
 * the request to a thread of the session's own (rg-fetch, started at the first
 * request), which copies on a non-blocking stream of its own per device,
 * waits for that stream alone and replies. The copy reads the device's bytes
 * as they are at that moment, as a host read of mapped memory does on a GPU.
 *
 * The range is checked against the session's allocations under ranges_mu,
 * which the executor takes where it changes them (op_memory.c, op_module.c,
 * op_vmm.c) and which is held until the copy is done, so memory is never
 * freed under a copy (frees forget the range first). The executor reads the
 * ranges without it: it is their only writer.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"

struct be_fetch_req {
	uint64_t seq, src, len;
	uint32_t dev;
	struct be_fetch_req *next;
};

/* One request: the bytes into a buffer of ours (*out, malloc'd), or an error. */
static int fetch_copy(be_session *s, be_fetch *f, const be_fetch_req *q, void **out)
{
	CUresult r;
	if (q->dev >= BE_MAX_GPUS || (int)q->dev >= be_srv.ngpu || !s->ctxs[q->dev])
		return CUDA_ERROR_INVALID_DEVICE;
	if ((r = be_drv.cuCtxSetCurrent(s->ctxs[q->dev])) != CUDA_SUCCESS)
		return r;
	if (!f->streams[q->dev] &&
	    (r = be_drv.cuStreamCreateWithPriority(&f->streams[q->dev], CU_STREAM_NON_BLOCKING, 0)) != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&s->ranges_mu);
	if (!be_ranges_check(&s->ranges, q->src, q->len)) {
		pthread_mutex_unlock(&s->ranges_mu);
		return be_bad_range(s, "managed_fetch", q->src, q->len);
	}
	void *buf = malloc(q->len ? q->len : 1);
	if (!buf) {
		pthread_mutex_unlock(&s->ranges_mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = q->len ? be_drv.cuMemcpyDtoHAsync(buf, q->src, (size_t)q->len, f->streams[q->dev]) : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS)
		r = be_drv.cuStreamSynchronize(f->streams[q->dev]);
	pthread_mutex_unlock(&s->ranges_mu);
	if (r != CUDA_SUCCESS) {
		free(buf);
		return r;
	}
	*out = buf;
	return 0;
}

static void *fetch_main(void *arg)
{
	be_session *s = arg;
	be_fetch *f = &s->fetch;

	be_driver_thread_relaxed();
	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->head && !f->stop)
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->stop)
			break;
		be_fetch_req *q = f->head;
		if (!(f->head = q->next))
			f->tail = &f->head;
		pthread_mutex_unlock(&f->mu);
		void *buf = NULL;
		int st = fetch_copy(s, f, q, &buf);
		/* No latched error in this reply: the call that finds it is the
		 * program's own next one, in its order. */
		proto_msg m;
		proto_msg_begin_reply(&m, q->seq, st, 0, 0);
		be_reply_send(s, &m, buf, st ? 0 : (size_t)q->len);
		free(buf);
		free(q);
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

int be_op_managed_fetch(be_session *s, be_req *rq, CUdeviceptr src, uint64_t len)
{
	be_fetch *f = &s->fetch;
	be_fetch_req *q = malloc(sizeof(*q));
	if (q)
		*q = (be_fetch_req){.seq = rq->seq, .src = src, .len = len, .dev = (uint32_t)rq->view.status};
	pthread_mutex_lock(&f->mu);
	if (q && !f->started && !f->stop) {
		if (pthread_create(&f->thread, NULL, fetch_main, s) == 0) {
			f->started = 1;
			pthread_setname_np(f->thread, "rg-fetch");
		}
	}
	int queued = q && f->started && !f->stop;
	if (queued) {
		*f->tail = q;
		f->tail = &q->next;
		pthread_cond_signal(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	if (queued)
		return CUDA_SUCCESS;
	free(q);
	LOG_WARN(BE_LOG, "session %" PRIu64 ": managed_fetch: no thread to copy on", s->id);
	be_reply_status_seq(s, rq->seq, CUDA_ERROR_OUT_OF_MEMORY); /* the caller waits for an answer */
	return BE_REPLIED;
}

void be_fetch_init(be_session *s)
{
	be_fetch *f = &s->fetch;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->tail = &f->head;
	pthread_mutex_init(&s->ranges_mu, NULL);
}

void be_fetch_stop(be_session *s)
{
	be_fetch *f = &s->fetch;
	pthread_mutex_lock(&f->mu);
	f->stop = 1;
	int started = f->started;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	if (started)
		pthread_join(f->thread, NULL);
	f->started = 0;
	while (f->head) {
		be_fetch_req *q = f->head;
		f->head = q->next;
		free(q);
	}
	f->tail = &f->head;
	for (int d = 0; d < BE_MAX_GPUS; d++)
		if (f->streams[d] && s->ctxs[d] && be_drv.cuCtxSetCurrent(s->ctxs[d]) == CUDA_SUCCESS) {
			be_drv.cuStreamDestroy(f->streams[d]);
			f->streams[d] = NULL;
		}
	be_session_select_forget(); /* the current context is not the one be_session_select made */
}

void be_fetch_destroy(be_session *s)
{
	pthread_mutex_destroy(&s->fetch.mu);
	pthread_cond_destroy(&s->fetch.cv);
	pthread_mutex_destroy(&s->ranges_mu);
}
