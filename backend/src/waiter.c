/*
 * The waiter: one thread per session that blocks on the GPU so the executor
 * never does. The executor pushes entries in order; the waiter takes them one by
 * one, waits (cuEventSynchronize on an event the executor recorded, or
 * cuCtxSynchronize), then does what the entry says: send the reply (with a
 * payload out of a staging buffer for D2H copies), release staging buffers,
 * destroy a client's event.
 *
 * Order is the point. Replies of synchronising calls leave in the order the
 * calls were made; a staging buffer goes back to the pool only once the copy
 * reading or writing it is done; and a client's event_destroy is queued here
 * like everything else, so an earlier event_sync never waits on a destroyed
 * event.
 *
 * Internal events (created with CU_EVENT_DISABLE_TIMING, the cheapest kind) are
 * pooled: the executor takes one to record, the waiter gives it back.
 *
 * Fast path: when the waiter has nothing pending and the event completes at
 * once (or, for a reply, within BE_FAST_NS of polling), the executor finishes the
 * call itself; the order of replies cannot change, as there is nothing earlier
 * in the FIFO. REMOTE_GPU_NO_FASTPATH=1 turns this off (tests of the waiter).
 */
#include "backend.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *waiter_main(void *arg);
static void run_entry(be_session *s, be_wentry *e, int live);
static void entry_recycle(be_session *s, be_wentry *e);
static void evpool_put(be_session *s, int dev, CUevent ev);
static int fast_done(be_session *s, CUevent ev, uint64_t spin_ns, int client_waits);

int be_waiter_init(be_session *s)
{
	be_waiter *w = &s->w;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->head = NULL;
	w->tail = &w->head;
	return 0;
}

int be_waiter_start(be_session *s)
{
	if (pthread_create(&s->w.thread, NULL, waiter_main, s) != 0)
		return -1;
	s->w.started = 1;
	return 0;
}

be_wentry *be_wentry_new(be_session *s)
{
	be_waiter *w = &s->w;
	pthread_mutex_lock(&w->mu);
	be_wentry *e = w->spare;
	if (e)
		w->spare = e->next;
	pthread_mutex_unlock(&w->mu);
	if (!e && !(e = malloc(sizeof(*e))))
		return NULL;
	memset(e, 0, sizeof(*e));
	e->ctx = s->ctx; /* the running frame's device */
	e->dev = s->cur;
	return e;
}

static void entry_recycle(be_session *s, be_wentry *e)
{
	be_waiter *w = &s->w;
	pthread_mutex_lock(&w->mu);
	e->next = w->spare;
	w->spare = e;
	pthread_mutex_unlock(&w->mu);
}

