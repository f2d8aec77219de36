/*
 * tcp client: plain blocking sockets, used from the caller's own threads
 * (libremote.so). Blocking calls from the calling thread give the lowest latency:
 * no hand-off to an I/O thread, one system call to send a frame and usually one
 * to receive a reply.
 *
 * Sending (any thread): transport_sendv takes send_lock and writes the whole
 * frame with tp_tcp_write_all, so frames from different threads never interleave.
 * A failure after part of a frame went out leaves the byte stream mid-frame, so
 * the error is latched and every later send fails with it.
 *
 * Receiving (one thread at a time): bytes come through a small receive buffer so
 * that a reply (header, msgpack and a small payload) costs one recv(); a large
 * payload is then read straight into the buffer that payload_dest chose, never
 * past the end of its frame. Protocol errors are latched too: after a bad header
 * the stream cannot be resynchronised.
 *
 * tls:// is the same over TLS (tls.c): the handshake right after connect(),
 * then sends through tp_tls_session_write_all and receives through sock_recv,
 * which reads plaintext with the semantics of recv().
 *
 * Progress (transport_progress): each recv system call that got bytes counts
 * one, and so does each send call of a frame after its first (the first lands
 * in our own buffer and proves nothing); a large frame moves at most
 * about TCP_PROGRESS_STEP per call in either direction. So a server that takes a
 * 1 GiB copy slowly still shows life, while one that stopped reading (SIGSTOP:
 * its kernel still ACKs until the buffers are full) soon shows none.
 *
 * Shutdown (any thread) sets a flag and shuts the socket down, which wakes a
 * thread blocked in recv() (it sees end of stream) or in send() (EPIPE); both
 * then report TRANSPORT_ECLOSED. The descriptor stays open until close(), so a
 * racing call never touches a recycled descriptor. close() requires that no
 * other thread is inside a call on the connection (shut down, join, then close).
 */
#include "rg_clock.h"
#include "stream_client.h"
#include "tcp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rg_log.h"

/* Receive buffer: holds a typical reply whole. Payload remainders of at least
 * DIRECT_MIN bytes bypass it and land in their destination directly. After a
 * frame whose payload did, the next read into the buffer takes at most
 * TCP_HDR_WINDOW bytes: the next reply is likely another such (a synchronous copy
 * to the host in a loop), and a full read would take 16 KiB of its payload,
 * to be copied out again. */
#define RXBUF (16 * 1024)
#define DIRECT_MIN (RXBUF / 2)

typedef struct tcp_client {
	tp_stream_client s; /* shut, progress (system calls that moved bytes), receive state */
	int fd;
	tls_session *tls; /* tls://: NULL for plain tcp */

	pthread_mutex_t send_lock;
	int send_err; /* under send_lock: latched failure, stream mid-frame */

	/* receiving side: only the one receiving thread touches these */
	size_t rx_off, rx_len;
	int direct;    /* the frame being read had payload bytes read in place */
	int rx_small;  /* the last frame's had: read at most TCP_HDR_WINDOW into rx */
	uint64_t last_rx_ns; /* when bytes last arrived: spin for the next only while active */
	uint8_t rx[RXBUF];
} tcp_client;

static int client_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
static int client_connect_tls(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
static int connect_as(const transport_addr *a, int tls, unsigned timeout_ms, transport_conn **out);
static int connect_any(const struct addrinfo *res, uint64_t end, int *err_out, int *tried);
static int connect_wait(int fd, uint64_t end);
static unsigned handshake_ms(uint64_t end);
static ssize_t sock_recv(tcp_client *c, void *buf, size_t n, int flags);
static int client_sendv(transport_conn *c, const struct iovec *iov, int iovcnt);
static int client_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx);
static void client_shutdown(transport_conn *c);
static void client_close(transport_conn *c);
static int rx_read(tcp_client *c, void *dst, size_t n);
static ssize_t rx_poll(tcp_client *c);
static int connect_one(const struct addrinfo *ai, uint64_t end, int *err_out);
static int conn_new(int fd, tls_session *ts, transport_conn **out);
static int client_wrap_fd(int fd, transport_conn **out);

/* tcp and tls connections differ only in what they read and write through. */
#define OPS(sch, cap)                                                                                                    \
	{                                                                                                              \
		.scheme = sch, .caps = cap, .sendv = client_sendv, .recv_frame = client_recv_frame, .reg_mem = tp_reg_mem_none,          \
		.dereg_mem = tp_dereg_mem_none, .shutdown = client_shutdown, .close = client_close, .progress = tp_stream_client_progress,   \
	}
