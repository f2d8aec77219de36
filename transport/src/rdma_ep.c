/*
 * The rdma connection core, shared by the client (rdma_client.c) and the server
 * (rdma_server.c): verbs resources, control messages with credits, the sending
 * of frames (inline, zero-copy segments, bounce ring) and the receive state
 * machine (inline bytes, RDMA READs into the destination or the landing ring).
 * The protocol is described in rdma_int.h; who waits how lives in the halves.
 *
 * Send queue bookkeeping. Every work request gets a sequence number (its
 * wr_id) and a record in sqe[]. Send completions arrive in posting order on an
 * RC queue pair, so a completion for number n means every request before n is
 * done too: sends are signaled only now and then (every 8th, or when slots run
 * short), reads and keepalives always (each needs its own handling). Receives
 * carry WR_RECV | buffer index instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdma_int.h"
#include "rg_log.h"

#define WR_RECV (1ull << 63)
enum { SQE_SEND = 1, SQE_READ, SQE_KA };

#define MSG_HDR (sizeof(rmsg))
#define FRAME_HDR (MSG_HDR + PROTO_HDR_SIZE)
#define ALIGN8(x) (((x) + 7u) & ~(size_t)7u)

static int post_recv(rdma_ep *ep, unsigned idx);
static void repost(rdma_ep *ep, unsigned idx);

/* ---- configuration ---- */

static rdma_conf_t conf;
static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

static int env_int(const char *name, int def, int lo, int hi)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi) {
		LOG_WARN("transport", "%s=%s ignored (expected %d..%d)", name, s, lo, hi);
		return def;
	}
	return (int)v;
}

static void conf_load(void)
{
	/* Both sides poll on for 50 us after activity: a program's next call
	 * usually follows within that, and a completion-channel wake-up costs
	 * several system calls (tens of microseconds under emulation). */
	conf.spin_us = env_int("REMOTE_GPU_RDMA_SPIN_US", 50, 0, 10000000);
	conf.server_spin_us = env_int("REMOTE_GPU_RDMA_SERVER_SPIN_US", 50, 0, 10000000);
	conf.keepalive_ms = env_int("REMOTE_GPU_RDMA_KEEPALIVE_MS", 2000, 50, 3600000);
	conf.timeout_ms = env_int("REMOTE_GPU_RDMA_TIMEOUT_MS", 30000, 100, 86400000);
	conf.connect_ms = env_int("REMOTE_GPU_RDMA_CONNECT_MS", 10000, 100, 600000);
	/* 4.096 us * 2^15 = 134 ms per try, 7 tries: a dead peer is found about
	 * 1 s after the first unanswered packet. Not 7 retries: Soft-RoCE (rxe)
	 * reads retry_cnt 7 as "forever", as RNR retries are. */
	conf.ack_timeout = env_int("REMOTE_GPU_RDMA_ACK_TIMEOUT", 15, 1, 31);
	conf.retry_count = env_int("REMOTE_GPU_RDMA_RETRY", 6, 0, 6);
}

const rdma_conf_t *rdma_conf(void)
{
	pthread_once(&conf_once, conf_load);
	return &conf;
}

uint64_t rdma_now_ns(void) { return rg_clock_coarse_ns(); }

const char *rdma_wc_str(int status) { return rdma_v.wc_status_str((enum ibv_wc_status)status); }

/* ---- setup / teardown ---- */

static void *alloc_reg(rdma_ep *ep, size_t len, int access, struct ibv_mr **mr)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len) != 0)
		return NULL;
	memset(p, 0, len);
	*mr = rdma_v.reg_mr(ep->pd, p, len, access);
	if (!*mr) {
		LOG_WARN("transport", "rdma: cannot register %zu bytes: %m", len);
		free(p);
		return NULL;
	}
	return p;
}

static void free_reg(void **p, struct ibv_mr **mr)
{
	if (*mr)
		rdma_v.dereg_mr(*mr);
	free(*p);
	*p = NULL;
	*mr = NULL;
}

int rdma_ep_init(rdma_ep *ep, struct rdma_cm_id *id)
{
	pthread_condattr_t ca;

	rdma_conf();
	pthread_mutex_init(&ep->mu, NULL);
	pthread_mutex_init(&ep->send_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep->cv, &ca);
	pthread_condattr_destroy(&ca);
	rdma_regs_init(&ep->regs);
	ep->id = id;
	ep->verbs = id->verbs;
	ep->rx.landing_free = (1u << RDMA_NLANDING) - 1;
	ep->last_peer_ns = ep->last_msg_ns = rdma_now_ns();

	if (!(ep->pd = rdma_v.alloc_pd(ep->verbs))) {
		LOG_WARN("transport", "rdma: ibv_alloc_pd: %m");
		return TRANSPORT_ENOMEM;
	}
	if (!(ep->ch = rdma_v.create_comp_channel(ep->verbs))) {
		LOG_WARN("transport", "rdma: ibv_create_comp_channel: %m");
		return TRANSPORT_ENOMEM;
	}
	fcntl(ep->ch->fd, F_SETFL, fcntl(ep->ch->fd, F_GETFL) | O_NONBLOCK);
	if (!(ep->cq = rdma_v.create_cq(ep->verbs, RDMA_NRECV + RDMA_SQ_DEPTH + 8, ep, ep->ch, 0))) {
		LOG_WARN("transport", "rdma: ibv_create_cq: %m");
		return TRANSPORT_ENOMEM;
	}
	struct ibv_qp_init_attr qa = {
		.send_cq = ep->cq,
		.recv_cq = ep->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = RDMA_SQ_DEPTH, .max_recv_wr = RDMA_NRECV, .max_send_sge = 1, .max_recv_sge = 1,
			.max_inline_data = RDMA_INLINE_WANT},
		.sq_sig_all = 0,
	};
	/* Inline sends (the bytes travel in the work request: no DMA read of the
	 * slot, no key lookup) where the device allows; without them elsewhere. */
	if (rdma_v.create_qp(id, ep->pd, &qa)) {
		qa.cap.max_inline_data = 0;
		if (rdma_v.create_qp(id, ep->pd, &qa)) {
			LOG_WARN("transport", "rdma: rdma_create_qp: %m");
			return TRANSPORT_ENOMEM;
		}
	}
	ep->qp = id->qp;
	ep->max_inline = qa.cap.max_inline_data;
	ep->rbuf = alloc_reg(ep, (size_t)RDMA_NRECV * RDMA_MSG_SIZE, IBV_ACCESS_LOCAL_WRITE, &ep->rbuf_mr);
	ep->sbuf = alloc_reg(ep, (size_t)RDMA_NSEND * RDMA_MSG_SIZE, IBV_ACCESS_LOCAL_WRITE, &ep->sbuf_mr);
	/* The one word the peer may write (keepalives land here, and nothing
	 * reads it); our own source word sits next to it. */
	ep->ka = alloc_reg(ep, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &ep->ka_mr);
	if (!ep->rbuf || !ep->sbuf || !ep->ka)
		return TRANSPORT_ENOMEM;
	for (unsigned i = 0; i < RDMA_NRECV; i++)
		if (post_recv(ep, i) != 0)
			return TRANSPORT_EIO;
	return TRANSPORT_OK;
}

