/*
 * capture.c: stream operations and stream capture (graph_int.h: the graphs
 * they are captured into; graph.c's top comment has the design).
 *
 * Every stream-ordered call (kernel launch, copy, memset, host function) becomes an
 * fk_op and goes through fk_submit(): on a stream that is not capturing, the op runs
 * now; on a capturing one it is appended to the capture's graph as one node, depending
 * on the node captured last on that stream, and does not run.
 *
 * Capture: cuStreamBeginCapture starts a capture on a stream (its origin) and creates
 * its graph. Another stream joins by waiting on an event recorded in the capture.
 * cuStreamEndCapture on the origin ends the capture for every stream in it and hands
 * the graph out, or, if the capture was invalidated (a synchronizing call on a
 * capturing stream, work on the legacy stream, a stream callback), destroys it and
 * fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Unjoined forks are not detected.
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

fk_capture *fk_captures;
static uint64_t next_capture_seq = 1;
static _Thread_local CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ---- ops ---- */

void fk_op_free(fk_op *op)
{
	if (op->kind == FK_OP_KERNEL) {
		free(op->u.k.args);
		op->u.k.args = NULL;
	}
}

int fk_op_clone(fk_op *dst, const fk_op *src)
{
	*dst = *src;
	if (src->kind == FK_OP_KERNEL && src->u.k.nargs) {
		if (!(dst->u.k.args = malloc(src->u.k.nargs)))
			return -1;
		memcpy(dst->u.k.args, src->u.k.args, src->u.k.nargs);
	}
	return 0;
}

CUresult fk_op_run(fk_ctx *c, const fk_op *op)
{
	switch (op->kind) {
	case FK_OP_KERNEL: return fk_kernel_run(c, op);
	case FK_OP_COPY: return fk_copy_run(c, op);
	case FK_OP_SET: return fk_set_run(c, op);
	}
	return CUDA_ERROR_UNKNOWN;
}

/* ---- capture ---- */

fk_capture *fk_capture_find(uint64_t seq)
{
	for (fk_capture *cap = fk_captures; cap; cap = cap->next)
		if (cap->seq == seq)
			return cap;
	return NULL;
}

void fk_capture_join(fk_capture *cap, fk_stream *s)
{
	s->cap = cap;
	s->last_node = 0;
	if (!(s->flags & CU_STREAM_NON_BLOCKING))
		cap->nblocking++;
}

static void detach(fk_stream *s)
{
	if (!(s->flags & CU_STREAM_NON_BLOCKING))
		s->cap->nblocking--;
	s->cap = NULL;
	s->last_node = 0;
}

void fk_capture_end(fk_capture *cap, int keep_graph)
{
	uint64_t *ids;
	size_t n = fk_handle_list(FK_STREAM, cap->origin->ctx, &ids);

	for (size_t i = 0; i < n; i++) {
		fk_stream *s = fk_handle_get(ids[i], FK_STREAM, NULL);
		if (s && s->cap == cap)
			detach(s);
	}
	free(ids);
	for (fk_capture **pp = &fk_captures; *pp; pp = &(*pp)->next) {
		if (*pp == cap) {
			*pp = cap->next;
			break;
		}
	}
	if (!keep_graph)
		fk_graph_destroy(cap->graph);
	free(cap);
}

void fk_capture_leave(fk_stream *s)
{
	fk_capture *cap = s->cap;
	if (s == cap->origin) {
		fk_capture_end(cap, 0);
	} else {
		cap->invalidated = 1;
		detach(s);
	}
}

