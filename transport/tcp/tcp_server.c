/*
 * tcp server: a listener on the libuv loop of remote-gpud.
 *
 * Reading (loop thread). Each connection parses its byte stream with the
 * servers' frame assembler (frame_rx.h): fixed header -> msgpack part (into a
 * malloc'd buffer whose ownership passes to on_frame) -> payload (raw bytes,
 * into the buffer payload_dest chose). Where libuv reads into depends
 * on the state: in the payload with a destination, alloc_cb hands libuv the
 * remaining part of that destination, exactly as long as what is left of the
 * frame, so a 1 GiB copy is read by the kernel straight into (pinned) memory and
 * the next frame's bytes never land in it. Otherwise libuv reads into a 64 KiB
 * scratch buffer shared by the listener's connections (the loop runs one
 * read_cb at a time and read_cb consumes the scratch before returning), which
 * takes many small frames in one system call. After a frame whose payload
 * needed reads of its own, the next header is read through a window of
 * TCP_HDR_WINDOW bytes: copies to the device come back to back, and a full
 * scratch read would take up to 64 KiB of the next one's payload, to be
 * copied out again on the loop thread, which is what bounds their rate.
 *
 * A malformed header ends the connection: the stream cannot be resynchronised
 * and the peer is not one of ours (or is broken). A peer of another protocol
 * version first gets a reply frame [REPLY, 0, PROTO_EVERSION, PROTO_VERSION] so
 * that its user sees "version mismatch, server speaks N", not a reset.
 *
 * Writing (any thread). transport_sendv is blocking and thread-safe: send_lock
 * keeps frames whole; libuv made the socket non-blocking, so on EAGAIN the
 * writer waits in poll(). libuv never writes on these sockets itself.
 *
 * Closing. The uv handle, and with it the descriptor, may only be closed on the
 * loop thread, but the upper layer decides to drop a connection on its own
 * threads. So shutdown/close from another thread only record the request and
 * wake the loop through the listener's uv_async_t; the loop thread then tears
 * the connection down (teardown()): it shuts the socket down (which wakes a
 * writer blocked in poll), waits for send_lock so no writer still uses the
 * descriptor, calls on_close exactly once, and uv_close()s the handle. The
 * connection object is freed when both the handle is closed and the upper
 * layer has called transport_close, whichever comes last.
 *
 * tls (scheme "tls", tls.c). libuv cannot read through TLS, so a tls
 * connection is not a uv_tcp_t: its socket is watched by a uv_poll_t, and
 * when it is readable the loop thread drives the handshake, then reads
 * plaintext with SSL straight into the same destinations (scratch, or the
 * payload's own memory) and parses it exactly as plain bytes. The handshake
 * happens after on_accept (so the upper layer's deadlines cover it) and
 * before any frame is delivered. A peer whose first bytes are a remote-gpu
 * frame, not a TLS ClientHello, is answered in clear with PROTO_ETLS.
 * Listening on "tls" with on_accept_fd hands the raw socket over: the
 * process that serves it shakes hands (transport_adopt(..., "tls", ...)).
 *
 * Lock order: send_lock -> own.lock -> the listener's loopq lock. own.lock
 * and the loopq lock are only held for a few instructions, never across I/O.
 */
#include "tcp_int.h"
#include "frame_rx.h"
#include "loopq.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rg_list.h"
#include "rg_log.h"

#define SCRATCH_SIZE (64 * 1024)
#define KEEPALIVE_S 60 /* notice clients that vanished without a FIN/RST */

typedef struct tcp_listener tcp_listener;

