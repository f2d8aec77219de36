/*
 * The byte-stream clients' shared part (stream_client.h): shut-down flag,
 * latched receive error, progress count, the frame receive.
 */
#include "stream_client.h"

#include <string.h>

void tp_stream_client_init(tp_stream_client *s, const transport_ops *ops)
{
	s->base.ops = ops;
	atomic_init(&s->shut, 0);
	atomic_init(&s->progress, 0);
}

int tp_stream_client_shut(tp_stream_client *s) { return !atomic_exchange(&s->shut, 1); }

int tp_stream_client_recv_frame(tp_stream_client *s, transport_read_fn rd, transport_frame *f,
				transport_payload_dest_fn dest, void *ctx)
{
	memset(f, 0, sizeof(*f));
	if (atomic_load(&s->shut))
		return TRANSPORT_ECLOSED;
	if (s->recv_err)
		return s->recv_err;
	s->frame_started = 0;
	int err = tp_frame_read(rd, s, s->base.peer, f, dest, ctx);
	/* Whatever went wrong, the stream is no longer at a frame boundary. */
	if (err)
		s->recv_err = err;
	return err;
}

uint64_t tp_stream_client_progress(transport_conn *c)
{
	return atomic_load_explicit(&((tp_stream_client *)c)->progress, memory_order_relaxed);
}
