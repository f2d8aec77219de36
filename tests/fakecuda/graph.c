/*
 * graph.c: stream operations, stream capture, graphs and their replay.
 *
 * Every stream-ordered call (kernel launch, copy, memset, host function) becomes an
 * fk_op and goes through fk_submit(): on a stream that is not capturing, the op runs
 * now; on a capturing one it is appended to the capture's graph as one node and does
 * not run. Since streams run eagerly, call order is a valid execution order, so a
 * graph is just the list of its ops in capture order: cuGraphLaunch replays them one
 * after the other (kernels are logged again and emulated again on each replay).
 *
 * Capture: cuStreamBeginCapture starts a capture on a stream (its origin) and creates
 * its graph. Another stream joins by waiting on an event recorded in the capture.
 * cuStreamEndCapture on the origin ends the capture for every stream in it and hands
 * the graph out, or, if the capture was invalidated (a synchronizing call on a
 * capturing stream, work on the legacy stream, a stream callback), destroys it and
 * fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. The dependency edges between the
 * nodes are not kept (nodes are in order), so unjoined forks are not detected.
 *
 * A graph exec is a copy of its graph's ops made at instantiation; destroying the
 * graph afterwards does not affect it. While a replay calls a host function the lock
 * is dropped, so the exec is pinned (busy) and freed by whoever unpins it last.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

struct fk_graph {
	uint64_t id;
	fk_ctx *ctx;
	fk_op *ops;
	uint64_t *nodes;       /* node handle of each op */
	size_t n, cap;
};

typedef struct fk_exec {
	uint64_t id;
	fk_ctx *ctx;
	fk_op *ops;
	size_t n;
	unsigned busy;         /* replays in progress */
	int dead;              /* destroyed while busy */
} fk_exec;

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

static CUresult op_run(fk_ctx *c, const fk_op *op)
{
	switch (op->kind) {
	case FK_OP_KERNEL: return fk_kernel_run(c, op);
	case FK_OP_COPY: return fk_copy_run(c, op);
	case FK_OP_SET: return fk_set_run(c, op);
	}
	return CUDA_ERROR_UNKNOWN;
}

/* ---- graphs ---- */

static fk_graph *graph_new(fk_ctx *c)
{
	fk_graph *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->ctx = c;
	if (!(g->id = fk_handle_new(FK_GRAPH, g, c))) {
		free(g);
		return NULL;
	}
	return g;
}

/* Appends op (taking its buffers) as a new node; returns the node's handle or 0. */
static uint64_t graph_add(fk_graph *g, fk_op *op)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		fk_op *ops = realloc(g->ops, cap * sizeof *ops);
		if (!ops)
			return 0;
		g->ops = ops;
		uint64_t *nodes = realloc(g->nodes, cap * sizeof *nodes);
		if (!nodes)
			return 0;
		g->nodes = nodes;
		g->cap = cap;
	}
	uint64_t node = fk_handle_new(FK_NODE, g, g->ctx);
	if (!node)
		return 0;
	g->ops[g->n] = *op;
	g->nodes[g->n] = node;
	g->n++;
	return node;
}

void fk_graph_destroy(fk_graph *g)
{
	for (size_t i = 0; i < g->n; i++) {
		fk_handle_del(g->nodes[i]);
		fk_op_free(&g->ops[i]);
	}
	fk_handle_del(g->id);
	free(g->ops);
	free(g->nodes);
	free(g);
}

static void exec_free(fk_exec *x)
{
	for (size_t i = 0; i < x->n; i++)
		fk_op_free(&x->ops[i]);
	free(x->ops);
	free(x);
}