typedef struct sconn {
	transport_conn base;
	uv_tcp_t handle; /* plain tcp */
	uv_poll_t poll;  /* tls: the socket, watched (tls owns it, not libuv) */
	int is_tls;
	tls_session *tls;
	int tls_peeked; /* the first bytes were looked at (a plain client?) */
	int tls_ready;  /* handshake done: frames may flow */
	tcp_listener *l; /* valid until the handle is closed */
	void *conn_ctx;  /* NULL: refused, no on_close */
	int fd;
	rg_list node;    /* in l->base.conns; loop thread only */
	rg_list req_node; /* in l->base.q while a teardown request is pending */

	tp_sconn own;         /* its owners, the close; own.lock guards fd_open too */
	int fd_open;          /* descriptor usable (for shutdown() from other threads) */
	atomic_int shut;      /* no more I/O; read without the lock on hot paths */

	pthread_mutex_t send_lock;
	int send_err; /* under send_lock: stream mid-frame after a failed write */

	/* receive state machine: loop thread only */
	frame_rx rx;
	int bulk; /* the last frame's payload ended in a read of its own: read the next header small */
} sconn;

struct tcp_listener {
	transport_listener base;
	uv_tcp_t tcp;
	int tls; /* serve connections through TLS */

	/* loop thread only */
	uint8_t scratch[SCRATCH_SIZE];
};

static void on_connection(uv_stream_t *server, int status);
static tcp_listener *listener_new(uv_loop_t *loop, const transport_server_cb *cb, void *ctx);
static void on_async(uv_async_t *a);
static void tls_poll_cb(uv_poll_t *p, int status, int events);
static void on_bytes(sconn *c, const uv_buf_t *buf, ssize_t nread);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void conn_close_cb(uv_handle_t *h);
static void teardown(sconn *c, int err);
static void request_teardown(sconn *c, int err);
static int server_sendv(transport_conn *c, const struct iovec *iov, int iovcnt);
static void server_shutdown(transport_conn *c);
static void server_close(transport_conn *c);
static int tcp_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out);
static int tls_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out);
static int adopt_as(uv_loop_t *loop, int fd, int tls, const transport_server_cb *cb, void *ctx,
		    transport_listener **out);
static int tcp_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out);
static int tls_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out);

/* tcp and tls connections differ only in what they read and write through. */
#define OPS(sch, cap)                                                                                                    \
	{                                                                                                              \
		.scheme = sch, .caps = cap, .sendv = server_sendv, .recv_frame = tp_server_recv_frame, .reg_mem = tp_reg_mem_none,          \
		.dereg_mem = tp_dereg_mem_none, .shutdown = server_shutdown, .close = server_close,                          \
	}
static const transport_ops tcp_server_ops = OPS("tcp", TRANSPORT_CAP_ADOPT);
static const transport_ops tls_server_ops = OPS("tls", TRANSPORT_CAP_ADOPT | TRANSPORT_CAP_ENCRYPTED);

/* ---- listen ---- */

/* Creates, binds and listens on a socket with plain system calls, trying each
 * address the host resolves to; libuv gets the socket only once this worked, so
 * a failure needs no uv handle to be closed asynchronously. */
static int bind_socket(const transport_addr *a, int *port_out)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char port[8];
	int fd = -1, err = 0, one = 1;

	snprintf(port, sizeof(port), "%d", a->port);
	int gai = getaddrinfo(a->host, port, &hints, &res);
	if (gai) {
		LOG_WARN("transport", "cannot resolve %s: %s", a->host, gai_strerror(gai));
		return TRANSPORT_EADDR;
	}
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		/* A restarted server must not wait for old connections' TIME_WAIT. */
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
			err = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		LOG_ERROR("transport", "cannot listen on %s:%d: %s", a->host, a->port, strerror(err));
		return TRANSPORT_EADDR;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	*port_out = a->port;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			*port_out = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			*port_out = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

