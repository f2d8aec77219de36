/*
 * Host functions (cudaLaunchHostFunc): the client's function runs in the client,
 * in stream order. The server enqueues its own callback with cuLaunchHostFunc;
 * when the stream reaches it, the callback sends an event frame [HOSTFN, 0, id]
 * and blocks the stream until the client answers hostfn_done(id), which the loop
 * thread handles directly (BE_OP_LOOP): it must not queue behind the executor,
 * which may itself be waiting for this stream (and with the driver test double,
 * which runs host functions inside cuLaunchHostFunc, is the caller).
 *
 * A host node's callback (op_hostnode.c) goes the same way at each replay, with
 * a record of its own per call (be_hostfn_call). A host function on a capturing
 * stream is handed to the hook main.c registered (be_hostfn_set_capture): this
 * file calls nothing of op_hostnode.c.
 *
 * A record per callback lives in the session's list until the callback ends. At
 * the close every blocked callback is released (hf_dying) and later ones return
 * at once; records of callbacks the driver never ran (a context error cancels
 * them) are freed at the teardown, after the context is gone.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"

static void CUDA_CB hostfn_cb(void *data);

static be_hostfn_capture_fn on_capture; /* set before any session */

void be_hostfn_set_capture(be_hostfn_capture_fn fn) { on_capture = fn; }

/* Caller holds hf_mu. */
static void hf_unlink(be_session *s, be_hostfn *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		s->hf_list = h->next;
	if (h->next)
		h->next->prev = h->prev;
}

/* Puts h, a callback for the client's function id, in the session's list; its serial. */
static uint64_t hf_link(be_session *s, be_hostfn *h, uint64_t id)
{
	h->s = s;
	h->id = id;
	pthread_mutex_lock(&s->hf_mu);
	uint64_t serial = h->serial = ++s->hf_serial;
	h->next = s->hf_list;
	if (s->hf_list)
		s->hf_list->prev = h;
	s->hf_list = h;
	pthread_mutex_unlock(&s->hf_mu);
	return serial;
}

static void CUDA_CB hostfn_cb(void *data)
{
	be_hostfn *h = data;
	be_session *s = h->s;

	pthread_mutex_lock(&s->hf_mu);
	if (!s->hf_dying) {
		h->waiting = 1;
		pthread_mutex_unlock(&s->hf_mu);

		proto_msg m;
		proto_msg_begin(&m, PROTO_OP_HOSTFN, 0, 1);
		proto_msg_u64(&m, h->id);
		int err = be_event_send(s, &m);
		if (err)
			LOG_DEBUG(BE_LOG, "session %" PRIu64 ": host function %" PRIu64 ": %s", s->id, h->id,
				  transport_strerror(err));

		pthread_mutex_lock(&s->hf_mu);
		/* A failed send closes the connection, which sets hf_dying. */
		while (!h->done && !s->hf_dying)
			pthread_cond_wait(&s->hf_cv, &s->hf_mu);
	}
	hf_unlink(s, h);
	pthread_mutex_unlock(&s->hf_mu);
	free(h);
}

int be_op_hostfn(be_session *s, be_req *rq, uint64_t stream_id, uint64_t id)
{
	CUstream st;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	/* Captured, it fires at every replay of the graph: a host node's record
	 * (op_hostnode.c, registered as on_capture), which the graph and its execs
	 * hold. */
	if ((err = be_stream_capturing(st)) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
		return on_capture ? on_capture(s, st, id) : err;
	if (err)
		return err;
	be_hostfn *h = calloc(1, sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t serial = hf_link(s, h, id);

	/* With the test double the callback has run (and freed h) when this
	 * returns; h may only be touched again after looking it up. */
	CUresult r = be_drv.cuLaunchHostFunc(st, hostfn_cb, h);
	if (r != CUDA_SUCCESS) {
		pthread_mutex_lock(&s->hf_mu);
		for (be_hostfn *x = s->hf_list; x; x = x->next) {
			if (x->serial == serial && !x->waiting) {
				hf_unlink(s, x);
				free(x);
				break;
			}
		}
		pthread_mutex_unlock(&s->hf_mu);
	}
	return r;
}

void be_hostfn_call(be_session *s, uint64_t id)
{
	be_hostfn *h = calloc(1, sizeof(*h));
	if (!h) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": out of memory: host function %" PRIu64 " not called", s->id, id);
		return;
	}
	hf_link(s, h, id);
	hostfn_cb(h);
}

int be_op_hostfn_done(be_session *s, be_req *rq, uint64_t id)
{
	int found = 0;

	pthread_mutex_lock(&s->hf_mu);
	/* The oldest waiting callback with this id (the list is newest first). */
	be_hostfn *match = NULL;
	for (be_hostfn *h = s->hf_list; h; h = h->next)
		if (h->id == id && h->waiting && !h->done)
			match = h;
	if (match) {
		match->done = 1;
		found = 1;
		pthread_cond_broadcast(&s->hf_cv);
	}
	pthread_mutex_unlock(&s->hf_mu);
	if (!found)
		LOG_INFO(BE_LOG, "session %" PRIu64 ": hostfn_done(%" PRIu64 ") for no waiting host function", s->id, id);
	return CUDA_SUCCESS;
}

void be_hostfn_release_all(be_session *s)
{
	pthread_mutex_lock(&s->hf_mu);
	s->hf_dying = 1;
	pthread_cond_broadcast(&s->hf_cv);
	pthread_mutex_unlock(&s->hf_mu);
}

void be_hostfn_cleanup(be_session *s)
{
	pthread_mutex_lock(&s->hf_mu);
	be_hostfn *h = s->hf_list;
	s->hf_list = NULL;
	pthread_mutex_unlock(&s->hf_mu);
	while (h) {
		be_hostfn *next = h->next;
		free(h);
		h = next;
	}
}
