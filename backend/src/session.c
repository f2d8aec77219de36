/*
 * Sessions: one per accepted connection. This file holds their life cycle:
 * the transport's callbacks on the loop thread, from accept to the free.
 * Replies are reply.c's, the handle tables session_handles.c's, the teardown
 * the executor runs at the end teardown.c's.
 *
 * Life of a session:
 *   on_accept    allocate, start the executor and waiter threads
 *   on_frame     decode, run BE_OP_LOOP ops here, queue the rest
 *   on_close     (exactly once, whatever ended the connection: the peer, a
 *                malformed frame, be_session_reject, server shutdown) wake
 *                blocked host functions and tell the executor to stop
 *   executor     drops what is still queued, stops the waiter, destroys every
 *                driver object of the session, then signals done_async
 *   on_done      (loop) joins the executor, closes the connection, frees.
 * Only on_close starts a teardown, so nothing is freed while the transport can
 * still call back into the session.
 */
#include "backend.h"
#include "admit.h"
#include "peer.h"
#include "teardown.h"
#include "stripe.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"

static void on_done(uv_async_t *a);
static void on_done_closed(uv_handle_t *h);
static void session_free(be_session *s);
static be_frame *frame_decode(be_session *s, const transport_frame *f);
static void on_deadline(uv_timer_t *t);
static int session_busy(be_session *s);

static atomic_int shutting_down;
static atomic_int nsessions;

void be_sessions_shutdown(void) { atomic_store(&shutting_down, 1); }
int be_sessions_live(void) { return atomic_load(&nsessions); }

void *be_on_accept(void *ctx, transport_conn *c)
{
	uv_loop_t *loop = ctx;
	be_session *s;

	if (atomic_load(&shutting_down)) {
		LOG_INFO(BE_LOG, "%s: shutting down: connection refused", c->peer);
		return NULL;
	}
	if (be_admit_take(c->peer) != 0) /* logged there */
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		LOG_ERROR(BE_LOG, "%s: out of memory for a session", c->peer);
		be_admit_release(c->peer);
		return NULL;
	}
	s->admitted = 1;
	s->id = atomic_fetch_add(&be_srv.next_session, 1) + 1;
	s->conn = c;
	snprintf(s->peer, sizeof(s->peer), "%s", c->peer);
	pthread_mutex_init(&s->q_mu, NULL);
	pthread_cond_init(&s->q_cv, NULL);
	s->q_tail = &s->q_head;
	pthread_mutex_init(&s->hf_mu, NULL);
	pthread_cond_init(&s->hf_cv, NULL);
	be_pong_init(s);
	be_fetch_init(s);
	be_session_handles_init(s);
	if (be_staging_init(&s->staging, BE_CHUNK_SIZE, BE_MAX_CHUNKS, BE_BIG_MAX) != 0 || be_waiter_init(s) != 0) {
		LOG_ERROR(BE_LOG, "%s: out of memory for a session", c->peer);
		be_admit_release(c->peer);
		session_free(s);
		return NULL;
	}
	be_staging_set_conn(&s->staging, c);
	uv_async_init(loop, &s->done_async, on_done);
	s->done_async.data = s;
	if (be_waiter_start(s) != 0 || be_executor_start(s, be_session_teardown) != 0) {
		LOG_ERROR(BE_LOG, "%s: cannot start the session's threads", c->peer);
		if (s->w.started)
			be_waiter_stop(s);
		s->nclosing = 1;
		uv_close((uv_handle_t *)&s->done_async, on_done_closed);
		atomic_fetch_add(&nsessions, 1); /* on_done_closed counts it down */
		return NULL;
	}
	/* Nothing is spent on a connection that does not authenticate: it has
	 * hello_timeout to do so (then the same timer watches for idleness). */
	uv_timer_init(loop, &s->deadline);
	s->deadline.data = s;
	s->accept_ns = rg_clock_ns();
	atomic_store(&s->last_active, s->accept_ns);
	unsigned first = be_srv.hello_timeout_ms;
	if (!first || (be_srv.idle_timeout_ms && be_srv.idle_timeout_ms < first))
		first = be_srv.idle_timeout_ms;
	if (first)
		uv_timer_start(&s->deadline, on_deadline, first, 0);
	atomic_fetch_add(&nsessions, 1);
	be_status_session_open(s, loop);
	be_status_count_session();
	LOG_INFO(BE_LOG, "session %" PRIu64 ": connection from %s", s->id, s->peer);
	return s;
}

