/*
 * The rdma connection core, shared by the client (rdma_client.c) and the server
 * (rdma_server.c): verbs resources, the send queue, control messages with
 * credits, completions and keepalives. The sending of frames is in rdma_tx.c,
 * the receive state machine in rdma_rx.c. The protocol is described in
 * rdma_int.h; who waits how lives in the halves.
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

static int post_recvs(rdma_ep *ep, const uint16_t *idx, unsigned n);
static void ep_kill_qp(rdma_ep *ep);

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
	/* While a bulk transfer moves, the next completion is due within one
	 * chunk's time on the wire; sleeping on the channel between them put a
	 * wake-up (and under emulation an idle vCPU's) into every chunk: default
	 * settings moved 16 MiB copies at two thirds of busy polling's rate in
	 * the guest. 20 ms covers a 1 MiB READ at 50 MB/s. */
	conf.bulk_spin_us = env_int("REMOTE_GPU_RDMA_BULK_SPIN_US", 20000, 0, 10000000);
	conf.keepalive_ms = env_int("REMOTE_GPU_RDMA_KEEPALIVE_MS", 2000, 50, 3600000);
	conf.timeout_ms = env_int("REMOTE_GPU_RDMA_TIMEOUT_MS", 30000, 100, 86400000);
	conf.connect_ms = env_int("REMOTE_GPU_RDMA_CONNECT_MS", 10000, 100, 600000);
	/* 4.096 us * 2^15 = 134 ms per try, 7 tries: a dead peer is found about
	 * 1 s after the first unanswered packet. Not 7 retries: Soft-RoCE (rxe)
	 * reads retry_cnt 7 as "forever", as RNR retries are. */
	conf.ack_timeout = env_int("REMOTE_GPU_RDMA_ACK_TIMEOUT", 15, 1, 31);
	conf.retry_count = env_int("REMOTE_GPU_RDMA_RETRY", 6, 0, 6);
}

const rdma_conf_t *tp_rdma_conf(void)
{
	pthread_once(&conf_once, conf_load);
	return &conf;
}

uint64_t tp_rdma_now_ns(void) { return rg_clock_coarse_ns(); }

const char *tp_rdma_wc_str(int status) { return tp_rdma_v.wc_status_str((enum ibv_wc_status)status); }

/* ---- setup / teardown ---- */

static void *alloc_reg(rdma_ep *ep, size_t len, int access, struct ibv_mr **mr)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len) != 0)
		return NULL;
	memset(p, 0, len);
	*mr = tp_rdma_v.reg_mr(ep->pd, p, len, access);
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
		tp_rdma_v.dereg_mr(*mr);
	free(*p);
	*p = NULL;
	*mr = NULL;
}

int tp_rdma_ep_ensure_ring(rdma_ep *ep, uint8_t **ring, struct ibv_mr **mr, unsigned n, int access)
{
	if (*ring)
		return 0;
	*ring = alloc_reg(ep, (size_t)n * RDMA_CHUNK, access, mr);
	return *ring ? 0 : TRANSPORT_ENOMEM;
}

