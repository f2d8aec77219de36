/*
 * The servers' frame assembler (tcp_server.c, shm_server.c): a connection's
 * bytes, in whatever pieces they come, become frames: the fixed header (into
 * our own buffer, checked before anything is allocated: magic as soon as its
 * first bytes are in, then proto_decode_hdr and the upper layer's frame_ok),
 * the msgpack part (into an allocation whose ownership on_frame takes), the
 * payload (into what payload_dest chose, or dropped). The caller moves the
 * bytes: tp_frame_rx_want says where the next ones go and how many the frame
 * still wants there, tp_frame_rx_took that they are there. Loop thread only.
 */
#ifndef FRAME_RX_H
#define FRAME_RX_H

#include "transport_server.h"

enum frame_rx_state { FRAME_RX_HDR, FRAME_RX_MSG, FRAME_RX_PAYLOAD };

typedef struct frame_rx {
	enum frame_rx_state state;
	size_t got; /* bytes of the current part in */
	uint8_t hdr[PROTO_HDR_SIZE];
	transport_frame frame;
} frame_rx;

/* Where the next bytes go (*dst; NULL: a payload nobody wants, to be dropped)
 * and at most how many: what the current part still lacks. */
size_t tp_frame_rx_want(frame_rx *r, uint8_t **dst);
/* n bytes (at most tp_frame_rx_want's) landed where it said. Returns 0, 1 when a
 * callback of cb ran (payload_dest or on_frame: the caller looks whether the
 * upper layer shut the connection down), or an error that ends the
 * connection: PROTO_E* (a bad header, logged; PROTO_EVERSION: the caller may
 * answer with proto_msg_version_reply), TRANSPORT_ECLOSED (frame_ok refused
 * it), TRANSPORT_ENOMEM. */
int tp_frame_rx_took(frame_rx *r, size_t n, const transport_server_cb *cb, void *conn_ctx, const char *peer);
/* Whether the stream is between frames (an end there is a clean close). */
static inline int frame_rx_at_boundary(const frame_rx *r) { return r->state == FRAME_RX_HDR && r->got == 0; }
/* Frees what a frame cut short holds of ours (its msgpack part). */
void tp_frame_rx_drop(frame_rx *r);

#endif