void rdma_ep_fill_hello(rdma_ep *ep, rhello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = RDMA_HELLO_MAGIC;
	h->version = RDMA_PROTO_VERSION;
	h->credits = RDMA_NRECV;
	h->msg_size = RDMA_MSG_SIZE;
	h->ka_addr = (uintptr_t)ep->ka;
	h->ka_rkey = ep->ka_mr->rkey;
}

int rdma_ep_hello(rdma_ep *ep, const void *priv, size_t len)
{
	rhello h;
	if (!priv || len < sizeof(h)) {
		LOG_WARN("transport", "rdma: %s: no hello in the connection data", ep->conn->peer);
		return TRANSPORT_ECONNECT;
	}
	memcpy(&h, priv, sizeof(h));
	if (h.magic != RDMA_HELLO_MAGIC || h.version != RDMA_PROTO_VERSION) {
		LOG_WARN("transport", "rdma: %s: peer is not a remote-gpu rdma endpoint of version %d (magic %08x, version %u)",
			 ep->conn->peer, RDMA_PROTO_VERSION, h.magic, h.version);
		return TRANSPORT_ECONNECT;
	}
	if (h.credits < 2 || h.msg_size < 1024) {
		LOG_WARN("transport", "rdma: %s: peer offers %u buffers of %u bytes: too few or too small",
			 ep->conn->peer, h.credits, h.msg_size);
		return TRANSPORT_ECONNECT;
	}
	pthread_mutex_lock(&ep->mu);
	ep->credits = h.credits;
	ep->peer_msg_size = h.msg_size < RDMA_MSG_SIZE ? h.msg_size : RDMA_MSG_SIZE;
	ep->peer_ka_addr = h.ka_addr;
	ep->peer_ka_rkey = h.ka_rkey;
	ep->last_peer_ns = ep->last_msg_ns = rdma_now_ns();
	pthread_mutex_unlock(&ep->mu);
	return TRANSPORT_OK;
}

void rdma_ep_destroy_qp(rdma_ep *ep)
{
	if (ep->qp) {
		rdma_v.destroy_qp(ep->id);
		ep->qp = NULL;
	}
	if (ep->cq) {
		/* ibv_destroy_cq waits until every event it reported is acked; with
		 * the QP gone no new one can come. */
		rdma_ep_channel_drain(ep);
		rdma_v.destroy_cq(ep->cq);
		ep->cq = NULL;
	}
	free_reg((void **)&ep->rbuf, &ep->rbuf_mr);
	free_reg((void **)&ep->sbuf, &ep->sbuf_mr);
	free_reg((void **)&ep->bounce, &ep->bounce_mr);
	free_reg((void **)&ep->landing, &ep->landing_mr);
	free_reg((void **)&ep->ka, &ep->ka_mr);
}

void rdma_ep_free(rdma_ep *ep)
{
	rdma_ep_destroy_qp(ep);
	if (ep->ch) {
		rdma_v.destroy_comp_channel(ep->ch);
		ep->ch = NULL;
	}
	rdma_regs_destroy(&ep->regs);
	if (ep->pd) {
		rdma_v.dealloc_pd(ep->pd);
		ep->pd = NULL;
	}
	free(ep->rx.f.msg);
	ep->rx.f.msg = NULL;
	free(ep->txf);
	ep->txf = NULL;
	pthread_mutex_destroy(&ep->mu);
	pthread_mutex_destroy(&ep->send_lock);
	pthread_cond_destroy(&ep->cv);
}

void rdma_ep_fail(rdma_ep *ep, int err)
{
	if (!ep->err) {
		ep->err = err;
		if (err != TRANSPORT_ECLOSED)
			LOG_INFO("transport", "rdma: %s: %s", ep->conn->peer, transport_strerror(err));
	}
	if (!ep->qp_dead && ep->qp) {
		ep->qp_dead = 1;
		/* Moves the QP to the error state (every outstanding request is
		 * flushed, waiters see the error) and tells the peer. */
		if (rdma_v.disconnect(ep->id) != 0) {
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
			rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
		}
	}
	pthread_cond_broadcast(&ep->cv);
}

/* ---- send queue ---- */

static int sq_room(const rdma_ep *ep, unsigned n) { return ep->sq_posted - ep->sq_done + n <= RDMA_SQ_DEPTH; }

static int sq_post(rdma_ep *ep, struct ibv_send_wr *wr, rdma_sqe e)
{
	struct ibv_send_wr *bad;
	wr->wr_id = ep->sq_posted;
	ep->sqe[ep->sq_posted % RDMA_SQ_DEPTH] = e;
	int r = ibv_post_send(ep->qp, wr, &bad);
	if (r) {
		LOG_WARN("transport", "rdma: %s: ibv_post_send: %s", ep->conn->peer, strerror(r));
		rdma_ep_fail(ep, TRANSPORT_EIO);
		return TRANSPORT_EIO;
	}
	ep->sq_posted++;
	return 0;
}

static int slot_free(const rdma_ep *ep) { return ep->s_posted - ep->s_done < RDMA_NSEND && sq_room(ep, 2); }

/* Posts the message in the next send slot (already filled but for the
 * counters). The caller checked slot_free and the credits. */
