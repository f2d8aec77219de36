/* The servers' frame assembler (frame_rx.h). */
#include "frame_rx.h"

#include <stdlib.h>
#include <string.h>

#include "rg_log.h"

size_t tp_frame_rx_want(frame_rx *r, uint8_t **dst)
{
	switch (r->state) {
	case FRAME_RX_HDR:
		*dst = r->hdr + r->got;
		return PROTO_HDR_SIZE - r->got;
	case FRAME_RX_MSG:
		*dst = r->frame.msg + r->got;
		return r->frame.hdr.hdr_len - r->got;
	case FRAME_RX_PAYLOAD:
		*dst = r->frame.payload ? (uint8_t *)r->frame.payload + r->got : NULL;
		return (size_t)r->frame.hdr.payload_len - r->got;
	}
	abort(); /* broken internal invariant, not peer input */
}

static void deliver(frame_rx *r, const transport_server_cb *cb, void *conn_ctx)
{
	transport_frame f = r->frame;
	memset(&r->frame, 0, sizeof(r->frame));
	r->state = FRAME_RX_HDR;
	r->got = 0;
	if (cb->on_frame)
		cb->on_frame(conn_ctx, &f);
	else
		free(f.msg);
}

/* The msgpack part is in: deliver, or find where the payload goes. */
static void msg_done(frame_rx *r, const transport_server_cb *cb, void *conn_ctx)
{
	if (r->frame.hdr.payload_len == 0) {
		deliver(r, cb, conn_ctx);
		return;
	}
	r->state = FRAME_RX_PAYLOAD;
	r->got = 0;
	if (cb->payload_dest)
		r->frame.payload = cb->payload_dest(conn_ctx, &r->frame);
}

/* The fixed header is in (our copy): check it, get ready for the rest. */
static int hdr_done(frame_rx *r, const transport_server_cb *cb, void *conn_ctx, const char *peer)
{
	int err = proto_decode_hdr(r->hdr, &r->frame.hdr);
	if (err == PROTO_EVERSION) {
		LOG_WARN("transport", "%s: peer speaks protocol version %u, we speak %u", peer, r->frame.hdr.version,
			 PROTO_VERSION);
		return err;
	}
	if (err) {
		LOG_WARN("transport", "%s: bad frame header: %s", peer, proto_strerror(err));
		return err;
	}
	r->frame.msg = NULL;
	r->frame.payload = NULL;
	if (cb->frame_ok && !cb->frame_ok(conn_ctx, &r->frame.hdr))
		return TRANSPORT_ECLOSED;
	if (r->frame.hdr.hdr_len && !(r->frame.msg = malloc(r->frame.hdr.hdr_len)))
		return TRANSPORT_ENOMEM;
	r->state = FRAME_RX_MSG;
	r->got = 0;
	return 0;
}

int tp_frame_rx_took(frame_rx *r, size_t n, const transport_server_cb *cb, void *conn_ctx, const char *peer)
{
	int err;
	r->got += n;
	switch (r->state) {
	case FRAME_RX_HDR:
		if (r->got < PROTO_HDR_SIZE) {
			/* another protocol is refused without waiting for a whole
			 * header it may never send */
			if (!proto_magic_prefix_ok(r->hdr, r->got)) {
				LOG_WARN("transport", "%s: bad frame header: %s", peer, proto_strerror(PROTO_EMAGIC));
				return PROTO_EMAGIC;
			}
			return 0;
		}
		if ((err = hdr_done(r, cb, conn_ctx, peer)) != 0)
			return err;
		if (r->frame.hdr.hdr_len)
			return 0;
		msg_done(r, cb, conn_ctx); /* no msgpack part to wait for */
		return 1;
	case FRAME_RX_MSG:
		if (r->got < r->frame.hdr.hdr_len)
			return 0;
		msg_done(r, cb, conn_ctx);
		return 1;
	case FRAME_RX_PAYLOAD:
		if (r->got < r->frame.hdr.payload_len)
			return 0;
		deliver(r, cb, conn_ctx);
		return 1;
	}
	abort(); /* broken internal invariant, not peer input */
}

void tp_frame_rx_drop(frame_rx *r)
{
	free(r->frame.msg);
	r->frame.msg = NULL;
}
