/*
 * transport: moves frames between client and server. Knows frames (protocol.h's
 * fixed header), nothing about CUDA.
 *
 * Client side (libremote.so): blocking calls from the caller's thread, lowest
 * latency. transport_sendv is thread-safe (one frame = one write, never interleaved);
 * transport_recv_frame is called by one thread at a time.
 *
 * Server side (remote-gpud): a listener on the libuv loop reads frames and hands them
 * to the upper layer through callbacks; sending is a blocking, thread-safe
 * transport_sendv from any thread (executor or waiter threads).
 *
 * Payloads are received straight into memory that the upper layer chooses: the
 * transport calls payload_dest after the msgpack part of a frame arrived, and
 * receives the payload there (NULL means: discard it).
 *
 * This header is the client's (and the connections' of both sides): it needs
 * no libuv. The server's listener (transport_listen, transport_adopt and the
 * callbacks) is in transport_server.h, which includes <uv.h>.
 *
 * Implementations plug in as providers (transport/README.md): the operations
 * of a connection are its transport_ops; an optional one a provider lacks is
 * answered here (TRANSPORT_ENOTSUP, or its documented default), so callers
 * never check for NULL; what a connection can do is transport_caps.
 *
 * Lifetime and threading contract
 * -------------------------------
 * Client connection (transport_connect):
 *  - transport_sendv: any thread, blocking; the iovecs of one call go out
 *    contiguously (one frame, or a batch of frames), never interleaved with
 *    another thread's. Returns 0 or an error; after a failure the connection is
 *    unusable (the stream may be mid-frame) and every later call fails.
 *  - transport_recv_frame: one thread at a time, blocking. Returns 0, a
 *    TRANSPORT_E* error, or the PROTO_E* error of a malformed header (errors are
 *    latched: the stream cannot be resynchronised). TRANSPORT_ECLOSED means the
 *    peer closed between frames, or transport_shutdown was called; a close in
 *    the middle of a frame is TRANSPORT_EIO.
 *  - transport_shutdown: any thread, at any time, idempotent; wakes threads
 *    blocked in send or recv, which return TRANSPORT_ECLOSED.
 *  - transport_progress: any thread; see there.
 *  - transport_close: once, when no other thread is inside a call on c
 *    (shut down, join the users, then close). Frees c.
 *
 * Server connection (handed to on_accept):
 *  - Callbacks (on_accept, payload_dest, on_frame, on_close) run on the loop
 *    thread. on_close is called exactly once for every connection whose
 *    on_accept returned non-NULL, whatever ends it: the peer, a malformed
 *    frame (err = PROTO_E*), a failed write, transport_shutdown/transport_close,
 *    or transport_listener_close. No callback for c follows on_close (but
 *    on_frame may run until then, even after another thread's shutdown). The
 *    conn_ctx must stay valid until on_close ran. on_close's err:
 *    TRANSPORT_ECLOSED (clean close by either side), TRANSPORT_EIO (reset,
 *    or EOF inside a frame), a PROTO_E* code (malformed header), or
 *    TRANSPORT_ENOMEM.
 *  - If on_accept returns NULL the connection is refused and closed; c is
 *    invalid once on_accept returns (do not transport_close it).
 *  - transport_sendv: any thread (executor, waiter, or the loop thread itself,
 *    though there it blocks the loop while the peer does not read); blocking,
 *    thread-safe, frames never interleave. Returns TRANSPORT_ECLOSED once the
 *    connection is shut down or closed.
 *  - transport_recv_frame: TRANSPORT_ENOTSUP (frames arrive through on_frame).
 *  - transport_shutdown: any thread; stops I/O at once (blocked senders return
 *    TRANSPORT_ECLOSED) and has on_close(conn_ctx, TRANSPORT_ECLOSED) called on
 *    the loop thread soon after, unless on_close already ran.
 *  - transport_close: any thread, exactly once per accepted connection, when the
 *    upper layer no longer uses c (typically from on_close, or after joining
 *    the session's threads). It implies transport_shutdown, so on_close still
 *    follows if it has not run yet. Memory is freed when both transport_close
 *    was called and the loop closed the handle, whichever comes last.
 *
 * Listener:
 *  - transport_listen: on the loop thread, or before the loop runs.
 *  - transport_listener_close: any thread, exactly once. The loop thread then
 *    stops accepting and ends every open connection (on_close each). The loop
 *    must keep running until that is done; afterwards the listener holds no
 *    handle, so uv_run(UV_RUN_DEFAULT) returns when nothing else is active.
 *    on_accept may run until the loop thread handled the close (never after
 *    a call made on the loop thread), so the listener's ctx must live until
 *    then (e.g. until uv_run returned). Connections the upper layer has not
 *    transport_close'd stay allocated until it does (that needs no loop).
 */
