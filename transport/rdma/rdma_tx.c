/*
 * Sending frames over an rdma connection (rdma_int.h has the protocol; the
 * send slots, credits and completions are rdma_ep.c's). A call's frames are
 * cut at their headers: consecutive small ones go out whole in one SEND (an
 * eager FRAME, or a BATCH of several); of a larger one the msgpack part travels
 * inline and the rest as segments the peer READs: the user's registered memory
 * itself (zero-copy) or bounce ring slots that pageable bytes are copied into.
 */
#include <stdlib.h>
#include <string.h>

#include "rdma_int.h"
#include "rg_log.h"

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
	const rdma_sent *async; /* sendv_async: the completion of the call's last frame */
	int queued;             /* ... was queued (not waited for) */
};

/* Conditions a sender waits for (mu held). */
static int peer_read(const rdma_ep *ep, uint32_t seg) { return (int32_t)(ep->peer_acked - seg) >= 0; }
static int sent_room(const rdma_ep *ep, uint32_t unused) { return ep->sent_n < RDMA_NSENT; }

/* Waits until done(ep, arg) holds, or the connection fails (mu held). */
static int tx_wait(txf *t, int (*done)(const rdma_ep *, uint32_t), uint32_t arg)
{
	rdma_ep *ep = t->ep;
	uint64_t since = tp_rdma_now_ns();
	int r;
	while (!done(ep, arg)) {
		if (ep->err)
			return ep->err;
		if (ep->peer_gone)
			return TRANSPORT_EIO;
		if ((r = t->wait(ep, since)))
			return r;
	}
	return 0;
}

/* Sends the message in t->tx, waiting for two credits (one stays in reserve
 * for CTRLs) and a slot. Called with mu held. */
