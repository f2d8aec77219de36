/*
 * Calls that cannot work across hosts, or are not implemented yet: each returns
 * cudaErrorNotSupported and logs its name once. Never success.
 */
#include "rg_log.h"
#include "rt.h"

#define UNSUPPORTED(why, name)                            \
	do {                                              \
		rg_log_once("frontend", "not supported (" why ")", name); \
		return fe_rt_fail(cudaErrorNotSupported); \
	} while (0)

/* The generated stubs of every other runtime call (gen/rt_stubs.c). */
int fe_rt_unsupported(const char *name);
int fe_rt_unsupported(const char *name)
{
	rg_log_once("frontend", "not supported (not implemented by libremote.so)", name);
	return fe_rt_fail(cudaErrorNotSupported);
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
	UNSUPPORTED("IPC handles do not cross hosts", "cudaIpcGetMemHandle");
}
cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
	UNSUPPORTED("IPC handles do not cross hosts", "cudaIpcOpenMemHandle");
}
cudaError_t cudaIpcCloseMemHandle(void *devPtr) { UNSUPPORTED("IPC handles do not cross hosts", "cudaIpcCloseMemHandle"); }
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
	UNSUPPORTED("IPC handles do not cross hosts", "cudaIpcGetEventHandle");
}
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
	UNSUPPORTED("IPC handles do not cross hosts", "cudaIpcOpenEventHandle");
}
cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned int flags)
{
	UNSUPPORTED("graph nodes live on the server", "cudaGraphDebugDotPrint");
}
cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *pDependencies,
					 cudaGraphEdgeData *edgeData, size_t *pNumDependencies)
{
	UNSUPPORTED("graph nodes live on the server", "cudaGraphNodeGetDependencies");
}
