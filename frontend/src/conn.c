/* The call channel: send lock, pending calls, the receive role. See conn.h.
 *
 * The receive role (rx_mu) is held by whoever reads frames: a caller waiting for
 * its own reply takes it when it is free, and reads (and hands out) frames until
 * its reply is in; the receiver thread takes it only when frames are due that no
 * caller waits for (detached copies, host function events). A synchronous call
 * then costs the server's round trip and nothing more: no thread hand-off, which
 * is tens of microseconds where cores are few (a wake-up) and a cache line
 * transfer where they are not.
 *
 * A liveness watchdog (live.c) watches the channel while anything waits for
 * the server; when the server has been silent too long it fails the channel
 * like a broken connection (conn_fail, then a transport shutdown that wakes
 * whoever is blocked in a send or a receive). */
#define _GNU_SOURCE /* pthread_setname_np */

#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "rg_clock.h"
#include "rg_log.h"
#include "sendq.h"
#include "stats.h"
#include "ticket.h"

#define SPIN_NS 50000 /* a reply usually comes within tens of microseconds */

/* A reply as read, before it is handed to its call. */
typedef struct fe_reply_rx {
	int status, latched;
	uint8_t *msg;
	proto_hdr hdr; /* msg's frame header: to decode it later */
	uint64_t rx_len;
	proto_view view; /* has_view: msg decoded already (the reader's own call) */
	int has_view;
} fe_reply_rx;

/* A channel, or a view of one for another device of its server (fe_conn_view):
 * a view has only chan and dev; every function goes to chan first, and the
 * frames sent through a view carry its dev. */
struct fe_conn {
	struct fe_conn *chan; /* the channel: itself, for a channel */
	uint32_t dev;         /* the server's device index the frames are for */
	transport_conn *t;
	fe_sendq *sq;
	atomic_uint_fast64_t seq;

	pthread_mutex_t lock; /* pending list, detached count, dead */
	pthread_cond_t cond;
	fe_pending *pending;
	atomic_int detached;   /* changed under lock; read without it on the fast path */
	atomic_int dead;       /* likewise */
	atomic_int latched;

	pthread_mutex_t rx_mu; /* the receive role */
	atomic_int rx_busy;    /* rx_mu is held: waiters may sleep on cond (cleared under lock) */
	atomic_int rx_want;    /* callers in fe_conn_wait (decremented under lock) */
	int rx_parked;         /* (lock) the receiver thread sleeps on rx_cv */
	int events;            /* (lock) the server may send events (host functions) */
	int closing;           /* (lock) */
	pthread_cond_t rx_cv;
	pthread_t rx;
	/* Below: the role holder's. */
	fe_pending *rx_cur; /* call whose reply is being read */
	fe_pending *rx_self; /* the holder's own call: found without the list, and */
	fe_reply_rx rx_got;  /* its reply, kept until the holder's closing section */
	int rx_self_got;
	int rx_classified;
	proto_view rx_view;
	int rx_view_ok;
	fe_hostfn_cb hostfn;
	void *hostfn_ctx;

	fe_live *live;          /* NULL: REMOTE_GPU_TIMEOUT=0 */
	atomic_int pings;       /* the server answers pings (after the hello) */
	int ticketed;           /* rdma+tls: admitted by a cookie got inside TLS (ticket.c) */
	atomic_uint_fast64_t rx_frames; /* a sign of life where the transport counts none */
	void *ext;                      /* fe_conn_ext: a feature's state kept with the channel */
	void (*ext_close)(void *ext);
};

static fe_pending *pending_find_locked(fe_conn *c, uint64_t seq)
{
	for (fe_pending *p = c->pending; p; p = p->next)
		if (p->seq == seq)
			return p;
	return NULL;
}

/* A call leaves the list only once its reply (payload included) is complete, so
 * that waiters for "everything sent before" see calls still being received. */
