/*
 * B's side of a server to server copy: the connections of the peer listener.
 * A peer is not a client: it never says hello and holds no token. Its first
 * frame must be a small peer_open presenting a ticket (peer_ticket.c) within
 * BE_PEER_OPEN_MS, and nothing else is read or allocated before the ticket is
 * checked; a refused ticket is answered CUDA_ERROR_NOT_PERMITTED and the
 * connection closed. Then each peer_data chunk, in order and within the
 * ticket's range, is received into a staging buffer of the ticket's session
 * and queued on that session's executor like one of its client's calls
 * (op_peer_push.c's be_op_peer_data writes it in the ticket's stream order and
 * answers A). So the bytes land after every call the client made on B before
 * it asked for the ticket, and before every call it makes after A's reply.
 *
 * Lifetimes: a transfer is found by its id under a mutex (the executor
 * answers through it); the loop thread holds one reference until on_close,
 * an answer one while it sends. A session that closes ends its transfers and
 * tickets first (be_peer_session_gone), so no chunk is queued on a freed one.
 */
#include "peer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct xfer {
	transport_conn *conn;
	uint64_t id;
	int refs; /* (mu) */
	/* loop thread */
	uv_timer_t deadline;
	be_peer_grant g; /* g.s NULL: no session (not yet, or gone) */
	int authed, opened, rejected;
	uint64_t next; /* offset of the next chunk */
	be_frame *rx;  /* the chunk being received */
	struct xfer *next_x;
} xfer;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static xfer *live;
static int nlive;
static uint64_t next_id = 1;

static void unref(xfer *x)
{
	pthread_mutex_lock(&mu);
	int last = --x->refs == 0;
	if (last) {
		for (xfer **p = &live; *p; p = &(*p)->next_x)
			if (*p == x) {
				*p = x->next_x;
				break;
			}
		nlive--;
	}
	pthread_mutex_unlock(&mu);
	if (last) {
		transport_close(x->conn);
		free(x);
	}
}

static void reject(xfer *x, const char *why)
{
	if (x->rejected)
		return;
	x->rejected = 1;
	LOG_WARN(BE_LOG, "peer connection from %s: %s: closing it", x->conn->peer, why);
	transport_shutdown(x->conn);
}

/* An answer to A: a reply of seq with status, no results. */
static void answer(transport_conn *c, uint64_t seq, int status)
{
	proto_msg m;
	proto_msg_begin_reply(&m, seq, status, 0, 0);
	if (proto_msg_finish(&m, PROTO_F_REPLY, 0) == PROTO_OK) {
		struct iovec iov = {m.data, m.len};
		transport_sendv(c, &iov, 1);
	}
	proto_msg_free(&m);
}

void be_peer_answer(uint64_t id, uint64_t seq, int status)
{
	xfer *x;
	pthread_mutex_lock(&mu);
	for (x = live; x && x->id != id; x = x->next_x)
		;
	if (x)
		x->refs++;
	pthread_mutex_unlock(&mu);
	if (x) {
		answer(x->conn, seq, status);
		unref(x);
	}
}

static void on_deadline(uv_timer_t *t)
{
	xfer *x = t->data;
	if (!x->authed)
		reject(x, "no ticket in time");
}

static void *on_accept(void *ctx, transport_conn *c)
{
	uv_loop_t *loop = ctx;
	xfer *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	pthread_mutex_lock(&mu);
	int full = nlive >= BE_PEER_MAX_CONNS;
	if (!full) {
		x->id = next_id++;
		x->refs = 1;
		x->conn = c;
		x->next_x = live;
		live = x;
		nlive++;
	}
	pthread_mutex_unlock(&mu);
	if (full) {
		LOG_WARN(BE_LOG, "peer connection from %s: %d already open: refused", c->peer, BE_PEER_MAX_CONNS);
		free(x);
		return NULL;
	}
	uv_timer_init(loop, &x->deadline);
	x->deadline.data = x;
	uv_timer_start(&x->deadline, on_deadline, BE_PEER_OPEN_MS, 0);
	return x;
}

/* Before the ticket: one small peer_open; after: chunks of at most a staging
 * chunk. Anything else ends the connection before a byte of it is read. */
static int frame_ok(void *ctx, const proto_hdr *h)
{
	xfer *x = ctx;
	if (x->rejected)
		return 0;
	if (!x->opened && h->op == PROTO_OP_PEER_OPEN && h->payload_len == 0 && h->hdr_len <= 64) {
		x->opened = 1;
		return 1;
	}
	if (x->authed && h->op == PROTO_OP_PEER_DATA && h->payload_len > 0 && h->payload_len <= BE_CHUNK_SIZE &&
	    h->hdr_len <= 32)
		return 1;
	reject(x, x->authed ? "not a chunk of the copy" : "no ticket first");
	return 0;
}

