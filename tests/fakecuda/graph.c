/*
 * graph.c: stream operations, stream capture, graphs and their replay.
 *
 * Every stream-ordered call (kernel launch, copy, memset, host function) becomes an
 * fk_op and goes through fk_submit(): on a stream that is not capturing, the op runs
 * now; on a capturing one it is appended to the capture's graph as one node, depending
 * on the node captured last on that stream, and does not run.
 *
 * A graph is a list of nodes, each with its type, its op (kernel, memcpy, memset,
 * host), event or child graph, and the ids of the nodes it depends on (its incoming
 * edges, in the order they were added). Nodes are added by capture or one by one
 * (cuGraphAdd*Node), and edges by cuGraphAdd/RemoveDependencies.
 *
 * Capture: cuStreamBeginCapture starts a capture on a stream (its origin) and creates
 * its graph. Another stream joins by waiting on an event recorded in the capture.
 * cuStreamEndCapture on the origin ends the capture for every stream in it and hands
 * the graph out, or, if the capture was invalidated (a synchronizing call on a
 * capturing stream, work on the legacy stream, a stream callback), destroys it and
 * fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Unjoined forks are not detected.
 *
 * A graph exec is its graph flattened at instantiation into one list of steps in a
 * dependency order (child graphs inlined, empty nodes dropped), each step remembering
 * the node it came from (cuGraphExecKernelNodeSetParams); destroying the graph
 * afterwards does not affect it. cuGraphLaunch runs the steps one after the other
 * (kernels are logged and emulated again on each replay). While a replay calls a host
 * function the lock is dropped, so the exec is pinned (busy) and freed by whoever
 * unpins it last.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

typedef struct fk_gnode {
	uint64_t id;
	int type;              /* CUgraphNodeType */
	fk_op op;              /* kernel, memcpy, memset, host */
	uint64_t event;        /* event record / wait */
	fk_graph *child;       /* child graph: the node's own copy */
	uint64_t mem_ptr;      /* memory alloc / free node: the address */
	size_t mem_size;       /* memory alloc node: its size */
	uint64_t *deps;        /* nodes this one depends on */
	size_t ndeps;
} fk_gnode;

struct fk_graph {
	uint64_t id;           /* 0 for a child graph's copy (no handle) */
	fk_ctx *ctx;
	fk_gnode *nodes;
	size_t n, cap;
};

typedef struct fk_step {
	uint64_t node;         /* the graph node it came from */
	int type;
	fk_op op;
	uint64_t event;
} fk_step;

typedef struct fk_exec {
	uint64_t id;
	fk_ctx *ctx;
	fk_step *steps;
	size_t n;
	unsigned long long flags; /* as instantiated */
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

static int has_op(int type)
{
	return type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY ||
	       type == CU_GRAPH_NODE_TYPE_MEMSET || type == CU_GRAPH_NODE_TYPE_HOST;
}

static fk_graph *graph_new(fk_ctx *c, int with_handle)
{
	fk_graph *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->ctx = c;
	if (with_handle && !(g->id = fk_handle_new(FK_GRAPH, g, c))) {
		free(g);
		return NULL;
	}
	return g;
}

static void node_free(fk_gnode *nd)
{
	fk_handle_del(nd->id);
	if (has_op(nd->type))
		fk_op_free(&nd->op);
	if (nd->child)
		fk_graph_destroy(nd->child);
	free(nd->deps);
}

void fk_graph_destroy(fk_graph *g)
{
	for (size_t i = 0; i < g->n; i++)
		node_free(&g->nodes[i]);
	if (g->id)
		fk_handle_del(g->id);
	free(g->nodes);
	free(g);
}

static fk_gnode *node_in(fk_graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->nodes[i].id == id)
			return &g->nodes[i];
	return NULL;
}

/* Whether deps name n distinct nodes of g. */
static int deps_ok(fk_graph *g, const uint64_t *deps, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!node_in(g, deps[i]))
			return 0;
		for (size_t j = 0; j < i; j++)
			if (deps[j] == deps[i])
				return 0;
	}
	return 1;
}

