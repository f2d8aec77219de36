/*
 * One stripe connection (stripe.h): a thread of its own, blocking I/O on the
 * socket through transport_wrap_fd, so that several stripes receive and send
 * at once on several cores (the loop thread moves one core's worth).
 *
 * Before the secret nothing is read but one peeked header, within
 * BE_STRIPE_OPEN_MS: it must be a small stripe_hello without payload, else
 * the socket is closed unread. A wrong, spent or expired secret is answered
 * CUDA_ERROR_NOT_PERMITTED and the connection closed; nothing of any session
 * was touched. After it: stripe_put's payload is received straight into the
 * transfer's staging buffer at its offset, stripe_get's answer is sent
 * straight from it; anything else ends the connection (and breaks the
 * session's stripes).
 */
#include "stripe.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "driver.h"

typedef struct sconn {
	int fd;
	char peer[64];
	transport_conn *c;
	be_session *s;
	/* the stripe_put being received: its transfer and bytes */
	uint64_t id, len;
	int inflight;
} sconn;

static atomic_int npending;

static void *conn_main(void *arg);

void be_stripe_conn_start(int fd, const char *peer)
{
	if (atomic_fetch_add(&npending, 1) >= BE_STRIPE_MAX_PENDING) {
		atomic_fetch_sub(&npending, 1);
		LOG_WARN(BE_LOG, "stripe connection from %s: %d wait for their secret already: refused", peer,
			 BE_STRIPE_MAX_PENDING);
		close(fd);
		return;
	}
	sconn *k = calloc(1, sizeof(*k));
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (k) {
		k->fd = fd;
		snprintf(k->peer, sizeof(k->peer), "%s", peer);
	}
	if (!k || pthread_create(&t, &at, conn_main, k) != 0) {
		free(k);
		close(fd);
		atomic_fetch_sub(&npending, 1);
	}
	pthread_attr_destroy(&at);
}