#ifndef TRANSPORT_H
#define TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto.h"

/* Errors of the transport boundary: every transport_* function that can fail
 * returns one (TRANSPORT_OK: none), and on_close (transport_server.h) gets
 * one. A frame whose header the peer got wrong ends the connection with the
 * protocol's own code passed through (PROTO_E* of proto_decode_hdr, -1 ..
 * -99), so that the caller can tell a version mismatch; nothing else of the
 * protocol's space comes out. transport_strerror and transport_err_name
 * name both kinds. */
typedef enum transport_err {
	TRANSPORT_OK = 0,
	TRANSPORT_EIO = -100,      /* connection broken or reset */
	TRANSPORT_ECLOSED = -101,  /* peer closed */
	TRANSPORT_EADDR = -102,    /* bad address / scheme */
	TRANSPORT_ECONNECT = -103, /* could not connect */
	TRANSPORT_ENOTSUP = -104,
	TRANSPORT_ETIMEDOUT = -105,
	TRANSPORT_ENOMEM = -106,
	/* protocol errors from a received header are passed through (PROTO_E*) */
} transport_err;

/* What err means (a PROTO_E* code: proto_strerror's text). */
const char *transport_strerror(int err);
/* err's name ("TRANSPORT_ECLOSED", "PROTO_EMAGIC"), for logs. */
const char *transport_err_name(int err);

typedef struct transport_conn transport_conn;

/* A received frame. msg holds hdr.hdr_len bytes, NULL when hdr_len is 0: heap
 * memory owned by the frame, or, when msg_lent is set, the transport's receive
 * buffer lent to on_frame, valid until on_frame returns (the rdma server lends
 * a frame without payload that came whole in one message: no allocation and no
 * copy on the way to a call that runs at once). A receiver that keeps such a
 * frame longer calls transport_frame_keep first. payload points where
 * payload_dest said (or is NULL). followed (servers, a hint): bytes of the
 * stream behind this frame were read with it, so another frame is at hand
 * (tcp and tls set it; 0 elsewhere). */
typedef struct transport_frame {
	proto_hdr hdr;
	uint8_t *msg;
	void *payload;
	int msg_lent;
	int followed;
} transport_frame;

void transport_frame_free(transport_frame *f); /* frees msg only (a lent one is not ours) */
/* Makes a lent msg the frame's own, a heap copy: TRANSPORT_OK, or
 * TRANSPORT_ENOMEM (the frame is then unchanged). */
transport_err transport_frame_keep(transport_frame *f);

/* Returns where the payload of a frame goes (at least f->hdr.payload_len writable
 * bytes), or NULL to drop it. Called once per frame whose payload_len > 0, after
 * the msgpack part arrived and before any payload byte is read; on the server the
 * transport reads straight into it. To refuse a frame, return NULL and fail the
 * request when on_frame sees f->payload == NULL (or transport_shutdown the
 * connection). If the connection ends before the payload is complete, on_close
 * comes instead of on_frame: the destination stays the upper layer's to
 * release (it must not be freed while the frame may still arrive). */
