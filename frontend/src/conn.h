/*
 * The call channel to one server (a session; one or more of its devices). Many program threads share
 * it: sends are serialised by a lock (one frame = one write); replies are matched
 * by sequence number. Whoever holds the receive role reads frames: it lands reply
 * payloads straight in the caller's buffer, completes the waiting call, and hands
 * host function notifications to the callback thread. A caller waiting for its
 * reply takes the role itself when it is free (a round trip is then the server's
 * and the wire's, no thread hand-off); a receiver thread takes it for frames no
 * caller waits for (detached copies, events).
 */
#ifndef FE_CONN_H
#define FE_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "proto.h"
#include "transport.h"

/* Errors of the channel (negative; CUresult values are >= 0). */
#define FE_EDEAD (-200) /* connection lost; every later call fails */

typedef struct fe_conn fe_conn;

typedef struct fe_reply {
	proto_view view;
	uint8_t *msg;
} fe_reply;

/* One outstanding call. Sync calls keep it on the caller's stack; async D2H
 * copies allocate it (heap) and the receiver frees it. */
typedef struct fe_pending {
	uint64_t seq;
	void *dest;        /* where the reply payload goes */
	uint64_t dest_len;
	int status;        /* CUresult or negative channel error */
	int latched;
	uint8_t *msg;      /* reply msgpack, kept when the caller wants results */
	proto_hdr hdr;     /* its frame header */
	int want_msg;
	proto_view *view;  /* want_msg: where a reply decoded by the reader goes */
	int view_ok;       /* ... and it went there */
	int heap;          /* receiver frees it after completing */
	int linked;        /* (fe_conn's lock) in the pending list: not complete yet */
	atomic_int done;
	uint64_t rx_len;   /* size of its reply frame (statistics, stats.h) */
	struct fe_pending *next;
} fe_pending;

/* The server reached host function id (gone 0), or forgot a host node's (gone 1). */
typedef void (*fe_hostfn_cb)(void *ctx, uint64_t id, int gone);

/* A function called with a frame's op before it is sent, on the sending thread
 * (managed.c registers one: host writes to managed memory go over before any
 * call that may run device work). One for the process, set from a constructor. */
typedef void (*fe_conn_before_fn)(uint32_t op);
void fe_conn_on_before_send(fe_conn_before_fn fn);

int fe_conn_open(const transport_addr *a, fe_hostfn_cb hostfn, void *hostfn_ctx, fe_conn **out);
/* A view of c's channel for the server's device dev (another device of the
 * same session): frames sent through it name dev (proto.h); everything else
 * (sequence numbers, replies, latched errors, liveness) is the channel's.
 * dev 0 is the channel itself. NULL: no memory. */
fe_conn *fe_conn_view(fe_conn *c, uint32_t dev);
/* Whether a and b are views of one channel (devices of one session). */
int fe_conn_same(const fe_conn *a, const fe_conn *b);
/* The server's device index c's frames are for. */
uint32_t fe_conn_dev(const fe_conn *c);
/* Drops the connection without talking to the server (fork child, exit); of a
 * view, only the view. */
void fe_conn_close(fe_conn *c);
const char *fe_conn_peer(fe_conn *c);
/* One pointer kept with c's channel for a feature above it (stripe.c's
 * connections): close_fn(ext) runs first in the channel's fe_conn_close
 * (not in a fork child, which forgets the channel). The caller serialises. */
void **fe_conn_ext(fe_conn *c, void (*close_fn)(void *ext));
/* Whether c was admitted by a cookie got inside TLS (rdma+tls://): its hello
 * then carries no token, which would cross RDMA in clear. */
int fe_conn_ticketed(fe_conn *c);

uint64_t fe_conn_next_seq(fe_conn *c);
/* The seq the next call will get: every call sent so far has a smaller one. */
uint64_t fe_conn_peek_seq(fe_conn *c);

/* Async: sends the frame (flags ASYNC) with an optional payload; no reply. */
int fe_conn_post(fe_conn *c, proto_msg *m, const void *payload, uint64_t len);
/* Sync: sends and waits. Returns the call's CUresult, or a negative error. With r
 * non-NULL and status 0 the caller owns r (fe_reply_free). dest receives the
 * reply payload (dest_len bytes exactly, else PROTO_EDECODE). */
int fe_conn_call(fe_conn *c, proto_msg *m, const void *payload, uint64_t plen, void *dest, uint64_t dest_len,
		 fe_reply *r);
void fe_reply_free(fe_reply *r);

/* Split form, for pipelined copies: begin sends and registers p; wait blocks
 * until p completes and returns its status. */
int fe_conn_begin(fe_conn *c, proto_msg *m, const void *payload, uint64_t plen, fe_pending *p);
int fe_conn_wait(fe_conn *c, fe_pending *p);
/* Fire-and-forget request whose reply payload lands in dest later (async D2H). */
int fe_conn_begin_detached(fe_conn *c, proto_msg *m, void *dest, uint64_t dest_len);
/* Waits until every detached request sent before this call has landed. */
int fe_conn_drain_detached(fe_conn *c);
/* A detached request has not landed yet (no lock: a hint for the caller). */
int fe_conn_detached_pending(fe_conn *c);
/* Same, for those with a seq below seq only. */
int fe_conn_drain_detached_before(fe_conn *c, uint64_t seq);

/* Pinned host memory (cudaHostAlloc, cudaMallocHost, cudaHostRegister) for the
 * transport: one that needs registration (TRANSPORT_CAP_REG_MEM: rdma)
 * registers it as a memory region, so copies from and to it are RDMA
 * operations on those very pages (zero-copy); other transports need
 * nothing (*mr stays NULL). Undo with fe_conn_unpin before the memory goes. */
int fe_conn_pin(fe_conn *c, void *p, size_t len, transport_mr **mr);
void fe_conn_unpin(fe_conn *c, transport_mr *mr);
/* Hands the memfd fd (len bytes) to c's server as a shared region
 * (transport_region_share: shm only, TRANSPORT_ENOTSUP elsewhere). */
int fe_conn_region_share(fe_conn *c, int fd, uint64_t len, uint32_t *id);
/* What c's transport can do (TRANSPORT_CAP_*). */
unsigned fe_conn_caps(const fe_conn *c);

/* The first error latched by the server from an async call and not yet taken. */
int fe_conn_take_latched(fe_conn *c);
/* The server may send events from now on (a host function was enqueued): the
 * receiver thread keeps reading even when no call is outstanding. */
void fe_conn_expect_events(fe_conn *c);
/* Release events (a batch tenant's session; frontend/src/release.c): fn(c, gen)
 * runs on the thread that read the event, so it only hands the work on. */
typedef void (*fe_release_cb)(fe_conn *c, uint64_t gen);
void fe_conn_on_release(fe_release_cb fn);
/* The session is established (hello done): the liveness watchdog (live.h) may
 * ping the server from now on. Before, it judges by the replies alone. */
void fe_conn_enable_pings(fe_conn *c);

#endif
