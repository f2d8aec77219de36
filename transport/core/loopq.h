/*
 * Requests from any thread to a listener's loop thread: the servers (tcp and
 * rdma) let other threads ask for a connection's teardown (or, rdma, a run of
 * its receive side) and for the listener's close, but only the loop thread may
 * touch handles. A connection's node is linked at most once however often it
 * is asked for; one uv_async_t wakes the loop for all of them.
 *
 * The caller keeps the async handle alive while it may post: it closes the
 * handle (uv_close on &q->async) only once no thread can post any more.
 */
#ifndef TRANSPORT_LOOPQ_H
#define TRANSPORT_LOOPQ_H

#include <pthread.h>
#include <uv.h>

#include "rg_list.h"

typedef struct transport_loopq {
	uv_async_t async;     /* .data is the owner's */
	pthread_mutex_t lock; /* guards reqs, closing; held for a few instructions */
	rg_list reqs;
	int closing;
} transport_loopq;

/* 0, or a libuv error (nothing to undo then). */
int tp_loopq_init(transport_loopq *q, uv_loop_t *loop, uv_async_cb cb, void *data);
/* After the async handle is closed. */
void tp_loopq_destroy(transport_loopq *q);
/* Any thread: link node (once) and wake the loop. */
void tp_loopq_post(transport_loopq *q, rg_list *node);
/* Any thread: the owner is to close; wakes the loop. */
void tp_loopq_close(transport_loopq *q);
/* Loop thread: the oldest pending node, unlinked; NULL when none. */
rg_list *tp_loopq_pop(transport_loopq *q);
/* Loop thread: node is no longer pending (harmless when it was not). */
void tp_loopq_cancel(transport_loopq *q, rg_list *node);
/* Whether tp_loopq_close was called. */
int tp_loopq_closing(transport_loopq *q);

#endif
