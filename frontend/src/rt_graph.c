/*
 * Graphs built node by node: cudaGraphCreate, cudaGraphAdd*Node, edges, node
 * queries, clones. The graph lives on the server; a cudaGraph_t is an id the
 * client chose, a cudaGraphNode_t an id the server gave (it also names the nodes
 * capture and cloning make), good only with its own graph. Every node call waits
 * for its answer: CUDA reports a bad node or parameter at the call.
 *
 * Kernel nodes carry their arguments packed as a launch packs them. The client
 * keeps the parameters of the kernel nodes it made, so that
 * cudaGraphKernelNodeGetParams answers from them, with argument pointers that
 * stay valid while the node keeps those parameters, as CUDA's do.
 *
 * Memcpy nodes copy between device memory only: host memory is not on the
 * server, where the graph runs.
 */
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

_Static_assert(sizeof(cudaGraphNode_t) == 8, "node handles travel as 64-bit ids");

typedef struct knode {
	uint64_t id, graph;
	struct cudaKernelNodeParams p; /* kernelParams point into args */
	uint8_t *args;
	struct knode *next;
} knode;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static knode *knodes;

static uint64_t gid(cudaGraph_t g) { return (uint64_t)(uintptr_t)g; }
static uint64_t nid(cudaGraphNode_t n) { return (uint64_t)(uintptr_t)n; }

/* Forgets the kernel nodes of graph (node 0) or one node (graph 0). */
static void knodes_forget(uint64_t graph, uint64_t node)
{
	pthread_mutex_lock(&lock);
	for (knode **pp = &knodes; *pp;) {
		knode *k = *pp;
		if ((graph && k->graph == graph) || (node && k->id == node)) {
			*pp = k->next;
			free(k->p.kernelParams);
			free(k->args);
			free(k);
		} else {
			pp = &k->next;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* Records (or replaces) node's parameters from what was sent. */
static void knode_keep(uint64_t graph, uint64_t node, const struct cudaKernelNodeParams *p, const fe_kargs *a)
{
	knode *k = calloc(1, sizeof(*k));
	if (!k)
		return; /* GetParams will say it does not know the node */
	k->id = node;
	k->graph = graph;
	k->p = *p;
	k->p.extra = NULL;
	k->args = malloc(a->len ? a->len : 1);
	k->p.kernelParams = calloc(a->nparams ? a->nparams : 1, sizeof(void *));
	if (!k->args || !k->p.kernelParams) {
		free(k->args);
		free(k->p.kernelParams);
		free(k);
		return;
	}
	memcpy(k->args, a->buf, a->len);
	for (uint32_t i = 0; i < a->nparams; i++)
		k->p.kernelParams[i] = k->args + a->off[i];
	knodes_forget(0, node);
	pthread_mutex_lock(&lock);
	k->next = knodes;
	knodes = k;
	pthread_mutex_unlock(&lock);
}

/* The start of every add: the channel and the arguments every add checks. */
static cudaError_t add_enter(fe_api_site site, fe_conn **c, cudaGraphNode_t *pNode, cudaGraph_t graph,
			     const cudaGraphNode_t *deps, size_t ndeps)
{
	cudaError_t e = fe_rt_enter_site(c, site);
	if (e != cudaSuccess)
		return e;
	if (!pNode || !graph || (ndeps && !deps))
		return fe_rt_fail(cudaErrorInvalidValue);
	return cudaSuccess;
}
#define add_enter(...) add_enter(FE_API_SITE, __VA_ARGS__)

/* Node handles are their ids: the list goes as it is (little-endian u64). */
#define DEPS(deps, n) (const void *)(deps), (n) * sizeof(cudaGraphNode_t)

/* id is read after st is known: the call that fills it is an argument too. */
static cudaError_t added(int st, cudaGraphNode_t *pNode, const uint64_t *id)
{
	if (st == 0)
		*pNode = (cudaGraphNode_t)(uintptr_t)*id;
	return fe_rt_leave(st);
}

cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pGraph || flags != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t id = fe_rt_new_id();
	int st = fe_rpc_graph_create(c, id, flags);
	if (st == 0)
		*pGraph = (cudaGraph_t)(uintptr_t)id;
	return fe_rt_leave(st);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	knodes_forget(gid(graph), 0);
	return fe_rt_leave(fe_rpc_graph_destroy(c, gid(graph)));
}

cudaError_t cudaGraphClone(cudaGraph_t *pGraphClone, cudaGraph_t originalGraph)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pGraphClone || !originalGraph)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t id = fe_rt_new_id();
	int st = fe_rpc_graph_clone(c, id, gid(originalGraph));
	if (st == 0)
		*pGraphClone = (cudaGraph_t)(uintptr_t)id;
	return fe_rt_leave(st);
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
				  size_t numDependencies)
{
	fe_conn *c;
	uint64_t id = 0;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess)
		return e;
	return added(fe_rpc_graph_add_empty(c, gid(graph), DEPS(pDependencies, numDependencies), &id), pGraphNode, &id);
}