typedef void *(*transport_payload_dest_fn)(void *ctx, const transport_frame *f);

/* A registered memory region (RDMA: an MR; tcp: nothing). */
typedef struct transport_mr {
	void *addr;
	size_t len;
	uint32_t lkey, rkey;
	void *impl;
} transport_mr;

/* The end of a transport_sendv_async: err 0 once nothing reads the caller's
 * buffers any more. It must not call into the transport. */
typedef void (*transport_sent_fn)(void *ctx, int err);

/*
 * What a provider's connections can do, so that upper layers ask rather than
 * compare scheme names (transport_caps). A new provider sets the flags that
 * hold for it and every caller follows.
 */
enum transport_cap {
	/* reg_mem pins memory and names it with keys: a payload sent from or
	 * received into registered memory moves without a copy (rdma). Without
	 * it reg_mem only records addr/len (the kernel copies during the call). */
	TRANSPORT_CAP_REG_MEM = 1u << 0,
	/* sendv_async may finish after it returned: the peer reads a payload in
	 * place, so done() can come later (rdma, server side). */
	TRANSPORT_CAP_ZERO_COPY = 1u << 1,
	/* Shared regions (transport_region_share/_get/_drop) work (shm). */
	TRANSPORT_CAP_REGIONS = 1u << 2,
	/* Waits poll memory for a while before sleeping (rdma: the CQ; shm: the
	 * rings), as their *_SPIN_US settings say. */
	TRANSPORT_CAP_BUSY_POLL = 1u << 3,
	/* What crosses is encrypted and the server authenticated (tls). */
	TRANSPORT_CAP_ENCRYPTED = 1u << 4,
	/* Reaches only the host it runs on (shm). */
	TRANSPORT_CAP_LOCAL = 1u << 5,
	/* An accepted connection can move to another process as a descriptor
	 * (on_accept_fd, transport_adopt: tcp, tls, shm). */
	TRANSPORT_CAP_ADOPT = 1u << 6,
};

typedef struct transport_ops {
	const char *scheme;
	unsigned caps; /* TRANSPORT_CAP_* */
	int (*sendv)(transport_conn *c, const struct iovec *iov, int iovcnt);
	/* Optional: transport_sendv_async (NULL: sendv, then done at once). */
	int (*sendv_async)(transport_conn *c, const struct iovec *iov, int iovcnt, transport_sent_fn done, void *ctx);
	int (*recv_frame)(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx);
	int (*reg_mem)(transport_conn *c, void *addr, size_t len, transport_mr **out);
	int (*dereg_mem)(transport_conn *c, transport_mr *mr);
	/* Stops further I/O; pending and later calls fail with TRANSPORT_ECLOSED. */
	void (*shutdown)(transport_conn *c);
	void (*close)(transport_conn *c);
	/* Optional (NULL: always 0): transport_progress. */
	uint64_t (*progress)(transport_conn *c);
	/* Optional (NULL: TRANSPORT_ENOTSUP): shared regions, see below. */
	int (*region_share)(transport_conn *c, int fd, uint64_t len, uint32_t *id);
	int (*region_get)(transport_conn *c, uint32_t id, uint64_t off, uint64_t len, void **addr);
	int (*region_drop)(transport_conn *c, uint32_t id);
} transport_ops;

/* A one-time secret that admits a client to a listener it was sent to (rdma:
 * a session process's port): 128 random bits, so that it cannot be guessed
 * in the time it is valid. All zero: none. */
#define TRANSPORT_COOKIE_LEN 16
typedef struct transport_cookie {
	uint8_t b[TRANSPORT_COOKIE_LEN];
} transport_cookie;

/* Whether a and b are equal, in time independent of where they differ; an
 * all-zero cookie equals nothing (it means none was presented). */
int transport_cookie_equal(const transport_cookie *a, const transport_cookie *b);

