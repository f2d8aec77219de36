/*
 * Sessions: one per accepted connection. This file holds their life cycle
 * (transport callbacks on the loop thread, the teardown the executor runs at the
 * end), the handle lookups handlers use, and replies with the latched error.
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
#include "prio.h"
#include "admit.h"
#include "peer.h"
#include "stripe.h"
#include "tenants.h"

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
static void teardown_vmm_fresh(be_session *s);
static int session_busy(be_session *s);

static _Thread_local proto_msg tls_msg; /* replies are built and sent by one thread */
static _Thread_local uint64_t tls_seq;  /* the seq of the reply in tls_msg */
static atomic_int shutting_down;
static atomic_int nsessions;

/* ---- replies ---- */

void be_latch(be_session *s, int status)
{
	int expected = 0;
	if (status > 0)
		atomic_compare_exchange_strong(&s->latched, &expected, status);
}

proto_msg *be_reply_begin_seq(be_session *s, uint64_t seq, uint32_t nresults)
{
	tls_seq = seq;
	proto_msg_begin_reply(&tls_msg, seq, 0, atomic_exchange(&s->latched, 0), nresults);
	return &tls_msg;
}

proto_msg *be_reply_begin(be_session *s, be_req *rq, uint32_t nresults)
{
	return be_reply_begin_seq(s, rq->seq, nresults);
}

int be_reply_status_seq(be_session *s, uint64_t seq, int status)
{
	tls_seq = seq;
	proto_msg_begin_reply(&tls_msg, seq, status, atomic_exchange(&s->latched, 0), 0);
	return be_reply_send(s, &tls_msg, NULL, 0);
}

int be_reply_status(be_session *s, be_req *rq, int status) { return be_reply_status_seq(s, rq->seq, status); }

int be_event_send(be_session *s, proto_msg *m)
{
	int err = TRANSPORT_ENOMEM;
	if (proto_msg_finish(m, PROTO_F_EVENT, 0) == PROTO_OK) {
		struct iovec iov = {m->data, m->len};
		if (!(err = transport_sendv(s->conn, &iov, 1)))
			be_stat_sent(s->stat, m->len);
	}
	proto_msg_free(m);
	return err;
}

int be_reply_u64(be_session *s, be_req *rq, uint64_t v)
{
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_u64(m, v);
	return be_reply_end(s, rq, m, NULL, 0);
}

typedef struct staged_reply {
	be_session *s;
	be_buf b;
} staged_reply;

/* transport_sent_fn: the client has the bytes (or never will). */
static void staged_sent(void *ctx, int err)
{
	staged_reply *x = ctx;
	be_staging_release(&x->s->staging, &x->b);
	free(x);
}

/* One writev: the header and msgpack part, then the payload (out: staged,
 * released once sent; else the caller's, unchanged). */
static int reply_send(be_session *s, proto_msg *m, const void *payload, size_t len, be_buf *out)
{
	struct iovec iov[2];
	int err;

	if (proto_msg_finish(m, PROTO_F_REPLY, len) != PROTO_OK) {
		/* The results did not fit in memory: still answer, so the client
		 * does not wait forever. */
		uint64_t seq = m == &tls_msg ? tls_seq : 0;
		proto_msg_free(m);
		LOG_ERROR(BE_LOG, "session %" PRIu64 ": out of memory building a reply", s->id);
		proto_msg_begin_reply(m, seq, CUDA_ERROR_OUT_OF_MEMORY, 0, 0);
		proto_msg_finish(m, PROTO_F_REPLY, 0);
		len = 0;
	}
	be_devout_flush(s); /* device printf text goes before the answer of the call that flushed it */
	iov[0] = (struct iovec){m->data, m->len};
	iov[1] = (struct iovec){(void *)payload, len};
	staged_reply *x = out && len ? malloc(sizeof(*x)) : NULL;
	if (x) {
		*x = (staged_reply){.s = s, .b = *out};
		*out = (be_buf){0};
		err = transport_sendv_async(s->conn, iov, 2, staged_sent, x);
		if (err)
			staged_sent(x, err); /* nothing was sent: nothing reads it */
	} else {
		err = transport_sendv(s->conn, iov, len ? 2 : 1);
		if (out)
			be_staging_release(&s->staging, out);
	}
	if (!err)
		be_stat_sent(s->stat, m->len + len);
	if (be_srv.idle_timeout_ms)
		atomic_store_explicit(&s->last_active, rg_clock_ns(), memory_order_relaxed);
	proto_msg_free(m);
	if (err) {
		LOG_DEBUG(BE_LOG, "session %" PRIu64 ": reply not sent: %s", s->id, transport_strerror(err));
		return err;
	}
	return BE_REPLIED;
}

