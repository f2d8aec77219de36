/*
 * A copy to the host sent while the GPU still copies it.
 *
 * Why. A synchronous D2H copy is a request, the GPU's copy into pinned
 * staging, then the reply with the bytes. Done whole, the GPU copy and the
 * transfer add up: over loopback tcp on an H200 a copy of 1 MiB took 209 us
 * where sending 1 MiB and waiting for an answer ("TCP acked") took 125 us,
 * and the GPU's own copy of 1 MiB takes 26 us (bench/results,
 * 2026-11-28-h200-remote-bench.md). Cut into chunks with an event each, the
 * reply's header and first chunk go out as soon as the first chunk landed, and
 * every later chunk as soon as its event completed, while the GPU copies the
 * rest: the copy costs its first chunk's latency plus the transfer.
 *
 * Chunk sizes. BE_PIPE_FIRST (64 KiB) first, then doubling up to
 * BE_PIPE_MAX_CHUNK (1 MiB), at most BE_PIPE_CHUNKS chunks (the last takes
 * the rest). The first is the only one the client waits for: 64 KiB is
 * about what the GPU copies in its fixed latency (5-9 us for 4-64 KiB on the
 * H200, so a smaller first chunk would save almost nothing). The later ones
 * may grow because the GPU (25-55 GB/s from device to pinned memory) runs
 * ahead of the socket (5-9 GB/s on loopback) once the first is out, so they
 * need only be large enough that the event and the wait per chunk (a few
 * microseconds) stay small against their transfer. Copies of up to
 * BE_PIPE_FIRST go whole, as before (op_copy.c: the +now path included).
 *
 * Who sends. The thread that issued the chunks (the loop thread for a +now
 * copy, or the executor) when the waiter is idle, no request came in behind
 * this one (be_waiter_fast: s->run_more), the reply is at most BE_NOW_MAX
 * bytes and its first chunk lands within BE_FAST_NS: it sends the reply
 * itself, as be_waiter_after does with a whole one, which saves the hand-off
 * to the waiter (a thread's wake-up) on the path of a lone synchronous copy.
 * Otherwise the waiter, in order with its other replies, and the issuing
 * thread goes on reading and issuing the next requests (a large synchronous
 * copy comes as several back to back: frontend/src/rt_copy.c) while this
 * one's bytes go out. A part is everything that landed by the time the last
 * part went out, so a GPU far ahead of the socket costs few writes.
 *
 * Where. Only where the transport sends a payload in parts
 * (TRANSPORT_CAP_SEND_PARTS: tcp, tls, shm); over rdma the client reads the
 * whole staging buffer zero-copy, so the reply goes whole as before.
 * Off unless REMOTE_GPUD_COPY_PIPE=1 (bench/run-gpu.sh's RG_PIPE_AB tables
 * both ways side by side): on an H200 (63bf718), while the issuing thread
 * still polled the whole copy for BE_FAST_NS before it left the reply to the
 * waiter, replies of 256 KiB-4 MiB sent in parts were no faster than whole
 * ones (65-93% of TCP acked against 73-112%, within the run's noise).
 *
 * Floors. The first chunk cannot be sent before the GPU copied it, and its
 * copy cannot start before the request arrived: a copy costs at least the
 * exchange plus the GPU's latency for one chunk (local cudaMemcpy D2H from
 * pinned memory on the H200: 7.1 us at 4 KiB, 6.6 at 16 KiB, 7.5 at 64 KiB).
 * So copies of up to 64 KiB stay at exchange + copy (4 KiB: 15.8 + 7 us
 * against TCP acked's 15.8, about 70%), and the pipelined ones approach TCP
 * acked as that latency shrinks against their transfer (256 KiB: 41 us of
 * TCP acked + ~7.5, about 85%; 1 MiB: 125 + 7.5, about 94%).
 *
 * Copies to the device are not cut this way: a synchronous one over tcp
 * returns once its bytes are sent (the frame is async), so the server's GPU
 * copy is not on the client's path, and the loop thread receives the next
 * frame while the executor copies this one. Starting a frame's device copy
 * before its payload is complete would also need the transport to hand over
 * a partial payload (payload_dest names one buffer, on_frame comes once it
 * is full), and could only be issued where nothing is ahead of the frame on
 * the executor (stream order). What bounds those rows is the receive.
 *
 * Failures. A chunk that cannot be issued: the ones issued are waited for and
 * the error answered. The first chunk's event fails: its error is answered.
 * A later chunk's event fails after the reply's header went out: the frame
 * cannot be completed and the connection ends (transport_sendv_parts). That
 * is a fault of the context during this copy (a kernel of another stream),
 * after which the context fails every call anyway; bad ranges are refused
 * before anything is issued (op_copy.c).
 */
#include "copy_pipe.h"

#include <inttypes.h>
#include <stdlib.h>