void fk_exec_destroy(void *o)
{
	fk_exec *x = o;
	fk_handle_del(x->id);
	if (x->busy)
		x->dead = 1;
	else
		exec_free(x);
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

CUresult fk_submit(fk_ctx *c, fk_stream *s, fk_op *op)
{
	CUresult rc;

	if (s->cap) {
		if (s->cap->invalidated) {
			fk_op_free(op);
			return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		}
		uint64_t node = graph_add(s->cap->graph, op);
		if (!node) {
			fk_op_free(op);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		s->last_node = node;
		return CUDA_SUCCESS;
	}
	if (op->kind == FK_OP_HOST) {
		pthread_mutex_unlock(&fk_mu);
		op->u.h.fn(op->u.h.data);
		pthread_mutex_lock(&fk_mu);
		return CUDA_SUCCESS;
	}
	rc = op_run(c, op);
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
	if (rc == CUDA_SUCCESS && !(cap->graph = graph_new(c))) {
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
	/* Kept per thread as asked; the fake does not police "unsafe" calls by mode. */
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

/* ---- graph API ---- */

static int graph_capturing(const fk_graph *g)
{
	for (fk_capture *cap = fk_captures; cap; cap = cap->next)
		if (cap->graph == g)
			return 1;
	return 0;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	fk_ctx *c;
	fk_graph *g = NULL;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && (!phGraph || flags != 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !(g = graph_new(c)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS)
		*phGraph = (CUgraph)(uintptr_t)g->id;
	return fk_end(rc, __func__, NULL);
}

#define GRAPH_BEGIN(h)                                                                 \
	fk_ctx *c;                                                                     \
	CUresult rc = fk_begin(&c);                                                    \
	fk_graph *g = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(h), FK_GRAPH, c) : NULL;  \
	if (rc == CUDA_SUCCESS && !g)                                                  \
		rc = CUDA_ERROR_INVALID_HANDLE

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	GRAPH_BEGIN(hGraph);
	if (rc == CUDA_SUCCESS && graph_capturing(g))
		rc = CUDA_ERROR_ILLEGAL_STATE; /* still being captured into */
	if (rc == CUDA_SUCCESS)
		fk_graph_destroy(g);
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	GRAPH_BEGIN(hGraph);
	if (rc == CUDA_SUCCESS && !numNodes)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && nodes) {
		for (size_t i = 0; i < *numNodes; i++)
			nodes[i] = i < g->n ? (CUgraphNode)(uintptr_t)g->nodes[i] : NULL;
	}
	if (rc == CUDA_SUCCESS)
		*numNodes = g->n;
	return fk_end(rc, __func__, "%p -> %zu", (void *)hGraph, g ? g->n : 0);
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_graph *g = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hNode), FK_NODE, c) : NULL;

	if (rc == CUDA_SUCCESS && !g)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !type)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++) {
		if (g->nodes[i] != FK_H(hNode))
			continue;
		switch (g->ops[i].kind) {
		case FK_OP_KERNEL: *type = CU_GRAPH_NODE_TYPE_KERNEL; break;
		case FK_OP_COPY: *type = CU_GRAPH_NODE_TYPE_MEMCPY; break;
		case FK_OP_SET: *type = CU_GRAPH_NODE_TYPE_MEMSET; break;
		case FK_OP_HOST: *type = CU_GRAPH_NODE_TYPE_HOST; break;
		}
		break;
	}
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags)
{
	GRAPH_BEGIN(hGraph);
	fk_exec *x = NULL;
	const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

	if (rc == CUDA_SUCCESS && (!phGraphExec || (flags & ~known)))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS && (!(x = calloc(1, sizeof *x)) ||
	                           (g->n && !(x->ops = calloc(g->n, sizeof *x->ops)))))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++) {
		if (fk_op_clone(&x->ops[i], &g->ops[i]) != 0)
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		else
			x->n++;
	}
	if (rc == CUDA_SUCCESS) {
		x->ctx = c;
		if (!(x->id = fk_handle_new(FK_GRAPH_EXEC, x, c)))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (rc == CUDA_SUCCESS) {
		*phGraphExec = (CUgraphExec)(uintptr_t)x->id;
	} else if (x) {
		exec_free(x);
		x = NULL;
	}
	return fk_end(rc, __func__, "%p, %#llx -> %#llx", (void *)hGraph, flags,
	              x ? (unsigned long long)x->id : 0ull);
}

#define EXEC_BEGIN(h)                                                                      \
	fk_ctx *c;                                                                         \
	CUresult rc = fk_begin(&c);                                                        \
	fk_exec *x = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(h), FK_GRAPH_EXEC, c) : NULL;  \
	if (rc == CUDA_SUCCESS && !x)                                                      \
		rc = CUDA_ERROR_INVALID_HANDLE

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS)
		fk_exec_destroy(x);
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS && !fk_stream_get(c, hStream))
		rc = CUDA_ERROR_INVALID_HANDLE;
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

static CUresult replay(fk_ctx *c, fk_exec *x)
{
	uint64_t ctx_id = c->id;
	CUresult rc = CUDA_SUCCESS;

	x->busy++;
	for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS && c->sticky == CUDA_SUCCESS; i++) {
		const fk_op *op = &x->ops[i];
		if (op->kind == FK_OP_HOST) {
			CUhostFn fn = op->u.h.fn;
			void *data = op->u.h.data;
			pthread_mutex_unlock(&fk_mu);
			fn(data);
			pthread_mutex_lock(&fk_mu);
			/* the context may have gone while the lock was down */
			if (!(c = fk_handle_get(ctx_id, FK_CTX, NULL))) {
				rc = CUDA_ERROR_CONTEXT_IS_DESTROYED;
				break;
			}
		} else {
			rc = op_run(c, op);
		}
	}
	if (--x->busy == 0 && x->dead)
		exec_free(x);
	return rc;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	EXEC_BEGIN(hGraphExec);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS && s->cap) {
		/* launching a graph into a capture captures its nodes */
		for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
			fk_op op;
			if (fk_op_clone(&op, &x->ops[i]) != 0)
				rc = CUDA_ERROR_OUT_OF_MEMORY;
			else
				rc = fk_submit(c, s, &op);
		}
	} else if (rc == CUDA_SUCCESS) {
		rc = replay(c, x);
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hStream);
}
