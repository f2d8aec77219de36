/*
 * The bytes of a copy between a host buffer and device memory, on a session's
 * connection: large ones over tcp striped across extra connections first
 * (stripe.c); otherwise host-to-device data goes out as the payload of async
 * frames, straight from the caller's buffer (writev), cut into FE_COPY_CHUNK
 * pieces so the server's copy to the GPU overlaps the wire. Device-to-host
 * chunks are requested back to back and land straight in the caller's buffer;
 * a synchronous copy waits for all of them, an async one lets the receiver
 * thread fill the buffer while the program goes on (its next synchronisation
 * waits for them). What calls these (rt_copy.c, managed.c, rt_peer.c) checks
 * the ranges first.
 */
#include <string.h>

#include "rpc.h"
#include "rt.h"
#include "stripe.h"

int fe_copy_htod(fe_conn *c, uint64_t dst, const uint8_t *src, size_t len, uint64_t sid)
{
	int st;
	if (fe_stripe_htod(c, dst, src, len, sid, &st)) /* large, over tcp: several connections */
		return st;
	for (size_t off = 0; off < len; off += FE_COPY_CHUNK) {
		size_t n = len - off < FE_COPY_CHUNK ? len - off : FE_COPY_CHUNK;
		int st = fe_rpc_memcpy_htod(c, dst + off, sid, src + off, n);
		if (st)
			return st;
	}
	return 0;
}

static void begin_dtoh(proto_msg *m, fe_conn *c, uint64_t src, uint64_t n, uint64_t sid)
{
	proto_msg_begin(m, PROTO_OP_MEMCPY_DTOH, fe_conn_next_seq(c), 3);
	proto_msg_u64(m, src);
	proto_msg_u64(m, n);
	proto_msg_u64(m, sid);
}

/* Copies to the host come back in smaller pieces than they go out: the server
 * can start sending a piece only once the GPU copied all of it, so smaller pieces
 * overlap the GPU's copy with the wire sooner. A window of requests in flight
 * keeps the pipeline full without queueing unbounded staging on the server. */
#define DTOH_CHUNK (1u << 20)
#define DTOH_WINDOW 16

int fe_copy_dtoh(fe_conn *c, uint8_t *dst, uint64_t src, size_t len, uint64_t sid, int async)
{
	if (async) {
		for (size_t off = 0; off < len; off += DTOH_CHUNK) {
			size_t n = len - off < DTOH_CHUNK ? len - off : DTOH_CHUNK;
			proto_msg m;
			begin_dtoh(&m, c, src + off, n, sid);
			int st = fe_conn_begin_detached(c, &m, dst + off, n);
			if (st)
				return st;
		}
		return 0;
	}
	int st;
	if (fe_stripe_dtoh(c, dst, src, len, sid, &st))
		return st;
	fe_pending p[DTOH_WINDOW];
	size_t nchunks = (len + DTOH_CHUNK - 1) / DTOH_CHUNK, sent = 0, done = 0;
	int result = 0;
	while (done < nchunks) {
		while (sent < nchunks && sent - done < DTOH_WINDOW) {
			size_t off = sent * (size_t)DTOH_CHUNK, n = len - off < DTOH_CHUNK ? len - off : DTOH_CHUNK;
			fe_pending *q = &p[sent % DTOH_WINDOW];
			memset(q, 0, sizeof(*q));
			q->dest = dst + off;
			q->dest_len = n;
			proto_msg m;
			begin_dtoh(&m, c, src + off, n, sid);
			int st = fe_conn_begin(c, &m, NULL, 0, q);
			if (st)
				return st; /* channel dead: every outstanding chunk failed too */
			sent++;
		}
		int st = fe_conn_wait(c, &p[done % DTOH_WINDOW]);
		if (st && !result)
			result = st;
		done++;
	}
	return result;
}