void be_waiter_push(be_session *s, be_wentry *e)
{
	be_waiter *w = &s->w;
	e->next = NULL;
	pthread_mutex_lock(&w->mu);
	*w->tail = e;
	w->tail = &e->next;
	atomic_fetch_add(&w->busy, 1);
	atomic_fetch_add_explicit(&w->queued, 1, memory_order_release);
	if (w->sleeping)
		pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

CUevent be_event_record_internal(be_session *s, CUstream stream, CUresult *err)
{
	be_waiter *w = &s->w;
	CUevent ev = NULL;
	CUresult r;

	int dev = s->cur;
	pthread_mutex_lock(&w->mu);
	if (w->npool[dev])
		ev = w->pool[dev][--w->npool[dev]];
	pthread_mutex_unlock(&w->mu);
	if (!ev) {
		if ((r = be_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
			*err = r;
			return NULL;
		}
		pthread_mutex_lock(&w->mu);
		w->nevents++;
		pthread_mutex_unlock(&w->mu);
	}
	if ((r = be_drv.cuEventRecord(ev, stream)) != CUDA_SUCCESS) {
		evpool_put(s, dev, ev);
		*err = r;
		return NULL;
	}
	*err = CUDA_SUCCESS;
	return ev;
}

/* The fast path of a sync call: with the waiter idle, a reply sent by the
 * executor now cannot overtake one of the waiter's, so if ev completes within
 * BE_FAST_NS (an idle stream, a small copy) the call is answered here and saves
 * the hand-over to the waiter (a thread wake-up, several microseconds). With
 * frames waiting behind this one (a D2H copy's next chunks), or once one
 * comes, it stops polling: their copies should start while this one's bytes
 * go out. */
static int fast_done(be_session *s, CUevent ev, uint64_t spin_ns, int client_waits)
{
	if (be_srv.no_fastpath || !be_waiter_idle(s))
		return 0;
	if (s->run_more || atomic_load_explicit(&s->q_len, memory_order_relaxed))
		spin_ns = 0;
	rg_spin sp;
	rg_spin_start(&sp, spin_ns);
	for (;;) {
		CUresult r = be_drv.cuEventQuery(ev);
		if (r == CUDA_SUCCESS) {
			/* For a client that synchronises: returns at once, and is
			 * what makes memory freed into a pool releasable (trim,
			 * release threshold) as its own synchronize would; a query
			 * alone does not (measured on an H100). */
			if (client_waits)
				be_drv.cuEventSynchronize(ev);
			return 1;
		}
		/* errors: the waiter's cuEventSynchronize reports them */
		if (r != CUDA_ERROR_NOT_READY || !spin_ns || !rg_spin_on(&sp) ||
		    atomic_load_explicit(&s->q_len, memory_order_relaxed))
			return 0;
		be_spin_step();
	}
}

int be_waiter_try_now(be_session *s, be_req *rq, CUevent ev)
{
	if (!fast_done(s, ev, 0, 1))
		return 0;
	be_reply_status(s, rq, CUDA_SUCCESS);
	return 1;
}

int be_waiter_after(be_session *s, CUstream stream, be_req *rq, be_buf *out, size_t out_len, be_buf *rel)
{
	CUresult r;
	CUevent ev = be_event_record_internal(s, stream, &r);

	if (ev && fast_done(s, ev, rq ? BE_FAST_NS : 0, rq != NULL)) {
		evpool_put(s, s->cur, ev);
		if (rq && out)
			be_reply_send_staged(s, be_reply_begin_seq(s, rq->seq, 0), out, out_len);
		else if (rq)
			be_reply_send(s, be_reply_begin_seq(s, rq->seq, 0), NULL, 0);
		if (out)
			be_staging_release(&s->staging, out); /* emptied when sent */
		if (rel)
			be_staging_release(&s->staging, rel);
		return rq ? BE_REPLIED : 0;
	}
	be_wentry *e = ev ? be_wentry_new(s) : NULL;

	if (!e) {
		/* Rare (no memory, or the context is broken): the buffers may still be
		 * in use by the copy, so wait for it here before letting them go. */
		if (ev) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			be_drv.cuEventSynchronize(ev);
			evpool_put(s, s->cur, ev);
		} else {
			be_drv.cuCtxSynchronize();
		}
		if (out)
			be_staging_release(&s->staging, out);
		if (rel)
			be_staging_release(&s->staging, rel);
		return r;
	}
	e->kind = BE_WAIT_EVENT;
	e->ev = ev;
	if (rq) {
		e->reply = 1;
		e->seq = rq->seq;
	}
	if (out) {
		e->out = *out;
		e->out_len = out_len;
		*out = (be_buf){0};
	}
	if (rel) {
		e->rel = *rel;
		*rel = (be_buf){0};
	}
	be_waiter_push(s, e);
	return rq ? BE_DEFERRED : 0;
}

static void evpool_put(be_session *s, int dev, CUevent ev)
{
	be_waiter *w = &s->w;
	pthread_mutex_lock(&w->mu);
	if (w->npool[dev] < BE_EVPOOL_MAX) {
		w->pool[dev][w->npool[dev]++] = ev;
		ev = NULL;
	} else {
		w->nevents--;
	}
	pthread_mutex_unlock(&w->mu);
	if (ev)
		be_drv.cuEventDestroy(ev);
}

/* live: the session is running (wait, then reply); otherwise the context has
 * been synchronised at teardown and only the releases are left to do. */
static void run_entry(be_session *s, be_wentry *e, int live)
{
	CUresult st = CUDA_SUCCESS;

	if (live) {
		if (e->kind == BE_WAIT_EVENT || e->kind == BE_WAIT_USER_EVENT)
			st = be_drv.cuEventSynchronize(e->ev);
		else if (e->kind == BE_WAIT_CTX)
			st = be_drv.cuCtxSynchronize();
	}
	if (e->kind == BE_WAIT_EVENT)
		evpool_put(s, e->dev, e->ev);
	if (live) {
		if (e->reply) {
			if (st == CUDA_SUCCESS)
				be_reply_send_staged(s, be_reply_begin_seq(s, e->seq, 0), &e->out, e->out_len);
			else
				be_reply_status_seq(s, e->seq, st);
		} else if (st != CUDA_SUCCESS) {
			/* A copy that failed on the GPU: report it at the next reply, as
			 * CUDA reports asynchronous errors. */
			be_latch(s, st);
		}
	}
	be_staging_release(&s->staging, &e->out);
	be_staging_release(&s->staging, &e->rel);
	if (e->destroy) {
		CUresult r = be_drv.cuEventDestroy(e->destroy);
		if (r != CUDA_SUCCESS && live)
			be_latch(s, r);
	}
	entry_recycle(s, e);
}

static void *waiter_main(void *arg)
{
	be_session *s = arg;
	be_waiter *w = &s->w;
	CUcontext cur = NULL;

	pthread_setname_np(pthread_self(), "rg-wait");
	be_driver_thread_relaxed();

	for (;;) {
		/* Spin a little before sleeping, as the executor does: a client
		 * waiting on back-to-back synchronisations finds the waiter awake. */
		if (atomic_load_explicit(&w->queued, memory_order_acquire) == 0) {
			rg_spin sp;
			rg_spin_start(&sp, BE_SPIN_NS);
			while (atomic_load_explicit(&w->queued, memory_order_acquire) == 0 &&
			       !atomic_load(&s->closing) && rg_spin_on(&sp))
				be_spin_step();
		}
		pthread_mutex_lock(&w->mu);
		while (!w->head && !w->stop) {
			w->sleeping = 1;
			pthread_cond_wait(&w->cv, &w->mu);
			w->sleeping = 0;
		}
		if (w->stop) { /* leftovers are released after the teardown's synchronize */
			pthread_mutex_unlock(&w->mu);
			break;
		}
		be_wentry *e = w->head;
		w->head = e->next;
		if (!w->head)
			w->tail = &w->head;
		atomic_fetch_sub(&w->queued, 1);
		pthread_mutex_unlock(&w->mu);

		/* Entries exist only after hello made the contexts (the push is
		 * ordered after it by w->mu). Each waits in its frame's device's
		 * context: a device synchronize is that context's, and a driver may
		 * want an event's own context current. */
		if (e->ctx && e->ctx != cur) {
			CUresult r = be_drv.cuCtxSetCurrent(e->ctx);
			if (r != CUDA_SUCCESS)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": waiter cuCtxSetCurrent: %s", s->id, be_errname(r));
			cur = e->ctx;
		}
		run_entry(s, e, 1);
		/* after the reply went out; a latency session with nothing left goes quiet */
		if (atomic_fetch_sub(&w->busy, 1) == 1 && w->on_idle)
			w->on_idle(s);
	}
	return NULL;
}

