/*
 * procaddr.c: cuGetProcAddress.
 *
 * The table maps each name a caller may ask for (the base name, without a version
 * suffix, as the real driver expects) to the function exported under the name cuda.h
 * gives it: "cuMemAlloc" -> cuMemAlloc_v2, "cuCtxCreate" -> cuCtxCreate_v4. The E()
 * macro does this by stringizing its argument unexpanded (#name) and using it
 * expanded (name, rewritten by cuda.h's #defines).
 *
 * The fake has only the newest version of each function. Where an older version has
 * another signature (cuMemAlloc before 3.2 took 32-bit sizes, cuCtxCreate before 12.5
 * took no parameters struct, ...), the table notes the CUDA version from which the
 * newest signature is the one a caller asks for: a caller asking for an older version
 * would get a function it calls with the wrong arguments, so it gets
 * CUDA_ERROR_NOT_FOUND with CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT instead. Where
 * only the semantics changed (cuEventElapsedTime_v2, cuDeviceGetUuid_v2, the _v2
 * primary context calls), the newest is returned for any version. The per-thread-stream flag
 * returns the same functions: streams run eagerly, so the two defaults behave alike.
 */
#include "fake.h"

#include <string.h>

#define E(name, since) { #name, (void *)name, since },

static const struct {
	const char *name;
	void *fn;
	int since;
} table[] = {
	E(cuGetProcAddress, 12000)
	E(cuArray3DCreate, 3020)
	E(cuArrayDestroy, 0)
	E(cuCtxCreate, 12050)
	E(cuCtxDestroy, 0)
	E(cuCtxDisablePeerAccess, 0)
	E(cuCtxEnablePeerAccess, 0)
	E(cuCtxGetCacheConfig, 0)
	E(cuCtxGetCurrent, 0)
	E(cuCtxGetDevice, 0)
	E(cuCtxGetFlags, 0)
	E(cuCtxGetId, 0)
	E(cuCtxGetLimit, 0)
	E(cuCtxGetStreamPriorityRange, 0)
	E(cuCtxPopCurrent, 0)
	E(cuCtxPushCurrent, 0)
	E(cuCtxSetCacheConfig, 0)
	E(cuCtxSetCurrent, 0)
	E(cuCtxSetFlags, 0)
	E(cuCtxSetLimit, 0)
	E(cuCtxSynchronize, 0)
	E(cuDeviceCanAccessPeer, 0)
	E(cuDeviceGet, 0)
	E(cuDeviceGetAttribute, 0)
	E(cuDeviceGetByPCIBusId, 0)
	E(cuDeviceGetCount, 0)
	E(cuDeviceGetDefaultMemPool, 0)
	E(cuDeviceGetMemPool, 0)
	E(cuDeviceSetMemPool, 0)
	E(cuDeviceGetName, 0)
	E(cuDeviceGetPCIBusId, 0)
	E(cuDeviceGetUuid, 0)
	E(cuDevicePrimaryCtxGetState, 0)
	E(cuDevicePrimaryCtxRelease, 0)
	E(cuDevicePrimaryCtxReset, 0)
	E(cuDevicePrimaryCtxRetain, 0)
	E(cuDevicePrimaryCtxSetFlags, 0)
	E(cuDeviceTotalMem, 3020)
	E(cuDriverGetVersion, 0)
	E(cuEventCreate, 0)
	E(cuEventDestroy, 0)
	E(cuEventElapsedTime, 0)
	E(cuEventQuery, 0)
	E(cuEventRecord, 0)
	E(cuEventRecordWithFlags, 0)
	E(cuEventSynchronize, 0)
	E(cuFuncGetAttribute, 0)
	E(cuFuncGetModule, 0)
	E(cuFuncGetName, 0)
	E(cuFuncGetParamInfo, 0)
	E(cuFuncIsLoaded, 0)
	E(cuFuncLoad, 0)
	E(cuFuncSetAttribute, 0)
	E(cuFuncSetCacheConfig, 0)
	E(cuGetErrorName, 0)
	E(cuGetErrorString, 0)
	E(cuGraphAddChildGraphNode, 0)
	E(cuGraphAddDependencies, 12030)
	E(cuGraphAddEmptyNode, 0)
	E(cuGraphAddEventRecordNode, 0)
	E(cuGraphAddEventWaitNode, 0)
	E(cuGraphAddHostNode, 0)
	E(cuGraphAddKernelNode, 12000)
	E(cuGraphAddMemcpyNode, 0)
	E(cuGraphAddMemsetNode, 0)
	E(cuGraphClone, 0)
	E(cuGraphCreate, 0)
	E(cuGraphDestroy, 0)
	E(cuGraphDestroyNode, 0)
	E(cuGraphExecDestroy, 0)
	E(cuGraphExecGetFlags, 0)
	E(cuGraphExecHostNodeSetParams, 0)
	E(cuGraphExecKernelNodeSetParams, 12000)
	E(cuGraphExecUpdate, 12000)
	E(cuGraphGetEdges, 12030)
	E(cuGraphGetNodes, 0)
	E(cuGraphGetRootNodes, 0)
	E(cuGraphHostNodeGetParams, 0)
	E(cuGraphHostNodeSetParams, 0)
	E(cuGraphInstantiate, 12000)
	E(cuGraphInstantiateWithFlags, 0)
	E(cuGraphKernelNodeSetParams, 12000)
	E(cuGraphLaunch, 0)
	E(cuGraphMemAllocNodeGetParams, 0)
	E(cuGraphNodeGetType, 0)
	E(cuGraphRemoveDependencies, 12030)
	E(cuGraphUpload, 0)
	E(cuInit, 0)
	E(cuKernelGetAttribute, 0)
	E(cuKernelGetFunction, 0)
	E(cuKernelGetName, 0)
	E(cuKernelGetParamInfo, 0)
	E(cuKernelSetAttribute, 0)
	E(cuLaunchCooperativeKernel, 0)
	E(cuLaunchHostFunc, 0)
	E(cuLaunchKernel, 0)
	E(cuLaunchKernelEx, 0)
	E(cuLinkAddData, 6050)
	E(cuLinkComplete, 0)
	E(cuLinkCreate, 6050)
	E(cuLinkDestroy, 0)
	E(cuLibraryGetGlobal, 0)
	E(cuLibraryGetKernel, 0)
	E(cuLibraryGetModule, 0)
	E(cuLibraryLoadData, 0)
	E(cuLibraryLoadFromFile, 0)
	E(cuLibraryUnload, 0)
	E(cuMemAlloc, 3020)
	E(cuMemAddressFree, 0)
	E(cuMemAddressReserve, 0)
	E(cuMemCreate, 0)
	E(cuMemGetAccess, 0)
	E(cuMemGetAllocationGranularity, 0)
	E(cuMemGetAllocationPropertiesFromHandle, 0)
	E(cuMemMap, 0)
	E(cuMemRelease, 0)
	E(cuMemRetainAllocationHandle, 0)
	E(cuMemSetAccess, 0)
	E(cuMemUnmap, 0)
	E(cuMemAllocAsync, 0)
	E(cuMemAllocFromPoolAsync, 0)
	E(cuMemAllocHost, 3020)
	E(cuMemAllocPitch, 3020)
	E(cuMemFree, 3020)
	E(cuMemFreeAsync, 0)
	E(cuMemFreeHost, 0)
	E(cuMemGetAddressRange, 3020)
	E(cuMemGetInfo, 3020)
	E(cuMemHostAlloc, 0)
	E(cuMemHostGetDevicePointer, 3020)
	E(cuMemHostGetFlags, 0)
	E(cuMemHostRegister, 0)
	E(cuMemHostUnregister, 0)
	E(cuMemPoolCreate, 0)
	E(cuMemPoolDestroy, 0)
	E(cuMemPoolGetAccess, 0)
	E(cuMemPoolGetAttribute, 0)
	E(cuMemPoolSetAttribute, 0)
	E(cuMemPoolTrimTo, 0)
	E(cuMemcpy, 0)
	E(cuMemcpy2D, 3020)
	E(cuMemcpy2DAsync, 3020)
	E(cuMemcpy2DUnaligned, 3020)
	E(cuMemcpy3D, 3020)
	E(cuMemcpy3DAsync, 3020)
	E(cuMemcpyAsync, 0)
	E(cuMemcpyDtoD, 3020)
	E(cuMemcpyDtoDAsync, 3020)
	E(cuMemcpyDtoH, 3020)
	E(cuMemcpyDtoHAsync, 3020)
	E(cuMemcpyHtoD, 3020)
	E(cuMemcpyHtoDAsync, 3020)
	E(cuMemcpyPeer, 0)
	E(cuMemcpyPeerAsync, 0)
	E(cuMemsetD16, 3020)
	E(cuMemsetD16Async, 0)
	E(cuMemsetD2D16, 3020)
	E(cuMemsetD2D16Async, 0)
	E(cuMemsetD2D32, 3020)
	E(cuMemsetD2D32Async, 0)
	E(cuMemsetD2D8, 3020)
	E(cuMemsetD2D8Async, 0)
	E(cuMemsetD32, 3020)
	E(cuMemsetD32Async, 0)
	E(cuMemsetD8, 3020)
	E(cuMemsetD8Async, 0)
	E(cuModuleEnumerateFunctions, 0)
	E(cuModuleGetFunction, 0)
	E(cuModuleGetFunctionCount, 0)
	E(cuModuleGetGlobal, 3020)
	E(cuModuleGetLoadingMode, 0)
	E(cuModuleLoad, 0)
	E(cuModuleLoadData, 0)
	E(cuModuleLoadDataEx, 0)
	E(cuModuleLoadFatBinary, 0)
	E(cuModuleUnload, 0)
	E(cuOccupancyMaxActiveBlocksPerMultiprocessor, 0)
	E(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 0)
	E(cuOccupancyMaxActiveClusters, 0)
	E(cuOccupancyMaxPotentialClusterSize, 0)
	E(cuOccupancyMaxPotentialBlockSize, 0)
	E(cuOccupancyMaxPotentialBlockSizeWithFlags, 0)
	E(cuPointerGetAttribute, 0)
	E(cuPointerGetAttributes, 0)
	E(cuProfilerStart, 0)
	E(cuProfilerStop, 0)
	E(cuStreamUpdateCaptureDependencies, 12030)
	E(cuStreamAddCallback, 0)
	E(cuStreamBeginCapture, 10010)
	E(cuStreamCreate, 0)
	E(cuStreamCreateWithPriority, 0)
	E(cuStreamDestroy, 0)
	E(cuStreamEndCapture, 0)
	E(cuStreamGetCaptureInfo, 12030)
	E(cuStreamGetCtx, 0)
	E(cuStreamGetDevice, 0)
	E(cuStreamGetFlags, 0)
	E(cuStreamGetId, 0)
	E(cuStreamGetPriority, 0)
	E(cuStreamIsCapturing, 0)
	E(cuStreamQuery, 0)
	E(cuStreamSynchronize, 0)
	E(cuStreamWaitEvent, 0)
	E(cuSurfObjectCreate, 0)
	E(cuSurfObjectDestroy, 0)
	E(cuTensorMapEncodeIm2col, 0)
	E(cuTensorMapEncodeIm2colWide, 0)
	E(cuTensorMapEncodeTiled, 0)
	E(cuTensorMapReplaceAddress, 0)
	E(cuTexObjectCreate, 0)
	E(cuTexObjectDestroy, 0)
	E(cuThreadExchangeStreamCaptureMode, 0)
};

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult rc = CUDA_ERROR_NOT_FOUND;

	fk_begin_raw();
	if (!symbol || !pfn ||
	    (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
	                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
		return fk_end(CUDA_ERROR_INVALID_VALUE, __func__, "%s", symbol ? symbol : "(null)");
	*pfn = NULL;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i].name, symbol) != 0)
			continue;
		if (cudaVersion < table[i].since) {
			st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
		} else {
			*pfn = table[i].fn;
			st = CU_GET_PROC_ADDRESS_SUCCESS;
			rc = CUDA_SUCCESS;
		}
		break;
	}
	if (symbolStatus)
		*symbolStatus = st;
	return fk_end(rc, __func__, "%s, %d, %#llx", symbol, cudaVersion,
	              (unsigned long long)flags);
}
