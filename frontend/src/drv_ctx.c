/* Driver API: contexts. */
#include "drv.h"
#include "rt.h"

static CUresult drv_enter(void)
{
	fe_conn *c;
	return (CUresult)fe_rt_enter(&c);
}

/* ---- contexts: each remote device has exactly one, the session's; it plays
 * the primary context. Handles are opaque tokens the program only hands back. */

CUcontext fe_drv_ctx_of(int dev) { return (CUcontext)(uintptr_t)(0xC0000 + dev); }

int fe_drv_dev_of(CUcontext ctx)
{
	uintptr_t v = (uintptr_t)ctx;
	return v >= 0xC0000 && v < 0xC0000 + FE_MAX_DEVICES && fe_rt_device((int)(v - 0xC0000)) ? (int)(v - 0xC0000) : -1;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult r = drv_enter();
	if (r)
		return r;
	if (!fe_rt_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = fe_drv_ctx_of(dev);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return fe_rt_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	if (!fe_rt_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (flags)
		*flags = 0;
	if (active)
		*active = 1; /* the session exists from the first call on */
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fe_rt_init() == cudaSuccess ? fe_drv_ctx_of(fe_rt_current_device()) : NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (!ctx)
		return CUDA_SUCCESS;
	int dev = fe_drv_dev_of(ctx);
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	fe_rt_set_current_device(dev);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = fe_rt_current_device();
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) { return (CUresult)cudaDeviceSynchronize(); }


/* The unversioned symbol: its _v2 kept the ABI. */
extern __typeof__(cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease_v1 __asm__("cuDevicePrimaryCtxRelease")
	__attribute__((alias("cuDevicePrimaryCtxRelease_v2")));