static int msg_post(rdma_ep *ep, uint32_t len)
{
	uint8_t *slot = ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE;
	rmsg *m = (rmsg *)slot;
	int give = ep->owed < 65535 ? ep->owed : 65535;

	m->credits = (uint16_t)give;
	m->acked = ep->rx_acked;
	if (ep->credits == 1) { /* only a CTRL gets here with one credit */
		m->flags |= RMF_NEED;
		ep->need_sent = 1;
	}
	struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = len, .lkey = ep->sbuf_mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
	unsigned inflight = ep->s_posted + 1 - ep->s_done;
	if ((ep->s_posted & 7) == 7 || inflight >= RDMA_NSEND / 2 || !sq_room(ep, RDMA_SQ_DEPTH / 2))
		wr.send_flags = IBV_SEND_SIGNALED;
	if (len <= ep->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	if (sq_post(ep, &wr, (rdma_sqe){.kind = SQE_SEND, .slot_seq = ep->s_posted}) != 0)
		return TRANSPORT_EIO;
	ep->s_posted++;
	ep->owed -= give;
	ep->ack_sent = ep->rx_acked;
	ep->credits--;
	return 0;
}

void rdma_ep_flush_ctrl(rdma_ep *ep)
{
	if (ep->err || ep->peer_gone || !ep->qp || !ep->credits)
		return;
	int due = ep->rx_acked != ep->ack_sent || ep->owed >= RDMA_NRECV / 2 || (ep->peer_needs && ep->owed > 0);
	if (!due || !slot_free(ep))
		return;
	rmsg *m = (rmsg *)(ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE);
	memset(m, 0, sizeof(*m));
	m->type = RM_CTRL;
	if (msg_post(ep, sizeof(*m)) == 0) {
		ep->peer_needs = 0;
		ep->st.ctrl_sent++;
	}
}

/* ---- receive buffers ---- */

static int post_recv(rdma_ep *ep, unsigned idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(ep->rbuf + (size_t)idx * RDMA_MSG_SIZE),
		.length = RDMA_MSG_SIZE,
		.lkey = ep->rbuf_mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV | idx, .sg_list = &sge, .num_sge = 1}, *bad;
	int r = ibv_post_recv(ep->qp, &wr, &bad);
	if (r)
		LOG_WARN("transport", "rdma: %s: ibv_post_recv: %s", ep->conn->peer, strerror(r));
	return r;
}

/* A receive buffer is consumed: give it back to the peer. */
static void repost(rdma_ep *ep, unsigned idx)
{
	if (ep->err || ep->qp_dead)
		return;
	if (post_recv(ep, idx) != 0) {
		rdma_ep_fail(ep, TRANSPORT_EIO);
		return;
	}
	ep->owed++;
}

/* ---- completions ---- */

static void wc_error(rdma_ep *ep, const struct ibv_wc *wc)
{
	/* Flushes follow a QP error we know about (shutdown, disconnect, an
	 * earlier failure): they say nothing new. */
	if (wc->status == IBV_WC_WR_FLUSH_ERR && (ep->err || ep->peer_gone || ep->qp_dead)) {
		if (!(wc->wr_id & WR_RECV) && wc->wr_id < ep->sq_posted && ep->sqe[wc->wr_id % RDMA_SQ_DEPTH].kind == SQE_KA)
			ep->ka_inflight = 0;
		return;
	}
	LOG_WARN("transport", "rdma: %s: %s failed: %s", ep->conn->peer,
		 (wc->wr_id & WR_RECV) ? "receive" : "send/read", rdma_wc_str(wc->status));
	rdma_ep_fail(ep, TRANSPORT_EIO);
}

static void on_recv(rdma_ep *ep, unsigned idx, uint32_t len)
{
	const rmsg *m = (const rmsg *)(ep->rbuf + (size_t)idx * RDMA_MSG_SIZE);
	uint64_t now = rdma_now_ns();

	if (len < MSG_HDR || m->type < RM_FRAME || m->type > RM_BATCH) {
		LOG_WARN("transport", "rdma: %s: malformed control message (%u bytes, type %u)", ep->conn->peer, len,
			 len ? m->type : 0);
		rdma_ep_fail(ep, TRANSPORT_EIO);
		return;
	}
	ep->last_peer_ns = ep->last_msg_ns = now;
	if (m->credits) {
		ep->credits += m->credits;
		ep->need_sent = 0;
	}
	if ((int32_t)(m->acked - ep->peer_acked) > 0)
		ep->peer_acked = m->acked;
	if (m->flags & RMF_NEED)
		ep->peer_needs = 1;
	if (m->type == RM_CTRL) {
		repost(ep, idx);
		return;
	}
	if (ep->rq_n == RDMA_NRECV) { /* cannot happen: one entry per buffer */
		rdma_ep_fail(ep, TRANSPORT_EIO);
		return;
	}
	unsigned t = (ep->rq_head + ep->rq_n++) % RDMA_NRECV;
	ep->rq[t] = (uint16_t)idx;
	ep->rq_len[t] = len;
}

/* Every request up to and including seq is complete. */
static void on_send_done(rdma_ep *ep, uint64_t seq)
{
	for (uint64_t s = ep->sq_done; s <= seq && s < ep->sq_posted; s++) {
		rdma_sqe *e = &ep->sqe[s % RDMA_SQ_DEPTH];
		switch (e->kind) {
		case SQE_SEND:
			if ((int32_t)(e->slot_seq + 1 - ep->s_done) > 0)
				ep->s_done = e->slot_seq + 1;
			break;
		case SQE_READ:
			ep->rx.rd[e->idx].done = 1;
			ep->last_peer_ns = rdma_now_ns();
			break;
		case SQE_KA:
			ep->ka_inflight = 0;
			ep->last_peer_ns = rdma_now_ns();
			break;
		}
		e->kind = 0;
	}
	if (seq + 1 > ep->sq_done)
		ep->sq_done = seq + 1;
}

int rdma_ep_poll(rdma_ep *ep)
{
	struct ibv_wc wc[32];
	int n, got = 0;

	if (!ep->cq)
		return 0;
	while ((n = ibv_poll_cq(ep->cq, 32, wc)) > 0) {
		got = 1;
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				wc_error(ep, &wc[i]);
			else if (wc[i].wr_id & WR_RECV)
				on_recv(ep, (unsigned)(wc[i].wr_id & 0xffff), wc[i].byte_len);
			else
				on_send_done(ep, wc[i].wr_id);
		}
		if (n < 32)
			break;
	}
	if (n < 0) {
		LOG_WARN("transport", "rdma: %s: ibv_poll_cq failed", ep->conn->peer);
		rdma_ep_fail(ep, TRANSPORT_EIO);
		return -1;
	}
	if (got) {
		rdma_ep_flush_ctrl(ep);
		pthread_cond_broadcast(&ep->cv);
	}
	return got;
}

