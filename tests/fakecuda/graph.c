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
 *
 * Files: capture.c (ops, capture), graph.c (graphs, nodes, edges: the graph
 * API), graph_exec.c (instantiate, update, replay), graph_int.h (shared).
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- graphs ---- */

int fk_node_has_op(int type)
{
	return type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY ||
	       type == CU_GRAPH_NODE_TYPE_MEMSET || type == CU_GRAPH_NODE_TYPE_HOST;
}

fk_graph *fk_graph_new(fk_ctx *c, int with_handle)
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
	if (fk_node_has_op(nd->type))
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

fk_gnode *fk_node_in(fk_graph *g, uint64_t id)
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
		if (!fk_node_in(g, deps[i]))
			return 0;
		for (size_t j = 0; j < i; j++)
			if (deps[j] == deps[i])
				return 0;
	}
	return 1;
}

/* Appends a node of type with a copy of deps (checked by the caller); the node
 * takes op's buffers and child. NULL when out of memory (nothing taken). */
fk_gnode *fk_graph_add(fk_graph *g, int type, const uint64_t *deps, size_t ndeps)
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
		fk_gnode *nd = fk_graph_add(dst, src->type, NULL, 0);
		if (!nd)
			return CUDA_ERROR_OUT_OF_MEMORY;
		nd->event = src->event;
		if (fk_node_has_op(src->type) && fk_op_clone(&nd->op, &src->op) != 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (src->child) {
			if (!(nd->child = fk_graph_new(dst->ctx, 0)))
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
	if (rc == CUDA_SUCCESS && !(g = fk_graph_new(c, 1)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS)
		*phGraph = (CUgraph)(uintptr_t)g->id;
	return fk_end(rc, __func__, NULL);
}

/* A node handle of context c: its graph and record, or NULL. */
fk_gnode *fk_node_get(fk_ctx *c, CUgraphNode h, fk_graph **gp)
{
	fk_graph *g = fk_handle_get(FK_H(h), FK_NODE, c);
	fk_gnode *nd = g ? fk_node_in(g, FK_H(h)) : NULL;
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
		    !(nd = fk_graph_add(g, (type), (const uint64_t *)(deps), (ndeps))))       \
			rc = CUDA_ERROR_OUT_OF_MEMORY;                                     \
	} while (0)

_Static_assert(sizeof(CUgraphNode) == sizeof(uint64_t), "node handles are ids");

/* A kernel node's parameters, checked and packed as a launch's (CUkernel, p->kern,
 * is not emulated). */
CUresult fk_kernel_node_params(fk_ctx *c, const CUDA_KERNEL_NODE_PARAMS *p, fk_op *op)
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
	int packed = rc == CUDA_SUCCESS && (rc = fk_kernel_node_params(c, p, &op)) == CUDA_SUCCESS;
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
	fk_gnode *nd = rc == CUDA_SUCCESS ? fk_node_get(c, (h), NULL) : NULL;                 \
	if (rc == CUDA_SUCCESS && (!nd || nd->type != (want)))                             \
		rc = CUDA_ERROR_INVALID_VALUE

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p)
{
	TYPED_NODE_BEGIN(hNode, CU_GRAPH_NODE_TYPE_KERNEL);
	fk_op op;
	if (rc == CUDA_SUCCESS)
		rc = fk_kernel_node_params(c, p, &op);
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
CUresult fk_host_node_params(const CUDA_HOST_NODE_PARAMS *p, fk_op *op)
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
		rc = fk_host_node_params(p, &op);
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
	if (rc == CUDA_SUCCESS && (rc = fk_host_node_params(p, &op)) == CUDA_SUCCESS)
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
	if (rc == CUDA_SUCCESS && (!(nd->child = fk_graph_new(c, 0)) ||
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
	if (rc == CUDA_SUCCESS && !(ng = fk_graph_new(c, 1)))
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
	fk_gnode *nd = rc == CUDA_SUCCESS ? fk_node_get(c, hNode, &g) : NULL;

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
		fk_gnode *a = fk_node_in(g, FK_H(from[i])), *b = fk_node_in(g, FK_H(to[i]));
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
		fk_gnode *b = fk_node_in(g, FK_H(to[i]));
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
	uint64_t dep = s->last_node && fk_node_in(g, s->last_node) ? s->last_node : 0;
	fk_gnode *nd = fk_graph_add(g, type, &dep, dep ? 1 : 0);
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
	fk_gnode *nd = rc == CUDA_SUCCESS ? fk_node_get(c, hNode, NULL) : NULL;

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
	fk_gnode *nd = rc == CUDA_SUCCESS ? fk_node_get(c, hNode, NULL) : NULL;

	if (rc == CUDA_SUCCESS && (!nd || !type))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*type = (CUgraphNodeType)nd->type;
	return fk_end(rc, __func__, "%p", (void *)hNode);
}