/* Whether the executor or the waiter has a call of s in hand. */
static int session_busy(be_session *s)
{
	return !be_executor_idle(s) || atomic_load(&s->w.busy) > 0;
}

/* Loop thread: the hello deadline, then (with --idle-timeout) the idle check. */
static void on_deadline(uv_timer_t *t)
{
	be_session *s = t->data;
	char why[96];

	if (atomic_load(&s->rejected) || atomic_load(&s->closing))
		return;
	uint64_t now = rg_clock_ns();
	if (!atomic_load(&s->hello_ok)) {
		uint64_t age_ms = (now - s->accept_ns) / 1000000u;
		unsigned next = 1000; /* the hello is being served (a context takes a while on a large GPU) */
		if (be_srv.hello_timeout_ms && !s->hello_seen) {
			if (age_ms >= be_srv.hello_timeout_ms) {
				snprintf(why, sizeof(why), "no hello within %u ms (--hello-timeout)",
					 be_srv.hello_timeout_ms);
				be_session_reject(s, why);
				return;
			}
			next = be_srv.hello_timeout_ms - (unsigned)age_ms;
		}
		if (be_srv.idle_timeout_ms && be_srv.idle_timeout_ms < next)
			next = be_srv.idle_timeout_ms;
		uv_timer_start(t, on_deadline, next, 0);
		return;
	}
	if (!be_srv.idle_timeout_ms)
		return;
	uint64_t idle_ns = (uint64_t)be_srv.idle_timeout_ms * 1000000u;
	uint64_t quiet = now - atomic_load(&s->last_active);
	if (session_busy(s)) {
		uv_timer_start(t, on_deadline, be_srv.idle_timeout_ms, 0);
		return;
	}
	if (quiet >= idle_ns) {
		snprintf(why, sizeof(why), "idle for %u s (--idle-timeout)", be_srv.idle_timeout_ms / 1000);
		be_session_reject(s, why);
		return;
	}
	uv_timer_start(t, on_deadline, (idle_ns - quiet) / 1000000u + 1, 0);
}

int be_frame_ok(void *ctx, const proto_hdr *h)
{
	be_session *s = ctx;
	char why[96];

	if (atomic_load_explicit(&s->hello_ok, memory_order_acquire))
		return 1;
	/* Before authentication, one small hello and nothing else: a frame's
	 * msgpack part and payload are allocated as they arrive, and an
	 * unauthenticated peer must not make us allocate (a 1 GiB module_load
	 * once could). The client waits for the hello's reply before its next
	 * frame, and hello_ok is set before that reply is sent. */
	if (h->op == PROTO_OP_HELLO && !s->hello_seen && h->payload_len == 0 && h->hdr_len <= BE_HELLO_MAX_MSG) {
		s->hello_seen = 1;
		return 1;
	}
	snprintf(why, sizeof(why), "%s frame (%u + %llu bytes) before authentication", proto_op_name(h->op),
		 h->hdr_len, (unsigned long long)h->payload_len);
	be_session_reject(s, why);
	return 0;
}

/* Allocates a frame and decodes its msgpack part; NULL (session rejected) if
 * malformed. f->msg is not taken over yet. */
static be_frame *frame_decode(be_session *s, const transport_frame *f)
{
	be_frame *fr = be_frame_get(s);
	if (!fr) {
		be_session_reject(s, "out of memory");
		return NULL;
	}
	/* proto_view_reuse walks the bytes before msgpack-c allocates anything
	 * whenever a claimed element count could be large, so hostile counts are
	 * refused here too. */
	if (proto_view_reuse(&fr->rq.view, &f->hdr, f->msg) != PROTO_OK) {
		be_frame_free(s, fr);
		be_session_reject(s, "malformed message (arguments not a msgpack array, or containers larger than the message)");
		return NULL;
	}
	fr->rq.seq = fr->rq.view.seq;
	fr->rq.frame.msg = f->msg; /* for on_frame to match; owned from on_frame on */
	fr->flags = f->hdr.flags;
	return fr;
}

