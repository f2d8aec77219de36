/*
 * rdma server: a listener on the libuv loop of remote-gpud.
 *
 * The listener's rdma_cm event channel (shared by every connection it
 * accepted) is watched by a uv_poll; each connection's completion channel by
 * another. The loop thread is the only one that polls completion queues (but
 * see inline waits below) and it runs every connection's receive side, so the
 * callbacks (on_accept, payload_dest, on_frame, on_close) run there as the
 * contract wants:
 *
 *   CONNECT_REQUEST  check the client's hello, create QP and buffers, accept
 *   ESTABLISHED      on_accept; start watching the completion channel
 *   completions      tp_rdma_ep_poll + tp_rdma_ep_rx: payload_dest once a frame's
 *                    msgpack part is in, RDMA READs into that destination (or
 *                    the landing ring), on_frame when the frame is whole
 *   DISCONNECTED     deliver what was received, then on_close
 *
 * Senders (executor and waiter threads) post under ep.mu and, when they must
 * wait (credits, acks from the client), sleep on ep.cv, which the loop
 * broadcasts after every batch of completions; they wake every TICK_MS to
 * apply the sender timeout. A send from the loop thread itself cannot wait for
 * the loop, so it polls the completion queue inline (server_wait); frames it
 * finds wait for the loop to come back (a "kick" through the listener's
 * uv_async_t), because callbacks must not nest.
 *
 * A uv_timer (every TICK_MS) sends keepalives on quiet connections, so a client
 * host that vanished is noticed and its session freed (on_close(EIO)).
 *
 * Closing follows tcp_server.c: shutdown/close from any thread latch the error
 * (waking senders), disconnect, and ask the loop to tear the connection down:
 * wait until no sender holds send_lock, on_close once, stop the uv_poll, destroy
 * QP, CQ and id. The memory (and the PD with the user's registrations) goes
 * when both the upper layer called transport_close and the handle is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopq.h"
#include "rdma_int.h"
#include "rg_list.h"
#include "rg_log.h"

#define TICK_MS 200
#define BACKLOG 128

void tp_rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len); /* rdma_client.c */

typedef struct rdma_listener rdma_listener;

typedef struct sconn {
	transport_conn base; /* first two members as in every rdma connection */
	rdma_ep ep;
	rdma_listener *l; /* valid until the handle is closed */
	void *conn_ctx;   /* set by on_accept; NULL: not (yet) accepted */
	uv_poll_t poll;   /* on ep.ch->fd */
	rg_list node;     /* in l->base.conns; loop thread only */
	rg_list req_node; /* in l->base.q while a request is pending */
	int established;  /* loop thread only */
	atomic_int kick;  /* run the receive side on the loop (request) */
	int inline_kick;  /* loop thread: an inline wait left work for the loop */
	int hot;          /* loop thread: bulk data moves, l->idle polls it (on_idle) */
	uint64_t bulk_ns; /* loop thread: last progress while hot */

	tp_sconn own; /* its owners, the close */
	atomic_int shut;
} sconn;

struct rdma_listener {
	transport_listener base;
	struct rdma_event_channel *cm;
	struct rdma_cm_id *id;
	uv_poll_t cm_poll;
	uv_timer_t timer;
	uv_idle_t idle; /* runs while a connection is hot: polls it every loop turn */
	int rd; /* READs in flight we allow (device limits) */

	/* loop thread only */
	pthread_t loop_thread;
};

static void on_cm(uv_poll_t *h, int status, int events);
static void on_comp(uv_poll_t *h, int status, int events);
static void on_async(uv_async_t *a);
static void on_timer(uv_timer_t *t);
static void on_idle(uv_idle_t *h);
static void conn_close_cb(uv_handle_t *h);
static void conn_free(tp_sconn *o);
static void teardown(sconn *c, int err);
static void request(sconn *c, int err, int kick);
static void progress(sconn *c);
static int server_sendv(transport_conn *c, const struct iovec *iov, int iovcnt);
static int server_sendv_async(transport_conn *c, const struct iovec *iov, int iovcnt, transport_sent_fn done,
			      void *ctx);
static void server_shutdown(transport_conn *c);
static void server_close(transport_conn *c);
static int srv_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		       transport_listener **out);
static void listener_release(transport_listener *l);

