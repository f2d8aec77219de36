/*
 * Driver API: streams, events, host functions, stream capture. A CUstream is a
 * cudaStream_t and a CUevent a cudaEvent_t (rt_stream.c keeps them), so most
 * entry points are the runtime's call with the driver's checks in front.
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are the runtime's special streams
 * (the same values), both the legacy stream here. Stream attributes and
 * cuStreamAttachMemAsync are not defined here: the runtime layer has neither,
 * so their generated stubs answer CUDA_ERROR_NOT_SUPPORTED, logged.
 */
#include "drv.h"
#include "rg_log.h"
#include "rt.h"

_Static_assert(CU_STREAM_NON_BLOCKING == cudaStreamNonBlocking, "stream flags are the runtime's");
_Static_assert(CU_EVENT_BLOCKING_SYNC == cudaEventBlockingSync && CU_EVENT_DISABLE_TIMING == cudaEventDisableTiming &&
		       CU_EVENT_INTERPROCESS == cudaEventInterprocess,
	       "event flags are the runtime's");
_Static_assert((uintptr_t)CU_STREAM_LEGACY == (uintptr_t)cudaStreamLegacy &&
		       (uintptr_t)CU_STREAM_PER_THREAD == (uintptr_t)cudaStreamPerThread,
	       "special streams are the runtime's");
_Static_assert(sizeof(CUgraphEdgeData) == sizeof(cudaGraphEdgeData), "edge data shares its layout");

/* ---- streams */

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return FE_DRV(cudaStreamCreateWithPriority((cudaStream_t *)phStream, flags, priority));
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return FE_DRV(cudaStreamCreateWithPriority((cudaStream_t *)phStream, Flags, 0));
}

CUresult cuStreamDestroy(CUstream hStream) { return FE_DRV(cudaStreamDestroy(hStream)); }

CUresult cuStreamQuery(CUstream hStream) { return FE_DRV(cudaStreamQuery(hStream)); }

CUresult cuStreamSynchronize(CUstream hStream) { return FE_DRV(cudaStreamSynchronize(hStream)); }

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaStreamWaitEvent(hStream, hEvent, Flags));
}

/* CUstreamCallback and cudaStreamCallback_t take the same arguments (a stream
 * handle, a status whose success is 0, the user's pointer). */
CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
	return FE_DRV(cudaStreamAddCallback(hStream, (cudaStreamCallback_t)callback, userData, flags));
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	return FE_DRV(cudaLaunchHostFunc(hStream, fn, userData));
}

CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
	return FE_DRV(cudaStreamGetPriority(hStream, priority));
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags) { return FE_DRV(cudaStreamGetFlags(hStream, flags)); }

CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device) { return FE_DRV(cudaStreamGetDevice(hStream, device)); }

/* The context of a stream is its device's (one per device); a special stream's
 * is the current one. */
CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	int dev;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = FE_DRV(cudaStreamGetDevice(hStream, &dev));
	if (r != CUDA_SUCCESS)
		return r;
	/* a special stream is the current context's, a created one among them */
	CUcontext cur = fe_rt_stream(hStream) == 0 ? fe_drv_ctx_current() : NULL;
	*pctx = cur && fe_drv_dev_of(cur) == dev ? cur : fe_drv_ctx_of(dev);
	return CUDA_SUCCESS;
}

/* No green contexts here: every stream belongs to a regular one. */
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	if (!pCtx || !pGreenCtx)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cuStreamGetCtx(hStream, pCtx);
	if (r == CUDA_SUCCESS)
		*pGreenCtx = NULL;
	return r;
}

/* The client's stream id: unique for the process's life (never reused); the
 * special streams are all the legacy one here, id 0, which no created stream has. */
CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
	unsigned flags;
	if (!streamId)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = FE_DRV(cudaStreamGetFlags(hStream, &flags)); /* INVALID_HANDLE if not a stream */
	if (r == CUDA_SUCCESS)
		*streamId = fe_rt_stream(hStream);
	return r;
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	return FE_DRV(cudaDeviceGetStreamPriorityRange(leastPriority, greatestPriority));
}

/* ---- events */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
		return CUDA_ERROR_INVALID_VALUE;
	/* An interprocess event is an event like any other here, as the runtime
	 * layer makes it; only asking for its IPC handle is not supported. */
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaEventCreateWithFlags((cudaEvent_t *)phEvent, Flags));
}

