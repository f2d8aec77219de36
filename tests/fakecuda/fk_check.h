/*
 * What test_fakecuda's files share (fk_check.c): the driver test double's
 * functions looked up with dlsym, as remote-gpud looks them up, the check
 * macros and counters, and small helpers (the launch log, the kernels nvcc
 * built, free device memory). The tests: test_fakecuda_memory.c (exports,
 * devices, memory, streams, events, handles), test_fakecuda_kernels.c
 * (modules, launches, capture, the sticky fault; needs nvcc's kernels),
 * test_fakecuda_threads.c (contexts, threads, the environment knobs);
 * test_fakecuda.c runs them.
 */
#ifndef FK_CHECK_H
#define FK_CHECK_H

#include <cuda.h>
#include <cudaProfiler.h>

#include <stddef.h>
#include <stdio.h>

#define API(X)                                                                        \
	X(cuInit) X(cuDriverGetVersion) X(cuGetProcAddress) X(cuGetErrorName)             \
	X(cuGetErrorString) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)          \
	X(cuDeviceTotalMem) X(cuDeviceGetUuid) X(cuDeviceGetPCIBusId)                      \
	X(cuDeviceGetByPCIBusId) X(cuDeviceGetAttribute) X(cuDeviceCanAccessPeer)          \
	X(cuDeviceGetDefaultMemPool) X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute)     \
	X(cuMemPoolTrimTo) X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetCurrent)               \
	X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuCtxGetDevice)                           \
	X(cuCtxGetStreamPriorityRange) X(cuCtxPushCurrent) X(cuCtxPopCurrent)              \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuMemAlloc)             \
	X(cuMemFree) X(cuMemGetInfo) X(cuMemGetAddressRange) X(cuMemAllocAsync)            \
	X(cuMemFreeAsync) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister)          \
	X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) X(cuPointerGetAttribute)       \
	X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync)               \
	X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpy) X(cuMemcpy2D)                 \
	X(cuMemcpy2DAsync) X(cuMemsetD8) X(cuMemsetD16) X(cuMemsetD32)                     \
	X(cuMemsetD32Async) X(cuMemsetD2D8) X(cuMemsetD2D32Async) X(cuStreamCreate)        \
	X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamQuery)                  \
	X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamGetPriority)                 \
	X(cuStreamGetFlags) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)            \
	X(cuEventRecordWithFlags) X(cuEventQuery) X(cuEventSynchronize)                    \
	X(cuEventElapsedTime) X(cuModuleLoadData) X(cuModuleLoadDataEx)                    \
	X(cuModuleLoadFatBinary) X(cuModuleLoad) X(cuModuleUnload) X(cuModuleGetFunction)                  \
	X(cuModuleGetGlobal) X(cuFuncGetParamInfo) X(cuFuncGetAttribute)                   \
	X(cuFuncSetAttribute) X(cuFuncGetName) X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags) \
	X(cuOccupancyMaxPotentialBlockSize) X(cuLaunchKernel) X(cuLaunchKernelEx)          \
	X(cuLaunchHostFunc) X(cuStreamBeginCapture) X(cuStreamEndCapture)                  \
	X(cuStreamIsCapturing) X(cuStreamGetCaptureInfo) X(cuGraphInstantiate)             \
	X(cuGraphLaunch) X(cuGraphGetNodes) X(cuGraphDestroy) X(cuGraphExecDestroy)        \
	X(cuProfilerStart) X(cuProfilerStop) X(cuLibraryLoadData)

#define STR_(x) #x
#define STR(x) STR_(x)
/* p_cuMemAlloc has the type of cuMemAlloc_v2 and is looked up as "cuMemAlloc_v2" */
#define DECL(f) extern __typeof__(f) *p_##f;
API(DECL)
#undef DECL

extern void *lib;
extern _Atomic int failures, checks; /* bumped by several threads */
extern char log_path[256];            /* FAKECUDA_LAUNCH_LOG of the run */

#define CHECK(cond)                                                                 \
	do {                                                                        \
		checks++;                                                           \
		if (!(cond)) {                                                      \
			failures++;                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                   \
	} while (0)

const char *ename(CUresult rc);

#define CK(call, want)                                                              \
	do {                                                                        \
		CUresult rc_ = (call);                                              \
		checks++;                                                           \
		if (rc_ != (want)) {                                                \
			failures++;                                                 \
			fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #call, \
			        ename(rc_), ename(want));                           \
		}                                                                   \
	} while (0)

#define OK(call) CK(call, CUDA_SUCCESS)

size_t free_mem(void);
/* A host function (cuLaunchHostFunc) that counts its calls in *(int *)p. */
void host_inc(void *p);
#ifdef FK_KERNELS_DIR
/* A file of the kernels nvcc built; caller frees. */
void *read_file(const char *name, size_t *size);
/* The whole launch log, and its number of lines; caller frees. */
char *log_read(int *nlines);
void log_clear(void);
void hex(char *out, const void *p, size_t n);
#endif

/* test_fakecuda_memory.c */
void test_exports(void);
void test_device(void);
void test_memory(CUcontext ctx);
void test_memory_placement(void);
void test_handles(void);
#ifdef FK_KERNELS_DIR
/* test_fakecuda_kernels.c */
void test_modules(void);
void test_launch(void);
void test_capture(void);
void test_fault(CUcontext main_ctx);
#endif
/* test_fakecuda_threads.c */
void test_contexts(CUcontext main_ctx);
void test_threads(CUcontext main_ctx);
void test_env(void);

#endif