static const transport_ops rdma_server_ops = {
	.scheme = "rdma",
	.caps = TRDMA_CAPS,
	.sendv = server_sendv,
	.sendv_async = server_sendv_async,
	.recv_frame = tp_server_recv_frame,
	.reg_mem = tp_rdma_reg_mem,
	.dereg_mem = tp_rdma_dereg_mem,
	.shutdown = server_shutdown,
	.close = server_close,
};

const transport_provider tp_rdma_listen_provider = {
	.scheme = "rdma",
	.listen = srv_listen,
	.listener_close = tp_listener_close,
};

/* Loop callbacks note their thread: transport_listen may run before uv_run. */
static void on_loop(rdma_listener *l) { l->loop_thread = pthread_self(); }

/* ---- listen ---- */

static int srv_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		       transport_listener **out)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char port[8];
	int r;

	*out = NULL;
	if ((r = tp_rdma_lib_load()))
		return r;
	tp_rdma_conf();
	snprintf(port, sizeof(port), "%d", a->port);
	int gai = getaddrinfo(a->host, port, &hints, &res);
	if (gai) {
		LOG_WARN("transport", "cannot resolve %s: %s", a->host, gai_strerror(gai));
		return TRANSPORT_EADDR;
	}
	rdma_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		freeaddrinfo(res);
		return TRANSPORT_ENOMEM;
	}
	tp_listener_init(&l->base, &tp_rdma_listen_provider, loop, cb, ctx);
	l->base.release = listener_release;
	l->rd = 16;
	l->loop_thread = pthread_self();

	r = TRANSPORT_EADDR;
	if (!(l->cm = tp_rdma_v.create_event_channel())) {
		LOG_ERROR("transport", "rdma: cannot open the rdma_cm event channel: %m (is rdma_ucm loaded?)");
		goto fail;
	}
	fcntl(l->cm->fd, F_SETFL, fcntl(l->cm->fd, F_GETFL) | O_NONBLOCK);
	if (tp_rdma_v.create_id(l->cm, &l->id, l, RDMA_PS_TCP)) {
		LOG_ERROR("transport", "rdma: rdma_create_id: %m");
		goto fail;
	}
	int bound = 0, err = 0;
	for (struct addrinfo *ai = res; ai && !bound; ai = ai->ai_next) {
		if (tp_rdma_v.bind_addr(l->id, ai->ai_addr) == 0)
			bound = 1;
		else
			err = errno;
	}
	if (!bound || tp_rdma_v.listen(l->id, BACKLOG) != 0) {
		LOG_ERROR("transport", "cannot listen on rdma://%s:%d: %s%s", a->host, a->port,
			  strerror(bound ? errno : err),
			  bound ? "" : " (no RDMA device has this address?)");
		goto fail;
	}
	l->base.port = ntohs(tp_rdma_v.get_src_port(l->id));
	if (l->id->verbs) {
		struct ibv_device_attr da;
		if (tp_rdma_v.query_device(l->id->verbs, &da) == 0) {
			if (da.max_qp_rd_atom < l->rd)
				l->rd = da.max_qp_rd_atom;
			if (da.max_qp_init_rd_atom < l->rd)
				l->rd = da.max_qp_init_rd_atom;
		}
	}
	freeaddrinfo(res);
	res = NULL;

	if ((r = tp_loopq_init(&l->base.q, loop, on_async, l)) < 0) {
		LOG_ERROR("transport", "uv_async_init: %s", uv_strerror(r));
		r = TRANSPORT_EIO;
		goto fail;
	}
	uv_poll_init(loop, &l->cm_poll, l->cm->fd);
	l->cm_poll.data = l;
	uv_timer_init(loop, &l->timer);
	l->timer.data = l;
	uv_idle_init(loop, &l->idle);
	l->idle.data = l;
	l->base.nhandles = 4;
	uv_poll_start(&l->cm_poll, UV_READABLE, on_cm);
	uv_timer_start(&l->timer, on_timer, TICK_MS, TICK_MS);
	LOG_INFO("transport", "listening on rdma://%s:%d (device %s)", a->host, l->base.port,
		 l->id->verbs ? l->id->verbs->device->name : "any");
	*out = &l->base;
	return TRANSPORT_OK;

fail:
	if (res)
		freeaddrinfo(res);
	if (l->id)
		tp_rdma_v.destroy_id(l->id);
	if (l->cm)
		tp_rdma_v.destroy_event_channel(l->cm);
	free(l);
	return r;
}