void *be_payload_dest(void *ctx, const transport_frame *f)
{
	be_session *s = ctx;
	uint64_t len = f->hdr.payload_len;

	if (atomic_load(&s->rejected))
		return NULL;
	/* A transport without the frame_ok hook still allocates no payload
	 * before authentication (the hello has none). */
	if (!atomic_load(&s->hello_ok)) {
		be_session_reject(s, "payload before authentication");
		return NULL;
	}
	be_frame *fr = frame_decode(s, f);
	if (!fr)
		return NULL;
	s->rx = fr;
	switch (fr->rq.view.op) {
	case PROTO_OP_MEMCPY_HTOD:
	case PROTO_OP_MEMCPY_2D_HTOD:
	case PROTO_OP_MEMCPY_HTOA:
		if (be_staging_take_nb(&s->staging, (size_t)len, &fr->payload) != 0)
			fr->payload = (be_buf){0};
		break;
	case PROTO_OP_MODULE_LOAD:
	case PROTO_OP_LINK: {
		void *p = malloc((size_t)len);
		fr->payload = (be_buf){p, (size_t)len, p ? BE_BUF_MALLOC : BE_BUF_NONE};
		break;
	}
	default:
		return NULL; /* on_frame refuses the frame */
	}
	if (!fr->payload.p) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": no memory for a payload of %" PRIu64 " bytes", s->id, len);
		fr->payload_lost = 1;
		return NULL;
	}
	return fr->payload.p;
}

/* Whether a frame of d may run on the loop thread when the executor is idle:
 * quick ops, and small copies (+now) of a session without a priority class
 * (a batch tenant's copies wait for admission on the executor, prio.c). */
static int may_inline(be_session *s, const be_op_desc *d)
{
	return d && ((d->flags & BE_OP_QUICK) || ((d->flags & BE_OP_NOW) && !s->prio));
}

/* Whether the call of a frame runs before on_frame returns, so that its
 * arguments can be read where the transport lent them: ops of the loop thread,
 * and quick ops while the executor is idle (the loop thread is its only
 * producer, so it stays idle until we push). A +now op that turns out unable
 * to (BE_NOT_NOW) is kept by frame_keep before it is pushed. */
static int runs_now(be_session *s, const be_op_desc *d)
{
	return d && ((d->flags & BE_OP_LOOP) || (may_inline(s, d) && be_executor_idle(s)));
}

/* A frame read in a lent buffer that must outlive on_frame after all: its own
 * copy, decoded again (the view points into the bytes). 0, or the frame is
 * freed and the session rejected. */
static int frame_keep(be_session *s, be_frame *fr)
{
	if (transport_frame_keep(&fr->rq.frame) != TRANSPORT_OK ||
	    proto_view_reuse(&fr->rq.view, &fr->rq.frame.hdr, fr->rq.frame.msg) != PROTO_OK) {
		be_frame_free(s, fr);
		be_session_reject(s, "out of memory");
		return -1;
	}
	return 0;
}