CUresult cuEventDestroy(CUevent hEvent) { return FE_DRV(cudaEventDestroy(hEvent)); }

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return FE_DRV(cudaEventRecordWithFlags(hEvent, hStream, 0));
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaEventRecordWithFlags(hEvent, hStream, flags));
}

CUresult cuEventQuery(CUevent hEvent) { return FE_DRV(cudaEventQuery(hEvent)); }

CUresult cuEventSynchronize(CUevent hEvent) { return FE_DRV(cudaEventSynchronize(hEvent)); }

/* The server asks its driver (the newest variant): unrecorded or timing-less
 * events are its INVALID_HANDLE, unfinished ones NOT_READY. No place for the
 * time is INVALID_HANDLE too, as the driver answers (seen on an H100). */
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	if (!pMilliseconds || !hStart || !hEnd)
		return CUDA_ERROR_INVALID_HANDLE;
	return FE_DRV(cudaEventElapsedTime(pMilliseconds, hStart, hEnd));
}

/* ---- capture */

CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode)
{
	if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaStreamBeginCapture(hStream, (enum cudaStreamCaptureMode)mode));
}

/* CUDA 10.0's, without a mode: global, as then. */
CUresult fe_drv_stream_begin_capture_v1(CUstream hStream)
{
	return cuStreamBeginCapture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return FE_DRV(cudaStreamEndCapture(hStream, (cudaGraph_t *)phGraph));
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	unsigned flags;
	if (!captureStatus)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = FE_DRV(cudaStreamGetFlags(hStream, &flags)); /* the runtime's answer takes any handle */
	if (r)
		return r;
	return FE_DRV(cudaStreamIsCapturing(hStream, (enum cudaStreamCaptureStatus *)captureStatus));
}

/* Answered from the client's capture state, as cudaStreamGetCaptureInfo. */
CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
				CUgraph *graph_out, const CUgraphNode **dependencies_out,
				const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	unsigned flags;
	if (!captureStatus_out)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = FE_DRV(cudaStreamGetFlags(hStream, &flags));
	if (r)
		return r;
	_Static_assert(sizeof(*id_out) == sizeof(unsigned long long), "capture ids are 64-bit");
	return FE_DRV(cudaStreamGetCaptureInfo(hStream, (enum cudaStreamCaptureStatus *)captureStatus_out,
					       (unsigned long long *)id_out, (cudaGraph_t *)graph_out,
					       (const cudaGraphNode_t **)dependencies_out,
					       (const cudaGraphEdgeData **)edgeData_out, numDependencies_out));
}

/* CUDA 11.3's, without edge data. */
CUresult fe_drv_stream_get_capture_info_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
					   size_t *numDependencies_out)
{
	return cuStreamGetCaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
				      numDependencies_out);
}

/* CUDA 10.1's: status and id. */
CUresult fe_drv_stream_get_capture_info_v1(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out)
{
	return cuStreamGetCaptureInfo(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
					   const CUgraphEdgeData *dependencyData, size_t numDependencies,
					   unsigned int flags)
{
	return FE_DRV(cudaStreamUpdateCaptureDependencies(hStream, (cudaGraphNode_t *)dependencies,
							  (const cudaGraphEdgeData *)dependencyData, numDependencies,
							  flags));
}

/* CUDA 11.3's, without edge data. */
CUresult fe_drv_stream_update_capture_deps_v1(CUstream hStream, CUgraphNode *dependencies, size_t numDependencies,
					      unsigned int flags)
{
	return cuStreamUpdateCaptureDependencies(hStream, dependencies, NULL, numDependencies, flags);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaThreadExchangeStreamCaptureMode((enum cudaStreamCaptureMode *)mode));
}

/* The older variants that kept the ABI: the unversioned symbols of
 * cuStreamDestroy_v2, cuEventDestroy_v2 and cuEventElapsedTime_v2. */
extern __typeof__(cuStreamDestroy) cuStreamDestroy_v1 __asm__("cuStreamDestroy")
	__attribute__((alias("cuStreamDestroy_v2")));
extern __typeof__(cuEventDestroy) cuEventDestroy_v1 __asm__("cuEventDestroy")
	__attribute__((alias("cuEventDestroy_v2")));
extern __typeof__(cuEventElapsedTime) cuEventElapsedTime_v1 __asm__("cuEventElapsedTime")
	__attribute__((alias("cuEventElapsedTime_v2")));
