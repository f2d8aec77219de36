/*
 * A session's frames are recycled: the loop thread takes one for every frame
 * it decodes, and whichever thread finished the call (the loop itself for the
 * calls it runs inline, the executor for the rest) gives it back. A frame and
 * its view's zone cost a calloc, a malloc and two frees otherwise, about 450
 * instructions on a call whose whole server side is a few thousand.
 *
 * Given-back frames go on a lock-free stack; the loop thread, its only taker,
 * empties the stack in one exchange into a list of its own, so a frame is never
 * popped while another thread pushes it again (no ABA).
 */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

/* Frames kept per session: more than a burst of async calls usually queues. */
#define FRAME_POOL_MAX 256

be_frame *be_frame_get(be_session *s)
{
	be_frame *fr = s->fp_local;
	if (!fr)
		fr = atomic_exchange_explicit(&s->fp_shared, NULL, memory_order_acquire);
	if (!fr)
		return calloc(1, sizeof(*fr));
	s->fp_local = be_frame_of(fr->rq.next);
	atomic_fetch_sub_explicit(&s->fp_n, 1, memory_order_relaxed);
	msgpack_zone zone = fr->rq.view.zone;
	memset(fr, 0, sizeof(*fr));
	fr->rq.view.zone = zone; /* emptied by proto_view_reuse */
	return fr;
}

static void frame_destroy(be_frame *fr)
{
	proto_view_free(&fr->rq.view);
	free(fr);
}

void be_frame_free(be_session *s, be_frame *fr)
{
	if (!fr)
		return;
	be_staging_release(&s->staging, &fr->payload);
	transport_frame_free(&fr->rq.frame);
	if (atomic_load_explicit(&s->fp_n, memory_order_relaxed) >= FRAME_POOL_MAX) {
		frame_destroy(fr);
		return;
	}
	atomic_fetch_add_explicit(&s->fp_n, 1, memory_order_relaxed);
	be_frame *head = atomic_load_explicit(&s->fp_shared, memory_order_relaxed);
	do
		fr->rq.next = head ? &head->rq : NULL;
	while (!atomic_compare_exchange_weak_explicit(&s->fp_shared, &head, fr, memory_order_release,
						      memory_order_relaxed));
}

void be_frame_pool_free(be_session *s)
{
	be_frame *lists[2] = {s->fp_local, atomic_exchange(&s->fp_shared, NULL)};
	for (int i = 0; i < 2; i++)
		for (be_frame *fr = lists[i], *next; fr; fr = next) {
			next = be_frame_of(fr->rq.next);
			frame_destroy(fr);
		}
	s->fp_local = NULL;
	atomic_store(&s->fp_n, 0);
}
