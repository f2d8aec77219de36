/*
 * transport, server side (remote-gpud): listeners on a libuv loop. The
 * lifetime and threading contract is the top comment of transport.h
 * ("Server connection", "Listener"). Kept apart so that the client
 * (libremote.so) includes no libuv.
 */
#ifndef TRANSPORT_SERVER_H
#define TRANSPORT_SERVER_H

#include <uv.h>

#include "transport.h"

/* Server: the upper layer's side of a listener. Callbacks run on the loop thread. */
typedef struct transport_server_cb {
	/* A new connection; returns the upper layer's per-connection object or NULL to refuse. */
	void *(*on_accept)(void *ctx, transport_conn *c);
	transport_payload_dest_fn payload_dest; /* ctx = the per-connection object */
	/* A whole frame arrived; ownership of f->msg passes to the callee (free it
	 * with transport_frame_free). f itself is only valid during the call. */
	void (*on_frame)(void *conn_ctx, transport_frame *f);
	/* The connection failed or closed (err explains); no callback follows for it.
	 * The upper layer calls transport_close when it no longer uses c. */
	void (*on_close)(void *conn_ctx, int err);
	/* Optional (tcp): when set, an accepted connection is not served here but
	 * handed over as a descriptor of its own (close-on-exec set), e.g. to serve
	 * it in another process with transport_adopt; on_accept is then not called
	 * for it. peer is "host:port" for logs. */
	void (*on_accept_fd)(void *ctx, int fd, const char *peer);
	/* Optional (rdma, whose connections cannot change process): when set, a
	 * connection request is not served here. The upper layer has another
	 * listener take it (a session process listening on the same address) and
	 * returns that listener's port, and in *cookie a secret the client is
	 * given with it and presents there (transport_conn.cookie), so that only
	 * that client is served there; the client connects again by itself. A
	 * return outside 1..65535 refuses the request. (The redirect crosses the
	 * network in clear: transport_connect_cookie is the way to hand a cookie
	 * over inside an encrypted channel.) */
	int (*on_redirect)(void *ctx, const char *peer, transport_cookie *cookie);
	/* Optional (tcp, tls, rdma; last, so positional initialisers of the slots above
	 * stay right): each frame's fixed header, before the rest of the frame
	 * is read or any memory is allocated for it; 0 refuses the frame and ends
	 * the connection (the upper layer logs why). Lets a server spend nothing
	 * on what a peer that has not authenticated sends. */
	int (*frame_ok)(void *conn_ctx, const proto_hdr *h);
} transport_server_cb;

typedef struct transport_listener transport_listener;

transport_err transport_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		     transport_listener **out);
void transport_listener_close(transport_listener *l);
/* The port the listener is bound to: the one asked for, or the one the kernel
 * chose when asked for port 0 (tests, and logs of the actual address). */
int transport_listener_port(const transport_listener *l);

/* Serves one already connected socket (fd, from on_accept_fd in another process)
 * as if it had just been accepted: on_accept runs for it, then the usual
 * callbacks. The returned listener owns the connection's machinery: close it
 * with transport_listener_close as any other. tcp and tls only (tls: the
 * handshake happens here, in the process that serves the connection). */
transport_err transport_adopt(uv_loop_t *loop, const char *scheme, int fd, const transport_server_cb *cb, void *ctx,
		    transport_listener **out);

#endif
