/*
 * Internal interface of the transport library: how an implementation (tcp, rdma,
 * shm) plugs in, and helpers the tcp client and server share. Not installed, not
 * included outside transport/ (except by the unit tests).
 *
 * A provider is a table of entry points for one address scheme. The core
 * (addr.c) looks the scheme up and calls through the table; every slot is filled
 * when the provider is registered (missing ones with functions that return
 * TRANSPORT_ENOTSUP, as libibverbs does with its dummy ops), so the core never
 * checks for NULL.
 *
 * Built-in providers are listed once, in providers.h (why at compile time: see
 * there). What their connections can do is in their transport_ops (caps,
 * TRANSPORT_CAP_* in transport.h).
 */
#ifndef TRANSPORT_INT_H
#define TRANSPORT_INT_H

#include "transport_server.h"

#include <pthread.h>
#include <stdatomic.h>

#include "loopq.h"
#include "providers.h"
#include "rg_list.h"

typedef struct transport_provider {
	const char *scheme;
	/* timeout_ms: see transport_connect_within (0: none). */
	int (*connect)(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
	/* transport_connect_cookie (NULL: TRANSPORT_ENOTSUP). */
	int (*connect_cookie)(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
			      transport_conn **out);
	/* Called on the loop thread (or before the loop runs). */
	int (*listen)(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out);
	/* Any thread; see transport_listener_close in transport.h. */
	void (*listener_close)(transport_listener *l);
	/* transport_adopt: serves an accepted socket handed over from another
	 * process (providers whose connections can move: TRANSPORT_CAP_ADOPT). */
	int (*adopt)(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out);
	/* transport_wrap_fd (NULL: TRANSPORT_ENOTSUP): a blocking connection
	 * over an accepted socket, any thread. */
	int (*wrap_fd)(int fd, transport_conn **out);
} transport_provider;

/*
 * The listener base (core/listener.c), the head of every provider's listener
 * object: the core dispatches transport_listener_close and answers
 * transport_listener_port from it, and it holds what every listener on a
 * libuv loop keeps: the upper layer's callbacks, the loop queue (teardowns
 * and kicks other threads ask for, and the close), the connections and the
 * count of uv handles still open.
 */
struct transport_listener {
	const transport_provider *prov;
	int port; /* the port actually bound (useful when asked for port 0) */
	uv_loop_t *loop;
	transport_server_cb cb;
	void *ctx;
	transport_loopq q;
	/* loop thread only */
	int close_started;
	int nhandles; /* uv handles (the queue's, connections') not yet closed */
	rg_list conns;
	/* Optional: frees what the provider holds beside its handles, once the
	 * last handle closed, before the listener is freed. */
	void (*release)(transport_listener *l);
};

/* Sets the base of a zeroed listener (the queue is started by the provider,
 * tp_loopq_init, and counted in nhandles). */
void tp_listener_init(transport_listener *l, const transport_provider *p, uv_loop_t *loop,
		      const transport_server_cb *cb, void *ctx);
/* The listener_close slot of every provider: any thread; the loop finishes
 * the close (the provider's queue callback sees tp_loopq_closing). */
void tp_listener_close(transport_listener *l);
/* A handle of l (h->data: the listener, whose first member is the base) or
 * one of its connections closed: the last one frees l (release first). */
void tp_listener_handle_closed(transport_listener *l);
void tp_listener_close_cb(uv_handle_t *h);
/* The close transport_listener_close asked for, on the loop thread (the
 * provider's queue callback): 0 before it was asked or once it ran; else
 * sets close_started and calls end with each connection's node in conns
 * (the provider tears it down: only a close callback unlinks, so on_close
 * may call transport_close), and returns 1: the provider then closes its
 * own handles and last the queue's (no connection can post any more). */
int tp_listener_close_start(transport_listener *l, void (*end)(rg_list *node));
/* Admission: the upper layer's on_accept for c, unless the listener is
 * closing (once transport_listener_close has returned, on_accept is not
 * called again; it may have been called from this thread, in a callback).
 * NULL: refused. */
void *tp_listener_admit(transport_listener *l, transport_conn *c);

/*
 * The server connection base (core/sconn.c), a member of every provider's
 * server connection. Such a connection has two owners: the loop, until the
 * close callback of its last uv handle ran, and the upper layer, from
 * on_accept until transport_close (the provider stands in for it when the
 * connection is refused or never handed over). Whichever lets go last frees
 * it, through the provider's free.
 */
typedef struct tp_sconn {
	pthread_mutex_t lock; /* guards the fields below and those the provider says */
	int torn_down;        /* the teardown started: no more requests to the loop */
	int released;         /* the upper layer let go (transport_close) */
	int handle_closed;    /* the close callback of the last uv handle ran */
	int close_err;        /* the first reason recorded for the close */
	/* The provider's: frees the connection (o is its member) and what it
	 * holds; the lock is destroyed already. */
	void (*free)(struct tp_sconn *o);
} tp_sconn;

/* Sets up a zeroed base. */
void tp_sconn_init(tp_sconn *o, void (*free_fn)(tp_sconn *o));
/* A connection that never reached the loop or the upper layer goes: only
 * the lock (the provider frees the rest itself). */
void tp_sconn_fini(tp_sconn *o);
/* transport_close, after the provider's shutdown (any thread): the upper
 * layer lets go; frees the connection if its handles are closed. */
void tp_sconn_release(tp_sconn *o);
/* The close callback of the connection's last handle (loop thread), once
 * the provider unlinked it and let go of what the loop held: frees it if the
 * upper layer let go, then counts the handle closed on l (whose last one
 * frees l). */
void tp_sconn_closed(tp_sconn *o, transport_listener *l);

/* The recv_frame slot of every server half: frames reach the server through
 * on_frame, not by asking (TRANSPORT_ENOTSUP, *f zeroed). */
int tp_server_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx);

