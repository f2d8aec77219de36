/*
 * The driver API as the backend sees it: every function it calls, resolved once
 * from the library given by --driver (default libcuda.so.1) with dlsym, so that a
 * test double can stand in for the driver. Names are cuda.h's: its #defines map
 * e.g. cuMemAlloc to cuMemAlloc_v2, and BE_DRIVER_SYM stringifies after expansion,
 * so the symbol looked up is the versioned one.
 */
#ifndef BE_DRIVER_H
#define BE_DRIVER_H

#include <cuda.h>
#include <cudaProfiler.h> /* cuProfilerStart/Stop */

#include "driver_funcs.h" /* the generated dispatch's (api/gen.py) */

#define BE_DRIVER_FUNCS(X)                                   \
	BE_GEN_DRIVER_FUNCS(X) /* gen/driver_funcs.h */        \
	X(cuInit)                                            \
	X(cuDriverGetVersion)                                \
	X(cuGetErrorName)                                    \
	X(cuGetErrorString)                                  \
	X(cuDeviceGet)                                       \
	X(cuDeviceGetCount)                                  \
	X(cuDeviceGetName)                                   \
	X(cuDeviceGetAttribute)                              \
	X(cuDeviceTotalMem)                                  \
	X(cuDeviceGetUuid)                                   \
	X(cuDeviceGetPCIBusId)                               \
	X(cuDeviceCanAccessPeer)                             \
	X(cuCtxEnablePeerAccess)                             \
	X(cuCtxDisablePeerAccess)                            \
	X(cuMemcpyPeer)                                      \
	X(cuMemcpyPeerAsync)                                 \
	X(cuCtxCreate)                                       \
	X(cuCtxDestroy)                                      \
	X(cuCtxSetCurrent)                                   \
	X(cuCtxGetCurrent)                                   \
	X(cuDevicePrimaryCtxRetain)                          \
	X(cuDevicePrimaryCtxRelease)                         \
	X(cuCtxSynchronize)                                  \
	X(cuCtxGetStreamPriorityRange)                       \
	X(cuMemAlloc)                                        \
	X(cuMemFree)                                         \
	X(cuMemAllocAsync)                                   \
	X(cuMemFreeAsync)                                    \
	X(cuMemHostAlloc)                                    \
	X(cuMemHostRegister)                                 \
	X(cuMemHostUnregister)                               \
	X(cuMemFreeHost)                                     \
	X(cuMemcpyHtoDAsync)                                 \
	X(cuMemcpyDtoHAsync)                                 \
	X(cuMemcpy2DAsync)                                   \
	X(cuMemsetD8Async)                                   \
	X(cuMemsetD16Async)                                  \
	X(cuMemsetD32Async)                                  \
	X(cuMemsetD2D8Async)                                 \
	X(cuMemsetD2D16Async)                                \
	X(cuMemsetD2D32Async)                                \
	X(cuStreamCreateWithPriority)                        \
	X(cuStreamDestroy)                                   \
	X(cuStreamSynchronize)                               \
	X(cuEventCreate)                                     \
	X(cuEventDestroy)                                    \
	X(cuEventRecord)                                     \
	X(cuEventSynchronize)                                \
	X(cuModuleLoadData)                                  \
	X(cuModuleUnload)                                    \
	X(cuModuleGetFunction)                               \
	X(cuModuleGetGlobal)                                 \
	X(cuFuncGetParamInfo)                                \
	X(cuFuncGetAttribute)                                \
	X(cuLaunchKernel)                                    \
	X(cuLaunchKernelEx)                                  \
	X(cuLaunchHostFunc)                                  \
	X(cuStreamBeginCapture)                              \
	X(cuStreamEndCapture)                                \
	X(cuThreadExchangeStreamCaptureMode)                 \
	X(cuStreamGetCaptureInfo)                            \
	X(cuGraphInstantiate)                                \
	X(cuGraphLaunch)                                     \
	X(cuGraphDestroy)                                    \
	X(cuGraphExecDestroy)                                \
	X(cuGraphCreate)                                     \
	X(cuGraphClone)                                      \
	X(cuGraphAddEmptyNode)                               \
	X(cuGraphAddKernelNode)                              \
	X(cuGraphAddMemsetNode)                              \
	X(cuGraphAddMemcpyNode)                              \
	X(cuGraphAddEventRecordNode)                         \
	X(cuGraphAddEventWaitNode)                           \
	X(cuGraphAddChildGraphNode)                          \
	X(cuGraphKernelNodeSetParams)                        \
	X(cuGraphExecKernelNodeSetParams)                    \
	X(cuGraphAddDependencies)                            \
	X(cuGraphRemoveDependencies)                         \
	X(cuGraphGetRootNodes)                               \
	X(cuGraphGetEdges)                                   \
	X(cuGraphNodeGetType)                                \
	X(cuGraphMemAllocNodeGetParams)                      \
	X(cuGraphDestroyNode)                                \
	X(cuGraphAddHostNode)                                \
	X(cuGraphHostNodeGetParams)                          \
	X(cuGraphHostNodeSetParams)                          \
	X(cuGraphExecHostNodeSetParams)                      \
	X(cuDeviceGetDefaultMemPool)                         \
	X(cuMemPoolSetAttribute)                             \
	X(cuMemPoolGetAttribute)                             \
	X(cuMemPoolCreate)                                   \
	X(cuMemPoolDestroy)                                  \
	X(cuMemPoolGetAccess)                                \
	X(cuMemAllocFromPoolAsync)                           \
	X(cuArray3DCreate)                                   \
	X(cuArrayDestroy)                                    \
	X(cuMemcpy3DAsync)                                   \
	X(cuTexObjectCreate)                                 \
	X(cuTexObjectDestroy)                                \
	X(cuSurfObjectCreate)                                \
	X(cuSurfObjectDestroy)

