/*
 * Receiving frames over an rdma connection (rdma_int.h has the protocol): the
 * FRAME, SEGS and BATCH messages that the completion handler (rdma_ep.c) queued
 * in rq are taken in order; inline bytes are copied out (the server lends a
 * whole frame without payload in its receive buffer instead, until the
 * consumer is done: tp_rdma_ep_rx_release), announced segments are pulled with
 * RDMA READs straight into the destination when it is registered, else
 * through the landing ring. One thread at a time runs this side.
 */
#include <stdlib.h>
#include <string.h>

#include "rdma_int.h"
#include "rg_log.h"

static const rmsg *rq_msg(const rdma_ep *ep, uint32_t *len)
{
	unsigned idx = ep->rq[ep->rq_head];
	*len = ep->rq_len[ep->rq_head];
	return (const rmsg *)(ep->rbuf + (size_t)idx * RDMA_MSG_SIZE);
}

/* Takes the message at the queue's head; its buffer is still ours. */
static unsigned rq_take(rdma_ep *ep)
{
	unsigned idx = ep->rq[ep->rq_head];
	ep->rq_head = (ep->rq_head + 1) % RDMA_NRECV;
	ep->rq_n--;
	return idx;
}

static void rq_pop(rdma_ep *ep) { tp_rdma_ep_release_recv(ep, rq_take(ep)); }

void tp_rdma_ep_rx_release(rdma_ep *ep)
{
	if (ep->rx.lent) {
		tp_rdma_ep_release_recv(ep, ep->rx.lent - 1);
		ep->rx.lent = 0;
	}
}

static int proto_fail(rdma_ep *ep, const char *why)
{
	LOG_WARN("transport", "rdma: %s: protocol error: %s", ep->conn->peer, why);
	tp_rdma_ep_fail(ep, TRANSPORT_EIO);
	return TRANSPORT_EIO;
}

/* A frame header that proto_decode_hdr refused (e). Latched, but the QP stays
 * up: the server may still answer a peer of another version
 * (tp_rdma_ep_send_eager_nb) before closing. */
static int hdr_fail(rdma_ep *ep, int e)
{
	LOG_WARN("transport", "rdma: %s: bad frame header: %s", ep->conn->peer, proto_strerror(e));
	if (!ep->err)
		ep->err = e;
	tp_rdma_ep_wake(ep);
	return e;
}

/* Whether the upper layer takes the frame whose header was just decoded into
 * rx.f.hdr, asked before its msgpack part is allocated or any of it read
 * (RDMA READs of a large one): before authentication a server spends nothing
 * on a frame that is not a small hello, as tcp's frame_ok does. mu dropped
 * for the call, as for payload_dest: the hook may shut the connection down;
 * the message stays at the queue's head meanwhile (only this side takes it). */
static int rx_admit(rdma_ep *ep, rdma_frame_ok_fn ok, void *ctx)
{
	if (!ok)
		return 0;
	proto_hdr h = ep->rx.f.hdr;
	pthread_mutex_unlock(&ep->mu);
	int yes = ok(ctx, &h);
	pthread_mutex_lock(&ep->mu);
	if (yes)
		return 0;
	tp_rdma_ep_fail(ep, TRANSPORT_ECLOSED);
	return TRANSPORT_ECLOSED;
}

/* The frame's msgpack part (none when hl is 0: a reply that is a status only
 * costs no allocation). */
static int rx_alloc_msg(rdma_ep *ep, uint64_t hl)
{
	if (hl && !(ep->rx.f.msg = malloc(hl))) {
		tp_rdma_ep_fail(ep, TRANSPORT_ENOMEM);
		return TRANSPORT_ENOMEM;
	}
	return 0;
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
	x->dest_reg = p && tp_rdma_regs_find(&ep->regs, p, (size_t)x->f.hdr.payload_len, &x->dest_lkey, &rkey);
	return p;
}