static int listen_as(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx, int tls,
		     transport_listener **out)
{
	int port = 0, r;

	*out = NULL;
	if (tls && !transport_tls_server_ready()) {
		LOG_ERROR("transport", "cannot listen on tls://%s:%d: no server certificate", a->host, a->port);
		return TRANSPORT_ENOTSUP;
	}
	int fd = bind_socket(a, &port);
	if (fd < 0)
		return fd;
	tcp_listener *l = listener_new(loop, cb, ctx);
	if (!l) {
		close(fd);
		return TRANSPORT_ENOMEM;
	}
	l->base.port = port;
	l->tls = tls;
	if ((r = uv_tcp_open(&l->tcp, fd)) < 0 || (r = uv_listen((uv_stream_t *)&l->tcp, SOMAXCONN, on_connection)) < 0) {
		LOG_ERROR("transport", "cannot listen on %s:%d: %s", a->host, a->port, uv_strerror(r));
		if (uv_fileno((uv_handle_t *)&l->tcp, &(uv_os_fd_t){0}) != 0)
			close(fd); /* uv_tcp_open failed: the handle does not own fd */
		l->base.close_started = 1;
		uv_close((uv_handle_t *)&l->tcp, tp_listener_close_cb);
		uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
		return TRANSPORT_EIO;
	}
	LOG_INFO("transport", "listening on %s:%d%s", a->host, port, tls ? " (tls)" : "");
	*out = &l->base;
	return TRANSPORT_OK;
}

static int tcp_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out)
{
	return listen_as(loop, a, cb, ctx, 0, out);
}

static int tls_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out)
{
	return listen_as(loop, a, cb, ctx, 1, out);
}

const transport_provider tp_tcp_listen_provider = {
	.scheme = "tcp",
	.listen = tcp_listen,
	.listener_close = tp_listener_close,
	.adopt = tcp_adopt,
};

const transport_provider tp_tls_listen_provider = {
	.scheme = "tls",
	.listen = tls_listen,
	.listener_close = tp_listener_close,
	.adopt = tls_adopt,
};

static void end_conn(rg_list *node) { teardown(RG_CONTAINER_OF(node, sconn, node), TRANSPORT_ECLOSED); }

/* Loop thread: runs the teardowns other threads asked for, and the listener's
 * own close. */
static void on_async(uv_async_t *a)
{
	tcp_listener *l = a->data;

	for (rg_list *n; (n = tp_loopq_pop(&l->base.q));)
		teardown(RG_CONTAINER_OF(n, sconn, req_node), TRANSPORT_ECLOSED);

	if (!tp_listener_close_start(&l->base, end_conn))
		return;
	uv_close((uv_handle_t *)&l->tcp, tp_listener_close_cb);
	/* Every connection is torn down now, so no thread can ask this handle for
	 * anything more (request_teardown checks torn_down under the conn lock). */
	uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
}

/* ---- accept ---- */

/* The last owner let go (tp_sconn). */
static void conn_free(tp_sconn *o)
{
	sconn *c = (sconn *)((char *)o - offsetof(sconn, own));
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}

static sconn *conn_alloc(tcp_listener *l)
{
	sconn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->base.ops = &tcp_server_ops;
	c->l = l;
	c->fd = -1;
	tp_sconn_init(&c->own, conn_free);
	pthread_mutex_init(&c->send_lock, NULL);
	atomic_init(&c->shut, 0);
	rg_list_init(&c->node);
	rg_list_init(&c->req_node);
	return c;
}

static sconn *conn_new(tcp_listener *l)
{
	sconn *c = conn_alloc(l);
	if (!c)
		return NULL;
	uv_tcp_init(l->base.loop, &c->handle);
	c->handle.data = c;
	l->base.nhandles++;
	return c;
}

/* A tls connection on fd (ours from now on, closed with the handle); NULL
 * (fd closed) when that fails. */