static void pending_unlink_locked(fe_conn *c, fe_pending *p)
{
	for (fe_pending **pp = &c->pending; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			p->linked = 0;
			return;
		}
}

/* Fills in p's reply and marks it done (c->lock held). A call is completed
 * once: conn_fail and the reader may both get to it. */
static void pending_finish_locked(fe_conn *c, fe_pending *p, fe_reply_rx *r)
{
	if (!p->linked) {
		if (r->has_view)
			proto_view_free(&r->view);
		free(r->msg);
		return;
	}
	pending_unlink_locked(c, p);
	p->status = r->status;
	p->latched = r->latched;
	p->rx_len = r->rx_len;
	if (p->want_msg && r->status == 0) {
		p->msg = r->msg;
		p->hdr = r->hdr;
		if (r->has_view) {
			*p->view = r->view;
			p->view_ok = 1;
		}
	} else {
		if (r->has_view)
			proto_view_free(&r->view);
		free(r->msg);
	}
	if (p->heap) {
		/* A detached copy: nobody waits on p itself, only on the count. */
		if (r->status != 0)
			LOG_WARN("frontend", "async copy to host failed: %d", r->status);
		free(p);
		c->detached--;
	} else {
		atomic_store_explicit(&p->done, 1, memory_order_release);
	}
}