/* The kernel parameters of a node as the wire takes them; the error is recorded. */
static cudaError_t kernel_args(fe_conn *c, const struct cudaKernelNodeParams *p, fe_kargs *a)
{
	if (!p)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (p->extra) {
		rg_log_once("frontend", "not supported (kernel arguments in the extra format)", "cudaKernelNodeParams");
		return fe_rt_fail(cudaErrorNotSupported);
	}
	return fe_kernel_pack(c, p->func, p->gridDim, p->blockDim, p->kernelParams, p->sharedMemBytes, a);
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
				   size_t numDependencies, const struct cudaKernelNodeParams *pNodeParams)
{
	fe_conn *c;
	fe_kargs a;
	uint64_t id = 0;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess || (e = kernel_args(c, pNodeParams, &a)) != cudaSuccess)
		return e;
	const struct cudaKernelNodeParams *p = pNodeParams;
	int st = fe_rpc_graph_add_kernel(c, gid(graph), DEPS(pDependencies, numDependencies), a.func_id, p->gridDim.x,
					 p->gridDim.y, p->gridDim.z, p->blockDim.x, p->blockDim.y, p->blockDim.z,
					 p->sharedMemBytes, a.buf, a.len, &id);
	if (st == 0)
		knode_keep(gid(graph), id, p, &a);
	fe_kargs_free(&a);
	return added(st, pGraphNode, &id);
}

/* cudaGraphKernelNodeSetParams (x 0) and cudaGraphExecKernelNodeSetParams. */
static cudaError_t kernel_set(fe_api_site site, uint64_t x, cudaGraphNode_t node,
			      const struct cudaKernelNodeParams *p)
{
	fe_conn *c;
	fe_kargs a;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (!node)
		return fe_rt_fail(cudaErrorInvalidValue);
	if ((e = kernel_args(c, p, &a)) != cudaSuccess)
		return e;
	int st = fe_rpc_graph_kernel_set(c, x, nid(node), a.func_id, p->gridDim.x, p->gridDim.y, p->gridDim.z,
					 p->blockDim.x, p->blockDim.y, p->blockDim.z, p->sharedMemBytes, a.buf, a.len);
	if (st == 0 && x == 0) {
		pthread_mutex_lock(&lock);
		knode *k = knodes;
		while (k && k->id != nid(node))
			k = k->next;
		uint64_t graph = k ? k->graph : 0;
		pthread_mutex_unlock(&lock);
		if (graph)
			knode_keep(graph, nid(node), p, &a);
	}
	fe_kargs_free(&a);
	return fe_rt_leave(st);
}

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const struct cudaKernelNodeParams *pNodeParams)
{
	return kernel_set(FE_API_SITE, 0, node, pNodeParams);
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
					     const struct cudaKernelNodeParams *pNodeParams)
{
	if (!hGraphExec)
		return fe_rt_fail(cudaErrorInvalidValue);
	return kernel_set(FE_API_SITE, (uint64_t)(uintptr_t)hGraphExec, node, pNodeParams);
}

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, struct cudaKernelNodeParams *pNodeParams)
{
	if (!node || !pNodeParams)
		return fe_rt_fail(cudaErrorInvalidValue);
	pthread_mutex_lock(&lock);
	knode *k = knodes;
	while (k && k->id != nid(node))
		k = k->next;
	if (k)
		*pNodeParams = k->p;
	pthread_mutex_unlock(&lock);
	if (k)
		return cudaSuccess;
	/* A node of a captured or cloned graph: its function and arguments are the
	 * server's, which would have to be mapped back to this process's. */
	rg_log_once("frontend", "not supported (kernel node not made by cudaGraphAddKernelNode here)",
		    "cudaGraphKernelNodeGetParams");
	return fe_rt_fail(cudaErrorNotSupported);
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
				   size_t numDependencies, const struct cudaMemsetParams *p)
{
	fe_conn *c;
	uint64_t id = 0;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess)
		return e;
	if (!p)
		return fe_rt_fail(cudaErrorInvalidValue);
	return added(fe_rpc_graph_add_memset(c, gid(graph), DEPS(pDependencies, numDependencies), (uintptr_t)p->dst,
					     p->pitch, p->value, p->elementSize, p->width, p->height, &id),
		     pGraphNode, &id);
}

