/*
 * rdma client: connection setup with rdma_cm, and the blocking calls of
 * libremote.so's threads (no libuv here: this file goes into the client library).
 *
 * Progress without a progress thread. Completions must be polled by someone: a
 * thread that needs something from the peer (the receiver waiting for a frame,
 * a sender waiting for credits or for the peer to have read its buffer) becomes
 * the "leader" if there is none, and polls the completion queue for everybody:
 * first spinning for spin_us (a reply often comes within microseconds), then
 * sleeping in poll() on the completion channel, the connection's rdma_cm event
 * channel (DISCONNECTED) and an eventfd that shutdown writes. Whatever it
 * finds it processes under ep->mu and broadcasts ep->cv; the other waiters sleep
 * on ep->cv and re-check their condition. A leader gives up the role whenever
 * its own condition holds, and one of the others takes over. So a reply costs
 * no hand-off between threads: the receiving thread is usually the leader and
 * finds its frame itself.
 *
 * Waiters wake at least every TICK_MS to send keepalives and to apply the
 * sender timeout (tp_rdma_ep_check).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdma_int.h"
#include "rg_log.h"

#define TICK_MS 200

typedef struct rdma_client {
	transport_conn base; /* first two members as in every rdma connection */
	rdma_ep ep;
	struct rdma_event_channel *cm;
	int wake_fd;
	int leader; /* (ep.mu) a thread polls for everybody */
	atomic_int shut;
} rdma_client;

static int client_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
static int client_connect_cookie(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
				 transport_conn **out);
static int client_sendv(transport_conn *c, const struct iovec *iov, int iovcnt);
static int client_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx);
static void client_shutdown(transport_conn *c);
static void client_close(transport_conn *c);
static uint64_t client_progress(transport_conn *c);

static const transport_ops rdma_client_ops = {
	.scheme = "rdma",
	.caps = TRDMA_CAPS,
	.sendv = client_sendv,
	.recv_frame = client_recv_frame,
	.reg_mem = tp_rdma_reg_mem,
	.dereg_mem = tp_rdma_dereg_mem,
	.shutdown = client_shutdown,
	.close = client_close,
	.progress = client_progress,
};

/* The client half; listening is in rdma_server.c (server library). */
const transport_provider tp_rdma_provider = {
	.scheme = "rdma",
	.connect = client_connect,
	.connect_cookie = client_connect_cookie,
};

/* ---- names ---- */

void tp_rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN + 2], serv[8];
	socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (getnameinfo(sa, sl, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
}

/* ---- connect ---- */

/* Waits for the next event on the connection's channel; its type, status and
 * private data are copied out and the event acked. */
static int wait_event(struct rdma_event_channel *ch, int ms, enum rdma_cm_event_type *type, int *status, rhello *h,
		      int *have_h, rredirect *redirect)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	uint64_t end = tp_rdma_now_ns() + (uint64_t)ms * 1000000ull;
	struct rdma_cm_event *ev;

	for (;;) {
		if (tp_rdma_v.get_cm_event(ch, &ev) == 0)
			break;
		if (errno != EAGAIN && errno != EINTR)
			return TRANSPORT_ECONNECT;
		uint64_t now = tp_rdma_now_ns();
		if (now >= end)
			return TRANSPORT_ETIMEDOUT;
		poll(&p, 1, (int)((end - now) / 1000000ull) + 1);
	}
	*type = ev->event;
	*status = ev->status;
	if (have_h) {
		*have_h = 0;
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= sizeof(*h)) {
			memcpy(h, ev->param.conn.private_data, sizeof(*h));
			*have_h = 1;
		}
	}
	if (redirect) {
		rredirect rd;
		memset(redirect, 0, sizeof(*redirect));
		if (ev->event == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= sizeof(rd)) {
			memcpy(&rd, ev->param.conn.private_data, sizeof(rd));
			if (rd.magic == RDMA_REDIRECT_MAGIC && rd.version == RDMA_PROTO_VERSION)
				*redirect = rd;
		}
	}
	tp_rdma_v.ack_cm_event(ev);
	return 0;
}