static const transport_ops tcp_client_ops = OPS("tcp", TRANSPORT_CAP_ADOPT);
static const transport_ops tls_client_ops = OPS("tls", TRANSPORT_CAP_ADOPT | TRANSPORT_CAP_ENCRYPTED);

/* The client half only: listening lives in tcp_server.c (server library), so that
 * libremote.so links no libuv. */
const transport_provider tp_tcp_provider = {
	.scheme = "tcp",
	.connect = client_connect,
	.wrap_fd = client_wrap_fd,
};

const transport_provider tp_tls_provider = {
	.scheme = "tls",
	.connect = client_connect_tls,
};

/* ---- connect ---- */

/* Waits until the non-blocking connect() on fd finished or end passed: 0, or
 * an errno (ETIMEDOUT when end passed). */
static int connect_wait(int fd, uint64_t end)
{
	struct pollfd pfd = {.fd = fd, .events = POLLOUT};
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	for (;;) {
		int ms = tp_deadline_left_ms(end);
		if (ms == 0)
			return ETIMEDOUT;
		int n = poll(&pfd, 1, ms);
		if (n > 0)
			break;
		if (n < 0 && errno != EINTR)
			return errno;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return errno;
	return soerr;
}

/* Returns a connected, blocking socket or -1 with *err_out = errno. The
 * connect() is non-blocking so that it can give up at end (0: wait as long as
 * the kernel does): a host that drops SYNs would otherwise hold the caller for
 * the kernel's SYN retries, about two minutes, before any watchdog starts. */
static int connect_one(const struct addrinfo *ai, uint64_t end, int *err_out)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
	if (fd < 0) {
		*err_out = errno;
		return -1;
	}
	int err = 0;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		err = errno == EINPROGRESS || errno == EINTR ? connect_wait(fd, end) : errno;
	int fl = err ? 0 : fcntl(fd, F_GETFL);
	if (!err && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
		err = errno;
	if (err) {
		*err_out = err;
		close(fd);
		return -1;
	}
	return fd;
}

static int client_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	return connect_as(a, 0, timeout_ms, out);
}

static int client_connect_tls(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	return connect_as(a, 1, timeout_ms, out);
}

/* Tries each address in turn, the next one as soon as one fails. Under a
 * deadline each gets an equal share of the time left (the last one all of
 * it), so one address that drops SYNs (an IPv6 address with no route to the
 * server, say) cannot use up the time of those after it. Returns the socket,
 * or -1 with *err_out (ETIMEDOUT when every try ran out of time) and *tried. */
static int connect_any(const struct addrinfo *res, uint64_t end, int *err_out, int *tried)
{
	int n = 0, fd = -1, timed_out = 0;
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
		n++;
	*tried = 0;
	for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next, n--) {
		uint64_t now = rg_clock_ns(), mine = end;
		if (end && now >= end) { /* slow name resolution can use it all */
			timed_out = 1;
			break;
		}
		if (end)
			mine = now + (end - now) / (uint64_t)n;
		fd = connect_one(ai, mine, err_out);
		(*tried)++;
		if (fd < 0) {
			char h[INET6_ADDRSTRLEN] = "?";
			getnameinfo(ai->ai_addr, ai->ai_addrlen, h, sizeof(h), NULL, 0, NI_NUMERICHOST);
			LOG_DEBUG("transport", "connect to %s: %s", h, strerror(*err_out));
			timed_out |= *err_out == ETIMEDOUT;
		}
	}
	/* A refusal from one address and silence from another: say the silence,
	 * which is what took the time. */
	if (fd < 0 && timed_out)
		*err_out = ETIMEDOUT;
	return fd;
}

/* Without a deadline a server that accepts but never answers the handshake
 * still fails it after this (connect() returned, so nothing else would end
 * SSL_connect). */
#define TLS_HANDSHAKE_MS 10000

/* The handshake's time: what the deadline left, at least 1 ms (the handshake
 * fails at once then, with the same message). */
static unsigned handshake_ms(uint64_t end)
{
	int ms = tp_deadline_left_ms(end);
	return ms < 0 ? TLS_HANDSHAKE_MS : ms == 0 ? 1 : (unsigned)ms;
}