/* Whether p is device memory of this client (allocated, a module global, managed). */
static int device_side(const void *p)
{
	int k = fe_mem_kind(p);
	return k == FE_MEM_DEVICE || k == FE_MEM_MODULE || k == FE_MEM_MANAGED;
}

/* A memcpy node between device memory; the error is recorded. */
static cudaError_t add_copy(fe_api_site site, fe_conn *c, cudaGraphNode_t *pNode, cudaGraph_t graph,
			    const cudaGraphNode_t *deps, size_t ndeps, const struct cudaPitchedPtr *dst,
			    const struct cudaPos *dpos, const struct cudaPitchedPtr *src, const struct cudaPos *spos,
			    struct cudaExtent ext, enum cudaMemcpyKind kind)
{
	uint64_t id = 0;
	if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
		if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
			return fe_rt_fail(cudaErrorInvalidMemcpyDirection);
		rg_log_once("frontend", "not supported (memcpy node from or to host memory: the graph runs on the server)",
			    site.fn);
		return fe_rt_fail(cudaErrorNotSupported);
	}
	if (!device_side(src->ptr) || !device_side(dst->ptr)) {
		rg_log_once("frontend", "not supported (memcpy node from or to host memory: the graph runs on the server)",
			    site.fn);
		return fe_rt_fail(cudaErrorNotSupported);
	}
	uint64_t d = (uintptr_t)dst->ptr + dpos->x + dpos->y * dst->pitch + dpos->z * dst->pitch * dst->ysize;
	uint64_t s = (uintptr_t)src->ptr + spos->x + spos->y * src->pitch + spos->z * src->pitch * src->ysize;
	return added(fe_rpc_graph_add_memcpy(c, gid(graph), DEPS(deps, ndeps), d, dst->pitch, dst->ysize, s, src->pitch,
					     src->ysize, ext.width, ext.height, ext.depth, &id),
		     pNode, &id);
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
				   size_t numDependencies, const struct cudaMemcpy3DParms *p)
{
	fe_conn *c;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess)
		return e;
	if (!p)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (p->srcArray || p->dstArray) {
		rg_log_once("frontend", "not supported (memcpy node with a CUDA array)", "cudaGraphAddMemcpyNode");
		return fe_rt_fail(cudaErrorNotSupported);
	}
	return add_copy(FE_API_SITE, c, pGraphNode, graph, pDependencies, numDependencies, &p->dstPtr, &p->dstPos,
			&p->srcPtr, &p->srcPos, p->extent, p->kind);
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
				     const cudaGraphNode_t *pDependencies, size_t numDependencies, void *dst,
				     const void *src, size_t count, enum cudaMemcpyKind kind)
{
	fe_conn *c;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess)
		return e;
	struct cudaPitchedPtr d = {dst, count, count, 1}, s = {(void *)src, count, count, 1};
	struct cudaPos zero = {0, 0, 0};
	return add_copy(FE_API_SITE, c, pGraphNode, graph, pDependencies, numDependencies, &d, &zero, &s, &zero,
			(struct cudaExtent){count, 1, 1}, kind);
}

static cudaError_t add_event(fe_api_site site, cudaGraphNode_t *pNode, cudaGraph_t graph, const cudaGraphNode_t *deps,
			     size_t ndeps, cudaEvent_t event, uint32_t wait)
{
	fe_conn *c;
	uint64_t id = 0;
	cudaError_t e = add_enter(&c, pNode, graph, deps, ndeps);
	if (e != cudaSuccess)
		return e;
	if (!event)
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	return added(fe_rpc_graph_add_event(c, gid(graph), DEPS(deps, ndeps), fe_rt_event(event), wait, &id), pNode, &id);
}

cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
					const cudaGraphNode_t *pDependencies, size_t numDependencies, cudaEvent_t event)
{
	return add_event(FE_API_SITE, pGraphNode, graph, pDependencies, numDependencies, event, 0);
}

cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
				      const cudaGraphNode_t *pDependencies, size_t numDependencies, cudaEvent_t event)
{
	return add_event(FE_API_SITE, pGraphNode, graph, pDependencies, numDependencies, event, 1);
}

cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
				       const cudaGraphNode_t *pDependencies, size_t numDependencies,
				       cudaGraph_t childGraph)
{
	fe_conn *c;
	uint64_t id = 0;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess)
		return e;
	if (!childGraph)
		return fe_rt_fail(cudaErrorInvalidValue);
	return added(fe_rpc_graph_add_child(c, gid(graph), DEPS(pDependencies, numDependencies), gid(childGraph), &id),
		     pGraphNode, &id);
}

/* Host nodes: the function runs in this process at every replay; the server
 * knows it by an id (rt_hostfn.c) that the node's record holds until no graph
 * or exec of the server's has it. */
cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
				 size_t numDependencies, const struct cudaHostNodeParams *pNodeParams)
{
	fe_conn *c;
	uint64_t id = 0, hid;
	cudaError_t e = add_enter(&c, pGraphNode, graph, pDependencies, numDependencies);
	if (e != cudaSuccess)
		return e;
	if (!pNodeParams || !pNodeParams->fn)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!(hid = fe_hostnode_register(pNodeParams->fn, pNodeParams->userData)))
		return fe_rt_fail(cudaErrorMemoryAllocation);
	fe_conn_expect_events(c);
	int st = fe_rpc_graph_add_host(c, gid(graph), DEPS(pDependencies, numDependencies), hid, &id);
	if (st)
		fe_hostnode_drop(hid);
	return added(st, pGraphNode, &id);
}

cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, struct cudaHostNodeParams *pNodeParams)
{
	fe_conn *c;
	uint64_t hid = 0;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!node || !pNodeParams)
		return fe_rt_fail(cudaErrorInvalidValue);
	int st = fe_rpc_graph_host_get(c, nid(node), &hid);
	if (st == 0 && !fe_hostnode_lookup(hid, &pNodeParams->fn, &pNodeParams->userData)) {
		LOG_WARN("frontend", "host node %llu: function %llu unknown here", (unsigned long long)nid(node),
			 (unsigned long long)hid);
		st = CUDA_ERROR_INVALID_VALUE;
	}
	return fe_rt_leave(st);
}

/* cudaGraphHostNodeSetParams (x 0) and cudaGraphExecHostNodeSetParams. */
static cudaError_t host_set(fe_api_site site, uint64_t x, cudaGraphNode_t node, const struct cudaHostNodeParams *p)
{
	fe_conn *c;
	uint64_t hid;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (!node || !p || !p->fn)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!(hid = fe_hostnode_register(p->fn, p->userData)))
		return fe_rt_fail(cudaErrorMemoryAllocation);
	fe_conn_expect_events(c);
	int st = fe_rpc_graph_host_set(c, x, nid(node), hid);
	if (st)
		fe_hostnode_drop(hid);
	return fe_rt_leave(st);
}

cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const struct cudaHostNodeParams *pNodeParams)
{
	return host_set(FE_API_SITE, 0, node, pNodeParams);
}

cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
					   const struct cudaHostNodeParams *pNodeParams)
{
	if (!hGraphExec)
		return fe_rt_fail(cudaErrorInvalidValue);
	return host_set(FE_API_SITE, (uintptr_t)hGraphExec, node, pNodeParams);
}

/* Edges are plain dependencies here: edge data other than the default (a
 * programmatic launch edge) is not forwarded. */