static sconn *conn_new_tls(tcp_listener *l, int fd)
{
	sconn *c = conn_alloc(l);
	int r = c ? uv_poll_init_socket(l->base.loop, &c->poll, fd) : UV_ENOMEM;
	if (r < 0) {
		LOG_WARN("transport", "tls connection: %s", uv_strerror(r));
		if (c) {
			tp_sconn_fini(&c->own);
			pthread_mutex_destroy(&c->send_lock);
			free(c);
		}
		close(fd);
		return NULL;
	}
	c->base.ops = &tls_server_ops;
	c->is_tls = 1;
	c->fd = fd;
	c->poll.data = c;
	l->base.nhandles++;
	return c;
}

static uv_handle_t *conn_handle(sconn *c)
{
	return c->is_tls ? (uv_handle_t *)&c->poll : (uv_handle_t *)&c->handle;
}

/* Gives up a connection nobody else knows yet. */
static void conn_discard(sconn *c)
{
	c->own.released = 1;
	c->own.torn_down = 1;
	uv_close(conn_handle(c), conn_close_cb);
}

/* What uv_tcp_nodelay and uv_tcp_keepalive do, for a socket libuv does not own. */
static void tls_socket_options(int fd)
{
	int one = 1, idle = KEEPALIVE_S;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK); /* SSL calls must never block the loop */
}

/* The handle holds an open socket: hand it to the upper layer and start reading. */
static void conn_start(tcp_listener *l, sconn *c, uv_os_fd_t fd)
{
	int r;
	c->fd = fd;
	c->fd_open = 1;
	if (c->is_tls) {
		tls_socket_options(fd);
	} else {
		uv_tcp_nodelay(&c->handle, 1);
		uv_tcp_keepalive(&c->handle, 1, KEEPALIVE_S);
	}
	tp_tcp_peer_name(fd, c->base.peer, sizeof(c->base.peer));
	rg_list_add_tail(&l->base.conns, &c->node);

	LOG_DEBUG("transport", "accepted %s", c->base.peer);
	/* Once transport_listener_close has returned, on_accept is not called
	 * again (it may have been called from this thread, in a callback). */
	c->conn_ctx = tp_listener_admit(&l->base, &c->base);
	if (!c->conn_ctx) {
		LOG_INFO("transport", "%s: refused by the upper layer", c->base.peer);
		c->own.released = 1; /* the upper layer gave c up by refusing it */
		teardown(c, TRANSPORT_ECLOSED);
		return;
	}
	if (c->is_tls) {
		/* The handshake runs from tls_poll_cb, once the ClientHello is there. */
		if ((r = tp_tls_server_session(fd, &c->tls)) != TRANSPORT_OK) {
			teardown(c, r);
			return;
		}
		r = uv_poll_start(&c->poll, UV_READABLE, tls_poll_cb);
	} else {
		r = uv_read_start((uv_stream_t *)&c->handle, alloc_cb, read_cb);
	}
	if (r < 0) {
		LOG_WARN("transport", "%s: read: %s", c->base.peer, uv_strerror(r));
		teardown(c, TRANSPORT_EIO);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	tcp_listener *l = server->data;
	uv_os_fd_t fd;
	int r;

	if (status < 0) {
		LOG_WARN("transport", "accept: %s", uv_strerror(status));
		return;
	}
	sconn *c = conn_new(l);
	if (!c) {
		/* libuv holds the accepted socket until someone takes it; without
		 * memory for a connection we cannot, and it stops listening. */
		LOG_ERROR("transport", "accept: out of memory");
		return;
	}
	if ((r = uv_accept(server, (uv_stream_t *)&c->handle)) < 0 ||
	    (r = uv_fileno((uv_handle_t *)&c->handle, &fd)) < 0) {
		LOG_WARN("transport", "accept: %s", uv_strerror(r));
		conn_discard(c);
		return;
	}
	if (l->base.cb.on_accept_fd) {
		/* The upper layer serves the socket elsewhere (another process): give
		 * it a descriptor of its own. Closing ours does not shut the socket
		 * down, so the connection lives on in the copy. */
		char peer[sizeof(c->base.peer)];
		tp_tcp_peer_name(fd, peer, sizeof(peer));
		int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		conn_discard(c);
		if (own < 0)
			LOG_WARN("transport", "%s: dup: %s", peer, strerror(errno));
		else
			l->base.cb.on_accept_fd(l->base.ctx, own, peer);
		return;
	}
	if (l->tls) {
		/* Served here through TLS: the socket moves to a poll handle. */
		int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		conn_discard(c);
		if (own < 0) {
			LOG_WARN("transport", "accept: dup: %s", strerror(errno));
			return;
		}
		if ((c = conn_new_tls(l, own)))
			conn_start(l, c, own);
		return;
	}
	conn_start(l, c, fd);
}

static tcp_listener *listener_new(uv_loop_t *loop, const transport_server_cb *cb, void *ctx)
{
	tcp_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	tp_listener_init(&l->base, &tp_tcp_listen_provider, loop, cb, ctx);
	int r = tp_loopq_init(&l->base.q, loop, on_async, l);
	if (r < 0) {
		free(l);
		LOG_ERROR("transport", "uv_async_init: %s", uv_strerror(r));
		return NULL;
	}
	l->base.nhandles++;
	uv_tcp_init(loop, &l->tcp); /* cannot fail without flags */
	l->tcp.data = l;
	l->base.nhandles++;
	return l;
}

static int tcp_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out)
{
	return adopt_as(loop, fd, 0, cb, ctx, out);
}