struct transport_conn {
	const transport_ops *ops;
	char peer[64]; /* "host:port" of the other end, for logs */
	/* Server side: the cookie the client presented, which it was given when it
	 * was sent here (on_redirect, or out of band: transport_connect_cookie);
	 * all zero when none. */
	transport_cookie cookie;
};

/* Parsed "[scheme://]host:port": scheme "tcp" when absent, an IPv6 host in
 * brackets ("[::1]:7420", host is then "::1"), port 0-65535 (0: listen on any
 * free port). Returns TRANSPORT_EADDR and logs the reason on a bad address. */
typedef struct transport_addr {
	char scheme[16];
	char host[256];
	int port;
	int scheme_given; /* the address named its scheme ("tcp://..."), not the default */
} transport_addr;

transport_err transport_parse_addr(const char *s, transport_addr *out);

/* Whether every address host resolves to is a loopback one (127/8, ::1):
 * the server listens in clear there only. 0 when it does not resolve. */
int transport_addr_is_loopback(const transport_addr *a);

/* TLS (scheme "tls": TCP inside TLS 1.3, OpenSSL). Server: the certificate
 * chain and key (PEM files) every tls listener and adopted tls connection of
 * this process presents, and with client_ca (may be NULL) the CA that must
 * have signed a client's certificate (clients without one are refused).
 * Returns TRANSPORT_OK, or TRANSPORT_EADDR after logging what is wrong with
 * which file. The client reads REMOTE_GPU_TLS_CA, REMOTE_GPU_TLS_CERT and
 * REMOTE_GPU_TLS_KEY (transport/tcp/tls.c). */
transport_err transport_tls_server_setup(const char *cert, const char *key, const char *client_ca);
int transport_tls_server_ready(void);

/* Client: connect by scheme (tcp, tls, rdma, shm), giving up after timeout_ms
 * (0: no limit of our own, the kernel's and the transport's defaults apply):
 * everything up to a usable connection (each address the host resolves to, in
 * turn, a share of the time each, and the TLS handshake) fits in it, so that an
 * unreachable host (SYNs dropped) fails in timeout_ms, not in the kernel's two
 * minutes. Returns TRANSPORT_ETIMEDOUT when time ran out. Name resolution
 * itself (getaddrinfo) is not bounded. */
transport_err transport_connect_within(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
static inline transport_err transport_connect(const transport_addr *a, transport_conn **out)
{
	return transport_connect_within(a, 0, out);
}
/* Like transport_connect_within, presenting cookie to the listener, which
 * sees it in transport_conn.cookie: a client that was given a port and a
 * cookie out of band (inside TLS, say) goes straight there. rdma only (it
 * travels in the connection request's private data); TRANSPORT_ENOTSUP for
 * other schemes. A listener that sends the client on (on_redirect) is not
 * followed: the cookie was for that listener alone. */
transport_err transport_connect_cookie(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
			     transport_conn **out);

/* Server side, for an upper layer that gives a connection a thread of its
 * own (remote-gpud's stripes: a session's extra connections for bulk copies,
 * each received and sent on its own thread, as one loop thread moves no more
 * than one core's worth of bytes): serves fd, a socket accepted through
 * on_accept_fd, with the blocking operations of a client connection
 * (transport_sendv from any thread, transport_recv_frame from one at a time,
 * shutdown, progress, close). The socket buffers follow REMOTE_GPU_TCP_BUF_KB
 * as a client's do (transport/README.md, "Bulk copies"). tcp only:
 * TRANSPORT_ENOTSUP elsewhere (fd stays the caller's then; on success it is
 * the connection's). */
transport_err transport_wrap_fd(const char *scheme, int fd, transport_conn **out);

static inline transport_err transport_sendv(transport_conn *c, const struct iovec *iov, int n)
{
	return c->ops->sendv(c, iov, n);
}
/* Like transport_sendv, but the caller's buffers may still be in use when it
 * returns: done(ctx, err) runs once they are not (rdma, server side: a payload
 * sent zero-copy, when the peer has read it, on the loop thread, or with an
 * error when the connection ends; every other case before this returns). So a
 * sender need not wait for the peer before its next frame. Returns 0, and done
 * runs exactly once later or already ran; or an error, and done never runs. */
static inline transport_err transport_sendv_async(transport_conn *c, const struct iovec *iov, int n, transport_sent_fn done,
					void *ctx)
{
	if (c->ops->sendv_async)
		return c->ops->sendv_async(c, iov, n, done, ctx);
	int r = c->ops->sendv(c, iov, n);
	if (r == 0)
		done(ctx, 0);
	return r;
}
static inline transport_err transport_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	return c->ops->recv_frame(c, f, dest, ctx);
}
static inline void transport_shutdown(transport_conn *c) { c->ops->shutdown(c); }
/* The TRANSPORT_CAP_* flags of c's provider. */
static inline unsigned transport_caps(const transport_conn *c) { return c->ops->caps; }
/* Registers [addr, addr+len) for c (see TRANSPORT_CAP_REG_MEM); every
 * provider answers, so callers treat every transport alike. */