/* Every id of the channel is destroyed by now. */
static void listener_release(transport_listener *base) { tp_rdma_v.destroy_event_channel(((rdma_listener *)base)->cm); }

static void end_conn(rg_list *node) { teardown(RG_CONTAINER_OF(node, sconn, node), TRANSPORT_ECLOSED); }

/* The listener's own part of its close, once its connections are torn down
 * (tp_listener_close_start). */
static void listener_close_now(rdma_listener *l)
{
	struct rdma_cm_event *ev;

	uv_poll_stop(&l->cm_poll);
	/* Requests that nobody picked up yet: refuse them. */
	while (tp_rdma_v.get_cm_event(l->cm, &ev) == 0) {
		struct rdma_cm_id *id = ev->id;
		int req = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST;
		if (req)
			tp_rdma_v.reject(id, NULL, 0);
		tp_rdma_v.ack_cm_event(ev);
		if (req)
			tp_rdma_v.destroy_id(id);
	}
	tp_rdma_v.destroy_id(l->id);
	l->id = NULL;
	uv_close((uv_handle_t *)&l->cm_poll, tp_listener_close_cb);
	uv_close((uv_handle_t *)&l->timer, tp_listener_close_cb);
	uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
	uv_close((uv_handle_t *)&l->idle, tp_listener_close_cb);
}

/* Loop thread: teardowns and kicks other threads asked for, and the close. */
static void on_async(uv_async_t *a)
{
	rdma_listener *l = a->data;
	on_loop(l);
	for (rg_list *n; (n = tp_loopq_pop(&l->base.q));) {
		sconn *c = RG_CONTAINER_OF(n, sconn, req_node);
		int kick = atomic_exchange(&c->kick, 0); /* set before the post */
		pthread_mutex_lock(&c->own.lock);
		int close_err = c->own.close_err, torn = c->own.torn_down;
		pthread_mutex_unlock(&c->own.lock);
		if (close_err)
			teardown(c, close_err);
		else if (kick && !torn)
			progress(c);
	}
	if (tp_listener_close_start(&l->base, end_conn))
		listener_close_now(l);
}

static void on_timer(uv_timer_t *t)
{
	rdma_listener *l = t->data;
	on_loop(l);
	for (rg_list *n = l->base.conns.next; n != &l->base.conns; n = n->next) {
		sconn *c = RG_CONTAINER_OF(n, sconn, node);
		if (!c->established || atomic_load(&c->shut))
			continue;
		pthread_mutex_lock(&c->ep.mu);
		int err = tp_rdma_ep_check(&c->ep, 0); /* keepalive on a quiet connection */
		pthread_mutex_unlock(&c->ep.mu);
		if (err)
			teardown(c, err);
	}
}

/* ---- connections ---- */

static sconn *conn_new(rdma_listener *l, struct rdma_cm_id *id)
{
	sconn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->base.ops = &rdma_server_ops;
	c->l = l;
	c->ep.conn = &c->base;
	c->ep.server = 1;
	tp_sconn_init(&c->own, conn_free);
	atomic_init(&c->shut, 0);
	atomic_init(&c->kick, 0);
	rg_list_init(&c->node);
	rg_list_init(&c->req_node);
	tp_rdma_addr_name(rdma_get_peer_addr(id), c->base.peer, sizeof(c->base.peer));
	id->context = c;
	return c;
}