int rdma_ep_arm(rdma_ep *ep)
{
	if (!ep->cq || ep->cq_armed)
		return 0;
	if (ibv_req_notify_cq(ep->cq, 0) != 0)
		return -1;
	ep->cq_armed = 1;
	return 0;
}

void rdma_ep_channel_drain(rdma_ep *ep)
{
	struct ibv_cq *cq;
	void *ctx;
	while (ep->ch && rdma_v.get_cq_event(ep->ch, &cq, &ctx) == 0) {
		rdma_v.ack_cq_events(cq, 1);
		ep->cq_armed = 0;
	}
}

/* ---- liveness ---- */

int rdma_ep_check(rdma_ep *ep, uint64_t since)
{
	const rdma_conf_t *cf = rdma_conf();
	uint64_t now = rdma_now_ns();

	if (ep->err)
		return ep->err;
	if (!ep->qp || ep->qp_dead || ep->peer_gone)
		return 0;
	if (!ep->ka_inflight && ep->peer_ka_rkey && now - ep->last_peer_ns >= (uint64_t)cf->keepalive_ms * 1000000ull &&
	    sq_room(ep, 1)) {
		/* An 8-byte RDMA WRITE the peer's NIC must acknowledge: fails
		 * (retries exhausted) only when the peer host or link is gone. */
		struct ibv_sge sge = {.addr = (uintptr_t)&ep->ka[1], .length = 8, .lkey = ep->ka_mr->lkey};
		struct ibv_send_wr wr = {
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = {.remote_addr = ep->peer_ka_addr, .rkey = ep->peer_ka_rkey},
		};
		ep->ka[1]++;
		if (sq_post(ep, &wr, (rdma_sqe){.kind = SQE_KA}) == 0) {
			ep->ka_inflight = 1;
			ep->st.keepalives++;
			LOG_DEBUG("transport", "rdma: %s: quiet for %llu ms: keepalive", ep->conn->peer,
				  (unsigned long long)((now - ep->last_peer_ns) / 1000000));
		}
	}
	if (since) {
		uint64_t from = ep->last_msg_ns > since ? ep->last_msg_ns : since;
		if (now - from >= (uint64_t)cf->timeout_ms * 1000000ull) {
			LOG_WARN("transport", "rdma: %s: no word from the peer for %d ms while sending", ep->conn->peer,
				 cf->timeout_ms);
			rdma_ep_fail(ep, TRANSPORT_ETIMEDOUT);
			return TRANSPORT_ETIMEDOUT;
		}
	}
	return ep->err;
}

/* ---- sending ---- */

/* A cursor over the caller's iovecs. */
typedef struct cursor {
	const struct iovec *iov;
	int n, i;
	size_t off;
} cursor;

/* The next contiguous piece, at most max bytes; 0 at the end. */
static size_t cur_piece(cursor *c, size_t max, const uint8_t **p)
{
	while (c->i < c->n && c->off == c->iov[c->i].iov_len) {
		c->i++;
		c->off = 0;
	}
	if (c->i == c->n)
		return 0;
	size_t k = c->iov[c->i].iov_len - c->off;
	if (k > max)
		k = max;
	*p = (const uint8_t *)c->iov[c->i].iov_base + c->off;
	c->off += k;
	return k;
}

static size_t cur_copy(cursor *c, void *dst, size_t n)
{
	size_t done = 0;
	const uint8_t *p;
	size_t k;
	while (done < n && (k = cur_piece(c, n - done, &p)) > 0) {
		memcpy((uint8_t *)dst + done, p, k);
		done += k;
	}
	return done;
}

/* The frame being sent: its messages are built in tx (unregistered) and
 * copied into a send slot when posted, so a CTRL can take a slot meanwhile. */
struct txf {
	rdma_ep *ep;
	rdma_wait_fn wait;
	uint8_t tx[RDMA_MSG_SIZE];
	size_t used, segoff, cap;
	uint32_t nsegs;
	int started;    /* the FRAME message went out */
	int posted_any; /* anything of this frame went out (a failure is then EIO) */
};

/* Sends the message in t->tx, waiting for two credits (one stays in reserve
 * for CTRLs) and a slot. Called with mu held. */
static int tx_post(txf *t, int last)
{
	rdma_ep *ep = t->ep;
	uint64_t since = rdma_now_ns();
	rmsg *m = (rmsg *)t->tx;

	m->flags = last ? RMF_LAST : 0;
	m->nsegs = t->nsegs;
	for (;;) {
		if (ep->err)
			return ep->err;
		if (ep->peer_gone)
			return t->posted_any ? TRANSPORT_EIO : TRANSPORT_ECLOSED;
		if (ep->credits >= 2 && slot_free(ep))
			break;
		/* One credit left: ask the peer for what it owes, once. */
		if (ep->credits == 1 && !ep->need_sent && slot_free(ep)) {
			rmsg *c = (rmsg *)(ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE);
			memset(c, 0, sizeof(*c));
			c->type = RM_CTRL;
			if (msg_post(ep, sizeof(*c)) != 0)
				return ep->err;
			ep->st.ctrl_sent++;
			continue;
		}
		int r = t->wait(ep, since);
		if (r)
			return r;
	}
	memcpy(ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE, t->tx, t->used);
	int r = msg_post(ep, (uint32_t)t->used);
	if (r)
		return r;
	t->posted_any = 1;
	t->started = 1;
	/* The next message of this frame is a SEGS. */
	memset(m, 0, sizeof(*m));
	m->type = RM_SEGS;
	t->used = t->segoff = ALIGN8(MSG_HDR);
	t->nsegs = 0;
	return 0;
}

/* Appends a segment; posts the message first when it is full (mu held). */
static int tx_seg(txf *t, uint64_t addr, uint32_t rkey, uint32_t len)
{
	if (t->used + sizeof(rseg) > t->cap) {
		int r = tx_post(t, 0);
		if (r)
			return r;
	}
	rseg s = {.addr = addr, .rkey = rkey, .len = len};
	memcpy(t->tx + t->used, &s, sizeof(s));
	t->used += sizeof(s);
	t->nsegs++;
	t->ep->tx_segs++;
	return 0;
}

static int ensure_ring(rdma_ep *ep, uint8_t **ring, struct ibv_mr **mr, unsigned n, int access)
{
	if (*ring)
		return 0;
	*ring = alloc_reg(ep, (size_t)n * RDMA_CHUNK, access, mr);
	return *ring ? 0 : TRANSPORT_ENOMEM;
}