/* How long one step of connection setup may take: REMOTE_GPU_RDMA_CONNECT_MS,
 * or what is left of the caller's deadline (end, 0: none) if that is less, so
 * that the steps together (address, route, connect, and again after a
 * redirect) end by the deadline rather than each taking the full step time. */
static int step_ms(uint64_t end)
{
	int ms = tp_rdma_conf()->connect_ms, left = tp_deadline_left_ms(end);
	if (left >= 0 && left < ms)
		ms = left > 0 ? left : 1; /* a timeout of 0 is no timeout to rdma_cm */
	return ms;
}

static int expect(struct rdma_event_channel *ch, uint64_t end, enum rdma_cm_event_type want, const char *what,
		  const char *host)
{
	enum rdma_cm_event_type t;
	int status, r = wait_event(ch, step_ms(end), &t, &status, NULL, NULL, NULL);
	if (r) {
		LOG_WARN("transport", "rdma: %s %s: %s", what, host, r == TRANSPORT_ETIMEDOUT ? "timed out" : "failed");
		return r;
	}
	if (t != want) {
		LOG_WARN("transport", "rdma: %s %s: %s (status %d)", what, host, tp_rdma_v.event_str(t), status);
		return TRANSPORT_ECONNECT;
	}
	return 0;
}

/* One connection attempt, presenting cookie; redirect->port: where the server
 * sent us instead (the attempt then failed). */