static void on_connect_request(rdma_listener *l, struct rdma_cm_id *id, const void *priv, size_t plen, int peer_rd)
{
	int closing = tp_loopq_closing(&l->base.q);
	if (!closing && l->base.cb.on_redirect) {
		char peer[64];
		tp_rdma_addr_name(rdma_get_peer_addr(id), peer, sizeof(peer));
		transport_cookie cookie = {{0}};
		int port = l->base.cb.on_redirect(l->base.ctx, peer, &cookie);
		if (port > 0 && port <= 65535) {
			rredirect rd = {.magic = RDMA_REDIRECT_MAGIC,
					.version = RDMA_PROTO_VERSION,
					.port = (uint16_t)port,
					.cookie = cookie};
			tp_rdma_v.reject(id, &rd, sizeof(rd));
			LOG_DEBUG("transport", "rdma: %s: sent to port %d", peer, port);
		} else {
			tp_rdma_v.reject(id, NULL, 0);
		}
		tp_rdma_v.destroy_id(id);
		return;
	}
	sconn *c = closing ? NULL : conn_new(l, id);
	if (!c) {
		tp_rdma_v.reject(id, NULL, 0);
		tp_rdma_v.destroy_id(id);
		return;
	}
	int r = tp_rdma_ep_init(&c->ep, id);
	if (!r)
		r = tp_rdma_ep_hello(&c->ep, priv, plen);
	if (r) {
		LOG_WARN("transport", "rdma: %s: connection refused: %s", c->base.peer, transport_strerror(r));
		tp_rdma_v.reject(id, NULL, 0);
		tp_rdma_ep_free(&c->ep);
		tp_rdma_v.destroy_id(id);
		tp_sconn_fini(&c->own);
		free(c);
		return;
	}
	uv_poll_init(l->base.loop, &c->poll, c->ep.ch->fd);
	c->poll.data = c;
	l->base.nhandles++;
	rg_list_add_tail(&l->base.conns, &c->node);

	rhello mine;
	tp_rdma_ep_fill_hello(&c->ep, &mine);
	int rd = l->rd < peer_rd ? l->rd : peer_rd;
	struct rdma_conn_param cp = {
		.private_data = &mine,
		.private_data_len = sizeof(mine),
		.responder_resources = (uint8_t)rd,
		.initiator_depth = (uint8_t)rd,
		.retry_count = (uint8_t)tp_rdma_conf()->retry_count,
		.rnr_retry_count = 6,
	};
	uint8_t to = (uint8_t)tp_rdma_conf()->ack_timeout;
	tp_rdma_v.set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to, sizeof(to));
	if (tp_rdma_v.accept(id, &cp) != 0) {
		LOG_WARN("transport", "rdma: %s: rdma_accept: %m", c->base.peer);
		c->own.released = 1; /* nobody else knows it */
		teardown(c, TRANSPORT_EIO);
		return;
	}
	LOG_DEBUG("transport", "rdma: %s: connection request accepted", c->base.peer);
}

static void on_established(sconn *c)
{
	rdma_listener *l = c->l;
	c->conn_ctx = tp_listener_admit(&l->base, &c->base);
	if (!c->conn_ctx) {
		LOG_INFO("transport", "%s: refused by the upper layer", c->base.peer);
		c->own.released = 1;
		teardown(c, TRANSPORT_ECLOSED);
		return;
	}
	c->established = 1;
	LOG_DEBUG("transport", "rdma: accepted %s", c->base.peer);
	uv_poll_start(&c->poll, UV_READABLE, on_comp);
	progress(c); /* frames may have come before the event */
}

static void on_disconnected(sconn *c)
{
	pthread_mutex_lock(&c->ep.mu);
	tp_rdma_ep_poll(&c->ep); /* completions that came before it still count */
	tp_rdma_ep_peer_gone(&c->ep);
	pthread_mutex_unlock(&c->ep.mu);
	if (c->established)
		progress(c); /* delivers what was received; tears down at the end */
	else
		teardown(c, TRANSPORT_ECLOSED);
}

static void on_cm(uv_poll_t *h, int status, int events)
{
	rdma_listener *l = h->data;
	struct rdma_cm_event *ev;

	on_loop(l);
	while (!l->base.close_started && tp_rdma_v.get_cm_event(l->cm, &ev) == 0) {
		enum rdma_cm_event_type t = ev->event;
		struct rdma_cm_id *id = ev->id;
		uint8_t priv[64];
		size_t plen = 0;
		int peer_rd = ev->param.conn.initiator_depth;
		if (t == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
			plen = ev->param.conn.private_data_len < sizeof(priv) ? ev->param.conn.private_data_len : sizeof(priv);
			memcpy(priv, ev->param.conn.private_data, plen);
		}
		/* Acked before acting: destroying an id waits for its events. */
		tp_rdma_v.ack_cm_event(ev);
		if (id == l->id) {
			if (t == RDMA_CM_EVENT_DEVICE_REMOVAL)
				LOG_ERROR("transport", "rdma: the listener's device was removed");
			continue;
		}
		sconn *c = t == RDMA_CM_EVENT_CONNECT_REQUEST ? NULL : id->context;
		if (c)
			LOG_DEBUG("transport", "rdma: %s: %s", c->base.peer, tp_rdma_v.event_str(t));
		switch (t) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			on_connect_request(l, id, plen ? priv : NULL, plen, peer_rd ? peer_rd : 1);
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c && !c->own.torn_down)
				on_established(c);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (c && !c->own.torn_down)
				on_disconnected(c);
			break;
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			if (c && !c->own.torn_down) {
				LOG_INFO("transport", "rdma: %s: %s", c->base.peer, tp_rdma_v.event_str(t));
				teardown(c, TRANSPORT_EIO);
			}
			break;
		default: /* TIMEWAIT_EXIT, ADDR_CHANGE, ... */
			break;
		}
	}
}