/* Appends a node of type with a copy of deps (checked by the caller); the node
 * takes op's buffers and child. NULL when out of memory (nothing taken). */
static fk_gnode *graph_add(fk_graph *g, int type, const uint64_t *deps, size_t ndeps)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		fk_gnode *nodes = realloc(g->nodes, cap * sizeof *nodes);
		if (!nodes)
			return NULL;
		g->nodes = nodes;
		g->cap = cap;
	}
	fk_gnode *nd = &g->nodes[g->n];
	memset(nd, 0, sizeof *nd);
	if (ndeps && !(nd->deps = malloc(ndeps * sizeof *deps)))
		return NULL;
	if (!(nd->id = fk_handle_new(FK_NODE, g, g->ctx))) {
		free(nd->deps);
		return NULL;
	}
	if (ndeps)
		memcpy(nd->deps, deps, ndeps * sizeof *deps);
	nd->ndeps = ndeps;
	nd->type = type;
	g->n++;
	return nd;
}

/* A deep copy of g's nodes into the empty graph dst, with new node ids. */
static CUresult graph_copy(fk_graph *dst, const fk_graph *g)
{
	for (size_t i = 0; i < g->n; i++) {
		const fk_gnode *src = &g->nodes[i];
		fk_gnode *nd = graph_add(dst, src->type, NULL, 0);
		if (!nd)
			return CUDA_ERROR_OUT_OF_MEMORY;
		nd->event = src->event;
		if (has_op(src->type) && fk_op_clone(&nd->op, &src->op) != 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (src->child) {
			if (!(nd->child = graph_new(dst->ctx, 0)))
				return CUDA_ERROR_OUT_OF_MEMORY;
			CUresult rc = graph_copy(nd->child, src->child);
			if (rc != CUDA_SUCCESS)
				return rc;
		}
		if (src->ndeps && !(nd->deps = malloc(src->ndeps * sizeof *nd->deps)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t d = 0; d < src->ndeps; d++)
			for (size_t j = 0; j < g->n; j++)
				if (g->nodes[j].id == src->deps[d])
					nd->deps[nd->ndeps++] = dst->nodes[j].id;
	}
	return CUDA_SUCCESS;
}

static void exec_free(fk_exec *x)
{
	for (size_t i = 0; i < x->n; i++)
		if (has_op(x->steps[i].type))
			fk_op_free(&x->steps[i].op);
	free(x->steps);
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
		uint64_t dep = s->last_node && node_in(g, s->last_node) ? s->last_node : 0;
		fk_gnode *nd = graph_add(g, types[op->kind], &dep, dep ? 1 : 0);
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
	if (rc == CUDA_SUCCESS && !(cap->graph = graph_new(c, 1))) {
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
	if (rc == CUDA_SUCCESS && !(g = graph_new(c, 1)))
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

/* A node handle of context c: its graph and record, or NULL. */
static fk_gnode *node_get(fk_ctx *c, CUgraphNode h, fk_graph **gp)
{
	fk_graph *g = fk_handle_get(FK_H(h), FK_NODE, c);
	fk_gnode *nd = g ? node_in(g, FK_H(h)) : NULL;
	if (gp)
		*gp = g;
	return nd;
}

/* Start of every cuGraphAdd*Node: the graph, its output pointer and the
 * dependencies, as the driver checks them (a node of another graph, or twice in
 * the list, is CUDA_ERROR_INVALID_VALUE). */
#define ADD_BEGIN(ph, h, deps, ndeps)                                                      \
	GRAPH_BEGIN(h);                                                                    \
	fk_gnode *nd = NULL;                                                               \
	if (rc == CUDA_SUCCESS && (!(ph) || ((ndeps) && !(deps)) ||                        \
	                           !deps_ok(g, (const uint64_t *)(deps), (ndeps))))         \
		rc = CUDA_ERROR_INVALID_VALUE

#define ADD_NODE(type, deps, ndeps)                                                        \
	do {                                                                               \
		if (rc == CUDA_SUCCESS &&                                                  \
		    !(nd = graph_add(g, (type), (const uint64_t *)(deps), (ndeps))))       \
			rc = CUDA_ERROR_OUT_OF_MEMORY;                                     \
	} while (0)

_Static_assert(sizeof(CUgraphNode) == sizeof(uint64_t), "node handles are ids");

/* A kernel node's parameters, checked and packed as a launch's (CUkernel, p->kern,
 * is not emulated). */
static CUresult kernel_params(fk_ctx *c, const CUDA_KERNEL_NODE_PARAMS *p, fk_op *op)
{
	if (!p || !p->func)
		return CUDA_ERROR_INVALID_VALUE;
	const unsigned grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
	const unsigned block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
	return fk_kernel_op(c, p->func, grid, block, p->sharedMemBytes, p->kernelParams, p->extra, 0,
	                    op);
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	ADD_NODE(CU_GRAPH_NODE_TYPE_EMPTY, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS)
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_KERNEL_NODE_PARAMS *p)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	fk_op op;
	int packed = rc == CUDA_SUCCESS && (rc = kernel_params(c, p, &op)) == CUDA_SUCCESS;
	ADD_NODE(CU_GRAPH_NODE_TYPE_KERNEL, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS) {
		nd->op = op;
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	} else if (packed) {
		fk_op_free(&op); /* no node to take it */
	}
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

/* Start of a node's parameter calls: the node h of the current context, if it
 * is of type want, else CUDA_ERROR_INVALID_VALUE. */
#define TYPED_NODE_BEGIN(h, want)                                                          \
	fk_ctx *c;                                                                         \
	CUresult rc = fk_begin(&c);                                                        \
	fk_gnode *nd = rc == CUDA_SUCCESS ? node_get(c, (h), NULL) : NULL;                 \
	if (rc == CUDA_SUCCESS && (!nd || nd->type != (want)))                             \
		rc = CUDA_ERROR_INVALID_VALUE

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p)
{
	TYPED_NODE_BEGIN(hNode, CU_GRAPH_NODE_TYPE_KERNEL);
	fk_op op;
	if (rc == CUDA_SUCCESS)
		rc = kernel_params(c, p, &op);
	if (rc == CUDA_SUCCESS) {
		fk_op_free(&nd->op);
		nd->op = op;
	}
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	/* the driver runs the node in ctx: one of this process's, here the current one */
	if (rc == CUDA_SUCCESS && FK_H(ctx) != c->id)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (rc == CUDA_SUCCESS && (!p || (p->elementSize != 1 && p->elementSize != 2 &&
	                                       p->elementSize != 4) ||
	                                !p->width || !p->height ||
	                                (p->height > 1 && p->pitch < p->width * p->elementSize) ||
	                                !fk_range2d_ok(c, (uintptr_t)p->dst, p->pitch,
	                                               p->width * p->elementSize, p->height)))
		rc = CUDA_ERROR_INVALID_VALUE;
	ADD_NODE(CU_GRAPH_NODE_TYPE_MEMSET, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS) {
		nd->op = (fk_op){ .kind = FK_OP_SET };
		nd->op.u.s.dst = (uintptr_t)p->dst;
		nd->op.u.s.pitch = p->height > 1 ? p->pitch : p->width * p->elementSize;
		nd->op.u.s.width = p->width;
		nd->op.u.s.height = p->height;
		nd->op.u.s.elem = p->elementSize;
		nd->op.u.s.value = p->value;
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	}
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

/* The address of a copy side's first byte; NULL for sides not emulated (host
 * memory, arrays). */
static uintptr_t copy_side(CUmemorytype t, CUdeviceptr dev, size_t x, size_t y, size_t z,
                           size_t pitch, size_t height)
{
	if (t != CU_MEMORYTYPE_DEVICE && t != CU_MEMORYTYPE_UNIFIED)
		return 0;
	return (uintptr_t)dev + x + y * pitch + z * pitch * height;
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_MEMCPY3D *p, CUcontext ctx)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	uintptr_t src = 0, dst = 0;
	size_t rows = 0;
	if (rc == CUDA_SUCCESS && FK_H(ctx) != c->id)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (rc == CUDA_SUCCESS && !p)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		src = copy_side(p->srcMemoryType, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ,
		                p->srcPitch, p->srcHeight);
		dst = copy_side(p->dstMemoryType, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ,
		                p->dstPitch, p->dstHeight);
		/* slices back to back make one run of rows; other shapes are not emulated */
		if (!src || !dst || (p->Depth > 1 && (p->srcHeight != p->Height || p->dstHeight != p->Height)))
			rc = CUDA_ERROR_NOT_SUPPORTED;
		rows = p->Height * p->Depth;
	}
	if (rc == CUDA_SUCCESS && (!p->WidthInBytes || !rows ||
	                           (rows > 1 && (p->srcPitch < p->WidthInBytes ||
	                                         p->dstPitch < p->WidthInBytes)) ||
	                           !fk_range2d_ok(c, src, p->srcPitch, p->WidthInBytes, rows) ||
	                           !fk_range2d_ok(c, dst, p->dstPitch, p->WidthInBytes, rows)))
		rc = CUDA_ERROR_INVALID_VALUE;
	ADD_NODE(CU_GRAPH_NODE_TYPE_MEMCPY, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS) {
		nd->op = (fk_op){ .kind = FK_OP_COPY };
		nd->op.u.c.dst = dst;
		nd->op.u.c.src = src;
		nd->op.u.c.dpitch = rows > 1 ? p->dstPitch : p->WidthInBytes;
		nd->op.u.c.spitch = rows > 1 ? p->srcPitch : p->WidthInBytes;
		nd->op.u.c.width = p->WidthInBytes;
		nd->op.u.c.height = rows;
		nd->op.u.c.dst_dev = nd->op.u.c.src_dev = 1;
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	}
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

static CUresult add_event_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                               size_t numDependencies, CUevent event, int type, const char *fn)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS && !fk_handle_get(FK_H(event), FK_EVENT, c))
		rc = CUDA_ERROR_INVALID_HANDLE;
	ADD_NODE(type, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS) {
		nd->event = FK_H(event);
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	}
	return fk_end(rc, fn, "%p, %p", (void *)hGraph, (void *)event);
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                           const CUgraphNode *dependencies, size_t numDependencies,
                                           CUevent event)
{
	return add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
	                      CU_GRAPH_NODE_TYPE_EVENT_RECORD, __func__);
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         CUevent event)
{
	return add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
	                      CU_GRAPH_NODE_TYPE_WAIT_EVENT, __func__);
}