static inline transport_err transport_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	return c->ops->reg_mem(c, addr, len, out);
}
static inline transport_err transport_dereg_mem(transport_conn *c, transport_mr *mr) { return c->ops->dereg_mem(c, mr); }
/* Client side, any thread: a count that grows whenever the peer shows life on
 * the connection (tcp: bytes received, and a large frame of ours going out
 * past what our own buffers took, a step per MiB in either direction; rdma:
 * messages heard from the peer's process). Only its changes mean anything:
 * a caller that expects an answer and sees it stand still knows the peer is
 * silent (the frontend's liveness watchdog: only the caller knows whether
 * silence is wrong, as a call may rightly take an hour). 0 where not counted. */
static inline uint64_t transport_progress(transport_conn *c)
{
	return c->ops->progress ? c->ops->progress(c) : 0;
}
static inline void transport_close(transport_conn *c) { c->ops->close(c); }

/* Shared regions (shm only; TRANSPORT_ENOTSUP elsewhere): memory the client
 * made as a sealed memfd that the server maps too, so the upper layers can
 * move bulk data through it without the rings (the transport knows nothing
 * of what they do with it). The client gives the memfd to
 * transport_region_share, which sends it to the server beside the rings and
 * returns the region's id; the upper layer names the region in its frames by
 * that id. It may close fd afterwards (the transport does not keep it).
 * The server maps a region when it arrives; transport_region_get answers the
 * server's address of bytes [off, off+len) of region id, or TRANSPORT_EADDR
 * when id names no region of this connection or the range does not lie
 * inside it (never an address outside the region). The id is known by the
 * time a frame sent after transport_region_share is received.
 * transport_region_drop (server) unmaps it; every region left is unmapped
 * when the connection is freed (after on_close and transport_close: the
 * upper layer may still use the mappings between the two). A region must
 * be sealed against shrinking (F_SEAL_SHRINK) and be at least as large as
 * the client said, else the connection ends with TRANSPORT_EIO. Client:
 * any thread; server: any thread. */
static inline transport_err transport_region_share(transport_conn *c, int fd, uint64_t len, uint32_t *id)
{
	return c->ops->region_share ? c->ops->region_share(c, fd, len, id) : TRANSPORT_ENOTSUP;
}
static inline transport_err transport_region_get(transport_conn *c, uint32_t id, uint64_t off, uint64_t len, void **addr)
{
	return c->ops->region_get ? c->ops->region_get(c, id, off, len, addr) : TRANSPORT_ENOTSUP;
}
static inline transport_err transport_region_drop(transport_conn *c, uint32_t id)
{
	return c->ops->region_drop ? c->ops->region_drop(c, id) : TRANSPORT_ENOTSUP;
}

#endif