/* Loop thread, ep.mu held: runs the sendv_async completions that are due
 * (all of them, with the error, once the connection failed), mu dropped. */
static void fire_sent(rdma_ep *ep)
{
	rdma_sent due[RDMA_NSENT];
	int err;
	unsigned n = tp_rdma_ep_take_sent(ep, due, RDMA_NSENT, &err);
	if (n == 0)
		return;
	pthread_mutex_unlock(&ep->mu);
	for (unsigned i = 0; i < n; i++)
		due[i].done(due[i].ctx, err);
	pthread_mutex_lock(&ep->mu);
}

/* Loop thread: while c's bulk data moves and has moved within bulk_spin_us,
 * the loop polls c on every turn (on_idle) instead of sleeping until the
 * completion channel fires: without blocking the loop in one connection's
 * callback for a transfer's whole length, which would stall every other
 * session. */
static void set_hot(sconn *c, int moved, int bulk)
{
	uint64_t window = (uint64_t)tp_rdma_conf()->bulk_spin_us * 1000;
	if (!bulk || !window || atomic_load(&c->shut) || c->l->base.close_started) {
		c->hot = 0;
		return;
	}
	uint64_t now = tp_rdma_now_ns();
	if (moved || !c->hot)
		c->bulk_ns = now;
	c->hot = now - c->bulk_ns < window;
	if (c->hot && !uv_is_active((uv_handle_t *)&c->l->idle))
		uv_idle_start(&c->l->idle, on_idle);
}

static void on_idle(uv_idle_t *h)
{
	rdma_listener *l = h->data;
	int any = 0;
	on_loop(l);
	/* progress may tear a connection down, which leaves it in the list
	 * until its handle is closed (a later loop phase). */
	for (rg_list *n = l->base.conns.next; n != &l->base.conns; n = n->next) {
		sconn *c = RG_CONTAINER_OF(n, sconn, node);
		if (c->hot && c->established && !atomic_load(&c->shut))
			progress(c);
		any |= c->hot;
	}
	if (!any)
		uv_idle_stop(h);
}

/* Whether the rdma_cm channel has an event for the loop (a disconnect, a new
 * connection): a spin gives the loop back for it. */
