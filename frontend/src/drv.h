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
#include <cuda_runtime_api.h>

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

/* Contexts (drv_ctx.c): each remote device has one, its session's; it is the
 * device's primary context. */
CUcontext fe_drv_ctx_of(int dev);
int fe_drv_dev_of(CUcontext ctx); /* -1 if ctx is not a context */

/* Export tables (drv_export.c). A context ended (reset or destroyed): the
 * values the runtime kept for it are dropped, their destructors called. */
void fe_drv_cls_context_gone(CUcontext ctx);
/* The integrity check's keyed hash (HMAC-MD2) of msg. */
void fe_drv_integrity_digest(const uint8_t *msg, size_t len, uint8_t out[16]);

/* CUDA 11.3-11.8's cuGetProcAddress (no status), under its symbol. */
CUresult fe_drv_get_proc_address_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
	__asm__("cuGetProcAddress");

/* Runs a runtime-layer call on behalf of a driver entry point: the thread's
 * runtime error state (cudaGetLastError) is left as it was, and the result is
 * the driver's code for it. */
#define FE_DRV(call) (fe_drv_begin(), fe_drv_end((call)))
void fe_drv_begin(void);
CUresult fe_drv_end(cudaError_t e);
/* The driver's code for a runtime error code. */
CUresult fe_drv_result(cudaError_t e);

#endif