/* Pageable bytes: copied into bounce slots, each announced as a segment; when
 * the ring is full, what is pending goes out and we wait for the peer's acks
 * (it reads slot k while we fill k+1). mu held. */
static int tx_bounce(txf *t, const uint8_t *p, size_t n)
{
	rdma_ep *ep = t->ep;
	int r;
	if ((r = ensure_ring(ep, &ep->bounce, &ep->bounce_mr, RDMA_NBOUNCE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)))
		return r;
	while (n > 0) {
		unsigned b = ep->b_next % RDMA_NBOUNCE;
		if (ep->b_busy[b] && (int32_t)(ep->peer_acked - ep->b_seg[b]) < 0) {
			/* Ring full: let the peer see what is pending, then wait. */
			if (t->nsegs > 0 || !t->started) {
				if ((r = tx_post(t, 0)))
					return r;
				continue;
			}
			uint64_t since = rdma_now_ns();
			while (!ep->err && !ep->peer_gone && (int32_t)(ep->peer_acked - ep->b_seg[b]) < 0)
				if ((r = t->wait(ep, since)))
					return r;
			if (ep->err)
				return ep->err;
			if (ep->peer_gone)
				return TRANSPORT_EIO;
			continue;
		}
		size_t k = n < RDMA_CHUNK ? n : RDMA_CHUNK;
		uint8_t *slot = ep->bounce + (size_t)b * RDMA_CHUNK;
		/* The copy runs without mu: the slot is ours until announced. */
		pthread_mutex_unlock(&ep->mu);
		memcpy(slot, p, k);
		pthread_mutex_lock(&ep->mu);
		if ((r = tx_seg(t, (uintptr_t)slot, ep->bounce_mr->rkey, (uint32_t)k)))
			return r;
		ep->b_busy[b] = 1;
		ep->b_seg[b] = ep->tx_segs; /* free once the peer acked this many */
		ep->b_next++;
		ep->st.tx_bounce_bytes += k;
		p += k;
		n -= k;
	}
	return 0;
}

/* Sends the n whole frames in t->tx[MSG_HDR, used): one alone is an eager
 * FRAME (the same bytes), several a BATCH. mu held. */
static int tx_batch(txf *t, uint32_t n)
{
	rmsg *m = (rmsg *)t->tx;
	memset(m, 0, sizeof(*m));
	t->posted_any = 0;
	if (n == 1) {
		m->type = RM_FRAME;
		m->inl = (uint32_t)(t->used - FRAME_HDR);
		t->nsegs = 0;
	} else {
		m->type = RM_BATCH;
		m->inl = (uint32_t)(t->used - MSG_HDR);
		t->nsegs = n; /* tx_post writes it into nsegs: the frame count */
		t->ep->st.tx_batches++;
	}
	return tx_post(t, 1);
}

/* One frame: hdr is its decoded header, c points at its stream. mu held. */
static int tx_frame(rdma_ep *ep, txf *t, const uint8_t hb[PROTO_HDR_SIZE], const proto_hdr *h, cursor *c)
{
	uint64_t total = (uint64_t)h->hdr_len + h->payload_len;
	rmsg *m = (rmsg *)t->tx;
	int r;

	t->cap = ep->peer_msg_size;
	t->started = t->posted_any = 0;
	t->nsegs = 0;
	memset(m, 0, sizeof(*m));
	m->type = RM_FRAME;
	memcpy(t->tx + MSG_HDR, hb, PROTO_HDR_SIZE);

	/* (Frames that fit a message whole went out in a batch: rdma_ep_sendv.)
	 * The msgpack part inline when it leaves room for a few segments (it
	 * nearly always does), the rest as segments. */
	uint32_t inl = FRAME_HDR + h->hdr_len + 8 * sizeof(rseg) <= t->cap ? h->hdr_len : 0;
	m->inl = inl;
	cur_copy(c, t->tx + FRAME_HDR, inl);
	t->used = t->segoff = ALIGN8(FRAME_HDR + inl);

	uint64_t left = total - inl;
	int zc = 0;
	uint32_t zc_need = 0;
	while (left > 0) {
		const uint8_t *p;
		size_t k = cur_piece(c, left > SIZE_MAX ? SIZE_MAX : (size_t)left, &p);
		if (k == 0)
			return TRANSPORT_EIO; /* checked by the caller: cannot happen */
		left -= k;
		uint32_t lkey, rkey;
		if (rdma_regs_find(&ep->regs, p, k, &lkey, &rkey)) {
			/* Zero-copy: the peer reads the user's own pages. */
			while (k > 0) {
				uint32_t n = k < RDMA_SEG_MAX ? (uint32_t)k : RDMA_SEG_MAX;
				if ((r = tx_seg(t, (uintptr_t)p, rkey, n)))
					return r;
				ep->st.tx_zc_bytes += n;
				p += n;
				k -= n;
			}
			zc = 1;
			zc_need = ep->tx_segs;
		} else if ((r = tx_bounce(t, p, k))) {
			return r;
		}
	}
	if ((r = tx_post(t, 1)))
		return r;
	if (zc) {
		/* The user may change the buffer once we return: wait until the
		 * peer has read it. */
		uint64_t since = rdma_now_ns();
		while ((int32_t)(ep->peer_acked - zc_need) < 0) {
			if (ep->err)
				return ep->err;
			if (ep->peer_gone)
				return TRANSPORT_EIO;
			if ((r = t->wait(ep, since)))
				return r;
		}
	}
	return 0;
}