#include "reply.h"

typedef struct copy_pipe {
	unsigned n, next;                 /* chunks; the next one to wait for */
	CUevent ev[BE_PIPE_CHUNKS];
	size_t end[BE_PIPE_CHUNKS];       /* bytes up to the end of chunk i */
	size_t len;
	int dev;
	uint64_t seq;
	be_buf out;
	CUresult err; /* the later chunk that failed */
} copy_pipe;

int be_copy_pipe_wanted(be_session *s, uint64_t len)
{
	return len > BE_PIPE_FIRST && be_srv.copy_pipe && (transport_caps(s->conn) & TRANSPORT_CAP_SEND_PARTS);
}

static void pipe_free(be_session *s, copy_pipe *p)
{
	for (unsigned i = 0; i < p->n; i++)
		be_event_put_internal(s, p->dev, p->ev[i]);
	be_staging_release(&s->staging, &p->out);
	free(p);
}

/* transport_ready_fn: waits for the next chunk, then takes every later one
 * that landed too, so that a part is as large as the GPU allows (each part is
 * a write of its own). */
static int64_t chunk_ready(void *ctx, size_t sent)
{
	copy_pipe *p = ctx;
	while (p->next < p->n && p->end[p->next] <= sent)
		p->next++;
	if (p->next >= p->n)
		return -1;
	CUresult r = be_drv.cuEventSynchronize(p->ev[p->next]);
	if (r != CUDA_SUCCESS) {
		p->err = r;
		return -1;
	}
	while (++p->next < p->n && be_drv.cuEventQuery(p->ev[p->next]) == CUDA_SUCCESS)
		;
	return (int64_t)p->end[p->next - 1];
}

/* be_wait_fn, on the waiter. */
static void pipe_run(be_session *s, void *arg, int live)
{
	copy_pipe *p = arg;

	if (live) {
		p->next = 0;
		int64_t ready0 = chunk_ready(p, 0); /* the first chunk and those that landed with it */
		if (ready0 < 0) {
			be_drv.cuEventSynchronize(p->ev[p->n - 1]); /* the rest may still write the buffer */
			be_reply_status_seq(s, p->seq, p->err);
		} else {
			p->err = CUDA_SUCCESS;
			be_reply_send_parts(s, be_reply_begin_seq(s, p->seq, 0), p->out.p, p->len, (size_t)ready0,
					    chunk_ready, p);
			if (p->err)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": copy to the host failed on the GPU after its reply "
					 "began (%s): closing the connection", s->id, be_errname(p->err));
			if (p->next < p->n) /* the send stopped early: chunks may still land */
				be_drv.cuEventSynchronize(p->ev[p->n - 1]);
		}
	}
	pipe_free(s, p);
}

int be_copy_pipe_dtoh(be_session *s, be_req *rq, CUstream st, CUdeviceptr src, be_buf *b, size_t len)
{
	copy_pipe *p = calloc(1, sizeof(*p));
	CUresult r = CUDA_SUCCESS;
	size_t off = 0, n = BE_PIPE_FIRST;
	int issued = 0;

	if (!p) {
		be_staging_release(&s->staging, b);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->dev = s->cur;
	p->len = len;
	p->seq = rq->seq;
	p->out = *b;
	*b = (be_buf){0};
	while (off < len) {
		if (n > len - off || p->n == BE_PIPE_CHUNKS - 1)
			n = len - off;
		if ((r = be_drv.cuMemcpyDtoHAsync((char *)p->out.p + off, src + off, n, st)) != CUDA_SUCCESS)
			break;
		issued = 1;
		CUevent ev = be_event_record_internal(s, st, &r);
		if (!ev)
			break;
		p->ev[p->n] = ev;
		off += n;
		p->end[p->n++] = off;
		if (n < BE_PIPE_MAX_CHUNK)
			n *= 2;
	}
	/* The waiter idle, no request behind this one, and a reply the loop
	 * thread may send (BE_NOW_MAX): once the first chunk landed (polled for
	 * BE_FAST_NS at most) the reply goes from here, in parts as the rest
	 * lands, which saves the hand-off to the waiter. */
	if (r == CUDA_SUCCESS && len <= BE_NOW_MAX && be_waiter_fast(s, p->ev[0], BE_FAST_NS, 1)) {
		pipe_run(s, p, 1); /* replies, and frees p */
		return BE_REPLIED;
	}
	be_wentry *e = r == CUDA_SUCCESS ? be_wentry_new(s) : NULL;
	if (!e) {
		/* Rare: chunks issued without an event may still write the buffer. */
		if (issued)
			be_drv.cuStreamSynchronize(st);
		pipe_free(s, p);
		return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
	}
	e->kind = BE_WAIT_FN;
	e->fn = pipe_run;
	e->arg = p;
	be_waiter_push(s, e);
	return BE_DEFERRED;
}