static void pending_complete(fe_conn *c, fe_pending *p, fe_reply_rx *r)
{
	pthread_mutex_lock(&c->lock);
	pending_finish_locked(c, p, r);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void conn_fail(fe_conn *c, int err)
{
	pthread_mutex_lock(&c->lock);
	if (!c->dead)
		LOG_ERROR("frontend", "connection to %s lost: %s (%s)", c->t->peer, transport_strerror(err),
			  transport_err_name(err)); /* a protocol code too: transport_err */
	c->dead = 1;
	pthread_cond_signal(&c->rx_cv);
	pthread_mutex_unlock(&c->lock);
	fe_reply_rx dead = {.status = FE_EDEAD};
	pthread_mutex_lock(&c->lock);
	while (c->pending)
		pending_finish_locked(c, c->pending, &dead);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Decodes a received frame's msgpack part and finds the call it answers. */
static void rx_classify(fe_conn *c, const transport_frame *f)
{
	c->rx_classified = 1;
	c->rx_cur = NULL;
	c->rx_view_ok = proto_view_reuse(&c->rx_view, &f->hdr, f->msg) == PROTO_OK;
	if (!c->rx_view_ok || (f->hdr.flags & PROTO_F_EVENT))
		return;
	if (c->rx_self && c->rx_self->seq == c->rx_view.seq) {
		c->rx_cur = c->rx_self;
		return;
	}
	pthread_mutex_lock(&c->lock);
	c->rx_cur = pending_find_locked(c, c->rx_view.seq);
	pthread_mutex_unlock(&c->lock);
}

/* Called by the transport, for frames with a payload, once the msgpack part is
 * in: the payload goes straight into the caller's buffer. */
static void *rx_payload_dest(void *ctx, const transport_frame *f)
{
	fe_conn *c = ctx;
	rx_classify(c, f);
	fe_pending *p = c->rx_cur;
	if (p && p->dest && f->hdr.payload_len == p->dest_len)
		return p->dest;
	return NULL;
}

/* Device printf output the server's driver flushed at a synchronisation: it
 * goes into this process's stdout as the driver's own would, before the reply of
 * the call that synchronised (it came first) completes that call. */
static void rx_devout(fe_conn *c)
{
	const void *p;
	size_t n;
	if (proto_arg_bin(&c->rx_view, 0, &p, &n) != PROTO_OK) {
		LOG_WARN("frontend", "malformed device output event from server");
		return;
	}
	if (n && fwrite(p, 1, n, stdout) != n)
		LOG_DEBUG("frontend", "device output: %zu bytes not written to stdout", n);
}

static _Atomic(fe_release_cb) release_cb;

void fe_conn_on_release(fe_release_cb fn) { atomic_store(&release_cb, fn); }

static void rx_event(fe_conn *c)
{
	uint64_t id;
	int op = c->rx_view.op;
	if ((op == PROTO_OP_HOSTFN || op == PROTO_OP_HOSTFN_FORGET) && proto_arg_u64(&c->rx_view, 0, &id) == PROTO_OK &&
	    c->hostfn)
		c->hostfn(c->hostfn_ctx, id, op == PROTO_OP_HOSTFN_FORGET);
	else if (op == PROTO_OP_DEVOUT)
		rx_devout(c);
	else if (op == PROTO_OP_RELEASE && proto_arg_u64(&c->rx_view, 0, &id) == PROTO_OK && atomic_load(&release_cb))
		atomic_load(&release_cb)(c, id);
	else if (op == PROTO_OP_PING)
		; /* an answer to the watchdog's ping: its arrival was the point */
	else
		LOG_WARN("frontend", "unexpected event op %u from server", c->rx_view.op);
}

/* Reads one frame and hands it out (role held). 0, or the error that killed
 * the channel (every pending call is then complete). */
static int rx_one(fe_conn *c)
{
	transport_frame f;
	c->rx_classified = 0;
	int err = transport_recv_frame(c->t, &f, rx_payload_dest, c);
	if (err) {
		conn_fail(c, err);
		return err;
	}
	atomic_fetch_add_explicit(&c->rx_frames, 1, memory_order_relaxed);
	if (!c->rx_classified)
		rx_classify(c, &f);
	if (!c->rx_view_ok) {
		transport_frame_free(&f);
		conn_fail(c, PROTO_EDECODE);
		return PROTO_EDECODE;
	}
	if (f.hdr.flags & PROTO_F_EVENT) {
		rx_event(c);
		transport_frame_free(&f);
		return 0;
	}
	fe_pending *p = c->rx_cur;
	int32_t status = 0, latched = 0;
	if (proto_reply_status(&c->rx_view, &status, &latched) != PROTO_OK)
		status = PROTO_EDECODE;
	if (latched) {
		int zero = 0;
		atomic_compare_exchange_strong(&c->latched, &zero, latched);
	}
	if (!p) {
		LOG_WARN("frontend", "reply for unknown call %llu dropped", (unsigned long long)c->rx_view.seq);
		transport_frame_free(&f);
		return 0;
	}
	if (status == 0 && p->dest && f.hdr.payload_len != p->dest_len)
		status = PROTO_EDECODE;
	fe_reply_rx r = {status, latched, f.msg, f.hdr, PROTO_HDR_SIZE + (uint64_t)f.hdr.hdr_len + f.hdr.payload_len};
	if (p == c->rx_self) {
		/* The holder completes it in its closing section, lock held anyway,
		 * and takes the decoded message with it rather than decode it again
		 * (the next frame's view gets a zone of its own). */
		if (p->view && status == 0) {
			r.view = c->rx_view;
			r.has_view = 1;
			memset(&c->rx_view, 0, sizeof(c->rx_view));
		}
		c->rx_got = r;
		c->rx_self_got = 1;
	} else {
		pending_complete(c, p, &r);
	}
	return 0;
}

/* rx_busy goes to 1 without c->lock: a waiter that misses it only spins once
 * more. It goes back to 0 under c->lock with a broadcast (role_release_locked),
 * so a waiter that saw it set and slept is woken. */
static int role_try(fe_conn *c)
{
	if (atomic_load_explicit(&c->rx_busy, memory_order_relaxed) || pthread_mutex_trylock(&c->rx_mu) != 0)
		return 0;
	atomic_store(&c->rx_busy, 1);
	return 1;
}

static void role_take(fe_conn *c)
{
	pthread_mutex_lock(&c->rx_mu);
	atomic_store(&c->rx_busy, 1);
}

/* Frames still due with no caller to read them: the receiver thread's turn. */
static int rx_due_locked(fe_conn *c) { return !atomic_load(&c->rx_want) && (c->pending || c->events); }

/* c->lock held; the caller unlocks rx_mu after c->lock. */
static void role_release_locked(fe_conn *c)
{
	atomic_store(&c->rx_busy, 0);
	pthread_cond_broadcast(&c->cond); /* waiters that slept while it was held */
}

/* The receiver thread may be needed now (c->lock held). */
static void rx_wake_locked(fe_conn *c)
{
	if (c->rx_parked && rx_due_locked(c))
		pthread_cond_signal(&c->rx_cv);
}

static void role_release(fe_conn *c)
{
	pthread_mutex_lock(&c->lock);
	role_release_locked(c);
	rx_wake_locked(c);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->rx_mu);
}

static void *rx_main(void *arg)
{
	fe_conn *c = arg;
	pthread_setname_np(pthread_self(), "rg-rx");
	for (;;) {
		pthread_mutex_lock(&c->lock);
		while (!c->closing && !c->dead && !rx_due_locked(c)) {
			c->rx_parked = 1;
			pthread_cond_wait(&c->rx_cv, &c->lock);
			c->rx_parked = 0;
		}
		int stop = c->closing || c->dead;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			return NULL;
		role_take(c);
		/* A caller may have read what was due while we waited for the role. */
		pthread_mutex_lock(&c->lock);
		int due = rx_due_locked(c);
		pthread_mutex_unlock(&c->lock);
		int err = due ? rx_one(c) : 0;
		role_release(c);
		if (err)
			return NULL;
	}
}

/* ---- liveness (live.h's ops; the watchdog thread) ---- */

static int live_busy(void *ctx)
{
	fe_conn *c = ctx;
	pthread_mutex_lock(&c->lock);
	int waiting = c->pending != NULL; /* sync calls and detached copies */
	pthread_mutex_unlock(&c->lock);
	return waiting || fe_sendq_busy(c->sq);
}

static uint64_t live_progress(void *ctx)
{
	fe_conn *c = ctx;
	return transport_progress(c->t) + atomic_load_explicit(&c->rx_frames, memory_order_relaxed);
}

/* Queued like an async call (behind whatever is being written: a send that
 * is stuck is judged by its own progress), never written here. The server
 * answers with a ping event, which whoever reads takes as any frame. Seq 0:
 * nothing waits for it by number. */
static void live_ping(void *ctx)
{
	fe_conn *c = ctx;
	if (!atomic_load(&c->pings))
		return; /* before the hello, the server refuses every other op */
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_PING, 0, 0);
	if (proto_msg_finish(&m, PROTO_F_ASYNC, 0) == PROTO_OK)
		fe_sendq_post_nowait(c->sq, m.data, m.len);
	proto_msg_free(&m);
}

