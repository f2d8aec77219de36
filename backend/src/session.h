/*
 * A session: one client connection, its CUDA context, its handle tables and its
 * allocations. Calls run on the session's executor thread in arrival order;
 * synchronising calls are handed to the session's waiter thread so the executor
 * never blocks on the GPU (another client thread's launches keep flowing).
 *
 * Handlers (generated in gen/dispatch.c, hand-written in op_*.c) return:
 *   a CUresult (>= 0)  the dispatcher replies with it (sync op) or latches it
 *                      when non-zero (async op);
 *   BE_REPLIED         the handler already sent the reply (be_reply_end);
 *   BE_DEFERRED        the waiter thread will reply (be_waiter_push);
 *   BE_EPROTO          malformed arguments: logged, answered CUDA_ERROR_INVALID_VALUE;
 *   BE_NOT_NOW         (a +now op run on the receiving thread, be_inline_now())
 *                      it would block there: nothing done, the executor runs it.
 */
#ifndef BE_SESSION_H
#define BE_SESSION_H

#include <stdint.h>

#include <cuda.h>

#include "proto.h"
#include "transport_server.h"

#define BE_REPLIED (-1000)
#define BE_DEFERRED (-1001)
#define BE_EPROTO (-1002)
#define BE_NOT_NOW (-1003)

typedef struct be_session be_session;

typedef struct be_req {
	transport_frame frame; /* msg is owned; payload (if any) is a staging buffer */
	proto_view view;
	uint64_t seq;
	struct be_req *next;
} be_req;

/* Replies. be_reply_begin starts a reply of status 0 with nresults results and
 * the session's latched error in its header (taken and cleared); be_reply_end sends it with an optional payload and
 * returns BE_REPLIED, or a negative transport error. */
proto_msg *be_reply_begin(be_session *s, be_req *rq, uint32_t nresults);
int be_reply_end(be_session *s, be_req *rq, proto_msg *m, const void *payload, size_t len);
/* Reply with a status only. */
int be_reply_status(be_session *s, be_req *rq, int status);
/* Reply with success and one unsigned result (an id, a pointer, a count). */
int be_reply_u64(be_session *s, be_req *rq, uint64_t v);

/* Handle tables: 0 when found; CUDA_ERROR_INVALID_HANDLE for unknown or stale ids.
 * Stream id 0 is the NULL stream of the session's context. */
int be_get_stream(be_session *s, uint64_t id, CUstream *out);
int be_get_event(be_session *s, uint64_t id, CUevent *out);
int be_get_module(be_session *s, uint64_t id, CUmodule *out);
int be_get_func(be_session *s, uint64_t id, CUfunction *out);
int be_get_graph(be_session *s, uint64_t id, CUgraph *out);
int be_get_gexec(be_session *s, uint64_t id, CUgraphExec *out);

/* A CUDA array of the session (op_array.c): the driver's handle and the shape
 * it was created with, against which every copy's box is checked. */
typedef struct be_array {
	CUarray h;
	CUDA_ARRAY3D_DESCRIPTOR d;
	uint32_t elem; /* bytes per element: channels * format size */
	uint64_t charged; /* bytes charged to the tenant (tenants.h) */
} be_array;
int be_get_array(be_session *s, uint64_t id, be_array **out);
/* Bytes per element of a driver format with 1, 2 or 4 channels; 0 if the
 * backend does not take that format. */
int be_array_elem_size(uint32_t format, uint32_t channels, uint32_t *out);

#endif