static int connect_once(const transport_addr *a, const transport_cookie *cookie, uint64_t end,
			transport_conn **out, rredirect *redirect)
{
	const rdma_conf_t *cf = tp_rdma_conf();
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char port[8];
	int r;

	*out = NULL;
	if ((r = tp_rdma_lib_load()))
		return r;
	snprintf(port, sizeof(port), "%d", a->port);
	int gai = getaddrinfo(a->host, port, &hints, &res);
	if (gai) {
		LOG_WARN("transport", "cannot resolve %s: %s", a->host, gai_strerror(gai));
		return TRANSPORT_EADDR;
	}
	rdma_client *c = calloc(1, sizeof(*c));
	if (!c) {
		freeaddrinfo(res);
		return TRANSPORT_ENOMEM;
	}
	c->base.ops = &rdma_client_ops;
	c->ep.conn = &c->base;
	c->wake_fd = -1;
	atomic_init(&c->shut, 0);
	snprintf(c->base.peer, sizeof(c->base.peer), "%.48s:%d", a->host, a->port);

	struct rdma_cm_id *id = NULL;
	r = TRANSPORT_ECONNECT;
	if (!(c->cm = tp_rdma_v.create_event_channel())) {
		LOG_WARN("transport", "rdma: cannot open the rdma_cm event channel: %m (is rdma_ucm loaded?)");
		goto fail;
	}
	fcntl(c->cm->fd, F_SETFL, fcntl(c->cm->fd, F_GETFL) | O_NONBLOCK);
	/* Address and route: the first address of the host that an RDMA device
	 * can reach. */
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (tp_rdma_v.create_id(c->cm, &id, c, RDMA_PS_TCP)) {
			LOG_WARN("transport", "rdma: rdma_create_id: %m");
			goto fail;
		}
		if (tp_rdma_v.resolve_addr(id, NULL, ai->ai_addr, step_ms(end)) == 0 &&
		    (r = expect(c->cm, end, RDMA_CM_EVENT_ADDR_RESOLVED, "address resolution of", c->base.peer)) == 0)
			break;
		tp_rdma_v.destroy_id(id);
		id = NULL;
		if (r != TRANSPORT_ETIMEDOUT || tp_deadline_left_ms(end) != 0)
			r = TRANSPORT_ECONNECT;
	}
	if (!id)
		goto fail;
	if (tp_rdma_v.resolve_route(id, step_ms(end)) != 0 ||
	    (r = expect(c->cm, end, RDMA_CM_EVENT_ROUTE_RESOLVED, "route resolution to", c->base.peer)) != 0) {
		r = r ? r : TRANSPORT_ECONNECT;
		goto fail;
	}
	/* Bounds how long a dead peer takes to notice (see tp_rdma_conf). Older
	 * kernels lack the option: then the path's default applies. */
	uint8_t to = (uint8_t)cf->ack_timeout;
	if (tp_rdma_v.set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to, sizeof(to)) != 0)
		LOG_DEBUG("transport", "rdma: RDMA_OPTION_ID_ACK_TIMEOUT: %m");
	c->ep.id = id;
	if ((r = tp_rdma_ep_init(&c->ep, id)) != 0)
		goto fail;

	struct ibv_device_attr da;
	int rd = 16;
	if (tp_rdma_v.query_device(id->verbs, &da) == 0) {
		if (da.max_qp_rd_atom < rd)
			rd = da.max_qp_rd_atom;
		if (da.max_qp_init_rd_atom < rd)
			rd = da.max_qp_init_rd_atom;
	}
	rhello mine, theirs;
	tp_rdma_ep_fill_hello(&c->ep, &mine);
	mine.cookie = *cookie;
	struct rdma_conn_param cp = {
		.private_data = &mine,
		.private_data_len = sizeof(mine),
		.responder_resources = (uint8_t)rd,
		.initiator_depth = (uint8_t)rd,
		.retry_count = (uint8_t)cf->retry_count,
		.rnr_retry_count = 6, /* credits make RNR impossible; bounded anyway */
	};
	if (tp_rdma_v.connect(id, &cp) != 0) {
		LOG_WARN("transport", "rdma: rdma_connect to %s: %m", c->base.peer);
		r = TRANSPORT_ECONNECT;
		goto fail;
	}
	enum rdma_cm_event_type t;
	int status, have_h;
	if ((r = wait_event(c->cm, step_ms(end), &t, &status, &theirs, &have_h, redirect)) != 0) {
		LOG_WARN("transport", "rdma: connect to %s: %s", c->base.peer, transport_strerror(r));
		goto fail;
	}
	if (t != RDMA_CM_EVENT_ESTABLISHED && redirect->port) {
		r = TRANSPORT_ECONNECT;
		goto fail;
	}
	if (t != RDMA_CM_EVENT_ESTABLISHED) {
		LOG_WARN("transport", "cannot connect to %s: %s%s", c->base.peer, tp_rdma_v.event_str(t),
			 t == RDMA_CM_EVENT_REJECTED ? " (no remote-gpud listening on rdma there?)" : "");
		r = TRANSPORT_ECONNECT;
		goto fail;
	}
	if ((r = tp_rdma_ep_hello(&c->ep, have_h ? &theirs : NULL, have_h ? sizeof(theirs) : 0)) != 0)
		goto fail;
	tp_rdma_addr_name(rdma_get_peer_addr(id), c->base.peer, sizeof(c->base.peer));
	if ((c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		r = TRANSPORT_ENOMEM;
		goto fail;
	}
	freeaddrinfo(res);
	LOG_DEBUG("transport", "rdma: connected to %s (%s)", c->base.peer, id->verbs->device->name);
	*out = &c->base;
	return TRANSPORT_OK;

fail:
	freeaddrinfo(res);
	if (id) {
		if (c->ep.pd) {
			tp_rdma_ep_free(&c->ep); /* QP, CQ, buffers, PD */
		}
		tp_rdma_v.destroy_id(id);
	}
	if (c->cm)
		tp_rdma_v.destroy_event_channel(c->cm);
	free(c);
	return r;
}

/* A server that serves each session in a process of its own sends the client
 * to that process's port (transport_server_cb.on_redirect): follow, once. */
