/*
 * The driver API layer (drv_*.c): what libremote.so answers as libcuda.so.1.
 * Entry points take and give the same handles as the runtime API (a CUstream
 * is a cudaStream_t, a CUfunction a registered kernel, a CUdeviceptr a device
 * address): one handle space per process.
 */
#ifndef FE_DRV_H
#define FE_DRV_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cudaProfiler.h> /* cuProfilerStart/Stop: driver functions too */
#include <cuda_runtime_api.h>

#include "stats.h"

/* One ABI variant of a driver function (gen/drv_entries.c, from cudaTypedefs.h). */
enum { FE_DRV_PTDS = 1, FE_DRV_PTSZ = 2 };
typedef struct fe_drv_entry {
	const char *name; /* as cuGetProcAddress is asked: "cuMemAlloc" */
	int version;      /* the CUDA version that introduced this variant */
	int pt;           /* 0, or FE_DRV_PTDS / FE_DRV_PTSZ: the per-thread default stream variant */
	const char *symbol;
	void *fn;
} fe_drv_entry;
extern const fe_drv_entry fe_drv_entries[];
extern const size_t fe_drv_entries_n;

/* A driver function libremote.so does not implement: CUDA_ERROR_NOT_SUPPORTED,
 * its name logged once. */
CUresult fe_drv_unsupported(const char *symbol);

/* The entry point for a name as cuGetProcAddress resolves it: the newest variant
 * not newer than version, the per-thread one if asked for and there is one.
 * NULL if the name is unknown (*why CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) or all
 * its variants are newer (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT). */
void *fe_drv_proc(const char *name, int version, int per_thread, CUdriverProcAddressQueryResult *why);

/* Contexts (drv_ctx.c): each remote device has one session, whose context is
 * the device's primary context (fe_drv_ctx_of); cuCtxCreate's contexts are
 * handles of their own over that session. */
CUcontext fe_drv_ctx_of(int dev);
int fe_drv_dev_of(CUcontext ctx); /* -1 if ctx is not a (live) context */
/* The calling thread's current context, NULL if none; a context's unique id
 * (cuCtxGetId's), 0 if ctx is not a live context. */
CUcontext fe_drv_ctx_current(void);
uint64_t fe_drv_ctx_id(CUcontext ctx);
/* A context ends (reset or destroyed): fn(ctx) is called first, outside the
 * contexts' lock. One listener, set from a constructor (drv_export.c's
 * context-local storage), so drv_ctx.c calls no file above it by name. */
typedef void (*fe_drv_ctx_gone_fn)(CUcontext ctx);
void fe_drv_ctx_on_gone(fe_drv_ctx_gone_fn fn);

/* A file's bytes (malloc'd, NUL-terminated after them: PTX text), for
 * cuModuleLoad, cuLibraryLoadFromFile and cuLinkAddFile (drv_module.c). */
CUresult fe_drv_read_file(const char *path, void **data, size_t *size);
/* The JIT options of a module load or a link (drv_module.c): checked, logs
 * left empty (the server compiles), those that change nothing kept quiet. */
CUresult fe_drv_jit_options(unsigned n, CUjit_option *o, void **v);

/* Export tables (drv_export.c). The integrity check's keyed hash (HMAC-MD2) of msg. */
void fe_drv_integrity_digest(const uint8_t *msg, size_t len, uint8_t out[16]);

/* Older ABI variants of stream and graph functions (drv_stream.c, drv_graph.c),
 * under their symbols: the runtimes of older toolkits ask cuGetProcAddress for
 * them. */
CUresult fe_drv_stream_begin_capture_v1(CUstream hStream) __asm__("cuStreamBeginCapture");
CUresult fe_drv_stream_get_capture_info_v1(CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id)
	__asm__("cuStreamGetCaptureInfo");
CUresult fe_drv_stream_get_capture_info_v2(CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id,
					   CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
	__asm__("cuStreamGetCaptureInfo_v2");
CUresult fe_drv_stream_update_capture_deps_v1(CUstream hStream, CUgraphNode *deps, size_t ndeps, unsigned int flags)
	__asm__("cuStreamUpdateCaptureDependencies");
CUresult fe_drv_graph_instantiate_v1(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
				     char *logBuffer, size_t bufferSize) __asm__("cuGraphInstantiate");
CUresult fe_drv_graph_add_kernel_node_v1(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
					 size_t ndeps, const CUDA_KERNEL_NODE_PARAMS_v1 *p) __asm__("cuGraphAddKernelNode");
CUresult fe_drv_graph_kernel_node_get_params_v1(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *p)
	__asm__("cuGraphKernelNodeGetParams");
CUresult fe_drv_graph_kernel_node_set_params_v1(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
	__asm__("cuGraphKernelNodeSetParams");
CUresult fe_drv_graph_exec_kernel_node_set_params_v1(CUgraphExec hGraphExec, CUgraphNode hNode,
						     const CUDA_KERNEL_NODE_PARAMS_v1 *p)
	__asm__("cuGraphExecKernelNodeSetParams");
CUresult fe_drv_graph_get_edges_v1(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
	__asm__("cuGraphGetEdges");
CUresult fe_drv_graph_add_dependencies_v1(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to, size_t n)
	__asm__("cuGraphAddDependencies");
CUresult fe_drv_graph_remove_dependencies_v1(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					     size_t n) __asm__("cuGraphRemoveDependencies");
CUresult fe_drv_graph_exec_update_v1(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
				     CUgraphExecUpdateResult *updateResult_out) __asm__("cuGraphExecUpdate");

/* Older ABI variants of cuCtxCreate (drv_ctx.c), under their symbols. */
CUresult fe_drv_ctx_create_v1(CUcontext *pctx, unsigned int flags, CUdevice dev) __asm__("cuCtxCreate");
CUresult fe_drv_ctx_create_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) __asm__("cuCtxCreate_v2");
CUresult fe_drv_ctx_create_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags, CUdevice dev)
	__asm__("cuCtxCreate_v3");

/* CUDA 11.3-11.8's cuGetProcAddress (no status), under its symbol. */
CUresult fe_drv_get_proc_address_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
	__asm__("cuGetProcAddress");

/* cuMemcpy2D/3D(Async) with an array on at least one side (drv_array.c):
 * drv_copy.c hands them over. Checked and done as the driver does; counted
 * under the entry point that calls the macro (stats.h). */
CUresult fe_drv_copy_array_2d_at(fe_api_site site, const CUDA_MEMCPY2D *m, CUstream stream);
CUresult fe_drv_copy_array_3d_at(fe_api_site site, const CUDA_MEMCPY3D *m, CUstream stream);
#define fe_drv_copy_array_2d(m, stream) fe_drv_copy_array_2d_at(FE_API_SITE, (m), (stream))
#define fe_drv_copy_array_3d(m, stream) fe_drv_copy_array_3d_at(FE_API_SITE, (m), (stream))

/* Runs a runtime-layer call on behalf of a driver entry point: the thread's
 * runtime error state (cudaGetLastError) is left as it was, and the result is
 * the driver's code for it. */
#define FE_DRV(call) (fe_drv_begin(), fe_drv_end_at((call), __func__))
#define fe_drv_end(e) fe_drv_end_at((e), __func__)
/* (rt_state.c: the thread's runtime error state is left alone between them) */
void fe_drv_begin(void);
void fe_drv_done(void);
/* (drv_error.c: fe_drv_done, then the driver's code; a failure is logged at
 * debug level, under the driver function's name) */
CUresult fe_drv_end_at(cudaError_t e, const char *fn);
/* The driver's code for a runtime error code. */
CUresult fe_drv_result(cudaError_t e);

#endif