/* A host node's parameters (a host function is any non-NULL fn). */
static CUresult host_params(const CUDA_HOST_NODE_PARAMS *p, fk_op *op)
{
	if (!p || !p->fn)
		return CUDA_ERROR_INVALID_VALUE;
	*op = (fk_op){ .kind = FK_OP_HOST };
	op->u.h.fn = p->fn;
	op->u.h.data = p->userData;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    const CUDA_HOST_NODE_PARAMS *p)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	fk_op op;
	if (rc == CUDA_SUCCESS)
		rc = host_params(p, &op);
	ADD_NODE(CU_GRAPH_NODE_TYPE_HOST, dependencies, numDependencies);
	if (rc == CUDA_SUCCESS) {
		nd->op = op;
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	}
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *p)
{
	TYPED_NODE_BEGIN(hNode, CU_GRAPH_NODE_TYPE_HOST);
	if (rc == CUDA_SUCCESS && !p)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		p->fn = nd->op.u.h.fn;
		p->userData = nd->op.u.h.data;
	}
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *p)
{
	TYPED_NODE_BEGIN(hNode, CU_GRAPH_NODE_TYPE_HOST);
	fk_op op;
	if (rc == CUDA_SUCCESS && (rc = host_params(p, &op)) == CUDA_SUCCESS)
		nd->op = op;
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies, size_t numDependencies,
                                          CUgraph childGraph)
{
	ADD_BEGIN(phGraphNode, hGraph, dependencies, numDependencies);
	fk_graph *child = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(childGraph), FK_GRAPH, c) : NULL;
	if (rc == CUDA_SUCCESS && (!child || child == g))
		rc = CUDA_ERROR_INVALID_VALUE;
	ADD_NODE(CU_GRAPH_NODE_TYPE_GRAPH, dependencies, numDependencies);
	/* the node holds a copy: later changes to childGraph do not reach it */
	if (rc == CUDA_SUCCESS && (!(nd->child = graph_new(c, 0)) ||
	                           (rc = graph_copy(nd->child, child)) != CUDA_SUCCESS)) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		g->n--;
		node_free(nd);
	}
	if (rc == CUDA_SUCCESS)
		*phGraphNode = (CUgraphNode)(uintptr_t)nd->id;
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	GRAPH_BEGIN(hGraph);
	if (rc == CUDA_SUCCESS && graph_capturing(g))
		rc = CUDA_ERROR_ILLEGAL_STATE; /* still being captured into */
	if (rc == CUDA_SUCCESS)
		fk_graph_destroy(g);
	return fk_end(rc, __func__, "%p", (void *)hGraph);
}

CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	GRAPH_BEGIN(originalGraph);
	fk_graph *ng = NULL;
	if (rc == CUDA_SUCCESS && !phGraphClone)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !(ng = graph_new(c, 1)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS && (rc = graph_copy(ng, g)) != CUDA_SUCCESS)
		fk_graph_destroy(ng);
	if (rc == CUDA_SUCCESS)
		*phGraphClone = (CUgraph)(uintptr_t)ng->id;
	return fk_end(rc, __func__, "%p", (void *)originalGraph);
}

CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode)
{
	fk_ctx *c;
	fk_graph *g = NULL;
	CUresult rc = fk_begin(&c);
	fk_gnode *nd = rc == CUDA_SUCCESS ? node_get(c, hNode, &g) : NULL;

	if (rc == CUDA_SUCCESS && !nd)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		uint64_t id = nd->id;
		node_free(nd);
		memmove(nd, nd + 1, (size_t)(g->nodes + g->n - (nd + 1)) * sizeof *nd);
		g->n--;
		/* and every edge it had */
		for (size_t i = 0; i < g->n; i++) {
			fk_gnode *o = &g->nodes[i];
			size_t k = 0;
			for (size_t d = 0; d < o->ndeps; d++)
				if (o->deps[d] != id)
					o->deps[k++] = o->deps[d];
			o->ndeps = k;
		}
	}
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	GRAPH_BEGIN(hGraph);
	size_t n = 0;
	if (rc == CUDA_SUCCESS && !numNodes)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && nodes) {
		for (size_t i = 0; i < *numNodes; i++)
			nodes[i] = i < g->n ? (CUgraphNode)(uintptr_t)g->nodes[i].id : NULL;
		n = *numNodes < g->n ? *numNodes : g->n;
	} else if (rc == CUDA_SUCCESS) {
		n = g->n;
	}
	if (rc == CUDA_SUCCESS)
		*numNodes = n;
	return fk_end(rc, __func__, "%p -> %zu", (void *)hGraph, n);
}

CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	GRAPH_BEGIN(hGraph);
	size_t n = 0;
	if (rc == CUDA_SUCCESS && !numRootNodes)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++) {
		if (g->nodes[i].ndeps)
			continue;
		if (rootNodes && n < *numRootNodes)
			rootNodes[n] = (CUgraphNode)(uintptr_t)g->nodes[i].id;
		n++;
	}
	if (rc == CUDA_SUCCESS && rootNodes) {
		for (size_t i = n; i < *numRootNodes; i++)
			rootNodes[i] = NULL;
		if (n > *numRootNodes)
			n = *numRootNodes;
	}
	if (rc == CUDA_SUCCESS)
		*numRootNodes = n;
	return fk_end(rc, __func__, "%p -> %zu", (void *)hGraph, n);
}

CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                 CUgraphEdgeData *edgeData, size_t *numEdges)
{
	GRAPH_BEGIN(hGraph);
	size_t n = 0;
	if (rc == CUDA_SUCCESS && (!numEdges || (!from != !to) || (edgeData && !from)))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++) {
		for (size_t d = 0; d < g->nodes[i].ndeps; d++, n++) {
			if (!from || n >= *numEdges)
				continue;
			from[n] = (CUgraphNode)(uintptr_t)g->nodes[i].deps[d];
			to[n] = (CUgraphNode)(uintptr_t)g->nodes[i].id;
			if (edgeData)
				memset(&edgeData[n], 0, sizeof *edgeData);
		}
	}
	if (rc == CUDA_SUCCESS && from) {
		for (size_t i = n; i < *numEdges; i++) {
			from[i] = to[i] = NULL;
			if (edgeData)
				memset(&edgeData[i], 0, sizeof *edgeData);
		}
		if (n > *numEdges)
			n = *numEdges;
	}
	if (rc == CUDA_SUCCESS)
		*numEdges = n;
	return fk_end(rc, __func__, "%p -> %zu", (void *)hGraph, n);
}

