/*
 * A session's handle tables and allocation ranges (session_handles.c): setup
 * at accept, free with the session, typed lookups for handlers.
 */
#ifndef BE_SESSION_HANDLES_H
#define BE_SESSION_HANDLES_H

#include <cuda.h>

#include "handles.h"
#include "session.h"

/* At accept: every table empty, the per-device ones (what teardown destroys
 * with each device's context current) noting the session's current device. */
void be_session_handles_init(be_session *s);
/* When the session is freed (the objects are gone by then: teardown.c). */
void be_session_handles_free(be_session *s);

/* 0 when found; CUDA_ERROR_INVALID_HANDLE for unknown or stale ids. Stream id
 * 0 is the NULL stream of the session's context. */
int be_get_stream(be_session *s, uint64_t id, CUstream *out);
int be_get_event(be_session *s, uint64_t id, CUevent *out);
int be_get_module(be_session *s, uint64_t id, CUmodule *out);
int be_get_func(be_session *s, uint64_t id, CUfunction *out);
int be_get_graph(be_session *s, uint64_t id, CUgraph *out);
int be_get_gexec(be_session *s, uint64_t id, CUgraphExec *out);
int be_get_array(be_session *s, uint64_t id, be_array **out);

/* A handle table's failed add (BE_H_*, handles.h) as the CUresult a handler
 * answers: CUDA_ERROR_OUT_OF_MEMORY for BE_H_ENOMEM, else bad (what CUDA
 * answers for a bad id there: CUDA_ERROR_INVALID_HANDLE or _INVALID_VALUE). */
static inline int be_h_status(int err, int bad) { return err == BE_H_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : bad; }

/* 0 if st is not capturing; CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED if it is,
 * or the query's error. */
int be_stream_capturing(CUstream st);

#endif