static void live_dead(void *ctx, double quiet_s, double timeout_s)
{
	fe_conn *c = ctx;
	pthread_mutex_lock(&c->lock);
	if (!c->dead)
		LOG_ERROR("frontend",
			  "no sign of life from %s for %.1f s while a call waited (REMOTE_GPU_TIMEOUT=%g): server "
			  "stopped, dead or unreachable; every call on this device fails from now on "
			  "(cudaErrorDevicesUnavailable)",
			  c->t->peer, quiet_s, timeout_s);
	c->dead = 1;
	pthread_mutex_unlock(&c->lock);
	conn_fail(c, TRANSPORT_ETIMEDOUT); /* completes every waiting call */
	transport_shutdown(c->t);          /* wakes threads blocked in send or recv */
}

static const fe_live_ops live_ops = {live_busy, live_progress, live_ping, live_dead};

void fe_conn_enable_pings(fe_conn *c) { atomic_store(&c->chan->pings, 1); }

int fe_conn_open(const transport_addr *a, fe_hostfn_cb hostfn, void *hostfn_ctx, fe_conn **out)
{
	fe_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return TRANSPORT_ENOMEM;
	/* Bounded by REMOTE_GPU_TIMEOUT too: the watchdog starts only once there
	 * is a connection to watch, and an unreachable host must not hold the
	 * program for the kernel's SYN retries. */
	double t = fe_live_timeout();
	unsigned ms = (unsigned)(t * 1000 + 0.5);
	c->ticketed = !strcmp(a->scheme, "rdma+tls");
	int err = c->ticketed ? fe_ticket_connect(a, ms, &c->t) : transport_connect_within(a, ms, &c->t);
	if (err) {
		free(c);
		return err;
	}
	if ((err = fe_sendq_open(c->t, &c->sq)) != 0) {
		transport_close(c->t);
		free(c);
		return err;
	}
	c->chan = c;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_mutex_init(&c->rx_mu, NULL);
	pthread_cond_init(&c->rx_cv, NULL);
	atomic_init(&c->seq, 1);
	atomic_init(&c->latched, 0);
	c->hostfn = hostfn;
	c->hostfn_ctx = hostfn_ctx;
	if (pthread_create(&c->rx, NULL, rx_main, c) != 0) {
		fe_sendq_close(c->sq);
		transport_close(c->t);
		free(c);
		return TRANSPORT_ENOMEM;
	}
	if ((err = fe_live_start(&live_ops, c, &c->live)) != 0) {
		fe_conn_close(c);
		return err;
	}
	*out = c;
	return 0;
}