static int connect_as(const transport_addr *a, int tls, unsigned timeout_ms, transport_conn **out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char port[8];
	int fd = -1, err = 0, one = 1, tried = 0;
	uint64_t end = tp_deadline(timeout_ms);

	*out = NULL;
	snprintf(port, sizeof(port), "%d", a->port);
	int gai = getaddrinfo(a->host, port, &hints, &res);
	if (gai) {
		LOG_WARN("transport", "cannot resolve %s: %s", a->host, gai_strerror(gai));
		return TRANSPORT_EADDR;
	}
	fd = connect_any(res, end, &err, &tried);
	freeaddrinfo(res);
	if (fd < 0 && err == ETIMEDOUT && timeout_ms) {
		LOG_WARN("transport", "cannot connect to %s:%d: no answer within %.3g s (%d address%s tried)", a->host,
			 a->port, timeout_ms / 1000.0, tried, tried == 1 ? "" : "es");
		return TRANSPORT_ETIMEDOUT;
	}
	if (fd < 0) {
		LOG_WARN("transport", "cannot connect to %s:%d: %s", a->host, a->port, strerror(err));
		return err == ETIMEDOUT ? TRANSPORT_ETIMEDOUT : TRANSPORT_ECONNECT;
	}
	/* Calls are small and latency-bound; each frame is already one write. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		LOG_WARN("transport", "TCP_NODELAY: %s", strerror(errno));
	tp_tcp_set_bufs(fd);

	/* The handshake before anything else: the hello (and its token) is the
	 * first thing sent, and must go out encrypted. */
	tls_session *ts = NULL;
	if (tls && (err = tp_tls_client_handshake(fd, a->host, handshake_ms(end), &ts)) != TRANSPORT_OK) {
		close(fd);
		return err;
	}
	if ((err = conn_new(fd, ts, out)) != TRANSPORT_OK) {
		tp_tls_session_free(ts);
		close(fd);
		return err;
	}
	LOG_DEBUG("transport", "connected to %s", (*out)->peer);
	return TRANSPORT_OK;
}

/* A connection over the connected blocking socket fd (and ts, for tls). */
static int conn_new(int fd, tls_session *ts, transport_conn **out)
{
	tcp_client *c = calloc(1, sizeof(*c));
	if (!c)
		return TRANSPORT_ENOMEM;
	tp_stream_client_init(&c->s, ts ? &tls_client_ops : &tcp_client_ops);
	c->fd = fd;
	c->tls = ts;
	pthread_mutex_init(&c->send_lock, NULL);
	tp_tcp_peer_name(fd, c->s.base.peer, sizeof(c->s.base.peer));
	*out = &c->s.base;
	return TRANSPORT_OK;
}

/* transport_wrap_fd: an accepted socket served like a client's connection
 * (blocking, the caller's threads). Plain tcp only: a tls socket would need
 * its server handshake here (tls.c drives it non-blocking on the loop). */
static int client_wrap_fd(int fd, transport_conn **out)
{
	int one = 1, fl = fcntl(fd, F_GETFL);
	*out = NULL;
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return TRANSPORT_EIO;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	tp_tcp_set_bufs(fd);
	return conn_new(fd, NULL, out);
}

/* ---- send ---- */

static int client_sendv(transport_conn *base, const struct iovec *iov, int iovcnt)
{
	tcp_client *c = (tcp_client *)base;
	int err;

	pthread_mutex_lock(&c->send_lock);
	if (atomic_load(&c->s.shut))
		err = TRANSPORT_ECLOSED;
	else if (c->send_err)
		err = c->send_err;
	else if ((err = c->tls ? tp_tls_session_write_all(c->tls, iov, iovcnt, &c->s.shut, &c->s.progress)
			       : tp_tcp_write_all_counted(c->fd, iov, iovcnt, &c->s.shut, &c->s.progress)) != TRANSPORT_OK)
		c->send_err = err;
	pthread_mutex_unlock(&c->send_lock);
	return err;
}

/* ---- receive ---- */

/* End of stream or a read error, as a transport error. */
static int rx_error(tcp_client *c, ssize_t r)
{
	if (atomic_load(&c->s.shut))
		return TRANSPORT_ECLOSED;
	if (r == 0)
		return c->s.frame_started ? TRANSPORT_EIO : TRANSPORT_ECLOSED;
	return TRANSPORT_EIO;
}

/* Reads exactly n bytes into dst (NULL: discard them). */
static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* recv() on the socket, or its equivalent through TLS: > 0 bytes, 0 at end
 * of stream, -1 with errno. Through TLS a read may return fewer bytes than
 * MSG_WAITALL asks (the callers loop), and the socket is non-blocking, so
 * waiting is a poll() outside the TLS lock: a sender may go on meanwhile. */