static void set_rcvtimeo(int fd, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* The first header, peeked (nothing consumed, nothing allocated): a small
 * stripe_hello? */
static int hello_ahead(int fd)
{
	uint8_t b[PROTO_HDR_SIZE];
	proto_hdr h;
	int fl = fcntl(fd, F_GETFL); /* accepted by libuv: non-blocking */
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return 0;
	set_rcvtimeo(fd, BE_STRIPE_OPEN_MS);
	if (recv(fd, b, sizeof(b), MSG_PEEK | MSG_WAITALL) != (ssize_t)sizeof(b))
		return 0;
	return proto_decode_hdr(b, &h) == PROTO_OK && h.op == PROTO_OP_STRIPE_HELLO && h.payload_len == 0 &&
	       h.hdr_len > 0 && h.hdr_len <= 64;
}

static void *no_payload(void *ctx, const transport_frame *f) { return NULL; }

static int answer(transport_conn *c, uint64_t seq, int status, const void *p, uint64_t len)
{
	proto_msg m;
	proto_msg_begin_reply(&m, seq, status, 0, 0);
	int r = proto_msg_finish(&m, PROTO_F_REPLY, len);
	if (r == PROTO_OK) {
		struct iovec iov[2] = {{m.data, m.len}, {(void *)p, (size_t)len}};
		r = transport_sendv(c, iov, len ? 2 : 1);
	}
	proto_msg_free(&m);
	return r;
}

/* Reads the secret; the session it admits c to, or NULL. */
static be_session *open_stripe(sconn *k)
{
	transport_frame f = {0};
	proto_view v = {0};
	const void *t;
	size_t n;
	be_session *s = NULL;

	if (transport_recv_frame(k->c, &f, no_payload, NULL) != TRANSPORT_OK)
		return NULL;
	if (proto_view_init(&v, &f.hdr, f.msg) == PROTO_OK && proto_arg_bin(&v, 0, &t, &n) == 0 &&
	    n == BE_STRIPE_SECRET_LEN)
		s = be_stripe_secret_take(t, k->c);
	proto_view_free(&v);
	if (answer(k->c, f.hdr.seq, s ? 0 : CUDA_ERROR_NOT_PERMITTED, NULL, 0) != TRANSPORT_OK && s) {
		be_stripes_leave(s, k->c, TRANSPORT_EIO);
		s = NULL;
	}
	transport_frame_free(&f);
	return s;
}

static void *put_dest(void *ctx, const transport_frame *f)
{
	sconn *k = ctx;
	proto_view v = {0};
	uint64_t id, total, off;
	void *p = NULL;

	if (f->hdr.op == PROTO_OP_STRIPE_PUT && proto_view_init(&v, &f->hdr, f->msg) == PROTO_OK &&
	    proto_arg_u64(&v, 0, &id) == 0 && proto_arg_u64(&v, 1, &total) == 0 && proto_arg_u64(&v, 2, &off) == 0)
		p = be_stripes_put_dest(k->s, id, total, off, f->hdr.payload_len);
	proto_view_free(&v);
	if (p) {
		k->id = id;
		k->len = f->hdr.payload_len;
		k->inflight = 1;
	}
	return p;
}

/* One stripe_get: waits for the bytes, sends them. */
static int serve_get(sconn *k, const transport_frame *f)
{
	proto_view v = {0};
	uint64_t id, off, len;
	const void *p = NULL;
	int bad = proto_view_init(&v, &f->hdr, f->msg) != PROTO_OK || proto_arg_u64(&v, 0, &id) ||
		  proto_arg_u64(&v, 1, &off) || proto_arg_u64(&v, 2, &len);
	proto_view_free(&v);
	if (bad)
		return TRANSPORT_EIO;
	int st = be_stripes_get_wait(k->s, id, off, len, &p);
	if (st)
		LOG_DEBUG(BE_LOG, "stripe connection from %s: bytes [%" PRIu64 ", +%" PRIu64 ") of transfer %" PRIu64
			  ": %s", k->peer, off, len, id, be_errname(st));
	int r = answer(k->c, f->hdr.seq, st, p, st ? 0 : len);
	if (st == 0)
		be_stripes_done(k->s, id, 1, len, r == TRANSPORT_OK);
	return r == TRANSPORT_OK && st == 0 ? TRANSPORT_OK : TRANSPORT_EIO;
}

/* Serves the stripe until it ends: how (a TRANSPORT_E* code). */
static int serve(sconn *k)
{
	for (;;) {
		transport_frame f = {0};
		int r = transport_recv_frame(k->c, &f, put_dest, k);
		if (k->inflight) {
			k->inflight = 0;
			be_stripes_done(k->s, k->id, 0, k->len, r == TRANSPORT_OK && f.payload);
		}
		if (r == TRANSPORT_OK && f.hdr.op == PROTO_OP_STRIPE_PUT && f.payload)
			r = TRANSPORT_OK;
		else if (r == TRANSPORT_OK && f.hdr.op == PROTO_OP_STRIPE_GET && f.hdr.payload_len == 0)
			r = serve_get(k, &f);
		else if (r == TRANSPORT_OK) {
			LOG_DEBUG(BE_LOG, "stripe connection from %s: op %u refused", k->peer, f.hdr.op);
			r = TRANSPORT_EIO; /* not a stripe's frame, or a put refused */
		}
		transport_frame_free(&f);
		if (r != TRANSPORT_OK) {
			LOG_DEBUG(BE_LOG, "stripe connection from %s: %s", k->peer, transport_strerror(r));
			return r;
		}
	}
}

static void *conn_main(void *arg)
{
	sconn *k = arg;
	int fd = k->fd;

	be_driver_thread_relaxed(); /* its copies' events (stripe_xfer.c) */

	if (!hello_ahead(fd) || transport_wrap_fd("tcp", fd, &k->c) != TRANSPORT_OK) {
		LOG_WARN(BE_LOG, "stripe connection from %s: no stripe_hello in time: closed", k->peer);
		close(fd);
		atomic_fetch_sub(&npending, 1);
		free(k);
		return NULL;
	}
	k->s = open_stripe(k);
	atomic_fetch_sub(&npending, 1);
	if (!k->s) {
		LOG_WARN(BE_LOG, "stripe connection from %s: unknown, spent or expired secret: closed", k->peer);
		transport_close(k->c);
		free(k);
		return NULL;
	}
	set_rcvtimeo(fd, 0);
	be_stripes_leave(k->s, k->c, serve(k)); /* last touch of the session */
	transport_close(k->c);
	free(k);
	return NULL;
}
