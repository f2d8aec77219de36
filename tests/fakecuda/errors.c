/*
 * errors.c: cuGetErrorName / cuGetErrorString for every CUresult of cuda.h 13.0, and
 * the profiler entry points (which have nothing to start here, so they succeed).
 *
 * The strings of common codes are the ones the real driver answers; the rest are the
 * first sentence of cuda.h's description of the code.
 */
#include "fake.h"

#include <stddef.h>

static const struct {
	CUresult code;
	const char *name;
	const char *text;
} errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS",
	  "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
	  "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY",
	  "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
	  "initialization error" },
	{ CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED",
	  "driver shutting down" },
	{ CUDA_ERROR_PROFILER_DISABLED, "CUDA_ERROR_PROFILER_DISABLED",
	  "profiler disabled while using external profiling tool" },
	{ CUDA_ERROR_PROFILER_NOT_INITIALIZED, "CUDA_ERROR_PROFILER_NOT_INITIALIZED",
	  "\\deprecated This error return is deprecated as of CUDA 5.0. It is no longer an error to attempt to..." },
	{ CUDA_ERROR_PROFILER_ALREADY_STARTED, "CUDA_ERROR_PROFILER_ALREADY_STARTED",
	  "\\deprecated This error return is deprecated as of CUDA 5.0. It is no longer an error to call..." },
	{ CUDA_ERROR_PROFILER_ALREADY_STOPPED, "CUDA_ERROR_PROFILER_ALREADY_STOPPED",
	  "\\deprecated This error return is deprecated as of CUDA 5.0. It is no longer an error to call..." },
	{ CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
	  "This indicates that the CUDA driver that the application has loaded is a stub library" },
	{ CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
	  "This indicates that the API call requires a newer CUDA driver than the one currently installed" },
	{ CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
	  "This indicates that requested CUDA device is unavailable at the current time" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
	  "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
	  "invalid device ordinal" },
	{ CUDA_ERROR_DEVICE_NOT_LICENSED, "CUDA_ERROR_DEVICE_NOT_LICENSED",
	  "This error indicates that the Grid license is not applied" },
	{ CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
	  "device kernel image is invalid" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
	  "invalid device context" },
	{ CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
	  "context already current" },
	{ CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED",
	  "mapping of buffer object failed" },
	{ CUDA_ERROR_UNMAP_FAILED, "CUDA_ERROR_UNMAP_FAILED",
	  "This indicates that an unmap or unregister operation has failed" },
	{ CUDA_ERROR_ARRAY_IS_MAPPED, "CUDA_ERROR_ARRAY_IS_MAPPED",
	  "This indicates that the specified array is currently mapped and thus cannot be destroyed" },
	{ CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED",
	  "This indicates that the resource is already mapped" },
	{ CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
	  "no kernel image is available for execution on the device" },
	{ CUDA_ERROR_ALREADY_ACQUIRED, "CUDA_ERROR_ALREADY_ACQUIRED",
	  "This indicates that a resource has already been acquired" },
	{ CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED",
	  "This indicates that a resource is not mapped" },
	{ CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
	  "This indicates that a mapped resource is not available for access as an array" },
	{ CUDA_ERROR_NOT_MAPPED_AS_POINTER, "CUDA_ERROR_NOT_MAPPED_AS_POINTER",
	  "This indicates that a mapped resource is not available for access as a pointer" },
	{ CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE",
	  "This indicates that an uncorrectable ECC error was detected during execution" },
	{ CUDA_ERROR_UNSUPPORTED_LIMIT, "CUDA_ERROR_UNSUPPORTED_LIMIT",
	  "This indicates that the CUlimit passed to the API call is not supported by the active device" },
	{ CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
	  "This indicates that the CUcontext passed to the API call can only be bound to a single CPU thread at a..." },
	{ CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	  "peer access is not supported between these two devices" },
	{ CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
	  "a PTX JIT compilation failed" },
	{ CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
	  "This indicates an error with OpenGL or DirectX context" },
	{ CUDA_ERROR_NVLINK_UNCORRECTABLE, "CUDA_ERROR_NVLINK_UNCORRECTABLE",
	  "This indicates that an uncorrectable NVLink error was detected during the execution" },
	{ CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	  "This indicates that the PTX JIT compiler library was not found" },
	{ CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	  "This indicates that the provided PTX was compiled with an unsupported toolchain" },
	{ CUDA_ERROR_JIT_COMPILATION_DISABLED, "CUDA_ERROR_JIT_COMPILATION_DISABLED",
	  "This indicates that the PTX JIT compilation was disabled" },
	{ CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
	  "This indicates that the CUexecAffinityType passed to the API call is not supported by the active device" },
	{ CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
	  "This indicates that the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize" },
	{ CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED",
	  "This indicates that an exception occurred on the device that is now contained by the GPU's error..." },
	{ CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE",
	  "device kernel image is invalid" },
	{ CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND",
	  "file not found" },
	{ CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
	  "This indicates that a link to a shared object failed to resolve" },
	{ CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
	  "This indicates that initialization of a shared object failed" },
	{ CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
	  "OS call failed or operation not supported on this OS" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
	  "invalid resource handle" },
	{ CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
	  "the request is not valid in the current state" },
	{ CUDA_ERROR_LOSSY_QUERY, "CUDA_ERROR_LOSSY_QUERY",
	  "This indicates an attempt was made to introspect an object in a way that would discard semantically..." },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND",
	  "named symbol not found" },
	{ CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY",
	  "device not ready" },
	{ CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
	  "an illegal memory access was encountered" },
	{ CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	  "too many resources requested for launch" },
	{ CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT",
	  "the launch timed out and was terminated" },
	{ CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
	  "This error indicates a kernel launch that uses an incompatible texturing mode" },
	{ CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	  "This error indicates that a call to cuCtxEnablePeerAccess() is trying to re-enable peer access to a..." },
	{ CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	  "This error indicates that cuCtxDisablePeerAccess() is trying to disable peer access which has not been..." },
	{ CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
	  "This error indicates that the primary context for the specified device has already been initialized" },
	{ CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	  "context is destroyed" },
	{ CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT",
	  "A device-side assert triggered during kernel execution" },
	{ CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS",
	  "This error indicates that the hardware resources required to enable peer access have been exhausted for..." },
	{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	  "part or all of the requested memory range is already mapped" },
	{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	  "pointer does not correspond to a registered memory region" },
	{ CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR",
	  "While executing a kernel, the device encountered a stack error" },
	{ CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	  "While executing a kernel, the device encountered an illegal instruction" },
	{ CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS",
	  "While executing a kernel, the device encountered a load or store instruction on a memory address which is..." },
	{ CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	  "While executing a kernel, the device encountered an instruction which can only operate on memory locations..." },
	{ CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC",
	  "While executing a kernel, the device program counter wrapped its address space" },
	{ CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
	  "unspecified launch failure" },
	{ CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
	  "too many blocks in cooperative launch" },
	{ CUDA_ERROR_TENSOR_MEMORY_LEAK, "CUDA_ERROR_TENSOR_MEMORY_LEAK",
	  "An exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not..." },
	{ CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED",
	  "This error indicates that the attempted operation is not permitted" },
	{ CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
	  "operation not supported" },
	{ CUDA_ERROR_SYSTEM_NOT_READY, "CUDA_ERROR_SYSTEM_NOT_READY",
	  "This error indicates that the system is not yet ready to start any CUDA work" },
	{ CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	  "This error indicates that there is a mismatch between the versions of the display driver and the CUDA driver" },
	{ CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	  "This error indicates that the system was upgraded to run with forward compatibility but the visible..." },
	{ CUDA_ERROR_MPS_CONNECTION_FAILED, "CUDA_ERROR_MPS_CONNECTION_FAILED",
	  "This error indicates that the MPS client failed to connect to the MPS control daemon or the MPS server" },
	{ CUDA_ERROR_MPS_RPC_FAILURE, "CUDA_ERROR_MPS_RPC_FAILURE",
	  "This error indicates that the remote procedural call between the MPS server and the MPS client failed" },
	{ CUDA_ERROR_MPS_SERVER_NOT_READY, "CUDA_ERROR_MPS_SERVER_NOT_READY",
	  "This error indicates that the MPS server is not ready to accept new MPS client requests" },
	{ CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
	  "This error indicates that the hardware resources required to create MPS client have been exhausted" },
	{ CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
	  "This error indicates the the hardware resources required to support device connections have been exhausted" },
	{ CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED",
	  "This error indicates that the MPS client has been terminated by the server" },
	{ CUDA_ERROR_CDP_NOT_SUPPORTED, "CUDA_ERROR_CDP_NOT_SUPPORTED",
	  "This error indicates that the module is using CUDA Dynamic Parallelism, but the current configuration,..." },
	{ CUDA_ERROR_CDP_VERSION_MISMATCH, "CUDA_ERROR_CDP_VERSION_MISMATCH",
	  "This error indicates that a module contains an unsupported interaction between different versions of CUDA..." },
	{ CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	  "operation not permitted when stream is capturing" },
	{ CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	  "operation failed due to a previous error during capture" },
	{ CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
	  "operation would result in a merge of separate capture sequences" },
	{ CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	  "capture was not ended in the same stream as it began" },
	{ CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
	  "capturing stream has unjoined work" },
	{ CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	  "dependency created on uncaptured work in another stream" },
	{ CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
	  "operation would make the legacy stream depend on a capturing blocking stream" },
	{ CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
	  "This error indicates that the operation is not permitted on an event which was last recorded in a..." },
	{ CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	  "attempt to terminate a thread-local capture sequence from another thread" },
	{ CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT",
	  "This error indicates that the timeout specified for the wait operation has lapsed" },
	{ CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
	  "This error indicates that the graph update was not performed because it included changes which violated..." },
	{ CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE",
	  "This indicates that an async error has occurred in a device outside of CUDA. If CUDA was waiting for an..." },
	{ CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE",
	  "Indicates a kernel launch error due to cluster misconfiguration" },
	{ CUDA_ERROR_FUNCTION_NOT_LOADED, "CUDA_ERROR_FUNCTION_NOT_LOADED",
	  "Indiciates a function handle is not loaded when calling an API that requires a loaded function" },
	{ CUDA_ERROR_INVALID_RESOURCE_TYPE, "CUDA_ERROR_INVALID_RESOURCE_TYPE",
	  "This error indicates one or more resources passed in are not valid resource types for the operation" },
	{ CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
	  "This error indicates one or more resources are insufficient or non-applicable for the operation" },
	{ CUDA_ERROR_KEY_ROTATION, "CUDA_ERROR_KEY_ROTATION",
	  "This error indicates that an error happened during the key rotation sequence" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN",
	  "unknown error" },
};

static int find(CUresult rc)
{
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == rc)
			return (int)i;
	return -1;
}

const char *fk_err_name(CUresult rc)
{
	int i = find(rc);
	return i < 0 ? "CUDA_ERROR_?" : errors[i].name;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	int i = find(error);
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = i < 0 ? NULL : errors[i].name;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	int i = find(error);
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = i < 0 ? NULL : errors[i].text;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuProfilerStart(void)
{
	fk_begin_raw();
	return fk_end(CUDA_SUCCESS, __func__, NULL);
}

CUresult CUDAAPI cuProfilerStop(void)
{
	fk_begin_raw();
	return fk_end(CUDA_SUCCESS, __func__, NULL);
}