int tp_rdma_ep_init(rdma_ep *ep, struct rdma_cm_id *id)
{
	pthread_condattr_t ca;

	tp_rdma_conf();
	pthread_mutex_init(&ep->mu, NULL);
	pthread_mutex_init(&ep->send_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep->cv, &ca);
	pthread_condattr_destroy(&ca);
	tp_rdma_regs_init(&ep->regs);
	ep->id = id;
	ep->verbs = id->verbs;
	ep->rx.landing_free = (1u << RDMA_NLANDING) - 1;
	ep->last_peer_ns = ep->last_msg_ns = tp_rdma_now_ns();

	if (!(ep->pd = tp_rdma_v.alloc_pd(ep->verbs))) {
		LOG_WARN("transport", "rdma: ibv_alloc_pd: %m");
		return TRANSPORT_ENOMEM;
	}
	if (!(ep->ch = tp_rdma_v.create_comp_channel(ep->verbs))) {
		LOG_WARN("transport", "rdma: ibv_create_comp_channel: %m");
		return TRANSPORT_ENOMEM;
	}
	fcntl(ep->ch->fd, F_SETFL, fcntl(ep->ch->fd, F_GETFL) | O_NONBLOCK);
	if (!(ep->cq = tp_rdma_v.create_cq(ep->verbs, RDMA_NRECV + RDMA_SQ_DEPTH + 8, ep, ep->ch, 0))) {
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
	if (tp_rdma_v.create_qp(id, ep->pd, &qa)) {
		qa.cap.max_inline_data = 0;
		if (tp_rdma_v.create_qp(id, ep->pd, &qa)) {
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
	uint16_t all[RDMA_NRECV];
	for (unsigned i = 0; i < RDMA_NRECV; i++)
		all[i] = (uint16_t)i;
	return post_recvs(ep, all, RDMA_NRECV) == 0 ? TRANSPORT_OK : TRANSPORT_EIO;
}

void tp_rdma_ep_fill_hello(rdma_ep *ep, rhello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = RDMA_HELLO_MAGIC;
	h->version = RDMA_PROTO_VERSION;
	h->credits = RDMA_NRECV;
	h->msg_size = RDMA_MSG_SIZE;
	h->ka_addr = (uintptr_t)ep->ka;
	h->ka_rkey = ep->ka_mr->rkey;
}

int tp_rdma_ep_hello(rdma_ep *ep, const void *priv, size_t len)
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
	ep->last_peer_ns = ep->last_msg_ns = tp_rdma_now_ns();
	pthread_mutex_unlock(&ep->mu);
	ep->conn->cookie = h.cookie;
	return TRANSPORT_OK;
}

void tp_rdma_ep_destroy_qp(rdma_ep *ep)
{
	if (ep->qp) {
		tp_rdma_v.destroy_qp(ep->id);
		ep->qp = NULL;
	}
	if (ep->cq) {
		/* ibv_destroy_cq waits until every event it reported is acked; with
		 * the QP gone no new one can come. */
		tp_rdma_ep_channel_drain(ep);
		tp_rdma_v.destroy_cq(ep->cq);
		ep->cq = NULL;
	}
	free_reg((void **)&ep->rbuf, &ep->rbuf_mr);
	free_reg((void **)&ep->sbuf, &ep->sbuf_mr);
	free_reg((void **)&ep->bounce, &ep->bounce_mr);
	free_reg((void **)&ep->landing, &ep->landing_mr);
	free_reg((void **)&ep->ka, &ep->ka_mr);
}

void tp_rdma_ep_free(rdma_ep *ep)
{
	tp_rdma_ep_destroy_qp(ep);
	if (ep->ch) {
		tp_rdma_v.destroy_comp_channel(ep->ch);
		ep->ch = NULL;
	}
	tp_rdma_regs_destroy(&ep->regs);
	if (ep->pd) {
		tp_rdma_v.dealloc_pd(ep->pd);
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

/* Moves the QP to the error state, once, and tells the peer (a disconnect
 * does both; the state change alone when it fails). */
static void ep_kill_qp(rdma_ep *ep)
{
	if (ep->qp_dead || !ep->qp)
		return;
	ep->qp_dead = 1;
	if (tp_rdma_v.disconnect(ep->id) != 0) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		tp_rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
	}
}

void tp_rdma_ep_fail(rdma_ep *ep, int err)
{
	if (!ep->err) {
		ep->err = err;
		if (err != TRANSPORT_ECLOSED)
			LOG_INFO("transport", "rdma: %s: %s", ep->conn->peer, transport_strerror(err));
	}
	/* Every outstanding request is flushed, waiters see the error. */
	ep_kill_qp(ep);
	tp_rdma_ep_wake(ep);
}

/* ---- send queue ---- */

int tp_rdma_ep_has_sq_room(const rdma_ep *ep, unsigned n) { return ep->sq_posted - ep->sq_done + n <= RDMA_SQ_DEPTH; }

int tp_rdma_ep_post_wr(rdma_ep *ep, struct ibv_send_wr *wr, rdma_sqe e)
{
	struct ibv_send_wr *bad;
	wr->wr_id = ep->sq_posted;
	ep->sqe[ep->sq_posted % RDMA_SQ_DEPTH] = e;
	int r = ibv_post_send(ep->qp, wr, &bad);
	if (r) {
		LOG_WARN("transport", "rdma: %s: ibv_post_send: %s", ep->conn->peer, strerror(r));
		tp_rdma_ep_fail(ep, TRANSPORT_EIO);
		return TRANSPORT_EIO;
	}
	ep->sq_posted++;
	return 0;
}

int tp_rdma_ep_has_slot(const rdma_ep *ep)
{
	return ep->s_posted - ep->s_done < RDMA_NSEND && tp_rdma_ep_has_sq_room(ep, 2);
}

int tp_rdma_ep_post_msg(rdma_ep *ep, uint32_t len)
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
	if ((ep->s_posted & 7) == 7 || inflight >= RDMA_NSEND / 2 || !tp_rdma_ep_has_sq_room(ep, RDMA_SQ_DEPTH / 2))
		wr.send_flags = IBV_SEND_SIGNALED;
	if (len <= ep->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	if (tp_rdma_ep_post_wr(ep, &wr, (rdma_sqe){.kind = SQE_SEND, .slot_seq = ep->s_posted}) != 0)
		return TRANSPORT_EIO;
	ep->s_posted++;
	ep->owed -= give;
	ep->ack_sent = ep->rx_acked;
	ep->credits--;
	return 0;
}

void tp_rdma_ep_flush_ctrl(rdma_ep *ep)
{
	if (ep->err || ep->peer_gone || !ep->qp || !ep->credits)
		return;
	int due = ep->rx_acked != ep->ack_sent || ep->owed >= RDMA_NRECV / 2 || (ep->peer_needs && ep->owed > 0);
	if (!due || !tp_rdma_ep_has_slot(ep))
		return;
	rmsg *m = (rmsg *)(ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE);
	memset(m, 0, sizeof(*m));
	m->type = RM_CTRL;
	if (tp_rdma_ep_post_msg(ep, sizeof(*m)) == 0) {
		ep->peer_needs = 0;
		ep->st.ctrl_sent++;
	}
}

/* ---- receive buffers ---- */

/* Posts receive buffers idx[0..n) in one chained call. */
static int post_recvs(rdma_ep *ep, const uint16_t *idx, unsigned n)
{
	struct ibv_sge sge[RDMA_NRECV];
	struct ibv_recv_wr wr[RDMA_NRECV], *bad;
	for (unsigned i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){
			.addr = (uintptr_t)(ep->rbuf + (size_t)idx[i] * RDMA_MSG_SIZE),
			.length = RDMA_MSG_SIZE,
			.lkey = ep->rbuf_mr->lkey,
		};
		wr[i] = (struct ibv_recv_wr){.wr_id = WR_RECV | idx[i], .sg_list = &sge[i], .num_sge = 1,
					     .next = i + 1 < n ? &wr[i + 1] : NULL};
	}
	int r = ibv_post_recv(ep->qp, wr, &bad);
	if (r)
		LOG_WARN("transport", "rdma: %s: ibv_post_recv: %s", ep->conn->peer, strerror(r));
	return r;
}

void tp_rdma_ep_release_recv(rdma_ep *ep, unsigned idx)
{
	ep->rp[ep->rp_n++] = (uint16_t)idx;
	if (ep->rp_n >= RDMA_NRECV / 4)
		tp_rdma_ep_repost(ep);
}

void tp_rdma_ep_repost(rdma_ep *ep)
{
	unsigned n = ep->rp_n;
	if (n == 0)
		return;
	ep->rp_n = 0;
	if (ep->err || ep->qp_dead)
		return;
	if (post_recvs(ep, ep->rp, n) != 0) {
		tp_rdma_ep_fail(ep, TRANSPORT_EIO);
		return;
	}
	ep->owed += (int)n;
	tp_rdma_ep_flush_ctrl(ep); /* a peer waiting with NEED gets the credits now */
}

void tp_rdma_ep_wake(rdma_ep *ep)
{
	if (ep->cv_waiters > 0)
		pthread_cond_broadcast(&ep->cv);
}

void tp_rdma_ep_wait(rdma_ep *ep, int ms)
{
	struct timespec ts = rg_deadline(CLOCK_MONOTONIC, ms);
	ep->cv_waiters++;
	pthread_cond_timedwait(&ep->cv, &ep->mu, &ts);
	ep->cv_waiters--;
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
		 (wc->wr_id & WR_RECV) ? "receive" : "send/read", tp_rdma_wc_str(wc->status));
	tp_rdma_ep_fail(ep, TRANSPORT_EIO);
}

static void on_recv(rdma_ep *ep, unsigned idx, uint32_t len)
{
	const rmsg *m = (const rmsg *)(ep->rbuf + (size_t)idx * RDMA_MSG_SIZE);

	if (len < RDMA_MSG_HDR || m->type < RM_FRAME || m->type > RM_BATCH) {
		LOG_WARN("transport", "rdma: %s: malformed control message (%u bytes, type %u)", ep->conn->peer, len,
			 len ? m->type : 0);
		tp_rdma_ep_fail(ep, TRANSPORT_EIO);
		return;
	}
	/* Not a clock read per message (in the guest even the coarse clock
	 * costs a tenth of a turnaround): the next liveness check, the only
	 * reader, stamps it. Timeouts may then start up to one wait later. */
	ep->heard = 1;
	atomic_fetch_add_explicit(&ep->heard_n, 1, memory_order_relaxed);
	if (m->credits) {
		ep->credits += m->credits;
		ep->need_sent = 0;
	}
	if ((int32_t)(m->acked - ep->peer_acked) > 0)
		ep->peer_acked = m->acked;
	if (m->flags & RMF_NEED)
		ep->peer_needs = 1;
	if (m->type == RM_CTRL) {
		tp_rdma_ep_release_recv(ep, idx);
		return;
	}
	if (ep->rq_n == RDMA_NRECV) { /* cannot happen: one entry per buffer */
		tp_rdma_ep_fail(ep, TRANSPORT_EIO);
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
			ep->last_peer_ns = tp_rdma_now_ns();
			break;
		case SQE_KA:
			ep->ka_inflight = 0;
			ep->last_peer_ns = tp_rdma_now_ns();
			break;
		}
		e->kind = 0;
	}
	if (seq + 1 > ep->sq_done)
		ep->sq_done = seq + 1;
}