/* Adds (remove 0) or removes the edges from[i] -> to[i]. */
static CUresult edit_edges(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                           const CUgraphEdgeData *edgeData, size_t n, int remove, const char *fn)
{
	static const CUgraphEdgeData plain;
	GRAPH_BEGIN(hGraph);
	if (rc == CUDA_SUCCESS && n && (!from || !to))
		rc = CUDA_ERROR_INVALID_VALUE;
	/* check everything first: a failed call changes nothing */
	for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
		fk_gnode *a = node_in(g, FK_H(from[i])), *b = node_in(g, FK_H(to[i]));
		int have = 0;
		if (edgeData && memcmp(&edgeData[i], &plain, sizeof plain) != 0) {
			rc = CUDA_ERROR_NOT_SUPPORTED; /* programmatic edges are not emulated */
			break;
		}
		if (!a || !b || a == b) {
			rc = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		for (size_t d = 0; d < b->ndeps; d++)
			have |= b->deps[d] == a->id;
		for (size_t j = 0; j < i; j++)
			if (from[j] == from[i] && to[j] == to[i])
				rc = CUDA_ERROR_INVALID_VALUE;
		if (have != remove)
			rc = CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
		fk_gnode *b = node_in(g, FK_H(to[i]));
		if (remove) {
			size_t k = 0;
			for (size_t d = 0; d < b->ndeps; d++)
				if (b->deps[d] != FK_H(from[i]))
					b->deps[k++] = b->deps[d];
			b->ndeps = k;
		} else {
			uint64_t *deps = realloc(b->deps, (b->ndeps + 1) * sizeof *deps);
			if (!deps) {
				rc = CUDA_ERROR_OUT_OF_MEMORY;
				break;
			}
			b->deps = deps;
			b->deps[b->ndeps++] = FK_H(from[i]);
		}
	}
	return fk_end(rc, fn, "%p, %zu", (void *)hGraph, n);
}

CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                        const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	return edit_edges(hGraph, from, to, edgeData, numDependencies, 0, __func__);
}

CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                           const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	return edit_edges(hGraph, from, to, edgeData, numDependencies, 1, __func__);
}