static int client_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	transport_addr cur = *a;
	transport_cookie cookie = {{0}};
	uint64_t end = tp_deadline(timeout_ms);
	for (int hop = 0;; hop++) {
		rredirect rd = {0};
		int r = connect_once(&cur, &cookie, end, out, &rd);
		if (!rd.port)
			return r;
		if (hop == 1) {
			LOG_WARN("transport", "rdma: %s:%d sent us on again (to port %d): giving up", cur.host, cur.port,
				 rd.port);
			return TRANSPORT_ECONNECT;
		}
		LOG_DEBUG("transport", "rdma: %s:%d: sent to port %d", cur.host, cur.port, rd.port);
		cur.port = rd.port;
		cookie = rd.cookie;
	}
}

/* transport_connect_cookie: straight to a listener that expects us (a port and
 * cookie the client got inside TLS), no redirect followed: a listener that
 * sends us on is not the one the cookie was for. */
static int client_connect_cookie(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
				 transport_conn **out)
{
	rredirect rd = {0};
	int r = connect_once(a, cookie, tp_deadline(timeout_ms), out, &rd);
	if (rd.port) {
		LOG_WARN("transport", "rdma: %s:%d sent us on (to port %d) where a session was expected: refused",
			 a->host, a->port, rd.port);
		return TRANSPORT_ECONNECT;
	}
	return r;
}

/* ---- progress ---- */

static void handle_cm_events(rdma_client *c)
{
	struct rdma_cm_event *ev;
	while (tp_rdma_v.get_cm_event(c->cm, &ev) == 0) {
		enum rdma_cm_event_type t = ev->event;
		tp_rdma_v.ack_cm_event(ev);
		switch (t) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			LOG_DEBUG("transport", "rdma: %s: %s", c->base.peer, tp_rdma_v.event_str(t));
			/* Completions that came before it still count. */
			tp_rdma_ep_poll(&c->ep);
			tp_rdma_ep_peer_gone(&c->ep);
			break;
		default:
			break;
		}
	}
}

/* The leader's turn (ep.mu held): poll, spin, then sleep until something
 * happens or a tick passes. */