int rdma_ep_sendv(rdma_ep *ep, const struct iovec *iov, int iovcnt, rdma_wait_fn wait)
{
	cursor c = {.iov = iov, .n = iovcnt};
	size_t left = 0;
	int r = 0;

	for (int i = 0; i < iovcnt; i++)
		left += iov[i].iov_len;
	pthread_mutex_lock(&ep->send_lock);
	/* The frame under construction: one per connection, under send_lock. */
	txf *t = ep->txf;
	if (!t && !(t = ep->txf = malloc(sizeof(*t)))) {
		pthread_mutex_unlock(&ep->send_lock);
		return TRANSPORT_ENOMEM;
	}
	t->ep = ep;
	t->wait = wait;
	pthread_mutex_lock(&ep->mu);
	if (ep->err)
		r = ep->err;
	else if (ep->peer_gone)
		r = TRANSPORT_ECLOSED;
	/* One call may carry several frames: split the bytes at their headers.
	 * Consecutive small ones share one SEND (a BATCH message). */
	uint32_t nbatch = 0;
	while (!r && left > 0) {
		uint8_t hb[PROTO_HDR_SIZE];
		proto_hdr h;
		if (left < PROTO_HDR_SIZE || cur_copy(&c, hb, PROTO_HDR_SIZE) != PROTO_HDR_SIZE) {
			LOG_ERROR("transport", "rdma: sendv of %zu bytes that are not whole frames", left);
			r = TRANSPORT_EIO;
			break;
		}
		int e = proto_decode_hdr(hb, &h);
		left -= PROTO_HDR_SIZE;
		if ((e && e != PROTO_EVERSION) || (uint64_t)h.hdr_len + h.payload_len > left) {
			LOG_ERROR("transport", "rdma: sendv: not a whole frame (%s)", e ? proto_strerror(e) : "short");
			r = TRANSPORT_EIO;
			break;
		}
		uint64_t total = (uint64_t)h.hdr_len + h.payload_len;
		left -= (size_t)total;
		ep->st.tx_frames++;
		if (FRAME_HDR + total <= ep->peer_msg_size) {
			if (nbatch && t->used + PROTO_HDR_SIZE + total > ep->peer_msg_size) {
				r = tx_batch(t, nbatch);
				nbatch = 0;
				if (r)
					break;
			}
			if (!nbatch)
				t->used = MSG_HDR;
			memcpy(t->tx + t->used, hb, PROTO_HDR_SIZE);
			cur_copy(&c, t->tx + t->used + PROTO_HDR_SIZE, (size_t)total);
			t->used += PROTO_HDR_SIZE + (size_t)total;
			nbatch++;
			ep->st.tx_inline++;
			continue;
		}
		if (nbatch && (r = tx_batch(t, nbatch)) != 0)
			break;
		nbatch = 0;
		r = tx_frame(ep, t, hb, &h, &c);
	}
	if (!r && nbatch)
		r = tx_batch(t, nbatch);
	pthread_mutex_unlock(&ep->mu);
	pthread_mutex_unlock(&ep->send_lock);
	return r;
}

/* ---- receiving ---- */

static const rmsg *rq_msg(const rdma_ep *ep, uint32_t *len)
{
	unsigned idx = ep->rq[ep->rq_head];
	*len = ep->rq_len[ep->rq_head];
	return (const rmsg *)(ep->rbuf + (size_t)idx * RDMA_MSG_SIZE);
}

static void rq_pop(rdma_ep *ep)
{
	unsigned idx = ep->rq[ep->rq_head];
	ep->rq_head = (ep->rq_head + 1) % RDMA_NRECV;
	ep->rq_n--;
	repost(ep, idx);
}

static int proto_fail(rdma_ep *ep, const char *why)
{
	LOG_WARN("transport", "rdma: %s: protocol error: %s", ep->conn->peer, why);
	rdma_ep_fail(ep, TRANSPORT_EIO);
	return TRANSPORT_EIO;
}

/* Appends the segments of message m (at byte off, n of them) to rx.segs. */
static int absorb_segs(rdma_ep *ep, const uint8_t *base, size_t off, uint32_t n, uint32_t len)
{
	rdma_rx *x = &ep->rx;
	if (n > 0 && off + (size_t)n * sizeof(rseg) > len)
		return proto_fail(ep, "segment list past the end of its message");
	for (uint32_t i = 0; i < n; i++) {
		rseg s;
		memcpy(&s, base + off + i * sizeof(rseg), sizeof(s));
		if (s.len == 0)
			return proto_fail(ep, "empty segment");
		x->segs[(x->sg_head + x->sg_n++) % RDMA_RXSEGS] = s;
	}
	return 0;
}

static void *call_dest(rdma_ep *ep, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	void *p = NULL;
	if (dest) {
		pthread_mutex_unlock(&ep->mu);
		p = dest(ctx, &x->f);
		pthread_mutex_lock(&ep->mu);
	}
	x->f.payload = p;
	x->dest_asked = 1;
	uint32_t rkey;
	x->dest_reg = p && rdma_regs_find(&ep->regs, p, (size_t)x->f.hdr.payload_len, &x->dest_lkey, &rkey);
	return p;
}

/* The next frame of the BATCH at the head of the queue (whole, inline). */
static int rx_batch(rdma_ep *ep, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	uint32_t len;
	const rmsg *m = rq_msg(ep, &len);
	int e;

	if (x->batch_left == 0) { /* a fresh one */
		if (m->nsegs < 2 || MSG_HDR + (size_t)m->inl != len)
			return proto_fail(ep, "malformed batch");
		x->batch_off = MSG_HDR;
		x->batch_left = m->nsegs;
	}
	const uint8_t *b = (const uint8_t *)m + x->batch_off;
	memset(&x->f, 0, sizeof(x->f));
	if (x->batch_off + PROTO_HDR_SIZE > len)
		return proto_fail(ep, "batch shorter than its frames");
	if ((e = proto_decode_hdr(b, &x->f.hdr)) != PROTO_OK) {
		LOG_WARN("transport", "rdma: %s: bad frame header: %s", ep->conn->peer, proto_strerror(e));
		if (!ep->err)
			ep->err = e;
		pthread_cond_broadcast(&ep->cv);
		return e;
	}
	uint64_t hl = x->f.hdr.hdr_len, total = hl + x->f.hdr.payload_len;
	if (x->batch_off + PROTO_HDR_SIZE + total > len)
		return proto_fail(ep, "batch shorter than its frames");
	if (!(x->f.msg = malloc(hl ? hl : 1))) {
		rdma_ep_fail(ep, TRANSPORT_ENOMEM);
		return TRANSPORT_ENOMEM;
	}
	b += PROTO_HDR_SIZE;
	memcpy(x->f.msg, b, hl);
	x->active = 1;
	x->total = x->issued = x->filled = total;
	x->last = 1;
	x->dest_asked = x->dest_reg = 0;
	x->sg_head = x->sg_n = 0;
	x->sg_off = 0;
	if (x->f.hdr.payload_len > 0) {
		/* the receive buffer stays ours until the batch's last frame */
		uint8_t *p = call_dest(ep, dest, ctx);
		if (p)
			memcpy(p, b + hl, (size_t)x->f.hdr.payload_len);
	}
	ep->st.rx_inline++;
	x->batch_off += PROTO_HDR_SIZE + (uint32_t)total;
	if (--x->batch_left == 0) {
		if (x->batch_off != len)
			return proto_fail(ep, "bytes after a batch's frames");
		rq_pop(ep);
	}
	return 0;
}

