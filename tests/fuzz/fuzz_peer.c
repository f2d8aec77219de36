/*
 * libFuzzer target for the peer listener's side of server to server copies
 * (backend/src/peer_recv.c): what another server, or anyone who reaches the
 * peer port, sends before and after presenting a ticket. Each input is the
 * bytes of one peer connection (frames as they travel: 40-byte header,
 * msgpack part, payload), fed through the listener's own callbacks
 * (be_peer_callbacks: frame_ok, payload_dest, on_frame) as the transport
 * does, stopping where the transport would (a refused header, a shut
 * connection), then on_close.
 *
 * A ticket is issued before each input for a range of no session (so chunks
 * are checked and parsed, then dropped as for a session that ended); 16 bytes
 * of 0xAA in a frame's msgpack part are replaced by it, so inputs can present
 * the real ticket (corpus_peer has such seeds). Every frame the listener
 * sends must decode as a reply.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "peer.h"
#include "proto.h"

be_server be_srv; /* main.c's in remote-gpud */

static uv_loop_t loop;
static uint8_t ticket[BE_PEER_TICKET_LEN];

typedef struct fconn {
	transport_conn c; /* first */
	int shut;
} fconn;

static int fc_sendv(transport_conn *c, const struct iovec *iov, int iovcnt)
{
	proto_hdr h;
	if (((fconn *)c)->shut)
		return TRANSPORT_ECLOSED;
	if (iovcnt != 1 || iov[0].iov_len < PROTO_HDR_SIZE || proto_decode_hdr(iov[0].iov_base, &h) != PROTO_OK ||
	    !(h.flags & PROTO_F_REPLY) || h.payload_len != 0 || iov[0].iov_len != PROTO_HDR_SIZE + h.hdr_len)
		__builtin_trap();
	return 0;
}

static int fc_recv(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	return TRANSPORT_ECLOSED;
}

static int fc_reg(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	*out = NULL;
	return 0;
}

static int fc_dereg(transport_conn *c, transport_mr *mr) { return 0; }
static void fc_shutdown(transport_conn *c) { ((fconn *)c)->shut = 1; }
static void fc_close(transport_conn *c) { free(c); }

static const transport_ops fc_ops = {
	.scheme = "fuzz",
	.sendv = fc_sendv,
	.recv_frame = fc_recv,
	.reg_mem = fc_reg,
	.dereg_mem = fc_dereg,
	.shutdown = fc_shutdown,
	.close = fc_close,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	uv_loop_init(&loop);
	if (!getenv("REMOTE_GPU_LOG"))
		setenv("REMOTE_GPU_LOG", "error", 1);
	rg_log_init("fuzz_peer");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const transport_server_cb *cb = be_peer_callbacks();
	static const uint8_t mark[BE_PEER_TICKET_LEN] = {0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa,
							 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa};
	be_peer_grant g = {.len = size ? 1 + data[0] * 97u : 4096};
	if (be_peer_ticket_issue(&g, ticket) != 0)
		__builtin_trap();

	fconn *fc = calloc(1, sizeof(*fc));
	fc->c.ops = &fc_ops;
	strcpy(fc->c.peer, "fuzz:1");
	void *x = cb->on_accept(&loop, &fc->c);
	if (!x) {
		free(fc);
		return 0;
	}
	size_t at = size ? 1 : 0;
	while (at + PROTO_HDR_SIZE <= size && !fc->shut) {
		transport_frame f = {0};
		if (proto_decode_hdr(data + at, &f.hdr) != PROTO_OK || !cb->frame_ok(x, &f.hdr))
			break;
		at += PROTO_HDR_SIZE;
		if (f.hdr.hdr_len > size - at)
			break;
		if (f.hdr.hdr_len) {
			f.msg = malloc(f.hdr.hdr_len);
			memcpy(f.msg, data + at, f.hdr.hdr_len);
			for (uint32_t i = 0; i + BE_PEER_TICKET_LEN <= f.hdr.hdr_len; i++)
				if (!memcmp(f.msg + i, mark, sizeof(mark)))
					memcpy(f.msg + i, ticket, sizeof(ticket));
			at += f.hdr.hdr_len;
		}
		if (f.hdr.payload_len) {
			void *p = cb->payload_dest(x, &f);
			size_t n = f.hdr.payload_len < size - at ? (size_t)f.hdr.payload_len : size - at;
			if (n < f.hdr.payload_len) { /* cut short: the transport closes instead */
				free(f.msg);
				break;
			}
			if (p)
				memcpy(p, data + at, n);
			f.payload = p;
			at += n;
		}
		cb->on_frame(x, &f);
	}
	cb->on_close(x, TRANSPORT_ECLOSED);
	uv_run(&loop, UV_RUN_NOWAIT); /* the deadline timer's close frees the connection */
	be_peer_ticket_forget(NULL);  /* this input's ticket (of no session), spent or not */
	return 0;
}