static cudaError_t edges_edit(fe_api_site site, cudaGraph_t graph, const cudaGraphNode_t *from,
			      const cudaGraphNode_t *to, const cudaGraphEdgeData *edgeData, size_t n, uint32_t remove)
{
	static const cudaGraphEdgeData plain;
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (!graph || (n && (!from || !to)))
		return fe_rt_fail(cudaErrorInvalidValue);
	for (size_t i = 0; edgeData && i < n; i++) {
		if (memcmp(&edgeData[i], &plain, sizeof(plain)) != 0) {
			rg_log_once("frontend", "not supported (graph edge data other than the default)", site.fn);
			return fe_rt_fail(cudaErrorNotSupported);
		}
	}
	return fe_rt_leave(fe_rpc_graph_edges_edit(c, gid(graph), DEPS(from, n), DEPS(to, n), remove));
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from, const cudaGraphNode_t *to,
				     const cudaGraphEdgeData *edgeData, size_t numDependencies)
{
	return edges_edit(FE_API_SITE, graph, from, to, edgeData, numDependencies, 0);
}

cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t *from, const cudaGraphNode_t *to,
					const cudaGraphEdgeData *edgeData, size_t numDependencies)
{
	return edges_edit(FE_API_SITE, graph, from, to, edgeData, numDependencies, 1);
}

/* cudaGraphGetNodes and cudaGraphGetRootNodes: as CUDA, a list longer than the
 * graph's gets NULL past its end, and a shorter one the first *num nodes. */
static cudaError_t get_nodes(fe_api_site site, cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *num, uint32_t roots)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (!num)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t n = 0, max = nodes ? *num : 0;
	/* a count alone is a query that names no nodes */
	int st = !nodes && !roots ? fe_rpc_graph_node_count(c, gid(graph), &n)
				  : fe_rpc_graph_get_nodes(c, gid(graph), roots, max, &n, nodes, max * sizeof(*nodes));
	if (st == 0 && nodes) {
		for (uint64_t i = n; i < max; i++)
			nodes[i] = NULL;
		*num = n < max ? n : max;
	} else if (st == 0) {
		*num = n;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
	return get_nodes(FE_API_SITE, graph, nodes, numNodes, 0);
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes, size_t *pNumRootNodes)
{
	return get_nodes(FE_API_SITE, graph, pRootNodes, pNumRootNodes, 1);
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t *from, cudaGraphNode_t *to,
			      cudaGraphEdgeData *edgeData, size_t *numEdges)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!numEdges || !from != !to || (edgeData && !from))
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t n = 0, max = from ? *numEdges : 0;
	int st = fe_rpc_graph_get_edges(c, gid(graph), max, &n, from, max * sizeof(*from), to, max * sizeof(*to));
	if (st == 0 && from) {
		for (uint64_t i = n; i < max; i++)
			from[i] = to[i] = NULL;
		if (edgeData)
			memset(edgeData, 0, max * sizeof(*edgeData)); /* every edge here is a default one */
		*numEdges = n < max ? n : max;
	} else if (st == 0) {
		*numEdges = n;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!node || !pType)
		return fe_rt_fail(cudaErrorInvalidValue);
	int32_t t = 0;
	int st = fe_rpc_graph_node_type(c, nid(node), &t);
	if (st == 0)
		*pType = (enum cudaGraphNodeType)t; /* the runtime's numbers are the driver's */
	return fe_rt_leave(st);
}

cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!node)
		return fe_rt_fail(cudaErrorInvalidValue);
	int st = fe_rpc_graph_destroy_node(c, nid(node));
	if (st == 0)
		knodes_forget(0, nid(node));
	return fe_rt_leave(st);
}

cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
					   cudaGraphInstantiateParams *instantiateParams)
{
	if (!instantiateParams)
		return fe_rt_fail(cudaErrorInvalidValue);
	/* The upload stream only says where to upload ahead of the first launch:
	 * the server uploads at the launch instead. */
	cudaError_t e = cudaGraphInstantiateWithFlags(pGraphExec, graph, instantiateParams->flags);
	instantiateParams->errNode_out = NULL;
	instantiateParams->result_out = e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
	return e;
}

/* After fork the child's sessions hold none of the parent's graphs (rt_state.c's
 * atfork handler; single-threaded in the child). */
static void forget_all(void)
{
	pthread_mutex_init(&lock, NULL);
	while (knodes) {
		knode *k = knodes;
		knodes = k->next;
		free(k->p.kernelParams);
		free(k->args);
		free(k);
	}
}

/* After fork the client's graph records are gone (a reset device's are
 * dropped by its calls as they fail, as before). */
static void forget(int dev)
{
	if (dev == FE_RT_FORK)
		forget_all();
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