/* The FRAME at the head of the queue starts a frame. */
static int rx_begin(rdma_ep *ep, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	uint32_t len;
	const rmsg *m = rq_msg(ep, &len);
	const uint8_t *b = (const uint8_t *)m;
	int e;

	if (m->type == RM_BATCH)
		return rx_batch(ep, dest, ctx);
	if (m->type != RM_FRAME)
		return proto_fail(ep, "segments without a frame");
	if (len < FRAME_HDR)
		return proto_fail(ep, "short frame message");
	memset(&x->f, 0, sizeof(x->f));
	if ((e = proto_decode_hdr(b + MSG_HDR, &x->f.hdr)) != PROTO_OK) {
		/* Latched, but the QP stays up: the server may still answer a
		 * peer of another version (rdma_ep_send_eager_nb) before closing. */
		LOG_WARN("transport", "rdma: %s: bad frame header: %s", ep->conn->peer, proto_strerror(e));
		if (!ep->err)
			ep->err = e;
		pthread_cond_broadcast(&ep->cv);
		return e;
	}
	uint64_t hl = x->f.hdr.hdr_len, total = hl + x->f.hdr.payload_len;
	uint32_t inl = m->inl;
	if (FRAME_HDR + (size_t)inl > len || inl > total || (inl > hl && inl != total))
		return proto_fail(ep, "inline bytes do not fit the frame");
	if (inl == total && (!(m->flags & RMF_LAST) || m->nsegs))
		return proto_fail(ep, "segments after a complete frame");
	if (!(x->f.msg = malloc(hl ? hl : 1))) {
		rdma_ep_fail(ep, TRANSPORT_ENOMEM);
		return TRANSPORT_ENOMEM;
	}
	x->active = 1;
	x->total = total;
	x->issued = x->filled = inl;
	x->last = (m->flags & RMF_LAST) != 0;
	x->dest_asked = x->dest_reg = 0;
	x->sg_head = x->sg_n = 0;
	x->sg_off = 0;
	memcpy(x->f.msg, b + FRAME_HDR, inl < hl ? inl : hl);
	if (inl == total && x->f.hdr.payload_len > 0) {
		/* Eager frame: the payload is in the receive buffer, which stays
		 * ours until rq_pop. */
		uint8_t *p = call_dest(ep, dest, ctx);
		if (p)
			memcpy(p, b + FRAME_HDR + hl, (size_t)x->f.hdr.payload_len);
	}
	if (inl == total)
		ep->st.rx_inline++;
	int r = absorb_segs(ep, b, ALIGN8(FRAME_HDR + inl), m->nsegs, len);
	rq_pop(ep);
	return r;
}

/* Where stream offset off lands: in the msgpack buffer or the payload (NULL:
 * discarded). */
static uint8_t *rx_target(rdma_rx *x, uint64_t off)
{
	uint64_t hl = x->f.hdr.hdr_len;
	if (off < hl)
		return x->f.msg + off;
	return x->f.payload ? (uint8_t *)x->f.payload + (off - hl) : NULL;
}

/* Issues reads (or skips) for announced segments. mu held. */
static int rx_issue(rdma_ep *ep)
{
	rdma_rx *x = &ep->rx;
	uint64_t hl = x->f.hdr.hdr_len;
	int progressed = 0;

	while (x->issued < x->total && x->sg_n > 0 && x->rd_n < RDMA_MAX_READS) {
		rseg *s = &x->segs[x->sg_head];
		uint64_t off = x->issued, n = s->len - x->sg_off;
		int in_msg = off < hl;
		uint64_t lim = in_msg ? hl - off : x->total - off;
		if (n > lim)
			n = lim;
		if (!in_msg && !x->dest_asked)
			break; /* payload_dest first, once the msgpack part is in */
		unsigned ri = (x->rd_head + x->rd_n) % RDMA_MAX_READS;
		rdma_rd *rd = &x->rd[ri];
		memset(rd, 0, sizeof(*rd));
		rd->slot = -1;
		uint8_t *target = rx_target(x, off);
		if (!target) {
			rd->skip = 1; /* discarded: nothing to read */
			rd->done = 1;
			ep->st.rx_skip_bytes += n;
		} else {
			struct ibv_sge sge;
			if (!in_msg && x->dest_reg) {
				if (n > RDMA_READ_MAX)
					n = RDMA_READ_MAX;
				sge = (struct ibv_sge){.addr = (uintptr_t)target, .length = (uint32_t)n, .lkey = x->dest_lkey};
				ep->st.rx_direct_bytes += n;
			} else {
				if (ensure_ring(ep, &ep->landing, &ep->landing_mr, RDMA_NLANDING, IBV_ACCESS_LOCAL_WRITE))
					return TRANSPORT_ENOMEM;
				if (!x->landing_free)
					break;
				rd->slot = __builtin_ctz(x->landing_free);
				if (n > RDMA_CHUNK)
					n = RDMA_CHUNK;
				sge = (struct ibv_sge){.addr = (uintptr_t)(ep->landing + (size_t)rd->slot * RDMA_CHUNK),
						       .length = (uint32_t)n,
						       .lkey = ep->landing_mr->lkey};
				ep->st.rx_landing_bytes += n;
			}
			if (!sq_room(ep, 2))
				break;
			struct ibv_send_wr wr = {
				.sg_list = &sge,
				.num_sge = 1,
				.opcode = IBV_WR_RDMA_READ,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = {.remote_addr = s->addr + x->sg_off, .rkey = s->rkey},
			};
			if (sq_post(ep, &wr, (rdma_sqe){.kind = SQE_READ, .idx = (uint16_t)ri}) != 0)
				return TRANSPORT_EIO;
			if (rd->slot >= 0)
				x->landing_free &= ~(1u << rd->slot);
		}
		rd->off = off;
		rd->len = (uint32_t)n;
		x->sg_off += n;
		x->issued += n;
		if (x->sg_off == s->len) {
			rd->seg_end = 1;
			x->sg_head = (x->sg_head + 1) % RDMA_RXSEGS;
			x->sg_n--;
			x->sg_off = 0;
		}
		x->rd_n++;
		progressed = 1;
	}
	return progressed;
}

int rdma_ep_rx_busy(const rdma_ep *ep) { return ep->rx.active || ep->rq_n > 0; }

void rdma_ep_rx_abort(rdma_ep *ep)
{
	free(ep->rx.f.msg);
	memset(&ep->rx.f, 0, sizeof(ep->rx.f));
	ep->rx.active = 0;
}

