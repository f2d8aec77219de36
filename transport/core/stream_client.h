/*
 * The base of the byte-stream clients (tcp_client.c, shm_client.c): what a
 * client whose replies arrive as a stream of bytes keeps beside its own
 * reading and writing, and the frame receive built on it.
 *
 * A provider's client object starts with a tp_stream_client (so a
 * transport_conn * is one of both) and gives its own "read exactly n bytes"
 * (transport_read_fn, frame_read.c's contract). The base then answers
 * recv_frame: ECLOSED once shut down, the latched error after a failure (the
 * stream is mid-frame and cannot be resynchronised), otherwise one frame
 * through the reader. The reader sets frame_started once it consumed bytes of
 * the frame, so that an end of stream then reads as EIO (cut short) rather
 * than ECLOSED (a clean close between frames).
 */
#ifndef TP_STREAM_CLIENT_H
#define TP_STREAM_CLIENT_H

#include "transport_int.h"

typedef struct tp_stream_client {
	transport_conn base;
	atomic_int shut;                  /* set by shutdown; every call then answers ECLOSED */
	atomic_uint_fast64_t progress;    /* moves of bytes, both ways (transport_progress) */
	/* the receiving thread's */
	int recv_err;      /* latched failure */
	int frame_started; /* bytes of the current frame consumed: an end now is EIO */
} tp_stream_client;

/* Sets the base of a zeroed client object. */
void tp_stream_client_init(tp_stream_client *s, const transport_ops *ops);
/* Marks s shut down: 1 the first time (the caller then wakes its waiters). */
int tp_stream_client_shut(tp_stream_client *s);
/* recv_frame of a stream client, reading through rd(s, ...). */
int tp_stream_client_recv_frame(tp_stream_client *s, transport_read_fn rd, transport_frame *f,
				transport_payload_dest_fn dest, void *ctx);
/* The progress slot of transport_ops (c: a tp_stream_client). */
uint64_t tp_stream_client_progress(transport_conn *c);

#endif