static ssize_t sock_recv(tcp_client *c, void *buf, size_t n, int flags)
{
	if (!c->tls)
		return recv(c->fd, buf, n, flags);
	for (;;) {
		size_t got;
		int r = tp_tls_session_read(c->tls, buf, n, &got);
		if (r == TRANSPORT_OK)
			return (ssize_t)got;
		if (r == TRANSPORT_ECLOSED)
			return 0;
		if (r != TLS_WANT_READ && r != TLS_WANT_WRITE) {
			errno = EIO;
			return -1;
		}
		if (flags & MSG_DONTWAIT) {
			errno = EAGAIN;
			return -1;
		}
		if (atomic_load(&c->s.shut))
			return 0;
		/* shutdown() from another thread makes the socket readable (EOF). */
		struct pollfd pfd = {.fd = c->fd, .events = r == TLS_WANT_READ ? POLLIN : POLLOUT};
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

/* Reads what is there into the receive buffer. While replies are flowing (one
 * came within RX_ACTIVE_NS), look for the next one without sleeping for up to
 * RX_SPIN_NS: waking a thread blocked in recv() costs a few microseconds, a
 * sizeable part of a round trip on loopback. Idle connections block at once. */
#define RX_ACTIVE_NS 2000000
#define RX_SPIN_NS 50000
static ssize_t rx_poll(tcp_client *c)
{
	size_t want = c->rx_small ? TCP_HDR_WINDOW : RXBUF;
	uint64_t t0 = mono_ns();
	if (t0 - c->last_rx_ns < RX_ACTIVE_NS) {
		do {
			ssize_t r = sock_recv(c, c->rx, want, MSG_DONTWAIT);
			if (r > 0 || r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				if (r > 0)
					c->last_rx_ns = mono_ns();
				return r;
			}
			rg_cpu_relax();
		} while (mono_ns() - t0 < RX_SPIN_NS && !atomic_load(&c->s.shut));
	}
	ssize_t r = sock_recv(c, c->rx, want, 0);
	if (r > 0)
		c->last_rx_ns = mono_ns();
	return r;
}

static int rx_read(tcp_client *c, void *dst, size_t n)
{
	uint8_t *d = dst;

	while (n > 0) {
		size_t have = c->rx_len - c->rx_off;
		if (have > 0) {
			size_t k = have < n ? have : n;
			if (d) {
				memcpy(d, c->rx + c->rx_off, k);
				d += k;
			}
			c->rx_off += k;
			n -= k;
			c->s.frame_started = 1;
			continue;
		}
		c->rx_off = c->rx_len = 0;
		ssize_t r;
		if (d && n >= DIRECT_MIN) {
			/* Straight into the destination, never more than this frame
			 * holds. MSG_WAITALL saves wakeups on big payloads; a step
			 * at a time, so that a large one shows progress. */
			r = sock_recv(c, d, n < TCP_PROGRESS_STEP ? n : TCP_PROGRESS_STEP, MSG_WAITALL);
			if (r > 0) {
				d += r;
				n -= (size_t)r;
				c->s.frame_started = 1;
				c->direct = 1;
			}
		} else {
			r = rx_poll(c);
			if (r > 0)
				c->rx_len = (size_t)r;
		}
		if (r > 0)
			atomic_fetch_add_explicit(&c->s.progress, 1, memory_order_relaxed);
		if (r > 0 && atomic_load(&c->s.shut))
			return TRANSPORT_ECLOSED;
		if (r == 0 || (r < 0 && errno != EINTR))
			return rx_error(c, r);
	}
	return TRANSPORT_OK;
}

static int rx_read_fn(void *c, void *dst, size_t n) { return rx_read(c, dst, n); }

static int client_recv_frame(transport_conn *base, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	tcp_client *c = (tcp_client *)base;
	c->direct = 0;
	int err = tp_stream_client_recv_frame(&c->s, rx_read_fn, f, dest, ctx);
	c->rx_small = c->direct;
	return err;
}

/* ---- shutdown / close ---- */

static void client_shutdown(transport_conn *base)
{
	tcp_client *c = (tcp_client *)base;
	if (tp_stream_client_shut(&c->s))
		shutdown(c->fd, SHUT_RDWR); /* wakes blocked recv/send */
}

static void client_close(transport_conn *base)
{
	tcp_client *c = (tcp_client *)base;
	if (!c)
		return;
	client_shutdown(base);
	tp_tls_session_free(c->tls);
	close(c->fd);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}