/* Functions the backend can do without: resolved when the library has them, NULL
 * otherwise (the caller checks). cuStreamIsCapturing lets copies through staging
 * buffers refuse a capturing stream (a graph must not keep a staging address);
 * the module enumeration (CUDA 12.4) lists a module's kernels by name; the
 * cluster occupancy queries (CUDA 12.0) are missing from the driver test double;
 * the tensor map encoders (CUDA 12.0, cuTensorMapEncodeIm2colWide 12.8) are for
 * Hopper and later; the linker (cuLink*, CUDA 5.5) is kept optional as well. */
#define BE_DRIVER_OPT_FUNCS(X)        \
	X(cuStreamIsCapturing)        \
	X(cuStreamUpdateCaptureDependencies) \
	X(cuGraphExecUpdate)          \
	X(cuModuleGetFunctionCount)   \
	X(cuLinkCreate)               \
	X(cuLinkAddData)              \
	X(cuLinkComplete)             \
	X(cuLinkDestroy)              \
	X(cuModuleEnumerateFunctions) \
	X(cuFuncGetName)                \
	X(cuOccupancyMaxActiveClusters) \
	X(cuOccupancyMaxPotentialClusterSize) \
	X(cuTensorMapEncodeTiled)       \
	X(cuTensorMapEncodeIm2col)      \
	X(cuTensorMapEncodeIm2colWide)  \
	X(cuTensorMapReplaceAddress)    \
	X(cuMemGetAllocationGranularity) \
	X(cuMemAddressReserve)          \
	X(cuMemAddressFree)             \
	X(cuMemCreate)                  \
	X(cuMemRelease)                 \
	X(cuMemMap)                     \
	X(cuMemUnmap)                   \
	X(cuMemSetAccess)               \
	X(cuMemGetAccess)               \
	X(cuMemRetainAllocationHandle)

#define BE_DRIVER_MEMBER(fn) __typeof__(fn) *fn;
struct be_driver {
	BE_DRIVER_FUNCS(BE_DRIVER_MEMBER)
	BE_DRIVER_OPT_FUNCS(BE_DRIVER_MEMBER)
};
#undef BE_DRIVER_MEMBER

extern struct be_driver be_drv;

/* Opens the library and resolves every function; a missing one is an error that
 * names it. Returns 0 or -1 (after logging why). */
int be_driver_load(const char *path);
void be_driver_unload(void);
const char *be_driver_error_name(CUresult r);
/* Puts the calling thread in relaxed stream-capture mode, as every thread of
 * the server runs: one thread here makes the calls of many client threads (or
 * its own, as the staging pool's), so a mode here would judge them against
 * captures of other threads, even other tenants' (thread isolation). The
 * client applies CUDA's rules by its own threads' modes (frontend
 * rt_capture_mode.c). Call at the start of each thread that makes driver calls. */
void be_driver_thread_relaxed(void);
/* The same for a CUresult carried in an int (handlers' statuses). */
const char *be_errname(int status);

#endif
