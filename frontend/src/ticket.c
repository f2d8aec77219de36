/*
 * rdma+tls://host:port: an RDMA session set up inside TLS (the server's half
 * and the whole design: backend/src/ticket.c).
 *
 * The client connects to tls://host:port, checks the server's certificate as
 * any tls:// client does (REMOTE_GPU_TLS_CA, ...), and sends a hello asking
 * for "rdma" with its token. The answer, inside TLS, names the port of an RDMA
 * session process and a one-time 128-bit cookie; the client then connects to
 * rdma://host:port presenting the cookie (transport_connect_cookie), and its
 * hello there carries no token (rt_hello.c asks fe_conn_ticketed). So the
 * token and the cookie never cross in clear; the session's data on RDMA does.
 *
 * Why a scheme of its own rather than rdma:// with REMOTE_GPU_TLS_CA set: the
 * address says what the client insists on. A client told rdma+tls:// never
 * falls back to sending its token over RDMA, whatever the environment holds
 * (REMOTE_GPU_TLS_CA is optional: without it the system's trust store is used,
 * so its absence could not mean "no TLS").
 */
#include "ticket.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "proto_ops.h"
#include "rg_log.h"

#define TICKET_ERR_REFUSED TRANSPORT_ECONNECT

/* Ends a blocked receive at the deadline: transport_recv_frame has none of its
 * own, and a server that accepts and stays silent must not hang the program. */
typedef struct watchdog {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	transport_conn *c;
	struct timespec end; /* CLOCK_MONOTONIC */
	int started, done, fired;
} watchdog;

static int ticket_ask(transport_conn *c, uint64_t *port, transport_cookie *cookie);
static void *watchdog_main(void *arg);
static int watchdog_start(watchdog *w, transport_conn *c, unsigned timeout_ms);
static void watchdog_stop(watchdog *w);

static void *watchdog_main(void *arg)
{
	watchdog *w = arg;
	pthread_mutex_lock(&w->mu);
	while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &w->end) == 0)
		;
	if (!w->done) {
		w->fired = 1;
		transport_shutdown(w->c); /* any thread: the receive returns ECLOSED */
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int watchdog_start(watchdog *w, transport_conn *c, unsigned timeout_ms)
{
	pthread_condattr_t ca;
	memset(w, 0, sizeof(*w));
	w->c = c;
	if (!timeout_ms)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &w->end);
	w->end.tv_sec += timeout_ms / 1000;
	w->end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (w->end.tv_nsec >= 1000000000L) {
		w->end.tv_sec++;
		w->end.tv_nsec -= 1000000000L;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->th, NULL, watchdog_main, w) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		return TRANSPORT_ENOMEM;
	}
	w->started = 1;
	return 0;
}

static void watchdog_stop(watchdog *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->done = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

/* The hello asking for an rdma session, and its answer: 0 with *port and
 * *cookie, or a TRANSPORT_E* error after logging why. */
static int ticket_ask(transport_conn *c, uint64_t *port, transport_cookie *cookie)
{
	const char *token = getenv("REMOTE_GPU_TOKEN");
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HELLO, 1, 6);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, token ? token : "");
	proto_msg_u64(&m, (uint64_t)getpid());
	proto_msg_str(&m, "");
	proto_msg_str(&m, "");
	proto_msg_str(&m, "rdma");
	int r = proto_msg_finish(&m, 0, 0);
	if (r == PROTO_OK) {
		struct iovec iov = {.iov_base = m.data, .iov_len = m.len};
		r = transport_sendv(c, &iov, 1);
	}
	memset(m.data, 0, m.len); /* the token was in it */
	proto_msg_free(&m);
	if (r != 0)
		return r;

	transport_frame f = {0};
	if ((r = transport_recv_frame(c, &f, NULL, NULL)) != 0)
		return r;
	proto_view v;
	if ((r = proto_view_init(&v, &f.hdr, f.msg)) != PROTO_OK) {
		transport_frame_free(&f);
		return r;
	}
	const void *b = NULL;
	size_t bn = 0;
	if (!(f.hdr.flags & PROTO_F_REPLY) || f.hdr.seq != 1) {
		LOG_ERROR("frontend", "%s: not an answer to our hello", c->peer);
		r = TRANSPORT_ECONNECT;
	} else if (f.hdr.status == CUDA_ERROR_NOT_PERMITTED) {
		LOG_ERROR("frontend", "%s refused the session: REMOTE_GPU_TOKEN does not match", c->peer);
		r = TICKET_ERR_REFUSED;
	} else if (f.hdr.status == PROTO_ETLS) {
		r = TICKET_ERR_REFUSED; /* cannot be: we spoke TLS */
	} else if (f.hdr.status != 0) {
		LOG_ERROR("frontend", "%s gave no rdma session (status %d): is remote-gpud listening on rdma+tls:// "
			  "there, with the same protocol version (%d)?", c->peer, f.hdr.status, PROTO_VERSION);
		r = TICKET_ERR_REFUSED;
	} else if (proto_arg_u64(&v, PROTO_REPLY_FIRST, port) || *port == 0 || *port > 65535 ||
		   proto_arg_bin(&v, PROTO_REPLY_FIRST + 1, &b, &bn) || bn != sizeof(cookie->b)) {
		LOG_ERROR("frontend", "%s: malformed answer to an rdma+tls hello (a tls:// server, not rdma+tls://?)",
			  c->peer);
		r = TICKET_ERR_REFUSED;
	} else {
		memcpy(cookie->b, b, bn);
	}
	proto_view_free(&v);
	if (f.msg && !f.msg_lent)
		memset(f.msg, 0, f.hdr.hdr_len); /* the cookie was in it */
	transport_frame_free(&f);
	return r;
}

int fe_ticket_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	transport_addr tls = *a, rdma = *a;
	transport_conn *c = NULL;
	transport_cookie cookie = {{0}};
	uint64_t port = 0;
	struct timespec t0, t1;

	*out = NULL;
	strcpy(tls.scheme, "tls");
	strcpy(rdma.scheme, "rdma");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = transport_connect_within(&tls, timeout_ms, &c);
	if (r != 0)
		return r;
	watchdog w;
	if ((r = watchdog_start(&w, c, timeout_ms)) == 0) {
		r = ticket_ask(c, &port, &cookie);
		watchdog_stop(&w);
		if (w.fired)
			r = TRANSPORT_ETIMEDOUT;
	}
	transport_close(c);
	if (r != 0)
		return r;
	rdma.port = (int)port;
	unsigned left = 0;
	if (timeout_ms) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		uint64_t spent = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000u + (uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000000L);
		if (spent >= timeout_ms) {
			memset(&cookie, 0, sizeof(cookie));
			return TRANSPORT_ETIMEDOUT;
		}
		left = timeout_ms - (unsigned)spent;
	}
	r = transport_connect_cookie(&rdma, left, &cookie, out);
	memset(&cookie, 0, sizeof(cookie));
	if (r == 0)
		LOG_DEBUG("frontend", "%s:%d: rdma session on port %d, set up over tls", a->host, a->port, rdma.port);
	return r;
}