CUresult fk_capture_sync_check(fk_stream *s)
{
	if (!s->cap)
		return CUDA_SUCCESS;
	s->cap->invalidated = 1;
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult fk_capture_unsafe_check(void)
{
	CUresult rc = CUDA_SUCCESS;
	if (thread_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	for (fk_capture *cap = fk_captures; cap; cap = cap->next) {
		int mine = pthread_equal(cap->thread, pthread_self());
		/* this thread's own capture, unless begun relaxed; another thread's
		 * global one, unless this thread is in thread-local mode */
		int forbids = mine ? cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED
		                   : cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
		                     thread_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
		if (forbids) {
			cap->invalidated = 1;
			rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	}
	return rc;
}

CUresult fk_submit(fk_ctx *c, fk_stream *s, fk_op *op)
{
	CUresult rc;

	if (s->cap) {
		if (s->cap->invalidated) {
			fk_op_free(op);
			return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		}
		static const int types[] = { [FK_OP_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL,
		                             [FK_OP_COPY] = CU_GRAPH_NODE_TYPE_MEMCPY,
		                             [FK_OP_SET] = CU_GRAPH_NODE_TYPE_MEMSET,
		                             [FK_OP_HOST] = CU_GRAPH_NODE_TYPE_HOST };
		fk_graph *g = s->cap->graph;
		/* the node captured last on this stream, if it is still in the graph */
		uint64_t dep = s->last_node && fk_node_in(g, s->last_node) ? s->last_node : 0;
		fk_gnode *nd = fk_graph_add(g, types[op->kind], &dep, dep ? 1 : 0);
		if (!nd) {
			fk_op_free(op);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		nd->op = *op;
		s->last_node = nd->id;
		return CUDA_SUCCESS;
	}
	if (op->kind == FK_OP_HOST) {
		pthread_mutex_unlock(&fk_mu);
		op->u.h.fn(op->u.h.data);
		pthread_mutex_lock(&fk_mu);
		return CUDA_SUCCESS;
	}
	rc = fk_op_run(c, op);
	fk_op_free(op);
	return rc;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;
	fk_capture *cap = NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && s == &c->null_stream)
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	else if (rc == CUDA_SUCCESS && (unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && s->cap)
		rc = CUDA_ERROR_ILLEGAL_STATE;
	if (rc == CUDA_SUCCESS && !(cap = calloc(1, sizeof *cap)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS && !(cap->graph = fk_graph_new(c, 1))) {
		free(cap);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (rc == CUDA_SUCCESS) {
		cap->seq = next_capture_seq++;
		cap->origin = s;
		cap->mode = mode;
		cap->thread = pthread_self();
		cap->next = fk_captures;
		fk_captures = cap;
		fk_capture_join(cap, s);
	}
	return fk_end(rc, __func__, "%p, %d", (void *)hStream, (int)mode);
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;
	uint64_t gid = 0;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !phGraph)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !s->cap)
		rc = CUDA_ERROR_ILLEGAL_STATE;
	if (rc == CUDA_SUCCESS) {
		fk_capture *cap = s->cap;
		if (s != cap->origin) {
			cap->invalidated = 1;
			rc = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
		} else if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
		           !pthread_equal(cap->thread, pthread_self())) {
			rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
		} else if (cap->invalidated) {
			*phGraph = NULL;
			fk_capture_end(cap, 0);
			rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		} else {
			gid = cap->graph->id;
			*phGraph = (CUgraph)(uintptr_t)gid;
			fk_capture_end(cap, 1);
		}
	}
	return fk_end(rc, __func__, "%p -> %#llx", (void *)hStream, (unsigned long long)gid);
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !captureStatus)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (hStream == NULL || hStream == CU_STREAM_LEGACY)) {
		/* asking the legacy stream while a blocking stream captures is itself an
		 * implicit synchronization, but it does not invalidate the capture */
		for (fk_capture *cap = fk_captures; cap; cap = cap->next)
			if (cap->origin->ctx == c && cap->nblocking)
				rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	}
	if (rc == CUDA_SUCCESS)
		*captureStatus = !s->cap ? CU_STREAM_CAPTURE_STATUS_NONE
		                 : s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
		                                       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
{
	static const CUgraphEdgeData no_edge_data[1];
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !captureStatus_out)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		fk_capture *cap = s->cap;
		*captureStatus_out = !cap ? CU_STREAM_CAPTURE_STATUS_NONE
		                     : cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
		                                        : CU_STREAM_CAPTURE_STATUS_ACTIVE;
		if (cap && id_out)
			*id_out = cap->seq;
		if (cap && !cap->invalidated) {
			size_t ndeps = s->last_node ? 1 : 0;
			s->dep = (CUgraphNode)(uintptr_t)s->last_node;
			if (graph_out)
				*graph_out = (CUgraph)(uintptr_t)cap->graph->id;
			if (dependencies_out)
				*dependencies_out = ndeps ? &s->dep : NULL;
			if (edgeData_out)
				*edgeData_out = ndeps ? no_edge_data : NULL;
			if (numDependencies_out)
				*numDependencies_out = ndeps;
		}
	}
	return fk_end(rc, __func__, "%p", (void *)hStream);
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	/* Kept per thread as asked; fk_capture_unsafe_check applies it. */
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		CUstreamCaptureMode old = thread_capture_mode;
		thread_capture_mode = *mode;
		*mode = old;
	}
	return fk_end(rc, __func__, NULL);
}


/* The fake's captured nodes depend on one node per stream: a set (or an add to
 * an empty list) of at most one node; more is CUDA_ERROR_NOT_SUPPORTED. */
CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                   unsigned int flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;
	fk_graph *g = NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && ((numDependencies && !dependencies) || dependencyData ||
	                                (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
	                                 flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (!s->cap || s->cap->invalidated))
		rc = CUDA_ERROR_ILLEGAL_STATE;
	for (size_t i = 0; rc == CUDA_SUCCESS && i < numDependencies; i++)
		if (!fk_node_get(c, dependencies[i], &g) || g != s->cap->graph)
			rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		int set = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES || !s->last_node;
		if (numDependencies > 1 || (!set && numDependencies))
			rc = CUDA_ERROR_NOT_SUPPORTED;
		else if (set)
			s->last_node = numDependencies ? FK_H(dependencies[0]) : 0;
	}
	return fk_end(rc, __func__, "%p, %zu, %#x", (void *)hStream, numDependencies, flags);
}