static int tls_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out)
{
	return adopt_as(loop, fd, 1, cb, ctx, out);
}

static int adopt_as(uv_loop_t *loop, int fd, int tls, const transport_server_cb *cb, void *ctx,
		    transport_listener **out)
{
	*out = NULL;
	if (tls && !transport_tls_server_ready()) {
		LOG_ERROR("transport", "cannot serve descriptor %d through tls: no server certificate", fd);
		close(fd);
		return TRANSPORT_ENOTSUP;
	}
	tcp_listener *l = listener_new(loop, cb, ctx);
	if (!l)
		return TRANSPORT_ENOMEM;
	l->tls = tls;
	sconn *c = NULL;
	int r;
	if (tls)
		r = (c = conn_new_tls(l, fd)) ? 0 : UV_ENOMEM; /* fd closed on failure */
	else if ((r = (c = conn_new(l)) ? uv_tcp_open(&c->handle, fd) : UV_ENOMEM) < 0)
		close(fd);
	if (r < 0) {
		LOG_ERROR("transport", "cannot serve descriptor %d: %s", fd, uv_strerror(r));
		if (c)
			conn_discard(c);
		l->base.close_started = 1;
		uv_close((uv_handle_t *)&l->tcp, tp_listener_close_cb);
		uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
		return TRANSPORT_EIO;
	}
	*out = &l->base;
	conn_start(l, c, fd);
	return TRANSPORT_OK;
}

/* ---- teardown ---- */

/* Any thread: ask the loop thread to tear c down. */
static void request_teardown(sconn *c, int err)
{
	pthread_mutex_lock(&c->own.lock);
	if (!c->own.close_err)
		c->own.close_err = err;
	if (!c->own.torn_down) {
		/* torn_down == 0 under c->own.lock: the listener and its async handle
		 * are alive (they go only after every connection is torn down). */
		tcp_listener *l = c->l;
		tp_loopq_post(&l->base.q, &c->req_node);
	}
	pthread_mutex_unlock(&c->own.lock);
}

/* Loop thread, once per connection (later calls return at once). err is used
 * unless an earlier reason was recorded (a failed write, say). */