CUresult fk_capture_mem_node(fk_stream *s, int type, uint64_t ptr, size_t size)
{
	if (s->cap->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	fk_graph *g = s->cap->graph;
	uint64_t dep = s->last_node && node_in(g, s->last_node) ? s->last_node : 0;
	fk_gnode *nd = graph_add(g, type, &dep, dep ? 1 : 0);
	if (!nd)
		return CUDA_ERROR_OUT_OF_MEMORY;
	nd->mem_ptr = ptr;
	nd->mem_size = size;
	s->last_node = nd->id;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_gnode *nd = rc == CUDA_SUCCESS ? node_get(c, hNode, NULL) : NULL;

	if (rc == CUDA_SUCCESS && (!nd || !p || nd->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		memset(p, 0, sizeof *p);
		p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		p->poolProps.location.id = c->dev;
		p->bytesize = nd->mem_size;
		p->dptr = (CUdeviceptr)nd->mem_ptr;
	}
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_gnode *nd = rc == CUDA_SUCCESS ? node_get(c, hNode, NULL) : NULL;

	if (rc == CUDA_SUCCESS && (!nd || !type))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*type = (CUgraphNodeType)nd->type;
	return fk_end(rc, __func__, "%p", (void *)hNode);
}

/* Appends g's nodes to x's steps in a dependency order (Kahn's algorithm, lowest
 * index first, so a captured graph keeps its capture order); child graphs inline.
 * CUDA_ERROR_INVALID_VALUE for a cycle. */
static CUresult flatten(fk_exec *x, size_t *cap, const fk_graph *g)
{
	CUresult rc = CUDA_SUCCESS;
	unsigned char *done = calloc(g->n ? g->n : 1, 1);
	if (!done)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t left = g->n; left && rc == CUDA_SUCCESS; left--) {
		size_t i;
		for (i = 0; i < g->n; i++) {
			if (done[i])
				continue;
			size_t ready = 1;
			for (size_t d = 0; d < g->nodes[i].ndeps && ready; d++)
				for (size_t j = 0; j < g->n; j++)
					if (g->nodes[j].id == g->nodes[i].deps[d] && !done[j])
						ready = 0;
			if (ready)
				break;
		}
		if (i == g->n) {
			rc = CUDA_ERROR_INVALID_VALUE; /* a cycle */
			break;
		}
		done[i] = 1;
		const fk_gnode *nd = &g->nodes[i];
		if (nd->child) {
			rc = flatten(x, cap, nd->child);
			continue;
		}
		if (nd->type == CU_GRAPH_NODE_TYPE_EMPTY || nd->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
		    nd->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
			continue; /* memory nodes: made and freed at capture (fk_capture_mem_node) */
		if (x->n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 16;
			fk_step *st = realloc(x->steps, ncap * sizeof *st);
			if (!st) {
				rc = CUDA_ERROR_OUT_OF_MEMORY;
				break;
			}
			x->steps = st;
			*cap = ncap;
		}
		fk_step *st = &x->steps[x->n];
		*st = (fk_step){ .node = nd->id, .type = nd->type, .event = nd->event };
		if (has_op(nd->type) && fk_op_clone(&st->op, &nd->op) != 0) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		x->n++;
	}
	free(done);
	return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags)
{
	GRAPH_BEGIN(hGraph);
	fk_exec *x = NULL;
	size_t cap = 0;
	const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

	if (rc == CUDA_SUCCESS && (!phGraphExec || (flags & ~known)))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS && !(x = calloc(1, sizeof *x)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS)
		rc = flatten(x, &cap, g);
	if (rc == CUDA_SUCCESS) {
		x->ctx = c;
		x->flags = flags;
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
		if (!node_get(c, dependencies[i], &g) || g != s->cap->graph)
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

/* An update takes the new graph when it flattens into as many steps of the same
 * types, in order (the fake's notion of an unchanged topology); the exec keeps
 * its steps' node ids. */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	GRAPH_BEGIN(hGraph);
	fk_exec *x = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hGraphExec), FK_GRAPH_EXEC, c) : NULL;
	fk_exec t = {0};
	size_t cap = 0;

	if (rc == CUDA_SUCCESS && !x)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !resultInfo)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && x->busy)
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS)
		rc = flatten(&t, &cap, g);
	if (rc == CUDA_SUCCESS) {
		*resultInfo = (CUgraphExecUpdateResultInfo){ .result = CU_GRAPH_EXEC_UPDATE_SUCCESS };
		if (t.n != x->n) {
			resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
			rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
		}
		for (size_t i = 0; rc == CUDA_SUCCESS && i < t.n; i++) {
			if (t.steps[i].type != x->steps[i].type) {
				resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
				resultInfo->errorNode = (CUgraphNode)(uintptr_t)t.steps[i].node;
				rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
			}
		}
	}
	if (rc == CUDA_SUCCESS) {
		for (size_t i = 0; i < x->n; i++) {
			t.steps[i].node = x->steps[i].node;
			if (has_op(x->steps[i].type))
				fk_op_free(&x->steps[i].op);
		}
		free(x->steps);
		x->steps = t.steps;
	} else {
		for (size_t i = 0; i < t.n; i++)
			if (has_op(t.steps[i].type))
				fk_op_free(&t.steps[i].op);
		free(t.steps);
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hGraph);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS)
		fk_exec_destroy(x);
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS && !flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*flags = x->flags;
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

