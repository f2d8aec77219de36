/*
 * The driver API table (driver.h): one dlopen of --driver (default libcuda.so.1)
 * and one dlsym per function, by the versioned name cuda.h's macros give it.
 * Linking libcuda directly would tie remote-gpud to NVIDIA's library; going
 * through the table lets the test double (tests/fakecuda) stand in for it.
 */
#include "driver.h"

#include <dlfcn.h>
#include <stdio.h>

#include "rg_log.h"

#define BE_STR_(x) #x
#define BE_DRIVER_SYM(fn) BE_STR_(fn) /* after expansion: "cuMemAlloc_v2" */

struct be_driver be_drv;
static void *drv_handle;

int be_driver_load(const char *path)
{
	const char *lib = path ? path : "libcuda.so.1";
	int missing = 0;

	drv_handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!drv_handle) {
		LOG_ERROR("backend", "cannot load the CUDA driver %s: %s", lib, dlerror());
		return -1;
	}
#define BE_RESOLVE(fn)                                                                        \
	be_drv.fn = (__typeof__(be_drv.fn))dlsym(drv_handle, BE_DRIVER_SYM(fn));              \
	if (!be_drv.fn) {                                                                     \
		LOG_ERROR("backend", "%s: the driver lacks %s", lib, BE_DRIVER_SYM(fn));      \
		missing++;                                                                    \
	}
	BE_DRIVER_FUNCS(BE_RESOLVE)
#undef BE_RESOLVE
#define BE_RESOLVE_OPT(fn) be_drv.fn = (__typeof__(be_drv.fn))dlsym(drv_handle, BE_DRIVER_SYM(fn));
	BE_DRIVER_OPT_FUNCS(BE_RESOLVE_OPT)
#undef BE_RESOLVE_OPT
	if (missing) {
		dlclose(drv_handle);
		drv_handle = NULL;
		return -1;
	}
	LOG_DEBUG("backend", "driver %s loaded", lib);
	return 0;
}

void be_driver_unload(void)
{
	if (drv_handle)
		dlclose(drv_handle);
	drv_handle = NULL;
}

void be_driver_thread_relaxed(void)
{
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (be_drv.cuThreadExchangeStreamCaptureMode)
		be_drv.cuThreadExchangeStreamCaptureMode(&m);
}

const char *be_driver_error_name(CUresult r)
{
	/* One buffer per thread for codes the driver has no name for. */
	static _Thread_local char buf[32];
	const char *name = NULL;

	if (be_drv.cuGetErrorName && be_drv.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", (int)r);
	return buf;
}

const char *be_errname(int status) { return be_driver_error_name((CUresult)status); }