static int tx_post(txf *t, int last)
{
	rdma_ep *ep = t->ep;
	uint64_t since = tp_rdma_now_ns();
	rmsg *m = (rmsg *)t->tx;

	m->flags = last ? RMF_LAST : 0;
	m->nsegs = t->nsegs;
	for (;;) {
		if (ep->err)
			return ep->err;
		if (ep->peer_gone)
			return t->posted_any ? TRANSPORT_EIO : TRANSPORT_ECLOSED;
		if (ep->credits >= 2 && tp_rdma_ep_has_slot(ep))
			break;
		/* One credit left: ask the peer for what it owes, once. */
		if (ep->credits == 1 && !ep->need_sent && tp_rdma_ep_has_slot(ep)) {
			rmsg *c = (rmsg *)(ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE);
			memset(c, 0, sizeof(*c));
			c->type = RM_CTRL;
			if (tp_rdma_ep_post_msg(ep, sizeof(*c)) != 0)
				return ep->err;
			ep->st.ctrl_sent++;
			continue;
		}
		int r = t->wait(ep, since);
		if (r)
			return r;
	}
	memcpy(ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE, t->tx, t->used);
	int r = tp_rdma_ep_post_msg(ep, (uint32_t)t->used);
	if (r)
		return r;
	t->posted_any = 1;
	t->started = 1;
	/* The next message of this frame is a SEGS. */
	memset(m, 0, sizeof(*m));
	m->type = RM_SEGS;
	t->used = t->segoff = RDMA_ALIGN8(RDMA_MSG_HDR);
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

/* Pageable bytes: copied into bounce slots, each announced as a segment; when
 * the ring is full, what is pending goes out and we wait for the peer's acks
 * (it reads slot k while we fill k+1). mu held. */
static int tx_bounce(txf *t, const uint8_t *p, size_t n)
{
	rdma_ep *ep = t->ep;
	int r;
	if ((r = tp_rdma_ep_ensure_ring(ep, &ep->bounce, &ep->bounce_mr, RDMA_NBOUNCE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)))
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
			if ((r = tx_wait(t, peer_read, ep->b_seg[b])))
				return r;
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

/* Sends the n whole frames in t->tx[RDMA_MSG_HDR, used): one alone is an eager
 * FRAME (the same bytes), several a BATCH. mu held. */
static int tx_batch(txf *t, uint32_t n)
{
	rmsg *m = (rmsg *)t->tx;
	memset(m, 0, sizeof(*m));
	t->posted_any = 0;
	if (n == 1) {
		m->type = RM_FRAME;
		m->inl = (uint32_t)(t->used - RDMA_FRAME_HDR);
		t->nsegs = 0;
	} else {
		m->type = RM_BATCH;
		m->inl = (uint32_t)(t->used - RDMA_MSG_HDR);
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
	memcpy(t->tx + RDMA_MSG_HDR, hb, PROTO_HDR_SIZE);

	/* (Frames that fit a message whole went out in a batch: tp_rdma_ep_sendv.)
	 * The msgpack part inline when it leaves room for a few segments (it
	 * nearly always does), the rest as segments. */
	uint32_t inl = RDMA_FRAME_HDR + h->hdr_len + 8 * sizeof(rseg) <= t->cap ? h->hdr_len : 0;
	m->inl = inl;
	cur_copy(c, t->tx + RDMA_FRAME_HDR, inl);
	t->used = t->segoff = RDMA_ALIGN8(RDMA_FRAME_HDR + inl);

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
		if (tp_rdma_regs_find(&ep->regs, p, k, &lkey, &rkey)) {
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
	if (zc && t->async) {
		/* The caller is told later (tp_rdma_ep_take_sent); wait only for room
		 * in the queue of completions. */
		if ((r = tx_wait(t, sent_room, 0)))
			return r;
		rdma_sent *q = &ep->sent[(ep->sent_head + ep->sent_n++) % RDMA_NSENT];
		*q = *t->async;
		q->need = zc_need;
		t->queued = 1;
		return 0;
	}
	/* The user may change the buffer once we return: wait until the peer
	 * has read it. */
	return zc ? tx_wait(t, peer_read, zc_need) : 0;
}

unsigned tp_rdma_ep_take_sent(rdma_ep *ep, rdma_sent *out, unsigned max, int *err)
{
	unsigned n = 0;
	*err = ep->err;
	while (ep->sent_n > 0 && n < max) {
		rdma_sent *q = &ep->sent[ep->sent_head];
		if (!ep->err && (int32_t)(ep->peer_acked - q->need) < 0)
			break;
		out[n++] = *q;
		ep->sent_head = (ep->sent_head + 1) % RDMA_NSENT;
		ep->sent_n--;
	}
	return n;
}

/* A call of whole frames that fit one message, when no other call is being
 * sent (tx_active): built straight in a send slot under mu alone, no send_lock
 * and no copy through t->tx. The common case: a synchronous call, a reply.
 * 1 when posted, 0 when the general path must take it (including malformed
 * input, which it reports), < 0 on a post failure. mu held. */
static int tx_eager(rdma_ep *ep, const struct iovec *iov, int iovcnt, size_t len)
{
	if (ep->tx_active || ep->err || ep->peer_gone || ep->credits < 2 || !tp_rdma_ep_has_slot(ep))
		return 0;
	uint8_t *slot = ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE;
	uint8_t *b = slot + RDMA_MSG_HDR;
	for (size_t i = 0, off = 0; i < (size_t)iovcnt; off += iov[i++].iov_len)
		memcpy(b + off, iov[i].iov_base, iov[i].iov_len);
	uint32_t n = 0;
	for (size_t off = 0; off < len; n++) {
		uint64_t fl;
		if (len - off < PROTO_HDR_SIZE || proto_peek_frame_len(b + off, &fl) != PROTO_OK ||
		    fl > len - off - PROTO_HDR_SIZE)
			return 0;
		off += PROTO_HDR_SIZE + (size_t)fl;
	}
	rmsg *m = (rmsg *)slot;
	memset(m, 0, sizeof(*m));
	m->flags = RMF_LAST;
	if (n == 1) {
		m->type = RM_FRAME;
		m->inl = (uint32_t)(len - PROTO_HDR_SIZE);
	} else {
		/* Frames back to back, the same bytes tx_batch sends. */
		m->type = RM_BATCH;
		m->inl = (uint32_t)len;
		m->nsegs = n;
		ep->st.tx_batches++;
	}
	ep->st.tx_frames += n;
	ep->st.tx_inline += n;
	int r = tp_rdma_ep_post_msg(ep, (uint32_t)(RDMA_MSG_HDR + len));
	return r ? r : 1;
}

int tp_rdma_ep_sendv(rdma_ep *ep, const struct iovec *iov, int iovcnt, rdma_wait_fn wait)
{
	return tp_rdma_ep_sendv_async(ep, iov, iovcnt, wait, NULL, NULL);
}

int tp_rdma_ep_sendv_async(rdma_ep *ep, const struct iovec *iov, int iovcnt, rdma_wait_fn wait, const rdma_sent *async,
			int *queued)
{
	cursor c = {.iov = iov, .n = iovcnt};
	size_t left = 0;
	int r = 0;

	for (int i = 0; i < iovcnt; i++)
		left += iov[i].iov_len;
	if (queued)
		*queued = 0;
	if (left > 0 && RDMA_MSG_HDR + left <= ep->peer_msg_size) {
		pthread_mutex_lock(&ep->mu);
		r = tx_eager(ep, iov, iovcnt, left);
		pthread_mutex_unlock(&ep->mu);
		if (r)
			return r < 0 ? r : 0;
	}
	pthread_mutex_lock(&ep->send_lock);
	/* The frame under construction: one per connection, under send_lock. */
	txf *t = ep->txf;
	if (!t && !(t = ep->txf = malloc(sizeof(*t)))) {
		pthread_mutex_unlock(&ep->send_lock);
		return TRANSPORT_ENOMEM;
	}
	t->ep = ep;
	t->wait = wait;
	t->async = NULL;
	t->queued = 0;
	pthread_mutex_lock(&ep->mu);
	ep->tx_active = 1;
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
		if (RDMA_FRAME_HDR + total <= ep->peer_msg_size) {
			if (nbatch && t->used + PROTO_HDR_SIZE + total > ep->peer_msg_size) {
				r = tx_batch(t, nbatch);
				nbatch = 0;
				if (r)
					break;
			}
			if (!nbatch)
				t->used = RDMA_MSG_HDR;
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
		t->async = left == 0 ? async : NULL; /* only the call's last frame */
		r = tx_frame(ep, t, hb, &h, &c);
	}
	if (!r && nbatch)
		r = tx_batch(t, nbatch);
	if (queued)
		*queued = !r && t->queued;
	ep->tx_active = 0;
	pthread_mutex_unlock(&ep->mu);
	pthread_mutex_unlock(&ep->send_lock);
	return r;
}

int tp_rdma_ep_send_eager_nb(rdma_ep *ep, const void *frame, size_t len)
{
	if (!ep->qp || ep->qp_dead || ep->credits < 1 || !tp_rdma_ep_has_slot(ep) || len < PROTO_HDR_SIZE ||
	    RDMA_MSG_HDR + len > ep->peer_msg_size)
		return TRANSPORT_EIO;
	uint8_t *slot = ep->sbuf + (size_t)(ep->s_posted % RDMA_NSEND) * RDMA_MSG_SIZE;
	rmsg *m = (rmsg *)slot;
	memset(m, 0, sizeof(*m));
	m->type = RM_FRAME;
	m->flags = RMF_LAST;
	m->inl = (uint32_t)(len - PROTO_HDR_SIZE);
	memcpy(slot + RDMA_MSG_HDR, frame, len);
	return tp_rdma_ep_post_msg(ep, (uint32_t)(RDMA_MSG_HDR + len));
}