int be_reply_send(be_session *s, proto_msg *m, const void *payload, size_t len)
{
	return reply_send(s, m, payload, len, NULL);
}

int be_reply_send_staged(be_session *s, proto_msg *m, be_buf *out, size_t len)
{
	return reply_send(s, m, out->p, len, out);
}

int be_reply_end(be_session *s, be_req *rq, proto_msg *m, const void *payload, size_t len)
{
	return be_reply_send(s, m, payload, len);
}

/* ---- handle lookups ---- */

static int lookup(be_session *s, const be_htab *t, const char *kind, uint64_t id, void **obj, uint64_t *aux)
{
	int r = be_htab_get(t, id, obj, aux);
	if (r == BE_H_OK)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s %" PRIu64 ": %s", s->id, kind, id, be_h_strerror(r));
	return CUDA_ERROR_INVALID_HANDLE;
}

int be_get_stream(be_session *s, uint64_t id, CUstream *out)
{
	void *o = NULL;
	if (id == 0) { /* the NULL stream of the session's context */
		*out = NULL;
		return 0;
	}
	int r = lookup(s, &s->streams, "stream", id, &o, NULL);
	*out = o;
	return r;
}

/* The typed lookups of session.h: one table each, named in the log. */
#define BE_GETTER(name, type, table, label)                                  \
	int be_get_##name(be_session *s, uint64_t id, type *out)            \
	{                                                                    \
		void *o = NULL;                                              \
		int r = lookup(s, &s->table, label, id, &o, NULL);           \
		*out = o;                                                    \
		return r;                                                    \
	}
BE_GETTER(event, CUevent, events, "event")
BE_GETTER(module, CUmodule, modules, "module")
BE_GETTER(func, CUfunction, funcs, "function")
BE_GETTER(graph, CUgraph, graphs, "graph")
BE_GETTER(gexec, CUgraphExec, gexecs, "graph exec")
BE_GETTER(array, be_array *, arrays, "array")
#undef BE_GETTER

int be_stream_capturing(CUstream st)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!be_drv.cuStreamIsCapturing)
		return 0;
	CUresult r = be_drv.cuStreamIsCapturing(st, &cs);
	if (r != CUDA_SUCCESS)
		return r;
	return cs == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

const char *be_errname(int status) { return be_driver_error_name((CUresult)status); }