fe_conn *fe_conn_view(fe_conn *c, uint32_t dev)
{
	if (dev == 0)
		return c->chan;
	fe_conn *v = calloc(1, sizeof(*v));
	if (v)
		v->chan = c->chan, v->dev = dev;
	return v;
}

int fe_conn_same(const fe_conn *a, const fe_conn *b) { return a && b && a->chan == b->chan; }

uint32_t fe_conn_dev(const fe_conn *c) { return c->dev; }

void fe_conn_close(fe_conn *c)
{
	if (c->chan != c) { /* a view: the channel stays */
		free(c);
		return;
	}
	if (c->ext_close)
		c->ext_close(c->ext); /* its threads may wait for replies on this channel */
	fe_live_stop(c->live); /* first: it uses the queue and the transport */
	fe_sendq_close(c->sq);
	pthread_mutex_lock(&c->lock);
	c->closing = 1;
	pthread_cond_signal(&c->rx_cv);
	pthread_mutex_unlock(&c->lock);
	transport_shutdown(c->t);
	pthread_join(c->rx, NULL);
	transport_close(c->t);
	proto_view_free(&c->rx_view);
	free(c);
}

const char *fe_conn_peer(fe_conn *c) { return c->chan->t->peer; }

void **fe_conn_ext(fe_conn *c, void (*close_fn)(void *ext))
{
	c->chan->ext_close = close_fn;
	return &c->chan->ext;
}

int fe_conn_ticketed(fe_conn *c) { return c->chan->ticketed; }

uint64_t fe_conn_next_seq(fe_conn *c) { return atomic_fetch_add(&c->chan->seq, 1); }

uint64_t fe_conn_peek_seq(fe_conn *c) { return atomic_load(&c->chan->seq); }

/* c: the channel; dev: the device the frame is for (a request's status field,
 * proto.h). */
static int conn_send(fe_conn *c, uint32_t dev, proto_msg *m, uint16_t flags, const void *payload, uint64_t len)
{
	m->status = (int32_t)dev;
	int err = proto_msg_finish(m, flags, len);
	if (err == 0)
		fe_obs_send(m->data, m->len, len);
	if (err == 0)
		err = (flags & PROTO_F_ASYNC) ? fe_sendq_post(c->sq, m->data, m->len, payload, len)
					      : fe_sendq_write(c->sq, m->data, m->len, payload, len);
	proto_msg_free(m);
	return err;
}