static void teardown(sconn *c, int err)
{
	tcp_listener *l = c->l;

	pthread_mutex_lock(&c->own.lock);
	if (c->own.torn_down) {
		pthread_mutex_unlock(&c->own.lock);
		return;
	}
	c->own.torn_down = 1;
	if (!c->own.close_err)
		c->own.close_err = err;
	err = c->own.close_err;
	atomic_store(&c->shut, 1);
	/* Wakes a writer blocked in poll(): a shut down socket polls writable and
	 * its sendmsg fails with EPIPE. Data already queued still goes out,
	 * followed by a FIN. */
	if (c->fd_open)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->own.lock);

	tp_loopq_cancel(&l->base.q, &c->req_node);

	if (c->is_tls)
		uv_poll_stop(&c->poll);
	else
		uv_read_stop((uv_stream_t *)&c->handle);
	/* Once we hold send_lock no writer is inside sendmsg/poll on fd, and
	 * later ones see shut; only then may uv_close close the descriptor. */
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->own.lock);
	c->fd_open = 0;
	pthread_mutex_unlock(&c->own.lock);
	pthread_mutex_unlock(&c->send_lock);

	tp_frame_rx_drop(&c->rx); /* a frame cut short */
	if (c->conn_ctx) {
		LOG_DEBUG("transport", "%s: closed: %s", c->base.peer, transport_strerror(err));
		if (l->base.cb.on_close)
			l->base.cb.on_close(c->conn_ctx, err);
	}
	uv_close(conn_handle(c), conn_close_cb);
}

static void conn_close_cb(uv_handle_t *h)
{
	sconn *c = h->data;
	tcp_listener *l = c->l;

	if (c->is_tls) {
		/* A poll handle does not own its socket; no writer is left (shut
		 * was set before teardown took send_lock). */
		tp_tls_session_free(c->tls);
		c->tls = NULL;
		close(c->fd);
	}

	rg_list_del(&c->node);
	c->l = NULL;
	tp_sconn_closed(&c->own, &l->base);
}

/* ---- receive ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	sconn *c = h->data;

	uint8_t *dst;
	size_t want = tp_frame_rx_want(&c->rx, &dst);
	if (c->rx.state == FRAME_RX_PAYLOAD && dst) {
		/* Straight into the destination, capped at the end of this frame. */
		buf->base = (char *)dst;
		buf->len = want;
	} else {
		/* After a payload too large for one scratch read the next frame is
		 * likely another such (copies to the device come back to back):
		 * a small window takes its header and msgpack part, and the
		 * payload then lands in place, where a full scratch read would
		 * have taken up to 64 KiB of it, to be copied out again. Small
		 * frames bring the full window back (parse). */
		buf->base = (char *)c->l->scratch;
		buf->len = c->bulk ? TCP_HDR_WINDOW : SCRATCH_SIZE;
	}
}

/* Sends proto_msg_version_reply if it can go out at once: the loop thread must
 * not block, and a peer that does not read gets nothing. */
static void send_version_reply(sconn *c)
{
	proto_msg m;

	if (proto_msg_version_reply(&m) == PROTO_OK && pthread_mutex_trylock(&c->send_lock) == 0) {
		struct iovec iov = {m.data, m.len};
		if (!atomic_load(&c->shut) && !c->send_err) {
			if (c->tls ? tp_tls_session_write_all(c->tls, &iov, 1, &c->shut, NULL) != TRANSPORT_OK
				   : send(c->fd, m.data, m.len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)m.len)
				c->send_err = TRANSPORT_EIO;
		}
		pthread_mutex_unlock(&c->send_lock);
	}
	proto_msg_free(&m);
}

/* The upper layer may have shut the connection down from a callback (or from
 * another thread): stop delivering and tear down now. */
static int stopped(sconn *c)
{
	if (!atomic_load(&c->shut))
		return 0;
	teardown(c, TRANSPORT_ECLOSED);
	return 1;
}

/* A frame ended the connection (err from tp_frame_rx_took): a peer of another
 * protocol version is told which one we speak first. */
static void rx_failed(sconn *c, int err)
{
	if (err == PROTO_EVERSION)
		send_version_reply(c);
	teardown(c, err);
}

