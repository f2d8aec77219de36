/*
 * Replies and events to a session's client (reply.c). Handlers use the
 * be_reply_* of session.h's convention: be_reply_begin starts a reply of
 * status 0 with nresults results and the session's latched error in its
 * header (taken and cleared); be_reply_end sends it with an optional payload
 * and returns BE_REPLIED, or a negative transport error.
 */
#ifndef BE_REPLY_H
#define BE_REPLY_H

#include "session.h"
#include "staging.h"

typedef void (*be_session_fn)(be_session *s);

proto_msg *be_reply_begin(be_session *s, be_req *rq, uint32_t nresults);
int be_reply_end(be_session *s, be_req *rq, proto_msg *m, const void *payload, size_t len);
/* Reply with a status only. */
int be_reply_status(be_session *s, be_req *rq, int status);
/* Reply with success and one unsigned result (an id, a pointer, a count). */
int be_reply_u64(be_session *s, be_req *rq, uint64_t v);
/* A reply for a sequence number rather than a request (waiter). */
proto_msg *be_reply_begin_seq(be_session *s, uint64_t seq, uint32_t nresults);
int be_reply_status_seq(be_session *s, uint64_t seq, int status);
int be_reply_send(be_session *s, proto_msg *m, const void *payload, size_t len);
/* A reply whose payload is len bytes of the staging buffer *out, which then
 * belongs to the call (emptied): it goes back to the pool once the client has
 * the bytes. Over rdma the payload is read zero-copy after this returns, so
 * the next reply (the next chunk of a copy) is announced while it is read. */
int be_reply_send_staged(be_session *s, proto_msg *m, be_buf *out, size_t len);
/* Latches the first error (> 0) of an async call: the next reply carries it. */
void be_latch(be_session *s, int status);
/* Sends m (begun with seq 0) as an event frame outside the replies, from any
 * thread, and frees it: 0 or a TRANSPORT_E* error. */
int be_event_send(be_session *s, proto_msg *m);
/* Refuses the session: drops its later frames and closes the connection (any
 * thread); the transport's close then starts the teardown (session.c). */
void be_session_reject(be_session *s, const char *why);
/* fn runs before every reply is sent, on the replying thread (devout.c's
 * flush); set once at startup. */
void be_reply_set_before(be_session_fn fn);

#endif