int be_waiter_stop(be_session *s)
{
	be_waiter *w = &s->w;
	struct timespec ts;

	if (!w->started)
		return 0;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);

	ts = rg_deadline(CLOCK_REALTIME, BE_WAITER_JOIN_MS);
	int r = pthread_timedjoin_np(w->thread, NULL, &ts);
	if (r == ETIMEDOUT) {
		pthread_detach(w->thread);
		return -1;
	}
	w->started = 0;
	return 0;
}

void be_waiter_cleanup(be_session *s)
{
	be_waiter *w = &s->w;
	be_wentry *e, *next;

	for (e = w->head; e; e = next) {
		next = e->next;
		run_entry(s, e, 0);
	}
	w->head = NULL;
	w->tail = &w->head;
	for (e = w->spare; e; e = next) {
		next = e->next;
		free(e);
	}
	w->spare = NULL;
	for (int d = be_srv.ngpu - 1; d >= 0; d--) {
		if (w->npool[d])
			be_session_select(s, (uint32_t)d); /* an event goes with its context current */
		for (unsigned i = 0; i < w->npool[d]; i++)
			be_drv.cuEventDestroy(w->pool[d][i]);
		w->nevents -= w->npool[d];
		w->npool[d] = 0;
	}
	if (s->ctx)
		be_session_select(s, 0); /* as the teardown left it */
	if (w->nevents)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": %" PRIu64 " internal events unaccounted for", s->id, w->nevents);
}