static int cm_event_pending(rdma_listener *l)
{
	struct pollfd p = {.fd = l->cm->fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

/* Loop thread: completions, frames, acks; tears down on a failure. */
static void progress(sconn *c)
{
	rdma_ep *ep = &c->ep;
	rdma_listener *l = c->l;
	int r = 0;

	int spin_us = tp_rdma_conf()->server_spin_us;
	rg_spin sp, cm_check;
	rg_spin_start(&sp, (uint64_t)spin_us * 1000);
	rg_spin_start(&cm_check, RDMA_CM_CHECK_NS);
	int moved = 0;

	pthread_mutex_lock(&ep->mu);
	tp_rdma_ep_channel_drain(ep);
	tp_rdma_ep_arm(ep);
	for (;;) {
		int got = tp_rdma_ep_poll(ep);
		moved |= got > 0;
		fire_sent(ep);
		while (!atomic_load(&c->shut)) {
			transport_frame f;
			r = tp_rdma_ep_rx(ep, &f, l->base.cb.frame_ok, l->base.cb.payload_dest, c->conn_ctx);
			if (r <= 0)
				break;
			got = 1;
			pthread_mutex_unlock(&ep->mu);
			if (l->base.cb.on_frame)
				l->base.cb.on_frame(c->conn_ctx, &f);
			else
				transport_frame_free(&f);
			pthread_mutex_lock(&ep->mu);
			tp_rdma_ep_rx_release(ep); /* on_frame is done with a lent msg */
			tp_rdma_ep_poll(ep);
			fire_sent(ep);
		}
		if (!spin_us || r < 0 || ep->err || atomic_load(&c->shut))
			break;
		/* Busy polling (REMOTE_GPU_RDMA_SERVER_SPIN_US): the next request
		 * is often microseconds away, and a wake-up from the channel costs
		 * more. The loop serves nothing else meanwhile: keep it short. */
		if (got)
			rg_spin_start(&sp, (uint64_t)spin_us * 1000);
		else if (!rg_spin_on(&sp))
			break;
		if (!rg_spin_on(&cm_check)) {
			if (cm_event_pending(l))
				break;
			rg_spin_start(&cm_check, RDMA_CM_CHECK_NS);
		}
		pthread_mutex_unlock(&ep->mu);
		rg_cpu_relax();
		pthread_mutex_lock(&ep->mu);
	}
	if (r == PROTO_EVERSION) {
		/* Like tcp: tell a peer of another version which one we speak. */
		proto_msg m;
		if (proto_msg_version_reply(&m) == PROTO_OK)
			tp_rdma_ep_send_eager_nb(ep, m.data, m.len);
		proto_msg_free(&m);
	}
	tp_rdma_ep_repost(ep);
	tp_rdma_ep_flush_ctrl(ep);
	tp_rdma_ep_wake(ep);
	int err = ep->err;
	set_hot(c, moved, !err && tp_rdma_ep_bulk_pending(ep));
	pthread_mutex_unlock(&ep->mu);
	if (atomic_load(&c->shut))
		teardown(c, TRANSPORT_ECLOSED); /* a callback shut it down */
	else if (err)
		teardown(c, err);
}

static void on_comp(uv_poll_t *h, int status, int events)
{
	sconn *c = h->data;
	on_loop(c->l);
	progress(c);
}

/* ---- teardown ---- */

/* Any thread: ask the loop to tear c down (err != 0) or to run its receive
 * side (kick). */
static void request(sconn *c, int err, int kick)
{
	pthread_mutex_lock(&c->own.lock);
	if (err && !c->own.close_err)
		c->own.close_err = err;
	if (!c->own.torn_down) {
		/* torn_down == 0 under c->own.lock: listener and async are alive. */
		if (kick)
			atomic_store(&c->kick, 1);
		tp_loopq_post(&c->l->base.q, &c->req_node);
	}
	pthread_mutex_unlock(&c->own.lock);
}

/* Loop thread, once per connection. */
static void teardown(sconn *c, int err)
{
	rdma_listener *l = c->l;
	rdma_ep *ep = &c->ep;

	pthread_mutex_lock(&c->own.lock);
	if (c->own.torn_down) {
		pthread_mutex_unlock(&c->own.lock);
		return;
	}
	c->own.torn_down = 1;
	c->hot = 0;
	if (!c->own.close_err)
		c->own.close_err = err;
	err = c->own.close_err;
	atomic_store(&c->shut, 1);
	pthread_mutex_unlock(&c->own.lock);

	tp_loopq_cancel(&l->base.q, &c->req_node);

	/* Blocked senders wake and return; later ones see the error. */
	pthread_mutex_lock(&ep->mu);
	tp_rdma_ep_fail(ep, err);
	pthread_mutex_unlock(&ep->mu);
	pthread_mutex_lock(&ep->send_lock); /* no sender is inside now */
	pthread_mutex_unlock(&ep->send_lock);
	pthread_mutex_lock(&ep->mu);
	tp_rdma_ep_rx_abort(ep);
	fire_sent(ep); /* the QP is in the error state: nothing reads those buffers now */
	pthread_mutex_unlock(&ep->mu);

	if (c->conn_ctx) {
		LOG_DEBUG("transport", "rdma: %s: closed: %s (frames in %llu, out %llu; %llu B read into registered "
				       "memory, %llu B via landing; %llu B sent zero-copy, %llu B bounced)",
			  c->base.peer, transport_strerror(err), (unsigned long long)ep->st.rx_frames,
			  (unsigned long long)ep->st.tx_frames, (unsigned long long)ep->st.rx_direct_bytes,
			  (unsigned long long)ep->st.rx_landing_bytes, (unsigned long long)ep->st.tx_zc_bytes,
			  (unsigned long long)ep->st.tx_bounce_bytes);
		if (l->base.cb.on_close)
			l->base.cb.on_close(c->conn_ctx, err);
	}
	/* Senders check ep->err under ep.mu before touching the QP, so it may go
	 * now; the channel must outlive the uv_poll watching it. */
	pthread_mutex_lock(&ep->mu);
	tp_rdma_ep_destroy_qp(ep);
	pthread_mutex_unlock(&ep->mu);
	tp_rdma_v.destroy_id(ep->id);
	ep->id = NULL;
	uv_poll_stop(&c->poll);
	uv_close((uv_handle_t *)&c->poll, conn_close_cb);
}

static void conn_free(tp_sconn *o)
{
	sconn *c = (sconn *)((char *)o - offsetof(sconn, own));
	tp_rdma_ep_free(&c->ep);
	free(c);
}

static void conn_close_cb(uv_handle_t *h)
{
	sconn *c = h->data;
	rdma_listener *l = c->l;

	rg_list_del(&c->node);
	c->l = NULL;
	tp_sconn_closed(&c->own, &l->base);
}

/* ---- connection ops ---- */

/* rdma_wait_fn for senders (ep.mu held). */
static int server_wait(rdma_ep *ep, uint64_t since)
{
	sconn *c = (sconn *)((char *)ep - offsetof(sconn, ep));
	int r;

	if (atomic_load(&c->shut))
		return ep->err ? ep->err : TRANSPORT_ECLOSED;
	if ((r = tp_rdma_ep_check(ep, since)) != 0)
		return r;
	rdma_listener *l = c->l;
	if (l && pthread_equal(pthread_self(), l->loop_thread) && ep->cq) {
		/* The loop cannot wait for itself: poll here. What arrives for
		 * the receive side is handled when the loop is back (kick). */
		if (tp_rdma_ep_poll(ep) == 0) {
			tp_rdma_ep_arm(ep);
			if (tp_rdma_ep_poll(ep) == 0) {
				struct pollfd p = {.fd = ep->ch->fd, .events = POLLIN};
				pthread_mutex_unlock(&ep->mu);
				poll(&p, 1, TICK_MS);
				pthread_mutex_lock(&ep->mu);
				tp_rdma_ep_channel_drain(ep);
				tp_rdma_ep_arm(ep);
				tp_rdma_ep_poll(ep);
			}
		}
		fire_sent(ep); /* a sendv_async here may wait for room in that queue */
		if (ep->rq_n > 0 || ep->rx.rd_n > 0 || ep->sent_n > 0)
			c->inline_kick = 1; /* server_sendv asks the loop, after we return */
		return 0;
	}
	tp_rdma_ep_wait(ep, TICK_MS);
	return 0;
}

static int send_common(sconn *c, const struct iovec *iov, int iovcnt, const rdma_sent *async, int *queued)
{
	if (atomic_load(&c->shut))
		return TRANSPORT_ECLOSED;
	int r = tp_rdma_ep_sendv_async(&c->ep, iov, iovcnt, server_wait, async, queued);
	if (r && !atomic_load(&c->shut))
		request(c, r, 0); /* the peer is gone or too slow: end it */
	else if (c->inline_kick && c->l && pthread_equal(pthread_self(), c->l->loop_thread)) {
		c->inline_kick = 0;
		request(c, 0, 1);
	}
	return atomic_load(&c->shut) && r ? TRANSPORT_ECLOSED : r;
}

static int server_sendv(transport_conn *base, const struct iovec *iov, int iovcnt)
{
	return send_common((sconn *)base, iov, iovcnt, NULL, NULL);
}

/* A zero-copy payload's completion is queued on the connection and run by
 * the loop thread once the peer has read it (fire_sent); anything else is
 * complete when the frames are posted. */
static int server_sendv_async(transport_conn *base, const struct iovec *iov, int iovcnt, transport_sent_fn done,
			      void *ctx)
{
	rdma_sent a = {.done = done, .ctx = ctx};
	int queued = 0;
	int r = send_common((sconn *)base, iov, iovcnt, &a, &queued);
	if (r == 0 && !queued)
		done(ctx, 0);
	return r;
}

static void server_shutdown(transport_conn *base)
{
	sconn *c = (sconn *)base;
	pthread_mutex_lock(&c->ep.mu);
	atomic_store(&c->shut, 1);
	tp_rdma_ep_fail(&c->ep, TRANSPORT_ECLOSED); /* wakes senders now */
	pthread_mutex_unlock(&c->ep.mu);
	request(c, TRANSPORT_ECLOSED, 0);
}

static void server_close(transport_conn *base)
{
	server_shutdown(base);
	tp_sconn_release(&((sconn *)base)->own);
}