/* Consumes n bytes of scratch. */
static void parse(sconn *c, const uint8_t *p, size_t n)
{
	while (n > 0) {
		uint8_t *dst;
		size_t k = tp_frame_rx_want(&c->rx, &dst);
		if (k > n)
			k = n;
		if (dst)
			memcpy(dst, p, k);
		c->rx.frame.followed = k < n; /* for on_frame, should this end the frame */
		int r = tp_frame_rx_took(&c->rx, k, &c->l->base.cb, c->conn_ctx, c->base.peer);
		if (r < 0) {
			rx_failed(c, r);
			return;
		}
		if (frame_rx_at_boundary(&c->rx))
			c->bulk = 0; /* a frame ended inside scratch */
		if (r > 0 && stopped(c))
			return;
		p += k;
		n -= k;
	}
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) { on_bytes(s->data, buf, nread); }

/* nread bytes arrived in buf (from alloc_cb), or the stream ended (< 0). */
static void on_bytes(sconn *c, const uv_buf_t *buf, ssize_t nread)
{
	if (nread < 0) {
		int at_boundary = frame_rx_at_boundary(&c->rx);
		if (nread != UV_EOF)
			LOG_INFO("transport", "%s: read: %s", c->base.peer, uv_strerror((int)nread));
		else if (!at_boundary)
			LOG_INFO("transport", "%s: closed in the middle of a frame", c->base.peer);
		teardown(c, nread == UV_EOF && at_boundary ? TRANSPORT_ECLOSED : TRANSPORT_EIO);
		return;
	}
	if (nread == 0)
		return; /* EAGAIN */
	if (buf->base != (char *)c->l->scratch) {
		/* alloc_cb pointed libuv into the payload destination. */
		int r = tp_frame_rx_took(&c->rx, (size_t)nread, &c->l->base.cb, c->conn_ctx, c->base.peer);
		if (frame_rx_at_boundary(&c->rx))
			c->bulk = 1;
		if (r > 0)
			stopped(c);
		return;
	}
	parse(c, (const uint8_t *)buf->base, (size_t)nread);
}

/* ---- tls ---- */

/* Before the handshake: a remote-gpu frame where a ClientHello should be is a
 * plain tcp:// client. Tell it so in clear rather than leaving it to guess
 * from a reset. Returns 1 when that is what came (the connection then ends). */