static void *payload_dest(void *ctx, const transport_frame *f)
{
	xfer *x = ctx;
	be_session *s = x->g.s;
	uint64_t off, len = f->hdr.payload_len;

	if (x->rejected || f->hdr.op != PROTO_OP_PEER_DATA)
		return NULL;
	proto_view v = {0};
	int bad = proto_view_init(&v, &f->hdr, f->msg) != PROTO_OK || proto_arg_u64(&v, 0, &off) != 0 ||
		  off != x->next || len > x->g.len - off;
	proto_view_free(&v);
	if (bad) {
		reject(x, "a chunk out of order or outside the ticket's range");
		return NULL;
	}
	if (!s)
		return NULL; /* the session is gone: on_frame drops the chunk */
	be_frame *fr = be_frame_get(s);
	if (!fr) {
		reject(x, "out of memory");
		return NULL;
	}
	if (be_staging_take_nb(&s->staging, (size_t)len, &fr->payload) != 0) {
		/* Bounded: A has at most BE_PEER_WINDOW chunks in flight. */
		void *p = malloc((size_t)len);
		fr->payload = (be_buf){p, (size_t)len, p ? BE_BUF_MALLOC : BE_BUF_NONE};
	}
	if (!fr->payload.p) {
		be_frame_free(s, fr);
		reject(x, "no memory for a chunk");
		return NULL;
	}
	x->next += len;
	fr->rq.frame.msg = f->msg; /* to match in on_frame */
	x->rx = fr;
	return fr->payload.p;
}

static void on_open(xfer *x, transport_frame *f)
{
	proto_view v = {0};
	const void *t;
	size_t n;
	const char *why = "malformed peer_open";
	int st = CUDA_ERROR_NOT_PERMITTED;

	if (proto_view_init(&v, &f->hdr, f->msg) == PROTO_OK && proto_arg_bin(&v, 0, &t, &n) == 0 &&
	    n == BE_PEER_TICKET_LEN)
		st = be_peer_ticket_take(t, &x->g, &why);
	proto_view_free(&v);
	answer(x->conn, f->hdr.seq, st);
	if (st != 0) {
		x->g.s = NULL;
		reject(x, why);
		return;
	}
	x->authed = 1;
	uv_timer_stop(&x->deadline);
	LOG_DEBUG(BE_LOG, "peer connection from %s: %" PRIu64 " bytes for session %" PRIu64, x->conn->peer, x->g.len,
		  x->g.sid);
}

static void on_frame(void *ctx, transport_frame *f)
{
	xfer *x = ctx;
	be_frame *fr = x->rx && x->rx->rq.frame.msg == f->msg ? x->rx : NULL;
	be_session *s = x->g.s;

	x->rx = NULL;
	if (x->rejected || f->hdr.op != PROTO_OP_PEER_DATA || !fr || !s) {
		if (!x->rejected && f->hdr.op == PROTO_OP_PEER_OPEN && !x->authed)
			on_open(x, f);
		if (fr)
			be_frame_free(s, fr);
		else
			transport_frame_free(f);
		return;
	}
	if (f->msg_lent && transport_frame_keep(f) != TRANSPORT_OK) {
		transport_frame_free(f);
		be_frame_free(s, fr);
		reject(x, "out of memory");
		return;
	}
	/* One of the session's calls now: on the ticket's device, answered under
	 * A's seq through this transfer. */
	fr->rq.frame = *f;
	fr->rq.frame.payload = fr->payload.p;
	fr->rq.frame.hdr.status = (int32_t)x->g.dev;
	fr->peer.xfer = x->id;
	fr->peer.dst = x->g.dst;
	fr->peer.stream = x->g.stream_id;
	fr->peer.last = x->next == x->g.len;
	if (proto_view_reuse(&fr->rq.view, &fr->rq.frame.hdr, fr->rq.frame.msg) != PROTO_OK) {
		be_frame_free(s, fr);
		reject(x, "malformed chunk");
		return;
	}
	fr->rq.seq = f->hdr.seq;
	fr->flags = f->hdr.flags;
	be_executor_push(s, &fr->rq);
}

static void timer_closed(uv_handle_t *h) { unref(h->data); }

static void on_close(void *ctx, int err)
{
	xfer *x = ctx;
	if (x->rx) {
		x->rx->rq.frame.msg = NULL; /* the transport freed the cut-short frame */
		if (x->g.s)
			be_frame_free(x->g.s, x->rx);
		x->rx = NULL;
	}
	if (x->authed && x->next < x->g.len)
		LOG_WARN(BE_LOG, "peer connection from %s: closed after %" PRIu64 " of %" PRIu64 " bytes (%s)",
			 x->conn->peer, x->next, x->g.len, transport_strerror(err));
	x->g.s = NULL;
	uv_close((uv_handle_t *)&x->deadline, timer_closed);
}

void be_peer_session_gone(be_session *s)
{
	be_peer_ticket_forget(s);
	pthread_mutex_lock(&mu);
	for (xfer *x = live; x; x = x->next_x) {
		if (x->g.s != s)
			continue;
		/* I/O stops at once (its on_close comes soon, on this thread), so
		 * the chunk being received can go with the session's staging. */
		transport_shutdown(x->conn);
		if (x->rx) {
			x->rx->rq.frame.msg = NULL;
			be_frame_free(s, x->rx);
			x->rx = NULL;
		}
		x->g.s = NULL;
	}
	pthread_mutex_unlock(&mu);
}

const transport_server_cb *be_peer_callbacks(void)
{
	static const transport_server_cb cb = {
		.on_accept = on_accept,
		.payload_dest = payload_dest,
		.frame_ok = frame_ok,
		.on_frame = on_frame,
		.on_close = on_close,
	};
	return &cb;
}
