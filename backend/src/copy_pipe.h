/*
 * A copy to the host whose reply goes out while the GPU still copies it
 * (copy_pipe.c).
 */
#ifndef BE_COPY_PIPE_H
#define BE_COPY_PIPE_H

#include "backend.h"

/* The first chunk; a copy of more is pipelined where the transport can send a
 * payload in parts (be_copy_pipe_wanted). */
#define BE_PIPE_FIRST (64u << 10)
/* Chunks double from BE_PIPE_FIRST up to this. */
#define BE_PIPE_MAX_CHUNK (1u << 20)
/* The most chunks of one copy: the last takes the rest. */
#define BE_PIPE_CHUNKS 16

/* Whether a D2H copy of len bytes is pipelined on s. */
int be_copy_pipe_wanted(be_session *s, uint64_t len);
/* Executor or loop (+now): copies len bytes from src into the staging buffer
 * *b (taken over: left empty) on st, chunk by chunk, and has the waiter send
 * rq's reply with them as each chunk lands. BE_DEFERRED, or a CUresult after
 * nothing was sent (b released, the stream's issued chunks waited for). */
int be_copy_pipe_dtoh(be_session *s, be_req *rq, CUstream st, CUdeviceptr src, be_buf *b, size_t len);

#endif
