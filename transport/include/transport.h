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
 * Implementations plug in through transport_ops; every slot is filled (unsupported
 * operations return TRANSPORT_ENOTSUP), so callers never check for NULL.
 */
#ifndef TRANSPORT_H
#define TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <uv.h>

#include "proto.h"

enum transport_err {
	TRANSPORT_OK = 0,
	TRANSPORT_EIO = -100,      /* connection broken or reset */
	TRANSPORT_ECLOSED = -101,  /* peer closed */
	TRANSPORT_EADDR = -102,    /* bad address / scheme */
	TRANSPORT_ECONNECT = -103, /* could not connect */
	TRANSPORT_ENOTSUP = -104,
	TRANSPORT_ETIMEDOUT = -105,
	TRANSPORT_ENOMEM = -106,
	/* protocol errors from a received header are passed through (PROTO_E*) */
};

const char *transport_strerror(int err);

typedef struct transport_conn transport_conn;

/* A received frame. msg (hdr.hdr_len bytes) is heap memory owned by the frame;
 * payload points where payload_dest said (or is NULL). */
typedef struct transport_frame {
	proto_hdr hdr;
	uint8_t *msg;
	void *payload;
} transport_frame;

void transport_frame_free(transport_frame *f); /* frees msg only */

/* Returns where the payload of a frame goes, or NULL to drop it. Called before any
 * payload byte is read. *err may be set to fail the connection. */
typedef void *(*transport_payload_dest_fn)(void *ctx, const transport_frame *f);

/* A registered memory region (RDMA: an MR; tcp: nothing). */
typedef struct transport_mr {
	void *addr;
	size_t len;
	uint32_t lkey, rkey;
	void *impl;
} transport_mr;

typedef struct transport_ops {
	const char *scheme;
	int (*sendv)(transport_conn *c, const struct iovec *iov, int iovcnt);
	int (*recv_frame)(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx);
	int (*reg_mem)(transport_conn *c, void *addr, size_t len, transport_mr **out);
	int (*dereg_mem)(transport_conn *c, transport_mr *mr);
	/* Stops further I/O; pending and later calls fail with TRANSPORT_ECLOSED. */
	void (*shutdown)(transport_conn *c);
	void (*close)(transport_conn *c);
} transport_ops;

struct transport_conn {
	const transport_ops *ops;
	char peer[64]; /* "host:port" of the other end, for logs */
};

/* Parsed "[scheme://]host:port". */
typedef struct transport_addr {
	char scheme[8];
	char host[256];
	int port;
} transport_addr;

int transport_parse_addr(const char *s, transport_addr *out);

/* Client: connect by scheme (tcp, rdma, shm). */
int transport_connect(const transport_addr *a, transport_conn **out);

static inline int transport_sendv(transport_conn *c, const struct iovec *iov, int n)
{
	return c->ops->sendv(c, iov, n);
}
static inline int transport_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	return c->ops->recv_frame(c, f, dest, ctx);
}
static inline void transport_shutdown(transport_conn *c) { c->ops->shutdown(c); }
static inline void transport_close(transport_conn *c) { c->ops->close(c); }

/* Server: the upper layer's side of a listener. Callbacks run on the loop thread. */
typedef struct transport_server_cb {
	/* A new connection; returns the upper layer's per-connection object or NULL to refuse. */
	void *(*on_accept)(void *ctx, transport_conn *c);
	transport_payload_dest_fn payload_dest; /* ctx = the per-connection object */
	/* A whole frame arrived; ownership of f->msg passes to the callee. */
	void (*on_frame)(void *conn_ctx, transport_frame *f);
	/* The connection failed or closed (err explains); no callback follows for it.
	 * The upper layer calls transport_close when it no longer uses c. */
	void (*on_close)(void *conn_ctx, int err);
} transport_server_cb;

typedef struct transport_listener transport_listener;

int transport_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		     transport_listener **out);
void transport_listener_close(transport_listener *l);

#endif