int rdma_ep_rx(rdma_ep *ep, transport_frame *out, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	int r;

	for (;;) {
		int progressed = 0;
		if (ep->err) {
			rdma_ep_rx_abort(ep);
			return ep->err;
		}
		if (!x->active) {
			if (ep->rq_n == 0) {
				if (ep->peer_gone) {
					rdma_ep_fail(ep, TRANSPORT_ECLOSED);
					return TRANSPORT_ECLOSED;
				}
				rdma_ep_flush_ctrl(ep);
				return 0;
			}
			if ((r = rx_begin(ep, dest, ctx)) != 0) {
				rdma_ep_rx_abort(ep);
				return r;
			}
			progressed = 1;
		}
		/* more segments of this frame */
		while (!x->last && ep->rq_n > 0) {
			uint32_t len;
			const rmsg *m = rq_msg(ep, &len);
			if (m->type != RM_SEGS) {
				rdma_ep_rx_abort(ep);
				return proto_fail(ep, "a new frame before the last one's segments");
			}
			if (x->sg_n + m->nsegs > RDMA_RXSEGS)
				break; /* room comes as reads are issued */
			if ((r = absorb_segs(ep, (const uint8_t *)m, ALIGN8(MSG_HDR), m->nsegs, len)) != 0) {
				rdma_ep_rx_abort(ep);
				return r;
			}
			x->last = (m->flags & RMF_LAST) != 0;
			rq_pop(ep);
			progressed = 1;
		}
		/* finished reads, in order */
		while (x->rd_n > 0 && x->rd[x->rd_head].done) {
			rdma_rd *rd = &x->rd[x->rd_head];
			if (rd->slot >= 0) {
				uint8_t *target = rx_target(x, rd->off);
				const uint8_t *src = ep->landing + (size_t)rd->slot * RDMA_CHUNK;
				pthread_mutex_unlock(&ep->mu);
				memcpy(target, src, rd->len);
				pthread_mutex_lock(&ep->mu);
				x->landing_free |= 1u << rd->slot;
			}
			x->filled += rd->len;
			if (rd->seg_end)
				ep->rx_acked++;
			x->rd_head = (x->rd_head + 1) % RDMA_MAX_READS;
			x->rd_n--;
			progressed = 1;
		}
		if (ep->err)
			continue;
		if (!x->dest_asked && x->f.hdr.payload_len > 0 && x->filled >= x->f.hdr.hdr_len) {
			call_dest(ep, dest, ctx);
			progressed = 1;
		}
		if ((r = rx_issue(ep)) < 0) {
			rdma_ep_rx_abort(ep);
			return r;
		}
		progressed |= r;
		if (x->last && ((x->issued == x->total && x->sg_n > 0) || (x->issued < x->total && x->sg_n == 0))) {
			rdma_ep_rx_abort(ep);
			return proto_fail(ep, "segments do not add up to the frame");
		}
		if (x->last && x->filled == x->total && x->sg_n == 0 && x->rd_n == 0) {
			if (x->f.hdr.payload_len == 0)
				x->f.payload = NULL;
			*out = x->f;
			memset(&x->f, 0, sizeof(x->f));
			x->active = 0;
			ep->st.rx_frames++;
			rdma_ep_flush_ctrl(ep);
			return 1;
		}
		if (!progressed) {
			rdma_ep_flush_ctrl(ep);
			if (ep->peer_gone) {
				/* No more bytes of this frame can come. */
				rdma_ep_rx_abort(ep);
				rdma_ep_fail(ep, TRANSPORT_EIO);
				return TRANSPORT_EIO;
			}
			return 0;
		}
	}
}

int rdma_ep_send_eager_nb(rdma_ep *ep, const void *frame, size_t len)
{
	if (!ep->qp || ep->qp_dead || ep->credits < 1 || !slot_free(ep) || len < PROTO_HDR_SIZE ||
	    MSG_HDR + len > ep->peer_msg_size)
		return TRANSPORT_EIO;
	uint8_t *slot = ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE;
	rmsg *m = (rmsg *)slot;
	memset(m, 0, sizeof(*m));
	m->type = RM_FRAME;
	m->flags = RMF_LAST;
	m->inl = (uint32_t)(len - PROTO_HDR_SIZE);
	memcpy(slot + MSG_HDR, frame, len);
	return msg_post(ep, (uint32_t)(MSG_HDR + len));
}

void rdma_ep_peer_gone(rdma_ep *ep)
{
	ep->peer_gone = 1;
	if (!ep->qp_dead && ep->qp) {
		/* Flush what is outstanding; frames already received still count. */
		ep->qp_dead = 1;
		if (rdma_v.disconnect(ep->id) != 0) {
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
			rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
		}
	}
	pthread_cond_broadcast(&ep->cv);
}

/* ---- registration ---- */

int rdma_reg_mem(rdma_ep *ep, void *addr, size_t len, transport_mr **out)
{
	return rdma_regs_add(&ep->regs, ep->pd, addr, len, out);
}

int rdma_dereg_mem(rdma_ep *ep, transport_mr *mr) { return rdma_regs_remove(&ep->regs, mr); }

/* ---- tests ---- */

typedef struct rdma_conn_head {
	transport_conn base;
	rdma_ep ep;
} rdma_conn_head;

rdma_ep *rdma_conn_ep(transport_conn *c)
{
	if (!c || strcmp(c->ops->scheme, "rdma") != 0)
		return NULL;
	return &((rdma_conn_head *)c)->ep;
}

void rdma_test_vanish(transport_conn *c)
{
	rdma_ep *ep = rdma_conn_ep(c);
	if (!ep)
		return;
	pthread_mutex_lock(&ep->mu);
	if (ep->qp && !ep->qp_dead) {
		/* As a host that lost power: the QP stops answering and this side
		 * neither notices nor tells the peer (flushes are ignored once
		 * qp_dead is set). Only the peer's keepalive can find out. */
		ep->qp_dead = 1;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
	}
	pthread_mutex_unlock(&ep->mu);
}

void rdma_test_break_qp(transport_conn *c)
{
	rdma_ep *ep = rdma_conn_ep(c);
	if (!ep)
		return;
	pthread_mutex_lock(&ep->mu);
	if (ep->qp) {
		/* As a broken link does: the QP errs, the peer hears nothing. */
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
	}
	pthread_mutex_unlock(&ep->mu);
}
