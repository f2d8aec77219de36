/*
 * A session: one client connection, its CUDA context, its handle tables and its
 * allocations. Calls run on the session's executor thread in arrival order;
 * synchronising calls are handed to the session's waiter thread so the executor
 * never blocks on the GPU (another client thread's launches keep flowing).
 *
 * Handlers (generated in gen/dispatch.c, hand-written in op_*.c) return one
 * int, and only these (docs/ARCHITECTURE.md, "Errors by boundary"):
 *   a CUresult (>= 0)  the dispatcher replies with it (sync op) or latches it
 *                      when non-zero (async op): what the client sees;
 *   BE_REPLIED         the handler already sent the reply (be_reply_end);
 *   BE_DEFERRED        the waiter thread will reply (be_waiter_push);
 *   BE_EPROTO          malformed arguments: logged, answered CUDA_ERROR_INVALID_VALUE;
 *   BE_NOT_NOW         (a +now op run on the receiving thread, be_inline_now())
 *                      it would block there: nothing done, the executor runs it;
 *   a TRANSPORT_E*     (-100..-199) what a be_reply_* returned when its reply
 *                      could not be sent: nothing more is sent, the connection
 *                      is closing.
 * Anything else (a handle table's BE_H_*, a helper's -1) is a bug: the
 * executor logs it by number and sends nothing. The handler converts what
 * its helpers return: a handle table's BE_H_* becomes
 * CUDA_ERROR_INVALID_HANDLE (or _INVALID_VALUE where CUDA answers that), and
 * BE_H_ENOMEM CUDA_ERROR_OUT_OF_MEMORY (be_h_status, session_handles.h).
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

/* A CUDA array of the session (op_array.c): the driver's handle and the shape
 * it was created with, against which every copy's box is checked. */
typedef struct be_array {
	CUarray h;
	CUDA_ARRAY3D_DESCRIPTOR d;
	uint32_t elem; /* bytes per element: channels * format size */
	uint64_t charged; /* bytes charged to the tenant (tenants.h) */
} be_array;
/* Bytes per element of a driver format with 1, 2 or 4 channels; 0 if the
 * backend does not take that format. */
int be_array_elem_size(uint32_t format, uint32_t channels, uint32_t *out);

/* The life cycle (session.c): the transport's callbacks (main.c installs
 * them), loop thread. */
void *be_on_accept(void *ctx, transport_conn *c);
void *be_payload_dest(void *ctx, const transport_frame *f);
/* transport frame_ok: before authentication only a small hello is let in. */
int be_frame_ok(void *ctx, const proto_hdr *h);
void be_on_frame(void *ctx, transport_frame *f);
void be_on_close(void *ctx, int err);
void be_sessions_shutdown(void); /* no new sessions */
int be_sessions_live(void);

/* What handlers use: replies (reply.c), handle lookups (session_handles.c). */
#include "reply.h"
#include "session_handles.h"

#endif
