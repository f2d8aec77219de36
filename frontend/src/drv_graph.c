/*
 * Driver API: graphs. A CUgraph, CUgraphNode and CUgraphExec are the runtime's
 * handles (rt_graph.c, rt_stream.c); the driver's parameter structs become the
 * runtime's here. A kernel node's function is a registered kernel: a CUfunction
 * or a CUkernel, both an fe_kernel that the runtime's lookup knows. What the
 * runtime layer does not support (memcpy nodes on host memory or arrays)
 * answers as it does: CUDA_ERROR_NOT_SUPPORTED, logged.
 */
#include <stddef.h>
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rt.h"

_Static_assert(sizeof(CUgraphNode) == sizeof(cudaGraphNode_t), "graph nodes are the runtime's");
_Static_assert((int)CU_GRAPH_NODE_TYPE_MEMSET == (int)cudaGraphNodeTypeMemset &&
		       (int)CU_GRAPH_NODE_TYPE_KERNEL == (int)cudaGraphNodeTypeKernel,
	       "node types are the runtime's");

/* The runtime's record of a kernel for a host stub or a kernel handle. */
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);

#define NODES(p) ((const cudaGraphNode_t *)(p))

/* A node's context: its device must be the current one, where the graph lives
 * (one server per device). NULL is the current context. */
static CUresult node_ctx(CUcontext ctx, const char *fn)
{
	if (!ctx)
		return CUDA_SUCCESS;
	int dev = fe_drv_dev_of(ctx);
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (dev != fe_rt_current_device()) {
		rg_log_once("frontend", "not supported (graph node for a context other than the current one)", fn);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	return FE_DRV(cudaGraphCreate((cudaGraph_t *)phGraph, flags));
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	return hGraph ? FE_DRV(cudaGraphDestroy(hGraph)) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	return FE_DRV(cudaGraphClone((cudaGraph_t *)phGraphClone, originalGraph));
}

/* ---- nodes */

CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			     size_t numDependencies)
{
	return FE_DRV(
		cudaGraphAddEmptyNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies), numDependencies));
}

/* The runtime's kernel node parameters of the driver's: func, or when it is
 * NULL kern (its ctx, if any, must be the current one). */
static CUresult kernel_params(const CUDA_KERNEL_NODE_PARAMS *p, struct cudaKernelNodeParams *out, const char *fn)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	const void *f = p->func;
	if (!f) {
		CUresult r = node_ctx(p->ctx, fn);
		if (r)
			return r;
		f = p->kern;
	}
	if (!f)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (struct cudaKernelNodeParams){
		.func = (void *)f,
		.gridDim = {p->gridDimX, p->gridDimY, p->gridDimZ},
		.blockDim = {p->blockDimX, p->blockDimY, p->blockDimZ},
		.sharedMemBytes = p->sharedMemBytes,
		.kernelParams = p->kernelParams,
		.extra = p->extra,
	};
	return CUDA_SUCCESS;
}

/* CUDA 10-11's parameters: the same without kern and ctx. */
static CUDA_KERNEL_NODE_PARAMS kernel_params_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS q = {0};
	memcpy(&q, p, sizeof(*p));
	return q;
}
_Static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS, kern) == sizeof(CUDA_KERNEL_NODE_PARAMS_v1),
	       "v2 parameters begin with v1's");

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct cudaKernelNodeParams kp;
	CUresult r = kernel_params(nodeParams, &kp, "cuGraphAddKernelNode");
	if (r)
		return r;
	return FE_DRV(cudaGraphAddKernelNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies),
					     numDependencies, &kp));
}

CUresult fe_drv_graph_add_kernel_node_v1(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					 size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_KERNEL_NODE_PARAMS p = kernel_params_v1(nodeParams);
	return cuGraphAddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

/* The parameters the node was given; the function as a kernel handle (a node
 * the runtime API made names its host stub). */
CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct cudaKernelNodeParams kp;
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = FE_DRV(cudaGraphKernelNodeGetParams(hNode, &kp));
	if (r)
		return r;
	cudaKernel_t k = NULL;
	if (__cudaGetKernel(&k, kp.func) != cudaSuccess)
		k = (cudaKernel_t)kp.func;
	/* A CUkernel and its CUfunction are one record here: both fields name it
	 * (the static runtime maps .kern back to its own entry). */
	*nodeParams = (CUDA_KERNEL_NODE_PARAMS){
		.func = (CUfunction)k,
		.kern = (CUkernel)k,
		.ctx = fe_drv_ctx_current(),
		.gridDimX = kp.gridDim.x,
		.gridDimY = kp.gridDim.y,
		.gridDimZ = kp.gridDim.z,
		.blockDimX = kp.blockDim.x,
		.blockDimY = kp.blockDim.y,
		.blockDimZ = kp.blockDim.z,
		.sharedMemBytes = kp.sharedMemBytes,
		.kernelParams = kp.kernelParams,
		.extra = kp.extra,
	};
	return CUDA_SUCCESS;
}

