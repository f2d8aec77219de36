/*
 * Striped bulk copies (docs/ARCHITECTURE.md "Striped copies"): one tcp
 * connection moves what one core can copy through the kernel, so a session
 * may open extra connections (stripes) and a large copy's bytes cross them
 * side by side, each received and sent on a thread of its own, straight into
 * and out of the session's staging buffers.
 *
 *  - stripe_open (executor, an authenticated session): opens the process's
 *    stripe listener (stripe_listen.c; the address the client reached, a port
 *    the kernel picks) and hands out one secret per connection
 *    (stripe_secret.c), 128 random bits, single use, valid
 *    BE_STRIPE_SECRET_MS, bound to the session.
 *  - A stripe connection (stripe_conn.c) presents its secret in its first
 *    frame within BE_STRIPE_OPEN_MS (nothing else is read before; a wrong or
 *    spent one closes it without effect), then serves stripe_put (bytes of a
 *    transfer into its buffer) and stripe_get (bytes of one back) on its own
 *    blocking thread (transport_wrap_fd).
 *  - Transfers (stripe_xfer.c): a per-session table of at most
 *    BE_STRIPE_MAX_XFERS copies in flight, filled by the stripe threads and
 *    run by the executor (op_stripe.c) in stream order.
 *  - A stripe connection that dies breaks the session's stripes: every
 *    transfer in flight fails (its copy answers CUDA_ERROR_OPERATING_SYSTEM),
 *    the other stripe connections are shut down, later striped copies fail at
 *    once; the main connection and the session go on (the client copies over
 *    it from then on). Buffers go back when the last thread using them lets go.
 */
#ifndef BE_STRIPE_H
#define BE_STRIPE_H

#include <stdint.h>

#include <uv.h>

#include "backend.h"

#define BE_STRIPE_SECRET_LEN 16
#define BE_STRIPE_MAX 16           /* stripe connections per session (and --stripes' cap) */
#define BE_STRIPE_DEFAULT 8        /* --stripes when not given */
#define BE_STRIPE_SECRET_MS 10000  /* a secret's life: the client connects at once */
#define BE_STRIPE_OPEN_MS 5000     /* a stripe connection must present its secret within it */
#define BE_STRIPE_MAX_PENDING 16   /* accepted stripe connections not yet authenticated, per process */
#define BE_STRIPE_MAX_XFERS 4      /* transfers in flight per session */
#define BE_STRIPE_MAX_LEN BE_BIG_MAX /* bytes of one transfer */
#define BE_STRIPE_WAIT_MS 30000    /* a copy waits this long for bytes that do not come */
#define BE_STRIPE_LAND_WAIT_MS 100 /* an H2D transfer waits this long for a busy big staging buffer */

/* The files call down only: stripe_listen.c (accepts) -> stripe_conn.c (a
 * connection's thread) -> stripe_secret.c (admits it to a session) ->
 * stripe_xfer.c (the session's transfers); op_stripe.c, session.c and
 * teardown.c call in from above. */

/* stripe_listen.c. init: before the loop runs (tcp only: other schemes get
 * no stripes). port: executor, the listener's port, opened on first use;
 * 0 when there is none. max: --stripes (REMOTE_GPUD_STRIPES), 0: off. */
void be_stripe_listen_init(uv_loop_t *loop, const char *scheme, const char *host);
int be_stripe_listen_port(void);
unsigned be_stripe_max(void);
void be_stripe_listen_close(void);

/* stripe_conn.c: serves one accepted stripe socket on a thread of its own. */
void be_stripe_conn_start(int fd, const char *peer);

/* Secrets (stripe_secret.c, any thread): issue one for s; out: whether an
 * unspent, unexpired one is out; take spends one and joins c to its session
 * (be_stripes_join), answering it (NULL: unknown, spent or expired secret,
 * or the session would not take c); forget: the session's close, before
 * be_stripes_session_gone (so no stripe joins it after). */
int be_stripe_secret_issue(be_session *s, uint8_t out[BE_STRIPE_SECRET_LEN]);
int be_stripe_secret_out(void);
be_session *be_stripe_secret_take(const uint8_t t[BE_STRIPE_SECRET_LEN], transport_conn *c);
void be_stripe_secret_forget(const be_session *s);

/* stripe_xfer.c: the session's stripe state, made at stripe_open. */
typedef struct be_stripes be_stripes;
be_stripes *be_stripes_of(be_session *s, int create);
/* Whether s may open stripes (not broken, not going). */
int be_stripes_usable(be_session *s);
/* A stripe connection joins s (0), or not: s is going or has its most (-1). */
int be_stripes_join(be_session *s, transport_conn *c);
/* It ended; broke: non-zero breaks the session's stripes (TRANSPORT_ECLOSED:
 * a clean end, logged only if a transfer was in flight). Its last touch of s. */
void be_stripes_leave(be_session *s, transport_conn *c, int broke);
/* Stripe threads: where bytes [off, off+len) of transfer id (total bytes)
 * go (NULL: refused, the connection breaks), held until be_stripes_done. */
void *be_stripes_put_dest(be_session *s, uint64_t id, uint64_t total, uint64_t off, uint64_t len);
/* Stripe threads: waits until transfer id's bytes from the device are in its
 * buffer; 0 and *p (held until be_stripes_done), or a CUresult. */
int be_stripes_get_wait(be_session *s, uint64_t id, uint64_t off, uint64_t len, const void **p);
/* Stripe threads: len bytes of transfer id (out: D2H) moved (ok) or not. */
void be_stripes_done(be_session *s, uint64_t id, int out, uint64_t len, int ok);
/* Executor: transfer id's bytes to the device: waits until they all came
 * (or the stripes broke, the session closes, nothing came for
 * BE_STRIPE_WAIT_MS); 0 and the buffer moved to *b, or a CUresult. */
int be_stripes_take_in(be_session *s, uint64_t id, uint64_t len, be_buf *b);
/* Executor: transfer id from the device: b (taken over) will hold len bytes
 * once ev (taken over; NULL: already there) completed. 0 or a CUresult. */
int be_stripes_add_out(be_session *s, uint64_t id, be_buf *b, uint64_t len, CUevent ev);
/* Loop thread, the session's close (after be_stripe_secret_forget): waiters
 * wake, stripe connections shut down. */
void be_stripes_session_gone(be_session *s);
/* Teardown (executor, context current; after be_stripe_secret_forget):
 * waits for the stripe threads of s, frees what is left. */
void be_stripes_join_all(be_session *s);

#endif
