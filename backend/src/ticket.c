/*
 * rdma+tls: RDMA sessions whose credentials cross the network only inside TLS.
 *
 * RDMA cannot be wrapped in TLS without losing what it is for (the NICs move
 * payloads between registered buffers; encrypting them in software means
 * copying every byte through the CPU), so the session's data stays on RDMA,
 * in clear, and only the setup moves into TLS:
 *
 *  1. `remote-gpud --listen rdma+tls://HOST:PORT --tls-cert F --tls-key F`
 *     listens on tls://HOST:PORT (TCP). This file serves that listener.
 *  2. The client (frontend/src/ticket.c) connects there and sends a hello
 *     frame whose last argument asks for "rdma": [version, token, pid, host,
 *     program, "rdma"]. Nothing else is read from it (frame_ok), and it must
 *     come within --hello-timeout.
 *  3. Here the token is checked (a wrong one: the source's back-off, admit.c).
 *     Then a session process is started as for rdma's redirect (isolate.c), but
 *     listening as rdma+tls://HOST:0: on an RDMA port of its own, with a fresh
 *     128-bit cookie from getrandom, which it reports on a pipe.
 *  4. The reply, inside TLS: [port, cookie]. The client connects to
 *     rdma://HOST:port presenting the cookie in the connection request's
 *     private data (transport_connect_cookie).
 *  5. The session process serves the one connection that presents the cookie
 *     (compared in constant time), once, and only within BE_TICKET_CONNECT_MS;
 *     then it stops listening. Its hello over RDMA carries no token: the
 *     cookie stands for the token checked in step 3 (be_srv.cookie_auth).
 *
 * So neither the token nor the cookie is ever in clear on the wire, and a
 * stranger who sees the RDMA port cannot take the session (128 bits to guess
 * in 10 s, one try). What the TLS step cannot protect is the RDMA traffic that
 * follows: it is not encrypted, and the network must be trusted for its
 * confidentiality (docs/SECURITY.md).
 *
 * Only process isolation is supported (main.c refuses rdma+tls in thread
 * mode): a session process per ticket is what makes a cookie single-use and
 * its session the client's alone.
 */
#include "ticket.h"

#include "admit.h"
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "proto_ops.h"

typedef struct ticket_conn {
	transport_conn *c;
	uv_timer_t deadline; /* --hello-timeout: the hello, and the client's close after the reply */
	int answered;        /* one hello per connection */
	char peer[64];
} ticket_conn;

static void *ticket_accept(void *ctx, transport_conn *c);
static int ticket_frame_ok(void *conn_ctx, const proto_hdr *h);
static void ticket_frame(void *conn_ctx, transport_frame *f);
static void ticket_close(void *conn_ctx, int err);
static void ticket_reply(ticket_conn *t, uint64_t seq, int status, int port, const transport_cookie *cookie);
static void ticket_timeout(uv_timer_t *timer);
static void ticket_freed(uv_handle_t *h);

static const transport_server_cb ticket_cb = {
	.on_accept = ticket_accept,
	.on_frame = ticket_frame,
	.on_close = ticket_close,
	.frame_ok = ticket_frame_ok,
};

const transport_server_cb *be_ticket_callbacks(void) { return &ticket_cb; }

static void *ticket_accept(void *ctx, transport_conn *c)
{
	uv_loop_t *loop = ctx;
	if (be_admit_take(c->peer) != 0)
		return NULL;
	ticket_conn *t = calloc(1, sizeof(*t));
	if (!t) {
		be_admit_release(c->peer);
		return NULL;
	}
	t->c = c;
	snprintf(t->peer, sizeof(t->peer), "%s", c->peer);
	uv_timer_init(loop, &t->deadline);
	t->deadline.data = t;
	if (be_srv.hello_timeout_ms)
		uv_timer_start(&t->deadline, ticket_timeout, be_srv.hello_timeout_ms, 0);
	return t;
}

static void ticket_timeout(uv_timer_t *timer)
{
	ticket_conn *t = timer->data;
	if (!t->answered)
		LOG_WARN(BE_LOG, "%s: no hello within %u ms: closed", t->peer, be_srv.hello_timeout_ms);
	transport_shutdown(t->c);
}

/* Before authentication: one hello, small, with no payload; anything else ends
 * the connection before it is read. */