CUresult fe_drv_graph_kernel_node_get_params_v1(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS p;
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cuGraphKernelNodeGetParams(hNode, &p);
	if (r == CUDA_SUCCESS)
		memcpy(nodeParams, &p, sizeof(*nodeParams));
	return r;
}

CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct cudaKernelNodeParams kp;
	CUresult r = kernel_params(nodeParams, &kp, "cuGraphKernelNodeSetParams");
	return r ? r : FE_DRV(cudaGraphKernelNodeSetParams(hNode, &kp));
}

CUresult fe_drv_graph_kernel_node_set_params_v1(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_KERNEL_NODE_PARAMS p = kernel_params_v1(nodeParams);
	return cuGraphKernelNodeSetParams(hNode, &p);
}

CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct cudaKernelNodeParams kp;
	CUresult r = kernel_params(nodeParams, &kp, "cuGraphExecKernelNodeSetParams");
	return r ? r : FE_DRV(cudaGraphExecKernelNodeSetParams(hGraphExec, hNode, &kp));
}

CUresult fe_drv_graph_exec_kernel_node_set_params_v1(CUgraphExec hGraphExec, CUgraphNode hNode,
						     const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_KERNEL_NODE_PARAMS p = kernel_params_v1(nodeParams);
	return cuGraphExecKernelNodeSetParams(hGraphExec, hNode, &p);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	const CUDA_MEMSET_NODE_PARAMS *p = memsetParams;
	if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = node_ctx(ctx, "cuGraphAddMemsetNode");
	if (r)
		return r;
	struct cudaMemsetParams mp = {
		.dst = (void *)(uintptr_t)p->dst,
		.pitch = p->pitch,
		.value = p->value,
		.elementSize = p->elementSize,
		.width = p->width,
		.height = p->height,
	};
	return FE_DRV(cudaGraphAddMemsetNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies),
					     numDependencies, &mp));
}

/* Memcpy nodes copy device memory to device memory (the graph runs on the
 * server, where host memory is not): unified addresses are the runtime's
 * cudaMemcpyDefault, which checks that both lie in device memory. */
CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	const CUDA_MEMCPY3D *p = copyParams;
	if (!p || p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
		return CUDA_ERROR_INVALID_VALUE;
	CUmemorytype st = p->srcMemoryType, dt = p->dstMemoryType;
	if (st < CU_MEMORYTYPE_HOST || st > CU_MEMORYTYPE_UNIFIED || dt < CU_MEMORYTYPE_HOST ||
	    dt > CU_MEMORYTYPE_UNIFIED)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = node_ctx(ctx, "cuGraphAddMemcpyNode");
	if (r)
		return r;
	if (st == CU_MEMORYTYPE_HOST || st == CU_MEMORYTYPE_ARRAY || dt == CU_MEMORYTYPE_HOST ||
	    dt == CU_MEMORYTYPE_ARRAY) {
		rg_log_once("frontend", "not supported (memcpy node from or to host memory or an array)",
			    "cuGraphAddMemcpyNode");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	struct cudaMemcpy3DParms mp = {
		.srcPos = {p->srcXInBytes, p->srcY, p->srcZ},
		.srcPtr = {(void *)(uintptr_t)p->srcDevice, p->srcPitch, p->WidthInBytes, p->srcHeight},
		.dstPos = {p->dstXInBytes, p->dstY, p->dstZ},
		.dstPtr = {(void *)(uintptr_t)p->dstDevice, p->dstPitch, p->WidthInBytes, p->dstHeight},
		.extent = {p->WidthInBytes, p->Height, p->Depth},
		.kind = st == CU_MEMORYTYPE_DEVICE && dt == CU_MEMORYTYPE_DEVICE ? cudaMemcpyDeviceToDevice
										 : cudaMemcpyDefault,
	};
	return FE_DRV(cudaGraphAddMemcpyNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies),
					     numDependencies, &mp));
}

CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				  size_t numDependencies, CUgraph childGraph)
{
	return FE_DRV(cudaGraphAddChildGraphNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies),
						 numDependencies, childGraph));
}

CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				   size_t numDependencies, CUevent event)
{
	return FE_DRV(cudaGraphAddEventRecordNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies),
						  numDependencies, event));
}

CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				 size_t numDependencies, CUevent event)
{
	return FE_DRV(cudaGraphAddEventWaitNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies),
						numDependencies, event));
}

_Static_assert(sizeof(CUDA_HOST_NODE_PARAMS) == sizeof(struct cudaHostNodeParams) &&
		       offsetof(CUDA_HOST_NODE_PARAMS, userData) == offsetof(struct cudaHostNodeParams, userData),
	       "host node parameters are the runtime's");

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			    size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	return FE_DRV(cudaGraphAddHostNode((cudaGraphNode_t *)phGraphNode, hGraph, NODES(dependencies), numDependencies,
					   (const struct cudaHostNodeParams *)nodeParams));
}

CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
	return FE_DRV(cudaGraphHostNodeGetParams(hNode, (struct cudaHostNodeParams *)nodeParams));
}

CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	return FE_DRV(cudaGraphHostNodeSetParams(hNode, (const struct cudaHostNodeParams *)nodeParams));
}

CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	return FE_DRV(cudaGraphExecHostNodeSetParams((cudaGraphExec_t)hGraphExec, hNode,
						     (const struct cudaHostNodeParams *)nodeParams));
}

CUresult cuGraphDestroyNode(CUgraphNode hNode) { return FE_DRV(cudaGraphDestroyNode(hNode)); }

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	return FE_DRV(cudaGraphNodeGetType(hNode, (enum cudaGraphNodeType *)type));
}

/* ---- structure */

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	return FE_DRV(cudaGraphGetNodes(hGraph, (cudaGraphNode_t *)nodes, numNodes));
}

CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	return FE_DRV(cudaGraphGetRootNodes(hGraph, (cudaGraphNode_t *)rootNodes, numRootNodes));
}

CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edgeData,
			 size_t *numEdges)
{
	return FE_DRV(cudaGraphGetEdges(hGraph, (cudaGraphNode_t *)from, (cudaGraphNode_t *)to,
					(cudaGraphEdgeData *)edgeData, numEdges));
}

CUresult fe_drv_graph_get_edges_v1(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
	return cuGraphGetEdges(hGraph, from, to, NULL, numEdges);
}

CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
				const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	return FE_DRV(cudaGraphAddDependencies(hGraph, NODES(from), NODES(to), (const cudaGraphEdgeData *)edgeData,
					       numDependencies));
}

CUresult fe_drv_graph_add_dependencies_v1(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					  size_t numDependencies)
{
	return cuGraphAddDependencies(hGraph, from, to, NULL, numDependencies);
}

CUresult cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
				   const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	return FE_DRV(cudaGraphRemoveDependencies(hGraph, NODES(from), NODES(to), (const cudaGraphEdgeData *)edgeData,
						  numDependencies));
}

CUresult fe_drv_graph_remove_dependencies_v1(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					     size_t numDependencies)
{
	return cuGraphRemoveDependencies(hGraph, from, to, NULL, numDependencies);
}

/* ---- executable graphs */

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	return FE_DRV(cudaGraphInstantiateWithFlags((cudaGraphExec_t *)phGraphExec, hGraph, flags));
}

/* CUDA 10-11's: an error node and a log, which stay empty (the server's
 * driver reports the failure as its code). */
CUresult fe_drv_graph_instantiate_v1(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
				     char *logBuffer, size_t bufferSize)
{
	CUresult r = cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = 0;
	return r;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	CUDA_GRAPH_INSTANTIATE_PARAMS *p = instantiateParams;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	cudaGraphInstantiateParams rp = {.flags = p->flags, .uploadStream = p->hUploadStream};
	CUresult r = FE_DRV(cudaGraphInstantiateWithParams((cudaGraphExec_t *)phGraphExec, hGraph, &rp));
	p->hErrNode_out = rp.errNode_out;
	p->result_out = (CUgraphInstantiateResult)rp.result_out; /* the same numbers */
	return r;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return FE_DRV(cudaGraphLaunch(hGraphExec, hStream));
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	return FE_DRV(cudaGraphUpload(hGraphExec, hStream));
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	return hGraphExec ? FE_DRV(cudaGraphExecDestroy(hGraphExec)) : CUDA_ERROR_INVALID_VALUE;
}

/* The server's driver updates the exec (rt_stream.c). */
CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	if (!hGraphExec || !hGraph || !resultInfo)
		return CUDA_ERROR_INVALID_VALUE;
	_Static_assert(sizeof(CUgraphExecUpdateResultInfo) == sizeof(cudaGraphExecUpdateResultInfo),
		       "the runtime's result info is the driver's");
	return FE_DRV(cudaGraphExecUpdate((cudaGraphExec_t)hGraphExec, (cudaGraph_t)hGraph,
					  (cudaGraphExecUpdateResultInfo *)resultInfo));
}

CUresult fe_drv_graph_exec_update_v1(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
				     CUgraphExecUpdateResult *updateResult_out)
{
	CUgraphExecUpdateResultInfo info;
	if (!hErrorNode_out || !updateResult_out)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cuGraphExecUpdate(hGraphExec, hGraph, &info);
	if (r != CUDA_ERROR_INVALID_VALUE) {
		*hErrorNode_out = info.errorNode;
		*updateResult_out = info.result;
	}
	return r;
}

/* cuGraphInstantiate_v2 (CUDA 11.0) kept v1's ABI. */
extern __typeof__(fe_drv_graph_instantiate_v1) fe_drv_graph_instantiate_v2 __asm__("cuGraphInstantiate_v2")
	__attribute__((alias("cuGraphInstantiate")));
