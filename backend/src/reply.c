/*
 * What a session sends its client: replies (with the error latched from
 * earlier async calls in their header), events outside the replies, and the
 * refusal that ends a session. Any thread of the session sends (the executor,
 * the waiter, the loop for inline runs, driver threads for events);
 * transport_sendv serialises. A reply is built in a per-thread message
 * (tls_msg) and goes out in one writev with its payload.
 *
 * The lowest of the session's files: it calls the transport, the staging
 * pool and the counters, nothing of the session's life. What must go out
 * before every reply (device printf text, devout.c) is registered here
 * (be_reply_set_before) rather than called by name.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

static void staged_sent(void *ctx, int err);
static int reply_send(be_session *s, proto_msg *m, const void *payload, size_t len, be_buf *out);

static _Thread_local proto_msg tls_msg; /* replies are built and sent by one thread */
static _Thread_local uint64_t tls_seq;  /* the seq of the reply in tls_msg */
static be_session_fn before_reply;      /* set once, before any session */

void be_reply_set_before(be_session_fn fn) { before_reply = fn; }

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
	if (before_reply)
		before_reply(s); /* device printf text goes before the answer of the call that flushed it */
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

void be_session_reject(be_session *s, const char *why)
{
	if (atomic_exchange(&s->rejected, 1))
		return;
	LOG_WARN(BE_LOG, "session %" PRIu64 " (%s): %s: closing the connection", s->id, s->peer, why);
	transport_shutdown(s->conn);
}