static void lead(rdma_client *c)
{
	rdma_ep *ep = &c->ep;
	int spin_us = tp_rdma_conf()->spin_us;

	if (tp_rdma_ep_poll(ep) != 0)
		return;
	if (tp_rdma_conf()->bulk_spin_us > spin_us && tp_rdma_ep_bulk_pending(ep))
		spin_us = tp_rdma_conf()->bulk_spin_us;
	if (spin_us > 0) {
		rg_spin sp, cm_check;
		rg_spin_start(&sp, (uint64_t)spin_us * 1000);
		rg_spin_start(&cm_check, RDMA_CM_CHECK_NS);
		do {
			/* Let others at mu between tries (senders post under it). */
			pthread_mutex_unlock(&ep->mu);
			rg_cpu_relax();
			pthread_mutex_lock(&ep->mu);
			if (tp_rdma_ep_poll(ep) != 0 || ep->err)
				return;
			if (!rg_spin_on(&cm_check)) {
				handle_cm_events(c);
				if (ep->peer_gone)
					return;
				rg_spin_start(&cm_check, RDMA_CM_CHECK_NS);
			}
		} while (rg_spin_on(&sp));
	}
	if (tp_rdma_ep_arm(ep) != 0 || tp_rdma_ep_poll(ep) != 0)
		return; /* completions slipped in before arming */
	struct pollfd p[3] = {
		{.fd = ep->ch->fd, .events = POLLIN},
		{.fd = c->cm->fd, .events = POLLIN},
		{.fd = c->wake_fd, .events = POLLIN},
	};
	pthread_mutex_unlock(&ep->mu);
	int n = poll(p, 3, TICK_MS);
	pthread_mutex_lock(&ep->mu);
	if (n <= 0)
		return;
	if (p[2].revents) {
		uint64_t v;
		if (read(c->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing to read: another thread consumed it */
		}
	}
	if (p[0].revents)
		tp_rdma_ep_channel_drain(ep);
	tp_rdma_ep_poll(ep);
	if (p[1].revents)
		handle_cm_events(c);
}

/* rdma_wait_fn: wait for progress (ep.mu held). */
static int client_wait(rdma_ep *ep, uint64_t since)
{
	rdma_client *c = (rdma_client *)((char *)ep - offsetof(rdma_client, ep));
	int r;

	if (atomic_load(&c->shut))
		return TRANSPORT_ECLOSED;
	if ((r = tp_rdma_ep_check(ep, since)) != 0)
		return r;
	if (c->leader) {
		tp_rdma_ep_wait(ep, TICK_MS);
		return 0;
	}
	c->leader = 1;
	lead(c);
	c->leader = 0;
	tp_rdma_ep_wake(ep); /* someone else may lead now */
	return 0;
}

/* ---- connection ops ---- */

static int client_sendv(transport_conn *base, const struct iovec *iov, int iovcnt)
{
	rdma_client *c = (rdma_client *)base;
	if (atomic_load(&c->shut))
		return TRANSPORT_ECLOSED;
	return tp_rdma_ep_sendv(&c->ep, iov, iovcnt, client_wait);
}

static int client_recv_frame(transport_conn *base, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	rdma_client *c = (rdma_client *)base;
	rdma_ep *ep = &c->ep;
	int r;

	memset(f, 0, sizeof(*f));
	if (atomic_load(&c->shut))
		return TRANSPORT_ECLOSED;
	pthread_mutex_lock(&ep->mu);
	for (;;) {
		r = tp_rdma_ep_rx(ep, f, NULL, dest, ctx);
		if (r == 1) {
			r = TRANSPORT_OK;
			break;
		}
		if (r < 0)
			break;
		/* A frame has no time limit: only a dead peer ends the wait. */
		if ((r = client_wait(ep, 0)) != 0) {
			tp_rdma_ep_rx_abort(ep);
			break;
		}
	}
	pthread_mutex_unlock(&ep->mu);
	if (r && atomic_load(&c->shut))
		r = TRANSPORT_ECLOSED;
	return r;
}

static void client_shutdown(transport_conn *base)
{
	rdma_client *c = (rdma_client *)base;
	if (atomic_exchange(&c->shut, 1))
		return;
	pthread_mutex_lock(&c->ep.mu);
	tp_rdma_ep_fail(&c->ep, TRANSPORT_ECLOSED); /* flushes the QP, tells the peer */
	pthread_mutex_unlock(&c->ep.mu);
	uint64_t one = 1;
	if (write(c->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the leader wakes anyway */
	}
}

/* Messages from the server's process: credits, acks and frames all say it runs
 * (a keepalive's acknowledgement comes from its NIC alone and does not count). */
static uint64_t client_progress(transport_conn *base)
{
	return atomic_load_explicit(&((rdma_client *)base)->ep.heard_n, memory_order_relaxed);
}

static void client_close(transport_conn *base)
{
	rdma_client *c = (rdma_client *)base;
	if (!c)
		return;
	client_shutdown(base);
	LOG_DEBUG("transport", "rdma: %s: closed (sent %llu frames, %llu inline, %llu B zero-copy, %llu B bounced; "
			       "received %llu frames, %llu B direct, %llu B via landing; %llu keepalives)",
		  c->base.peer, (unsigned long long)c->ep.st.tx_frames, (unsigned long long)c->ep.st.tx_inline,
		  (unsigned long long)c->ep.st.tx_zc_bytes, (unsigned long long)c->ep.st.tx_bounce_bytes,
		  (unsigned long long)c->ep.st.rx_frames, (unsigned long long)c->ep.st.rx_direct_bytes,
		  (unsigned long long)c->ep.st.rx_landing_bytes, (unsigned long long)c->ep.st.keepalives);
	struct rdma_cm_id *id = c->ep.id;
	tp_rdma_ep_free(&c->ep);
	/* Events of the id must be acked before it is destroyed. */
	struct rdma_cm_event *ev;
	while (tp_rdma_v.get_cm_event(c->cm, &ev) == 0)
		tp_rdma_v.ack_cm_event(ev);
	tp_rdma_v.destroy_id(id);
	tp_rdma_v.destroy_event_channel(c->cm);
	close(c->wake_fd);
	free(c);
}
