/*
 * Server to server copies (docs/ARCHITECTURE.md "Several GPUs per server"):
 * a copy between devices of two servers moves from the source's server (A)
 * to the destination's (B) directly. The client asks B for a ticket
 * (peer_ticket.c), then A to push its range to B (op_peer_push.c); A connects
 * to B's peer listener (peer_listen.c), presents the ticket and streams the
 * bytes, which B writes in the order of the ticket's stream (peer_recv.c).
 */
#ifndef BE_PEER_H
#define BE_PEER_H

#include <stdint.h>

#include <uv.h>

#include "backend.h"

#define BE_PEER_TICKET_LEN 16     /* 128 random bits */
#define BE_PEER_TICKET_MS 10000   /* a ticket's life: the client asks A at once */
#define BE_PEER_MAX_TICKETS 64    /* unspent tickets per process */
#define BE_PEER_OPEN_MS 5000      /* a peer connection must present its ticket within it */
#define BE_PEER_MAX_CONNS 16      /* peer connections per process */
#define BE_PEER_CONNECT_MS 3000   /* A: B unreachable within it -> the client stages */
#define BE_PEER_WINDOW 4          /* A: chunks in flight before it waits for B's answer */

/* What a ticket grants: BE_PEER_TICKET_LEN bytes of it name a range of one
 * device of one session, written in the order of one of its streams. */
typedef struct be_peer_grant {
	be_session *s;
	uint64_t sid; /* s->id: a session freed and another at its address differ */
	uint32_t dev;
	CUdeviceptr dst;
	uint64_t len, stream_id;
} be_peer_grant;

/* peer_ticket.c (any thread). issue: a fresh ticket for g, 0 or
 * CUDA_ERROR_OUT_OF_MEMORY (too many unspent). take: spends it, 0 and *g,
 * or CUDA_ERROR_NOT_PERMITTED with *why (unknown, used, expired). forget:
 * the session's tickets go (its close). */
int be_peer_ticket_issue(const be_peer_grant *g, uint8_t out[BE_PEER_TICKET_LEN]);
int be_peer_ticket_take(const uint8_t t[BE_PEER_TICKET_LEN], be_peer_grant *g, const char **why);
void be_peer_ticket_forget(const be_session *s);

/* peer_listen.c. init: before the loop runs, in a process that serves
 * sessions: the peer listener will listen on scheme://host:0 (tcp or tls).
 * port: executor thread, the listener's port, opened on first use (the loop
 * thread opens it); 0 when there is none (not set up, or it failed). */
void be_peer_listen_init(uv_loop_t *loop, const char *scheme, const char *host);
int be_peer_listen_port(void);
/* Whether this process takes part in server to server copies at all (init
 * ran): one that cannot receive them does not push either. */
int be_peer_listen_enabled(void);
void be_peer_listen_close(void);

/* peer_recv.c: the peer listener's callbacks; and, on the loop thread at a
 * session's close, its tickets and peer connections end. */
const transport_server_cb *be_peer_callbacks(void);
void be_peer_session_gone(be_session *s);
/* op_peer_push.c, first in the session's teardown: its pushes (threads of
 * their own) end and are joined. */
void be_peer_push_join(be_session *s);
/* Executor (op_peer_push.c): B's answer for a chunk of transfer id, status 0
 * once it is written; nothing when the connection is gone. */
void be_peer_answer(uint64_t id, uint64_t seq, int status);

#endif