static int ticket_frame_ok(void *conn_ctx, const proto_hdr *h)
{
	ticket_conn *t = conn_ctx;
	int ok = !t->answered && h->op == PROTO_OP_HELLO && h->payload_len == 0 && h->hdr_len <= BE_HELLO_MAX_MSG;
	if (!ok)
		LOG_WARN(BE_LOG, "%s: op %u before a session: closed", t->peer, (unsigned)h->op);
	return ok;
}

static void ticket_frame(void *conn_ctx, transport_frame *f)
{
	ticket_conn *t = conn_ctx;
	proto_view v;
	uint32_t version = 0;
	const char *token = NULL, *want = NULL;
	size_t token_len = 0, want_len = 0;
	transport_cookie cookie = {{0}};

	t->answered = 1;
	if (proto_view_init(&v, &f->hdr, f->msg) != PROTO_OK) {
		LOG_WARN(BE_LOG, "%s: malformed hello: closed", t->peer);
		transport_frame_free(f);
		transport_shutdown(t->c);
		return;
	}
	int bad = proto_arg_u32(&v, 0, &version) || proto_arg_str(&v, 1, &token, &token_len);
	if (!bad && version != PROTO_VERSION) {
		LOG_WARN(BE_LOG, "%s: client speaks protocol version %u, we speak %d", t->peer, version, PROTO_VERSION);
		ticket_reply(t, f->hdr.seq, CUDA_ERROR_NOT_SUPPORTED, 0, NULL);
	} else if (bad || proto_arg_str(&v, 5, &want, &want_len) || want_len != 4 || memcmp(want, "rdma", 4) != 0) {
		/* A tls:// client (its hello asks for no rdma session). */
		LOG_WARN(BE_LOG, "%s: this listener only sets up rdma sessions: clients use REMOTE_GPU=rdma+tls://",
			 t->peer);
		ticket_reply(t, f->hdr.seq, CUDA_ERROR_NOT_SUPPORTED, 0, NULL);
	} else if (!be_hello_token_ok(token, token_len)) {
		LOG_WARN(BE_LOG, "%s: wrong token", t->peer);
		be_admit_auth_failed(t->peer);
		ticket_reply(t, f->hdr.seq, CUDA_ERROR_NOT_PERMITTED, 0, NULL);
	} else {
		/* Blocks the loop until the session process reports its port (a
		 * few ms; at most BE_SESSION_LISTEN_MS), as rdma's redirect does. */
		int port = be_isolate_redirect(NULL, t->peer, &cookie);
		if (port > 0)
			LOG_INFO(BE_LOG, "%s: rdma session on port %d", t->peer, port);
		ticket_reply(t, f->hdr.seq, port > 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM, port, &cookie);
		memset(&cookie, 0, sizeof(cookie));
	}
	proto_view_free(&v);
	transport_frame_free(f);
}

/* The answer; on success [port, cookie], on failure the status alone. The
 * connection stays open until the client closes it (or the deadline): closing
 * first could reset it before the client read the answer. */
static void ticket_reply(ticket_conn *t, uint64_t seq, int status, int port, const transport_cookie *cookie)
{
	proto_msg m;
	proto_msg_begin_reply(&m, seq, status, 0, status == CUDA_SUCCESS ? 2 : 0);
	if (status == CUDA_SUCCESS) {
		proto_msg_u64(&m, (uint64_t)port);
		proto_msg_bin(&m, cookie->b, sizeof(cookie->b));
	}
	int r = proto_msg_finish(&m, PROTO_F_REPLY, 0);
	if (r == PROTO_OK) {
		struct iovec iov = {.iov_base = m.data, .iov_len = m.len};
		r = transport_sendv(t->c, &iov, 1);
	}
	/* The cookie was in this buffer: leave no copy behind. */
	memset(m.data, 0, m.len);
	proto_msg_free(&m);
	if (r != 0) {
		LOG_WARN(BE_LOG, "%s: cannot answer the hello: %s", t->peer, transport_strerror(r));
		transport_shutdown(t->c);
	}
}

static void ticket_close(void *conn_ctx, int err)
{
	ticket_conn *t = conn_ctx;
	be_admit_release(t->peer);
	transport_close(t->c);
	uv_close((uv_handle_t *)&t->deadline, ticket_freed);
}

static void ticket_freed(uv_handle_t *h) { free(h->data); }