/* ---- life cycle (loop thread) ---- */

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
	be_htab_init(&s->streams);
	be_htab_init(&s->events);
	be_htab_init(&s->modules);
	be_htab_init(&s->funcs);
	be_htab_init(&s->graphs);
	be_htab_init(&s->gexecs);
	be_htab_init(&s->arrays);
	be_htab_init(&s->nodes);
	be_htab_init(&s->node_ids);
	be_htab_init(&s->texobjs);
	be_htab_init(&s->surfobjs);
	be_htab_init(&s->pools);
	be_ranges_init(&s->ranges);
	/* What teardown must destroy with each device's context current. */
	be_htab *per_dev[] = {&s->streams, &s->events, &s->modules, &s->funcs, &s->graphs, &s->gexecs,
			      &s->arrays, &s->texobjs, &s->surfobjs};
	for (size_t i = 0; i < sizeof(per_dev) / sizeof(per_dev[0]); i++)
		per_dev[i]->dev_src = &s->cur;
	s->ranges.dev_src = &s->cur;
	if (be_staging_init(&s->staging, BE_CHUNK_SIZE, BE_MAX_CHUNKS, BE_BIG_MAX) != 0 || be_waiter_init(s) != 0) {
		LOG_ERROR(BE_LOG, "%s: out of memory for a session", c->peer);
		be_admit_release(c->peer);
		session_free(s);
		return NULL;
	}
	be_staging_set_conn(&s->staging, c);
	uv_async_init(loop, &s->done_async, on_done);
	s->done_async.data = s;
	if (be_waiter_start(s) != 0 || be_executor_start(s) != 0) {
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

/* Whether the call of a frame runs before on_frame returns, so that its
 * arguments can be read where the transport lent them: ops of the loop thread,
 * and quick ops while the executor is idle (the loop thread is its only
 * producer, so it stays idle until we push). */
static int runs_now(be_session *s, const be_op_desc *d)
{
	return d && ((d->flags & BE_OP_LOOP) || ((d->flags & BE_OP_QUICK) && be_executor_idle(s)));
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
	if (d && (d->flags & BE_OP_QUICK) && be_executor_run_inline(s, &fr->rq))
		return;
	if (fr->rq.frame.msg_lent && frame_keep(s, fr) != 0)
		return;
	be_executor_push(s, &fr->rq);
}

void be_session_reject(be_session *s, const char *why)
{
	if (atomic_exchange(&s->rejected, 1))
		return;
	LOG_WARN(BE_LOG, "session %" PRIu64 " (%s): %s: closing the connection", s->id, s->peer, why);
	transport_shutdown(s->conn);
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
	be_htab_free(&s->streams);
	be_htab_free(&s->events);
	be_htab_free(&s->modules);
	be_htab_free(&s->funcs);
	be_htab_free(&s->graphs);
	be_htab_free(&s->gexecs);
	be_htab_free(&s->arrays);
	be_htab_free(&s->nodes);
	be_htab_free(&s->node_ids);
	be_htab_free(&s->texobjs);
	be_htab_free(&s->surfobjs);
	be_htab_free(&s->pools);
	be_ranges_free(&s->ranges);
	be_frame_pool_free(s);
	if (s->staging.all)
		be_staging_destroy(&s->staging);
	pthread_mutex_destroy(&s->q_mu);
	pthread_cond_destroy(&s->q_cv);
	pthread_mutex_destroy(&s->hf_mu);
	pthread_cond_destroy(&s->hf_cv);
	be_pong_destroy(s);
	if (s->w.tail) {
		pthread_mutex_destroy(&s->w.mu);
		pthread_cond_destroy(&s->w.cv);
	}
	free(s);
}

/* ---- teardown (executor thread) ---- */

typedef struct td_count {
	be_session *s;
	unsigned n, failed;
} td_count;

static void td_gexec(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuGraphExecDestroy((CUgraphExec)obj) != CUDA_SUCCESS;
}

static void td_graph(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	if (aux & BE_GRAPH_CAPTURING)
		return; /* a capture's: it goes with its stream, below */
	c->n++;
	c->failed += be_drv.cuGraphDestroy((CUgraph)obj) != CUDA_SUCCESS;
}

static void td_event(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuEventDestroy((CUevent)obj) != CUDA_SUCCESS;
}

static void td_stream(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuStreamDestroy((CUstream)obj) != CUDA_SUCCESS;
}

static void td_texobj(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuTexObjectDestroy((CUtexObject)id) != CUDA_SUCCESS;
}

static void td_surfobj(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuSurfObjectDestroy((CUsurfObject)id) != CUDA_SUCCESS;
}

static void td_array(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	be_array *a = obj;
	c->n++;
	c->failed += be_drv.cuArrayDestroy(a->h) != CUDA_SUCCESS;
	free(a);
}

/* After the session's allocations are freed: a pool is the device's, not the
 * context's, so cuCtxDestroy would leave it and its reserve behind. */
static void td_pool(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuMemPoolDestroy((CUmemoryPool)obj) != CUDA_SUCCESS;
}

static void td_module(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	c->n++;
	c->failed += be_drv.cuModuleUnload((CUmodule)obj) != CUDA_SUCCESS;
}

/* The session's VMM objects under a context of its own, when the session's
 * context had a sticky error (be_session_teardown). Without one they are
 * only forgotten, and the failure logged. */
static void teardown_vmm_fresh(be_session *s)
{
	CUcontext tmp = NULL;
	CUresult r = be_drv.cuCtxCreate(&tmp, NULL, 0, be_srv.gpu[0].dev);

	if (r != CUDA_SUCCESS)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": no context to release VMM memory after a sticky error: %s",
			 s->id, be_errname(r));
	be_vmm_teardown(s);
	if (tmp && (r = be_drv.cuCtxDestroy(tmp)) != CUDA_SUCCESS)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": cuCtxDestroy: %s", s->id, be_errname(r));
}