static fe_conn_before_fn before_send;

void fe_conn_on_before_send(fe_conn_before_fn fn) { before_send = fn; }

int fe_conn_post(fe_conn *c, proto_msg *m, const void *payload, uint64_t len)
{
	uint32_t dev = c->dev;
	c = c->chan;
	if (atomic_load_explicit(&c->dead, memory_order_relaxed)) {
		proto_msg_free(m);
		return FE_EDEAD;
	}
	if (before_send)
		before_send(m->op);
	int err = conn_send(c, dev, m, PROTO_F_ASYNC, payload, len);
	if (err) {
		conn_fail(c, err);
		return FE_EDEAD;
	}
	return 0;
}

static int conn_register(fe_conn *c, fe_pending *p)
{
	pthread_mutex_lock(&c->lock);
	int dead = c->dead;
	if (!dead) {
		p->next = c->pending;
		c->pending = p;
		p->linked = 1;
		if (p->heap)
			c->detached++;
		/* Nobody waits for a detached reply: the receiver thread reads it. */
		if (p->heap)
			rx_wake_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	return dead ? FE_EDEAD : 0;
}

int fe_conn_begin(fe_conn *c, proto_msg *m, const void *payload, uint64_t plen, fe_pending *p)
{
	uint32_t dev = c->dev;
	c = c->chan;
	if (before_send)
		before_send(m->op);
	p->seq = m->seq;
	atomic_init(&p->done, 0);
	p->msg = NULL;
	p->rx_len = 0;
	if (!p->heap)
		fe_obs_round_trip();
	int err = conn_register(c, p);
	if (err) {
		proto_msg_free(m);
		if (p->heap)
			free(p);
		return err;
	}
	err = conn_send(c, dev, m, 0, payload, plen);
	if (err) {
		conn_fail(c, err); /* completes p with FE_EDEAD */
		return FE_EDEAD;
	}
	return 0;
}

static int is_done(const fe_pending *p) { return atomic_load_explicit(&p->done, memory_order_acquire); }

/* A call is two sections under c->lock: its registration, and its end, which
 * also completes the reply the caller read itself and gives the role back. */
int fe_conn_wait(fe_conn *c, fe_pending *p)
{
	c = c->chan;
	atomic_fetch_add(&c->rx_want, 1);
	int role = !is_done(p) && role_try(c);
	rg_spin sp;
	rg_spin_start(&sp, SPIN_NS);
	while (!role && !is_done(p)) {
		/* Another thread reads: it completes p, or lets go of the role. */
		if (rg_spin_on(&sp)) {
			rg_cpu_relax();
		} else {
			pthread_mutex_lock(&c->lock);
			while (!is_done(p) && atomic_load(&c->rx_busy))
				pthread_cond_wait(&c->cond, &c->lock);
			pthread_mutex_unlock(&c->lock);
		}
		if (!is_done(p))
			role = role_try(c);
	}
	if (role) {
		c->rx_self = p;
		c->rx_self_got = 0;
		while (!is_done(p) && !c->rx_self_got && rx_one(c) == 0)
			;
		c->rx_self = NULL;
	}
	pthread_mutex_lock(&c->lock);
	if (role && c->rx_self_got)
		pending_finish_locked(c, p, &c->rx_got);
	atomic_fetch_sub(&c->rx_want, 1);
	if (role)
		role_release_locked(c);
	rx_wake_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (role)
		pthread_mutex_unlock(&c->rx_mu);
	fe_obs_received(p->rx_len);
	return p->status;
}

int fe_conn_call(fe_conn *c, proto_msg *m, const void *payload, uint64_t plen, void *dest, uint64_t dest_len,
		 fe_reply *r)
{
	fe_pending p = {.dest = dest, .dest_len = dest_len, .want_msg = r != NULL, .view = r ? &r->view : NULL};
	int err = fe_conn_begin(c, m, payload, plen, &p);
	if (err)
		return err;
	int st = fe_conn_wait(c, &p);
	if (r && st == 0) {
		r->msg = p.msg;
		/* Decoded already when this thread read its own reply. */
		if (p.view_ok)
			return st;
		if (proto_view_init(&r->view, &p.hdr, p.msg) != PROTO_OK) {
			free(p.msg);
			r->msg = NULL; /* nothing for the caller to free */
			return PROTO_EDECODE;
		}
	}
	return st;
}

void fe_reply_free(fe_reply *r)
{
	proto_view_free(&r->view);
	free(r->msg);
	r->msg = NULL;
}

int fe_conn_begin_detached(fe_conn *c, proto_msg *m, void *dest, uint64_t dest_len)
{
	fe_pending *p = calloc(1, sizeof(*p));
	if (!p) {
		proto_msg_free(m);
		return PROTO_ENOMEM;
	}
	p->dest = dest;
	p->dest_len = dest_len;
	p->heap = 1;
	/* Its reply lands later, on the receiver thread: counted now, as the
	 * data asked for and a frame header. */
	fe_obs_received(PROTO_HDR_SIZE + dest_len);
	/* On failure p was freed by fe_conn_begin or completed by conn_fail. */
	return fe_conn_begin(c, m, NULL, 0, p);
}

int fe_conn_drain_detached(fe_conn *c)
{
	c = c->chan;
	/* Every query drains: without copies in flight, no lock. A copy this
	 * thread started is counted here already (it was registered first). */
	if (atomic_load(&c->detached) == 0)
		return atomic_load(&c->dead) ? FE_EDEAD : 0;
	pthread_mutex_lock(&c->lock);
	while (c->detached > 0 && !c->dead)
		pthread_cond_wait(&c->cond, &c->lock);
	int dead = c->dead;
	pthread_mutex_unlock(&c->lock);
	return dead ? FE_EDEAD : 0;
}

int fe_conn_detached_pending(fe_conn *c) { return atomic_load(&c->chan->detached) > 0; }

static int detached_before_locked(fe_conn *c, uint64_t seq)
{
	for (fe_pending *p = c->pending; p; p = p->next)
		if (p->heap && p->seq < seq)
			return 1;
	return 0;
}

int fe_conn_drain_detached_before(fe_conn *c, uint64_t seq)
{
	c = c->chan;
	pthread_mutex_lock(&c->lock);
	while (!c->dead && detached_before_locked(c, seq))
		pthread_cond_wait(&c->cond, &c->lock);
	int dead = c->dead;
	pthread_mutex_unlock(&c->lock);
	return dead ? FE_EDEAD : 0;
}

void fe_conn_expect_events(fe_conn *c)
{
	c = c->chan;
	pthread_mutex_lock(&c->lock);
	/* For good: a host function captured in a graph fires at every launch. */
	c->events = 1;
	rx_wake_locked(c);
	pthread_mutex_unlock(&c->lock);
}

int fe_conn_take_latched(fe_conn *c) { return atomic_exchange(&c->chan->latched, 0); }

int fe_conn_pin(fe_conn *c, void *p, size_t len, transport_mr **mr)
{
	c = c->chan;
	*mr = NULL;
	if (!(transport_caps(c->t) & TRANSPORT_CAP_REG_MEM))
		return 0;
	return transport_reg_mem(c->t, p, len, mr);
}

void fe_conn_unpin(fe_conn *c, transport_mr *mr)
{
	c = c->chan;
	if (mr)
		transport_dereg_mem(c->t, mr);
}

int fe_conn_region_share(fe_conn *c, int fd, uint64_t len, uint32_t *id)
{
	return transport_region_share(c->chan->t, fd, len, id);
}

unsigned fe_conn_caps(const fe_conn *c) { return transport_caps(c->chan->t); }