/* Fills every NULL slot of *p with the core's TRANSPORT_ENOTSUP answer (or a
 * no-op listener_close), so that the core never checks for NULL slots. */
void tp_provider_fill(transport_provider *p);

/* Adds or replaces the provider for p->scheme. p must outlive the process (the
 * table keeps a copy of the slots but the scheme string by pointer). Returns
 * TRANSPORT_ENOMEM when the table is full, TRANSPORT_EADDR for a bad scheme. */
int tp_register_provider(const transport_provider *p);

/* The providers compiled in (providers.h): connect halves (client library)
 * and listen halves (server library, listen.c). */
#define TP_DECLARE(n)                                                                                                  \
	extern const transport_provider tp_##n##_provider;                                                      \
	extern const transport_provider tp_##n##_listen_provider;
TP_PROVIDERS(TP_DECLARE)
#undef TP_DECLARE

/* ---- the clients' frame reader (frame_read.c) ---- */

/* Reads exactly n bytes of the stream into dst (NULL: drops them). */
typedef int (*transport_read_fn)(void *rctx, void *dst, size_t n);
/* One frame through rd: the fixed header (checked, logged with peer when
 * bad), the msgpack part into an allocation f owns, the payload where dest
 * says (NULL: dropped). On failure nothing of f is left allocated and the
 * error is returned: the caller latches it (the stream is mid-frame). */
int tp_frame_read(transport_read_fn rd, void *rctx, const char *peer, transport_frame *f,
			 transport_payload_dest_fn dest, void *ctx);

/* ---- connect deadlines (tcp_client.c, rdma_client.c) ---- */

/* The CLOCK_MONOTONIC time timeout_ms from now; 0 (no deadline) for 0. */
uint64_t tp_deadline(unsigned timeout_ms);
/* Milliseconds left until end (rounded up, so a wait never ends early), 0
 * once it passed, -1 for no deadline (end 0): poll()'s timeout argument. */
int tp_deadline_left_ms(uint64_t end);

/* ---- providers without memory registration (mr_none.c: tcp, tls, shm) ----
 *
 * The kernel (or a memcpy) copies from and to any user address during the
 * call and pins nothing beyond it. These hand out a
 * transport_mr that only records addr/len so callers can treat every transport
 * alike. */
int tp_reg_mem_none(transport_conn *c, void *addr, size_t len, transport_mr **out);
int tp_dereg_mem_none(transport_conn *c, transport_mr *mr);

#endif