void be_session_teardown(be_session *s)
{
	td_count gx = {s}, gr = {s}, ev = {s}, st = {s}, mo = {s}, to = {s}, so = {s}, ar = {s}, po = {s};
	unsigned nalloc = 0, afailed = 0;
	uint64_t bytes = s->ranges.bytes;
	CUresult r;

	be_peer_push_join(s); /* they use the session's staging, streams and connection */
	be_stripes_join_all(s); /* the stripe threads use its staging */
	if (s->ctx) {
		/* Communicators first: an NCCL kernel waiting on a peer that will not
		 * come would hold the waiter and cuCtxSynchronize below forever. */
		be_drv.cuCtxSetCurrent(s->ctx);
		be_lib_teardown_early(s);
	}
	if (be_waiter_stop(s) != 0) {
		/* The waiter is inside the driver and does not come back: nothing of
		 * the session may be freed under it. Better a leak than a crash. */
		s->leaked = 1;
		LOG_ERROR(BE_LOG, "session %" PRIu64 ": waiter stuck in the driver for %d ms; the session's "
			  "resources are leaked", s->id, BE_WAITER_JOIN_MS);
		return;
	}
	unsigned nchunks = s->staging.nchunks;
	uint64_t fallbacks = s->staging.fallbacks;
	if (s->ctx) {
		/* Frees must not fail because a capture is under way, here (the client
		 * left in the middle of one) or in another session of the process. */
		CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
		be_drv.cuThreadExchangeStreamCaptureMode(&relaxed);
		/* Every device's work ends first: a peer copy may still read memory
		 * of another device. */
		int poisoned = 0;
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			if ((r = be_session_select(s, (uint32_t)d)) != CUDA_SUCCESS)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": cuCtxSetCurrent: %s", s->id, be_errname(r));
			if ((r = be_drv.cuCtxSynchronize()) != CUDA_SUCCESS)
				LOG_INFO(BE_LOG, "session %" PRIu64 ": cuCtxSynchronize at teardown: %s", s->id,
					 be_errname(r));
			/* A failed synchronize means a sticky error (a kernel faulted): the
			 * context refuses every later call, cuMemRelease and cuMemUnmap too,
			 * and VMM memory is the device's, so cuCtxDestroy would not take it
			 * either. It is released under a fresh context instead, below. */
			poisoned |= r != CUDA_SUCCESS;
		}
		/* (device 0's context is current now) */
		be_region_teardown(s); /* no copy reads the regions any more */
		be_waiter_cleanup(s);
		be_prio_drop(s);    /* its marker events, while their contexts live */
		be_lib_teardown(s); /* library handles may use the streams below */
		/* Each object is destroyed with its own device's context current. */
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			be_session_select(s, (uint32_t)d);
			be_htab_each_dev(&s->gexecs, d, td_gexec, &gx);
			be_htab_each_dev(&s->graphs, d, td_graph, &gr);
			be_htab_each_dev(&s->events, d, td_event, &ev);
			be_htab_each_dev(&s->streams, d, td_stream, &st);
			be_htab_each_dev(&s->modules, d, td_module, &mo);
			/* Objects that read an array go before it. */
			be_htab_each_dev(&s->texobjs, d, td_texobj, &to);
			be_htab_each_dev(&s->surfobjs, d, td_surfobj, &so);
			be_htab_each_dev(&s->arrays, d, td_array, &ar);
			if (!poisoned && d == 0)
				be_vmm_teardown(s); /* mappings before the memory behind them, reservations last */
			for (size_t i = 0; i < s->ranges.n; i++) {
				if (s->ranges.r[i].kind == BE_RANGE_VAR || s->ranges.r[i].kind == BE_RANGE_MAPPED ||
				    s->ranges.r[i].dev != d)
					continue;
				nalloc++;
				afailed += be_drv.cuMemFree((CUdeviceptr)s->ranges.r[i].base) != CUDA_SUCCESS;
			}
		}
		be_htab_each(&s->pools, td_pool, &po);
		be_staging_destroy(&s->staging);
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			if (!s->ctxs[d])
				continue;
			r = be_srv.primary_ctx ? be_drv.cuDevicePrimaryCtxRelease(be_srv.gpu[d].dev)
					       : be_drv.cuCtxDestroy(s->ctxs[d]);
			if (r != CUDA_SUCCESS)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": %s: %s", s->id,
					 be_srv.primary_ctx ? "cuDevicePrimaryCtxRelease" : "cuCtxDestroy", be_errname(r));
			s->ctxs[d] = NULL;
		}
		s->ctx = NULL;
		be_session_select_forget();
		if (poisoned)
			teardown_vmm_fresh(s);
	} else {
		be_region_teardown(s);
		be_waiter_cleanup(s);
		be_staging_destroy(&s->staging);
	}
	be_hostfn_cleanup(s);
	be_hostnode_cleanup(s);
	be_tenant_logout(s); /* after every free: what is left goes back at once */
	unsigned failed = gx.failed + gr.failed + ev.failed + st.failed + mo.failed + to.failed + so.failed + ar.failed +
			  po.failed + afailed;
	LOG_INFO(BE_LOG,
		 "session %" PRIu64 " (%s, pid %" PRIu64 " %s) ended: freed %u allocations (%" PRIu64 " bytes), "
		 "%u streams, %u events, %u modules, %u graphs, %u graph execs, %u arrays, %u texture and %u surface "
		 "objects, %u memory pools; staging %u chunks, %" PRIu64 " copies through pageable memory%s",
		 s->id, s->client_host[0] ? s->client_host : s->peer, s->pid, s->program[0] ? s->program : "?", nalloc,
		 bytes, st.n, ev.n, mo.n, gr.n, gx.n, ar.n, to.n, so.n, po.n, nchunks, fallbacks, failed ? " (some destroys failed)" : "");
}
