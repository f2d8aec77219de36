/*
 * The CUDA driver API, for programs that reach it directly: PyTorch opens
 * libcuda.so.1 itself (dlopen) and asks for entry points through
 * cudaGetDriverEntryPointByVersion. On a host with no driver, libremote.so is that
 * driver: dlopen of libcuda.so* returns libremote.so itself, whose cu* functions
 * below answer from the same state as the runtime API (one session per device, the
 * device's primary context is the session's context).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "rg_log.h"
#include "errors.h"
#include "rt.h"

void *fe_module_from_image(const void *image, size_t size);
int fe_module_get_kernel(void *module, const char *name, void **out);
cudaError_t fe_kernel_launch(void *kernel, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t stream);

/* ---- dlopen("libcuda.so.1") -> ourselves */

static int is_driver_name(const char *file)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	return strncmp(base, "libcuda.so", 10) == 0 && (base[10] == 0 || base[10] == '.');
}

/* glibc searches the RUNPATH of dlopen's caller (its return address): every
 * other library must reach the real dlopen by a tail call, which leaves the
 * program's return address in place, also in builds without optimisation. */
__attribute__((optimize("optimize-sibling-calls"))) void *dlopen(const char *file, int flags)
{
	static void *(*real_dlopen)(const char *, int);
	if (!real_dlopen)
		real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (file && is_driver_name(file)) {
		Dl_info self;
		if (dladdr((void *)dlopen, &self) && self.dli_fname) {
			LOG_DEBUG("frontend", "dlopen(%s): the remote driver (%s)", file, self.dli_fname);
			return real_dlopen(self.dli_fname, flags);
		}
	}
	return real_dlopen(file, flags);
}

/* ---- errors */

static CUresult drv_status(int st)
{
	return st < 0 ? CUDA_ERROR_DEVICE_UNAVAILABLE : (CUresult)st;
}

static CUresult drv_enter(void)
{
	fe_conn *c;
	return (CUresult)fe_rt_enter(&c);
}

/* ---- init, devices */

CUresult cuInit(unsigned int flags) { return (CUresult)fe_rt_init(); }

CUresult cuDriverGetVersion(int *v) { return (CUresult)cudaDriverGetVersion(v); }

CUresult cuDeviceGetCount(int *count) { return (CUresult)cudaGetDeviceCount(count); }

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fe_rt_device(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", d->name);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	return (CUresult)cudaDeviceGetAttribute(pi, (enum cudaDeviceAttr)attrib, dev);
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = d->total_mem;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(uuid, d->uuid, sizeof(*uuid));
	return CUDA_SUCCESS;
}

/* The driver's private function tables (NVRTC asks for them once it found a
 * driver): an undocumented ABI of the local driver that cannot be forwarded.
 * An error here makes NVRTC go on without them; a missing symbol would not
 * (it dereferences the table it never got). */
CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
	if (table)
		*table = NULL;
	rg_log_once("frontend", "not supported", "cuGetExportTable");
	return id ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	return (CUresult)cudaDeviceGetPCIBusId(id, len, dev);
}

/* ---- contexts: each remote device has exactly one, the session's; it plays
 * the primary context. Handles are opaque tokens the program only hands back. */

static CUcontext ctx_of(int dev) { return (CUcontext)(uintptr_t)(0xC0000 + dev); }

static int dev_of(CUcontext ctx)
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
	*pctx = ctx_of(dev);
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
	*pctx = fe_rt_init() == cudaSuccess ? ctx_of(fe_rt_current_device()) : NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (!ctx)
		return CUDA_SUCCESS;
	int dev = dev_of(ctx);
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

/* ---- modules and launches (NVRTC-compiled kernels) */

static size_t image_size(const void *image)
{
	const uint8_t *p = image;
	if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
		uint64_t shoff, n, ent;
		memcpy(&shoff, p + 0x28, 8);
		n = (uint16_t)(p[0x3c] | p[0x3d] << 8);
		ent = (uint16_t)(p[0x3a] | p[0x3b] << 8);
		return (size_t)(shoff + n * ent);
	}
	uint32_t magic;
	memcpy(&magic, p, 4);
	if (magic == 0xBA55ED50u) {
		uint16_t h;
		uint64_t body;
		memcpy(&h, p + 6, 2);
		memcpy(&body, p + 8, 8);
		return h + body;
	}
	return strlen(image) + 1; /* PTX text */
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	CUresult r = drv_enter();
	if (r)
		return r;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	void *m = fe_module_from_image(image, image_size(image));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*module = (CUmodule)m;
	return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *o, void **v)
{
	return cuModuleLoadData(module, image);
}

CUresult cuModuleUnload(CUmodule module)
{
	/* The server keeps the module until the session ends; the client record
	 * stays too (functions of it may still be in flight). */
	return module ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name)
{
	if (!f || !module || !name)
		return CUDA_ERROR_INVALID_VALUE;
	void *k;
	int st = fe_module_get_kernel(module, name, &k);
	if (st)
		return drv_status(st);
	*f = (CUfunction)k;
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params, void **extra)
{
	if (extra) {
		rg_log_once("frontend", "not supported", "cuLaunchKernel(extra)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	dim3 g = {gx, gy, gz}, b = {bx, by, bz};
	return (CUresult)fe_kernel_launch(f, g, b, params, shmem, (cudaStream_t)stream);
}

/* The unversioned symbols of two functions whose _v2 kept the ABI (cuda.h maps
 * the source names to the _v2 ones); cuDeviceTotalMem's took 32-bit sizes. */
extern __typeof__(cuDeviceGetUuid) cuDeviceGetUuid_v1 __asm__("cuDeviceGetUuid")
	__attribute__((alias("cuDeviceGetUuid_v2")));
extern __typeof__(cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease_v1 __asm__("cuDevicePrimaryCtxRelease")
	__attribute__((alias("cuDevicePrimaryCtxRelease_v2")));