int tp_rdma_ep_poll(rdma_ep *ep)
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
		tp_rdma_ep_fail(ep, TRANSPORT_EIO);
		return -1;
	}
	if (got) {
		tp_rdma_ep_flush_ctrl(ep);
		tp_rdma_ep_wake(ep);
	} else {
		tp_rdma_ep_repost(ep); /* idle: the buffers of what was received go back */
	}
	return got;
}

int tp_rdma_ep_bulk_pending(const rdma_ep *ep)
{
	return !ep->err && (ep->rx.rd_n > 0 || (int32_t)(ep->tx_segs - ep->peer_acked) > 0 ||
			    (ep->rx.active && ep->rx.filled < ep->rx.total));
}

int tp_rdma_ep_arm(rdma_ep *ep)
{
	tp_rdma_ep_repost(ep); /* before a sleep: the peer must not wait for credits */
	if (!ep->cq || ep->cq_armed)
		return 0;
	if (ibv_req_notify_cq(ep->cq, 0) != 0)
		return -1;
	ep->cq_armed = 1;
	return 0;
}

void tp_rdma_ep_channel_drain(rdma_ep *ep)
{
	struct ibv_cq *cq;
	void *ctx;
	while (ep->ch && tp_rdma_v.get_cq_event(ep->ch, &cq, &ctx) == 0) {
		tp_rdma_v.ack_cq_events(cq, 1);
		ep->cq_armed = 0;
	}
}