/* The next frame of the BATCH at the head of the queue (whole, inline). */
static int rx_batch(rdma_ep *ep, rdma_frame_ok_fn ok, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	uint32_t len;
	const rmsg *m = rq_msg(ep, &len);
	int e;

	if (x->batch_left == 0) { /* a fresh one */
		if (m->nsegs < 2 || RDMA_MSG_HDR + (size_t)m->inl != len)
			return proto_fail(ep, "malformed batch");
		x->batch_off = RDMA_MSG_HDR;
		x->batch_left = m->nsegs;
	}
	const uint8_t *b = (const uint8_t *)m + x->batch_off;
	memset(&x->f, 0, sizeof(x->f));
	if (x->batch_off + PROTO_HDR_SIZE > len)
		return proto_fail(ep, "batch shorter than its frames");
	if ((e = proto_decode_hdr(b, &x->f.hdr)) != PROTO_OK)
		return hdr_fail(ep, e);
	uint64_t hl = x->f.hdr.hdr_len, total = hl + x->f.hdr.payload_len;
	if (x->batch_off + PROTO_HDR_SIZE + total > len)
		return proto_fail(ep, "batch shorter than its frames");
	if ((e = rx_admit(ep, ok, ctx)) != 0)
		return e;
	if (rx_alloc_msg(ep, hl) != 0)
		return TRANSPORT_ENOMEM;
	b += PROTO_HDR_SIZE;
	if (hl)
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
static int rx_begin(rdma_ep *ep, rdma_frame_ok_fn ok, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	uint32_t len;
	const rmsg *m = rq_msg(ep, &len);
	const uint8_t *b = (const uint8_t *)m;
	int e;

	if (m->type == RM_BATCH)
		return rx_batch(ep, ok, dest, ctx);
	if (m->type != RM_FRAME)
		return proto_fail(ep, "segments without a frame");
	if (len < RDMA_FRAME_HDR)
		return proto_fail(ep, "short frame message");
	memset(&x->f, 0, sizeof(x->f));
	if ((e = proto_decode_hdr(b + RDMA_MSG_HDR, &x->f.hdr)) != PROTO_OK)
		return hdr_fail(ep, e);
	uint64_t hl = x->f.hdr.hdr_len, total = hl + x->f.hdr.payload_len;
	uint32_t inl = m->inl;
	if (RDMA_FRAME_HDR + (size_t)inl > len || inl > total || (inl > hl && inl != total))
		return proto_fail(ep, "inline bytes do not fit the frame");
	if (inl == total && (!(m->flags & RMF_LAST) || m->nsegs))
		return proto_fail(ep, "segments after a complete frame");
	if ((e = rx_admit(ep, ok, ctx)) != 0)
		return e;
	/* A whole frame without payload, on the server: on_frame reads its
	 * msgpack part where it landed (see transport_frame). */
	int lend = ep->server && hl > 0 && inl == total && x->f.hdr.payload_len == 0;
	if (lend) {
		x->f.msg = (uint8_t *)b + RDMA_FRAME_HDR;
		x->f.msg_lent = 1;
	} else if (rx_alloc_msg(ep, hl) != 0) {
		return TRANSPORT_ENOMEM;
	}
	x->active = 1;
	x->total = total;
	x->issued = x->filled = inl;
	x->last = (m->flags & RMF_LAST) != 0;
	x->dest_asked = x->dest_reg = 0;
	x->sg_head = x->sg_n = 0;
	x->sg_off = 0;
	if (hl && inl && !lend)
		memcpy(x->f.msg, b + RDMA_FRAME_HDR, inl < hl ? inl : hl);
	if (inl == total && x->f.hdr.payload_len > 0) {
		/* Eager frame: the payload is in the receive buffer, which stays
		 * ours until rq_pop. */
		uint8_t *p = call_dest(ep, dest, ctx);
		if (p)
			memcpy(p, b + RDMA_FRAME_HDR + hl, (size_t)x->f.hdr.payload_len);
	}
	if (inl == total)
		ep->st.rx_inline++;
	int r = absorb_segs(ep, b, RDMA_ALIGN8(RDMA_FRAME_HDR + inl), m->nsegs, len);
	if (lend)
		x->lent = 1 + rq_take(ep);
	else
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
				if (tp_rdma_ep_ensure_ring(ep, &ep->landing, &ep->landing_mr, RDMA_NLANDING, IBV_ACCESS_LOCAL_WRITE))
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
			if (!tp_rdma_ep_has_sq_room(ep, 2))
				break;
			struct ibv_send_wr wr = {
				.sg_list = &sge,
				.num_sge = 1,
				.opcode = IBV_WR_RDMA_READ,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = {.remote_addr = s->addr + x->sg_off, .rkey = s->rkey},
			};
			if (tp_rdma_ep_post_wr(ep, &wr, (rdma_sqe){.kind = SQE_READ, .idx = (uint16_t)ri}) != 0)
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

int tp_rdma_ep_rx_busy(const rdma_ep *ep) { return ep->rx.active || ep->rq_n > 0; }

void tp_rdma_ep_rx_abort(rdma_ep *ep)
{
	transport_frame_free(&ep->rx.f);
	memset(&ep->rx.f, 0, sizeof(ep->rx.f));
	ep->rx.active = 0;
	tp_rdma_ep_rx_release(ep);
}

int tp_rdma_ep_rx(rdma_ep *ep, transport_frame *out, rdma_frame_ok_fn ok, transport_payload_dest_fn dest, void *ctx)
{
	rdma_rx *x = &ep->rx;
	int r;

	tp_rdma_ep_rx_release(ep);
	for (;;) {
		int progressed = 0;
		if (ep->err) {
			tp_rdma_ep_rx_abort(ep);
			return ep->err;
		}
		if (!x->active) {
			if (ep->rq_n == 0) {
				if (ep->peer_gone) {
					tp_rdma_ep_fail(ep, TRANSPORT_ECLOSED);
					return TRANSPORT_ECLOSED;
				}
				tp_rdma_ep_flush_ctrl(ep);
				return 0;
			}
			if ((r = rx_begin(ep, ok, dest, ctx)) != 0) {
				tp_rdma_ep_rx_abort(ep);
				return r;
			}
			progressed = 1;
		}
		/* more segments of this frame */
		while (!x->last && ep->rq_n > 0) {
			uint32_t len;
			const rmsg *m = rq_msg(ep, &len);
			if (m->type != RM_SEGS) {
				tp_rdma_ep_rx_abort(ep);
				return proto_fail(ep, "a new frame before the last one's segments");
			}
			if (x->sg_n + m->nsegs > RDMA_RXSEGS)
				break; /* room comes as reads are issued */
			if ((r = absorb_segs(ep, (const uint8_t *)m, RDMA_ALIGN8(RDMA_MSG_HDR), m->nsegs, len)) != 0) {
				tp_rdma_ep_rx_abort(ep);
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
			tp_rdma_ep_rx_abort(ep);
			return r;
		}
		progressed |= r;
		if (x->last && ((x->issued == x->total && x->sg_n > 0) || (x->issued < x->total && x->sg_n == 0))) {
			tp_rdma_ep_rx_abort(ep);
			return proto_fail(ep, "segments do not add up to the frame");
		}
		if (x->last && x->filled == x->total && x->sg_n == 0 && x->rd_n == 0) {
			if (x->f.hdr.payload_len == 0)
				x->f.payload = NULL;
			*out = x->f;
			memset(&x->f, 0, sizeof(x->f));
			x->active = 0;
			ep->st.rx_frames++;
			tp_rdma_ep_flush_ctrl(ep);
			return 1;
		}
		if (!progressed) {
			tp_rdma_ep_flush_ctrl(ep);
			if (ep->peer_gone) {
				/* No more bytes of this frame can come. */
				tp_rdma_ep_rx_abort(ep);
				tp_rdma_ep_fail(ep, TRANSPORT_EIO);
				return TRANSPORT_EIO;
			}
			return 0;
		}
	}
}
