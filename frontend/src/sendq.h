/*
 * The send side of a call channel. Async calls (launches, memsets, small copies to
 * the device) are copied into a queue and written by a sender thread, many frames
 * to one write when they pile up: a launch then costs the caller a memcpy, not a
 * system call. Synchronous calls, and frames too large to copy, are written by
 * the caller itself, after everything queued before them, so the server sees
 * every frame in the order the program made its calls.
 */
#ifndef FE_SENDQ_H
#define FE_SENDQ_H

#include <stddef.h>

#include "transport.h"

typedef struct fe_sendq fe_sendq;

int fe_sendq_open(transport_conn *t, fe_sendq **out);
/* Stops the sender thread after it wrote what was queued. */
void fe_sendq_close(fe_sendq *q);
/* Queues a frame (header + msgpack, then an optional payload) or, when it is large,
 * writes it at once. Returns 0, or the transport error that broke the channel
 * (also one a previous batch met). */
int fe_sendq_post(fe_sendq *q, const void *frame, size_t len, const void *payload, size_t plen);
/* Writes the queue and then this frame, from the calling thread. */
int fe_sendq_write(fe_sendq *q, const void *frame, size_t len, const void *payload, size_t plen);
/* Queues a small frame even past the queue's limit: never writes it itself, so
 * it never waits for the network (the liveness watchdog's pings). */
int fe_sendq_post_nowait(fe_sendq *q, const void *frame, size_t len);
/* Bytes are queued or being written: the server has something to take. */
int fe_sendq_busy(fe_sendq *q);

#endif