/* ---- liveness ---- */

int tp_rdma_ep_check(rdma_ep *ep, uint64_t since)
{
	const rdma_conf_t *cf = tp_rdma_conf();
	uint64_t now = tp_rdma_now_ns();

	if (ep->heard) {
		ep->heard = 0;
		ep->last_peer_ns = ep->last_msg_ns = now;
	}
	if (ep->err)
		return ep->err;
	if (!ep->qp || ep->qp_dead || ep->peer_gone)
		return 0;
	if (!ep->ka_inflight && ep->peer_ka_rkey && now - ep->last_peer_ns >= (uint64_t)cf->keepalive_ms * 1000000ull &&
	    tp_rdma_ep_has_sq_room(ep, 1)) {
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
		if (tp_rdma_ep_post_wr(ep, &wr, (rdma_sqe){.kind = SQE_KA}) == 0) {
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
			tp_rdma_ep_fail(ep, TRANSPORT_ETIMEDOUT);
			return TRANSPORT_ETIMEDOUT;
		}
	}
	return ep->err;
}

void tp_rdma_ep_peer_gone(rdma_ep *ep)
{
	ep->peer_gone = 1;
	/* Flush what is outstanding; frames already received still count. */
	ep_kill_qp(ep);
	tp_rdma_ep_wake(ep);
}

/* ---- registration: transport_ops.reg_mem / dereg_mem of both halves ---- */

int tp_rdma_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	rdma_ep *ep = &((rdma_conn_head *)c)->ep;
	return tp_rdma_regs_add(&ep->regs, ep->pd, addr, len, out);
}

int tp_rdma_dereg_mem(transport_conn *c, transport_mr *mr)
{
	return tp_rdma_regs_remove(&((rdma_conn_head *)c)->ep.regs, mr);
}