static int tls_refuse_plain(sconn *c)
{
	uint8_t b[PROTO_HDR_SIZE];
	proto_hdr h = {0};
	ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0)
		return 0; /* nothing yet (or the end): the handshake will say */
	c->tls_peeked = 1;
	if (b[0] == 0x16 || !proto_magic_prefix_ok(b, (size_t)n))
		return 0; /* a TLS record, or garbage the handshake rejects */
	LOG_WARN("transport", "%s: a plain tcp:// client on a TLS port (it must connect with tls://)", c->base.peer);
	/* The reply goes to its first call (the hello), which it waits for. */
	if (n == (ssize_t)sizeof(b) && proto_decode_hdr(b, &h) != PROTO_OK)
		h.seq = 0;
	/* Take in what it sent (its hello): closing a socket with unread bytes
	 * resets the connection, and the reset could overtake our answer. */
	while (recv(c->fd, c->l->scratch, SCRATCH_SIZE, MSG_DONTWAIT) > 0)
		;
	proto_msg m;
	if (proto_msg_tls_reply(&m, h.seq) == PROTO_OK)
		if (send(c->fd, m.data, m.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			LOG_DEBUG("transport", "%s: %s", c->base.peer, strerror(errno));
	proto_msg_free(&m);
	teardown(c, PROTO_ETLS);
	return 1;
}

/* Loop thread: the tls socket is ready. Drives the handshake, then reads
 * plaintext into where alloc_cb says, as read_cb does for plain sockets. */
static void tls_poll_cb(uv_poll_t *p, int status, int events)
{
	sconn *c = p->data;
	int r;

	if (stopped(c))
		return;
	if (status < 0) {
		LOG_INFO("transport", "%s: poll: %s", c->base.peer, uv_strerror(status));
		teardown(c, TRANSPORT_EIO);
		return;
	}
	if (!c->tls_ready) {
		if (!c->tls_peeked && tls_refuse_plain(c))
			return;
		r = tp_tls_session_handshake(c->tls, c->base.peer);
		if (r == TLS_WANT_READ || r == TLS_WANT_WRITE) {
			uv_poll_start(p, r == TLS_WANT_READ ? UV_READABLE : UV_WRITABLE, tls_poll_cb);
			return;
		}
		if (r != TRANSPORT_OK) {
			/* OpenSSL queued an alert saying why (unknown CA, no
			 * certificate); TLS 1.3 clients learn it only when they read,
			 * after they sent their hello. Closing with that hello unread
			 * would reset the connection and could drop the alert. */
			while (recv(c->fd, c->l->scratch, SCRATCH_SIZE, MSG_DONTWAIT) > 0)
				;
			teardown(c, TRANSPORT_EIO);
			return;
		}
		c->tls_ready = 1;
		events = UV_WRITABLE; /* back to reading, below */
	}
	if (events & UV_WRITABLE)
		uv_poll_start(p, UV_READABLE, tls_poll_cb);
	/* Until the socket is drained; after a while yield the loop to other
	 * connections (the poll is level-triggered: it comes back) unless SSL
	 * holds bytes already read from the socket, which no poll would see. */
	for (int i = 0;; i++) {
		uv_buf_t buf;
		size_t got;
		alloc_cb((uv_handle_t *)p, 0, &buf);
		r = tp_tls_session_read(c->tls, buf.base, buf.len, &got);
		if (r == TLS_WANT_READ)
			return;
		if (r == TLS_WANT_WRITE) {
			uv_poll_start(p, UV_READABLE | UV_WRITABLE, tls_poll_cb);
			return;
		}
		on_bytes(c, &buf, r == TRANSPORT_OK ? (ssize_t)got : r == TRANSPORT_ECLOSED ? UV_EOF : UV_EIO);
		if (r != TRANSPORT_OK || c->own.torn_down)
			return;
		if (i >= 64 && !tp_tls_session_pending(c->tls))
			return;
	}
}

/* ---- connection ops ---- */

static int server_sendv(transport_conn *base, const struct iovec *iov, int iovcnt)
{
	sconn *c = (sconn *)base;
	int err;

	pthread_mutex_lock(&c->send_lock);
	/* !shut while holding send_lock implies the descriptor is open: teardown
	 * sets shut before it takes send_lock to retire the descriptor. */
	if (atomic_load(&c->shut))
		err = TRANSPORT_ECLOSED;
	else if (c->send_err)
		err = c->send_err;
	else if ((err = c->tls ? tp_tls_session_write_all(c->tls, iov, iovcnt, &c->shut, NULL)
			       : tp_tcp_write_all(c->fd, iov, iovcnt, &c->shut)) != TRANSPORT_OK &&
		 !atomic_load(&c->shut)) {
		/* The peer is gone or the stream is mid-frame: end it. */
		c->send_err = err;
		request_teardown(c, err);
	}
	pthread_mutex_unlock(&c->send_lock);
	return err;
}

static void server_shutdown(transport_conn *base)
{
	sconn *c = (sconn *)base;

	pthread_mutex_lock(&c->own.lock);
	if (!atomic_exchange(&c->shut, 1) && c->fd_open)
		shutdown(c->fd, SHUT_RDWR); /* wakes writers now, not when the loop gets to it */
	pthread_mutex_unlock(&c->own.lock);
	request_teardown(c, TRANSPORT_ECLOSED);
}

static void server_close(transport_conn *base)
{
	server_shutdown(base);
	tp_sconn_release(&((sconn *)base)->own);
}