/* The step of exec x that node h became, if it is of type (else NULL). */
static fk_step *exec_step(fk_exec *x, CUgraphNode h, int type)
{
	for (size_t i = 0; x && i < x->n; i++)
		if (x->steps[i].node == FK_H(h))
			return x->steps[i].type == type ? &x->steps[i] : NULL;
	return NULL;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS *p)
{
	EXEC_BEGIN(hGraphExec);
	fk_step *st = exec_step(x, hNode, CU_GRAPH_NODE_TYPE_KERNEL);
	fk_op op;
	if (rc == CUDA_SUCCESS && !st)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = kernel_params(c, p, &op);
	if (rc == CUDA_SUCCESS) {
		fk_op_free(&st->op);
		st->op = op;
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hNode);
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              const CUDA_HOST_NODE_PARAMS *p)
{
	EXEC_BEGIN(hGraphExec);
	fk_step *st = exec_step(x, hNode, CU_GRAPH_NODE_TYPE_HOST);
	fk_op op;
	if (rc == CUDA_SUCCESS && !st)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (rc = host_params(p, &op)) == CUDA_SUCCESS)
		st->op = op;
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hNode);
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
		const fk_step *st = &x->steps[i];
		if (st->type == CU_GRAPH_NODE_TYPE_HOST) {
			CUhostFn fn = st->op.u.h.fn;
			void *data = st->op.u.h.data;
			pthread_mutex_unlock(&fk_mu);
			fn(data);
			pthread_mutex_lock(&fk_mu);
			/* the context may have gone while the lock was down */
			if (!(c = fk_handle_get(ctx_id, FK_CTX, NULL))) {
				rc = CUDA_ERROR_CONTEXT_IS_DESTROYED;
				break;
			}
		} else if (st->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
			fk_event *e = fk_handle_get(st->event, FK_EVENT, c);
			if (e) { /* an event destroyed since is skipped */
				e->recorded = 1;
				e->t_ns = fk_now_ns();
			}
		} else if (has_op(st->type)) {
			rc = op_run(c, &st->op);
		} /* event waits: everything before has run */
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
		/* launching a graph into a capture captures its nodes (of the kinds a
		 * stream can capture) */
		for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
			fk_op op;
			if (!has_op(x->steps[i].type))
				continue;
			if (fk_op_clone(&op, &x->steps[i].op) != 0)
				rc = CUDA_ERROR_OUT_OF_MEMORY;
			else
				rc = fk_submit(c, s, &op);
		}
	} else if (rc == CUDA_SUCCESS) {
		rc = replay(c, x);
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hStream);
}