void be_on_frame(void *ctx, transport_frame *f)
{
	be_session *s = ctx;
	be_frame *fr = s->rx;
	uint32_t op = f->hdr.op;
	const be_op_desc *d = op != PROTO_OP_REPLY && op < PROTO_OP_COUNT && be_ops[op].run ? &be_ops[op] : NULL;

	if (fr && fr->rq.frame.msg == f->msg)
		s->rx = NULL;
	else
		fr = NULL;
	if (be_srv.idle_timeout_ms)
		atomic_store_explicit(&s->last_active, rg_clock_ns(), memory_order_relaxed);
	if (atomic_load(&s->rejected)) {
		if (fr)
			be_frame_free(s, fr);
		else
			transport_frame_free(f);
		return;
	}
	if (!fr && f->msg_lent && !runs_now(s, d) && transport_frame_keep(f) != TRANSPORT_OK) {
		be_session_reject(s, "out of memory");
		transport_frame_free(f);
		return;
	}
	if (!fr && !(fr = frame_decode(s, f))) {
		transport_frame_free(f);
		return;
	}
	fr->rq.frame = *f;
	fr->rq.frame.payload = fr->payload.p;

	be_stat_frame(s->stat, op, PROTO_HDR_SIZE + (uint64_t)f->hdr.hdr_len + f->hdr.payload_len);
	if (f->hdr.payload_len > 0) {
		if (d && !(d->flags & BE_OP_PAYLOAD)) {
			be_frame_free(s, fr);
			be_session_reject(s, "payload on an op that takes none");
			return;
		}
		if (!fr->payload.p)
			fr->payload_lost = 1;
	}
	if (d && (d->flags & BE_OP_LOOP)) {
		/* Ops that unblock the executor (hostfn_done) cannot wait in its queue. */
		if (!atomic_load(&s->hello_ok)) {
			be_frame_free(s, fr);
			be_session_reject(s, "op before hello");
			return;
		}
		int st = d->run(s, &fr->rq);
		if (st == BE_EPROTO) {
			LOG_WARN(BE_LOG, "session %" PRIu64 ": %s: malformed arguments", s->id, proto_op_name(op));
			st = CUDA_ERROR_INVALID_VALUE;
		}
		if (st > 0) {
			be_latch(s, st);
			be_stat_error(s->stat);
		}
		be_frame_free(s, fr);
		return;
	}
	if (may_inline(s, d) && be_executor_run_inline(s, &fr->rq))
		return;
	if (fr->rq.frame.msg_lent && frame_keep(s, fr) != 0)
		return;
	be_executor_push(s, &fr->rq);
}

void be_on_close(void *ctx, int err)
{
	be_session *s = ctx;

	if (s->rx) {
		s->rx->rq.frame.msg = NULL; /* the transport freed the cut-short frame */
		be_frame_free(s, s->rx);
		s->rx = NULL;
	}
	LOG_INFO(BE_LOG, "session %" PRIu64 " (%s): connection closed (%s)", s->id, s->peer, transport_strerror(err));
	atomic_store(&s->closing, 1);
	be_peer_session_gone(s); /* before anything of s goes */
	be_stripe_secret_forget(s); /* no stripe joins s from now on */
	be_stripes_session_gone(s);
	be_hostfn_release_all(s);
	be_executor_stop(s);
}

static void on_done(uv_async_t *a)
{
	be_session *s = a->data;

	pthread_join(s->exec_thread, NULL);
	be_pong_stop(s);
	/* A stuck waiter may still send on the connection: leak it with the rest. */
	if (!s->leaked)
		transport_close(s->conn);
	s->conn = NULL;
	be_status_session_close(s);
	s->nclosing = 2;
	uv_close((uv_handle_t *)&s->deadline, on_done_closed);
	uv_close((uv_handle_t *)&s->done_async, on_done_closed);
}

/* Once both handles of s are closed (libuv may run their callbacks in either
 * order), s can go. */
static void on_done_closed(uv_handle_t *h)
{
	be_session *s = h->data;
	if (--s->nclosing > 0)
		return;
	if (s->admitted)
		be_admit_release(s->peer);
	if (!s->leaked)
		session_free(s);
	atomic_fetch_sub(&nsessions, 1);
}

static void session_free(be_session *s)
{
	be_session_handles_free(s);
	be_frame_pool_free(s);
	if (s->staging.all)
		be_staging_destroy(&s->staging);
	pthread_mutex_destroy(&s->q_mu);
	pthread_cond_destroy(&s->q_cv);
	pthread_mutex_destroy(&s->hf_mu);
	pthread_cond_destroy(&s->hf_cv);
	be_pong_destroy(s);
	be_fetch_destroy(s);
	if (s->w.tail) {
		pthread_mutex_destroy(&s->w.mu);
		pthread_cond_destroy(&s->w.cv);
	}
	free(s);
}
